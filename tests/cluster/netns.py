"""A Warren cluster on one machine: network namespaces, a bridge, etcd, Warren.

Netns(n) makes a private network for one run: a Linux bridge <prefix>-br in
the host namespace at 10.<k>.0.254/24 and n namespaces <prefix>-n1..n, each
with lo up and a veth pair (host side <prefix>-h<i> on the bridge, inside
eth0 at 10.<k>.0.<i>/24). The prefix is "w" + 4 hex digits and k a free
10.<k>/16 in 200..250, both reserved under a lock in STATE_DIR, so two runs
never clash. EtcdCluster runs one etcd member per namespace as ONE cluster;
WarrenCluster one Warren per namespace on fixed ports of its address;
cluster() sets all three up in one step.

Every process goes through Netns.run_in (`ip netns exec`, which execs: the
pid is the program's own) with PR_SET_PDEATHSIG, so it dies with this
Python process even on SIGKILL. teardown() -- run by `with`, atexit and
SIGTERM/SIGINT -- SIGCONTs and SIGKILLs every process it started and any
other process in its namespaces, then deletes veths, namespaces, bridge,
temp dir and state file. A run killed with SIGKILL leaves its namespaces and
links: cleanup_stale() (called by every new Netns) removes those of runs
whose owner process is gone, and only names of this harness's pattern.

Needs root, iproute2 (ip, tc, bridge), etcd (etcd-server), /usr/bin/python3.
"""
import atexit
import base64
import contextlib
import ctypes
import fcntl
import json
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import types
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_ITEST_DIR = str(REPO / "tests" / "integration" / "py")
if _ITEST_DIR not in sys.path:
    sys.path.insert(0, _ITEST_DIR)
import harness  # noqa: E402  (WarrenProcess, its log parsing, pika helpers)

STATE_DIR = Path("/run/warren-netns")  # tmpfs: gone with the namespaces on reboot
ETCD_BIN = os.environ.get("ETCD_BIN") or "/usr/bin/etcd"
SLOWSYNC_SO = os.environ.get("WARREN_SLOWSYNC_SO") or str(REPO / "build" / "slowsync.so")
LINKEMU = str(Path(__file__).resolve().parent / "linkemu.py")
SUBNETS = range(200, 251)
CMD_TIMEOUT = 10.0
KILL_WAIT = 5.0

_PREFIX_RE = r"w[0-9a-f]{4}"
_NS_RE = re.compile(r"^(%s)-n\d+$" % _PREFIX_RE)
_LINK_RE = re.compile(r"^(%s)-(?:br|[hde]\d+)$" % _PREFIX_RE)

# ---------------------------------------------------------------- processes

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """A preexec_fn: the child gets SIGKILL when this process's thread that
    forked it exits (start processes from the main thread), and exits at once
    if the parent is already gone."""
    parent = os.getpid()

    def setup():
        if _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
        if os.getppid() != parent:
            os._exit(1)
        os.setsid()  # a terminal's ^C reaches Python alone, which tears down in order
    return setup


def _run(argv, check=True, timeout=CMD_TIMEOUT):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stderr.strip()))
    return r


