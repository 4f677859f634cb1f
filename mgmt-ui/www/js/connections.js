// Connections: the server-paged table (state with blocked shown by icon and
// word, rates, channels). Closing is on each connection's page.
import { h, replace } from './dom.js';
import { num, bytes, time } from './format.js';
import { createTable } from './table.js';
import { connectionLink, scoped, vhostColumn, stateBadge } from './objects.js';

export const COLUMNS = [
  { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => connectionLink(r.name) },
  vhostColumn(),
  { key: 'user', label: 'User', sort: 'user' },
  { key: 'state', label: 'State', sort: 'state', render: (r) => stateBadge(r.state) },
  { key: 'client', label: 'Client', api: ['client_properties'], render: (r) => {
    const p = r.client_properties || {};
    return [p.product, p.version].filter(Boolean).join(' ') || '–';
  } },
  { key: 'user_provided_name', label: 'Client name', sort: 'user_provided_name', initial: false },
  { key: 'protocol', label: 'Protocol', sort: 'protocol', initial: false },
  { key: 'ssl', label: 'TLS', sort: 'ssl', initial: false, render: (r) => (r.ssl ? 'yes' : 'no') },
  { key: 'channels', label: 'Channels', sort: 'channels', num: true },
  { key: 'recv', label: 'From client', sort: 'recv_oct_details.rate', api: ['recv_oct_details.rate'], num: true, render: (r) => `${bytes(r.recv_oct_details?.rate)}/s` },
  { key: 'send', label: 'To client', sort: 'send_oct_details.rate', api: ['send_oct_details.rate'], num: true, render: (r) => `${bytes(r.send_oct_details?.rate)}/s` },
  { key: 'connected_at', label: 'Connected', sort: 'connected_at', initial: false, render: (r) => time(r.connected_at) },
  { key: 'timeout', label: 'Heartbeat', sort: 'timeout', num: true, initial: false, render: (r) => (r.timeout ? `${num(r.timeout)} s` : 'off') },
];

export async function render(el) {
  const table = createTable({
    id: 'connections', url: () => scoped('/api/connections'), columns: COLUMNS, apiAlways: ['name', 'vhost'],
    emptyText: 'No client is connected.',
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Connections')), table.el);
  return { refresh: table.refresh, title: 'Connections' };
}
