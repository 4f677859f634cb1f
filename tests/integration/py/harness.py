"""Shared harness for Warren's Python integration tests.

It finds a broker (starts Warren on an ephemeral port in a fresh temp dir, or
uses WARREN_TEST_TARGET=host:port), opens pika connections, makes unique names
and cleans them up, and provides RawClient: the conformance suite's byte-exact
AMQP client on a plain socket (conformance/python/rawamqp.py) pointed at the
broker under test, for protocol-error tests. Every expectation in these tests
was checked against a real RabbitMQ 3.10; Warren must behave the same.
"""
import atexit
import contextlib
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

import pika
from pika import exceptions as pex

REPO = Path(__file__).resolve().parents[3]

# The raw-socket client lives with the conformance suite, which runs on its
# own from conformance/python; this tree borrows that one module from there
# (appended, so the conformance folder shadows nothing of ours).
_RAWAMQP_DIR = str(REPO / "conformance" / "python")
if _RAWAMQP_DIR not in sys.path:
    sys.path.append(_RAWAMQP_DIR)
import rawamqp  # noqa: E402
# Frame and field-table builders, re-exported for the tests (h.raw_frame, ...).
from rawamqp import (FRAME_BODY, FRAME_END, FRAME_HEADER, FRAME_HEARTBEAT, FRAME_METHOD,  # noqa: E402,F401
                     PROTOCOL_HEADER, Closed, all_properties_bytes, all_types_table, amqplain_response,
                     body_bytes, header_bytes, longstr, method_payload, raw_frame, shortstr)

TARGET = os.environ.get("WARREN_TEST_TARGET") or None
WARREN_BIN = os.environ.get("WARREN_BIN") or str(REPO / "build" / "release" / "warren")
# For investigation, not CI: WARREN_TEST_SET="log.level=debug ..." adds --set
# options to every Warren started here, WARREN_TEST_LOG=FILE appends their logs.
EXTRA_SETTINGS = os.environ.get("WARREN_TEST_SET", "").split()
LOG_COPY = os.environ.get("WARREN_TEST_LOG") or None
USER, PASSWORD, VHOST = "guest", "guest", "/"
LISTEN_RE = re.compile(r"AMQP listening on ([0-9.]+):([0-9]+)")
# logged before "AMQP listening": known once that is
STREAM_RE = re.compile(r"stream protocol listening on ([0-9.]+):([0-9]+)")
MGMT_RE = re.compile(r"management listening on ([0-9.]+):([0-9]+)")
PROM_RE = re.compile(r"prometheus listening on ([0-9.]+):([0-9]+)")
CONTROL_RE = re.compile(r"control socket at (\S+)")
START_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0

# Reply codes (amqp-rabbitmq-0.9.1.json).
REPLY_SUCCESS = 200
CONTENT_TOO_LARGE = 311
NO_ROUTE = 312
NO_CONSUMERS = 313
CONNECTION_FORCED = 320
INVALID_PATH = 402
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
FRAME_ERROR = 501
SYNTAX_ERROR = 502
COMMAND_INVALID = 503
CHANNEL_ERROR = 504
UNEXPECTED_FRAME = 505
RESOURCE_ERROR = 506
NOT_ALLOWED = 530
NOT_IMPLEMENTED = 540
INTERNAL_ERROR = 541


# ---------------------------------------------------------------- names

RUN_ID = "%x%04x" % (os.getpid(), random.randrange(0x10000))
_name_counter = [0]


def unique(kind="q"):
    """A queue/exchange name no other run (or test) uses: itest.<kind>.<run>.<n>."""
    _name_counter[0] += 1
    return "itest.%s.%s.%d" % (kind, RUN_ID, _name_counter[0])


# ---------------------------------------------------------------- brokers

