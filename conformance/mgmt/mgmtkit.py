"""HTTP helpers for the management family: a small urllib client for
RabbitMQ's management API (CONF_MGMT), fresh vhosts and users that are
deleted when the scenario ends, bounded polling for statistics that lag
(RabbitMQ refreshes them every 5 s), and JSON type checks.

    api = mgmt(t)                         # the broker under test's API
    v = vhost(t)                          # a fresh vhost, guest may use it
    api.put(path("/api/queues", v, "q"), {"durable": False})
    q = poll(lambda: api.get(path("/api/queues", v, "q")), lambda q: q.get("messages") == 3, "3 messages")
"""
import base64
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

from confkit import Fail, eq, short

NUMBER = "number"    # int or float, never bool
ANY = "any"



class Resp:
    """One HTTP response: status, headers (lower-case names), body bytes."""

    def __init__(self, method, url, status, headers, body):
        self.method, self.url, self.status, self.headers, self.body = method, url, status, headers, body

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except ValueError as e:
            raise Fail("%s %s: body is not JSON (%s): %s" % (self.method, self.url, e, short(self.body)))

    def __repr__(self):
        return "%s %s -> %d %s" % (self.method, self.url, self.status, short(self.body, 200))


class Api:
    """A management API at base (http://host:port) as user/password."""

    def __init__(self, t, base, user, password, timeout=10):
        self.t, self.base, self.user, self.password, self.timeout = t, base.rstrip("/"), user, password, timeout

    def url(self, p):
        return self.base + p

    def call(self, method, p, body=None, *, data=None, user=None, password=None, auth=True, headers=None,
             want=None):
        """Sends one request; body is JSON-encoded, data is sent as is.
        want: the status (or tuple of statuses) required, else Fail."""
        hdrs = dict(headers or {})
        if body is not None:
            data = json.dumps(body).encode()
            hdrs.setdefault("Content-Type", "application/json")
        elif data is not None:
            hdrs.setdefault("Content-Type", "application/json")
        if auth:
            cred = "%s:%s" % (self.user if user is None else user, self.password if password is None else password)
            hdrs["Authorization"] = "Basic " + base64.b64encode(cred.encode()).decode()
        req = urllib.request.Request(self.url(p), data=data, method=method, headers=hdrs)
        self.t.step("%s %s" % (method, p))
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                resp = Resp(method, p, r.status, {k.lower(): v for k, v in r.headers.items()}, r.read())
        except urllib.error.HTTPError as e:
            resp = Resp(method, p, e.code, {k.lower(): v for k, v in e.headers.items()}, e.read())
        except (urllib.error.URLError, OSError) as e:
            raise Fail("%s %s%s: %s" % (method, self.base, p, getattr(e, "reason", e)))
        if want is not None:
            wants = want if isinstance(want, tuple) else (want,)
            if resp.status not in wants:
                raise Fail("%s %s: status %d, expected %s; body %s"
                           % (method, p, resp.status, "/".join(map(str, wants)), short(resp.body, 400)))
        return resp

    def get(self, p, **kw):
        """GET p, status 200; returns the decoded JSON."""
        kw.setdefault("want", 200)
        return self.call("GET", p, **kw).json()

    def put(self, p, body, **kw):
        kw.setdefault("want", (201, 204))
        return self.call("PUT", p, body, **kw)

    def post(self, p, body, **kw):
        kw.setdefault("want", (200, 201, 204))
        return self.call("POST", p, body, **kw)

    def delete(self, p, **kw):
        kw.setdefault("want", 204)
        return self.call("DELETE", p, **kw)


def path(*parts):
    """'/api/queues', vhost, name -> /api/queues/<vhost>/<name>, each part
    percent-encoded (the vhost '/' is %2F)."""
    head, rest = parts[0], parts[1:]
    return head + "".join("/" + urllib.parse.quote(str(p), safe="") for p in rest)


def mgmt(t):
    """The broker under test's management API (CONF_MGMT), as the broker's
    user. Fails the scenario clearly when there is none."""
    api = getattr(t, "_mgmt_api", None)
    if api is None:
        base = os.environ.get("CONF_MGMT") or ""
        if not base:
            why = os.environ.get("CONF_MGMT_WHY") or "no management URL (set MGMT=http://host:port)"
            raise Fail("management API unavailable: " + why)
        api = t._mgmt_api = Api(t, base, t.broker.user, t.broker.password)
    return api


def rabbit_mgmt(t):
    """The reference RabbitMQ's management API (CONF_RABBIT_MGMT), for the
    definitions round trip."""
    base = os.environ.get("CONF_RABBIT_MGMT") or ""
    if not base:
        raise Fail("no RabbitMQ management URL for the round trip (set RABBIT_MGMT=http://host:port)")
    return Api(t, base, os.environ.get("CONF_RABBIT_USER") or "guest",
               os.environ.get("CONF_RABBIT_PASS") or "guest")


