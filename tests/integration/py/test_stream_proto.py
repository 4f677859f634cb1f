"""RabbitMQ's stream protocol after Open: streams (Metadata, Create,
Delete, offsets, StreamStats, ExchangeCommandVersions), publishers
(confirms, errors, deduplication) and subscriptions (every offset
specification, credit, filters, deletion), and the same streams over AMQP
0-9-1. Codes as RabbitMQ 3.10.8 answered the same frames (its live run with
streamraw.py); StreamStats, ExchangeCommandVersions, Publish v2 and
filters are 3.13's (PROTOCOL.adoc), which 3.10 lacks."""
import http.client
import json
import struct
import time
import unittest
import urllib.request

import harness as h
import streamraw as s
from test_stream_conn import add_user, stream_port

NARROW = "streamnarrow-%s" % h.RUN_ID


def amqp10(body):
    """An AMQP 1.0 message of one data section (what RabbitMQ stores)."""
    return b"\x00\x53\x75\xa0" + bytes([len(body)]) + body


_narrow_made = []


class StreamTest(unittest.TestCase):
    def client(self, user="guest", password="guest"):
        if user == NARROW and not _narrow_made:  # (run_py runs no class fixtures)
            add_user(NARROW, "pw", perms=("^cfg", "^wr", "^rd"))
            _narrow_made.append(True)
        c = s.Client(stream_port())
        c.handshake(user, password)
        self.addCleanup(c.close_socket)
        return c

    def stream(self, c=None, prefix="sp"):
        """A new stream, deleted after the test."""
        name = h.unique(prefix)
        c = c or self.client()
        self.assertEqual(c.create(name), s.OK)
        self.addCleanup(self.drop, name)
        return name

    def drop(self, name):
        c = s.Client(stream_port())
        c.handshake()
        c.delete(name)
        c.close_socket()

    def publish(self, c, pid, stream, bodies, first_id=1, ref=b""):
        """Declares publisher pid (if new), publishes, waits for the confirms."""
        if c.declare_publisher(pid, stream, ref) not in (s.OK, s.PRECONDITION_FAILED):
            self.fail("declare publisher")
        c.publish(pid, [(first_id + i, b) for i, b in enumerate(bodies)])
        return c.confirms(len(bodies))


