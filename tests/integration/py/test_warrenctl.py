"""warrenctl (bin/warrenctl): rabbitmqctl's commands over the management API.

Two groups:
  - Local: warrenctl against a tiny HTTP server on a Unix socket started by
    the test (the socket Warren's broker creates at <data_dir>/warrenctl.sock):
    how the socket is found, that local requests carry no credentials, the
    requests each command sends, its output, and every exit code (64 usage,
    65 data, 67 no such user, 69 unavailable, 70 software, 75 timeout).
  - Live: against the broker the harness provides -- Warren through its
    data_dir's socket, or WARREN_TEST_TARGET's broker through --url
    http://host:15672 (WARREN_TEST_MGMT_URL to override) as guest. These are
    skipped, saying so, while the broker under test serves no management API.
Expected texts are rabbitmqctl 3.10's (tests/warrenctl/compare-rabbitmq.txt
has the side-by-side run against RabbitMQ).
"""
import base64
import contextlib
import http.client
import http.server
import json
import os
import shutil
import socket
import socketserver
import stat
import subprocess
import tempfile
import threading
import time
import unittest

from pika import exceptions as pex

import harness as h

RUN_TIMEOUT = 15


def warrenctl_bin():
    if os.environ.get("WARRENCTL_BIN"):
        return os.environ["WARRENCTL_BIN"]
    beside = os.path.join(os.path.dirname(h.WARREN_BIN), "bin", "warrenctl")
    if os.access(beside, os.X_OK):
        return beside
    return str(h.REPO / "build" / "release" / "bin" / "warrenctl")


def run(args, env=None, stdin=None, timeout=RUN_TIMEOUT, user=None):
    """Runs warrenctl; returns (exit status, stdout, stderr)."""
    full_env = dict(os.environ)
    full_env.pop("WARREN_CTL_SOCKET", None)
    full_env.update(env or {})
    kw = {}
    if user is not None:
        kw["preexec_fn"] = lambda: os.setuid(user)
    p = subprocess.run([warrenctl_bin()] + list(args), input=stdin, capture_output=True,
                       text=True, timeout=timeout, env=full_env, **kw)
    return p.returncode, p.stdout, p.stderr


# ---------------------------------------------------------------- a fake API on a Unix socket

class FakeAPI:
    """An HTTP/1.1 server on <dir>/warrenctl.sock (mode 0600) -- or with
    tcp_host on that host's ephemeral port (self.port) -- answering from a
    table {(method, path): (status, body, {"chunked": bool})}, recording
    every request as (method, path, headers, body)."""

    def __init__(self, routes=None, directory=None, tcp_host=None):
        self.dir = directory or tempfile.mkdtemp(prefix="warrenctl-test-")
        os.chmod(self.dir, 0o755)
        self.path = os.path.join(self.dir, "warrenctl.sock")
        self.routes = dict(routes or {})
        self.requests = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle_one(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode() if n else ""
                fake.requests.append((self.command, self.path, dict(self.headers), body))
                status, payload, opts = fake.routes.get((self.command, self.path),
                                                        (404, {"error": "Object Not Found",
                                                               "reason": "Not Found"}, {}))
                data = b"" if payload is None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Connection", "close")
                if opts.get("chunked"):
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    for i in range(0, len(data), 7):  # many small chunks
                        piece = data[i:i + 7]
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    self.wfile.write(b"0\r\n\r\n")
                else:
                    if status != 204:
                        self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    if status != 204:
                        self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = handle_one

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

            def get_request(self):
                conn, _ = self.socket.accept()
                return conn, ("local", 0)

        class TCPServer(socketserver.ThreadingMixIn, socketserver.TCPServer):
            daemon_threads = True

        if tcp_host:
            self.server = TCPServer((tcp_host, 0), Handler)
            self.port = self.server.server_address[1]
        else:
            self.server = Server(self.path, Handler)
            os.chmod(self.path, 0o600)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def route(self, method, path, status, body=None, **opts):
        self.routes[(method, path)] = (status, body, opts)

    def close(self):
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.dir, ignore_errors=True)


QUEUES = [
    {"name": "orders", "vhost": "/", "durable": True, "auto_delete": False, "exclusive": False,
     "arguments": {"x-message-ttl": 60000, "x-dead-letter-exchange": "dlx"}, "messages": 3,
     "messages_ready": 2, "messages_unacknowledged": 1, "consumers": 1, "policy": None,
     "state": "running", "type": "classic"},
    {"name": "q 2/odd", "vhost": "/", "durable": False, "auto_delete": True, "exclusive": False,
     "arguments": {}, "messages": 0, "messages_ready": 0, "messages_unacknowledged": 0,
     "consumers": 0, "policy": "ttl", "state": "running", "type": "classic"},
]
OVERVIEW = {"node": "warren@host", "product_name": "Warren", "product_version": "0.1.0",
            "cluster_name": "warren@host", "object_totals": {"connections": 2, "queues": 5},
            "listeners": [{"node": "warren@host", "protocol": "amqp", "ip_address": "127.0.0.1",
                           "port": 5672},
                          {"node": "warren@host", "protocol": "http", "ip_address": "::",
                           "port": 15672},
                          {"node": "warren@host", "protocol": "http/prometheus", "ip_address": "::",
                           "port": 15692}]}
NODES = [{"name": "warren@host", "os_pid": "4242", "uptime": 61500, "mem_used": 137100000,
          "mem_limit": 10110396006, "mem_alarm": False, "disk_free_alarm": True,
          "fd_used": 6, "fd_total": 1024, "sockets_used": 1, "sockets_total": 900,
          "disk_free": 84674007040, "disk_free_limit": 50000000, "db_dir": "/var/lib/warren"}]


