'use strict';
// Scenarios written against amqplib (promise API). Every expectation here
// was checked against RabbitMQ 3.10.

const { sleep, assert, eq, deepEq, within, until, rejects, show } = require('../lib/harness');

const CLIENT = 'amqplib';
const S = [];
function sc(id, opts, fn) {
  if (typeof opts === 'function') { fn = opts; opts = {}; }
  S.push({ id, client: CLIENT, quick: !!opts.quick, fn });
}

// ---- helpers ---------------------------------------------------------------

async function open(ctx, opts) {
  const conn = await ctx.amqp(opts);
  const ch = await conn.createChannel();
  return { conn, ch };
}

async function openConfirm(ctx, opts) {
  const conn = await ctx.amqp(opts);
  const ch = await conn.createConfirmChannel();
  return { conn, ch };
}

// Publish on a confirm channel; resolves on ack, rejects on nack.
function pub(ch, ex, key, body, opts = {}) {
  return new Promise((resolve, reject) => {
    ch.publish(ex, key, Buffer.isBuffer(body) ? body : Buffer.from(String(body)), opts,
      (err) => (err ? reject(err instanceof Error ? err : new Error('nacked')) : resolve()));
  });
}

// basic.get until the queue is empty.
async function getAll(ch, q, { noAck = true, max = 10000 } = {}) {
  const out = [];
  for (let i = 0; i < max; i++) {
    const m = await ch.get(q, { noAck });
    if (!m) break;
    out.push(m);
  }
  return out;
}

const bodies = (msgs) => msgs.map((m) => m.content.toString());

// Consume until n messages arrived (or fail after ms); cancels the consumer.
async function consumeN(ch, q, n, { ms = 5000, noAck = true, args } = {}) {
  const got = [];
  let done;
  const finished = new Promise((r) => { done = r; });
  const ok = await ch.consume(q, (m) => {
    if (m === null) return;
    got.push(m);
    if (got.length >= n) done();
  }, { noAck, arguments: args });
  if (n > 0) await within(finished, ms, `${n} deliveries from ${q} (got ${got.length})`);
  await ch.cancel(ok.consumerTag);
  return got;
}

async function count(conn, q) {
  const ch = await conn.createChannel();
  const ok = await ch.checkQueue(q);
  await ch.close();
  return ok.messageCount;
}

// Wait for the channel to be closed by the server; return its close code.
async function channelClosedWith(ch, code, what) {
  const err = await within(ch.closedP, 5000, `channel close (${what})`);
  assert(err, `${what}: channel closed without an error`);
  eq(err.code, code, `${what}: channel close code`);
  return err;
}

// Wait for the connection to be closed by the server; return the error.
async function connClosedWith(conn, code, what) {
  const e = await within(conn.closedP, 5000, `connection close (${what})`);
  const err = conn.errors[0] || e;
  assert(err && err !== true, `${what}: connection closed without an error`);
  eq(err.code, code, `${what}: connection close code`);
  return err;
}

// The connection still works: a new channel can do a synchronous round trip.
async function assertConnAlive(conn, what) {
  assert(!conn.closedBy, `${what}: connection was closed`);
  const ch = await within(conn.createChannel(), 3000, `${what}: new channel`);
  await within(ch.checkExchange('amq.direct'), 3000, `${what}: round trip`);
  await ch.close();
}

function pattern(n, seed = 7) {
  const b = Buffer.allocUnsafe(n);
  let x = seed;
  for (let i = 0; i < n; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; b[i] = x >>> 16; }
  return b;
}

// Declare an exchange + queues + bindings, publish, and compare what each
// queue received (bodies, in order) with `expected`.
async function routeMatrix(ctx, type, { bindings, publishes, expected, exArgs }) {
  const { ch } = await openConfirm(ctx);
  const ex = ctx.x();
  await ch.assertExchange(ex, type, { durable: false, autoDelete: false, arguments: exArgs });
  const qs = {};
  for (const b of bindings) {
    if (!qs[b.q]) {
      qs[b.q] = ctx.q(b.q);
      await ch.assertQueue(qs[b.q], { durable: false });
    }
    await ch.bindQueue(qs[b.q], ex, b.key || '', b.args);
  }
  for (const p of publishes) {
    const body = p.body !== undefined ? p.body : p.key;
    await pub(ch, ex, p.key || '', body, { headers: p.headers });
  }
  const got = {};
  for (const [k, q] of Object.entries(qs)) got[k] = bodies(await getAll(ch, q));
  for (const k of Object.keys(expected)) deepEq(got[k], expected[k], `queue ${k} received`);
  return `routed ${show(got)}`;
}

// ---- connection --------------------------------------------------------------

sc('connection.open_close', { quick: true }, async (ctx) => {
  const conn = await ctx.amqp();
  const ch = await conn.createChannel();
  await ch.close();
  await conn.close();
  await within(conn.closedP, 3000, 'connection close-ok');
  assert(conn.errors.length === 0, `unexpected errors: ${conn.errors.map((e) => e.message)}`);
  const sp = conn.connection.serverProperties;
  return `server ${sp.product} ${sp.version}`;
});

sc('connection.server_capabilities', async (ctx) => {
  const conn = await ctx.amqp();
  const sp = conn.connection.serverProperties;
  for (const k of ['product', 'version', 'platform']) {
    assert(typeof sp[k] === 'string' && sp[k].length > 0, `server property ${k} missing: ${show(sp[k])}`);
  }
  const caps = sp.capabilities || {};
  for (const c of ['publisher_confirms', 'exchange_exchange_bindings', 'basic.nack',
    'consumer_cancel_notify', 'connection.blocked', 'consumer_priorities',
    'authentication_failure_close', 'per_consumer_qos', 'direct_reply_to']) {
    eq(caps[c], true, `capability ${c}`);
  }
  return `capabilities ${Object.keys(caps).sort().join(',')}`;
});

sc('connection.tune_defaults', async (ctx) => {
  // frameMax/channelMax/heartbeat 0 from the client: the server's proposal wins.
  const conn = await ctx.amqp({ query: { frameMax: 0, channelMax: 0, heartbeat: 0 } });
  const c = conn.connection;
  eq(c.frameMax, 131072, 'frame_max');
  eq(c.channelMax, 2047, 'channel_max');
  eq(c.heartbeat, 60, 'heartbeat');
  return `frame_max=${c.frameMax} channel_max=${c.channelMax} heartbeat=${c.heartbeat}`;
});

sc('connection.small_frame_max_large_body', async (ctx) => {
  const conn = await ctx.amqp({ query: { frameMax: 4096 } });
  eq(conn.connection.frameMax, 4096, 'negotiated frame_max');
  const ch = await conn.createConfirmChannel();
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const body = pattern(300000);
  await pub(ch, '', q, body);
  const m = await ch.get(q, { noAck: true });
  assert(m, 'message not found');
  eq(m.content.length, body.length, 'body length');
  assert(m.content.equals(body), 'body bytes differ');
});

sc('connection.bad_credentials_403', async (ctx) => {
  const u = new URL(ctx.uri);
  u.password = 'definitely-wrong-' + ctx.runId;
  const err = await rejects(ctx.amqp({ uri: u.toString() }), 'connect with bad password');
  assert(/403/.test(err.message) && /ACCESS.REFUSED/.test(err.message), `error: ${err.message}`);
  return err.message;
});

// ---- channel -------------------------------------------------------------------

sc('channel.open_many', async (ctx) => {
  const conn = await ctx.amqp();
  const chans = await Promise.all(Array.from({ length: 200 }, () => conn.createChannel()));
  const ids = new Set(chans.map((c) => c.ch));
  eq(ids.size, 200, 'distinct channel ids');
  await Promise.all(chans.map((c) => c.checkExchange('amq.fanout')));
  await Promise.all(chans.map((c) => c.close()));
  await assertConnAlive(conn, 'after closing 200 channels');
});

sc('channel.error_isolated_from_other_channels', async (ctx) => {
  const conn = await ctx.amqp();
  const a = await conn.createChannel();
  const b = await conn.createConfirmChannel();
  const q = ctx.q();
  await b.assertQueue(q, { durable: false });
  const e = await rejects(a.checkQueue(ctx.name('missing')), 'passive declare of a missing queue');
  eq(e.code, 404, 'close code');
  await channelClosedWith(a, 404, 'failing channel');
  await pub(b, '', q, 'still-works');
  const m = await b.get(q, { noAck: true });
  assert(m && m.content.toString() === 'still-works', 'other channel lost its message');
  await assertConnAlive(conn, 'after channel error');
});

// ---- exchange ------------------------------------------------------------------

