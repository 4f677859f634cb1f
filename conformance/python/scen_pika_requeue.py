"""pika: a requeued message goes back to its original place in the queue,
whichever way it returns -- single rejects in delivery order (kombu's
pattern) or any order, a multiple nack, basic.recover, a cancelled
consumer's channel closing, within its priority level, with a long
persistent backlog behind -- and a multiple nack without requeue
dead-letters in order. Recorded from RabbitMQ 3.10.8."""
import pika

from confkit import Collector, eq, exchange, get_all, queue, scenario, sync, wait_count, wait_for


def filled(t, ch, bodies, props=None, **kw):
    q = queue(t, ch, **kw)
    for b in bodies:
        ch.basic_publish("", q, b.encode(), props)
    sync(ch)
    return q


def take(ch, q, n):
    """n basic.gets without ack: [(delivery tag, body)]."""
    out = []
    for _ in range(n):
        m, _, b = ch.basic_get(q)
        eq(m is not None, True, "a message to take")
        out.append((m.delivery_tag, b.decode()))
    return out


def rest(ch, q):
    """What is left, in order, "r" appended to each redelivered body."""
    return [b.decode() + ("r" if m.redelivered else "") for m, _, b in get_all(ch, q)]


@scenario("ack.requeue_single_rejects_keep_order", "pika", quick=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, "abcdef")
    for tag, _ in take(ch, q, 4):
        ch.basic_reject(tag, requeue=True)
    eq(rest(ch, q), ["ar", "br", "cr", "dr", "e", "f"], "order after rejecting a, b, c, d in turn")


@scenario("ack.requeue_any_order_keeps_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, "abcdef")
    got = take(ch, q, 4)
    for i in (1, 3, 0, 2):
        ch.basic_nack(got[i][0], requeue=True)
    eq(rest(ch, q), ["ar", "br", "cr", "dr", "e", "f"], "order after nacking b, d, a, c")


@scenario("ack.requeue_multiple_nack_then_reject_keeps_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, "abcdef")
    got = take(ch, q, 4)
    ch.basic_reject(got[3][0], requeue=True)
    ch.basic_nack(got[2][0], multiple=True, requeue=True)
    eq(rest(ch, q), ["ar", "br", "cr", "dr", "e", "f"], "order after d, then a-c at once")


@scenario("ack.recover_keeps_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, "abcde")
    got = take(ch, q, 3)
    ch.basic_ack(got[1][0])
    ch.basic_recover(requeue=True)
    eq(rest(ch, q), ["ar", "cr", "d", "e"], "order after basic.recover")


@scenario("consumer.cancel_then_close_keeps_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, "abcde")
    ch2 = c.channel()
    ch2.basic_qos(prefetch_count=2)
    seen = Collector()
    tag = ch2.basic_consume(q, seen)
    wait_for(c, lambda: len(seen.msgs) == 2)
    ch2.basic_cancel(tag)
    eq(wait_count(ch, q, 3), 3, "ready while the cancelled consumer's deliveries are unacked")
    ch2.close()
    eq(wait_count(ch, q, 5), 5, "ready after its channel closed")
    eq(rest(ch, q), ["ar", "br", "c", "d", "e"], "order")


@scenario("ack.requeue_keeps_priority_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    q = queue(t, ch, arguments={"x-max-priority": 5})
    for b, p in (("l1", 1), ("h1", 5), ("l2", 1), ("h2", 5)):
        ch.basic_publish("", q, b.encode(), pika.BasicProperties(priority=p))
    sync(ch)
    got = take(ch, q, 4)
    eq([b for _, b in got], ["h1", "h2", "l1", "l2"], "delivery order")
    for i in (3, 1, 2, 0):
        ch.basic_reject(got[i][0], requeue=True)
    eq(rest(ch, q), ["h1r", "h2r", "l1r", "l2r"], "order after rejects in reverse")


@scenario("ack.requeue_order_with_long_backlog", "pika", timeout=40)
def _(t):
    """A durable queue with a persistent backlog (Warren keeps only its head
    in memory): requeued messages go back before it, in order."""
    c = t.pika()
    ch = c.channel()
    bodies = ["m%03d" % i for i in range(500)]
    q = filled(t, ch, bodies, pika.BasicProperties(delivery_mode=2), durable=True)
    got = take(ch, q, 4)
    for i in (0, 2, 1, 3):
        ch.basic_reject(got[i][0], requeue=True)
    out = rest(ch, q)
    eq(out[:5], ["m000r", "m001r", "m002r", "m003r", "m004"], "head after the rejects")
    eq([b.rstrip("r") for b in out], bodies, "the whole backlog in order")


@scenario("extensions.dead_letter_nack_multiple_keeps_order", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    dlx = exchange(t, ch, "fanout")
    dlq = queue(t, ch)
    ch.queue_bind(dlq, dlx)
    q = filled(t, ch, ["n0", "n1", "n2", "n3"], arguments={"x-dead-letter-exchange": dlx})
    got = take(ch, q, 4)
    ch.basic_nack(got[3][0], multiple=True, requeue=False)
    eq(wait_count(ch, dlq, 4), 4, "dead-lettered")
    eq([b for _, _, b in get_all(ch, dlq)], [b"n0", b"n1", b"n2", b"n3"], "dead-letter order")


@scenario("ack.requeue_adds_no_header", "pika", quick=True)
def _(t):
    """A classic queue without a delivery limit hands a returned message
    back with the headers it was published with: nothing added by
    basic.reject, basic.nack or basic.recover, for basic.get and for a
    consumer alike (quorum queues, and Warren's classic queues with a
    delivery limit, add x-delivery-count instead)."""
    c = t.pika()
    ch = c.channel()
    q = filled(t, ch, ["h"], pika.BasicProperties(headers={"a": 1, "b": "x"}))
    ch.basic_publish("", q, b"n")
    sync(ch)
    seen = []
    for verdict in ("reject", "nack", "recover"):
        for _ in range(2):
            m, p, b = ch.basic_get(q)
            seen.append((b.decode(), m.redelivered, p.headers))
        if verdict == "recover":
            ch.basic_recover(requeue=True)
            continue
        for tag in (m.delivery_tag - 1, m.delivery_tag):
            (ch.basic_reject(tag, requeue=True) if verdict == "reject"
             else ch.basic_nack(tag, requeue=True))
    got = Collector()
    ch.basic_consume(q, got)
    wait_for(c, lambda: len(got.msgs) == 2)
    seen += [(b.decode(), m.redelivered, p.headers) for m, p, b in got.msgs]
    h = {"a": 1, "b": "x"}
    eq(seen, [("h", False, h), ("n", False, None)] + [("h", True, h), ("n", True, None)] * 3,
       "(body, redelivered, headers) of each delivery")
