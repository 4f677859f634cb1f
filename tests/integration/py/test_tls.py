"""TLS: AMQPS listeners (listeners.ssl.<name>, ssl_options.*), SASL EXTERNAL
with a client certificate, the management API's ssl_* and peer_cert_*
fields, protocol and cipher refusals seen by `openssl s_client`, the TLS
handshake under handshake_timeout, and certificate reloading (SIGHUP and
warrenctl reload_certificates) that keeps open connections.

Each test starts its own Warren with TLS settings (needs_own_broker). The
certificates are tests/tls (made by tests/tls/gen.sh). Field values are
RabbitMQ 3.10's formats: "tlsv1.3", Erlang's suite names ("aes_256_gcm",
key exchange "any" for TLS 1.3, mac "aead"), subjects in RFC 4514 order
as rabbit_cert_info writes them.
"""
import base64
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import pika
from pika import exceptions as pex

import harness as h

PKI = str(h.REPO / "tests" / "tls") + "/"
TLS_RE = re.compile(r"AMQP over TLS listening on ([0-9.]+):([0-9]+)")
CLIENT_SUBJECT = "CN=warren-client,O=Warren Tests,C=GB"
CLIENT_ISSUER = "CN=Warren Test CA,O=Warren Tests"
# the test certificates end in 2126: a GeneralizedTime, which RabbitMQ 3.10
# prints as the Erlang term (seen on RabbitMQ 3.10.8 with these certificates)
VALIDITY_RE = re.compile(r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ - \{generalTime,"2126\d{10}Z"\}$')


def tls_settings(cert="server.pem", key="server.key", pki=PKI, **extra):
    s = ["listeners.ssl.default=127.0.0.1:0",
         "ssl_options.certfile=" + pki + cert, "ssl_options.keyfile=" + pki + key,
         "ssl_options.cacertfile=" + PKI + "ca.pem"]
    return s + ["%s=%s" % (k.replace("__", "."), v) for k, v in extra.items()]


class TlsBroker:
    """A private Warren with an AMQPS listener; .tls_port, .port, .api()."""

    def __init__(self, settings, plain_http=True):
        self.proc = h.WarrenProcess(settings, plain_http=plain_http)

    def __enter__(self):
        self.proc.start()
        self.tls_port = None
        for line in self.proc.log_lines:
            m = TLS_RE.search(line)
            if m:
                self.tls_port = int(m.group(2))
        assert self.tls_port, self.proc.log_tail()
        self.port = self.proc.port
        return self

    def __exit__(self, *exc):
        log = self.proc.log_tail()
        rc = self.proc.stop()
        if exc[0] is None and rc != 0:
            raise AssertionError("Warren exited with %r; log:\n%s" % (rc, log))

    def api(self, method, path, body=None):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.proc.mgmt_port, path),
                                     method=method,
                                     data=json.dumps(body).encode() if body is not None else None)
        req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return json.loads(text) if text else None

    def wait_log(self, pattern):
        if not self.proc.wait_log(pattern, regex=True):
            raise AssertionError("no log line like %r; log:\n%s" % (pattern, self.proc.log_tail()))


def client_context(cert=None):
    ctx = ssl.create_default_context(cafile=PKI + "ca.pem")
    if cert:
        ctx.load_cert_chain(PKI + cert + ".pem", PKI + cert + ".key")
    return ctx


def tls_connect(port, cert=None, external=False, **kw):
    creds = pika.credentials.ExternalCredentials() if external else pika.PlainCredentials("guest", "guest")
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, ssl_options=pika.SSLOptions(client_context(cert), "localhost"),
        credentials=creds, connection_attempts=1, socket_timeout=5, stack_timeout=10, **kw))


def round_trip(conn, n=50):
    """Publishes n messages of growing size to a fresh queue and gets them back."""
    ch = conn.channel()
    q = ch.queue_declare("", exclusive=True).method.queue
    bodies = [bytes([65 + i % 26]) * (i * 997) for i in range(n)]
    for b in bodies:
        ch.basic_publish("", q, b)
    got = []
    for method, _, body in ch.consume(q, auto_ack=True, inactivity_timeout=5):
        if method is None:
            break
        got.append(body)
        if len(got) == n:
            break
    ch.cancel()
    ch.close()
    return got == bodies


