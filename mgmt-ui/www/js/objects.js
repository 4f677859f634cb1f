// Renderers shared by the pages for the broker's objects: links to a queue,
// exchange or connection page, feature flags, state badges, the known
// arguments and policy keys, and a vhost chooser for forms.
import { h, badge, select, field } from './dom.js';
import { put } from './http.js';
import { argsEditor, formPanel, runAction } from './ui.js';
import { session } from './session.js';

const enc = encodeURIComponent;

export function queueHref(vhost, name) {
  return `#/queues/${enc(vhost)}/${enc(name)}`;
}

export function exchangeHref(vhost, name) {
  return `#/exchanges/${enc(vhost)}/${enc(name)}`;
}

// A stream queue has its own page (stream.js).
export function streamHref(vhost, name) {
  return `#/streams/${enc(vhost)}/${enc(name)}`;
}

export function queueLink(vhost, name, type) {
  return h('a', { href: type === 'stream' ? streamHref(vhost, name) : queueHref(vhost, name), class: 'name-text' }, name);
}

export function exchangeLink(vhost, name) {
  return h('a', { href: exchangeHref(vhost, name), class: 'name-text' }, name === '' ? '(AMQP default)' : name);
}

// A connection's name ("127.0.0.1:58604 -> 127.0.0.1:5672") breaks at its
// arrow, never inside an address; any other name anywhere.
export function connectionLink(name) {
  const parts = String(name).split(' -> ');
  const text = parts.length === 2 ? [h('span', { class: 'addr' }, parts[0]), ' -> ', h('span', { class: 'addr' }, parts[1])] : name;
  return h('a', { href: `#/connections/${enc(name)}`, class: parts.length === 2 ? 'conn-name' : 'name-text' }, text);
}

// Short flags as RabbitMQ shows them (D durable, AD auto-delete, Excl, Args,
// I internal), each with its full meaning as a tooltip, plus the policy.
export function features(row) {
  const out = [];
  const f = (text, title, cls) => out.push(h('abbr', { class: ['feature', cls], title }, text));
  if (row.durable) f('D', 'durable');
  if (row.auto_delete) f('AD', 'auto-delete');
  if (row.exclusive) f('Excl', 'exclusive');
  if (row.internal) f('I', 'internal');
  const args = row.arguments || {};
  Object.keys(args).forEach((k) => f(k.replace(/^x-/, ''), `${k}: ${JSON.stringify(args[k])}`));
  if (row.policy) f(row.policy, `policy ${row.policy}`, 'feature-policy');
  if (row.operator_policy) f(row.operator_policy, `operator policy ${row.operator_policy}`, 'feature-policy');
  return out.length ? out : '–';
}

// Connection and channel states: blocked and blocking get an icon and a
// word, not only a colour.
export function stateBadge(state) {
  if (!state) return '–';
  if (state === 'blocked') return badge('blocked', 'blocked', 'blocked');
  if (state === 'blocking' || state === 'flow') return badge('warn', state, 'pause');
  if (state === 'running') return badge('ok', 'running', 'check');
  if (state === 'idle') return badge('muted', 'idle');
  return badge('muted', state);
}

export const QUEUE_ARGS = [
  { key: 'x-message-ttl', type: 'number', label: 'Message TTL', hint: 'ms a message may stay in the queue' },
  { key: 'x-expires', type: 'number', label: 'Auto expire', hint: 'ms unused before the queue is deleted' },
  { key: 'x-max-length', type: 'number', label: 'Max length', hint: 'ready messages' },
  { key: 'x-max-length-bytes', type: 'number', label: 'Max length bytes', hint: 'bytes of ready message bodies' },
  { key: 'x-overflow', type: 'string', label: 'Overflow', hint: 'drop-head, reject-publish or reject-publish-dlx' },
  { key: 'x-dead-letter-exchange', type: 'string', label: 'Dead letter exchange' },
  { key: 'x-dead-letter-routing-key', type: 'string', label: 'Dead letter routing key' },
  { key: 'x-delivery-limit', type: 'number', label: 'Delivery limit', hint: 'deliveries before a message is dead-lettered' },
  { key: 'x-delayed-retry-type', type: 'string', label: 'Delayed retry', hint: 'disabled, all, failed or returned' },
  { key: 'x-delayed-retry-min', type: 'number', label: 'Retry delay min', hint: 'ms, times the delivery count' },
  { key: 'x-delayed-retry-max', type: 'number', label: 'Retry delay max', hint: 'ms' },
  { key: 'x-delayed-retry-multiplier', type: 'number', label: 'Retry multiplier', hint: 'exponential: min x m^(count-1)' },
  { key: 'x-max-priority', type: 'number', label: 'Max priority' },
  { key: 'x-single-active-consumer', type: 'boolean', label: 'Single active consumer' },
  { key: 'x-queue-type', type: 'string', label: 'Queue type', hint: 'classic or quorum' },
  { key: 'x-queue-mode', type: 'string', label: 'Lazy mode', hint: 'lazy (accepted, ignored)' },
];

