'use strict';
// Scenarios written against @cloudamqp/amqp-client (low-level AMQPClient API).
// Same ids as the amqplib scenarios where the behaviour is the same. Every
// expectation here was checked against RabbitMQ 3.10.

const { sleep, assert, eq, deepEq, within, until, rejects, show } = require('../lib/harness');

const CLIENT = 'cloudamqp';
const S = [];
function sc(id, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  S.push({ id, client: CLIENT, quick: !!opts.quick, fn });
}

// ---- helpers ---------------------------------------------------------------

const dec = new TextDecoder();
const text = (m) => (m.body ? dec.decode(m.body) : '');
const texts = (msgs) => msgs.map(text);

async function open(ctx, opts) {
  const conn = await ctx.cloud(opts);
  const ch = await conn.channel();
  return { conn, ch };
}

async function openConfirm(ctx, opts) {
  const { conn, ch } = await open(ctx, opts);
  await ch.confirmSelect();
  return { conn, ch };
}

async function getAll(ch, q, { noAck = true, max = 10000 } = {}) {
  const out = [];
  for (let i = 0; i < max; i++) {
    const m = await ch.basicGet(q, { noAck });
    if (!m) break;
    out.push(m);
  }
  return out;
}

async function declareQ(ch, name, args) {
  return ch.queueDeclare(name, { durable: false }, args || {});
}

// Reply code from an AMQPError message: "... closed: TEXT (CODE)".
function codeOf(err) {
  const m = /\((\d+)\)\s*$/.exec(err && err.message ? err.message : String(err));
  return m ? Number(m[1]) : undefined;
}

async function expectCode(promise, code, what) {
  const e = await rejects(promise, what);
  eq(codeOf(e), code, `${what}: reply code (${e.message})`);
  return e;
}

// Wait until the connection got closed by the server with `code`.
async function connClosedWith(conn, code, what) {
  await until(() => conn.errors.length > 0, 5000, `connection close (${what})`);
  eq(codeOf(conn.errors[0]), code, `${what}: connection close code (${conn.errors[0].message})`);
  eq(conn.closed, true, `${what}: connection closed`);
  return conn.errors[0];
}

async function assertConnAlive(conn, what) {
  assert(!conn.closed, `${what}: connection was closed (${show(conn.errors.map((e) => e.message))})`);
  const ch = await within(conn.channel(), 3000, `${what}: new channel`);
  await within(ch.exchangeDeclare('amq.direct', 'direct', { passive: true }), 3000, `${what}: round trip`);
  await ch.close();
}

async function consumeN(ch, q, n, { ms = 5000, noAck = true, args } = {}) {
  const got = [];
  let done;
  const finished = new Promise((r) => { done = r; });
  const consumer = await ch.basicConsume(q, { noAck, args: args || {} }, (m) => {
    got.push(m);
    if (got.length >= n) done();
  });
  if (n > 0) await within(finished, ms, `${n} deliveries from ${q} (got ${got.length})`);
  await consumer.cancel();
  return got;
}

function pattern(n, seed = 7) {
  const b = Buffer.allocUnsafe(n);
  let x = seed;
  for (let i = 0; i < n; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; b[i] = x >>> 16; }
  return b;
}

function userOf(uri) { return decodeURIComponent(new URL(uri).username) || 'guest'; }

async function routeMatrix(ctx, type, { bindings, publishes, expected }) {
  const { ch } = await openConfirm(ctx);
  const ex = ctx.x();
  await ch.exchangeDeclare(ex, type, { durable: false });
  const qs = {};
  for (const b of bindings) {
    if (!qs[b.q]) {
      qs[b.q] = ctx.q(b.q);
      await declareQ(ch, qs[b.q]);
    }
    await ch.queueBind(qs[b.q], ex, b.key || '', b.args || {});
  }
  for (const p of publishes) {
    const body = p.body !== undefined ? p.body : p.key;
    await ch.basicPublish(ex, p.key || '', body, p.headers ? { headers: p.headers } : {});
  }
  const got = {};
  for (const [k, q] of Object.entries(qs)) got[k] = texts(await getAll(ch, q));
  for (const k of Object.keys(expected)) deepEq(got[k], expected[k], `queue ${k} received`);
  return `routed ${show(got)}`;
}

