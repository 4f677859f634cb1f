"""Failed logins (issue 17 item 18): RabbitMQ 3.10 holds every connection
whose handshake fails -- a refused login, a malformed login response, an
unknown mechanism -- for 3 s before it closes the socket, a brake on
password guessing. Only a refused login of a client that announced
authentication_failure_close hears connection.close 403 (at once; its
close-ok then ends the wait); the rest hear nothing. Recorded from RabbitMQ
3.10.8 with raw sockets; Hold and Malformed run on it too
(WARREN_TEST_TARGET=127.0.0.1:5672).

Warren adds a per-address brake (login_brake.*, README) and a cap on the
connections it holds; Brake and Flood start their own Warren. Bounds are
generous: a hold is checked as "not closed before 2.5 s, closed within 10 s".
"""
import http.client
import socket
import time
import unittest

import pika.spec as S

import harness as h
from test_mgmt import request
from test_paging import rss_kib

HOLD = 3.0    # RabbitMQ's SILENT_CLOSE_DELAY, and Warren's LOGIN_HOLD_MS
EARLY = 0.5   # a hold may look this much shorter (the start-ok's own trip)
LATE = 7.0    # and this much longer on a busy machine
CAP = {"capabilities": {"authentication_failure_close": True}}


def start_ok(r, response, mechanism="PLAIN", props=CAP):
    """Header, start, then start-ok; the time.monotonic() before start-ok."""
    r.send(h.PROTOCOL_HEADER)
    r.expect(S.Connection.Start, 0)
    t0 = time.monotonic()
    r.send_method(0, S.Connection.StartOk(client_properties=props, mechanism=mechanism,
                                          response=response, locale="en_US"))
    return t0


def plain(user, password):
    return b"\0" + user.encode() + b"\0" + password.encode()


class LoginTest(unittest.TestCase):
    def raw(self, addr=None):
        r = h.RawClient(addr)
        self.addCleanup(r.close)
        return r

    def login(self, addr=None):
        """A login that must work, a channel, and a clean close."""
        with h.RawClient(addr) as r:
            r.handshake()
            r.open_channel(1)
            r.close_cleanly()

    def assert_held_silent(self, started):
        """[(client, time.monotonic() before its start-ok, what)]: nothing
        comes, and each socket closes about HOLD s after its start-ok
        (watched at once: the holds overlap)."""
        closed, sent = h.rawamqp.watch_closes([r for r, _, _ in started], HOLD + LATE)
        for r, t0, what in started:
            self.assertEqual(sent[r], b"", "%s: expected silence" % what)
            self.assertIsNotNone(closed[r], "%s: still open" % what)
            self.assertGreaterEqual(closed[r] - t0, HOLD - EARLY,
                                    "%s: closed after %.2f s" % (what, closed[r] - t0))

    def assert_refused_403_then_held(self, r, t0, mechanism="PLAIN"):
        """connection.close 403 at once, then (no close-ok sent) the socket
        closes about HOLD s after t0."""
        f = r.recv_method(timeout=HOLD - EARLY)
        self.assertIsInstance(f.method, S.Connection.Close)
        self.assertEqual((f.method.reply_code, f.method.reply_text),
                         (h.ACCESS_REFUSED, "ACCESS_REFUSED - Login was refused using authentication "
                          "mechanism %s. For details see the broker logfile." % mechanism))
        self.assert_held_silent([(r, t0, "after the 403")])