sc('exchange.declare_all_types_passive_delete', async (ctx) => {
  const { conn, ch } = await open(ctx);
  for (const t of ['direct', 'fanout', 'topic', 'headers']) {
    const ex = ctx.x(t);
    const ok = await ch.assertExchange(ex, t, { durable: false });
    eq(ok.exchange, ex, 'declare-ok');
    await ch.checkExchange(ex);
    await ch.assertExchange(ex, t, { durable: false }); // identical redeclare is fine
    await ch.deleteExchange(ex);
  }
  const ch2 = await conn.createChannel();
  const e = await rejects(ch2.checkExchange(ctx.name('direct')), 'passive declare of deleted exchange');
  eq(e.code, 404, 'passive declare after delete');
  await ch.deleteExchange(ctx.name('never-existed')); // delete of a missing exchange succeeds
});

sc('exchange.bind_exchange_to_exchange', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const src = ctx.x('src'), dst = ctx.x('dst'), q = ctx.q();
  await ch.assertExchange(src, 'topic', { durable: false });
  await ch.assertExchange(dst, 'fanout', { durable: false });
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, dst, '');
  await ch.bindExchange(dst, src, 'a.*');
  await pub(ch, src, 'a.b', 'via-e2e');
  await pub(ch, src, 'b.c', 'not-matching');
  deepEq(bodies(await getAll(ch, q)), ['via-e2e'], 'delivered through e2e binding');
  await ch.unbindExchange(dst, src, 'a.*');
  await pub(ch, src, 'a.b', 'after-unbind');
  deepEq(bodies(await getAll(ch, q)), [], 'delivered after unbind');
});

// ---- routing ---------------------------------------------------------------------

sc('routing.default_exchange_queue_name', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q1 = ctx.q('one'), q2 = ctx.q('two');
  await ch.assertQueue(q1, { durable: false });
  await ch.assertQueue(q2, { durable: false });
  await pub(ch, '', q1, 'to-one');
  await pub(ch, '', q2, 'to-two');
  await pub(ch, '', ctx.name('nobody'), 'dropped');
  deepEq(bodies(await getAll(ch, q1)), ['to-one'], 'queue one');
  deepEq(bodies(await getAll(ch, q2)), ['to-two'], 'queue two');
});

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

sc('routing.topic_hash_zero_words', { quick: true }, (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 'h', key: 'a.#' }, { q: 'all', key: '#' }],
  publishes: ['a', 'a.b', 'a.b.c', 'b', 'ab', 'b.a'].map((key) => ({ key })),
  expected: { h: ['a', 'a.b', 'a.b.c'], all: ['a', 'a.b', 'a.b.c', 'b', 'ab', 'b.a'] },
}));

sc('routing.topic_hash_middle_and_edges', (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 'mid', key: 'a.#.z' }, { q: 'tail', key: '#.z' }, { q: 'mix', key: '*.#.c' }],
  publishes: ['a.z', 'a.b.z', 'a.b.c.z', 'a.b', 'z', 'q.z', 'c', 'b.c', 'a.b.c'].map((key) => ({ key })),
  expected: {
    mid: ['a.z', 'a.b.z', 'a.b.c.z'],
    tail: ['a.z', 'a.b.z', 'a.b.c.z', 'z', 'q.z'],
    mix: ['b.c', 'a.b.c'],
  },
}));

sc('routing.topic_empty_words', (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 'lit', key: 'a..b' }, { q: 'star', key: 'a.*.b' }, { q: 'two', key: '*.*' },
    { q: 'empty', key: '' }, { q: 'one', key: '*' }],
  publishes: ['a..b', 'a.x.b', '.', 'a.', '', 'x'].map((key) => ({ key, body: key === '' ? '<empty>' : key })),
  expected: {
    lit: ['a..b'], star: ['a..b', 'a.x.b'], two: ['.', 'a.'], empty: ['<empty>'], one: ['x'],
  },
}));

sc('routing.headers_match_all', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [{ q: 'all', args: { 'x-match': 'all', a: 'one', b: 2 } }, { q: 'none', args: { 'x-match': 'all' } }],
  publishes: [
    { body: 'both', headers: { a: 'one', b: 2 } },
    { body: 'both+extra', headers: { a: 'one', b: 2, c: 'x' } },
    { body: 'only-a', headers: { a: 'one' } },
    { body: 'wrong-b', headers: { a: 'one', b: 3 } },
    { body: 'no-headers' },
  ],
  expected: { all: ['both', 'both+extra'], none: ['both', 'both+extra', 'only-a', 'wrong-b', 'no-headers'] },
}));

sc('routing.headers_match_any', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [{ q: 'any', args: { 'x-match': 'any', a: 'one', b: 2 } }, { q: 'default', args: { a: 'one', b: 2 } }],
  publishes: [
    { body: 'both', headers: { a: 'one', b: 2 } },
    { body: 'only-a', headers: { a: 'one' } },
    { body: 'only-b', headers: { b: 2 } },
    { body: 'wrong', headers: { a: 'two', b: 5 } },
    { body: 'no-headers' },
  ],
  expected: { any: ['both', 'only-a', 'only-b'], default: ['both'] },
}));

sc('routing.single_delivery_multiple_bindings', (ctx) => routeMatrix(ctx, 'topic', {
  bindings: [{ q: 'q', key: 'a.*' }, { q: 'q', key: '*.b' }, { q: 'q', key: '#' }, { q: 'q', key: 'a.b' }],
  publishes: [{ key: 'a.b' }, { key: 'c.d' }],
  expected: { q: ['a.b', 'c.d'] },
}));

// ---- queue ------------------------------------------------------------------------

sc('queue.server_named', async (ctx) => {
  const { ch } = await open(ctx);
  const ok = await ch.assertQueue('', { exclusive: true });
  ctx.trackQueue(ok.queue);
  assert(/^amq\.gen-/.test(ok.queue), `server-named queue ${ok.queue} does not start with amq.gen-`);
  eq(ok.messageCount, 0, 'message count');
  eq(ok.consumerCount, 0, 'consumer count');
  const again = await ch.checkQueue(ok.queue);
  eq(again.queue, ok.queue, 'passive declare name');
  return ok.queue;
});

sc('queue.exclusive_other_connection_405', { quick: true }, async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { exclusive: true, durable: false });
  const other = await ctx.amqp();
  const c1 = await other.createChannel();
  const e1 = await rejects(c1.assertQueue(q, { exclusive: false, durable: false }), 'declare from another connection');
  eq(e1.code, 405, 'declare code');
  await channelClosedWith(c1, 405, 'declare');
  const c2 = await other.createChannel();
  const e2 = await rejects(c2.consume(q, () => {}), 'consume from another connection');
  eq(e2.code, 405, 'consume code');
  await assertConnAlive(other, 'other connection');
  // The owner still uses it normally.
  await ch.sendToQueue(q, Buffer.from('mine'));
  await until(async () => (await ch.get(q, { noAck: true })), 2000, 'owner get');
  return e1.message;
});

sc('queue.auto_delete_after_last_consumer', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { autoDelete: true, durable: false });
  await sleep(100);
  await ch.checkQueue(q); // never had a consumer: still there
  const a = await ch.consume(q, () => {}, { noAck: true });
  const b = await ch.consume(q, () => {}, { noAck: true });
  await ch.cancel(a.consumerTag);
  eq((await ch.checkQueue(q)).consumerCount, 1, 'consumers after first cancel');
  await ch.cancel(b.consumerTag);
  await until(async () => {
    const c = await conn.createChannel();
    try { await c.checkQueue(q); await c.close(); return false; } catch (e) { return e.code === 404; }
  }, 3000, 'auto-delete queue to disappear');
});

sc('queue.declare_ok_counts', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  await c.prefetch(1);
  await c.consume(q, () => {}, { noAck: false });
  await until(async () => (await ch.checkQueue(q)).messageCount === 2, 2000, 'one message in flight');
  const ok = await ch.checkQueue(q);
  eq(ok.messageCount, 2, 'message_count (ready only)');
  eq(ok.consumerCount, 1, 'consumer_count');
  const re = await ch.assertQueue(q, { durable: false });
  eq(re.messageCount, 2, 'active redeclare message_count');
});

sc('queue.purge_count', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 6; i++) await pub(ch, '', q, `m${i}`);
  const held = await ch.get(q, { noAck: false });
  assert(held, 'get returned nothing');
  const ok = await ch.purgeQueue(q);
  eq(ok.messageCount, 5, 'purge-ok message_count (unacked not purged)');
  ch.nack(held, false, true);
  await until(async () => (await ch.checkQueue(q)).messageCount === 1, 2000, 'nacked message back');
  eq((await ch.purgeQueue(q)).messageCount, 1, 'second purge');
  eq((await ch.purgeQueue(q)).messageCount, 0, 'purge of empty queue');
});

sc('queue.delete_count', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 4; i++) await pub(ch, '', q, `m${i}`);
  eq((await ch.deleteQueue(q)).messageCount, 4, 'delete-ok message_count');
  eq((await ch.deleteQueue(q)).messageCount, 0, 'delete of a missing queue');
});

