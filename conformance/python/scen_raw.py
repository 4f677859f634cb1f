"""raw: exact bytes on a plain socket -- bad protocol headers, garbage and
malformed frames, methods in the wrong state, plus the protocol corners no
client library can produce (AMQPLAIN, access.request, update-secret,
immediate, server-generated consumer tags, byte-exact properties). Every
expectation is RabbitMQ 3.10's answer; after each bad input a new client
must still be served."""
import socket
import struct
import time

import pika.frame
import pika.spec as S

import rawamqp as R
from confkit import (ACCESS_REFUSED, CHANNEL_ERROR, COMMAND_INVALID, FRAME_ERROR, INTERNAL_ERROR, NOT_ALLOWED,
                     NOT_IMPLEMENTED, NO_ROUTE, PRECONDITION_FAILED, UNEXPECTED_FRAME, alive, check, eq, queue,
                     scenario, sync)

NON_METHOD = "UNEXPECTED_FRAME - expected method frame, got non method frame instead"


def opened(t, **kw):
    r = t.raw()
    r.handshake(**kw)
    r.open_channel(1)
    return r


def publish_frame(t, channel=1):
    return R.method_bytes(channel, S.Basic.Publish(exchange="", routing_key=t.name("nowhere")))


def close_is(close, code_ids=None, text=None, text_start=None):
    if code_ids is not None:
        eq((close.class_id, close.method_id), code_ids, "connection.close class/method")
    if text is not None:
        eq(close.reply_text, text, "reply text")
    if text_start is not None:
        check(close.reply_text.startswith(text_start), "reply text %r should start with %r"
              % (close.reply_text, text_start))


# ---------------------------------------------------------------- protocol header

def bad_header(t, data):
    r = t.raw()
    r.send(data)
    eq(r.recv_until_closed(timeout=5), R.PROTOCOL_HEADER, "bytes the server sends back")
    alive(t)


@scenario("malformed.protocol_header_amqp_0_8", "raw", quick=True)
def _(t):
    bad_header(t, b"AMQP\x00\x00\x08\x00")


@scenario("malformed.protocol_header_wrong_revision", "raw")
def _(t):
    bad_header(t, b"AMQP\x00\x00\x09\x02")


@scenario("malformed.protocol_header_amqp_1_0", "raw")
def _(t):
    bad_header(t, b"AMQP\x00\x01\x00\x00")


@scenario("malformed.protocol_header_http", "raw", quick=True)
def _(t):
    bad_header(t, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")


@scenario("malformed.frame_instead_of_protocol_header", "raw")
def _(t):
    bad_header(t, R.raw_frame(R.FRAME_HEARTBEAT, 0, b""))


@scenario("malformed.garbage_instead_of_protocol_header", "raw")
def _(t):
    bad_header(t, bytes(range(200, 256)) * 4)


# ---------------------------------------------------------------- frames

@scenario("malformed.unknown_frame_type", "raw", quick=True)
def _(t):
    r = opened(t)
    r.send(b"\x63\x00\x00\x00\x00\x00\x00\xce")
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0), "FRAME_ERROR - type 99, all octets = <<>>: unknown_frame")
    alive(t)


@scenario("malformed.garbage_frames", "raw")
def _(t):
    r = opened(t)
    r.send(b"\xde\xad\xbe\xef" * 16)
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0))
    alive(t)


@scenario("malformed.bad_frame_end", "raw", quick=True)
def _(t):
    r = opened(t)
    r.send(R.raw_frame(R.FRAME_METHOD, 1, R.method_payload(S.Basic.Qos(prefetch_count=1)), end=0x00))
    close = r.expect_connection_close(FRAME_ERROR)
    close_is(close, (0, 0), text_start="FRAME_ERROR - type 1, all octets = ")
    check("invalid_frame_end_marker" in close.reply_text, "reply text %r" % close.reply_text)
    alive(t)


@scenario("malformed.frame_end_off_by_one", "raw")
def _(t):
    r = opened(t)
    r.send(R.raw_frame(R.FRAME_METHOD, 1, R.method_payload(S.Basic.Qos(prefetch_count=1)), end=0xCF))
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0))
    alive(t)


@scenario("malformed.oversize_frame", "raw", quick=True)
def _(t):
    r = opened(t, frame_max=4096)
    r.send(R.raw_frame(R.FRAME_METHOD, 1, b"\0" * 5000))
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0),
             "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,5000,4088}")
    alive(t)


@scenario("malformed.oversize_frame_header_only", "raw")
def _(t):
    # Only the 7-octet header of a 1 MB frame: refused before any payload.
    r = opened(t)
    r.send(struct.pack(">BHL", R.FRAME_METHOD, 0, 1000000))
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0),
             "FRAME_ERROR - type 1, all octets = <<>>: {frame_too_large,1000000,131064}")
    alive(t)


@scenario("malformed.body_frame_over_frame_max", "raw")
def _(t):
    r = opened(t, frame_max=4096)
    data = b"a" * 4097
    r.send(publish_frame(t) + pika.frame.Header(1, len(data), S.BasicProperties()).marshal() + R.body_bytes(1, data))
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0),
             "FRAME_ERROR - type 3, all octets = <<>>: {frame_too_large,4097,4088}")
    alive(t)


