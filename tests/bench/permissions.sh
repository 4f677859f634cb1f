#!/usr/bin/env bash
# permissions.sh -- `make bench SCENARIOS=permissions`: what permission checks
# cost at 10,000 publishes per second. One Warren, two users: guest (the
# default user, ".*" everywhere) and a user whose configure / write / read
# regexes and topic write permission on the exchange must really match
# (PCRE2) on every check the channel has not cached. Each round runs one
# producer at --rate 10000 to a topic exchange with one consumer, once per
# user, alternating which goes first; the figure is the broker's CPU (% of
# one core, from /proc over the whole run, warm-up and set-up included) per
# run and the median ratio regexes / ".*". The
# target: at most 1.03. Saved to tests/bench/last-permissions.txt.
# INSTR=1 counts instead the broker's instructions per message under
# callgrind (deterministic, immune to the machine's noise): the difference
# of a 60,000- and a 20,000-message run, per user (saved to
# tests/bench/last-permissions-instr.txt).
#
# Environment: ROUNDS=5 DURATION=10 WARMUP=2 RATE=10000 INSTR=0
set -u
cd "$(dirname "$0")/../.." || exit 1
PERF=${PERF:-build/release/warren-perf}
WARREN_BIN=${WARREN_BIN:-build/release/warren}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
RATE=${RATE:-10000}
OUT=tests/bench/last-permissions.txt
WORK=$(mktemp -d /tmp/warren-bench-perm.XXXXXX)
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null; rm -rf "$WORK"' EXIT INT TERM

start_warren() {
    "$WARREN_BIN" --set listeners.tcp.default=127.0.0.1:0 --set "data_dir=$WORK/data" \
        --set journal.sync=none 2> "$WORK/warren.log" &
    PID=$!
    for _ in $(seq 100); do
        PORT=$(sed -n 's/.*AMQP listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/warren.log")
        [ -n "$PORT" ] && return 0
        sleep 0.1
    done
    echo "permissions.sh: Warren did not start" >&2
    exit 1
}

stop_warren() { kill "$PID"; wait "$PID"; PID=; }

mkdir -p "$WORK/data"
start_warren   # first boot: the schema, guest, "/"
stop_warren
/usr/bin/python3 - "$WORK/data" <<'EOF'
import sys
sys.path.insert(0, "tests/integration/py")
import sqlite3, permissions_fixture as fx
db = sqlite3.connect(sys.argv[1] + "/metadata.db")
with db:
    db.execute("INSERT INTO users (name, password_hash, hashing_algorithm, tags)"
               " VALUES ('checked', ?, 'rabbit_password_hashing_sha256', '')",
               (fx.rabbit_hash("pw"),))
    db.execute("INSERT INTO permissions VALUES ('checked', '/', '^(perf\\.|warren-perf-)',"
               " '^(perf\\.x|warren-perf-.*)$', '^(perf\\.x|warren-perf-.*)$')")
    db.execute("INSERT INTO topic_permissions VALUES ('checked', '/', 'perf.x', '^perf\\.', '^perf\\.')")
EOF

if [ "${INSTR:-0}" = 1 ]; then
    instr() { # user password count -> total broker instructions
        "${VALGRIND:-valgrind}" --tool=callgrind --callgrind-out-file="$WORK/cg.out" "$WARREN_BIN" \
            --set listeners.tcp.default=127.0.0.1:0 --set "data_dir=$WORK/data" \
            --set journal.sync=none 2> "$WORK/warren.log" &
        PID=$!
        PORT=
        for _ in $(seq 300); do
            PORT=$(sed -n 's/.*AMQP listening on [0-9.]*:\([0-9]*\).*/\1/p' "$WORK/warren.log")
            [ -n "$PORT" ] && break
            sleep 0.1
        done
        "$PERF" --uri "amqp://$1:$2@127.0.0.1:$PORT/%2f" --producers 1 --consumers 1 \
            --exchange-type topic --count "$3" --quiet > /dev/null 2>&1
        stop_warren
        sed -n 's/^summary: //p' "$WORK/cg.out"
    }
    echo "permission checks: broker instructions per message under callgrind"
    for u in "guest guest" "checked pw"; do
        small=$(instr $u 20000); big=$(instr $u 60000)
        per=$(( (big - small) / 40000 ))
        echo "${u% *}: $per instructions per message"
        echo "RESULT mode=instr user=${u% *} instr_per_msg=$per" >> "$WORK/raw"
    done
    { echo "# INSTR=1 tests/bench/permissions.sh, $(date -u +%Y-%m-%d): broker instructions per message"
      grep '^RESULT' "$WORK/raw"; } | tee tests/bench/last-permissions-instr.txt
    exit 0
fi

start_warren

# The broker's CPU time in clock ticks (utime + stime), for the whole run:
# finer than warren-perf's whole-percent figure.
ticks() { awk '{ print $14 + $15 }' "/proc/$PID/stat"; }

run() { # user password -> "sent_rate broker_cpu%"
    local t0 t1 start end rate
    t0=$(ticks); start=$(date +%s.%N)
    rate=$("$PERF" --uri "amqp://$1:$2@127.0.0.1:$PORT/%2f" --producers 1 --consumers 1 \
        --exchange-type topic --rate "$RATE" --duration "$DURATION" --warmup "$WARMUP" \
        --quiet 2>&1 | tee -a "$WORK/raw" | sed -n 's/^RESULT .*sent_rate=\([0-9]*\).*/\1/p')
    t1=$(ticks); end=$(date +%s.%N)
    awk -v r="$rate" -v t="$((t1 - t0))" -v hz="$(getconf CLK_TCK)" -v s="$start" -v e="$end" \
        'BEGIN { printf "%s %.1f", r, 100 * t / hz / (e - s) }'
}

echo "permission checks at $RATE msg/s: $ROUNDS rounds of ${DURATION}s, broker CPU % of a core"
printf '%-6s %-22s %-22s %s\n' round 'guest (.*) rate cpu' 'checked rate cpu' ratio
ratios=()
for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then a=$(run guest guest); b=$(run checked pw)
    else b=$(run checked pw); a=$(run guest guest); fi
    ca=${a#* }; cb=${b#* }
    ratio=$(awk -v a="$ca" -v b="$cb" 'BEGIN { printf "%.3f", (a > 0 ? b / a : 0) }')
    ratios+=("$ratio")
    printf '%-6s %-22s %-22s %s\n' "$r" "$a" "$b" "$ratio"
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
echo "median ratio checked / .*: $median (target <= 1.03)"
{
    echo "# make bench SCENARIOS=permissions, $(date -u +%Y-%m-%d), ROUNDS=$ROUNDS DURATION=$DURATION RATE=$RATE"
    echo "median broker CPU ratio, regex-checked user / default user (.*): $median (target <= 1.03)"
    echo "ratios per round: ${ratios[*]}"
    grep '^RESULT' "$WORK/raw"
} > "$OUT"
