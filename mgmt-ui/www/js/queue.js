// One queue: counts and rates with charts, where its messages are (in RAM,
// persistent, paged out: RabbitMQ's breakdown), the health facts Warren adds
// (oldest ready and unacked ages, delivery-count histogram), consumers and
// their capacity, bindings (add, remove), get, publish and move messages
// (redrive), purge and delete.
import { h, replace, errorBox, facts, icon, badge, panel, empty, loading, cards } from './dom.js';
import { get, del } from './http.js';
import { num, rate, bytes, duration, time } from './format.js';
import { createChart, ratesFromSamples, levelsFromSamples, COLORS } from './chart.js';
import { features, exchangeLink, connectionLink, stateBadge, streamHref } from './objects.js';
import { bindingsTable, bindingForm } from './bindings.js';
import { publishForm, getMessagesForm } from './messages.js';
import { confirmAction, runAction, formPanel } from './ui.js';
import { moveForm } from './move.js';

const WINDOW = '?lengths_age=600&lengths_incr=5&msg_rates_age=600&msg_rates_incr=5';
const enc = encodeURIComponent;
// Delivery-count bucket labels when the API gives a bare array of counts
// (Warren's buckets: 0, 1, 2, 3-4, 5-9, 10-19, 20-49, 50+).
const BUCKETS = ['0', '1', '2', '3–4', '5–9', '10–19', '20–49', '50+'];
const POISON_FLOOR = 5; // delivered this often without an ack: likely poison

// Normalises the histogram to [{label, floor, count}] from the shapes an
// API may use: an array of counts, an object label -> count, or an array
// of {label|range|from|min, count|messages}.
export function histogramOf(raw) {
  if (!raw) return null;
  const floorOf = (label) => parseInt(String(label), 10);
  if (Array.isArray(raw)) {
    return raw.map((x, i) => {
      if (typeof x === 'number') return { label: BUCKETS[i] ?? String(i), floor: floorOf(BUCKETS[i] ?? i), count: x };
      const label = x.label ?? x.range ?? (x.to !== undefined || x.max !== undefined
        ? `${x.from ?? x.min}–${x.to ?? x.max}` : `${x.from ?? x.min ?? x.floor ?? x.delivery_count}`);
      return { label: String(label), floor: floorOf(x.from ?? x.min ?? x.floor ?? x.delivery_count ?? label), count: x.count ?? x.messages ?? 0 };
    });
  }
  if (typeof raw === 'object') {
    return Object.entries(raw).map(([k, v]) => ({ label: k, floor: floorOf(k), count: Number(v) || 0 }));
  }
  return null;
}

function histogramView(hist) {
  if (!hist) return h('p', { class: 'hint' }, 'This broker does not report delivery counts.');
  const max = Math.max(1, ...hist.map((b) => b.count));
  const total = hist.reduce((n, b) => n + b.count, 0);
  if (!total) return h('p', { class: 'hint' }, 'No messages in the queue.');
  return h('div', { class: 'hist', role: 'table', 'aria-label': 'Messages by delivery count' }, hist.map((b) => {
    const poison = b.floor >= POISON_FLOOR && b.count > 0;
    const bar = h('div', { class: ['bar', poison && 'poison'] });
    bar.style.width = b.count ? `${Math.max(1, (b.count / max) * 100)}%` : '0';
    return [h('span', { role: 'rowheader' }, `${b.label} ×`), h('div', { role: 'cell' }, bar),
      h('span', { role: 'cell', class: 'num' }, num(b.count), poison ? [' ', badge('poison', 'possible poison', 'poison')] : null)];
  }));
}

function tile(label, value, unit) {
  return h('div', { class: 'tile' }, h('span', { class: 'label' }, label), h('span', { class: 'value' }, value, unit ? h('span', { class: 'unit' }, unit) : null));
}

// RabbitMQ's breakdown of the messages (and their body bytes): where they
// are. Absent fields (a broker that does not report them) show as a dash.
function messagesView(q) {
  const row = (label, n, b) => h('tr', {}, h('th', { scope: 'row' }, label), h('td', { class: 'num' }, num(n)), h('td', { class: 'num' }, bytes(b)));
  return h('table', { class: 'simple breakdown', id: 'queue-breakdown' },
    h('thead', {}, h('tr', {}, h('th', {}, ''), h('th', { class: 'num' }, 'Messages'), h('th', { class: 'num' }, 'Body bytes'))),
    h('tbody', {},
      row('Total', q.messages, q.message_bytes),
      row('Ready', q.messages_ready, q.message_bytes_ready),
      row('Unacked', q.messages_unacknowledged, q.message_bytes_unacknowledged),
      row('In RAM', q.messages_ram, q.message_bytes_ram),
      row('Persistent', q.messages_persistent, q.message_bytes_persistent),
      row('Paged out', q.messages_paged_out, q.message_bytes_paged_out)));
}

// "75%" of RabbitMQ's 0..1 consumer capacity; a dash without consumers.
function capacity(q) {
  const c = q.consumer_capacity ?? q.consumer_utilisation;
  if (typeof c !== 'number' || !q.consumers) return '–';
  return `${Math.round(c * 100)}%`;
}

