#!/usr/bin/env python3
"""Turns peer-suite output into per-test results and the comparison report.

Used by conformance/peer/run.sh; standard library only.

  peer_results.py go-log LOG OUT.tsv       go test -v output -> name<TAB>status<TAB>detail
  peer_results.py mocha-json JSON OUT.tsv  mocha json reporter -> same
  peer_results.py report RESULTS_DIR OUT.md
      RESULTS_DIR holds <suite>.<broker>.tsv plus <suite>.<broker>.meta
      (key=value lines: label, note, seconds) and suites.txt (one suite id a
      line, then a TAB and its description). Prints the table and writes OUT.md.

status is pass, fail or skip. A Go test that started but never reported
(the binary timed out or crashed) counts as a fail.
"""
import json
import os
import re
import sys

BROKERS = (("warren", "Warren"), ("rabbitmq", "RabbitMQ"))
DETAIL_MAX = 600


def clean(text):
    text = re.sub(r"\s+", " ", text or "").strip()
    return text[:DETAIL_MAX]


def parse_go_log(path):
    """Top-level tests only (subtests roll up into their parent)."""
    status, output, started, current = {}, {}, [], None
    result_re = re.compile(r"^--- (PASS|FAIL|SKIP): (\S+)")
    run_re = re.compile(r"^=== (RUN|CONT|PAUSE)\s+(\S+)")
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = run_re.match(line)
            if m:
                name = m.group(2)
                if "/" not in name:
                    current = name
                    if name not in started:
                        started.append(name)
                continue
            m = result_re.match(line)
            if m:
                status[m.group(2)] = m.group(1).lower()
                current = None
                continue
            if current and line.startswith("    "):
                output.setdefault(current, []).append(line.strip())
    rows = []
    for name in started + [n for n in status if n not in started]:
        st = status.get(name)
        lines = list(dict.fromkeys(output.get(name, [])))    # drop repeats, keep order
        detail = " | ".join(lines[-4:])                       # the failure is usually last
        if st is None:
            st, detail = "fail", "no result: test hung or the test binary died. " + detail
        rows.append((name, st, clean(detail)))
    return rows


def parse_mocha_json(path):
    with open(path, errors="replace") as f:
        text = f.read()
    data = json.loads(text[text.index("{"):])
    rows = []
    for t in data.get("passes", []):
        rows.append((t["fullTitle"], "pass", ""))
    for t in data.get("failures", []):
        err = t.get("err") or {}
        rows.append((t["fullTitle"], "fail", clean(err.get("message") or err.get("stack") or "")))
    for t in data.get("pending", []):
        rows.append((t["fullTitle"], "skip", ""))
    return rows


def write_tsv(rows, out):
    with open(out, "w") as f:
        for name, st, detail in rows:
            f.write("%s\t%s\t%s\n" % (name.replace("\t", " "), st, detail.replace("\t", " ")))


def read_tsv(path):
    """name -> (status, detail); a repeated name (mocha allows two tests
    with one title) gets " #2", " #3"... so every test counts."""
    rows = {}
    if not os.path.exists(path):
        return None
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            name, n = parts[0], 1
            while name in rows:
                n += 1
                name = "%s #%d" % (parts[0], n)
            rows[name] = (parts[1], parts[2] if len(parts) > 2 else "")
    return rows


def read_meta(path):
    meta = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    meta[k] = v
    return meta


def cell(rows, meta):
    if rows is None:
        return "not run (%s)" % meta.get("note", "no results")
    counts = {s: sum(1 for st, _ in rows.values() if st == s) for s in ("pass", "fail", "skip")}
    text = "%d/%d/%d" % (counts["pass"], counts["fail"], counts["skip"])
    if meta.get("seconds"):
        text += " (%ss)" % meta["seconds"]
    if meta.get("note"):
        text += " [%s]" % meta["note"]
    return text


def report(results_dir, out_md):
    suites = []
    with open(os.path.join(results_dir, "suites.txt")) as f:
        for line in f:
            if line.strip():
                sid, _, desc = line.rstrip("\n").partition("\t")
                suites.append((sid, desc))
    lines = ["suite | Warren pass/fail/skip | RabbitMQ pass/fail/skip", "--- | --- | ---"]
    regressions = []
    warren_only_fail_count = 0
    for sid, desc in suites:
        res = {}
        cells = []
        for key, _ in BROKERS:
            rows = read_tsv(os.path.join(results_dir, "%s.%s.tsv" % (sid, key)))
            meta = read_meta(os.path.join(results_dir, "%s.%s.meta" % (sid, key)))
            res[key] = rows
            cells.append(cell(rows, meta))
        lines.append("%s | %s | %s" % (desc or sid, cells[0], cells[1]))
        w, r = res["warren"], res["rabbitmq"]
        if w is None:
            continue
        for name, (st, detail) in w.items():
            if st != "fail":
                continue
            r_st = r.get(name, ("missing", ""))[0] if r is not None else "not run"
            if r is None or r_st == "pass":
                warren_only_fail_count += 1
                regressions.append((sid, name, r_st, detail))

    md = ["# Peer client suites (run unchanged against Warren and RabbitMQ)", ""]
    meta_lines = []
    for sid, desc in suites:
        for key, label in BROKERS:
            meta = read_meta(os.path.join(results_dir, "%s.%s.meta" % (sid, key)))
            if meta.get("target"):
                meta_lines.append("- %s on %s: %s" % (sid, label, meta["target"]))
    md += ["| " + lines[0] + " |", "| --- | --- | --- |"]
    md += ["| " + l + " |" for l in lines[2:]]
    md += ["", "Counts are pass/fail/skip per test (Go: top-level tests and examples; "
           "mocha: test cases, pending = skip), with wall time.", ""]
    md += ["## Fail on Warren, pass on RabbitMQ", ""]
    if regressions:
        for sid, name, r_st, detail in regressions:
            note = "" if r_st == "pass" else " (RabbitMQ: %s)" % r_st
            md.append("- %s `%s`%s: %s" % (sid, name, note, detail or "(no output)"))
    else:
        md.append("None.")
    md += ["", "## Runs", ""] + meta_lines
    os.makedirs(os.path.dirname(os.path.abspath(out_md)), exist_ok=True)
    with open(out_md, "w") as f:
        f.write("\n".join(md) + "\n")

    for l in lines:
        print(l)
    print()
    print("fail on Warren, pass on RabbitMQ: %d" % warren_only_fail_count)
    for sid, name, r_st, detail in regressions:
        print("  %s %s%s: %s" % (sid, name, "" if r_st == "pass" else " (RabbitMQ: %s)" % r_st,
                                 detail[:200]))


def main(argv):
    if len(argv) == 4 and argv[1] == "go-log":
        write_tsv(parse_go_log(argv[2]), argv[3])
    elif len(argv) == 4 and argv[1] == "mocha-json":
        write_tsv(parse_mocha_json(argv[2]), argv[3])
    elif len(argv) == 4 and argv[1] == "report":
        report(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
