#!/usr/bin/python3
"""dedup_bench.py -- what deduplication costs (tests/bench/dedup.sh runs it).

One Warren (journal.sync=none, no persistent messages). Each round
publishes N messages, each with its own x-deduplication-header value (every
one new: the cache's worst case -- an insertion each, and past the cache's
size an eviction each), at RATE messages a second through one raw socket,
to a fanout exchange bound to a queue that keeps its last 10,000 (x-max-length,
drop-head), once to a plain exchange and once to one declared with
x-message-deduplication true and x-cache-size SIZE, in alternating order.
The frames are built before the clock starts and paced in chunks, so the
tool's own work is off the measured window.

Figures per run: the rate reached, the broker's CPU (utime + stime from
/proc, over the publishing window and the channel close that ends it) in
seconds per million messages, and the broker's RSS growth; for the dedup
run also the cache's own figure from the management API (deduplication.
bytes) and entries. Summary: the medians and the dedup / plain ratio.

A third kind, "small", runs with x-cache-size SMALL (fits the CPU caches) for
contrast: what the 1M-entry runs add beyond it is memory latency.

usage: dedup_bench.py AMQP_PORT MGMT_PORT BROKER_PID  (env N, RATE, SIZE, SMALL, ROUNDS, ONLY)
"""
import base64
import http.client
import json
import os
import socket
import statistics
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "conformance", "python"))
import rawamqp  # noqa: E402

N = int(os.environ.get("N", "2000000"))
RATE = float(os.environ.get("RATE", "100000"))
SIZE = int(os.environ.get("SIZE", "1000000"))
SMALL = int(os.environ.get("SMALL", "10000"))  # a cache that fits the CPU's caches, for contrast
ROUNDS = int(os.environ.get("ROUNDS", "3"))
ONLY = os.environ.get("ONLY")  # "plain" or "dedup": one run of that kind (dedup.sh's INSTR=1)
CHUNK = 2000
TICK = os.sysconf("SC_CLK_TCK")


def shortstr(b):
    return bytes([len(b)]) + b


