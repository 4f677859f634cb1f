"""Publisher confirms (confirm.select, basic.ack/nack from the server)."""
import unittest

import pika
import pika.spec as S
from pika import exceptions as pex

import harness as h


def read_confirms(r, upto, timeout=10):
    """Reads frames until the server has confirmed every tag <= upto.
    Returns (confirms, other_frames): confirms as (kind, tag, multiple)."""
    confirms, others, covered = [], [], 0
    while covered < upto:
        f = r.recv_method(timeout)
        m = getattr(f, "method", None)
        if isinstance(m, (S.Basic.Ack, S.Basic.Nack)):
            confirms.append((type(m).__name__.lower(), m.delivery_tag, m.multiple))
            covered = max(covered, m.delivery_tag)
        else:
            others.append(f)
    return confirms, others


def expand(confirms):
    """Tag -> kind, expanding multiple confirms; fails on duplicates."""
    out, last = {}, 0
    for kind, tag, multiple in confirms:
        first = last + 1 if multiple else tag
        for t in range(first, tag + 1):
            if t in out:
                raise AssertionError("tag %d confirmed twice: %r" % (t, confirms))
            out[t] = kind
        last = max(last, tag)
    return out


class ConfirmTest(h.BrokerTest):
    def raw(self, **kw):
        r = h.RawClient()
        self.addCleanup(r.close)
        r.handshake(**kw)
        r.open_channel(1)
        return r


class Confirms(ConfirmTest):
    def test_select_ok(self):
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)  # again: fine
        r.close_cleanly()

    def test_routed_messages_acked_with_sequential_tags(self):
        q = self.queue()
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        for i in range(3):
            r.publish(1, "", q, b"m")
            confirms, _ = read_confirms(r, i + 1)
            self.assertEqual(confirms, [("ack", i + 1, False)])
        r.close_cleanly()

    def test_burst_all_acked_once(self):
        q = self.queue()
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        for _ in range(500):
            r.publish(1, "", q, b"m")
        confirms, others = read_confirms(r, 500)
        self.assertEqual(others, [])
        tags = [t for _, t, _ in confirms]
        self.assertEqual(tags, sorted(tags))
        self.assertEqual(expand(confirms), {t: "ack" for t in range(1, 501)})
        r.close_cleanly()

    def test_burst_uses_multiple_acks(self):
        # RabbitMQ batches confirms of a burst (about one ack per 10 messages).
        # The burst goes out in one write: sent one publish per write, a broker
        # that keeps up reads (and confirms) them one by one, which is right too.
        q = self.queue()
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        burst = []
        r.send = burst.append
        for _ in range(1000):
            r.publish(1, "", q, b"m")
        del r.send
        r.send(b"".join(burst))
        confirms, _ = read_confirms(r, 1000)
        self.assertTrue(any(multiple for _, _, multiple in confirms), confirms[:10])
        self.assertLess(len(confirms), 1000)
        r.close_cleanly()

    def test_unroutable_acked(self):
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.publish(1, self.exchange("fanout"), "", b"lost")
        confirms, _ = read_confirms(r, 1)
        self.assertEqual(confirms, [("ack", 1, False)])
        r.close_cleanly()

    def test_mandatory_unroutable_return_then_ack(self):
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.publish(1, "", h.unique("missing"), b"m", mandatory=True)
        ret = r.recv_content()
        self.assertIsInstance(ret.method, S.Basic.Return)
        self.assertEqual(ret.method.reply_code, h.NO_ROUTE)
        self.assertEqual(ret.body, b"m")
        confirms, others = read_confirms(r, 1)
        self.assertEqual((confirms, others), ([("ack", 1, False)], []))
        r.close_cleanly()

    def test_publish_before_select_not_confirmed(self):
        q = self.queue()
        r = self.raw()
        r.publish(1, "", q, b"before-1")
        r.publish(1, "", q, b"before-2")
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.publish(1, "", q, b"after")
        confirms, _ = read_confirms(r, 1)
        self.assertEqual(confirms, [("ack", 1, False)])
        r.close_cleanly()
        self.assertEqual(self.count(q), 3)

    def test_select_nowait(self):
        q = self.queue()
        r = self.raw()
        r.send_method(1, S.Confirm.Select(nowait=True))
        r.publish(1, "", q, b"m")
        confirms, others = read_confirms(r, 1)
        self.assertEqual((confirms, others), ([("ack", 1, False)], []))
        r.close_cleanly()

    def test_fanout_to_many_queues_one_ack(self):
        x = self.exchange("fanout")
        for _ in range(5):
            self.bound_queue(x)
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.publish(1, x, "", b"m")
        r.publish(1, x, "", b"m")
        confirms, _ = read_confirms(r, 2)
        self.assertEqual(expand(confirms), {1: "ack", 2: "ack"})
        r.close_cleanly()

    def test_publish_seq_independent_of_delivery_tags(self):
        q = self.queue()
        self.publish("", q, b"waiting")
        h.sync(self.ch)
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.send_method(1, S.Basic.Get(queue=q))
        got = r.recv_content()
        self.assertEqual(got.method.delivery_tag, 1)
        r.publish(1, "", q, b"new")
        confirms, _ = read_confirms(r, 1)
        self.assertEqual(confirms, [("ack", 1, False)])
        r.send_method(1, S.Basic.Ack(delivery_tag=1))
        r.close_cleanly()

    def test_rejected_publish_is_nacked(self):
        # A full queue with x-overflow=reject-publish nacks; RabbitMQ sets
        # requeue=true in the nack it sends.
        q = self.queue(arguments={"x-max-length": 1, "x-overflow": "reject-publish"})
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        for _ in range(3):
            r.publish(1, "", q, b"m")
        confirms, _ = read_confirms(r, 3)
        self.assertEqual(expand(confirms), {1: "ack", 2: "nack", 3: "nack"})
        r.close_cleanly()

    def test_publish_to_missing_exchange_closes_channel(self):
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.publish(1, h.unique("missing"), "k", b"m")
        r.expect_channel_close(1, h.NOT_FOUND)
        r.close_cleanly()

    def test_tx_select_on_confirm_channel_406(self):
        r = self.raw()
        r.rpc(1, S.Confirm.Select(), S.Confirm.SelectOk)
        r.send_method(1, S.Tx.Select())
        close = r.expect_channel_close(1, h.PRECONDITION_FAILED)
        self.assertEqual(close.reply_text, "PRECONDITION_FAILED - cannot switch from confirm to tx mode")
        self.assertEqual((close.class_id, close.method_id), (90, 10))
        r.close_cleanly()


class PikaConfirms(h.BrokerTest):
    def test_pika_confirm_delivery(self):
        q = self.queue()
        self.ch.confirm_delivery()
        for i in range(20):
            self.ch.basic_publish("", q, str(i).encode())  # raises on nack
        self.assertEqual(self.count(q), 20)

    def test_pika_unroutable_mandatory(self):
        self.ch.confirm_delivery()
        with self.assertRaises(pex.UnroutableError):
            self.ch.basic_publish("", h.unique("missing"), b"m", mandatory=True)
        h.sync(self.ch)

    def test_pika_nack(self):
        q = self.queue(arguments={"x-max-length": 0, "x-overflow": "reject-publish"})
        self.ch.confirm_delivery()
        with self.assertRaises(pex.NackError):
            self.ch.basic_publish("", q, b"m", properties=pika.BasicProperties())


if __name__ == "__main__":
    unittest.main()
