"""Permissions checked over AMQP: a user with narrow configure / write /
read regular expressions (and topic permissions), made through the HTTP API
in a fresh vhost, tries each operation; reply codes and texts are
RabbitMQ 3.10.8's. Fixture objects are made by the broker's own user."""
import ast
import re

from pika import exceptions as pex

from confkit import (scenario, eq, check, Fail, channel_error, sync, wait_count, ACCESS_REFUSED,
                     NOT_ALLOWED, CONNECTION_FORCED)
from mgmtkit import mgmt, vhost, user, grant, path

# configure c-*, write w-*, read r-*; both w-* and r-* for b-* ("both").
PERMS = {"configure": "^(c-.*|amq\\.gen.*)$", "write": "^(w-.*|b-.*)$", "read": "^(r-.*|b-.*)$"}


class Fixture:
    """A fresh vhost, a user with PERMS (or the given ones) in it, and a
    channel of the broker's user there for setting things up."""

    def __init__(self, t, objects=(), **perms):
        self.t, self.api = t, mgmt(t)
        self.v = vhost(t)
        self.u = user(t, "pw", "")
        self.perms = dict(PERMS, **perms)
        grant(t, self.v, self.u, **self.perms)
        self.admin = t.pika(virtual_host=self.v).channel()
        for kind, name, *rest in objects:
            if kind == "x":
                self.admin.exchange_declare(name, exchange_type=rest[0] if rest else "direct")
            else:
                self.admin.queue_declare(name)

    def conn(self, **kw):
        return self.t.pika(virtual_host=self.v, user=self.u, password="pw", **kw)

    def set_perms(self, **perms):
        grant(self.t, self.v, self.u, **dict(self.perms, **perms))

    def refused(self, kind, name):
        return "ACCESS_REFUSED - access to %s '%s' in vhost '%s' refused for user '%s'" % (kind, name, self.v, self.u)

    def topic_refused(self, key, x):
        return ("ACCESS_REFUSED - access to topic '%s' in exchange '%s' in vhost '%s' refused for user '%s'"
                % (key, x, self.v, self.u))


def refused(c, text, fn, *args, **kw):
    """fn(channel, ...) on a new channel of c must close that channel with
    403 and text; the connection stays open."""
    ch = c.channel()

    def run():
        fn(ch, *args, **kw)
        sync(ch)   # a refused publish closes the channel asynchronously
    e = channel_error(ACCESS_REFUSED, run, conn=c)
    eq(e.reply_text, text, "reply text")


def allowed(c, fn, *args, **kw):
    ch = c.channel()
    r = fn(ch, *args, **kw)
    sync(ch)
    ch.close()
    return r


def open_refused(code, fn):
    """fn() opens a pika connection that the broker must refuse with code.
    pika reports a close during the handshake as a Probable...Error whose
    argument is the text "ConnectionClosedByBroker: (CODE) 'TEXT'"; returns
    (code, text)."""
    try:
        fn()
    except pex.ConnectionClosedByBroker as e:
        got = (e.reply_code, e.reply_text)
    except (pex.ProbableAuthenticationError, pex.ProbableAccessDeniedError) as e:
        m = re.match(r"ConnectionClosedByBroker: \((\d+)\) (.*)$", str(e.args[0]) if e.args else "", re.S)
        if not m:
            raise Fail("refused without a connection.close: %r" % (e,))
        got = (int(m.group(1)), ast.literal_eval(m.group(2)))
    else:
        raise Fail("connection opened, expected connection.close %d" % code)
    eq(got[0], code, "connection.close reply code (%s)" % got[1])
    return got[1]


def publish(ch, x, key="k", body=b"m"):
    ch.basic_publish(x, key, body)


@scenario("permissions.exchange_declare_delete", "pika")
def _(t):
    f = Fixture(t, [("x", "r-x"), ("x", "w-x")])
    c = f.conn()
    allowed(c, lambda ch: ch.exchange_declare("c-x", "direct"))
    refused(c, f.refused("exchange", "r-new"), lambda ch: ch.exchange_declare("r-new", "direct"))
    allowed(c, lambda ch: ch.exchange_declare("r-x", passive=True))
    allowed(c, lambda ch: ch.exchange_declare("w-x", passive=True))
    refused(c, f.refused("exchange", "r-x"), lambda ch: ch.exchange_delete("r-x"))
    allowed(c, lambda ch: ch.exchange_delete("c-x"))
    f.admin.exchange_declare("r-x", passive=True)


