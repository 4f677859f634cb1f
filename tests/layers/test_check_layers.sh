#!/bin/bash
# Self-test of scripts/check-layers.sh: builds small trees in a temp dir,
# runs the checker on each with --root, and prints one TAP line a case.
set -u
here=$(cd "$(dirname "$0")" && pwd)
check=$here/../../scripts/check-layers.sh
tmp=$(mktemp -d /tmp/warren-layers.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
n=0
failed=0

# put TREE FILE [LINE...]: writes FILE below TREE, one argument a line.
put() {
    local tree=$1 file=$2; shift 2
    case $file in */*) mkdir -p "$tree/${file%/*}" ;; esac
    printf '%s\n' "$@" > "$tree/$file"
}

# good_tree NAME: a tree that keeps every rule; prints its path.
# Layers low < mid < high (and an absent "planned"); warrenctl standalone;
# tests unchecked.
good_tree() {
    local t=$tmp/$1
    put "$t" scripts/layers '# bottom first' low mid '' planned high \
        'standalone warrenctl' 'unchecked tests'
    put "$t" low/low.h '#pragma once'
    put "$t" low/low_int.h '#pragma once'
    put "$t" low/low.c '#include "low.h"' '#include "low_int.h"' '#include <stdio.h>'
    put "$t" low/sub/deep.c '#include "../low_int.h"'
    put "$t" mid/mid.h '#include "../low/low.h"'
    put "$t" mid/mid.c '  #  include "mid.h"' '#include "stdbool.h"'
    put "$t" high/high.h '#include "../mid/mid.h"'
    put "$t" high/high.c '#include "high.h"' '#include "../low/low.h"' '#include "./../mid/../mid/mid.h"'
    put "$t" warrenctl/ctl.h '#pragma once'
    put "$t" warrenctl/ctl_internal.h '#pragma once'
    put "$t" warrenctl/main.c '#include "ctl.h"' '#include "ctl_internal.h"'
    put "$t" tests/unit/test_low.c '#include "../../low/low_int.h"' '#include "../../high/high.h"'
    echo "$t"
}

# run TREE [ARGS...]: runs the checker; sets $out (its stdout) and $rc.
run() {
    local tree=$1; shift
    out=$("$check" --root "$tree" "$@" 2>"$tmp/stderr")
    rc=$?
}

# result OK DESCRIPTION: prints the TAP line; on failure the output as comments.
result() {
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=1
        echo "# exit status $rc; output:"
        printf '%s\n' "$out" | sed 's/^/#   /'
        sed 's/^/#   stderr: /' "$tmp/stderr"
    fi
}

# expect_fail DESCRIPTION LINE...: the last run exited 1 and printed exactly LINEs.
expect_fail() {
    local what=$1; shift
    [ "$rc" = 1 ] && [ "$out" = "$(printf '%s\n' "$@")" ]
    result $? "$what"
}

t=$(good_tree good)
run "$t"
[ "$rc" = 0 ] && [ -z "$out" ]
result $? "a good tree passes (same-folder, relative, nested and private-in-own-folder includes, an absent layer, tests unchecked)"

run "$t" --graph
[ "$rc" = 0 ] && [ "$out" = "$(printf '%s\n' 'low ->' 'mid -> low' 'planned -> (no sources)' \
    'high -> low mid' 'warrenctl (standalone) ->')" ]
result $? "--graph prints folder -> folders it includes, in layer order"

t=$(good_tree up)
put "$t" low/bad.c '#include "low.h"' '' '#include "../high/high.h"'
run "$t"
expect_fail "an upward include fails, naming file, line and both folders" \
    'low/bad.c:3: folder low includes high/high.h of folder high, which is above it' \
    'cycle: low -> high -> low' \
    'cycle: low -> high -> mid -> low'

t=$(good_tree up-graph)
put "$t" mid/bad.c '#include "../high/high.h"'
run "$t" --graph
[ "$rc" = 1 ] && printf '%s\n' "$out" | grep -qx 'mid -> low high!'
result $? "--graph marks an edge that breaks the layering with !"

t=$(good_tree cycle)
put "$t" scripts/layers a b c
put "$t" a/a.h '#include "../b/b.h"'
put "$t" b/b.h '#include "../c/c.h"'
put "$t" c/c.h '#pragma once'
put "$t" c/c.c '#include "../a/a.h"'
rm -rf "$t/low" "$t/mid" "$t/high" "$t/warrenctl" "$t/tests"
run "$t"
expect_fail "a cycle fails and is named" \
    'a/a.h:1: folder a includes b/b.h of folder b, which is above it' \
    'b/b.h:1: folder b includes c/c.h of folder c, which is above it' \
    'cycle: a -> b -> c -> a'

t=$(good_tree private)
put "$t" mid/peek.c '#include "../low/low_int.h"'
put "$t" high/peek.h '#include "../warrenctl/ctl_internal.h"'
run "$t"
expect_fail "another folder's private header (*_int.h) fails" \
    'high/peek.h:1: folder high includes warrenctl/ctl_internal.h of folder warrenctl, which belongs to the standalone program warrenctl' \
    'mid/peek.c:1: folder mid includes low/low_int.h of folder low, which is private to folder low'

t=$(good_tree private-up)
put "$t" low/peek.c '#include "../mid/mid_internal.h"'
put "$t" mid/mid_internal.h '#pragma once'
run "$t"
expect_fail "an upward include of a private header (*_internal.h) is one line with both reasons" \
    'low/peek.c:1: folder low includes mid/mid_internal.h of folder mid, which is above it and private to folder mid' \
    'cycle: low -> mid -> low'

t=$(good_tree unknown)
put "$t" mid/new.c '#include "../newfolder/new.h"'
put "$t" newfolder/new.h '#pragma once'
run "$t"
expect_fail "an include of a folder not in scripts/layers fails, and so does the folder" \
    'mid/new.c:1: folder mid includes newfolder/new.h of folder newfolder, which is not listed in scripts/layers (unknown module: place it there)' \
    'newfolder/: folder with C sources is not listed in scripts/layers (unknown module: place it there)'

t=$(good_tree unknown-tests)
put "$t" high/t.c '#include "../tests/unit/helper.h"'
put "$t" tests/unit/helper.h '#pragma once'
run "$t"
expect_fail "an include of an unchecked folder's header (tests) fails as unknown" \
    'high/t.c:1: folder high includes tests/unit/helper.h of folder tests, which is not listed in scripts/layers (unknown module: place it there)'

t=$(good_tree outside)
put "$t" low/out.c '#include "../../elsewhere.h"'
run "$t"
expect_fail "an include out of the tree fails" \
    'low/out.c:1: folder low includes "../../elsewhere.h", which is outside the tree'

t=$(good_tree standalone)
put "$t" warrenctl/x.c '#include "../low/low.h"'
put "$t" high/ctl.c '#include "../warrenctl/ctl.h"'
run "$t"
expect_fail "the standalone program and the layers include nothing of each other" \
    'high/ctl.c:1: folder high includes warrenctl/ctl.h of folder warrenctl, which belongs to the standalone program warrenctl' \
    'warrenctl/x.c:1: folder warrenctl includes low/low.h of folder low, but warrenctl is standalone: it may include only its own headers'

t=$(good_tree badconf)
put "$t" scripts/layers low mid low 'mid high'
run "$t"
[ "$rc" = 2 ] && grep -q '^scripts/layers:3: low is listed twice$' "$tmp/stderr" &&
    grep -q '^scripts/layers:4: one folder a line$' "$tmp/stderr"
result $? "a malformed layers file is refused (exit 2, file:line on stderr)"

echo "1..$n"
exit $failed
