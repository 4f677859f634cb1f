"""The management API's vhosts, users, permissions, topic permissions and
whoami, and who may see what (RabbitMQ's authorisation of API requests).

Every expectation was checked against RabbitMQ 3.10.8 (run with
WARREN_TEST_TARGET=127.0.0.1:5672), except where a test is marked Warren's
own: there RabbitMQ answers 500 or changes half of what it was asked to.
"""
import base64
import contextlib
import time
import unittest

from pika import exceptions as pex

import harness as h
from test_mgmt import q, request

WARREN = h.TARGET is None
FULL = {"configure": ".*", "write": ".*", "read": ".*"}


def basic(user, password):
    return "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()


class AccessTest(unittest.TestCase):
    """Fresh vhosts and users per test, deleted afterwards."""

    def setUp(self):
        self._vhosts, self._users, self._conns = [], [], []

    def tearDown(self):
        for c in self._conns:
            with contextlib.suppress(Exception):
                c.close()
        for v in self._vhosts:
            request("DELETE", "/api/vhosts/" + q(v))
        for u in self._users:
            request("DELETE", "/api/users/" + q(u))

    def ok(self, method, path, body=None, status=(200, 201, 204), **kw):
        r = request(method, path, body, **kw)
        wanted = status if isinstance(status, tuple) else (status,)
        self.assertIn(r.status, wanted, (method, path, r.body[:300]))
        return r

    def get(self, path, **kw):
        return self.ok("GET", path, status=200, **kw).json()

    def error(self, r, status, error, reason=None):
        self.assertEqual(r.status, status, r.body[:300])
        body = r.json()
        self.assertEqual(sorted(body), ["error", "reason"], body)
        self.assertEqual(body["error"], error, body)
        if reason is not None:
            self.assertEqual(body["reason"], reason, body)
        return body

    def vhost(self, body=None, grant=True):
        name = h.unique("mgmt-access-vh")
        self._vhosts.append(name)
        self.ok("PUT", "/api/vhosts/" + q(name), body or {}, status=201)
        return name

    def user(self, tags="", password="pw"):
        name = h.unique("mgmt-access-u")
        self._users.append(name)
        self.ok("PUT", "/api/users/" + q(name), {"password": password, "tags": tags}, status=201)
        return name

    def grant(self, vh, user, **perms):
        self.ok("PUT", "/api/permissions/%s/%s" % (q(vh), q(user)), dict(FULL, **perms))

    def closed_by_broker(self, c, seconds=5):
        """The ConnectionClosedByBroker that c gets within `seconds`."""
        deadline = time.monotonic() + seconds
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            while time.monotonic() < deadline:
                c.process_data_events(time_limit=0.1)
        return cm.exception

    def as_user(self, user, password="pw"):
        return {"auth": basic(user, password)}


