"""Management API: exchanges, queues and bindings (PUT, GET, DELETE, the
bindings sub-resources, publish, get, purge), each in a fresh vhost."""
import base64

from confkit import scenario, eq, check, count, wait_count
from mgmtkit import mgmt, vhost, path, shape, find, poll, error_body, NUMBER

EXCHANGE = {"name": str, "vhost": str, "type": str, "durable": bool, "auto_delete": bool, "internal": bool,
            "arguments": dict}
QUEUE = {"name": str, "vhost": str, "durable": bool, "auto_delete": bool, "exclusive": bool, "arguments": dict,
         "type": str, "state": str, "messages": int, "messages_ready": int, "messages_unacknowledged": int,
         "consumers": int, "policy": (str, None), "operator_policy": (str, None),
         "effective_policy_definition": dict, "consumer_details": list, "memory": int}
BINDING = {"source": str, "vhost": str, "destination": str, "destination_type": str, "routing_key": str,
           "arguments": dict, "properties_key": str}
GOT = {"payload_bytes": int, "redelivered": bool, "exchange": str, "routing_key": str, "message_count": int,
       "properties": (dict, list), "payload": str, "payload_encoding": str}


def xpath(v, x, *rest):
    return path("/api/exchanges", v, x, *rest)


def qpath(v, q, *rest):
    return path("/api/queues", v, q, *rest)


def publish(api, v, x, key, payload, encoding="string", properties=None):
    return api.post(xpath(v, x, "publish"), {"properties": properties or {}, "routing_key": key, "payload": payload,
                                              "payload_encoding": encoding}, want=200).json()


@scenario("mgmt.exchanges.put_get_delete", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    r = api.put(xpath(v, "x1"), {"type": "topic", "durable": True, "auto_delete": False, "internal": False,
                                 "arguments": {"alternate-exchange": "ae"}})
    eq(r.status, 201, "PUT of a new exchange")
    eq(api.put(xpath(v, "x1"), {"type": "topic", "durable": True, "arguments": {"alternate-exchange": "ae"}}).status,
       204, "PUT of the same exchange again")
    x = api.get(xpath(v, "x1"))
    shape(x, EXCHANGE, "GET exchange")
    eq((x["name"], x["vhost"], x["type"], x["durable"], x["auto_delete"], x["internal"], x["arguments"]),
       ("x1", v, "topic", True, False, False, {"alternate-exchange": "ae"}), "exchange fields")
    names = [e["name"] for e in api.get(path("/api/exchanges", v))]
    check("x1" in names, "x1 in /api/exchanges/{vhost}: %s" % names)
    eq(api.delete(xpath(v, "x1")).status, 204, "DELETE exchange")
    error_body(api.call("GET", xpath(v, "x1"), want=404), "Object Not Found", "Not Found", "GET deleted exchange")
    api.delete(xpath(v, "x1"), want=404)


@scenario("mgmt.exchanges.defaults", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "plain"), {}, want=201)
    x = api.get(xpath(v, "plain"))
    eq((x["type"], x["durable"], x["auto_delete"], x["internal"], x["arguments"]), ("direct", False, False, False, {}),
       "an exchange PUT with {}: type, durable, auto_delete, internal, arguments")


@scenario("mgmt.exchanges.list_vhost_defaults", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    xs = api.get(path("/api/exchanges", v))
    for x in xs:
        shape(x, EXCHANGE, "exchange %r" % x.get("name"))
    got = sorted((x["name"], x["type"]) for x in xs)
    eq(got, [("", "direct"), ("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.headers", "headers"),
             ("amq.match", "headers"), ("amq.rabbitmq.trace", "topic"), ("amq.topic", "topic")],
       "exchanges of a new vhost")
    d = api.get(xpath(v, "amq.default"))
    eq((d["name"], d["type"], d["durable"]), ("", "direct", True), "amq.default is the default exchange")


@scenario("mgmt.exchanges.errors", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "x1"), {"type": "topic"}, want=201)
    b = error_body(api.call("PUT", xpath(v, "x1"), {"type": "fanout"}, want=400), "bad_request")
    eq(b["reason"], "inequivalent arg 'type' for exchange 'x1' in vhost '%s': received 'fanout' but current is "
       "'topic'" % v, "reason")
    b = error_body(api.call("PUT", xpath(v, "x2"), {"type": "conf-no-such-type"}, want=400), "bad_request")
    eq(b["reason"], "unknown exchange type 'conf-no-such-type'", "reason")
    api.get(xpath(v, "x2"), want=404)
    error_body(api.call("GET", xpath(v, "nope"), want=404), "Object Not Found", "Not Found")
    error_body(api.call("PUT", xpath("conf-no-such-vhost-" + t.run_id, "x"), {"type": "direct"}, want=404),
               "not_found", "vhost_not_found", "PUT into an unknown vhost")
    error_body(api.call("GET", path("/api/exchanges", "conf-no-such-vhost-" + t.run_id), want=404),
               "Object Not Found", "Not Found", "GET exchanges of an unknown vhost")
    error_body(api.call("PUT", xpath(v, "amq.conf-reserved"), {}, want=401), "not_authorised", "Access refused.",
               "PUT of an amq.* exchange")
    error_body(api.call("DELETE", xpath(v, "amq.direct"), want=401), "not_authorised", "Access refused.",
               "DELETE of amq.direct")
    api.get(xpath(v, "amq.direct"))


