#!/bin/bash
# `make test`: every layer -- codegen check, folder layering check (includes,
# and after the build the symbols objects use), unit
# tests, integration tests (pika and rabbitmq-c against a broker started on
# an ephemeral port), the crash test (SIGKILL at random moments,
# CRASH_TRIALS=20), the conformance suite's quick subset (every client
# library), the console's browser tests (chromium), a 60 s soak, then unit and
# integration tests again under AddressSanitizer + UBSan, then the fuzzers
# (libFuzzer harnesses 20 s each, the network fuzzer 30 s).
# Each layer prints TAP lines; this script counts them and ends with one
# line "N passed, M failed" (exit 1 on any failure).
set -u
cd "$(dirname "$0")/.."
log=$(mktemp -d /tmp/warren-test.XXXXXX)
trap 'rm -rf "$log"' EXIT
export CMOCKA_MESSAGE_OUTPUT=TAP
JOBS=${JOBS:-2}

# run_layer NAME CMD...: runs CMD, echoes its output, records it for counting;
# a non-zero exit with no "not ok" line is itself a failure.
run_layer() {
    local name=$1; shift
    echo "== $name"
    "$@" > "$log/out" 2>&1
    local rc=$?
    cat "$log/out"
    cat "$log/out" >> "$log/all"
    if [ $rc -ne 0 ] && ! grep -q '^not ok' "$log/out"; then
        echo "not ok - $name exited with status $rc" | tee -a "$log/all"
    fi
}

run_binaries() { # DIR: every test binary in DIR
    local rc=0
    for t in "$1"/test_*; do
        [ -x "$t" ] || continue
        "$t" || rc=1
    done
    return $rc
}

# check_layers WHAT SELFTEST CMD...: the checker's self-test, then the
# checker on this tree: a TAP line each, the checker's findings as comments.
check_layers() {
    local rc=0 out what=$1 selftest=$2
    shift 2
    "$selftest" || rc=1
    if out=$("$@" 2>&1); then
        echo "ok - $what"
    else
        echo "not ok - $what"
        printf '%s\n' "$out" | sed 's/^/# /'
        rc=1
    fi
    return $rc
}

build() { # VARIANT
    make -s -j"$JOBS" VARIANT="$1" build/"$1"/warren unit-bins integration-bins build/slowsync.so
}

run_layer "codegen" scripts/check-codegen.sh
# Folders include headers only downwards in scripts/layers, with no cycle
# and no other folder's private header; after the build, the same on what
# the objects call (a function declared low and defined high is a circle).
run_layer "layering" check_layers "layering: folder graph has no cycle and no upward include" \
    tests/layers/test_check_layers.sh scripts/check-layers.sh
run_layer "console assets" /usr/bin/python3 mgmt-ui/gen_assets.py --check
for variant in release asan; do
    if ! build "$variant" > "$log/build" 2>&1; then
        cat "$log/build"
        echo "not ok - build ($variant)" | tee -a "$log/all"
        continue
    fi
    if [ "$variant" = asan ]; then
        export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
        export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    fi
    [ "$variant" = release ] && run_layer "layering (symbols)" check_layers \
        "layering: no object calls a function of a folder above its own" \
        tests/layers/test_check_links.sh scripts/check-links.sh build/release
    run_layer "unit ($variant)" run_binaries build/$variant/tests/unit
    run_layer "integration ($variant)" env VARIANT=$variant WARREN_BIN="$PWD/build/$variant/warren" \
        scripts/itest.sh
    if [ "$variant" = release ]; then
        run_layer "crash (kill -9, $variant)" env WARREN_BIN="$PWD/build/$variant/warren" \
            timeout 600 /usr/bin/python3 tests/crash/crash_test.py "${CRASH_TRIALS:-20}"
        run_layer "crash (kill -9 during a definitions import, $variant)" \
            env WARREN_BIN="$PWD/build/$variant/warren" \
            timeout 300 /usr/bin/python3 tests/crash/definitions_crash_test.py "${CRASH_TRIALS:-20}"
        run_layer "conformance quick subset ($variant)" env QUICK=1 FORMAT=tap \
            WARREN_BIN="$PWD/build/$variant/warren" timeout 900 conformance/run.sh
        run_layer "browser (console, $variant)" env WARREN_BIN="$PWD/build/$variant/warren" \
            tests/browser/run.sh
        # Three nodes on etcd in network namespaces (tests/cluster): failover,
        # fencing, ISR changes; `make cluster-test` is the long run.
        run_layer "cluster (3 nodes, namespaces, $variant)" env WARREN_BIN="$PWD/build/$variant/warren" \
            timeout 1200 /usr/bin/python3 tests/cluster/test_cluster.py --tap
    fi
    # Soak (tests/soak): 60 s of producers, consumers, churn, channel errors,
    # policy changes and management polling; RSS and descriptors flat, no
    # confirmed message lost or duplicated; half the clients over TLS. `make soak`
    # is the hour.
    if [ "$variant" = release ]; then
        run_layer "soak (60 s, $variant)" env SOAK_S=60 WARREN_BIN="$PWD/build/$variant/warren" \
            timeout 600 /usr/bin/python3 tests/soak/soak.py
    fi
done

# ---- fuzzing (tests/fuzz, tests/netfuzz) ----
# The libFuzzer harnesses, built with clang into build/fuzz: each one's kept
# regressions, then FUZZ_TEST_S (20) seconds each, two at a time; then the
# network fuzzer for NETFUZZ_S (30) seconds against the ASan broker built
# above. Longer runs: `make fuzz FUZZ_S=...`.
if make -s -j"$JOBS" fuzz-bins > "$log/build" 2>&1; then
    run_layer "fuzz (libFuzzer, ${FUZZ_TEST_S:-20} s each)" env FUZZ_S="${FUZZ_TEST_S:-20}" \
        FUZZ_JOBS="$JOBS" scripts/fuzz.sh
else
    cat "$log/build"
    echo "not ok - build (fuzz)" | tee -a "$log/all"
fi
run_layer "netfuzz (asan)" env NETFUZZ_S="${NETFUZZ_S:-30}" WARREN_BIN="$PWD/build/asan/warren" \
    timeout 300 /usr/bin/python3 tests/netfuzz/netfuzz.py
# ---- end of fuzzing ----

passed=$(grep -c '^ok ' "$log/all" || true)
failed=$(grep -c '^not ok' "$log/all" || true)
skipped=$(grep -c '^ok .*# *SKIP' "$log/all" || true)
echo
if [ "$failed" -gt 0 ]; then
    echo "Failures:"
    grep '^not ok' "$log/all"
fi
[ "$skipped" -gt 0 ] && echo "($skipped of the passed lines were skips, not counted)"
echo "$((passed - skipped)) passed, $failed failed"
[ "$failed" -eq 0 ]