def connections(b, **want):
    """The API's connections whose fields match `want`."""
    return [c for c in b.api("GET", "/api/connections")
            if all(c.get(k) == v for k, v in want.items())]


def served_certificate(port):
    """The subject of the certificate a new handshake on `port` gets."""
    ctx = client_context()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])


def connection_start(port, tls):
    """The bytes of connection.start as the broker sends them."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    s = client_context().wrap_socket(raw, server_hostname="localhost") if tls else raw
    try:
        s.sendall(b"AMQP\x00\x00\x09\x01")
        data = b""
        while len(data) < 7 or len(data) < 8 + int.from_bytes(data[3:7], "big"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return data
    finally:
        s.close()


def s_client(port, *args):
    """openssl s_client against `port`: (exit status, output)."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port,
                        "-CAfile", PKI + "ca.pem", "-servername", "localhost"] + list(args),
                       input=b"", capture_output=True, timeout=20)
    return p.returncode, (p.stdout + p.stderr).decode("utf-8", "replace")


class TlsTest(unittest.TestCase):

    @h.needs_own_broker
    def test_pika_over_tls_and_the_api_fields(self):
        with TlsBroker(tls_settings()) as b:
            conn = tls_connect(b.tls_port)
            plain = h.connect(("127.0.0.1", b.port))
            self.assertTrue(round_trip(conn))
            deadline = time.monotonic() + 5
            while not connections(b, ssl=True) and time.monotonic() < deadline:
                time.sleep(0.1)
            tls, = connections(b, ssl=True)
            self.assertEqual(tls["ssl_protocol"], "tlsv1.3")
            self.assertEqual(tls["ssl_cipher"], "aes_256_gcm")
            self.assertEqual(tls["ssl_key_exchange"], "any")
            self.assertEqual(tls["ssl_hash"], "aead")
            for k in ("peer_cert_subject", "peer_cert_issuer", "peer_cert_validity"):
                self.assertIsNone(tls[k], k)  # no client certificate: null, as RabbitMQ 3.10
            self.assertEqual(tls["port"], b.tls_port)
            listeners = {(l["protocol"], l["port"]) for l in b.api("GET", "/api/overview")["listeners"]}
            self.assertIn(("amqp/ssl", b.tls_port), listeners)  # RabbitMQ's protocol name
            self.assertEqual(b.api("GET", "/api/health/checks/port-listener/%d" % b.tls_port)["status"],
                             "ok")
            one = b.api("GET", "/api/connections/" + urllib.parse.quote(tls["name"], safe=""))
            self.assertEqual(one["ssl_protocol"], "tlsv1.3")
            # a plain connection: RabbitMQ 3.10 writes '' in each
            pl, = connections(b, ssl=False)
            for k in ("ssl_protocol", "ssl_cipher", "ssl_key_exchange", "ssl_hash",
                      "peer_cert_subject", "peer_cert_issuer", "peer_cert_validity"):
                self.assertEqual(pl[k], "", k)
            conn.close()
            plain.close()

    @h.needs_own_broker
    def test_a_slow_reader_gets_every_byte(self):
        """30 MB of deliveries to a client that reads in bursts: the
        broker's socket fills (the write path's retries) and every body
        arrives intact, in order."""
        with TlsBroker(tls_settings()) as b:
            conn = tls_connect(b.tls_port)
            ch = conn.channel()
            q = ch.queue_declare("", exclusive=True).method.queue
            bodies = [bytes([i % 251]) * (100000 + i) for i in range(300)]
            for body in bodies:
                ch.basic_publish("", q, body)
            got = []
            for method, _, body in ch.consume(q, auto_ack=True, inactivity_timeout=10):
                if method is None:
                    break
                got.append(body)
                if len(got) % 50 == 0:
                    time.sleep(0.3)
                if len(got) == len(bodies):
                    break
            self.assertEqual(len(got), len(bodies))
            self.assertTrue(got == bodies)
            conn.close()

    @h.needs_own_broker
    def test_tls12_suite_names(self):
        with TlsBroker(tls_settings(**{"ssl_options.versions.1": "tlsv1.2"})) as b:
            conn = tls_connect(b.tls_port)
            self.assertTrue(round_trip(conn, 5))
            tls, = connections(b, ssl=True)
            self.assertEqual(tls["ssl_protocol"], "tlsv1.2")
            self.assertEqual(tls["ssl_key_exchange"], "ecdhe_rsa")
            self.assertEqual(tls["ssl_cipher"], "aes_256_gcm")
            conn.close()

    @h.needs_own_broker
    def test_external_login_with_a_client_certificate(self):
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "auth_mechanisms.1": "EXTERNAL", "auth_mechanisms.2": "PLAIN"})
        with TlsBroker(settings) as b:
            # no such user yet: refused as RabbitMQ refuses a login
            with self.assertRaises(pex.ProbableAuthenticationError) as cm:
                tls_connect(b.tls_port, cert="client", external=True)
            self.assertIn("ACCESS_REFUSED - Login was refused using authentication mechanism "
                          "EXTERNAL", str(cm.exception))
            b.api("PUT", "/api/users/warren-client", {"password": "", "tags": ""})
            b.api("PUT", "/api/permissions/%2F/warren-client",
                  {"configure": ".*", "write": ".*", "read": ".*"})
            conn = tls_connect(b.tls_port, cert="client", external=True)
            self.assertTrue(round_trip(conn, 5))
            c, = connections(b, user="warren-client")
            self.assertEqual(c["auth_mechanism"], "EXTERNAL")
            self.assertEqual(c["peer_cert_subject"], CLIENT_SUBJECT)
            self.assertEqual(c["peer_cert_issuer"], CLIENT_ISSUER)
            self.assertRegex(c["peer_cert_validity"], VALIDITY_RE)
            conn.close()
            # without a certificate (verify_peer asks, does not insist): refused
            with self.assertRaises(pex.ProbableAuthenticationError):
                tls_connect(b.tls_port, external=True)
            b.wait_log(r"login refused: connection peer presented no TLS \(x\.509\) certificate")
            # PLAIN still works over TLS; EXTERNAL is offered over TLS only
            tls_connect(b.tls_port).close()
            self.assertIn(b"\x00\x00\x00\x0eEXTERNAL PLAIN", connection_start(b.tls_port, True))
            self.assertIn(b"\x00\x00\x00\x05PLAIN", connection_start(b.port, False))

    @h.needs_own_broker
    def test_external_with_the_distinguished_name(self):
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "ssl_options.fail_if_no_peer_cert": "true",
                                   "ssl_cert_login_from": "distinguished_name",
                                   "auth_mechanisms.1": "EXTERNAL"})
        with TlsBroker(settings) as b:
            b.api("PUT", "/api/users/" + urllib.parse.quote(CLIENT_SUBJECT, safe=""),
                  {"password": "", "tags": ""})
            b.api("PUT", "/api/permissions/%2F/" + urllib.parse.quote(CLIENT_SUBJECT, safe=""),
                  {"configure": ".*", "write": ".*", "read": ".*"})
            conn = tls_connect(b.tls_port, cert="client", external=True)
            self.assertTrue(round_trip(conn, 3))
            self.assertEqual(len(connections(b, user=CLIENT_SUBJECT)), 1)
            conn.close()

    @h.needs_own_broker
    def test_external_with_a_subject_alternative_name(self):
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "ssl_cert_login_from": "subject_alternative_name",
                                   "ssl_cert_login_san_type": "email",
                                   "auth_mechanisms.1": "EXTERNAL"})
        with TlsBroker(settings) as b:
            b.api("PUT", "/api/users/client%40example.com", {"password": "", "tags": ""})
            b.api("PUT", "/api/permissions/%2F/client%40example.com",
                  {"configure": ".*", "write": ".*", "read": ".*"})
            conn = tls_connect(b.tls_port, cert="client", external=True)
            self.assertEqual(len(connections(b, user="client@example.com")), 1)
            conn.close()

    @h.needs_own_broker
    def test_fail_if_no_peer_cert_refuses_a_client_without_one(self):
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "ssl_options.fail_if_no_peer_cert": "true"})
        with TlsBroker(settings) as b:
            with self.assertRaises((pex.AMQPConnectionError, ssl.SSLError, OSError)):
                tls_connect(b.tls_port)
            with self.assertRaises((pex.AMQPConnectionError, ssl.SSLError, OSError)):
                tls_connect(b.tls_port, cert="other_client")  # an untrusted CA
            conn = tls_connect(b.tls_port, cert="client")
            self.assertTrue(round_trip(conn, 3))
            conn.close()

    @h.needs_own_broker
    def test_s_client_refusals(self):
        settings = tls_settings(**{"ssl_options.versions.1": "tlsv1.2",
                                   "ssl_options.ciphers.1": "ECDHE-RSA-AES256-GCM-SHA384",
                                   "ssl_options.honor_cipher_order": "true"})
        with TlsBroker(settings) as b:
            rc, out = s_client(b.tls_port, "-tls1_1")
            self.assertNotEqual(rc, 0, out)
            b.wait_log(r"connection 127\.0\.0\.1:\d+: TLS error: .*unsupported protocol")
            rc, out = s_client(b.tls_port, "-tls1_3")  # not in versions
            self.assertNotEqual(rc, 0, out)
            rc, out = s_client(b.tls_port, "-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256")
            self.assertNotEqual(rc, 0, out)
            rc, out = s_client(b.tls_port, "-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384")
            self.assertEqual(rc, 0, out)
            self.assertIn("ECDHE-RSA-AES256-GCM-SHA384", out)
            self.assertIn("Verify return code: 0 (ok)", out)
        # the default: TLS 1.2 and 1.3 only
        with TlsBroker(tls_settings()) as b:
            rc, out = s_client(b.tls_port, "-tls1_1")
            self.assertNotEqual(rc, 0, out)
            rc, out = s_client(b.tls_port, "-tls1_2")
            self.assertEqual(rc, 0, out)

    @h.needs_own_broker
    def test_a_stalled_tls_handshake_times_out(self):
        with TlsBroker(tls_settings(handshake_timeout=500)) as b:
            s = socket.create_connection(("127.0.0.1", b.tls_port), timeout=10)
            s.sendall(b"\x16\x03\x01")  # the start of a ClientHello, then nothing
            t0 = time.monotonic()
            self.assertEqual(s.recv(100), b"")  # closed by the broker
            self.assertLess(time.monotonic() - t0, 8)
            s.close()
            b.wait_log(r"handshake timeout")

    @h.needs_own_broker
    def test_bad_settings_stop_the_start(self):
        for settings, words in [
            (tls_settings(cert="missing.pem"), "cannot read"),
            (tls_settings(key="server2.key"), "keyfile"),
            (tls_settings(key="server_enc.key"), "keyfile"),
            (tls_settings(**{"ssl_options.verify": "maybe"}), "verify_none, verify_peer"),
            (tls_settings(**{"ssl_options.versions.1": "sslv3"}), "tlsv1.3"),
            (tls_settings(**{"ssl_options.ciphers.1": "NOPE"}), "ciphers"),
        ]:
            argv = [h.WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0",
                    "--set", "management.tcp.port=0", "--set", "prometheus.tcp.port=0"]
            d = tempfile.mkdtemp()
            argv += ["--set", "data_dir=" + d]
            for s in settings:
                argv += ["--set", s]
            p = subprocess.run(argv, capture_output=True, timeout=20)
            shutil.rmtree(d, ignore_errors=True)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn(words, p.stderr.decode(), settings)
        # with the password, the encrypted key works
        with TlsBroker(tls_settings(key="server_enc.key", **{"ssl_options.password": "warren"})) as b:
            tls_connect(b.tls_port).close()

    @h.needs_own_broker
    def test_reload_keeps_open_connections(self):
        pki = tempfile.mkdtemp(prefix="warren-pki-") + "/"
        for f in ("server.pem", "server.key"):
            shutil.copy(PKI + f, pki + f)
        try:
            with TlsBroker(tls_settings(pki=pki)) as b:
                conn = tls_connect(b.tls_port)
                self.assertNotIn("organizationalUnitName", served_certificate(b.tls_port))
                shutil.copy(PKI + "server2.pem", pki + "server.pem")
                shutil.copy(PKI + "server2.key", pki + "server.key")
                b.proc.proc.send_signal(signal.SIGHUP)
                b.wait_log("reloaded the certificates of the AMQP over TLS listeners")
                self.assertEqual(served_certificate(b.tls_port)["organizationalUnitName"], "Second")
                self.assertTrue(round_trip(conn, 10))  # the open one kept its session
                # a bad certificate: refused, logged, the last good one kept
                with open(pki + "server.pem", "w") as f:
                    f.write("not a certificate\n")
                rc, out, err = warrenctl(b, "reload_certificates")
                self.assertNotEqual(rc, 0, out + err)
                b.wait_log(r"reloading certificates: ssl_options: certfile .*server\.pem.*"
                           r"keep the previous ones")
                self.assertEqual(served_certificate(b.tls_port)["organizationalUnitName"], "Second")
                self.assertTrue(round_trip(conn, 3))
                # and warrenctl's reload with good files again
                shutil.copy(PKI + "server.pem", pki + "server.pem")
                shutil.copy(PKI + "server.key", pki + "server.key")
                rc, out, err = warrenctl(b, "reload_certificates")
                self.assertEqual(rc, 0, out + err)
                self.assertNotIn("organizationalUnitName", served_certificate(b.tls_port))
                self.assertTrue(round_trip(conn, 3))
                conn.close()
        finally:
            shutil.rmtree(pki, ignore_errors=True)

    @h.needs_own_broker
    def test_https_alone_without_tcp_keys(self):
        """management.ssl.* and prometheus.ssl.* with no .tcp.* key: HTTPS
        alone, as RabbitMQ 3.10.8 (it binds neither 15672 nor 15692 then)."""
        settings = tls_settings()
        for prefix in ("management.ssl", "prometheus.ssl"):
            settings += ["%s.port=0" % prefix, "%s.ip=127.0.0.1" % prefix,
                         "%s.certfile=%sserver.pem" % (prefix, PKI), "%s.keyfile=%sserver.key" % (prefix, PKI)]
        with TlsBroker(settings, plain_http=False) as b:
            b.wait_log("prometheus over TLS listening")
            port = int(re.search(r"management over TLS listening on [0-9.]+:([0-9]+)",
                                 "\n".join(b.proc.log_lines)).group(1))
            self.assertFalse([l for l in b.proc.log_lines
                              if re.search(r"(management|prometheus) listening on", l)], b.proc.log_tail())
            req = urllib.request.Request("https://localhost:%d/api/overview" % port)
            req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
            with urllib.request.urlopen(req, context=client_context(), timeout=10) as r:
                overview = json.loads(r.read())
            protocols = sorted(l["protocol"] for l in overview["listeners"])
            # the harness gives every broker a stream listener, listed as RabbitMQ lists it
            self.assertEqual(protocols, ["amqp", "amqp/ssl", "https", "https/prometheus", "stream"])
            self.assertEqual([(c["port"], c.get("ssl")) for c in overview["contexts"]],
                             [(str(port), "true")])


