"""Prometheus: GET /metrics, /metrics/per-object and /metrics/detailed on
prometheus.tcp.port.

Names, types and HELP lines are checked against RabbitMQ 3.10.8's capture
(tests/reference/rabbitmq-3.10/prometheus_metrics_sample.txt); label keys as
RabbitMQ's live /metrics/per-object and /metrics/detailed show them; the
global counters against what RabbitMQ 3.10.8 counted for the same sequence
of operations (test_global_counters_one_sequence). The warren_ families are
Warren's own (the queue health of the queue JSON). Also runs against
RabbitMQ (WARREN_TEST_TARGET=127.0.0.1:5672 WARREN_TEST_TIMEOUT=60), where
the warren_ checks and promtool's are skipped (RabbitMQ's own erlang_*
families fail `promtool check metrics`). Global counters are the broker's:
against a RabbitMQ that others use at the same time, their traffic shows in
the sequence's differences.
"""
import base64
import http.client
import json
import os
import re
import shutil
import subprocess
import time
import unittest
import urllib.parse

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


def promtool():
    """promtool from scripts/deps.sh (build/tools, unpacked from Debian's
    prometheus package) or PATH; the test fails without it."""
    local = os.path.join(h.REPO, "build", "tools", "usr", "bin", "promtool")
    found = local if os.access(local, os.X_OK) else shutil.which("promtool")
    if not found:
        raise AssertionError("promtool not found: run scripts/deps.sh (it unpacks promtool from "
                             "Debian's prometheus package into build/tools/usr/bin)")
    return found


def api(method, path, body=None):
    """The management HTTP API as guest; returns the status."""
    host, port = h.mgmt_address()
    c = http.client.HTTPConnection(host, port, timeout=20)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode(),
                           "Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def detailed(*families, vhosts=()):
    query = [("family", f) for f in families] + [("vhost", v) for v in vhosts]
    return metrics("/metrics/detailed?" + urllib.parse.urlencode(query))


# What Warren writes for each of RabbitMQ's /metrics/detailed families (a
# subset of RabbitMQ's: no Erlang, reductions, paging or disk families), by
# name after the rabbitmq_detailed_ / rabbitmq_cluster_ prefix.
DETAILED = {
    "connection_churn_metrics": ["connections_opened_total", "connections_closed_total",
                                 "channels_opened_total", "channels_closed_total",
                                 "queues_declared_total", "queues_created_total", "queues_deleted_total"],
    "node_coarse_metrics": ["process_open_fds", "process_open_tcp_sockets", "process_resident_memory_bytes",
                            "disk_space_available_bytes"],
    "node_metrics": ["process_max_fds", "resident_memory_limit_bytes", "disk_space_available_limit_bytes"],
    "auth_attempt_metrics": ["auth_attempts_total", "auth_attempts_succeeded_total", "auth_attempts_failed_total"],
    "queue_coarse_metrics": ["queue_messages_ready", "queue_messages_unacked", "queue_messages"],
    "queue_consumer_count": ["queue_consumers"],
    "queue_metrics": ["queue_consumers", "queue_process_memory_bytes", "queue_messages_bytes",
                      "queue_messages_ready_bytes", "queue_messages_unacked_bytes"],
    "channel_metrics": ["channel_consumers", "channel_messages_unacked", "channel_messages_unconfirmed",
                        "channel_messages_uncommitted", "channel_acks_uncommitted", "consumer_prefetch",
                        "channel_prefetch"],
    "channel_exchange_metrics": ["channel_messages_published_total", "channel_messages_confirmed_total",
                                 "channel_messages_unroutable_returned_total",
                                 "channel_messages_unroutable_dropped_total"],
    "channel_queue_metrics": ["channel_get_ack_total", "channel_get_total", "channel_messages_delivered_ack_total",
                              "channel_messages_delivered_total", "channel_messages_redelivered_total",
                              "channel_messages_acked_total", "channel_get_empty_total"],
    "connection_coarse_metrics": ["connection_incoming_bytes_total", "connection_outgoing_bytes_total"],
    "connection_metrics": ["connection_incoming_packets_total", "connection_outgoing_packets_total",
                           "connection_channels"],
    "channel_queue_exchange_metrics": ["queue_messages_published_total"],
    "vhost_status": ["vhost_status"],
    "exchange_bindings": ["exchange_bindings"],
    "exchange_names": ["exchange_name"],
}
CLUSTER = ("vhost_status", "exchange_bindings", "exchange_names")


def poll(fn, ok, timeout=WAIT):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if ok(got) or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


