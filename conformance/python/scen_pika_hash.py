"""pika: the x-consistent-hash exchange of RabbitMQ 3.10's
rabbitmq_consistent_hash_exchange plugin (enable it on the RabbitMQ side of
COMPARE=1: `rabbitmq-plugins enable rabbitmq_consistent_hash_exchange`).
Which queue each key reaches was recorded from RabbitMQ 3.10.8: Warren
hashes as the plugin does (Erlang's phash2, the jump hash over exs1024),
so the assignments are compared exactly, and the proportions over many
keys besides."""
from decimal import Decimal

import pika

from confkit import (NO_ROUTE, PRECONDITION_FAILED, channel_error, check, connection_error, count, eq, exchange,
                     get_all, queue, scenario, sync, wait_for)

CHX = "x-consistent-hash"


def setup(t):
    c = t.pika()
    return c, c.channel()


def ring(t, ch, weights, **kw):
    x = exchange(t, ch, CHX, **kw)
    qs = [queue(t, ch) for _ in weights]
    for q, w in zip(qs, weights):
        ch.queue_bind(q, x, str(w))
    return x, qs


def where(ch, x, qs, keys, props=None):
    """One message per key; the index of the queue each reached, as a string."""
    for i, k in enumerate(keys):
        ch.basic_publish(x, k, str(i).encode(), props(i) if props else None)
    sync(ch)
    got = {}
    for qi, q in enumerate(qs):
        for _, _, b in get_all(ch, q):
            got[int(b)] = qi
    return "".join(str(got.get(i, "-")) for i in range(len(keys)))


