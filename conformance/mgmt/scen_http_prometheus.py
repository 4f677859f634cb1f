"""Prometheus (CONF_PROMETHEUS, rabbitmq_prometheus's port 15692): the text
format, metric names, types and HELP lines as in the reference capture
(tests/reference/rabbitmq-3.10/prometheus_metrics_sample.txt), aggregated on
/metrics and per object on /metrics/per-object."""
import os
import re
import urllib.error
import urllib.request

from confkit import scenario, eq, check, Fail, short
from mgmtkit import mgmt, vhost, path, poll, reference_file

# Families every broker with queues, connections and channels has.
CORE = ["rabbitmq_connections", "rabbitmq_channels", "rabbitmq_consumers", "rabbitmq_queues",
        "rabbitmq_queue_messages", "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked",
        "rabbitmq_queue_consumers", "rabbitmq_connections_opened_total", "rabbitmq_channels_opened_total",
        "rabbitmq_queues_declared_total", "rabbitmq_global_messages_received_total",
        "rabbitmq_global_messages_delivered_total", "rabbitmq_global_messages_acknowledged_total",
        "rabbitmq_global_messages_routed_total", "rabbitmq_global_messages_unroutable_dropped_total",
        "rabbitmq_process_resident_memory_bytes", "rabbitmq_resident_memory_limit_bytes",
        "rabbitmq_disk_space_available_bytes", "rabbitmq_process_open_fds", "rabbitmq_build_info",
        "rabbitmq_identity_info"]
SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( \d+)?$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def base_url():
    u = os.environ.get("CONF_PROMETHEUS") or ""
    if not u:
        raise Fail("Prometheus endpoint unavailable: " + (os.environ.get("CONF_PROMETHEUS_WHY")
                                                          or "no Prometheus URL (set PROMETHEUS=http://host:port)"))
    return u.rstrip("/")


def fetch(t, p):
    t.step("GET prometheus " + p)
    try:
        with urllib.request.urlopen(base_url() + p, timeout=10) as r:
            return r.status, r.headers.get("content-type", ""), r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("content-type", ""), e.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError) as e:
        raise Fail("GET %s%s: %s" % (base_url(), p, getattr(e, "reason", e)))


def parse(text, what):
    """{family: {"type": .., "help": .., "samples": [(name, labels, value)]}};
    Fails on a line that is not Prometheus text format."""
    fams = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line:
            continue
        if line.startswith("# TYPE ") or line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) < 3:
                raise Fail("%s line %d: %r" % (what, n, line))
            fam = fams.setdefault(parts[2], {"samples": []})
            fam["type" if parts[1] == "TYPE" else "help"] = parts[3] if len(parts) > 3 else ""
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE_RE.match(line)
        if not m:
            raise Fail("%s line %d is not a sample: %r" % (what, n, line))
        name, labels = m.group(1), dict(LABEL_RE.findall(m.group(3) or ""))
        try:
            value = float(m.group(4))
        except ValueError:
            raise Fail("%s line %d: value %r" % (what, n, m.group(4)))
        fam = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name not in fams and name.endswith(suffix) and name[:-len(suffix)] in fams:
                fam = name[:-len(suffix)]
        fams.setdefault(fam, {"samples": []})["samples"].append((name, labels, value))
    return fams


def reference():
    return parse(reference_file("prometheus_metrics_sample.txt"), "reference sample")


def metrics(t, p="/metrics"):
    status, ctype, body = fetch(t, p)
    eq(status, 200, "GET %s status" % p)
    check(ctype.startswith("text/plain"), "content-type %r" % ctype)
    return parse(body, p)


@scenario("mgmt.prometheus.format", "http")
def _(t):
    status, ctype, body = fetch(t, "/metrics")
    eq(status, 200, "status")
    eq(ctype.replace(" ", ""), "text/plain;version=0.0.4", "content-type")
    fams = parse(body, "/metrics")
    for name, fam in fams.items():
        if name.startswith("rabbitmq_"):
            check("type" in fam and "help" in fam, "%s has # TYPE and # HELP" % name)
            check(fam["type"] in ("counter", "gauge", "untyped", "histogram", "summary"), "%s type %r"
                  % (name, fam.get("type")))


@scenario("mgmt.prometheus.core_metrics", "http", quick=True)
def _(t):
    ref = reference()
    fams = metrics(t)
    missing = [n for n in CORE if n not in fams]
    check(not missing, "core metrics missing: %s" % missing)
    for n in CORE:
        eq((fams[n].get("type"), fams[n].get("help")), (ref[n]["type"], ref[n]["help"]), "TYPE and HELP of " + n)
        check(fams[n]["samples"], "%s has a sample" % n)
    eq(fams["rabbitmq_global_messages_received_total"]["samples"][0][1].get("protocol"), "amqp091",
       "protocol label of the global counters")
    info = fams["rabbitmq_identity_info"]["samples"][0][1]
    check("rabbitmq_node" in info and "rabbitmq_cluster" in info, "identity_info labels %s" % info)