NODE_DIR = h.REPO / "conformance" / "node"


def node_clients_ready():
    """conformance/node's pinned packages, installed as its `run` does."""
    if not (NODE_DIR / "node_modules" / "amqplib").is_dir() or \
            not (NODE_DIR / "node_modules" / "@cloudamqp" / "amqp-client").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=str(NODE_DIR),
                       capture_output=True, timeout=120, check=True)


class NodeTlsTest(unittest.TestCase):

    @h.needs_own_broker
    def test_amqplib_and_amqp_client_over_amqps(self):
        node_clients_ready()
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "auth_mechanisms.1": "PLAIN", "auth_mechanisms.2": "EXTERNAL"})
        with TlsBroker(settings) as b:
            b.api("PUT", "/api/users/warren-client", {"password": "", "tags": ""})
            b.api("PUT", "/api/permissions/%2F/warren-client",
                  {"configure": ".*", "write": ".*", "read": ".*"})
            p = subprocess.run(["node", str(h.REPO / "tests" / "integration" / "py" /
                                             "tls_node_clients.js"), str(b.tls_port), PKI],
                               capture_output=True, timeout=60)
            out = p.stdout.decode().strip()
            self.assertEqual(p.returncode, 0, out + p.stderr.decode())
            self.assertEqual(json.loads(out), {"amqplib": True, "amqplib_external": True,
                                               "cloudamqp": True, "cloudamqp_suite_tls": True})


