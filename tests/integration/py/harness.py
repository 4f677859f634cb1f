"""Shared harness for Warren's Python integration tests.

It finds a broker (starts Warren on an ephemeral port in a fresh temp dir, or
uses WARREN_TEST_TARGET=host:port), opens pika connections, makes unique names
and cleans them up, and provides RawClient: a byte-exact AMQP client on a plain
socket for protocol-error tests. Every expectation in these tests was checked
against a real RabbitMQ 3.10; Warren must behave the same.
"""
import atexit
import contextlib
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
import unittest
from pathlib import Path

import pika
import pika.data
import pika.frame
import pika.spec
from pika import exceptions as pex

REPO = Path(__file__).resolve().parents[3]
TARGET = os.environ.get("WARREN_TEST_TARGET") or None
WARREN_BIN = os.environ.get("WARREN_BIN") or str(REPO / "build" / "release" / "warren")
USER, PASSWORD, VHOST = "guest", "guest", "/"
LISTEN_RE = re.compile(r"AMQP listening on ([0-9.]+):([0-9]+)")
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

PROTOCOL_HEADER = b"AMQP\x00\x00\x09\x01"
FRAME_METHOD, FRAME_HEADER, FRAME_BODY, FRAME_HEARTBEAT = 1, 2, 3, 8
FRAME_END = 0xCE


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

    def __init__(self, settings=()):
        self.settings = list(settings)
        self.proc = None
        self.tmpdir = None
        self.host, self.port = None, None
        self.log_lines = []
        self._port_found = threading.Event()

    def start(self):
        if not os.access(WARREN_BIN, os.X_OK):
            raise RuntimeError("Warren binary not found: %s (set WARREN_BIN or build it)" % WARREN_BIN)
        self.tmpdir = tempfile.mkdtemp(prefix="warren-itest-")
        argv = [WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0",
                "--set", "data_dir=%s" % self.tmpdir]
        for s in self.settings:
            argv += ["--set", s]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.tmpdir)
        # A thread drains stderr for the whole life of the process, so Warren
        # can never block on a full pipe, and keeps the log for failure reports.
        threading.Thread(target=self._drain, daemon=True).start()
        if not self._port_found.wait(START_TIMEOUT) or self.port is None:
            self.stop()
            raise RuntimeError("Warren did not report 'AMQP listening on' within %.0f s; log:\n%s"
                               % (START_TIMEOUT, self.log_tail()))
        return self.host, self.port

    def _drain(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.log_lines.append(line)
            m = LISTEN_RE.search(line)
            if m and self.port is None:
                self.host, self.port = m.group(1), int(m.group(2))
                self._port_found.set()
        self._port_found.set()

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

class Closed(Exception):
    """The peer closed the TCP connection."""


class RawClient:
    """A byte-exact AMQP 0-9-1 client on a plain socket (pika's codec for
    well-formed frames, hand-made bytes for malformed ones)."""

    def __init__(self, addr=None, timeout=5.0):
        self.addr = addr or broker_address()
        self.timeout = timeout
        self.sock = socket.create_connection(self.addr, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.start = self.tune = None
        self.frame_max = 131072

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- sending
    def send(self, data):
        self.sock.sendall(data)

    def send_frame(self, ftype, channel, payload, end=FRAME_END):
        self.send(raw_frame(ftype, channel, payload, end))

    def send_method(self, channel, method):
        self.send(pika.frame.Method(channel, method).marshal())

    def send_content(self, channel, method, body=b"", props=None, frame_max=None, header_bytes=None):
        """A content method, its header and the body split to fit frame_max.
        header_bytes replaces the encoded property list (flags + values)."""
        frame_max = frame_max or self.frame_max
        out = [pika.frame.Method(channel, method).marshal()]
        if header_bytes is None:
            out.append(pika.frame.Header(channel, len(body), props or pika.spec.BasicProperties()).marshal())
        else:
            out.append(raw_frame(FRAME_HEADER, channel, struct.pack(">HHQ", 60, 0, len(body)) + header_bytes))
        step = frame_max - 8
        for i in range(0, len(body), step):
            out.append(pika.frame.Body(channel, body[i:i + step]).marshal())
        self.send(b"".join(out))

    def publish(self, channel, exchange, key, body=b"", props=None, mandatory=False, immediate=False, **kw):
        m = pika.spec.Basic.Publish(exchange=exchange, routing_key=key, mandatory=mandatory, immediate=immediate)
        self.send_content(channel, m, body, props, **kw)

    # -- receiving
    def recv_bytes(self, n=65536, timeout=None):
        """Raw bytes from the socket (b'' at EOF); socket.timeout on silence."""
        if self.buf:
            data, self.buf = self.buf[:n], self.buf[n:]
            return data
        self.sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            return self.sock.recv(n)
        except ConnectionResetError:
            return b""

    def recv_frame(self, timeout=None):
        """Next decoded pika frame. Raises Closed at EOF, socket.timeout on silence."""
        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while True:
            if self.buf:
                consumed, frame = decode_any_frame(self.buf)
                if frame is not None:
                    self.buf = self.buf[consumed:]
                    return frame
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no frame")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(262144)
            except ConnectionResetError:
                data = b""
            if not data:
                raise Closed("EOF with %d unparsed bytes" % len(self.buf))
            self.buf += data

    def recv_method(self, timeout=None, skip_heartbeats=True):
        while True:
            f = self.recv_frame(timeout)
            if skip_heartbeats and isinstance(f, pika.frame.Heartbeat):
                continue
            return f

    def expect(self, method_cls, channel=None, timeout=None):
        """Next non-heartbeat frame must be method_cls (on channel); returns the method."""
        f = self.recv_method(timeout)
        got = getattr(f, "method", f)
        if not isinstance(got, method_cls) or (channel is not None and f.channel_number != channel):
            raise AssertionError("expected %s on channel %s, got %r on channel %s"
                                 % (method_cls.NAME, channel, got, getattr(f, "channel_number", "?")))
        return got

    def wait_closed(self, timeout=5.0):
        """True when the server closes the socket within timeout (pending
        frames are discarded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
        return False

    def expect_connection_close(self, code, timeout=5.0):
        """The server must send connection.close with `code`; we answer
        close-ok and the socket must then be closed. Returns the method."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv_method(max(0.01, deadline - time.monotonic()))
            if isinstance(getattr(f, "method", None), pika.spec.Connection.Close):
                break
        m = f.method
        if m.reply_code != code:
            raise AssertionError("connection.close %d %r, expected %d" % (m.reply_code, m.reply_text, code))
        if f.channel_number != 0:
            raise AssertionError("connection.close on channel %d" % f.channel_number)
        with contextlib.suppress(OSError):
            self.send_method(0, pika.spec.Connection.CloseOk())
        if not self.wait_closed(timeout):
            raise AssertionError("socket still open after connection.close-ok")
        return m

    def expect_channel_close(self, channel, code, timeout=5.0):
        """The server must close `channel` with `code` (skipping other frames on
        other channels); we answer close-ok. Returns the method."""
        deadline = time.monotonic() + timeout
        while True:
            f = self.recv_method(max(0.01, deadline - time.monotonic()))
            m = getattr(f, "method", None)
            if isinstance(m, pika.spec.Connection.Close):
                raise AssertionError("connection closed %d %r, expected channel close %d"
                                     % (m.reply_code, m.reply_text, code))
            if isinstance(m, pika.spec.Channel.Close) and f.channel_number == channel:
                break
        if m.reply_code != code:
            raise AssertionError("channel.close %d %r, expected %d" % (m.reply_code, m.reply_text, code))
        self.send_method(channel, pika.spec.Channel.CloseOk())
        return m

    # -- handshake
    def handshake(self, user=USER, password=PASSWORD, vhost=VHOST, mechanism="PLAIN",
                  frame_max=None, channel_max=None, heartbeat=0, open_vhost=True, client_properties=None):
        """Header, start/start-ok, tune/tune-ok (our values, or the server's when None),
        and connection.open unless open_vhost is False. Returns connection.tune."""
        self.send(PROTOCOL_HEADER)
        self.start = self.expect(pika.spec.Connection.Start, 0)
        if mechanism == "PLAIN":
            response = b"\0" + user.encode() + b"\0" + password.encode()
        elif mechanism == "AMQPLAIN":
            response = amqplain_response(user, password)
        else:
            response = b""
        props = client_properties if client_properties is not None else {
            "product": "warren-itest", "capabilities": {"authentication_failure_close": True}}
        self.send_method(0, pika.spec.Connection.StartOk(client_properties=props, mechanism=mechanism,
                                                         response=response, locale="en_US"))
        self.tune = self.expect(pika.spec.Connection.Tune, 0)
        fm = self.tune.frame_max if frame_max is None else frame_max
        cm = self.tune.channel_max if channel_max is None else channel_max
        self.frame_max = fm
        self.send_method(0, pika.spec.Connection.TuneOk(channel_max=cm, frame_max=fm, heartbeat=heartbeat))
        if open_vhost:
            self.send_method(0, pika.spec.Connection.Open(virtual_host=vhost))
            self.expect(pika.spec.Connection.OpenOk, 0)
        return self.tune

    def open_channel(self, channel=1):
        self.send_method(channel, pika.spec.Channel.Open())
        self.expect(pika.spec.Channel.OpenOk, channel)
        return channel

    def rpc(self, channel, method, reply_cls):
        self.send_method(channel, method)
        return self.expect(reply_cls, channel)

    def close_cleanly(self):
        self.send_method(0, pika.spec.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
        while True:
            f = self.recv_method()
            if isinstance(getattr(f, "method", None), pika.spec.Connection.CloseOk):
                break
        self.close()


class RawContent:
    """A delivered message as frames: method, header and the body frames."""

    def __init__(self, method_frame, header_frame, body_frames):
        self.method = method_frame.method
        self.channel = method_frame.channel_number
        self.props = header_frame.properties
        self.header_raw = getattr(header_frame, "raw", None)  # RawHeader: undecoded property bytes
        self.body_size = header_frame.body_size
        self.body_frames = body_frames
        self.body = b"".join(f.fragment for f in body_frames)


def recv_content(raw, timeout=None):
    """Reads the next deliver/get-ok/return and its content frames."""
    mf = raw.recv_method(timeout)
    if not isinstance(getattr(mf, "method", None),
                      (pika.spec.Basic.Deliver, pika.spec.Basic.GetOk, pika.spec.Basic.Return)):
        raise AssertionError("expected a content method, got %r" % (mf,))
    hf = raw.recv_method(timeout)
    bodies, got = [], 0
    while got < hf.body_size:
        bf = raw.recv_method(timeout)
        bodies.append(bf)
        got += len(bf.fragment)
    return RawContent(mf, hf, bodies)


class RawHeader:
    """A content header frame whose property bytes are kept undecoded."""

    def __init__(self, channel, class_id, body_size, prop_bytes):
        self.channel_number, self.class_id = channel, class_id
        self.body_size, self.prop_bytes = body_size, prop_bytes
        self.properties = None


def decode_any_frame(buf):
    """Like pika.frame.decode_frame, but tolerant: unknown methods and
    undecodable headers come back as raw objects instead of exceptions."""
    if len(buf) < 7:
        return 0, None
    ftype, channel, size = struct.unpack(">BHL", buf[:7])
    if len(buf) < 8 + size:
        return 0, None
    payload = buf[7:7 + size]
    if ftype == FRAME_HEADER and size >= 12:
        consumed, frame = pika.frame.decode_frame(buf)
        class_id, _, body_size = struct.unpack(">HHQ", payload[:12])
        frame.raw = RawHeader(channel, class_id, body_size, payload[12:])
        return consumed, frame
    return pika.frame.decode_frame(buf)


def raw_frame(ftype, channel, payload, end=FRAME_END):
    return struct.pack(">BHL", ftype, channel, len(payload)) + payload + bytes([end])


def method_payload(method):
    """The payload bytes (class id, method id, arguments) of a pika method."""
    return pika.frame.Method(0, method).marshal()[7:-1]


def amqplain_response(user, password):
    """AMQPLAIN's response: a field table without its 4-byte length prefix."""
    return (shortstr(b"LOGIN") + b"S" + longstr(user.encode())
            + shortstr(b"PASSWORD") + b"S" + longstr(password.encode()))


def shortstr(b):
    return bytes([len(b)]) + b


def longstr(b):
    return struct.pack(">I", len(b)) + b
