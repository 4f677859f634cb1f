"""A cluster in the management plane: three Warren nodes on one etcd, all on
127.0.0.1 with ports the OS hands out. The leader's /api/nodes lists every
node with its role, ISR membership and lag, /api/cluster gives the whole
status, /metrics the warren_cluster_* families, warrenctl cluster_status
its replication section; a follower's management port serves its own
status to administrators and monitoring users and 503 not_leader for
everything else, and gives the port up when the node leads. A single node
answers as before clusters.

The cluster is started once for the module (run_py.py runs cases one by
one, so there is no setUpClass) and stopped at exit; the failover test runs
last (test_z_...). Needs Debian's etcd-server (scripts/deps.sh)."""
import atexit
import base64
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

import harness as h
from test_prometheus import promtool
from test_warrenctl import warrenctl_bin

WAIT = 20.0  # bound of every wait for the cluster to settle
NODES = ("n1", "n2", "n3")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, path, user="guest", password="guest", method="GET", body=None, authorization=None):
    """(status, headers, parsed JSON or None) of one request to 127.0.0.1:port
    (`authorization`: that Authorization header instead of user's)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if user is not None:
            token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
            headers["Authorization"] = authorization or "Basic " + token
        c.request(method, path, headers=headers, body=json.dumps(body) if body is not None else None)
        r = c.getresponse()
        body = r.read()
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        return r.status, dict(r.getheaders()), doc
    finally:
        c.close()


def wait_until(what, fn, timeout=WAIT):
    """fn() until it returns something true (errors count as false)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            v = fn()
            if v:
                return v
        except (OSError, http.client.HTTPException, KeyError, TypeError) as e:
            last = e
        time.sleep(0.1)
    raise AssertionError("timed out waiting for %s (%r)" % (what, last))


