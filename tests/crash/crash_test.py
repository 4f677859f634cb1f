#!/usr/bin/python3
"""Crash test: confirm-mode publishers and acking consumers on durable
queues; the broker is killed with SIGKILL at a random moment, restarted, and
every queue is drained and checked:

  - every confirmed message is in exactly one place -- still queued, in the
    dead-letter queue, or delivered and acked (an ack or reject sent just
    before the kill may not have arrived: then the message is still queued,
    and that is fine; an ack whose send raised -- pika flushes after writing
    it -- may have arrived: then the message may be gone, counted apart);
    none lost, none in two places or twice in one;
  - no message appears that was never published;
  - the remaining messages of each queue keep their publish order;
  - messages seen again (delivered before the crash) carry redelivered=true;
  - a dead-lettered one carries x-death naming its queue and the reason:
    "rejected" only if a consumer rejected it, "expired" from the TTL queue.

Consumers ack most messages at once, hold some back (acking those later and
out of order) and reject a few without requeue: crash.q1 and crash.q2
dead-letter into crash.dlq. A fifth of the messages go to crash.ttl, which
has no consumer and a short x-message-ttl: they expire into crash.dlq. Each
dead-letter is one atomic group in the journal (settle in the source, the
copy's message and enqueue in the DLQ), so a crash leaves it in exactly one
of the two. Every other trial runs the journal with 1 MiB segments,
so segments fill, are collected (kept as spare files and reused), and
sparse ones (held-back messages among acked ones) are compacted while the
broker is killed; their messages carry 4 KiB bodies so that segments fill.
The summary counts the restarts that found the last segment in a reused
file with old bytes after its records.

A poison publisher sends transient messages to crash.poison, a quorum queue
(it journals them anyway) with x-delivery-limit 3 and crash.poison.dlq, a
quorum queue too (a classic one would not keep a transient message), as its
dead-letter target, whose consumer rejects every delivery with requeue:
after the restart each confirmed poison message is still there or in
crash.poison.dlq with reason delivery_limit, and its x-delivery-count (the
journaled returns) is never below the highest seen before the kill minus
the deliveries made since the last journal sync (the summary counts how
many came back with a lower count than seen).

Delayed retries and a redrive run in each trial too (crash_retry.py says
what they check): crash.retry (x-delayed-retry-type failed, 200 ms to 1 s,
x-delivery-limit 4) fails messages a few times before acking them, or past
the limit into crash.retry.dlq; after the restart its consumer finishes the
work, and every message was acked or dead-lettered with reason
delivery_limit, exactly once, its x-delivery-count never going back and no
delivery coming before its deadline (kept across the kill). 2,000 messages
dead-lettered from crash.redrive are moved back by POST
/api/queues/%2F/crash.redrive.dlq/move while a consumer acks them, and the
kill comes mostly midway: each is in exactly one of the two queues or was
acked. Fences (a confirmed persistent publish after a settle on the same
channel) tell which settles the journal must have kept.

A stream part runs in each trial too (crash_stream.py says what it checks):
confirm-mode publishers into crash.stream (64 KiB segments), straight and
through an exchange, and a consumer replaying it; after the restart every
confirmed message is in the stream once, offsets contiguous from 0.

Usage: crash_test.py [TRIALS]   (default 20; CRASH_TRIALS=500 for the long
mode). Prints TAP lines, one per trial, then "N trials, M lost".
Environment: WARREN_BIN (default build/release/warren); CRASH_KEEP=DIR keeps
each failed trial's data directory (as the kill left it, and after the
checks) and broker logs in DIR.
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

from crash_retry import FENCE, FENCE_ARGS, RedrivePart, RetryPart
from crash_stream import StreamPart

REPO = Path(__file__).resolve().parents[2]
WARREN_BIN = os.environ.get("WARREN_BIN") or str(REPO / "build" / "release" / "warren")
QUEUES = ["crash.q1", "crash.q2"]  # consumed
TTL_QUEUE, DLQ = "crash.ttl", "crash.dlq"
TARGETS = QUEUES * 2 + [TTL_QUEUE]  # where publish n goes: TARGETS[n % 5]
PUBLISHERS, CONSUMERS = 2, 2
REJECT_RATE = 0.05
DLX = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": DLQ}
POISON, POISON_DLQ, POISON_LIMIT, POISON_BASE = "crash.poison", "crash.poison.dlq", 3, 90_000_000
QUORUM = {"x-queue-type": "quorum"}


def origin_of(n):
    return POISON if n >= POISON_BASE else TARGETS[n % len(TARGETS)]
KEEP = os.environ.get("CRASH_KEEP")
NO_SOCKETS = shutil.ignore_patterns("*.sock")  # the control socket cannot be copied
LISTEN_RE = re.compile(r"AMQP listening on 127\.0\.0\.1:(\d+)")
MGMT_RE = re.compile(r"management listening on 127\.0\.0\.1:(\d+)")


def start(data_dir, settings=()):
    """Warren on ephemeral AMQP and management ports: (proc, port,
    management port, log lines up to the management line)."""
    argv = [WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0", "--set", "data_dir=" + data_dir,
            "--set", "management.tcp.port=0", "--set", "management.tcp.ip=127.0.0.1",
            "--set", "prometheus.tcp.port=0", "--set", "prometheus.tcp.ip=127.0.0.1"]
    for s in settings:
        argv += ["--set", s]
    proc = subprocess.Popen(argv,
                            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    log, port = [], None
    for line in proc.stderr:
        log.append(line)
        m = LISTEN_RE.search(line)
        port = int(m.group(1)) if m else port
        m = MGMT_RE.search(line)
        if m and port:
            threading.Thread(target=lambda: log.extend(proc.stderr), daemon=True).start()
            return proc, port, int(m.group(1)), log
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
        self.acking = set()      # (queue, n) ack being sent (it may have arrived)
        self.acked = set()       # (queue, n) ack sent
        self.rejected = set()    # (queue, n) reject (requeue=false) sent
        self.stop = threading.Event()
        self.reused = False      # the restart cut old bytes off a reused file
        self.torn_group = False  # the restart dropped a torn atomic group
        self.poison_seen = {}    # n -> highest x-delivery-count delivered before the kill
        self.count_lower = 0     # poison messages back with a lower count than seen
        self.retry = RetryPart(self.lock)
        self.redrive = RedrivePart(self.lock, self.rng)
        self.stream = StreamPart(self.lock)

    def publisher(self, port, pid):
        try:
            c = connect(port)
            ch = c.channel()
            ch.confirm_delivery()
            n = 0
            while not self.stop.is_set():
                q = TARGETS[n % len(TARGETS)]
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

    def poison_publisher(self, port):
        try:
            c = connect(port)
            ch = c.channel()
            ch.confirm_delivery()
            n = POISON_BASE
            while not self.stop.is_set():
                with self.lock:
                    self.attempted.add((POISON, n))
                ch.basic_publish("", POISON, str(n).encode())
                with self.lock:
                    self.confirmed.add((POISON, n))
                n += 1
                time.sleep(0.01)
        except Exception:
            pass

    def poison_consumer(self, port):
        try:
            c = connect(port)
            ch = c.channel()
            ch.basic_qos(prefetch_count=10)
            for method, props, body in ch.consume(POISON, inactivity_timeout=0.2):
                if self.stop.is_set():
                    break
                if method is None:
                    continue
                n = int(body)
                count = (props.headers or {}).get("x-delivery-count", 0)
                with self.lock:
                    self.delivered.add((POISON, n))
                    self.poison_seen[n] = max(count, self.poison_seen.get(n, 0))
                ch.basic_reject(method.delivery_tag, requeue=True)
        except Exception:
            pass

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
                # ack most at once; reject a few (dead-lettered); hold some
                # back (they stay delivered) and ack them later, in random order
                r = self.rng.random()
                if r < REJECT_RATE:
                    n = int(body.split()[0])
                    with self.lock:
                        self.rejected.add((q, n))
                    ch.basic_reject(method.delivery_tag, requeue=False)
                    acks = []
                elif r < 0.9:
                    acks = [(method.delivery_tag, int(body.split()[0]))]
                else:
                    held.append((method.delivery_tag, int(body.split()[0])))
                    acks = []
                if len(held) >= 25:
                    self.rng.shuffle(held)
                    acks += held[:10]
                    del held[:10]
                for tag, n in acks:
                    # pika may raise after writing an ack (the kill seen while
                    # flushing): one being sent counts as maybe arrived
                    with self.lock:
                        self.acking.add((q, n))
                    ch.basic_ack(tag)
                    with self.lock:
                        self.acked.add((q, n))
        except Exception:
            pass

    def run(self):
        data_dir = tempfile.mkdtemp(prefix="warren-crash-")
        self.logs, self.snapshot, self.ack_in_flight = [], None, 0
        result = None
        try:
            result = self._run(data_dir)
            return result
        finally:
            if KEEP and (result is None or result[3]):
                self.keep(data_dir)
            shutil.rmtree(data_dir, ignore_errors=True)
            if self.snapshot:
                shutil.rmtree(self.snapshot, ignore_errors=True)

    def keep(self, data_dir):
        """A failed trial's data directory as the kill left it (and as the
        checks left it) and both broker logs, for a post-mortem."""
        to = tempfile.mkdtemp(prefix="trial-", dir=KEEP)
        if self.snapshot:
            shutil.copytree(self.snapshot, os.path.join(to, "killed"), dirs_exist_ok=True,
                            ignore=NO_SOCKETS)
        shutil.copytree(data_dir, os.path.join(to, "after"), dirs_exist_ok=True, ignore=NO_SOCKETS)
        for i, log in enumerate(self.logs):
            with open(os.path.join(to, "broker-%d.log" % (i + 1)), "w") as f:
                f.writelines(log)

    def _run(self, data_dir):
        proc, port, http_port, log = start(data_dir, self.settings)
        self.logs.append(log)
        c = connect(port)
        ch = c.channel()
        ch.queue_declare(FENCE, durable=True, arguments=FENCE_ARGS)
        self.retry.setup(ch)
        # retries start first: by the kill some have failed past the limit
        threads = self.retry.threads(port, self.stop, connect)
        for t in threads:
            t.start()
        self.redrive.setup(ch, http_port)
        self.stream.setup(ch)
        ch.queue_declare(DLQ, durable=True)
        for q in QUEUES:
            ch.queue_declare(q, durable=True, arguments=DLX)
        ch.queue_declare(TTL_QUEUE, durable=True,
                         arguments=dict(DLX, **{"x-message-ttl": self.rng.randint(20, 300)}))
        ch.queue_declare(POISON_DLQ, durable=True, arguments=QUORUM)
        ch.queue_declare(POISON, durable=True, arguments=dict(QUORUM, **{
            "x-dead-letter-exchange": "", "x-dead-letter-routing-key": POISON_DLQ,
            "x-delivery-limit": POISON_LIMIT}))
        c.close()
        later = [threading.Thread(target=self.publisher, args=(port, i), daemon=True)
                 for i in range(PUBLISHERS)]
        later += [threading.Thread(target=self.consumer, args=(port, QUEUES[i % len(QUEUES)]),
                                   daemon=True) for i in range(CONSUMERS)]
        later += [threading.Thread(target=f, args=(port,), daemon=True)
                  for f in (self.poison_publisher, self.poison_consumer)]
        kill_in = self.rng.uniform(0.3, 1.5)
        later += self.redrive.threads(port, self.stop, connect, kill_in)
        later += self.stream.threads(port, self.stop, connect, log)
        for t in later:
            t.start()
        threads += later
        time.sleep(kill_in)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.stop.set()
        if KEEP:  # the journal as the kill left it, for a failed trial's post-mortem
            self.snapshot = tempfile.mkdtemp(prefix="warren-crash-killed-")
            shutil.copytree(data_dir, self.snapshot, dirs_exist_ok=True, ignore=NO_SOCKETS)
        for t in threads:
            t.join(10)
        proc, port, http_port, log = start(data_dir, self.settings)
        self.logs.append(log)
        self.reused = any("records end at offset" in line for line in log)
        self.torn_group = any("atomic group" in line and "torn" in line for line in log)
        try:
            late = self.retry.finish(port, http_port, connect)
            lost, confirmed, dead, problems = self.check(port)
            c = connect(port)
            ch = c.channel()
            problems += late + self.retry.check(ch) + self.redrive.check(ch)
            c.close()
            problems += self.stream.check(port, connect, log)
            confirmed += len(self.stream.confirmed) + len(self.stream.sp_confirmed)
            return (lost + self.retry.lost + self.redrive.lost + self.stream.lost, confirmed, dead,
                    problems)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(15)

    def check(self, port):
        c = connect(port)
        ch = c.channel()
        problems = []
        where = {}  # n -> the queues it was found in
        for q in QUEUES + [TTL_QUEUE, POISON, DLQ, POISON_DLQ]:
            last = {}
            while True:
                method, props, body = ch.basic_get(q, auto_ack=True)
                if method is None:
                    break
                n = int(body.split()[0])
                origin = origin_of(n)
                where.setdefault(n, []).append(q)
                if (origin, n) not in self.attempted:
                    problems.append("never published: %s %d" % (origin, n))
                if q in (DLQ, POISON_DLQ):
                    problems += self.check_death(origin, n, props)
                    continue
                pub = n // 10_000_000
                if n <= last.get(pub, -1):
                    problems.append("order broken in %s: %d after %d" % (q, n, last[pub]))
                last[pub] = n
                if (q, n) in self.delivered and not method.redelivered:
                    problems.append("seen again without redelivered: %s %d" % (q, n))
                if q == POISON:
                    problems += self.check_poison_count(n, props)
        c.close()
        problems += ["in two places: %d in %s" % (n, qs) for n, qs in sorted(where.items())
                     if len(qs) > 1][:5]
        remaining = {(origin_of(n), n) for n in where}
        gone = self.confirmed - remaining - self.acked
        self.ack_in_flight = len(gone & self.acking)  # its ack was being sent at the kill
        lost = gone - self.acking
        problems += ["lost: %s %d" % k for k in sorted(lost)[:5]]
        dead = sum(1 for qs in where.values() if DLQ in qs or POISON_DLQ in qs)
        return len(lost), len(self.confirmed), dead, problems

    def check_poison_count(self, n, props):
        """The count comes back from the journal; deliveries after its last
        sync may be missing from it, but it never exceeds the limit's."""
        count = (props.headers or {}).get("x-delivery-count", 0)
        if count < self.poison_seen.get(n, 0):
            self.count_lower += 1
        if count > POISON_LIMIT + 1:
            return ["poison %d back with x-delivery-count %d, over the limit" % (n, count)]
        return []

    def check_death(self, origin, n, props):
        deaths = (props.headers or {}).get("x-death") or [{}]
        reason, queue = deaths[0].get("reason"), deaths[0].get("queue")
        want = {TTL_QUEUE: "expired", POISON: "delivery_limit"}.get(origin, "rejected")
        if queue != origin or reason != want:
            return ["dead-lettered %d: x-death says %s from %s" % (n, reason, queue)]
        if want == "rejected" and (origin, n) not in self.rejected:
            return ["dead-lettered %d without a reject" % n]
        return []


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else int(os.environ.get("CRASH_TRIALS", 20))
    total_lost = total_dead = failed = reused = torn_groups = lower = 0
    retried = held = unsynced = midway = in_flight = 0
    for i in range(trials):
        try:
            small = i % 2 == 1
            trial = Trial(1000 + i, ("journal.segment_size=1048576",) if small else (),
                          4096 if small else 0)
            lost, confirmed, dead, problems = trial.run()
            reused += trial.reused
            torn_groups += trial.torn_group
            lower += trial.count_lower
            retried += trial.retry.acked + trial.retry.dead
            held += trial.retry.deadlines_held
            unsynced += trial.retry.counts_unsynced
            midway += trial.redrive.midway
            in_flight += trial.ack_in_flight
        except Exception as e:  # a trial that cannot run is a failure
            lost, confirmed, dead, problems = 0, 0, 0, ["error: %r" % (e,)]
        total_lost += lost
        total_dead += dead
        ok = not problems
        failed += not ok
        print("%s %d - crash trial %d: %d confirmed, %d dead-lettered, %d lost" %
              ("ok" if ok else "not ok", i + 1, i + 1, confirmed, dead, lost), flush=True)
        for p in problems[:10]:
            print("# " + p, flush=True)
    print("1..%d" % trials)
    print("# %d restarts found old bytes of a reused file after the last records" % reused)
    print("# %d messages found dead-lettered after the restarts" % total_dead)
    print("# %d restarts dropped a torn atomic group (a dead-letter cut by the kill)" % torn_groups)
    print("# %d poison messages came back with a lower x-delivery-count than last seen "
          "(deliveries after the last journal sync)" % lower)
    print("# %d retried messages acked or dead-lettered (delivery_limit); %d deliveries after a "
          "restart held until a deadline set before the kill; %d came back with the count of "
          "before their last delivery (its record not yet synced)" % (retried, held, unsynced))
    print("# %d of %d kills caught the redrive midway (messages in the DLQ and moved)"
          % (midway, trials))
    print("# %d messages gone whose ack was being sent at the kill (pika raised after writing "
          "it; not counted as lost)" % in_flight)
    print("%d trials, %d lost" % (trials, total_lost))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
