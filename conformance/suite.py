#!/usr/bin/python3
"""The conformance suite driver behind conformance/run.sh (`make conformance`).

It finds or starts the broker(s), runs every family runner
(conformance/<family>/run) with the CONF_* environment of the contract,
reads their `RESULT <group> <id> <client> <pass|fail> <millis> <detail>`
lines, prints one line per scenario, and writes conformance/out/ (JUnit XML,
summary, logs) and, with COMPARE=1, conformance/RESULTS.md. See README.md.
"""
import datetime
import html
import json
import os
import re
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

from restart import wait_amqp

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out")
FAMILY_ORDER = ["python", "node", "c", "mgmt"]
LISTEN_RE = re.compile(r"AMQP listening on ([0-9.]+):([0-9]+)")
# The HTTP listeners Warren is asked for (settings key prefix -> log line).
STREAM_LISTENER = re.compile(r"stream protocol listening on ([0-9.]+):([0-9]+)")
HTTP_LISTENERS = {"management": re.compile(r"management listening on ([0-9.]+):([0-9]+)"),
                  "prometheus": re.compile(r"prometheus listening on ([0-9.]+):([0-9]+)")}
HTTP_GRACE = 5   # seconds to wait for the HTTP listeners' lines after the AMQP one
RESULT_RE = re.compile(r"^RESULT (\S+) (\S+) (\S+) (pass|fail|skip) (\d+) ?(.*)$")
# A skip is a scenario that needs what this run does not have (the
# reference RabbitMQ, COMPARE=1 only; or Warren, for a Warren-only feature):
# reported apart, neither passed nor failed.
STATUS_WORD = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}
VERSION_RE = re.compile(r"^VERSION (\S+) (.+)$")
GROUPS = ["connection", "channel", "exchange", "routing", "queue", "basic", "properties", "content", "consumer",
          "qos", "ack", "confirm", "tx", "errors", "malformed", "heartbeat", "extensions", "durability", "framework",
          "mgmt", "permissions", "limits", "stream"]


def env(name, default=""):
    v = os.environ.get(name)
    return default if v is None or v == "" else v


def truthy(name):
    return env(name) not in ("", "0", "no", "false")


# ---------------------------------------------------------------- output

class Printer:
    """Scenario lines as `PASS|FAIL <id> <client> <ms> <detail>` or TAP."""

    def __init__(self, tap):
        self.tap = tap
        self.n = 0
        self.lock = threading.Lock()

    def note(self, text):
        with self.lock:
            for line in text.splitlines() or [""]:
                print(("# " + line) if self.tap else line, flush=True)

    def result(self, r, show=True):
        if not show:
            return
        with self.lock:
            if self.tap:
                self.n += 1
                ok = "not ok" if r["status"] == "fail" else "ok"
                skip = " # SKIP " + r["detail"] if r["status"] == "skip" else ""
                print("%s %d - conformance/%s: %s%s" % (ok, self.n, r["client"], r["id"], skip), flush=True)
                if r["status"] == "fail" and r["detail"]:
                    print("# " + r["detail"], flush=True)
            else:
                print(("%s %s %s %d %s" % (STATUS_WORD[r["status"]], r["id"], r["client"],
                                           r["millis"], r["detail"])).rstrip(), flush=True)

    def plan(self):
        if self.tap:
            print("1..%d" % self.n, flush=True)


# ---------------------------------------------------------------- brokers

