"""Channel: open/close, many channels, flow, and channel-state errors."""
import socket
import unittest

import pika.spec as S

import harness as h


def close_method(code=200, text="", class_id=0, method_id=0):
    return S.Channel.Close(reply_code=code, reply_text=text, class_id=class_id, method_id=method_id)


class OpenClose(h.BrokerTest):
    def test_open_and_close(self):
        ch = self.conn.channel()
        self.assertTrue(ch.is_open)
        ch.close()
        self.assertTrue(ch.is_closed)
        self.assertTrue(self.conn.is_open)

    def test_open_close_raw(self):
        with h.RawClient() as r:
            r.handshake()
            ok = r.rpc(1, S.Channel.Open(), S.Channel.OpenOk)
            self.assertEqual(ok.channel_id, b"")
            r.rpc(1, close_method(), S.Channel.CloseOk)
            r.close_cleanly()

    def test_hundred_channels(self):
        chans = [self.conn.channel() for _ in range(100)]
        self.assertEqual(len({c.channel_number for c in chans}), 100)
        for c in chans:
            h.sync(c)
        for c in chans:
            c.close()
        h.sync(self.ch)

    def test_channel_number_reused_after_close(self):
        with h.RawClient() as r:
            r.handshake()
            for _ in range(3):
                r.open_channel(7)
                r.rpc(7, close_method(), S.Channel.CloseOk)
            r.open_channel(7)
            r.rpc(7, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
            r.close_cleanly()

    def test_high_channel_numbers(self):
        with h.RawClient() as r:
            r.handshake()
            for n in (1, 1000, 2047):
                r.open_channel(n)
            r.rpc(2047, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
            r.close_cleanly()

    def test_close_with_custom_reply_code(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.rpc(1, close_method(320, "client says bye", 60, 40), S.Channel.CloseOk)
            r.open_channel(2)
            r.close_cleanly()

    def test_channel_max_counts_open_channels(self):
        # channel_max limits how many channels are open at once.
        with h.RawClient() as r:
            r.handshake(channel_max=2)
            r.open_channel(1)
            r.open_channel(2)
            r.rpc(1, close_method(), S.Channel.CloseOk)
            r.open_channel(1)
            r.send_method(3, S.Channel.Open())
            close = r.expect_connection_close(h.NOT_ALLOWED)
            self.assertEqual((close.class_id, close.method_id), (0, 0))


class Flow(h.BrokerTest):
    def test_flow_active_true(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            ok = r.rpc(1, S.Channel.Flow(active=True), S.Channel.FlowOk)
            self.assertTrue(ok.active)
            r.close_cleanly()

    def test_flow_active_false_not_implemented(self):
        # RabbitMQ refuses client-side flow control: 540 connection close.
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Channel.Flow(active=False))
            close = r.expect_connection_close(h.NOT_IMPLEMENTED)
            self.assertEqual((close.class_id, close.method_id), (20, 20))
            self.assertEqual(close.reply_text, "NOT_IMPLEMENTED - active=false")

    def test_pika_flow(self):
        self.assertTrue(self.ch.flow(True))


class StateErrors(unittest.TestCase):
    """All of these are connection errors in RabbitMQ."""

    def expect_close(self, send, code, ids=None, text=None, channels=(1,)):
        with h.RawClient() as r:
            r.handshake()
            for n in channels:
                r.open_channel(n)
            send(r)
            close = r.expect_connection_close(code)
            if ids is not None:
                self.assertEqual((close.class_id, close.method_id), ids)
            if text is not None:
                self.assertEqual(close.reply_text, text)
        c = h.connect()  # the broker keeps serving
        c.close()

    def test_method_on_unopened_channel_504(self):
        self.expect_close(lambda r: r.send_method(5, S.Basic.Qos(prefetch_count=1)),
                          h.CHANNEL_ERROR, (60, 10), "CHANNEL_ERROR - expected 'channel.open'")

    def test_publish_on_unopened_channel_504(self):
        self.expect_close(lambda r: r.publish(2, "", "q", b"body"),
                          h.CHANNEL_ERROR, (60, 40), "CHANNEL_ERROR - expected 'channel.open'")

    def test_close_on_unopened_channel_504(self):
        self.expect_close(lambda r: r.send_method(3, close_method()), h.CHANNEL_ERROR, (20, 40))

    def test_second_channel_open_504(self):
        self.expect_close(lambda r: r.send_method(1, S.Channel.Open()),
                          h.CHANNEL_ERROR, (20, 10), "CHANNEL_ERROR - second 'channel.open' seen")

    def test_channel_open_on_channel_zero_504(self):
        self.expect_close(lambda r: r.send_method(0, S.Channel.Open()), h.CHANNEL_ERROR, (20, 10),
                          "CHANNEL_ERROR - unexpected method in connection state running", channels=())

    def test_basic_method_on_channel_zero_504(self):
        self.expect_close(lambda r: r.send_method(0, S.Basic.Qos(prefetch_count=1)),
                          h.CHANNEL_ERROR, (60, 10), channels=())

    def test_channel_close_on_channel_zero_504(self):
        self.expect_close(lambda r: r.send_method(0, close_method()), h.CHANNEL_ERROR, (20, 40), channels=())

    def test_unsolicited_close_ok_503(self):
        self.expect_close(lambda r: r.send_method(1, S.Channel.CloseOk()), h.COMMAND_INVALID, (20, 41),
                          "COMMAND_INVALID - unimplemented method")

    def test_unsolicited_flow_ok_503(self):
        self.expect_close(lambda r: r.send_method(1, S.Channel.FlowOk(active=True)), h.COMMAND_INVALID, (20, 21))

    def test_connection_method_on_channel_one_503(self):
        self.expect_close(lambda r: r.send_method(1, S.Connection.Open(virtual_host="/")),
                          h.COMMAND_INVALID, (10, 40))

    def test_server_only_method_from_client_503(self):
        self.expect_close(lambda r: r.send_method(1, S.Queue.DeclareOk(queue="x", message_count=0,
                                                                         consumer_count=0)),
                          h.COMMAND_INVALID, (50, 11))


class ServerClose(h.BrokerTest):
    def test_methods_ignored_until_close_ok(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Queue.Declare(queue=h.unique("missing"), passive=True))
            r.expect_channel_close(1, h.NOT_FOUND)
            # the close-ok above is ours; now the channel can be reopened
            r.open_channel(1)
            r.rpc(1, S.Basic.Qos(prefetch_count=1), S.Basic.QosOk)
            r.close_cleanly()

    def test_method_sent_before_seeing_close_is_dropped(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            r.send_method(1, S.Queue.Declare(queue=h.unique("missing"), passive=True))
            r.send_method(1, S.Basic.Qos(prefetch_count=1))  # in flight: ignored
            r.expect_channel_close(1, h.NOT_FOUND)
            with self.assertRaises(socket.timeout):
                r.recv_method(timeout=0.5)
            r.open_channel(1)
            r.close_cleanly()

    def test_channel_error_leaves_other_channels_alone(self):
        q = self.queue()
        other = self.conn.channel()
        got = []
        other.basic_consume(q, lambda ch, m, p, b: got.append(b), auto_ack=True)
        self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, h.unique("missing"), passive=True)
        pub = self.conn.channel()
        pub.basic_publish("", q, b"still here")
        self.assertTrue(h.wait_for(self.conn, lambda: got == [b"still here"]))

    def test_closed_channel_number_can_be_reopened_by_pika(self):
        self.assert_channel_error(h.NOT_FOUND, self.ch.queue_declare, h.unique("missing"), passive=True)
        ch = self.conn.channel()
        h.sync(ch)


if __name__ == "__main__":
    unittest.main()
