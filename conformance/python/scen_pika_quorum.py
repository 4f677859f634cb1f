"""pika: quorum queues (single node) as RabbitMQ 3.10 declares them, their
delivery limit, x-delivery-count and dead-lettering with reason
delivery_limit. Texts recorded from RabbitMQ 3.10.8."""
import pika

from confkit import (NOT_IMPLEMENTED, PRECONDITION_FAILED, channel_error, eq, queue, scenario, sync,
                     wait_for)

QUORUM = {"x-queue-type": "quorum"}


def setup(t):
    c = t.pika()
    return c, c.channel()


def quorum(t, ch, **args):
    a = dict(QUORUM)
    a.update(args)
    return queue(t, ch, durable=True, arguments=a)


def dl_pair(t, ch, limit):
    dlq = queue(t, ch, durable=True)
    src = quorum(t, ch, **{"x-delivery-limit": limit, "x-dead-letter-exchange": "",
                           "x-dead-letter-routing-key": dlq})
    return src, dlq


def get_within(c, ch, q, seconds=3.0, auto_ack=True):
    """basic.get until a message comes (a return or dead-letter may lag)."""
    got = []

    def arrived():
        if not got:
            m = ch.basic_get(q, auto_ack=auto_ack)
            if m[0]:
                got.append(m)
        return bool(got)
    wait_for(c, arrived, timeout=seconds)
    return got[0] if got else (None, None, None)


@scenario("queue.quorum_properties_406", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    for kw, prop in ((dict(durable=True, exclusive=True), "exclusive-owner"),
                     (dict(durable=True, auto_delete=True), "auto-delete"),
                     (dict(durable=False), "non-durable")):
        name = t.track_queue(t.name("q"))
        e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, arguments=QUORUM, conn=c, **kw)
        eq(e.reply_text, "PRECONDITION_FAILED - invalid property '%s' for queue '%s' in vhost '/'" % (prop, name),
           "reply text for %s" % prop)


@scenario("queue.quorum_arguments_406", "pika")
def _(t):
    c, ch = setup(t)
    for key, value in (("x-max-priority", 5), ("x-queue-mode", "lazy"), ("x-queue-master-locator", "random")):
        name = t.track_queue(t.name("q"))
        args = dict(QUORUM, **{key: value})
        e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, durable=True, arguments=args, conn=c)
        eq(e.reply_text, "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/' of queue type "
                         "rabbit_quorum_queue" % (key, name), "reply text for %s" % key)
    name = t.track_queue(t.name("q"))
    e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, durable=True,
                      arguments=dict(QUORUM, **{"x-dead-letter-strategy": "bogus"}), conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue '%s' in vhost '/': "
                     "invalid_dlx_strategy" % name, "reply text")


@scenario("queue.type_unsupported_406", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    name = t.track_queue(t.name("q"))
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, name, durable=True,
                      arguments={"x-queue-type": "bogus"}, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue '%s' in vhost '/': "
                     "\"unsupported queue type 'bogus'\"" % name, "reply text")


@scenario("queue.type_classic_is_default", "pika")
def _(t):
    c, ch = setup(t)
    a = queue(t, ch, durable=True)
    ch.queue_declare(a, durable=True, arguments={"x-queue-type": "classic"})
    b = queue(t, ch, durable=True, arguments={"x-queue-type": "classic"})
    ch.queue_declare(b, durable=True)
    q = quorum(t, ch)
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, durable=True, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '%s' in vhost '/': "
                     "received none but current is the value 'quorum' of type 'longstr'" % q, "reply text")


@scenario("qos.quorum_no_global_qos", "pika")
def _(t):
    c, ch = setup(t)
    q = quorum(t, ch)
    c2 = t.pika()
    ch2 = c2.channel()
    ch2.basic_qos(prefetch_count=5, global_qos=True)
    from pika import exceptions as pex
    try:
        ch2.basic_consume(q, lambda *a: None)
        raise AssertionError("basic.consume with global qos was accepted")
    except pex.ConnectionClosedByBroker as e:
        eq((e.reply_code, e.reply_text), (NOT_IMPLEMENTED, "NOT_IMPLEMENTED - queue '%s' in vhost '/' does not "
                                          "support global qos" % q), "connection close")


