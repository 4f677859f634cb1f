"""Management API: list parameters -- page, page_size, name, use_regex,
sort, sort_reverse, columns, disable_stats -- and the paged envelope, on a
fresh vhost with 13 queues (pq.01 .. pq.12 with x-max-length 1 .. 12, and
other.a)."""
from urllib.parse import urlencode

from confkit import scenario, eq, check
from mgmtkit import mgmt, vhost, path, shape, error_body, PAGED


def setup(t):
    api = mgmt(t)
    v = vhost(t)
    for i in range(1, 13):
        api.put(path("/api/queues", v, "pq.%02d" % i), {"arguments": {"x-max-length": i}}, want=201)
    api.put(path("/api/queues", v, "other.a"), {}, want=201)
    return api, v


def page(api, v, **params):
    return api.get(path("/api/queues", v) + "?" + urlencode(params))


def names(env):
    return [x["name"] for x in env["items"]]


def envelope(env, want, what):
    shape(env, PAGED, what)
    eq({k: env[k] for k in want}, want, what)


@scenario("mgmt.paging.envelope", "http", quick=True)
def _(t):
    api, v = setup(t)
    env = page(api, v, page=1, page_size=5, columns="name")
    envelope(env, {"filtered_count": 13, "item_count": 5, "page": 1, "page_count": 3, "page_size": 5,
                   "total_count": 13}, "page 1 of 5")
    eq(names(env), ["other.a", "pq.01", "pq.02", "pq.03", "pq.04"], "page 1, sorted by name")
    eq(env["items"][0], {"name": "other.a"}, "columns=name leaves only the name")
    env = page(api, v, page=3, page_size=5, columns="name")
    envelope(env, {"filtered_count": 13, "item_count": 3, "page": 3, "page_count": 3, "total_count": 13},
             "last page")
    eq(names(env), ["pq.10", "pq.11", "pq.12"], "page 3")
    b = error_body(api.call("GET", path("/api/queues", v) + "?page=4&page_size=5", want=400), "page_out_of_range")
    eq(b["reason"], "Page out of range, page: 4 page size: 5, len: 13", "reason")


@scenario("mgmt.paging.name_filter", "http")
def _(t):
    api, v = setup(t)
    env = page(api, v, page=1, page_size=5, name="PQ", columns="name")
    envelope(env, {"filtered_count": 12, "item_count": 5, "page_count": 3, "total_count": 13},
             "name=PQ (a case-insensitive substring)")
    eq(names(env), ["pq.01", "pq.02", "pq.03", "pq.04", "pq.05"], "filtered page")
    env = page(api, v, page=1, page_size=100, name="^pq\\.0[1-3]$", use_regex="true", columns="name")
    envelope(env, {"filtered_count": 3, "item_count": 3, "page_count": 1, "total_count": 13}, "use_regex")
    eq(names(env), ["pq.01", "pq.02", "pq.03"], "regex matches")
    env = page(api, v, page=1, page_size=100, name="PQ.0[12]", use_regex="true", columns="name")
    eq(names(env), ["pq.01", "pq.02"], "a regex matches without regard to case")
    env = page(api, v, page=1, page_size=3, name="conf-matches-nothing", columns="name")
    envelope(env, {"filtered_count": 0, "item_count": 0, "page": 1, "page_count": 0, "total_count": 13, "items": []},
             "no match")


@scenario("mgmt.paging.sort", "http")
def _(t):
    api, v = setup(t)
    env = page(api, v, page=1, page_size=3, sort="name", sort_reverse="true", columns="name,arguments.x-max-length")
    eq(env["items"], [{"name": "pq.12", "arguments": {"x-max-length": 12}},
                      {"name": "pq.11", "arguments": {"x-max-length": 11}},
                      {"name": "pq.10", "arguments": {"x-max-length": 10}}], "sort_reverse with nested columns")
    got = api.get(path("/api/queues", v) + "?" + urlencode({"sort": "arguments.x-max-length", "sort_reverse": "true",
                                                             "columns": "name"}))
    eq([x["name"] for x in got], ["pq.%02d" % i for i in range(12, 0, -1)] + ["other.a"],
       "sort by a nested field, unpaged")


