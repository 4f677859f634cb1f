"""The management API's runtime parameters: /api/parameters[/{component}
[/{vhost}[/{name}]]] and /api/global-parameters[/{name}] -- the kept
components (shovels and federation, whose features come later), operator
policies seen and set as parameters, policies shown read-only, RabbitMQ's
validation texts, and who may do what.

Every expectation was checked against RabbitMQ 3.10.8 (run with
WARREN_TEST_TARGET=127.0.0.1:5672; it has the federation and shovel
plugins), except where a test is marked Warren's own.
"""
import unittest

import harness as h
from test_mgmt import q, request
from test_mgmt_access import WARREN, basic
from test_mgmt_policy import PolicyTest, until

UPSTREAM = {"uri": "amqp://localhost:1", "expires": 3600000}
OP_VALUE = {"pattern": "^capped", "definition": {"max-length": 2}, "priority": 1, "apply-to": "queues"}
NOT_AUTHORISED = "User not authorised to access object"


class ParamTest(PolicyTest):
    def path(self, component, vh=None, name=None):
        return "/api/parameters/" + "/".join(q(x) for x in (component, vh, name) if x is not None)

    def put_param(self, component, vh, name, value, status=(201, 204), **kw):
        return self.ok("PUT", self.path(component, vh, name), {"value": value}, status=status, **kw)

    def refused(self, component, vh, value, reason, name="p"):
        body = {"value": value} if value is not None else {}
        return self.error(request("PUT", self.path(component, vh, name), body), 400, "bad_request", reason)

    def global_name(self):
        name = h.unique("params-global")
        self.addCleanup(request, "DELETE", "/api/global-parameters/" + q(name))
        return name


