// Browser tests of the web console: Debian's chromium driven by
// playwright-core against a running console + API (Warren, or the dev
// proxy in front of RabbitMQ). Prints TAP lines "ok N - browser: <name>".
//
//   BASE=http://127.0.0.1:PORT AMQP_PORT=5672 node run.mjs
//
// Everything it creates lives in a vhost and a user named console-test-<id>,
// deleted through the UI at the end (and through the API if a test failed
// half-way). Screenshots of every page go to SHOTS (build/browser-screenshots).
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { launch, login } from './browser.mjs';
import { measureConsole, describe } from './perf.mjs';
import { streamTests } from './stream.mjs';
import { clusterTests } from './cluster.mjs';

const HERE = dirname(fileURLToPath(import.meta.url));
const BASE = process.env.BASE;
const AMQP_PORT = process.env.AMQP_PORT || '5672';
const ADMIN = [process.env.ADMIN_USER || 'guest', process.env.ADMIN_PASS || 'guest'];
const SHOTS = process.env.SHOTS || join(HERE, '..', '..', 'build', 'browser-screenshots');
const PERF_QUEUES = Number(process.env.PERF_QUEUES || 10000);
const ID = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const VHOST = `console-test-${ID}`;
const MON_USER = `console-test-${ID}-mon`;
const MON_PASS = `pw-${ID}`;
const QUEUE = 'console.orders';
const FLOWQ = 'console.flow';
const FLOW_RATE = 8; // msg/s through FLOWQ while the rate and chart tests run
const XSS = '<img src=x onerror=alert(1)>';
const enc = encodeURIComponent;

if (!BASE) { console.log('Bail out! BASE is not set'); process.exit(1); }
mkdirSync(SHOTS, { recursive: true });

let n = 0;
let failed = 0;
const figures = [];
// ONLY=text runs the tests whose name has it, and the setup they need.
const ONLY = process.env.ONLY || '';
async function test(name, fn, opts = {}) {
  if (ONLY && !opts.setup && !name.includes(ONLY)) return;
  n += 1;
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok ${n} - browser: ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    failed += 1;
    console.log(`not ok ${n} - browser: ${name}`);
    await page.screenshot({ path: join(SHOTS, `failed-${n}.png`) }).catch(() => {});
    String(err && err.stack ? err.stack : err).split('\n').slice(0, 6).forEach((l) => console.log(`# ${l}`));
  }
}
function assert(cond, msg) { if (!cond) throw new Error(msg); }
function skip(name, why) {
  if (ONLY && !name.includes(ONLY)) return;
  n += 1;
  console.log(`ok ${n} - browser: ${name} # SKIP ${why}`);
}

// Direct API calls (setup checks and cleanup), as a given user.
async function api(method, path, body, user = ADMIN) {
  const res = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Basic ${Buffer.from(user.join(':')).toString('base64')}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (() => { try { return JSON.parse(text); } catch (e) { return text; } })() : null };
}

async function waitFor(what, fn, ms = 30000) {
  const end = Date.now() + ms;
  let last;
  while (Date.now() < end) {
    try { last = await fn(); if (last) return last; } catch (e) { last = e; }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what} (last: ${last})`);
}

function helper(...args) {
  const p = spawn('/usr/bin/python3', [join(HERE, 'amqp_helper.py'), ...args], { stdio: ['pipe', 'pipe', 'inherit'] });
  p.output = '';
  const ready = new Promise((resolve, reject) => {
    let out = '';
    p.stdout.on('data', (d) => { out += d; p.output += d; if (/ready|made/.test(out)) resolve(out.trim()); });
    p.on('exit', (code) => (code ? reject(new Error(`amqp_helper ${args[0]} exited ${code}`)) : resolve(out.trim())));
  });
  return { proc: p, ready };
}

const { context, close } = await launch();
const page = await context.newPage();
const dialogs = [];
const pageErrors = [];
page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
page.on('pageerror', (e) => pageErrors.push(e.message));
page.on('console', (m) => { if (m.type() === 'error' && !/status of 40[0-9]/.test(m.text())) pageErrors.push(m.text()); });

async function shot(name, opts = {}) {
  await page.waitForTimeout(opts.settle ?? 400);
  // Back to the top, or the sticky header is drawn mid-page in a full-page shot.
  // Notices of earlier steps would cover the page.
  await page.evaluate(() => { window.scrollTo(0, 0); document.querySelectorAll('.toast').forEach((t) => t.remove()); });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: opts.full ?? true });
}
async function go(route) {
  const url = `${BASE}/#/${route}`;
  if (page.url() === url) await page.goto(`${BASE}/#/-`); // same hash: no hashchange, so leave first
  await page.goto(url);
  await page.waitForSelector(`#app[data-route="#/${route}"]`);
}
async function openPanel(title) {
  const d = page.locator('details.form-panel', { has: page.locator('summary', { hasText: title }) });
  if (!(await d.evaluate((el) => el.open))) await d.locator('summary').click();
  return d;
}
async function confirmDialog(typed) {
  const dlg = page.locator('dialog.confirm');
  await dlg.waitFor();
  if (typed) await dlg.locator('input').fill(typed);
  await dlg.locator('button[value=ok]').click();
  await dlg.waitFor({ state: 'detached' });
}
async function toast(re, ms = 10000) {
  return waitFor(`notice ${re}`, async () => {
    const texts = await page.locator('.toast').allTextContents();
    return texts.find((t) => re.test(t));
  }, ms);
}
function rowOf(name) {
  return page.locator('table.data tbody tr', { has: page.locator('td[data-col=name]', { hasText: name }) });
}