@scenario("permissions.queue_declare_delete", "pika")
def _(t):
    f = Fixture(t, [("q", "r-q")])
    c = f.conn()
    eq(allowed(c, lambda ch: ch.queue_declare("c-q")).method.queue, "c-q", "declare with configure")
    refused(c, f.refused("queue", "r-new"), lambda ch: ch.queue_declare("r-new"))
    eq(allowed(c, lambda ch: ch.queue_declare("r-q", passive=True)).method.queue, "r-q", "passive declare")
    refused(c, f.refused("queue", "r-q"), lambda ch: ch.queue_delete("r-q"))
    allowed(c, lambda ch: ch.queue_delete("c-q"))
    f.admin.queue_declare("r-q", passive=True)


@scenario("permissions.queue_declare_delete", "py-amqp")
def _(t):
    import amqp
    f = Fixture(t, [("q", "r-q")])
    c = t.amqp(userid=f.u, password="pw", virtual_host=f.v)
    ch = c.channel()
    eq(ch.queue_declare("c-q").queue, "c-q", "declare with configure")
    for fn, text in ((lambda ch: ch.queue_declare("r-new"), f.refused("queue", "r-new")),
                     (lambda ch: ch.queue_delete("r-q"), f.refused("queue", "r-q"))):
        ch = c.channel()
        try:
            fn(ch)
        except amqp.exceptions.AccessRefused as e:
            eq((e.reply_code, e.reply_text), (ACCESS_REFUSED, text), "channel.close")
            continue
        raise Fail("not refused: %s" % text)
    c.channel().queue_delete("c-q")


@scenario("permissions.server_named_queue", "pika")
def _(t):
    f = Fixture(t)
    c = f.conn()
    q = allowed(c, lambda ch: ch.queue_declare("", exclusive=True)).method.queue
    check(q.startswith("amq.gen-"), "server-named queue %r" % q)
    f.set_perms(configure="^c-.*$")
    ch = c.channel()
    try:
        ch.queue_declare("", exclusive=True)
    except pex.ChannelClosedByBroker as e:
        eq(e.reply_code, ACCESS_REFUSED, "reply code")
        pat = r"ACCESS_REFUSED - access to queue 'amq\.gen-[A-Za-z0-9_-]+' in vhost '%s' refused for user '%s'$" % (
            re.escape(f.v), re.escape(f.u))
        check(re.match(pat, e.reply_text), "reply text %r" % e.reply_text)
        return
    raise Fail("server-named queue declared without configure on amq.gen-*")


@scenario("permissions.queue_bind_unbind", "pika", quick=True)
def _(t):
    # queue.bind / unbind: write on the queue, read on the exchange.
    f = Fixture(t, [("x", "r-x"), ("x", "w-x"), ("q", "w-q"), ("q", "r-q")])
    c = f.conn()
    allowed(c, lambda ch: ch.queue_bind("w-q", "r-x", "k"))
    refused(c, f.refused("queue", "r-q"), lambda ch: ch.queue_bind("r-q", "r-x", "k"))
    refused(c, f.refused("exchange", "w-x"), lambda ch: ch.queue_bind("w-q", "w-x", "k"))
    allowed(c, lambda ch: ch.queue_unbind("w-q", "r-x", "k"))
    f.admin.queue_bind("r-q", "r-x", "k2")
    f.admin.queue_bind("w-q", "w-x", "k2")
    refused(c, f.refused("queue", "r-q"), lambda ch: ch.queue_unbind("r-q", "r-x", "k2"))
    refused(c, f.refused("exchange", "w-x"), lambda ch: ch.queue_unbind("w-q", "w-x", "k2"))
    binds = f.api.get(path("/api/bindings", f.v, "e", "r-x", "q", "r-q"))
    eq([b["routing_key"] for b in binds], ["k2"], "the refused unbind left the binding")