class Warren:
    """Warren on 127.0.0.1:<ephemeral> in a temp data dir, with its management
    and Prometheus listeners on ephemeral ports too; its log goes to out/.
    restart() stops it with SIGTERM and starts it again on the same data dir,
    settings and ports, for the restart scenarios (RestartServer)."""

    def __init__(self, binary, log_path):
        self.binary, self.log_path = binary, log_path
        self.proc = self.tmpdir = self.port = None
        self.drainer = None
        self.tail = []
        self.http = {}          # "management"/"prometheus" -> port, once logged
        self.http_wanted = list(HTTP_LISTENERS)
        self.stream_port = None  # the stream protocol listener's, once reported
        self.http_why = {}      # listener -> why there is none
        self.lock = threading.RLock()   # start/stop/restart/alive, from the main and restart threads

    def start(self, timeout=15):
        """Starts Warren on a new data dir and free ports; returns the AMQP
        port. A Warren that refuses the management or Prometheus settings
        (an unknown key) is started again without them: the scenarios that
        need those listeners then fail, the others still run."""
        with self.lock:
            self.tmpdir = tempfile.mkdtemp(prefix="warren-conf-")
            self.port = None
            self.http = {}
            err = self._launch(0, timeout)
            for _ in HTTP_LISTENERS:   # Warren stops at the first unknown key
                refused = [k for k in self.http_wanted if err and "unknown key '%s." % k in err]
                if not refused:
                    break
                for k in refused:
                    self.http_why[k] = ("Warren refused --set %s.tcp.port (unknown key): started without its %s "
                                        "listener" % (k, k))
                self.http_wanted = [k for k in self.http_wanted if k not in refused]
                self._terminate()
                err = self._launch(0, timeout)
            if err:
                self.stop()
                raise RuntimeError(err)
            for k in self.http_wanted:
                if k not in self.http:
                    self.http_why[k] = ("Warren (started with --set %s.tcp.port=0 --set %s.tcp.ip=127.0.0.1) logged "
                                        "no '%s listening on 127.0.0.1:PORT' line within %d s of its AMQP listener"
                                        % (k, k, k, HTTP_GRACE))
            return self.port

    def url(self, listener):
        """http://127.0.0.1:PORT of a listener Warren reported, else ""."""
        port = self.http.get(listener)
        return "http://127.0.0.1:%d" % port if port else ""

    def _argv(self, port):
        argv = [self.binary, "--set", "listeners.tcp.default=127.0.0.1:%d" % port,
                # a restart keeps the stream port too
                "--set", "stream.listeners.tcp.default=127.0.0.1:%d" % (self.stream_port or 0),
                "--set", "data_dir=%s" % self.tmpdir]
        for k in self.http_wanted:
            # a restart keeps the ports the first start was given
            argv += ["--set", "%s.tcp.port=%d" % (k, self.http.get(k, 0)), "--set", "%s.tcp.ip=127.0.0.1" % k]
        return argv

    def _launch(self, port, timeout):
        """Starts the binary on self.tmpdir and 127.0.0.1:port (0 = any) and
        waits for `AMQP listening on` (then up to HTTP_GRACE s for the HTTP
        listeners' lines); returns None or why it failed."""
        argv = self._argv(port)
        found, seen = threading.Event(), {}
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, cwd=self.tmpdir)
        self.drainer = threading.Thread(target=self._drain, args=(self.proc, found, seen), daemon=True)
        self.drainer.start()
        if not found.wait(timeout) or "port" not in seen:
            try:
                rc = self.proc.wait(1)   # stderr closed: the exit follows
            except subprocess.TimeoutExpired:
                rc = None
            why = ("exited with status %s" % rc) if rc is not None else "did not start within %d s" % timeout
            return ("Warren %s before reporting 'AMQP listening on'; its log:\n%s"
                    % (why, "\n".join(seen.get("lines", [])[-20:])))
        if port and seen["port"] != port:
            return "Warren restarted on port %d instead of %d" % (seen["port"], port)
        self.port = seen["port"]
        deadline = time.monotonic() + HTTP_GRACE
        while any(k not in seen for k in self.http_wanted) and time.monotonic() < deadline \
                and self.proc.poll() is None:
            time.sleep(0.05)
        for k in self.http_wanted:
            if k in seen:
                self.http[k] = seen[k]
        self.stream_port = seen.get("stream", self.stream_port)
        return None

    def _drain(self, proc, found, seen):
        """Copies one process's stderr to the log; sets found at its listening
        line, or at its end (so a failed start does not wait the full timeout)."""
        with open(self.log_path, "ab") as log:
            for raw in iter(proc.stderr.readline, b""):
                log.write(raw)
                log.flush()
                line = raw.decode("utf-8", "replace").rstrip("\n")
                self.tail = (self.tail + [line])[-50:]
                if "port" not in seen:
                    seen["lines"] = (seen.get("lines", []) + [line])[-20:]
                m = LISTEN_RE.search(line)
                if m and "port" not in seen:
                    seen["port"] = int(m.group(2))
                    found.set()
                for k, rx in HTTP_LISTENERS.items():
                    m = rx.search(line)
                    if m and k not in seen:
                        seen[k] = int(m.group(2))
                m = STREAM_LISTENER.search(line)
                if m and "stream" not in seen:
                    seen["stream"] = int(m.group(2))
        found.set()

    def alive(self):
        with self.lock:
            return self.proc is not None and self.proc.poll() is None

    def _terminate(self):
        """SIGTERM, SIGKILL after 15 s. Returns the exit status (None if not started)."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    rc = self.proc.wait(15)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(5)
                    rc = "killed after SIGTERM timeout"
            else:
                rc = self.proc.returncode
            self.proc = None
            if self.drainer is not None:
                self.drainer.join(5)   # the old process's last log lines before the new one's
        return rc

    def stop(self):
        """Stops Warren and removes its data dir. Returns the exit status (None if not started)."""
        with self.lock:
            rc = self._terminate()
            if self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
                self.tmpdir = None
            return rc

    def restart(self, timeout=15):
        """SIGTERM, wait for the exit, start again on the same data dir, settings
        and port, wait until it serves AMQP. Returns None, or what went wrong
        (then Warren is running afresh on an empty data dir, so that later
        scenarios still have a broker; the old data dir is kept for a look)."""
        with self.lock:
            port = self.port
            with open(self.log_path, "ab") as log:
                log.write(b"---- conformance suite: restart (SIGTERM, then start on the same data dir)\n")
            rc = self._terminate()
            err = None if rc == 0 else "Warren exited with %s on SIGTERM (expected 0)" % rc
            failed = self._launch(port, timeout) or (None if wait_amqp("127.0.0.1", port)
                                                     else "Warren does not serve AMQP after its restart")
            if failed:
                self._terminate()
                kept, self.tmpdir = self.tmpdir, tempfile.mkdtemp(prefix="warren-conf-")
                if self._launch(port, timeout):
                    self._terminate()    # no broker any more: later scenarios fail fast
                    shutil.rmtree(self.tmpdir, ignore_errors=True)
                    self.tmpdir = None
                return "Warren did not come back on its data dir (kept at %s): %s" % (kept, failed)
            return err


class RestartServer:
    """A Unix socket on which `restart.py warren SOCKET` asks for a restart of
    the Warren run.sh started (a scenario runs in a grandchild process and
    cannot restart it itself). One request at a time; answers `ok` or
    `error: <reason>`."""

    def __init__(self, warren):
        self.warren = warren
        self.dir = tempfile.mkdtemp(prefix="warren-conf-ctl-")
        self.path = os.path.join(self.dir, "restart.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        threading.Thread(target=self._serve, daemon=True).start()

    def command(self):
        return shlex.join([sys.executable, os.path.join(HERE, "restart.py"), "warren", self.path])

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return   # closed
            with conn:
                try:
                    conn.settimeout(10)
                    if not conn.recv(64).startswith(b"restart"):
                        conn.sendall(b"error: unknown request\n")
                        continue
                    conn.settimeout(None)
                    err = self.warren.restart()
                    conn.sendall(b"ok\n" if err is None else ("error: %s\n" % " ".join(err.split())).encode())
                except OSError:
                    pass

    def close(self):
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def shown_path(path):
    """A path relative to the repository when inside it, else absolute."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def parse_uri(uri):
    u = urllib.parse.urlparse(uri)
    if u.scheme != "amqp" or not u.hostname:
        raise SystemExit("run.sh: TARGET must look like amqp://user:pass@host:port, got %r" % uri)
    return u.hostname, u.port or 5672