@scenario("content.body_frame_of_frame_max_accepted", "raw")
def _(t):
    # RabbitMQ compares the payload (not the whole frame) with frame_max.
    r = opened(t, frame_max=4096)
    for n in (4088, 4096):
        data = b"a" * n
        r.send(publish_frame(t) + pika.frame.Header(1, n, S.BasicProperties()).marshal() + R.body_bytes(1, data))
    r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
    r.close_cleanly()


@scenario("malformed.empty_method_frame", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 1, b"")
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0), "FRAME_ERROR - type 1, all octets = <<>>: unknown_frame")
    alive(t)


@scenario("malformed.truncated_method_ids", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 1, b"\x00\x3c")
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0),
             "FRAME_ERROR - type 1, all octets = <<0,60>>: unknown_frame")
    alive(t)


@scenario("malformed.heartbeat_with_payload", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_HEARTBEAT, 0, b"xx")
    close_is(r.expect_connection_close(FRAME_ERROR), (0, 0),
             'FRAME_ERROR - type 8, all octets = <<"xx">>: unknown_frame')
    alive(t)


@scenario("malformed.heartbeat_on_channel_one", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_HEARTBEAT, 1, b"")
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), "UNEXPECTED_FRAME - type 8, all octets = <<>>")
    alive(t)


@scenario("malformed.frame_split_byte_by_byte_is_fine", "raw")
def _(t):
    r = opened(t)
    data = R.method_bytes(1, S.Basic.Qos(prefetch_count=3))
    for i in range(len(data)):
        r.send(data[i:i + 1])
        time.sleep(0.005)
    r.expect(S.Basic.QosOk, 1)
    r.close_cleanly()


# ---------------------------------------------------------------- content framing

@scenario("malformed.content_header_without_method", "raw", quick=True)
def _(t):
    r = opened(t)
    r.send(R.header_bytes(1, 5))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), NON_METHOD)
    alive(t)


@scenario("malformed.body_without_header", "raw", quick=True)
def _(t):
    r = opened(t)
    r.send(R.body_bytes(1, b"hello"))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), NON_METHOD)
    alive(t)


@scenario("malformed.publish_then_method_instead_of_header", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.method_bytes(1, S.Basic.Qos(prefetch_count=1)))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (60, 40),
             "UNEXPECTED_FRAME - expected content header for class 60, got non content header frame instead")
    alive(t)


@scenario("malformed.method_before_body_complete", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 10) + R.body_bytes(1, b"abc")
           + R.method_bytes(1, S.Basic.Qos(prefetch_count=1)))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (60, 40),
             "UNEXPECTED_FRAME - expected content body, got non content body frame instead")
    alive(t)


@scenario("malformed.body_larger_than_declared", "raw")
def _(t):
    # RabbitMQ does not check a body frame against the remaining size: it
    # keeps waiting for body, so the next method frame is the error.
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 3) + R.body_bytes(1, b"abcdef"))
    try:
        f = r.recv_method(timeout=0.5)
        raise AssertionError("unexpected %r after an oversized body" % (getattr(f, "method", f),))
    except socket.timeout:
        pass
    r.send_method(1, S.Basic.Qos(prefetch_count=1))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (60, 40),
             "UNEXPECTED_FRAME - expected content body, got non content body frame instead")
    alive(t)


@scenario("malformed.header_for_wrong_class", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 3, class_id=50))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (60, 40),
             "UNEXPECTED_FRAME - expected content header for class 60, got one for class 50 instead")
    alive(t)


@scenario("malformed.header_on_channel_zero", "raw")
def _(t):
    r = opened(t)
    r.send(R.header_bytes(0, 3))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), text_start="UNEXPECTED_FRAME - type 2, all octets = ")
    alive(t)


@scenario("malformed.body_on_other_channel", "raw")
def _(t):
    r = opened(t)
    r.open_channel(2)
    r.send(publish_frame(t) + R.body_bytes(2, b"abc"))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), NON_METHOD)
    alive(t)


@scenario("malformed.empty_body_frame_after_empty_content", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 0) + R.body_bytes(1, b""))
    close_is(r.expect_connection_close(UNEXPECTED_FRAME), (0, 0), NON_METHOD)
    alive(t)


@scenario("malformed.property_flags_continuation", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 0, props=b"\x00\x01\x00\x00"))
    close_is(r.expect_connection_close(INTERNAL_ERROR), (0, 0), "INTERNAL_ERROR")
    alive(t)


@scenario("malformed.truncated_properties", "raw")
def _(t):
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 0, props=b"\x80\x00\x05"))
    close_is(r.expect_connection_close(INTERNAL_ERROR), (0, 0), "INTERNAL_ERROR")
    alive(t)


