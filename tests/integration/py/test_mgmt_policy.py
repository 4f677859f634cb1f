"""The management API's policies and operator policies, the policy fields of
queues and exchanges, the overview's churn_rates and per-user totals, the
node's fields, and the health checks.

Every expectation was checked against RabbitMQ 3.10.8 (run with
WARREN_TEST_TARGET=127.0.0.1:5672), except where a test is marked Warren's
own: there RabbitMQ answers 500 or keeps what Warren refuses.
"""
import subprocess
import time
import unittest

import harness as h
from test_mgmt import q, request, poll
from test_mgmt_access import AccessTest, WARREN, basic

DEF = {"max-length": 3}


def until(fetch, pred):
    """fetch() once pred holds of it (statistics and policies may lag in
    RabbitMQ), else the last value."""
    last = []

    def probe():
        last[:] = [fetch()]
        try:
            return pred(last[0])
        except (KeyError, TypeError, IndexError):
            return False
    poll(probe)
    return last[0]


class PolicyTest(AccessTest):
    def vhost(self, body=None, grant=True):
        name = super().vhost(body)
        if grant:  # the test's own user declares queues there
            self.grant(name, h.USER)
        return name

    def put_policy(self, vh, name, body, kind="policies", status=(201, 204), **kw):
        return self.ok("PUT", "/api/%s/%s/%s" % (kind, q(vh), q(name)), body, status=status, **kw)

    def refused(self, vh, body, reason=None, kind="policies"):
        r = request("PUT", "/api/%s/%s/p" % (kind, q(vh)), body)
        return self.error(r, 400, "bad_request", reason)


