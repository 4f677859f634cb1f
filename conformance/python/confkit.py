"""The Python family's scenario framework.

A scenario is a short function registered with @scenario(id, client); it gets
a Ctx `t` that knows the broker (CONF_URI), makes names unique to this run
(conf.<run_id>.<client>.<id>.<kind><n>) and deletes them afterwards. run()
executes each scenario in a forked child with its own timeout, so a hung
broker or client library is a failure, never a hang, and prints one line per
scenario:  RESULT <group> <id> <client> <pass|fail|skip> <millis> <detail>

A scenario marked needs_rabbit (it imports what the broker under test
exported into a RabbitMQ 3.10) runs only with CONF_COMPARE=1 and the
RabbitMQ at CONF_RABBIT_MGMT reachable; otherwise it is reported as skip
with the reason, never as a pass. A scenario marked warren_only (a feature
RabbitMQ 3.10 does not have) is reported as skip, with the reason, on a
broker whose connection.start does not name the product Warren.
"""
import contextlib
import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
import traceback
import urllib.parse

CLIENTS = ("pika", "py-amqp", "kombu", "celery", "raw", "http")
GROUPS = ("connection", "channel", "exchange", "routing", "queue", "basic", "properties", "content",
          "consumer", "qos", "ack", "confirm", "tx", "errors", "malformed", "heartbeat", "extensions",
          "durability", "framework", "mgmt", "permissions", "limits", "stream")
ID_RE = re.compile(r"^[a-z0-9_-]+\.[a-z0-9_.-]+$")

# Reply codes (amqp-rabbitmq-0.9.1.json).
NO_ROUTE = 312
CONNECTION_FORCED = 320
ACCESS_REFUSED = 403
NOT_FOUND = 404
RESOURCE_LOCKED = 405
PRECONDITION_FAILED = 406
FRAME_ERROR = 501
COMMAND_INVALID = 503
CHANNEL_ERROR = 504
UNEXPECTED_FRAME = 505
NOT_ALLOWED = 530
NOT_IMPLEMENTED = 540
INTERNAL_ERROR = 541


class Scenario:
    def __init__(self, sid, client, fn, quick, timeout, exclusive=False, needs_rabbit=False,
                 warren_only=False):
        self.id, self.client, self.fn, self.quick, self.timeout = sid, client, fn, quick, timeout
        self.exclusive, self.needs_rabbit, self.warren_only = exclusive, needs_rabbit, warren_only
        self.group = sid.split(".", 1)[0]


SCENARIOS = []
RESTART_TIMEOUT = 120  # a restart scenario's default timeout: RabbitMQ takes several seconds per restart


def scenario(sid, client, quick=False, timeout=None, restart=False, needs_rabbit=False,
             warren_only=False):
    """Registers fn as scenario `sid` for `client`. timeout (seconds)
    overrides CONF_TIMEOUT for scenarios that wait on purpose (heartbeats).
    restart=True: the scenario calls t.restart(); it runs alone (no other
    scenario of this family at the same time), never in the quick subset.
    needs_rabbit=True: it needs the reference RabbitMQ (CONF_RABBIT_MGMT)
    besides the broker under test; it runs with COMPARE=1 only (see
    rabbit_unavailable) and cannot be quick. warren_only=True: a Warren
    feature RabbitMQ 3.10 lacks; skipped on another broker (not_warren)."""
    if not ID_RE.match(sid) or sid.split(".", 1)[0] not in GROUPS:
        raise ValueError("bad scenario id %r" % sid)
    if client not in CLIENTS:
        raise ValueError("bad client %r" % client)
    if restart and quick:
        raise ValueError("restart scenario %s cannot be quick" % sid)
    if needs_rabbit and quick:
        raise ValueError("scenario %s needs RabbitMQ and cannot be quick" % sid)

    def register(fn):
        if any(s.id == sid and s.client == client for s in SCENARIOS):
            raise ValueError("duplicate scenario %s/%s" % (sid, client))
        SCENARIOS.append(Scenario(sid, client, fn, quick, timeout or (RESTART_TIMEOUT if restart else None),
                                  exclusive=restart, needs_rabbit=needs_rabbit,
                                  warren_only=warren_only))
        return fn
    return register


# ---------------------------------------------------------------- assertions

class Fail(AssertionError):
    pass


def eq(got, want, what="value"):
    if got != want:
        raise Fail("%s: got %s, expected %s" % (what, short(got), short(want)))


def check(cond, what):
    if not cond:
        raise Fail(what)


