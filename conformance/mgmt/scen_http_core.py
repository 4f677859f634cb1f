"""Management API: overview, nodes, whoami, health checks, aliveness, and
the error cases every endpoint shares (credentials, tags, malformed JSON,
unknown objects and paths, methods, the body size limit)."""
from confkit import scenario, eq, check
from mgmtkit import mgmt, vhost, user, path, shape, error_body, poll, NUMBER, ANY

OVERVIEW = {"management_version": str, "rates_mode": str, "product_name": str, "product_version": str,
            "rabbitmq_version": str, "cluster_name": str, "node": str, "disable_stats": bool,
            "exchange_types": list, "listeners": list, "message_stats": dict, "churn_rates": dict,
            "object_totals": {"connections": int, "channels": int, "exchanges": int, "queues": int, "consumers": int},
            "statistics_db_event_queue": int, "contexts": list,
            "sample_retention_policies": {"global": list, "basic": list, "detailed": list}}
NODE = {"name": str, "type": str, "running": bool, "mem_used": int, "mem_limit": int, "mem_alarm": bool,
        "disk_free": int, "disk_free_limit": int, "disk_free_alarm": bool, "fd_used": int, "fd_total": int,
        "sockets_used": int, "sockets_total": int, "uptime": int, "processors": int, "partitions": list,
        "os_pid": str, "rates_mode": str, "exchange_types": list, "auth_mechanisms": list,
        "mem_used_details": {"rate": NUMBER}}
REALM = 'Basic realm="RabbitMQ Management"'


@scenario("mgmt.overview.fields", "http", quick=True)
def _(t):
    api = mgmt(t)
    o = api.get("/api/overview")
    shape(o, OVERVIEW, "overview")
    types = sorted(x["name"] for x in o["exchange_types"])
    for x in o["exchange_types"]:
        shape(x, {"name": str, "description": str, "enabled": bool}, "exchange_types[]")
    for kind in ("direct", "fanout", "headers", "topic"):
        check(kind in types, "exchange type %s in overview: %s" % (kind, types))
    amqp = [x for x in o["listeners"] if x.get("protocol") == "amqp"]
    check(amqp, "an amqp listener in overview.listeners: %s" % o["listeners"])
    shape(amqp[0], {"node": str, "protocol": str, "ip_address": str, "port": int}, "listeners[]")
    eq(amqp[0]["port"], t.broker.port, "AMQP listener port")
    for k in ("connection_created", "channel_created", "queue_declared"):
        shape(o["churn_rates"], {k: int, k + "_details": {"rate": NUMBER}}, "churn_rates")
    check(o["object_totals"]["exchanges"] >= 7, "at least the 7 exchanges of vhost /")


