"""Limits: vhost limits (max-connections, max-queues) and user limits
(max-connections, max-channels) set through the HTTP API and enforced on
pika clients, with RabbitMQ 3.10.8's reply codes and texts; the API's
answers and validation texts. Each scenario works in a fresh vhost or user."""
from pika import exceptions as pex

from confkit import scenario, eq, check, channel_error, connection_error, NOT_ALLOWED, PRECONDITION_FAILED
from mgmtkit import mgmt, vhost, user, grant, path
from scen_permissions import open_refused


def limit(t, kind, who, name, value):
    mgmt(t).put(path("/api/%s-limits" % kind, who, name), {"value": value}, want=204)


@scenario("limits.vhost_max_connections", "pika", quick=True)
def _(t):
    v = vhost(t)
    limit(t, "vhost", v, "max-connections", 1)
    first = t.pika(virtual_host=v)
    text = open_refused(NOT_ALLOWED, lambda: t.pika(virtual_host=v))
    eq(text, "NOT_ALLOWED - access to vhost '%s' refused for user '%s': connection limit (1) is reached"
       % (v, t.broker.user), "connection.close text")
    first.close()
    t.pika(virtual_host=v).close()


@scenario("limits.vhost_max_queues", "pika", quick=True)
def _(t):
    v = vhost(t)
    limit(t, "vhost", v, "max-queues", 1)
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.queue_declare("lq1")
    ch.queue_declare("lq1")
    e = channel_error(PRECONDITION_FAILED, lambda: ch.queue_declare("lq2"), conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - cannot declare queue 'lq2': queue limit in vhost '%s' (1) is reached" % v,
       "channel.close text")


@scenario("limits.user_max_connections_and_channels", "pika", quick=True)
def _(t):
    v, u = vhost(t), user(t, "pw")
    grant(t, v, u)
    limit(t, "user", u, "max-connections", 1)
    limit(t, "user", u, "max-channels", 1)
    c = t.pika(virtual_host=v, user=u, password="pw")
    text = open_refused(NOT_ALLOWED, lambda: t.pika(virtual_host=v, user=u, password="pw"))
    eq(text, "NOT_ALLOWED - connection refused for user '%s': user connection limit (1) is reached" % u,
       "connection.close text")
    c.channel()
    e = connection_error(NOT_ALLOWED, c.channel)
    eq(e.reply_text, "NOT_ALLOWED - number of channels opened for user '%s' has reached the maximum allowed user "
                     "limit of (1)" % u, "connection.close text")


@scenario("limits.api_round_trip", "http", quick=True)
def _(t):
    api = mgmt(t)
    v, u = vhost(t), user(t, "pw")
    limit(t, "vhost", v, "max-connections", 3)
    limit(t, "vhost", v, "max-queues", 2)
    eq(api.get(path("/api/vhost-limits", v)), [{"vhost": v, "value": {"max-connections": 3, "max-queues": 2}}],
       "vhost limits")
    eq(api.get(path("/api/parameters/vhost-limits", v, "limits"))["value"], {"max-connections": 3, "max-queues": 2},
       "kept as the vhost-limits parameter")
    limit(t, "user", u, "max-channels", 5)
    eq(api.get(path("/api/user-limits", u)), [{"user": u, "value": {"max-channels": 5}}], "user limits")
    eq(api.get(path("/api/users", u))["limits"], {"max-channels": 5}, "the user's limits")
    api.delete(path("/api/vhost-limits", v, "max-connections"))
    api.delete(path("/api/vhost-limits", v, "max-queues"))
    eq(api.get(path("/api/vhost-limits", v)), [], "no vhost limits left")
    check({"vhost": v, "value": []} in api.get("/api/vhost-limits"), "the emptied parameter is listed with []")
    api.delete(path("/api/user-limits", u, "max-channels"))
    eq(api.get(path("/api/user-limits", u)), [], "no user limits left")


@scenario("limits.api_refusals", "http", quick=True)
def _(t):
    api = mgmt(t)
    v, u = vhost(t), user(t, "pw")

    def refused(p, body, status, reason):
        r = api.call("PUT", p, body)
        eq((r.status, r.json()), (status, {"error": "bad_request" if status == 400 else "not_found",
                                           "reason": reason}), "PUT %s" % p)
    refused(path("/api/vhost-limits", v, "max-queues"), {"value": "x"}, 400,
            'Validation failed\n\nmax-queues should be a number, actually was <<"x">>\n')
    refused(path("/api/vhost-limits", v, "max-foo"), {"value": 1}, 400,
            'Validation failed\n\nUnrecognised terms [{<<"max-foo">>,1}] in limits\n')
    refused(path("/api/vhost-limits", v, "max-queues"), {}, 400, "[{key_missing,value}]")
    refused(path("/api/vhost-limits", v + "-gone", "max-queues"), {"value": 1}, 404, "vhost_not_found")
    refused(path("/api/user-limits", u, "max-channels"), {"value": 1.5}, 400,
            "max-channels should be a number, actually was 1.5")
    refused(path("/api/user-limits", u, "max-foo"), {"value": 1}, 400,
            'Unrecognised terms [{<<"max-foo">>,1}] in user-limits')
    refused(path("/api/user-limits", u + "-gone", "max-channels"), {"value": 1}, 400,
            ["no_such_user", u + "-gone"])
    eq(api.get(path("/api/vhost-limits", v)), [], "nothing set")
