// Policies and operator policies: tables, and one form that adds or edits
// either kind with the known definition keys offered. Policymakers and
// administrators change policies; operator policies are for administrators.
import { h, replace, field, select } from './dom.js';
import { put, del } from './http.js';
import { createTable } from './table.js';
import { argsEditor, confirmAction, formPanel, runAction } from './ui.js';
import { scoped, vhostColumn, vhostChooser, POLICY_KEYS } from './objects.js';
import { isAdmin } from './session.js';

const enc = encodeURIComponent;
const APPLY = ['all', 'queues', 'exchanges', 'classic_queues', 'quorum_queues', 'streams'];

function columns(kind, edit, refresh) {
  return [
    vhostColumn(),
    { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => h('span', { class: 'name-text' }, r.name) },
    { key: 'pattern', label: 'Pattern', sort: 'pattern', render: (r) => h('code', {}, r.pattern) },
    { key: 'apply-to', label: 'Apply to', sort: 'apply-to' },
    { key: 'definition', label: 'Definition', render: (r) => h('code', { class: 'name-text' }, JSON.stringify(r.definition)) },
    { key: 'priority', label: 'Priority', sort: 'priority', num: true },
    { key: 'actions', label: '', always: true, render: (r) => h('div', { class: 'row-actions' },
      h('button', { type: 'button', class: 'btn btn-small', onclick: () => edit(kind, r) }, 'Edit'),
      h('button', {
        type: 'button', class: 'btn btn-small btn-danger',
        onclick: async (e) => {
          if (!await confirmAction({ title: `Delete this ${kind === 'operator' ? 'operator ' : ''}policy?`, message: `“${r.name}” in ${r.vhost} stops applying at once.` })) return;
          const base = kind === 'operator' ? 'operator-policies' : 'policies';
          if (await runAction(e.target, () => del(`/api/${base}/${enc(r.vhost)}/${enc(r.name)}`).then(() => true), 'Policy deleted')) refresh();
        },
      }, 'Delete')) },
  ];
}

function policyForm(onDone) {
  const kind = select([['policy', 'Policy'], ['operator', 'Operator policy']], 'policy', { id: 'pol-kind', disabled: !isAdmin() });
  const vhost = vhostChooser({ id: 'pol-vhost' });
  const name = h('input', { type: 'text', id: 'pol-name', required: true, autocomplete: 'off' });
  const pattern = h('input', { type: 'text', id: 'pol-pattern', required: true, class: 'mono', placeholder: '^orders\\.' });
  const applyTo = select(APPLY, 'queues', { id: 'pol-apply' });
  const priority = h('input', { type: 'number', id: 'pol-priority', value: '0' });
  const def = argsEditor(POLICY_KEYS);
  const err = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'pol-submit' }, 'Save policy');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      let definition;
      try { definition = def.value(); } catch (x) { err.textContent = x.message; return; }
      const base = kind.value === 'operator' ? 'operator-policies' : 'policies';
      const body = { pattern: pattern.value, 'apply-to': applyTo.value, priority: Number(priority.value) || 0, definition };
      if (await runAction(submit, () => put(`/api/${base}/${enc(vhost.value)}/${enc(name.value)}`, body).then(() => true), `Policy “${name.value}” saved`)) {
        name.value = ''; pattern.value = ''; def.reset(); onDone();
      }
    },
  }, h('div', { class: 'form-grid' }, field('Kind', kind), field('Virtual host', vhost), field('Name', name),
    field('Pattern', pattern, 'Regular expression on queue or exchange names'), field('Apply to', applyTo), field('Priority', priority),
    h('div', { class: 'field wide' }, h('label', {}, 'Definition'), def.el)),
  h('div', { class: 'form-actions' }, submit, err));
  const panelEl = formPanel('Add or update a policy', form);
  // Fills the form from a row for editing (same name: saving replaces it).
  panelEl.edit = (k, r) => {
    kind.value = k; vhost.value = r.vhost; name.value = r.name; pattern.value = r.pattern;
    applyTo.value = r['apply-to']; priority.value = String(r.priority ?? 0); def.reset(r.definition || {});
    panelEl.open = true; panelEl.scrollIntoView({ block: 'start' }); name.focus();
  };
  return panelEl;
}

export async function render(el) {
  let form;
  const edit = (k, r) => form.edit(k, r);
  const refreshAll = () => { policies.refresh(); if (operator) operator.refresh(); };
  const policies = createTable({ id: 'policies', url: () => scoped('/api/policies'), columns: columns('policy', edit, refreshAll), noColumns: true, sort: 'name', emptyText: 'No policies.' });
  const operator = isAdmin() ? createTable({ id: 'op-policies', url: () => scoped('/api/operator-policies'), columns: columns('operator', edit, refreshAll), noColumns: true, sort: 'name', emptyText: 'No operator policies.' }) : null;
  form = policyForm(refreshAll);
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Policies')),
    h('h2', { class: 'section-title' }, 'User policies'), policies.el,
    operator ? [h('h2', { class: 'section-title' }, 'Operator policies'), operator.el] : null,
    h('div', { class: 'stack' }), form);
  return { refresh: refreshAll, title: 'Policies' };
}
