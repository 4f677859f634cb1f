"""A failover workload for a Warren cluster: publishers with confirms and
consumers with manual acks, every client on the cluster's host list (pika
tries each node in turn; followers do not listen for AMQP, so only the
leader accepts). It records what a client can observe and checks the
cluster's promise:

- every message the broker confirmed is consumed at least once (in the
  queue at the end counts: the final drain consumes it);
- a message delivered more than once carries redelivered=true from its
  second delivery on;
- failover as a publisher sees it: from the last confirm before a
  connection was lost to the first confirm after it reconnected.

Bounded everywhere: clients stop at `stop()`, reconnects give up after
RECONNECT_S, every wait has a timeout."""
import threading
import time

import pika

RECONNECT_S = 30.0


class Workload:
    def __init__(self, params, queue="work", publishers=4, consumers=4, body_size=64,
                 queue_args=None):
        self.params, self.queue = params, queue
        self.queue_args = queue_args or {}
        self.body = b"x" * body_size
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.confirmed = {}     # id -> (time, node port/host)
        self.attempted = set()
        self.deliveries = {}    # id -> [redelivered flags]
        self.gaps = []          # publisher failovers: (last confirm, first confirm after)
        self.errors = []
        self.threads = [threading.Thread(target=self._publisher, args=(p,), daemon=True)
                        for p in range(publishers)]
        self.threads += [threading.Thread(target=self._consumer, daemon=True)
                         for _ in range(consumers)]

    def _connect(self, even_stopping=False):
        deadline = time.monotonic() + RECONNECT_S
        while even_stopping or not self.stopping.is_set():
            try:
                c = pika.BlockingConnection(self.params)
                ch = c.channel()
                ch.queue_declare(self.queue, durable=True, arguments=self.queue_args)
                return c, ch
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        return None, None

    def start(self):
        c, ch = self._connect(True)
        c.close()
        for t in self.threads:
            t.start()
        return self

    def stop(self, timeout=60.0):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout)
        return self

    def _publisher(self, p):
        n, last_confirm = 0, None
        while not self.stopping.is_set():
            try:
                c, ch = self._connect()
                if c is None:
                    return
                ch.confirm_delivery()
                first = True
                while not self.stopping.is_set():
                    mid = p * 10_000_000 + n
                    n += 1
                    with self.lock:
                        self.attempted.add(mid)
                    ch.basic_publish("", self.queue, b"%d " % mid + self.body,
                                     pika.BasicProperties(delivery_mode=2))
                    now = time.time()
                    with self.lock:
                        self.confirmed[mid] = now
                        if first and last_confirm is not None:
                            self.gaps.append((last_confirm, now))
                    first, last_confirm = False, now
                c.close()
            except Exception as e:  # the leader went: reconnect to the next one
                with self.lock:
                    self.errors.append("publisher %d: %s" % (p, type(e).__name__))
                time.sleep(0.05)

    def _consumer(self):
        while not self.stopping.is_set():
            try:
                c, ch = self._connect()
                if c is None:
                    return
                ch.basic_qos(prefetch_count=50)
                for method, _props, body in ch.consume(self.queue, inactivity_timeout=0.2):
                    if self.stopping.is_set():
                        break
                    if method is None:
                        continue
                    self._saw(body, method.redelivered)
                    ch.basic_ack(method.delivery_tag)
                c.close()
            except Exception as e:
                with self.lock:
                    self.errors.append("consumer: %s" % type(e).__name__)
                time.sleep(0.05)

    def _saw(self, body, redelivered):
        mid = int(body.split(b" ", 1)[0])
        with self.lock:
            self.deliveries.setdefault(mid, []).append(redelivered)

    def drain(self, timeout=60.0):
        """Consumes what is left (on the current leader), until the queue
        stays empty for a second."""
        c, ch = self._connect(True)
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - quiet_since < 1.0:
            method, _props, body = ch.basic_get(self.queue, auto_ack=True)
            if method is None:
                time.sleep(0.05)
                continue
            quiet_since = time.monotonic()
            self._saw(body, method.redelivered)
        c.close()

    def problems(self):
        """What broke the promise (empty: nothing)."""
        out = []
        lost = [m for m in self.confirmed if m not in self.deliveries]
        if lost:
            out.append("%d confirmed messages lost, e.g. %s" % (len(lost), sorted(lost)[:5]))
        unknown = [m for m in self.deliveries if m not in self.attempted]
        if unknown:
            out.append("%d messages never published, e.g. %s" % (len(unknown), unknown[:5]))
        again = [m for m, flags in self.deliveries.items()
                 if len(flags) > 1 and not all(flags[1:])]
        if again:
            out.append("%d messages delivered again without redelivered, e.g. %s"
                       % (len(again), again[:5]))
        return out

    def failovers(self):
        """Each publisher's gap around a failover, in seconds."""
        return [b - a for a, b in self.gaps]
