"""Dead-lettering between durable queues survives a restart and a crash: a
persistent message dead-lettered from a durable queue (rejected without
requeue, expired by TTL, dropped by x-max-length, refused by
reject-publish-dlx) into a durable dead-letter queue is journaled there, with
its x-death headers, and is no longer in the source. Each test starts a
private Warren, stops it with SIGTERM or kills it with SIGKILL, and starts it
again on the same data directory."""
import time
import unittest

import pika

import harness as h

SRC, DLQ, FENCE = "dld.src", "dld.dlq", "dld.fence"


class DurableDeadLetter(h.DataDirTest):
    def restart(self, conn, kill):
        """SIGTERM (clean stop) or SIGKILL; the journal must have synced the
        dead-letter first: a confirmed publish appended after it is a fence
        (the journal syncs in order)."""
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare(FENCE, durable=True)
        ch.basic_publish("", FENCE, b"fence", pika.BasicProperties(delivery_mode=2))
        if kill:
            self.kill()
        else:
            conn.close()
            self.stop()
        return self.start()

    def declare(self, ch, **src_args):
        ch.queue_declare(DLQ, durable=True)
        args = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DLQ}
        args.update(src_args)
        ch.queue_declare(SRC, durable=True, arguments=args)

    def publish(self, ch, body, **props):
        ch.basic_publish("", SRC, body, pika.BasicProperties(delivery_mode=2, **props))

    def wait_count(self, conn, ch, queue, n):
        h.wait_for(conn, lambda: ch.queue_declare(queue, passive=True).method.message_count == n,
                   timeout=10)

    def check_dead_lettered(self, ch, reason, body, source_left=0):
        self.assertEqual(ch.queue_declare(SRC, passive=True).method.message_count, source_left)
        method, props, payload = ch.basic_get(DLQ, auto_ack=True)
        self.assertIsNotNone(method, "the dead-lettered message is not in the DLQ after restart")
        self.assertEqual(payload, body)
        self.assertEqual(props.delivery_mode, 2)
        death = props.headers["x-death"]
        self.assertEqual(len(death), 1)
        self.assertEqual(death[0]["reason"], reason)
        self.assertEqual(death[0]["queue"], SRC)
        self.assertEqual(death[0]["count"], 1)
        self.assertEqual(death[0]["exchange"], "")
        self.assertEqual(death[0]["routing-keys"], [SRC])
        self.assertEqual(props.headers["x-first-death-reason"], reason)
        self.assertEqual(props.headers["x-first-death-queue"], SRC)
        self.assertEqual(props.headers["x-first-death-exchange"], "")
        self.assertEqual(props.headers["app"], "kept")
        self.assertIsNone(ch.basic_get(DLQ, auto_ack=True)[0], "dead-lettered twice")

    def rejected(self, kill):
        conn, ch = self.start()
        self.declare(ch)
        self.publish(ch, b"poison", headers={"app": "kept"})
        method, _, _ = ch.basic_get(SRC)
        ch.basic_reject(method.delivery_tag, requeue=False)
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill)
        self.check_dead_lettered(ch, "rejected", b"poison")

    def expired(self, kill):
        conn, ch = self.start()
        self.declare(ch, **{"x-message-ttl": 50})
        self.publish(ch, b"stale", headers={"app": "kept"})
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill)
        self.check_dead_lettered(ch, "expired", b"stale")

    def expired_per_message(self, kill):
        conn, ch = self.start()
        self.declare(ch)
        self.publish(ch, b"stale", headers={"app": "kept"}, expiration="50")
        time.sleep(0.1)
        ch.queue_declare(SRC, passive=True)  # a stale head expires when looked at
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill)
        self.check_dead_lettered(ch, "expired", b"stale")

    def maxlen(self, kill):
        conn, ch = self.start()
        self.declare(ch, **{"x-max-length": 1})
        self.publish(ch, b"first", headers={"app": "kept"})
        self.publish(ch, b"second", headers={"app": "kept"})
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill)
        self.check_dead_lettered(ch, "maxlen", b"first", source_left=1)
        self.assertEqual(ch.basic_get(SRC, auto_ack=True)[2], b"second")

    def reject_publish_dlx(self, kill):
        conn, ch = self.start()
        self.declare(ch, **{"x-max-length": 1, "x-overflow": "reject-publish-dlx"})
        self.publish(ch, b"first", headers={"app": "kept"})
        with self.assertRaises(pika.exceptions.NackError):
            self.publish(ch, b"refused", headers={"app": "kept"})
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill)
        self.check_dead_lettered(ch, "maxlen", b"refused", source_left=1)
        self.assertEqual(ch.basic_get(SRC, auto_ack=True)[2], b"first")

    @h.needs_own_broker
    def test_rejected_survives_restart(self):
        self.rejected(kill=False)

    @h.needs_own_broker
    def test_rejected_survives_sigkill(self):
        self.rejected(kill=True)

    @h.needs_own_broker
    def test_expired_survives_restart(self):
        self.expired(kill=False)

    @h.needs_own_broker
    def test_expired_survives_sigkill(self):
        self.expired(kill=True)

    @h.needs_own_broker
    def test_expired_per_message_survives_sigkill(self):
        self.expired_per_message(kill=True)

    @h.needs_own_broker
    def test_maxlen_survives_restart(self):
        self.maxlen(kill=False)

    @h.needs_own_broker
    def test_maxlen_survives_sigkill(self):
        self.maxlen(kill=True)

    @h.needs_own_broker
    def test_reject_publish_dlx_survives_restart(self):
        self.reject_publish_dlx(kill=False)

    @h.needs_own_broker
    def test_reject_publish_dlx_survives_sigkill(self):
        self.reject_publish_dlx(kill=True)

    @h.needs_own_broker
    def test_dead_letter_to_a_transient_queue_settles_the_source(self):
        # the copy lives only in RAM there; the source must not bring it back
        conn, ch = self.start()
        ch.queue_declare(DLQ, durable=False)
        ch.queue_declare(SRC, durable=True, arguments={
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": DLQ})
        self.publish(ch, b"gone", headers={"app": "kept"})
        method, _, _ = ch.basic_get(SRC)
        ch.basic_reject(method.delivery_tag, requeue=False)
        self.wait_count(conn, ch, DLQ, 1)
        conn, ch = self.restart(conn, kill=True)
        self.assertEqual(ch.queue_declare(SRC, passive=True).method.message_count, 0)


if __name__ == "__main__":
    unittest.main()
