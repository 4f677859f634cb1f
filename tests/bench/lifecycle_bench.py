#!/usr/bin/python3
"""Message-lifecycle benchmarks (tests/bench/lifecycle.sh runs them).

  limits   Scenarios 1 and 3 of `make bench` on a queue with a dead-letter
           exchange, a TTL, a length limit and a delivery limit, none of
           which fires, against the same queue without them; interleaved
           rounds, a fresh Warren per run. Target: ratio >= 0.95.
  hotpath  Scenarios 1 and 3 on BASE_BIN (a build before the expiry work)
           against this build, interleaved: what the expiry code costs a
           queue without TTLs.
  mass     1,000,000 messages expire at once (a policy's message-ttl of 1 ms
           applies to what is queued) while warren-perf keeps a fixed
           1000 msg/s flow on another queue: that flow's p99 and max, against
           the same flow alone; dropped, and dead-lettered into a third
           queue. With BASE_BIN, that build too. Target: p99 < 10 ms.
  instr    Broker instructions per message (callgrind, which this noisy
           shared machine cannot disturb) for scenarios 1 and 3: plain and
           limits queues on this build, and on BASE_BIN if set.
  quorum   A quorum queue (x-queue-type quorum, persistent 1 KiB, confirms,
           manual ack) on Warren and on the local RabbitMQ (127.0.0.1:5672,
           a queue name of its own, deleted after), interleaved: throughput
           and p99 at full speed, and p99 at a fixed 1000 msg/s.

Every loop is bounded; only 127.0.0.1 is contacted.
"""
import os
import statistics
import subprocess
import sys
import time

import pika

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mgmt_bench import PERF, WARREN_BIN, Warren, callgrind_ir, http_call, perf  # noqa: E402

ROUNDS = int(os.environ.get("ROUNDS", "3"))
DURATION = os.environ.get("DURATION", "4")
BASE_BIN = os.environ.get("BASE_BIN")
RABBIT_PORT = 5672
SCENARIOS = {
    "1": ["--size", "16", "--batch", "16", "--inflight", "5000"],
    "3": ["--size", "16", "--batch", "16", "--inflight", "5000", "--ack", "manual", "--prefetch", "100"],
}
# none of them fires: an hour's TTL, ten million messages, 1000 returns
LIMITS = ["--queue-arg", "x-dead-letter-exchange=bench.lifecycle.dlx",
          "--queue-arg", "x-message-ttl=3600000", "--queue-arg", "x-max-length=10000000",
          "--queue-arg", "x-delivery-limit=1000"]
FLOW = ["--size", "16", "--batch", "1", "--rate", "1000", "--inflight", "5000"]
QUORUM = ["--queue-arg", "x-queue-type=quorum", "--persistent", "--size", "1024"]
QUORUM_FULL = QUORUM + ["--confirm", "100", "--ack", "manual", "--prefetch", "100", "--inflight", "5000"]
QUORUM_RATE = QUORUM + ["--confirm", "100", "--ack", "manual", "--prefetch", "100", "--batch", "1",
                        "--rate", "1000", "--inflight", "5000"]


def interleaved(variants, rounds):
    """variants: [(label, binary, args)]; per scenario and label the
    recv_rate of each round (the order flips every round)."""
    rates = {}
    for rnd in range(rounds):
        for sc, args in SCENARIOS.items():
            order = variants if rnd % 2 == 0 else variants[::-1]
            for label, binary, extra in order:
                w = Warren(binary, management=False)
                try:
                    r = perf(w.amqp, args + extra + ["--duration", DURATION, "--warmup", "1",
                                                     "--broker-pid", str(w.proc.pid)])
                    rates.setdefault((sc, label), []).append(float(r["recv_rate"]))
                finally:
                    w.stop()
                time.sleep(1)
    return rates


