"""The hash and random exchange types over pika and the management API:
x-consistent-hash (RabbitMQ 3.10's plugin: weights, hash-header,
hash-property, the ring at /api/exchanges/{vhost}/{name}/ring, restarts),
x-modulus-hash (RabbitMQ 4.3) and x-local-random (RabbitMQ 4.0). Expected
assignments were recorded from RabbitMQ 3.10.8 with the plugin (and, for
x-modulus-hash, computed with OTP 25's erlang:phash2)."""
import base64
import http.client
import json
import urllib.parse

import pika
from pika import exceptions as pex

import harness as h
from test_warrenctl import live_args, run as warrenctl

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()

# keys k0..k59 over weights 1, 2, 3 (queue index per key), from RabbitMQ 3.10.8
RABBIT_K60 = "122112122122111002012221202221121221021021101122211122012121"
# phash2([<<"k<i>">>], 2^27) rem 3 for i = 0..39
MODULUS_K40 = "2000102220012112212220112201020101102010"


def request(method, path, body=None, mgmt=None):
    host, port = mgmt or h.mgmt_address()
    c = http.client.HTTPConnection(host, port, timeout=10)
    hdrs = {"Authorization": AUTH}
    if body is not None:
        body = json.dumps(body)
        hdrs["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        return r.status, (json.loads(data) if data else None)
    finally:
        c.close()


def enc(name):
    return urllib.parse.quote(name, safe="")


class XTypesTest(h.BrokerTest):
    def queues(self, n):
        return [self.queue() for _ in range(n)]

    def where(self, queues, keys, exchange, props=None):
        """Publishes one message per key; the index of the queue each reached."""
        for i, k in enumerate(keys):
            self.publish(exchange, k, str(i).encode(), properties=props(i) if props else None)
        h.sync(self.ch)
        got = {}
        for qi, q in enumerate(queues):
            for _, _, body in h.get_all(self.ch, q):
                got[int(body)] = qi
        return "".join(str(got.get(i, "-")) for i in range(len(keys)))


class ConsistentHash(XTypesTest):
    def test_weighted_keys_land_as_on_rabbitmq(self):
        x = self.exchange("x-consistent-hash")
        qs = self.queues(3)
        for q, w in zip(qs, ("1", "2", "3")):
            self.ch.queue_bind(q, x, w)
        self.assertEqual(self.where(qs, ["k%d" % i for i in range(60)], x), RABBIT_K60)

    def test_hash_header_and_missing_header(self):
        x = self.exchange("x-consistent-hash", arguments={"hash-header": "h"})
        qs = self.queues(3)
        for q, w in zip(qs, ("2", "1", "1")):
            self.ch.queue_bind(q, x, w)
        values = ["a", "b", 5, -7, 2 ** 40, True, False, None, [1, "x"], {"n": 1}, "zz", "k1", 0]
        got = self.where(qs, ["r"] * len(values), x,
                         lambda i: pika.BasicProperties(headers={"h": values[i]}))
        self.assertEqual(got, "1002201020202")  # RabbitMQ 3.10.8's choices
        # no such header: the plugin hashes `undefined`, so one fixed queue
        got = self.where(qs, ["a", "b", "c"], x, lambda i: pika.BasicProperties(headers={"o": i}))
        self.assertEqual(got, "000")

    def test_hash_property_message_id(self):
        x = self.exchange("x-consistent-hash", arguments={"hash-property": "message_id"})
        qs = self.queues(3)
        for q in qs:
            self.ch.queue_bind(q, x, "1")
        got = self.where(qs, ["same"] * 20, x, lambda i: pika.BasicProperties(message_id="id%d" % i))
        self.assertEqual(got, "20110001010200220200")

    def test_declare_errors(self):
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.exchange, "x-consistent-hash",
                                      arguments={"hash-header": "h", "hash-property": "message_id"})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - hash-header and hash-property are "
                                       "mutually exclusive")
        self.ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.exchange, "x-consistent-hash",
                                      arguments={"hash-property": "app_id"})
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - Unsupported property: app_id")
        self.ch = self.conn.channel()
        e = self.assert_connection_error(541, self.exchange, "x-consistent-hash",
                                         arguments={"hash-header": 5})
        self.assertEqual(e.reply_text, "INTERNAL_ERROR")

    def test_bind_errors_and_type_mismatch(self):
        x = self.exchange("x-consistent-hash")
        q = self.queue()
        for key, text in (("abc", 'The binding key must be an integer: <<"abc">>'),
                          ("0", "The binding key must be greater than 0")):
            ch = self.conn.channel()
            e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_bind, q, x, key)
            self.assertEqual(e.reply_text, "PRECONDITION_FAILED - " + text)
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.exchange_declare, x, "direct")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange "
                                       "'%s' in vhost '/': received 'direct' but current is "
                                       "''x-consistent-hash''" % x)

    def test_cc_routes_once(self):
        x = self.exchange("x-consistent-hash")
        qs = self.queues(3)
        for q in qs:
            self.ch.queue_bind(q, x, "1")
        self.publish(x, "k1", properties=pika.BasicProperties(headers={"CC": ["k2", "k3", "k4"]}))
        h.sync(self.ch)
        self.assertEqual(sum(self.count(q) for q in qs), 1)

    def test_ring_over_the_api(self):
        x = self.exchange("x-consistent-hash")
        qs = self.queues(3)
        for q, w in zip(qs, ("3", "1", "2")):
            self.ch.queue_bind(q, x, w)
        self.ch.queue_unbind(qs[1], x, "1")
        status, ring = request("GET", "/api/exchanges/%2F/" + enc(x) + "/ring")
        self.assertEqual(status, 200)
        self.assertEqual(ring["buckets"], 5)
        self.assertEqual([(r["destination"], r["first_bucket"], r["last_bucket"], r["weight"])
                          for r in ring["ring"]], [(qs[0], 0, 2, 3), (qs[2], 3, 4, 2)])
        self.assertEqual(request("GET", "/api/exchanges/%2F/nope-xyz/ring")[0], 404)
        self.assertEqual(request("GET", "/api/exchanges/%2F/amq.direct/ring")[0], 400)
        status, one = request("GET", "/api/exchanges/%2F/" + enc(x))
        self.assertEqual(one["type"], "x-consistent-hash")

    def test_warrenctl_ring_state(self):
        # rabbitmq-diagnostics consistent_hash_exchange_ring_state's output,
        # as RabbitMQ 3.10.8 printed it for the same bindings
        x = self.exchange("x-consistent-hash")
        qs = self.queues(3)
        for q, w in zip(qs, ("3", "1", "8")):
            self.ch.queue_bind(q, x, w)
        args, why = live_args()
        self.assertIsNone(why)
        rc, out, err = warrenctl(args + ["consistent_hash_exchange_ring_state", x])
        self.assertEqual((rc, err), (0, ""))
        order = [0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9]  # sorted as strings
        owner = [0, 0, 0, 1] + [2] * 8
        self.assertEqual(out, "Inspecting consistent hashing ring state for exchange %s in virtual host "
                              "'/'...\n" % x + "".join("Ring index: %d, queue: '%s'\n" % (b, qs[owner[b]])
                                                     for b in order) + "\n")
        rc, out, err = warrenctl(args + ["consistent_hash_exchange_ring_state", "--formatter", "json", x])
        self.assertEqual(json.loads(out)["buckets"], {str(b): qs[owner[b]] for b in range(12)})
        rc, out, err = warrenctl(args + ["-q", "consistent_hash_exchange_ring_state", "amq.direct"])
        self.assertEqual((rc, err), (65, "Error:\nExchange does not exist or is of a different type\n"))

    def test_definitions_import_builds_the_ring_in_file_order(self):
        x = h.unique("x.chdefs")
        self.track_exchange(x)
        qs = [self.track_queue(h.unique("q.chdefs")) for _ in range(3)]
        defs = {
            "exchanges": [{"name": x, "vhost": "/", "type": "x-consistent-hash", "durable": True,
                           "auto_delete": False, "internal": False, "arguments": {"hash-header": "h"}}],
            "queues": [{"name": q, "vhost": "/", "durable": True, "auto_delete": False, "arguments": {}}
                       for q in qs],
            # as RabbitMQ exports them: sorted by key, then destination
            "bindings": [{"source": x, "vhost": "/", "destination": q, "destination_type": "queue",
                          "routing_key": k, "arguments": {}} for q, k in ((qs[2], "1"), (qs[0], "10"),
                                                                         (qs[1], "2"))],
        }
        self.assertIn(request("POST", "/api/definitions", defs)[0], (200, 201, 204))
        status, ring = request("GET", "/api/exchanges/%2F/" + enc(x) + "/ring")
        self.assertEqual([(r["destination"], r["weight"]) for r in ring["ring"]],
                         [(qs[2], 1), (qs[0], 10), (qs[1], 2)])
        status, one = request("GET", "/api/exchanges/%2F/" + enc(x))
        self.assertEqual((one["type"], one["arguments"]), ("x-consistent-hash", {"hash-header": "h"}))

    def test_types_in_overview_and_definitions(self):
        status, ov = request("GET", "/api/overview")
        names = [t["name"] for t in ov["exchange_types"]]
        for t in ("x-consistent-hash", "x-modulus-hash", "x-local-random"):
            self.assertIn(t, names)
        name = h.unique("x.defs")
        self.track_exchange(name)
        defs = {"exchanges": [{"name": name, "vhost": "/", "type": "x-modulus-hash", "durable": True,
                               "auto_delete": False, "internal": False, "arguments": {}}]}
        self.assertIn(request("POST", "/api/definitions", defs)[0], (200, 201, 204))
        self.ch.exchange_declare(name, "x-modulus-hash", durable=True)  # equivalent: no error
        status, out = request("GET", "/api/definitions")
        self.assertIn({"name": name, "type": "x-modulus-hash"},
                      [{"name": e["name"], "type": e["type"]} for e in out["exchanges"]])


