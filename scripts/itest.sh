#!/bin/sh
# Runs Warren's integration tests (builds nothing): every C test binary in
# build/$VARIANT/tests/integration/ (cmocka, TAP mode) and then
# tests/integration/run_py.py. Prints one merged TAP stream, numbered
# afresh, with names "c/<area>: <test>" and "py/<area>: <test>", then `1..N`
# and `N passed, M failed`. Exits 1 if anything failed.
#
# Usage: scripts/itest.sh [c|py]        (default: both)
# Env:   VARIANT=release|asan           which build tree (default release)
#        WARREN_BIN=path                broker binary (default build/$VARIANT/warren)
#        WARREN_TEST_TARGET=host:port   test that broker instead of starting Warren
#        ITEST_BIN_TIMEOUT=seconds      limit per C binary / for the Python run (default 900)
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
VARIANT=${VARIANT:-release}
WARREN_BIN=${WARREN_BIN:-$ROOT/build/$VARIANT/warren}
export WARREN_BIN
LIMIT=${ITEST_BIN_TIMEOUT:-900}
WHAT=${1:-all}
PYTHON=/usr/bin/python3   # the system python has pika; a venv python may not

TMP=$(mktemp -d "${TMPDIR:-/tmp}/warren-itest-sh.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
COUNTS="$TMP/counts"
echo "0 0" > "$COUNTS"

# retap PREFIX STATUS < tap-output: renumbers ok/not ok lines, prefixes
# their names, keeps comment lines, drops plans and summaries, and adds a
# failure when the producer exited non-zero without reporting one.
retap() {
    read -r n_pass n_fail < "$COUNTS"
    awk -v prefix="$1" -v status="$2" -v pass="$n_pass" -v fail="$n_fail" -v counts="$COUNTS" '
        function emit(ok, name) {
            if (ok) pass++; else fail++
            printf "%s %d - %s%s\n", ok ? "ok" : "not ok", pass + fail, prefix, name
        }
        /^not ok [0-9]+ - / { sub(/^not ok [0-9]+ - /, ""); emit(0, $0); failed_here++; next }
        /^ok [0-9]+ - /     { sub(/^ok [0-9]+ - /, ""); emit(1, $0); next }
        /^1\.\.[0-9]+$/     { next }
        /^[0-9]+ passed, [0-9]+ failed$/ { next }
        /^# (not )?ok - /   { next }
        /^#/                { print; next }
        /./                 { print "# " $0 }
        END {
            if (status != 0 && failed_here == 0)
                emit(0, "exited with status " status " without reporting a failure")
            print pass, fail > counts
        }'
}

if [ "$WHAT" = all ] || [ "$WHAT" = c ]; then
    found=0
    for bin in "$ROOT/build/$VARIANT/tests/integration"/test_*; do
        [ -f "$bin" ] && [ -x "$bin" ] || continue
        found=1
        area=$(basename "$bin"); area=${area#test_}
        CMOCKA_MESSAGE_OUTPUT=TAP timeout -k 10 "$LIMIT" "$bin" > "$TMP/out" 2>&1
        status=$?
        retap "c/$area: " "$status" < "$TMP/out"
    done
    if [ "$found" = 0 ]; then
        echo "# no C integration binaries in build/$VARIANT/tests/integration (make integration-bins)"
    fi
fi

if [ "$WHAT" = all ] || [ "$WHAT" = py ]; then
    # each Python test's alarm (run_py.py): AddressSanitizer runs the broker
    # two to three times slower
    if [ "$VARIANT" = asan ]; then export WARREN_TEST_TIMEOUT=${WARREN_TEST_TIMEOUT:-60}; fi
    # the stream client's package from its lockfile, before any test's alarm
    # runs (a fresh clone has none; the test would otherwise install it)
    [ -d "$ROOT/tests/integration/stream-node/node_modules/rabbitmq-stream-js-client" ] ||
        (cd "$ROOT/tests/integration/stream-node" && npm ci --no-audit --no-fund --loglevel=error) >&2 ||
        echo "# npm ci in tests/integration/stream-node failed: test_stream_js will say why"
    timeout -k 10 "$LIMIT" "$PYTHON" "$ROOT/tests/integration/run_py.py" > "$TMP/out" 2>&1
    status=$?
    retap "py/" "$status" < "$TMP/out"
fi

read -r n_pass n_fail < "$COUNTS"
echo "1..$((n_pass + n_fail))"
echo "$n_pass passed, $n_fail failed"
[ "$n_fail" = 0 ]