class WarrenProcess:
    """One Warren process on 127.0.0.1:<ephemeral> with its own data dir."""

    def __init__(self, settings=(), env=None, preexec_fn=None, plain_http=True, ready_re=None):
        self.settings = list(settings)
        # A log line (regular expression) that says the process is up, in
        # place of its AMQP listener: a cluster's follower opens none.
        self.ready_re = re.compile(ready_re) if ready_re else None
        # False: no management.tcp.* / prometheus.tcp.* keys (HTTPS alone, or the defaults)
        self.plain_http = plain_http
        self.env = dict(os.environ, **(env or {}))
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. setrlimit)
        self.binary = None  # what to run instead of WARREN_BIN (a wrapper that execs it)
        self.proc = None
        self.tmpdir = None
        self.host, self.port = None, None
        self.mgmt_port, self.control_socket = None, None
        self.prometheus_port = None
        self.stream_port = None  # a free port for each broker, never 5552
        self.log_lines = []
        self._port_found = threading.Event()
        self._mgmt_found = threading.Event()

    def start(self):
        if not os.access(WARREN_BIN, os.X_OK):
            raise RuntimeError("Warren binary not found: %s (set WARREN_BIN or build it)" % WARREN_BIN)
        self.tmpdir = tempfile.mkdtemp(prefix="warren-itest-")
        argv = [self.binary or WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0",
                "--set", "stream.listeners.tcp.default=127.0.0.1:0",
                "--set", "data_dir=%s" % self.tmpdir]
        if self.plain_http:
            argv += ["--set", "management.tcp.port=0", "--set", "management.tcp.ip=127.0.0.1",
                     "--set", "prometheus.tcp.port=0", "--set", "prometheus.tcp.ip=127.0.0.1"]
        for s in EXTRA_SETTINGS + self.settings:
            argv += ["--set", s]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.tmpdir, env=self.env,
                                     preexec_fn=self.preexec_fn)
        # A thread drains stderr for the whole life of the process, so Warren
        # can never block on a full pipe, and keeps the log for failure reports.
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()
        ready = self._port_found.wait(START_TIMEOUT) and self.proc.poll() is None
        if not ready or (self.port is None and self.ready_re is None):
            what = self.ready_re.pattern if self.ready_re else "AMQP listening on"
            self.stop()
            raise RuntimeError("Warren did not report '%s' within %.0f s; log:\n%s"
                               % (what, START_TIMEOUT, self.log_tail()))
        if self.ready_re is None:
            self._mgmt_found.wait(START_TIMEOUT)
        return self.host, self.port

    def _drain(self):
        copy = open(LOG_COPY, "a", encoding="utf-8") if LOG_COPY else None
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log_lines.append(line)
            if copy:
                copy.write(line + "\n")
                copy.flush()
            m = STREAM_RE.search(line)
            if m and self.stream_port is None:
                self.stream_port = int(m.group(2))
            m = LISTEN_RE.search(line)
            if m and self.port is None:
                self.host, self.port = m.group(1), int(m.group(2))
                self._port_found.set()
            if self.ready_re and self.ready_re.search(line):
                self._port_found.set()
            m = MGMT_RE.search(line)
            if m and self.mgmt_port is None:
                self.mgmt_port = int(m.group(2))
            m = PROM_RE.search(line)
            if m and self.prometheus_port is None:
                self.prometheus_port = int(m.group(2))
            m = CONTROL_RE.search(line)
            if m and self.control_socket is None:
                self.control_socket = m.group(1)
                self._mgmt_found.set()
        if copy:
            copy.close()
        self._port_found.set()
        self._mgmt_found.set()

    def log_count(self, text):
        return sum(text in line for line in list(self.log_lines))

    def wait_log(self, text, count=1, timeout=10.0, regex=False):
        """Waits until `count` log lines contain `text` (a regular expression
        when `regex`) and says whether they did: the drainer thread may read
        a line well after the broker wrote it on a busy machine."""
        match = (lambda ln: re.search(text, ln)) if regex else (lambda ln: text in ln)
        deadline = time.monotonic() + timeout
        while True:
            if sum(1 for ln in list(self.log_lines) if match(ln)) >= count:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def log_tail(self, n=30):
        return "\n".join(self.log_lines[-n:])

    def stop(self):
        """SIGTERM, then SIGKILL after STOP_TIMEOUT. Returns the exit status."""
        rc = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                rc = "killed after SIGTERM timeout"
        elif self.proc is not None:
            rc = self.proc.returncode
        if self.proc is not None and self.proc.poll() is not None:
            self._drainer.join(5)  # the log is whole once the pipe is drained
        if self.tmpdir:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None
        return rc


