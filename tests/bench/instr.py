#!/usr/bin/python3
"""`make bench`'s message scenarios by instructions per message (callgrind).

Wall-clock ratios on a small shared machine spread wider than 3% even
between a build and itself (tests/bench/last-aa.txt); the instructions a
broker spends per message do not. For each throughput scenario of run.sh
(its SCENARIOS table, read from run.sh so the two cannot drift apart), the
broker runs under callgrind twice, carrying 150,000 and 50,000 messages:
the difference over 100,000 cancels start-up and shutdown. With BASE_BIN,
that build too, and the ratio base/this (higher is better).

  SCENARIOS=instr [BASE_BIN=...] tests/bench/run.sh    (or this file)

Writes tests/bench/last-instr.txt. For scenario 5 (fanout) a message is one
publish, delivered to 10 queues. Scenarios 6b (declaring bindings), 7
(latency at a fixed rate) and 8 (memory) are not per-message work.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mgmt_bench import WARREN_BIN, callgrind_ir  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "last-instr.txt")
SKIP = {"6b", "7", "8"}


def scenarios():
    """(id, label, warren-perf args) from run.sh's table."""
    with open(os.path.join(HERE, "run.sh")) as f:
        rows = re.findall(r'^"([0-9a-z]+)\|([^|]*)\|([^|]*)\|', f.read(), re.M)
    return [(i, re.sub(r"\s*\([^)]*\)$", "", label), ["--size", "16"] + args.split())
            for i, label, args in rows if i not in SKIP]


def main():
    base = os.environ.get("BASE_BIN")
    builds = [("this", WARREN_BIN)] + ([("base", base)] if base else [])
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                         cwd=HERE).stdout.strip()
    lines = ["make bench scenarios, broker instructions per message under callgrind "
             "((150,000 - 50,000 messages) / 100,000) -- %s, this build %s (%s)%s"
             % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), WARREN_BIN, rev,
                ", base build %s" % base if base else ""),
             "", "%-58s | %10s | %10s | %s" % ("scenario", "this", "base", "base/this")]
    print("\n".join(lines), flush=True)
    for sc, label, args in scenarios():
        per = {}
        for name, binary in builds:
            per[name] = (callgrind_ir(binary, False, args, 150000) -
                         callgrind_ir(binary, False, args, 50000)) / 100000
        ratio = "%.3fx" % (per["base"] / per["this"]) if base else "-"
        line = "%-58s | %10.0f | %10s | %s" % ("%s. %s" % (sc, label[:54]), per["this"],
                                                "%.0f" % per["base"] if base else "-", ratio)
        print(line, flush=True)
        lines.append(line)
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