def redact(uri):
    u = urllib.parse.urlparse(uri)
    if u.password:
        netloc = "%s:***@%s" % (u.username, u.hostname) + (":%d" % u.port if u.port else "")
        return urllib.parse.urlunparse(u._replace(netloc=netloc))
    return uri


def server_properties(host, port, timeout=5):
    """product/version/platform from connection.start, read with a bare socket."""
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        return {"error": str(e)}
    try:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        buf = b""
        while len(buf) < 7 or len(buf) < 8 + struct.unpack(">I", buf[3:7])[0]:
            chunk = s.recv(65536)
            if not chunk:
                return {"error": "connection closed before connection.start"}
            buf += chunk
        size = struct.unpack(">I", buf[3:7])[0]
        payload = buf[7:7 + size]
        # class, method, version major/minor, then the server-properties table
        tlen = struct.unpack(">I", payload[6:10])[0]
        return decode_table(payload[10:10 + tlen])
    except (OSError, struct.error, ValueError) as e:
        return {"error": str(e)}
    finally:
        s.close()


def decode_table(b):
    out, off = {}, 0
    while off < len(b):
        klen = b[off]
        key = b[off + 1:off + 1 + klen].decode("utf-8", "replace")
        off += 1 + klen
        tag = b[off:off + 1]
        off += 1
        if tag == b"S":
            n = struct.unpack(">I", b[off:off + 4])[0]
            out[key] = b[off + 4:off + 4 + n].decode("utf-8", "replace")
            off += 4 + n
        elif tag == b"F":
            n = struct.unpack(">I", b[off:off + 4])[0]
            out[key] = decode_table(b[off + 4:off + 4 + n])
            off += 4 + n
        elif tag == b"t":
            out[key] = b[off] != 0
            off += 1
        else:
            break  # server properties use only these; stop at anything else
    return out