let consumer = null;
let flow = null;
let exported = null;

// Whatever a failed test left behind (also on a crash of this script).
async function cleanup() {
  if (consumer) consumer.proc.stdin.end();
  if (flow) flow.proc.stdin.end();
  await api('DELETE', `/api/users/${enc(MON_USER)}`).catch(() => {});
  await api('DELETE', `/api/vhosts/${enc(VHOST)}`).catch(() => {});
  if (exported) rmSync(exported, { force: true });
  await close();
}
process.on('uncaughtException', async (err) => {
  console.log(`not ok ${n + 1} - browser: the test script crashed: ${err.message}`);
  await cleanup();
  process.exit(1);
});

await test('login page; a wrong password is refused with a message', async () => {
  await page.goto(`${BASE}/`);
  await page.waitForSelector('form.login');
  const csp = (await page.request.get(`${BASE}/`)).headers()['content-security-policy'] || '';
  assert(/script-src 'self'/.test(csp) && /frame-ancestors 'none'/.test(csp), `CSP header: ${csp}`);
  await shot('01-login', { full: false });
  await page.fill('#login-user', ADMIN[0]);
  await page.fill('#login-pass', 'not-the-password');
  await page.click('form.login button[type=submit]');
  await page.waitForSelector('.login-status .state-error');
  await shot('02-login-refused', { full: false });
});

await test('log in as administrator; overview with charts, totals and node facts', async () => {
  await login(page, BASE, ...ADMIN);
  await page.waitForSelector('#logout');
  await page.waitForSelector('#chart-rates figure[data-points]');
  await page.waitForSelector('#node dl.facts, #node .hint');
  assert(await page.locator('.tiles .tile').count() >= 5, 'totals tiles');
  const facts = await page.locator('#node dl.facts').innerText();
  for (const fact of ['Uptime', 'Memory', 'File descriptors', 'Disk free', 'Journal size'])
    assert(facts.includes(fact), `node fact ${fact}: ${facts}`);
}, { setup: true });

await test('add a virtual host from the UI and select it', async () => {
  await go('vhosts');
  await (await openPanel('Add a virtual host')).waitFor();
  await page.fill('#vhost-name', VHOST);
  await page.fill('#vhost-description', 'browser test');
  await page.click('#vhost-add');
  await toast(/Virtual host .* added/);
  await waitFor('vhost row', () => rowOf(VHOST).count());
  assert(await page.locator(`#vhost-select option[value="${VHOST}"]`).count() === 1, 'the header lists the new vhost at once');
  // The creator gets full permissions (as RabbitMQ grants them); say so if not.
  const perms = await api('GET', `/api/vhosts/${enc(VHOST)}/permissions`);
  if (!(perms.json || []).some((p) => p.user === ADMIN[0])) {
    await api('PUT', `/api/permissions/${enc(VHOST)}/${enc(ADMIN[0])}`, { configure: '.*', write: '.*', read: '.*' });
  }
  await page.reload();
  await page.waitForSelector('#vhost-select');
  await page.selectOption('#vhost-select', VHOST);
  await page.waitForSelector('#app[data-route]');
}, { setup: true });

await test('a consuming AMQP client shows on connections, channels and consumers', async () => {
  consumer = helper('consume', AMQP_PORT, VHOST, 'console.consumed', ...ADMIN);
  await consumer.ready;
  await go('connections');
  await waitFor('connection row', async () => {
    await page.waitForTimeout(500);
    return (await page.locator('table.data tbody td[data-col=name] a').count()) > 0;
  }, 20000);
  await go('consumers');
  await waitFor('consumer row', async () => (await page.locator('table.data tbody tr', { hasText: 'console-test-consumer' }).count()) > 0, 20000);
});

await test('declare a queue from the UI; it appears in the table', async () => {
  await go('queues');
  await openPanel('Add a new queue');
  await page.fill('#q-name', QUEUE);
  await page.locator('.args-editor .arg-key').first().fill('x-max-length');
  await page.locator('.args-editor .arg-key').first().dispatchEvent('change');
  await page.locator('.args-editor .arg-value').first().fill('1000');
  await page.click('#q-add');
  await toast(/console\.orders.* declared/);
  await waitFor('queue row', () => rowOf(QUEUE).count());
  const q = await api('GET', `/api/queues/${enc(VHOST)}/${enc(QUEUE)}`);
  assert(q.status === 200 && q.json.arguments['x-max-length'] === 1000, `declared with a numeric argument: ${JSON.stringify(q.json.arguments)}`);
});

await test('add a binding from the queue page (amq.direct, key orders)', async () => {
  await go(`queues/${enc(VHOST)}/${enc(QUEUE)}`);
  await page.fill('#bind-other', 'amq.direct');
  await page.fill('#bind-key', 'orders');
  await page.click('#bind-submit');
  await toast(/Binding added/);
  await page.locator('#queue-bindings table.bindings td', { hasText: 'orders' }).first().waitFor();
});

await test('publish from the exchange page; the message is routed', async () => {
  await go(`exchanges/${enc(VHOST)}/amq.direct`);
  await page.locator('#bindings-source td', { hasText: 'orders' }).first().waitFor();
  await openPanel('Publish a message');
  await page.fill('#pub-key-amq\\.direct', 'orders');
  await page.fill('#pub-payload', '{"order":42,"items":["tea","cake"]}');
  await page.click('#pub-submit');
  await toast(/routed$/);
  await shot('07-exchange');
});

