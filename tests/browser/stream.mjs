// The stream page's browser tests (issue 20), run by run.mjs in its vhost:
// an AMQP client (amqp_helper.py stream) fills a stream with 25 messages
// and holds a consumer at offset 3; the page must show what a person
// checks -- the record count, first / last / committed offset, size on disk,
// segments, retention and where each setting comes from, the consumer's
// offset and lag -- and the viewer must read from an offset without moving
// anything. `ONLY=stream` runs these (and the setup they need) alone.
const STREAM = 'console.events';
const COUNT = 25;

export async function streamTests(t) {
  const { test, assert, api, go, waitFor, page, shot, helper, VHOST, AMQP_PORT, ADMIN } = t; // run.mjs's
  const enc = encodeURIComponent;
  const apiPath = `/api/queues/${enc(VHOST)}/${enc(STREAM)}`;
  let client = null;
  const text = async (sel) => (await page.locator(sel).innerText()).replace(/\s+/g, ' ').trim();
  const tileValue = async (id) => (await text(`#${id} .value`));

  await test('a stream from the queues list opens its stream page with its log figures', async () => {
    client = helper('stream', AMQP_PORT, VHOST, STREAM, String(COUNT), ...ADMIN);
    await client.ready;
    await go('queues');
    const link = page.locator('table.data tbody td[data-col=name] a', { hasText: STREAM });
    await waitFor('the stream row', () => link.count());
    assert((await link.getAttribute('href')) === `#/streams/${enc(VHOST)}/${enc(STREAM)}`, 'a stream links to its stream page');
    await link.click();
    await page.waitForSelector(`#app[data-route="#/streams/${enc(VHOST)}/${enc(STREAM)}"]`);
    await page.waitForSelector('#tile-messages');
    const q = (await api('GET', apiPath)).json;
    assert(new RegExp(`^${COUNT}\\s*msgs$`).test(await tileValue('tile-messages')), `messages tile: ${await tileValue('tile-messages')}`);
    assert(await tileValue('tile-first') === '0', `first offset: ${await tileValue('tile-first')}`);
    assert(await tileValue('tile-last') === String(COUNT - 1), `last offset: ${await tileValue('tile-last')}`);
    assert(await tileValue('tile-committed') === String(q.committed_offset), `committed: ${await tileValue('tile-committed')} vs ${q.committed_offset}`);
    assert(await tileValue('tile-segments') === String(q.segments), 'segments tile');
    assert(await tileValue('tile-consumers') === '1', 'one consumer');
    // the size on disk as a person reads it: the API's bytes in KiB/B
    const size = await tileValue('tile-size');
    const expected = q.segment_bytes < 1024 ? `${q.segment_bytes} B` : `${(Math.round((q.segment_bytes / 1024) * 10) / 10).toFixed(1).replace(/\.0$/, '')} KiB`;
    assert(q.segment_bytes > COUNT * 7 && size === expected, `size on disk ${size}, the API's ${q.segment_bytes} bytes`);
    assert((await text('h1#stream-name')) === STREAM, 'the name heading');
  });

  await test("the stream page shows its retention and where each setting comes from", async () => {
    assert(await text('#stream-max-age') === '7D (argument x-max-age)', `max age: ${await text('#stream-max-age')}`);
    assert(await text('#stream-max-bytes') === '9.5 MiB (argument x-max-length-bytes)', `max size: ${await text('#stream-max-bytes')}`);
    assert(await text('#stream-segment-size') === '476.8 MiB (default)', `segment size: ${await text('#stream-segment-size')}`);
  });

  await test("each stream consumer's offset and lag", async () => {
    const row = page.locator('#stream-consumers tbody tr[data-tag=console-stream-reader]');
    await row.waitFor();
    await page.waitForSelector('#stream-publishers-panel .state-empty'); // none: AMQP publishers are not listed
    const off = await row.locator('.consumer-offset').innerText();
    const lag = await row.locator('.consumer-lag').innerText();
    assert(off.trim() === '3' && lag.trim() === String(COUNT - 3), `offset ${off}, lag ${lag}`);
  });

  await test("the consumers page shows a stream consumer's offset and lag as columns to choose", async () => {
    await go('consumers');
    await page.waitForSelector('table.data[data-state=ready]');
    await page.click('details.column-chooser summary');
    for (const label of ['Stream offset', 'Stream lag']) {
      const box = page.locator('details.column-chooser label', { hasText: label }).locator('input');
      if (!(await box.isChecked())) await box.check();
    }
    const row = page.locator('table.data tbody tr', { has: page.locator('td[data-col=consumer_tag]', { hasText: 'console-stream-reader' }) });
    await waitFor('the lag column', async () => (await row.locator('td[data-col=offset_lag]').count()) === 1);
    const off = (await row.locator('td[data-col=offset]').innerText()).trim();
    const lag = (await row.locator('td[data-col=offset_lag]').innerText()).trim();
    assert(off === '3' && lag === String(COUNT - 3), `consumers page: offset ${off}, lag ${lag}`);
    for (const label of ['Stream offset', 'Stream lag']) // the choice is kept: leave the page as it was
      await page.locator('details.column-chooser label', { hasText: label }).locator('input').uncheck();
    await page.click('details.column-chooser summary');
    await go(`streams/${enc(VHOST)}/${enc(STREAM)}`);
    await page.waitForSelector('#stream-viewer');
  });

  await test('read the stream from an offset: the messages at 5, 6, 7, then Next; nothing is consumed', async () => {
    await page.fill('#read-offset', '5');
    await page.fill('#read-count', '3');
    await page.click('#read-submit');
    await page.waitForSelector('#read-results article.message');
    const offsets = await page.locator('#read-results article.message').evaluateAll((els) => els.map((e) => e.dataset.offset));
    assert(JSON.stringify(offsets) === '["5","6","7"]', `offsets ${offsets}`);
    const first = await text('#read-results article.message[data-offset="5"]');
    assert(first.includes('Offset 5') && first.includes('event 5') && first.includes('"i": 5') && first.includes('"x-stream-offset": 5'),
      `the message at 5: ${first}`);
    await shot('20-stream-page');
    await page.click('#read-next');
    await waitFor('the next page', async () => (await page.locator('#read-results article.message').first().getAttribute('data-offset')) === '8');
    assert(await page.inputValue('#read-offset') === '8', 'the offset field follows');
    await page.fill('#read-offset', String(COUNT + 10));
    await page.click('#read-submit');
    await page.waitForSelector('#read-results .state-empty');
    const q = (await api('GET', apiPath)).json;
    const c = q.consumer_details.find((x) => x.consumer_tag === 'console-stream-reader');
    assert(q.messages === COUNT && c.offset === 3, `after reading: ${q.messages} messages, consumer at ${c.offset}`);
  });

  await test('a stream link to the queue page goes to the stream page', async () => {
    await go('queues');
    await page.goto(`${t.BASE}/#/queues/${enc(VHOST)}/${enc(STREAM)}`);
    await page.waitForSelector(`#app[data-route="#/streams/${enc(VHOST)}/${enc(STREAM)}"]`);
    await page.waitForSelector('#tile-messages');
  });

  if (client) client.proc.stdin.end();
}