function consumersView(q) {
  const list = q.consumer_details || [];
  if (!list.length) return empty('No consumers.');
  return h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple' },
    h('thead', {}, h('tr', {}, ['Channel', 'Consumer tag', 'Ack required', 'Exclusive', 'Prefetch', 'Unacked', 'Active', 'Arguments'].map((t) => h('th', { class: ['Prefetch', 'Unacked'].includes(t) ? 'num' : null }, t)))),
    h('tbody', {}, list.map((c) => h('tr', {},
      h('td', {}, c.channel_details?.connection_name ? connectionLink(c.channel_details.connection_name) : '–',
        h('span', { class: 'hint' }, ` (${c.channel_details?.number ?? '?'})`)),
      h('td', { class: 'mono name-text' }, c.consumer_tag),
      h('td', {}, c.ack_required ? 'yes' : 'no'), h('td', {}, c.exclusive ? 'yes' : 'no'),
      h('td', { class: 'num' }, num(c.prefetch_count)),
      h('td', { class: 'num' }, num(c.messages_unacknowledged ?? c.unacked)),
      h('td', {}, c.active === false ? badge('muted', c.activity_status || 'waiting') : badge('ok', c.activity_status || 'up', 'check')),
      h('td', { class: 'mono' }, Object.keys(c.arguments || {}).length ? JSON.stringify(c.arguments) : '')))))));
}

