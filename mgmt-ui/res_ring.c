/* The ring of an x-consistent-hash exchange: GET
 * /api/exchanges/{vhost}/{name}/ring (Warren's; RabbitMQ shows it with
 * `rabbitmq-diagnostics consistent_hash_exchange_ring_state`). Each
 * destination in the ring with the buckets it owns, in bucket order:
 *
 *   {"vhost": "/", "exchange": "x", "buckets": 5,
 *    "ring": [{"first_bucket": 0, "last_bucket": 2, "weight": 3,
 *              "destination": "q1", "destination_type": "queue"}, ...]}
 *
 * Read as the other exchange GETs are (management tag, vhost access); 404
 * for a missing exchange, 400 for one of another type.
 */
#include <stdio.h>

#include "mgmt_int.h"

static void ring_entry(void *arg, const route_ring_entry *e)
{
    mgmt_json *w = arg;
    bool to_queue = e->dest.queue != NULL;

    mgmt_json_obj(w);
    mgmt_json_kuint(w, "first_bucket", e->first);
    mgmt_json_kuint(w, "last_bucket", e->first + e->weight - 1);
    mgmt_json_kuint(w, "weight", e->weight);
    mgmt_json_kbytes(w, "destination",
                     to_queue ? queue_name(e->dest.queue) : route_exchange_name(e->dest.exchange));
    mgmt_json_kstr(w, "destination_type", to_queue ? "queue" : "exchange");
    mgmt_json_end_obj(w);
}

static void count_buckets(void *arg, const route_ring_entry *e) { *(uint64_t *)arg += e->weight; }

static void get_ring(mgmt_req *r)
{
    vhost *v = mgmt_vhost_arg(r, 0);
    amqp_bytes name = r->cap[1];
    route_exchange *ex = v ? route_exchange_find(vhost_routes(v), name) : NULL;
    uint64_t buckets = 0;

    if (!v)
        return;
    if (!ex) {
        mgmt_not_found(r);
        return;
    }
    if (!route_exchange_ring(ex, count_buckets, &buckets)) {
        char why[600];
        snprintf(why, sizeof why, "exchange '%.*s' in vhost '%s' is not of type x-consistent-hash",
                 (int)name.len, (const char *)name.ptr, vhost_name(v));
        mgmt_error(r, 400, "bad_request", why);
        return;
    }
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_obj(w);
    mgmt_json_kstr(w, "vhost", vhost_name(v));
    mgmt_json_kbytes(w, "exchange", name);
    mgmt_json_kuint(w, "buckets", buckets);
    mgmt_json_key(w, "ring");
    mgmt_json_arr(w);
    route_exchange_ring(ex, ring_entry, w);
    mgmt_json_end_arr(w);
    mgmt_json_end_obj(w);
    mgmt_send(r, 200);
}

const mgmt_route mgmt_ring_routes[] = {
    {HTTP_GET, "/api/exchanges/{}/{}/ring", TAG_MANAGEMENT, get_ring},
    {0},
};
