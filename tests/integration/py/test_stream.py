"""Stream queues over AMQP 0-9-1 (x-queue-type stream).

StreamRules runs on RabbitMQ 3.10 too (WARREN_TEST_TARGET=127.0.0.1:5672):
every code and text below was recorded from 3.10.8 (issue 20's probe).
StreamFilter covers RabbitMQ 3.13's filtering (x-stream-filter-value,
x-stream-filter, x-stream-match-unfiltered), which 3.10 lacks; Warren also
filters exactly. StreamDurability restarts and SIGKILLs a private Warren."""
import datetime
import time
import unittest

import pika
from pika import exceptions as pex

import harness as h

STREAM = {"x-queue-type": "stream"}


def stream_args(**extra):
    a = dict(STREAM)
    a.update(extra)
    return a


class StreamBase(h.BrokerTest):
    def stream(self, name=None, **args):
        return self.queue(name=name, durable=True, arguments=stream_args(**args))

    def publish_confirmed(self, q, bodies, ch=None, headers=None):
        """Publishes each body with a confirm (one chunk each, as the
        probe of 3.10 did), headers {'i': n} unless given."""
        ch = ch or self.conn.channel()
        ch.confirm_delivery()
        for i, b in enumerate(bodies):
            props = pika.BasicProperties(headers=headers(i) if headers else {"i": i})
            ch.basic_publish("", q, b, properties=props)
        return ch

    def consume(self, q, offset=None, n=None, prefetch=10, timeout=5.0, args=None, conn=None):
        """Consumes from `q` with x-stream-offset `offset`; returns the
        deliveries (headers, body) until `n` came or nothing more for a
        moment."""
        c = conn or self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=prefetch)
        a = dict(args or {})
        if offset is not None:
            a["x-stream-offset"] = offset
        got = []

        def on(ch_, m, p, b):
            got.append((m, p, b))
            ch_.basic_ack(m.delivery_tag)

        tag = ch.basic_consume(q, on, arguments=a)
        deadline = time.monotonic() + timeout
        last = len(got)
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            c.process_data_events(time_limit=0.05)
            if n is not None and len(got) >= n:
                break
            if len(got) != last:
                last, quiet_since = len(got), time.monotonic()
            elif n is None and time.monotonic() - quiet_since > 0.5:
                break
        ch.basic_cancel(tag)
        return got

    def expect_channel_error(self, code, text, fn):
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            fn()
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text), (code, text))

    def expect_connection_error(self, code, text, fn):
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            fn()
        self.assertEqual((cm.exception.reply_code, cm.exception.reply_text), (code, text))


