"""Super streams over HTTP (issue 20): PUT /api/stream/super-streams/{vhost}/{name}
as RabbitMQ 4's rabbit_stream_super_stream_mgmt (its body keys and 400
texts), what it makes as RabbitMQ 3.13's rabbit_stream_manager makes it (a
durable direct exchange with x-super-stream, one stream per partition bound
with x-stream-partition-order, partitions with queue-leader-locator
balanced) and its refusals ({reason,"text"} as RabbitMQ prints them), and
Warren's DELETE and GET. RabbitMQ 3.10 has no super streams: these rules
are read from 3.13's and 4's source."""
import unittest

import pika

import harness as h
from test_mgmt import q, request
from test_mgmt_access import AccessTest

TAGS = ("", "management", "policymaker", "monitoring", "administrator")


class SuperStreamBase(AccessTest):
    def path(self, name, vh="/"):
        return "/api/stream/super-streams/%s/%s" % (q(vh), q(name))

    def create(self, body, name=None, vh="/", status=204, **kw):
        name = name or h.unique("super")
        r = request("PUT", self.path(name, vh), body, **kw)
        self.assertEqual(r.status, status, r.body[:300])
        if status == 204:
            self.addCleanup(request, "DELETE", self.path(name, vh))
        return name

    def bad(self, body, reason, name=None, vh="/", **kw):
        name = name or h.unique("super")
        self.error(request("PUT", self.path(name, vh), body, **kw), 400, "bad_request", reason)
        return name

    def assert_nothing(self, name, vh="/"):
        self.assertEqual(request("GET", "/api/exchanges/%s/%s" % (q(vh), q(name))).status, 404)
        left = [x["name"] for x in self.get("/api/queues/" + q(vh)) if x["name"].startswith(name + "-")]
        self.assertEqual(left, [])


class SuperStreamTest(SuperStreamBase):
    def test_partitions_make_exchange_streams_and_bindings(self):
        name = self.create({"partitions": 3, "arguments": {"max-age": "7D", "max-length-bytes": 1000000,
                                                           "unknown-key": "ignored"}})
        ex = self.get("/api/exchanges/%2F/" + q(name))
        self.assertEqual((ex["type"], ex["durable"], ex["auto_delete"], ex["internal"], ex["arguments"]),
                         ("direct", True, False, False, {"x-super-stream": True}))
        binds = self.get("/api/exchanges/%2F/" + q(name) + "/bindings/source")
        self.assertEqual(sorted((b["destination"], b["routing_key"], b["arguments"]["x-stream-partition-order"],
                                 b["destination_type"]) for b in binds),
                         [("%s-%d" % (name, i), str(i), i, "queue") for i in range(3)])
        for i in range(3):
            s = self.get("/api/queues/%2F/" + q("%s-%d" % (name, i)))
            self.assertEqual((s["type"], s["durable"]), ("stream", True))
            self.assertEqual(s["arguments"], {"x-queue-type": "stream", "x-max-age": "7D",
                                              "x-max-length-bytes": 1000000,
                                              "x-queue-leader-locator": "balanced"})
        # it routes by partition key
        c = h.connect()
        self._conns.append(c)
        ch = c.channel()
        ch.confirm_delivery()
        ch.basic_publish(name, "1", b"to one", mandatory=True)
        self.assertEqual(self.get("/api/queues/%2F/" + q(name + "-1"))["messages"], 1)
        self.assertEqual(self.get("/api/queues/%2F/" + q(name + "-0"))["messages"], 0)
        listed = self.get(self.path(name))
        self.assertEqual(listed, {"name": name, "vhost": "/", "arguments": {"x-super-stream": True},
                                  "partitions": ["%s-%d" % (name, i) for i in range(3)],
                                  "binding_keys": ["0", "1", "2"]})
        self.assertIn(name, [x["name"] for x in self.get("/api/stream/super-streams")])
        self.assertIn(name, [x["name"] for x in self.get("/api/stream/super-streams/%2F")])

    def test_binding_keys_string_and_list(self):
        name = self.create({"binding-keys": " amer, emea,,apac "})
        self.assertEqual(self.get(self.path(name))["partitions"], [name + "-amer", name + "-emea", name + "-apac"])
        self.assertEqual(self.get(self.path(name))["binding_keys"], ["amer", "emea", "apac"])
        other = self.create({"binding_keys": ["b", "a"], "arguments": {"stream-max-segment-size-bytes": "500000"}})
        got = self.get(self.path(other))
        self.assertEqual((got["partitions"], got["binding_keys"]), ([other + "-b", other + "-a"], ["b", "a"]))
        self.assertEqual(self.get("/api/queues/%2F/" + q(other + "-a"))["arguments"]
                         ["x-stream-max-segment-size-bytes"], 500000)

    def test_delete(self):
        name = self.create({"partitions": 2})
        self.ok("DELETE", self.path(name), status=204)
        self.assert_nothing(name)
        self.error(request("DELETE", self.path(name)), 404, "Object Not Found", "Not Found")
        self.error(request("GET", self.path(name)), 404, "Object Not Found", "Not Found")
        plain = h.unique("plain-x")
        self.ok("PUT", "/api/exchanges/%2F/" + q(plain), {"type": "direct"}, status=201)
        self.addCleanup(request, "DELETE", "/api/exchanges/%2F/" + q(plain))
        self.error(request("DELETE", self.path(plain)), 404, "Object Not Found", "Not Found")

    def test_body_refusals(self):
        for body, reason in (({}, "Must specify partitions or binding keys"),
                             ({"partitions": 2, "binding-keys": "a"}, "Specify partitions or binding keys, not both"),
                             ({"partitions": "x"}, "The partitions must be a number"),
                             ({"partitions": 0}, "The partition number must be greater than 0"),
                             ({"partitions": 1001}, "The partition number must not exceed 1000"),
                             ({"binding-keys": " , "}, "The number of binding keys must be greater than 0"),
                             ({"binding-keys": ",".join("k%d" % i for i in range(1001))},
                              "The number of binding keys must not exceed 1000")):
            self.assert_nothing(self.bad(body, reason))
        self.assertEqual(request("PUT", self.path("x"), b"{bad", headers={}).status, 400)

    def test_manager_refusals_change_nothing(self):
        name = self.create({"partitions": 1})
        self.bad({"partitions": 2}, '{reference_already_exists,"there is already an exchange named %s"}' % name,
                 name=name)
        taken = h.unique("super")
        self.ok("PUT", "/api/queues/%2F/" + q(taken + "-1"), {"durable": True}, status=201)
        self.addCleanup(request, "DELETE", "/api/queues/%2F/" + q(taken + "-1"))
        self.bad({"partitions": 3}, '{reference_already_exists,"there is already a queue named %s-1"}' % taken,
                 name=taken)
        self.assertEqual(request("GET", "/api/exchanges/%2F/" + q(taken)).status, 404)
        self.bad({"partitions": 2}, '{validation_failed,"amq.x-0amq.x-1 is not a correct partition names"}',
                 name="amq.x")
        dup = h.unique("super")
        self.assert_nothing(self.bad({"binding-keys": "a,b,a"},
                                     '{validation_failed,"Duplicate partition names found %s-a%s-b%s-a"}'
                                     % (dup, dup, dup), name=dup))
        for args in ({"max-length-bytes": "lots"}, {"initial-cluster-size": "0"},
                     {"queue-leader-locator": "random"}, {"stream-filter-size-bytes": "8"}, {"max-age": "10x"}):
            self.assert_nothing(self.bad({"partitions": 2, "arguments": args}, "validation_failed"))

    def test_queue_limit(self):
        vh = self.vhost()
        self.grant(vh, "guest")
        self.ok("PUT", "/api/vhost-limits/%s/max-queues" % q(vh), {"value": 2}, status=204)
        self.bad({"partitions": 3}, '{validation_failed,"Cannot declare super stream <<\\"s\\">> with 3 '
                 'partition(s) because queue limit 2 in vhost \'<<\\"%s\\">>\' is reached"}' % vh, name="s", vh=vh)
        self.create({"partitions": 2}, name="s", vh=vh)


