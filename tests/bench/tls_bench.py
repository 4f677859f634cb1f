#!/usr/bin/python3
"""TLS against plain TCP, Warren and RabbitMQ in one run: transient 16-byte
messages through one queue (a16: a publisher and a no-ack consumer, each on
its own connection; the rate is the consumer's), persistent 16-byte
messages with publisher confirms (the rate confirmed), and new TLS
connections per second up to connection.start (full and resumed
sessions; `openssl s_time` spends most of its time idle here, so the
loop is this script's own).

The clients send pre-encoded frames from Python threads (a batch per
sendall, bytes counted on the consumer side), so the brokers, not the
clients, are what is measured as long as the rate stays below what one
Python thread moves (well over 1M msg/s of 16-byte messages here).

Usage: tls_bench.py NAME=host:plain_port:tls_port[:pid] ... [--messages N] [--confirms N] [--s-time S]
       (with the broker's pid, its CPU per message and per handshake too)
       e.g. warren=127.0.0.1:5672:5671 rabbitmq=127.0.0.1:25672:25671
The CA is tests/tls/ca.pem (the brokers use tests/tls/server.pem).
"""
import os
import socket
import ssl
import struct
import sys
import threading
import time

CA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tls", "ca.pem")


def frame(kind, ch, payload):
    return struct.pack(">BHI", kind, ch, len(payload)) + payload + b"\xce"


def method(ch, cls, mid, args=b""):
    return frame(1, ch, struct.pack(">HH", cls, mid) + args)


def shortstr(s):
    s = s.encode()
    return bytes([len(s)]) + s


def longstr(b):
    return struct.pack(">I", len(b)) + b


class Conn:
    def __init__(self, host, port, tls):
        raw = socket.create_connection((host, port), timeout=30)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls:
            ctx = ssl.create_default_context(cafile=CA)
            raw = ctx.wrap_socket(raw, server_hostname="localhost")
        self.s = raw
        self.buf = b""
        self.s.sendall(b"AMQP\x00\x00\x09\x01")
        self.read_method()  # start
        self.s.sendall(method(0, 10, 11, struct.pack(">I", 0) + shortstr("PLAIN") +
                              longstr(b"\x00guest\x00guest") + shortstr("en_US")))
        tune = self.read_method()
        channel_max, frame_max = struct.unpack(">HI", tune[4:10])
        self.s.sendall(method(0, 10, 31, struct.pack(">HIH", channel_max, frame_max, 0)))
        self.s.sendall(method(0, 10, 40, shortstr("/") + shortstr("") + b"\x00"))
        self.read_method()  # open-ok
        self.s.sendall(method(1, 20, 10, shortstr("")))
        self.read_method()  # channel.open-ok

    def read_frame(self):
        while len(self.buf) < 7 or len(self.buf) < 8 + struct.unpack(">I", self.buf[3:7])[0]:
            chunk = self.s.recv(1 << 20)
            if not chunk:
                raise EOFError
            self.buf += chunk
        n = struct.unpack(">I", self.buf[3:7])[0]
        f, self.buf = self.buf[:8 + n], self.buf[8 + n:]
        return f[0], f[7:7 + n]

    def read_method(self):
        while True:
            kind, payload = self.read_frame()
            if kind == 1:
                return payload


def publish_batch(queue, body, count):
    one = (method(1, 60, 40, struct.pack(">H", 0) + shortstr("") + shortstr(queue) + b"\x00") +
           frame(2, 1, struct.pack(">HHQH", 60, 0, len(body), 0)) + frame(3, 1, body))
    return one * count


