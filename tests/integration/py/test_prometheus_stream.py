"""Prometheus for streams (issue 20): RabbitMQ's per-queue families for a
stream queue, as RabbitMQ 3.10.8 writes them
(tests/reference/rabbitmq-3.10/stream/prometheus_per_object_stream.txt:
ready = messages = its records, unacked 0, no message byte families), and
Warren's warren_stream_* figures of its log. promtool must accept every
endpoint with streams empty, written and read."""
import os
import subprocess
import time
import unittest

import pika

import harness as h
from test_prometheus import get, metrics, parse, promtool, value

REF = os.path.join(h.REPO, "tests", "reference", "rabbitmq-3.10", "stream",
                   "prometheus_per_object_stream.txt")
ERLANG_ONLY = {"rabbitmq_queue_process_reductions_total"}
WARREN_STREAM = ["warren_stream_segments", "warren_stream_segment_bytes", "warren_stream_chunks",
                 "warren_stream_first_offset", "warren_stream_last_offset",
                 "warren_stream_committed_offset", "warren_stream_consumer_lag_max"]


class PrometheusStreamTest(h.BrokerTest):
    def stream(self, n):
        name = h.unique("prom-stream")
        ch = self.conn.channel()
        ch.queue_declare(name, durable=True, arguments={"x-queue-type": "stream"})
        self.track_queue(name)
        ch.confirm_delivery()
        for i in range(n):
            ch.basic_publish("", name, b"m%d" % i)
        return name

    def reader(self, name, prefetch):
        c = self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=prefetch)
        got = []
        ch.basic_consume(name, lambda ch_, m, p, b: got.append(b), arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + 5
        while len(got) < prefetch and time.monotonic() < deadline:
            c.process_data_events(time_limit=0.1)
        return got

    def wait_metrics(self, path, name, family, want):
        deadline = time.monotonic() + 10
        while True:
            fams = metrics(path)
            if value(fams, family, queue=name) == want or time.monotonic() > deadline:
                return fams
            time.sleep(0.2)

    def test_per_object_families_of_a_stream(self):
        name = self.stream(7)
        got = self.reader(name, 3)
        self.assertEqual(len(got), 3)
        fams = self.wait_metrics("/metrics/per-object", name, "rabbitmq_queue_consumers", 1)
        with open(REF, encoding="utf-8") as f:
            ref = parse(f.read())
        mine = {n for n, fam in fams.items() if any(ls.get("queue") == name for _, ls, _ in fam["samples"])}
        self.assertEqual(set(ref) - ERLANG_ONLY - mine, set(), "RabbitMQ's families for a stream")
        for n in set(ref) - ERLANG_ONLY:
            self.assertEqual((fams[n]["type"], fams[n]["help"]), (ref[n]["type"], ref[n]["help"]), n)
        self.assertEqual((value(fams, "rabbitmq_queue_messages_ready", queue=name),
                          value(fams, "rabbitmq_queue_messages_unacked", queue=name),
                          value(fams, "rabbitmq_queue_messages", queue=name)), (7, 0, 7))
        for classic in ("rabbitmq_queue_messages_bytes", "warren_queue_oldest_ready_age_seconds",
                        "warren_queue_messages_by_deliveries"):
            self.assertNotIn(classic, mine)
        self.assertEqual((value(fams, "warren_stream_first_offset", queue=name),
                          value(fams, "warren_stream_last_offset", queue=name),
                          value(fams, "warren_stream_consumer_lag_max", queue=name)), (0, 6, 4))
        self.assertLessEqual(value(fams, "warren_stream_committed_offset", queue=name), 6)
        self.assertGreaterEqual(value(fams, "warren_stream_segments", queue=name), 1)
        self.assertGreaterEqual(value(fams, "warren_stream_chunks", queue=name), 1)
        self.assertGreater(value(fams, "warren_stream_segment_bytes", queue=name), 7 * 2)
        # a classic queue has no stream samples
        classic = self.queue()
        fams = metrics("/metrics/per-object")
        for n in WARREN_STREAM:
            self.assertIsNone(value(fams, n, queue=classic), n)
            self.assertEqual(fams[n]["type"], "gauge", n)
        self.assertIsNotNone(value(fams, "rabbitmq_queue_messages_bytes", queue=classic))

    def test_empty_stream_has_no_offsets(self):
        name = self.stream(0)
        fams = metrics("/metrics/per-object")
        for n in ("warren_stream_first_offset", "warren_stream_last_offset", "warren_stream_committed_offset"):
            self.assertIsNone(value(fams, n, queue=name), n)
        self.assertEqual(value(fams, "rabbitmq_queue_messages", queue=name), 0)
        self.assertGreaterEqual(value(fams, "warren_stream_segments", queue=name), 0)

    def test_aggregated(self):
        name = self.stream(5)
        self.reader(name, 2)
        fams = metrics("/metrics")
        self.assertGreaterEqual(value(fams, "warren_stream_consumer_lag_max"), 3)
        self.assertGreaterEqual(value(fams, "warren_stream_segments"), 1)
        self.assertGreaterEqual(value(fams, "rabbitmq_queue_messages_ready"), 5)
        for n in ("warren_stream_first_offset", "warren_stream_last_offset", "warren_stream_committed_offset"):
            self.assertNotIn(n, fams, "an offset summed over streams means nothing")

    def test_promtool_accepts_streams(self):
        tool = promtool()
        self.stream(0)
        self.reader(self.stream(4), 2)
        for p in ("/metrics", "/metrics/per-object", "/metrics/detailed?family=queue_coarse_metrics"
                  "&family=queue_metrics"):
            status, _, body = get(p)
            self.assertEqual(status, 200, p)
            r = subprocess.run([tool, "check", "metrics"], input=body.encode(), capture_output=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout + r.stderr), (0, b""), p)


if __name__ == "__main__":
    unittest.main()