// Warren's ring route (RabbitMQ has none): the x-consistent-hash panel.
if (process.env.CONSOLE_TARGET === 'warren') {
  await test('an x-consistent-hash exchange page shows its hash ring', async () => {
    const x = 'console.ring';
    const put = await api('PUT', `/api/exchanges/${enc(VHOST)}/${x}`, { type: 'x-consistent-hash' });
    assert(put.status === 201, `declare: ${put.status}`);
    for (const [q, w] of [['console.ring.a', '1'], ['console.ring.b', '3']]) {
      await api('PUT', `/api/queues/${enc(VHOST)}/${q}`, {});
      const b = await api('POST', `/api/bindings/${enc(VHOST)}/e/${x}/q/${q}`, { routing_key: w });
      assert(b.status === 201, `bind ${q}: ${b.status}`);
    }
    await go(`exchanges/${enc(VHOST)}/${x}`);
    await page.locator('#exchange-ring td', { hasText: 'console.ring.b' }).first().waitFor();
    const text = await page.locator('#exchange-ring').textContent();
    assert(text.includes('1–3') && text.includes('75.0%'), `ring table: ${text}`);
  });
} else {
  skip('an x-consistent-hash exchange page shows its hash ring', 'the ring route is Warren\'s');
}

await test("the queue's count changes in the table (live refresh)", async () => {
  await go('queues');
  await waitFor('Ready = 1', async () => (await rowOf(QUEUE).locator('td[data-col=messages_ready]').textContent()).trim() === '1', 30000);
  await shot('06-queues');
});

// What a person reads: the rate cells, the chart and its legend, the tiles.
await test('a rate cell shows a number while a publisher runs; queue type shown by default', async () => {
  flow = helper('flow', AMQP_PORT, VHOST, FLOWQ, String(FLOW_RATE), ...ADMIN);
  await flow.ready;
  await go('queues');
  const row = rowOf(FLOWQ);
  const text = await waitFor('a publish rate in its cell', async () => {
    const t = (await row.locator('td[data-col=publish]').textContent()).trim();
    return /^\d+\.\d\/s$/.test(t) && parseFloat(t) > 0 ? t : null;
  }, 40000);
  for (const col of ['deliver', 'ack']) {
    const t = (await row.locator(`td[data-col=${col}]`).textContent()).trim();
    assert(/^\d+\.\d\/s$/.test(t), `the ${col} cell shows a rate: ${t}`);
  }
  figures.push(`queues page, ${FLOW_RATE} msg/s flowing: Incoming cell "${text}"`);
  assert(await page.locator('table.data th', { hasText: 'Type' }).count() === 1, 'a Type column');
  assert((await rowOf(QUEUE).locator('td[data-col=type]').textContent()).trim() === 'classic', 'the queue type');
});

await test("the queue page's charts are the API's samples; the legend says the tiles' rate; no 404", async () => {
  let last = null;
  const failed = [];
  const queuePath = `/api/queues/${enc(VHOST)}/${enc(FLOWQ)}`;
  const onResponse = async (res) => {
    const u = new URL(res.url());
    if (res.status() >= 400) failed.push(`${res.status()} ${u.pathname}`);
    if (u.pathname === queuePath && u.searchParams.get('lengths_age')) last = await res.json().catch(() => last);
  };
  page.on('response', onResponse);
  try {
    await go(`queues/${enc(VHOST)}/${enc(FLOWQ)}`);
    await waitFor('three samples and a publish rate', () => last && last.messages_ready_details?.samples?.length >= 3
      && last.message_stats?.publish_details?.rate > 0, 40000);
    // The page refreshes every 5 s: compare the figure with the reply it drew.
    const seen = await waitFor('the charts drawn from the last reply', async () => {
      const q = last;
      const lengths = JSON.parse(await page.locator('#queue-chart-lengths figure').getAttribute('data-series'));
      const want = q.messages_ready_details.samples.slice().reverse().map((s) => [s.timestamp, s.sample]);
      return JSON.stringify(lengths[0]) === JSON.stringify(want) ? q : null;
    }, 20000);
    const fig = page.locator('#queue-chart-rates figure');
    const rates = JSON.parse(await fig.getAttribute('data-series'));
    const samples = seen.message_stats.publish_details.samples;
    assert(rates[0].length === samples.length - 1, `${rates[0].length} rate points from ${samples.length} samples`);
    rates[0].forEach(([t, v], i) => {
      const a = samples[samples.length - 1 - i];
      const b = samples[samples.length - 2 - i];
      const want = (b.sample - a.sample) / ((b.timestamp - a.timestamp) / 1000);
      assert(t === b.timestamp && Math.abs(v - want) < 1e-9, `rate point ${i}: ${t} ${v}, samples give ${b.timestamp} ${want}`);
    });
    // the time axis spans the samples: from the oldest for a level, from
    // the second oldest for a rate (the first rate needs two samples)
    // (RabbitMQ's lengths and rates have samples of their own times)
    const levels = seen.messages_ready_details.samples;
    const [t0, t1] = JSON.parse(await page.locator('#queue-chart-lengths figure').getAttribute('data-span'));
    const [r0, r1] = JSON.parse(await fig.getAttribute('data-span'));
    assert(t0 === levels[levels.length - 1].timestamp && t1 === levels[0].timestamp,
      `lengths axis ${t0}..${t1}, samples ${levels[levels.length - 1].timestamp}..${levels[0].timestamp}`);
    assert(r0 === samples[samples.length - 2].timestamp && r1 === samples[0].timestamp,
      `rates axis ${r0}..${r1}, samples ${samples[samples.length - 2].timestamp}..${samples[0].timestamp}`);
    if (process.env.CONSOLE_TARGET === 'warren') {
      // ten minutes asked; a queue holds a minute: no invented history
      assert(levels.length <= 13 && t1 - t0 <= 60000, `${levels.length} samples over ${t1 - t0} ms`);
    }
    const legend = (await fig.locator('.legend li', { hasText: 'Publish' }).locator('.legend-value').textContent()).trim();
    const tile = (await page.locator('#queue-tiles .tile', { hasText: 'Incoming' }).locator('.value').textContent()).trim();
    assert(parseFloat(legend) === parseFloat(tile) && parseFloat(tile) > 0, `legend ${legend}, tile ${tile}`);
    figures.push(`queue page: ${samples.length} samples over ${(t1 - t0) / 1000} s, legend "${legend}", tile "${tile}"`);
    await page.locator('#queue-breakdown').waitFor();
    const breakdown = await page.locator('#queue-breakdown').innerText();
    for (const row of ['In RAM', 'Persistent', 'Paged out']) assert(breakdown.includes(row), `breakdown row ${row}: ${breakdown}`);
    assert(/Consumer capacity: \d+%/.test(await page.locator('#queue-capacity').textContent()), 'consumer capacity shown');
    await page.waitForTimeout(1000);
    assert(!failed.length, `requests failed on a queue page without a move: ${failed.join(', ')}`);
  } finally {
    page.off('response', onResponse);
  }
});

