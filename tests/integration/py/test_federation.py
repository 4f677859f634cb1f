"""Federation with Warren as the downstream (federation/): from a RabbitMQ
3.10 upstream and from another Warren, exchange and queue federation,
bindings kept in step, max-hops stopping a loop of two Warrens, policy and
parameter changes starting and stopping links, the status at
/api/federation-links with RabbitMQ's fields, and who may read it.

The RabbitMQ upstream is started once for the file (fedutil.rabbit). What
RabbitMQ makes upstream and the status fields were taken from a RabbitMQ
3.10.8 downstream (rabbitmq_federation_management) federating from the
same upstream.
"""
import unittest
import urllib.parse
import urllib.request

import pika

import harness as h
from fedutil import (api, links, ok, policy, q, rabbit, rabbit_uri, running, until, upstream,
                     warren, warren_uri)

EXCHANGE_FIELDS = ["node", "exchange", "upstream_exchange", "type", "vhost", "upstream", "id",
                   "status", "local_connection", "uri", "timestamp"]
QUEUE_FIELDS = ["node", "queue", "upstream_queue", "consumer_tag", "type", "vhost", "upstream",
                "id", "status", "local_connection", "uri", "timestamp"]
ERROR_FIELDS = ["node", "exchange", "upstream_exchange", "type", "vhost", "upstream", "id",
                "status", "error", "uri", "timestamp"]


def rabbit_channel(test):
    conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", rabbit().port))
    test.addCleanup(conn.close)
    ch = conn.channel()
    ch.confirm_delivery()
    return ch


def pika_channel(test, w):
    conn = h.connect((w.host, w.port))
    test.addCleanup(conn.close)
    return conn, conn.channel()


def consume(conn, ch, queue, n, ack=True):
    """n messages of `queue` as (body, headers), acked."""
    got = []

    def on(c, m, p, b):
        got.append((b, p.headers or {}))
        if ack:
            c.basic_ack(m.delivery_tag)
    ch.basic_qos(prefetch_count=50)
    tag = ch.basic_consume(queue, on)
    for _ in range(200):
        if len(got) >= n:
            break
        conn.process_data_events(0.05)
    ch.basic_cancel(tag)
    return got