@scenario("mgmt.paging.columns_unpaged", "http")
def _(t):
    api, v = setup(t)
    got = api.get(path("/api/queues", v) + "?columns=name,durable")
    eq(got[:2], [{"name": "other.a", "durable": False}, {"name": "pq.01", "durable": False}],
       "columns without page: a plain array")
    eq(len(got), 13, "all queues")
    got = api.get(path("/api/queues", v) + "?page_size=2")
    check(isinstance(got, list) and len(got) == 13, "page_size without page is not paged: %d items" % len(got))


@scenario("mgmt.paging.disable_stats", "http")
def _(t):
    api, v = setup(t)
    env = page(api, v, page=1, page_size=2, disable_stats="true")
    envelope(env, {"item_count": 2, "total_count": 13, "page_count": 7}, "disable_stats")
    q = env["items"][1]
    shape(q, {"name": str, "vhost": str, "durable": bool, "auto_delete": bool, "exclusive": bool, "arguments": dict,
              "type": str}, "queue without stats")
    eq((q["name"], q["arguments"]), ("pq.01", {"x-max-length": 1}), "second queue")
    for k in ("messages", "message_stats", "consumers"):
        check(k not in q, "no %r with disable_stats: %s" % (k, sorted(q)))


@scenario("mgmt.paging.bad_parameters", "http")
def _(t):
    api, v = setup(t)
    base = path("/api/queues", v)
    b = error_body(api.call("GET", base + "?page=0&page_size=2", want=400), "invalid_pagination_parameters")
    eq(b["reason"], "Invalid pagination parameters: page number 0, page size 2", "page 0")
    b = error_body(api.call("GET", base + "?page=1&page_size=501", want=400), "invalid_pagination_parameters")
    eq(b["reason"], "Invalid pagination parameters: page number 1, page size 501", "page_size 501")
    error_body(api.call("GET", base + "?page=x", want=400), "bad_request", "Pagination parameters are invalid",
               "page=x")
    error_body(api.call("GET", base + "?page=1&page_size=2&name=(&use_regex=true", want=400), "bad_request",
               "Pagination parameters are invalid", "a bad regex")
    error_body(api.call("GET", base + "?page=2&page_size=100", want=400), "page_out_of_range")
    eq(page(api, v, page=1, page_size=500, columns="name")["item_count"], 13, "page_size 500 is allowed")


@scenario("mgmt.paging.other_lists", "http")
def _(t):
    api, v = setup(t)
    env = api.get(path("/api/exchanges", v) + "?page=1&page_size=2&columns=name")
    envelope(env, {"filtered_count": 7, "item_count": 2, "page_count": 4, "total_count": 7,
                   "items": [{"name": ""}, {"name": "amq.direct"}]}, "exchanges of a vhost, paged")
    env = api.get(path("/api/exchanges", v) + "?page=1&page_size=3&columns=name,type&sort=type&sort_reverse=true")
    eq([x["type"] for x in env["items"]], ["topic", "topic", "headers"], "exchanges sorted by type, reversed")
    env = api.get("/api/vhosts?page=1&page_size=1&columns=name")
    shape(env, PAGED, "vhosts, paged")
    eq((env["item_count"], env["page_count"], env["items"]), (1, env["total_count"], [{"name": "/"}]),
       "vhosts page 1 of size 1")
    env = api.get("/api/queues?" + urlencode({"page": 1, "page_size": 100, "name": v, "columns": "name,vhost"}))
    shape(env, PAGED, "all queues, paged")
    c = t.pika(virtual_host=v)
    c.channel()
    env = api.get("/api/connections?page=1&page_size=1&columns=name")
    shape(env, PAGED, "connections, paged")
    eq(env["item_count"], min(1, env["total_count"]), "at most one connection on page 1")
