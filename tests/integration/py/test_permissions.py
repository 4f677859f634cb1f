"""Permissions over AMQP: which operation needs which permission on which
resource, in which order relative to the 403/404/406 checks, with which
code and text, closing the channel or the connection -- as RabbitMQ 3.10's
rabbit_channel does. Every expectation was recorded from RabbitMQ 3.10.8
(run with WARREN_TEST_TARGET=127.0.0.1:5672: the users are then made with
rabbitmqctl and deleted afterwards).

Against Warren the users, the vhost and the permissions are written into a
stopped broker's metadata.db (permissions_fixture.py) and Warren is started
on it, so the tests go through the store's load path too.

Users (permissions_fixture.py): NARROW may configure ^cfg, write ^wr, read
^rd; TOPIC_USER may configure and read everything and write a few names;
both have topic permissions ^allowed\\. on amq.topic. NO_PERMS has no
permissions in the vhost; NO_PASSWORD has no password.
"""
import atexit
import re
import shutil
import tempfile
import unittest

import harness as h
import permissions_fixture as fx
from pika import exceptions as pex

SUFFIX = h.RUN_ID
N = fx.names(SUFFIX)
VHOST = N["vhost"]
NARROW, TOPIC_USER = N[fx.NARROW], N[fx.TOPIC_USER]

# Objects made by guest before the tests: names chosen against the regexes.
EXCHANGES = {"rd.x": "topic", "wr.x": "fanout", "cfg.x": "topic", "x.x": "topic", "x.topic": "topic"}
QUEUES = ["rd.q", "cfg.q", "wr.q", "x.q", "q1"]
MADE = ["cfg.new", "cfg.ae2x", "ae.ok", "cfg.q2", "cfg.tmp"]  # may be created by a test


def refused(user, vhost=VHOST):
    return "ACCESS_REFUSED - access to %%s in vhost '%s' refused for user '%s'" % (vhost, user)


class _Broker:
    """Warren started on a seeded data dir, or RabbitMQ set up by rabbitmqctl."""

    def __init__(self):
        self.proc, self.data_dir = None, None

    def start(self):
        if h.TARGET:
            fx.rabbitmq_setup(SUFFIX)
            return h.broker_address()
        self.data_dir = tempfile.mkdtemp(prefix="warren-perm-")
        first = h.WarrenProcess(["data_dir=" + self.data_dir])
        first.start()  # first boot: the schema, guest and "/"
        if first.stop() != 0:
            raise RuntimeError("Warren did not stop cleanly:\n" + first.log_tail())
        fx.seed(self.data_dir, SUFFIX)
        self.proc = h.WarrenProcess(["data_dir=" + self.data_dir])
        return self.proc.start()

    def stop(self):
        if h.TARGET:
            fx.rabbitmq_teardown(SUFFIX)
            return
        rc = self.proc.stop() if self.proc else None
        shutil.rmtree(self.data_dir, ignore_errors=True)
        if rc != 0:
            raise AssertionError("Warren exited with %r on SIGTERM" % (rc,))


_fixture = {"broker": None, "addr": None}


def fixture_address():
    """Starts the seeded broker once for the module (run_py.py runs cases one
    by one, so there is no setUpClass); stopped at exit."""
    if _fixture["broker"] is None:
        b = _Broker()
        _fixture["broker"], _fixture["addr"] = b, b.start()
        atexit.register(b.stop)
        c = h.connect(_fixture["addr"], vhost=VHOST)
        ch = c.channel()
        for name, kind in EXCHANGES.items():
            ch.exchange_declare(name, kind)
        for q in QUEUES:
            ch.queue_declare(q)
        c.close()
        atexit.register(_delete_objects)
    return _fixture["addr"]


def _delete_objects():
    c = h.connect(_fixture["addr"], vhost=VHOST)
    ch = c.channel()
    for q in QUEUES + MADE:
        ch.queue_delete(q)
    for x in list(EXCHANGES) + MADE:
        ch.exchange_delete(x)
    c.close()


class PermissionTest(unittest.TestCase):
    def setUp(self):
        self.addr = fixture_address()

    def connect(self, user):
        c = h.connect(self.addr, user=user, password=fx.PASSWORD, vhost=VHOST)
        self.addCleanup(lambda: c.is_open and c.close())
        return c

    def ok(self, user, fn):
        """fn(channel) succeeds for `user`."""
        fn(self.connect(user).channel())

    def channel_error(self, user, fn, code, text):
        """fn(channel) closes the channel (not the connection) with code and
        text (a regex when it is a re.Pattern)."""
        c = self.connect(user)
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            fn(c.channel())
        e = cm.exception
        self.assertEqual(e.reply_code, code, e.reply_text)
        if isinstance(text, re.Pattern):
            self.assertRegex(e.reply_text, text)
        elif text is not None:
            self.assertEqual(e.reply_text, text)
        self.assertTrue(c.is_open, "the connection must stay open")
        h.sync(c.channel())

    def denied(self, user, fn, what):
        """403 ACCESS_REFUSED with RabbitMQ's text for `what` ("queue 'x'")."""
        self.channel_error(user, fn, h.ACCESS_REFUSED, refused(user) % what)