@scenario("exchange.consistent_hash_weights", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x, qs = ring(t, ch, (1, 2, 3))
    eq(where(ch, x, qs, ["k%d" % i for i in range(60)]),
       "122112122122111002012221202221121221021021101122211122012121", "queue per key")


@scenario("exchange.consistent_hash_proportions", "pika")
def _(t):
    c, ch = setup(t)
    x, qs = ring(t, ch, (1, 2, 5))
    got = where(ch, x, qs, ["order-%d" % i for i in range(4000)])
    counts = [got.count(str(i)) for i in range(3)]
    eq(sum(counts), 4000, "messages routed")
    for n, w in zip(counts, (1, 2, 5)):  # 500, 1000, 2500 expected
        check(abs(n - 500 * w) < 250, "count %d for weight %d (%r)" % (n, w, counts))
    eq(counts, [514, 994, 2492], "counts as on RabbitMQ 3.10.8")


@scenario("exchange.consistent_hash_rebind", "pika")
def _(t):
    c, ch = setup(t)
    x, qs = ring(t, ch, (1, 2, 3))
    ch.queue_unbind(qs[1], x, "2")  # the buckets after it move down
    ch.queue_bind(qs[1], x, "4")    # and it comes back at the end
    eq(where(ch, x, qs, ["k%d" % i for i in range(30)]), "111221221211222001021212201212", "after rebind")
    # a second binding to a queue adds no buckets; unbinding it drops them all
    ch.queue_bind(qs[0], x, "9")
    ch.queue_unbind(qs[0], x, "9")
    check("0" not in where(ch, x, qs, ["k%d" % i for i in range(30)]), "q0 left the ring")


@scenario("exchange.consistent_hash_header", "pika")
def _(t):
    c, ch = setup(t)
    x, qs = ring(t, ch, (2, 1, 1), arguments={"hash-header": "h"})
    values = ["a", "b", 5, -7, 2 ** 40, True, False, Decimal("1.5"), None, [1, "x"], {"n": 1}, b"bin", "zz",
              "k1", 0]
    eq(where(ch, x, qs, ["r"] * len(values), lambda i: pika.BasicProperties(headers={"h": values[i]})),
       "100220120202202", "queue per header value")
    # without the header the plugin hashes `undefined`: one fixed queue
    eq(where(ch, x, qs, ["a", "b", "c"], lambda i: pika.BasicProperties(headers={"o": i})), "000",
       "no such header")
    eq(where(ch, x, qs, ["a", "b"]), "00", "no headers at all")


@scenario("exchange.consistent_hash_property", "pika")
def _(t):
    c, ch = setup(t)
    x, qs = ring(t, ch, (1, 1, 1), arguments={"hash-property": "message_id"})
    eq(where(ch, x, qs, ["same"] * 20, lambda i: pika.BasicProperties(message_id="id%d" % i)),
       "20110001010200220200", "by message_id")
    eq(where(ch, x, qs, ["id0"]), "1", "no message_id")
    x, qs = ring(t, ch, (1, 1, 1), arguments={"hash-property": "timestamp"})
    eq(where(ch, x, qs, ["same"] * 20, lambda i: pika.BasicProperties(timestamp=1700000000 + i)),
       "11001111210211222012", "by timestamp")
    x, qs = ring(t, ch, (3, 1), arguments={"hash-property": "correlation_id"})
    eq(where(ch, x, qs, ["same"] * 12, lambda i: pika.BasicProperties(correlation_id="c-%d" % i)),
       "000000000000", "by correlation_id")


@scenario("exchange.consistent_hash_declare_errors", "pika")
def _(t):
    c, ch = setup(t)
    for args, text in (({"hash-header": "h", "hash-property": "message_id"},
                        "hash-header and hash-property are mutually exclusive"),
                       ({"hash-property": "app_id"}, "Unsupported property: app_id"),
                       ({"hash-property": "Message_id"}, "Unsupported property: Message_id")):
        ch = c.channel()
        e = channel_error(PRECONDITION_FAILED, exchange, t, ch, CHX, arguments=args, conn=c)
        eq(e.reply_text, "PRECONDITION_FAILED - " + text, "reply text")
    # a value other than a longstr crashes the plugin's validate: a bare 541
    for args in ({"hash-header": 5}, {"hash-property": 1}, {"hash-header": b"\x01"}):
        c2 = t.pika()
        e = connection_error(541, exchange, t, c2.channel(), CHX, arguments=args)
        eq(e.reply_text, "INTERNAL_ERROR", "reply text")


@scenario("exchange.consistent_hash_bind_errors", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, CHX)
    q = queue(t, ch)
    for key, text in (("abc", 'The binding key must be an integer: <<"abc">>'),
                      ("", "The binding key must be an integer: <<>>"),
                      (" 5", 'The binding key must be an integer: <<" 5">>'),
                      ("1.0", 'The binding key must be an integer: <<"1.0">>'),
                      ("0", "The binding key must be greater than 0"),
                      ("-1", "The binding key must be greater than 0")):
        ch = c.channel()
        e = channel_error(PRECONDITION_FAILED, ch.queue_bind, q, x, key, conn=c)
        eq(e.reply_text, "PRECONDITION_FAILED - " + text, "reply text for %r" % key)
    ch = c.channel()
    for key in ("+5", "007"):
        ch.queue_bind(q, x, key)


@scenario("exchange.consistent_hash_redeclare", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, CHX, arguments={"hash-header": "a"})
    ch.exchange_declare(x, CHX, arguments={"hash-header": "b"})  # not compared
    e = channel_error(PRECONDITION_FAILED, ch.exchange_declare, x, "direct", conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' in vhost '/': "
                     "received 'direct' but current is ''x-consistent-hash''" % x, "reply text")


@scenario("exchange.consistent_hash_empty_ring_cc_and_alternate", "pika")
def _(t):
    c, ch = setup(t)
    returned = []
    ch.add_on_return_callback(lambda ch_, m, p, b: returned.append(m))
    ae = exchange(t, ch, "fanout")
    spare = queue(t, ch)
    ch.queue_bind(spare, ae)
    x = exchange(t, ch, CHX)
    ch.basic_publish(x, "k1", b"x", mandatory=True)  # no bucket: returned
    check(wait_for(c, lambda: returned), "no basic.return")
    eq((returned[0].reply_code, returned[0].reply_text), (NO_ROUTE, "NO_ROUTE"), "return")
    y = exchange(t, ch, CHX, arguments={"alternate-exchange": ae})
    ch.basic_publish(y, "k1", b"x")  # no bucket: to the alternate exchange
    sync(ch)
    eq(count(ch, spare), 1, "messages in the alternate exchange's queue")
    qs = [queue(t, ch) for _ in range(3)]
    for q in qs:
        ch.queue_bind(q, x, "1")
    # CC keys do not make the exchange pick again: one queue, by the routing key
    ch.basic_publish(x, "k1", b"cc", pika.BasicProperties(headers={"CC": ["k2", "k3", "k4", "k5"]}))
    sync(ch)
    eq([count(ch, q) for q in qs], [1, 0, 0], "messages per queue")
