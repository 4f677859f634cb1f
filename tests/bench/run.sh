#!/usr/bin/env bash
# run.sh -- `make bench`: Warren against RabbitMQ on a fixed scenario set.
#
# Starts Warren (build/release/warren) on an ephemeral port in a temp data
# dir, finds RabbitMQ on 127.0.0.1:5672 (its column is "n/a" if absent), and
# runs every scenario on both brokers INTERLEAVED, round after round (odd
# rounds Warren first, even rounds RabbitMQ first), taking the median of each
# figure. This machine is small and noisy: only ratios from one run count.
# Prints `scenario | Warren | RabbitMQ | ratio | target` and saves it, with the
# raw RESULT lines, to tests/bench/last-run.txt.
#
# Environment:
#   ROUNDS=3 DURATION=4 WARMUP=1    rounds; measured / warm-up seconds per run
#   WARREN_URI=amqp://...           use a broker already running instead of
#                                   starting Warren (e.g. RabbitMQ, to validate
#                                   the tool); WARREN_PID=pid for its memory/CPU
#   RABBIT_URI=amqp://guest:guest@127.0.0.1:5672   RABBIT_PID=pid (beam.smp)
#   IDLE_CONNECTIONS=N              memory scenario size (default: 1000, less
#                                   if RabbitMQ's open-files limit is lower)
#   SELFTEST=0                      skip the tool-ceiling self-test
#   SCENARIOS=backlog,restart       (either or both) run the durability issue's
#                                   long benchmarks instead: durability.sh, which
#                                   takes N=2000000 (N=200000 for a quick run)
#   SCENARIOS=poison                a poison message's cost with and without
#                                   delayed retry instead: poison.sh
#   SCENARIOS=cluster               3-node Warren cluster vs 3-node RabbitMQ
#                                   with a quorum queue, in namespaces (root):
#                                   cluster.sh, ~7 min
#   SCENARIOS=instr                 the message scenarios by instructions per
#                                   message under callgrind (this build, and
#                                   BASE_BIN if set): instr.py, ~15 min
#   BASE_BIN=path/to/warren         before/after instead of RabbitMQ: the
#                                   second column is this other Warren build
#                                   (fresh each round too), the ratio this/base
#                                   to 3 decimals, the target >= 0.97 (within
#                                   3%); saved to tests/bench/last-ab.txt
set -u
cd "$(dirname "$0")/../.." || exit 1
case ${SCENARIOS:-} in *backlog*|*restart*) exec tests/bench/durability.sh ;; esac
case ${SCENARIOS:-} in *permissions*) exec tests/bench/permissions.sh ;; esac
case ${SCENARIOS:-} in *poison*) exec tests/bench/poison.sh ;; esac
case ${SCENARIOS:-} in *cluster*) exec tests/bench/cluster.sh ;; esac
case ${SCENARIOS:-} in *instr*) exec /usr/bin/python3 tests/bench/instr.py ;; esac

