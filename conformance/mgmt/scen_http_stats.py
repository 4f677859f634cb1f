"""Management API: message_stats of an exchange, a queue, the channels and
the vhost after a known message flow (RabbitMQ's statistics lag up to 5 s:
polled). Flow: 5 confirmed publishes routed to q1 and 1 unroutable, 1
mandatory unroutable publish on another channel, 6 deliveries to a consumer
(one a redelivery after a nack with requeue), 3 acks."""
import pika

from confkit import scenario, eq, check, wait_for
from mgmtkit import mgmt, vhost, path, poll, shape, find, NUMBER


def flow(t, v):
    c = t.pika(virtual_host=v)
    pub = c.channel()
    pub.exchange_declare("x1", "direct")
    pub.queue_declare("q1")
    pub.queue_bind("q1", "x1", "k")
    pub.confirm_delivery()
    for _ in range(5):
        pub.basic_publish("x1", "k", b"m")
    pub.basic_publish("x1", "nokey", b"m")
    ret = c.channel()
    ret.basic_publish("x1", "nokey", b"m", mandatory=True)
    got = []
    sub = c.channel()
    sub.basic_qos(prefetch_count=10)
    sub.basic_consume("q1", lambda ch, m, p, b: got.append(m))
    check(wait_for(c, lambda: len(got) >= 5), "5 deliveries")
    for m in got[:3]:
        sub.basic_ack(m.delivery_tag)
    sub.basic_nack(got[3].delivery_tag, requeue=True)
    check(wait_for(c, lambda: len(got) >= 6), "the redelivery")
    c.process_data_events(time_limit=0.2)
    return c, (pub.channel_number, ret.channel_number, sub.channel_number)


def counters(stats):
    return {k: v for k, v in (stats or {}).items() if not k.endswith("_details")}


@scenario("mgmt.stats.message_flow", "http", timeout=45)
def _(t):
    api = mgmt(t)
    v = vhost(t)
    c, (pub, ret, sub) = flow(t, v)
    want_q = {"publish": 5, "deliver": 6, "deliver_get": 6, "deliver_no_ack": 0, "get": 0, "get_no_ack": 0,
              "ack": 3, "redeliver": 1}

    def snapshot():
        chans = {x["number"]: counters(x.get("message_stats")) for x in api.get(path("/api/vhosts", v, "channels"))}
        return {"x": counters(api.get(path("/api/exchanges", v, "x1")).get("message_stats")),
                "q": counters(api.get(path("/api/queues", v, "q1")).get("message_stats")),
                "v": counters(api.get(path("/api/vhosts", v)).get("message_stats")), "ch": chans}

    def ok(s):
        return (s["x"].get("publish_in") == 7 and s["x"].get("publish_out") == 5
                and all(s["q"].get(k) == n for k, n in want_q.items())
                and s["v"].get("ack") == 3 and s["v"].get("drop_unroutable") == drops
                and s["v"].get("return_unroutable") == 1 and s["v"].get("confirm") == 6
                and s["ch"].get(sub, {}).get("ack") == 3 and s["ch"].get(pub, {}).get("confirm") == 6
                and s["ch"].get(ret, {}).get("return_unroutable") == 1)
    drops = 1  # the publish to "nokey" without mandatory (RabbitMQ 3.10.8 counts it too)
    s = poll(snapshot, ok, "message_stats after the flow", timeout=20)
    eq((s["v"]["publish"], s["v"]["deliver_get"], s["v"]["redeliver"]), (7, 6, 1), "vhost publish, deliver_get, "
       "redeliver")
    eq((s["ch"][pub]["publish"], s["ch"][pub]["drop_unroutable"]), (6, drops), "publisher channel")
    eq((s["ch"][sub]["deliver"], s["ch"][sub]["redeliver"]), (6, 1), "consumer channel")
    q = poll(lambda: api.get(path("/api/queues", v, "q1")),
             lambda q: (q["messages"], q["messages_ready"], q["messages_unacknowledged"]) == (2, 0, 2),
             "queue depth: 2 messages, both unacknowledged")
    shape(q["message_stats"], {k + "_details": {"rate": NUMBER} for k in want_q}, "queue message_stats")
    vh = poll(lambda: api.get(path("/api/vhosts", v)), lambda x: x.get("messages") == 2, "vhost messages 2")
    eq((vh["messages_ready"], vh["messages_unacknowledged"]), (0, 2), "vhost depth")
    o = api.get("/api/overview")
    shape(o, {"queue_totals": {"messages": int, "messages_ready": int, "messages_unacknowledged": int},
              "message_stats": {"publish": int, "deliver_get": int, "ack": int}}, "overview totals")


