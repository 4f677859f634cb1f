"""Delayed retry: x-delayed-retry-type / -min / -max (RabbitMQ 4.3's
arguments and policy keys) and x-delayed-retry-multiplier (LavinMQ's), on
classic and quorum queues.

Warren-only: RabbitMQ 3.10 has no delayed retry (4.3 has it on quorum
queues only, and counts returns differently, see README), so these run
against Warren alone. A delayed message is neither ready nor unacked: it is
counted in messages_delayed, comes back at its place with its delivery
count, and its deadline survives a restart and a crash (RetryDurability).
Timings are checked with a lower bound a little under the delay, measured
from before the return was sent, and a generous upper bound; a message that
is not delayed must be ready for the very next basic.get (the broker handles
one channel's methods in order), not within some time. Where a test checks
that a message is still held, the delay (DELAY) leaves a busy machine a
second to look."""
import time
import unittest

import pika

import harness as h
from test_mgmt import get as api_get, q as path, request
from test_prometheus import metrics

EARLY = 0.03  # a deadline may come this much early (coarse clocks)
LATE = 1.0    # and this much late on a busy machine
DELAY = 1000  # ms, for tests that look at a message while it is held


def retry_args(kind="failed", lo=300, hi=None, mult=None, **extra):
    a = {"x-delayed-retry-type": kind, "x-delayed-retry-min": lo}
    if hi is not None:
        a["x-delayed-retry-max"] = hi
    if mult is not None:
        a["x-delayed-retry-multiplier"] = mult
    a.update(extra)
    return a


