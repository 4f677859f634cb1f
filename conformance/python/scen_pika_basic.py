"""pika: publish/get/consume, returns, properties, content sizes, consumers,
qos and acknowledgements."""
import datetime
import decimal
import pika

from confkit import (ACCESS_REFUSED, NOT_FOUND, NOT_IMPLEMENTED, NO_ROUTE, PRECONDITION_FAILED, Collector,
                     bound_queue, channel_error, check, connection_error, count, drain, eq, exchange, get_all,
                     queue, scenario, sync, wait_count, wait_for)


def setup(t, **kw):
    c = t.pika(**kw)
    return c, c.channel()


def fill(ch, q, n):
    for i in range(n):
        ch.basic_publish("", q, str(i).encode())
    sync(ch)


# ---------------------------------------------------------------- basic

@scenario("basic.publish_get", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish("", q, b)
    m, p, b = ch.basic_get(q, auto_ack=True)
    eq((m.delivery_tag, m.redelivered, m.exchange, m.routing_key, m.message_count, b),
       (1, False, "", q, 2, b"1"), "get-ok fields")
    eq(ch.basic_get(q, auto_ack=True)[0].message_count, 1, "message_count")
    eq(ch.basic_get(q, auto_ack=True)[0].message_count, 0, "message_count")
    eq(ch.basic_get(q, auto_ack=True), (None, None, None), "get-empty")


@scenario("basic.get_missing_queue_404", "pika")
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, ch.basic_get, name, conn=c)
    eq(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name, "reply text")


@scenario("basic.get_reports_exchange_and_key", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    q = bound_queue(t, ch, x, "a.*")
    ch.basic_publish(x, "a.b", b"t")
    m, _, _ = ch.basic_get(q, auto_ack=True)
    eq((m.exchange, m.routing_key), (x, "a.b"), "get-ok exchange and routing key")


@scenario("basic.consume_deliver", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    got = Collector()
    tag = ch.basic_consume(q, got, auto_ack=True, consumer_tag="my-tag")
    eq(tag, "my-tag", "consume-ok tag")
    ch.basic_publish("", q, b"x")
    check(wait_for(c, lambda: got.msgs), "no delivery")
    m = got.msgs[0][0]
    eq((m.consumer_tag, m.exchange, m.routing_key, m.redelivered, m.delivery_tag), ("my-tag", "", q, False, 1),
       "deliver fields")


@scenario("basic.fifo_order", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(500):
        ch.basic_publish("", q, str(i).encode())
    got = Collector()
    ch.basic_consume(q, got, auto_ack=True)
    check(wait_for(c, lambda: len(got.msgs) == 500), "got %d of 500" % len(got.msgs))
    eq(got.bodies, [str(i).encode() for i in range(500)], "order")


@scenario("basic.mandatory_unroutable_returned", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda ch_, m, p, b: returned.append((m, p, b)))
    x = exchange(t, ch, "direct")
    ch.basic_publish(x, "nowhere", b"ret", mandatory=True,
                     properties=pika.BasicProperties(message_id="r1", headers={"a": 1}))
    check(wait_for(c, lambda: returned), "no basic.return")
    m, p, b = returned[0]
    eq((m.reply_code, m.reply_text, m.exchange, m.routing_key), (NO_ROUTE, "NO_ROUTE", x, "nowhere"),
       "return fields")
    eq((p.message_id, p.headers, b), ("r1", {"a": 1}, b"ret"), "returned content")


@scenario("basic.mandatory_default_exchange_missing_queue", "pika")
def _(t):
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda ch_, m, p, b: returned.append(m))
    ch.basic_publish("", t.name("missing"), b"x", mandatory=True)
    check(wait_for(c, lambda: returned), "no basic.return")
    eq(returned[0].reply_code, NO_ROUTE, "return code")


@scenario("basic.mandatory_routed_not_returned", "pika")
def _(t):
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda *a: returned.append(a))
    q = queue(t, ch)
    ch.basic_publish("", q, b"x", mandatory=True)
    ch.basic_publish(exchange(t, ch, "fanout"), "", b"dropped")  # unroutable, not mandatory
    sync(ch)
    drain(c, 0.2)
    eq(returned, [], "returns")
    eq(count(ch, q), 1, "routed messages")


@scenario("basic.user_id_checked", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"ok", properties=pika.BasicProperties(user_id=t.broker.user))
    eq(ch.basic_get(q, auto_ack=True)[1].user_id, t.broker.user, "user_id of the authenticated user")
    ch.basic_publish("", q, b"bad", properties=pika.BasicProperties(user_id="bob"))
    e = channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was '%s'"
       % t.broker.user, "reply text")
    eq(count(c.channel(), q), 0, "the refused message is not queued")


