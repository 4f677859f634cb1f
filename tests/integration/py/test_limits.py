"""Limits: vhost limits (max-connections, max-queues) and user limits
(max-connections, max-channels) through /api/vhost-limits and
/api/user-limits and enforced on real clients, with RabbitMQ 3.10's reply
codes and texts; connection_max, consumer_max_per_channel, channel_max,
frame_max and max_message_size refusals with their counters and log lines.

The API and enforcement tests were checked against RabbitMQ 3.10.8
(WARREN_TEST_TARGET=127.0.0.1:5672 WARREN_TEST_MGMT=127.0.0.1:15672);
the counters ("refused" in /api/overview, warren_refused_total) and the
own-broker tests are Warren's.
"""
import http.client
import socket
import time
import unittest

import pika
from pika import exceptions as pex

import harness as h
from test_mgmt import q, request
from test_mgmt_access import WARREN, AccessTest

NOT_ADMIN = "Not administrator user"


def refused_open(**kw):
    """The text of the 530 that refuses connection.open (pika reports it as
    a probable access denial)."""
    try:
        c = h.connect(**kw)
    except pex.ProbableAccessDeniedError as e:
        return str(e)
    c.close()
    raise AssertionError("connection.open was not refused")


class LimitsTest(AccessTest):
    def vhost_limits(self, v):
        return self.get("/api/vhost-limits/" + q(v))

    def put_limit(self, kind, who, name, value, status=204, **kw):
        return self.ok("PUT", "/api/%s/%s/%s" % (kind, q(who), name), {"value": value}, status=status, **kw)

    def refused_put(self, kind, who, name, body, status, error, reason):
        self.error(request("PUT", "/api/%s/%s/%s" % (kind, q(who), name), body), status, error, reason)

    def conn(self, **kw):
        """A connection closed before tearDown deletes the vhosts."""
        c = h.connect(**kw)
        self._conns.append(c)
        return c

    def grant_user(self, vh, user):
        self.grant(vh, user)
        return {"user": user, "password": "pw", "vhost": vh}


# ---------------------------------------------------------------- vhost limits

