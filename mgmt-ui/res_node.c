/* Node operations for the command-line tools: GET /api/feature-flags
 * (RabbitMQ's, with the flags whose features Warren has) and Warren's own
 * PUT /api/nodes/{node}/vm-memory-high-watermark -- what rabbitmqctl
 * set_vm_memory_high_watermark does over Erlang distribution, which
 * Warren's CLI (warrenctl) does over this API. Administrators only.
 * Also Warren's POST /api/nodes/{node}/reload-certificates (warrenctl
 * reload_certificates; RabbitMQ has no such route): every TLS listener
 * makes its context again from its files for new handshakes; 204, or 500
 * with the reason when one cannot (that listener keeps its old one).
 *
 * The watermark body is {"relative": 0.4} (a fraction of the RAM, 0 to 1)
 * or {"absolute": 1073741824} (bytes); 204 once it applies -- the memory
 * alarm is checked again at once. Like rabbitmqctl's, it lasts until the
 * broker restarts.
 */
#include "mgmt_int.h"

/* RabbitMQ 3.10.8's flags (name, description, documentation), those whose
 * features Warren has, all enabled and stable. Left out: mirrored queues'
 * version, maintenance mode, streams and user limits, which Warren does
 * not have. */
static const struct flag {
    const char *name, *desc, *doc_url, *provided_by;
} flags[] = {
    {"drop_unroutable_metric", "Count unroutable publishes to be dropped in stats", "",
     "rabbitmq_management_agent"},
    {"empty_basic_get_metric", "Count AMQP `basic.get` on empty queues in stats", "",
     "rabbitmq_management_agent"},
    {"implicit_default_bindings",
     "Default bindings are now implicit, instead of being stored in the database", "", "rabbit"},
    {"quorum_queue", "Support queues of type `quorum`", "https://www.rabbitmq.com/quorum-queues.html",
     "rabbit"},
    {"virtual_host_metadata", "Virtual host metadata (description, tags, etc)", "", "rabbit"},
};

static void get_feature_flags(mgmt_req *r)
{
    mgmt_json *w = mgmt_reply(r);
    mgmt_json_arr(w);
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        mgmt_json_obj(w);
        mgmt_json_kstr(w, "name", flags[i].name);
        mgmt_json_kstr(w, "desc", flags[i].desc);
        mgmt_json_kstr(w, "doc_url", flags[i].doc_url);
        mgmt_json_kstr(w, "state", "enabled");
        mgmt_json_kstr(w, "stability", "stable");
        mgmt_json_kstr(w, "provided_by", flags[i].provided_by);
        mgmt_json_end_obj(w);
    }
    mgmt_json_end_arr(w);
    mgmt_send(r, 200);
}

/* {"relative": x} or {"absolute": n}, exactly one; false with the 400 sent. */
static bool watermark_body(mgmt_req *r, json_t *body, double *relative, uint64_t *absolute)
{
    json_t *rel = json_object_get(body, "relative"), *abs = json_object_get(body, "absolute");
    *relative = server_config(r->s)->memory_high_watermark;
    *absolute = 0;
    if (!rel == !abs) {
        mgmt_error(r, 400, "bad_request", "give one of relative (a fraction of the RAM) or "
                                          "absolute (bytes)");
        return false;
    }
    if (rel && (!json_is_number(rel) || !(json_number_value(rel) >= 0) ||
                json_number_value(rel) > 1)) {
        mgmt_error(r, 400, "bad_request", "The threshold should be a fraction between 0.0 and 1.0");
        return false;
    }
    if (abs && (!json_is_integer(abs) || json_integer_value(abs) < 1)) {
        mgmt_error(r, 400, "bad_request", "The threshold should be a whole number of bytes above 0");
        return false;
    }
    if (rel)
        *relative = json_number_value(rel);
    else
        *absolute = (uint64_t)json_integer_value(abs);
    return true;
}

static void put_watermark(mgmt_req *r)
{
    double relative;
    uint64_t absolute;
    json_t *body;
    if (!amqp_bytes_equal_cstr(r->cap[0], server_node_name(r->s))) {
        mgmt_not_found(r);
        return;
    }
    if (!(body = mgmt_body(r)) || !watermark_body(r, body, &relative, &absolute))
        return;
    admin_set_memory_watermark(r->s, relative, absolute);
    mgmt_send_empty(r, 204, NULL);
}

static void reload_certificates(mgmt_req *r)
{
    char err[600];
    if (!amqp_bytes_equal_cstr(r->cap[0], server_node_name(r->s)))
        mgmt_not_found(r);
    else if (server_reload_certificates(r->s, err, sizeof err))
        mgmt_send_empty(r, 204, NULL);
    else
        mgmt_error(r, 500, "certificate_reload_failed", err);
}

const mgmt_route mgmt_node_routes[] = {
    {HTTP_POST, "/api/nodes/{}/reload-certificates", TAG_ADMINISTRATOR, reload_certificates},
    {HTTP_GET, "/api/feature-flags", TAG_ADMINISTRATOR, get_feature_flags},
    {HTTP_PUT, "/api/nodes/{}/vm-memory-high-watermark", TAG_ADMINISTRATOR, put_watermark},
    {0},
};
