"""The management API's authorization table: who may use which route.

For every route Warren serves (the route tables in mgmt-ui/res_*.c, read
from the source so that a new route without a row fails) and every kind of
principal -- a user of each tag (none, management, policymaker, monitoring,
administrator) with and without permissions on the vhost the request
concerns, a wrong password, no credentials -- one request is sent and its
answer kept as a cell: the status, and for a refusal the error body
("401 not_authorised: Not management user").

authz_table.json holds the answers recorded from RabbitMQ 3.10.8 (by
authz_record.py, which runs these same probes) and, where Warren answers
otherwise on purpose, Warren's answer and why. scen_http_authz.py probes
the broker under test family by family and compares.

Every request is made on objects that exist: a fixture vhost V with a
queue, exchanges, bindings, a policy, an operator policy, a runtime
parameter (a federation upstream) and a connection (with a channel and a
consumer) of another user; requests that change
something get a fresh object each (created just before, as the broker's
administrator), so every principal's answer is independent of the others'.
"""
import json
import os
import re

from confkit import Fail
from mgmtkit import path, poll

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TABLE = os.path.join(HERE, "authz_table.json")

# (principal, tag): "+vh" has permissions on the vhost the request concerns,
# "-vh" only on another vhost.
TAGS = (("notag", ""), ("management", "management"), ("policymaker", "policymaker"),
        ("monitoring", "monitoring"), ("administrator", "administrator"))
PRINCIPALS = tuple("%s%svh" % (name, sign) for name, _ in TAGS for sign in "+-") + ("badpass", "nocreds")
PASSWORD = "authz-pw"
PRINCIPAL_NOTES = {
    "TAG+vh": "a user tagged TAG (notag: no tags) with permissions (.* .* .*) on the vhost the request concerns",
    "TAG-vh": "the same with permissions on another vhost only",
    "badpass": "the administrator+vh user with a wrong password",
    "nocreds": "no Authorization header",
}


