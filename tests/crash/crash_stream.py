"""The crash test's stream part (crash_test.py runs it in every trial).

crash.stream is a stream queue (x-queue-type stream) with small segments
(64 KiB), so the kill often comes near a segment roll. Two publishers in
confirm mode send numbered messages -- one straight to the stream, one
through a fanout exchange bound to it -- while a consumer replays it from
the first offset. After the restart a replay from the first offset must
show:
  - every confirmed message, exactly once (none lost, no duplicate);
  - nothing that was never published;
  - offsets contiguous and unique from 0 (a torn tail cut back to the last
    whole chunk leaves no hole and no repeat);
  - each publisher's messages in publish order;
  - what the consumer saw before the kill at the same offsets after it.

A stream-protocol publisher with a reference (deduplication) publishes
batches of 20 into the same stream and waits for their confirms; after the
restart it declares itself again and publishes every id it had attempted
once more, confirmed or not: each must then be in the stream exactly once
(the ids the stream had kept are dropped by deduplication, the others
stored now) -- the writer's sequence survived the kill exactly as far as
the chunks that hold its messages.
"""
import os
import re
import sys
import threading
import time

import pika

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration", "py"))
import streamraw  # noqa: E402

STREAM = "crash.stream"
STREAM_X = "crash.stream.x"
STREAM_ARGS = {"x-queue-type": "stream", "x-stream-max-segment-size-bytes": 65536}
STREAM_BASE = 800_000_000  # message numbers: publisher p sends STREAM_BASE + p * 10_000_000 + n
SP_REF = b"crash-dedup"
SP_BASE = 900_000_000  # the stream-protocol publisher's ids are SP_BASE + publishing id
STREAM_PORT_RE = re.compile(r"stream protocol listening on 127\.0\.0\.1:(\d+)")


def stream_port(log):
    for line in log:
        m = STREAM_PORT_RE.search(line)
        if m:
            return int(m.group(1))
    raise RuntimeError("no stream protocol listener in the log")


def amqp10(body):
    """An AMQP 1.0 message of one data section."""
    return b"\x00\x53\x75\xb0" + len(body).to_bytes(4, "big") + body


