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
#
# Until Warren serves the whole management API (it refuses the management.*
# keys, or OPTIONS on /api/users, /api/vhosts/x, /api/policies or
# /api/definitions allows no write), the layer says so and tests the console
# through the dev proxy against the local RabbitMQ (127.0.0.1:15672) instead.
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

start_devproxy() {
    /usr/bin/python3 tests/browser/devserver.py --port 0 --api http://127.0.0.1:15672 > "$TMP/dev.log" 2>&1 &
    PIDS+=($!)
    local port
    port=$(wait_log "$TMP/dev.log" 'listening on 127\.0\.0\.1:([0-9]+)' $!)
    [ -n "$port" ] && BASE=http://127.0.0.1:$port
}

BASE=${CONSOLE_URL:-}
AMQP_PORT=${CONSOLE_AMQP_PORT:-5672}
if [ -z "$BASE" ]; then
    "$WARREN_BIN" --config etc/warren.conf --set listeners.tcp.default=127.0.0.1:0 \
        --set management.tcp.port=0 --set management.tcp.ip=127.0.0.1 \
        --set data_dir="$TMP/data" > "$TMP/warren.log" 2>&1 &
    PIDS+=($!)
    mport=$(wait_log "$TMP/warren.log" 'management listening on 127\.0\.0\.1:([0-9]+)' $!)
    aport=$(wait_log "$TMP/warren.log" 'AMQP listening on 127\.0\.0\.1:([0-9]+)' $!)
    missing=""
    if [ -n "$mport" ]; then
        for p in users vhosts/x policies definitions; do
            code=$(curl -s -o /dev/null -w '%{http_code}' -X OPTIONS -u guest:guest "http://127.0.0.1:$mport/api/$p")
            allow=$(curl -s -o /dev/null -D - -X OPTIONS -u guest:guest "http://127.0.0.1:$mport/api/$p" | tr -d '\r' | sed -n 's/^[Aa]llow: //p')
            case "$code $allow" in
                200*PUT*|200*POST*) ;;
                *) missing="$missing /api/$p" ;;
            esac
        done
    fi
    if [ -n "$mport" ] && [ -n "$aport" ] && [ -z "$missing" ]; then
        BASE=http://127.0.0.1:$mport
        AMQP_PORT=$aport
        export CONSOLE_TARGET=warren
        echo "# testing Warren's console at $BASE (AMQP on $AMQP_PORT)"
    elif [ -n "$mport" ] && curl -sf -u guest:guest http://127.0.0.1:15672/api/whoami > /dev/null 2>&1; then
        # The console needs the admin endpoints too; until Warren has them
        # all, the console is tested against RabbitMQ's API.
        echo "# this Warren's management API has no writes yet on:$missing;"
        echo "# testing the console through the dev proxy against RabbitMQ on 127.0.0.1:15672"
        start_devproxy
        AMQP_PORT=5672
    elif grep -q 'management' "$TMP/warren.log" &&
         curl -sf -u guest:guest http://127.0.0.1:15672/api/whoami > /dev/null 2>&1; then
        echo "# this Warren has no management API yet ($(grep -m1 management "$TMP/warren.log"));"
        echo "# testing the console through the dev proxy against RabbitMQ on 127.0.0.1:15672"
        start_devproxy
        AMQP_PORT=5672
    else
        cat "$TMP/warren.log" >&2
        echo "not ok 1 - browser: Warren starts with its management listener"
        exit 1
    fi
fi
[ -n "$BASE" ] || { echo "not ok 1 - browser: a console to test"; exit 1; }
BASE=$BASE AMQP_PORT=$AMQP_PORT timeout 1200 node tests/browser/run.mjs
