"""RabbitMQ's stream protocol: the listener and the connection (handshake,
SASL, Tune, Open, Heartbeat, Close, bad frames), with the raw client of
streamraw.py. Each expectation was checked against RabbitMQ 3.10.8's
rabbitmq_stream with the same client, except where a comment says 3.10
differs (it checks no frame size after Open; PROTOCOL.adoc and RabbitMQ
main close with frame_too_large)."""
import base64
import contextlib
import json
import struct
import subprocess
import time
import unittest
import urllib.request

import harness as h
import streamraw as s


def stream_port():
    return h.stream_address()[1]


def api(method, path, body=None):
    """A management API call as guest on the shared broker."""
    host, port = h.mgmt_address()
    req = urllib.request.Request("http://%s:%d%s" % (host, port, path), method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json",
                                          "authorization": "Basic " + base64.b64encode(b"guest:guest").decode()})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def add_user(name, password, vhost="/", perms=(".*", ".*", ".*")):
    """A user (and its permissions in vhost unless perms is None)."""
    api("PUT", "/api/users/%s" % name, {"password": password, "tags": ""})
    if perms is not None:
        api("PUT", "/api/permissions/%s/%s" % (urllib.request.quote(vhost, safe=""), name),
            {"configure": perms[0], "write": perms[1], "read": perms[2]})


@contextlib.contextmanager
def own_stream_broker(*settings):
    """A private Warren with these settings; yields its stream port."""
    proc = h.WarrenProcess(settings)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


class StreamHandshake(unittest.TestCase):
    def client(self):
        c = s.Client(stream_port())
        self.addCleanup(c.close_socket)
        return c

    def test_handshake_and_close(self):
        c = self.client()
        f = c.peer_properties()
        self.assertEqual(f.code, s.OK)
        self.assertIn(b"product", f.body)
        code, mechs = c.sasl_handshake()
        self.assertEqual((code, mechs), (s.OK, ["PLAIN", "AMQPLAIN"]))
        self.assertEqual(c.authenticate(), s.OK)
        self.assertEqual(c.tune(), (1048576, 60))  # rabbit_stream's defaults
        code, props = c.open("/")
        self.assertEqual(code, s.OK)
        self.assertEqual(props["advertised_port"], str(stream_port()))
        self.assertIn("advertised_host", props)
        self.assertEqual(c.close(), s.OK)
        self.assertTrue(c.closed())

    def test_peer_properties_are_optional(self):
        c = self.client()
        self.assertEqual(c.authenticate(), s.OK)
        c.tune()
        self.assertEqual(c.open()[0], s.OK)

    def test_amqplain(self):
        c = self.client()
        def field(k, v):
            return bytes([len(k)]) + k + b"S" + struct.pack(">I", len(v)) + v
        table = field(b"LOGIN", b"guest") + field(b"PASSWORD", b"guest")  # the content, no length
        self.assertEqual(c.authenticate(mechanism="AMQPLAIN", data=table), s.OK)

    def test_wrong_password(self):
        c = self.client()
        c.peer_properties()
        self.assertEqual(c.authenticate(password="wrong"), s.AUTHENTICATION_FAILURE)
        self.assertTrue(c.closed())

    def test_unknown_user(self):
        c = self.client()
        self.assertEqual(c.authenticate(user="nobody-%s" % h.RUN_ID), s.AUTHENTICATION_FAILURE)
        self.assertTrue(c.closed())

    def test_unknown_mechanism(self):
        c = self.client()
        self.assertEqual(c.authenticate(mechanism="FOO", data=b"x"), s.SASL_MECHANISM_NOT_SUPPORTED)
        self.assertTrue(c.closed())

    def test_malformed_plain(self):
        c = self.client()
        self.assertEqual(c.authenticate(data=b"guest\0guest"), s.SASL_ERROR)
        self.assertTrue(c.closed())

    def test_unknown_vhost(self):
        c = self.client()
        c.authenticate()
        c.tune()
        self.assertEqual(c.open("no-such-vhost-%s" % h.RUN_ID)[0], s.VHOST_ACCESS_FAILURE)
        self.assertTrue(c.closed())

    def test_vhost_without_permission(self):
        user = "streamnoperm-%s" % h.RUN_ID
        add_user(user, "pw", perms=None)
        c = self.client()
        self.assertEqual(c.authenticate(user, "pw"), s.OK)
        c.tune()
        self.assertEqual(c.open("/")[0], s.VHOST_ACCESS_FAILURE)
        self.assertTrue(c.closed())

    def test_command_before_open_closes_silently(self):
        c = self.client()
        c.authenticate()
        c.send(s.frame(s.CREATE, struct.pack(">I", 1) + s.s16("x") + s.kv([])))
        self.assertTrue(c.closed())

    def test_open_before_tune_closes(self):
        c = self.client()
        c.authenticate()
        c.expect(s.TUNE)
        c.send(s.frame(s.OPEN, struct.pack(">I", 2) + s.s16("/")))
        self.assertTrue(c.closed())

    def test_frame_over_pre_open_cap_closes(self):
        c = self.client()
        c.send(struct.pack(">I", 8193) + b"\0\x11\0\x01" + b"\0" * 8189)
        self.assertTrue(c.closed())

    def test_tiny_frame_closes(self):
        c = self.client()
        c.send(struct.pack(">I", 1) + b"\0")
        self.assertTrue(c.closed())

    def test_unknown_command_after_open(self):
        c = self.client()
        c.handshake()
        c.send(s.frame(0x7f, struct.pack(">I", 77)))
        f = c.expect(s.CLOSE)
        self.assertEqual((f.correlation, f.code), (1, s.UNKNOWN_FRAME))
        self.assertIn(b"unknown frame", f.body)
        c.send(s.frame(s.CLOSE | s.RESPONSE, struct.pack(">IH", 1, s.OK)))
        self.assertTrue(c.closed())

    def test_malformed_command_after_open(self):
        c = self.client()
        c.handshake()
        c.send(s.frame(s.QUERY_OFFSET, struct.pack(">I", 77) + s.s16("c") + s.s16("s") + b"\0"))
        f = c.expect(s.CLOSE)
        self.assertEqual(f.code, s.UNKNOWN_FRAME)

    def test_bad_version_after_open(self):
        c = self.client()
        c.handshake()
        c.send(s.frame(s.QUERY_OFFSET, struct.pack(">I", 77) + s.s16("c") + s.s16("s"), version=9))
        self.assertEqual(c.expect(s.CLOSE).code, s.UNKNOWN_FRAME)

    def test_handshake_command_after_open(self):
        c = self.client()
        c.handshake()
        c.send(s.frame(s.PEER_PROPERTIES, struct.pack(">I", 9) + s.kv([])))
        self.assertEqual(c.expect(s.CLOSE).code, s.UNKNOWN_FRAME)

    def test_frame_over_tuned_frame_max(self):
        # RabbitMQ 3.10.8 reads the whole frame and answers unknown frame;
        # PROTOCOL.adoc and RabbitMQ main: frame_too_large
        c = self.client()
        c.handshake(frame_max=10000)
        c.send(struct.pack(">I", 20000) + b"\0\x0b\0\x01" + b"\0" * 19996)
        f = c.expect(s.CLOSE)
        self.assertEqual(f.code, s.FRAME_TOO_LARGE)

    def test_heartbeat_frames_are_taken(self):
        c = self.client()
        c.handshake()
        c.send(s.frame(s.HEARTBEAT, b""))
        self.assertEqual(c.close(), s.OK)