PERF=${PERF:-build/release/warren-perf}
WARREN_BIN=${WARREN_BIN:-build/release/warren}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-4}
WARMUP=${WARMUP:-1}
RABBIT_URI=${RABBIT_URI:-amqp://guest:guest@127.0.0.1:5672}
OUT=tests/bench/last-run.txt
BASE_BIN=${BASE_BIN:-}
if [ -n "$BASE_BIN" ]; then OUT=tests/bench/last-ab.txt; fi
RAW=$(mktemp /tmp/warren-bench-raw.XXXXXX)
WORK=$(mktemp -d /tmp/warren-bench.XXXXXX)
LOGS=${BENCH_LOGS:-/tmp/warren-bench-logs}   # every run's full output, kept
RUN_TIMEOUT=300     # seconds; warren-perf has its own watchdog, this is a backstop
SETTLE=1            # seconds between runs, so one broker's GC does not hit the next

# The idle-connection scenario and Warren's own sockets need descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 65536 2>/dev/null || true

[ -x "$PERF" ] || { echo "run.sh: $PERF missing; run 'make bench'" >&2; exit 1; }
rm -rf "$LOGS" && mkdir -p "$LOGS"

# stop_instance PREFIX: stops the broker start_instance started as PREFIX.
stop_instance() {
    local pidvar=${1}_STARTED_PID
    local pid=${!pidvar}
    [ -z "$pid" ] && return
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    printf -v "$pidvar" '%s' ""
}
WARREN_STARTED_PID=""
RABBIT_STARTED_PID=""
stop_warren() { stop_instance WARREN; }
start_warren() { start_instance WARREN "$WARREN_BIN"; }
cleanup() {
    stop_instance WARREN
    stop_instance RABBIT
    rm -rf "$WORK" "$RAW"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_instance PREFIX BIN: starts Warren (BIN) on port 0 in a fresh data
# dir and parses "... AMQP listening on 127.0.0.1:PORT" from its stderr
# ($WORK/PREFIX.log). Sets PREFIX_URI, PREFIX_PID and PREFIX_STARTED_PID, or
# leaves the first two empty. Restarted each round: a heap that earlier
# scenarios grew would hide the memory new connections take.
start_instance() {
    local prefix=$1 bin=$2 data=$WORK/$1-data log=$WORK/$1.log
    printf -v "${prefix}_URI" '%s' ""
    printf -v "${prefix}_PID" '%s' ""
    if [ ! -x "$bin" ]; then
        echo "run.sh: $bin not built; its column is n/a" >&2
        return
    fi
    rm -rf "$data"
    mkdir -p "$data"
    "$bin" --set listeners.tcp.default=127.0.0.1:0 \
        --set stream.listeners.tcp.default=127.0.0.1:0 --set data_dir="$data" >"$WORK/$prefix.out" 2>"$log" &
    local pid=$!
    printf -v "${prefix}_STARTED_PID" '%s' "$pid"
    local port=""
    for _ in $(seq 1 100); do
        port=$(sed -n 's/.*AMQP listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$log" | head -n 1)
        [ -n "$port" ] && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ -z "$port" ]; then
        echo "run.sh: $bin did not report 'AMQP listening on 127.0.0.1:PORT'; log:" >&2
        tail -n 20 "$log" >&2
        return
    fi
    printf -v "${prefix}_URI" '%s' "amqp://guest:guest@127.0.0.1:$port"
    printf -v "${prefix}_PID" '%s' "$pid"
}

broker_up() { timeout 30 "$PERF" --uri "$1" --check >/dev/null 2>&1; }

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null; }

# Waits (at most 15 s) until the broker's RSS holds within 1% for a second,
# so garbage from the previous run does not count as connection memory.
settle_rss() {
    local prev cur
    prev=$(rss_kb "$1")
    for _ in $(seq 1 15); do
        sleep 1
        cur=$(rss_kb "$1")
        [ -z "$cur" ] && return
        awk -v a="$prev" -v b="$cur" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d * 100 <= b) }' && return
        prev=$cur
    done
}

median3() { # median of the RSS read 3 times, 0.5 s apart
    local pid=$1
    for _ in 1 2 3; do rss_kb "$pid"; sleep 0.5; done | sort -n | sed -n 2p
}

# Memory per idle connection with one open channel: (RSS while N are held -
# RSS before) / N, in KB. Prints "RESULT mode=idle kb_per_conn=..." lines.
run_idle() {
    local uri=$1 pid=$2 n=$3 out=$WORK/idle.out
    if [ -z "$pid" ] || [ ! -r "/proc/$pid/status" ]; then
        echo "RESULT mode=idle errors=1 error=no-broker-pid"
        return
    fi
    settle_rss "$pid"
    local before during after
    before=$(rss_kb "$pid")
    timeout "$RUN_TIMEOUT" "$PERF" --uri "$uri" --idle-connections "$n" --duration 6 >"$out" 2>&1 &
    local tool=$!
    for _ in $(seq 1 600); do
        grep -q '^READY' "$out" && break
        kill -0 "$tool" 2>/dev/null || break
        sleep 0.2
    done
    if ! grep -q '^READY' "$out"; then
        wait "$tool"
        cat "$out"
        echo "RESULT mode=idle errors=1 error=not-ready"
        return
    fi
    sleep 2
    during=$(median3 "$pid")
    wait "$tool"
    sleep 2
    after=$(median3 "$pid")
    grep -v '^RESULT' "$out"
    # Both deltas can only understate: a GC that frees old garbage while the
    # connections are held lowers during-before; memory a runtime keeps after
    # the close lowers during-after. Take the larger.
    awk -v b="$before" -v d="$during" -v a="$after" -v n="$n" 'BEGIN {
        x = d - b; if (d - a > x) x = d - a
        printf "RESULT mode=idle connections=%d rss_before_kb=%d rss_during_kb=%d rss_after_kb=%d kb_per_conn=%.2f errors=0\n",
               n, b, d, a, x / n }'
}

