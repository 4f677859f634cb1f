#!/usr/bin/env bash
# durability.sh -- the durability issue's two long benchmarks (minutes, not
# part of the default `make bench`; `make bench SCENARIOS=backlog,restart`
# or run this script directly).
#
#   backlog  N persistent 1 KiB messages published with confirms (window
#            CONFIRM) to one durable queue nobody consumes, so every confirm
#            means "on disk"; then one consumer drains it (manual ack, multiple
#            every PREFETCH/2, prefetch PREFETCH). Reports the publish rate,
#            the drain rate and the broker's peak RSS, on Warren and, when it
#            answers, on RabbitMQ (whose queue is deleted afterwards). Warren
#            is started fresh, so its VmHWM is this run's peak; beam.smp's
#            VmHWM covers its whole life, so RabbitMQ's peak is the largest
#            VmRSS sampled every 100 ms during the run.
#   restart  Warren only: N persistent messages in one durable queue (then
#            spread over SPREAD_QUEUES), then SIGKILL, restart, and SIGTERM,
#            restart. Each restart is timed from the broker's process start
#            until a login succeeds and the queues' message counts (passive
#            queue.declare) sum to what was confirmed. The SIGTERM restart
#            follows the recovered broker of the SIGKILL one.
#
# Warren runs on 127.0.0.1 in data dirs under /tmp, removed at the end; a
# restart reuses its port. Prints `scenario | Warren | RabbitMQ | ratio |
# limit` and saves it, with the raw RESULT lines, to
# tests/bench/last-durability.txt.
#
# Environment:
#   N=2000000 SIZE=1024            messages and body bytes (N=200000: quick run)
#   SCENARIOS="backlog restart"    which parts (commas or spaces)
#   CONFIRM=500 PREFETCH=1000      confirm window; consumer prefetch
#   SPREAD_QUEUES=1000             queues of the restart part's second variant
#   RSS_LIMIT_MIB=300 CLEAN_LIMIT_S=10 KILL_LIMIT_S=30    the issue's limits
#   PERF, WARREN_BIN, RABBIT_URI, RABBIT_PID   as for run.sh
#   STEP_LIMIT=seconds             most any publish or drain may take
#                                  (default N/1000, at least 300, at most 3600)
set -u
cd "$(dirname "$0")/../.." || exit 1

PERF=${PERF:-build/release/warren-perf}
WARREN_BIN=${WARREN_BIN:-build/release/warren}
RABBIT_URI=${RABBIT_URI:-amqp://guest:guest@127.0.0.1:5672}
N=${N:-2000000}
SIZE=${SIZE:-1024}
CONFIRM=${CONFIRM:-500}
PREFETCH=${PREFETCH:-1000}
SPREAD_QUEUES=${SPREAD_QUEUES:-1000}
RSS_LIMIT_MIB=${RSS_LIMIT_MIB:-300}
CLEAN_LIMIT_S=${CLEAN_LIMIT_S:-10}
KILL_LIMIT_S=${KILL_LIMIT_S:-30}
RESTART_LIMIT=300   # seconds an await may take; past the limits it is a miss anyway
PARTS=$(echo "${SCENARIOS:-backlog restart}" | tr ',' ' ')
STEP_LIMIT=${STEP_LIMIT:-$(( N / 1000 < 300 ? 300 : (N / 1000 > 3600 ? 3600 : N / 1000) ))}
OUT=tests/bench/last-durability.txt
LOGS=${BENCH_LOGS:-/tmp/warren-durability-logs}   # every step's full output, kept
WORK=$(mktemp -d /tmp/warren-durability.XXXXXX)
RAW=$WORK/raw.txt
NOTES=$WORK/notes.txt
BACKLOG_Q=warren-bench.backlog
RESTART_Q=warren-bench.restart

[ -x "$PERF" ] || { echo "durability.sh: $PERF missing; run 'make bench'" >&2; exit 1; }
case $N$SIZE in *[!0-9]*) echo "durability.sh: N and SIZE are numbers" >&2; exit 1 ;; esac
rm -rf "$LOGS" && mkdir -p "$LOGS"
: >"$RAW"
: >"$NOTES"