// ---- connection --------------------------------------------------------------

sc('connection.open_close', { quick: true }, async (ctx) => {
  const conn = await ctx.cloud();
  const ch = await conn.channel();
  await ch.close();
  eq(ch.closed, true, 'channel closed');
  await conn.close();
  eq(conn.closed, true, 'connection closed');
  eq(conn.errors.length, 0, 'connection errors');
  return `frame_max=${conn.frameMax} channel_max=${conn.channelMax}`;
});

sc('connection.bad_credentials_403', async (ctx) => {
  const u = new URL(ctx.uri);
  u.password = 'definitely-wrong-' + ctx.runId;
  const e = await expectCode(ctx.cloud({ uri: u.toString() }), 403, 'connect with bad password');
  assert(/ACCESS_REFUSED/.test(e.message), `message: ${e.message}`);
  return e.message;
});

sc('connection.unknown_vhost_530', async (ctx) => {
  const u = new URL(ctx.uri);
  u.pathname = '/' + encodeURIComponent('conf-missing-vhost-' + ctx.runId);
  const e = await expectCode(ctx.cloud({ uri: u.toString() }), 530, 'connect to missing vhost');
  assert(/NOT_ALLOWED/.test(e.message), `message: ${e.message}`);
  return e.message;
});

// ---- channel -------------------------------------------------------------------

sc('channel.open_many', async (ctx) => {
  const conn = await ctx.cloud();
  const chans = [];
  for (let i = 0; i < 200; i++) chans.push(await conn.channel());
  eq(new Set(chans.map((c) => c.id)).size, 200, 'distinct channel ids');
  await Promise.all(chans.map((c) => c.exchangeDeclare('amq.fanout', 'fanout', { passive: true })));
  await Promise.all(chans.map((c) => c.close()));
  await assertConnAlive(conn, 'after closing 200 channels');
});

// ---- exchange ------------------------------------------------------------------

sc('exchange.bind_exchange_to_exchange', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const src = ctx.x('src'), dst = ctx.x('dst'), q = ctx.q();
  await ch.exchangeDeclare(src, 'topic', { durable: false });
  await ch.exchangeDeclare(dst, 'fanout', { durable: false });
  await declareQ(ch, q);
  await ch.queueBind(q, dst, '');
  await ch.exchangeBind(dst, src, 'a.*');
  await ch.basicPublish(src, 'a.b', 'via-e2e');
  await ch.basicPublish(src, 'b.c', 'not-matching');
  deepEq(texts(await getAll(ch, q)), ['via-e2e'], 'delivered through e2e binding');
  await ch.exchangeUnbind(dst, src, 'a.*');
  await ch.basicPublish(src, 'a.b', 'after-unbind');
  deepEq(texts(await getAll(ch, q)), [], 'delivered after unbind');
});

// ---- routing ---------------------------------------------------------------------

sc('routing.direct_exact_key', (ctx) => routeMatrix(ctx, 'direct', {
  bindings: [{ q: 'a', key: 'k1' }, { q: 'b', key: 'k2' }, { q: 'c', key: 'k1' }, { q: 'e', key: '' }],
  publishes: [{ key: 'k1' }, { key: 'k2' }, { key: 'K1' }, { key: 'k1.x' }, { key: '', body: '<empty>' }],
  expected: { a: ['k1'], b: ['k2'], c: ['k1'], e: ['<empty>'] },
}));

sc('routing.fanout_ignores_key', (ctx) => routeMatrix(ctx, 'fanout', {
  bindings: [{ q: 'a', key: 'x' }, { q: 'b', key: '' }],
  publishes: [{ key: 'x' }, { key: 'y' }, { key: '', body: 'none' }],
  expected: { a: ['x', 'y', 'none'], b: ['x', 'y', 'none'] },
}));

sc('routing.topic_star_one_word', { quick: true }, (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 's', key: 'a.*' }, { q: 'm', key: '*.b.*' }],
  publishes: ['a.b', 'a', 'a.b.c', 'b.a', 'x.b.y', 'b.y', 'a.', 'ab.c'].map((key) => ({ key })),
  expected: { s: ['a.b', 'a.'], m: ['a.b.c', 'x.b.y'] },
}));