@scenario("basic.recover_requeue", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for b in (b"a", b"b"):
        ch.basic_publish("", q, b)
    got = Collector()
    ch.basic_consume(q, got)
    check(wait_for(c, lambda: len(got.msgs) == 2), "first deliveries")
    ch.basic_recover(requeue=True)
    check(wait_for(c, lambda: len(got.msgs) == 4), "redeliveries after recover")
    eq([(m.redelivered, b) for m, _, b in got.msgs[2:]], [(True, b"a"), (True, b"b")], "redelivered")
    eq(got.tags, [1, 2, 3, 4], "delivery tags")
    ch.basic_ack(0, multiple=True)
    sync(ch)


@scenario("basic.recover_without_requeue_540", "pika")
def _(t):
    c, ch = setup(t)
    e = connection_error(NOT_IMPLEMENTED, ch.basic_recover, requeue=False)
    eq(e.reply_text, "NOT_IMPLEMENTED - requeue=false", "reply text")


@scenario("basic.direct_reply_to", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    replies = Collector()
    ch.basic_consume("amq.rabbitmq.reply-to", replies, auto_ack=True)
    server = c.channel()
    q = queue(t, server)
    ch.basic_publish("", q, b"request", properties=pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    sync(ch)
    m, p, b = server.basic_get(q, auto_ack=True)
    check(p.reply_to.startswith("amq.rabbitmq.reply-to."), "reply_to rewritten: %r" % p.reply_to)
    server.basic_publish("", p.reply_to, b"response")
    check(wait_for(c, lambda: replies.msgs), "no reply delivered")
    eq(replies.bodies, [b"response"], "replies")


@scenario("basic.direct_reply_to_without_consumer_406", "pika")
def _(t):
    c, ch = setup(t)
    ch.basic_publish("", "amq.rabbitmq.reply-to", b"x",
                     properties=pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
    e = channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - fast reply consumer does not exist", "reply text")


# ---------------------------------------------------------------- properties

ALL_PROPS = dict(content_type="text/plain", content_encoding="utf-8", delivery_mode=2, priority=5,
                 correlation_id="c-1", reply_to="r-1", expiration="60000", message_id="m-1",
                 timestamp=1700000000, type="t-1", app_id="a-1", cluster_id="cl-1")


@scenario("properties.all_fourteen_round_trip", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    headers = {"h": "v", "n": 1}
    props = pika.BasicProperties(headers=headers, user_id=t.broker.user, **ALL_PROPS)
    ch.basic_publish("", q, b"payload", properties=props)
    got = Collector()
    ch.basic_consume(q, got, auto_ack=True)
    check(wait_for(c, lambda: got.msgs), "no delivery")
    _, p, body = got.msgs[0]
    eq(body, b"payload", "body")
    for name in list(ALL_PROPS) + ["user_id", "headers"]:
        eq(getattr(p, name), getattr(props, name), "property %s" % name)


@scenario("properties.none_set", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"bare")
    m, p, b = ch.basic_get(q, auto_ack=True)
    eq(b, b"bare", "body")
    for name in list(ALL_PROPS) + ["user_id", "headers"]:
        eq(getattr(p, name), None, "property %s" % name)


@scenario("properties.each_alone", "pika")
def _(t):
    # Each property set on its own (one flag bit at a time) round-trips.
    c, ch = setup(t)
    q = queue(t, ch)
    single = dict(ALL_PROPS, user_id=t.broker.user, headers={"k": "v"})
    for name, value in single.items():
        ch.basic_publish("", q, name.encode(), properties=pika.BasicProperties(**{name: value}))
    got = get_all(ch, q)
    eq(len(got), len(single), "messages")
    for (m, p, b), (name, value) in zip(got, single.items()):
        eq(getattr(p, name), value, "property %s alone" % name)


@scenario("properties.header_field_types", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    headers = {"str": "s", "utf8": "h\u00e9llo \u2603", "int": 42, "neg": -7, "big": 2 ** 40, "bool_t": True,
               "bool_f": False, "none": None, "bytes": b"\x00\xff", "dec": decimal.Decimal("3.14"),
               "list": [1, "a", [2], {"x": 1}], "empty_list": [], "table": {"nested": {"deep": "yes"}},
               "empty_table": {}, "ts": datetime.datetime(2024, 1, 2, 3, 4, 5), "long_str": "L" * 70000}
    ch.basic_publish("", q, b"h", properties=pika.BasicProperties(headers=headers))
    _, p, _ = ch.basic_get(q, auto_ack=True)
    for k, v in headers.items():
        eq(p.headers.get(k, "<missing>"), v, "header %r" % k)
    eq(set(p.headers), set(headers), "header keys")


@scenario("properties.persistent_and_transient", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    ch.basic_publish("", q, b"p", properties=pika.BasicProperties(delivery_mode=2))
    ch.basic_publish("", q, b"t", properties=pika.BasicProperties(delivery_mode=1))
    got = get_all(ch, q)
    eq([(p.delivery_mode, b) for _, p, b in got], [(2, b"p"), (1, b"t")], "delivery modes")


# ---------------------------------------------------------------- content

def round_trip(t, size, consume=False, **kw):
    c, ch = setup(t, **kw)
    q = queue(t, ch)
    body = bytes((i * 31 + (i >> 8)) & 0xFF for i in range(size)) if size < (1 << 20) else \
        (bytes(range(256)) * (size // 256 + 1))[:size]
    ch.basic_publish("", q, body)
    if consume:
        got = Collector()
        ch.basic_consume(q, got, auto_ack=True)
        check(wait_for(c, lambda: got.msgs, timeout=30), "no delivery")
        b = got.bodies[0]
    else:
        b = ch.basic_get(q, auto_ack=True)[2]
    eq(len(b), size, "body length")
    check(b == body, "body differs from what was published")


@scenario("content.empty_body", "pika", quick=True)
def _(t):
    round_trip(t, 0)


@scenario("content.one_byte", "pika")
def _(t):
    round_trip(t, 1)


@scenario("content.frame_boundaries", "pika")
def _(t):
    # Bodies just under, at and over one and two frames (frame_max 4096:
    # 4088 octets of body per frame).
    c, ch = setup(t, frame_max=4096)
    q = queue(t, ch)
    sizes = [4087, 4088, 4089, 8176, 8177]
    for n in sizes:
        ch.basic_publish("", q, bytes([n & 0xFF]) * n)
    got = get_all(ch, q)
    eq([len(b) for _, _, b in got], sizes, "body sizes")
    check(all(b == bytes([n & 0xFF]) * n for (_, _, b), n in zip(got, sizes)), "body content")


@scenario("content.128k_body", "pika")
def _(t):
    round_trip(t, 131072)


@scenario("content.1mib_body_consume", "pika", quick=True)
def _(t):
    round_trip(t, 1 << 20, consume=True)


@scenario("content.16mib_body", "pika", timeout=60)
def _(t):
    round_trip(t, 16 << 20, consume=True)


@scenario("content.binary_body_all_octets", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    body = bytes(range(256)) * 4 + b"\xce\xce\x00\x01\x08"  # frame-end octets inside the body
    ch.basic_publish("", q, body)
    eq(ch.basic_get(q, auto_ack=True)[2], body, "binary body")


@scenario("content.many_messages_mixed_sizes", "pika")
def _(t):
    c, ch = setup(t, frame_max=8192)
    q = queue(t, ch)
    sizes = [0, 1, 8183, 8184, 8185, 100000, 0, 3]
    for i, n in enumerate(sizes):
        ch.basic_publish("", q, bytes([i]) * n)
    got = Collector()
    ch.basic_consume(q, got, auto_ack=True)
    check(wait_for(c, lambda: len(got.msgs) == len(sizes), timeout=10), "deliveries")
    eq([len(b) for b in got.bodies], sizes, "sizes in order")


# ---------------------------------------------------------------- consumers

@scenario("consumer.cancel_stops_deliveries", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    got = Collector()
    tag = ch.basic_consume(q, got, auto_ack=True)
    ch.basic_publish("", q, b"1")
    check(wait_for(c, lambda: got.msgs), "no delivery")
    ch.basic_cancel(tag)
    ch.basic_publish("", q, b"2")
    sync(ch)
    drain(c, 0.2)
    eq(got.bodies, [b"1"], "deliveries")
    eq(count(ch, q), 1, "message left in the queue")


@scenario("consumer.missing_queue_404", "pika")
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, ch.basic_consume, name, lambda *a: None, conn=c)
    eq(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name, "reply text")


@scenario("consumer.exclusive_conflicts_403", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    c.channel().basic_consume(q, lambda *a: None)
    e = channel_error(ACCESS_REFUSED, ch.basic_consume, q, lambda *a: None, exclusive=True, conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - queue '%s' in vhost '/' in exclusive use" % q, "reply text")
    q2 = queue(t, c.channel())
    ch2 = c.channel()
    tag = ch2.basic_consume(q2, lambda *a: None, exclusive=True)
    channel_error(ACCESS_REFUSED, c.channel().basic_consume, q2, lambda *a: None)
    ch2.basic_cancel(tag)
    c.channel().basic_consume(q2, lambda *a: None)  # released by the cancel


@scenario("consumer.server_cancel_on_queue_delete", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    cancelled = []
    ch2 = c.channel()
    tag = ch2.basic_consume(q, lambda *a: None)
    ch2.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
    ch.queue_delete(q)
    check(wait_for(c, lambda: cancelled), "no basic.cancel from the broker")
    eq(cancelled, [tag], "cancelled tags")
    check(ch2.is_open, "channel should stay open")


@scenario("consumer.round_robin", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    a, b = Collector(ack=True), Collector(ack=True)
    c.channel().basic_consume(q, a)
    c.channel().basic_consume(q, b)
    for i in range(10):
        ch.basic_publish("", q, str(i).encode())
    check(wait_for(c, lambda: len(a.msgs) + len(b.msgs) == 10), "deliveries")
    eq((len(a.msgs), len(b.msgs)), (5, 5), "split")
    eq(sorted(a.bodies + b.bodies, key=int), [str(i).encode() for i in range(10)], "all delivered once")


@scenario("consumer.priority", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    low, high = Collector(ack=True), Collector(ack=True)
    c.channel().basic_consume(q, low, arguments={"x-priority": 1})
    c.channel().basic_consume(q, high, arguments={"x-priority": 10})
    for _ in range(5):
        ch.basic_publish("", q, b"p")
    check(wait_for(c, lambda: len(low.msgs) + len(high.msgs) == 5), "deliveries")
    eq((len(high.msgs), len(low.msgs)), (5, 0), "(high, low) priority deliveries")


@scenario("consumer.count_in_declare_ok", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    tags = [c.channel().basic_consume(q, lambda *a: None) for _ in range(3)]
    eq(ch.queue_declare(q, passive=True).method.consumer_count, 3, "consumer_count")
    check(len(set(tags)) == 3, "distinct tags")


@scenario("consumer.no_ack_removes_messages", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 3)
    got = Collector()
    ch.basic_consume(q, got, auto_ack=True)
    check(wait_for(c, lambda: len(got.msgs) == 3), "deliveries")
    ch.close()
    eq(count(c.channel(), q), 0, "messages left after closing an auto-ack consumer's channel")


@scenario("consumer.delivery_tags_shared_with_get", "pika")
def _(t):
    c, ch = setup(t)
    q1, q2 = queue(t, ch), queue(t, ch)
    for q in (q1, q1, q2):
        ch.basic_publish("", q, b"x")
    tags = [ch.basic_get(q1)[0].delivery_tag]
    got = Collector()
    ch.basic_consume(q2, got)
    check(wait_for(c, lambda: got.msgs), "delivery")
    tags += got.tags
    tags.append(ch.basic_get(q1)[0].delivery_tag)
    eq(tags, [1, 2, 3], "tags across get and deliver")


@scenario("consumer.generator_consume", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 3)
    seen = []
    for m, p, b in ch.consume(q, inactivity_timeout=5):
        if m is None:
            break
        seen.append(b)
        ch.basic_ack(m.delivery_tag)
        if len(seen) == 3:
            break
    ch.cancel()
    eq(seen, [b"0", b"1", b"2"], "consumed")


# ---------------------------------------------------------------- qos

def qos_setup(t, n_queues=1, n=5):
    c, ch = setup(t)
    qs = [queue(t, ch) for _ in range(n_queues)]
    for q in qs:
        fill(ch, q, n)
    return c, ch, qs


@scenario("qos.prefetch_count", "pika", quick=True)
def _(t):
    c, ch, (q,) = qos_setup(t, n=10)
    ch.basic_qos(prefetch_count=2)
    got = Collector()
    ch.basic_consume(q, got)
    drain(c, 0.3)
    eq(len(got.msgs), 2, "deliveries with prefetch 2")
    ch.basic_ack(got.tags[0])
    drain(c, 0.3)
    eq(len(got.msgs), 3, "deliveries after one ack")
    ch.basic_ack(0, multiple=True)
    drain(c, 0.3)
    eq(len(got.msgs), 5, "deliveries after ack-all")


@scenario("qos.per_consumer", "pika")
def _(t):
    c, ch, (q1, q2) = qos_setup(t, 2)
    ch.basic_qos(prefetch_count=2, global_qos=False)
    a, b = Collector(), Collector()
    ch.basic_consume(q1, a)
    ch.basic_consume(q2, b)
    drain(c, 0.3)
    eq((len(a.msgs), len(b.msgs)), (2, 2), "deliveries per consumer")


@scenario("qos.global_shared_by_channel", "pika")
def _(t):
    c, ch, (q1, q2) = qos_setup(t, 2)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    a, b = Collector(), Collector()
    ch.basic_consume(q1, a)
    ch.basic_consume(q2, b)
    drain(c, 0.3)
    eq(len(a.msgs) + len(b.msgs), 3, "deliveries on the channel")


@scenario("qos.consumer_and_global_together", "pika")
def _(t):
    c, ch, (q1, q2) = qos_setup(t, 2)
    ch.basic_qos(prefetch_count=2)
    ch.basic_qos(prefetch_count=3, global_qos=True)
    a, b = Collector(), Collector()
    ch.basic_consume(q1, a)
    ch.basic_consume(q2, b)
    drain(c, 0.3)
    eq((len(a.msgs), len(b.msgs)), (2, 1), "deliveries")


@scenario("qos.change_affects_new_consumers", "pika")
def _(t):
    c, ch, (q1, q2) = qos_setup(t, 2)
    ch.basic_qos(prefetch_count=1)
    a, b = Collector(), Collector()
    ch.basic_consume(q1, a)
    ch.basic_qos(prefetch_count=3)
    ch.basic_consume(q2, b)
    drain(c, 0.3)
    eq((len(a.msgs), len(b.msgs)), (1, 3), "deliveries")


@scenario("qos.zero_is_unlimited", "pika")
def _(t):
    c, ch, (q,) = qos_setup(t, n=50)
    ch.basic_qos(prefetch_count=0)
    got = Collector()
    ch.basic_consume(q, got)
    check(wait_for(c, lambda: len(got.msgs) == 50), "got %d of 50" % len(got.msgs))


@scenario("qos.does_not_limit_get", "pika")
def _(t):
    c, ch, (q,) = qos_setup(t, n=3)
    ch.basic_qos(prefetch_count=1)
    eq(len([m for m in (ch.basic_get(q)[0] for _ in range(3)) if m is not None]), 3, "gets")


@scenario("qos.fair_dispatch", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    slow, fast = Collector(ack=False), Collector(ack=True)
    ch_slow, ch_fast = c.channel(), c.channel()
    ch_slow.basic_qos(prefetch_count=1)
    ch_fast.basic_qos(prefetch_count=1)
    ch_slow.basic_consume(q, slow)
    ch_fast.basic_consume(q, fast)
    fill(ch, q, 10)
    check(wait_for(c, lambda: len(slow.msgs) + len(fast.msgs) == 10), "deliveries")
    eq(len(slow.msgs), 1, "deliveries to the consumer that never acks")


@scenario("qos.prefetch_size_540", "pika")
def _(t):
    c, ch = setup(t)
    e = connection_error(NOT_IMPLEMENTED, ch.basic_qos, prefetch_size=10)
    eq(e.reply_text, "NOT_IMPLEMENTED - prefetch_size!=0 (10)", "reply text")


# ---------------------------------------------------------------- ack

def ack_setup(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(1, 6):
        ch.basic_publish("", q, str(i).encode())
    sync(ch)
    return c, ch, q


def get_n(ch, q, n):
    return [ch.basic_get(q)[0] for _ in range(n)]


@scenario("ack.single", "pika", quick=True)
def _(t):
    c, ch, q = ack_setup(t)
    m = get_n(ch, q, 1)[0]
    ch.basic_ack(m.delivery_tag)
    ch.close()
    eq(wait_count(c.channel(), q, 4), 4, "messages left")


@scenario("ack.multiple", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    get_n(ch, q, 5)
    ch.basic_ack(3, multiple=True)
    ch.close()
    ch = c.channel()
    eq(wait_count(ch, q, 2), 2, "messages back after close")
    eq([(m.redelivered, b) for m, _, b in get_all(ch, q)], [(True, b"4"), (True, b"5")], "requeued")


@scenario("ack.zero_multiple_acks_all", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    ch.basic_ack(0, multiple=True)  # nothing outstanding: fine
    sync(ch)
    get_n(ch, q, 5)
    ch.basic_ack(0, multiple=True)
    ch.close()
    eq(count(c.channel(), q), 0, "messages left")


@scenario("ack.unknown_tag_406", "pika", quick=True)
def _(t):
    c, ch, q = ack_setup(t)
    ch.basic_ack(99)
    e = channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 99", "reply text")
    ch = c.channel()
    get_n(ch, q, 2)
    ch.basic_ack(7, multiple=True)
    channel_error(PRECONDITION_FAILED, sync, ch)


@scenario("ack.double_ack_406", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    m = get_n(ch, q, 1)[0]
    ch.basic_ack(m.delivery_tag)
    ch.basic_ack(m.delivery_tag)
    e = channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 1", "reply text")


@scenario("ack.of_auto_ack_delivery_406", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    m, _, _ = ch.basic_get(q, auto_ack=True)
    ch.basic_ack(m.delivery_tag)
    channel_error(PRECONDITION_FAILED, sync, ch, conn=c)


@scenario("ack.on_other_channel_406", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    m = get_n(ch, q, 1)[0]
    ch2 = c.channel()
    ch2.basic_ack(m.delivery_tag)
    channel_error(PRECONDITION_FAILED, sync, ch2, conn=c)
    ch.basic_ack(m.delivery_tag)  # still outstanding on its own channel
    sync(ch)


@scenario("ack.nack_reject_unknown_tag_406", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    ch.basic_nack(42)
    channel_error(PRECONDITION_FAILED, sync, ch, conn=c)
    ch = c.channel()
    ch.basic_reject(42)
    e = channel_error(PRECONDITION_FAILED, sync, ch)
    eq(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 42", "reply text")


@scenario("ack.reject_requeue_to_head", "pika", quick=True)
def _(t):
    c, ch, q = ack_setup(t)
    m = get_n(ch, q, 1)[0]
    ch.basic_reject(m.delivery_tag, requeue=True)
    m2, _, b = ch.basic_get(q, auto_ack=True)
    eq((b, m2.redelivered), (b"1", True), "first after requeue")
    m3, _, b = ch.basic_get(q, auto_ack=True)
    eq((b, m3.redelivered), (b"2", False), "second")


@scenario("ack.reject_discard", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    m = get_n(ch, q, 1)[0]
    ch.basic_reject(m.delivery_tag, requeue=False)
    sync(ch)
    eq(count(ch, q), 4, "messages left")


@scenario("ack.nack_multiple_requeue_order", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    get_n(ch, q, 3)
    ch.basic_nack(3, multiple=True, requeue=True)
    eq([(m.redelivered, b) for m, _, b in get_all(ch, q)],
       [(True, b"1"), (True, b"2"), (True, b"3"), (False, b"4"), (False, b"5")], "order after nack")


@scenario("ack.nack_multiple_discard", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    get_n(ch, q, 4)
    ch.basic_nack(0, multiple=True, requeue=False)
    sync(ch)
    eq(count(ch, q), 1, "messages left")


@scenario("ack.nack_single_of_many", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    ms = get_n(ch, q, 3)
    ch.basic_nack(ms[1].delivery_tag, multiple=False, requeue=True)
    m, _, b = ch.basic_get(q, auto_ack=True)
    eq((b, m.redelivered), (b"2", True), "redelivered")
    ch.basic_ack(ms[0].delivery_tag)
    ch.basic_ack(ms[2].delivery_tag)
    sync(ch)


@scenario("ack.channel_close_requeues", "pika", quick=True)
def _(t):
    c, ch, q = ack_setup(t)
    ch2 = c.channel()
    get_n(ch2, q, 2)
    ch2.close()
    eq(wait_count(ch, q, 5), 5, "messages after close")
    eq([(m.redelivered, b) for m, _, b in get_all(ch, q)],
       [(True, b"1"), (True, b"2"), (False, b"3"), (False, b"4"), (False, b"5")], "order and flags")


@scenario("ack.connection_close_requeues", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    c2 = t.pika()
    ch2 = c2.channel()
    got = Collector()
    ch2.basic_consume(q, got)
    check(wait_for(c2, lambda: len(got.msgs) == 5), "deliveries")
    c2.close()
    eq(wait_count(ch, q, 5), 5, "messages after close")
    check(all(m.redelivered for m, _, _ in get_all(ch, q)), "all redelivered")


@scenario("ack.redelivered_to_consumer", "pika")
def _(t):
    c, ch, q = ack_setup(t)
    ch2 = c.channel()
    get_n(ch2, q, 1)
    ch2.close()
    eq(wait_count(ch, q, 5), 5, "messages after close")
    got = Collector(ack=True)
    ch.basic_consume(q, got)
    check(wait_for(c, lambda: len(got.msgs) == 5), "deliveries")
    eq([(m.redelivered, b) for m, _, b in got.msgs][:2], [(True, b"1"), (False, b"2")], "flags")


@scenario("ack.recover_with_get", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"g")
    ch.basic_get(q)
    ch.basic_recover(requeue=True)
    m, _, b = ch.basic_get(q, auto_ack=True)
    eq((b, m.redelivered), (b"g", True), "redelivered after recover")


@scenario("ack.consumer_acks_many", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    fill(ch, q, 300)
    ch.basic_qos(prefetch_count=50)
    got = Collector(ack=True)
    ch.basic_consume(q, got)
    check(wait_for(c, lambda: len(got.msgs) == 300, timeout=10), "got %d of 300" % len(got.msgs))
    sync(ch)
    eq(count(ch, q), 0, "messages left")
    check(not any(m.redelivered for m, _, _ in got.msgs), "nothing redelivered")
