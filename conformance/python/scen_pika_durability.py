"""pika: what survives a broker restart (t.restart(), the CONF_RESTART hook):
durable topology, persistent messages with their properties, redelivered
flags, confirmed messages and queue arguments. Each scenario restarts the
broker once, runs alone and is not in the quick subset.

Recorded from RabbitMQ 3.10.8 (stop_app/start_app and a full node restart
behave the same here): a message never delivered comes back with
redelivered=false after a clean restart; one delivered and unacked, or
delivered and requeued before the restart, comes back with redelivered=true.
"""
import datetime
import decimal

import pika
from pika import exceptions as pex

from confkit import (NOT_FOUND, PRECONDITION_FAILED, Collector, bodies, channel_error, check, count, eq, exchange,
                     get_all, queue, scenario, wait_count, wait_for)


def setup(t):
    c = t.pika()
    return c, c.channel()


def gone_404(c, kind, name):
    """A passive declare of name (kind "queue" or "exchange") gets 404 with
    RabbitMQ's text; returns a fresh channel."""
    ch = c.channel()
    declare = ch.queue_declare if kind == "queue" else ch.exchange_declare
    e = channel_error(NOT_FOUND, declare, name, passive=True, conn=c)
    eq(e.reply_text, "NOT_FOUND - no %s '%s' in vhost '/'" % (kind, name), "404 text for the %s" % kind)
    return c.channel()


def persistent(**kw):
    return pika.BasicProperties(delivery_mode=2, **kw)


# ---------------------------------------------------------------- topology

@scenario("durability.topology_survives_restart", "pika", restart=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct", durable=True)
    q = queue(t, ch, durable=True)
    ch.queue_bind(q, x, "k")
    xn = exchange(t, ch, "fanout", durable=False)
    qn = queue(t, ch, durable=False)
    ch.queue_bind(qn, x, "k")      # durable exchange -> transient queue: goes with the queue
    ch.queue_bind(q, xn)           # transient exchange -> durable queue: goes with the exchange
    t.restart()

    c, ch = setup(t)
    ch.exchange_declare(x, passive=True)
    ok = ch.queue_declare(q, passive=True).method
    eq((ok.message_count, ok.consumer_count), (0, 0), "counts of the durable queue after the restart")
    ch = gone_404(c, "queue", qn)
    ch = gone_404(c, "exchange", xn)
    ch.confirm_delivery()
    ch.basic_publish(x, "k", b"routed", mandatory=True)   # UnroutableError if the binding is lost
    try:
        ch.basic_publish(x, "other", b"unroutable", mandatory=True)
    except pex.UnroutableError:
        pass
    else:
        raise AssertionError("a key without a binding was routed after the restart")
    eq(bodies(ch, q), ["routed"], "messages routed through the durable binding")
    # Type and flags came back too.
    ch.exchange_declare(x, exchange_type="direct", durable=True)
    ch.queue_declare(q, durable=True)
    e = channel_error(PRECONDITION_FAILED, ch.exchange_declare, x, exchange_type="fanout", durable=True, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' in vhost '/': "
                     "received 'fanout' but current is 'direct'" % x, "reply text")
    ch = c.channel()
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, durable=False, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '%s' in vhost '/': "
                     "received 'false' but current is 'true'" % q, "reply text")


# ---------------------------------------------------------------- messages

HEADERS = {"str": "s", "utf8": "h\u00e9llo \u2603", "int": 42, "neg": -7, "big": 2 ** 40, "bool": True,
           "none": None, "bytes": b"\x00\xff", "dec": decimal.Decimal("3.14"), "list": [1, "a", [2], {"x": 1}],
           "table": {"nested": {"deep": "yes"}}, "ts": datetime.datetime(2024, 1, 2, 3, 4, 5)}
PROP_NAMES = ("content_type", "content_encoding", "headers", "delivery_mode", "priority", "correlation_id",
              "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id", "cluster_id")


@scenario("durability.persistent_messages_survive_restart", "pika", restart=True)
def _(t):
    c, ch = setup(t)
    qd = queue(t, ch, durable=True)
    qn = queue(t, ch, durable=False)
    kept = []
    for i, body in enumerate([b"", bytes(range(256)) * 4, b"p" * 300000, b"last"]):
        props = persistent(content_type="application/x-%d" % i, content_encoding="gzip", headers=dict(HEADERS, i=i),
                           priority=i, correlation_id="corr-%d" % i, reply_to="reply-%d" % i,
                           expiration="3600000", message_id="msg-%d" % i, timestamp=1700000000 + i,
                           type="type-%d" % i, user_id=t.broker.user, app_id="app", cluster_id="cl")
        kept.append((body, props))
        ch.basic_publish("", qd, body, properties=props)
        ch.basic_publish("", qd, b"transient-%d" % i,
                         properties=pika.BasicProperties(delivery_mode=1, message_id="t-%d" % i))
        ch.basic_publish("", qn, b"in-transient-queue-%d" % i, properties=persistent())
    # The queues hold everything (the broker has enqueued it) before the restart.
    eq(wait_count(ch, qd, 8), 8, "messages in the durable queue before the restart")
    eq(wait_count(ch, qn, 4), 4, "messages in the transient queue before the restart")
    t.restart()

    c, ch = setup(t)
    eq(count(ch, qd), len(kept), "messages in the durable queue after the restart (the persistent ones)")
    got = get_all(ch, qd)
    eq([b[:16] for _, _, b in got], [b[:16] for b, _ in kept], "bodies (first 16 bytes) in order")
    for (m, p, b), (body, props) in zip(got, kept):
        eq(len(b), len(body), "body length of %s" % props.message_id)
        check(b == body, "body of %s changed" % props.message_id)
        for name in PROP_NAMES:
            eq(getattr(p, name), getattr(props, name), "property %s of %s" % (name, props.message_id))
    gone_404(c, "queue", qn)


