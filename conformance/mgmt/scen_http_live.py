"""Management API: connections, channels and consumers of live pika
clients, and closing a connection with DELETE (320, X-Reason)."""
from pika import exceptions as pex

from confkit import scenario, eq, check, CONNECTION_FORCED
from mgmtkit import mgmt, vhost, path, shape, poll, NUMBER

CONNECTION = {"name": str, "vhost": str, "user": str, "state": str, "protocol": str, "auth_mechanism": str,
              "host": str, "port": int, "peer_host": str, "peer_port": int, "ssl": bool, "channels": int,
              "channel_max": int, "frame_max": int, "timeout": int, "connected_at": int, "type": str,
              "client_properties": dict, "user_provided_name": str, "node": str,
              "recv_oct": int, "send_oct": int, "recv_cnt": int, "send_cnt": int, "send_pend": int,
              "recv_oct_details": {"rate": NUMBER}, "send_oct_details": {"rate": NUMBER}}
CHANNEL = {"name": str, "number": int, "vhost": str, "user": str, "state": str, "confirm": bool,
           "transactional": bool, "consumer_count": int, "prefetch_count": int, "global_prefetch_count": int,
           "messages_unacknowledged": int, "messages_unconfirmed": int, "messages_uncommitted": int,
           "acks_uncommitted": int, "node": str,
           "connection_details": {"name": str, "peer_host": str, "peer_port": int}}
CONSUMER = {"consumer_tag": str, "ack_required": bool, "exclusive": bool, "prefetch_count": int, "arguments": dict,
            "active": bool, "activity_status": str, "queue": {"name": str, "vhost": str},
            "channel_details": {"name": str, "connection_name": str, "number": int, "user": str, "peer_host": str,
                                "peer_port": int, "node": str}}


def local_port(c):
    """The client side port of a pika BlockingConnection."""
    return c._impl._transport._sock.getsockname()[1]


def conn_name(t, c):
    return "127.0.0.1:%d -> %s:%d" % (local_port(c), t.broker.host, t.broker.port)


def wait_conn(t, api, v, c):
    """The connection's JSON once /api/vhosts/{v}/connections lists it."""
    name = conn_name(t, c)
    conns = poll(lambda: api.get(path("/api/vhosts", v, "connections")),
                 lambda cs: any(x["name"] == name and "channels" in x for x in cs), "connection %s listed" % name)
    return next(x for x in conns if x["name"] == name)


@scenario("mgmt.connections.list_get", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v, client_properties={"connection_name": "conf-named-connection"})
    c.channel()
    x = wait_conn(t, api, v, c)
    shape(x, CONNECTION, "connection")
    eq((x["vhost"], x["user"], x["peer_host"], x["peer_port"], x["port"], x["protocol"], x["auth_mechanism"],
        x["user_provided_name"], x["ssl"], x["type"]),
       (v, "guest", "127.0.0.1", local_port(c), t.broker.port, "AMQP 0-9-1", "PLAIN", "conf-named-connection", False,
        "network"), "connection fields")
    eq(x["client_properties"].get("connection_name"), "conf-named-connection", "client_properties.connection_name")
    check(x["client_properties"].get("product") == "Pika Python Client Library", "client_properties.product")
    poll(lambda: api.get(path("/api/connections", x["name"])), lambda y: y["channels"] == 1, "channels 1")
    check(any(y["name"] == x["name"] for y in api.get("/api/connections")), "in /api/connections")
    c.close()
    poll(lambda: api.call("GET", path("/api/connections", x["name"])).status, lambda s: s == 404,
         "closed connection gone (404)")


@scenario("mgmt.connections.delete_reason", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v)
    c.channel()
    x = wait_conn(t, api, v, c)
    eq(api.call("DELETE", path("/api/connections", x["name"]), headers={"X-Reason": "conf test reason"}).status, 204,
       "DELETE connection")
    try:
        for _ in range(50):
            c.process_data_events(time_limit=0.1)
    except pex.ConnectionClosedByBroker as e:
        eq((e.reply_code, e.reply_text), (CONNECTION_FORCED, "CONNECTION_FORCED - conf test reason"),
           "connection.close seen by pika")
        return
    raise AssertionError("connection still open 5 s after DELETE")