def a16(host, port, tls, messages):
    queue = "tls-bench-%d-%d" % (port, os.getpid())
    cons, pub = Conn(host, port, tls), Conn(host, port, tls)
    cons.s.sendall(method(1, 50, 10, struct.pack(">H", 0) + shortstr(queue) + b"\x08" +
                          struct.pack(">I", 0)))  # auto_delete
    cons.read_method()
    cons.s.sendall(method(1, 60, 20, struct.pack(">H", 0) + shortstr(queue) + shortstr("") +
                          b"\x02" + struct.pack(">I", 0)))  # no_ack
    cons.read_method()
    body = b"x" * 16
    # a deliver is method + header + body frames; its size depends on the tag
    batch = 2000
    data = publish_batch(queue, body, batch)
    done = threading.Event()
    got = [0]

    mark = b"\xce\x03\x00\x01\x00\x00\x00\x10" + body  # a header's end, then the body

    def consume():
        s, n = cons.s, 0
        buf = cons.buf
        while n < messages:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            buf += chunk
            n += buf.count(mark)
            buf = buf[-(len(mark) - 1):]  # no whole mark is left to count twice
        got[0] = n
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    t0 = time.monotonic()
    for _ in range(messages // batch):
        pub.s.sendall(data)
    done.wait(300)
    dt = time.monotonic() - t0
    for c in (cons, pub):
        c.s.close()
    return got[0] / dt


def confirms(host, port, tls, messages):
    """Persistent 16-byte messages to a durable queue with publisher
    confirms, all in flight at once in batches: messages confirmed per second."""
    queue = "tls-bench-durable-%d-%d" % (port, os.getpid())
    pub = Conn(host, port, tls)
    pub.s.sendall(method(1, 85, 10, b"\x00"))  # confirm.select
    pub.read_method()
    pub.s.sendall(method(1, 50, 10, struct.pack(">H", 0) + shortstr(queue) + b"\x02" +
                         struct.pack(">I", 0)))  # durable
    pub.read_method()
    body = b"x" * 16
    one = (method(1, 60, 40, struct.pack(">H", 0) + shortstr("") + shortstr(queue) + b"\x00") +
           frame(2, 1, struct.pack(">HHQHB", 60, 0, len(body), 0x1000, 2)) + frame(3, 1, body))
    batch = 1000
    acked = [0]
    done = threading.Event()

    def read_acks():
        while acked[0] < messages:
            kind, payload = pub.read_frame()
            if kind == 1 and payload[:4] == struct.pack(">HH", 60, 80):
                tag, multiple = struct.unpack(">QB", payload[4:13])
                acked[0] = tag if multiple else max(acked[0], tag)
        done.set()

    t = threading.Thread(target=read_acks, daemon=True)
    t.start()
    t0 = time.monotonic()
    data = one * batch
    for _ in range(messages // batch):
        pub.s.sendall(data)
    done.wait(300)
    dt = time.monotonic() - t0
    pub.s.sendall(method(1, 50, 40, struct.pack(">H", 0) + shortstr(queue) + b"\x00"))
    pub.s.close()
    return acked[0] / dt


def handshakes(host, port, resumed, seconds):
    """New TLS connections per second, each up to connection.start (so
    TLS 1.3's tickets have arrived); `resumed` offers the last session."""
    ctx = ssl.create_default_context(cafile=CA)
    session, n, reused = None, 0, 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < seconds:
        raw = socket.create_connection((host, port), timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = ctx.wrap_socket(raw, server_hostname="localhost", session=session if resumed else None)
        s.sendall(b"AMQP\x00\x00\x09\x01")
        s.recv(4096)
        if resumed:
            session = s.session
            reused += s.session_reused
        s.close()
        n += 1
    return n / (time.monotonic() - t0), reused / n


def cpu_seconds(pid):
    """The broker's user + system CPU so far (0 without a pid)."""
    if not pid:
        return 0.0
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measured(pid, fn, *args):
    """fn's figure and the broker CPU it cost."""
    c0 = cpu_seconds(pid)
    r = fn(*args)
    return r, cpu_seconds(pid) - c0


def main():
    args = sys.argv[1:]
    messages, confirmed, seconds = 400000, 100000, 5
    targets = []
    i = 0
    while i < len(args):
        if args[i] == "--messages":
            messages = int(args[i + 1]); i += 2
        elif args[i] == "--confirms":
            confirmed = int(args[i + 1]); i += 2
        elif args[i] == "--s-time":
            seconds = int(args[i + 1]); i += 2
        else:
            name, addr = args[i].split("=")
            host, plain, tls, *pid = addr.split(":")
            targets.append((name, host, int(plain), int(tls), int(pid[0]) if pid else 0))
            i += 1
    print("%-10s %10s %10s %6s %11s %11s %6s %10s %12s" % (
        "broker", "a16 plain", "a16 tls", "ratio", "conf plain", "conf tls", "ratio",
        "full hs/s", "resumed hs/s"))
    cost = []
    for name, host, plain, tls, pid in targets:
        (rp, cpu_rp), (rt, cpu_rt) = (measured(pid, a16, host, plain, False, messages),
                                      measured(pid, a16, host, tls, True, messages))
        (cp, cpu_cp), (ct, cpu_ct) = (measured(pid, confirms, host, plain, False, confirmed),
                                      measured(pid, confirms, host, tls, True, confirmed))
        (full, _), cpu_full = measured(pid, handshakes, host, tls, False, seconds)
        (resumed, share), cpu_res = measured(pid, handshakes, host, tls, True, seconds)
        print("%-10s %10.0f %10.0f %6.3f %11.0f %11.0f %6.3f %10.0f %12.0f (%.0f%% resumed)"
              % (name, rp, rt, rt / rp, cp, ct, ct / cp, full, resumed, share * 100))
        if pid:
            us = 1e6
            cost.append("%-10s %10.2f %10.2f %6.2f %11.2f %11.2f %6.2f %10.0f %12.0f" % (
                name, cpu_rp * us / messages, cpu_rt * us / messages, cpu_rt / max(cpu_rp, 1e-9),
                cpu_cp * us / confirmed, cpu_ct * us / confirmed, cpu_ct / max(cpu_cp, 1e-9),
                cpu_full * us / max(full * seconds, 1), cpu_res * us / max(resumed * seconds, 1)))
    if cost:
        print("# broker CPU (user + system) per message / per handshake, microseconds:")
        print("%-10s %10s %10s %6s %11s %11s %6s %10s %12s" % (
            "broker", "a16 plain", "a16 tls", "ratio", "conf plain", "conf tls", "ratio",
            "full hs", "resumed hs"))
        print("\n".join(cost))


if __name__ == "__main__":
    main()
