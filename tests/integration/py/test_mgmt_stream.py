"""Streams in the management API (issue 20): stream queues in /api/queues
with RabbitMQ's stream queue fields, the stream plugin's /api/stream/...
lists, and Warren's read-from-offset viewer.

The field names are checked against a capture of RabbitMQ 3.10.8
(tests/reference/rabbitmq-3.10/stream/, see its ORIGIN.md): the same
declaration, ten messages, a consumer from offset 4. Erlang's process
figures (garbage_collection, reductions) are left out, as everywhere in
Warren's API."""
import json
import os
import time
import unittest

import pika

import harness as h
from test_mgmt import q, request
from test_mgmt_access import AccessTest

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "reference",
                   "rabbitmq-3.10", "stream")
ERLANG_ONLY = {"garbage_collection", "reductions", "reductions_details"}
STREAM_ARGS = {"x-queue-type": "stream", "x-max-length-bytes": 20000000, "x-max-age": "7D",
               "x-stream-max-segment-size-bytes": 500000}
TAGS = ("", "management", "policymaker", "monitoring", "administrator")


def reference(name):
    with open(os.path.join(REF, name)) as f:
        return json.load(f)


class StreamMgmtBase(AccessTest):
    def stream(self, vh="/", n=10, args=None):
        name = h.unique("mgmt-stream")
        self.ok("PUT", "/api/queues/%s/%s" % (q(vh), q(name)),
                {"durable": True, "arguments": args or STREAM_ARGS}, status=201)
        self.addCleanup(request, "DELETE", "/api/queues/%s/%s" % (q(vh), q(name)))
        if n:
            c = self.amqp(vh)
            ch = c.channel()
            ch.confirm_delivery()
            for i in range(n):
                ch.basic_publish("", name, b"message %d" % i,
                                 pika.BasicProperties(headers={"i": i}, content_type="text/plain"))
        return name

    def amqp(self, vh="/", **kw):
        c = h.connect(vhost=vh, **kw)
        self._conns.append(c)
        return c

    def reader(self, name, offset=4, prefetch=5, ack=3, vh="/", **kw):
        """A consumer from `offset` that acks the first `ack` deliveries and
        holds the rest, as the reference capture's; returns (conn, got)."""
        c = self.amqp(vh, **kw)
        ch = c.channel()
        ch.basic_qos(prefetch_count=prefetch)
        got = []

        def on(ch_, m, p, b):
            got.append(b)
            if len(got) <= ack:
                ch_.basic_ack(m.delivery_tag)

        ch.basic_consume(name, on, consumer_tag="reader-1", arguments={"x-stream-offset": offset})
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and len(got) < prefetch + ack:
            c.process_data_events(time_limit=0.1)
        c.process_data_events(time_limit=0.2)
        return c, got


