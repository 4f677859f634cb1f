"""Warren's own behaviour around the protocol: start-up configuration, its
errors, shutdown on SIGTERM, and the memory alarm. Each test starts a
private Warren, so these are skipped when WARREN_TEST_TARGET is given."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

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
        p = subprocess.Popen([h.WARREN_BIN, "--config", conf, "--set", "listeners.tcp.default=127.0.0.1:0",
                              "--set", "data_dir=%s" % d], stderr=subprocess.PIPE, text=True)
        try:
            line = p.stderr.readline()
            self.assertIn("AMQP listening on 127.0.0.1:", line)
            m = h.LISTEN_RE.search(line)
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
        with h.own_broker("vm_memory_high_watermark.absolute=1000000") as addr:
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


if __name__ == "__main__":
    unittest.main()
