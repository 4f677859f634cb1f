#!/usr/bin/python3
"""Shovel throughput (tests/bench/shovel.sh starts RabbitMQ and runs this).

Three ways to move N persistent SIZE-byte messages, one queue to another,
ack-mode on-confirm, prefetch 1000 (the default), in interleaved rounds:
  warren->warren    Warren A's shovel: its queue -> Warren B over TCP
  rabbitmq->warren  Warren A's shovel: a RabbitMQ queue -> a queue of A
  rabbitmq->rabbitmq  RabbitMQ's own shovel between two vhosts of that
                    RabbitMQ (amqp:// direct connections), the reference
Each run fills the source first (warren-perf, confirmed), then creates the
shovel and times it from the parameter's PUT until the destination holds N
(passive queue.declare every 20 ms) -- connection set-up included, as a
user sees it. Prints one line per run and the medians, and the ratios of
Warren's two to RabbitMQ's.

Env: N (50000), SIZE (1024), ROUNDS (3), PERF, WARREN_BIN, RABBIT_PORT,
RABBIT_MGMT (port of RabbitMQ's management API).
"""
import base64
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

import pika

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "integration", "py"))
import harness  # noqa: E402

N = int(os.environ.get("N", "50000"))
SIZE = int(os.environ.get("SIZE", "1024"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
PERF = os.environ.get("PERF", os.path.join(REPO, "build", "release", "warren-perf"))
RABBIT_PORT = int(os.environ.get("RABBIT_PORT", "5763"))
RABBIT_MGMT = int(os.environ.get("RABBIT_MGMT", "15763"))
LIMIT_S = 600


def api(port, method, path, body=None):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Authorization", "Basic " + base64.b64encode(b"guest:guest").decode())
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def fill(port, vhost, queue):
    vh = "%2f" if vhost == "/" else vhost
    uri = "amqp://guest:guest@127.0.0.1:%d/%s" % (port, vh)
    subprocess.run([PERF, "--uri", uri, "--queue", queue, "--delete-queues"], capture_output=True, timeout=120)
    out = subprocess.run([PERF, "--uri", uri, "--queue", queue, "--persistent", "--size", str(SIZE),
                          "--producers", "1", "--consumers", "0", "--count", str(N), "--confirm", "500",
                          "--batch", "16", "--duration", str(LIMIT_S)], capture_output=True, text=True,
                         timeout=LIMIT_S + 60)
    if "errors=0" not in out.stdout:
        raise RuntimeError("fill %s failed: %s %s" % (uri, out.stdout[-500:], out.stderr[-500:]))


def count(port, vhost, queue):
    try:
        c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, vhost, socket_timeout=10))
    except pika.exceptions.AMQPError:
        return -1
    try:
        return c.channel().queue_declare(queue, durable=True).method.message_count
    finally:
        c.close()


def delete_queue(port, vhost, queue):
    c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port, vhost, socket_timeout=10))
    try:
        c.channel().queue_delete(queue)
    finally:
        c.close()


def timed(mgmt_port, vhost, name, value, dest_port, dest_vhost, dest_queue):
    """Seconds from the shovel's PUT until its destination holds N."""
    path = "/api/parameters/shovel/%s/%s" % ("%2f" if vhost == "/" else vhost, name)
    t0 = time.monotonic()
    if api(mgmt_port, "PUT", path, {"value": value}) not in (201, 204):
        raise RuntimeError("PUT %s refused" % path)
    c = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", dest_port, dest_vhost))
    ch = c.channel()
    try:
        while ch.queue_declare(dest_queue, durable=True).method.message_count < N:
            if time.monotonic() - t0 > LIMIT_S:
                raise RuntimeError("%s did not finish in %d s" % (name, LIMIT_S))
            time.sleep(0.02)
        took = time.monotonic() - t0
    finally:
        c.close()
    api(mgmt_port, "DELETE", path)
    return took


def main():
    port_b = free_port()
    a = harness.WarrenProcess()
    b = harness.WarrenProcess(["listeners.tcp.default=127.0.0.1:%d" % port_b])
    a.start()
    b.start()
    rabbit = "amqp://guest:guest@127.0.0.1:%d" % RABBIT_PORT
    api(RABBIT_MGMT, "PUT", "/api/vhosts/bench-b", {})
    api(RABBIT_MGMT, "PUT", "/api/permissions/bench-b/guest", {"configure": ".*", "write": ".*", "read": ".*"})
    results = {"warren->warren": [], "rabbitmq->warren": [], "rabbitmq->rabbitmq": []}
    print("shovel bench: N=%d x %d-byte persistent messages, on-confirm, prefetch 1000, %d rounds"
          % (N, SIZE, ROUNDS), flush=True)
    try:
        for r in range(ROUNDS):
            fill(a.port, "/", "ww.src")
            took = timed(a.mgmt_port, "/", "ww", {"src-uri": "amqp://", "src-queue": "ww.src",
                                                   "dest-uri": "amqp://guest:guest@127.0.0.1:%d" % port_b,
                                                   "dest-queue": "ww.dst"}, port_b, "/", "ww.dst")
            results["warren->warren"].append(N / took)
            delete_queue(a.port, "/", "ww.src"), delete_queue(port_b, "/", "ww.dst")
            fill(RABBIT_PORT, "/", "rw.src")
            took = timed(a.mgmt_port, "/", "rw", {"src-uri": rabbit, "src-queue": "rw.src", "dest-uri": "amqp://",
                                                   "dest-queue": "rw.dst"}, a.port, "/", "rw.dst")
            results["rabbitmq->warren"].append(N / took)
            delete_queue(RABBIT_PORT, "/", "rw.src"), delete_queue(a.port, "/", "rw.dst")
            fill(RABBIT_PORT, "/", "rr.src")
            took = timed(RABBIT_MGMT, "/", "rr", {"src-uri": "amqp://", "src-queue": "rr.src",
                                                  "dest-uri": "amqp:///bench-b", "dest-queue": "rr.dst"},
                         RABBIT_PORT, "bench-b", "rr.dst")
            results["rabbitmq->rabbitmq"].append(N / took)
            delete_queue(RABBIT_PORT, "/", "rr.src"), delete_queue(RABBIT_PORT, "bench-b", "rr.dst")
            print("round %d: %s" % (r + 1, "  ".join("%s %.0f msg/s" % (k, v[-1]) for k, v in results.items())),
                  flush=True)
    finally:
        a.stop()
        b.stop()
    med = {k: statistics.median(v) for k, v in results.items()}
    ref = med["rabbitmq->rabbitmq"]
    print()
    print("%-20s %12s %8s" % ("path", "msg/s (median)", "vs RabbitMQ's shovel"))
    for k, v in med.items():
        print("%-20s %12.0f %8.2fx" % (k, v, v / ref))
    ok = med["warren->warren"] >= 3 * ref and med["rabbitmq->warren"] >= 3 * ref
    print("target >= 3x RabbitMQ's own shovel: %s" % ("met" if ok else "NOT met"))
    return 0


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


if __name__ == "__main__":
    sys.exit(main())
