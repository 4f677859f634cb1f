#!/bin/bash
# Self-test of scripts/check-links.sh: compiles a few one-function objects
# into a build folder in a temp dir and runs the checker on it; one TAP
# line a case.
set -u
here=$(cd "$(dirname "$0")" && pwd)
check=$here/../../scripts/check-links.sh
tmp=$(mktemp -d /tmp/warren-links.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
printf '%s\n' '# bottom first' low high > "$tmp/layers"
n=0
failed=0

# obj FOLDER NAME CODE: compiles CODE into $tmp/build/FOLDER/NAME.o
obj() {
    mkdir -p "$tmp/build/$1"
    printf '%s\n' "$3" > "$tmp/$2.c"
    ${CC:-cc} -c -o "$tmp/build/$1/$2.o" "$tmp/$2.c"
}

result() { # OK DESCRIPTION
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        failed=1
        printf '%s\n' "$out" | sed 's/^/#   /'
    fi
}

obj low low 'int low_value(void) { return 1; }'
obj high high 'int low_value(void); int high_value(void) { return low_value() + 1; }'
out=$("$check" --layers "$tmp/layers" "$tmp/build" 2>&1)
result $? "calls downwards only: passes"

obj low bad 'int high_value(void); int low_twice(void) { return 2 * high_value(); }'
out=$("$check" --layers "$tmp/layers" "$tmp/build" 2>&1)
rc=$?
want="$tmp/build/low/bad.o: folder low uses high_value, defined in folder high above it"
[ $rc = 1 ] && [ "$out" = "$want" ]
result $? "a call upwards (declared low, defined high) fails, naming object, symbol and folders"

echo "1..$n"
exit $failed