class Streams(StreamTest):
    def test_create_metadata_delete(self):
        c = self.client()
        name = h.unique("sp")
        self.assertEqual(c.create(name), s.OK)
        self.assertEqual(c.create(name), s.STREAM_ALREADY_EXISTS)
        brokers, streams = c.metadata([name, "missing-" + name])
        self.assertEqual(list(brokers.values()), [(brokers[0][0], stream_port())])
        self.assertEqual(streams[name], (s.OK, 0, []))
        self.assertEqual(streams["missing-" + name], (s.STREAM_DOES_NOT_EXIST, 0xFFFF, []))
        self.assertEqual(c.delete(name), s.OK)
        self.assertEqual(c.delete(name), s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.metadata([name])[1][name][0], s.STREAM_DOES_NOT_EXIST)

    def test_create_arguments_become_queue_arguments(self):
        c = self.client()
        name = h.unique("sp")
        self.addCleanup(self.drop, name)
        self.assertEqual(c.create(name, [(b"max-age", b"1h"), (b"max-length-bytes", b"1000000"),
                                         (b"stream-max-segment-size-bytes", b"100000"),
                                         (b"initial-cluster-size", b"1"),
                                         (b"queue-leader-locator", b"least-leaders"),
                                         (b"unknown", b"ignored")]), s.OK)
        conn = h.connect()
        self.addCleanup(conn.close)
        ch = conn.channel()
        # the same queue over AMQP: an equivalent declaration is accepted
        ch.queue_declare(name, durable=True, arguments={
            "x-queue-type": "stream", "x-max-age": "1h", "x-max-length-bytes": 1000000,
            "x-stream-max-segment-size-bytes": 100000, "x-initial-cluster-size": 1,
            "x-queue-leader-locator": "least-leaders"})

    def test_create_refusals(self):
        c = self.client()
        name = h.unique("sp")
        self.addCleanup(self.drop, name)
        for args in ([(b"max-age", b"10x")], [(b"max-length-bytes", b"abc")],
                     [(b"queue-leader-locator", b"nope")]):
            self.assertEqual(c.create(name, args), s.PRECONDITION_FAILED, args)
        self.assertEqual(c.create(""), s.PRECONDITION_FAILED)
        self.assertEqual(c.create("amq.stream"), s.PRECONDITION_FAILED)

    def test_name_of_a_classic_queue(self):
        name = h.unique("sp")
        conn = h.connect()
        self.addCleanup(conn.close)
        ch = conn.channel()
        ch.queue_declare(name)
        self.addCleanup(lambda: ch.queue_delete(name))
        c = self.client()
        self.assertEqual(c.create(name), s.STREAM_ALREADY_EXISTS)
        self.assertEqual(c.metadata([name])[1][name][0], s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.delete(name), s.STREAM_DOES_NOT_EXIST)

    def test_permissions(self):
        n = self.client(NARROW, "pw")
        name = self.stream()
        self.assertEqual(n.create("x" + name), s.ACCESS_REFUSED)
        self.assertEqual(n.delete(name), s.ACCESS_REFUSED)
        self.assertEqual(n.metadata([name])[1][name][0], s.OK)  # no check
        self.assertEqual(n.query_offset("c", name)[0], s.ACCESS_REFUSED)
        self.assertEqual(n.stream_stats(name)[0], s.ACCESS_REFUSED)
        self.assertEqual(n.declare_publisher(1, name), s.ACCESS_REFUSED)
        self.assertEqual(n.subscribe(1, name), s.ACCESS_REFUSED)
        self.assertEqual(n.query_publisher_sequence(b"r", name)[0], s.ACCESS_REFUSED)
        cfg = "cfg" + name
        self.assertEqual(n.create(cfg), s.OK)
        self.assertEqual(n.delete(cfg), s.OK)
        self.assertEqual(n.close(), s.OK)  # refusals do not close

    def test_offsets(self):
        c = self.client()
        name = self.stream(c)
        self.assertEqual(c.query_offset("cons", name), (s.NO_OFFSET, 0))
        c.store_offset("cons", name, 5)
        self.assertEqual(c.query_offset("cons", name), (s.OK, 5))
        c.store_offset("cons", name, 7)
        self.assertEqual(c.query_offset("cons", name), (s.OK, 7))
        self.assertEqual(c.query_offset("cons", "missing-" + name)[0], s.STREAM_DOES_NOT_EXIST)
        c.store_offset("cons", "missing-" + name, 5)  # no response, nothing stored
        n = self.client(NARROW, "pw")
        n.store_offset("cons", name, 1)  # no read permission: ignored
        self.assertEqual(c.query_offset("cons", name), (s.OK, 7))

    def test_stream_stats(self):
        c = self.client()
        name = self.stream(c)
        self.assertEqual(c.stream_stats(name), (s.OK, {"first_chunk_id": -1, "committed_chunk_id": -1}))
        self.publish(c, 1, name, [b"a", b"b"])
        self.publish(c, 1, name, [b"c"], first_id=3)
        code, stats = c.stream_stats(name)
        self.assertEqual(code, s.OK)
        self.assertEqual(stats["first_chunk_id"], 0)
        self.assertIn(stats["committed_chunk_id"], (0, 2))
        self.assertEqual(c.stream_stats("missing-" + name)[0], s.STREAM_DOES_NOT_EXIST)

    def test_exchange_command_versions(self):
        c = self.client()
        code, versions = c.exchange_command_versions([(s.PUBLISH, 1, 2)])
        self.assertEqual(code, s.OK)
        self.assertIn((s.PUBLISH, 1, 2), versions)
        self.assertIn((s.SUBSCRIBE, 1, 1), versions)


