"""Policies and operator policies on live queues and exchanges.

Until the management API can set them, these tests write the policies table
of data_dir/metadata.db between two runs of a private Warren (as a
definitions import or the HTTP API will through the same store), then check
each key's effect with pika: at declare time, after a restart, and for
durable queues declared before the policy existed. Runtime re-evaluation
(put / change / delete while queues hold messages) is covered by
tests/unit/test_broker_policy.c, which drives the broker's queues directly.

The expectations were checked against RabbitMQ 3.10.8 with the same
policies set through its HTTP API."""
import os
import shutil
import sqlite3
import struct
import tempfile
import time
import unittest

import pika

import harness as h


def field(value):
    """One AMQP field value as a JSON value converts: int 'l', str 'S'."""
    if isinstance(value, bool):
        return b"t" + bytes([value])
    if isinstance(value, int):
        return b"l" + struct.pack(">q", value)
    data = value.encode()
    return b"S" + struct.pack(">I", len(data)) + data


def table(d):
    """Encoded field table content (no length prefix), as the store keeps it."""
    out = b""
    for k, v in d.items():
        out += bytes([len(k)]) + k.encode() + field(v)
    return out


class Policies(unittest.TestCase):
    def setUp(self):
        self.data_dir = tempfile.mkdtemp(prefix="warren-itest-policies-")
        self.addCleanup(shutil.rmtree, self.data_dir, True)
        self.proc = None

    def start(self):
        self.proc = h.WarrenProcess(["data_dir=%s" % self.data_dir])
        addr = self.proc.start()
        self.addCleanup(self.stop)
        self.conn = h.connect(addr)
        return self.conn.channel()

    def stop(self):
        if self.proc:
            proc, self.proc = self.proc, None
            self.assertEqual(proc.stop(), 0)

    def restart(self):
        self.conn.close()
        self.stop()
        return self.start()

    def set_policies(self, rows):
        """rows: (name, pattern, apply_to, priority, definition, operator)."""
        db = sqlite3.connect(os.path.join(self.data_dir, "metadata.db"))
        with db:
            for name, pattern, apply_to, prio, definition, op in rows:
                db.execute("INSERT OR REPLACE INTO policies (vhost, name, operator_policy, "
                           "pattern, apply_to, priority, definition) VALUES (?,?,?,?,?,?,?)",
                           ("/", name, int(op), pattern, apply_to, prio, table(definition)))
        db.close()

    def bodies(self, ch, queue):
        return [body.decode() for _, _, body in h.get_all(ch, queue)]

    def count(self, ch, queue):
        return ch.queue_declare(queue, passive=True).method.message_count

    @h.needs_own_broker
    def test_keys_take_effect(self):
        ch = self.start()
        self.stop()
        self.set_policies([
            ("len", "^pol\\.len", "queues", 0, {"max-length": 2}, False),
            ("bytes", "^pol\\.bytes", "queues", 0, {"max-length-bytes": 10}, False),
            ("dlx", "^pol\\.dl", "queues", 0,
             {"dead-letter-exchange": "pol.dlx", "dead-letter-routing-key": "dead",
              "message-ttl": 200, "queue-mode": "lazy"}, False),
            ("reject", "^pol\\.rp", "queues", 0,
             {"max-length": 1, "overflow": "reject-publish"}, False),
            ("ae", "^pol\\.x$", "exchanges", 0, {"alternate-exchange": "pol.ae"}, False),
            ("op", "^pol\\.len", "queues", 0, {"max-length": 1}, True),
            ("op-other", "^pol\\.bytes", "all", 0, {"max-length": 50}, True),
        ])
        ch = self.start()
        # max-length: the policy's 2 and the operator policy's 1 -> 1
        ch.queue_declare("pol.len")
        for i in range(4):
            ch.basic_publish("", "pol.len", b"m%d" % i)
        self.assertEqual(self.bodies(ch, "pol.len"), ["m3"])
        # max-length-bytes (operator max-length 50 does not bind here)
        ch.queue_declare("pol.bytes")
        for i in range(4):
            ch.basic_publish("", "pol.bytes", b"12345")
        self.assertEqual(self.count(ch, "pol.bytes"), 2)
        # dead-letter-exchange and routing key for expiry and rejection
        ch.exchange_declare("pol.dlx", "direct")
        ch.queue_declare("pol.dead")
        ch.queue_bind("pol.dead", "pol.dlx", "dead")
        ch.queue_declare("pol.dl.q")
        ch.basic_publish("", "pol.dl.q", b"expires")
        time.sleep(0.5)
        method, props, body = ch.basic_get("pol.dead", auto_ack=True)
        self.assertEqual(body, b"expires")
        self.assertEqual(method.routing_key, "dead")
        self.assertEqual(props.headers["x-death"][0]["reason"], "expired")
        ch.basic_publish("", "pol.dl.q", b"rejected")
        method, _, _ = ch.basic_get("pol.dl.q")
        ch.basic_reject(method.delivery_tag, requeue=False)
        h.sync(ch)
        _, props, body = ch.basic_get("pol.dead", auto_ack=True)
        self.assertEqual(body, b"rejected")
        self.assertEqual(props.headers["x-death"][0]["reason"], "rejected")
        # overflow reject-publish: the second publish is nacked
        ch.confirm_delivery()
        ch.queue_declare("pol.rp.q")
        ch.basic_publish("", "pol.rp.q", b"kept")
        with self.assertRaises(pika.exceptions.NackError):
            ch.basic_publish("", "pol.rp.q", b"refused")
        # alternate-exchange from a policy routes what the exchange cannot
        ch = self.conn.channel()
        ch.exchange_declare("pol.ae", "fanout")
        ch.queue_declare("pol.unrouted")
        ch.queue_bind("pol.unrouted", "pol.ae")
        ch.exchange_declare("pol.x", "direct")
        ch.basic_publish("pol.x", "nobody", b"unroutable")
        self.assertEqual(self.bodies(ch, "pol.unrouted"), ["unroutable"])
        # the exchange's own argument wins over the policy
        ch.exchange_declare("pol.own", "direct", arguments={"alternate-exchange": "pol.none"})
        ch.basic_publish("pol.own", "nobody", b"lost")
        h.sync(ch)
        self.assertEqual(self.count(ch, "pol.unrouted"), 0)

    @h.needs_own_broker
    def test_arguments_against_policies(self):
        self.start()
        self.stop()
        self.set_policies([
            ("p", "^pol\\.args", "queues", 0,
             {"max-length": 10, "dead-letter-exchange": "pol.pdlx", "message-ttl": 100}, False),
        ])
        ch = self.start()
        ch.exchange_declare("pol.own.dlx", "fanout")
        ch.queue_declare("pol.own.dead")
        ch.queue_bind("pol.own.dead", "pol.own.dlx")
        # the lower max-length is the argument's; the argument's dead-letter
        # exchange wins; the lower TTL is the policy's
        ch.queue_declare("pol.args", arguments={"x-max-length": 2, "x-message-ttl": 60000,
                                                "x-dead-letter-exchange": "pol.own.dlx"})
        for i in range(3):
            ch.basic_publish("", "pol.args", b"m%d" % i)
        h.sync(ch)
        self.assertEqual(self.bodies(ch, "pol.own.dead"), ["m0"])
        time.sleep(0.4)
        self.assertEqual(self.count(ch, "pol.args"), 0)
        self.assertEqual(self.bodies(ch, "pol.own.dead"), ["m1", "m2"])

    @h.needs_own_broker
    def test_priority_and_survival_across_restarts(self):
        ch = self.start()
        ch.queue_declare("pol.dur", durable=True)
        self.stop()
        self.set_policies([
            ("low", "^pol\\.", "queues", 1, {"max-length": 5}, False),
            ("high", "^pol\\.dur$", "queues", 2, {"max-length": 2}, False),
            ("exchanges-only", ".*", "exchanges", 9, {"alternate-exchange": "x"}, False),
        ])
        for _ in range(2):  # the stored policies come back on every start
            ch = self.start()
            ch.queue_purge("pol.dur")
            for i in range(4):
                ch.basic_publish("", "pol.dur", b"m%d" % i)
            self.assertEqual(self.bodies(ch, "pol.dur"), ["m2", "m3"])
            ch.queue_declare("pol.other")
            for i in range(7):
                ch.basic_publish("", "pol.other", b"m%d" % i)
            self.assertEqual(self.count(ch, "pol.other"), 5)
            ch.queue_delete("pol.other")
            self.conn.close()
            self.stop()


if __name__ == "__main__":
    unittest.main()
