"""basic.*: publish/consume/get, content framing, properties, returns,
consumers, acknowledgements, recover, qos and redelivery."""
import datetime
import decimal
import struct
import unittest

import pika
import pika.spec as S
from pika import exceptions as pex

import harness as h


class Publish(h.BrokerTest):
    def test_round_trip_all_properties_pika(self):
        q = self.queue()
        headers = {"str": "s", "int": 42, "neg": -7, "big": 2 ** 40, "bool": False, "none": None,
                   "bytes": b"\x00\xff", "dec": decimal.Decimal("3.14"), "list": [1, "a", [2], {"x": 1}],
                   "table": {"nested": {"deep": "yes"}}, "ts": datetime.datetime(2024, 1, 2, 3, 4, 5)}
        props = pika.BasicProperties(
            content_type="text/plain", content_encoding="utf-8", headers=headers, delivery_mode=2, priority=5,
            correlation_id="c-1", reply_to="r-1", expiration="60000", message_id="m-1", timestamp=1700000000,
            type="t-1", user_id="guest", app_id="a-1", cluster_id="cl-1")
        self.publish("", q, b"payload", properties=props)
        got = h.Collector()
        self.ch.basic_consume(q, got, auto_ack=True)
        self.assertTrue(h.wait_for(self.conn, lambda: got.msgs))
        _, p, body = got.msgs[0]
        self.assertEqual(body, b"payload")
        for name in ("content_type", "content_encoding", "delivery_mode", "priority", "correlation_id",
                     "reply_to", "expiration", "message_id", "timestamp", "type", "user_id", "app_id",
                     "cluster_id"):
            self.assertEqual(getattr(p, name), getattr(props, name), name)
        self.assertEqual(p.headers, headers)

    def test_property_bytes_preserved_exactly(self):
        # All 14 properties and every field type come back byte for byte.
        q = self.queue()
        prop_bytes = h.all_properties_bytes(h.USER)
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_content(1, S.Basic.Publish(exchange="", routing_key=q), b"body", prop_bytes=prop_bytes)
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            msg = r.recv_content()
            self.assertEqual(msg.body, b"body")
            r.close_cleanly()
        self.assertEqual(msg.props.content_type, "application/json")
        self.assertEqual(msg.prop_bytes, prop_bytes)

    def test_property_bytes_preserved_through_headers_exchange(self):
        x = self.exchange("headers")
        q = self.queue()
        self.ch.queue_bind(q, x, "", arguments={"x-match": "all", "bool": True})
        prop_bytes = struct.pack(">H", 0x2000) + h.all_types_table()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_content(1, S.Basic.Publish(exchange=x, routing_key=""), b"h", prop_bytes=prop_bytes)
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            msg = r.recv_content()
            r.close_cleanly()
        self.assertEqual(msg.prop_bytes, prop_bytes)

    def test_no_properties(self):
        q = self.queue()
        self.publish("", q, b"bare")
        m, p, b = self.ch.basic_get(q, auto_ack=True)
        self.assertEqual(b, b"bare")
        self.assertIsNone(p.headers)
        self.assertIsNone(p.content_type)

    def test_large_body_small_frames(self):
        # 1 MiB with frame_max 4096: ~257 body frames each way.
        q = self.queue()
        body = bytes((i * 7 + i // 256) & 0xFF for i in range(1 << 20))
        with h.RawClient(timeout=15) as r:
            r.handshake(frame_max=4096)
            r.open_channel(1)
            r.publish(1, "", q, body)
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            msg = r.recv_content(timeout=15)
            r.close_cleanly()
        self.assertEqual(msg.body_size, len(body))
        self.assertEqual(msg.body, body)
        self.assertTrue(all(len(f.fragment) <= 4088 for f in msg.body_frames))
        self.assertGreaterEqual(len(msg.body_frames), 257)

    def test_large_body_pika(self):
        q = self.queue()
        body = b"0123456789abcdef" * 65536  # 1 MiB
        self.publish("", q, body)
        got = h.Collector()
        self.ch.basic_consume(q, got, auto_ack=True)
        self.assertTrue(h.wait_for(self.conn, lambda: got.msgs, timeout=10))
        self.assertEqual(got.bodies, [body])

    def test_body_in_tiny_frames(self):
        # The server reassembles a body sent as many 1-byte frames.
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_content(1, S.Basic.Publish(exchange="", routing_key=q), b"abcdefghij", frame_max=9)
            r.rpc(1, S.Basic.Qos(prefetch_count=0), S.Basic.QosOk)
            r.close_cleanly()
        self.assertEqual(self.ch.basic_get(q, auto_ack=True)[2], b"abcdefghij")

    def test_empty_body(self):
        # An empty body is a header with body-size 0 and no body frame.
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send(pika.frame.Method(1, S.Basic.Publish(exchange="", routing_key=q)).marshal()
                   + pika.frame.Header(1, 0, S.BasicProperties(message_id="e")).marshal())
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            self.assertIsInstance(r.recv_method().method, S.Basic.GetOk)
            hdr = r.recv_method()
            self.assertIsInstance(hdr, pika.frame.Header)
            self.assertEqual(hdr.body_size, 0)
            self.assertEqual(hdr.properties.message_id, "e")
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            self.assertIsInstance(r.recv_method().method, S.Basic.GetEmpty)  # next frame: no body frame
            r.close_cleanly()

    def test_empty_body_pika(self):
        q = self.queue()
        self.publish("", q, b"")
        m, p, b = self.ch.basic_get(q, auto_ack=True)
        self.assertIsNotNone(m)
        self.assertEqual(b, b"")

    def test_fifo_order(self):
        q = self.queue()
        for i in range(200):
            self.publish("", q, str(i).encode())
        got = h.Collector()
        self.ch.basic_consume(q, got, auto_ack=True)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 200))
        self.assertEqual(got.bodies, [str(i).encode() for i in range(200)])

    def test_user_id_mismatch_406(self):
        q = self.queue()
        self.publish("", q, properties=pika.BasicProperties(user_id="bob"))
        e = self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - user_id property set to 'bob' but authenticated "
                                       "user was 'guest'")
        self.assertEqual(self.count(q, ch=self.conn.channel()), 0)

    def test_user_id_matching_is_accepted(self):
        q = self.queue()
        self.publish("", q, properties=pika.BasicProperties(user_id="guest"))
        self.assertEqual(self.ch.basic_get(q, auto_ack=True)[1].user_id, "guest")

    def test_immediate_540_connection_close(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.publish(1, "", "anything", b"x", immediate=True)
            close = r.expect_connection_close(h.NOT_IMPLEMENTED)
            self.assertEqual((close.class_id, close.method_id), (60, 40))
            self.assertEqual(close.reply_text, "NOT_IMPLEMENTED - immediate=true")

    @h.needs_own_broker
    def test_message_over_max_message_size_406(self):
        # RabbitMQ's max is 128 MiB by default; a private Warren with a 1 KiB
        # limit shows the rule: 406 channel close, the connection survives.
        with h.own_broker("max_message_size=1024") as addr:
            c = h.connect(addr)
            try:
                ch = c.channel()
                q = ch.queue_declare("", exclusive=True).method.queue
                ch.basic_publish("", q, b"x" * 1024)
                ch.basic_publish("", q, b"x" * 2000)
                with self.assertRaises(pex.ChannelClosedByBroker) as cm:
                    h.sync(ch)
                self.assertEqual(cm.exception.reply_code, h.PRECONDITION_FAILED)
                self.assertEqual(cm.exception.reply_text, "PRECONDITION_FAILED - message size 2000 is larger "
                                                          "than configured max size 1024")
                ch = c.channel()
                self.assertEqual(ch.queue_declare(q, passive=True).method.message_count, 1)
            finally:
                c.close()


class Returns(h.BrokerTest):
    def test_mandatory_unroutable_returned(self):
        returned = []
        self.ch.add_on_return_callback(lambda ch, m, p, b: returned.append((m, p, b)))
        x = self.exchange("direct")
        self.publish(x, "nowhere", b"ret", mandatory=True,
                     properties=pika.BasicProperties(message_id="r1", headers={"a": 1}))
        self.assertTrue(h.wait_for(self.conn, lambda: returned))
        m, p, b = returned[0]
        self.assertEqual((m.reply_code, m.reply_text, m.exchange, m.routing_key), (h.NO_ROUTE, "NO_ROUTE", x, "nowhere"))
        self.assertEqual((p.message_id, p.headers, b), ("r1", {"a": 1}, b"ret"))

    def test_mandatory_default_exchange_missing_queue(self):
        returned = []
        self.ch.add_on_return_callback(lambda ch, m, p, b: returned.append(m))
        self.publish("", h.unique("missing"), b"x", mandatory=True)
        self.assertTrue(h.wait_for(self.conn, lambda: returned))
        self.assertEqual(returned[0].reply_code, h.NO_ROUTE)

    def test_mandatory_routed_not_returned(self):
        returned = []
        self.ch.add_on_return_callback(lambda *a: returned.append(a))
        q = self.queue()
        self.publish("", q, b"x", mandatory=True)
        h.sync(self.ch)
        h.drain(self.conn, 0.2)
        self.assertEqual(returned, [])
        self.assertEqual(self.count(q), 1)

    def test_unroutable_without_mandatory_dropped(self):
        returned = []
        self.ch.add_on_return_callback(lambda *a: returned.append(a))
        self.publish(self.exchange("fanout"), "", b"x")
        h.sync(self.ch)
        h.drain(self.conn, 0.2)
        self.assertEqual(returned, [])

    def test_return_of_large_message_raw(self):
        with h.RawClient() as r:
            r.handshake(frame_max=4096)
            r.open_channel(1)
            body = b"r" * 10000
            r.publish(1, "", h.unique("missing"), body, mandatory=True)
            msg = r.recv_content()
            self.assertIsInstance(msg.method, S.Basic.Return)
            self.assertEqual(msg.body, body)
            r.close_cleanly()


class Consume(h.BrokerTest):
    def test_server_generated_consumer_tags(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            t1 = r.rpc(1, S.Basic.Consume(queue=q), S.Basic.ConsumeOk).consumer_tag
            t2 = r.rpc(1, S.Basic.Consume(queue=q), S.Basic.ConsumeOk).consumer_tag
            r.close_cleanly()
        self.assertTrue(t1.startswith("amq.ctag-"), t1)
        self.assertTrue(t2.startswith("amq.ctag-"), t2)
        self.assertNotEqual(t1, t2)

    def test_client_tag_echoed_in_deliveries(self):
        q = self.queue()
        got = h.Collector()
        tag = self.ch.basic_consume(q, got, auto_ack=True, consumer_tag="my-tag")
        self.assertEqual(tag, "my-tag")
        self.publish("", q, b"x")
        self.assertTrue(h.wait_for(self.conn, lambda: got.msgs))
        m = got.msgs[0][0]
        self.assertEqual((m.consumer_tag, m.exchange, m.routing_key, m.redelivered, m.delivery_tag),
                         ("my-tag", "", q, False, 1))

    def test_consume_missing_queue_404(self):
        name = h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.basic_consume, name, lambda *a: None)
        self.assertEqual(e.reply_text, "NOT_FOUND - no queue '%s' in vhost '/'" % name)

    def test_exclusive_after_normal_403(self):
        q = self.queue()
        self.conn.channel().basic_consume(q, lambda *a: None)
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.basic_consume, q, lambda *a: None, exclusive=True)
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - queue '%s' in vhost '/' in exclusive use" % q)

    def test_normal_after_exclusive_403(self):
        q = self.queue()
        self.conn.channel().basic_consume(q, lambda *a: None, exclusive=True)
        self.assert_channel_error(h.ACCESS_REFUSED, self.ch.basic_consume, q, lambda *a: None)

    def test_exclusive_consumer_released_on_cancel(self):
        q = self.queue()
        ch2 = self.conn.channel()
        tag = ch2.basic_consume(q, lambda *a: None, exclusive=True)
        ch2.basic_cancel(tag)
        self.ch.basic_consume(q, lambda *a: None)

    def test_duplicate_tag_same_channel_530(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="dup"), S.Basic.ConsumeOk)
            r.send_method(1, S.Basic.Consume(queue=q, consumer_tag="dup"))
            close = r.expect_connection_close(h.NOT_ALLOWED)
            self.assertEqual((close.class_id, close.method_id), (60, 20))
            self.assertEqual(close.reply_text, "NOT_ALLOWED - attempt to reuse consumer tag 'dup'")

    def test_same_tag_on_other_channel_ok(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.open_channel(2)
            r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
            r.rpc(2, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
            r.close_cleanly()

    def test_cancel_stops_deliveries(self):
        q = self.queue()
        got = h.Collector()
        tag = self.ch.basic_consume(q, got, auto_ack=True)
        self.publish("", q, b"1")
        self.assertTrue(h.wait_for(self.conn, lambda: got.msgs))
        self.ch.basic_cancel(tag)
        self.publish("", q, b"2")
        h.sync(self.ch)
        h.drain(self.conn, 0.2)
        self.assertEqual(got.bodies, [b"1"])
        self.assertEqual(self.count(q), 1)

    def test_cancel_ok_echoes_tag_and_unknown_tag_is_ok(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="c1"), S.Basic.ConsumeOk)
            self.assertEqual(r.rpc(1, S.Basic.Cancel(consumer_tag="c1"), S.Basic.CancelOk).consumer_tag, "c1")
            self.assertEqual(r.rpc(1, S.Basic.Cancel(consumer_tag="nope"), S.Basic.CancelOk).consumer_tag, "nope")
            r.close_cleanly()

    def test_consume_nowait(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Basic.Consume(queue=q, consumer_tag="nw", no_ack=True, nowait=True))
            r.publish(1, "", q, b"hi")
            msg = r.recv_content()
            self.assertIsInstance(msg.method, S.Basic.Deliver)
            self.assertEqual((msg.method.consumer_tag, msg.body), ("nw", b"hi"))
            r.close_cleanly()

    def test_server_cancel_when_queue_deleted(self):
        q = self.queue()
        cancelled = []
        ch2 = self.conn.channel()
        tag = ch2.basic_consume(q, lambda *a: None)
        ch2.add_on_cancel_callback(lambda frame: cancelled.append(frame.method.consumer_tag))
        self.ch.queue_delete(q)
        self.assertTrue(h.wait_for(self.conn, lambda: cancelled))
        self.assertEqual(cancelled, [tag])
        self.assertTrue(ch2.is_open)

    def test_server_cancel_raw(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake(client_properties={"capabilities": {"consumer_cancel_notify": True}})
            r.open_channel(1)
            r.open_channel(2)
            r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
            r.send_method(2, S.Queue.Delete(queue=q))
            seen = {}
            for _ in range(2):
                f = r.recv_method()
                seen[type(f.method)] = f
            self.assertIn(S.Queue.DeleteOk, seen)
            cancel = seen[S.Basic.Cancel]
            self.assertEqual((cancel.channel_number, cancel.method.consumer_tag), (1, "t"))
            # the channel stays usable
            r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
            r.close_cleanly()

    def test_no_server_cancel_without_capability(self):
        # RabbitMQ sends basic.cancel only to clients that announced
        # consumer_cancel_notify.
        q = self.queue()
        with h.RawClient() as r:
            r.handshake(client_properties={})
            r.open_channel(1)
            r.open_channel(2)
            r.rpc(1, S.Basic.Consume(queue=q, consumer_tag="t"), S.Basic.ConsumeOk)
            r.rpc(2, S.Queue.Delete(queue=q), S.Queue.DeleteOk)
            r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)  # nothing else arrived first
            r.close_cleanly()

    def test_no_ack_consumer_removes_messages(self):
        q = self.queue()
        for i in range(3):
            self.publish("", q, b"x")
        got = h.Collector()
        self.ch.basic_consume(q, got, auto_ack=True)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 3))
        self.ch.close()
        self.assertEqual(self.count(q, ch=self.conn.channel()), 0)

    def test_round_robin_across_consumers(self):
        q = self.queue()
        a, b = h.Collector(ack=True), h.Collector(ack=True)
        ch_a, ch_b = self.conn.channel(), self.conn.channel()
        ch_a.basic_consume(q, a)
        ch_b.basic_consume(q, b)
        for i in range(10):
            self.publish("", q, str(i).encode())
        self.assertTrue(h.wait_for(self.conn, lambda: len(a.msgs) + len(b.msgs) == 10))
        self.assertEqual(len(a.msgs), 5)
        self.assertEqual(len(b.msgs), 5)
        self.assertEqual(sorted(a.bodies + b.bodies, key=int), [str(i).encode() for i in range(10)])

    def test_consumer_priority(self):
        q = self.queue()
        low, high = h.Collector(ack=True), h.Collector(ack=True)
        self.conn.channel().basic_consume(q, low, arguments={"x-priority": 1})
        self.conn.channel().basic_consume(q, high, arguments={"x-priority": 10})
        for i in range(5):
            self.publish("", q, b"p")
        self.assertTrue(h.wait_for(self.conn, lambda: len(low.msgs) + len(high.msgs) == 5))
        self.assertEqual((len(high.msgs), len(low.msgs)), (5, 0))

    def test_delivery_tags_shared_by_get_and_consume(self):
        q1, q2 = self.queue(), self.queue()
        for q in (q1, q1, q2):
            self.publish("", q, b"x")
        tags = [self.ch.basic_get(q1)[0].delivery_tag]
        got = h.Collector()
        self.ch.basic_consume(q2, got)
        self.assertTrue(h.wait_for(self.conn, lambda: got.msgs))
        tags += got.tags
        tags.append(self.ch.basic_get(q1)[0].delivery_tag)
        self.assertEqual(tags, [1, 2, 3])

    def test_direct_reply_to(self):
        replies = h.Collector()
        self.ch.basic_consume("amq.rabbitmq.reply-to", replies, auto_ack=True)
        server = self.conn.channel()
        q = self.queue(ch=server)
        self.publish("", q, b"request", properties=pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        h.sync(self.ch)
        m, p, b = server.basic_get(q, auto_ack=True)
        self.assertTrue(p.reply_to.startswith("amq.rabbitmq.reply-to."), p.reply_to)
        server.basic_publish("", p.reply_to, b"response")
        self.assertTrue(h.wait_for(self.conn, lambda: replies.msgs))
        self.assertEqual(replies.bodies, [b"response"])

    def test_direct_reply_to_without_consumer_406(self):
        self.publish("", "amq.rabbitmq.reply-to", properties=pika.BasicProperties(reply_to="amq.rabbitmq.reply-to"))
        e = self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - fast reply consumer does not exist")


class Get(h.BrokerTest):
    def test_get_ok_fields_and_get_empty(self):
        q = self.queue()
        for b in (b"1", b"2", b"3"):
            self.publish("", q, b)
        m, p, b = self.ch.basic_get(q, auto_ack=True)
        self.assertEqual((m.delivery_tag, m.redelivered, m.exchange, m.routing_key, m.message_count, b),
                         (1, False, "", q, 2, b"1"))
        self.assertEqual(self.ch.basic_get(q, auto_ack=True)[0].message_count, 1)
        self.assertEqual(self.ch.basic_get(q, auto_ack=True)[0].message_count, 0)
        self.assertEqual(self.ch.basic_get(q, auto_ack=True), (None, None, None))

    def test_get_empty_raw(self):
        q = self.queue()
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            empty = r.rpc(1, S.Basic.Get(queue=q), S.Basic.GetEmpty)
            self.assertEqual(empty.cluster_id, "")
            r.close_cleanly()

    def test_get_missing_queue_404(self):
        self.assert_channel_error(h.NOT_FOUND, self.ch.basic_get, h.unique("missing"))

    def test_get_exchange_and_key_of_publish(self):
        x = self.exchange("topic")
        q = self.bound_queue(x, "a.*")
        self.publish(x, "a.b", b"t")
        m, _, _ = self.ch.basic_get(q, auto_ack=True)
        self.assertEqual((m.exchange, m.routing_key), (x, "a.b"))


class Ack(h.BrokerTest):
    def setUp(self):
        super().setUp()
        self.q = self.queue()
        for i in range(1, 6):
            self.publish("", self.q, str(i).encode())
        h.sync(self.ch)

    def get_n(self, n, ch=None):
        return [(ch or self.ch).basic_get(self.q)[0] for _ in range(n)]

    def test_ack_removes(self):
        m = self.get_n(1)[0]
        self.ch.basic_ack(m.delivery_tag)
        self.ch.close()
        self.assertEqual(self.wait_count(self.q, 4, ch=self.conn.channel()), 4)

    def test_ack_multiple(self):
        self.get_n(5)
        self.ch.basic_ack(3, multiple=True)
        self.ch.close()  # 4 and 5 go back
        ch = self.conn.channel()
        self.assertEqual(self.wait_count(self.q, 2, ch=ch), 2)
        self.assertEqual([(m.redelivered, b) for m, _, b in h.get_all(ch, self.q)], [(True, b"4"), (True, b"5")])

    def test_ack_zero_multiple_acks_everything(self):
        self.get_n(5)
        self.ch.basic_ack(0, multiple=True)
        self.ch.close()
        self.assertEqual(self.count(self.q, ch=self.conn.channel()), 0)

    def test_ack_zero_multiple_with_nothing_outstanding_is_ok(self):
        self.ch.basic_ack(0, multiple=True)
        h.sync(self.ch)

    def test_unknown_delivery_tag_406(self):
        self.ch.basic_ack(99)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 99")

    def test_unknown_delivery_tag_multiple_406(self):
        self.get_n(2)
        self.ch.basic_ack(7, multiple=True)
        self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)

    def test_double_ack_406(self):
        m = self.get_n(1)[0]
        self.ch.basic_ack(m.delivery_tag)
        self.ch.basic_ack(m.delivery_tag)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - unknown delivery tag 1")

    def test_ack_of_auto_ack_delivery_406(self):
        m, _, _ = self.ch.basic_get(self.q, auto_ack=True)
        self.ch.basic_ack(m.delivery_tag)
        self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)

    def test_ack_on_other_channel_406(self):
        m = self.get_n(1)[0]
        ch2 = self.conn.channel()
        ch2.basic_ack(m.delivery_tag)
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            h.sync(ch2)
        self.assertEqual(cm.exception.reply_code, h.PRECONDITION_FAILED)

    def test_unknown_tag_nack_and_reject_406(self):
        self.ch.basic_nack(42)
        self.assert_channel_error(h.PRECONDITION_FAILED, h.sync, self.ch)
        ch = self.conn.channel()
        ch.basic_reject(42)
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            h.sync(ch)
        self.assertEqual(cm.exception.reply_text, "PRECONDITION_FAILED - unknown delivery tag 42")

    def test_reject_requeue_goes_back_to_head(self):
        m = self.get_n(1)[0]
        self.ch.basic_reject(m.delivery_tag, requeue=True)
        m2, _, b = self.ch.basic_get(self.q, auto_ack=True)
        self.assertEqual((b, m2.redelivered), (b"1", True))
        m3, _, b = self.ch.basic_get(self.q, auto_ack=True)
        self.assertEqual((b, m3.redelivered), (b"2", False))

    def test_reject_without_requeue_drops(self):
        m = self.get_n(1)[0]
        self.ch.basic_reject(m.delivery_tag, requeue=False)
        h.sync(self.ch)
        self.assertEqual(self.count(self.q), 4)

    def test_nack_multiple_requeue_keeps_order(self):
        self.get_n(3)
        self.ch.basic_nack(3, multiple=True, requeue=True)
        got = [(m.redelivered, b) for m, _, b in h.get_all(self.ch, self.q)]
        self.assertEqual(got, [(True, b"1"), (True, b"2"), (True, b"3"), (False, b"4"), (False, b"5")])

    def test_nack_multiple_without_requeue_drops(self):
        self.get_n(4)
        self.ch.basic_nack(0, multiple=True, requeue=False)
        h.sync(self.ch)
        self.assertEqual(self.count(self.q), 1)

    def test_nack_single_of_many(self):
        ms = self.get_n(3)
        self.ch.basic_nack(ms[1].delivery_tag, multiple=False, requeue=True)
        m, _, b = self.ch.basic_get(self.q, auto_ack=True)
        self.assertEqual((b, m.redelivered), (b"2", True))
        self.ch.basic_ack(ms[0].delivery_tag)
        self.ch.basic_ack(ms[2].delivery_tag)
        h.sync(self.ch)

    def test_channel_close_requeues_unacked(self):
        ch2 = self.conn.channel()
        self.get_n(2, ch=ch2)
        ch2.close()
        self.assertEqual(self.wait_count(self.q, 5), 5)
        got = [(m.redelivered, b) for m, _, b in h.get_all(self.ch, self.q)]
        self.assertEqual(got, [(True, b"1"), (True, b"2"), (False, b"3"), (False, b"4"), (False, b"5")])

    def test_connection_close_requeues_unacked(self):
        c2 = h.connect()
        ch2 = c2.channel()
        got = h.Collector()
        ch2.basic_consume(self.q, got)
        self.assertTrue(h.wait_for(c2, lambda: len(got.msgs) == 5))
        c2.close()
        self.assertEqual(self.wait_count(self.q, 5), 5)
        self.assertTrue(all(m.redelivered for m, _, _ in h.get_all(self.ch, self.q)))

    def test_abrupt_disconnect_requeues_unacked(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Basic.Get(queue=self.q))
            r.recv_content()
        self.assertEqual(self.wait_count(self.q, 5), 5)
        m, _, b = self.ch.basic_get(self.q, auto_ack=True)
        self.assertEqual((b, m.redelivered), (b"1", True))

    def test_redelivered_to_consumer(self):
        ch2 = self.conn.channel()
        self.get_n(1, ch=ch2)
        ch2.close()
        self.assertEqual(self.wait_count(self.q, 5), 5)
        got = h.Collector(ack=True)
        self.ch.basic_consume(self.q, got)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 5))
        self.assertEqual([(m.redelivered, b) for m, _, b in got.msgs][:2], [(True, b"1"), (False, b"2")])


