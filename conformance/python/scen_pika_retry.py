"""pika: delayed retry (x-delayed-retry-type / -min / -max, RabbitMQ 4.3's
arguments, on classic queues too). Warren-only: RabbitMQ 3.10 has no
delayed retry, so these are skipped on it."""
import time

from confkit import PRECONDITION_FAILED, channel_error, check, eq, queue, scenario, wait_for


def wait_get(c, ch, q, seconds=3.0):
    """basic.get until a message comes; (method, props, body, seconds waited)."""
    t0, got = time.monotonic(), []

    def arrived():
        got[:] = [ch.basic_get(q)] if not got or not got[0][0] else got
        return got[0][0] is not None
    wait_for(c, arrived, timeout=seconds, step=0.01)
    m, p, b = got[0]
    return m, p, b, time.monotonic() - t0


@scenario("extensions.delayed_retry_failed", "pika", warren_only=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    q = queue(t, ch, arguments={"x-delayed-retry-type": "failed", "x-delayed-retry-min": 300,
                                "x-delayed-retry-max": 1000})
    for body in (b"a", b"b"):
        ch.basic_publish("", q, body)
    m, _, _ = ch.basic_get(q)
    t0 = time.monotonic()
    ch.basic_reject(m.delivery_tag, requeue=True)
    _, _, b = ch.basic_get(q)
    eq(b, b"b", "the next ready message, at once, while a waits")
    m, p, b, _ = wait_get(c, ch, q)
    waited = time.monotonic() - t0
    eq((b, m.redelivered if m else None, (p.headers or {}).get("x-delivery-count") if p else None),
       (b"a", True, 1), "a back with its count")
    check(0.27 < waited < 1.5, "a came back after %.2f s (delay 300 ms)" % waited)


@scenario("extensions.delayed_retry_returned_on_close", "pika", warren_only=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    q = queue(t, ch, arguments={"x-delayed-retry-type": "returned", "x-delayed-retry-min": 1000})
    ch.basic_publish("", q, b"m")
    other = t.pika()
    m, _, _ = other.channel().basic_get(q)
    check(m is not None, "the message was delivered")
    other.close()
    eq(ch.queue_declare(q, passive=True).method.message_count, 0, "not ready while delayed (1 s)")
    m, p, b, waited = wait_get(c, ch, q)
    eq((b, (p.headers or {}).get("x-delivery-count") if p else None), (b"m", 1), "back with its count")
    check(waited < 2.5, "came back after %.2f s" % waited)


@scenario("extensions.delayed_retry_bad_type_406", "pika", warren_only=True)
def _(t):
    c = t.pika()
    name = t.track_queue(t.name("q"))
    e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name,
                      arguments={"x-delayed-retry-type": "bogus"}, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-delayed-retry-type' for queue '%s' in vhost '/': "
                     "{invalid_delayed_retry_type,<<\"bogus\">>}" % name, "reply text")