def publish(exchange, key="k"):
    def fn(ch):
        ch.confirm_delivery()
        ch.basic_publish(exchange, key, b"m")
    return fn


class VhostAccess(PermissionTest):
    def test_no_permissions_in_vhost_is_530(self):
        with self.assertRaises(pex.ProbableAccessDeniedError) as cm:
            h.connect(self.addr, user=N[fx.NO_PERMS], password=fx.PASSWORD, vhost=VHOST)
        self.assertIn("(530) \"NOT_ALLOWED - access to vhost '%s' refused for user '%s'\""
                      % (VHOST, N[fx.NO_PERMS]), str(cm.exception))
        # the same user may open a vhost... it has none: the default one too is refused
        with self.assertRaises(pex.ProbableAccessDeniedError):
            h.connect(self.addr, user=N[fx.NO_PERMS], password=fx.PASSWORD, vhost="/")

    def test_unknown_vhost_keeps_its_text(self):
        with self.assertRaises(pex.ProbableAccessDeniedError) as cm:
            h.connect(self.addr, user=NARROW, password=fx.PASSWORD, vhost=VHOST + "-nosuch")
        self.assertIn("NOT_ALLOWED - vhost %s-nosuch not found" % VHOST, str(cm.exception))

    def test_user_without_password_cannot_log_in(self):
        for pw in ("", fx.PASSWORD):
            with self.assertRaises(pex.ProbableAuthenticationError) as cm:
                h.connect(self.addr, user=N[fx.NO_PASSWORD], password=pw, vhost=VHOST)
            self.assertIn("ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN",
                          str(cm.exception))

    def test_wrong_password(self):
        with self.assertRaises(pex.ProbableAuthenticationError):
            h.connect(self.addr, user=NARROW, password="wrong", vhost=VHOST)

    def test_seeded_users_log_in(self):
        self.ok(NARROW, h.sync)
        self.ok(TOPIC_USER, h.sync)


class ExchangeDeclare(PermissionTest):
    def test_needs_configure(self):
        self.ok(NARROW, lambda ch: ch.exchange_declare("cfg.new", "direct"))
        self.denied(NARROW, lambda ch: ch.exchange_declare("nocfg.x", "direct"), "exchange 'nocfg.x'")

    def test_checks_before_configure(self):
        # the type (503, connection) and the default exchange (403) come first
        c = self.connect(NARROW)
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            c.channel().exchange_declare("nocfg.x", "bogus")
        self.assertEqual(cm.exception.reply_code, h.COMMAND_INVALID)
        self.channel_error(NARROW, lambda ch: ch.exchange_declare("", "direct"), h.ACCESS_REFUSED,
                           "ACCESS_REFUSED - operation not permitted on the default exchange")

    def test_configure_before_amq_prefix_and_equivalence(self):
        self.denied(NARROW, lambda ch: ch.exchange_declare("amq.foo", "direct"), "exchange 'amq.foo'")
        self.denied(NARROW, lambda ch: ch.exchange_declare("amq.direct", "direct", durable=True),
                    "exchange 'amq.direct'")
        self.channel_error(NARROW, lambda ch: ch.exchange_declare("cfg.x", "direct"), h.PRECONDITION_FAILED,
                           "PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'cfg.x' in vhost "
                           "'%s': received 'direct' but current is 'topic'" % VHOST)

    def test_passive_needs_nothing(self):
        self.ok(NARROW, lambda ch: ch.exchange_declare("x.x", passive=True))
        self.channel_error(NARROW, lambda ch: ch.exchange_declare("nope.x", passive=True), h.NOT_FOUND,
                           "NOT_FOUND - no exchange 'nope.x' in vhost '%s'" % VHOST)

    def test_alternate_exchange_needs_read_on_it_and_write_on_the_ae(self):
        # NARROW may configure cfg.* but not read it
        self.denied(NARROW, lambda ch: ch.exchange_declare(
            "cfg.ae1", "direct", arguments={"alternate-exchange": "wr.x"}), "exchange 'cfg.ae1'")
        # TOPIC_USER may read everything, but not write x.x or the default exchange
        self.denied(TOPIC_USER, lambda ch: ch.exchange_declare(
            "ae.1", "direct", arguments={"alternate-exchange": "x.x"}), "exchange 'x.x'")
        self.denied(TOPIC_USER, lambda ch: ch.exchange_declare(
            "ae.2", "direct", arguments={"alternate-exchange": ""}), "exchange 'amq.default'")
        self.ok(TOPIC_USER, lambda ch: ch.exchange_declare(
            "ae.ok", "direct", arguments={"alternate-exchange": "wr.x"}))
        # an existing exchange is not checked again
        self.ok(TOPIC_USER, lambda ch: ch.exchange_declare(
            "ae.ok", "direct", arguments={"alternate-exchange": "wr.x"}))

    def test_alternate_exchange_of_the_wrong_type(self):
        self.channel_error(NARROW, lambda ch: ch.exchange_declare(
            "cfg.ae2", "direct", arguments={"alternate-exchange": 5}), h.PRECONDITION_FAILED,
            "PRECONDITION_FAILED - invalid type 'signedint' for arg 'alternate-exchange' in exchange "
            "'cfg.ae2' in vhost '%s'" % VHOST)


