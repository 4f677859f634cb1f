#!/usr/bin/python3
"""Warren's 3-node cluster (etcd, min_isr 2) against a 3-node RabbitMQ
cluster with one quorum queue, in one interleaved run on this machine (the
issue 21 figures). Run by tests/bench/cluster.sh, which records the output.

Each cluster lives in network namespaces of its own (tests/cluster/
netns.py: a Netns of 3 for Warren with its 3-member etcd, another Netns of 3
for RabbitMQ, rabbit_cluster.py), both up for the whole run; warren-perf
runs in the host namespace against Warren's leader (the node whose AMQP
port accepts) and against RabbitMQ's node 1 (where the quorum queue is
declared, so its leader is there too). Persistent messages with confirms
into one durable queue (Warren: a classic durable queue, replicated like
everything else; RabbitMQ: x-queue-type=quorum, default settings):

  throughput  P producers (confirm window W each), C consumers acking
              (manual, multiple, prefetch W), for --duration s
  latency     1 producer at --rate msg/s, 1 consumer, same shape: publish
              to deliver and publish to confirm percentiles

Round r runs throughput then latency, Warren first in odd rounds and
RabbitMQ first in even ones; the queue is deleted after every run. The
figures are medians over the rounds. During throughput runs each node's
CPU (/proc/<pid>/stat) and fsync + fdatasync calls (`perf stat` on the
syscalls tracepoints, when available) are counted over the measured window.

Replication overhead: for each message size, one producer with confirms and
one consumer move --overhead-count messages through the leader, while the
host-side veth counters of each follower (tx: bytes the bridge delivered to
the follower, rx: what it sent back) are read before and after; an idle
window of the same length before it gives the background (etcd, leases),
which is subtracted. The same for RabbitMQ's followers (nodes 2 and 3).

Usage: cluster_bench.py [--rounds N] [--duration S] [--warmup S] [--producers P]
       [--consumers C] [--window W] [--size B] [--rate R] [--overhead-sizes 16,1024,65536]
       [--overhead-bytes B] [--no-rabbit]
Needs root (namespaces, RabbitMQ as its user), build/release/warren and
build/release/warren-perf, etcd, RabbitMQ.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "cluster"))
import netns  # noqa: E402
from rabbit_cluster import RabbitCluster  # noqa: E402

PERF = os.environ.get("PERF") or os.path.join(REPO, "build", "release", "warren-perf")
QUEUE = "cluster-bench"
TICK = os.sysconf("SC_CLK_TCK")


def log(*a):
    print(*a, flush=True)


def result_line(out):
    lines = [ln for ln in out.splitlines() if ln.startswith("RESULT")]
    if not lines:
        return None
    return {k: v for k, v in (kv.split("=", 1) for kv in lines[-1].split()[1:])}


def cpu_ticks(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime
    except (OSError, IndexError, ValueError):
        return 0


def machine_ticks():
    """(busy, total) jiffies of every CPU: /proc/stat's first line."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]  # idle + iowait
    return sum(v) - idle, sum(v)


def perf_stat_available():
    if not shutil.which("perf"):
        return False
    r = subprocess.run(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_fdatasync", "true"],
                       capture_output=True, text=True)
    return r.returncode == 0


class Target:
    """A cluster under test: how to reach its queue's leader, its node
    processes (name -> pid) and its veths."""

    def __init__(self, name, url, leader_pid, pids, net, leader, queue_args):
        self.name, self.url, self.leader_pid = name, url, leader_pid
        self.pids, self.net, self.leader = pids, net, leader
        self.queue_args = queue_args

    def followers(self):
        return [i for i in range(1, self.net.n + 1) if i != self.leader]


def perf_argv(t, extra):
    argv = [PERF, "--uri", t.url, "--allow-host", t.net.ip(t.leader), "--queue", QUEUE, "--persistent", "--quiet",
            "--broker-pid", str(t.leader_pid)]
    for a in t.queue_args:
        argv += ["--queue-arg", a]
    return argv + extra


def delete_queue(t):
    subprocess.run(perf_argv(t, ["--delete-queues"]), capture_output=True, text=True, timeout=120)


