// Keeps Warren's console open on the overview (refresh every 5 s, the
// default) for a bounded time, for the "console open" benchmark
// (tests/bench/mgmt_bench.py console). Prints "console open" once the
// overview shows, then counts the API requests the page made. BASE
// about:blank holds the same browser on an empty page (the control).
//   node hold.mjs BASE SECONDS [USER PASS]
import { launch, login } from './browser.mjs';

const [base, seconds, user = 'guest', pass = 'guest'] = process.argv.slice(2);
const { context, close } = await launch();
let requests = 0;
try {
  const page = context.pages()[0] || (await context.newPage());
  page.on('request', (r) => { if (r.url().includes('/api/')) requests++; });
  if (base === 'about:blank') {
    await page.goto(base);
  } else {
    await login(page, base, user, pass);
    await page.waitForSelector('#logout');
    await page.goto(`${base}/#/`);
    await page.waitForSelector('#chart-rates', { timeout: 20000 });
  }
  console.log('console open');
  const start = requests;
  // Until the time is up or SIGTERM, whichever comes first.
  await new Promise((done) => {
    setTimeout(done, Math.min(Number(seconds) || 10, 600) * 1000);
    process.once('SIGTERM', done);
  });
  console.log(`api requests while held: ${requests - start}`);
} finally {
  await close();
}
