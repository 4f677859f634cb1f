#!/bin/sh
# Installs the Debian packages Warren needs to build, run and test, when they
# are missing. As root it runs apt-get; otherwise it prints the command.
# `deps.sh browser` adds what the console's browser tests need: chromium,
# and node + npm (for playwright-core) unless a node is already on PATH (the
# machine image ships Node 20; Debian's own nodejs package is older).
set -e
PKGS="gcc make pkg-config libevent-dev libssl-dev libsqlite3-dev libjansson-dev \
libcmocka-dev librabbitmq-dev libpcre2-dev zlib1g-dev python3 python3-pika python3-amqp python3-kombu \
clang libclang-rt-14-dev etcd-server openssl"
if [ "${1:-}" = browser ]; then
    PKGS="$PKGS chromium curl"
    command -v node > /dev/null 2>&1 || PKGS="$PKGS nodejs"
    command -v npm > /dev/null 2>&1 || PKGS="$PKGS npm"
fi
# The cluster tests (tests/cluster): ip, tc and bridge for the namespaces;
# RabbitMQ's Java client and a JDK for its failover test.
PKGS="$PKGS iproute2 librabbitmq-client-java openjdk-17-jdk-headless"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done

# rabbitmqadmin, for the management tests: the Python script inside Debian's
# rabbitmq-server package, unpacked into build/tools without installing the
# server (no Erlang needed).
fetch_rabbitmqadmin() {
    root="$(cd "$(dirname "$0")/.." && pwd)"
    [ -x "$root/build/tools/usr/bin/rabbitmqadmin" ] && return 0
    tmp=$(mktemp -d) || return 1
    if (cd "$tmp" && apt-get download -qq rabbitmq-server >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1; apt-get download -qq rabbitmq-server >/dev/null; }); then
        mkdir -p "$root/build/tools" && dpkg-deb -x "$tmp"/rabbitmq-server_*.deb "$root/build/tools"
    else
        echo "warren: could not download rabbitmq-server for rabbitmqadmin" >&2
    fi
    rm -rf "$tmp"
}

# promtool, for the Prometheus tests (`promtool check metrics`): the static
# program alone, taken out of Debian's prometheus package into build/tools
# without installing the package (a 96 MB server with a service of its own).
fetch_promtool() {
    root="$(cd "$(dirname "$0")/.." && pwd)"
    [ -x "$root/build/tools/usr/bin/promtool" ] && return 0
    tmp=$(mktemp -d) || return 1
    if (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1; apt-get download -qq prometheus >/dev/null; }); then
        mkdir -p "$root/build/tools" &&
            dpkg-deb --fsys-tarfile "$tmp"/prometheus_*.deb | tar -x -C "$root/build/tools" ./usr/bin/promtool
    else
        echo "warren: could not download prometheus for promtool" >&2
    fi
    rm -rf "$tmp"
}

if [ -n "$missing" ]; then
    if [ "$(id -u)" != 0 ]; then
        echo "warren: missing packages:$missing" >&2
        echo "run: sudo apt-get install -y$missing" >&2
        exit 1
    fi
    echo "warren: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null || true
    apt-get install -y -qq $missing >/dev/null
fi
fetch_rabbitmqadmin
fetch_promtool
