#!/bin/bash
# Checks the folder layering that scripts/layers sets out: reads every
# `#include "..."` of the .c and .h files below the listed folders, resolves
# it against the including file's folder ("x.h", "../queue/queue.h"), and
# reports, one line each:
#   FILE:LINE: folder A includes B/x.h of folder B, which is above it
#                         (B comes after A in scripts/layers)
#   FILE:LINE: ..., which is private to folder B       (*_int.h, *_internal.h)
#   FILE:LINE: ..., which is not listed in scripts/layers (unknown module)
#   FILE:LINE: ... standalone ...      (warrenctl and the broker mix headers)
#   DIR/: folder with C sources is not listed in scripts/layers
#   cycle: A -> B -> A                  (a cycle in the folder graph)
# Exit 0 when nothing is reported, 1 when something is, 2 on a usage error
# or a malformed layers file.
set -u

usage() {
    cat <<'EOF'
usage: scripts/check-layers.sh [--root DIR] [--layers FILE] [--graph]
  --root DIR     the tree to check (default: this checkout)
  --layers FILE  the layer order, relative to DIR (default: scripts/layers)
  --graph        first print the folder graph, one line a folder:
                 "A -> B C" (A includes headers of B and C); an edge that
                 breaks the layering is marked with a trailing "!"
Layers file: one folder a line, bottom first; "standalone NAME" for a
separate program; "unchecked NAME..." for folders that are not layers
(tests, tools); "#" starts a comment.
EOF
}

root=$(cd "$(dirname "$0")/.." && pwd)
layers=
graph=0
while [ $# -gt 0 ]; do
    case $1 in
        --root) [ $# -ge 2 ] || { usage >&2; exit 2; }; root=$2; shift 2 ;;
        --root=*) root=${1#--root=}; shift ;;
        --layers) [ $# -ge 2 ] || { usage >&2; exit 2; }; layers=$2; shift 2 ;;
        --layers=*) layers=${1#--layers=}; shift ;;
        --graph) graph=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; exit 2 ;;
    esac
done
cd "$root" 2>/dev/null || { echo "check-layers: no folder $root" >&2; exit 2; }
layers=${layers:-scripts/layers}
[ -r "$layers" ] || { echo "check-layers: cannot read $layers" >&2; exit 2; }

# Every .c and .h below the root, except in hidden and unchecked folders.
prune=(-name '.*')
for d in $(sed 's/#.*//' "$layers" | awk '$1 == "unchecked" { for (i = 2; i <= NF; i++) print $i }'); do
    prune+=(-o -path "./${d%/}")
done
files=$(find . -mindepth 1 \( "${prune[@]}" \) -prune -o -type f \( -name '*.c' -o -name '*.h' \) -print |
        sed 's|^\./||' | LC_ALL=C sort)