class StreamRules(StreamBase):
    def test_declare_properties(self):
        for kw, prop in [({"durable": False}, "non-durable"), ({"exclusive": True}, "exclusive-owner"),
                         ({"auto_delete": True}, "auto-delete")]:
            name = h.unique("s")
            ch = self.connect().channel()
            args = dict(durable=True, exclusive=False, auto_delete=False)
            args.update(kw)
            self.expect_channel_error(
                406, "PRECONDITION_FAILED - invalid property '%s' for queue '%s' in vhost '/'" % (prop, name),
                lambda: ch.queue_declare(name, arguments=STREAM, **args))

    def test_refused_and_accepted_arguments(self):
        for k, v in [("x-max-length", 10), ("x-message-ttl", 1000), ("x-expires", 1000),
                     ("x-dead-letter-exchange", "dlx"), ("x-max-priority", 5),
                     ("x-overflow", "reject-publish"), ("x-single-active-consumer", True),
                     ("x-queue-mode", "lazy"), ("x-delivery-limit", 3), ("x-max-in-memory-length", 1)]:
            name = h.unique("s")
            ch = self.connect().channel()
            self.expect_channel_error(
                406, "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/' of queue type "
                "rabbit_stream_queue" % (k, name),
                lambda: ch.queue_declare(name, durable=True, arguments=stream_args(**{k: v})))
        for k, v in [("x-max-length-bytes", 1000), ("x-max-age", "7D"),
                     ("x-stream-max-segment-size-bytes", 1000), ("x-initial-cluster-size", 1),
                     ("x-queue-leader-locator", "client-local")]:
            self.stream(**{k: v})

    def test_max_age_values(self):
        for v in ("10x", "0h"):
            name = h.unique("s")
            ch = self.connect().channel()
            self.expect_channel_error(
                406, "PRECONDITION_FAILED - invalid arg 'x-max-age' for queue '%s' in vhost '/': "
                "invalid_max_age" % name,
                lambda: ch.queue_declare(name, durable=True, arguments=stream_args(**{"x-max-age": v})))
        ch = self.connect().channel()
        self.expect_connection_error(541, "INTERNAL_ERROR", lambda: ch.queue_declare(
            h.unique("s"), durable=True, arguments=stream_args(**{"x-max-age": "h"})))

    def test_redeclare_inequivalent(self):
        q = self.stream()
        self.expect_channel_error(
            406, "PRECONDITION_FAILED - inequivalent arg 'x-max-age' for queue '%s' in vhost '/': "
            "received the value '1h' of type 'longstr' but current is none" % q,
            lambda: self.ch.queue_declare(q, durable=True, arguments=stream_args(**{"x-max-age": "1h"})))

    def test_refused_operations(self):
        q = self.stream()
        self.publish_confirmed(q, [b"m0"])
        self.assertEqual(self.count(q), 0)  # 3.10's declare-ok counts nothing
        for no_ack in (False, True):
            ch = self.connect().channel()
            self.expect_connection_error(
                540, "NOT_IMPLEMENTED - basic.get not supported by stream queues queue '%s' in vhost '/'" % q,
                lambda: ch.basic_get(q, auto_ack=no_ack))
        ch = self.connect().channel()
        self.expect_connection_error(
            540, "NOT_IMPLEMENTED - queue.purge not supported by stream queues queue '%s' in vhost '/'" % q,
            lambda: ch.queue_purge(q))

    def test_consume_needs_prefetch_and_acks(self):
        q = self.stream()
        text = "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue '%s' in vhost '/''" % q
        ch = self.connect().channel()
        self.expect_channel_error(406, text, lambda: ch.basic_consume(q, lambda *a: None))
        ch = self.connect().channel()
        self.expect_channel_error(406, text, lambda: ch.basic_consume(q, lambda *a: None, auto_ack=True))
        ch = self.connect().channel()
        ch.basic_qos(prefetch_count=10)
        self.expect_connection_error(
            540, "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue '%s' "
            "in vhost '/'" % q, lambda: ch.basic_consume(q, lambda *a: None, auto_ack=True))
        ch = self.connect().channel()
        ch.basic_qos(prefetch_count=10, global_qos=True)
        self.expect_channel_error(406, text, lambda: ch.basic_consume(q, lambda *a: None))

    def test_offsets(self):
        q = self.stream()
        self.publish_confirmed(q, [b"m%d" % i for i in range(5)])

        def bodies(offset):
            return [b for _, _, b in self.consume(q, offset)]
        all5 = [b"m0", b"m1", b"m2", b"m3", b"m4"]
        self.assertEqual(bodies(None), [])  # next: only what comes from now on
        self.assertEqual(bodies("first"), all5)
        self.assertEqual(bodies("last"), [b"m4"])  # the last chunk
        self.assertEqual(bodies("next"), [])
        self.assertEqual(bodies(2), all5[2:])
        self.assertEqual(bodies(99), [])
        self.assertEqual(bodies(-1), all5)
        self.assertEqual(bodies("1h"), all5)
        self.assertEqual(bodies(datetime.datetime.fromtimestamp(0)), all5)

    def test_deliveries_carry_offset(self):
        q = self.stream()
        self.publish_confirmed(q, [b"a", b"b", b"c"])
        got = self.consume(q, "first", n=3)
        self.assertEqual([(m.exchange, m.routing_key, m.redelivered) for m, _, _ in got],
                         [("", q, False)] * 3)
        self.assertEqual([p.headers for _, p, _ in got],
                         [{"i": i, "x-stream-offset": i} for i in range(3)])

    def test_bad_offset_string_crashes_channel(self):
        q = self.stream()
        c = self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=10)
        self.expect_connection_error(541, "INTERNAL_ERROR", lambda: ch.basic_consume(
            q, lambda *a: None, arguments={"x-stream-offset": "bogus"}))

    def test_nack_and_reject_close_the_connection(self):
        q = self.stream()
        self.publish_confirmed(q, [b"a"])
        for nack in (True, False):
            c = self.connect()
            ch = c.channel()
            ch.basic_qos(prefetch_count=10)
            got = []
            ch.basic_consume(q, lambda ch_, m, p, b: got.append(m),
                             arguments={"x-stream-offset": "first"})
            h.wait_for(c, lambda: got)

            def settle():
                if nack:
                    ch.basic_nack(got[0].delivery_tag, requeue=True)
                else:
                    ch.basic_reject(got[0].delivery_tag, requeue=False)
                c.process_data_events(time_limit=1)
            self.expect_connection_error(
                540, "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues "
                "queue '%s' in vhost '/'" % q, settle)

    def test_routed_through_exchanges(self):
        x = self.exchange("fanout")
        q = self.stream()
        self.ch.queue_bind(q, x)
        ch = self.conn.channel()
        ch.confirm_delivery()
        ch.basic_publish(x, "rk", b"via-x")
        got = self.consume(q, "first", n=1)
        self.assertEqual([(m.exchange, m.routing_key, b) for m, _, b in got], [(x, "rk", b"via-x")])

    def test_consumers_read_independently(self):
        """A consumer that never acks (prefetch 1) holds back nobody else."""
        q = self.stream()
        self.publish_confirmed(q, [b"%d" % i for i in range(50)])
        slow = self.connect()
        sch = slow.channel()
        sch.basic_qos(prefetch_count=1)
        held = []
        sch.basic_consume(q, lambda ch_, m, p, b: held.append(b), arguments={"x-stream-offset": "first"})
        h.wait_for(slow, lambda: held)
        fast = self.consume(q, "first", n=50, prefetch=7)
        self.assertEqual([b for _, _, b in fast], [b"%d" % i for i in range(50)])
        slow.process_data_events(time_limit=0.2)
        self.assertEqual(held, [b"0"])


