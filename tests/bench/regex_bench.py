#!/usr/bin/python3
"""Catastrophic policy patterns against AMQP latency (tests/bench/regex.sh).

Issue 17, item 1: in vhost `rx`, QUEUES (300) queues named 'a' * 230 +
'b%05d'. For each of the patterns "(a+)+$", "(a|aa)+$" and "(.*a){12}$":
PUT /api/policies/rx/p1 with it (apply-to queues, max-length 100, priority
1), then PUT a marker policy `m` (pattern "^a+b0", priority 0) whose
definition (max-length 1000 + round) is new each round, and wait until every
queue shows the marker's definition. A broker that applies a change after
answering it must by then have gone through all 300 names with both
patterns (p1 matches none: its pattern reaches the match limit, or runs to
its end, on every name), so each round measures one full re-evaluation
under a catastrophic pattern, as the first PUT alone did before the fix.
Finally p1 gets "^a+b0" and the run waits until every queue shows it.
Meanwhile a client on another vhost does an AMQP round trip
(queue.declare passive) every PROBE_MS (5) ms. Waiting means reading
GET /api/queues/rx every POLL_MS (100) ms, which costs the loop a few ms
itself; so first, as a control, the same probing and polling run for
CONTROL_S (3) seconds with no policy change.

Prints each PUT's time, each round's time until applied, and the round
trips during the control and during the run: count, median, p99 and max.
The target: max under 50 ms. RESULT lines at the end.

Env: WARREN_BIN (build/release/warren), QUEUES=300, PROBE_MS=5, POLL_MS=100,
CONTROL_S=3, PUT_TIMEOUT=600 (seconds per request; before the fix a PUT took
35-55 s here, ~100 s in the issue).
Only 127.0.0.1 is contacted; the broker runs in a temp dir, removed after.
"""
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import time
import urllib.parse

import pika

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mgmt_bench import AUTH, Warren  # noqa: E402

QUEUES = int(os.environ.get("QUEUES", "300"))
PROBE_MS = float(os.environ.get("PROBE_MS", "5"))
PUT_TIMEOUT = float(os.environ.get("PUT_TIMEOUT", "600"))
POLL_MS = float(os.environ.get("POLL_MS", "100"))
CONTROL_S = float(os.environ.get("CONTROL_S", "3"))
PATTERNS = ["(a+)+$", "(a|aa)+$", "(.*a){12}$"]
MATCHING = "^a+b0"


