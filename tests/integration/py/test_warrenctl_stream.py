"""warrenctl's rabbitmq-streams commands (issue 20) against the shared
Warren: add_super_stream and delete_super_stream with rabbitmq-streams'
options (3.13's AddSuperStreamCommand: sizes with units, --max-age as an
ISO 8601 duration sent as seconds, its validation texts), and the lists
list_stream_consumers, list_stream_publishers, list_stream_group_consumers
over the stream management plugin's /api/stream/... paths."""
import json
import time

import harness as h
from test_mgmt import q, request
import test_warrenctl as tw


class Ctl(h.BrokerTest):
    """warrenctl against the shared broker, like test_warrenctl's Live
    (whose tests a subclass would run again); no tests of its own."""

    def setUp(self):
        args, why = tw.live_args()
        if why:
            self.fail("the broker under test serves no management API (%s)" % why[:120])
        super().setUp()
        self.args = args

    def ctl(self, *args, **kw):
        return tw.run(self.args + list(args), **kw)


class StreamCommands(Ctl):

    def super_stream(self, *opts):
        name = h.unique("ctl-super")
        rc, out, err = self.ctl("add_super_stream", name, *opts)
        self.assertEqual(rc, 0, err)
        self.addCleanup(request, "DELETE", "/api/stream/super-streams/%2F/" + q(name))
        self.assertEqual(out.splitlines()[-1], "Super stream %s has been created" % name)
        return name

    def info(self, name):
        r = request("GET", "/api/stream/super-streams/%2F/" + q(name))
        self.assertEqual(r.status, 200, r.body)
        return r.json()

    def stream_args(self, name):
        return request("GET", "/api/queues/%2F/" + q(name)).json()["arguments"]

    def test_add_with_partitions_and_arguments(self):
        name = self.super_stream("--partitions", "2", "--max-length-bytes", "2gb", "--max-age", "P1DT2H",
                                 "--stream-max-segment-size-bytes", "50MiB", "--leader-locator", "random")
        self.assertEqual(self.info(name)["partitions"], [name + "-0", name + "-1"])
        self.assertEqual(self.stream_args(name + "-1"),
                         {"x-queue-type": "stream", "x-max-length-bytes": 2000000000, "x-max-age": "93600s",
                          "x-stream-max-segment-size-bytes": 50 * 1024 * 1024,
                          "x-queue-leader-locator": "balanced"})

    def test_defaults_and_binding_keys(self):
        three = self.super_stream()
        self.assertEqual(len(self.info(three)["partitions"]), 3)  # rabbitmq-streams' default
        keyed = self.super_stream("--binding-keys", "amer, emea")
        self.assertEqual(self.info(keyed)["binding_keys"], ["amer", "emea"])

    def test_validation(self):
        for opts, text in ((["--partitions", "2", "--binding-keys", "a"],
                            "Specify --partitions or --binding-keys, not both."),
                           (["--partitions", "0"], "The partition number must be greater than 0"),
                           (["--max-length-bytes", "lots"],
                            "Invalid value for --max-length-bytes, valid example values: 100gb, 50mb"),
                           (["--max-age", "10h"], "Invalid value for --max-age"),
                           (["--leader-locator", "nearest"], "Invalid value for --leader-locator"),
                           (["--initial-cluster-size", "0"], "Invalid value for --initial-cluster-size")):
            name = h.unique("ctl-super-bad")
            rc, _, err = self.ctl("add_super_stream", name, *opts)
            self.assertEqual(rc, 64, (opts, err))
            self.assertIn(text, err, opts)
            self.assertEqual(request("GET", "/api/exchanges/%2F/" + q(name)).status, 404)

    def test_manager_refusal_and_delete(self):
        name = self.super_stream("--partitions", "1")
        rc, _, err = self.ctl("add_super_stream", name)
        self.assertEqual(rc, 70)
        self.assertIn('{reference_already_exists,"there is already an exchange named %s"}' % name, err)
        rc, out, err = self.ctl("delete_super_stream", name)
        self.assertEqual((rc, out.splitlines()[-1]), (0, "Super stream %s has been deleted" % name), err)
        self.assertEqual(request("GET", "/api/queues/%2F/" + q(name + "-0")).status, 404)
        rc, _, err = self.ctl("delete_super_stream", name)
        self.assertEqual(rc, 70)
        self.assertIn("stream_not_found", err)

    def test_list_stream_consumers_and_publishers(self):
        s = h.unique("ctl-stream")
        self.ch.queue_declare(s, durable=True, arguments={"x-queue-type": "stream"})
        self.track_queue(s)
        self.ch.confirm_delivery()
        for i in range(4):
            self.ch.basic_publish("", s, b"m%d" % i)
        c = self.connect()
        ch = c.channel()
        ch.basic_qos(prefetch_count=2)
        got = []
        ch.basic_consume(s, lambda ch_, m, p, b: got.append(b), arguments={"x-stream-offset": "first"})
        deadline = time.monotonic() + 5
        while len(got) < 2 and time.monotonic() < deadline:
            c.process_data_events(time_limit=0.1)
        rc, out, err = self.ctl("list_stream_consumers", "--formatter", "json")
        self.assertEqual(rc, 0, err)
        rows = [r for r in json.loads(out) if r["stream"] == s]
        self.assertEqual(len(rows), 1, out)
        self.assertEqual(sorted(rows[0]), sorted(["subscription_id", "stream", "messages_consumed", "offset",
                                                  "offset_lag", "credits", "active", "activity_status",
                                                  "properties"]))
        self.assertEqual((rows[0]["offset"], rows[0]["offset_lag"], rows[0]["messages_consumed"]), (2, 2, 2))
        rc, out, err = self.ctl("list_stream_consumers", "stream", "offset_lag", "connection_pid")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0], "Listing stream consumers ...")
        self.assertEqual(lines[1].split("\t"), ["stream", "offset_lag", "connection_pid"])
        self.assertIn([s, "2"], [line.split("\t")[:2] for line in lines[2:]])
        rc, out, err = self.ctl("list_stream_publishers")
        self.assertEqual((rc, out.splitlines()), (0, ["Listing stream publishers ..."]), err)  # none yet
        # AMQP consumers are in no consumer group (single active consumer is the stream protocol's)
        rc, _, err = self.ctl("list_stream_group_consumers", "--stream", s, "--reference", "app")
        self.assertEqual(rc, 70)
        self.assertIn("The group does not exist", err)
        rc, _, err = self.ctl("list_stream_group_consumers", "--stream", s)
        self.assertEqual(rc, 64, err)


