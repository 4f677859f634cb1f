// Overview: alarms first, then totals, live charts of queued messages and
// message rates over the last ten minutes (the API's samples, as many as
// the broker has had time to take), and the
// node's facts. /api/nodes needs the monitoring tag; without it the node
// panel says so instead of failing. On a Warren cluster's leader (its
// nodes have a cluster_role) a Cluster panel follows, from /api/cluster:
// leader, epoch, the in-sync replicas against min_isr, whether confirms
// are held, and each node's role, ISR membership and lag; the Node panel
// keeps this node's facts (the others' are not known here).
import { h, replace, errorBox, facts, icon, badge, loading, cards } from './dom.js';
import { get, query, ApiError } from './http.js';
import { num, rate, bytes, duration } from './format.js';
import { createChart, ratesFromSamples, levelsFromSamples, COLORS } from './chart.js';
import { session, canMonitor } from './session.js';

const WINDOW = { lengths_age: 600, lengths_incr: 5, msg_rates_age: 600, msg_rates_incr: 5 };

export const RATE_SERIES = [
  ['publish', 'Publish', COLORS.blue],
  ['confirm', 'Confirm', COLORS.sky],
  ['deliver_get', 'Deliver / get', COLORS.green],
  ['redeliver', 'Redeliver', COLORS.orange],
  ['ack', 'Ack', COLORS.purple],
  ['unroutable', 'Unroutable', COLORS.vermillion],
];

// The rate series' current rates (the tiles' numbers) from message_stats.
function rateNow(stats) {
  const s = stats || {};
  return RATE_SERIES.map(([key]) => (key !== 'unroutable' ? s[`${key}_details`]?.rate
    : (s.return_unroutable_details?.rate ?? 0) + (s.drop_unroutable_details?.rate ?? 0)));
}

// The rate series' points from message_stats; unroutable adds returned and
// dropped unroutable messages.
export function rateData(stats) {
  const s = stats || {};
  return RATE_SERIES.map(([key]) => {
    if (key !== 'unroutable') return ratesFromSamples(s[`${key}_details`]?.samples);
    const a = ratesFromSamples(s.return_unroutable_details?.samples);
    const b = ratesFromSamples(s.drop_unroutable_details?.samples);
    return a.length >= b.length ? a.map((p, i) => ({ t: p.t, v: p.v + (b[i]?.v || 0) })) : b;
  });
}

function tile(label, value, unit, href) {
  const v = h('span', { class: 'value' }, value, unit ? h('span', { class: 'unit' }, unit) : null);
  return h('div', { class: 'tile' }, h('span', { class: 'label' }, label), href ? h('a', { href }, v) : v);
}

function meter(used, limit, fmt) {
  if (used === undefined) return '–';
  const pct = limit ? Math.min(100, (used / limit) * 100) : 0;
  const bar = h('span');
  bar.style.width = `${pct}%`;
  return h('div', { class: 'meter' }, h('span', { class: 'mono' }, `${fmt(used)}${limit ? ` of ${fmt(limit)}` : ''}`),
    limit ? h('div', { class: ['meter-bar', pct > 80 && 'high'], role: 'meter', 'aria-valuenow': Math.round(pct), 'aria-valuemin': 0, 'aria-valuemax': 100, 'aria-label': `${Math.round(pct)}%` }, bar) : null);
}

function alarmsOf(nodes) {
  const out = [];
  for (const n of nodes || []) {
    if (n.mem_alarm) out.push(`Memory alarm on ${n.name}: ${bytes(n.mem_used)} used, limit ${bytes(n.mem_limit)}. Publishers are blocked.`);
    if (n.disk_free_alarm) out.push(`Disk alarm on ${n.name}: ${bytes(n.disk_free)} free, limit ${bytes(n.disk_free_limit)}. Publishers are blocked.`);
    if (n.running === false) out.push(`Node ${n.name} is not running.`);
  }
  return out;
}