class SuperStreamAccessTest(SuperStreamBase):
    def test_permissions_as_the_stream_manager(self):
        vh = self.vhost()
        self.grant(vh, "guest")
        name = "orders"
        # configure on the exchange alone is not enough: the streams too
        for perms in ({"configure": "^orders$"}, {"read": "^$"}, {"write": "^orders$"}):
            u = self.user("management")
            self.grant(vh, u, **perms)
            self.error(request("PUT", self.path(name, vh), {"partitions": 2}, **self.as_user(u)), 401,
                       "not_authorised", "Access refused.")
            self.assert_nothing(name, vh)
        ok = self.user("management")
        self.grant(vh, ok, configure="^orders", read="^orders$", write="^orders-")
        self.create({"partitions": 2}, name=name, vh=vh, **self.as_user(ok))
        reader = self.user("management")
        self.grant(vh, reader, configure="^$")
        self.assertEqual([x["name"] for x in self.get("/api/stream/super-streams/" + q(vh), **self.as_user(reader))],
                         [name])
        self.error(request("DELETE", self.path(name, vh), **self.as_user(reader)), 401, "not_authorised",
                   "Access refused.")
        outsider = self.user("management")
        self.error(request("PUT", self.path("o2", vh), {"partitions": 1}, **self.as_user(outsider)), 401,
                   "not_authorised", "User not authorised to access virtual host")
        self.assertEqual(self.get("/api/stream/super-streams", **self.as_user(outsider)), [])
        self.error(request("PUT", self.path("x", h.unique("novh")), {"partitions": 1}), 404, "Object Not Found")
        self.ok("DELETE", self.path(name, vh), **self.as_user(ok), status=204)

    def test_every_tag(self):
        for tags in TAGS:
            u = self.user(tags)
            self.grant("/", u)
            name = h.unique("super-tag")
            as_u = self.as_user(u)
            for method, path, body in (("GET", "/api/stream/super-streams", None),
                                       ("GET", "/api/stream/super-streams/%2F", None),
                                       ("PUT", self.path(name), {"partitions": 1}),
                                       ("GET", self.path(name), None),
                                       ("DELETE", self.path(name), None)):
                r = request(method, path, body, **as_u)
                if tags:
                    self.assertEqual(r.status, 204 if method != "GET" else 200, (tags, method, path, r.body[:200]))
                else:
                    self.error(r, 401, "not_authorised", "Not management user")
            self.assertEqual(request("POST", self.path(name), {}, **as_u).status, 405)


if __name__ == "__main__":
    unittest.main()
