#!/usr/bin/python3
"""Soak: Warren under mixed load for SOAK_S seconds, then checks that nothing
leaked, hung or was lost. Prints TAP and one summary line.

Load (threads, each with its own pika connection; see WORKERS below):
producers with confirms (persistent and transient) into four durable queues,
consumers acking (some nacks with requeue, and now and then a close with
unacked messages in flight), connection churn (clean closes, abrupt closes
after the handshake, closes in the middle of it), deliberate channel errors
(404, 406), queue and exchange declare/delete churn, policy changes through
the management API and management polling of the full lists and /metrics.

Checks: every confirmed message is acked exactly once, or delivered again
only with redelivered=true; a probe round trip every second answers within
PROBE_TIMEOUT; RSS and open descriptors are sampled every second and must
be flat: after the clients leave, RSS is at most max(1.5 x, +64 MB) the RSS
at the end of the warm-up (a fifth of the run, 10 s to 120 s), and the
broker holds no more sockets than when idle (and at most 4 more
descriptors: the journal segment the run opened); the broker exits 0 on
SIGTERM with no sanitizer report in its log (the ASan build reports leaks
at exit).

Env: SOAK_S (60), SOAK_RATE (messages/s per producer, 40), WARREN_BIN
(build/release/warren), SOAK_REPORT=file (the TAP lines and the summary are written there),
SOAK_TLS (1; 0 = plain only): the broker also gets a TLS listener (listeners.ssl.default, RabbitMQ's
ssl_options.* keys; a CA and server certificate made with openssl unless
SOAK_TLS_CERT, SOAK_TLS_KEY and SOAK_TLS_CA name them) and half of the
clients use it.
"""
import contextlib
import http.client
import json
import logging
import os
import random
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import pika
from pika import exceptions as pex

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration" / "py"))
import harness  # noqa: E402  (broker start/stop, RawClient)

