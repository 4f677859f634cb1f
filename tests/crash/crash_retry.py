"""Two parts of a crash_test.py trial: delayed retries and a DLQ redrive,
both under the trial's SIGKILL. Each part has setup (before the trial's
threads start), threads (run until the kill), finish (after the restart)
and check (its problems, as crash_test.py's are).

A fence tells what the journal must have kept: after a settle (ack or
reject) a consumer publishes a persistent message to a durable queue on the
same channel in confirm mode, and its confirm comes only once the journal
synced everything appended before it -- the settle too. Settles with a
confirmed fence are checked strictly; the others may or may not have reached
the journal before the kill.
"""
import http.client
import json
import threading
import time

import pika


def api(port, method, path, body=None):
    """One management API call on 127.0.0.1:port as guest: (status, JSON)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": "Basic Z3Vlc3Q6Z3Vlc3Q=",
                           "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


FENCE = "crash.fence"
FENCE_ARGS = {"x-max-length": 1}  # fences are only waited for, never read
PERSISTENT = pika.BasicProperties(delivery_mode=2)

RETRY, RETRY_DLQ, RETRY_BASE = "crash.retry", "crash.retry.dlq", 70_000_000
RETRY_LIMIT, RETRY_MIN, RETRY_MAX = 4, 200, 1000
RETRY_ARGS = {"x-delayed-retry-type": "failed", "x-delayed-retry-min": RETRY_MIN,
              "x-delayed-retry-max": RETRY_MAX, "x-delivery-limit": RETRY_LIMIT,
              "x-dead-letter-exchange": "", "x-dead-letter-routing-key": RETRY_DLQ}
EARLY = 0.05  # a delayed message may come this much before its deadline (coarse clocks)

REDRIVE, REDRIVE_DLQ, REDRIVE_BASE, REDRIVE_N = "crash.redrive", "crash.redrive.dlq", 80_000_000, 2000
REDRIVE_ARGS = {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": REDRIVE_DLQ}


def drain(ch, q):
    """Every message of q by basic.get: [(n, method, props)]."""
    out = []
    for _ in range(1_000_000):
        method, props, body = ch.basic_get(q, auto_ack=True)
        if method is None:
            return out
        out.append((int(body), method, props))
    raise RuntimeError("%s does not drain" % q)


def first_death(props):
    d = ((props.headers or {}).get("x-death") or [{}])[0]
    return d.get("reason"), d.get("queue")


def fails(n):
    """How many times a retry message is rejected before it is acked: 5 and
    6 go over the delivery limit (the 5th reject dead-letters it)."""
    return (n - RETRY_BASE) % 7


def retry_delay(count):
    """Seconds a return that made the delivery count `count` is held back."""
    return min(RETRY_MIN * count, RETRY_MAX) / 1000


class Delivery:
    def __init__(self, phase, t, count, redelivered):
        self.phase, self.t, self.count, self.redelivered = phase, t, count, redelivered


class Settle:
    def __init__(self, ack, t):
        self.ack, self.t, self.fenced = ack, t, False


class RetryPart:
    """crash.retry: x-delayed-retry-type failed (200 ms x count, at most 1 s),
    x-delivery-limit 4, dead-lettering into crash.retry.dlq. Its consumer
    rejects message n (requeue) fails(n) times, then acks it. Its publisher
    and consumer start before the other threads, so some messages go over
    the limit before the kill. After the restart a consumer finishes the
    work until the queue is empty (ready, unacked and delayed); then every
    confirmed message was acked, or is in crash.retry.dlq with reason
    delivery_limit if it was to fail 5 times. Along each message's history:
    its x-delivery-count goes up by one per reject, and across the crash
    never back (after a fenced settle at least one up; at most two up, a
    delivery the consumer never saw before the kill counting too); it is not
    delivered before its deadline (a fenced reject before the kill: wall
    clock, after the restart too), and not again after a fenced ack."""

    def __init__(self, lock):
        self.lock = lock
        self.attempted, self.confirmed = set(), set()
        self.events = {}  # n -> [Delivery | Settle] in order
        self.restarted_at = None
        self.deadlines_held = 0  # deliveries after the restart held to a pre-kill deadline
        self.counts_unsynced = 0  # came back with the count of before their last delivery
        self.lost = self.acked = self.dead = 0

    def setup(self, ch):
        ch.queue_declare(RETRY_DLQ, durable=True)
        ch.queue_declare(RETRY, durable=True, arguments=RETRY_ARGS)

    def threads(self, port, stop, connect):
        return [threading.Thread(target=self.publisher, args=(port, stop, connect), daemon=True),
                threading.Thread(target=self.consumer, args=(port, stop, connect, 1), daemon=True)]

    def publisher(self, port, stop, connect):
        try:
            ch = connect(port).channel()
            ch.confirm_delivery()
            n = RETRY_BASE
            while not stop.is_set():
                with self.lock:
                    self.attempted.add(n)
                ch.basic_publish("", RETRY, str(n).encode(), PERSISTENT)
                with self.lock:
                    self.confirmed.add(n)
                n += 1
                time.sleep(0.01)
        except Exception:
            pass  # the broker was killed

    def consumer(self, port, stop, connect, phase):
        try:
            ch = connect(port).channel()
            ch.basic_qos(prefetch_count=20)
            ch.confirm_delivery()
            for method, props, body in ch.consume(RETRY, inactivity_timeout=0.05):
                if stop.is_set():
                    break
                if method is None:
                    continue
                n = int(body)
                count = (props.headers or {}).get("x-delivery-count", 0)
                s = Settle(count >= fails(n), time.time())
                # recorded before it is sent: pika may raise after writing it
                # (the kill seen while flushing), so the broker may have it
                with self.lock:
                    self.events.setdefault(n, []).extend(
                        [Delivery(phase, s.t, count, method.redelivered), s])
                if s.ack:
                    ch.basic_ack(method.delivery_tag)
                else:
                    ch.basic_reject(method.delivery_tag, requeue=True)
                ch.basic_publish("", FENCE, b"", PERSISTENT)
                s.fenced = True
        except Exception:
            if phase == 2:
                raise

    def finish(self, port, http_port, connect):
        """Runs the consumer until crash.retry is empty (at most 10 s)."""
        self.restarted_at = time.time()
        stop, errors = threading.Event(), []

        def run():
            try:
                self.consumer(port, stop, connect, 2)
            except Exception as e:
                errors.append(e)
        t = threading.Thread(target=run, daemon=True)
        t.start()
        deadline = time.monotonic() + 10
        left = None
        while time.monotonic() < deadline and not errors:
            _, q = api(http_port, "GET", "/api/queues/%2F/" + RETRY)
            left = q["messages"] + q["messages_delayed"]
            if left == 0:
                break
            time.sleep(0.1)
        stop.set()
        t.join(10)
        if errors:
            return ["retry consumer after the restart: %r" % errors[0]]
        return ["%s not empty 10 s after the restart: %d left" % (RETRY, left)] if left else []

    def check(self, ch):
        problems = ["left in %s: %d" % (RETRY, n) for n, _, _ in drain(ch, RETRY)][:5]
        dead = {}
        for n, _, props in drain(ch, RETRY_DLQ):
            dead[n] = dead.get(n, 0) + 1
            if n not in self.attempted:
                problems.append("never published: %s %d" % (RETRY, n))
            if first_death(props) != ("delivery_limit", RETRY):
                problems.append("retry %d dead-lettered: x-death says %s from %s"
                                % ((n,) + first_death(props)))
        self.dead = len(dead)
        self.acked = sum(1 for evs in self.events.values() if isinstance(evs[-1], Settle) and evs[-1].ack)
        for n in sorted(self.confirmed | set(dead) | set(self.events)):
            problems += self.check_history(n, self.events.get(n, []), dead.get(n, 0))
        return problems

    def check_history(self, n, events, dead):
        problems, prev, settle = [], None, None
        for e in events:
            if isinstance(e, Settle):
                settle = e
                continue
            if prev is None:  # after the restart: 1 if it was delivered unseen before
                if e.count > (e.phase == 2):
                    problems.append("retry %d: first delivered with x-delivery-count %d"
                                    % (n, e.count))
            else:
                problems += self.check_again(n, prev, settle, e)
            prev, settle = e, None
        last = settle if prev else None
        if dead:
            if dead > 1 or fails(n) <= RETRY_LIMIT or not last or last.ack \
                    or prev.count < RETRY_LIMIT:
                problems.append("retry %d dead-lettered %d time(s) after %s (fails %d times)"
                                % (n, dead, "nothing" if not prev else "count %d" % prev.count,
                                   fails(n)))
        elif n in self.confirmed and not (last and last.ack):
            self.lost += 1
            problems.append("lost: %s %d" % (RETRY, n))
        return problems

    def check_again(self, n, prev, settle, e):
        """A delivery e after prev, which `settle` settled (None: unsettled
        when the broker was killed)."""
        crossed = prev.phase != e.phase
        if not e.redelivered:
            return ["retry %d seen again without redelivered" % n]
        if settle and settle.ack and (settle.fenced or not crossed):
            return ["retry %d delivered again after its ack" % n]
        # across the kill: the last delivery's record (the count) may be lost,
        # unless a fence came after its settle; a reject may have let the
        # broker deliver the message once more, unseen
        low = prev.count + (not crossed or bool(settle and settle.fenced))
        high = prev.count + 1 + (crossed and settle is not None and not settle.ack)
        if not low <= e.count <= high:
            return ["retry %d: x-delivery-count %d after %d%s" % (
                n, e.count, prev.count, " and the restart" if crossed else "")]
        self.counts_unsynced += crossed and e.count == prev.count
        if settle and not settle.ack and (settle.fenced or not crossed) \
                and e.count == prev.count + 1:
            due = settle.t + retry_delay(e.count)
            if e.t < due - EARLY:
                return ["retry %d delivered %.0f ms before its deadline%s" % (
                    n, (due - e.t) * 1000, " (set before the kill)" if crossed else "")]
            self.deadlines_held += crossed and due > self.restarted_at
        return []


class RedrivePart:
    """crash.redrive dead-letters REDRIVE_N messages into crash.redrive.dlq
    (rejected); when the trial's threads start, POST .../move sends them
    back to their source (x-death) at a rate that ends it between 0.6 and 2
    times the time to the kill (so most kills come midway), while a consumer acks what arrives in crash.redrive (fencing every
    20 acks). After the restart each message is in exactly one of the two
    queues (with its x-death) or was acked; not in either only if acked, and
    not found at all after a fenced ack; seen again only with
    redelivered=true."""

    def __init__(self, lock, rng):
        self.lock, self.rng = lock, rng
        self.delivered, self.acked, self.fenced = set(), set(), set()
        self.status = None  # the move's POST reply status
        self.midway = False  # the kill came with messages in both places
        self.lost = 0

    def setup(self, ch, http_port):
        ch.queue_declare(REDRIVE_DLQ, durable=True)
        ch.queue_declare(REDRIVE, durable=True, arguments=REDRIVE_ARGS)
        ns = range(REDRIVE_BASE, REDRIVE_BASE + REDRIVE_N)
        for n in ns[:-1]:
            ch.basic_publish("", REDRIVE, str(n).encode(), PERSISTENT)
        ch.confirm_delivery()  # the last one's confirm covers those before it
        ch.basic_publish("", REDRIVE, str(ns[-1]).encode(), PERSISTENT)
        tag = None
        for method, _, _ in ch.consume(REDRIVE, inactivity_timeout=5):
            if method is None:
                raise RuntimeError("%s: the prefill did not arrive" % REDRIVE)
            tag = method.delivery_tag
            if tag == REDRIVE_N:
                break
        ch.basic_nack(tag, multiple=True, requeue=False)
        ch.cancel()
        for _ in range(100):
            if ch.queue_declare(REDRIVE_DLQ, passive=True).method.message_count == REDRIVE_N:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("%s did not fill" % REDRIVE_DLQ)
        self.http_port = http_port

    def threads(self, port, stop, connect, kill_in):
        rate = round(REDRIVE_N / (kill_in * self.rng.uniform(0.6, 2.0)))
        return [threading.Thread(target=self.mover, args=(rate,), daemon=True),
                threading.Thread(target=self.consumer, args=(port, stop, connect), daemon=True)]

    def mover(self, rate):
        try:
            self.status, _ = api(self.http_port, "POST", "/api/queues/%2F/" + REDRIVE_DLQ + "/move",
                                 {"rate": rate})
        except Exception:
            pass

    def consumer(self, port, stop, connect):
        try:
            ch = connect(port).channel()
            ch.basic_qos(prefetch_count=50)
            ch.confirm_delivery()
            unfenced = []
            for method, _, body in ch.consume(REDRIVE, inactivity_timeout=0.1):
                if stop.is_set():
                    break
                if method is not None:
                    n = int(body)
                    with self.lock:  # acked before it is sent, as in RetryPart
                        self.delivered.add(n)
                        self.acked.add(n)
                    ch.basic_ack(method.delivery_tag)
                    unfenced.append(n)
                if len(unfenced) >= 20 or (method is None and unfenced):
                    ch.basic_publish("", FENCE, b"", PERSISTENT)
                    with self.lock:
                        self.fenced.update(unfenced)
                    unfenced = []
        except Exception:
            pass

    def check(self, ch):
        problems = [] if self.status == 202 else ["the move's POST answered %s" % self.status]
        found = {}
        for q in (REDRIVE_DLQ, REDRIVE):
            for n, method, props in drain(ch, q):
                found.setdefault(n, []).append(q)
                if first_death(props) != ("rejected", REDRIVE):
                    problems.append("redrive %d in %s: x-death says %s from %s"
                                    % ((n, q) + first_death(props)))
                if q == REDRIVE and n in self.delivered and not method.redelivered:
                    problems.append("redrive %d seen again without redelivered" % n)
        for n in range(REDRIVE_BASE, REDRIVE_BASE + REDRIVE_N):
            qs = found.get(n, [])
            if len(qs) > 1:
                problems.append("redrive %d in %s" % (n, qs))
            elif qs and n in self.fenced:
                problems.append("redrive %d in %s after its ack was synced" % (n, qs[0]))
            elif not qs and n not in self.acked:
                self.lost += 1
                problems.append("lost: %s %d" % (REDRIVE, n))
        problems += ["never published: %s %d" % (REDRIVE, n) for n in found
                     if not REDRIVE_BASE <= n < REDRIVE_BASE + REDRIVE_N]
        places = {q for qs in found.values() for q in qs} | ({"acked"} if self.acked else set())
        self.midway = REDRIVE_DLQ in places and len(places) > 1
        return problems[:10]
