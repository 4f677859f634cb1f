// A list table over one API collection: sorting, name filtering (plain or
// regex), paging and column choice are done by the server with RabbitMQ's
// query parameters (page, page_size, name, use_regex, sort, sort_reverse,
// columns), so a page of 10,000 queues costs the browser one page of rows.
// Endpoints that answer with a plain array (no paging envelope) are sorted,
// filtered and paged here instead. The table keeps its state per list in
// sessionStorage, so going back to a list finds it as it was.
//
// With no sort chosen the server's own order is kept: sort=name costs
// RabbitMQ 3.10 about 6 s on 10,000 queues, its default order 0.3 s.
//
// Column: {key, label, sort (API sort key, or none), api: [fields to ask
// for], render(row) -> node/string, num (right-aligned), initial (shown by
// default; default true), always (cannot be hidden)}.
import { h, replace, loading, empty, errorBox, icon, select } from './dom.js';
import { get, query } from './http.js';
import { num, pick } from './format.js';

const PAGE_SIZES = [20, 50, 100, 500];

function loadState(id, columns, defaults) {
  let saved = {};
  try { saved = JSON.parse(sessionStorage.getItem(`warren.table.${id}`)) || {}; } catch (e) { saved = {}; }
  return {
    page: 1, pageSize: 50, filter: '', regex: false, sort: defaults.sort || null, reverse: Boolean(defaults.reverse),
    visible: columns.filter((c) => c.initial !== false || c.always).map((c) => c.key),
    ...saved,
  };
}

