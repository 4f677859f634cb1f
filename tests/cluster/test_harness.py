"""Self-test of the cluster harness (netns.py): three namespaces on a bridge,
a three-member etcd cluster over them, a partition, link delay, three plain
Warren processes reached from the host namespace, a SIGSTOPped one, and a
teardown that leaves nothing -- also after a SIGKILLed or SIGTERMed run.

    sudo /usr/bin/python3 tests/cluster/test_harness.py   (root; README.md)

The tests run in order on one network (setUpClass); test_11 tears it down.
"""
import base64
import contextlib
import os
import signal
import subprocess
import sys
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import netns  # noqa: E402
import pika  # noqa: E402


def wait_until(predicate, timeout, step=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(step)


def gone(pid):
    """The process no longer exists (or is a zombie not ours to reap)."""
    state = netns._proc_state(pid)
    return state is None or state == "Z"


def publish_and_get(params, body):
    """Publishes body to a fresh exclusive queue with confirms and gets it
    back; returns what basic.get gave."""
    conn = pika.BlockingConnection(params)
    try:
        ch = conn.channel()
        ch.confirm_delivery()
        q = ch.queue_declare("", exclusive=True).method.queue
        ch.basic_publish("", q, body)
        method, _, got = ch.basic_get(q, auto_ack=True)
        return got if method else None
    finally:
        conn.close()


def run_child(code, timeout=30):
    """Starts /usr/bin/python3 running code with netns importable; returns
    the Popen (stdout piped, text)."""
    prelude = "import sys; sys.path.insert(0, %r); import netns, os, signal, subprocess, time\n" % str(HERE)
    return subprocess.Popen([sys.executable, "-c", prelude + code], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, text=True)


@unittest.skipIf(os.geteuid() != 0, "network namespaces need root")
class HarnessTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.t0 = time.monotonic()
        cls.stack = contextlib.ExitStack()
        c = cls.stack.enter_context(netns.cluster(3, cluster_settings=False, start=False))
        cls.net, cls.etcd, cls.warren = c.net, c.etcd, c.warren

    @classmethod
    def tearDownClass(cls):
        cls.stack.close()
        sys.stderr.write("harness self-test: %.1f s\n" % (time.monotonic() - cls.t0))

    def test_01_etcd_forms_one_cluster(self):
        self.etcd.wait_healthy(timeout=30)
        for i in (1, 2, 3):
            self.assertTrue(self.etcd.healthy(i), "member %d" % i)
        members = self.etcd.request(1, "/v3/cluster/member/list", {})["members"]
        self.assertEqual(sorted(m["name"] for m in members), ["n1", "n2", "n3"])
        leaders = {self.etcd.leader(i) for i in (1, 2, 3)}
        self.assertEqual(len(leaders), 1, leaders)
        self.assertIn(leaders.pop(), (1, 2, 3))

    def test_02_put_through_one_read_through_another(self):
        self.etcd.put(1, "harness/a", "one")
        self.assertEqual(self.etcd.get(3, "harness/a"), "one")
        self.assertEqual(self.etcd.get_prefix(2, "harness/"), {"harness/a": "one"})

    def test_03_partition_cuts_member_1_off(self):
        self.net.partition(1)
        try:
            # Members 2 and 3 keep a quorum (after an election if 1 led).
            def wrote():
                try:
                    self.etcd.put(3, "harness/b", "during", timeout=1.0)
                    return True
                except OSError:
                    return False
            self.assertTrue(wait_until(wrote, 15), "member 3 never took a write")
            self.assertEqual(self.etcd.get(3, "harness/b"), "during")
            # From the host namespace member 1's gateway is unreachable...
            with self.assertRaises(OSError):
                self.etcd.get(1, "harness/a", timeout=2.0)
            # ...and from inside its own namespace it has no quorum: a
            # linearizable read through its loopback gateway never answers.
            code = ("import urllib.request as u; u.urlopen(u.Request('http://127.0.0.1:2379/v3/kv/range', "
                    "data=b'{\"key\": \"%s\"}'), timeout=2).read(); print('answered')"
                    % base64.b64encode(b"harness/a").decode())
            r = self.net.call_in(1, [sys.executable, "-c", code], timeout=8)
            self.assertNotIn("answered", r.stdout)
        finally:
            self.net.heal(1)
        self.etcd.wait_healthy(timeout=30)
        self.assertEqual(self.etcd.get(1, "harness/b"), "during")

    def test_04_netem_delays_node_2(self):
        base = self.net.tcp_rtt(2, netns.EtcdCluster.CLIENT_PORT)
        self.net.netem(2, 100)
        try:
            self.net.tcp_rtt(2, netns.EtcdCluster.CLIENT_PORT)  # ARP, through the delay too
            rtt = self.net.tcp_rtt(2, netns.EtcdCluster.CLIENT_PORT)
            in_only = None
            self.net.netem(2, 100, direction="in")
            in_only = self.net.tcp_rtt(2, netns.EtcdCluster.CLIENT_PORT)
        finally:
            self.net.clear_netem(2)
        after = self.net.tcp_rtt(2, netns.EtcdCluster.CLIENT_PORT)
        sys.stderr.write("  netem (%s): rtt %.1f ms, with 100 ms both ways %.1f ms, in only %.1f ms, "
                         "cleared %.1f ms\n" % ("kernel" if self.net.kernel_netem() else "linkemu relay",
                                                base * 1e3, rtt * 1e3, in_only * 1e3, after * 1e3))
        self.assertGreaterEqual(rtt, 0.2)
        self.assertGreaterEqual(in_only, 0.1)
        self.etcd.wait_healthy(timeout=30)

    def test_05_three_warrens_from_the_host_namespace(self):
        self.warren.start_all()
        for i in (1, 2, 3):
            self.assertEqual(publish_and_get(self.warren.params(i), b"m%d" % i), b"m%d" % i)
        self.assertIn("node", self.warren.mgmt(2, "/api/overview"))
        # pika takes the host list and connects to the first that answers.
        conn = pika.BlockingConnection(self.warren.connection_params())
        conn.close()

    def test_06_cluster_settings_are_well_formed(self):
        s = netns.WarrenCluster(self.net, self.etcd, cluster=True, min_isr=2, lease_ttl=3).settings_for(2)
        ip = self.net.ip
        for want in ("cluster.node_name=n2", "cluster.advertised_host=%s" % ip(2),
                     "cluster.replication.port=5680", "cluster.min_isr=2", "cluster.lease_ttl=3",
                     "cluster.etcd.endpoints.1=http://%s:2379" % ip(2),
                     "cluster.etcd.endpoints.3=http://%s:2379" % ip(3)):
            self.assertIn(want, s)

    @unittest.skipUnless(os.path.exists(netns.SLOWSYNC_SO), "make build/slowsync.so")
    def test_07_slow_disk(self):
        self.assertEqual(self.warren.stop(3), 0)
        self.warren.start(3, slow_sync_ms=300)
        conn = pika.BlockingConnection(self.warren.params(3))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            q = ch.queue_declare("harness.slow", durable=True).method.queue
            times = []
            for ms in (300, 0):
                self.warren.set_slow_sync(3, ms)
                t = time.monotonic()
                ch.basic_publish("", q, b"p", pika.BasicProperties(delivery_mode=2))
                times.append(time.monotonic() - t)
            sys.stderr.write("  persistent confirm with a 300 ms sync %.0f ms, without %.0f ms\n"
                             % (times[0] * 1e3, times[1] * 1e3))
            self.assertGreaterEqual(times[0], 0.3)
        finally:
            conn.close()

    def test_08_sigstopped_node(self):
        self.warren.sigstop(2)
        t = time.monotonic()
        with self.assertRaises(Exception):  # pika's handshake timeout is no AMQPConnectionError
            pika.BlockingConnection(self.warren.params(2, socket_timeout=2, stack_timeout=3))
        self.assertLess(time.monotonic() - t, 10)
        self.assertEqual(publish_and_get(self.warren.params(3), b"still"), b"still")

    def test_09_sigkilled_run_is_cleaned_later(self):
        child = run_child(
            "net = netns.Netns(2)\n"
            "p = net.run_in(1, ['sleep', '600'])\n"
            "print(net.prefix, p.pid, flush=True)\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
        out, _ = child.communicate(timeout=30)
        self.assertEqual(child.returncode, -signal.SIGKILL)
        prefix, pid = out.split()
        # PR_SET_PDEATHSIG took the sleep along; the network stayed.
        self.assertTrue(wait_until(lambda: gone(int(pid)), 5), "sleep survived its parent")
        self.assertNotEqual(netns.leftovers(prefix), [])
        ours = netns.leftovers(self.net.prefix)
        self.assertIn(prefix, netns.cleanup_stale())
        self.assertEqual(netns.leftovers(prefix), [])
        self.assertEqual(netns.leftovers(self.net.prefix), ours)  # a live run is left alone
        self.assertFalse((netns.STATE_DIR / (prefix + ".json")).exists())

    def test_10_sigterm_tears_down(self):
        child = run_child(
            "net = netns.Netns(2)\n"
            "p = net.run_in(2, ['sleep', '600'])\n"
            "os.kill(p.pid, signal.SIGSTOP)\n"
            "print(net.prefix, p.pid, flush=True)\n"
            "time.sleep(60)\n")
        self.addCleanup(child.stdout.close)
        self.addCleanup(child.kill)
        line = netns.select_line(child.stdout, 30)
        self.assertIsNotNone(line, "child never set up")
        prefix, pid = line.split()
        self.assertNotEqual(netns.leftovers(prefix), [])
        child.send_signal(signal.SIGTERM)
        child.wait(30)
        self.assertEqual(child.returncode, -signal.SIGTERM)
        self.assertTrue(gone(int(pid)))
        self.assertEqual(netns.leftovers(prefix), [])
        self.assertFalse((netns.STATE_DIR / (prefix + ".json")).exists())

    def test_11_teardown_leaves_nothing(self):
        pids = [p.pid for p in self.net.procs]
        self.assertGreaterEqual(len(pids), 6)  # 3 etcd + 3 Warren at least
        state = netns.STATE_DIR / (self.net.prefix + ".json")
        self.assertTrue(state.exists())
        t = time.monotonic()
        self.assertEqual(self.net.teardown(), [])
        sys.stderr.write("  teardown %.1f s\n" % (time.monotonic() - t))
        self.assertEqual(netns.leftovers(self.net.prefix), [])
        self.assertEqual([p for p in pids if not gone(p)], [])
        self.assertFalse(state.exists())
        self.assertFalse(os.path.exists(self.net.tmpdir))
        self.assertEqual(self.net.teardown(), [])  # idempotent

if __name__ == "__main__":
    unittest.main(verbosity=2)