sc('routing.topic_hash_zero_words', (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 'h', key: 'a.#' }, { q: 'all', key: '#' }],
  publishes: ['a', 'a.b', 'a.b.c', 'b', 'ab', 'b.a'].map((key) => ({ key })),
  expected: { h: ['a', 'a.b', 'a.b.c'], all: ['a', 'a.b', 'a.b.c', 'b', 'ab', 'b.a'] },
}));

sc('routing.headers_match_all', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [{ q: 'all', args: { 'x-match': 'all', a: 'one', b: 2 } }],
  publishes: [
    { body: 'both', headers: { a: 'one', b: 2 } },
    { body: 'both+extra', headers: { a: 'one', b: 2, c: 'x' } },
    { body: 'only-a', headers: { a: 'one' } },
    { body: 'wrong-b', headers: { a: 'one', b: 3 } },
    { body: 'no-headers' },
  ],
  expected: { all: ['both', 'both+extra'] },
}));

sc('routing.headers_match_any', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [{ q: 'any', args: { 'x-match': 'any', a: 'one', b: 2 } }],
  publishes: [
    { body: 'both', headers: { a: 'one', b: 2 } },
    { body: 'only-a', headers: { a: 'one' } },
    { body: 'only-b', headers: { b: 2 } },
    { body: 'wrong', headers: { a: 'two', b: 5 } },
    { body: 'no-headers' },
  ],
  expected: { any: ['both', 'only-a', 'only-b'] },
}));

// ---- queue ------------------------------------------------------------------------

sc('queue.server_named', async (ctx) => {
  const { ch } = await open(ctx);
  const ok = await ch.queueDeclare('', { exclusive: true, durable: false });
  ctx.trackQueue(ok.name);
  assert(/^amq\.gen-/.test(ok.name), `server-named queue ${ok.name} does not start with amq.gen-`);
  eq(ok.messageCount, 0, 'message count');
  eq(ok.consumerCount, 0, 'consumer count');
  return ok.name;
});

sc('queue.exclusive_other_connection_405', async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await ch.queueDeclare(q, { exclusive: true, durable: false });
  const other = await ctx.cloud();
  const c1 = await other.channel();
  const e = await expectCode(c1.queueDeclare(q, { passive: true }), 405, 'passive declare from another connection');
  eq(c1.closed, true, 'channel closed');
  const c2 = await other.channel();
  await expectCode(c2.basicGet(q), 405, 'basic.get from another connection');
  await assertConnAlive(other, 'other connection');
  return e.message;
});

sc('queue.purge_count', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  for (let i = 0; i < 6; i++) await ch.basicPublish('', q, `m${i}`);
  const held = await ch.basicGet(q, { noAck: false });
  assert(held, 'get returned nothing');
  eq((await ch.queuePurge(q)).messageCount, 5, 'purge-ok message_count (unacked not purged)');
  await held.nack(true);
  await until(async () => (await ch.queueDeclare(q, { passive: true })).messageCount === 1, 2000, 'nacked message back');
  eq((await ch.queuePurge(q)).messageCount, 1, 'second purge');
});

sc('queue.delete_count', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  for (let i = 0; i < 4; i++) await ch.basicPublish('', q, `m${i}`);
  eq((await ch.queueDelete(q)).messageCount, 4, 'delete-ok message_count');
  eq((await ch.queueDelete(q)).messageCount, 0, 'delete of a missing queue');
});

// ---- basic ------------------------------------------------------------------------

sc('basic.publish_get', { quick: true }, async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, 'first');
  await ch.basicPublish('', q, 'second');
  const m = await ch.basicGet(q, { noAck: false });
  assert(m, 'get-empty for a non-empty queue');
  eq(text(m), 'first', 'body');
  eq(m.exchange, '', 'exchange');
  eq(m.routingKey, q, 'routing key');
  eq(m.redelivered, false, 'redelivered');
  eq(m.messageCount, 1, 'message_count remaining');
  eq(m.deliveryTag, 1, 'delivery tag');
  await m.ack();
  const m2 = await ch.basicGet(q, { noAck: true });
  eq(m2 && text(m2), 'second', 'second body');
  eq(m2.deliveryTag, 2, 'second delivery tag');
  eq(await ch.basicGet(q, { noAck: true }), null, 'get on empty queue');
});

