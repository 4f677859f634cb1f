"""Definitions: GET/POST /api/definitions[/{vhost}], load_definitions at
start, runtime parameters (operator policies among them) both ways, and the
example topology (etc/definitions.example.json) working over AMQP. Each test
runs a private Warren (imports change users and vhosts).

The export's shape and the error statuses (400 bad_request for a refused
import, 404 / 400 vhost_not_found) were checked against RabbitMQ 3.10.8;
the reasons are Warren's own: they name the item refused. A refused import
must change nothing, which each validation case checks by comparing the
export before and after."""
import base64
import http.client
import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
import urllib.parse

from pika import exceptions as pex

import harness as h

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EXAMPLE = os.path.join(ROOT, "etc", "definitions.example.json")
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()
FULL_KEYS = ["rabbit_version", "rabbitmq_version", "product_name", "product_version", "users", "vhosts",
             "permissions", "topic_permissions", "parameters", "global_parameters", "policies", "queues",
             "exchanges", "bindings"]
VHOST_KEYS = ["rabbit_version", "parameters", "policies", "queues", "exchanges", "bindings"]


def reference_path():
    for base in (os.environ.get("RABBITMQ_REFERENCE"), os.path.join(ROOT, "tests", "reference", "rabbitmq-3.10")):
        if base and os.path.isfile(os.path.join(base, "api_definitions.json")):
            return os.path.join(base, "api_definitions.json")
    raise AssertionError("tests/reference/rabbitmq-3.10/api_definitions.json not found")


def seg(name):
    return urllib.parse.quote(name, safe="")


CLUSTER_ID = "internal_cluster_id"


def sorted_doc(d):
    """The document with every list sorted, for comparisons."""
    return {k: sorted(v, key=lambda x: json.dumps(x, sort_keys=True)) if isinstance(v, list) else v
            for k, v in d.items()}


def without_cluster_id(d):
    """The document without the global internal_cluster_id (each node keeps its own)."""
    return dict(d, global_parameters=[p for p in d.get("global_parameters", []) if p["name"] != CLUSTER_ID])


def cluster_id(d):
    return [p["value"] for p in d["global_parameters"] if p["name"] == CLUSTER_ID][0]


class Broker:
    """A private Warren with its own data dir (kept across restarts)."""

    def __init__(self, test, *settings, data_dir=None):
        self.test = test
        self.data_dir = data_dir or tempfile.mkdtemp(prefix="warren-itest-defs-")
        if not data_dir:
            test.addCleanup(shutil.rmtree, self.data_dir, True)
        self.proc = h.WarrenProcess(["data_dir=%s" % self.data_dir] + list(settings))
        self.addr = self.proc.start()
        test.addCleanup(self.stop)

    def stop(self):
        if self.proc:
            proc, self.proc = self.proc, None
            rc = proc.stop()  # then the log: lines logged just before may still be in the pipe
            log = "\n".join(proc.log_lines)
            self.test.assertEqual(rc, 0, "Warren exit status; log:\n" + proc.log_tail())
            return log
        return ""

    def call(self, method, path, body=None, raw=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port, timeout=30)
        hdrs = {"Authorization": AUTH, **(headers or {})}
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        if data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        c.request(method, path, body=data, headers=hdrs)
        r = c.getresponse()
        payload = r.read()
        c.close()
        return r.status, json.loads(payload) if payload else None

    def get(self, path):
        status, body = self.call("GET", path)
        self.test.assertEqual(status, 200, "GET %s: %r" % (path, body))
        return body

    def post(self, doc, vhost=None, want=204):
        path = "/api/definitions" + ("/" + seg(vhost) if vhost is not None else "")
        status, body = self.call("POST", path, doc if not isinstance(doc, bytes) else None,
                                 raw=doc if isinstance(doc, bytes) else None)
        self.test.assertEqual(status, want, "POST %s: %r" % (path, body))
        return body

    def export(self, vhost=None):
        return self.get("/api/definitions" + ("/" + seg(vhost) if vhost is not None else ""))

    def connect(self, **kw):
        c = h.connect(self.addr, **kw)
        self.test.addCleanup(lambda: c.is_open and c.close())
        return c


