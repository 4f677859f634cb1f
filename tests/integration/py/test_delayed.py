"""Delayed exchanges: type x-delayed-message with the x-delayed-type argument
and the x-delay header, as RabbitMQ's rabbitmq-delayed-message-exchange
plugin (its declare errors, its reading of x-delay, x-delay negated on the
message delivered, mandatory returned at once), and what Warren adds: held
messages journaled and kept across a restart and a crash with their
deadline, and counted (messages_delayed in the API, /metrics).

Warren-only: RabbitMQ 3.10 here has no such plugin (Debian packages none).
Timings: a held message must not be there before its delay (checked a
little under it, from before the publish), and must come within a generous
bound; one that is not delayed must be ready for the very next basic.get
(a channel's methods are handled in order)."""
import http.client
import subprocess
import time
import unittest

import pika
from pika import exceptions as pex

import harness as h
from test_mgmt import get as api_get, q as path, request
from test_prometheus import get as prom_get, metrics, promtool, value

EARLY = 0.03  # a deadline may come this much early (coarse clocks)
LATE = 2.0    # and this much late on a busy machine


def delayed_args(kind="direct", **extra):
    a = {"x-delayed-type": kind}
    a.update(extra)
    return a


def props(delay=None, **kw):
    return pika.BasicProperties(headers=None if delay is None else {"x-delay": delay}, **kw)