def wait_get(ch, q, since=None, timeout=5.0):
    """basic.get every 10 ms until something comes; (method, props, body,
    seconds since `since`, a time.monotonic() taken before the message was
    returned, or since the wait began)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        m, p, b = ch.basic_get(q)
        if m:
            return m, p, b, time.monotonic() - (t0 if since is None else since)
        time.sleep(0.01)
    raise AssertionError("nothing came back to %s within %.1f s" % (q, timeout))


@unittest.skipIf(h.TARGET is not None, "Warren-only")
class RetryBase(h.BrokerTest):
    def api(self, qname):
        return api_get("/api/queues/%2F/" + path(qname))

    def assert_delay(self, waited, delay_ms):
        self.assertGreaterEqual(waited, delay_ms / 1000 - EARLY, "came back too early")
        self.assertLess(waited, delay_ms / 1000 + LATE, "came back too late")

    def assert_held(self, qname, n=1):
        """Nothing ready, n delayed (and not unacked)."""
        self.assertIsNone(self.ch.basic_get(qname)[0])
        info = self.api(qname)
        self.assertEqual((info["messages_delayed"], info["messages_ready"],
                          info["messages_unacknowledged"]), (n, 0, 0))

    def get_now(self, qname, why):
        """The head, which must be ready at once (not delayed)."""
        m, p, b = self.ch.basic_get(qname)
        self.assertIsNotNone(m, why)
        return m, p, b

    def fail_once(self, qname, requeue_by="reject"):
        """Takes the head and returns it as a failed delivery; the
        time.monotonic() from before the return was sent."""
        m, _, b = self.ch.basic_get(qname)
        self.assertIsNotNone(m)
        t0 = time.monotonic()
        if requeue_by == "reject":
            self.ch.basic_reject(m.delivery_tag, requeue=True)
        else:
            self.ch.basic_nack(m.delivery_tag, requeue=True)
        return t0

    def close_holding(self, qname):
        """Another connection takes the head and closes without a verdict
        (pika's close returns once the broker has answered: the message is
        back or held by then); the time.monotonic() from before the close."""
        c = self.connect()
        m, _, _ = c.channel().basic_get(qname)
        self.assertIsNotNone(m)
        t0 = time.monotonic()
        c.close()
        return t0


class Arguments(RetryBase):
    def declare_error(self, args):
        name = h.unique("retry.bad")
        self.track_queue(name)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.conn.channel().queue_declare, name,
                                      arguments=args)
        return e.reply_text.replace(name, "Q")

    def test_bad_values_406(self):
        pre = "PRECONDITION_FAILED - invalid arg '%s' for queue 'Q' in vhost '/': %s"
        for args, key, why in (
                ({"x-delayed-retry-type": "bogus"}, "x-delayed-retry-type",
                 '{invalid_delayed_retry_type,<<"bogus">>}'),
                ({"x-delayed-retry-type": 5}, "x-delayed-retry-type", "{invalid_delayed_retry_type,5}"),
                ({"x-delayed-retry-min": -1}, "x-delayed-retry-min", "{value_negative,-1}"),
                ({"x-delayed-retry-min": "100"}, "x-delayed-retry-min", '"expected integer, got longstr"'),
                ({"x-delayed-retry-max": -5}, "x-delayed-retry-max", "{value_negative,-5}"),
                ({"x-delayed-retry-multiplier": 0}, "x-delayed-retry-multiplier", "{value_zero,0}"),
                ({"x-delayed-retry-multiplier": -2}, "x-delayed-retry-multiplier",
                 "{value_negative,-2}")):
            self.assertEqual(self.declare_error(args), pre % (key, why))

    def test_accepted_on_classic_and_quorum(self):
        for kind in ("disabled", "all", "failed", "returned"):
            self.queue(arguments=retry_args(kind, hi=1000, mult=2))
            self.queue(durable=True, arguments=retry_args(kind, **{"x-queue-type": "quorum"}))

    def test_redeclare_compares(self):
        name = self.queue(arguments=retry_args(lo=100))
        self.queue(name, arguments=retry_args(lo=100))
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.conn.channel().queue_declare, name,
                                      arguments=retry_args(lo=200))
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-delayed-retry-min' for "
                         "queue '%s' in vhost '/': received '200' but current is '100'" % name)


class Types(RetryBase):
    def test_failed_delays_reject_and_nack_not_close(self):
        qn = self.queue(arguments=retry_args("failed", DELAY))
        for how in ("reject", "nack"):
            self.ch.basic_publish("", qn, b"m")
            t0 = self.fail_once(qn, how)
            self.assert_held(qn)
            m, p, b, waited = wait_get(self.ch, qn, since=t0)
            self.assert_delay(waited, DELAY)
            self.assertEqual((b, m.redelivered, p.headers["x-delivery-count"]), (b"m", True, 1))
            self.ch.basic_ack(m.delivery_tag)
        self.ch.basic_publish("", qn, b"c")
        self.close_holding(qn)
        _, p, _ = self.get_now(qn, "a channel close is not 'failed'")
        self.assertEqual(p.headers["x-delivery-count"], 1)

    def test_returned_delays_close_not_reject(self):
        qn = self.queue(arguments=retry_args("returned", DELAY))
        self.ch.basic_publish("", qn, b"m")
        self.fail_once(qn)
        self.get_now(qn, "a reject is not 'returned'")
        t0 = time.monotonic()
        self.ch.basic_recover(requeue=True)  # the get above, returned without a verdict
        self.assert_held(qn)
        m, p, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, 2 * DELAY)  # its third delivery: min x 2
        self.assertEqual(p.headers["x-delivery-count"], 2)
        self.ch.basic_ack(m.delivery_tag)
        self.ch.basic_publish("", qn, b"c")
        t0 = self.close_holding(qn)
        self.assert_held(qn)
        _, p, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, DELAY)

    def test_all_delays_both(self):
        qn = self.queue(arguments=retry_args("all", DELAY))
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        self.assert_held(qn)
        m, _, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, DELAY)
        self.ch.basic_ack(m.delivery_tag)
        self.ch.basic_publish("", qn, b"c")
        self.close_holding(qn)
        self.assert_held(qn)

    def test_disabled_and_none(self):
        for args in (retry_args("disabled", 500), {"x-delayed-retry-max": 500}):
            qn = self.queue(arguments=args)
            self.ch.basic_publish("", qn, b"m")
            self.fail_once(qn)
            self.get_now(qn, "not delayed")

    def test_min_alone_means_failed(self):
        """LavinMQ enables retries with x-delayed-retry-min alone."""
        qn = self.queue(arguments={"x-delayed-retry-min": DELAY})
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        self.assert_held(qn)
        _, _, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, DELAY)

    def test_quorum_queue(self):
        qn = self.queue(durable=True, arguments=retry_args("failed", DELAY, **{"x-queue-type": "quorum"}))
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        self.assert_held(qn)
        _, p, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, DELAY)
        self.assertEqual(p.headers["x-delivery-count"], 1)


class Backoff(RetryBase):
    def delays(self, qn, n):
        """Fails the message n times; how long each return took."""
        self.ch.basic_publish("", qn, b"m")
        out = []
        m, _, _ = self.ch.basic_get(qn)
        for i in range(n):
            t0 = time.monotonic()
            self.ch.basic_reject(m.delivery_tag, requeue=True)
            m, p, _, waited = wait_get(self.ch, qn, since=t0)
            self.assertEqual(p.headers["x-delivery-count"], i + 1)
            out.append(waited)
        return out

    def test_linear_capped_by_max(self):
        qn = self.queue(arguments=retry_args("failed", 150, hi=400))
        for waited, want in zip(self.delays(qn, 4), (150, 300, 400, 400)):
            self.assert_delay(waited, want)

    def test_multiplier(self):
        qn = self.queue(arguments=retry_args("failed", 100, hi=700, mult=2))
        for waited, want in zip(self.delays(qn, 4), (100, 200, 400, 700)):
            self.assert_delay(waited, want)

    def test_multiplier_one_is_constant(self):
        qn = self.queue(arguments=retry_args("failed", 200, mult=1))
        for waited in self.delays(qn, 3):
            self.assert_delay(waited, 200)


class Order(RetryBase):
    def test_back_at_its_place_others_go_on(self):
        """a and b fail; c is delivered meanwhile; a and b come back before d."""
        qn = self.queue(arguments=retry_args("failed", DELAY))
        for b in (b"a", b"b", b"c", b"d"):
            self.ch.basic_publish("", qn, b)
        ma, _, _ = self.ch.basic_get(qn)
        mb, _, _ = self.ch.basic_get(qn)
        self.ch.basic_reject(mb.delivery_tag, requeue=True)
        self.ch.basic_reject(ma.delivery_tag, requeue=True)
        mc, _, bc = self.ch.basic_get(qn, auto_ack=True)
        self.assertEqual(bc, b"c")  # at once, while a and b wait
        self.assertEqual(self.wait_count(qn, 3), 3)  # a and b back
        got = [(b, p.headers["x-delivery-count"] if p.headers else 0)
               for _, p, b in h.get_all(self.ch, qn)]
        self.assertEqual(got, [(b"a", 1), (b"b", 1), (b"d", 0)])

    def test_consumers_not_held_back(self):
        """A poison message delayed 2 s while 50 good ones flow: they all
        arrive before it comes back."""
        qn = self.queue(arguments=retry_args("failed", 2 * DELAY))
        c = self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=1)
        seen = []

        def cb(ch, m, p, b):
            seen.append((b, time.monotonic()))
            ch.basic_reject(m.delivery_tag, requeue=True) if b == b"poison" else ch.basic_ack(m.delivery_tag)
        ch.basic_consume(qn, cb)
        self.ch.basic_publish("", qn, b"poison")
        for i in range(50):
            self.ch.basic_publish("", qn, b"good%d" % i)
        h.wait_for(c, lambda: len(seen) >= 52, timeout=2 * DELAY / 1000 + 5)
        bodies = [b for b, _ in seen]
        self.assertEqual(bodies[0], b"poison")
        self.assertEqual(bodies[1:51], [b"good%d" % i for i in range(50)])
        self.assertEqual(bodies[51], b"poison")  # the good ones did not wait for it
        self.assertGreaterEqual(seen[51][1] - seen[0][1], 2 * DELAY / 1000 - EARLY)


class Limits(RetryBase):
    def test_delivery_limit_comes_first(self):
        dlq = self.queue()
        qn = self.queue(arguments=retry_args("failed", DELAY, **{
            "x-delivery-limit": 1, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
        self.ch.basic_publish("", qn, b"m")
        self.fail_once(qn)
        self.assert_held(qn)
        m, _, _, _ = wait_get(self.ch, qn)
        self.ch.basic_reject(m.delivery_tag, requeue=True)  # its second return: over the limit
        m, p, b = self.ch.basic_get(dlq)
        self.assertIsNotNone(m, "dead-lettered at once, not delayed")
        self.assertEqual((b, p.headers["x-first-death-reason"]), (b"m", "delivery_limit"))
        info = self.api(qn)
        self.assertEqual((info["messages_delayed"], info["delivery_limit_dead_letters"]), (0, 1))

    def test_ttl_applies_when_back(self):
        """Not expired while delayed; back past its TTL, it expires at the head."""
        dlq = self.queue()
        qn = self.queue(arguments=retry_args("failed", 2 * DELAY, **{
            "x-message-ttl": 300, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}))
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        time.sleep(0.4)  # past its TTL, well before its delay ends
        self.assert_held(qn)
        self.assertEqual(self.count(dlq), 0)
        _, p, b, waited = wait_get(self.ch, dlq, since=t0)
        self.assert_delay(waited, 2 * DELAY)
        self.assertEqual((b, p.headers["x-first-death-reason"]), (b"m", "expired"))

    def test_purge_takes_delayed(self):
        qn = self.queue(arguments=retry_args("failed", 300))
        for b in (b"a", b"b"):
            self.ch.basic_publish("", qn, b)
        self.fail_once(qn)
        self.assertEqual(self.ch.queue_purge(qn).method.message_count, 2)
        self.assertEqual(self.api(qn)["messages_delayed"], 0)
        time.sleep(0.3 + LATE)
        self.assertEqual(self.count(qn), 0)

    def test_delete_settles_delayed(self):
        qn = self.queue(arguments=retry_args("failed", 300))
        self.ch.basic_publish("", qn, b"a")
        self.fail_once(qn)
        self.ch.queue_delete(qn)
        time.sleep(0.3 + LATE)  # its timer must not fire on a freed queue
        ch = self.conn.channel()
        self.assertEqual(ch.queue_declare(qn, arguments=retry_args("failed", 300)).method.message_count, 0)
        self.assertEqual(self.api(qn)["messages_delayed"], 0)


class Observability(RetryBase):
    def test_api_overview_and_metrics(self):
        qn = self.queue(arguments=retry_args("returned", 3000, **{"x-consumer-timeout": 200}))
        self.ch.basic_publish("", qn, b"m")
        c = self.connect()
        ch = c.channel()
        cancelled = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(1))
        ch.basic_consume(qn, lambda *a: None)
        h.wait_for(c, lambda: cancelled, timeout=5)
        self.assertEqual(cancelled, [1])  # its timed-out delivery is returned, and delayed
        info = self.api(qn)
        self.assertEqual((info["messages_delayed"], info["consumer_timeouts"], info["messages"]), (1, 1, 0))
        self.assertGreaterEqual(api_get("/api/overview")["queue_totals"]["messages_delayed"], 1)
        self.assertGreaterEqual(api_get("/api/vhosts/%2F")["messages_delayed"], 1)
        sorted_names = [x["name"] for x in api_get("/api/queues/%2F?sort=messages_delayed&sort_reverse=true"
                                                     "&columns=name,messages_delayed")]
        self.assertIn(qn, sorted_names)
        fams = metrics("/metrics/per-object")
        for fam, kind, want in (("warren_queue_messages_delayed", "gauge", 1),
                                ("warren_queue_consumer_timeouts_total", "counter", 1),
                                ("warren_queue_delivery_limit_dead_lettered_total", "counter", 0)):
            self.assertEqual(fams[fam]["type"], kind)
            self.assertTrue(fams[fam]["help"])
            vals = [v for _, labels, v in fams[fam]["samples"] if labels.get("queue") == qn]
            self.assertEqual(vals, [want], fam)
        agg = metrics("/metrics")
        self.assertGreaterEqual(agg["warren_queue_messages_delayed"]["samples"][0][2], 1)


class Policies(RetryBase):
    def put(self, name, pattern, definition):
        r = request("PUT", "/api/policies/%2F/" + path(name),
                    {"pattern": pattern, "definition": definition, "apply-to": "queues"})
        if r.status in (201, 204):
            self.addCleanup(request, "DELETE", "/api/policies/%2F/" + path(name))
        return r

    def test_refused_400(self):
        name = h.unique("retry.pol")
        for definition, why in (
                ({"delayed-retry-type": "bogus"}, "&lt;&lt;\"bogus\"&gt;&gt; is not a valid delayed retry type"),
                ({"delayed-retry-min": -1}, "-1 is not a valid delayed retry min"),
                ({"delayed-retry-max": "x"}, "&lt;&lt;\"x\"&gt;&gt; is not a valid delayed retry max"),
                ({"delayed-retry-multiplier": 0}, "0 is not a valid delayed retry multiplier")):
            r = self.put(name, "^none$", definition)
            self.assertEqual(r.status, 400, r.body)
            self.assertEqual(r.json()["reason"], "Validation failed\n\n%s\n" % why)

    def test_policy_applies_and_is_shown(self):
        qn = h.unique("retry.polq")
        definition = {"delayed-retry-type": "failed", "delayed-retry-min": DELAY,
                      "delayed-retry-max": 3 * DELAY, "delayed-retry-multiplier": 3}
        r = self.put(h.unique("retry.pol"), "^%s$" % qn.replace(".", "\\."), definition)
        self.assertIn(r.status, (201, 204), r.body)
        self.queue(qn)
        self.assertEqual(self.api(qn)["effective_policy_definition"], definition)
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        self.assert_held(qn)
        m, _, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, DELAY)
        t0 = time.monotonic()
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        _, _, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, 3 * DELAY)

    def test_argument_wins(self):
        qn = h.unique("retry.polq")
        r = self.put(h.unique("retry.pol"), "^%s$" % qn.replace(".", "\\."),
                     {"delayed-retry-type": "disabled", "delayed-retry-min": 2000})
        self.assertIn(r.status, (201, 204), r.body)
        self.queue(qn, arguments=retry_args("failed", 300))
        self.ch.basic_publish("", qn, b"m")
        t0 = self.fail_once(qn)
        _, _, _, waited = wait_get(self.ch, qn, since=t0)
        self.assert_delay(waited, 300)  # not the policy's 2000


@unittest.skipIf(h.TARGET is not None, "needs own broker")
class RetryDurability(h.DataDirTest):
    """A journaled deadline holds the message back after a SIGTERM restart
    and after SIGKILL (wall clock); a deadline that passed while the broker
    was down makes it ready at once."""

    def fail_and_restart(self, delay_ms, kill, pause=0.0):
        """A persistent message in a durable queue fails once (delayed
        delay_ms), the broker goes down (SIGTERM or SIGKILL), stays down
        `pause` s and comes back. Returns (ch, seconds since the reject)."""
        conn, ch = self.start()
        ch.queue_declare("retry.d", durable=True, arguments=retry_args("failed", delay_ms))
        ch.basic_publish("", "retry.d", b"m", pika.BasicProperties(delivery_mode=2))
        ch.basic_publish("", "retry.d", b"n", pika.BasicProperties(delivery_mode=2))
        m, _, _ = ch.basic_get("retry.d")
        t0 = time.monotonic()
        ch.basic_reject(m.delivery_tag, requeue=True)
        ch.basic_publish("", "retry.d", b"fence", pika.BasicProperties(delivery_mode=2))  # synced after it
        if kill:
            self.kill()
        else:
            conn.close()
            self.stop()
        time.sleep(pause)
        conn, ch = self.start()
        return ch, t0

    def check_held(self, kill):
        """Delayed 5 s: the restart (under a second, four allowed on a busy
        machine) ends well before the deadline, which then holds."""
        delay = 5 * DELAY
        ch, t0 = self.fail_and_restart(delay, kill)
        self.assertLess(time.monotonic() - t0, 4.0, "the restart took too long for this test")
        got = [b for _, _, b in h.get_all(ch, "retry.d")]
        self.assertEqual(got, [b"n", b"fence"], "the delayed message came back too early")
        m, p, b, waited = wait_get(ch, "retry.d", since=t0, timeout=delay / 1000 + 2 * LATE)
        self.assertEqual((b, p.headers["x-delivery-count"]), (b"m", 1))
        self.assertGreaterEqual(waited, delay / 1000 - EARLY)
        self.assertLess(waited, delay / 1000 + 2 * LATE)  # wall clock across the restart

    def test_sigterm_keeps_deadline(self):
        self.check_held(kill=False)

    def test_sigkill_keeps_deadline(self):
        self.check_held(kill=True)

    def test_past_deadline_ready_at_once(self):
        ch, t0 = self.fail_and_restart(300, kill=True, pause=0.4)
        m, p, b = ch.basic_get("retry.d")
        self.assertEqual((b, p.headers["x-delivery-count"]), (b"m", 1))


if __name__ == "__main__":
    unittest.main()
