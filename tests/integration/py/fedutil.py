"""What the federation tests share: their own Warren processes and RabbitMQ
node (started once per test file, stopped at exit), management API calls,
and waiting for a condition with a bounded number of tries.
"""
import atexit
import base64
import json
import signal
import time
import urllib.error
import urllib.parse
import urllib.request

import harness as h
from rabbit_node import RabbitNode

RABBIT_NODE, RABBIT_PORT = "fd2", 5773  # the federation upstream of test_federation.py
# test_federation_migration.py's RabbitMQ, with its management API
MIGRATION_NODE, MIGRATION_PORT, MIGRATION_MGMT = "fd1", 5771, 15771
_started = {}


def _more_time(seconds):
    """Start-ups are slow: the running test's alarm (run_py.py) gets longer."""
    left = signal.alarm(0)
    signal.alarm(int(left or 20) + seconds)


def rabbit(node=RABBIT_NODE, port=RABBIT_PORT, mgmt_port=None, plugins=()):
    """The file's RabbitMQ 3.10 (federation upstream), started on first use."""
    if node not in _started:
        _more_time(180)
        r = RabbitNode(node, port, plugins, mgmt_port).start()
        atexit.register(r.stop)
        _started[node] = r
    return _started[node]


def warren(name, *settings):
    """A Warren of this file's own (`name` tells them apart), started on first use."""
    if name not in _started:
        _more_time(15)
        w = h.WarrenProcess(settings)
        w.start()
        atexit.register(w.stop)
        _started[name] = w
    return _started[name]


def api(w, method, path, body=None, user="guest", password="guest"):
    """(status, decoded JSON or None) of a management API call to Warren `w`."""
    data = json.dumps(body).encode() if body is not None else None
    auth = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (w.mgmt_port, path), data=data,
                                 method=method, headers={"content-type": "application/json",
                                                         "authorization": "Basic " + auth})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        text = e.read()
        return e.code, json.loads(text) if text else None


def ok(w, method, path, body=None):
    status, reply = api(w, method, path, body)
    assert status in (200, 201, 204), (method, path, status, reply)
    return reply


def q(s):
    return urllib.parse.quote(s, safe="")


def upstream(w, name, uri, vhost="/", **keys):
    ok(w, "PUT", "/api/parameters/federation-upstream/%s/%s" % (q(vhost), q(name)),
       {"value": dict(keys, uri=uri)})


def policy(w, name, pattern, definition, apply_to, vhost="/"):
    ok(w, "PUT", "/api/policies/%s/%s" % (q(vhost), q(name)),
       {"pattern": pattern, "definition": definition, "apply-to": apply_to})


def links(w, path="/api/federation-links"):
    return ok(w, "GET", path)


def until(predicate, what, tries=200, step=0.05):
    """Polls predicate (bounded: tries x step); fails naming `what`."""
    for _ in range(tries):
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out waiting for " + what)


def running(w, **match):
    """The link matching `match` once it runs."""
    def find():
        for link in links(w):
            if all(link.get(k) == v for k, v in match.items()) and link["status"] == "running":
                return link
        return None
    return until(find, "a running link %r" % (match,))


def rabbit_uri(port=RABBIT_PORT):
    return "amqp://guest:guest@127.0.0.1:%d" % port


def warren_uri(w):
    return "amqp://guest:guest@127.0.0.1:%d" % w.port
