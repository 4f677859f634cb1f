#!/usr/bin/env bash
# regex.sh -- catastrophic policy patterns against AMQP latency (issue 17,
# item 1; tests/bench/regex_bench.py): 300 queues named 'a'*230 + 'b%05d' in
# a vhost, the patterns "(a+)+$", "(a|aa)+$", "(.*a){12}$" PUT as a policy
# one after another, each followed by a marker policy every queue matches
# and a wait until every queue shows it, then a matching pattern; meanwhile
# a client on another vhost does an AMQP round trip every 5 ms (and, first,
# for 3 s with no policy change, as a control). Prints each PUT's time,
# each round's time until applied, and the round trips' median, p99 and
# max (target: max < 50 ms); saved to OUT.
#
# Env: WARREN_BIN (default build/release/warren, built if missing: point it
# at another build for a before/after), QUEUES=300, PROBE_MS=5,
# PUT_TIMEOUT=600, OUT=tests/bench/last-regex.txt
set -eu
cd "$(dirname "$0")/../.."
if [ -z "${WARREN_BIN:-}" ]; then
    make -s -j2 VARIANT=release build/release/warren
fi
OUT=${OUT:-tests/bench/last-regex.txt}
{
    echo "# $(date '+%Y-%m-%d %H:%M') $(git rev-parse --short HEAD)," \
         "WARREN_BIN=${WARREN_BIN:-build/release/warren}, load $(cut -d' ' -f1-3 /proc/loadavg)"
    /usr/bin/python3 tests/bench/regex_bench.py
} | tee "$OUT"
