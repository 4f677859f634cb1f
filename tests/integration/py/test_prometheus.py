"""Prometheus: GET /metrics and /metrics/per-object on prometheus.tcp.port.

Names, types and HELP lines are checked against RabbitMQ 3.10.8's capture
(tests/reference/rabbitmq-3.10/prometheus_metrics_sample.txt); label keys as
RabbitMQ's live /metrics/per-object shows them. The warren_ families are
Warren's own (the queue health of the queue JSON). Also runs against
RabbitMQ (WARREN_TEST_TARGET=127.0.0.1:5672 WARREN_TEST_TIMEOUT=60), where
the warren_ checks are skipped.
"""
import http.client
import os
import re
import time
import unittest

import harness as h

WARREN = h.TARGET is None
WAIT = 12.0 if WARREN else 40.0  # RabbitMQ's metrics lag its 5 s collection
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def unescape(v):
    return re.sub(r'\\(.)', lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse(text):
    """{family: {"type", "help", "samples": [(name, {label: value}, float)]}};
    fails on any line that is not Prometheus text format."""
    fams = {}
    for line in text.splitlines():
        if line.startswith("# TYPE ") or line.startswith("# HELP "):
            _, kind, name, rest = line.split(" ", 3)
            fams.setdefault(name, {"samples": []})[kind.lower()] = rest
            continue
        if not line or line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise AssertionError("not a sample line: %r" % line)
        labels = {k: unescape(v) for k, v in LABEL_RE.findall(m.group(2) or "")}
        fams.setdefault(m.group(1), {"samples": []})["samples"].append((m.group(1), labels, float(m.group(3))))
    return fams


def get(path):
    host, port = h.prometheus_address()
    c = http.client.HTTPConnection(host, port, timeout=20)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8")
    finally:
        c.close()


def metrics(path="/metrics"):
    status, headers, body = get(path)
    if status != 200:
        raise AssertionError("GET %s: %d" % (path, status))
    return parse(body)


def value(fams, name, **labels):
    """The sample of `name` whose labels include `labels` (None if none)."""
    for _, ls, v in fams.get(name, {"samples": []})["samples"]:
        if all(ls.get(k) == want for k, want in labels.items()):
            return v
    return None


def reference():
    for base in (os.environ.get("RABBITMQ_REFERENCE"),
                 os.path.join(h.REPO, "tests", "reference", "rabbitmq-3.10")):
        p = base and os.path.join(base, "prometheus_metrics_sample.txt")
        if p and os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                return parse(f.read())
    raise AssertionError("reference capture not found in tests/reference/rabbitmq-3.10")


def poll(fn, ok, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


class Prometheus(h.BrokerTest):
    def test_format_and_content_type(self):
        status, headers, body = get("/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"].replace(" ", ""), "text/plain;version=0.0.4")
        for name, fam in parse(body).items():
            if name.startswith(("rabbitmq_", "warren_")):
                self.assertIn(fam.get("type"), ("counter", "gauge", "untyped"), name)
                self.assertIn("help", fam, name)

    def test_names_types_help_as_rabbitmq(self):
        ref = reference()
        for path in ("/metrics", "/metrics/per-object"):
            fams = metrics(path)
            shared = [n for n in fams if n in ref]
            self.assertGreaterEqual(len(shared), 60, path)
            for n in shared:
                self.assertEqual((fams[n].get("type"), fams[n].get("help")),
                                 (ref[n]["type"], ref[n]["help"]), "%s on %s" % (n, path))

    def test_values_move_after_publishing(self):
        before = metrics()
        self.conn.channel()
        q = self.queue()
        for _ in range(5):
            self.publish("", q, b"hello")
        self.publish("", h.unique("nowhere"), b"dropped")
        self.ch.basic_get(q, auto_ack=False)

        def moved(f):
            def d(name, **labels):
                return (value(f, name, **labels) or 0) - (value(before, name, **labels) or 0)
            return (d("rabbitmq_global_messages_received_total", protocol="amqp091") >= 6 and
                    d("rabbitmq_global_messages_routed_total", protocol="amqp091") >= 5 and
                    d("rabbitmq_global_messages_unroutable_dropped_total", protocol="amqp091") >= 1 and
                    d("rabbitmq_global_messages_delivered_get_manual_ack_total", protocol="amqp091") >= 1 and
                    d("rabbitmq_queues_declared_total") >= 1 and d("rabbitmq_queues_created_total") >= 1 and
                    d("rabbitmq_channels_opened_total") >= 1 and value(f, "rabbitmq_queue_messages") >= 5)
        after = poll(metrics, moved)
        self.assertTrue(moved(after), "counters did not move: %s" % {
            n: (value(before, n), value(after, n)) for n in ("rabbitmq_global_messages_received_total",
                                                             "rabbitmq_queues_declared_total")})

    def test_per_object_queue(self):
        q = self.queue()
        for _ in range(3):
            self.publish("", q, b"m")
        self.ch.basic_get(q, auto_ack=False)
        want = {"rabbitmq_queue_messages": 3, "rabbitmq_queue_messages_ready": 2,
                "rabbitmq_queue_messages_unacked": 1}

        def sample():
            f = metrics("/metrics/per-object")
            return {n: value(f, n, vhost="/", queue=q) for n in want}
        self.assertEqual(poll(sample, lambda s: s == want), want)

    @unittest.skipUnless(WARREN, "RabbitMQ 3.10 writes label values unescaped (a quote ends them)")
    def test_per_object_escaped_names(self):
        odd = self.queue(h.unique('q."quoted"\\back\nslash'))
        self.publish("", odd, b"m")
        fams = poll(lambda: metrics("/metrics/per-object"),
                    lambda f: value(f, "rabbitmq_queue_messages", vhost="/", queue=odd) == 1)
        self.assertEqual(value(fams, "rabbitmq_queue_messages", vhost="/", queue=odd), 1)

    def test_aggregated_has_no_object_labels(self):
        self.queue()
        fams = metrics()
        for n in ("rabbitmq_queue_messages", "rabbitmq_channel_consumers", "rabbitmq_connection_channels"):
            self.assertEqual([s[1] for s in fams[n]["samples"]], [{}], n)

    def test_per_object_channels_and_connections(self):
        ch2 = self.conn.channel()
        ch2.basic_qos(prefetch_count=7)
        q = self.queue()
        ch2.basic_consume(q, lambda *a: None)
        fams = poll(lambda: metrics("/metrics/per-object"),
                    lambda f: 7 in [s[2] for s in f["rabbitmq_consumer_prefetch"]["samples"]] and
                    2 in [s[2] for s in f["rabbitmq_connection_channels"]["samples"]])
        chans = [s[1] for s in fams["rabbitmq_consumer_prefetch"]["samples"] if s[2] == 7]
        self.assertEqual(len(chans), 1)
        self.assertEqual(list(chans[0]), ["channel"])
        conns = fams["rabbitmq_connection_channels"]["samples"]
        self.assertTrue(all(list(s[1]) == ["channel"] for s in conns), conns)
        self.assertIn(2, [s[2] for s in conns])

    @unittest.skipUnless(WARREN, "Warren's queue health families")
    def test_warren_queue_health(self):
        q = self.queue()
        self.publish("", q, b"poison")
        self.publish("", q, b"fresh")
        m = self.ch.basic_get(q, auto_ack=False)
        self.ch.basic_nack(m[0].delivery_tag, requeue=True)
        time.sleep(0.3)
        self.ch.basic_get(q, auto_ack=False)  # delivered a second time, held
        fams = metrics("/metrics/per-object")
        self.assertGreaterEqual(value(fams, "warren_queue_oldest_ready_age_seconds", queue=q), 0.2)
        self.assertGreaterEqual(value(fams, "warren_queue_oldest_unacked_age_seconds", queue=q), 0.0)
        buckets = {s[1]["delivery_count"]: s[2] for s in fams["warren_queue_messages_by_delivery_count"]["samples"]
                   if s[1].get("queue") == q}
        self.assertEqual(buckets, {"0": 1, "1": 0, "2": 1, "3-4": 0, "5-9": 0, "10-19": 0, "20-49": 0, "50+": 0})
        agg = metrics()
        self.assertGreaterEqual(value(agg, "warren_queue_oldest_ready_age_seconds"), 0.2)
        self.assertGreaterEqual(value(agg, "warren_queue_messages_by_delivery_count", delivery_count="2"), 1)

    @unittest.skipUnless(WARREN, "Warren's slice size")
    def test_large_per_object_reply_is_chunked(self):
        ch = self.conn.channel()
        names = [self.queue(h.unique("many"), ch=ch) for _ in range(400)]
        status, headers, body = get("/metrics/per-object")
        self.assertEqual(status, 200)
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        fams = parse(body)
        listed = {s[1]["queue"] for s in fams["rabbitmq_queue_messages"]["samples"]}
        self.assertTrue(set(names) <= listed)
        self.assertIn("rabbitmq_global_messages_routed_total", fams)  # the scrape ran to its end

    def test_unknown_path_is_404(self):
        self.assertEqual(get("/no-such-path")[0], 404)


if __name__ == "__main__":
    unittest.main()
