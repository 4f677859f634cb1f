// Element building for the console. Everything a client sent (queue names,
// headers, bodies, client properties) reaches the page only as text nodes or
// attribute values set through the DOM, never through innerHTML, so a queue
// named `<img src=x onerror=alert(1)>` is shown as those characters.

const SVG_NS = 'http://www.w3.org/2000/svg';

// h('a', {href, class, onclick}, child...): children may be strings or
// numbers (become text nodes), nodes, arrays of children, or null/false
// (skipped). Attributes named on* take a function; `class` may be an array.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

export function svg(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      el.addEventListener(key.slice(2), value);
    } else if (key === 'class') {
      const names = Array.isArray(value) ? value.filter(Boolean) : [value];
      if (names.length) el.setAttribute('class', names.join(' '));
    } else if (key === 'dataset') {
      Object.assign(el.dataset, value);
    } else if (key === 'value' && 'value' in el) {
      el.value = value;
    } else if (key === 'checked' || key === 'selected' || key === 'disabled') {
      el[key] = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

// Replaces every child of el with children.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// A named icon from icons.svg (decorative: the text next to it carries the meaning).
export function icon(name, extraClass) {
  return svg('svg', { class: ['icon', extraClass], 'aria-hidden': 'true', focusable: 'false' },
    svg('use', { href: `icons.svg#${name}` }));
}

// A badge whose meaning is in its text and icon as well as its colour.
export function badge(kind, text, iconName) {
  return h('span', { class: ['badge', `badge-${kind}`] }, iconName ? icon(iconName) : null, text);
}

export function field(label, control, hint) {
  const id = control.id || (control.id = uid('f'));
  return h('div', { class: 'field' }, h('label', { for: id }, label), control,
    hint ? h('small', { class: 'hint' }, hint) : null);
}

// Marks a small table to show as cards on a phone, as list tables do: each
// cell is labelled with its column's heading. Returns the table.
export function cards(table) {
  const heads = [...table.querySelectorAll('thead th')].map((th) => th.textContent);
  table.querySelectorAll('tbody tr').forEach((tr) => [...tr.children].forEach((td, i) => {
    if (heads[i]) td.dataset.label = heads[i];
  }));
  table.classList.add('cards');
  return table;
}

// A field on a row of its own, its control as wide as its content (a
// select with long options is never cut off), at most the row's width.
export function wideField(label, control, hint) {
  const f = field(label, control, hint);
  f.classList.add('wide', 'fit');
  return f;
}

let uidCounter = 0;
export function uid(prefix) {
  uidCounter += 1;
  return `${prefix}-${uidCounter}`;
}

export function select(options, value, attrs) {
  return h('select', attrs || {}, options.map((o) => {
    const [v, label] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value }, label);
  }));
}

// The standard states of a panel: loading, empty and error are designed
// states, never a blank area.
export function loading(text) {
  return h('div', { class: 'state state-loading', role: 'status' }, h('span', { class: 'spinner' }), text || 'Loading…');
}

export function empty(text, action) {
  return h('div', { class: 'state state-empty' }, icon('inbox'), h('p', {}, text), action || null);
}

export function errorBox(err) {
  const title = err && err.status ? `${err.status} ${err.error || 'error'}` : 'Error';
  return h('div', { class: 'state state-error', role: 'alert' }, icon('alert'),
    h('div', {}, h('strong', {}, title), h('p', {}, err && err.message ? err.message : String(err))));
}

export function panel(title, ...body) {
  return h('section', { class: 'panel' }, title ? h('h2', {}, title) : null, ...body);
}

// Definition list of label -> value pairs; values may be nodes.
export function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