class Hold(LoginTest):
    def test_wrong_password_with_capability_403_then_held(self):
        r = self.raw()
        self.assert_refused_403_then_held(r, start_ok(r, plain("guest", "wrong")))

    def test_close_ok_ends_the_hold(self):
        r = self.raw()
        start_ok(r, plain("guest", "wrong"))
        r.expect(S.Connection.Close, 0)
        t0 = time.monotonic()
        r.send_method(0, S.Connection.CloseOk())
        self.assertTrue(r.wait_closed(timeout=HOLD - EARLY), "still open after close-ok")
        self.assertLess(time.monotonic() - t0, HOLD - EARLY)

    def test_wrong_password_without_capability_held_silent(self):
        r = self.raw()
        self.assert_held_silent([(r, start_ok(r, plain("guest", "wrong"), props={}), "no capability")])

    def test_amqplain_wrong_password_403_then_held(self):
        r = self.raw()
        t0 = start_ok(r, h.amqplain_response("guest", "wrong"), mechanism="AMQPLAIN")
        self.assert_refused_403_then_held(r, t0, "AMQPLAIN")

    def test_empty_password_is_a_refused_login(self):
        r = self.raw()
        self.assert_refused_403_then_held(r, start_ok(r, plain("guest", "")))

    def test_wrong_method_in_the_handshake_held_silent(self):
        r = self.raw()
        r.send(h.PROTOCOL_HEADER)
        r.expect(S.Connection.Start, 0)
        t0 = time.monotonic()
        r.send_method(0, S.Connection.Open(virtual_host="/"))
        self.assert_held_silent([(r, t0, "connection.open before start-ok")])

    def test_others_are_served_meanwhile(self):
        """The holds are timers, not a pause of the broker: another client
        logs in and works while five refused connections are held."""
        held = [self.raw() for _ in range(5)]
        started = [start_ok(r, plain("guest", "wrong"), props={}) for r in held]
        t0 = started[-1]
        self.login()
        self.assertLess(time.monotonic() - t0, HOLD - EARLY, "served only after the holds")
        self.assert_held_silent([(r, t, "held meanwhile") for r, t in zip(held, started)])


class Malformed(LoginTest):
    """A malformed response is a syntax error, not a refused login: silence
    even for a client with authentication_failure_close. All at once, so the
    holds overlap."""

    CASES = [
        ("PLAIN", b""),                               # php-amqplib with an empty password
        ("PLAIN", b"guestguest"),                     # no NUL
        ("PLAIN", b"\0guest"),                        # one NUL
        ("PLAIN", b"guest\0guest"),                   # one NUL, inside
        ("PLAIN", b"guest\0guest\0guest"),            # an authorization identity
        ("PLAIN", b"\0guest\0guest\0x"),              # a NUL in the password
        ("AMQPLAIN", b"\x05garbage"),                 # not a table
        ("AMQPLAIN", b""),                            # empty: no LOGIN, no PASSWORD
        ("AMQPLAIN", h.rawamqp.shortstr(b"PASSWORD") + b"S" + h.rawamqp.longstr(b"guest")),
        ("FOO", plain("guest", "guest")),             # an unknown mechanism
        ("EXTERNAL", b""),                            # not offered
    ]

    def test_malformed_responses_held_silent(self):
        started = []
        for mechanism, response in self.CASES:
            r = self.raw()
            started.append((r, start_ok(r, response, mechanism), "%s %r" % (mechanism, response)))
        self.assert_held_silent(started)

    def test_php_amqplib_plain_auth_passwordless_must_fail(self):
        """php-amqplib's ConnectionAuthTest: a user whose password_hash is
        empty cannot log in; the library, given an empty password, sends an
        empty PLAIN response (announcing authentication_failure_close) and
        expects its read to time out, not a 403. With a password set, the
        same user logs in."""
        user = h.unique("php")
        path = "/api/users/" + user
        self.addCleanup(request, "DELETE", path)
        body = {"password_hash": "", "tags": "", "hashing_algorithm": "rabbit_password_hashing_sha256"}
        self.assertIn(request("PUT", path, body).status, (201, 204))
        perms = {"configure": "", "write": ".*", "read": ".*"}
        self.assertIn(request("PUT", "/api/permissions/%2F/" + user, perms).status, (201, 204))
        r = self.raw()
        start_ok(r, b"", props={"product": "AMQPLib", "capabilities": {
            "authentication_failure_close": True, "publisher_confirms": True,
            "consumer_cancel_notify": True, "exchange_exchange_bindings": True,
            "basic.nack": True, "connection.blocked": True}})
        with self.assertRaises(socket.timeout):  # php-amqplib's AMQPTimeoutException
            r.recv_method(timeout=HOLD - EARLY)
        self.assertIn(request("PUT", path, {"password": "password", "tags": ""}).status, (201, 204))
        with h.RawClient() as ok:
            ok.handshake(user=user, password="password")
            ok.close_cleanly()


