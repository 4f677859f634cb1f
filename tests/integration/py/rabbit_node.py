"""A RabbitMQ 3.10 node of a test's own, as tests/bench/rabbit.sh starts one:
under /tmp/NODE, as the rabbitmq user, listening on 127.0.0.1:PORT (the
distribution port is PORT + 20000), with the plugins asked for. Used by the
federation tests, which start one per test file.
"""
import os
import shutil
import subprocess
import time


class RabbitNode:
    def __init__(self, node, port, plugins=(), mgmt_port=None):
        self.node, self.port, self.plugins, self.mgmt_port = node, port, list(plugins), mgmt_port
        self.dir = "/tmp/%s" % node
        self.proc = None

    def ctl(self, *args, check=True):
        return subprocess.run(["rabbitmqctl", "-q", "-n", "%s@localhost" % self.node, *args],
                              check=check, capture_output=True, text=True, timeout=60).stdout

    def start(self):
        if shutil.which("rabbitmq-server") is None and not os.path.exists(
                "/usr/lib/rabbitmq/bin/rabbitmq-server"):
            raise RuntimeError("RabbitMQ 3.10 is not installed")
        self.ctl("stop", check=False)  # one left over by an interrupted run
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        conf = "listeners.tcp.default = 127.0.0.1:%d\nloopback_users = none\n" % self.port
        if self.mgmt_port:
            conf += "management.tcp.port = %d\nmanagement.tcp.ip = 127.0.0.1\n" % self.mgmt_port
        with open(os.path.join(self.dir, "rabbitmq.conf"), "w") as f:
            f.write(conf)
        with open(os.path.join(self.dir, "enabled_plugins"), "w") as f:
            f.write("[%s].\n" % ",".join(self.plugins))
        subprocess.run(["chown", "-R", "rabbitmq:", self.dir], check=False)
        dist = self.port + 20000
        for _ in range(70):  # a client socket in TIME_WAIT may hold the distribution port
            if not subprocess.run(["ss", "-Htan", "( sport = :%d )" % dist],
                                  capture_output=True, text=True).stdout.strip():
                break
            time.sleep(1)
        env = dict(os.environ, RABBITMQ_NODENAME="%s@localhost" % self.node,
                   RABBITMQ_NODE_PORT=str(self.port), RABBITMQ_DIST_PORT=str(dist),
                   RABBITMQ_MNESIA_BASE=self.dir + "/mnesia", RABBITMQ_LOG_BASE=self.dir + "/log",
                   RABBITMQ_CONFIG_FILE=self.dir + "/rabbitmq",
                   RABBITMQ_ENABLED_PLUGINS_FILE=self.dir + "/enabled_plugins",
                   RABBITMQ_PID_FILE=self.dir + "/pid")
        out = open(os.path.join(self.dir, "out"), "w")
        self.proc = subprocess.Popen(
            ["su", "rabbitmq", "-s", "/bin/sh", "-c",
             "cd /var/lib/rabbitmq && exec /usr/lib/rabbitmq/bin/rabbitmq-server"],
            env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.ctl("wait", self.dir + "/pid", "--timeout", "120")
        return self

    def stop(self):
        if self.proc is not None:
            self.ctl("stop", check=False)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None

    def queues(self):
        """{name: (messages, consumers, arguments text)} of vhost /."""
        out = self.ctl("list_queues", "name", "messages", "consumers", "arguments")
        rows = {}
        for line in out.splitlines()[1:]:
            name, messages, consumers, args = line.split("\t")
            rows[name] = (int(messages), int(consumers), args)
        return rows

    def bindings(self):
        out = self.ctl("list_bindings", "source_name", "destination_name", "routing_key", "arguments")
        return [tuple(line.split("\t")) for line in out.splitlines()[1:]]
