#!/usr/bin/env bash
# federation.sh -- queue federation throughput: RabbitMQ -> Warren and
# Warren -> Warren (Warren as the downstream) against RabbitMQ's own
# federation between two vhosts of one RabbitMQ 3.10, persistent 1 KiB
# messages, on-confirm (federation_bench.py says how it is timed). Starts
# its own RabbitMQ (node fd1, AMQP on 5771, management on 15771,
# rabbitmq_federation; root, as rabbit.sh needs) and two Warrens, and
# writes the figures to tests/bench/last-federation.txt.
#
# Env: N=20000 SIZE=1024 ROUNDS=3, PERF, WARREN_BIN (as shovel_bench.py).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/rabbit.sh
OUT=tests/bench/last-federation.txt
export N=${N:-20000} PERF=${PERF:-build/release/warren-perf} WARREN_BIN=${WARREN_BIN:-$PWD/build/release/warren}
[ -x "$PERF" ] && [ -x "$WARREN_BIN" ] ||
    { echo "federation.sh: build $PERF and $WARREN_BIN first (make bench builds both)" >&2; exit 1; }
trap stop_rabbit EXIT
start_rabbit fd1 5771 "management.tcp.port = 15771" "" "rabbitmq_federation,rabbitmq_management"
{
    echo "# tests/bench/federation.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores;" \
         "RabbitMQ $(rabbitmqctl -q -n fd1@localhost version 2>/dev/null)"
    RABBIT_PORT=5771 RABBIT_MGMT=15771 /usr/bin/python3 tests/bench/federation_bench.py
} 2>&1 | tee "$OUT.tmp"
status=${PIPESTATUS[0]}
mv "$OUT.tmp" "$OUT"
exit "$status"
