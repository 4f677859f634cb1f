#!/usr/bin/env bash
# mgmt.sh -- the management plane's figures (tests/bench/mgmt_bench.py):
#
#   tests/bench/mgmt.sh timing   10,000 queues: paged, full and overview
#                                request times, Warren and RabbitMQ (RABBIT=0
#                                skips RabbitMQ; it gets a vhost of its own,
#                                deleted after)
#   tests/bench/mgmt.sh p99      10,000 queues: a fixed 1000 msg/s flow's p99
#                                alone and while a client loops big requests
#                                (OFFLOOP=compare: against the off-loop
#                                prototype, built from commit cad85fd)
#   tests/bench/mgmt.sh ab       scenarios 1, 3, 9: BASE_BIN (a build without
#                                management) vs this build polled every second
#   tests/bench/mgmt.sh instr    scenarios 1, 3: broker instructions per message
#                                under callgrind, BASE_BIN vs this build
#   tests/bench/mgmt.sh console  scenarios 1, 9: nothing watching, chromium on a
#                                blank page (the control), chromium holding the
#                                console open on the overview (DURATION=20)
#   tests/bench/mgmt.sh all      the three in turn (ab only if BASE_BIN is set)
#   tests/bench/mgmt.sh prometheus  10,000 queues: /metrics and
#                                /metrics/per-object times, Warren and RabbitMQ
#                                (a vhost of its own, deleted after), and the
#                                1000 msg/s p99 while /metrics is looped
#   tests/bench/mgmt.sh starve   10,000 queues: a confirming publisher's p99 alone
#                                and while 20 clients loop the full /api/queues
#   tests/bench/mgmt.sh hostile  costly list regexes beside AMQP round trips;
#                                RSS added by 12 unauthenticated 30 MB bodies
#   tests/bench/mgmt.sh all      all of them (ab and instr only if BASE_BIN is set)
#
# Env: QUEUES=10000 ROUNDS=3 DURATION=4 WARREN_BIN PERF BASE_BIN RABBIT=1
set -eu
cd "$(dirname "$0")/../.."
make -s -j2 VARIANT=release build/release/warren build/release/warren-perf
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
what=${1:-all}
run() { /usr/bin/python3 tests/bench/mgmt_bench.py "$1"; }
case $what in
    all) run timing; run p99; run prometheus; if [ -n "${BASE_BIN:-}" ]; then run ab; run instr; fi ;;
    *) run "$what" ;;
esac
