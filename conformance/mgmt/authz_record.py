#!/usr/bin/python3
"""Records the authorization table (authz_table.json) from a RabbitMQ 3.10:
runs the probes of authz.py -- the same ones scen_http_authz.py runs --
against it and writes each row's "rabbitmq" answers, keeping the rows'
Warren decisions ("warren", "why") and the Warren-only rows.

    /usr/bin/python3 conformance/mgmt/authz_record.py \\
        [--mgmt http://127.0.0.1:15672] [--amqp amqp://guest:guest@127.0.0.1:5672] \\
        [--prefix NAME] [--check] [family ...]

Everything it creates (vhosts and users named PREFIX.<pid>.*) is deleted
at the end. --check compares instead of writing (exit status 1 on a
difference), against the RabbitMQ answers, or Warren's with --warren.
"""
import argparse
import datetime
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "python"))

import authz  # noqa: E402
from confkit import Broker, delete_urls  # noqa: E402
from mgmtkit import Api  # noqa: E402


class Names:
    """confkit's Ctx as far as the probes use it: names and cleanup."""

    def __init__(self, prefix):
        self.prefix, self.n, self.urls = "%s.%d" % (prefix, os.getpid()), 0, []

    def name(self, kind):
        self.n += 1
        return "%s.%s%d" % (self.prefix, kind, self.n)

    def track_url(self, url):
        self.urls.append(url)
        return url

    def step(self, what):
        pass


def observe(args, broker, families):
    t = Names(args.prefix)
    api = Api(t, args.mgmt, broker.user, broker.password)
    fx = authz.Fixture(t, api, broker.host, broker.port)
    try:
        fx.setup()
        observed = {}
        for fam in families:
            keys = [k for k in authz.rows_of(fam) if args.warren or k not in authz.WARREN_ONLY]
            print("%s: %d rows" % (fam, len(keys)), file=sys.stderr)
            observed.update(authz.probe(fx, keys))
        return observed
    finally:
        fx.close()
        delete_urls(broker, t.urls)


def write(observed):
    try:
        table = authz.load_table()
    except FileNotFoundError:
        table = {"rules": [], "routes": []}
    rows = {authz.row_key(r): r for r in table["routes"]}
    for key in authz.ROUTES:
        row = rows.setdefault(key, {"method": key[0], "pattern": key[1]})
        if key[2]:
            row["target"] = key[2]
        if key in authz.WARREN_ONLY:
            row["like"], row["success"], row["why"] = authz.WARREN_ONLY[key]
        elif key in observed:
            row["rabbitmq"] = observed[key]
    table["about"] = ("The management API's authorization table (conformance/mgmt/authz.py, which says how each "
                      "row's request is made). \"rabbitmq\": the answers of RabbitMQ 3.10.8 (127.0.0.1:15672), "
                      "recorded by authz_record.py on %s; \"warren\": where Warren answers otherwise, with "
                      "\"why\", and \"rules\" for what differs on every route; \"like\": a Warren-only route "
                      "answers as that RabbitMQ route, with its own success status. An answer is the status, a "
                      "refusal's error and reason, and for a list which of the fixture's objects it shows (V, W: "
                      "objects of those vhosts; other: of the other user; own: of the principal)."
                      % datetime.date.today())
    table["principals"] = authz.PRINCIPAL_NOTES
    table["routes"] = [rows[k] for k in authz.ROUTES] + [r for k, r in rows.items() if k not in authz.ROUTES]
    with open(authz.TABLE, "w", encoding="utf-8") as f:
        f.write(dumps(table))


def dumps(table):
    """JSON with one line per principal's answer, so that a change is a
    one-line diff."""
    out = ["{"]
    for k in ("about", "principals"):
        out.append("  %s: %s," % (json.dumps(k), json.dumps(table[k], ensure_ascii=False)))
    out.append('  "rules": [\n%s\n  ],' % ",\n".join("    " + json.dumps(r, ensure_ascii=False)
                                                     for r in table["rules"]))
    out.append('  "routes": [')
    for i, row in enumerate(table["routes"]):
        fields = []
        for k, v in row.items():
            if isinstance(v, dict):
                inner = ",\n".join("      %s: %s" % (json.dumps(p), json.dumps(c, ensure_ascii=False))
                                   for p, c in v.items())
                fields.append("    %s: {\n%s\n    }" % (json.dumps(k), inner))
            else:
                fields.append("    %s: %s" % (json.dumps(k), json.dumps(v, ensure_ascii=False)))
        out.append("   {\n%s\n   }%s" % (",\n".join(fields), "," if i < len(table["routes"]) - 1 else ""))
    out.append("  ]")
    out.append("}")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mgmt", default="http://127.0.0.1:15672")
    ap.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672")
    ap.add_argument("--prefix", default="h-authz")
    ap.add_argument("--check", action="store_true", help="compare with the table instead of writing it")
    ap.add_argument("--warren", action="store_true", help="with --check: the broker is Warren")
    ap.add_argument("families", nargs="*", default=list(authz.FAMILIES))
    args = ap.parse_args()
    observed = observe(args, Broker(args.amqp), args.families)
    if not args.check:
        write(observed)
        return 0
    bad = authz.compare(authz.load_table(), observed, args.warren)
    print("\n".join(bad) or "no differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