@scenario("mgmt.exchanges.delete_if_unused", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "x1"), {"type": "direct"})
    api.put(qpath(v, "q1"), {"durable": False})
    api.post(path("/api/bindings", v, "e", "x1", "q", "q1"), {"routing_key": "k"}, want=201)
    error_body(api.call("DELETE", xpath(v, "x1") + "?if-unused=true", want=400), "bad_request")
    api.get(xpath(v, "x1"))
    api.delete(xpath(v, "x1"))
    api.get(xpath(v, "x1"), want=404)


@scenario("mgmt.exchanges.bindings_source_destination", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    for x in ("src", "dst"):
        api.put(xpath(v, x), {"type": "direct"})
    api.put(qpath(v, "q1"), {})
    api.post(path("/api/bindings", v, "e", "src", "q", "q1"), {"routing_key": "to-q"}, want=201)
    api.post(path("/api/bindings", v, "e", "src", "e", "dst"), {"routing_key": "to-x"}, want=201)
    src = api.get(xpath(v, "src", "bindings", "source"))
    for b in src:
        shape(b, BINDING, "binding")
    eq(sorted((b["destination"], b["destination_type"], b["routing_key"], b["properties_key"]) for b in src),
       [("dst", "exchange", "to-x", "to-x"), ("q1", "queue", "to-q", "to-q")], "bindings/source of src")
    eq(api.get(xpath(v, "src", "bindings", "destination")), [], "bindings/destination of src")
    dst = api.get(xpath(v, "dst", "bindings", "destination"))
    eq([(b["source"], b["destination"], b["destination_type"], b["routing_key"]) for b in dst],
       [("src", "dst", "exchange", "to-x")], "bindings/destination of dst")


@scenario("mgmt.exchanges.publish_routed", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "x1"), {"type": "topic"})
    api.put(qpath(v, "q1"), {})
    api.post(path("/api/bindings", v, "e", "x1", "q", "q1"), {"routing_key": "a.*"}, want=201)
    eq(publish(api, v, "x1", "a.b", "one"), {"routed": True}, "publish to a bound key")
    eq(publish(api, v, "x1", "zzz", "two"), {"routed": False}, "publish to an unbound key")
    eq(publish(api, v, "amq.default", "q1", "aGk=", "base64", {"content_type": "text/plain", "delivery_mode": 2,
                                                             "headers": {"h": 1}}), {"routed": True},
       "publish through amq.default")
    c = t.pika(virtual_host=v)
    ch = c.channel()
    m1, _, b1 = ch.basic_get("q1", auto_ack=True)
    eq((m1.exchange, m1.routing_key, b1), ("x1", "a.b", b"one"), "first message over AMQP")
    m2, p2, b2 = ch.basic_get("q1", auto_ack=True)
    eq((m2.exchange, m2.routing_key, b2, p2.content_type, p2.delivery_mode, p2.headers),
       ("", "q1", b"hi", "text/plain", 2, {"h": 1}), "second message over AMQP (base64 payload, properties)")
    eq(ch.basic_get("q1", auto_ack=True)[0], None, "no third message")


