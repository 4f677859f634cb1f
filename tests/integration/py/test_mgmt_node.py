"""Node operations of the management API: GET /api/feature-flags, the
overview's listeners (the Prometheus one among them), and Warren's own
PUT /api/nodes/{node}/vm-memory-high-watermark (what warrenctl
set_vm_memory_high_watermark calls).

The feature flags and listeners were checked against RabbitMQ 3.10.8
(WARREN_TEST_TARGET=127.0.0.1:5672): Warren lists the flags whose features
it has, with RabbitMQ's words. The watermark endpoint is Warren's: its
tests start their own broker, since they change the node's alarm.
"""
import http.client
import time
import unittest

import harness as h
from test_mgmt import request
from test_mgmt_access import AccessTest

FLAG_KEYS = ["name", "desc", "doc_url", "state", "stability", "provided_by"]
# (name, desc, doc_url, provided_by) as RabbitMQ 3.10.8 lists them
WARREN_FLAGS = [
    ("drop_unroutable_metric", "Count unroutable publishes to be dropped in stats", "", "rabbitmq_management_agent"),
    ("empty_basic_get_metric", "Count AMQP `basic.get` on empty queues in stats", "", "rabbitmq_management_agent"),
    ("implicit_default_bindings", "Default bindings are now implicit, instead of being stored in the database", "",
     "rabbit"),
    ("quorum_queue", "Support queues of type `quorum`", "https://www.rabbitmq.com/quorum-queues.html", "rabbit"),
    ("virtual_host_metadata", "Virtual host metadata (description, tags, etc)", "", "rabbit"),
]


class FeatureFlagsTest(AccessTest):
    def test_flags_with_rabbitmq_words(self):
        flags = self.get("/api/feature-flags")
        self.assertTrue(all(list(f) == FLAG_KEYS for f in flags), flags)
        by_name = {f["name"]: f for f in flags}
        for name, desc, doc_url, provided_by in WARREN_FLAGS:
            self.assertEqual(by_name[name], {"name": name, "desc": desc, "doc_url": doc_url, "state": "enabled",
                                             "stability": "stable", "provided_by": provided_by})
        if h.TARGET is None:
            self.assertEqual(sorted(by_name), [f[0] for f in WARREN_FLAGS], "only what Warren has")

    def test_administrators_only(self):
        for tags in ("management", "monitoring", "policymaker"):
            u = self.user(tags)
            self.error(request("GET", "/api/feature-flags", **self.as_user(u)), 401, "not_authorised",
                       "Not administrator user")


class ListenersTest(AccessTest):
    def test_overview_lists_the_prometheus_listener(self):
        host, port = h.prometheus_address()
        listeners = self.get("/api/overview")["listeners"]
        prom = [l for l in listeners if l["protocol"] == "http/prometheus"]
        self.assertEqual([l["port"] for l in prom], [port], listeners)
        self.assertEqual(sorted(prom[0]), ["ip_address", "node", "port", "protocol", "socket_opts"]
                         if h.TARGET else ["ip_address", "node", "port", "protocol"])


@h.needs_own_broker
class WatermarkTest(unittest.TestCase):
    """Warren's own endpoint, on a private broker (the alarm is node-wide)."""

    def setUp(self):
        self.proc = h.WarrenProcess()
        self.addr = self.proc.start()
        self.addCleanup(self.stop)

    def stop(self):
        self.assertEqual(self.proc.stop(), 0, self.proc.log_tail())

    def call(self, method, path, body=None):
        return request(method, path, body, conn=http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port,
                                                                          timeout=10))

    def node(self):
        return self.call("GET", "/api/nodes").json()[0]

    def put(self, body, node=None):
        return self.call("PUT", "/api/nodes/%s/vm-memory-high-watermark" % (node or self.node()["name"]), body)

    def wait_alarm(self, on):
        deadline = time.monotonic() + 5
        while self.node()["mem_alarm"] != on and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.node()["mem_alarm"]

    def test_absolute_then_relative(self):
        c = h.connect(self.addr)
        self.addCleanup(lambda: c.is_open and c.close())
        ch = c.channel()
        ch.queue_declare("wm.q")
        ch.basic_publish("", "wm.q", b"x" * 1000)
        ch.queue_declare("wm.q", passive=True)
        self.assertEqual(self.put({"absolute": 100}).status, 204)
        self.assertEqual(self.node()["mem_limit"], 100)
        self.assertTrue(self.wait_alarm(True), "1000 bytes of messages are over a 100-byte watermark")
        env = self.call("GET", "/api/environment").json()
        self.assertEqual(env["vm_memory_high_watermark.absolute"], "100")
        self.assertEqual(self.put({"relative": 0.5}).status, 204)
        self.assertGreater(self.node()["mem_limit"], 1 << 20)
        self.assertFalse(self.wait_alarm(False))
        self.assertEqual(self.call("GET", "/api/environment").json()["vm_memory_high_watermark.relative"], "0.5")

    def test_refused(self):
        before = self.node()["mem_limit"]
        for body, reason in (({}, "give one of relative (a fraction of the RAM) or absolute (bytes)"),
                             ({"relative": 0.4, "absolute": 10}, None),
                             ({"relative": 1.5}, "The threshold should be a fraction between 0.0 and 1.0"),
                             ({"relative": "0.4"}, None),
                             ({"absolute": 0}, "The threshold should be a whole number of bytes above 0"),
                             ({"absolute": 1.5}, None)):
            r = self.put(body)
            self.assertEqual(r.status, 400, body)
            if reason:
                self.assertEqual(r.json(), {"error": "bad_request", "reason": reason})
        self.assertEqual(self.put({"relative": 0.4}, node="rabbit@nowhere").status, 404)
        self.assertEqual(self.node()["mem_limit"], before, "nothing changed")
