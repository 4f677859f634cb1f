"""Stream connections, publishers and consumers in the management API, as
RabbitMQ 3.10.8's rabbitmq_stream_management shows them (the fields below
are those it answered for the same client, checked live)."""
import base64
import json
import struct
import unittest
import urllib.error
import urllib.parse
import urllib.request

import harness as h
import streamraw as s
from test_stream_conn import stream_port


def api(method, path, body=None):
    host, port = h.mgmt_address()
    req = urllib.request.Request("http://%s:%d%s" % (host, port, path), method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"authorization": "Basic " +
                                          base64.b64encode(b"guest:guest").decode(),
                                          "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        body = r.read()
        return r.status, json.loads(body) if body else None


CONNECTION_KEYS = {"auth_mechanism", "channel_max", "client_properties", "connected_at",
                   "frame_max", "host", "name", "node", "peer_cert_issuer", "peer_cert_subject",
                   "peer_cert_validity", "peer_host", "peer_port", "port", "protocol", "ssl",
                   "ssl_cipher", "ssl_hash", "ssl_key_exchange", "ssl_protocol", "timeout",
                   "user", "user_provided_name", "user_who_performed_action", "vhost"}


class StreamManagement(unittest.TestCase):
    def setUp(self):
        self.c = s.Client(stream_port())
        self.addCleanup(self.c.close_socket)
        self.c.peer_properties([(b"product", b"streamraw"), (b"connection_name", b"mgmt-test")])
        self.c.sasl_handshake()
        self.c.authenticate()
        self.c.tune()
        self.assertEqual(self.c.open()[0], s.OK)
        self.stream = h.unique("sm")
        self.assertEqual(self.c.create(self.stream), s.OK)
        self.addCleanup(self.drop)

    def drop(self):
        c = s.Client(stream_port())
        c.handshake()
        c.delete(self.stream)
        c.close_socket()

    def mine(self, path):
        status, items = api("GET", path)
        self.assertEqual(status, 200)
        return [i for i in items if i.get("user_provided_name") == "mgmt-test" or
                i.get("queue", {}).get("name") == self.stream]

    def test_connections(self):
        conns = self.mine("/api/stream/connections")
        self.assertEqual(len(conns), 1)
        conn = conns[0]
        self.assertEqual(set(conn), CONNECTION_KEYS)
        self.assertEqual((conn["protocol"], conn["user"], conn["vhost"], conn["ssl"]),
                         ("stream", "guest", "/", False))
        self.assertEqual(conn["client_properties"], {"product": "streamraw",
                                                     "connection_name": "mgmt-test"})
        self.assertEqual(conn["port"], stream_port())
        self.assertIsNone(conn["ssl_protocol"])
        self.assertEqual(len(self.mine("/api/stream/connections/%2F")), 1)
        name = urllib.parse.quote(conn["name"], safe="")
        status, one = api("GET", "/api/stream/connections/%2F/" + name)
        self.assertEqual((status, one["name"], one["ssl_protocol"]), (200, conn["name"], ""))
        with self.assertRaises(urllib.error.HTTPError) as cm:
            api("GET", "/api/stream/connections/%2F/nope")
        self.assertEqual(cm.exception.code, 404)

    def test_listed_with_the_amqp_connections(self):
        # RabbitMQ 3.10.8 lists stream connections in /api/connections too,
        # counts them in the overview and lists the stream listener
        conns = self.mine("/api/connections")
        self.assertEqual([c["protocol"] for c in conns], ["stream"])
        self.assertEqual(set(conns[0]), CONNECTION_KEYS)
        self.assertEqual(len(self.mine("/api/vhosts/%2F/connections")), 1)
        name = urllib.parse.quote(conns[0]["name"], safe="")
        status, one = api("GET", "/api/connections/" + name)
        self.assertEqual((status, one["protocol"]), (200, "stream"))
        status, over = api("GET", "/api/overview")
        self.assertGreaterEqual(over["object_totals"]["connections"], 1)
        self.assertIn(("stream", stream_port()),
                      {(l["protocol"], l["port"]) for l in over["listeners"]})
        status, _ = api("DELETE", "/api/connections/" + name)
        self.assertEqual(status, 204)
        self.assertTrue(self.c.closed())

    def test_publishers_and_consumers(self):
        self.c.declare_publisher(1, self.stream, b"pref")
        self.c.publish(1, [(1, b"x"), (2, b"y")])
        self.c.confirms(2)
        self.c.subscribe(2, self.stream, s.OFFSET_FIRST, credit=10, props=[(b"name", b"cname")])
        self.c.deliver()
        pubs = self.mine("/api/stream/publishers")
        self.assertEqual(len(pubs), 1)
        p = pubs[0]
        self.assertEqual({k: p[k] for k in ("confirmed", "errored", "published", "publisher_id",
                                            "queue", "reference")},
                         {"confirmed": 2, "errored": 0, "published": 2, "publisher_id": 1,
                          "queue": {"name": self.stream, "vhost": "/"}, "reference": "pref"})
        self.assertEqual(set(p["connection_details"]), {"name", "node", "peer_host", "peer_port", "user"})
        cons = self.mine("/api/stream/consumers/%2F")
        self.assertEqual(len(cons), 1)
        cm = cons[0]
        self.assertEqual({k: cm[k] for k in ("consumed", "credits", "offset", "offset_lag",
                                             "properties", "queue", "subscription_id")},
                         {"consumed": 2, "credits": 9, "offset": 1, "offset_lag": 0,
                          "properties": {"name": "cname"},
                          "queue": {"name": self.stream, "vhost": "/"}, "subscription_id": 2})

    def test_delete_closes_the_connection(self):
        name = urllib.parse.quote(self.mine("/api/stream/connections")[0]["name"], safe="")
        status, _ = api("DELETE", "/api/stream/connections/%2F/" + name)
        self.assertEqual(status, 204)
        self.assertTrue(self.c.closed())  # no Close frame, as RabbitMQ 3.10.8


class StreamLifecycle(unittest.TestCase):
    def test_vhost_deletion(self):
        # RabbitMQ 3.10.8: MetadataUpdate for the vhost's streams, then the
        # socket closes (no Close frame)
        vh = h.unique("svh")
        api("PUT", "/api/vhosts/" + vh, {})
        api("PUT", "/api/permissions/%s/guest" % vh, {"configure": ".*", "write": ".*", "read": ".*"})
        c = s.Client(stream_port())
        self.addCleanup(c.close_socket)
        c.handshake(vhost=vh)
        self.assertEqual(c.create("in-vhost"), s.OK)
        self.assertEqual(c.subscribe(1, "in-vhost"), s.OK)
        api("DELETE", "/api/vhosts/" + vh)
        f = c.expect(s.METADATA_UPDATE)
        self.assertEqual(f.body, struct.pack(">H", s.STREAM_NOT_AVAILABLE) + s.s16("in-vhost"))
        self.assertTrue(c.closed())

    def test_user_deletion(self):
        user = h.unique("suser")
        api("PUT", "/api/users/" + user, {"password": "pw", "tags": ""})
        api("PUT", "/api/permissions/%2F/" + user, {"configure": ".*", "write": ".*", "read": ".*"})
        c = s.Client(stream_port())
        self.addCleanup(c.close_socket)
        c.handshake(user, "pw")
        api("DELETE", "/api/users/" + user)
        self.assertTrue(c.closed())  # no Close frame, as RabbitMQ 3.10.8


if __name__ == "__main__":
    unittest.main()
