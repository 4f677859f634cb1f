#!/usr/bin/python3
"""Management-plane benchmarks (tests/bench/mgmt.sh runs them).

  timing  With 10,000 queues: GET /api/queues?page=1&page_size=100, the full
          unpaged /api/queues and /api/overview, medians of several calls, on
          Warren and (RABBIT=1) on the local RabbitMQ, in a vhost created for
          the run and deleted after.
  p99     With 10,000 queues on Warren: warren-perf's fixed 1000 msg/s flow
          (scenario 7), alone and while a client loops the big requests.
  instr   Broker instructions per message (valgrind callgrind, which this
          noisy shared machine cannot disturb) for scenarios 1 and 3:
          BASE_BIN against this build with management on.
  ab      Throughput A/B for scenarios 1, 3 and 9: a build without the
          management plane (BASE_BIN) against this one with a client polling
          /api/overview and /api/queues every second, interleaved.
  console Throughput A/B for scenarios 1 and 9 on this build: nothing
          watching, against chromium holding the console open on the
          overview (refresh every 5 s; tests/browser/hold.mjs), interleaved.
  starve  With 10,000 queues: a confirming publisher (one message in
          flight) alone, then while 20 clients loop the full /api/queues
          (issue 17's item 7: its p99 must stay under 10 ms).
  hostile Issue 17's items 2 and 3: AMQP round trips (a passive declare
          every 2 ms) while costly ?use_regex=true filters run over 300
          long names -- the worst round trip (target < 50 ms); and the RSS
          that 12 unauthenticated 30 MB bodies add (target < 60 MB).

Every loop is bounded; only 127.0.0.1 is contacted.
"""
import base64
import http.client
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import pika

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WARREN_BIN = os.environ.get("WARREN_BIN", os.path.join(ROOT, "build/release/warren"))
PERF = os.environ.get("PERF", os.path.join(ROOT, "build/release/warren-perf"))
QUEUES = int(os.environ.get("QUEUES", "10000"))
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


class Warren:
    """A Warren on ephemeral ports in a temp dir, or data_dir to start again
    on one (management on or off)."""

    def __init__(self, binary=WARREN_BIN, management=True, data_dir=None):
        self.dir = data_dir or tempfile.mkdtemp(prefix="warren-mgmt-bench-")
        argv = [binary, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "data_dir=" + self.dir]
        if management:
            argv += ["--set", "management.tcp.port=0", "--set", "management.tcp.ip=127.0.0.1",
                     "--set", "prometheus.tcp.port=0", "--set", "prometheus.tcp.ip=127.0.0.1"]
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.proc = subprocess.Popen(argv, stderr=self.log, stdout=subprocess.DEVNULL)
        self.amqp = self.http = self.prometheus = None
        for _ in range(100):
            self.log.seek(0)
            text = self.log.read()
            m = re.search(r"AMQP listening on 127\.0\.0\.1:(\d+)", text)
            h = re.search(r"management listening on 127\.0\.0\.1:(\d+)", text)
            pr = re.search(r"prometheus listening on 127\.0\.0\.1:(\d+)", text)
            if m and ((h and pr) or not management):
                self.amqp, self.http = int(m.group(1)), int(h.group(1)) if h else None
                self.prometheus = int(pr.group(1)) if pr else None
                break
            time.sleep(0.1)
        if not self.amqp:
            raise RuntimeError("warren did not start: " + text)

    def stop(self, keep=False):
        """SIGTERM; the data dir is removed unless `keep`."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def http_get(port, path, vhost_path=None):
    """(seconds, bytes) of one GET, body read to the end."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    t = time.perf_counter()
    c.request("GET", path, headers={"Authorization": AUTH})
    r = c.getresponse()
    body = r.read()
    dt = time.perf_counter() - t
    c.close()
    if r.status != 200:
        raise RuntimeError("%s: %d %s" % (path, r.status, body[:200]))
    return dt, len(body)


def http_call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    hdrs = {"Authorization": AUTH, "Content-Type": "application/json"}
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=hdrs)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status


