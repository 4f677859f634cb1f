// One connection: its facts, client properties (as the client sent them,
// shown as text), its channels, and closing it with a reason (sent in the
// X-Reason header, which the broker puts in the 320 connection.close).
import { h, replace, errorBox, facts, loading, panel, empty, field, cards } from './dom.js';
import { get, del } from './http.js';
import { num, bytes, time } from './format.js';
import { stateBadge } from './objects.js';
import { confirmAction, runAction } from './ui.js';
import { session, isAdmin } from './session.js';

const enc = encodeURIComponent;

function propsTable(props) {
  const rows = Object.entries(props || {});
  if (!rows.length) return empty('The client sent no properties.');
  return facts(rows.map(([k, v]) => [k, h('span', { class: 'mono' }, typeof v === 'object' ? JSON.stringify(v) : String(v))]));
}

export async function render(el, [name]) {
  const base = `/api/connections/${enc(name)}`;
  const info = h('div', {}, loading());
  const props = h('div');
  const channels = h('div', {}, loading());
  const errorArea = h('div');
  const reason = h('input', { type: 'text', id: 'close-reason', value: 'Closed from the Warren console', autocomplete: 'off' });
  const closeBtn = h('button', {
    type: 'submit', class: 'btn btn-danger', id: 'close-connection',
  }, 'Close connection');
  const closeForm = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      if (!await confirmAction({ title: 'Close this connection?', message: `The client at “${name}” is disconnected with 320 CONNECTION_FORCED and the reason “${reason.value}”.`, confirmLabel: 'Close connection' })) return;
      const ok = await runAction(closeBtn, () => del(base, { headers: { 'X-Reason': reason.value } }).then(() => true), 'Connection closed');
      if (ok) location.hash = '#/connections';
    },
  }, h('div', { class: 'form-grid' }, field('Reason', reason)), h('div', { class: 'form-actions' }, closeBtn));

  let canClose = isAdmin();
  replace(el, h('div', { class: 'page-head' }, h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '#/connections' }, 'Connections')),
    h('h1', { class: 'name-text' }, name))), errorArea,
  h('div', { class: 'grid-2' }, panel('Details', info), panel('Client properties', props)),
  panel('Channels', channels), h('div', { id: 'close-area' }));

  async function refresh() {
    let c;
    try { c = await get(base); replace(errorArea); } catch (err) { replace(errorArea, errorBox(err)); return; }
    // A user may close its own connections; administrators any.
    canClose = isAdmin() || c.user === session.user;
    replace(el.querySelector('#close-area'), canClose ? panel('Close', closeForm) : null);
    replace(info, facts([
      ['State', stateBadge(c.state)], ['User', c.user], ['Virtual host', c.vhost], ['Protocol', c.protocol],
      ['Peer', `${c.peer_host}:${c.peer_port}`], ['Client name', c.user_provided_name || '–'],
      ['Auth mechanism', c.auth_mechanism], ['TLS', c.ssl ? `${c.ssl_protocol || 'yes'} ${c.ssl_cipher || ''}` : 'no'],
      ['Heartbeat', c.timeout ? `${c.timeout} s` : 'off'], ['Frame max', bytes(c.frame_max)], ['Channel max', num(c.channel_max)],
      ['Received', bytes(c.recv_oct)], ['Sent', bytes(c.send_oct)], ['Connected at', time(c.connected_at)],
    ]));
    replace(props, propsTable(c.client_properties));
    try {
      const list = await get(`${base}/channels`);
      replace(channels, list.length ? cards(h('table', { class: 'simple' },
        h('thead', {}, h('tr', {}, ['Channel', 'Mode', 'State', 'Prefetch', 'Unacked', 'Unconfirmed'].map((t) => h('th', {}, t)))),
        h('tbody', {}, list.map((ch) => h('tr', {}, h('td', {}, ch.name), h('td', {}, ch.confirm ? 'confirm' : ch.transactional ? 'tx' : '–'),
          h('td', {}, stateBadge(ch.state)), h('td', { class: 'num' }, num(ch.prefetch_count)), h('td', { class: 'num' }, num(ch.messages_unacknowledged)),
          h('td', { class: 'num' }, num(ch.messages_unconfirmed))))))) : empty('No channels open.'));
    } catch (err) { replace(channels, errorBox(err)); }
  }
  await refresh();
  return { refresh, title: name };
}