def reply_text(s):
    """A reply text as it arrives: a shortstr, which RabbitMQ cuts to 252
    octets plus "..." when longer than 255."""
    b = s.encode()
    return s if len(b) <= 255 else b[:252].decode("utf-8", "ignore") + "..."


def short(v, limit=300):
    s = repr(v)
    return s if len(s) <= limit else s[:limit] + "...(%d chars)" % len(s)


# ---------------------------------------------------------------- context

class Broker:
    """The broker under test, from CONF_URI (amqp://user:pass@host:port[/vhost])."""

    def __init__(self, uri):
        u = urllib.parse.urlparse(uri)
        if u.scheme != "amqp" or not u.hostname:
            raise ValueError("CONF_URI must be amqp://user:pass@host:port, got %r" % uri)
        self.uri = uri
        self.host = u.hostname
        self.port = u.port or 5672
        self.user = urllib.parse.unquote(u.username or "guest")
        self.password = urllib.parse.unquote(u.password or "guest")
        path = u.path[1:] if u.path.startswith("/") else u.path
        self.vhost = urllib.parse.unquote(path) if path else "/"


class Ctx:
    """What a scenario function gets: the broker, unique names, connections
    that are closed and names that are deleted when the scenario ends."""

    def __init__(self, sc, broker, run_id, timeout, report):
        self.sc, self.broker, self.run_id, self.timeout = sc, broker, run_id, timeout
        self._report = report
        self._n = 0
        self._closers = []
        self.queues, self.exchanges, self.urls = [], [], []

    # names
    def name(self, kind="q"):
        """A name no other run, scenario or client uses."""
        self._n += 1
        return "conf.%s.%s.%s.%s%d" % (self.run_id, self.sc.client, self.sc.id, kind, self._n)

    def short_name(self, kind="q"):
        """A short unique name (conf.<run_id>.<pid>.<kind><n>), for scenarios
        whose reply texts must stay under the 255-octet shortstr limit."""
        self._n += 1
        return "conf.%s.%d.%s%d" % (self.run_id, os.getpid(), kind, self._n)

    def track_queue(self, name):
        self.queues.append(name)
        self._report({"name": ["q", name]})
        return name

    def track_exchange(self, name):
        self.exchanges.append(name)
        self._report({"name": ["x", name]})
        return name

    def track_url(self, url):
        """An HTTP resource (a management API URL: a vhost, a user, a policy)
        that cleanup DELETEs, in reverse order of tracking, with the broker's
        credentials."""
        self.urls.append(url)
        self._report({"name": ["h", url]})
        return url

    def step(self, what):
        """Marks progress: a timeout's detail names the last step reached."""
        self._report({"step": what})

    def defer(self, fn, *args):
        self._closers.append((fn, args))

    def restart(self):
        """Restarts the broker under test with the CONF_RESTART command and
        returns once it serves AMQP again (connections opened before are dead
        afterwards). A scenario that needs this fails, never skips, when no
        restart command is configured or the restart fails."""
        cmd = os.environ.get("CONF_RESTART") or ""
        if not cmd:
            raise Fail("this scenario restarts the broker, but CONF_RESTART is empty (run.sh sets it for the "
                       "Warren it starts and for a RabbitMQ on 127.0.0.1; set RESTART=<command> otherwise)")
        self.step("restart")
        # Its own session: a scenario killed on timeout must not kill a
        # half-done restart (rabbitmqctl stop_app without start_app).
        try:
            p = subprocess.run(cmd, shell=True, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               start_new_session=True, timeout=max(30, self.timeout - 5))
        except subprocess.TimeoutExpired:
            raise Fail("restart command did not finish within %d s: %s" % (max(30, self.timeout - 5), cmd))
        if p.returncode != 0:
            raise Fail("restart failed (exit %d): %s" % (p.returncode, one_line(p.stderr or p.stdout)[:500]))
        self.step("restarted")

    # clients
    def pika_params(self, **kw):
        import pika
        b = self.broker
        kw.setdefault("socket_timeout", 5)
        kw.setdefault("stack_timeout", 10)
        kw.setdefault("blocked_connection_timeout", 10)
        kw.setdefault("connection_attempts", 1)
        kw.setdefault("virtual_host", b.vhost)
        creds = pika.PlainCredentials(kw.pop("user", b.user), kw.pop("password", b.password))
        return pika.ConnectionParameters(host=b.host, port=b.port, credentials=creds, **kw)

    def pika(self, **kw):
        """A pika BlockingConnection, closed when the scenario ends."""
        import pika
        c = pika.BlockingConnection(self.pika_params(**kw))
        self.defer(_close_quietly, c)
        return c

    def raw(self, timeout=5.0):
        """A RawClient (byte-exact frames), closed when the scenario ends."""
        from rawamqp import RawClient
        b = self.broker
        r = RawClient(b.host, b.port, b.user, b.password, b.vhost, timeout=timeout)
        self.defer(r.close)
        return r

    def amqp(self, connect=True, **kw):
        """A py-amqp Connection (connected), closed when the scenario ends."""
        import amqp
        b = self.broker
        kw.setdefault("connect_timeout", 5)
        kw.setdefault("read_timeout", 10)
        kw.setdefault("write_timeout", 10)
        c = amqp.Connection(host="%s:%d" % (b.host, b.port), userid=kw.pop("userid", b.user),
                            password=kw.pop("password", b.password),
                            virtual_host=kw.pop("virtual_host", b.vhost), **kw)
        self.defer(_close_quietly, c)
        if connect:
            c.connect()
        return c

    def kombu(self, **kw):
        """A kombu Connection (pyamqp transport), released when the scenario ends."""
        import kombu
        kw.setdefault("connect_timeout", 5)
        c = kombu.Connection(self.kombu_url(), **kw)
        self.defer(_close_quietly, c)
        return c

    def kombu_url(self):
        b = self.broker
        return "pyamqp://%s:%s@%s:%d/%s" % (urllib.parse.quote(b.user, safe=""),
                                            urllib.parse.quote(b.password, safe=""), b.host, b.port,
                                            urllib.parse.quote(b.vhost, safe=""))

    # end
    def close_all(self):
        for fn, args in reversed(self._closers):
            with contextlib.suppress(Exception):
                fn(*args)
        self._closers = []


