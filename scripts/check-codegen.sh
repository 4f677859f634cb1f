#!/bin/sh
# Regenerates the codec from the spec into a temp dir and compares it with
# the committed amqp/amqp_spec.[ch]. Prints one TAP line for the test runner;
# exits 1 when the committed files are stale or were edited by hand.
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
if ! /usr/bin/python3 amqp/gen_codec.py amqp/amqp-rabbitmq-0.9.1.json "$tmp"; then
    echo "not ok - codegen differs (generator failed)"
    exit 1
fi
status=0
for f in amqp_spec.h amqp_spec.c; do
    if ! diff -u "amqp/$f" "$tmp/$f" >&2; then
        echo "check-codegen: amqp/$f differs from the generator's output;" \
             "run 'make codegen'" >&2
        status=1
    fi
done
if [ $status = 0 ]; then
    echo "ok - codegen up to date"
else
    echo "not ok - codegen differs"
fi
exit $status
