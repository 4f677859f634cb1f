#!/usr/bin/python3
"""10,000 concurrent connections (tests/bench/conns.sh runs this).

    conns_bench.py BROKER PID HOST PORT [TLS_PORT]

BROKER names the column; PID is the broker process to sample (/proc).
Client processes (this file with `client` or `consumer` first) each hold a
share of CONNS connections with a channel open and heartbeats (HEARTBEAT s),
half of them over TLS when TLS_PORT is given (CA in BENCH_TLS_CA). Then
PUBLISHERS of them publish RATE messages/s each (a timestamp in a 16-byte
transient body) to one queue that one consumer (no-ack) drains, for WINDOW
seconds after WARMUP s. Prints one line: RSS per connection (broker RSS
after the connections are open minus before, over CONNS), publish ->
deliver latency p50/p99 over the window, broker CPU over the window
(utime+stime from /proc/PID/stat, % of one core), and how many connections
were lost (a missed heartbeat closes them).

The clients speak AMQP with a few hand-made frames on asyncio (pika would
need a thread or a blocking loop per connection). Env: CONNS (10000),
PUBLISHERS (1000), RATE (10), HEARTBEAT (10), WARMUP (5), WINDOW (30),
CLIENT_PROCS (4).
"""
import asyncio
import json
import os
import ssl
import struct
import subprocess
import sys
import time

CONNS = int(os.environ.get("CONNS", "10000"))
PUBLISHERS = int(os.environ.get("PUBLISHERS", "1000"))
RATE = float(os.environ.get("RATE", "10"))
HEARTBEAT = int(os.environ.get("HEARTBEAT", "10"))
WARMUP = float(os.environ.get("WARMUP", "5"))
WINDOW = float(os.environ.get("WINDOW", "30"))
CLIENT_PROCS = int(os.environ.get("CLIENT_PROCS", "4"))
QUEUE = b"bench.conns"
CONNECTING = 64            # handshakes in flight per client process

# ---------------------------------------------------------------- frames


def frame(ftype, channel, payload):
    return struct.pack(">BHI", ftype, channel, len(payload)) + payload + b"\xce"


def method(channel, class_id, method_id, args=b""):
    return frame(1, channel, struct.pack(">HH", class_id, method_id) + args)


def shortstr(b):
    return bytes([len(b)]) + b


HEARTBEAT_FRAME = frame(8, 0, b"")
START_OK = method(0, 10, 11, struct.pack(">I", 0) + shortstr(b"PLAIN")
                  + struct.pack(">I", 12) + b"\0guest\0guest" + shortstr(b"en_US"))
TUNE_OK = method(0, 10, 31, struct.pack(">HIH", 16, 131072, HEARTBEAT))
OPEN = method(0, 10, 40, shortstr(b"/") + shortstr(b"") + b"\0")
CHANNEL_OPEN = method(1, 20, 10, shortstr(b""))
PUBLISH = method(1, 60, 40, struct.pack(">H", 0) + shortstr(b"") + shortstr(QUEUE) + b"\0")
BODY_HEADER = frame(2, 1, struct.pack(">HHQH", 60, 0, 16, 0))
DECLARE = method(1, 50, 10, struct.pack(">H", 0) + shortstr(QUEUE) + b"\0" + struct.pack(">I", 0))
CONSUME = method(1, 60, 20, struct.pack(">H", 0) + shortstr(QUEUE) + shortstr(b"")
                 + b"\x02" + struct.pack(">I", 0))      # no-ack


class Conn(asyncio.Protocol):
    """One AMQP connection: handshake, then heartbeats; counts frames by
    (class, method) it waits for, and passes body frames to on_body."""

    def __init__(self, on_body=None):
        self.buf = bytearray()
        self.waiting = {}          # (class, method) -> future
        self.on_body = on_body
        self.lost = asyncio.get_running_loop().create_future()
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if not self.lost.done():
            self.lost.set_result(exc)
        for f in self.waiting.values():
            if not f.done():
                f.set_exception(ConnectionError("connection lost"))

    def expect(self, class_id, method_id):
        f = asyncio.get_running_loop().create_future()
        self.waiting[(class_id, method_id)] = f
        return f

    def data_received(self, data):
        buf = self.buf
        buf += data
        pos = 0
        while len(buf) - pos >= 7:
            ftype, _, size = struct.unpack_from(">BHI", buf, pos)
            end = pos + 7 + size
            if len(buf) < end + 1:
                break
            if ftype == 3 and self.on_body:
                self.on_body(buf, pos + 7)
            elif ftype == 1:
                key = struct.unpack_from(">HH", buf, pos + 7)
                f = self.waiting.pop(key, None)
                if f and not f.done():
                    f.set_result(bytes(buf[pos + 11:end]))
                elif key == (10, 50):      # connection.close from the broker
                    self.transport.close()
            pos = end + 1
        del buf[:pos]

    async def open(self, timeout=180):
        start = self.expect(10, 10)
        self.transport.write(b"AMQP\x00\x00\x09\x01")
        await asyncio.wait_for(start, timeout)
        tune = self.expect(10, 30)
        self.transport.write(START_OK)
        await asyncio.wait_for(tune, timeout)
        opened, chan = self.expect(10, 41), self.expect(20, 11)
        self.transport.write(TUNE_OK + OPEN + CHANNEL_OPEN)
        await asyncio.wait_for(asyncio.gather(opened, chan), timeout)

    def publish(self):
        body = struct.pack(">QQ", time.time_ns(), 0)
        self.transport.write(PUBLISH + BODY_HEADER + frame(3, 1, body))


