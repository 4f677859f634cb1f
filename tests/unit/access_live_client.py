"""The client half of test_broker_access_live.c: pika against the broker the
test runs in its own process. It asks for each change with "want N" on
stdout and waits for "done N" on stdin; it ends with "result ok" or
"result <what failed>".

Usage: access_live_client.py PORT SCENARIO
       (revoke | delete-user | delete-vhost | persist-vhost)
"""
import sys

import pika
from pika import exceptions as pex

PORT, SCENARIO = int(sys.argv[1]), sys.argv[2]


def request(n):
    print("want %d" % n, flush=True)
    line = sys.stdin.readline().strip()
    if line != "done %d" % n:
        raise AssertionError("expected 'done %d', got %r" % (n, line))


def connect(user, vhost="/"):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", PORT, vhost, pika.PlainCredentials(user, "pw"), connection_attempts=1,
        socket_timeout=5, blocked_connection_timeout=5))


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def revoke():
    c = connect("alice")
    ch = c.channel()
    ch.confirm_delivery()
    ch.basic_publish("amq.fanout", "", b"1")
    ch.basic_publish("amq.fanout", "", b"2")  # the channel's cached check
    request(1)  # write revoked
    try:
        ch.basic_publish("amq.fanout", "", b"3")
        raise AssertionError("publish after revoking write succeeded on the open channel")
    except pex.ChannelClosedByBroker as e:
        check(e.reply_code == 403, "code %d" % e.reply_code)
        check(e.reply_text == "ACCESS_REFUSED - access to exchange 'amq.fanout' in vhost '/' "
              "refused for user 'alice'", e.reply_text)
    request(2)  # write given back
    ch2 = c.channel()
    ch2.confirm_delivery()
    ch2.basic_publish("amq.fanout", "", b"4")
    c.close()


def wait_closed(c, code, text):
    try:
        for _ in range(50):
            c.process_data_events(0.1)
        raise AssertionError("connection still open")
    except pex.ConnectionClosedByBroker as e:
        check(e.reply_code == code and e.reply_text == text, "%d %s" % (e.reply_code, e.reply_text))


def delete_user():
    c = connect("bob")
    request(1)
    wait_closed(c, 320, "CONNECTION_FORCED - user 'bob' is deleted")
    try:
        connect("bob")
        raise AssertionError("bob logged in again")
    except pex.ProbableAuthenticationError:
        pass


def delete_vhost():
    c = connect("carol", "team")
    ch = c.channel()
    ch.confirm_delivery()
    ch.exchange_declare("dx", "fanout", durable=True)
    ch.queue_declare("dq", durable=True)
    ch.queue_bind("dq", "dx")
    for i in range(10):
        ch.basic_publish("dx", "", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
    m = ch.basic_get("dq", auto_ack=False)  # one delivered, not acked
    check(m[0] is not None, "basic.get")
    request(1)
    wait_closed(c, 320, "CONNECTION_FORCED - vhost 'team' is deleted")
    try:
        connect("carol", "team")
        raise AssertionError("vhost team still opens")
    except pex.ProbableAccessDeniedError as e:
        check("vhost team not found" in str(e), str(e))


def persist_vhost():
    c = connect("carol", "team")
    ch = c.channel()
    ch.confirm_delivery()
    ch.queue_declare("kept", durable=True)
    for i in range(7):
        ch.basic_publish("", "kept", b"m%d" % i, pika.BasicProperties(delivery_mode=2))
    c.close()


try:
    {"persist-vhost": persist_vhost, "revoke": revoke, "delete-user": delete_user, "delete-vhost": delete_vhost}[SCENARIO]()
    print("result ok", flush=True)
except Exception as e:  # reported to the C side, which fails the test
    print("result %s: %s" % (type(e).__name__, str(e).replace("\n", " ")), flush=True)