class VhostLimitsApiTest(LimitsTest):
    def test_put_get_list_delete(self):
        v = self.vhost()
        self.assertEqual(self.vhost_limits(v), [])
        self.put_limit("vhost-limits", v, "max-connections", 5)
        self.put_limit("vhost-limits", v, "max-queues", 3)
        want = {"vhost": v, "value": {"max-connections": 5, "max-queues": 3}}
        self.assertEqual(self.vhost_limits(v), [want])
        self.assertIn(want, self.get("/api/vhost-limits"))
        # stored as RabbitMQ stores them: the runtime parameter (vhost-limits, limits)
        self.assertEqual(self.get("/api/parameters/vhost-limits/%s/limits" % q(v)),
                         {"value": want["value"], "vhost": v, "component": "vhost-limits", "name": "limits"})
        self.put_limit("vhost-limits", v, "max-queues", -1)  # no limit, kept as given
        self.assertEqual(self.vhost_limits(v)[0]["value"], {"max-connections": 5, "max-queues": -1})
        self.ok("DELETE", "/api/vhost-limits/%s/max-connections" % q(v), status=204)
        self.ok("DELETE", "/api/vhost-limits/%s/max-connections" % q(v), status=204)
        self.ok("DELETE", "/api/vhost-limits/%s/max-queues" % q(v), status=204)
        # RabbitMQ keeps the parameter with [] once the last limit is cleared
        self.assertEqual(self.vhost_limits(v), [])
        self.assertIn({"vhost": v, "value": []}, self.get("/api/vhost-limits"))

    def test_bad_values_and_names(self):
        v = self.vhost()
        failed = "Validation failed\n\n%s\n"
        self.refused_put("vhost-limits", v, "max-queues", {"value": "x"}, 400, "bad_request",
                         failed % 'max-queues should be a number, actually was <<"x">>')
        self.refused_put("vhost-limits", v, "max-queues", {"value": 1.5}, 400, "bad_request",
                         failed % "max-queues should be a number, actually was 1.5")
        self.refused_put("vhost-limits", v, "max-queues", {"value": None}, 400, "bad_request",
                         failed % "max-queues should be a number, actually was null")
        self.refused_put("vhost-limits", v, "max-foo", {"value": 1}, 400, "bad_request",
                         failed % 'Unrecognised terms [{<<"max-foo">>,1}] in limits')
        self.refused_put("vhost-limits", v, "max-queues", {"valu": 1}, 400, "bad_request",
                         "[{key_missing,value}]")
        self.refused_put("vhost-limits", "no-such-vhost-lim", "max-queues", {"value": 1}, 404, "not_found",
                         "vhost_not_found")
        self.error(request("GET", "/api/vhost-limits/no-such-vhost-lim"), 404, "Object Not Found", "Not Found")
        self.assertEqual(self.vhost_limits(v), [])

    def test_who_may(self):
        v, other = self.vhost(), self.vhost()
        self.put_limit("vhost-limits", other, "max-queues", 4)
        mgmt, mon = self.user("management"), self.user("monitoring")
        self.grant(v, mgmt)
        for u in (mgmt, mon):
            self.error(request("PUT", "/api/vhost-limits/%s/max-queues" % q(v), {"value": 1}, **self.as_user(u)),
                       401, "not_authorised", NOT_ADMIN)
            self.error(request("DELETE", "/api/vhost-limits/%s/max-queues" % q(v), **self.as_user(u)),
                       401, "not_authorised", NOT_ADMIN)
        # management sees the vhosts it has permissions in; monitoring all
        self.error(request("GET", "/api/vhost-limits/" + q(other), **self.as_user(mgmt)), 401, "not_authorised",
                   "User not authorised to access virtual host")
        self.assertNotIn(other, [x["vhost"] for x in self.get("/api/vhost-limits", **self.as_user(mgmt))])
        self.assertEqual(self.get("/api/vhost-limits/" + q(other), **self.as_user(mon)),
                         [{"vhost": other, "value": {"max-queues": 4}}])
        self.assertIn(other, [x["vhost"] for x in self.get("/api/vhost-limits", **self.as_user(mon))])
        nobody = self.user("")
        self.error(request("GET", "/api/vhost-limits", **self.as_user(nobody)), 401, "not_authorised",
                   "Not management user")


class VhostLimitsEnforcedTest(LimitsTest):
    def test_max_connections(self):
        v = self.vhost()
        self.put_limit("vhost-limits", v, "max-connections", 1)
        first = h.connect(vhost=v)
        text = refused_open(vhost=v)
        self.assertIn("(530) \"NOT_ALLOWED - access to vhost '%s' refused for user 'guest': "
                      "connection limit (1) is reached\"" % v, text)
        first.close()
        h.connect(vhost=v).close()  # its place is free again
        self.put_limit("vhost-limits", v, "max-connections", 0)  # 0: none allowed
        self.assertIn("connection limit (0) is reached", refused_open(vhost=v))
        self.ok("DELETE", "/api/vhost-limits/%s/max-connections" % q(v), status=204)
        h.connect(vhost=v).close()

    def test_max_queues(self):
        v = self.vhost()
        self.put_limit("vhost-limits", v, "max-queues", 1)
        c = self.conn(vhost=v)
        ch = c.channel()
        ch.queue_declare("lim-q1")
        ch.queue_declare("lim-q1")  # redeclaring is not a new queue
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            ch.queue_declare("lim-q2")
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text),
                         (406, "PRECONDITION_FAILED - cannot declare queue 'lim-q2': queue limit in vhost '%s' (1) "
                               "is reached" % v))
        ch = c.channel()
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:  # server-named and exclusive count too
            ch.queue_declare("", exclusive=True)
        self.assertEqual(cm.exception.reply_code, 406)
        ch = c.channel()
        ch.queue_delete("lim-q1")
        ch.queue_declare("lim-q2")

    def test_set_through_parameters_and_definitions(self):
        v = self.vhost()
        self.ok("PUT", "/api/parameters/vhost-limits/%s/limits" % q(v), {"value": {"max-queues": 0}}, status=201)
        c = self.conn(vhost=v)
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            c.channel().queue_declare("lim-none")
        self.assertIn("queue limit in vhost '%s' (0) is reached" % v, cm.exception.reply_text)
        defs = self.get("/api/definitions/" + q(v))
        self.assertIn({"value": {"max-queues": 0}, "vhost": v, "component": "vhost-limits", "name": "limits"},
                      defs["parameters"])
        w = self.vhost()
        self.ok("POST", "/api/definitions/" + q(w), {"parameters": defs["parameters"]}, status=(200, 204))
        self.assertEqual(self.vhost_limits(w), [{"vhost": w, "value": {"max-queues": 0}}])