# ---------------------------------------------------------------- families

def families():
    """[(name, path)] of every conformance/<family>/run, in FAMILY_ORDER first."""
    found = {n: os.path.join(HERE, n, "run") for n in FAMILY_ORDER}
    for name in sorted(os.listdir(HERE)):
        path = os.path.join(HERE, name, "run")
        if name not in found and name != "out" and os.path.isfile(path):
            found[name] = path
    ordered = [n for n in FAMILY_ORDER if n in found] + [n for n in found if n not in FAMILY_ORDER]
    only = env("FAMILIES")
    if only:
        wanted = only.replace(",", " ").split()
        ordered = [n for n in ordered if n in wanted]
    return [(n, found[n]) for n in ordered]


class BrokerRun:
    """Everything learned from running the suite against one broker."""

    def __init__(self, label, uri, mgmt):
        self.label, self.uri, self.mgmt = label, uri, mgmt
        self.results = {}     # (id, client) -> record
        self.versions = {}    # client -> version
        self.server = {}
        self.notes = []
        self.started = time.monotonic()
        self.seconds = 0.0
        self.lock = threading.Lock()
        self.shadow = False   # the comparison broker: no TAP lines of its own

    def add(self, rec):
        with self.lock:
            self.results[(rec["id"], rec["client"])] = rec

    def failed(self):
        return [r for r in self.results.values() if r["status"] == "fail"]

    def skipped(self):
        return [r for r in self.results.values() if r["status"] == "skip"]


def synthetic(group, sid, client, detail):
    return {"group": group, "id": sid, "client": client, "status": "fail", "millis": 0, "detail": detail}


def run_family(name, path, br, conf_env, printer, timeout, warren):
    """Runs one family runner to completion (or its timeout) against br."""
    if not os.access(path, os.X_OK):
        printer.note("skip family %s: %s is missing or not executable" % (name, os.path.relpath(path, ROOT)))
        br.notes.append("family %s skipped: no executable %s" % (name, os.path.relpath(path, ROOT)))
        return
    log_path = os.path.join(OUT, "%s-%s.log" % (br.label.lower(), name))
    printer.note("== family %s against %s (log: %s)" % (name, br.label, os.path.relpath(log_path, ROOT)))
    t0 = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([path], cwd=os.path.dirname(path), env=conf_env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=log, start_new_session=True)
        timer = threading.Timer(timeout, lambda: kill_tree(proc))
        timer.start()
        count = 0
        try:
            for raw in iter(proc.stdout.readline, b""):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                log.write(b"stdout: " + raw)
                m = RESULT_RE.match(line)
                if m:
                    rec = {"group": m.group(1), "id": m.group(2), "client": m.group(3), "status": m.group(4),
                           "millis": int(m.group(5)), "detail": m.group(6).strip(), "family": name}
                    br.add(rec)
                    printer.result(rec, show=not (printer.tap and br.shadow))
                    count += 1
                    continue
                m = VERSION_RE.match(line)
                if m:
                    br.versions[m.group(1)] = m.group(2).strip()
            rc = proc.wait()
        finally:
            timer.cancel()
    elapsed = time.monotonic() - t0
    if elapsed >= timeout:
        rec = synthetic("suite", "suite.%s_family" % name, name,
                        "family runner killed after its %d s budget (%d results reported)" % (timeout, count))
        br.add(rec)
        printer.result(rec, show=not (printer.tap and br.shadow))
    elif rc != 0:
        rec = synthetic("suite", "suite.%s_family" % name, name,
                        "family runner exited with status %s after %d results; see %s"
                        % (rc, count, os.path.relpath(log_path, ROOT)))
        br.add(rec)
        printer.result(rec, show=not (printer.tap and br.shadow))
    if warren is not None and not warren.alive():
        rec = synthetic("suite", "suite.broker_alive_after_%s" % name, name,
                        "Warren exited during the %s family (status %s); log tail: %s"
                        % (name, warren.proc.returncode if warren.proc else "?", " / ".join(warren.tail[-3:])))
        br.add(rec)
        printer.result(rec, show=not (printer.tap and br.shadow))
    printer.note("-- family %s: %d results in %.1f s" % (name, count, elapsed))


