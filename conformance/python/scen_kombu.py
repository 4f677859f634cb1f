"""kombu (with its py-amqp transport): the messaging framework Celery is
built on -- producers and consumers, every exchange type, SimpleQueue,
serialization, compression, queue arguments, confirms and errors."""
import socket
import time

from amqp import exceptions as aex
from kombu import Consumer, Exchange, Producer, Queue
from kombu.common import maybe_declare

from confkit import NO_ROUTE, NOT_FOUND, PRECONDITION_FAILED, check, eq, scenario
from scen_pika_exchange import HEADER_BINDINGS, HEADER_EXPECTED, HEADER_MESSAGES, KEYS, TOPIC_TABLE

C = "kombu"


def conn(t, **kw):
    c = t.kombu(**kw)
    c.connect()
    return c


def xq(t, kind="direct", keys=("k",), **qkw):
    """A tracked exchange of `kind` and one queue bound to it per key."""
    x = Exchange(t.track_exchange(t.name("x")), type=kind, durable=False)
    qs = [Queue(t.track_queue(t.name("q")), exchange=x, routing_key=k, durable=False, **qkw) for k in keys]
    return x, qs


def plain_queue(t, **kw):
    return Queue(t.track_queue(t.name("q")), durable=False, **kw)


def drain(c, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            c.drain_events(timeout=max(0.01, deadline - time.monotonic()))
        except socket.timeout:
            pass


def collect(c, queues, n, timeout=5.0, no_ack=True, accept=("json", "text/plain")):
    """Consumes until n messages arrived; returns [(body, message)]."""
    got = []
    with Consumer(c, queues=queues, callbacks=[lambda body, m: got.append((body, m))], no_ack=no_ack,
                  accept=list(accept)):
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            try:
                c.drain_events(timeout=0.1)
            except socket.timeout:
                pass
    return got


def get_all(c, q, accept=("json", "text/plain")):
    out = []
    bq = q(c.default_channel)
    while True:
        m = bq.get(no_ack=True, accept=list(accept))
        if m is None:
            return out
        out.append(m)


def sync(c):
    c.default_channel.exchange_declare("amq.direct", "direct", passive=True)


# ---------------------------------------------------------------- basic round trips

@scenario("basic.publish_get", C, quick=True)
def _(t):
    c = conn(t)
    q = plain_queue(t)
    p = Producer(c.default_channel)
    for i in range(3):
        p.publish({"n": i}, routing_key=q.name, declare=[q], serializer="json")
    got = get_all(c, q)
    eq([m.payload for m in got], [{"n": 0}, {"n": 1}, {"n": 2}], "payloads")
    eq(got[0].delivery_info["routing_key"], q.name, "routing key")


@scenario("basic.consume_deliver", C, quick=True)
def _(t):
    c = conn(t)
    x, (q,) = xq(t, "direct")
    Producer(c.default_channel).publish({"hello": "world"}, exchange=x, routing_key="k", declare=[q])
    got = collect(c, [q], 1)
    eq([b for b, _ in got], [{"hello": "world"}], "consumed bodies")
    m = got[0][1]
    eq((m.delivery_info["exchange"], m.delivery_info["routing_key"], m.content_type),
       (x.name, "k", "application/json"), "delivery info")


@scenario("basic.mandatory_unroutable_returned", C)
def _(t):
    c = conn(t)
    returned = []
    x = Exchange(t.track_exchange(t.name("x")), type="direct", durable=False)
    p = Producer(c.default_channel, on_return=lambda exc, exchange, key, m: returned.append((exc.reply_code, key)))
    p.publish({"m": 1}, exchange=x, routing_key="nowhere", mandatory=True, declare=[x])
    deadline = time.monotonic() + 5
    while not returned and time.monotonic() < deadline:
        try:
            c.drain_events(timeout=0.1)
        except socket.timeout:
            pass
    eq(returned, [(NO_ROUTE, "nowhere")], "returns")


# ---------------------------------------------------------------- routing

@scenario("routing.direct_exact_key", C)
def _(t):
    c = conn(t)
    x, (q,) = xq(t, "direct", ("a.b",))
    p = Producer(c.default_channel, exchange=x)
    maybe_declare(q, c.default_channel)
    for k in ("a.b", "a", "A.B", "a.*", "#"):
        p.publish(k, routing_key=k)
    sync(c)
    eq([m.payload for m in get_all(c, q)], ["a.b"], "routed")


@scenario("routing.fanout_ignores_key", C)
def _(t):
    c = conn(t)
    x, qs = xq(t, "fanout", ("one", "two", ""))
    for q in qs:
        maybe_declare(q, c.default_channel)
    Producer(c.default_channel, exchange=x).publish("f", routing_key="whatever")
    sync(c)
    for q in qs:
        eq([m.payload for m in get_all(c, q)], ["f"], "queue %s" % q.routing_key)


@scenario("routing.topic_pattern_table", C)
def _(t):
    c = conn(t)
    patterns = list(TOPIC_TABLE)
    x, qs = xq(t, "topic", patterns)
    for q in qs:
        maybe_declare(q, c.default_channel)
    p = Producer(c.default_channel, exchange=x)
    for k in KEYS:
        p.publish(k, routing_key=k)
    sync(c)
    for pattern, q in zip(patterns, qs):
        eq([m.payload for m in get_all(c, q)], TOPIC_TABLE[pattern], "keys matched by pattern %r" % pattern)


@scenario("routing.headers_match_table", C)
def _(t):
    c = conn(t)
    x = Exchange(t.track_exchange(t.name("x")), type="headers", durable=False)
    queues = {}
    for name, args in HEADER_BINDINGS.items():
        q = Queue(t.track_queue(t.name("q")), exchange=x, binding_arguments=args, durable=False)
        maybe_declare(q, c.default_channel)
        queues[name] = q
    p = Producer(c.default_channel, exchange=x)
    for name, headers in HEADER_MESSAGES.items():
        p.publish(name, routing_key="ignored", headers=headers or {})
    sync(c)
    # kombu always sends a headers table, so "m_none" arrives as "m_empty" does.
    for name, expected in HEADER_EXPECTED.items():
        eq([m.payload for m in get_all(c, queues[name])], expected, "binding %s" % name)


# ---------------------------------------------------------------- errors

@scenario("queue.passive_missing_404", C)
def _(t):
    c = conn(t)
    name = t.name("missing")
    try:
        Queue(name, durable=False)(c.channel()).queue_declare(passive=True)
    except c.channel_errors as e:
        eq((e.reply_code, e.reply_text), (NOT_FOUND, "NOT_FOUND - no queue '%s' in vhost '/'" % name), "error")
        return
    raise AssertionError("passive declare of a missing queue succeeded")


@scenario("exchange.redeclare_other_type_406", C)
def _(t):
    c = conn(t)
    name = t.track_exchange(t.name("x"))
    Exchange(name, type="direct", durable=False)(c.default_channel).declare()
    try:
        Exchange(name, type="topic", durable=False)(c.channel()).declare()
    except c.channel_errors as e:
        eq(e.reply_code, PRECONDITION_FAILED, "reply code")
        check("inequivalent arg 'type'" in e.reply_text, "reply text %r" % e.reply_text)
        return
    raise AssertionError("redeclare with another type succeeded")


# ---------------------------------------------------------------- acks and redelivery

@scenario("ack.reject_requeue_to_head", C)
def _(t):
    c = conn(t)
    q = plain_queue(t)
    p = Producer(c.default_channel)
    for i in range(3):
        p.publish(i, routing_key=q.name, declare=[q])
    m = q(c.default_channel).get(accept=["json"])
    m.requeue()
    got = get_all(c, q)
    eq([(x.payload, x.delivery_info["redelivered"]) for x in got], [(0, True), (1, False), (2, False)],
       "order after requeue")


@scenario("framework.kombu_redelivery_after_disconnect", C)
def _(t):
    c1 = conn(t)
    q = plain_queue(t)
    Producer(c1.default_channel).publish("once", routing_key=q.name, declare=[q])
    got = collect(c1, [q], 1, no_ack=False)
    eq([b for b, _ in got], ["once"], "first delivery")
    c1.release()  # never acked
    c2 = conn(t)
    got = collect(c2, [q], 1, no_ack=False)
    eq([(b, m.delivery_info["redelivered"]) for b, m in got], [("once", True)], "redelivery")
    got[0][1].ack()
    sync(c2)


@scenario("framework.kombu_consumer_prefetch", C)
def _(t):
    c = conn(t)
    q = plain_queue(t)
    p = Producer(c.default_channel)
    for i in range(5):
        p.publish(i, routing_key=q.name, declare=[q])
    got = []
    cons = Consumer(c, queues=[q], callbacks=[lambda b, m: got.append(m)], accept=["json"])
    cons.qos(prefetch_count=2)
    cons.consume()
    drain(c, 0.5)
    eq(len(got), 2, "deliveries with prefetch 2")
    got[0].ack()
    drain(c, 0.3)
    eq(len(got), 3, "deliveries after one ack")
    for m in got[1:]:
        m.ack()
    cons.cancel()


# ---------------------------------------------------------------- kombu features

@scenario("framework.kombu_simple_queue", C, quick=True)
def _(t):
    c = conn(t)
    name = t.name("simple")
    t.track_queue(name)
    t.track_exchange(name)
    sq = c.SimpleQueue(name, queue_opts={"durable": False}, exchange_opts={"durable": False})
    for i in range(3):
        sq.put({"i": i})
    deadline = time.monotonic() + 5  # publishes and the passive declare use different channels
    while sq.qsize() != 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    eq(sq.qsize(), 3, "qsize")
    got = []
    for _ in range(3):
        m = sq.get(block=True, timeout=5)
        got.append(m.payload)
        m.ack()
    eq(got, [{"i": 0}, {"i": 1}, {"i": 2}], "payloads")
    try:
        sq.get(block=True, timeout=0.3)
        raise AssertionError("get from an empty SimpleQueue returned a message")
    except sq.Empty:
        pass
    sq.close()


@scenario("framework.kombu_simple_buffer", C)
def _(t):
    c = conn(t)
    name = t.name("buffer")
    t.track_queue(name)
    t.track_exchange(name)
    sb = c.SimpleBuffer(name, queue_opts={"durable": False}, exchange_opts={"durable": False})
    sb.put("a")
    sb.put("b")
    eq([sb.get(timeout=5).payload, sb.get(timeout=5).payload], ["a", "b"], "payloads (no-ack)")
    sb.close()


@scenario("framework.kombu_serializers_and_raw_bytes", C)
def _(t):
    c = conn(t)
    q = plain_queue(t)
    p = Producer(c.default_channel)
    p.publish({"k": [1, 2.5, None, "\u00e9"]}, routing_key=q.name, declare=[q], serializer="json")
    p.publish(b"\x00\x01\xff", routing_key=q.name, content_type="application/data", content_encoding="binary")
    p.publish("text body", routing_key=q.name, serializer="json")
    got = get_all(c, q, accept=("json", "application/data"))
    eq([m.payload for m in got], [{"k": [1, 2.5, None, "\u00e9"]}, b"\x00\x01\xff", "text body"], "payloads")
    eq([m.content_type for m in got], ["application/json", "application/data", "application/json"], "content types")


@scenario("framework.kombu_compression", C)
def _(t):
    c = conn(t)
    q = plain_queue(t)
    body = {"data": "x" * 100000}
    Producer(c.default_channel).publish(body, routing_key=q.name, declare=[q], compression="zlib")
    (m,) = get_all(c, q)
    eq(m.headers.get("compression"), "application/x-gzip", "compression header")
    eq(m.payload, body, "decompressed payload")


@scenario("framework.kombu_message_properties", C)
def _(t):
    c = conn(t)
    q = plain_queue(t, max_priority=10)
    Producer(c.default_channel).publish(
        {"p": 1}, routing_key=q.name, declare=[q], headers={"h1": "v", "h2": 2}, priority=7,
        correlation_id="corr", reply_to="somewhere", expiration=60, delivery_mode=2, type="kind",
        message_id="mid", app_id="app")
    (m,) = get_all(c, q)
    props = m.properties
    eq((props["priority"], props["correlation_id"], props["reply_to"], props["expiration"], props["delivery_mode"],
        props["type"], props["message_id"], props["app_id"]),
       (7, "corr", "somewhere", "60000", 2, "kind", "mid", "app"), "properties")
    eq(m.headers, {"h1": "v", "h2": 2}, "headers")


@scenario("extensions.priority_queue", C)
def _(t):
    c = conn(t)
    q = plain_queue(t, max_priority=10)
    p = Producer(c.default_channel)
    for prio in (1, 5, 10, 0):
        p.publish(prio, routing_key=q.name, declare=[q], priority=prio)
    sync(c)
    eq([m.payload for m in get_all(c, q)], [10, 5, 1, 0], "delivery order")


@scenario("extensions.queue_message_ttl", C)
def _(t):
    c = conn(t)
    q = plain_queue(t, message_ttl=0.1)
    Producer(c.default_channel).publish("x", routing_key=q.name, declare=[q])
    time.sleep(0.4)
    eq(get_all(c, q), [], "messages after the TTL")


@scenario("extensions.max_length_drop_head", C)
def _(t):
    c = conn(t)
    q = plain_queue(t, max_length=2)
    p = Producer(c.default_channel)
    for i in range(3):
        p.publish(i, routing_key=q.name, declare=[q])
    sync(c)
    eq([m.payload for m in get_all(c, q)], [1, 2], "messages kept")


@scenario("extensions.dead_letter_on_reject", C)
def _(t):
    c = conn(t)
    dlx, (dlq,) = xq(t, "fanout", ("",))
    maybe_declare(dlq, c.default_channel)
    q = plain_queue(t, queue_arguments={"x-dead-letter-exchange": dlx.name})
    Producer(c.default_channel).publish("dead", routing_key=q.name, declare=[q])
    m = q(c.default_channel).get(accept=["json"])
    m.reject()
    deadline = time.monotonic() + 5
    got = []
    while not got and time.monotonic() < deadline:
        got = get_all(c, dlq)
    check(got, "dead letter not routed")
    eq((got[0].payload, got[0].headers["x-death"][0]["reason"]), ("dead", "rejected"), "dead letter")


@scenario("confirm.reject_publish_nacked", C)
def _(t):
    c = conn(t, transport_options={"confirm_publish": True})
    q = plain_queue(t, max_length=1, queue_arguments={"x-overflow": "reject-publish"})
    p = Producer(c.default_channel)
    p.publish("first", routing_key=q.name, declare=[q])
    try:
        p.publish("second", routing_key=q.name)
    except aex.MessageNacked:
        return
    raise AssertionError("no nack when the queue rejects the publish")


@scenario("basic.direct_reply_to", C)
def _(t):
    c = conn(t)
    server = conn(t)
    q = plain_queue(t)
    maybe_declare(q, server.default_channel)
    replies = []
    reply_q = Queue("amq.rabbitmq.reply-to", no_ack=True)
    with Consumer(c, queues=[reply_q], callbacks=[lambda b, m: replies.append(b)], no_ack=True, accept=["json"]):
        Producer(c.default_channel).publish({"req": 1}, routing_key=q.name, reply_to="amq.rabbitmq.reply-to",
                                            correlation_id="c1")
        m = None
        deadline = time.monotonic() + 5
        while m is None and time.monotonic() < deadline:
            m = q(server.default_channel).get(no_ack=True, accept=["json"])
        check(m is not None, "request not received")
        Producer(server.default_channel).publish({"resp": m.payload["req"] + 1}, routing_key=m.properties["reply_to"],
                                                 correlation_id=m.properties["correlation_id"])
        deadline = time.monotonic() + 5
        while not replies and time.monotonic() < deadline:
            try:
                c.drain_events(timeout=0.1)
            except socket.timeout:
                pass
    eq(replies, [{"resp": 2}], "replies")


@scenario("framework.kombu_producer_pool", C)
def _(t):
    from kombu import pools
    c = t.kombu()
    q = plain_queue(t)
    with pools.producers[c].acquire(block=True, timeout=5) as p:
        p.publish("pooled", routing_key=q.name, declare=[q], retry=True, retry_policy={"max_retries": 1})
    with pools.connections[c].acquire(block=True, timeout=5) as c2:
        eq([m.payload for m in get_all(c2, q)], ["pooled"], "messages")
    pools.reset()


@scenario("framework.kombu_ensure_connection", C)
def _(t):
    c = t.kombu()
    c.ensure_connection(max_retries=1)
    check(c.connected, "connected")
    q = plain_queue(t)
    publish = c.ensure(Producer(c), Producer(c).publish, max_retries=1)
    publish("ensured", routing_key=q.name, declare=[q])
    eq([m.payload for m in get_all(c, q)], ["ensured"], "messages")


@scenario("framework.kombu_bad_credentials", C)
def _(t):
    import kombu
    b = t.broker
    c = kombu.Connection("pyamqp://%s:wrong-%s@%s:%d//" % (b.user, t.run_id, b.host, b.port), connect_timeout=5)
    t.defer(c.release)
    try:
        c.connect()
    except aex.AccessRefused as e:
        eq(e.reply_code, 403, "reply code")
        return
    except Exception as e:  # noqa: BLE001 - kombu may wrap it
        check("ACCESS_REFUSED" in str(e) or "403" in str(e), "expected ACCESS_REFUSED, got %r" % e)
        return
    raise AssertionError("login with a wrong password succeeded")
