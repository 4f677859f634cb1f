#!/usr/bin/python3
"""Crash test for definitions imports: all or nothing.

A large document (one vhost, a user with permissions, policies, runtime
parameters -- operator policies, federation upstreams, a global one --,
thousands of durable queues and exchanges, a binding per queue) is POSTed to
/api/definitions and Warren is killed with SIGKILL at a random moment
around the import -- before the body has arrived, during validation,
half-way through the application (one metadata transaction), just after
the commit. After a restart on the same data dir the export must hold
either none of the document (no vhost, no user, no queue, no global
parameter) or all of it (every queue, exchange, binding, policy,
parameter and permission, with its arguments); anything in between is a
failure. The first trial is not
killed: it measures how long an import takes, and later kills are spread
over 0..2 times that.

Every other kill aims at the transaction itself (between Warren's
"applying them in one transaction" log line and the end of the first
trial's import). Each line names the phase the kill hit, read from
Warren's log: before applying, applying, committed (which must give all).

Usage: definitions_crash_test.py [TRIALS] [QUEUES]   (default 20 trials,
5000 queues). Prints TAP lines, one per trial, then
"N trials: A all, Z none, P partial, F failed; killed: ...". Environment: WARREN_BIN (default
build/release/warren).
"""
import base64
import http.client
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WARREN_BIN = os.environ.get("WARREN_BIN") or str(REPO / "build" / "release" / "warren")
VHOST, USER, GLOBAL = "crash.defs", "crash-defs-user", "crash-defs-global"
AUTH = {"Authorization": "Basic " + base64.b64encode(b"guest:guest").decode()}
AMQP_RE = re.compile(r"AMQP listening on 127\.0\.0\.1:(\d+)")
MGMT_RE = re.compile(r"management listening on 127\.0\.0\.1:(\d+)")


