"""One RabbitMQ 3.10 node for the tests that need a real one beside Warren
(test_shovel_rabbit): started once per test file, on first use, with
tests/bench/rabbit.sh's start_rabbit (root: it runs as the rabbitmq user
under /tmp/NODE), and stopped when the process exits.

run_py.py gives each test an alarm of WARREN_TEST_TIMEOUT seconds; the
start-up (~10-20 s on a busy machine) gets its own longer one here, and the
test's alarm is armed again afterwards.
"""
import atexit
import os
import signal
import subprocess
import time

import pika

from harness import REPO

START_TIMEOUT = 180
TEST_TIMEOUT = int(os.environ.get("WARREN_TEST_TIMEOUT", "20"))
RABBIT_SH = str(REPO / "tests" / "bench" / "rabbit.sh")

_node = {"name": None, "port": None}


def _run(script, timeout):
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=timeout)


def stop():
    name = _node["name"]
    _node["name"] = None
    if name:
        _run("rabbitmqctl -q -n %s@localhost stop >/dev/null 2>&1 || true" % name, 60)


def address(name="sh1", port=5761):
    """(host, port) of the node, started on first call."""
    if _node["name"]:
        return "127.0.0.1", _node["port"]
    left = signal.alarm(START_TIMEOUT)
    try:
        out = _run(". %s; start_rabbit %s %d '' '' ''" % (RABBIT_SH, name, port), START_TIMEOUT - 10)
        if out.returncode != 0:
            raise RuntimeError("RabbitMQ did not start: %s %s" % (out.stdout, out.stderr))
        _node.update(name=name, port=port)
        atexit.register(stop)
        deadline = time.time() + 60
        while True:  # the listener may lag `rabbitmqctl wait` by a moment
            try:
                pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", port)).close()
                break
            except pika.exceptions.AMQPConnectionError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        signal.alarm(max(left, TEST_TIMEOUT) if left else 0)
    return "127.0.0.1", port


def connect(vhost="/"):
    host, port = address()
    return pika.BlockingConnection(pika.ConnectionParameters(host, port, vhost, socket_timeout=10))