W_PID=""        # the Warren this script started, if running
RABBIT_DIRTY=0  # a RabbitMQ queue of ours may exist
stop_warren() { # SIGNAL: stops W_PID (bounded: 60 s, then SIGKILL); sets STOP_MS
    STOP_MS=""
    [ -z "$W_PID" ] && return
    local t0
    t0=$(date +%s%N)
    kill "-$1" "$W_PID" 2>/dev/null
    for _ in $(seq 1 6000); do kill -0 "$W_PID" 2>/dev/null || break; sleep 0.01; done
    STOP_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
    if kill -0 "$W_PID" 2>/dev/null; then
        echo "durability.sh: Warren did not stop on SIG$1 within 60 s; killing it" >&2
        kill -9 "$W_PID" 2>/dev/null
        for _ in $(seq 1 500); do kill -0 "$W_PID" 2>/dev/null || break; sleep 0.01; done
    fi
    W_PID=""
}
cleanup() {
    stop_warren KILL
    if [ "$RABBIT_DIRTY" = 1 ]; then
        timeout 60 "$PERF" --uri "$RABBIT_URI" --queue "$BACKLOG_Q" --delete-queues >/dev/null 2>&1
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# start_warren DATA_DIR PORT NAME [wait]: starts Warren (port 0: any) with
# its log in $WORK/NAME.log; sets W_PID. With "wait", waits (at most 60 s)
# for "AMQP listening on 127.0.0.1:PORT" and sets W_PORT; returns 1 if
# Warren did not get there.
start_warren() {
    local data=$1 port=$2 name=$3
    mkdir -p "$data"
    "$WARREN_BIN" --set listeners.tcp.default="127.0.0.1:$port" --set data_dir="$data" \
        >"$WORK/$name.out" 2>"$WORK/$name.log" &
    W_PID=$!
    disown "$W_PID" # no "Killed" job notices; stop_warren polls, bash still reaps it
    [ "${4:-}" = wait ] || return 0
    W_PORT=""
    for _ in $(seq 1 600); do
        W_PORT=$(sed -n 's/.*AMQP listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' \
            "$WORK/$name.log" | head -n 1)
        [ -n "$W_PORT" ] && return 0
        kill -0 "$W_PID" 2>/dev/null || break
        sleep 0.1
    done
    echo "durability.sh: Warren did not report 'AMQP listening on 127.0.0.1:PORT'; log:" >&2
    tail -n 20 "$WORK/$name.log" >&2
    stop_warren KILL
    return 1
}

kv() { # KEY LINE: the value of KEY=... in a RESULT line
    echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1
}

# perf_step BROKER STEP LIMIT ARGS...: runs warren-perf (bounded), keeps its
# output in $LOGS, appends "part=.. broker=.. RESULT ..." to $RAW and sets
# LINE to the RESULT line (errors=1 if none).
perf_step() {
    local broker=$1 step=$2 limit=$3 log=$LOGS/$1-$2.txt
    shift 3
    timeout $(( limit + 120 )) "$PERF" "$@" >"$log" 2>&1
    LINE=$(grep '^RESULT' "$log" | tail -n 1)
    [ -z "$LINE" ] && LINE="RESULT errors=1 error=no-result"
    echo "step=$step broker=$broker $LINE" >>"$RAW"
    if [ "$(kv errors "$LINE")" != 0 ]; then
        echo "    $broker $step: FAILED" >&2
        grep -v '^RESULT' "$log" | grep -v '^  \[' | tail -n 5 | sed 's/^/      /' >&2
    fi
}

record() { echo "$1 $2 $3" >>"$WORK/figures.txt"; } # ROW BROKER VALUE
figure() { awk -v r="$1" -v b="$2" '$1 == r && $2 == b { v = $3 } END { print (v == "" ? "n/a" : v) }' \
    "$WORK/figures.txt" 2>/dev/null; }
note() { echo "$*" | tee -a "$NOTES"; }

mib() { awk -v k="${1:-0}" 'BEGIN { printf "%.1f", k / 1024 }'; }

# ---- pre-flight ----------------------------------------------------------

broker_up() { timeout 30 "$PERF" --uri "$1" --check >/dev/null 2>&1; }
RABBIT_PID=${RABBIT_PID:-$(pgrep -x beam.smp | head -n 1)}
if ! echo "$PARTS" | grep -qw backlog; then
    RABBIT_URI=""   # only the backlog part runs on RabbitMQ
elif ! broker_up "$RABBIT_URI"; then
    echo "durability.sh: RabbitMQ not reachable at $RABBIT_URI; its column is n/a"
    RABBIT_URI=""
fi
HAVE_WARREN=1
if [ ! -x "$WARREN_BIN" ]; then
    echo "durability.sh: $WARREN_BIN not built; Warren column is n/a" >&2
    HAVE_WARREN=0
fi

# Each copy of the backlog is about N * (SIZE + 250) bytes on disk: Warren's
# journal (one at a time: every data dir is removed before the next), and
# RabbitMQ's message store when it shares the file system.
need_kb=$(( N * (SIZE + 250) * 5 / 4 / 1024 + 512 * 1024 ))
avail_kb=$(df -Pk /tmp | awk 'NR == 2 { print $4 }')
rabbit_dir=/var/lib/rabbitmq
if [ -n "$RABBIT_URI" ] && [ -d "$rabbit_dir" ] &&
    [ "$(df -P /tmp | awk 'NR == 2 { print $1 }')" = "$(df -P "$rabbit_dir" | awk 'NR == 2 { print $1 }')" ]; then
    need_kb=$(( need_kb * 2 ))
fi
if [ "$avail_kb" -lt "$need_kb" ]; then
    echo "durability.sh: $(( avail_kb / 1024 )) MiB free under /tmp, need about" \
         "$(( need_kb / 1024 )) MiB for N=$N x $SIZE B; try a smaller N" >&2
    exit 1
fi

START=$(date +%s)
echo "durability bench: N=$N x $SIZE-byte persistent messages, confirm window $CONFIRM," \
     "prefetch $PREFETCH; parts: $PARTS"
echo "  Warren:   $( [ "$HAVE_WARREN" = 1 ] && echo "$WARREN_BIN, fresh per part, data under $WORK" || echo n/a)"
echo "  RabbitMQ: ${RABBIT_URI:-n/a} (pid ${RABBIT_PID:-?})"
echo "  disk: $(( avail_kb / 1024 )) MiB free under /tmp, about $(( need_kb / 1024 )) MiB needed"

PUBLISH_ARGS=(--persistent --size "$SIZE" --producers 1 --consumers 0 --count "$N"
              --confirm "$CONFIRM" --batch 16 --duration "$STEP_LIMIT")
DRAIN_ARGS=(--drain --consumers 1 --ack manual --prefetch "$PREFETCH" --duration "$STEP_LIMIT")

# ---- backlog ---------------------------------------------------------------

# record_step FIGURE BROKER COUNT_KEY RATE_KEY: records the last step's
# (LINE's) rate, or err if it failed or its count is not N.
record_step() {
    if [ "$(kv errors "$LINE")" = 0 ] && [ "$(kv "$3" "$LINE")" = "$N" ]; then
        record "$1" "$2" "$(kv "$4" "$LINE")"
    else
        record "$1" "$2" err
    fi
}

# backlog_on BROKER URI PID: publish, then drain, one queue; records the rates
# and the RSS peak.
backlog_on() {
    local b=$1 uri=$2 pid=$3 pidarg=() pub drain rss
    [ -n "$pid" ] && pidarg=(--broker-pid "$pid")
    echo "backlog on $b: publishing $N messages to $BACKLOG_Q ..."
    perf_step "$b" backlog-publish "$STEP_LIMIT" --uri "$uri" --queue "$BACKLOG_Q" \
        "${PUBLISH_ARGS[@]}" "${pidarg[@]}"
    pub=$LINE
    record_step publish "$b" confirmed confirm_rate
    note "  $b publish: $(kv confirmed "$pub") confirmed in $(kv seconds "$pub") s," \
         "$(kv confirm_rate "$pub") msg/s, longest pause $(kv max_gap_ms "$pub") ms," \
         "$(kv stalls "$pub") stalled second(s), broker cpu $(kv broker_cpu "$pub")%," \
         "rss $(mib "$(kv broker_rss_start_kb "$pub")") MiB at the start," \
         "max $(mib "$(kv broker_rss_max_kb "$pub")") MiB"
    [ "$b" = warren ] && [ -d "$WORK/backlog" ] &&
        note "  warren data dir after publish: $(du -sm "$WORK/backlog" | cut -f1) MiB"
    echo "backlog on $b: draining ..."
    perf_step "$b" backlog-drain "$STEP_LIMIT" --uri "$uri" --queue "$BACKLOG_Q" \
        "${DRAIN_ARGS[@]}" "${pidarg[@]}"
    drain=$LINE
    record_step drain "$b" received recv_rate
    note "  $b drain: $(kv received "$drain") received in $(kv seconds "$drain") s," \
         "$(kv recv_rate "$drain") msg/s, longest pause $(kv max_gap_ms "$drain") ms," \
         "$(kv stalls "$drain") stalled second(s), broker cpu $(kv broker_cpu "$drain")%," \
         "rss max $(mib "$(kv broker_rss_max_kb "$drain")") MiB"
    # Warren: fresh process, so VmHWM (as the drain ended) is the run's peak.
    # RabbitMQ: the largest VmRSS sampled in either step.
    if [ -z "$pid" ]; then
        rss=n/a
    elif [ "$b" = warren ]; then
        rss=$(kv broker_hwm_kb "$drain")
        note "  warren VmHWM after publish $(mib "$(kv broker_hwm_kb "$pub")") MiB," \
             "after drain $(mib "$rss") MiB"
    else
        rss=$(awk -v a="$(kv broker_rss_max_kb "$pub")" -v c="$(kv broker_rss_max_kb "$drain")" \
            'BEGIN { print (a + 0 > c + 0) ? a : c }')
        note "  rabbitmq VmRSS max $(mib "$rss") MiB (VmHWM over beam.smp's life:" \
             "$(mib "$(kv broker_hwm_kb "$drain")") MiB)"
    fi
    case $rss in ''|0|n/a) rss=n/a ;; *) rss=$(mib "$rss") ;; esac
    record rss "$b" "$rss"
}

