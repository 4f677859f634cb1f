#!/usr/bin/python3
"""Makes the seed corpora in tests/fuzz/corpus/<harness>/ from real traffic.

Starts Warren (WARREN_BIN, default build/asan/warren) as the integration
tests do (tests/integration/py/harness.py), puts a recording TCP proxy in
front of its AMQP and management listeners, and drives a client session
through them: pika (declare with arguments, bind, publish with every
property and a table of every field type -- rawamqp's all_types_table --,
get, consume, ack/nack/reject, qos, tx, confirms, errors) and HTTP requests
to the management API (lists with paging, filters and sorting, PUTs with
JSON bodies, definitions export). The recorded bytes are cut into seeds:

  frame      each connection's byte stream (both directions), after the
             protocol header, behind the harness's three control bytes
  conn       each client's stream whole, and after its handshake and first
             channel.open (which the harness then sends itself)
  method     every method frame's payload     header  every content header's
  table      every argument and header table the session sent (content only)
  http       every request head               json    every JSON body sent
  api        every request: as the control socket's administrator, as guest
             over TCP, and its raw bytes
  definitions  the exported definitions and etc/definitions.example.json
  config     etc/warren.conf and the settings the tests start Warren with
  list, pattern  the session's names and filters in the harnesses' formats

Usage: tests/fuzz/make_corpus.py   (rewrites tests/fuzz/corpus/)
"""
import base64
import decimal
import hashlib
import json
import os
import shutil
import socket
import struct
import sys
import threading
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration" / "py"))
os.environ.setdefault("WARREN_BIN", str(REPO / "build" / "asan" / "warren"))
import harness as h  # noqa: E402
import pika  # noqa: E402
import rawamqp  # noqa: E402

OUT = REPO / "tests" / "fuzz" / "corpus"


class Recorder:
    """A TCP proxy on 127.0.0.1:0 to target; keeps each connection's two
    byte streams."""

    def __init__(self, target_port):
        self.target = target_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.streams = []  # [client bytes, server bytes] per connection
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            pair = [bytearray(), bytearray()]
            self.streams.append(pair)
            threading.Thread(target=self._pump, args=(c, s, pair[0]), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, pair[1]), daemon=True).start()

    @staticmethod
    def _pump(src, dst, log):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                log += data
                dst.sendall(data)
        except OSError:
            pass
        for x in (src, dst):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def frames(stream):
    """The frames of a stream (after an optional protocol header)."""
    if stream.startswith(b"AMQP"):
        stream = stream[8:]
    off = 0
    while off + 8 <= len(stream):
        ftype, ch, size = struct.unpack(">BHI", stream[off:off + 7])
        if off + 8 + size > len(stream):
            break
        yield ftype, stream[off + 7:off + 7 + size]
        off += 8 + size