sc('queue.unbind_stops_routing', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, 'amq.direct', ctx.name('k'));
  await pub(ch, 'amq.direct', ctx.name('k'), 'bound');
  await ch.unbindQueue(q, 'amq.direct', ctx.name('k'));
  await pub(ch, 'amq.direct', ctx.name('k'), 'unbound');
  await ch.unbindQueue(q, 'amq.direct', ctx.name('never-bound')); // unbinding a missing binding is ok
  deepEq(bodies(await getAll(ch, q)), ['bound'], 'received');
});

// ---- basic ------------------------------------------------------------------------

sc('basic.publish_get', { quick: true }, async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'first');
  await pub(ch, '', q, 'second');
  const m = await ch.get(q, { noAck: false });
  assert(m, 'get-empty for a non-empty queue');
  eq(m.content.toString(), 'first', 'body');
  eq(m.fields.exchange, '', 'exchange');
  eq(m.fields.routingKey, q, 'routing key');
  eq(m.fields.redelivered, false, 'redelivered');
  eq(m.fields.messageCount, 1, 'message_count remaining');
  eq(m.fields.deliveryTag, 1, 'delivery tag');
  ch.ack(m);
  const m2 = await ch.get(q, { noAck: true });
  eq(m2 && m2.content.toString(), 'second', 'second body');
  eq(m2.fields.deliveryTag, 2, 'second delivery tag');
  eq(m2.fields.messageCount, 0, 'message_count remaining');
  eq(await ch.get(q, { noAck: true }), false, 'get on empty queue');
});

sc('basic.mandatory_unroutable_returned', { quick: true }, async (ctx) => {
  const { ch } = await open(ctx);
  const returned = [];
  ch.on('return', (m) => returned.push(m));
  const key = ctx.name('nowhere');
  ch.publish('amq.direct', key, Buffer.from('ret'), { mandatory: true, messageId: 'mid-1' });
  ch.publish('amq.direct', key, Buffer.from('silent'), { mandatory: false });
  await until(() => returned.length >= 1, 3000, 'basic.return');
  await sleep(200);
  eq(returned.length, 1, 'returns');
  const r = returned[0];
  eq(r.fields.replyCode, 312, 'reply code');
  eq(r.fields.replyText, 'NO_ROUTE', 'reply text');
  eq(r.fields.exchange, 'amq.direct', 'exchange');
  eq(r.fields.routingKey, key, 'routing key');
  eq(r.content.toString(), 'ret', 'body');
  eq(r.properties.messageId, 'mid-1', 'message id');
});

sc('basic.consume_order_preserved', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 200; i++) ch.publish('', q, Buffer.from(String(i)));
  await ch.waitForConfirms();
  const got = await consumeN(ch, q, 200, { noAck: false });
  got.forEach((m, i) => {
    eq(m.content.toString(), String(i), `message ${i}`);
    eq(m.fields.deliveryTag, i + 1, `delivery tag ${i}`);
  });
  ch.ackAll();
});

// ---- ack -------------------------------------------------------------------------

sc('ack.nack_requeue_redelivered', { quick: true }, async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'again');
  const m1 = await ch.get(q, { noAck: false });
  eq(m1.fields.redelivered, false, 'first redelivered flag');
  ch.nack(m1, false, true);
  const m2 = await until(() => ch.get(q, { noAck: false }), 2000, 'requeued message');
  eq(m2.content.toString(), 'again', 'body');
  eq(m2.fields.redelivered, true, 'redelivered after nack');
  ch.reject(m2, true);
  const m3 = await until(() => ch.get(q, { noAck: false }), 2000, 'requeued message');
  eq(m3.fields.redelivered, true, 'redelivered after reject');
  ch.ack(m3);
  eq((await ch.checkQueue(q)).messageCount, 0, 'queue empty after ack');
});

sc('ack.reject_discard', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'a');
  await pub(ch, '', q, 'b');
  ch.reject(await ch.get(q, { noAck: false }), false);
  ch.nack(await ch.get(q, { noAck: false }), false, false);
  eq((await ch.checkQueue(q)).messageCount, 0, 'queue after reject/nack without requeue');
  eq(await ch.get(q), false, 'get');
});

sc('ack.ack_multiple', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 5; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  const got = await consumeN(c, q, 5, { noAck: false });
  c.ack(got[2], true); // acks 1..3
  await c.close(); // 4 and 5 go back to the queue
  const rest = await getAll(ch, q);
  deepEq(bodies(rest), ['m3', 'm4'], 'requeued after close');
  assert(rest.every((m) => m.fields.redelivered), 'requeued messages are marked redelivered');
});

sc('ack.unacked_requeued_on_channel_close', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  await consumeN(c, q, 3, { noAck: false });
  eq((await ch.checkQueue(q)).messageCount, 0, 'ready while unacked');
  await c.close();
  await until(async () => (await ch.checkQueue(q)).messageCount === 3, 2000, 'requeue on close');
  const rest = await getAll(ch, q);
  deepEq(bodies(rest), ['m0', 'm1', 'm2'], 'order after requeue');
  assert(rest.every((m) => m.fields.redelivered), 'redelivered flag');
});

sc('ack.recover_requeue', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'r');
  const m = await ch.get(q, { noAck: false });
  assert(m && !m.fields.redelivered, 'first get');
  await ch.recover();
  const m2 = await until(() => ch.get(q, { noAck: true }), 2000, 'recovered message');
  eq(m2.content.toString(), 'r', 'body');
  eq(m2.fields.redelivered, true, 'redelivered after basic.recover');
});

// ---- qos ---------------------------------------------------------------------------

sc('qos.prefetch_count_limits', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 5; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  await c.prefetch(2);
  const got = [];
  await c.consume(q, (m) => m && got.push(m), { noAck: false });
  await until(() => got.length >= 2, 3000, 'first 2 deliveries');
  await sleep(250);
  eq(got.length, 2, 'deliveries with prefetch 2 and nothing acked');
  c.ack(got[0]);
  await until(() => got.length >= 3, 3000, 'third delivery after ack');
  await sleep(150);
  eq(got.length, 3, 'deliveries after one ack');
  c.ack(got[2], true);
  await until(() => got.length >= 5, 3000, 'remaining deliveries');
  deepEq(bodies(got), ['m0', 'm1', 'm2', 'm3', 'm4'], 'order');
});

sc('qos.prefetch_global_shared', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q1 = ctx.q('a'), q2 = ctx.q('b');
  for (const q of [q1, q2]) {
    await ch.assertQueue(q, { durable: false });
    for (let i = 0; i < 5; i++) await pub(ch, '', q, `${q}-${i}`);
  }
  const c = await conn.createChannel();
  await c.prefetch(3, true);
  const got = [];
  await c.consume(q1, (m) => m && got.push(m), { noAck: false });
  await c.consume(q2, (m) => m && got.push(m), { noAck: false });
  await until(() => got.length >= 3, 3000, '3 deliveries');
  await sleep(300);
  eq(got.length, 3, 'deliveries across both consumers with global prefetch 3');
});

// ---- confirm -----------------------------------------------------------------------

sc('confirm.ack_after_publish', { quick: true }, async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'routed');
  await pub(ch, '', q, 'persistent', { persistent: true });
  await pub(ch, 'amq.direct', ctx.name('unroutable'), 'unroutable is acked too');
  eq((await ch.checkQueue(q)).messageCount, 2, 'queue depth');
});

sc('confirm.nack_reject_publish_max_length', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish' } });
  await pub(ch, '', q, 'fits');
  const e = await rejects(pub(ch, '', q, 'overflow'), 'publish over max-length');
  await pub(ch, '', ctx.name('nowhere'), 'unroutable still acked');
  deepEq(bodies(await getAll(ch, q)), ['fits'], 'queue contents');
  await pub(ch, '', q, 'fits-again');
  return `nack: ${e.message}`;
});

sc('confirm.many_publishes_all_confirmed', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  let acked = 0;
  for (let i = 0; i < 2000; i++) ch.publish('', q, Buffer.from(String(i)), {}, (err) => { if (!err) acked++; });
  await ch.waitForConfirms();
  eq(acked, 2000, 'acked publishes');
  eq((await ch.checkQueue(q)).messageCount, 2000, 'queue depth');
});

sc('confirm.mandatory_return_before_ack', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const events = [];
  ch.on('return', () => events.push('return'));
  await pub(ch, 'amq.direct', ctx.name('nowhere'), 'm', { mandatory: true });
  events.push('ack');
  deepEq(events, ['return', 'ack'], 'event order');
});

// ---- consumer ---------------------------------------------------------------------