sc('basic.mandatory_unroutable_returned', async (ctx) => {
  const { ch } = await open(ctx);
  const returned = [];
  ch.onReturn = (m) => returned.push(m);
  const key = ctx.name('nowhere');
  await ch.basicPublish('amq.direct', key, 'ret', { messageId: 'mid-1' }, true);
  await ch.basicPublish('amq.direct', key, 'silent', {}, false);
  await until(() => returned.length >= 1, 3000, 'basic.return');
  await sleep(200);
  eq(returned.length, 1, 'returns');
  const r = returned[0];
  eq(r.replyCode, 312, 'reply code');
  eq(r.replyText, 'NO_ROUTE', 'reply text');
  eq(r.exchange, 'amq.direct', 'exchange');
  eq(r.routingKey, key, 'routing key');
  eq(text(r), 'ret', 'body');
  eq(r.properties.messageId, 'mid-1', 'message id');
});

sc('basic.consume_order_preserved', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await Promise.all(Array.from({ length: 200 }, (_, i) => ch.basicPublish('', q, String(i))));
  const got = await consumeN(ch, q, 200, { noAck: false });
  got.forEach((m, i) => {
    eq(text(m), String(i), `message ${i}`);
    eq(m.deliveryTag, i + 1, `delivery tag ${i}`);
  });
  await ch.basicAck(200, true);
});

// ---- ack -------------------------------------------------------------------------

sc('ack.nack_requeue_redelivered', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, 'again');
  const m1 = await ch.basicGet(q, { noAck: false });
  eq(m1.redelivered, false, 'first redelivered flag');
  await m1.nack(true);
  const m2 = await until(() => ch.basicGet(q, { noAck: false }), 2000, 'requeued message');
  eq(text(m2), 'again', 'body');
  eq(m2.redelivered, true, 'redelivered after nack');
  await m2.reject(true);
  const m3 = await until(() => ch.basicGet(q, { noAck: false }), 2000, 'requeued message');
  eq(m3.redelivered, true, 'redelivered after reject');
  await m3.ack();
  eq((await ch.queueDeclare(q, { passive: true })).messageCount, 0, 'queue empty after ack');
});

sc('ack.reject_discard', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, 'a');
  await ch.basicPublish('', q, 'b');
  await (await ch.basicGet(q, { noAck: false })).reject(false);
  await (await ch.basicGet(q, { noAck: false })).nack(false);
  eq((await ch.queueDeclare(q, { passive: true })).messageCount, 0, 'queue after reject/nack without requeue');
});

// ---- qos ---------------------------------------------------------------------------

sc('qos.prefetch_count_limits', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  for (let i = 0; i < 5; i++) await ch.basicPublish('', q, `m${i}`);
  const c = await conn.channel();
  await c.basicQos(2);
  const got = [];
  await c.basicConsume(q, { noAck: false }, (m) => { got.push(m); });
  await until(() => got.length >= 2, 3000, 'first 2 deliveries');
  await sleep(250);
  eq(got.length, 2, 'deliveries with prefetch 2 and nothing acked');
  await got[0].ack();
  await until(() => got.length >= 3, 3000, 'third delivery after ack');
  await sleep(150);
  eq(got.length, 3, 'deliveries after one ack');
  await got[2].ack(true);
  await until(() => got.length >= 5, 3000, 'remaining deliveries');
  deepEq(texts(got), ['m0', 'm1', 'm2', 'm3', 'm4'], 'order');
});

// ---- confirm -----------------------------------------------------------------------

sc('confirm.ack_after_publish', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  const t1 = await ch.basicPublish('', q, 'routed');
  const t2 = await ch.basicPublish('', q, 'persistent', { deliveryMode: 2 });
  const t3 = await ch.basicPublish('amq.direct', ctx.name('unroutable'), 'unroutable is acked too');
  deepEq([t1, t2, t3], [1, 2, 3], 'publish sequence numbers confirmed');
  eq((await ch.queueDeclare(q, { passive: true })).messageCount, 2, 'queue depth');
});

sc('confirm.nack_reject_publish_max_length', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q, { 'x-max-length': 1, 'x-overflow': 'reject-publish' });
  await ch.basicPublish('', q, 'fits');
  const e = await rejects(ch.basicPublish('', q, 'overflow'), 'publish over max-length');
  await ch.basicPublish('', ctx.name('nowhere'), 'unroutable still acked');
  deepEq(texts(await getAll(ch, q)), ['fits'], 'queue contents');
  return `nack: ${e.message}`;
});

