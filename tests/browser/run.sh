#!/bin/bash
# The browser test layer of `make test`: installs Debian's chromium and node
# (scripts/deps.sh browser) and playwright-core from the lockfile (npm ci)
# when missing, starts Warren with its management listener on a free port
# (it logs "management listening on 127.0.0.1:PORT"), and runs run.mjs
# against it. Prints TAP.
#
# Env: WARREN_BIN=path          broker binary (default build/release/warren)
#      CONSOLE_URL=http://...   test that console + API instead of starting Warren
#                               (e.g. tests/browser/devserver.py in front of RabbitMQ)
#      CONSOLE_AMQP_PORT=N      its AMQP port (default 5672)
#      CONSOLE_TARGET=warren    hold that console to the 10,000-queue targets
#                               (set when this script starts Warren)
#      SHOTS=dir                screenshots (default build/browser-screenshots)
#      PERF_QUEUES=N            queues for the scale test (default 10000)
set -u
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
WARREN_BIN=${WARREN_BIN:-$ROOT/build/release/warren}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/warren-browser.XXXXXX") || exit 1
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

scripts/deps.sh browser || { echo "not ok 1 - browser: chromium and node are installed"; exit 1; }
want=$(node -e 'console.log(require("./tests/browser/package-lock.json").packages["node_modules/playwright-core"].version)')
have=$(node -e 'try{console.log(require("./tests/browser/node_modules/playwright-core/package.json").version)}catch(e){}')
if [ "$want" != "$have" ]; then
    (cd tests/browser && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
        { echo "not ok 1 - browser: npm ci (playwright-core $want)"; exit 1; }
fi

# wait_log FILE REGEX PID: the first capture of REGEX in FILE, waiting up to
# 20 s while PID lives; empty when it never appears.
wait_log() {
    local i
    for i in $(seq 1 200); do
        local m
        m=$(sed -n -E "s/.*$2.*/\\1/p" "$1" | head -1)
        if [ -n "$m" ]; then echo "$m"; return; fi
        kill -0 "$3" 2>/dev/null || return
        sleep 0.1
    done
}

BASE=${CONSOLE_URL:-}
AMQP_PORT=${CONSOLE_AMQP_PORT:-5672}
if [ -z "$BASE" ]; then
    "$WARREN_BIN" --config etc/warren.conf --set listeners.tcp.default=127.0.0.1:0 --set stream.listeners.tcp.default=127.0.0.1:0 \
        --set management.tcp.port=0 --set management.tcp.ip=127.0.0.1 \
        --set data_dir="$TMP/data" > "$TMP/warren.log" 2>&1 &
    PIDS+=($!)
    mport=$(wait_log "$TMP/warren.log" 'management listening on 127\.0\.0\.1:([0-9]+)' $!)
    aport=$(wait_log "$TMP/warren.log" 'AMQP listening on 127\.0\.0\.1:([0-9]+)' $!)
    if [ -z "$mport" ] || [ -z "$aport" ]; then
        cat "$TMP/warren.log" >&2
        echo "not ok 1 - browser: Warren starts with its management listener"
        exit 1
    fi
    BASE=http://127.0.0.1:$mport
    AMQP_PORT=$aport
    export CONSOLE_TARGET=warren
    echo "# testing Warren's console at $BASE (AMQP on $AMQP_PORT)"
fi
[ -n "$BASE" ] || { echo "not ok 1 - browser: a console to test"; exit 1; }
BASE=$BASE AMQP_PORT=$AMQP_PORT timeout 1200 node tests/browser/run.mjs
