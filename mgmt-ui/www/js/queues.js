// Queues: the server-paged table (counts, rates, consumers, the ages Warren
// adds) and the form to declare a queue.
import { h, replace } from './dom.js';
import { num, rate, duration, pick } from './format.js';
import { createTable } from './table.js';
import { queueLink, features, scoped, vhostColumn, declareForm, QUEUE_ARGS } from './objects.js';

const rateCol = (key, label, path) => ({
  key, label, num: true, sort: path, api: [path], initial: key !== 'redeliver', render: (r) => rate(pick(r, path)),
});

export const COLUMNS = [
  vhostColumn(),
  { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => queueLink(r.vhost, r.name, r.type) },
  { key: 'type', label: 'Type', sort: 'type' },
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

export async function render(el) {
  const table = createTable({
    id: 'queues', url: () => scoped('/api/queues'), columns: COLUMNS, apiAlways: ['name', 'vhost', 'type'],
    emptyText: 'No queues yet. Declare one below or from a client.',
  });
  replace(el,
    h('div', { class: 'page-head' }, h('h1', {}, 'Queues')),
    table.el,
    h('div', { class: 'stack' }),
    declareForm({
      kind: 'queue', idPrefix: 'q', knownArgs: QUEUE_ARGS, body: () => ({}), onDone: () => table.refresh(),
      flags: [['durable', 'Durable', true], ['auto_delete', 'Auto delete', false]],
    }));
  return { refresh: table.refresh, title: 'Queues' };
}
