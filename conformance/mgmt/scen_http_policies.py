"""Management API: policies and operator policies -- CRUD, validation, which
policy a queue gets, the merge with operator policies, and that a change
applies to queues that already exist."""
from confkit import scenario, eq, check, wait_count
from mgmtkit import mgmt, vhost, path, shape, error_body, poll

POLICY = {"vhost": str, "name": str, "pattern": str, "apply-to": str, "definition": dict, "priority": int}


def queue_policy(api, v, q, pred, what):
    return poll(lambda: api.get(path("/api/queues", v, q)), lambda x: "policy" in x and pred(x), what)


@scenario("mgmt.policies.put_get_delete", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    p = path("/api/policies", v, "p1")
    body = {"pattern": "^conf\\.", "definition": {"max-length": 3, "message-ttl": 60000}, "priority": 2,
            "apply-to": "queues"}
    eq(api.put(p, body).status, 201, "PUT new policy")
    eq(api.put(p, body).status, 204, "PUT same policy")
    got = api.get(p)
    shape(got, POLICY, "policy")
    eq(got, dict(body, vhost=v, name="p1"), "GET policy")
    eq(api.get(path("/api/policies", v)), [got], "/api/policies/{vhost}")
    check(got in api.get("/api/policies"), "in /api/policies")
    api.put(path("/api/policies", v, "p2"), {"pattern": ".*", "definition": {"expires": 100000}})
    d = api.get(path("/api/policies", v, "p2"))
    eq((d["apply-to"], d["priority"]), ("all", 0), "apply-to and priority defaults")
    eq(api.delete(p).status, 204, "DELETE policy")
    error_body(api.call("GET", p, want=404), "Object Not Found", "Not Found")
    api.delete(p, want=404)


@scenario("mgmt.policies.validation", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    p = path("/api/policies", v, "bad")

    def refused(body, starts=None, contains=()):
        b = error_body(api.call("PUT", p, body, want=400), "bad_request", what="PUT %s" % body)
        if starts:
            check(b["reason"].startswith(starts), "reason %r starts with %r" % (b["reason"], starts))
        for s in contains:
            check(s in b["reason"], "reason %r contains %r" % (b["reason"], s))
    refused({"pattern": "^q", "definition": {"max-priority": 3}}, "Validation failed",
            ("max-priority", "are not recognised policy settings"))
    refused({"pattern": "^q", "definition": {"conf-unknown-key": 3}}, "Validation failed",
            ("conf-unknown-key", "are not recognised policy settings"))
    refused({"pattern": "(", "definition": {"max-length": 3}},
            "Validation failed\n\npattern should be regular expression but is invalid")
    refused({"pattern": "^q", "definition": {"max-length": "x"}}, "Validation failed", ("is not a valid maximum length",))
    refused({"pattern": "^q", "definition": {}}, "Validation failed\n\nno policy provided")
    refused({"pattern": "^q", "definition": {"max-length": 1}, "apply-to": "conf-bogus"},
            "Validation failed\n\napply-to 'conf-bogus' unrecognised")
    refused({"definition": {"max-length": 1}})
    eq(api.get(path("/api/policies", v)), [], "no policy was created")


@scenario("mgmt.policies.queue_gets_highest_priority", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/policies", v, "low"), {"pattern": "^q", "definition": {"max-length": 2}, "priority": 0})
    api.put(path("/api/policies", v, "high"), {"pattern": "^q", "definition": {"max-length": 3, "message-ttl": 60000},
                                              "priority": 5, "apply-to": "queues"})
    api.put(path("/api/policies", v, "exch"), {"pattern": "^q", "definition": {"alternate-exchange": "ae"},
                                              "priority": 9, "apply-to": "exchanges"})
    api.put(path("/api/queues", v, "q1"), {})
    api.put(path("/api/queues", v, "other"), {})
    q = queue_policy(api, v, "q1", lambda x: x["policy"] == "high", "q1 gets policy high")
    eq((q["effective_policy_definition"], q["operator_policy"]), ({"max-length": 3, "message-ttl": 60000}, None),
       "effective definition")
    queue_policy(api, v, "other", lambda x: x["policy"] is None, "no policy for 'other'")
    api.put(path("/api/exchanges", v, "qx"), {"type": "fanout"})
    x = poll(lambda: api.get(path("/api/exchanges", v, "qx")), lambda x: x.get("policy") == "exch",
             "exchange qx gets policy exch")
    check("high" not in str(x.get("policy")), "a queue policy does not apply to an exchange")
    c = t.pika(virtual_host=v)
    ch = c.channel()
    for i in range(6):
        ch.basic_publish("", "q1", b"m%d" % i)
    eq(wait_count(ch, "q1", 3), 3, "max-length 3 of policy 'high' in force")


@scenario("mgmt.policies.change_applies_now", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/queues", v, "q1"), {})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    for i in range(5):
        ch.basic_publish("", "q1", b"m%d" % i)
    eq(wait_count(ch, "q1", 5), 5, "5 messages before the policy")
    api.put(path("/api/policies", v, "p1"), {"pattern": "^q1$", "definition": {"max-length": 2}})
    eq(wait_count(ch, "q1", 2, timeout=10), 2, "a new max-length drops the excess at once")
    got = [ch.basic_get("q1", auto_ack=True)[2] for _ in range(2)]
    eq(got, [b"m3", b"m4"], "the oldest messages were dropped")
    api.put(path("/api/policies", v, "p1"), {"pattern": "^q1$", "definition": {"max-length": 10}})
    for i in range(4):
        ch.basic_publish("", "q1", b"n%d" % i)
    eq(wait_count(ch, "q1", 4), 4, "after raising max-length to 10")
    api.delete(path("/api/policies", v, "p1"))
    queue_policy(api, v, "q1", lambda x: x["policy"] is None, "policy gone from q1")


@scenario("mgmt.policies.argument_and_policy", "http")
def _(t):
    # max-length in both the queue's arguments and a policy: the lower wins.
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/policies", v, "p1"), {"pattern": "^q", "definition": {"max-length": 3}})
    api.put(path("/api/queues", v, "q1"), {"arguments": {"x-max-length": 10}})
    api.put(path("/api/queues", v, "q2"), {"arguments": {"x-max-length": 1}})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    for i in range(6):
        ch.basic_publish("", "q1", b"m")
        ch.basic_publish("", "q2", b"m")
    eq((wait_count(ch, "q1", 3), wait_count(ch, "q2", 1)), (3, 1), "lengths of q1 (arg 10, policy 3), q2 (arg 1)")
    q = api.get(path("/api/queues", v, "q1"))
    eq(q["arguments"], {"x-max-length": 10}, "arguments unchanged by the policy")


@scenario("mgmt.operator_policies.merge", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    op = path("/api/operator-policies", v, "op1")
    body = {"pattern": "^q", "definition": {"max-length": 5, "expires": 100000, "message-ttl": 1000},
            "apply-to": "queues", "priority": 0}
    eq(api.put(op, body).status, 201, "PUT operator policy")
    got = api.get(op)
    shape(got, POLICY, "operator policy")
    eq(got, dict(body, vhost=v, name="op1"), "GET operator policy")
    eq(api.get(path("/api/operator-policies", v)), [got], "/api/operator-policies/{vhost}")
    check(got in api.get("/api/operator-policies"), "in /api/operator-policies")
    api.put(path("/api/policies", v, "p1"), {"pattern": "^q", "definition": {"max-length": 3, "message-ttl": 60000},
                                            "apply-to": "queues"})
    api.put(path("/api/queues", v, "q1"), {})
    q = queue_policy(api, v, "q1", lambda x: x["policy"] == "p1" and x["operator_policy"] == "op1",
                     "q1 gets policy p1 and operator policy op1")
    eq(q["effective_policy_definition"], {"max-length": 3, "message-ttl": 1000, "expires": 100000},
       "the lower of each numeric value, operator-only keys added")
    eq(api.delete(op).status, 204, "DELETE operator policy")
    api.delete(op, want=404)
    queue_policy(api, v, "q1", lambda x: x["operator_policy"] is None, "operator policy gone from q1")


@scenario("mgmt.operator_policies.validation", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    b = error_body(api.call("PUT", path("/api/operator-policies", v, "op1"),
                            {"pattern": "^q", "definition": {"alternate-exchange": "ae"}}, want=400), "bad_request")
    check("are not recognised policy settings" in b["reason"] and "alternate-exchange" in b["reason"],
          "reason %r" % b["reason"])
    eq(api.get(path("/api/operator-policies", v)), [], "nothing created")


@scenario("mgmt.policies.delivery_limit_quorum", "http")
def _(t):
    """The delivery-limit policy key on a quorum queue: shown as the queue's
    effective policy; a message returned more than the limit is
    dead-lettered with reason delivery_limit."""
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/policies", v, "limit"), {"pattern": "^src$", "apply-to": "queues",
                                                 "definition": {"delivery-limit": 1}})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.queue_declare("dlq", durable=True)
    ch.queue_declare("src", durable=True, arguments={"x-queue-type": "quorum", "x-dead-letter-exchange": "",
                                                      "x-dead-letter-routing-key": "dlq"})
    queue_policy(api, v, "src", lambda x: x["policy"] == "limit", "the policy applied to src")
    eq(api.get(path("/api/queues", v, "src"))["effective_policy_definition"], {"delivery-limit": 1},
       "effective policy")
    ch.confirm_delivery()
    ch.basic_publish("", "src", b"m")

    def get():  # a quorum queue's return may take a moment to be ready again
        got = poll(lambda: ch.basic_get("src"), lambda r: r[0] is not None, "a message in src",
                   timeout=5, step=0.05)
        return got[0], got[1]
    counts = []
    for _ in range(2):
        m, p = get()
        counts.append(p.headers["x-delivery-count"])
        ch.basic_reject(m.delivery_tag, requeue=True)
    eq(counts, [0, 1], "x-delivery-count of the two deliveries")
    eq(wait_count(ch, "dlq", 1), 1, "dead-lettered after the second return")
    m, p, b = ch.basic_get("dlq", auto_ack=True)
    eq((b, p.headers["x-first-death-reason"]), (b"m", "delivery_limit"), "reason")
