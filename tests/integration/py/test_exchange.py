"""Exchanges: declare/delete rules, e2e bindings, alternate exchanges, and
routing of the direct, fanout, topic, headers and default exchanges."""
import time
import unittest

import pika
import pika.spec as S

import harness as h


class RoutingTest(h.BrokerTest):
    def bodies(self, queue):
        """Bodies now in queue (consumed), as str."""
        return [b.decode() for _, _, b in h.get_all(self.ch, queue)]

    def settle(self):
        # Publishes are asynchronous; a round trip on the same channel
        # guarantees the broker has routed them.
        h.sync(self.ch)


class Declare(RoutingTest):
    def test_declare_each_type(self):
        for kind in ("direct", "fanout", "topic", "headers"):
            x = self.exchange(kind)
            self.ch.exchange_declare(x, exchange_type=kind, passive=True)

    def test_declare_durable_auto_delete(self):
        x = self.exchange("topic", durable=True, auto_delete=True)
        self.ch.exchange_declare(x, exchange_type="topic", durable=True, auto_delete=True)

    def test_redeclare_same_is_ok(self):
        x = self.exchange("fanout")
        self.ch.exchange_declare(x, exchange_type="fanout")

    def test_redeclare_with_other_plain_arguments_is_ok(self):
        # RabbitMQ compares only alternate-exchange among the arguments.
        x = self.exchange("direct", arguments={"foo": "bar"})
        self.ch.exchange_declare(x, exchange_type="direct", arguments={"foo": "baz", "n": 1})

    def test_passive_missing_404(self):
        name = h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, name, passive=True)
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name)

    def test_passive_ignores_type(self):
        x = self.exchange("direct")
        self.ch.exchange_declare(x, exchange_type="fanout", passive=True)

    def test_redeclare_other_type_406(self):
        x = self.exchange("direct")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, x, exchange_type="fanout")
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - inequivalent arg 'type' for exchange '%s' in "
                                       "vhost '/': received 'fanout' but current is 'direct'" % x)

    def test_redeclare_other_durable_406(self):
        x = self.exchange("direct")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, x, durable=True)
        self.assertIn("inequivalent arg 'durable'", e.reply_text)

    def test_redeclare_other_auto_delete_406(self):
        x = self.exchange("direct")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, x, auto_delete=True)
        self.assertIn("inequivalent arg 'auto_delete'", e.reply_text)

    def test_redeclare_other_internal_406(self):
        x = self.exchange("direct")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, x, internal=True)
        self.assertIn("inequivalent arg 'internal'", e.reply_text)

    def test_redeclare_other_alternate_exchange_406(self):
        x = self.exchange("direct")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, x,
                                      arguments={"alternate-exchange": "elsewhere"})
        self.assertIn("inequivalent arg 'alternate-exchange'", e.reply_text)

    def test_unknown_type_503_connection_close(self):
        name = self.track_exchange(h.unique("bogus"))
        e = self.assert_connection_error(h.COMMAND_INVALID, self.ch.exchange_declare, name, exchange_type="bogus")
        self.assertEqual(e.reply_text, "COMMAND_INVALID - unknown exchange type 'bogus'")

    def test_amq_prefix_reserved_403(self):
        name = "amq." + h.unique("x")
        self.track_exchange(name)
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.exchange_declare, name, exchange_type="direct")
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - exchange name '%s' contains reserved prefix 'amq.*'" % name)

    def test_amq_prefix_passive_missing_404(self):
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, "amq." + h.unique("x"), passive=True)

    def test_amq_prefix_is_case_sensitive(self):
        self.exchange("direct", name="AMQ." + h.unique("x"))

    def test_predeclared_exchanges(self):
        for name, kind in (("amq.direct", "direct"), ("amq.fanout", "fanout"), ("amq.topic", "topic"),
                           ("amq.headers", "headers"), ("amq.match", "headers")):
            self.ch.exchange_declare(name, exchange_type=kind, passive=True)
            # They are durable: an equivalent redeclare is fine, a different one is not.
            self.ch.exchange_declare(name, exchange_type=kind, durable=True)

    def test_redeclare_predeclared_non_durable_406(self):
        self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_declare, "amq.direct",
                                  exchange_type="direct", durable=False)

    def test_declare_default_exchange_403(self):
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.exchange_declare, "", exchange_type="direct")
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - operation not permitted on the default exchange")

    def test_declare_nowait(self):
        with h.RawClient() as r:
            r.handshake()
            r.open_channel(1)
            x = self.track_exchange(h.unique("x"))
            r.send_method(1, S.Exchange.Declare(exchange=x, type="fanout", nowait=True))
            r.rpc(1, S.Exchange.Declare(exchange=x, type="fanout", passive=True), S.Exchange.DeclareOk)
            r.close_cleanly()