def amqp_session(port):
    params = pika.ConnectionParameters("127.0.0.1", port, credentials=pika.PlainCredentials("guest", "guest"),
                                       client_properties={"product": "fuzz-corpus", "nested": {"a": [1, "b", True]}})
    conn = pika.BlockingConnection(params)
    ch = conn.channel()
    ch.exchange_declare("fz.topic", "topic", durable=True, arguments={"alternate-exchange": "fz.alt"})
    ch.exchange_declare("fz.alt", "fanout")
    ch.exchange_declare("fz.headers", "headers", auto_delete=True)
    ch.queue_declare("fz.q1", durable=True, arguments={"x-message-ttl": 60000, "x-max-length": 100,
                                                        "x-dead-letter-exchange": "fz.alt",
                                                        "x-queue-mode": "lazy"})
    ch.queue_declare("fz.q2", arguments={"x-max-priority": 5, "x-overflow": "reject-publish"})
    ch.queue_bind("fz.q1", "fz.topic", "a.*.#")
    ch.queue_bind("fz.q2", "fz.headers", "", arguments={"x-match": "any", "k": "v", "n": 7})
    ch.basic_qos(prefetch_count=10)
    props = pika.BasicProperties(content_type="application/json", content_encoding="utf-8",
                                 headers={"h1": "v", "h2": 42, "h3": decimal.Decimal("1.5"), "h4": [1, 2, {"x": None}],
                                          "h5": True, "h6": {"deep": {"er": "x"}}},
                                 delivery_mode=2, priority=3, correlation_id="c1", reply_to="r",
                                 expiration="60000", message_id="m1", timestamp=1700000000,
                                 type="t", user_id="guest", app_id="fz", cluster_id="cl")
    for i in range(3):
        ch.basic_publish("fz.topic", "a.b.c", b"body %d" % i, props)
    ch.basic_publish("fz.headers", "", b"h", pika.BasicProperties(headers={"k": "v"}))
    ch.basic_publish("", "fz.q1", b"x" * 5000)
    m, _, _ = ch.basic_get("fz.q1")
    ch.basic_nack(m.delivery_tag, requeue=True)
    got = []
    tag = ch.basic_consume("fz.q1", lambda c, m, p, b: got.append(m.delivery_tag))
    conn.process_data_events(time_limit=0.5)
    for t in got[:-1]:
        ch.basic_reject(t, requeue=False)
    if got:
        ch.basic_ack(got[-1])
    ch.basic_cancel(tag)
    ch.tx_select()
    ch.basic_publish("", "fz.q2", b"tx")
    ch.tx_commit()
    ch2 = conn.channel()
    ch2.confirm_delivery()
    ch2.basic_publish("", "fz.q2", b"confirmed", pika.BasicProperties(delivery_mode=2))
    try:
        ch2.queue_declare("fz.missing", passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        pass
    ch.queue_unbind("fz.q1", "fz.topic", "a.*.#")
    ch.queue_purge("fz.q2")
    ch.basic_recover(requeue=True)
    conn.close()
    # a raw client: every field type in a header table, every property
    with rawamqp.RawClient("127.0.0.1", port) as raw:
        raw.handshake()
        raw.open_channel(1)
        raw.send_content(1, pika.spec.Basic.Publish(exchange="", routing_key="fz.q2"), b"all",
                         prop_bytes=rawamqp.all_properties_bytes("guest"))
        raw.close_cleanly()


def http(port, method, path, body=None, auth=True):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        return e.read()


BODIES = [
    {"durable": True, "arguments": {"x-message-ttl": 1000, "x-dead-letter-routing-key": "dl", "nested": [1, 2.5, "s"]}},
    {"type": "direct", "durable": False, "auto_delete": True, "internal": False, "arguments": {}},
    {"routing_key": "k.#", "arguments": {"x-match": "all", "a": {"b": [True, False]}}},
    {"pattern": "^fz\\.", "definition": {"max-length": 10, "ha-mode": "all"}, "priority": 1, "apply-to": "queues"},
    {"properties": {"headers": {"h": "v", "n": -3}, "delivery_mode": 2}, "routing_key": "fz.q2",
     "payload": "hello", "payload_encoding": "string"},
    {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto", "truncate": 50000},
    {"configure": ".*", "write": "^fz\\..*", "read": "(a|b)+"},
    {"password": "pw", "tags": "management,policymaker"},
]


def mgmt_session(port):
    for path in ["/api/overview", "/api/queues", "/api/queues/%2F?page=1&page_size=2&name=fz&sort=messages",
                 "/api/queues?name=%5Efz%5C.q%5B12%5D&use_regex=true&sort=name&sort_reverse=true",
                 "/api/exchanges/%2F/fz.topic", "/api/bindings", "/api/connections?columns=name,channels",
                 "/api/channels", "/api/vhosts", "/api/users", "/api/permissions", "/api/policies",
                 "/api/nodes", "/api/definitions", "/api/health/checks/alarms",
                 "/api/queues/%2F/fz.q1/bindings", "/api/exchanges/%2F/fz.topic/bindings/source",
                 "/api/overview?msg_rates_age=60&msg_rates_incr=5", "/api/whoami", "/api/nothing/here"]:
        http(port, "GET", path)
    http(port, "GET", "/api/overview", auth=False)
    http(port, "PUT", "/api/queues/%2F/fz.q3", BODIES[0])
    http(port, "PUT", "/api/exchanges/%2F/fz.x", BODIES[1])
    http(port, "POST", "/api/bindings/%2F/e/fz.x/q/fz.q3", BODIES[2])
    http(port, "PUT", "/api/policies/%2F/fz.p", BODIES[3])
    http(port, "POST", "/api/exchanges/%2F/amq.default/publish", BODIES[4])
    http(port, "POST", "/api/queues/%2F/fz.q2/get", BODIES[5])
    http(port, "PUT", "/api/users/fzu", BODIES[7])
    http(port, "PUT", "/api/permissions/%2F/fzu", BODIES[6])
    http(port, "DELETE", "/api/queues/%2F/fz.q3?if-empty=true")
    return http(port, "GET", "/api/definitions")


def put(harness, data):
    d = OUT / harness
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def table_seeds(obj):
    """Tables as pika encodes them (content, without the length prefix)."""
    pieces = []
    pika.data.encode_table(pieces, obj)
    return b"".join(pieces)[4:]


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    broker = h.WarrenProcess()
    broker.start()
    try:
        amqp_rec = Recorder(broker.port)
        mgmt_rec = Recorder(broker.mgmt_port)
        amqp_session(amqp_rec.port)
        definitions = mgmt_session(mgmt_rec.port)
    finally:
        rc = broker.stop()
    if rc != 0:
        sys.exit("broker exited %r:\n%s" % (rc, broker.log_tail()))

    for client, server in amqp_rec.streams:
        client = bytes(client)
        put("conn", bytes([1, 0x37]) + client[:16384])
        after = client[8:]
        for _ in range(4):  # start-ok, tune-ok, connection.open, channel.open
            after = after[8 + struct.unpack(">I", after[3:7])[0]:]
        put("conn", bytes([0, 0x37]) + after[:16384])
        for stream in (bytes(client), bytes(server)):
            body = stream[8:] if stream.startswith(b"AMQP") else stream
            for k in range(0, len(body), 4096):  # whole-stream seeds, 4 KiB at a time
                put("frame", bytes([2, 0, 7]) + body[k:k + 4096])
            for ftype, payload in frames(stream):
                if ftype == rawamqp.FRAME_METHOD:
                    put("method", payload)
                elif ftype == rawamqp.FRAME_HEADER:
                    put("header", payload)
    for t in [{"x-message-ttl": 60000, "x-dead-letter-exchange": "fz.alt"}, {"x-match": "any", "k": "v", "n": 7},
              {"h1": "v", "h2": 42, "h3": decimal.Decimal("1.5"), "h4": [1, 2, {"x": None}], "h5": True,
               "h6": {"deep": {"er": "x"}}},
              {"product": "fuzz-corpus", "capabilities": {"publisher_confirms": True}}]:
        put("table", b"\x00" + table_seeds(t))
    put("table", b"\x00" + rawamqp.all_types_table()[4:])
    put("table", b"\x01" + b"I\x00\x00\x00\x01S\x00\x00\x00\x03twoVt\x00")
    put("header", struct.pack(">HHQ", 60, 0, 3) + rawamqp.all_properties_bytes("guest"))

    for client, _ in mgmt_rec.streams:
        data = bytes(client)
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            put("http", head)
            method, path = head.split(b" ")[:2]
            methods = [b"GET", b"PUT", b"POST", b"DELETE"]
            m = methods.index(method) if method in methods else 0
            put("api", bytes([m << 2]) + path + b"\n" + rest)
            put("api", bytes([m << 2 | 2]) + path + b"\n" + rest)
            put("api", b"\x03" + data)
    for b in BODIES:
        put("json", b"\x00" + json.dumps(b).encode())
    for flags in (b"\x00", b"\x01"):
        put("definitions", flags + definitions)
        put("definitions", flags + (REPO / "etc" / "definitions.example.json").read_bytes())
    put("json", b"\x01" + (REPO / "etc" / "definitions.example.json").read_bytes())

    put("config", (REPO / "etc" / "warren.conf").read_bytes())
    put("config", b"listeners.tcp.default = 127.0.0.1:0\ndata_dir = /tmp/x\nmanagement.tcp.port = 0\n"
                  b"management.tcp.ip = 127.0.0.1\nprometheus.tcp.port = 0\nprometheus.tcp.ip = 127.0.0.1\n"
                  b"listeners.tcp.v6 = [::1]:5673\nloopback_users = none\nvm_memory_high_watermark.relative = 0.4\n"
                  b"consumer_timeout = 1800000\nconsumer_timeout.action = close_channel\n")

    names = [b"fz.q1", b"fz.q2", b"fz.q3", b"amq.gen-JzTY20BRgKO", b"orders", b"ORDERS.dlq", b"a/b%2Fc", b""]
    for flags, page, size, filt in [(0, 0, 100, b""), (1, 1, 2, b"fz"), (1 | 2 | 8, 2, 1, b"^fz\\.q[12]"),
                                   (4 | 16 | 1, 0, 3, b"Q"), (2, 0, 10, b"(a+)+$")]:
        items = b"".join(bytes([i & 7 | 4]) + bytes([i % 3]) + n + b"\n" for i, n in enumerate(names))
        put("list", bytes([flags, page]) + struct.pack(">H", size - 1) + filt + b"\n" + items)
    for flags, pat, subjects in [(0, b"^amq\\.", [b"amq.direct", b"fz.q1"]), (0, b".*", [b"", b"x"]),
                                 (1, b"^fz\\.(q1|q2)$", [b"FZ.Q1", b"fz.q3"]), (0, b"(a+)+$", [b"a" * 40 + b"b"]),
                                 (0, b"^(?!amq\\.).*", [b"amq.topic", b"mine"]), (0, b"\\d{3,}[^a-z]", [b"x1234!"])]:
        put("pattern", bytes([flags]) + struct.pack(">H", len(pat)) + pat +
            b"".join(bytes([len(s)]) + s for s in subjects))
    print("corpora:", ", ".join("%s %d" % (d.name, len(list(d.iterdir()))) for d in sorted(OUT.iterdir())))


if __name__ == "__main__":
    main()
