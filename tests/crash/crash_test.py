#!/usr/bin/python3
"""Crash test: confirm-mode publishers and acking consumers on durable
queues; the broker is killed with SIGKILL at a random moment, restarted, and
every queue is drained and checked:

  - every confirmed message is still queued or was delivered and acked
    (an ack sent just before the kill may not have arrived: then the message
    is still queued, and that is fine);
  - no message appears that was never published;
  - the remaining messages of each queue keep their publish order;
  - messages seen again (delivered before the crash) carry redelivered=true.

Consumers ack most messages at once and hold some back, acking those later
and out of order. Every other trial runs the journal with 1 MiB segments,
so segments fill, are collected (kept as spare files and reused), and
sparse ones (held-back messages among acked ones) are compacted while the
broker is killed; their messages carry 4 KiB bodies so that segments fill.
The summary counts the restarts that found the last segment in a reused
file with old bytes after its records.

Usage: crash_test.py [TRIALS]   (default 20; CRASH_TRIALS=500 for the long
mode). Prints TAP lines, one per trial, then "N trials, M lost".
Environment: WARREN_BIN (default build/release/warren).
"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pika

REPO = Path(__file__).resolve().parents[2]
WARREN_BIN = os.environ.get("WARREN_BIN") or str(REPO / "build" / "release" / "warren")
QUEUES = ["crash.q1", "crash.q2"]
PUBLISHERS, CONSUMERS = 2, 2
LISTEN_RE = re.compile(r"AMQP listening on 127\.0\.0\.1:(\d+)")


def start(data_dir, settings=()):
    argv = [WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "data_dir=" + data_dir]
    for s in settings:
        argv += ["--set", s]
    proc = subprocess.Popen(argv,
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    log = []
    for line in proc.stderr:
        log.append(line)
        m = LISTEN_RE.search(line)
        if m:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(m.group(1)), log
        if time.monotonic() > deadline:
            break
    proc.kill()
    raise RuntimeError("Warren did not start")


def connect(port):
    return pika.BlockingConnection(pika.ConnectionParameters(
        "127.0.0.1", port, socket_timeout=5, blocked_connection_timeout=10,
        connection_attempts=1))


class Trial:
    def __init__(self, seed, settings=(), pad=0):
        self.settings = settings
        self.pad = b" " + b"p" * pad if pad else b""
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.attempted = set()   # (queue, n) publish begun
        self.confirmed = set()   # (queue, n) confirm received
        self.delivered = set()   # (queue, n) seen by a consumer
        self.acked = set()       # (queue, n) ack sent
        self.stop = threading.Event()
        self.reused = False      # the restart cut old bytes off a reused file

    def publisher(self, port, pid):
        try:
            c = connect(port)
            ch = c.channel()
            ch.confirm_delivery()
            n = 0
            while not self.stop.is_set():
                q = QUEUES[n % len(QUEUES)]
                key = (q, pid * 10_000_000 + n)
                with self.lock:
                    self.attempted.add(key)
                ch.basic_publish("", q, str(key[1]).encode() + self.pad,
                                 pika.BasicProperties(delivery_mode=2))
                with self.lock:
                    self.confirmed.add(key)
                n += 1
        except Exception:
            pass  # the broker was killed

    def consumer(self, port, q):
        try:
            c = connect(port)
            ch = c.channel()
            ch.basic_qos(prefetch_count=50)
            held = []
            for method, _props, body in ch.consume(q, inactivity_timeout=0.2):
                if self.stop.is_set():
                    break
                if method is None:
                    continue
                with self.lock:
                    self.delivered.add((q, int(body.split()[0])))
                # ack most at once; hold some back (they stay delivered) and
                # ack them later, in random order
                if self.rng.random() < 0.9:
                    acks = [(method.delivery_tag, int(body.split()[0]))]
                else:
                    held.append((method.delivery_tag, int(body.split()[0])))
                    acks = []
                if len(held) >= 25:
                    self.rng.shuffle(held)
                    acks += held[:10]
                    del held[:10]
                for tag, n in acks:
                    ch.basic_ack(tag)
                    with self.lock:
                        self.acked.add((q, n))
        except Exception:
            pass

    def run(self):
        data_dir = tempfile.mkdtemp(prefix="warren-crash-")
        try:
            return self._run(data_dir)
        finally:
            shutil.rmtree(data_dir, ignore_errors=True)

    def _run(self, data_dir):
        proc, port, _ = start(data_dir, self.settings)
        c = connect(port)
        for q in QUEUES:
            c.channel().queue_declare(q, durable=True)
        c.close()
        threads = [threading.Thread(target=self.publisher, args=(port, i), daemon=True)
                   for i in range(PUBLISHERS)]
        threads += [threading.Thread(target=self.consumer, args=(port, QUEUES[i % len(QUEUES)]),
                                     daemon=True) for i in range(CONSUMERS)]
        for t in threads:
            t.start()
        time.sleep(self.rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.stop.set()
        for t in threads:
            t.join(10)
        proc, port, log = start(data_dir, self.settings)
        self.reused = any("records end at offset" in line for line in log)
        try:
            return self.check(port)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)

    def check(self, port):
        c = connect(port)
        ch = c.channel()
        problems = []
        remaining = set()
        for q in QUEUES:
            last = {}
            while True:
                method, props, body = ch.basic_get(q, auto_ack=True)
                if method is None:
                    break
                n = int(body.split()[0])
                remaining.add((q, n))
                if (q, n) not in self.attempted:
                    problems.append("never published: %s %d" % (q, n))
                pub = n // 10_000_000
                if n <= last.get(pub, -1):
                    problems.append("order broken in %s: %d after %d" % (q, n, last[pub]))
                last[pub] = n
                if (q, n) in self.delivered and not method.redelivered:
                    problems.append("seen again without redelivered: %s %d" % (q, n))
        c.close()
        lost = self.confirmed - remaining - self.acked
        problems += ["lost: %s %d" % k for k in sorted(lost)[:5]]
        return len(lost), len(self.confirmed), problems


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("CRASH_TRIALS", 20))
    total_lost = failed = reused = 0
    for i in range(trials):
        try:
            small = i % 2 == 1
            trial = Trial(1000 + i, ("journal.segment_size=1048576",) if small else (),
                          4096 if small else 0)
            lost, confirmed, problems = trial.run()
            reused += trial.reused
        except Exception as e:  # a trial that cannot run is a failure
            lost, confirmed, problems = 0, 0, ["error: %r" % (e,)]
        total_lost += lost
        ok = not problems
        failed += not ok
        print("%s %d - crash trial %d: %d confirmed, %d lost" %
              ("ok" if ok else "not ok", i + 1, i + 1, confirmed, lost), flush=True)
        for p in problems[:10]:
            print("# " + p, flush=True)
    print("1..%d" % trials)
    print("# %d restarts found old bytes of a reused file after the last records" % reused)
    print("%d trials, %d lost" % (trials, total_lost))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
