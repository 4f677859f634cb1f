"""Warren's own behaviour around the protocol: start-up configuration, its
errors, shutdown on SIGTERM, and the memory alarm. Each test starts a
private Warren, so these are skipped when WARREN_TEST_TARGET is given."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import pika
import pika.spec as S

import harness as h


def run_warren(*args, timeout=10):
    """Runs the broker binary to completion (for start-up errors)."""
    return subprocess.run([h.WARREN_BIN, *args], stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, text=True)


class Config(unittest.TestCase):
    def write_conf(self, text):
        fd, path = tempfile.mkstemp(suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        self.addCleanup(os.unlink, path)
        return path

    @h.needs_own_broker
    def test_unknown_key_names_file_and_line(self):
        path = self.write_conf("heartbeat = 30\n# comment\nno_such_setting = 1\n")
        r = run_warren("--config", path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s:3: unknown key 'no_such_setting'" % path, r.stderr)

    @h.needs_own_broker
    def test_bad_value_names_file_line_and_reason(self):
        path = self.write_conf("frame_max = 12\n")
        r = run_warren("--config", path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s:1: bad value for 'frame_max'" % path, r.stderr)
        self.assertIn("out of range", r.stderr)

    @h.needs_own_broker
    def test_bad_set_override(self):
        r = run_warren("--set", "heartbeat=soon")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--set: bad value for 'heartbeat'", r.stderr)

    @h.needs_own_broker
    def test_missing_config_file(self):
        r = run_warren("--config", "/nonexistent/warren.conf")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("/nonexistent/warren.conf", r.stderr)

    @h.needs_own_broker
    def test_shipped_config_is_valid(self):
        # etc/warren.conf with the listener moved to an ephemeral port.
        conf = str(h.REPO / "etc" / "warren.conf")
        d = tempfile.mkdtemp(prefix="warren-itest-")
        self.addCleanup(shutil.rmtree, d, True)
        p = subprocess.Popen([h.WARREN_BIN, "--config", conf, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0",
                              "--set", "data_dir=%s" % d], stderr=subprocess.PIPE, text=True)
        try:
            m = None
            for _ in range(20):  # start-up logs a few lines first
                m = h.LISTEN_RE.search(p.stderr.readline())
                if m:
                    break
            self.assertIsNotNone(m, "no 'AMQP listening on' line")
            c = h.connect((m.group(1), int(m.group(2))))
            c.close()
        finally:
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(10), 0)
            p.stderr.close()

    @h.needs_own_broker
    def test_settings_take_effect(self):
        with h.own_broker("heartbeat=7", "frame_max=65536", "channel_max=99") as addr:
            with h.RawClient(addr) as r:
                r.send(h.PROTOCOL_HEADER)
                r.expect(S.Connection.Start, 0)
                r.send_method(0, S.Connection.StartOk(client_properties={}, mechanism="PLAIN",
                                                      response=b"\0guest\0guest", locale="en_US"))
                tune = r.expect(S.Connection.Tune, 0)
                self.assertEqual((tune.heartbeat, tune.frame_max, tune.channel_max), (7, 65536, 99))

    @h.needs_own_broker
    def test_other_default_user(self):
        with h.own_broker("default_user=app", "default_pass=s3cret") as addr:
            c = h.connect(addr, user="app", password="s3cret")
            c.close()
            with self.assertRaises(pika.exceptions.ProbableAuthenticationError):
                h.connect(addr)


class Listeners(unittest.TestCase):
    """RabbitMQ's numbered listeners (listeners.tcp.<name> = [host:]port):
    several AMQP listeners, IPv4 and IPv6, each logged "AMQP listening on
    host:port" (an IPv6 host in brackets) and each serving the one broker."""

    def start(self, *settings):
        """A private Warren (the harness's listeners.tcp.default =
        127.0.0.1:0 comes first); (process, every 'AMQP listening on' address)."""
        proc = h.WarrenProcess(settings)
        proc.start()
        self.addCleanup(proc.stop)
        deadline = time.monotonic() + 5
        while not any("management listening on" in ln for ln in proc.log_lines) and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        return proc, [m.group(1) for m in (re.search(r"AMQP listening on (\S+)$", ln)
                                           for ln in proc.log_lines) if m]

    def api(self, proc, path):
        r = urllib.request.Request("http://127.0.0.1:%d%s" % (proc.mgmt_port, path),
                                   headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
        return json.load(urllib.request.urlopen(r, timeout=10))

    def connection_named(self, proc, name):
        for _ in range(50):
            found = [c for c in self.api(proc, "/api/connections") if c.get("user_provided_name") == name]
            if found:
                return found[0]
            time.sleep(0.1)
        self.fail("connection %s not listed" % name)

    @h.needs_own_broker
    def test_ipv4_and_ipv6_loopback_both_serve_amqp(self):
        proc, addrs = self.start("listeners.tcp.2=::1:0")
        self.assertEqual(len(addrs), 2, proc.log_tail())
        self.assertTrue(addrs[0].startswith("127.0.0.1:"), addrs)
        self.assertTrue(addrs[1].startswith("[::1]:"), addrs)
        v4 = h.connect(("127.0.0.1", int(addrs[0].rsplit(":", 1)[1])),
                       client_properties={"connection_name": "v4"})
        self.addCleanup(v4.close)
        v6 = h.connect(("::1", int(addrs[1].rsplit(":", 1)[1])), client_properties={"connection_name": "v6"})
        self.addCleanup(v6.close)
        q = v4.channel().queue_declare("listeners.q").method.queue
        v6.channel().basic_publish("", q, b"across")
        self.assertEqual(v4.channel().basic_get(q, auto_ack=True)[2], b"across")
        info = self.connection_named(proc, "v6")
        self.assertEqual((info["peer_host"], info["host"]), ("::1", "::1"))
        self.assertRegex(info["name"], r"^\[::1\]:\d+ -> \[::1\]:%s$" % addrs[1].rsplit(":", 1)[1])
        amqp = [(x["ip_address"], x["port"]) for x in self.api(proc, "/api/overview")["listeners"]
                if x["protocol"] == "amqp"]
        self.assertEqual(amqp, [("127.0.0.1", int(addrs[0].rsplit(":", 1)[1])),
                                ("::1", int(addrs[1].rsplit(":", 1)[1]))])

    @h.needs_own_broker
    def test_management_and_prometheus_on_ipv4_and_ipv6(self):
        """Warren's management.listeners.tcp.<name> and
        prometheus.listeners.tcp.<name>: more listeners beside the one of
        management.tcp.ip/port, each logged and each serving."""
        proc, _ = self.start("management.listeners.tcp.v6=::1:0", "prometheus.listeners.tcp.v6=::1:0")
        for what, path in (("management", "/api/whoami"), ("prometheus", "/metrics")):
            addrs = [m.group(1) for m in (re.search(r"%s listening on (\S+)$" % what, ln)
                                          for ln in proc.log_lines) if m]
            self.assertEqual(len(addrs), 2, proc.log_tail())
            self.assertTrue(addrs[0].startswith("127.0.0.1:") and addrs[1].startswith("[::1]:"), addrs)
            for host, port in (("127.0.0.1", addrs[0].rsplit(":", 1)[1]), ("[::1]", addrs[1].rsplit(":", 1)[1])):
                r = urllib.request.Request("http://%s:%s%s" % (host, port, path),
                                           headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})
                with urllib.request.urlopen(r, timeout=10) as res:
                    self.assertEqual(res.status, 200, (what, host))

    @h.needs_own_broker
    def test_a_configured_management_listener_that_cannot_bind_stops_start_up(self):
        taken = socket.socket(socket.AF_INET6)
        self.addCleanup(taken.close)
        taken.bind(("::1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        d = tempfile.mkdtemp(prefix="warren-itest-")
        self.addCleanup(shutil.rmtree, d, True)
        for key in ("management", "prometheus"):
            r = run_warren("--set", "listeners.tcp.1=127.0.0.1:0", "--set", "data_dir=%s" % d,
                           "--set", "management.tcp.port=0", "--set", "prometheus.tcp.port=0",
                           "--set", "%s.listeners.tcp.x=::1:%d" % (key, port))
            self.assertNotEqual(r.returncode, 0, key)
            self.assertIn("cannot listen on ::1:%d" % port, r.stderr)

    @h.needs_own_broker
    def test_a_port_alone_takes_ipv6_and_ipv4(self):
        """As RabbitMQ's 5672: every interface, IPv6 and IPv4 on one socket
        ("[::]"); an IPv4 client shows as 127.0.0.1, not ::ffff:127.0.0.1."""
        proc, addrs = self.start("listeners.tcp.any=0")
        self.assertEqual(len(addrs), 2, proc.log_tail())
        self.assertTrue(addrs[1].startswith("[::]:"), addrs)
        port = int(addrs[1].rsplit(":", 1)[1])
        for host, name in (("127.0.0.1", "any-v4"), ("::1", "any-v6")):
            c = h.connect((host, port), client_properties={"connection_name": name})
            self.addCleanup(c.close)
            self.assertEqual(self.connection_named(proc, name)["peer_host"], host)

    @h.needs_own_broker
    def test_bad_listener_stops_start_up(self):
        r = run_warren("--set", "listeners.tcp.2=localhost:5672")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--set: bad value for 'listeners.tcp.2': 'localhost:5672' is not an IPv4 or IPv6 "
                      "address and port", r.stderr)
        fd, path = tempfile.mkstemp(suffix=".conf")
        with os.fdopen(fd, "w") as f:
            f.write("listeners.tcp.1 = 127.0.0.1:0\nlisteners.tcp.2 = ::1\n")
        self.addCleanup(os.unlink, path)
        r = run_warren("--config", path)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("%s:2: bad value for 'listeners.tcp.2'" % path, r.stderr)

    @h.needs_own_broker
    def test_a_listener_that_cannot_bind_stops_start_up(self):
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        d = tempfile.mkdtemp(prefix="warren-itest-")
        self.addCleanup(shutil.rmtree, d, True)
        r = run_warren("--set", "listeners.tcp.1=127.0.0.1:0", "--set", "listeners.tcp.2=127.0.0.1:%d" % port,
                       "--set", "data_dir=%s" % d, "--set", "management.tcp.port=0",
                       "--set", "prometheus.tcp.port=0")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cannot listen on 127.0.0.1:%d" % port, r.stderr)

    @h.needs_own_broker
    def test_none(self):
        d = tempfile.mkdtemp(prefix="warren-itest-")
        self.addCleanup(shutil.rmtree, d, True)
        p = subprocess.Popen([h.WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0", "--set",
                              "listeners.tcp=none", "--set", "data_dir=%s" % d, "--set",
                              "management.tcp.port=0", "--set", "prometheus.tcp.port=0"],
                             stderr=subprocess.PIPE, text=True)
        lines = []
        try:
            for _ in range(30):
                lines.append(p.stderr.readline())
                if "control socket at" in lines[-1]:
                    break
            self.assertTrue(any("no AMQP listener (listeners.tcp = none)" in ln for ln in lines), lines)
            self.assertFalse(any("AMQP listening on" in ln for ln in lines), lines)
        finally:
            p.send_signal(signal.SIGTERM)
            self.assertEqual(p.wait(10), 0)
            p.stderr.close()


class Shutdown(unittest.TestCase):
    @h.needs_own_broker
    def test_sigterm_closes_connections_with_320_and_exits_0(self):
        proc = h.WarrenProcess()
        addr = proc.start()
        try:
            with h.RawClient(addr) as r:
                r.handshake()
                r.open_channel(1)
                proc.proc.send_signal(signal.SIGTERM)
                close = r.expect_connection_close(h.CONNECTION_FORCED)
                self.assertEqual(close.reply_text,
                                 "CONNECTION_FORCED - broker forced connection closure with reason "
                                 "'shutdown'")
                r.send_method(0, S.Connection.CloseOk())
            self.assertEqual(proc.proc.wait(10), 0)
        finally:
            proc.stop()

    @h.needs_own_broker
    def test_pika_sees_connection_forced(self):
        proc = h.WarrenProcess()
        addr = proc.start()
        try:
            c = h.connect(addr)
            ch = c.channel()
            proc.proc.send_signal(signal.SIGTERM)
            with self.assertRaises(pika.exceptions.ConnectionClosedByBroker) as cm:
                for _ in range(100):
                    c.process_data_events(0.1)
                    ch.basic_qos(prefetch_count=1)
            self.assertEqual(cm.exception.reply_code, h.CONNECTION_FORCED)
            self.assertEqual(proc.proc.wait(10), 0)
        finally:
            proc.stop()


class MemoryAlarm(unittest.TestCase):
    @h.needs_own_broker
    def test_publishers_blocked_then_unblocked(self):
        # the legacy measure: the bytes messages hold (test_alarms.py has RSS)
        with h.own_broker("vm_memory_high_watermark.absolute=1000000",
                          "vm_memory_calculation_strategy=legacy") as addr:
            events = []
            c = h.connect(addr)
            c.add_on_connection_blocked_callback(lambda *a: events.append("blocked"))
            c.add_on_connection_unblocked_callback(lambda *a: events.append("unblocked"))
            ch = c.channel()
            q = h.unique("q")
            ch.queue_declare(q)
            for _ in range(20):
                ch.basic_publish("", q, b"x" * 100000)
            deadline = time.monotonic() + 5
            while "blocked" not in events and time.monotonic() < deadline:
                c.process_data_events(0.1)
            self.assertEqual(events, ["blocked"])
            # the blocked connection is not read any more: purge from another
            other = h.connect(addr)
            other.channel().queue_delete(q)
            deadline = time.monotonic() + 5
            while "unblocked" not in events and time.monotonic() < deadline:
                c.process_data_events(0.1)
            self.assertEqual(events, ["blocked", "unblocked"])
            ch.basic_publish("", "", b"after")  # reading resumed
            ch.queue_declare("", exclusive=True)
            c.close()
            other.close()


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class FdExhaustion(unittest.TestCase):
    """Out of file descriptors, the listener backs off: accept() failures
    are not retried in a busy loop, the log gets a line per interval, the
    clients already connected are served, and the backlog is accepted once
    descriptors are free again."""
    LIMIT = 64

    def limit_fds(self):
        import resource
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.LIMIT, self.LIMIT))

    @h.needs_own_broker
    def test_accept_backs_off_when_out_of_descriptors(self):
        proc = h.WarrenProcess(["handshake_timeout=60000"], preexec_fn=self.limit_fds)
        addr = proc.start()
        self.addCleanup(proc.stop)
        self.assertTrue(proc.wait_log("file descriptor limit %d " % self.LIMIT),
                        proc.log_tail())
        c = h.connect(addr)
        ch = c.channel()
        q = ch.queue_declare("", exclusive=True).method.queue
        socks = []
        self.addCleanup(lambda: [s.close() for s in socks])
        for _ in range(2 * self.LIMIT):  # more than the broker can hold; the rest wait in the backlog
            socks.append(socket.create_connection(addr, timeout=5))
        deadline = time.monotonic() + 5
        while not any("accept() failed" in ln for ln in proc.log_lines) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(proc.wait_log("Too many open files"), proc.log_tail())
        lines_before, cpu_before = len(proc.log_lines), cpu_seconds(proc.proc.pid)
        time.sleep(3)
        cpu = cpu_seconds(proc.proc.pid) - cpu_before
        # not retrying accept() in a loop, which would take the whole 3 s of
        # CPU (half of it: a generous bound for ASan)
        self.assertLess(cpu, 1.5, "broker used %.2f s of CPU in 3 s while out of descriptors" % cpu)
        self.assertLess(len(proc.log_lines) - lines_before, 3, proc.log_tail())
        self.assertLess(sum(len(ln) for ln in proc.log_lines), 20000)
        # the client already connected still works
        ch.basic_publish("", q, b"still here")
        self.assertEqual(ch.basic_get(q, auto_ack=True)[2], b"still here")
        # descriptors come back: the backlog drains and a new client is served
        for s in socks:
            s.close()
        socks.clear()
        deadline = time.monotonic() + 10
        while True:
            try:
                c2 = h.connect(addr)
                break
            except pika.exceptions.AMQPConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        c2.channel().queue_declare("", exclusive=True)
        c2.close()
        c.close()
        self.assertEqual(proc.stop(), 0)


