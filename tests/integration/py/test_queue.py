"""Queues: declare rules, exclusivity, auto-delete, bind/unbind, purge,
delete, counts, the empty-name shortcut and common x-arguments."""
import time
import unittest

import pika
import pika.spec as S

import harness as h

LOCKED_TEXT = ("RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '%s' in vhost '/'. It could be "
               "originally declared on another connection or the exclusive property value does not match that "
               "of the original declaration.")


class Declare(h.BrokerTest):
    def test_server_named(self):
        ok1 = self.ch.queue_declare("", exclusive=True).method
        ok2 = self.ch.queue_declare("", exclusive=True).method
        for ok in (ok1, ok2):
            self.assertTrue(ok.queue.startswith("amq.gen-"), ok.queue)
            self.assertEqual((ok.message_count, ok.consumer_count), (0, 0))
        self.assertNotEqual(ok1.queue, ok2.queue)

    def test_declare_ok_echoes_name(self):
        name = h.unique("q")
        self.assertEqual(self.queue(name), name)

    def test_passive_missing_404(self):
        name = h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, name, passive=True)
        self.assertEqual(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name)

    def test_passive_ignores_flags(self):
        q = self.queue()
        self.ch.queue_declare(q, passive=True, durable=True, auto_delete=True)

    def test_amq_prefix_reserved_403(self):
        name = "amq." + h.unique("q")
        self.track_queue(name)
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.queue_declare, name)
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - queue name '%s' contains reserved prefix 'amq.*'" % name)

    def test_durable(self):
        q = self.queue(durable=True)
        self.ch.queue_declare(q, durable=True)

    def test_redeclare_other_durable_406(self):
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, q, durable=True)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'durable' for queue '%s' in vhost "
                                       "'/': received 'true' but current is 'false'" % q)

    def test_redeclare_other_auto_delete_406(self):
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, q, auto_delete=True)
        self.assertIn("inequivalent arg 'auto_delete'", e.reply_text)

    def test_redeclare_other_x_argument_406(self):
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, q,
                                      arguments={"x-message-ttl": 1000})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-message-ttl' for queue '%s' in "
                                       "vhost '/': received the value '1000' of type 'signedint' but current is "
                                       "none" % q)

    def test_redeclare_other_x_argument_value_406(self):
        q = self.queue(arguments={"x-max-length": 3})
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, q,
                                      arguments={"x-max-length": 4})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'x-max-length' for queue '%s' in "
                                       "vhost '/': received '4' but current is '3'" % q)

    def test_redeclare_with_plain_argument_is_ok(self):
        q = self.queue()
        self.ch.queue_declare(q, arguments={"foo": 1})

    def test_redeclare_exclusive_mismatch_405(self):
        q = self.queue()
        e = self.assert_channel_error(h.RESOURCE_LOCKED, self.ch.queue_declare, q, exclusive=True)
        self.assertEqual(e.reply_text, LOCKED_TEXT % q)

    def test_invalid_ttl_type_406(self):
        name = self.track_queue(h.unique("q"))
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, name,
                                      arguments={"x-message-ttl": "abc"})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-message-ttl' for queue '%s' in vhost "
                                       "'/': \"expected integer, got longstr\"" % name)

    def test_negative_max_length_406(self):
        name = self.track_queue(h.unique("q"))
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_declare, name,
                                      arguments={"x-max-length": -1})
        self.assertIn("invalid arg 'x-max-length'", e.reply_text)

    def test_declare_ok_counts(self):
        q = self.queue()
        for _ in range(5):
            self.publish("", q)
        self.assertIsNotNone(self.ch.basic_get(q)[0])  # one unacked: not counted
        ch2 = self.conn.channel()
        ch2.basic_qos(prefetch_count=1)
        ch2.basic_consume(q, lambda *a: None)
        h.wait_for(self.conn, lambda: self.count(q) == 3)
        ok = self.ch.queue_declare(q, passive=True).method
        self.assertEqual((ok.message_count, ok.consumer_count), (3, 1))
        ok = self.ch.queue_declare(q).method  # a non-passive redeclare reports them too
        self.assertEqual((ok.message_count, ok.consumer_count), (3, 1))

    def test_declare_nowait(self):
        name = self.track_queue(h.unique("q"))
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Queue.Declare(queue=name, nowait=True))
            ok = r.rpc(1, S.Queue.Declare(queue=name, passive=True), S.Queue.DeclareOk)
            self.assertEqual(ok.queue, name)
            r.close_cleanly()