def call(port, method, path, body=None):
    """(status, seconds, parsed body or None); status 0 when the broker
    closed the connection without an answer (before the fix, a request
    that waited out a stall could be dropped so)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=PUT_TIMEOUT)
    hdrs = {"Authorization": AUTH, "Content-Type": "application/json"}
    t = time.perf_counter()
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
    try:
        r = c.getresponse()
        data = r.read()
    except http.client.RemoteDisconnected:
        return 0, time.perf_counter() - t, None
    finally:
        c.close()
    return r.status, time.perf_counter() - t, json.loads(data) if data and r.status == 200 else None


def queue_name(i):
    return "a" * 230 + "b%05d" % i


def probe_loop(amqp_port, vhost, stop, out):
    """queue.declare(passive) round trips every PROBE_MS until `stop` is set;
    sends back [(start, seconds)] on time.monotonic(), which all processes
    share. A process of its own: the parent's JSON parsing would otherwise
    hold the GIL inside the measured round trips."""
    # no heartbeats: a stalled broker is waited for and measured, not given up on
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port, vhost,
                                                             heartbeat=0))
    ch = conn.channel()
    ch.queue_declare("regex.bench.probe")
    rtts = []
    deadline = time.monotonic() + 4 * PUT_TIMEOUT
    while not stop.is_set() and time.monotonic() < deadline:
        t = time.monotonic()
        ch.queue_declare("regex.bench.probe", passive=True)
        rtts.append((t, time.monotonic() - t))
        stop.wait(PROBE_MS / 1000)
    conn.close()
    out.send(rtts)


class Prober:
    def __init__(self, amqp_port, vhost):
        self.stop_flag = multiprocessing.Event()
        self.rx, tx = multiprocessing.Pipe(duplex=False)
        self.proc = multiprocessing.Process(target=probe_loop, daemon=True,
                                            args=(amqp_port, vhost, self.stop_flag, tx))
        self.proc.start()

    def stop(self):
        """[(start, seconds)] of every round trip."""
        self.stop_flag.set()
        rtts = self.rx.recv()
        self.proc.join(PUT_TIMEOUT)
        return rtts


def between(rtts, t0, t1):
    return [dt for t, dt in rtts if t0 <= t < t1]


def all_show(port, policy, max_length):
    """True once every queue of rx lists `policy` with that max-length."""
    st, _, qs = call(port, "GET", "/api/queues/rx")
    return st == 200 and len(qs) == QUEUES and all(
        q.get("policy") == policy and
        q.get("effective_policy_definition", {}).get("max-length") == max_length for q in qs)


def put(port, name, pattern, priority, max_length, puts):
    st, dt, _ = call(port, "PUT", "/api/policies/rx/" + name,
                     {"pattern": pattern, "definition": {"max-length": max_length},
                      "apply-to": "queues", "priority": priority})
    if st not in (201, 204, 0):
        raise RuntimeError("PUT %s: %d" % (pattern, st))
    puts.append((pattern, dt, st))


def wait_for(port, policy, max_length):
    """Seconds until every queue shows it."""
    t = time.perf_counter()
    deadline = time.monotonic() + PUT_TIMEOUT
    while not all_show(port, policy, max_length):
        if time.monotonic() > deadline:
            raise RuntimeError("%s never applied" % policy)
        time.sleep(POLL_MS / 1000)
    return time.perf_counter() - t


def stats(rtts):
    """(count, median, p99, max) in ms."""
    ms = sorted(x * 1000 for x in rtts)
    return len(ms), statistics.median(ms), ms[min(len(ms) - 1, int(len(ms) * 0.99))], ms[-1]


def main():
    w = Warren()
    try:
        for vh in ("rx", "probe"):
            call(w.http, "PUT", "/api/vhosts/" + vh, {})
            call(w.http, "PUT", "/api/permissions/%s/guest" % vh,
                 {"configure": ".*", "write": ".*", "read": ".*"})
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", w.amqp, "rx"))
        ch = c.channel()
        for i in range(QUEUES):
            ch.queue_declare(queue_name(i))
        c.close()
        prober = Prober(w.amqp, "probe")
        time.sleep(1)
        c0 = time.monotonic()
        while time.monotonic() < c0 + CONTROL_S:  # the control: polling, no policy work
            all_show(w.http, "none", None)
            time.sleep(POLL_MS / 1000)
        c1 = time.monotonic()
        puts, rounds = [], []
        t0, m0 = time.perf_counter(), time.monotonic()
        for i, pattern in enumerate(PATTERNS):
            t = time.perf_counter()
            put(w.http, "p1", pattern, 1, 100, puts)
            put(w.http, "m", MATCHING, 0, 1000 + i, puts)
            wait_for(w.http, "m", 1000 + i)
            rounds.append((pattern, time.perf_counter() - t))
        put(w.http, "p1", MATCHING, 1, 100, puts)
        wait_for(w.http, "p1", 100)
        total = time.perf_counter() - t0
        rtts = prober.stop()
        control, during = between(rtts, c0, c1), between(rtts, m0, time.monotonic())
    finally:
        w.stop()
    during_ms, control_ms = stats(during), stats(control)
    print("%d queues named 'a'*230 + 'b%%05d' in vhost rx; AMQP probe on vhost 'probe' every %g ms"
          % (QUEUES, PROBE_MS))
    for pattern, dt, st in puts:
        print("  PUT pattern %-12s %9.1f ms%s" % (pattern, dt * 1000,
                                                 "" if st else "  (closed without an answer)"))
    for pattern, dt in rounds:
        print("  round %-12s applied to every queue after %9.1f ms" % (pattern, dt * 1000))
    print("  whole run %.1f ms" % (total * 1000))
    print("  AMQP round trips, control (polling only): %d, median %.2f ms, p99 %.2f ms, max %.2f ms"
          % control_ms)
    print("  AMQP round trips during the run: %d, median %.2f ms, p99 %.2f ms, max %.2f ms "
          "(target < 50)" % during_ms)
    for pattern, dt, st in puts:
        print("RESULT put pattern=%s ms=%.1f status=%d"
              % (urllib.parse.quote(pattern), dt * 1000, st))
    for pattern, dt in rounds:
        print("RESULT round pattern=%s applied_ms=%.1f" % (urllib.parse.quote(pattern), dt * 1000))
    print("RESULT control probes=%d median_ms=%.2f p99_ms=%.2f max_ms=%.2f" % control_ms)
    print("RESULT total_ms=%.1f probes=%d median_ms=%.2f p99_ms=%.2f max_ms=%.2f"
          % ((total * 1000,) + during_ms))


if __name__ == "__main__":
    main()