class Delete(RoutingTest):
    def test_delete(self):
        x = self.exchange("direct")
        self.ch.exchange_delete(x)
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, x, passive=True)

    def test_delete_missing_is_ok(self):
        self.ch.exchange_delete(h.unique("missing"))

    def test_delete_system_exchange_403(self):
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.exchange_delete, "amq.direct")
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' "
                                       "not allowed")

    def test_delete_default_403(self):
        self.assert_channel_error(h.ACCESS_REFUSED, self.ch.exchange_delete, "")

    def test_delete_if_unused_with_binding_406(self):
        x = self.exchange("direct")
        self.bound_queue(x, "k")
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.exchange_delete, x, if_unused=True)
        self.assertEqual(e.reply_text, "PRECONDITION_FAILED - exchange '%s' in vhost '/' in use" % x)

    def test_delete_if_unused_without_binding(self):
        x = self.exchange("direct")
        self.ch.exchange_delete(x, if_unused=True)
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, x, passive=True)

    def test_delete_if_unused_when_only_destination(self):
        # Being the destination of an e2e binding does not count as "used".
        src, dst = self.exchange("fanout"), self.exchange("fanout")
        self.ch.exchange_bind(dst, src)
        self.ch.exchange_delete(dst, if_unused=True)

    def test_delete_removes_bindings(self):
        x = self.exchange("direct")
        q = self.bound_queue(x, "k")
        self.ch.exchange_delete(x)
        self.ch.exchange_declare(x, exchange_type="direct")
        self.publish(x, "k", b"lost")
        self.settle()
        self.assertEqual(self.count(q), 0)

    def test_auto_delete_after_last_binding(self):
        x = self.exchange("direct", auto_delete=True)
        q = self.bound_queue(x, "a", "b")
        self.ch.queue_unbind(q, x, "a")
        self.ch.exchange_declare(x, exchange_type="direct", auto_delete=True, passive=True)
        self.ch.queue_unbind(q, x, "b")
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, x, passive=True)

    def test_auto_delete_never_bound_survives(self):
        x = self.exchange("direct", auto_delete=True)
        time.sleep(0.2)
        self.ch.exchange_declare(x, exchange_type="direct", passive=True)

    def test_auto_delete_when_bound_queue_deleted(self):
        x = self.exchange("fanout", auto_delete=True)
        q = self.bound_queue(x)
        self.ch.queue_delete(q)
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_declare, x, passive=True)


class Direct(RoutingTest):
    def test_exact_key(self):
        x = self.exchange("direct")
        q = self.bound_queue(x, "a.b")
        for k in ("a.b", "a", "A.B", "a.b ", "a.*", "#"):
            self.publish(x, k, k.encode())
        self.settle()
        self.assertEqual(self.bodies(q), ["a.b"])

    def test_two_keys_one_queue_one_copy(self):
        x = self.exchange("direct")
        q = self.bound_queue(x, "k", "k")  # duplicate binding is idempotent
        self.ch.queue_bind(q, x, "j")
        self.publish(x, "k", b"1")
        self.publish(x, "j", b"2")
        self.settle()
        self.assertEqual(self.bodies(q), ["1", "2"])

    def test_many_queues_same_key(self):
        x = self.exchange("direct")
        qs = [self.bound_queue(x, "k") for _ in range(5)]
        self.publish(x, "k", b"m")
        self.settle()
        for q in qs:
            self.assertEqual(self.bodies(q), ["m"])

    def test_publish_to_missing_exchange_404(self):
        name = h.unique("missing")
        self.publish(name, "k")
        e = self.assert_channel_error(h.NOT_FOUND, h.sync, self.ch)
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % name)


    def test_publish_after_the_exchange_is_deleted_and_declared_again(self):
        # A channel remembers the exchange it last published to (publish.c):
        # deleting it must not leave the channel routing to the old one.
        x = self.exchange("direct")
        q1 = self.bound_queue(x, "k")
        self.publish(x, "k", b"1")
        self.settle()
        self.ch.exchange_delete(x)
        self.publish(x, "k", b"lost")
        e = self.assert_channel_error(h.NOT_FOUND, h.sync, self.ch)
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % x)
        self.ch = self.conn.channel()
        self.publish(x, "k", b"before")  # the memo of this channel is fresh
        self.assert_channel_error(h.NOT_FOUND, h.sync, self.ch)
        self.ch = self.conn.channel()
        self.ch.exchange_declare(x, exchange_type="fanout")
        q2 = self.bound_queue(x, "other")
        self.publish(x, "k", b"2")
        self.ch.exchange_delete(x)
        self.ch.exchange_declare(x, exchange_type="fanout")
        self.ch.queue_bind(q1, x, "")
        self.publish(x, "k", b"3")
        self.settle()
        self.assertEqual(self.bodies(q1), ["1", "3"])
        self.assertEqual(self.bodies(q2), ["2"])


