'use strict';
// Shared helpers for the Node.js conformance scenarios: per-scenario context
// (connections tracked for teardown, resource names carrying the run id,
// cleanup of queues/exchanges) and small async/assert utilities.

const amqplib = require('amqplib');
const { AMQPClient } = require('@cloudamqp/amqp-client');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function deferred() {
  let resolve, reject;
  const promise = new Promise((res, rej) => { resolve = res; reject = rej; });
  return { promise, resolve, reject };
}

class AssertionError extends Error {}

function assert(cond, msg) {
  if (!cond) throw new AssertionError(msg || 'assertion failed');
}

function show(v) {
  try {
    return JSON.stringify(v, (k, x) => {
      if (typeof x === 'bigint') return x.toString() + 'n';
      if (x && x.type === 'Buffer' && Array.isArray(x.data)) return 'Buffer(' + x.data.length + ')';
      return x;
    });
  } catch (e) {
    return String(v);
  }
}

function eq(actual, expected, what) {
  if (actual !== expected) {
    throw new AssertionError(`${what || 'value'}: expected ${show(expected)}, got ${show(actual)}`);
  }
}

function deepEq(actual, expected, what) {
  const a = show(actual), e = show(expected);
  if (a !== e) throw new AssertionError(`${what || 'value'}: expected ${e}, got ${a}`);
}