@scenario("mgmt.exchanges.publish_errors", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    b = error_body(api.call("POST", xpath(v, "nope", "publish"), {"properties": {}, "routing_key": "k",
                                                                  "payload": "x", "payload_encoding": "string"},
                            want=400), "bad_request", what="publish to an unknown exchange")
    eq(b["reason"], "404 NOT_FOUND - no exchange 'nope' in vhost '%s'" % v, "reason")
    error_body(api.call("POST", xpath(v, "amq.default", "publish"), {"properties": {}, "routing_key": "k"},
                        want=400), "bad_request", what="publish without payload")
    error_body(api.call("POST", xpath(v, "amq.default", "publish"), {"routing_key": "k", "payload": "x",
                                                                     "payload_encoding": "string"}, want=400),
               "bad_request", what="publish without properties")


@scenario("mgmt.queues.put_get_delete", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    args = {"x-max-length": 5, "x-message-ttl": 60000, "x-dead-letter-exchange": "dlx"}
    eq(api.put(qpath(v, "q1"), {"durable": True, "auto_delete": False, "arguments": args}).status, 201, "PUT new queue")
    eq(api.put(qpath(v, "q1"), {"durable": True, "arguments": args}).status, 204, "PUT same queue again")
    # The statistics fields appear with the first stats emission (up to 5 s).
    q = poll(lambda: api.get(qpath(v, "q1")), lambda q: "messages" in q and "state" in q, "queue statistics")
    shape(q, QUEUE, "GET queue")
    eq((q["name"], q["vhost"], q["durable"], q["auto_delete"], q["exclusive"], q["arguments"], q["type"]),
       ("q1", v, True, False, False, args, "classic"), "queue fields")
    eq((q["messages"], q["consumers"], q["policy"]), (0, 0, None), "messages, consumers, policy")
    check(q["state"] == "running", "state %r" % q["state"])
    names = [x["name"] for x in api.get(path("/api/queues", v))]
    eq(names, ["q1"], "/api/queues/{vhost}")
    check(any(x["name"] == "q1" and x["vhost"] == v for x in api.get("/api/queues")), "q1 in /api/queues")
    eq(api.delete(qpath(v, "q1")).status, 204, "DELETE queue")
    error_body(api.call("GET", qpath(v, "q1"), want=404), "Object Not Found", "Not Found")
    api.delete(qpath(v, "q1"), want=404)


@scenario("mgmt.queues.errors", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {"durable": False, "arguments": {"x-max-length": 5}}, want=201)
    b = error_body(api.call("PUT", qpath(v, "q1"), {"durable": False, "arguments": {"x-max-length": 6}}, want=400),
                   "bad_request")
    eq(b["reason"], "inequivalent arg 'x-max-length' for queue 'q1' in vhost '%s': received '6' but current is '5'"
       % v, "reason")
    error_body(api.call("PUT", qpath("conf-no-such-vhost-" + t.run_id, "q"), {}, want=404), "not_found",
               "vhost_not_found", "PUT into an unknown vhost")
    error_body(api.call("GET", qpath("conf-no-such-vhost-" + t.run_id, "q"), want=404), "Object Not Found",
               "Not Found", "GET in an unknown vhost")
    error_body(api.call("DELETE", qpath(v, "nope", "contents"), want=404), "Object Not Found", "Not Found",
               "purge of an unknown queue")
    error_body(api.call("PUT", qpath(v, "amq.conf-reserved"), {}, want=401), "not_authorised", "Access refused.",
               "PUT of an amq.* queue")


@scenario("mgmt.queues.counts_after_publish", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {"durable": False})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    for i in range(7):
        ch.basic_publish("", "q1", b"m%d" % i)
    eq(wait_count(ch, "q1", 7), 7, "AMQP message count")
    q = poll(lambda: api.get(qpath(v, "q1")), lambda q: q["messages"] == 7 and q["messages_ready"] == 7,
             "queue shows 7 ready messages")
    eq(q["messages_unacknowledged"], 0, "unacknowledged")
    m, _, _ = ch.basic_get("q1", auto_ack=False)
    m2, _, _ = ch.basic_get("q1", auto_ack=False)
    q = poll(lambda: api.get(qpath(v, "q1")), lambda q: (q["messages"], q["messages_ready"],
                                                         q["messages_unacknowledged"]) == (7, 5, 2),
             "7 messages: 5 ready, 2 unacknowledged")
    shape(q, {"message_stats": {"publish": int, "publish_details": {"rate": NUMBER}}}, "queue")
    q = poll(lambda: api.get(qpath(v, "q1")),
             lambda q: q["message_stats"]["publish"] == 7 and q["message_stats"]["get"] == 2,
             "message_stats publish 7, get 2")
    shape(q["message_stats"], {"get_details": {"rate": NUMBER}, "deliver_get": int}, "message_stats")
    ch.basic_ack(m2.delivery_tag, multiple=True)
    poll(lambda: api.get(qpath(v, "q1")), lambda q: (q["messages"], q["messages_unacknowledged"]) == (5, 0),
         "5 messages after acking 2")


@scenario("mgmt.queues.consumer_details", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {})
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.basic_qos(prefetch_count=3)
    ch.basic_consume("q1", lambda *a: None, consumer_tag="conf-ctag")
    q = poll(lambda: api.get(qpath(v, "q1")), lambda q: q["consumers"] == 1 and len(q["consumer_details"]) == 1
             and q["consumer_details"][0]["channel_details"], "one consumer in the queue's details")
    d = q["consumer_details"][0]
    shape(d, {"consumer_tag": str, "ack_required": bool, "exclusive": bool, "prefetch_count": int,
              "arguments": dict, "active": bool, "queue": {"name": str, "vhost": str},
              "channel_details": {"name": str, "connection_name": str, "number": int, "user": str,
                                  "peer_host": str, "peer_port": int}}, "consumer_details[0]")
    eq((d["consumer_tag"], d["ack_required"], d["exclusive"], d["prefetch_count"], d["queue"]),
       ("conf-ctag", True, False, 3, {"name": "q1", "vhost": v}), "consumer fields")
    eq(d["channel_details"]["user"], "guest", "channel user")


@scenario("mgmt.queues.purge_contents", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {})
    for i in range(4):
        publish(api, v, "amq.default", "q1", "m%d" % i)
    c = t.pika(virtual_host=v)
    ch = c.channel()
    eq(wait_count(ch, "q1", 4), 4, "AMQP count after 4 HTTP publishes")
    eq(api.delete(qpath(v, "q1", "contents")).status, 204, "DELETE contents")
    eq(wait_count(ch, "q1", 0), 0, "AMQP count after the purge")
    api.get(qpath(v, "q1"))


@scenario("mgmt.queues.get_ackmodes", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {})
    publish(api, v, "amq.default", "q1", "hello")
    publish(api, v, "amq.default", "q1", "aGk=", "base64", {"content_type": "text/plain", "headers": {"h": 1}})

    def get(n, mode, enc="auto", **kw):
        return api.post(qpath(v, "q1", "get"), dict(count=n, ackmode=mode, encoding=enc, **kw), want=200).json()
    got = get(5, "ack_requeue_true", truncate=50000)
    eq(len(got), 2, "messages got")
    for m in got:
        shape(m, GOT, "got message")
    eq([(m["payload"], m["payload_encoding"], m["payload_bytes"], m["redelivered"], m["exchange"],
         m["routing_key"], m["message_count"]) for m in got],
       [("hello", "string", 5, False, "", "q1", 1), ("hi", "string", 2, False, "", "q1", 0)], "ack_requeue_true")
    eq((got[1]["properties"]["content_type"], got[1]["properties"]["headers"]), ("text/plain", {"h": 1}),
       "properties of the second message")
    check(got[0]["properties"] in ({}, []), "no properties: %r" % (got[0]["properties"],))
    got = get(1, "ack_requeue_false", "base64")
    eq([(m["payload"], m["payload_encoding"], m["redelivered"], m["message_count"]) for m in got],
       [("aGVsbG8=", "base64", True, 1)], "ack_requeue_false, base64, redelivered after requeue")
    got = get(1, "reject_requeue_true")
    eq([(m["payload"], m["redelivered"]) for m in got], [("hi", True)], "reject_requeue_true")
    got = get(1, "reject_requeue_false")
    eq([m["payload"] for m in got], ["hi"], "reject_requeue_false")
    eq(get(1, "ack_requeue_true"), [], "queue empty after ack/reject without requeue")


@scenario("mgmt.queues.get_encoding", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {})
    raw = b"\xff\x00\xfe binary"
    publish(api, v, "amq.default", "q1", base64.b64encode(raw).decode(), "base64")
    publish(api, v, "amq.default", "q1", "0123456789")
    got = api.post(qpath(v, "q1", "get"), {"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto",
                                           "truncate": 4}, want=200).json()
    eq((got[0]["payload_encoding"], base64.b64decode(got[0]["payload"])[:4], got[0]["payload_bytes"]),
       ("base64", raw[:4], len(raw)), "auto encoding of a non-UTF-8 body (truncated to 4 bytes)")
    eq((got[1]["payload"], got[1]["payload_encoding"], got[1]["payload_bytes"]), ("0123", "string", 10),
       "a text body truncated to 4 bytes, payload_bytes the full size")
    b = error_body(api.call("POST", qpath(v, "q1", "get"), {"count": 1, "ackmode": "ack_requeue_true",
                                                            "encoding": "bogus"}, want=400), "bad_request")
    eq(b["reason"], "Unsupported encoding. Please use auto or base64.", "reason")
    error_body(api.call("POST", qpath(v, "q1", "get"), {"count": 1, "ackmode": "ack_requeue_true"}, want=400),
               "bad_request", what="get without encoding")
    eq(count(t.pika(virtual_host=v).channel(), "q1"), 2, "both messages still queued")
    b = error_body(api.call("POST", qpath(v, "nope", "get"), {"count": 1, "ackmode": "ack_requeue_true",
                                                               "encoding": "auto"}, want=404), "not_found")
    eq(b["reason"], "NOT_FOUND - no queue 'nope' in vhost '%s'" % v, "reason")


@scenario("mgmt.queues.bindings", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(qpath(v, "q1"), {})
    api.put(xpath(v, "x1"), {"type": "direct"})
    api.post(path("/api/bindings", v, "e", "x1", "q", "q1"), {"routing_key": "k1"}, want=201)
    bs = api.get(qpath(v, "q1", "bindings"))
    for b in bs:
        shape(b, BINDING, "binding")
    eq([(b["source"], b["routing_key"], b["properties_key"], b["destination_type"]) for b in bs],
       [("", "q1", "q1", "queue"), ("x1", "k1", "k1", "queue")], "queue bindings, the default exchange first")


@scenario("mgmt.bindings.post_location_delete", "http", quick=True)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "x1"), {"type": "topic"})
    api.put(qpath(v, "q1"), {})
    base = path("/api/bindings", v, "e", "x1", "q", "q1")
    r = api.post(base, {"routing_key": "plain", "arguments": {}}, want=201)
    eq(r.headers.get("location"), "q1/plain", "Location of a binding without arguments")
    r = api.post(base, {"routing_key": "a.#", "arguments": {}}, want=201)
    # RabbitMQ 3.10 percent-encodes the properties key twice here (a.%2523);
    # either form names the binding.
    check(r.headers.get("location") in ("q1/a.%23", "q1/a.%2523"), "Location of key a.#: %r"
          % r.headers.get("location"))
    r = api.post(base, {}, want=201)
    eq(r.headers.get("location"), "q1/~", "Location of a binding with an empty key")
    r = api.post(base, {"routing_key": "a.b", "arguments": {"k": "v"}}, want=201)
    loc = r.headers.get("location") or ""
    check(loc.startswith("q1/a.b~") and len(loc) > len("q1/a.b~"), "Location of a binding with arguments: %r" % loc)
    bs = api.get(base)
    for b in bs:
        shape(b, BINDING, "binding")
    keys = sorted((b["routing_key"], b["arguments"] != {}, b["properties_key"]) for b in bs)
    eq([k[:2] for k in keys], [("", False), ("a.#", False), ("a.b", True), ("plain", False)], "bindings x1 -> q1")
    eq(sorted(b["properties_key"] for b in bs if not b["arguments"]), ["a.%23", "plain", "~"], "properties keys")
    with_args = find(bs, "binding with arguments", routing_key="a.b")
    eq("q1/" + with_args["properties_key"], loc, "Location is q1/<properties_key>")
    one = api.get(base + "/" + with_args["properties_key"])
    eq((one["routing_key"], one["arguments"]), ("a.b", {"k": "v"}), "GET one binding by its properties key")
    eq(api.delete(base + "/a.%23").status, 204, "DELETE by properties key")
    api.delete(base + "/a.%23", want=404)
    api.delete(base + "/" + with_args["properties_key"])
    api.delete(base + "/plain")
    eq([b["properties_key"] for b in api.get(base)], ["~"], "bindings left")


@scenario("mgmt.bindings.exchange_to_exchange", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "src"), {"type": "direct"})
    api.put(xpath(v, "dst"), {"type": "fanout"})
    api.put(qpath(v, "q1"), {})
    api.post(path("/api/bindings", v, "e", "dst", "q", "q1"), {"routing_key": ""}, want=201)
    base = path("/api/bindings", v, "e", "src", "e", "dst")
    r = api.post(base, {"routing_key": "k"}, want=201)
    eq(r.headers.get("location"), "dst/k", "Location")
    eq([(b["source"], b["destination"], b["destination_type"], b["properties_key"]) for b in api.get(base)],
       [("src", "dst", "exchange", "k")], "e2e bindings")
    eq(publish(api, v, "src", "k", "via-e2e"), {"routed": True}, "publish through src -> dst -> q1")
    eq(wait_count(t.pika(virtual_host=v).channel(), "q1", 1), 1, "q1 got it")
    api.delete(base + "/k")
    eq(api.get(base), [], "no e2e binding left")


