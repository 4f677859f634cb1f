#!/usr/bin/env bash
# poison.sh -- a poison message's cost to the good messages behind it
# (tests/bench/poison_bench.py says how): 10,000 good messages at a fixed
# rate past a message nacked with requeue every time, with delayed retry
# (x-delayed-retry-type all, 100 ms..2 s, x-delivery-limit 50), without it
# (spinning 50 times, or for ever), and with no poison message. Prints
# p50 / p99 / max per setup and round and saves it to
# tests/bench/last-poison.txt. The target: p99 under 5 ms with delayed retry.
#
# Env: MESSAGES=10000 RATE=1000 ROUNDS=2 WARREN_BIN
set -eu
cd "$(dirname "$0")/../.."
make -s -j2 VARIANT=release build/release/warren
{ echo "# $(date -u '+%Y-%m-%d %H:%M') $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/python3 tests/bench/poison_bench.py; } 2>&1 | tee tests/bench/last-poison.txt
