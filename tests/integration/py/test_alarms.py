"""Resource alarms: the disk alarm on a small filesystem that fills up, and
the memory alarm measured on the process's real memory. Each test starts a
private Warren.

What clients see was checked against RabbitMQ 3.10.8: publishers that
announced the connection.blocked capability get connection.blocked ("low on
disk", "low on memory"), their connection is no longer read once they
publish, consumers keep draining, connection.unblocked follows when the
alarm clears; /api/health/checks/alarms answers 503 with the alarms list.

The disk test mounts a 64 MB tmpfs as data_dir (as root; otherwise inside
`unshare -rm`, a user and mount namespace of the broker's own, seen through
/proc/PID/root) and fills it with a file while a publisher with confirms
runs: the journal meets ENOSPC and must neither crash nor confirm what it
could not write."""
import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import pika

import harness as h

TMPFS_SIZE = 64 << 20
MiB = 1 << 20


def mgmt(proc, path):
    c = http.client.HTTPConnection("127.0.0.1", proc.mgmt_port, timeout=10)
    try:
        c.request("GET", path, headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q="})  # guest:guest
        r = c.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        c.close()


def node(proc):
    status, body = mgmt(proc, "/api/nodes")
    assert status == 200, (status, body)
    return body[0]


def prometheus(proc):
    c = http.client.HTTPConnection("127.0.0.1", proc.prometheus_port, timeout=10)
    try:
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    finally:
        c.close()
    return {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
            if line and not line.startswith("#") and len(line.split()) == 2}


def wait_until(fn, timeout=10.0, step=0.05):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(step)


def capable_params(addr):
    """pika announces connection.blocked in its client-properties."""
    return h.params(addr, blocked_connection_timeout=None, heartbeat=0)


class Publisher(threading.Thread):
    """Publishes persistent messages "i" (i = 0..) with confirms to `queue`
    from its own connection until told to stop or `total` are confirmed;
    records blocked/unblocked events and the confirmed numbers."""

    def __init__(self, addr, queue, size, total):
        super().__init__(daemon=True)
        self.addr, self.queue, self.size, self.total = addr, queue, size, total
        self.events, self.confirmed, self.error = [], [], None
        self.stopping = threading.Event()

    def run(self):
        try:
            c = pika.BlockingConnection(capable_params(self.addr))
            c.add_on_connection_blocked_callback(lambda *a: self.events.append(("blocked", time.monotonic())))
            c.add_on_connection_unblocked_callback(lambda *a: self.events.append(("unblocked", time.monotonic())))
            ch = c.channel()
            ch.confirm_delivery()
            i = 0
            while not self.stopping.is_set() and len(self.confirmed) < self.total:
                c.process_data_events(0)  # blocked/unblocked callbacks wait for this
                payload = (b"%08d" % i) * (self.size // 8)
                ch.basic_publish("", self.queue, payload, pika.BasicProperties(delivery_mode=2))
                self.confirmed.append(i)  # returns only once confirmed (nack raises)
                i += 1
            c.close()
        except Exception as e:  # reported by the test
            self.error = repr(e)


class SmallDisk:
    """A 64 MB tmpfs for data_dir, mounted here (root) or in the broker's own
    namespaces (unshare -rm). `path(p)` is where this process reaches p
    inside it; unmounting happens in every case (cleanup, or the namespace
    dying with the broker)."""

    def __init__(self, test):
        self.test = test
        self.dir = tempfile.mkdtemp(prefix="warren-itest-tmpfs-")
        test.addCleanup(shutil.rmtree, self.dir, True)
        # WARREN_TEST_UNSHARE=1 takes the namespace way even as root (to test it)
        self.mounted = not os.environ.get("WARREN_TEST_UNSHARE") and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=%d" % TMPFS_SIZE, "tmpfs", self.dir],
            capture_output=True).returncode == 0
        if self.mounted:
            test.addCleanup(subprocess.run, ["umount", "-l", self.dir], check=True)
        self.pid = None

    def wrap(self, settings):
        """A WarrenProcess on the tmpfs: the real binary, or a wrapper that
        mounts it in a namespace of its own first (same pid: exec)."""
        proc = h.WarrenProcess(settings)
        if not self.mounted:
            where = tempfile.mkdtemp(prefix="warren-itest-ns-")
            self.test.addCleanup(shutil.rmtree, where, True)
            script = os.path.join(where, "warren-ns")
            with open(script, "w") as f:
                f.write('#!/bin/sh\nexec unshare -rm sh -c \'mount -t tmpfs -o size=%d tmpfs "$0" && '
                        'exec "$@"\' "%s" "%s" "$@"\n' % (TMPFS_SIZE, self.dir, h.WARREN_BIN))
            os.chmod(script, 0o755)
            proc.binary = script
        return proc

    def path(self, proc, p):
        return p if self.mounted else "/proc/%d/root%s" % (proc.proc.pid, p)


class DiskAlarm(unittest.TestCase):
    @h.needs_own_broker
    def test_full_disk_blocks_publishers_loses_nothing_confirmed_and_recovers(self):
        disk = SmallDisk(self)
        settings = ["data_dir=%s" % disk.dir, "disk_free_limit.absolute=16MB",
                    "journal.segment_size=2097152", "disk_monitor.max_interval=500"]
        proc = disk.wrap(settings)
        addr = proc.start()
        self.addCleanup(proc.stop)
        n = node(proc)
        self.assertEqual(n["disk_free_limit"], 16000000)
        self.assertFalse(n["disk_free_alarm"])
        self.assertGreater(n["disk_free"], 40 * MiB)
        self.assertEqual(mgmt(proc, "/api/health/checks/alarms")[0], 200)

        c = pika.BlockingConnection(capable_params(addr))
        ch = c.channel()
        ch.queue_declare("disk.q", durable=True)
        c.close()  # the publisher's connection is the only one while the disk is full
        pub = Publisher(addr, "disk.q", 16384, total=1500)  # 24 MB: fits once the filler goes
        pub.start()
        self.assertTrue(wait_until(lambda: len(pub.confirmed) > 200), pub.error)

        # fill the file system to the last byte: the journal meets ENOSPC
        filler = disk.path(proc, os.path.join(disk.dir, "filler"))
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * MiB)
                    f.flush()
            except OSError:
                pass
        self.assertTrue(wait_until(lambda: node(proc)["disk_free_alarm"]), "no disk alarm")
        # blocking: told, and not read once it publishes (it waits for a confirm now)
        self.assertTrue(wait_until(lambda: [x["state"] for x in mgmt(proc, "/api/connections")[1]]
                                   in (["blocking"], ["blocked"])), "the publisher is not blocked")
        stalled = len(pub.confirmed)
        status, body = mgmt(proc, "/api/health/checks/alarms")
        self.assertEqual(status, 503)
        self.assertEqual(body["alarms"], [{"node": n["name"], "resource": "disk"}])
        metrics = prometheus(proc)
        self.assertEqual(metrics["rabbitmq_alarms_free_disk_space_watermark"], 1)
        self.assertEqual(metrics["rabbitmq_disk_space_available_limit_bytes"], 16000000)
        self.assertLess(metrics["rabbitmq_disk_space_available_bytes"], 16000000)
        # consumers keep draining: their acks are journal records the full disk
        # refuses too (ENOSPC, retried); the broker stays alive and answers
        drainer = pika.BlockingConnection(capable_params(addr))
        dch = drainer.channel()
        drained = set()
        for _ in range(200):
            method, _, body = dch.basic_get("disk.q")
            self.assertIsNotNone(method)
            drained.add(int(body[:8]))
            dch.basic_ack(method.delivery_tag)
        self.assertTrue(proc.wait_log("No space left on device; retrying", timeout=5),
                        "the journal did not meet ENOSPC")
        time.sleep(0.5)
        self.assertEqual(mgmt(proc, "/api/overview")[0], 200)
        self.assertLessEqual(len(pub.confirmed), stalled + 1, "confirmed while the disk was full")
        self.assertIsNone(proc.proc.poll(), proc.log_tail())
        self.assertTrue(proc.wait_log("disk resource limit alarm set on node"), proc.log_tail())

        os.unlink(filler)  # space returns
        self.assertTrue(wait_until(lambda: not node(proc)["disk_free_alarm"]), proc.log_tail())
        self.assertEqual(mgmt(proc, "/api/health/checks/alarms")[0], 200)
        pub.join(15)
        self.assertEqual((len(pub.confirmed), pub.error), (1500, None), "publishing did not resume")
        self.assertEqual([e for e, _ in pub.events], ["blocked", "unblocked"])
        self.assertTrue(proc.wait_log("disk resource limit alarm cleared on node"), proc.log_tail())

        # every confirmed message is there, with its body, and only once
        drainer.close()
        c = pika.BlockingConnection(capable_params(addr))
        ch = c.channel()
        confirmed = set(pub.confirmed)
        got = dict.fromkeys(drained, True)
        for method, props, body in ch.consume("disk.q", inactivity_timeout=3):
            if method is None:
                break
            i = int(body[:8])
            self.assertEqual(body, (b"%08d" % i) * 2048)
            self.assertNotIn(i, got)
            got[i] = True
            ch.basic_ack(method.delivery_tag)
        self.assertEqual(confirmed - set(got), set(), "confirmed messages lost")
        c.close()