def kill_tree(proc):
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(1)
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def restart_command(var, uri, server):
    """(command, how) for CONF_RESTART when run.sh did not start the broker:
    $var if set (`none`: no restart), else for a RabbitMQ on this machine
    `restart.py rabbitmqctl HOST:PORT`, else none (restart scenarios fail)."""
    given = env(var)
    if given == "none":
        return "", "none (%s=none)" % var
    if given:
        return given, "%s=%s" % (var, given)
    host, port = parse_uri(uri)
    if server.get("product") == "RabbitMQ" and host in ("127.0.0.1", "localhost", "::1") \
            and shutil.which(os.environ.get("RABBITMQCTL") or "rabbitmqctl"):
        return (shlex.join([sys.executable, os.path.join(HERE, "restart.py"), "rabbitmqctl", "%s:%d" % (host, port)]),
                "rabbitmqctl stop_app + start_app")
    return "", "none: set %s to a command that restarts %s" % (var, redact(uri))


def http_env(warren, mgmt, prometheus, how):
    """CONF_MGMT and CONF_PROMETHEUS (with CONF_*_WHY when empty) for the
    families: the listeners of the Warren run.sh started, else the URLs
    given (how names the variables that give them)."""
    out = {}
    for key, listener, given, var in (("CONF_MGMT", "management", mgmt, how[0]),
                                      ("CONF_PROMETHEUS", "prometheus", prometheus, how[1])):
        if warren is not None:
            out[key] = warren.url(listener)
            out[key + "_WHY"] = warren.http_why.get(listener, "")
        else:
            out[key] = given or ""
            out[key + "_WHY"] = "" if given else "%s is not set (http://host:port of the broker's %s listener)" % (
                var, listener)
    return out


