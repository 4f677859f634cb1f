#!/usr/bin/python3
"""Runs Warren's Python integration tests (tests/integration/py/test_*.py) and
prints TAP: `ok N - area: name`, `not ok N - area: name` with the failure as
`# ` lines, `ok N - area: name # SKIP reason`, then `1..N` and
`N passed, M failed`. Exits 1 if any test failed.

Usage: run_py.py [FILTER...]   (a FILTER is a substring of "area: name")
Env:   WARREN_TEST_TARGET=host:port  test that broker instead of starting Warren
       WARREN_BIN=path               Warren binary (default build/release/warren)
       WARREN_TEST_TIMEOUT=seconds   per-test alarm (default 20)
"""
import os
import signal
import sys
import traceback
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PY_DIR = os.path.join(HERE, "py")
sys.path.insert(0, PY_DIR)

import harness  # noqa: E402

AREA_ORDER = ["connection", "channel", "exchange", "queue", "basic", "requeue", "confirm", "tx",
              "permissions", "policies", "malformed", "warrenctl", "mgmt"]
TEST_TIMEOUT = int(os.environ.get("WARREN_TEST_TIMEOUT", "20"))
CLEANUP_TIMEOUT = 10


class TestTimeout(Exception):
    pass


def on_alarm(signum, frame):
    # Re-arm so a tearDown stuck on the same hung broker is bounded as well.
    signal.alarm(CLEANUP_TIMEOUT)
    raise TestTimeout("test exceeded its %d s timeout (broker hung?)" % TEST_TIMEOUT)


def areas():
    found = sorted(f[5:-3] for f in os.listdir(PY_DIR) if f.startswith("test_") and f.endswith(".py"))
    return [a for a in AREA_ORDER if a in found] + [a for a in found if a not in AREA_ORDER]


def iter_cases(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from iter_cases(t)
        else:
            yield t


class Outcome(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.status, self.detail = "ok", ""

    def addFailure(self, test, err):
        self.status, self.detail = "fail", self._exc_info_to_string(err, test)

    def addError(self, test, err):
        if self.status == "ok" or self.status == "skip":
            self.status, self.detail = "fail", self._exc_info_to_string(err, test)
        else:
            self.detail += "\n(then, during cleanup)\n" + self._exc_info_to_string(err, test)

    def addSkip(self, test, reason):
        self.status, self.detail = "skip", reason

    def addUnexpectedSuccess(self, test):
        self.status, self.detail = "fail", "unexpected success"


def comment(text):
    for line in text.rstrip().splitlines()[-40:]:
        print("# " + line)


def main(argv):
    filters = argv[1:]
    loader = unittest.TestLoader()
    signal.signal(signal.SIGALRM, on_alarm)
    n = passed = failed = 0

    def report(ok, name, detail="", directive=""):
        nonlocal n, passed, failed
        n += 1
        if ok:
            passed += 1
        else:
            failed += 1
        print("%s %d - %s%s" % ("ok" if ok else "not ok", n, name, directive), flush=True)
        if detail:
            comment(detail)
        sys.stdout.flush()

    try:
        harness.broker_address()
    except Exception as e:
        report(False, "harness: start broker", str(e))
        print("1..%d" % n)
        print("%d passed, %d failed" % (passed, failed))
        return 1

    for area in areas():
        module = __import__("test_" + area)
        for case in iter_cases(loader.loadTestsFromModule(module)):
            name = "%s: %s" % (area, case._testMethodName[5:] if case._testMethodName.startswith("test_")
                               else case._testMethodName)
            if filters and not any(f in name for f in filters):
                continue
            result = Outcome()
            signal.alarm(TEST_TIMEOUT)
            try:
                case.run(result)
            except TestTimeout as e:  # raised outside the test's own try blocks
                result.status, result.detail = "fail", str(e)
            except Exception:
                result.status, result.detail = "fail", traceback.format_exc()
            finally:
                signal.alarm(0)
            crash = harness.shared_broker_crash()
            if crash:  # blame this test, restart Warren for the next ones
                result.status = "fail"
                result.detail = (result.detail + "\n" if result.detail else "") + crash
            if result.status == "skip":
                report(True, name, directive=" # SKIP " + result.detail)
            else:
                report(result.status == "ok", name, result.detail)

    own = harness._shared["proc"]
    if own is not None:
        log = own.log_tail()
        rc = harness.stop_shared_broker()
        report(rc == 0, "harness: broker exits 0 on SIGTERM",
               "" if rc == 0 else "exit status %r; log tail:\n%s" % (rc, log))
    print("1..%d" % n)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
