/* etcd's authentication through the gateway: a user name and password
 * traded for a token (POST /v3/auth/authenticate), sent as the
 * "Authorization" header. etcd's default "simple" tokens live on the
 * member that issued them and expire when idle (--auth-token-ttl), so the
 * client authenticates on every new connection, and once more when a
 * request is refused for its token. The password is kept for that. */
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "etcd_int.h"

char *codec_token(const char *msg, size_t len)
{
    json_t *root = json_loadb(msg, len, JSON_REJECT_DUPLICATES, NULL);
    const json_t *t = json_object_get(root, "token");
    char *token = NULL;
    /* a header value: printable ASCII only */
    if (json_is_string(t) && json_string_length(t) > 0 && json_string_length(t) < 4096) {
        const char *s = json_string_value(t);
        bool ok = true;
        for (size_t i = 0; ok && s[i]; i++)
            ok = s[i] > ' ' && s[i] < 127;
        token = ok ? strdup(s) : NULL;
    }
    json_decref(root);
    return token;
}

bool codec_token_refused(const etcd_result *r)
{
    return r->status == ETCD_SERVER && strstr(r->message, "invalid auth token") != NULL;
}

int etcd_client_set_auth(etcd_client *c, const char *user, const char *password)
{
    char *u = strdup(user), *p = strdup(password);
    if (!u || !p || !*u) {
        free(u);
        free(p);
        return -1;
    }
    free(c->user);
    free(c->password);
    c->user = u;
    c->password = p;
    return 0;
}

char *etcd_auth_body(etcd_client *c)
{
    if (!c->user)
        return NULL;
    json_t *j = json_pack("{ssss}", "name", c->user, "password", c->password);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

/* Bad credentials: every request waiting behind the authenticate fails
 * with etcd's refusal (the callbacks may queue new ones: those wait). */
static void fail_behind(etcd_client *c, etcd_req *auth, const etcd_result *res)
{
    TAILQ_HEAD(, etcd_req) doomed = TAILQ_HEAD_INITIALIZER(doomed);
    etcd_req *x;
    while ((x = TAILQ_NEXT(auth, link))) {
        TAILQ_REMOVE(&c->queue, x, link);
        TAILQ_INSERT_TAIL(&doomed, x, link);
    }
    while ((x = TAILQ_FIRST(&doomed))) {
        TAILQ_REMOVE(&doomed, x, link);
        c->n_queued--;
        if (x->cb)
            x->cb(res, x->arg);
        etcd_req_free(x);
    }
}

void etcd_auth_reply(etcd_client *c, etcd_req *r, const etcd_result *res, const char *msg,
                          size_t len)
{
    free(c->token);
    c->token = res->status == ETCD_OK ? codec_token(msg, len) : NULL;
    r->garbled = res->status == ETCD_OK && !c->token;
    if (res->status == ETCD_SERVER)
        fail_behind(c, r, res);
}

/* The head of the queue, behind an authenticate when one is due. */
etcd_req *etcd_auth_first(etcd_client *c)
{
    etcd_req *r = TAILQ_FIRST(&c->queue);
    if (!c->user || c->token || r->is_auth)
        return r;
    etcd_req *a = etcd_req_new(c, "/v3/auth/authenticate", etcd_auth_body(c), NULL, NULL);
    if (!a)
        return r; /* out of memory: it goes without a token and is refused */
    a->is_auth = true;
    TAILQ_INSERT_HEAD(&c->queue, a, link);
    c->n_queued++;
    return a;
}