class MemoryAlarm(unittest.TestCase):
    @h.needs_own_broker
    def test_rss_is_measured_and_shown(self):
        proc = h.WarrenProcess()
        proc.start()
        self.addCleanup(proc.stop)
        n = node(proc)
        self.assertEqual(n["mem_calculation_strategy"], "rss")
        with open("/proc/%d/statm" % proc.proc.pid) as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        # the alarm's figure is the process's resident set, not message bytes
        self.assertGreater(n["mem_used"], 1 * MiB)
        self.assertLess(abs(n["mem_used"] - rss), max(rss // 2, 8 * MiB))
        self.assertFalse(n["mem_alarm"])
        self.assertEqual(prometheus(proc)["rabbitmq_alarms_memory_used_watermark"], 0)

    @h.needs_own_broker
    def test_watermark_below_rss_blocks_then_unblocks(self):
        proc = h.WarrenProcess()
        addr = proc.start()
        self.addCleanup(proc.stop)
        events = []
        c = pika.BlockingConnection(capable_params(addr))
        c.add_on_connection_blocked_callback(lambda _c, m: events.append(("blocked", m.method.reason)))
        c.add_on_connection_unblocked_callback(lambda *a: events.append(("unblocked", None)))
        ch = c.channel()
        consumer = pika.BlockingConnection(capable_params(addr))
        cch = consumer.channel()
        cch.queue_declare("mem.q")
        for i in range(3):
            ch.basic_publish("", "mem.q", b"before%d" % i)
        name = node(proc)["name"]
        self.put_watermark(proc, name, {"absolute": 1 * MiB})  # below any process's RSS
        self.assertTrue(wait_until(lambda: node(proc)["mem_alarm"]))
        ch.basic_publish("", "mem.q", b"during")  # the connection is not read from here on
        deadline = time.monotonic() + 5
        while not events and time.monotonic() < deadline:
            c.process_data_events(0.1)
        self.assertEqual(events, [("blocked", "low on memory")])
        status, body = mgmt(proc, "/api/health/checks/alarms")
        self.assertEqual((status, body["alarms"]), (503, [{"node": name, "resource": "memory"}]))
        self.assertTrue(proc.wait_log("memory resource limit alarm set on node"), proc.log_tail())
        # consumers keep draining while publishers are blocked
        got = [cch.basic_get("mem.q", auto_ack=True)[2] for _ in range(3)]
        self.assertEqual(got, [b"before0", b"before1", b"before2"])
        self.put_watermark(proc, name, {"relative": 0.4})
        deadline = time.monotonic() + 5
        while len(events) < 2 and time.monotonic() < deadline:
            c.process_data_events(0.1)
        self.assertEqual(events[1:], [("unblocked", None)])
        ch.basic_publish("", "mem.q", b"after")
        got = [wait_until(lambda: cch.basic_get("mem.q", auto_ack=True)[2]) for _ in range(2)]
        self.assertEqual(got, [b"during", b"after"])
        self.assertTrue(proc.wait_log("memory resource limit alarm cleared on node"), proc.log_tail())
        c.close()
        consumer.close()

    def put_watermark(self, proc, name, body):
        c = http.client.HTTPConnection("127.0.0.1", proc.mgmt_port, timeout=10)
        try:
            c.request("PUT", "/api/nodes/%s/vm-memory-high-watermark" % name, json.dumps(body),
                      headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q=",
                               "Content-Type": "application/json"})
            self.assertEqual(c.getresponse().status, 204)
        finally:
            c.close()


def rss_bytes(pid):
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def backlog_body(queue, i, size):
    head = b"%s:%08d:" % (queue.encode(), i)
    return head + bytes([i % 251]) * (size - len(head))


class BacklogPublisher(threading.Thread):
    """Publishes `n` transient messages of `size` bytes to each queue in
    turn, no confirms; counts them and the blocked/unblocked events."""

    def __init__(self, addr, queues, n, size):
        super().__init__(daemon=True)
        self.addr, self.queues, self.n, self.size = addr, queues, n, size
        self.sent, self.events, self.error = 0, [], None

    def run(self):
        try:
            c = pika.BlockingConnection(capable_params(self.addr))
            c.add_on_connection_blocked_callback(lambda *a: self.events.append("blocked"))
            c.add_on_connection_unblocked_callback(lambda *a: self.events.append("unblocked"))
            ch = c.channel()
            for i in range(self.n):
                q = self.queues[i % len(self.queues)]
                ch.basic_publish("", q, backlog_body(q, i, self.size))
                self.sent += 1
                if i % 64 == 0:
                    c.process_data_events(0)
            c.process_data_events(0.2)
            c.close()
        except Exception as e:
            self.error = repr(e)


class Paging(unittest.TestCase):
    """A slow consumer makes the broker slower, never dead: a transient
    backlog twice the memory watermark, in a non-durable and a durable
    queue, pages out past the paging ratio (vm_memory_high_watermark_
    paging_ratio, 0.5) and comes back whole."""

    @h.needs_own_broker
    def test_transient_backlog_past_the_watermark_pages_out_and_drains(self):
        events, peak = self.backlog(paging_ratio=None)
        self.assertLess(peak, 400 * MiB, "RSS %d MiB for a 200 MB watermark" % (peak >> 20))

    @h.needs_own_broker
    def test_paging_late_the_alarm_blocks_publishers_until_the_consumer_drains(self):
        # paging from 198 MB on: RAM passes the watermark before it starts,
        # the alarm blocks the publisher, the consumer brings memory back
        events, peak = self.backlog(paging_ratio="0.99")
        self.assertEqual(events[:2], ["blocked", "unblocked"])
        self.assertLess(peak, 600 * MiB, "RSS %d MiB for a 200 MB watermark" % (peak >> 20))

    def backlog(self, paging_ratio):
        """432 MB of transient messages into a non-durable and a durable
        queue under a 200 MB watermark: the publisher goes on until done or
        blocked (3 s without progress), then a consumer drains both queues
        while it finishes. Returns the publisher's blocked/unblocked events
        and the peak RSS."""
        signal.alarm(120)  # run_py.py's 20 s are for small tests; this one moves 860 MB
        # Under ASan: freed memory is reused at once and goes back to the
        # system soon (as malloc_trim gives it back under glibc), so RSS can fall
        asan = os.environ.get("ASAN_OPTIONS", "")
        settings = ["vm_memory_high_watermark.absolute=200MB"]
        if paging_ratio:
            settings.append("vm_memory_high_watermark_paging_ratio=" + paging_ratio)
        proc = h.WarrenProcess(settings, env={"ASAN_OPTIONS": (asan + ":" if asan else "") +
                                              "quarantine_size_mb=0:allocator_release_to_os_interval_ms=100"})
        addr = proc.start()
        self.addCleanup(proc.stop)
        pid = proc.proc.pid
        setup = pika.BlockingConnection(capable_params(addr))
        sch = setup.channel()
        sch.queue_declare("bk.transient")
        sch.queue_declare("bk.durable", durable=True)
        setup.close()
        size, n = 65536, 6600  # 432 MB of bodies
        queues = ["bk.transient", "bk.durable"]
        pub = BacklogPublisher(addr, queues, n, size)
        pub.start()
        peak, last, still_since = 0, -1, time.monotonic()
        while pub.is_alive() and time.monotonic() - still_since < 3:
            peak = max(peak, rss_bytes(pid))
            if pub.sent != last:
                last, still_since = pub.sent, time.monotonic()
            time.sleep(0.05)
        self.assertIsNone(proc.proc.poll(), proc.log_tail())
        sent_before_consuming = pub.sent
        self.assertGreater(max(sent_before_consuming * size, peak), 200000000, "not past the watermark")
        self.assertEqual(mgmt(proc, "/api/overview")[0], 200)

        # a consumer drains both queues; the publisher finishes meanwhile
        c = pika.BlockingConnection(capable_params(addr))
        ch = c.channel()
        ch.basic_qos(prefetch_count=50)
        got = {q: [] for q in queues}
        for q in queues:
            def on_message(chan, method, props, body, q=q):
                got[q].append(body)
                chan.basic_ack(method.delivery_tag)
            ch.basic_consume(q, on_message)
        deadline = time.monotonic() + 90
        while sum(map(len, got.values())) < n and time.monotonic() < deadline:
            c.process_data_events(0.2)
            peak = max(peak, rss_bytes(pid))
        pub.join(10)
        self.assertIsNone(pub.error)
        self.assertEqual(pub.sent, n)
        for k, q in enumerate(queues):
            expect = [backlog_body(q, i, size) for i in range(k, n, len(queues))]
            self.assertEqual(len(got[q]), len(expect), q)
            self.assertTrue(got[q] == expect, "%s: bodies differ or out of order" % q)
        c.close()
        print("# backlog (paging ratio %s): %d of %d sent before consuming, peak RSS %d MiB, "
              "publisher events %s" % (paging_ratio or "0.5", sent_before_consuming, n, peak >> 20,
                                       pub.events))
        return pub.events, peak


def spill_bytes(proc, data_dir):
    """Bytes in the broker's spill files: open, unlinked, under data_dir/spill."""
    total, fd_dir = 0, "/proc/%d/fd" % proc.proc.pid
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith(os.path.join(data_dir, "spill")):
                total += os.stat(os.path.join(fd_dir, fd)).st_size
        except OSError:
            pass
    return total


class SpilledMessages(h.DataDirTest):
    """Paging is on from the start here (a paging ratio that RSS always
    passes): transient messages past the resident head are spilled, and
    every way out -- delivery, expiry into a dead-letter queue, drop-head,
    purge, deletion -- takes them from the spill file; a restart keeps none
    of them."""
    settings = ("vm_memory_high_watermark.absolute=1GB", "vm_memory_high_watermark_paging_ratio=0.001")
    confirm = False

    def wait_spill(self, pred):
        return wait_until(lambda: pred(spill_bytes(self.proc, self.data_dir)), timeout=5)

    @h.needs_own_broker
    def test_every_way_out_reclaims_the_spill_and_a_restart_keeps_none(self):
        conn, ch = self.start()
        size = 5000
        ch.queue_declare("sp.dlq")
        ch.queue_declare("sp.ttl", arguments={"x-message-ttl": 300, "x-dead-letter-exchange": "",
                                              "x-dead-letter-routing-key": "sp.dlq"})
        ch.queue_declare("sp.len", arguments={"x-max-length": 100})
        ch.queue_declare("sp.purge")
        ch.queue_declare("sp.kept", durable=True)
        for i in range(400):
            for q in ("sp.ttl", "sp.len", "sp.purge", "sp.kept"):
                ch.basic_publish("", q, backlog_body(q, i, size))
        self.assertTrue(self.wait_spill(lambda b: b > 4 * 300 * size // 2), "nothing spilled")
        h.wait_for(conn, lambda: ch.queue_declare("sp.dlq", passive=True).method.message_count == 400,
                   timeout=10)
        got = [b for _, _, b in h.get_all(ch, "sp.dlq", limit=400)]
        self.assertEqual(got, [backlog_body("sp.ttl", i, size) for i in range(400)])
        self.assertEqual(ch.queue_declare("sp.len", passive=True).method.message_count, 100)
        got = [ch.basic_get("sp.len", auto_ack=True)[2] for _ in range(100)]
        self.assertEqual(got, [backlog_body("sp.len", i, size) for i in range(300, 400)])
        self.assertEqual(ch.queue_purge("sp.purge").method.message_count, 400)
        # sp.kept's records still spilled (they keep the segment they share; the
        # other test sees it all given back)
        self.assertGreater(spill_bytes(self.proc, self.data_dir), 0)
        conn, ch = self.restart(conn)
        self.assertEqual(ch.queue_declare("sp.kept", durable=True).method.message_count, 0)
        ch.basic_publish("", "sp.kept", b"after")
        self.assertEqual(ch.basic_get("sp.kept", auto_ack=True)[2], b"after")
        conn.close()

    @h.needs_own_broker
    def test_delivered_and_deleted_spilled_messages_leave_nothing(self):
        conn, ch = self.start()
        size = 20000
        ch.queue_declare("sp.a")
        ch.queue_declare("sp.b")
        for i in range(500):
            ch.basic_publish("", "sp.a", backlog_body("sp.a", i, size))
            ch.basic_publish("", "sp.b", backlog_body("sp.b", i, size))
        self.assertTrue(self.wait_spill(lambda b: b > 800 * size))
        got = []
        for method, props, body in ch.consume("sp.a", inactivity_timeout=5):
            self.assertIsNotNone(method)
            got.append(body)
            ch.basic_ack(method.delivery_tag)
            if len(got) == 500:
                break
        ch.cancel()
        self.assertEqual(got, [backlog_body("sp.a", i, size) for i in range(500)])
        ch.queue_delete("sp.b")
        self.assertTrue(self.wait_spill(lambda b: b == 0), spill_bytes(self.proc, self.data_dir))
        conn.close()
