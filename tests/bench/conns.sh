#!/usr/bin/env bash
# conns.sh -- 10,000 concurrent connections with heartbeats, then 1,000 of
# them publishing 10 msg/s while one consumer drains; Warren and a RabbitMQ
# started here, one after the other, with the same client
# (tests/bench/conns_bench.py): RSS per connection, publish -> deliver p50
# and p99, broker CPU over the window, connections lost.
#
#   tests/bench/conns.sh            (writes tests/bench/last-conns.txt)
#
# Env: CONNS PUBLISHERS RATE HEARTBEAT WARMUP WINDOW CLIENT_PROCS (see
# conns_bench.py); RABBIT=0 skips RabbitMQ, WARREN=0 Warren; RABBIT_NODE (rsoak) and
# RABBIT_PORT (25712) name the RabbitMQ started here (its distribution port is
# RABBIT_PORT + 20000); WARREN_BIN (build/release/warren).
# Run as root: RabbitMQ is started as its user with the descriptor limit raised
# (Debian's wrapper's su would leave it at 1024).
# BENCH_TLS=1: both brokers get a TLS listener (RabbitMQ's ssl_options.*
# keys, a CA and server certificate made with openssl) and half of the
# connections use it -- for Warren once it has TLS (issue 19).
set -eu
cd "$(dirname "$0")/../.."
ROOT=$PWD
make -s -j2 VARIANT=release build/release/warren
WARREN_BIN=${WARREN_BIN:-$ROOT/build/release/warren}
NODE=${RABBIT_NODE:-rsoak}
RPORT=${RABBIT_PORT:-25712}
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt 12000 ]; then
    echo "conns.sh: need 12000 descriptors per process, have $(ulimit -n)" >&2
    exit 1
fi
TMP=$(mktemp -d /tmp/warren-conns.XXXXXX)
WPID=""
. tests/bench/rabbit.sh
trap bench_cleanup EXIT

TLS_NOTE="plain TCP only"
WSSL=() RSSL=""
if [ "${BENCH_TLS:-0}" = 1 ]; then
    /usr/bin/python3 -c "import sys; sys.path.insert(0, 'tests/soak'); import soak; soak.make_certs('$TMP')"
    chmod 755 "$TMP" && chmod a+r "$TMP"/*      # RabbitMQ runs as its own user
    export BENCH_TLS_CA=$TMP/ca.pem
    WTLS=$(free_port) RTLS=$(free_port)
    for k in "certfile=$TMP/server.pem" "keyfile=$TMP/server.key" "cacertfile=$TMP/ca.pem" "verify=verify_none"; do
        WSSL+=(--set "ssl_options.$k")
        RSSL+="ssl_options.$k"$'\n'
    done
    WSSL+=(--set "listeners.ssl.default=127.0.0.1:$WTLS")
    RSSL+="listeners.ssl.default = 127.0.0.1:$RTLS"$'\n'
    TLS_NOTE="half of the connections over TLS"
fi

exec > >(tee tests/bench/last-conns.txt) 2>&1
echo "# tests/bench/conns.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)); ${CONNS:-10000} connections, heartbeat ${HEARTBEAT:-10} s," \
     "${PUBLISHERS:-1000} x ${RATE:-10} msg/s, ${WINDOW:-30} s window; $TLS_NOTE"

# RabbitMQ first: its distribution port (above 32768) must be bound before
# the clients' 10,000 closed sockets hold ephemeral ports in TIME_WAIT.
if [ "${RABBIT:-1}" = 1 ]; then
    start_rabbit "$NODE" "$RPORT" "$RSSL" "+Q 65536"
    RPID=$RABBIT_PID
    echo "# RabbitMQ $(rabbitmqctl -q -n "$NODE@localhost" version), pid $RPID (beam.smp), $(awk '/Max open files/ {print $4}' /proc/"$RPID"/limits) descriptors"
    /usr/bin/python3 tests/bench/conns_bench.py rabbitmq "$RPID" 127.0.0.1 "$RPORT" ${RTLS:-} || echo "# rabbitmq: incomplete"
    stop_rabbit
fi

[ "${WARREN:-1}" = 1 ] || exit 0
mkdir -p "$TMP/warren"
"$WARREN_BIN" --set listeners.tcp.default=127.0.0.1:0 --set "data_dir=$TMP/warren" \
    --set management.tcp.port=0 --set management.tcp.ip=127.0.0.1 \
    --set prometheus.tcp.port=0 --set prometheus.tcp.ip=127.0.0.1 "${WSSL[@]}" \
    2> "$TMP/warren.log" &
WPID=$!
for _ in $(seq 100); do
    WPORT=$(grep -o 'AMQP listening on [0-9.]*:[0-9]*' "$TMP/warren.log" | grep -o '[0-9]*$' || true)
    [ -n "$WPORT" ] && break
    sleep 0.1
done
if [ -n "$WPORT" ]; then
    /usr/bin/python3 tests/bench/conns_bench.py warren "$WPID" 127.0.0.1 "$WPORT" ${WTLS:-} || echo "# warren: incomplete"
else
    echo "# warren did not start:"; tail -3 "$TMP/warren.log" | sed 's/^/#   /'
fi
kill "$WPID" 2>/dev/null || true
wait "$WPID" || true
WPID=""
# What the broker logged beside connections opening and closing, counted by kind.
grep -v '\[info\]' "$TMP/warren.log" | sed -E 's/^[0-9-]+ [0-9:.]+ //; s/[0-9]+(\.[0-9]+)*(:[0-9]+)?/N/g' |
    sort | uniq -c | sort -rn | head -5 | sed 's/^/# warren log: /'
