# rabbit.sh -- sourced by the benchmarks that start a RabbitMQ of their own
# beside Warren (conns.sh, tls.sh). Run as root: RabbitMQ runs as its user,
# under /tmp/NODE, with the descriptor limit raised (Debian's wrapper's su
# would leave it at 1024). Sets RABBIT_UP while it runs; the caller's EXIT
# trap runs bench_cleanup.

free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# start_rabbit NODE PORT CONFIG [ERL_ARGS] [PLUGINS]: rabbitmq.conf gets
# CONFIG after the AMQP listener on 127.0.0.1:PORT; PLUGINS (e.g.
# rabbitmq_stream; default none); the distribution port is PORT + 20000.
# Returns once the node runs; RABBIT_PID is its beam.smp.
start_rabbit() {
    local node=$1 port=$2 config=$3 erl_args=${4:-} plugins=${5:-} dir=/tmp/$1
    rm -rf "$dir" && mkdir -p "$dir"
    printf 'listeners.tcp.default = 127.0.0.1:%s\nloopback_users = none\n%s\n' "$port" "$config" \
        > "$dir/rabbitmq.conf"
    echo "[$plugins]." > "$dir/enabled_plugins" # no management listener to collide with
    chown -R rabbitmq: "$dir" 2>/dev/null || true
    # A closed client socket in TIME_WAIT may hold the distribution port (it
    # is in the ephemeral range) for up to a minute after an earlier run.
    for _ in $(seq 70); do
        ss -Htan "( sport = :$((port + 20000)) )" | grep -q . || break
        sleep 1
    done
    RABBITMQ_NODENAME=$node@localhost RABBITMQ_NODE_PORT=$port RABBITMQ_DIST_PORT=$((port + 20000)) \
    RABBITMQ_MNESIA_BASE=$dir/mnesia RABBITMQ_LOG_BASE=$dir/log RABBITMQ_CONFIG_FILE=$dir/rabbitmq \
    RABBITMQ_ENABLED_PLUGINS_FILE=$dir/enabled_plugins RABBITMQ_PID_FILE=$dir/pid \
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="$erl_args" \
        su rabbitmq -s /bin/sh -c "cd /var/lib/rabbitmq && ulimit -n $(ulimit -Hn) &&
            exec /usr/lib/rabbitmq/bin/rabbitmq-server" > "$dir/out" 2>&1 &
    RABBIT_UP=$node
    rabbitmqctl -q -n "$node@localhost" wait "$dir/pid" --timeout 120 > /dev/null
    RABBIT_PID=$(cat "$dir/pid")
}

stop_rabbit() {
    if [ -n "${RABBIT_UP:-}" ]; then
        rabbitmqctl -q -n "$RABBIT_UP@localhost" stop > /dev/null 2>&1 || true
    fi
    RABBIT_UP=""
}

# The EXIT trap of a benchmark: stops Warren ($WPID, if set), the RabbitMQ
# started here, and removes the benchmark's $TMP.
bench_cleanup() {
    if [ -n "${WPID:-}" ]; then
        kill "$WPID" 2>/dev/null && wait "$WPID" 2>/dev/null
    fi
    stop_rabbit
    rm -rf "${TMP:?}"
}