def declare_queues(amqp_port, vhost, n):
    c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", amqp_port, vhost))
    ch = c.channel()
    for i in range(n):
        ch.queue_declare("mgmt.bench.%05d" % i)
    c.close()


def timings(port, vhost):
    v = urllib.parse.quote(vhost, safe="")
    calls = [("page 100", "/api/queues/%s?page=1&page_size=100" % v, 15),
             ("full", "/api/queues/%s" % v, 5),
             ("overview", "/api/overview", 10)]
    out = {}
    for label, path, n in calls:
        http_get(port, path)  # warm
        runs = [http_get(port, path) for _ in range(n)]
        out[label] = (statistics.median(r[0] for r in runs) * 1000, runs[0][1])
    return out


def cmd_timing():
    rows = {}
    w = Warren()
    try:
        declare_queues(w.amqp, "/", QUEUES)
        rows["Warren"] = timings(w.http, "/")
    finally:
        w.stop()
    if os.environ.get("RABBIT", "1") == "1":
        vhost = "mgmt-bench-%d" % os.getpid()
        rport = int(os.environ.get("RABBIT_MGMT_PORT", "15672"))
        try:
            if http_call(rport, "PUT", "/api/vhosts/" + vhost, {}) not in (201, 204):
                raise RuntimeError("cannot create vhost")
            http_call(rport, "PUT", "/api/permissions/%s/guest" % vhost,
                      {"configure": ".*", "write": ".*", "read": ".*"})
            declare_queues(5672, vhost, QUEUES)
            time.sleep(6)  # RabbitMQ's statistics arrive every 5 s
            rows["RabbitMQ"] = timings(rport, vhost)
        except Exception as e:
            print("RabbitMQ: %s" % e)
        finally:
            http_call(rport, "DELETE", "/api/vhosts/" + vhost)
    print("%d queues: median ms (response bytes)" % QUEUES)
    print("%-10s %-22s %-22s %-22s" % ("broker", "page_size=100", "full /api/queues", "/api/overview"))
    for broker, t in rows.items():
        print("%-10s %-22s %-22s %-22s" % (broker, *("%.1f (%d)" % t[k] for k in ("page 100", "full", "overview"))))
    for broker, t in rows.items():
        print("RESULT broker=%s page_ms=%.1f full_ms=%.1f overview_ms=%.1f" %
              (broker, t["page 100"][0], t["full"][0], t["overview"][0]))


def perf(amqp_port, args, timeout=120):
    out = subprocess.run([PERF, "--uri", "amqp://guest:guest@127.0.0.1:%d" % amqp_port, "--quiet"] + args,
                         capture_output=True, text=True, timeout=timeout)
    line = [l for l in out.stdout.splitlines() if l.startswith("RESULT")]
    if not line:
        raise RuntimeError("warren-perf: " + out.stdout[-500:] + out.stderr[-500:])
    return dict(kv.split("=", 1) for kv in line[-1].split()[1:])


PROM_CALLS = [("metrics", "/metrics", 10), ("per-object", "/metrics/per-object", 5)]


def prom_timings(port):
    out = {}
    for label, path, n in PROM_CALLS:
        http_get(port, path)  # warm
        runs = [http_get(port, path) for _ in range(n)]
        out[label] = (statistics.median(r[0] for r in runs) * 1000, runs[0][1])
    return out


