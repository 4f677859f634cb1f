#!/usr/bin/python3
"""Runs the same commands through rabbitmqctl and through
`warrenctl --url http://127.0.0.1:15672 -u $P-admin -p ...` against the real
RabbitMQ on this machine, and diffs what they print and their exit codes.

It creates its own uniquely named vhost, users, queues, exchanges and a
consumer connection (prefix warrenctl-cmp-<pid>), and deletes them at the end.
warrenctl logs in as this run's own administrator rather than guest: the
HTTP API checks vhost permissions (purge, delete) where rabbitmqctl does not,
guest has none in this run's vhost, and guest must not be changed on this
shared broker.
Output normalisation, kept small and listed here so a difference is never
hidden by accident:
  - the program name: "rabbitmqctl" in usage texts is "warrenctl";
  - row order: rabbitmqctl lists in its hash tables' order, the HTTP API by
    name, so the data rows of a table (and the objects of a JSON list) are
    compared sorted;
  - node-wide listings (users, vhosts, connections, channels) keep only this
    run's rows (and for users and vhosts guest's and "/"), since other
    developers share the broker and their connections come and go.
A case whose difference is understood says why in KNOWN; it still prints its
diff. The report goes to stdout (tests/warrenctl/compare-rabbitmq.txt holds
the last one).

Usage: compare_rabbitmqctl.py [--warrenctl PATH]
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pika

REPO = Path(__file__).resolve().parents[2]
WARRENCTL = str(REPO / "bin" / "warrenctl")
P = "warrenctl-cmp-%d" % os.getpid()
ADMIN, ADMIN_PW = P + "-admin", "admin-pw"
# another node than the default: CMP_MGMT_PORT, CMP_AMQP_PORT and rabbitmqctl's RABBITMQ_NODENAME
MGMT_PORT = int(os.environ.get("CMP_MGMT_PORT", "15672"))
AMQP_PORT = int(os.environ.get("CMP_AMQP_PORT", "5672"))
URL = ["--url", "http://127.0.0.1:%d" % MGMT_PORT, "-u", ADMIN, "-p", ADMIN_PW]
V = P + "-vh"              # the vhost everything lives in
U, UPW = P + "-u", "pw-1"   # its user, with permissions there
MAX_DIFF_LINES = 30
STATS_WAIT = 6.0            # the management API's statistics lag (5 s emit interval)

KNOWN = {
    "list_consumers": "channel_pid: rabbitmqctl prints the channel's Erlang pid, warrenctl the "
                      "channel's name (the API has no pids)",
    "ping": "the info line: warrenctl checks the management API, not epmd",
    "import_bad": "the parser's words for the syntax error (Elixir's vs jansson's)",
    "environment": "RabbitMQ's HTTP API has no /api/environment (a Warren extension)",
    "add_user_json": "rabbitmqctl's JSON for add_user carries its message and says status, "
                     "warrenctl prints the generic {node, result} of every change",
    "help": "warrenctl lists its own commands and its connection options",
    "unknown_command": "the command list that follows is warrenctl's",
    "help_command": "warrenctl's help text",
    "export_definitions_nodir": "the usage line: warrenctl writes JSON only",
    "export_definitions_noargs": "the usage line: warrenctl writes JSON only",
    "import_definitions_nofile": "the usage line: warrenctl reads JSON only",
    "set_permissions_badre": "rabbitmqctl prints the Erlang term of the regex error, the API's "
                             "reason is its JSON rendering",
    "list_connections_json": "peer_host/host: rabbitmqctl's JSON gives an IP address as a list "
                             "of integers, the API as a string",
    "cluster_status": "the listeners come in the API's order, rabbitmqctl's in its own",
    "cluster_status_json": "the listeners come in the API's order, rabbitmqctl's in its own",
}


def run(argv, stdin=None):
    p = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def rmq(*args, stdin=None):
    return run(["rabbitmqctl"] + list(args), stdin)


def wctl(*args, stdin=None):
    return run([WARRENCTL] + URL + list(args), stdin)


def quiet(*args):
    rc, out, err = rmq("-q", *args)
    return rc


# ---------------------------------------------------------------- normalising

INFO_PREFIXES = ("Timeout:", "Listing ")


def own_row(line, strict):
    if strict:
        return P in line
    return P in line or "guest" in line or line.split("\t")[0] in ("/",)


def sort_rows(text, header, node_wide):
    lines = text.split("\n")
    tail = lines[-1] if lines else ""
    lines = lines[:-1] if tail == "" else lines
    head = []
    while lines and lines[0].startswith(INFO_PREFIXES):
        head.append(lines.pop(0))
    if header and lines:
        head.append(lines.pop(0))
    if node_wide:
        lines = [ln for ln in lines if own_row(ln, node_wide == "strict")]
    return "\n".join(head + sorted(lines)) + ("\n" if text.endswith("\n") else "")


def sort_json(text, node_wide):
    try:
        rows = json.loads(text)
    except ValueError:
        return text
    if not isinstance(rows, list):
        return text
    if node_wide:
        rows = [r for r in rows if own_row(json.dumps(r), node_wide == "strict")]
    return "\n".join(sorted(json.dumps(r, separators=(",", ":")) for r in rows)) + "\n"


def normalise(text, case):
    for a, b in (("rabbitmqctl [", "warrenctl ["), ("'rabbitmqctl help", "'warrenctl help")):
        text = text.replace(a, b)
    if case.get("json"):
        return sort_json(text, case.get("node_wide"))
    if case.get("rows"):
        return sort_rows(text, case.get("header", True), case.get("node_wide"))
    return text


# ---------------------------------------------------------------- fixture

class Fixture:
    """The vhost, users, queues, exchanges, bindings and one open consumer
    connection the listing cases look at."""

    def __init__(self):
        self.stop = threading.Event()
        self.thread = None
        self.tmp = tempfile.mkdtemp(prefix="warrenctl-cmp-")
        os.chmod(self.tmp, 0o777)  # rabbitmqctl's node writes export files as its own user

    def amqp(self):
        return pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", AMQP_PORT, V, pika.PlainCredentials(U, UPW),
            client_properties={"connection_name": P + "-conn"}))

    def setup(self):
        quiet("add_user", ADMIN, ADMIN_PW)
        quiet("set_user_tags", ADMIN, "administrator")
        quiet("add_vhost", V)
        quiet("set_permissions", "-p", V, ADMIN, ".*", ".*", ".*")
        quiet("add_user", U, UPW)
        quiet("set_permissions", "-p", V, U, ".*", ".*", ".*")
        quiet("set_user_tags", U, "monitoring")
        quiet("set_policy", "-p", V, P + "-pol", "^pq", '{"max-length":10}', "--priority", "2",
              "--apply-to", "queues")
        quiet("set_operator_policy", "-p", V, P + "-op", "^pq", '{"max-length":100}', "--apply-to",
              "queues")
        quiet("set_topic_permissions", "-p", V, U, "amq.topic", "^a", "^b")
        quiet("set_parameter", "-p", V, "federation-upstream", P + "-up",
              '{"uri":"amqp://localhost:1","expires":3600000}')
        c = self.amqp()
        ch = c.channel()
        ch.queue_declare("q-durable", durable=True)
        ch.queue_declare("q-ttl", arguments={"x-message-ttl": 60000})
        ch.queue_declare("pq-policy")
        ch.queue_declare("q-full")
        ch.exchange_declare("x-topic", "topic", durable=True)
        ch.exchange_declare("x-headers", "headers", arguments={"alternate-exchange": "x-topic"})
        ch.queue_bind("q-durable", "x-topic", "a.#")
        ch.queue_bind("q-ttl", "x-headers", "", arguments={"x-match": "all"})
        for _ in range(3):
            ch.basic_publish("", "q-durable", b"hello")
        ch.basic_publish("", "q-full", b"x")
        c.close()
        self.thread = threading.Thread(target=self.consume, daemon=True)
        self.thread.start()
        time.sleep(STATS_WAIT)

    def consume(self):
        c = self.amqp()
        ch = c.channel()
        ch.basic_qos(prefetch_count=5)
        ch.basic_consume("q-ttl", lambda *a: None, consumer_tag="ctag-1")
        ch2 = c.channel()
        ch2.confirm_delivery()
        while not self.stop.is_set():
            c.process_data_events(0.2)
        c.close()

    def declare(self, name, messages=0):
        c = pika.BlockingConnection(pika.ConnectionParameters(
            "127.0.0.1", AMQP_PORT, V, pika.PlainCredentials(U, UPW)))
        ch = c.channel()
        ch.queue_declare(name)
        for _ in range(messages):
            ch.basic_publish("", name, b"m")
        c.close()
        time.sleep(STATS_WAIT)

    def teardown(self):
        self.stop.set()
        if self.thread:
            self.thread.join(5)
        for vh in (V, P + "-v2", P + "-imp"):
            quiet("delete_vhost", vh)
        for u in (U, P + "-new", ADMIN):
            quiet("delete_user", u)


# ---------------------------------------------------------------- cases

def cases(fx):
    exp = os.path.join(fx.tmp, "defs.json")
    imp = os.path.join(fx.tmp, "imp.json")
    bad = os.path.join(fx.tmp, "bad.json")
    with open(imp, "w") as f:
        json.dump({"vhosts": [{"name": P + "-imp"}], "queues": [
            {"name": "iq", "vhost": P + "-imp", "durable": True, "auto_delete": False,
             "arguments": {}}]}, f)
    with open(bad, "w") as f:
        f.write("{bad")
    for path in (imp, bad):
        os.chmod(path, 0o644)
    pv = ["-p", V]
    rows = {"rows": True}
    node = {"rows": True, "node_wide": True}
    conns = {"rows": True, "node_wide": "strict"}
    js = {"json": True}
    return [
        ("list_queues", pv + ["list_queues"], rows),
        ("list_queues_columns", pv + ["list_queues", "name", "messages", "messages_ready",
                                      "messages_unacknowledged", "consumers", "durable",
                                      "auto_delete", "exclusive", "arguments", "policy",
                                      "state", "type"], rows),
        ("list_queues_quiet", pv + ["-q", "list_queues", "name", "durable"], rows),
        ("list_queues_noheaders", pv + ["list_queues", "--no-table-headers", "name"],
         dict(rows, header=False)),
        ("list_queues_silent", pv + ["-s", "list_queues"], dict(rows, header=False)),
        ("list_queues_json", pv + ["list_queues", "--formatter", "json", "name", "durable",
                                   "arguments", "messages"], js),
        ("list_queues_json_eq", pv + ["list_queues", "--formatter=json"], js),
        ("list_queues_comma", pv + ["list_queues", "name,durable"], rows),
        ("list_queues_badcol", pv + ["list_queues", "name", "bogus", "other"], {}),
        ("list_queues_novhost", ["list_queues", "-p", P + "-nothere"], {}),
        ("list_exchanges", pv + ["list_exchanges"], rows),
        ("list_exchanges_columns", pv + ["list_exchanges", "name", "type", "durable",
                                         "auto_delete", "internal", "arguments", "policy"], rows),
        ("list_exchanges_json", pv + ["list_exchanges", "--formatter", "json"], js),
        ("list_bindings", pv + ["list_bindings"], rows),
        ("list_bindings_json", pv + ["list_bindings", "--formatter", "json"], js),
        ("list_connections", ["list_connections", "user", "vhost", "state", "peer_host",
                              "peer_port", "protocol", "auth_mechanism", "ssl", "channels",
                              "frame_max", "channel_max", "timeout", "name"], conns),
        ("list_connections_json", ["list_connections", "--formatter", "json", "user", "vhost",
                                   "protocol", "ssl", "channels", "name", "peer_host"],
         dict(js, node_wide="strict")),
        ("list_channels", ["list_channels", "name", "user", "vhost", "number", "confirm",
                           "transactional", "prefetch_count", "global_prefetch_count",
                           "consumer_count", "messages_unacknowledged"], conns),
        ("list_consumers", pv + ["list_consumers"], rows),
        ("list_consumers_columns", pv + ["list_consumers", "arguments", "consumer_tag",
                                         "queue_name", "ack_required", "prefetch_count",
                                         "active"], rows),
        ("list_users", ["list_users"], node),
        ("list_users_json", ["list_users", "--formatter", "json"], dict(js, node_wide=True)),
        ("list_users_columns", ["list_users", "user"], {}),
        ("list_vhosts", ["list_vhosts"], node),
        ("list_vhosts_all", ["list_vhosts", "name", "description", "tags", "tracing",
                             "cluster_state"], node),
        ("list_permissions", pv + ["list_permissions"], rows),
        ("list_permissions_json", pv + ["list_permissions", "--formatter", "json"], js),
        ("list_user_permissions", ["list_user_permissions", U], rows),
        ("list_user_permissions_nouser", ["list_user_permissions", P + "-nouser"], {}),
        ("list_user_permissions_noargs", ["list_user_permissions"], {}),
        ("list_policies", pv + ["list_policies"], rows),
        ("list_policies_json", pv + ["list_policies", "--formatter", "json"], js),
        ("list_policies_novhost", ["list_policies", "-p", P + "-nothere"], {}),
        ("list_permissions_novhost", ["list_permissions", "-p", P + "-nothere"], {}),
        ("list_exchanges_novhost", ["list_exchanges", "-p", P + "-nothere"], {}),
        ("list_policies_empty", ["list_policies", "-p", P + "-v2"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("list_policies_empty_json", ["list_policies", "-p", P + "-v2", "--formatter", "json"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("list_queues_empty", ["list_queues", "-p", P + "-v2"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("list_queues_empty_json", ["list_queues", "-p", P + "-v2", "--formatter", "json"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("list_operator_policies", pv + ["list_operator_policies"], rows),
        ("list_topic_permissions", pv + ["list_topic_permissions"], rows),
        ("list_user_topic_permissions", ["list_user_topic_permissions", U], rows),
        # users
        ("add_user", ["add_user", P + "-new", "pw"], {"after": [["delete_user", P + "-new"]]}),
        ("add_user_json", ["add_user", P + "-new", "pw", "--formatter", "json"],
         {"after": [["delete_user", P + "-new"]]}),
        ("add_user_exists", ["add_user", U, "pw"], {}),
        ("add_user_noargs", ["add_user"], {}),
        ("add_user_toomany", ["add_user", "a", "b", "c"], {}),
        ("add_user_stdin", ["add_user", P + "-new"], {"stdin": "pw\n",
                                                       "after": [["delete_user", P + "-new"]]}),
        ("delete_user", ["delete_user", P + "-new"], {"before": [["add_user", P + "-new", "x"]]}),
        ("delete_user_nouser", ["delete_user", P + "-nouser"], {}),
        ("delete_user_badopt", ["delete_user", "--priority", "1", P + "-nouser"], {}),
        ("change_password", ["change_password", U, "pw-2"],
         {"after": [["change_password", U, UPW]]}),
        ("change_password_nouser", ["change_password", P + "-nouser", "x"], {}),
        ("authenticate_user", ["authenticate_user", U, UPW], {}),
        ("authenticate_user_bad", ["authenticate_user", U, "wrong"], {}),
        ("authenticate_user_quiet", ["-q", "authenticate_user", U, UPW], {}),
        ("set_user_tags", ["set_user_tags", U, "monitoring", "policymaker"],
         {"after": [["set_user_tags", U, "monitoring"]]}),
        ("set_user_tags_none", ["set_user_tags", U], {"after": [["set_user_tags", U, "monitoring"]]}),
        ("set_user_tags_nouser", ["set_user_tags", P + "-nouser", "x"], {}),
        ("list_users_after_tags", ["list_users"], dict(node, before=[
            ["set_user_tags", U, "administrator", "monitoring"]],
            after=[["set_user_tags", U, "monitoring"]])),
        # vhosts
        ("add_vhost", ["add_vhost", P + "-v2", "--description", "second", "--tags", "a,b"],
         {"after": [["delete_vhost", P + "-v2"]]}),
        ("add_vhost_exists", ["add_vhost", V], {}),
        ("delete_vhost", ["delete_vhost", P + "-v2"], {"before": [["add_vhost", P + "-v2"]]}),
        ("delete_vhost_novhost", ["delete_vhost", P + "-novhost"], {}),
        # permissions
        ("set_permissions", pv + ["set_permissions", U, "^a", "^b", "^c"],
         {"after": [["set_permissions", "-p", V, U, ".*", ".*", ".*"]]}),
        ("list_permissions_after_set", pv + ["list_permissions"],
         dict(rows, before=[["set_permissions", "-p", V, U, "^a", "^b", "^c"]],
              after=[["set_permissions", "-p", V, U, ".*", ".*", ".*"]])),
        ("set_permissions_novhost", ["set_permissions", "-p", P + "-novhost", U, "a", "b", "c"], {}),
        ("set_permissions_nouser", pv + ["set_permissions", P + "-nouser", "a", "b", "c"], {}),
        ("set_permissions_badre", pv + ["set_permissions", U, "(", "b", "c"], {}),
        ("set_permissions_fewargs", pv + ["set_permissions", U, "a", "b"], {}),
        ("clear_permissions", pv + ["clear_permissions", U],
         {"after": [["set_permissions", "-p", V, U, ".*", ".*", ".*"]]}),
        ("clear_permissions_nouser", pv + ["clear_permissions", P + "-nouser"], {}),
        ("clear_permissions_novhost", ["clear_permissions", "-p", P + "-novhost", U], {}),
        ("set_topic_permissions", pv + ["set_topic_permissions", U, "x-topic", "^w", "^r"],
         {"after": [["clear_topic_permissions", "-p", V, U, "x-topic"]]}),
        ("set_topic_permissions_nouser", pv + ["set_topic_permissions", P + "-nouser",
                                               "amq.topic", "a", "b"], {}),
        ("clear_topic_permissions_one", pv + ["clear_topic_permissions", U, "x-topic"],
         {"before": [["set_topic_permissions", "-p", V, U, "x-topic", "^w", "^r"]]}),
        ("list_topic_permissions_after", pv + ["list_topic_permissions"], dict(rows, before=[
            ["set_topic_permissions", "-p", V, U, "x-topic", "^w", "^r"]],
            after=[["clear_topic_permissions", "-p", V, U, "x-topic"]])),
        # policies
        ("set_policy", pv + ["set_policy", P + "-p2", "^q", '{"max-length":10,"expires":60000}',
                             "--priority", "3", "--apply-to", "queues"],
         {"after": [["clear_policy", "-p", V, P + "-p2"]]}),
        ("set_policy_default", pv + ["set_policy", P + "-p3", "^x", '{"alternate-exchange":"x"}'],
         {"after": [["clear_policy", "-p", V, P + "-p3"]]}),
        ("set_policy_badkey", pv + ["set_policy", P + "-bad", "^q", '{"max-priority":3}'], {}),
        ("set_policy_badre", pv + ["set_policy", P + "-bad", "(", '{"max-length":3}'], {}),
        ("set_policy_badjson", pv + ["set_policy", P + "-bad", "^q", "{bad"], {}),
        ("set_policy_badapply", pv + ["set_policy", P + "-bad", "^q", '{"max-length":3}',
                                      "--apply-to", "foo"], {}),
        ("set_policy_badprio", pv + ["set_policy", P + "-bad", "^q", '{"max-length":3}',
                                     "--priority", "x"], {}),
        ("set_policy_novhost", ["set_policy", "-p", P + "-novhost", "x", "y",
                                '{"max-length":1}'], {}),
        ("set_policy_empty", pv + ["set_policy", P + "-bad", "^q", "{}"], {}),
        ("set_policy_fewargs", pv + ["set_policy", "x", "y"], {}),
        ("clear_policy", pv + ["clear_policy", P + "-p2"],
         {"before": [["set_policy", "-p", V, P + "-p2", "^q", '{"max-length":1}']]}),
        ("clear_policy_nopolicy", pv + ["clear_policy", P + "-nopol"], {}),
        ("set_operator_policy", pv + ["set_operator_policy", P + "-op2", ".*",
                                      '{"max-length":100}', "--apply-to", "queues"],
         {"after": [["clear_operator_policy", "-p", V, P + "-op2"]]}),
        ("clear_operator_policy", pv + ["clear_operator_policy", P + "-op2"],
         {"before": [["set_operator_policy", "-p", V, P + "-op2", ".*", '{"max-length":1}']]}),
        ("list_queues_policy", pv + ["list_queues", "name", "policy"], rows),
        # runtime parameters
        ("list_parameters", pv + ["list_parameters"], rows),
        ("list_parameters_json", pv + ["list_parameters", "--formatter", "json"], js),
        ("list_parameters_novhost", ["list_parameters", "-p", P + "-nothere"], {}),
        ("list_parameters_empty", ["list_parameters", "-p", P + "-v2"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("list_global_parameters", ["list_global_parameters"], rows),
        ("set_parameter", pv + ["set_parameter", "federation-upstream", P + "-up2",
                                '{"uri":"amqp://h"}'],
         {"after": [["clear_parameter", "-p", V, "federation-upstream", P + "-up2"]]}),
        ("set_parameter_json", pv + ["set_parameter", "federation-upstream", P + "-up2",
                                     '{"uri":"amqp://h"}', "--formatter", "json"],
         {"after": [["clear_parameter", "-p", V, "federation-upstream", P + "-up2"]]}),
        ("set_parameter_nocomponent", pv + ["set_parameter", "nosuchcomp", "x", "{}"], {}),
        ("set_parameter_badjson", pv + ["set_parameter", "federation-upstream", "x", "notjson"], {}),
        ("set_parameter_badvalue", pv + ["set_parameter", "federation-upstream", "x",
                                         '{"uri":5}'], {}),
        ("set_parameter_policy", pv + ["set_parameter", "policy", "x",
                                       '{"pattern":"x","definition":{}}'], {}),
        ("set_parameter_novhost", ["set_parameter", "-p", P + "-novhost", "federation-upstream",
                                   "x", '{"uri":"amqp://h"}'], {}),
        ("set_parameter_fewargs", pv + ["set_parameter", "federation-upstream", "x"], {}),
        ("clear_parameter", pv + ["clear_parameter", "federation-upstream", P + "-up3"],
         {"before": [["set_parameter", "-p", V, "federation-upstream", P + "-up3",
                      '{"uri":"amqp://h"}']]}),
        ("clear_parameter_none", pv + ["clear_parameter", "federation-upstream", P + "-none"], {}),
        ("set_global_parameter", ["set_global_parameter", P + "-g", '{"a":1}'],
         {"after": [["clear_global_parameter", P + "-g"]]}),
        ("clear_global_parameter", ["clear_global_parameter", P + "-g"],
         {"before": [["set_global_parameter", P + "-g", "1"]]}),
        ("clear_global_parameter_none", ["clear_global_parameter", P + "-none"], {}),
        # limits
        ("set_vhost_limits", pv + ["set_vhost_limits", '{"max-connections": 10, "max-queues": 4}'],
         {"after": [["clear_vhost_limits", "-p", V]]}),
        ("set_vhost_limits_bad", pv + ["set_vhost_limits", '{"max-foo": 1}'], {}),
        ("set_vhost_limits_badjson", pv + ["set_vhost_limits", "notjson"], {}),
        ("list_vhost_limits", pv + ["list_vhost_limits"],
         {"before": [["set_vhost_limits", "-p", V, '{"max-queues": 40}']], "after": [["clear_vhost_limits", "-p", V]]}),
        ("list_vhost_limits_none", pv + ["list_vhost_limits"], {}),
        ("list_vhost_limits_novhost", ["list_vhost_limits", "-p", P + "-nothere"], {}),
        ("clear_vhost_limits_none", pv + ["clear_vhost_limits"], {}),
        ("set_user_limits", ["set_user_limits", U, '{"max-channels": 30}'],
         {"after": [["clear_user_limits", U, "all"]]}),
        ("set_user_limits_bad", ["set_user_limits", U, '{"max-chans": 3}'], {}),
        ("set_user_limits_nouser", ["set_user_limits", P + "-nouser", '{"max-channels": 3}'], {}),
        ("list_user_limits", ["list_user_limits", "--user", U],
         {"before": [["set_user_limits", U, '{"max-connections": 40, "max-channels": 30}']],
          "after": [["clear_user_limits", U, "all"]]}),
        ("list_user_limits_none", ["list_user_limits", "--user", U], {}),
        ("clear_user_limits", ["clear_user_limits", U, "max-channels"],
         {"before": [["set_user_limits", U, '{"max-channels": 30}']]}),
        ("clear_user_limits_all", ["clear_user_limits", U, "all"], {}),
        # queues
        ("purge_queue", pv + ["purge_queue", "q-durable"], {}),
        ("purge_queue_json", pv + ["purge_queue", "q-durable", "--formatter", "json"], {}),
        ("purge_queue_noqueue", pv + ["purge_queue", "nosuchq"], {}),
        ("delete_queue", pv + ["delete_queue", "q-del"], {"declare": ("q-del", 2)}),
        ("delete_queue_quiet", pv + ["-q", "delete_queue", "q-del"], {"declare": ("q-del", 0)}),
        ("delete_queue_noqueue", pv + ["delete_queue", "nosuchq"], {}),
        ("delete_queue_notempty", pv + ["delete_queue", "q-full", "--if-empty"], {}),
        ("delete_queue_both", pv + ["delete_queue", "q-full", "-e", "-u"], {}),
        # definitions
        ("export_definitions", ["export_definitions", exp], {}),
        ("export_definitions_nodir", ["export_definitions", "/nonexistent/dir/x.json"], {}),
        ("export_definitions_noargs", ["export_definitions"], {}),
        ("import_definitions", ["import_definitions", imp],
         {"after": [["delete_vhost", P + "-imp"]]}),
        ("import_definitions_quiet", ["-q", "import_definitions", imp],
         {"after": [["delete_vhost", P + "-imp"]]}),
        ("import_definitions_nofile", ["import_definitions", os.path.join(fx.tmp, "none.json")], {}),
        ("import_bad", ["import_definitions", bad], {}),
        # node
        ("ping", ["ping"], {}),
        ("ping_quiet", ["-q", "ping"], {}),
        ("await_startup", ["await_startup"], {}),
        ("environment", ["environment"], {}),
        ("cluster_status", ["cluster_status"], {}),
        ("cluster_status_json", ["cluster_status", "--formatter", "json"], {}),
        ("list_feature_flags", ["list_feature_flags"], rows),
        ("list_feature_flags_all", ["list_feature_flags", "name", "state", "stability",
                                    "provided_by", "desc", "doc_url"], rows),
        ("list_feature_flags_json", ["list_feature_flags", "--formatter", "json"], js),
        ("list_unresponsive_queues", pv + ["list_unresponsive_queues"], {}),
        ("list_unresponsive_queues_json", pv + ["list_unresponsive_queues", "name", "durable",
                                                "--formatter", "json"], {}),
        ("list_unresponsive_queues_badcol", pv + ["list_unresponsive_queues", "name", "type"], {}),
        # set_vm_memory_high_watermark: refusals only (both refuse before the node is asked)
        ("set_vm_memory_high_watermark_range", ["set_vm_memory_high_watermark", "2"], {}),
        ("set_vm_memory_high_watermark_nan", ["set_vm_memory_high_watermark", "abc"], {}),
        ("set_vm_memory_high_watermark_units", ["set_vm_memory_high_watermark", "absolute",
                                                "10bytes"], {}),
        ("set_vm_memory_high_watermark_int", ["set_vm_memory_high_watermark", "absolute", "1.5GB"],
         {}),
        ("set_vm_memory_high_watermark_few", ["set_vm_memory_high_watermark", "absolute"], {}),
        ("set_vm_memory_high_watermark_many", ["set_vm_memory_high_watermark", "0.4", "0.5"], {}),
        # connections: only in a vhost of this run's own (never the node's or "/")
        ("close_all_connections", ["close_all_connections", "-p", P + "-v2", "cmp"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("close_all_connections_limit", ["close_all_connections", "-p", P + "-v2", "--limit", "2",
                                         "cmp"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        ("close_all_connections_json", ["close_all_connections", "-p", P + "-v2", "cmp",
                                        "--formatter", "json"],
         {"before": [["add_vhost", P + "-v2"]], "after": [["delete_vhost", P + "-v2"]]}),
        # the command line
        ("unknown_command", ["bogus_cmd"], {}),
        ("suggestion", ["list_queue"], {}),
        ("suggestion_2", ["add_usr"], {}),
        ("help", ["help"], {}),
        ("help_command", ["help", "delete_queue"], {}),
        ("help_unknown", ["help", "bogus_cmd"], {}),
        ("bad_option", ["list_queues", "--bogus"], {}),
    ]


def run_case(fx, tool, argv, opts):
    for step in opts.get("before", []):
        quiet(*step)
    if "declare" in opts:
        fx.declare(*opts["declare"])
    rc, out, err = tool(*argv, stdin=opts.get("stdin"))
    for step in opts.get("after", []):
        quiet(*step)
    return rc, out, err


def diff(a, b):
    import difflib
    return "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                        "rabbitmqctl", "warrenctl", n=1))


def main(argv):
    global WARRENCTL
    if "--warrenctl" in argv:
        WARRENCTL = argv[argv.index("--warrenctl") + 1]
    fx = Fixture()
    same = differ = 0
    report = []
    try:
        fx.setup()
        for name, args, opts in cases(fx):
            r = run_case(fx, rmq, args, opts)
            w = run_case(fx, wctl, args, opts)
            out_r, out_w = normalise(r[1], opts), normalise(w[1], opts)
            err_r, err_w = normalise(r[2], {}), normalise(w[2], {})
            cmd = " ".join(a if a and " " not in a and "{" not in a else "'%s'" % a for a in args)
            cmd = cmd.replace(P, "$P")
            if r[0] == w[0] and out_r == out_w and err_r == err_w:
                same += 1
                report.append("same  %-32s %s  (exit %d)" % (name, cmd, r[0]))
                continue
            differ += 1
            report.append("DIFF  %-32s %s" % (name, cmd))
            if name in KNOWN:
                report.append("      known: " + KNOWN[name])
            if r[0] != w[0]:
                report.append("      exit: rabbitmqctl %d, warrenctl %d" % (r[0], w[0]))
            for label, a, b in (("stdout", out_r, out_w), ("stderr", err_r, err_w)):
                if a != b:
                    report.append("      %s:" % label)
                    lines = diff(a, b).replace(P, "$P").splitlines()
                    report.extend("        " + ln for ln in lines[:MAX_DIFF_LINES])
                    if len(lines) > MAX_DIFF_LINES:
                        report.append("        ... (%d more lines)" % (len(lines) - MAX_DIFF_LINES))
    finally:
        fx.teardown()
    print("warrenctl vs rabbitmqctl %s, %s" % (rmq("version")[1].strip(), time.strftime("%Y-%m-%d")))
    print("$P is this run's prefix; rows compared sorted; node-wide lists filtered to $P and guest\n")
    print("\n".join(report))
    print("\n%d cases: %d the same, %d different" % (same + differ, same, differ))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
