"""Management API: definitions -- export (whole broker and per vhost),
import (POST /api/definitions, per vhost), validation, the reference file
captured from RabbitMQ, and the round trip: an export from the broker under
test imported into RabbitMQ (CONF_RABBIT_MGMT) under fresh names. The round
trips need that RabbitMQ (needs_rabbit): they run with COMPARE=1 only and
are reported as skipped otherwise."""
import copy
import json

from confkit import scenario, eq, check, wait_count
from mgmtkit import mgmt, rabbit_mgmt, vhost, user, grant, path, shape, error_body, find, reference_file

FULL_KEYS = {"rabbit_version": str, "users": list, "vhosts": list, "permissions": list, "topic_permissions": list,
             "parameters": list, "global_parameters": list, "policies": list, "queues": list, "exchanges": list,
             "bindings": list}
VHOST_KEYS = {"rabbit_version": str, "parameters": list, "policies": list, "queues": list, "exchanges": list,
              "bindings": list}


def topology(t, api, v):
    """A small topology in vhost v: a topic exchange with an alternate
    exchange, a queue with arguments bound to it, an e2e binding, a policy."""
    api.put(path("/api/exchanges", v, "orders"), {"type": "topic", "durable": True,
                                                  "arguments": {"alternate-exchange": "orders.ae"}})
    api.put(path("/api/exchanges", v, "orders.ae"), {"type": "fanout", "durable": True})
    api.put(path("/api/exchanges", v, "audit"), {"type": "fanout", "durable": True})
    api.put(path("/api/queues", v, "orders.q"), {"durable": True, "arguments": {"x-max-length": 1000,
                                                                                "x-message-ttl": 60000}})
    api.post(path("/api/bindings", v, "e", "orders", "q", "orders.q"), {"routing_key": "orders.#",
                                                                        "arguments": {"conf": "yes"}}, want=201)
    api.post(path("/api/bindings", v, "e", "orders", "e", "audit"), {"routing_key": "#"}, want=201)
    api.put(path("/api/policies", v, "orders-policy"), {"pattern": "^orders\\.", "definition": {"max-length-bytes": 1048576},
                                                        "apply-to": "queues", "priority": 1})


EXPECTED_EXCHANGES = [
    {"name": "audit", "type": "fanout", "durable": True, "auto_delete": False, "internal": False, "arguments": {}},
    {"name": "orders", "type": "topic", "durable": True, "auto_delete": False, "internal": False,
     "arguments": {"alternate-exchange": "orders.ae"}},
    {"name": "orders.ae", "type": "fanout", "durable": True, "auto_delete": False, "internal": False, "arguments": {}}]
EXPECTED_QUEUES = [{"name": "orders.q", "durable": True, "auto_delete": False,
                    "arguments": {"x-max-length": 1000, "x-message-ttl": 60000}}]
EXPECTED_BINDINGS = [
    {"source": "orders", "destination": "audit", "destination_type": "exchange", "routing_key": "#", "arguments": {}},
    {"source": "orders", "destination": "orders.q", "destination_type": "queue", "routing_key": "orders.#",
     "arguments": {"conf": "yes"}}]


def by_name(items, key="name"):
    return sorted(items, key=lambda x: (x.get("source", ""), x.get(key, ""), x.get("routing_key", "")))


def strip(items, *keys):
    return [{k: v for k, v in i.items() if k not in keys} for i in items]


