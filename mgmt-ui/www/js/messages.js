// Publishing a message (exchange and queue pages) and showing messages got
// from a queue. Bodies are shown as text, pretty-printed JSON or base64, and
// always as text nodes: a body is whatever a client sent.
import { h, replace, field, wideField, select, facts, empty } from './dom.js';
import { post } from './http.js';
import { argsEditor, runAction, notify } from './ui.js';
import { time } from './format.js';

const PROPS = ['content_type', 'content_encoding', 'correlation_id', 'reply_to', 'expiration', 'message_id',
  'type', 'user_id', 'app_id', 'priority', 'timestamp'];
const PROP_KEYS = PROPS.map((k) => ({ key: k, type: k === 'priority' || k === 'timestamp' ? 'number' : 'string' }));

// publishForm(vhost, exchange, routingKeyFixed?) -> element. For the queue
// page the exchange is the default one and the routing key the queue name.
export function publishForm(vhost, exchange, fixedKey) {
  const key = h('input', { type: 'text', id: `pub-key-${exchange || 'default'}`, value: fixedKey ?? '', disabled: fixedKey !== undefined, autocomplete: 'off' });
  const mode = select([['1', '1 – non-persistent'], ['2', '2 – persistent']], '2', { id: 'pub-mode' });
  const headers = argsEditor([]);
  const props = argsEditor(PROP_KEYS);
  const payload = h('textarea', { id: 'pub-payload', rows: 5, spellcheck: 'false' });
  const encoding = select([['string', 'String'], ['base64', 'Base64']], 'string', { id: 'pub-encoding' });
  const err = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'pub-submit' }, 'Publish message');
  const form = h('form', {
    class: 'publish-form',
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      let properties;
      let hdrs;
      try { properties = props.value(); hdrs = headers.value(); } catch (x) { err.textContent = x.message; return; }
      properties.delivery_mode = Number(mode.value);
      if (Object.keys(hdrs).length) properties.headers = hdrs;
      const body = { properties, routing_key: fixedKey ?? key.value, payload: payload.value, payload_encoding: encoding.value };
      const r = await runAction(submit, () => post(`/api/exchanges/${encodeURIComponent(vhost)}/${encodeURIComponent(exchange || 'amq.default')}/publish`, body));
      if (r) {
        if (r.routed) notify('Message published and routed'); else notify('Message published but not routed to any queue', 'error');
      }
    },
  },
  h('div', { class: 'form-grid' },
    fixedKey !== undefined ? null : field('Routing key', key), field('Delivery mode', mode), field('Payload encoding', encoding),
    h('div', { class: 'field wide' }, h('label', {}, 'Headers'), headers.el),
    h('div', { class: 'field wide' }, h('label', {}, 'Properties'), props.el),
    h('div', { class: 'field wide' }, h('label', { for: 'pub-payload' }, 'Payload'), payload)),
  h('div', { class: 'form-actions' }, submit, err));
  return form;
}

function bytesOf(msg) {
  if (msg.payload_encoding === 'base64') {
    const bin = atob(msg.payload);
    return Uint8Array.from(bin, (c) => c.charCodeAt(0));
  }
  return new TextEncoder().encode(msg.payload);
}

function toBase64(bytes) {
  let bin = '';
  bytes.forEach((b) => { bin += String.fromCharCode(b); });
  return btoa(bin);
}

// The three views of a body; JSON falls back to a note when it is not JSON.
export function bodyAs(msg, view) {
  const bytes = bytesOf(msg);
  if (view === 'base64') return toBase64(bytes);
  const text = new TextDecoder('utf-8', { fatal: false }).decode(bytes);
  if (view === 'json') {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return null; }
  }
  return text;
}

// One message as /get or the stream viewer gives it: a stream's record
// (it has an offset) shows its offset and time instead of the queue's
// redelivered flag and count left.
export function messageView(msg, i) {
  const pre = h('pre', { class: 'payload' });
  const note = h('p', { class: 'hint' });
  const looksJson = bodyAs(msg, 'json') !== null;
  const viewSel = select([['text', 'Text'], ['json', 'JSON (pretty)'], ['base64', 'Base64']], looksJson ? 'json' : 'text',
    { 'aria-label': `Show message ${i + 1} as`, class: 'payload-view' });
  const show = () => {
    const v = bodyAs(msg, viewSel.value);
    note.textContent = v === null ? 'This body is not valid JSON; shown as text.' : '';
    pre.textContent = v === null ? bodyAs(msg, 'text') : v;
  };
  viewSel.addEventListener('change', show);
  show();
  const p = msg.properties || {};
  const { headers, ...rest } = p;
  const record = 'offset' in msg;
  return h('article', { class: 'message', 'data-index': i, 'data-offset': record ? String(msg.offset) : null },
    h('h3', {}, record ? `Offset ${msg.offset}` : `Message ${i + 1}`),
    facts([
      ['Exchange', msg.exchange === '' ? '(AMQP default)' : msg.exchange],
      ['Routing key', msg.routing_key],
      record ? ['Stored at', time(msg.timestamp)] : ['Redelivered', msg.redelivered ? 'yes' : 'no'],
      record ? null : ['Left in queue', String(msg.message_count)],
      ['Body', `${msg.payload_bytes} bytes${msg.payload_encoding === 'base64' ? ' (binary)' : ''}`],
      ...Object.entries(rest).map(([k, v]) => [k, typeof v === 'object' ? JSON.stringify(v) : String(v)]),
      headers && Object.keys(headers).length ? ['Headers', h('pre', { class: 'headers' }, JSON.stringify(headers, null, 2))] : null,
    ]),
    h('div', { class: 'form-actions' }, h('label', {}, 'Show body as '), viewSel), note, pre);
}

const ACKMODES = [
  ['ack_requeue_true', 'Nack, requeue (message stays)'],
  ['ack_requeue_false', 'Ack (message removed)'],
  ['reject_requeue_true', 'Reject, requeue'],
  ['reject_requeue_false', 'Reject, no requeue (dead-letters)'],
];

export function getMessagesForm(vhost, queue) {
  const ackmode = select(ACKMODES, 'ack_requeue_true', { id: 'get-ackmode' });
  const encoding = select([['auto', 'Automatic string/base64'], ['base64', 'Base64']], 'auto', { id: 'get-encoding' });
  const count = h('input', { type: 'number', id: 'get-count', value: '1', min: '1', max: '1000' });
  const results = h('div', { class: 'messages', 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'get-submit' }, 'Get messages');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { count: Number(count.value) || 1, ackmode: ackmode.value, encoding: encoding.value, truncate: 50000 };
      const msgs = await runAction(submit, () => post(`/api/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(queue)}/get`, body));
      if (!msgs) return;
      replace(results, msgs.length ? msgs.map(messageView) : empty('The queue is empty.'));
    },
  },
  h('p', { class: 'hint' }, 'Getting a message with a requeue mode puts it back with redelivered set.'),
  h('div', { class: 'form-grid' }, wideField('Ack mode', ackmode), field('Encoding', encoding), field('Messages', count)),
  h('div', { class: 'form-actions' }, submit), results);
  return form;
}