if __name__ == "__main__":
    unittest.main()


class Restart(unittest.TestCase):
    """Durable topology survives a restart; transient topology does not.
    (Persistent messages come with the journal.)"""

    def start(self, data_dir):
        proc = h.WarrenProcess(["data_dir=%s" % data_dir])
        return proc, proc.start()

    @h.needs_own_broker
    def test_durable_topology_survives_restart(self):
        data_dir = tempfile.mkdtemp(prefix="warren-itest-restart-")
        self.addCleanup(shutil.rmtree, data_dir, True)
        proc, addr = self.start(data_dir)
        try:
            c = h.connect(addr)
            ch = c.channel()
            ch.exchange_declare("dur.x", "topic", durable=True)
            ch.exchange_declare("tmp.x", "fanout", durable=False)
            ch.exchange_declare("dur.x2", "direct", durable=True)
            ch.exchange_bind("dur.x2", "dur.x", "e2e.#")
            ch.queue_declare("dur.q", durable=True, arguments={"x-max-length": 2})
            ch.queue_declare("tmp.q", durable=False)
            ch.queue_bind("dur.q", "dur.x", "a.#")
            ch.queue_bind("dur.q", "dur.x2", "k")
            ch.queue_bind("tmp.q", "dur.x", "b.#")
            ch.queue_declare("gone.q", durable=True)
            ch.queue_delete("gone.q")
            c.close()
        finally:
            self.assertEqual(proc.stop(), 0)
        proc, addr = self.start(data_dir)
        try:
            c = h.connect(addr)
            ch = c.channel()
            ch.exchange_declare("dur.x", "topic", durable=True, passive=True)
            ch.queue_declare("dur.q", durable=True, arguments={"x-max-length": 2})  # equivalent
            for key in ("a.1", "a.2", "a.3", "b.1", "e2e.z"):
                ch.basic_publish("dur.x", key, b"m")
            # a.1..a.3 reach dur.q (max-length 2 keeps two); e2e.z reaches dur.x2 but not "k"
            self.assertEqual(ch.queue_declare("dur.q", passive=True).method.message_count, 2)
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as cm:
                c.channel().queue_declare("tmp.q", passive=True)
            self.assertEqual(cm.exception.reply_code, h.NOT_FOUND)
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as cm:
                c.channel().exchange_declare("tmp.x", passive=True)
            self.assertEqual(cm.exception.reply_code, h.NOT_FOUND)
            with self.assertRaises(pika.exceptions.ChannelClosedByBroker) as cm:
                c.channel().queue_declare("gone.q", passive=True)
            self.assertEqual(cm.exception.reply_code, h.NOT_FOUND)
            ch2 = c.channel()
            ch2.exchange_declare("dur.x2", "direct", durable=True, passive=True)
            ch2.queue_purge("dur.q")
            ch2.basic_publish("dur.x", "e2e.k", b"via e2e")  # dur.x -> dur.x2 (key e2e.k) -> no "k" match
            ch2.basic_publish("dur.x2", "k", b"direct")
            self.assertEqual(ch2.queue_declare("dur.q", passive=True).method.message_count, 1)
            c.close()
        finally:
            self.assertEqual(proc.stop(), 0)