def wait_get(ch, q, timeout=5.0):
    """basic.get every 10 ms until something comes: (method, props, body)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        m, p, b = ch.basic_get(q, auto_ack=True)
        if m:
            return m, p, b
        time.sleep(0.01)
    raise AssertionError("nothing came to %s within %.1f s" % (q, timeout))


@unittest.skipIf(h.TARGET is not None, "Warren-only")
class DelayedBase(h.BrokerTest):
    def delayed(self, kind="direct", name=None, ch=None, **kw):
        name = name or h.unique("dx")
        (ch or self.ch).exchange_declare(name, "x-delayed-message", arguments=delayed_args(kind),
                                         **kw)
        return self.track_exchange(name)

    def bound_queue(self, x, key="k", **kw):
        q = self.queue()
        self.ch.queue_bind(q, x, key, **kw)
        return q

    def held(self, x):
        return api_get("/api/exchanges/%2F/" + path(x))["messages_delayed"]


class Declare(DelayedBase):
    def declare_error(self, args, kind="x-delayed-message"):
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            self.ch.exchange_declare(h.unique("dx"), kind, arguments=args)
        return cm.exception.reply_code, cm.exception.reply_text

    def test_missing_or_not_a_string_406(self):
        text = ("PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing "
                "exchange type")
        self.assertEqual(self.declare_error({}), (h.PRECONDITION_FAILED, text))
        self.ch = self.conn.channel()
        self.assertEqual(self.declare_error({"x-delayed-type": 5}), (h.PRECONDITION_FAILED, text))

    def test_itself_406(self):
        self.assertEqual(self.declare_error({"x-delayed-type": "x-delayed-message"}),
                         (h.PRECONDITION_FAILED, "PRECONDITION_FAILED - Invalid argument, "
                          "'x-delayed-message' can't be used for 'x-delayed-type'"))

    def test_unknown_type_closes_the_connection_503(self):
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            self.ch.exchange_declare(h.unique("dx"), "x-delayed-message",
                                     arguments={"x-delayed-type": "bogus"})
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text),
                         (h.COMMAND_INVALID, "COMMAND_INVALID - unknown exchange type 'bogus'"))

    def test_redeclare(self):
        x = self.delayed("direct")
        # the plugin leaves equivalence to the x-delayed-type: it is not compared
        self.ch.exchange_declare(x, "x-delayed-message", arguments=delayed_args("topic"))
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            self.ch.exchange_declare(x, "direct")
        self.assertIn("inequivalent arg 'type' for exchange '%s' in vhost '/': received 'direct' "
                      "but current is ''x-delayed-message''" % x, cm.exception.reply_text)

    def test_api_shows_type_arguments_and_count(self):
        x = self.delayed("fanout", durable=True)
        info = api_get("/api/exchanges/%2F/" + path(x))
        self.assertEqual((info["type"], info["arguments"], info["messages_delayed"]),
                         ("x-delayed-message", {"x-delayed-type": "fanout"}, 0))
        self.assertNotIn("messages_delayed", api_get("/api/exchanges/%2F/amq.direct"))


    def test_definitions(self):
        """Exported as declared; an import whose x-delayed-type is missing
        or names no other type is refused before anything changes."""
        x = self.delayed("topic", durable=True)
        exported = [e for e in api_get("/api/definitions")["exchanges"] if e["name"] == x]
        self.assertEqual((exported[0]["type"], exported[0]["arguments"]),
                         ("x-delayed-message", {"x-delayed-type": "topic"}))
        for args in ({}, {"x-delayed-type": "x-delayed-message"}, {"x-delayed-type": "bogus"}):
            bad = h.unique("dx")
            r = request("POST", "/api/definitions", {"exchanges": [
                {"name": bad, "vhost": "/", "type": "x-delayed-message", "durable": True,
                 "auto_delete": False, "internal": False, "arguments": args}]})
            self.assertEqual(r.status, 400, r.body)
            self.assertIn("x-delayed-type must name an exchange type other than x-delayed-message",
                          r.json()["reason"])
            self.assertEqual(request("GET", "/api/exchanges/%2F/" + path(bad)).status, 404)


class Delays(DelayedBase):
    def test_in_deadline_order_with_x_delay_negated(self):
        x = self.delayed()
        q = self.bound_queue(x)
        for body, d in ((b"c", 900), (b"a", 300), (b"b", 600)):
            self.ch.basic_publish(x, "k", body, props(d))
        h.sync(self.ch)
        self.assertIsNone(self.ch.basic_get(q)[0])
        got = [wait_get(self.ch, q, 5) for _ in range(3)]
        self.assertEqual([b for _, _, b in got], [b"a", b"b", b"c"])
        self.assertEqual([p.headers["x-delay"] for _, p, _ in got], [-300, -600, -900])

    def test_not_before_its_delay(self):
        x = self.delayed()
        q = self.bound_queue(x)
        t0 = time.monotonic()
        self.ch.basic_publish(x, "k", b"m", props(700))
        wait_get(self.ch, q, 700 / 1000 + LATE)
        self.assertGreaterEqual(time.monotonic() - t0, 0.7 - EARLY)

    def test_same_deadline_in_publish_order(self):
        x = self.delayed()
        q = self.bound_queue(x)
        for i in range(20):
            self.ch.basic_publish(x, "k", b"%d" % i, props(300))
        got = [wait_get(self.ch, q)[2] for _ in range(20)]
        self.assertEqual(got, [b"%d" % i for i in range(20)])

    def test_routed_at_once_without_a_delay(self):
        """Missing, zero, negative, over 2^32-1 ms, a string that is no
        integer, a boolean: routed at once, x-delay left as it was."""
        x = self.delayed()
        q = self.bound_queue(x)
        for d in (None, 0, -5000, 2 ** 32, "soon", True):
            self.ch.basic_publish(x, "k", b"now", props(d))
            m, p, b = self.ch.basic_get(q, auto_ack=True)
            self.assertEqual(b, b"now", "x-delay %r was delayed" % (d,))
            self.assertEqual((p.headers or {}).get("x-delay"), d)

    def test_string_delay_as_the_plugin(self):
        """A decimal string is read as its integer (floats are truncated:
        tests/unit/test_route_delay.c; pika cannot send one)."""
        x = self.delayed()
        q = self.bound_queue(x)
        self.ch.basic_publish(x, "k", b"s", props("400"))
        h.sync(self.ch)
        self.assertIsNone(self.ch.basic_get(q)[0])
        _, p, b = wait_get(self.ch, q)
        self.assertEqual((b, p.headers["x-delay"]), (b"s", -400))

    def test_routes_as_its_type_topic_and_headers(self):
        t = self.delayed("topic")
        qt = self.bound_queue(t, "a.*")
        self.ch.basic_publish(t, "a.b", b"yes", props(200))
        self.ch.basic_publish(t, "b.a", b"no", props(200))
        hx = self.delayed("headers")
        qh = self.queue()
        self.ch.queue_bind(qh, hx, "", arguments={"x-match": "all", "kind": "k"})
        self.ch.basic_publish(hx, "", b"h", pika.BasicProperties(headers={"x-delay": 200,
                                                                          "kind": "k"}))
        self.assertEqual(wait_get(self.ch, qt)[2], b"yes")
        self.assertEqual(wait_get(self.ch, qh)[2], b"h")
        time.sleep(0.3)
        self.assertIsNone(self.ch.basic_get(qt)[0])

    def test_bindings_at_the_deadline(self):
        x = self.delayed()
        before = self.bound_queue(x)
        self.ch.basic_publish(x, "k", b"m", props(800))
        h.sync(self.ch)
        after = self.queue()
        self.ch.queue_unbind(before, x, "k")
        self.ch.queue_bind(after, x, "k")
        self.assertEqual(wait_get(self.ch, after)[2], b"m")
        self.assertIsNone(self.ch.basic_get(before)[0])

    def test_alternate_exchange_at_the_deadline_only(self):
        ae = self.exchange("fanout")
        qae = self.queue()
        self.ch.queue_bind(qae, ae, "")
        x = h.unique("dx")
        self.ch.exchange_declare(x, "x-delayed-message",
                                 arguments=delayed_args("direct", **{"alternate-exchange": ae}))
        self.track_exchange(x)
        self.ch.basic_publish(x, "nowhere", b"m", props(500))
        h.sync(self.ch)
        self.assertIsNone(self.ch.basic_get(qae)[0], "sent to the alternate exchange at once")
        self.assertEqual(wait_get(self.ch, qae)[2], b"m")

    def test_mandatory_returned_at_once_and_delivered_later(self):
        """The plugin cannot return at the deadline: a held message routed
        to no queue now, so a mandatory publish is returned 312 NO_ROUTE at
        once -- and still delivered when its delay is over."""
        x = self.delayed()
        q = self.bound_queue(x)
        returned = []
        self.ch.add_on_return_callback(lambda ch, m, p, b: returned.append((m.reply_code, b)))
        self.ch.basic_publish(x, "k", b"m", props(500), mandatory=True)
        h.wait_for(self.conn, lambda: returned, timeout=2)
        self.assertEqual(returned, [(h.NO_ROUTE, b"m")])
        self.assertEqual(wait_get(self.ch, q)[2], b"m")

    def test_confirmed(self):
        x = self.delayed(durable=True)
        q = self.bound_queue(x)
        self.ch.confirm_delivery()
        self.ch.basic_publish(x, "k", b"p", props(300, delivery_mode=2))
        self.ch.basic_publish(x, "k", b"t", props(300))
        self.assertEqual([wait_get(self.ch, q)[2] for _ in range(2)], [b"p", b"t"])

    def test_through_an_exchange_binding(self):
        src = self.exchange("direct")
        x = self.delayed()
        self.ch.exchange_bind(x, src, "k")
        q = self.bound_queue(x)
        self.ch.basic_publish(src, "k", b"m", props(300))
        h.sync(self.ch)
        self.assertIsNone(self.ch.basic_get(q)[0])
        self.assertEqual(wait_get(self.ch, q)[2], b"m")

    def test_delete_drops_what_it_holds(self):
        x = self.delayed()
        q = self.bound_queue(x)
        self.ch.basic_publish(x, "k", b"m", props(400))
        h.sync(self.ch)
        self.ch.exchange_delete(x)
        self.ch.exchange_declare(x, "x-delayed-message", arguments=delayed_args())
        self.ch.queue_bind(q, x, "k")
        self.assertEqual(self.held(x), 0)
        time.sleep(0.7)
        self.assertIsNone(self.ch.basic_get(q)[0])


class Counts(DelayedBase):
    def test_api_and_metrics(self):
        x = self.delayed(durable=True)
        self.bound_queue(x)
        for i in range(3):
            self.ch.basic_publish(x, "k", b"m", props(60000, delivery_mode=2 if i else 1))
        h.sync(self.ch)
        self.assertEqual(self.held(x), 3)
        fams = metrics()
        self.assertEqual(value(fams, "warren_exchange_messages_delayed", vhost="/", exchange=x), 3)
        self.assertEqual(fams["warren_exchange_messages_delayed"]["type"], "gauge")
        listed = [e for e in api_get("/api/exchanges/%2F") if e["name"] == x]
        self.assertEqual(listed[0]["messages_delayed"], 3)
        self.ch.exchange_delete(x)
        self.assertIsNone(value(metrics(), "warren_exchange_messages_delayed", exchange=x))

    def test_promtool_clean(self):
        x = self.delayed()
        self.ch.basic_publish(x, "k", b"m", props(60000))
        h.sync(self.ch)
        tool = promtool()
        for p in ("/metrics", "/metrics/per-object"):
            status, _, body = prom_get(p)
            self.assertIn("warren_exchange_messages_delayed{", body)
            r = subprocess.run([tool, "check", "metrics"], input=body.encode(), capture_output=True,
                               timeout=60)
            self.assertEqual((r.returncode, r.stdout + r.stderr), (0, b""), p)


class DeliveryTime(DelayedBase):
    """RabbitMQ's direction (its qq-vNext branch, rabbit_fifo v9, "QQ:
    implement message delays"): a message published to a quorum queue with
    an x-opt-delivery-time header (an integer, ms since the epoch) that lies
    ahead is held until then; classic queues ignore it, as RabbitMQ's."""

    def quorum(self):
        return self.queue(durable=True, arguments={"x-queue-type": "quorum"})

    def publish_at(self, q, at, body=b"m"):
        self.ch.basic_publish("", q, body, pika.BasicProperties(
            headers={"x-opt-delivery-time": at}))

    def test_held_until_its_time(self):
        q = self.quorum()
        t0 = time.monotonic()
        self.publish_at(q, int(time.time() * 1000) + 800, b"later")
        self.publish_at(q, int(time.time() * 1000) - 800, b"past")
        self.publish_at(q, "soon", b"string")
        self.assertEqual([b for _, _, b in h.get_all(self.ch, q)], [b"past", b"string"])
        info = api_get("/api/queues/%2F/" + path(q))
        self.assertEqual((info["messages_delayed"], info["messages_ready"]), (1, 0))
        m, p, b = wait_get(self.ch, q, 0.8 + LATE)
        self.assertEqual(b, b"later")
        self.assertGreaterEqual(time.monotonic() - t0, 0.8 - EARLY - 0.01)

    def test_classic_queue_ignores_it(self):
        q = self.queue()
        self.publish_at(q, int(time.time() * 1000) + 60000)
        self.assertEqual(self.ch.basic_get(q, auto_ack=True)[2], b"m")


