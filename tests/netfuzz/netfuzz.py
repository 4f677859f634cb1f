#!/usr/bin/python3
"""The network fuzzer: mutated AMQP frames after a real handshake and
mutated HTTP requests to the management listener, against a running
broker (the ASan build by default), for NETFUZZ_S seconds.

Each AMQP batch opens a connection, does a real handshake (or, one time in
eight, mutates the handshake itself), opens a channel and sends a dozen
frames drawn from real traffic -- the method and content-header payloads
of tests/fuzz/corpus/ (recorded by tests/fuzz/make_corpus.py) and whole
publishes -- with bit flips, length changes, type and channel changes,
truncation, re-framed short payloads and splices of two frames. Each HTTP
batch sends a few requests made from the recorded request heads and JSON
bodies, with and without credentials, with flipped bytes, wrong or huge
Content-Length, broken chunked bodies, long lines and truncation.

Meanwhile a pika consumer on the queue the batches publish to acks what
it gets (reconnecting when a batch deletes the queue or pika cannot read
a delivery), so the mutated traffic meets deliveries, acks and consumer
cancellations. After every batch the broker must still run and answer a fresh connection
(an AMQP handshake + channel, or GET /api/overview with credentials). At the
end it must exit 0 on SIGTERM (LeakSanitizer runs then) with no sanitizer
report in its log. A batch after which the broker failed is written to
build/netfuzz/ to be replayed. Prints TAP.

Env: NETFUZZ_S=30 seconds, NETFUZZ_SEED (random by default; printed),
     WARREN_BIN (default build/asan/warren).
"""
import os
import random
import re
import socket
import struct
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
os.environ.setdefault("WARREN_BIN", str(REPO / "build" / "asan" / "warren"))
os.environ.setdefault("ASAN_OPTIONS", "detect_leaks=1:halt_on_error=1")
os.environ.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
sys.path.insert(0, str(REPO / "tests" / "integration" / "py"))
import harness as h  # noqa: E402
import pika  # noqa: E402
import pika.spec as S  # noqa: E402
import rawamqp  # noqa: E402