class CrudTest(ParamTest):
    def test_kept_component_put_get_list_delete(self):
        v = self.vhost()
        self.put_param("federation-upstream", v, "up1", UPSTREAM, status=201)
        self.put_param("federation-upstream", v, "up1", UPSTREAM, status=204)
        one = self.get(self.path("federation-upstream", v, "up1"))
        self.assertEqual(list(one), ["value", "vhost", "component", "name"])
        self.assertEqual(one, {"value": UPSTREAM, "vhost": v, "component": "federation-upstream", "name": "up1"})
        self.assertEqual(list(one["value"]), ["expires", "uri"], "keys come sorted, as RabbitMQ shows them")
        self.assertEqual(self.get(self.path("federation-upstream", v)), [one])
        self.assertIn(one, self.get("/api/parameters"))
        self.assertIn(one, self.get("/api/parameters/federation-upstream"))
        self.assertEqual(self.get(self.path("shovel", v)), [])
        self.ok("DELETE", self.path("federation-upstream", v, "up1"), status=204)
        for method in ("GET", "DELETE"):
            self.error(request(method, self.path("federation-upstream", v, "up1")), 404, "Object Not Found",
                       "Not Found")

    def test_list_sorted_by_vhost_then_name(self):
        a, b = sorted((self.vhost(), self.vhost()))
        for vh, name in ((b, "up-a"), (a, "up-c"), (b, "up-c"), (a, "up-b")):
            self.put_param("federation-upstream", vh, name, UPSTREAM)
        mine = [(p["vhost"], p["name"]) for p in self.get("/api/parameters") if p["vhost"] in (a, b)]
        self.assertEqual(mine, [(a, "up-b"), (a, "up-c"), (b, "up-a"), (b, "up-c")])
        self.assertEqual([p["name"] for p in self.get("/api/parameters?sort=name&sort_reverse=true")
                          if p["vhost"] in (a, b)], ["up-c", "up-c", "up-b", "up-a"])
        self.assertEqual(self.get(self.path("federation-upstream", a) + "?columns=name"),
                         [{"name": "up-b"}, {"name": "up-c"}])

    def test_upstream_set_is_a_list(self):
        v = self.vhost()
        self.put_param("federation-upstream-set", v, "set1", [{"upstream": "up1"}], status=201)
        self.assertEqual(self.get(self.path("federation-upstream-set", v, "set1"))["value"], [{"upstream": "up1"}])

    def test_operator_policies_are_parameters(self):
        v = self.vhost()
        self.put_policy(v, "op1", OP_VALUE, kind="operator-policies", status=201)
        got = self.get(self.path("operator_policy", v, "op1"))
        self.assertEqual((got["value"], got["component"]), (OP_VALUE, "operator_policy"))
        self.assertIn(got, self.get("/api/parameters"))
        # set as a parameter: an operator policy that applies at once
        value = dict(OP_VALUE, pattern="^also", priority=2)
        self.put_param("operator_policy", v, "op2", value, status=201)
        self.assertEqual(self.get("/api/operator-policies/%s/op2" % q(v)),
                         dict(value, vhost=v, name="op2"))
        self.ok("PUT", "/api/queues/%s/also.q" % q(v), {})
        qinfo = until(lambda: self.get("/api/queues/%s/also.q" % q(v)), lambda x: x.get("operator_policy") == "op2")
        self.assertEqual(qinfo["effective_policy_definition"], {"max-length": 2})
        self.ok("DELETE", self.path("operator_policy", v, "op2"), status=204)
        self.assertEqual([p["name"] for p in self.get("/api/operator-policies/" + q(v))], ["op1"])

    def test_policies_shown_never_set(self):
        v = self.vhost()
        self.put_policy(v, "pol", {"pattern": "^x", "definition": {"max-length": 5}})
        got = self.get(self.path("policy", v, "pol"))
        self.assertEqual(got["value"], {"pattern": "^x", "definition": {"max-length": 5}, "priority": 0,
                                        "apply-to": "all"})
        self.assertEqual(self.get(self.path("policy", v)), [got])
        self.assertNotIn("policy", [p["component"] for p in self.get("/api/parameters")])
        self.refused("policy", v, {"pattern": "^x", "definition": {"max-length": 5}},
                     "policies may not be set using this method")

    def test_unknown_component(self):
        v = self.vhost()
        self.refused("nosuchcomp", v, {"a": 1}, "Validation failed\n\ncomponent nosuchcomp not found\n")
        self.assertEqual(self.get("/api/parameters/nosuchcomp"), [])
        self.assertEqual(self.get(self.path("nosuchcomp", v)), [])
        for method in ("GET", "DELETE"):
            self.error(request(method, self.path("nosuchcomp", v, "x")), 404, "Object Not Found", "Not Found")

    def test_unknown_vhost(self):
        nv = h.unique("params-novh")
        self.error(request("PUT", self.path("federation-upstream", nv, "u"), {"value": UPSTREAM}),
                   404, "not_found", "vhost_not_found")
        for method, path in (("GET", self.path("federation-upstream", nv)),
                             ("GET", self.path("federation-upstream", nv, "u")),
                             ("DELETE", self.path("federation-upstream", nv, "u"))):
            self.error(request(method, path), 404, "Object Not Found", "Not Found")

    def test_gone_with_their_vhost(self):
        v = self.vhost()
        self.put_param("federation-upstream", v, "up1", UPSTREAM)
        self.ok("DELETE", "/api/vhosts/" + q(v), status=204)
        self.ok("PUT", "/api/vhosts/" + q(v), {}, status=201)
        self.error(request("GET", self.path("federation-upstream", v, "up1")), 404, "Object Not Found")


