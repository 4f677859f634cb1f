// Launches Debian's chromium through playwright-core with a fresh profile.
// `npx playwright install` cannot run here, so the browser is always
// /usr/bin/chromium (CHROMIUM overrides it).
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export async function launch() {
  const profile = mkdtempSync(join(tmpdir(), 'warren-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--headless', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
    viewport: { width: 1280, height: 800 },
    acceptDownloads: true,
  });
  const close = async () => {
    await context.close().catch(() => {});
    rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

export async function login(page, base, user, pass) {
  await page.goto(`${base}/#/`);
  await page.waitForSelector('form.login, #logout');
  if (await page.locator('#logout').count()) await page.click('#logout');
  await page.fill('#login-user', user);
  await page.fill('#login-pass', pass);
  await page.click('form.login button[type=submit]');
}