class Exclusive(h.BrokerTest):
    def setUp(self):
        super().setUp()
        self.q = self.queue(exclusive=True)
        self.other = self.connect().channel()

    def test_passive_from_other_connection_405(self):
        e = self.assert_channel_error(h.RESOURCE_LOCKED, self.other.queue_declare, self.q, passive=True,
                                      conn=self.other.connection)
        self.assertEqual(e.reply_text, LOCKED_TEXT % self.q)

    def test_redeclare_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.queue_declare, self.q, exclusive=True,
                                  conn=self.other.connection)

    def test_consume_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.basic_consume, self.q, lambda *a: None,
                                  conn=self.other.connection)

    def test_get_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.basic_get, self.q, conn=self.other.connection)

    def test_bind_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.queue_bind, self.q, "amq.direct", "k",
                                  conn=self.other.connection)

    def test_purge_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.queue_purge, self.q, conn=self.other.connection)

    def test_delete_from_other_connection_405(self):
        self.assert_channel_error(h.RESOURCE_LOCKED, self.other.queue_delete, self.q, conn=self.other.connection)

    def test_other_connection_may_publish(self):
        # Publishing to another connection's exclusive queue is allowed.
        self.other.basic_publish("", self.q, b"from other")
        h.sync(self.other)
        self.assertEqual(self.ch.basic_get(self.q, auto_ack=True)[2], b"from other")

    def test_same_connection_other_channel(self):
        ch2 = self.conn.channel()
        ch2.queue_declare(self.q, passive=True)
        ch2.basic_publish("", self.q, b"x")
        self.assertEqual(ch2.basic_get(self.q, auto_ack=True)[2], b"x")

    def test_deleted_when_connection_closes(self):
        c = self.connect()
        q = c.channel().queue_declare("", exclusive=True).method.queue
        c.close()
        self.assert_queue_gone(q)

    def test_survives_channel_close(self):
        ch2 = self.conn.channel()
        q = ch2.queue_declare("", exclusive=True).method.queue
        ch2.close()
        self.ch.queue_declare(q, passive=True)


class AutoDelete(h.BrokerTest):
    def test_deleted_when_last_consumer_cancels(self):
        q = self.queue(auto_delete=True)
        t1 = self.ch.basic_consume(q, lambda *a: None)
        t2 = self.ch.basic_consume(q, lambda *a: None)
        self.ch.basic_cancel(t1)
        self.assertEqual(self.ch.queue_declare(q, passive=True).method.consumer_count, 1)
        self.ch.basic_cancel(t2)
        self.assert_queue_gone(q)

    def test_deleted_when_consumer_channel_closes(self):
        q = self.queue(auto_delete=True)
        ch2 = self.conn.channel()
        ch2.basic_consume(q, lambda *a: None)
        ch2.close()
        self.assert_queue_gone(q)

    def test_never_consumed_survives(self):
        q = self.queue(auto_delete=True)
        self.publish("", q)
        self.assertIsNotNone(self.ch.basic_get(q, auto_ack=True)[0])
        self.ch.queue_declare(q, passive=True)

    def test_deleted_with_messages(self):
        q = self.queue(auto_delete=True)
        for _ in range(3):
            self.publish("", q)
        tag = self.ch.basic_consume(q, lambda *a: None, auto_ack=False)
        h.wait_for(self.conn, lambda: self.count(q) == 0)
        self.ch.basic_cancel(tag)
        self.assert_queue_gone(q)