def _kill_hard(pid):
    """SIGCONT first: a SIGSTOPped process must not stay stopped if the
    SIGKILL is ever delayed, and one that catches nothing dies either way."""
    for sig in (signal.SIGCONT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return


def _stat_field(pid, n):
    """Field n (1-based, as in proc(5)) of /proc/<pid>/stat, None if gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[n - 3]  # fields 1-2: pid (comm)
    except (OSError, IndexError):
        return None


def _start_time(pid):
    """The process's start time in clock ticks (to tell a reused pid apart)."""
    return _stat_field(pid, 22)


def _proc_state(pid):
    """R, S, T (stopped), Z (zombie)...; None once the process is gone."""
    return _stat_field(pid, 3)


def _write_sysctl(path, value):
    with open("/proc/sys/" + path, "w") as f:
        f.write(value)


def select_line(stream, timeout):
    """One line from a pipe within timeout (stripped), or None."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        return None
    line = stream.readline()
    return (line.decode(errors="replace") if isinstance(line, bytes) else line).strip()


def _netns_pids(ns):
    r = _run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in r.stdout.split()] if r.returncode == 0 else []


def _wait_gone(pids, timeout=KILL_WAIT):
    deadline = time.monotonic() + timeout
    while any(_proc_state(p) not in (None, "Z") for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


# ---------------------------------------------------------------- naming, state, stale runs

def _our_netns():
    r = _run(["ip", "netns", "list"], check=False)
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.split() and _NS_RE.match(ln.split()[0])]


def _our_links():
    r = _run(["ip", "-o", "link", "show"], check=False)
    names = [ln.split(":")[1].strip().split("@")[0] for ln in r.stdout.splitlines() if ln.count(":") >= 2]
    return [n for n in names if _LINK_RE.match(n)]


def leftovers(prefix=None):
    """Namespaces and host links of this harness's naming (of one prefix, or
    all): what a clean teardown leaves none of."""
    names = _our_netns() + _our_links()
    return [n for n in names if prefix is None or n.startswith(prefix + "-")]


class _StateLock:
    """An flock on STATE_DIR/lock around picking names and cleaning: a run
    being set up always has its state file before its first link."""

    def __enter__(self):
        STATE_DIR.mkdir(mode=0o700, exist_ok=True)
        self.fd = os.open(STATE_DIR / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)


def _read_state(prefix):
    try:
        return json.loads((STATE_DIR / (prefix + ".json")).read_text())
    except (OSError, ValueError):
        return None


def _owner_alive(state):
    return bool(state) and _start_time(state.get("pid", -1)) == state.get("start")


def _remove_prefix(prefix, tmpdir=None):
    """Kills what runs in prefix's namespaces, deletes its links, namespaces,
    temp dir and state file. Returns what it could not delete."""
    namespaces = [ns for ns in _our_netns() if ns.startswith(prefix + "-")]
    pids = [p for ns in namespaces for p in _netns_pids(ns)]
    for p in pids:
        _kill_hard(p)
    _wait_gone(pids)
    for link in sorted(l for l in _our_links() if l.startswith(prefix + "-")):
        _run(["ip", "link", "del", link], check=False)  # a veth takes its peer along
    for ns in namespaces:
        _run(["ip", "netns", "del", ns], check=False)
    if tmpdir and Path(tmpdir).name.startswith("warren-cluster-%s-" % prefix):
        shutil.rmtree(tmpdir, ignore_errors=True)
    (STATE_DIR / (prefix + ".json")).unlink(missing_ok=True)
    deadline = time.monotonic() + KILL_WAIT  # a namespace's links go asynchronously
    while leftovers(prefix) and time.monotonic() < deadline:
        time.sleep(0.05)
    return leftovers(prefix)


def cleanup_stale():
    """Removes what earlier runs of this harness left (their owner process
    is gone): processes in their namespaces, links, namespaces, temp dirs,
    state files. Runs whose owner lives are left alone. Returns the prefixes
    cleaned."""
    with _StateLock():
        prefixes = {m.group(1) for m in map(_NS_RE.match, _our_netns())}
        prefixes |= {m.group(1) for m in map(_LINK_RE.match, _our_links())}
        prefixes |= {p.stem for p in STATE_DIR.glob("w*.json") if re.fullmatch(_PREFIX_RE, p.stem)}
        cleaned = []
        for prefix in sorted(prefixes):
            state = _read_state(prefix)
            if _owner_alive(state):
                continue
            _remove_prefix(prefix, (state or {}).get("tmpdir"))
            cleaned.append(prefix)
        return cleaned


# ---------------------------------------------------------------- teardown on exit and signals

_live = []  # Netns objects not yet torn down
_signals = {"installed": False, "tearing": 0, "pending": None, "previous": {}}


def _teardown_all():
    for net in list(_live):
        net.teardown()


def _on_signal(sig, frame):
    if _signals["tearing"]:
        _signals["pending"] = sig  # re-delivered when that teardown ends
        return
    _teardown_all()
    prev = _signals["previous"].get(sig)
    if callable(prev):
        prev(sig, frame)  # e.g. Python's SIGINT handler: KeyboardInterrupt
        return
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


def _install_handlers():
    if _signals["installed"] or threading.current_thread() is not threading.main_thread():
        return
    _signals["installed"] = True
    atexit.register(_teardown_all)
    for sig in (signal.SIGTERM, signal.SIGINT):
        prev = signal.getsignal(sig)
        if prev != signal.SIG_IGN:  # nohup and the like: stays ignored
            _signals["previous"][sig] = prev
            signal.signal(sig, _on_signal)


# ---------------------------------------------------------------- the network

class Netns:
    """n namespaces on one bridge; see the module's docstring. Use as a
    context manager, or call teardown()."""

    def __init__(self, n=3, clean_stale=True):
        if os.geteuid() != 0:
            raise RuntimeError("network namespaces need root")
        if not 1 <= n <= 250:
            raise ValueError("1..250 nodes (10.<k>.0.<i>, .254 the host's)")
        self.n = n
        self.prefix, self.k, self.tmpdir = None, None, None
        self.procs = []  # every Popen started here, killed by teardown
        self.partitioned, self.torn_down = set(), False
        self.relays = {}  # node -> linkemu Popen, where netem runs in userspace
        self._kernel_netem = None
        self.keep_tmp = bool(os.environ.get("WARREN_CLUSTER_KEEP"))
        if clean_stale:
            cleanup_stale()
        _install_handlers()
        _live.append(self)
        try:
            with _StateLock():
                self._reserve()
                self._build()
        except BaseException:
            self.teardown()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.teardown()

    # -- names
    def ns(self, i):
        return "%s-n%d" % (self.prefix, i)

    def veth(self, i):
        """Node i's veth on the host side (on the bridge)."""
        return "%s-h%d" % (self.prefix, i)

    @property
    def bridge(self):
        return self.prefix + "-br"

    def ip(self, i):
        return "10.%d.0.%d" % (self.k, i)

    @property
    def host_ip(self):
        return "10.%d.0.254" % self.k

    # -- set-up
    def _reserve(self):
        used_k = {int(m) for m in re.findall(r"inet 10\.(\d+)\.", _run(["ip", "-o", "addr"]).stdout)}
        taken = set(_our_netns()) | set(_our_links())
        for p in STATE_DIR.glob("w*.json"):
            taken.add(p.stem + "-br")
            used_k.add((_read_state(p.stem) or {}).get("k"))
        free_k = [k for k in SUBNETS if k not in used_k]
        if not free_k:
            raise RuntimeError("no free 10.<k>.0.0/24 for k in %d..%d" % (SUBNETS[0], SUBNETS[-1]))
        self.k = free_k[0]
        for _ in range(100):
            prefix = "w%04x" % random.randrange(0x10000)
            if prefix + "-br" not in taken and not any(t.startswith(prefix + "-") for t in taken):
                break
        else:
            raise RuntimeError("no free prefix")
        self.tmpdir = tempfile.mkdtemp(prefix="warren-cluster-%s-" % prefix)
        state = {"pid": os.getpid(), "start": _start_time(os.getpid()), "k": self.k, "tmpdir": self.tmpdir}
        fd = os.open(STATE_DIR / (prefix + ".json"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(state, f)
        self.prefix = prefix

    def _build(self):
        ip = lambda *a: _run(["ip", *a])  # noqa: E731
        ip("link", "add", self.bridge, "type", "bridge")  # STP off: ports forward at once
        ip("addr", "add", self.host_ip + "/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i in range(1, self.n + 1):
            ns, peer = self.ns(i), "%s-p%d" % (self.prefix, i)
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("link", "add", self.veth(i), "type", "veth", "peer", "name", peer)
            ip("link", "set", peer, "netns", ns)
            ip("-n", ns, "link", "set", peer, "name", "eth0")
            ip("-n", ns, "addr", "add", self.ip(i) + "/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("link", "set", self.veth(i), "master", self.bridge, "up")

    # -- processes
    def run_in(self, i, argv, **popen_kw):
        """Starts argv in namespace i (`ip netns exec`); the Popen is tracked
        and killed by teardown, and dies with this process (PDEATHSIG)."""
        popen_kw.setdefault("stdin", subprocess.DEVNULL)
        p = subprocess.Popen(["ip", "netns", "exec", self.ns(i)] + list(argv),
                             preexec_fn=_die_with_parent(), **popen_kw)
        self.procs.append(p)
        return p

    def call_in(self, i, argv, timeout=CMD_TIMEOUT):
        """Runs argv in namespace i to its end (killed after timeout);
        returns the CompletedProcess (text output captured)."""
        p = self.run_in(i, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_hard(p.pid)
            out, err = p.communicate()
        return subprocess.CompletedProcess(p.args, p.returncode, out, err)

    # -- faults
    def partition(self, i):
        """Cuts node i off the bridge, both directions at once: its bridge
        port goes to the disabled state, where the bridge neither takes a
        frame from it nor forwards one to it (host, other nodes). Both veth
        ends stay up, so the node sees a black hole (timeouts, ARP failing),
        not a cable pulled (NO-CARRIER at once), as in a real partition."""
        self.partitioned.add(i)
        self._set_port_state(i)

    def heal(self, i):
        self.partitioned.discard(i)
        self._set_port_state(i)

    def _bridge_port(self, i):
        """Node i's port on the bridge: its veth, or the relay's while
        netem runs in userspace."""
        return "%s-e%d" % (self.prefix, i) if i in self.relays else self.veth(i)

    def _set_port_state(self, i):
        state = "0" if i in self.partitioned else "3"  # disabled / forwarding
        _run(["bridge", "link", "set", "dev", self._bridge_port(i), "state", state])

    def netem(self, i, delay_ms=0, loss_pct=0.0, jitter_ms=0, direction="both"):
        """Delay and loss on node i's link. direction "in": packets to node
        i; "out": packets from node i; "both" (default): each gets delay_ms
        and loss_pct, so a round trip through node i gains 2 x delay_ms.
        With the kernel's netem qdisc: on the host-side veth's root ("in")
        and on eth0's inside the namespace ("out"). A kernel without it
        (CONFIG_NET_SCH_NETEM unset) gets linkemu.py, a userspace relay put
        between the node's veth and the bridge (both directions in one
        process; some 10^4 frames/s, enough for tests, not benchmarks).
        WARREN_NETEM=relay picks the relay even with a kernel netem."""
        if direction not in ("in", "out", "both"):
            raise ValueError("direction: in, out or both")
        if self.kernel_netem():
            spec = ["netem", "delay", "%dms" % delay_ms] + (["%dms" % jitter_ms] if jitter_ms else [])
            spec += ["loss", "%g%%" % loss_pct] if loss_pct else []
            for tc, dev in self._netem_sides(i, direction):
                _run(tc + ["qdisc", "replace", "dev", dev, "root"] + spec)
            return
        on = lambda d: (delay_ms, loss_pct) if direction in (d, "both") else (0, 0)  # noqa: E731
        self._start_relay(i, on("in") + on("out") + (jitter_ms,))

    def clear_netem(self, i):
        """Node i's link without delay or loss again (both directions)."""
        if i in self.relays:
            self._stop_relay(i)
        elif self.kernel_netem():
            for tc, dev in self._netem_sides(i, "both"):
                _run(tc + ["qdisc", "del", "dev", dev, "root"], check=False)  # none there: fine

    def kernel_netem(self):
        """Whether the kernel has tc's netem (probed once on the bridge)."""
        if self._kernel_netem is None:
            r = _run(["tc", "qdisc", "replace", "dev", self.bridge, "root", "netem", "delay", "0ms"], check=False)
            _run(["tc", "qdisc", "del", "dev", self.bridge, "root"], check=False)
            self._kernel_netem = r.returncode == 0 and os.environ.get("WARREN_NETEM") != "relay"
        return self._kernel_netem

    def _netem_sides(self, i, direction):
        sides = []
        if direction in ("in", "both"):
            sides.append((["tc"], self.veth(i)))
        if direction in ("out", "both"):
            sides.append((["tc", "-n", self.ns(i)], "eth0"))
        return sides

    def _start_relay(self, i, params):
        """Puts (or replaces) linkemu between h<i> and a veth pair d<i>/e<i>
        whose e<i> takes h<i>'s place on the bridge. The host stack must
        not answer on the detached h<i> or on d<i> (ARP for the bridge's
        address would bypass the relay): no ARP replies, no IPv6 there."""
        h, d, e = self.veth(i), "%s-d%d" % (self.prefix, i), "%s-e%d" % (self.prefix, i)
        fresh = i not in self.relays
        if fresh:
            _run(["ip", "link", "add", d, "type", "veth", "peer", "name", e])
            for dev in (h, d):
                _write_sysctl("net/ipv4/conf/%s/arp_ignore" % dev, "8")
                _write_sysctl("net/ipv6/conf/%s/disable_ipv6" % dev, "1")
            _run(["ip", "link", "set", d, "up"])
            _run(["ip", "link", "set", e, "master", self.bridge, "up"])
        else:
            self._kill_relay(i)
        p = subprocess.Popen([sys.executable, LINKEMU, h, d] + [str(x) for x in params],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, preexec_fn=_die_with_parent())
        self.procs.append(p)
        self.relays[i] = p
        ready = select_line(p.stdout, 5.0)
        p.stdout.close()
        if ready != "ready":
            raise RuntimeError("linkemu for n%d did not start (%r)" % (i, ready))
        if fresh:
            self._set_port_state(i)  # e<i> as partitioned as h<i> was
            _run(["ip", "link", "set", h, "nomaster"])
            _run(["ip", "link", "set", h, "up"])

    def _kill_relay(self, i):
        p = self.relays.get(i)
        if p is not None and p.poll() is None:
            _kill_hard(p.pid)
            p.wait(KILL_WAIT)

    def _stop_relay(self, i):
        self._kill_relay(i)
        del self.relays[i]
        _run(["ip", "link", "set", self.veth(i), "master", self.bridge, "up"])
        self._set_port_state(i)
        _run(["ip", "link", "del", "%s-d%d" % (self.prefix, i)])  # and its peer e<i>

    # -- the end
    def teardown(self):
        """Kills every process (SIGCONT, SIGKILL), deletes veths, namespaces,
        bridge, temp dir (kept with WARREN_CLUSTER_KEEP=1) and state file.
        Idempotent; returns the names it could not delete."""
        if self.torn_down:
            return []
        _signals["tearing"] += 1
        try:
            for p in self.procs:
                if p.poll() is None:
                    _kill_hard(p.pid)
            for p in self.procs:
                try:
                    p.wait(KILL_WAIT)
                except subprocess.TimeoutExpired:
                    pass
            left = []
            if self.prefix:
                tmp = None if self.keep_tmp else self.tmpdir
                if self.keep_tmp and self.tmpdir:
                    sys.stderr.write("netns: kept %s\n" % self.tmpdir)
                left = _remove_prefix(self.prefix, tmp)
            elif self.tmpdir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.torn_down = True
            if self in _live:
                _live.remove(self)
            return left
        finally:
            _signals["tearing"] -= 1
            pending, _signals["pending"] = _signals["pending"], None
            if pending and not _signals["tearing"]:
                os.kill(os.getpid(), pending)

    def tcp_rtt(self, i, port, timeout=5.0):
        """Seconds for a TCP connect from the host namespace to node i's
        port: one round trip (SYN, SYN-ACK) through its link."""
        t0 = time.monotonic()
        with socket.create_connection((self.ip(i), port), timeout=timeout):
            return time.monotonic() - t0


# ---------------------------------------------------------------- etcd

_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(url, body=None, timeout=2.0, auth=None):
    """GET (body None) or POST JSON, with basic auth (user, password) if
    given; the decoded reply. Raises on HTTP errors, refusals and timeouts
    (OSError: urllib.error.URLError, TimeoutError...)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if auth:
        headers["Authorization"] = "Basic " + _b64("%s:%s" % auth)
    req = urllib.request.Request(url, data=data, headers=headers)
    with _NO_PROXY.open(req, timeout=timeout) as r:
        return json.loads(r.read().decode() or "{}")


def _b64(s):
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


class EtcdCluster:
    """One etcd member n<i> per namespace, forming one cluster over the
    namespace addresses. Clients: http://<ip>:2379 and, inside its
    namespace, http://127.0.0.1:2379. Short heartbeats and elections so
    tests are quick. Members' data dirs and logs live in the run's temp dir;
    a member's data dir is kept across stop/start."""
    CLIENT_PORT, PEER_PORT = 2379, 2380

    def __init__(self, net, heartbeat_ms=100, election_ms=1000, extra_args=()):
        self.net = net
        self.heartbeat_ms, self.election_ms = heartbeat_ms, election_ms
        self.extra_args = list(extra_args)
        self.procs = {}

    def members(self):
        return range(1, self.net.n + 1)

    def client_url(self, i):
        return "http://%s:%d" % (self.net.ip(i), self.CLIENT_PORT)

    def endpoints(self, first=None):
        """Client URLs of every member, member `first`'s first."""
        order = sorted(self.members(), key=lambda j: j != first)
        return [self.client_url(j) for j in order]

    def data_dir(self, i):
        return os.path.join(self.net.tmpdir, "etcd-n%d" % i)

    def log_path(self, i):
        return os.path.join(self.net.tmpdir, "etcd-n%d.log" % i)

    def start(self, i=None):
        """Starts member i (every member when None); does not wait."""
        if i is None:
            for j in self.members():
                self.start(j)
            return
        if self.alive(i):
            raise RuntimeError("etcd n%d already runs" % i)
        ip = self.net.ip(i)
        cluster = ",".join("n%d=http://%s:%d" % (j, self.net.ip(j), self.PEER_PORT) for j in self.members())
        argv = [ETCD_BIN, "--name", "n%d" % i, "--data-dir", self.data_dir(i),
                "--listen-peer-urls", "http://%s:%d" % (ip, self.PEER_PORT),
                "--initial-advertise-peer-urls", "http://%s:%d" % (ip, self.PEER_PORT),
                "--listen-client-urls", "http://%s:%d,http://127.0.0.1:%d" % (ip, self.CLIENT_PORT, self.CLIENT_PORT),
                "--advertise-client-urls", self.client_url(i),
                "--initial-cluster", cluster, "--initial-cluster-token", self.net.prefix,
                "--initial-cluster-state", "new",
                "--heartbeat-interval", str(self.heartbeat_ms), "--election-timeout", str(self.election_ms),
                "--logger", "zap", "--log-outputs", "stderr"] + self.extra_args
        with open(self.log_path(i), "ab") as log:
            self.procs[i] = self.net.run_in(i, argv, stdout=log, stderr=subprocess.STDOUT)

    def alive(self, i):
        p = self.procs.get(i)
        return p is not None and p.poll() is None

    def pid(self, i):
        return self.procs[i].pid

    def stop(self, i, timeout=10.0):
        """SIGTERM (SIGCONT first), SIGKILL after timeout; the exit status."""
        p = self.procs.get(i)
        if p is None or p.poll() is not None:
            return p and p.returncode
        for sig in (signal.SIGCONT, signal.SIGTERM):
            p.send_signal(sig)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_hard(p.pid)
            return p.wait(KILL_WAIT)

    def kill(self, i):
        p = self.procs.get(i)
        if p is not None and p.poll() is None:
            _kill_hard(p.pid)
            p.wait(KILL_WAIT)

    def request(self, i, path, body=None, timeout=2.0):
        """A gateway call to member i from the host namespace (POST when body
        is given): the decoded reply. Raises when it fails or times out."""
        return http_json(self.client_url(i) + path, body, timeout)

    def healthy(self, i, timeout=2.0):
        try:
            return self.request(i, "/health", timeout=timeout).get("health") == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, members=None, timeout=30.0):
        """Waits until each member (all by default) says healthy (it has a
        leader); raises with their log tails otherwise."""
        members = list(members or self.members())
        deadline = time.monotonic() + timeout
        while True:
            sick = [i for i in members if not self.healthy(i, timeout=1.0)]
            if not sick:
                return
            if time.monotonic() >= deadline:
                raise TimeoutError("etcd members %s not healthy after %.0f s:\n%s"
                                   % (sick, timeout, "\n".join(self.log_tail(i) for i in sick)))
            time.sleep(0.2)

    def status(self, i, timeout=2.0):
        """/v3/maintenance/status of member i (leader, raftTerm, header...)."""
        return self.request(i, "/v3/maintenance/status", {}, timeout)

    def leader(self, i, timeout=2.0):
        """The index of the member that member i says leads, or None."""
        st = self.status(i, timeout)
        ids = {}
        for j in self.members():
            try:
                ids[self.status(j, timeout)["header"]["member_id"]] = j
            except (OSError, ValueError, KeyError):
                pass
        return ids.get(st.get("leader"))

    def put(self, i, key, value, timeout=2.0):
        return self.request(i, "/v3/kv/put", {"key": _b64(key), "value": _b64(value)}, timeout)

    def get(self, i, key, timeout=2.0, serializable=False):
        """key's value (str) through member i, None if absent. Linearizable
        unless serializable (then member i's local copy answers)."""
        r = self.request(i, "/v3/kv/range", {"key": _b64(key), "serializable": serializable}, timeout)
        kvs = r.get("kvs") or []
        return base64.b64decode(kvs[0].get("value", "")).decode() if kvs else None

    def get_prefix(self, i, prefix, timeout=2.0):
        """{key: value} of every key under prefix (str), through member i."""
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self.request(i, "/v3/kv/range", {"key": _b64(prefix), "range_end": _b64(end)}, timeout)
        return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", "")).decode()
                for kv in r.get("kvs") or []}

    def log_tail(self, i, n=20):
        try:
            with open(self.log_path(i), errors="replace") as f:
                return "etcd n%d:\n%s" % (i, "".join(f.readlines()[-n:]))
        except OSError:
            return "etcd n%d: no log" % i


# ---------------------------------------------------------------- Warren

class _TeeLines(list):
    """A node process's log_lines: each line the drainer thread appends is
    also written to the node's log file (kept across restarts)."""

    def __init__(self, path):
        super().__init__()
        self.path = path

    def append(self, line):
        super().append(line)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


class _NodeProcess(harness.WarrenProcess):
    """One run of a Warren node: harness.WarrenProcess (its log drainer and
    parsing, wait_log, log_tail, stop) started in a namespace on fixed ports
    instead of on 127.0.0.1:0 in a temp dir."""

    def __init__(self, node, settings, env):
        super().__init__(settings, env)
        self.node = node
        self.log_lines = _TeeLines(node.log_path)

    def start(self, wait="amqp", timeout=harness.START_TIMEOUT):
        if not os.access(self.node.binary, os.X_OK):
            raise RuntimeError("Warren binary not found: %s (set WARREN_BIN or build it)" % self.node.binary)
        argv = [self.node.binary]
        for s in self.settings:
            argv += ["--set", s]
        self.log_lines.append("---- netns: start %s" % " ".join(argv))
        self.proc = self.node.net.run_in(self.node.index, argv, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, cwd=self.node.dir, env=self.env)
        self._drainer = threading.Thread(target=self._drain_and_close, daemon=True)
        self._drainer.start()
        done = {"amqp": self._port_found, "control": self._mgmt_found}.get(wait)
        if wait and done is None:
            raise ValueError("wait: 'amqp', 'control' or None")
        if done is not None and (not done.wait(timeout) or self.proc.poll() is not None):
            raise RuntimeError("Warren n%d did not log its %s line within %.0f s; log:\n%s"
                               % (self.node.index, wait, timeout, self.log_tail()))


    def _drain_and_close(self):
        self._drain()
        self.proc.stderr.close()


class WarrenNode:
    """Node i's lasting state: its directory (data dir, log, slow-sync
    file) and the current process, if any."""

    def __init__(self, net, index, binary):
        self.net, self.index, self.binary = net, index, binary
        self.dir = os.path.join(net.tmpdir, "warren-n%d" % index)
        self.data_dir = os.path.join(self.dir, "data")
        self.log_path = os.path.join(self.dir, "warren.log")
        self.slow_sync_path = os.path.join(self.dir, "slow_sync_ms")
        os.makedirs(self.data_dir, exist_ok=True)
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.proc is not None and self.proc.proc.poll() is None


class WarrenCluster:
    """One Warren per namespace, on <ip>:5672 (AMQP), :15672 (management),
    :15692 (Prometheus), :5552 (streams), its data dir kept across restarts.
    With cluster=True each node also gets the cluster settings (cluster.*:
    name, node_name n<i>, advertised_host, replication.port 5680, the etcd
    endpoints -- its own member's first --, min_isr, lease_ttl, isr_timeout);
    cluster=False starts plain single nodes (a broker without the cluster
    module refuses unknown keys). guest may log in from any address
    (loopback_users=none): clients connect from the host namespace."""
    AMQP_PORT, MGMT_PORT, PROM_PORT, STREAM_PORT, REPL_PORT = 5672, 15672, 15692, 5552, 5680

    def __init__(self, net, etcd=None, cluster=True, settings=(), name=None,
                 min_isr=2, lease_ttl=3, isr_timeout=5, binary=None):
        if cluster and etcd is None:
            raise ValueError("cluster=True needs an EtcdCluster")
        self.net, self.etcd, self.cluster = net, etcd, cluster
        self.settings = list(settings)
        self.name = name or "warren-" + net.prefix
        self.min_isr, self.lease_ttl, self.isr_timeout = min_isr, lease_ttl, isr_timeout
        binary = binary or harness.WARREN_BIN
        self.nodes = {i: WarrenNode(net, i, binary) for i in range(1, net.n + 1)}

    def settings_for(self, i):
        """The --set settings node i starts with (before per-start extras)."""
        ip = self.net.ip(i)
        s = ["data_dir=%s" % self.nodes[i].data_dir,
             "listeners.tcp.default=%s:%d" % (ip, self.AMQP_PORT),
             "stream.listeners.tcp.default=%s:%d" % (ip, self.STREAM_PORT),
             "management.tcp.ip=%s" % ip, "management.tcp.port=%d" % self.MGMT_PORT,
             "prometheus.tcp.ip=%s" % ip, "prometheus.tcp.port=%d" % self.PROM_PORT,
             "loopback_users=none"]
        if self.cluster:
            s += ["cluster.name=%s" % self.name, "cluster.node_name=n%d" % i,
                  "cluster.advertised_host=%s" % ip, "cluster.replication.port=%d" % self.REPL_PORT,
                  "cluster.min_isr=%d" % self.min_isr, "cluster.lease_ttl=%g" % self.lease_ttl,
                  "cluster.isr_timeout=%g" % self.isr_timeout]
            s += ["cluster.etcd.endpoints.%d=%s" % (n, url)
                  for n, url in enumerate(self.etcd.endpoints(first=i), 1)]
        return s + harness.EXTRA_SETTINGS + self.settings

    def start(self, i, wait="amqp", timeout=harness.START_TIMEOUT, settings=(), wipe=False,
              slow_sync_ms=None, env=None):
        """Starts node i; waits for its "AMQP listening on" line (wait="amqp"),
        its control socket line ("control") or nothing (None). wipe empties
        its data dir first. slow_sync_ms (an int) preloads build/slowsync.so
        with that delay per fsync/fdatasync, changeable with set_slow_sync."""
        node = self.nodes[i]
        if node.alive():
            raise RuntimeError("Warren n%d already runs" % i)
        if wipe:
            shutil.rmtree(node.data_dir, ignore_errors=True)
            os.makedirs(node.data_dir)
        env = dict(env or {})
        if slow_sync_ms is not None:
            if not os.path.exists(SLOWSYNC_SO):
                raise RuntimeError("%s missing: make build/slowsync.so" % SLOWSYNC_SO)
            self.set_slow_sync(i, slow_sync_ms)
            env.update(LD_PRELOAD=SLOWSYNC_SO, WARREN_SLOW_SYNC_FILE=node.slow_sync_path)
        node.proc = _NodeProcess(node, self.settings_for(i) + list(settings), env)
        node.proc.start(wait, timeout)
        return node.proc

    def start_all(self, **kw):
        for i in self.nodes:
            self.start(i, **kw)

    def set_slow_sync(self, i, ms):
        """Node i's fsync/fdatasync delay from now on (when started with
        slow_sync_ms): the shim reads the file at each call."""
        tmp = self.nodes[i].slow_sync_path + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % ms)
        os.replace(tmp, self.nodes[i].slow_sync_path)

    def _proc(self, i):
        p = self.nodes[i].proc
        if p is None or p.proc is None:
            raise RuntimeError("Warren n%d was never started" % i)
        return p

    def pid(self, i):
        return self._proc(i).proc.pid

    def alive(self, i):
        return self.nodes[i].alive()

    def stop(self, i):
        """SIGTERM (SIGCONT first), SIGKILL after harness.STOP_TIMEOUT; the
        exit status (0 on a clean shutdown)."""
        p = self._proc(i)
        if p.proc.poll() is None:
            p.proc.send_signal(signal.SIGCONT)
        return p.stop()

    def kill(self, i):
        """SIGKILL; the data dir stays as the crash left it."""
        p = self._proc(i)
        if p.proc.poll() is None:
            _kill_hard(p.proc.pid)
            p.proc.wait(KILL_WAIT)
        return p.stop()

    def sigstop(self, i, timeout=5.0):
        """SIGSTOP, and waits (bounded) until the kernel shows it stopped."""
        os.kill(self.pid(i), signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while _proc_state(self.pid(i)) != "T" and time.monotonic() < deadline:
            time.sleep(0.01)
        if _proc_state(self.pid(i)) != "T":
            raise RuntimeError("Warren n%d did not stop within %.0f s" % (i, timeout))

    def sigcont(self, i):
        os.kill(self.pid(i), signal.SIGCONT)

    def wait_log(self, i, text, timeout=10.0, count=1, regex=False):
        """Whether node i's current process logged `text` (count times)
        within timeout."""
        return self._proc(i).wait_log(text, count=count, timeout=timeout, regex=regex)

    def log_tail(self, i, n=30):
        return self._proc(i).log_tail(n)

    def amqp_url(self, i):
        return "amqp://%s:%s@%s:%d/%%2F" % (harness.USER, harness.PASSWORD, self.net.ip(i), self.AMQP_PORT)

    def mgmt_url(self, i):
        return "http://%s:%d" % (self.net.ip(i), self.MGMT_PORT)

    def mgmt(self, i, path, body=None, timeout=5.0):
        """A management API call on node i as guest (POST JSON with body)."""
        return http_json(self.mgmt_url(i) + path, body, timeout, auth=(harness.USER, harness.PASSWORD))

    def prometheus_url(self, i):
        return "http://%s:%d" % (self.net.ip(i), self.PROM_PORT)

    def params(self, i, **kw):
        """pika ConnectionParameters for node i (harness.params's timeouts)."""
        return harness.params((self.net.ip(i), self.AMQP_PORT), **kw)

    def connection_params(self, **kw):
        """pika ConnectionParameters of every node, in order: the host list
        a failing-over client gives pika.BlockingConnection."""
        return [self.params(i, **kw) for i in self.nodes]


@contextlib.contextmanager
def cluster(n=3, cluster_settings=True, start=True, wait="amqp", etcd_timeout=30.0, **warren_kw):
    """The whole set-up in one step: n namespaces, an etcd cluster that is
    healthy, a WarrenCluster (warren_kw: settings, min_isr, lease_ttl...)
    and, with start, every node started in turn (wait: see
    WarrenCluster.start). Yields .net, .etcd, .warren; tears down after."""
    with Netns(n) as net:
        etcd = EtcdCluster(net)
        etcd.start()
        etcd.wait_healthy(timeout=etcd_timeout)
        warren = WarrenCluster(net, etcd, cluster=cluster_settings, **warren_kw)
        if start:
            warren.start_all(wait=wait)
        yield types.SimpleNamespace(net=net, etcd=etcd, warren=warren)
