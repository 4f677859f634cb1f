"""Quorum queues (single node), delivery limits and delivery counts, and
consumer timeouts.

The QuorumRules and DeliveryLimit tests run on RabbitMQ 3.10 too
(WARREN_TEST_TARGET=127.0.0.1:5672): every text and header below was
recorded from it. WarrenOnly tests cover what Warren does beyond 3.10 (a
delivery limit on classic queues, 4.x's default limit of 20, consumer
timeouts that cancel one consumer); Durability restarts and kills a private
Warren."""
import json
import os
import sqlite3
import time
import unittest
import urllib.request
import base64

import pika
from pika import exceptions as pex

import harness as h
from test_mgmt import request as mgmt_request

QUORUM = {"x-queue-type": "quorum"}
QTYPE = "rabbit_quorum_queue"


def quorum_args(**extra):
    a = dict(QUORUM)
    a.update(extra)
    return a


class QuorumBase(h.BrokerTest):
    def quorum(self, **args):
        return self.queue(durable=True, arguments=quorum_args(**args))

    def dlq_pair(self, source_args, quorum=True):
        dlq = self.queue(durable=True)
        args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
        args.update(source_args)
        src = self.quorum(**args) if quorum else self.queue(durable=True, arguments=args)
        return src, dlq

    def get(self, q, ch=None):
        m, p, b = (ch or self.ch).basic_get(q)
        self.assertIsNotNone(m, "queue %s empty" % q)
        return m, p, b

    def api_queue(self, q):
        """The queue as GET /api/queues/%2F/<q> shows it."""
        host, port = h.mgmt_address()
        req = urllib.request.Request("http://%s:%d/api/queues/%%2F/%s" % (host, port, q))
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        return json.load(urllib.request.urlopen(req, timeout=5))

    def mgmt_get_requeue(self, q):
        """POST /api/queues/%2F/<q>/get, count 1, requeued: the message shown."""
        host, port = h.mgmt_address()
        body = json.dumps({"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}).encode()
        req = urllib.request.Request("http://%s:%d/api/queues/%%2F/%s/get" % (host, port, q), data=body,
                                     method="POST", headers={
                                         "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
                                         "Content-Type": "application/json"})
        return json.load(urllib.request.urlopen(req, timeout=5))[0]

    def get_within(self, q, timeout=3.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m, p, b = self.ch.basic_get(q, auto_ack=True)
            if m:
                return m, p, b
            time.sleep(0.05)
        self.fail("nothing arrived in %s" % q)


class QuorumRules(QuorumBase):
    def declare_error(self, name, **kw):
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, name, **kw)
        self.track_queue(name)
        return e.reply_text

    def test_properties_refused(self):
        for kw, prop in ((dict(durable=True, exclusive=True), "exclusive-owner"),
                         (dict(durable=True, auto_delete=True), "auto-delete"),
                         (dict(durable=False), "non-durable"),
                         (dict(durable=False, exclusive=True), "exclusive-owner")):
            name = h.unique("quorum")
            text = self.declare_error(name, arguments=QUORUM, **kw)
            self.assertEqual(text, "PRECONDITION_FAILED - invalid property '%s' for queue '%s' in vhost '/'"
                             % (prop, name), kw)

    def test_arguments_refused(self):
        for key, value in (("x-max-priority", 5), ("x-queue-mode", "lazy"), ("x-queue-version", 2),
                           ("x-queue-master-locator", "client-local"), ("x-max-age", "1D")):
            name = h.unique("quorum")
            text = self.declare_error(name, durable=True, arguments=quorum_args(**{key: value}))
            self.assertEqual(text, "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/' "
                                   "of queue type %s" % (key, name, QTYPE))

    def test_arguments_accepted(self):
        for key, value in (("x-overflow", "drop-head"), ("x-overflow", "reject-publish"),
                           ("x-overflow", "reject-publish-dlx"), ("x-message-ttl", 1000),
                           ("x-dead-letter-strategy", "at-least-once"),
                           ("x-dead-letter-strategy", "at-most-once"), ("x-delivery-limit", 3),
                           ("x-quorum-initial-group-size", 3), ("x-max-in-memory-length", 3),
                           ("x-single-active-consumer", True), ("x-expires", 60000), ("x-foo", "bar")):
            self.quorum(**{key: value})

    def test_bad_values(self):
        name = h.unique("quorum")
        self.assertEqual(self.declare_error(name, durable=True, arguments=quorum_args(**{
            "x-dead-letter-strategy": "bogus"})),
            "PRECONDITION_FAILED - invalid arg 'x-dead-letter-strategy' for queue '%s' in vhost '/': "
            "invalid_dlx_strategy" % name)
        self.assertEqual(self.declare_error(name, durable=True, arguments=quorum_args(**{
            "x-overflow": "bogus"})),
            "PRECONDITION_FAILED - invalid arg 'x-overflow' for queue '%s' in vhost '/': invalid_overflow" % name)
        self.assertEqual(self.declare_error(name, durable=True, arguments={"x-queue-type": "bogus"}),
                         "PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue '%s' in vhost '/': "
                         "\"unsupported queue type 'bogus'\"" % name)
        self.assertEqual(self.declare_error(name, durable=True, arguments={"x-queue-type": 5}),
                         "PRECONDITION_FAILED - invalid arg 'x-queue-type' for queue '%s' in vhost '/': "
                         "{unacceptable_type,signedint}" % name)

    def test_classic_refuses_quorum_arguments(self):
        for key, value in (("x-dead-letter-strategy", "at-least-once"), ("x-quorum-initial-group-size", 3),
                           ("x-max-in-memory-length", 3)):
            name = h.unique("classic")
            self.assertEqual(self.declare_error(name, durable=True, arguments={key: value}),
                             "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/' of queue type "
                             "rabbit_classic_queue" % (key, name))

    def test_server_named_refused(self):
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, "", durable=True,
                                      arguments=QUORUM)
        self.assertEqual(e.reply_text,
                         "PRECONDITION_FAILED - Cannot declare a server-named queue for type rabbit_quorum_queue")

    def test_classic_is_no_type_on_redeclare(self):
        a = self.queue(durable=True)
        self.ch.queue_declare(a, durable=True, arguments={"x-queue-type": "classic"})
        b = self.queue(durable=True, arguments={"x-queue-type": "classic"})
        self.ch.queue_declare(b, durable=True)

    def test_quorum_redeclare(self):
        q = self.quorum()
        self.ch.queue_declare(q, durable=True, arguments=QUORUM)
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, q, durable=True)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '%s' in "
                         "vhost '/': received none but current is the value 'quorum' of type 'longstr'" % q)
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, q, durable=True,
                                      arguments={"x-queue-type": "classic"})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '%s' in "
                         "vhost '/': received 'classic' but current is 'quorum'" % q)

    def test_no_global_qos(self):
        q = self.quorum()
        c = self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=5, global_qos=True)
        e = self.assert_connection_error(h.NOT_IMPLEMENTED, ch.basic_consume, q, lambda *a: None, conn=c)
        self.assertEqual(e.reply_text, "NOT_IMPLEMENTED - queue '%s' in vhost '/' does not support global qos" % q)

    def test_type_in_api(self):
        q = self.quorum()
        d = self.api_queue(q)
        self.assertEqual(d["type"], "quorum")
        self.assertEqual(d["members"], [d["leader"]])
        self.assertEqual(d["online"], [d["leader"]])