class PyAmqpSuiteTlsTest(unittest.TestCase):
    """py-amqp's own integration suite (t/integration/test_rmq.py) runs its
    RabbitMQ cases over AMQPS too when a TLS broker is there: connect with a
    client certificate (here with the test CA: Debian's py-amqp 5.1.1 checks
    the server's certificate), publish and consume (immediate set
    or not, with and without confirms), publish and get; and a certificate
    the broker does not trust must fail with ssl.SSLError. Debian packages
    py-amqp without its tests and PyPI is out of reach, so those cases are
    written here, with Debian's python3-amqp, asserting what the suite does."""

    def connection(self, port, cert):
        import amqp
        return amqp.Connection(host="127.0.0.1:%d" % port,
                               ssl={"keyfile": PKI + cert + ".key", "certfile": PKI + cert + ".pem",
                                    "ca_certs": PKI + "ca.pem"})

    @h.needs_own_broker
    def test_py_amqp_suite_cases_over_tls(self):
        import amqp
        settings = tls_settings(**{"ssl_options.verify": "verify_peer",
                                   "ssl_options.fail_if_no_peer_cert": "true"})
        with TlsBroker(settings) as b:
            with self.assertRaises(ssl.SSLError):  # test_tls_connect_fails
                c = self.connection(b.tls_port, "other_client")
                c.connect()
                c.channel()  # TLS 1.3: the refusal may arrive after the handshake
            for method in ("basic_publish", "basic_publish_confirm"):
                for mandatory in (False, True):
                    for immediate in (False, True):
                        with self.subTest(method=method, mandatory=mandatory, immediate=immediate):
                            self.publish_consume(b.tls_port, method, mandatory, immediate)
            conn = self.connection(b.tls_port, "client")
            conn.connect()
            ch = conn.channel()
            ch.queue_declare(queue="py-amqp-unittest", durable=False, exclusive=True)
            ch.basic_publish(amqp.Message("Unittest"), routing_key="py-amqp-unittest")
            msg = ch.basic_get(queue="py-amqp-unittest")
            self.assertEqual((msg.body, msg.frame_method, msg.delivery_info, msg.properties),
                             ("Unittest", amqp.spec.Basic.GetOk,
                              {"delivery_tag": 1, "redelivered": False, "exchange": "",
                               "routing_key": "py-amqp-unittest", "message_count": 0},
                              {"content_encoding": "utf-8"}))
            ch.basic_ack(msg.delivery_tag)
            self.assertIsNone(ch.basic_get(queue="py-amqp-unittest"))
            conn.close()

    def publish_consume(self, port, method, mandatory, immediate):
        import amqp
        conn = self.connection(port, "client")
        conn.connect()
        self.addCleanup(conn.collect)
        ch = conn.channel()
        ch.queue_declare(queue="py-amqp-unittest", durable=False, exclusive=True)
        got = []
        publish = lambda: getattr(ch, method)(amqp.Message("Unittest"), routing_key="py-amqp-unittest",
                                              mandatory=mandatory, immediate=immediate)
        if immediate and method == "basic_publish_confirm":
            with self.assertRaises(amqp.exceptions.AMQPNotImplementedError) as cm:
                publish()
        else:
            publish()
            if not immediate:
                ch.basic_consume(queue="py-amqp-unittest", callback=got.append,
                                 consumer_tag="amq.ctag-PCmzXGkhCw_v0Zq7jXyvkg")
                conn.drain_events(timeout=10)
                msg = got[0]
                self.assertEqual((msg.body, msg.frame_method, msg.properties),
                                 ("Unittest", amqp.spec.Basic.Deliver, {"content_encoding": "utf-8"}))
                self.assertEqual(msg.delivery_info, {
                    "consumer_tag": "amq.ctag-PCmzXGkhCw_v0Zq7jXyvkg", "delivery_tag": 1,
                    "redelivered": False, "exchange": "", "routing_key": "py-amqp-unittest"})
                ch.basic_ack(msg.delivery_tag)
                conn.close()
                return
            # the channel error for immediate=true comes back on the next call
            with self.assertRaises(amqp.exceptions.AMQPNotImplementedError) as cm:
                ch.basic_consume(queue="py-amqp-unittest", callback=got.append)
        self.assertEqual((cm.exception.reply_code, cm.exception.method_name, cm.exception.reply_text),
                         (540, "Basic.publish", "NOT_IMPLEMENTED - immediate=true"))