await test('a chart leaves a gap where samples are missing, and labels its time axis by age', async () => {
  const r = await page.evaluate(async () => {
    const { runsOf, spanOf, agoLabel } = await import('/js/chart.js');
    const pts = [0, 5000, 10000, 30000, 35000].map((t) => ({ t, v: 1 }));
    return { runs: runsOf(pts).map((run) => run.length), span: spanOf([pts, []]), one: spanOf([[{ t: 5, v: 1 }]]),
      labels: [agoLabel(100000, 100000), agoLabel(55000, 100000), agoLabel(0, 600000)] };
  });
  assert(JSON.stringify(r.runs) === '[3,2]', `runs ${JSON.stringify(r.runs)}`);
  assert(JSON.stringify(r.span) === '[0,35000]' && r.one === null, `span ${JSON.stringify(r.span)} ${r.one}`);
  assert(JSON.stringify(r.labels) === '["now","-45 s","-10 min"]', `labels ${JSON.stringify(r.labels)}`);
});

await test('the ack-mode and move selects are as wide as their longest option', async () => {
  await go(`queues/${enc(VHOST)}/${enc(QUEUE)}`);
  await openPanel('Get messages');
  await openPanel('Move messages');
  try {
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 844 });
      for (const id of ['get-ackmode', 'move-target']) {
        const m = await page.evaluate((sel) => {
          const s = document.getElementById(sel);
          const shown = s.getBoundingClientRect().width;
          s.style.width = 'max-content';
          const natural = s.getBoundingClientRect().width;
          s.style.width = '';
          return { shown, natural, right: s.getBoundingClientRect().right };
        }, id);
        assert(m.shown >= m.natural - 1 && m.right <= width, `#${id} at ${width} px: ${JSON.stringify(m)}`);
      }
    }
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
});

await test('count columns on screen: phone (390x844) cards, and every column at 1280 px', async () => {
  try {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [route, name, cols] of [['queues', FLOWQ, ['messages_ready', 'messages', 'publish', 'consumers']],
      ['channels', null, ['messages_unacknowledged', 'publish', 'ack']]]) {
      await go(route);
      await page.waitForSelector('table.data[data-state=ready] tbody td[data-label]');
      const row = name ? rowOf(name) : page.locator('table.data tbody tr').first();
      for (const col of cols) {
        const box = await row.locator(`td[data-col=${col}]`).boundingBox();
        assert(box && box.x >= 0 && box.x + box.width <= 390, `${route}: ${col} at ${JSON.stringify(box)}`);
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert(overflow <= 1, `${route} is ${overflow}px wider than the screen`);
      await shot(`26-narrow-${route}-cards`);
    }
    await go(`queues/${enc(VHOST)}/${enc(FLOWQ)}`);
    const prefetch = page.locator('table.cards td[data-label=Prefetch]').first();
    await prefetch.waitFor();
    const pbox = await prefetch.boundingBox();
    assert(pbox.x >= 0 && pbox.x + pbox.width <= 390, `the consumer's prefetch at ${JSON.stringify(pbox)}`);
  } finally {
    await page.setViewportSize({ width: 1280, height: 800 });
  }
  for (const route of ['connections', 'queues', 'consumers', 'channels']) {
    await go(route);
    await page.waitForSelector('table.data[data-state=ready]');
    const m = await page.evaluate(() => { const s = document.querySelector('.table-scroll'); return [s.scrollWidth, s.clientWidth]; });
    assert(m[0] <= m[1], `${route} at 1280 px: the table is ${m[0]} px in ${m[1]}`);
  }
  const link = page.locator('table.data td[data-col=name] .conn-name').first();
  const addrs = await link.locator('.addr').evaluateAll((els) => els.map((e) => e.getClientRects().length));
  assert(addrs.length === 2 && addrs.every((n) => n === 1), `each address on one line: ${JSON.stringify(addrs)}`);
  await shot('05-channels');
});
// The flow's connection would be a second one in the vhost for the close test.
if (flow) { flow.proc.stdin.end(); flow = null; }

