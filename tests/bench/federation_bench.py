#!/usr/bin/python3
"""Federation throughput (tests/bench/federation.sh starts RabbitMQ and runs this).

A queue link moving N persistent SIZE-byte messages from an upstream queue
to a consumer on the downstream, ack-mode on-confirm, prefetch-count 1000
(the default), in interleaved rounds:
  rabbitmq->warren    Warren federates a RabbitMQ queue over TCP
  warren->warren      Warren A federates Warren B's queue over TCP
  rabbitmq->rabbitmq  RabbitMQ's own federation between two of its vhosts
                      (amqp:// direct connection), the reference
Each run fills the upstream queue first (warren-perf, confirmed), with the
link already running and idle (no local consumer), then times a
warren-perf consumer (prefetch 200, manual acks) on the downstream queue
from its start to its Nth delivery -- the link pulls only while that
consumer wants more. Prints one line per round and the medians, and the
ratios to RabbitMQ's.

Env: N (20000), SIZE (1024), ROUNDS (3), PERF, WARREN_BIN, RABBIT_PORT,
RABBIT_MGMT (as shovel_bench.py, whose helpers it uses).
"""
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import shovel_bench as sb  # noqa: E402  (fill, api, delete_queue, free_port; N, SIZE, PERF)

N, SIZE, ROUNDS = sb.N, sb.SIZE, sb.ROUNDS


def link(mgmt_port, vhost, uri, queue):
    vh = "%2f" if vhost == "/" else vhost
    sb.api(mgmt_port, "PUT", "/api/parameters/federation-upstream/%s/bench" % vh, {"value": {"uri": uri}})
    sb.api(mgmt_port, "PUT", "/api/policies/%s/bench" % vh,
           {"pattern": "^%s$" % queue, "apply-to": "queues", "definition": {"federation-upstream": "bench"}})


def unlink(mgmt_port, vhost):
    vh = "%2f" if vhost == "/" else vhost
    sb.api(mgmt_port, "DELETE", "/api/policies/%s/bench" % vh)
    sb.api(mgmt_port, "DELETE", "/api/parameters/federation-upstream/%s/bench" % vh)


def drained(port, vhost, queue):
    """Seconds a consumer on the downstream queue takes to get N messages."""
    vh = "%2f" if vhost == "/" else vhost
    t0 = time.monotonic()
    out = subprocess.run([sb.PERF, "--uri", "amqp://guest:guest@127.0.0.1:%d/%s" % (port, vh),
                          "--queue", queue, "--drain", "--count", str(N), "--prefetch", "200",
                          "--ack", "manual", "--duration", str(sb.LIMIT_S)],
                         capture_output=True, text=True, timeout=sb.LIMIT_S + 60)
    took = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError("drain failed: %s %s" % (out.stdout[-500:], out.stderr[-500:]))
    return took


def one(fill_port, fill_vhost, down_port, down_mgmt, down_vhost, uri, queue):
    sb.fill(fill_port, fill_vhost, queue)
    sb.count(down_port, down_vhost, queue)  # declares the downstream queue
    link(down_mgmt, down_vhost, uri, queue)
    time.sleep(2)  # the link starts (policies are looked at once a second)
    took = drained(down_port, down_vhost, queue)
    unlink(down_mgmt, down_vhost)
    sb.delete_queue(fill_port, fill_vhost, queue)
    sb.delete_queue(down_port, down_vhost, queue)
    return N / took


def main():
    a, b = sb.harness.WarrenProcess(), sb.harness.WarrenProcess()
    a.start()
    b.start()
    rabbit = "amqp://guest:guest@127.0.0.1:%d" % sb.RABBIT_PORT
    sb.api(sb.RABBIT_MGMT, "PUT", "/api/vhosts/bench-b", {})
    sb.api(sb.RABBIT_MGMT, "PUT", "/api/permissions/bench-b/guest",
           {"configure": ".*", "write": ".*", "read": ".*"})
    results = {"rabbitmq->warren": [], "warren->warren": [], "rabbitmq->rabbitmq": []}
    print("federation bench: N=%d x %d-byte persistent messages, queue link, on-confirm, "
          "prefetch-count 1000, %d rounds" % (N, SIZE, ROUNDS), flush=True)
    try:
        for r in range(ROUNDS):
            results["rabbitmq->warren"].append(
                one(sb.RABBIT_PORT, "/", a.port, a.mgmt_port, "/", rabbit, "rw.q"))
            results["warren->warren"].append(
                one(b.port, "/", a.port, a.mgmt_port, "/", "amqp://guest:guest@127.0.0.1:%d" % b.port, "ww.q"))
            results["rabbitmq->rabbitmq"].append(
                one(sb.RABBIT_PORT, "/", sb.RABBIT_PORT, sb.RABBIT_MGMT, "bench-b", "amqp://", "rr.q"))
            print("round %d: %s" % (r + 1, "  ".join("%s %.0f msg/s" % (k, v[-1]) for k, v in results.items())),
                  flush=True)
    finally:
        a.stop()
        b.stop()
    med = {k: statistics.median(v) for k, v in results.items()}
    ref = med["rabbitmq->rabbitmq"]
    print()
    print("%-20s %14s %s" % ("path", "msg/s (median)", "vs RabbitMQ's federation"))
    for k, v in med.items():
        print("%-20s %14.0f %7.2fx" % (k, v, v / ref))
    return 0


if __name__ == "__main__":
    sys.exit(main())