@unittest.skipIf(h.TARGET is not None, "RabbitMQ 3.13's filtering; 3.10 has none")
class StreamFilter(StreamBase):
    def test_filter_values(self):
        q = self.stream()
        colours = ["red", "blue", None, "red", "green", None, "blue"]
        self.publish_confirmed(
            q, [b"%d" % i for i in range(len(colours))],
            headers=lambda i: {"x-stream-filter-value": colours[i]} if colours[i] else {"i": i})

        def bodies(filt, unfiltered=None):
            args = {"x-stream-filter": filt}
            if unfiltered is not None:
                args["x-stream-match-unfiltered"] = unfiltered
            return [b for _, _, b in self.consume(q, "first", args=args)]
        # exact: no false positive of the Bloom filter reaches the consumer
        self.assertEqual(bodies("red"), [b"0", b"3"])
        self.assertEqual(bodies(["blue", "green"]), [b"1", b"4", b"6"])
        self.assertEqual(bodies("red", True), [b"0", b"2", b"3", b"5"])
        self.assertEqual(bodies("violet"), [])

    def test_bad_filter_argument(self):
        q = self.stream()
        ch = self.connect().channel()
        ch.basic_qos(prefetch_count=10)
        self.expect_channel_error(
            406, "PRECONDITION_FAILED - invalid arg 'x-stream-filter' for queue '%s' in vhost '/'" % q,
            lambda: ch.basic_consume(q, lambda *a: None, arguments={"x-stream-filter": 5}))

    def test_policy_sets_retention(self):
        """max-age / stream-max-segment-size-bytes as policy keys reach the
        stream: tiny segments and a size limit remove the oldest segments."""
        q = self.stream(**{"x-stream-max-segment-size-bytes": 2000, "x-max-length-bytes": 6000})
        self.publish_confirmed(q, [b"x" * 500 for _ in range(60)])
        got = self.consume(q, "first")
        self.assertTrue(0 < len(got) < 60, len(got))
        first = got[0][1].headers["x-stream-offset"]
        self.assertGreater(first, 0)  # whole segments went, oldest first
        self.assertEqual([p.headers["x-stream-offset"] for _, p, _ in got],
                         list(range(first, first + len(got))))


@unittest.skipIf(h.TARGET is not None, "needs own broker")
class StreamDurability(h.DataDirTest):
    """Every confirmed message is in the stream at its offset after a clean
    restart and after SIGKILL; offsets are contiguous and unique."""

    def replay(self, ch, n_expected):
        ch.basic_qos(prefetch_count=100)
        got = []
        ch.basic_consume("dur-s", lambda ch_, m, p, b: (got.append((p.headers["x-stream-offset"], b)),
                                                       ch_.basic_ack(m.delivery_tag)),
                         arguments={"x-stream-offset": "first"})
        h.wait_for(ch.connection, lambda: len(got) >= n_expected, timeout=10)
        ch.connection.process_data_events(time_limit=0.3)
        return got

    def check(self, kill):
        conn, ch = self.start()
        ch.queue_declare("dur-s", durable=True, arguments=STREAM)
        for i in range(300):  # confirm mode: each returns once confirmed
            ch.basic_publish("", "dur-s", b"%d" % i)
        if kill:
            self.kill()
            conn, ch = self.start()
        else:
            conn, ch = self.restart(conn)
        got = self.replay(conn.channel(), 300)
        offsets = [o for o, _ in got]
        self.assertEqual(offsets, list(range(len(got))))  # contiguous, unique, from 0
        self.assertEqual([b for _, b in got[:300]], [b"%d" % i for i in range(300)])
        conn.close()

    def test_clean_restart(self):
        self.check(kill=False)

    def test_sigkill(self):
        self.check(kill=True)

    def test_offsets_continue_after_restart(self):
        conn, ch = self.start()
        ch.queue_declare("dur-s", durable=True, arguments=STREAM)
        ch.basic_publish("", "dur-s", b"before")
        conn, ch = self.restart(conn)
        ch.basic_publish("", "dur-s", b"after")
        got = self.replay(conn.channel(), 2)
        self.assertEqual(got, [(0, b"before"), (1, b"after")])
        conn.close()
