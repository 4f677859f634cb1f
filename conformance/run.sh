#!/bin/bash
# `make conformance`: runs every conformance family (conformance/<family>/run)
# against Warren (started here on an ephemeral port) or against TARGET, and
# with COMPARE=1 against Warren and RabbitMQ, writing conformance/RESULTS.md.
#
#   TARGET=amqp://user:pass@host:port  test that broker instead of starting Warren
#   MGMT=http://host:port              its management API (passed to families)
#   PROMETHEUS=http://host:port        its Prometheus endpoint (rabbitmq_prometheus: 15692)
#   STREAM=host:port                   its stream protocol listener (RABBIT_STREAM with COMPARE=1)
#   COMPARE=1                          Warren and RabbitMQ (RABBIT_URI, RABBIT_MGMT,
#                                      RABBIT_PROMETHEUS)
#   (the Warren run.sh starts gets its management and Prometheus listeners on
#   free ports: --set management.tcp.port=0 --set prometheus.tcp.port=0)
#   QUICK=1                            the quick subset (what `make test` runs)
#   ONLY=regex                         scenario ids to run
#   FORMAT=tap                         TAP lines instead of PASS/FAIL lines
#   FAMILIES="python node"             restrict to these families
#   TIMEOUT=20                         seconds per scenario
#   WARREN_BIN=path                    Warren binary (default build/release/warren)
#   RESTART=cmd                        restarts TARGET for the restart scenarios (durability.*);
#                                      default: run.sh restarts the Warren it started, and a
#                                      RabbitMQ on 127.0.0.1 with rabbitmqctl stop_app/start_app;
#                                      RESTART=none: no restart (those scenarios then fail)
#   RABBIT_RESTART=cmd                 the same for the RabbitMQ side of COMPARE=1
#
# Output: one line per scenario, a summary table, conformance/out/junit.xml;
# exit status 1 if any scenario failed on the broker under test.
set -u
cd "$(dirname "$0")/.."

say() { if [ "${FORMAT:-}" = tap ]; then echo "# $*"; else echo "$*"; fi; }

# Python client libraries: Debian packages, run with /usr/bin/python3.
py_pkgs="python3-pika python3-amqp python3-kombu python3-celery"
if ! /usr/bin/python3 -c 'import pika, amqp, kombu, celery' 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        say "installing $py_pkgs"
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q $py_pkgs >/dev/null 2>&1 ||
            { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $py_pkgs >/dev/null 2>&1; } ||
            say "warning: apt-get install $py_pkgs failed"
    else
        say "missing Python client libraries; run: sudo apt-get install -y $py_pkgs"
    fi
fi

# Without TARGET the suite starts Warren; build it when the default binary is missing.
if [ -z "${TARGET:-}" ] && [ -z "${WARREN_BIN:-}" ] && [ ! -x build/release/warren ]; then
    say "building build/release/warren"
    make -s VARIANT=release build/release/warren >&2 || { say "build failed"; exit 2; }
fi

exec /usr/bin/python3 conformance/suite.py
