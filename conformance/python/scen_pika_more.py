"""pika: publisher confirms, transactions and RabbitMQ extensions (TTL,
dead-lettering, max-length, priorities, alternate exchanges, expiry,
single active consumer)."""
import time

import pika
from pika import exceptions as pex

from confkit import (NOT_FOUND, PRECONDITION_FAILED, Collector, bodies, bound_queue, channel_error, check, count,
                     drain, eq, exchange, get_all, queue, queue_gone, scenario, sync, wait_count, wait_for)


def setup(t, **kw):
    c = t.pika(**kw)
    return c, c.channel()


# ---------------------------------------------------------------- confirm

@scenario("confirm.publish_acked", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.confirm_delivery()
    for i in range(20):
        ch.basic_publish("", q, str(i).encode())  # raises on nack
    eq(count(ch, q), 20, "messages queued")


@scenario("confirm.unroutable_mandatory_returned", "pika")
def _(t):
    c, ch = setup(t)
    ch.confirm_delivery()
    try:
        ch.basic_publish("", t.name("missing"), b"m", mandatory=True)
    except pex.UnroutableError as e:
        eq(len(e.messages), 1, "returned messages")
        eq(e.messages[0].body, b"m", "returned body")
    else:
        raise AssertionError("no UnroutableError for a mandatory unroutable publish")
    sync(ch)


@scenario("confirm.unroutable_not_mandatory_acked", "pika")
def _(t):
    c, ch = setup(t)
    ch.confirm_delivery()
    ch.basic_publish(exchange(t, ch, "fanout"), "", b"lost")  # acked: no exception


@scenario("confirm.reject_publish_nacked", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.confirm_delivery()
    ch.basic_publish("", q, b"first")
    try:
        ch.basic_publish("", q, b"second")
    except pex.NackError:
        pass
    else:
        raise AssertionError("no NackError when the queue rejects the publish")
    eq(bodies(ch, q), ["first"], "queue contents")


@scenario("confirm.publish_to_missing_exchange_404", "pika")
def _(t):
    c, ch = setup(t)
    ch.confirm_delivery()
    name = t.name("missing")
    e = channel_error(NOT_FOUND, ch.basic_publish, name, "k", b"x", conn=c)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name, "reply text")


@scenario("confirm.tx_select_on_confirm_channel_406", "pika")
def _(t):
    c, ch = setup(t)
    ch.confirm_delivery()
    e = channel_error(PRECONDITION_FAILED, ch.tx_select, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - cannot switch from confirm to tx mode", "reply text")


@scenario("confirm.persistent_to_durable_queue", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    ch.confirm_delivery()
    for i in range(50):
        ch.basic_publish("", q, b"p%d" % i, properties=pika.BasicProperties(delivery_mode=2))
    eq(count(ch, q), 50, "messages queued")


# ---------------------------------------------------------------- tx

def tx_setup(t):
    c, ch = setup(t)
    q = queue(t, ch)
    tx = c.channel()
    tx.tx_select()
    return c, ch, q, tx


def put(ch, q, body):
    ch.basic_publish("", q, body)
    sync(ch)


@scenario("tx.commit_publishes", "pika", quick=True)
def _(t):
    c, ch, q, tx = tx_setup(t)
    for i in range(3):
        tx.basic_publish("", q, str(i).encode())
    sync(tx)
    eq(count(ch, q), 0, "messages before commit")
    tx.tx_commit()
    eq(bodies(ch, q), ["0", "1", "2"], "messages after commit")


@scenario("tx.rollback_discards_publishes", "pika", quick=True)
def _(t):
    c, ch, q, tx = tx_setup(t)
    tx.basic_publish("", q, b"gone")
    tx.tx_rollback()
    tx.basic_publish("", q, b"kept")
    tx.tx_commit()
    eq(bodies(ch, q), ["kept"], "messages")


@scenario("tx.channel_stays_transactional", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    for _ in range(3):
        tx.basic_publish("", q, b"x")
        tx.tx_commit()
    tx.basic_publish("", q, b"uncommitted")
    sync(tx)
    eq(count(ch, q), 3, "messages")
    tx.tx_rollback()


@scenario("tx.close_discards_uncommitted", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    tx.basic_publish("", q, b"x")
    tx.close()
    eq(count(ch, q), 0, "messages")


@scenario("tx.commit_ack", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    put(ch, q, b"a")
    m, _, _ = tx.basic_get(q)
    tx.basic_ack(m.delivery_tag)
    tx.tx_commit()
    tx.close()
    eq(count(ch, q), 0, "messages after committed ack")


@scenario("tx.rollback_ack", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    put(ch, q, b"a")
    m, _, _ = tx.basic_get(q)
    tx.basic_ack(m.delivery_tag)
    tx.tx_rollback()
    tx.basic_ack(m.delivery_tag)  # still unacked: acking again is legal
    tx.tx_rollback()
    tx.close()
    eq(wait_count(ch, q, 1), 1, "message requeued")
    m2, _, b = ch.basic_get(q, auto_ack=True)
    eq((b, m2.redelivered), (b"a", True), "redelivered")


@scenario("tx.uncommitted_ack_not_applied", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    put(ch, q, b"a")
    m, _, _ = tx.basic_get(q)
    tx.basic_ack(m.delivery_tag)
    sync(tx)
    tx.close()
    eq(wait_count(ch, q, 1), 1, "message requeued")


@scenario("tx.commit_nack_requeue", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    put(ch, q, b"n")
    m, _, _ = tx.basic_get(q)
    tx.basic_nack(m.delivery_tag, requeue=True)
    tx.tx_commit()
    m2, _, _ = ch.basic_get(q, auto_ack=True)
    check(m2 is not None and m2.redelivered, "redelivered after committed nack")


@scenario("tx.rollback_reject", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    put(ch, q, b"r")
    m, _, _ = tx.basic_get(q)
    tx.basic_reject(m.delivery_tag, requeue=False)
    tx.tx_rollback()
    tx.basic_ack(m.delivery_tag)
    tx.tx_commit()
    eq(count(ch, q), 0, "messages")


@scenario("tx.unknown_tag_fails_immediately_406", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    tx.basic_ack(5)
    e = channel_error(PRECONDITION_FAILED, sync, tx, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 5", "reply text")


@scenario("tx.mandatory_returned_at_commit", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    returned = []
    tx.add_on_return_callback(lambda ch_, m, p, b: returned.append(b))
    tx.basic_publish("", t.name("missing"), b"ret", mandatory=True)
    sync(tx)
    drain(c, 0.2)
    eq(returned, [], "returns before commit")
    tx.tx_commit()
    check(wait_for(c, lambda: returned), "no return after commit")
    eq(returned, [b"ret"], "returns")


@scenario("tx.confirm_select_on_tx_channel_406", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    e = channel_error(PRECONDITION_FAILED, tx.confirm_delivery, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - cannot switch from tx to confirm mode", "reply text")


@scenario("tx.commit_without_select_406", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    e = channel_error(PRECONDITION_FAILED, ch.tx_commit, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - channel is not transactional", "reply text")
    e = channel_error(PRECONDITION_FAILED, c.channel().tx_rollback)
    eq(e.reply_text, "PRECONDITION_FAILED - channel is not transactional", "reply text (rollback)")


@scenario("tx.select_twice", "pika")
def _(t):
    c, ch = setup(t)
    ch.tx_select()
    ch.tx_select()
    ch.tx_commit()


@scenario("tx.many_publishes_one_commit", "pika")
def _(t):
    c, ch, q, tx = tx_setup(t)
    for i in range(200):
        tx.basic_publish("", q, str(i).encode())
    tx.tx_commit()
    eq(bodies(ch, q), [str(i) for i in range(200)], "committed in order")


# ---------------------------------------------------------------- extensions

@scenario("extensions.queue_message_ttl", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-message-ttl": 100})
    ch.basic_publish("", q, b"x")
    time.sleep(0.4)
    eq(count(ch, q), 0, "messages after the TTL")
    eq(ch.basic_get(q)[0], None, "basic.get after the TTL")


@scenario("extensions.per_message_expiration", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"short", properties=pika.BasicProperties(expiration="100"))
    ch.basic_publish("", q, b"long", properties=pika.BasicProperties(expiration="60000"))
    time.sleep(0.4)
    eq(bodies(ch, q), ["long"], "messages after expiry")


@scenario("extensions.expiration_zero", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    got = Collector()
    ch.basic_consume(q, got, auto_ack=True)
    ch.basic_publish("", q, b"now", properties=pika.BasicProperties(expiration="0"))
    check(wait_for(c, lambda: got.msgs), "expiration 0 should still reach a waiting consumer")
    ch2 = c.channel()
    q2 = queue(t, ch2)
    ch2.basic_publish("", q2, b"late", properties=pika.BasicProperties(expiration="0"))
    sync(ch2)
    time.sleep(0.1)
    eq(count(ch2, q2), 0, "expiration 0 without a consumer")


@scenario("extensions.invalid_expiration_406", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"x", properties=pika.BasicProperties(expiration="soon"))
    e = channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    check(e.reply_text.startswith("PRECONDITION_FAILED - invalid expiration"), "reply text %r" % e.reply_text)


@scenario("extensions.queue_expires", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-expires": 200})
    time.sleep(1.0)  # a passive declare counts as use, so look only once
    check(queue_gone(c, q, timeout=0.1), "queue with x-expires 200 still there after 1 s")


@scenario("extensions.max_length_drop_head", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-length": 2})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    sync(ch)
    eq(bodies(ch, q), ["2", "3"], "messages kept")


@scenario("extensions.max_length_bytes", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-length-bytes": 10})
    for b in (b"aaaa", b"bbbb", b"cccc"):
        ch.basic_publish("", q, b)
    sync(ch)
    eq(bodies(ch, q), ["bbbb", "cccc"], "messages kept")


@scenario("extensions.overflow_reject_publish", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-length": 2, "x-overflow": "reject-publish"})
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    sync(ch)
    eq(bodies(ch, q), ["1", "2"], "messages kept")


@scenario("extensions.dead_letter_on_reject", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    dlx = exchange(t, ch, "fanout")
    dlq = bound_queue(t, ch, dlx)
    q = queue(t, ch, arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish("", q, b"dead")
    m, _, _ = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    check(wait_for(c, lambda: count(ch, dlq) == 1), "dead letter not routed")
    m, p, b = ch.basic_get(dlq, auto_ack=True)
    eq(b, b"dead", "body")
    death = p.headers["x-death"][0]
    eq((death["queue"], death["reason"], death["count"], death["exchange"], death["routing-keys"]),
       (q, "rejected", 1, "", [q]), "x-death entry")
    eq((p.headers.get("x-first-death-queue"), p.headers.get("x-first-death-reason")), (q, "rejected"),
       "x-first-death headers")


@scenario("extensions.dead_letter_on_expiry_with_routing_key", "pika")
def _(t):
    c, ch = setup(t)
    dlx = exchange(t, ch, "direct")
    dlq = bound_queue(t, ch, dlx, "expired")
    q = queue(t, ch, arguments={"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "expired",
                                "x-message-ttl": 50})
    ch.basic_publish("", q, b"old")
    check(wait_for(c, lambda: count(ch, dlq) == 1), "expired message not dead-lettered")
    _, p, _ = ch.basic_get(dlq, auto_ack=True)
    eq(p.headers["x-death"][0]["reason"], "expired", "x-death reason")


@scenario("extensions.dead_letter_on_max_length", "pika")
def _(t):
    c, ch = setup(t)
    dlx = exchange(t, ch, "fanout")
    dlq = bound_queue(t, ch, dlx)
    q = queue(t, ch, arguments={"x-dead-letter-exchange": dlx, "x-max-length": 1})
    ch.basic_publish("", q, b"first")
    ch.basic_publish("", q, b"second")
    sync(ch)
    check(wait_for(c, lambda: count(ch, dlq) == 1), "dropped head not dead-lettered")
    _, p, b = ch.basic_get(dlq, auto_ack=True)
    eq((b, p.headers["x-death"][0]["reason"]), (b"first", "maxlen"), "dead letter")


@scenario("extensions.dead_letter_nack_and_count", "pika")
def _(t):
    # A message dead-lettered twice through the same queue: count 2.
    c, ch = setup(t)
    dlx = exchange(t, ch, "fanout")
    q = queue(t, ch, arguments={"x-dead-letter-exchange": dlx})
    ch.queue_bind(q, dlx)
    ch.basic_publish("", q, b"again")
    for n in (1, 2):
        m = None
        deadline = time.monotonic() + 5
        while m is None and time.monotonic() < deadline:
            m, p, b = ch.basic_get(q)
        check(m is not None, "message %d not back" % n)
        ch.basic_nack(m.delivery_tag, requeue=False)
    m = None
    deadline = time.monotonic() + 5
    while m is None and time.monotonic() < deadline:
        m, p, b = ch.basic_get(q, auto_ack=True)
    check(m is not None, "message not back after two dead-letterings")
    eq(p.headers["x-death"][0]["count"], 2, "x-death count")
    eq(len(p.headers["x-death"]), 1, "x-death entries")


@scenario("extensions.priority_queue", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-priority": 10})
    for p in (1, 5, 10, 0, 5, 20):
        ch.basic_publish("", q, str(p).encode(), properties=pika.BasicProperties(priority=p))
    sync(ch)
    # 20 is above the maximum and counts as 10; equal priorities keep FIFO order.
    eq(bodies(ch, q), ["10", "20", "5", "5", "1", "0"], "delivery order")


@scenario("extensions.priority_ignored_without_max", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for p in (1, 9, 5):
        ch.basic_publish("", q, str(p).encode(), properties=pika.BasicProperties(priority=p))
    sync(ch)
    eq(bodies(ch, q), ["1", "9", "5"], "FIFO order")


@scenario("extensions.alternate_exchange", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    ae = exchange(t, ch, "fanout")
    aq = bound_queue(t, ch, ae)
    x = exchange(t, ch, "direct", arguments={"alternate-exchange": ae})
    q = bound_queue(t, ch, x, "k")
    ch.basic_publish(x, "k", b"routed")
    ch.basic_publish(x, "other", b"unrouted")
    sync(ch)
    eq(bodies(ch, q), ["routed"], "main queue")
    eq(bodies(ch, aq), ["unrouted"], "alternate queue")


@scenario("extensions.alternate_exchange_mandatory_not_returned", "pika")
def _(t):
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    ae = exchange(t, ch, "fanout")
    aq = bound_queue(t, ch, ae)
    x = exchange(t, ch, "direct", arguments={"alternate-exchange": ae})
    ch.basic_publish(x, "nowhere", b"m", mandatory=True)
    sync(ch)
    drain(c, 0.2)
    eq(returned, [], "returns when the alternate exchange routed it")
    eq(bodies(ch, aq), ["m"], "alternate queue")


@scenario("extensions.alternate_exchange_missing", "pika")
def _(t):
    # An alternate exchange that does not exist: the message is dropped
    # (or returned when mandatory), no error.
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda ch_, m, p, b: returned.append(m.reply_code))
    x = exchange(t, ch, "direct", arguments={"alternate-exchange": t.name("missing")})
    ch.basic_publish(x, "nowhere", b"m", mandatory=True)
    check(wait_for(c, lambda: returned), "no return")
    eq(returned, [312], "return codes")


@scenario("extensions.single_active_consumer", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-single-active-consumer": True})
    a, b = Collector(ack=True), Collector(ack=True)
    ca, cb = c.channel(), c.channel()
    ca.basic_consume(q, a)
    cb.basic_consume(q, b)
    for i in range(6):
        ch.basic_publish("", q, str(i).encode())
    check(wait_for(c, lambda: len(a.msgs) + len(b.msgs) == 6), "deliveries")
    eq((len(a.msgs), len(b.msgs)), (6, 0), "only the first consumer is active")
    ca.close()
    ch.basic_publish("", q, b"after")
    check(wait_for(c, lambda: b.msgs), "second consumer takes over")
    eq(b.bodies, [b"after"], "deliveries to the second consumer")


@scenario("extensions.queue_type_classic_and_lazy", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-queue-type": "classic", "x-queue-mode": "lazy"})
    ch.basic_publish("", q, b"x")
    eq(bodies(ch, q), ["x"], "messages")


@scenario("extensions.direct_reply_to_rpc", "pika")
def _(t):
    # An RPC round trip: the server consumes requests and answers to the
    # generated reply-to with the request's correlation id.
    c, ch = setup(t)
    server_conn = t.pika()
    sch = server_conn.channel()
    q = queue(t, sch)

    def serve(chan, m, p, body):
        chan.basic_publish("", p.reply_to, body.upper(),
                           properties=pika.BasicProperties(correlation_id=p.correlation_id))
    sch.basic_consume(q, serve, auto_ack=True)
    replies = Collector()
    ch.basic_consume("amq.rabbitmq.reply-to", replies, auto_ack=True)
    for i in range(3):
        ch.basic_publish("", q, b"req%d" % i,
                         properties=pika.BasicProperties(reply_to="amq.rabbitmq.reply-to", correlation_id=str(i)))
    deadline = time.monotonic() + 5
    while len(replies.msgs) < 3 and time.monotonic() < deadline:
        server_conn.process_data_events(0.02)
        c.process_data_events(0.02)
    eq([(p.correlation_id, b) for _, p, b in replies.msgs], [("0", b"REQ0"), ("1", b"REQ1"), ("2", b"REQ2")],
       "replies")


@scenario("extensions.e2e_with_alternate_and_dlx", "pika")
def _(t):
    c, ch = setup(t)
    ae = exchange(t, ch, "fanout")
    aq = bound_queue(t, ch, ae)
    src = exchange(t, ch, "topic", arguments={"alternate-exchange": ae})
    dst = exchange(t, ch, "direct")
    ch.exchange_bind(dst, src, "a.*")
    q = bound_queue(t, ch, dst, "a.b")
    ch.basic_publish(src, "a.b", b"1")   # src -> dst -> q
    ch.basic_publish(src, "a.c", b"2")   # src -> dst, no queue: not "routed" -> dropped
    ch.basic_publish(src, "z", b"3")     # nothing matches in src -> alternate
    sync(ch)
    eq(bodies(ch, q), ["1"], "queue behind the e2e binding")
    eq(bodies(ch, aq), ["3"], "alternate queue")
    eq(get_all(ch, q), [], "nothing more")


@scenario("extensions.direct_reply_to_declare", "pika")
def _(t):
    # kombu and others declare the pseudo-queue before consuming from it.
    c, ch = setup(t)
    for kw in ({}, {"passive": True}, {"exclusive": True, "auto_delete": True}):
        ok = ch.queue_declare("amq.rabbitmq.reply-to", **kw).method
        eq((ok.queue, ok.message_count, ok.consumer_count), ("amq.rabbitmq.reply-to", 0, 1),
           "declare-ok for amq.rabbitmq.reply-to %r" % kw)
    e = channel_error(NOT_FOUND, ch.queue_declare, "amq.rabbitmq.reply-to.nope", passive=True, conn=c)
    eq(e.reply_text, "NOT_FOUND - no queue 'amq.rabbitmq.reply-to.nope' in vhost '/'", "reply text")


@scenario("extensions.direct_reply_to_requires_no_ack_406", "pika")
def _(t):
    c, ch = setup(t)
    e = channel_error(PRECONDITION_FAILED, ch.basic_consume, "amq.rabbitmq.reply-to", lambda *a: None,
                      auto_ack=False, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - reply consumer cannot acknowledge", "reply text")