// ---- consumer ---------------------------------------------------------------------

sc('consumer.server_cancel_on_queue_delete', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  const consumer = await ch.basicConsume(q, { noAck: true }, () => {});
  const other = await conn.channel();
  await other.queueDelete(q);
  const e = await rejects(within(consumer.wait(), 3000, 'basic.cancel from server'), 'consumer.wait');
  assert(/cancelled by the server/.test(e.message), `consumer ended with: ${e.message}`);
  eq(ch.closed, false, 'channel stays open');
  await ch.exchangeDeclare('amq.direct', 'direct', { passive: true });
  return `cancelled ${consumer.tag}`;
});

// ---- properties -------------------------------------------------------------------

sc('properties.all_basic_properties_round_trip', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  const ts = new Date(1700000000 * 1000);
  const props = {
    contentType: 'application/json',
    contentEncoding: 'utf-8',
    headers: { 'x-custom': 'v', n: 42 },
    deliveryMode: 2,
    priority: 7,
    correlationId: 'corr-1',
    replyTo: 'reply.queue',
    expiration: '600000',
    messageId: 'msg-1',
    timestamp: ts,
    type: 'test.type',
    userId: userOf(ctx.uri),
    appId: 'conformance',
  };
  await ch.basicPublish('', q, '{}', props);
  const m = await ch.basicGet(q, { noAck: true });
  assert(m, 'no message');
  const p = m.properties;
  for (const k of Object.keys(props)) {
    if (k === 'headers') deepEq(p.headers, props.headers, 'headers');
    else if (k === 'timestamp') eq(p.timestamp && p.timestamp.getTime(), ts.getTime(), 'timestamp');
    else eq(p[k], props[k], k);
  }
  return '13 properties (client cannot send cluster-id)';
});

sc('properties.header_field_types_round_trip', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  const headers = {
    str: 'hello ünïcode',
    int: -70000,
    big: 1099511627779n, // 'l'
    float: 1.5, // 'f'
    yes: true,
    nil: null,
    bytes: new Uint8Array([0, 1, 2, 254, 255]),
    date: new Date(1700000000 * 1000),
    arr: [1, 'two', false],
    table: { nested: { deep: 'x' } },
  };
  await ch.basicPublish('', q, 'h', { headers });
  const m = await ch.basicGet(q, { noAck: true });
  assert(m, 'no message');
  const h = m.properties.headers;
  eq(h.str, headers.str, 'str');
  eq(h.int, -70000, 'int');
  eq(h.big, 1099511627779, 'long');
  eq(h.float, 1.5, 'float');
  eq(h.yes, true, 'bool');
  eq(h.nil, null, 'void');
  deepEq(Array.from(h.bytes || []), [0, 1, 2, 254, 255], 'byte array');
  eq(h.date instanceof Date && h.date.getTime(), headers.date.getTime(), 'timestamp');
  deepEq(h.arr, [1, 'two', false], 'array');
  deepEq(h.table, { nested: { deep: 'x' } }, 'table');
  eq(Object.keys(h).length, Object.keys(headers).length, 'header count');
});

// ---- content ---------------------------------------------------------------------

sc('content.body_empty', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, new Uint8Array(0), { contentType: 'text/plain' });
  const m = await ch.basicGet(q, { noAck: true });
  assert(m, 'no message');
  eq(m.bodySize, 0, 'body size');
  eq(m.properties.contentType, 'text/plain', 'content type');
  await ch.basicPublish('', q, null);
  const [d] = await consumeN(ch, q, 1);
  eq(d.bodySize, 0, 'delivered body size');
});

sc('content.body_16mib', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  const body = pattern(16 * 1024 * 1024, 99);
  await ch.basicPublish('', q, body);
  const m = await ch.basicGet(q, { noAck: true });
  assert(m, 'no message');
  eq(m.bodySize, body.length, 'body size');
  assert(Buffer.from(m.body.buffer, m.body.byteOffset, m.body.byteLength).equals(body), 'body bytes differ');
});

// ---- tx -----------------------------------------------------------------------

