#!/usr/bin/env bash
# streams.sh -- issue 20's stream figures over AMQP 0-9-1, Warren beside a
# RabbitMQ 3.10 started here (tests/bench/rabbit.sh), with warren-perf:
#
#   publish   P producers publish SIZE-byte persistent messages with confirms
#             (window CONFIRM each) into one stream: msgs/s and MB/s, and
#             the disk's ceiling: dd of 1 GiB with conv=fdatasync on the
#             same filesystem.
#   replay    a stream of N messages (BODY bytes) filled once; then READERS
#             consumers replay it from "first" at once (prefetch 1000,
#             multiple acks): msgs/s each, the broker's peak RSS (sampled,
#             and at the start: flat means independent of the stream's
#             length -- the replay of a stream 10x shorter shows the same),
#             the bytes/s read against cat of the segment files (page cache).
#             RabbitMQ replays RN messages (it reads far slower).
#   sp-publish  the stream protocol (stream-perf, stream-perf-test's shape):
#             SP_P publishers with a reference (deduplication), Publish frames
#             of 100 messages, 10,000 unconfirmed at most, 12 B and 1 KiB
#             messages: msgs/s and MB/s against dd's ceiling; RabbitMQ's
#             rabbitmq_stream beside it.
#   sp-replay READERS stream-protocol consumers replay the replay part's
#             stream (written over AMQP: a stream is one either way) from
#             first: records/s each and chunk MB/s against cat's.
#   filter    Warren only (3.10 has no filtering): the stream of FN messages
#             published in runs of FN/100 with 100 filter values (a tenant or
#             region publishing in bursts); one consumer wanting one value
#             (1%) against an unfiltered replay: seconds and the bytes the
#             broker read (/proc/PID/io rchar).
#
# Prints a table and saves it with the raw RESULT lines to
# tests/bench/last-streams.txt.
#
# Environment: N=10000000 RN=1000000 FN=10000000 READERS=10 BODY=100 SIZE=1024
#   P=4 CONFIRM=500 PUB_N=250000 (per producer) SP_P=2 SP_N=2000000 (per publisher)
#   RABBIT=1 SCENARIOS="publish replay sp-publish sp-replay filter"
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/rabbit.sh

PERF=${PERF:-build/release/warren-perf}
WARREN_BIN=${WARREN_BIN:-build/release/warren}
N=${N:-10000000}
RN=${RN:-1000000}
FN=${FN:-10000000}
READERS=${READERS:-10}
BODY=${BODY:-100}
SIZE=${SIZE:-1024}
P=${P:-4}
CONFIRM=${CONFIRM:-500}
PUB_N=${PUB_N:-250000}
RABBIT=${RABBIT:-1}
SP_P=${SP_P:-2}
SP_N=${SP_N:-2000000}
SPERF=${SPERF:-build/release/stream-perf}
PARTS=$(echo "${SCENARIOS:-publish replay sp-publish sp-replay filter}" | tr ',' ' ')
OUT=${OUT:-tests/bench/last-streams.txt}
TMP=$(mktemp -d /tmp/warren-streams.XXXXXX)
RAW=$TMP/raw.txt
TABLE=$TMP/table.txt
trap bench_cleanup EXIT

WPORT=$(free_port)
WSPORT=$(free_port)
mkdir -p "$TMP/data"
"$WARREN_BIN" --set listeners.tcp.default=127.0.0.1:$WPORT --set data_dir=$TMP/data \
    --set stream.listeners.tcp.default=127.0.0.1:$WSPORT \
    --set management.tcp.port=0 --set prometheus.tcp.port=0 2> "$TMP/warren.log" &
WPID=$!
for _ in $(seq 100); do $PERF --uri amqp://guest:guest@127.0.0.1:$WPORT --check 2>/dev/null && break; sleep 0.1; done
if [ "$RABBIT" = 1 ]; then
    # a fixed range: the distribution port (PORT + 20000) must stay a port
    for RPORT in $(seq 5730 5799); do ss -Htln "( sport = :$RPORT )" | grep -q . || break; done
    start_rabbit warren-streams-rabbit "$RPORT" \
        "stream.listeners.tcp.default = 127.0.0.1:$((RPORT + 1))" "" rabbitmq_stream
fi