CORPUS = REPO / "tests" / "fuzz" / "corpus"
OUT = REPO / "build" / "netfuzz"
SANITIZER_RE = re.compile(r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:")


def frame(ftype, ch, payload):
    return rawamqp.raw_frame(ftype, ch, payload)


def seed_frames():
    """Single frames and whole publishes from real traffic, on channel 1."""
    singles, contents = [], []
    for p in sorted((CORPUS / "method").iterdir()):
        singles.append(frame(rawamqp.FRAME_METHOD, 1, p.read_bytes()))
    headers = [p.read_bytes() for p in sorted((CORPUS / "header").iterdir())]
    for i, hd in enumerate(headers):
        body_size = struct.unpack(">Q", hd[4:12])[0] if len(hd) >= 12 else 0
        body = bytes(random.Random(i).randrange(256) for _ in range(min(body_size, 300)))
        pub = rawamqp.method_payload(S.Basic.Publish(exchange="", routing_key="nf.q"))
        contents.append([frame(1, 1, pub), frame(2, 1, hd), frame(3, 1, body)])
        singles.append(frame(2, 1, hd))
    singles.append(frame(rawamqp.FRAME_HEARTBEAT, 0, b""))
    return singles, contents


def mutate_frame(r, f):
    """One mutation of one frame's bytes."""
    f = bytearray(f)
    op = r.randrange(9)
    if op == 0 and f:  # bit flips
        for _ in range(r.randint(1, 8)):
            i = r.randrange(len(f))
            f[i] ^= 1 << r.randrange(8)
    elif op == 1 and len(f) >= 7:  # the size field
        size = struct.unpack(">I", f[3:7])[0]
        f[3:7] = struct.pack(">I", r.choice([0, 1, max(0, size - r.randint(1, 8)), size + r.randint(1, 8),
                                             0xFFFFFFFF, 0x7FFFFFFF, 131073, r.randrange(1 << 32)]))
    elif op == 2 and f:  # the type
        f[0] = r.choice([0, 1, 2, 3, 4, 8, 9, 65, 206, 255])
    elif op == 3 and len(f) >= 3:  # the channel
        f[1:3] = struct.pack(">H", r.choice([0, 1, 2, 3, 2047, 2048, 65535]))
    elif op == 4 and len(f) > 8:  # a shorter payload, re-framed (the decoder sees it)
        payload = bytes(f[7:-1])[:r.randrange(len(f) - 8)]
        f = bytearray(frame(f[0], struct.unpack(">H", f[1:3])[0], payload))
    elif op == 5 and len(f) > 11:  # method arguments: random bytes after the ids
        i = r.randrange(11, len(f) - 1) if len(f) > 12 else 11
        f[i:i + 4] = bytes(r.randrange(256) for _ in range(4))
    elif op == 6 and f:  # the end octet
        f[-1] = r.randrange(256)
    elif op == 7:  # insert a big number somewhere (lengths inside payloads)
        i = r.randrange(len(f) + 1)
        f[i:i] = r.choice([b"\xff\xff\xff\xff", b"\x00\x00\x00\x00", b"\x80", b"\x7f\xff"])
    else:  # truncate
        f = f[:r.randrange(len(f) + 1)]
    return bytes(f)


def amqp_batch(r, singles, contents):
    """The bytes of one batch (after the handshake and channel.open)."""
    frames = []
    for _ in range(r.randint(1, 12)):
        if r.random() < 0.3:
            frames.extend(r.choice(contents))
        else:
            frames.append(r.choice(singles))
    for _ in range(r.randint(1, 3)):
        i = r.randrange(len(frames))
        if r.random() < 0.15 and len(frames) > 1:  # a splice of two frames
            a, b = frames[i], r.choice(frames)
            frames[i] = a[:r.randrange(len(a) + 1)] + b[r.randrange(len(b) + 1):]
        else:
            frames[i] = mutate_frame(r, frames[i])
    data = b"".join(frames)
    if r.random() < 0.1:
        data = data[:r.randrange(len(data) + 1)]
    return data


def handshake_batch(r):
    """A mutated protocol header or start-ok/tune-ok/open, in a fresh connection."""
    props = rawamqp.RawClient.CLIENT_PROPERTIES
    parts = [rawamqp.PROTOCOL_HEADER,
             rawamqp.method_bytes(0, S.Connection.StartOk(client_properties=props, mechanism="PLAIN",
                                                          response=b"\0guest\0guest", locale="en_US")),
             rawamqp.method_bytes(0, S.Connection.TuneOk(channel_max=2047, frame_max=131072, heartbeat=0)),
             rawamqp.method_bytes(0, S.Connection.Open(virtual_host="/"))]
    i = r.randrange(len(parts))
    parts[i] = mutate_frame(r, parts[i]) if i else bytes(b ^ (r.randrange(256) if r.random() < 0.3 else 0)
                                                         for b in parts[0])
    return b"".join(parts)


def drain(sock, limit=0.2):
    """Reads what the broker says until it closes or is quiet for `limit`."""
    sock.settimeout(limit)
    deadline = time.monotonic() + 3
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return
    except OSError:
        pass


def send_amqp(host, port, data, handshake):
    if handshake:
        c = rawamqp.RawClient(host, port, timeout=5)
        try:
            c.handshake()
            c.open_channel(1)
            c.send_method(1, S.Queue.Declare(queue="nf.q", auto_delete=True))
            c.send(data)
            drain(c.sock)
        except (OSError, rawamqp.Closed):
            pass
        finally:
            c.close()
    else:
        with socket.create_connection((host, port), timeout=5) as s:
            try:
                s.sendall(data)
                drain(s)
            except OSError:
                pass


class Consumer(threading.Thread):
    """Consumes nf.q and acks every delivery until stopped."""

    def __init__(self, host, port):
        super().__init__(daemon=True)
        self.host, self.port = host, port
        self.stop = threading.Event()
        self.delivered = self.reconnects = 0

    def run(self):
        params = pika.ConnectionParameters(self.host, self.port, socket_timeout=5, blocked_connection_timeout=5)
        while not self.stop.is_set():
            try:
                conn = pika.BlockingConnection(params)
                ch = conn.channel()
                ch.queue_declare("nf.q", auto_delete=True)
                ch.basic_qos(prefetch_count=20)
                ch.basic_consume("nf.q", self.on_message)
                while not self.stop.is_set():
                    conn.process_data_events(time_limit=0.2)
                conn.close()
            except Exception:  # noqa: BLE001 -- the batches are meant to break things
                self.reconnects += 1
                time.sleep(0.1)

    def on_message(self, ch, method, props, body):
        self.delivered += 1
        ch.basic_ack(method.delivery_tag)


def amqp_alive(host, port):
    try:
        with rawamqp.RawClient(host, port, timeout=5) as c:
            c.handshake()
            c.open_channel(1)
            c.close_cleanly()
        return True
    except Exception:  # noqa: BLE001 -- any failure is the finding
        return False


AUTH = b"Authorization: Basic Z3Vlc3Q6Z3Vlc3Q="


def http_seeds():
    heads = [p.read_bytes() for p in sorted((CORPUS / "http").iterdir())]
    bodies = [p.read_bytes()[1:] for p in sorted((CORPUS / "json").iterdir())]
    return heads, bodies


def http_request(r, heads, bodies):
    lines = r.choice(heads).split(b"\r\n")
    lines = [ln for ln in lines if not ln.lower().startswith((b"content-length", b"transfer-encoding"))]
    body = r.choice(bodies) if r.random() < 0.5 else b""
    op = r.randrange(10)
    if op == 0:  # no credentials
        lines = [ln for ln in lines if not ln.lower().startswith(b"authorization")]
    elif op == 1:  # wrong or malformed credentials
        lines = [ln for ln in lines if not ln.lower().startswith(b"authorization")]
        lines.append(r.choice([b"Authorization: Basic Z3Vlc3Q6d3Jvbmc=", b"Authorization: Basic !!!",
                               b"Authorization: Bearer x", b"Authorization: Basic " + b"QUFB" * 3000]))
    elif op == 2:  # the request line
        m, _, rest = lines[0].partition(b" ")
        lines[0] = r.choice([b"PUT", b"POST", b"DELETE", b"OPTIONS", b"PATCH", b"G\x00T", b"BREW"]) + b" " + rest
    elif op == 3:  # path garbage
        target = lines[0].split(b" ")
        if len(target) == 3:
            target[1] += r.choice([b"/%", b"/%zz", b"/%00", b"/" * 40, b"/..%2F..", b"?page=0&page_size=-1",
                                   b"?name=(a%2B)%2B$&use_regex=true", b"/" + b"x" * 5000, b"?sort=\xff"])
            lines[0] = b" ".join(target)
    elif op == 4:  # a long header line or many headers
        lines += [b"X-" + b"a" * r.choice([10, 8000, 70000]) + b": v"] * r.choice([1, 120])
    if r.random() < 0.3:  # chunked, sometimes broken
        lines.append(b"Transfer-Encoding: chunked")
        size = len(body) if r.random() < 0.5 else r.choice([0, len(body) + 5, 1 << 40])
        body = b"%x\r\n" % size + body + b"\r\n" + r.choice([b"0\r\n\r\n", b"zz\r\n", b"", b"0\r\nX: y\r\n\r\n"])
    else:
        lines.append(b"Content-Length: %d" % r.choice([len(body)] * 4 + [0, len(body) + 10, max(0, len(body) - 3),
                                                                            1 << 33, -1]))
    data = b"\r\n".join(lines) + b"\r\n\r\n" + body
    if r.random() < 0.3:  # flipped bytes
        data = bytearray(data)
        for _ in range(r.randint(1, 6)):
            data[r.randrange(len(data))] ^= 1 << r.randrange(8)
        data = bytes(data)
    if r.random() < 0.1:
        data = data[:r.randrange(len(data) + 1)]
    return data


def http_alive(host, port):
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"GET /api/overview HTTP/1.1\r\nHost: x\r\n" + AUTH + b"\r\nConnection: close\r\n\r\n")
            reply = b""
            s.settimeout(5)
            while True:
                d = s.recv(65536)
                if not d:
                    break
                reply += d
        return reply.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def main():
    seconds = float(os.environ.get("NETFUZZ_S", "30"))
    seed = int(os.environ.get("NETFUZZ_SEED") or random.randrange(1 << 32))
    r = random.Random(seed)
    print("# netfuzz seed %d (NETFUZZ_SEED=%d reproduces), %g s" % (seed, seed, seconds))
    singles, contents = seed_frames()
    heads, bodies = http_seeds()
    broker = h.WarrenProcess()
    broker.start()
    host, port, mport = broker.host, broker.port, broker.mgmt_port
    counts = {"amqp": 0, "http": 0}
    failure = None
    end = time.monotonic() + seconds
    consumer = Consumer(host, port)
    consumer.start()
    try:
        while time.monotonic() < end and failure is None:
            kind = "amqp" if r.random() < 0.6 else "http"
            if kind == "amqp":
                shake = r.random() < 0.125
                data = handshake_batch(r) if shake else amqp_batch(r, singles, contents)
                send_amqp(host, port, data, not shake)
            else:
                reqs = [http_request(r, heads, bodies) for _ in range(r.randint(1, 4))]
                data = b"\n----- next request -----\n".join(reqs)
                for req in reqs:
                    with socket.create_connection((host, mport), timeout=5) as s:
                        try:
                            s.sendall(req)
                            if r.random() < 0.3:
                                s.shutdown(socket.SHUT_WR)
                            drain(s, 0.3)
                        except OSError:
                            pass
            counts[kind] += 1
            alive = broker.proc.poll() is None and amqp_alive(host, port) and http_alive(host, mport)
            if not alive:
                failure = (kind, counts[kind], data)
    finally:
        consumer.stop.set()
        consumer.join(10)
        rc = broker.stop()
    reports = [ln for ln in broker.log_lines if SANITIZER_RE.search(ln)]
    if failure:
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / ("failing-%s-%d-%d.bin" % (failure[0], seed, failure[1]))
        path.write_bytes(failure[2])
        print("not ok - netfuzz: broker down or not answering after %s batch %d (input in %s)"
              % (failure[0], failure[1], path))
    else:
        print("ok - netfuzz: broker answered after each of %d AMQP and %d HTTP batches "
              "(the consumer acked %d deliveries, reconnected %d times)"
              % (counts["amqp"], counts["http"], consumer.delivered, consumer.reconnects))
    if reports or rc != 0:
        print("not ok - netfuzz: clean exit, no sanitizer report (exit %r)" % (rc,))
        for ln in (reports or broker.log_lines)[-40:]:
            print("# " + ln)
    else:
        print("ok - netfuzz: clean exit, no sanitizer report")
    if failure and not reports:
        for ln in broker.log_lines[-30:]:
            print("# " + ln)
    return 1 if failure or reports or rc != 0 else 0


if __name__ == "__main__":
    sys.exit(main())
