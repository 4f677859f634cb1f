#!/usr/bin/python3
"""Restarts the broker under test for the conformance suite's restart
scenarios; suite.py hands one of these command lines to the families as
CONF_RESTART (see README.md, "Restart scenarios").

    restart.py warren SOCKET          ask the suite driver that started Warren
                                      to restart it (SIGTERM, wait for the exit,
                                      start it on the same data dir and port)
    restart.py rabbitmqctl HOST:PORT  `rabbitmqctl stop_app` + `start_app` on the
                                      local node, then wait for AMQP on HOST:PORT

Exit status 0 once the broker answers a protocol header with connection.start
again; otherwise the reason on stderr and exit status 1.

stop_app/start_app is a real restart as far as queues go (checked against
RabbitMQ 3.10.8 next to a full `rabbitmqctl stop` + `rabbitmq-server`):
non-durable queues and exchanges are gone afterwards, transient messages in
durable queues are lost, persistent ones come back. It takes ~3 s instead of
~6 s and leaves the Erlang node (and whoever started it) in place.
"""
import os
import shutil
import socket
import subprocess
import sys
import time

RABBITMQCTL_TIMEOUT = 90   # seconds for each of stop_app and start_app
AMQP_WAIT = 30             # seconds for the listener to serve again


def wait_amqp(host, port, timeout=AMQP_WAIT):
    """True once host:port answers the 0-9-1 protocol header with a method
    frame (connection.start) within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.settimeout(max(0.1, min(2.0, deadline - time.monotonic())))
                s.sendall(b"AMQP\x00\x00\x09\x01")
                head = b""
                while len(head) < 7:
                    chunk = s.recv(7 - len(head))
                    if not chunk:
                        break
                    head += chunk
                if len(head) == 7 and head[0] == 1:
                    return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


def restart_warren(sock_path):
    """One request to suite.py's restart server; it answers `ok` or `error: ...`."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(sock_path)
        s.sendall(b"restart\n")
        reply = b""
        while not reply.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            reply += chunk
    except OSError as e:
        return "cannot reach the suite's restart server at %s: %s" % (sock_path, e)
    finally:
        s.close()
    text = reply.decode("utf-8", "replace").strip()
    return None if text == "ok" else (text or "the restart server closed without an answer")


def rabbitmqctl(*args):
    """Runs rabbitmqctl; returns None or the reason it failed."""
    ctl = os.environ.get("RABBITMQCTL") or shutil.which("rabbitmqctl") or "rabbitmqctl"
    try:
        p = subprocess.run([ctl] + list(args), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=RABBITMQCTL_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "rabbitmqctl %s: %s" % (" ".join(args), e)
    if p.returncode != 0:
        return "rabbitmqctl %s exited %d: %s" % (" ".join(args), p.returncode,
                                                 " ".join((p.stderr or p.stdout).split())[:400])
    return None


def restart_rabbitmq(hostport):
    host, _, port = hostport.rpartition(":")
    err = rabbitmqctl("stop_app")
    if err:
        return err
    err = rabbitmqctl("start_app")
    if err:
        # Never leave the node stopped: one more try before giving up.
        time.sleep(1)
        if rabbitmqctl("start_app"):
            return err
    if not wait_amqp(host, int(port)):
        return "RabbitMQ restarted but %s does not serve AMQP within %d s" % (hostport, AMQP_WAIT)
    return None


def main(argv):
    if len(argv) != 3 or argv[1] not in ("warren", "rabbitmqctl"):
        sys.stderr.write("usage: restart.py warren SOCKET | restart.py rabbitmqctl HOST:PORT\n")
        return 2
    err = restart_warren(argv[2]) if argv[1] == "warren" else restart_rabbitmq(argv[2])
    if err:
        sys.stderr.write(err + "\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