def cmd_prometheus():
    """/metrics and /metrics/per-object with QUEUES queues, Warren and
    RabbitMQ (a vhost of its own with the same queues, deleted after); then
    Warren's 1000 msg/s p99 while a client loops /metrics back to back."""
    rows, p99 = {}, {}
    w = Warren()
    try:
        declare_queues(w.amqp, "/", QUEUES)
        rows["Warren"] = prom_timings(w.prometheus)
        p99["idle"] = float(perf(w.amqp, P99_ARGS)["p99_us"])
        for label, path in (("/metrics loop", "/metrics"), ("per-object loop", "/metrics/per-object")):
            loop = Looper(w.prometheus, [path])
            loop.start()
            p99[label] = float(perf(w.amqp, P99_ARGS)["p99_us"])
            loop.stop()
            p99[label + " requests"] = loop.count
    finally:
        w.stop()
    if os.environ.get("RABBIT", "1") == "1":
        vhost = "prometheus-bench-%d" % os.getpid()
        rport = int(os.environ.get("RABBIT_MGMT_PORT", "15672"))
        pport = int(os.environ.get("RABBIT_PROMETHEUS_PORT", "15692"))
        try:
            if http_call(rport, "PUT", "/api/vhosts/" + vhost, {}) not in (201, 204):
                raise RuntimeError("cannot create vhost")
            http_call(rport, "PUT", "/api/permissions/%s/guest" % vhost,
                      {"configure": ".*", "write": ".*", "read": ".*"})
            declare_queues(5672, vhost, QUEUES)
            time.sleep(6)  # RabbitMQ's metrics arrive every 5 s
            rows["RabbitMQ"] = prom_timings(pport)
        except Exception as e:
            print("RabbitMQ: %s" % e)
        finally:
            http_call(rport, "DELETE", "/api/vhosts/" + vhost)
    print("%d queues: median ms (response bytes)" % QUEUES)
    for broker, t in rows.items():
        print("%-10s /metrics %.1f (%d)  /metrics/per-object %.1f (%d)" %
              (broker, *t["metrics"], *t["per-object"]))
        print("RESULT broker=%s metrics_ms=%.1f per_object_ms=%.1f" %
              (broker, t["metrics"][0], t["per-object"][0]))
    for label in ("idle", "/metrics loop", "per-object loop"):
        print("  Warren 1000 msg/s p99 %-16s %8.0f us  %s" % (label, p99[label],
              "%d scrapes" % p99[label + " requests"] if label != "idle" else ""))


class Looper(threading.Thread):
    """Requests `paths` back to back (or every `every` seconds) until stopped."""

    def __init__(self, port, paths, every=0.0):
        super().__init__(daemon=True)
        self.port, self.paths, self.every = port, paths, every
        self.stop_flag = threading.Event()
        self.count, self.errors = 0, 0

    def run(self):
        deadline = time.monotonic() + 600
        while not self.stop_flag.is_set() and time.monotonic() < deadline:
            for p in self.paths:
                try:
                    http_get(self.port, p)
                    self.count += 1
                except Exception:
                    self.errors += 1
            if self.every:
                self.stop_flag.wait(self.every)

    def stop(self):
        self.stop_flag.set()
        self.join(70)


P99_ARGS = ["--size", "16", "--batch", "1", "--rate", "1000", "--inflight", "5000",
            "--duration", os.environ.get("P99_DURATION", "10"), "--warmup", "1"]


def cmd_p99():
    rounds = int(os.environ.get("ROUNDS", "3"))
    if os.environ.get("OFFLOOP") == "compare":
        return p99_compare(rounds)
    w = Warren()
    try:
        declare_queues(w.amqp, "/", QUEUES)
        results = {"idle": [], "paged loop": [], "full loop": []}
        for _ in range(rounds):
            results["idle"].append(float(perf(w.amqp, P99_ARGS)["p99_us"]))
            for label, paths in (("paged loop", ["/api/queues?page=1&page_size=100", "/api/overview"]),
                                 ("full loop", ["/api/queues", "/api/queues?page=1&page_size=100"])):
                loop = Looper(w.http, paths)
                loop.start()
                r = perf(w.amqp, P99_ARGS)
                loop.stop()
                results[label].append(float(r["p99_us"]))
                results[label + " requests"] = results.get(label + " requests", 0) + loop.count
    finally:
        w.stop()
    print("%d queues, fixed 1000 msg/s: p99 latency (us), median of %d" % (QUEUES, rounds))
    for label in ("idle", "paged loop", "full loop"):
        print("  %-12s p99 %8.0f  (runs: %s)  %s" % (label, statistics.median(results[label]),
              ", ".join("%.0f" % x for x in results[label]),
              "%d HTTP requests" % results.get(label + " requests", 0) if label != "idle" else ""))
        print("RESULT mode=p99 load=%s p99_us=%.0f" % (label.replace(" ", "_"), statistics.median(results[label])))


