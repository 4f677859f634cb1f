"""A RabbitMQ cluster in network namespaces, for cluster_bench.py: one
node per namespace of a netns.Netns (tests/cluster/netns.py), each named
rabbit@<its address> with long names (RABBITMQ_USE_LONGNAME), so Erlang
distribution needs no host name resolution at all: no /etc/hosts or
/etc/netns/<ns>/hosts entry, and each namespace runs its own epmd on
4369. The nodes run as the rabbitmq user (started as root through su, as
Debian's wrapper does) and share its Erlang cookie
(/var/lib/rabbitmq/.erlang.cookie, $HOME of that user); their data, logs
and config live in a temp dir of this run, removed by stop(). Nodes 2..n
join node 1 with rabbitmqctl join_cluster. Every process is started
through Netns.run_in, so the Netns teardown kills whatever is left (beam,
epmd, erl_child_setup) with the namespaces.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

AMQP_PORT = 5672
CTL_TIMEOUT = 120.0


class RabbitCluster:
    def __init__(self, net, rabbit_config=""):
        self.net = net
        self.extra_config = rabbit_config
        self.dir = tempfile.mkdtemp(prefix="warren-bench-rabbit-")
        os.chmod(self.dir, 0o755)  # the nodes run as rabbitmq
        self.procs = {}

    def nodename(self, i):
        return "rabbit@%s" % self.net.ip(i)

    def node_dir(self, i):
        return os.path.join(self.dir, "n%d" % i)

    def _env(self, i):
        d = self.node_dir(i)
        env = dict(os.environ)
        env.update(RABBITMQ_NODENAME=self.nodename(i), RABBITMQ_USE_LONGNAME="true",
                   RABBITMQ_NODE_PORT=str(AMQP_PORT), RABBITMQ_DIST_PORT="25672",
                   RABBITMQ_MNESIA_BASE=d + "/mnesia", RABBITMQ_LOG_BASE=d + "/log",
                   RABBITMQ_CONFIG_FILE=d + "/rabbitmq", RABBITMQ_ENABLED_PLUGINS_FILE=d + "/enabled_plugins",
                   RABBITMQ_PID_FILE=d + "/pid", ERL_CRASH_DUMP=d + "/erl_crash.dump")
        return env

    def ctl(self, i, *args, timeout=CTL_TIMEOUT, check=True):
        """rabbitmqctl against node i, run inside its namespace."""
        argv = ["rabbitmqctl", "-q", "--longnames", "-n", self.nodename(i)] + list(args)
        p = self.net.run_in(i, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=self._env(i))
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
        if check and p.returncode != 0:
            raise RuntimeError("rabbitmqctl %s on n%d: exit %s: %s" % (" ".join(args), i, p.returncode, out))
        return out

    def start(self, i):
        d = self.node_dir(i)
        os.makedirs(d, exist_ok=True)
        with open(d + "/rabbitmq.conf", "w") as f:
            f.write("listeners.tcp.default = %s:%d\nloopback_users = none\n%s\n"
                    % (self.net.ip(i), AMQP_PORT, self.extra_config))
        with open(d + "/enabled_plugins", "w") as f:
            f.write("[].\n")  # no management listener: only AMQP and distribution
        subprocess.run(["chown", "-R", "rabbitmq:", d], check=True)
        out = open(d + "/out", "ab")
        # su keeps the environment (RABBITMQ_*), sets HOME to the rabbitmq
        # user's: its cookie. Descriptors raised as rabbit.sh does.
        self.procs[i] = self.net.run_in(
            i, ["su", "rabbitmq", "-s", "/bin/sh", "-c",
                "cd %s && ulimit -n $(ulimit -Hn) && exec /usr/lib/rabbitmq/bin/rabbitmq-server" % d],
            stdout=out, stderr=subprocess.STDOUT, env=self._env(i))
        out.close()

    def wait(self, i):
        self.ctl(i, "wait", self.node_dir(i) + "/pid", "--timeout", "120")

    def pid(self, i):
        """beam.smp's pid (the server's pid file)."""
        with open(self.node_dir(i) + "/pid") as f:
            return int(f.read().strip())

    def start_all(self):
        """Starts every node, joins 2..n to node 1, checks the membership."""
        for i in range(1, self.net.n + 1):
            self.start(i)
        for i in range(1, self.net.n + 1):
            self.wait(i)
        for i in range(2, self.net.n + 1):
            self.ctl(i, "stop_app")
            self.ctl(i, "join_cluster", self.nodename(1))
            self.ctl(i, "start_app")
        status = json.loads(self.ctl(1, "cluster_status", "--formatter", "json"))
        missing = [self.nodename(i) for i in range(1, self.net.n + 1)
                   if self.nodename(i) not in status.get("running_nodes", [])]
        if missing:
            raise RuntimeError("not clustered: %s\n%s" % (missing, status))
        return status

    def amqp_url(self, i):
        return "amqp://guest:guest@%s:%d/%%2F" % (self.net.ip(i), AMQP_PORT)

    def stop(self):
        """Stops every node (rabbitmqctl stop, then the Netns teardown kills
        what is left) and removes the data dirs."""
        for i in list(self.procs):
            if self.procs[i].poll() is None:
                self.ctl(i, "stop", timeout=30, check=False)
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(
                p.poll() is None for p in self.procs.values()):
            time.sleep(0.1)
        shutil.rmtree(self.dir, ignore_errors=True)