printf '%s\n' "$files" | awk -v graph="$graph" -v lfile="$layers" '
function fail(msg) { msgs[++nmsg] = msg; bad = 1 }
function conf_err(n, msg) { print lfile ":" n ": " msg > "/dev/stderr"; conf = 1 }
# The module a path belongs to: the longest listed folder it lies in.
function module_of(p,   i, m) {
    m = ""
    for (i = 1; i <= nmod; i++)
        if (index(p, mods[i] "/") == 1 && length(mods[i]) > length(m)) m = mods[i]
    return m
}
function top_of(p) { return index(p, "/") ? substr(p, 1, index(p, "/") - 1) : "." }
# p with "." and ".." resolved; "" when it climbs out of the root.
function normpath(p,   n, parts, out, k, i, r) {
    n = split(p, parts, "/"); k = 0
    for (i = 1; i <= n; i++) {
        if (parts[i] == "" || parts[i] == ".") continue
        if (parts[i] == "..") { if (k == 0) return ""; k--; continue }
        out[++k] = parts[i]
    }
    r = out[1]
    for (i = 2; i <= k; i++) r = r "/" out[i]
    return r
}
function exists(p,   r, x) { r = (getline x < p); if (r >= 0) close(p); return r >= 0 }
function add_node(m) { if (!(m in isnode)) { isnode[m] = 1; node[++nnode] = m } }
function check(f, ln, m, inc,   dir, t, tm, why, where) {
    if (inc ~ /^\//) return
    dir = index(f, "/") ? f : ""
    sub(/\/[^\/]*$/, "", dir)
    t = normpath(dir == "" ? inc : dir "/" inc)
    if (t == "") { fail(f ":" ln ": folder " m " includes \"" inc "\", which is outside the tree"); return }
    if (!exists(t) && inc !~ /\//) return   # not beside it: a system or library header
    tm = module_of(t)
    if (tm == m) return
    where = f ":" ln ": folder " m " includes " t
    if (tm == "") {
        tm = top_of(t); add_node(tm); edge[m, tm] = 1; badedge[m, tm] = 1
        fail(where " of folder " tm ", which is not listed in " lfile " (unknown module: place it there)")
        return
    }
    edge[m, tm] = 1
    where = where " of folder " tm
    if (kind[m] == "standalone") {
        badedge[m, tm] = 1
        fail(where ", but " m " is standalone: it may include only its own headers"); return
    }
    if (kind[tm] == "standalone") {
        badedge[m, tm] = 1
        fail(where ", which belongs to the standalone program " tm); return
    }
    why = ""
    if (rank[tm] > rank[m]) { why = "above it"; badedge[m, tm] = 1 }
    if (t ~ /(_int|_internal)\.h$/) {
        why = why (why == "" ? "" : " and ") "private to folder " tm; badedge[m, tm] = 1
    }
    if (why != "") fail(where ", which is " why)
}
function dfs(u,   i, j, v, c) {
    color[u] = 1; stack[++sp] = u
    for (i = 1; i <= nnode; i++) {
        v = node[i]
        if (!((u, v) in edge)) continue
        if (color[v] == 1) {            # back to a folder on the path: a cycle
            for (j = sp; stack[j] != v; j--) ;
            c = v
            for (j++; j <= sp; j++) c = c " -> " stack[j]
            fail("cycle: " c " -> " v)
        } else if (color[v] == 0) dfs(v)
    }
    sp--; color[u] = 2
}

BEGIN {                                 # the layers file
    while ((r = getline l < lfile) > 0) {
        lno++; sub(/#.*/, "", l)
        n = split(l, w, /[ \t]+/)
        if (n > 0 && w[1] == "") { for (i = 1; i < n; i++) w[i] = w[i + 1]; n-- }
        if (n > 0 && w[n] == "") n--
        if (n == 0) continue
        if (w[1] == "standalone" || w[1] == "unchecked") { k = w[1]; first = 2 } else { k = "layer"; first = 1 }
        if (k == "layer" && n > 1) { conf_err(lno, "one folder a line"); continue }
        if (n < first) { conf_err(lno, w[1] " names no folder"); continue }
        for (i = first; i <= n; i++) {
            m = w[i]; sub(/\/+$/, "", m)
            if (m in kind) { conf_err(lno, m " is listed twice"); continue }
            kind[m] = k
            if (k == "unchecked") continue
            mods[++nmod] = m; add_node(m)
            rank[m] = k == "layer" ? ++nlayer : 0
        }
    }
    if (r < 0) { print "check-layers: cannot read " lfile > "/dev/stderr"; conf = 1 }
    if (conf) exit 2
}
$0 != "" {                              # a source file
    f = $0; m = module_of(f)
    if (m == "") {
        t = top_of(f)
        if (!(t in unplaced)) { unplaced[t] = 1; unplaced_order[++nunplaced] = t }
        next
    }
    has_files[m] = 1
    ln = 0
    while ((getline line < f) > 0) {
        ln++
        if (line !~ /^[ \t]*#[ \t]*include[ \t]*"/) continue
        inc = line; sub(/^[^"]*"/, "", inc); sub(/".*$/, "", inc)
        check(f, ln, m, inc)
    }
    close(f)
}
END {
    if (conf) exit 2
    if (graph) {
        for (i = 1; i <= nnode; i++) {
            u = node[i]
            if (!(u in kind)) continue
            s = u (kind[u] == "standalone" ? " (standalone)" : "") " ->"
            if (!(u in has_files)) s = s " (no sources)"
            for (j = 1; j <= nnode; j++)
                if ((u, node[j]) in edge) s = s " " node[j] (((u, node[j]) in badedge) ? "!" : "")
            print s
        }
    }
    for (i = 1; i <= nunplaced; i++) {
        t = unplaced_order[i]
        fail((t == "." ? "./" : t "/") ": folder with C sources is not listed in " lfile \
             " (unknown module: place it there)")
    }
    for (i = 1; i <= nnode; i++) if (color[node[i]] == 0) dfs(node[i])
    for (i = 1; i <= nmsg; i++) print msgs[i]
    exit bad
}'