await test("the queue page's chart moves", async () => {
  await go(`queues/${enc(VHOST)}/${enc(QUEUE)}`);
  await waitFor('chart shows a ready message', async () => {
    const latest = JSON.parse(await page.locator('#queue-chart-lengths figure').getAttribute('data-latest') || '[]');
    return latest[0] >= 1;
  }, 30000);
});

await test('get the message back: JSON pretty-printed, base64, text', async () => {
  await openPanel('Get messages');
  await page.selectOption('#get-ackmode', 'ack_requeue_true');
  await page.click('#get-submit');
  const pre = page.locator('.message pre.payload').first();
  await pre.waitFor();
  const pretty = await pre.textContent();
  assert(pretty.includes('"order": 42') && pretty.includes('\n'), `pretty JSON: ${pretty}`);
  await page.selectOption('.payload-view', 'base64');
  assert((await pre.textContent()) === Buffer.from('{"order":42,"items":["tea","cake"]}').toString('base64'), 'base64 view');
  await page.selectOption('.payload-view', 'text');
  assert((await pre.textContent()) === '{"order":42,"items":["tea","cake"]}', 'text view');
  await page.selectOption('.payload-view', 'json');
  await shot('08-queue');
});

await test('move messages from a queue to another after a confirmation; progress and report shown', async () => {
  const src = 'console.redrive.dlq';
  const dst = 'console.redrive.work';
  for (const q of [src, dst]) assert((await api('PUT', `/api/queues/${enc(VHOST)}/${enc(q)}`, { durable: true })).status < 300, `declare ${q}`);
  for (let i = 0; i < 3; i += 1) {
    await api('POST', `/api/exchanges/${enc(VHOST)}/amq.default/publish`, { properties: { headers: { app: 'kept' } }, routing_key: src, payload: `m${i}`, payload_encoding: 'string' });
  }
  await go(`queues/${enc(VHOST)}/${enc(src)}`);
  await openPanel('Move messages');
  await page.selectOption('#move-target', 'queue');
  await page.fill('#move-dest', dst);
  await page.click('#move-submit');
  await page.locator('dialog.confirm button[value=cancel]').click();
  assert((await api('GET', `/api/queues/${enc(VHOST)}/${enc(src)}/move`)).status === 404, 'cancel starts nothing');
  await page.click('#move-submit');
  await confirmDialog();
  await page.locator('#move-progress[data-state=finished]').waitFor({ timeout: 15000 });
  const report = await page.locator('#move-report').textContent();
  assert(report.includes(`${dst}: 3`), `report: ${report}`);
  const moved = await api('GET', `/api/queues/${enc(VHOST)}/${enc(dst)}`);
  assert(moved.json.messages === 3, `destination holds 3: ${moved.json.messages}`);
  await shot('08b-queue-move');
});

await test('the XSS queue name renders as text; no dialog fires', async () => {
  await go('queues');
  await openPanel('Add a new queue');
  await page.fill('#q-name', XSS);
  await page.click('#q-add');
  await toast(/onerror.* declared/);
  const cell = rowOf('onerror').locator('td[data-col=name] a');
  await cell.waitFor();
  assert((await cell.textContent()) === XSS, 'name shown verbatim');
  assert(await page.locator('table.data img').count() === 0, 'no <img> element was created');
  await cell.click();
  await page.waitForSelector('#queue-name');
  assert((await page.textContent('#queue-name')) === XSS, 'queue page title is the text');
  assert(await page.locator('main img').count() === 0, 'no <img> on the queue page');
  await page.waitForTimeout(500);
  assert(dialogs.length === 0, `dialogs: ${dialogs.join(' | ')}`);
  await shot('09-queue-xss');
});

await test('create a monitoring user with a password and permissions', async () => {
  await go('users');
  await openPanel('Add a user');
  await page.fill('#user-name', MON_USER);
  await page.fill('#user-pass', MON_PASS);
  await page.uncheck('input[data-tag=management]');
  await page.check('input[data-tag=monitoring]');
  await page.click('#user-add');
  await toast(/User .* added/);
  await waitFor('user row', () => rowOf(MON_USER).count());
  await shot('10-users');
  await rowOf(MON_USER).locator('a').click();
  await page.waitForSelector('#perm-vhost');
  await page.selectOption('#perm-vhost', VHOST);
  await page.click('#perm-set');
  await toast(/Permission set/);
  await page.locator('table.simple td', { hasText: VHOST }).first().waitFor();
  await shot('11-user');
});

await test('create a policy with a known key', async () => {
  await go('policies');
  await openPanel('Add or update a policy');
  await page.selectOption('#pol-vhost', VHOST);
  await page.fill('#pol-name', 'console-ttl');
  await page.fill('#pol-pattern', '^console\\.');
  await page.locator('.arg-suggestions button', { hasText: 'Message TTL' }).click();
  await page.locator('form .args-row').first().locator('.arg-value').fill('60000');
  await page.click('#pol-submit');
  await toast(/saved/);
  await waitFor('policy row', () => rowOf('console-ttl').count());
  const p = await api('GET', `/api/policies/${enc(VHOST)}/console-ttl`);
  assert(p.status === 200 && p.json.definition['message-ttl'] === 60000, `policy: ${JSON.stringify(p.json)}`);
  await shot('12-policies');
});

