"""pika: exchange declare/delete rules, exchange-to-exchange bindings and
routing through the direct, fanout, topic, headers and default exchanges."""
import time

import pika

from confkit import (ACCESS_REFUSED, COMMAND_INVALID, NOT_FOUND, PRECONDITION_FAILED, bodies, bound_queue,
                     channel_error, check, connection_error, count, eq, exchange, exchange_gone, queue, scenario,
                     sync)


def setup(t):
    c = t.pika()
    return c, c.channel()


# ---------------------------------------------------------------- declare / delete

@scenario("exchange.declare_each_type", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    for kind in ("direct", "fanout", "topic", "headers"):
        x = exchange(t, ch, kind)
        ch.exchange_declare(x, exchange_type=kind, passive=True)


@scenario("exchange.declare_durable_auto_delete", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic", durable=True, auto_delete=True)
    ch.exchange_declare(x, exchange_type="topic", durable=True, auto_delete=True)


@scenario("exchange.redeclare_same", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    ch.exchange_declare(x, exchange_type="fanout")
    # RabbitMQ compares only alternate-exchange among the arguments.
    ch.exchange_declare(x, exchange_type="fanout", arguments={"foo": "bar"})


@scenario("exchange.passive_missing_404", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    e = channel_error(NOT_FOUND, ch.exchange_declare, name, passive=True, conn=c)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name, "reply text")


@scenario("exchange.passive_ignores_type", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    ch.exchange_declare(x, exchange_type="fanout", passive=True)


@scenario("exchange.redeclare_other_type_406", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    e = channel_error(PRECONDITION_FAILED, ch.exchange_declare, x, exchange_type="fanout", conn=c)
    eq(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' in vhost '/': "
                     "received 'fanout' but current is 'direct'" % x, "reply text")


@scenario("exchange.redeclare_other_flags_406", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    for flag in ("durable", "auto_delete", "internal"):
        ch = c.channel()
        e = channel_error(PRECONDITION_FAILED, ch.exchange_declare, x, **{flag: True})
        check("inequivalent arg '%s'" % flag in e.reply_text, "reply text %r" % e.reply_text)


@scenario("exchange.redeclare_other_alternate_exchange_406", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    e = channel_error(PRECONDITION_FAILED, ch.exchange_declare, x, arguments={"alternate-exchange": "other"})
    check("inequivalent arg 'alternate-exchange'" in e.reply_text, "reply text %r" % e.reply_text)


@scenario("exchange.unknown_type_503", "pika")
def _(t):
    c, ch = setup(t)
    name = t.track_exchange(t.name("x"))
    e = connection_error(COMMAND_INVALID, ch.exchange_declare, name, exchange_type="bogus")
    eq(e.reply_text, "COMMAND_INVALID - unknown exchange type 'bogus'", "reply text")


@scenario("exchange.amq_prefix_reserved_403", "pika")
def _(t):
    c, ch = setup(t)
    name = t.track_exchange("amq." + t.name("x"))
    e = channel_error(ACCESS_REFUSED, ch.exchange_declare, name, exchange_type="direct", conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - exchange name '%s' contains reserved prefix 'amq.*'" % name, "reply text")


@scenario("exchange.predeclared", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    for name, kind in (("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
                       ("amq.headers", "headers"), ("amq.match", "headers")):
        ch.exchange_declare(name, exchange_type=kind, passive=True)
        ch.exchange_declare(name, exchange_type=kind, durable=True)


@scenario("exchange.redeclare_predeclared_non_durable_406", "pika")
def _(t):
    c, ch = setup(t)
    channel_error(PRECONDITION_FAILED, ch.exchange_declare, "amq.direct", exchange_type="direct")


@scenario("exchange.declare_default_403", "pika")
def _(t):
    c, ch = setup(t)
    e = channel_error(ACCESS_REFUSED, ch.exchange_declare, "", exchange_type="direct")
    eq(e.reply_text, "ACCESS_REFUSED - operation not permitted on the default exchange", "reply text")


@scenario("exchange.delete", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    ch.exchange_delete(x)
    check(exchange_gone(c, x), "exchange still there after delete")
    ch.exchange_delete(t.name("missing"))  # deleting a missing exchange is fine


@scenario("exchange.delete_system_403", "pika")
def _(t):
    c, ch = setup(t)
    e = channel_error(ACCESS_REFUSED, ch.exchange_delete, "amq.direct", conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed",
       "reply text")
    channel_error(ACCESS_REFUSED, c.channel().exchange_delete, "")


@scenario("exchange.delete_if_unused", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    bound_queue(t, ch, x, "k")
    e = channel_error(PRECONDITION_FAILED, ch.exchange_delete, x, if_unused=True)
    eq(e.reply_text, "PRECONDITION_FAILED - exchange '%s' in vhost '/' in use" % x, "reply text")
    ch = c.channel()
    y = exchange(t, ch, "direct")
    ch.exchange_delete(y, if_unused=True)
    check(exchange_gone(c, y), "unused exchange still there")


@scenario("exchange.delete_removes_bindings", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "k")
    ch.exchange_delete(x)
    ch.exchange_declare(x, exchange_type="direct")
    ch.basic_publish(x, "k", b"lost")
    sync(ch)
    eq(count(ch, q), 0, "messages routed through a re-created exchange")


@scenario("exchange.auto_delete_after_last_unbind", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct", auto_delete=True)
    q = bound_queue(t, ch, x, "a", "b")
    ch.queue_unbind(q, x, "a")
    ch.exchange_declare(x, exchange_type="direct", auto_delete=True, passive=True)
    ch.queue_unbind(q, x, "b")
    check(exchange_gone(c, x), "auto-delete exchange survived its last unbind")


@scenario("exchange.auto_delete_never_bound_survives", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct", auto_delete=True)
    time.sleep(0.2)
    ch.exchange_declare(x, exchange_type="direct", passive=True)


@scenario("exchange.internal_publish_403", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout", internal=True)
    ch.basic_publish(x, "", b"x")
    e = channel_error(ACCESS_REFUSED, sync, ch, conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - cannot publish to internal exchange '%s' in vhost '/'" % x, "reply text")


# ---------------------------------------------------------------- routing

@scenario("routing.direct_exact_key", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "a.b")
    for k in ("a.b", "a", "A.B", "a.b ", "a.*", "#"):
        ch.basic_publish(x, k, k.encode())
    sync(ch)
    eq(bodies(ch, q), ["a.b"], "routed bodies")


@scenario("routing.direct_multiple_bindings", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "direct")
    q = bound_queue(t, ch, x, "k", "k", "j")  # a duplicate binding is idempotent
    others = [bound_queue(t, ch, x, "k") for _ in range(3)]
    ch.basic_publish(x, "k", b"1")
    ch.basic_publish(x, "j", b"2")
    sync(ch)
    eq(bodies(ch, q), ["1", "2"], "one copy per queue")
    for o in others:
        eq(bodies(ch, o), ["1"], "every queue bound with the key")


@scenario("routing.fanout_ignores_key", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    q1, q2 = bound_queue(t, ch, x, "whatever"), bound_queue(t, ch, x, "")
    ch.basic_publish(x, "k1", b"1")
    ch.basic_publish(x, "", b"2")
    sync(ch)
    eq(bodies(ch, q1), ["1", "2"], "queue 1")
    eq(bodies(ch, q2), ["1", "2"], "queue 2")


# RabbitMQ 3.10 results: pattern -> the keys (of KEYS) it matches. Words may
# be empty ("a..b" has three words); "" is zero words.
KEYS = ["", "a", "b", "a.b", "a.b.c", "a..b", "a.", ".a", ".", "..", "a.x.b", "a.x.y.b",
        "b.a", "a.b.b", "a#", "a.b*", "#", "*", "x.a.y"]
TOPIC_TABLE = {
    "#": KEYS,
    "#.#": KEYS,
    "": [""],
    "*": ["a", "b", "a#", "#", "*"],
    "a": ["a"],
    "a.*": ["a.b", "a.", "a.b*"],
    "*.b": ["a.b"],
    "a.#": ["a", "a.b", "a.b.c", "a..b", "a.", "a.x.b", "a.x.y.b", "a.b.b", "a.b*"],
    "#.b": ["b", "a.b", "a..b", "a.x.b", "a.x.y.b", "a.b.b"],
    "a.#.b": ["a.b", "a..b", "a.x.b", "a.x.y.b", "a.b.b"],
    "a.#.#.b": ["a.b", "a..b", "a.x.b", "a.x.y.b", "a.b.b"],
    "a.*.b": ["a..b", "a.x.b", "a.b.b"],
    "*.*": ["a.b", "a.", ".a", ".", "b.a", "a.b*"],
    "*.*.*": ["a.b.c", "a..b", "..", "a.x.b", "a.b.b", "x.a.y"],
    "a.*.#": ["a.b", "a.b.c", "a..b", "a.", "a.x.b", "a.x.y.b", "a.b.b", "a.b*"],
    "#.a.#": ["a", "a.b", "a.b.c", "a..b", "a.", ".a", "a.x.b", "a.x.y.b", "b.a", "a.b.b", "a.b*", "x.a.y"],
    "*.#": [k for k in KEYS if k != ""],
    "#.*": [k for k in KEYS if k != ""],
    "a#": ["a#"],
    "a.b*": ["a.b*"],
}


@scenario("routing.topic_pattern_table", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    queues = {p: bound_queue(t, ch, x, p) for p in TOPIC_TABLE}
    for k in KEYS:
        ch.basic_publish(x, k, k.encode())
    sync(ch)
    for p, expected in TOPIC_TABLE.items():
        eq(bodies(ch, queues[p]), expected, "keys matched by pattern %r" % p)


@scenario("routing.topic_overlapping_patterns_one_copy", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    q = bound_queue(t, ch, x, "a.*", "#", "a.b", "*.b")
    ch.basic_publish(x, "a.b", b"once")
    sync(ch)
    eq(bodies(ch, q), ["once"], "copies")


@scenario("routing.topic_unbind", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    q = bound_queue(t, ch, x, "a.#", "b.*")
    ch.queue_unbind(q, x, "a.#")
    ch.basic_publish(x, "a.x", b"1")
    ch.basic_publish(x, "b.x", b"2")
    sync(ch)
    eq(bodies(ch, q), ["2"], "routed after unbind")


@scenario("routing.topic_long_and_utf8_keys", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "topic")
    long_key = ".".join(["w%d" % i for i in range(60)])  # 60 words, < 255 octets
    q1 = bound_queue(t, ch, x, "w0.#.w59")
    q2 = bound_queue(t, ch, x, "caf\u00e9.*")
    ch.basic_publish(x, long_key, b"long")
    ch.basic_publish(x, "caf\u00e9.cr\u00e8me", b"utf8")
    ch.basic_publish(x, "cafe.creme", b"ascii")
    sync(ch)
    eq(bodies(ch, q1), ["long"], "long key")
    eq(bodies(ch, q2), ["utf8"], "utf-8 key")


@scenario("routing.amq_topic", "pika")
def _(t):
    c, ch = setup(t)
    prefix = "conf.%s.pika" % t.run_id
    q = bound_queue(t, ch, "amq.topic", prefix + ".#")
    ch.basic_publish("amq.topic", prefix + ".a.b", b"t")
    sync(ch)
    eq(bodies(ch, q), ["t"], "routed through amq.topic")
    ch.queue_unbind(q, "amq.topic", prefix + ".#")


HEADER_BINDINGS = {
    "all_ab": {"x-match": "all", "a": 1, "b": "x"},
    "any_ab": {"x-match": "any", "a": 1, "b": "x"},
    "default_ab": {"a": 1, "b": "x"},
    "all_empty": {"x-match": "all"},
    "any_empty": {"x-match": "any"},
    "none": None,
    "all_with_x_key": {"x-match": "all", "x-foo": "bar", "a": 1},
    "void_a": {"x-match": "all", "a": None},
    "str_1": {"a": "1"},
    "bool": {"a": True},
    "any_with_x": {"x-match": "any-with-x", "x-foo": "bar"},
    "all_with_x": {"x-match": "all-with-x", "x-foo": "bar", "a": 1},
}
HEADER_MESSAGES = {
    "m_ab": {"a": 1, "b": "x"}, "m_a": {"a": 1}, "m_b": {"b": "x"}, "m_abc": {"a": 1, "b": "x", "c": 3},
    "m_none": None, "m_empty": {}, "m_astr": {"a": "1", "b": "x"}, "m_xfoo": {"x-foo": "bar", "a": 1},
    "m_b_wrong": {"a": 1, "b": "y"}, "m_a_void": {"a": None}, "m_a_true": {"a": True},
}
# RabbitMQ 3.10: "x-" keys are ignored by all/any; a void binding value only
# tests presence; values of different types never match.
HEADER_EXPECTED = {
    "all_ab": ["m_ab", "m_abc"],
    "any_ab": ["m_ab", "m_a", "m_b", "m_abc", "m_astr", "m_xfoo", "m_b_wrong"],
    "default_ab": ["m_ab", "m_abc"],
    "all_empty": list(HEADER_MESSAGES),
    "any_empty": [],
    "none": list(HEADER_MESSAGES),
    "all_with_x_key": ["m_ab", "m_a", "m_abc", "m_xfoo", "m_b_wrong"],
    "void_a": ["m_ab", "m_a", "m_abc", "m_astr", "m_xfoo", "m_b_wrong", "m_a_void", "m_a_true"],
    "str_1": ["m_astr"],
    "bool": ["m_a_true"],
    "any_with_x": ["m_xfoo"],
    "all_with_x": ["m_xfoo"],
}


@scenario("routing.headers_match_table", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "headers")
    queues = {}
    for name, args in HEADER_BINDINGS.items():
        queues[name] = queue(t, ch)
        ch.queue_bind(queues[name], x, "", arguments=args)
    for name, headers in HEADER_MESSAGES.items():
        ch.basic_publish(x, "ignored", name.encode(), properties=pika.BasicProperties(headers=headers))
    sync(ch)
    for name, expected in HEADER_EXPECTED.items():
        eq(bodies(ch, queues[name]), expected, "binding %s" % name)


@scenario("routing.headers_ignore_routing_key", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "headers")
    q = queue(t, ch)
    ch.queue_bind(q, x, "some-key", arguments={"x-match": "any", "k": "v"})
    ch.basic_publish(x, "other-key", b"h", properties=pika.BasicProperties(headers={"k": "v"}))
    sync(ch)
    eq(bodies(ch, q), ["h"], "routed")


@scenario("routing.headers_invalid_x_match_406", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "headers")
    q = queue(t, ch)
    e = channel_error(PRECONDITION_FAILED, ch.queue_bind, q, x, "", arguments={"x-match": "bogus"}, conn=c)
    eq(e.reply_text, 'PRECONDITION_FAILED - Invalid x-match field value <<"bogus">>; expected all, any, '
                     'all-with-x, or any-with-x', "reply text")


@scenario("routing.amq_match", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    args = {"x-match": "all", "conf-run": t.run_id, "n": q}
    ch.queue_bind(q, "amq.match", "", arguments=args)
    ch.basic_publish("amq.match", "", b"m", properties=pika.BasicProperties(headers={"conf-run": t.run_id, "n": q}))
    sync(ch)
    eq(bodies(ch, q), ["m"], "routed through amq.match")
    ch.queue_unbind(q, "amq.match", "", arguments=args)


@scenario("routing.default_exchange_by_queue_name", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("", q, b"d")
    ch.basic_publish("", q + ".nope", b"lost")
    sync(ch)
    eq(bodies(ch, q), ["d"], "routed by queue name")


@scenario("routing.default_exchange_bind_403", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    e = channel_error(ACCESS_REFUSED, ch.queue_bind, q, "", "k", conn=c)
    eq(e.reply_text, "ACCESS_REFUSED - operation not permitted on the default exchange", "reply text")
    channel_error(ACCESS_REFUSED, c.channel().queue_unbind, q, "", q)


@scenario("routing.amq_default_is_not_an_alias_404", "pika")
def _(t):
    c, ch = setup(t)
    q = queue(t, ch)
    ch.basic_publish("amq.default", q, b"x")
    e = channel_error(NOT_FOUND, sync, ch)
    eq(e.reply_text, "NOT_FOUND - no exchange 'amq.default' in vhost '/'", "reply text")


@scenario("routing.publish_to_missing_exchange_404", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    name = t.name("missing")
    ch.basic_publish(name, "k", b"x")
    e = channel_error(NOT_FOUND, sync, ch, conn=c)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name, "reply text")


@scenario("routing.e2e_bind_routes_through", "pika", quick=True)
def _(t):
    c, ch = setup(t)
    src, dst = exchange(t, ch, "direct"), exchange(t, ch, "fanout")
    q = bound_queue(t, ch, dst)
    ch.exchange_bind(dst, src, "k")
    ch.basic_publish(src, "k", b"through")
    ch.basic_publish(src, "other", b"not")
    sync(ch)
    eq(bodies(ch, q), ["through"], "routed through the e2e binding")


@scenario("routing.e2e_unbind", "pika")
def _(t):
    c, ch = setup(t)
    src, dst = exchange(t, ch, "topic"), exchange(t, ch, "fanout")
    q = bound_queue(t, ch, dst)
    ch.exchange_bind(dst, src, "a.#")
    ch.exchange_unbind(dst, src, "a.#")
    ch.basic_publish(src, "a.b", b"x")
    sync(ch)
    eq(bodies(ch, q), [], "routed after e2e unbind")


@scenario("routing.e2e_cycle_one_copy", "pika")
def _(t):
    c, ch = setup(t)
    a, b = exchange(t, ch, "fanout"), exchange(t, ch, "fanout")
    ch.exchange_bind(b, a)
    ch.exchange_bind(a, b)
    q = bound_queue(t, ch, b)
    ch.queue_bind(q, a)
    ch.basic_publish(a, "", b"once")
    sync(ch)
    eq(bodies(ch, q), ["once"], "copies through a cycle")


@scenario("routing.e2e_chain_and_diamond", "pika")
def _(t):
    c, ch = setup(t)
    top = exchange(t, ch, "topic")
    left, right = exchange(t, ch, "direct"), exchange(t, ch, "direct")
    bottom = exchange(t, ch, "fanout")
    ch.exchange_bind(left, top, "a.*")
    ch.exchange_bind(right, top, "*.b")
    ch.exchange_bind(bottom, left, "a.b")
    ch.exchange_bind(bottom, right, "a.b")
    q = bound_queue(t, ch, bottom)
    ql = bound_queue(t, ch, left, "a.c")
    for k in ("a.b", "a.c", "x.b"):
        ch.basic_publish(top, k, k.encode())
    sync(ch)
    eq(bodies(ch, q), ["a.b"], "diamond delivers one copy")
    eq(bodies(ch, ql), ["a.c"], "chain through left")


@scenario("routing.e2e_missing_source_or_destination_404", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    missing = t.name("missing")
    e = channel_error(NOT_FOUND, ch.exchange_bind, x, missing, conn=c)
    eq(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % missing, "reply text")
    channel_error(NOT_FOUND, c.channel().exchange_bind, missing, x)


@scenario("routing.e2e_default_exchange_403", "pika")
def _(t):
    c, ch = setup(t)
    x = exchange(t, ch, "fanout")
    channel_error(ACCESS_REFUSED, ch.exchange_bind, x, "", conn=c)
    channel_error(ACCESS_REFUSED, c.channel().exchange_bind, "", x)


@scenario("exchange.delete_if_unused_when_only_destination", "pika")
def _(t):
    c, ch = setup(t)
    src, dst = exchange(t, ch, "fanout"), exchange(t, ch, "fanout")
    ch.exchange_bind(dst, src)
    ch.exchange_delete(dst, if_unused=True)
    check(exchange_gone(c, dst), "destination-only exchange not deleted")