backlog() {
    if [ "$HAVE_WARREN" = 1 ]; then
        if start_warren "$WORK/backlog" 0 warren-backlog wait; then
            backlog_on warren "amqp://guest:guest@127.0.0.1:$W_PORT" "$W_PID"
            stop_warren TERM
        else
            record publish warren err; record drain warren err; record rss warren err
        fi
        cp "$WORK/warren-backlog.log" "$LOGS/"
        rm -rf "$WORK/backlog"
    fi
    if [ -n "$RABBIT_URI" ]; then
        RABBIT_DIRTY=1
        timeout 60 "$PERF" --uri "$RABBIT_URI" --queue "$BACKLOG_Q" --delete-queues >/dev/null 2>&1
        backlog_on rabbitmq "$RABBIT_URI" "$RABBIT_PID"
        timeout 300 "$PERF" --uri "$RABBIT_URI" --queue "$BACKLOG_Q" --delete-queues \
            >"$LOGS/rabbitmq-backlog-delete.txt" 2>&1 && RABBIT_DIRTY=0
    fi
}

# ---- restart ---------------------------------------------------------------

# restart_variant QUEUES LABEL: fills QUEUES durable queues with N messages,
# then SIGKILL + restart, SIGTERM + restart, each timed by --await-messages.
restart_variant() {
    local nq=$1 label=$2 data=$WORK/restart-$1 port confirmed sig row
    echo "restart, $label: publishing $N messages ..."
    if ! start_warren "$data" 0 "warren-restart-$nq" wait; then
        record "restart-$nq-KILL" warren err
        record "restart-$nq-TERM" warren err
        return
    fi
    port=$W_PORT
    perf_step warren "restart-$nq-publish" "$STEP_LIMIT" --uri "amqp://guest:guest@127.0.0.1:$port" \
        --queue "$RESTART_Q" --queues "$nq" "${PUBLISH_ARGS[@]}" --broker-pid "$W_PID" --quiet
    confirmed=$(kv confirmed "$LINE")
    note "  restart $label: $confirmed confirmed at $(kv confirm_rate "$LINE") msg/s," \
         "data dir $(du -sm "$data" | cut -f1) MiB, rss $(mib "$(kv broker_rss_max_kb "$LINE")") MiB"
    for sig in KILL TERM; do
        row=restart-$nq-$sig
        if [ "$(kv errors "$LINE")" != 0 ] || [ -z "$confirmed" ] || [ "$confirmed" = 0 ]; then
            record "$row" warren err
            continue
        fi
        stop_warren "$sig"
        [ "$sig" = TERM ] && note "  restart $label: SIGTERM stop took $STOP_MS ms"
        echo "restart, $label: after SIG$sig ..."
        start_warren "$data" "$port" "warren-$row"
        perf_step warren "$row" "$RESTART_LIMIT" --uri "amqp://guest:guest@127.0.0.1:$port" \
            --queue "$RESTART_Q" --queues "$nq" --await-messages "$confirmed" \
            --broker-pid "$W_PID" --duration "$RESTART_LIMIT"
        if [ "$(kv errors "$LINE")" = 0 ]; then
            record "$row" warren "$(kv ready_seconds "$LINE")"
        else
            record "$row" warren err
        fi
        note "  restart $label after SIG$sig: login after $(kv connect_seconds "$LINE") s," \
             "$(kv messages "$LINE") of $confirmed messages after $(kv ready_seconds "$LINE") s," \
             "rss then $(mib "$(kv broker_rss_kb "$LINE")") MiB"
        grep -h 'journal:' "$WORK/warren-$row.log" | head -n 2 | sed 's/^/    /' | tee -a "$NOTES"
        cp "$WORK/warren-$row.log" "$LOGS/"
    done
    stop_warren TERM
    cp "$WORK/warren-restart-$nq.log" "$LOGS/"
    rm -rf "$data"
}

