// Warren's stream protocol driven by RabbitMQ's JavaScript stream client
// (rabbitmq-stream-js-client, pinned by package-lock.json): each scenario
// prints one JSON line {"name", "ok", "detail"}; test_stream_js.py asserts
// them. Usage: node stream_client.js PORT STREAM_PREFIX
const rabbit = require("rabbitmq-stream-js-client")

const port = Number(process.argv[2])
const prefix = process.argv[3]
const params = { hostname: "127.0.0.1", port, username: "guest", password: "guest", vhost: "/" }

function report(name, ok, detail) {
  console.log(JSON.stringify({ name, ok, detail: detail === undefined ? null : String(detail) }))
}

function waitFor(predicate, ms = 5000) {
  return new Promise((resolve, reject) => {
    const started = Date.now()
    const tick = () => {
      if (predicate()) return resolve()
      if (Date.now() - started > ms) return reject(new Error("timed out"))
      setTimeout(tick, 20)
    }
    tick()
  })
}

async function publishAndConsume(client) {
  const stream = `${prefix}-pc`
  await client.createStream({ stream, arguments: { "max-age": "1h" } })
  const publisher = await client.declarePublisher({ stream, publisherRef: "js-ref" })
  const confirmed = []
  publisher.on("publish_confirm", (err, ids) => { if (!err) confirmed.push(...ids) })
  for (let i = 0; i < 100; i++) await publisher.send(Buffer.from(`message ${i}`))
  await publisher.flush()
  await waitFor(() => confirmed.length === 100)
  const received = []
  const consumer = await client.declareConsumer({ stream, offset: rabbit.Offset.first() },
    (m) => received.push(m.content.toString()))
  await waitFor(() => received.length === 100)
  const inOrder = received.every((m, i) => m === `message ${i}`)
  const last = await publisher.getLastPublishingId()
  await consumer.close()
  await publisher.close()
  report("publish_and_consume", inOrder && last === 100n, `received ${received.length}, last id ${last}`)
  await client.deleteStream({ stream })
}

async function deduplication(client) {
  const stream = `${prefix}-dedup`
  await client.createStream({ stream })
  const publisher = await client.declarePublisher({ stream, publisherRef: "dedup" })
  for (const id of [1n, 2n, 3n, 2n, 3n, 4n]) await publisher.send(Buffer.from(`m${id}`), { publishingId: id })
  await publisher.flush()
  await waitFor(async () => true)
  const received = []
  const consumer = await client.declareConsumer({ stream, offset: rabbit.Offset.first() },
    (m) => received.push(m.content.toString()))
  await waitFor(() => received.length >= 4)
  await new Promise((r) => setTimeout(r, 300))
  await consumer.close()
  await publisher.close()
  report("deduplication", received.join(",") === "m1,m2,m3,m4", received.join(","))
  await client.deleteStream({ stream })
}

async function offsets(client) {
  const stream = `${prefix}-offsets`
  await client.createStream({ stream })
  const publisher = await client.declarePublisher({ stream })
  for (let i = 0; i < 10; i++) await publisher.send(Buffer.from(`o${i}`))
  await publisher.flush()
  const received = []
  const consumer = await client.declareConsumer({ stream, offset: rabbit.Offset.offset(5n), consumerRef: "js-cons" },
    (m) => received.push(m.content.toString()))
  await waitFor(() => received.includes("o9"))
  await consumer.storeOffset(7n)
  await waitFor(async () => true)
  await new Promise((r) => setTimeout(r, 200))
  const stored = await client.queryOffset({ reference: "js-cons", stream })
  const stats = await client.streamStatsRequest(stream)
  await consumer.close()
  await publisher.close()
  report("offsets", received[0] === "o5" && stored === 7n && stats.firstChunkId === 0n,
    `first ${received[0]}, stored ${stored}, stats ${JSON.stringify(stats, (k, v) => typeof v === "bigint" ? String(v) : v)}`)
  await client.deleteStream({ stream })
}

async function filtering(client) {
  const stream = `${prefix}-filter`
  await client.createStream({ stream })
  const publisher = await client.declarePublisher({ stream }, (m) => m.applicationProperties?.colour)
  for (const colour of ["red", "blue", "red"]) {
    await publisher.send(Buffer.from(colour), { applicationProperties: { colour } })
  }
  await publisher.flush()
  const received = []
  const consumer = await client.declareConsumer({
    stream, offset: rabbit.Offset.first(),
    filter: { values: ["red"], postFilterFunc: (m) => m.applicationProperties?.colour === "red", matchUnfiltered: false },
  }, (m) => received.push(m.content.toString()))
  await waitFor(() => received.length >= 2)
  await consumer.close()
  await publisher.close()
  report("filtering", received.join(",") === "red,red", received.join(","))
  await client.deleteStream({ stream })
}