def vhost(t, api=None, grant=True):
    """Creates a fresh vhost (deleted when the scenario ends); the broker's
    user gets .* permissions on it. Returns its name."""
    api = api or mgmt(t)
    name = t.name("vh")
    t.track_url(api.url(path("/api/vhosts", name)))
    eq(api.put(path("/api/vhosts", name), {}).status, 201, "PUT of a new vhost")
    if grant:
        api.put(path("/api/permissions", name, api.user), {"configure": ".*", "write": ".*", "read": ".*"})
    return name


def user(t, password="secret", tags="", api=None):
    """Creates a user (deleted when the scenario ends); returns its name."""
    api = api or mgmt(t)
    name = t.name("u")
    t.track_url(api.url(path("/api/users", name)))
    eq(api.put(path("/api/users", name), {"password": password, "tags": tags}).status, 201, "PUT of a new user")
    return name


def grant(t, vh, who, configure=".*", write=".*", read=".*", api=None):
    (api or mgmt(t)).put(path("/api/permissions", vh, who), {"configure": configure, "write": write, "read": read})


def track(t, p, api=None):
    """Deletes p (an API path) when the scenario ends."""
    api = api or mgmt(t)
    t.track_url(api.url(p))
    return p


def poll(fetch, pred, what, timeout=12.0, step=0.25):
    """Calls fetch() until pred(value) holds (RabbitMQ's statistics lag up
    to 5 s); returns the value, or Fails with the last one seen."""
    deadline = time.monotonic() + timeout
    while True:
        v = fetch()
        try:
            if pred(v):
                return v
        except (KeyError, TypeError, IndexError):
            pass
        if time.monotonic() >= deadline:
            raise Fail("%s: not within %g s; last seen %s" % (what, timeout, short(v, 600)))
        time.sleep(step)


def find(items, what, **match):
    """The one item of a list whose fields equal match."""
    hits = [i for i in items if all(i.get(k) == v for k, v in match.items())]
    if len(hits) != 1:
        raise Fail("%s: %d items with %s in %s" % (what, len(hits), match, short(items, 400)))
    return hits[0]


def _type_ok(v, want):
    if want == ANY:
        return True
    if want == NUMBER:
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if isinstance(want, tuple):
        return any(_type_ok(v, w) for w in want)
    if want is None:
        return v is None
    if want is int:
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, want)


def _type_name(want):
    if isinstance(want, tuple):
        return " or ".join(_type_name(w) for w in want)
    if want is None:
        return "null"
    return want if isinstance(want, str) else {dict: "object", list: "array", str: "string", int: "integer",
                                                bool: "boolean", float: "float"}.get(want, str(want))


def shape(obj, spec, what):
    """obj has every field of spec with its JSON type. spec maps a field to
    a type (str, int, bool, dict, list, NUMBER, ANY, None for null, a tuple
    of those) or to a nested spec (a dict) for an object field; a dotted
    field "a.b" is the same as {"a": {"b": ...}}."""
    if not isinstance(obj, dict):
        raise Fail("%s: expected an object, got %s" % (what, short(obj)))
    for field, want in spec.items():
        head, _, tail = field.partition(".")
        if tail:
            shape(obj.get(head) if isinstance(obj.get(head), dict) else {}, {tail: want}, "%s.%s" % (what, head))
            if head not in obj:
                raise Fail("%s: field %r missing (keys: %s)" % (what, head, sorted(obj)))
            continue
        if head not in obj:
            raise Fail("%s: field %r missing (keys: %s)" % (what, head, sorted(obj)))
        if isinstance(want, dict):
            shape(obj[head], want, "%s.%s" % (what, head))
        elif not _type_ok(obj[head], want):
            raise Fail("%s.%s: expected %s, got %s" % (what, head, _type_name(want), short(obj[head])))


PAGED = {"filtered_count": int, "item_count": int, "page": int, "page_count": int, "page_size": int,
         "total_count": int, "items": list}


def error_body(resp, error=None, reason=None, what="error body"):
    """RabbitMQ's {"error": ..., "reason": ...}; error/reason checked when given."""
    b = resp.json()
    shape(b, {"error": str, "reason": str}, what)
    if error is not None:
        eq(b["error"], error, what + " error")
    if reason is not None:
        eq(b["reason"], reason, what + " reason")
    return b


def reference_file(name):
    """The text of a capture in tests/reference/rabbitmq-3.10/ (RabbitMQ
    3.10.8's own answers, kept in the repository; RABBITMQ_REFERENCE may
    name another folder)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    tried = []
    for base in (os.environ.get("RABBITMQ_REFERENCE"), os.path.join(root, "tests", "reference", "rabbitmq-3.10")):
        if not base:
            continue
        p = os.path.normpath(os.path.join(base, name))
        tried.append(p)
        if os.path.isfile(p):
            with open(p, encoding="utf-8") as f:
                return f.read()
    raise Fail("reference capture %s not found (tried %s; set RABBITMQ_REFERENCE)" % (name, ", ".join(tried)))
