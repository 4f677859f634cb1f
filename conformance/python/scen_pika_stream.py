"""pika: stream queues (x-queue-type stream) over AMQP 0-9-1, as RabbitMQ
3.10 serves them: declare rules, offsets, the x-stream-offset header, the
refused operations. Texts recorded from RabbitMQ 3.10.8. Filtering is
RabbitMQ 3.13's (3.10 has none): warren_only."""
import datetime

import pika

from confkit import (NOT_IMPLEMENTED, PRECONDITION_FAILED, channel_error, connection_error, eq,
                     queue, scenario, wait_for)

STREAM = {"x-queue-type": "stream"}


def stream(t, ch, **args):
    a = dict(STREAM)
    a.update(args)
    return queue(t, ch, durable=True, arguments=a)


def publish_each_confirmed(c, q, bodies, headers=None):
    """One confirm per message: one chunk each, as the texts were recorded."""
    ch = c.channel()
    ch.confirm_delivery()
    for i, b in enumerate(bodies):
        ch.basic_publish("", q, b, pika.BasicProperties(headers=headers(i) if headers else {"i": i}))


def consume(c, q, offset, args=None, want=None, seconds=3.0):
    ch = c.channel()
    ch.basic_qos(prefetch_count=10)
    a = dict(args or {})
    if offset is not None:
        a["x-stream-offset"] = offset
    got = []

    def on(ch_, m, p, b):
        got.append((m, p, b))
        ch_.basic_ack(m.delivery_tag)
    tag = ch.basic_consume(q, on, arguments=a)
    if want is None:
        c.process_data_events(time_limit=0.5)
    else:
        wait_for(c, lambda: len(got) >= want, timeout=seconds)
        c.process_data_events(time_limit=0.2)
    ch.basic_cancel(tag)
    return got


@scenario("stream.declare_properties_406", "pika", quick=True)
def _(t):
    c = t.pika()
    for kw, prop in ((dict(durable=True, exclusive=True), "exclusive-owner"),
                     (dict(durable=True, auto_delete=True), "auto-delete"),
                     (dict(durable=False), "non-durable")):
        name = t.track_queue(t.name("s"))
        e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, arguments=STREAM,
                          conn=c, **kw)
        eq(e.reply_text, "PRECONDITION_FAILED - invalid property '%s' for queue '%s' in vhost '/'"
           % (prop, name), "reply text for %s" % prop)


@scenario("stream.declare_arguments", "pika")
def _(t):
    c = t.pika()
    for key, value in (("x-max-length", 10), ("x-message-ttl", 1000), ("x-dead-letter-exchange", "d"),
                       ("x-max-priority", 5), ("x-single-active-consumer", True)):
        name = t.track_queue(t.name("s"))
        a = dict(STREAM, **{key: value})
        e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, durable=True,
                          arguments=a, conn=c)
        eq(e.reply_text, "PRECONDITION_FAILED - invalid arg '%s' for queue '%s' in vhost '/' of queue "
           "type rabbit_stream_queue" % (key, name), "reply text for %s" % key)
    name = t.track_queue(t.name("s"))
    e = channel_error(PRECONDITION_FAILED, c.channel().queue_declare, name, durable=True,
                      arguments=dict(STREAM, **{"x-max-age": "10x"}), conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - invalid arg 'x-max-age' for queue '%s' in vhost '/': "
       "invalid_max_age" % name)
    stream(t, c.channel(), **{"x-max-age": "7D", "x-max-length-bytes": 100000,
                              "x-stream-max-segment-size-bytes": 50000})


@scenario("stream.offsets", "pika", quick=True)
def _(t):
    c = t.pika()
    q = stream(t, c.channel())
    publish_each_confirmed(c, q, [b"m0", b"m1", b"m2", b"m3"])
    every = [b"m0", b"m1", b"m2", b"m3"]

    def bodies(offset, want):
        return [b for _, _, b in consume(c, q, offset, want=want)]
    eq(bodies("first", 4), every, "first")
    eq(bodies("last", 1), [b"m3"], "last (the last chunk)")
    eq(bodies(None, None), [], "no offset: next")
    eq(bodies(2, 2), every[2:], "offset 2")
    eq(bodies("1h", 4), every, "interval 1h")
    eq(bodies(datetime.datetime.fromtimestamp(0), 4), every, "timestamp 0")


@scenario("stream.delivery_header", "pika", quick=True)
def _(t):
    c = t.pika()
    q = stream(t, c.channel())
    publish_each_confirmed(c, q, [b"a", b"b"])
    got = consume(c, q, "first", want=2)
    eq([(m.exchange, m.routing_key, m.redelivered, p.headers) for m, p, _ in got],
       [("", q, False, {"i": 0, "x-stream-offset": 0}), ("", q, False, {"i": 1, "x-stream-offset": 1})])


@scenario("stream.refused_operations", "pika")
def _(t):
    c = t.pika()
    q = stream(t, c.channel())
    e = connection_error(NOT_IMPLEMENTED, c.channel().basic_get, q)
    eq(e.reply_text, "NOT_IMPLEMENTED - basic.get not supported by stream queues queue '%s' in vhost '/'" % q)
    c = t.pika()
    e = connection_error(NOT_IMPLEMENTED, c.channel().queue_purge, q)
    eq(e.reply_text, "NOT_IMPLEMENTED - queue.purge not supported by stream queues queue '%s' in vhost '/'" % q)
    c = t.pika()
    e = channel_error(PRECONDITION_FAILED, c.channel().basic_consume, q, lambda *a: None, conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - consumer prefetch count is not set for 'queue '%s' in vhost '/''" % q)
    ch = c.channel()
    ch.basic_qos(prefetch_count=5)
    e = connection_error(NOT_IMPLEMENTED, ch.basic_consume, q, lambda *a: None, auto_ack=True)
    eq(e.reply_text, "NOT_IMPLEMENTED - automatic acknowledgement not supported by stream queues queue '%s' "
       "in vhost '/'" % q)


@scenario("stream.nack_540", "pika")
def _(t):
    c = t.pika()
    q = stream(t, c.channel())
    publish_each_confirmed(c, q, [b"a"])
    ch = c.channel()
    ch.basic_qos(prefetch_count=5)
    got = []
    ch.basic_consume(q, lambda ch_, m, p, b: got.append(m), arguments={"x-stream-offset": "first"})
    wait_for(c, lambda: got)

    def nack():
        ch.basic_nack(got[0].delivery_tag, requeue=True)
        c.process_data_events(time_limit=1)
    e = connection_error(NOT_IMPLEMENTED, nack)
    eq(e.reply_text, "NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue "
       "'%s' in vhost '/'" % q)


@scenario("stream.filter_exact", "pika", warren_only=True)
def _(t):
    c = t.pika()
    q = stream(t, c.channel())
    values = ["red", "blue", None, "red"]
    publish_each_confirmed(c, q, [b"0", b"1", b"2", b"3"],
                           headers=lambda i: {"x-stream-filter-value": values[i]} if values[i] else {})
    eq([b for _, _, b in consume(c, q, "first", {"x-stream-filter": "red"}, want=2)], [b"0", b"3"])
    eq([b for _, _, b in consume(c, q, "first", {"x-stream-filter": "red", "x-stream-match-unfiltered": True},
                                 want=3)], [b"0", b"2", b"3"])