def report_ratios(rates, a, b, what):
    """Medians, their ratio, and the median of the rounds' ratios (each
    round's pair ran back to back, so it shares that moment's noise)."""
    print("scenario | %s (msg/s) | %s (msg/s) | ratio of medians | median of round ratios "
          "(per round)" % (a, b))
    for sc in SCENARIOS:
        x, y = rates[(sc, a)], rates[(sc, b)]
        ratio = statistics.median(y) / statistics.median(x)
        paired = [q / p for p, q in zip(x, y)]
        print("  %-3s %12.0f %12.0f   %.3f   %.3f (%s)" % (
            sc, statistics.median(x), statistics.median(y), ratio, statistics.median(paired),
            ", ".join("%.3f" % r for r in paired)))
        print("RESULT mode=%s scenario=%s %s=%.0f %s=%.0f ratio=%.3f paired_ratio=%.3f" % (
            what, sc, a, statistics.median(x), b, statistics.median(y), ratio,
            statistics.median(paired)))


def cmd_limits():
    print("== limits: DLX + TTL + max-length + delivery-limit (none firing) vs none, "
          "%d rounds x %s s" % (ROUNDS, DURATION))
    rates = interleaved([("plain", WARREN_BIN, ["--queue", "bench.plain"]),
                         ("limits", WARREN_BIN, ["--queue", "bench.limits"] + LIMITS)], ROUNDS)
    report_ratios(rates, "plain", "limits", "limits")


def cmd_hotpath():
    if not BASE_BIN or not os.access(BASE_BIN, os.X_OK):
        sys.exit("hotpath: set BASE_BIN to a Warren built before the expiry work")
    print("== hotpath: %s (base) vs %s (this), plain queues, %d rounds x %s s"
          % (BASE_BIN, WARREN_BIN, ROUNDS, DURATION))
    rates = interleaved([("base", BASE_BIN, []), ("this", WARREN_BIN, [])], ROUNDS)
    report_ratios(rates, "base", "this", "hotpath")


def cmd_instr():
    variants = [("this", WARREN_BIN, "plain", ["--queue", "bench.plain"]),
                ("this", WARREN_BIN, "limits", ["--queue", "bench.limits"] + LIMITS)]
    if BASE_BIN:
        variants = [("base", BASE_BIN, q, a) for _, _, q, a in variants] + variants
    print("== instr: broker instructions per message under callgrind (150,000 - 50,000 messages)")
    for sc, args in SCENARIOS.items():
        for build, binary, queue, extra in variants:
            # the difference of two runs cancels start-up and shutdown
            per = (callgrind_ir(binary, False, args + extra, 150000) -
                   callgrind_ir(binary, False, args + extra, 50000)) / 100000
            print("  scenario %s %-4s %-6s %6.0f instructions per message" % (sc, build, queue, per))
            print("RESULT mode=instr scenario=%s build=%s queue=%s instr_per_msg=%.0f" % (
                sc, build, queue, per))
            sys.stdout.flush()


def count(ch, queue):
    return ch.queue_declare(queue, passive=True).method.message_count


def mass_once(binary, n, dead_letter):
    """One mass expiry under the flow; returns (flow result, expiry seconds)."""
    w = Warren(binary)
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", w.amqp))
        ch = c.channel()
        args = []
        if dead_letter:
            ch.queue_declare("bench.mass.dlq")
            args = ["--queue-arg", "x-dead-letter-exchange=",
                    "--queue-arg", "x-dead-letter-routing-key=bench.mass.dlq"]
        perf(w.amqp, ["--queue", "bench.mass", "--count", str(n), "--consumers", "0",
                      "--batch", "64", "--size", "16"] + args, timeout=600)
        for _ in range(600):
            if count(ch, "bench.mass") == n:
                break
            time.sleep(0.1)
        assert count(ch, "bench.mass") == n
        flow = subprocess.Popen([PERF, "--uri", "amqp://guest:guest@127.0.0.1:%d" % w.amqp,
                                 "--queue", "bench.flow", "--quiet", "--duration", "8",
                                 "--warmup", "1"] + FLOW, stdout=subprocess.PIPE, text=True)
        time.sleep(3)
        t0 = time.monotonic()
        status = http_call(w.http, "PUT", "/api/policies/%2F/bench-mass",
                           {"pattern": "^bench\\.mass$", "definition": {"message-ttl": 1},
                            "apply-to": "queues"})
        assert status in (201, 204), status
        took = None
        for _ in range(3000):
            if count(ch, "bench.mass") == 0:
                took = time.monotonic() - t0
                break
            time.sleep(0.002)
        if dead_letter:
            assert count(ch, "bench.mass.dlq") == n
        c.close()
        out, _ = flow.communicate(timeout=120)
        line = [x for x in out.splitlines() if x.startswith("RESULT")][-1]
        return dict(kv.split("=", 1) for kv in line.split()[1:]), took
    finally:
        w.stop()


