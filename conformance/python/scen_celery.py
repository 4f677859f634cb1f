"""celery: a real worker (python3 -m celery worker) consuming from the broker
under test, with tasks sent and their results returned over rpc://."""
import contextlib
import os
import signal
import subprocess
import sys

from confkit import check, eq, scenario

HERE = os.path.dirname(os.path.abspath(__file__))
C = "celery"


@contextlib.contextmanager
def worker(t):
    """Starts a solo-pool worker on a queue of this run; yields the app."""
    queue = t.name("celery")
    t.track_queue(queue)
    t.track_exchange(queue)
    os.environ["CONF_CELERY_BROKER"] = t.kombu_url()
    os.environ["CONF_CELERY_QUEUE"] = queue
    sys.path.insert(0, HERE)
    import celery_app
    env = dict(os.environ, PYTHONPATH=HERE)
    argv = [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "--pool=solo",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-Q", queue,
            "-n", "conf-%s-%d@localhost" % (t.run_id, os.getpid()), "--loglevel=WARNING"]
    proc = subprocess.Popen(argv, cwd=HERE, env=env, stdin=subprocess.DEVNULL, stdout=sys.stderr,
                            stderr=sys.stderr)
    try:
        yield celery_app
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        with contextlib.suppress(Exception):
            celery_app.app.close()


@scenario("framework.celery_task_round_trip", C, quick=True, timeout=60)
def _(t):
    with worker(t) as m:
        r = m.add.delay(2, 3)
        eq(r.get(timeout=30), 5, "add(2, 3)")
        eq(r.state, "SUCCESS", "task state")
        info = m.whoami.delay().get(timeout=15)
        eq(info["routing_key"], os.environ["CONF_CELERY_QUEUE"], "routing key seen by the worker")


@scenario("framework.celery_task_exception", C, timeout=60)
def _(t):
    with worker(t) as m:
        r = m.fail.delay("boom-" + t.run_id)
        try:
            r.get(timeout=30)
        except ValueError as e:
            eq(str(e), "boom-" + t.run_id, "exception message")
        else:
            raise AssertionError("the task's exception did not propagate")
        eq(r.state, "FAILURE", "task state")


@scenario("framework.celery_group_and_chain", C, timeout=60)
def _(t):
    from celery import chain, group
    with worker(t) as m:
        g = group(m.add.s(i, i) for i in range(20)).apply_async()
        eq(g.get(timeout=30), [2 * i for i in range(20)], "group results")
        c = chain(m.add.s(1, 2), m.add.s(3), m.add.s(4)).apply_async()
        eq(c.get(timeout=30), 10, "chain result")
        check(c.parent is not None, "chain has a parent result")