// Warren's cluster: its facts, then one row per node.
function clusterView(st) {
  const held = st.confirms_held;
  return [
    facts([
      ['Cluster', st.cluster_name],
      ['Leader', st.leader ? h('span', { class: 'mono' }, st.leader) : badge('alarm', 'none', 'alert')],
      ['Epoch', num(st.epoch)],
      ['In-sync replicas', `${num(st.isr_size)} (min ${num(st.min_isr)})`],
      ['Confirms', held ? badge('alarm', 'held: the ISR is below min_isr', 'alert')
        : held === false ? badge('ok', 'flowing', 'check') : '–'],
    ]),
    h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple', id: 'cluster-nodes' },
      h('thead', {}, h('tr', {}, ['Node', 'Role', 'In sync', 'Alive', 'Acked sequence', 'Lag', 'Lag time']
        .map((t) => h('th', { class: ['Acked sequence', 'Lag', 'Lag time'].includes(t) ? 'num' : null }, t)))),
      h('tbody', {}, (st.nodes || []).map((n) => h('tr', {},
        h('td', { class: 'mono' }, n.name),
        h('td', {}, n.role === 'leader' ? badge('ok', 'leader', 'check') : n.role),
        h('td', {}, n.in_sync ? badge('ok', 'in sync', 'check') : badge('alarm', 'not in sync', 'alert')),
        h('td', {}, n.alive ? 'yes' : badge('alarm', 'down', 'alert')),
        h('td', { class: 'num' }, num(n.acked_sequence)),
        h('td', { class: 'num' }, bytes(n.lag_bytes)),
        h('td', { class: 'num' }, duration(n.lag_ms)))))))),
  ];
}

// Warren-specific node facts (journal) are shown when the API has them.
function nodeFacts(n) {
  const journal = n.journal_bytes ?? n.journal_size ?? n.journal?.bytes;
  return facts([
    ['Node', h('span', { class: 'mono' }, n.name)],
    ['Uptime', duration(n.uptime)],
    ['Memory', meter(n.mem_used, n.mem_limit, bytes)],
    ['File descriptors', meter(n.fd_used, n.fd_total, num)],
    n.sockets_used !== undefined ? ['Sockets', meter(n.sockets_used, n.sockets_total, num)] : null,
    ['Disk free', n.disk_free !== undefined ? `${bytes(n.disk_free)} (limit ${bytes(n.disk_free_limit)})` : '–'],
    journal !== undefined ? ['Journal size', bytes(journal)] : null,
    n.processors ? ['Processors', num(n.processors)] : null,
    ['Status', n.running === false ? badge('alarm', 'not running', 'alert')
      : [n.mem_alarm ? badge('alarm', 'memory alarm', 'alert') : null, n.disk_free_alarm ? badge('alarm', 'disk alarm', 'alert') : null,
        !n.mem_alarm && !n.disk_free_alarm ? badge('ok', 'running', 'check') : null]],
  ]);
}