export const EXCHANGE_ARGS = [
  { key: 'alternate-exchange', type: 'string', label: 'Alternate exchange', hint: 'gets messages nothing else routes' },
  { key: 'hash-header', type: 'string', label: 'Hash header', hint: 'x-consistent-hash: hash this header, not the routing key' },
  { key: 'hash-property', type: 'string', label: 'Hash property', hint: 'x-consistent-hash: message_id, correlation_id or timestamp' },
];

export const POLICY_KEYS = [
  { key: 'message-ttl', type: 'number', label: 'Message TTL', hint: 'queues: ms' },
  { key: 'expires', type: 'number', label: 'Auto expire', hint: 'queues: ms unused' },
  { key: 'max-length', type: 'number', label: 'Max length', hint: 'queues: messages' },
  { key: 'max-length-bytes', type: 'number', label: 'Max length bytes', hint: 'queues: bytes' },
  { key: 'overflow', type: 'string', label: 'Overflow', hint: 'drop-head, reject-publish, reject-publish-dlx' },
  { key: 'dead-letter-exchange', type: 'string', label: 'Dead letter exchange' },
  { key: 'dead-letter-routing-key', type: 'string', label: 'Dead letter routing key' },
  { key: 'delivery-limit', type: 'number', label: 'Delivery limit' },
  { key: 'delayed-retry-type', type: 'string', label: 'Delayed retry', hint: 'disabled, all, failed, returned' },
  { key: 'delayed-retry-min', type: 'number', label: 'Retry delay min', hint: 'ms' },
  { key: 'delayed-retry-max', type: 'number', label: 'Retry delay max', hint: 'ms' },
  { key: 'delayed-retry-multiplier', type: 'number', label: 'Retry multiplier' },
  { key: 'consumer-timeout', type: 'number', label: 'Consumer timeout', hint: 'ms' },
  { key: 'queue-mode', type: 'string', label: 'Queue mode', hint: 'lazy (accepted, ignored)' },
  { key: 'alternate-exchange', type: 'string', label: 'Alternate exchange', hint: 'exchanges' },
];

// A vhost <select> for a form, preset to the selected vhost (or the first).
export function vhostChooser(attrs) {
  const list = session.vhosts.length ? session.vhosts : ['/'];
  return select(list, session.vhost || list[0], attrs);
}

// List endpoint for the selected vhost: /api/queues or /api/queues/%2F;
// connections and channels are listed under /api/vhosts/V/ instead.
export function scoped(base) {
  if (!session.vhost) return base;
  if (base === '/api/connections' || base === '/api/channels') return `/api/vhosts/${enc(session.vhost)}/${base.slice(5)}`;
  return `${base}/${enc(session.vhost)}`;
}

export function vhostColumn() {
  return { key: 'vhost', label: 'Virtual host', sort: 'vhost', initial: !session.vhost };
}

// declareForm: the "Add a new queue / exchange" panel. opts: {kind
// ('queue' | 'exchange'), idPrefix, knownArgs, flags: [[key, label,
// default]], extra: [[label, control]], body(flags) -> extra body fields,
// onDone()}. PUTs /api/<kind>s/<vhost>/<name>.
export function declareForm(opts) {
  const p = opts.idPrefix;
  const vhost = vhostChooser({ id: `${p}-vhost` });
  const name = h('input', { type: 'text', id: `${p}-name`, required: true, autocomplete: 'off' });
  const flags = opts.flags.map(([key, label, on]) => [key, label, h('input', { type: 'checkbox', id: `${p}-${key}`, checked: on })]);
  const args = argsEditor(opts.knownArgs);
  const err = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: `${p}-add` }, `Add ${opts.kind}`);
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      let argv;
      try { argv = args.value(); } catch (x) { err.textContent = x.message; return; }
      const body = { ...opts.body(), arguments: argv };
      flags.forEach(([key, , box]) => { body[key] = box.checked; });
      const path = `/api/${opts.kind}s/${encodeURIComponent(vhost.value)}/${encodeURIComponent(name.value)}`;
      const label = `${opts.kind[0].toUpperCase()}${opts.kind.slice(1)} “${name.value}” declared`;
      if (await runAction(submit, () => put(path, body).then(() => true), label)) { name.value = ''; args.reset(); opts.onDone(); }
    },
  },
  h('div', { class: 'form-grid' }, field('Virtual host', vhost), field('Name', name), (opts.extra || []).map(([l, c]) => field(l, c)),
    h('div', { class: 'field' }, h('span', { class: 'hint' }, 'Options'),
      h('div', { class: 'checks' }, flags.map(([, label, box]) => h('label', { class: 'check' }, box, label)))),
    h('div', { class: 'field wide' }, h('label', {}, 'Arguments'), args.el)),
  h('div', { class: 'form-actions' }, submit, err));
  return formPanel(`Add a new ${opts.kind}`, form);
}