// Race a promise against a timer; rejects with "timeout: <what>".
function within(promise, ms, what) {
  let t;
  const timer = new Promise((_, rej) => {
    t = setTimeout(() => rej(new AssertionError(`timeout after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([Promise.resolve(promise), timer]).finally(() => clearTimeout(t));
}

// Resolve when `fn()` returns truthy (polling), or fail after ms.
async function until(fn, ms, what, step = 20) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new AssertionError(`timeout after ${ms} ms waiting for ${what}`);
    await sleep(step);
  }
}

// Expect the promise to reject; returns the error.
async function rejects(promise, what) {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  throw new AssertionError(`${what}: expected an error, but it succeeded`);
}

function withQuery(uri, params) {
  const u = new URL(uri);
  for (const [k, v] of Object.entries(params)) u.searchParams.set(k, String(v));
  return u.toString();
}

class Context {
  constructor(scenario, env) {
    this.scenario = scenario;
    this.id = scenario.id;
    this.uri = env.uri;
    this.mgmt = env.mgmt;
    this.runId = env.runId;
    this.conns = [];
    this.queues = new Set();
    this.exchanges = new Set();
    this.closed = false;
  }

  // conf.<run_id>.<scenario-id>.<client>[.<suffix>]
  name(suffix) {
    const base = `conf.${this.runId}.${this.id}.${this.scenario.client}`;
    return suffix === undefined || suffix === '' ? base : `${base}.${suffix}`;
  }

  // Queue name registered for cleanup.
  q(suffix) {
    const n = this.name(suffix === undefined ? 'q' : suffix);
    this.queues.add(n);
    return n;
  }

  // Exchange name registered for cleanup.
  x(suffix) {
    const n = this.name(suffix === undefined ? 'x' : suffix);
    this.exchanges.add(n);
    return n;
  }

  trackQueue(n) { this.queues.add(n); return n; }
  trackExchange(n) { this.exchanges.add(n); return n; }

  // ---- amqplib ---------------------------------------------------------
  // Connection whose channels always have an 'error' listener (errors are
  // recorded on ch.errors / conn.errors instead of crashing the process).
  async amqp(opts = {}) {
    if (this.closed) throw new Error('scenario already finished');
    const uri = opts.query ? withQuery(opts.uri || this.uri, opts.query) : (opts.uri || this.uri);
    const conn = await amqplib.connect(uri, opts.socket || {});
    const rec = { kind: 'amqplib', conn };
    this.conns.push(rec);
    if (this.closed) { this._kill(rec); throw new Error('scenario already finished'); }
    conn.errors = [];
    conn.closedBy = null;
    conn.closedP = new Promise((res) => conn.once('close', (e) => { conn.closedBy = e || true; res(e); }));
    conn.on('error', (e) => conn.errors.push(e));
    const wrap = (method) => {
      const orig = conn[method].bind(conn);
      conn[method] = async (...a) => {
        const ch = await orig(...a);
        ch.errors = [];
        ch.on('error', (e) => ch.errors.push(e));
        ch.closedP = new Promise((res) => ch.once('close', () => res(ch.errors[0] || null)));
        return ch;
      };
    };
    wrap('createChannel');
    wrap('createConfirmChannel');
    return conn;
  }

  // ---- @cloudamqp/amqp-client -------------------------------------------
  async cloud(opts = {}) {
    if (this.closed) throw new Error('scenario already finished');
    const uri = opts.query ? withQuery(opts.uri || this.uri, opts.query) : (opts.uri || this.uri);
    const client = new AMQPClient(uri);
    const rec = { kind: 'cloudamqp', conn: client };
    this.conns.push(rec);
    client.errors = [];
    client.onerror = (e) => client.errors.push(e);
    await client.connect();
    if (this.closed) { this._kill(rec); throw new Error('scenario already finished'); }
    return client;
  }

  _kill(rec) {
    try {
      if (rec.kind === 'amqplib') {
        const s = rec.conn.connection && rec.conn.connection.stream;
        if (s) s.destroy();
      } else {
        if (rec.conn.socket) rec.conn.socket.destroy();
      }
    } catch (e) { /* ignore */ }
  }

  // Close every connection the scenario opened: graceful first, then
  // destroy the socket so nothing can keep the runner waiting.
  async closeAll() {
    this.closed = true;
    await Promise.all(this.conns.map(async (rec) => {
      try {
        if (rec.kind === 'amqplib') {
          if (!rec.conn.closedBy) await within(rec.conn.close(), 1500, 'close').catch(() => {});
        } else if (!rec.conn.closed) {
          await within(rec.conn.close(), 1500, 'close').catch(() => {});
        }
      } catch (e) { /* ignore */ }
      this._kill(rec);
    }));
  }
}

// One long-lived admin connection used to delete scenario resources.
class Cleaner {
  constructor(uri) { this.uri = uri; this.conn = null; this.all = []; }

  async _conn() {
    if (this.conn && !this.conn.dead) return this.conn;
    const c = await within(amqplib.connect(this.uri), 5000, 'cleanup connection');
    c.on('error', () => {});
    c.on('close', () => { c.dead = true; });
    this.conn = c;
    return c;
  }

  // Run fn on a reusable channel; a failed op costs only that channel.
  async _do(fn) {
    try {
      const c = await this._conn();
      if (!this.ch || this.ch.dead) {
        const ch = await within(c.createChannel(), 3000, 'cleanup channel');
        ch.on('error', () => {});
        ch.on('close', () => { ch.dead = true; });
        this.ch = ch;
      }
      await within(fn(this.ch), 3000, 'cleanup op');
    } catch (e) {
      if (this.ch) this.ch.dead = true;
    }
  }

  async clean(ctx) {
    for (const q of ctx.queues) this.all.push(['queue', q]);
    for (const x of ctx.exchanges) this.all.push(['exchange', x]);
    if (!ctx.queues.size && !ctx.exchanges.size) return;
    try { await this._conn(); } catch (e) { return; } // broker unreachable: nothing to clean
    for (const q of ctx.queues) await this._do((ch) => ch.deleteQueue(q));
    for (const x of ctx.exchanges) await this._do((ch) => ch.deleteExchange(x));
  }

  // Debug aid (CONF_NODE_VERIFY_CLEAN=1): every tracked name must be gone.
  async leaks() {
    const left = [];
    for (const [kind, n] of this.all) {
      if (/^amq\./.test(n)) continue;
      let exists = false;
      await this._do(async (ch) => {
        if (kind === 'queue') await ch.checkQueue(n); else await ch.checkExchange(n);
        exists = true;
      });
      if (exists) left.push(`${kind} ${n}`);
    }
    return left;
  }

  async close() {
    if (this.conn && !this.conn.dead) {
      await within(this.conn.close(), 2000, 'close').catch(() => {});
      try { this.conn.connection.stream.destroy(); } catch (e) { /* ignore */ }
    }
  }
}

module.exports = {
  sleep, deferred, assert, eq, deepEq, within, until, rejects, show, withQuery,
  AssertionError, Context, Cleaner,
};
