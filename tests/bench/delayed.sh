#!/usr/bin/env bash
# delayed.sh -- N delayed messages with delays spread uniformly over SPREAD_MS
# (tests/bench/delayed_perf.c says how they are sent and timed): Warren's
# x-delayed-message exchange, persistent messages into a durable exchange
# and queue, with a graceful restart of the broker in the middle of the
# spread (nothing may be lost); then RabbitMQ 3.10 with the emulation its
# users build without the plugin (Debian packages no
# rabbitmq-delayed-message-exchange): per-message TTL (expiration) in one
# durable queue per delay step (LEVELS of them), dead-lettered into the
# target queue. Prints the publish rate (confirms, 1000 in flight), the
# broker's RSS after publishing and at its peak, the lateness of deliveries
# (arrival - deadline, p50/p99/max) and what was lost, and saves it to
# tests/bench/last-delayed.txt. The target: p99 lateness under 50 ms.
#
# Env: N=1000000 SPREAD_MS=600000 LEVELS=600 SIZE=100 RABBIT=1 (0: Warren only)
#      WARREN_BIN NODE=dl PORT=5741 (RabbitMQ's node and port)
# Run as root (RabbitMQ runs as its user). A shorter SPREAD_MS compresses the
# run: the same messages in less time, so more due per second.
set -eu
cd "$(dirname "$0")/../.."
N=${N:-1000000} SPREAD_MS=${SPREAD_MS:-600000} LEVELS=${LEVELS:-600} SIZE=${SIZE:-100}
RABBIT=${RABBIT:-1} NODE=${NODE:-dl} PORT=${PORT:-5741}
nice -n 19 make -s -j1 VARIANT=release build/release/warren build/release/delayed-perf
BIN=${WARREN_BIN:-build/release/warren}
PERF=build/release/delayed-perf
. tests/bench/rabbit.sh
TMP=$(mktemp -d /tmp/delayed-bench.XXXXXX)
trap bench_cleanup EXIT
IDLE_S=$((SPREAD_MS / 1000 + 60))

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# Samples the RSS of the pid in $TMP/pid every 0.5 s into $TMP/peak.
sample_peak() {
    echo 0 > "$TMP/peak"
    while [ -f "$TMP/sampling" ]; do
        local r; r=$(rss_kb "$(cat "$TMP/pid" 2>/dev/null || echo 0)")
        [ "${r:-0}" -gt "$(cat "$TMP/peak")" ] && echo "$r" > "$TMP/peak"
        sleep 0.5
    done
}

start_warren() {
    : > "$TMP/warren.log"
    "$BIN" --set listeners.tcp.default=127.0.0.1:$WPORT --set data_dir="$TMP/data" \
        --set stream.listeners.tcp.default=127.0.0.1:0 --set management.tcp.port=0 \
        --set management.tcp.ip=127.0.0.1 --set prometheus.tcp.port=0 --set prometheus.tcp.ip=127.0.0.1 \
        2> "$TMP/warren.log" &
    WPID=$!
    echo $WPID > "$TMP/pid"
    for _ in $(seq 600); do
        grep -q "AMQP listening" "$TMP/warren.log" && return 0
        sleep 0.1
    done
    echo "Warren did not start"; cat "$TMP/warren.log"; exit 1
}

run_warren() {
    WPORT=$(free_port)
    mkdir -p "$TMP/data"
    start_warren
    $PERF setup 127.0.0.1 $WPORT exchange $SPREAD_MS $LEVELS
    touch "$TMP/sampling"; sample_peak & SAMPLER=$!
    $PERF consume 127.0.0.1 $WPORT $N $IDLE_S "$TMP/window" > "$TMP/consume.out" &
    CONSUMER=$!
    local t0; t0=$(date +%s%N)
    $PERF publish 127.0.0.1 $WPORT exchange $N $SPREAD_MS $LEVELS $SIZE
    echo "RSS after publishing: $(( $(rss_kb $WPID) / 1024 )) MiB"
    # the restart: half way through the spread (or now, if publishing took longer)
    local half=$(( t0 / 1000000 + SPREAD_MS / 2 )) now; now=$(( $(date +%s%N) / 1000000 ))
    [ $half -gt $now ] && sleep "$(awk "BEGIN {print ($half - $now) / 1000}")"
    local t1; t1=$(date +%s%N)
    kill -TERM $WPID; wait $WPID || true
    start_warren
    echo "$(( t1 / 1000000 )) $(( $(date +%s%N) / 1000000 ))" > "$TMP/window"
    echo "restart (SIGTERM, start, journal replay) in the middle: $(( ($(date +%s%N) - t1) / 1000000 )) ms;" \
         "$(grep -o 'journal: [0-9]* messages restored' "$TMP/warren.log" | head -1)"
    wait $CONSUMER || true
    rm -f "$TMP/sampling"; wait $SAMPLER || true
    cat "$TMP/consume.out"
    echo "peak RSS: $(( $(cat "$TMP/peak") / 1024 )) MiB"
    kill -TERM $WPID; wait $WPID || true
    WPID=
}

run_rabbit() {
    start_rabbit "$NODE" "$PORT" "" "" ""
    echo "$RABBIT_PID" > "$TMP/pid"
    $PERF setup 127.0.0.1 $PORT ttl $SPREAD_MS $LEVELS
    touch "$TMP/sampling"; sample_peak & SAMPLER=$!
    $PERF consume 127.0.0.1 $PORT $N $IDLE_S > "$TMP/consume.out" &
    CONSUMER=$!
    $PERF publish 127.0.0.1 $PORT ttl $N $SPREAD_MS $LEVELS $SIZE
    echo "RSS after publishing: $(( $(rss_kb $RABBIT_PID) / 1024 )) MiB"
    wait $CONSUMER || true
    rm -f "$TMP/sampling"; wait $SAMPLER || true
    cat "$TMP/consume.out"
    echo "peak RSS: $(( $(cat "$TMP/peak") / 1024 )) MiB"
    stop_rabbit
}

exec > >(tee tests/bench/last-delayed.txt) 2>&1
{
    echo "# $(date -u '+%Y-%m-%d %H:%M') $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)," \
         "$(nproc) cores"
    echo "# N=$N SPREAD_MS=$SPREAD_MS LEVELS=$LEVELS SIZE=$SIZE (persistent, confirms)"
    echo "## Warren: x-delayed-message exchange, a graceful restart half way through the spread"
    run_warren
    if [ "$RABBIT" = 1 ]; then
        echo "## RabbitMQ $(rabbitmqctl version 2>/dev/null || echo 3.10): per-message TTL + DLX," \
             "$LEVELS delay steps of $(( (SPREAD_MS + LEVELS - 1) / LEVELS )) ms (no plugin package in Debian)"
        run_rabbit
    fi
}
