"""Management API: the authorization table (authz.py, authz_table.json) --
every route Warren serves, as every kind of principal, answers as
RabbitMQ 3.10.8 answered (or as the table says Warren answers instead, and
why)."""
from confkit import scenario, check, not_warren, Fail
from mgmtkit import mgmt

import authz


@scenario("mgmt.authz.table_complete", "http", quick=True)
def _(t):
    table = authz.load_table()
    served, tables = authz.source_routes()
    check(len(tables) >= 12, "route tables found in mgmt-ui/*.c: %s" % tables)
    rows = {authz.row_key(r) for r in table["routes"]}
    in_rows = {(m, p) for m, p, _ in rows}
    missing = sorted(served - in_rows - set(authz.NOT_PROBED))
    stale = sorted(in_rows - served)
    unprobed = sorted(rows ^ set(authz.ROUTES))
    unrecorded = sorted(authz.row_key(r) for r in table["routes"] if "rabbitmq" not in r and "like" not in r)
    problems = (["route without a row in authz_table.json: %s %s" % k for k in missing] +
                ["row for a route no table serves: %s %s" % k for k in stale] +
                ["row and probe differ (authz.py ROUTES): %s %s %s" % k for k in unprobed] +
                ["row without an answer recorded from RabbitMQ or a route it is like: %s %s %s" % k
                 for k in unrecorded])
    if problems:
        raise Fail("; ".join(problems))


def family_scenario(fam, quick=False):
    @scenario("mgmt.authz." + fam, "http", quick=quick, timeout=180, warren_only=fam == "move")
    def _(t):
        warren = not_warren(t.broker) is None
        keys = [k for k in authz.rows_of(fam) if warren or k not in authz.WARREN_ONLY]
        fx = authz.Fixture(t, mgmt(t), t.broker.host, t.broker.port)
        t.defer(fx.close)
        fx.setup()
        bad = authz.compare(authz.load_table(), authz.probe(fx, keys), warren)
        if bad:
            raise Fail("%d answers differ from authz_table.json: %s" % (len(bad), "; ".join(bad)))


for fam in authz.FAMILIES:
    family_scenario(fam, quick=fam == "connections")