class Fanout(RoutingTest):
    def test_ignores_routing_key(self):
        x = self.exchange("fanout")
        q1, q2 = self.bound_queue(x, "whatever"), self.bound_queue(x, "")
        self.publish(x, "k1", b"1")
        self.publish(x, "", b"2")
        self.settle()
        self.assertEqual(self.bodies(q1), ["1", "2"])
        self.assertEqual(self.bodies(q2), ["1", "2"])


# RabbitMQ 3.10 results: pattern -> the keys (of KEYS) it matches. Words may
# be empty ("a..b" has three words); "" is zero words, so "*" does not match
# it but "#" does.
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


class Topic(RoutingTest):
    def test_pattern_table(self):
        x = self.exchange("topic")
        queues = {p: self.bound_queue(x, p) for p in TOPIC_TABLE}
        for k in KEYS:
            self.publish(x, k, k.encode())
        self.settle()
        for p, expected in TOPIC_TABLE.items():
            self.assertEqual(self.bodies(queues[p]), expected, "pattern %r" % p)

    def test_overlapping_patterns_one_copy(self):
        x = self.exchange("topic")
        q = self.bound_queue(x, "a.*", "#", "a.b", "*.b")
        self.publish(x, "a.b", b"once")
        self.settle()
        self.assertEqual(self.bodies(q), ["once"])

    def test_unbind_pattern(self):
        x = self.exchange("topic")
        q = self.bound_queue(x, "a.#", "b.*")
        self.ch.queue_unbind(q, x, "a.#")
        self.publish(x, "a.x", b"1")
        self.publish(x, "b.x", b"2")
        self.settle()
        self.assertEqual(self.bodies(q), ["2"])

    def test_amq_topic(self):
        q = self.bound_queue("amq.topic", "itest.%s.#" % h.RUN_ID)
        self.publish("amq.topic", "itest.%s.a.b" % h.RUN_ID, b"t")
        self.settle()
        self.assertEqual(self.bodies(q), ["t"])


class Headers(RoutingTest):
    BINDINGS = {
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
    MESSAGES = {
        "m_ab": {"a": 1, "b": "x"}, "m_a": {"a": 1}, "m_b": {"b": "x"}, "m_abc": {"a": 1, "b": "x", "c": 3},
        "m_none": None, "m_empty": {}, "m_astr": {"a": "1", "b": "x"}, "m_xfoo": {"x-foo": "bar", "a": 1},
        "m_b_wrong": {"a": 1, "b": "y"}, "m_a_void": {"a": None}, "m_a_true": {"a": True},
    }
    EVERYTHING = list(MESSAGES)
    # RabbitMQ 3.10: "x-" keys are ignored by all/any; a void binding value
    # only tests presence; values of different types never match.
    EXPECTED = {
        "all_ab": ["m_ab", "m_abc"],
        "any_ab": ["m_ab", "m_a", "m_b", "m_abc", "m_astr", "m_xfoo", "m_b_wrong"],
        "default_ab": ["m_ab", "m_abc"],
        "all_empty": EVERYTHING,
        "any_empty": [],
        "none": EVERYTHING,
        "all_with_x_key": ["m_ab", "m_a", "m_abc", "m_xfoo", "m_b_wrong"],
        "void_a": ["m_ab", "m_a", "m_abc", "m_astr", "m_xfoo", "m_b_wrong", "m_a_void", "m_a_true"],
        "str_1": ["m_astr"],
        "bool": ["m_a_true"],
        "any_with_x": ["m_xfoo"],
        "all_with_x": ["m_xfoo"],
    }

    def test_match_table(self):
        x = self.exchange("headers")
        queues = {}
        for name, args in self.BINDINGS.items():
            queues[name] = self.queue()
            self.ch.queue_bind(queues[name], x, "", arguments=args)
        for name, headers in self.MESSAGES.items():
            self.publish(x, "ignored", name.encode(), properties=pika.BasicProperties(headers=headers))
        self.settle()
        for name, expected in self.EXPECTED.items():
            self.assertEqual(self.bodies(queues[name]), expected, "binding %s" % name)

    def test_routing_key_ignored(self):
        x = self.exchange("headers")
        q = self.queue()
        self.ch.queue_bind(q, x, "some-key", arguments={"x-match": "any", "k": "v"})
        self.publish(x, "other-key", b"h", properties=pika.BasicProperties(headers={"k": "v"}))
        self.settle()
        self.assertEqual(self.bodies(q), ["h"])

    def test_invalid_x_match_406(self):
        x = self.exchange("headers")
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_bind, q, x, "",
                                      arguments={"x-match": "bogus"})
        self.assertEqual(e.reply_text, 'PRECONDITION_FAILED - Invalid x-match field value <<"bogus">>; '
                                       'expected all, any, all-with-x, or any-with-x')

    def test_x_match_wrong_type_406(self):
        x = self.exchange("headers")
        q = self.queue()
        e = self.assert_channel_error(h.PRECONDITION_FAILED, self.ch.queue_bind, q, x, "",
                                      arguments={"x-match": 1})
        self.assertIn("Invalid x-match field type", e.reply_text)

    def test_amq_match_is_headers(self):
        q = self.queue()
        self.ch.queue_bind(q, "amq.match", "", arguments={"x-match": "all", "itest-run": h.RUN_ID, "n": q})
        self.publish("amq.match", "", b"m", properties=pika.BasicProperties(headers={"itest-run": h.RUN_ID, "n": q}))
        self.settle()
        self.assertEqual(self.bodies(q), ["m"])


