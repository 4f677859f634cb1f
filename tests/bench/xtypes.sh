#!/usr/bin/env bash
# xtypes.sh -- what the hash exchange types (x-consistent-hash,
# x-modulus-hash, x-local-random) cost the existing types' hot path: the
# broker's instructions per message under callgrind (deterministic, immune
# to the machine's noise), BASE_BIN (a build from before them) against
# WARREN_BIN, for a direct, a fanout and a topic exchange with one producer
# and one consumer (warren-perf): the difference of a 60,000- and a
# 20,000-message run, so start-up and set-up cancel out. Saved to
# tests/bench/last-xtypes.txt.
#
#   BASE_BIN=/tmp/base/build/release/warren tests/bench/xtypes.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
PERF=${PERF:-build/release/warren-perf}
WARREN_BIN=${WARREN_BIN:-build/release/warren}
BASE_BIN=${BASE_BIN:?BASE_BIN: a Warren built before the hash exchanges}
WORK=$(mktemp -d /tmp/warren-bench-xtypes.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM

# instr BINARY TYPE COUNT -> the broker's total instructions
instr() {
    rm -rf "$WORK/data" && mkdir -p "$WORK/data"
    "${VALGRIND:-valgrind}" --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$1" \
        --set listeners.tcp.default=127.0.0.1:0 --set "data_dir=$WORK/data" \
        --set journal.sync=none 2> "$WORK/warren.log" &
    PID=$!
    PORT=
    for _ in $(seq 300); do
        PORT=$(sed -n 's/.*AMQP listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/warren.log")
        [ -n "$PORT" ] && break
        sleep 0.1
    done
    "$PERF" --uri "amqp://guest:guest@127.0.0.1:$PORT/%2f" --producers 1 --consumers 1 \
        --exchange-type "$2" --count "$3" --quiet > /dev/null 2>&1
    kill "$PID"
    wait "$PID"
    PID=
    sed -n 's/^summary: //p' "$WORK/cg.out"
}

echo "exchange types: broker instructions per message under callgrind"
for type in direct fanout topic; do
    line="RESULT mode=instr type=$type"
    for side in base this; do
        bin=$BASE_BIN
        [ "$side" = this ] && bin=$WARREN_BIN
        small=$(instr "$bin" "$type" 20000)
        big=$(instr "$bin" "$type" 60000)
        line="$line $side=$(( (big - small) / 40000 ))"
    done
    echo "$line" | tee -a "$WORK/raw"
done
{ echo "# tests/bench/xtypes.sh, $(date -u +%Y-%m-%dT%H:%MZ): broker instructions per message," \
       "base $BASE_BIN vs this $WARREN_BIN"
  cat "$WORK/raw"; } > tests/bench/last-xtypes.txt