class Local(unittest.TestCase):
    def setUp(self):
        self.api = FakeAPI()

    def tearDown(self):
        self.api.close()

    def ctl(self, *args, **kw):
        return run(["--data-dir", self.api.dir] + list(args), **kw)

    # -- finding the socket, and what a local request carries

    def test_list_queues_over_the_data_dir_socket(self):
        self.api.route("GET", "/api/queues/%2F", 200, QUEUES, chunked=True)
        rc, out, err = self.ctl("list_queues")
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, "Timeout: 60.0 seconds ...\nListing queues for vhost / ...\n"
                              "name\tmessages\norders\t3\nq 2/odd\t0\n")
        method, path, headers, _ = self.api.requests[0]
        self.assertEqual((method, path), ("GET", "/api/queues/%2F"))
        self.assertNotIn("Authorization", headers)  # the socket is trusted as the administrator
        self.assertEqual(headers.get("Connection"), "close")

    def test_socket_from_flag_env_and_config(self):
        self.api.route("GET", "/api/vhosts", 200, [{"name": "/"}])
        conf = os.path.join(self.api.dir, "warren.conf")
        with open(conf, "w") as f:
            f.write("# a comment\ndata_dir = /nonexistent\ndata_dir = %s  # the last wins\n"
                    % self.api.dir)
        for args, env in ((["--socket", self.api.path], None),
                          ([], {"WARREN_CTL_SOCKET": self.api.path}),
                          (["--config", conf], None),
                          (["--data-dir", self.api.dir + "/"], None)):
            rc, out, err = run(args + ["-q", "list_vhosts"], env=env)
            self.assertEqual((rc, out, err), (0, "name\n/\n", ""), args)
        # --socket beats the environment, which beats data_dir
        rc, _, err = run(["--socket", "/nonexistent/s.sock", "-q", "list_vhosts"],
                         env={"WARREN_CTL_SOCKET": self.api.path})
        self.assertEqual(rc, 69)
        self.assertIn("/nonexistent/s.sock", err)
        rc, _, _ = run(["--data-dir", "/nonexistent", "-q", "list_vhosts"],
                       env={"WARREN_CTL_SOCKET": self.api.path})
        self.assertEqual(rc, 0)

    def test_default_is_var_in_the_current_directory(self):
        self.api.route("GET", "/api/users", 200, [{"name": "guest", "tags": ["administrator"]}])
        os.rename(self.api.dir, self.api.dir + "-x")
        os.makedirs(self.api.dir)
        os.rename(self.api.dir + "-x", os.path.join(self.api.dir, "var"))
        p = subprocess.run([warrenctl_bin(), "list_users"], capture_output=True, text=True,
                           cwd=self.api.dir, timeout=RUN_TIMEOUT)
        self.assertEqual((p.returncode, p.stdout),
                         (0, "Listing users ...\nuser\ttags\nguest\t[administrator]\n"))

    def test_other_user_is_refused_by_the_socket_mode(self):
        """The socket is mode 0600: only the broker's own OS user may connect."""
        self.api.route("GET", "/api/vhosts", 200, [{"name": "/"}])
        self.assertEqual(stat.S_IMODE(os.stat(self.api.path).st_mode), 0o600)
        if os.geteuid() == 0:
            rc, out, err = self.ctl("list_vhosts", user=65534)  # nobody
        else:  # a non-root owner is refused too once the mode says so
            os.chmod(self.api.path, 0)
            rc, out, err = self.ctl("list_vhosts")
        self.assertEqual(rc, 69, err)
        self.assertIn("unix socket connect: Permission denied", err)
        self.assertIn(self.api.path, err)
        self.assertEqual(self.api.requests, [])

    def test_credentials_over_the_socket_are_sent(self):
        self.api.route("GET", "/api/vhosts", 200, [])
        rc, _, _ = self.ctl("-u", "alice", "-p", "s3cret", "list_vhosts")
        self.assertEqual(rc, 0)
        auth = self.api.requests[0][2].get("Authorization")
        self.assertEqual(auth, "Basic " + base64.b64encode(b"alice:s3cret").decode())

    # -- listings

    def test_columns_json_and_headers(self):
        self.api.route("GET", "/api/queues/my%20vh%2Fx", 200, QUEUES)
        rc, out, err = self.ctl("-q", "list_queues", "-p", "my vh/x", "name", "durable",
                                "arguments", "policy", "messages_unacknowledged")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "name\tdurable\targuments\tpolicy\tmessages_unacknowledged\n"
                              "orders\ttrue\t[{\"x-message-ttl\",60000},{\"x-dead-letter-exchange\",\"dlx\"}]\t\t1\n"
                              "q 2/odd\tfalse\t[]\tttl\t0\n")
        rc, out, _ = self.ctl("list_queues", "-p", "my vh/x", "--formatter=json", "name", "arguments")
        self.assertEqual(out, '[\n{"name":"orders","arguments":[["x-message-ttl","signedint",60000],'
                              '["x-dead-letter-exchange","longstr","dlx"]]}\n'
                              ',{"name":"q 2/odd","arguments":[]}\n]\n')
        for flags in (["--no-table-headers"], ["-s"]):
            rc, out, _ = self.ctl("list_queues", "-p", "my vh/x", *flags)
            self.assertEqual(out.splitlines()[-2:], ["orders\t3", "q 2/odd\t0"], flags)
            self.assertNotIn("name\tmessages", out)
        rc, out, _ = self.ctl("-s", "list_queues", "-p", "my vh/x")
        self.assertEqual(out, "orders\t3\nq 2/odd\t0\n")

    def test_unknown_column_is_a_usage_error_before_any_request(self):
        rc, out, err = self.ctl("list_queues", "name", "bogus,other")
        self.assertEqual(rc, 64)
        self.assertEqual(out, "")
        self.assertTrue(err.startswith("Error (argument validation): Info key(s) bogus,other are "
                                       "not supported\nArguments given:\n\tlist_queues name bogus,other\n"
                                       "\n\x1b[1mUsage\x1b[0m\n\nwarrenctl [--node <node>] [--longnames] "
                                       "[--quiet] list_queues [--vhost <vhost>]"), err)
        self.assertEqual(self.api.requests, [])

    def test_missing_vhost_lists_nothing_but_policies_say_so(self):
        rc, out, err = self.ctl("list_exchanges", "-p", "gone")
        self.assertEqual((rc, out, err), (0, "Listing exchanges for vhost gone ...\n", ""))
        rc, out, err = self.ctl("list_policies", "-p", "gone")
        self.assertEqual((rc, err), (65, "Virtual host 'gone' does not exist\n"))
        rc, out, err = self.ctl("list_user_permissions", "nobody")
        self.assertEqual((rc, err), (69, 'Error:\n{:no_such_user, "nobody"}\n'))

    def test_empty_non_streaming_list_prints_an_empty_line(self):
        self.api.route("GET", "/api/policies/%2F", 200, [])
        self.assertEqual(self.ctl("list_policies")[1], 'Listing policies for vhost "/" ...\n\n')
        self.assertEqual(self.ctl("list_policies", "--formatter", "json")[1], "[]\n")

    def test_paged_envelope_is_understood(self):
        self.api.route("GET", "/api/exchanges/%2F", 200, {"items": [{"name": "amq.direct",
                                                                     "type": "direct"}],
                                                          "page": 1, "page_count": 1})
        self.assertEqual(self.ctl("-q", "list_exchanges")[1], "name\ttype\namq.direct\tdirect\n")

    # -- changes: the requests they send and rabbitmqctl's messages and codes

    def test_add_user_refuses_an_existing_user(self):
        self.api.route("GET", "/api/users/bob", 200, {"name": "bob", "tags": []})
        rc, out, err = self.ctl("add_user", "bob", "pw")
        self.assertEqual((rc, out, err), (70, 'Adding user "bob" ...\n',
                                          'Error:\nUser "bob" already exists\n'))
        self.assertEqual([r[0] for r in self.api.requests], ["GET"])

    def test_add_user_puts_the_password(self):
        self.api.route("PUT", "/api/users/bob", 201)
        rc, out, err = self.ctl("add_user", "bob", "pw")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, 'Adding user "bob" ...\nDone. Don\'t forget to grant the user '
                              "permissions to some virtual hosts! See 'warrenctl help "
                              "set_permissions' to learn more.\n")
        method, path, _, body = self.api.requests[-1]
        self.assertEqual((method, path, json.loads(body)), ("PUT", "/api/users/bob",
                                                            {"password": "pw", "tags": ""}))
        rc, out, err = self.ctl("add_user", "bob", stdin="from-stdin\n")
        self.assertEqual(json.loads(self.api.requests[-1][3])["password"], "from-stdin")
        rc, out, err = self.ctl("add_user", "bob", stdin="")
        self.assertEqual((rc, err), (65, "Error:\nPassword is not provided via argument or stdin\n"))

    def test_set_user_tags_keeps_the_password_hash(self):
        self.api.route("GET", "/api/users/bob", 200, {"name": "bob", "tags": ["x"],
                                                      "password_hash": "SGFzaA==",
                                                      "hashing_algorithm": "rabbit_password_hashing_sha256"})
        self.api.route("PUT", "/api/users/bob", 204)
        rc, out, _ = self.ctl("set_user_tags", "bob", "administrator", "monitoring")
        self.assertEqual((rc, out), (0, 'Setting tags for user "bob" to [administrator, monitoring] ...\n'))
        self.assertEqual(json.loads(self.api.requests[-1][3]),
                         {"password_hash": "SGFzaA==", "tags": "administrator,monitoring",
                          "hashing_algorithm": "rabbit_password_hashing_sha256"})
        self.api.route("PUT", "/api/users/bob", 204)
        self.ctl("change_password", "bob", "new")
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"password": "new", "tags": "x"})

    def test_missing_user_is_exit_67(self):
        for args in (["delete_user", "ghost"], ["change_password", "ghost", "x"],
                     ["set_user_tags", "ghost", "t"]):
            rc, _, err = self.ctl(*args)
            self.assertEqual((rc, err), (67, 'Error:\nUser "ghost" does not exist\n'), args)

    def test_permission_errors_name_what_is_missing(self):
        self.api.route("PUT", "/api/permissions/v1/bob", 400,
                       {"error": "bad_request", "reason": "vhost_or_user_not_found"})
        rc, out, err = self.ctl("set_permissions", "-p", "v1", "bob", ".*", ".*", ".*")
        self.assertEqual((rc, err), (69, "Error:\nVirtual host v1 does not exist\n"))
        self.assertEqual(out, 'Setting permissions for user "bob" in vhost "v1" ...\n')
        self.api.route("GET", "/api/vhosts/v1", 200, {"name": "v1"})
        rc, _, err = self.ctl("set_permissions", "-p", "v1", "bob", ".*", ".*", ".*")
        self.assertEqual((rc, err), (67, "Error:\nUser bob does not exist\n"))
        put = [r for r in self.api.requests if r[0] == "PUT"][0]
        self.assertEqual(json.loads(put[3]), {"configure": ".*", "write": ".*", "read": ".*"})

    def test_set_policy_body_and_refusal(self):
        self.api.route("PUT", "/api/policies/%2F/p1", 400, {
            "error": "bad_request", "reason": "Validation failed\n\n[{&lt;&lt;\"max-priority\"&gt;&gt;,3}] "
                                              "are not recognised policy settings\n"})
        rc, out, err = self.ctl("set_policy", "p1", "^q", '{"max-priority":3}', "--priority", "7",
                                "--apply-to", "queues")
        self.assertEqual(out, 'Setting policy "p1" for pattern "^q" to "{"max-priority":3}" with '
                              'priority "7" for vhost "/" ...\n')
        self.assertEqual((rc, err), (69, "Error:\nValidation failed\n\n[{<<\"max-priority\">>,3}] "
                                         "are not recognised policy settings\n\n"))
        self.assertEqual(json.loads(self.api.requests[0][3]),
                         {"pattern": "^q", "definition": {"max-priority": 3}, "priority": 7,
                          "apply-to": "queues"})
        rc, _, err = self.ctl("set_policy", "p1", "^q", "{bad")
        self.assertEqual((rc, err), (69, "Error:\nJSON decoding error. Reason: badarg\n"))
        rc, _, err = self.ctl("clear_operator_policy", "p1")
        self.assertEqual((rc, err), (69, "Error:\nParameter does not exist\n"))
        self.assertEqual(self.api.requests[-1][:2], ("DELETE", "/api/operator-policies/%2F/p1"))

    def test_close_connection_sends_the_reason(self):
        name = "127.0.0.1:5000 -> 127.0.0.1:5672"
        self.api.route("DELETE", "/api/connections/127.0.0.1%3A5000%20-%3E%20127.0.0.1%3A5672", 204)
        rc, out, err = self.ctl("close_connection", name, "go away\r\nX-Evil: 1")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "Closing connection %s, reason: go away\nX-Evil: 1...\n" % name)
        headers = self.api.requests[0][2]
        self.assertEqual(headers["X-Reason"], "go away  X-Evil: 1")
        self.assertNotIn("X-Evil", headers)
        rc, _, err = self.ctl("close_connection", "nope", "x")
        self.assertEqual(rc, 65)
        self.assertIn('Connection "nope" not found', err)

    def test_delete_queue_reports_ready_messages(self):
        self.api.route("GET", "/api/queues/%2F/orders", 200, QUEUES[0])
        self.api.route("DELETE", "/api/queues/%2F/orders?if-empty=true&if-unused=true", 400,
                       {"error": "bad_request", "reason": "precondition_failed"})
        rc, out, err = self.ctl("delete_queue", "orders", "-e", "-u")
        self.assertEqual(out, "Deleting queue 'orders' on vhost '/' if queue is empty and if queue "
                              "is unused ...\n")
        self.assertEqual((rc, err), (64, "Error:\nQueue is not empty\n"))
        self.api.route("DELETE", "/api/queues/%2F/orders", 204)
        rc, out, _ = self.ctl("-q", "delete_queue", "orders")
        self.assertEqual((rc, out), (0, "Queue was successfully deleted with 2 ready messages\n"))
        rc, _, err = self.ctl("delete_queue", "nosuch")
        self.assertEqual((rc, err), (64, "Error:\nQueue not found\n"))
        rc, _, err = self.ctl("purge_queue", "nosuch")
        self.assertEqual((rc, err), (69, "Error:\nnot_found\n"))
        self.assertEqual(self.api.requests[-1][:2], ("DELETE", "/api/queues/%2F/nosuch/contents"))

    def test_definitions_round_trip_through_files(self):
        defs = {"vhosts": [{"name": "/"}], "queues": [], "bindings": [], "rabbit_version": "3.10.8"}
        self.api.route("GET", "/api/definitions", 200, defs)
        self.api.route("POST", "/api/definitions", 204)
        out_file = os.path.join(self.api.dir, "defs.json")
        rc, out, _ = self.ctl("export_definitions", out_file)
        self.assertEqual((rc, out), (0, 'Exporting definitions in JSON to a file at "%s" ...\n' % out_file))
        with open(out_file) as f:  # compact, sorted keys, no newline: as rabbitmqctl writes
            self.assertEqual(f.read(), json.dumps(defs, separators=(",", ":"), sort_keys=True))
        rc, out, _ = self.ctl("export_definitions", "-")
        self.assertEqual(json.loads(out), defs)
        rc, out, err = self.ctl("import_definitions", out_file)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(self.api.requests[-1][3]), defs)
        rc, out, _ = self.ctl("-q", "import_definitions", stdin='{"users":[]}')
        self.assertEqual((rc, out), (0, ""))
        self.assertEqual(self.api.requests[-1][3], '{"users":[]}')
        rc, _, err = self.ctl("import_definitions", stdin="{bad")
        self.assertEqual(rc, 65)
        self.assertIn("Failed to deserialise input (format: JSON)", err)
        rc, _, err = self.ctl("export_definitions", "/nonexistent/dir/x.json")
        self.assertEqual(rc, 65)
        self.assertIn("Bad argument: Directory /nonexistent/dir does not exist", err)

    def test_authenticate_user_uses_the_users_own_credentials(self):
        self.api.route("GET", "/api/whoami", 401, {"error": "not_authorized", "reason": "Login failed"})
        rc, out, err = self.ctl("authenticate_user", "bob", "wrong")
        self.assertEqual(out, 'Authenticating user "bob" ...\n')
        self.assertEqual((rc, err), (65, 'Error:\nError: failed to authenticate user "bob"\n'
                                         "user 'bob' - invalid credentials\n"))
        self.assertEqual(self.api.requests[0][2]["Authorization"],
                         "Basic " + base64.b64encode(b"bob:wrong").decode())
        self.api.route("GET", "/api/whoami", 200, {"name": "bob", "tags": []})
        self.assertEqual(self.ctl("-q", "authenticate_user", "bob", "right")[:2], (0, "Success\n"))

    def test_server_errors_are_exit_70(self):
        self.api.route("GET", "/api/vhosts", 500, {"error": "internal", "reason": "boom"})
        rc, _, err = self.ctl("list_vhosts")
        self.assertEqual((rc, err), (70, "Error:\nthe broker failed (HTTP 500): boom\n"))

    # -- node commands

    def test_status_sections(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        self.api.route("GET", "/api/nodes", 200, NODES)
        self.api.route("GET", "/api/vhosts", 200, [{"name": "/"}, {"name": "v"}])
        rc, out, err = self.ctl("status")
        self.assertEqual(rc, 0, err)
        B, E = "\x1b[1m", "\x1b[0m"
        self.assertEqual(out, (
            "Status of node warren@host ...\n%sRuntime%s\n\nOS PID: 4242\nUptime (seconds): 61\n"
            "Warren version: 0.1.0\nNode name: warren@host\n\n%sData directory%s\n\n"
            "Node data directory: /var/lib/warren\n\n%sAlarms%s\n\n"
            "Free disk space alarm on node warren@host\n\n%sMemory%s\n\n"
            "Total memory used: 0.1371 gb\nMemory high watermark setting: computed to: 10.1104 gb\n"
            "\n%sFile Descriptors%s\n\nTotal: 6, limit: 1024\nSockets: 1, limit: 900\n\n"
            "%sFree Disk Space%s\n\nLow free disk space watermark: 0.05 gb\nFree disk space: 84.674 gb\n"
            "\n%sTotals%s\n\nConnection count: 2\nQueue count: 5\nVirtual host count: 2\n\n"
            "%sListeners%s\n\nInterface: 127.0.0.1, port: 5672, protocol: amqp, purpose: AMQP 0-9-1\n"
            "Interface: [::], port: 15672, protocol: http, purpose: HTTP API\n"
            "Interface: [::], port: 15692, protocol: http/prometheus, purpose: Prometheus exporter API "
            "over HTTP\n")
            % ((B, E) * 8))
        # RabbitMQ's AMQP listener takes 1.0 too, as rabbitmqctl says
        self.api.route("GET", "/api/overview", 200, dict(OVERVIEW, product_name="RabbitMQ"))
        self.assertIn("protocol: amqp, purpose: AMQP 0-9-1 and AMQP 1.0\n", self.ctl("status")[1])
        rc, out, _ = self.ctl("status", "--unit", "mb")
        self.assertIn("Total memory used: 137.1 mb\n", out)
        rc, _, err = self.ctl("status", "--unit", "furlongs")
        self.assertEqual(rc, 64)

    def test_cluster_status(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        self.api.route("GET", "/api/nodes", 200, NODES)
        self.api.route("GET", "/api/feature-flags", 200, [
            {"name": "quorum_queue", "desc": "Support queues of type `quorum`", "doc_url": "",
             "state": "enabled", "stability": "stable", "provided_by": "rabbit"}])
        rc, out, err = self.ctl("cluster_status")
        self.assertEqual(rc, 0, err)
        B, E = "\x1b[1m", "\x1b[0m"
        self.assertEqual(out, (
            "Cluster status of node warren@host ...\n%sBasics%s\n\nCluster name: warren@host\n\n"
            "%sDisk Nodes%s\n\nwarren@host\n\n%sRunning Nodes%s\n\nwarren@host\n\n"
            "%sVersions%s\n\nwarren@host: Warren 0.1.0\n\n"
            "%sMaintenance status%s\n\nNode: warren@host, status: not under maintenance\n\n"
            "%sAlarms%s\n\nFree disk space alarm on node warren@host\n\n"
            "%sNetwork Partitions%s\n\n(none)\n\n%sListeners%s\n\n"
            "Node: warren@host, interface: 127.0.0.1, port: 5672, protocol: amqp, purpose: AMQP 0-9-1\n"
            "Node: warren@host, interface: [::], port: 15672, protocol: http, purpose: HTTP API\n"
            "Node: warren@host, interface: [::], port: 15692, protocol: http/prometheus, purpose: "
            "Prometheus exporter API over HTTP\n\n"
            "%sFeature flags%s\n\nFlag: quorum_queue, state: enabled\n") % ((B, E) * 9))
        rc, out, _ = self.ctl("cluster_status", "--formatter", "json")
        j = json.loads(out)
        self.assertEqual(sorted(j), ["alarms", "cluster_name", "disk_nodes", "feature_flags", "listeners",
                                     "maintenance_status", "partitions", "ram_nodes", "running_nodes",
                                     "versions"])
        self.assertEqual((j["running_nodes"], j["ram_nodes"], j["partitions"]), (["warren@host"], [], {}))
        self.assertEqual(j["alarms"], [{"node": "warren@host", "resource": "disk", "type": "resource_limit"}])
        self.assertEqual(j["listeners"]["warren@host"][0], {"interface": "127.0.0.1", "node": "warren@host",
                                                            "port": 5672, "protocol": "amqp",
                                                            "purpose": "AMQP 0-9-1"})
        self.assertEqual(j["versions"], {"warren@host": {"rabbitmq_name": "Warren", "rabbitmq_version": "0.1.0"}})
        # a second node (a future cluster) fills the sections as it is; no flags for a non-administrator
        self.api.route("GET", "/api/nodes", 200, NODES + [dict(NODES[0], name="warren@other", type="ram",
                                                               running=False, disk_free_alarm=False,
                                                               partitions=["warren@host"])])
        self.api.route("GET", "/api/feature-flags", 401, {"error": "not_authorised",
                                                          "reason": "Not administrator user"})
        rc, out, _ = self.ctl("-q", "cluster_status")
        self.assertIn("%sDisk Nodes%s\n\nwarren@host\n\n%sRAM Nodes%s\n\nwarren@other\n\n"
                      "%sRunning Nodes%s\n\nwarren@host\n" % ((B, E) * 3), out)
        self.assertIn("Node warren@other cannot communicate with warren@host\n", out)
        self.assertTrue(out.endswith("%sFeature flags%s\n\n(none)\n" % (B, E)), out)

    def test_parameters(self):
        self.api.route("PUT", "/api/parameters/federation-upstream/v%2F1/up", 201)
        rc, out, err = self.ctl("set_parameter", "-p", "v/1", "federation-upstream", "up", '{"uri":"amqp://h"}')
        self.assertEqual((rc, out, err), (0, 'Setting runtime parameter "up" for component "federation-upstream" '
                                             'to "{"uri":"amqp://h"}" in vhost "v/1" ...\n', ""))
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"value": {"uri": "amqp://h"}})
        self.assertEqual(self.ctl("set_parameter", "shovel", "s", "notjson")[:3],
                         (69, 'Setting runtime parameter "s" for component "shovel" to "notjson" in vhost "/" ...\n',
                          "Error:\nJSON decoding error. Reason: badarg\n"))
        self.api.route("PUT", "/api/parameters/nosuchcomp/%2F/l", 400, {
            "error": "bad_request", "reason": "Validation failed\n\ncomponent nosuchcomp not found\n"})
        self.assertEqual(self.ctl("-q", "set_parameter", "nosuchcomp", "l", "{}")[::2],
                         (69, "Error:\nValidation failed\n\ncomponent nosuchcomp not found\n\n"))
        self.assertEqual(self.ctl("-q", "set_parameter", "-p", "gone", "shovel", "s", "{}")[::2],
                         (65, "Virtual host 'gone' does not exist\n"))
        self.assertEqual(self.ctl("-q", "clear_parameter", "shovel", "s")[::2],
                         (69, "Error:\nParameter does not exist\n"))
        self.api.route("PUT", "/api/global-parameters/cluster_name", 204)
        self.assertEqual(self.ctl("set_global_parameter", "cluster_name", '"east"')[:2],
                         (0, 'Setting global runtime parameter "cluster_name" to ""east"" ...\n'))
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"value": "east"})
        self.api.route("DELETE", "/api/global-parameters/cluster_name", 204)
        self.assertEqual(self.ctl("clear_global_parameter", "cluster_name")[:2],
                         (0, 'Clearing global runtime parameter "cluster_name" ...\n'))

    def test_list_parameters_keeps_the_vhosts_rows(self):
        self.api.route("GET", "/api/parameters/operator_policy/v", 200, [])
        self.api.route("GET", "/api/parameters", 200, [
            {"value": {"pattern": "^x", "definition": {"max-length": 1}, "priority": 0, "apply-to": "all"},
             "vhost": "v", "component": "operator_policy", "name": "op"},
            {"value": {"uri": "amqp://h"}, "vhost": "other", "component": "federation-upstream", "name": "u"},
            {"value": [{"upstream": "u"}], "vhost": "v", "component": "federation-upstream-set", "name": "s"}])
        rc, out, err = self.ctl("list_parameters", "-p", "v")
        self.assertEqual((rc, out), (0, 'Listing runtime parameters for vhost "v" ...\ncomponent\tname\tvalue\n'
                                        'operator_policy\top\t{"pattern":"^x","definition":{"max-length":1},'
                                        '"priority":0,"apply-to":"all"}\n'
                                        'federation-upstream-set\ts\t[{"upstream":"u"}]\n'))
        self.assertEqual(self.ctl("list_parameters", "-p", "gone")[::2], (65, "Virtual host 'gone' does not exist\n"))
        self.api.route("GET", "/api/global-parameters", 200, [{"name": "internal_cluster_id", "value": "x-1"}])
        self.assertEqual(self.ctl("list_global_parameters", "--formatter", "json")[1],
                         '[\n{"name":"internal_cluster_id","value":"\\"x-1\\""}\n]\n')

    def test_feature_flags_and_unresponsive_queues(self):
        self.api.route("GET", "/api/feature-flags", 200, [
            {"name": "quorum_queue", "desc": "Support queues of type `quorum`", "doc_url": "u", "state": "enabled",
             "stability": "stable", "provided_by": "rabbit"}])
        self.assertEqual(self.ctl("list_feature_flags")[1], "Listing feature flags ...\nname\tstate\n"
                                                             "quorum_queue\tenabled\n")
        self.assertEqual(self.ctl("-s", "list_feature_flags", "provided_by", "doc_url")[1], "rabbit\tu\n")
        self.api.route("GET", "/api/queues/%2F", 200, QUEUES + [dict(QUEUES[0], name="stuck", state="down")])
        self.assertEqual(self.ctl("list_unresponsive_queues", "name", "durable")[1],
                         "Listing unresponsive queues for vhost / ...\nname\tdurable\nstuck\ttrue\n")
        self.api.route("GET", "/api/queues/%2F", 200, QUEUES)
        self.assertEqual(self.ctl("list_unresponsive_queues", "--queue-timeout", "50", "--local")[1],
                         "Listing unresponsive queues for vhost / ...\n")
        self.assertEqual(self.ctl("-q", "list_unresponsive_queues", "--formatter", "json")[1], "[\n]\n")
        rc, _, err = self.ctl("list_unresponsive_queues", "type")
        self.assertEqual(rc, 64)
        self.assertTrue(err.startswith("Error (argument validation): Info key(s) type are not supported"))

    def test_set_vm_memory_high_watermark(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        self.api.route("PUT", "/api/nodes/warren%40host/vm-memory-high-watermark", 204)
        rc, out, err = self.ctl("set_vm_memory_high_watermark", "absolute", "1GB")
        self.assertEqual((rc, out, err), (0, "Setting memory threshold on warren@host to 1GB bytes ...\n", ""))
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"absolute": 1000000000})
        self.ctl("set_vm_memory_high_watermark", "absolute", "2k")
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"absolute": 2048})
        rc, out, _ = self.ctl("set_vm_memory_high_watermark", "0.6")
        self.assertEqual((rc, out), (0, "Setting memory threshold on warren@host to 0.6 ...\n"))
        self.assertEqual(json.loads(self.api.requests[-1][3]), {"relative": 0.6})
        before = len(self.api.requests)
        for args, code, why in ((["2"], 65, "Bad argument: The threshold should be a fraction between 0.0 and 1.0"),
                                (["abc"], 65, "Bad argument."),
                                (["absolute"], 64, "not enough arguments."),
                                (["absolute", "10bytes"], 65, "Bad argument: Invalid units."),
                                (["absolute", "1.5GB"], 65, "Bad argument: The threshold should be an integer."),
                                (["0.4", "0.5"], 64, "too many arguments."),
                                (["absolute", "0"], 65, "Bad argument.")):
            rc, _, err = self.ctl("set_vm_memory_high_watermark", *args)
            self.assertEqual(rc, code, args)
            self.assertTrue(err.startswith("Error (argument validation): %s\n" % why), err)
        self.assertEqual(len(self.api.requests), before, "refused before any request")
        del self.api.routes[("PUT", "/api/nodes/warren%40host/vm-memory-high-watermark")]
        rc, _, err = self.ctl("set_vm_memory_high_watermark", "0.5")
        self.assertEqual(rc, 69)
        self.assertIn("does not support 'set_vm_memory_high_watermark'", err)

    def test_close_all_connections(self):
        conns = [{"name": "c%d" % i} for i in range(3)]
        self.api.route("GET", "/api/vhosts/v/connections", 200, conns)
        self.api.route("GET", "/api/connections", 200, conns + [{"name": "elsewhere"}])
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        for i in range(3):
            self.api.route("DELETE", "/api/connections/c%d" % i, 204)
        rc, out, err = self.ctl("close_all_connections", "-p", "v", "--limit", "2", "go\naway")
        self.assertEqual((rc, out, err), (0, "Closing 2 connections in vhost v, reason: go\naway...\n"
                                             "Closed 2 connections\n", ""))
        deletes = [(r[1], r[2].get("X-Reason")) for r in self.api.requests if r[0] == "DELETE"]
        self.assertEqual(deletes, [("/api/connections/c0", "go away"), ("/api/connections/c1", "go away")])
        rc, out, _ = self.ctl("close_all_connections", "--global", "bye", "--formatter", "json")
        self.assertEqual((rc, out), (0, '{"node":"warren@host","result":"ok","value":"Closed 4 connections"}\n'))
        self.assertEqual(self.ctl("close_all_connections", "-p", "gone", "bye")[:2],
                         (0, "Closing all connections in vhost gone, reason: bye...\nClosed 0 connections\n"))

    def test_report_sections(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        self.api.route("GET", "/api/nodes", 200, NODES)
        self.api.route("GET", "/api/vhosts", 200, [{"name": "/"}])
        self.api.route("GET", "/api/environment", 200, {"heartbeat": 60})
        self.api.route("GET", "/api/policies/%2F", 200, [])
        self.api.route("GET", "/api/vhosts/%2F/permissions", 200, [])
        self.api.route("GET", "/api/parameters/operator_policy/%2F", 200, [])
        self.api.route("GET", "/api/parameters", 200, [])
        self.api.route("GET", "/api/global-parameters", 200, [])
        rc, out, err = self.ctl("report")
        self.assertEqual(rc, 0, err)
        heads = [ln for ln in out.splitlines() if ln.endswith("...") or ln.startswith("Reporting")]
        self.assertEqual(heads, [
            "Reporting server status of node warren@host ...", "Status of node warren@host ...",
            "Cluster status of node warren@host ...", "Application environment of node warren@host ...",
            "Listing connections ...", "Listing channels ...", "Timeout: 60.0 seconds ...",
            "Listing queues for vhost / ...", "Listing exchanges for vhost / ...", "Listing bindings for vhost /...",
            'Listing permissions for vhost "/" ...', 'Listing policies for vhost "/" ...',
            "Listing global runtime parameters ...", 'Listing runtime parameters for vhost "/" ...'])
        self.assertTrue(out.startswith("Reporting server status of node warren@host ...\n\nStatus of node"))
        rc, _, err = self.ctl("report", "--formatter", "json")
        self.assertEqual(rc, 64)
        self.assertTrue(err.startswith('Error (argument validation): "Only report formatter is supported"'))

    def test_node_option(self):
        """-n: this machine is the control socket; another host its
        management API on 15672 (or --management-port)."""
        self.api.route("GET", "/api/vhosts", 200, [{"name": "/"}])
        for node in ("rabbit@localhost", "rabbit", "rabbit@" + socket.gethostname(), "rabbit@127.0.0.1"):
            self.assertEqual(self.ctl("-n", node, "-q", "list_vhosts")[:2], (0, "name\n/\n"), node)
        tcp = FakeAPI(tcp_host="0.0.0.0")
        self.addCleanup(tcp.close)
        tcp.route("GET", "/api/vhosts", 200, [{"name": "/"}, {"name": "over-http"}])
        # another host -- this machine's own non-loopback address stands in for one: its
        # management API, with the credentials given
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.connect(("192.0.2.1", 9))   # no packet is sent: it only picks the outgoing address
        mine = udp.getsockname()[0]
        udp.close()
        self.assertFalse(mine.startswith("127."), "the test needs a non-loopback address")
        rc, out, err = run(["-n", "rabbit@" + mine, "--management-port", str(tcp.port), "-u", "ops", "-p", "pw",
                            "-q", "list_vhosts"])
        self.assertEqual((rc, out), (0, "name\n/\nover-http\n"), err)
        self.assertEqual(tcp.requests[-1][2].get("Authorization"), "Basic " + base64.b64encode(b"ops:pw").decode())
        # this machine without a socket to be found (no ./var here): its management API, as guest
        empty = tempfile.mkdtemp(prefix="warrenctl-cwd-")
        self.addCleanup(shutil.rmtree, empty, True)
        p = subprocess.run([warrenctl_bin(), "-n", "rabbit@localhost", "--management-port", str(tcp.port),
                            "-q", "list_vhosts"], capture_output=True, text=True, cwd=empty,
                           timeout=RUN_TIMEOUT, env={k: v for k, v in os.environ.items()
                                                     if k != "WARREN_CTL_SOCKET"})
        self.assertEqual((p.returncode, p.stdout), (0, "name\n/\nover-http\n"), p.stderr)
        self.assertEqual(tcp.requests[-1][2].get("Authorization"), "Basic " + base64.b64encode(b"guest:guest").decode())
        # a named socket is used even with -n, missing or not
        rc, _, err = run(["-n", "rabbit@localhost", "--socket", "/nonexistent/w.sock", "-q", "list_vhosts"])
        self.assertEqual(rc, 69)
        self.assertIn("/nonexistent/w.sock", err)

    def test_ping(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        rc, out, _ = self.ctl("ping")
        self.assertEqual((rc, out.splitlines()[-1]), (0, "Ping succeeded"))
        self.assertTrue(out.startswith("Will ping warren@host."))
        self.assertEqual(self.ctl("-q", "ping")[:2], (0, "Ping succeeded\n"))
        self.assertEqual(self.ctl("ping", "--formatter", "json")[1], '{"message":"Ping succeeded"}\n')

    def test_environment(self):
        self.api.route("GET", "/api/overview", 200, OVERVIEW)
        self.api.route("GET", "/api/environment", 200, {
            "listeners.tcp.default": "127.0.0.1:5672", "heartbeat": 60, "data_dir": "/var/w",
            "loopback_users.guest": True})
        rc, out, err = self.ctl("environment")
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "Application environment of node warren@host ...\n"
                              "[{data_dir,\"/var/w\"},\n {heartbeat,60},\n"
                              " {'listeners.tcp.default',\"127.0.0.1:5672\"},\n"
                              " {'loopback_users.guest',true}]\n")
        rc, out, _ = self.ctl("environment", "--formatter", "json")
        self.assertEqual(json.loads(out)["heartbeat"], 60)
        del self.api.routes[("GET", "/api/environment")]
        rc, _, err = self.ctl("environment")
        self.assertEqual(rc, 69)
        self.assertIn("does not support 'environment'", err)

    def test_await_startup_waits_for_the_socket(self):
        directory = tempfile.mkdtemp(prefix="warrenctl-test-")
        late = {}

        def start_late():  # the broker comes up a second after warrenctl starts waiting
            time.sleep(1.0)
            late["api"] = FakeAPI({("GET", "/api/overview"): (200, OVERVIEW, {})}, directory)

        starter = threading.Thread(target=start_late, daemon=True)
        starter.start()
        t0 = time.monotonic()
        try:
            rc, out, err = run(["--data-dir", directory, "await_startup", "-t", "8"])
        finally:
            starter.join(5)
            if "api" in late:
                late["api"].close()
        self.assertEqual((rc, out, err), (0, "", ""))
        self.assertGreater(time.monotonic() - t0, 0.9)

    def test_await_startup_gives_up_after_the_timeout(self):
        t0 = time.monotonic()
        rc, _, err = run(["--socket", "/nonexistent/warrenctl.sock", "await_startup", "-t", "1"])
        self.assertEqual(rc, 69)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("unix socket connect: No such file or directory", err)


class Transport(unittest.TestCase):
    """What the client does with a peer that is not a good HTTP server."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="warrenctl-test-")
        self.path = os.path.join(self.dir, "warrenctl.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(8)
        self.held = []

    def tearDown(self):
        for c in self.held:
            c.close()
        self.sock.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def serve(self, reply):
        def once():
            with contextlib.suppress(OSError):
                c, _ = self.sock.accept()
                self.held.append(c)
                c.recv(65536)
                if reply is not None:
                    c.sendall(reply)
                    c.close()
        threading.Thread(target=once, daemon=True).start()

    def test_a_silent_broker_times_out_with_75(self):
        self.serve(None)  # accepts, reads, never answers
        t0 = time.monotonic()
        rc, _, err = run(["--socket", self.path, "list_queues", "-t", "1"])
        self.assertEqual(rc, 75)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(err, "Error: operation list_queues on node %s timed out. Timeout value "
                              "used: 1000\n" % self.path)

    def test_not_http_is_unavailable(self):
        self.serve(b"AMQP\x00\x00\x09\x01")
        rc, _, err = run(["--socket", self.path, "list_queues"])
        self.assertEqual(rc, 69)
        self.assertIn("the answer is not HTTP", err)

    def test_answer_without_framing_runs_to_close(self):
        self.serve(b'HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n[{"name":"/"}]')
        self.assertEqual(run(["--socket", self.path, "-q", "list_vhosts"])[:2], (0, "name\n/\n"))


class CommandLine(unittest.TestCase):
    """Usage errors and a broker that is not running, with nothing listening."""

    NOWHERE = ["--socket", "/nonexistent/warren/warrenctl.sock"]

    def test_unknown_command_and_suggestion(self):
        rc, out, err = run(["list_queue"])
        self.assertEqual((rc, out, err), (64, "", "\nCommand 'list_queue' not found. \n"
                                                   "Did you mean 'list_queues'? \n\n"))
        rc, out, err = run(["bogus_cmd"])
        self.assertEqual(rc, 64)
        self.assertTrue(err.startswith("\nCommand 'bogus_cmd' not found. \n\n\x1b[1mUsage\x1b[0m"))
        self.assertIn("   list_queues                   Lists queues and their properties\n", err)
        rc, out, err = run([])
        self.assertEqual((rc, out), (64, ""))
        self.assertIn("Available commands:", err)

    def test_help(self):
        rc, out, _ = run(["help"])
        self.assertEqual(rc, 0)
        for name in ("list_queues", "add_user", "set_policy", "export_definitions", "await_startup",
                     "environment", "close_connection", "purge_queue", "authenticate_user"):
            self.assertIn("\n   %s " % name, out)
        rc, out, _ = run(["help", "list_queues"])
        self.assertEqual(rc, 0)
        self.assertIn("\tmust be one of arguments, auto_delete, consumer_capacity, ", out)
        self.assertEqual(run(["list_queues", "--help"])[1], out)
        self.assertEqual(run(["help", "nope"])[:3], (64, "", "Error:\n\nCommand 'nope' not found.\n"))

    def test_argument_counts_and_options(self):
        cases = [
            (["add_user"], "not enough arguments."),
            (["add_user", "a", "b", "c"], "too many arguments."),
            (["set_permissions", "u", "a", "b"], "not enough arguments."),
            (["list_users", "user"], "too many arguments."),
            (["delete_user", "--priority", "1", "x"], "Invalid options for this command:\n--priority : "),
            (["delete_user", "--no-table-headers", "x"], "Invalid options for this command:\n--no-table-headers : "),
            (["set_policy", "a", "b", "{}", "--priority", "x"], "Invalid options for this command:\n--priority : x"),
            (["list_queues", "--bogus"], "Invalid options for this command:\n--bogus : "),
        ]
        for args, why in cases:
            rc, out, err = run(self.NOWHERE + args)
            self.assertEqual(rc, 64, args)
            self.assertTrue(err.startswith("Error (argument validation): %s\nArguments given:\n\t%s\n"
                                           % (why, " ".join(args))), err)
            self.assertIn("\x1b[1mUsage\x1b[0m\n\nwarrenctl [--node <node>] [--longnames] [--quiet] %s"
                          % args[0], err)

    def test_broker_not_running_is_69_and_names_the_socket(self):
        rc, out, err = run(self.NOWHERE + ["list_queues"])
        self.assertEqual(rc, 69)
        self.assertEqual(out, "Timeout: 60.0 seconds ...\nListing queues for vhost / ...\n")
        self.assertTrue(err.startswith("Error: unable to perform an operation on node "
                                       "'/nonexistent/warren/warrenctl.sock'."), err)
        self.assertIn("unix socket connect: No such file or directory", err)
        rc, out, err = run(["--url", "http://127.0.0.1:1", "ping", "-t", "2"])
        self.assertEqual(rc, 69)
        self.assertEqual(err, "Error:\nFailed to connect and authenticate to http://127.0.0.1:1 in "
                              "2000 ms\n")

    def test_bad_url_and_config(self):
        rc, _, err = run(["--url", "https://127.0.0.1:15671", "list_queues"])
        self.assertEqual((rc, err), (64, "Error:\nhttps://127.0.0.1:15671: https is not supported; "
                                         "use http:// (or the local socket)\n"))
        rc, _, err = run(["--config", "/nonexistent/warren.conf", "list_queues"])
        self.assertEqual(rc, 64)
        self.assertIn("cannot read --config /nonexistent/warren.conf", err)


# ---------------------------------------------------------------- the broker under test

_live = {}


def live_args():
    """warrenctl's connection options for the harness's broker, or a reason
    why it has no management API to talk to."""
    if "args" not in _live:
        host, port = h.broker_address()
        if h.TARGET:
            url = os.environ.get("WARREN_TEST_MGMT_URL") or "http://%s:15672" % host
            args = ["--url", url, "-u", h.USER, "-p", h.PASSWORD]
        else:
            args = ["--data-dir", h._shared["proc"].tmpdir]
        rc, _, err = run(args + ["-q", "ping", "-t", "3"])
        _live["args"] = args
        _live["why"] = None if rc == 0 else (err.strip().splitlines() or ["no answer"])[-1]
    return _live["args"], _live["why"]


class Live(h.BrokerTest):
    def setUp(self):
        args, why = live_args()
        if why:
            self.skipTest("the broker under test serves no management API yet (%s)" % why[:120])
        super().setUp()
        self.args = args
        self.names = []

    def tearDown(self):
        for kind, name in reversed(self.names):
            run(self.args + ["-q", "delete_" + kind, name])
        super().tearDown()

    def ctl(self, *args, **kw):
        return run(self.args + list(args), **kw)

    def eventually(self, args, predicate, timeout=10.0):
        """RabbitMQ's API shows statistics up to 5 s late: poll, bounded."""
        deadline = time.monotonic() + timeout
        while True:
            rc, out, err = self.ctl(*args)
            if (rc == 0 and predicate(out)) or time.monotonic() > deadline:
                return rc, out, err
            time.sleep(0.5)

    def test_ping_and_status(self):
        rc, out, _ = self.ctl("ping")
        self.assertEqual((rc, out.splitlines()[-1]), (0, "Ping succeeded"))
        rc, out, err = self.ctl("status")
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith("Status of node "))
        self.assertIn("\x1b[1mListeners\x1b[0m", out)
        self.assertEqual(self.ctl("await_startup", "-t", "5")[:2], (0, ""))

    def test_list_queues_shows_depth(self):
        q = self.queue(durable=True)
        for _ in range(3):
            self.publish("", q)
        rc, out, err = self.eventually(["-q", "list_queues", "name", "messages", "durable", "consumers"],
                                       lambda o: "%s\t3\t" % q in o)
        self.assertEqual(rc, 0, err)
        self.assertIn("%s\t3\ttrue\t0\n" % q, out)
        rc, out, _ = self.ctl("list_queues", "--formatter", "json", "name", "durable")
        self.assertIn({"name": q, "durable": True}, json.loads(out))
        self.assertEqual(self.ctl("-q", "purge_queue", q)[0], 0)
        rc, out, _ = self.eventually(["-s", "list_queues", "name", "messages"],
                                     lambda o: "%s\t0\n" % q in o)
        self.assertIn("%s\t0\n" % q, out)
        self.assertEqual(self.ctl("-q", "delete_queue", q)[:2],
                         (0, "Queue was successfully deleted with 0 ready messages\n"))
        self.assertEqual(self.ctl("delete_queue", q)[0], 64)

    def test_exchanges_and_bindings(self):
        x = self.exchange("topic")
        q = self.bound_queue(x, "a.#")
        rc, out, _ = self.ctl("-q", "list_exchanges", "name", "type")
        self.assertIn("amq.direct\tdirect\n", out)
        self.assertIn("%s\ttopic\n" % x, out)
        rc, out, _ = self.ctl("-s", "list_bindings")
        self.assertIn("%s\texchange\t%s\tqueue\ta.#\t[]\n" % (x, q), out)

    def test_user_lifecycle(self):
        user = h.unique("user")
        self.names.append(("user", user))
        self.assertEqual(self.ctl("-q", "add_user", user, "pw1")[:2], (0, ""))
        self.assertEqual(self.ctl("add_user", user, "pw1")[0], 70)
        self.assertEqual(self.ctl("-q", "set_user_tags", user, "monitoring")[0], 0)
        rc, out, _ = self.ctl("-s", "list_users")
        self.assertIn("%s\t[monitoring]\n" % user, out)
        self.assertEqual(self.ctl("-q", "authenticate_user", user, "pw1")[:2], (0, "Success\n"))
        self.assertEqual(self.ctl("authenticate_user", user, "nope")[0], 65)
        self.assertEqual(self.ctl("-q", "change_password", user, "pw2")[0], 0)
        self.assertEqual(self.ctl("-q", "authenticate_user", user, "pw2")[:2], (0, "Success\n"))
        self.assertEqual(self.ctl("-q", "authenticate_user", user, "pw1")[0], 65)
        rc, out, _ = self.ctl("-s", "list_users")
        self.assertIn("%s\t[monitoring]\n" % user, out)  # change_password kept the tags
        self.assertEqual(self.ctl("-q", "delete_user", user)[0], 0)
        self.assertEqual(self.ctl("delete_user", user)[0], 67)

    def test_vhost_and_permissions(self):
        vhost, user = h.unique("vhost"), h.unique("user")
        self.names += [("user", user), ("vhost", vhost)]
        self.assertEqual(self.ctl("-q", "add_vhost", vhost, "--description", "d")[0], 0)
        self.assertEqual(self.ctl("-q", "add_user", user, "pw")[0], 0)
        self.assertEqual(self.ctl("-q", "set_permissions", "-p", vhost, user, "^a", "^b", "^c")[0], 0)
        # (RabbitMQ's API also grants the vhost's creator full permissions: guest's line)
        self.assertIn("%s\t^a\t^b\t^c\n" % user, self.ctl("-s", "list_permissions", "-p", vhost)[1])
        self.assertEqual(self.ctl("-s", "list_user_permissions", user)[1], "%s\t^a\t^b\t^c\n" % vhost)
        rc, out, _ = self.ctl("-s", "list_vhosts", "name", "description")
        self.assertIn("%s\td\n" % vhost, out)
        self.assertEqual(self.ctl("-q", "clear_permissions", "-p", vhost, user)[0], 0)
        self.assertNotIn(user, self.ctl("list_permissions", "-p", vhost)[1])
        self.assertEqual(self.ctl("-q", "delete_vhost", vhost)[0], 0)
        self.assertEqual(self.ctl("delete_vhost", vhost)[:3:2],
                         (65, "Virtual host '%s' does not exist\n" % vhost))

    def test_policies(self):
        name, pattern = h.unique("pol"), "^" + h.unique("nomatch")
        self.assertEqual(self.ctl("-q", "set_policy", name, pattern, '{"max-length":5}',
                                  "--priority", "4", "--apply-to", "queues")[0], 0)
        try:
            rc, out, _ = self.ctl("-s", "list_policies")
            self.assertIn('/\t%s\t%s\tqueues\t{"max-length":5}\t4\n' % (name, pattern), out)
        finally:
            self.assertEqual(self.ctl("-q", "clear_policy", name)[0], 0)
        self.assertEqual(self.ctl("clear_policy", name)[0], 69)

    def test_connections_channels_consumers(self):
        q = self.queue()
        self.ch.basic_qos(prefetch_count=7)
        tag = self.ch.basic_consume(q, lambda *a: None, consumer_tag=h.unique("tag"))
        rc, out, err = self.eventually(["-q", "list_consumers", "queue_name", "consumer_tag",
                                        "ack_required", "prefetch_count"], lambda o: tag in o)
        self.assertEqual(rc, 0, err)
        self.assertIn("%s\t%s\ttrue\t7\n" % (q, tag), out)
        rc, out, err = self.eventually(["-q", "list_channels", "user", "consumer_count", "prefetch_count"],
                                       lambda o: "%s\t1\t7\n" % h.USER in o)
        self.assertIn("%s\t1\t7\n" % h.USER, out)
        rc, out, err = self.ctl("-q", "list_connections", "user", "vhost", "state", "channels", "name")
        self.assertEqual(rc, 0, err)
        self.assertIn("%s\t/\trunning\t" % h.USER, out)
        # close_connection takes the name list_connections shows
        names = lambda: set(self.ctl("-q", "list_connections", "name")[1].splitlines())
        before = names()
        victim = self.connect()
        deadline = time.monotonic() + 10
        while not names() - before and time.monotonic() < deadline:
            time.sleep(0.2)
        new = names() - before
        self.assertEqual(len(new), 1, new)
        self.assertEqual(self.ctl("-q", "close_connection", new.pop(), "go away")[0], 0)
        with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
            victim.channel().queue_declare(q, passive=True)
        self.assertEqual(cm.exception.reply_code, 320)
        self.assertIn("go away", cm.exception.reply_text)

    def test_topic_permissions(self):
        vhost, user = h.unique("vhost"), h.unique("user")
        self.names += [("user", user), ("vhost", vhost)]
        self.assertEqual(self.ctl("-q", "add_vhost", vhost)[0], 0)
        self.assertEqual(self.ctl("-q", "add_user", user, "pw")[0], 0)
        self.assertEqual(self.ctl("-q", "set_topic_permissions", "-p", vhost, user, "amq.topic",
                                  "^w", "^r")[0], 0)
        self.assertEqual(self.ctl("-q", "set_topic_permissions", "-p", vhost, user, "amq.direct",
                                  "^a", "^b")[0], 0)
        rc, out, err = self.ctl("-s", "list_topic_permissions", "-p", vhost)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["%s\tamq.direct\t^a\t^b" % user, "%s\tamq.topic\t^w\t^r" % user])
        self.assertEqual(sorted(self.ctl("-s", "list_user_topic_permissions", user)[1].splitlines()),
                         ["%s\tamq.direct\t^a\t^b" % vhost, "%s\tamq.topic\t^w\t^r" % vhost])
        self.assertEqual(self.ctl("-q", "clear_topic_permissions", "-p", vhost, user, "amq.direct")[0], 0)
        self.assertEqual(self.ctl("-s", "list_topic_permissions", "-p", vhost)[1],
                         "%s\tamq.topic\t^w\t^r\n" % user)
        self.assertEqual(self.ctl("-q", "clear_topic_permissions", "-p", vhost, user)[0], 0)
        self.assertEqual(self.ctl("-s", "list_topic_permissions", "-p", vhost)[1], "\n")  # as rabbitmqctl
        self.assertEqual(self.ctl("set_topic_permissions", "-p", vhost, h.unique("nouser"),
                                  "amq.topic", "a", "b")[0], 67)

    def test_operator_policies(self):
        name, pattern = h.unique("op"), "^" + h.unique("nomatch")
        self.assertEqual(self.ctl("-q", "set_operator_policy", name, pattern, '{"max-length":100}',
                                  "--priority", "2", "--apply-to", "queues")[0], 0)
        try:
            rc, out, err = self.ctl("-s", "list_operator_policies")
            self.assertEqual(rc, 0, err)
            self.assertIn('/\t%s\t%s\tqueues\t{"max-length":100}\t2\n' % (name, pattern), out)
        finally:
            self.assertEqual(self.ctl("-q", "clear_operator_policy", name)[0], 0)
        self.assertNotIn(name, self.ctl("-s", "list_operator_policies")[1])

    def test_definitions_export_and_import(self):
        rc, out, _ = self.ctl("export_definitions", "-")
        self.assertEqual(rc, 0)
        self.assertIn("vhosts", json.loads(out))
        vhost = h.unique("vhost")
        self.names.append(("vhost", vhost))
        rc, _, err = self.ctl("-q", "import_definitions", stdin=json.dumps({"vhosts": [{"name": vhost}]}))
        self.assertEqual(rc, 0, err)
        rc, out, _ = self.eventually(["-s", "list_vhosts"], lambda o: vhost + "\n" in o)
        self.assertIn(vhost + "\n", out)

    def test_parameters(self):
        vhost = h.unique("vhost")
        self.names.append(("vhost", vhost))
        self.assertEqual(self.ctl("-q", "add_vhost", vhost)[0], 0)
        value = '{"uri":"amqp://upstream.example"}'
        self.assertEqual(self.ctl("-q", "set_parameter", "-p", vhost, "federation-upstream", "up", value)[:3],
                         (0, "", ""))
        self.assertEqual(self.ctl("-s", "list_parameters", "-p", vhost)[1],
                         "federation-upstream\tup\t%s\n" % value)
        self.assertEqual(self.ctl("-q", "clear_parameter", "-p", vhost, "federation-upstream", "up")[0], 0)
        self.assertEqual(self.ctl("-q", "clear_parameter", "-p", vhost, "federation-upstream", "up")[::2],
                         (69, "Error:\nParameter does not exist\n"))
        rc, out, _ = self.ctl("-s", "list_global_parameters")
        self.assertRegex(out, r'(^|\n)internal_cluster_id\t"rabbitmq-cluster-id-[A-Za-z0-9_-]{22}"\n')

    def test_vhost_limits(self):
        vhost = h.unique("vhost")
        self.names.append(("vhost", vhost))
        self.assertEqual(self.ctl("-q", "add_vhost", vhost)[0], 0)
        self.assertEqual(self.ctl("set_vhost_limits", "-p", vhost, '{"max-connections": 10, "max-queues": 4}')[:3],
                         (0, 'Setting vhost limits to "{"max-connections": 10, "max-queues": 4}" for vhost "%s" ...\n'
                             % vhost, ""))
        self.assertEqual(self.ctl("list_vhost_limits", "-p", vhost)[:2],
                         (0, 'Listing limits for vhost "%s" ...\n{"max-connections":10,"max-queues":4}\n' % vhost))
        rc, out, _ = self.ctl("-q", "list_vhost_limits", "--global")
        self.assertEqual(out.splitlines()[0], "vhost\tlimits")
        self.assertIn('%s\t{"max-connections":10,"max-queues":4}' % vhost, out.splitlines())
        self.assertEqual(self.ctl("-q", "set_vhost_limits", "-p", vhost, '{"max-foo": 1}')[::2],
                         (69, 'Error:\nValidation failed\n\nUnrecognised terms [{<<"max-foo">>,1}] in limits\n\n'))
        self.assertEqual(self.ctl("-q", "set_vhost_limits", "-p", vhost, "notjson")[::2],
                         (69, "Error:\nJSON decoding error. Reason: badarg\n"))
        self.assertEqual(self.ctl("-q", "clear_vhost_limits", "-p", vhost)[0], 0)
        self.assertEqual(self.ctl("-q", "list_vhost_limits", "-p", vhost)[:2], (0, "\n"))
        self.assertEqual(self.ctl("-q", "clear_vhost_limits", "-p", vhost)[::2],
                         (69, "Error:\nParameter does not exist\n"))
        self.assertEqual(self.ctl("-q", "list_vhost_limits", "-p", vhost + "-gone")[::2],
                         (65, "Virtual host '%s-gone' does not exist\n" % vhost))

    def test_user_limits(self):
        user = h.unique("user")
        self.names.append(("user", user))
        self.assertEqual(self.ctl("-q", "add_user", user, "pw")[0], 0)
        self.assertEqual(self.ctl("set_user_limits", user, '{"max-channels": 3}')[:3],
                         (0, 'Setting user limits to "{"max-channels": 3}" for user "%s" ...\n' % user, ""))
        self.assertEqual(self.ctl("-q", "set_user_limits", user, '{"max-connections": 4}')[0], 0)
        self.assertEqual(self.ctl("list_user_limits", "--user", user)[:2],
                         (0, 'Listing limits for user "%s" ...\n{"max-channels":3,"max-connections":4}\n' % user))
        rc, out, _ = self.ctl("-q", "list_user_limits", "--global")
        self.assertEqual(out.splitlines()[0], "user\tlimits")
        self.assertIn('%s\t{"max-channels":3,"max-connections":4}' % user, out.splitlines())
        self.assertEqual(self.ctl("-q", "set_user_limits", user, '{"max-chans": 3}')[::2],
                         (69, 'Error:\nUnrecognised terms [{<<"max-chans">>,3}] in user-limits\n'))
        self.assertEqual(self.ctl("-q", "set_user_limits", user + "-gone", '{"max-channels": 3}')[::2],
                         (69, 'Error:\n{:no_such_user, "%s-gone"}\n' % user))
        self.assertEqual(self.ctl("clear_user_limits", user, "max-channels")[:2],
                         (0, 'Clearing "max-channels" limit for user "%s" ...\n' % user))
        self.assertEqual(self.ctl("-q", "list_user_limits", "--user", user)[1], '{"max-connections":4}\n')
        self.assertEqual(self.ctl("clear_user_limits", user, "all")[:2],
                         (0, 'Clearing all limits for user "%s" ...\n' % user))
        self.assertEqual(self.ctl("-q", "list_user_limits", "--user", user)[1], "{}\n")

    def test_cluster_status_flags_and_report(self):
        rc, out, err = self.ctl("cluster_status")
        self.assertEqual(rc, 0, err)
        node = out.splitlines()[0][len("Cluster status of node "):-len(" ...")]
        self.assertIn("\x1b[1mRunning Nodes\x1b[0m\n\n%s\n" % node, out)
        self.assertIn("Flag: quorum_queue, state: enabled\n", out)
        self.assertIn("quorum_queue\tenabled\n", self.ctl("-s", "list_feature_flags")[1])
        self.assertEqual(self.ctl("-q", "list_unresponsive_queues", "name", "durable")[:2], (0, ""))
        rc, out, err = self.ctl("report")
        self.assertEqual(rc, 0, err)
        for head in ("Status of node %s ..." % node, "Cluster status of node %s ..." % node, "Listing channels ...",
                     'Listing runtime parameters for vhost "/" ...'):
            self.assertIn("\n%s\n" % head, out)

    def test_close_all_connections(self):
        vhost = h.unique("vhost")
        self.names.append(("vhost", vhost))
        self.assertEqual(self.ctl("-q", "add_vhost", vhost)[0], 0)
        self.assertEqual(self.ctl("-q", "set_permissions", "-p", vhost, h.USER, ".*", ".*", ".*")[0], 0)
        victims = [h.connect(vhost=vhost) for _ in range(2)]
        rc, out, _ = self.eventually(["-q", "list_connections", "vhost"], lambda o: o.count(vhost + "\n") == 2)
        rc, out, err = self.ctl("close_all_connections", "-p", vhost, "maintenance")
        self.assertEqual((rc, out), (0, "Closing all connections in vhost %s, reason: maintenance...\n"
                                        "Closed 2 connections\n" % vhost), err)
        for c in victims:
            with self.assertRaises(pex.ConnectionClosedByBroker) as cm:
                for _ in range(50):
                    c.process_data_events(time_limit=0.1)
            self.assertEqual(cm.exception.reply_code, 320)
            self.assertIn("maintenance", cm.exception.reply_text)
        self.assertTrue(self.conn.is_open, "the other vhost's connection stays")