class ExchangeDelete(PermissionTest):
    def test_needs_configure(self):
        self.denied(NARROW, lambda ch: ch.exchange_delete("x.x"), "exchange 'x.x'")
        self.ok(NARROW, lambda ch: ch.exchange_delete("cfg.missing"))

    def test_system_and_default_exchanges_first(self):
        self.channel_error(NARROW, lambda ch: ch.exchange_delete("amq.direct"), h.ACCESS_REFUSED,
                           "ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '%s' "
                           "not allowed" % VHOST)
        self.channel_error(NARROW, lambda ch: ch.exchange_delete(""), h.ACCESS_REFUSED,
                           "ACCESS_REFUSED - operation not permitted on the default exchange")


class QueueDeclare(PermissionTest):
    def test_needs_configure(self):
        self.ok(NARROW, lambda ch: ch.queue_declare("cfg.q2", auto_delete=True))
        self.denied(NARROW, lambda ch: ch.queue_declare("x.q"), "queue 'x.q'")

    def test_server_named_queue_checks_the_generated_name(self):
        self.channel_error(NARROW, lambda ch: ch.queue_declare(""), h.ACCESS_REFUSED, re.compile(
            r"^ACCESS_REFUSED - access to queue 'amq\.gen-[A-Za-z0-9_-]{22}' in vhost '%s' refused "
            r"for user '%s'$" % (re.escape(VHOST), re.escape(NARROW))))

    def test_amq_prefix_before_configure(self):
        self.channel_error(NARROW, lambda ch: ch.queue_declare("amq.q"), h.ACCESS_REFUSED,
                           "ACCESS_REFUSED - queue name 'amq.q' contains reserved prefix 'amq.*'")

    def test_passive_needs_nothing(self):
        self.ok(NARROW, lambda ch: ch.queue_declare("x.q", passive=True))

    def test_dead_letter_exchange_needs_read_on_queue_and_write_on_dlx(self):
        dlx = {"x-dead-letter-exchange": "wr.x"}
        self.denied(NARROW, lambda ch: ch.queue_declare("cfg.dlq", arguments=dlx), "queue 'cfg.dlq'")
        self.denied(TOPIC_USER, lambda ch: ch.queue_declare(
            "dl.q", arguments={"x-dead-letter-exchange": "x.x"}), "exchange 'x.x'")
        self.denied(TOPIC_USER, lambda ch: ch.queue_declare(
            "dl.q2", arguments={"x-dead-letter-exchange": ""}), "exchange 'amq.default'")

    def test_argument_checks_come_after_permissions(self):
        self.channel_error(NARROW, lambda ch: ch.queue_declare(
            "cfg.dlq2", arguments={"x-dead-letter-exchange": 5}), h.PRECONDITION_FAILED,
            "PRECONDITION_FAILED - invalid type 'signedint' for arg 'x-dead-letter-exchange' in queue "
            "'cfg.dlq2' in vhost '%s'" % VHOST)
        self.channel_error(NARROW, lambda ch: ch.queue_declare(
            "cfg.badarg", arguments={"x-max-length": "x"}), h.PRECONDITION_FAILED,
            "PRECONDITION_FAILED - invalid arg 'x-max-length' for queue 'cfg.badarg' in vhost '%s': "
            "\"expected integer, got longstr\"" % VHOST)
        self.denied(NARROW, lambda ch: ch.queue_declare(
            "nocfg.badarg", arguments={"x-max-length": "x"}), "queue 'nocfg.badarg'")


