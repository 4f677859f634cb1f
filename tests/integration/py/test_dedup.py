"""Message deduplication, as LavinMQ and the rabbitmq-message-deduplication
plugin offer it (RabbitMQ 3.10 has neither, so these are checked against
their documented behaviour, not a capture):

- an exchange declared with x-message-deduplication true (x-cache-size,
  x-cache-ttl, x-cache-persistence, x-deduplication-header) routes a message
  whose x-deduplication-header value it has seen nowhere: unroutable,
  returned when mandatory, confirmed either way; a message's x-cache-ttl
  header overrides the cache's TTL; the oldest entry goes when it is full;
- a queue declared with x-message-deduplication true does not enqueue a
  message whose key a message in the queue holds, until that one leaves
  (ack, no-ack delivery, reject, expiry, dead-lettering, purge, drop-head);
- the plugin's 406 texts; the counts in the management API and /metrics;
- x-cache-persistence disk: a durable exchange's cache survives a restart.
"""
import base64
import http.client
import json
import os
import struct
import subprocess
import time
import unittest
import urllib.parse

import pika
from pika import exceptions as pex

import harness as h
from test_prometheus import promtool  # build/tools' or PATH's; fails without one

HDR = "x-deduplication-header"


def api(method, path, body=None, port=None):
    """The management API as guest: (status, decoded body or None)."""
    c = http.client.HTTPConnection("127.0.0.1", port or h.mgmt_address()[1], timeout=20)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None, headers={
            "Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
            "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


def api_get(path):
    return api("GET", path)


def props(key=None, ttl=None, **kw):
    headers = {}
    if key is not None:
        headers[HDR] = key
    if ttl is not None:
        headers["x-cache-ttl"] = ttl
    return pika.BasicProperties(headers=headers or None, **kw)


class ExchangeDedup(h.BrokerTest):
    def dedup_exchange(self, kind="fanout", **args):
        a = {"x-message-deduplication": True}
        a.update(args)
        x = self.exchange(kind, arguments=a)
        q = self.bound_queue(x)
        return x, q

    def test_duplicates_are_not_routed(self):
        x, q = self.dedup_exchange(**{"x-cache-size": 100})
        for key in ("a", "a", "b", 7, 7, "7"):
            self.publish(x, "", b"m", properties=props(key))
        self.publish(x, "", b"no key")  # not deduplicated
        self.publish(x, "", b"no key")
        self.assertEqual(self.wait_count(q, 6), 6)  # a, b, 7, "7", and the two without a key
        bodies = [b for b in h.get_all(self.ch, q)]
        self.assertEqual(len(bodies), 6)

    def test_integer_widths_are_one_key(self):
        # the plugin compares Erlang terms: 1 as signedint and as long is one value
        x, q = self.dedup_exchange()
        raw = h.RawClient()
        raw.handshake()
        raw.open_channel(1)
        for tag, packed in ((b"I", struct.pack(">i", 5)), (b"l", struct.pack(">q", 5)),
                            (b"b", struct.pack(">b", 5)), (b"s", struct.pack(">h", 5))):
            table = h.shortstr(HDR.encode()) + tag + packed
            raw.publish(1, x, "", b"m", prop_bytes=struct.pack(">H", 0x2000) + h.longstr(table))
        raw.close_cleanly()
        self.assertEqual(self.wait_count(q, 1), 1)

    def test_confirms_and_mandatory(self):
        x, q = self.dedup_exchange()
        self.ch.confirm_delivery()
        self.publish(x, "", b"1", properties=props("k"))
        self.publish(x, "", b"2", properties=props("k"))  # acked, not nacked
        with self.assertRaises(pex.UnroutableError):  # returned NO_ROUTE, then acked
            self.publish(x, "", b"3", properties=props("k"), mandatory=True)
        self.publish(x, "", b"4", properties=props("k2"), mandatory=True)
        self.assertEqual(self.count(q), 2)

    def test_cache_ttl_and_message_ttl(self):
        x, q = self.dedup_exchange(**{"x-cache-ttl": 300})
        self.publish(x, "", b"1", properties=props("a"))
        self.publish(x, "", b"2", properties=props("b", ttl=60000))  # outlives the cache's TTL
        self.publish(x, "", b"3", properties=props("c", ttl=1))
        time.sleep(0.4)
        for key in ("a", "b", "c"):
            self.publish(x, "", b"again", properties=props(key))
        self.assertEqual(self.wait_count(q, 5), 5)  # a and c expired, b did not

    def test_oldest_evicted_when_full(self):
        x, q = self.dedup_exchange(**{"x-cache-size": 2})
        for key in ("a", "b", "c", "a", "c"):
            self.publish(x, "", b"m", properties=props(key))
        self.assertEqual(self.wait_count(q, 4), 4)  # a was evicted by c; c still cached

    def test_header_named_by_argument(self):
        x, q = self.dedup_exchange(**{"x-deduplication-header": "msg-id"})
        for key in ("1", "1", "2"):
            self.publish(x, "", b"m", properties=pika.BasicProperties(headers={"msg-id": key}))
        self.publish(x, "", b"m", properties=props("1"))  # the default header is not looked at
        self.assertEqual(self.wait_count(q, 3), 3)

    def test_direct_exchange_routes_after_the_check(self):
        x = self.exchange("direct", arguments={"x-message-deduplication": True})
        q1, q2 = self.bound_queue(x, "k1"), self.bound_queue(x, "k2")
        self.publish(x, "k1", b"m", properties=props("a"))
        self.publish(x, "k2", b"m", properties=props("a"))  # a duplicate, whatever its key
        self.publish(x, "k2", b"m", properties=props("b"))
        self.assertEqual((self.wait_count(q1, 1), self.wait_count(q2, 1)), (1, 1))

    def test_declare_errors(self):
        size = ("PRECONDITION_FAILED - Missing or invalid argument, 'x-cache-size' must be an "
                "integer greater than 0")
        ttl = "PRECONDITION_FAILED - Invalid argument, 'x-cache-ttl' must be an integer greater than 0"
        cases = [({"x-cache-size": 0}, size), ({"x-cache-size": "many"}, size),
                 ({"x-cache-size": 16777217},
                  "PRECONDITION_FAILED - Invalid argument, 'x-cache-size' must be at most 16777216"),
                 ({"x-cache-ttl": -5}, ttl), ({"x-cache-ttl": "soon"}, ttl),
                 ({"x-cache-persistence": "ram"},
                  "PRECONDITION_FAILED - Invalid argument, 'x-cache-persistence' must be either "
                  "'disk' or 'memory'"),
                 ({"x-deduplication-header": 5},
                  "PRECONDITION_FAILED - x-deduplication-header header not a string")]
        for extra, text in cases:
            args = {"x-message-deduplication": True}
            args.update(extra)
            ch = self.conn.channel()
            e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.exchange_declare, h.unique("x"),
                                          "fanout", arguments=args)
            self.assertEqual(e.reply_text, text)
        # a string of digits is a number to the plugin; off, nothing is checked
        self.exchange("fanout", arguments={"x-message-deduplication": True, "x-cache-size": "10"})
        self.exchange("fanout", arguments={"x-message-deduplication": False, "x-cache-size": 0})

    def test_the_plugins_exchange_type(self):
        """x-message-deduplication as the plugin's exchange type: a fanout
        that deduplicates, x-cache-size required; listed in the overview."""
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.exchange_declare, h.unique("x"),
                                      "x-message-deduplication")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - Missing or invalid argument, "
                                       "'x-cache-size' must be an integer greater than 0")
        x = self.exchange("x-message-deduplication", arguments={"x-cache-size": 10})
        q1, q2 = self.bound_queue(x, "k1"), self.bound_queue(x, "k2")
        for key in ("a", "a", "b"):
            self.publish(x, "any", b"m", properties=props(key))
        self.assertEqual((self.wait_count(q1, 2), self.wait_count(q2, 2)), (2, 2))
        status, info = api_get("/api/exchanges/%2F/" + urllib.parse.quote(x, safe=""))
        self.assertEqual((status, info["type"], info["deduplication"]["duplicates"]),
                         (200, "x-message-deduplication", 1))
        types = [t["name"] for t in api_get("/api/overview")[1]["exchange_types"]]
        self.assertIn("x-message-deduplication", types)

    def test_counts_in_api_and_metrics(self):
        x, q = self.dedup_exchange(**{"x-cache-size": 1000})
        plain = self.exchange("fanout")
        for key in ("a", "b", "a", "a"):
            self.publish(x, "", b"m", properties=props(key))
        self.wait_count(q, 2)
        status, body = api_get("/api/exchanges/%2F/" + urllib.parse.quote(x, safe=""))
        self.assertEqual(status, 200)
        d = body["deduplication"]
        self.assertEqual((d["entries"], d["duplicates"], d["size"]), (2, 2, 1000))
        self.assertGreater(d["bytes"], 0)
        status, body = api_get("/api/exchanges/%2F/" + urllib.parse.quote(plain, safe=""))
        self.assertNotIn("deduplication", body)
        status, text = self.metrics()
        self.assertEqual(status, 200)
        self.assertRegex(text, r"(?m)^warren_exchange_deduplication_duplicates_total [1-9]")
        self.assertRegex(text, r"(?m)^warren_exchange_deduplication_entries [1-9]")
        self.assertIn("# TYPE warren_queue_deduplication_entries gauge", text)
        dq = self.queue(arguments={"x-message-deduplication": True})
        self.publish("", dq, b"m", properties=props("a"))
        self.publish("", dq, b"m", properties=props("a"))
        self.wait_count(dq, 1)
        status, per_object = self.metrics("/metrics/per-object")
        self.assertRegex(per_object, r'(?m)^warren_queue_deduplication_duplicates_total\{vhost="/",'
                                     r'queue="%s"\} 1$' % dq)
        for body in (text, per_object):
            tool = subprocess.run([promtool(), "check", "metrics"], input=body.encode(),
                                  capture_output=True, timeout=60)
            self.assertEqual((tool.returncode, tool.stdout + tool.stderr), (0, b""))

    def test_declared_over_the_api_and_in_definitions(self):
        bad = {"type": "fanout", "arguments": {"x-message-deduplication": True, "x-cache-size": 0}}
        name = h.unique("x")
        status, body = api("PUT", "/api/exchanges/%2F/" + name, bad)
        self.assertEqual(status, 400)
        self.assertIn("'x-cache-size' must be an integer greater than 0", body["reason"])
        x = self.track_exchange(h.unique("x"))
        good = {"type": "fanout", "arguments": {"x-message-deduplication": True, "x-cache-size": 5}}
        self.assertEqual(api("PUT", "/api/exchanges/%2F/" + x, good)[0], 201)
        q = self.track_queue(h.unique("q"))
        defs = {"queues": [{"name": q, "vhost": "/", "durable": True, "auto_delete": False,
                            "arguments": {"x-message-deduplication": True}}]}
        self.assertIn(api("POST", "/api/definitions", defs)[0], (200, 201, 204))
        self.ch.queue_bind(q, x)
        for key in ("a", "a"):
            self.publish(x, "", b"m", properties=props(key))
        self.publish("", q, b"m", properties=props("a"))  # the queue holds "a" already
        self.assertEqual(self.wait_count(q, 1), 1)
        status, body = api("GET", "/api/exchanges/%2F/" + x)
        self.assertEqual((body["deduplication"]["size"], body["deduplication"]["duplicates"]), (5, 1))
        status, body = api("GET", "/api/queues/%2F/" + q)
        self.assertEqual(body["deduplication"]["duplicates"], 1)

    def metrics(self, path="/metrics"):
        host, port = h.prometheus_address()
        c = http.client.HTTPConnection(host, port, timeout=20)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read().decode()
        finally:
            c.close()


