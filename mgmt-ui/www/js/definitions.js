// Definitions (administrators): export users, vhosts, permissions,
// policies, exchanges, queues and bindings as a JSON file, and import one.
// An import is sent as the file's text, so the broker's validation message
// (JSON syntax position, the item it refuses) is what the user sees.
import { h, replace, field, select, errorBox, panel, icon } from './dom.js';
import { get, post } from './http.js';
import { runAction, notify } from './ui.js';
import { session } from './session.js';

const enc = encodeURIComponent;

function scopeSelect(id) {
  return select([['', 'All virtual hosts (whole broker)'], ...session.vhosts.map((v) => [v, v])], '', { id });
}

function download(name, text) {
  const url = URL.createObjectURL(new Blob([text], { type: 'application/json' }));
  const a = h('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

export async function render(el) {
  const exportScope = scopeSelect('export-vhost');
  const exportBtn = h('button', { type: 'button', class: 'btn btn-primary', id: 'export' }, icon('download'), 'Download definitions');
  exportBtn.addEventListener('click', () => runAction(exportBtn, async () => {
    const v = exportScope.value;
    const text = await get(v ? `/api/definitions/${enc(v)}` : '/api/definitions', { raw: true });
    const stamp = new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-');
    download(`warren-definitions${v ? `-${v.replace(/[^\w.-]+/g, '_')}` : ''}-${stamp}.json`, text);
  }, 'Definitions downloaded'));

  const importScope = scopeSelect('import-vhost');
  const file = h('input', { type: 'file', id: 'import-file', accept: '.json,application/json' });
  const result = h('div', { id: 'import-result', 'aria-live': 'polite' });
  const importBtn = h('button', { type: 'submit', class: 'btn btn-primary', id: 'import' }, icon('upload'), 'Upload definitions');
  const form = h('form', {
    onsubmit: async (e) => {
      e.preventDefault();
      replace(result);
      if (!file.files.length) { replace(result, errorBox(new Error('Choose a definitions file first.'))); return; }
      const text = await file.files[0].text();
      const v = importScope.value;
      importBtn.disabled = true;
      try {
        await post(v ? `/api/definitions/${enc(v)}` : '/api/definitions', text);
        replace(result, h('div', { class: 'ok-banner', role: 'status' }, icon('check'), `Imported ${file.files[0].name}.`));
        notify('Definitions imported');
      } catch (err) {
        replace(result, h('div', {}, h('p', {}, 'The broker refused this file; nothing was changed:'), errorBox(err)));
      } finally { importBtn.disabled = false; }
    },
  }, h('div', { class: 'form-grid' }, field('Definitions file', file), field('Import into', importScope)),
  h('div', { class: 'form-actions' }, importBtn), result);

  replace(el, h('div', { class: 'page-head' }, h('h1', {}, 'Definitions')),
    h('div', { class: 'grid-2' },
      panel('Export', h('p', { class: 'hint' }, 'Users (with password hashes), vhosts, permissions, policies, exchanges, queues and bindings, in RabbitMQ’s format.'),
        h('div', { class: 'form-grid' }, field('Export', exportScope)), h('div', { class: 'form-actions' }, exportBtn)),
      panel('Import', h('p', { class: 'hint' }, 'A RabbitMQ or Warren definitions file. It is checked in full before anything changes.'), form)));
  return { title: 'Definitions' };
}
