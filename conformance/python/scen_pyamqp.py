"""py-amqp (the `amqp` package, kombu's transport): the same scenario ids as
pika where they make sense, driven through py-amqp's own API."""
import socket
import time

import amqp
from amqp import exceptions as aex

from confkit import (ACCESS_REFUSED, COMMAND_INVALID, NOT_FOUND, NOT_IMPLEMENTED, NO_ROUTE, PRECONDITION_FAILED,
                     RESOURCE_LOCKED, check, eq, reply_text, scenario)
from scen_pika_exchange import HEADER_BINDINGS, HEADER_EXPECTED, HEADER_MESSAGES, KEYS, TOPIC_TABLE

C = "py-amqp"


# ---------------------------------------------------------------- helpers

def setup(t, **kw):
    c = t.amqp(**kw)
    return c, c.channel()


def queue(t, ch, name=None, **kw):
    name = name or t.name("q")
    t.track_queue(name)
    kw.setdefault("auto_delete", False)
    ch.queue_declare(name, **kw)
    return name


def exchange(t, ch, kind="direct", name=None, **kw):
    name = name or t.name("x")
    t.track_exchange(name)
    kw.setdefault("auto_delete", False)
    ch.exchange_declare(name, kind, **kw)
    return name


def bound_queue(t, ch, x, *keys, arguments=None):
    q = queue(t, ch)
    for k in keys or ("",):
        ch.queue_bind(q, x, k, arguments=arguments)
    return q


def sync(ch):
    ch.exchange_declare("amq.direct", "direct", passive=True)


def count(ch, q):
    return ch.queue_declare(q, passive=True).message_count


def get_all(ch, q, no_ack=True):
    out = []
    while True:
        m = ch.basic_get(q, no_ack=no_ack)
        if m is None:
            return out
        out.append(m)


def bodies(ch, q):
    return [m.body.decode() if isinstance(m.body, bytes) else m.body for m in get_all(ch, q)]


def drain(conn, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=max(0.01, deadline - time.monotonic()))
        except socket.timeout:
            pass