class FromRabbitTest(unittest.TestCase):
    def setUp(self):
        self.w = warren("downstream")
        self.r = rabbit()
        self.up = h.unique("up")
        upstream(self.w, self.up, rabbit_uri(), expires=3600000, **{"message-ttl": 600000})
        self.addCleanup(api, self.w, "DELETE", "/api/parameters/federation-upstream/%2F/" + q(self.up))

    def pol(self, pattern, apply_to, **definition):
        name = h.unique("pol")
        policy(self.w, name, pattern, definition or {"federation-upstream": self.up}, apply_to)
        self.addCleanup(api, self.w, "DELETE", "/api/policies/%2F/" + q(name))
        return name

    def test_queue_pulls_only_while_local_consumers_want(self):
        qn = h.unique("fq")
        self.pol("^" + qn, "queues")
        conn, ch = pika_channel(self, self.w)
        ch.queue_declare(qn, durable=True)
        link = running(self.w, queue=qn)
        self.assertEqual(link["consumer_tag"], "federation-link-" + self.up)
        rch = rabbit_channel(self)
        for i in range(20):
            rch.basic_publish("", qn, b"m%d" % i, pika.BasicProperties(delivery_mode=2))
        # no local consumer: the link does not consume, the upstream keeps them
        self.assertEqual(self.r.queues()[qn][:2], (20, 0))
        got = consume(conn, ch, qn, 20)
        self.assertEqual(sorted(b for b, _ in got), sorted(b"m%d" % i for i in range(20)))
        hop = got[0][1]["x-received-from"][0]
        self.assertEqual(hop, {"uri": "amqp://127.0.0.1:%d" % self.r.port, "queue": qn,
                               "redelivered": False, "visit-count": 1})
        self.assertEqual(got[0][1]["x-original-routing-key"], qn)
        until(lambda: self.r.queues()[qn][0] == 0, "the upstream queue to drain")

    def test_upstream_changed_mid_flow_loses_nothing(self):
        """A changed upstream makes its links again (RabbitMQ restarts them):
        the old link acks what it put here, sends the rest back, and the
        new one carries on -- nothing lost, a repeat only as a redelivery."""
        qn = h.unique("fq")
        self.pol("^" + qn, "queues")
        conn, ch = pika_channel(self, self.w)
        ch.queue_declare(qn, durable=True)
        running(self.w, queue=qn)
        rch = rabbit_channel(self)
        for i in range(1500):
            rch.basic_publish("", qn, b"%d" % i, pika.BasicProperties(delivery_mode=2))
        seen = []

        def on(c, m, p, b):
            hops = (p.headers or {}).get("x-received-from") or [{}]
            seen.append((int(b), m.redelivered or bool(hops[0].get("redelivered"))))
            c.basic_ack(m.delivery_tag)
        ch.basic_qos(prefetch_count=20)
        ch.basic_consume(qn, on)
        changed = False
        for _ in range(600):
            conn.process_data_events(0.05)
            if not changed and len(seen) >= 300:
                upstream(self.w, self.up, rabbit_uri(), **{"prefetch-count": 50})
                changed = True
            if len({n for n, _ in seen}) == 1500:
                break
        first = {}
        for n, redelivered in seen:
            if n in first:
                self.assertTrue(redelivered, "%d twice, not as a redelivery" % n)
            first.setdefault(n, redelivered)
        self.assertEqual(sorted(first), list(range(1500)))
        until(lambda: self.r.queues()[qn][0] == 0, "the upstream queue to drain")

    def test_exchange_binding_upkeep_and_headers(self):
        x, lq = h.unique("fx"), h.unique("lq")
        self.pol("^" + x, "exchanges")
        conn, ch = pika_channel(self, self.w)
        ch.exchange_declare(x, "topic", durable=True)
        ch.queue_declare(lq, durable=True)
        ch.queue_bind(lq, x, "a.#")
        running(self.w, exchange=x)
        node = ok(self.w, "GET", "/api/overview")["node"]
        upq = "federation: %s -> %s" % (x, node)
        args = self.r.queues()[upq][2]
        self.assertIn('"x-expires",3600000', args)
        self.assertIn('"x-message-ttl",600000', args)
        self.assertIn('"x-internal-purpose","federation"', args)
        mine = lambda: [b for b in self.r.bindings() if b[0] == x]
        self.assertEqual([(b[1], b[2]) for b in mine()], [(upq + " B", "a.#")])
        self.assertIn('"x-bound-from",[[{"cluster-name","%s"},{"vhost","/"},{"exchange","/:%s B"},'
                      '{"hops",1}]]' % (node, x), mine()[0][3])
        rch = rabbit_channel(self)
        rch.basic_publish(x, "a.b", b"one", pika.BasicProperties(headers={"h": 1}))
        rch.basic_publish(x, "c.d", b"not bound")
        got = consume(conn, ch, lq, 1)
        self.assertEqual(got[0][0], b"one")
        self.assertEqual(got[0][1], {"h": 1, "x-received-from": [
            {"uri": "amqp://127.0.0.1:%d" % self.r.port, "exchange": x, "redelivered": False,
             "vhost": "/"}]})
        # a new local binding goes upstream, a removed one goes away
        ch.queue_bind(lq, x, "c.#")
        until(lambda: len(mine()) == 2, "the new binding upstream")
        ch.queue_unbind(lq, x, "a.#")
        until(lambda: [b[2] for b in mine()] == ["c.#"], "the old binding gone upstream")
        rch.basic_publish(x, "c.d", b"two")
        self.assertEqual(consume(conn, ch, lq, 1)[0][0], b"two")

    def test_policy_removed_stops_link_and_cleans_upstream(self):
        x = h.unique("fx")
        name = self.pol("^" + x, "exchanges")
        conn, ch = pika_channel(self, self.w)
        ch.exchange_declare(x, "fanout")
        running(self.w, exchange=x)
        ok(self.w, "DELETE", "/api/policies/%2F/" + q(name))
        until(lambda: not [l for l in links(self.w) if l.get("exchange") == x], "the link to stop")
        until(lambda: not [n for n in self.r.queues() if n.startswith("federation: " + x)],
              "the upstream queue to go")

    def test_status_fields_and_errors(self):
        x, qn = h.unique("fx"), h.unique("fq")
        bad = h.unique("bad")
        upstream(self.w, bad, "amqp://guest:guest@127.0.0.1:1")
        self.addCleanup(api, self.w, "DELETE", "/api/parameters/federation-upstream/%2F/" + q(bad))
        self.pol("^" + x, "exchanges", **{"federation-upstream-set": "all"})
        self.pol("^" + qn, "queues")
        conn, ch = pika_channel(self, self.w)
        ch.exchange_declare(x, "fanout")
        ch.queue_declare(qn)
        xl = running(self.w, exchange=x, upstream=self.up)
        ql = running(self.w, queue=qn)
        self.assertEqual(list(xl), EXCHANGE_FIELDS)
        self.assertEqual(list(ql), QUEUE_FIELDS)
        self.assertEqual((xl["type"], xl["vhost"], xl["upstream_exchange"], xl["uri"]),
                         ("exchange", "/", x, "amqp://127.0.0.1:%d" % self.r.port))
        self.assertRegex(xl["id"], "^[0-9a-f]{8}$")
        self.assertRegex(xl["timestamp"], r"^\d{4}-\d\d-\d\d \d{1,2}:\d\d:\d\d$")
        err = until(lambda: [l for l in links(self.w) if l.get("upstream") == bad
                             and l["status"] == "error"], "the bad upstream's error")[0]
        self.assertEqual(list(err), ERROR_FIELDS)
        self.assertEqual(err["uri"], "amqp://127.0.0.1:1")
        down = links(self.w, "/api/federation-links/state/down")
        self.assertIn(err["id"], [l["id"] for l in down])
        self.assertNotIn(xl["id"], [l["id"] for l in down])
        self.assertIn(ql["id"], [l["id"] for l in links(self.w, "/api/federation-links/%2F")])
        self.assertEqual(api(self.w, "GET", "/api/federation-links/nosuchvhost")[0], 404)
        # /metrics counts the links by status
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.w.prometheus_port) as r:
            metrics = r.read().decode()
        for status in ("running", "error"):
            want = len([l for l in links(self.w) if l["status"] == status])
            self.assertIn('warren_federation_links{status="%s"} %d' % (status, want), metrics)
        # RabbitMQ's restart: the link connects again
        restart = "/api/federation-links/vhost/%%2F/%s/%s/restart"
        self.assertEqual(api(self.w, "DELETE", restart % (ql["id"], ql["node"]))[0], 204)
        running(self.w, queue=qn)
        self.assertEqual(api(self.w, "DELETE", restart % ("00000000", ql["node"]))[0], 404)
        self.assertEqual(api(self.w, "DELETE", restart % (ql["id"], "other@node"))[0], 404)

    def test_who_may_read_the_links(self):
        for tags, status in (("administrator", 200), ("monitoring", 200), ("management", 401),
                             ("policymaker", 401), ("", 401)):
            user = h.unique("user")
            ok(self.w, "PUT", "/api/users/" + q(user), {"password": "pw", "tags": tags})
            self.addCleanup(api, self.w, "DELETE", "/api/users/" + q(user))
            ok(self.w, "PUT", "/api/permissions/%2F/" + q(user),
               {"configure": ".*", "write": ".*", "read": ".*"})
            # every route of rabbitmq_federation_management's (conformance/mgmt/authz.py
            # NOT_PROBED names this test); an unknown link's restart is 404
            for method, path, allowed in (
                    ("GET", "/api/federation-links", 200), ("GET", "/api/federation-links/%2F", 200),
                    ("GET", "/api/federation-links/state/down", 200),
                    ("GET", "/api/federation-links/%2F/state/down", 200),
                    ("DELETE", "/api/federation-links/vhost/%2F/00000000/warren@localhost/restart",
                     404)):
                got, reply = api(self.w, method, path, user=user, password="pw")
                self.assertEqual(got, allowed if status == 200 else 401, (tags, path))
                if status == 401:
                    self.assertEqual(reply["error"], "not_authorised")
                    self.assertEqual(reply["reason"], "Not management user" if tags == "" else
                                     "Not monitor user")