# ---------------------------------------------------------------- user limits

class UserLimitsApiTest(LimitsTest):
    def test_put_get_list_delete(self):
        u = self.user()
        self.assertEqual(self.get("/api/user-limits/" + q(u)), [])
        self.put_limit("user-limits", u, "max-connections", 3)
        self.put_limit("user-limits", u, "max-channels", 7)
        want = {"user": u, "value": {"max-channels": 7, "max-connections": 3}}
        self.assertEqual(self.get("/api/user-limits/" + q(u)), [want])
        self.assertIn(want, self.get("/api/user-limits"))
        self.assertEqual(self.get("/api/users/" + q(u))["limits"], want["value"])
        # a change of password or tags keeps them
        self.ok("PUT", "/api/users/" + q(u), {"password": "pw", "tags": "management"}, status=204)
        self.assertEqual(self.get("/api/users/" + q(u))["limits"], want["value"])
        self.ok("DELETE", "/api/user-limits/%s/max-channels" % q(u), status=204)
        self.ok("DELETE", "/api/user-limits/%s/max-channels" % q(u), status=204)
        self.assertEqual(self.get("/api/user-limits/" + q(u)), [{"user": u, "value": {"max-connections": 3}}])
        self.ok("DELETE", "/api/user-limits/%s/max-connections" % q(u), status=204)
        self.assertEqual(self.get("/api/user-limits/" + q(u)), [])
        self.assertEqual(self.get("/api/users/" + q(u))["limits"], {})

    def test_bad_values(self):
        u = self.user()
        self.refused_put("user-limits", u, "max-channels", {"value": "x"}, 400, "bad_request",
                         'max-channels should be a number, actually was <<"x">>')
        self.refused_put("user-limits", u, "max-foo", {"value": 1}, 400, "bad_request",
                         'Unrecognised terms [{<<"max-foo">>,1}] in user-limits')
        self.refused_put("user-limits", u, "max-channels", {"valu": 1}, 400, "bad_request", "[{key_missing,value}]")
        self.refused_put("user-limits", "no-such-user-lim", "max-channels", {"value": 1}, 400, "bad_request",
                         ["no_such_user", "no-such-user-lim"])
        self.error(request("GET", "/api/user-limits/no-such-user-lim"), 404, "Object Not Found", "Not Found")

    def test_who_may(self):
        u, mgmt = self.user(), self.user("management")
        self.put_limit("user-limits", u, "max-channels", 2)
        self.error(request("PUT", "/api/user-limits/%s/max-channels" % q(u), {"value": 1}, **self.as_user(mgmt)),
                   401, "not_authorised", NOT_ADMIN)
        # RabbitMQ shows every user's limits to any management user
        self.assertEqual(self.get("/api/user-limits/" + q(u), **self.as_user(mgmt)),
                         [{"user": u, "value": {"max-channels": 2}}])


