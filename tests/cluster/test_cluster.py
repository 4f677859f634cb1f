"""A three-node Warren cluster on etcd, each node in its own network
namespace (netns.py): formation, replication of topology and of classic,
quorum and stream queues, failover under load (kill -9), a partitioned
leader that fences itself, a stopped follower leaving and rejoining the
in-sync replicas, a slow disk and a lossy link, and leader kills in a row.

Run: sudo /usr/bin/python3 tests/cluster/test_cluster.py [-k name]
     ... test_cluster.py --tap [FILTER...]   (TAP, as make test reads it)
WARREN_CLUSTER_KILLS (default 3) sets the kills in a row;
WARREN_CLUSTER_STOP_S (default 8) how long a follower stays SIGSTOPped.
Figures (failover gaps) are printed and appended to
$WARREN_CLUSTER_RECORD when set."""
import os
import socket
import statistics
import sys
import time
import unittest

import pika

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402
from workload import Workload  # noqa: E402

KILLS = int(os.environ.get("WARREN_CLUSTER_KILLS", "3"))
STOP_S = float(os.environ.get("WARREN_CLUSTER_STOP_S", "8"))
RECORD = os.environ.get("WARREN_CLUSTER_RECORD")
LEASE_TTL = 3
ISR_TIMEOUT = 2


def record(text):
    print(text, flush=True)
    if RECORD:
        with open(RECORD, "a") as f:
            f.write(text + "\n")


