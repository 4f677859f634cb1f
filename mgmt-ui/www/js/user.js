// One user (administrators only): tags and password, permissions per vhost
// and topic permissions (set, clear), delete.
import { h, replace, field, errorBox, loading, panel, empty, select, cards } from './dom.js';
import { get, put, del } from './http.js';
import { confirmAction, runAction } from './ui.js';
import { tagsInput } from './users.js';
import { session, parseTags } from './session.js';

const enc = encodeURIComponent;

function permForm(user, topic, onDone) {
  const vhost = select(session.vhosts, session.vhost || session.vhosts[0], { id: topic ? 'tperm-vhost' : 'perm-vhost' });
  const exchange = topic ? h('input', { type: 'text', id: 'tperm-exchange', value: 'amq.topic' }) : null;
  const inputs = (topic ? ['write', 'read'] : ['configure', 'write', 'read']).map((k) => [k, h('input', { type: 'text', value: '.*', id: `${topic ? 't' : ''}perm-${k}`, class: 'mono' })]);
  const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: topic ? 'tperm-set' : 'perm-set' }, topic ? 'Set topic permission' : 'Set permission');
  return h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      const body = Object.fromEntries(inputs.map(([k, i]) => [k, i.value]));
      if (topic) body.exchange = exchange.value;
      const path = `/api/${topic ? 'topic-permissions' : 'permissions'}/${enc(vhost.value)}/${enc(user)}`;
      if (await runAction(submit, () => put(path, body).then(() => true), 'Permission set')) onDone();
    },
  }, h('div', { class: 'form-grid' }, field('Virtual host', vhost), exchange ? field('Exchange', exchange) : null,
    inputs.map(([k, i]) => field(`${k[0].toUpperCase()}${k.slice(1)} regexp`, i))), h('div', { class: 'form-actions' }, submit));
}

function permTable(rows, topic, onDone) {
  if (!rows.length) return empty(topic ? 'No topic permissions: topic exchanges are not restricted.' : 'No permissions: this user cannot open any vhost.');
  const cols = topic ? ['vhost', 'exchange', 'write', 'read'] : ['vhost', 'configure', 'write', 'read'];
  return cards(h('table', { class: 'simple' }, h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)), h('th', {}))),
    h('tbody', {}, rows.map((p) => h('tr', {}, cols.map((c) => h('td', { class: c === 'vhost' ? null : 'mono' }, p[c])),
      h('td', {}, h('button', {
        type: 'button', class: 'btn btn-small btn-danger',
        onclick: async (e) => {
          if (!await confirmAction({ title: 'Clear this permission?', message: `${p.user} loses ${topic ? `topic permissions on ${p.exchange} in` : 'access to'} ${p.vhost}.`, confirmLabel: 'Clear' })) return;
          const path = topic ? `/api/topic-permissions/${enc(p.vhost)}/${enc(p.user)}` : `/api/permissions/${enc(p.vhost)}/${enc(p.user)}`;
          if (await runAction(e.target, () => del(path).then(() => true), 'Permission cleared')) onDone();
        },
      }, 'Clear')))))));
}

export async function render(el, [name]) {
  const base = `/api/users/${enc(name)}`;
  const perms = h('div', {}, loading());
  const tperms = h('div', {}, loading());
  const account = h('div', {}, loading());
  replace(el, h('div', { class: 'page-head' }, h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '#/users' }, 'Users')), h('h1', { class: 'name-text' }, name))),
    panel('Tags and password', account),
    panel('Permissions', perms, h('h3', { class: 'subhead' }, 'Set permission'), permForm(name, false, refresh)),
    panel('Topic permissions', tperms, h('h3', { class: 'subhead' }, 'Set topic permission'), permForm(name, true, refresh)));

  async function renderAccount() {
    let u;
    try { u = await get(base); } catch (err) { replace(account, errorBox(err)); return; }
    const tags = tagsInput(parseTags(u.tags));
    const pass = h('input', { type: 'password', id: 'user-newpass', autocomplete: 'new-password' });
    const submit = h('button', { type: 'submit', class: 'btn btn-primary', id: 'user-update' }, 'Update user');
    const delBtn = h('button', {
      type: 'button', class: 'btn btn-danger', id: 'user-delete', disabled: name === session.user,
      onclick: async () => {
        if (!await confirmAction({ title: 'Delete this user?', message: `“${name}” and its permissions will be deleted.` })) return;
        if (await runAction(delBtn, () => del(base).then(() => true), `User “${name}” deleted`)) location.hash = '#/users';
      },
    }, 'Delete user');
    replace(account, h('form', {
      onsubmit: async (e) => {
        e.preventDefault();
        const body = { tags: tags.value().join(',') };
        if (pass.value) body.password = pass.value; else body.password_hash = u.password_hash;
        if (await runAction(submit, () => put(base, body).then(() => true), 'User updated')) pass.value = '';
      },
    }, h('div', { class: 'form-grid' }, h('div', { class: 'field wide' }, h('label', {}, 'Tags'), tags.el),
      field('New password', pass, 'Leave empty to keep the current one.')),
    h('div', { class: 'form-actions' }, submit, delBtn)));
  }

  async function refresh() {
    try {
      const [p, t] = await Promise.all([get(`${base}/permissions`), get(`${base}/topic-permissions`)]);
      replace(perms, permTable(p, false, refresh));
      replace(tperms, permTable(t, true, refresh));
    } catch (err) { replace(perms, errorBox(err)); replace(tperms); }
  }
  await renderAccount();
  await refresh();
  return { title: name };
}