def _close_quietly(c):
    with contextlib.suppress(Exception):
        if getattr(c, "is_open", True) or hasattr(c, "release"):
            c.close()


def delete_urls(broker, urls):
    """Best-effort HTTP DELETE of tracked management URLs, newest first."""
    import base64
    import urllib.request
    auth = base64.b64encode(("%s:%s" % (broker.user, broker.password)).encode()).decode()
    for url in reversed(list(dict.fromkeys(urls))):
        req = urllib.request.Request(url, method="DELETE", headers={"Authorization": "Basic " + auth})
        with contextlib.suppress(Exception):
            urllib.request.urlopen(req, timeout=5).close()


def delete_names(broker, queues, exchanges, urls=()):
    """Best-effort deletion of this scenario's queues, exchanges and HTTP
    resources (a fresh connection: the scenario may have broken its own)."""
    if urls:
        delete_urls(broker, urls)
    if not queues and not exchanges:
        return
    import pika
    params = pika.ConnectionParameters(host=broker.host, port=broker.port, virtual_host=broker.vhost,
                                       credentials=pika.PlainCredentials(broker.user, broker.password),
                                       socket_timeout=5, stack_timeout=10, connection_attempts=1)
    c = pika.BlockingConnection(params)
    try:
        ch = c.channel()
        for kind, names in (("q", queues), ("x", exchanges)):
            for n in dict.fromkeys(names):
                try:
                    if kind == "q":
                        ch.queue_delete(n)
                    else:
                        ch.exchange_delete(n)
                except Exception:  # noqa: BLE001
                    if not c.is_open:
                        return
                    ch = c.channel()
    finally:
        with contextlib.suppress(Exception):
            c.close()


# ---------------------------------------------------------------- running

def one_line(s):
    return " ".join(str(s).split())


def failure_detail(exc):
    """One line: the exception and the scenario line that raised it."""
    where = ""
    for fs in reversed(traceback.extract_tb(exc.__traceback__)):
        if os.path.basename(fs.filename).startswith("scen_"):
            where = " [%s:%d]" % (os.path.basename(fs.filename), fs.lineno)
            break
    msg = str(exc) if isinstance(exc, AssertionError) and str(exc) else "%s: %s" % (type(exc).__name__, exc)
    return one_line(msg + where)