@scenario("mgmt.stats.columns_three_deep", "http", timeout=45)
def _(t):
    # The console's and rabbitmqadmin's rate columns: a path three levels
    # deep keeps that value alone, in a list and in a page of one.
    api = mgmt(t)
    v = vhost(t)
    c, _ = flow(t, v)
    cols = "columns=name,message_stats.publish_details.rate,message_stats.nosuch"
    rows = poll(lambda: api.get(path("/api/queues", v) + "?" + cols),
                lambda rows: any(r.get("name") == "q1" and r.get("message_stats") for r in rows),
                "q1 with its message_stats", timeout=20)
    q1 = find(rows, "q1", name="q1")
    eq(sorted(q1), ["message_stats", "name"], "keys of the row")
    shape(q1["message_stats"], {"publish_details": {"rate": NUMBER}}, "only the rate")
    eq(list(q1["message_stats"]["publish_details"]), ["rate"], "nothing beside the rate")
    env = api.get(path("/api/queues", v) + "?page=1&name=q1&" + cols)
    eq([sorted(x) for x in env["items"]], [["message_stats", "name"]], "a page of one")
    shape(env["items"][0]["message_stats"], {"publish_details": {"rate": NUMBER}}, "the page's rate")
    one = api.get(path("/api/queues", v, "q1") + "?columns=message_stats.publish_details.rate,messages.x")
    eq(sorted(one), ["message_stats", "messages"], "one queue: the rate, and messages (a path through a number)")
    c.close()


@scenario("mgmt.stats.queue_memory_breakdown", "http", timeout=45)
def _(t):
    # RabbitMQ's breakdown of a durable queue: 1 transient and 2 persistent
    # messages, the transient one consumed, one persistent one unacked.
    api = mgmt(t)
    v = vhost(t)
    c = t.pika(virtual_host=v)
    ch = c.channel()
    ch.queue_declare("qm", durable=True)
    ch.confirm_delivery()
    ch.basic_publish("", "qm", b"t" * 10)
    for body in (b"p" * 20, b"q" * 30):
        ch.basic_publish("", "qm", body, properties=pika.BasicProperties(delivery_mode=2))
    check(ch.basic_get("qm", auto_ack=True)[0] is not None, "the transient one")
    check(ch.basic_get("qm", auto_ack=False)[0] is not None, "one persistent, unacked")
    want = {"messages_persistent": 2, "message_bytes_persistent": 50, "messages_ram": 2,
            "message_bytes_ram": 50, "messages_ready_ram": 1, "messages_unacknowledged_ram": 1,
            "messages_paged_out": 0, "message_bytes_paged_out": 0, "message_bytes_ready": 30,
            "message_bytes_unacknowledged": 20}
    q = poll(lambda: api.get(path("/api/queues", v, "qm")),
             lambda q: all(q.get(k) == n for k, n in want.items()), "the breakdown", timeout=20)
    eq({k: q[k] for k in want}, want, "the breakdown")
    shape(q, {"memory": int, "consumer_capacity": NUMBER, "consumer_utilisation": NUMBER}, "memory, capacity")
    eq(q["consumer_capacity"], 0, "no consumers: capacity 0")
    c.close()