def p99_compare(rounds):
    """The in-loop sliced writer against the off-loop prototype
    (WARREN_MGMT_OFFLOOP=1: snapshot on the loop, render on a thread), each
    while a client loops the full /api/queues, interleaved. The prototype
    lives in commit cad85fd (mgmt-ui/proto_offloop.c); build that commit to
    rerun this comparison -- later builds ignore the variable, so both
    columns then measure the in-loop design."""
    res = {}
    for rnd in range(rounds):
        order = [("in-loop", "0"), ("off-loop", "1")]
        if rnd % 2:
            order.reverse()
        for label, flag in order:
            os.environ["WARREN_MGMT_OFFLOOP"] = flag
            w = Warren()
            try:
                declare_queues(w.amqp, "/", QUEUES)
                perf(w.amqp, P99_ARGS[:-4] + ["--duration", "2", "--warmup", "0"])  # settle
                loop = Looper(w.http, ["/api/queues"])
                loop.start()
                r = perf(w.amqp, P99_ARGS)
                loop.stop()
                res.setdefault(label, []).append((float(r["p99_us"]), loop.count))
            finally:
                w.stop()
    os.environ.pop("WARREN_MGMT_OFFLOOP", None)
    print("%d queues, fixed 1000 msg/s while a client loops the full /api/queues: p99 (us)" % QUEUES)
    for label, runs in res.items():
        print("  %-9s median p99 %8.0f  (runs: %s)" % (label, statistics.median(r[0] for r in runs),
              ", ".join("%.0f/%d req" % r for r in runs)))
        print("RESULT mode=p99_compare design=%s p99_us=%.0f" % (label, statistics.median(r[0] for r in runs)))


AB_SCENARIOS = {
    "1": ["--size", "16", "--batch", "16", "--inflight", "5000"],
    "3": ["--size", "16", "--batch", "16", "--inflight", "5000", "--ack", "manual", "--prefetch", "100"],
    "9": ["--size", "1024", "--persistent", "--confirm", "100", "--ack", "manual", "--prefetch", "100",
          "--inflight", "5000"],
}


CONFIRM_ARGS = ["--size", "16", "--batch", "1", "--confirm", "1", "--inflight", "5000",
                "--duration", os.environ.get("P99_DURATION", "10"), "--warmup", "1"]


def cmd_starve():
    clients = int(os.environ.get("CLIENTS", "20"))
    w = Warren()
    try:
        declare_queues(w.amqp, "/", QUEUES)
        rows = [("alone", perf(w.amqp, CONFIRM_ARGS), None)]
        loops = [Looper(w.http, ["/api/queues"]) for _ in range(clients)]
        for lp in loops:
            lp.start()
        r = perf(w.amqp, CONFIRM_ARGS)
        for lp in loops:
            lp.stop()
        rows.append(("%d x /api/queues" % clients, r, loops))
    finally:
        w.stop()
    print("%d queues, a publisher with confirms (one in flight), 16 B" % QUEUES)
    for label, r, loops in rows:
        extra = ""
        if loops:
            extra = "  %d lists served, %d errors" % (sum(lp.count for lp in loops), sum(lp.errors for lp in loops))
        print("  %-20s %8.0f msg/s  p99 %8.0f us  max %8.0f us%s" % (
            label, float(r["sent_rate"]), float(r["p99_us"]), float(r.get("max_us", "0")), extra))
        print("RESULT mode=starve load=%s rate=%s p99_us=%s" % (label.replace(" ", "_"), r["sent_rate"], r["p99_us"]))