def wait_for(conn, pred, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not pred() and time.monotonic() < deadline:
        try:
            conn.drain_events(timeout=0.05)
        except socket.timeout:
            pass
    return pred()


def channel_error(code, conn, fn, *args, **kw):
    """fn() must close the channel with `code`; the connection must survive."""
    try:
        fn(*args, **kw)
    except aex.AMQPError as e:
        eq(e.reply_code, code, "reply code (%s)" % e.reply_text)
        try:
            sync(conn.channel())
        except aex.AMQPError as e2:
            raise AssertionError("connection unusable after a channel error: %s" % e2)
        return e
    raise AssertionError("no error, expected channel close %d" % code)


def connection_error(code, conn, fn, *args, **kw):
    try:
        fn(*args, **kw)
    except aex.AMQPError as e:
        eq(e.reply_code, code, "reply code (%s)" % e.reply_text)
        try:
            conn.channel()
        except Exception:  # noqa: BLE001 - expected: the connection is gone
            return e
        raise AssertionError("connection still usable after a connection error %d" % code)
    raise AssertionError("no error, expected connection close %d" % code)


def msg(body, **props):
    return amqp.Message(body, **props)


# ---------------------------------------------------------------- connection / channel

@scenario("connection.open_close", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = ch.queue_declare("", exclusive=True).queue
    check(q.startswith("amq.gen-"), "server-named queue %r" % q)
    c.close()
    check(not c.connected, "connection should be closed")


@scenario("connection.server_capabilities", C)
def _(t):
    c, ch = setup(t)
    caps = c.server_capabilities
    for cap in ("publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
                "connection.blocked", "authentication_failure_close", "per_consumer_qos", "direct_reply_to",
                "consumer_priorities"):
        eq(caps.get(cap), True, "capability %s" % cap)


@scenario("connection.bad_password", C, quick=True)
def _(t):
    try:
        t.amqp(password="wrong-" + t.run_id)
    except aex.AccessRefused as e:
        eq(e.reply_code, ACCESS_REFUSED, "reply code")
        return
    raise AssertionError("login with a wrong password succeeded")


@scenario("connection.unknown_vhost", C)
def _(t):
    vhost = "conf-%s-no-such-vhost" % t.run_id
    try:
        t.amqp(virtual_host=vhost)
    except aex.NotAllowed as e:
        eq(e.reply_text, "NOT_ALLOWED - vhost %s not found" % vhost, "reply text")
        return
    raise AssertionError("connection.open to an unknown vhost succeeded")


@scenario("connection.tune_defaults", C)
def _(t):
    # py-amqp takes the server's proposal: RabbitMQ's 2047 / 131072 / 60.
    c, ch = setup(t, heartbeat=0)
    eq((c.channel_max, c.frame_max, c.server_heartbeat), (2047, 131072, 60), "channel_max, frame_max, heartbeat")
    q = ch.queue_declare("", exclusive=True).queue
    body = bytes(range(256)) * 1200  # 307200 bytes: three frames
    ch.basic_publish(msg(body), "", q)
    eq(ch.basic_get(q, no_ack=True).body, body, "body over several frames")


@scenario("heartbeat.pyamqp_heartbeat_tick", C, timeout=30)
def _(t):
    c, ch = setup(t, heartbeat=2)
    eq(c.heartbeat, 2, "negotiated heartbeat")
    end = time.monotonic() + 5
    while time.monotonic() < end:
        c.heartbeat_tick()
        try:
            c.drain_events(timeout=0.2)
        except socket.timeout:
            pass
    ch.queue_declare("", exclusive=True)


@scenario("channel.open_close", C, quick=True)
def _(t):
    c, ch = setup(t)
    check(ch.is_open, "channel should be open")
    ch.close()
    check(not ch.is_open, "channel should be closed")
    sync(c.channel())


@scenario("channel.flow_active", C)
def _(t):
    c, ch = setup(t)
    ch.flow(True)
    sync(ch)


@scenario("channel.error_leaves_other_channels", C)
def _(t):
    c, ch = setup(t)
    other = c.channel()
    q = queue(t, other)
    channel_error(NOT_FOUND, c, ch.queue_declare, t.name("missing"), passive=True)
    other.basic_publish(msg(b"still"), "", q)
    eq(other.basic_get(q, no_ack=True).body, b"still", "other channel works")


# ---------------------------------------------------------------- exchanges and routing

@scenario("exchange.declare_each_type", C, quick=True)
def _(t):
    c, ch = setup(t)
    for kind in ("direct", "fanout", "topic", "headers"):
        x = exchange(t, ch, kind)
        ch.exchange_declare(x, kind, passive=True)


@scenario("exchange.passive_missing_404", C)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, c, ch.exchange_declare, name, "direct", passive=True)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name, "reply text")


@scenario("exchange.redeclare_other_type_406", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    e = channel_error(PRECONDITION_FAILED, c, ch.exchange_declare, x, "fanout", auto_delete=False)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' in vhost '/': "
                     "received 'fanout' but current is 'direct'" % x, "reply text")


@scenario("exchange.unknown_type_503", C)
def _(t):
    c, ch = setup(t)
    name = t.track_exchange(t.name("x"))
    e = connection_error(COMMAND_INVALID, c, ch.exchange_declare, name, "bogus")
    eq(e.reply_text, "COMMAND_INVALID - unknown exchange type 'bogus'", "reply text")


@scenario("exchange.amq_prefix_reserved_403", C)
def _(t):
    c, ch = setup(t)
    name = t.track_exchange("amq." + t.name("x"))
    channel_error(ACCESS_REFUSED, c, ch.exchange_declare, name, "direct")