_shared = {"proc": None, "addr": None}


def broker_address():
    """(host, port) of the broker under test; starts the shared Warren once."""
    if _shared["addr"] is None:
        if TARGET:
            host, _, port = TARGET.rpartition(":")
            _shared["addr"] = (host or "127.0.0.1", int(port))
        else:
            proc = WarrenProcess()
            _shared["proc"] = proc
            _shared["addr"] = proc.start()
    return _shared["addr"]


def mgmt_address():
    """(host, port) of the management HTTP API of the broker under test:
    the shared Warren's (parsed from its log), or WARREN_TEST_MGMT=host:port
    (default 127.0.0.1:15672) with a target."""
    if TARGET:
        host, _, port = (os.environ.get("WARREN_TEST_MGMT") or "127.0.0.1:15672").rpartition(":")
        return host or "127.0.0.1", int(port)
    broker_address()
    return "127.0.0.1", _shared["proc"].mgmt_port


def prometheus_address():
    """(host, port) of the Prometheus endpoint of the broker under test: the
    shared Warren's (it logs it before the control socket), or
    WARREN_TEST_PROMETHEUS=host:port (default 127.0.0.1:15692) with a target."""
    if TARGET:
        host, _, port = (os.environ.get("WARREN_TEST_PROMETHEUS") or "127.0.0.1:15692").rpartition(":")
        return host or "127.0.0.1", int(port)
    broker_address()
    return "127.0.0.1", _shared["proc"].prometheus_port


def stream_address():
    """(host, port) of the stream protocol listener of the broker under
    test: the shared Warren's (logged before its AMQP listener), or
    WARREN_TEST_STREAM=host:port (default 127.0.0.1:5552) with a target."""
    if TARGET:
        host, _, port = (os.environ.get("WARREN_TEST_STREAM") or "127.0.0.1:5552").rpartition(":")
        return host or "127.0.0.1", int(port)
    broker_address()
    return "127.0.0.1", _shared["proc"].stream_port


def control_socket():
    """The shared Warren's control socket path (None with a target)."""
    if TARGET:
        return None
    broker_address()
    return _shared["proc"].control_socket


def stop_shared_broker():
    """Stops the shared Warren (if we started one); returns its exit status or None."""
    proc, _shared["proc"], _shared["addr"] = _shared["proc"], None, None
    return proc.stop() if proc else None


def shared_broker_crash():
    """If the shared Warren we started has exited, a report of it (and the
    next broker_address() starts a fresh one); otherwise None."""
    proc = _shared["proc"]
    if proc is None or proc.proc.poll() is None:
        return None
    report = "Warren exited unexpectedly with status %r; log tail:\n%s" % (proc.proc.returncode, proc.log_tail())
    proc.stop()
    _shared["proc"] = _shared["addr"] = None
    return report


atexit.register(stop_shared_broker)


def needs_own_broker(fn):
    """Marks a test that starts its own Warren with special settings: it is
    skipped (reported as '# SKIP needs own broker') when a target is given."""
    return unittest.skipIf(TARGET is not None, "needs own broker")(fn)


@contextlib.contextmanager
def own_broker(*settings):
    """Starts a private Warren with extra --set options; yields (host, port).
    It must then exit 0 on SIGTERM like the shared one."""
    proc = WarrenProcess(settings)
    try:
        addr = proc.start()
    except Exception:
        proc.stop()
        raise
    try:
        yield addr
    except BaseException:
        proc.stop()
        raise
    log = proc.log_tail()
    rc = proc.stop()
    if rc != 0:
        raise AssertionError("private Warren exited with %r on SIGTERM; log tail:\n%s" % (rc, log))


# ---------------------------------------------------------------- pika helpers