class SuperStreams(StreamTest):
    def test_route_and_partitions(self):
        # a super stream made over AMQP, as RabbitMQ 3.10.8 answered for it
        sup = h.unique("sup")
        conn = h.connect()
        self.addCleanup(conn.close)
        ch = conn.channel()
        ch.exchange_declare(sup, "direct", durable=True, arguments={"x-super-stream": True})
        self.addCleanup(lambda: ch.exchange_delete(sup))
        for i in range(2):
            q = "%s-%d" % (sup, i)
            ch.queue_declare(q, durable=True, arguments={"x-queue-type": "stream"})
            self.addCleanup(lambda q=q: ch.queue_delete(q))
            ch.queue_bind(q, sup, str(i), arguments={"x-stream-partition-order": 1 - i})
        classic = sup + "-classic"
        ch.queue_declare(classic)
        self.addCleanup(lambda: ch.queue_delete(classic))
        ch.queue_bind(classic, sup, "0")  # not a stream: left out
        c = self.client()
        self.assertEqual(c.route("0", sup), (s.OK, [sup + "-0"]))
        self.assertEqual(c.route("9", sup), (s.OK, []))
        self.assertEqual(c.partitions(sup), (s.OK, [sup + "-1", sup + "-0"]))
        self.assertEqual(c.partitions("missing-" + sup), (s.STREAM_DOES_NOT_EXIST, []))
        self.assertEqual(c.route("0", "missing-" + sup), (s.STREAM_DOES_NOT_EXIST, []))


    def test_create_and_delete_super_stream(self):
        # 3.13's commands (3.10 lacks them), its codes and its shape
        c = self.client()
        sup = h.unique("sup")
        parts = ["%s-%d" % (sup, i) for i in range(3)]
        self.assertEqual(c.create_super_stream(sup, parts, ["k0", "k1", "k2"],
                                               [(b"max-age", b"1h")]), s.OK)
        self.addCleanup(lambda: self.client().delete_super_stream(sup))
        self.assertEqual(c.partitions(sup), (s.OK, parts))
        self.assertEqual(c.route("k1", sup), (s.OK, [parts[1]]))
        self.assertEqual(c.metadata(parts)[1][parts[2]][0], s.OK)
        self.assertEqual(c.create_super_stream(sup, parts, ["k0", "k1", "k2"]),
                         s.STREAM_ALREADY_EXISTS)
        other = h.unique("sup")
        self.assertEqual(c.create_super_stream(other, [other + "-0", parts[0]], ["a", "b"]),
                         s.STREAM_ALREADY_EXISTS)  # a partition exists: nothing is made
        self.assertEqual(c.partitions(other)[0], s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.metadata([other + "-0"])[1][other + "-0"][0], s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.create_super_stream(other, [other + "-0"], ["a", "b"]),
                         s.PRECONDITION_FAILED)  # a key per partition
        self.assertEqual(c.create_super_stream(other, [], []), s.PRECONDITION_FAILED)
        self.assertEqual(self.client(NARROW, "pw").create_super_stream(other, [other + "-0"], ["a"]),
                         s.ACCESS_REFUSED)
        self.assertEqual(self.client(NARROW, "pw").delete_super_stream(sup), s.ACCESS_REFUSED)
        self.assertEqual(c.delete_super_stream(sup), s.OK)
        self.assertEqual(c.partitions(sup)[0], s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.metadata(parts)[1][parts[0]][0], s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.delete_super_stream(sup), s.STREAM_DOES_NOT_EXIST)