def paged_once(binary, n, ttl_ms=6000):
    """n persistent messages in a durable queue with a TTL, paged out by a
    restart (their TTL counts from the recovery), expire together while the
    flow runs: dropped without their bodies being read. Returns (flow
    result, expiry seconds, recovery seconds, bytes the broker read)."""
    w = Warren(binary)
    perf(w.amqp, ["--queue", "bench.paged", "--persistent", "--count", str(n), "--consumers", "0",
                  "--batch", "64", "--size", "16", "--queue-arg", "x-message-ttl=%d" % ttl_ms],
         timeout=900)
    w.stop(keep=True)
    t_start = time.monotonic()
    w = Warren(binary, data_dir=w.dir)
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", w.amqp))
        ch = c.channel()
        t_ready = time.monotonic()  # the messages were restored (enqueued) before
        recovered = t_ready - t_start
        assert count(ch, "bench.paged") == n, count(ch, "bench.paged")
        flow = subprocess.Popen([PERF, "--uri", "amqp://guest:guest@127.0.0.1:%d" % w.amqp,
                                 "--queue", "bench.flow", "--quiet", "--duration", "8",
                                 "--warmup", "1"] + FLOW, stdout=subprocess.PIPE, text=True)
        with open("/proc/%d/io" % w.proc.pid) as f:
            rchar = int(next(x for x in f if x.startswith("rchar:")).split()[1])
        took = None  # none within 10 s of the TTL
        while time.monotonic() < t_ready + ttl_ms / 1000 + 10:
            if count(ch, "bench.paged") == 0:
                took = time.monotonic() - t_ready - ttl_ms / 1000
                break
            time.sleep(0.002)
        with open("/proc/%d/io" % w.proc.pid) as f:
            rchar = int(next(x for x in f if x.startswith("rchar:")).split()[1]) - rchar
        c.close()
        out, _ = flow.communicate(timeout=120)
        line = [x for x in out.splitlines() if x.startswith("RESULT")][-1]
        return dict(kv.split("=", 1) for kv in line.split()[1:]), took, recovered, rchar
    finally:
        w.stop()


def cmd_mass():
    n = int(os.environ.get("MASS", "1000000"))
    rounds = int(os.environ.get("MASS_ROUNDS", "2"))
    builds = [("this", WARREN_BIN)] + ([("base", BASE_BIN)] if BASE_BIN else [])
    print("== mass: %d messages expire at once while another queue flows at 1000 msg/s "
          "(8 s window, the expiry 2 s in), %d rounds" % (n, rounds))
    alone = []
    for _ in range(rounds):
        w = Warren(WARREN_BIN, management=False)
        try:
            r = perf(w.amqp, FLOW + ["--queue", "bench.flow", "--duration", "8", "--warmup", "1"])
            alone.append((float(r["p99_us"]), float(r["max_us"])))
        finally:
            w.stop()
    print("  flow alone (this build): p99 %.0f us, max %.0f us (medians)" % (
        statistics.median(a[0] for a in alone), statistics.median(a[1] for a in alone)))
    print("RESULT mode=mass build=this expiry=none p99_us=%.0f max_us=%.0f" % (
        statistics.median(a[0] for a in alone), statistics.median(a[1] for a in alone)))
    for label, binary in builds:
        for dl in (False, True):
            runs = [mass_once(binary, n, dl) for _ in range(rounds)]
            p99 = statistics.median(float(r["p99_us"]) for r, _ in runs)
            mx = statistics.median(float(r["max_us"]) for r, _ in runs)
            took = statistics.median(t for _, t in runs if t is not None)
            kind = "dead-lettered" if dl else "dropped"
            print("  %-4s %-13s in %5.0f ms: flow p99 %6.0f us, max %7.0f us (runs: %s)" % (
                label, kind, took * 1000, p99, mx,
                ", ".join("p99 %.0f max %.0f" % (float(r["p99_us"]), float(r["max_us"]))
                          for r, _ in runs)))
            print("RESULT mode=mass build=%s expiry=%s n=%d expiry_ms=%.0f p99_us=%.0f max_us=%.0f"
                  % (label, kind, n, took * 1000, p99, mx))
        r, took, recovered, read = paged_once(binary, n)
        when = "%.0f ms after their TTL" % (took * 1000) if took is not None else \
            "NOT within 10 s of their TTL"
        print("  %-4s paged, after a restart (up in %.1f s): all dropped %s, %.1f MB read "
              "meanwhile; flow p99 %.0f us, max %.0f us" % (
                  label, recovered, when, read / 1e6, float(r["p99_us"]), float(r["max_us"])))
        print("RESULT mode=mass build=%s expiry=paged_dropped n=%d expiry_ms=%.0f read_bytes=%d "
              "p99_us=%.0f max_us=%.0f" % (label, n, took * 1000 if took is not None else -1, read,
                                           float(r["p99_us"]), float(r["max_us"])))