@scenario("permissions.exchange_bind_unbind", "pika")
def _(t):
    # exchange.bind / unbind: write on the destination, read on the source.
    f = Fixture(t, [("x", "r-x"), ("x", "w-x"), ("x", "c-x")])
    c = f.conn()
    allowed(c, lambda ch: ch.exchange_bind("w-x", "r-x", "k"))
    refused(c, f.refused("exchange", "r-x"), lambda ch: ch.exchange_bind("r-x", "w-x", "k"))
    refused(c, f.refused("exchange", "c-x"), lambda ch: ch.exchange_bind("w-x", "c-x", "k"))
    allowed(c, lambda ch: ch.exchange_unbind("w-x", "r-x", "k"))
    f.admin.exchange_bind("w-x", "c-x", "k2")
    refused(c, f.refused("exchange", "c-x"), lambda ch: ch.exchange_unbind("w-x", "c-x", "k2"))


@scenario("permissions.publish", "pika", quick=True)
def _(t):
    f = Fixture(t, [("x", "w-x"), ("x", "r-x"), ("q", "b-q")])
    f.admin.queue_bind("b-q", "w-x", "k")
    c = f.conn()
    allowed(c, publish, "w-x")
    refused(c, f.refused("exchange", "r-x"), publish, "r-x")
    refused(c, f.refused("exchange", "amq.direct"), publish, "amq.direct")
    eq(wait_count(f.admin, "b-q", 1), 1, "the allowed publish was routed")


@scenario("permissions.publish", "py-amqp")
def _(t):
    import amqp
    f = Fixture(t, [("x", "w-x"), ("x", "r-x")])
    c = t.amqp(userid=f.u, password="pw", virtual_host=f.v)
    ch = c.channel()
    ch.basic_publish(amqp.Message(b"m"), exchange="w-x", routing_key="k")
    ch.exchange_declare("w-x", "direct", passive=True)
    ch = c.channel()
    try:
        ch.basic_publish(amqp.Message(b"m"), exchange="r-x", routing_key="k")
        ch.exchange_declare("amq.direct", "direct", passive=True)
    except amqp.exceptions.AccessRefused as e:
        eq((e.reply_code, e.reply_text), (ACCESS_REFUSED, f.refused("exchange", "r-x")), "channel.close")
        return
    raise Fail("publish to r-x not refused")


@scenario("permissions.default_exchange", "pika")
def _(t):
    # Publishing to the default exchange needs write on "amq.default".
    f = Fixture(t, [("q", "w-q")])
    c = f.conn()
    refused(c, f.refused("exchange", "amq.default"), lambda ch: ch.basic_publish("", "w-q", b"m"))
    f.set_perms(write="^(w-.*|b-.*|amq\\.default)$")
    allowed(c, lambda ch: ch.basic_publish("", "w-q", b"m"))
    eq(wait_count(f.admin, "w-q", 1), 1, "published through the default exchange")


@scenario("permissions.consume_get", "pika")
def _(t):
    f = Fixture(t, [("q", "r-q"), ("q", "w-q")])
    for q in ("r-q", "w-q"):
        f.admin.basic_publish("", q, b"m-" + q.encode())
    wait_count(f.admin, "w-q", 1)
    c = f.conn()
    eq(allowed(c, lambda ch: ch.basic_get("r-q", auto_ack=True))[2], b"m-r-q", "get with read")
    refused(c, f.refused("queue", "w-q"), lambda ch: ch.basic_get("w-q", auto_ack=True))
    allowed(c, lambda ch: ch.basic_consume("r-q", lambda *a: None))
    refused(c, f.refused("queue", "w-q"), lambda ch: ch.basic_consume("w-q", lambda *a: None))
    eq(wait_count(f.admin, "w-q", 1), 1, "the refused get took nothing")


@scenario("permissions.purge", "pika")
def _(t):
    f = Fixture(t, [("q", "r-q"), ("q", "c-q")])
    for q in ("r-q", "c-q"):
        f.admin.basic_publish("", q, b"m")
    wait_count(f.admin, "c-q", 1)
    c = f.conn()
    eq(allowed(c, lambda ch: ch.queue_purge("r-q")).method.message_count, 1, "purge with read")
    refused(c, f.refused("queue", "c-q"), lambda ch: ch.queue_purge("c-q"))
    eq(wait_count(f.admin, "c-q", 1), 1, "the refused purge removed nothing")