class StreamPart:
    def __init__(self, lock):
        self.lock = lock
        self.attempted, self.confirmed = set(), set()
        self.seen = {}  # offset -> number, as delivered before the kill
        self.lost = 0
        self.sp_attempted, self.sp_confirmed = set(), set()
        self.sport = None

    def setup(self, ch):
        ch.queue_declare(STREAM, durable=True, arguments=STREAM_ARGS)
        ch.exchange_declare(STREAM_X, exchange_type="fanout", durable=True)
        ch.queue_bind(STREAM, STREAM_X)

    def publisher(self, port, stop, connect, p):
        try:
            c = connect(port)
            ch = c.channel()
            ch.confirm_delivery()
            n = 0
            while not stop.is_set():
                num = STREAM_BASE + p * 10_000_000 + n
                with self.lock:
                    self.attempted.add(num)
                ch.basic_publish(STREAM_X if p else "", "" if p else STREAM, str(num).encode() + b" " + b"s" * 200)
                with self.lock:
                    self.confirmed.add(num)
                n += 1
        except Exception:
            pass  # the broker was killed

    def consumer(self, port, stop, connect):
        try:
            c = connect(port)
            ch = c.channel()
            ch.basic_qos(prefetch_count=100)
            for method, props, body in ch.consume(STREAM, inactivity_timeout=0.2,
                                                  arguments={"x-stream-offset": "first"}):
                if stop.is_set():
                    break
                if method is None:
                    continue
                with self.lock:
                    self.seen[props.headers["x-stream-offset"]] = int(body.split()[0])
                ch.basic_ack(method.delivery_tag)
        except Exception:
            pass

    def sp_publisher(self, stop):
        try:
            c = streamraw.Client(self.sport)
            c.handshake()
            if c.declare_publisher(1, STREAM.encode(), SP_REF) != streamraw.OK:
                return
            nid = 1
            while not stop.is_set():
                ids = list(range(nid, nid + 20))
                with self.lock:
                    self.sp_attempted.update(ids)
                c.publish(1, [(i, amqp10(b"%d sp" % (SP_BASE + i))) for i in ids])
                got = c.confirms(len(ids))
                with self.lock:
                    self.sp_confirmed.update(i for _, i in got)
                nid += 20
        except Exception:
            pass  # the broker was killed

    def threads(self, port, stop, connect, log):
        self.sport = stream_port(log)
        return [threading.Thread(target=self.publisher, args=(port, stop, connect, p), daemon=True)
                for p in (0, 1)] + [
            threading.Thread(target=self.consumer, args=(port, stop, connect), daemon=True),
            threading.Thread(target=self.sp_publisher, args=(stop,), daemon=True)]

    def republish(self, log):
        """After the restart: every attempted id again, under the same
        reference; returns problems."""
        self.sport = stream_port(log)
        c = streamraw.Client(self.sport)
        c.handshake()
        if c.declare_publisher(1, STREAM.encode(), SP_REF) != streamraw.OK:
            return ["stream: cannot declare the publisher again"]
        ids = sorted(self.sp_attempted)
        for k in range(0, len(ids), 100):
            part = ids[k:k + 100]
            c.publish(1, [(i, amqp10(b"%d sp" % (SP_BASE + i))) for i in part])
            c.confirms(len(part), timeout=15)
        c.close_socket()
        return []

    def check(self, port, connect, log):
        problems = self.republish(log)
        c = connect(port)
        ch = c.channel()
        ch.basic_qos(prefetch_count=500)
        got = []  # (offset, number)
        with self.lock:
            expect = len(self.confirmed) + len(self.sp_attempted)
        deadline = time.monotonic() + 30
        quiet = 0
        for method, props, body in ch.consume(STREAM, inactivity_timeout=0.3,
                                              arguments={"x-stream-offset": "first"}):
            if method is None:
                quiet += 1
                if (len(got) >= expect and quiet >= 2) or time.monotonic() > deadline:
                    break
                continue
            quiet = 0
            got.append((props.headers["x-stream-offset"], int(body.split()[0])))
            ch.basic_ack(method.delivery_tag, multiple=False)
        ch.cancel()
        c.close()
        offsets = [o for o, _ in got]
        if offsets != list(range(len(got))):
            bad = next(i for i, o in enumerate(offsets) if o != i)
            problems.append("stream offsets not contiguous from 0: at %d found %d" % (bad, offsets[bad]))
        nums = [n for _, n in got]
        dups = len(nums) - len(set(nums))
        if dups:
            problems.append("stream: %d messages twice" % dups)
        sp = {n - SP_BASE for n in nums if n >= SP_BASE}
        if sp != self.sp_attempted:
            problems.append("stream: deduplicated publisher: %d missing, %d never attempted"
                            % (len(self.sp_attempted - sp), len(sp - self.sp_attempted)))
        nums = [n for n in nums if n < SP_BASE]
        never = set(nums) - self.attempted
        problems += ["stream: never published %d" % n for n in sorted(never)[:5]]
        lost = self.confirmed - set(nums)
        self.lost = len(lost)
        problems += ["stream: lost %d" % n for n in sorted(lost)[:5]]
        for p in (0, 1):
            mine = [n for n in nums if (n - STREAM_BASE) // 10_000_000 == p]
            if mine != sorted(mine):
                problems.append("stream: publisher %d's order broken" % p)
        at = dict(got)
        moved = [o for o, n in self.seen.items() if at.get(o) != n]
        problems += ["stream: offset %d held %d before the kill, %r after" % (o, self.seen[o], at.get(o))
                     for o in sorted(moved)[:5]]
        return problems