class Default(RoutingTest):
    def test_routes_by_queue_name(self):
        q = self.queue()
        self.publish("", q, b"d")
        self.publish("", q + ".nope", b"lost")
        self.settle()
        self.assertEqual(self.bodies(q), ["d"])

    def test_bind_to_default_403(self):
        q = self.queue()
        e = self.assert_channel_error(h.ACCESS_REFUSED, self.ch.queue_bind, q, "", "k")
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - operation not permitted on the default exchange")

    def test_unbind_from_default_403(self):
        q = self.queue()
        self.assert_channel_error(h.ACCESS_REFUSED, self.ch.queue_unbind, q, "", q)

    def test_e2e_bind_default_403(self):
        x = self.exchange("fanout")
        self.assert_channel_error(h.ACCESS_REFUSED, self.ch.exchange_bind, x, "")
        self.assert_channel_error(h.ACCESS_REFUSED, self.conn.channel().exchange_bind, "", x)

    def test_amq_default_name_is_not_an_alias_on_publish(self):
        # Surprise: RabbitMQ 3.10 answers 404 for basic.publish to "amq.default".
        q = self.queue()
        self.publish("amq.default", q)
        e = self.assert_channel_error(h.NOT_FOUND, h.sync, self.ch)
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange 'amq.default' in vhost '/'")


class ExchangeToExchange(RoutingTest):
    def test_bind_routes_through(self):
        src, dst = self.exchange("direct"), self.exchange("fanout")
        q = self.bound_queue(dst)
        self.ch.exchange_bind(dst, src, "k")
        self.publish(src, "k", b"through")
        self.publish(src, "other", b"not")
        self.settle()
        self.assertEqual(self.bodies(q), ["through"])

    def test_unbind_stops_routing(self):
        src, dst = self.exchange("topic"), self.exchange("fanout")
        q = self.bound_queue(dst)
        self.ch.exchange_bind(dst, src, "a.#")
        self.ch.exchange_unbind(dst, src, "a.#")
        self.publish(src, "a.b", b"x")
        self.settle()
        self.assertEqual(self.bodies(q), [])

    def test_cycle_does_not_loop(self):
        a, b = self.exchange("fanout"), self.exchange("fanout")
        self.ch.exchange_bind(b, a)
        self.ch.exchange_bind(a, b)
        qa, qb = self.bound_queue(a), self.bound_queue(b)
        self.publish(a, "", b"1")
        self.publish(b, "", b"2")
        self.settle()
        self.assertEqual(self.bodies(qa), ["1", "2"])
        self.assertEqual(self.bodies(qb), ["1", "2"])

    def test_self_binding(self):
        x = self.exchange("fanout")
        self.ch.exchange_bind(x, x)
        q = self.bound_queue(x)
        self.publish(x, "", b"self")
        self.settle()
        self.assertEqual(self.bodies(q), ["self"])

    def test_diamond_delivers_once_per_queue(self):
        top, left, right = self.exchange("fanout"), self.exchange("fanout"), self.exchange("fanout")
        self.ch.exchange_bind(left, top)
        self.ch.exchange_bind(right, top)
        q = self.bound_queue(left)
        self.ch.queue_bind(q, right)
        self.publish(top, "", b"one")
        self.settle()
        self.assertEqual(self.bodies(q), ["one"])

    def test_chain_of_topic_exchanges(self):
        x1, x2, x3 = self.exchange("topic"), self.exchange("topic"), self.exchange("direct")
        self.ch.exchange_bind(x2, x1, "a.#")
        self.ch.exchange_bind(x3, x2, "*.b")
        q = self.bound_queue(x3, "a.b")
        for k in ("a.b", "a.c", "c.b", "a.b.c"):
            self.publish(x1, k, k.encode())
        self.settle()
        self.assertEqual(self.bodies(q), ["a.b"])

    def test_bind_missing_destination_404(self):
        src, missing = self.exchange("fanout"), h.unique("missing")
        e = self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_bind, missing, src)
        self.assertEqual(e.reply_text, "NOT_FOUND - no exchange '%s' in vhost '/'" % missing)

    def test_bind_missing_source_404(self):
        dst = self.exchange("fanout")
        self.assert_channel_error(h.NOT_FOUND, self.ch.exchange_bind, dst, h.unique("missing"))

    def test_deleting_destination_removes_binding(self):
        src, dst = self.exchange("fanout"), self.exchange("fanout")
        q = self.bound_queue(dst)
        self.ch.exchange_bind(dst, src)
        self.ch.exchange_delete(dst)
        self.ch.exchange_declare(dst, exchange_type="fanout")
        self.ch.queue_bind(q, dst)
        self.publish(src, "", b"x")
        self.settle()
        self.assertEqual(self.bodies(q), [])


