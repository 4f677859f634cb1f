#!/usr/bin/env bash
# cluster.sh -- issue 21's figures: a 3-node Warren cluster on etcd (min_isr
# 2) against a 3-node RabbitMQ cluster with one quorum queue, each in three
# network namespaces of its own, measured alternately in one run by
# tests/bench/cluster_bench.py (its docstring says what and how):
# throughput of persistent 1 KiB messages with confirms, latency at 1,000
# msg/s (publish -> deliver and publish -> confirm), node CPU and fsyncs,
# and replication bytes per message per follower for 16 B, 1 KiB, 64 KiB.
#
#   sudo tests/bench/cluster.sh [cluster_bench.py options]
#                                  (writes tests/bench/last-cluster.txt;
#                                   about 6 to 7 minutes with the defaults)
#
# Env: BENCH_OUT (tests/bench/last-cluster.txt). Needs root, etcd-server,
# rabbitmq-server, iproute2, python3-pika; perf (linux-perf) for the sync
# counts, skipped without it. Everything it starts (namespaces, bridges,
# etcd, Warren, RabbitMQ and its data dirs) is gone when it ends.
set -eu
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "cluster.sh: run as root (namespaces, RabbitMQ as its user)" >&2; exit 1; }
nice -n 19 make -s -j1 VARIANT=release build/release/warren build/release/warren-perf
OUT=${BENCH_OUT:-tests/bench/last-cluster.txt}
exec > >(tee "$OUT") 2>&1
echo "# tests/bench/cluster.sh $* ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ":!$OUT" || echo "+changes")," \
     "$(nproc) cores, $(free -g | awk '/^Mem/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg) at the start;" \
     "every node, etcd member, RabbitMQ node and the client share these cores; data dirs on $(df --output=fstype /tmp | tail -1) /tmp)"
/usr/bin/python3 tests/bench/cluster_bench.py "$@"
