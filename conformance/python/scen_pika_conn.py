"""pika: connection, channel and heartbeat scenarios."""
import time

from pika import exceptions as pex

from confkit import (NOT_FOUND, check, channel_error, drain, eq, queue, scenario, sync)

CAPABILITIES = {"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
                "connection.blocked", "consumer_priorities", "authentication_failure_close",
                "per_consumer_qos", "direct_reply_to"}


@scenario("connection.open_close", "pika", quick=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    check(q.startswith("amq.gen-"), "server-named queue %r should start with amq.gen-" % q)
    c.close()
    check(c.is_closed, "connection should be closed")


@scenario("connection.server_capabilities", "pika", quick=True)
def _(t):
    c = t.pika()
    props = c._impl.server_properties
    for key in ("product", "version", "platform", "copyright", "information", "cluster_name"):
        check(isinstance(props.get(key), (str, bytes)), "server property %r missing" % key)
    caps = props["capabilities"]
    eq(set(caps), CAPABILITIES, "server capabilities")
    check(all(v is True for v in caps.values()), "every capability should be true: %r" % caps)
    check(c.basic_nack_supported and c.consumer_cancel_notify_supported
          and c.exchange_exchange_bindings_supported and c.publisher_confirms_supported,
          "pika should see nack, cancel-notify, e2e bindings and confirms")


@scenario("connection.bad_password", "pika", quick=True)
def _(t):
    try:
        t.pika(password="wrong-password-" + t.run_id)
    except pex.ProbableAuthenticationError as e:
        check("403" in str(e) and "ACCESS_REFUSED" in str(e), "expected 403 ACCESS_REFUSED, got %s" % e)
        return
    raise AssertionError("login with a wrong password succeeded")


@scenario("connection.unknown_vhost", "pika")
def _(t):
    vhost = "conf-%s-no-such-vhost" % t.run_id
    try:
        t.pika(virtual_host=vhost)
    except pex.ProbableAccessDeniedError as e:
        check("530" in str(e), "expected 530 NOT_ALLOWED, got %s" % e)
        check("vhost %s not found" % vhost in str(e), "reply text should name the vhost: %s" % e)
        return
    raise AssertionError("connection.open to an unknown vhost succeeded")


@scenario("connection.frame_max_negotiated", "pika")
def _(t):
    c = t.pika(frame_max=8192)
    eq(c._impl.params.frame_max, 8192, "negotiated frame_max")
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    body = bytes(range(256)) * 400  # 102400 bytes: 13 frames of 8 KiB
    ch.basic_publish("", q, body)
    eq(ch.basic_get(q, auto_ack=True)[2], body, "body over small frames")


@scenario("connection.tune_defaults", "pika")
def _(t):
    seen = {}

    def hb(conn, server_value):
        seen["heartbeat"] = server_value
        return server_value
    c = t.pika(heartbeat=hb)
    eq(seen.get("heartbeat"), 60, "server-proposed heartbeat")
    eq((c._impl.params.channel_max, c._impl.params.frame_max), (2047, 131072), "channel_max, frame_max")


@scenario("connection.many_connections", "pika")
def _(t):
    conns = [t.pika() for _ in range(25)]
    for c in conns:
        c.channel().queue_declare("", exclusive=True)
    for c in conns:
        c.close()


@scenario("connection.close_with_open_channels", "pika")
def _(t):
    c = t.pika()
    chans = [c.channel() for _ in range(5)]
    c.close()
    check(c.is_closed and all(ch.is_closed for ch in chans), "connection and channels should be closed")


@scenario("connection.exclusive_queue_dies_with_connection", "pika")
def _(t):
    from confkit import queue_gone
    c = t.pika()
    q = c.channel().queue_declare("", exclusive=True).method.queue
    c.close()
    check(queue_gone(t.pika(), q), "exclusive queue %s still exists after its connection closed" % q)


@scenario("channel.open_close", "pika", quick=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    check(ch.is_open, "channel should be open")
    ch.close()
    check(ch.is_closed and c.is_open, "channel closed, connection open")


@scenario("channel.hundred_channels", "pika")
def _(t):
    c = t.pika()
    chans = [c.channel() for _ in range(100)]
    eq(len({ch.channel_number for ch in chans}), 100, "distinct channel numbers")
    for ch in chans:
        sync(ch)
    for ch in chans:
        ch.close()
    sync(c.channel())


@scenario("channel.flow_active", "pika")
def _(t):
    eq(t.pika().channel().flow(True), True, "channel.flow-ok active")


@scenario("channel.error_leaves_other_channels", "pika", quick=True)
def _(t):
    c = t.pika()
    ch = c.channel()
    q = queue(t, ch)
    other = c.channel()
    got = []
    other.basic_consume(q, lambda c_, m, p, b: got.append(b), auto_ack=True)
    channel_error(NOT_FOUND, ch.queue_declare, t.name("missing"), passive=True, conn=c)
    c.channel().basic_publish("", q, b"still here")
    from confkit import wait_for
    check(wait_for(c, lambda: got == [b"still here"]), "other channel's consumer got %r" % got)


@scenario("channel.reopen_after_error", "pika")
def _(t):
    c = t.pika()
    ch = c.channel()
    channel_error(NOT_FOUND, ch.queue_declare, t.name("missing"), passive=True)
    check(ch.is_closed, "channel closed by the broker")
    ch2 = c.channel()
    sync(ch2)
    ch2.close()


@scenario("channel.many_channels_many_queues", "pika")
def _(t):
    c = t.pika()
    chans = [c.channel() for _ in range(20)]
    qs = [queue(t, ch) for ch in chans]
    for i, (ch, q) in enumerate(zip(chans, qs)):
        ch.basic_publish("", q, str(i).encode())
    for i, (ch, q) in enumerate(zip(chans, qs)):
        eq(ch.basic_get(q, auto_ack=True)[2], str(i).encode(), "message on channel %d" % ch.channel_number)


@scenario("heartbeat.pika_keeps_connection", "pika", timeout=30)
def _(t):
    c = t.pika(heartbeat=1)
    drain(c, 3.5)
    check(c.is_open, "connection with 1 s heartbeats should stay open")
    c.channel().queue_declare("", exclusive=True)


@scenario("heartbeat.pika_disabled", "pika", timeout=30)
def _(t):
    c = t.pika(heartbeat=0)
    time.sleep(2.5)  # no I/O at all
    c.channel().queue_declare("", exclusive=True)


@scenario("heartbeat.pika_client_value_wins_when_lower", "pika", timeout=30)
def _(t):
    c = t.pika(heartbeat=5)
    eq(c._impl.params.heartbeat, 5, "negotiated heartbeat")
    drain(c, 1)
    check(c.is_open, "connection open")


@scenario("connection.blocked_callbacks_accepted", "pika")
def _(t):
    # Registering for connection.blocked needs the capability exchange to
    # have happened; the broker simply never blocks an idle client.
    c = t.pika()
    events = []
    c.add_on_connection_blocked_callback(lambda *a: events.append("blocked"))
    c.add_on_connection_unblocked_callback(lambda *a: events.append("unblocked"))
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"x")
    drain(c, 0.2)
    eq(events, [], "connection.blocked events on an idle broker")
