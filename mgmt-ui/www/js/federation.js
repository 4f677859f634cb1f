// Federation status: GET /api/federation-links (of the chosen vhost, or
// all) -- each link's upstream, the exchange or queue it federates, its
// status (an error's reason beside it), the upstream URI and since when;
// Restart (DELETE /api/federation-links/vhost/{vh}/{id}/{node}/restart) for
// the monitoring users and administrators the API lets see it.
import { h, replace } from './dom.js';
import { del } from './http.js';
import { createTable } from './table.js';
import { runAction } from './ui.js';
import { session } from './session.js';

const enc = encodeURIComponent;

function object(r) {
  const name = r.type === 'queue' ? r.queue : r.exchange;
  const up = r.type === 'queue' ? r.upstream_queue : r.upstream_exchange;
  return h('span', {}, h('span', { class: 'name-text' }, name),
    up !== name ? h('span', { class: 'muted' }, ` ← ${up}`) : null);
}

function status(r) {
  return h('span', { class: `link-state link-${r.status}`, title: r.error || '' },
    r.status, r.error ? h('span', { class: 'muted' }, ` — ${r.error}`) : null);
}

function restart(r, refresh) {
  const path = `/api/federation-links/vhost/${enc(r.vhost)}/${enc(r.id)}/${enc(r.node)}/restart`;
  return h('button', {
    type: 'button', class: 'btn btn-small', 'data-link': r.id,
    onclick: (e) => runAction(e.target, () => del(path).then(() => { refresh(); return true; }),
      `Link to “${r.upstream}” restarted`),
  }, 'Restart');
}

export async function render(el) {
  let table = null;
  const refresh = () => table && table.refresh();
  const cols = [
    { key: 'upstream', label: 'Upstream', sort: 'upstream', always: true, render: (r) => h('span', { class: 'name-text' }, r.upstream) },
    { key: 'vhost', label: 'Virtual host', sort: 'vhost', initial: false },
    { key: 'type', label: 'Type', sort: 'type' },
    { key: 'object', label: 'Exchange / queue', render: object },
    { key: 'status', label: 'State', sort: 'status', render: status },
    { key: 'uri', label: 'URI', render: (r) => h('span', { class: 'name-text' }, r.uri) },
    { key: 'local_connection', label: 'Connection', initial: false },
    { key: 'timestamp', label: 'Since', initial: false },
    { key: 'actions', label: '', always: true, render: (r) => restart(r, refresh) },
  ];
  table = createTable({
    id: 'federation', columns: cols, emptyText: 'No federation links.',
    localName: (r) => `${r.upstream} ${r.exchange || r.queue}`,
    url: () => (session.vhost ? `/api/federation-links/${enc(session.vhost)}` : '/api/federation-links'),
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Federation status')), table.el);
  return { refresh: table.refresh, title: 'Federation status' };
}