def child_main(sc, broker, run_id, timeout, wfd):
    """Runs one scenario in a forked child; reports JSON lines on wfd."""
    os.setpgid(0, 0)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    out = os.fdopen(wfd, "w", buffering=1)

    def report(obj):
        out.write(json.dumps(obj) + "\n")

    t = Ctx(sc, broker, run_id, timeout, report)
    status, detail = "pass", ""
    try:
        sc.fn(t)
    except BaseException as e:  # noqa: BLE001 - every failure is reported
        status, detail = "fail", failure_detail(e)
        sys.stderr.write("---- %s %s\n%s\n" % (sc.id, sc.client, "".join(
            traceback.format_exception(type(e), e, e.__traceback__))))
    report({"status": status, "detail": detail})
    t.close_all()
    try:
        delete_names(broker, t.queues, t.exchanges, t.urls)
        report({"cleaned": True})
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("cleanup of %s/%s failed: %s\n" % (sc.id, sc.client, e))
    out.close()


class Running:
    def __init__(self, sc, pid, rfd, deadline, timeout):
        self.sc, self.pid, self.rfd, self.deadline, self.timeout = sc, pid, rfd, deadline, timeout
        self.started = time.monotonic()
        self.buf = b""
        self.result = None
        self.names = {"q": [], "x": [], "h": []}
        self.cleaned = False
        self.step = None
        self.eof = False

    def feed(self, data):
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "name" in msg:
                self.names[msg["name"][0]].append(msg["name"][1])
            elif "step" in msg:
                self.step = msg["step"]
            elif "status" in msg:
                self.result = (msg["status"], msg["detail"])
                self.finished = time.monotonic()
            elif "cleaned" in msg:
                self.cleaned = True


def fork_child(target, *args):
    rfd, wfd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        code = 0
        try:
            target(*args, wfd)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    os.close(wfd)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)
    return pid, rfd


def kill_group(pid):
    for sig in (signal.SIGKILL,):
        with contextlib.suppress(OSError):
            os.killpg(pid, sig)
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def reap(pid):
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _cleanup_child(broker, queues, exchanges, urls, wfd):
    os.setpgid(0, 0)
    os.close(wfd)
    delete_names(broker, queues, exchanges, urls)


