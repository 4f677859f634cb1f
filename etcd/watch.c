/* Watches: one connection each, one POST /v3/watch whose reply is an
 * endless stream of {"result":...} messages.
 *
 * States: connecting (a create request sent, waiting for "created", under
 * the request deadline) -> watching (no deadline: a watch may be quiet
 * for hours) -> on a broken stream, back to connecting on the next
 * endpoint after the client's backoff, from `next_rev`; -> ended (a
 * compaction, a refusal, or a response over the bounds, which a retry
 * would only fetch again: the callback is told once, nothing more).
 * `next_rev` is one past the mod_revision of the last event delivered, so
 * a resumed watch repeats nothing and skips nothing. With credentials a
 * connection authenticates first (a token per connection, as client.c's). */
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_int.h"

struct etcd_watch {
    etcd_client *c;
    uint8_t *key;
    size_t key_len;
    bool prefix, created, ended;
    int64_t next_rev;
    econn *conn;
    struct event *timer; /* the create deadline, or the reconnect delay */
    etcd_watch_cb cb;
    void *arg;
    bool *freed; /* set when freed from inside its callback */
    char *create; /* the create request, sent once authenticated */
    char *token;  /* this connection's, with credentials */
};

static void connect_watch(etcd_watch *w);

static void drop(etcd_watch *w)
{
    econn_free(w->conn);
    w->conn = NULL;
    free(w->create);
    free(w->token);
    w->create = w->token = NULL;
}

/* Calls the callback; false if it freed the watch. */
static bool deliver(etcd_watch *w, const etcd_watch_result *r)
{
    bool freed = false;
    w->freed = &freed;
    w->cb(r, w->arg);
    if (freed)
        return false;
    w->freed = NULL;
    return true;
}

static void end(etcd_watch *w, etcd_status st, int64_t compact_rev)
{
    w->ended = true;
    evtimer_del(w->timer);
    drop(w);
    etcd_watch_result r = {.status = st, .compact_revision = compact_rev};
    deliver(w, &r);
}