@unittest.skipIf(h.TARGET is not None, "Warren-only")
class Durability(h.DataDirTest):
    """Persistent messages held by a durable delayed exchange come back with
    their deadline after SIGTERM and after SIGKILL; transient ones (and a
    non-durable exchange's) do not, as the broker documents."""

    def publish_and_restart(self, delay_ms, kill):
        conn, ch = self.start()
        ch.exchange_declare("dx", "x-delayed-message", durable=True, arguments=delayed_args())
        ch.queue_declare("dq", durable=True)
        ch.queue_bind("dq", "dx", "k")
        t0 = time.monotonic()
        ch.basic_publish("dx", "k", b"late", props(delay_ms, delivery_mode=2))  # confirmed
        ch.basic_publish("dx", "k", b"early", props(delay_ms // 4, delivery_mode=2))
        ch.basic_publish("dx", "k", b"transient", props(delay_ms // 4))
        if kill:
            self.kill()
        else:
            conn.close()
            self.stop()
        conn, ch = self.start()
        return ch, t0

    def check(self, kill):
        """Delayed 2.5 s and 10 s: the restart (well under a second, 2.4 s
        allowed for a sanitizer build on a busy machine) ends before both."""
        delay = 10000
        ch, t0 = self.publish_and_restart(delay, kill)
        self.assertLess(time.monotonic() - t0, 2.4, "the restart took too long for this test")
        self.assertIsNone(ch.basic_get("dq")[0])
        m, p, b = wait_get(ch, "dq", 2.5 + LATE)
        self.assertEqual((b, p.headers["x-delay"]), (b"early", -2500))
        self.assertGreaterEqual(time.monotonic() - t0, 2.5 - EARLY)
        m, p, b = wait_get(ch, "dq", delay / 1000 + LATE)
        self.assertEqual(b, b"late")
        self.assertGreaterEqual(time.monotonic() - t0, delay / 1000 - EARLY)
        self.assertLess(time.monotonic() - t0, delay / 1000 + LATE)  # wall clock across it
        time.sleep(0.3)
        self.assertIsNone(ch.basic_get("dq")[0], "the transient message came back")

    def test_sigterm_keeps_deadline(self):
        self.check(kill=False)

    def test_sigkill_keeps_deadline(self):
        self.check(kill=True)

    def test_delivery_time_kept_across_a_crash(self):
        conn, ch = self.start()
        ch.queue_declare("qq", durable=True, arguments={"x-queue-type": "quorum"})
        t0 = time.monotonic()
        ch.basic_publish("", "qq", b"m", pika.BasicProperties(
            headers={"x-opt-delivery-time": int(time.time() * 1000) + 3000}))
        self.kill()
        conn, ch = self.start()
        self.assertLess(time.monotonic() - t0, 2.5, "the restart took too long for this test")
        self.assertIsNone(ch.basic_get("qq")[0])
        self.assertEqual(wait_get(ch, "qq", 3 + LATE)[2], b"m")
        self.assertGreaterEqual(time.monotonic() - t0, 3 - EARLY)

    def api(self, method, p, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port, timeout=10)
        r = request(method, p, body, conn=c)
        self.assertIn(r.status, (201, 204), (method, p, r.body))

    def dv_topology(self):
        """Vhost dv with a durable delayed exchange bound to a durable queue;
        a confirmed channel on it."""
        self.api("PUT", "/api/vhosts/dv", {})
        self.api("PUT", "/api/permissions/dv/guest", {"configure": ".*", "write": ".*", "read": ".*"})
        ch = h.connect(self.addr, vhost="dv").channel()
        ch.confirm_delivery()
        ch.exchange_declare("dx", "x-delayed-message", durable=True, arguments=delayed_args())
        ch.queue_declare("dq", durable=True)
        ch.queue_bind("dq", "dx", "k")
        return ch

    def test_vhost_delete_drops_what_it_holds(self):
        """The held message of a deleted vhost does not come back into a new
        vhost of the same name after a crash (its journal id is the same)."""
        self.start()
        self.dv_topology().basic_publish("dx", "k", b"m", props(1500, delivery_mode=2))
        self.api("DELETE", "/api/vhosts/dv")
        self.dv_topology().basic_publish("", "dq", b"fence", props(None, delivery_mode=2))
        self.kill()
        self.start()
        ch = h.connect(self.addr, vhost="dv").channel()
        time.sleep(2)
        self.assertEqual([b for _, _, b in h.get_all(ch, "dq")], [b"fence"])

    def test_delivered_once_and_delete_is_kept(self):
        """A delivered message is not held again after a crash, and a
        deleted exchange's messages do not come back."""
        conn, ch = self.start()
        ch.exchange_declare("dx", "x-delayed-message", durable=True, arguments=delayed_args())
        ch.exchange_declare("gone", "x-delayed-message", durable=True, arguments=delayed_args())
        ch.queue_declare("dq", durable=True)
        ch.queue_bind("dq", "dx", "k")
        ch.queue_bind("dq", "gone", "k")
        ch.basic_publish("dx", "k", b"m", props(200, delivery_mode=2))
        ch.basic_publish("gone", "k", b"g", props(300, delivery_mode=2))
        ch.exchange_delete("gone")
        self.assertEqual(wait_get(ch, "dq")[2], b"m")
        ch.basic_publish("", "dq", b"fence", props(None, delivery_mode=2))
        self.kill()
        conn, ch = self.start()
        time.sleep(0.5)
        self.assertEqual([b for _, _, b in h.get_all(ch, "dq")], [b"fence"])


if __name__ == "__main__":
    unittest.main()
