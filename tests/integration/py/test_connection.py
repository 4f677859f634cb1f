"""Connection: handshake, authentication, tuning, heartbeats, close."""
import socket
import time
import unittest

import pika
import pika.spec as S
from pika import exceptions as pex

import harness as h

EXPECTED_CAPABILITIES = {
    "publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify",
    "connection.blocked", "consumer_priorities", "authentication_failure_close",
    "per_consumer_qos", "direct_reply_to",
}


class Handshake(unittest.TestCase):
    def test_plain_login_with_pika(self):
        c = h.connect()
        try:
            ch = c.channel()
            q = ch.queue_declare("", exclusive=True).method.queue
            self.assertTrue(q.startswith("amq.gen-"))
        finally:
            c.close()
        self.assertTrue(c.is_closed)

    def test_amqplain_login(self):
        with h.RawClient() as r:
            r.handshake(mechanism="AMQPLAIN")
            r.open_channel(1)
            ok = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk)
            self.assertTrue(ok.queue.startswith("amq.gen-"))
            r.close_cleanly()

    def test_start_offers_plain_and_amqplain(self):
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            start = r.expect(S.Connection.Start, 0)
            self.assertEqual((start.version_major, start.version_minor), (0, 9))
            self.assertEqual(set(start.mechanisms.split()), {b"PLAIN", b"AMQPLAIN"})
            self.assertEqual(start.locales, b"en_US")

    def test_server_properties_keys(self):
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            props = r.expect(S.Connection.Start, 0).server_properties
            # The product name differs (RabbitMQ vs Warren); the keys do not.
            for key in ("product", "version", "platform", "copyright", "information", "cluster_name"):
                self.assertIsInstance(props.get(key), str, key)

    def test_server_capabilities(self):
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            caps = r.expect(S.Connection.Start, 0).server_properties["capabilities"]
            # RabbitMQ 3.10 lists exactly these nine, all true.
            self.assertEqual(set(caps), EXPECTED_CAPABILITIES)
            self.assertTrue(all(v is True for v in caps.values()), caps)

    def test_locale_and_client_properties_echo(self):
        # Any client properties are accepted, including nested tables.
        with h.RawClient() as r:
            r.handshake(client_properties={"product": "x", "version": "1",
                                           "capabilities": {"basic.nack": True, "publisher_confirms": True},
                                           "connection_name": "itest"})
            r.open_channel(1)
            r.close_cleanly()

    def test_many_concurrent_connections(self):
        conns = [h.connect() for _ in range(20)]
        try:
            for c in conns:
                c.channel().queue_declare("", exclusive=True)
        finally:
            for c in conns:
                c.close()


class Authentication(unittest.TestCase):
    def test_bad_password_pika(self):
        with self.assertRaises(pex.ProbableAuthenticationError) as cm:
            h.connect(password="wrong-password")
        self.assertIn("403", str(cm.exception))

    def test_bad_password_is_403_connection_close(self):
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            r.expect(S.Connection.Start, 0)
            r.send_method(0, S.Connection.StartOk(
                client_properties={"capabilities": {"authentication_failure_close": True}},
                mechanism="PLAIN", response=b"\0guest\0wrong", locale="en_US"))
            close = r.expect_connection_close(h.ACCESS_REFUSED, timeout=10)
            self.assertEqual((close.class_id, close.method_id), (0, 0))
            self.assertTrue(close.reply_text.startswith("ACCESS_REFUSED - Login was refused using "
                                                        "authentication mechanism PLAIN"), close.reply_text)

    def test_unknown_user_is_403(self):
        with h.RawClient() as r:
            with self.assertRaises(AssertionError) as cm:
                r.handshake(user="no-such-user-" + h.RUN_ID)
            self.assertIn("reply_code=403", str(cm.exception))

    def test_amqplain_bad_password_is_403(self):
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            r.expect(S.Connection.Start, 0)
            r.send_method(0, S.Connection.StartOk(
                client_properties={"capabilities": {"authentication_failure_close": True}},
                mechanism="AMQPLAIN", response=h.amqplain_response("guest", "nope"), locale="en_US"))
            close = r.expect_connection_close(h.ACCESS_REFUSED, timeout=10)
            self.assertIn("AMQPLAIN", close.reply_text)

    def test_bad_password_without_capability_just_closes(self):
        # RabbitMQ: a client that did not announce authentication_failure_close
        # gets no connection.close at all, only the TCP close.
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            r.expect(S.Connection.Start, 0)
            r.send_method(0, S.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                  response=b"\0guest\0wrong", locale="en_US"))
            with self.assertRaises(h.Closed):
                r.recv_method(timeout=10)

    def test_unknown_mechanism_closes_socket(self):
        # RabbitMQ: no connection.close, the socket is just closed.
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            r.expect(S.Connection.Start, 0)
            r.send_method(0, S.Connection.StartOk(client_properties={}, mechanism="FOO",
                                                  response=b"\0guest\0guest", locale="en_US"))
            with self.assertRaises(h.Closed):
                r.recv_method(timeout=10)

    def test_unknown_vhost_is_530(self):
        with h.RawClient() as r:
            r.handshake(open_vhost=False)
            vhost = "no-such-vhost-" + h.RUN_ID
            r.send_method(0, S.Connection.Open(virtual_host=vhost))
            close = r.expect_connection_close(h.NOT_ALLOWED, timeout=10)
            self.assertEqual((close.class_id, close.method_id), (10, 40))
            self.assertEqual(close.reply_text, "NOT_ALLOWED - vhost %s not found" % vhost)

    def test_unknown_vhost_pika(self):
        with self.assertRaises(pex.ProbableAccessDeniedError) as cm:
            h.connect(vhost="nope-" + h.RUN_ID)
        self.assertIn("530", str(cm.exception))

    def test_method_before_start_ok_closes_socket(self):
        # RabbitMQ treats it as a handshake error: TCP close, no connection.close.
        with h.RawClient() as r:
            r.send(h.PROTOCOL_HEADER)
            r.expect(S.Connection.Start, 0)
            r.send_method(0, S.Connection.Open(virtual_host="/"))
            with self.assertRaises(h.Closed):
                r.recv_method(timeout=10)


