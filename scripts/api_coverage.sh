#!/bin/bash
# Which integration-test areas call each management route. Runs the areas
# below against Warrens logging at debug level (each request's route is
# logged, see mgmt-ui/http.c), then prints "METHOD PATTERN areas..." for
# every route in mgmt-ui's tables and exits 1 if one is called by none.
# Not part of `make test` (it runs those areas a second time).
# Usage: scripts/api_coverage.sh [AREA...]
set -u
cd "$(dirname "$0")/.." || exit 1
areas=${*:-mgmt mgmt_access mgmt_policy mgmt_parameters mgmt_node prometheus definitions warrenctl redrive quorum permissions policies cluster_mgmt}
tmp=$(mktemp -d /tmp/warren-apicov.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for a in $areas; do
    WARREN_TEST_SET="log.level=debug" WARREN_TEST_LOG="$tmp/$a.log" \
        /usr/bin/python3 tests/integration/run_py.py "$a: " > "$tmp/$a.out" 2>&1
    echo "# $a: $(tail -1 "$tmp/$a.out")" >&2
    grep -o 'management: [A-Z]* /api[^ ]*' "$tmp/$a.log" 2>/dev/null | sort -u |
        sed "s/^management: //; s/\$/ $a/" >> "$tmp/hits"
done
grep -ho '{EVHTTP_REQ_[A-Z]*, *"[^"]*"' mgmt-ui/*.c | sed 's/{EVHTTP_REQ_//; s/, *"/ /; s/"$//' |
    sort -u | awk -v hits="$tmp/hits" '
    BEGIN { while ((getline l < hits) > 0) { split(l, f, " "); k = f[1] " " f[2]; h[k] = h[k] " " f[3] } }
    { k = $1 " " $2; printf "%-7s %-52s%s\n", $1, $2, (k in h) ? h[k] : "  (none)"; if (!(k in h)) miss++ }
    END { exit miss > 0 }'