W=amqp://guest:guest@127.0.0.1:$WPORT
R=amqp://guest:guest@127.0.0.1:${RPORT:-0}
STREAM_ARGS=(--persistent --queue-arg x-queue-type=stream)

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" | tail -1; }
row() { printf '%-44s | %14s | %14s | %s\n' "$@" | tee -a "$TABLE"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
rchar() { awk '/rchar/ {print $2}' "/proc/$1/io"; }

# The peak VmRSS of $1 while the command after it runs (sampled every 100 ms).
with_peak_rss() {
    local pid=$1 peak=0 r; shift
    "$@" > "$TMP/cmd.out" 2>&1 &
    local cmd=$!
    while kill -0 $cmd 2>/dev/null; do
        r=$(rss_kb "$pid"); [ "${r:-0}" -gt "$peak" ] && peak=$r
        sleep 0.1
    done
    wait $cmd
    cat "$TMP/cmd.out" >> "$RAW"
    PEAK_RSS=$peak
}

# fill URI QUEUE COUNT BODY [perf options]: one producer, confirms
fill() {
    local uri=$1 q=$2 n=$3 body=$4; shift 4
    timeout 3600 $PERF --uri "$uri" --producers 1 --consumers 0 --queue "$q" "${STREAM_ARGS[@]}" \
        --confirm 1000 --size "$body" --count "$n" --quiet "$@" 2>&1 | tee -a "$RAW" | grep RESULT
}

# replay URI QUEUE COUNT READERS [perf options]: READERS consumers from first
replay() {
    local uri=$1 q=$2 n=$3 readers=$4; shift 4
    timeout 3600 $PERF --uri "$uri" --producers 0 --consumers "$readers" --queue "$q" \
        "${STREAM_ARGS[@]}" --drain --count $((n * readers)) --prefetch 1000 --ack manual \
        --stream-offset first --quiet "$@" 2>&1
}

echo "# streams.sh $(date -u +%FT%TZ) N=$N RN=$RN FN=$FN READERS=$READERS BODY=$BODY SIZE=$SIZE P=$P" > "$TABLE"
row "scenario" "Warren" "RabbitMQ" "ratio"

for part in $PARTS; do
case $part in
publish)
    for who in W R; do
        [ $who = R ] && [ "$RABBIT" != 1 ] && continue
        uri=${!who}
        out=$(timeout 3600 $PERF --uri "$uri" --producers "$P" --consumers 0 --queue bench.pub \
            "${STREAM_ARGS[@]}" --confirm "$CONFIRM" --size "$SIZE" --count "$PUB_N" --quiet 2>&1)
        echo "$out" >> "$RAW"
        eval "PUB_$who=$(echo "$out" | field confirm_rate)"
    done
    ratio=$( [ "$RABBIT" = 1 ] && echo "scale=2; $PUB_W / $PUB_R" | bc || echo -)
    row "AMQP publish into a stream, ${SIZE} B, confirms, $P producers (msg/s)" "$PUB_W" "${PUB_R:--}" "$ratio"
    row "  the same in MB/s of bodies" "$(echo "$PUB_W * $SIZE / 1000000" | bc)" \
        "$( [ "$RABBIT" = 1 ] && echo "$PUB_R * $SIZE / 1000000" | bc || echo -)" ""
    DD=$(dd if=/dev/zero of="$TMP/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | sed -n 's/.*, \([0-9.]* [GM]B\/s\)$/\1/p')
    rm -f "$TMP/dd.bin"
    row "  disk sequential write ceiling (dd 1 GiB, fdatasync)" "$DD" "" ""
    ;;
replay)
    before=$(du -sb "$TMP/data/streams" 2>/dev/null | cut -f1)
    fill "$W" bench.replay "$N" "$BODY" > /dev/null
    bytes=$(( $(du -sb "$TMP/data/streams" | cut -f1) - ${before:-0} ))
    base=$(rss_kb $WPID)
    with_peak_rss $WPID replay "$W" bench.replay "$N" "$READERS"
    out=$(grep RESULT "$TMP/cmd.out" | tail -1)
    rate=$(echo "$out" | field recv_rate); secs=$(echo "$out" | field seconds)
    row "replay from first, $READERS consumers x $N msgs (msg/s each)" "$((rate / READERS))" "" ""
    row "  broker RSS before / peak during (KB)" "$base / $PEAK_RSS" "" ""
    # the ceilings: cat of the segments from the disk (caches dropped), then from the page cache
    all=$(du -sb "$TMP/data/streams" | cut -f1)
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null
    t0=$(date +%s.%N); cat "$TMP"/data/streams/*/*.segment > /dev/null; t1=$(date +%s.%N)
    disk_rate=$(echo "$all / ($t1 - $t0) / 1000000" | bc)
    t0=$(date +%s.%N); cat "$TMP"/data/streams/*/*.segment > /dev/null; t1=$(date +%s.%N)
    cat_rate=$(echo "$all / ($t1 - $t0) / 1000000" | bc)
    read_rate=$(echo "$bytes * $READERS / $secs / 1000000" | bc)
    row "  stream bytes read per second, all consumers (MB/s)" "$read_rate" "" "cat of the segments: disk $disk_rate MB/s, page cache $cat_rate MB/s"
    # the same replay of a stream 10x shorter: RSS independent of length
    fill "$W" bench.short $((N / 10)) "$BODY" > /dev/null
    with_peak_rss $WPID replay "$W" bench.short $((N / 10)) "$READERS"
    row "  peak RSS replaying a stream 10x shorter (KB)" "$PEAK_RSS" "" ""
    if [ "$RABBIT" = 1 ]; then
        fill "$R" bench.replay "$RN" "$BODY" > /dev/null
        rbase=$(rss_kb "$RABBIT_PID")
        with_peak_rss "$RABBIT_PID" replay "$R" bench.replay "$RN" "$READERS"
        rrate=$(grep RESULT "$TMP/cmd.out" | tail -1 | field recv_rate)
        row "RabbitMQ: replay, $READERS consumers x $RN msgs (msg/s each)" "$((rate / READERS))" "$((rrate / READERS))" \
            "$(echo "scale=1; $rate / $rrate" | bc)"
        row "  RabbitMQ RSS before / peak during (KB)" "" "$rbase / $PEAK_RSS" ""
    fi
    ;;