class QueueDeletePurge(PermissionTest):
    def test_delete_needs_configure_before_404(self):
        self.denied(NARROW, lambda ch: ch.queue_delete("x.q"), "queue 'x.q'")
        self.denied(NARROW, lambda ch: ch.queue_delete("nope.q"), "queue 'nope.q'")
        self.ok(NARROW, lambda ch: ch.queue_delete("cfg.gone"))

    def test_delete_shortcut_checks_the_last_declared_queue(self):
        def fn(ch):
            ch.queue_declare("cfg.tmp", auto_delete=True)
            ch.queue_delete("")
        self.ok(NARROW, fn)

    def test_purge_needs_read_before_404(self):
        self.denied(NARROW, lambda ch: ch.queue_purge("x.q"), "queue 'x.q'")
        self.denied(NARROW, lambda ch: ch.queue_purge("nope.q"), "queue 'nope.q'")
        self.ok(NARROW, lambda ch: ch.queue_purge("rd.q"))


class Bindings(PermissionTest):
    def test_queue_bind_needs_write_on_queue_and_read_on_exchange(self):
        self.ok(NARROW, lambda ch: ch.queue_bind("wr.q", "rd.x", "k"))
        self.denied(NARROW, lambda ch: ch.queue_bind("rd.q", "rd.x", "k"), "queue 'rd.q'")
        self.denied(NARROW, lambda ch: ch.queue_bind("wr.q", "x.x", "k"), "exchange 'x.x'")

    def test_queue_bind_order_of_checks(self):
        # write on the queue, then the default exchange, then read on the source
        self.denied(NARROW, lambda ch: ch.queue_bind("x.q", "", "k"), "queue 'x.q'")
        self.channel_error(NARROW, lambda ch: ch.queue_bind("wr.q", "", "k"), h.ACCESS_REFUSED,
                           "ACCESS_REFUSED - operation not permitted on the default exchange")
        # permissions before existence
        self.channel_error(NARROW, lambda ch: ch.queue_bind("wr.missing", "rd.x", "k"), h.NOT_FOUND,
                           "NOT_FOUND - no queue 'wr.missing' in vhost '%s'" % VHOST)
        self.channel_error(NARROW, lambda ch: ch.queue_bind("wr.q", "rd.missing", "k"), h.NOT_FOUND,
                           "NOT_FOUND - no exchange 'rd.missing' in vhost '%s'" % VHOST)
        self.denied(NARROW, lambda ch: ch.queue_bind("nope.q", "nope.x", "k"), "queue 'nope.q'")

    def test_queue_unbind_same_rules(self):
        self.denied(NARROW, lambda ch: ch.queue_unbind("x.q", "rd.x", "k"), "queue 'x.q'")
        self.denied(NARROW, lambda ch: ch.queue_unbind("wr.q", "x.x", "k"), "exchange 'x.x'")
        self.ok(NARROW, lambda ch: ch.queue_unbind("wr.q", "rd.x", "k"))

    def test_exchange_bind_needs_write_on_destination_and_read_on_source(self):
        self.ok(NARROW, lambda ch: ch.exchange_bind("wr.x", "rd.x", "k"))
        self.denied(NARROW, lambda ch: ch.exchange_bind("x.x", "rd.x", "k"), "exchange 'x.x'")
        self.denied(NARROW, lambda ch: ch.exchange_bind("wr.x", "x.x", "k"), "exchange 'x.x'")
        self.denied(NARROW, lambda ch: ch.exchange_unbind("wr.x", "x.x", "k"), "exchange 'x.x'")
        self.ok(NARROW, lambda ch: ch.exchange_unbind("wr.x", "rd.x", "k"))

    def test_shortcut_without_a_declared_queue(self):
        self.channel_error(NARROW, lambda ch: ch.queue_bind("", "amq.direct", "k"), h.NOT_FOUND,
                           "NOT_FOUND - no previously declared queue")


class Publish(PermissionTest):
    def test_needs_write(self):
        self.ok(NARROW, publish("wr.x"))
        self.denied(NARROW, publish("x.x"), "exchange 'x.x'")

    def test_default_exchange_is_amq_default(self):
        self.denied(NARROW, publish(""), "exchange 'amq.default'")

    def test_write_before_404(self):
        self.channel_error(NARROW, publish("wr.missing"), h.NOT_FOUND,
                           "NOT_FOUND - no exchange 'wr.missing' in vhost '%s'" % VHOST)
        self.denied(NARROW, publish("zz.missing"), "exchange 'zz.missing'")

    def test_many_publishes_on_one_channel(self):
        # the cached check: the same exchange many times, then another one
        c = self.connect(NARROW)
        ch = c.channel()
        ch.confirm_delivery()
        for _ in range(50):
            ch.basic_publish("wr.x", "k", b"m")
        with self.assertRaises(pex.ChannelClosedByBroker) as cm:
            ch.basic_publish("x.x", "k", b"m")
        self.assertEqual(cm.exception.reply_text, refused(NARROW) % "exchange 'x.x'")