class QueueDedup(h.BrokerTest):
    def dedup_queue(self, **args):
        a = {"x-message-deduplication": True}
        a.update(args)
        return self.queue(arguments=a)

    def put(self, q, key, body=b"m", ch=None, **kw):
        self.publish("", q, body, ch=ch, properties=props(key, **kw))

    def test_not_enqueued_while_in_the_queue(self):
        q = self.dedup_queue()
        for key in ("a", "a", "b"):
            self.put(q, key)
        self.put(q, None)
        self.put(q, None)
        self.assertEqual(self.wait_count(q, 4), 4)
        method, _, _ = self.ch.basic_get(q, auto_ack=True)  # "a" leaves (no-ack)
        self.put(q, "a")
        self.put(q, "b")  # still in the queue
        self.assertEqual(self.wait_count(q, 4), 4)

    def test_key_released_on_ack_not_on_delivery(self):
        q = self.dedup_queue()
        self.put(q, "a")
        method, _, _ = self.ch.basic_get(q, auto_ack=False)  # unacked: still in the queue
        self.put(q, "a")
        self.assertEqual(self.count(q), 0)
        self.ch.basic_ack(method.delivery_tag)
        self.put(q, "a")
        self.assertEqual(self.wait_count(q, 1), 1)

    def test_requeue_keeps_the_key_reject_releases_it(self):
        q = self.dedup_queue()
        self.put(q, "a")
        method, _, _ = self.ch.basic_get(q, auto_ack=False)
        self.ch.basic_nack(method.delivery_tag, requeue=True)
        self.put(q, "a")
        self.assertEqual(self.wait_count(q, 1), 1)
        method, _, _ = self.ch.basic_get(q, auto_ack=False)
        self.ch.basic_reject(method.delivery_tag, requeue=False)
        self.put(q, "a")
        self.assertEqual(self.wait_count(q, 1), 1)

    def test_released_by_expiry_dead_letter_purge_and_drop_head(self):
        dlq = self.queue()
        q = self.dedup_queue(**{"x-message-ttl": 50, "x-dead-letter-exchange": "",
                                "x-dead-letter-routing-key": dlq})
        self.put(q, "a")
        self.assertEqual(self.wait_count(dlq, 1), 1)  # expired, dead-lettered
        self.put(q, "a")
        self.assertEqual(self.wait_count(dlq, 2), 2)
        p = self.dedup_queue()
        self.put(p, "a")
        self.ch.queue_purge(p)
        self.put(p, "a")
        self.assertEqual(self.wait_count(p, 1), 1)
        m = self.dedup_queue(**{"x-max-length": 1})
        self.put(m, "a")
        self.put(m, "b")  # drops "a" from the head
        self.put(m, "a")  # so "a" is free again, and drops "b"
        self.put(m, "b")
        self.assertEqual(self.wait_count(m, 1), 1)
        _, _, body = self.ch.basic_get(m, auto_ack=True)
        self.assertEqual(body, b"m")

    def test_dead_letter_cycle_back_into_the_queue(self):
        # a message dead-lettered into the queue it left is not its own duplicate
        q = h.unique("q")
        self.queue(q, arguments={"x-message-deduplication": True, "x-dead-letter-exchange": "",
                                 "x-dead-letter-routing-key": q})
        self.put(q, "a")
        method, _, _ = self.ch.basic_get(q, auto_ack=False)
        self.ch.basic_reject(method.delivery_tag, requeue=False)
        self.assertEqual(self.wait_count(q, 1), 1)
        self.put(q, "a")
        self.assertEqual(self.count(q), 1)

    def test_consumer_ack(self):
        q = self.dedup_queue()
        got = []
        self.ch.basic_qos(prefetch_count=10)
        self.ch.basic_consume(q, lambda ch, m, p, b: got.append(m.delivery_tag))
        self.put(q, "a")
        h.wait_for(self.conn, lambda: len(got) == 1)
        self.put(q, "a")  # held by the unacked delivery
        h.drain(self.conn, 0.1)
        self.assertEqual(len(got), 1)
        self.ch.basic_ack(got[0])
        self.put(q, "a")
        h.wait_for(self.conn, lambda: len(got) == 2)

    def test_quorum_and_priority_queues(self):
        for extra in ({"x-queue-type": "quorum"}, {"x-max-priority": 5}):
            q = self.queue(durable=True, arguments=dict(extra, **{"x-message-deduplication": True}))
            self.put(q, "a", priority=1)
            self.put(q, "a", priority=5)
            self.put(q, "b", priority=5)
            self.assertEqual(self.wait_count(q, 2), 2)
            self.ch.queue_purge(q)  # every level's keys go
            self.put(q, "a", priority=5)
            self.put(q, "b")
            self.assertEqual(self.wait_count(q, 2), 2)

    def test_confirmed_as_accepted(self):
        q = self.dedup_queue()
        self.ch.confirm_delivery()
        self.put(q, "a")
        self.put(q, "a")  # an ack: the plugin confirms a duplicate it drops
        self.assertEqual(self.count(q), 1)

    def test_declare_errors_and_api(self):
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, h.unique("q"),
                                      arguments={"x-message-deduplication": "yes"})
        self.assertEqual(e.reply_text,
                         "PRECONDITION_FAILED - x-message-deduplication header not a boolean")
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_declare, h.unique("q"),
                                      arguments={"x-message-deduplication": True,
                                                 "x-cache-size": "10"})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - x-cache-size header not an integer")
        q = self.dedup_queue()
        for key in ("a", "a", "b", "a"):
            self.put(q, key)
        self.wait_count(q, 2)
        status, body = api_get("/api/queues/%2F/" + urllib.parse.quote(q, safe=""))
        self.assertEqual(status, 200)
        d = body["deduplication"]
        self.assertEqual((d["entries"], d["duplicates"]), (2, 2))
        plain = self.queue()
        self.assertNotIn("deduplication", api_get("/api/queues/%2F/" + plain)[1])