class Etcd:
    """One etcd on ephemeral loopback ports in a temp dir."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="warren-etcd-")
        self.port, peer = free_port(), free_port()
        binary = shutil.which("etcd")
        if not binary:
            raise AssertionError("etcd not found: scripts/deps.sh installs Debian's etcd-server")
        url = "http://127.0.0.1:%d" % self.port
        self.proc = subprocess.Popen(
            [binary, "--data-dir", os.path.join(self.dir, "data"), "--listen-client-urls", url,
             "--advertise-client-urls", url, "--listen-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % peer,
             "--initial-cluster", "default=http://127.0.0.1:%d" % peer],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until("etcd's /health", lambda: call(self.port, "/health", user=None)[0] == 200)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class Node:
    """One Warren node of the cluster; its management and Prometheus ports
    are fixed (the follower's status server and then the leader's
    management plane share the management one)."""

    def __init__(self, name, cluster_name, etcd_port):
        self.name = name
        self.api_name = "warren@" + name
        self.mgmt_port, self.prom_port, self.repl_port = free_port(), free_port(), free_port()
        self.proc = h.WarrenProcess([
            "management.tcp.port=%d" % self.mgmt_port, "prometheus.tcp.port=%d" % self.prom_port,
            "cluster.etcd.endpoints.1=http://127.0.0.1:%d" % etcd_port,
            "cluster.name=" + cluster_name, "cluster.node_name=" + name,
            "cluster.advertised_host=127.0.0.1", "cluster.replication.port=%d" % self.repl_port,
            "cluster.lease_ttl=3"], ready_re=r"cluster: node \S+ of cluster")

    def cluster(self, user="guest", password="guest"):
        return call(self.mgmt_port, "/api/cluster", user, password)


_fixture = {"cluster": None}


class Cluster:
    def __init__(self):
        self.name = "itest-%s" % h.RUN_ID
        self.etcd = Etcd()
        self.nodes = []
        try:
            for n in NODES:
                node = Node(n, self.name, self.etcd.port)
                self.nodes.append(node)
                node.proc.start()
        except BaseException:
            self.stop()
            raise

    def settled(self, nodes=None):
        """The leader once it leads with every node of `nodes` in sync and
        every follower reports it."""
        nodes = nodes or self.nodes
        leader = None
        for node in nodes:
            status, _, doc = node.cluster()
            if status != 200:
                return None
            if doc["role"] == "leader":
                leader = node
        if leader is None:
            return None
        doc = leader.cluster()[2]
        if doc["isr_size"] != len(nodes) or len(doc["nodes"]) != len(nodes):
            return None
        if any(n.cluster()[2]["leader"] != leader.api_name for n in nodes):
            return None
        return leader if leader.proc.control_socket else None

    def leader(self):
        return wait_until("a leader with every node in sync", self.settled)

    def followers(self):
        lead = self.leader()
        return [n for n in self.nodes if n is not lead and n.proc.proc.poll() is None]

    def stop(self):
        for node in self.nodes:
            node.proc.stop()
        self.etcd.stop()


def cluster():
    if _fixture["cluster"] is None:
        _fixture["cluster"] = Cluster()
        atexit.register(_fixture["cluster"].stop)
    return _fixture["cluster"]


def put_user(port, name, tags):
    return call(port, "/api/users/" + name, method="PUT", body={"password": "pw", "tags": tags})[0]


def metric_lines(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        return c.getresponse().read().decode()
    finally:
        c.close()


@h.needs_own_broker
class ClusterMgmtTest(unittest.TestCase):
    def setUp(self):
        self.c = cluster()
        self.lead = self.c.leader()

    def test_nodes_lists_every_node(self):
        status, _, nodes = call(self.lead.mgmt_port, "/api/nodes")
        self.assertEqual(status, 200)
        self.assertEqual(sorted(n["name"] for n in nodes), ["warren@n1", "warren@n2", "warren@n3"])
        roles = {n["name"]: n["cluster_role"] for n in nodes}
        self.assertEqual(sorted(roles.values()), ["follower", "follower", "leader"])
        self.assertEqual(roles[self.lead.api_name], "leader")
        self.assertEqual(nodes[0]["name"], self.lead.api_name)  # its full object first
        self.assertIn("mem_used", nodes[0])
        self.assertIn("fd_total", nodes[0])
        for n in nodes:
            self.assertEqual(n["type"], "disc")
            self.assertIs(n["running"], True)
            self.assertIs(n["in_sync"], True)
            for key in ("replication_lag_bytes", "replication_lag_ms", "acked_sequence"):
                self.assertIsInstance(n[key], int, (key, n))
        self.assertEqual(nodes[0]["replication_lag_bytes"], 0)

    def test_node_by_name(self):
        other = next(n for n in self.c.nodes if n is not self.lead)
        status, _, node = call(self.lead.mgmt_port, "/api/nodes/" + other.api_name.replace("@", "%40"))
        self.assertEqual(status, 200)
        self.assertEqual(node["name"], other.api_name)
        self.assertEqual(node["cluster_role"], "follower")
        status, _, node = call(self.lead.mgmt_port, "/api/nodes/" + self.lead.api_name)
        self.assertEqual((status, node["cluster_role"]), (200, "leader"))
        self.assertIn("uptime", node)
        self.assertEqual(call(self.lead.mgmt_port, "/api/nodes/warren@nowhere")[0], 404)

    def test_overview_names_the_cluster(self):
        status, _, ov = call(self.lead.mgmt_port, "/api/overview")
        self.assertEqual(status, 200)
        self.assertEqual(ov["cluster_name"], self.c.name)
        self.assertEqual(ov["node"], self.lead.api_name)
        self.assertTrue(all(l["node"] == self.lead.api_name for l in ov["listeners"]))

    def test_cluster_status(self):
        status, _, st = call(self.lead.mgmt_port, "/api/cluster")
        self.assertEqual(status, 200)
        self.assertEqual(st["cluster_name"], self.c.name)
        self.assertEqual((st["node"], st["role"], st["leader"]),
                         (self.lead.api_name, "leader", self.lead.api_name))
        self.assertGreater(st["epoch"], 0)
        self.assertEqual((st["min_isr"], st["isr_size"]), (2, 3))
        self.assertIs(st["confirms_held"], False)
        self.assertEqual(sorted(st["isr"]), ["warren@n1", "warren@n2", "warren@n3"])
        self.assertIsInstance(st["synced_sequence"], int)
        self.assertIsInstance(st["replicated_sequence"], int)
        by_name = {n["name"]: n for n in st["nodes"]}
        self.assertEqual(len(by_name), 3)
        for n in self.c.nodes:
            e = by_name[n.api_name]
            self.assertEqual((e["host"], e["replication_port"], e["alive"], e["in_sync"]),
                             ("127.0.0.1", n.repl_port, True, True))
            self.assertEqual(e["role"], "leader" if n is self.lead else "follower")
            self.assertIsInstance(e["lag_bytes"], int)
            self.assertIsInstance(e["lag_ms"], int)
            if n is not self.lead:
                self.assertIs(e["connected"], True)
                self.assertIs(e["snapshot_done"], True)

    def test_cluster_status_sequences_follow_confirms(self):
        conn = h.connect(("127.0.0.1", self.lead.proc.port))
        try:
            ch = conn.channel()
            ch.confirm_delivery()
            q = h.unique()
            ch.queue_declare(q, durable=True)
            for i in range(5):
                ch.basic_publish("", q, b"m%d" % i, properties=h.pika.BasicProperties(delivery_mode=2))
            # the status is published as the cluster thread goes (its polls)
            st = wait_until("the confirms in the status",
                            lambda: (lambda d: d if d["replicated_sequence"] > 0 else None)(self.lead.cluster()[2]))
            self.assertGreaterEqual(st["synced_sequence"], st["replicated_sequence"])
            # every follower in the ISR acknowledged what was confirmed
            for n in st["nodes"]:
                self.assertGreaterEqual(n["acked_sequence"], st["replicated_sequence"], n)
            ch.queue_delete(q)
        finally:
            conn.close()

    def test_metrics(self):
        text = metric_lines(self.lead.prom_port)
        epoch = self.lead.cluster()[2]["epoch"]
        for line in ("warren_cluster_leader 1", "warren_cluster_epoch %d" % epoch,
                     "warren_cluster_isr_members 3", "warren_cluster_min_isr 2",
                     "warren_cluster_confirms_held 0"):
            self.assertIn("\n" + line + "\n", text)
        for n in self.c.nodes:
            label = '{node="%s"}' % n.api_name
            if n is self.lead:
                self.assertNotIn(label, text)
                continue
            self.assertIn("warren_cluster_follower_in_sync%s 1\n" % label, text)
            self.assertRegex(text, re.escape("warren_cluster_follower_lag_bytes" + label) + r" \d+\n")
            self.assertRegex(text, re.escape("warren_cluster_follower_lag_seconds" + label) + r" [0-9.e+-]+\n")
        self.assertIn('rabbitmq_cluster="%s"' % self.c.name, text)
        r = subprocess.run([promtool(), "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=30)
        self.assertEqual(r.returncode, 0, r.stdout.decode() + r.stderr.decode())

    def test_warrenctl_cluster_status(self):
        sock = self.lead.proc.control_socket
        r = subprocess.run([warrenctl_bin(), "--socket", sock, "cluster_status"], capture_output=True,
                           timeout=15)
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertIn("Cluster name: %s\n" % self.c.name, out)
        self.assertIn("Replication (Warren)", out)
        self.assertRegex(out, r"Leader: %s, epoch: [1-9]\d*\n" % re.escape(self.lead.api_name))
        self.assertIn("In-sync replicas: 3, min_isr: 2, confirms: flowing\n", out)
        for n in self.c.nodes:
            role = "leader" if n is self.lead else "follower"
            self.assertRegex(out, r"Node: %s, role: %s, in sync: yes, alive: yes, lag: \d+ bytes, \d+ ms\n"
                             % (re.escape(n.api_name), role))
        r = subprocess.run([warrenctl_bin(), "--socket", sock, "cluster_status", "--formatter", "json"],
                           capture_output=True, timeout=15)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        doc = json.loads(r.stdout)
        self.assertEqual(sorted(doc["running_nodes"]), ["warren@n1", "warren@n2", "warren@n3"])
        self.assertEqual(sorted(doc["disk_nodes"]), ["warren@n1", "warren@n2", "warren@n3"])
        self.assertEqual(doc["cluster_name"], self.c.name)
        self.assertEqual(doc["warren_cluster"]["role"], "leader")
        self.assertEqual(doc["warren_cluster"]["isr_size"], 3)

    def test_warrenctl_cluster_status_of_a_follower(self):
        f = self.c.followers()[0]
        r = subprocess.run([warrenctl_bin(), "--url", "http://127.0.0.1:%d" % f.mgmt_port, "-u", "guest",
                            "-p", "guest", "cluster_status"], capture_output=True, timeout=15)
        out = r.stdout.decode()
        self.assertEqual(r.returncode, 0, out + r.stderr.decode())
        self.assertIn("Cluster status of node %s" % f.api_name, r.stdout.decode() + r.stderr.decode())
        self.assertIn("Leader: %s" % self.lead.api_name, out)
        self.assertRegex(out, r"Node: %s, role: follower, in sync: yes, alive: yes(, lag: \d+ bytes, \d+ ms)?\n"
                         % re.escape(f.api_name))

    def test_follower_status(self):
        for f in self.c.followers():
            status, _, st = f.cluster()
            self.assertEqual(status, 200)
            self.assertEqual((st["node"], st["role"], st["leader"]), (f.api_name, "follower", self.lead.api_name))
            self.assertEqual(st["cluster_name"], self.c.name)
            self.assertEqual(st["isr_size"], 3)
            # the leader's view comes through etcd within a second or two
            deadline = time.monotonic() + 10
            while st["confirms_held"] is None and time.monotonic() < deadline:
                time.sleep(0.2)
                st = f.cluster()[2]
            self.assertIs(st["confirms_held"], False)
            me = next(n for n in st["nodes"] if n["name"] == f.api_name)
            self.assertIsInstance(me["lag_bytes"], int)
            status, _, nodes = call(f.mgmt_port, "/api/nodes")
            self.assertEqual(status, 200)
            self.assertEqual(sorted(n["name"] for n in nodes), ["warren@n1", "warren@n2", "warren@n3"])
            mine = next(n for n in nodes if n["name"] == f.api_name)
            self.assertEqual((mine["cluster_role"], mine["running"]), ("follower", True))
            status, _, node = call(f.mgmt_port, "/api/nodes/" + self.lead.api_name)
            self.assertEqual((status, node["cluster_role"]), (200, "leader"))
            self.assertEqual(call(f.mgmt_port, "/api/healthchecks/node")[2], {"status": "ok"})

    def test_follower_refuses_bad_credentials(self):
        f = self.c.followers()[0]
        status, headers, doc = f.cluster(password="wrong")
        self.assertEqual((status, doc), (401, {"error": "not_authorized", "reason": "Login failed"}))
        self.assertIn("WWW-Authenticate", headers)
        status, _, doc = f.cluster(user="nobody")
        self.assertEqual(status, 401)
        status, _, doc = f.cluster(user=None)
        self.assertEqual((status, doc), (401, {"error": "not_authorized", "reason": "Not authorized"}))
        # base64 without its padding, as the management plane takes it; garbage refused
        token = base64.b64encode(b"guest:guest").decode().rstrip("=")
        self.assertEqual(call(f.mgmt_port, "/api/cluster", authorization="Basic " + token)[0], 200)
        for bad in ("Basic !!!!", "Basic " + "QUFB" * 200, "Bearer x", "Basic "):
            self.assertEqual(call(f.mgmt_port, "/api/cluster", authorization=bad)[0], 401, bad)

    def test_follower_tags_as_rabbitmq(self):
        mg, mon = h.unique("mg"), h.unique("mon")
        self.assertEqual(put_user(self.lead.mgmt_port, mg, "management"), 201)
        self.assertEqual(put_user(self.lead.mgmt_port, mon, "monitoring"), 201)
        self.assertEqual(call(self.lead.mgmt_port, "/api/cluster", mg, "pw")[2],
                         {"error": "not_authorised", "reason": "Not monitor user"})
        for f in self.c.followers():
            # the users reach the follower with the replicated metadata
            wait_until("%s replicated to %s" % (mon, f.name), lambda: f.cluster(mon, "pw")[0] == 200)
            status, _, doc = f.cluster(mg, "pw")
            self.assertEqual((status, doc), (401, {"error": "not_authorised", "reason": "Not monitor user"}))

    def test_follower_other_paths_are_not_leader(self):
        f = self.c.followers()[0]
        for path in ("/api/queues", "/api/overview", "/index.html", "/api/definitions"):
            status, _, doc = call(f.mgmt_port, path)
            self.assertEqual(status, 503, path)
            self.assertEqual(doc, {"error": "not_leader", "reason": "this node follows %s; use the "
                                   "leader's management API" % self.lead.api_name})
        # "/" is the follower's own page (public, as the console's assets are)
        conn = http.client.HTTPConnection("127.0.0.1", f.mgmt_port, timeout=5)
        conn.request("GET", "/")
        r = conn.getresponse()
        page = r.read().decode()
        self.assertEqual((r.status, r.getheader("Content-Type")), (200, "text/html; charset=utf-8"))
        self.assertIn('<script src="/cluster.js">', page)
        conn.request("GET", "/cluster.js")
        r = conn.getresponse()
        self.assertEqual(r.status, 200)
        self.assertIn("/api/cluster", r.read().decode())
        conn.close()
        status, headers, _ = call(f.mgmt_port, "/api/cluster", method="DELETE")
        self.assertEqual((status, headers.get("Allow")), (405, "GET, HEAD"))

    def test_follower_server_is_bounded(self):
        """A client that stalls mid-request holds up nobody; a head over the
        limit is refused, not buffered."""
        f = self.c.followers()[0]
        with socket.create_connection(("127.0.0.1", f.mgmt_port), timeout=10) as slow:
            slow.sendall(b"GET /api/cluster HTTP/1.1\r\nHost: x\r\n")
            self.assertEqual(f.cluster()[0], 200)
        with socket.create_connection(("127.0.0.1", f.mgmt_port), timeout=10) as big:
            try:  # refused with 431, or reset: the rest was never read
                big.sendall(b"GET /api/cluster HTTP/1.1\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
                reply = big.recv(200)
            except (ConnectionResetError, BrokenPipeError):
                reply = b""
            self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 431"), reply)
        self.assertEqual(f.cluster()[0], 200)

    def test_z_failover_hands_the_port_over(self):
        """The leader stops: a follower leads, closes its status server and
        serves the management plane on the same port; the other follows it."""
        old = self.lead
        self.assertEqual(old.proc.stop(), 0)
        rest = [n for n in self.c.nodes if n is not old]
        lead = wait_until("a new leader", lambda: self.c.settled(rest))
        status, _, ov = call(lead.mgmt_port, "/api/overview")
        self.assertEqual((status, ov["node"]), (200, lead.api_name))
        status, _, nodes = call(lead.mgmt_port, "/api/nodes")
        self.assertEqual(sorted(n["name"] for n in nodes), sorted(n.api_name for n in rest))
        other = next(n for n in rest if n is not lead)
        self.assertEqual(other.cluster()[2]["leader"], lead.api_name)
        self.assertEqual(call(other.mgmt_port, "/api/queues")[2]["reason"],
                         "this node follows %s; use the leader's management API" % lead.api_name)


@h.needs_own_broker
class ClusterStopTest(unittest.TestCase):
    """After ClusterMgmtTest (the loader takes classes in name order)."""

    def test_nodes_stop_cleanly(self):
        """Every node exits 0 on SIGTERM, followers and leader (and under
        ASan, WARREN_BIN=build/asan/warren, without a report)."""
        self.c = cluster()
        # followers first: a leader stopped first would hand over, and a
        # SIGTERM that reaches a node while it loads its broker (between
        # following and the broker's handlers) ends it by the signal
        alive = [n for n in self.c.nodes if n.proc.proc.poll() is None]
        lead = next((n for n in alive if n.cluster()[2]["role"] == "leader"), None)
        for n in [n for n in self.c.nodes if n is not lead] + ([lead] if lead else []):
            log = n.proc.log_tail()
            self.assertEqual(n.proc.stop(), 0, log)
            self.assertFalse([ln for ln in n.proc.log_lines if "Sanitizer" in ln or "runtime error" in ln])
        self.c.etcd.stop()
        _fixture["cluster"] = None


@h.needs_own_broker
class SingleNodeTest(unittest.TestCase):
    """A node without cluster.* settings knows nothing of clusters."""

    def test_single_node_unchanged(self):
        port = h.mgmt_address()[1]
        status, _, nodes = call(port, "/api/nodes")
        self.assertEqual(status, 200)
        self.assertEqual(len(nodes), 1)
        name = nodes[0]["name"]
        self.assertEqual(name, "warren@" + socket.gethostname().split(".")[0])
        for key in ("cluster_role", "in_sync", "replication_lag_bytes", "acked_sequence"):
            self.assertNotIn(key, nodes[0])
        self.assertEqual(call(port, "/api/overview")[2]["cluster_name"], name)
        self.assertEqual(call(port, "/api/cluster")[0], 404)
        self.assertEqual(call(port, "/api/nodes/warren@n2")[0], 404)
        self.assertNotIn("warren_cluster_", metric_lines(h.prometheus_address()[1]))
        r = subprocess.run([warrenctl_bin(), "--socket", h.control_socket(), "cluster_status"],
                           capture_output=True, timeout=15)
        self.assertEqual(r.returncode, 0, r.stderr.decode())
        self.assertNotIn("Replication", r.stdout.decode())


if __name__ == "__main__":
    unittest.main()