class FromWarrenTest(unittest.TestCase):
    """Two Warrens: a queue and an exchange federated from the other, and an
    exchange federated both ways, where max-hops stops the loop."""

    def setUp(self):
        self.a, self.b = warren("downstream"), warren("second")

    def link(self, down, up, what, pattern, apply_to, **keys):
        name = h.unique("up")
        upstream(down, name, warren_uri(up), **keys)
        self.addCleanup(api, down, "DELETE", "/api/parameters/federation-upstream/%2F/" + q(name))
        pol = h.unique("pol")
        policy(down, pol, pattern, {"federation-upstream": name}, apply_to)
        self.addCleanup(api, down, "DELETE", "/api/policies/%2F/" + q(pol))
        return name

    def test_queue_and_exchange_from_warren(self):
        qn, x, lq = h.unique("fq"), h.unique("fx"), h.unique("lq")
        self.link(self.a, self.b, "queue", "^" + qn, "queues")
        self.link(self.a, self.b, "exchange", "^" + x, "exchanges")
        conn, ch = pika_channel(self, self.a)
        ch.queue_declare(qn, durable=True)
        ch.exchange_declare(x, "direct")
        ch.queue_declare(lq)
        ch.queue_bind(lq, x, "k")
        running(self.a, queue=qn)
        running(self.a, exchange=x)
        bconn, bch = pika_channel(self, self.b)
        bch.confirm_delivery()
        for i in range(10):
            bch.basic_publish("", qn, b"q%d" % i, pika.BasicProperties(delivery_mode=2))
        bch.basic_publish(x, "k", b"x0")
        got = consume(conn, ch, qn, 10)
        self.assertEqual(sorted(b for b, _ in got), sorted(b"q%d" % i for i in range(10)))
        self.assertEqual(consume(conn, ch, lq, 1)[0][0], b"x0")

    def test_max_hops_stops_a_loop_of_two(self):
        x, qa, qb = h.unique("fx"), h.unique("qa"), h.unique("qb")
        self.link(self.a, self.b, "exchange", "^" + x, "exchanges")
        self.link(self.b, self.a, "exchange", "^" + x, "exchanges")
        aconn, ach = pika_channel(self, self.a)
        bconn, bch = pika_channel(self, self.b)
        for ch, qn in ((ach, qa), (bch, qb)):
            ch.exchange_declare(x, "fanout")
            ch.queue_declare(qn)
            ch.queue_bind(qn, x)
        running(self.a, exchange=x)
        running(self.b, exchange=x)
        ach.basic_publish(x, "", b"from a")
        bch.basic_publish(x, "", b"from b")
        got_a = consume(aconn, ach, qa, 2)
        got_b = consume(bconn, bch, qb, 2)
        self.assertEqual(sorted(b for b, _ in got_a), [b"from a", b"from b"])
        self.assertEqual(sorted(b for b, _ in got_b), [b"from a", b"from b"])
        # nothing comes round again
        h.drain(aconn, 0.5)
        h.drain(bconn, 0.5)
        self.assertEqual(ach.queue_declare(qa, passive=True).method.message_count, 0)
        self.assertEqual(bch.queue_declare(qb, passive=True).method.message_count, 0)
        hops = [hd.get("x-received-from") for b, hd in got_a if b == b"from b"][0]
        self.assertEqual(len(hops), 1)


