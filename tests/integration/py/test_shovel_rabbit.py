"""Warren's shovels against a real RabbitMQ 3.10 (one node for this file,
rabbitnode.py, started on first use): Warren -> RabbitMQ (queue to queue,
forward headers), RabbitMQ -> Warren (a queue drained with on-confirm, and
a source exchange on RabbitMQ through a server-named queue), both with
persistent 1 KiB messages."""
import time

import pika

import harness as h
import rabbitnode
from test_shovel import ShovelTest, local_uri, until

N = 500


def rabbit_uri():
    host, port = rabbitnode.address()
    return "amqp://guest:guest@%s:%d" % (host, port)


class RabbitTest(ShovelTest):
    def rabbit_channel(self):
        c = rabbitnode.connect()
        self._conns.append(c)
        return c.channel()

    def test_warren_to_rabbitmq(self):
        uri = rabbit_uri()
        a = self.vhost()
        self.grant(a, "guest")
        dest_q = h.unique("shovel-out")
        rch = self.rabbit_channel()
        self.addCleanup(lambda: rabbitnode.connect().channel().queue_delete(dest_q))
        self.shovel(a, "to-rabbit", {"src-uri": local_uri(a), "src-queue": "out", "dest-uri": uri,
                                     "dest-queue": dest_q, "dest-add-forward-headers": True})
        st = self.state(a, "to-rabbit", "running", timeout=30)
        self.assertEqual(st["dest_uri"], "amqp://127.0.0.1:%d" % rabbitnode.address()[1], "no credentials shown")
        src = self.channel(a)
        for i in range(N):
            src.basic_publish("", "out", b"%05d" % i + b"x" * 1019, pika.BasicProperties(delivery_mode=2))
        got = self.bodies(rch, dest_q, N, timeout=60)
        self.assertEqual([b[:5] for _, b in got], [b"%05d" % i for i in range(N)])
        props = got[0][0]
        self.assertEqual(props.delivery_mode, 2)
        self.assertEqual(props.headers["x-shovelled"][0]["dest-queue"], dest_q)
        self.assertEqual(rch.queue_declare(dest_q, passive=True).method.message_count, 0)
        self.assertTrue(rch.queue_declare(dest_q, passive=True).method.queue, "declared durable there")

    def test_rabbitmq_to_warren(self):
        uri = rabbit_uri()
        a = self.vhost()
        self.grant(a, "guest")
        src_q = h.unique("shovel-in")
        rch = self.rabbit_channel()
        rch.queue_declare(src_q, durable=True)
        self.addCleanup(lambda: rabbitnode.connect().channel().queue_delete(src_q))
        rch.confirm_delivery()
        for i in range(N):
            rch.basic_publish("", src_q, b"%05d" % i + b"y" * 1019, pika.BasicProperties(delivery_mode=2))
        self.shovel(a, "from-rabbit", {"src-uri": uri, "src-queue": src_q, "dest-uri": local_uri(a),
                                       "dest-queue": "in", "ack-mode": "on-confirm"})
        got = self.bodies(self.channel(a), "in", N, timeout=60)
        self.assertEqual([b[:5] for _, b in got], [b"%05d" % i for i in range(N)])
        until(lambda: rch.queue_declare(src_q, passive=True).method.message_count == 0 and
              self.status(a, "from-rabbit")["acked"] == N, timeout=30)

    def test_rabbitmq_exchange_source(self):
        uri = rabbit_uri()
        a = self.vhost()
        self.grant(a, "guest")
        self.shovel(a, "rx", {"src-uri": uri, "src-exchange": "amq.topic", "src-exchange-key": "shovel.#",
                              "dest-uri": local_uri(a), "dest-queue": "rx"})
        st = self.state(a, "rx", "running", timeout=30)
        self.assertEqual((st["src_exchange"], st["src_exchange_key"]), ("amq.topic", "shovel.#"))
        rch = self.rabbit_channel()
        rch.basic_publish("amq.topic", "shovel.a", b"one")
        rch.basic_publish("amq.topic", "elsewhere", b"two")
        self.assertEqual([b for _, b in self.bodies(self.channel(a), "rx", 1, timeout=30)], [b"one"])
        time.sleep(0.3)
        self.assertEqual(self.channel(a).queue_declare("rx", passive=True).method.message_count, 0)
