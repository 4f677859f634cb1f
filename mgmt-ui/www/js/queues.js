// Queues: the server-paged table (counts, rates, consumers, the ages Warren
// adds) and the form to declare a queue.
import { h, replace, field } from './dom.js';
import { put } from './http.js';
import { num, rate, duration, pick } from './format.js';
import { createTable } from './table.js';
import { argsEditor, formPanel, runAction } from './ui.js';
import { queueLink, features, scoped, vhostColumn, vhostChooser, QUEUE_ARGS } from './objects.js';

const rateCol = (key, label, path) => ({
  key, label, num: true, sort: path, api: [path], initial: key !== 'redeliver', render: (r) => rate(pick(r, path)),
});

export const COLUMNS = [
  vhostColumn(),
  { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => queueLink(r.vhost, r.name) },
  { key: 'type', label: 'Type', sort: 'type', initial: false },
  { key: 'features', label: 'Features', api: ['durable', 'auto_delete', 'exclusive', 'arguments', 'policy', 'operator_policy'], render: features },
  { key: 'state', label: 'State', sort: 'state', initial: false },
  { key: 'messages_ready', label: 'Ready', sort: 'messages_ready', num: true },
  { key: 'messages_unacknowledged', label: 'Unacked', sort: 'messages_unacknowledged', num: true },
  { key: 'messages', label: 'Total', sort: 'messages', num: true },
  rateCol('publish', 'Incoming', 'message_stats.publish_details.rate'),
  rateCol('deliver', 'Deliver / get', 'message_stats.deliver_get_details.rate'),
  rateCol('ack', 'Ack', 'message_stats.ack_details.rate'),
  rateCol('redeliver', 'Redeliver', 'message_stats.redeliver_details.rate'),
  { key: 'consumers', label: 'Consumers', sort: 'consumers', num: true },
  { key: 'oldest_ready_age_ms', label: 'Oldest ready', sort: 'oldest_ready_age_ms', num: true, initial: false, render: (r) => duration(r.oldest_ready_age_ms) },
  { key: 'oldest_unacked_age_ms', label: 'Oldest unacked', sort: 'oldest_unacked_age_ms', num: true, initial: false, render: (r) => duration(r.oldest_unacked_age_ms) },
  { key: 'message_bytes', label: 'Bytes', sort: 'message_bytes', num: true, initial: false, render: (r) => num(r.message_bytes) },
];

function addForm(onDone) {
  const vhost = vhostChooser({ id: 'q-vhost' });
  const name = h('input', { type: 'text', id: 'q-name', required: true, autocomplete: 'off' });
  const durable = h('input', { type: 'checkbox', id: 'q-durable', checked: true });
  const autoDelete = h('input', { type: 'checkbox', id: 'q-autodelete' });
  const args = argsEditor(QUEUE_ARGS);
  const err = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'q-add' }, 'Add queue');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      let argv;
      try { argv = args.value(); } catch (x) { err.textContent = x.message; return; }
      const body = { durable: durable.checked, auto_delete: autoDelete.checked, arguments: argv };
      const ok = await runAction(submit, () => put(`/api/queues/${encodeURIComponent(vhost.value)}/${encodeURIComponent(name.value)}`, body).then(() => true),
        `Queue “${name.value}” declared`);
      if (ok) { onDone(vhost.value, name.value); name.value = ''; args.reset(); }
    },
  },
  h('div', { class: 'form-grid' },
    field('Virtual host', vhost), field('Name', name),
    h('div', { class: 'field' }, h('span', { class: 'hint' }, 'Options'),
      h('div', { class: 'checks' }, h('label', { class: 'check' }, durable, 'Durable'), h('label', { class: 'check' }, autoDelete, 'Auto delete'))),
    h('div', { class: 'field wide' }, h('label', {}, 'Arguments'), args.el)),
  h('div', { class: 'form-actions' }, submit, err));
  return formPanel('Add a new queue', form);
}

export async function render(el) {
  const table = createTable({
    id: 'queues', url: () => scoped('/api/queues'), columns: COLUMNS, apiAlways: ['name', 'vhost'],
    emptyText: 'No queues yet. Declare one below or from a client.', sort: 'name',
  });
  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Queues')),
    table.el,
    h('div', { class: 'stack' }),
    addForm(() => table.refresh()));
  return { refresh: table.refresh, title: 'Queues' };
}