sp-publish)
    for size in 12 1024; do
        for who in W R; do
            [ $who = R ] && [ "$RABBIT" != 1 ] && continue
            port=$([ $who = W ] && echo "$WSPORT" || echo $((RPORT + 1)))
            out=$(timeout 1800 $SPERF --port "$port" --stream "bench.sp$size" --publishers "$SP_P" \
                --batch 100 --window 10000 --size "$size" --count "$SP_N" --duration 900 2>&1)
            echo "$out" >> "$RAW"
            eval "SP_$who=$(echo "$out" | field confirm_rate)"
        done
        ratio=$( [ "$RABBIT" = 1 ] && echo "scale=2; $SP_W / $SP_R" | bc || echo -)
        row "stream protocol publish, $size B, $SP_P publishers, dedup (msg/s)" "$SP_W" "${SP_R:--}" "$ratio"
        row "  the same in MB/s of messages" "$(echo "$SP_W * ($size + 8) / 1000000" | bc)" \
            "$( [ "$RABBIT" = 1 ] && echo "${SP_R:-0} * ($size + 8) / 1000000" | bc || echo -)" \
            "dd ceiling: ${DD:-not measured}"
    done
    ;;
sp-replay)
    out=$(timeout 1800 $SPERF --port "$WSPORT" --stream bench.replay --no-create --publishers 0 \
        --consumers "$READERS" --count "$N" --credit 10 --duration 900 2>&1)
    echo "$out" >> "$RAW"
    rate=$(echo "$out" | field consume_rate); mb=$(echo "$out" | field consume_mb_s)
    row "stream protocol replay, $READERS consumers x $N (records/s each)" "$(echo "$rate / $READERS" | bc)" "" ""
    row "  chunk bytes delivered per second, all (MB/s)" "$mb" "" "cat: disk ${disk_rate:-?} MB/s, page cache ${cat_rate:-?} MB/s"
    ;;
filter)
    per=$((FN / 100))
    for v in $(seq 0 99); do
        fill "$W" bench.filter "$per" "$BODY" --filter-value "v$v" > /dev/null
    done
    r0=$(rchar $WPID); t0=$(date +%s.%N)
    replay "$W" bench.filter "$per" 1 --stream-filter v37 >> "$RAW"
    t1=$(date +%s.%N); r1=$(rchar $WPID)
    replay "$W" bench.filter "$FN" 1 >> "$RAW"
    t2=$(date +%s.%N); r2=$(rchar $WPID)
    fs=$(echo "scale=2; $t1 - $t0" | bc); us=$(echo "scale=2; $t2 - $t1" | bc)
    row "filtered consumer, 1% of $FN msgs: seconds" "$fs" "" "unfiltered replay: $us s"
    row "  bytes the broker read (MB)" "$(( (r1 - r0) / 1000000 ))" "" "unfiltered: $(( (r2 - r1) / 1000000 ))"
    ;;
esac
done

{ cat "$TABLE"; echo; echo "# raw"; cat "$RAW"; } > "$OUT"
cat "$TABLE"
