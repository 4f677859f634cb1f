#!/usr/bin/env bash
# tls.sh -- TLS against plain TCP, Warren and RabbitMQ in one run: starts a
# release Warren and a RabbitMQ, each with a plain and a TLS listener on
# tests/tls/server.pem, and runs tests/bench/tls_bench.py against both
# (a16, persistent with confirms, handshakes per second full and resumed).
#
#   tests/bench/tls.sh            (writes tests/bench/last-tls.txt)
#
# Env: MESSAGES (2000000), CONFIRMS (500000), S_TIME (5) for tls_bench.py; RABBIT=0 skips
# RabbitMQ; RABBIT_NODE (rtls) and RABBIT_PORT (25672, TLS on +1) name the
# RabbitMQ started here; WARREN_BIN (build/release/warren). Run as root:
# RabbitMQ runs as its own user.
set -eu
cd "$(dirname "$0")/../.."
ROOT=$PWD
make -s -j2 VARIANT=release build/release/warren
WARREN_BIN=${WARREN_BIN:-$ROOT/build/release/warren}
NODE=${RABBIT_NODE:-rtls}
RPORT=${RABBIT_PORT:-25672}
TMP=$(mktemp -d /tmp/warren-tls.XXXXXX)
WPID=""
. tests/bench/rabbit.sh
trap bench_cleanup EXIT

cp tests/tls/ca.pem tests/tls/server.pem tests/tls/server.key "$TMP"/
chmod 755 "$TMP" && chmod a+r "$TMP"/*          # RabbitMQ runs as its own user
TARGETS=()

mkdir -p "$TMP/warren"
WPLAIN=$(free_port) WTLS=$(free_port)
"$WARREN_BIN" --set "listeners.tcp.default=127.0.0.1:$WPLAIN" --set "listeners.ssl.default=127.0.0.1:$WTLS" \
    --set "ssl_options.certfile=$TMP/server.pem" --set "ssl_options.keyfile=$TMP/server.key" \
    --set "ssl_options.cacertfile=$TMP/ca.pem" --set "data_dir=$TMP/warren" \
    --set management.tcp.port=0 --set management.tcp.ip=127.0.0.1 \
    --set prometheus.tcp.port=0 --set prometheus.tcp.ip=127.0.0.1 2> "$TMP/warren.log" &
WPID=$!
for _ in $(seq 100); do
    grep -q "AMQP listening on 127.0.0.1:$WTLS" "$TMP/warren.log" && break
    sleep 0.1
done
TARGETS+=("warren=127.0.0.1:$WPLAIN:$WTLS:$WPID")

if [ "${RABBIT:-1}" = 1 ]; then
    start_rabbit "$NODE" "$RPORT" "listeners.ssl.default = 127.0.0.1:$((RPORT + 1))
ssl_options.certfile = $TMP/server.pem
ssl_options.keyfile = $TMP/server.key
ssl_options.cacertfile = $TMP/ca.pem"
    TARGETS+=("rabbitmq=127.0.0.1:$RPORT:$((RPORT + 1)):$RABBIT_PID")
fi

exec > >(tee tests/bench/last-tls.txt) 2>&1
echo "# tests/bench/tls.sh ($(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD), $(nproc) cores," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)); release Warren, RabbitMQ" \
     "$( [ -n "$RABBIT_UP" ] && rabbitmqctl -q -n "$NODE@localhost" version)," \
     "tests/tls/server.pem (RSA 2048), client without a certificate"
/usr/bin/python3 tests/bench/tls_bench.py "${TARGETS[@]}" --messages "${MESSAGES:-2000000}" \
    --confirms "${CONFIRMS:-500000}" --s-time "${S_TIME:-5}"