def topic_fixture(t):
    f = Fixture(t, [("x", "b-t", "topic"), ("x", "b-t2", "topic"), ("x", "b-d", "direct"), ("q", "b-q")])
    f.api.put(path("/api/topic-permissions", f.v, f.u), {"exchange": "b-t", "write": "^pub\\.", "read": "^bind\\."})
    return f


@scenario("permissions.topic_publish", "pika")
def _(t):
    f = topic_fixture(t)
    f.admin.queue_bind("b-q", "b-t", "#")
    c = f.conn()
    allowed(c, publish, "b-t", "pub.a")
    refused(c, f.topic_refused("other.a", "b-t"), publish, "b-t", "other.a")
    refused(c, f.topic_refused("", "b-t"), publish, "b-t", "")
    eq(wait_count(f.admin, "b-q", 1), 1, "only the allowed key was routed")


@scenario("permissions.topic_bind", "pika")
def _(t):
    f = topic_fixture(t)
    c = f.conn()
    allowed(c, lambda ch: ch.queue_bind("b-q", "b-t", "bind.a"))
    refused(c, f.topic_refused("other.a", "b-t"), lambda ch: ch.queue_bind("b-q", "b-t", "other.a"))
    allowed(c, lambda ch: ch.queue_unbind("b-q", "b-t", "bind.a"))
    f.admin.queue_bind("b-q", "b-t", "other.b")
    refused(c, f.topic_refused("other.b", "b-t"), lambda ch: ch.queue_unbind("b-q", "b-t", "other.b"))


@scenario("permissions.topic_scope", "pika")
def _(t):
    # Topic permissions name one exchange: another topic exchange and
    # non-topic exchanges are not restricted by them.
    f = topic_fixture(t)
    c = f.conn()
    allowed(c, publish, "b-t2", "other.a")
    allowed(c, publish, "b-d", "other.a")
    allowed(c, lambda ch: ch.queue_bind("b-q", "b-t2", "other.a"))


@scenario("permissions.dead_letter_exchange", "pika")
def _(t):
    # A queue declared with x-dead-letter-exchange also needs read on the
    # queue and write on the dead-letter exchange.
    f = Fixture(t, [("x", "w-dlx"), ("x", "r-dlx")], configure="^c-.*$", read="^(r-.*|c-r.*)$")
    c = f.conn()
    allowed(c, lambda ch: ch.queue_declare("c-r1", arguments={"x-dead-letter-exchange": "w-dlx"}))
    refused(c, f.refused("exchange", "r-dlx"),
            lambda ch: ch.queue_declare("c-r2", arguments={"x-dead-letter-exchange": "r-dlx"}))
    refused(c, f.refused("queue", "c-nr"),
            lambda ch: ch.queue_declare("c-nr", arguments={"x-dead-letter-exchange": "w-dlx"}))
    allowed(c, lambda ch: ch.queue_declare("c-nr"))
    for q, gone in (("c-r2", True), ("c-r1", False)):
        status = f.api.call("GET", path("/api/queues", f.v, q)).status
        eq(status, 404 if gone else 200, "queue %s after its declare" % q)


@scenario("permissions.alternate_exchange", "pika")
def _(t):
    # An exchange declared with alternate-exchange also needs read on the
    # exchange and write on the alternate exchange.
    f = Fixture(t, [("x", "w-ae", "fanout"), ("x", "r-ae", "fanout")], configure="^c-.*$", read="^(r-.*|c-r.*)$")
    c = f.conn()
    allowed(c, lambda ch: ch.exchange_declare("c-r1", "direct", arguments={"alternate-exchange": "w-ae"}))
    refused(c, f.refused("exchange", "r-ae"),
            lambda ch: ch.exchange_declare("c-r2", "direct", arguments={"alternate-exchange": "r-ae"}))
    refused(c, f.refused("exchange", "c-nr"),
            lambda ch: ch.exchange_declare("c-nr", "direct", arguments={"alternate-exchange": "w-ae"}))
    allowed(c, lambda ch: ch.exchange_declare("c-nr", "direct"))


