// Shared interaction pieces: confirmation dialogs for destructive actions,
// transient notices, and the typed key/value editor used for queue and
// exchange arguments, message headers and policy definitions.
import { h, replace, icon, select } from './dom.js';

// confirmAction({title, message, confirmLabel, typeToConfirm}) -> Promise<bool>.
// With typeToConfirm the user must type that text (used for vhost deletion,
// which removes everything in it). Uses <dialog>, so Escape cancels and focus
// stays inside while it is open.
export function confirmAction({ title, message, confirmLabel = 'Delete', typeToConfirm }) {
  return new Promise((resolve) => {
    const input = typeToConfirm ? h('input', { type: 'text', autocomplete: 'off', 'aria-label': 'Type the name to confirm' }) : null;
    const ok = h('button', { type: 'submit', class: 'btn btn-danger', value: 'ok', disabled: Boolean(typeToConfirm) }, confirmLabel);
    const dlg = h('dialog', { class: 'confirm', 'aria-labelledby': 'confirm-title' },
      h('form', { method: 'dialog' },
        h('h2', { id: 'confirm-title' }, icon('alert'), title),
        h('p', {}, message),
        input ? h('label', { class: 'confirm-type' }, h('span', {}, 'Type ', h('code', {}, typeToConfirm), ' to confirm:'), input) : null,
        h('div', { class: 'actions' },
          h('button', { type: 'submit', class: 'btn', value: 'cancel' }, 'Cancel'), ok)));
    if (input) input.addEventListener('input', () => { ok.disabled = input.value !== typeToConfirm; });
    dlg.addEventListener('close', () => { resolve(dlg.returnValue === 'ok'); dlg.remove(); });
    document.body.append(dlg);
    dlg.showModal();
    (input || dlg.querySelector('button[value=cancel]')).focus();
  });
}

let toastArea = null;
// notify(text, kind): a notice in the corner for a few seconds (kind: ok | error).
export function notify(text, kind = 'ok') {
  if (!toastArea) {
    toastArea = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(toastArea);
  }
  const t = h('div', { class: ['toast', `toast-${kind}`] }, icon(kind === 'error' ? 'alert' : 'check'), text);
  toastArea.append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

// runAction(button, fn, okText): disables the button while fn runs, then
// shows okText or the API's error. Returns fn's result (undefined on error).
export async function runAction(button, fn, okText) {
  if (button) button.disabled = true;
  try {
    const r = await fn();
    if (okText) notify(okText);
    return r;
  } catch (err) {
    notify(err.status ? `${err.status}: ${err.message}` : err.message, 'error');
    return undefined;
  } finally {
    if (button) button.disabled = false;
  }
}

const TYPES = [['string', 'String'], ['number', 'Number'], ['boolean', 'Boolean'], ['list', 'List (JSON)']];

function typeOf(v) {
  if (typeof v === 'number') return 'number';
  if (typeof v === 'boolean') return 'boolean';
  if (Array.isArray(v) || (v && typeof v === 'object')) return 'list';
  return 'string';
}

// argsEditor(known): rows of key = value (type). `known` is [{key, type,
// hint}] offered as suggestions and as one-click "add" links. value()
// returns the object or throws an Error naming the bad row.
export function argsEditor(known = [], initial = {}) {
  const listId = `keys-${Math.random().toString(36).slice(2)}`;
  const rows = h('div', { class: 'args-rows' });
  const datalist = h('datalist', { id: listId }, known.map((k) => h('option', { value: k.key }, k.hint || '')));

  function addRow(key = '', value = '', type) {
    const k = known.find((x) => x.key === key);
    const t = type || (k ? k.type : 'string');
    const keyInput = h('input', { type: 'text', value: key, list: listId, 'aria-label': 'Key', class: 'arg-key' });
    const valueInput = h('input', { type: 'text', value: typeof value === 'object' ? JSON.stringify(value) : String(value), 'aria-label': 'Value', class: 'arg-value' });
    const typeSelect = select(TYPES, t, { 'aria-label': 'Type', class: 'arg-type' });
    keyInput.addEventListener('change', () => {
      const kk = known.find((x) => x.key === keyInput.value);
      if (kk) typeSelect.value = kk.type;
    });
    const row = h('div', { class: 'args-row' }, keyInput, h('span', { 'aria-hidden': 'true' }, '='), valueInput, typeSelect,
      h('button', { type: 'button', class: 'btn-icon', 'aria-label': 'Remove this row', onclick: () => row.remove() }, '×'));
    rows.append(row);
    return keyInput;
  }

  Object.entries(initial).forEach(([k, v]) => addRow(k, v, typeOf(v)));
  if (!Object.keys(initial).length) addRow();

  const suggestions = known.length ? h('div', { class: 'arg-suggestions' }, 'Add: ', known.map((k) => h('button', {
    type: 'button', class: 'link', title: k.hint || k.key,
    onclick: () => {
      const empty = [...rows.querySelectorAll('.arg-key')].find((i) => !i.value);
      if (empty) { empty.value = k.key; empty.dispatchEvent(new Event('change')); empty.parentElement.querySelector('.arg-value').focus(); } else addRow(k.key).parentElement.querySelector('.arg-value').focus();
    },
  }, k.label || k.key))) : null;

  const el = h('div', { class: 'args-editor' }, rows, datalist,
    h('button', { type: 'button', class: 'btn btn-small', onclick: () => addRow().focus() }, '+ Add row'), suggestions);

  function value() {
    const out = {};
    for (const row of rows.querySelectorAll('.args-row')) {
      const key = row.querySelector('.arg-key').value.trim();
      const raw = row.querySelector('.arg-value').value;
      const type = row.querySelector('.arg-type').value;
      if (!key) continue;
      if (type === 'number') {
        if (raw.trim() === '' || Number.isNaN(Number(raw))) throw new Error(`${key}: "${raw}" is not a number`);
        out[key] = Number(raw);
      } else if (type === 'boolean') {
        if (!['true', 'false'].includes(raw.trim())) throw new Error(`${key}: write true or false`);
        out[key] = raw.trim() === 'true';
      } else if (type === 'list') {
        try { out[key] = JSON.parse(raw); } catch (e) { throw new Error(`${key}: not valid JSON (${e.message})`); }
      } else out[key] = raw;
    }
    return out;
  }

  function reset(values = {}) {
    replace(rows);
    Object.entries(values).forEach(([k, v]) => addRow(k, v, typeOf(v)));
    if (!Object.keys(values).length) addRow();
  }

  return { el, value, reset };
}

// A collapsible form panel ("Add a new queue"), closed unless open is true.
export function formPanel(title, form, open) {
  return h('details', { class: 'panel form-panel', open: Boolean(open) }, h('summary', {}, h('h2', {}, title)), form);
}