sc('tx.commit_publishes', { quick: true }, async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.txSelect();
  await ch.basicPublish('', q, 'a');
  await ch.basicPublish('', q, 'b');
  const obs = await conn.channel();
  await sleep(100);
  eq((await obs.queueDeclare(q, { passive: true })).messageCount, 0, 'visible before commit');
  await ch.txCommit();
  eq((await obs.queueDeclare(q, { passive: true })).messageCount, 2, 'visible after commit');
  deepEq(texts(await getAll(obs, q)), ['a', 'b'], 'order');
});

sc('tx.rollback_discards_publishes', async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.txSelect();
  await ch.basicPublish('', q, 'gone');
  await ch.txRollback();
  await ch.basicPublish('', q, 'kept');
  await ch.txCommit();
  deepEq(texts(await getAll(ch, q)), ['kept'], 'queue contents');
});

sc('tx.ack_rollback_and_commit', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, 'x');
  await ch.txSelect();
  const m = await until(() => ch.basicGet(q, { noAck: false }), 2000, 'message');
  await m.ack();
  await ch.txRollback();
  // the rolled-back ack is forgotten: the message is still unacked on this channel
  const obs = await conn.channel();
  eq((await obs.queueDeclare(q, { passive: true })).messageCount, 0, 'ready after rolled-back ack');
  await ch.basicAck(m.deliveryTag);
  await ch.txCommit();
  await ch.close();
  await sleep(100);
  eq((await obs.queueDeclare(q, { passive: true })).messageCount, 0, 'ready after committed ack + close');
});

sc('tx.commit_without_select_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await expectCode(ch.txCommit(), 406, 'tx.commit without tx.select');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

// ---- errors ----------------------------------------------------------------------

sc('errors.passive_declare_missing_queue_404', { quick: true }, async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await expectCode(ch.queueDeclare(ctx.name('missing'), { passive: true }), 404, 'passive declare');
  assert(/NOT_FOUND/.test(e.message), `message ${e.message}`);
  eq(ch.closed, true, 'channel closed');
  await assertConnAlive(conn, 'after 404');
  return e.message;
});

sc('errors.publish_missing_exchange_404', async (ctx) => {
  const { conn, ch } = await open(ctx);
  let reason = null;
  ch.onerror = (r) => { reason = r; };
  await ch.basicPublish(ctx.name('no-such-exchange'), 'k', 'x');
  await until(() => reason, 3000, 'channel.close');
  eq(codeOf(reason), 404, `close code (${reason})`);
  await assertConnAlive(conn, 'after 404');
  return reason;
});

sc('errors.channel_open_twice_504', async (ctx) => {
  const { conn, ch } = await open(ctx);
  // channel.open on an already open channel (raw frame: class 20, method 10)
  const f = Buffer.from([1, ch.id >> 8, ch.id & 255, 0, 0, 0, 5, 0, 20, 0, 10, 0, 0xce]);
  await conn.send(new Uint8Array(f));
  const e = await connClosedWith(conn, 504, 'second channel.open');
  return e.message;
});

sc('errors.qos_prefetch_size_540', async (ctx) => {
  const { conn, ch } = await open(ctx);
  await rejects(ch.basicQos(0, 1000, false), 'qos with prefetch_size');
  const e = await connClosedWith(conn, 540, 'prefetch_size != 0');
  return e.message;
});

// ---- extensions -------------------------------------------------------------------

sc('extensions.direct_reply_to', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q('rpc');
  const server = await conn.channel();
  await declareQ(server, q);
  let seenReplyTo = null;
  await server.basicConsume(q, { noAck: true }, async (m) => {
    seenReplyTo = m.properties.replyTo;
    await server.basicPublish('', m.properties.replyTo, 'pong:' + text(m),
      { correlationId: m.properties.correlationId });
  });
  const replies = [];
  await ch.basicConsume('amq.rabbitmq.reply-to', { noAck: true }, (m) => { replies.push(m); });
  await ch.basicPublish('', q, 'ping', { replyTo: 'amq.rabbitmq.reply-to', correlationId: 'c1' });
  await until(() => replies.length === 1, 3000, 'reply');
  eq(text(replies[0]), 'pong:ping', 'reply body');
  eq(replies[0].properties.correlationId, 'c1', 'correlation id');
  assert(/^amq\.rabbitmq\.reply-to\..+/.test(seenReplyTo), `reply-to seen by server: ${seenReplyTo}`);
});