export async function render(el, [vhost, name]) {
  const base = `/api/queues/${enc(vhost)}/${enc(name)}`;
  const head = h('div', { class: 'page-head' });
  const tiles = h('div', { class: 'tiles', id: 'queue-tiles' }, loading());
  const errorArea = h('div');
  const lengths = createChart('Queued messages', [{ label: 'Ready', color: COLORS.blue }, { label: 'Unacked', color: COLORS.orange }], { format: num });
  const rates = createChart('Message rates', [
    { label: 'Publish', color: COLORS.blue }, { label: 'Deliver / get', color: COLORS.green },
    { label: 'Redeliver', color: COLORS.orange }, { label: 'Ack', color: COLORS.purple }], { unit: '/s', format: rate });
  const health = h('div');
  const details = h('div');
  const breakdown = h('div', { class: 'table-scroll' });
  const consumers = h('div', {}, loading());
  const capacityNote = h('p', { class: 'hint', id: 'queue-capacity' });
  const move = moveForm(vhost, name, () => refresh());
  const bindings = h('div', {}, loading());

  async function refreshBindings() {
    try {
      const rows = await get(`${base}/bindings`);
      replace(bindings, bindingsTable(rows, { show: 'source', onChange: refreshBindings, emptyText: 'No bindings.' }));
    } catch (err) { replace(bindings, errorBox(err)); }
  }

  const purgeBtn = h('button', {
    type: 'button', class: 'btn btn-danger', id: 'queue-purge',
    onclick: async () => {
      if (!await confirmAction({ title: 'Purge this queue?', message: `Every ready message in “${name}” will be deleted.`, confirmLabel: 'Purge' })) return;
      await runAction(purgeBtn, () => del(`${base}/contents`), 'Queue purged');
      refresh();
    },
  }, 'Purge');
  const deleteBtn = h('button', {
    type: 'button', class: 'btn btn-danger', id: 'queue-delete',
    onclick: async () => {
      if (!await confirmAction({ title: 'Delete this queue?', message: `“${name}” and all its messages will be deleted.`, confirmLabel: 'Delete queue' })) return;
      const ok = await runAction(deleteBtn, () => del(base).then(() => true), `Queue “${name}” deleted`);
      if (ok) location.hash = '#/queues';
    },
  }, 'Delete');

  replace(el, head, errorArea, tiles,
    h('div', { class: 'grid-2' }, h('section', { class: 'panel', id: 'queue-chart-lengths' }, lengths.el), h('section', { class: 'panel', id: 'queue-chart-rates' }, rates.el)),
    h('div', { class: 'grid-2' },
      h('section', { class: 'panel', id: 'queue-messages' }, h('h2', {}, 'Where the messages are'), breakdown),
      h('section', { class: 'panel', id: 'queue-details' }, h('h2', {}, 'Details'), details)),
    h('section', { class: 'panel', id: 'queue-health' }, h('h2', {}, icon('clock'), 'Health'), health),
    panel('Consumers', capacityNote, consumers),
    h('section', { class: 'panel', id: 'queue-bindings' }, h('h2', {}, 'Bindings'), bindings,
      h('h3', { class: 'subhead' }, 'Add a binding to this queue'),
      bindingForm({ vhost, fixed: { side: 'destination', type: 'queue', name }, onChange: refreshBindings })),
    formPanel('Get messages', getMessagesForm(vhost, name)),
    formPanel('Move messages', move.el),
    formPanel('Publish a message', h('div', {}, h('p', { class: 'hint' }, 'Published to the default exchange with this queue’s name as routing key.'), publishForm(vhost, '', name))),
    h('section', { class: 'panel danger-zone' }, h('h2', {}, 'Purge or delete'), h('div', { class: 'form-actions' }, purgeBtn, deleteBtn)));

  async function refresh() {
    let q;
    try {
      q = await get(base + WINDOW);
      replace(errorArea);
    } catch (err) {
      replace(errorArea, errorBox(err));
      if (err.status === 404) replace(tiles);
      return;
    }
    if (q.type === 'stream') { // a link that did not know: the stream's own page
      location.replace(streamHref(vhost, name));
      return;
    }
    const st = q.message_stats || {};
    replace(head,
      h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '#/queues' }, 'Queues'), ` / ${vhost}`),
        h('h1', { class: 'name-text', id: 'queue-name' }, name), h('div', { class: 'sub' }, features(q), ' ', stateBadge(q.state))),
      h('div', { class: 'actions' }, h('a', { class: 'btn', href: '#/queues' }, 'All queues')));
    replace(tiles,
      tile('Ready', num(q.messages_ready), 'msgs'), tile('Unacked', num(q.messages_unacknowledged), 'msgs'),
      tile('Total', num(q.messages), 'msgs'), tile('Bytes', bytes(q.message_bytes)),
      tile('Incoming', rate(st.publish_details?.rate).replace('/s', ''), 'msg/s'),
      tile('Deliver / get', rate(st.deliver_get_details?.rate).replace('/s', ''), 'msg/s'),
      tile('Ack', rate(st.ack_details?.rate).replace('/s', ''), 'msg/s'),
      tile('Consumers', num(q.consumers)));
    lengths.update([levelsFromSamples(q.messages_ready_details?.samples), levelsFromSamples(q.messages_unacknowledged_details?.samples)],
      [q.messages_ready, q.messages_unacknowledged]);
    const rateKeys = ['publish', 'deliver_get', 'redeliver', 'ack'];
    rates.update(rateKeys.map((k) => ratesFromSamples(st[`${k}_details`]?.samples)), rateKeys.map((k) => st[`${k}_details`]?.rate));
    replace(breakdown, messagesView(q));
    move.show(q.redrive);
    // Warren reports null when nothing is ready (unacked); absent = not reported.
    const readyAge = 'oldest_ready_age_ms' in q ? q.oldest_ready_age_ms : undefined;
    const unackedAge = 'oldest_unacked_age_ms' in q ? q.oldest_unacked_age_ms : undefined;
    replace(health,
      facts([
        ['Oldest ready message', readyAge === undefined ? h('span', { class: 'hint' }, 'not reported') : (readyAge === null || !q.messages_ready ? 'none ready' : duration(readyAge))],
        ['Oldest unacked delivery', unackedAge === undefined ? h('span', { class: 'hint' }, 'not reported') : (unackedAge === null || !q.messages_unacknowledged ? 'none unacked' : duration(unackedAge))],
        q.head_message_timestamp ? ['Head message timestamp', time(q.head_message_timestamp * 1000)] : null,
        // Warren's: held back by delayed retry, and what the limits did
        'messages_delayed' in q ? ['Delayed for retry', num(q.messages_delayed)] : null,
        'delivery_limit_dead_letters' in q ? ['Dead-lettered by delivery limit', num(q.delivery_limit_dead_letters)] : null,
        'consumer_timeouts' in q ? ['Consumer timeouts', num(q.consumer_timeouts)] : null,
      ]),
      h('h3', { class: 'subhead' }, 'Messages by times delivered'),
      histogramView(histogramOf(q.delivery_count_histogram ?? q.delivery_counts)));
    const args = q.arguments || {};
    replace(details, facts([
      ['Type', q.type || 'classic'], ['Durable', q.durable ? 'yes' : 'no'], ['Auto delete', q.auto_delete ? 'yes' : 'no'],
      ['Exclusive', q.exclusive ? 'yes' : 'no'],
      ['Arguments', Object.keys(args).length ? h('span', { class: 'mono' }, JSON.stringify(args)) : 'none'],
      ['Policy', q.policy || 'none'], q.operator_policy ? ['Operator policy', q.operator_policy] : null,
      q.effective_policy_definition && Object.keys(q.effective_policy_definition).length
        ? ['Effective policy', h('span', { class: 'mono' }, JSON.stringify(q.effective_policy_definition))] : null,
      q.arguments?.['x-dead-letter-exchange'] ? ['Dead-letters to', exchangeLink(vhost, q.arguments['x-dead-letter-exchange'])] : null,
      ['Memory', bytes(q.memory)], q.idle_since ? ['Idle since', time(q.idle_since)] : null, ['Node', q.node || '–'],
    ]));
    capacityNote.textContent = `Consumer capacity: ${capacity(q)} (the share of the time the queue could hand a message to a consumer at once)`;
    replace(consumers, consumersView(q));
  }

  await refresh();
  await refreshBindings();
  return { refresh: async () => { await refresh(); await refreshBindings(); }, title: name };
}