def frames(exchange, n):
    """n publishes of a 16-byte body, header x-deduplication-header = a
    10-digit key, as one bytes object per CHUNK messages."""
    ex = exchange.encode()
    method = struct.pack(">HHH", 60, 40, 0) + shortstr(ex) + shortstr(b"") + b"\x00"
    mframe = struct.pack(">BHI", 1, 1, len(method)) + method + b"\xce"
    body = b"0123456789abcdef"
    bframe = struct.pack(">BHI", 3, 1, len(body)) + body + b"\xce"
    entry_head = shortstr(b"x-deduplication-header") + b"S" + struct.pack(">I", 10)
    table_len = len(entry_head) + 10
    hpayload_len = 2 + 2 + 8 + 2 + 4 + table_len
    hpre = (struct.pack(">BHI", 2, 1, hpayload_len) + struct.pack(">HHQH", 60, 0, len(body), 0x2000)
            + struct.pack(">I", table_len) + entry_head)
    pre, post = mframe + hpre, b"\xce" + bframe
    out = []
    for start in range(0, n, CHUNK):
        out.append(b"".join(pre + b"%010d" % i + post for i in range(start, min(n, start + CHUNK))))
    return out


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def api(mgmt_port, path):
    c = http.client.HTTPConnection("127.0.0.1", mgmt_port, timeout=30)
    c.request("GET", path, headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    r = c.getresponse()
    body = r.read()
    c.close()
    return json.loads(body)


def one_run(port, mgmt_port, pid, kind, idx):
    name = "bench.%s.%d" % (kind, idx)
    size = SMALL if kind == "small" else SIZE
    ctl = rawamqp.RawClient("127.0.0.1", port)
    ctl.handshake()
    ctl.open_channel(1)
    import pika.spec as S
    args = {"x-message-deduplication": True, "x-cache-size": size} if kind != "plain" else {}
    ctl.rpc(1, S.Exchange.Declare(exchange=name, type="fanout", arguments=args), S.Exchange.DeclareOk)
    ctl.rpc(1, S.Queue.Declare(queue=name, arguments={"x-max-length": 10000}), S.Queue.DeclareOk)
    ctl.rpc(1, S.Queue.Bind(queue=name, exchange=name, routing_key=""), S.Queue.BindOk)
    chunks = frames(name, N)
    pub = rawamqp.RawClient("127.0.0.1", port, timeout=600)
    pub.handshake()
    pub.open_channel(1)
    pub.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rss0, cpu0 = rss_bytes(pid), cpu_seconds(pid)
    t0 = time.monotonic()
    for i, chunk in enumerate(chunks):
        due = t0 + i * CHUNK / RATE
        now = time.monotonic()
        if due > now:
            time.sleep(due - now)
        pub.sock.sendall(chunk)
    pub.rpc(1, S.Channel.Close(reply_code=200, reply_text="", class_id=0, method_id=0),
            S.Channel.CloseOk)  # every publish before it was handled
    elapsed = time.monotonic() - t0
    cpu, rss = cpu_seconds(pid) - cpu0, rss_bytes(pid) - rss0
    cache = api(mgmt_port, "/api/exchanges/%2F/" + name).get("deduplication")
    pub.close()
    ctl.rpc(1, S.Exchange.Delete(exchange=name), S.Exchange.DeleteOk)
    ctl.rpc(1, S.Queue.Delete(queue=name), S.Queue.DeleteOk)
    ctl.close()
    return {"rate": N / elapsed, "cpu_per_m": cpu * 1e6 / N, "rss": rss, "cache": cache}


def main():
    port, mgmt_port, pid = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    print("dedup: %d messages a run, each with a new key, paced at %.0f/s, to a fanout exchange "
          "bound to one queue (x-max-length 10000); dedup cache x-cache-size %d" % (N, RATE, SIZE))
    res = {"plain": [], "dedup": [], "small": []}
    kinds = ("plain", "dedup", "small") if SMALL else ("plain", "dedup")
    for r in range(ROUNDS):
        order = kinds if r % 2 == 0 else kinds[::-1]
        if ONLY:
            order = (ONLY,)
        for kind in order:
            x = one_run(port, mgmt_port, pid, kind, r)
            res[kind].append(x)
            extra = ""
            if x["cache"]:
                extra = "  cache: %d entries, %.1f MiB (API)" % (x["cache"]["entries"],
                                                                 x["cache"]["bytes"] / 2 ** 20)
            print("round %d %-5s  %7.0f msg/s  broker CPU %.3f s per million  RSS %+7.1f MiB%s"
                  % (r + 1, kind, x["rate"], x["cpu_per_m"], x["rss"] / 2 ** 20, extra), flush=True)
    if ONLY:
        return
    rss = statistics.median(x["rss"] for x in res["dedup"]) - statistics.median(x["rss"] for x in res["plain"])
    med = {k: statistics.median(x["cpu_per_m"] for x in v) for k, v in res.items() if v}
    rate = {k: statistics.median(x["rate"] for x in v) for k, v in res.items() if v}
    for k, label in (("dedup", "dedup (x-cache-size %d)" % SIZE), ("small", "dedup (x-cache-size %d)" % SMALL)):
        if k in med:
            print("median: plain %.3f s CPU per million (%.0f msg/s), %s %.3f s per million (%.0f msg/s): "
                  "x%.2f, +%.2f us a message" % (med["plain"], rate["plain"], label, med[k], rate[k],
                                                 med[k] / med["plain"], med[k] - med["plain"]))
    print("dedup RSS growth beyond plain's: %.1f MiB for a %d-entry cache (%.0f bytes an entry)"
          % (rss / 2 ** 20, SIZE, rss / SIZE))


if __name__ == "__main__":
    main()
