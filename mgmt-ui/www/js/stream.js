// One stream queue: its log (records, first / last / committed offset,
// segments, size on disk), its retention (x-max-age, x-max-length-bytes,
// the segment size; an argument wins over the policy, as the broker applies
// them), each consumer's offset and lag, its stream-protocol publishers,
// and a viewer that reads messages from an offset without consuming them
// (GET /api/streams/.../messages).
import { h, replace, errorBox, facts, badge, panel, empty, loading, cards, field } from './dom.js';
import { get, del } from './http.js';
import { num, bytes, rate } from './format.js';
import { features, connectionLink, stateBadge } from './objects.js';
import { messageView } from './messages.js';
import { confirmAction, runAction } from './ui.js';

const enc = encodeURIComponent;
const SEGMENT_DEFAULT = 500000000; // RabbitMQ's x-stream-max-segment-size-bytes default
const READ_MAX = 1000; // the viewer route's bound

function tile(label, value, unit, id) {
  return h('div', { class: 'tile', id }, h('span', { class: 'label' }, label),
    h('span', { class: 'value' }, value, unit ? h('span', { class: 'unit' }, unit) : null));
}

// An offset, or a dash while the stream has none (empty, nothing committed).
const offset = (v) => (v === null || v === undefined ? '–' : num(v));

// Where each retention setting comes from: the queue's argument, else the
// effective policy's key, else the default.
function retention(q) {
  const args = q.arguments || {};
  const pol = q.effective_policy_definition || {};
  const from = (arg, key, show, dflt) => {
    if (arg in args) return [show(args[arg]), ` (argument ${arg})`];
    if (key in pol) return [show(pol[key]), ` (policy ${q.policy || q.operator_policy || ''})`];
    return dflt === undefined ? ['none', ''] : [show(dflt), ' (default)'];
  };
  const row = (label, id, [value, source]) => [label, h('span', { id }, value, h('span', { class: 'hint' }, source))];
  return facts([
    row('Max age', 'stream-max-age', from('x-max-age', 'max-age', String)),
    row('Max size', 'stream-max-bytes', from('x-max-length-bytes', 'max-length-bytes', bytes)),
    row('Segment size', 'stream-segment-size', from('x-stream-max-segment-size-bytes', 'stream-max-segment-size-bytes', bytes, SEGMENT_DEFAULT)),
  ]);
}

function consumersView(q) {
  const list = q.consumer_details || [];
  if (!list.length) return empty('No consumers.');
  return h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple', id: 'stream-consumers' },
    h('thead', {}, h('tr', {}, ['Channel', 'Consumer tag', 'Offset', 'Lag', 'Prefetch', 'Active'].map((t) => h('th', { class: ['Offset', 'Lag', 'Prefetch'].includes(t) ? 'num' : null }, t)))),
    h('tbody', {}, list.map((c) => h('tr', { 'data-tag': c.consumer_tag },
      h('td', {}, c.channel_details?.connection_name ? connectionLink(c.channel_details.connection_name) : '–',
        h('span', { class: 'hint' }, ` (${c.channel_details?.number ?? '?'})`)),
      h('td', { class: 'mono name-text' }, c.consumer_tag),
      h('td', { class: 'num consumer-offset' }, offset(c.offset)),
      h('td', { class: 'num consumer-lag' }, c.offset_lag ? badge('warn', num(c.offset_lag)) : num(c.offset_lag)),
      h('td', { class: 'num' }, num(c.prefetch_count)),
      h('td', {}, c.active === false ? badge('muted', c.activity_status || 'waiting') : badge('ok', c.activity_status || 'up', 'check'))))))));
}

// Stream-protocol publishers (rabbitmq_stream_management's objects).
function publishersView(list) {
  if (!list.length) return empty('No publishers (stream protocol clients publishing here).');
  return h('div', { class: 'table-scroll' }, cards(h('table', { class: 'simple', id: 'stream-publishers' },
    h('thead', {}, h('tr', {}, ['Connection', 'Publisher', 'Reference', 'Published', 'Confirmed', 'Errored'].map((t) => h('th', { class: ['Published', 'Confirmed', 'Errored'].includes(t) ? 'num' : null }, t)))),
    h('tbody', {}, list.map((p) => h('tr', {},
      h('td', {}, p.connection_details?.name ? connectionLink(p.connection_details.name) : '–'),
      h('td', { class: 'num' }, num(p.publisher_id)), h('td', { class: 'mono name-text' }, p.reference || ''),
      h('td', { class: 'num' }, num(p.published)), h('td', { class: 'num' }, num(p.confirmed)),
      h('td', { class: 'num' }, num(p.errored))))))));
}