# (component, value, RabbitMQ 3.10.8's reason); the name is "p"
TEXTS = [
    ("federation-upstream", None, "[{key_missing,value}]"),
    ("federation-upstream", {}, "Validation failed\n\nKey \"uri\" not found in p\n"),
    ("federation-upstream", {"uri": 5}, "Validation failed\n\nuri should be list, actually was 5\n"),
    ("federation-upstream", {"uri": "a"},
     "Validation failed\n\n\"a\" not a valid URI: {{unable_to_parse_uri,no_scheme},\"a\"}\n"),
    ("federation-upstream-set", [{"upstream": 5}], "Validation failed\n\nupstream should be binary, actually was 5\n"),
    ("shovel", {"src-uri": "amqp://", "dest-uri": "amqp://"},
     "Validation failed\n\nMust specify 'src-exchange' or 'src-queue'\n"),
    ("shovel", {"src-uri": 5, "dest-uri": "amqp://", "src-queue": "q"},
     "Validation failed\n\nsrc-uri should be list, actually was 5\n"),
    ("operator_policy", {},
     "Validation failed\n\nKey \"definition\" not found in p\nKey \"pattern\" not found in p\n"
     "Key \"priority\" not found in p\n"),
    ("operator_policy", {"pattern": "x"},
     "Validation failed\n\nKey \"definition\" not found in p\nKey \"priority\" not found in p\n"),
    ("operator_policy", {"pattern": 5, "definition": {"max-length": 1}, "priority": 0},
     "Validation failed\n\npattern should be a binary but was 5\n"),
    ("operator_policy", {"pattern": "x", "definition": {"max-length": 1}, "priority": "a"},
     "Validation failed\n\npriority should be a number, actually was &lt;&lt;\"a\"&gt;&gt;\n"),
    ("operator_policy", {"pattern": "x", "definition": {"bogus": 5}},
     "Validation failed\n\n[{&lt;&lt;\"bogus\"&gt;&gt;,5}] are not recognised policy settings\n"
     "Key \"priority\" not found in p\n"),
    ("operator_policy", {"pattern": "x", "definition": {"dead-letter-exchange": "x"}, "priority": 0},
     "Validation failed\n\n[{&lt;&lt;\"dead-letter-exchange\"&gt;&gt;,&lt;&lt;\"x\"&gt;&gt;}] are not recognised "
     "policy settings\n"),
    ("operator_policy", {"pattern": "x", "definition": [], "priority": 0}, "Validation failed\n\nno policy provided\n"),
    ("operator_policy", {"pattern": "x", "definition": {"max-length": -1}, "priority": 0},
     "Validation failed\n\n-1 is not a valid maximum length\n"),
    ("operator_policy", {"pattern": "x", "definition": {"max-length": 1}, "priority": 0, "extra": 1},
     "Validation failed\n\nUnrecognised terms [{&lt;&lt;\"extra\"&gt;&gt;,1}] in p\n"),
    ("operator_policy", "str", "Validation failed\n\np not a list &lt;&lt;\"str\"&gt;&gt;\n"),
    ("operator_policy", [1],
     "Validation failed\n\nUnrecognised terms [1] in p\nKey \"definition\" not found in p\n"
     "Key \"pattern\" not found in p\nKey \"priority\" not found in p\n"),
]


class ValidationTest(ParamTest):
    def test_rabbitmq_texts(self):
        v = self.vhost()
        for component, value, reason in TEXTS:
            with self.subTest(component=component, value=value):
                self.refused(component, v, value, reason)
        self.assertEqual([p for p in self.get("/api/parameters") if p["vhost"] == v], [])
        self.assertEqual(self.get("/api/operator-policies/" + q(v)), [])

    def test_pattern_error_and_apply_to(self):
        v = self.vhost()
        b = self.refused("operator_policy", v, {"pattern": "(", "definition": {"max-length": 1}, "priority": 0}, None)
        self.assertTrue(b["reason"].startswith("Validation failed\n\npattern should be regular expression but is "
                                               "invalid"), b)
        b = self.refused("operator_policy", v, {"pattern": "x", "definition": {"max-length": 1}, "priority": 0,
                                                "apply-to": "bogus"}, None)
        self.assertTrue(b["reason"].startswith("Validation failed\n\napply-to 'bogus' unrecognised"), b)

    @unittest.skipUnless(WARREN, "Warren's own: RabbitMQ 3.10.8 answers 500 for these")
    def test_warren_refuses_what_rabbitmq_crashes_on(self):
        v = self.vhost()
        self.refused("federation-upstream", v, "x", "Validation failed\n\np not a list &lt;&lt;\"x\"&gt;&gt;\n")
        self.refused("shovel", v, "x", "Validation failed\n\np not a list &lt;&lt;\"x\"&gt;&gt;\n")
        self.refused("federation-upstream-set", v, {"upstream": "u"},
                     "Validation failed\n\np should be list, actually was #{...}\n")
        # RabbitMQ stores a vhost-limits parameter of another name than "limits" and answers 500
        self.refused("vhost-limits", v, {"max-queues": 10},
                     "Validation failed\n\nthe vhost-limits parameter is named 'limits', not 'p'\n")


