"""The README's "Moving from RabbitMQ" walk-through, end to end, counted.

A RabbitMQ 3.10 (with its management API) serves a topic exchange `shop`
and a durable queue `orders`, a confirming publisher of numbered
persistent messages and an acking consumer, both live. Then, as a user
would:
1. Warren imports RabbitMQ's definitions (GET /api/definitions there,
   POST here) -- users, exchanges, queues, bindings;
2. an upstream naming the RabbitMQ and a policy federate every queue;
3. a consumer starts on Warren and the one on RabbitMQ stops;
4. the publisher moves to Warren (after its last confirm from RabbitMQ);
5. RabbitMQ's queue drains to empty through the link.
Every number published is consumed, once -- or more than once only when a
later copy is marked redelivered (the delivery's flag, or the
x-received-from entry's for a message RabbitMQ redelivered to the link).
"""
import base64
import json
import threading
import time
import unittest
import urllib.request

import pika

from fedutil import (MIGRATION_MGMT, MIGRATION_NODE, MIGRATION_PORT, _more_time, api, ok, policy,
                     rabbit, rabbit_uri, running, until, upstream, warren)


def rabbit_definitions():
    auth = base64.b64encode(b"guest:guest").decode()
    req = urllib.request.Request("http://127.0.0.1:%d/api/definitions" % MIGRATION_MGMT,
                                 headers={"authorization": "Basic " + auth})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class Log:
    """What the consumers saw: (number, redelivered) in order."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seen = []

    def add(self, n, redelivered):
        with self.lock:
            self.seen.append((n, redelivered))

    def numbers(self):
        with self.lock:
            return [n for n, _ in self.seen]


class Consumer(threading.Thread):
    def __init__(self, addr, log):
        super().__init__(daemon=True)
        self.addr, self.log = addr, log
        self.stop_now = threading.Event()
        self.ready = threading.Event()
        self.error = None
        self.count = self.federated = 0

    def on(self, ch, m, props, body):
        hops = (props.headers or {}).get("x-received-from") or [{}]
        self.log.add(int(body), m.redelivered or bool(hops[0].get("redelivered")))
        self.count += 1
        self.federated += "x-received-from" in (props.headers or {})
        ch.basic_ack(m.delivery_tag)

    def run(self):
        try:
            conn = pika.BlockingConnection(pika.ConnectionParameters(*self.addr))
            ch = conn.channel()
            ch.basic_qos(prefetch_count=10)
            ch.basic_consume("orders", self.on)
            self.ready.set()
            while not self.stop_now.is_set():
                conn.process_data_events(0.05)
            conn.close()
        except Exception as e:  # reported by the test
            self.error = e
            self.ready.set()


class Publisher(threading.Thread):
    """Publishes 0, 1, 2, ... to `shop` with confirms; moves when told."""

    def __init__(self, addr):
        super().__init__(daemon=True)
        self.addr = addr
        self.move_to = None
        self.stop_now = threading.Event()
        self.next = 0
        self.error = None

    def run(self):
        try:
            while not self.stop_now.is_set():
                conn = pika.BlockingConnection(pika.ConnectionParameters(*self.addr))
                ch = conn.channel()
                ch.confirm_delivery()
                while not self.stop_now.is_set() and self.move_to is None:
                    ch.basic_publish("shop", "order.new", b"%d" % self.next,
                                     pika.BasicProperties(delivery_mode=2), mandatory=True)
                    self.next += 1  # confirmed: basic_publish returned
                    time.sleep(0.002)
                conn.close()
                if self.move_to is not None:
                    self.addr, self.move_to = self.move_to, None
        except Exception as e:
            self.error = e


class MigrationTest(unittest.TestCase):
    def test_move_from_rabbitmq_without_loss(self):
        r = rabbit(MIGRATION_NODE, MIGRATION_PORT, MIGRATION_MGMT, ["rabbitmq_management"])
        w = warren("migration")
        _more_time(90)
        raddr, waddr = ("127.0.0.1", r.port), (w.host, w.port)
        setup = pika.BlockingConnection(pika.ConnectionParameters(*raddr))
        sch = setup.channel()
        sch.exchange_declare("shop", "topic", durable=True)
        sch.queue_declare("orders", durable=True)
        sch.queue_bind("orders", "shop", "order.#")
        setup.close()
        log = Log()
        old = Consumer(raddr, log)
        pub = Publisher(raddr)
        old.start()
        old.ready.wait(10)
        pub.start()
        until(lambda: len(log.numbers()) >= 200, "RabbitMQ's consumer to get going")

        # 1. definitions, 2. federation of every queue
        ok(w, "POST", "/api/definitions", rabbit_definitions())
        upstream(w, "rabbit", rabbit_uri(r.port))
        policy(w, "federate-queues", ".*", {"federation-upstream-set": "all"}, "queues")
        running(w, queue="orders")

        # 3. the consumers move
        new = Consumer(waddr, log)
        new.start()
        new.ready.wait(10)
        time.sleep(0.3)
        old.stop_now.set()
        old.join(10)
        until(lambda: new.count >= 200, "the Warren consumer to take over")

        # 4. the publisher moves
        pub.move_to = waddr
        until(lambda: pub.addr == waddr, "the publisher to move")
        moved_at = pub.next
        until(lambda: pub.next >= moved_at + 300, "publishing to Warren")
        pub.stop_now.set()
        pub.join(10)

        # 5. RabbitMQ's queue drains; every number arrives
        until(lambda: r.queues()["orders"][0] == 0, "RabbitMQ's queue to drain", tries=600)
        until(lambda: set(log.numbers()) >= set(range(pub.next)), "every message", tries=600)
        time.sleep(0.5)  # a straggler would show as a duplicate
        new.stop_now.set()
        new.join(10)
        for t in (old, new, pub):
            self.assertIsNone(t.error)

        first = {}
        for n, redelivered in log.seen:
            if n in first:
                self.assertTrue(redelivered, "message %d consumed twice, not redelivered" % n)
            first.setdefault(n, redelivered)
        self.assertEqual(sorted(first), list(range(pub.next)))
        self.assertGreater(new.federated, 0)  # some came from RabbitMQ through the link
        self.assertGreater(new.count - new.federated, 0)  # and some were published to Warren
        link = [l for l in ok(w, "GET", "/api/federation-links") if l.get("queue") == "orders"][0]
        self.assertEqual(link["status"], "running")
        # done: the policy goes, and the link with it
        ok(w, "DELETE", "/api/policies/%2F/federate-queues")
        until(lambda: not ok(w, "GET", "/api/federation-links"), "the link to stop")
        self.assertEqual(r.queues()["orders"][:2], (0, 0))
        api(w, "DELETE", "/api/parameters/federation-upstream/%2F/rabbit")