// The viewer: from an offset (the first one by default), up to READ_MAX
// messages, "Next" continues after the last one shown.
function viewer(base) {
  const from = h('input', { type: 'number', id: 'read-offset', min: '0', placeholder: 'first' });
  const count = h('input', { type: 'number', id: 'read-count', value: '10', min: '1', max: String(READ_MAX) });
  const results = h('div', { class: 'messages', id: 'read-results', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'read-submit' }, 'Read');
  const next = h('button', { type: 'button', class: 'btn', id: 'read-next', disabled: true }, 'Next');
  async function read(at) {
    const q = new URLSearchParams({ count: String(Math.min(READ_MAX, Number(count.value) || 10)), truncate: '50000' });
    if (at !== '' && at !== undefined) q.set('offset', String(at));
    const msgs = await runAction(submit, () => get(`${base}?${q}`));
    if (!msgs) return;
    replace(results, msgs.length ? msgs.map(messageView) : empty('Nothing at or after this offset yet.'));
    next.disabled = !msgs.length;
    next.dataset.offset = msgs.length ? String(msgs[msgs.length - 1].offset + 1) : '';
  }
  next.addEventListener('click', () => { from.value = next.dataset.offset; read(next.dataset.offset); });
  return h('form', { id: 'stream-viewer', onsubmit: (e) => { e.preventDefault(); read(from.value); } },
    h('p', { class: 'hint' }, 'Reads messages from an offset (empty: the first) without consuming them: nothing is taken from the stream and no consumer moves.'),
    h('div', { class: 'form-grid' }, field('From offset', from), field('Messages', count)),
    h('div', { class: 'form-actions' }, submit, next), results);
}

export async function render(el, [vhost, name]) {
  const base = `/api/queues/${enc(vhost)}/${enc(name)}`;
  const head = h('div', { class: 'page-head' });
  const tiles = h('div', { class: 'tiles', id: 'stream-tiles' }, loading());
  const errorArea = h('div');
  const keep = h('div', { id: 'stream-retention' });
  const details = h('div');
  const consumers = h('div', {}, loading());
  const publishers = h('div', { id: 'stream-publishers-panel' }, loading());

  const deleteBtn = h('button', {
    type: 'button', class: 'btn btn-danger', id: 'stream-delete',
    onclick: async () => {
      if (!await confirmAction({ title: 'Delete this stream?', message: `“${name}” and every message in it will be deleted.`, confirmLabel: 'Delete stream' })) return;
      const ok = await runAction(deleteBtn, () => del(base).then(() => true), `Stream “${name}” deleted`);
      if (ok) location.hash = '#/queues';
    },
  }, 'Delete');

  replace(el, head, errorArea, tiles,
    h('div', { class: 'grid-2' },
      h('section', { class: 'panel', id: 'stream-keep' }, h('h2', {}, 'Retention'), keep),
      h('section', { class: 'panel', id: 'stream-details' }, h('h2', {}, 'Details'), details)),
    panel('Consumers', h('p', { class: 'hint' }, 'Each consumer reads at its own offset; its lag is what is committed and not yet read by it.'), consumers),
    panel('Publishers', publishers),
    panel('Read from an offset', viewer(`/api/streams/${enc(vhost)}/${enc(name)}/messages`)),
    h('section', { class: 'panel danger-zone' }, h('h2', {}, 'Delete'), h('div', { class: 'form-actions' }, deleteBtn)));

  async function refresh() {
    let q;
    try {
      q = await get(base);
      replace(errorArea);
    } catch (err) {
      replace(errorArea, errorBox(err));
      if (err.status === 404) replace(tiles);
      return;
    }
    replace(head,
      h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '#/queues' }, 'Queues'), ` / ${vhost}`),
        h('h1', { class: 'name-text', id: 'stream-name' }, name),
        h('div', { class: 'sub' }, badge('muted', 'stream'), ' ', features(q), ' ', stateBadge(q.state))),
      h('div', { class: 'actions' }, h('a', { class: 'btn', href: '#/queues' }, 'All queues')));
    replace(tiles,
      tile('Messages', num(q.messages), 'msgs', 'tile-messages'),
      tile('First offset', offset(q.first_offset), null, 'tile-first'),
      tile('Last offset', offset(q.last_offset), null, 'tile-last'),
      tile('Committed', offset(q.committed_offset), null, 'tile-committed'),
      tile('Size on disk', bytes(q.segment_bytes), null, 'tile-size'),
      tile('Segments', num(q.segments), null, 'tile-segments'),
      tile('Incoming', rate(q.message_stats?.publish_details?.rate).replace('/s', ''), 'msg/s', 'tile-incoming'),
      tile('Consumers', num(q.consumers), null, 'tile-consumers'));
    replace(keep, retention(q));
    replace(details, facts([
      ['Arguments', h('span', { class: 'mono' }, JSON.stringify(q.arguments || {}))],
      ['Policy', q.policy || 'none'], q.operator_policy ? ['Operator policy', q.operator_policy] : null,
      ['Chunks', num(q.chunks)], ['Leader', q.leader || q.node || '–'],
      ['Members', (q.members || []).join(', ') || '–'], ['Node', q.node || '–'],
    ]));
    replace(consumers, consumersView(q));
    try {
      replace(publishers, publishersView(await get(`/api/stream/publishers/${enc(vhost)}/${enc(name)}`)));
    } catch (err) { replace(publishers, errorBox(err)); }
  }

  await refresh();
  return { refresh, title: name };
}