def topology(v="defs.v"):
    """A document with every section filled."""
    return {
        "users": [{"name": "defs-user", "password_hash": "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy",
                   "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["monitoring"], "limits": {}}],
        "vhosts": [{"name": v}],
        "permissions": [{"user": "defs-user", "vhost": v, "configure": "^c", "write": "^w", "read": "^r"},
                        {"user": "guest", "vhost": v, "configure": ".*", "write": ".*", "read": ".*"}],
        "topic_permissions": [{"user": "defs-user", "vhost": v, "exchange": "amq.topic", "write": "^a",
                               "read": ".*"}],
        "policies": [{"vhost": v, "name": "p1", "pattern": "^q\\.", "apply-to": "queues",
                      "definition": {"max-length": 10}, "priority": 3}],
        "parameters": [{"value": {"pattern": "^q\\.one$", "definition": {"max-length": 2}, "priority": 1,
                                  "apply-to": "queues"},
                        "vhost": v, "component": "operator_policy", "name": "op1"},
                       {"value": {"expires": 3600000, "uri": "amqp://upstream.example"}, "vhost": v,
                        "component": "federation-upstream", "name": "up1"},
                       {"value": [{"upstream": "up1"}], "vhost": v, "component": "federation-upstream-set",
                        "name": "set1"},
                       # unreachable ends: a running shovel must not add queues to "/" (amqp://)
                       {"value": {"dest-queue": "q.ae", "dest-uri": "amqp://127.0.0.1:1", "src-queue": "q.one",
                                  "src-uri": "amqp://127.0.0.1:1"},
                        "vhost": v, "component": "shovel", "name": "sh1"}],
        "global_parameters": [{"name": "cluster_name", "value": "defs-cluster"}],
        "exchanges": [{"name": "x.topic", "vhost": v, "type": "topic", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {"alternate-exchange": "x.ae"}},
                      {"name": "x.ae", "vhost": v, "type": "fanout", "durable": True, "auto_delete": False,
                       "internal": False, "arguments": {}}],
        "queues": [{"name": "q.one", "vhost": v, "durable": True, "auto_delete": False,
                    "arguments": {"x-message-ttl": 60000, "x-dead-letter-exchange": "x.ae"}},
                   {"name": "q.ae", "vhost": v, "durable": True, "auto_delete": False, "arguments": {}}],
        "bindings": [{"source": "x.topic", "vhost": v, "destination": "q.one", "destination_type": "queue",
                      "routing_key": "a.#", "arguments": {"k": "v"}},
                     {"source": "x.ae", "vhost": v, "destination": "q.ae", "destination_type": "queue",
                      "routing_key": "", "arguments": {}},
                     {"source": "x.topic", "vhost": v, "destination": "x.ae", "destination_type": "exchange",
                      "routing_key": "b.*", "arguments": {}}]}


@h.needs_own_broker
class Export(unittest.TestCase):
    def test_shape_full_and_vhost(self):
        b = Broker(self)
        d = b.export()
        self.assertEqual(list(d), FULL_KEYS)
        self.assertEqual(d["vhosts"], [{"name": "/"}])
        guest = d["users"][0]
        self.assertEqual(list(guest), ["name", "password_hash", "hashing_algorithm", "tags", "limits"])
        self.assertEqual((guest["name"], guest["tags"], guest["limits"]), ("guest", ["administrator"], {}))
        self.assertEqual(d["permissions"], [{"user": "guest", "vhost": "/", "configure": ".*", "write": ".*",
                                             "read": ".*"}])
        self.assertEqual(d["parameters"], [])
        self.assertEqual([list(p) for p in d["global_parameters"]], [["name", "value"]])
        self.assertRegex(cluster_id(d), r"^rabbitmq-cluster-id-[A-Za-z0-9_-]{22}$")
        self.assertEqual(list(b.export("/")), VHOST_KEYS)

    def test_items_keep_rabbitmq_key_order_and_omit_builtins(self):
        b = Broker(self)
        b.post(topology())
        d = b.export()
        self.assertEqual([list(x) for x in d["queues"]][0], ["name", "vhost", "durable", "auto_delete", "arguments"])
        self.assertEqual(list(d["exchanges"][0]),
                         ["name", "vhost", "type", "durable", "auto_delete", "internal", "arguments"])
        self.assertEqual(list(d["bindings"][0]),
                         ["source", "vhost", "destination", "destination_type", "routing_key", "arguments"])
        self.assertEqual(list(d["policies"][0]), ["vhost", "name", "pattern", "apply-to", "definition", "priority"])
        self.assertEqual({tuple(p) for p in d["parameters"]}, {("value", "vhost", "component", "name")})
        self.assertFalse([x for x in d["exchanges"] if x["name"].startswith("amq.") or not x["name"]])
        per = b.export("defs.v")
        self.assertTrue(all("vhost" not in x for k in ("queues", "exchanges", "bindings") for x in per[k]))
        self.assertEqual([p["vhost"] for p in per["policies"]], ["defs.v"])   # as RabbitMQ 3.10
        self.assertEqual({p["vhost"] for p in per["parameters"]}, {"defs.v"})   # likewise

    def test_unknown_vhost(self):
        b = Broker(self)
        self.assertEqual(b.call("GET", "/api/definitions/nope"),
                         (400, {"error": "bad_request", "reason": "vhost_not_found"}))
        self.assertEqual(b.call("POST", "/api/definitions/nope", {}),
                         (404, {"error": "not_found", "reason": "vhost_not_found"}))

    def test_exclusive_queues_left_out(self):
        b = Broker(self)
        ch = b.connect().channel()
        ch.queue_declare("defs.excl", exclusive=True)
        self.assertEqual(b.export()["queues"], [])


@h.needs_own_broker
class Import(unittest.TestCase):
    def test_reference_file_imports_unchanged(self):
        with open(reference_path(), "rb") as f:
            raw = f.read()
        ref = json.loads(raw)
        b = Broker(self)
        b.post(raw)
        d = b.export()
        for key in ("policies", "queues", "exchanges", "bindings", "vhosts", "permissions", "topic_permissions",
                    "parameters"):
            self.assertEqual(sorted_doc(d)[key], sorted_doc(ref)[key], key)
        self.assertEqual(d["users"], ref["users"])
        self.assertNotEqual(cluster_id(d), cluster_id(ref), "the node keeps its own cluster id")

    def test_round_trip_warren_to_warren(self):
        a = Broker(self)
        a.post(topology())
        ch = a.connect(vhost="defs.v").channel()
        ch.queue_declare("transient.q", durable=False)
        exported = a.export()
        self.assertEqual(sorted_doc(exported)["parameters"], sorted_doc(topology())["parameters"])
        b = Broker(self)
        own_id = cluster_id(b.export())
        b.post(exported)
        self.assertEqual(sorted_doc(without_cluster_id(b.export())), sorted_doc(without_cluster_id(exported)))
        self.assertEqual(cluster_id(b.export()), own_id)
        # and the per-vhost export into an empty vhost of a third broker
        c = Broker(self)
        c.post({"vhosts": [{"name": "other"}]})
        c.post(a.export("defs.v"), vhost="other")
        def moved(d):   # policies and parameters name their vhost even in the per-vhost form
            return sorted_doc(dict(d, policies=[dict(p, vhost="-") for p in d["policies"]],
                                   parameters=[dict(p, vhost="-") for p in d["parameters"]]))
        self.assertEqual(moved(c.export("other")), moved(a.export("defs.v")))
        self.assertEqual([p["vhost"] for p in c.export("other")["policies"]], ["other"])
        self.assertEqual({p["vhost"] for p in c.export("other")["parameters"]}, {"other"})

    def test_import_is_durable_and_routes(self):
        b = Broker(self)
        b.post(topology())
        before = sorted_doc(b.export())
        log = b.stop()
        self.assertIn("imported definitions: 1 users, 1 vhosts, 2 permissions, 1 topic permissions, "
                      "1 global parameters, 1 policies, 4 parameters, 2 exchanges, 2 queues, 3 bindings", log)
        b2 = Broker(self, data_dir=b.data_dir)
        self.assertEqual(sorted_doc(b2.export()), before, "the import after a restart")
        ch = b2.connect(vhost="defs.v").channel()
        ch.basic_publish("x.topic", "a.b", b"1")
        ch.basic_publish("x.topic", "zzz", b"2")   # unroutable: to the alternate exchange
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (ch.queue_declare("q.one", passive=True).method.message_count < 1 or
                                               ch.queue_declare("q.ae", passive=True).method.message_count < 1):
            time.sleep(0.05)
        self.assertEqual(ch.queue_declare("q.one", passive=True).method.message_count, 1)
        self.assertEqual(ch.queue_declare("q.ae", passive=True).method.message_count, 1)
        # the imported operator policy works as one after the restart: q.one keeps 2 at most
        for i in range(5):
            ch.basic_publish("x.topic", "a.b", b"m%d" % i)
        ch.queue_declare("q.one", passive=True)   # a round trip: the publishes are in
        self.assertEqual(ch.queue_declare("q.one", passive=True).method.message_count, 2)
        got = b2.get("/api/queues/defs.v/q.one")
        self.assertEqual((got["operator_policy"], got["effective_policy_definition"]["max-length"]), ("op1", 2))
        who = b2.call("GET", "/api/whoami", headers={"Authorization": "Basic " +
                                                     base64.b64encode(b"defs-user:guest").decode()})
        self.assertEqual(who, (200, {"name": "defs-user", "tags": ["monitoring"]}))

    def test_per_vhost_import_ignores_item_vhosts(self):
        b = Broker(self)
        b.post({"vhosts": [{"name": "v2"}]})
        doc = topology("elsewhere")
        b.post({k: doc[k] for k in ("exchanges", "queues", "bindings", "policies")}, vhost="v2")
        d = b.export("v2")
        self.assertEqual(sorted(q["name"] for q in d["queues"]), ["q.ae", "q.one"])
        self.assertEqual(len(d["bindings"]), 3)

    def test_existing_objects_are_kept(self):
        b = Broker(self)
        b.post(topology())
        doc = topology()
        doc["queues"][0]["arguments"] = {"x-max-length": 5}     # differs: the existing queue stays
        b.post(doc)
        q = [x for x in b.export()["queues"] if x["name"] == "q.one"][0]
        self.assertEqual(q["arguments"], {"x-message-ttl": 60000, "x-dead-letter-exchange": "x.ae"})

    def test_multipart_upload(self):
        b = Broker(self)
        body = json.dumps({"queues": [{"name": "mp.q", "vhost": "/", "durable": True}]}).encode()
        form = (b"--BoUnD\r\nContent-Disposition: form-data; name=\"redirect\"\r\n\r\n../#/\r\n"
                b"--BoUnD\r\nContent-Disposition: form-data; name=\"file\"; filename=\"d.json\"\r\n"
                b"Content-Type: application/json\r\n\r\n" + body + b"\r\n--BoUnD--\r\n")
        ctype = {"Content-Type": "multipart/form-data; boundary=BoUnD"}
        # a form is what a cross-site page can post without asking: taken
        # only from the console's own origin
        origin = "http://127.0.0.1:%d" % b.proc.mgmt_port
        status, body = b.call("POST", "/api/definitions", raw=form, headers=ctype)
        self.assertEqual((status, body["error"]), (415, "unsupported_media_type"))
        status, body = b.call("POST", "/api/definitions", raw=form,
                              headers={**ctype, "Origin": "http://evil.example"})
        self.assertEqual((status, body["error"]), (403, "forbidden"))
        self.assertEqual(b.export()["queues"], [])
        status, _ = b.call("POST", "/api/definitions", raw=form, headers={**ctype, "Origin": origin})
        self.assertEqual(status, 204)
        self.assertEqual([q["name"] for q in b.export()["queues"]], ["mp.q"])

    def test_parameters_from_rabbitmq_and_back(self):
        """A RabbitMQ 3.10.8 export's parameters (an operator policy and a
        federation upstream, as RabbitMQ writes them) come back out the same."""
        b = Broker(self)
        ref_id = "rabbitmq-cluster-id-k-gGNuRGZI86WRaoPvpE_w"
        doc = {"vhosts": [{"name": "h"}],
               "parameters": [{"value": {"pattern": "^x", "definition": {"max-length": 100}, "priority": 3,
                                         "apply-to": "queues"},
                               "vhost": "h", "component": "operator_policy", "name": "op1"},
                              {"value": {"expires": 3600000, "uri": "amqp://localhost:1"}, "vhost": "h",
                               "component": "federation-upstream", "name": "up1"}],
               "global_parameters": [{"name": "internal_cluster_id", "value": ref_id}],
               "policies": []}
        b.post(doc)
        d = b.export()
        self.assertEqual(sorted_doc(d)["parameters"], sorted_doc(doc)["parameters"])
        self.assertNotEqual(cluster_id(d), ref_id)
        self.assertEqual(b.get("/api/operator-policies/h/op1")["definition"], {"max-length": 100})
        self.assertEqual(d["policies"], [], "an operator policy is a parameter, not a policy")
        self.assertIn("kept this node's own internal_cluster_id", b.stop())


# (document change, the words the reason must contain)
INVALID = [
    ("syntax", None, "JSON syntax error"),
    ("exchange type", lambda d: d["exchanges"][0].update(type="x-bogus"),
     "exchange 'x.topic' in vhost 'defs.v': unknown exchange type 'x-bogus'"),
    ("binding source", lambda d: d["bindings"][0].update(source="nowhere"),
     "binding of exchange 'nowhere' to queue 'q.one' in vhost 'defs.v': source exchange 'nowhere' does not exist"),
    ("binding destination", lambda d: d["bindings"][1].update(destination="no.q"),
     "destination queue 'no.q' does not exist"),
    ("argument type", lambda d: d["queues"][0]["arguments"].update({"x-message-ttl": "60000"}),
     "queue 'q.one' in vhost 'defs.v': x-message-ttl must be an integer"),
    ("argument value", lambda d: d["queues"][0]["arguments"].update({"x-max-length": -1}),
     "queue 'q.one' in vhost 'defs.v': invalid arg 'x-max-length'"),
    ("policy regex", lambda d: d["policies"][0].update(pattern="(unclosed"),
     "policy 'p1' in vhost 'defs.v': pattern should be regular expression"),
    ("policy definition", lambda d: d["policies"][0].update(definition={"message-ttl": -5}),
     "policy 'p1' in vhost 'defs.v'"),
    ("hash algorithm", lambda d: d["users"][0].update(hashing_algorithm="rabbit_password_hashing_md4"),
     "user 'defs-user': unknown hashing algorithm 'rabbit_password_hashing_md4'"),
    ("unknown vhost", lambda d: d["queues"][1].update(vhost="no-such-vhost"),
     "queue 'q.ae' in vhost 'no-such-vhost': vhost 'no-such-vhost' does not exist"),
    ("permission user", lambda d: d["permissions"][0].update(user="ghost"), "user 'ghost' does not exist"),
    ("durable type", lambda d: d["queues"][0].update(durable="yes"), "durable must be true or false"),
    ("parameter component", lambda d: d["parameters"][1].update(component="nosuchcomp"),
     "parameter 'up1' of component 'nosuchcomp' in vhost 'defs.v': component nosuchcomp not found"),
    ("operator policy value", lambda d: d["parameters"][0]["value"].pop("priority"),
     "parameter 'op1' of component 'operator_policy' in vhost 'defs.v': Key \"priority\" not found in op1"),
    ("operator policy definition", lambda d: d["parameters"][0]["value"].update(definition={"max-priority": 1}),
     "are not recognised policy settings"),
    ("upstream value", lambda d: d["parameters"][1].update(value={"expires": 1}),
     "parameter 'up1' of component 'federation-upstream' in vhost 'defs.v': Key \"uri\" not found in up1"),
    ("parameter vhost", lambda d: d["parameters"][2].update(vhost="no-such-vhost"),
     "vhost 'no-such-vhost' does not exist"),
    ("parameter value", lambda d: d["parameters"][3].pop("value"), "parameter 'sh1' of component 'shovel' "
     "in vhost 'defs.v': value is missing"),
    ("policy as a parameter", lambda d: d["parameters"][3].update(component="policy"),
     "policies may not be set using this method"),
    ("global parameter name", lambda d: d["global_parameters"][0].pop("name"),
     "global_parameters[0]: name must be a string"),
]


@h.needs_own_broker
class Validation(unittest.TestCase):
    def test_each_kind_refused_with_nothing_changed(self):
        b = Broker(self)
        before = b.export()
        for name, change, words in INVALID:
            with self.subTest(name):
                if change is None:
                    raw = json.dumps(topology()).encode()[:-7]
                else:
                    doc = topology()
                    change(doc)
                    raw = json.dumps(doc).encode()
                status, body = b.call("POST", "/api/definitions", raw=raw)
                self.assertEqual(status, 400, body)
                self.assertEqual(body["error"], "bad_request")
                self.assertIn(words, body["reason"])
                self.assertEqual(b.export(), before, "a refused import changed something")

    def test_syntax_error_has_line_and_column(self):
        b = Broker(self)
        status, body = b.call("POST", "/api/definitions", raw=b'{"queues": [\n  {"name": "a",}\n]}')
        self.assertEqual(status, 400)
        self.assertIn("(line 2, column 16)", body["reason"])

    def test_binding_to_object_in_broker_is_accepted(self):
        b = Broker(self)
        b.post({"queues": [{"name": "existing.q", "vhost": "/", "durable": True}]})
        b.post({"bindings": [{"source": "amq.direct", "vhost": "/", "destination": "existing.q",
                              "destination_type": "queue", "routing_key": "k", "arguments": {}}]})
        self.assertEqual(len(b.export()["bindings"]), 1)


@h.needs_own_broker
class BootLoad(unittest.TestCase):
    def write(self, text):
        fd, path = tempfile.mkstemp(prefix="warren-defs-", suffix=".json")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    def test_load_definitions_setting(self):
        path = self.write(json.dumps(topology()))
        b = Broker(self, "load_definitions=%s" % path)
        self.assertEqual(sorted(q["name"] for q in b.export("defs.v")["queues"]), ["q.ae", "q.one"])
        # imported again at the next start: nothing doubles, nothing fails
        log = b.stop()
        b2 = Broker(self, "load_definitions=%s" % path, data_dir=b.data_dir)
        self.assertEqual(len(b2.export("defs.v")["bindings"]), 3)
        self.assertIn("importing definitions from " + path, log)

    def test_directory_of_files_in_name_order(self):
        d = tempfile.mkdtemp(prefix="warren-defs-dir-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "1-vhosts.json"), "w") as f:
            json.dump({"vhosts": [{"name": "dir.v"}]}, f)
        with open(os.path.join(d, "2-queues.json"), "w") as f:
            json.dump({"queues": [{"name": "dir.q", "vhost": "dir.v", "durable": True}]}, f)
        with open(os.path.join(d, "notes.txt"), "w") as f:
            f.write("not json")
        b = Broker(self, "load_definitions=%s" % d)
        self.assertEqual([q["name"] for q in b.export("dir.v")["queues"]], ["dir.q"])
        with open(os.path.join(d, "3-bad.json"), "w") as f:
            f.write("{")
        err = self.start_failing("--definitions", d)
        self.assertIn("load_definitions %s/3-bad.json:1:1: JSON syntax error" % d, err)

    def start_failing(self, *args):
        data = tempfile.mkdtemp(prefix="warren-itest-defs-")
        self.addCleanup(shutil.rmtree, data, True)
        p = subprocess.run([h.WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0", "--set",
                            "data_dir=%s" % data, "--set", "management.tcp.port=0"] + list(args),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=20)
        self.assertNotEqual(p.returncode, 0)
        return p.stderr.decode()

    def test_syntax_error_stops_start_with_file_line_column(self):
        path = self.write('{"queues": [\n  {"name": "a",}\n]}')
        err = self.start_failing("--definitions", path)
        self.assertIn("load_definitions %s:2:16: JSON syntax error" % path, err)

    def test_invalid_item_stops_start_with_reason(self):
        doc = topology()
        doc["exchanges"][0]["type"] = "x-bogus"
        path = self.write(json.dumps(doc))
        err = self.start_failing("--set", "load_definitions=%s" % path)
        self.assertIn("load_definitions %s: exchange 'x.topic' in vhost 'defs.v': unknown exchange type 'x-bogus'"
                      % path, err)

    def test_missing_file_stops_start(self):
        err = self.start_failing("--definitions", "/nonexistent/defs.json")
        self.assertIn("load_definitions /nonexistent/defs.json: cannot read", err)


@h.needs_own_broker
class Example(unittest.TestCase):
    """etc/definitions.example.json at boot, then its routing over AMQP with
    each service's own user."""

    def wait_count(self, ch, q, n):
        deadline = time.monotonic() + 10
        while True:
            got = ch.queue_declare(q, passive=True).method.message_count
            if got >= n or time.monotonic() > deadline:
                return got
            time.sleep(0.05)

    def test_example_routes(self):
        b = Broker(self, "load_definitions=%s" % EXAMPLE)
        orders = b.connect(vhost="orders", user="orders-svc", password="orders-secret").channel()
        orders.basic_publish("orders", "created", b"order-1")
        self.assertEqual(self.wait_count(orders, "orders.created", 1), 1)
        m, _, body = orders.basic_get("orders.created")
        self.assertEqual(body, b"order-1")
        orders.basic_reject(m.delivery_tag, requeue=False)        # -> orders.dlx -> orders.dead
        self.assertEqual(self.wait_count(orders, "orders.dead", 1), 1)
        # the retry policy: a message in orders.retry goes back to orders.created after its TTL
        orders.basic_publish("orders.retry", "", b"again")
        self.assertEqual(self.wait_count(orders, "orders.created", 1), 1, "retry policy's TTL + DLX")
        # narrow permissions: the service may not declare
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            orders.queue_declare("orders.mine")
        self.assertEqual(cm.exception.reply_code, h.ACCESS_REFUSED)

        note = b.connect(vhost="notifications", user="notifications-svc", password="notifications-secret").channel()
        note.basic_publish("notifications", "", b"hello")
        for q in ("notifications.email", "notifications.sms", "notifications.push"):
            self.assertEqual(self.wait_count(note, q, 1), 1, q)

        logs = b.connect(vhost="logs", user="logs-svc", password="logs-secret").channel()
        for key in ("billing.error", "billing.info", "auth.error", "auth.debug"):
            logs.basic_publish("logs", key, key.encode())
        self.assertEqual(self.wait_count(logs, "logs.all", 4), 4)
        self.assertEqual(self.wait_count(logs, "logs.errors", 2), 2)
        self.assertEqual(self.wait_count(logs, "logs.billing", 2), 2)
        # topic permission: a key outside the pattern is refused
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            logs.basic_publish("logs", "Not-A-Key", b"x")
            logs.queue_declare("logs.all", passive=True)
        self.assertEqual(cm.exception.reply_code, h.ACCESS_REFUSED)
        # and a service cannot open another service's vhost
        with self.assertRaises((pex.ProbableAccessDeniedError, pex.ConnectionClosedByBroker)):
            b.connect(vhost="orders", user="logs-svc", password="logs-secret")


if __name__ == "__main__":
    unittest.main()