sc('consumer.server_cancel_on_queue_delete', { quick: true }, async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  let cancelled = false;
  const ok = await ch.consume(q, (m) => { if (m === null) cancelled = true; }, { noAck: true });
  const other = await conn.createChannel();
  await other.deleteQueue(q);
  await until(() => cancelled, 3000, 'basic.cancel from server');
  assert(!ch.closedBy && ch.errors.length === 0, 'channel should stay open');
  await ch.checkExchange('amq.direct');
  return `cancelled ${ok.consumerTag}`;
});

sc('consumer.cancel_stops_delivery', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const got = [];
  const ok = await ch.consume(q, (m) => m && got.push(m.content.toString()), { noAck: true });
  await pub(ch, '', q, 'before');
  await until(() => got.length === 1, 2000, 'delivery before cancel');
  await ch.cancel(ok.consumerTag);
  await pub(ch, '', q, 'after');
  await sleep(150);
  deepEq(got, ['before'], 'deliveries');
  eq((await ch.checkQueue(q)).messageCount, 1, 'message left in queue');
  eq((await ch.checkQueue(q)).consumerCount, 0, 'consumers');
});

sc('consumer.round_robin_two_consumers', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const c = await conn.createChannel();
  const a = [], b = [];
  await c.consume(q, (m) => m && a.push(m.content.toString()), { noAck: true });
  await c.consume(q, (m) => m && b.push(m.content.toString()), { noAck: true });
  for (let i = 0; i < 10; i++) await pub(ch, '', q, String(i));
  await until(() => a.length + b.length === 10, 3000, '10 deliveries');
  eq(a.length, 5, 'first consumer share');
  eq(b.length, 5, 'second consumer share');
  return `a=${a.join(',')} b=${b.join(',')}`;
});

// ---- properties -------------------------------------------------------------------

function userOf(uri) { return decodeURIComponent(new URL(uri).username) || 'guest'; }

sc('properties.all_basic_properties_round_trip', { quick: true }, async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
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
    timestamp: 1700000000,
    type: 'test.type',
    userId: userOf(ctx.uri),
    appId: 'conformance',
  };
  await pub(ch, '', q, '{}', props);
  const m = await ch.get(q, { noAck: true });
  assert(m, 'no message');
  const p = m.properties;
  for (const k of Object.keys(props)) {
    if (k === 'headers') deepEq(p.headers, props.headers, 'headers');
    else eq(p[k], props[k], k);
  }
  eq(p.clusterId, undefined, 'clusterId (not settable in amqplib)');
  return '13 properties (amqplib cannot send cluster-id)';
});

sc('properties.header_field_types_round_trip', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const headers = {
    str: 'hello ünïcode',
    empty: '',
    i8: { '!': 'int8', value: -5 },
    u8: { '!': 'uint8', value: 200 },
    i16: { '!': 'int16', value: -300 },
    u16: { '!': 'uint16', value: 60000 },
    i32: { '!': 'int32', value: -70000 },
    u32: { '!': 'uint32', value: 3000000000 },
    i64: { '!': 'int64', value: 2 ** 40 + 3 },
    f32: { '!': 'float', value: 1.5 },
    f64: 3.141592653589793,
    dec: { '!': 'decimal', value: { places: 2, digits: 12345 } },
    ts: { '!': 'timestamp', value: 1700000000 },
    yes: true,
    no: false,
    nil: null,
    bytes: Buffer.from([0, 1, 2, 254, 255]),
    arr: [1, 'two', true, [3], { k: 'v' }],
    table: { nested: { deep: 'x', n: 1 } },
  };
  await pub(ch, '', q, 'h', { headers });
  const m = await ch.get(q, { noAck: true });
  assert(m, 'no message');
  const h = m.properties.headers;
  const expect = {
    str: 'hello ünïcode', empty: '', i8: -5, u8: 200, i16: -300, u16: 60000, i32: -70000,
    u32: 3000000000, i64: 2 ** 40 + 3, f32: 1.5, f64: 3.141592653589793,
    dec: { '!': 'decimal', value: { places: 2, digits: 12345 } },
    ts: { '!': 'timestamp', value: 1700000000 }, yes: true, no: false, nil: null,
    arr: [1, 'two', true, [3], { k: 'v' }], table: { nested: { deep: 'x', n: 1 } },
  };
  for (const [k, v] of Object.entries(expect)) deepEq(h[k], v, `header ${k}`);
  assert(Buffer.isBuffer(h.bytes) && h.bytes.equals(headers.bytes), `header bytes: ${show(h.bytes)}`);
  eq(Object.keys(h).length, Object.keys(headers).length, 'header count');
});

// ---- content ---------------------------------------------------------------------

sc('content.body_empty', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, Buffer.alloc(0), { contentType: 'text/plain' });
  const m = await ch.get(q, { noAck: true });
  assert(m, 'no message');
  eq(m.content.length, 0, 'body length');
  eq(m.properties.contentType, 'text/plain', 'content type');
  // and via basic.deliver
  await pub(ch, '', q, Buffer.alloc(0));
  const [d] = await consumeN(ch, q, 1);
  eq(d.content.length, 0, 'delivered body length');
});

sc('content.body_frame_boundaries', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const max = conn.connection.frameMax - 8;
  const sizes = [1, 2, max - 1, max, max + 1, 2 * max, 2 * max + 1, 3 * max - 1];
  for (const n of sizes) await pub(ch, '', q, pattern(n, n));
  for (const n of sizes) {
    const m = await ch.get(q, { noAck: true });
    assert(m, `missing message of ${n} bytes`);
    eq(m.content.length, n, 'body length');
    assert(m.content.equals(pattern(n, n)), `body of ${n} bytes differs`);
  }
  return `sizes ${sizes.join(',')}`;
});

sc('content.body_16mib', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const body = pattern(16 * 1024 * 1024, 99);
  await pub(ch, '', q, body);
  const m = await ch.get(q, { noAck: true });
  assert(m, 'no message');
  eq(m.content.length, body.length, 'body length');
  assert(m.content.equals(body), 'body bytes differ');
});

// ---- errors ----------------------------------------------------------------------

sc('errors.passive_declare_missing_queue_404', { quick: true }, async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await rejects(ch.checkQueue(ctx.name('missing')), 'passive declare');
  eq(e.code, 404, 'reply code');
  assert(/NOT_FOUND/.test(e.message), `message ${e.message}`);
  await channelClosedWith(ch, 404, 'passive declare');
  await assertConnAlive(conn, 'after 404');
  return e.message;
});

sc('errors.publish_missing_exchange_404', async (ctx) => {
  const { conn, ch } = await open(ctx);
  ch.publish(ctx.name('no-such-exchange'), 'k', Buffer.from('x'));
  const e = await channelClosedWith(ch, 404, 'publish to missing exchange');
  await assertConnAlive(conn, 'after 404');
  return e.message;
});

sc('errors.queue_redeclare_mismatch_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const e = await rejects(ch.assertQueue(q, { durable: true }), 'redeclare with other durable');
  eq(e.code, 406, 'reply code');
  const c2 = await conn.createChannel();
  const e2 = await rejects(c2.assertQueue(q, { durable: false, arguments: { 'x-max-length': 5 } }), 'redeclare with other args');
  eq(e2.code, 406, 'reply code (args)');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('errors.exchange_redeclare_type_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.x();
  await ch.assertExchange(ex, 'direct', { durable: false });
  const e = await rejects(ch.assertExchange(ex, 'fanout', { durable: false }), 'redeclare with other type');
  eq(e.code, 406, 'reply code');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('errors.queue_delete_if_empty_406', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'x');
  const e = await rejects(ch.deleteQueue(q, { ifEmpty: true }), 'delete if-empty');
  eq(e.code, 406, 'if-empty reply code');
  const c2 = await conn.createChannel();
  await c2.consume(q, () => {}, { noAck: false });
  const c3 = await conn.createChannel();
  const e2 = await rejects(c3.deleteQueue(q, { ifUnused: true }), 'delete if-unused');
  eq(e2.code, 406, 'if-unused reply code');
  await assertConnAlive(conn, 'after 406');
  return `${e.message} / ${e2.message}`;
});

sc('errors.exchange_delete_if_unused_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.x(), q = ctx.q();
  await ch.assertExchange(ex, 'direct', { durable: false });
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, ex, 'k');
  const e = await rejects(ch.deleteExchange(ex, { ifUnused: true }), 'exchange delete if-unused');
  eq(e.code, 406, 'reply code');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('errors.exchange_amq_prefix_403', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.trackExchange(`amq.conf.${ctx.runId}.x`);
  const e = await rejects(ch.assertExchange(ex, 'direct', { durable: false }), 'declare amq.* exchange');
  eq(e.code, 403, 'reply code');
  await assertConnAlive(conn, 'after 403');
  return e.message;
});

