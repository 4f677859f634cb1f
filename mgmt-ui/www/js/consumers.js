// Consumers: every consumer with its queue, channel, ack mode and prefetch,
// and a stream consumer's offset and lag (columns to choose).
import { h, replace, badge } from './dom.js';
import { num } from './format.js';
import { createTable } from './table.js';
import { queueLink, connectionLink, scoped, vhostColumn } from './objects.js';

const COLUMNS = [
  { key: 'queue.name', label: 'Queue', sort: 'queue.name', always: true, api: ['queue'], render: (r) => queueLink(r.queue.vhost, r.queue.name) },
  { ...vhostColumn(), key: 'queue.vhost', sort: 'queue.vhost', api: ['queue'] },
  { key: 'consumer_tag', label: 'Consumer tag', sort: 'consumer_tag', render: (r) => h('span', { class: 'mono name-text' }, r.consumer_tag) },
  { key: 'channel', label: 'Channel', api: ['channel_details'], render: (r) => (r.channel_details?.connection_name
    ? [connectionLink(r.channel_details.connection_name), h('span', { class: 'hint' }, ` (${r.channel_details.number})`)] : '–') },
  { key: 'ack_required', label: 'Ack required', sort: 'ack_required', render: (r) => (r.ack_required ? 'yes' : 'no') },
  { key: 'exclusive', label: 'Exclusive', sort: 'exclusive', render: (r) => (r.exclusive ? 'yes' : 'no') },
  { key: 'prefetch_count', label: 'Prefetch', sort: 'prefetch_count', num: true, render: (r) => num(r.prefetch_count) },
  { key: 'active', label: 'Active', sort: 'active', render: (r) => (r.active === false ? badge('muted', r.activity_status || 'waiting') : badge('ok', r.activity_status || 'up', 'check')) },
  { key: 'arguments', label: 'Arguments', initial: false, render: (r) => (Object.keys(r.arguments || {}).length ? JSON.stringify(r.arguments) : '') },
  // a stream's consumers: where each reads and what it has still to read
  { key: 'offset', label: 'Stream offset', sort: 'offset', num: true, initial: false, render: (r) => num(r.offset) },
  { key: 'offset_lag', label: 'Stream lag', sort: 'offset_lag', num: true, initial: false, render: (r) => num(r.offset_lag) },
];

export async function render(el) {
  const table = createTable({
    id: 'consumers', url: () => scoped('/api/consumers'), columns: COLUMNS, noColumns: true,
    localName: (r) => r.queue?.name ?? '', emptyText: 'No consumers.', sort: 'queue.name',
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Consumers')), table.el);
  return { refresh: table.refresh, title: 'Consumers' };
}
