// Development aid: screenshots of the given hash routes.
//   node shot.mjs BASE OUTDIR route...
import { launch, login } from './browser.mjs';
const [base, out, ...routes] = process.argv.slice(2);
const { context, close } = await launch();
const page = await context.newPage();
page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') console.log('console:', m.text()); });
page.on('pageerror', (e) => console.log('pageerror:', e.message));
await login(page, base, process.env.U || 'guest', process.env.P || 'guest');
await page.waitForSelector('#logout');
for (const r of routes) {
  const [route, w] = r.split('@');
  if (w) await page.setViewportSize({ width: Number(w), height: 800 });
  await page.goto(`${base}/#/${route}`);
  await page.waitForTimeout(1500);
  const name = (route || 'overview').replace(/[^a-z0-9]+/gi, '_') + (w ? `_${w}` : '');
  await page.screenshot({ path: `${out}/${name}.png`, fullPage: true });
  console.log('shot', name);
}
await close();