sc('errors.publish_internal_exchange_403', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.x();
  await ch.assertExchange(ex, 'fanout', { durable: false, internal: true });
  ch.publish(ex, '', Buffer.from('x'));
  const e = await channelClosedWith(ch, 403, 'publish to internal exchange');
  await assertConnAlive(conn, 'after 403');
  return e.message;
});

sc('errors.exclusive_consumer_403', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await ch.consume(q, () => {}, { exclusive: true });
  const c2 = await conn.createChannel();
  const e = await rejects(c2.consume(q, () => {}), 'second consumer on exclusively consumed queue');
  eq(e.code, 403, 'reply code');
  const q2 = ctx.q('b');
  await ch.assertQueue(q2, { durable: false });
  await ch.consume(q2, () => {});
  const c3 = await conn.createChannel();
  const e2 = await rejects(c3.consume(q2, () => {}, { exclusive: true }), 'exclusive consume on busy queue');
  eq(e2.code, 403, 'reply code (exclusive second)');
  await assertConnAlive(conn, 'after 403');
  return e.message;
});

sc('errors.ack_unknown_delivery_tag_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  ch.ack({ fields: { deliveryTag: 999 } });
  const e = await channelClosedWith(ch, 406, 'ack of unknown delivery tag');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('errors.wrong_user_id_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  ch.sendToQueue(q, Buffer.from('x'), { userId: 'not-' + userOf(ctx.uri) });
  const e = await channelClosedWith(ch, 406, 'publish with foreign user-id');
  await assertConnAlive(conn, 'after 406');
  eq(await count(conn, q), 0, 'queue depth');
  return e.message;
});

sc('errors.exchange_unknown_type_503', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.x();
  await rejects(ch.assertExchange(ex, 'no-such-type', { durable: false }), 'declare with unknown type');
  const e = await connClosedWith(conn, 503, 'unknown exchange type');
  return e.message;
});

sc('errors.consumer_tag_reuse_530', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await ch.consume(q, () => {}, { consumerTag: 'dup-tag' });
  await rejects(ch.consume(q, () => {}, { consumerTag: 'dup-tag' }), 'consume with same tag');
  const e = await connClosedWith(conn, 530, 'consumer tag reuse');
  return e.message;
});

sc('errors.qos_prefetch_size_540', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const defs = require('amqplib/lib/defs');
  await rejects(ch.rpc(defs.BasicQos, { prefetchSize: 1000, prefetchCount: 0, global: false }, defs.BasicQosOk),
    'qos with prefetch_size');
  const e = await connClosedWith(conn, 540, 'prefetch_size != 0');
  return e.message;
});

// ---- extensions -------------------------------------------------------------------

sc('extensions.queue_message_ttl', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-message-ttl': 100 } });
  await pub(ch, '', q, 'short-lived');
  eq((await ch.checkQueue(q)).messageCount, 1, 'depth before ttl');
  await sleep(350);
  eq(await ch.get(q, { noAck: true }), false, 'get after ttl');
});

sc('extensions.per_message_ttl', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'expires', { expiration: '100' });
  await pub(ch, '', q, 'stays');
  await pub(ch, '', q, 'zero', { expiration: '0' });
  await sleep(350);
  deepEq(bodies(await getAll(ch, q)), ['stays'], 'remaining');
});

sc('extensions.dead_letter_on_reject', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const dlx = ctx.x('dlx'), dlq = ctx.q('dlq'), q = ctx.q('src');
  await ch.assertExchange(dlx, 'fanout', { durable: false });
  await ch.assertQueue(dlq, { durable: false });
  await ch.bindQueue(dlq, dlx, '');
  await ch.assertQueue(q, { durable: false, arguments: { 'x-dead-letter-exchange': dlx } });
  await pub(ch, '', q, 'dead', { headers: { orig: 'yes' } });
  ch.reject(await ch.get(q, { noAck: false }), false);
  const m = await until(() => ch.get(dlq, { noAck: true }), 3000, 'dead-lettered message');
  eq(m.content.toString(), 'dead', 'body');
  eq(m.fields.exchange, dlx, 'delivered via exchange');
  eq(m.fields.routingKey, q, 'routing key kept');
  const h = m.properties.headers;
  eq(h.orig, 'yes', 'original header');
  const xd = h['x-death'];
  assert(Array.isArray(xd) && xd.length === 1, `x-death: ${show(xd)}`);
  eq(xd[0].reason, 'rejected', 'x-death reason');
  eq(xd[0].queue, q, 'x-death queue');
  eq(xd[0].exchange, '', 'x-death exchange');
  deepEq(xd[0]['routing-keys'], [q], 'x-death routing-keys');
  eq(xd[0].count, 1, 'x-death count');
  eq(h['x-first-death-reason'], 'rejected', 'x-first-death-reason');
  eq(h['x-first-death-queue'], q, 'x-first-death-queue');
  eq(h['x-first-death-exchange'], '', 'x-first-death-exchange');
});

sc('extensions.dead_letter_on_ttl_with_routing_key', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const dlq = ctx.q('dlq'), q = ctx.q('src');
  await ch.assertQueue(dlq, { durable: false });
  await ch.assertQueue(q, {
    durable: false,
    arguments: { 'x-message-ttl': 50, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': dlq },
  });
  await pub(ch, '', q, 'expired', { expiration: '10000' });
  const m = await until(() => ch.get(dlq, { noAck: true }), 3000, 'expired message in DLQ');
  eq(m.content.toString(), 'expired', 'body');
  eq(m.fields.routingKey, dlq, 'dead-letter routing key');
  const xd = m.properties.headers['x-death'];
  eq(xd[0].reason, 'expired', 'x-death reason');
  eq(xd[0].queue, q, 'x-death queue');
  eq(m.properties.expiration, undefined, 'per-message expiration removed on dead-lettering');
  eq(xd[0]['original-expiration'], '10000', 'x-death original-expiration');
});

sc('extensions.max_length_drop_head', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': 2 } });
  for (const b of ['1', '2', '3', '4']) await pub(ch, '', q, b);
  deepEq(bodies(await getAll(ch, q)), ['3', '4'], 'kept newest');
  const q2 = ctx.q('bytes');
  await ch.assertQueue(q2, { durable: false, arguments: { 'x-max-length-bytes': 10 } });
  for (const b of ['aaaa', 'bbbb', 'cccc']) await pub(ch, '', q2, b);
  deepEq(bodies(await getAll(ch, q2)), ['bbbb', 'cccc'], 'kept within 10 bytes');
});

sc('extensions.priority_queue', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-priority': 10 } });
  // priority above x-max-priority counts as the maximum
  const ps = [[1, 'p1'], [5, 'p5'], [undefined, 'none'], [9, 'p9'], [200, 'p200'], [5, 'p5b']];
  for (const [p, b] of ps) await pub(ch, '', q, b, p === undefined ? {} : { priority: p });
  deepEq(bodies(await getAll(ch, q)), ['p200', 'p9', 'p5', 'p5b', 'p1', 'none'], 'delivery order');
});

sc('extensions.direct_reply_to', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q('rpc');
  const server = await conn.createChannel();
  await server.assertQueue(q, { durable: false });
  let seenReplyTo = null;
  await server.consume(q, (m) => {
    if (!m) return;
    seenReplyTo = m.properties.replyTo;
    server.publish('', m.properties.replyTo, Buffer.from('pong:' + m.content),
      { correlationId: m.properties.correlationId });
  }, { noAck: true });
  const replies = [];
  await ch.consume('amq.rabbitmq.reply-to', (m) => m && replies.push(m), { noAck: true });
  ch.sendToQueue(q, Buffer.from('ping'), { replyTo: 'amq.rabbitmq.reply-to', correlationId: 'c1' });
  await until(() => replies.length === 1, 3000, 'reply');
  eq(replies[0].content.toString(), 'pong:ping', 'reply body');
  eq(replies[0].properties.correlationId, 'c1', 'correlation id');
  assert(/^amq\.rabbitmq\.reply-to\..+/.test(seenReplyTo), `reply-to seen by server: ${seenReplyTo}`);
  return seenReplyTo.slice(0, 40) + '...';
});

sc('extensions.alternate_exchange', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const ae = ctx.x('ae'), ex = ctx.x('main'), qa = ctx.q('alt'), qm = ctx.q('main');
  await ch.assertExchange(ae, 'fanout', { durable: false });
  await ch.assertExchange(ex, 'direct', { durable: false, alternateExchange: ae });
  await ch.assertQueue(qa, { durable: false });
  await ch.assertQueue(qm, { durable: false });
  await ch.bindQueue(qa, ae, '');
  await ch.bindQueue(qm, ex, 'known');
  const returned = [];
  ch.on('return', (m) => returned.push(m));
  await pub(ch, ex, 'known', 'routed');
  await pub(ch, ex, 'unknown', 'to-ae', { mandatory: true });
  deepEq(bodies(await getAll(ch, qm)), ['routed'], 'main queue');
  deepEq(bodies(await getAll(ch, qa)), ['to-ae'], 'alternate queue');
  eq(returned.length, 0, 'mandatory message routed via AE is not returned');
});

