// Virtual hosts: the table (messages and rates per vhost); administrators
// add and delete them (deleting asks for the name to be typed).
import { h, replace, field, select } from './dom.js';
import { put, del, get } from './http.js';
import { rate, pick } from './format.js';
import { createTable } from './table.js';
import { confirmAction, formPanel, runAction } from './ui.js';
import { session, isAdmin } from './session.js';

const enc = encodeURIComponent;

async function reloadVhostList() {
  try { session.vhosts = (await get('/api/vhosts?columns=name')).map((v) => v.name); } catch (e) { return; }
  document.dispatchEvent(new Event('warren:vhosts'));
}

function addForm(onDone) {
  const name = h('input', { type: 'text', id: 'vhost-name', required: true, autocomplete: 'off' });
  const description = h('input', { type: 'text', id: 'vhost-description' });
  const tags = h('input', { type: 'text', id: 'vhost-tags', placeholder: 'comma separated' });
  const qtype = select([['classic', 'classic'], ['quorum', 'quorum']], 'classic', { id: 'vhost-qtype' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'vhost-add' }, 'Add virtual host');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { description: description.value, tags: tags.value, default_queue_type: qtype.value };
      if (await runAction(submit, () => put(`/api/vhosts/${enc(name.value)}`, body).then(() => true), `Virtual host “${name.value}” added`)) {
        name.value = ''; description.value = ''; tags.value = '';
        await reloadVhostList();
        onDone();
      }
    },
  }, h('div', { class: 'form-grid' }, field('Name', name), field('Description', description), field('Tags', tags), field('Default queue type', qtype)),
  h('div', { class: 'form-actions' }, submit));
  return formPanel('Add a virtual host', form);
}

export async function render(el) {
  const cols = [
    { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => h('span', { class: 'name-text' }, r.name) },
    { key: 'description', label: 'Description', initial: false, api: ['metadata', 'description'], render: (r) => r.description ?? r.metadata?.description ?? '' },
    { key: 'messages_ready', label: 'Ready', sort: 'messages_ready', num: true },
    { key: 'messages_unacknowledged', label: 'Unacked', sort: 'messages_unacknowledged', num: true },
    { key: 'messages', label: 'Total', sort: 'messages', num: true },
    { key: 'publish', label: 'Publish', num: true, api: ['message_stats.publish_details.rate'], render: (r) => rate(pick(r, 'message_stats.publish_details.rate')) },
    { key: 'deliver', label: 'Deliver / get', num: true, api: ['message_stats.deliver_get_details.rate'], render: (r) => rate(pick(r, 'message_stats.deliver_get_details.rate')) },
  ];
  if (isAdmin()) {
    cols.push({ key: 'actions', label: '', always: true, render: (r) => h('button', {
      type: 'button', class: 'btn btn-small btn-danger', 'data-vhost': r.name,
      onclick: async (e) => {
        const ok = await confirmAction({
          title: 'Delete this virtual host?', typeToConfirm: r.name, confirmLabel: 'Delete virtual host',
          message: `Every exchange, queue, message, binding, policy and permission in “${r.name}” is deleted, and its connections are closed.`,
        });
        if (!ok) return;
        if (await runAction(e.target, () => del(`/api/vhosts/${enc(r.name)}`).then(() => true), `Virtual host “${r.name}” deleted`)) {
          await reloadVhostList();
          table.refresh();
        }
      },
    }, 'Delete') });
  }
  const table = createTable({ id: 'vhosts', url: () => '/api/vhosts', columns: cols, apiAlways: ['name'], emptyText: 'No virtual hosts.' });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Virtual hosts')), table.el, h('div', { class: 'stack' }),
    isAdmin() ? addForm(() => table.refresh()) : null);
  return { refresh: table.refresh, title: 'Virtual hosts' };
}
