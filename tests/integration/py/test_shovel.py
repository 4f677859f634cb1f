"""Dynamic shovels (shovel/): a runtime parameter of component "shovel"
starts one, its deletion stops it. Between two vhosts of one Warren (links
to "this broker", amqp:// without host) and from one Warren to another;
on-confirm, on-publish and no-ack; a source exchange (a server-named queue
bound to it); src-delete-after; the forward and timestamp headers; the
states and their reasons; /api/shovels and its restart and delete routes
for every user tag; and a destination Warren killed (SIGKILL) in the middle
of a transfer with on-confirm: nothing is lost.

The status JSON and the headers were taken from RabbitMQ 3.10.8 with
rabbitmq_shovel_management (see test_shovel_rabbit for the interplay with a
real RabbitMQ); the counts (forwarded, acked, unconfirmed, restarts) are
Warren's.
"""
import shutil
import socket
import time
import urllib.parse

import pika

import harness as h
from test_mgmt import q, request
from test_mgmt_access import AccessTest, basic

RUNNING_KEYS = ["node", "timestamp", "name", "vhost", "type", "state", "src_uri", "src_protocol",
                "dest_protocol", "dest_uri"]
WARREN_KEYS = ["forwarded", "acked", "unconfirmed", "restarts"]


def until(fn, timeout=15.0, step=0.05):
    """fn()'s first truthy value within `timeout` seconds; fails otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in %.0f s (last: %r)" % (timeout, v))
        time.sleep(step)


def local_uri(vh):
    return "amqp:///" + urllib.parse.quote(vh, safe="")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class ShovelTest(AccessTest):
    def shovel(self, vh, name, value, status=201):
        self.ok("PUT", "/api/parameters/shovel/%s/%s" % (q(vh), q(name)), {"value": value}, status=status)
        self.addCleanup(request, "DELETE", "/api/parameters/shovel/%s/%s" % (q(vh), q(name)))

    def status(self, vh, name, auth=None):
        kw = {"auth": auth} if auth else {}
        for s in self.get("/api/shovels/" + q(vh), **kw):
            if s["name"] == name:
                return s
        return None

    def state(self, vh, name, want, timeout=15.0):
        return until(lambda: (lambda s: s if s and s["state"] == want else None)(self.status(vh, name)),
                     timeout)

    def two_vhosts(self):
        a, b = self.vhost(), self.vhost()
        for vh in (a, b):
            self.grant(vh, "guest")
        return a, b

    def channel(self, vh, addr=None):
        c = h.connect(addr, vhost=vh)
        self._conns.append(c)
        return c.channel()

    def bodies(self, ch, queue, n, timeout=15.0):
        """n messages from `queue` (acked), as (properties, body)."""
        got = []

        def more():
            while len(got) < n:
                m, props, body = ch.basic_get(queue, auto_ack=True)
                if m is None:
                    return False
                got.append((props, body))
            return True
        until(more, timeout)
        return got


class LocalTest(ShovelTest):
    def test_queue_to_queue_between_vhosts(self):
        a, b = self.two_vhosts()
        self.shovel(a, "s1", {"src-uri": local_uri(a), "src-queue": "from", "dest-uri": local_uri(b),
                              "dest-queue": "to", "dest-add-forward-headers": True,
                              "dest-add-timestamp-header": True})
        st = self.state(a, "s1", "running")
        self.assertEqual(list(st), RUNNING_KEYS + ["src_queue", "dest_queue"] + WARREN_KEYS)
        self.assertEqual((st["vhost"], st["type"], st["src_uri"], st["dest_uri"], st["src_queue"],
                          st["dest_queue"]), (a, "dynamic", local_uri(a), local_uri(b), "from", "to"))
        links = [c for c in self.get("/api/connections") if c["name"].startswith("Shovel s1 (")
                 and " in %s #" % a in c["name"]]
        self.assertEqual(sorted((c["type"], c["user"], c["vhost"]) for c in links),
                         [("direct", "none", a), ("direct", "none", b)], "the in-process links, as RabbitMQ's")
        src = self.channel(a)
        for i in range(50):
            src.basic_publish("", "from", b"m%d" % i, pika.BasicProperties(headers={"k": i}, delivery_mode=2))
        got = self.bodies(self.channel(b), "to", 50)
        self.assertEqual([body for _, body in got], [b"m%d" % i for i in range(50)])
        props = got[0][0]
        self.assertEqual(props.delivery_mode, 2)
        self.assertEqual(list(props.headers), ["k", "x-shovelled", "x-shovelled-timestamp"])
        hop = props.headers["x-shovelled"]
        self.assertEqual(hop, [{"shovelled-by": st["node"], "shovel-type": "dynamic", "shovel-name": "s1",
                                "shovel-vhost": a, "src-uri": local_uri(a), "dest-uri": local_uri(b),
                                "src-queue": "from", "dest-queue": "to"}])
        self.assertLess(abs(props.headers["x-shovelled-timestamp"] - time.time()), 60)
        st = until(lambda: (lambda s: s if s["acked"] == 50 else None)(self.status(a, "s1")))
        self.assertEqual((st["forwarded"], st["unconfirmed"]), (50, 0))
        self.assertEqual(src.queue_declare("from", passive=True).method.message_count, 0)

    def test_forward_headers_of_two_hops(self):
        a, b = self.two_vhosts()
        c = self.vhost()
        self.grant(c, "guest")
        fwd = {"dest-add-forward-headers": True}
        self.shovel(a, "hop1", dict(fwd, **{"src-uri": local_uri(a), "src-queue": "x", "dest-uri": local_uri(b),
                                            "dest-queue": "y"}))
        self.shovel(b, "hop2", dict(fwd, **{"src-uri": local_uri(b), "src-queue": "y", "dest-uri": local_uri(c),
                                            "dest-queue": "z"}))
        self.state(a, "hop1", "running")
        self.state(b, "hop2", "running")
        self.channel(a).basic_publish("", "x", b"two hops")
        props, body = self.bodies(self.channel(c), "z", 1)[0]
        self.assertEqual(body, b"two hops")
        self.assertEqual([(hop["shovel-name"], hop["shovel-vhost"]) for hop in props.headers["x-shovelled"]],
                         [("hop2", b), ("hop1", a)], "the latest hop first")

    def test_forward_headers_replace_in_place_and_keep_an_invalid_one(self):
        """rabbit_basic:prepend_table_header: an x-shovelled that is not an
        array is replaced where it is and kept in x-invalid-headers."""
        a, b = self.two_vhosts()
        self.shovel(a, "inv", {"src-uri": local_uri(a), "src-queue": "i", "dest-uri": local_uri(b),
                               "dest-queue": "i.out", "dest-add-forward-headers": True,
                               "dest-add-timestamp-header": True})
        self.state(a, "inv", "running")
        self.channel(a).basic_publish("", "i", b"x", pika.BasicProperties(
            headers={"x-shovelled-timestamp": 1, "x-shovelled": "bogus", "z": 1}))
        props, _ = self.bodies(self.channel(b), "i.out", 1)[0]
        self.assertEqual(list(props.headers), ["x-shovelled-timestamp", "x-shovelled", "z", "x-invalid-headers"])
        self.assertEqual(props.headers["x-invalid-headers"], {"x-shovelled": ["bogus"]})
        self.assertEqual(props.headers["x-shovelled"][0]["shovel-name"], "inv")
        self.assertGreater(props.headers["x-shovelled-timestamp"], 1)

    def test_exchange_source_and_exchange_destination(self):
        a, b = self.two_vhosts()
        dest = self.channel(b)
        dest.exchange_declare("dx", "direct")
        dest.queue_declare("dq")
        dest.queue_bind("dq", "dx", "out")
        self.shovel(a, "s2", {"src-uri": local_uri(a), "src-exchange": "amq.topic", "src-exchange-key": "in.#",
                              "dest-uri": local_uri(b), "dest-exchange": "dx", "dest-exchange-key": "out"})
        st = self.state(a, "s2", "running")
        self.assertEqual(list(st), RUNNING_KEYS + ["src_exchange", "src_exchange_key", "dest_exchange",
                                                   "dest_exchange_key"] + WARREN_KEYS)
        src = self.channel(a)
        src.basic_publish("amq.topic", "in.one", b"yes")
        src.basic_publish("amq.topic", "other", b"no")
        self.assertEqual([b for _, b in self.bodies(dest, "dq", 1)], [b"yes"])
        time.sleep(0.3)
        self.assertEqual(dest.queue_declare("dq", passive=True).method.message_count, 0)

    def test_ack_modes(self):
        a, b = self.two_vhosts()
        for mode in ("on-publish", "no-ack"):
            self.shovel(a, mode, {"src-uri": local_uri(a), "src-queue": mode, "dest-uri": local_uri(b),
                                  "dest-queue": mode + ".out", "ack-mode": mode})
            self.state(a, mode, "running")
            src = self.channel(a)
            for i in range(20):
                src.basic_publish("", mode, b"%d" % i)
            self.assertEqual(len(self.bodies(self.channel(b), mode + ".out", 20)), 20)

    def test_delete_after_count_and_queue_length(self):
        a, b = self.two_vhosts()
        src = self.channel(a)
        src.queue_declare("five", durable=True)
        src.queue_declare("len", durable=True)
        for i in range(12):
            src.basic_publish("", "five", b"%d" % i)
            src.basic_publish("", "len", b"%d" % i)
        self.shovel(a, "d5", {"src-uri": local_uri(a), "src-queue": "five", "dest-uri": local_uri(b),
                              "dest-queue": "five.out", "src-delete-after": 5})
        self.shovel(a, "dl", {"src-uri": local_uri(a), "src-queue": "len", "dest-uri": local_uri(b),
                              "dest-queue": "len.out", "src-delete-after": "queue-length"})
        until(lambda: self.status(a, "d5") is None and self.status(a, "dl") is None)
        for name in ("d5", "dl"):
            self.assertEqual(request("GET", "/api/parameters/shovel/%s/%s" % (q(a), name)).status, 404)
        dest = self.channel(b)
        self.assertEqual(dest.queue_declare("five.out", passive=True).method.message_count, 5)
        self.assertEqual(src.queue_declare("five", passive=True).method.message_count, 7)
        self.assertEqual(dest.queue_declare("len.out", passive=True).method.message_count, 12)
        self.assertEqual(src.queue_declare("len", passive=True).method.message_count, 0)

    def test_states_and_reasons(self):
        a, b = self.two_vhosts()
        port = free_port()  # nothing listens there
        self.shovel(a, "down", {"src-uri": local_uri(a), "src-queue": "q", "reconnect-delay": 1,
                                "dest-uri": "amqp://guest:guest@127.0.0.1:%d" % port, "dest-queue": "q"})
        st = self.state(a, "down", "terminated")
        self.assertEqual(list(st), ["node", "timestamp", "name", "vhost", "type", "state", "reason"] + WARREN_KEYS)
        self.assertEqual(st["reason"], "{outbound_conn_died,connection to target host was refused (ECONNREFUSED)}")
        until(lambda: self.status(a, "down")["restarts"] >= 1, timeout=10)
        self.shovel(a, "v10", {"src-uri": local_uri(a), "src-protocol": "amqp10", "src-address": "x",
                               "dest-uri": local_uri(b), "dest-queue": "q"})
        self.assertEqual(self.state(a, "v10", "terminated")["reason"],
                         "src-protocol amqp10 is not supported (amqp091 only)")
        self.shovel(a, "nouser", {"src-uri": local_uri(a), "src-queue": "q",
                                  "dest-uri": "amqp://nobody:wrong@127.0.0.1:%d/%s" % (h.broker_address()[1], q(b)),
                                  "dest-queue": "q", "reconnect-delay": 30})
        reason = self.state(a, "nouser", "terminated")["reason"]
        self.assertTrue(reason.startswith("{outbound_conn_died,{auth_failure,\"ACCESS_REFUSED - Login was "
                                          "refused"), reason)

    def test_restart_and_delete_routes(self):
        a, b = self.two_vhosts()
        self.shovel(a, "r", {"src-uri": local_uri(a), "src-queue": "q", "dest-uri": local_uri(b), "dest-queue": "q"})
        self.state(a, "r", "running")
        self.assertEqual(len(self.get("/api/shovels/vhost/%s/r" % q(a))), 1, "the vhost's list")
        self.ok("DELETE", "/api/shovels/vhost/%s/r/restart" % q(a), status=204)
        self.state(a, "r", "running")
        for method, path in (("DELETE", "/api/shovels/vhost/%s/nope/restart" % q(a)),
                             ("DELETE", "/api/shovels/vhost/%s/nope" % q(a)),
                             ("GET", "/api/shovels/vhost/%s/nope" % q(a)),
                             ("GET", "/api/shovels/no-such-vhost"),
                             ("DELETE", "/api/shovels/vhost/no-such-vhost/r/restart")):
            self.error(request(method, path), 404, "Object Not Found", "Not Found")
        self.ok("DELETE", "/api/shovels/vhost/%s/r" % q(a), status=204)
        self.assertIsNone(self.status(a, "r"))
        self.assertEqual(request("GET", "/api/parameters/shovel/%s/r" % q(a)).status, 404)

    def test_routes_for_every_tag(self):
        a, b = self.two_vhosts()
        other = self.vhost()
        self.grant(other, "guest")
        self.shovel(a, "t", {"src-uri": local_uri(a), "src-queue": "q", "dest-uri": local_uri(b), "dest-queue": "q"})
        self.shovel(other, "t", {"src-uri": local_uri(other), "src-queue": "q", "dest-uri": local_uri(b),
                                 "dest-queue": "q2"})
        self.state(a, "t", "running")
        refused = {"": "Not management user", "management": "Not monitor user",
                   "policymaker": "Not monitor user"}
        for tags in ("", "management", "policymaker", "monitoring", "administrator"):
            u = self.user(tags)
            self.grant(a, u)
            auth = basic(u, "pw")
            routes = (("GET", "/api/shovels"), ("GET", "/api/shovels/" + q(a)),
                      ("GET", "/api/shovels/vhost/%s/t" % q(a)),
                      ("DELETE", "/api/shovels/vhost/%s/t/restart" % q(a)),
                      ("DELETE", "/api/shovels/vhost/%s/gone" % q(a)))
            for method, path in routes:
                r = request(method, path, auth=auth)
                if tags in refused:
                    self.error(r, 401, "not_authorised", refused[tags])
                else:
                    want = 404 if path.endswith("/gone") else 204 if method == "DELETE" else 200
                    self.assertEqual(r.status, want, (tags, path, r.body))
            if tags in refused:
                continue
            seen = {(s["vhost"], s["name"]) for s in self.get("/api/shovels", auth=auth)}
            self.assertIn((a, "t"), seen)
            # a vhost without permissions is hidden, except from administrators
            self.assertEqual((other, "t") in seen, tags == "administrator")


class TwoWarrensTest(ShovelTest):
    """A shovel on the shared Warren into a second Warren that is killed
    (SIGKILL) mid-transfer and started again on the same port and data
    directory: with on-confirm every message arrives (duplicates allowed)."""

    N = 3000

    def test_destination_killed_mid_transfer(self):
        a = self.vhost()
        self.grant(a, "guest")
        port = free_port()
        settings = ["listeners.tcp.default=127.0.0.1:%d" % port]
        dest = h.WarrenProcess(settings)
        dest.start()
        data_dir = dest.tmpdir
        self.addCleanup(shutil.rmtree, data_dir, True)
        self.addCleanup(lambda: dest.stop())
        src = self.channel(a)
        src.queue_declare("big", durable=True)
        body = b"x" * 1024
        for i in range(self.N):
            src.basic_publish("", "big", b"%06d" % i + body, pika.BasicProperties(delivery_mode=2))
        self.shovel(a, "k", {"src-uri": local_uri(a), "src-queue": "big", "src-prefetch-count": 100,
                             "dest-uri": "amqp://guest:guest@127.0.0.1:%d" % port, "dest-queue": "big.out",
                             "reconnect-delay": 1})

        def dest_count():
            try:
                c = h.connect(("127.0.0.1", port))
                try:
                    return c.channel().queue_declare("big.out", durable=True).method.message_count
                finally:
                    c.close()
            except Exception:
                return None
        until(lambda: (dest_count() or 0) > self.N // 10, timeout=30, step=0.01)
        dest.proc.kill()  # SIGKILL in the middle
        dest.proc.wait(5)
        dest.tmpdir = None  # keep the data directory for the restart
        dest.stop()
        st = self.state(a, "k", "terminated")
        self.assertIn("outbound_conn_died", st["reason"])
        dest = h.WarrenProcess(settings + ["data_dir=%s" % data_dir])
        dest.start()
        until(lambda: src.queue_declare("big", passive=True).method.message_count == 0 and
              self.status(a, "k")["unconfirmed"] == 0, timeout=60)
        c = h.connect(("127.0.0.1", port))
        ch = c.channel()
        seen = set()
        while True:
            m, _, b = ch.basic_get("big.out", auto_ack=True)
            if m is None:
                break
            seen.add(b[:6])
        c.close()
        self.assertEqual(seen, {b"%06d" % i for i in range(self.N)}, "nothing lost")


class WarrenctlTest(ShovelTest):
    """shovel_status, restart_shovel and delete_shovel, as rabbitmqctl 3.10
    prints them (its output taken from a RabbitMQ with rabbitmq_shovel)."""

    def test_status_restart_delete(self):
        from test_warrenctl import live_args, run
        args, why = live_args()
        self.assertFalse(why, why)
        a, b = self.two_vhosts()
        self.shovel(a, "c1", {"src-uri": local_uri(a), "src-queue": "q", "dest-uri": local_uri(b),
                              "dest-queue": "q"})
        st = self.state(a, "c1", "running")
        rc, out, err = run(args + ["shovel_status"])
        self.assertEqual((rc, err), (0, ""))
        lines = out.splitlines()
        self.assertEqual(lines[0], "Shovel status on node " + st["node"])
        self.assertEqual(lines[1].split("\t"), ["destination", "destination_protocol", "destination_queue",
                                                "last_changed", "name", "source", "source_protocol",
                                                "source_queue", "state", "termination_reason", "type", "vhost"])
        row = [line for line in lines[2:] if line.split("\t")[-1] == a][0].split("\t")
        self.assertEqual(row[:3] + row[4:], [local_uri(b), "amqp091", "q", "c1", local_uri(a), "amqp091", "q",
                                             "running", "", "dynamic", a])
        self.assertRegex(row[3], r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
        rc, out, err = run(args + ["--formatter", "json", "shovel_status"])
        self.assertEqual(rc, 0)
        self.assertTrue(out.startswith("[\n{\"destination\":"), out)
        rc, out, err = run(args + ["restart_shovel", "-p", a, "c1"])
        self.assertEqual((rc, out, err), (0, "Restarting dynamic Shovel c1 in virtual host %s on node %s\n"
                                          % (a, st["node"]), ""))
        rc, out, err = run(args + ["restart_shovel", "-p", a, "nope"])
        self.assertEqual((rc, err), (69, "Error:\nShovel with the given name was not found on the target node "
                                         "'%s' and / or virtual host '%s'\n" % (st["node"], a)))
        rc, out, err = run(args + ["delete_shovel", "-p", a, "c1"])
        self.assertEqual((rc, out, err), (0, "Deleting shovel c1 in vhost %s\n" % a, ""))
        self.assertIsNone(self.status(a, "c1"))
        rc, out, err = run(args + ["delete_shovel", "-p", a, "c1"])
        self.assertEqual(rc, 69)


class MetricsTest(ShovelTest):
    def test_metrics_per_shovel_and_promtool_clean(self):
        import subprocess
        from test_prometheus import get, metrics, promtool
        a, b = self.two_vhosts()
        self.shovel(a, "m", {"src-uri": local_uri(a), "src-queue": "q", "dest-uri": local_uri(b),
                             "dest-queue": "q"})
        self.state(a, "m", "running")
        src = self.channel(a)
        for i in range(7):
            src.basic_publish("", "q", b"%d" % i)
        until(lambda: self.status(a, "m")["acked"] == 7)
        fams = metrics()

        def value(family):  # the sample labelled with this shovel
            return [v for _, ls, v in fams[family]["samples"] if ls == {"vhost": a, "name": "m"}]
        self.assertEqual(value("warren_shovel_running"), [1])
        self.assertEqual(value("warren_shovel_messages_forwarded_total"), [7])
        self.assertEqual(value("warren_shovel_messages_acked_total"), [7])
        self.assertEqual(value("warren_shovel_messages_unconfirmed"), [0])
        self.assertEqual(value("warren_shovel_restarts_total"), [0])
        status, _, body = get("/metrics")
        r = subprocess.run([promtool(), "check", "metrics"], input=body.encode(), capture_output=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout + r.stderr), (0, b""))


class RestartTest(h.DataDirTest):
    """A shovel's parameter is kept in the metadata store: after a restart
    the shovel runs again and goes on moving what is there."""

    def test_shovel_runs_again_after_a_restart(self):
        import json
        import urllib.request
        conn, ch = self.start()
        ch.queue_declare("in", durable=True)
        value = {"src-uri": "amqp://", "src-queue": "in", "dest-uri": "amqp://", "dest-queue": "out"}

        def call(method, path, body=None):
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.proc.mgmt_port, path), method=method,
                                         data=json.dumps(body).encode() if body is not None else None)
            req.add_header("Authorization", "Basic Z3Vlc3Q6Z3Vlc3Q=")
            req.add_header("Content-Type", "application/json")
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read() or "null")
        call("PUT", "/api/parameters/shovel/%2f/keep", {"value": value})
        until(lambda: [s for s in call("GET", "/api/shovels") if s["state"] == "running"])
        conn, ch = self.restart(conn)
        until(lambda: [s for s in call("GET", "/api/shovels") if s["state"] == "running"])
        for i in range(10):
            ch.basic_publish("", "in", b"%d" % i, pika.BasicProperties(delivery_mode=2))
        until(lambda: ch.queue_declare("out", passive=True).method.message_count == 10)
        conn.close()


class TlsTest(ShovelTest):
    """amqps:// destinations: a Warren with an AMQPS listener (tests/tls);
    with verify=verify_peer the server's certificate is checked against
    cacertfile and the host name, and a wrong CA terminates the shovel."""

    def test_amqps_destination(self):
        from test_tls import PKI, TlsBroker, tls_settings
        a = self.vhost()
        self.grant(a, "guest")
        with TlsBroker(tls_settings()) as b:
            base = "amqps://guest:guest@localhost:%d?cacertfile=%s" % (b.tls_port, urllib.parse.quote(PKI))
            self.shovel(a, "tls", {"src-uri": local_uri(a), "src-queue": "t", "dest-uri": base + "ca.pem&verify=verify_peer",
                                   "dest-queue": "t.out"})
            self.shovel(a, "tls-none", {"src-uri": local_uri(a), "src-queue": "t2", "dest-uri":
                                        "amqps://guest:guest@127.0.0.1:%d" % b.tls_port, "dest-queue": "t2.out"})
            self.shovel(a, "wrong-ca", {"src-uri": local_uri(a), "src-queue": "t3", "reconnect-delay": 30,
                                        "dest-uri": base + "other_ca.pem&verify=verify_peer", "dest-queue": "t3.out"})
            st = self.state(a, "tls", "running")
            self.assertEqual(st["dest_uri"], "amqps://localhost:%d" % b.tls_port, "no credentials, no query")
            self.state(a, "tls-none", "running")
            self.assertIn("certificate verify failed", self.state(a, "wrong-ca", "terminated")["reason"])
            src = self.channel(a)
            for queue in ("t", "t2"):
                for i in range(100):
                    src.basic_publish("", queue, b"%d" % i, pika.BasicProperties(delivery_mode=2))
            dest = self.channel("/", ("127.0.0.1", b.port))
            self.assertEqual(len(self.bodies(dest, "t.out", 100)), 100)
            self.assertEqual(len(self.bodies(dest, "t2.out", 100)), 100)
            for name in ("tls", "tls-none", "wrong-ca"):
                request("DELETE", "/api/parameters/shovel/%s/%s" % (q(a), name))