class RoundTrips(threading.Thread):
    """A passive queue.declare every 2 ms on its own connection; the
    worst and the p99 round trip."""

    def __init__(self, amqp_port, queue):
        super().__init__(daemon=True)
        self.port, self.queue = amqp_port, queue
        self.stop_flag, self.times = threading.Event(), []

    def run(self):
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        ch = c.channel()
        deadline = time.monotonic() + 600
        while not self.stop_flag.is_set() and time.monotonic() < deadline:
            t = time.perf_counter()
            ch.queue_declare(self.queue, passive=True)
            self.times.append(time.perf_counter() - t)
            time.sleep(0.002)
        c.close()

    def stop(self):
        self.stop_flag.set()
        self.join(60)
        ts = sorted(self.times) or [0.0]
        return ts[-1] * 1000, ts[int(len(ts) * 0.99) - 1 if len(ts) > 1 else 0] * 1000


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        return int(next(l for l in f if l.startswith("VmRSS:")).split()[1])


HOSTILE_FILTERS = ["a" + "+" * 22, "(a*)*\\1c", "(a+)+$", "(a|aa)+$", "(.*a){12}$"]


def unauthenticated_bodies(http_port, n=12, size=30 << 20):
    import socket
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", http_port), timeout=10)
        s.sendall(("POST /api/definitions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\n\r\n" % size).encode())
        s.setblocking(False)
        sent = 0
        try:
            while sent < size:
                sent += s.send(b"x" * 65536)
        except BlockingIOError:
            pass
        socks.append(s)
    time.sleep(1)
    return socks


def cmd_hostile():
    w = Warren()
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", w.amqp))
        ch = c.channel()
        names = ["a" * 230 + "b%05d" % i for i in range(300)]
        for n in names:
            ch.queue_declare(n)
        print("300 queues named 'a'*230 + 'b%05d'; round trips: a passive declare every 2 ms")
        for f in HOSTILE_FILTERS:
            rt = RoundTrips(w.amqp, names[0])
            rt.start()
            time.sleep(0.2)
            t = time.perf_counter()
            try:
                took, size = http_get(w.http, "/api/queues?use_regex=true&name=" + urllib.parse.quote(f))
                answer = "200, %d bytes" % size
            except RuntimeError as e:
                took, answer = time.perf_counter() - t, str(e)[-60:]
            time.sleep(0.2)
            worst, p99 = rt.stop()
            print("  filter %-14s answered in %7.1f ms (%s); round trip max %6.1f ms, p99 %6.1f ms" %
                  (f, took * 1000, answer, worst, p99))
            print("RESULT mode=hostile filter=%s request_ms=%.1f rt_max_ms=%.1f rt_p99_ms=%.1f" %
                  (urllib.parse.quote(f), took * 1000, worst, p99))
        c.close()
        before = rss_kb(w.proc.pid)
        socks = unauthenticated_bodies(w.http)
        after = rss_kb(w.proc.pid)
        for s in socks:
            s.close()
        print("  12 unauthenticated 30 MB bodies: RSS %d -> %d KB (+%.1f MB)" %
              (before, after, (after - before) / 1024))
        print("RESULT mode=hostile bodies_rss_added_mb=%.1f" % ((after - before) / 1024))
    finally:
        w.stop()