@unittest.skipIf(h.TARGET is not None, "needs own broker")
class Brake(LoginTest):
    """Warren's per-address brake. The tests connect from 127.0.0.1, which
    is not braked unless login_brake.loopback = true."""

    def broker(self, *settings):
        proc = h.WarrenProcess(settings)
        addr = proc.start()
        self.addCleanup(proc.stop)
        return proc, addr

    def refuse(self, addr, password="wrong"):
        """A login with `password`; asserts the 403 and ends the hold with
        close-ok. Returns the 403's text."""
        r = self.raw(addr)
        start_ok(r, plain("guest", password))
        close = r.expect_connection_close(h.ACCESS_REFUSED)
        return close.reply_text

    def test_failures_brake_the_address_then_it_ends(self):
        proc, addr = self.broker("login_brake.loopback=true", "login_brake.failures=3",
                                 "login_brake.window=60000", "login_brake.duration=2000")
        self.login(addr)
        for _ in range(3):
            self.refuse(addr)
        self.assertTrue(proc.wait_log("login brake: 3 failed logins from 127.0.0.1 within 60000 ms"),
                        proc.log_tail())
        t0 = time.monotonic()
        self.refuse(addr, password="guest")  # the right password, refused unchecked
        self.assertTrue(proc.wait_log("too many failed logins from 127.0.0.1"),
                        proc.log_tail())
        api = http.client.HTTPConnection("127.0.0.1", proc.mgmt_port, timeout=10)
        refused = request("GET", "/api/overview", conn=api).json()["refused"]  # Warren's counters
        self.assertEqual(refused["logins_refused_login_brake"], 1)
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)) + 0.3)
        self.login(addr)  # the brake is over

    def test_loopback_is_not_braked_by_default(self):
        proc, addr = self.broker("login_brake.failures=2")
        for _ in range(4):
            self.refuse(addr)
        self.login(addr)
        self.assertFalse(any("login brake" in ln for ln in proc.log_lines), proc.log_tail())

    def test_off(self):
        proc, addr = self.broker("login_brake.loopback=true", "login_brake.failures=0")
        for _ in range(4):
            self.refuse(addr)
        self.login(addr)


@unittest.skipIf(h.TARGET is not None, "needs own broker")
class Flood(LoginTest):
    """Many sockets failing their logins at once: at most
    login_brake.max_held are held, the others are closed at once, so memory
    and descriptors stay bounded, and the broker serves others meanwhile."""

    def test_held_connections_are_capped(self):
        proc = h.WarrenProcess(["login_brake.max_held=20", "handshake_timeout=60000"])
        addr = proc.start()
        self.addCleanup(proc.stop)
        rss_before = rss_kib(proc.proc.pid)
        n = 100
        started = []
        for _ in range(n):
            r = self.raw(addr)
            started.append((r, start_ok(r, b"", props={})))  # malformed: held silent
        self.login(addr)  # others are served
        closed, _ = h.rawamqp.watch_closes([r for r, _ in started], HOLD + LATE)
        self.assertNotIn(None, closed.values(), "every one closes")
        held = sum(1 for r, t0 in started if closed[r] - t0 >= HOLD - EARLY)
        self.assertLessEqual(held, 20, proc.log_tail())
        self.assertGreater(held, 0)
        self.assertTrue(proc.wait_log("refused connections are held already"), proc.log_tail())
        self.assertLess(rss_kib(proc.proc.pid) - rss_before, 20 * 1024)


if __name__ == "__main__":
    unittest.main()