class TlsUpstreamTest(unittest.TestCase):
    """An amqps:// upstream: a Warren with an AMQPS listener (tests/tls),
    its certificate checked against cacertfile and the host name; with
    another CA the link fails with the reason."""

    def test_queue_from_amqps_upstream(self):
        from test_tls import PKI, TlsBroker, tls_settings
        down, qn, bad = warren("downstream"), h.unique("tq"), h.unique("tqbad")
        with TlsBroker(tls_settings()) as b:
            base = "amqps://guest:guest@localhost:%d?cacertfile=%s" % (
                b.tls_port, urllib.parse.quote(PKI))
            for name, ca, queue in (("tls", "ca.pem", qn), ("tls-bad", "other_ca.pem", bad)):
                up = h.unique(name)
                upstream(down, up, base + ca + "&verify=verify_peer")
                self.addCleanup(api, down, "DELETE",
                                "/api/parameters/federation-upstream/%2F/" + q(up))
                pol = h.unique("pol")
                policy(down, pol, "^" + queue + "$", {"federation-upstream": up}, "queues")
                self.addCleanup(api, down, "DELETE", "/api/policies/%2F/" + q(pol))
            conn, ch = pika_channel(self, down)
            ch.queue_declare(qn, durable=True)
            ch.queue_declare(bad, durable=True)
            running(down, queue=qn)
            until(lambda: [l for l in links(down) if l.get("queue") == bad
                           and "certificate verify failed" in str(l.get("error", ""))],
                  "the link with the wrong CA fails on the certificate")
            bconn = h.connect(("127.0.0.1", b.port))
            bch = bconn.channel()
            bch.confirm_delivery()
            for i in range(20):
                bch.basic_publish("", qn, b"t%d" % i, pika.BasicProperties(delivery_mode=2))
            bconn.close()
            got = consume(conn, ch, qn, 20)
            self.assertEqual(sorted(b for b, _ in got), sorted(b"t%d" % i for i in range(20)))