await test('shovels page: state, ends, counts, restart', async () => {
  const value = { 'src-uri': `amqp:///${enc(VHOST)}`, 'src-queue': 'console.shovel.in',
    'dest-uri': `amqp:///${enc(VHOST)}`, 'dest-queue': 'console.shovel.out' };
  const put = await api('PUT', `/api/parameters/shovel/${enc(VHOST)}/console-shovel`, { value });
  assert(put.status === 201, `shovel: ${put.status}`);
  try {
    await go('shovels');
    await waitFor('shovel row running', async () => (await rowOf('console-shovel').textContent()).includes('running'));
    const row = await rowOf('console-shovel').textContent();
    assert(row.includes('console.shovel.in') && row.includes('console.shovel.out'), `row: ${row}`);
    await shot('12b-shovels');
    await rowOf('console-shovel').locator('button', { hasText: 'Restart' }).click();
    await toast(/restarted/);
  } finally {
    await api('DELETE', `/api/parameters/shovel/${enc(VHOST)}/console-shovel`);
  }
});

await test('federation status page: a running link, restart', async () => {
  const v = enc(VHOST);
  const up = { uri: `amqp:///${v}`, queue: 'console.fed.src' };
  const pol = { pattern: '^console\\.fed$', 'apply-to': 'queues', definition: { 'federation-upstream': 'console-fed' } };
  assert((await api('PUT', `/api/parameters/federation-upstream/${v}/console-fed`, { value: up })).status === 201, 'upstream');
  try {
    assert((await api('PUT', `/api/queues/${v}/console.fed`, { durable: false })).status === 201, 'queue');
    assert((await api('PUT', `/api/policies/${v}/console-fed`, pol)).status === 201, 'policy');
    await go('federation');
    const row = () => page.locator('table.data tbody tr', { has: page.locator('td[data-col=upstream]', { hasText: 'console-fed' }) });
    await waitFor('federation row running', async () => (await row().textContent()).includes('running'));
    assert((await row().textContent()).includes('console.fed.src'), `row: ${await row().textContent()}`);
    await shot('12c-federation');
    await row().locator('button', { hasText: 'Restart' }).click();
    await toast(/restarted/);
  } finally {
    await api('DELETE', `/api/policies/${v}/console-fed`);
    await api('DELETE', `/api/parameters/federation-upstream/${v}/console-fed`);
    await api('DELETE', `/api/queues/${v}/console.fed`);
    await api('DELETE', `/api/queues/${v}/console.fed.src`);
  }
});

await test('export definitions (download) and re-import them', async () => {
  await go('definitions');
  await page.selectOption('#export-vhost', VHOST);
  const [dl] = await Promise.all([page.waitForEvent('download'), page.click('#export')]);
  exported = join(SHOTS, '..', `definitions-${ID}.json`);
  await dl.saveAs(exported);
  const defs = JSON.parse(readFileSync(exported, 'utf8'));
  assert((defs.queues || []).some((q) => q.name === QUEUE), 'the export has the queue');
  await page.selectOption('#import-vhost', VHOST);
  await page.setInputFiles('#import-file', exported);
  await page.click('#import');
  await page.locator('#import-result .ok-banner').waitFor();
});

await test('a bad import is refused and the reason is shown', async () => {
  const bad = join(SHOTS, '..', `bad-definitions-${ID}.json`);
  writeFileSync(bad, '{"queues": [ {"name": "x", ');
  await page.setInputFiles('#import-file', bad);
  await page.click('#import');
  const err = page.locator('#import-result .state-error');
  await err.waitFor();
  assert((await err.textContent()).length > 10, 'a reason is shown');
  await shot('13-definitions-bad-import');
  rmSync(bad, { force: true });
});

await test('screenshots of every page (1280x800 and 390 px)', async () => {
  await go('');
  await page.waitForSelector('#chart-rates figure[data-points]');
  await shot('03-overview', { settle: 800 });
  const pages = [['04-connections', 'connections'], ['05-channels', 'channels'], ['05-consumers', 'consumers'],
    ['07-exchanges', 'exchanges'], ['14-vhosts', 'vhosts'], ['15-definitions', 'definitions']];
  for (const [name, route] of pages) { await go(route); await page.waitForSelector('main .page table.data[data-state=ready], main .page .panel'); await shot(name); }
  const conn = await api('GET', `/api/vhosts/${enc(VHOST)}/connections`);
  if (conn.json && conn.json.length) { await go(`connections/${enc(conn.json[0].name)}`); await page.waitForSelector('.facts'); await shot('04-connection'); }
  await page.setViewportSize({ width: 390, height: 844 });
  for (const [name, route] of [['20-narrow-overview', ''], ['21-narrow-queues', 'queues'], ['22-narrow-queue', `queues/${enc(VHOST)}/${enc(QUEUE)}`]]) {
    await go(route); await page.waitForTimeout(600); await shot(name);
  }
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 1, `the page is ${overflow}px wider than a 390 px screen`);
  await page.setViewportSize({ width: 1280, height: 800 });
});