# ---------------------------------------------------------------- redelivered

@scenario("durability.redelivered_after_restart", "pika", restart=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    ch.confirm_delivery()
    for body in (b"acked", b"unacked", b"requeued", b"never"):
        ch.basic_publish("", q, body, properties=persistent())
    consumer = c.channel()
    m, _, b = consumer.basic_get(q)
    eq((b, m.redelivered), (b"acked", False), "first get")
    consumer.basic_ack(m.delivery_tag)
    m, _, b = consumer.basic_get(q)
    eq((b, m.redelivered), (b"unacked", False), "second get (left unacked over the restart)")
    m, _, b = consumer.basic_get(q)
    eq((b, m.redelivered), (b"requeued", False), "third get")
    consumer.basic_nack(m.delivery_tag, requeue=True)
    eq(wait_count(ch, q, 2), 2, "ready messages before the restart (requeued, never)")
    t.restart()

    c, ch = setup(t)
    eq(count(ch, q), 3, "messages after the restart")
    eq([(b, m.redelivered) for m, _, b in get_all(ch, q)],
       [(b"unacked", True), (b"requeued", True), (b"never", False)], "(body, redelivered) after the restart")


# ---------------------------------------------------------------- confirms

CONFIRMED = 1000


@scenario("durability.confirmed_messages_survive_restart", "pika", restart=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    ch.confirm_delivery()
    for i in range(CONFIRMED):
        ch.basic_publish("", q, b"%d" % i, properties=persistent())   # returns once acked, raises on nack
    t.restart()

    c, ch = setup(t)
    eq(count(ch, q), CONFIRMED, "queue.declare-ok message_count after the restart")
    ch.basic_qos(prefetch_count=100)
    got = Collector(ack=True)
    ch.basic_consume(q, got)
    check(wait_for(c, lambda: len(got.msgs) >= CONFIRMED, timeout=30), "consumed %d of %d" % (len(got.msgs), CONFIRMED))
    eq(got.bodies, [b"%d" % i for i in range(CONFIRMED)], "bodies in publish order")
    check(not any(m.redelivered for m, _, _ in got.msgs), "a never-delivered message came back redelivered")
    eq(wait_count(ch, q, 0), 0, "messages left after acking all")


# ---------------------------------------------------------------- arguments

@scenario("durability.queue_arguments_after_restart", "pika", restart=True)
def _(t):
    c, ch = setup(t)
    dlx = exchange(t, ch, "fanout", durable=True)
    dlq = queue(t, ch, durable=True)
    ch.queue_bind(dlq, dlx)
    args = {"x-max-length": 3, "x-message-ttl": 86400000, "x-dead-letter-exchange": dlx}
    q = queue(t, ch, durable=True, arguments=args)
    t.restart()

    c, ch = setup(t)
    ch.queue_declare(q, durable=True, arguments=args)
    # The arguments are in force, not only remembered: the head beyond
    # max-length is dead-lettered to the exchange.
    for i in range(5):
        ch.basic_publish("", q, b"m%d" % i, properties=persistent())
    eq(wait_count(ch, q, 3), 3, "max-length after the restart")
    eq(wait_count(ch, dlq, 2), 2, "dead-lettered by max-length after the restart")
    eq(bodies(ch, q), ["m2", "m3", "m4"], "messages kept")
    got = get_all(ch, dlq)
    eq([b for _, _, b in got], [b"m0", b"m1"], "messages dead-lettered")
    eq(got[0][1].headers["x-death"][0]["reason"], "maxlen", "x-death reason")
    for key, value, shown in (("x-max-length", 4, "'4' but current is '3'"),
                              ("x-message-ttl", 1000, "'1000' but current is '86400000'"),
                              ("x-dead-letter-exchange", "other", "'other' but current is '%s'" % dlx)):
        e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, durable=True,
                          arguments=dict(args, **{key: value}), conn=c)
        eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg '%s' for queue '%s' in vhost '/': received %s"
                         % (key, q, shown), "reply text for another %s" % key)
        ch = c.channel()
    less = {k: v for k, v in args.items() if k != "x-max-length"}
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, durable=True, arguments=less, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue '%s' in vhost '/': "
                     "received none but current is the value '3' of type 'signedint'" % q, "reply text without it")