@scenario("malformed.huge_declared_body_waits", "raw")
def _(t):
    # A header announcing a 1 TiB body: RabbitMQ waits for the body without
    # error (and must not try to allocate it); others are still served.
    r = opened(t)
    r.send(publish_frame(t) + R.header_bytes(1, 1 << 40))
    try:
        f = r.recv_method(timeout=1)
        raise AssertionError("unexpected frame %r" % (getattr(f, "method", f),))
    except socket.timeout:
        pass
    alive(t)


@scenario("content.interleaved_on_two_channels", "raw")
def _(t):
    r = opened(t)
    r.open_channel(2)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue

    def pub(ch):
        return R.method_bytes(ch, S.Basic.Publish(exchange="", routing_key=q))
    r.send(pub(1) + pub(2) + R.header_bytes(1, 2) + R.header_bytes(2, 2) + R.body_bytes(2, b"22")
           + R.body_bytes(1, b"11"))
    r.rpc(1, S.Basic.Qos(prefetch_count=0), S.Basic.QosOk)
    r.rpc(2, S.Basic.Qos(prefetch_count=0), S.Basic.QosOk)
    eq(r.rpc(1, S.Queue.Declare(queue=q, passive=True), S.Queue.DeclareOk).message_count, 2, "messages")
    r.close_cleanly()


# ---------------------------------------------------------------- method arguments

def declare_payload(t, payload):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 1, payload)
    return r


@scenario("malformed.truncated_shortstr", "raw", quick=True)
def _(t):
    r = declare_payload(t, struct.pack(">HH", 50, 10) + b"\x00\x00\x50abc")
    close_is(r.expect_connection_close(FRAME_ERROR), (50, 10), "FRAME_ERROR - cannot decode <<0,0,80,97,98,99>>")
    alive(t)


@scenario("malformed.truncated_table", "raw")
def _(t):
    r = declare_payload(t, R.method_payload(S.Queue.Declare(queue="a"))[:-4])
    close_is(r.expect_connection_close(FRAME_ERROR), (50, 10), "FRAME_ERROR - cannot decode <<0,0,1,97,0>>")
    alive(t)


@scenario("malformed.table_length_past_end", "raw")
def _(t):
    r = declare_payload(t, R.method_payload(S.Queue.Declare(queue="a"))[:-4] + struct.pack(">I", 1000) + b"\x01aSx")
    close_is(r.expect_connection_close(FRAME_ERROR), (50, 10), text_start="FRAME_ERROR - cannot decode ")
    alive(t)


@scenario("malformed.trailing_bytes_after_arguments", "raw")
def _(t):
    r = declare_payload(t, R.method_payload(S.Queue.Declare(queue="a")) + b"junkjunk")
    close_is(r.expect_connection_close(FRAME_ERROR), (50, 10), text_start="FRAME_ERROR - cannot decode ")
    alive(t)


@scenario("malformed.unknown_field_type_in_table", "raw")
def _(t):
    # RabbitMQ's table decoder fails hard: a bare TCP close.
    payload = (R.method_payload(S.Queue.Declare(queue=t.name("q"), exclusive=True))[:-4]
               + struct.pack(">I", 3) + b"\x01aZ")
    r = declare_payload(t, payload)
    r.expect_silent_close()
    alive(t)


@scenario("malformed.truncated_start_ok", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send_frame(R.FRAME_METHOD, 0, b"\x00\x0a\x00\x0b\x00")
    r.expect_silent_close()
    alive(t)


@scenario("malformed.unknown_method_id", "raw", quick=True)
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 1, struct.pack(">HH", 60, 999))
    r.expect_silent_close()
    alive(t)


@scenario("malformed.unknown_class_id", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 1, struct.pack(">HH", 999, 10))
    r.expect_silent_close()
    alive(t)


# ---------------------------------------------------------------- methods in the wrong state

def state_error(t, send, code, ids=None, text=None, channels=(1,)):
    r = t.raw()
    r.handshake()
    for n in channels:
        r.open_channel(n)
    send(r)
    close = r.expect_connection_close(code)
    close_is(close, ids, text)
    alive(t)


def chan_close(code=200, text="", class_id=0, method_id=0):
    return S.Channel.Close(reply_code=code, reply_text=text, class_id=class_id, method_id=method_id)


@scenario("errors.method_on_unopened_channel_504", "raw", quick=True)
def _(t):
    state_error(t, lambda r: r.send_method(5, S.Basic.Qos(prefetch_count=1)), CHANNEL_ERROR, (60, 10),
                "CHANNEL_ERROR - expected 'channel.open'")


@scenario("errors.publish_on_unopened_channel_504", "raw")
def _(t):
    state_error(t, lambda r: r.publish(2, "", "q", b"body"), CHANNEL_ERROR, (60, 40),
                "CHANNEL_ERROR - expected 'channel.open'")


@scenario("errors.close_on_unopened_channel_504", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(3, chan_close()), CHANNEL_ERROR, (20, 40))


@scenario("errors.second_channel_open_504", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(1, S.Channel.Open()), CHANNEL_ERROR, (20, 10),
                "CHANNEL_ERROR - second 'channel.open' seen")


@scenario("errors.channel_method_on_channel_zero_504", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(0, S.Queue.Declare(queue="x")), CHANNEL_ERROR, (50, 10),
                "CHANNEL_ERROR - unexpected method in connection state running", channels=())