class StreamProtocolGroups(Ctl):
    """list_stream_group_consumers and list_stream_consumers over a real
    single active consumer group of the stream protocol: the active member
    single_active, the other waiting, as rabbitmq-streams shows them."""

    def test_group_of_two(self):
        import streamraw as sr
        host, port = h.stream_address()
        name = h.unique("ctl-grp")
        clients = []
        for _ in range(2):
            c = sr.Client(port, host=host)
            c.handshake()
            self.addCleanup(c.close_socket)
            clients.append(c)
        self.assertEqual(clients[0].create(name.encode()), sr.OK)
        self.track_queue(name)
        for c in clients:
            self.assertEqual(c.subscribe(1, name.encode(), sr.OFFSET_FIRST, 10,
                                         props=[(b"single-active-consumer", b"true"), (b"name", b"grp")]),
                             sr.OK)
        rc, out, err = self.ctl("list_stream_group_consumers", "--stream", name, "--reference", "grp")
        self.assertEqual(rc, 0, err)
        states = sorted(line.split("\t")[-1] for line in out.splitlines()[2:] if line.strip())
        self.assertEqual(states, ["single_active", "waiting"], out)
        rc, out, err = self.ctl("list_stream_consumers", "stream", "active", "activity_status")
        self.assertEqual(rc, 0, err)
        rows = sorted(line.split("\t")[1:] for line in out.splitlines() if line.startswith(name + "\t"))
        self.assertEqual(rows, [["false", "waiting"], ["true", "single_active"]], out)
        rc, out, err = self.ctl("list_stream_group_consumers", "--stream", name, "--reference", "nope")
        self.assertNotEqual(rc, 0)
        self.assertIn("The group does not exist", err)