@scenario("mgmt.bindings.list_forms", "http")
def _(t):
    api = mgmt(t)
    v = vhost(t)
    api.put(xpath(v, "x1"), {"type": "direct"})
    api.put(qpath(v, "q1"), {})
    api.post(path("/api/bindings", v, "e", "x1", "q", "q1"), {"routing_key": "k"}, want=201)
    mine = sorted((b["source"], b["destination"], b["routing_key"]) for b in api.get(path("/api/bindings", v)))
    eq(mine, [("", "q1", "q1"), ("x1", "q1", "k")], "/api/bindings/{vhost}")
    check(any(b["vhost"] == v and b["source"] == "x1" for b in api.get("/api/bindings")), "in /api/bindings")
    b = error_body(api.call("POST", path("/api/bindings", v, "e", "nope", "q", "q1"), {"routing_key": "k"},
                            want=404), "not_found")
    eq(b["reason"], "no exchange 'nope' in vhost '%s'" % v, "reason")
    b = error_body(api.call("POST", path("/api/bindings", v, "e", "x1", "q", "nope"), {"routing_key": "k"},
                            want=404), "not_found")
    eq(b["reason"], "no queue 'nope' in vhost '%s'" % v, "reason")
    error_body(api.call("GET", path("/api/bindings", v, "e", "x1", "q", "q1", "nope"), want=404),
               "Object Not Found", "Not Found", "GET of an unknown properties key")
    error_body(api.call("GET", path("/api/bindings", "conf-no-such-vhost-" + t.run_id), want=404),
               "Object Not Found", "Not Found", "bindings of an unknown vhost")