# ---- scenarios ---------------------------------------------------------
# id|label|warren-perf args|RESULT key|better (hi/lo)|target ratio
# (9 is the durability issue's: Warren syncs before confirming)
COMMON="--size 16 --duration $DURATION --warmup $WARMUP --quiet"
SCENARIOS=(
"1|1p-1q-1c 16B autoack, batch 16 (msg/s)|--batch 16 --inflight 5000|recv_rate|hi|10"
"2|same, batch 1 (msg/s)|--batch 1 --inflight 5000|recv_rate|hi|6"
"3|manual ack, prefetch 100 (msg/s)|--batch 16 --inflight 5000 --ack manual --prefetch 100|recv_rate|hi|5"
"4|4p-4q-4c (msg/s)|--batch 16 --inflight 10000 --producers 4 --consumers 4 --queues 4|recv_rate|hi|6"
"5|fanout to 10 queues (deliveries/s)|--batch 16 --inflight 1000 --fanout-queues 10|recv_rate|hi|8"
"6|topic, 10k bindings * and # (msg/s)|--batch 16 --inflight 5000 --exchange-type topic --bindings 10000|recv_rate|hi|30"
"6b|topic binding declaration (binds/s)|--declare-bindings 10000|bind_rate|hi|10"
"7|fixed 1000 msg/s: p99 latency (us)|--batch 1 --rate 1000 --inflight 5000 --duration 10|p99_us|lo|5"
"8|memory per idle connection+channel (KB)|IDLE|kb_per_conn|lo|10"
"9|persistent 1 KiB, durable queue, confirm 100, manual ack (msg/s)|--size 1024 --persistent --confirm 100 --ack manual --prefetch 100 --inflight 5000|recv_rate|hi|6"
)

# run_one BROKER URI PID SCENARIO-ARGS: runs one measurement, appends its
# RESULT line (tagged) to $RAW and prints the figure's line.
run_one() {
    local broker=$1 uri=$2 pid=$3 id=$4 args=$5 round=$6 out=$WORK/run.out
    if [ "$args" = IDLE ]; then
        run_idle "$uri" "$pid" "$IDLE_N" >"$out" 2>&1
    else
        local pidarg=""
        [ -n "$pid" ] && pidarg="--broker-pid $pid"
        # shellcheck disable=SC2086
        timeout "$RUN_TIMEOUT" "$PERF" --uri "$uri" $COMMON $args $pidarg >"$out" 2>&1
    fi
    cp "$out" "$LOGS/round$round-scenario$id-$broker.txt"
    local line
    line=$(grep '^RESULT' "$out" | tail -n 1)
    [ -z "$line" ] && line="RESULT errors=1 error=no-result"
    echo "round=$round scenario=$id broker=$broker $line" >>"$RAW"
    if ! echo "$line" | grep -q 'errors=0'; then
        echo "    $broker: FAILED" >&2
        grep -v '^RESULT' "$out" | tail -n 5 | sed 's/^/      /' >&2
    fi
    grep -h '^WARNING: stalled' "$out" | sed "s/^/    $broker: /" >&2
    sleep "$SETTLE"
}

# field SCENARIO BROKER KEY: the median over rounds of KEY (runs with errors
# left out), with '*' if any run was tool-limited; "err" if none succeeded.
field() {
    grep " scenario=$1 broker=$2 " "$RAW" | awk -v key="$3" '
        { ok = 0; v = ""; lim = 0
          for (i = 1; i <= NF; i++) {
              split($i, kv, "=")
              if (kv[1] == "errors" && kv[2] == "0") ok = 1
              if (kv[1] == key) v = kv[2]
              if (kv[1] == "tool_limited" && kv[2] == "1") lim = 1
          }
          if (ok && v != "") { vals[n++] = v + 0; if (lim) anylim = 1 }
          runs++ }
        END {
          if (runs == 0) { print "n/a"; exit }
          if (n == 0) { print "err"; exit }
          for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (vals[j] < vals[i]) { t = vals[i]; vals[i] = vals[j]; vals[j] = t }
          m = (n % 2) ? vals[(n - 1) / 2] : (vals[n / 2 - 1] + vals[n / 2]) / 2
          printf "%s%s\n", m, anylim ? "*" : "" }'
}

fmt() { # pretty value: integers with thousands separators, one decimal below 100
    case $1 in n/a|err) echo "$1"; return ;; esac
    local star=""; [ "${1%\*}" != "$1" ] && star="*"
    awk -v v="${1%\*}" -v s="$star" 'BEGIN {
        if (v < 100) { printf "%.1f%s\n", v, s; exit }
        x = sprintf("%.0f", v); out = ""
        while (length(x) > 3) { out = "," substr(x, length(x) - 2) out; x = substr(x, 1, length(x) - 3) }
        printf "%s%s%s\n", x, out, s }'
}