def run_perf(t, extra, window=None, count_syncs=False):
    """One warren-perf run against t; with window=(warmup, duration), node
    CPU (and syscalls) over the measured window. Returns (RESULT dict, info)."""
    argv = perf_argv(t, extra)
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    info = {}
    if window:
        warmup, duration = window
        time.sleep(warmup)
        t0, c0 = time.monotonic(), {n: cpu_ticks(pid) for n, pid in t.pids.items()}
        m0 = machine_ticks()
        counters = {}
        if count_syncs:
            for n, pid in t.pids.items():
                if n.startswith("etcd"):
                    continue
                counters[n] = subprocess.Popen(
                    ["perf", "stat", "-x,", "-e", "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync",
                     "-p", str(pid), "--", "sleep", str(duration)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(duration)
        dt = time.monotonic() - t0
        info["cpu"] = {n: 100.0 * (cpu_ticks(pid) - c0[n]) / TICK / dt for n, pid in t.pids.items()}
        m1 = machine_ticks()
        info["machine_busy"] = 100.0 * (m1[0] - m0[0]) / max(1, m1[1] - m0[1])
        syncs = {}
        for n, cp in counters.items():
            _, err = cp.communicate(timeout=60)
            total = 0
            for ln in err.splitlines():
                f = ln.split(",")
                if len(f) > 2 and f[0].strip().isdigit():
                    total += int(f[0])
            syncs[n] = total / duration
        info["syncs"] = syncs
    out, _ = p.communicate(timeout=900)
    r = result_line(out)
    if r is None or r.get("errors", "1") != "0":
        log("  %s: warren-perf failed:\n%s" % (t.name, out[-2000:]))
    delete_queue(t)
    return r, info


# ---------------------------------------------------------------- set-up

def start_warren(cm_args):
    cm = netns.cluster(n=3, start=False, **cm_args)
    c = cm.__enter__()
    w = c.warren
    for i in (1, 2, 3):
        w.start(i, wait=None)
        if not w.wait_log(i, "cluster: node n%d" % i, timeout=20):
            raise RuntimeError(w.log_tail(i))
    deadline = time.monotonic() + 60
    leader = None
    while time.monotonic() < deadline:
        for i in (1, 2, 3):
            try:
                socket.create_connection((c.net.ip(i), w.AMQP_PORT), timeout=0.3).close()
                leader = i
            except OSError:
                pass
        if leader:
            isr = [ln for ln in w.nodes[leader].proc.log_lines if "in-sync replicas now" in ln]
            if isr and "now 3 of" in isr[-1]:
                break
        time.sleep(0.2)
    else:
        raise RuntimeError("no Warren leader with an ISR of 3 after 60 s")
    pids = {"warren-n%d" % i: w.pid(i) for i in (1, 2, 3)}
    pids.update({"etcd-n%d" % i: c.etcd.pid(i) for i in (1, 2, 3)})
    t = Target("warren", w.amqp_url(leader), w.pid(leader), pids, c.net, leader, [])
    return cm, c, t


def start_rabbit():
    net = netns.Netns(3)
    r = RabbitCluster(net)
    r.start_all()
    version = r.ctl(1, "version").strip()
    pids = {"beam-n%d" % i: r.pid(i) for i in (1, 2, 3)}
    t = Target("rabbitmq", r.amqp_url(1), r.pid(1), pids, net, 1, ["x-queue-type=quorum"])
    return net, r, t, version


# ---------------------------------------------------------------- replication overhead

def veth_bytes(net, i):
    base = "/sys/class/net/%s/statistics/" % net.veth(i)
    with open(base + "tx_bytes") as f, open(base + "rx_bytes") as g:
        return int(f.read()), int(g.read())  # tx: to the node, rx: from it


def overhead(t, size, count, window):
    """Bytes per message to (and from) each follower for `count` messages
    of `size` bytes, the idle background subtracted."""
    fl = t.followers()
    # background: an idle window, scaled to the run's length below
    b0 = {i: veth_bytes(t.net, i) for i in fl}
    time.sleep(5)
    b1 = {i: veth_bytes(t.net, i) for i in fl}
    bg = {i: ((b1[i][0] - b0[i][0]) / 5.0, (b1[i][1] - b0[i][1]) / 5.0) for i in fl}
    s0 = {i: veth_bytes(t.net, i) for i in fl}
    t0 = time.monotonic()
    r, _ = run_perf(t, ["--producers", "1", "--consumers", "1", "--size", str(size),
                        "--confirm", str(window), "--ack", "manual", "--prefetch", str(window),
                        "--count", str(count)])
    dt = time.monotonic() - t0
    s1 = {i: veth_bytes(t.net, i) for i in fl}
    rows = []
    for i in fl:
        tx = (s1[i][0] - s0[i][0] - bg[i][0] * dt) / count
        rx = (s1[i][1] - s0[i][1] - bg[i][1] * dt) / count
        rows.append((i, tx, rx, bg[i][0]))
    return r, dt, rows


# ---------------------------------------------------------------- main

def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--warmup", type=float, default=3)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--consumers", type=int, default=4)
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--overhead-sizes", default="16,1024,65536")
    ap.add_argument("--overhead-bytes", type=int, default=64 << 20,
                    help="messages per overhead run: this many body bytes, 2000 to 50000 messages")
    ap.add_argument("--no-rabbit", action="store_true")
    a = ap.parse_args()
    if not os.access(PERF, os.X_OK):
        sys.exit("%s missing: make build/release/warren-perf" % PERF)
    syncs = perf_stat_available()
    started = time.monotonic()

    log("# parameters: throughput %d producers (confirm window %d each), %d consumers (manual "
        "multiple acks, prefetch %d), %d-byte persistent messages, one durable queue, %g s "
        "(after %g s warm-up); latency: 1 producer at %d msg/s, 1 consumer, same shape, %g s; "
        "%d rounds, medians" % (a.producers, a.window, a.consumers, a.window, a.size,
                                a.duration, a.warmup, a.rate, a.duration, a.rounds))
    cm, wc, wt = start_warren(dict(min_isr=2))
    log("# warren: 3 nodes in %s-n1..3 (10.%d.0.1-3), etcd 3 members, min_isr 2, lease_ttl %g s, "
        "isr_timeout %g s; leader n%d; up after %.0f s" % (wc.net.prefix, wc.net.k, wc.warren.lease_ttl,
                                                          wc.warren.isr_timeout, wt.leader,
                                                          time.monotonic() - started))
    rnet = rabbit = rt = None
    try:
        targets = [wt]
        if not a.no_rabbit:
            t1 = time.monotonic()
            rnet, rabbit, rt, version = start_rabbit()
            targets.append(rt)
            log("# rabbitmq %s: 3 nodes rabbit@10.%d.0.1-3 in %s-n1..3, joined to n1, quorum queue "
                "declared on n1 (its leader); up after %.0f s" % (version, rnet.k, rnet.prefix,
                                                                  time.monotonic() - t1))
        tput_args = ["--producers", str(a.producers), "--consumers", str(a.consumers),
                     "--size", str(a.size), "--confirm", str(a.window), "--ack", "manual",
                     "--prefetch", str(a.window), "--duration", str(a.duration), "--warmup", str(a.warmup)]
        lat_args = ["--producers", "1", "--consumers", "1", "--rate", str(a.rate),
                    "--size", str(a.size), "--confirm", str(a.window), "--ack", "manual",
                    "--prefetch", str(a.window), "--duration", str(a.duration), "--warmup", str(a.warmup)]
        res = {t.name: {"tput": [], "lat": [], "cpu": [], "syncs": [], "busy": []} for t in targets}
        for rnd in range(1, a.rounds + 1):
            order = targets if rnd % 2 else targets[::-1]
            for kind, args in (("tput", tput_args), ("lat", lat_args)):
                for t in order:
                    r, info = run_perf(t, args, (a.warmup, a.duration), count_syncs=(kind == "tput" and syncs))
                    res[t.name][kind].append(r)
                    res[t.name]["busy"].append(info["machine_busy"])
                    if kind == "tput":
                        res[t.name]["cpu"].append(info["cpu"])
                        res[t.name]["syncs"].append(info["syncs"])
                    if r:
                        log("RESULT round=%d broker=%s run=%s confirm_rate=%s recv_rate=%s p50_us=%s p99_us=%s "
                            "confirm_p50_us=%s confirm_p99_us=%s broker_cpu=%s tool_limited=%s stalls=%s "
                            "errors=%s tool_cpu=%s machine_busy_pct=%.0f node_cpu=%s syncs_per_s=%s"
                            % (rnd, t.name, kind, r["confirm_rate"], r["recv_rate"], r["p50_us"],
                               r["p99_us"], r.get("confirm_p50_us"), r.get("confirm_p99_us"),
                               r["broker_cpu"], r["tool_limited"], r["stalls"], r["errors"],
                               r["tool_cpu_total"], info["machine_busy"],
                               ",".join("%s:%.0f" % kv for kv in sorted(info["cpu"].items())),
                               ",".join("%s:%.0f" % kv for kv in sorted(info.get("syncs", {}).items()))))
                    else:
                        log("RESULT round=%d broker=%s run=%s errors=1" % (rnd, t.name, kind))

        def fig(name, kind, key):
            return med([float(r[key]) for r in res[name][kind] if r and r.get("errors") == "0"])

        log("")
        log("%-44s %12s %12s %8s %s" % ("figure (median of %d rounds)" % a.rounds, "Warren", "RabbitMQ", "ratio", "target"))
        rows = [("throughput, confirmed msg/s", "tput", "confirm_rate", "W/R", ">= 3"),
                ("throughput, delivered msg/s", "tput", "recv_rate", "W/R", ""),
                ("latency at %d msg/s: deliver p50 us" % a.rate, "lat", "p50_us", "R/W", ""),
                ("latency at %d msg/s: deliver p99 us" % a.rate, "lat", "p99_us", "R/W", ">= 3"),
                ("latency at %d msg/s: confirm p50 us" % a.rate, "lat", "confirm_p50_us", "R/W", ""),
                ("latency at %d msg/s: confirm p99 us" % a.rate, "lat", "confirm_p99_us", "R/W", ">= 3"),
                ("throughput run: confirm p99 us", "tput", "confirm_p99_us", "R/W", "")]
        for label, kind, key, how, target in rows:
            w = fig("warren", kind, key)
            r = fig("rabbitmq", kind, key) if rt else float("nan")
            ratio = (w / r if how == "W/R" else r / w) if rt and w and r else float("nan")
            log("%-44s %12.0f %12.0f %8.2f %s" % (label, w, r, ratio, (how + " " + target).strip()))
        for t in targets:
            log("%s: machine CPU busy %.0f%% (mean over its runs, both cores, this run's and any other "
                "load); warren-perf %.0f%% of a core in throughput runs" % (
                    t.name, statistics.mean(res[t.name]["busy"]), fig(t.name, "tput", "tool_cpu_total")))
            cpus = res[t.name]["cpu"]
            log("%s node CPU during throughput (%% of a core, mean of rounds): %s" % (
                t.name, ", ".join("%s %.0f" % (n, statistics.mean(c[n] for c in cpus)) for n in sorted(t.pids))))
            if syncs:
                sy = res[t.name]["syncs"]
                rate = fig(t.name, "tput", "confirm_rate")
                log("%s fsync+fdatasync calls/s during throughput (mean of rounds): %s; confirmed msg per "
                    "leader sync %.1f" % (t.name, ", ".join("%s %.0f" % (n, statistics.mean(s[n] for s in sy))
                                                             for n in sorted(sy[0])),
                                          rate / max(1e-9, statistics.mean(s[[k for k in s if k.endswith(
                                              "n%d" % t.leader)][0]] for s in sy))))

        log("")
        log("# replication overhead: bytes on each follower's veth per message (background "
            "subtracted); tx = to the follower, rx = from it")
        sizes = [int(x) for x in a.overhead_sizes.split(",")]
        for t in targets:
            for size in sizes:
                count = max(2000, min(50000, a.overhead_bytes // size))
                r, dt, rows = overhead(t, size, count, a.window)
                for i, tx, rx, bg in rows:
                    log("RESULT overhead broker=%s size=%d count=%d seconds=%.1f follower=n%d tx_per_msg=%.0f "
                        "rx_per_msg=%.0f tx_ratio=%.2f background_tx_per_s=%.0f confirm_rate=%s"
                        % (t.name, size, count, dt, i, tx, rx, tx / size, bg, r and r.get("confirm_rate")))
        log("# run time %.0f s" % (time.monotonic() - started))
    finally:
        if rabbit:
            rabbit.stop()
        if rnet:
            rnet.teardown()
        cm.__exit__(None, None, None)


if __name__ == "__main__":
    main()