class CrudTest(PolicyTest):
    def test_put_201_then_204_get_list_delete(self):
        v = self.vhost()
        body = {"pattern": "^a", "definition": DEF, "priority": 2, "apply-to": "queues"}
        self.put_policy(v, "p1", body, status=201)
        self.put_policy(v, "p1", body, status=204)
        want = dict(body, vhost=v, name="p1")
        self.assertEqual(self.get("/api/policies/%s/p1" % q(v)), want)
        self.assertEqual(self.get("/api/policies/" + q(v)), [want])
        self.assertIn(want, self.get("/api/policies"))
        self.ok("DELETE", "/api/policies/%s/p1" % q(v), status=204)
        self.error(request("GET", "/api/policies/%s/p1" % q(v)), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", "/api/policies/%s/p1" % q(v)), 404, "Object Not Found", "Not Found")

    def test_list_order_is_priority_across_vhosts(self):
        a, b = self.vhost(), self.vhost()
        for vh, name, prio in ((b, "z1", 1), (a, "y5", 5), (a, "a3", 3), (b, "b4", 4)):
            self.put_policy(vh, name, {"pattern": "^x", "definition": DEF, "priority": prio})
        mine = lambda rows: [(p["vhost"], p["name"]) for p in rows if p["vhost"] in (a, b)]
        self.assertEqual(mine(self.get("/api/policies")), [(b, "z1"), (a, "a3"), (b, "b4"), (a, "y5")])
        self.assertEqual(mine(self.get("/api/policies?sort=name")), [(a, "a3"), (b, "b4"), (a, "y5"), (b, "z1")])
        self.assertEqual([p["name"] for p in self.get("/api/policies/%s?columns=name" % q(a))], ["a3", "y5"])

    def test_defaults_and_ignored_keys(self):
        v = self.vhost()
        self.put_policy(v, "p", {"pattern": ".*", "definition": {"expires": 100000}, "extra": 1})
        got = self.get("/api/policies/%s/p" % q(v))
        self.assertEqual((got["apply-to"], got["priority"]), ("all", 0))
        self.assertNotIn("extra", got)

    def test_operator_policies_are_their_own_name_space(self):
        v = self.vhost()
        self.put_policy(v, "same", {"pattern": "^a", "definition": DEF})
        self.put_policy(v, "same", {"pattern": "^b", "definition": {"max-length": 9}},
                        kind="operator-policies", status=201)
        self.assertEqual(self.get("/api/policies/%s/same" % q(v))["pattern"], "^a")
        self.assertEqual(self.get("/api/operator-policies/%s/same" % q(v))["pattern"], "^b")
        self.assertEqual(len(self.get("/api/operator-policies/" + q(v))), 1)
        self.ok("DELETE", "/api/operator-policies/%s/same" % q(v), status=204)
        self.assertEqual(self.get("/api/operator-policies/" + q(v)), [])
        self.assertEqual(len(self.get("/api/policies/" + q(v))), 1)

    def test_unknown_vhost(self):
        nv = h.unique("mgmt-policy-novh")
        self.error(request("PUT", "/api/policies/%s/p" % nv, {"pattern": "^a", "definition": DEF}),
                   404, "not_found", "vhost_not_found")
        for path in ("/api/policies/%s" % nv, "/api/policies/%s/p" % nv, "/api/operator-policies/%s/p" % nv):
            self.error(request("GET", path), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", "/api/policies/%s/p" % nv), 404, "Object Not Found", "Not Found")


class ValidationTest(PolicyTest):
    def test_missing_keys(self):
        v = self.vhost()
        self.refused(v, {}, "[{key_missing,pattern},{key_missing,definition}]")
        self.refused(v, {"pattern": "^a"}, "[{key_missing,definition}]")
        self.refused(v, {"definition": DEF}, "[{key_missing,pattern}]")

    def test_rabbitmq_texts(self):
        v = self.vhost()
        self.refused(v, {"pattern": "^a", "definition": {"max-priority": 3}},
                     "Validation failed\n\n[{&lt;&lt;\"max-priority\"&gt;&gt;,3}] are not recognised policy settings\n")
        self.refused(v, {"pattern": "^a", "definition": {}}, "Validation failed\n\nno policy provided\n")
        self.refused(v, {"pattern": "^a", "definition": DEF, "priority": "3"},
                     "Validation failed\n\npriority should be a number, actually was &lt;&lt;\"3\"&gt;&gt;\n")
        self.refused(v, {"pattern": "^a", "definition": DEF, "priority": None},
                     "Validation failed\n\npriority should be a number, actually was null\n")
        self.refused(v, {"pattern": 5, "definition": DEF}, "Validation failed\n\npattern should be a binary but was 5\n")
        b = self.refused(v, {"pattern": "(", "definition": DEF})
        self.assertTrue(b["reason"].startswith("Validation failed\n\npattern should be regular expression but is invalid"))
        b = self.refused(v, {"pattern": "^a", "definition": {"max-length": "x"}})
        self.assertIn("is not a valid maximum length", b["reason"])
        b = self.refused(v, {"pattern": "^a", "definition": DEF, "apply-to": "bogus"})
        self.assertTrue(b["reason"].startswith("Validation failed\n\napply-to 'bogus' unrecognised"), b)
        b = self.refused(v, {"pattern": "^a", "definition": {"alternate-exchange": "ae"}}, kind="operator-policies")
        self.assertIn("are not recognised policy settings", b["reason"])
        self.assertEqual(self.get("/api/policies/" + q(v)), [])
        self.assertEqual(self.get("/api/operator-policies/" + q(v)), [])

    def test_every_problem_listed_priority_last(self):
        v = self.vhost()
        b = self.refused(v, {"pattern": "(", "definition": {"max-length": "x"}, "priority": "3"})
        lines = b["reason"].split("\n")
        self.assertIn("is not a valid maximum length", lines[2])
        self.assertTrue(lines[3].startswith("pattern should be regular expression"), lines)
        self.assertTrue(lines[4].startswith("priority should be a number"), lines)

    @unittest.skipUnless(WARREN, "RabbitMQ 3.10 answers 500 for these and keeps a fractional priority")
    def test_warren_refuses_what_rabbitmq_crashes_on(self):
        v = self.vhost()
        for d in ([1], "x"):
            self.refused(v, {"pattern": "^a", "definition": d}, "Validation failed\n\ndefinition must be a dictionary\n")
        self.error(request("PUT", "/api/policies/%s/p" % q(v), {"pattern": "^a", "definition": DEF, "apply-to": 5}),
                   400, "bad_request")
        self.refused(v, {"pattern": "^a", "definition": DEF, "priority": 1.5},
                     "Validation failed\n\npriority should be an integer in 32 bits, actually was 1.5\n")
        self.put_policy(v, "p", {"pattern": "^a", "definition": DEF, "priority": 2.0}, status=201)
        self.assertEqual(self.get("/api/policies/%s/p" % q(v))["priority"], 2)


class WhoMayTest(PolicyTest):
    BODY = {"pattern": "^a", "definition": DEF}

    def test_policymaker_in_its_vhosts(self):
        v, other = self.vhost(), self.vhost()
        pol = self.user("policymaker")
        self.grant(v, pol)
        me = self.as_user(pol)
        self.put_policy(v, "p", self.BODY, status=201, **me)
        self.assertEqual(len(self.get("/api/policies/%s/p" % q(v), **me)["definition"]), 1)
        self.put_policy(other, "p", self.BODY)
        self.assertEqual([p["vhost"] for p in self.get("/api/policies", **me)], [v],
                         "the list shows only its vhosts")
        self.error(request("PUT", "/api/policies/%s/p" % q(other), self.BODY, **me), 401, "not_authorised",
                   "User not authorised to access object")
        self.error(request("GET", "/api/policies/" + q(other), **me), 401, "not_authorised",
                   "User not authorised to access virtual host")
        self.error(request("PUT", "/api/operator-policies/%s/p" % q(v), self.BODY, **me), 401, "not_authorised",
                   "Not administrator user")
        self.ok("DELETE", "/api/policies/%s/p" % q(v), status=204, **me)

    def test_management_user_reads_lists_only(self):
        v = self.vhost()
        m = self.user("management")
        self.grant(v, m)
        me = self.as_user(m)
        self.put_policy(v, "p", self.BODY)
        self.put_policy(v, "o", self.BODY, kind="operator-policies")
        self.assertEqual(len(self.get("/api/policies/" + q(v), **me)), 1)
        self.assertEqual(len(self.get("/api/operator-policies/" + q(v), **me)), 1)
        for method, body in (("GET", None), ("PUT", self.BODY), ("DELETE", None)):
            self.error(request(method, "/api/policies/%s/p" % q(v), body, **me), 401, "not_authorised",
                       "User not authorised to access object")
        self.error(request("GET", "/api/operator-policies/%s/o" % q(v), **me), 401, "not_authorised",
                   "Not administrator user")
        none = self.user("")
        self.error(request("GET", "/api/policies", auth=basic(none, "pw")), 401, "not_authorised",
                   "Not management user")


class AppliedTest(PolicyTest):
    def test_queue_and_exchange_show_what_applies(self):
        v = self.vhost()
        self.put_policy(v, "qp", {"pattern": "^a", "definition": {"max-length": 3, "message-ttl": 60000},
                                  "apply-to": "queues", "priority": 1})
        self.put_policy(v, "op", {"pattern": "^a", "definition": {"max-length": 2, "expires": 100000}},
                        kind="operator-policies")
        self.put_policy(v, "xp", {"pattern": "^ax$", "definition": {"alternate-exchange": "ae"},
                                  "apply-to": "exchanges"})
        self.ok("PUT", "/api/queues/%s/aq" % q(v), {})
        self.ok("PUT", "/api/queues/%s/bq" % q(v), {})
        self.ok("PUT", "/api/exchanges/%s/ax" % q(v), {"type": "fanout"})
        got = until(lambda: self.get("/api/queues/%s/aq" % q(v)), lambda x: x.get("operator_policy") == "op")
        self.assertEqual((got["policy"], got["operator_policy"], got["effective_policy_definition"]),
                         ("qp", "op", {"max-length": 2, "message-ttl": 60000, "expires": 100000}))
        other = self.get("/api/queues/%s/bq" % q(v))
        self.assertEqual((other["policy"], other["operator_policy"], other["effective_policy_definition"]),
                         (None, None, {}))
        x = until(lambda: self.get("/api/exchanges/%s/ax" % q(v)), lambda x: x.get("policy") == "xp")
        self.assertEqual(x["policy"], "xp")
        self.assertNotIn("policy", self.get("/api/exchanges/%s/amq.direct" % q(v)),
                         "RabbitMQ leaves policy out when none applies")
        self.ok("DELETE", "/api/operator-policies/%s/op" % q(v), status=204)
        got = until(lambda: self.get("/api/queues/%s/aq" % q(v)), lambda x: x.get("operator_policy") is None)
        self.assertEqual(got["effective_policy_definition"], {"max-length": 3, "message-ttl": 60000})


@unittest.skipUnless(WARREN, "Warren's own: RabbitMQ matches in the request's own process "
                              "with Erlang's re and its 10,000,000-step limit")
class CatastrophicPatternTest(PolicyTest):
    """Issue 17, item 1: a policy pattern that backtracks catastrophically on
    the vhost's names ('a' * 230 + 'b%05d') must not stop the broker. The PUT
    answers at once, the policy is applied in slices while AMQP on another
    vhost keeps answering, a name on which the pattern reaches the match
    limit counts as not matching (logged once per policy), and the fields
    of GET /api/queues and /api/exchanges say what was applied. The bounds
    are generous (seconds); before the fix each PUT took 40-100 s and every
    connection waited with it."""
    NAMES = ["a" * 230 + "b%05d" % i for i in range(300)]
    PATTERNS = ("(a+)+$", "(a|aa)+$", "(.*a){12}$")
    SLOW = 5.0

    def setUp(self):
        super().setUp()
        self.v, other = self.vhost(), self.vhost()
        c = h.connect(vhost=self.v)
        self._conns.append(c)
        ch = c.channel()
        for n in self.NAMES:
            ch.queue_declare(n)
        for n in self.NAMES[:10]:
            ch.exchange_declare(n, "fanout")
        probe = h.connect(vhost=other)
        self._conns.append(probe)
        self.probe = probe.channel()
        self.probe.queue_declare("probe")
        self.worst = 0.0

    def round_trip(self):
        t = time.monotonic()
        self.probe.queue_declare("probe", passive=True)
        self.worst = max(self.worst, time.monotonic() - t)

    def put(self, name, pattern, max_length, priority):
        t = time.monotonic()
        self.put_policy(self.v, name, {"pattern": pattern, "definition": {"max-length": max_length},
                                       "apply-to": "all", "priority": priority})
        self.assertLess(time.monotonic() - t, self.SLOW, "the PUT answers before the work is done")

    def applied(self, want, count=len(NAMES)):
        """Probes AMQP until every queue's policy and max-length is want(name)."""
        def check():
            self.round_trip()
            qs = self.get("/api/queues/" + q(self.v))
            return len(qs) == count and all(
                (x["policy"], x["effective_policy_definition"].get("max-length")) == want(x["name"])
                for x in qs)
        self.assertTrue(poll(check), "the policies were not applied")

    def test_issue_reproduction(self):
        for i, pattern in enumerate(self.PATTERNS):
            self.put("p1", pattern, 100, 1)
            self.round_trip()
            # a marker every name matches: once it shows everywhere, the
            # catastrophic pattern has been tried on every name too
            self.put("m", "^a+b0", 1000 + i, 0)
            self.applied(lambda name, i=i: ("m", 1000 + i))
        self.assertLess(self.worst, self.SLOW, "an AMQP round trip waited for the policies")
        lines = [l for l in h._shared["proc"].log_lines
                 if "policy 'p1' in vhost '%s'" % self.v in l and "reached the match limit" in l]
        self.assertEqual(len(lines), 3, "once per policy, not per name")
        # exchanges show the marker too (p1 matched none of them)
        xs = {x["name"]: x.get("policy") for x in self.get("/api/exchanges/" + q(self.v))}
        self.assertEqual([xs[n] for n in self.NAMES[:10]], ["m"] * 10)
        self.assertNotIn("amq.direct", [n for n, pol in xs.items() if pol])
        # patterns that match apply where they should, and reading them
        # back matches nothing again
        self.put("p1", "b0000[0-4]$", 100, 1)
        self.applied(lambda name: ("p1", 100) if name[-5:] < "00005" else ("m", 1002))
        t = time.monotonic()
        xs = {x["name"]: x.get("policy") for x in self.get("/api/exchanges/" + q(self.v))}
        self.assertLess(time.monotonic() - t, 1.0)
        self.assertEqual([xs[n] for n in self.NAMES[:10]], ["p1"] * 5 + ["m"] * 5)
        x = self.get("/api/exchanges/%s/%s" % (q(self.v), q(self.NAMES[7])))
        self.assertEqual(x["policy"], "m")

    def test_definitions_import_and_warrenctl_take_the_same_path(self):
        t = time.monotonic()
        self.ok("POST", "/api/definitions/" + q(self.v), {"policies": [
            {"name": "p1", "pattern": "(a|aa)+$", "apply-to": "all", "priority": 1,
             "definition": {"max-length": 100}},
            {"name": "m", "pattern": "^a+b0", "apply-to": "all", "priority": 0,
             "definition": {"max-length": 1005}}]})
        self.assertLess(time.monotonic() - t, self.SLOW, "the import answers before the work is done")
        self.applied(lambda name: ("m", 1005))
        from test_warrenctl import warrenctl_bin
        ctl = [warrenctl_bin(), "--socket", h.control_socket()]
        for args in (["set_policy", "-p", self.v, "p1", "(.*a){12}$", '{"max-length":100}',
                      "--priority", "1"],
                     ["set_policy", "-p", self.v, "m", "^a+b0", '{"max-length":1006}'],
                     ["clear_policy", "-p", self.v, "p1"]):
            t = time.monotonic()
            p = subprocess.run(ctl + args, capture_output=True, text=True, timeout=30)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertLess(time.monotonic() - t, self.SLOW)
            self.round_trip()
        self.applied(lambda name: ("m", 1006))
        self.assertLess(self.worst, self.SLOW, "an AMQP round trip waited for the policies")

    def test_a_queue_declared_after_the_put_gets_the_policy(self):
        c = h.connect(vhost=self.v)
        self._conns.append(c)
        ch = c.channel()
        self.put("p1", "(a+)+$", 100, 1)
        self.put("m", "^a+b0", 7, 0)
        name = "a" * 230 + "b09999"
        ch.queue_declare(name)  # while the others are still being visited
        got = self.get("/api/queues/%s/%s" % (q(self.v), q(name)))
        self.assertEqual((got["policy"], got["effective_policy_definition"]), ("m", {"max-length": 7}))
        self.applied(lambda n: ("m", 7), count=len(self.NAMES) + 1)


class OverviewTest(PolicyTest):
    CHURN = ("channel_closed", "channel_created", "connection_closed", "connection_created",
             "queue_created", "queue_declared", "queue_deleted")

    def test_churn_rates_count(self):
        before = self.get("/api/overview")["churn_rates"]
        for k in self.CHURN:
            self.assertIsInstance(before[k], int, k)
            self.assertIsInstance(before[k + "_details"]["rate"], (int, float), k)
        c = h.connect()
        ch = c.channel()
        name = ch.queue_declare("", exclusive=True).method.queue
        ch.queue_delete(name)
        c.close()
        after = until(lambda: self.get("/api/overview")["churn_rates"],
                     lambda a: a["connection_closed"] > before["connection_closed"])
        for k in self.CHURN:
            self.assertGreater(after[k], before[k], k)

    def test_non_administrator_sees_its_own(self):
        v = self.vhost()
        self.ok("PUT", "/api/queues/%s/q1" % q(v), {})
        m = self.user("management")
        self.grant(v, m)
        mine = self.get("/api/overview", **self.as_user(m))
        self.assertEqual(mine["object_totals"]["queues"], 1)
        self.assertEqual(mine["object_totals"]["exchanges"], 7)
        self.assertEqual(mine["object_totals"]["connections"], 0)
        for k in ("node", "listeners", "contexts"):
            self.assertNotIn(k, mine)
        self.assertNotIn("consumers", mine["object_totals"])
        self.assertIn("churn_rates", mine)
        mon = self.user("monitoring")
        theirs = self.get("/api/overview", **self.as_user(mon))
        self.assertGreaterEqual(theirs["object_totals"]["exchanges"], 14)
        self.assertIn("consumers", theirs["object_totals"])
        self.assertIn("listeners", theirs)


class NodeTest(PolicyTest):
    def test_fields(self):
        c = h.connect()
        self.addCleanup(c.close)
        n = self.get("/api/nodes")[0]
        for k in ("sockets_used", "sockets_total", "fd_used", "fd_total", "mem_used", "disk_free", "uptime",
                  "processors", "connection_created", "queue_declared"):
            self.assertIsInstance(n[k], int, k)
        for k in ("sockets_used", "fd_used", "mem_used", "disk_free", "channel_created"):
            self.assertIsInstance(n[k + "_details"]["rate"], (int, float), k)
        self.assertIsInstance(n["os_pid"], str)
        self.assertGreaterEqual(n["sockets_used"], 1, "this test's own connection")
        self.assertLessEqual(n["sockets_total"], n["fd_total"])
        self.assertIn("PLAIN", [m["name"] for m in n["auth_mechanisms"] if m["enabled"]])
        self.assertEqual((n["partitions"], n["cluster_links"]), ([], []))
        self.assertEqual(n["contexts"][0]["description"], "RabbitMQ Management")


class HealthTest(PolicyTest):
    def check(self, path, status, body):
        r = request("GET", "/api/health/checks/" + path)
        self.assertEqual(r.status, status, r.body[:300])
        if body is not None:
            self.assertEqual(r.json(), body)
        return r.json()

    def test_listeners(self):
        host, port = h.broker_address()
        self.check("port-listener/%d" % port, 200, {"status": "ok", "port": port})
        b = self.check("port-listener/1", 503, None)
        self.assertEqual((b["status"], b["reason"], b["missing"]), ("failed", "No active listener", 1))
        self.assertIn(port, b["ports"])
        self.error(request("GET", "/api/health/checks/port-listener/abc"), 400, "bad_request", "Invalid port")
        for p in ("amqp", "amqp091", "AMQP0-9-1"):
            self.check("protocol-listener/" + p, 200, {"status": "ok", "protocol": "amqp"})
        self.check("protocol-listener/management", 200, {"status": "ok", "protocol": "http"})
        b = self.check("protocol-listener/mqtt-none", 503, None)
        self.assertEqual((b["reason"], b["missing"]), ("No active listener", "mqtt-none"))
        self.assertIn("amqp", b["protocols"])

    def test_single_node_and_certificates(self):
        for c in ("node-is-quorum-critical", "node-is-mirror-sync-critical"):
            self.check(c, 200, {"status": "ok", "reason": "single node cluster"})
        self.check("certificate-expiration/1/weeks", 200, {"status": "ok"})
        self.error(request("GET", "/api/health/checks/certificate-expiration/x/days"), 400, "bad_request",
                   "Invalid expiration value.")
        self.error(request("GET", "/api/health/checks/certificate-expiration/1/eons"), 400, "bad_request",
                   "Time unit not recognised. Supported units: days, weeks, months, years.")

    def test_alarms_and_vhosts(self):
        for c in ("alarms", "local-alarms", "virtual-hosts"):
            self.check(c, 200, {"status": "ok"})

    def test_aliveness(self):
        v = self.vhost()
        self.assertEqual(self.get("/api/aliveness-test/" + q(v)), {"status": "ok"})
        self.error(request("GET", "/api/aliveness-test/" + h.unique("novh")), 404, "Object Not Found", "Not Found")
        m = self.user("management")
        self.error(request("GET", "/api/aliveness-test/" + q(v), **self.as_user(m)), 401, "not_authorised",
                   "User not authorised to access virtual host")


if __name__ == "__main__":
    unittest.main()