class Recover(h.BrokerTest):
    def test_recover_requeue_redelivers(self):
        q = self.queue()
        for b in (b"a", b"b"):
            self.publish("", q, b)
        got = h.Collector()
        self.ch.basic_consume(q, got)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 2))
        self.ch.basic_recover(requeue=True)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 4))
        self.assertEqual([(m.redelivered, b) for m, _, b in got.msgs[2:]], [(True, b"a"), (True, b"b")])
        self.assertEqual(got.tags, [1, 2, 3, 4])
        self.ch.basic_ack(0, multiple=True)
        h.sync(self.ch)

    def test_recover_with_get(self):
        q = self.queue()
        self.publish("", q, b"g")
        self.ch.basic_get(q)
        self.ch.basic_recover(requeue=True)
        m, _, b = self.ch.basic_get(q, auto_ack=True)
        self.assertEqual((b, m.redelivered), (b"g", True))

    def test_recover_without_requeue_540(self):
        e = self.assert_connection_error(h.NOT_IMPLEMENTED, self.ch.basic_recover, requeue=False)
        self.assertEqual(e.reply_text, "NOT_IMPLEMENTED - requeue=false")


class Qos(h.BrokerTest):
    def fill(self, q, n):
        for i in range(n):
            self.publish("", q, str(i).encode())
        h.sync(self.ch)

    def test_prefetch_per_consumer(self):
        q = self.queue()
        self.fill(q, 10)
        self.ch.basic_qos(prefetch_count=2)
        got = h.Collector()
        self.ch.basic_consume(q, got)
        h.drain(self.conn, 0.3)
        self.assertEqual(len(got.msgs), 2)
        self.ch.basic_ack(got.tags[0])
        h.drain(self.conn, 0.3)
        self.assertEqual(len(got.msgs), 3)
        self.ch.basic_ack(0, multiple=True)
        h.drain(self.conn, 0.3)
        self.assertEqual(len(got.msgs), 5)

    def test_prefetch_applies_to_each_consumer(self):
        # global=false (RabbitMQ): the limit is per consumer, not per channel.
        q1, q2 = self.queue(), self.queue()
        self.fill(q1, 5)
        self.fill(q2, 5)
        self.ch.basic_qos(prefetch_count=2, global_qos=False)
        a, b = h.Collector(), h.Collector()
        self.ch.basic_consume(q1, a)
        self.ch.basic_consume(q2, b)
        h.drain(self.conn, 0.3)
        self.assertEqual((len(a.msgs), len(b.msgs)), (2, 2))

    def test_global_prefetch_shared_by_channel(self):
        q1, q2 = self.queue(), self.queue()
        self.fill(q1, 5)
        self.fill(q2, 5)
        self.ch.basic_qos(prefetch_count=3, global_qos=True)
        a, b = h.Collector(), h.Collector()
        self.ch.basic_consume(q1, a)
        self.ch.basic_consume(q2, b)
        h.drain(self.conn, 0.3)
        self.assertEqual(len(a.msgs) + len(b.msgs), 3)

    def test_consumer_and_global_prefetch_together(self):
        # per consumer 2, then channel 3 (the order RabbitMQ documents)
        q1, q2 = self.queue(), self.queue()
        self.fill(q1, 5)
        self.fill(q2, 5)
        self.ch.basic_qos(prefetch_count=2)
        self.ch.basic_qos(prefetch_count=3, global_qos=True)
        a, b = h.Collector(), h.Collector()
        self.ch.basic_consume(q1, a)
        self.ch.basic_consume(q2, b)
        h.drain(self.conn, 0.3)
        self.assertEqual((len(a.msgs), len(b.msgs)), (2, 1))

    def test_qos_change_affects_only_new_consumers(self):
        q1, q2 = self.queue(), self.queue()
        self.fill(q1, 5)
        self.fill(q2, 5)
        self.ch.basic_qos(prefetch_count=1)
        a, b = h.Collector(), h.Collector()
        self.ch.basic_consume(q1, a)
        self.ch.basic_qos(prefetch_count=3)
        self.ch.basic_consume(q2, b)
        h.drain(self.conn, 0.3)
        self.assertEqual((len(a.msgs), len(b.msgs)), (1, 3))

    def test_prefetch_zero_is_unlimited(self):
        q = self.queue()
        self.fill(q, 50)
        self.ch.basic_qos(prefetch_count=0)
        got = h.Collector()
        self.ch.basic_consume(q, got)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got.msgs) == 50))

    def test_prefetch_does_not_limit_get(self):
        q = self.queue()
        self.fill(q, 3)
        self.ch.basic_qos(prefetch_count=1)
        self.assertEqual(len([self.ch.basic_get(q)[0] for _ in range(3)]), 3)

    def test_prefetch_fair_dispatch(self):
        # prefetch 1: a busy consumer does not get more than its share.
        q = self.queue()
        slow, fast = h.Collector(ack=False), h.Collector(ack=True)
        ch_slow, ch_fast = self.conn.channel(), self.conn.channel()
        ch_slow.basic_qos(prefetch_count=1)
        ch_fast.basic_qos(prefetch_count=1)
        ch_slow.basic_consume(q, slow)
        ch_fast.basic_consume(q, fast)
        self.fill(q, 10)
        self.assertTrue(h.wait_for(self.conn, lambda: len(slow.msgs) + len(fast.msgs) == 10))
        self.assertEqual(len(slow.msgs), 1)

    def test_prefetch_size_540(self):
        e = self.assert_connection_error(h.NOT_IMPLEMENTED, self.ch.basic_qos, prefetch_size=10)
        self.assertEqual(e.reply_text, "NOT_IMPLEMENTED - prefetch_size!=0 (10)")


if __name__ == "__main__":
    unittest.main()