class AlternateExchange(RoutingTest):
    def setUp(self):
        super().setUp()
        self.ae = self.exchange("fanout")
        self.ae_q = self.bound_queue(self.ae)
        self.x = self.exchange("direct", arguments={"alternate-exchange": self.ae})
        self.q = self.bound_queue(self.x, "k")

    def test_unroutable_goes_to_ae(self):
        self.publish(self.x, "k", b"routed")
        self.publish(self.x, "other", b"unroutable")
        self.settle()
        self.assertEqual(self.bodies(self.q), ["routed"])
        self.assertEqual(self.bodies(self.ae_q), ["unroutable"])

    def test_mandatory_via_ae_is_not_returned(self):
        returned = []
        self.ch.add_on_return_callback(lambda *a: returned.append(a))
        self.publish(self.x, "other", b"m", mandatory=True)
        self.settle()
        h.drain(self.conn, 0.2)
        self.assertEqual(returned, [])
        self.assertEqual(self.bodies(self.ae_q), ["m"])

    def test_ae_chain(self):
        ae2 = self.exchange("fanout")
        q2 = self.bound_queue(ae2)
        # the AE itself has an AE; an unroutable message at ae_x goes on to ae2
        ae_x = self.exchange("direct", arguments={"alternate-exchange": ae2})
        x = self.exchange("direct", arguments={"alternate-exchange": ae_x})
        self.publish(x, "nothing", b"chained")
        self.settle()
        self.assertEqual(self.bodies(q2), ["chained"])

    def test_missing_ae_then_mandatory_returns(self):
        x = self.exchange("direct", arguments={"alternate-exchange": h.unique("missing")})
        returned = []
        self.ch.add_on_return_callback(lambda ch, m, p, b: returned.append((m.reply_code, b)))
        self.publish(x, "k", b"r", mandatory=True)
        self.settle()
        self.assertTrue(h.wait_for(self.conn, lambda: returned))
        self.assertEqual(returned, [(h.NO_ROUTE, b"r")])

    def test_ae_cycle_does_not_loop(self):
        a = self.track_exchange(h.unique("x"))
        b = self.track_exchange(h.unique("x"))
        self.ch.exchange_declare(a, "direct", arguments={"alternate-exchange": b})
        self.ch.exchange_declare(b, "direct", arguments={"alternate-exchange": a})
        self.publish(a, "k", b"x")
        self.settle()


class Internal(RoutingTest):
    def test_publish_to_internal_403(self):
        x = self.exchange("fanout", internal=True)
        self.publish(x, "", b"x")
        e = self.assert_channel_error(h.ACCESS_REFUSED, h.sync, self.ch)
        self.assertEqual(e.reply_text, "ACCESS_REFUSED - cannot publish to internal exchange '%s' in vhost '/'" % x)

    def test_internal_as_e2e_destination(self):
        src, inner = self.exchange("fanout"), self.exchange("fanout", internal=True)
        q = self.bound_queue(inner)
        self.ch.exchange_bind(inner, src)
        self.publish(src, "", b"via")
        self.settle()
        self.assertEqual(self.bodies(q), ["via"])


if __name__ == "__main__":
    unittest.main()