sc('extensions.cc_bcc_sender_selected', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const ex = ctx.x();
  await ch.assertExchange(ex, 'direct', { durable: false });
  const qs = {};
  for (const k of ['a', 'b', 'c']) {
    qs[k] = ctx.q(k);
    await ch.assertQueue(qs[k], { durable: false });
    await ch.bindQueue(qs[k], ex, k);
  }
  await pub(ch, ex, 'a', 'multi', { CC: ['b'], BCC: ['c'], headers: { keep: 1 } });
  for (const k of ['a', 'b', 'c']) {
    const m = await ch.get(qs[k], { noAck: true });
    assert(m, `queue ${k} got nothing`);
    eq(m.fields.routingKey, 'a', `routing key seen on ${k}`);
    deepEq(m.properties.headers.CC, ['b'], `CC header on ${k}`);
    eq(m.properties.headers.BCC, undefined, `BCC header on ${k}`);
    eq(m.properties.headers.keep, 1, `other header on ${k}`);
  }
});

sc('extensions.queue_expires', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-expires': 300 } });
  await ch.checkQueue(q);
  await sleep(600);
  // a passive declare counts as use and restarts the timer: poll slower than it
  await until(async () => {
    const c = await conn.createChannel();
    try { await c.checkQueue(q); await c.close(); return false; } catch (e) { return e.code === 404; }
  }, 4000, 'unused queue to expire', 600);
});

sc('extensions.consumer_priority', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const c = await conn.createChannel();
  const lo = [], hi = [];
  await c.consume(q, (m) => m && lo.push(m), { noAck: true, priority: 1 });
  await c.consume(q, (m) => m && hi.push(m), { noAck: true, priority: 10 });
  for (let i = 0; i < 10; i++) await pub(ch, '', q, String(i));
  await until(() => lo.length + hi.length === 10, 3000, '10 deliveries');
  eq(hi.length, 10, 'deliveries to the high-priority consumer');
});

// ---- heartbeat --------------------------------------------------------------------

sc('heartbeat.negotiated_interval', async (ctx) => {
  const conn = await ctx.amqp({ query: { heartbeat: 1 } });
  eq(conn.connection.heartbeat, 1, 'negotiated heartbeat');
  await sleep(3500); // amqplib errors out if it hears nothing for 2 intervals
  assert(!conn.closedBy, `connection closed while idle: ${show(conn.errors.map((e) => e.message))}`);
  await assertConnAlive(conn, 'after idle period');
});

// ---- edge cases -------------------------------------------------------------------

sc('queue.requeue_preserves_position', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (const b of ['a', 'b', 'c', 'd']) await pub(ch, '', q, b);
  const a = await ch.get(q, { noAck: false });
  const b = await ch.get(q, { noAck: false });
  ch.nack(b, false, true);
  ch.nack(a, false, true);
  await until(async () => (await ch.checkQueue(q)).messageCount === 4, 2000, 'requeue');
  deepEq(bodies(await getAll(ch, q)), ['a', 'b', 'c', 'd'], 'order after requeue');
});

sc('ack.ack_all_tag_zero', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  for (let i = 0; i < 3; i++) assert(await c.get(q, { noAck: false }), 'get');
  c.ackAll(); // basic.ack delivery-tag 0, multiple
  await c.close();
  eq((await ch.checkQueue(q)).messageCount, 0, 'messages back after ack-all + close');
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `n${i}`);
  const c2 = await conn.createChannel();
  for (let i = 0; i < 3; i++) assert(await c2.get(q, { noAck: false }), 'get');
  c2.nackAll(true); // basic.nack delivery-tag 0, multiple, requeue
  await until(async () => (await ch.checkQueue(q)).messageCount === 3, 2000, 'nack-all requeue');
  const rest = await getAll(ch, q);
  deepEq(bodies(rest), ['n0', 'n1', 'n2'], 'order after nack-all');
  assert(c2.errors.length === 0, `channel errors: ${c2.errors.map((e) => e.message)}`);
});

sc('errors.double_ack_406', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'x');
  const c = await conn.createChannel();
  const m = await c.get(q, { noAck: false });
  c.ack(m);
  c.ack(m);
  const e = await channelClosedWith(c, 406, 'second ack of the same tag');
  eq((await ch.checkQueue(q)).messageCount, 0, 'first ack took effect');
  return e.message;
});

sc('errors.ack_on_other_channel_406', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'x');
  const c1 = await conn.createChannel();
  const c2 = await conn.createChannel();
  const m = await c1.get(q, { noAck: false });
  c2.ack(m); // tags are per channel: c2 never delivered tag 1
  const e = await channelClosedWith(c2, 406, 'ack on another channel');
  assert(!c1.errors.length, 'delivering channel unaffected');
  c1.ack(m);
  await c1.checkQueue(q);
  return e.message;
});

sc('queue.exclusive_deleted_on_connection_close', async (ctx) => {
  const owner = await ctx.amqp();
  const ch = await owner.createChannel();
  const q = ctx.q();
  await ch.assertQueue(q, { exclusive: true, durable: false });
  const named = await ch.assertQueue('', { exclusive: true });
  await owner.close();
  const other = await ctx.amqp();
  for (const n of [q, named.queue]) {
    const c = await other.createChannel();
    const e = await rejects(c.checkQueue(n), `passive declare of ${n} after owner closed`);
    eq(e.code, 404, 'reply code');
  }
  const c = await other.createChannel();
  await c.assertQueue(q, { exclusive: true, durable: false }); // name is free again
});

sc('queue.last_declared_queue_shortcut', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const ok = await ch.assertQueue('', { exclusive: true });
  ctx.trackQueue(ok.queue);
  // queue '' = the channel's last declared queue; routing key '' = its name
  await ch.bindQueue('', 'amq.direct', '');
  await pub(ch, 'amq.direct', ok.queue, 'via-shortcut');
  const m = await ch.get(ok.queue, { noAck: true });
  eq(m && m.content.toString(), 'via-shortcut', 'routed with the defaulted binding');
  await pub(ch, '', ok.queue, 'consumed');
  const got = await consumeN(ch, '', 1);
  eq(got[0].content.toString(), 'consumed', 'consume on queue ""');
  eq((await ch.purgeQueue('')).messageCount, 0, 'purge of queue ""');
});

sc('errors.no_previous_queue_for_empty_name', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await rejects(ch.bindQueue('', 'amq.direct', 'k'), 'bind queue "" without a declared queue');
  await assertConnAlive(conn, 'after error');
  eq(e.code, 404, `reply code (${e.message})`);
  return e.message;
});

sc('errors.bind_missing_exchange_or_queue_404', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const e1 = await rejects(ch.bindQueue(q, ctx.name('no-exchange'), 'k'), 'bind to missing exchange');
  eq(e1.code, 404, 'missing exchange code');
  const c2 = await conn.createChannel();
  const e2 = await rejects(c2.bindQueue(ctx.name('no-queue'), 'amq.direct', 'k'), 'bind missing queue');
  eq(e2.code, 404, 'missing queue code');
  const c3 = await conn.createChannel();
  const e3 = await rejects(c3.bindExchange(ctx.name('no-dest'), 'amq.direct', 'k'), 'e2e bind to missing destination');
  eq(e3.code, 404, 'missing destination exchange code');
  await assertConnAlive(conn, 'after 404s');
  return `${e1.message} / ${e2.message}`;
});

sc('errors.consume_missing_queue_404', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await rejects(ch.consume(ctx.name('missing'), () => {}), 'consume from missing queue');
  eq(e.code, 404, 'reply code');
  const c2 = await conn.createChannel();
  c2.get(ctx.name('missing')).catch(() => {});
  await channelClosedWith(c2, 404, 'get from missing queue');
  await assertConnAlive(conn, 'after 404');
  return e.message;
});

sc('errors.passive_declare_missing_exchange_404', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const e = await rejects(ch.checkExchange(ctx.name('missing')), 'passive exchange declare');
  eq(e.code, 404, 'reply code');
  await assertConnAlive(conn, 'after 404');
  return e.message;
});

sc('errors.queue_amq_prefix_403', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.trackQueue(`amq.conf.${ctx.runId}.q`);
  const e = await rejects(ch.assertQueue(q, { durable: false }), 'declare amq.* queue');
  eq(e.code, 403, 'reply code');
  await assertConnAlive(conn, 'after 403');
  return e.message;
});

