#!/bin/bash
# The layering of scripts/layers, checked on what the code calls rather
# than what it includes: every symbol an object of a folder uses (nm -u)
# must be defined in that folder or one below it. It catches what the
# include check cannot: a function declared low and defined high, which is
# a circle all the same. Reports, one line each,
#   OBJ: folder A uses SYMBOL, defined in folder B above it
# and exits 1 when there is any (0 when none, 2 on a usage error).
#   usage: scripts/check-links.sh [--layers FILE] BUILD_DIR
set -u
layers=$(cd "$(dirname "$0")" && pwd)/layers
[ "${1:-}" = --layers ] && { layers=$2; shift 2; }
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: scripts/check-links.sh [--layers FILE] BUILD_DIR" >&2; exit 2; }
build=$1
order=$(sed 's/#.*//' "$layers" | awk 'NF == 1 { print $1 }')
# rank of each layer folder, then every object's defined and used symbols
# (nm -A prefixes each line with the object's path)
i=0
ranks=
objs=()
for d in $order; do
    ranks="$ranks $d=$i"
    for o in "$build/$d"/*.o; do [ -f "$o" ] && objs+=("$o"); done
    i=$((i + 1))
done
[ ${#objs[@]} -gt 0 ] || { echo "check-links: no objects under $build" >&2; exit 2; }
{ nm -A --defined-only -g "${objs[@]}" 2>/dev/null | awk '{ print "D", $1, $3 }'
  nm -A -u "${objs[@]}" 2>/dev/null | awk '{ print "U", $1, $3 }'; } |
awk -v ranks="$ranks" -v build="$build/" '
    BEGIN { n = split(ranks, r, " "); for (i = 1; i <= n; i++) { split(r[i], kv, "="); rank[kv[1]] = kv[2] } }
    {
        obj = $2; sub(/:$/, "", obj); sub(/:.*/, "", obj)
        folder = substr(obj, length(build) + 1); sub(/\/.*/, "", folder)
    }
    $1 == "D" { def[$3] = folder; next }
    { used[++u] = obj " " folder " " $3 }
    END {
        for (i = 1; i <= u; i++) {
            split(used[i], f, " ")
            if ((f[3] in def) && rank[def[f[3]]] > rank[f[2]]) {
                printf "%s: folder %s uses %s, defined in folder %s above it\n", f[1], f[2], f[3], def[f[3]]
                bad = 1
            }
        }
        exit bad
    }'
