// Node.js clients over TLS for test_tls.py: amqplib (amqps:// with the
// test CA, then EXTERNAL with a client certificate) and
// @cloudamqp/amqp-client (amqps://), each publishing and getting a message
// back, and amqp-client.js's own suite's TLS test (test/tls), which plain
// runs skip. Uses conformance/node's pinned packages. Prints one JSON line of
// results; exits 1 on any failure.
// Usage: node tls_node_clients.js PORT PKI_DIR
'use strict';
const fs = require('fs');
const path = require('path');
const mods = path.join(__dirname, '..', '..', '..', 'conformance', 'node', 'node_modules');
const amqplib = require(path.join(mods, 'amqplib'));
const { AMQPClient } = require(path.join(mods, '@cloudamqp', 'amqp-client'));

const [port, pki] = process.argv.slice(2);
const ca = [fs.readFileSync(path.join(pki, 'ca.pem'))];

async function amqplibRoundTrip(opts, url) {
  const conn = await amqplib.connect(url, opts);
  const ch = await conn.createChannel();
  const q = (await ch.assertQueue('', { exclusive: true })).queue;
  ch.sendToQueue(q, Buffer.from('over tls'));
  let msg = false;
  for (let i = 0; i < 50 && !msg; i++) {
    msg = await ch.get(q, { noAck: true });
    if (!msg) await new Promise((r) => setTimeout(r, 20));
  }
  await conn.close();
  return msg && msg.content.toString() === 'over tls';
}

async function cloudamqpRoundTrip() {
  const client = new AMQPClient(`amqps://guest:guest@localhost:${port}`, { ca });
  const conn = await client.connect();
  const ch = await conn.channel();
  const q = (await ch.queueDeclare('', { exclusive: true })).name;
  await ch.basicPublish('', q, 'over tls too');
  let msg = null;
  for (let i = 0; i < 50 && !msg; i++) {
    msg = await ch.basicGet(q, { noAck: true });
    if (!msg) await new Promise((r) => setTimeout(r, 20));
  }
  await conn.close();
  return msg !== null && msg.bodyToString() === 'over tls too';
}

(async () => {
  const out = {};
  const step = async (name, fn) => {
    try { out[name] = await fn(); } catch (e) { out[name] = String(e && e.message || e); }
  };
  await step('amqplib', () => amqplibRoundTrip({ ca, servername: 'localhost' },
    `amqps://guest:guest@localhost:${port}`));
  await step('amqplib_external', () => amqplibRoundTrip({
    ca, servername: 'localhost',
    cert: fs.readFileSync(path.join(pki, 'client.pem')),
    key: fs.readFileSync(path.join(pki, 'client.key')),
    credentials: amqplib.credentials.external(),
  }, `amqps://localhost:${port}`));
  await step('cloudamqp', cloudamqpRoundTrip);
  // amqp-client.js's own TLS test ("can connect with TLS"), which its
  // suite runs against AMQPS_URL (default amqps://127.0.0.1?insecure=true)
  await step('cloudamqp_suite_tls', async () => {
    const amqp = new AMQPClient(`amqps://guest:guest@127.0.0.1:${port}?insecure=true`);
    const conn = await amqp.connect();
    const ch = await conn.channel();
    const n = ch.connection.channels.length; // 2: channel 0 is counted
    await conn.close();
    return n === 2;
  });
  console.log(JSON.stringify(out));
  process.exit(Object.values(out).every((v) => v === true) ? 0 : 1);
})();
