#!/usr/bin/env bash
# shovel.sh -- shovel throughput: Warren -> Warren and RabbitMQ -> Warren
# (Warren's shovels) against RabbitMQ's own shovel between two vhosts of one
# RabbitMQ 3.10, persistent 1 KiB messages, on-confirm (shovel_bench.py says
# how it is timed). Starts its own RabbitMQ (node sh2, AMQP on 5763,
# management on 15763, rabbitmq_shovel; root, as rabbit.sh needs) and two
# Warrens, and writes the figures to tests/bench/last-shovel.txt.
#
# Env: N=50000 SIZE=1024 ROUNDS=3, PERF, WARREN_BIN (as shovel_bench.py).
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/rabbit.sh
OUT=tests/bench/last-shovel.txt
export PERF=${PERF:-build/release/warren-perf} WARREN_BIN=${WARREN_BIN:-$PWD/build/release/warren}
[ -x "$PERF" ] && [ -x "$WARREN_BIN" ] ||
    { echo "shovel.sh: build $PERF and $WARREN_BIN first (make bench builds both)" >&2; exit 1; }
trap stop_rabbit EXIT
start_rabbit sh2 5763 "management.tcp.port = 15763" "" "rabbitmq_shovel,rabbitmq_management"
{
    echo "# tests/bench/shovel.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores;" \
         "RabbitMQ $(rabbitmqctl -q -n sh2@localhost version 2>/dev/null)"
    RABBIT_PORT=5763 RABBIT_MGMT=15763 /usr/bin/python3 tests/bench/shovel_bench.py
} 2>&1 | tee "$OUT.tmp"
status=${PIPESTATUS[0]}
mv "$OUT.tmp" "$OUT"
exit "$status"