@scenario("exchange.delete", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    ch.exchange_delete(x)
    channel_error(NOT_FOUND, c, ch.exchange_declare, x, "direct", passive=True)


@scenario("exchange.delete_if_unused", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    bound_queue(t, ch, x, "k")
    e = channel_error(PRECONDITION_FAILED, c, ch.exchange_delete, x, if_unused=True)
    eq(e.reply_text, "PRECONDITION_FAILED - exchange '%s' in vhost '/' in use" % x, "reply text")


@scenario("routing.direct_exact_key", C, quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "a.b")
    for k in ("a.b", "a", "A.B", "a.*", "#"):
        ch.basic_publish(msg(k.encode()), x, k)
    sync(ch)
    eq(bodies(ch, q), ["a.b"], "routed bodies")


@scenario("routing.fanout_ignores_key", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    q1, q2 = bound_queue(t, ch, x, "whatever"), bound_queue(t, ch, x, "")
    ch.basic_publish(msg(b"1"), x, "k1")
    sync(ch)
    eq(bodies(ch, q1), ["1"], "queue 1")
    eq(bodies(ch, q2), ["1"], "queue 2")


@scenario("routing.topic_pattern_table", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    queues = {p: bound_queue(t, ch, x, p) for p in TOPIC_TABLE}
    for k in KEYS:
        ch.basic_publish(msg(k.encode()), x, k)
    sync(ch)
    for p, expected in TOPIC_TABLE.items():
        eq(bodies(ch, queues[p]), expected, "keys matched by pattern %r" % p)


@scenario("routing.headers_match_table", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "headers")
    queues = {}
    for name, args in HEADER_BINDINGS.items():
        queues[name] = queue(t, ch)
        ch.queue_bind(queues[name], x, "", arguments=args)
    for name, headers in HEADER_MESSAGES.items():
        props = {} if headers is None else {"application_headers": headers}
        ch.basic_publish(msg(name.encode(), **props), x, "ignored")
    sync(ch)
    for name, expected in HEADER_EXPECTED.items():
        eq(bodies(ch, queues[name]), expected, "binding %s" % name)


@scenario("routing.e2e_bind_routes_through", C)
def _(t):
    c, ch = setup(t)
    src, dst = exchange(t, ch, "direct"), exchange(t, ch, "fanout")
    q = bound_queue(t, ch, dst)
    ch.exchange_bind(dst, src, "k")
    ch.basic_publish(msg(b"through"), src, "k")
    ch.basic_publish(msg(b"not"), src, "other")
    sync(ch)
    eq(bodies(ch, q), ["through"], "routed through the e2e binding")
    ch.exchange_unbind(dst, src, "k")
    ch.basic_publish(msg(b"after"), src, "k")
    sync(ch)
    eq(bodies(ch, q), [], "routed after e2e unbind")


@scenario("routing.default_exchange_by_queue_name", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish(msg(b"d"), "", q)
    ch.basic_publish(msg(b"lost"), "", q + ".nope")
    sync(ch)
    eq(bodies(ch, q), ["d"], "routed by queue name")


@scenario("routing.publish_to_missing_exchange_404", C)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    ch.basic_publish(msg(b"x"), name, "k")
    e = channel_error(NOT_FOUND, c, sync, ch)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name, "reply text")


# ---------------------------------------------------------------- queues

@scenario("queue.server_named", C)
def _(t):
    c, ch = setup(t)
    ok = ch.queue_declare("", exclusive=True)
    check(ok.queue.startswith("amq.gen-"), "queue %r" % ok.queue)
    eq((ok.message_count, ok.consumer_count), (0, 0), "counts")


@scenario("queue.passive_missing_404", C, quick=True)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, c, ch.queue_declare, name, passive=True)
    eq(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name, "reply text")


@scenario("queue.redeclare_other_durable_406", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    e = channel_error(PRECONDITION_FAILED, c, ch.queue_declare, q, durable=True, auto_delete=False)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '%s' in vhost '/': "
                     "received 'true' but current is 'false'" % q, "reply text")


@scenario("queue.exclusive_other_connection_405", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, name=t.short_name(), exclusive=True)
    oc, och = setup(t)
    e = channel_error(RESOURCE_LOCKED, oc, och.queue_declare, q, passive=True)
    eq(e.reply_text, reply_text("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '%s' in vhost "
                                "'/'. It could be originally declared on another connection or the exclusive "
                                "property value does not match that of the original declaration." % q),
       "reply text")
    channel_error(RESOURCE_LOCKED, oc, oc.channel().basic_get, q)


@scenario("queue.bind_unbind", C)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "k")
    ch.basic_publish(msg(b"1"), x, "k")
    ch.queue_unbind(q, x, "k")
    ch.basic_publish(msg(b"2"), x, "k")
    sync(ch)
    eq(bodies(ch, q), ["1"], "routed before the unbind only")


@scenario("queue.purge", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(7):
        ch.basic_publish(msg(b"x"), "", q)
    sync(ch)
    eq(ch.queue_purge(q), 7, "purge-ok count")
    eq(count(ch, q), 0, "messages after purge")


@scenario("queue.delete", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(4):
        ch.basic_publish(msg(b"x"), "", q)
    sync(ch)
    eq(ch.queue_delete(q), 4, "delete-ok count")
    channel_error(NOT_FOUND, c, ch.queue_declare, q, passive=True)


@scenario("queue.delete_if_empty_406", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish(msg(b"x"), "", q)
    sync(ch)
    e = channel_error(PRECONDITION_FAILED, c, ch.queue_delete, q, if_empty=True)
    eq(e.reply_text, "PRECONDITION_FAILED - queue '%s' in vhost '/' not empty" % q, "reply text")


@scenario("queue.auto_delete_last_consumer_cancel", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, auto_delete=True)
    tag = ch.basic_consume(q, callback=lambda m: None)
    ch.basic_cancel(tag)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            c.channel().queue_declare(q, passive=True)
        except aex.NotFound:
            return
        time.sleep(0.05)
    raise AssertionError("auto-delete queue survived its last consumer")


# ---------------------------------------------------------------- basic

@scenario("basic.publish_get", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for b in (b"1", b"2", b"3"):
        ch.basic_publish(msg(b), "", q)
    m = ch.basic_get(q, no_ack=True)
    d = m.delivery_info
    eq((d["delivery_tag"], d["redelivered"], d["exchange"], d["routing_key"], d["message_count"], m.body),
       (1, False, "", q, 2, b"1"), "get-ok fields")
    get_all(ch, q)
    eq(ch.basic_get(q), None, "get-empty")


@scenario("basic.consume_deliver", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    got = []
    tag = ch.basic_consume(q, consumer_tag="my-tag", no_ack=True, callback=got.append)
    eq(tag, "my-tag", "consume-ok tag")
    ch.basic_publish(msg(b"x"), "", q)
    check(wait_for(c, lambda: got), "no delivery")
    d = got[0].delivery_info
    eq((d["consumer_tag"], d["exchange"], d["routing_key"], d["redelivered"], d["delivery_tag"]),
       ("my-tag", "", q, False, 1), "deliver fields")


@scenario("basic.mandatory_unroutable_returned", C)
def _(t):
    c, ch = setup(t)
    returned = []
    ch.events["basic_return"].add(lambda exc, exchange_, key, m: returned.append((exc, exchange_, key, m)))
    x = exchange(t, ch, "direct")
    ch.basic_publish(msg(b"ret", message_id="r1"), x, "nowhere", mandatory=True)
    check(wait_for(c, lambda: returned), "no basic.return")
    exc, x_, key, m = returned[0]
    eq((exc.reply_code, exc.reply_text, x_, key), (NO_ROUTE, "NO_ROUTE", x, "nowhere"), "return fields")
    eq((m.body, m.properties.get("message_id")), (b"ret", "r1"), "returned content")


@scenario("basic.user_id_checked", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish(msg(b"bad", user_id="bob"), "", q)
    e = channel_error(PRECONDITION_FAILED, c, sync, ch)
    eq(e.reply_text, "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated user was '%s'"
       % t.broker.user, "reply text")


@scenario("basic.direct_reply_to", C)
def _(t):
    c, ch = setup(t)
    replies = []
    ch.basic_consume("amq.rabbitmq.reply-to", no_ack=True, callback=replies.append)
    server = c.channel()
    q = queue(t, server)
    ch.basic_publish(msg(b"request", reply_to="amq.rabbitmq.reply-to"), "", q)
    sync(ch)
    m = server.basic_get(q, no_ack=True)
    reply_to = m.properties["reply_to"]
    check(reply_to.startswith("amq.rabbitmq.reply-to."), "reply_to %r" % reply_to)
    server.basic_publish(msg(b"response"), "", reply_to)
    check(wait_for(c, lambda: replies), "no reply")
    eq(replies[0].body, b"response", "reply")


@scenario("basic.recover_requeue", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish(msg(b"g"), "", q)
    sync(ch)
    ch.basic_get(q)
    ch.basic_recover(requeue=True)
    m = ch.basic_get(q, no_ack=True)
    eq((m.body, m.delivery_info["redelivered"]), (b"g", True), "redelivered after recover")


# ---------------------------------------------------------------- properties / content

@scenario("properties.all_fourteen_round_trip", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    props = dict(content_type="text/plain", content_encoding="binary", application_headers={"h": "v", "n": 1},
                 delivery_mode=2, priority=5, correlation_id="c-1", reply_to="r-1", expiration="60000",
                 message_id="m-1", timestamp=1700000000, type="t-1", user_id=t.broker.user, app_id="a-1",
                 cluster_id="cl-1")
    ch.basic_publish(msg(b"payload", **props), "", q)
    m = ch.basic_get(q, no_ack=True)
    for k, v in props.items():
        got = m.properties.get(k)
        if k == "timestamp" and hasattr(got, "timestamp"):
            got = int(got.timestamp())
        eq(got, v, "property %s" % k)


@scenario("properties.header_field_types", C)
def _(t):
    import datetime
    import decimal
    c, ch = setup(t)
    q = queue(t, ch)
    headers = {"str": "s", "int": 42, "neg": -7, "big": 2 ** 40, "bool_t": True, "bool_f": False, "none": None,
               "float": 1.5, "dec": decimal.Decimal("3.14"), "list": [1, "a", [2], {"x": 1}],
               "table": {"nested": {"deep": "yes"}}, "ts": datetime.datetime(2024, 1, 2, 3, 4, 5)}
    ch.basic_publish(msg(b"h", application_headers=headers), "", q)
    got = ch.basic_get(q, no_ack=True).properties["application_headers"]
    for k, v in headers.items():
        eq(got.get(k, "<missing>"), v, "header %r" % k)


@scenario("content.empty_body", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish(msg(b""), "", q)
    m = ch.basic_get(q, no_ack=True)
    check(m is not None and m.body in (b"", ""), "empty body: got %r" % (m and m.body,))


@scenario("content.1mib_body_consume", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    body = bytes(range(256)) * 4096
    ch.basic_publish(msg(body), "", q)
    got = []
    ch.basic_consume(q, no_ack=True, callback=got.append)
    check(wait_for(c, lambda: got, timeout=15), "no delivery")
    check(got[0].body == body, "body differs")


@scenario("content.frame_boundaries", C)
def _(t):
    c, ch = setup(t, frame_max=4096)
    q = queue(t, ch)
    sizes = [4087, 4088, 4089, 8176, 8177]
    for n in sizes:
        ch.basic_publish(msg(bytes([n & 0xFF]) * n), "", q)
    got = get_all(ch, q)
    eq([len(m.body) for m in got], sizes, "body sizes")


# ---------------------------------------------------------------- consumers, qos, acks

@scenario("consumer.cancel_stops_deliveries", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    got = []
    tag = ch.basic_consume(q, no_ack=True, callback=got.append)
    ch.basic_publish(msg(b"1"), "", q)
    check(wait_for(c, lambda: got), "no delivery")
    ch.basic_cancel(tag)
    ch.basic_publish(msg(b"2"), "", q)
    sync(ch)
    drain(c, 0.2)
    eq([m.body for m in got], [b"1"], "deliveries")
    eq(count(ch, q), 1, "message left")


@scenario("consumer.server_cancel_on_queue_delete", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    cancelled = []
    tag = ch.basic_consume(q, callback=lambda m: None, on_cancel=cancelled.append)
    c.channel().queue_delete(q)
    check(wait_for(c, lambda: cancelled), "no basic.cancel from the broker")
    eq(cancelled, [tag], "cancelled tags")


@scenario("consumer.exclusive_conflicts_403", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    c.channel().basic_consume(q, callback=lambda m: None)
    e = channel_error(ACCESS_REFUSED, c, ch.basic_consume, q, exclusive=True, callback=lambda m: None)
    eq(e.reply_text, "ACCESS_REFUSED - queue '%s' in vhost '/' in exclusive use" % q, "reply text")


@scenario("qos.prefetch_count", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(10):
        ch.basic_publish(msg(str(i).encode()), "", q)
    sync(ch)
    ch.basic_qos(0, 2, False)
    got = []
    ch.basic_consume(q, callback=got.append)
    drain(c, 0.3)
    eq(len(got), 2, "deliveries with prefetch 2")
    ch.basic_ack(got[0].delivery_tag)
    drain(c, 0.3)
    eq(len(got), 3, "deliveries after one ack")


@scenario("qos.prefetch_size_540", C)
def _(t):
    c, ch = setup(t)
    e = connection_error(NOT_IMPLEMENTED, c, ch.basic_qos, 10, 0, False)
    eq(e.reply_text, "NOT_IMPLEMENTED - prefetch_size!=0 (10)", "reply text")


def ack_setup(t):
    c, ch = setup(t)
    q = queue(t, ch)
    for i in range(1, 6):
        ch.basic_publish(msg(str(i).encode()), "", q)
    sync(ch)
    return c, ch, q


@scenario("ack.single", C, quick=True)
def _(t):
    c, ch, q = ack_setup(t)
    m = ch.basic_get(q)
    ch.basic_ack(m.delivery_tag)
    ch.close()
    eq(count(c.channel(), q), 4, "messages left")


@scenario("ack.unknown_tag_406", C)
def _(t):
    c, ch, q = ack_setup(t)
    ch.basic_ack(99)
    e = channel_error(PRECONDITION_FAILED, c, sync, ch)
    eq(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 99", "reply text")


@scenario("ack.reject_requeue_to_head", C)
def _(t):
    c, ch, q = ack_setup(t)
    m = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=True)
    m2 = ch.basic_get(q, no_ack=True)
    eq((m2.body, m2.delivery_info["redelivered"]), (b"1", True), "first after requeue")


@scenario("ack.reject_discard", C)
def _(t):
    c, ch, q = ack_setup(t)
    m = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    sync(ch)
    eq(count(ch, q), 4, "messages left")


@scenario("ack.channel_close_requeues", C)
def _(t):
    c, ch, q = ack_setup(t)
    ch2 = c.channel()
    ch2.basic_get(q)
    ch2.basic_get(q)
    ch2.close()
    deadline = time.monotonic() + 5
    while count(ch, q) != 5 and time.monotonic() < deadline:
        time.sleep(0.02)
    eq([(m.delivery_info["redelivered"], m.body) for m in get_all(ch, q)],
       [(True, b"1"), (True, b"2"), (False, b"3"), (False, b"4"), (False, b"5")], "order and flags")


# ---------------------------------------------------------------- confirm / tx

@scenario("confirm.publish_acked", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    acks = []
    ch.events["basic_ack"].add(lambda tag, multiple: acks.append((tag, multiple)))
    ch.confirm_select()
    for _ in range(10):
        ch.basic_publish(msg(b"m"), "", q)
    check(wait_for(c, lambda: acks and acks[-1][0] == 10), "acks %r" % acks)
    covered, last = set(), 0
    for tag, multiple in acks:
        covered.update(range(last + 1 if multiple else tag, tag + 1))
        last = tag
    eq(covered, set(range(1, 11)), "confirmed tags")


@scenario("confirm.reject_publish_nacked", C)
def _(t):
    c, ch = setup(t, confirm_publish=True)
    q = queue(t, ch, arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
    ch.basic_publish(msg(b"first"), "", q)
    try:
        ch.basic_publish(msg(b"second"), "", q)
    except aex.MessageNacked:
        return
    raise AssertionError("no nack when the queue rejects the publish")


@scenario("confirm.unroutable_mandatory_returned", C)
def _(t):
    c, ch = setup(t, confirm_publish=True)
    returned = []
    ch.events["basic_return"].add(lambda exc, x, k, m: returned.append(exc.reply_code))
    ch.basic_publish(msg(b"m"), "", t.name("missing"), mandatory=True)  # waits for the ack
    eq(returned, [NO_ROUTE], "returns seen before the ack")


@scenario("tx.commit_publishes", C, quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    tx = c.channel()
    tx.tx_select()
    for i in range(3):
        tx.basic_publish(msg(str(i).encode()), "", q)
    sync(tx)
    eq(count(ch, q), 0, "messages before commit")
    tx.tx_commit()
    eq(bodies(ch, q), ["0", "1", "2"], "messages after commit")


@scenario("tx.rollback_discards_publishes", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    tx = c.channel()
    tx.tx_select()
    tx.basic_publish(msg(b"gone"), "", q)
    tx.tx_rollback()
    tx.basic_publish(msg(b"kept"), "", q)
    tx.tx_commit()
    eq(bodies(ch, q), ["kept"], "messages")


@scenario("tx.commit_without_select_406", C)
def _(t):
    c, ch = setup(t)
    e = channel_error(PRECONDITION_FAILED, c, ch.tx_commit)
    eq(e.reply_text, "PRECONDITION_FAILED - channel is not transactional", "reply text")


# ---------------------------------------------------------------- extensions

@scenario("extensions.queue_message_ttl", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-message-ttl": 100})
    ch.basic_publish(msg(b"x"), "", q)
    time.sleep(0.4)
    eq(count(ch, q), 0, "messages after the TTL")


@scenario("extensions.dead_letter_on_reject", C)
def _(t):
    c, ch = setup(t)
    dlx = exchange(t, ch, "fanout")
    dlq = bound_queue(t, ch, dlx)
    q = queue(t, ch, arguments={"x-dead-letter-exchange": dlx})
    ch.basic_publish(msg(b"dead"), "", q)
    sync(ch)
    m = ch.basic_get(q)
    ch.basic_reject(m.delivery_tag, requeue=False)
    deadline = time.monotonic() + 5
    while count(ch, dlq) != 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    m = ch.basic_get(dlq, no_ack=True)
    check(m is not None, "dead letter not routed")
    death = m.properties["application_headers"]["x-death"][0]
    eq((death["queue"], death["reason"], death["count"]), (q, "rejected", 1), "x-death")


@scenario("extensions.priority_queue", C)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch, arguments={"x-max-priority": 10})
    for p in (1, 5, 10, 0):
        ch.basic_publish(msg(str(p).encode(), priority=p), "", q)
    sync(ch)
    eq(bodies(ch, q), ["10", "5", "1", "0"], "delivery order")


@scenario("extensions.alternate_exchange", C)
def _(t):
    c, ch = setup(t)
    ae = exchange(t, ch, "fanout")
    aq = bound_queue(t, ch, ae)
    x = exchange(t, ch, "direct", arguments={"alternate-exchange": ae})
    q = bound_queue(t, ch, x, "k")
    ch.basic_publish(msg(b"routed"), x, "k")
    ch.basic_publish(msg(b"unrouted"), x, "other")
    sync(ch)
    eq(bodies(ch, q), ["routed"], "main queue")
    eq(bodies(ch, aq), ["unrouted"], "alternate queue")


# ---------------------------------------------------------------- durability (restarts the broker)

@scenario("durability.confirmed_messages_survive_restart", C, restart=True)
def _(t):
    # Unlike pika's blocking channel, py-amqp lets the publishes pipeline:
    # 1000 in flight, confirmed by (multiple) acks as the broker syncs them.
    c, ch = setup(t)
    q = queue(t, ch, durable=True)
    acks, nacks = [], []
    ch.events["basic_ack"].add(lambda tag, multiple: acks.append((tag, multiple)))
    ch.events["basic_nack"].add(lambda tag, multiple: nacks.append(tag))
    ch.confirm_select()
    n = 1000
    for i in range(n):
        ch.basic_publish(msg(b"%d" % i, delivery_mode=2), "", q)
    check(wait_for(c, lambda: nacks or (acks and acks[-1][0] == n), timeout=30), "acks up to %r of %d"
          % (acks[-1:] or None, n))
    eq(nacks, [], "nacked tags")
    covered, last = set(), 0
    for tag, multiple in acks:
        covered.update(range(last + 1 if multiple else tag, tag + 1))
        last = max(last, tag)
    eq(covered, set(range(1, n + 1)), "confirmed tags")
    t.restart()

    c, ch = setup(t)
    eq(count(ch, q), n, "queue.declare-ok message_count after the restart")
    got = []
    ch.basic_qos(0, 100, False)
    ch.basic_consume(q, callback=lambda m: (got.append(m), ch.basic_ack(m.delivery_tag)))
    check(wait_for(c, lambda: len(got) >= n, timeout=30), "consumed %d of %d" % (len(got), n))
    eq([m.body for m in got], [b"%d" % i for i in range(n)], "bodies in publish order")
    check(not any(m.delivery_info["redelivered"] for m in got), "a never-delivered message came back redelivered")
