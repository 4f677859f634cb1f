// The console shell: login, the header (vhost selector, refresh interval,
// user and logout), the navigation, and a hash router that loads one page
// module per screen (#/queues -> queues.js). Hash routes need nothing from
// the server: every page is index.html.
import { h, replace, icon, select, errorBox, loading } from './dom.js';
import { get, setCredentials, clearCredentials, hasCredentials, onUnauthorized, ApiError } from './http.js';
import { session, parseTags, hasManagementTag, isAdmin, canPolicies, canMonitor, setVhost } from './session.js';
import * as live from './live.js';

// [pattern, module, nav key]; captured groups are URI-decoded and passed on.
const ROUTES = [
  [/^$/, 'overview', 'overview'],
  [/^connections$/, 'connections', 'connections'],
  [/^connections\/(.+)$/, 'connection', 'connections'],
  [/^channels$/, 'channels', 'channels'],
  [/^exchanges$/, 'exchanges', 'exchanges'],
  [/^exchanges\/([^/]+)\/([^/]*)$/, 'exchange', 'exchanges'],
  [/^queues$/, 'queues', 'queues'],
  [/^queues\/([^/]+)\/([^/]+)$/, 'queue', 'queues'],
  [/^streams\/([^/]+)\/([^/]+)$/, 'stream', 'queues'],
  [/^consumers$/, 'consumers', 'consumers'],
  [/^users$/, 'users', 'users'],
  [/^users\/([^/]+)$/, 'user', 'users'],
  [/^vhosts$/, 'vhosts', 'vhosts'],
  [/^policies$/, 'policies', 'policies'],
  [/^shovels$/, 'shovels', 'shovels'],
  [/^federation$/, 'federation', 'federation'],
  [/^definitions$/, 'definitions', 'definitions'],
];

const NAV = [
  ['overview', 'Overview', '#/', 'gauge', () => true],
  ['connections', 'Connections', '#/connections', 'plug', () => true],
  ['channels', 'Channels', '#/channels', 'channel', () => true],
  ['exchanges', 'Exchanges', '#/exchanges', 'exchange', () => true],
  ['queues', 'Queues', '#/queues', 'queue', () => true],
  ['consumers', 'Consumers', '#/consumers', 'consumer', () => true],
  ['users', 'Users', '#/users', 'user', isAdmin, 'Admin'],
  ['vhosts', 'Virtual hosts', '#/vhosts', 'vhost', () => true, 'Admin'],
  ['policies', 'Policies', '#/policies', 'policy', canPolicies, 'Admin'],
  ['shovels', 'Shovels', '#/shovels', 'exchange', canMonitor, 'Admin'],
  ['federation', 'Federation status', '#/federation', 'exchange', canMonitor, 'Admin'],
  ['definitions', 'Definitions', '#/definitions', 'file', isAdmin, 'Admin'],
];

const root = document.getElementById('app');
let current = null; // the page on screen: {destroy?}
let main = null;
let navEl = null;

// Page modules, imported once; boot starts the first one's import while
// the session is still being checked.
const modules = new Map();
function loadModule(name) {
  if (!modules.has(name)) modules.set(name, import(`./${name}.js`));
  return modules.get(name);
}

function decode(s) {
  try { return decodeURIComponent(s); } catch (e) { return s; }
}