def finish(r, broker, emit):
    """Turns a finished (or killed) child into a RESULT line; cleans up its
    names itself when the child could not."""
    if r.result is not None:
        status, detail = r.result
        millis = int((r.finished - r.started) * 1000)
    else:
        status = "fail"
        millis = int((time.monotonic() - r.started) * 1000)
        if time.monotonic() >= r.deadline:
            detail = "timeout: no result within %g s" % r.timeout
        else:
            detail = "scenario process died without a result"
        if r.step:
            detail += " (last step: %s)" % r.step
    emit(r.sc, status, millis, detail)
    if not r.cleaned and (r.names["q"] or r.names["x"] or r.names["h"]):
        pid, rfd = fork_child(_cleanup_child, broker, r.names["q"], r.names["x"], r.names["h"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            ready, _, _ = select.select([rfd], [], [], max(0.0, deadline - time.monotonic()))
            if ready and not os.read(rfd, 4096):
                break
        kill_group(pid)
        reap(pid)
        os.close(rfd)


BREAKER = 5  # consecutive timeouts after which the broker counts as hung


def run(scenarios, broker, run_id, timeout, jobs, emit):
    """Runs scenarios, at most `jobs` at once, each in its own child. After
    BREAKER consecutive timeouts the rest are reported as failed without
    running, so a hung broker costs minutes, not hours."""
    pending = list(scenarios)
    running = {}
    current = {"pids": running}
    timeouts = [0]

    def emit_counting(sc, status, millis, detail):
        timeouts[0] = timeouts[0] + 1 if detail.startswith("timeout:") else 0
        emit(sc, status, millis, detail)

    def on_term(signum, frame):
        for r in list(current["pids"].values()):
            kill_group(r.pid)
        os._exit(1)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    while pending or running:
        if timeouts[0] >= BREAKER and pending:
            for sc in pending:
                emit(sc, "fail", 0, "not run: the broker is unresponsive (%d consecutive scenario timeouts)"
                     % timeouts[0])
            pending = []
        while pending and len(running) < jobs:
            # A restart scenario runs alone: it would break the others' connections.
            if (pending[0].exclusive and running) or any(r.sc.exclusive for r in running.values()):
                break
            sc = pending.pop(0)
            limit = sc.timeout or timeout
            pid, rfd = fork_child(child_main, sc, broker, run_id, limit)
            running[rfd] = Running(sc, pid, rfd, time.monotonic() + limit, limit)
        now = time.monotonic()
        wait = max(0.0, min(min(r.deadline, r.finished + 10 if r.result else r.deadline)
                             for r in running.values()) - now)
        ready, _, _ = select.select(list(running), [], [], wait)
        for rfd in ready:
            r = running[rfd]
            data = os.read(rfd, 65536)
            if data:
                r.feed(data)
            else:
                r.eof = True
        now = time.monotonic()
        for rfd, r in list(running.items()):
            # A child that reported its result but hangs in cleanup is done too.
            cleanup_over = r.result is not None and now >= r.finished + 10
            if r.eof or now >= r.deadline or cleanup_over:
                if not r.eof:
                    kill_group(r.pid)
                reap(r.pid)
                os.close(rfd)
                del running[rfd]
                finish(r, broker, emit_counting)


def rabbit_unavailable():
    """Why the needs_rabbit scenarios cannot run, or None: they run only in
    a COMPARE=1 run (CONF_COMPARE=1) whose RabbitMQ management API
    (CONF_RABBIT_MGMT) accepts a TCP connection."""
    if os.environ.get("CONF_COMPARE") != "1":
        return "needs RabbitMQ 3.10 (RABBIT_MGMT): COMPARE=1 only"
    url = urllib.parse.urlparse(os.environ.get("CONF_RABBIT_MGMT") or "")
    if not url.hostname:
        return "needs RabbitMQ 3.10: COMPARE=1 without RABBIT_MGMT"
    try:
        socket.create_connection((url.hostname, url.port or 80), timeout=3).close()
    except OSError as e:
        return "needs RabbitMQ 3.10: %s not reachable (%s)" % (url.geturl(), e)
    return None


def not_warren(broker):
    """Why the warren_only scenarios cannot run on `broker`, or None: the
    product its connection.start names."""
    import pika
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters(
            host=broker.host, port=broker.port, virtual_host=broker.vhost,
            credentials=pika.PlainCredentials(broker.user, broker.password), socket_timeout=5))
    except Exception:  # noqa: BLE001 -- the scenarios will say what is wrong
        return None
    product = c._impl.server_properties.get("product")
    c.close()
    product = product.decode() if isinstance(product, bytes) else product
    return None if product == "Warren" else "Warren-only (the broker is %s)" % product


def main(modules):
    """The family entry point: reads the CONF_* environment, loads the
    scenario modules, prints VERSION and RESULT lines."""
    uri = os.environ.get("CONF_URI") or "amqp://guest:guest@127.0.0.1:5672"
    run_id = os.environ.get("CONF_RUN_ID") or "%x" % (os.getpid() ^ int(time.time()))
    quick = os.environ.get("CONF_QUICK") == "1"
    only = os.environ.get("CONF_ONLY") or ""
    clients = os.environ.get("CONF_CLIENTS") or ""  # extra, for development: regex on the client
    timeout = float(os.environ.get("CONF_TIMEOUT") or 20)
    jobs = max(1, int(os.environ.get("CONF_JOBS") or 1))
    broker = Broker(uri)
    for m in modules:
        __import__(m)
    chosen = [s for s in SCENARIOS
              if (not quick or s.quick) and (not only or re.search(only, s.id))
              and (not clients or re.search(clients, s.client))]
    print_versions()
    sys.stdout.flush()

    def emit(sc, status, millis, detail):
        sys.stdout.write("RESULT %s %s %s %s %d %s\n" % (sc.group, sc.id, sc.client, status, millis,
                                                         one_line(detail)))
        sys.stdout.flush()

    why = rabbit_unavailable() if any(s.needs_rabbit for s in chosen) else None
    if why:
        for s in chosen:
            if s.needs_rabbit:
                emit(s, "skip", 0, why)
        chosen = [s for s in chosen if not s.needs_rabbit]
    why = not_warren(broker) if any(s.warren_only for s in chosen) else None
    if why:
        for s in chosen:
            if s.warren_only:
                emit(s, "skip", 0, why)
        chosen = [s for s in chosen if not s.warren_only]
    run(chosen, broker, run_id, timeout, jobs, emit)
    return 0


def print_versions():
    vers = {}
    for client, mod in (("pika", "pika"), ("py-amqp", "amqp"), ("kombu", "kombu"), ("celery", "celery")):
        try:
            vers[client] = __import__(mod).__version__
        except Exception:  # noqa: BLE001
            vers[client] = "not installed"
    vers["raw"] = "python %s (socket + pika codec)" % sys.version.split()[0]
    vers["http"] = "python %s (urllib)" % sys.version.split()[0]
    for k, v in vers.items():
        print("VERSION %s %s" % (k, v))


# ---------------------------------------------------------------- pika helpers

def sync(ch):
    """A harmless synchronous round trip on a pika channel: any asynchronous
    error caused by earlier commands (e.g. a publish) surfaces here."""
    ch.exchange_declare("amq.direct", exchange_type="direct", passive=True)


def drain(conn, seconds):
    """Processes pika I/O for the full `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        conn.process_data_events(time_limit=left)


def wait_for(conn, predicate, timeout=5.0, step=0.05):
    """Processes pika events until predicate() holds; returns its value."""
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        conn.process_data_events(time_limit=step)
    return predicate()


def get_all(ch, queue, limit=10000, auto_ack=True):
    out = []
    for _ in range(limit):
        m, p, b = ch.basic_get(queue, auto_ack=auto_ack)
        if m is None:
            break
        out.append((m, p, b))
    return out


def bodies(ch, queue):
    return [b.decode() for _, _, b in get_all(ch, queue)]


class Collector:
    """A pika consumer callback recording (method, properties, body)."""

    def __init__(self, ack=False):
        self.ack, self.msgs = ack, []

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


def channel_error(code, fn, *args, conn=None, **kw):
    """fn() must close the pika channel (not the connection) with `code`;
    the connection must still work. Returns the exception."""
    from pika import exceptions as pex
    try:
        fn(*args, **kw)
    except pex.ChannelClosedByBroker as e:
        eq(e.reply_code, code, "channel.close reply code (%s)" % e.reply_text)
        if conn is not None:
            check(conn.is_open, "connection closed after a channel error")
            sync(conn.channel())
        return e
    except pex.ConnectionClosedByBroker as e:
        raise Fail("connection closed %d %r, expected channel close %d" % (e.reply_code, e.reply_text, code))
    raise Fail("no channel error, expected %d" % code)


def connection_error(code, fn, *args, **kw):
    """fn() must make the broker close the pika connection with `code`."""
    from pika import exceptions as pex
    try:
        fn(*args, **kw)
    except pex.ConnectionClosedByBroker as e:
        eq(e.reply_code, code, "connection.close reply code (%s)" % e.reply_text)
        return e
    except pex.ChannelClosedByBroker as e:
        raise Fail("channel closed %d %r, expected connection close %d" % (e.reply_code, e.reply_text, code))
    raise Fail("no connection error, expected %d" % code)


def queue(t, ch, name=None, **kw):
    """Declares (and tracks) a queue; returns its name."""
    name = name or t.name("q")
    t.track_queue(name)
    ch.queue_declare(name, **kw)
    return name


def exchange(t, ch, kind="direct", name=None, **kw):
    name = name or t.name("x")
    t.track_exchange(name)
    ch.exchange_declare(name, exchange_type=kind, **kw)
    return name


def bound_queue(t, ch, x, *keys, arguments=None):
    q = queue(t, ch)
    for k in keys or ("",):
        ch.queue_bind(q, x, k, arguments=arguments)
    return q


def count(ch, q):
    return ch.queue_declare(q, passive=True).method.message_count


def wait_count(ch, q, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        c = count(ch, q)
        if c == n or time.monotonic() > deadline:
            return c
        time.sleep(0.02)


def queue_gone(conn, q, timeout=5.0):
    """True once a passive declare of q answers 404 (deletions that follow
    a close or cancel may lag behind its reply)."""
    from pika import exceptions as pex
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ch = conn.channel()
        try:
            ch.queue_declare(q, passive=True)
        except pex.ChannelClosedByBroker as e:
            eq(e.reply_code, NOT_FOUND, "passive declare of a deleted queue")
            return True
        ch.close()
        time.sleep(0.02)
    return False


def exchange_gone(conn, x):
    from pika import exceptions as pex
    ch = conn.channel()
    try:
        ch.exchange_declare(x, passive=True)
    except pex.ChannelClosedByBroker as e:
        eq(e.reply_code, NOT_FOUND, "passive declare of a deleted exchange")
        return True
    ch.close()
    return False


def alive(t):
    """The broker still serves a new client: declare, publish, get."""
    c = t.pika()
    ch = c.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    ch.basic_publish("", q, b"alive")
    eq(ch.basic_get(q, auto_ack=True)[2], b"alive", "round trip on a new connection")
    c.close()


def socket_closed(sock, timeout):
    """True when the peer closes sock within timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except socket.timeout:
            return False
        except OSError:
            return True
    return False