class ProtocolHeader(unittest.TestCase):
    def assert_rejected(self, header):
        with h.RawClient() as r:
            r.send(header)
            self.assertEqual(r.recv_until_closed(timeout=5), b"AMQP\x00\x00\x09\x01")

    def test_amqp_0_8_header(self):
        self.assert_rejected(b"AMQP\x00\x00\x08\x00")

    def test_wrong_revision(self):
        self.assert_rejected(b"AMQP\x00\x00\x09\x02")

    def test_http_request(self):
        self.assert_rejected(b"GET / HTTP/1.1\r\n\r\n")

    def test_zero_version(self):
        self.assert_rejected(b"AMQP\x00\x00\x00\x00")

    def test_amqp_1_0_header(self):
        self.assert_rejected(b"AMQP\x00\x01\x00\x00")


class Tuning(unittest.TestCase):
    def test_server_proposes_rabbitmq_defaults(self):
        with h.RawClient() as r:
            t = r.handshake()
            self.assertEqual((t.channel_max, t.frame_max, t.heartbeat), (2047, 131072, 60))
            r.close_cleanly()

    def test_client_lowers_frame_max(self):
        # With frame_max 4096 every frame the server sends is at most 4096 bytes.
        with h.RawClient() as r:
            r.handshake(frame_max=4096)
            r.open_channel(1)
            q = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk).queue
            body = bytes(range(256)) * 80  # 20480 bytes
            r.publish(1, "", q, body)
            r.send_method(1, S.Basic.Get(queue=q, no_ack=True))
            msg = r.recv_content()
            self.assertEqual(msg.body, body)
            self.assertGreaterEqual(len(msg.body_frames), 6)
            for f in msg.body_frames:
                self.assertLessEqual(len(f.fragment) + 8, 4096)
            r.close_cleanly()

    def test_client_lowers_channel_max(self):
        with h.RawClient() as r:
            r.handshake(channel_max=5)
            for n in range(1, 6):
                r.open_channel(n)
            r.send_method(6, S.Channel.Open())
            close = r.expect_connection_close(h.NOT_ALLOWED)
            self.assertEqual(close.reply_text, "NOT_ALLOWED - number of channels opened (5) has "
                                               "reached the negotiated channel_max (5)")

    def test_frame_max_below_minimum_refused(self):
        # RabbitMQ: frame_max < 4096 in tune-ok is a handshake error (TCP close).
        with h.RawClient() as r:
            with self.assertRaises(h.Closed):
                r.handshake(frame_max=4095)

    def test_frame_max_above_server_refused(self):
        with h.RawClient() as r:
            with self.assertRaises(h.Closed):
                r.handshake(frame_max=131072 + 1)

    def test_frame_max_zero_refused(self):
        # 0 ("no limit") exceeds the server's limit, so RabbitMQ refuses it.
        with h.RawClient() as r:
            with self.assertRaises(h.Closed):
                r.handshake(frame_max=0)

    def test_channel_max_above_server_refused(self):
        with h.RawClient() as r:
            with self.assertRaises(h.Closed):
                r.handshake(channel_max=3000)

    def test_client_may_raise_heartbeat(self):
        with h.RawClient() as r:
            r.handshake(heartbeat=120)
            r.open_channel(1)
            r.close_cleanly()

    def test_pika_negotiates_lower_frame_max(self):
        c = h.connect(frame_max=8192)
        try:
            ch = c.channel()
            q = ch.queue_declare("", exclusive=True).method.queue
            body = b"z" * 100000
            ch.basic_publish("", q, body)
            m, _, b = ch.basic_get(q, auto_ack=True)
            self.assertEqual(b, body)
        finally:
            c.close()