async def connect(host, port, ctx, on_body=None):
    loop = asyncio.get_running_loop()
    kw = {"ssl": ctx, "server_hostname": "localhost"} if ctx else {}
    _, c = await loop.create_connection(lambda: Conn(on_body), host, port, **kw)
    await c.open()
    return c


def tls_context():
    ctx = ssl.create_default_context(cafile=os.environ["BENCH_TLS_CA"])
    return ctx


async def lines():
    """stdin lines from the parent, without blocking the loop."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = await reader.readline()
        if not line:
            return
        yield line.decode().split()


def say(**kw):
    print(json.dumps(kw), flush=True)


async def heartbeats(conns, stop):
    """A heartbeat to each connection every HEARTBEAT/2 s, spread over the period."""
    period = HEARTBEAT / 2
    while not stop.is_set():
        now = list(conns)                # the ones opened since wait for the next round
        step = period / max(1, len(now))
        t = time.monotonic()
        for i, c in enumerate(now):
            if not c.lost.done():
                c.transport.write(HEARTBEAT_FRAME)
            if i % 100 == 99:
                await asyncio.sleep(max(0, t + step * (i + 1) - time.monotonic()))
        await asyncio.sleep(max(0, t + period - time.monotonic()))


async def client_main(host, port, tls_port, n, n_tls, n_pub):
    sem = asyncio.Semaphore(CONNECTING)
    ctx = tls_context() if n_tls else None
    failed = [0]
    conns = []
    stop = asyncio.Event()
    # Heartbeats from the first connection on: opening 10,000 can take longer
    # than two heartbeat periods.
    hb = asyncio.create_task(heartbeats(conns, stop))

    async def one(i):
        async with sem:
            try:
                tls = i % 2 == 1 and i // 2 < n_tls
                conns.append(await connect(host, tls_port if tls else port, ctx if tls else None))
            except Exception:
                failed[0] += 1
    await asyncio.gather(*(one(i) for i in range(n)))
    say(ready=len(conns), failed=failed[0])
    pubs = conns[:n_pub]
    sent = 0
    publishing = None

    async def publish():
        nonlocal sent
        period = 1.0 / RATE
        t = time.monotonic()
        while True:
            for c in pubs:
                if not c.lost.done():
                    c.publish()
                    sent += 1
            t += period
            await asyncio.sleep(max(0, t - time.monotonic()))
    async for cmd in lines():
        if cmd[0] == "go":
            publishing = asyncio.create_task(publish())
        elif cmd[0] == "count":
            say(sent=sent, lost=sum(1 for c in conns if c.lost.done()))
        elif cmd[0] == "stop":
            break
    if publishing:
        publishing.cancel()
    stop.set()
    hb.cancel()
    say(sent=sent, lost=sum(1 for c in conns if c.lost.done()))
    for c in conns:
        c.transport.close()


async def consumer_main(host, port):
    stamps = []                       # (sent ns, received ns)

    def on_body(buf, off):
        stamps.append((struct.unpack_from(">Q", buf, off)[0], time.time_ns()))
    c = await connect(host, port, None, on_body)
    ok = c.expect(50, 11)
    c.transport.write(DECLARE)
    await ok
    ok = c.expect(60, 21)
    c.transport.write(CONSUME)
    await ok
    stop = asyncio.Event()
    hb = asyncio.create_task(heartbeats([c], stop))
    say(ready=1, failed=0)
    async for cmd in lines():
        if cmd[0] == "window":        # window T0_NS T1_NS: latencies of messages sent in it
            t0, t1 = int(cmd[1]), int(cmd[2])
            # The window's messages are in when one sent after it arrives (one
            # queue, so nearly in order), or nothing has come for 5 s.
            seen, quiet = len(stamps), 0
            while not (stamps and stamps[-1][0] > t1 + 1e9) and quiet < 10:
                await asyncio.sleep(0.5)
                quiet = quiet + 1 if len(stamps) == seen else 0
                seen = len(stamps)
            lat = sorted(r - s for s, r in stamps if t0 <= s < t1)
            n = len(lat)
            say(received=len(stamps), in_window=n, lost=c.lost.done(),
                p50=lat[n // 2] / 1e6 if n else None, p99=lat[min(n - 1, n * 99 // 100)] / 1e6 if n else None)
        elif cmd[0] == "stop":
            break
    stop.set()
    hb.cancel()
    c.transport.close()


# ---------------------------------------------------------------- the parent


def proc_rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Child:
    def __init__(self, *args):
        self.p = subprocess.Popen([sys.executable, __file__] + [str(a) for a in args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, *words):
        self.p.stdin.write(" ".join(str(w) for w in words) + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("a client process exited early")
        return json.loads(line)


def sent_now(clients):
    for c in clients:
        c.send("count")
    return sum(c.recv()["sent"] for c in clients)


def parent(broker, pid, host, port, tls_port):
    pid, port = int(pid), int(port)
    consumer = Child("consumer", host, port)
    assert consumer.recv()["ready"] == 1
    rss_idle = proc_rss(pid)
    t = time.monotonic()
    clients, n_tls = [], 0
    for k in range(CLIENT_PROCS):
        n = CONNS // CLIENT_PROCS + (1 if k < CONNS % CLIENT_PROCS else 0)
        n_pub = PUBLISHERS // CLIENT_PROCS + (1 if k < PUBLISHERS % CLIENT_PROCS else 0)
        n_tls += n // 2 if tls_port else 0
        clients.append(Child("client", host, port, tls_port or 0, n, n // 2 if tls_port else 0, n_pub))
    ready = [c.recv() for c in clients]
    opened = sum(r["ready"] for r in ready)
    setup_s = time.monotonic() - t
    time.sleep(HEARTBEAT + 2)         # settled, and a heartbeat period has passed
    rss_conns = proc_rss(pid)
    for c in clients:
        c.send("go")
    time.sleep(WARMUP)
    t0, cpu0, sent0 = time.time_ns(), proc_cpu(pid), sent_now(clients)
    time.sleep(WINDOW)
    t1, cpu1, sent1 = time.time_ns(), proc_cpu(pid), sent_now(clients)
    rss_load = proc_rss(pid)
    consumer.send("window", t0, t1)
    lat = consumer.recv()
    for c in clients:
        c.send("stop")
    done = [c.recv() for c in clients]
    consumer.send("stop")
    for c in clients + [consumer]:
        c.p.wait(60)
    lost = sum(d["lost"] for d in done)
    cpu = (cpu1 - cpu0) / ((t1 - t0) / 1e9) * 100
    fmt = lambda v: "%.1f" % v if v is not None else "n/a"  # noqa: E731
    print("%-8s %d/%d connections (%d over TLS, %d refused, opened in %.1f s); "
          "RSS %.1f MB idle -> %.1f MB with them: %.2f KB/connection; under load %.1f MB; "
          "%d publishers x %g msg/s: %d sent in the %g s window, %d of them delivered (%d in all), p50 %s ms, p99 %s ms; "
          "broker CPU %.0f%% of a core; %d connections lost%s"
          % (broker, opened, CONNS, n_tls,
             sum(r["failed"] for r in ready), setup_s, rss_idle / 1048576, rss_conns / 1048576,
             (rss_conns - rss_idle) / 1024 / max(1, opened), rss_load / 1048576, PUBLISHERS, RATE,
             sent1 - sent0, WINDOW, lat["in_window"], lat["received"], fmt(lat["p50"]), fmt(lat["p99"]), cpu, lost,
             " (and the consumer's, after %d deliveries)" % lat["received"] if lat["lost"] else ""),
          flush=True)
    return 0 if opened == CONNS and lost == 0 and not lat["lost"] and lat["in_window"] > 0 else 1


def main(argv):
    if argv[1] == "client":
        host, port, tls_port, n, n_tls, n_pub = argv[2], int(argv[3]), int(argv[4]), *map(int, argv[5:8])
        asyncio.run(client_main(host, port, tls_port, n, n_tls, n_pub))
        return 0
    if argv[1] == "consumer":
        asyncio.run(consumer_main(argv[2], int(argv[3])))
        return 0
    return parent(*argv[1:6]) if len(argv) > 5 else parent(*argv[1:5], None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