async function singleActive(client) {
  const stream = `${prefix}-sac`
  await client.createStream({ stream })
  const publisher = await client.declarePublisher({ stream })
  const got = { first: [], second: [] }
  const options = () => ({
    stream, offset: rabbit.Offset.first(), singleActive: true, consumerRef: "sac-group",
    consumerUpdateListener: async () => rabbit.Offset.first(),
  })
  const first = await client.declareConsumer(options(), (m) => got.first.push(m.content.toString()))
  const second = await client.declareConsumer(options(), (m) => got.second.push(m.content.toString()))
  await publisher.send(Buffer.from("one"))
  await publisher.flush()
  await waitFor(() => got.first.length === 1)
  await new Promise((r) => setTimeout(r, 300))
  const before = got.second.length
  await client.closeConsumer(first.extendedId) // unsubscribes (close() alone does not)
  await waitFor(() => got.second.length === 1) // the second takes over, from the first offset
  await client.closeConsumer(second.extendedId)
  await publisher.close()
  report("single_active_consumer", before === 0 && got.second[0] === "one",
    `first ${got.first}, second ${got.second}`)
  await client.deleteStream({ stream })
}

// A super stream of three partitions: a hash-routing publisher spreads 60
// keyed messages over them (Route / Partitions); two super stream consumers
// of one group (single active consumer per partition, super-stream
// property) share the partitions -- every message once, each consumer some
// -- and when one leaves the other takes over its partitions.
async function superStreams(client) {
  const superStream = `${prefix}-inv`
  await client.createSuperStream({ streamName: superStream }, undefined, 3)
  const publisher = await client.declareSuperStreamPublisher(
    { superStream, publisherRef: "ss-ref", routingStrategy: "hash" }, (content) => content.toString())
  const got = { a: [], b: [] }
  const a = await client.declareSuperStreamConsumer(
    { superStream, consumerRef: "ss-group", offset: rabbit.Offset.first() },
    (m) => got.a.push(m.content.toString()))
  const b = await client.declareSuperStreamConsumer(
    { superStream, consumerRef: "ss-group", offset: rabbit.Offset.first() },
    (m) => got.b.push(m.content.toString()))
  for (let i = 0; i < 60; i++) await publisher.send(Buffer.from(`key-${i}`))
  await waitFor(() => got.a.length + got.b.length >= 60, 10000)
  await new Promise((r) => setTimeout(r, 300))
  const all = [...got.a, ...got.b]
  const once = all.length === 60 && new Set(all).size === 60
  const shared = got.a.length > 0 && got.b.length > 0
  const before = got.b.length
  // close() alone does not unsubscribe: each partition's consumer is closed
  for (const consumer of b.consumers.values()) await client.closeConsumer(consumer.extendedId)
  for (let i = 60; i < 90; i++) await publisher.send(Buffer.from(`key-${i}`))
  await waitFor(() => got.a.filter((m) => Number(m.slice(4)) >= 60).length === 30, 10000)
  for (const consumer of a.consumers.values()) await client.closeConsumer(consumer.extendedId)
  await publisher.close()
  report("super_streams", once && shared && got.b.length === before,
    `a ${got.a.length}, b ${got.b.length} (of 60, then 30 more to a alone)`)
  await client.deleteSuperStream({ streamName: superStream })
}

async function superStream(client) {
  const superStream = `${prefix}-super`
  await client.createSuperStream({ streamName: superStream }, ["a", "b", "c"])
  const partitions = await client.queryPartitions({ superStream })
  const publisher = await client.declareSuperStreamPublisher({ superStream }, (content, opts) => opts.messageProperties?.messageId)
  for (const key of ["a", "b", "c", "a"]) {
    await publisher.send(Buffer.from(`to ${key}`), { messageProperties: { messageId: key } })
  }
  const got = []
  const consumer = await client.declareSuperStreamConsumer({ superStream, offset: rabbit.Offset.first(), consumerRef: "ss-group" },
    (m) => got.push(m.content.toString()))
  await waitFor(() => got.length === 4)
  await consumer.close(true)
  await publisher.close() // before the deletion: the client's close() waits on it otherwise
  await client.deleteSuperStream({ streamName: superStream })
  report("super_stream", partitions.join(",") === `${superStream}-a,${superStream}-b,${superStream}-c` &&
    got.sort().join(",") === "to a,to a,to b,to c", `${partitions}; ${got}`)
}

async function main() {
  const client = await rabbit.connect(params)
  for (const scenario of [publishAndConsume, deduplication, offsets, filtering, singleActive,
    superStream, superStreams]) {
    try {
      await scenario(client)
    } catch (e) {
      report(scenario.name, false, e && e.stack ? e.stack : e)
    }
  }
  await client.close()
}

main().then(() => process.exit(0), (e) => { report("main", false, e && e.stack ? e.stack : e); process.exit(1) })