def run_broker(label, uri, mgmt, start_warren, printer, run_id, shadow=False, restart_var="RESTART",
               prometheus="", http_vars=("MGMT", "PROMETHEUS"), stream=""):
    br = BrokerRun(label, uri, mgmt)
    br.shadow = shadow
    warren = restarter = None
    if start_warren:
        binary = env("WARREN_BIN", os.path.join(ROOT, "build", "release", "warren"))
        if not os.path.isabs(binary):
            binary = os.path.join(ROOT, binary)
        if not os.access(binary, os.X_OK):
            raise SystemExit("run.sh: Warren binary %s not found (build it: make build/release/warren)" % binary)
        warren = Warren(binary, os.path.join(OUT, "warren.log"))
        open(warren.log_path, "wb").close()
        port = warren.start()
        br.uri = uri = "amqp://guest:guest@127.0.0.1:%d" % port
        br.binary = binary
        printer.note("started Warren %s on 127.0.0.1:%d (log: %s)"
                     % (shown_path(binary), port, os.path.relpath(warren.log_path, ROOT)))
        for k in HTTP_LISTENERS:
            printer.note("  %s: %s" % (k, warren.url(k) or warren.http_why.get(k, "none")))
    host, port = parse_uri(uri)
    br.server = server_properties(host, port)
    printer.note("== broker %s at %s: %s %s" % (label, redact(uri), br.server.get("product", "?"),
                                                 br.server.get("version", br.server.get("error", ""))))
    if warren is not None:
        restarter = RestartServer(warren)
        restart_cmd, how = restarter.command(), "run.sh restarts the Warren it started"
    else:
        restart_cmd, how = restart_command(restart_var, uri, br.server)
    printer.note("restart scenarios: %s" % how)
    quick = truthy("QUICK")
    conf_env = dict(os.environ, CONF_URI=uri, CONF_RUN_ID=run_id,
                    CONF_QUICK="1" if quick else "0", CONF_ONLY=env("ONLY"),
                    CONF_TIMEOUT=env("TIMEOUT", env("CONF_TIMEOUT", "20")), CONF_RESTART=restart_cmd,
                    CONF_RABBIT_MGMT=env("RABBIT_MGMT", "http://127.0.0.1:15672"),
                    CONF_COMPARE="1" if truthy("COMPARE") else "0",
                    # host:port of the stream protocol listener ("" = none given)
                    CONF_STREAM="127.0.0.1:%d" % warren.stream_port if warren and warren.stream_port
                    else stream,
                    **http_env(warren, mgmt, prometheus, http_vars))
    br.mgmt = conf_env["CONF_MGMT"]
    conf_env.setdefault("CONF_JOBS", env("JOBS", "1"))
    budget = int(env("FAMILY_TIMEOUT", "90" if quick else "3600"))
    fams = families()
    parallel = int(env("FAMILY_JOBS", "3" if quick else "1"))
    if parallel > 1 and not quick and restart_cmd:
        printer.note("warning: FAMILY_JOBS=%d: a restart scenario restarts the broker under the other families' "
                     "scenarios too" % parallel)
    try:
        if parallel > 1:
            threads = [threading.Thread(target=run_family, args=(n, p, br, conf_env, printer, budget, warren))
                       for n, p in fams]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        else:
            for n, p in fams:
                run_family(n, p, br, conf_env, printer, budget, warren)
                if warren is not None and not warren.alive():
                    printer.note("Warren died; restarting it for the next family")
                    warren.stop()
                    new_port = warren.start()
                    br.uri = conf_env["CONF_URI"] = "amqp://guest:guest@127.0.0.1:%d" % new_port
                    conf_env.update(http_env(warren, mgmt, prometheus, http_vars))
    finally:
        if restarter is not None:
            restarter.close()
        if warren is not None:
            rc = warren.stop()
            if rc not in (0, None):
                rec = synthetic("suite", "suite.broker_shutdown", "warren",
                                "Warren exited with %s on SIGTERM (expected 0); see conformance/out/warren.log" % rc)
                br.add(rec)
                printer.result(rec, show=not (printer.tap and br.shadow))
    br.seconds = time.monotonic() - br.started
    return br


# ---------------------------------------------------------------- reports

def group_order(groups):
    return [g for g in GROUPS if g in groups] + sorted(g for g in groups if g not in GROUPS)


def summary_rows(br):
    rows = {}
    for r in br.results.values():
        if r["status"] == "skip":
            continue
        row = rows.setdefault(r["group"], [0, 0])
        row[0] += 1
        row[1] += r["status"] == "pass"
    return rows


def summary_table(br):
    rows = summary_rows(br)
    lines = ["| group | scenarios | passed | failed |", "| --- | ---: | ---: | ---: |"]
    tot = [0, 0]
    for g in group_order(rows):
        n, p = rows[g]
        tot[0] += n
        tot[1] += p
        lines.append("| %s | %d | %d | %d |" % (g, n, p, n - p))
    lines.append("| **total** | %d | %d | %d |" % (tot[0], tot[1], tot[0] - tot[1]))
    return "\n".join(lines)


