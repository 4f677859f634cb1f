"""Expiry deep in a backlog: a message whose own expiration is short expires
on time even behind thousands of long-lived (and paged-out) ones, is
dead-lettered with x-death reason expired, and the rest keep their order;
a mass expiry works in slices, so another queue's deliveries go on
meanwhile; restarts and crashes keep expirations and what expired. Each
test starts a private Warren."""
import base64
import http.client
import json
import signal
import time
import unittest

import pika
import pika.spec as S

import harness as h

DLQ = "ex.dlq"
LONG = "600000"  # ten minutes: never fires during a test


def props(i, **kw):
    return pika.BasicProperties(delivery_mode=2, headers={"i": i}, **kw)


class Expiry(h.DataDirTest):
    confirm = False

    def fence(self, conn):
        """A confirmed persistent publish: the journal has synced what was
        appended before it."""
        ch = conn.channel()
        ch.confirm_delivery()
        ch.queue_declare("ex.fence", durable=True)
        ch.basic_publish("", "ex.fence", b"fence", pika.BasicProperties(delivery_mode=2))
        ch.close()

    def count(self, ch, queue):
        return ch.queue_declare(queue, passive=True).method.message_count

    def declare_with_dlq(self, ch, queue, **args):
        ch.queue_declare(DLQ, durable=True)
        args.update({"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DLQ})
        ch.queue_declare(queue, durable=True, arguments=args)

    def publish_backlog(self, ch, queue, ids, short):
        """Persistent messages with header i for each of `ids`; those in
        `short` get that expiration (ms), the others none."""
        for i in ids:
            kw = {"expiration": str(short[i])} if i in short else {}
            ch.basic_publish("", queue, b"%08d" % i, props(i, **kw))

    def consume_order(self, ch, queue, n):
        ch.basic_qos(prefetch_count=500)
        got = []
        for method, p, body in ch.consume(queue, inactivity_timeout=5):
            self.assertIsNotNone(method, "only %d of %d arrived" % (len(got), n))
            got.append(p.headers["i"])
            if len(got) % 250 == 0 or len(got) == n:
                ch.basic_ack(method.delivery_tag, multiple=True)
            if len(got) == n:
                break
        ch.cancel()
        return got

    def dead_letters(self, ch, n):
        out = []
        for _ in range(n):
            method, p, body = ch.basic_get(DLQ, auto_ack=True)
            self.assertIsNotNone(method, "%d of %d in the dead-letter queue" % (len(out), n))
            out.append((p, body))
        return out

    @h.needs_own_broker
    def test_short_expirations_deep_in_a_paged_backlog_expire_on_time(self):
        conn, ch = self.start()
        self.declare_with_dlq(ch, "ex.deep")
        # behind 10,000 long-lived (paged-out) messages, three short ones
        # with long-lived ones between and after them; they expire in the
        # order of their times, not of their places
        short = {10000: 1200, 10501: 800, 11002: 1600}
        due = {}
        for i in range(12000):
            if i in short:
                due[i] = time.monotonic() + short[i] / 1000  # the broker enqueues it later
            self.publish_backlog(ch, "ex.deep", [i], short)
        self.fence(conn)
        n = 12000
        self.assertEqual(self.count(ch, "ex.deep"), n)
        seen = {}
        deadline = time.monotonic() + 5
        while len(seen) < len(short) and time.monotonic() < deadline:
            left = n - self.count(ch, "ex.deep")
            if left:
                seen.setdefault(left, time.monotonic())
            time.sleep(0.005)
        order = sorted(short, key=due.get)
        self.assertEqual(sorted(seen), [1, 2, 3], seen)
        # each at its time, not before it, and not when its place in the
        # backlog comes (the long-lived ones before it live ten minutes): a
        # generous bound, for a busy machine where a poll waits for a CPU
        for k, i in enumerate(order, 1):
            late = seen[k] - due[i]
            self.assertGreater(late, -0.005, (i, late))
            self.assertLess(late, 1.0, (i, late))
        self.assertEqual(self.count(ch, DLQ), len(short))
        deaths = self.dead_letters(ch, len(short))
        self.assertEqual([p.headers["i"] for p, _ in deaths], order)
        for p, body in deaths:
            d = p.headers["x-death"][0]
            self.assertEqual((d["reason"], d["queue"], d["count"]), ("expired", "ex.deep", 1))
            self.assertEqual(d["original-expiration"], str(short[p.headers["i"]]))
            self.assertEqual(body, b"%08d" % p.headers["i"])
            self.assertIsNone(p.expiration)
        rest = self.consume_order(ch, "ex.deep", n - len(short))
        self.assertEqual(rest, [i for i in range(n) if i not in short])

    @h.needs_own_broker
    def test_expirations_deep_in_the_backlog_without_a_dead_letter_exchange(self):
        conn, ch = self.start()
        ch.queue_declare("ex.drop", durable=True)
        n = 5000
        short = {i: 200 for i in range(1000, n, 1000)}
        self.publish_backlog(ch, "ex.drop", range(n), short)
        self.fence(conn)
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, "ex.drop") == n - len(short), timeout=3))
        rest = self.consume_order(ch, "ex.drop", n - len(short))
        self.assertEqual(rest, [i for i in range(n) if i not in short])

    def put_policy(self, name, pattern, definition):
        """Sends the request and returns its connection: the caller reads
        the reply (c.getresponse()) when it likes."""
        auth = base64.b64encode(b"guest:guest").decode()
        c = http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port, timeout=10)
        body = json.dumps({"pattern": pattern, "definition": definition, "apply-to": "queues"})
        c.request("PUT", "/api/policies/%2F/" + name, body,
                  {"Authorization": "Basic " + auth, "Content-Type": "application/json"})
        return c

    def fill_fast(self, queue, n):
        """n transient messages in big writes (pika alone is too slow)."""
        raw = h.RawClient(self.addr)
        raw.handshake()
        raw.open_channel(1)
        one = (h.rawamqp.method_bytes(1, S.Basic.Publish(exchange="", routing_key=queue)) +
               h.rawamqp.header_bytes(1, 8) + h.rawamqp.body_bytes(1, b"12345678"))
        for _ in range(n // 10000):
            raw.send(one * 10000)
        raw.close_cleanly()

    @h.needs_own_broker
    def test_mass_expiry_leaves_another_queue_flowing(self):
        # 200,000 messages filled and expired: seconds quiet, more under ASan
        # on a loaded machine (seen: 190,528 of them after 10 s)
        signal.alarm(120)
        conn, ch = self.start()
        n = 200000
        ch.queue_declare(DLQ)
        ch.queue_declare("ex.mass", arguments={"x-dead-letter-exchange": "",
                                               "x-dead-letter-routing-key": DLQ})
        ch.queue_declare("ex.flow")
        self.fill_fast("ex.mass", n)
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, "ex.mass") == n, timeout=15))
        delivered = []
        ch.basic_consume("ex.flow", lambda *a: delivered.append(1), auto_ack=True)
        pub = conn.channel()

        def flow(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                pub.basic_publish("", "ex.flow", b"f")
                conn.process_data_events(time_limit=0.001)
        flow(0.3)
        # a policy's TTL applies to what is queued: all expire at once. The
        # expiry works in slices, so between two of them the broker answers
        # this client's requests and delivers the other queue's messages:
        # polls see the dead-letter queue half filled, and deliveries of
        # ex.flow arrive between two such polls. (In one go, every poll would
        # see none or all of them.) How quickly the flow is served meanwhile
        # is a figure for tests/bench/lifecycle.sh mass, not asserted here.
        http = self.put_policy("ex-mass", "^ex\\.mass$", {"message-ttl": 1})
        t_policy = time.monotonic()
        done, partial_polls, flowed, seen_at_partial = None, 0, 0, None
        while done is None and time.monotonic() - t_policy < 90:
            flow(0.002)
            dead = self.count(ch, DLQ)
            if dead == n:
                done = time.monotonic() - t_policy
            elif dead > 0:
                partial_polls += 1
                if seen_at_partial is not None:
                    flowed += len(delivered) - seen_at_partial
                seen_at_partial = len(delivered)
        self.assertIn(http.getresponse().status, (201, 204))
        http.close()
        self.assertIsNotNone(done, "%d dead-lettered" % self.count(ch, DLQ))
        self.assertEqual(self.count(ch, "ex.mass"), 0)
        why = "%d expired in %.0f ms; %d polls saw it half done, %d deliveries of the other queue " \
              "between them" % (n, done * 1000, partial_polls, flowed)
        self.assertGreaterEqual(partial_polls, 2, why)
        self.assertGreater(flowed, 0, why)
        method, p, body = ch.basic_get(DLQ, auto_ack=True)
        self.assertEqual(p.headers["x-death"][0]["reason"], "expired")
        self.assertEqual(p.headers["x-death"][0]["queue"], "ex.mass")

    @h.needs_own_broker
    def test_expirations_survive_a_crash_and_what_expired_stays_gone(self):
        conn, ch = self.start()
        self.declare_with_dlq(ch, "ex.crash")
        n = 6000
        short = {1500: 1500, 4500: 1200}
        self.publish_backlog(ch, "ex.crash", range(n), short)
        self.fence(conn)
        self.kill()  # before anything expired
        conn, ch = self.start()
        t0 = time.monotonic()
        self.assertEqual(self.count(ch, "ex.crash"), n)
        # their expiration counts again from the restart, as the queue's TTL does
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, "ex.crash") == n - 1, timeout=5))
        first = time.monotonic() - t0
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, "ex.crash") == n - 2, timeout=5))
        self.assertLess(first, 1.2 + 1.0)  # at its time (generous: a busy machine), not the other's
        self.assertEqual(self.count(ch, DLQ), 2)
        self.fence(conn)
        self.kill()
        conn, ch = self.start()
        self.assertEqual(self.count(ch, "ex.crash"), n - 2)
        deaths = self.dead_letters(ch, 2)
        self.assertEqual([p.headers["i"] for p, _ in deaths], [4500, 1500])
        self.assertEqual(deaths[0][0].headers["x-death"][0]["reason"], "expired")
        rest = self.consume_order(ch, "ex.crash", n - 2)
        self.assertEqual(rest, [i for i in range(n) if i not in short])
        conn.close()
        self.stop()  # a clean stop and start: nothing comes back either
        conn, ch = self.start()
        self.assertEqual(self.count(ch, "ex.crash"), 0)
        self.assertEqual(self.count(ch, DLQ), 0)

    @h.needs_own_broker
    def test_queue_ttl_restarts_from_recovery_and_expires_everything(self):
        conn, ch = self.start()
        self.declare_with_dlq(ch, "ex.qttl", **{"x-message-ttl": 1500})
        n = 3000
        self.publish_backlog(ch, "ex.qttl", range(n), {})
        self.fence(conn)
        conn.close()
        self.stop()
        conn, ch = self.start()
        self.assertEqual(self.count(ch, "ex.qttl"), n)
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, DLQ) == n, timeout=5))
        self.assertEqual(self.count(ch, "ex.qttl"), 0)
        deaths = self.dead_letters(ch, 5)
        self.assertEqual([p.headers["i"] for p, _ in deaths], list(range(5)))

    def rchar(self):
        """Bytes the broker has read with read/pread (the journal's reads)."""
        with open("/proc/%d/io" % self.proc.proc.pid) as f:
            return int(next(l for l in f if l.startswith("rchar:")).split()[1])

    @h.needs_own_broker
    def test_paged_messages_expire_without_their_bodies_being_read(self):
        conn, ch = self.start()
        ch.queue_declare("ex.unread", durable=True, arguments={"x-message-ttl": 1500})
        n, size = 2000, 20000  # 40 MB of bodies
        for i in range(n):
            ch.basic_publish("", "ex.unread", b"x" * size, props(i))
        self.fence(conn)
        ch.queue_purge("ex.fence")  # else its message, live among the expired, is compacted (read)
        conn.close()
        self.stop()
        conn, ch = self.start()  # every message paged out, its TTL counted from now
        self.assertEqual(self.count(ch, "ex.unread"), n)
        before = self.rchar()
        self.assertTrue(h.wait_for(conn, lambda: self.count(ch, "ex.unread") == 0, timeout=5))
        read = self.rchar() - before
        self.assertLess(read, n * size // 10, "%d bytes read to drop %d bytes" % (read, n * size))


if __name__ == "__main__":
    unittest.main()