sc('errors.default_exchange_operations_403', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const e1 = await rejects(ch.bindQueue(q, '', 'k'), 'bind to the default exchange');
  eq(e1.code, 403, 'bind code');
  const c2 = await conn.createChannel();
  const e2 = await rejects(c2.deleteExchange('amq.direct'), 'delete amq.direct');
  eq(e2.code, 403, 'delete amq.direct code');
  const c3 = await conn.createChannel();
  const e3 = await rejects(c3.unbindQueue(q, '', q), 'unbind from the default exchange');
  eq(e3.code, 403, 'unbind code');
  await assertConnAlive(conn, 'after 403');
  return `${e1.message} / ${e2.message}`;
});

sc('errors.invalid_queue_arguments_406', async (ctx) => {
  const { conn } = await open(ctx);
  const cases = [
    ['x-max-length', -1], ['x-overflow', 'bogus'], ['x-message-ttl', 'soon'],
    ['x-expires', 0], ['x-max-priority', 256], ['x-dead-letter-exchange', 5],
  ];
  const msgs = [];
  for (const [k, v] of cases) {
    const c = await conn.createChannel();
    const e = await rejects(c.assertQueue(ctx.q(k), { durable: false, arguments: { [k]: v } }), `${k}=${v}`);
    eq(e.code, 406, `${k}=${show(v)} reply code (${e.message})`);
    msgs.push(e.message.replace(/.*PRECONDITION_FAILED - /, ''));
  }
  await assertConnAlive(conn, 'after 406s');
  return msgs.join(' | ');
});

sc('errors.invalid_expiration_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  ch.sendToQueue(q, Buffer.from('x'), { expiration: 'soon' });
  const e = await channelClosedWith(ch, 406, 'publish with non-numeric expiration');
  await assertConnAlive(conn, 'after 406');
  eq(await count(conn, q), 0, 'queue depth');
  return e.message;
});

sc('errors.direct_reply_to_without_consumer_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  ch.sendToQueue(q, Buffer.from('x'), { replyTo: 'amq.rabbitmq.reply-to' });
  const e = await channelClosedWith(ch, 406, 'reply-to amq.rabbitmq.reply-to without consuming it');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('exchange.auto_delete_after_last_unbind', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const ex = ctx.x(), q = ctx.q();
  await ch.assertExchange(ex, 'direct', { durable: false, autoDelete: true });
  await ch.assertQueue(q, { durable: false });
  await sleep(100);
  await ch.checkExchange(ex); // never bound: still there
  await ch.bindQueue(q, ex, 'a');
  await ch.bindQueue(q, ex, 'b');
  await ch.unbindQueue(q, ex, 'a');
  await ch.checkExchange(ex);
  await ch.unbindQueue(q, ex, 'b');
  await until(async () => {
    const c = await conn.createChannel();
    try { await c.checkExchange(ex); await c.close(); return false; } catch (e) { return e.code === 404; }
  }, 3000, 'auto-delete exchange to disappear');
});

sc('exchange.builtin_amq_exchanges', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const types = { 'amq.direct': 'direct', 'amq.fanout': 'fanout', 'amq.topic': 'topic',
    'amq.headers': 'headers', 'amq.match': 'headers' };
  for (const [ex, t] of Object.entries(types)) {
    await ch.checkExchange(ex);
    await ch.assertExchange(ex, t, { durable: true }); // equivalent redeclare is allowed
  }
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, 'amq.topic', ctx.name('t') + '.*');
  await ch.bindQueue(q, 'amq.match', '', { 'x-match': 'all', conf: ctx.runId });
  await pub(ch, 'amq.topic', ctx.name('t') + '.x', 'topic');
  await pub(ch, 'amq.match', '', 'match', { headers: { conf: ctx.runId } });
  deepEq(bodies(await getAll(ch, q)), ['topic', 'match'], 'delivered via amq.topic and amq.match');
});

sc('exchange.e2e_cycle_single_delivery', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const a = ctx.x('a'), b = ctx.x('b'), q = ctx.q();
  await ch.assertExchange(a, 'fanout', { durable: false });
  await ch.assertExchange(b, 'fanout', { durable: false });
  await ch.bindExchange(b, a, '');
  await ch.bindExchange(a, b, '');
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, a, '');
  await ch.bindQueue(q, b, '');
  await pub(ch, a, '', 'once');
  deepEq(bodies(await getAll(ch, q)), ['once'], 'deliveries through an exchange cycle');
});

sc('routing.headers_type_and_x_args', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [
    { q: 'int', args: { 'x-match': 'all', n: 2 } },
    { q: 'xarg', args: { 'x-match': 'all', 'x-ignored': 'zzz', a: 'one' } },
  ],
  publishes: [
    { body: 'int', headers: { n: 2 } },
    { body: 'str', headers: { n: '2' } },
    { body: 'a-only', headers: { a: 'one' } },
  ],
  expected: { int: ['int'], xarg: ['a-only'] },
}));

sc('routing.topic_many_words', (ctx) => {
  const long = Array.from({ length: 40 }, (_, i) => `w${i}`).join('.');
  return routeMatrix(ctx, 'topic', {
    bindings: [{ q: 'multi', key: '#.w5.#.w30.#' }, { q: 'edges', key: 'w0.#.w39' }, { q: 'hh', key: '#.#' },
      { q: 'sh', key: '*.#' }],
    publishes: [{ key: long, body: 'long' }, { key: 'w5.w30', body: 'short' }, { key: 'w30.w5', body: 'reversed' },
      { key: '', body: 'empty' }],
    expected: { multi: ['long', 'short'], edges: ['long'], hh: ['long', 'short', 'reversed', 'empty'],
      sh: ['long', 'short', 'reversed'] },
  });
});

sc('consumer.cancel_unknown_tag_ok', async (ctx) => {
  const { ch } = await open(ctx);
  await ch.cancel('no-such-consumer-tag');
  await ch.checkExchange('amq.direct');
  assert(!ch.errors.length, 'channel error');
});

sc('consumer.exclusive_queue_consumers_same_connection', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { exclusive: true, durable: false });
  const c2 = await conn.createChannel();
  await pub(ch, '', q, 'same-conn');
  const [m] = await consumeN(c2, q, 1);
  eq(m.content.toString(), 'same-conn', 'another channel of the owner connection can consume');
});

sc('extensions.max_length_dead_letters_dropped', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const dlq = ctx.q('dlq'), q = ctx.q('src');
  await ch.assertQueue(dlq, { durable: false });
  await ch.assertQueue(q, { durable: false,
    arguments: { 'x-max-length': 1, 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': dlq } });
  await pub(ch, '', q, 'old');
  await pub(ch, '', q, 'new');
  deepEq(bodies(await getAll(ch, q)), ['new'], 'source keeps newest');
  const m = await until(() => ch.get(dlq, { noAck: true }), 3000, 'dropped message in DLQ');
  eq(m.content.toString(), 'old', 'dead-lettered body');
  eq(m.properties.headers['x-death'][0].reason, 'maxlen', 'x-death reason');
});

sc('extensions.reject_publish_dlx_overflow', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const dlq = ctx.q('dlq'), q = ctx.q('src');
  await ch.assertQueue(dlq, { durable: false });
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': 1, 'x-overflow': 'reject-publish-dlx',
    'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': dlq } });
  await pub(ch, '', q, 'fits');
  await rejects(pub(ch, '', q, 'overflow'), 'publish over max-length');
  deepEq(bodies(await getAll(ch, q)), ['fits'], 'source queue');
  const m = await until(() => ch.get(dlq, { noAck: true }), 3000, 'rejected publish in DLQ');
  eq(m.content.toString(), 'overflow', 'dead-lettered body');
  eq(m.properties.headers['x-death'][0].reason, 'maxlen', 'x-death reason');
});

sc('extensions.x_death_count_increments', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  // rejected messages dead-letter back into the same queue
  await ch.assertQueue(q, { durable: false, arguments: { 'x-dead-letter-exchange': '', 'x-dead-letter-routing-key': q } });
  await pub(ch, '', q, 'loop');
  for (let i = 1; i <= 3; i++) {
    const m = await until(() => ch.get(q, { noAck: false }), 3000, `delivery ${i}`);
    if (i > 1) {
      const xd = m.properties.headers['x-death'];
      eq(xd.length, 1, 'x-death entries');
      eq(xd[0].count, i - 1, `x-death count at delivery ${i}`);
      eq(m.fields.redelivered, false, 'dead-lettered message is not redelivered');
    }
    ch.reject(m, false);
  }
  ch.ackAll();
});

sc('extensions.ttl_queue_and_message_minimum', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-message-ttl': 10000 } });
  await pub(ch, '', q, 'msg-ttl-wins', { expiration: '50' });
  await pub(ch, '', q, 'queue-ttl-applies', { expiration: '60000' });
  await sleep(300);
  deepEq(bodies(await getAll(ch, q)), ['queue-ttl-applies'], 'remaining');
});

