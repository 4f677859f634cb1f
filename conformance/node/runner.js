'use strict';
// Conformance runner for the Node.js clients. Prints one line per scenario:
//   RESULT <group> <scenario-id> <client> <pass|fail> <millis> <detail...>
// Env: CONF_URI, CONF_MGMT, CONF_RUN_ID, CONF_QUICK, CONF_ONLY, CONF_TIMEOUT.

const { Context, Cleaner, within, AssertionError } = require('./lib/harness');

const GROUPS = new Set(['connection', 'channel', 'exchange', 'routing', 'queue', 'basic',
  'properties', 'content', 'consumer', 'qos', 'ack', 'confirm', 'tx', 'errors', 'malformed',
  'heartbeat', 'extensions', 'framework']);

const env = {
  uri: process.env.CONF_URI || 'amqp://guest:guest@127.0.0.1:5672',
  mgmt: process.env.CONF_MGMT || '',
  runId: (process.env.CONF_RUN_ID || ('n' + Date.now().toString(36))).replace(/[^A-Za-z0-9_.-]/g, '_'),
  quick: process.env.CONF_QUICK === '1',
  only: process.env.CONF_ONLY ? new RegExp(process.env.CONF_ONLY) : null,
  timeoutMs: Math.max(1, Number(process.env.CONF_TIMEOUT || 20)) * 1000,
};

const scenarios = [
  ...require('./scenarios/amqplib'),
  ...require('./scenarios/cloudamqp'),
];

// Errors thrown outside a scenario's promise chain (e.g. an EventEmitter
// 'error' with no listener) fail the running scenario instead of the runner.
let current = null;
process.on('uncaughtException', (e) => {
  if (current) current.abort(e);
  else process.stderr.write(`uncaught (between scenarios): ${e && e.stack}\n`);
});
process.on('unhandledRejection', (e) => {
  process.stderr.write(`unhandled rejection (ignored): ${e && e.message}\n`);
});

function oneLine(s) {
  return String(s === undefined || s === null || s === '' ? 'ok' : s).replace(/\s+/g, ' ').trim().slice(0, 400);
}

function selfCheck() {
  const seen = new Set();
  for (const s of scenarios) {
    const group = s.id.split('.')[0];
    if (!/^[a-z0-9_.-]+$/.test(s.id) || !GROUPS.has(group) || !s.id.includes('.')) {
      throw new Error(`bad scenario id ${s.id}`);
    }
    const key = `${s.id}/${s.client}`;
    if (seen.has(key)) throw new Error(`duplicate scenario ${key}`);
    seen.add(key);
  }
}

async function runOne(s, cleaner) {
  const ctx = new Context(s, env);
  const group = s.id.split('.')[0];
  let status = 'pass', detail = 'ok';
  let abort;
  const aborted = new Promise((_, rej) => { abort = rej; });
  current = { abort };
  const t0 = process.hrtime.bigint();
  let timer;
  const timeout = new Promise((_, rej) => {
    timer = setTimeout(() => rej(new AssertionError(`timeout: scenario exceeded ${env.timeoutMs / 1000} s`)), env.timeoutMs);
  });
  try {
    const r = await Promise.race([Promise.resolve().then(() => s.fn(ctx)), timeout, aborted]);
    if (r) detail = r;
  } catch (e) {
    status = 'fail';
    detail = (e && (e.message || String(e))) || 'error';
    if (e && e.code !== undefined && !String(detail).includes(String(e.code))) detail += ` (code ${e.code})`;
  } finally {
    clearTimeout(timer);
  }
  const ms = Number((process.hrtime.bigint() - t0) / 1000000n);
  current = { abort: () => {} }; // late errors from this scenario are ignored
  await ctx.closeAll();
  await within(cleaner.clean(ctx), 15000, 'cleanup').catch(() => {});
  current = null;
  process.stdout.write(`RESULT ${group} ${s.id} ${s.client} ${status} ${ms} ${oneLine(detail)}\n`);
  return status;
}

async function main() {
  selfCheck();
  const selected = scenarios.filter((s) => (!env.quick || s.quick) && (!env.only || env.only.test(s.id)));
  const cleaner = new Cleaner(env.uri);
  let pass = 0, fail = 0;
  const t0 = Date.now();
  for (const s of selected) {
    if ((await runOne(s, cleaner)) === 'pass') pass++; else fail++;
  }
  if (process.env.CONF_NODE_VERIFY_CLEAN === '1') {
    const left = await cleaner.leaks();
    process.stderr.write(`node conformance: ${left.length} leftover resources${left.length ? ': ' + left.join(', ') : ''}\n`);
  }
  await cleaner.close();
  process.stderr.write(`node conformance: ${pass} passed, ${fail} failed in ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);
}

main().then(() => process.exit(0), (e) => {
  process.stderr.write(`runner error: ${e && e.stack}\n`);
  process.exit(0);
});
