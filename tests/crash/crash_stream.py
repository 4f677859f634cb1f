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
"""
import threading
import time

import pika

STREAM = "crash.stream"
STREAM_X = "crash.stream.x"
STREAM_ARGS = {"x-queue-type": "stream", "x-stream-max-segment-size-bytes": 65536}
STREAM_BASE = 800_000_000  # message numbers: publisher p sends STREAM_BASE + p * 10_000_000 + n


class StreamPart:
    def __init__(self, lock):
        self.lock = lock
        self.attempted, self.confirmed = set(), set()
        self.seen = {}  # offset -> number, as delivered before the kill
        self.lost = 0

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

    def threads(self, port, stop, connect):
        return [threading.Thread(target=self.publisher, args=(port, stop, connect, p), daemon=True)
                for p in (0, 1)] + [
            threading.Thread(target=self.consumer, args=(port, stop, connect), daemon=True)]

    def check(self, port, connect):
        c = connect(port)
        ch = c.channel()
        ch.basic_qos(prefetch_count=500)
        got = []  # (offset, number)
        with self.lock:
            expect = len(self.confirmed)
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
        problems = []
        offsets = [o for o, _ in got]
        if offsets != list(range(len(got))):
            bad = next(i for i, o in enumerate(offsets) if o != i)
            problems.append("stream offsets not contiguous from 0: at %d found %d" % (bad, offsets[bad]))
        nums = [n for _, n in got]
        dups = len(nums) - len(set(nums))
        if dups:
            problems.append("stream: %d messages twice" % dups)
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