@scenario("ack.quorum_delivery_count_and_limit", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    src, dlq = dl_pair(t, ch, 2)
    ch.basic_publish("", src, b"m", pika.BasicProperties(headers={"a": 1}))
    sync(ch)
    seen = []
    for _ in range(3):
        m, p, _ = ch.basic_get(src)
        seen.append((m.redelivered, p.headers))
        ch.basic_reject(m.delivery_tag, requeue=True)
    eq(seen, [(False, {"a": 1, "x-delivery-count": 0}), (True, {"a": 1, "x-delivery-count": 1}),
              (True, {"a": 1, "x-delivery-count": 2})], "deliveries")
    m, p, b = get_within(c, ch, dlq)
    eq(b, b"m", "dead-lettered body")
    eq((p.headers.get("x-delivery-count"), p.headers["x-first-death-reason"], p.headers["x-death"][0]["reason"],
        p.headers["x-death"][0]["count"]), (None, "delivery_limit", "delivery_limit", 1), "dead-letter headers")
    eq(ch.queue_declare(src, passive=True).method.message_count, 0, "left in the source")


@scenario("ack.quorum_channel_close_counts", "pika")
def _(t):
    c, ch = setup(t)
    src, dlq = dl_pair(t, ch, 1)
    ch.basic_publish("", src, b"m")
    sync(ch)
    counts = []
    for _ in range(2):
        ch2 = c.channel()
        counts.append(get_within(c, ch2, src, auto_ack=False)[1].headers["x-delivery-count"])
        ch2.close()
    eq(counts, [0, 1], "x-delivery-count after channel closes")
    eq(get_within(c, ch, dlq)[2], b"m", "dead-lettered after the limit")


@scenario("consumer.quorum_redelivery_header", "pika")
def _(t):
    c, ch = setup(t)
    q = quorum(t, ch)
    ch.basic_publish("", q, b"m")
    sync(ch)
    got = []

    def cb(chan, m, p, b):
        got.append((m.redelivered, p.headers))
        if len(got) < 3:
            chan.basic_reject(m.delivery_tag, requeue=True)
        else:
            chan.basic_ack(m.delivery_tag)
    ch.basic_consume(q, cb)
    wait_for(c, lambda: len(got) >= 3)
    eq(got, [(False, None), (True, {"x-delivery-count": 1}), (True, {"x-delivery-count": 2})], "deliveries")


@scenario("durability.quorum_transient_kept", "pika")
def _(t):
    """A quorum queue takes a message without delivery mode 2 and keeps the
    property as published (it stores it durably anyway)."""
    c, ch = setup(t)
    q = quorum(t, ch)
    ch.confirm_delivery()
    ch.basic_publish("", q, b"m")
    m, p, b = ch.basic_get(q, auto_ack=True)
    eq((b, p.delivery_mode), (b"m", None), "message")


@scenario("queue.quorum_reject_publish_once_over", "pika")
def _(t):
    """3.10's quorum queue takes the message that crosses x-max-length and
    nacks the ones after it."""
    from pika import exceptions as pex
    c, ch = setup(t)
    q = quorum(t, ch, **{"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    outcome = []
    for b in (b"a", b"b", b"c"):
        try:
            ch.basic_publish("", q, b)
            outcome.append("ack")
        except pex.NackError:
            outcome.append("nack")
    eq(outcome, ["ack", "ack", "nack"], "confirms")
    eq(ch.queue_declare(q, passive=True).method.message_count, 2, "queued")


@scenario("extensions.quorum_at_least_once_dead_letters", "pika")
def _(t):
    """x-dead-letter-strategy at-least-once (with reject-publish, as 3.10
    requires): a rejected message reaches the dead-letter queue once, with
    x-death, and leaves its queue."""
    c, ch = setup(t)
    dlq = queue(t, ch, durable=True)
    src = quorum(t, ch, **{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
                           "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", src, b"m", pika.BasicProperties(headers={"a": 1}))
    sync(ch)
    m, _, _ = ch.basic_get(src)
    ch.basic_reject(m.delivery_tag, requeue=False)
    m, p, b = get_within(c, ch, dlq)
    eq((b, p.headers["a"], p.headers["x-first-death-reason"], p.headers["x-first-death-queue"]),
       (b"m", 1, "rejected", src), "dead-lettered message")
    eq([(d["reason"], d["count"], d["queue"]) for d in p.headers["x-death"]], [("rejected", 1, src)], "x-death")
    eq(ch.basic_get(dlq)[0], None, "dead-lettered once")
    eq(ch.queue_declare(src, passive=True).method.message_count, 0, "left in the source")


@scenario("extensions.quorum_drop_head_dead_letters", "pika")
def _(t):
    c, ch = setup(t)
    dlq = queue(t, ch, durable=True)
    src = quorum(t, ch, **{"x-max-length": 2, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    for b in (b"a", b"b", b"c"):
        ch.basic_publish("", src, b)
    sync(ch)
    m, p, b = get_within(c, ch, dlq)
    eq((b, p.headers["x-first-death-reason"]), (b"a", "maxlen"), "the head dead-lettered")
    eq([ch.basic_get(src, auto_ack=True)[2] for _ in range(2)], [b"b", b"c"], "what stays")


@scenario("extensions.quorum_at_least_once_waits_for_a_queue", "pika", warren_only=True)
def _(t):
    """A dead letter that no queue takes stays with its queue (not ready)
    and is delivered once a queue is there; Warren retries every second,
    RabbitMQ 3.10 after minutes."""
    c, ch = setup(t)
    dlq = t.track_queue(t.name("q"))
    src = quorum(t, ch, **{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
                           "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", src, b"m")
    sync(ch)
    m, _, _ = ch.basic_get(src)
    ch.basic_reject(m.delivery_tag, requeue=False)
    eq(ch.queue_declare(src, passive=True).method.message_count, 0, "not ready while it waits")
    ch.queue_declare(dlq, durable=True)
    m, p, b = get_within(c, ch, dlq, seconds=5)
    eq((b, p.headers["x-first-death-reason"] if p else None), (b"m", "rejected"), "delivered once a queue is bound")


@scenario("extensions.classic_delivery_limit", "pika", warren_only=True)
def _(t):
    """x-delivery-limit on a classic queue (RabbitMQ has it on quorum queues
    only): x-delivery-count on redelivery, dead-lettered past the limit."""
    c, ch = setup(t)
    dlq = queue(t, ch)
    src = queue(t, ch, arguments={"x-delivery-limit": 1, "x-dead-letter-exchange": "",
                                  "x-dead-letter-routing-key": dlq})
    ch.basic_publish("", src, b"m")
    sync(ch)
    m, p, _ = ch.basic_get(src)
    eq(p.headers, None, "first delivery unchanged")
    ch.basic_reject(m.delivery_tag, requeue=True)
    m, p, _ = ch.basic_get(src)
    eq((m.redelivered, p.headers), (True, {"x-delivery-count": 1}), "redelivery")
    ch.basic_nack(m.delivery_tag, requeue=True)
    m, p, b = get_within(c, ch, dlq)
    eq((b, p.headers["x-first-death-reason"], p.headers["x-death"][0]["reason"]),
       (b"m", "delivery_limit", "delivery_limit"), "dead-lettered past the limit")


@scenario("consumer.timeout_cancels_only_that_consumer", "pika", warren_only=True)
def _(t):
    """x-consumer-timeout on basic.consume: a consumer holding a delivery
    longer is cancelled (basic.cancel from the broker), its delivery
    requeued and counted; the channel and its other consumers stay
    (RabbitMQ 4.3's quorum queue behaviour; 3.10 closes the channel)."""
    c, ch = setup(t)
    q = quorum(t, ch)
    ch.basic_publish("", q, b"a")
    sync(ch)
    slow = c.channel()
    cancelled, got = [], []
    slow.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    tag = slow.basic_consume(q, lambda _c, m, p, b: got.append(b), arguments={"x-consumer-timeout": 300})
    other = slow.basic_consume(queue(t, ch), lambda *a: None)
    wait_for(c, lambda: cancelled, timeout=5)
    eq((cancelled, got), ([tag], [b"a"]), "the timed-out consumer cancelled")
    eq((slow.is_open, other in slow.consumer_tags), (True, True), "channel and other consumer stay")
    m, p, b = get_within(c, ch, q)
    eq((b, m.redelivered, p.headers), (b"a", True, {"x-delivery-count": 1}), "requeued and counted")