@scenario("mgmt.prometheus.same_as_reference", "http")
def _(t):
    # Every rabbitmq_* family the broker reports that the reference capture
    # also has: the same TYPE and HELP, on /metrics and /metrics/per-object.
    ref = reference()
    for p in ("/metrics", "/metrics/per-object"):
        fams = metrics(t, p)
        wrong = ["%s: %s/%r, reference %s/%r" % (n, f.get("type"), f.get("help"), ref[n]["type"], ref[n]["help"])
                 for n, f in sorted(fams.items()) if n in ref and
                 (f.get("type"), f.get("help")) != (ref[n]["type"], ref[n]["help"])]
        check(not wrong, "%s differs from the reference: %s" % (p, short(wrong, 800)))


@scenario("mgmt.prometheus.aggregated", "http")
def _(t):
    fams = metrics(t)
    for n in ("rabbitmq_queue_messages", "rabbitmq_queue_messages_ready", "rabbitmq_connections"):
        samples = fams[n]["samples"]
        eq(len(samples), 1, "%s aggregated to one sample" % n)
        eq(samples[0][1], {}, "%s without labels" % n)
        check(samples[0][2] >= 0, "%s is not negative" % n)


@scenario("mgmt.prometheus.per_object_queue", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/queues", v, "q1"), {})
    ch = t.pika(virtual_host=v).channel()
    for i in range(3):
        ch.basic_publish("", "q1", b"m")
    ch.basic_get("q1", auto_ack=False)

    def queue_samples():
        fams = metrics(t, "/metrics/per-object")
        out = {}
        for n in ("rabbitmq_queue_messages", "rabbitmq_queue_messages_ready", "rabbitmq_queue_messages_unacked"):
            for _, labels, value in fams.get(n, {"samples": []})["samples"]:
                if labels.get("vhost") == v and labels.get("queue") == "q1":
                    out[n] = value
        return out
    poll(queue_samples, lambda s: s == {"rabbitmq_queue_messages": 3, "rabbitmq_queue_messages_ready": 2,
                                              "rabbitmq_queue_messages_unacked": 1},
               "per-object samples of q1: 3 messages, 2 ready, 1 unacked", timeout=15)


@scenario("mgmt.prometheus.unknown_path", "http")
def _(t):
    status, _, _ = fetch(t, "/conf-no-such-path")
    eq(status, 404, "status of an unknown path")


@scenario("mgmt.prometheus.global_label_sets", "http")
def _(t):
    # The global counters by queue type have a classic and a quorum sample;
    # the dead-letter ones RabbitMQ 3.10's (queue_type, dead_letter_strategy)
    # pairs.
    fams = metrics(t)

    def label_sets(n, *keys):
        check(n in fams, "%s is written" % n)
        return sorted(tuple(ls.get(k) for k in keys) for _, ls, _ in fams[n]["samples"])
    types = label_sets("rabbitmq_global_messages_delivered_total", "protocol", "queue_type")
    for qt in ("rabbit_classic_queue", "rabbit_quorum_queue"):
        check(("amqp091", qt) in types, "delivered_total has protocol=amqp091, queue_type=%s: %s" % (qt, types))
    classic = [("rabbit_classic_queue", s) for s in ("at_most_once", "disabled")]
    quorum = [("rabbit_quorum_queue", s) for s in ("at_least_once", "at_most_once", "disabled")]
    for reason, pairs in (("rejected", classic + quorum), ("expired", classic + quorum),
                          ("maxlen", classic + quorum[1:]), ("confirmed", quorum[:1])):
        got = label_sets("rabbitmq_global_messages_dead_lettered_%s_total" % reason, "queue_type",
                         "dead_letter_strategy")
        eq(got, sorted(pairs), "label sets of dead_lettered_%s_total" % reason)
    got = label_sets("rabbitmq_global_messages_dead_lettered_delivery_limit_total", "queue_type",
                     "dead_letter_strategy")
    check(set(quorum) <= set(got), "delivery_limit's quorum label sets %s" % got)


@scenario("mgmt.prometheus.detailed", "http", timeout=45)
def _(t):
    # /metrics/detailed: the families asked for, named rabbitmq_detailed_,
    # the queue ones of the vhosts asked for only; no known family: only
    # build_info and identity_info.
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/queues", v, "q1"), {})
    ch = t.pika(virtual_host=v).channel()
    ch.basic_publish("", "q1", b"m")
    ch.basic_publish("", "q1", b"m")
    q = "/metrics/detailed?family=queue_coarse_metrics&vhost=" + urllib.request.quote(v, safe="")

    def samples():
        fams = metrics(t, q)
        return [(ls.get("vhost"), ls.get("queue"), val) for _, ls, val in
                fams.get("rabbitmq_detailed_queue_messages", {"samples": []})["samples"]]
    got = poll(samples, lambda s: s == [(v, "q1", 2)], "queue_messages of q1 alone, 2", timeout=30)
    eq(got, [(v, "q1", 2)], "rabbitmq_detailed_queue_messages with vhost=%s" % v)
    for p in ("/metrics/detailed", "/metrics/detailed?family=conf_no_such_family"):
        names = sorted(n for n in metrics(t, p) if n.startswith("rabbitmq_"))
        eq(names, ["rabbitmq_build_info", "rabbitmq_identity_info"], "families of " + p)