class DedupRestart(h.DataDirTest):
    def publish_keys(self, ch, x, *keys):
        for k in keys:
            ch.basic_publish(x, "", b"m", props(k, delivery_mode=2))

    def test_disk_cache_survives_restart_memory_does_not(self):
        conn, ch = self.start()
        ch.queue_declare("dq", durable=True)
        for name, persistence in (("x.disk", "disk"), ("x.mem", "memory")):
            ch.exchange_declare(name, "fanout", durable=True, arguments={
                "x-message-deduplication": True, "x-cache-size": 100,
                "x-cache-persistence": persistence})
            ch.queue_bind("dq", name)
        self.publish_keys(ch, "x.disk", "a", "b")
        self.publish_keys(ch, "x.mem", "c")
        self.assertEqual(ch.queue_declare("dq", passive=True).method.message_count, 3)
        conn, ch = self.restart(conn)
        self.publish_keys(ch, "x.disk", "a", "b", "d")  # only d is new
        self.publish_keys(ch, "x.mem", "c")  # a memory cache starts empty
        self.assertEqual(ch.queue_declare("dq", passive=True).method.message_count, 5)
        # deleting the exchange removes its saved cache: declared again, it is empty
        ch.exchange_delete("x.disk")
        ch.exchange_declare("x.disk", "fanout", durable=True, arguments={
            "x-message-deduplication": True, "x-cache-persistence": "disk"})
        ch.queue_bind("dq", "x.disk")
        conn, ch = self.restart(conn)
        self.publish_keys(ch, "x.disk", "a")
        self.assertEqual(ch.queue_declare("dq", passive=True).method.message_count, 6)
        conn.close()

    def api(self, method, path, body=None):
        return api(method, path, body, port=self.proc.mgmt_port)[0]

    def test_after_a_crash_the_last_clean_stop_counts(self):
        conn, ch = self.start()
        ch.queue_declare("dq", durable=True)
        ch.exchange_declare("x.disk", "fanout", durable=True, arguments={
            "x-message-deduplication": True, "x-cache-persistence": "disk"})
        ch.queue_bind("dq", "x.disk")
        self.publish_keys(ch, "x.disk", "a")
        conn, ch = self.restart(conn)  # saved: a
        self.publish_keys(ch, "x.disk", "a", "b")  # b is new, a a duplicate
        self.kill()  # b was never saved
        conn, ch = self.start()
        self.publish_keys(ch, "x.disk", "a", "b")
        self.assertEqual(ch.queue_declare("dq", passive=True).method.message_count, 3)
        conn.close()

    def test_deleting_the_vhost_deletes_the_saved_cache(self):
        conn, ch = self.start()
        conn.close()
        self.assertIn(self.api("PUT", "/api/vhosts/dv"), (201, 204))
        self.assertIn(self.api("PUT", "/api/permissions/dv/guest",
                               {"configure": ".*", "write": ".*", "read": ".*"}), (201, 204))
        c = h.connect(self.addr, vhost="dv")
        c.channel().exchange_declare("x.disk", "fanout", durable=True, arguments={
            "x-message-deduplication": True, "x-cache-persistence": "disk"})
        self.publish_keys(c.channel(), "x.disk", "a")
        conn, ch = self.restart(c)
        saved = os.path.join(self.data_dir, "dedup")
        self.assertEqual(len(os.listdir(saved)), 1)  # written at the stop, kept
        self.assertEqual(self.api("DELETE", "/api/vhosts/dv"), 204)
        self.assertEqual(os.listdir(saved), [])
        conn.close()

    def test_queue_cache_starts_empty_after_restart(self):
        # as the plugin's queue caches (in RAM, flushed at start)
        conn, ch = self.start()
        ch.queue_declare("dedupq", durable=True, arguments={"x-message-deduplication": True})
        ch.basic_publish("", "dedupq", b"m", props("a", delivery_mode=2))
        ch.basic_publish("", "dedupq", b"m", props("a", delivery_mode=2))
        self.assertEqual(ch.queue_declare("dedupq", passive=True).method.message_count, 1)
        conn, ch = self.restart(conn)
        ch.basic_publish("", "dedupq", b"m", props("a", delivery_mode=2))
        ch.basic_publish("", "dedupq", b"m", props("a", delivery_mode=2))
        self.assertEqual(ch.queue_declare("dedupq", passive=True).method.message_count, 2)
        conn.close()


if __name__ == "__main__":
    unittest.main()
