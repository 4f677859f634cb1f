#!/bin/bash
# Runs the libFuzzer harnesses (build/fuzz/fuzz_*, `make fuzz-bins`): for
# each, first its kept regressions (tests/fuzz/regress/<name>/, every input
# once), then fuzzing for FUZZ_S seconds from its seed corpus
# (tests/fuzz/corpus/<name>/, copied to build/fuzz/corpus/<name>/, which
# keeps what the runs find). Any crash, leak, hang (an input over
# FUZZ_TIMEOUT s), UB or failed check fails; the input is left in
# build/fuzz/artifacts/<name>/. Prints TAP lines: "ok - fuzz regress <name>"
# and "ok - fuzz <name>" with libFuzzer's final line (execs, coverage).
#
# Usage: scripts/fuzz.sh [NAME...]     (default: every harness)
# Env:   FUZZ_S=60 seconds per harness, FUZZ_JOBS=2 harnesses at once,
#        FUZZ_TIMEOUT=10 seconds one input may take, FUZZ_NICE=0
set -u
cd "$(dirname "$0")/.." || exit 1
FUZZ_S=${FUZZ_S:-60}
FUZZ_JOBS=${FUZZ_JOBS:-2}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_NICE=${FUZZ_NICE:-0}
FB=build/fuzz
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ $# -gt 0 ]; then
    names=("$@")
else
    names=()
    for b in "$FB"/fuzz_*; do
        [ -x "$b" ] && names+=("${b##*/fuzz_}")
    done
fi
if [ ${#names[@]} -eq 0 ]; then
    echo "not ok - fuzz: no harness built in $FB (make fuzz-bins)"
    exit 1
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/warren-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$out"' EXIT

# run NAME: regressions, then a timed run; TAP lines into $out/NAME.tap
run() {
    local name=$1 bin=$FB/fuzz_$1 tap=$out/$1.tap log=$out/$1.log
    local regress=tests/fuzz/regress/$name corpus=$FB/corpus/$name art=$FB/artifacts/$name/
    : > "$tap"
    if [ ! -x "$bin" ]; then
        echo "not ok - fuzz $name: $bin not built" >> "$tap"
        return
    fi
    if [ -d "$regress" ]; then
        local files=("$regress"/*)
        if "$bin" -timeout="$FUZZ_TIMEOUT" "${files[@]}" > "$log" 2>&1; then
            echo "ok - fuzz regress $name (${#files[@]} inputs)" >> "$tap"
        else
            echo "not ok - fuzz regress $name" >> "$tap"
            tail -n 40 "$log" | sed 's/^/# /' >> "$tap"
        fi
    fi
    mkdir -p "$corpus" "$art"
    [ -d "tests/fuzz/corpus/$name" ] && cp -n "tests/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null
    if nice -n "$FUZZ_NICE" "$bin" -max_total_time="$FUZZ_S" -timeout="$FUZZ_TIMEOUT" \
        -detect_leaks=1 -rss_limit_mb=2048 -print_final_stats=0 -artifact_prefix="$art" \
        "$corpus" > "$log" 2>&1; then
        local done
        done=$(grep -a 'DONE' "$log" | tail -n 1 | tr -s ' \t' ' ')
        echo "ok - fuzz $name ($done)" >> "$tap"
    else
        echo "not ok - fuzz $name (input kept in $art)" >> "$tap"
        grep -a -v '^#[0-9]' "$log" | tail -n 40 | sed 's/^/# /' >> "$tap"
    fi
}

for name in "${names[@]}"; do
    run "$name" &
    while [ "$(jobs -rp | wc -l)" -ge "$FUZZ_JOBS" ]; do
        wait -n
    done
done
wait
rc=0
for name in "${names[@]}"; do
    cat "$out/$name.tap"
    grep -q '^not ok' "$out/$name.tap" && rc=1
done
exit $rc
