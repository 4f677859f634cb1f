#!/usr/bin/python3
"""Redrive's cost to live traffic: a durable queue of persistent messages is
moved to another durable queue (POST /api/queues/%2F/rd.src/move) at a few
rate limits while warren-perf runs a fixed 1000 msg/s flow on a queue of its
own; prints the flow's p99 alone and during each move, and the messages/s
the move achieved over the flow's window.

  /usr/bin/python3 tests/bench/redrive_bench.py
Env: MESSAGES=300000 RATES=5000,20000,1000000 P99_DURATION=8 WARREN_BIN PERF
"""
import base64
import http.client
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mgmt_bench import Warren, perf  # noqa: E402

MESSAGES = int(os.environ.get("MESSAGES", "300000"))
RATES = [int(r) for r in os.environ.get("RATES", "5000,20000,1000000").split(",")]
DURATION = os.environ.get("P99_DURATION", "8")
FLOW = ["--size", "16", "--batch", "1", "--rate", "1000", "--inflight", "5000",
        "--duration", DURATION, "--warmup", "1"]
AUTH = "Basic " + base64.b64encode(b"guest:guest").decode()


def call(port, method, path, body=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request(method, path, body=json.dumps(body) if body is not None else None,
                  headers={"Authorization": AUTH, "Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else None
    finally:
        c.close()


class Watch(threading.Thread):
    """Samples the move's progress every 0.25 s until it ends or is stopped:
    its rate is taken between the first and the last sample."""

    def __init__(self, port, queue):
        super().__init__(daemon=True)
        self.port, self.queue, self.samples = port, queue, []
        self.stop_flag = threading.Event()

    def run(self):
        while not self.stop_flag.is_set():
            _, p = call(self.port, "GET", "/api/queues/%%2F/%s/move" % self.queue)
            self.samples.append((time.monotonic(), p["moved"], p["state"]))
            if p["state"] != "running":
                return
            self.stop_flag.wait(0.25)

    def rate(self):
        (t0, m0, _), (t1, m1, _) = self.samples[0], self.samples[-1]
        return (m1 - m0) / (t1 - t0) if t1 > t0 else 0.0


def fill(w, queue, n):
    perf(w.amqp, ["--queue", queue, "--persistent", "--consumers", "0", "--confirm", "2000",
                  "--size", "64", "--count", str(n)], timeout=600)


def main():
    w = Warren()
    try:
        fill(w, "rd.src", MESSAGES)
        fill(w, "rd.dst", 1)
        idle = float(perf(w.amqp, FLOW)["p99_us"])
        print("flow alone: p99 %.0f us" % idle)
        print("RESULT mode=redrive rate_limit=0 moved_per_s=0 p99_us=%.0f" % idle)
        src, dst = "rd.src", "rd.dst"
        for limit in RATES:
            st, p = call(w.http, "POST", "/api/queues/%%2F/%s/move" % src, {"dest-queue": dst, "rate": limit})
            assert st == 202, (st, p)
            watch = Watch(w.http, src)
            watch.start()
            r = perf(w.amqp, FLOW)
            watch.stop_flag.set()
            watch.join(10)
            _, p = call(w.http, "GET", "/api/queues/%%2F/%s/move" % src)
            if p["state"] == "running":
                call(w.http, "DELETE", "/api/queues/%%2F/%s/move" % src)
                time.sleep(0.5)
            print("move at limit %7d/s: %8.0f msg/s moved (%d, %s), flow p99 %.0f us"
                  % (limit, watch.rate(), p["moved"], p["state"], float(r["p99_us"])))
            print("RESULT mode=redrive rate_limit=%d moved_per_s=%.0f p99_us=%s"
                  % (limit, watch.rate(), r["p99_us"]))
            src, dst = dst, src  # move back the other way next time
    finally:
        w.stop()


if __name__ == "__main__":
    main()