class Heartbeats(unittest.TestCase):
    def test_silent_client_is_disconnected(self):
        with h.RawClient() as r:
            r.handshake(heartbeat=1)
            t0 = time.monotonic()
            self.assertTrue(r.wait_closed(timeout=10), "silent client not disconnected")
            elapsed = time.monotonic() - t0
            self.assertGreaterEqual(elapsed, 1.0)

    def test_client_sending_heartbeats_stays(self):
        with h.RawClient() as r:
            r.handshake(heartbeat=1)
            r.open_channel(1)
            end = time.monotonic() + 5
            while time.monotonic() < end:
                r.send(h.raw_frame(h.FRAME_HEARTBEAT, 0, b""))
                time.sleep(0.3)
            ok = r.rpc(1, S.Queue.Declare(queue="", exclusive=True), S.Queue.DeclareOk)
            self.assertTrue(ok.queue)
            r.close_cleanly()

    def test_server_sends_heartbeats(self):
        with h.RawClient() as r:
            r.handshake(heartbeat=1)
            seen = 0
            end = time.monotonic() + 4
            while time.monotonic() < end and seen < 2:
                r.send(h.raw_frame(h.FRAME_HEARTBEAT, 0, b""))
                try:
                    f = r.recv_frame(timeout=0.3)
                except socket.timeout:
                    continue
                self.assertIsInstance(f, pika.frame.Heartbeat)
                self.assertEqual(f.channel_number, 0)
                seen += 1
            self.assertGreaterEqual(seen, 2)

    def test_heartbeat_zero_keeps_silent_client(self):
        with h.RawClient() as r:
            r.handshake(heartbeat=0)
            self.assertFalse(r.wait_closed(timeout=3))
            r.open_channel(1)
            r.close_cleanly()

    def test_pika_heartbeats_keep_connection(self):
        c = h.connect(heartbeat=1)
        try:
            h.drain(c, 4)
            self.assertTrue(c.is_open)
            c.channel().queue_declare("", exclusive=True)
        finally:
            c.close()


class Close(unittest.TestCase):
    def test_client_close_gets_close_ok_then_eof(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.open_channel(2)
            r.send_method(0, S.Connection.Close(reply_code=200, reply_text="bye", class_id=0, method_id=0))
            r.expect(S.Connection.CloseOk, 0)
            # RabbitMQ then waits (up to 30 s) for the client to close the
            # TCP connection; it sends nothing more.
            with self.assertRaises((socket.timeout, h.Closed)):
                r.recv_frame(timeout=1)

    def test_server_close_then_close_ok_then_eof(self):
        # A hard error makes the server send connection.close; after our
        # close-ok it closes the socket.
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.publish(1, "", "x", b"x", immediate=True)
            r.expect_connection_close(h.NOT_IMPLEMENTED)

    def test_server_ignores_methods_after_close(self):
        # After the server sent connection.close it discards everything but close-ok.
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.publish(1, "", "x", b"x", immediate=True)
            close = r.recv_method()
            self.assertIsInstance(close.method, S.Connection.Close)
            r.send_method(1, S.Queue.Declare(queue="", exclusive=True))
            r.send_method(0, S.Connection.CloseOk())
            with self.assertRaises(h.Closed):
                r.recv_method(timeout=5)

    def test_pika_close_with_open_channels(self):
        c = h.connect()
        chans = [c.channel() for _ in range(5)]
        c.close()
        self.assertTrue(c.is_closed)
        self.assertTrue(all(ch.is_closed for ch in chans))

    def test_abrupt_tcp_close_does_not_disturb_broker(self):
        # Abrupt TCP close (no connection.close) must not affect other clients.
        r = h.RawClient()
        r.handshake()
        r.open_channel(1)
        r.close()
        c = h.connect()
        try:
            c.channel().queue_declare("", exclusive=True)
        finally:
            c.close()


if __name__ == "__main__":
    unittest.main()