ratio() { # ratio W/R (hi) or R/W (lo), and whether it meets the target
    local w=${1%\*} r=${2%\*} better=$3 target=$4 digits=1
    [ -n "$BASE_BIN" ] && target=0.97 digits=3
    case "$w$r" in *n/a*|*err*) echo "-|≥${target}x"; return ;; esac
    awk -v w="$w" -v r="$r" -v b="$better" -v t="$target" -v d="$digits" 'BEGIN {
        if (b == "hi") x = (r > 0) ? w / r : 1e9; else x = (w > 0) ? r / w : 1e9
        printf (x >= 1e9) ? "inf|" : "%." d "fx|", x
        printf "≥%sx %s\n", t, (x >= t) ? "met" : "MISSED" }'
}

# ---- main ----------------------------------------------------------------
WARREN_URI=${WARREN_URI:-}
WARREN_PID=${WARREN_PID:-}
if [ -z "$WARREN_URI" ]; then
    start_warren
else
    echo "run.sh: Warren column uses WARREN_URI=$WARREN_URI (not starting Warren)"
fi
if [ -n "$WARREN_URI" ] && ! broker_up "$WARREN_URI"; then
    echo "run.sh: no AMQP login at $WARREN_URI; Warren column is n/a" >&2
    WARREN_URI=""
fi
if [ -n "$BASE_BIN" ]; then
    start_instance RABBIT "$BASE_BIN"
    [ -z "$RABBIT_URI" ] && RABBIT_URI=none
fi
RABBIT_PID=${RABBIT_PID:-$(pgrep -x beam.smp | head -n 1)}
if ! broker_up "$RABBIT_URI"; then
    echo "run.sh: RabbitMQ not reachable at $RABBIT_URI; its column is n/a" >&2
    RABBIT_URI=""
fi

# RabbitMQ refuses sockets near its open-files limit (1024 here by default):
# hold at most 80% of it so both brokers are measured with the same N.
IDLE_N=${IDLE_CONNECTIONS:-1000}
if [ -z "${IDLE_CONNECTIONS:-}" ] && [ -n "$RABBIT_PID" ] && [ -r "/proc/$RABBIT_PID/limits" ]; then
    lim=$(awk '/Max open files/ {print $4}' "/proc/$RABBIT_PID/limits")
    if [ -n "$lim" ] && [ "$lim" -lt 1250 ]; then IDLE_N=$(( lim * 8 / 10 / 100 * 100 )); fi
fi