@scenario("errors.connection_open_twice_504", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(0, S.Connection.Open(virtual_host="/")), CHANNEL_ERROR, (10, 40),
                "CHANNEL_ERROR - unexpected method in connection state running")


@scenario("errors.unsolicited_close_ok_503", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(1, S.Channel.CloseOk()), COMMAND_INVALID, (20, 41),
                "COMMAND_INVALID - unimplemented method")


@scenario("errors.connection_method_on_channel_one_503", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(1, S.Connection.Open(virtual_host="/")), COMMAND_INVALID, (10, 40))


@scenario("errors.server_only_method_from_client_503", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(1, S.Queue.DeclareOk(queue="x", message_count=0, consumer_count=0)),
                COMMAND_INVALID, (50, 11))


@scenario("errors.channel_max_exceeded_530", "raw")
def _(t):
    r = t.raw()
    r.handshake(channel_max=2)
    r.open_channel(1)
    r.open_channel(2)
    r.rpc(1, chan_close(), S.Channel.CloseOk)
    r.open_channel(1)  # channel_max counts open channels
    r.send_method(3, S.Channel.Open())
    close = r.expect_connection_close(NOT_ALLOWED)
    close_is(close, (0, 0), "NOT_ALLOWED - number of channels opened (2) has reached the negotiated "
                            "channel_max (2)")
    alive(t)


@scenario("errors.flow_active_false_540", "raw")
def _(t):
    state_error(t, lambda r: r.send_method(1, S.Channel.Flow(active=False)), NOT_IMPLEMENTED, (20, 20),
                "NOT_IMPLEMENTED - active=false")


@scenario("errors.immediate_publish_540", "raw", quick=True)
def _(t):
    state_error(t, lambda r: r.publish(1, "", "anything", b"x", immediate=True), NOT_IMPLEMENTED, (60, 40),
                "NOT_IMPLEMENTED - immediate=true")


@scenario("errors.duplicate_consumer_tag_530", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="dup"), S.Basic.ConsumeOk)
    r.send_method(1, S.Basic.Consume(queue=q, consumer_tag="dup"))
    close_is(r.expect_connection_close(NOT_ALLOWED), (60, 20), "NOT_ALLOWED - attempt to reuse consumer tag 'dup'")
    alive(t)


@scenario("errors.methods_ignored_after_server_close", "raw")
def _(t):
    r = opened(t)
    r.publish(1, "", "x", b"x", immediate=True)
    close = r.recv_method()
    check(isinstance(close.method, S.Connection.Close), "expected connection.close, got %r" % (close,))
    r.send_method(1, S.Queue.Declare(queue="", exclusive=True))
    r.send_method(0, S.Connection.CloseOk())
    try:
        f = r.recv_method(timeout=5)
        raise AssertionError("frame after connection.close-ok: %r" % (f,))
    except R.Closed:
        pass
    alive(t)


@scenario("errors.channel_methods_dropped_until_close_ok", "raw")
def _(t):
    r = opened(t)
    r.send_method(1, S.Queue.Declare(queue=t.name("missing"), passive=True))
    r.send_method(1, S.Basic.Qos(prefetch_count=1))  # in flight: ignored
    r.expect_channel_close(1, 404)
    try:
        f = r.recv_method(timeout=0.5)
        raise AssertionError("reply to a method sent after the channel error: %r" % (f,))
    except socket.timeout:
        pass
    r.open_channel(1)
    r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
    r.close_cleanly()


@scenario("errors.long_reply_text_truncated", "raw")
def _(t):
    r = opened(t)
    name = ("conf.%s.raw.long." % t.run_id).ljust(255, "n")
    r.send_method(1, S.Queue.Declare(queue=name, passive=True))
    close = r.expect_channel_close(1, 404)
    want = ("NOT_FOUND - no queue '%s' in vhost '/'" % name)[:252] + "..."
    got = close.reply_text
    check(got == want, "reply text of %d octets ending %r, expected RabbitMQ's cut: 255 octets ending %r"
          % (len(got.encode()), got[-16:], want[-16:]))
    r.close_cleanly()


# ---------------------------------------------------------------- handshake

@scenario("connection.amqplain_login", "raw", quick=True)
def _(t):
    r = t.raw()
    r.handshake(mechanism="AMQPLAIN")
    r.open_channel(1)
    ok = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk)
    check(ok.queue.startswith("amq.gen-"), "queue %r" % ok.queue)
    r.close_cleanly()


