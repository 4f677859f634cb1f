#!/bin/sh
# Installs the Debian packages Warren needs to build, run and test, when they
# are missing. As root it runs apt-get; otherwise it prints the command.
set -e
PKGS="gcc make pkg-config libevent-dev libssl-dev libsqlite3-dev libjansson-dev \
libcmocka-dev librabbitmq-dev libpcre2-dev python3 python3-pika python3-amqp python3-kombu"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "warren: missing packages:$missing" >&2
    echo "run: sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "warren: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null || true
apt-get install -y -qq $missing >/dev/null