def params(addr=None, user=USER, password=PASSWORD, vhost=VHOST, **kw):
    host, port = addr or broker_address()
    kw.setdefault("blocked_connection_timeout", 10)
    kw.setdefault("socket_timeout", 5)
    kw.setdefault("stack_timeout", 10)
    kw.setdefault("connection_attempts", 1)
    return pika.ConnectionParameters(host=host, port=port, virtual_host=vhost,
                                     credentials=pika.PlainCredentials(user, password), **kw)


def connect(addr=None, **kw):
    """A pika BlockingConnection to the broker under test."""
    return pika.BlockingConnection(params(addr, **kw))


def drain(conn, seconds):
    """Processes I/O and callbacks for the full `seconds` (pika's own
    time_limit returns as soon as something was processed)."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        conn.process_data_events(time_limit=left)


def wait_for(conn, predicate, timeout=5.0, step=0.05):
    """Processes events until predicate() is true; returns its final value."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=step)
    return predicate()


def get_all(ch, queue, limit=1000, auto_ack=True):
    """basic.get until get-empty; returns [(method, props, body)]."""
    out = []
    for _ in range(limit):
        m, p, b = ch.basic_get(queue, auto_ack=auto_ack)
        if m is None:
            break
        out.append((m, p, b))
    return out


class Collector:
    """A pika consumer callback that records (method, properties, body) and
    optionally acks each delivery."""

    def __init__(self, ack=False):
        self.ack = ack
        self.msgs = []

    def __call__(self, ch, method, props, body):
        self.msgs.append((method, props, body))
        if self.ack:
            ch.basic_ack(method.delivery_tag)

    @property
    def bodies(self):
        return [b for _, _, b in self.msgs]

    @property
    def tags(self):
        return [m.delivery_tag for m, _, _ in self.msgs]


def sync(ch):
    """A harmless synchronous round trip on ch: any asynchronous error the
    broker raised for earlier commands (e.g. a publish) surfaces here."""
    ch.exchange_declare("amq.direct", exchange_type="direct", passive=True)


