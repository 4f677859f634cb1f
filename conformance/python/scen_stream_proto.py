"""RabbitMQ's stream protocol (the rabbitmq_stream plugin's, port 5552 by
default; CONF_STREAM gives host:port), raw frames through the tests' client
(tests/integration/py/streamraw.py): the handshake, streams, publishers
with deduplication and confirms, subscriptions, offsets, and a stream used
from both protocols. Codes recorded from RabbitMQ 3.10.8; super streams are
3.11+'s (warren_only here)."""
import os
import struct
import sys

from confkit import Fail, eq, check, scenario

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                                "integration", "py"))
import streamraw as sr  # noqa: E402


def connect(t):
    """A socket to the stream listener, closed when the scenario ends."""
    addr = os.environ.get("CONF_STREAM") or ""
    if not addr:
        raise Fail("no stream protocol listener given (CONF_STREAM is empty)")
    host, port = addr.rsplit(":", 1)
    c = sr.Client(int(port), host=host)
    t.defer(c.close_socket)
    return c


def client(t):
    c = connect(t)
    c.handshake()
    return c


def amqp10(body):
    return b"\x00\x53\x75\xb0" + struct.pack(">I", len(body)) + body


def new_stream(t, c):
    name = t.track_queue(t.name("s"))
    eq(c.create(name.encode()), sr.OK, "create")
    return name


def records(c, count):
    """Deliver frames until `count` records came: their data sections' bodies."""
    out = []
    while len(out) < count:
        _, chunk = c.deliver()
        out += [m[8:] for m in chunk["messages"]]  # past the data section's 8-byte head
    return out


@scenario("stream.proto_handshake", "raw", quick=True)
def _(t):
    c = connect(t)
    eq(c.peer_properties().code, sr.OK, "peer properties")
    code, mechanisms = c.sasl_handshake()
    check(code == sr.OK and "PLAIN" in mechanisms, "PLAIN among %r" % (mechanisms,))
    eq(c.authenticate("guest", "wrong"), sr.AUTHENTICATION_FAILURE, "a bad password")


@scenario("stream.proto_publish_subscribe", "raw", quick=True)
def _(t):
    c = client(t)
    name = new_stream(t, c)
    eq(c.declare_publisher(1, name.encode()), sr.OK, "declare publisher")
    c.publish(1, [(i, amqp10(b"m%d" % i)) for i in range(1, 4)])
    eq(sorted(i for _, i in c.confirms(3)), [1, 2, 3], "confirmed ids")
    eq(c.subscribe(1, name.encode(), sr.OFFSET_FIRST, credit=10), sr.OK, "subscribe")
    eq(records(c, 3), [b"m1", b"m2", b"m3"], "delivered")


@scenario("stream.proto_errors", "raw")
def _(t):
    c = client(t)
    name = new_stream(t, c)
    missing = t.name("missing").encode()
    eq(c.create(name.encode()), sr.STREAM_ALREADY_EXISTS, "create twice")
    eq(c.delete(missing), sr.STREAM_DOES_NOT_EXIST, "delete a missing stream")
    eq(c.metadata([missing.decode()])[1][missing.decode()][0], sr.STREAM_DOES_NOT_EXIST, "metadata")
    eq(c.declare_publisher(1, missing), sr.STREAM_DOES_NOT_EXIST, "publisher on a missing stream")
    c.publish(7, [(1, amqp10(b"x"))])
    f = c.expect(sr.PUBLISH_ERROR)
    eq((f.u8(0), f.u32(1), f.u64(5), f.u16(13)), (7, 1, 1, sr.PUBLISHER_DOES_NOT_EXIST), "PublishError")


@scenario("stream.proto_deduplication", "raw")
def _(t):
    c = client(t)
    name = new_stream(t, c)
    eq(c.declare_publisher(1, name.encode(), b"dedup-ref"), sr.OK, "declare publisher")
    c.publish(1, [(i, amqp10(b"m%d" % i)) for i in (1, 2, 3)])
    c.confirms(3)
    c.publish(1, [(i, amqp10(b"m%d" % i)) for i in (2, 3, 4, 5)])  # 2 and 3 again
    c.confirms(4)  # a duplicate is confirmed, not stored
    eq(c.query_publisher_sequence(b"dedup-ref", name.encode()), (sr.OK, 5), "publisher sequence")
    c.subscribe(1, name.encode(), sr.OFFSET_FIRST, credit=10)
    eq(records(c, 5), [b"m1", b"m2", b"m3", b"m4", b"m5"], "stored once each")


@scenario("stream.proto_offsets", "raw")
def _(t):
    c = client(t)
    name = new_stream(t, c)
    c.store_offset(b"reader-1", name.encode(), 42)
    eq(c.query_offset(b"reader-1", name.encode()), (sr.OK, 42), "stored offset")
    eq(c.query_offset(b"nobody", name.encode())[0], sr.NO_OFFSET, "an unknown reference")


@scenario("stream.proto_amqp_interop", "raw")
def _(t):
    """A stream declared over AMQP 0-9-1 is read over the stream protocol."""
    import pika
    conn = t.pika()
    ch = conn.channel()
    name = t.track_queue(t.name("s"))
    ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
    ch.confirm_delivery()
    ch.basic_publish("", name, b"from-amqp")
    c = client(t)
    eq(c.subscribe(1, name.encode(), sr.OFFSET_FIRST, credit=10), sr.OK, "subscribe")
    _, chunk = c.deliver()
    check(any(b"from-amqp" in m for m in chunk["messages"]), "the AMQP message in the chunk")


@scenario("stream.proto_super_streams", "raw", warren_only=True)
def _(t):
    c = client(t)
    name = t.name("ss").encode()
    parts = [name + b"-0", name + b"-1"]
    for p in parts:
        t.track_queue(p.decode())
    body = (sr.s16(name) + struct.pack(">I", 2) + b"".join(sr.s16(p) for p in parts) +
            struct.pack(">I", 2) + sr.s16(b"0") + sr.s16(b"1") + struct.pack(">I", 0))
    eq(c.request(0x1d, body).code, sr.OK, "create super stream")
    t.track_exchange(name.decode())
    f = c.request(sr.PARTITIONS, sr.s16(name))
    eq((f.u16(4), f.u32(6)), (sr.OK, 2), "partitions")
    f = c.request(sr.ROUTE, sr.s16(b"1") + sr.s16(name))
    eq((f.u16(4), f.u32(6)), (sr.OK, 1), "route")
    eq(c.request(0x1e, sr.s16(name)).code, sr.OK, "delete super stream")