BROKERS=()
[ -n "$WARREN_URI" ] && BROKERS+=(warren)
[ -n "$RABBIT_URI" ] && BROKERS+=(rabbitmq)
[ ${#BROKERS[@]} -eq 0 ] && { echo "run.sh: no broker to measure" >&2; exit 1; }
uri_of() { if [ "$1" = warren ]; then echo "$WARREN_URI"; else echo "$RABBIT_URI"; fi; }
pid_of() { if [ "$1" = warren ]; then echo "$WARREN_PID"; else echo "$RABBIT_PID"; fi; }

START=$(date +%s)
echo "warren-perf bench: ${#SCENARIOS[@]} scenarios x ${#BROKERS[@]} brokers x $ROUNDS rounds," \
     "${WARMUP}+${DURATION} s per run"
echo "  Warren:   ${WARREN_URI:-n/a} (pid ${WARREN_PID:-?})"
echo "  RabbitMQ: ${RABBIT_URI:-n/a} (pid ${RABBIT_PID:-?})"

SELFTEST_LINES=""
if [ "${SELFTEST:-1}" != 0 ]; then
    echo "tool ceiling (self-test, no broker):"
    for b in 1 16; do
        line=$(timeout 120 "$PERF" --selftest --batch "$b" --duration 1.5 --warmup 0.5 --quiet 2>/dev/null | grep '^RESULT')
        SELFTEST_LINES="$SELFTEST_LINES$line"$'\n'
        echo "  $line"
    done
fi

WARREN_CRASHES=0
for round in $(seq 1 "$ROUNDS"); do
    if [ "$round" -gt 1 ] && [ -n "$RABBIT_STARTED_PID" ]; then
        stop_instance RABBIT
        start_instance RABBIT "$BASE_BIN"
    fi
    if [ "$round" -gt 1 ] && [ -n "$WARREN_STARTED_PID" ]; then
        stop_warren
        start_warren
        if [ -z "$WARREN_URI" ]; then
            echo "run.sh: Warren did not restart; stopping here" >&2
            break
        fi
    fi
    order=("${BROKERS[@]}")
    if [ $((round % 2)) -eq 0 ] && [ ${#BROKERS[@]} -eq 2 ]; then order=("${BROKERS[1]}" "${BROKERS[0]}"); fi
    # memory first in each round, while the brokers are quiet
    for s in "${SCENARIOS[8]}" "${SCENARIOS[@]:0:8}" "${SCENARIOS[@]:9}"; do
        IFS='|' read -r id label args key better target <<<"$s"
        echo "round $round/$ROUNDS  scenario $id: $label"
        for b in "${order[@]}"; do
            run_one "$b" "$(uri_of "$b")" "$(pid_of "$b")" "$id" "$args" "$round"
            if [ "$b" = warren ] && [ -n "$WARREN_STARTED_PID" ] &&
                ! kill -0 "$WARREN_STARTED_PID" 2>/dev/null; then
                WARREN_CRASHES=$((WARREN_CRASHES + 1))
                echo "    Warren exited during scenario $id; last log lines:" >&2
                tail -n 5 "$WORK/WARREN.log" | sed 's/^/      /' >&2
                cp "$WORK/WARREN.log" "$LOGS/warren-crash-$WARREN_CRASHES.log"
                wait "$WARREN_STARTED_PID" 2>/dev/null
                WARREN_STARTED_PID=""
                start_warren
            fi
            last=$(grep "^round=$round scenario=$id broker=$b " "$RAW" | tail -n 1)
            v=$(echo "$last" | grep 'errors=0' | grep -o " $key=[0-9.]*" | cut -d= -f2)
            case $last in *tool_limited=1*) [ -n "$v" ] && v="$v*" ;; esac
            echo "    $b: $(fmt "${v:-err}")"
        done
    done
done

# ---- table -----------------------------------------------------------------
A=Warren B=RabbitMQ
[ -n "$BASE_BIN" ] && A="this build" B="base build"
{
    echo "$A vs $B -- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, kernel $(uname -r)"
    echo "medians of $ROUNDS interleaved rounds, ${WARMUP}+${DURATION} s per run, 16-byte transient" \
         "messages unless noted; idle connections: $IDLE_N"
    echo "$A: $WARREN_BIN${WARREN_STARTED_PID:+, started by run.sh, fresh each round}   $B: ${BASE_BIN:-${RABBIT_URI:-n/a}}${RABBIT_STARTED_PID:+, fresh each round}"
    echo
    printf "%-42s | %14s | %14s | %7s | %s\n" scenario "$A" "$B" ratio target
    printf "%-42s-+-%14s-+-%14s-+-%7s-+-%s\n" "$(printf '%.0s-' {1..42})" "$(printf '%.0s-' {1..14})" \
        "$(printf '%.0s-' {1..14})" "-------" "------------"
    for s in "${SCENARIOS[@]}"; do
        IFS='|' read -r id label args key better target <<<"$s"
        w=n/a; r=n/a
        [ -n "$WARREN_URI" ] && w=$(field "$id" warren "$key")
        [ -n "$RABBIT_URI" ] && r=$(field "$id" rabbitmq "$key")
        IFS='|' read -r rat tgt <<<"$(ratio "$w" "$r" "$better" "$target")"
        printf "%-42s | %14s | %14s | %7s | %s\n" "$id. $label" "$(fmt "$w")" "$(fmt "$r")" "$rat" "$tgt"
    done
    echo
    echo "ratio: $A/$B for rates, $B/$A for latency and memory (higher is better)."
    echo "* = warren-perf was the bottleneck in at least one run (a worker thread busy or waiting for a CPU"
    echo "    >90% of the time): the figure is a floor set by the tool on this machine, not the broker's limit."
    [ "$WARREN_CRASHES" -gt 0 ] && echo "Warren exited unexpectedly $WARREN_CRASHES time(s) and was restarted."
    echo "Run time $(( $(date +%s) - START )) s. Full output of every run: $LOGS/"
    echo
    echo "tool ceiling (warren-perf --selftest, in-process socket peers, no broker):"
    printf '%s' "$SELFTEST_LINES" | sed 's/^/  /'
    echo
    echo "raw results:"
    cat "$RAW"
} >"$WORK/table.txt"
cp "$WORK/table.txt" "$OUT"
echo
sed -n '1,/^Run time/p' "$OUT"
echo "saved to $OUT"
