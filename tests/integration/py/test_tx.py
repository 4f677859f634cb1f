"""Transactions: tx.select/commit/rollback over publishes and acks."""
import unittest

import pika.spec as S

import harness as h


class Tx(h.BrokerTest):
    def setUp(self):
        super().setUp()
        self.q = self.queue()
        self.tx = self.conn.channel()
        self.tx.tx_select()

    def put(self, body):
        """Publishes on the plain channel and waits until it is queued (a
        publish on one channel is not ordered with a get on another)."""
        self.publish("", self.q, body)
        h.sync(self.ch)

    def test_commit_publishes(self):
        for i in range(3):
            self.tx.basic_publish("", self.q, str(i).encode())
        h.sync(self.tx)
        self.assertEqual(self.count(self.q), 0)
        self.tx.tx_commit()
        self.assertEqual([b for _, _, b in h.get_all(self.ch, self.q)], [b"0", b"1", b"2"])

    def test_rollback_discards_publishes(self):
        self.tx.basic_publish("", self.q, b"gone")
        self.tx.tx_rollback()
        self.tx.basic_publish("", self.q, b"kept")
        self.tx.tx_commit()
        self.assertEqual([b for _, _, b in h.get_all(self.ch, self.q)], [b"kept"])

    def test_channel_stays_transactional(self):
        for i in range(3):
            self.tx.basic_publish("", self.q, b"x")
            self.tx.tx_commit()
        self.tx.basic_publish("", self.q, b"uncommitted")
        h.sync(self.tx)
        self.assertEqual(self.count(self.q), 3)
        self.tx.tx_rollback()

    def test_close_discards_uncommitted(self):
        self.tx.basic_publish("", self.q, b"x")
        self.tx.close()
        self.assertEqual(self.count(self.q), 0)

    def test_commit_ack(self):
        self.put(b"a")
        m, _, _ = self.tx.basic_get(self.q)
        self.tx.basic_ack(m.delivery_tag)
        self.tx.tx_commit()
        self.tx.close()
        self.assertEqual(self.count(self.q), 0)

    def test_rollback_ack_leaves_message_unacked(self):
        self.put(b"a")
        m, _, _ = self.tx.basic_get(self.q)
        self.tx.basic_ack(m.delivery_tag)
        self.tx.tx_rollback()
        # still unacked: acking it again is legal, then roll back once more
        self.tx.basic_ack(m.delivery_tag)
        self.tx.tx_rollback()
        self.tx.close()  # requeues the still-unacked message
        self.assertEqual(self.wait_count(self.q, 1), 1)
        m2, _, b = self.ch.basic_get(self.q, auto_ack=True)
        self.assertEqual((b, m2.redelivered), (b"a", True))

    def test_uncommitted_ack_not_applied(self):
        self.put(b"a")
        m, _, _ = self.tx.basic_get(self.q)
        self.tx.basic_ack(m.delivery_tag)
        h.sync(self.tx)
        self.tx.close()
        self.assertEqual(self.wait_count(self.q, 1), 1)

    def test_rollback_reject(self):
        self.put(b"r")
        m, _, _ = self.tx.basic_get(self.q)
        self.tx.basic_reject(m.delivery_tag, requeue=False)
        self.tx.tx_rollback()
        self.tx.basic_ack(m.delivery_tag)
        self.tx.tx_commit()
        self.assertEqual(self.count(self.q), 0)

    def test_commit_nack_requeue(self):
        self.put(b"n")
        m, _, _ = self.tx.basic_get(self.q)
        self.tx.basic_nack(m.delivery_tag, requeue=True)
        self.tx.tx_commit()
        m2, _, _ = self.ch.basic_get(self.q, auto_ack=True)
        self.assertTrue(m2.redelivered)

    def test_unknown_tag_in_tx_fails_immediately(self):
        # RabbitMQ checks the tag when the ack arrives, not at commit.
        self.tx.basic_ack(5)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.tx)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 5")

    def test_mandatory_returned_at_commit(self):
        returned = []
        self.tx.add_on_return_callback(lambda ch, m, p, b: returned.append(b))
        self.tx.basic_publish("", h.unique("missing"), b"ret", mandatory=True)
        h.sync(self.tx)
        h.drain(self.conn, 0.2)
        self.assertEqual(returned, [])
        self.tx.tx_commit()
        self.assertTrue(h.wait_for(self.conn, lambda: returned))
        self.assertEqual(returned, [b"ret"])

    def test_return_arrives_before_commit_ok(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.rpc(1, S.Tx.Select(), S.Tx.SelectOk)
            r.publish(1, "", h.unique("missing"), b"m", mandatory=True)
            r.send_method(1, S.Tx.Commit())
            ret = r.recv_content()
            self.assertIsInstance(ret.method, S.Basic.Return)
            r.expect(S.Tx.CommitOk, 1)
            r.close_cleanly()

    def test_confirm_select_on_tx_channel_406(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.rpc(1, S.Tx.Select(), S.Tx.SelectOk)
            r.send_method(1, S.Confirm.Select())
            close = r.expect_channel_close(1, h.PRECONDITION_FAILED)
            self.assertEqual(close.reply_text, "PRECONDITION_FAILED - cannot switch from tx to confirm mode")
            r.close_cleanly()


class NotTransactional(h.BrokerTest):
    def test_commit_without_select_406(self):
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.tx_commit)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - channel is not transactional")

    def test_rollback_without_select_406(self):
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.tx_rollback)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - channel is not transactional")

    def test_close_reply_names_method(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Tx.Commit())
            close = r.expect_channel_close(1, h.PRECONDITION_FAILED)
            self.assertEqual((close.class_id, close.method_id), (90, 20))
            r.close_cleanly()

    def test_select_twice_ok(self):
        self.ch.tx_select()
        self.ch.tx_select()
        self.ch.tx_commit()


if __name__ == "__main__":
    unittest.main()