export async function render(el) {
  const alarmArea = h('div', { id: 'alarms' });
  const tiles = h('div', { class: 'tiles' }, loading());
  const lengths = createChart('Queued messages', [
    { label: 'Ready', color: COLORS.blue }, { label: 'Unacked', color: COLORS.orange }, { label: 'Total', color: COLORS.black }],
  { format: num });
  const rates = createChart('Message rates', RATE_SERIES.map(([, label, color]) => ({ label, color })), { unit: '/s', format: rate });
  const nodeArea = h('div', {}, loading());
  const listenersArea = h('div');
  const clusterArea = h('div'); // a panel on a cluster's leader only
  const errorArea = h('div');
  const scope = session.vhost ? `Virtual host ${session.vhost}` : 'All virtual hosts';
  replace(el,
    h('div', { class: 'page-head' }, h('div', {}, h('h1', {}, 'Overview'), h('span', { class: 'sub' }, scope))),
    alarmArea, errorArea, tiles,
    h('div', { class: 'grid-2' }, h('section', { class: 'panel', id: 'chart-lengths' }, lengths.el), h('section', { class: 'panel', id: 'chart-rates' }, rates.el)),
    h('div', { class: 'grid-2' },
      h('section', { class: 'panel', id: 'node' }, h('h2', {}, icon('gauge'), 'Node'), nodeArea),
      h('section', { class: 'panel', id: 'listeners' }, h('h2', {}, icon('plug'), 'Listeners and versions'), listenersArea)),
    clusterArea);

  // With a vhost chosen, the totals and charts are that vhost's. They come
  // from the vhost list (GET /api/vhosts/V is for administrators only).
  async function fetchStats() {
    if (!session.vhost) return get(`/api/overview${query(WINDOW)}`);
    const list = await get(`/api/vhosts${query(WINDOW)}`);
    const v = list.find((x) => x.name === session.vhost);
    if (!v) throw new ApiError(404, 'not_found', `Virtual host “${session.vhost}” is gone or not yours.`);
    return v;
  }

  async function refresh() {
    let ov;
    try {
      ov = await fetchStats();
      replace(errorArea);
    } catch (err) {
      replace(errorArea, errorBox(err));
      replace(tiles);
      await refreshNodes();
      return;
    }
    const qt = session.vhost ? ov : (ov.queue_totals || {});
    const ot = ov.object_totals || {};
    const st = ov.message_stats || {};
    replace(tiles,
      tile('Ready', num(qt.messages_ready), 'msgs', '#/queues'),
      tile('Unacked', num(qt.messages_unacknowledged), 'msgs', '#/queues'),
      tile('Total', num(qt.messages), 'msgs', '#/queues'),
      tile('Publish', rate(st.publish_details?.rate).replace('/s', ''), 'msg/s'),
      tile('Deliver', rate(st.deliver_get_details?.rate).replace('/s', ''), 'msg/s'),
      session.vhost ? null : [
        tile('Connections', num(ot.connections), null, '#/connections'),
        tile('Channels', num(ot.channels), null, '#/channels'),
        tile('Exchanges', num(ot.exchanges), null, '#/exchanges'),
        tile('Queues', num(ot.queues), null, '#/queues'),
        tile('Consumers', num(ot.consumers), null, '#/consumers')]);
    lengths.update([
      levelsFromSamples(qt.messages_ready_details?.samples),
      levelsFromSamples(qt.messages_unacknowledged_details?.samples),
      levelsFromSamples(qt.messages_details?.samples)],
    [qt.messages_ready, qt.messages_unacknowledged, qt.messages]);
    rates.update(rateData(st), rateNow(st));
    if (!session.vhost) renderListeners(ov);
    else if (!listenersArea.firstChild) {
      get('/api/overview?columns=product_name,product_version,rabbitmq_version,management_version,cluster_name,listeners')
        .then(renderListeners, (err) => replace(listenersArea, errorBox(err)));
    }
    await refreshNodes();
  }

  function renderListeners(ov) {
    replace(listenersArea, facts([
      ['Product', `${ov.product_name || 'Warren'} ${ov.product_version || ov.rabbitmq_version || ''}`],
      ['Management API', ov.management_version || '–'],
      ov.cluster_name ? ['Cluster', ov.cluster_name] : null,
      ...(ov.listeners || []).map((l) => [l.protocol, h('span', { class: 'mono' }, `${l.ip_address}:${l.port}`)]),
    ]));
  }

  async function refreshNodes() {
    if (!canMonitor()) {
      replace(nodeArea, h('p', { class: 'hint' }, 'Node facts need the monitoring or administrator tag.'));
      return;
    }
    try {
      const nodes = await get('/api/nodes');
      const alarms = alarmsOf(nodes);
      replace(alarmArea, alarms.length
        ? h('div', { class: 'alarm-banner', role: 'alert' }, icon('alert'), h('div', {}, h('div', {}, 'ALARM'), alarms.map((a) => h('div', {}, a))))
        : h('div', { class: 'ok-banner' }, icon('check'), 'No alarms'));
      const clustered = nodes.some((n) => n.cluster_role);
      replace(nodeArea, nodes.filter((n) => !clustered || n.uptime !== undefined).map(nodeFacts));
      if (clustered) await refreshCluster();
    } catch (err) {
      replace(nodeArea, errorBox(err));
    }
  }

  async function refreshCluster() {
    let body;
    try {
      body = clusterView(await get('/api/cluster'));
    } catch (err) {
      body = errorBox(err);
    }
    replace(clusterArea, h('section', { class: 'panel', id: 'cluster' }, h('h2', {}, icon('vhost'), 'Cluster'), body));
  }

  await refresh();
  return { refresh, title: 'Overview' };
}