def cell(resp, marks=None):
    """One answer as the table keeps it: "204", or "401 not_authorised:
    Not management user" (status, then error: reason), or the status alone
    when the body is empty, or the status and "<not JSON>". A list that a
    GET answers adds which of the fixture's objects it shows (marks: name ->
    mark, see Fixture.marks): "200 [V,other]"."""
    if 200 <= resp.status < 300:
        if marks is None or resp.method != "GET" or not resp.body.startswith(b"["):
            return str(resp.status)
        items = [json.dumps(i) for i in resp.json()]
        shown = [m for name, m in marks if any(json.dumps(name) in i for i in items)]
        return "%d [%s]" % (resp.status, ",".join(shown))
    if not resp.body:
        return str(resp.status)
    try:
        b = json.loads(resp.body.decode("utf-8"))
        return "%d %s: %s" % (resp.status, b["error"], b["reason"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return "%d <not JSON>" % resp.status


# ---------------------------------------------------------------- fixture

class Fixture:
    """The objects the probes act on, in fresh vhosts and users that the
    scenario's cleanup deletes. `t` names and tracks (confkit's Ctx or the
    recorder's stand-in), `api` is the administrator's Api."""

    def __init__(self, t, api, amqp_host, amqp_port):
        self.t, self.api, self.host, self.port = t, api, amqp_host, amqp_port
        self.conns = []
        self.users = {}  # principal -> user name
        self.victim = None  # the other user's connection, with a channel and a consumer
        self.victims, self.own_victims, self._own = {}, {}, {}  # principal -> connection name

    # names and objects
    def fresh(self, kind):
        return self.t.name(kind)

    def new_vhost(self, grant_to=()):
        v = self.fresh("vh")
        self.t.track_url(self.api.url(path("/api/vhosts", v)))
        self.api.put(path("/api/vhosts", v), {}, want=201)
        for u in grant_to:
            self.grant(v, u)
        return v

    def new_user(self, tags=""):
        u = self.fresh("u")
        self.t.track_url(self.api.url(path("/api/users", u)))
        self.api.put(path("/api/users", u), {"password": PASSWORD, "tags": tags}, want=201)
        return u

    def grant(self, v, u):
        self.api.put(path("/api/permissions", v, u), {"configure": ".*", "write": ".*", "read": ".*"})

    def setup(self):
        api = self.api
        self.V = self.new_vhost(grant_to=[api.user])
        self.W = self.new_vhost(grant_to=[api.user])
        for name, tags in TAGS:
            for sign in "+-":
                u = self.users["%s%svh" % (name, sign)] = self.new_user(tags)
                self.grant(self.V if sign == "+" else self.W, u)
        self.owner = self.new_user("")
        self.grant(self.V, self.owner)
        self.Q, self.Q2, self.X, self.X2 = "authz.q", "authz.q2", "authz.x", "authz.x2"
        for q in (self.Q, self.Q2):
            api.put(path("/api/queues", self.V, q), {"durable": True}, want=201)
        for x in (self.X, self.X2):
            api.put(path("/api/exchanges", self.V, x), {"type": "direct", "durable": True}, want=201)
        api.post(path("/api/bindings", self.V, "e", self.X, "q", self.Q), {"routing_key": "k"}, want=201)
        api.post(path("/api/bindings", self.V, "e", self.X, "e", self.X2), {"routing_key": "k"}, want=201)
        self.P, self.OP = "authz.p", "authz.op"
        api.put(path("/api/policies", self.V, self.P), {"pattern": "^authz-none$", "definition": {"max-length": 7}})
        api.put(path("/api/operator-policies", self.V, self.OP),
                {"pattern": "^authz-none$", "definition": {"max-length": 7}, "apply-to": "queues"})
        api.put(path("/api/topic-permissions", self.V, self.owner), {"exchange": "amq.topic", "write": ".*",
                                                                     "read": ".*"})
        self.UP = "authz.up"
        api.put(path("/api/parameters", "federation-upstream", self.V, self.UP), {"value": UPSTREAM})
        # limits for the limits routes' lists to show (or not); V only, which
        # has a parameter already (they are one in /api/parameters)
        api.put(path("/api/vhost-limits", self.V, "max-queues"), {"value": LIMIT})
        api.put(path("/api/user-limits", self.owner, "max-channels"), {"value": LIMIT})
        self.node = api.get("/api/overview")["node"]

    # connections
    def connect(self, user, vhost, consume=None):
        """An AMQP connection as user to vhost, with a channel (consuming
        from `consume` when given); returns its API name."""
        import pika
        params = pika.ConnectionParameters(host=self.host, port=self.port, virtual_host=vhost,
                                           credentials=pika.PlainCredentials(user, PASSWORD),
                                           socket_timeout=5, stack_timeout=10, connection_attempts=1)
        c = pika.BlockingConnection(params)
        self.conns.append(c)
        ch = c.channel()
        if consume:
            ch.basic_consume(consume, lambda *a: None, auto_ack=True)
        port = c._impl._transport._sock.getsockname()[1]
        return "127.0.0.1:%d -> %s:%d" % (port, self.host, self.port)

    def wait_listed(self, names):
        """Until the API lists a channel of each connection (RabbitMQ's
        statistics lag up to 5 s)."""
        want = set(names)
        poll(lambda: {c["connection_details"].get("name") for c in self.api.get("/api/channels")
                      if isinstance(c.get("connection_details"), dict)},
             lambda seen: want <= seen, "%d connections with channels listed" % len(want), timeout=20)

    def own_vhost(self, p):
        return self.V if "+" in p else self.W

    def owner_connection(self):
        if self.victim is None:
            self.victim = self.connect(self.owner, self.V, consume=self.Q)
            self.wait_listed([self.victim])
        return self.victim

    def own_connection(self, p):
        """p's own connection (its vhost), one per principal."""
        return self._own[p]

    def open_own(self):
        for p in PRINCIPALS[:10]:
            self._own[p] = self.connect(self.users[p], self.own_vhost(p))
        self.wait_listed(self._own.values())

    def close(self):
        for c in self.conns:
            try:
                if c.is_open:
                    c.close()
            except Exception:  # noqa: BLE001 -- closed by the broker meanwhile
                pass

    # requests
    def marks(self, p):
        """What a list may show, to tell whether it shows too much: objects
        of vhost V (the one "+vh" principals have permissions on), of W
        (where "-vh" ones have), of the other user (its connection, channel,
        consumer, permissions), of the principal itself. A name marks an
        item that holds it as a whole JSON string."""
        own = [(self.users[p], "own")] if p in self.users else []
        return [(self.V, "V"), (self.W, "W"), (self.owner, "other")] + own

    def creds(self, p):
        if p == "badpass":
            return self.users["administrator+vh"], "wrong-" + PASSWORD
        return self.users[p], PASSWORD

    def send(self, p, method, url_path, body):
        if p == "nocreds":
            return self.api.call(method, url_path, body, auth=False)
        user, password = self.creds(p)
        return self.api.call(method, url_path, body, user=user, password=password)


# ---------------------------------------------------------------- routes
#
# ROUTES: (method, pattern, target) -> how to make the request for
# principal p: build(fx, p) returns (path, body). The target tells rows of
# one route apart ("" when there is one row): "other" is another user's
# connection or channel, "own" the principal's.

ROUTES = {}
OWN_ROWS_SKIP = ("badpass", "nocreds")  # no own connection to speak of


def route(method, pattern, target=""):
    def register(fn):
        ROUTES[(method, pattern, target)] = fn
        return fn
    return register


def fixed(method, pattern, url_path, body=None, target=""):
    """A row whose request is the same for every principal (url_path: a
    path, or a function of the fixture giving it)."""
    route(method, pattern, target)(lambda fx, p: (url_path(fx) if callable(url_path) else url_path, body))

# overview (res_overview.c)
fixed("GET", "/api/overview", "/api/overview")
fixed("GET", "/api/nodes", "/api/nodes")
fixed("GET", "/api/nodes/{}", lambda fx: path("/api/nodes", fx.node))
fixed("GET", "/api/cluster", "/api/cluster")
fixed("GET", "/api/whoami", "/api/whoami")
fixed("GET", "/api/vhosts", "/api/vhosts")
fixed("GET", "/api/vhosts/{}", lambda fx: path("/api/vhosts", fx.V))
fixed("GET", "/api/extensions", "/api/extensions")
fixed("GET", "/api/environment", "/api/environment")

# connections, channels, consumers (res_conn.c)
fixed("GET", "/api/connections", "/api/connections")
fixed("GET", "/api/connections/{}", lambda fx: path("/api/connections", fx.owner_connection()), target="other")
route("GET", "/api/connections/{}", "own")(lambda fx, p: (path("/api/connections", fx.own_connection(p)), None))
route("DELETE", "/api/connections/{}", "other")(
    lambda fx, p: (path("/api/connections", fx.victims[p]), None))
route("DELETE", "/api/connections/{}", "own")(
    lambda fx, p: (path("/api/connections", fx.own_victims[p]), None))
fixed("GET", "/api/connections/{}/channels", lambda fx: path("/api/connections", fx.owner_connection(), "channels"),
      target="other")
route("GET", "/api/connections/{}/channels", "own")(
    lambda fx, p: (path("/api/connections", fx.own_connection(p), "channels"), None))
fixed("GET", "/api/vhosts/{}/connections", lambda fx: path("/api/vhosts", fx.V, "connections"))
fixed("GET", "/api/channels", "/api/channels")
fixed("GET", "/api/channels/{}", lambda fx: path("/api/channels", fx.owner_connection() + " (1)"), target="other")
route("GET", "/api/channels/{}", "own")(lambda fx, p: (path("/api/channels", fx.own_connection(p) + " (1)"), None))
fixed("GET", "/api/vhosts/{}/channels", lambda fx: path("/api/vhosts", fx.V, "channels"))
fixed("GET", "/api/consumers", "/api/consumers")
fixed("GET", "/api/consumers/{}", lambda fx: path("/api/consumers", fx.V))


# exchanges (res_exchange.c)
def fresh_exchange(fx):
    x = fx.fresh("x")
    fx.api.put(path("/api/exchanges", fx.V, x), {"type": "direct"}, want=201)
    return x


fixed("GET", "/api/exchanges", "/api/exchanges")
fixed("GET", "/api/exchanges/{}", lambda fx: path("/api/exchanges", fx.V))
fixed("GET", "/api/exchanges/{}/{}", lambda fx: path("/api/exchanges", fx.V, fx.X))
fixed("GET", "/api/exchanges/{}/{}/ring", lambda fx: path("/api/exchanges", fx.V, "authz-no-such-x", "ring"))
route("PUT", "/api/exchanges/{}/{}")(lambda fx, p: (path("/api/exchanges", fx.V, fx.fresh("x")), {"type": "direct"}))
route("DELETE", "/api/exchanges/{}/{}")(lambda fx, p: (path("/api/exchanges", fx.V, fresh_exchange(fx)), None))
fixed("GET", "/api/exchanges/{}/{}/bindings/source", lambda fx: path("/api/exchanges", fx.V, fx.X, "bindings",
                                                                      "source"))
fixed("GET", "/api/exchanges/{}/{}/bindings/destination", lambda fx: path("/api/exchanges", fx.V, fx.X2, "bindings",
                                                                           "destination"))
fixed("POST", "/api/exchanges/{}/{}/publish", lambda fx: path("/api/exchanges", fx.V, fx.X2, "publish"),
      {"properties": {}, "routing_key": "nowhere", "payload": "authz", "payload_encoding": "string"})


# queues (res_queue.c)
def fresh_queue(fx):
    q = fx.fresh("q")
    fx.api.put(path("/api/queues", fx.V, q), {"durable": False}, want=201)
    return q


fixed("GET", "/api/queues", "/api/queues")
fixed("GET", "/api/queues/{}", lambda fx: path("/api/queues", fx.V))
fixed("GET", "/api/queues/{}/{}", lambda fx: path("/api/queues", fx.V, fx.Q))
route("PUT", "/api/queues/{}/{}")(lambda fx, p: (path("/api/queues", fx.V, fx.fresh("q")), {"durable": False}))
route("DELETE", "/api/queues/{}/{}")(lambda fx, p: (path("/api/queues", fx.V, fresh_queue(fx)), None))
fixed("GET", "/api/queues/{}/{}/bindings", lambda fx: path("/api/queues", fx.V, fx.Q, "bindings"))
fixed("DELETE", "/api/queues/{}/{}/contents", lambda fx: path("/api/queues", fx.V, fx.Q2, "contents"))
fixed("POST", "/api/queues/{}/{}/get", lambda fx: path("/api/queues", fx.V, fx.Q2, "get"),
      {"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"})


# moving messages (res_move.c, Warren's)
def queue_with_move(fx, running):
    """A fresh queue whose messages are being moved (running: 5 messages
    at 1 a second) or were (an empty queue's move finishes at once)."""
    q = fresh_queue(fx)
    for i in range(5 if running else 0):
        fx.api.post(path("/api/exchanges", fx.V, "amq.default", "publish"),
                    {"properties": {}, "routing_key": q, "payload": "m%d" % i, "payload_encoding": "string"},
                    want=200)
    fx.api.post(path("/api/queues", fx.V, q, "move"), {"dest-queue": fx.Q2, "rate": 1}, want=202)
    return q


route("POST", "/api/queues/{}/{}/move")(lambda fx, p: (path("/api/queues", fx.V, fresh_queue(fx), "move"),
                                                       {"dest-queue": fx.Q2}))
route("GET", "/api/queues/{}/{}/move")(lambda fx, p: (path("/api/queues", fx.V, queue_with_move(fx, False), "move"),
                                                      None))
route("DELETE", "/api/queues/{}/{}/move")(
    lambda fx, p: (path("/api/queues", fx.V, queue_with_move(fx, True), "move"), None))


# bindings (res_binding.c)
def fresh_binding(fx, dtype, dest):
    key = fx.fresh("k")
    fx.api.post(path("/api/bindings", fx.V, "e", fx.X, dtype, dest), {"routing_key": key}, want=201)
    return key


fixed("GET", "/api/bindings", "/api/bindings")
fixed("GET", "/api/bindings/{}", lambda fx: path("/api/bindings", fx.V))
for dtype, dest in (("q", "Q"), ("e", "X2")):
    pat = "/api/bindings/{}/e/{}/%s/{}" % dtype
    fixed("GET", pat, lambda fx, d=dtype, a=dest: path("/api/bindings", fx.V, "e", fx.X, d, getattr(fx, a)))
    route("POST", pat)(lambda fx, p, d=dtype, a=dest: (path("/api/bindings", fx.V, "e", fx.X, d, getattr(fx, a)),
                                                       {"routing_key": fx.fresh("k")}))
    fixed("GET", pat + "/{}", lambda fx, d=dtype, a=dest: path("/api/bindings", fx.V, "e", fx.X, d,
                                                                getattr(fx, a), "k"))
    route("DELETE", pat + "/{}")(
        lambda fx, p, d=dtype, a=dest: (path("/api/bindings", fx.V, "e", fx.X, d, getattr(fx, a),
                                             fresh_binding(fx, d, getattr(fx, a))), None))


# vhosts (res_vhost.c): a fresh vhost each, where "+vh" gets permissions
def fresh_vhost_for(fx, p):
    return fx.new_vhost(grant_to=[fx.creds(p)[0]] if "+" in p else ())


def track_vhost(fx):
    v = fx.fresh("vh")
    fx.t.track_url(fx.api.url(path("/api/vhosts", v)))
    return v


route("PUT", "/api/vhosts/{}", "new")(lambda fx, p: (path("/api/vhosts", track_vhost(fx)), {}))
route("PUT", "/api/vhosts/{}", "existing")(lambda fx, p: (path("/api/vhosts", fresh_vhost_for(fx, p)),
                                                          {"description": "authz"}))
route("DELETE", "/api/vhosts/{}")(lambda fx, p: (path("/api/vhosts", fresh_vhost_for(fx, p)), None))
fixed("GET", "/api/vhosts/{}/permissions", lambda fx: path("/api/vhosts", fx.V, "permissions"))
fixed("GET", "/api/vhosts/{}/topic-permissions", lambda fx: path("/api/vhosts", fx.V, "topic-permissions"))


# users (res_user.c)
def track_user(fx):
    u = fx.fresh("u")
    fx.t.track_url(fx.api.url(path("/api/users", u)))
    return u


fixed("GET", "/api/users", "/api/users")
fixed("GET", "/api/users/without-permissions", "/api/users/without-permissions")
route("POST", "/api/users/bulk-delete")(lambda fx, p: ("/api/users/bulk-delete", {"users": [fx.new_user()]}))
fixed("GET", "/api/users/{}", lambda fx: path("/api/users", fx.owner))
route("PUT", "/api/users/{}")(lambda fx, p: (path("/api/users", track_user(fx)), {"password": "x", "tags": ""}))
route("DELETE", "/api/users/{}")(lambda fx, p: (path("/api/users", fx.new_user()), None))
fixed("GET", "/api/users/{}/permissions", lambda fx: path("/api/users", fx.owner, "permissions"))
fixed("GET", "/api/users/{}/topic-permissions", lambda fx: path("/api/users", fx.owner, "topic-permissions"))


# permissions and topic permissions (res_perm.c): on V, of a fresh user
PERM = {"configure": ".*", "write": ".*", "read": ".*"}
TOPIC = {"exchange": "amq.topic", "write": ".*", "read": ".*"}


def user_with(fx, what):
    u = fx.new_user()
    if what == "perm":
        fx.api.put(path("/api/permissions", fx.V, u), PERM, want=201)
    elif what == "topic":
        fx.api.put(path("/api/topic-permissions", fx.V, u), TOPIC, want=201)
    return u


fixed("GET", "/api/permissions", "/api/permissions")
fixed("GET", "/api/permissions/{}/{}", lambda fx: path("/api/permissions", fx.V, fx.owner))
route("PUT", "/api/permissions/{}/{}")(lambda fx, p: (path("/api/permissions", fx.V, fx.new_user()), PERM))
route("DELETE", "/api/permissions/{}/{}")(lambda fx, p: (path("/api/permissions", fx.V, user_with(fx, "perm")),
                                                         None))
fixed("GET", "/api/topic-permissions", "/api/topic-permissions")
for suffix in ((), ("amq.topic",)):
    pat = "/api/topic-permissions/{}/{}" + "/{}" * len(suffix)
    fixed("GET", pat, lambda fx, s=suffix: path("/api/topic-permissions", fx.V, fx.owner, *s))
    route("PUT", pat)(lambda fx, p, s=suffix: (path("/api/topic-permissions", fx.V, fx.new_user(), *s), TOPIC))
    route("DELETE", pat)(lambda fx, p, s=suffix: (path("/api/topic-permissions", fx.V, user_with(fx, "topic"), *s),
                                                  None))


# policies and operator policies (res_policy.c)
POLICY = {"pattern": "^authz-none$", "definition": {"max-length": 7}, "apply-to": "queues"}


def fresh_policy(fx, kind):
    name = fx.fresh("p")
    fx.api.put(path("/api/" + kind, fx.V, name), POLICY, want=201)
    return name


for kind, attr in (("policies", "P"), ("operator-policies", "OP")):
    fixed("GET", "/api/" + kind, "/api/" + kind)
    fixed("GET", "/api/%s/{}" % kind, lambda fx, k=kind: path("/api/" + k, fx.V))
    fixed("GET", "/api/%s/{}/{}" % kind, lambda fx, k=kind, a=attr: path("/api/" + k, fx.V, getattr(fx, a)))
    route("PUT", "/api/%s/{}/{}" % kind)(lambda fx, p, k=kind: (path("/api/" + k, fx.V, fx.fresh("p")), POLICY))
    route("DELETE", "/api/%s/{}/{}" % kind)(lambda fx, p, k=kind: (path("/api/" + k, fx.V, fresh_policy(fx, k)),
                                                                   None))

# runtime parameters (res_parameter.c): a federation upstream in V
UPSTREAM = {"uri": "amqp://authz.example"}


def fresh_parameter(fx):
    name = fx.fresh("up")
    fx.api.put(path("/api/parameters", "federation-upstream", fx.V, name), {"value": UPSTREAM}, want=201)
    return name


def fresh_global(fx, made):
    name = fx.fresh("g")
    fx.t.track_url(fx.api.url(path("/api/global-parameters", name)))
    if made:
        fx.api.put(path("/api/global-parameters", name), {"value": 1}, want=201)
    return name


fixed("GET", "/api/parameters", "/api/parameters")
fixed("GET", "/api/parameters/{}", "/api/parameters/federation-upstream")
fixed("GET", "/api/parameters/{}/{}", lambda fx: path("/api/parameters", "federation-upstream", fx.V))
fixed("GET", "/api/parameters/{}/{}/{}", lambda fx: path("/api/parameters", "federation-upstream", fx.V, fx.UP))
route("PUT", "/api/parameters/{}/{}/{}")(
    lambda fx, p: (path("/api/parameters", "federation-upstream", fx.V, fx.fresh("up")), {"value": UPSTREAM}))
route("DELETE", "/api/parameters/{}/{}/{}")(
    lambda fx, p: (path("/api/parameters", "federation-upstream", fx.V, fresh_parameter(fx)), None))
fixed("GET", "/api/global-parameters", "/api/global-parameters")
fixed("GET", "/api/global-parameters/{}", "/api/global-parameters/internal_cluster_id")
route("PUT", "/api/global-parameters/{}")(
    lambda fx, p: (path("/api/global-parameters", fresh_global(fx, False)), {"value": 1}))
route("DELETE", "/api/global-parameters/{}")(
    lambda fx, p: (path("/api/global-parameters", fresh_global(fx, True)), None))

# limits (res_limits.c): V's and the other user's, high enough never to bite
LIMIT = 100000
fixed("GET", "/api/vhost-limits", "/api/vhost-limits")
fixed("GET", "/api/vhost-limits/{}", lambda fx: path("/api/vhost-limits", fx.V))
fixed("PUT", "/api/vhost-limits/{}/{}", lambda fx: path("/api/vhost-limits", fx.V, "max-queues"), {"value": LIMIT})
fixed("DELETE", "/api/vhost-limits/{}/{}", lambda fx: path("/api/vhost-limits", fx.V, "max-connections"))
fixed("GET", "/api/user-limits", "/api/user-limits")
fixed("GET", "/api/user-limits/{}", lambda fx: path("/api/user-limits", fx.owner))
fixed("PUT", "/api/user-limits/{}/{}", lambda fx: path("/api/user-limits", fx.owner, "max-channels"),
      {"value": LIMIT})
fixed("DELETE", "/api/user-limits/{}/{}", lambda fx: path("/api/user-limits", fx.owner, "max-connections"))

# node operations (res_node.c); the watermark set is the default one
fixed("GET", "/api/feature-flags", "/api/feature-flags")
fixed("PUT", "/api/nodes/{}/vm-memory-high-watermark", lambda fx: path("/api/nodes", fx.node,
                                                                       "vm-memory-high-watermark"),
      {"relative": 0.4})
fixed("POST", "/api/nodes/{}/reload-certificates", lambda fx: path("/api/nodes", fx.node, "reload-certificates"))

# health checks (res_health.c)
for check in ("alarms", "local-alarms", "virtual-hosts", "node-is-quorum-critical", "node-is-mirror-sync-critical"):
    fixed("GET", "/api/health/checks/" + check, "/api/health/checks/" + check)
fixed("GET", "/api/health/checks/port-listener/{}", lambda fx: "/api/health/checks/port-listener/%d" % fx.port)
fixed("GET", "/api/health/checks/protocol-listener/{}", "/api/health/checks/protocol-listener/amqp")
fixed("GET", "/api/health/checks/certificate-expiration/{}/{}", "/api/health/checks/certificate-expiration/1/months")
fixed("GET", "/api/aliveness-test/{}", lambda fx: path("/api/aliveness-test", fx.V))

# definitions (res_definitions.c)
fixed("GET", "/api/definitions", "/api/definitions")
fixed("POST", "/api/definitions", "/api/definitions", {})
fixed("GET", "/api/definitions/{}", lambda fx: path("/api/definitions", fx.V))
fixed("POST", "/api/definitions/{}", lambda fx: path("/api/definitions", fx.V), {})


# Which scenario probes which routes: the route table file's family.
def family(pattern):
    head = pattern.split("/")[2]
    if pattern.endswith("/move"):
        return "move"
    if pattern in ("/api/vhosts/{}/connections", "/api/vhosts/{}/channels"):
        return "connections"
    return {"overview": "overview", "nodes": "overview", "cluster": "overview", "whoami": "overview", "extensions": "overview",
            "environment": "overview", "feature-flags": "overview", "parameters": "parameters",
            "global-parameters": "parameters", "connections": "connections", "channels": "connections",
            "consumers": "connections", "exchanges": "exchanges", "queues": "queues", "bindings": "bindings",
            "vhosts": "vhosts", "users": "users", "permissions": "permissions", "topic-permissions": "permissions",
            "policies": "policies", "operator-policies": "policies", "health": "health",
            "aliveness-test": "health", "definitions": "definitions", "vhost-limits": "limits",
            "user-limits": "limits"}[head]


FAMILIES = ("overview", "connections", "exchanges", "queues", "move", "bindings", "vhosts", "users", "permissions",
            "policies", "parameters", "health", "definitions", "limits")


def rows_of(fam):
    return [k for k in ROUTES if family(k[1]) == fam]


def prepare(fx, keys):
    """Connections the rows need, opened together (RabbitMQ lists a new
    one only after its first statistics, up to 5 s later)."""
    if not any(k[2] in ("other", "own") for k in keys):
        return
    names = [fx.owner_connection()]
    if any(k[2] == "own" for k in keys):
        fx.open_own()
    if ("DELETE", "/api/connections/{}", "other") in keys:
        fx.victims = {p: fx.connect(fx.owner, fx.V) for p in PRINCIPALS}
        names += fx.victims.values()
    if ("DELETE", "/api/connections/{}", "own") in keys:
        fx.own_victims = {p: fx.connect(fx.users[p], fx.own_vhost(p)) for p in PRINCIPALS[:10]}
        names += fx.own_victims.values()
    fx.wait_listed(names)


def probe(fx, keys):
    """Sends every row's request as every principal: {key: {principal: cell}}."""
    prepare(fx, keys)
    out = {}
    for key in keys:
        method, pattern, target = key
        cells = out[key] = {}
        for p in PRINCIPALS:
            if target == "own" and p in OWN_ROWS_SKIP:
                continue
            url_path, body = ROUTES[key](fx, p)
            cells[p] = cell(fx.send(p, method, url_path, body), fx.marks(p))
    return out


# ---------------------------------------------------------------- the table

def load_table():
    with open(TABLE, encoding="utf-8") as f:
        return json.load(f)


def row_key(row):
    return row["method"], row["pattern"], row.get("target", "")


def expected(table, row, warren):
    """The answers row expects from Warren (warren=True) or RabbitMQ;
    None for a Warren-only row on RabbitMQ."""
    rabbit = row.get("rabbitmq")
    if not warren:
        return rabbit
    if rabbit is None:  # Warren's own route: as the route it is like
        like = next(r for r in table["routes"] if "%s %s" % (r["method"], r["pattern"]) == row["like"])
        rabbit = {p: row["success"] if c[0] == "2" else c for p, c in like["rabbitmq"].items()}
    want = {p: rule_applied(table["rules"], rabbit, p) for p in rabbit}
    want.update(row.get("warren", {}))
    return want


def rule_applied(rules, rabbit, p):
    """p's answer from Warren by the table's rules: a fixed answer
    ("warren") in place of RabbitMQ's, or another principal's ("as"), when
    that one's matches "when"."""
    c = rabbit[p]
    for rule in rules:
        if p not in rule["principals"] or rule["rabbitmq"] != c:
            continue
        if "warren" in rule:
            return rule["warren"]
        if re.fullmatch(rule["when"], rabbit[rule["as"]]):
            return rabbit[rule["as"]]
    return c


def compare(table, observed, warren):
    """Mismatches between observed ({key: {principal: cell}}) and the
    table, one line each."""
    rows = {row_key(r): r for r in table["routes"]}
    bad = []
    for key, got in observed.items():
        if key not in rows:
            bad.append("%s %s %s: no row in authz_table.json" % key)
            continue
        want = expected(table, rows[key], warren)
        if want is None:
            continue
        for p in PRINCIPALS:
            if got.get(p) != want.get(p):
                bad.append("%s %s%s as %s: got %r, expected %r" % (key[0], key[1], " (%s)" % key[2] if key[2] else "",
                                                                  p, got.get(p), want.get(p)))
    return bad


# ---------------------------------------------------------------- routes in the source

ROW_RE = re.compile(r'\{\s*HTTP_([A-Z]+)\s*,\s*"([^"]+)"')
TABLE_RE = re.compile(r"const\s+mgmt_route\s+(\w+)\s*\[\]\s*=\s*\{(.*?)\n\};", re.S)


def source_routes():
    """(method, pattern) of every row of every route table in mgmt-ui/*.c,
    and the tables' names."""
    routes, tables = set(), []
    src = os.path.join(ROOT, "mgmt-ui")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".c"):
            continue
        with open(os.path.join(src, name), encoding="utf-8") as f:
            text = f.read()
        for m in TABLE_RE.finditer(text):
            tables.append(m.group(1))
            rows = ROW_RE.findall(m.group(2))
            if not rows:
                raise Fail("%s: route table %s has no rows this test can read" % (name, m.group(1)))
            routes.update(rows)
    return routes, tables


# Routes not in the table yet (issue 20's streams, issue 22's shovels and
# federation links): rabbitmq_stream_management's, rabbitmq_shovel_management's
# and rabbitmq_federation_management's routes, Warren's super stream and
# stream viewer routes. Their answers for
# every user tag are asserted by the integration tests named here instead;
# their rows, recorded from a RabbitMQ with rabbitmq_stream_management, are
# still to be added.
_STREAM_TESTS = "tests/integration/py/test_mgmt_stream.py test_every_tag"
_SUPER_TESTS = "tests/integration/py/test_mgmt_super_stream.py test_every_tag"
_SHOVEL_TESTS = "tests/integration/py/test_shovel.py test_routes_for_every_tag"
_FEDERATION_TESTS = "tests/integration/py/test_federation.py test_who_may_read_the_links"
NOT_PROBED = {
    ("GET", "/api/shovels"): _SHOVEL_TESTS,
    ("GET", "/api/shovels/{}"): _SHOVEL_TESTS,
    ("GET", "/api/shovels/vhost/{}/{}"): _SHOVEL_TESTS,
    ("DELETE", "/api/shovels/vhost/{}/{}"): _SHOVEL_TESTS,
    ("DELETE", "/api/shovels/vhost/{}/{}/restart"): _SHOVEL_TESTS,
    ("GET", "/api/federation-links"): _FEDERATION_TESTS,
    ("GET", "/api/federation-links/{}"): _FEDERATION_TESTS,
    ("GET", "/api/federation-links/state/down"): _FEDERATION_TESTS,
    ("GET", "/api/federation-links/{}/state/down"): _FEDERATION_TESTS,
    ("DELETE", "/api/federation-links/vhost/{}/{}/{}/restart"): _FEDERATION_TESTS,
    ("GET", "/api/stream/connections"): _STREAM_TESTS,
    ("GET", "/api/stream/connections/{}"): _STREAM_TESTS,
    ("GET", "/api/stream/connections/{}/{}"): _STREAM_TESTS,
    ("DELETE", "/api/stream/connections/{}/{}"): _STREAM_TESTS,
    ("GET", "/api/stream/connections/{}/{}/consumers"): _STREAM_TESTS,
    ("GET", "/api/stream/connections/{}/{}/publishers"): _STREAM_TESTS,
    ("GET", "/api/stream/consumers"): _STREAM_TESTS,
    ("GET", "/api/stream/consumers/{}"): _STREAM_TESTS,
    ("GET", "/api/stream/publishers"): _STREAM_TESTS,
    ("GET", "/api/stream/publishers/{}"): _STREAM_TESTS,
    ("GET", "/api/stream/publishers/{}/{}"): _STREAM_TESTS,
    ("GET", "/api/streams/{}/{}/messages"): _STREAM_TESTS,
    ("GET", "/api/stream/super-streams"): _SUPER_TESTS,
    ("GET", "/api/stream/super-streams/{}"): _SUPER_TESTS,
    ("GET", "/api/stream/super-streams/{}/{}"): _SUPER_TESTS,
    ("PUT", "/api/stream/super-streams/{}/{}"): _SUPER_TESTS,
    ("DELETE", "/api/stream/super-streams/{}/{}"): _SUPER_TESTS,
}


# Warren's own routes: no RabbitMQ answer to record. Each row names the
# RabbitMQ route whose rule it follows ("analogy") and its own success
# status; expected() derives its answers from that route's recorded ones.
WARREN_ONLY = {
    ("GET", "/api/cluster", ""): ("GET /api/nodes", "404 Object Not Found: Not Found",
                                  "the cluster's status: monitoring users and administrators, as /api/nodes; "
                                  "a single node (this table's broker) has no cluster and answers them 404 "
                                  "(a cluster's leader 200: tests/integration/py/test_cluster_mgmt.py)"),
    ("GET", "/api/exchanges/{}/{}/ring", ""): ("GET /api/exchanges/{}/{}", "404 Object Not Found: Not Found",
                                               "an x-consistent-hash exchange's ring: as GET of the exchange "
                                               "(access to its vhost); the probe names a missing exchange"),
    ("GET", "/api/environment", ""): ("GET /api/definitions", "200",
                                      "the effective configuration: administrators only, as RabbitMQ 3.13's "
                                      "GET /api/config/effective (and 3.10's GET /api/definitions)"),
    ("POST", "/api/queues/{}/{}/move", ""): ("POST /api/queues/{}/{}/get", "202",
                                             "takes messages from the queue as a get does (read permission on the "
                                             "queue; write on the exchange they go through, the default one here)"),
    ("GET", "/api/queues/{}/{}/move", ""): ("GET /api/queues/{}/{}", "200",
                                            "shows a queue's state: as GET of the queue (access to its vhost)"),
    ("DELETE", "/api/queues/{}/{}/move", ""): ("DELETE /api/queues/{}/{}/contents", "204",
                                               "stops taking messages from the queue: as a purge (read permission "
                                               "on the queue)"),
    ("PUT", "/api/nodes/{}/vm-memory-high-watermark", ""): ("GET /api/definitions", "204",
                                                            "changes the node's memory watermark "
                                                            "(rabbitmqctl set_vm_memory_high_watermark): "
                                                            "administrators only"),
    ("POST", "/api/nodes/{}/reload-certificates", ""): ("GET /api/definitions", "204",
                                                        "reloads every TLS listener's certificates and keys (warrenctl reload_certificates; rabbitmqctl has no such command over HTTP): administrators only"),
}