class WhoMayTest(ParamTest):
    def test_policymaker_in_its_vhosts(self):
        v, other = self.vhost(), self.vhost()
        pm = self.user("policymaker")
        self.grant(v, pm)
        me = self.as_user(pm)
        self.put_param("federation-upstream", v, "mine", UPSTREAM, status=201, **me)
        self.put_param("federation-upstream", other, "theirs", UPSTREAM)
        self.assertEqual(self.get(self.path("federation-upstream", v, "mine"), **me)["name"], "mine")
        self.assertEqual({p["vhost"] for p in self.get("/api/parameters", **me)}, {v})
        self.assertEqual({p["vhost"] for p in self.get("/api/parameters/federation-upstream", **me)}, {v})
        for method, path, body in (("PUT", self.path("federation-upstream", other, "x"), {"value": UPSTREAM}),
                                   ("GET", self.path("federation-upstream", other), None),
                                   ("GET", self.path("federation-upstream", other, "theirs"), None),
                                   ("DELETE", self.path("federation-upstream", other, "theirs"), None)):
            self.error(request(method, path, body, **me), 401, "not_authorised", NOT_AUTHORISED)
        self.ok("DELETE", self.path("federation-upstream", v, "mine"), status=204, **me)

    def test_other_tags_refused(self):
        v = self.vhost()
        self.put_param("federation-upstream", v, "up", UPSTREAM)
        for tags in ("management", "monitoring"):
            u = self.user(tags)
            self.grant(v, u)
            me = self.as_user(u)
            for method, path, body in (("GET", "/api/parameters", None),
                                       ("GET", self.path("federation-upstream", v, "up"), None),
                                       ("PUT", self.path("federation-upstream", v, "up"), {"value": UPSTREAM}),
                                       ("GET", "/api/global-parameters", None)):
                self.error(request(method, path, body, **me), 401, "not_authorised", NOT_AUTHORISED)
        none = self.user("")
        self.error(request("GET", "/api/parameters", auth=basic(none, "pw")), 401, "not_authorised",
                   "Not management user")

    @unittest.skipUnless(WARREN, "Warren's own: RabbitMQ 3.10.8 lets any policymaker set operator policies "
                                 "through /api/parameters")
    def test_operator_policy_changes_need_administrator(self):
        v = self.vhost()
        pm = self.user("policymaker")
        self.grant(v, pm)
        me = self.as_user(pm)
        self.error(request("PUT", self.path("operator_policy", v, "op"), {"value": OP_VALUE}, **me),
                   401, "not_authorised", "Not administrator user")
        self.put_param("operator_policy", v, "op", OP_VALUE, status=201)
        self.assertEqual(self.get(self.path("operator_policy", v, "op"), **me)["value"], OP_VALUE)
        self.error(request("DELETE", self.path("operator_policy", v, "op"), **me),
                   401, "not_authorised", "Not administrator user")


class GlobalTest(ParamTest):
    def test_put_get_list_delete(self):
        name = self.global_name()
        self.ok("PUT", "/api/global-parameters/" + q(name), {"value": {"a": {"b": 1}}}, status=201)
        one = self.get("/api/global-parameters/" + q(name))
        self.assertEqual(list(one), ["value", "name"])
        self.assertEqual(one, {"value": {"a": {"b": 1}}, "name": name})
        listed = [p for p in self.get("/api/global-parameters") if p["name"] == name]
        self.assertEqual(listed, [{"name": name, "value": {"a": {"b": 1}}}])
        self.assertEqual(list(listed[0]), ["name", "value"])
        for value in ("str", [1, 2], 5, None):
            self.ok("PUT", "/api/global-parameters/" + q(name), {"value": value}, status=204)
            self.assertEqual(self.get("/api/global-parameters/" + q(name))["value"], value)
        self.error(request("PUT", "/api/global-parameters/" + q(name), {}), 400, "bad_request",
                   "[{key_missing,value}]")
        self.ok("DELETE", "/api/global-parameters/" + q(name), status=204)
        for method in ("GET", "DELETE"):
            self.error(request(method, "/api/global-parameters/" + q(name)), 404, "Object Not Found", "Not Found")

    def test_internal_cluster_id(self):
        ids = [p["value"] for p in self.get("/api/global-parameters") if p["name"] == "internal_cluster_id"]
        self.assertEqual(len(ids), 1)
        self.assertRegex(ids[0], r"^rabbitmq-cluster-id-[A-Za-z0-9_-]{22}$")
        self.assertEqual(self.get("/api/global-parameters/internal_cluster_id")["value"], ids[0])

    def test_policymaker_without_vhosts(self):
        pm = self.user("policymaker")
        me = self.as_user(pm)
        name = self.global_name()
        self.ok("PUT", "/api/global-parameters/" + q(name), {"value": 1}, status=201, **me)
        self.assertEqual(self.get("/api/global-parameters/" + q(name), **me)["value"], 1)
        self.assertEqual(self.get("/api/parameters", **me), [])
        self.ok("DELETE", "/api/global-parameters/" + q(name), status=204, **me)
