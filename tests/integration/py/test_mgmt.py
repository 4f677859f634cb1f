"""The management HTTP API (RabbitMQ's /api) and the control socket.

Every expectation here was checked against RabbitMQ 3.10.8's management
plugin (paths, verbs, status codes, field names, error bodies), except the
Warren-only parts: the control socket, /api/environment, and the queue
health fields (oldest_ready_age_ms, oldest_unacked_age_ms,
delivery_count_histogram).
"""
import base64
import contextlib
import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import unittest
import urllib.parse

import pika
from pika import exceptions as pex
from pika import spec as S

import harness as h

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def q(name):
    """A path segment: everything escaped, '/' included (%2F)."""
    return urllib.parse.quote(name, safe="")


class Reply:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


def request(method, path, body=None, auth=AUTH, headers=None, conn=None):
    """One HTTP request to the management API; returns a Reply."""
    host, port = h.mgmt_address()
    c = conn or http.client.HTTPConnection(host, port, timeout=10)
    hdrs = dict(headers or {})
    if auth:
        hdrs["Authorization"] = auth
    if body is not None and not isinstance(body, (bytes, str)):
        body = json.dumps(body)
    if body is not None:
        hdrs.setdefault("Content-Type", "application/json")
    try:
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        return Reply(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        c.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(self.unix_path)
        self.sock = s


WARREN = h.TARGET is None  # some checks are Warren's own: RabbitMQ answers differently
# RabbitMQ's statistics lag up to its 5 s collection interval; Warren's lists
# are live, but the same polling keeps the tests honest against both.
# Against RabbitMQ run with WARREN_TEST_TIMEOUT=60 (its fields arrive late).
STATS_WAIT = 12.0 if WARREN else 40.0


def poll(fn, timeout=STATS_WAIT):
    """Calls fn() until it returns something true (or the time is up)."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


def get(path, **kw):
    r = request("GET", path, **kw)
    assert r.status == 200, (path, r.status, r.body[:300])
    return r.json()


class MgmtTest(h.BrokerTest):
    def setUp(self):
        super().setUp()
        self._http_queues = []

    def tearDown(self):
        for name in self._http_queues:
            with contextlib.suppress(Exception):
                request("DELETE", "/api/queues/%2F/" + q(name))
        super().tearDown()

    def http_queue(self, name=None, **body):
        name = name or h.unique("mgmtq")
        self._http_queues.append(name)
        r = request("PUT", "/api/queues/%2F/" + q(name), body)
        self.assertEqual(r.status, 201, r.body)
        return name

    def assert_error(self, r, status, error=None, reason=None):
        self.assertEqual(r.status, status, r.body)
        body = r.json()
        self.assertEqual(sorted(body), ["error", "reason"], body)
        if error is not None:
            self.assertEqual(body["error"], error, body)
        if reason is not None:
            self.assertIn(reason, body["reason"], body)
        return body

    def publish_http(self, queue, payload="x", encoding="string", properties=None):
        r = request("POST", "/api/exchanges/%2F/amq.default/publish",
                    {"properties": properties or {}, "routing_key": queue, "payload": payload,
                     "payload_encoding": encoding})
        self.assertEqual(r.status, 200, r.body)
        return r.json()["routed"]

    def get_http(self, queue, count=1, ackmode="ack_requeue_false", encoding="auto", **extra):
        body = dict(count=count, ackmode=ackmode, encoding=encoding, **extra)
        r = request("POST", "/api/queues/%2F/" + q(queue) + "/get", body)
        self.assertEqual(r.status, 200, r.body)
        return r.json()


class Errors(MgmtTest):
    def test_401_without_credentials_has_www_authenticate(self):
        r = request("GET", "/api/overview", auth=None)
        self.assertEqual(r.status, 401)
        if WARREN:  # RabbitMQ sends no body here; Warren's errors all have one
            self.assert_error(r, 401, "not_authorized")
        self.assertEqual(r.headers["www-authenticate"], 'Basic realm="RabbitMQ Management"')

    def test_401_wrong_password(self):
        bad = "Basic " + base64.b64encode(b"guest:wrong").decode()
        r = request("GET", "/api/queues", auth=bad)
        self.assert_error(r, 401, "not_authorized", "Login failed")
        self.assertIn("www-authenticate", r.headers)

    def test_404_unknown_path_vhost_queue_exchange(self):
        for path in ("/api/nosuch", "/api/queues/nosuchvhost", "/api/queues/%2F/nosuchqueue",
                     "/api/exchanges/%2F/nosuchexchange", "/api/exchanges/nosuchvhost"):
            self.assert_error(request("GET", path), 404, "Object Not Found", "Not Found")

    def test_declare_in_an_unknown_vhost_is_404_vhost_not_found(self):
        for path in ("/api/queues/mgmt-nosuchvhost/q", "/api/exchanges/mgmt-nosuchvhost/x"):
            self.assert_error(request("PUT", path, {}), 404, "not_found", "vhost_not_found")

    def test_400_bad_list_regex_says_pagination_parameters_are_invalid(self):
        self.http_queue()  # RabbitMQ compiles the regex only when there is something to filter
        r = request("GET", "/api/queues/%2F?page=1&page_size=2&name=(&use_regex=true")
        body = self.assert_error(r, 400, "bad_request")
        self.assertEqual(body["reason"], "Pagination parameters are invalid")

    def test_405_wrong_method_lists_allowed(self):
        r = request("PATCH", "/api/overview")
        self.assertEqual(r.status, 405)
        self.assertIn("GET", r.headers["allow"])
        r = request("POST", "/api/queues/%2F/x")
        self.assertEqual(r.status, 405)
        self.assertEqual(set(r.headers["allow"].replace(" ", "").split(",")),
                         {"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})

    def test_400_malformed_json_names_the_parser_reason(self):
        r = request("PUT", "/api/queues/%2F/" + h.unique("mgmtq"), b"{bad")
        body = self.assert_error(r, 400, "bad_request", "not_json")
        if WARREN:  # and the parser's own words (jansson), where RabbitMQ says only not_json
            self.assertIn("line 1", body["reason"])

    def test_400_not_boolean(self):
        name = h.unique("mgmtq")
        r = request("PUT", "/api/queues/%2F/" + name, {"durable": "yes"})
        self.assert_error(r, 400, "bad_request")
        self.assertEqual(r.json()["reason"], ["not_boolean", "yes"])
        self.assertEqual(request("GET", "/api/queues/%2F/" + name).status, 404)

    def test_400_null_argument_changes_nothing(self):
        name = h.unique("mgmtq")
        r = request("PUT", "/api/queues/%2F/" + name, {"arguments": {"x-max-length": None}})
        self.assert_error(r, 400, "bad_request", "null_not_allowed")
        self.assertEqual(request("GET", "/api/queues/%2F/" + name).status, 404)

    def test_400_body_over_the_limit(self):
        # RabbitMQ 3.10 reads 8,000,000 bytes and refuses the rest
        name = h.unique("mgmt-vh")
        big = b'{"description": "' + b"x" * (9 << 20) + b'"}'
        r = request("PUT", "/api/vhosts/" + q(name), big)
        self.assert_error(r, 400, "bad_request", "Exceeded HTTP request body size limit")
        self.assertEqual(request("GET", "/api/vhosts/" + q(name)).status, 404)

    def test_bad_queue_argument_is_400_with_rabbitmq_text(self):
        name = h.unique("mgmtq")
        r = request("PUT", "/api/queues/%2F/" + name, {"arguments": {"x-max-length": "abc"}})
        self.assert_error(r, 400, "bad_request",
                          "invalid arg 'x-max-length' for queue '%s' in vhost '/'" % name)

    def test_reserved_names_are_refused_like_rabbitmq(self):
        self.assert_error(request("PUT", "/api/queues/%2F/amq.mgmt", {}), 401, "not_authorised",
                          "Access refused.")
        self.assert_error(request("DELETE", "/api/exchanges/%2F/amq.direct"), 401,
                          "not_authorised")


class Queues(MgmtTest):
    def test_put_get_delete(self):
        name = h.unique("mgmtq")
        self._http_queues.append(name)
        self.assertEqual(request("PUT", "/api/queues/%2F/" + name,
                                 {"durable": True, "arguments": {"x-max-length": 10}}).status, 201)
        self.assertEqual(request("PUT", "/api/queues/%2F/" + name,
                                 {"durable": True, "arguments": {"x-max-length": 10}}).status, 204)
        keys = ("name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "consumers",
                "messages", "messages_ready", "messages_unacknowledged", "consumer_details", "node",
                "state", "type", "memory")
        info = poll(lambda: (lambda i: i if all(k in i for k in keys) else None)(
            get("/api/queues/%2F/" + name)))
        self.assertTrue(info, "fields missing")
        self.assertEqual((info["name"], info["vhost"], info["durable"]), (name, "/", True))
        self.assertEqual(info["arguments"], {"x-max-length": 10})
        self.assertEqual(self.count(name), 0)  # AMQP sees it
        self.assertEqual(request("DELETE", "/api/queues/%2F/" + name).status, 204)
        self.assertEqual(request("DELETE", "/api/queues/%2F/" + name).status, 404)

    def test_message_bytes_ready_and_unacknowledged(self):
        name = self.http_queue()
        self.ch.basic_publish("", name, b"x" * 10)
        self.ch.basic_publish("", name, b"y" * 25)
        self.assertIsNotNone(self.ch.basic_get(name, auto_ack=False)[0])  # 10 bytes unacked
        want = (35, 25, 10)
        fields = ("message_bytes", "message_bytes_ready", "message_bytes_unacknowledged")
        info = poll(lambda: (lambda i: i if tuple(i.get(k) for k in fields) == want else None)(
            get("/api/queues/%2F/" + name)))
        self.assertTrue(info, get("/api/queues/%2F/" + name))
        self.ch.basic_recover(requeue=True)
        info = poll(lambda: (lambda i: i if i.get("message_bytes_unacknowledged") == 0 else None)(
            get("/api/queues/%2F/" + name)))
        self.assertEqual((info["message_bytes"], info["message_bytes_ready"]), (35, 35))

    def test_messages_in_ram_persistent_and_paged_out(self):
        # RabbitMQ's breakdown: a transient and two persistent messages in a
        # durable queue, one persistent one unacked; then in a transient
        # queue nothing is persistent.
        durable = self.http_queue(durable=True)
        persistent = pika.BasicProperties(delivery_mode=2)
        self.ch.basic_publish("", durable, b"t" * 10)
        self.ch.basic_publish("", durable, b"p" * 20, properties=persistent)
        self.ch.basic_publish("", durable, b"q" * 30, properties=persistent)
        self.assertIsNotNone(self.ch.basic_get(durable, auto_ack=True)[0])  # the transient one
        self.assertIsNotNone(self.ch.basic_get(durable, auto_ack=False)[0])  # 20 bytes unacked
        want = {"messages_persistent": 2, "message_bytes_persistent": 50, "messages_ram": 2,
                "message_bytes_ram": 50, "messages_ready_ram": 1, "messages_unacknowledged_ram": 1,
                "messages_paged_out": 0, "message_bytes_paged_out": 0}
        fields = sorted(want)
        path = "/api/queues/%2F/" + durable
        info = poll(lambda: (lambda i: i if {k: i.get(k) for k in fields} == want else None)(get(path)))
        self.assertTrue(info, {k: get(path).get(k) for k in fields})
        self.ch.basic_recover(requeue=True)
        transient = self.http_queue()
        self.ch.basic_publish("", transient, b"p" * 20, properties=persistent)
        info = poll(lambda: (lambda i: i if i.get("messages_ram") == 1 else None)(
            get("/api/queues/%2F/" + transient)))
        self.assertEqual((info["messages_persistent"], info["message_bytes_persistent"]), (0, 0))

    @unittest.skipUnless(WARREN, "RabbitMQ pages out under memory pressure only")
    def test_paged_out_counts_come_and_go(self):
        # A durable queue keeps the first 64 of its backlog in RAM and the
        # rest in the journal only; read back, they count in RAM again, and
        # once consumed nothing is left on any count.
        name = self.http_queue(durable=True)
        persistent = pika.BasicProperties(delivery_mode=2)
        for _ in range(100):
            self.ch.basic_publish("", name, b"m" * 100, properties=persistent)
        self.ch.basic_publish("", name, b"t" * 7)  # transient: stays in RAM
        info = poll(lambda: (lambda i: i if i.get("messages") == 101 else None)(
            get("/api/queues/%2F/" + name)))
        self.assertEqual((info["messages_paged_out"], info["message_bytes_paged_out"]),
                         (36, 3600))
        self.assertEqual((info["messages_ram"], info["message_bytes_ram"]), (65, 6407))
        self.assertEqual((info["messages_persistent"], info["message_bytes_persistent"]),
                         (100, 10000))
        other = self.http_queue(name + "-none")
        for key in ("messages_paged_out", "message_bytes_ram", "messages_persistent"):
            for reverse, first in (("true", name), ("false", other)):
                page = get("/api/queues/%%2F?page=1&name=%s&sort=%s&sort_reverse=%s&columns=name"
                           % (q(name), key, reverse))
                self.assertEqual(page["items"][0]["name"], first, (key, reverse))
        for _ in range(50):
            self.assertIsNotNone(self.ch.basic_get(name, auto_ack=True)[0])
        info = get("/api/queues/%2F/" + name)
        self.assertEqual(info["messages_paged_out"] + info["messages_ram"], 51)
        self.assertEqual(info["messages_persistent"], 50)
        while self.ch.basic_get(name, auto_ack=False)[0]:
            pass
        info = get("/api/queues/%2F/" + name)
        self.assertEqual((info["messages_ram"], info["messages_unacknowledged_ram"],
                          info["messages_persistent"]), (51, 51, 50))
        self.ch.basic_recover(requeue=True)  # back to the queue, then gone
        request("DELETE", "/api/queues/%2F/" + name + "/contents")
        self.assert_nothing_counted(name)
        # expiring from the middle of the backlog, paged out or not
        for i in range(100):
            self.ch.basic_publish("", name, b"e" * 10, properties=pika.BasicProperties(
                delivery_mode=2, expiration=None if i % 2 else "200"))
        self.assertTrue(poll(lambda: get("/api/queues/%2F/" + name)["messages"] == 50))
        self.assertEqual(get("/api/queues/%2F/" + name)["messages_persistent"], 50)
        request("DELETE", "/api/queues/%2F/" + name + "/contents")
        self.assert_nothing_counted(name)

    def assert_nothing_counted(self, name):
        info = get("/api/queues/%2F/" + name)
        for k in ("messages_paged_out", "message_bytes_paged_out", "messages_ram",
                  "message_bytes_ram", "messages_persistent", "message_bytes_persistent"):
            self.assertEqual(info[k], 0, k)

    def test_consumer_capacity(self):
        # RabbitMQ's: 0 without consumers, 1.0 while a consumer could take
        # more, falling while messages wait on a consumer at its prefetch,
        # rising again once it takes them (a moving average, half-life 1 s;
        # Warren's is computed when asked).
        name = self.http_queue()
        path = "/api/queues/%2F/" + name
        info = poll(lambda: (lambda i: i if "consumer_capacity" in i else None)(get(path)))
        self.assertEqual(info["consumer_capacity"], 0)
        ch = self.conn.channel()
        ch.basic_qos(prefetch_count=1)
        tags = []
        ch.basic_consume(name, lambda c, m, p, b: tags.append(m.delivery_tag))
        full = poll(lambda: (lambda i: i if i.get("consumers") == 1
                             and i.get("consumer_capacity", 0) >= 0.99 else None)(get(path)))
        self.assertTrue(full, get(path))
        self.assertEqual(full["consumer_utilisation"], full["consumer_capacity"])
        for _ in range(5):
            ch.basic_publish("", name, b"x")
        low = poll(lambda: (lambda i: i if i["consumer_capacity"] < 0.5 else None)(get(path)))
        self.assertTrue(low, get(path))
        if not WARREN:
            return  # RabbitMQ stops emitting an idle queue's statistics: the value stays low
        ch.basic_cancel(ch.consumer_tags[0])
        ch.basic_recover(requeue=True)
        self.conn.process_data_events(0.2)
        ch.basic_qos(prefetch_count=0)
        ch.basic_consume(name, lambda c, m, p, b: c.basic_ack(m.delivery_tag))
        high = poll(lambda: (self.conn.process_data_events(0.1),
                             (lambda i: i if i["messages"] == 0 and i["consumer_capacity"] > 0.8
                              else None)(get(path)))[1])
        self.assertTrue(high, get(path))

    def test_redeclare_inequivalent_is_400(self):
        name = self.http_queue(durable=True)
        r = request("PUT", "/api/queues/%2F/" + name, {"durable": False})
        self.assert_error(r, 400, "bad_request",
                          "inequivalent arg 'durable' for queue '%s' in vhost '/': received "
                          "'false' but current is 'true'" % name)

    def test_delete_if_empty_and_if_unused(self):
        name = self.http_queue()
        self.publish_http(name)
        r = request("DELETE", "/api/queues/%%2F/%s?if-empty=true" % name)
        self.assert_error(r, 400, "bad_request", "queue '%s' in vhost '/' not empty" % name)
        self.ch.basic_consume(name, lambda *a: None)
        r = request("DELETE", "/api/queues/%%2F/%s?if-unused=true" % name)
        self.assert_error(r, 400, "bad_request", "queue '%s' in vhost '/' in use" % name)
        self.assertEqual(request("DELETE", "/api/queues/%2F/" + name).status, 204)

    def test_purge_contents(self):
        name = self.http_queue()
        for _ in range(3):
            self.publish_http(name)
        self.assertEqual(request("DELETE", "/api/queues/%%2F/%s/contents" % name).status, 204)
        self.assertEqual(self.count(name), 0)
        self.assertEqual(request("DELETE", "/api/queues/%2F/nosuch/contents").status, 404)

    def test_arguments_json_to_amqp_types(self):
        name = self.http_queue(arguments={"x-max-length": 10, "x-f": 1.5, "x-b": True,
                                          "x-s": "s", "x-l": [1, "a", {"z": 2}], "x-o": {"a": 1}})
        self.assertEqual(get("/api/queues/%2F/" + name)["arguments"],
                         {"x-max-length": 10, "x-f": 1.5, "x-b": True, "x-s": "s",
                          "x-l": [1, "a", {"z": 2}], "x-o": {"a": 1}})
        # the limit is really applied: an integer became an AMQP integer
        for i in range(12):
            self.publish_http(name, str(i))
        self.assertEqual(self.count(name), 10)

    def test_queue_bindings_include_the_default_exchange(self):
        name = self.http_queue()
        self.ch.queue_bind(name, "amq.direct", routing_key="k")
        rows = get("/api/queues/%%2F/%s/bindings" % name)
        self.assertEqual(sorted((b["source"], b["routing_key"]) for b in rows),
                         [("", name), ("amq.direct", "k")])

    def test_odd_names_round_trip(self):
        name = "mgmt a/b c%d?e#f\u00e9"
        self.queue(name)
        info = get("/api/queues/%2F/" + q(name))
        self.assertEqual(info["name"], name)
        names = [x["name"] for x in get("/api/queues/%2F?columns=name")]
        self.assertIn(name, names)


class Messages(MgmtTest):
    def test_get_from_an_unknown_queue_is_404(self):
        r = request("POST", "/api/queues/%2F/mgmt-nosuchqueue/get",
                    {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})
        self.assert_error(r, 404, "not_found")
        self.assertEqual(r.json()["reason"], "NOT_FOUND - no queue 'mgmt-nosuchqueue' in vhost '/'")

    def test_publish_and_get_modes(self):
        name = self.http_queue()
        self.assertTrue(self.publish_http(name, "one"))
        self.assertTrue(self.publish_http(name, "two"))
        msgs = self.get_http(name, count=2, ackmode="ack_requeue_true")
        self.assertEqual([(m["payload"], m["redelivered"], m["message_count"]) for m in msgs],
                         [("one", False, 1), ("two", False, 0)])
        self.assertEqual(self.count(name), 2)  # requeued in order
        msgs = self.get_http(name, count=1, ackmode="ack_requeue_false")
        self.assertEqual((msgs[0]["payload"], msgs[0]["redelivered"]), ("one", True))
        self.assertEqual(self.count(name), 1)

    def test_publish_unroutable_and_missing_exchange(self):
        r = request("POST", "/api/exchanges/%2F/amq.direct/publish",
                    {"properties": {}, "routing_key": "nowhere", "payload": "x",
                     "payload_encoding": "string"})
        self.assertEqual(r.json(), {"routed": False})
        r = request("POST", "/api/exchanges/%2F/mgmt-none/publish",
                    {"properties": {}, "routing_key": "x", "payload": "x",
                     "payload_encoding": "string"})
        self.assert_error(r, 400, "bad_request", "404 NOT_FOUND - no exchange 'mgmt-none' in vhost '/'")

    def test_publish_missing_keys_and_bad_values(self):
        r = request("POST", "/api/exchanges/%2F/amq.direct/publish", {"routing_key": "x", "payload": "x"})
        self.assertEqual(r.json()["reason"], "[{key_missing,properties},{key_missing,payload_encoding}]")
        r = request("POST", "/api/exchanges/%2F/amq.direct/publish",
                    {"properties": {"delivery_mode": "x"}, "routing_key": "x", "payload": "x",
                     "payload_encoding": "string"})
        self.assertEqual(r.json()["reason"], ["not_int", "delivery_mode"])
        r = request("POST", "/api/exchanges/%2F/amq.direct/publish",
                    {"properties": {}, "routing_key": "x", "payload": "!!", "payload_encoding": "base64"})
        self.assertEqual(r.json()["reason"], ["not_base64", "!!"])

    def test_headers_both_ways_and_properties(self):
        name = self.http_queue()
        props = {"headers": {"i": 1, "f": 1.5, "b": True, "l": [1, "x"], "o": {"k": "v"}, "s": "str"},
                 "delivery_mode": 2, "priority": 3, "content_type": "text/plain",
                 "correlation_id": "c1", "message_id": "m1", "timestamp": 1700000000}
        self.publish_http(name, "aGk=", "base64", props)
        m, p, body = self.ch.basic_get(name, auto_ack=True)
        self.assertEqual(body, b"hi")
        self.assertEqual((p.delivery_mode, p.priority, p.content_type, p.correlation_id,
                          p.message_id, p.timestamp), (2, 3, "text/plain", "c1", "m1", 1700000000))
        # pika decodes longstr as str and truncates doubles ('d') to ints
        self.assertEqual(p.headers, {"i": 1, "f": 1, "b": True, "l": [1, "x"], "o": {"k": "v"},
                                     "s": "str"})
        # and back: what pika sends shows as RabbitMQ shows it
        self.ch.basic_publish("", name, b"\xff\x00bin",
                              pika.BasicProperties(headers={"n": 7, "t": "v", "d": {"x": [True]}},
                                                   delivery_mode=1))
        got = self.get_http(name)
        self.assertEqual(got[0]["properties"], {"headers": {"n": 7, "t": "v", "d": {"x": [True]}},
                                                "delivery_mode": 1})
        self.assertEqual((got[0]["payload_encoding"], base64.b64decode(got[0]["payload"])),
                         ("base64", b"\xff\x00bin"))

    def test_get_truncate_base64_and_reject_dead_letters(self):
        dlx = self.exchange("fanout")
        dlq = self.bound_queue(dlx)
        name = self.http_queue(arguments={"x-dead-letter-exchange": dlx})
        self.publish_http(name, "hello world")
        got = self.get_http(name, ackmode="ack_requeue_true", truncate=5)
        self.assertEqual((got[0]["payload"], got[0]["payload_bytes"]), ("hello", 11))
        got = self.get_http(name, ackmode="ack_requeue_true", encoding="base64")
        self.assertEqual(base64.b64decode(got[0]["payload"]), b"hello world")
        self.get_http(name, ackmode="reject_requeue_false")
        self.assertEqual((self.count(name), self.wait_count(dlq, 1)), (0, 1))

    def test_get_errors(self):
        name = self.http_queue()
        r = request("POST", "/api/queues/%%2F/%s/get" % name, {"count": 1, "ackmode": "ack_requeue_false"})
        self.assertEqual(r.json()["reason"], "[{key_missing,encoding}]")
        r = request("POST", "/api/queues/%%2F/%s/get" % name,
                    {"count": 1, "ackmode": "ack_requeue_false", "encoding": "bogus"})
        self.assert_error(r, 400, "bad_request", "Unsupported encoding. Please use auto or base64.")
        r = request("POST", "/api/queues/%2F/nosuch/get",
                    {"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"})
        self.assertEqual(r.status, 404)
        self.assertEqual(self.get_http(name), [])


class Exchanges(MgmtTest):
    def test_put_get_list_delete(self):
        name = h.unique("mgmtx")
        self.track_exchange(name)
        self.assertEqual(request("PUT", "/api/exchanges/%2F/" + name, {"type": "topic"}).status, 201)
        self.assertEqual(request("PUT", "/api/exchanges/%2F/" + name, {"type": "topic"}).status, 204)
        info = get("/api/exchanges/%2F/" + name)
        self.assertEqual((info["name"], info["type"], info["durable"], info["auto_delete"],
                          info["internal"], info["vhost"], info["arguments"]),
                         (name, "topic", False, False, False, "/", {}))
        names = [x["name"] for x in get("/api/exchanges/%2F")]
        self.assertIn(name, names)
        self.assertIn("", names)  # the default exchange, named "" in lists
        self.assertEqual(get("/api/exchanges/%2F/amq.default")["name"], "")
        self.ch.exchange_declare(name, "topic", passive=True)
        self.assertEqual(request("DELETE", "/api/exchanges/%2F/" + name).status, 204)
        self.assertEqual(request("DELETE", "/api/exchanges/%2F/" + name).status, 404)

    def test_delete_if_unused_and_bad_type(self):
        name = self.exchange("fanout")
        self.bound_queue(name)
        r = request("DELETE", "/api/exchanges/%%2F/%s?if-unused=true" % name)
        self.assert_error(r, 400, "bad_request", "exchange '%s' in vhost '/' in use" % name)
        r = request("PUT", "/api/exchanges/%2F/" + h.unique("mgmtx"), {"type": "bogus"})
        self.assert_error(r, 400, "bad_request", "exchange type 'bogus'")

    def test_bindings_source_and_destination(self):
        src, dst = self.exchange("direct"), self.exchange("fanout")
        self.ch.exchange_bind(dst, src, routing_key="r")
        qn = self.bound_queue(src, "k")
        rows = get("/api/exchanges/%%2F/%s/bindings/source" % src)
        self.assertEqual(sorted((b["destination"], b["destination_type"], b["routing_key"]) for b in rows),
                         sorted([(dst, "exchange", "r"), (qn, "queue", "k")]))
        rows = get("/api/exchanges/%%2F/%s/bindings/destination" % dst)
        self.assertEqual([(b["source"], b["routing_key"]) for b in rows], [(src, "r")])


class Bindings(MgmtTest):
    def test_post_get_delete_with_properties_key(self):
        x = self.exchange("topic")
        name = self.http_queue()
        path = "/api/bindings/%%2F/e/%s/q/%s" % (x, name)
        r = request("POST", path, {"routing_key": "a.b", "arguments": {"x": 1}})
        self.assertEqual(r.status, 201)
        self.assertTrue(r.headers["location"].startswith(name + "/a.b~"), r.headers)
        r = request("POST", path, {"routing_key": "a c"})
        self.assertEqual(r.headers["location"], name + "/a%2Bc")
        rows = get(path)
        self.assertEqual(sorted(b["routing_key"] for b in rows), ["a c", "a.b"])
        keys = {b["routing_key"]: b["properties_key"] for b in rows}
        one = get(path + "/" + q(keys["a c"]))
        self.assertEqual((one["source"], one["destination"], one["routing_key"], one["arguments"]),
                         (x, name, "a c", {}))
        self.publish("", "", b"")  # harmless
        self.ch.basic_publish(x, "a.b", b"m")
        self.assertEqual(self.wait_count(name, 1), 1)
        self.assertEqual(request("DELETE", path + "/" + q(keys["a.b"])).status, 204)
        self.assertEqual(request("GET", path + "/" + q(keys["a.b"])).status, 404)
        self.assertEqual([b["routing_key"] for b in get(path)], ["a c"])

    def test_exchange_to_exchange_and_lists(self):
        a, b = self.exchange("direct"), self.exchange("fanout")
        r = request("POST", "/api/bindings/%%2F/e/%s/e/%s" % (a, b), {"routing_key": "k"})
        self.assertEqual(r.status, 201)
        rows = get("/api/bindings/%%2F/e/%s/e/%s" % (a, b))
        self.assertEqual([(x["destination_type"], x["routing_key"]) for x in rows], [("exchange", "k")])
        everything = get("/api/bindings") + get("/api/bindings/%2F")
        self.assertTrue(any(x["source"] == a and x["destination"] == b for x in everything))
        # one by its properties key, deleted by it
        path = "/api/bindings/%%2F/e/%s/e/%s/" % (a, b) + q(rows[0]["properties_key"])
        one = get(path)
        self.assertEqual((one["source"], one["destination"], one["destination_type"], one["routing_key"]),
                         (a, b, "exchange", "k"))
        self.assertEqual(request("DELETE", path).status, 204)
        self.assertEqual(request("GET", path).status, 404)
        self.assertEqual(get("/api/bindings/%%2F/e/%s/e/%s" % (a, b)), [])

    def test_properties_key_as_listed_or_decoded(self):
        name = self.http_queue()
        path = "/api/bindings/%%2F/e/amq.topic/q/%s" % name
        self.assertEqual(request("POST", path, {"routing_key": "a.#"}).status, 201)
        key = [b["properties_key"] for b in get(path)]
        self.assertEqual(key, ["a.%23"])
        self.assertEqual(get(path + "/" + q(key[0]))["routing_key"], "a.#")  # encoded once more
        self.assertEqual(get(path + "/a.%23")["routing_key"], "a.#")  # sent as listed
        self.assertEqual(request("DELETE", path + "/a.%23").status, 204)
        self.assertEqual(get(path), [])

    def test_missing_queue_is_404(self):
        r = request("POST", "/api/bindings/%2F/e/amq.direct/q/mgmt-nonexist", {})
        self.assertEqual(r.status, 404)


class Connections(MgmtTest):
    def named_connection(self):
        return self.connect(client_properties={"connection_name": "mgmt-" + h.RUN_ID})

    def find(self, provided):
        found = poll(lambda: [c for c in get("/api/connections")
                              if c.get("user_provided_name") == provided])
        self.assertTrue(found, "connection %s not listed" % provided)
        return found[0]

    def test_list_get_channels(self):
        c = self.named_connection()
        ch = c.channel()
        ch.basic_qos(prefetch_count=7)
        info = self.find("mgmt-" + h.RUN_ID)
        for key in ("name", "user", "vhost", "peer_host", "peer_port", "host", "port", "state",
                    "channels", "client_properties", "recv_oct", "send_oct", "protocol", "timeout"):
            self.assertIn(key, info)
        self.assertEqual((info["user"], info["vhost"], info["state"], info["protocol"]),
                         ("guest", "/", "running", "AMQP 0-9-1"))
        one = get("/api/connections/" + q(info["name"]))
        self.assertEqual(one["name"], info["name"])
        chans = poll(lambda: [c for c in get("/api/connections/%s/channels" % q(info["name"]))
                              if c["prefetch_count"] == 7])
        self.assertEqual([x["number"] for x in chans], [1])
        self.assertEqual(chans[0]["prefetch_count"], 7)
        self.assertEqual(chans[0]["connection_details"]["name"], info["name"])
        self.assertEqual(get("/api/channels/" + q(chans[0]["name"]))["number"], 1)
        self.assertIn(chans[0]["name"], [x["name"] for x in get("/api/channels")])
        self.assertEqual(request("GET", "/api/connections/nosuch").status, 404)

    def test_delete_closes_with_320_and_reason(self):
        c = self.named_connection()
        info = self.find("mgmt-" + h.RUN_ID)
        r = request("DELETE", "/api/connections/" + q(info["name"]), headers={"X-Reason": "bye now"})
        self.assertEqual(r.status, 204)
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            h.drain(c, 2)
        self.assertEqual(cm.exception.reply_code, h.CONNECTION_FORCED)
        self.assertEqual(cm.exception.reply_text, "CONNECTION_FORCED - bye now")

    def test_handshake_sockets_not_listed(self):
        """Issue 17 item 19: as RabbitMQ, a connection is listed (and
        counted) only once connection.open succeeded -- not a socket that
        sent nothing, nor one in the handshake or tuned but not open."""
        import test_prometheus
        raws = [h.RawClient() for _ in range(3)]
        for r in raws:
            self.addCleanup(r.close)
        raws[1].send(h.PROTOCOL_HEADER)
        raws[1].expect(S.Connection.Start, 0)
        raws[2].handshake(open_vhost=False)
        names = ["%s:%d -> %s:%d" % (r.sock.getsockname() + r.sock.getpeername()) for r in raws]

        def listed():
            return {c["name"] for c in get("/api/connections")} & set(names)
        self.assertEqual(listed(), set())
        self.assertEqual({c["name"] for c in get("/api/vhosts/%2F/connections")} & set(names), set())
        for name in names:
            self.assertEqual(request("GET", "/api/connections/" + q(name)).status, 404, name)
        if WARREN:  # RabbitMQ's counts lag its 5 s statistics interval
            count = len(get("/api/connections"))
            self.assertEqual(get("/api/overview")["object_totals"]["connections"], count)
            fams = test_prometheus.metrics()
            self.assertEqual(test_prometheus.value(fams, "rabbitmq_connections"), count)
            self.assertGreaterEqual(get("/api/nodes")[0]["sockets_used"], count + len(raws))
        raws[2].send_method(0, S.Connection.Open(virtual_host="/"))
        raws[2].expect(S.Connection.OpenOk, 0)
        self.assertEqual(poll(listed), {names[2]})
        self.assertEqual(get("/api/connections/" + q(names[2]))["state"], "running")

    def test_consumers(self):
        name = self.http_queue()
        self.ch.basic_qos(prefetch_count=3)
        tag = self.ch.basic_consume(name, lambda *a: None, consumer_tag="mgmt-ctag-" + h.RUN_ID)
        rows = poll(lambda: [x for x in get("/api/consumers")
                             if x["consumer_tag"] == tag and x["channel_details"]])
        self.assertEqual(len(rows), 1)
        c = rows[0]
        self.assertEqual((c["queue"], c["prefetch_count"], c["ack_required"], c["exclusive"]),
                         ({"name": name, "vhost": "/"}, 3, True, False))
        self.assertIn("connection_name", c["channel_details"])
        self.assertEqual([x["consumer_tag"] for x in get("/api/consumers/%2F") if x["consumer_tag"] == tag], [tag])
        details = get("/api/queues/%2F/" + name)["consumer_details"]
        self.assertEqual([x["consumer_tag"] for x in details], [tag])


class Lists(MgmtTest):
    def make_queues(self, n):
        prefix = h.unique("mgmtpage")
        names = ["%s.%02d" % (prefix, i) for i in range(n)]
        for name in names:
            self.queue(name)
        return prefix, names

    def test_paged_envelope_filter_sort(self):
        prefix, names = self.make_queues(25)
        page = get("/api/queues?page=2&page_size=10&name=%s" % prefix.upper())
        self.assertEqual({k: v for k, v in page.items() if k != "items"},
                         {"filtered_count": 25, "item_count": 10, "page": 2, "page_count": 3,
                          "page_size": 10, "total_count": page["total_count"]})
        self.assertGreaterEqual(page["total_count"], 25)
        self.assertEqual([x["name"] for x in page["items"]], names[10:20])
        page = get("/api/queues/%%2F?page=1&page_size=3&name=%s&sort=name&sort_reverse=true" % prefix)
        self.assertEqual([x["name"] for x in page["items"]], names[::-1][:3])
        page = get("/api/queues?page=1&page_size=100&use_regex=true&name=%s" % q("^" + prefix + r"\.0[13]$"))
        self.assertEqual([x["name"] for x in page["items"]], [names[1], names[3]])
        page = get("/api/queues?page=3&page_size=10&name=%s&columns=name,durable" % prefix)
        self.assertEqual(page["items"], [{"durable": False, "name": n} for n in names[20:]])

    def test_sort_by_messages_and_nested_columns(self):
        prefix, names = self.make_queues(3)
        for i, name in enumerate(names):
            for _ in range(i + 1):
                self.publish_http(name)
        path = ("/api/queues?page=1&page_size=10&name=%s&sort=messages&sort_reverse=true"
                "&columns=name,message_stats.publish" % prefix)
        page = poll(lambda: (lambda p: p if all("message_stats" in x for x in p["items"])
                             and [x["name"] for x in p["items"]] == names[::-1] else None)(get(path)))
        self.assertEqual([(x["name"], x["message_stats"]) for x in page["items"]],
                         [(names[2], {"publish": 3}), (names[1], {"publish": 2}),
                          (names[0], {"publish": 1})])

    def test_columns_of_any_depth(self):
        # The console's and rabbitmqadmin's rate columns are three levels deep.
        name = self.http_queue()
        self.publish_http(name)
        path = ("/api/queues/%2F?columns=name,message_stats.publish_details.rate,"
                "message_stats.nosuch,messages.x")
        rows = poll(lambda: [r for r in get(path) if r.get("name") == name
                             and r.get("message_stats") and "messages" in r])
        self.assertEqual(len(rows), 1, rows)
        row = rows[0]
        self.assertEqual(sorted(row), ["message_stats", "messages", "name"])
        self.assertEqual(list(row["message_stats"]), ["publish_details"])
        self.assertEqual(list(row["message_stats"]["publish_details"]), ["rate"])
        self.assertIsInstance(row["message_stats"]["publish_details"]["rate"], float)
        one = get("/api/queues/%%2F/%s?columns=message_stats.publish_details.rate,"
                  "message_stats.publish" % name)
        self.assertEqual(sorted(one["message_stats"]), ["publish", "publish_details"])
        self.assertEqual(list(one["message_stats"]["publish_details"]), ["rate"])

    def test_pagination_errors(self):
        r = request("GET", "/api/queues?page=1&page_size=600")
        self.assert_error(r, 400, "invalid_pagination_parameters",
                          "Invalid pagination parameters: page number 1, page size 600")
        r = request("GET", "/api/queues?page=0")
        self.assert_error(r, 400, "invalid_pagination_parameters",
                          "page number 0, page size undefined")
        r = request("GET", "/api/queues?page=9999")
        self.assert_error(r, 400, "page_out_of_range", "Page out of range, page: 9999 page size: 100")
        r = request("GET", "/api/queues?page=x")
        self.assert_error(r, 400, "bad_request", "Pagination parameters are invalid")

    def test_big_list_streams_complete_json(self):
        prefix, names = self.make_queues(1500)
        host, port = h.mgmt_address()
        c = http.client.HTTPConnection(host, port, timeout=20)
        c.request("GET", "/api/queues", headers={"Authorization": AUTH})
        r = c.getresponse()
        if WARREN:  # written as it is built
            self.assertEqual(r.getheader("Transfer-Encoding"), "chunked")
        rows = json.loads(r.read())
        c.close()
        listed = {x["name"] for x in rows}
        self.assertTrue(set(names) <= listed)
        # the same connection keeps working after a streamed reply (keep-alive)
        c = http.client.HTTPConnection(host, port, timeout=20)
        for path in ("/api/queues?columns=name", "/api/overview"):
            c.request("GET", path, headers={"Authorization": AUTH})
            resp = c.getresponse()
            self.assertEqual(resp.status, 200)
            json.loads(resp.read())
        c.close()

    @h.needs_own_broker
    def test_client_leaving_mid_stream_frees_the_reply(self):
        # evhttp leaves a chunked reply's request to us when its client goes
        # away; under ASan (make test) a leak makes the broker exit non-zero.
        proc = h.WarrenProcess()
        addr = proc.start()
        self.addCleanup(proc.stop)
        c = h.connect(addr)
        ch = c.channel()
        for i in range(3000):
            ch.queue_declare("midstream.%05d" % i)
        c.close()
        for port, path in [(proc.mgmt_port, "/api/queues"), (proc.prometheus_port, "/metrics/per-object")]:
            for _ in range(3):
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n\r\n"
                           % (path, AUTH)).encode())
                self.assertIn(b"Transfer-Encoding: chunked", s.recv(4096))
                s.close()  # with most of the reply still to come
            time.sleep(0.3)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            conn.request("GET", path, headers={"Authorization": AUTH})
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            self.assertGreater(len(resp.read()), 100000)  # a later reply is whole
            conn.close()
        self.assertEqual(proc.stop(), 0, proc.log_tail())


class Statistics(MgmtTest):
    def test_counts_and_rates_move(self):
        name = self.http_queue()
        sent = [0]
        rates = []

        def moved():  # a steady flow, so every sampling interval sees some
            for _ in range(10):
                self.ch.basic_publish("", name, b"x")
            sent[0] += 10
            self.ch.basic_get(name, auto_ack=True)
            i = get("/api/queues/%2F/" + name)
            rates.append(i.get("message_stats", {}).get("publish_details", {}).get("rate", 0))
            return max(rates) > 0
        self.assertTrue(poll(moved), "no publish rate within %.0f s: %s" % (STATS_WAIT, rates))
        n = sent[0]
        gets = len(rates)
        info = poll(lambda: (lambda i: i if i.get("message_stats", {}).get("publish") == n
                             else None)(get("/api/queues/%2F/" + name)))
        ms = info["message_stats"]
        self.assertEqual((ms["publish"], ms["get_no_ack"], ms["deliver_get"]), (n, gets, gets))
        self.assertEqual((info["messages"], info["messages_ready"]), (n - gets, n - gets))
        if WARREN:
            self.assertGreater(info["oldest_ready_age_ms"], 0)
            self.assertEqual(info["delivery_count_histogram"]["0"], n - gets)
        self.assertTrue(poll(lambda: [c for c in get("/api/channels")
                                      if c.get("message_stats", {}).get("publish", 0) >= n]))
        over = get("/api/overview")
        self.assertGreaterEqual(over["message_stats"]["publish"], n)
        self.assertGreaterEqual(over["queue_totals"]["messages"], n - gets)
        default = get("/api/exchanges/%2F/amq.default")
        self.assertGreaterEqual(default["message_stats"]["publish_in"], n)

    def test_samples_with_msg_rates_age(self):
        name = self.http_queue()
        self.ch.basic_publish("", name, b"x")
        path = ("/api/queues/%%2F/%s?msg_rates_age=60&msg_rates_incr=5&lengths_age=20&lengths_incr=5"
                % name)
        info = poll(lambda: (lambda i: i if "message_stats" in i and "messages_details" in i
                             and i["message_stats"]["publish_details"].get("samples")
                             else None)(get(path)))
        d = info["message_stats"]["publish_details"]
        # RabbitMQ keeps ten minutes of every queue and answers the whole
        # window (zeros before the queue existed); Warren keeps a minute of
        # a queue's samples from its first activity and answers those only.
        self.assertLessEqual(len(d["samples"]), 13)
        self.assertEqual(sorted(d), ["avg", "avg_rate", "rate", "samples"])
        ts = [s["timestamp"] for s in d["samples"]]
        self.assertEqual(ts, [ts[0] - 5000 * i for i in range(len(ts))])
        self.assertTrue(all(t % 5000 == 0 for t in ts))
        self.assertLessEqual(len(info["messages_details"]["samples"]), 5)
        if not WARREN:
            self.assertEqual(len(d["samples"]), 13)
            self.assertEqual(len(info["messages_details"]["samples"]), 5)

    @unittest.skipUnless(WARREN, "RabbitMQ answers zeros for the time before a queue existed")
    def test_samples_are_only_those_held(self):
        # Ten minutes asked of a queue a few seconds old: its few samples,
        # not 121 with the oldest repeated.
        born = time.time() * 1000
        name = self.http_queue()
        path = ("/api/queues/%%2F/%s?msg_rates_age=600&msg_rates_incr=5&lengths_age=600"
                "&lengths_incr=5" % name)
        d = get(path)
        self.assertEqual(d["messages_details"]["samples"], [])  # never active: none yet
        self.ch.basic_publish("", name, b"x")
        info = poll(lambda: (lambda i: i if len(i["messages_details"]["samples"]) >= 3
                             else None)(get(path)))
        self.assertTrue(info, "three samples within %.0f s" % STATS_WAIT)
        for d in (info["messages_details"], info["message_stats"]["publish_details"]):
            ts = [s["timestamp"] for s in d["samples"]]
            self.assertLess(len(ts), 121)
            self.assertGreaterEqual(min(ts), born - 10000)  # the zero before its first tick
            self.assertEqual(ts, [ts[0] - 5000 * i for i in range(len(ts))])
        self.assertEqual(info["messages_details"]["samples"][0]["sample"], 1)
        self.assertEqual(info["message_stats"]["publish_details"]["samples"][-1]["sample"], 0)

    @unittest.skipUnless(WARREN, "Warren's queue health fields")
    def test_unacked_age_and_histogram(self):
        name = self.http_queue()
        self.publish_http(name)
        m, _, _ = self.ch.basic_get(name, auto_ack=False)
        time.sleep(0.3)
        info = get("/api/queues/%2F/" + name)
        self.assertEqual(info["messages_unacknowledged"], 1)
        self.assertGreaterEqual(info["oldest_unacked_age_ms"], 250)
        self.assertEqual(info["delivery_count_histogram"]["1"], 1)
        self.ch.basic_nack(m.delivery_tag, requeue=True)
        m, _, _ = self.ch.basic_get(name, auto_ack=False)
        self.assertTrue(m.redelivered)
        self.ch.basic_nack(m.delivery_tag, requeue=True)
        info = get("/api/queues/%2F/" + name)
        self.assertEqual(info["delivery_count_histogram"]["2"], 1)
        self.assertIsNone(info["oldest_unacked_age_ms"])

    def test_disable_stats(self):
        name = self.http_queue()
        info = get("/api/queues/%2F/" + name + "?disable_stats=true")
        self.assertEqual(sorted(info), ["arguments", "auto_delete", "durable", "exclusive", "name",
                                        "node", "state", "type", "vhost"])


class Broker(MgmtTest):
    def test_overview(self):
        over = get("/api/overview")
        for key in ("management_version", "rabbitmq_version", "product_name", "node", "message_stats",
                    "queue_totals", "object_totals", "listeners", "exchange_types"):
            self.assertIn(key, over)
        amqp = [l for l in over["listeners"] if l["protocol"] == "amqp"]
        self.assertEqual(amqp[0]["port"], h.broker_address()[1])
        self.assertEqual(sorted(over["object_totals"]),
                         ["channels", "connections", "consumers", "exchanges", "queues"])

    def test_nodes_whoami_vhosts(self):
        nodes = get("/api/nodes")
        self.assertEqual(len(nodes), 1)
        node = nodes[0]
        for key in ("name", "running", "uptime", "mem_used", "mem_limit", "mem_alarm", "disk_free",
                    "fd_used", "fd_total"):
            self.assertIn(key, node)
        self.assertEqual(get("/api/nodes/" + q(node["name"]))["name"], node["name"])
        if WARREN:  # RabbitMQ fails with 500 here
            self.assertEqual(request("GET", "/api/nodes/nosuch@node").status, 404)
        self.assertEqual(get("/api/whoami"), {"name": "guest", "tags": ["administrator"]})
        vhosts = get("/api/vhosts")
        self.assertIn("/", [v["name"] for v in vhosts])
        self.assertEqual(get("/api/vhosts/%2F")["name"], "/")
        self.assertEqual(request("GET", "/api/vhosts/nosuch").status, 404)

    @unittest.skipUnless(WARREN, "Warren's journal")
    def test_journal_bytes_grow_with_persistent_messages(self):
        before = get("/api/nodes")[0]["journal_bytes"]
        name = self.http_queue(durable=True)
        for _ in range(20):
            self.ch.basic_publish("", name, b"z" * 1000, pika.BasicProperties(delivery_mode=2))
        self.assertEqual(self.wait_count(name, 20), 20)
        after = get("/api/nodes")[0]["journal_bytes"]
        self.assertGreaterEqual(after - before, 20 * 1000)

    def test_health_aliveness_extensions(self):
        self.assertEqual(get("/api/health/checks/alarms"), {"status": "ok"})
        self.assertEqual(get("/api/health/checks/local-alarms"), {"status": "ok"})
        self.assertEqual(get("/api/health/checks/virtual-hosts"), {"status": "ok"})
        self.assertEqual(get("/api/aliveness-test/%2F"), {"status": "ok"})
        self.track_queue("aliveness-test")
        self.assertEqual(request("GET", "/api/aliveness-test/nosuch").status, 404)
        self.assertIsInstance(get("/api/extensions"), list)


@unittest.skipIf(h.TARGET, "Warren's control socket")
class ControlSocket(MgmtTest):
    def unix(self, method, path, auth=None):
        return request(method, path, auth=auth, conn=UnixHTTPConnection(h.control_socket()))

    def test_no_auth_needed_and_mode_0600(self):
        path = h.control_socket()
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o600)
        self.assertTrue(stat.S_ISSOCK(os.stat(path).st_mode))
        r = self.unix("GET", "/api/whoami")
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json()["tags"], ["administrator"])
        self.assertEqual(self.unix("GET", "/api/overview").status, 200)

    def test_authorization_header_is_checked(self):
        bad = "Basic " + base64.b64encode(b"guest:wrong").decode()
        self.assertEqual(self.unix("GET", "/api/whoami", auth=bad).status, 401)
        self.assertEqual(self.unix("GET", "/api/whoami", auth=AUTH).json()["name"], "guest")

    def test_environment(self):
        env = self.unix("GET", "/api/environment").json()
        self.assertEqual(env["management.tcp.ip"], "127.0.0.1")
        self.assertIn("listeners.tcp.default", env)
        self.assertNotIn("default_pass", env)
        self.assertEqual(get("/api/environment")["data_dir"], env["data_dir"])

    def run_as_nobody(self, path):
        code = ("import socket,sys\n"
                "s=socket.socket(socket.AF_UNIX)\n"
                "s.settimeout(5)\n"
                "try:\n"
                "    s.connect(sys.argv[1])\n"
                "except OSError as e:\n"
                "    print('refused', e.errno); sys.exit(0)\n"
                "s.sendall(b'GET /api/whoami HTTP/1.0\\r\\n\\r\\n')\n"
                "print(s.recv(200).split(b'\\r\\n')[0].decode())\n")
        setpriv = shutil.which("setpriv")
        if os.geteuid() != 0 or not setpriv:
            self.skipTest("needs root and setpriv to run a client as nobody")
        out = subprocess.run([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              sys.executable, "-c", code, path], capture_output=True, timeout=10)
        return out.stdout.decode().strip()

    def test_other_uid_is_refused(self):
        path = h.control_socket()
        # the file's mode stops it first...
        self.assertTrue(self.run_as_nobody(path).startswith("refused"))
        # ...and with the mode opened up, the broker's peer check still refuses
        parent = os.path.dirname(path)
        old_dir, old_sock = os.stat(parent).st_mode, os.stat(path).st_mode
        try:
            os.chmod(parent, 0o755)
            os.chmod(path, 0o666)
            self.assertEqual(self.run_as_nobody(path), "HTTP/1.1 403 Forbidden")
        finally:
            os.chmod(path, stat.S_IMODE(old_sock))
            os.chmod(parent, stat.S_IMODE(old_dir))
        self.assertEqual(self.unix("GET", "/api/whoami").status, 200)


def rabbitmqadmin_path():
    built = h.REPO / "build" / "tools" / "usr" / "bin" / "rabbitmqadmin"
    for p in (str(built), shutil.which("rabbitmqadmin")):
        if p and os.path.exists(p):
            return p
    return None


@unittest.skipIf(rabbitmqadmin_path() is None, "rabbitmqadmin not installed (scripts/deps.sh)")
class Rabbitmqadmin(MgmtTest):
    """Debian's rabbitmqadmin, unchanged, against Warren."""

    def admin(self, *args):
        host, port = h.mgmt_address()
        out = subprocess.run([sys.executable, rabbitmqadmin_path(), "-H", host, "-P", str(port),
                              "-u", "guest", "-p", "guest", "-f", "raw_json"] + list(args),
                             capture_output=True, timeout=20)
        self.assertEqual(out.returncode, 0, out.stderr.decode() + out.stdout.decode())
        return out.stdout.decode()

    def test_declare_publish_get_purge_delete(self):
        name = h.unique("mgmtadm")
        self._http_queues.append(name)
        x = h.unique("mgmtadmx")
        self.track_exchange(x)
        self.admin("declare", "queue", "name=" + name, "durable=false")
        self.admin("declare", "exchange", "name=" + x, "type=fanout")
        self.admin("declare", "binding", "source=" + x, "destination=" + name)
        self.assertEqual(self.admin("publish", "exchange=" + x, "routing_key=any",
                                    "payload=hello-admin").strip(), "Message published")
        rows = poll(lambda: [r for r in json.loads(self.admin("list", "queues", "name", "messages"))
                             if r == {"name": name, "messages": 1}])
        self.assertTrue(rows)
        got = json.loads(self.admin("get", "queue=" + name, "ackmode=ack_requeue_true"))
        self.assertEqual(got[0]["payload"], "hello-admin")
        self.admin("purge", "queue", "name=" + name)
        self.assertEqual(self.count(name), 0)
        self.assertIn(x, [e["name"] for e in json.loads(self.admin("list", "exchanges"))])
        self.assertTrue(json.loads(self.admin("list", "bindings")))
        self.admin("delete", "binding", "source=" + x, "destination=" + name,
                   "destination_type=queue", "properties_key=~")
        self.admin("delete", "queue", "name=" + name)
        self.admin("delete", "exchange", "name=" + x)
        self.assertEqual(request("GET", "/api/queues/%2F/" + name).status, 404)

    def test_list_with_a_rate_column(self):
        name = h.unique("mgmtadm-rate")
        self._http_queues.append(name)
        self.admin("declare", "queue", "name=" + name, "durable=false")
        host, port = h.mgmt_address()

        def rate_printed():  # a steady flow, so every sampling interval sees some
            for _ in range(10):
                self.ch.basic_publish("", name, b"x")
            out = subprocess.run([sys.executable, rabbitmqadmin_path(), "-H", host, "-P", str(port),
                                  "-u", "guest", "-p", "guest", "-f", "tsv", "list", "queues", "name",
                                  "message_stats.publish_details.rate"],
                                 capture_output=True, timeout=20, check=True).stdout.decode()
            rows = [line.split("\t") for line in out.splitlines()]
            self.assertEqual(rows[0], ["name", "message_stats.publish_details.rate"])
            mine = [r[1] for r in rows if r[0] == name]
            return mine and mine[0] and float(mine[0]) > 0
        self.assertTrue(poll(rate_printed), "rabbitmqadmin printed no rate")

    def test_policies_and_operator_policies(self):
        name = h.unique("mgmtadm-pol")
        pattern = "^" + h.unique("mgmtadm-nomatch")
        for kind, listing in (("policy", "policies"), ("operator_policy", "operator_policies")):
            self.admin("declare", kind, "name=" + name, "pattern=" + pattern,
                       'definition={"max-length":5}', "priority=3", "apply-to=queues")
            try:
                rows = [r for r in json.loads(self.admin("list", listing)) if r["name"] == name]
                self.assertEqual(rows, [{"vhost": "/", "name": name, "pattern": pattern,
                                         "apply-to": "queues", "definition": {"max-length": 5},
                                         "priority": 3}], kind)
            finally:
                self.admin("delete", kind, "name=" + name)
            self.assertNotIn(name, [r["name"] for r in json.loads(self.admin("list", listing))])

    def test_list_every_kind(self):
        self.ch.basic_consume(self.queue(), lambda *a: None)
        for kind in ("connections", "channels", "consumers", "exchanges", "queues", "bindings",
                     "vhosts", "nodes", "users", "permissions"):
            # RabbitMQ lists a new consumer within its 5 s statistics interval
            rows = poll(lambda: json.loads(self.admin("list", kind)))
            self.assertIsInstance(rows, list, kind)
            self.assertTrue(rows, kind)
        self.assertIn("management_version", self.admin("show", "overview"))


if __name__ == "__main__":
    unittest.main()