@scenario("permissions.vhost_refused", "pika", quick=True)
def _(t):
    f = Fixture(t)
    other = vhost(t)

    def open_other():
        t.pika(virtual_host=other, user=f.u, password="pw")
    text = open_refused(NOT_ALLOWED, open_other)
    eq(text, "NOT_ALLOWED - access to vhost '%s' refused for user '%s'" % (other, f.u), "reply text")
    text = open_refused(NOT_ALLOWED, lambda: t.pika(virtual_host="conf-no-such-vhost-" + t.run_id, user=f.u,
                                                     password="pw"))
    eq(text, "NOT_ALLOWED - vhost conf-no-such-vhost-%s not found" % t.run_id, "unknown vhost")
    check(f.conn().is_open, "the permitted vhost opens")


@scenario("permissions.vhost_refused", "py-amqp")
def _(t):
    import amqp
    f = Fixture(t)
    other = vhost(t)
    try:
        t.amqp(userid=f.u, password="pw", virtual_host=other)
    except amqp.exceptions.NotAllowed as e:
        eq((e.reply_code, e.reply_text), (NOT_ALLOWED, "NOT_ALLOWED - access to vhost '%s' refused for user '%s'"
                                          % (other, f.u)), "connection.close")
        return
    raise Fail("vhost without permissions opened")


@scenario("permissions.login_refused", "pika")
def _(t):
    api = mgmt(t)
    f = Fixture(t)
    login = "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."
    text = open_refused(ACCESS_REFUSED, lambda: t.pika(virtual_host=f.v, user=f.u, password="wrong"))
    eq(text, login, "wrong password")
    text = open_refused(ACCESS_REFUSED, lambda: t.pika(virtual_host=f.v, user="conf-no-such-user-" + t.run_id,
                                                        password="pw"))
    eq(text, login, "unknown user")
    nopw = t.name("u")
    t.track_url(api.url(path("/api/users", nopw)))
    api.put(path("/api/users", nopw), {"password_hash": "", "tags": ""}, want=201)
    grant(t, f.v, nopw)
    for pw in ("", "x"):
        text = open_refused(ACCESS_REFUSED, lambda: t.pika(virtual_host=f.v, user=nopw, password=pw))
        eq(text, login, "a user without a password")


@scenario("permissions.change_while_open", "pika", quick=True)
def _(t):
    # RabbitMQ caches permission checks per channel, Warren applies a change
    # at once; asserted here is what both guarantee (README: deliberate
    # differences): a grant is usable on an open channel, a revoke applies to
    # the next channel, and after DELETE of the permissions nothing passes.
    f = Fixture(t, [("x", "w-x"), ("x", "n-x")])
    c = f.conn()
    ch = c.channel()
    publish(ch, "w-x")
    sync(ch)
    f.set_perms(write="^(w-.*|b-.*|n-.*)$")
    publish(ch, "n-x")
    sync(ch)
    f.set_perms(write="^(b-.*|n-.*)$")
    refused(c, f.refused("exchange", "w-x"), publish, "w-x")
    f.api.delete(path("/api/permissions", f.v, f.u))
    refused(c, f.refused("exchange", "n-x"), publish, "n-x")
    check(c.is_open, "the connection stays open when its permissions are deleted")


@scenario("permissions.delete_user_closes_connections", "pika")
def _(t):
    f = Fixture(t)
    c = f.conn()
    c.channel()
    f.api.delete(path("/api/users", f.u))
    try:
        for _ in range(50):
            c.process_data_events(time_limit=0.1)
    except pex.ConnectionClosedByBroker as e:
        eq((e.reply_code, e.reply_text), (CONNECTION_FORCED, "CONNECTION_FORCED - user '%s' is deleted" % f.u),
           "connection.close")
        return
    raise Fail("connection of a deleted user still open after 5 s")


@scenario("permissions.management_listing", "pika")
def _(t):
    # The user's own view through the API: a management user sees only the
    # vhosts it has permissions in, and the queues there.
    api = mgmt(t)
    f = Fixture(t, [("q", "r-q")])
    api.put(path("/api/users", f.u), {"password": "pw", "tags": "management"})
    eq([v["name"] for v in api.get("/api/vhosts", user=f.u, password="pw")], [f.v], "vhosts visible to the user")
    eq([q["name"] for q in api.get(path("/api/queues", f.v), user=f.u, password="pw")], ["r-q"], "its queues")
    eq(allowed(f.conn(), lambda ch: ch.queue_declare("r-q", passive=True)).method.queue, "r-q",
       "the same credentials over AMQP")