@scenario("mgmt.connections.delete_default_reason", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v)
    x = wait_conn(t, api, v, c)
    api.delete(path("/api/connections", x["name"]))
    try:
        for _ in range(50):
            c.process_data_events(time_limit=0.1)
    except pex.ConnectionClosedByBroker as e:
        eq((e.reply_code, e.reply_text), (CONNECTION_FORCED, "CONNECTION_FORCED - Closed via management plugin"),
           "connection.close seen by pika")
        return
    raise AssertionError("connection still open 5 s after DELETE")


@scenario("mgmt.channels.list_get", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v)
    ch1 = c.channel()
    ch2 = c.channel()
    ch2.confirm_delivery()
    ch1.basic_qos(prefetch_count=7)
    name = wait_conn(t, api, v, c)["name"]
    chans = poll(lambda: api.get(path("/api/connections", name, "channels")),
                 lambda cs: len(cs) == 2 and all("prefetch_count" in x for x in cs)
                 and any(x["confirm"] for x in cs) and any(x["prefetch_count"] == 7 for x in cs),
                 "two channels of the connection")
    for x in chans:
        shape(x, CHANNEL, "channel")
    by_num = {x["number"]: x for x in chans}
    eq(sorted(by_num), [ch1.channel_number, ch2.channel_number], "channel numbers")
    a, b = by_num[ch1.channel_number], by_num[ch2.channel_number]
    eq((a["name"], a["prefetch_count"], a["confirm"], a["vhost"], a["user"], a["connection_details"]["name"]),
       ("%s (%d)" % (name, ch1.channel_number), 7, False, v, "guest", name), "first channel")
    eq((b["confirm"], b["transactional"]), (True, False), "second channel in confirm mode")
    one = api.get(path("/api/channels", a["name"]))
    eq((one["name"], one["number"]), (a["name"], a["number"]), "GET /api/channels/{name}")
    eq(sorted(x["name"] for x in api.get(path("/api/vhosts", v, "channels"))), sorted(x["name"] for x in chans),
       "/api/vhosts/{vhost}/channels")
    check(any(x["name"] == a["name"] for x in api.get("/api/channels")), "in /api/channels")


@scenario("mgmt.consumers.list", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(path("/api/queues", v, "q1"), {})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.basic_qos(prefetch_count=4)
    ch.basic_consume("q1", lambda *a: None, consumer_tag="conf-ct1", arguments={"x-priority": 3})
    ch.basic_consume("q1", lambda *a: None, consumer_tag="conf-ct2", auto_ack=True, exclusive=False)
    # channel_details is [] until the channel's first statistics arrive
    cons = poll(lambda: api.get(path("/api/consumers", v)),
                lambda cs: len(cs) == 2 and all(x["channel_details"] for x in cs), "two consumers in the vhost")
    for x in cons:
        shape(x, CONSUMER, "consumer")
    by_tag = {x["consumer_tag"]: x for x in cons}
    eq(sorted(by_tag), ["conf-ct1", "conf-ct2"], "consumer tags")
    one, two = by_tag["conf-ct1"], by_tag["conf-ct2"]
    eq((one["ack_required"], one["prefetch_count"], one["arguments"], one["queue"], one["active"]),
       (True, 4, {"x-priority": 3}, {"name": "q1", "vhost": v}, True), "conf-ct1")
    eq(two["ack_required"], False, "conf-ct2 is no-ack")
    eq(one["channel_details"]["name"], "%s (%d)" % (conn_name(t, c), ch.channel_number), "channel_details.name")
    check(any(x["consumer_tag"] == "conf-ct1" and x["queue"]["vhost"] == v for x in api.get("/api/consumers")),
          "in /api/consumers")
    ch.basic_cancel("conf-ct1")
    poll(lambda: api.get(path("/api/consumers", v)), lambda cs: [x["consumer_tag"] for x in cs] == ["conf-ct2"],
         "one consumer left after basic.cancel")
