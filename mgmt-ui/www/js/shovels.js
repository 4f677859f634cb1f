// Shovels: GET /api/shovels (of the chosen vhost, or all) -- each shovel's
// state (with the reason when terminated), source, destination and its
// counts; restart and delete (DELETE /api/shovels/vhost/{vh}/{name}[/restart])
// for the monitoring users the API lets do them.
import { h, replace } from './dom.js';
import { del } from './http.js';
import { createTable } from './table.js';
import { confirmAction, runAction } from './ui.js';
import { session } from './session.js';

const enc = encodeURIComponent;

function end(r, side) {
  const p = side === 'src' ? 'src' : 'dest';
  const what = r[`${p}_queue`] !== undefined ? `queue ${r[`${p}_queue`]}`
    : r[`${p}_exchange`] !== undefined ? `exchange ${r[`${p}_exchange`]}`
      + (r[`${p}_exchange_key`] !== undefined ? ` (key ${r[`${p}_exchange_key`]})` : '') : '';
  return h('span', {}, h('span', { class: 'name-text' }, r[`${p}_uri`] || ''), what ? h('br') : null, what);
}

function state(r) {
  return h('span', { class: `shovel-state shovel-${r.state}`, title: r.reason || '' }, r.state,
    r.reason ? h('span', { class: 'muted' }, ` — ${r.reason}`) : null);
}

function actions(r, refresh) {
  const path = `/api/shovels/vhost/${enc(r.vhost)}/${enc(r.name)}`;
  const restart = h('button', {
    type: 'button', class: 'btn btn-small', 'data-shovel': r.name,
    onclick: (e) => runAction(e.target, () => del(`${path}/restart`).then(() => { refresh(); return true; }),
      `Shovel “${r.name}” restarted`),
  }, 'Restart');
  const remove = h('button', {
    type: 'button', class: 'btn btn-small btn-danger', 'data-shovel': r.name,
    onclick: async (e) => {
      const ok = await confirmAction({ title: 'Delete this shovel?', confirmLabel: 'Delete shovel',
        message: `Its parameter goes; messages it moved stay where they are.` });
      if (ok && await runAction(e.target, () => del(path).then(() => true), `Shovel “${r.name}” deleted`)) refresh();
    },
  }, 'Delete');
  return h('span', { class: 'row-actions' }, restart, ' ', remove);
}

export async function render(el) {
  let table = null;
  const refresh = () => table && table.refresh();
  const cols = [
    { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => h('span', { class: 'name-text' }, r.name) },
    { key: 'vhost', label: 'Virtual host', sort: 'vhost', initial: false },
    { key: 'state', label: 'State', sort: 'state', render: state },
    { key: 'source', label: 'Source', render: (r) => end(r, 'src') },
    { key: 'destination', label: 'Destination', render: (r) => end(r, 'dest') },
    { key: 'forwarded', label: 'Forwarded', sort: 'forwarded', num: true },
    { key: 'acked', label: 'Acked', sort: 'acked', num: true },
    { key: 'unconfirmed', label: 'Unconfirmed', sort: 'unconfirmed', num: true, initial: false },
    { key: 'restarts', label: 'Restarts', sort: 'restarts', num: true, initial: false },
    { key: 'timestamp', label: 'Since', initial: false },
    { key: 'actions', label: '', always: true, render: (r) => actions(r, refresh) },
  ];
  table = createTable({
    id: 'shovels', columns: cols, emptyText: 'No shovels.',
    url: () => (session.vhost ? `/api/shovels/${enc(session.vhost)}` : '/api/shovels'),
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Shovels')), table.el);
  return { refresh: table.refresh, title: 'Shovels' };
}