def rabbit_up():
    try:
        pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", RABBIT_PORT)).close()
        return True
    except Exception:
        return False


def quorum_run(port, args, name):
    try:
        return perf(port, args + ["--queue", name, "--duration", DURATION, "--warmup", "1"],
                    timeout=300)
    finally:
        subprocess.run([PERF, "--uri", "amqp://guest:guest@127.0.0.1:%d" % port, "--queue", name,
                        "--delete-queues"], capture_output=True, timeout=60)


def cmd_quorum():
    if not rabbit_up():
        sys.exit("quorum: RabbitMQ is not reachable on 127.0.0.1:%d" % RABBIT_PORT)
    print("== quorum: Warren vs RabbitMQ quorum queues, persistent 1 KiB, confirm 100, manual ack, "
          "%d rounds x %s s" % (ROUNDS, DURATION))
    res = {}
    for rnd in range(ROUNDS):
        order = ["warren", "rabbitmq"] if rnd % 2 == 0 else ["rabbitmq", "warren"]
        for broker in order:
            name = "bench.lifecycle.qq.%d.%d" % (os.getpid(), rnd)
            w = Warren(WARREN_BIN, management=False) if broker == "warren" else None
            try:
                port = w.amqp if w else RABBIT_PORT
                full = quorum_run(port, QUORUM_FULL, name + ".full")
                fixed = quorum_run(port, QUORUM_RATE, name + ".rate")
            finally:
                if w:
                    w.stop()
            res.setdefault(broker, []).append((float(full["recv_rate"]), float(full["p99_us"]),
                                               float(fixed["p99_us"])))
            time.sleep(1)
    med = {b: [statistics.median(r[i] for r in res[b]) for i in range(3)] for b in res}
    print("figure | Warren | RabbitMQ | ratio")
    for i, (label, better) in enumerate((("throughput (msg/s)", "hi"), ("p99 at full speed (us)", "lo"),
                                         ("p99 at 1000 msg/s (us)", "lo"))):
        w, r = med["warren"][i], med["rabbitmq"][i]
        ratio = w / r if better == "hi" else r / w
        print("  %-24s %10.0f %10.0f   %.2fx %s" % (label, w, r, ratio,
                                                   "(Warren/RabbitMQ)" if better == "hi" else "(RabbitMQ/Warren)"))
    print("  per round warren: %s" % res["warren"])
    print("  per round rabbitmq: %s" % res["rabbitmq"])
    print("RESULT mode=quorum warren_rate=%.0f rabbit_rate=%.0f rate_ratio=%.2f warren_p99_us=%.0f "
          "rabbit_p99_us=%.0f warren_p99_fixed_us=%.0f rabbit_p99_fixed_us=%.0f" % (
              med["warren"][0], med["rabbitmq"][0], med["warren"][0] / med["rabbitmq"][0],
              med["warren"][1], med["rabbitmq"][1], med["warren"][2], med["rabbitmq"][2]))


if __name__ == "__main__":
    cmds = {"limits": cmd_limits, "hotpath": cmd_hotpath, "mass": cmd_mass, "quorum": cmd_quorum,
            "instr": cmd_instr}
    what = sys.argv[1:] or ["limits", "mass", "quorum"] + (["hotpath"] if BASE_BIN else [])
    if any(w not in cmds for w in what):
        sys.exit("usage: lifecycle_bench.py [limits|hotpath|mass|quorum|instr]...")
    for w in what:
        cmds[w]()
        sys.stdout.flush()