restart() {
    if [ "$HAVE_WARREN" != 1 ]; then
        echo "restart: needs Warren ($WARREN_BIN); skipped" >&2
        return
    fi
    restart_variant 1 "1 queue"
    restart_variant "$SPREAD_QUEUES" "$SPREAD_QUEUES queues"
}

for part in $PARTS; do
    case $part in
    backlog) backlog ;;
    restart) restart ;;
    *) echo "durability.sh: unknown scenario '$part' (backlog, restart)" >&2 ;;
    esac
done

# ---- table -----------------------------------------------------------------

fmt() { # integers with thousands separators, one decimal below 100
    case $1 in n/a|err) echo "$1"; return ;; esac
    awk -v v="$1" 'BEGIN {
        if (v < 100) { printf "%.1f\n", v; exit }
        x = sprintf("%.0f", v); out = ""
        while (length(x) > 3) { out = "," substr(x, length(x) - 2) out; x = substr(x, 1, length(x) - 3) }
        printf "%s%s\n", x, out }'
}
ratio() { # W R hi|lo: Warren/RabbitMQ for rates, RabbitMQ/Warren for memory
    case "$1$2" in *n/a*|*err*) echo "-"; return ;; esac
    awk -v w="$1" -v r="$2" -v b="$3" 'BEGIN {
        x = (b == "hi") ? (r > 0 ? w / r : 0) : (w > 0 ? r / w : 0); printf "%.1fx\n", x }'
}
limit() { # VALUE MAX UNIT: "< MAX UNIT met|MISSED" for Warren's figure
    case $1 in n/a|err) echo "< $2 $3"; return ;; esac
    awk -v v="$1" -v m="$2" -v u="$3" 'BEGIN { printf "< %s %s %s\n", m, u, (v < m) ? "met" : "MISSED" }'
}
row() { # LABEL WARREN RABBITMQ RATIO LIMIT
    printf "%-46s | %12s | %12s | %7s | %s\n" "$1" "$(fmt "$2")" "$(fmt "$3")" "$4" "$5"
}