def wait_until(predicate, timeout, what, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


class ClusterBase(unittest.TestCase):
    """Each test gets a fresh cluster: namespaces, a 3-member etcd and
    three Warren nodes started in turn (followers have no AMQP listener, so
    nodes are started without waiting for one)."""

    def settings(self):
        """Extra settings for every node (the namespaces exist by now)."""
        return []

    def setUp(self):
        self.loads = []
        self._cm = netns.cluster(n=3, start=False, lease_ttl=LEASE_TTL,
                                 isr_timeout=ISR_TIMEOUT)
        self.c = self._cm.__enter__()
        self.w = self.c.warren
        self.w.settings += self.settings()
        for i in (1, 2, 3):
            self.w.start(i, wait=None)
            self.assertTrue(self.w.wait_log(i, "cluster: node n%d" % i, timeout=10),
                            self.w.log_tail(i))
        self.wait_isr(3)

    def tearDown(self):
        for load in self.loads:
            load.stop()
        self._cm.__exit__(None, None, None)

    # ---- what the nodes say ----

    def leader(self, timeout=20):
        """The node whose AMQP port accepts (only the leader listens)."""
        def probe():
            for i in (1, 2, 3):
                if not self.w.alive(i):
                    continue
                try:
                    socket.create_connection((self.c.net.ip(i), 5672), timeout=0.3).close()
                    return i
                except OSError:
                    pass
            return None
        try:
            return wait_until(probe, timeout, "a leader")
        except AssertionError as e:
            raise AssertionError("%s\n%s" % (e, self.logs())) from None

    def logs(self, n=25):
        def state(i):
            rc = self.w.nodes[i].proc.proc.poll()
            return "running" if rc is None else "exited with %s" % rc
        return "\n".join("---- n%d (%s)\n%s" % (i, state(i), self.w.log_tail(i, n))
                         for i in (1, 2, 3) if self.w.nodes[i].proc)

    def workload(self, **kw):
        """A Workload on the host list, stopped at the latest when the test
        ends (a failed test must not leave clients for the next cluster)."""
        load = Workload(self.w.connection_params(heartbeat=2), **kw).start()
        self.loads.append(load)
        return load

    def wait_isr(self, n, timeout=30):
        """Until the leader logged an ISR of n members (its latest report)."""
        def isr():
            for i in (1, 2, 3):
                if not self.w.alive(i):
                    continue
                lines = [ln for ln in self.w.nodes[i].proc.log_lines
                         if "in-sync replicas now" in ln]
                if lines and ("now %d of" % n) in lines[-1] and self.is_leading(i):
                    return i
            return None
        try:
            return wait_until(isr, timeout, "an ISR of %d" % n)
        except AssertionError as e:
            raise AssertionError("%s\n%s\n%s" % (e, self.isr_lines(), self.logs())) from None

    def isr_lines(self, n=8):
        """Each node's latest lines about leading and the ISR (a failure's
        first clue, which a log tail of client connections can hide)."""
        words = ("leading", "in-sync", "ISR", "caught up", "fenc", "following")
        out = []
        for i in (1, 2, 3):
            if self.w.nodes[i].proc:
                lines = [ln for ln in self.w.nodes[i].proc.log_lines if any(w in ln for w in words)]
                out.append("---- n%d, leading and the ISR:\n%s" % (i, "\n".join(lines[-n:])))
        return "\n".join(out)

    def is_leading(self, i):
        lines = self.w.nodes[i].proc.log_lines
        lead = max((k for k, ln in enumerate(lines) if "cluster: leading" in ln), default=-1)
        stop = max((k for k, ln in enumerate(lines)
                    if "fencing this leader" in ln or "restarting as a follower" in ln),
                   default=-1)
        return lead > stop

    def connect(self):
        return pika.BlockingConnection(self.w.connection_params())

    def log_time(self, i, text, after=0.0):
        """The wall time (s) of node i's first log line with `text` logged after `after`."""
        for ln in self.w.nodes[i].proc.log_lines:
            if text in ln and ln[:4].isdigit():
                t = time.mktime(time.strptime(ln[:19], "%Y-%m-%d %H:%M:%S")) + float(ln[19:23])
                if t >= after:
                    return t
        return None

    def check(self, load):
        load.drain()
        problems = load.problems()
        self.assertEqual(problems, [], "; ".join(problems))
        self.assertGreater(len(load.confirmed), 100, "the workload hardly ran")


class ClusterTest(ClusterBase):

    def test_formation_topology_and_queue_types(self):
        """Topology and messages of every queue type declared on the leader
        are on the node that leads next, and on the one after; a stopped
        node rejoins."""
        first = self.leader()
        c = self.connect()
        ch = c.channel()
        ch.exchange_declare("cx", "topic", durable=True)
        ch.queue_declare("classic", durable=True)
        ch.queue_declare("quorum", durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_declare("stream", durable=True, arguments={"x-queue-type": "stream"})
        for q in ("classic", "quorum", "stream"):
            ch.queue_bind(q, "cx", "k." + q)
        ch.confirm_delivery()
        for q in ("classic", "quorum", "stream"):
            for n in range(50):
                ch.basic_publish("cx", "k." + q, b"%s %d" % (q.encode(), n),
                                 pika.BasicProperties(delivery_mode=2))
        c.close()
        seen = [first]
        for _ in range(2):
            self.w.stop(seen[-1])
            nxt = self.leader()
            self.assertNotIn(nxt, seen)
            seen.append(nxt)
            c = self.connect()
            ch = c.channel()
            ch.exchange_declare("cx", "topic", durable=True, passive=True)
            for q in ("classic", "quorum"):
                self.assertEqual(ch.queue_declare(q, passive=True).method.message_count, 50, q)
            ch.basic_qos(prefetch_count=100)
            got = []
            for method, _p, body in ch.consume("stream", inactivity_timeout=2,
                                               arguments={"x-stream-offset": "first"}):
                if method is None:
                    break
                got.append(body)
                ch.basic_ack(method.delivery_tag)
            self.assertEqual(got, [b"stream %d" % n for n in range(50)])
            c.close()
            if len(seen) == 2:  # bring the first back: it rejoins as a follower
                self.w.start(seen[0], wait=None)
                self.assertTrue(self.w.wait_log(seen[0], "is on disk; following", timeout=20),
                                self.w.log_tail(seen[0]))
                self.wait_isr(3)

    def test_kill_leader_under_load(self):
        """kill -9 of the leader while 4 publishers confirm and 4 consumers
        ack: every confirmed message is consumed on the new leader."""
        old = self.leader()
        load = self.workload()
        time.sleep(3)
        killed = time.time()
        self.w.kill(old)
        new = self.leader()
        self.wait_isr(2)
        time.sleep(3)
        load.stop()
        self.check(load)
        gaps = load.failovers()
        self.assertTrue(gaps, "no publisher saw a failover")
        elected = self.log_time(new, "cluster: leading", after=killed - 1)
        record("kill -9 of the leader: failover (last confirm on old -> first on new) "
               "max %.2f s over %d publishers; new leader elected %.2f s after the kill "
               "(lease ttl %d s); %d confirmed, none lost"
               % (max(gaps), len(gaps), elected - killed, LEASE_TTL, len(load.confirmed)))
        self.assertLessEqual(max(gaps), LEASE_TTL + 2 + 3,  # + the ISR's rejoin
                             "failover took %.1f s" % max(gaps))

    def test_partitioned_leader_fences_itself(self):
        """Cut the leader off etcd and the followers: it stops confirming and
        closes its connections before a new leader is elected; nothing
        confirmed is lost; nothing is confirmed by both."""
        old = self.leader()
        load = self.workload()
        time.sleep(3)
        cut = time.time()
        self.c.net.partition(old)
        new = self.leader(timeout=30)
        self.assertNotEqual(new, old)
        self.wait_isr(2)
        time.sleep(2)
        fenced = self.log_time(old, "fencing this leader", after=cut - 1)
        elected = self.log_time(new, "cluster: leading", after=cut - 1)
        self.assertIsNotNone(fenced, self.w.log_tail(old))
        self.assertLess(fenced, elected, "the old leader fenced after the new one was elected")
        # no confirm from the old leader after the new one was elected
        old_ip = self.c.net.ip(old)
        self.assertTrue(old_ip)
        load.stop()
        late = [m for m, t in load.confirmed.items() if fenced < t < elected]
        self.assertEqual(late, [], "confirms between the fence and the election")
        self.check(load)
        record("partitioned leader: fenced %.2f s after the cut, new leader %.2f s after "
               "(margin %.2f s)" % (fenced - cut, elected - cut, elected - fenced))
        self.c.net.heal(old)
        self.assertTrue(self.w.wait_log(old, "is on disk; following", timeout=30),
                        self.w.log_tail(old))
        self.wait_isr(3)

    def test_stopped_follower_leaves_and_rejoins_isr(self):
        """SIGSTOP a follower: the leader drops it from the ISR and goes on
        confirming (min_isr 2 still met); SIGCONT: it catches up and rejoins."""
        lead = self.leader()
        follower = [i for i in (1, 2, 3) if i != lead][0]
        load = self.workload(consumers=1)
        time.sleep(1)
        self.w.sigstop(follower)
        self.assertTrue(self.w.wait_log(lead, "follower n%d has not acknowledged" % follower,
                                        timeout=ISR_TIMEOUT + 10), self.w.log_tail(lead))
        before = len(load.confirmed)
        time.sleep(max(1.0, STOP_S - ISR_TIMEOUT))
        during = len(load.confirmed) - before
        self.assertGreater(during, 50, "confirms stopped while a follower was out")
        self.w.sigcont(follower)
        self.assertTrue(self.w.wait_log(lead, "follower n%d caught up" % follower, timeout=30),
                        self.w.log_tail(lead))
        self.wait_isr(3)
        load.stop()
        self.check(load)
        record("SIGSTOP of a follower for %.0f s: %d confirms while it was out of the ISR"
               % (STOP_S, during))

    def test_refused_isr_write_is_read_again(self):
        """Someone else writes the ISR record (its revision moves): the
        leader's next ISR change is refused; it reads the record again and
        goes on changing the ISR (a follower leaves, then rejoins)."""
        lead = self.leader()
        follower = [i for i in (1, 2, 3) if i != lead][0]
        keys = self.c.etcd.get_prefix(1, "warren/")
        isr_key = [k for k in keys if k.endswith("isr")]
        self.assertEqual(len(isr_key), 1, sorted(keys))
        self.c.etcd.put(1, isr_key[0], keys[isr_key[0]])  # same value, new revision
        load = self.workload(consumers=1)
        self.w.sigstop(follower)
        self.assertTrue(self.w.wait_log(lead, "ISR update refused", timeout=ISR_TIMEOUT + 10),
                        self.w.log_tail(lead))
        self.wait_isr(2)
        self.w.sigcont(follower)
        self.wait_isr(3)
        load.stop()
        self.check(load)

    def test_slow_disk_and_lossy_link(self):
        """A follower whose fdatasync takes 30 ms and another behind 20 ms of
        delay and 2% loss: confirms slow down, nothing is lost."""
        lead = self.leader()
        slow, lossy = [i for i in (1, 2, 3) if i != lead]
        self.w.stop(slow)
        self.w.start(slow, wait=None, slow_sync_ms=30)
        self.wait_isr(3)
        self.c.net.netem(lossy, delay_ms=20, loss_pct=2)
        load = self.workload(publishers=2, consumers=2)
        time.sleep(8)
        load.stop()
        self.c.net.clear_netem(lossy)
        self.check(load)
        record("slow follower disk (30 ms fdatasync) + 20 ms/2%% loss link: %d confirmed in "
               "8 s, none lost" % len(load.confirmed))

    def test_stalled_leader_disk_fences(self):
        """The leader's fdatasync stops answering (an LD_PRELOAD delays it
        by 4 s): its watchdog fences it after lease_ttl/2 and a follower
        leads; every confirmed message is there."""
        for i in (1, 2, 3):  # every node gets the shim (delay 0), the leader last
            if i == self.leader():
                continue
            self.w.stop(i)
            self.w.start(i, wait=None, slow_sync_ms=0)
            self.wait_isr(3)
        old = self.leader()
        self.w.stop(old)
        self.w.start(old, wait=None, slow_sync_ms=0)
        self.wait_isr(3)
        lead = self.leader()
        load = self.workload(publishers=2, consumers=2)
        time.sleep(2)
        stalled = time.time()
        self.w.set_slow_sync(lead, 4000)
        self.assertTrue(self.w.wait_log(lead, "the disk has not finished a sync", timeout=15),
                        self.logs())
        new = self.leader(timeout=30)
        self.assertNotEqual(new, lead)
        self.w.set_slow_sync(lead, 0)
        self.wait_isr(2)
        time.sleep(2)
        load.stop()
        self.check(load)
        fenced = self.log_time(lead, "fencing this leader", after=stalled - 1)
        record("stalled leader disk: fenced %.2f s after fdatasync stopped answering"
               % (fenced - stalled))

    def test_java_client_address_list_survives_failover(self):
        """RabbitMQ's Java client with the nodes as its address list
        (Debian's librabbitmq-client-java) publishes with confirms across a
        kill -9 of the leader: every confirmed message is on the new leader."""
        import subprocess
        here = os.path.dirname(os.path.abspath(__file__))
        classes = os.path.join(self.c.net.tmpdir, "java")
        cp = "/usr/share/java/amqp-client.jar:/usr/share/java/slf4j-api.jar"
        subprocess.run(["javac", "-cp", cp, "-d", classes,
                        os.path.join(here, "FailoverPublisher.java")], check=True, timeout=120)
        old = self.leader()
        java = subprocess.Popen(["java", "-cp", cp + ":" + classes, "FailoverPublisher", "java",
                                 "12"] + ["%s:5672" % self.c.net.ip(i) for i in (1, 2, 3)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            time.sleep(4)
            self.w.kill(old)
            out = java.communicate(timeout=60)[0].decode()
        finally:
            if java.poll() is None:
                java.kill()
        confirmed = {int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("confirmed ")}
        hosts = [ln.split()[1] for ln in out.splitlines() if ln.startswith("connected ")]
        self.assertGreaterEqual(len(set(hosts)), 2, out[-2000:])  # it moved to the new leader
        c = self.connect()
        ch = c.channel()
        stored = set()
        while True:
            method, _p, body = ch.basic_get("java", auto_ack=True)
            if method is None:
                break
            stored.add(int(body))
        c.close()
        self.assertGreater(len(confirmed), 50, out[-2000:])
        self.assertEqual(sorted(confirmed - stored), [], "confirmed by the Java client, lost")
        record("Java client (address list): %d confirmed across a leader kill, none lost; "
               "connected to %s" % (len(confirmed), " then ".join(hosts)))

    def test_leader_kills_in_a_row(self):
        """KILLS kills -9 of whoever leads, each restarted as a follower:
        nothing confirmed is lost over all of them."""
        load = self.workload(publishers=2, consumers=2)
        times = []
        for _ in range(KILLS):
            self.wait_isr(3, timeout=60)
            time.sleep(1)
            old = self.leader()
            killed = time.time()
            self.w.kill(old)
            new = self.leader(timeout=30)
            elected = self.log_time(new, "cluster: leading", after=killed - 1)
            times.append(elected - killed)
            self.w.start(old, wait=None)
        self.wait_isr(3, timeout=60)
        time.sleep(1)
        load.stop()
        self.check(load)
        gaps = load.failovers()
        record("%d leader kills in a row: election after the kill median %.2f s, max %.2f s; "
               "publisher failover median %.2f s, max %.2f s; %d confirmed, none lost"
               % (KILLS, statistics.median(times), max(times), statistics.median(gaps),
                  max(gaps), len(load.confirmed)))


def make_pki(directory, ips):
    """A CA and one certificate for every node (all their IPs as names),
    made with the openssl command line; returns the file paths."""
    import subprocess
    os.makedirs(directory, exist_ok=True)
    p = {k: os.path.join(directory, k) for k in
         ("ca.key", "ca.pem", "node.key", "node.csr", "node.pem", "ext")}

    def run(*argv):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=warren test cluster CA", "-keyout", p["ca.key"], "-out", p["ca.pem"])
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=warren node",
        "-keyout", p["node.key"], "-out", p["node.csr"])
    with open(p["ext"], "w") as f:
        f.write("subjectAltName=%s\n" % ",".join("IP:" + ip for ip in ips))
    run("openssl", "x509", "-req", "-in", p["node.csr"], "-CA", p["ca.pem"], "-CAkey",
        p["ca.key"], "-CAcreateserial", "-days", "2", "-extfile", p["ext"], "-out", p["node.pem"])
    return p


class TLSClusterTest(ClusterBase):
    """Replication over mutual TLS (cluster.replication.ssl): the cluster
    forms and fails over; a node whose certificate another CA signed is
    refused."""

    def settings(self):
        self.pki = make_pki(os.path.join(self.c.net.tmpdir, "pki"),
                            [self.c.net.ip(i) for i in (1, 2, 3)])
        return ["cluster.replication.ssl=true", "cluster.ssl.cacertfile=" + self.pki["ca.pem"],
                "cluster.ssl.certfile=" + self.pki["node.pem"],
                "cluster.ssl.keyfile=" + self.pki["node.key"]]

    def test_tls_replication_and_failover(self):
        first = self.leader()
        c = self.connect()
        ch = c.channel()
        ch.queue_declare("tls", durable=True)
        ch.confirm_delivery()
        for n in range(200):
            ch.basic_publish("", "tls", b"%d" % n, pika.BasicProperties(delivery_mode=2))
        c.close()
        self.w.kill(first)
        self.leader()
        c = self.connect()
        self.assertEqual(c.channel().queue_declare("tls", passive=True).method.message_count, 200)
        c.close()
        # a node with a certificate from another CA never gets a snapshot
        rogue = make_pki(os.path.join(self.c.net.tmpdir, "rogue"),
                         [self.c.net.ip(i) for i in (1, 2, 3)])
        self.w.start(first, wait=None, settings=["cluster.ssl.cacertfile=" + rogue["ca.pem"],
                                                 "cluster.ssl.certfile=" + rogue["node.pem"],
                                                 "cluster.ssl.keyfile=" + rogue["node.key"]])
        time.sleep(4)
        self.assertFalse(self.w.wait_log(first, "receiving a snapshot", timeout=0.1),
                         self.w.log_tail(first))


def tap(filters):
    """TAP lines `ok N - cluster: name`, each test bounded by TEST_TIMEOUT."""
    import signal
    import traceback

    def alarm(signum, frame):
        raise TimeoutError("over %d s" % TEST_TIMEOUT)
    signal.signal(signal.SIGALRM, alarm)
    n = failed = 0
    cases = [(cls, name) for cls in (ClusterTest, TLSClusterTest)
             for name in unittest.TestLoader().getTestCaseNames(cls)]
    for cls, name in cases:
        short = name[5:]
        if filters and not any(f in short for f in filters):
            continue
        result = unittest.TestResult()
        signal.alarm(TEST_TIMEOUT)
        try:
            cls(name).run(result)
        except Exception:
            result.errors.append((name, traceback.format_exc()))
        finally:
            signal.alarm(0)
        n += 1
        bad = result.failures + result.errors
        failed += bool(bad)
        print("%s %d - cluster: %s" % ("not ok" if bad else "ok", n, short), flush=True)
        for _test, text in bad:
            for line in str(text).rstrip().splitlines()[-100:]:
                print("# " + line)
    print("1..%d" % n)
    return 1 if failed else 0


TEST_TIMEOUT = int(os.environ.get("WARREN_CLUSTER_TEST_TIMEOUT", "300"))

if __name__ == "__main__":
    if sys.argv[1:2] == ["--tap"]:
        sys.exit(tap(sys.argv[2:]))
    unittest.main(verbosity=2)
