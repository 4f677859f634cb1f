"""Paging: a durable queue keeps only the head of its backlog in RAM and reads
persistent messages back from the journal when their turn comes. These
check that what comes back is what went in, in order, that limits, TTLs and
priorities still hold for paged-out messages, across a restart too, and
that the broker's memory does not follow the backlog. Each test starts a
private Warren."""
import os
import re
import signal
import unittest

import pika

import harness as h

PERSISTENT = pika.BasicProperties(delivery_mode=2)


def persistent(i, **kw):
    return pika.BasicProperties(delivery_mode=2, message_id="m%d" % i,
                                headers={"i": i}, **kw)


def body(i, size=100):
    stamp = b"%08d" % i
    return (stamp * (size // len(stamp) + 1))[:size]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


class Paging(h.DataDirTest):
    def consume_all(self, ch, queue, n):
        got = []
        for method, props, payload in ch.consume(queue, inactivity_timeout=5):
            self.assertIsNotNone(method, "only %d of %d arrived" % (len(got), n))
            got.append((method, props, payload))
            ch.basic_ack(method.delivery_tag)
            if len(got) == n:
                break
        ch.cancel()
        return got

    @h.needs_own_broker
    def test_backlog_comes_back_in_order_with_bodies_and_properties(self):
        signal.alarm(90)  # 84 MB of bodies through pika, twice: see below
        conn, ch = self.start()
        ch.queue_declare("pg.q", durable=True)
        n = 3000
        for i in range(n):
            size = (0, 1, 100, 5000, 140000)[i % 5]  # empty, tiny, multi-frame bodies
            props = persistent(i) if i % 7 else pika.BasicProperties(headers={"i": i})
            ch.basic_publish("", "pg.q", body(i, size), props)
        self.assertEqual(ch.queue_declare("pg.q", passive=True).method.message_count, n)
        got = [ch.basic_get("pg.q", auto_ack=True) for _ in range(10)]
        got = [(m, p, b) for m, p, b in got] + self.consume_all(ch, "pg.q", n - 10)
        for i, (method, props, payload) in enumerate(got):
            self.assertEqual(props.headers, {"i": i})
            self.assertEqual(payload, body(i, (0, 1, 100, 5000, 140000)[i % 5]))
            self.assertFalse(method.redelivered)
        self.assertEqual(ch.queue_declare("pg.q", passive=True).method.message_count, 0)

    @h.needs_own_broker
    def test_memory_does_not_follow_the_backlog(self):
        # Under AddressSanitizer freed memory waits in a quarantine (256 MB)
        # before reuse, so RSS would follow what was freed: turn it off.
        asan = os.environ.get("ASAN_OPTIONS", "")
        self.env = {"ASAN_OPTIONS": (asan + ":" if asan else "") + "quarantine_size_mb=0"}
        # 64 MB through pika: a few seconds quiet, past run_py.py's 20 s on a
        # machine loaded with make test's ASan build and fuzzers (seen; the
        # test above too)
        signal.alarm(90)
        conn, ch = self.start()
        ch.queue_declare("pg.big", durable=True)
        before = rss_kib(self.proc.proc.pid)
        n, size = 4000, 16000  # 64 MB of bodies
        for i in range(n):
            ch.basic_publish("", "pg.big", body(i, size), PERSISTENT)
        grown = rss_kib(self.proc.proc.pid) - before
        self.assertLess(grown, n * size // 1024 // 4,
                        "RSS grew by %d KiB for %d KiB of bodies" % (grown, n * size // 1024))
        got = self.consume_all(ch, "pg.big", n)
        self.assertEqual([p for _, _, p in got[:3]], [body(i, size) for i in range(3)])
        self.assertEqual(got[-1][2], body(n - 1, size))

    @h.needs_own_broker
    def test_restart_restores_backlog_with_delivery_state(self):
        conn, ch = self.start()
        ch.queue_declare("pg.r", durable=True)
        n = 2000
        for i in range(n):
            ch.basic_publish("", "pg.r", body(i), persistent(i))
        ch.basic_qos(prefetch_count=5)
        for method, props, payload in ch.consume("pg.r", inactivity_timeout=5):
            self.assertEqual(payload, body(0))
            ch.basic_ack(method.delivery_tag)  # message 0 acked, 1..5 delivered unacked
            break
        h.drain(conn, 0.3)
        conn, ch = self.restart(conn)
        self.assertEqual(ch.queue_declare("pg.r", passive=True).method.message_count, n - 1)
        got = self.consume_all(ch, "pg.r", n - 1)
        self.assertEqual([p.headers["i"] for _, p, _ in got], list(range(1, n)))
        self.assertEqual([m.redelivered for m, _, _ in got[:5]], [True] * 5)
        self.assertFalse(any(m.redelivered for m, _, _ in got[5:]))
        self.assertEqual(got[-1][2], body(n - 1))

    @h.needs_own_broker
    def test_max_length_bytes_counts_paged_messages(self):
        conn, ch = self.start()
        ch.queue_declare("pg.len", durable=True, arguments={"x-max-length-bytes": 100 * 1000})
        for i in range(500):
            ch.basic_publish("", "pg.len", body(i, 1000), persistent(i))
        self.assertEqual(ch.queue_declare("pg.len", passive=True).method.message_count, 100)
        conn, ch = self.restart(conn)
        ch.basic_publish("", "pg.len", body(500, 1000), persistent(500))
        got = self.consume_all(ch, "pg.len", 100)
        self.assertEqual([p.headers["i"] for _, p, _ in got], list(range(401, 501)))

    @h.needs_own_broker
    def test_paged_messages_expire_to_the_dead_letter_queue(self):
        conn, ch = self.start()
        ch.queue_declare("pg.dlq", durable=True)
        ch.queue_declare("pg.ttl", durable=True, arguments={
            "x-message-ttl": 300, "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": "pg.dlq"})
        for i in range(400):
            ch.basic_publish("", "pg.ttl", body(i), persistent(i))
        h.wait_for(conn, lambda: ch.queue_declare("pg.dlq", passive=True)
                   .method.message_count == 400, timeout=10)
        got = self.consume_all(ch, "pg.dlq", 400)
        self.assertEqual([p.headers["i"] for _, p, _ in got], list(range(400)))
        self.assertEqual(got[399][2], body(399))
        self.assertEqual(got[0][1].headers["x-death"][0]["reason"], "expired")

    @h.needs_own_broker
    def test_priorities_hold_for_paged_messages_across_a_restart(self):
        conn, ch = self.start()
        ch.queue_declare("pg.pri", durable=True, arguments={"x-max-priority": 3})
        n = 600
        for i in range(n):
            ch.basic_publish("", "pg.pri", body(i), persistent(i, priority=i % 5))
        conn, ch = self.restart(conn)
        got = self.consume_all(ch, "pg.pri", n)
        order = [p.headers["i"] for _, p, _ in got]
        # priorities above the maximum count as the maximum; FIFO within a level
        expect = sorted(range(n), key=lambda i: (-min(i % 5, 3), i))
        self.assertEqual(order, expect)

    @h.needs_own_broker
    def test_purge_drops_paged_messages_for_good(self):
        conn, ch = self.start()
        ch.queue_declare("pg.purge", durable=True)
        for i in range(1000):
            ch.basic_publish("", "pg.purge", body(i), persistent(i))
        self.assertEqual(ch.queue_purge("pg.purge").method.message_count, 1000)
        ch.basic_publish("", "pg.purge", body(1000), persistent(1000))
        conn, ch = self.restart(conn)
        got = self.consume_all(ch, "pg.purge", 1)
        self.assertEqual(got[0][1].headers["i"], 1000)
        self.assertEqual(ch.queue_declare("pg.purge", passive=True).method.message_count, 0)

    @h.needs_own_broker
    def test_sparse_segments_are_compacted_and_survive_a_crash(self):
        self.settings = ["journal.segment_size=1048576"]
        conn, ch = self.start()
        ch.queue_declare("pg.cmp", durable=True)
        n = 3000
        for i in range(n):
            ch.basic_publish("", "pg.cmp", body(i, 1000), persistent(i))
        held = []  # every tenth stays unacked: the segments become sparse
        for method, props, payload in ch.consume("pg.cmp", inactivity_timeout=5):
            self.assertIsNotNone(method)
            if props.headers["i"] % 10:
                ch.basic_ack(method.delivery_tag)
            else:
                held.append(props.headers["i"])
            if props.headers["i"] == n - 1:
                break
        self.assertEqual(len(held), n // 10)
        seg1 = os.path.join(self.data_dir, "journal", "00000001.seg")
        h.wait_for(conn, lambda: not os.path.exists(seg1), timeout=10)
        self.assertTrue(self.proc.wait_log("segment 1 compacted"), self.proc.log_tail())
        done = [line for line in self.proc.log_lines if "segment 1 compacted" in line]
        # in several bounded steps (a 1 MiB segment is read 256 KiB a step),
        # none holding the loop for long: a generous bound for ASan on a busy
        # machine (the log line gives the figure)
        steps, longest_us = map(int, re.search(r"in (\d+) steps of at most (\d+) us", done[0]).groups())
        self.assertGreater(steps, 1, done[0])
        self.assertLess(longest_us, 1000000, done[0])
        self.kill()  # SIGKILL: recovery from the compacted journal
        conn, ch = self.start()
        got = self.consume_all(ch, "pg.cmp", len(held))
        self.assertEqual([p.headers["i"] for _, p, _ in got], held)
        self.assertTrue(all(m.redelivered for m, _, _ in got))
        self.assertEqual([b for _, _, b in got], [body(i, 1000) for i in held])


if __name__ == "__main__":
    unittest.main()