class ValidationTest(unittest.TestCase):
    """Policy keys and upstream parameters checked as RabbitMQ 3.10.8 with
    rabbitmq_federation checks them (its texts, HTML-escaped as its API
    sends them)."""

    def setUp(self):
        self.w = warren("downstream")

    def refused(self, path, body, reason):
        status, reply = api(self.w, "PUT", path, body)
        self.assertEqual((status, reply), (400, {"error": "bad_request", "reason": reason}))

    def test_policy_keys(self):
        path = "/api/policies/%2F/" + q(h.unique("pol"))
        self.addCleanup(api, self.w, "DELETE", path)
        lead = "Validation failed\n\n"
        for definition, reason in (
                ({"federation-upstream": 5}, "5 is not a valid federation upstream name\n"),
                ({"federation-upstream-set": ["b"]},
                 "[&lt;&lt;\"b\"&gt;&gt;] is not a valid federation upstream set name\n"),
                ({"federation-upstream": "a", "federation-upstream-set": "b"},
                 "cannot specify federation-upstream, federation-upstream-set or "
                 "federation-upstream-pattern together\n"),
                ({"federation-upstream-pattern": "(("},
                 "could not compile pattern (( to a regular expression. Error: "
                 "{\"missing )\",2}\n"),
                ({"federation-upstream": "a", "max-length": -1}, "-1 is not a valid maximum length\n")):
            self.refused(path, {"pattern": "^x", "definition": definition}, lead + reason)
        for key in ("federation-upstream", "federation-upstream-set", "federation-upstream-pattern"):
            ok(self.w, "PUT", path, {"pattern": "^x", "definition": {key: "a"}})
        self.refused("/api/operator-policies/%2F/op1", {"pattern": "^x", "definition": {
            "federation-upstream": "a"}}, lead + "[{&lt;&lt;\"federation-upstream\"&gt;&gt;,"
            "&lt;&lt;\"a\"&gt;&gt;}] are not recognised policy settings\n")

    def test_upstream_values(self):
        lead = "Validation failed\n\n"
        self.refused("/api/parameters/federation-upstream/%2F/u1", {"value": {
            "uri": "amqp://h", "prefetch-count": "x", "ack-mode": "later", "trust-user-id": "yes",
            "max-hops": "2", "exchange": 5}}, lead +
            "ack-mode should be one of [&lt;&lt;\"no-ack\"&gt;&gt;,&lt;&lt;\"on-publish\"&gt;&gt;,"
            "&lt;&lt;\"on-confirm\"&gt;&gt;], actually was &lt;&lt;\"later\"&gt;&gt;\n"
            "trust-user-id should be boolean, actually was &lt;&lt;\"yes\"&gt;&gt;\n"
            "max-hops should be a number, actually was &lt;&lt;\"2\"&gt;&gt;\n"
            "prefetch-count should be a number, actually was &lt;&lt;\"x\"&gt;&gt;\n"
            "exchange should be binary, actually was 5\n")
        self.refused("/api/parameters/federation-upstream-set/%2F/s1", {"value": [
            {"upstream": "u", "prefetch-count": "x"}]},
            lead + "prefetch-count should be a number, actually was &lt;&lt;\"x\"&gt;&gt;\n")