/* The stream broke: reconnect from next_rev after the client's backoff. */
static void broken(etcd_watch *w)
{
    drop(w);
    w->created = false;
    unsigned delay;
    etcd_next_endpoint(w->c, &delay);
    struct timeval tv = {delay / 1000, (delay % 1000) * 1000};
    evtimer_add(w->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    etcd_watch *w = arg;
    if (w->conn) /* "created" did not come in time */
        broken(w);
    else
        connect_watch(w);
}

static int parse_events(const json_t *arr, etcd_event **out, size_t *n, json_t *arena)
{
    *n = json_array_size(arr);
    *out = NULL;
    if (*n == 0)
        return arr && !json_is_array(arr) ? -1 : 0;
    *out = calloc(*n, sizeof(**out));
    if (!*out)
        return -1;
    for (size_t i = 0; i < *n; i++) {
        const json_t *ev = json_array_get(arr, i);
        const json_t *type = json_object_get(ev, "type");
        (*out)[i].type = json_is_string(type) && strcmp(json_string_value(type), "DELETE") == 0
                             ? ETCD_EVENT_DELETE
                             : ETCD_EVENT_PUT;
        if (codec_kv(json_object_get(ev, "kv"), &(*out)[i].kv, arena) < 0)
            return -1;
    }
    return 0;
}

/* One message of the stream; false when the watch was freed or ended. */
static bool handle(etcd_watch *w, const json_t *res, json_t *arena)
{
    int64_t compact;
    if (codec_int(res, "compact_revision", &compact) < 0)
        return false;
    if (compact > 0 || json_is_true(json_object_get(res, "canceled"))) {
        end(w, compact > 0 ? ETCD_COMPACTED : ETCD_SERVER, compact);
        return false;
    }
    if (json_is_true(json_object_get(res, "created"))) {
        int64_t rev;
        if (codec_int(json_object_get(res, "header"), "revision", &rev) < 0)
            return false;
        if (w->next_rev == 0) /* "from now": a resume must start here */
            w->next_rev = rev + 1;
        w->created = true;
        evtimer_del(w->timer);
        etcd_endpoint_ok(w->c);
    }
    etcd_event *evs;
    size_t n;
    if (parse_events(json_object_get(res, "events"), &evs, &n, arena) < 0) {
        free(evs);
        broken(w);
        return false;
    }
    /* after a reconnect etcd starts at next_rev: nothing to skip, but a
     * stale event would break the order promise, so drop any */
    size_t first = 0;
    while (first < n && evs[first].kv.mod_revision < w->next_rev)
        first++;
    bool go = true;
    if (first < n) {
        w->next_rev = evs[n - 1].kv.mod_revision + 1;
        etcd_watch_result r = {.status = ETCD_OK, .events = evs + first, .n_events = n - first};
        go = deliver(w, &r);
    }
    free(evs);
    return go;
}

/* The authenticate's reply: the token, or a refusal that ends the watch. */
static bool on_auth_reply(etcd_watch *w, int status, const char *msg, size_t len)
{
    etcd_result r;
    json_t *keep;
    codec_result(msg, len, status, &r, &keep);
    etcd_status st = r.status;
    codec_result_free(&r, keep);
    w->token = st == ETCD_OK ? codec_token(msg, len) : NULL;
    if (st == ETCD_SERVER)
        end(w, ETCD_SERVER, 0);
    else if (!w->token)
        broken(w);
    return w->token != NULL;
}

static bool on_message(void *arg, int status, const char *msg, size_t len)
{
    etcd_watch *w = arg;
    if (w->create && !w->token)
        return on_auth_reply(w, status, msg, len);
    json_t *arena = json_array();
    json_t *root = arena ? json_loadb(msg, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
    const json_t *res = json_object_get(root, "result");
    bool go;
    if (!json_is_object(res)) { /* {"error":...} or garbage: start over elsewhere */
        broken(w);
        go = false;
    } else {
        go = handle(w, res, arena);
    }
    json_decref(root);
    json_decref(arena);
    return go;
}

static void on_connected(void *arg) {}
static void on_done(void *arg, int status)
{
    etcd_watch *w = arg;
    char *create = w->create;
    if (!create || !w->token || /* the authenticate's reply ended: now the watch */
        econn_send(w->conn, "/v3/watch", create, strlen(create), w->token) < 0) {
        broken(w);
        return;
    }
    w->create = NULL;
    free(create);
}
static void on_failed(void *arg, etcd_status why, const char *text, bool sent)
{
    if (why == ETCD_PROTOCOL) /* over the bound: it would come back the same */
        end(arg, ETCD_PROTOCOL, 0);
    else
        broken(arg);
}

static const econn_ops watch_ops = {on_connected, on_message, on_done, on_failed};

static void connect_watch(etcd_watch *w)
{
    json_t *cr = json_object();
    json_t *body = cr ? json_pack("{so}", "create_request", cr) : NULL;
    char rev[24];
    snprintf(rev, sizeof(rev), "%lld", (long long)w->next_rev);
    int bad = !body || json_object_set_new(cr, "key", codec_b64(w->key, w->key_len)) < 0 ||
              (w->prefix &&
               json_object_set_new(cr, "range_end", codec_prefix_end(w->key, w->key_len)) < 0) ||
              (w->next_rev && json_object_set_new(cr, "start_revision", json_string(rev)) < 0);
    char *text = bad ? NULL : json_dumps(body, JSON_COMPACT);
    char *auth = etcd_auth_body(w->c);
    json_decref(body);
    w->conn = text ? econn_new(w->c, etcd_cur_endpoint(w->c), &watch_ops, w) : NULL;
    int rc = !w->conn ? -1
             : auth   ? econn_send(w->conn, "/v3/auth/authenticate", auth, strlen(auth), NULL)
                      : econn_send(w->conn, "/v3/watch", text, strlen(text), NULL);
    bool authenticating = auth != NULL;
    free(auth);
    if (rc < 0) {
        free(text);
        broken(w);
        return;
    }
    if (authenticating)
        w->create = text; /* sent when the token comes */
    else
        free(text);
    unsigned ms = etcd_limits_of(w->c)->request_timeout_ms;
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    evtimer_add(w->timer, &tv);
}

etcd_watch *etcd_watch_start(etcd_client *c, const void *key, size_t key_len, bool prefix,
                             int64_t start_revision, etcd_watch_cb cb, void *arg)
{
    etcd_watch *w = calloc(1, sizeof(*w));
    if (!w || !cb || start_revision < 0)
        goto fail;
    w->c = c;
    w->key = malloc(key_len ? key_len : 1);
    w->timer = evtimer_new(etcd_base(c), on_timer, w);
    if (!w->key || !w->timer)
        goto fail;
    memcpy(w->key, key, key_len);
    w->key_len = key_len;
    w->prefix = prefix;
    w->next_rev = start_revision;
    w->cb = cb;
    w->arg = arg;
    struct timeval now = {0, 0}; /* connect from the loop */
    evtimer_add(w->timer, &now);
    return w;
fail:
    etcd_watch_free(w);
    return NULL;
}

int64_t etcd_watch_next_revision(const etcd_watch *w) { return w->next_rev; }

void etcd_watch_free(etcd_watch *w)
{
    if (!w)
        return;
    if (w->freed)
        *w->freed = true;
    drop(w);
    if (w->timer)
        event_free(w->timer);
    free(w->key);
    free(w);
}
