// "Move messages" on the queue page: Warren's redrive of a (dead-letter)
// queue through /api/queues/{vhost}/{name}/move -- back to the queue each
// message died in, to another queue, or to an exchange -- with a
// confirmation, live progress while it runs, a report of where messages
// went and why some stayed, and a cancel button.
import { h, replace, field, wideField, select, facts, badge, errorBox } from './dom.js';
import { get, post, del } from './http.js';
import { num } from './format.js';
import { confirmAction, runAction } from './ui.js';

const POLL_MS = 500;
const TARGETS = [
  ['source', 'Back to the queue each message died in (x-death)'],
  ['queue', 'To a queue'],
  ['exchange', 'To an exchange'],
];
const SKIPS = { no_source: 'no source queue in its x-death', unroutable: 'unroutable', destination_full: 'destination full', no_match: 'not matching the header' };

function describeDest(d) {
  if (!d || d.type === 'source') return 'the queue each message died in';
  if (d.type === 'queue') return `queue “${d.name}”`;
  return `exchange “${d.name}”${d.routing_key !== undefined ? ` with routing key “${d.routing_key}”` : ''}`;
}

function progressView(p, onCancel) {
  const stateKind = { running: 'running', finished: 'ok', cancelled: 'muted', stopped: 'warn' }[p.state] || 'muted';
  const bar = h('progress', { id: 'move-progress-bar', max: String(Math.max(1, p.total)), value: String(p.moved + Object.values(p.skipped || {}).reduce((a, b) => a + b, 0)) });
  bar.style.width = '100%'; // CSSOM: the CSP refuses style attributes
  const skipped = Object.entries(p.skipped || {}).filter(([, n]) => n > 0);
  return h('div', { id: 'move-progress', 'data-state': p.state },
    h('p', {}, badge(stateKind, p.state), ' ', `Moved ${num(p.moved)} of ${num(p.total)} to ${describeDest(p.destination)}`, p.reason ? ` — ${p.reason}` : ''),
    bar,
    facts([
      ['Rate limit', `${num(p.rate)} msg/s`],
      p.state === 'running' ? ['Remaining', num(p.remaining)] : null,
      skipped.length ? ['Left in place', skipped.map(([k, n]) => `${num(n)} ${SKIPS[k] || k}`).join(', ')] : null,
      p.moved_to?.length ? ['Moved to', h('ul', { class: 'plain', id: 'move-report' }, p.moved_to.map((r) => h('li', {}, `${r.queue ?? '(other queues)'}: ${num(r.count)}`)))] : null,
      ['Started', p.started_at || '–'], p.finished_at ? ['Finished', p.finished_at] : null,
    ]),
    p.state === 'running' ? h('div', { class: 'form-actions' }, h('button', { type: 'button', class: 'btn btn-danger', id: 'move-cancel', onclick: onCancel }, 'Cancel move')) : null);
}

// The form and its progress area -> {el, show(redrive)}. The queue page
// passes its queue's `redrive` (null when no move ran) to show(): the
// progress is asked for only when there is one, so a queue that never had a
// move costs no request (and no 404). onChange runs when a move ends (the
// queue page refreshes its counts).
export function moveForm(vhost, queue, onChange) {
  const path = `/api/queues/${encodeURIComponent(vhost)}/${encodeURIComponent(queue)}/move`;
  const target = select(TARGETS, 'source', { id: 'move-target' });
  const dest = h('input', { type: 'text', id: 'move-dest', autocomplete: 'off' });
  const key = h('input', { type: 'text', id: 'move-routing-key', autocomplete: 'off', placeholder: 'each message’s own' });
  const count = h('input', { type: 'number', id: 'move-count', min: '0', placeholder: 'all' });
  const rate = h('input', { type: 'number', id: 'move-rate', min: '1', value: '1000' });
  const matchHeader = h('input', { type: 'text', id: 'move-match-header', autocomplete: 'off', placeholder: 'any message' });
  const matchValue = h('input', { type: 'text', id: 'move-match-value', autocomplete: 'off', placeholder: 'any value' });
  const destField = field('Destination name', dest);
  const keyField = field('Routing key', key);
  const status = h('div', { 'aria-live': 'polite' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'move-submit' }, 'Move messages');
  let timer = null;
  let asking = false; // a poll's request is out
  let shown = false;

  const showTarget = () => {
    // style, not the hidden attribute: .field sets its own display
    destField.style.display = target.value === 'source' ? 'none' : '';
    keyField.style.display = target.value === 'exchange' ? '' : 'none';
  };
  target.addEventListener('change', showTarget);
  showTarget();

  async function poll() {
    clearTimeout(timer);
    timer = null;
    asking = true;
    let p;
    try {
      p = await get(path);
    } catch (err) {
      replace(status, err.status === 404 ? null : errorBox(err));
      return;
    } finally {
      asking = false;
    }
    replace(status, progressView(p, cancel));
    shown = true;
    if (p.state !== 'running') {
      if (onChange) onChange();
    } else if (status.isConnected) {
      timer = setTimeout(poll, POLL_MS);
    }
  }

  // A move running, or one not shown yet (a page opened after it ended).
  function show(redrive) {
    if (redrive && !timer && !asking && (redrive.state === 'running' || !shown)) poll();
  }

  async function cancel(e) {
    if (!await confirmAction({ title: 'Cancel this move?', message: 'Messages already moved stay moved; the rest stay in this queue.', confirmLabel: 'Cancel move' })) return;
    await runAction(e.target, () => del(path), 'Move cancelled');
    poll();
  }

  const form = h('form', {
    id: 'move-form',
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { rate: Number(rate.value) || 1000 };
      if (count.value !== '') body.count = Number(count.value);
      if (matchHeader.value !== '') body['match-header'] = matchHeader.value;
      if (matchHeader.value !== '' && matchValue.value !== '') body['match-value'] = matchValue.value;
      if (target.value === 'queue') body['dest-queue'] = dest.value;
      if (target.value === 'exchange') {
        body['dest-exchange'] = dest.value;
        if (key.value !== '') body['dest-routing-key'] = key.value;
      }
      const what = `${count.value !== '' ? `Up to ${count.value} messages` : 'Every ready message'}${body['match-header'] ? ` with header “${body['match-header']}”${body['match-value'] !== undefined ? ` = “${body['match-value']}”` : ''}` : ''}`;
      const where = describeDest({ type: target.value, name: dest.value, routing_key: body['dest-routing-key'] });
      if (!await confirmAction({ title: 'Move messages?', message: `${what} in “${queue}” will be moved to ${where}, at most ${body.rate} per second. Messages that cannot go stay here.`, confirmLabel: 'Move messages' })) return;
      const started = await runAction(submit, () => post(path, body), 'Move started');
      if (started) poll();
    },
  },
  h('p', { class: 'hint' }, 'Each message is moved atomically (it is in exactly one queue, even after a crash), keeps its properties and headers (x-death too), and starts its new queue with a delivery count of 0.'),
  h('div', { class: 'form-grid' }, wideField('Move', target), destField, keyField, field('How many', count, 'empty: all ready now'), field('Rate (msg/s)', rate),
    field('Only with header', matchHeader), field('Equal to', matchValue, 'empty: any value')),
  h('div', { class: 'form-actions' }, submit), status);
  return { el: form, show };
}