class HttpsTest(unittest.TestCase):
    """management.ssl.* and prometheus.ssl.*: the API and /metrics over TLS,
    with the HTTP server's limits (a stalled handshake meets head_timeout),
    and their certificates reloaded with the AMQP ones."""

    @h.needs_own_broker
    def test_management_and_prometheus_over_https(self):
        pki = tempfile.mkdtemp(prefix="warren-pki-") + "/"
        for f in ("server.pem", "server.key"):
            shutil.copy(PKI + f, pki + f)
        files = {"certfile": pki + "server.pem", "keyfile": pki + "server.key"}
        settings = tls_settings(**{"management.http.head_timeout": "4000",
                                   "management.http.max_connections": "2"})
        for prefix in ("management.ssl", "prometheus.ssl"):
            settings += ["%s.port=0" % prefix, "%s.ip=127.0.0.1" % prefix]
            settings += ["%s.%s=%s" % (prefix, k, v) for k, v in files.items()]
        https_re = re.compile(r"(management|prometheus) over TLS listening on [0-9.]+:([0-9]+)")
        try:
            with TlsBroker(settings) as b:
                b.wait_log("prometheus over TLS listening")  # after the control socket's line
                ports = {}
                for line in b.proc.log_lines:
                    m = https_re.search(line)
                    if m:
                        ports[m.group(1)] = int(m.group(2))
                ctx = client_context()
                req = urllib.request.Request("https://localhost:%d/api/overview" % ports["management"])
                req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
                with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                    self.assertEqual(json.loads(r.read())["management_version"], "3.10.8")
                with urllib.request.urlopen("https://localhost:%d/metrics" % ports["prometheus"],
                                            context=ctx, timeout=10) as r:
                    self.assertIn(b"rabbitmq_connections", r.read())
                listeners = {(l["protocol"], l["port"]) for l in b.api("GET", "/api/overview")["listeners"]}
                self.assertIn(("https", ports["management"]), listeners)
                self.assertIn(("https/prometheus", ports["prometheus"]), listeners)
                rc, out = s_client(ports["management"], "-tls1_1")
                self.assertNotEqual(rc, 0, out)
                # a handshake that stalls is closed at the head timeout
                s = socket.create_connection(("127.0.0.1", ports["management"]), timeout=10)
                s.sendall(b"\x16\x03\x01")
                self.assertEqual(s.recv(100), b"")
                s.close()
                # the connection cap holds over TLS: two idle sessions, then a
                # third connection evicts the older one (waiting for a head)
                idle = []
                for _ in range(2):
                    raw = socket.create_connection(("127.0.0.1", ports["management"]), timeout=10)
                    idle.append(ctx.wrap_socket(raw, server_hostname="localhost"))
                t0 = time.monotonic()
                with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
                    self.assertEqual(r.status, 200)
                self.assertEqual(idle[0].recv(100), b"")  # evicted
                self.assertLess(time.monotonic() - t0, 3.5)  # not by the head timeout
                idle[1].setblocking(False)  # still open: nothing to read, no end
                with self.assertRaises(ssl.SSLWantReadError):
                    idle[1].recv(100)
                for c in idle:
                    c.close()
                # reload: both HTTPS listeners serve the new certificate
                shutil.copy(PKI + "server2.pem", pki + "server.pem")
                shutil.copy(PKI + "server2.key", pki + "server.key")
                rc, out, err = warrenctl(b, "reload_certificates")
                self.assertEqual(rc, 0, out + err)
                for port in ports.values():
                    self.assertEqual(served_certificate(port)["organizationalUnitName"], "Second")
        finally:
            shutil.rmtree(pki, ignore_errors=True)


def warrenctl(b, *args):
    bin_ = os.path.join(os.path.dirname(h.WARREN_BIN), "bin", "warrenctl")
    if not os.access(bin_, os.X_OK):
        bin_ = str(h.REPO / "build" / "release" / "bin" / "warrenctl")
    p = subprocess.run([bin_, "--socket", b.proc.control_socket] + list(args),
                       capture_output=True, timeout=20)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


if __name__ == "__main__":
    unittest.main()