@h.needs_own_broker
class OwnBroker(unittest.TestCase):
    """Commands that change the node (the memory watermark), and -n, on a
    private Warren."""

    def setUp(self):
        self.proc = h.WarrenProcess()
        self.proc.start()
        self.addCleanup(self.proc.stop)

    def node(self):
        c = http.client.HTTPConnection("127.0.0.1", self.proc.mgmt_port, timeout=10)
        c.request("GET", "/api/nodes", headers={"Authorization": "Basic " + base64.b64encode(b"guest:guest")
                                                .decode()})
        return json.loads(c.getresponse().read())[0]

    def test_set_vm_memory_high_watermark(self):
        local = ["--data-dir", self.proc.tmpdir]
        self.assertEqual(run(local + ["-q", "set_vm_memory_high_watermark", "absolute", "100MB"])[:3], (0, "", ""))
        self.assertEqual(self.node()["mem_limit"], 100000000)
        self.assertIn("Memory high watermark setting: computed to: 0.1 gb\n", run(local + ["status"])[1])
        self.assertEqual(run(local + ["-q", "set_vm_memory_high_watermark", "0.4"])[0], 0)
        self.assertGreater(self.node()["mem_limit"], 100000000)

    def test_node_names_this_machine(self):
        local = ["--data-dir", self.proc.tmpdir]
        for node in ("rabbit@localhost", "rabbit@" + socket.gethostname()):
            rc, out, err = run(local + ["-n", node, "-q", "cluster_status"])
            self.assertEqual(rc, 0, err)
            self.assertIn("Running Nodes", out)
        # from a directory without the socket: the management API on the given port
        empty = tempfile.mkdtemp(prefix="warrenctl-cwd-")
        self.addCleanup(shutil.rmtree, empty, True)
        p = subprocess.run([warrenctl_bin(), "-n", "rabbit@localhost", "--management-port",
                            str(self.proc.mgmt_port), "-q", "status"], capture_output=True, text=True, cwd=empty,
                           timeout=RUN_TIMEOUT,
                           env={k: v for k, v in os.environ.items() if k != "WARREN_CTL_SOCKET"})
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("purpose: AMQP 0-9-1\n", p.stdout)
        self.assertIn("protocol: http/prometheus, purpose: Prometheus exporter API over HTTP\n", p.stdout)