class Restart(h.DataDirTest):
    def test_ring_survives_restart(self):
        conn, ch = self.start()
        ch.exchange_declare("chx", "x-consistent-hash", durable=True)
        for q, w in (("cq2", "3"), ("cq1", "1"), ("cq3", "2")):
            ch.queue_declare(q, durable=True)
            ch.queue_bind(q, "chx", w)
        before = self.ring()
        conn, ch = self.restart(conn)
        self.assertEqual(self.ring(), before)
        self.assertEqual([r["destination"] for r in before["ring"]], ["cq2", "cq1", "cq3"])
        conn.close()

    def ring(self):
        status, ring = request("GET", "/api/exchanges/%2F/chx/ring",
                               mgmt=("127.0.0.1", self.proc.mgmt_port))
        self.assertEqual(status, 200)
        return ring


class ModulusHash(XTypesTest):
    def test_keys_by_sorted_destination(self):
        x = self.exchange("x-modulus-hash")
        names = sorted(h.unique("mq") for _ in range(3))
        for n in names:
            self.queue(n)
        for n in reversed(names):  # bound out of order, any keys
            self.ch.queue_bind(n, x, "key-" + n)
        got = self.where(names, ["k%d" % i for i in range(40)], x)
        self.assertEqual(got, MODULUS_K40)
        # the CC and BCC keys are hashed with the routing key, and pick once:
        # phash2([<<"k1">>, <<"a">>, <<"b">>, <<"c">>]) = 120149480
        got = self.where(names, ["k1"], x, lambda i: pika.BasicProperties(
            headers={"CC": ["a", "b"], "BCC": ["c"]}))
        self.assertEqual(got, str(120149480 % 3))


class LocalRandom(XTypesTest):
    def test_spread_over_bound_queues(self):
        x = self.exchange("x-local-random")
        qs = self.queues(3)
        for q in qs:
            self.ch.queue_bind(q, x, "")
        for i in range(600):
            self.publish(x, "any")
        h.sync(self.ch)
        counts = [self.count(q) for q in qs]
        self.assertEqual(sum(counts), 600)
        for c in counts:
            self.assertGreater(c, 120, counts)  # 200 expected; 120 is > 6 sd away

    def test_bind_restrictions(self):
        x = self.exchange("x-local-random")
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_bind, q, x, "rk")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - Non empty binding 'rk' key not permitted")
        ch = self.conn.channel()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.exchange_bind, "amq.fanout", x, "")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - Destination not found")
        ch = self.conn.channel()
        qq = self.queue(durable=True, arguments={"x-queue-type": "quorum"}, ch=ch)
        e = self.assert_channel_error(h.PRECONDITION_FAILED, ch.queue_bind, qq, x, "")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - Queue type rabbit_quorum_queue not "
                                       "valid for this exchange type")