class StreamQueueTest(StreamMgmtBase):
    def test_queue_has_rabbitmq_stream_fields(self):
        name = self.stream()
        _, got = self.reader(name)
        self.assertEqual(got[0], b"message 4")
        mine = self.get("/api/queues/%2F/" + q(name))
        ref = reference("stream.json")
        self.assertEqual(set(ref) - ERLANG_ONLY - set(mine), set(), "RabbitMQ's keys")
        self.assertEqual(mine["type"], "stream")
        self.assertEqual(mine["arguments"], STREAM_ARGS)
        self.assertEqual((mine["messages"], mine["messages_ready"], mine["messages_unacknowledged"]),
                         (10, 10, 0))
        node = mine["node"]
        self.assertEqual((mine["members"], mine["online"], mine["leader"], mine["readers"]),
                         ([node], [node], node, {node: 1}))
        self.assertEqual((mine["durable"], mine["auto_delete"], mine["exclusive"]), (True, False, False))
        self.assertEqual((mine["first_offset"], mine["last_offset"]), (0, 9))
        self.assertIsInstance(mine["committed_offset"], int)
        self.assertLessEqual(mine["committed_offset"], 9)
        self.assertGreaterEqual(mine["segments"], 1)
        self.assertGreater(mine["segment_bytes"], 10 * len(b"message 0"))
        self.assertGreaterEqual(mine["chunks"], 1)
        for classic in ("message_bytes_paged_out", "messages_delayed", "consumer_capacity"):
            self.assertNotIn(classic, mine)
        [cons] = mine["consumer_details"]
        self.assertEqual(set(ref["consumer_details"][0]) - set(cons), set())
        self.assertEqual((cons["consumer_tag"], cons["prefetch_count"], cons["ack_required"], cons["arguments"]),
                         ("reader-1", 5, True, ref["consumer_details"][0]["arguments"]))
        # it read from 4: what it took is behind its offset, the rest is its lag
        self.assertEqual(cons["offset"], 4 + len(got))
        self.assertEqual(cons["offset"] + cons["offset_lag"], 10)

    def test_list_form_and_sort(self):
        name = self.stream(n=3)
        listed = [x for x in self.get("/api/queues/%2F") if x["name"] == name]
        ref = [x for x in reference("api_queues__2F.json") if x["name"] == "sample.stream"][0]
        self.assertEqual(set(ref) - ERLANG_ONLY - set(listed[0]), set())
        self.assertNotIn("consumer_details", listed[0])
        self.assertEqual(listed[0]["messages"], 3)
        page = self.get("/api/queues/%2F?page=1&page_size=500&sort=messages&sort_reverse=true&name="
                        + q(name))
        self.assertEqual([x["messages"] for x in page["items"]], [3])

    def test_empty_stream_has_null_offsets(self):
        name = self.stream(n=0)
        mine = self.get("/api/queues/%2F/" + q(name))
        self.assertEqual((mine["first_offset"], mine["last_offset"], mine["committed_offset"],
                          mine["messages"]), (None, None, None, 0))

    def test_consumers_list_shows_offsets(self):
        name = self.stream(n=6)
        self.reader(name, offset=2, prefetch=2, ack=0)
        [cons] = [c for c in self.get("/api/consumers") if c["queue"]["name"] == name]
        ref = reference("api_consumers.json")[0]
        self.assertEqual(set(ref) - set(cons), set())
        self.assertEqual((cons["offset"], cons["offset_lag"]), (4, 2))

    def test_overview_totals_and_samples_count_records(self):
        # RabbitMQ 3.10.8's overview counted the capture's stream: 10 ready, 0 unacked
        vh = self.vhost()
        self.grant(vh, "guest")
        name = self.stream(vh, n=4)
        self.reader(name, offset=0, prefetch=2, ack=0, vh=vh)  # deliveries take nothing
        totals = self.get("/api/overview")["queue_totals"]
        self.assertGreaterEqual(totals["messages_ready"], 4)
        path = "/api/queues/%s/%s?lengths_age=60&lengths_incr=5" % (q(vh), q(name))
        deadline = time.monotonic() + 12  # the sampler runs every 5 s
        while True:
            mine = self.get(path)
            samples = mine["messages_details"].get("samples", [])
            if samples or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        self.assertTrue(samples, mine["messages_details"])
        self.assertEqual(samples[0]["sample"], 4)
        self.assertEqual(mine["messages_unacknowledged_details"]["samples"][0]["sample"], 0)

    def test_get_and_purge_refused_as_rabbitmq(self):
        # RabbitMQ 3.10.8's answers (the stream capture's broker)
        name = self.stream(n=2)
        r = request("POST", "/api/queues/%2F/" + q(name) + "/get",
                    {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
        self.error(r, 400, "bad_request",
                   "540 basic.get not supported by stream queues queue '%s' in vhost '/'" % name)
        self.error(request("DELETE", "/api/queues/%2F/" + q(name) + "/contents"), 400, "bad_request",
                   "queue.purge not supported by stream queues queue '%s' in vhost '/'" % name)
        self.assertEqual(self.get("/api/queues/%2F/" + q(name))["messages"], 2)

    def test_disable_stats_gives_the_declaration(self):
        name = self.stream(n=1)
        mine = self.get("/api/queues/%2F/" + q(name) + "?disable_stats=true")
        self.assertEqual(mine["type"], "stream")
        self.assertNotIn("segments", mine)


class StreamListsTest(StreamMgmtBase):
    STREAM_CONSUMER_KEYS = {"active", "activity_status", "connection_details", "consumed", "credits",
                            "offset", "offset_lag", "properties", "queue", "subscription_id"}

    def test_stream_consumers_in_the_stream_plugin_form(self):
        name = self.stream(n=8)
        _, got = self.reader(name, offset=0, prefetch=3, ack=2)
        rows = [c for c in self.get("/api/stream/consumers") if c["queue"]["name"] == name]
        self.assertEqual(len(rows), 1, rows)
        c = rows[0]
        self.assertEqual(self.STREAM_CONSUMER_KEYS - set(c), set())
        self.assertEqual(sorted(c["connection_details"]), ["name", "node", "peer_host", "peer_port", "user"])
        self.assertEqual(c["queue"], {"name": name, "vhost": "/"})
        self.assertEqual((c["consumed"], c["offset"], c["offset_lag"], c["credits"]),
                         (len(got), len(got), 8 - len(got), 0))
        self.assertEqual([x["queue"]["name"] for x in self.get("/api/stream/consumers/%2F")
                          if x["queue"]["name"] == name], [name])
        # a classic queue's consumers are not stream consumers
        self.assertTrue(all(x["consumer_tag"] for x in self.get("/api/stream/consumers")))

    def test_stream_consumers_filtered_by_user(self):
        vh = self.vhost()
        mgmt_user, mon = self.user("management"), self.user("monitoring")
        self.grant(vh, mgmt_user)
        self.grant(vh, "guest")
        name = self.stream(vh, n=2)
        self.reader(name, offset=0, prefetch=1, ack=0, vh=vh)  # guest's
        path = "/api/stream/consumers/" + q(vh)
        self.assertEqual(self.get(path, **self.as_user(mgmt_user)), [])
        self.assertEqual(len(self.get(path, **self.as_user(mon))), 1)
        self.assertEqual(len(self.get(path)), 1)

    def test_publishers_empty_and_errors(self):
        name = self.stream(n=0)
        for path in ("/api/stream/publishers", "/api/stream/publishers/%2F",
                     "/api/stream/publishers/%2F/" + q(name)):
            self.assertEqual(self.get(path), [], path)
        missing = q(h.unique("mgmt-stream-novh"))
        for path in ("/api/stream/publishers/" + missing, "/api/stream/consumers/" + missing,
                     "/api/stream/publishers/%2F/" + q(h.unique("nosuch"))):
            self.error(request("GET", path), 404, "Object Not Found", "Not Found")
        for path in ("/api/stream/publishers", "/api/stream/consumers"):
            self.error(request("GET", path + "?disable_stats=true"), 400, "bad_request",
                       "Stats in management UI are disabled on this node")

    def test_stream_connections_none_yet(self):
        # rabbitmq_stream_management's connection paths: no stream-protocol
        # connection exists until its server does
        for path in ("/api/stream/connections", "/api/stream/connections/%2F"):
            self.assertEqual(self.get(path), [], path)
        for method, path in (("GET", "/api/stream/connections/%2F/c"), ("DELETE", "/api/stream/connections/%2F/c"),
                             ("GET", "/api/stream/connections/%2F/c/consumers"),
                             ("GET", "/api/stream/connections/%2F/c/publishers"),
                             ("GET", "/api/stream/connections/" + q(h.unique("novh")))):
            self.error(request(method, path), 404, "Object Not Found", "Not Found")
        outsider = self.user("management")
        self.error(request("GET", "/api/stream/connections/%2F", **self.as_user(outsider)), 401,
                   "not_authorised", "User not authorised to access virtual host")

    def test_every_tag(self):
        name = self.stream(n=1)
        paths = ["/api/stream/consumers", "/api/stream/consumers/%2F", "/api/stream/publishers",
                 "/api/stream/publishers/%2F", "/api/stream/publishers/%2F/" + q(name),
                 "/api/stream/connections", "/api/stream/connections/%2F",
                 "/api/streams/%2F/" + q(name) + "/messages"]
        for tags in TAGS:
            u = self.user(tags)
            self.grant("/", u)
            for path in paths:
                r = request("GET", path, **self.as_user(u))
                if tags:
                    self.assertEqual(r.status, 200, (tags, path, r.body[:200]))
                else:
                    self.error(r, 401, "not_authorised", "Not management user")
            for method in ("PUT", "DELETE", "POST"):
                self.assertEqual(request(method, paths[0], {}, **self.as_user(u)).status, 405)
            # one connection's routes: none by that name here
            gone = "/api/stream/connections/%2F/" + q(h.unique("nosuch-conn"))
            for method, path in (("GET", gone), ("DELETE", gone), ("GET", gone + "/consumers"),
                                 ("GET", gone + "/publishers")):
                r = request(method, path, **self.as_user(u))
                if tags:
                    self.assertEqual(r.status, 404, (tags, method, path, r.body[:200]))
                else:
                    self.error(r, 401, "not_authorised", "Not management user")


class StreamViewerTest(StreamMgmtBase):
    def messages(self, name, query="", vh="/", **kw):
        return request("GET", "/api/streams/%s/%s/messages%s" % (q(vh), q(name), query), **kw)

    def test_reads_from_an_offset_without_consuming(self):
        name = self.stream()
        for _ in range(2):  # twice: nothing was taken
            r = self.messages(name, "?offset=3&count=4")
            self.assertEqual(r.status, 200, r.body[:300])
            rows = r.json()
            self.assertEqual([m["offset"] for m in rows], [3, 4, 5, 6])
            self.assertEqual([m["payload"] for m in rows], ["message %d" % i for i in range(3, 7)])
        m = rows[0]
        self.assertEqual(sorted(m), ["exchange", "offset", "payload", "payload_bytes", "payload_encoding",
                                     "properties", "routing_key", "timestamp"])
        self.assertEqual((m["payload_encoding"], m["payload_bytes"], m["routing_key"], m["exchange"]),
                         ("string", 9, name, ""))
        self.assertEqual(m["properties"]["content_type"], "text/plain")
        self.assertEqual(m["properties"]["headers"]["i"], 3)
        self.assertEqual(m["properties"]["headers"]["x-stream-offset"], 3)
        self.assertLess(abs(m["timestamp"] / 1000 - time.time()), 600)
        self.assertEqual(self.get("/api/queues/%2F/" + q(name))["messages"], 10)

    def test_defaults_bounds_and_encodings(self):
        name = self.stream(n=12)
        self.assertEqual([m["offset"] for m in self.messages(name).json()], list(range(10)))
        self.assertEqual([m["offset"] for m in self.messages(name, "?offset=10&count=1000").json()], [10, 11])
        self.assertEqual(self.messages(name, "?offset=99").json(), [])
        b = self.messages(name, "?offset=1&count=1&encoding=base64&truncate=3").json()[0]
        self.assertEqual((b["payload"], b["payload_encoding"], b["payload_bytes"]), ("bWVz", "base64", 9))
        for query, key in (("?count=1001", "count"), ("?count=-1", "count"), ("?offset=x", "offset"),
                           ("?offset=", "offset")):
            self.error(self.messages(name, query), 400, "bad_request")
            self.assertEqual(self.messages(name, query).json()["reason"], ["not_int", key], query)
        self.error(self.messages(name, "?encoding=hex"), 400, "bad_request",
                   "Unsupported encoding. Please use auto or base64.")

    def test_refusals(self):
        classic = h.unique("mgmt-stream-classic")
        self.ok("PUT", "/api/queues/%2F/" + q(classic), {}, status=201)
        self.addCleanup(request, "DELETE", "/api/queues/%2F/" + q(classic))
        self.error(self.messages(classic), 400, "bad_request", "not a stream")
        self.error(self.messages(h.unique("nosuch")), 404, "Object Not Found", "Not Found")
        self.error(self.messages("x", vh=h.unique("novh")), 404, "Object Not Found", "Not Found")
        name = self.stream(n=1)
        u = self.user("management")
        self.grant("/", u, read="^$")
        self.error(self.messages(name, **self.as_user(u)), 401, "not_authorised", "Access refused.")
        other = self.user("management")
        self.error(self.messages(name, **self.as_user(other)), 401, "not_authorised",
                   "User not authorised to access virtual host")


if __name__ == "__main__":
    unittest.main()