CLASSIC, QUORUM = "rabbit_classic_queue", "rabbit_quorum_queue"
ALO, AMO, OFF = "at_least_once", "at_most_once", "disabled"

# What RabbitMQ 3.10.8 counted for the sequence of
# test_global_counters_one_sequence (the same in three runs): ("name", labels, n).
SEQUENCE_COUNTS = [("rabbitmq_global_" + n, dict(protocol="amqp091"), v) for n, v in (
    ("messages_received_total", 29), ("messages_received_confirm_total", 25),
    ("messages_routed_total", 28),  # per queue: a message two queues took counts 2
    ("messages_unroutable_dropped_total", 1), ("messages_unroutable_returned_total", 2),
    ("messages_confirmed_total", 25))] + [
    ("rabbitmq_global_" + n, dict(protocol="amqp091", queue_type=t), v)
    for n, by_type in (("messages_acknowledged_total", (4, 1)),
                       ("messages_delivered_consume_auto_ack_total", (0, 2)),
                       ("messages_delivered_consume_manual_ack_total", (2, 0)),
                       ("messages_delivered_get_auto_ack_total", (1, 0)),
                       ("messages_delivered_get_manual_ack_total", (6, 11)),
                       ("messages_delivered_total", (9, 13)),
                       ("messages_get_empty_total", (1, 1)),
                       ("messages_redelivered_total", (1, 4)))
    for t, v in zip((CLASSIC, QUORUM), by_type)] + [
    ("rabbitmq_global_messages_dead_lettered_%s_total" % reason, dict(queue_type=t, dead_letter_strategy=how), v)
    for reason, counts in (
        ("confirmed", {(QUORUM, ALO): 3}),
        ("delivery_limit", {(QUORUM, ALO): 1, (QUORUM, AMO): 1, (QUORUM, OFF): 1}),
        ("expired", {(CLASSIC, AMO): 1, (CLASSIC, OFF): 1, (QUORUM, ALO): 1, (QUORUM, AMO): 1, (QUORUM, OFF): 0}),
        ("maxlen", {(CLASSIC, AMO): 1, (CLASSIC, OFF): 1, (QUORUM, AMO): 1, (QUORUM, OFF): 0}),
        ("rejected", {(CLASSIC, AMO): 1, (CLASSIC, OFF): 2, (QUORUM, ALO): 1, (QUORUM, AMO): 1, (QUORUM, OFF): 1}))
    for (t, how), v in counts.items()]


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
        buckets = {s[1]["delivery_count"]: s[2] for s in fams["warren_queue_messages_by_deliveries"]["samples"]
                   if s[1].get("queue") == q}
        self.assertEqual(buckets, {"0": 1, "1": 0, "2": 1, "3-4": 0, "5-9": 0, "10-19": 0, "20-49": 0, "50+": 0})
        agg = metrics()
        self.assertGreaterEqual(value(agg, "warren_queue_oldest_ready_age_seconds"), 0.2)
        self.assertGreaterEqual(value(agg, "warren_queue_messages_by_deliveries", delivery_count="2"), 1)

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

    def sequence(self):
        """The operations SEQUENCE_COUNTS counts: publishes to 0, 1 and 2
        queues (classic and quorum), mandatory and not, with and without
        confirms; gets, consumes, acks, requeues; dead-lettering by reject,
        delivery limit, expiry and length, with every strategy."""
        ch = self.ch
        ch.confirm_delivery()
        x, dlx = self.exchange("direct"), self.exchange("fanout")
        self.bound_queue(dlx)
        c1, c2 = self.bound_queue(x, "one", "two"), self.bound_queue(x, "two")
        q1 = self.queue(durable=True, arguments={"x-queue-type": "quorum"})
        ch.queue_bind(q1, x, "quorum")
        ch.basic_publish(x, "none", b"a")  # dropped
        with self.assertRaises(h.pika.exceptions.UnroutableError):
            ch.basic_publish(x, "none", b"b", mandatory=True)  # returned
        for key in ("one", "two", "quorum"):  # 1, 2 and 1 queues
            ch.basic_publish(x, key, b"c")
        ch.basic_publish("", c1, b"f")
        ch2 = self.conn.channel()  # no confirms
        ch2.basic_publish(x, "two", b"g")
        ch2.basic_publish(x, "none", b"h", mandatory=True)
        m = ch.basic_get(c1, auto_ack=False)
        ch.basic_ack(m[0].delivery_tag)
        ch.basic_get(c1, auto_ack=True)
        for queue in (c1, q1):  # requeued, then delivered again and acked
            m = ch.basic_get(queue, auto_ack=False)
            ch.basic_nack(m[0].delivery_tag, requeue=True)
            m = ch.basic_get(queue, auto_ack=False)
            ch.basic_ack(m[0].delivery_tag)
        ch.basic_get(q1, auto_ack=True)  # empty
        ch.basic_get(self.queue(), auto_ack=True)  # empty
        got = []
        ch.basic_consume(c2, lambda c, meth, p, b: (got.append(b), c.basic_ack(meth.delivery_tag)))
        ch2.basic_publish(x, "quorum", b"i")
        ch2.basic_publish(x, "quorum", b"j")
        self.conn.channel().basic_consume(q1, lambda *a: got.append(a[3]), auto_ack=True)
        self.assertTrue(h.wait_for(self.conn, lambda: len(got) == 4, timeout=10), got)
        self.dead_letters(dlx)

    def dead_letters(self, dlx):
        ch = self.ch
        quorum = {"x-queue-type": "quorum", "x-dead-letter-exchange": dlx}
        at_least_once = dict(quorum, **{"x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"})
        q = lambda **a: self.queue(durable=a.get("x-queue-type") == "quorum", arguments=a)
        rejected = [q(**{"x-dead-letter-exchange": dlx}), q(), q(**{"x-dead-letter-exchange": h.unique("nox")})]
        limited = [q(**dict(quorum, **{"x-delivery-limit": 1})),
                   q(**{"x-queue-type": "quorum", "x-delivery-limit": 1}),
                   q(**dict(at_least_once, **{"x-delivery-limit": 1}))]
        expiring = [q(**{"x-dead-letter-exchange": dlx, "x-message-ttl": 200}), q(**{"x-message-ttl": 200}),
                    q(**dict(quorum, **{"x-message-ttl": 200})),
                    q(**dict(at_least_once, **{"x-message-ttl": 200}))]
        full = [q(**{"x-dead-letter-exchange": dlx, "x-max-length": 1}), q(**{"x-max-length": 1}),
                q(**dict(quorum, **{"x-max-length": 1}))]
        for name in rejected + limited:
            ch.basic_publish("", name, b"r")
            m = ch.basic_get(name, auto_ack=False)
            ch.basic_reject(m[0].delivery_tag, requeue=False)
        for name in limited:
            ch.basic_publish("", name, b"l")
            for _ in range(2):  # the second return is past the limit
                m = ch.basic_get(name, auto_ack=False)
                ch.basic_nack(m[0].delivery_tag, requeue=True)
                h.drain(self.conn, 0.2)
        for name in expiring:
            ch.basic_publish("", name, b"t")
        for name in full:
            ch.basic_publish("", name, b"m1")
            ch.basic_publish("", name, b"m2")

    def test_global_counters_one_sequence(self):
        before = metrics()
        self.sequence()

        def counted(f):
            return [(n, ls, value(f, n, **ls) - (value(before, n, **ls) or 0) if value(f, n, **ls) is not None
                     else None) for n, ls, _ in SEQUENCE_COUNTS]
        after = poll(lambda: counted(metrics()), lambda got: got == SEQUENCE_COUNTS)
        self.assertEqual([g for g, want in zip(after, SEQUENCE_COUNTS) if g != want],
                         [want for g, want in zip(after, SEQUENCE_COUNTS) if g != want])

    def test_global_counters_survive_vhost_delete(self):
        v = h.unique("vhost")
        self.assertIn(api("PUT", "/api/vhosts/" + urllib.parse.quote(v, safe="")), (201, 204))
        try:
            self.assertIn(api("PUT", "/api/permissions/%s/guest" % urllib.parse.quote(v, safe=""),
                              {"configure": ".*", "write": ".*", "read": ".*"}), (201, 204))
            c = self.connect(vhost=v)
            ch = c.channel()
            ch.queue_declare("q")
            for _ in range(3):
                ch.basic_publish("", "q", b"m")
            ch.basic_get("q", auto_ack=True)
            c.close()
            names = ("rabbitmq_global_messages_received_total", "rabbitmq_global_messages_routed_total")
            during = poll(metrics, lambda f: all(value(f, n, protocol="amqp091") for n in names))
        finally:
            self.assertEqual(api("DELETE", "/api/vhosts/" + urllib.parse.quote(v, safe="")), 204)
        after = metrics()
        for n, labels in [(n, {"protocol": "amqp091"}) for n in names] + [
                ("rabbitmq_global_messages_delivered_get_auto_ack_total",
                 {"protocol": "amqp091", "queue_type": CLASSIC})]:
            self.assertGreaterEqual(value(after, n, **labels), value(during, n, **labels), n)

    def deltas(self, before, names, **labels):
        after = metrics()
        return {n: value(after, n, **labels) - value(before, n, **labels) for n in names}

    def test_ack_after_queue_delete_not_counted(self):
        q = self.queue()
        self.publish("", q, b"a")
        self.publish("", q, b"b")
        first, second = (self.ch.basic_get(q, auto_ack=False)[0] for _ in range(2))
        self.ch.basic_ack(first.delivery_tag)
        name = "rabbitmq_global_messages_acknowledged_total"
        poll(metrics, lambda f: value(f, name, protocol="amqp091", queue_type=CLASSIC))
        time.sleep(0.5)
        before = metrics()
        self.connect().channel().queue_delete(q)
        self.ch.basic_ack(second.delivery_tag)  # as RabbitMQ: a gone queue's ack is not counted
        h.drain(self.conn, 0.5)
        self.assertEqual(self.deltas(before, [name], protocol="amqp091", queue_type=CLASSIC), {name: 0})

    def test_management_publish_counts_as_mandatory_with_confirms(self):
        q = self.queue()
        names = ["rabbitmq_global_messages_" + n for n in (
            "received_total", "received_confirm_total", "routed_total", "unroutable_returned_total",
            "unroutable_dropped_total", "confirmed_total")]
        before = metrics()
        for key in (q, h.unique("nowhere")):
            self.assertEqual(api("POST", "/api/exchanges/%2F/amq.default/publish",
                                 {"properties": {}, "routing_key": key, "payload": "x",
                                  "payload_encoding": "string"}), 200)
        want = dict(zip(names, (2, 2, 1, 1, 0, 2)))
        self.assertEqual(poll(lambda: self.deltas(before, names, protocol="amqp091"), lambda d: d == want), want)

    def test_per_object_channel_families_per_exchange_and_queue(self):
        q = self.queue()
        self.publish("", q, b"a")
        self.publish("", q, b"b")
        self.publish("amq.direct", h.unique("nowhere"), b"c")  # dropped
        self.ch.basic_get(q, auto_ack=False)
        self.ch.basic_get(q, auto_ack=True)
        self.ch.basic_get(q, auto_ack=True)  # empty

        def ours(f):
            """Our channel's samples: {family: {(label keys): {name: value}}}."""
            chans = {ls["channel"] for _, ls, _ in f["rabbitmq_channel_get_ack_total"]["samples"]
                     if ls.get("queue") == q}
            out = {}
            for n in ("rabbitmq_channel_messages_published_total", "rabbitmq_channel_messages_unroutable_dropped_total",
                      "rabbitmq_channel_get_ack_total", "rabbitmq_channel_get_total", "rabbitmq_channel_get_empty_total"):
                for _, ls, v in f[n]["samples"]:
                    if ls.get("channel") in chans and ls.get("exchange") in ("", "amq.direct", None):
                        out.setdefault(n, {})[(tuple(ls), ls.get("exchange", ls.get("queue")))] = v
            return out
        keys_x, keys_q = ("channel", "vhost", "exchange"), ("channel", "vhost", "queue")
        want = {"rabbitmq_channel_messages_published_total": {(keys_x, ""): 2, (keys_x, "amq.direct"): 1},
                "rabbitmq_channel_messages_unroutable_dropped_total": {(keys_x, ""): 0, (keys_x, "amq.direct"): 1},
                "rabbitmq_channel_get_ack_total": {(keys_q, q): 1},
                "rabbitmq_channel_get_total": {(keys_q, q): 1},
                "rabbitmq_channel_get_empty_total": {(keys_q, q): 1}}
        self.assertEqual(poll(lambda: ours(metrics("/metrics/per-object")), lambda got: got == want), want)

    @unittest.skipUnless(WARREN, "Warren's bound on a channel's per-queue counters")
    def test_per_object_channel_queues_bounded(self):
        """A channel keeps counters for at most 64 queues (oldest reused
        first), and a deleted queue's leave the listing at once."""
        ch = self.conn.channel()
        names = [self.queue(h.unique("slot"), ch=ch) for _ in range(70)]
        for q in names:
            ch.basic_get(q, auto_ack=True)  # empty: counted per (channel, queue)

        def listed():
            f = metrics("/metrics/per-object")
            return {ls["queue"] for _, ls, _ in f["rabbitmq_channel_get_empty_total"]["samples"]
                    if ls["queue"] in names}
        self.assertEqual(listed(), set(names[6:]))
        for q in names[60:65]:
            ch.queue_delete(q)
        self.assertEqual(listed(), set(names[6:60] + names[65:]))
        ch.basic_get(names[0], auto_ack=True)  # takes a deleted queue's slot, not a live one's
        self.assertEqual(listed(), set(names[:1] + names[6:60] + names[65:]))

    def test_detailed_families_as_rabbitmq(self):
        ref = reference()
        self.queue()
        for family, names in DETAILED.items():
            prefix = "rabbitmq_cluster_" if family in CLUSTER else "rabbitmq_detailed_"
            fams = detailed(family)
            got = {n[len(prefix):] for n in fams if n.startswith(prefix)}
            self.assertLessEqual(set(names), got, family)
            if WARREN:
                self.assertEqual(got, set(names), family)
            for n in names:
                plain = ref.get("rabbitmq_" + n)
                if plain:  # the same TYPE and HELP as on /metrics
                    self.assertEqual((fams[prefix + n]["type"], fams[prefix + n]["help"]),
                                     (plain["type"], plain["help"]), prefix + n)
            self.assertEqual([s[2] for s in fams["rabbitmq_identity_info"]["samples"]], [1])

    def test_detailed_without_known_family_writes_identity_only(self):
        for fams in (detailed(), detailed("no_such_family"), metrics("/metrics/detailed?family")):
            self.assertEqual({n for n in fams if n.startswith("rabbitmq_")},
                             {"rabbitmq_build_info", "rabbitmq_identity_info"})

    def test_detailed_queue_families_by_vhost(self):
        q = self.queue()
        self.publish("", q, b"m")
        self.ch.basic_consume(q, lambda *a: None)

        def ours(fams, n):
            return [(ls, v) for _, ls, v in fams.get(n, {"samples": []})["samples"] if ls.get("queue") == q]
        want = [({"vhost": "/", "queue": q}, 1)]
        fams = poll(lambda: detailed("queue_coarse_metrics", vhosts=["/"]),
                    lambda f: ours(f, "rabbitmq_detailed_queue_messages") == want)
        self.assertEqual(ours(fams, "rabbitmq_detailed_queue_messages"), want)
        fams = detailed("queue_coarse_metrics", vhosts=[h.unique("no-such-vhost")])
        self.assertIn("rabbitmq_detailed_queue_messages", fams)  # the family, without its samples
        self.assertEqual(ours(fams, "rabbitmq_detailed_queue_messages"), [])
        fams = poll(lambda: detailed("queue_metrics", "queue_consumer_count"),
                    lambda f: ours(f, "rabbitmq_detailed_queue_consumers") == want)
        self.assertEqual(ours(fams, "rabbitmq_detailed_queue_consumers"), want)  # once, not twice

    def test_detailed_cluster_families(self):
        x = self.exchange("direct")
        self.bound_queue(x, "a", "b")
        fams = detailed("vhost_status", "exchange_bindings", "exchange_names")

        def sample(n, **labels):
            return [v for _, ls, v in fams[n]["samples"] if ls == labels]
        self.assertEqual(sample("rabbitmq_cluster_vhost_status", vhost="/"), [1])
        self.assertEqual(sample("rabbitmq_cluster_exchange_bindings", vhost="/", exchange=x, type="direct"), [2])
        self.assertEqual(sample("rabbitmq_cluster_exchange_name", vhost="/", exchange=x, type="direct"), [1])
        exchanges = {ls["exchange"] for _, ls, _ in fams["rabbitmq_cluster_exchange_name"]["samples"]}
        self.assertNotIn("", exchanges)  # the default exchange is left out
        self.assertIn("amq.direct", exchanges)

    @unittest.skipUnless(WARREN, "RabbitMQ's erlang_* families fail promtool's lint")
    def test_promtool_accepts_every_endpoint(self):
        tool = promtool()
        self.queue()
        self.ch.basic_get(self.queue(), auto_ack=True)
        paths = ["/metrics", "/metrics/per-object",
                 "/metrics/detailed?" + urllib.parse.urlencode([("family", f) for f in DETAILED])]
        paths += ["/metrics/detailed?family=" + f for f in DETAILED]
        for p in paths:
            status, _, body = get(p)
            self.assertEqual(status, 200, p)
            r = subprocess.run([tool, "check", "metrics"], input=body.encode(), capture_output=True, timeout=60)
            self.assertEqual((r.returncode, r.stdout + r.stderr), (0, b""), p)

    def test_unknown_path_is_404(self):
        self.assertEqual(get("/no-such-path")[0], 404)


if __name__ == "__main__":
    unittest.main()
