/* Creating, changing and deleting vhosts: the registry (core/server.c)
 * plus what a vhost holds -- its queues, its connections, its rows in the
 * metadata store, its permissions. */
#include <stdio.h>
#include <string.h>

#include "admin.h"

static const char *const queue_types[] = {"", "undefined", "classic", "quorum", "stream"};

bool admin_validate_vhost(const meta_vhost *v, char *err, size_t errlen)
{
    if (!v->name || !*v->name || strlen(v->name) > 255) {
        snprintf(err, errlen, "vhost name must be 1 to 255 bytes");
        return false;
    }
    const char *type = v->default_queue_type ? v->default_queue_type : "";
    for (size_t i = 0; i < sizeof queue_types / sizeof queue_types[0]; i++)
        if (strcmp(type, queue_types[i]) == 0)
            return true;
    snprintf(err, errlen, "unknown default queue type '%s' for vhost '%s'", type, v->name);
    return false;
}

/* A new vhost object in the registry (nothing written). */
static vhost *add_vhost(server *s, const meta_vhost *d)
{
    vhost *v = vhost_new(s, d->name);
    if (!v || !vhost_set_details(v, d) || !server_vhost_insert(s, vhost_name(v), v)) {
        vhost_free(v);
        return NULL;
    }
    return v;
}

void admin_load_vhost(server *s, const meta_vhost *d)
{
    if (server_vhost(s, AMQP_CSTR(d->name)))
        return;
    if (!add_vhost(s, d))
        log_msg(LOG_ERROR, "out of memory restoring vhost '%s'", d->name);
}

bool admin_put_vhost(server *s, const meta_vhost *v, char *err, size_t errlen)
{
    if (!admin_validate_vhost(v, err, errlen))
        return false;
    const char *type = v->default_queue_type ? v->default_queue_type : "";
    meta_vhost row = {v->name, v->description ? v->description : "", v->tags ? v->tags : "",
                      strcmp(type, "undefined") == 0 ? "" : type, v->tracing};
    if (!meta_put_vhost(server_meta(s), &row)) {
        snprintf(err, errlen, "cannot store vhost '%s' (see the log)", v->name);
        return false;
    }
    vhost *found = server_vhost(s, AMQP_CSTR(v->name));
    if (found ? !vhost_set_details(found, &row) : !add_vhost(s, &row)) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    return true;
}

static void close_for_vhost(void *arg, conn *c) { conn_vhost_deleted(c, arg); }
static void delete_queue_cb(void *arg, queue *q) { (void)arg, queue_delete(q); }

/* Queues are deleted one by one (journal records settle their messages;
 * the store rows go in the same transaction as the vhost's cascade). */
bool admin_delete_vhost(server *s, const char *name, char *err, size_t errlen)
{
    vhost *v = server_vhost(s, AMQP_CSTR(name));
    if (!v) {
        snprintf(err, errlen, "no vhost '%s'", name);
        return false;
    }
    char text[400];
    snprintf(text, sizeof text, "CONNECTION_FORCED - vhost '%s' is deleted", name);
    admin_foreach_conn(s, v, close_for_vhost, text);
    if (server_stream_hub(s))
        sconn_hub_close_matching(server_stream_hub(s), v, NULL, text);
    meta *m = server_meta(s);
    bool grouped = !meta_grouped(m) && meta_begin(m); /* or join the caller's */
    vhost_foreach_queue(v, delete_queue_cb, NULL);
    xdelay_vhost_deleted(v); /* what its delayed exchanges hold goes too */
    if (!meta_delete_vhost(m, name) || (grouped && !meta_commit(m))) {
        if (grouped)
            meta_rollback(m);
        snprintf(err, errlen, "cannot delete vhost '%s' from the store (see the log)", name);
        return false;
    }
    server_vhost_remove(s, name);
    access_vhost_deleted(server_access(s), name);
    log_msg(LOG_INFO, "deleted vhost '%s'", name);
    dedup_vhost_deleted(v); /* before vhost_free, which would keep them */
    vhost_free(v);
    return true;
}