class BrokerTest(unittest.TestCase):
    """Base class: self.conn / self.ch are fresh per test, and every name made
    with self.queue()/self.exchange() is deleted afterwards (with a separate
    connection, since the test may have killed its own)."""

    def setUp(self):
        self._cleanup_queues, self._cleanup_exchanges = [], []
        self._conns = []
        self.conn = self.connect()
        self.ch = self.conn.channel()

    def tearDown(self):
        for c in self._conns:
            with contextlib.suppress(Exception):
                if c.is_open:
                    c.close()
        if self._cleanup_queues or self._cleanup_exchanges:
            delete_names(self._cleanup_queues, self._cleanup_exchanges)

    def connect(self, **kw):
        c = connect(**kw)
        self._conns.append(c)
        return c

    def track_queue(self, name):
        self._cleanup_queues.append(name)
        return name

    def track_exchange(self, name):
        self._cleanup_exchanges.append(name)
        return name

    def queue(self, name=None, ch=None, **kw):
        """Declares a queue (unique name unless given, non-durable by default)."""
        ch = ch or self.ch
        if name is None:
            name = unique("q")
        kw.setdefault("auto_delete", False)
        ok = ch.queue_declare(name, **kw)
        self.track_queue(ok.method.queue)
        return ok.method.queue

    def exchange(self, kind="direct", name=None, ch=None, **kw):
        ch = ch or self.ch
        name = name or unique("x." + kind)
        self.track_exchange(name)
        ch.exchange_declare(name, exchange_type=kind, **kw)
        return name

    def bound_queue(self, exchange, *keys, arguments=None):
        q = self.queue()
        for k in keys or ("",):
            self.ch.queue_bind(q, exchange, routing_key=k, arguments=arguments)
        return q

    def publish(self, exchange, key, body=b"x", ch=None, **kw):
        (ch or self.ch).basic_publish(exchange, key, body, **kw)

    def count(self, queue, ch=None):
        """Message count from a passive declare."""
        return (ch or self.ch).queue_declare(queue, passive=True).method.message_count

    def wait_count(self, queue, n, ch=None, timeout=5.0):
        """Waits until queue holds n ready messages (requeues after a channel
        or connection close are asynchronous in RabbitMQ); returns the count."""
        ch = ch or self.ch
        deadline = time.monotonic() + timeout
        while True:
            c = self.count(queue, ch=ch)
            if c == n or time.monotonic() > deadline:
                return c
            time.sleep(0.02)

    def assert_queue_gone(self, queue, timeout=5.0):
        """The queue must disappear (404 on passive declare) within timeout;
        deletions caused by a close or cancel may lag behind its reply."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ch = self.conn.channel()
            try:
                ch.queue_declare(queue, passive=True)
            except pex.ChannelClosedByBroker as e:
                self.assertEqual(e.reply_code, NOT_FOUND, e.reply_text)
                return
            ch.close()
            time.sleep(0.02)
        self.fail("queue %s still exists after %.0f s" % (queue, timeout))

    def assert_channel_error(self, code, fn, *args, conn=None, **kw):
        """fn() must make the broker close the channel (not the connection)
        with reply code `code`. Returns the exception."""
        conn = conn or self.conn
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.reply_code, code, cm.exception.reply_text)
        self.assertTrue(conn.is_open, "connection should stay open after a channel error")
        # ...and it really works: a new channel on it can do a round trip.
        sync(conn.channel())
        return cm.exception

    def assert_connection_error(self, code, fn, *args, conn=None, **kw):
        """fn() must make the broker close the whole connection with `code`."""
        conn = conn or self.conn
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            fn(*args, **kw)
        self.assertEqual(cm.exception.reply_code, code, cm.exception.reply_text)
        self.assertFalse(conn.is_open)
        return cm.exception


class DataDirTest(unittest.TestCase):
    """A test that starts its own Warren on one data directory, stops it
    (SIGTERM, exit 0) or kills it (SIGKILL), and starts it again there.
    `settings` (config lines) and `env` apply to the next start; `confirm`
    says whether start's channel is in confirm mode."""
    settings, env, confirm = (), None, True

    def setUp(self):
        self.data_dir = tempfile.mkdtemp(prefix="warren-itest-data-")
        self.addCleanup(shutil.rmtree, self.data_dir, True)
        self.proc = None
        self.addCleanup(self.stop)

    def start(self):
        """Starts Warren; (connection, channel)."""
        self.proc = WarrenProcess(["data_dir=%s" % self.data_dir] + list(self.settings), self.env)
        self.addr = self.proc.start()
        conn = connect(self.addr)
        ch = conn.channel()
        if self.confirm:
            ch.confirm_delivery()
        return conn, ch

    def stop(self):
        if self.proc:
            rc = self.proc.stop()
            self.proc = None
            self.assertEqual(rc, 0)

    def restart(self, conn):
        """A clean stop and a start."""
        conn.close()
        self.stop()
        return self.start()

    def kill(self):
        self.proc.proc.kill()
        self.proc.proc.wait(5)
        self.proc.stop()
        self.proc = None


def delete_names(queues, exchanges):
    """Best-effort deletion of test queues and exchanges."""
    try:
        c = connect()
    except Exception:
        return
    try:
        ch = c.channel()
        for kind, names in (("q", queues), ("x", exchanges)):
            for n in names:
                try:
                    if kind == "q":
                        ch.queue_delete(n)
                    else:
                        ch.exchange_delete(n)
                except Exception:
                    if not c.is_open:
                        return
                    ch = c.channel()
    finally:
        with contextlib.suppress(Exception):
            c.close()


# ---------------------------------------------------------------- raw AMQP

class RawClient(rawamqp.RawClient):
    """rawamqp's byte-exact client (pika's codec for well-formed frames,
    hand-made bytes for malformed ones) on the broker under test, with this
    suite's client properties and close timeouts. It is strict: a frame pika
    cannot decode fails the test instead of coming back as a RawFrame."""
    CLIENT_PROPERTIES = {"product": "warren-itest", "capabilities": {"authentication_failure_close": True}}
    CLOSE_TIMEOUT = 5.0
    STRICT = True

    def __init__(self, addr=None, timeout=5.0):
        self.addr = addr or broker_address()
        super().__init__(*self.addr, user=USER, password=PASSWORD, vhost=VHOST, timeout=timeout)
