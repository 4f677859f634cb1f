"""pika: queue declare rules, exclusivity, auto-delete, bind/unbind, purge,
delete and the empty-name shortcut."""
from confkit import (ACCESS_REFUSED, NOT_FOUND, PRECONDITION_FAILED, RESOURCE_LOCKED, bodies, bound_queue,
                     channel_error, check, count, eq, exchange, get_all, queue, queue_gone, reply_text, scenario, sync,
                     wait_count, wait_for)

LOCKED_TEXT = ("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '%s' in vhost '/'. It could be "
               "originally declared on another connection or the exclusive property value does not match that "
               "of the original declaration.")


def setup(t):
    c = t.pika()
    return c, c.channel()


def fill(ch, q, n):
    for i in range(n):
        ch.basic_publish("", q, str(i).encode())
    sync(ch)


@scenario("queue.server_named", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    ok1 = ch.queue_declare("", exclusive=True).method
    ok2 = ch.queue_declare("", exclusive=True).method
    for ok in (ok1, ok2):
        check(ok.queue.startswith("amq.gen-"), "server-named queue %r" % ok.queue)
        eq((ok.message_count, ok.consumer_count), (0, 0), "counts of a new queue")
    check(ok1.queue != ok2.queue, "two server-named queues got the same name")


@scenario("queue.declare_ok_echoes_name", "pika")
def _(t):
    c, ch = setup(t)
    name = t.track_queue(t.name("q"))
    eq(ch.queue_declare(name).method.queue, name, "declare-ok queue name")


@scenario("queue.passive_missing_404", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, ch.queue_declare, name, passive=True, conn=c)
    eq(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name, "reply text")


@scenario("queue.passive_ignores_flags", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.queue_declare(q, passive=True, durable=True, auto_delete=True, arguments={"x-message-ttl": 5})


@scenario("queue.amq_prefix_reserved_403", "pika")
def _(t):
    c, ch = setup(t)
    name = t.track_queue("amq." + t.name("q"))
    e = channel_error(ACCESS_REFUSED, ch.queue_declare, name, conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - queue name '%s' contains reserved prefix 'amq.*'" % name, "reply text")


@scenario("queue.durable_redeclare", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    ch.queue_declare(q, durable=True)


@scenario("queue.redeclare_other_durable_406", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, durable=True, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '%s' in vhost '/': "
                     "received 'true' but current is 'false'" % q, "reply text")


@scenario("queue.redeclare_other_auto_delete_406", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, auto_delete=True)
    check("inequivalent arg 'auto_delete'" in e.reply_text, "reply text %r" % e.reply_text)


@scenario("queue.redeclare_other_x_argument_406", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, arguments={"x-message-ttl": 1000})
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue '%s' in vhost '/': "
                     "received the value '1000' of type 'signedint' but current is none" % q, "reply text")


@scenario("queue.redeclare_other_x_argument_value_406", "pika")
def _(t):
    # Both sides have the argument: RabbitMQ shows the bare values, without
    # "the value ... of type ..." (that form is for a side that lacks it).
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-length": 10})
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, q, arguments={"x-max-length": 11})
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue '%s' in vhost '/': "
                     "received '11' but current is '10'" % q, "reply text")


@scenario("queue.redeclare_with_plain_argument", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.queue_declare(q, arguments={"foo": 1})


@scenario("queue.redeclare_exclusive_mismatch_405", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, name=t.short_name())
    e = channel_error(RESOURCE_LOCKED, ch.queue_declare, q, exclusive=True)
    eq(e.reply_text, reply_text(LOCKED_TEXT % q), "reply text")


@scenario("queue.invalid_argument_type_406", "pika")
def _(t):
    c, ch = setup(t)
    name = t.track_queue(t.name("q"))
    e = channel_error(PRECONDITION_FAILED, ch.queue_declare, name, arguments={"x-message-ttl": "abc"})
    eq(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for queue '%s' in vhost '/': "
                     "\"expected integer, got longstr\"" % name, "reply text")
    e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, arguments={"x-max-length": -1})
    check("invalid arg 'x-max-length'" in e.reply_text, "reply text %r" % e.reply_text)


@scenario("queue.declare_ok_counts", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 5)
    check(ch.basic_get(q)[0] is not None, "basic.get")  # one unacked: not counted
    ch2 = c.channel()
    ch2.basic_qos(prefetch_count=1)
    ch2.basic_consume(q, lambda *a: None)
    wait_for(c, lambda: count(ch, q) == 3)
    ok = ch.queue_declare(q, passive=True).method
    eq((ok.message_count, ok.consumer_count), (3, 1), "passive declare-ok counts")
    ok = ch.queue_declare(q).method
    eq((ok.message_count, ok.consumer_count), (3, 1), "active redeclare-ok counts")


def two(t):
    """A connection with an exclusive queue and a channel on another connection."""
    c, ch = setup(t)
    q = queue(t, ch, name=t.short_name(), exclusive=True)
    other = t.pika()
    return c, ch, q, other, other.channel()


@scenario("queue.exclusive_other_connection_405", "pika", quick=True)
def _(t):
    c, ch, q, oc, och = two(t)
    e = channel_error(RESOURCE_LOCKED, och.queue_declare, q, passive=True, conn=oc)
    eq(e.reply_text, reply_text(LOCKED_TEXT % q), "reply text")
    for name, fn, args in (("consume", "basic_consume", (q, lambda *a: None)), ("get", "basic_get", (q,)),
                           ("bind", "queue_bind", (q, "amq.direct", "k")), ("purge", "queue_purge", (q,)),
                           ("delete", "queue_delete", (q,)), ("redeclare", "queue_declare", (q,))):
        och = oc.channel()
        try:
            channel_error(RESOURCE_LOCKED, getattr(och, fn), *args)
        except AssertionError as e:
            raise AssertionError("%s from another connection: %s" % (name, e))


@scenario("queue.exclusive_other_connection_may_publish", "pika")
def _(t):
    c, ch, q, oc, och = two(t)
    och.basic_publish("", q, b"from other")
    sync(och)
    eq(ch.basic_get(q, auto_ack=True)[2], b"from other", "message from another connection")


@scenario("queue.exclusive_same_connection_other_channel", "pika")
def _(t):
    c, ch, q, oc, och = two(t)
    ch2 = c.channel()
    ch2.queue_declare(q, passive=True)
    ch2.basic_publish("", q, b"x")
    eq(ch2.basic_get(q, auto_ack=True)[2], b"x", "get on another channel")
    ch2.close()
    ch.queue_declare(q, passive=True)  # survives a channel close


@scenario("queue.auto_delete_last_consumer_cancel", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, auto_delete=True)
    t1 = ch.basic_consume(q, lambda *a: None)
    t2 = ch.basic_consume(q, lambda *a: None)
    ch.basic_cancel(t1)
    eq(ch.queue_declare(q, passive=True).method.consumer_count, 1, "consumer count after one cancel")
    ch.basic_cancel(t2)
    check(queue_gone(c, q), "auto-delete queue survived its last consumer")


@scenario("queue.auto_delete_consumer_channel_close", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, auto_delete=True)
    ch2 = c.channel()
    ch2.basic_consume(q, lambda *a: None)
    ch2.close()
    check(queue_gone(c, q), "auto-delete queue survived its consumer's channel")


@scenario("queue.auto_delete_never_consumed_survives", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, auto_delete=True)
    ch.basic_publish("", q, b"x")
    check(ch.basic_get(q, auto_ack=True)[0] is not None, "basic.get")
    ch.queue_declare(q, passive=True)


@scenario("queue.bind_unbind", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "k")
    ch.basic_publish(x, "k", b"1")
    ch.queue_unbind(q, x, "k")
    ch.basic_publish(x, "k", b"2")
    sync(ch)
    eq(bodies(ch, q), ["1"], "routed before the unbind only")


@scenario("queue.bind_missing_queue_or_exchange_404", "pika")
def _(t):
    c, ch = setup(t)
    missing = t.name("missing")
    e = channel_error(NOT_FOUND, ch.queue_bind, missing, "amq.direct", "k", conn=c)
    eq(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % missing, "reply text (queue)")
    ch = c.channel()
    q = queue(t, ch)
    e = channel_error(NOT_FOUND, ch.queue_bind, q, missing, "k")
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % missing, "reply text (exchange)")