class ThisBrokerTest(unittest.TestCase):
    def setUp(self):
        self.a = warren("downstream")

    def test_upstream_in_this_broker(self):
        """A URI without a host is this broker (RabbitMQ's direct connection):
        a queue federated from another vhost of the same Warren."""
        vh, qn = h.unique("vh"), h.unique("fq")
        ok(self.a, "PUT", "/api/vhosts/" + q(vh))
        self.addCleanup(api, self.a, "DELETE", "/api/vhosts/" + q(vh))
        ok(self.a, "PUT", "/api/permissions/%s/guest" % q(vh),
           {"configure": ".*", "write": ".*", "read": ".*"})
        name = h.unique("up")
        upstream(self.a, name, "amqp:///" + q(vh))
        self.addCleanup(api, self.a, "DELETE", "/api/parameters/federation-upstream/%2F/" + q(name))
        pol = h.unique("pol")
        policy(self.a, pol, "^" + qn, {"federation-upstream": name}, "queues")
        self.addCleanup(api, self.a, "DELETE", "/api/policies/%2F/" + q(pol))
        conn, ch = pika_channel(self, self.a)
        ch.queue_declare(qn)
        link = running(self.a, queue=qn)
        self.assertEqual(link["uri"], "amqp:///" + q(vh))
        other = h.connect((self.a.host, self.a.port), vhost=vh)
        self.addCleanup(other.close)
        och = other.channel()
        och.queue_declare(qn, passive=True)  # the link declared it there
        for i in range(5):
            och.basic_publish("", qn, b"v%d" % i)
        got = consume(conn, ch, qn, 5)
        self.assertEqual(sorted(b for b, _ in got), [b"v%d" % i for i in range(5)])


class RestartTest(h.DataDirTest):
    """Upstreams and policies are kept: after a restart -- clean or a
    SIGKILL -- the links run again and carry on. A message whose ack the
    kill lost (the link's upstream one, or ours of the local copy; not yet
    synced) may come again: at least once, as RabbitMQ."""

    def test_links_come_back_after_restart_and_kill(self):
        from fedutil import _more_time
        _more_time(30)
        conn, ch = self.start()
        vh, qn = h.unique("vh"), h.unique("fq")
        w = self.proc
        ok(w, "PUT", "/api/vhosts/" + q(vh))
        ok(w, "PUT", "/api/permissions/%s/guest" % q(vh), {"configure": ".*", "write": ".*", "read": ".*"})
        upstream(w, "up", "amqp:///" + q(vh))
        policy(w, "pol", "^" + qn, {"federation-upstream": "up"}, "queues")
        ch.queue_declare(qn, durable=True)
        running(w, queue=qn)
        for restart in ("clean", "kill"):
            if restart == "clean":
                conn, ch = self.restart(conn)
            else:
                self.kill()
                conn, ch = self.start()
            w = self.proc
            running(w, queue=qn)
            other = h.connect(self.addr, vhost=vh)
            other.channel().basic_publish("", qn, restart.encode(),
                                          pika.BasicProperties(delivery_mode=2))
            other.close()
            got = []
            for _ in range(20):  # the new message, and maybe an old one again
                got += consume(conn, ch, qn, 1)
                if got and got[-1][0] == restart.encode():
                    break
            self.assertEqual(got[-1][0], restart.encode())
            if restart == "clean":  # a clean stop loses no ack
                self.assertEqual([b for b, _ in got], [b"clean"])
            # an ack the kill lost -- the link's upstream, or ours of the local
            # copy -- brings an earlier message again, nothing else
            for body, _headers in got[:-1]:
                self.assertEqual(body, b"clean")
        conn.close()

