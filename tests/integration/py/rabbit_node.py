"""A RabbitMQ 3.10 node of a test's own, with plugins and a management port
(rabbitnode.py's single node has neither): started with
tests/bench/rabbit.sh's start_rabbit (as the rabbitmq user under
/tmp/NODE, on 127.0.0.1:PORT), inspected with rabbitmqctl. The federation
tests start one per test file.
"""
import subprocess

from harness import REPO

RABBIT_SH = str(REPO / "tests" / "bench" / "rabbit.sh")


class RabbitNode:
    def __init__(self, node, port, plugins=(), mgmt_port=None):
        self.node, self.port, self.plugins, self.mgmt_port = node, port, list(plugins), mgmt_port
        self.up = False

    def ctl(self, *args, check=True):
        return subprocess.run(["rabbitmqctl", "-q", "-n", "%s@localhost" % self.node, *args],
                              check=check, capture_output=True, text=True, timeout=60).stdout

    def start(self):
        conf = "management.tcp.port = %d" % self.mgmt_port if self.mgmt_port else ""
        out = subprocess.run(["bash", "-c", ". %s; start_rabbit %s %d '%s' '' '%s'" % (
            RABBIT_SH, self.node, self.port, conf, ",".join(self.plugins))],
            capture_output=True, text=True, timeout=170)
        if out.returncode != 0:
            raise RuntimeError("RabbitMQ did not start: %s %s" % (out.stdout, out.stderr))
        self.up = True
        return self

    def stop(self):
        if self.up:
            self.ctl("stop", check=False)
            self.up = False

    def queues(self):
        """{name: (messages, consumers, arguments text)} of vhost /."""
        rows = {}
        for line in self.ctl("list_queues", "name", "messages", "consumers", "arguments").splitlines()[1:]:
            name, messages, consumers, args = line.split("\t")
            rows[name] = (int(messages), int(consumers), args)
        return rows

    def bindings(self):
        out = self.ctl("list_bindings", "source_name", "destination_name", "routing_key", "arguments")
        return [tuple(line.split("\t")) for line in out.splitlines()[1:]]