sc('extensions.single_active_consumer', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-single-active-consumer': true } });
  const c1 = await conn.createChannel();
  const c2 = await conn.createChannel();
  const a = [], b = [];
  await c1.consume(q, (m) => m && a.push(m.content.toString()), { noAck: true });
  await c2.consume(q, (m) => m && b.push(m.content.toString()), { noAck: true });
  for (let i = 0; i < 6; i++) await pub(ch, '', q, String(i));
  await until(() => a.length + b.length === 6, 3000, '6 deliveries');
  eq(a.length, 6, 'all to the first (active) consumer');
  await c1.close();
  await pub(ch, '', q, 'after');
  await until(() => b.length === 1, 3000, 'second consumer takes over');
  deepEq(b, ['after'], 'second consumer deliveries');
});

sc('queue.declare_args_equivalent_encodings', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': 5 } }); // amqplib: signed byte
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': { '!': 'int32', value: 5 } } });
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': { '!': 'int64', value: 5 } } });
  const c2 = await conn.createChannel();
  const e = await rejects(c2.assertQueue(q, { durable: false, arguments: { 'x-max-length': 6 } }), 'different value');
  eq(e.code, 406, 'reply code for a different value');
  const c3 = await conn.createChannel();
  const e2 = await rejects(c3.assertQueue(q, { durable: false }), 'argument omitted on redeclare');
  eq(e2.code, 406, 'reply code for an omitted argument');
  return e2.message;
});

sc('qos.applies_to_later_consumers_only', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q1 = ctx.q('before'), q2 = ctx.q('after');
  for (const q of [q1, q2]) {
    await ch.assertQueue(q, { durable: false });
    for (let i = 0; i < 4; i++) await pub(ch, '', q, `m${i}`);
  }
  const c = await conn.createChannel();
  const before = [], after = [];
  await c.consume(q1, (m) => m && before.push(m), { noAck: false });
  await c.prefetch(1); // per-consumer limit: only for consumers created from now on
  await c.consume(q2, (m) => m && after.push(m), { noAck: false });
  await until(() => before.length === 4 && after.length >= 1, 3000, 'deliveries');
  await sleep(200);
  eq(before.length, 4, 'consumer created before basic.qos is unlimited');
  eq(after.length, 1, 'consumer created after basic.qos(1)');
});

sc('qos.basic_get_ignores_prefetch', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  await c.prefetch(1, true);
  await c.prefetch(1, false);
  for (let i = 0; i < 3; i++) assert(await c.get(q, { noAck: false }), `get ${i} with prefetch 1 and unacked messages`);
});

sc('extensions.queue_ttl_zero', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-message-ttl': 0 } });
  await pub(ch, '', q, 'dropped');
  eq(await ch.get(q, { noAck: true }), false, 'message with ttl 0 and no consumer');
  const c = await conn.createChannel();
  const got = [];
  await c.consume(q, (m) => m && got.push(m.content.toString()), { noAck: true });
  await pub(ch, '', q, 'delivered');
  await until(() => got.length === 1, 3000, 'immediate delivery to a waiting consumer');
  deepEq(got, ['delivered'], 'deliveries');
});

sc('extensions.per_message_ttl_expires_at_head', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  await pub(ch, '', q, 'head');
  await pub(ch, '', q, 'behind', { expiration: '50' });
  await sleep(250);
  // RabbitMQ's classic queues expire per-message TTL messages only when they
  // reach the head; Warren expires them where they are (a documented
  // difference). Either way an expired message is never delivered.
  const warren = String(conn.connection.serverProperties.product) === 'Warren';
  eq((await ch.checkQueue(q)).messageCount, warren ? 1 : 2, 'depth while the expired message is behind the head');
  deepEq(bodies(await getAll(ch, q)), ['head'], 'deliverable messages');
});

sc('queue.delete_count_excludes_unacked', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  for (let i = 0; i < 3; i++) await pub(ch, '', q, `m${i}`);
  const c = await conn.createChannel();
  assert(await c.get(q, { noAck: false }), 'get');
  eq((await ch.deleteQueue(q)).messageCount, 2, 'delete-ok message_count with one unacked');
});

sc('queue.unknown_arguments_accepted', async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-conf-unknown': 'whatever', plain: 1, 'x-queue-mode': 'lazy' } });
  await ch.assertQueue(q, { durable: false, arguments: { 'x-conf-unknown': 'whatever', plain: 1, 'x-queue-mode': 'lazy' } });
  const ex = ctx.x();
  await ch.assertExchange(ex, 'direct', { durable: false, arguments: { 'x-conf-unknown': 1 } });
});

sc('routing.headers_match_any_without_keys', (ctx) => routeMatrix(ctx, 'headers', {
  bindings: [{ q: 'anyempty', args: { 'x-match': 'any' } }, { q: 'presence', args: { 'x-match': 'any', flag: null } }],
  publishes: [
    { body: 'h', headers: { a: 1 } },
    { body: 'flag', headers: { flag: 'set' } },
    { body: 'none' },
  ],
  expected: { anyempty: [], presence: ['flag'] },
}));

sc('errors.headers_invalid_x_match_406', async (ctx) => {
  const { conn, ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const e = await rejects(ch.bindQueue(q, 'amq.headers', '', { 'x-match': 'most' }), 'bind with x-match=most');
  eq(e.code, 406, 'reply code');
  await assertConnAlive(conn, 'after 406');
  return e.message;
});

sc('consumer.server_generated_tag', async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false });
  const a = await ch.consume(q, () => {}, { noAck: true });
  const b = await ch.consume(q, () => {}, { noAck: true });
  assert(/^amq\.ctag-.+/.test(a.consumerTag), `generated tag ${a.consumerTag}`);
  assert(a.consumerTag !== b.consumerTag, 'distinct tags');
  return a.consumerTag;
});

sc('extensions.dead_letter_to_missing_exchange_dropped', async (ctx) => {
  const { conn, ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-dead-letter-exchange': ctx.name('missing-dlx') } });
  await pub(ch, '', q, 'x');
  ch.reject(await ch.get(q, { noAck: false }), false);
  await sleep(100);
  eq((await ch.checkQueue(q)).messageCount, 0, 'source queue');
  assert(!ch.errors.length && !conn.errors.length, 'no channel or connection error');
});

sc('extensions.alternate_exchange_missing_returns', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const ex = ctx.x();
  await ch.assertExchange(ex, 'direct', { durable: false, alternateExchange: ctx.name('missing-ae') });
  const returned = [];
  ch.on('return', (m) => returned.push(m));
  await pub(ch, ex, 'nowhere', 'r', { mandatory: true });
  eq(returned.length, 1, 'returned when the alternate exchange does not exist');
  eq(returned[0].fields.replyCode, 312, 'reply code');
});

sc('queue.exclusive_publish_allowed_other_connection', async (ctx) => {
  const { ch } = await open(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { exclusive: true, durable: false });
  const other = await ctx.amqp();
  const oc = await other.createConfirmChannel();
  await pub(oc, '', q, 'from-outside');
  const m = await until(() => ch.get(q, { noAck: true }), 2000, 'message');
  eq(m.content.toString(), 'from-outside', 'body');
  const c2 = await other.createChannel();
  const e = await rejects(c2.purgeQueue(q), 'purge from another connection');
  eq(e.code, 405, 'purge reply code');
  const c3 = await other.createChannel();
  const e2 = await rejects(c3.deleteQueue(q), 'delete from another connection');
  eq(e2.code, 405, 'delete reply code');
});

sc('exchange.delete_removes_bindings', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const ex = ctx.x(), q = ctx.q();
  await ch.assertExchange(ex, 'direct', { durable: false });
  await ch.assertQueue(q, { durable: false });
  await ch.bindQueue(q, ex, 'k');
  await ch.deleteExchange(ex);
  await ch.assertExchange(ex, 'direct', { durable: false });
  await pub(ch, ex, 'k', 'after-recreate');
  eq((await ch.checkQueue(q)).messageCount, 0, 'old binding survived exchange deletion');
  await ch.bindQueue(q, ex, 'k');
  await ch.deleteQueue(q);
  await ch.assertQueue(q, { durable: false });
  await pub(ch, ex, 'k', 'after-queue-recreate');
  eq((await ch.checkQueue(q)).messageCount, 0, 'old binding survived queue deletion');
});

sc('extensions.max_length_zero_reject_publish', async (ctx) => {
  const { ch } = await openConfirm(ctx);
  const q = ctx.q();
  await ch.assertQueue(q, { durable: false, arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' } });
  await rejects(pub(ch, '', q, 'x'), 'publish to max-length 0 queue');
  const q2 = ctx.q('drop');
  await ch.assertQueue(q2, { durable: false, arguments: { 'x-max-length': 0 } });
  await pub(ch, '', q2, 'x');
  eq((await ch.checkQueue(q2)).messageCount, 0, 'drop-head queue with max-length 0');
});

module.exports = S;