sc('extensions.dead_letter_on_reject', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const dlx = ctx.x('dlx'), dlq = ctx.q('dlq'), q = ctx.q('src');
  await ch.exchangeDeclare(dlx, 'fanout', { durable: false });
  await declareQ(ch, dlq);
  await ch.queueBind(dlq, dlx, '');
  await declareQ(ch, q, { 'x-dead-letter-exchange': dlx });
  await ch.basicPublish('', q, 'dead');
  await (await ch.basicGet(q, { noAck: false })).reject(false);
  const m = await until(() => ch.basicGet(dlq, { noAck: true }), 3000, 'dead-lettered message');
  eq(text(m), 'dead', 'body');
  const xd = m.properties.headers && m.properties.headers['x-death'];
  assert(Array.isArray(xd) && xd.length === 1, `x-death: ${show(xd)}`);
  eq(xd[0].reason, 'rejected', 'x-death reason');
  eq(xd[0].queue, q, 'x-death queue');
  eq(Number(xd[0].count), 1, 'x-death count');
});

// ---- heartbeat --------------------------------------------------------------------

sc('heartbeat.server_sends_heartbeats', async (ctx) => {
  const conn = await ctx.cloud({ query: { heartbeat: 1 } });
  eq(conn.heartbeat, 1, 'negotiated heartbeat');
  let beats = 0;
  const hb = Buffer.from([8, 0, 0, 0, 0, 0, 0, 0xce]);
  conn.socket.on('data', (d) => {
    for (let i = d.indexOf(hb); i !== -1; i = d.indexOf(hb, i + 1)) beats++;
  });
  await sleep(3200);
  assert(beats >= 2, `heartbeat frames received in 3.2 s: ${beats}`);
  assert(!conn.closed, 'connection closed while idle');
  await assertConnAlive(conn, 'after idle period');
  return `${beats} heartbeats in 3.2 s`;
});

// ---- edge cases -------------------------------------------------------------------

sc('confirm.tags_per_channel', async (ctx) => {
  const conn = await ctx.cloud();
  const a = await conn.channel();
  const b = await conn.channel();
  await a.confirmSelect();
  await b.confirmSelect();
  await a.confirmSelect(); // selecting twice is fine
  const q = ctx.q();
  await declareQ(a, q);
  const ta = [await a.basicPublish('', q, '1'), await a.basicPublish('', q, '2')];
  const tb = [await b.basicPublish('', q, '3')];
  deepEq([ta, tb], [[1, 2], [1]], 'confirm sequence numbers per channel');
});

sc('errors.confirm_on_tx_channel_406', async (ctx) => {
  const conn = await ctx.cloud();
  const a = await conn.channel();
  await a.txSelect();
  const e1 = await expectCode(a.confirmSelect(), 406, 'confirm.select on a transactional channel');
  const b = await conn.channel();
  await b.confirmSelect();
  const e2 = await expectCode(b.txSelect(), 406, 'tx.select on a confirm channel');
  await assertConnAlive(conn, 'after 406');
  return `${e1.message} / ${e2.message}`;
});

sc('tx.commit_makes_mandatory_return', async (ctx) => {
  const { ch } = await open(ctx);
  const returned = [];
  ch.onReturn = (m) => returned.push(m);
  await ch.txSelect();
  await ch.basicPublish('amq.direct', ctx.name('nowhere'), 'r', {}, true);
  await ch.txCommit();
  await until(() => returned.length === 1, 3000, 'basic.return for the committed unroutable publish');
  eq(returned[0].replyCode, 312, 'reply code');
});

sc('errors.publish_immediate_540', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await declareQ(ch, q);
  await ch.basicPublish('', q, 'x', {}, false, true);
  const e = await connClosedWith(conn, 540, 'publish with immediate=true');
  return e.message;
});

sc('errors.channel_flow_inactive_540', async (ctx) => {
  const { conn, ch } = await open(ctx);
  await rejects(ch.basicFlow(false), 'channel.flow active=false');
  const e = await connClosedWith(conn, 540, 'channel.flow active=false');
  return e.message;
});

