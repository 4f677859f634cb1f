// Queue-page timings in the browser, for the console and for RabbitMQ's own
// management UI, measured the same way: a full navigation to the queues
// page until its first page of rows is in the DOM, then a click on the
// "Total" (messages) header until the sorted rows are in the DOM, three
// times each; and the longest main-thread task meanwhile.
//
//   node perf.mjs console BASE [USER PASS]      (Warren, or the dev proxy)
//   node perf.mjs rabbitmq http://127.0.0.1:15672 [USER PASS]
import { launch, login } from './browser.mjs';

async function watchLongTasks(page) {
  await page.addInitScript(() => {
    window.__longTasks = [];
    new PerformanceObserver((l) => l.getEntries().forEach((e) => window.__longTasks.push(e.duration)))
      .observe({ type: 'longtask', buffered: true });
  });
}

async function longestTask(page) {
  return page.evaluate(() => Math.round(Math.max(0, ...(window.__longTasks || []))));
}

// How late a 50 ms timer fires at worst, 20 times over (1 s of probing).
async function timerLag(page) {
  return page.evaluate(async () => {
    let worst = 0;
    for (let i = 0; i < 20; i += 1) {
      const t = performance.now();
      await new Promise((r) => setTimeout(r, 50));
      worst = Math.max(worst, performance.now() - t - 50);
    }
    return Math.round(worst);
  });
}

// The longest request whose URL matches re, from the page's resource timing.
async function apiTime(page, re) {
  return page.evaluate((src) => Math.round(Math.max(0, ...performance.getEntriesByType('resource')
    .filter((e) => new RegExp(src).test(e.name)).map((e) => e.responseEnd - e.startTime))), re.source);
}

// The console: the page is logged in already (credentials in sessionStorage).
export async function measureConsole(page, base) {
  await page.evaluate(() => sessionStorage.removeItem('warren.table.queues'));
  await watchLongTasks(page);
  const loads = [];
  const loadApi = []; // of each, the API's own time for the page of queues
  for (let i = 0; i < 3; i += 1) {
    await page.goto(`${base}/#/`);
    await page.waitForSelector('#logout');
    const start = Date.now();
    await page.goto(`${base}/?r=${i}#/queues`);
    await page.waitForSelector('table.data[data-state=ready] tbody td[data-col=name] a');
    loads.push(Date.now() - start);
    loadApi.push(await apiTime(page, /\/api\/queues/));
  }
  const sorts = [];
  const sortApi = []; // of each sort, the API's own time (resource timing of its request)
  for (let i = 0; i < 3; i += 1) {
    await page.evaluate(() => performance.clearResourceTimings());
    const start = Date.now();
    await page.click('th button.sort:has-text("Total")');
    await page.waitForSelector(`table.data[data-state=ready][data-sort="messages${i % 2 === 0 ? ' desc' : ''}"]`);
    sorts.push(Date.now() - start);
    sortApi.push(await apiTime(page, /\/api\/queues.*sort=messages/));
  }
  const lag = await timerLag(page);
  const top = (await page.locator('table.data tbody tr').first().locator('td[data-col=messages]').textContent()).trim();
  return { loads, loadApi, sorts, sortApi, longest: await longestTask(page), lag, top };
}

export async function measureRabbitUI(page, base, user, pass) {
  await page.goto(`${base}/`);
  await page.fill('input[name=username]', user);
  await page.fill('input[name=password]', pass);
  await page.click('input[type=submit]');
  await page.waitForSelector('#logout, a[href="#/logout"], input[value="Log out"]', { timeout: 30000 }).catch(() => {});
  await watchLongTasks(page);
  const loads = [];
  for (let i = 0; i < 3; i += 1) {
    await page.goto(`${base}/#/`);
    await page.waitForSelector('#main');
    const start = Date.now();
    await page.goto(`${base}/?r=${i}#/queues`);
    await page.waitForSelector('table.list tbody tr td', { timeout: 120000 });
    loads.push(Date.now() - start);
  }
  const sorts = [];
  for (let i = 0; i < 3; i += 1) {
    const old = await page.$('table.list');
    const start = Date.now();
    await page.click('table.list a.sort[sort=messages]');
    await page.waitForFunction((t) => !t.isConnected, old, { timeout: 120000 });
    await page.waitForSelector('table.list tbody tr td', { timeout: 120000 });
    sorts.push(Date.now() - start);
  }
  const lag = await timerLag(page);
  return { loads, sorts, longest: await longestTask(page), lag };
}

export function describe(r) {
  return `first page from navigation ${r.loads.join(', ')} ms` +
    `${r.loadApi ? ` (of which the API ${r.loadApi.join(', ')} ms)` : ''}; sort by messages ${r.sorts.join(', ')} ms` +
    `${r.sortApi ? ` (of which the API ${r.sortApi.join(', ')} ms)` : ''}; ` +
    `longest task ${r.longest} ms; worst timer lag ${r.lag} ms${r.top ? ` (top row after sorting: ${r.top} messages)` : ''}`;
}

if (process.argv[1] && process.argv[1].endsWith('perf.mjs')) {
  const [what, base, user = 'guest', pass = 'guest'] = process.argv.slice(2);
  const { context, close } = await launch();
  const page = await context.newPage();
  let r;
  if (what === 'rabbitmq') r = await measureRabbitUI(page, base, user, pass);
  else {
    await login(page, base, user, pass);
    await page.waitForSelector('#logout');
    r = await measureConsole(page, base);
  }
  if (process.env.SHOT) await page.screenshot({ path: process.env.SHOT });
  console.log(`${what}: ${describe(r)}`);
  await close();
}