@scenario("queue.unbind_missing_is_ok", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.queue_unbind(q, "amq.direct", "never-bound")
    ch.queue_unbind(t.name("missing"), "amq.direct", "k")
    ch.queue_unbind(q, t.name("missing"), "k")


@scenario("queue.bind_arguments_distinguish_bindings", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = queue(t, ch)
    ch.queue_bind(q, x, "k", arguments={"a": 1})
    ch.queue_bind(q, x, "k", arguments={"a": 2})
    ch.queue_unbind(q, x, "k", arguments={"a": 1})
    ch.basic_publish(x, "k", b"still")
    sync(ch)
    eq(count(ch, q), 1, "messages through the remaining binding")


@scenario("queue.purge", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 7)
    eq(ch.queue_purge(q).method.message_count, 7, "purge-ok count")
    eq(count(ch, q), 0, "messages after purge")
    eq(ch.queue_purge(q).method.message_count, 0, "purge-ok count of an empty queue")


@scenario("queue.purge_keeps_unacked", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 3)
    m, _, _ = ch.basic_get(q)
    eq(ch.queue_purge(q).method.message_count, 2, "purge-ok count")
    ch.basic_reject(m.delivery_tag, requeue=True)
    eq(wait_count(ch, q, 1), 1, "the unacked message comes back")


@scenario("queue.purge_missing_404", "pika")
def _(t):
    c, ch = setup(t)
    channel_error(NOT_FOUND, ch.queue_purge, t.name("missing"), conn=c)


@scenario("queue.delete", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 4)
    eq(ch.queue_delete(q).method.message_count, 4, "delete-ok count")
    check(queue_gone(c, q), "queue still there after delete")
    eq(ch.queue_delete(t.name("missing")).method.message_count, 0, "delete-ok of a missing queue")


@scenario("queue.delete_if_empty_406", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 1)
    e = channel_error(PRECONDITION_FAILED, ch.queue_delete, q, if_empty=True, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - queue '%s' in vhost '/' not empty" % q, "reply text")
    ch = c.channel()
    ch.queue_purge(q)
    ch.queue_delete(q, if_empty=True)
    check(queue_gone(c, q), "empty queue not deleted by if-empty delete")


@scenario("queue.delete_if_unused_406", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    cch = c.channel()
    tag = cch.basic_consume(q, lambda *a: None)
    e = channel_error(PRECONDITION_FAILED, ch.queue_delete, q, if_unused=True, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - queue '%s' in vhost '/' in use" % q, "reply text")
    cch.basic_cancel(tag)
    fill(cch, q, 2)
    eq(cch.queue_delete(q, if_unused=True).method.message_count, 2, "delete-ok count")


@scenario("queue.delete_removes_bindings", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    q = bound_queue(t, ch, x)
    ch.queue_delete(q)
    ch.queue_declare(q)
    ch.basic_publish(x, "", b"lost")
    sync(ch)
    eq(count(ch, q), 0, "messages routed by a binding of the deleted queue")


@scenario("queue.empty_name_means_last_declared", "pika")
def _(t):
    c, ch = setup(t)
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.queue_bind("", "amq.fanout")
    try:
        ch.basic_publish("", q, b"a")
        eq(ch.basic_get("", auto_ack=True)[2], b"a", "basic.get ''")
        ch.basic_publish("", q, b"b")
        sync(ch)
        eq(ch.queue_purge("").method.message_count, 1, "queue.purge ''")
        ch.basic_consume("", lambda *a: None)
        eq(ch.queue_declare(q, passive=True).method.consumer_count, 1, "basic.consume ''")
    finally:
        ch.queue_unbind(q, "amq.fanout")


@scenario("queue.empty_name_without_declare_404", "pika")
def _(t):
    c, ch = setup(t)
    e = channel_error(NOT_FOUND, ch.basic_get, "", conn=c)
    eq(e.reply_text, "NOT_FOUND - no previously declared queue", "reply text")
    e = channel_error(NOT_FOUND, c.channel().queue_declare, "", passive=True)
    eq(e.reply_text, "NOT_FOUND - no queue '' in vhost '/'", "reply text (passive '')")


@scenario("queue.many_queues", "pika")
def _(t):
    c, ch = setup(t)
    qs = [queue(t, ch) for _ in range(100)]
    for i, q in enumerate(qs):
        ch.basic_publish("", q, str(i).encode())
    sync(ch)
    for i, q in enumerate(qs):
        eq([b for _, _, b in get_all(ch, q)], [str(i).encode()], "queue %d" % i)
