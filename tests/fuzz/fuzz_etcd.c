/* etcd/'s reading side: responses of etcd's JSON gateway as the client
 * reads them -- the HTTP/1.1 response parser fed in slices of a size the
 * input picks, then each message decoded as a unary reply. Checks: a
 * message and the buffered part of one stay within max_message; the
 * parser ends in RESP_END or RESP_ERROR with a reason, or wants more;
 * a decoded reply's kvs are readable and its status is a known one, a
 * protocol error carries no kvs; base64 that decodes encodes back to a
 * string that decodes to the same bytes; an auth token taken from a reply
 * is printable ASCII (it becomes a header).
 *
 * Input: a byte (slice size - 1), then the response bytes. */
#include <event2/buffer.h>

#include "../../etcd/etcd_int.h"
#include "fuzz.h"

#define MAX_HEAD 1024
#define MAX_MESSAGE 4096

static void check_b64(const char *msg, size_t len)
{
    uint8_t *d, *d2;
    size_t n, n2;
    if (codec_unb64(msg, len, &d, &n) < 0)
        return;
    json_t *again = codec_b64(d, n);
    FUZZ_CHECK(again != NULL);
    FUZZ_CHECK(codec_unb64(json_string_value(again), json_string_length(again), &d2, &n2) == 0);
    FUZZ_CHECK(n2 == n && memcmp(d, d2, n) == 0);
    free(d);
    free(d2);
    json_decref(again);
}

static bool on_message(void *arg, const char *msg, size_t len)
{
    resp_parser *p = arg;
    FUZZ_CHECK(len <= MAX_MESSAGE && msg[len] == '\0');
    etcd_result r;
    json_t *keep;
    codec_result(msg, len, p->status, &r, &keep);
    FUZZ_CHECK(r.status <= ETCD_LEASE_LOST && r.message != NULL);
    FUZZ_CHECK(r.status == ETCD_OK || r.n_kvs == 0);
    size_t sum = 0;
    for (size_t i = 0; i < r.n_kvs; i++) {
        for (size_t k = 0; k < r.kvs[i].key_len; k++)
            sum += r.kvs[i].key[k];
        for (size_t k = 0; k < r.kvs[i].value_len; k++)
            sum += r.kvs[i].value[k];
    }
    (void)sum;
    codec_result_free(&r, keep);
    check_b64(msg, len);
    char *token = codec_token(msg, len); /* goes into a header: printable, bounded */
    for (size_t i = 0; token && token[i]; i++)
        FUZZ_CHECK(token[i] > ' ' && token[i] < 127 && i < 4096);
    free(token);
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in in = {data, size};
    size_t step = (size_t)fuzz_byte(&in) + 1;
    resp_parser p;
    FUZZ_CHECK(resp_init(&p, MAX_HEAD, MAX_MESSAGE) == 0);
    struct evbuffer *buf = evbuffer_new();
    resp_rc rc = RESP_MORE;
    while (in.len > 0 && rc != RESP_ERROR) {
        size_t got;
        const uint8_t *s = fuzz_take(&in, step, &got);
        evbuffer_add(buf, s, got);
        rc = resp_feed(&p, buf, on_message, &p);
        FUZZ_CHECK(evbuffer_get_length(p.msg) <= MAX_MESSAGE);
        if (rc == RESP_END) { /* a keep-alive connection: the next reply */
            FUZZ_CHECK(p.status >= 100 && p.status <= 999);
            resp_reset(&p);
        }
    }
    FUZZ_CHECK(rc != RESP_ERROR || p.error != NULL);
    FUZZ_CHECK(rc != RESP_STOP);
    evbuffer_free(buf);
    resp_fini(&p);
    return 0;
}