{
    echo "Warren durability benchmarks -- $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, kernel $(uname -r)"
    echo "N=$N persistent $SIZE-byte messages, durable queues, confirm window $CONFIRM;" \
         "drain: 1 consumer, manual ack (multiple every $(( PREFETCH / 2 ))), prefetch $PREFETCH"
    echo "Warren: $WARREN_BIN, started fresh per part   RabbitMQ: ${RABBIT_URI:-n/a}"
    echo
    printf "%-46s | %12s | %12s | %7s | %s\n" scenario Warren RabbitMQ ratio limit
    printf "%-46s-+-%12s-+-%12s-+-%7s-+-%s\n" "$(printf '%.0s-' {1..46})" "$(printf '%.0s-' {1..12})" \
        "$(printf '%.0s-' {1..12})" "-------" "-------------------"
    if echo "$PARTS" | grep -qw backlog; then
        w=$(figure publish warren); r=$(figure publish rabbitmq)
        row "backlog: publish, confirmed (msg/s)" "$w" "$r" "$(ratio "$w" "$r" hi)" ""
        w=$(figure drain warren); r=$(figure drain rabbitmq)
        row "backlog: drain, 1 consumer (msg/s)" "$w" "$r" "$(ratio "$w" "$r" hi)" ""
        w=$(figure rss warren); r=$(figure rss rabbitmq)
        row "backlog: broker peak RSS (MiB)" "$w" "$r" "$(ratio "$w" "$r" lo)" \
            "Warren $(limit "$w" "$RSS_LIMIT_MIB" MiB)"
    fi
    if echo "$PARTS" | grep -qw restart; then
        for nq in 1 "$SPREAD_QUEUES"; do
            q="$nq queues"; [ "$nq" = 1 ] && q="1 queue"
            w=$(figure "restart-$nq-TERM" warren)
            row "restart, $q, after SIGTERM (s)" "$w" n/a - "$(limit "$w" "$CLEAN_LIMIT_S" s)"
            w=$(figure "restart-$nq-KILL" warren)
            row "restart, $q, after SIGKILL (s)" "$w" n/a - "$(limit "$w" "$KILL_LIMIT_S" s)"
        done
    fi
    echo
    echo "ratio: Warren/RabbitMQ for rates, RabbitMQ/Warren for memory (higher is better)."
    echo "rates: messages over the whole step (publish: first publish to last confirm; drain:"
    echo "  consume to last delivery). Warren RSS: its VmHWM (fresh process); RabbitMQ: the largest"
    echo "  VmRSS of beam.smp sampled every 100 ms. restart: from the broker's process start until"
    echo "  passive queue.declare counts sum to the confirmed messages."
    echo "Run time $(( $(date +%s) - START )) s. Full output of every step: $LOGS/"
    echo
    echo "notes:"
    cat "$NOTES"
    echo
    echo "raw results:"
    cat "$RAW"
} >"$WORK/table.txt"
cp "$WORK/table.txt" "$OUT"
echo
sed -n '1,/^Run time/p' "$OUT"
echo "saved to $OUT"