class Publishers(StreamTest):
    def test_publish_and_confirm(self):
        c = self.client()
        name = self.stream(c)
        self.assertEqual(c.declare_publisher(1, name, b"ref1"), s.OK)
        c.publish(1, [(1, b"a"), (2, b"b"), (3, b"c")])
        self.assertEqual(c.confirms(3), [(1, 1), (1, 2), (1, 3)])
        self.assertEqual(c.query_publisher_sequence(b"ref1", name), (s.OK, 3))
        self.assertEqual(c.query_publisher_sequence(b"other", name), (s.OK, 0))
        self.assertEqual(c.query_publisher_sequence(b"ref1", "missing-" + name)[0],
                         s.STREAM_DOES_NOT_EXIST)

    def test_deduplication(self):
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name, b"ref1")
        c.publish(1, [(1, b"a"), (2, b"b")])
        c.confirms(2)
        c.publish(1, [(2, b"again"), (3, b"c")])  # 2 is confirmed, not stored
        self.assertEqual(c.confirms(2), [(1, 2), (1, 3)])
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=10), s.OK)
        got = []
        while len(got) < 3:
            got += c.deliver()[1]["messages"]
        self.assertEqual(got, [b"a", b"b", b"c"])
        # a second publisher on the same reference elsewhere resumes its sequence
        d = self.client()
        d.declare_publisher(7, name, b"ref1")
        d.publish(7, [(3, b"dup"), (4, b"d")])
        self.assertEqual(d.confirms(2), [(7, 3), (7, 4)])
        self.assertEqual(d.query_publisher_sequence(b"ref1", name), (s.OK, 4))

    def test_declare_refusals(self):
        c = self.client()
        name = self.stream(c)
        self.assertEqual(c.declare_publisher(1, name, b"ref1"), s.OK)
        self.assertEqual(c.declare_publisher(1, name), s.PRECONDITION_FAILED)  # id in use
        self.assertEqual(c.declare_publisher(2, name, b"ref1"), s.PRECONDITION_FAILED)  # reference
        self.assertEqual(c.declare_publisher(3, "missing-" + name), s.STREAM_DOES_NOT_EXIST)
        self.assertEqual(c.declare_publisher(4, name, b"r" * 256), s.PRECONDITION_FAILED)
        self.assertEqual(c.delete_publisher(1), s.OK)
        self.assertEqual(c.delete_publisher(1), s.PUBLISHER_DOES_NOT_EXIST)
        self.assertEqual(c.declare_publisher(2, name, b"ref1"), s.OK)  # free again

    def test_unknown_publisher(self):
        c = self.client()
        c.publish(9, [(7, b"x"), (8, b"y")])
        f = c.expect(s.PUBLISH_ERROR)
        self.assertEqual((f.u8(0), f.u32(1)), (9, 2))
        self.assertEqual([(f.u64(5), f.u16(13)), (f.u64(15), f.u16(23))],
                         [(7, s.PUBLISHER_DOES_NOT_EXIST), (8, s.PUBLISHER_DOES_NOT_EXIST)])
        self.assertEqual(c.close(), s.OK)

    def test_publish_v2_with_filter_values(self):
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name)
        c.publish(1, [(1, b"apple", b"a1"), (2, None, b"plain")], version=2)
        self.assertEqual(c.confirms(2), [(1, 1), (1, 2)])
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST), s.OK)
        self.assertEqual(c.deliver()[1]["messages"], [b"a1", b"plain"])

    def test_stream_protocol_to_amqp(self):
        c = self.client()
        name = self.stream(c)
        self.publish(c, 1, name, [amqp10(b"hello"), amqp10(b"world")])
        conn = h.connect()
        self.addCleanup(conn.close)
        ch = conn.channel()
        ch.basic_qos(prefetch_count=10)
        got = []
        ch.basic_consume(name, lambda ch_, m, p, b: (got.append(b), ch_.basic_ack(m.delivery_tag)),
                         arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            conn.process_data_events(time_limit=0.05)
        self.assertEqual(got, [b"hello", b"world"])


class Subscriptions(StreamTest):
    def chunks(self, c, name, count):
        """Publishes `count` chunks of two messages each (one confirm round each)."""
        for i in range(count):
            self.publish(c, 1, name, [b"m%d" % (2 * i), b"m%d" % (2 * i + 1)], first_id=2 * i + 1)

    def test_offset_specifications(self):
        c = self.client()
        name = self.stream(c)
        self.chunks(c, name, 3)  # chunks at 0, 2, 4
        cases = [(s.OFFSET_FIRST, 0, 0), (s.OFFSET_LAST, 0, 4), (s.OFFSET_OFFSET, 3, 2),
                 (s.OFFSET_OFFSET, 99, None), (s.OFFSET_NEXT, 0, None),
                 (s.OFFSET_TIMESTAMP, int(time.time() * 1000) - 60000, 0),
                 (s.OFFSET_TIMESTAMP, int(time.time() * 1000) + 60000, None)]
        for sid, (kind, value, chunk) in enumerate(cases):
            self.assertEqual(c.subscribe(sid, name, kind, value, credit=1), s.OK)
            if chunk is not None:
                got_sid, ch = c.deliver()
                self.assertEqual((got_sid, ch["chunk_id"]), (sid, chunk), (kind, value))
        # NEXT (and past the end): what comes from now on
        self.publish(c, 1, name, [b"new"], first_id=7)
        seen = {}
        for _ in range(3):
            sid, ch = c.deliver()
            seen[sid] = ch["messages"]
        self.assertEqual(seen, {3: [b"new"], 4: [b"new"], 6: [b"new"]})

    def test_credit_is_counted_in_chunks(self):
        c = self.client()
        name = self.stream(c)
        self.chunks(c, name, 3)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=1), s.OK)
        self.assertEqual(c.deliver()[1]["chunk_id"], 0)
        with self.assertRaises(TimeoutError):
            c.deliver(timeout=0.5)
        c.credit(1, 2)
        self.assertEqual([c.deliver()[1]["chunk_id"] for _ in range(2)], [2, 4])

    def test_refusals(self):
        c = self.client()
        name = self.stream(c)
        self.assertEqual(c.subscribe(1, name), s.OK)
        self.assertEqual(c.subscribe(1, name), s.SUBSCRIPTION_ID_ALREADY_EXISTS)
        self.assertEqual(c.subscribe(2, "missing-" + name), s.STREAM_DOES_NOT_EXIST)
        c.credit(9, 1)
        f = c.expect(s.CREDIT | s.RESPONSE)
        self.assertEqual(f.body, struct.pack(">HB", s.SUBSCRIPTION_ID_DOES_NOT_EXIST, 9))
        self.assertEqual(c.unsubscribe(9), s.SUBSCRIPTION_ID_DOES_NOT_EXIST)
        self.assertEqual(c.unsubscribe(1), s.OK)
        self.assertEqual(c.unsubscribe(1), s.SUBSCRIPTION_ID_DOES_NOT_EXIST)
        # single active consumer needs a name
        self.assertEqual(c.subscribe(3, name, props=[(b"single-active-consumer", b"true")]),
                         s.PRECONDITION_FAILED)

    def test_deleted_stream(self):
        c = self.client()
        name = h.unique("sp")
        self.assertEqual(c.create(name), s.OK)
        c.declare_publisher(1, name)
        self.assertEqual(c.subscribe(1, name), s.OK)
        self.assertEqual(c.subscribe(2, name), s.OK)
        other = self.client()
        self.assertEqual(other.delete(name), s.OK)
        f = c.expect(s.METADATA_UPDATE)
        self.assertEqual(f.body, struct.pack(">H", s.STREAM_NOT_AVAILABLE) + s.s16(name))
        with self.assertRaises(TimeoutError):  # one per stream, not per subscription
            c.expect(s.METADATA_UPDATE, timeout=0.5)
        self.assertEqual(c.unsubscribe(1), s.SUBSCRIPTION_ID_DOES_NOT_EXIST)
        self.assertEqual(c.delete_publisher(1), s.PUBLISHER_DOES_NOT_EXIST)

    def test_delete_own_stream_answers_first(self):
        c = self.client()
        name = h.unique("sp")
        self.assertEqual(c.create(name), s.OK)
        self.assertEqual(c.subscribe(1, name), s.OK)
        c.send(s.frame(s.DELETE, struct.pack(">I", 99) + s.s16(name)))
        first, second = c.recv(), c.recv()  # RabbitMQ 3.10.8's order
        self.assertEqual((first.key, first.correlation, first.code), (s.DELETE | s.RESPONSE, 99, s.OK))
        self.assertEqual((second.key, second.u16(0)), (s.METADATA_UPDATE, s.STREAM_NOT_AVAILABLE))

    def test_deleted_over_amqp(self):
        c = self.client()
        name = h.unique("sp")
        self.assertEqual(c.create(name), s.OK)
        self.assertEqual(c.subscribe(1, name), s.OK)
        conn = h.connect()
        self.addCleanup(conn.close)
        conn.channel().queue_delete(name)
        self.assertEqual(c.expect(s.METADATA_UPDATE).u16(0), s.STREAM_NOT_AVAILABLE)

    def test_amqp_publish_read_over_stream_protocol(self):
        name = h.unique("sp")
        conn = h.connect()
        self.addCleanup(conn.close)
        ch = conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        self.addCleanup(self.drop, name)
        ch.confirm_delivery()
        ch.basic_publish("", name, b"from amqp")
        c = self.client()
        self.assertEqual(c.metadata([name])[1][name][0], s.OK)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST), s.OK)
        msgs = c.deliver()[1]["messages"]
        self.assertEqual(len(msgs), 1)
        self.assertTrue(msgs[0].endswith(b"\x00\x53\x75\xa0\x09from amqp"), msgs[0])

    def test_filter(self):
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name)
        c.publish(1, [(1, b"b", b"b1"), (2, b"b", b"b2")], version=2)
        c.confirms(2)
        c.publish(1, [(3, b"a", b"a1"), (4, None, b"none")], version=2)
        c.confirms(2)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=5,
                                     props=[(b"filter.0", b"a")]), s.OK)
        sid, ch = c.deliver()
        self.assertEqual(ch["chunk_id"], 2)  # the chunk of b only was skipped
        self.assertEqual(c.subscribe(2, name, s.OFFSET_FIRST, credit=5,
                                     props=[(b"filter.0", b"zz"), (b"match-unfiltered", b"true")]), s.OK)
        self.assertEqual(c.deliver()[1]["chunk_id"], 2)  # the unfiltered message is there

    def test_deliver_v2_once_the_client_takes_it(self):
        c = self.client()
        name = self.stream(c)
        self.chunks(c, name, 2)
        code, _ = c.exchange_command_versions([(s.PUBLISH, 1, 2), (s.DELIVER, 1, 2)])
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=1), s.OK)
        f = c.expect(s.DELIVER)
        self.assertEqual((f.version, f.u8(0)), (2, 1))
        self.assertEqual(f.u64(1), 2)  # the committed chunk id, then the chunk
        self.assertEqual(struct.unpack(">Q", f.body[9 + 24:9 + 32])[0], 0)

    def test_single_active_consumer(self):
        c = self.client()
        name = self.stream(c)
        self.chunks(c, name, 3)  # chunks at 0, 2, 4
        sac = [(b"single-active-consumer", b"true"), (b"name", b"group")]
        a, b, d = self.client(), self.client(), self.client()
        self.assertEqual(a.subscribe(1, name, s.OFFSET_FIRST, credit=10, props=sac), s.OK)
        corr, sid, active = a.consumer_update()
        self.assertEqual((sid, active), (1, 1))
        with self.assertRaises(TimeoutError):  # nothing before the answer
            a.deliver(timeout=0.3)
        a.consumer_update_response(corr, s.OFFSET_OFFSET, 2)
        self.assertEqual(a.deliver()[1]["chunk_id"], 2)
        self.assertEqual(b.subscribe(5, name, s.OFFSET_FIRST, credit=10, props=sac), s.OK)
        self.assertEqual(d.subscribe(6, name, s.OFFSET_FIRST, credit=10, props=sac), s.OK)
        with self.assertRaises(TimeoutError):  # inactive: no update, no deliveries
            b.recv(timeout=0.3)
        self.assertEqual(a.unsubscribe(1), s.OK)
        corr, sid, active = b.consumer_update()  # the oldest waiting one
        self.assertEqual((sid, active), (5, 1))
        b.consumer_update_response(corr, s.OFFSET_LAST)
        self.assertEqual(b.deliver()[1]["chunk_id"], 4)
        b.close_socket()  # its connection goes: the next one takes over
        corr, sid, active = d.consumer_update()
        self.assertEqual((sid, active), (6, 1))
        d.consumer_update_response(corr, s.OFFSET_FIRST)
        self.assertEqual(d.deliver()[1]["chunk_id"], 0)
        # another name is another group
        self.assertEqual(a.subscribe(2, name, props=[(b"single-active-consumer", b"true"),
                                                     (b"name", b"other")]), s.OK)
        self.assertEqual(a.consumer_update()[1:], (2, 1))

    def test_filter_passes_over_many_chunks(self):
        # past STREAM_SKIP_MAX (4096) chunks skipped: the search goes on in
        # the following loop turns
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name)
        for i in range(5000):
            c.publish(1, [(i + 1, b"b", b"x")], version=2)
            c.confirms(1)
        c.publish(1, [(9999, b"a", b"wanted")], version=2)
        c.confirms(1)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=5,
                                     props=[(b"filter.0", b"a")]), s.OK)
        self.assertEqual(c.deliver(10)[1]["messages"], [b"wanted"])

    def test_single_active_consumer_keeps_its_filter(self):
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name)
        for i, v in enumerate([b"b", b"a", b"b"]):
            c.publish(1, [(i + 1, v, v)], version=2)
            c.confirms(1)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_NEXT, credit=5, props=[
            (b"single-active-consumer", b"true"), (b"name", b"g"), (b"filter.0", b"a")]), s.OK)
        corr, _, _ = c.consumer_update()
        c.consumer_update_response(corr, s.OFFSET_FIRST)  # moved: the filter still holds
        self.assertEqual(c.deliver()[1]["messages"], [b"a"])
        with self.assertRaises(TimeoutError):
            c.deliver(timeout=0.5)

    def test_super_stream_group_spreads_partitions(self):
        c = self.client()
        sup = h.unique("sup")
        parts = [sup + "-0", sup + "-1"]
        self.assertEqual(c.create_super_stream(sup, parts, ["0", "1"]), s.OK)
        self.addCleanup(lambda: self.client().delete_super_stream(sup))
        props = [(b"single-active-consumer", b"true"), (b"name", b"grp"),
                 (b"super-stream", sup.encode())]
        a, b = self.client(), self.client()
        for sid, part in enumerate(parts):  # a alone: active on both
            self.assertEqual(a.subscribe(sid, part, props=props), s.OK)
            corr, got_sid, active = a.consumer_update()
            self.assertEqual((got_sid, active), (sid, 1))
            a.consumer_update_response(corr)
        for sid, part in enumerate(parts):
            self.assertEqual(b.subscribe(sid, part, props=props), s.OK)
        # partition 1 goes to the second member: a hears it is inactive
        # there, and b is told once a answered (the step-down)
        corr_a, got_sid, active = a.consumer_update()
        self.assertEqual((got_sid, active), (1, 0))
        with self.assertRaises(TimeoutError):
            b.consumer_update(timeout=0.3)
        a.consumer_update_response(corr_a)
        corr, got_sid, active = b.consumer_update()
        self.assertEqual((got_sid, active), (1, 1))
        with self.assertRaises(TimeoutError):  # partition 0 stays with a
            b.consumer_update(timeout=0.3)
        # a leaves: b takes partition 0 too
        a.close_socket()
        corr, got_sid, active = b.consumer_update()
        self.assertEqual((got_sid, active), (0, 1))

    def test_long_replay(self):
        c = self.client()
        name = self.stream(c)
        c.declare_publisher(1, name)
        for r in range(20):
            c.publish(1, [(r * 100 + i + 1, b"x%d" % (r * 100 + i)) for i in range(100)])
            c.confirms(100)
        self.assertEqual(c.subscribe(1, name, s.OFFSET_FIRST, credit=1000), s.OK)
        got = []
        while len(got) < 2000:
            got += c.deliver()[1]["messages"]
        self.assertEqual(got, [b"x%d" % i for i in range(2000)])


