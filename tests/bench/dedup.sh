#!/usr/bin/env bash
# dedup.sh -- what a deduplication exchange costs (issue 22's figure: a dedup
# exchange at 100k msg/s with a 1,000,000-entry cache, per message vs a plain
# exchange). One Warren; tests/bench/dedup_bench.py publishes N messages, each
# with a new x-deduplication-header value, at RATE a second, alternately to a
# plain fanout exchange and to one with x-message-deduplication true and
# x-cache-size SIZE (both bound to a queue keeping its last 10,000), ROUNDS
# times each (and, for contrast, to one whose cache has SMALL entries, which fit
# the CPU caches): broker CPU seconds per million messages (/proc), the rate
# reached, the broker's RSS growth, the cache's bytes (API). Saved to
# tests/bench/last-dedup.txt.
# INSTR=1 counts instead the broker's instructions per message under
# callgrind (deterministic, immune to the machine's noise): per kind, the
# difference of a 3*M- and an M-message run (M=INSTR_N, 50000), divided by
# 2*M; the dedup runs' cache is then below its size (insertions, no
# evictions). Appended to the same file. INSTR_KINDS="plain" with
# WARREN_BIN=<an older build> gives the before of a plain exchange.
#
# Environment: N=2000000 RATE=100000 SIZE=1000000 SMALL=10000 ROUNDS=3 INSTR=0 INSTR_N=50000
#              INSTR_KINDS="plain dedup" WARREN_BIN=build/release/warren
set -u
cd "$(dirname "$0")/../.." || exit 1
WARREN_BIN=${WARREN_BIN:-build/release/warren}
OUT=tests/bench/last-dedup.txt
WORK=$(mktemp -d /tmp/warren-bench-dedup.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM

start_warren() { # [wrapper...]
    rm -rf "$WORK/data"; mkdir -p "$WORK/data"
    "$@" "$WARREN_BIN" --set listeners.tcp.default=127.0.0.1:0 --set "data_dir=$WORK/data" \
        --set stream.listeners.tcp.default=127.0.0.1:0 --set prometheus.tcp.port=0 \
        --set prometheus.tcp.ip=127.0.0.1 --set journal.sync=none --set management.tcp.port=0 \
        --set management.tcp.ip=127.0.0.1 \
        2> "$WORK/warren.log" &
    PID=$!
    PORT=; MPORT=
    for _ in $(seq 600); do
        PORT=$(sed -n 's/.*AMQP listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/warren.log")
        MPORT=$(sed -n 's/.*management listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/warren.log")
        [ -n "$PORT" ] && [ -n "$MPORT" ] && return 0
        sleep 0.1
    done
    echo "dedup.sh: Warren did not start" >&2
    cat "$WORK/warren.log" >&2
    exit 1
}

stop_warren() { kill "$PID"; wait "$PID"; PID=; }

if [ "${INSTR:-0}" = 1 ]; then
    M=${INSTR_N:-50000}
    instr() { # kind count -> total broker instructions
        start_warren "${VALGRIND:-valgrind}" --tool=callgrind --callgrind-out-file="$WORK/cg.out"
        # valgrind's child is the broker: its pid for /proc is valgrind's own
        ONLY=$1 N=$2 ROUNDS=1 RATE=1000000 SIZE=1000000 \
            /usr/bin/python3 tests/bench/dedup_bench.py "$PORT" "$MPORT" "$PID" > /dev/null
        stop_warren
        sed -n 's/^summary: //p' "$WORK/cg.out"
    }
    {
        echo "# INSTR=1 tests/bench/dedup.sh, $(date -u +%Y-%m-%d): broker instructions per message"
        echo "# under callgrind, (run of $((3 * M)) - run of $M) / $((2 * M)), each message a new key"
        for kind in ${INSTR_KINDS:-plain dedup}; do
            small=$(instr "$kind" "$M"); big=$(instr "$kind" $((3 * M)))
            echo "RESULT mode=instr bin=$WARREN_BIN exchange=$kind instr_per_msg=$(( (big - small) / (2 * M) ))"
        done
    } | tee -a "$OUT"
    exit 0
fi

start_warren
{
    echo "# tests/bench/dedup.sh, $(date -u +%Y-%m-%d), $(nproc) cores (shared), $(git rev-parse --short HEAD)"
    N=${N:-2000000} RATE=${RATE:-100000} SIZE=${SIZE:-1000000} ROUNDS=${ROUNDS:-3} \
        /usr/bin/python3 tests/bench/dedup_bench.py "$PORT" "$MPORT" "$PID"
} | tee "$OUT"
stop_warren