class Bind(h.BrokerTest):
    def test_bind_and_unbind(self):
        x = self.exchange("direct")
        q = self.bound_queue(x, "k")
        self.publish(x, "k", b"1")
        self.ch.queue_unbind(q, x, "k")
        self.publish(x, "k", b"2")
        h.sync(self.ch)
        self.assertEqual([b for _, _, b in h.get_all(self.ch, q)], [b"1"])

    def test_bind_missing_queue_404(self):
        name = h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.queue_bind, name, "amq.direct", "k")
        self.assertEqual(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name)

    def test_bind_missing_exchange_404(self):
        q, name = self.queue(), h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.queue_bind, q, name, "k")
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name)

    def test_unbind_missing_is_ok(self):
        # RabbitMQ 3.10 answers unbind-ok for a missing queue, exchange or binding.
        q = self.queue()
        self.ch.queue_unbind(q, "amq.direct", "never-bound")
        self.ch.queue_unbind(h.unique("missing"), "amq.direct", "k")
        self.ch.queue_unbind(q, h.unique("missing"), "k")

    def test_bind_with_arguments_is_distinct_binding(self):
        x = self.exchange("direct")
        q = self.queue()
        self.ch.queue_bind(q, x, "k", arguments={"a": 1})
        self.ch.queue_bind(q, x, "k", arguments={"a": 2})
        self.ch.queue_unbind(q, x, "k", arguments={"a": 1})
        self.publish(x, "k", b"still")
        h.sync(self.ch)
        self.assertEqual(self.count(q), 1)

    def test_bind_nowait(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Queue.Bind(queue=q, exchange="amq.fanout", nowait=True))
            r.publish(1, "amq.fanout", "", b"n")
            r.rpc(1, S.Queue.Unbind(queue=q, exchange="amq.fanout"), S.Queue.UnbindOk)
            r.close_cleanly()
        self.assertEqual(self.count(q), 1)


class PurgeDelete(h.BrokerTest):
    def fill(self, q, n):
        for i in range(n):
            self.publish("", q, str(i).encode())
        h.sync(self.ch)

    def test_purge_returns_count(self):
        q = self.queue()
        self.fill(q, 7)
        self.assertEqual(self.ch.queue_purge(q).method.message_count, 7)
        self.assertEqual(self.count(q), 0)
        self.assertEqual(self.ch.queue_purge(q).method.message_count, 0)

    def test_purge_keeps_unacked(self):
        q = self.queue()
        self.fill(q, 3)
        m, _, _ = self.ch.basic_get(q)
        self.assertEqual(self.ch.queue_purge(q).method.message_count, 2)
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        self.assertEqual(self.wait_count(q, 1), 1)

    def test_purge_missing_404(self):
        self.assert_channel_error(h.NOT_FOUND, self.ch.queue_purge, h.unique("missing"))

    def test_delete_returns_count(self):
        q = self.queue()
        self.fill(q, 4)
        self.assertEqual(self.ch.queue_delete(q).method.message_count, 4)
        self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, q, passive=True)

    def test_delete_missing_is_ok(self):
        self.assertEqual(self.ch.queue_delete(h.unique("missing")).method.message_count, 0)

    def test_delete_if_empty_406(self):
        q = self.queue()
        self.fill(q, 1)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_delete, q, if_empty=True)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - queue '%s' in vhost '/' not empty" % q)

    def test_delete_if_empty_ok_when_empty(self):
        q = self.queue()
        self.ch.queue_delete(q, if_empty=True)
        self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, q, passive=True)

    def test_delete_if_unused_406(self):
        q = self.queue()
        self.conn.channel().basic_consume(q, lambda *a: None)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_delete, q, if_unused=True)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - queue '%s' in vhost '/' in use" % q)

    def test_delete_if_unused_ok_without_consumers(self):
        q = self.queue()
        self.fill(q, 2)
        self.assertEqual(self.ch.queue_delete(q, if_unused=True).method.message_count, 2)

    def test_delete_removes_bindings(self):
        x = self.exchange("fanout")
        q = self.bound_queue(x)
        self.ch.queue_delete(q)
        self.ch.queue_declare(q)
        self.publish(x, "", b"lost")
        h.sync(self.ch)
        self.assertEqual(self.count(q), 0)


class EmptyNameShortcut(h.BrokerTest):
    """An empty queue name means the channel's last declared queue."""

    def test_shortcut_for_bind_get_purge_consume(self):
        q = self.ch.queue_declare("", exclusive=True).method.queue
        self.ch.queue_bind("", "amq.fanout")
        try:
            self.publish("", q, b"a")
            self.assertEqual(self.ch.basic_get("", auto_ack=True)[2], b"a")
            self.publish("", q, b"b")
            h.sync(self.ch)
            self.assertEqual(self.ch.queue_purge("").method.message_count, 1)
            self.ch.basic_consume("", lambda *a: None)
            self.assertEqual(self.ch.queue_declare(q, passive=True).method.consumer_count, 1)
        finally:
            self.ch.queue_unbind(q, "amq.fanout")

    def test_no_previous_queue_404(self):
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.basic_get, "")
        self.assertEqual(e.reply_text, "NOT_FOUND - no previously declared queue")

    def test_passive_declare_empty_name_404(self):
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, "", passive=True)
        self.assertEqual(e.reply_text, "NOT_FOUND - no queue '' in vhost '/'")