def cmd_ab():
    base = os.environ.get("BASE_BIN")
    if not base or not os.access(base, os.X_OK):
        sys.exit("ab: set BASE_BIN to a Warren built without the management plane (e.g. main)")
    rounds = int(os.environ.get("ROUNDS", "3"))
    dur = os.environ.get("DURATION", "4")
    rates = {}
    for rnd in range(rounds):
        for sc, args in AB_SCENARIOS.items():
            order = [("base", base, False), ("mgmt", WARREN_BIN, True)]
            if rnd % 2:
                order.reverse()
            for label, binary, mgmt in order:
                w = Warren(binary, management=mgmt)
                loop = None
                try:
                    if mgmt:
                        loop = Looper(w.http, ["/api/overview", "/api/queues"], every=1.0)
                        loop.start()
                    r = perf(w.amqp, args + ["--duration", dur, "--warmup", "1", "--broker-pid",
                                             str(w.proc.pid)])
                    rates.setdefault((sc, label), []).append(float(r["recv_rate"]))
                    cpu_us = float(r.get("broker_cpu", 0)) / 100 / max(float(r["recv_rate"]), 1) * 1e6
                    rates.setdefault((sc, label, "cpu"), []).append(cpu_us)
                finally:
                    if loop:
                        loop.stop()
                    w.stop()
                time.sleep(1)
    print("scenario | without management (msg/s) | with management, polled every 1 s | ratio")
    for sc in AB_SCENARIOS:
        b, m = rates[(sc, "base")], rates[(sc, "mgmt")]
        ratios = [y / x for x, y in zip(b, m)]
        print("  %-3s %12.0f %12.0f   ratio %.3f  (per round: %s)" % (
            sc, statistics.median(b), statistics.median(m), statistics.median(m) / statistics.median(b),
            ", ".join("%.3f" % r for r in ratios)))
        cb, cm = statistics.median(rates[(sc, "base", "cpu")]), statistics.median(rates[(sc, "mgmt", "cpu")])
        print("      broker CPU per message: %.3f us without, %.3f us with (%+.1f%%)" % (cb, cm, (cm / cb - 1) * 100))
        print("RESULT mode=ab scenario=%s base=%.0f mgmt=%.0f ratio=%.3f cpu_us_base=%.3f cpu_us_mgmt=%.3f" % (
            sc, statistics.median(b), statistics.median(m), statistics.median(m) / statistics.median(b), cb, cm))