@scenario("mgmt.overview.object_totals", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/queues", v, "q1"), {})
    # Other clients of a shared broker move these too: the 7 exchanges of
    # "/" and of the new vhost, and its queue, are lower bounds.
    poll(lambda: api.get("/api/overview")["object_totals"], lambda o: o["queues"] >= 1 and o["exchanges"] >= 14,
         "object_totals counts the new vhost's queue and exchanges")


@scenario("mgmt.nodes.fields", "http")
def _(t):
    api = mgmt(t)
    nodes = api.get("/api/nodes")
    eq(len(nodes), 1, "one node")
    n = nodes[0]
    shape(n, NODE, "node")
    eq((n["running"], n["mem_alarm"], n["disk_free_alarm"], n["partitions"]), (True, False, False, []),
       "running, no alarms, no partitions")
    check(n["mem_limit"] > 0 and n["mem_used"] > 0 and n["fd_total"] > 0 and n["processors"] > 0,
          "positive mem_limit, mem_used, fd_total, processors")
    mechs = [m["name"] for m in n["auth_mechanisms"] if m.get("enabled")]
    check("PLAIN" in mechs, "PLAIN enabled: %s" % mechs)
    one = api.get(path("/api/nodes", n["name"]))
    eq((one["name"], one["running"]), (n["name"], True), "GET /api/nodes/{name}")
    eq(api.get("/api/overview")["node"], n["name"], "overview.node names the node")


@scenario("mgmt.whoami.guest", "http")
def _(t):
    eq(mgmt(t).get("/api/whoami"), {"name": t.broker.user, "tags": ["administrator"]}, "whoami")


@scenario("mgmt.whoami.tags", "http")
def _(t):
    api = mgmt(t)
    u = user(t, "pw1", "monitoring,conf-free-tag")
    eq(api.get("/api/whoami", user=u, password="pw1"), {"name": u, "tags": ["monitoring", "conf-free-tag"]},
       "whoami of a monitoring user with a free-form tag")


@scenario("mgmt.health.checks", "http")
def _(t):
    api = mgmt(t)
    for p in ("/api/health/checks/alarms", "/api/health/checks/local-alarms"):
        eq(api.get(p), {"status": "ok"}, p)
    # A vhost that another client is creating or deleting right now is
    # briefly reported down (503) on a shared broker: poll.
    poll(lambda: api.call("GET", "/api/health/checks/virtual-hosts"),
         lambda r: r.status == 200 and r.json() == {"status": "ok"}, "virtual-hosts check ok")
    m = user(t, "pw1", "management")
    eq(api.get("/api/health/checks/alarms", user=m, password="pw1"), {"status": "ok"}, "alarms as a management user")


@scenario("mgmt.health.aliveness", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    eq(api.get(path("/api/aliveness-test", v)), {"status": "ok"}, "aliveness-test of a vhost")
    error_body(api.call("GET", path("/api/aliveness-test", "conf-no-such-vhost-" + t.run_id), want=404),
               "Object Not Found", "Not Found", "aliveness-test of an unknown vhost")


@scenario("mgmt.errors.no_credentials", "http")
def _(t):
    api = mgmt(t)
    for p in ("/api/overview", "/api/queues", "/api/whoami"):
        r = api.call("GET", p, auth=False, want=401)
        eq(r.headers.get("www-authenticate"), REALM, "%s WWW-Authenticate" % p)


@scenario("mgmt.errors.wrong_credentials", "http")
def _(t):
    api = mgmt(t)
    for who, pw in ((t.broker.user, "conf-wrong-password"), ("conf-no-such-user-" + t.run_id, "x")):
        r = api.call("GET", "/api/overview", user=who, password=pw, want=401)
        eq(r.headers.get("www-authenticate"), REALM, "WWW-Authenticate")
        error_body(r, "not_authorized", "Login failed", "wrong credentials")
    r = api.call("PUT", path("/api/vhosts", t.name("vh")), {}, password="conf-wrong-password", want=401)
    error_body(r, "not_authorized", "Login failed", "PUT with wrong credentials")


@scenario("mgmt.errors.user_without_password", "http")
def _(t):
    api = mgmt(t)
    u = t.name("u")
    t.track_url(api.url(path("/api/users", u)))
    api.put(path("/api/users", u), {"password_hash": "", "tags": "administrator"}, want=201)
    eq(api.get(path("/api/users", u))["password_hash"], "", "password_hash")
    for pw in ("", "x"):
        error_body(api.call("GET", "/api/whoami", user=u, password=pw, want=401), "not_authorized", "Login failed",
                   "login of a user without a password")


@scenario("mgmt.errors.missing_tag", "http", quick=True)
def _(t):
    api = mgmt(t)
    none = user(t, "pw", "")
    mgmt_user = user(t, "pw", "management")
    mon = user(t, "pw", "monitoring")
    pol = user(t, "pw", "policymaker")
    v = vhost(t)

    def refused(who, method, p, reason, body=None):
        r = api.call(method, p, body, user=who, password="pw", want=401)
        error_body(r, "not_authorised", reason, "%s %s as %s" % (method, p, who))
    refused(none, "GET", "/api/overview", "Not management user")
    refused(none, "GET", "/api/whoami", "Not management user")
    refused(mgmt_user, "GET", "/api/users", "Not administrator user")
    refused(mgmt_user, "GET", "/api/nodes", "Not monitor user")
    refused(mgmt_user, "GET", path("/api/queues", v), "User not authorised to access virtual host")
    refused(mon, "GET", "/api/users", "Not administrator user")
    refused(mon, "PUT", path("/api/vhosts", t.name("vh")), "Not administrator user", {})
    refused(pol, "GET", "/api/users", "Not administrator user")
    eq(api.get("/api/vhosts", user=mgmt_user, password="pw"), [], "a management user sees no vhost without permissions")
    eq(len(api.get("/api/nodes", user=mon, password="pw")), 1, "a monitoring user sees the node")


@scenario("mgmt.errors.malformed_json", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    name = t.name("vh")
    t.track_url(api.url(path("/api/vhosts", name)))
    for data in (b'{"description":', b"{not json}", b"[1,2]"):
        b = error_body(api.call("PUT", path("/api/vhosts", name), data=data, want=400), "bad_request",
                       what="PUT %r" % data)
        check(b["reason"], "a reason for %r" % data)
    api.call("GET", path("/api/vhosts", name), want=404)
    error_body(api.call("PUT", path("/api/queues", v, "q1"), data=b'{"durable": tru', want=400), "bad_request",
               what="PUT queue with bad JSON")
    api.call("GET", path("/api/queues", v, "q1"), want=404)
    error_body(api.call("POST", path("/api/exchanges", v, "amq.default", "publish"), data=b"{]", want=400),
               "bad_request", what="publish with bad JSON")


@scenario("mgmt.errors.json_string_body", "http")
def _(t):
    api = mgmt(t)
    name = t.name("vh")
    t.track_url(api.url(path("/api/vhosts", name)))
    b = error_body(api.call("PUT", path("/api/vhosts", name), data=b'"str"', want=400), "bad_request")
    eq(b["reason"], "invalid payload: the request body JSON-decoded to a string. Is the input doubly-JSON-encoded?",
       "reason")
    api.call("GET", path("/api/vhosts", name), want=404)


@scenario("mgmt.errors.not_found", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    nv = "conf-no-such-vhost-" + t.run_id
    for p in (path("/api/vhosts", nv), path("/api/users", "conf-no-such-user-" + t.run_id),
              path("/api/queues", v, "nope"), path("/api/exchanges", v, "nope"), path("/api/queues", nv),
              path("/api/permissions", v, "conf-no-such-user-" + t.run_id), path("/api/policies", v, "nope"),
              path("/api/connections", "conf no such connection"), path("/api/channels", "conf no such channel"),
              "/api/conf-no-such-endpoint"):
        error_body(api.call("GET", p, want=404), "Object Not Found", "Not Found", "GET " + p)
    for p in (path("/api/vhosts", nv), path("/api/users", "conf-no-such-user-" + t.run_id),
              path("/api/queues", v, "nope"), path("/api/exchanges", v, "nope"), path("/api/policies", v, "nope")):
        error_body(api.call("DELETE", p, want=404), "Object Not Found", "Not Found", "DELETE " + p)


@scenario("mgmt.errors.method_not_allowed", "http")
def _(t):
    api = mgmt(t)
    for method, p in (("POST", "/api/overview"), ("DELETE", "/api/whoami"), ("PUT", "/api/nodes")):
        r = api.call(method, p, {} if method != "DELETE" else None, want=405)
        allow = [m.strip() for m in (r.headers.get("allow") or "").split(",")]
        check("GET" in allow, "%s %s: Allow header lists GET: %r" % (method, p, r.headers.get("allow")))


@scenario("mgmt.errors.body_too_large", "http", timeout=60)
def _(t):
    # RabbitMQ 3.10 refuses a request body over its limit (a little over
    # 8 MB) with 400 and this reason, before decoding it; nothing is created.
    api = mgmt(t)
    name = t.name("vh")
    t.track_url(api.url(path("/api/vhosts", name)))
    data = b'{"description": "' + b"x" * (9 << 20) + b'"}'
    b = error_body(api.call("PUT", path("/api/vhosts", name), data=data, want=400), "bad_request")
    eq(b["reason"], "Exceeded HTTP request body size limit", "reason")
    api.call("GET", path("/api/vhosts", name), want=404)
    small = b'{"description": "' + b"x" * (1 << 20) + b'"}'
    eq(api.call("PUT", path("/api/vhosts", name), data=small).status, 201, "a 1 MiB body is accepted")
    eq(len(api.get(path("/api/vhosts", name))["description"]), 1 << 20, "its description")


@scenario("mgmt.errors.error_body_shape", "http")
def _(t):
    api = mgmt(t)
    r = api.call("GET", "/api/queues/conf-no-such-vhost-%s/q" % t.run_id, want=404)
    eq(r.headers.get("content-type", "").split(";")[0], "application/json", "error content-type")
    eq(sorted(r.json()), ["error", "reason"], "error body keys")
    r = api.call("GET", "/api/overview")
    eq(r.headers.get("content-type", "").split(";")[0], "application/json", "content-type")
    shape(r.json(), {"node": ANY}, "overview")