@h.needs_own_broker
class StreamListenerSettings(unittest.TestCase):
    def test_heartbeat_sent_and_dead_peer_closed(self):
        with own_stream_broker("stream.heartbeat=1") as proc:
            c = s.Client(proc.stream_port)
            c.peer_properties()
            c.authenticate()
            self.assertEqual(c.tune(heartbeat=1), (1048576, 1))
            self.assertEqual(c.open()[0], s.OK)
            self.assertEqual(c.recv(5).key, s.HEARTBEAT)
            # silent for two intervals: the broker drops the connection
            self.assertTrue(c.closed(10))
            self.assertTrue(proc.wait_log("missed heartbeats from client"))

    def test_frame_max_and_advertised(self):
        with own_stream_broker("stream.frame_max=65536", "stream.advertised_host=stream.example",
                               "stream.advertised_port=6000") as proc:
            c = s.Client(proc.stream_port)
            c.authenticate()
            self.assertEqual(c.tune(frame_max=0), (65536, 60))
            code, props = c.open()
            self.assertEqual(props, {"advertised_host": "stream.example", "advertised_port": "6000"})
            c.close_socket()

    def test_no_listener(self):
        with own_stream_broker("stream.listeners.tcp=none") as proc:
            self.assertIsNone(proc.stream_port)
            self.assertTrue(proc.wait_log("no stream protocol listener"))

    def test_bad_setting_refused(self):
        r = subprocess.run([h.WARREN_BIN, "--set", "stream.frame_max=100"], capture_output=True,
                           timeout=10)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"bad value for 'stream.frame_max'", r.stderr)


if __name__ == "__main__":
    unittest.main()