class QuorumOverflow(QuorumBase):
    def test_reject_publish_nacks_once_over(self):
        # 3.10 takes the message that crosses the limit and refuses the next ones
        q = self.quorum(**{"x-max-length": 1, "x-overflow": "reject-publish"})
        self.ch.confirm_delivery()
        self.publish("", q, b"a")
        self.publish("", q, b"b")
        for b in (b"c", b"d"):
            with self.assertRaises(pex.NackError):
                self.publish("", q, b)
        self.assertEqual([b for _, _, b in h.get_all(self.ch, q)], [b"a", b"b"])

    def test_drop_head_dead_letters_maxlen(self):
        src, dlq = self.dlq_pair({"x-max-length": 1, "x-overflow": "drop-head"})
        for b in (b"a", b"b"):
            self.publish("", src, b)
        h.sync(self.ch)
        m, p, b = self.get_within(dlq)
        self.assertEqual((b, p.headers["x-death"][0]["reason"]), (b"a", "maxlen"))
        self.assertEqual([b for _, _, b in h.get_all(self.ch, src)], [b"b"])


class DeliveryLimit(QuorumBase):
    def test_reject_requeue_counts_then_dead_letters(self):
        src, dlq = self.dlq_pair({"x-delivery-limit": 2})
        self.publish("", src, b"m", properties=pika.BasicProperties(headers={"a": 1}))
        h.sync(self.ch)
        seen = []
        for _ in range(3):
            m, p, _ = self.get(src)
            seen.append((m.redelivered, p.headers))
            self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.assertEqual(seen, [(False, {"a": 1, "x-delivery-count": 0}),
                                (True, {"a": 1, "x-delivery-count": 1}),
                                (True, {"a": 1, "x-delivery-count": 2})])
        m, p, b = self.get_within(dlq)
        self.assertEqual(b, b"m")
        self.assertNotIn("x-delivery-count", p.headers)
        self.assertEqual(p.headers["x-first-death-reason"], "delivery_limit")
        death = p.headers["x-death"][0]
        self.assertEqual((death["reason"], death["queue"], death["count"]), ("delivery_limit", src, 1))
        self.assertEqual(self.count(src), 0)

    def test_channel_close_counts(self):
        src, dlq = self.dlq_pair({"x-delivery-limit": 1})
        self.publish("", src, b"m")
        h.sync(self.ch)
        counts = []
        for _ in range(2):
            ch = self.conn.channel()
            m, p, _ = self.get(src, ch=ch)
            counts.append(p.headers["x-delivery-count"])
            ch.close()
            self.wait_count(src, 1) if len(counts) < 2 else None
        self.assertEqual(counts, [0, 1])
        self.get_within(dlq)

    def test_connection_close_counts(self):
        src, dlq = self.dlq_pair({"x-delivery-limit": 0})
        self.publish("", src, b"m")
        h.sync(self.ch)
        c = self.connect()
        self.get(src, ch=c.channel())
        c.close()
        m, p, _ = self.get_within(dlq)
        self.assertEqual(p.headers["x-death"][0]["reason"], "delivery_limit")

    def test_nack_and_recover_count(self):
        q = self.quorum(**{"x-delivery-limit": 5})
        self.publish("", q, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(q)
        self.ch.basic_nack(m.delivery_tag, requeue=True)
        m, p, _ = self.get(q)
        self.assertEqual(p.headers["x-delivery-count"], 1)
        self.ch.basic_recover(requeue=True)
        m, p, _ = self.get(q)
        self.assertEqual(p.headers["x-delivery-count"], 2)
        self.ch.basic_ack(m.delivery_tag)

    def test_consume_first_delivery_has_no_header(self):
        q = self.quorum()
        self.publish("", q, b"m")
        h.sync(self.ch)
        got = []

        def cb(ch, m, p, b):
            got.append((m.redelivered, p.headers))
            if len(got) < 3:
                ch.basic_reject(m.delivery_tag, requeue=True)
            else:
                ch.basic_ack(m.delivery_tag)
        self.ch.basic_consume(q, cb)
        h.wait_for(self.conn, lambda: len(got) >= 3)
        self.assertEqual(got, [(False, None), (True, {"x-delivery-count": 1}), (True, {"x-delivery-count": 2})])

    def test_management_get_shows_the_count(self):
        q = self.quorum()
        self.publish("", q, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(q)
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        got = self.mgmt_get_requeue(q)
        self.assertEqual((got["redelivered"], got["properties"]["headers"]),
                         (True, {"x-delivery-count": 1}))

    def test_classic_without_limit_adds_no_header(self):
        """Issue 17 item 15: publish with headers, get, reject with requeue,
        then nack, recover, the management get and a consumer: the header
        set never changes (RabbitMQ's classic queues add nothing)."""
        q = self.queue()
        headers = {"a": 1}
        self.publish("", q, b"m", properties=pika.BasicProperties(headers=headers))
        h.sync(self.ch)
        seen = []
        for verdict in (self.ch.basic_reject, self.ch.basic_nack, None):
            m, p, _ = self.get(q)
            seen.append(p.headers)
            verdict(m.delivery_tag, requeue=True) if verdict else self.ch.basic_recover(requeue=True)
        shown = self.mgmt_get_requeue(q)
        self.assertEqual((shown["redelivered"], shown["properties"]["headers"]), (True, headers))
        got = []
        self.ch.basic_consume(q, lambda ch, m, p, b: got.append((m.redelivered, p.headers)), auto_ack=True)
        h.wait_for(self.conn, lambda: got)
        self.assertEqual(seen + got, [headers, headers, headers, (True, headers)])

    def test_dropped_without_dlx(self):
        q = self.quorum(**{"x-delivery-limit": 0})
        self.publish("", q, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(q)
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.assertEqual(self.wait_count(q, 0), 0)


@unittest.skipIf(h.TARGET is not None, "Warren only")
class WarrenOnly(QuorumBase):
    def test_classic_delivery_limit(self):
        src, dlq = self.dlq_pair({"x-delivery-limit": 1}, quorum=False)
        self.publish("", src, b"m")
        h.sync(self.ch)
        m, p, _ = self.get(src)
        self.assertIsNone(p.headers)  # classic basic.get: the header only on redelivery
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        m, p, _ = self.get(src)
        self.assertEqual(p.headers, {"x-delivery-count": 1})
        self.ch.basic_nack(m.delivery_tag, requeue=True)
        m, p, _ = self.get_within(dlq)
        self.assertEqual(p.headers["x-first-death-reason"], "delivery_limit")

    def test_classic_header_follows_the_limit_policy(self):
        """A classic queue shows x-delivery-count while a delivery-limit
        policy applies to it, and stops when the policy goes."""
        q = self.queue()
        pol = h.unique("dcpol")
        path = "/api/policies/%2F/" + pol
        self.assertIn(mgmt_request("PUT", path, {"pattern": "^%s$" % q, "apply-to": "queues",
                                                 "definition": {"delivery-limit": 50}}).status, (201, 204))
        self.addCleanup(mgmt_request, "DELETE", path)
        self.publish("", q, b"m", properties=pika.BasicProperties(headers={"a": 1}))
        h.sync(self.ch)
        m, p, _ = self.get(q)
        self.assertEqual(p.headers, {"a": 1})  # the first delivery as published
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        m, p, _ = self.get(q)
        self.assertEqual(p.headers, {"a": 1, "x-delivery-count": 1})
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.assertEqual(self.mgmt_get_requeue(q)["properties"]["headers"], {"a": 1, "x-delivery-count": 2})
        self.assertEqual(mgmt_request("DELETE", path).status, 204)
        m, p, _ = self.get(q)
        self.assertEqual(p.headers, {"a": 1})

    def test_dead_letters_counted_in_api(self):
        q = self.quorum(**{"x-delivery-limit": 0})
        self.publish("", q, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(q)
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.assertEqual(self.api_queue(q)["delivery_limit_dead_letters"], 1)

    def test_at_least_once_keeps_until_a_queue_takes_it(self):
        dlq = h.unique("quorum.dlq")
        self.track_queue(dlq)
        src = self.quorum(**{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
                             "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq})
        self.publish("", src, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(src)
        self.ch.basic_reject(m.delivery_tag, requeue=False)  # no queue takes it yet
        self.assertEqual(self.count(src), 0)
        d = self.api_queue(src)
        self.assertEqual((d["messages_dlx"], d["message_bytes_dlx"]), (1, 1))
        self.ch.queue_declare(dlq, durable=True)
        m, p, b = self.get_within(dlq, timeout=5)
        self.assertEqual((b, p.headers["x-death"][0]["reason"]), (b"m", "rejected"))
        self.assertEqual(self.api_queue(src)["messages_dlx"], 0)

    def test_at_least_once_needs_reject_publish(self):
        # as 3.10: with drop-head the strategy falls back to at-most-once
        src = self.quorum(**{"x-dead-letter-strategy": "at-least-once", "x-dead-letter-exchange": "",
                             "x-dead-letter-routing-key": h.unique("nowhere")})
        self.publish("", src, b"m")
        h.sync(self.ch)
        m, _, _ = self.get(src)
        self.ch.basic_reject(m.delivery_tag, requeue=False)
        self.assertEqual(self.api_queue(src)["messages_dlx"], 0)

    def test_quorum_two_priorities(self):
        # RabbitMQ 4.x: priority > 4 is high, the rest normal; a normal one
        # goes after every two high ones while both wait
        q = self.quorum()
        for b in ("n0", "n1", "n2"):
            self.publish("", q, b.encode(), properties=pika.BasicProperties(priority=4))
        for b in ("h0", "h1", "h2", "h3"):
            self.publish("", q, b.encode(), properties=pika.BasicProperties(priority=9))
        h.sync(self.ch)
        self.assertEqual([b.decode() for _, _, b in h.get_all(self.ch, q)],
                         ["h0", "h1", "n0", "h2", "h3", "n1", "n2"])

    def test_quorum_default_limit_is_20(self):
        src, dlq = self.dlq_pair({})
        self.publish("", src, b"m")
        h.sync(self.ch)
        for i in range(21):
            m, p, _ = self.get(src)
            self.assertEqual(p.headers["x-delivery-count"], i)
            self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.get_within(dlq)

    def test_consumer_timeout_cancels_only_that_consumer(self):
        q = self.quorum()
        for b in (b"a", b"b"):
            self.publish("", q, b)
        h.sync(self.ch)
        cancelled, got = [], []
        slow = self.conn.channel()
        slow.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        slow.basic_qos(prefetch_count=1)
        tag = slow.basic_consume(q, lambda ch, m, p, b: got.append(b), arguments={"x-consumer-timeout": 300})
        other = slow.basic_consume(self.queue(), lambda *a: None)  # stays
        h.wait_for(self.conn, lambda: cancelled, timeout=5)
        self.assertEqual(cancelled, [tag])
        self.assertEqual(got, [b"a"])
        self.assertTrue(slow.is_open)
        self.assertIn(other, slow.consumer_tags)
        m, p, b = self.get(q)  # requeued, at its place, counted
        self.assertEqual((b, m.redelivered, p.headers), (b"a", True, {"x-delivery-count": 1}))
        self.assertEqual(self.api_queue(q)["consumer_timeouts"], 1)

    def test_consumer_timeout_queue_argument(self):
        q = self.quorum(**{"x-consumer-timeout": 300})
        self.publish("", q, b"a")
        h.sync(self.ch)
        cancelled = []
        ch = self.conn.channel()
        ch.add_on_cancel_callback(lambda frame: cancelled.append(1))
        ch.basic_consume(q, lambda *a: None)
        h.wait_for(self.conn, lambda: cancelled, timeout=5)
        self.assertEqual(self.wait_count(q, 1), 1)

    def test_consumer_timeout_close_channel(self):
        with h.own_broker("consumer_timeout=300", "consumer_timeout.action=close_channel") as addr:
            c = h.connect(addr)
            ch = c.channel()
            q = ch.queue_declare(h.unique("q")).method.queue
            ch.basic_publish("", q, b"a")
            closed = []
            ch._impl.add_on_close_callback(lambda _ch, reason: closed.append(reason))
            ch.basic_consume(q, lambda *a: None)
            h.wait_for(c, lambda: closed, timeout=5)
            self.assertEqual((closed[0].reply_code, closed[0].reply_text), (
                h.PRECONDITION_FAILED,
                "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value "
                "used: 300 ms. This timeout value can be configured, see consumers doc guide to learn more"))
            self.assertTrue(c.is_open)
            c.close()


@unittest.skipIf(h.TARGET is not None, "needs own broker")
class Durability(h.DataDirTest):
    """The delivery count and a quorum queue's transient messages survive a
    clean restart and SIGKILL."""

    def restart(self, conn, kill):
        if kill:
            # the delivered records of the gets are synced by a confirmed publish after them
            ch = conn.channel()
            ch.confirm_delivery()
            ch.basic_publish("", "quorum.fence", b"f")
            self.kill()
            return self.start()
        return super().restart(conn)

    def check(self, kill):
        conn, ch = self.start()
        ch.queue_declare("quorum.fence", durable=True, arguments=QUORUM)
        ch.queue_declare("quorum.dlq", durable=True)
        ch.queue_declare("quorum.src", durable=True, arguments=quorum_args(**{
            "x-delivery-limit": 2, "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "quorum.dlq"}))
        ch.basic_publish("", "quorum.src", b"m")  # transient: a quorum queue keeps it anyway
        for _ in range(2):
            m, _, _ = ch.basic_get("quorum.src")
            ch.basic_reject(m.delivery_tag, requeue=True)
        conn, ch = self.restart(conn, kill)
        m, p, b = ch.basic_get("quorum.src")
        self.assertEqual((b, m.redelivered, p.headers["x-delivery-count"]), (b"m", True, 2))
        ch.basic_reject(m.delivery_tag, requeue=True)
        m, p, b = ch.basic_get("quorum.dlq", auto_ack=True)
        self.assertEqual(b, b"m")
        self.assertEqual(p.headers["x-first-death-reason"], "delivery_limit")
        self.assertEqual(ch.queue_declare("quorum.src", passive=True).method.message_count, 0)
        conn.close()

    def with_policy(self, pattern, definition):
        """Restarts the broker with one policy in the store (the management
        API cannot set policies yet; as test_policies does)."""
        from test_policies import table
        conn, ch = self.start()
        conn.close()
        self.stop()
        db = sqlite3.connect(os.path.join(self.data_dir, "metadata.db"))
        with db:
            db.execute("INSERT INTO policies (vhost, name, operator_policy, pattern, apply_to, priority, "
                       "definition) VALUES (?,?,?,?,?,?,?)",
                       ("/", "p", 0, pattern, "queues", 0, table(definition)))
        db.close()
        return self.start()

    def test_classic_delivery_limit_policy(self):
        """delivery-limit in a policy applies to classic queues too (3.10
        skips them)."""
        conn, ch = self.with_policy("^pol\\.src$", {"delivery-limit": 1, "dead-letter-exchange": "",
                                                    "dead-letter-routing-key": "pol.dlq"})
        ch.queue_declare("pol.dlq")
        ch.queue_declare("pol.src")
        ch.basic_publish("", "pol.src", b"m")
        for _ in range(2):
            m, _, _ = ch.basic_get("pol.src")
            ch.basic_reject(m.delivery_tag, requeue=True)
        m, p, b = ch.basic_get("pol.dlq", auto_ack=True)
        self.assertEqual((b, p.headers["x-first-death-reason"]), (b"m", "delivery_limit"))
        conn.close()

    def test_consumer_timeout_policy(self):
        conn, ch = self.with_policy("^pol\\.ct$", {"consumer-timeout": 300})
        ch.queue_declare("pol.ct")
        ch.basic_publish("", "pol.ct", b"m")
        cancelled = []
        ch.add_on_cancel_callback(lambda frame: cancelled.append(1))
        ch.basic_consume("pol.ct", lambda *a: None)
        h.wait_for(conn, lambda: cancelled, timeout=5)
        self.assertEqual(cancelled, [1])
        conn.close()

    def test_clean_restart(self):
        self.check(kill=False)

    def test_sigkill(self):
        self.check(kill=True)


if __name__ == "__main__":
    unittest.main()
