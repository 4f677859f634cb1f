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
#      CLUSTER_BASE=http://...  a Warren cluster's leader console for the Cluster
#                               panel's tests (cluster.mjs); when this script
#                               starts Warren it also starts one: an etcd and
#                               three nodes on 127.0.0.1
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

# A cluster for the Cluster panel: one etcd and three nodes on free ports;
# CLUSTER_BASE is the leader's console once all three are in sync (set
# here, not echoed: a subshell would keep the PIDs from cleanup).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_cluster() {
    local eport peer i name mports=()
    eport=$(free_port); peer=$(free_port)
    command -v etcd >/dev/null || { echo "# no etcd (scripts/deps.sh installs etcd-server): no cluster" >&2; return; }
    etcd --data-dir "$TMP/etcd" --listen-client-urls "http://127.0.0.1:$eport" \
        --advertise-client-urls "http://127.0.0.1:$eport" --listen-peer-urls "http://127.0.0.1:$peer" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer" --initial-cluster "default=http://127.0.0.1:$peer" \
        > "$TMP/etcd.log" 2>&1 &
    PIDS+=($!)
    for i in 1 2 3; do
        name=console-n$i
        mports+=("$(free_port)")
        mkdir -p "$TMP/$name"
        "$WARREN_BIN" --set listeners.tcp.default=127.0.0.1:0 --set stream.listeners.tcp.default=127.0.0.1:0 \
            --set management.tcp.ip=127.0.0.1 --set "management.tcp.port=${mports[-1]}" \
            --set prometheus.tcp.ip=127.0.0.1 --set prometheus.tcp.port=0 --set "data_dir=$TMP/$name" \
            --set "cluster.etcd.endpoints.1=http://127.0.0.1:$eport" --set cluster.name=console-test \
            --set "cluster.node_name=$name" --set cluster.advertised_host=127.0.0.1 \
            --set "cluster.replication.port=$(free_port)" > "$TMP/$name.log" 2>&1 &
        PIDS+=($!)
    done
    for i in $(seq 1 200); do
        for p in "${mports[@]}"; do
            if curl -s -m 2 -u guest:guest "http://127.0.0.1:$p/api/cluster" |
                python3 -c 'import json,sys; d=json.load(sys.stdin); sys.exit(not (d["role"] == "leader" and d["isr_size"] == 3))' 2>/dev/null; then
                CLUSTER_BASE="http://127.0.0.1:$p"
                for q in "${mports[@]}"; do [ "$q" = "$p" ] || CLUSTER_FOLLOWER="http://127.0.0.1:$q"; done
                return
            fi
        done
        sleep 0.1
    done
    cat "$TMP"/console-n*.log >&2
}
if [ -z "${CONSOLE_URL:-}" ] && [ -z "${CLUSTER_BASE:-}" ]; then
    start_cluster
    [ -n "${CLUSTER_BASE:-}" ] && echo "# a cluster's leader at $CLUSTER_BASE"
fi
export CLUSTER_BASE=${CLUSTER_BASE:-} CLUSTER_FOLLOWER=${CLUSTER_FOLLOWER:-}
BASE=$BASE AMQP_PORT=$AMQP_PORT timeout 1200 node tests/browser/run.mjs
