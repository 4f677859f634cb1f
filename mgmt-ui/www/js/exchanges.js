// Exchanges: the server-paged table and the form to declare an exchange.
import { h, replace, select } from './dom.js';
import { rate, pick } from './format.js';
import { createTable } from './table.js';
import { exchangeLink, features, scoped, vhostColumn, declareForm, EXCHANGE_ARGS } from './objects.js';
import { session } from './session.js';

const rateCol = (key, label, path) => ({ key, label, num: true, sort: path, api: [path], render: (r) => rate(pick(r, path)) });

const COLUMNS = [
  vhostColumn(),
  { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => exchangeLink(r.vhost, r.name) },
  { key: 'type', label: 'Type', sort: 'type' },
  { key: 'features', label: 'Features', api: ['durable', 'auto_delete', 'internal', 'arguments', 'policy'], render: features },
  rateCol('in', 'Message rate in', 'message_stats.publish_in_details.rate'),
  rateCol('out', 'Message rate out', 'message_stats.publish_out_details.rate'),
];

function exchangeTypes() {
  const types = (session.overview?.exchange_types || []).map((t) => t.name);
  return types.length ? types : ['direct', 'fanout', 'topic', 'headers'];
}

export async function render(el) {
  const type = select(exchangeTypes(), 'direct', { id: 'x-type' });
  const table = createTable({
    id: 'exchanges', url: () => scoped('/api/exchanges'), columns: COLUMNS, apiAlways: ['name', 'vhost'],
    emptyText: 'No exchanges.',
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Exchanges')), table.el, h('div', { class: 'stack' }), declareForm({
    kind: 'exchange', idPrefix: 'x', knownArgs: EXCHANGE_ARGS, onDone: () => table.refresh(),
    flags: [['durable', 'Durable', true], ['auto_delete', 'Auto delete', false], ['internal', 'Internal', false]],
    extra: [['Type', type]], body: () => ({ type: type.value }),
  }));
  return { refresh: table.refresh, title: 'Exchanges' };
}