SOAK_S = int(os.environ.get("SOAK_S", "60"))
RATE = float(os.environ.get("SOAK_RATE", "40"))
TLS = os.environ.get("SOAK_TLS", "1") == "1"
WARM_S = min(120, max(10, SOAK_S // 5))
PROBE_TIMEOUT = 30.0
DRAIN_TIMEOUT = 120.0
STABLE = ["soak.q.%d" % i for i in range(4)]
N_PRODUCERS, N_CONSUMERS = 4, 3
MGMT_PATHS = ["/api/queues", "/api/connections", "/api/channels", "/api/overview",
              "/api/exchanges", "/api/consumers", "/api/bindings"]


logging.getLogger("pika").setLevel(logging.CRITICAL)  # errors are counted, not logged


def log(msg):
    print("# " + msg, flush=True)


# ---------------------------------------------------------------- ledger

CONFIRMED, SEEN, ACKED = 1, 2, 4


class Ledger:
    """Per producer, one byte of flags per sequence number."""

    def __init__(self):
        self.lock = threading.Lock()
        self.flags = [bytearray() for _ in range(N_PRODUCERS)]
        self.c = dict(published=0, confirmed=0, nacked=0, delivered=0, redelivered=0, acked=0,
                      requeued=0, duplicates=0, after_ack=0)
        self.examples = []

    def _mark(self, p, s, bit):
        f = self.flags[p]
        if s >= len(f):
            f.extend(bytes(max(s + 1 - len(f), 65536)))
        old = f[s]
        f[s] = old | bit
        return old

    def count(self, key, n=1):
        with self.lock:
            self.c[key] += n

    def confirm(self, p, s):
        with self.lock:
            self._mark(p, s, CONFIRMED)
            self.c["confirmed"] += 1

    def deliver(self, p, s, redelivered):
        with self.lock:
            old = self._mark(p, s, SEEN)
            self.c["delivered"] += 1
            if redelivered:
                self.c["redelivered"] += 1
            if old & ACKED:
                self.c["after_ack"] += 1
            if old & SEEN and not redelivered:
                self.c["duplicates"] += 1
                if len(self.examples) < 5:
                    self.examples.append("p%d:%d delivered again with redelivered=false" % (p, s))

    def ack(self, p, s):
        with self.lock:
            self._mark(p, s, ACKED)
            self.c["acked"] += 1

    def lost(self):
        with self.lock:
            out = []
            for p, f in enumerate(self.flags):
                for s, v in enumerate(f):
                    if v & CONFIRMED and not v & ACKED:
                        out.append("p%d:%d" % (p, s))
            return out


# ---------------------------------------------------------------- run state

class Soak:
    def __init__(self, broker, tls_port, tls_ctx):
        self.broker = broker
        self.tls_port, self.tls_ctx = tls_port, tls_ctx
        self.stop_load = threading.Event()   # producers and churners stop
        self.stop_all = threading.Event()    # consumers and probe stop
        self.ledger = Ledger()
        self.lock = threading.Lock()
        self.activity = {}                    # worker kind -> operations done
        self.errors = []                      # unexpected, (worker, text)
        self.probe_ok = time.monotonic()
        self.probe_max = 0.0
        self.probe_n = 0
        self.probe_fail = []

    def bump(self, kind, n=1):
        with self.lock:
            self.activity[kind] = self.activity.get(kind, 0) + n

    def error(self, who, text):
        with self.lock:
            self.errors.append((who, text))
        log("%s: unexpected: %s" % (who, text.strip().splitlines()[-1] if text.strip() else text))

    def params(self, use_tls, heartbeat=30):
        host, port = self.broker.host, self.broker.port
        kw = {}
        if use_tls:
            port = self.tls_port
            kw["ssl_options"] = pika.SSLOptions(self.tls_ctx, "localhost")
        return pika.ConnectionParameters(host=host, port=port, heartbeat=heartbeat,
                                         credentials=pika.PlainCredentials("guest", "guest"),
                                         socket_timeout=15, blocked_connection_timeout=60,
                                         connection_attempts=1, **kw)

    def connect(self, use_tls, **kw):
        return pika.BlockingConnection(self.params(use_tls and TLS, **kw))

    def http(self, method, path, body=None, port=None):
        conn = http.client.HTTPConnection("127.0.0.1", port or self.broker.mgmt_port, timeout=60)
        try:
            hdr = {"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="}  # guest:guest
            data = None
            if body is not None:
                data = json.dumps(body).encode()
                hdr["Content-Type"] = "application/json"
            conn.request(method, path, body=data, headers=hdr)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def repeat(self, who, kind, step, pause, use_tls=None):
        """Calls step(conn) every pause seconds until the load stops, on one
        connection (none when use_tls is None), counting each as kind."""
        def run():
            conn = None if use_tls is None else self.connect(use_tls)
            try:
                while not self.stop_load.is_set():
                    step(conn)
                    self.bump(kind)
                    self.stop_load.wait(pause)
            finally:
                if conn is not None:
                    close(conn)
        self.loop(who, self.stop_load, run)

    def loop(self, who, stop, body, pause=0.5):
        """Runs body() until stop; an exception is an unexpected error, then reconnect."""
        while not stop.is_set():
            try:
                body()
            except Exception:
                if stop.is_set() and self.stop_all.is_set():
                    return
                self.error(who, traceback.format_exc())
                stop.wait(pause)


# ---------------------------------------------------------------- workers

def producer(s, p):
    rng = random.Random(p)
    mode = 2 if p % 2 == 0 else 1            # persistent / transient
    seq = [0]

    def run():
        conn = s.connect(p % 2 == 1)
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            interval = 1.0 / RATE
            nxt = time.monotonic()
            while not s.stop_load.is_set():
                n = seq[0]
                seq[0] += 1
                size = 65536 if rng.random() < 0.01 else rng.randrange(10, 4096)
                props = pika.BasicProperties(message_id="%d:%d" % (p, n), delivery_mode=mode)
                s.ledger.count("published")
                try:
                    ch.basic_publish("amq.direct", STABLE[n % len(STABLE)], b"x" * size, props,
                                     mandatory=True)
                    s.ledger.confirm(p, n)
                except pex.NackError:
                    s.ledger.count("nacked")
                nxt += interval
                delay = nxt - time.monotonic()
                if delay > 0:
                    s.stop_load.wait(delay)
                else:
                    nxt = time.monotonic()
        finally:
            close(conn)
    s.loop("producer %d" % p, s.stop_load, run)


class Reconnect(Exception):
    pass


def consumer(s, c):
    rng = random.Random(100 + c)

    def on_msg(ch, m, props, body):
        p, n = (int(x) for x in props.message_id.split(":"))
        s.ledger.deliver(p, n, m.redelivered)
        if not s.stop_load.is_set() and rng.random() < 0.001:
            raise Reconnect()                 # this and the prefetched ones stay unacked
        if not s.stop_load.is_set() and rng.random() < 0.03:
            ch.basic_nack(m.delivery_tag, requeue=True)
            s.ledger.count("requeued")
        else:
            ch.basic_ack(m.delivery_tag)
            s.ledger.ack(p, n)

    def run():
        conn = s.connect(c % 2 == 0)
        try:
            ch = conn.channel()
            ch.basic_qos(prefetch_count=50)
            for q in STABLE:
                ch.basic_consume(q, on_msg)
            while not s.stop_all.is_set():
                conn.process_data_events(time_limit=0.5)
        except Reconnect:
            s.bump("consumer closes with unacked")
        finally:
            close(conn)
    s.loop("consumer %d" % c, s.stop_all, run)


def close(conn):
    try:
        if conn.is_open:
            conn.close()
    except Exception:
        pass


def churn(s, w):
    """Connections opened and closed: cleanly, abruptly after the handshake,
    and in the middle of it."""
    i = [0]
    host, port = s.broker.host, s.broker.port

    def step(_):
        i[0] += 1
        k = i[0] % 4
        use_tls = TLS and (i[0] // 4) % 2 == 1
        if k == 0:
            conn = s.connect(use_tls)
            ch = conn.channel()
            ch.queue_declare("", exclusive=True)
            conn.close()
        elif k == 1:
            raw = harness.RawClient((host, s.tls_port if use_tls else port), timeout=10)
            if use_tls:
                raw.sock = s.tls_ctx.wrap_socket(raw.sock, server_hostname="localhost")
            raw.handshake()
            raw.open_channel(1)
            raw.close()                               # no connection.close
        elif k == 2:
            sk = socket.create_connection((host, s.tls_port if use_tls else port), timeout=10)
            if use_tls:
                sk = s.tls_ctx.wrap_socket(sk, server_hostname="localhost")
            sk.sendall(b"AMQP\x00\x00\x09\x01")
            sk.recv(64)                               # connection.start, then gone
            sk.close()
        else:
            sk = socket.create_connection((host, port), timeout=10)
            sk.sendall(b"AMQP")                       # half a protocol header
            sk.close()
    s.repeat("churn %d" % w, "connection churn", step, 0.05)


def channel_errors(s):
    i = [0]
    expected = {0: 404, 1: 406, 2: 404, 3: 406, 4: 406}

    def attempt(ch, k):
        if k == 0:
            ch.queue_declare("soak.nothere.%d" % i[0], passive=True)
        elif k == 1:
            ch.queue_declare("soak.err.q", auto_delete=False)
            ch.queue_declare("soak.err.q", durable=True)
        elif k == 2:
            ch.basic_publish("soak.nothere", "k", b"x")
            ch.queue_declare("", exclusive=True)
        elif k == 3:
            ch.exchange_declare("soak.err.x", "direct")
            ch.exchange_declare("soak.err.x", "fanout")
        else:
            ch.basic_ack(delivery_tag=999)
            ch.queue_declare("", exclusive=True)

    def step(conn):
        i[0] += 1
        k = i[0] % 5
        try:
            attempt(conn.channel(), k)
            raise AssertionError("case %d: no channel error" % k)
        except pex.ChannelClosedByBroker as e:
            if e.reply_code != expected[k]:
                raise AssertionError("case %d: %d %s, wanted %d"
                                     % (k, e.reply_code, e.reply_text, expected[k]))
    s.repeat("channel errors", "channel errors", step, 0.1, use_tls=True)


def queue_churn(s):
    rng = random.Random(7)
    i = [0]
    variants = [{}, {"x-max-length": 10}, {"x-message-ttl": 200}, {"x-expires": 3000},
                {"x-queue-type": "quorum"}, {"x-overflow": "reject-publish", "x-max-length": 3}]

    def step(conn):
        i[0] += 1
        ch = conn.channel()
        q = "soak.churn.%d" % (i[0] % 50)
        args = rng.choice(variants)
        ch.queue_delete(q)                 # whatever a policy or expiry left
        ch.queue_declare(q, durable=args.get("x-queue-type") == "quorum", arguments=args)
        x = "soak.churn.x%d" % (i[0] % 6)
        ch.exchange_declare(x, "topic", auto_delete=i[0] % 2 == 0)
        ch.queue_bind(q, x, "soak.#")
        for n in range(5):
            ch.basic_publish(x, "soak.%d" % n, b"y" * rng.randrange(1, 2000))
        ch.basic_get(q, auto_ack=rng.random() < 0.5)
        if rng.random() < 0.7:
            ch.queue_delete(q)
        if rng.random() < 0.3:
            ch.exchange_delete(x)
        ch.close()
    s.repeat("queue churn", "queue churn", step, 0.05, use_tls=False)


def policies(s):
    rng = random.Random(11)
    churn_defs = [{"max-length": 5}, {"message-ttl": 100, "expires": 20000},
                  {"overflow": "drop-head", "max-length-bytes": 4000}]
    stable_defs = [{"queue-mode": "lazy"}, {"max-length": 100000000}, {"queue-version": 2}]

    def put(name, pattern, definition, prio):
        st, body = s.http("PUT", "/api/policies/%2F/" + name,
                          {"pattern": pattern, "definition": definition, "priority": prio,
                           "apply-to": "queues"})
        if st not in (201, 204):
            raise AssertionError("PUT policy %s: %d %r" % (name, st, body[:200]))

    def step(_):
        put("soak-churn", r"^soak\.churn\.", rng.choice(churn_defs), rng.randrange(5))
        put("soak-stable", r"^soak\.q\.", rng.choice(stable_defs), 1)
        if rng.random() < 0.3:
            for name in ("soak-churn", "soak-stable"):
                st, body = s.http("DELETE", "/api/policies/%2F/" + name)
                if st != 204:
                    raise AssertionError("DELETE policy %s: %d" % (name, st))
    s.repeat("policies", "policy changes", step, 1.0)


def mgmt_poller(s, w):
    i = [w]

    def step(_):
        i[0] += 1
        if i[0] % (len(MGMT_PATHS) + 1) == 0:
            st, body = s.http("GET", "/metrics", port=s.broker.prometheus_port)
            ok = st == 200 and b"rabbitmq_" in body
        else:
            path = MGMT_PATHS[i[0] % (len(MGMT_PATHS) + 1) - 1]
            st, body = s.http("GET", path)
            ok = st == 200 and isinstance(json.loads(body), (list, dict))
        if not ok:
            raise AssertionError("GET #%d: %d %r" % (i[0], st, body[:200]))
    s.repeat("mgmt %d" % w, "management requests", step, 0.2)


def probe(s):
    """A round trip a second on one connection (reopened after an error)."""
    def run():
        conn = s.connect(False, heartbeat=10)
        try:
            ch = conn.channel()
            while not s.stop_all.is_set():
                t = time.monotonic()
                ch.queue_declare(STABLE[0], passive=True)
                now = time.monotonic()
                with s.lock:
                    s.probe_ok = now
                    s.probe_n += 1
                    s.probe_max = max(s.probe_max, now - t)
                s.stop_all.wait(1.0)
        finally:
            close(conn)
    s.loop("probe", s.stop_all, run, pause=1.0)


# ---------------------------------------------------------------- broker and sampling

def make_certs(d):
    """A CA and a server certificate for localhost, made with openssl."""
    def run(*argv):
        subprocess.run(["openssl"] + list(argv), cwd=d, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=soak-ca",
        "-keyout", "ca.key", "-out", "ca.pem")
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
        "-keyout", "server.key", "-out", "server.csr")
    Path(d, "ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "2", "-extfile", "ext", "-out", "server.pem")
    return os.path.join(d, "server.pem"), os.path.join(d, "server.key"), os.path.join(d, "ca.pem")


def free_port():
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        return sk.getsockname()[1]


def sample(pid):
    """(RSS bytes, open descriptors); (0, 0) once the process is gone."""
    rss = 0
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
        return rss, len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return 0, 0


def fd_targets(pid):
    """What the process's descriptors point at, sockets as "socket"."""
    out = []
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            with contextlib.suppress(OSError):
                t = os.readlink("/proc/%d/fd/%s" % (pid, fd))
                out.append("socket" if t.startswith("socket:") else t)
    except OSError:
        pass
    return sorted(out)


def join_all(threads, seconds):
    """Joins threads within one shared deadline, so a hung broker costs it once."""
    deadline = time.monotonic() + seconds
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))


def mb(n):
    return "%.1f MB" % (n / 1048576)


class Tap:
    def __init__(self):
        self.n = self.failed = 0
        self.lines = []

    def __call__(self, ok, name, detail=""):
        self.n += 1
        self.failed += 0 if ok else 1
        self.lines.append("%s %d - soak: %s" % ("ok" if ok else "not ok", self.n, name))
        print(self.lines[-1], flush=True)
        for line in detail.strip().splitlines()[-30:] if detail else []:
            print("# " + line)


def main():
    tap = Tap()
    settings, tls_port, tls_ctx, certdir = [], None, None, None
    if TLS:
        certdir = tempfile.mkdtemp(prefix="warren-soak-tls-")
        cert, key, ca = (os.environ.get("SOAK_TLS_CERT"), os.environ.get("SOAK_TLS_KEY"),
                         os.environ.get("SOAK_TLS_CA"))
        if not (cert and key and ca):
            cert, key, ca = make_certs(certdir)
        tls_port = free_port()
        settings = ["listeners.ssl.default=127.0.0.1:%d" % tls_port, "ssl_options.certfile=" + cert,
                    "ssl_options.keyfile=" + key, "ssl_options.cacertfile=" + ca,
                    "ssl_options.verify=verify_none"]
        tls_ctx = ssl.create_default_context(cafile=ca)
    broker = harness.WarrenProcess(settings)
    try:
        broker.start()
    except Exception as e:
        tap(False, "broker starts", str(e))
        print("1..%d" % tap.n)
        return 1
    pid = broker.proc.pid
    tap(True, "broker starts (%s, pid %d, AMQP %d%s)" % (harness.WARREN_BIN, pid, broker.port,
                                                          ", TLS %d" % tls_port if TLS else ""))
    s = Soak(broker, tls_port, tls_ctx)
    setup = s.connect(False)
    ch = setup.channel()
    for q in STABLE:
        ch.queue_declare(q, durable=True)
        ch.queue_bind(q, "amq.direct", q)
    setup.close()
    time.sleep(0.5)
    idle_rss, idle_fds = sample(pid)
    idle_targets = fd_targets(pid)

    load = [threading.Thread(target=producer, args=(s, p)) for p in range(N_PRODUCERS)]
    load += [threading.Thread(target=churn, args=(s, w)) for w in range(2)]
    load += [threading.Thread(target=f, args=(s,)) for f in (channel_errors, queue_churn, policies)]
    load += [threading.Thread(target=mgmt_poller, args=(s, w)) for w in range(3)]
    steady = [threading.Thread(target=consumer, args=(s, c)) for c in range(N_CONSUMERS)]
    steady.append(threading.Thread(target=probe, args=(s,)))
    for t in load + steady:
        t.daemon = True
        t.start()

    samples = []             # (seconds since start, rss, fds)
    hung = None
    t0 = time.monotonic()
    next_report = 60
    while time.monotonic() - t0 < SOAK_S and broker.proc.poll() is None:
        time.sleep(1.0)
        now = time.monotonic()
        rss, fds = sample(pid)
        samples.append((now - t0, rss, fds))
        if now - s.probe_ok > PROBE_TIMEOUT and hung is None:
            hung = "no probe answer for %.0f s at t=%.0f s" % (now - s.probe_ok, now - t0)
            log(hung)
        if now - t0 >= next_report:
            next_report += 60
            log("t=%.0f s rss %s fds %d %s" % (now - t0, mb(rss), fds, dict(s.ledger.c)))
    alive = broker.proc.poll() is None
    s.stop_load.set()
    join_all(load, 60)
    # Drain: consumers ack until every confirmed message is acked.
    deadline = time.monotonic() + DRAIN_TIMEOUT
    while alive and time.monotonic() < deadline and s.ledger.lost():
        time.sleep(0.5)
    s.stop_all.set()
    join_all(steady, 60)
    stuck = [t.name for t in load + steady if t.is_alive()]
    # Clients are gone; the broker's descriptors settle once it has seen every close.
    end_rss, end_fds, end_targets = 0, 0, []
    for _ in range(20):
        if broker.proc.poll() is not None:
            break
        end_rss, end_fds = sample(pid)
        end_targets = fd_targets(pid)
        if end_targets.count("socket") <= idle_targets.count("socket"):
            break
        time.sleep(0.5)

    tap(alive, "broker alive for %d s" % SOAK_S, "" if alive else broker.log_tail())
    tap(hung is None and not stuck,
        "broker answered every probe (%d probes, slowest %.3f s)" % (s.probe_n, s.probe_max),
        (hung or "") + ("\nthreads stuck: %s" % stuck if stuck else ""))
    lost = s.ledger.lost()
    c = s.ledger.c
    tap(not lost and c["duplicates"] == 0 and c["confirmed"] > 0,
        "every confirmed message consumed once or redelivered (%d confirmed, %d acked, "
        "%d redelivered, %d requeued, %d redelivered after an ack, %d duplicates, %d lost)"
        % (c["confirmed"], c["acked"], c["redelivered"], c["requeued"], c["after_ack"],
           c["duplicates"], len(lost)),
        "\n".join(s.ledger.examples + ["lost: " + " ".join(lost[:20])] if lost else s.ledger.examples))
    kinds = ["connection churn", "channel errors", "queue churn", "policy changes",
             "management requests"]
    idle = [k for k in kinds if not s.activity.get(k)]
    tap(not s.errors and not idle,
        "every worker made progress with no unexpected error (%s)"
        % ", ".join("%s %d" % (k, v) for k, v in sorted(s.activity.items())),
        "\n".join("%s: %s" % (w, e.strip().splitlines()[-1]) for w, e in s.errors[:20])
        + ("\nno progress: %s" % idle if idle else ""))

    warm = [x for x in samples if x[0] >= WARM_S]
    warm_rss = warm[0][1] if warm else idle_rss
    peak_rss = max([x[1] for x in samples] + [idle_rss])
    peak_fds = max([x[2] for x in samples] + [idle_fds])
    rss_bound = max(1.5 * warm_rss, warm_rss + 64 * 1048576)
    tap(bool(warm) and 0 < end_rss <= rss_bound,
        "RSS flat: end %s <= %s (after %d s warm-up %s; start %s, peak %s)"
        % (mb(end_rss), mb(rss_bound), WARM_S, mb(warm_rss), mb(idle_rss), mb(peak_rss)))
    # Sockets must all be closed again; files may differ by the odd journal
    # segment or store file the run made.
    extra = list(end_targets)
    for t in idle_targets:
        if t in extra:
            extra.remove(t)
    extra_sockets = extra.count("socket")
    tap(0 < end_fds <= idle_fds + 4 and extra_sockets == 0,
        "descriptors back to idle: end %d <= %d + 4, no extra socket (peak %d)"
        % (end_fds, idle_fds, peak_fds), "beyond the idle broker's: %s" % extra if extra else "")

    rc = broker.stop()
    tap(rc == 0, "broker exits 0 on SIGTERM", "" if rc == 0 else "status %r\n%s" % (rc, broker.log_tail()))
    bad = [ln for ln in broker.log_lines
           if "Sanitizer" in ln or "runtime error:" in ln or "SUMMARY:" in ln]
    tap(not bad, "no sanitizer report in the broker's log", "\n".join(bad[:20]))
    if certdir:
        subprocess.run(["rm", "-rf", certdir])
    print("1..%d" % tap.n)
    summary = ("soak %s: %d s%s, %s; %d confirmed (%.0f/s), %d acked, %d redelivered, %d duplicates, "
               "%d lost; probes %d, slowest %.3f s; RSS start %s, after %d s warm-up %s, peak %s, "
               "end %s; fds start %d, peak %d, end %d; %s; %d failed checks"
               % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), SOAK_S,
                  " TLS+plain" if TLS else " plain only", os.path.basename(harness.WARREN_BIN)
                  + " (" + harness.WARREN_BIN.split("/")[-2] + ")",
                  c["confirmed"], c["confirmed"] / max(1, SOAK_S), c["acked"], c["redelivered"],
                  c["duplicates"], len(lost), s.probe_n, s.probe_max, mb(idle_rss), WARM_S,
                  mb(warm_rss), mb(peak_rss), mb(end_rss), idle_fds, peak_fds, end_fds,
                  ", ".join("%s %d" % (k, v) for k, v in sorted(s.activity.items())), tap.failed))
    print(summary, flush=True)
    if os.environ.get("SOAK_REPORT"):
        with open(os.environ["SOAK_REPORT"], "w") as f:
            minutes = " ".join("%.1f/%d" % (x[1] / 1048576, x[2]) for x in samples[59::60])
            f.write("\n".join(tap.lines + [summary, "# RSS MB/descriptors each minute: " + minutes]) + "\n")
    return 1 if tap.failed else 0


if __name__ == "__main__":
    sys.exit(main())
