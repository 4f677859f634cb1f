// Users (administrators only): the table, adding a user with tags and a
// password, deleting one.
import { h, replace, field } from './dom.js';
import { put, del } from './http.js';
import { createTable } from './table.js';
import { confirmAction, formPanel, runAction } from './ui.js';
import { session } from './session.js';

const TAGS = ['administrator', 'monitoring', 'policymaker', 'management', 'impersonator'];
const enc = encodeURIComponent;

function tagList(tags) {
  const list = Array.isArray(tags) ? tags : String(tags || '').split(',').filter(Boolean);
  return list.length ? list.map((t) => h('span', { class: 'feature' }, t)) : h('span', { class: 'hint' }, 'no tags (cannot use the console)');
}

export function tagsInput(initial = []) {
  const boxes = TAGS.map((t) => h('input', { type: 'checkbox', value: t, checked: initial.includes(t), 'data-tag': t }));
  const other = h('input', { type: 'text', id: 'user-tags-other', placeholder: 'other, comma separated', value: initial.filter((t) => !TAGS.includes(t)).join(', ') });
  const el = h('div', {}, h('div', { class: 'checks' }, boxes.map((b) => h('label', { class: 'check' }, b, b.value))), other);
  const value = () => [...boxes.filter((b) => b.checked).map((b) => b.value), ...other.value.split(',').map((s) => s.trim()).filter(Boolean)];
  return { el, value };
}

function addForm(onDone) {
  const name = h('input', { type: 'text', id: 'user-name', required: true, autocomplete: 'off' });
  const pass = h('input', { type: 'password', id: 'user-pass', autocomplete: 'new-password' });
  const tags = tagsInput(['management']);
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'user-add' }, 'Add user');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      const body = { tags: tags.value().join(',') };
      if (pass.value) body.password = pass.value; else body.password_hash = '';
      const ok = await runAction(submit, () => put(`/api/users/${enc(name.value)}`, body).then(() => true), `User “${name.value}” added`);
      if (ok) { const n = name.value; name.value = ''; pass.value = ''; onDone(n); }
    },
  },
  h('div', { class: 'form-grid' }, field('Username', name), field('Password', pass, 'Empty: the user cannot log in with a password.'),
    h('div', { class: 'field wide' }, h('label', {}, 'Tags'), tags.el)),
  h('div', { class: 'form-actions' }, submit));
  return formPanel('Add a user', form);
}

export async function render(el) {
  const table = createTable({
    id: 'users', url: () => '/api/users', noColumns: true, sort: 'name', emptyText: 'No users.',
    columns: [
      { key: 'name', label: 'Name', sort: 'name', always: true, render: (r) => h('a', { href: `#/users/${enc(r.name)}`, class: 'name-text' }, r.name) },
      { key: 'tags', label: 'Tags', render: (r) => tagList(r.tags) },
      { key: 'password', label: 'Can log in', render: (r) => (r.password_hash ? 'with password' : 'no password') },
      { key: 'actions', label: '', always: true, render: (r) => (r.name === session.user ? h('span', { class: 'hint' }, 'you') : h('button', {
        type: 'button', class: 'btn btn-small btn-danger', 'data-user': r.name,
        onclick: async (e) => {
          if (!await confirmAction({ title: 'Delete this user?', message: `“${r.name}” and its permissions will be deleted; its open connections are closed.` })) return;
          if (await runAction(e.target, () => del(`/api/users/${enc(r.name)}`).then(() => true), `User “${r.name}” deleted`)) table.refresh();
        },
      }, 'Delete')) },
    ],
  });
  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Users')), table.el, h('div', { class: 'stack' }), addForm(() => table.refresh()));
  return { refresh: table.refresh, title: 'Users' };
}