class ConsumeGet(PermissionTest):
    def test_consume_needs_read_before_404(self):
        self.ok(NARROW, lambda ch: ch.basic_consume("rd.q", lambda *a: None))
        self.denied(NARROW, lambda ch: ch.basic_consume("x.q", lambda *a: None), "queue 'x.q'")
        self.denied(NARROW, lambda ch: ch.basic_consume("nope.q", lambda *a: None), "queue 'nope.q'")

    def test_get_needs_read_before_404(self):
        self.ok(NARROW, lambda ch: ch.basic_get("rd.q"))
        self.denied(NARROW, lambda ch: ch.basic_get("x.q"), "queue 'x.q'")
        self.denied(NARROW, lambda ch: ch.basic_get("nope.q"), "queue 'nope.q'")


def topic_refused(key, exchange="amq.topic", user=TOPIC_USER):
    return ("ACCESS_REFUSED - access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'"
            % (key, exchange, VHOST, user))


class TopicPermissions(PermissionTest):
    def test_publish_routing_key(self):
        self.ok(TOPIC_USER, publish("amq.topic", "allowed.x"))
        self.channel_error(TOPIC_USER, publish("amq.topic", "denied.x"), h.ACCESS_REFUSED,
                           topic_refused("denied.x"))

    def test_exchange_without_topic_permission_allows_every_key(self):
        self.ok(TOPIC_USER, publish("x.topic", "denied.x"))

    def test_write_permission_comes_first(self):
        self.denied(NARROW, publish("amq.topic", "allowed.x"), "exchange 'amq.topic'")

    def test_bind_routing_key(self):
        self.ok(TOPIC_USER, lambda ch: ch.queue_bind("q1", "amq.topic", "allowed.x"))
        self.channel_error(TOPIC_USER, lambda ch: ch.queue_bind("q1", "amq.topic", "denied.#"),
                           h.ACCESS_REFUSED, topic_refused("denied.#"))
        self.channel_error(TOPIC_USER, lambda ch: ch.queue_unbind("q1", "amq.topic", "denied.#"),
                           h.ACCESS_REFUSED, topic_refused("denied.#"))
        self.channel_error(TOPIC_USER, lambda ch: ch.exchange_bind("wr.x", "amq.topic", "denied.#"),
                           h.ACCESS_REFUSED, topic_refused("denied.#"))
        self.ok(TOPIC_USER, lambda ch: ch.queue_unbind("q1", "amq.topic", "allowed.x"))

    def test_bind_shortcut_checks_the_queue_name_as_key(self):
        def fn(ch):
            ch.queue_declare("sc.q", auto_delete=True)
            ch.queue_bind("", "amq.topic", "")
        self.channel_error(TOPIC_USER, fn, h.ACCESS_REFUSED, topic_refused("sc.q"))


class FirstBoot(unittest.TestCase):
    """RabbitMQ's rule: the default user is created when the store is new,
    and a later start with another default_pass changes nothing."""

    @h.needs_own_broker
    def test_default_pass_applies_on_first_boot_only(self):
        data = tempfile.mkdtemp(prefix="warren-perm-")
        self.addCleanup(shutil.rmtree, data, True)
        first = h.WarrenProcess(["data_dir=" + data, "default_pass=first"])
        addr = first.start()
        h.connect(addr, password="first").close()
        self.assertEqual(first.stop(), 0)
        second = h.WarrenProcess(["data_dir=" + data, "default_pass=second"])
        addr = second.start()
        try:
            h.connect(addr, password="first").close()
            with self.assertRaises(pex.ProbableAuthenticationError):
                h.connect(addr, password="second")
        finally:
            self.assertEqual(second.stop(), 0)

    @h.needs_own_broker
    def test_default_user_in_its_own_vhost(self):
        with h.own_broker("default_user=app", "default_pass=s3cret", "default_vhost=apps") as addr:
            h.connect(addr, user="app", password="s3cret", vhost="apps").close()
            with self.assertRaises(pex.ProbableAuthenticationError):
                h.connect(addr)  # no guest
            with self.assertRaises(pex.ProbableAccessDeniedError):
                h.connect(addr, user="app", password="s3cret", vhost="/")


if __name__ == "__main__":
    unittest.main()