@scenario("connection.start_offers_mechanisms_and_locale", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    start = r.expect(S.Connection.Start, 0)
    eq((start.version_major, start.version_minor), (0, 9), "version")
    eq(set(start.mechanisms.split()), {b"PLAIN", b"AMQPLAIN"}, "mechanisms")
    eq(start.locales, b"en_US", "locales")


@scenario("connection.bad_password_403_close", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send_method(0, S.Connection.StartOk(client_properties={"capabilities": {"authentication_failure_close": True}},
                                          mechanism="PLAIN", response=b"\0guest\0wrong-" + t.run_id.encode(),
                                          locale="en_US"))
    close = r.expect_connection_close(ACCESS_REFUSED)
    close_is(close, (0, 0), text_start="ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN")


@scenario("connection.bad_password_without_capability_just_closes", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send_method(0, S.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                          response=b"\0guest\0wrong-" + t.run_id.encode(), locale="en_US"))
    r.expect_silent_close()


HOLD = 3.0  # RabbitMQ's SILENT_CLOSE_DELAY


def held_silent(started):
    """[(client, time.monotonic() before its start-ok, what)]: each hears
    nothing more and is closed about HOLD s after its start-ok (not before
    HOLD - 0.5 s; within HOLD + 7 s on a busy machine)."""
    closed, sent = R.watch_closes([r for r, _, _ in started], HOLD + 7)
    for r, t0, what in started:
        eq(sent[r], b"", "%s: bytes sent while held" % what)
        check(closed[r] is not None, "%s: still open after %.0f s" % (what, HOLD + 7))
        check(closed[r] - t0 >= HOLD - 0.5,
              "%s: closed after %.2f s, expected a %.0f s hold" % (what, closed[r] - t0, HOLD))


@scenario("connection.refused_login_held_3s", "raw")
def _(t):
    """RabbitMQ holds a refused login 3 s (a brake on guessing): with
    authentication_failure_close the 403 comes at once, then silence until
    the socket closes; without it, silence only."""
    cap = {"capabilities": {"authentication_failure_close": True}}
    started = []
    for props in (cap, {}):
        r = t.raw()
        r.send(R.PROTOCOL_HEADER)
        r.expect(S.Connection.Start, 0)
        started.append((r, time.monotonic(), "with the capability" if props else "without it"))
        r.send_method(0, S.Connection.StartOk(client_properties=props, mechanism="PLAIN",
                                              response=b"\0guest\0wrong-" + t.run_id.encode(), locale="en_US"))
    close = started[0][0].expect(S.Connection.Close, 0, timeout=HOLD - 0.5)
    eq(close.reply_code, ACCESS_REFUSED, "reply code with the capability")
    held_silent(started)
    alive(t)


@scenario("connection.malformed_plain_response_held_silent", "raw")
def _(t):
    """A PLAIN response that is not exactly \\0user\\0pass is a syntax
    error, not a refused login: no 403 even with
    authentication_failure_close, and the 3 s hold (php-amqplib's
    plain_auth_passwordless_must_fail sends an empty one and expects its
    read to time out)."""
    started = []
    for response in (b"", b"guestguest", b"\0guest", b"guest\0guest\0guest"):
        r = t.raw()
        r.send(R.PROTOCOL_HEADER)
        r.expect(S.Connection.Start, 0)
        started.append((r, time.monotonic(), "response %r" % response))
        r.send_method(0, S.Connection.StartOk(client_properties={"capabilities": {"authentication_failure_close": True}},
                                              mechanism="PLAIN", response=response, locale="en_US"))
    held_silent(started)
    alive(t)


@scenario("connection.unknown_mechanism_closes", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send_method(0, S.Connection.StartOk(client_properties={}, mechanism="FOO", response=b"\0guest\0guest",
                                          locale="en_US"))
    r.expect_silent_close()
    alive(t)


@scenario("connection.unknown_vhost_530", "raw")
def _(t):
    r = t.raw()
    r.handshake(open_vhost=False)
    vhost = "conf-%s-no-such-vhost" % t.run_id
    r.send_method(0, S.Connection.Open(virtual_host=vhost))
    close_is(r.expect_connection_close(NOT_ALLOWED), (10, 40), "NOT_ALLOWED - vhost %s not found" % vhost)


@scenario("connection.method_before_start_ok_closes", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send_method(0, S.Connection.Open(virtual_host="/"))
    r.expect_silent_close()
    alive(t)


@scenario("connection.tune_ok_out_of_range_closes", "raw")
def _(t):
    for kw in ({"frame_max": 4095}, {"frame_max": 131073}, {"frame_max": 0}, {"channel_max": 3000}):
        r = t.raw()
        try:
            r.handshake(**kw)
        except R.Closed:
            continue
        raise AssertionError("tune-ok with %r was accepted" % kw)
    alive(t)


@scenario("connection.client_lowers_channel_max", "raw")
def _(t):
    r = t.raw()
    r.handshake(channel_max=5)
    for n in range(1, 6):
        r.open_channel(n)
    r.send_method(6, S.Channel.Open())
    close_is(r.expect_connection_close(NOT_ALLOWED), None,
             "NOT_ALLOWED - number of channels opened (5) has reached the negotiated channel_max (5)")


@scenario("connection.close_handshake", "raw", quick=True)
def _(t):
    r = opened(t)
    r.open_channel(2)
    r.send_method(0, S.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
    r.expect(S.Connection.CloseOk, 0)
    try:
        f = r.recv_frame(timeout=1)
        raise AssertionError("frame after close-ok: %r" % (f,))
    except (socket.timeout, R.Closed):
        pass


@scenario("connection.update_secret", "raw")
def _(t):
    r = opened(t)
    r.send_frame(R.FRAME_METHOD, 0, struct.pack(">HH", 10, 70) + R.longstr(t.broker.password.encode())
                 + R.shortstr(b"rotation"))
    f = r.recv_method()
    payload = getattr(f, "payload", None)
    eq((f.channel_number, payload), (0, struct.pack(">HH", 10, 71)), "connection.update-secret-ok")
    r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
    r.close_cleanly()


@scenario("connection.abrupt_tcp_close", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.close()
    alive(t)
    c = t.pika()
    from confkit import queue_gone
    check(queue_gone(c, q), "exclusive queue of an abruptly closed connection survived")


# ---------------------------------------------------------------- channel

@scenario("channel.open_close_raw", "raw")
def _(t):
    r = t.raw()
    r.handshake()
    ok = r.rpc(1, S.Channel.Open(), S.Channel.OpenOk)
    eq(ok.channel_id, b"", "channel.open-ok channel_id")
    r.rpc(1, chan_close(320, "client says bye", 60, 40), S.Channel.CloseOk)
    r.close_cleanly()


@scenario("channel.number_reuse_and_high_numbers", "raw")
def _(t):
    r = t.raw()
    r.handshake()
    for _ in range(3):
        r.open_channel(7)
        r.rpc(7, chan_close(), S.Channel.CloseOk)
    for n in (7, 1000, 2047):
        r.open_channel(n)
    r.rpc(2047, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
    r.close_cleanly()


@scenario("channel.access_request", "raw")
def _(t):
    r = opened(t)
    ok = r.rpc(1, S.Access.Request(realm="/data"), S.Access.RequestOk)
    eq(ok.ticket, 1, "access.request-ok ticket")
    r.close_cleanly()


# ---------------------------------------------------------------- heartbeats

@scenario("heartbeat.silent_client_disconnected", "raw", timeout=30)
def _(t):
    r = t.raw()
    r.handshake(heartbeat=1)
    t0 = time.monotonic()
    check(r.wait_closed(timeout=10), "silent client not disconnected within 10 s")
    check(time.monotonic() - t0 >= 1.0, "disconnected before one heartbeat interval")


@scenario("heartbeat.server_sends_heartbeats", "raw", timeout=30)
def _(t):
    r = t.raw()
    r.handshake(heartbeat=1)
    seen = 0
    end = time.monotonic() + 5
    while time.monotonic() < end and seen < 2:
        r.send(R.raw_frame(R.FRAME_HEARTBEAT, 0, b""))
        try:
            f = r.recv_frame(timeout=0.3)
        except socket.timeout:
            continue
        check(isinstance(f, pika.frame.Heartbeat) and f.channel_number == 0, "expected a heartbeat, got %r" % (f,))
        seen += 1
    check(seen >= 2, "saw %d server heartbeats in 5 s" % seen)


@scenario("heartbeat.client_heartbeats_keep_connection", "raw", timeout=30)
def _(t):
    r = opened(t, heartbeat=1)
    end = time.monotonic() + 3.5
    while time.monotonic() < end:
        r.send(R.raw_frame(R.FRAME_HEARTBEAT, 0, b""))
        time.sleep(0.3)
    r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk)
    r.close_cleanly()


@scenario("heartbeat.zero_disables", "raw", timeout=30)
def _(t):
    r = t.raw()
    r.handshake(heartbeat=0)
    check(not r.wait_closed(timeout=3), "client with heartbeat 0 was disconnected")
    r.open_channel(1)
    r.close_cleanly()


@scenario("heartbeat.before_start_ok_ignored", "raw")
def _(t):
    r = t.raw()
    r.send(R.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    r.send(R.raw_frame(R.FRAME_HEARTBEAT, 0, b""))
    try:
        f = r.recv_method(timeout=1)
        raise AssertionError("unexpected %r" % (f,))
    except socket.timeout:
        pass


# ---------------------------------------------------------------- basic corners

@scenario("consumer.server_generated_tags", "raw", quick=True)
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    t1 = r.rpc(1, S.Basic.Consume(queue=q), S.Basic.ConsumeOk).consumer_tag
    t2 = r.rpc(1, S.Basic.Consume(queue=q), S.Basic.ConsumeOk).consumer_tag
    check(t1.startswith("amq.ctag-") and t2.startswith("amq.ctag-"), "tags %r %r" % (t1, t2))
    check(t1 != t2, "tags should differ")
    r.close_cleanly()


@scenario("consumer.cancel_ok_echoes_unknown_tag", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="c1"), S.Basic.ConsumeOk)
    eq(r.rpc(1, S.Basic.Cancel(consumer_tag="c1"), S.Basic.CancelOk).consumer_tag, "c1", "cancel-ok tag")
    eq(r.rpc(1, S.Basic.Cancel(consumer_tag="nope"), S.Basic.CancelOk).consumer_tag, "nope", "unknown tag")
    r.close_cleanly()


@scenario("consumer.same_tag_on_other_channel", "raw")
def _(t):
    r = opened(t)
    r.open_channel(2)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
    r.rpc(2, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
    r.close_cleanly()


@scenario("consumer.nowait_consume", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.send_method(1, S.Basic.Consume(queue=q, consumer_tag="nw", no_ack=True, nowait=True))
    r.publish(1, "", q, b"hi")
    msg = r.recv_content()
    check(isinstance(msg.method, S.Basic.Deliver), "expected basic.deliver, got %r" % (msg.method,))
    eq((msg.method.consumer_tag, msg.body), ("nw", b"hi"), "delivery")
    r.close_cleanly()


@scenario("consumer.cancel_notify_needs_capability", "raw")
def _(t):
    # basic.cancel goes only to clients announcing consumer_cancel_notify.
    r = t.raw()
    r.handshake(client_properties={})
    r.open_channel(1)
    r.open_channel(2)
    q = t.track_queue(t.name("q"))
    r.rpc(1, S.Queue.Declare(queue=q), S.Queue.DeclareOk)
    r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
    r.rpc(2, S.Queue.Delete(queue=q), S.Queue.DeleteOk)
    r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)  # nothing arrived first
    r.close_cleanly()


@scenario("consumer.cancel_notify_raw", "raw")
def _(t):
    r = opened(t)
    r.open_channel(2)
    q = t.track_queue(t.name("q"))
    r.rpc(1, S.Queue.Declare(queue=q), S.Queue.DeclareOk)
    r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
    r.send_method(2, S.Queue.Delete(queue=q))
    seen = {}
    for _ in range(2):
        f = r.recv_method()
        seen[type(f.method)] = f
    check(S.Queue.DeleteOk in seen and S.Basic.Cancel in seen, "expected delete-ok and basic.cancel: %r" % seen)
    cancel = seen[S.Basic.Cancel]
    eq((cancel.channel_number, cancel.method.consumer_tag, cancel.method.nowait), (1, "t", True), "basic.cancel")
    r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
    r.close_cleanly()


@scenario("basic.get_empty_raw", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    empty = r.rpc(1, S.Basic.Get(queue=q), S.Basic.GetEmpty)
    eq(empty.cluster_id, "", "get-empty cluster_id")
    r.close_cleanly()


@scenario("basic.recover_async", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.publish(1, "", q, b"x")
    r.send_method(1, S.Basic.Get(queue=q))
    first = r.recv_content()
    r.send_method(1, S.Basic.RecoverAsync(requeue=True))  # no reply
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    again = r.recv_content()
    eq((again.body, again.method.redelivered, first.method.redelivered), (b"x", True, False), "redelivery")
    r.close_cleanly()


@scenario("basic.return_of_large_message", "raw")
def _(t):
    r = opened(t, frame_max=4096)
    body = b"r" * 10000
    r.publish(1, "", t.name("missing"), body, mandatory=True)
    msg = r.recv_content()
    check(isinstance(msg.method, S.Basic.Return), "expected basic.return, got %r" % (msg.method,))
    eq((msg.method.reply_code, msg.body), (NO_ROUTE, body), "return")
    r.close_cleanly()


@scenario("content.server_respects_frame_max", "raw", quick=True)
def _(t):
    r = opened(t, frame_max=4096)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    body = bytes((i * 7 + i // 256) & 0xFF for i in range(1 << 20))
    r.publish(1, "", q, body)
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    msg = r.recv_content(timeout=15)
    eq(msg.body_size, len(body), "body size in the header")
    check(msg.body == body, "body differs")
    check(all(len(f.fragment) <= 4088 for f in msg.body_frames), "a body frame exceeds frame_max")
    check(len(msg.body_frames) >= 257, "expected >= 257 body frames, got %d" % len(msg.body_frames))
    r.close_cleanly()


@scenario("content.body_in_one_byte_frames", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.publish(1, "", q, b"abcdefghij", frame_max=9)
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    eq(r.recv_content().body, b"abcdefghij", "reassembled body")
    r.close_cleanly()


@scenario("content.empty_body_no_body_frame", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.send(R.method_bytes(1, S.Basic.Publish(exchange="", routing_key=q))
           + pika.frame.Header(1, 0, S.BasicProperties(message_id="e")).marshal())
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    check(isinstance(r.recv_method().method, S.Basic.GetOk), "expected get-ok")
    hdr = r.recv_method()
    check(isinstance(hdr, pika.frame.Header), "expected a content header, got %r" % (hdr,))
    eq((hdr.body_size, hdr.properties.message_id), (0, "e"), "header")
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    check(isinstance(r.recv_method().method, S.Basic.GetEmpty), "a body frame followed an empty body")
    r.close_cleanly()


# ---------------------------------------------------------------- properties, byte for byte

@scenario("properties.all_fourteen_byte_exact", "raw", quick=True)
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    props = R.all_properties_bytes(t.broker.user)
    r.send(R.method_bytes(1, S.Basic.Publish(exchange="", routing_key=q))
           + R.raw_frame(R.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, 4) + props) + R.body_bytes(1, b"body"))
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    msg = r.recv_content()
    eq(msg.body, b"body", "body")
    eq(msg.prop_bytes, props, "property flags and values, byte for byte")
    r.close_cleanly()


@scenario("properties.field_types_through_headers_exchange", "raw")
def _(t):
    c = t.pika()
    ch = c.channel()
    from confkit import exchange
    x = exchange(t, ch, "headers")
    q = queue(t, ch)
    ch.queue_bind(q, x, "", arguments={"x-match": "all", "bool": True})
    props = struct.pack(">H", 0x2000) + R.all_types_table()
    r = opened(t)
    r.send(R.method_bytes(1, S.Basic.Publish(exchange=x, routing_key=""))
           + R.raw_frame(R.FRAME_HEADER, 1, struct.pack(">HHQ", 60, 0, 1) + props) + R.body_bytes(1, b"h"))
    r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
    msg = r.recv_content()
    eq(msg.prop_bytes, props, "headers table, byte for byte")
    r.close_cleanly()


@scenario("confirm.raw_sequence_and_multiple", "raw")
def _(t):
    c = t.pika()
    q = queue(t, c.channel())
    r = opened(t)
    r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
    r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)  # again: fine
    for _ in range(500):
        r.publish(1, "", q, b"m")
    confirmed, last, acks = set(), 0, 0
    while last < 500:
        f = r.recv_method(10)
        m = f.method
        check(isinstance(m, S.Basic.Ack), "expected basic.ack, got %r" % (m,))
        first = last + 1 if m.multiple else m.delivery_tag
        for tag in range(first, m.delivery_tag + 1):
            check(tag not in confirmed, "tag %d confirmed twice" % tag)
            confirmed.add(tag)
        check(m.delivery_tag > last, "confirms out of order")
        last = m.delivery_tag
        acks += 1
    eq(confirmed, set(range(1, 501)), "confirmed tags")
    r.close_cleanly()
    eq(sync(c.channel()), None, "")


@scenario("confirm.mandatory_return_before_ack", "raw")
def _(t):
    r = opened(t)
    r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
    r.publish(1, "", t.name("missing"), b"m", mandatory=True)
    ret = r.recv_content()
    check(isinstance(ret.method, S.Basic.Return), "expected basic.return first, got %r" % (ret.method,))
    eq((ret.method.reply_code, ret.body), (NO_ROUTE, b"m"), "return")
    ack = r.expect(S.Basic.Ack, 1)
    eq((ack.delivery_tag, ack.multiple), (1, False), "ack after the return")
    r.close_cleanly()


@scenario("confirm.publish_before_select_not_counted", "raw")
def _(t):
    r = opened(t)
    q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
    r.publish(1, "", q, b"before-1")
    r.publish(1, "", q, b"before-2")
    r.send_method(1, S.Confirm.Select(nowait=True))
    r.publish(1, "", q, b"after")
    ack = r.expect(S.Basic.Ack, 1)
    eq((ack.delivery_tag, ack.multiple), (1, False), "first confirm")
    eq(r.rpc(1, S.Queue.Declare(queue=q, passive=True), S.Queue.DeclareOk).message_count, 3, "messages")
    r.close_cleanly()


@scenario("tx.return_before_commit_ok", "raw")
def _(t):
    r = opened(t)
    r.rpc(1, S.Tx.Select(), S.Tx.SelectOk)
    r.publish(1, "", t.name("missing"), b"m", mandatory=True)
    r.send_method(1, S.Tx.Commit())
    ret = r.recv_content()
    check(isinstance(ret.method, S.Basic.Return), "expected basic.return before commit-ok, got %r" % (ret.method,))
    r.expect(S.Tx.CommitOk, 1)
    r.close_cleanly()


@scenario("tx.commit_without_select_names_method", "raw")
def _(t):
    r = opened(t)
    r.send_method(1, S.Tx.Commit())
    close = r.expect_channel_close(1, PRECONDITION_FAILED)
    eq((close.class_id, close.method_id), (90, 20), "channel.close class/method")
    r.close_cleanly()


@scenario("exchange.declare_nowait", "raw")
def _(t):
    r = opened(t)
    x = t.track_exchange(t.name("x"))
    r.send_method(1, S.Exchange.Declare(exchange=x, type="fanout", nowait=True))
    r.rpc(1, S.Exchange.Declare(exchange=x, type="fanout", passive=True), S.Exchange.DeclareOk)
    r.rpc(1, S.Exchange.Delete(exchange=x, nowait=False), S.Exchange.DeleteOk)
    r.close_cleanly()


@scenario("queue.declare_bind_nowait", "raw")
def _(t):
    r = opened(t)
    q = t.track_queue(t.name("q"))
    r.send_method(1, S.Queue.Declare(queue=q, nowait=True))
    r.send_method(1, S.Queue.Bind(queue=q, exchange="amq.fanout", nowait=True))
    r.publish(1, "amq.fanout", "", b"n")
    r.rpc(1, S.Queue.Unbind(queue=q, exchange="amq.fanout"), S.Queue.UnbindOk)
    eq(r.rpc(1, S.Queue.Declare(queue=q, passive=True), S.Queue.DeclareOk).message_count, 1, "messages")
    r.close_cleanly()