class Console:
    """Chromium holding Warren's console open on the overview. Its profile is
    on tmpfs: on this one machine the browser's own disk writes would
    otherwise share the file system whose fsyncs the persistent scenario
    waits for (scenario 9 measured 0.76 so), which a browser on an
    operator's desk never does. For the same reason it runs at nice 19
    (CONSOLE_NICE): on an operator's desk it has CPUs of its own, here it
    takes only what the broker and the load generator leave; cpu() says
    how much that was."""

    def __init__(self, http_port, seconds, blank=False):
        nice = os.environ.get("CONSOLE_NICE", "19")
        url = "about:blank" if blank else "http://127.0.0.1:%d" % http_port
        self.proc = subprocess.Popen(["nice", "-n", nice, "node", os.path.join(ROOT, "tests/browser/hold.mjs"),
                                      url, str(seconds)],
                                     stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, TMPDIR="/dev/shm"))
        line = self.proc.stdout.readline()
        if "console open" not in line:
            self.proc.kill()
            raise RuntimeError("console did not open: %r" % line)
        self.cpu_at_open = self.cpu()

    def cpu(self):
        """CPU seconds used so far by the browser: node and its descendants
        (Playwright starts chromium in a session of its own)."""
        procs = {}
        for pid in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                procs[int(pid)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
            except (OSError, IndexError, ValueError):
                continue
        mine, grew = {self.proc.pid}, True
        while grew:
            more = {pid for pid, (ppid, _) in procs.items() if ppid in mine} - mine
            grew = bool(more)
            mine |= more
        return sum(procs[p][1] for p in mine if p in procs) / os.sysconf("SC_CLK_TCK")

    def stop(self):
        used = self.cpu() - self.cpu_at_open
        self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return "%s, browser CPU %.2f s" % (out.strip(), used)


def cmd_console():
    """Scenarios 1 and 9 with nothing watching, with the same browser open on
    an empty page (the control: what a browser on this 2-core machine costs
    by itself) and with the console open on the overview, interleaved."""
    rounds = int(os.environ.get("ROUNDS", "3"))
    dur = os.environ.get("DURATION", "20")
    labels = ["none", "blank", "console"]
    rates = {}
    for rnd in range(rounds):
        for sc in ("1", "9"):
            order = labels[rnd % 3:] + labels[:rnd % 3]
            for label in order:
                w = Warren(WARREN_BIN, management=True)
                con = None
                try:
                    if label != "none":
                        con = Console(w.http, int(dur) + 30, blank=label == "blank")
                    r = perf(w.amqp, AB_SCENARIOS[sc] + ["--duration", dur, "--warmup", "1",
                                                         "--broker-pid", str(w.proc.pid)])
                    rates.setdefault((sc, label), []).append(float(r["recv_rate"]))
                    cpu_us = float(r.get("broker_cpu", 0)) / 100 / max(float(r["recv_rate"]), 1) * 1e6
                    rates.setdefault((sc, label, "cpu"), []).append(cpu_us)
                finally:
                    if con:
                        print("  round %d scenario %s %s: %s" % (rnd + 1, sc, label, con.stop()))
                    w.stop()
                time.sleep(1)
    print("scenario | none (msg/s) | browser on a blank page | console on the overview, 5 s refresh "
          "| console / none | console / blank")
    for sc in ("1", "9"):
        n, b, c = (rates[(sc, l)] for l in labels)
        mn, mb, mc = (statistics.median(x) for x in (n, b, c))
        print("  %-3s %12.0f %12.0f %12.0f   %.3f  %.3f  (console/blank per round: %s)" % (
            sc, mn, mb, mc, mc / mn, mc / mb, ", ".join("%.3f" % (z / y) for y, z in zip(b, c))))
        cn, cb, cc = (statistics.median(rates[(sc, l, "cpu")]) for l in labels)
        print("      broker CPU per message: %.3f us none, %.3f us blank, %.3f us console" % (cn, cb, cc))
        print("RESULT mode=console scenario=%s none=%.0f blank=%.0f console=%.0f ratio=%.3f "
              "ratio_blank=%.3f cpu_us_none=%.3f cpu_us_blank=%.3f cpu_us_console=%.3f" % (
                  sc, mn, mb, mc, mc / mn, mc / mb, cn, cb, cc))


def callgrind_ir(binary, mgmt, args, n):
    """Total instructions callgrind counts in a broker that carries n messages."""
    d = tempfile.mkdtemp(prefix="warren-cg-")
    out = os.path.join(d, "cg.out")
    argv = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, binary,
            "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "data_dir=" + d]
    if mgmt:
        argv += ["--set", "management.tcp.port=0", "--set", "management.tcp.ip=127.0.0.1"]
    log = open(os.path.join(d, "log"), "w+")
    p = subprocess.Popen(argv, stderr=log, stdout=subprocess.DEVNULL)
    try:
        port = None
        for _ in range(300):
            log.seek(0)
            m = re.search(r"AMQP listening on 127\.0\.0\.1:(\d+)", log.read())
            if m:
                port = int(m.group(1))
                break
            time.sleep(0.1)
        perf(port, args + ["--count", str(n)], timeout=600)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(60)
    with open(out) as f:
        total = int(re.search(r"summary: (\d+)", f.read()).group(1))
    shutil.rmtree(d, ignore_errors=True)
    return total


def cmd_instr():
    base = os.environ.get("BASE_BIN")
    if not base:
        sys.exit("instr: set BASE_BIN to a Warren built without the management plane")
    for sc in ("1", "3"):
        args = AB_SCENARIOS[sc]
        for label, binary, mgmt in (("base", base, False), ("mgmt", WARREN_BIN, True)):
            # the difference of two runs cancels start-up and shutdown
            per = (callgrind_ir(binary, mgmt, args, 150000) - callgrind_ir(binary, mgmt, args, 50000)) / 100000
            print("scenario %s %-4s %6.0f instructions per message" % (sc, label, per))
            print("RESULT mode=instr scenario=%s build=%s instr_per_msg=%.0f" % (sc, label, per))


if __name__ == "__main__":
    cmds = {"timing": cmd_timing, "p99": cmd_p99, "ab": cmd_ab, "instr": cmd_instr,
            "console": cmd_console, "prometheus": cmd_prometheus, "starve": cmd_starve,
            "hostile": cmd_hostile}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        sys.exit("usage: mgmt_bench.py timing|p99|ab|instr|console|prometheus")
    cmds[sys.argv[1]]()