class VhostTest(AccessTest):
    def test_put_creates_201_then_updates_204(self):
        v = self.vhost({"description": "d1", "tags": "a, b"})
        got = self.get("/api/vhosts/" + q(v))
        self.assertEqual((got["name"], got["description"], got["tags"], got["tracing"]),
                         (v, "d1", ["a", "b"], False))
        self.assertEqual(got["metadata"], {"description": "d1", "tags": ["a", "b"]})
        self.assertEqual(got["default_queue_type"], "undefined")
        self.assertIn(v, [x["name"] for x in self.get("/api/vhosts")])
        self.ok("PUT", "/api/vhosts/" + q(v), {"tags": ["x", "y"]}, status=204)
        got = self.get("/api/vhosts/" + q(v))
        self.assertEqual((got["description"], got["tags"]), ("", ["x", "y"]),
                         "an update replaces description and tags")

    def test_tracing_changes_only_when_given(self):
        v = self.vhost({"tracing": True})
        self.assertTrue(self.get("/api/vhosts/" + q(v))["tracing"])
        self.ok("PUT", "/api/vhosts/" + q(v), {"description": "x"}, status=204)
        self.assertTrue(self.get("/api/vhosts/" + q(v))["tracing"])
        self.ok("PUT", "/api/vhosts/" + q(v), {"tracing": "false"}, status=204)
        self.assertFalse(self.get("/api/vhosts/" + q(v))["tracing"])
        self.error(request("PUT", "/api/vhosts/" + q(v), {"tracing": "yes"}), 400, "bad_request")

    def test_default_queue_type_is_set_on_create_only(self):
        v = self.vhost({"defaultqueuetype": "quorum"})
        got = self.get("/api/vhosts/" + q(v))
        self.assertEqual(got["default_queue_type"], "quorum")
        self.assertEqual(got["metadata"]["default_queue_type"], "quorum")
        self.ok("PUT", "/api/vhosts/" + q(v), {"defaultqueuetype": "classic"}, status=204)
        self.assertEqual(self.get("/api/vhosts/" + q(v))["default_queue_type"], "quorum")

    @unittest.skipUnless(WARREN, "RabbitMQ 3.10 reads only 'defaultqueuetype' and answers 500 for a bad type")
    def test_default_queue_type_field_name_and_validation(self):
        v = self.vhost({"default_queue_type": "stream"})
        self.assertEqual(self.get("/api/vhosts/" + q(v))["default_queue_type"], "stream")
        name = h.unique("mgmt-access-vh")
        self._vhosts.append(name)
        self.error(request("PUT", "/api/vhosts/" + q(name), {"defaultqueuetype": "bogus"}), 400, "bad_request")
        self.error(request("PUT", "/api/vhosts/" + q(name), {"description": 5}), 400, "bad_request")
        self.error(request("PUT", "/api/vhosts/" + q(name), {"tags": 5}), 400, "bad_request")
        self.assertEqual(request("GET", "/api/vhosts/" + q(name)).status, 404)

    def test_bad_bodies(self):
        name = h.unique("mgmt-access-vh")
        self._vhosts.append(name)
        self.error(request("PUT", "/api/vhosts/" + q(name), b'"str"'), 400, "bad_request",
                   "invalid payload: the request body JSON-decoded to a string. Is the input doubly-JSON-encoded?")
        self.error(request("PUT", "/api/vhosts/" + q(name), b"{x"), 400, "bad_request")
        self.assertEqual(request("GET", "/api/vhosts/" + q(name)).status, 404)

    def test_delete_204_then_404(self):
        v = self.vhost()
        self.ok("DELETE", "/api/vhosts/" + q(v), status=204)
        self.error(request("GET", "/api/vhosts/" + q(v)), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", "/api/vhosts/" + q(v)), 404, "Object Not Found", "Not Found")

    def test_creator_gets_full_permissions(self):
        v = self.vhost()
        self.assertEqual(self.get("/api/vhosts/%s/permissions" % q(v)),
                         [dict(FULL, user="guest", vhost=v)])
        self.assertEqual(self.get("/api/vhosts/%s/topic-permissions" % q(v)), [])
        c = h.connect(vhost=v)
        self._conns.append(c)
        self.assertTrue(c.is_open)

    def test_vhost_permission_lists_of_unknown_vhost_404(self):
        nv = h.unique("mgmt-access-novh")
        for p in ("permissions", "topic-permissions"):
            self.error(request("GET", "/api/vhosts/%s/%s" % (q(nv), p)), 404, "Object Not Found")

    def test_delete_closes_connections(self):
        v = self.vhost()
        c = h.connect(vhost=v)
        self._conns.append(c)
        self.ok("DELETE", "/api/vhosts/" + q(v), status=204)
        self.assertEqual(self.closed_by_broker(c).reply_code, h.CONNECTION_FORCED)

    def test_vhost_connections_and_channels(self):
        v = self.vhost()
        c = h.connect(vhost=v)
        self._conns.append(c)
        c.channel()
        conns = []
        for _ in range(60):  # RabbitMQ lists them after its next statistics round
            conns = self.get("/api/vhosts/%s/connections" % q(v))
            chans = self.get("/api/vhosts/%s/channels" % q(v))
            if conns and chans:
                break
            time.sleep(0.25)
        self.assertEqual([x["vhost"] for x in conns], [v])
        self.assertEqual([x["vhost"] for x in chans], [v])


class UserTest(AccessTest):
    def test_put_get_list_delete(self):
        u = self.user("monitoring,custom")
        got = self.get("/api/users/" + q(u))
        self.assertEqual((got["name"], got["tags"], got["hashing_algorithm"], got["limits"]),
                         (u, ["monitoring", "custom"], "rabbit_password_hashing_sha256", {}))
        self.assertEqual(len(got["password_hash"]), 48)
        self.assertIn(u, [x["name"] for x in self.get("/api/users")])
        self.ok("PUT", "/api/users/" + q(u), {"password": "pw2", "tags": ["administrator"]}, status=204)
        self.assertEqual(self.get("/api/users/" + q(u))["tags"], ["administrator"])
        self.assertEqual(request("GET", "/api/whoami", **self.as_user(u, "pw")).status, 401)
        self.assertEqual(self.get("/api/whoami", **self.as_user(u, "pw2")), {"name": u, "tags": ["administrator"]})
        self.ok("DELETE", "/api/users/" + q(u), status=204)
        self.error(request("GET", "/api/users/" + q(u)), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", "/api/users/" + q(u)), 404, "Object Not Found", "Not Found")

    @unittest.skipUnless(WARREN, "Warren's lists all page; RabbitMQ 3.10 ignores ?page= here")
    def test_paged_list(self):
        u = self.user()
        page = self.get("/api/users?page=1&page_size=100&name=" + q(u))
        self.assertEqual([x["name"] for x in page["items"]], [u])

    def test_password_hash_kept_and_logs_in(self):
        name = h.unique("mgmt-access-u")
        self._users.append(name)
        hsh = "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy"  # "guest", exported from RabbitMQ
        self.ok("PUT", "/api/users/" + q(name), {"password_hash": hsh, "tags": "management",
                                                 "hashing_algorithm": "rabbit_password_hashing_sha256"},
                status=201)
        self.assertEqual(self.get("/api/users/" + q(name))["password_hash"], hsh)
        self.assertEqual(self.get("/api/whoami", **self.as_user(name, "guest"))["tags"], ["management"])

    def test_put_errors(self):
        name = h.unique("mgmt-access-u")
        self._users.append(name)
        p = "/api/users/" + q(name)
        self.error(request("PUT", p, {"password": "x"}), 400, "bad_request", "tags_not_present")
        self.error(request("PUT", p, {"password": "x", "password_hash": "", "tags": ""}), 400, "bad_request",
                   "both_password_and_password_hash_are_provided")
        b = self.error(request("PUT", p, {"password_hash": "abc", "tags": ""}), 400, "bad_request")
        self.assertEqual(b["reason"], ["not_base64", "abc"])
        self.assertEqual(request("GET", p).status, 404)

    @unittest.skipUnless(WARREN, "RabbitMQ answers 500, or keeps the unknown algorithm")
    def test_put_errors_warren(self):
        name = h.unique("mgmt-access-u")
        self._users.append(name)
        p = "/api/users/" + q(name)
        self.error(request("PUT", p, {"password": 5, "tags": ""}), 400, "bad_request")
        self.error(request("PUT", p, {"password": "x", "tags": 5}), 400, "bad_request")
        self.error(request("PUT", p, {"password_hash": "bw==", "hashing_algorithm": "bogus", "tags": ""}), 400,
                   "bad_request")
        self.assertEqual(request("GET", p).status, 404)

    def test_without_password_cannot_log_in(self):
        # RabbitMQ gives a new user a random password here, Warren none:
        # either way nobody logs in with it
        name = h.unique("mgmt-access-u")
        self._users.append(name)
        self.ok("PUT", "/api/users/" + q(name), {"tags": "administrator"}, status=201)
        for pw in ("", "pw"):
            self.error(request("GET", "/api/whoami", **self.as_user(name, pw)), 401, "not_authorized", "Login failed")

    def test_update_without_password_clears_it(self):
        u = self.user("management")
        self.ok("PUT", "/api/users/" + q(u), {"tags": "management"}, status=204)
        self.assertEqual(self.get("/api/users/" + q(u))["password_hash"], "")
        self.error(request("GET", "/api/whoami", **self.as_user(u)), 401, "not_authorized", "Login failed")

    def test_without_permissions(self):
        u, u2 = self.user(), self.user()
        self.grant(self.vhost(), u2)
        names = [x["name"] for x in self.get("/api/users/without-permissions")]
        self.assertIn(u, names)
        self.assertNotIn(u2, names)

    def test_bulk_delete(self):
        us = [self.user() for _ in range(3)]
        self.ok("POST", "/api/users/bulk-delete", {"users": us[:2]}, status=204)
        for u in us[:2]:
            self.assertEqual(request("GET", "/api/users/" + q(u)).status, 404)
        self.get("/api/users/" + q(us[2]))

    def test_bulk_delete_errors(self):
        self.error(request("POST", "/api/users/bulk-delete", {}), 400, "bad_request", "[{key_missing,users}]")
        nu = h.unique("mgmt-access-nou")
        b = self.error(request("POST", "/api/users/bulk-delete", {"users": [nu]}), 400, "bad_request")
        self.assertEqual(b["reason"], ["no_such_user", nu])

    @unittest.skipUnless(WARREN, "RabbitMQ deletes the users before the unknown one")
    def test_bulk_delete_with_an_unknown_user_deletes_nothing(self):
        u = self.user()
        r = request("POST", "/api/users/bulk-delete", {"users": [u, h.unique("mgmt-access-nou")]})
        self.error(r, 400, "bad_request")
        self.get("/api/users/" + q(u))

    def test_user_permission_lists(self):
        u, v = self.user(), self.vhost()
        self.grant(v, u, configure="^c")
        self.assertEqual(self.get("/api/users/%s/permissions" % q(u)),
                         [dict(FULL, configure="^c", user=u, vhost=v)])
        self.assertEqual(self.get("/api/users/%s/topic-permissions" % q(u)), [])
        nu = h.unique("mgmt-access-nou")
        for p in ("permissions", "topic-permissions"):
            self.error(request("GET", "/api/users/%s/%s" % (q(nu), p)), 404, "Object Not Found")

    def test_whoami_lists_every_tag(self):
        u = self.user("management,custom-tag")
        self.assertEqual(self.get("/api/whoami", **self.as_user(u)), {"name": u, "tags": ["management", "custom-tag"]})

    def test_delete_user_closes_its_connections(self):
        u, v = self.user(), self.vhost()
        self.grant(v, u)
        c = h.connect(vhost=v, user=u, password="pw")
        self._conns.append(c)
        self.ok("DELETE", "/api/users/" + q(u), status=204)
        e = self.closed_by_broker(c)
        self.assertEqual((e.reply_code, e.reply_text),
                         (h.CONNECTION_FORCED, "CONNECTION_FORCED - user '%s' is deleted" % u))


    @unittest.skipUnless(WARREN, "RabbitMQ's names are binaries: a NUL is one more byte there")
    def test_a_name_with_a_nul_names_nobody(self):
        u, v = self.user(), self.vhost()
        self.grant(v, u)
        cut = q(u) + "%00x"
        self.assertEqual(request("GET", "/api/users/" + cut).status, 404)
        self.assertEqual(request("DELETE", "/api/users/" + cut).status, 404)
        self.error(request("PUT", "/api/users/" + cut, {"password": "x", "tags": ""}), 400, "bad_request")
        self.assertEqual(request("GET", "/api/permissions/%s/%s" % (q(v), cut)).status, 404)
        self.assertEqual(request("DELETE", "/api/permissions/%s/%s" % (q(v), cut)).status, 404)
        self.error(request("PUT", "/api/permissions/%s/%s" % (q(v), cut), FULL), 400, "bad_request")
        self.assertEqual(request("DELETE", "/api/vhosts/%s%%00x" % q(v)).status, 404)
        self.error(request("PUT", "/api/vhosts/%s%%00x" % q(v), {}), 400, "bad_request")
        self.get("/api/users/" + q(u))
        self.get("/api/permissions/%s/%s" % (q(v), q(u)))
        self.get("/api/vhosts/" + q(v))


class PermissionTest(AccessTest):
    def test_put_get_delete(self):
        u, v = self.user(), self.vhost()
        p = "/api/permissions/%s/%s" % (q(v), q(u))
        self.ok("PUT", p, {"configure": "^c", "write": "^w", "read": "^r"}, status=201)
        want = {"user": u, "vhost": v, "configure": "^c", "write": "^w", "read": "^r"}
        self.assertEqual(self.get(p), want)
        self.assertIn(want, self.get("/api/permissions"))
        self.ok("PUT", p, {"configure": "", "write": ".*", "read": ""}, status=204)
        self.assertEqual(self.get(p)["write"], ".*")
        self.ok("DELETE", p, status=204)
        self.error(request("GET", p), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", p), 404, "Object Not Found", "Not Found")

    def test_put_errors(self):
        u, v = self.user(), self.vhost()
        p = "/api/permissions/%s/%s" % (q(v), q(u))
        self.error(request("PUT", p, {"configure": ".*"}), 400, "bad_request",
                   "[{key_missing,write},{key_missing,read}]")
        self.error(request("PUT", p, {"configure": "(", "write": "", "read": ""}), 400, "bad_request")
        for bad in ("/api/permissions/%s/%s" % (q(v), q(h.unique("mgmt-access-nou"))),
                    "/api/permissions/%s/%s" % (q(h.unique("mgmt-access-novh")), q(u))):
            self.error(request("PUT", bad, FULL), 400, "bad_request", "vhost_or_user_not_found")
        self.assertEqual(request("GET", p).status, 404)

    def test_change_applies_over_amqp(self):
        u, v = self.user(), self.vhost()
        with self.assertRaises(pex.ProbableAccessDeniedError):
            h.connect(vhost=v, user=u, password="pw")
        self.grant(v, u)
        c = h.connect(vhost=v, user=u, password="pw")
        self._conns.append(c)
        self.assertTrue(c.is_open)


class TopicPermissionTest(AccessTest):
    def test_put_get_delete(self):
        u, v = self.user(), self.vhost()
        p = "/api/topic-permissions/%s/%s" % (q(v), q(u))
        self.error(request("GET", p), 404, "Object Not Found", "Not Found")
        self.ok("PUT", p, {"exchange": "amq.topic", "write": "^a", "read": "^r"}, status=201)
        want = {"user": u, "vhost": v, "exchange": "amq.topic", "write": "^a", "read": "^r"}
        self.assertEqual(self.get(p), [want])
        self.assertEqual(self.get("/api/users/%s/topic-permissions" % q(u)), [want])
        self.assertEqual(self.get("/api/vhosts/%s/topic-permissions" % q(v)), [want])
        self.assertIn(want, self.get("/api/topic-permissions"))
        self.ok("PUT", p, {"exchange": "other", "write": ".*", "read": ".*"}, status=204)
        self.assertEqual(sorted(x["exchange"] for x in self.get(p)), ["amq.topic", "other"])
        # one exchange's row goes by path (a query is ignored); GET ignores the segment
        self.assertEqual(len(self.get(p + "/amq.topic")), 2)
        self.ok("DELETE", p + "/other", status=204)
        self.assertEqual(self.get(p), [want])
        self.ok("DELETE", p + "/no-such-exchange", status=204)
        self.assertEqual(self.get(p), [want])
        self.ok("PUT", p + "/ignored", {"exchange": "other", "write": ".*", "read": ".*"}, status=204)
        self.assertEqual(sorted(x["exchange"] for x in self.get(p)), ["amq.topic", "other"])
        self.ok("DELETE", p + "?exchange=other", status=204)  # all go
        self.error(request("GET", p), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", p + "/amq.topic"), 404, "Object Not Found", "Not Found")
        self.error(request("DELETE", p), 404, "Object Not Found", "Not Found")

    def test_put_errors(self):
        u, v = self.user(), self.vhost()
        p = "/api/topic-permissions/%s/%s" % (q(v), q(u))
        self.error(request("PUT", p, {"write": ".*", "read": ".*"}), 400, "bad_request", "[{key_missing,exchange}]")
        self.error(request("PUT", p, {"exchange": "amq.topic"}), 400, "bad_request",
                   "[{key_missing,write},{key_missing,read}]")
        self.error(request("PUT", p, {"exchange": "amq.topic", "write": "(", "read": ""}), 400, "bad_request")
        bad = "/api/topic-permissions/%s/%s" % (q(h.unique("mgmt-access-novh")), q(u))
        self.error(request("PUT", bad, {"exchange": "x", "write": "", "read": ""}), 400, "bad_request",
                   "vhost_or_user_not_found")
        self.assertEqual(request("GET", p).status, 404)


class AuthorisationTest(AccessTest):
    def test_admin_only_endpoints_refuse_with_401(self):
        u, v = self.user("management,monitoring,policymaker"), self.vhost()
        self.grant(v, u)
        for method, path, body in (("GET", "/api/users", None), ("GET", "/api/users/guest", None),
                                   ("PUT", "/api/users/" + q(h.unique("mgmt-access-u")), {"tags": ""}),
                                   ("POST", "/api/users/bulk-delete", {"users": []}),
                                   ("GET", "/api/users/without-permissions", None),
                                   ("GET", "/api/permissions", None),
                                   ("GET", "/api/permissions/%s/%s" % (q(v), q(u)), None),
                                   ("PUT", "/api/permissions/%s/%s" % (q(v), q(u)), FULL),
                                   ("GET", "/api/topic-permissions", None),
                                   ("PUT", "/api/vhosts/" + q(h.unique("mgmt-access-vh")), {}),
                                   ("DELETE", "/api/vhosts/" + q(v), None),
                                   ("GET", "/api/vhosts/" + q(v), None),
                                   ("GET", "/api/vhosts/%s/permissions" % q(v), None)):
            self.error(request(method, path, body, **self.as_user(u)), 401, "not_authorised",
                       "Not administrator user")
        self.get("/api/vhosts/" + q(v))  # still there

    def test_user_without_tags_is_not_management_user(self):
        u = self.user("")
        self.error(request("GET", "/api/whoami", **self.as_user(u)), 401, "not_authorised", "Not management user")

    def test_management_user_sees_its_vhosts_only(self):
        u, mine, other = self.user("management"), self.vhost(), self.vhost()
        self.grant(mine, u)
        for kind in ("queues", "exchanges"):
            self.ok("PUT", "/api/%s/%s/%s" % (kind, q(other), "hidden"), {})
            self.ok("PUT", "/api/%s/%s/%s" % (kind, q(mine), "shown"), {})
        as_u = self.as_user(u)
        self.assertEqual([x["name"] for x in self.get("/api/vhosts", **as_u)], [mine])
        self.assertEqual({x["vhost"] for x in self.get("/api/queues", **as_u)}, {mine})
        self.assertEqual({x["vhost"] for x in self.get("/api/exchanges", **as_u)}, {mine})
        self.assertEqual({x["vhost"] for x in self.get("/api/bindings", **as_u)}, {mine})
        self.assertEqual([x["name"] for x in self.get("/api/queues/" + q(mine), **as_u)], ["shown"])
        for path in ("/api/queues/" + q(other), "/api/queues/%s/hidden" % q(other), "/api/exchanges/" + q(other),
                     "/api/exchanges/%s/hidden" % q(other), "/api/bindings/" + q(other),
                     "/api/vhosts/%s/connections" % q(other), "/api/vhosts/%s/channels" % q(other),
                     "/api/aliveness-test/" + q(other)):
            self.error(request("GET", path, **as_u), 401, "not_authorised",
                       "User not authorised to access virtual host")
        self.error(request("PUT", "/api/queues/%s/new" % q(other), {}, **as_u), 401, "not_authorised",
                   "User not authorised to access virtual host")
        self.error(request("GET", "/api/queues/" + q(h.unique("mgmt-access-novh")), **as_u), 404, "Object Not Found")

    def test_monitoring_user_lists_every_vhost_but_not_their_contents(self):
        u, v = self.user("monitoring"), self.vhost()
        self.ok("PUT", "/api/queues/%s/hidden" % q(v), {})
        as_u = self.as_user(u)
        self.assertIn(v, [x["name"] for x in self.get("/api/vhosts", **as_u)])
        self.assertNotIn(v, {x["vhost"] for x in self.get("/api/queues", **as_u)})
        self.error(request("GET", "/api/queues/" + q(v), **as_u), 401, "not_authorised",
                   "User not authorised to access virtual host")

    def test_changes_need_the_users_permissions(self):
        # configure c-*, write w-*, read r-*, as over AMQP; administrators too
        u, v = self.user("management"), self.vhost()
        self.grant(v, u, configure="^c-", write="^w-", read="^r-")
        for kind in ("queues", "exchanges"):
            for name in ("r-1", "w-1"):
                self.ok("PUT", "/api/%s/%s/%s" % (kind, q(v), name), {})
        as_u, refused = self.as_user(u), "Access refused."
        self.error(request("PUT", "/api/queues/%s/x" % q(v), {}, **as_u), 401, "not_authorised", refused)
        self.error(request("PUT", "/api/exchanges/%s/x" % q(v), {}, **as_u), 401, "not_authorised", refused)
        self.ok("PUT", "/api/queues/%s/c-q" % q(v), {}, status=201, **as_u)
        self.ok("PUT", "/api/exchanges/%s/c-x" % q(v), {}, status=201, **as_u)
        self.error(request("DELETE", "/api/queues/%s/r-1" % q(v), **as_u), 401, "not_authorised", refused)
        self.error(request("DELETE", "/api/exchanges/%s/r-1" % q(v), **as_u), 401, "not_authorised", refused)
        self.error(request("DELETE", "/api/queues/%s/w-1/contents" % q(v), **as_u), 401, "not_authorised", refused)
        self.ok("DELETE", "/api/queues/%s/r-1/contents" % q(v), status=204, **as_u)
        get = {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}
        self.error(request("POST", "/api/queues/%s/w-1/get" % q(v), get, **as_u), 401, "not_authorised",
                   "ACCESS_REFUSED - access to queue 'w-1' in vhost '%s' refused for user '%s'" % (v, u))
        self.assertEqual(self.ok("POST", "/api/queues/%s/r-1/get" % q(v), get, status=200, **as_u).json(), [])
        pub = {"properties": {}, "routing_key": "k", "payload": "x", "payload_encoding": "string"}
        self.error(request("POST", "/api/exchanges/%s/amq.default/publish" % q(v), pub, **as_u), 400, "bad_request",
                   "403 ACCESS_REFUSED - access to exchange 'amq.default' in vhost '%s' refused for user '%s'" % (v, u))
        self.ok("POST", "/api/exchanges/%s/w-1/publish" % q(v), pub, status=200, **as_u)
        # a binding needs write on its destination and read on its source
        self.error(request("POST", "/api/bindings/%s/e/w-1/q/w-1" % q(v), {"routing_key": "k"}, **as_u), 401,
                   "not_authorised", refused)
        self.error(request("POST", "/api/bindings/%s/e/r-1/q/r-1" % q(v), {"routing_key": "k"}, **as_u), 401,
                   "not_authorised", refused)
        self.ok("POST", "/api/bindings/%s/e/r-1/q/w-1" % q(v), {"routing_key": "k"}, status=201, **as_u)
        self.ok("POST", "/api/bindings/%s/e/r-1/e/w-1" % q(v), {"routing_key": "k"}, status=201)
        self.grant(v, u, configure="^c-", write="^c-", read="^r-")
        self.error(request("DELETE", "/api/bindings/%s/e/r-1/q/w-1/k" % q(v), **as_u), 401, "not_authorised", refused)
        self.error(request("DELETE", "/api/bindings/%s/e/r-1/e/w-1/k" % q(v), **as_u), 401, "not_authorised",
                   refused)
        self.ok("DELETE", "/api/bindings/%s/e/r-1/q/w-1/k" % q(v), status=204)

    def test_administrator_without_permissions_cannot_change_a_vhost(self):
        v = self.vhost()
        self.ok("PUT", "/api/queues/%s/q1" % q(v), {})
        self.ok("DELETE", "/api/permissions/%s/guest" % q(v), status=204)
        self.get("/api/queues/%s/q1" % q(v))  # reading needs no permissions
        for method, path, body in (("PUT", "/api/queues/%s/q2" % q(v), {}), ("DELETE", "/api/queues/%s/q1" % q(v), None),
                                   ("PUT", "/api/exchanges/%s/x" % q(v), {}),
                                   ("POST", "/api/queues/%s/q1/get" % q(v),
                                    {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}),
                                   ("POST", "/api/exchanges/%s/amq.default/publish" % q(v),
                                    {"properties": {}, "routing_key": "q1", "payload": "x", "payload_encoding": "string"})):
            self.error(request(method, path, body), 401, "not_authorised", "Access refused.")

    def test_connections_of_other_users(self):
        mgmt_user, mon, v = self.user("management"), self.user("monitoring"), self.vhost()
        self.grant(v, mgmt_user)
        c = h.connect(vhost=v, client_properties={"connection_name": "mgmt-access-guest"})
        self._conns.append(c)
        c.channel()
        name = None
        for _ in range(60):  # RabbitMQ lists it after its next statistics round
            hits = [x["name"] for x in self.get("/api/connections") if x.get("user_provided_name") == "mgmt-access-guest"]
            if hits:
                name = hits[0]
                break
            time.sleep(0.25)
        self.assertIsNotNone(name)
        as_m = self.as_user(mgmt_user)
        self.assertNotIn(name, [x["name"] for x in self.get("/api/connections", **as_m)])
        self.assertNotIn(name, [x["name"] for x in self.get("/api/vhosts/%s/connections" % q(v), **as_m)])
        self.assertEqual([x for x in self.get("/api/channels", **as_m) if x["connection_details"]["name"] == name], [])
        refused = "User not authorised to access object"
        for method, path in (("GET", "/api/connections/" + q(name)), ("GET", "/api/connections/%s/channels" % q(name)),
                             ("GET", "/api/channels/" + q(name + " (1)")), ("DELETE", "/api/connections/" + q(name))):
            self.error(request(method, path, **as_m), 401, "not_authorised", refused)
        self.assertTrue(c.is_open)
        self.assertIn(name, [x["name"] for x in self.get("/api/connections", **self.as_user(mon))])
        self.get("/api/connections/" + q(name), **self.as_user(mon))

    def conn_named(self, label):
        """The API name of the connection whose client named it `label`
        (RabbitMQ lists it after its next statistics round)."""
        for _ in range(60):
            hits = [x["name"] for x in self.get("/api/connections") if x.get("user_provided_name") == label]
            if hits:
                return hits[0]
            time.sleep(0.25)
        self.fail("connection %s not listed" % label)

    def assert_open(self, c, seconds=1.0):
        """c is still open after the broker had `seconds` to close it."""
        c.process_data_events(time_limit=seconds)
        self.assertTrue(c.is_open)

    def test_monitoring_user_closes_only_its_own_connections(self):
        # Issue 17, item 4: a monitoring user with permissions on one vhost
        # closed another user's connection in another vhost (204, 320).
        mon, other_user, mine, theirs = self.user("monitoring"), self.user(""), self.vhost(), self.vhost()
        self.grant(mine, mon)
        self.grant(theirs, other_user)
        victim = h.connect(vhost=theirs, user=other_user, password="pw",
                           client_properties={"connection_name": "mgmt-access-victim"})
        own = h.connect(vhost=mine, user=mon, password="pw", client_properties={"connection_name": "mgmt-access-mon"})
        self._conns += [victim, own]
        victim_name, own_name = self.conn_named("mgmt-access-victim"), self.conn_named("mgmt-access-mon")
        as_mon = self.as_user(mon)
        self.get("/api/connections/" + q(victim_name), **as_mon)  # monitoring users see it
        self.error(request("DELETE", "/api/connections/" + q(victim_name), **as_mon), 401, "not_authorised",
                   "User not authorised to access object")
        self.assert_open(victim)
        self.ok("DELETE", "/api/connections/" + q(own_name), status=204, headers={"X-Reason": "own"}, **as_mon)
        e = self.closed_by_broker(own)
        self.assertEqual((e.reply_code, e.reply_text), (320, "CONNECTION_FORCED - own"))
        self.ok("DELETE", "/api/connections/" + q(victim_name), status=204)  # an administrator may
        self.assertEqual(self.closed_by_broker(victim).reply_code, 320)

    def test_consumers_are_shown_to_their_user_and_monitoring_users(self):
        mgmt_user, mon, v = self.user("management"), self.user("monitoring"), self.vhost()
        self.grant(v, mgmt_user)
        c = h.connect(vhost=v, client_properties={"connection_name": "mgmt-access-consumer"})
        self._conns.append(c)
        ch = c.channel()
        ch.queue_declare("mgmt-access-q")
        ch.basic_consume("mgmt-access-q", lambda *a: None, consumer_tag="guests")
        mine = h.connect(vhost=v, user=mgmt_user, password="pw")
        self._conns.append(mine)
        mine.channel().basic_consume("mgmt-access-q", lambda *a: None, consumer_tag="mine")
        for _ in range(80):  # until RabbitMQ's statistics name each consumer's user
            if sum(isinstance(x["channel_details"], dict) and "user" in x["channel_details"]
                   for x in self.get("/api/consumers/" + q(v))) == 2:
                break
            time.sleep(0.25)
        def tags(path, who):
            return sorted(x["consumer_tag"] for x in self.get(path, **self.as_user(who)) if x["queue"]["vhost"] == v)

        for path in ("/api/consumers", "/api/consumers/" + q(v)):
            self.assertEqual(tags(path, mgmt_user), ["mine"], path)  # not guest's, though in its vhost
            self.assertEqual(tags(path, mon), ["guests", "mine"], path)  # though without permissions there

    @unittest.skipUnless(WARREN, "RabbitMQ 3.10.8 answers 200 [] (it does not check the vhost there)")
    def test_consumers_of_a_vhost_without_access_401(self):
        # Issue 17, item 5: 200 [] to a user without access to the vhost.
        u, mine, other = self.user("management"), self.vhost(), self.vhost()
        self.grant(mine, u)
        self.error(request("GET", "/api/consumers/" + q(other), **self.as_user(u)), 401, "not_authorised",
                   "User not authorised to access virtual host")
        self.assertEqual(self.get("/api/consumers/" + q(mine), **self.as_user(u)), [])
        self.error(request("GET", "/api/consumers/" + q(h.unique("mgmt-access-novh")), **self.as_user(u)), 404,
                   "Object Not Found")

    def test_aliveness_test_needs_the_users_permissions(self):
        u, v = self.user("management"), self.vhost()
        path, as_u = "/api/aliveness-test/" + q(v), self.as_user(u)
        self.error(request("GET", path, **as_u), 401, "not_authorised", "User not authorised to access virtual host")
        refused = "ACCESS_REFUSED - access to %%s in vhost '%s' refused for user '%s'" % (v, u)
        for perms, what in ((dict(configure="^$"), "queue 'aliveness-test'"), (dict(write=""), "exchange 'amq.default'"),
                            (dict(read=""), "queue 'aliveness-test'")):
            self.grant(v, u, **perms)
            self.error(request("GET", path, **as_u), 401, "not_authorised", refused % what)
        self.grant(v, u)
        self.assertEqual(self.get(path, **as_u), {"status": "ok"})
        self.ok("DELETE", "/api/permissions/%s/guest" % q(v), status=204)
        self.error(request("GET", path), 401, "not_authorised", "Access refused.")  # an administrator too

    def test_own_connections_are_visible(self):
        u, v = self.user("management"), self.vhost()
        self.grant(v, u)
        c = h.connect(vhost=v, user=u, password="pw")
        self._conns.append(c)
        conns = []
        for _ in range(60):
            conns = self.get("/api/connections", **self.as_user(u))
            if conns:
                break
            time.sleep(0.25)
        self.assertEqual([x["user"] for x in conns], [u])
        self.get("/api/connections/" + q(conns[0]["name"]), **self.as_user(u))


if __name__ == "__main__":
    unittest.main()
