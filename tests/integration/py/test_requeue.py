"""Requeue order: a requeued message goes back to its original place in the
queue, whichever way it comes back (single rejects in any order, a multiple
nack, basic.recover, a channel or connection closing, a cancelled consumer's
channel closing), within its priority level, and with a paged-out backlog
behind it. Dead-lettering several at once keeps their order too. Checked
against RabbitMQ 3.10 (WARREN_TEST_TARGET=127.0.0.1:5672)."""
import socket
import time
import unittest

import harness as h


class RequeueOrder(h.BrokerTest):
    def fill(self, q, bodies, **props):
        for b in bodies:
            self.publish("", q, b.encode(), properties=h.pika.BasicProperties(**props) if props else None)
        h.sync(self.ch)

    def take(self, q, n, ch=None):
        """n basic.gets without ack: [(tag, body)]."""
        ch = ch or self.ch
        out = []
        for _ in range(n):
            m, _, b = ch.basic_get(q)
            self.assertIsNotNone(m)
            out.append((m.delivery_tag, b.decode()))
        return out

    def rest(self, q, ch=None):
        """Everything left, acked: bodies with "r" appended when redelivered."""
        return [b.decode() + ("r" if m.redelivered else "")
                for m, _, b in h.get_all(ch or self.ch, q)]

    def test_single_rejects_in_delivery_order(self):
        # kombu's pattern: reject each unacked message with requeue, in turn
        q = self.queue()
        self.fill(q, "abcdef")
        for tag, _ in self.take(q, 4):
            self.ch.basic_reject(tag, requeue=True)
        self.assertEqual(self.rest(q), ["ar", "br", "cr", "dr", "e", "f"])

    def test_single_rejects_in_any_order(self):
        q = self.queue()
        self.fill(q, "abcdef")
        got = self.take(q, 4)
        for i in (1, 3, 0, 2):
            self.ch.basic_nack(got[i][0], requeue=True)
        self.assertEqual(self.rest(q), ["ar", "br", "cr", "dr", "e", "f"])

    def test_requeue_among_later_deliveries(self):
        # c is taken after a and b came back once; b goes back again
        q = self.queue()
        self.fill(q, "abcd")
        got = self.take(q, 2)
        self.ch.basic_reject(got[0][0], requeue=True)
        again = self.take(q, 3)  # a (again), c, d
        self.assertEqual([b for _, b in again], ["a", "c", "d"])
        self.ch.basic_reject(got[1][0], requeue=True)  # b
        self.ch.basic_reject(again[2][0], requeue=True)  # d
        self.ch.basic_reject(again[0][0], requeue=True)  # a
        self.ch.basic_ack(again[1][0])  # c
        self.assertEqual(self.rest(q), ["ar", "br", "dr"])

    def test_multiple_nack(self):
        q = self.queue()
        self.fill(q, "abcdef")
        got = self.take(q, 4)
        self.ch.basic_nack(got[2][0], multiple=True, requeue=True)  # a, b, c
        self.ch.basic_reject(got[3][0], requeue=True)
        self.assertEqual(self.rest(q), ["ar", "br", "cr", "dr", "e", "f"])

    def test_basic_recover(self):
        q = self.queue()
        self.fill(q, "abcde")
        got = self.take(q, 3)
        self.ch.basic_ack(got[1][0])
        self.ch.basic_recover(requeue=True)
        self.assertEqual(self.rest(q), ["ar", "cr", "d", "e"])

    def test_channel_close_returns_deliveries_in_place(self):
        q = self.queue()
        self.fill(q, "abcdef")
        ch2 = self.conn.channel()
        ch2.basic_qos(prefetch_count=3)
        seen = h.Collector()
        ch2.basic_consume(q, seen)
        self.assertTrue(h.wait_for(self.conn, lambda: len(seen.msgs) == 3))
        ch2.basic_ack(seen.msgs[1][0].delivery_tag, multiple=False)  # b
        self.assertTrue(h.wait_for(self.conn, lambda: len(seen.msgs) == 4))  # d took its slot
        ch2.close()
        self.assertEqual(self.wait_count(q, 5), 5)
        self.assertEqual(self.rest(q), ["ar", "cr", "dr", "e", "f"])

    def test_cancelled_consumer_then_channel_close(self):
        q = self.queue()
        self.fill(q, "abcde")
        ch2 = self.conn.channel()
        ch2.basic_qos(prefetch_count=2)
        seen = h.Collector()
        tag = ch2.basic_consume(q, seen)
        self.assertTrue(h.wait_for(self.conn, lambda: len(seen.msgs) == 2))
        ch2.basic_cancel(tag)
        # a cancelled consumer's deliveries stay unacked on the channel
        self.assertEqual(self.count(q), 3)
        ch2.close()
        self.assertEqual(self.wait_count(q, 5), 5)
        self.assertEqual(self.rest(q), ["ar", "br", "c", "d", "e"])

    def test_connection_lost_returns_deliveries_in_place(self):
        q = self.queue()
        self.fill(q, "abcde")
        other = self.connect()
        ch2 = other.channel()
        got = self.take(q, 3, ch=ch2)
        ch2.basic_reject(got[1][0], requeue=True)  # b back first
        h.sync(ch2)
        # the client dies without closing: the socket just goes
        other._impl._transport._sock.shutdown(socket.SHUT_RDWR)
        self.assertEqual(self.wait_count(q, 5), 5)
        self.assertEqual(self.rest(q), ["ar", "br", "cr", "d", "e"])

    def test_priority_levels(self):
        q = self.queue(arguments={"x-max-priority": 5})
        for b, p in (("l1", 1), ("h1", 5), ("l2", 1), ("h2", 5)):
            self.publish("", q, b.encode(), properties=h.pika.BasicProperties(priority=p))
        h.sync(self.ch)
        got = self.take(q, 4)
        self.assertEqual([b for _, b in got], ["h1", "h2", "l1", "l2"])
        for i in (0, 2, 1, 3):
            self.ch.basic_reject(got[i][0], requeue=True)
        self.assertEqual(self.rest(q), ["h1r", "h2r", "l1r", "l2r"])

    def test_paged_backlog_behind(self):
        # a durable queue keeps only the head of a persistent backlog in RAM
        q = self.queue(durable=True)
        bodies = ["m%03d" % i for i in range(300)]
        self.fill(q, bodies, delivery_mode=2)
        got = self.take(q, 4)
        for i in (0, 2, 1, 3):
            self.ch.basic_reject(got[i][0], requeue=True)
        out = self.rest(q)
        self.assertEqual(out[:5], ["m000r", "m001r", "m002r", "m003r", "m004"])
        self.assertEqual([b.rstrip("r") for b in out], bodies)

    def test_multiple_nack_dead_letters_in_order(self):
        dlx = self.exchange("fanout")
        dlq = self.bound_queue(dlx)
        q = self.queue(arguments={"x-dead-letter-exchange": dlx})
        self.fill(q, ["n0", "n1", "n2", "n3"])
        got = self.take(q, 4)
        self.ch.basic_nack(got[3][0], multiple=True, requeue=False)
        deadline = time.monotonic() + 5
        while self.count(dlq) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual([b for _, _, b in h.get_all(self.ch, dlq)], [b"n0", b"n1", b"n2", b"n3"])


if __name__ == "__main__":
    unittest.main()