function route() {
  const path = location.hash.replace(/^#\/?/, '').split('?')[0];
  for (const [re, mod, nav] of ROUTES) {
    const m = path.match(re);
    if (m) return { mod, nav, params: m.slice(1).map(decode) };
  }
  return null;
}

async function show() {
  if (!session.user) { renderLogin(); return; }
  if (!main) renderShell();
  const r = route();
  live.unwatch();
  if (current && current.destroy) current.destroy();
  current = null;
  navEl.querySelectorAll('a').forEach((a) => a.removeAttribute('aria-current'));
  if (!r) {
    replace(main, errorBox(new ApiError(404, 'not_found', 'There is no such page in the console.')));
    return;
  }
  const link = navEl.querySelector(`a[data-nav="${r.nav}"]`);
  if (link) link.setAttribute('aria-current', 'page');
  replace(main, loading());
  delete root.dataset.route;
  try {
    const page = await loadModule(r.mod);
    if (route()?.mod !== r.mod) return; // navigated away meanwhile
    const container = h('div', { class: 'page', 'data-page': r.mod });
    replace(main, container);
    current = (await page.render(container, r.params)) || {};
    root.dataset.route = location.hash || '#/'; // the page on screen has rendered (tests wait for it)
    if (current.refresh) live.watch(current.refresh);
    document.title = `${current.title || (link ? link.textContent : 'Warren')} · Warren`;
  } catch (err) {
    replace(main, errorBox(err));
  }
}

function vhostOptions() {
  return [['', 'All virtual hosts'], ...session.vhosts.map((v) => [v, v])];
}

function vhostSelector() {
  const sel = select(vhostOptions(), session.vhost, { id: 'vhost-select', 'aria-label': 'Virtual host' });
  sel.addEventListener('change', () => { setVhost(sel.value); show(); });
  return sel;
}

// Pages that add or delete a vhost announce the new list.
document.addEventListener('warren:vhosts', () => {
  const sel = document.getElementById('vhost-select');
  if (session.vhost && !session.vhosts.includes(session.vhost)) setVhost('');
  if (sel) replace(sel, [...select(vhostOptions(), session.vhost).children]);
});

function renderShell() {
  const refresh = select(live.INTERVALS.map(([s, l]) => [String(s), l]), String(live.getInterval()),
    { 'aria-label': 'Refresh interval', id: 'refresh-select' });
  refresh.addEventListener('change', () => live.setInterval_(refresh.value));
  const ov = session.overview || {};
  let lastGroup = null;
  navEl = h('nav', { class: 'sidenav', 'aria-label': 'Main' }, h('ul', {}, NAV.filter((n) => n[4]()).map(([key, label, href, ic, , group]) => {
    const heading = group && group !== lastGroup ? h('li', { class: 'nav-group' }, group) : null;
    lastGroup = group;
    return [heading, h('li', {}, h('a', { href, 'data-nav': key }, icon(ic), h('span', {}, label)))];
  })));
  main = h('main', { id: 'main', tabindex: '-1' });
  replace(root,
    h('a', { class: 'skip', href: '#main', onclick: (e) => { e.preventDefault(); main.focus(); } }, 'Skip to content'),
    h('header', { class: 'topbar' },
      h('a', { class: 'brand', href: '#/' }, h('img', { src: 'favicon.svg', alt: '', width: 26, height: 26 }), h('span', {}, 'Warren')),
      h('span', { class: 'cluster', title: 'Cluster and version' }, [ov.cluster_name, ov.product_version || ov.rabbitmq_version].filter(Boolean).join(' · ')),
      h('div', { class: 'topbar-controls' },
        h('label', { class: 'ctl' }, icon('vhost'), vhostSelector()),
        h('label', { class: 'ctl' }, icon('refresh'), refresh),
        h('span', { class: 'whoami', title: `Tags: ${session.tags.join(', ')}` }, icon('user'), h('span', { id: 'whoami-name' }, session.user),
          h('span', { class: 'tags' }, session.tags.join(', '))),
        h('button', { type: 'button', class: 'btn btn-small', id: 'logout', onclick: logout }, 'Log out'))),
    h('div', { class: 'layout' }, navEl, main));
}

async function loadSession() {
  const who = await get('/api/whoami', { login: true });
  const tags = parseTags(who.tags);
  if (!hasManagementTag(tags)) {
    throw new ApiError(403, 'no_management_tag',
      `User “${who.name}” has no management tag (it has ${tags.length ? tags.join(', ') : 'none'}). ` +
      'The console needs one of management, monitoring, policymaker or administrator; ask an administrator to add one.');
  }
  session.user = who.name;
  session.tags = tags;
  const [vhosts, overview] = await Promise.all([
    get('/api/vhosts?columns=name', { login: true }).catch(() => []),
    get('/api/overview?columns=cluster_name,product_name,product_version,rabbitmq_version,node,exchange_types', { login: true }).catch(() => ({})),
  ]);
  session.vhosts = vhosts.map((v) => v.name);
  session.overview = overview;
  if (session.vhost && !session.vhosts.includes(session.vhost)) setVhost('');
}

function renderLogin(message) {
  main = null;
  const user = h('input', { type: 'text', id: 'login-user', name: 'username', autocomplete: 'username', required: true, autofocus: true });
  const pass = h('input', { type: 'password', id: 'login-pass', name: 'password', autocomplete: 'current-password' });
  const status = h('div', { class: 'login-status', role: 'alert' }, message ? errorBox(message) : null);
  const submit = h('button', { type: 'submit', class: 'btn btn-primary' }, 'Log in');
  const form = h('form', {
    class: 'login',
    onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      replace(status, loading('Checking…'));
      setCredentials(user.value, pass.value);
      try {
        await loadSession();
        pass.value = '';
        if (/^#\/?login/.test(location.hash)) location.hash = '#/';
        show();
      } catch (err) {
        clearCredentials();
        session.user = null;
        const e2 = err.status === 401 ? new ApiError(401, 'login failed', 'Wrong user name or password, or this user may not log in from here.') : err;
        replace(status, errorBox(e2));
        submit.disabled = false;
      }
    },
  },
  h('div', { class: 'login-brand' }, h('img', { src: 'favicon.svg', alt: '', width: 40, height: 40 }), h('h1', {}, 'Warren')),
  h('p', { class: 'login-sub' }, 'Log in with a broker user that has a management tag.'),
  h('div', { class: 'field' }, h('label', { for: 'login-user' }, 'Username'), user),
  h('div', { class: 'field' }, h('label', { for: 'login-pass' }, 'Password'), pass),
  submit, status);
  replace(root, h('div', { class: 'login-screen' }, form));
  user.focus();
}

function logout() {
  clearCredentials();
  session.user = null;
  session.tags = [];
  live.unwatch();
  if (current && current.destroy) current.destroy();
  current = null;
  location.hash = '#/';
  renderLogin();
}

// A 401 after login means the credentials stopped working -- or, on
// RabbitMQ, a tag the user lacks ("Not administrator user"). Only the
// former logs out: whoami tells them apart.
onUnauthorized(async () => {
  if (!session.user) return;
  try { await get('/api/whoami', { login: true }); return; } catch (e) { if (e.status !== 401) return; }
  clearCredentials();
  session.user = null;
  renderLogin(new ApiError(401, 'logged out', 'The broker no longer accepts these credentials; log in again.'));
});

window.addEventListener('hashchange', () => { if (session.user) show(); });

async function boot() {
  if (hasCredentials()) {
    const r = route();
    if (r) loadModule(r.mod).catch(() => {});
    try { await loadSession(); } catch (err) { clearCredentials(); renderLogin(err); return; }
    show();
  } else renderLogin();
}

boot();
