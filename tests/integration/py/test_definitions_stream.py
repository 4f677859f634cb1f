"""Definitions with stream queues (issue 20): RabbitMQ 3.10.8's export of a
stream (tests/reference/rabbitmq-3.10/stream/api_definitions_queues.json)
imports and exports unchanged, the stream works after import and after a
restart, a super stream (exchange, streams, bindings) comes back the same,
and a stream with an argument streams refuse stops the import (HTTP 400
naming the queue, and a start with load_definitions, naming the file) with
nothing changed."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import pika

import harness as h
from test_definitions import ROOT, Broker, seg

REF = os.path.join(ROOT, "tests", "reference", "rabbitmq-3.10", "stream", "api_definitions_queues.json")
STREAM_TEXT = "of queue type rabbit_stream_queue"


def reference_queues():
    with open(REF) as f:
        return json.load(f)["queues"]


def exported(doc):
    """The queues as a per-vhost export shows them (without "vhost", as RabbitMQ)."""
    return [{k: v for k, v in q.items() if k != "vhost"} for q in doc["queues"]]


def stream_doc(vhost="defs.s", **extra_args):
    qs = [dict(q, vhost=vhost) for q in reference_queues()]
    qs[0]["arguments"].update(extra_args)
    return {"vhosts": [{"name": vhost}],
            "permissions": [{"user": "guest", "vhost": vhost, "configure": ".*", "write": ".*", "read": ".*"}],
            "queues": qs}


@h.needs_own_broker
class StreamDefinitions(unittest.TestCase):
    def test_rabbitmq_export_round_trips(self):
        b = Broker(self)
        doc = stream_doc()
        b.post(doc)
        self.assertEqual(b.export("defs.s")["queues"], exported(doc))
        self.assertEqual([q for q in b.export()["queues"] if q["vhost"] == "defs.s"], doc["queues"])
        info = b.get("/api/queues/defs.s/sample.stream")
        self.assertEqual((info["type"], info["durable"], info["arguments"]),
                         ("stream", True, doc["queues"][0]["arguments"]))
        # it is a stream: read from an offset after a publish
        c = b.connect(vhost="defs.s")
        ch = c.channel()
        ch.confirm_delivery()
        ch.basic_publish("", "sample.stream", b"kept")
        self.assertEqual(b.get("/api/streams/defs.s/sample.stream/messages?offset=0")[0]["payload"], "kept")
        c.close()
        # the same document again changes nothing
        b.post(doc)
        self.assertEqual(b.export("defs.s")["queues"], exported(doc))
        # and the whole export imports into a fresh broker as it is
        full = b.export()
        b2 = Broker(self)
        b2.post(full)
        self.assertEqual(b2.export("defs.s")["queues"], exported(doc))
        self.assertEqual(b2.get("/api/queues/defs.s/sample.stream")["type"], "stream")

    def test_super_stream_round_trips(self):
        """A super stream is an exchange, streams and bindings: all three
        export, and the import makes the same super stream again."""
        b = Broker(self)
        b.post({"vhosts": [{"name": "defs.s"}],
                "permissions": [{"user": "guest", "vhost": "defs.s", "configure": ".*", "write": ".*",
                                 "read": ".*"}]})
        status, body = b.call("PUT", "/api/stream/super-streams/defs.s/orders",
                              {"binding-keys": "amer,emea", "arguments": {"max-age": "1h"}})
        self.assertEqual(status, 204, body)
        before = b.get("/api/stream/super-streams/defs.s/orders")
        full = b.export()
        ex = [x for x in full["exchanges"] if x["name"] == "orders"]
        self.assertEqual(ex[0]["arguments"], {"x-super-stream": True})
        orders = sorted((x["destination"], x["routing_key"], x["arguments"]) for x in full["bindings"]
                        if x["source"] == "orders")
        self.assertEqual(orders, [("orders-amer", "amer", {"x-stream-partition-order": 0}),
                                  ("orders-emea", "emea", {"x-stream-partition-order": 1})])
        b2 = Broker(self)
        b2.post(full)
        self.assertEqual(b2.get("/api/stream/super-streams/defs.s/orders"), before)
        self.assertEqual(b2.get("/api/queues/defs.s/orders-emea")["arguments"],
                         {"x-queue-type": "stream", "x-max-age": "1h", "x-queue-leader-locator": "balanced"})

    def test_survives_restart(self):
        b = Broker(self)
        b.post(stream_doc())
        status, body = b.call("PUT", "/api/stream/super-streams/defs.s/orders", {"partitions": 2})
        self.assertEqual(status, 204, body)
        before = b.get("/api/stream/super-streams/defs.s/orders")
        data = b.data_dir
        b.stop()
        b2 = Broker(self, data_dir=data)
        self.assertEqual(b2.get("/api/queues/defs.s/sample.stream")["type"], "stream")
        self.assertEqual(b2.get("/api/stream/super-streams/defs.s/orders"), before)
        self.assertEqual([x for x in b2.export("defs.s")["queues"] if x["name"] == "sample.stream"],
                         exported(stream_doc()))

    def test_refused_argument_changes_nothing(self):
        b = Broker(self)
        before = b.export()
        for args, words in (({"x-message-ttl": 1000}, "invalid arg 'x-message-ttl'"),
                            ({"x-max-priority": 5}, "invalid arg 'x-max-priority'"),
                            ({"x-max-age": "10x"}, "invalid arg 'x-max-age'")):
            with self.subTest(args):
                status, body = b.call("POST", "/api/definitions", stream_doc(**args))
                self.assertEqual(status, 400, body)
                self.assertEqual(body["error"], "bad_request")
                self.assertIn("queue 'sample.stream' in vhost 'defs.s': ", body["reason"])
                self.assertIn(words, body["reason"])
                self.assertEqual(b.export(), before, "a refused import changed something")
        doc = stream_doc()
        doc["queues"][0]["durable"] = False
        status, body = b.call("POST", "/api/definitions", doc)
        self.assertEqual(status, 400, body)
        self.assertIn("queue 'sample.stream' in vhost 'defs.s': ", body["reason"])
        self.assertIn("non-durable", body["reason"])
        self.assertEqual(b.export(), before)

    def test_refused_argument_stops_start(self):
        fd, path = tempfile.mkstemp(prefix="warren-defs-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(stream_doc(**{"x-message-ttl": 1000}), f, indent=1)
        self.addCleanup(os.unlink, path)
        data = tempfile.mkdtemp(prefix="warren-itest-defs-")
        self.addCleanup(shutil.rmtree, data, True)
        p = subprocess.run([h.WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0", "--set",
                            "data_dir=%s" % data, "--set", "management.tcp.port=0",
                            "--set", "load_definitions=%s" % path],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=20)
        self.assertNotEqual(p.returncode, 0)
        err = p.stderr.decode()
        self.assertIn("load_definitions %s: queue 'sample.stream' in vhost 'defs.s': invalid arg "
                      "'x-message-ttl'" % path, err)


if __name__ == "__main__":
    unittest.main()
