/* HTTP request heads (http/parse.c), then what the management API does
 * with the target: split and percent-decode the path (mgmt_path_decode)
 * and look its route up in every resource family's table (as
 * mgmt-ui/http.c's find_route), and parse the query as the handlers do.
 * Checks: a parsed head's fields lie in its buffer and are consistent; a
 * decoded path, percent-encoded again, decodes to the same segments; a
 * route captures no more segments than a request holds.
 *
 * Input: the head (request line and header lines, no blank line). */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "../../http/http_int.h"
#include "../../mgmt-ui/mgmt_int.h"
#include "fuzz.h"

static const mgmt_route *const tables[] = {
    mgmt_overview_routes,   mgmt_connection_routes, mgmt_exchange_routes,  mgmt_queue_routes,
    mgmt_binding_routes,    mgmt_vhost_routes,      mgmt_user_routes,      mgmt_permission_routes,
    mgmt_policy_routes,     mgmt_health_routes,     mgmt_definitions_routes, mgmt_move_routes,
    mgmt_parameter_routes,  mgmt_node_routes,
};

static bool within(const char *p, const char *buf, size_t cap)
{
    return p >= buf && p < buf + cap;
}

static void check_path(const char *path)
{
    static char buf[MGMT_PATH_BUF], again_buf[MGMT_PATH_BUF], encoded[3 * MGMT_PATH_BUF + 64];
    amqp_bytes segs[MGMT_PATH_SEGMENTS], again[MGMT_PATH_SEGMENTS], caps[MGMT_PATH_SEGMENTS];
    int n = mgmt_path_decode(path, buf, sizeof buf, segs, MGMT_PATH_SEGMENTS);
    if (n < 0)
        return;
    FUZZ_CHECK(n <= MGMT_PATH_SEGMENTS);
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(segs[i].len == 0 || within((const char *)segs[i].ptr, buf, sizeof buf));
        FUZZ_CHECK(segs[i].len <= sizeof buf);
        encoded[len++] = '/';
        for (uint32_t j = 0; j < segs[i].len; j++)
            len += (size_t)sprintf(encoded + len, "%%%02X", segs[i].ptr[j]);
    }
    encoded[len] = 0;
    if (n > 0 && segs[n - 1].len == 0)
        n--; /* "/a/" and "/a" are one segment: an empty last one does not encode back */
    int m = mgmt_path_decode(encoded, again_buf, sizeof again_buf, again, MGMT_PATH_SEGMENTS);
    if (len < 3 * MGMT_PATH_BUF / 3) { /* longer ones may not fit the buffer twice over */
        FUZZ_CHECK(m >= n);
        for (int i = 0; i < n; i++)
            FUZZ_CHECK(amqp_bytes_equal(segs[i], again[i]));
    }
    for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
        for (const mgmt_route *rt = tables[t]; rt->pattern; rt++) {
            int ncaps = -1;
            if (mgmt_path_match(rt->pattern, segs, n, caps, &ncaps))
                FUZZ_CHECK(ncaps >= 0 && ncaps <= 4 && ncaps <= n);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* the server's head copy: 2 * len + 2 bytes */
    char *buf = malloc(2 * size + 2);
    FUZZ_CHECK(buf);
    memcpy(buf, data, size);
    http_head h;
    const char *why = NULL;
    int status = http_parse_head(buf, size, &h, &why);
    if (status) {
        FUZZ_CHECK(why && *why);
        FUZZ_CHECK(status == 400 || status == 417 || status == 431 || status == 501 ||
                   status == 505);
        free(buf);
        return 0;
    }
    size_t cap = 2 * size + 2;
    FUZZ_CHECK(within(h.method_name, buf, cap) && within(h.target, buf, cap));
    FUZZ_CHECK(within(h.path, buf, cap) && (!h.query || within(h.query, buf, cap)));
    FUZZ_CHECK(strncmp(h.target, h.path, strlen(h.path)) == 0);
    FUZZ_CHECK(h.nheaders >= 0 && h.nheaders <= HTTP_MAX_HEADERS);
    FUZZ_CHECK(h.content_length >= -1);
    FUZZ_CHECK(h.minor_version == 0 || h.minor_version == 1);
    for (int i = 0; i < h.nheaders; i++)
        FUZZ_CHECK(within(h.headers[i].name, buf, cap) && within(h.headers[i].value, buf, cap));
    check_path(h.path);
    if (h.query) {
        struct evkeyvalq q;
        TAILQ_INIT(&q);
        evhttp_parse_query_str(h.query, &q);
        evhttp_clear_headers(&q);
    }
    free(buf);
    return 0;
}
