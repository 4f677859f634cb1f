// One exchange: its rates with a chart, bindings where it is the source and
// where it is the destination (add, remove), publish, delete.
import { h, replace, errorBox, facts, loading, panel } from './dom.js';
import { get, del } from './http.js';
import { rate } from './format.js';
import { createChart, ratesFromSamples, COLORS } from './chart.js';
import { features } from './objects.js';
import { bindingsTable, bindingForm, ringTable } from './bindings.js';
import { publishForm } from './messages.js';
import { confirmAction, runAction, formPanel } from './ui.js';

const enc = encodeURIComponent;
const WINDOW = '?msg_rates_age=600&msg_rates_incr=5';

export async function render(el, [vhost, name]) {
  const base = `/api/exchanges/${enc(vhost)}/${enc(name || 'amq.default')}`;
  const display = name === '' ? '(AMQP default)' : name;
  const head = h('div', { class: 'page-head' });
  const errorArea = h('div');
  const chart = createChart('Message rates', [{ label: 'In', color: COLORS.blue }, { label: 'Out', color: COLORS.green }], { unit: '/s', format: rate });
  const details = h('div', {}, loading());
  const asSource = h('div', {}, loading());
  const asDest = h('div', {}, loading());
  const ring = h('div'); // the hash ring panel, for x-consistent-hash only
  const builtIn = name === '' || name.startsWith('amq.');

  async function refreshBindings() {
    if (name === '') {
      replace(asSource, h('p', { class: 'hint' }, 'The default exchange is bound to every queue by its name; those bindings cannot be changed.'));
      replace(asDest, h('p', { class: 'hint' }, 'Nothing can be bound to the default exchange.'));
      return;
    }
    try {
      const [src, dst] = await Promise.all([get(`${base}/bindings/source`), get(`${base}/bindings/destination`)]);
      replace(asSource, bindingsTable(src, { show: 'destination', onChange: refreshBindings, emptyText: 'This exchange routes to nothing yet.' }));
      replace(asDest, bindingsTable(dst, { show: 'source', onChange: refreshBindings, emptyText: 'No exchange routes to this one.' }));
    } catch (err) { replace(asSource, errorBox(err)); replace(asDest); }
  }

  const deleteBtn = h('button', {
    type: 'button', class: 'btn btn-danger', id: 'exchange-delete',
    onclick: async () => {
      if (!await confirmAction({ title: 'Delete this exchange?', message: `“${name}” and its bindings will be deleted.`, confirmLabel: 'Delete exchange' })) return;
      const ok = await runAction(deleteBtn, () => del(base).then(() => true), `Exchange “${name}” deleted`);
      if (ok) location.hash = '#/exchanges';
    },
  }, 'Delete');

  replace(el, head, errorArea,
    h('div', { class: 'grid-2' }, h('section', { class: 'panel', id: 'exchange-chart' }, chart.el), h('section', { class: 'panel' }, h('h2', {}, 'Details'), details)),
    h('section', { class: 'panel', id: 'bindings-source' }, h('h2', {}, 'Bindings from this exchange'), asSource,
      name === '' ? null : [h('h3', { class: 'subhead' }, 'Add a binding from this exchange'),
        bindingForm({ vhost, fixed: { side: 'source', type: 'exchange', name }, onChange: refreshBindings })]),
    ring,
    h('section', { class: 'panel', id: 'bindings-destination' }, h('h2', {}, 'Bindings to this exchange'), asDest),
    formPanel('Publish a message', publishForm(vhost, name), false),
    builtIn ? null : panel('Delete', h('div', { class: 'form-actions' }, deleteBtn)));

  async function refresh() {
    let x;
    try { x = await get(base + WINDOW); replace(errorArea); } catch (err) { replace(errorArea, errorBox(err)); return; }
    replace(head, h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '#/exchanges' }, 'Exchanges'), ` / ${vhost}`),
      h('h1', { class: 'name-text', id: 'exchange-name' }, display), h('div', { class: 'sub' }, `${x.type} exchange `, features(x))));
    const st = x.message_stats || {};
    chart.update([ratesFromSamples(st.publish_in_details?.samples), ratesFromSamples(st.publish_out_details?.samples)],
      [st.publish_in_details?.rate, st.publish_out_details?.rate]);
    const args = x.arguments || {};
    replace(details, facts([
      ['Type', x.type], ['Durable', x.durable ? 'yes' : 'no'], ['Auto delete', x.auto_delete ? 'yes' : 'no'], ['Internal', x.internal ? 'yes' : 'no'],
      ['Arguments', Object.keys(args).length ? h('span', { class: 'mono' }, JSON.stringify(args)) : 'none'],
      ['Policy', x.policy || 'none'],
      // x-delayed-message: the messages it holds until their delay is over
      ...(x.messages_delayed !== undefined ? [['Delayed messages', h('span', { id: 'exchange-delayed' }, String(x.messages_delayed))]] : []),
      ['Rate in', rate(st.publish_in_details?.rate)], ['Rate out', rate(st.publish_out_details?.rate)],
    ]));
    if (x.type !== 'x-consistent-hash') return;
    let body;
    try { body = ringTable(await get(`${base}/ring`)); } catch (err) { body = errorBox(err); }
    replace(ring, h('section', { class: 'panel', id: 'exchange-ring-panel' }, h('h2', {}, 'Hash ring'), body));
  }
  await refresh();
  await refreshBindings();
  return { refresh: async () => { await refresh(); await refreshBindings(); }, title: display };
}