@scenario("mgmt.queues.move_back_to_source", "http", warren_only=True)
def _(t):
    """DLQ redrive (Warren's POST /api/queues/{vhost}/{name}/move): with no
    destination each message goes back to the queue it died in, headers
    kept, and the move reports what went where."""
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.queue_declare("dlq", durable=True)
    for q in ("a", "b"):
        ch.queue_declare(q, durable=True, arguments={"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"})
    for q, body in (("a", b"a1"), ("b", b"b1"), ("a", b"a2")):
        ch.basic_publish("", q, body)
    for q in ("a", "b", "a"):
        m, _, _ = ch.basic_get(q)
        ch.basic_reject(m.delivery_tag, requeue=False)
    eq(wait_count(ch, "dlq", 3), 3, "dead-lettered")
    api.post(path("/api/queues", v, "dlq", "move"), {}, want=202)
    done = poll(lambda: api.get(path("/api/queues", v, "dlq", "move")), lambda x: x["state"] == "finished",
                "the move finished")
    eq((done["total"], done["moved"], done["remaining"], done["destination"]["type"]), (3, 3, 0, "source"),
       "progress")
    eq(sorted((x["queue"], x["count"]) for x in done["moved_to"]), [("a", 2), ("b", 1)], "moved_to")
    eq((count(ch, "dlq"), count(ch, "a"), count(ch, "b")), (0, 2, 1), "queue lengths after the move")
    m, p, b = ch.basic_get("a", auto_ack=True)
    eq((b, p.headers["x-death"][0]["reason"], p.headers["x-first-death-queue"]), (b"a1", "rejected", "a"),
       "history kept")
