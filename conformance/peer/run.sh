#!/usr/bin/env bash
# Runs client libraries' own integration suites, unchanged, against Warren and
# against RabbitMQ, and compares them (`make peer-suites`).
#
#   amqp091-go  Debian's golang-github-rabbitmq-amqp091-go-dev ships the source
#               with integration_test.go; it is copied to a temp GOPATH and run
#               offline with `go test -tags integration -v` (GO111MODULE=off,
#               GOPATH=<temp>:/usr/share/gocode, which also holds goleak).
#   amqplib     `npm pack amqplib@0.10` (newest 0.10.x) into a temp dir, its
#               devDependencies installed, then mocha (flags as in its Makefile)
#               on test/channel_api.js and test/callback_api.js.
#
# Nothing is copied into the repository. Environment:
#   WARREN_URI     use a running Warren instead of starting one per suite
#   WARREN_BIN     Warren binary to start (default build/release/warren, bin/warren)
#   RABBIT_URI     default amqp://guest:guest@127.0.0.1:5672 (skipped if unreachable)
#   PEER_SUITES    space-separated subset of: amqp091-go amqplib
#   PEER_OUT       report path (default conformance/out/peer-results.md)
#   PEER_KEEP=1    keep the temp dir (logs) and print its path
# Exit status: 0 when the suites ran (whatever they found); 2 on a setup error.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
RABBIT_URI=${RABBIT_URI:-amqp://guest:guest@127.0.0.1:5672}
PEER_SUITES=${PEER_SUITES:-amqp091-go amqplib}
PEER_OUT=${PEER_OUT:-$root/conformance/out/peer-results.md}
AMQPLIB_SPEC=${AMQPLIB_SPEC:-amqplib@0.10}
GO_PKG_SRC=/usr/share/gocode/src/github.com/rabbitmq/amqp091-go
GO_TEST_TIMEOUT=${GO_TEST_TIMEOUT:-10m}
SUITE_WALL_LIMIT=${SUITE_WALL_LIMIT:-900}   # seconds, per suite per broker

work=$(mktemp -d /tmp/warren-peer.XXXXXX)
results="$work/results"
mkdir -p "$results"
warren_pid=""

log() { printf 'peer: %s\n' "$*" >&2; }

cleanup() {
    stop_warren
    if [ "${PEER_KEEP:-0}" = 1 ]; then log "kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

# ------------------------------------------------------------------ brokers

find_warren_bin() {
    local c
    for c in "${WARREN_BIN:-}" "$root/build/release/warren" "$root/bin/warren"; do
        if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
    done
    return 1
}

# Starts Warren on 127.0.0.1:0 in a fresh data dir; sets warren_uri.
start_warren() {
    local bin data logf port i
    bin=$(find_warren_bin) || { log "no Warren binary (build it or set WARREN_BIN)"; return 1; }
    data=$(mktemp -d "$work/warren-data.XXXXXX")
    logf="$work/warren-$1.log"
    "$bin" --set listeners.tcp.default=127.0.0.1:0 --set stream.listeners.tcp.default=127.0.0.1:0 --set "data_dir=$data" 2>"$logf" &
    warren_pid=$!
    for i in $(seq 1 100); do
        port=$(grep -o 'AMQP listening on 127\.0\.0\.1:[0-9]*' "$logf" 2>/dev/null | head -1 | sed 's/.*://')
        if [ -n "$port" ]; then
            warren_uri="amqp://guest:guest@127.0.0.1:$port"
            return 0
        fi
        kill -0 "$warren_pid" 2>/dev/null || break
        sleep 0.1
    done
    log "Warren did not start; log: $(tail -5 "$logf" 2>/dev/null)"
    stop_warren
    return 1
}

stop_warren() {
    if [ -n "$warren_pid" ]; then
        kill -TERM "$warren_pid" 2>/dev/null
        for _ in $(seq 1 50); do kill -0 "$warren_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$warren_pid" 2>/dev/null
        wait "$warren_pid" 2>/dev/null
        warren_pid=""
    fi
}

# host and port of an amqp:// URI
uri_host() { local h=${1#*://}; h=${h#*@}; h=${h%%/*}; echo "${h%:*}"; }
uri_port() { local h=${1#*://}; h=${h#*@}; h=${h%%/*}; case $h in *:*) echo "${h##*:}";; *) echo 5672;; esac; }

reachable() {
    timeout 3 bash -c "exec 3<>/dev/tcp/$(uri_host "$1")/$(uri_port "$1")" 2>/dev/null
}

# ------------------------------------------------------------------ setup

setup_go() {
    if ! dpkg -s golang-go golang-github-rabbitmq-amqp091-go-dev >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ]; then
            log "installing golang-go golang-github-rabbitmq-amqp091-go-dev"
            { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
                golang-go golang-github-rabbitmq-amqp091-go-dev; } >"$work/apt.log" 2>&1 ||
                { go_note="apt-get install failed"; return 1; }
        else
            go_note="golang-go/golang-github-rabbitmq-amqp091-go-dev missing (not root)"
            return 1
        fi
    fi
    [ -f "$GO_PKG_SRC/integration_test.go" ] || { go_note="no integration_test.go in $GO_PKG_SRC"; return 1; }
    go_version=$(dpkg-query -W -f='${Version}' golang-github-rabbitmq-amqp091-go-dev)
    gopath="$work/gopath"
    go_pkg="$gopath/src/github.com/rabbitmq/amqp091-go"
    mkdir -p "$(dirname "$go_pkg")"
    cp -r "$GO_PKG_SRC" "$go_pkg"
    chmod -R u+w "$go_pkg"
    # Compile once, run the same test binary against both brokers.
    if ! (cd "$go_pkg" && go_env go test -tags integration -c -o "$work/amqp091-go.test" .) \
            >"$work/go-build.log" 2>&1; then
        go_note="test build failed: $(tail -3 "$work/go-build.log" | tr '\n' ' ')"
        return 1
    fi
}

go_env() {
    env GO111MODULE=off GOFLAGS= GOPROXY=off GOPATH="$gopath:/usr/share/gocode" \
        GOCACHE="${GOCACHE:-$root/build/peer/gocache}" "$@"
}

setup_amqplib() {
    command -v npm >/dev/null || { amqplib_note="npm not installed"; return 1; }
    mkdir -p "$work/amqplib"
    (cd "$work/amqplib" && npm pack "$AMQPLIB_SPEC" --silent >pack.txt 2>"$work/npm-pack.log") ||
        { amqplib_note="npm pack $AMQPLIB_SPEC failed"; return 1; }
    local tgz
    tgz=$(tail -1 "$work/amqplib/pack.txt")
    tar -xzf "$work/amqplib/$tgz" -C "$work/amqplib" || { amqplib_note="cannot extract $tgz"; return 1; }
    amqplib_dir="$work/amqplib/package"
    amqplib_version=$(node -p "require('$amqplib_dir/package.json').version")
    (cd "$amqplib_dir" && npm install --no-audit --no-fund --loglevel=error) >"$work/npm-install.log" 2>&1 ||
        { amqplib_note="npm install failed: $(tail -3 "$work/npm-install.log" | tr '\n' ' ')"; return 1; }
}

# ------------------------------------------------------------------ suites

# run_go BROKER_KEY URI
run_go() {
    local out="$work/amqp091-go.$1.log" start rc
    start=$(date +%s)
    (cd "$go_pkg" && AMQP_URL="$2/" timeout "$SUITE_WALL_LIMIT" "$work/amqp091-go.test" \
        -test.v -test.count=1 -test.timeout "$GO_TEST_TIMEOUT") >"$out" 2>&1
    rc=$?
    python3 "$here/peer_results.py" go-log "$out" "$results/amqp091-go.$1.tsv"
    {
        echo "seconds=$(( $(date +%s) - start ))"
        [ "$rc" = 124 ] && echo "note=killed after ${SUITE_WALL_LIMIT}s"
        echo "target=$2 (exit $rc, log $(basename "$out"))"
    } >"$results/amqp091-go.$1.meta"
}

run_amqplib() {
    local json="$work/amqplib.$1.json" out="$work/amqplib.$1.log" start rc
    start=$(date +%s)
    (cd "$amqplib_dir" && URL="$2" timeout "$SUITE_WALL_LIMIT" ./node_modules/.bin/mocha \
        --check-leaks -u tdd --exit --reporter json --reporter-option "output=$json" \
        test/channel_api.js test/callback_api.js) >"$out" 2>&1
    rc=$?
    {
        echo "seconds=$(( $(date +%s) - start ))"
        echo "target=$2 (exit $rc, log $(basename "$out"))"
    } >"$results/amqplib.$1.meta"
    if [ -s "$json" ]; then
        python3 "$here/peer_results.py" mocha-json "$json" "$results/amqplib.$1.tsv"
    else
        echo "note=no mocha report (exit $rc)" >>"$results/amqplib.$1.meta"
    fi
}

# run_suite SUITE BROKER_KEY: against RabbitMQ, or a Warren started for it.
run_suite() {
    local suite=$1 key=$2 uri
    if [ "$key" = rabbitmq ]; then
        uri=$RABBIT_URI
        if ! reachable "$uri"; then
            echo "note=RabbitMQ unreachable at $(uri_host "$uri"):$(uri_port "$uri")" >"$results/$suite.$key.meta"
            return
        fi
    elif [ -n "${WARREN_URI:-}" ]; then
        uri=$WARREN_URI
    else
        start_warren "$suite" || { echo "note=Warren did not start" >"$results/$suite.$key.meta"; return; }
        uri=$warren_uri
    fi
    log "$suite against $key ($uri)"
    case $suite in
        amqp091-go) run_go "$key" "$uri" ;;
        amqplib) run_amqplib "$key" "$uri" ;;
    esac
    stop_warren
}

: >"$results/suites.txt"
for suite in $PEER_SUITES; do
    case $suite in
        amqp091-go)
            go_note=""
            if setup_go; then
                printf 'amqp091-go\tamqp091-go %s (integration_test.go)\n' "$go_version" >>"$results/suites.txt"
                run_suite amqp091-go warren
                run_suite amqp091-go rabbitmq
            else
                log "amqp091-go skipped: $go_note"
                printf 'amqp091-go\tamqp091-go (not run)\n' >>"$results/suites.txt"
                for k in warren rabbitmq; do echo "note=$go_note" >"$results/amqp091-go.$k.meta"; done
            fi ;;
        amqplib)
            amqplib_note=""
            if setup_amqplib; then
                printf 'amqplib\tamqplib %s (test/channel_api.js, test/callback_api.js)\n' "$amqplib_version" \
                    >>"$results/suites.txt"
                run_suite amqplib warren
                run_suite amqplib rabbitmq
            else
                log "amqplib skipped: $amqplib_note"
                printf 'amqplib\tamqplib (not run)\n' >>"$results/suites.txt"
                for k in warren rabbitmq; do echo "note=$amqplib_note" >"$results/amqplib.$k.meta"; done
            fi ;;
        *) log "unknown suite $suite"; exit 2 ;;
    esac
done

python3 "$here/peer_results.py" report "$results" "$PEER_OUT" || exit 2
log "wrote $PEER_OUT"
if [ "${PEER_KEEP:-0}" = 1 ]; then
    cp -r "$results" "$work/results-copy" 2>/dev/null
fi
exit 0