// Alarms, blocked publishers and poison messages cannot be caused on a
// shared RabbitMQ, so the API's answers are altered on their way to the
// page: the check is that the console shows them in words and icons.
async function alter(path, fn) {
  await page.route((u) => u.pathname === path, async (route) => {
    const res = await route.fetch();
    let body = await res.text();
    try { body = JSON.stringify(fn(JSON.parse(body))); } catch (e) { /* an error reply: pass it on */ }
    await route.fulfill({ response: res, body });
  });
}

await test('alarm, blocked and poison states are shown with words and icons, not colour alone', async () => {
  await alter('/api/nodes', (nodes) => nodes.map((n) => ({ ...n, mem_alarm: true })));
  await go('');
  const banner = page.locator('.alarm-banner');
  await banner.waitFor();
  assert(/ALARM/.test(await banner.textContent()) && /Memory alarm/.test(await banner.textContent()), 'alarm in words');
  assert(await banner.locator('svg.icon').count() === 1, 'alarm icon');
  await shot('23-alarm');
  await alter(`/api/vhosts/${enc(VHOST)}/connections`, (d) => {
    const block = (c) => ({ ...c, state: 'blocked' });
    return Array.isArray(d) ? d.map(block) : { ...d, items: d.items.map(block) };
  });
  await go('connections');
  const blocked = page.locator('table.data .badge-blocked');
  await blocked.first().waitFor();
  assert((await blocked.first().textContent()).includes('blocked'), 'blocked in words');
  await shot('24-blocked');
  await alter(`/api/queues/${enc(VHOST)}/${enc(QUEUE)}`, (q) => ({
    ...q, oldest_ready_age_ms: 754000, oldest_unacked_age_ms: 3000,
    delivery_count_histogram: { 0: 40, 1: 6, 2: 2, '3-4': 1, '5-9': 3, '10-19': 0, '20-49': 1, '50+': 0 },
  }));
  await go(`queues/${enc(VHOST)}/${enc(QUEUE)}`);
  const poison = page.locator('#queue-health .badge-poison');
  await poison.first().waitFor();
  assert(await poison.count() === 2, `two poison buckets (5-9, 20-49), saw ${await poison.count()}`);
  assert((await page.locator('#queue-health').textContent()).includes('12 min 34 s'), 'oldest ready age');
  await page.locator('#queue-health').scrollIntoViewIfNeeded();
  await page.locator('#queue-health').screenshot({ path: join(SHOTS, '25-queue-health.png') });
  await page.unrouteAll({ behavior: 'wait' });
});

await test('purge a queue and delete one, each after a confirmation', async () => {
  await go(`queues/${enc(VHOST)}/${enc(QUEUE)}`);
  await page.click('#queue-purge');
  await confirmDialog();
  await toast(/purged/);
  await waitFor('queue empty', async () => (await api('GET', `/api/queues/${enc(VHOST)}/${enc(QUEUE)}`)).json.messages_ready === 0, 20000);
  await go(`queues/${enc(VHOST)}/${enc(XSS)}`);
  await page.click('#queue-delete');
  await page.locator('dialog.confirm button[value=cancel]').click();
  assert((await api('GET', `/api/queues/${enc(VHOST)}/${enc(XSS)}`)).status === 200, 'cancel keeps the queue');
  await page.click('#queue-delete');
  await confirmDialog();
  await page.waitForSelector('#app[data-route="#/queues"]');
  assert((await api('GET', `/api/queues/${enc(VHOST)}/${enc(XSS)}`)).status === 404, 'queue deleted');
});

await test('close a connection with a reason', async () => {
  const conns = await waitFor('the consumer connection', async () => {
    const c = await api('GET', `/api/vhosts/${enc(VHOST)}/connections`);
    return c.json && c.json.length ? c.json : null;
  }, 20000);
  const name = conns[0].name;
  await go(`connections/${enc(name)}`);
  await page.fill('#close-reason', 'closed by the console test');
  await page.click('#close-connection');
  await confirmDialog();
  await toast(/Connection closed/);
  await waitFor('the connection to be gone', async () => (await api('GET', `/api/connections/${enc(name)}`)).status === 404, 20000);
  if (consumer) {
    const c = consumer;
    consumer = null;
    await waitFor('the client to hear the reason', () => /closed 320 CONNECTION_FORCED - closed by the console test/.test(c.proc.output), 10000);
  }
});

// The console's targets (first page under 1 s from navigation, a sort under
// 500 ms, no task over 250 ms) are figures: perf.mjs measures them (and
// RabbitMQ's UI the same way), and this test records them. On a shared
// machine it asserts only bounds five times as generous: it catches a
// console that stalls, not one that is merely slow today.
await streamTests({ test, assert, api, go, waitFor, page, shot, helper, VHOST, AMQP_PORT, ADMIN, BASE });

