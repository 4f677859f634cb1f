// Bindings: a table with unbind buttons and the form that adds one, for the
// queue page (bindings to it) and the exchange page (both directions).
import { h, replace, field, select, empty, cards } from './dom.js';
import { post, del, get } from './http.js';
import { argsEditor, confirmAction, runAction } from './ui.js';
import { exchangeLink, queueLink } from './objects.js';

const enc = encodeURIComponent;

function endpoint(vhost, type, name) {
  return type === 'queue' ? queueLink(vhost, name) : exchangeLink(vhost, name);
}

// ringTable(ring) -> element: an x-consistent-hash exchange's buckets per
// destination, from GET /api/exchanges/{vhost}/{name}/ring.
export function ringTable(ring) {
  if (!ring.ring.length) return empty('No destination is in the ring yet: bind one with its weight as the routing key.');
  return h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple', id: 'exchange-ring' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Destination'), h('th', {}, 'Buckets'), h('th', {}, 'Weight'), h('th', {}, 'Share'))),
    h('tbody', {}, ring.ring.map((r) => h('tr', {},
      h('td', {}, endpoint(ring.vhost, r.destination_type, r.destination), h('span', { class: 'hint' }, ` ${r.destination_type}`)),
      h('td', { class: 'mono' }, `${r.first_bucket}–${r.last_bucket}`), h('td', { class: 'mono' }, String(r.weight)),
      h('td', { class: 'mono' }, `${(100 * r.weight / ring.buckets).toFixed(1)}%`)))))));
}

// bindingsTable(rows, {show: 'source' | 'destination', onChange}) -> element.
export function bindingsTable(rows, opts) {
  if (!rows.length) return empty(opts.emptyText || 'No bindings.');
  return h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple bindings' },
    h('thead', {}, h('tr', {}, h('th', {}, opts.show === 'source' ? 'From' : 'To'), h('th', {}, 'Routing key'), h('th', {}, 'Arguments'), h('th', {}, h('span', { class: 'sr' }, 'Actions')))),
    h('tbody', {}, rows.map((b) => {
      const isDefault = b.source === '';
      const other = opts.show === 'source'
        ? (isDefault ? h('span', { class: 'hint' }, '(AMQP default)') : exchangeLink(b.vhost, b.source))
        : [endpoint(b.vhost, b.destination_type, b.destination), h('span', { class: 'hint' }, ` ${b.destination_type}`)];
      const unbind = isDefault ? h('span', { class: 'hint' }, 'implicit') : h('button', {
        type: 'button', class: 'btn btn-small btn-danger',
        onclick: async (e) => {
          const what = `${b.source} → ${b.destination}`;
          if (!await confirmAction({ title: 'Remove this binding?', message: `${what} with routing key “${b.routing_key}”.`, confirmLabel: 'Unbind' })) return;
          const kind = b.destination_type === 'queue' ? 'q' : 'e';
          const ok = await runAction(e.target, () => del(`/api/bindings/${enc(b.vhost)}/e/${enc(b.source)}/${kind}/${enc(b.destination)}/${enc(b.properties_key)}`).then(() => true), 'Binding removed');
          if (ok) opts.onChange();
        },
      }, 'Unbind');
      return h('tr', {}, h('td', {}, other), h('td', { class: 'mono' }, b.routing_key),
        h('td', { class: 'mono' }, Object.keys(b.arguments || {}).length ? JSON.stringify(b.arguments) : ''), h('td', {}, unbind));
    })))));
}

// bindingForm({vhost, fixed: {side: 'source'|'destination', type, name}, onChange}):
// the other end is typed, with the vhost's exchanges (or queues) suggested.
export function bindingForm(opts) {
  const { vhost, fixed } = opts;
  const listId = `bind-list-${Math.random().toString(36).slice(2)}`;
  const datalist = h('datalist', { id: listId });
  const otherType = fixed.side === 'destination' ? null : select([['queue', 'To queue'], ['exchange', 'To exchange']], 'queue', { id: 'bind-type', 'aria-label': 'Destination type' });
  const other = h('input', { type: 'text', id: 'bind-other', list: listId, required: true, autocomplete: 'off' });
  const key = h('input', { type: 'text', id: 'bind-key', autocomplete: 'off' });
  const args = argsEditor([{ key: 'x-match', type: 'string', hint: 'headers exchanges: all or any' }]);
  const err = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'bind-submit' }, 'Bind');

  async function suggest() {
    const what = fixed.side === 'destination' || !otherType || otherType.value === 'exchange' ? 'exchanges' : 'queues';
    try {
      const list = await get(`/api/${what}/${enc(vhost)}?columns=name&page=1&page_size=500`);
      const items = Array.isArray(list) ? list : list.items;
      replace(datalist, items.filter((x) => x.name !== '').map((x) => h('option', { value: x.name })));
    } catch (e) { replace(datalist); }
  }
  if (otherType) otherType.addEventListener('change', suggest);
  suggest();

  const form = h('form', {
    class: 'binding-form',
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      let argv;
      try { argv = args.value(); } catch (x) { err.textContent = x.message; return; }
      let path;
      if (fixed.side === 'destination') {
        path = `/api/bindings/${enc(vhost)}/e/${enc(other.value)}/${fixed.type === 'queue' ? 'q' : 'e'}/${enc(fixed.name)}`;
      } else {
        path = `/api/bindings/${enc(vhost)}/e/${enc(fixed.name)}/${otherType.value === 'queue' ? 'q' : 'e'}/${enc(other.value)}`;
      }
      const ok = await runAction(submit, () => post(path, { routing_key: key.value, arguments: argv }).then(() => true), 'Binding added');
      if (ok) { other.value = ''; key.value = ''; args.reset(); opts.onChange(); }
    },
  },
  h('div', { class: 'form-grid' },
    otherType ? field('Destination type', otherType) : null,
    field(fixed.side === 'destination' ? 'From exchange' : 'Destination name', other), datalist,
    field('Routing key', key),
    h('div', { class: 'field wide' }, h('label', {}, 'Arguments'), args.el)),
  h('div', { class: 'form-actions' }, submit, err));
  return form;
}
