// Channels: the server-paged table (mode, state, prefetch, unacked,
// unconfirmed, rates).
import { h, replace } from './dom.js';
import { rate, pick } from './format.js';
import { createTable } from './table.js';
import { connectionLink, scoped, vhostColumn, stateBadge } from './objects.js';

const rateCol = (key, label, path, initial = true) => ({ key, label, num: true, sort: path, api: [path], initial, render: (r) => rate(pick(r, path)) });

const COLUMNS = [
  { key: 'name', label: 'Channel', sort: 'name', always: true, api: ['name', 'connection_details'], render: (r) => [
    r.connection_details?.name ? connectionLink(r.connection_details.name) : r.name, h('span', { class: 'hint' }, ` (${r.number ?? ''})`)] },
  vhostColumn(),
  { key: 'user', label: 'User', sort: 'user' },
  { key: 'mode', label: 'Mode', api: ['confirm', 'transactional'], render: (r) => (r.confirm ? 'confirm' : r.transactional ? 'transactional' : '–') },
  { key: 'state', label: 'State', sort: 'state', render: (r) => stateBadge(r.state) },
  { key: 'messages_unconfirmed', label: 'Unconfirmed', sort: 'messages_unconfirmed', num: true },
  { key: 'prefetch_count', label: 'Prefetch', sort: 'prefetch_count', num: true },
  { key: 'messages_unacknowledged', label: 'Unacked', sort: 'messages_unacknowledged', num: true },
  { key: 'consumer_count', label: 'Consumers', sort: 'consumer_count', num: true, initial: false },
  rateCol('publish', 'Publish', 'message_stats.publish_details.rate'),
  rateCol('confirm', 'Confirm', 'message_stats.confirm_details.rate'),
  rateCol('deliver', 'Deliver / get', 'message_stats.deliver_get_details.rate'),
  rateCol('ack', 'Ack', 'message_stats.ack_details.rate'),
  rateCol('unroutable', 'Unroutable (drop)', 'message_stats.drop_unroutable_details.rate', false),
];

export async function render(el) {
  const table = createTable({
    id: 'channels', url: () => scoped('/api/channels'), columns: COLUMNS, apiAlways: ['name', 'vhost', 'number'],
    emptyText: 'No channels are open.',
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Channels')), table.el);
  return { refresh: table.refresh, title: 'Channels' };
}