class UserLimitsEnforcedTest(LimitsTest):
    def test_max_connections(self):
        v, u = self.vhost(), self.user()
        who = self.grant_user(v, u)
        self.put_limit("user-limits", u, "max-connections", 1)
        first = h.connect(**who)
        self.assertIn("(530) \"NOT_ALLOWED - connection refused for user '%s': user connection limit (1) "
                      "is reached\"" % u, refused_open(**who))
        h.connect(vhost=v).close()  # another user is not counted
        first.close()
        h.connect(**who).close()

    def test_limits_come_before_the_access_check(self):
        v, u = self.vhost(), self.user()
        self.put_limit("vhost-limits", v, "max-connections", 0)
        self.put_limit("user-limits", u, "max-connections", 0)
        who = {"user": u, "password": "pw"}
        # RabbitMQ's order: the vhost's limit, the user's, then permissions (u has none anywhere)
        self.assertIn("access to vhost '%s' refused for user '%s': connection limit (0)" % (v, u),
                      refused_open(vhost=v, **who))
        self.assertIn("connection refused for user '%s': user connection limit (0)" % u,
                      refused_open(vhost="/", **who))

    def test_max_channels_over_the_users_connections(self):
        v, u = self.vhost(), self.user()
        who = self.grant_user(v, u)
        self.put_limit("user-limits", u, "max-channels", 2)
        a, b = self.conn(**who), self.conn(**who)
        a.channel()
        ch = b.channel()
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            b.channel()
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text),
                         (530, "NOT_ALLOWED - number of channels opened for user '%s' has reached the maximum "
                               "allowed user limit of (2)" % u))
        self.assertFalse(ch.is_open)
        a.channel()  # b's channels are gone: room for one more

    def test_definitions_round_trip(self):
        u = self.user()
        self.put_limit("user-limits", u, "max-connections", 4)
        row = next(x for x in self.get("/api/definitions")["users"] if x["name"] == u)
        self.assertEqual(row["limits"], {"max-connections": 4})
        row = dict(row, limits={"max-channels": 9})
        self.ok("POST", "/api/definitions", {"users": [row]}, status=(200, 204))
        both = [{"user": u, "value": {"max-channels": 9, "max-connections": 4}}]
        self.assertEqual(self.get("/api/user-limits/" + q(u)), both, "the ones given are set, the others kept")
        if WARREN:  # RabbitMQ answers a bad limit in an import with a 500 (its crash)
            bad = dict(row, limits={"max-channels": "lots"})
            r = request("POST", "/api/definitions", {"users": [bad]})
            self.assertEqual(r.status, 400, r.body)
            self.assertIn("max-channels should be a number", r.json()["reason"])
            self.assertEqual(self.get("/api/user-limits/" + q(u)), both)


# ---------------------------------------------------------------- counters and node limits (Warren's)

class OwnBroker:
    """A private Warren with `settings`, its API and its log."""

    def __init__(self, test, *settings):
        self.proc = h.WarrenProcess(settings)
        self.addr = self.proc.start()
        test.addCleanup(self.proc.stop)

    def api(self, method, path, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port, timeout=10)
        return request(method, path, body, conn=c)

    def refused(self):
        return self.api("GET", "/api/overview").json()["refused"]

    def log_count(self, text):
        """How many log lines hold `text`, once at least one does (or 10 s)."""
        self.proc.wait_log(text)
        return self.proc.log_count(text)

    def metric(self, kind):
        c = http.client.HTTPConnection("127.0.0.1", self.proc.prometheus_port, timeout=10)
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
        c.close()
        line = 'warren_refused_total{kind="%s"} ' % kind
        return int(next(x for x in body.splitlines() if x.startswith(line))[len(line):])


def wait_until(fn, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.05)
    return fn()