def junit(br, path):
    by_group = {}
    for r in br.results.values():
        by_group.setdefault(r["group"], []).append(r)
    fails = len(br.failed())
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<testsuites name="conformance" tests="%d" failures="%d" skipped="%d" time="%.3f">'
           % (len(br.results), fails, len(br.skipped()), br.seconds)]
    for g in group_order(by_group):
        rs = sorted(by_group[g], key=lambda r: (r["id"], r["client"]))
        out.append('  <testsuite name="%s" tests="%d" failures="%d">'
                   % (html.escape(br.label.lower() + "." + g), len(rs), sum(r["status"] == "fail" for r in rs)))
        for r in rs:
            attrs = 'classname="%s" name="%s" time="%.3f"' % (html.escape(g), html.escape("%s [%s]" % (r["id"], r["client"])),
                                                             r["millis"] / 1000.0)
            if r["status"] == "pass":
                out.append("    <testcase %s/>" % attrs)
            elif r["status"] == "skip":
                out.append('    <testcase %s><skipped message="%s"/></testcase>'
                           % (attrs, html.escape(xml_safe(r["detail"]))))
            else:
                out.append('    <testcase %s><failure message="%s"/></testcase>'
                           % (attrs, html.escape(xml_safe(r["detail"]) or "failed")))
        out.append("  </testsuite>")
    out.append("</testsuites>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def xml_safe(s):
    return re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", "?", s)


def client_versions(runs):
    vers = {}
    for br in runs:
        for k, v in br.versions.items():
            vers.setdefault(k, v)
    node_mods = os.path.join(HERE, "node", "node_modules")
    for client, pkg in (("amqplib", "amqplib"), ("cloudamqp", "@cloudamqp/amqp-client")):
        if client not in vers:
            try:
                with open(os.path.join(node_mods, pkg, "package.json")) as f:
                    vers[client] = json.load(f)["version"]
            except (OSError, ValueError, KeyError):
                pass
    if "rabbitmq-c" not in vers:
        try:
            v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "librabbitmq4"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
            if v:
                vers["rabbitmq-c"] = v + " (librabbitmq4)"
        except (OSError, subprocess.SubprocessError):
            pass
    return vers


def md(s, limit=240):
    s = s.replace("|", "\\|").replace("\n", " ")
    return s if len(s) <= limit else s[:limit] + "…"


def results_md(warren, rabbit, argv_note):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    keys = sorted(set(warren.results) | set(rabbit.results))
    rows = {}
    for key in keys:
        w, r = warren.results.get(key), rabbit.results.get(key)
        g = (w or r)["group"]
        row = rows.setdefault(g, [0, 0, 0])
        row[0] += 1
        row[1] += bool(w and w["status"] == "pass")
        row[2] += bool(r and r["status"] == "pass")
    vers = client_versions([warren, rabbit])
    lines = ["# Conformance results", "",
             "Latest run: %s, `%s`. Regenerate with `make conformance COMPARE=1` (RabbitMQ at RABBIT_URI, "
             "default amqp://guest:guest@127.0.0.1:5672)." % (now, argv_note), ""]
    lines += ["| broker | product | version | where | run time |", "| --- | --- | --- | --- | ---: |"]
    for br in (warren, rabbit):
        where = ("started by run.sh from `%s`" % shown_path(br.binary)) if getattr(br, "binary", None) \
            else redact(br.uri)
        lines.append("| %s | %s | %s | %s | %.0f s |" % (br.label, br.server.get("product", "?"),
                                                        br.server.get("version", br.server.get("error", "?")),
                                                        where, br.seconds))
    lines += ["", "Client libraries: " + ", ".join("%s %s" % (k, v) for k, v in sorted(vers.items())) + ".", ""]
    lines += ["A scenario is counted once per client it runs in (an id run by pika, py-amqp and kombu counts "
              "three times).", ""]
    lines += ["| group | scenarios | Warren passed | RabbitMQ passed |", "| --- | ---: | ---: | ---: |"]
    tot = [0, 0, 0]
    for g in group_order(rows):
        n, w, r = rows[g]
        tot = [tot[0] + n, tot[1] + w, tot[2] + r]
        lines.append("| %s | %d | %d | %d |" % (g, n, w, r))
    lines.append("| **total** | **%d** | **%d** | **%d** |" % tuple(tot))
    by_client = {}
    for key in keys:
        w, r = warren.results.get(key), rabbit.results.get(key)
        row = by_client.setdefault(key[1], [0, 0, 0])
        row[0] += 1
        row[1] += bool(w and w["status"] == "pass")
        row[2] += bool(r and r["status"] == "pass")
    lines += ["", "| client | scenarios | Warren passed | RabbitMQ passed |", "| --- | ---: | ---: | ---: |"]
    for c in sorted(by_client):
        lines.append("| %s | %d | %d | %d |" % ((c,) + tuple(by_client[c])))
    failing = [k for k in keys
               if not (warren.results.get(k, {}).get("status") == "pass"
                       and rabbit.results.get(k, {}).get("status") == "pass")]
    lines += ["", "## Scenarios failing on either side (%d)" % len(failing), ""]
    if failing:
        lines += ["| scenario | client | Warren | RabbitMQ |", "| --- | --- | --- | --- |"]

        def cell(rec):
            if rec is None:
                return "not run"
            if rec["status"] == "skip":
                return "skipped: " + md(rec["detail"])
            return "pass" if rec["status"] == "pass" else "FAIL: " + md(rec["detail"] or "failed")
        for k in failing:
            lines.append("| %s | %s | %s | %s |" % (k[0], k[1], cell(warren.results.get(k)), cell(rabbit.results.get(k))))
    else:
        lines.append("None.")
    notes = warren.notes + [n for n in rabbit.notes if n not in warren.notes]
    if notes:
        lines += ["", "Notes:", ""] + ["- " + n for n in notes]
    lines.append("")
    with open(os.path.join(HERE, "RESULTS.md"), "w") as f:
        f.write("\n".join(lines))


def write_outputs(br, suffix, printer):
    junit(br, os.path.join(OUT, "junit%s.xml" % suffix))
    table = summary_table(br)
    with open(os.path.join(OUT, "summary%s.md" % suffix), "w") as f:
        f.write("Conformance against %s (%s %s), %.0f s\n\n%s\n"
                % (br.label, br.server.get("product", "?"), br.server.get("version", ""), br.seconds, table))
    with open(os.path.join(OUT, "results%s.txt" % suffix), "w") as f:
        for r in sorted(br.results.values(), key=lambda r: (r["group"], r["id"], r["client"])):
            f.write(("%s %s %s %d %s\n" % (STATUS_WORD[r["status"]], r["id"], r["client"],
                                           r["millis"], r["detail"])).rstrip() + "\n")
    printer.note("")
    printer.note("Summary for %s (%s %s) in %.0f s:" % (br.label, br.server.get("product", "?"),
                                                         br.server.get("version", ""), br.seconds))
    printer.note(table)


def main():
    os.makedirs(OUT, exist_ok=True)
    printer = Printer(env("FORMAT") == "tap")
    run_id = "%s%s" % (time.strftime("%H%M%S"), os.urandom(2).hex())
    target, mgmt, prom = env("TARGET"), env("MGMT"), env("PROMETHEUS")
    if truthy("COMPARE"):
        warren = run_broker("Warren", target, mgmt, not target, printer, run_id, prometheus=prom,
                            stream=env("STREAM"))
        write_outputs(warren, "", printer)
        # RabbitMQ on this machine by default: its management and Prometheus ports too
        local = not env("RABBIT_URI")
        rabbit = run_broker("RabbitMQ", env("RABBIT_URI", "amqp://guest:guest@127.0.0.1:5672"),
                            env("RABBIT_MGMT", "http://127.0.0.1:15672" if local else ""),
                            False, printer, run_id + "r", shadow=True, restart_var="RABBIT_RESTART",
                            prometheus=env("RABBIT_PROMETHEUS", "http://127.0.0.1:15692" if local else ""),
                            http_vars=("RABBIT_MGMT", "RABBIT_PROMETHEUS"),
                            stream=env("RABBIT_STREAM", "127.0.0.1:5552" if local else ""))
        write_outputs(rabbit, "-rabbitmq", printer)
        note = "COMPARE=1%s conformance/run.sh" % (" QUICK=1" if truthy("QUICK") else "")
        if env("ONLY"):
            note += " (ONLY=%s)" % env("ONLY")
        results_md(warren, rabbit, note)
        printer.note("wrote %s" % os.path.relpath(os.path.join(HERE, "RESULTS.md"), ROOT))
        under_test = warren
    else:
        under_test = run_broker("target" if target else "Warren", target, mgmt, not target, printer, run_id,
                                prometheus=prom, stream=env("STREAM"))
        write_outputs(under_test, "", printer)
    printer.note("JUnit: %s" % os.path.relpath(os.path.join(OUT, "junit.xml"), ROOT))
    f, k = len(under_test.failed()), len(under_test.skipped())
    n = len(under_test.results) - k
    if k:
        printer.note("%d skipped (they need RabbitMQ beside the broker, COMPARE=1 only, or are "
                     "Warren-only)" % k)
    if not printer.tap:
        print("%d passed, %d failed" % (n - f, f), flush=True)
    printer.plan()
    return 1 if f or (n == 0 and not k) else 0


if __name__ == "__main__":
    sys.exit(main())