@h.needs_own_broker
class Alarms(unittest.TestCase):
    def test_memory_alarm_blocks_publishers_until_it_clears(self):
        proc = h.WarrenProcess()
        proc.start()
        self.addCleanup(proc.stop)

        def watermark(body):
            c = http.client.HTTPConnection("127.0.0.1", proc.mgmt_port, timeout=10)
            c.request("PUT", "/api/nodes/%s/vm-memory-high-watermark" % node, json.dumps(body),
                      headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q=",
                               "Content-Type": "application/json"})
            self.assertEqual(c.getresponse().status, 204)

        c = s.Client(proc.stream_port)
        c.handshake()
        self.assertEqual(c.create("alarmed"), s.OK)
        c.declare_publisher(1, "alarmed")
        c.publish(1, [(1, b"before")])
        self.assertEqual(c.confirms(1), [(1, 1)])
        req = urllib.request.Request("http://127.0.0.1:%d/api/overview" % proc.mgmt_port,
                                     headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
        node = json.loads(urllib.request.urlopen(req, timeout=10).read())["node"]
        watermark({"absolute": 1 << 20})  # below any process's RSS
        self.assertTrue(proc.wait_log("memory resource limit alarm set on node"))
        c.publish(1, [(2, b"during")])  # read, then the connection is not read any more
        c.publish(1, [(3, b"held")])
        self.assertEqual(c.confirms(1), [(1, 2)])
        with self.assertRaises(TimeoutError):
            c.confirms(1, timeout=0.5)
        watermark({"relative": 0.4})
        self.assertEqual(c.confirms(1), [(1, 3)])  # read again once it clears


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@h.needs_own_broker
class LongStreams(unittest.TestCase):
    def test_replay_does_not_load_the_stream(self):
        """64 MB replayed to a subscriber that reads slowly: the broker's RSS
        grows by far less than the stream (chunks go out from the segment
        files, and only up to the output limit at a time)."""
        proc = h.WarrenProcess()
        proc.start()
        self.addCleanup(proc.stop)
        c = s.Client(proc.stream_port)
        c.handshake()
        self.assertEqual(c.create("long"), s.OK)
        c.declare_publisher(1, "long")
        body = b"x" * 10000
        for f in range(64):  # 64 frames of 100 x 10 kB
            c.publish(1, [(f * 100 + i + 1, body) for i in range(100)])
            c.confirms(100)
        before = rss_bytes(proc.proc.pid)
        r = s.Client(proc.stream_port)
        r.handshake()
        self.assertEqual(r.subscribe(1, "long", s.OFFSET_FIRST, credit=10000), s.OK)
        time.sleep(1)  # the subscriber reads nothing meanwhile
        during = rss_bytes(proc.proc.pid)
        got = 0
        while got < 6400:
            got += len(r.deliver()[1]["messages"])
        after = rss_bytes(proc.proc.pid)
        self.assertEqual(got, 6400)
        self.assertLess(during - before, 16 << 20, (before, during, after))
        self.assertLess(after - before, 16 << 20, (before, during, after))


@h.needs_own_broker
class Restarts(unittest.TestCase):
    def test_dedup_and_offsets_survive_a_restart(self):
        settings = ("stream.advertised_host=127.0.0.1",)
        proc = h.WarrenProcess(settings)
        proc.start()
        try:
            c = s.Client(proc.stream_port)
            c.handshake()
            self.assertEqual(c.create("kept"), s.OK)
            c.declare_publisher(1, "kept", b"ref")
            c.publish(1, [(1, b"a"), (2, b"b")])
            c.confirms(2)
            c.store_offset("cons", "kept", 1)
            self.assertEqual(c.query_offset("cons", "kept"), (s.OK, 1))
            c.close_socket()
            data = proc.tmpdir
            proc.tmpdir = None  # keep the data for the restart
            proc.stop()
            again = h.WarrenProcess(settings + ("data_dir=%s" % data,))
            again.start()
            proc = again
            proc.tmpdir = data
            c = s.Client(proc.stream_port)
            c.handshake()
            self.assertEqual(c.query_publisher_sequence(b"ref", "kept"), (s.OK, 2))
            self.assertEqual(c.query_offset("cons", "kept"), (s.OK, 1))
            c.declare_publisher(1, "kept", b"ref")
            c.publish(1, [(2, b"dup"), (3, b"c")])
            self.assertEqual(c.confirms(2), [(1, 2), (1, 3)])
            self.assertEqual(c.subscribe(1, "kept", s.OFFSET_FIRST), s.OK)
            got = []
            while len(got) < 3:
                got += c.deliver()[1]["messages"]
            self.assertEqual(got, [b"a", b"b", b"c"])
        finally:
            proc.stop()


if __name__ == "__main__":
    unittest.main()
