"""The management plane under hostile HTTP clients (issue 17): bodies that
are never read without credentials, heads that never finish, more
connections than the limit, cross-site writes, big listings beside AMQP
traffic, numbers out of range. Each test starts its own Warren with short
HTTP deadlines so they fire within the test.
"""
import base64
import http.client
import json
import socket
import threading
import time
import unittest
import urllib.parse

import harness as h

AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()
SETTINGS = ["management.http.head_timeout=1000", "management.http.body_timeout=2000",
            "management.tcp.idle_timeout=2000", "management.http.max_connections=64"]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def recv_until_close(s, limit=1 << 20, timeout=10.0):
    """What the server sends until it closes (or `timeout`)."""
    s.settimeout(timeout)
    data = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(data) < limit:
        try:
            chunk = s.recv(65536)
        except (socket.timeout, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    return data


@h.needs_own_broker
class Hostile(unittest.TestCase):
    def setUp(self):
        self.proc = h.WarrenProcess(SETTINGS)
        self.proc.start()
        self.addCleanup(self.stop)
        self.port = self.proc.mgmt_port

    def stop(self):
        if self.proc:
            rc = self.proc.stop()
            self.proc = None
            self.assertEqual(rc, 0)

    def sock(self):
        return socket.create_connection(("127.0.0.1", self.port), timeout=10)

    def request(self, method, path, body=None, headers=None):
        s = self.sock()
        hdrs = {"Host": "127.0.0.1:%d" % self.port, "Authorization": AUTH, "Connection": "close"}
        hdrs.update(headers or {})
        if body is not None:
            hdrs.setdefault("Content-Type", "application/json")
            hdrs["Content-Length"] = str(len(body))
        head = "%s %s HTTP/1.1\r\n%s\r\n" % (method, path, "".join("%s: %s\r\n" % kv for kv in hdrs.items()
                                                                    if kv[1] is not None))
        s.sendall(head.encode() + (body or b""))
        data = recv_until_close(s)
        s.close()
        head, _, payload = data.partition(b"\r\n\r\n")
        return int(head.split(b" ")[1]), payload

    def test_unauthenticated_bodies_are_never_read(self):
        before = rss_kb(self.proc.proc.pid)
        socks = []
        for i in range(12):  # 12 x 30 MB announced, without (or with wrong) credentials
            s = self.sock()
            auth = "" if i % 2 else "Authorization: Basic %s\r\n" % base64.b64encode(b"guest:wrong").decode()
            s.sendall(("POST /api/definitions HTTP/1.1\r\nHost: x\r\n%sContent-Type: application/json\r\n"
                       "Content-Length: 31457280\r\n\r\n" % auth).encode())
            s.setblocking(False)
            sent = 0
            try:  # as much of the body as the sockets take
                while sent < 31457280:
                    sent += s.send(b"x" * 65536)
            except BlockingIOError:
                pass
            socks.append(s)
        for s in socks:
            s.setblocking(True)
            reply = recv_until_close(s, timeout=5)
            self.assertTrue(reply.startswith(b"HTTP/1.1 401 "), reply[:100])
            self.assertIn(b"Connection: close", reply)
            s.close()
        grown = rss_kb(self.proc.proc.pid) - before
        self.assertLess(grown, 20 * 1024, "RSS grew by %d KB" % grown)

    def test_authenticated_body_over_the_limit_is_refused_on_its_head(self):
        s = self.sock()
        s.sendall(("PUT /api/vhosts/big HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                   "Content-Type: application/json\r\nContent-Length: 9000000\r\n\r\n" % AUTH).encode())
        reply = recv_until_close(s, timeout=5)  # nothing of the body sent
        self.assertTrue(reply.startswith(b"HTTP/1.1 400 "), reply[:100])
        self.assertIn(b"Exceeded HTTP request body size limit", reply)
        s.close()

    def test_heads_that_never_finish_are_closed_and_do_not_lock_out(self):
        stalled = []
        for _ in range(300):  # far more than max_connections (64)
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=2)
                s.sendall(b"GET /api/overview HTTP/1.1\r\nX-Slow: ")
                stalled.append(s)
            except OSError:
                pass
        # a real client still gets in (the oldest waiting ones made room)...
        status, body = self.request("GET", "/api/overview")
        self.assertEqual(status, 200)
        self.assertIn("management_version", json.loads(body))
        # ...and every stalled one is answered 408 or closed by its deadline
        deadline = time.monotonic() + 15
        for s in stalled:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                data = s.recv(4096)
                while data and not data.endswith(b"\n"):
                    more = s.recv(4096)
                    if not more:
                        break
                    data += more
            except ConnectionResetError:
                data = b""
            except socket.timeout:
                self.fail("a stalled connection was still open after its head deadline")
            self.assertTrue(data == b"" or data.startswith(b"HTTP/1.1 408 "), data[:80])
            s.close()

    def test_cross_site_writes_are_refused(self):
        origin = "http://127.0.0.1:%d" % self.port
        user = h.unique("mallory")
        doc = json.dumps({"users": [{"name": user, "password": "x", "tags": "administrator"}]}).encode()
        refusals = [
            ({"Content-Type": "text/plain", "Origin": "http://evil.example"}, 403),
            ({"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example"}, 403),
            ({"Content-Type": "application/json", "Origin": "http://evil.example"}, 403),
            ({"Content-Type": "application/json", "Origin": "null"}, 403),
            ({"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403),
            ({"Content-Type": "text/plain", "Origin": origin}, 415),
            ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
            ({"Content-Type": None}, 415),
        ]
        for headers, status in refusals:
            got, body = self.request("POST", "/api/definitions", doc, headers)
            self.assertEqual(got, status, (headers, body))
            err = json.loads(body)["error"]
            self.assertEqual(err, "forbidden" if status == 403 else "unsupported_media_type")
        got, body = self.request("GET", "/api/users")
        self.assertNotIn(user, [u["name"] for u in json.loads(body)])
        # the same change from this server's own origin, or from a client
        # that is not a browser (no Origin), goes through
        got, _ = self.request("PUT", "/api/vhosts/" + user, b"{}", {"Origin": origin})
        self.assertEqual(got, 201)
        got, _ = self.request("DELETE", "/api/vhosts/" + user, None, {"Origin": "http://evil.example"})
        self.assertEqual(got, 403)
        got, _ = self.request("DELETE", "/api/vhosts/" + user)
        self.assertEqual(got, 204)
        # reading is not a change: a cross-origin GET is answered (the
        # browser keeps it from the page: no CORS header is ever sent)
        got, _ = self.request("GET", "/api/overview", None, {"Origin": "http://evil.example"})
        self.assertEqual(got, 200)

    def test_big_listings_leave_amqp_flowing(self):
        conn = h.connect(("127.0.0.1", self.proc.port))
        ch = conn.channel()
        names = ["hostile.list.%04d" % i for i in range(2000)]
        for n in names:
            ch.queue_declare(n, auto_delete=False)
        ch.confirm_delivery()
        results, errors = [], []

        def lister():
            for _ in range(3):
                try:
                    c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                    c.request("GET", "/api/queues", headers={"Authorization": AUTH})
                    r = c.getresponse()  # chunked: http.client joins the chunks
                    status, body = r.status, r.read()
                    c.close()
                    results.append((status, len([q for q in json.loads(body) if q["name"] in set(names)])))
                except Exception as e:  # noqa: BLE001 -- reported below
                    errors.append(repr(e))
        threads = [threading.Thread(target=lister) for _ in range(10)]
        for t in threads:
            t.start()
        t0 = time.monotonic()
        for i in range(200):
            ch.basic_publish("", names[i], b"m")  # confirmed, one at a time
        publishing = time.monotonic() - t0
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        self.assertEqual(results, [(200, 2000)] * 30)  # every listing whole and valid
        self.assertLess(publishing, 30, "200 confirmed publishes took %.1f s beside the listings" % publishing)
        for n in names:
            ch.queue_delete(n)
        conn.close()

    def test_costly_list_filters_are_bounded(self):
        conn = h.connect(("127.0.0.1", self.proc.port))
        ch = conn.channel()
        names = ["a" * 230 + "b%05d" % i for i in range(300)]
        for n in names:
            ch.queue_declare(n)
        stop, worst = threading.Event(), [0.0]

        def round_trips():  # AMQP on another connection all along
            c = h.connect(("127.0.0.1", self.proc.port))
            k = c.channel()
            while not stop.is_set():
                t = time.monotonic()
                k.queue_declare(names[0], passive=True)
                worst[0] = max(worst[0], time.monotonic() - t)
                time.sleep(0.01)
            c.close()
        t = threading.Thread(target=round_trips)
        t.start()
        before = rss_kb(self.proc.proc.pid)
        filters = ["a" + "+" * 22, "(a*)*\\1c", "(a+)+$", "(a|aa)+$", "(.*a){12}$"]
        try:
            for f in filters:
                path = "/api/queues?use_regex=true&name=" + urllib.parse.quote(f)
                t0 = time.monotonic()
                status, body = self.request("GET", path)
                took = time.monotonic() - t0
                self.assertIn(status, (200, 400), (f, body[:200]))
                if status == 200:  # what could not be decided is left out
                    self.assertLessEqual(len(json.loads(body)), len(names), f)
                self.assertLess(took, 30, "filter %r took %.1f s" % (f, took))
            # an ordinary filter still finds what it should
            status, body = self.request("GET", "/api/queues?use_regex=true&name=" +
                                        urllib.parse.quote("b0001[0-4]$"))
            self.assertEqual(sorted(q["name"] for q in json.loads(body)), names[10:15])
        finally:
            stop.set()
            t.join(30)
        grown = rss_kb(self.proc.proc.pid) - before
        self.assertLess(grown, 100 * 1024, "RSS grew by %d KB" % grown)
        self.assertLess(worst[0], 5.0, "an AMQP round trip waited %.1f s" % worst[0])
        for n in names:
            ch.queue_delete(n)
        conn.close()

    def test_doubles_out_of_range_round_trip(self):
        body = json.dumps({"arguments": {"x-huge": 1e308, "x-tiny": -1e308}}).encode()
        self.assertEqual(self.request("PUT", "/api/queues/%2F/hostile.double", body)[0], 201)
        status, got = self.request("GET", "/api/queues/%2F/hostile.double")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(got)["arguments"], {"x-huge": 1e308, "x-tiny": -1e308})
        self.assertEqual(self.request("DELETE", "/api/queues/%2F/hostile.double")[0], 204)


if __name__ == "__main__":
    unittest.main()