class Arguments(h.BrokerTest):
    def test_message_ttl(self):
        q = self.queue(arguments={"x-message-ttl": 100})
        self.publish("", q)
        time.sleep(0.4)
        self.assertEqual(self.count(q), 0)
        self.assertEqual(self.ch.basic_get(q)[0], None)

    def test_per_message_expiration(self):
        q = self.queue()
        self.publish("", q, b"short", properties=pika.BasicProperties(expiration="100"))
        self.publish("", q, b"long", properties=pika.BasicProperties(expiration="60000"))
        time.sleep(0.4)
        self.assertEqual([b for _, _, b in h.get_all(self.ch, q)], [b"long"])

    def test_max_length_drops_head(self):
        q = self.queue(arguments={"x-max-length": 2})
        for b in (b"1", b"2", b"3"):
            self.publish("", q, b)
        h.sync(self.ch)
        self.assertEqual([b for _, _, b in h.get_all(self.ch, q)], [b"2", b"3"])

    def test_dead_letter_on_reject(self):
        dlx = self.exchange("fanout")
        dlq = self.bound_queue(dlx)
        q = self.queue(arguments={"x-dead-letter-exchange": dlx})
        self.publish("", q, b"dead")
        m, _, _ = self.ch.basic_get(q)
        self.ch.basic_reject(m.delivery_tag, requeue=False)
        self.assertTrue(h.wait_for(self.conn, lambda: self.count(dlq) == 1))
        m, p, b = self.ch.basic_get(dlq, auto_ack=True)
        self.assertEqual(b, b"dead")
        death = p.headers["x-death"][0]
        self.assertEqual(death["queue"], q)
        self.assertEqual(death["reason"], "rejected")
        self.assertEqual(death["count"], 1)
        self.assertEqual(death["exchange"], "")
        self.assertEqual(death["routing-keys"], [q])

    def test_dead_letter_on_expiry_with_routing_key(self):
        dlx = self.exchange("direct")
        dlq = self.bound_queue(dlx, "expired")
        q = self.queue(arguments={"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "expired",
                                  "x-message-ttl": 50})
        self.publish("", q, b"old")
        self.assertTrue(h.wait_for(self.conn, lambda: self.count(dlq) == 1))
        _, p, _ = self.ch.basic_get(dlq, auto_ack=True)
        self.assertEqual(p.headers["x-death"][0]["reason"], "expired")


if __name__ == "__main__":
    unittest.main()


class PurgeDurability(h.DataDirTest):
    """queue.purge takes the ready messages only: the unacked ones stay
    with their consumer, and after a crash they come back (RabbitMQ's
    classic queues keep them in the queue index until acked)."""

    def check(self, restart, n=10):
        conn, ch = self.start()
        ch.queue_declare("purge.durable", durable=True)
        for i in range(n):
            ch.basic_publish("", "purge.durable", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
        held = [ch.basic_get("purge.durable")[0] for _ in range(2)]  # m0, m1 unacked
        self.assertTrue(all(held))
        self.assertEqual(ch.queue_purge("purge.durable").method.message_count, n - 2)
        # a confirmed persistent publish after it: the journal is in order, so
        # what the purge journaled is on disk once this is confirmed
        ch.queue_declare("purge.fence", durable=True)
        ch.basic_publish("", "purge.fence", b"f", pika.BasicProperties(delivery_mode=2))
        restart()
        conn, ch = self.start()
        got = []
        while True:
            m, props, body = ch.basic_get("purge.durable", auto_ack=True)
            if not m:
                break
            got.append((body, m.redelivered))
        self.assertEqual(got, [(b"m0", True), (b"m1", True)])
        conn.close()

    def test_unacked_survive_purge_and_crash(self):
        self.check(self.kill)

    def test_unacked_survive_purge_and_restart(self):
        self.check(self.stop)

    def test_unacked_survive_purge_of_paged_backlog_and_crash(self):
        self.check(self.kill, 500)  # most of the 500 are paged out