def check_topology(api, v, what):
    """v holds exactly the topology() objects (compared through the API)."""
    xs = [x for x in api.get(path("/api/exchanges", v)) if x["name"] and not x["name"].startswith("amq.")]
    eq(by_name([{k: x[k] for k in EXPECTED_EXCHANGES[0]} for x in xs]), EXPECTED_EXCHANGES, what + ": exchanges")
    qs = api.get(path("/api/queues", v))
    eq([{k: q[k] for k in EXPECTED_QUEUES[0]} for q in qs], EXPECTED_QUEUES, what + ": queues")
    bs = [b for b in api.get(path("/api/bindings", v)) if b["source"]]
    eq(by_name([{k: b[k] for k in EXPECTED_BINDINGS[0]} for b in bs], "destination"), EXPECTED_BINDINGS,
       what + ": bindings")
    ps = api.get(path("/api/policies", v))
    eq([(p["name"], p["pattern"], p["definition"], p["apply-to"], p["priority"]) for p in ps],
       [("orders-policy", "^orders\\.", {"max-length-bytes": 1048576}, "queues", 1)], what + ": policies")


@scenario("mgmt.definitions.export_vhost", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    topology(t, api, v)
    d = api.get(path("/api/definitions", v))
    shape(d, VHOST_KEYS, "vhost definitions")
    eq(by_name(d["exchanges"]), EXPECTED_EXCHANGES, "exported exchanges (no amq.* nor default)")
    eq(d["queues"], EXPECTED_QUEUES, "exported queues")
    eq(by_name(d["bindings"], "destination"), EXPECTED_BINDINGS, "exported bindings (no default-exchange ones)")
    eq(d["policies"], [{"vhost": v, "name": "orders-policy", "pattern": "^orders\\.", "apply-to": "queues",
                        "definition": {"max-length-bytes": 1048576}, "priority": 1}], "exported policies")


@scenario("mgmt.definitions.export_full", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    u = user(t, "pw", "monitoring")
    grant(t, v, u, "^c", "^w", "^r")
    api.put(path("/api/topic-permissions", v, u), {"exchange": "amq.topic", "write": "^a", "read": "^b"})
    topology(t, api, v)
    d = api.get("/api/definitions")
    shape(d, FULL_KEYS, "definitions")
    uu = find(d["users"], "exported user", name=u)
    shape(uu, {"name": str, "password_hash": str, "hashing_algorithm": str, "tags": list}, "exported user")
    eq((uu["hashing_algorithm"], uu["tags"]), ("rabbit_password_hashing_sha256", ["monitoring"]), "user fields")
    eq(uu["password_hash"], api.get(path("/api/users", u))["password_hash"], "exported hash = the user's hash")
    find(d["vhosts"], "exported vhost", name=v)
    eq(find(d["permissions"], "permissions", user=u, vhost=v),
       {"user": u, "vhost": v, "configure": "^c", "write": "^w", "read": "^r"}, "exported permissions")
    eq(find(d["topic_permissions"], "topic permissions", user=u, vhost=v),
       {"user": u, "vhost": v, "exchange": "amq.topic", "write": "^a", "read": "^b"}, "exported topic permissions")
    eq(strip(by_name([x for x in d["exchanges"] if x.get("vhost") == v]), "vhost"), EXPECTED_EXCHANGES, "exchanges")
    eq(strip([q for q in d["queues"] if q.get("vhost") == v], "vhost"), EXPECTED_QUEUES, "queues")
    eq(strip(by_name([b for b in d["bindings"] if b.get("vhost") == v], "destination"), "vhost"), EXPECTED_BINDINGS,
       "bindings")
    find(d["policies"], "policy", vhost=v, name="orders-policy")


@scenario("mgmt.definitions.import_vhost", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    body = {"exchanges": EXPECTED_EXCHANGES, "queues": EXPECTED_QUEUES, "bindings": EXPECTED_BINDINGS,
            "policies": [{"name": "orders-policy", "pattern": "^orders\\.", "apply-to": "queues",
                          "definition": {"max-length-bytes": 1048576}, "priority": 1}]}
    eq(api.post(path("/api/definitions", v), body).status, 204, "POST /api/definitions/{vhost}")
    check_topology(api, v, "imported")
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.basic_publish("orders", "orders.new", b"o1")
    eq(wait_count(ch, "orders.q", 1), 1, "an imported binding routes")


@scenario("mgmt.definitions.import_full", "http")
def _(t):
    api = mgmt(t)
    v, u = t.name("vh"), t.name("u")
    t.track_url(api.url(path("/api/users", u)))
    t.track_url(api.url(path("/api/vhosts", v)))
    d = {"users": [{"name": u, "password_hash": "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy",
                    "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["management"], "limits": {}}],
         "vhosts": [{"name": v}],
         "permissions": [{"user": u, "vhost": v, "configure": ".*", "write": ".*", "read": ".*"}],
         "topic_permissions": [{"user": u, "vhost": v, "exchange": "amq.topic", "write": "^x", "read": ".*"}],
         "policies": [{"vhost": v, "name": "orders-policy", "pattern": "^orders\\.", "apply-to": "queues",
                       "definition": {"max-length-bytes": 1048576}, "priority": 1}],
         "exchanges": [dict(x, vhost=v) for x in EXPECTED_EXCHANGES],
         "queues": [dict(q, vhost=v) for q in EXPECTED_QUEUES],
         "bindings": [dict(b, vhost=v) for b in EXPECTED_BINDINGS]}
    eq(api.post("/api/definitions", d).status, 204, "POST /api/definitions")
    eq(api.get("/api/whoami", user=u, password="guest"), {"name": u, "tags": ["management"]},
       "the imported user logs in with its hash")
    eq(api.get(path("/api/permissions", v, u))["configure"], ".*", "imported permissions")
    eq(api.get(path("/api/topic-permissions", v, u))[0]["write"], "^x", "imported topic permissions")
    grant(t, v, api.user)
    check_topology(api, v, "imported")
    c = t.pika(virtual_host=v, user=u, password="guest")
    check(c.is_open, "the imported user opens the imported vhost over AMQP")


@scenario("mgmt.definitions.import_reference_file", "http")
def _(t):
    # The file captured from RabbitMQ 3.10.8, its vhost "/" renamed to a
    # fresh vhost and its guest user and permissions left out (the shared
    # broker's guest must not change).
    api = mgmt(t)
    ref = json.loads(reference_file("api_definitions.json"))
    v = vhost(t)
    d = copy.deepcopy(ref)
    d.pop("users")
    d.pop("permissions")
    d["vhosts"] = []
    for key in ("policies", "queues", "exchanges", "bindings"):
        for item in d[key]:
            item["vhost"] = v
    eq(api.post("/api/definitions", d).status, 204, "import of the reference file")
    for q in ref["queues"]:
        got = api.get(path("/api/queues", v, q["name"]))
        eq((got["durable"], got["arguments"]), (q["durable"], q["arguments"]), "queue %s" % q["name"])
    for x in ref["exchanges"]:
        got = api.get(path("/api/exchanges", v, x["name"]))
        eq((got["type"], got["arguments"]), (x["type"], x["arguments"]), "exchange %s" % x["name"])
    bs = [(b["source"], b["destination"], b["routing_key"]) for b in api.get(path("/api/bindings", v)) if b["source"]]
    eq(sorted(bs), sorted((b["source"], b["destination"], b["routing_key"]) for b in ref["bindings"]), "bindings")
    eq([p["name"] for p in api.get(path("/api/policies", v))], [p["name"] for p in ref["policies"]], "policies")


@scenario("mgmt.definitions.import_invalid", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    bad = {"queues": [{"name": "conf-imp", "durable": True, "auto_delete": False, "arguments": {}}],
           "exchanges": [{"name": "conf-ix", "type": "conf-bogus-type", "durable": True, "auto_delete": False,
                          "internal": False, "arguments": {}}]}
    b = error_body(api.call("POST", path("/api/definitions", v), bad, want=400), "bad_request",
                   what="import with an unknown exchange type")
    check("unknown exchange type 'conf-bogus-type'" in b["reason"], "reason names the type: %r" % b["reason"])
    api.call("GET", path("/api/queues", v, "conf-imp"), want=404)
    api.call("GET", path("/api/exchanges", v, "conf-ix"), want=404)
    error_body(api.call("POST", path("/api/definitions", v), data=b'{"queues": [', want=400), "bad_request",
               what="import of malformed JSON")
    nv = "conf-no-such-vhost-" + t.run_id
    error_body(api.call("POST", path("/api/definitions", nv), {}, want=404), "not_found", "vhost_not_found",
               "import into an unknown vhost")
    error_body(api.call("GET", path("/api/definitions", nv), want=400), "bad_request", "vhost_not_found",
               "export of an unknown vhost")


def round_trip_check(t, rabbit, v, what):
    """v on RabbitMQ holds the topology() objects."""
    grant(t, v, rabbit.user, api=rabbit)
    check_topology(rabbit, v, what)


@scenario("mgmt.definitions.round_trip_vhost", "http", needs_rabbit=True)
def _(t):
    api = mgmt(t)
    rabbit = rabbit_mgmt(t)
    v = vhost(t)
    topology(t, api, v)
    export = api.get(path("/api/definitions", v))
    rv = vhost(t, rabbit)
    r = rabbit.call("POST", path("/api/definitions", rv), export)
    eq(r.status, 204, "RabbitMQ accepts the per-vhost export (%s)" % r.body[:300])
    round_trip_check(t, rabbit, rv, "on RabbitMQ")


@scenario("mgmt.definitions.round_trip_full", "http", needs_rabbit=True)
def _(t):
    # The whole-broker export, cut down to this scenario's vhost and user and
    # renamed, imported into RabbitMQ with POST /api/definitions.
    api = mgmt(t)
    rabbit = rabbit_mgmt(t)
    v = vhost(t)
    u = user(t, "pw-round-trip", "monitoring")
    grant(t, v, u, "^orders", ".*", "^orders")
    api.put(path("/api/topic-permissions", v, u), {"exchange": "orders", "write": "^orders\\.", "read": ".*"})
    topology(t, api, v)
    full = api.get("/api/definitions")
    rv, ru = t.name("rvh"), t.name("ru")
    t.track_url(rabbit.url(path("/api/users", ru)))
    t.track_url(rabbit.url(path("/api/vhosts", rv)))

    def mine(key, field="vhost"):
        out = []
        for item in full.get(key, []):
            if item.get(field) == v and item.get("user", u) == u:
                item = dict(item, **{field: rv})
                if "user" in item:
                    item["user"] = ru
                out.append(item)
        return out
    d = {k: full[k] for k in ("rabbit_version",) if k in full}
    d.update(users=[dict(x, name=ru) for x in full["users"] if x["name"] == u],
             vhosts=[dict(x, name=rv) for x in full["vhosts"] if x["name"] == v],
             permissions=mine("permissions"), topic_permissions=mine("topic_permissions"), policies=mine("policies"),
             exchanges=mine("exchanges"), queues=mine("queues"), bindings=mine("bindings"))
    eq((len(d["users"]), len(d["vhosts"]), len(d["permissions"]), len(d["topic_permissions"])), (1, 1, 1, 1),
       "users, vhosts, permissions, topic_permissions of this scenario in the export")
    r = rabbit.call("POST", "/api/definitions", d)
    eq(r.status, 204, "RabbitMQ accepts the export (%s)" % r.body[:300])
    eq(rabbit.get("/api/whoami", user=ru, password="pw-round-trip"), {"name": ru, "tags": ["monitoring"]},
       "the exported password hash logs in on RabbitMQ")
    eq(rabbit.get(path("/api/permissions", rv, ru)),
       {"user": ru, "vhost": rv, "configure": "^orders", "write": ".*", "read": "^orders"}, "permissions on RabbitMQ")
    eq(rabbit.get(path("/api/topic-permissions", rv, ru)),
       [{"user": ru, "vhost": rv, "exchange": "orders", "write": "^orders\\.", "read": ".*"}],
       "topic permissions on RabbitMQ")
    round_trip_check(t, rabbit, rv, "on RabbitMQ")
