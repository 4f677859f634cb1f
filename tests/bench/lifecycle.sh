#!/usr/bin/env bash
# lifecycle.sh -- the message-lifecycle figures (tests/bench/lifecycle_bench.py):
#
#   tests/bench/lifecycle.sh [limits] [hotpath] [mass] [quorum] [instr]
#     limits   scenarios 1 and 3 with DLX + TTL + max-length + delivery-limit
#              (none firing) against a plain queue; target ratio >= 0.95
#     hotpath  the same scenarios, BASE_BIN (before the expiry work) against
#              this build, plain queues
#     mass     1,000,000 messages expiring at once while another queue flows at
#              1000 msg/s: that flow's p99 (target < 10 ms); BASE_BIN too if set
#     quorum   quorum queues with confirms, Warren against the local RabbitMQ
#     instr    instructions per message under callgrind (scenarios 1, 3; plain
#              and limits queues; BASE_BIN too if set)
#   (none: limits, mass, quorum, and hotpath if BASE_BIN is set)
#
# Writes tests/bench/last-lifecycle.txt. Env: ROUNDS=3 DURATION=4 MASS=1000000
# MASS_ROUNDS=2 BASE_BIN WARREN_BIN PERF
set -eu
cd "$(dirname "$0")/../.."
make -s -j2 VARIANT=release build/release/warren build/release/warren-perf
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
{
    echo "# tests/bench/lifecycle.sh $*  ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD)," \
         "$(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
    /usr/bin/python3 tests/bench/lifecycle_bench.py "$@"
} 2>&1 | tee tests/bench/last-lifecycle.txt