sc('errors.recover_no_requeue_540', async (ctx) => {
  const { conn, ch } = await open(ctx);
  await rejects(ch.basicRecover(false), 'basic.recover requeue=false');
  const e = await connClosedWith(conn, 540, 'basic.recover requeue=false');
  return e.message;
});

// Raw frames sent on an open connection (the client's send() writes bytes as-is).
function rawFrame(type, channel, payload) {
  const b = Buffer.alloc(8 + payload.length);
  b[0] = type;
  b.writeUInt16BE(channel, 1);
  b.writeUInt32BE(payload.length, 3);
  payload.copy(b, 7);
  b[7 + payload.length] = 0xce;
  return b;
}
const method = (cls, m, args = []) => Buffer.from([cls >> 8, cls & 255, m >> 8, m & 255, ...args]);

async function rawCase(ctx, bytes, code, what) {
  const { conn, ch } = await open(ctx);
  await conn.send(new Uint8Array(bytes(ch)));
  const e = await connClosedWith(conn, code, what);
  return e.message;
}

sc('malformed.bad_frame_end_501', (ctx) => rawCase(ctx, (ch) => {
  const f = rawFrame(1, ch.id, method(20, 40, [0, 200, 0, 0, 0, 0, 0, 0]));
  f[f.length - 1] = 0;
  return f;
}, 501, 'frame-end octet 0x00'));

sc('malformed.unknown_frame_type_501', (ctx) => rawCase(ctx, (ch) => rawFrame(9, ch.id, Buffer.from('x')),
  501, 'frame type 9'));

sc('malformed.content_header_without_method_505', (ctx) => rawCase(ctx,
  (ch) => rawFrame(2, ch.id, Buffer.from([0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0])),
  505, 'content header with no basic.publish'));

sc('malformed.heartbeat_on_nonzero_channel_505', (ctx) => rawCase(ctx, (ch) => rawFrame(8, ch.id, Buffer.alloc(0)),
  505, 'heartbeat frame on channel 1'));

sc('malformed.truncated_method_501', (ctx) => rawCase(ctx, (ch) => rawFrame(1, ch.id, method(50, 10, [0, 0])),
  501, 'queue.declare with truncated arguments'));

sc('errors.channel_method_on_channel_zero_504', (ctx) => rawCase(ctx,
  () => rawFrame(1, 0, method(50, 10, [0, 0, 0, 0, 0, 0, 0, 0])),
  504, 'queue.declare on channel 0'));

sc('errors.unsolicited_close_ok_503', (ctx) => rawCase(ctx, (ch) => rawFrame(1, ch.id, method(20, 41)),
  503, 'channel.close-ok nobody asked for'));

sc('heartbeat.server_closes_on_missed_heartbeats', async (ctx) => {
  const conn = await ctx.cloud({ query: { heartbeat: 1 } });
  const send = conn.send.bind(conn);
  // swallow the client's heartbeat replies: the server then hears nothing
  conn.send = (bytes) => (bytes.length === 8 && bytes[0] === 8 ? Promise.resolve() : send(bytes));
  const t0 = Date.now();
  const sock = conn.socket;
  let frames = 0;
  sock.on('data', (d) => { if (!(d.length === 8 && d[0] === 8)) frames++; });
  await within(new Promise((r) => sock.once('close', r)), 8000, 'server to drop the silent connection');
  const ms = Date.now() - t0;
  assert(ms >= 1000, `closed after only ${ms} ms`);
  return `closed after ${ms} ms (${frames} non-heartbeat frames)`;
});

sc('routing.headers_match_with_x', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [
    { q: 'allx', args: { 'x-match': 'all-with-x', 'x-conf': 'yes', a: 1 } },
    { q: 'anyx', args: { 'x-match': 'any-with-x', 'x-conf': 'yes' } },
    { q: 'all', args: { 'x-match': 'all', 'x-conf': 'yes' } },
  ],
  publishes: [
    { body: 'both', headers: { 'x-conf': 'yes', a: 1 } },
    { body: 'x-only', headers: { 'x-conf': 'yes' } },
    { body: 'a-only', headers: { a: 1 } },
  ],
  expected: { allx: ['both'], anyx: ['both', 'x-only'], all: ['both', 'x-only', 'a-only'] },
}));

module.exports = S;