def document(nqueues):
    nx = max(1, nqueues // 10)
    return {
        "users": [{"name": USER, "password_hash": "bw/ZenBjZLWyOIVbJ664X1fHMYvmgBAyXqjSfR8tudJZfedy",
                   "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ["management"]}],
        "vhosts": [{"name": VHOST}],
        "permissions": [{"user": USER, "vhost": VHOST, "configure": ".*", "write": ".*", "read": ".*"},
                        {"user": "guest", "vhost": VHOST, "configure": ".*", "write": ".*", "read": ".*"}],
        "policies": [{"vhost": VHOST, "name": "p%d" % i, "pattern": "^q\\.%d" % i, "apply-to": "queues",
                      "definition": {"max-length": 1000 + i}, "priority": i} for i in range(10)],
        "parameters": [{"value": {"pattern": "^q\\.%d" % i, "definition": {"max-length": 500 + i},
                                  "priority": i, "apply-to": "queues"},
                        "vhost": VHOST, "component": "operator_policy", "name": "op%d" % i} for i in range(5)] +
                      [{"value": {"uri": "amqp://up%d.example" % i}, "vhost": VHOST,
                        "component": "federation-upstream", "name": "up%d" % i} for i in range(5)],
        "global_parameters": [{"name": GLOBAL, "value": {"set-by": "the crash test"}}],
        "exchanges": [{"name": "x.%d" % i, "vhost": VHOST, "type": "topic", "durable": True,
                       "auto_delete": False, "internal": False, "arguments": {}} for i in range(nx)],
        "queues": [{"name": "q.%d" % i, "vhost": VHOST, "durable": True, "auto_delete": False,
                    "arguments": {"x-message-ttl": 60000 + i}} for i in range(nqueues)],
        "bindings": [{"source": "x.%d" % (i % nx), "vhost": VHOST, "destination": "q.%d" % i,
                      "destination_type": "queue", "routing_key": "k.%d.#" % i, "arguments": {}}
                     for i in range(nqueues)],
    }


class Warren:
    def __init__(self, data_dir):
        argv = [WARREN_BIN, "--set", "listeners.tcp.default=127.0.0.1:0", "--set", "stream.listeners.tcp.default=127.0.0.1:0", "--set", "data_dir=" + data_dir,
                "--set", "management.tcp.port=0", "--set", "management.tcp.ip=127.0.0.1"]
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.mgmt = None
        self.log = []
        self.applying_at = None
        deadline = time.monotonic() + 20
        for line in self.proc.stderr:
            m = MGMT_RE.search(line)
            if m:
                self.mgmt = int(m.group(1))
                break
            if time.monotonic() > deadline:
                break
        threading.Thread(target=self._drain, daemon=True).start()
        if self.mgmt is None:
            self.proc.kill()
            raise RuntimeError("Warren did not start")

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)
            if "applying them in one transaction" in line:
                self.applying_at = time.monotonic()

    def phase(self):
        """How far the import had got, from Warren's log: 'before applying',
        'applying' (inside the transaction) or 'committed'."""
        text = "".join(self.log)
        if "imported definitions:" in text:
            return "committed"
        return "applying" if "applying them in one transaction" in text else "before applying"

    def request(self, method, path, body=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.mgmt, timeout=timeout)
        hdrs = dict(AUTH, **({"Content-Type": "application/json"} if body is not None else {}))
        c.request(method, path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(60)


def post_in_background(w, body):
    result = {}

    def run():
        try:
            result["status"] = w.request("POST", "/api/definitions", body)[0]
        except OSError as e:
            result["error"] = str(e)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, result


def verdict(export, doc):
    """'none', 'all', or a description of what is partial."""
    mine = {k: [x for x in export[k] if x.get("vhost") == VHOST] for k in ("queues", "exchanges", "bindings",
                                                                              "policies", "permissions",
                                                                              "parameters")}
    has_user = any(u["name"] == USER for u in export["users"])
    has_vhost = any(v["name"] == VHOST for v in export["vhosts"])
    has_global = any(p["name"] == GLOBAL for p in export["global_parameters"])
    sizes = {k: len(v) for k, v in mine.items()}
    if not has_user and not has_vhost and not has_global and not any(sizes.values()):
        return "none"
    want = {k: len(doc[k]) for k in sizes}
    if has_user and has_vhost and has_global and sizes == want:
        args = {q["name"]: q["arguments"] for q in mine["queues"]}
        if all(args.get(q["name"]) == q["arguments"] for q in doc["queues"]):
            return "all"
        return "partial: queue arguments differ"
    return "partial: user %s, vhost %s, global parameter %s, %s of %s" % (has_user, has_vhost, has_global, sizes,
                                                                           want)


def trial(n, body, doc, kill_after):
    data_dir = tempfile.mkdtemp(prefix="warren-defs-crash-")
    try:
        w = Warren(data_dir)
        t0 = time.monotonic()
        t, result = post_in_background(w, body)
        if kill_after is None:
            t.join(180)
            took = (time.monotonic() - t0, (w.applying_at or t0) - t0)
            w.stop()
        else:
            time.sleep(kill_after)
            w.kill()
            t.join(10)
            took = w.phase()
        w2 = Warren(data_dir)
        status, data = w2.request("GET", "/api/definitions")
        v = verdict(json.loads(data), doc) if status == 200 else "export failed: %d" % status
        rc = w2.stop()
        if rc != 0:
            v = "restarted Warren exited %d" % rc
        return v, took, result
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    nqueues = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    doc = document(nqueues)
    body = json.dumps(doc).encode()
    counts = {"all": 0, "none": 0, "partial": 0, "wrong": 0}
    phases = {}
    v, (took, apply_from), result = trial(0, body, doc, None)
    ok = v == "all" and result.get("status") == 204
    counts["all" if v == "all" else "partial"] += 1
    print("%s 1 - import of %d queues without a kill: %s in %.2f s, applying from %.2f s (HTTP %s)"
          % ("ok" if ok else "not ok", nqueues, v, took, apply_from, result.get("status")), flush=True)
    rng = random.Random(int(os.environ.get("CRASH_SEED", time.time())))
    for i in range(2, trials + 1):
        # every other kill aims at the transaction itself
        at = rng.uniform(apply_from, took) if i % 2 else rng.uniform(0, took * 2)
        v, phase, result = trial(i, body, doc, at)
        kind = v if v in ("all", "none") else "partial"
        counts[kind] += 1
        phases[phase, kind] = phases.get((phase, kind), 0) + 1
        # all or nothing; and once the commit was logged, all of it
        good = kind != "partial" and (phase != "committed" or kind == "all")
        counts["wrong"] += not good
        print("%s %d - SIGKILL %.3f s after the POST (%s): %s%s"
              % ("ok" if good else "not ok", i, at, phase, v,
                 " (HTTP %s)" % result["status"] if "status" in result else ""), flush=True)
    print("1..%d" % trials)
    print("%d trials: %d all, %d none, %d partial, %d failed; killed: %s"
          % (trials, counts["all"], counts["none"], counts["partial"], counts["wrong"],
             ", ".join("%s -> %s: %d" % (p, k, n) for (p, k), n in sorted(phases.items()))))
    return 1 if counts["wrong"] or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
