"""Management API: runtime parameters -- /api/parameters (a federation
upstream kept, operator policies seen and set as parameters, policies
shown), RabbitMQ's validation texts, unknown vhosts, who may, global
parameters; their place in the definitions both ways (into RabbitMQ too);
the feature flags and the overview's Prometheus listener."""
import json

from confkit import scenario, eq, check
from mgmtkit import mgmt, rabbit_mgmt, vhost, user, grant, path, shape, error_body, poll, find, track

PARAM = {"value": dict, "vhost": str, "component": str, "name": str}
UPSTREAM = {"expires": 3600000, "uri": "amqp://conf-upstream.example"}
OP = {"pattern": "^capped", "definition": {"max-length": 2}, "priority": 1, "apply-to": "queues"}


def param(component, v=None, name=None):
    return path("/api/parameters", *[x for x in (component, v, name) if x is not None])


@scenario("mgmt.parameters.put_get_delete", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    p = param("federation-upstream", v, "up1")
    eq(api.put(p, {"value": UPSTREAM}).status, 201, "PUT new parameter")
    eq(api.put(p, {"value": UPSTREAM}).status, 204, "PUT same parameter")
    got = api.get(p)
    shape(got, PARAM, "parameter")
    eq(list(got), ["value", "vhost", "component", "name"], "key order")
    eq(got, {"value": UPSTREAM, "vhost": v, "component": "federation-upstream", "name": "up1"}, "GET parameter")
    eq(api.get(param("federation-upstream", v)), [got], "/api/parameters/{component}/{vhost}")
    check(got in api.get("/api/parameters"), "in /api/parameters")
    eq(api.delete(p).status, 204, "DELETE parameter")
    error_body(api.call("GET", p, want=404), "Object Not Found", "Not Found")
    api.delete(p, want=404)


@scenario("mgmt.parameters.operator_policies", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/operator-policies", v, "op1"), OP)
    got = api.get(param("operator_policy", v, "op1"))
    eq((got["value"], got["component"]), (OP, "operator_policy"), "an operator policy as a parameter")
    check(got in api.get("/api/parameters"), "in /api/parameters")
    eq(api.put(param("operator_policy", v, "op2"), {"value": dict(OP, pattern="^also", priority=2)}).status, 201,
       "an operator policy set as a parameter")
    eq(api.get(path("/api/operator-policies", v, "op2"))["pattern"], "^also", "it is an operator policy")
    api.put(path("/api/queues", v, "also.q"), {})
    q = poll(lambda: api.get(path("/api/queues", v, "also.q")), lambda x: x.get("operator_policy") == "op2",
             "the queue gets it")
    eq(q["effective_policy_definition"], {"max-length": 2}, "effective definition")
    eq(api.delete(param("operator_policy", v, "op2")).status, 204, "DELETE through /api/parameters")
    eq([p["name"] for p in api.get(path("/api/operator-policies", v))], ["op1"], "op2 is gone")
    api.put(path("/api/policies", v, "pol"), {"pattern": "^x", "definition": {"max-length": 5}})
    eq(api.get(param("policy", v, "pol"))["value"],
       {"pattern": "^x", "definition": {"max-length": 5}, "priority": 0, "apply-to": "all"}, "a policy as a parameter")
    check("policy" not in [p["component"] for p in api.get("/api/parameters")], "/api/parameters leaves policies out")


@scenario("mgmt.parameters.validation", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    cases = [
        ("nosuchcomp", {"value": {"a": 1}}, "Validation failed\n\ncomponent nosuchcomp not found\n"),
        ("federation-upstream", {}, "[{key_missing,value}]"),
        ("federation-upstream", {"value": {}}, "Validation failed\n\nKey \"uri\" not found in p\n"),
        ("federation-upstream", {"value": {"uri": 5}}, "Validation failed\n\nuri should be list, actually was 5\n"),
        ("shovel", {"value": {"src-uri": "amqp://", "dest-uri": "amqp://"}},
         "Validation failed\n\nMust specify 'src-exchange' or 'src-queue'\n"),
        ("operator_policy", {"value": {"pattern": "x"}},
         "Validation failed\n\nKey \"definition\" not found in p\nKey \"priority\" not found in p\n"),
        ("operator_policy", {"value": {"pattern": "x", "definition": {"bogus": 5}}},
         "Validation failed\n\n[{&lt;&lt;\"bogus\"&gt;&gt;,5}] are not recognised policy settings\n"
         "Key \"priority\" not found in p\n"),
        ("policy", {"value": {"pattern": "x", "definition": {"max-length": 1}}},
         "policies may not be set using this method"),
    ]
    for component, body, reason in cases:
        error_body(api.call("PUT", param(component, v, "p"), body, want=400), "bad_request", reason,
                   "PUT %s %s" % (component, body))
    eq([p for p in api.get("/api/parameters") if p["vhost"] == v], [], "nothing was set")


@scenario("mgmt.parameters.unknown_vhost", "http")
def _(t):
    api = mgmt(t)
    nv = "conf-no-such-vhost-" + t.run_id
    error_body(api.call("PUT", param("federation-upstream", nv, "u"), {"value": UPSTREAM}, want=404), "not_found",
               "vhost_not_found", "PUT into an unknown vhost")
    error_body(api.call("GET", param("federation-upstream", nv), want=404), "Object Not Found", "Not Found")
    error_body(api.call("GET", param("federation-upstream", nv, "u"), want=404), "Object Not Found", "Not Found")
    eq(api.get("/api/parameters/conf-no-such-component"), [], "an unknown component lists nothing")


@scenario("mgmt.parameters.who_may", "http")
def _(t):
    api = mgmt(t)
    mine, other = vhost(t), vhost(t)
    api.put(param("federation-upstream", other, "theirs"), {"value": UPSTREAM})
    pm = user(t, "pw", "policymaker")
    grant(t, mine, pm)
    eq(api.put(param("federation-upstream", mine, "up"), {"value": UPSTREAM}, user=pm, password="pw").status, 201,
       "a policymaker sets one in its vhost")
    eq({p["vhost"] for p in api.get("/api/parameters", user=pm, password="pw")}, {mine}, "it lists its vhosts only")
    error_body(api.call("GET", param("federation-upstream", other, "theirs"), user=pm, password="pw", want=401),
               "not_authorised", "User not authorised to access object")
    mg = user(t, "pw", "management")
    grant(t, mine, mg)
    error_body(api.call("GET", "/api/parameters", user=mg, password="pw", want=401), "not_authorised",
               "User not authorised to access object")
    error_body(api.call("GET", "/api/global-parameters", user=mg, password="pw", want=401), "not_authorised",
               "User not authorised to access object")


@scenario("mgmt.parameters.global", "http")
def _(t):
    api = mgmt(t)
    name = t.name("global")
    p = track(t, path("/api/global-parameters", name))
    eq(api.put(p, {"value": {"a": {"b": 1}}}).status, 201, "PUT new global parameter")
    eq(api.put(p, {"value": "text"}).status, 204, "PUT it again")
    got = api.get(p)
    eq((list(got), got), (["value", "name"], {"value": "text", "name": name}), "GET global parameter")
    eq(find(api.get("/api/global-parameters"), "global parameter", name=name), {"name": name, "value": "text"},
       "in the list")
    cid = find(api.get("/api/global-parameters"), "cluster id", name="internal_cluster_id")["value"]
    check(cid.startswith("rabbitmq-cluster-id-") and len(cid) == 42, "internal_cluster_id %r" % cid)
    error_body(api.call("PUT", p, {}, want=400), "bad_request", "[{key_missing,value}]")
    eq(api.delete(p).status, 204, "DELETE global parameter")
    api.delete(p, want=404)


def parameters_of(api, v):
    """The vhost's parameters as (component, name, value), sorted."""
    return sorted((p["component"], p["name"], json.dumps(p["value"], sort_keys=True))
                  for p in api.get("/api/parameters") if p["vhost"] == v)


@scenario("mgmt.definitions.parameters", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/operator-policies", v, "op1"), OP)
    api.put(param("federation-upstream", v, "up1"), {"value": UPSTREAM})
    full = api.get("/api/definitions")
    mine = [p for p in full["parameters"] if p["vhost"] == v]
    eq(sorted((p["component"], p["name"]) for p in mine),
       [("federation-upstream", "up1"), ("operator_policy", "op1")], "exported parameters")
    eq(find(mine, "operator policy", name="op1"),
       {"value": OP, "vhost": v, "component": "operator_policy", "name": "op1"}, "an operator policy's export")
    eq([p for p in full["policies"] if p["vhost"] == v], [], "an operator policy is no policy")
    per = api.get(path("/api/definitions", v))
    eq(sorted(p["name"] for p in per["parameters"]), ["op1", "up1"], "the per-vhost export")
    check(any(g["name"] == "internal_cluster_id" for g in full["global_parameters"]), "global parameters exported")
    w = vhost(t)
    eq(api.post(path("/api/definitions", w), {"parameters": mine}).status, 204, "import into another vhost")
    eq(parameters_of(api, w), parameters_of(api, v), "the same parameters there")
    eq(api.get(path("/api/operator-policies", w, "op1"))["definition"], {"max-length": 2},
       "the imported operator policy is one")


@scenario("mgmt.definitions.round_trip_parameters", "http", needs_rabbit=True)
def _(t):
    api = mgmt(t)
    rabbit = rabbit_mgmt(t)
    v = vhost(t)
    api.put(path("/api/operator-policies", v, "op1"), OP)
    api.put(param("federation-upstream", v, "up1"), {"value": UPSTREAM})
    export = api.get(path("/api/definitions", v))
    rv = vhost(t, rabbit)
    r = rabbit.call("POST", path("/api/definitions", rv), export)
    eq(r.status, 204, "RabbitMQ accepts the export's parameters (%s)" % r.body[:300])
    eq(rabbit.get(path("/api/operator-policies", rv, "op1"))["definition"], {"max-length": 2},
       "the operator policy on RabbitMQ")
    eq(rabbit.get(param("federation-upstream", rv, "up1"))["value"], UPSTREAM, "the upstream on RabbitMQ")
    back = rabbit.get(path("/api/definitions", rv))
    w = vhost(t)
    eq(api.post(path("/api/definitions", w), back).status, 204, "and RabbitMQ's export back into Warren")
    eq(parameters_of(api, w), parameters_of(api, v), "the same parameters after the round trip")


@scenario("mgmt.node.feature_flags_and_listeners", "http")
def _(t):
    api = mgmt(t)
    flags = api.get("/api/feature-flags")
    for f in flags:
        eq(list(f), ["name", "desc", "doc_url", "state", "stability", "provided_by"], "flag keys")
    q = find(flags, "feature flag", name="quorum_queue")
    eq((q["state"], q["desc"]), ("enabled", "Support queues of type `quorum`"), "quorum_queue")
    protocols = [l["protocol"] for l in api.get("/api/overview")["listeners"]]
    check("http/prometheus" in protocols and "amqp" in protocols, "listeners %s" % protocols)