export function createTable(opts) {
  const { columns } = opts;
  const state = loadState(opts.id, columns, opts);
  let seq = 0;
  let lastData = null;

  const save = () => sessionStorage.setItem(`warren.table.${opts.id}`, JSON.stringify(state));
  const filterInput = h('input', {
    type: 'search', value: state.filter, placeholder: opts.filterPlaceholder || 'Filter by name',
    'aria-label': 'Filter by name', class: 'filter',
  });
  const regexBox = h('input', { type: 'checkbox', checked: state.regex });
  const filterError = h('span', { class: 'filter-error', role: 'alert' });
  const summary = h('span', { class: 'table-summary', 'aria-live': 'polite' });
  const sizeSelect = select(PAGE_SIZES.map((n) => [String(n), `${n} per page`]), String(state.pageSize),
    { 'aria-label': 'Rows per page' });
  const columnChooser = h('details', { class: 'column-chooser' },
    h('summary', {}, icon('columns'), 'Columns'),
    h('div', { class: 'column-list' }, columns.filter((c) => !c.always).map((c) => h('label', {},
      h('input', {
        type: 'checkbox', checked: state.visible.includes(c.key),
        onchange: (e) => {
          state.visible = e.target.checked ? [...state.visible, c.key] : state.visible.filter((k) => k !== c.key);
          save(); load();
        },
      }), c.label))));
  const table = h('table', { class: 'data', 'data-state': 'loading' });
  const body = h('div', { class: 'table-scroll' }, table);
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const errorArea = h('div');
  const el = h('div', { class: 'table-block' },
    h('div', { class: 'toolbar' },
      h('div', { class: 'filter-group' }, icon('search'), filterInput,
        h('label', { class: 'regex-toggle', title: 'Treat the filter as a regular expression' }, regexBox, 'Regex'),
        filterError),
      h('div', { class: 'toolbar-right' }, summary, sizeSelect, columnChooser)),
    errorArea, body, pager);

  let debounce = null;
  filterInput.addEventListener('input', () => {
    clearTimeout(debounce);
    debounce = setTimeout(applyFilter, 300);
  });
  filterInput.addEventListener('keydown', (e) => { if (e.key === 'Enter') { clearTimeout(debounce); applyFilter(); } });
  regexBox.addEventListener('change', applyFilter);
  sizeSelect.addEventListener('change', () => { state.pageSize = Number(sizeSelect.value); state.page = 1; save(); load(); });

  function applyFilter() {
    state.filter = filterInput.value;
    state.regex = regexBox.checked;
    state.page = 1;
    save();
    load();
  }

  function visibleColumns() {
    return columns.filter((c) => c.always || state.visible.includes(c.key));
  }

  function params() {
    const fields = new Set(opts.apiAlways || []);
    visibleColumns().forEach((c) => (c.api || [c.key]).forEach((f) => fields.add(f)));
    return {
      page: state.page, page_size: state.pageSize, name: state.filter,
      use_regex: state.filter && state.regex ? 'true' : '',
      sort: state.sort || '', sort_reverse: state.sort ? String(state.reverse) : '',
      columns: opts.noColumns ? '' : [...fields].join(','),
      ...(opts.extraParams || {}),
    };
  }

  function regexProblem() {
    if (!state.regex || !state.filter) return null;
    try { new RegExp(state.filter); return null; } catch (e) { return `Not a valid regular expression: ${e.message}`; }
  }

  // Fetches the current page and renders it; errors are shown above the
  // table while the last good rows stay visible.
  async function load() {
    const problem = regexProblem();
    filterError.textContent = problem || '';
    filterInput.setAttribute('aria-invalid', problem ? 'true' : 'false');
    if (problem) return;
    const mySeq = ++seq;
    if (!lastData) replace(table, h('tbody', {}, h('tr', {}, h('td', {}, loading()))));
    table.dataset.state = 'loading';
    try {
      let data = await get(opts.url() + query(params()));
      if (mySeq !== seq) return;
      if (Array.isArray(data)) data = pageLocally(data);
      if (data.page_count > 0 && data.page > data.page_count) {
        state.page = data.page_count; save(); load(); return;
      }
      lastData = data;
      replace(errorArea);
      render(data);
      if (opts.onLoad) opts.onLoad(data);
    } catch (err) {
      if (mySeq !== seq) return;
      if (err.error === 'page_out_of_range' && state.page > 1) { state.page = 1; save(); load(); return; }
      table.dataset.state = 'error';
      replace(errorArea, errorBox(err));
      if (!lastData) replace(table);
    }
  }

  function pageLocally(rows) {
    let items = rows;
    if (state.filter) {
      let test;
      if (state.regex) { const re = new RegExp(state.filter); test = (s) => re.test(s); } else {
        const f = state.filter.toLowerCase(); test = (s) => s.toLowerCase().includes(f);
      }
      items = items.filter((r) => test(String(opts.localName ? opts.localName(r) : r.name ?? '')));
    }
    if (state.sort) {
      const dir = state.reverse ? -1 : 1;
      items = items.slice().sort((a, b) => {
        const x = pick(a, state.sort); const y = pick(b, state.sort);
        if (typeof x === 'number' && typeof y === 'number') return (x - y) * dir;
        return String(x ?? '').localeCompare(String(y ?? '')) * dir;
      });
    }
    const pageCount = Math.max(1, Math.ceil(items.length / state.pageSize));
    const page = Math.min(state.page, pageCount);
    return {
      items: items.slice((page - 1) * state.pageSize, page * state.pageSize), page, page_count: pageCount,
      page_size: state.pageSize, filtered_count: items.length, total_count: rows.length, item_count: 0,
    };
  }

  function header(c) {
    const cls = c.num ? 'num' : null;
    if (!c.sort) return h('th', { scope: 'col', class: cls }, c.label);
    const active = state.sort === c.sort;
    const dir = active ? (state.reverse ? 'descending' : 'ascending') : 'none';
    return h('th', { scope: 'col', class: cls, 'aria-sort': dir },
      h('button', {
        type: 'button', class: ['sort', active && 'sorted'],
        onclick: () => {
          if (active) state.reverse = !state.reverse; else { state.sort = c.sort; state.reverse = Boolean(c.num); }
          state.page = 1; save(); load();
        },
      }, c.label, h('span', { class: 'sort-mark', 'aria-hidden': 'true' }, active ? (state.reverse ? '▼' : '▲') : '↕')));
  }

  function render(data) {
    const cols = visibleColumns();
    const thead = h('thead', {}, h('tr', {}, cols.map(header)));
    let tbody;
    if (!data.items.length) {
      const text = state.filter ? `Nothing matches “${state.filter}”.` : (opts.emptyText || 'Nothing here yet.');
      tbody = h('tbody', {}, h('tr', {}, h('td', { colspan: cols.length }, empty(text))));
    } else {
      // data-label: on a phone each row is a card of "label value" lines
      tbody = h('tbody', {}, data.items.map((row) => h('tr', {},
        cols.map((c) => h('td', { class: c.num ? 'num' : null, 'data-col': c.key, 'data-label': c.label },
          h('span', { class: 'cell' }, c.render ? c.render(row) : fmtDefault(pick(row, c.key), c)))))));
    }
    replace(table, thead, tbody);
    table.dataset.state = 'ready';
    table.dataset.sort = state.sort ? `${state.sort}${state.reverse ? ' desc' : ''}` : '';
    table.dataset.page = String(data.page);
    const from = data.filtered_count ? (data.page - 1) * data.page_size + 1 : 0;
    const to = (data.page - 1) * data.page_size + data.items.length;
    summary.textContent = `${num(from)}–${num(to)} of ${num(data.filtered_count)}` +
      (data.filtered_count !== data.total_count ? ` (filtered from ${num(data.total_count)})` : '');
    renderPager(data);
  }

  function renderPager(data) {
    const go = (p) => () => { state.page = p; save(); load(); };
    const btn = (label, p, disabled, aria) => h('button', { type: 'button', disabled, onclick: go(p), 'aria-label': aria }, label);
    if (data.page_count <= 1) { replace(pager); return; }
    replace(pager,
      btn('«', 1, data.page <= 1, 'First page'),
      btn('‹', data.page - 1, data.page <= 1, 'Previous page'),
      h('span', { class: 'page-no' }, `Page ${num(data.page)} of ${num(data.page_count)}`),
      btn('›', data.page + 1, data.page >= data.page_count, 'Next page'),
      btn('»', data.page_count, data.page >= data.page_count, 'Last page'));
  }

  load();
  return { el, refresh: load, state };
}

function fmtDefault(v, c) {
  if (v === undefined || v === null) return '–';
  if (c.num && typeof v === 'number') return num(v);
  if (typeof v === 'boolean') return v ? 'yes' : 'no';
  if (typeof v === 'object') return JSON.stringify(v);
  return String(v);
}