@unittest.skipUnless(WARREN, "Warren's counters and settings")
class CountersTest(unittest.TestCase):
    def test_vhost_limits_counted_and_logged_once_a_second(self):
        b = OwnBroker(self)
        r = b.api("PUT", "/api/vhost-limits/%2F/max-queues", {"value": 0})
        self.assertEqual(r.status, 204)
        c = h.connect(b.addr)
        self.addCleanup(c.close)
        for i in range(20):  # a client repeating the refused declare
            with self.assertRaises(pex.ChannelClosedByBroker):
                c.channel().queue_declare("spam%d" % i)
        self.assertEqual(b.refused()["queues_refused_vhost_limit"], 20)
        self.assertEqual(b.metric("queues_refused_vhost_limit"), 20)
        logged = b.log_count("queue limit (0) reached")
        self.assertTrue(1 <= logged <= 3, logged)  # the 20 came within a second or two
        b.api("PUT", "/api/vhost-limits/%2F/max-connections", {"value": 1})
        refused_open(addr=b.addr)
        self.assertEqual(b.refused()["connections_refused_vhost_limit"], 1)
        self.assertTrue(wait_until(lambda: b.log_count("connection limit (1) reached") == 1))

    def test_user_limits_counted(self):
        b = OwnBroker(self)
        b.api("PUT", "/api/user-limits/guest/max-channels", {"value": 1})
        c = h.connect(b.addr)
        c.channel()
        with self.assertRaises(pex.ConnectionClosedByBroker):
            c.channel()
        b.api("PUT", "/api/user-limits/guest/max-connections", {"value": 0})
        refused_open(addr=b.addr)
        got = b.refused()
        self.assertEqual((got["channels_refused_user_limit"], got["connections_refused_user_limit"]), (1, 1))
        self.assertEqual(b.log_count("user 'guest' channel limit (1) reached"), 1)

    def test_connection_max_closes_at_accept(self):
        b = OwnBroker(self, "connection_max=2")
        kept = [h.connect(b.addr), h.connect(b.addr)]
        self.addCleanup(lambda: [c.close() for c in kept])
        s = socket.create_connection(b.addr, timeout=5)
        try:
            s.sendall(h.PROTOCOL_HEADER)
            got = s.recv(100)
        except ConnectionResetError:  # closed with our header unread
            got = b""
        s.close()
        self.assertEqual(got, b"", "closed at once, before connection.start")
        self.assertEqual(b.refused()["connections_refused_connection_max"], 1)
        self.assertEqual(b.log_count("connection_max (2) reached"), 1)
        kept.pop().close()
        self.assertTrue(wait_until(lambda: self._opens(b.addr)))

    @staticmethod
    def _opens(addr):
        try:
            h.connect(addr).close()
            return True
        except pex.AMQPConnectionError:
            return False

    def test_consumer_max_per_channel(self):
        b = OwnBroker(self, "consumer_max_per_channel=2")
        c = h.connect(b.addr)
        ch = c.channel()
        ch.queue_declare("cq", exclusive=True)
        ch.basic_consume("cq", lambda *a: None)
        ch.basic_consume("cq", lambda *a: None)
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            ch.basic_consume("cq", lambda *a: None)
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text),
                         (530, "NOT_ALLOWED - reached maximum (2) of consumers per channel"))
        self.assertEqual(b.refused()["consumers_refused_channel_limit"], 1)

    def test_management_body_size(self):
        b = OwnBroker(self, "management.http.max_body_size=1024")
        r = b.api("PUT", "/api/vhosts/big", {"description": "x" * 2000})
        self.assertEqual((r.status, r.json()["reason"]), (400, "Exceeded HTTP request body size limit"))
        got = b.refused()
        self.assertEqual(got["http_requests_refused_max_body_size"], 1)
        for kind in ("http_connections_refused_max_connections", "http_connections_evicted",
                     "http_head_timeouts", "http_body_timeouts"):
            self.assertEqual(got[kind], 0, kind)
        self.assertEqual(b.metric("http_requests_refused_max_body_size"), 1)
        self.assertEqual(b.log_count("over management.http.max_body_size (1024)"), 1)

    def test_channel_max_frame_max_and_message_size(self):
        b = OwnBroker(self, "max_message_size=1000")
        with h.RawClient(b.addr) as raw:
            raw.handshake(channel_max=1)
            raw.open_channel(1)
            raw.send_method(2, pika.spec.Channel.Open())
            raw.expect_connection_close(530)
        with h.RawClient(b.addr) as raw:
            raw.handshake(frame_max=4096)
            raw.open_channel(1)
            raw.send_frame(h.FRAME_BODY, 1, b"x" * 5000)
            raw.expect_connection_close(501)
        c = h.connect(b.addr)
        self.addCleanup(c.close)
        ch = c.channel()
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            ch.basic_publish("", "nowhere", b"x" * 2000)
            ch.queue_declare("", exclusive=True)  # a round trip to see the close
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text),
                         (406, "PRECONDITION_FAILED - message size 2000 is larger than configured max size 1000"))
        got = b.refused()
        self.assertEqual((got["channels_refused_channel_max"], got["frames_refused_frame_max"],
                          got["messages_refused_max_message_size"]), (1, 1, 1))
        for text in ("channel_max (1) reached", "frame over frame_max", "over max_message_size (1000)"):
            self.assertEqual(b.log_count(text), 1, text)


if __name__ == "__main__":
    unittest.main()
