"""Warren's stream protocol with a real client: RabbitMQ's JavaScript
stream client (rabbitmq-stream-js-client 1.0.0, pinned by
tests/integration/stream-node/package-lock.json) publishes with confirms
and deduplication, consumes from offsets, stores and queries offsets, asks
for stream statistics, uses a single active consumer group and filters (3.13's filtering: Publish v2, Deliver
v2 and the client's post-filter), and creates a super stream, publishes to it by hash routing
and consumes it with a group of two super stream consumers that share its partitions; and
creates, publishes to (routed by key), consumes and deletes another. RabbitMQ 3.10.8 closes this client's
connections (it needs 3.11+), so the reference for these scenarios is the
client's own suite against 3.13."""
import json
import subprocess
import unittest

import harness as h

NODE_DIR = h.REPO / "tests" / "integration" / "stream-node"


def client_ready():
    """The pinned client, installed from the lockfile as conformance/node's are."""
    if not (NODE_DIR / "node_modules" / "rabbitmq-stream-js-client").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=str(NODE_DIR),
                       capture_output=True, timeout=300, check=True)


class StreamJsClient(unittest.TestCase):
    @h.needs_own_broker
    def test_scenarios(self):
        client_ready()
        # Metadata sends the client to the advertised host: this one
        proc = h.WarrenProcess(["stream.advertised_host=127.0.0.1"])
        proc.start()
        try:
            r = subprocess.run(["node", "stream_client.js", str(proc.stream_port), h.unique("js")],
                               cwd=str(NODE_DIR), capture_output=True, timeout=120, text=True)
            results = {}
            for line in r.stdout.splitlines():
                if line.startswith("{"):
                    d = json.loads(line)
                    results[d["name"]] = (d["ok"], d["detail"])
            self.assertEqual(sorted(results), ["deduplication", "filtering", "offsets",
                                               "publish_and_consume", "single_active_consumer",
                                               "super_stream", "super_streams"],
                             r.stdout + r.stderr)
            for name, (ok, detail) in results.items():
                self.assertTrue(ok, "%s: %s" % (name, detail))
        finally:
            proc.stop()


if __name__ == "__main__":
    unittest.main()