await test(`${PERF_QUEUES} queues: first page, sort by messages, responsive (generous bounds)`, async () => {
  const t0 = Date.now();
  await helper('mkqueues', AMQP_PORT, VHOST, 'perf.q', String(PERF_QUEUES), ...ADMIN).ready;
  figures.push(`declared ${PERF_QUEUES} queues in ${Date.now() - t0} ms`);
  await waitFor('all queues listed', async () => (await api('GET', `/api/queues/${enc(VHOST)}?page=1&page_size=1&columns=name`)).json.total_count >= PERF_QUEUES, 120000);
  // Stats settle (RabbitMQ emits them every 5 s).
  await page.waitForTimeout(6000);
  const r = await measureConsole(page, BASE);
  figures.push(`${PERF_QUEUES} queues, the console's queues page: ${describe(r)}`);
  await shot('16-queues-10000');
  // The median of three runs: this machine is shared, one run can be unlucky.
  const median = (xs) => xs.slice().sort((a, b) => a - b)[1];
  if (process.env.CONSOLE_TARGET === 'warren') {
    assert(median(r.loads) < 5000, `first page took ${r.loads.join(', ')} ms`);
    assert(median(r.sorts) < 2500, `sorting took ${r.sorts.join(', ')} ms`);
  } else {
    // Through the dev proxy to RabbitMQ the API's own time (RabbitMQ sorts
    // 10,000 queues in about a second) is not the console's: the console's
    // share of a sort -- request to rendered rows -- must stay under 500 ms.
    console.log('# not Warren: the bounds are checked on the console\'s share (the time minus the API\'s)');
    const ownSort = r.sorts.map((t, i) => t - r.sortApi[i]);
    const ownLoad = r.loads.map((t, i) => t - r.loadApi[i]);
    assert(median(ownLoad) < 5000, `the console's share of the first page took ${ownLoad.join(', ')} ms`);
    assert(median(ownSort) < 2500, `the console's share of sorting took ${ownSort.join(', ')} ms`);
  }
  assert(r.longest < 1250, `a task blocked the page for ${r.longest} ms`);
});

await test('log out', async () => {
  await page.click('#logout');
  await page.waitForSelector('form.login');
  assert(await page.evaluate(() => sessionStorage.getItem('warren.auth')) === null, 'credentials forgotten');
});

await test('monitoring user: admin actions not offered, and refused by the API', async () => {
  await login(page, BASE, MON_USER, MON_PASS);
  await page.waitForSelector('#logout');
  for (const nav of ['users', 'policies', 'definitions']) {
    assert(await page.locator(`nav a[data-nav=${nav}]`).count() === 0, `${nav} is offered`);
  }
  await go('vhosts');
  await page.waitForSelector('table.data[data-state=ready]');
  assert(await page.locator('#vhost-add').count() === 0, 'add vhost offered');
  assert(await page.locator('button[data-vhost]').count() === 0, 'delete vhost offered');
  await shot('17-monitoring-vhosts');
  await go('');
  await page.waitForSelector('#node dl.facts');
  await shot('18-monitoring-overview');
  const results = await page.evaluate(async ([vhost, id]) => {
    const auth = `Basic ${sessionStorage.getItem('warren.auth')}`;
    const call = async (method, path, body) => (await fetch(path, { method, headers: { Authorization: auth, 'Content-Type': 'application/json' }, body: body && JSON.stringify(body) })).status;
    return {
      addUser: await call('PUT', `/api/users/console-test-${id}-evil`, { password: 'x', tags: 'administrator' }),
      addVhost: await call('PUT', `/api/vhosts/console-test-${id}-evil`, {}),
      deleteVhost: await call('DELETE', `/api/vhosts/${encodeURIComponent(vhost)}`),
      importDefs: await call('POST', '/api/definitions', { users: [] }),
      exportDefs: await call('GET', '/api/definitions'),
      setPolicy: await call('PUT', `/api/policies/${encodeURIComponent(vhost)}/evil`, { pattern: '.*', definition: { 'max-length': 0 } }),
    };
  }, [VHOST, ID]);
  // RabbitMQ 3.10 answers a missing tag with 401 "Not administrator user"; Warren with 403.
  const refused = Object.entries(results).filter(([, s]) => s !== 401 && s !== 403);
  assert(!refused.length, `not refused: ${JSON.stringify(results)}`);
  figures.push(`monitoring user's admin calls answered ${JSON.stringify(results)}`);
  assert((await api('GET', `/api/users/console-test-${ID}-evil`)).status === 404, 'the user was not created');
  assert((await api('GET', `/api/vhosts/${enc(VHOST)}`)).status === 200, 'the vhost is still there');
  // The console did not log the user out on those refusals.
  await go('queues');
  assert(await page.locator('#logout').count() === 1, 'still logged in');
  await page.click('#logout');
});

await clusterTests({ test, assert, waitFor, page, shot, go, ADMIN, BASE, skip });

await test('clean up through the UI: delete the user, then the vhost (typed confirmation)', async () => {
  if (consumer) { consumer.proc.stdin.end(); consumer = null; }
  if (flow) { flow.proc.stdin.end(); flow = null; }
  await login(page, BASE, ...ADMIN);
  await page.waitForSelector('#logout');
  await page.selectOption('#vhost-select', '');
  await go('users');
  await rowOf(MON_USER).locator('button').click();
  await confirmDialog();
  await toast(/User .* deleted/);
  await go('vhosts');
  await rowOf(VHOST).locator('button[data-vhost]').click();
  await shot('19-delete-vhost-confirm', { full: false });
  await confirmDialog(VHOST);
  await toast(/Virtual host .* deleted/, 120000); // RabbitMQ takes a while with 10,000 queues
  await waitFor('the vhost to be gone', async () => (await api('GET', `/api/vhosts/${enc(VHOST)}`)).status === 404, 20000);
});

await test('no script errors on any page', async () => {
  assert(!pageErrors.length, pageErrors.join(' | '));
}, { setup: true });

await cleanup();
figures.forEach((f) => console.log(`# figure: ${f}`));
console.log(`# screenshots in ${SHOTS}`);
console.log(`1..${n}`);
process.exit(failed ? 1 : 0);
