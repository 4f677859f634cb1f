/* The server's connections as one set, over every loop: walks, closing a
 * user's, lookup by id. */
#include <string.h>

#include "admin.h"

void admin_foreach_conn(server *s, vhost *v, void (*fn)(void *arg, conn *c), void *arg)
{
    /* conn_close frees nothing synchronously, so the arrays are stable. */
    for (size_t k = 0; k < server_loop_count(s); k++) {
        loop *l = server_loop(s, k);
        for (size_t i = 0; i < loop_socket_count(l); i++) {
            conn *c = loop_conn_at(l, i);
            if (!v || conn_vhost(c) == v)
                fn(arg, c);
        }
    }
}

typedef struct user_close {
    const char *user, *text;
} user_close;

static void close_if_user(void *arg, conn *c)
{
    user_close *u = arg;
    if (strcmp(conn_user(c), u->user) == 0)
        conn_close(c, AMQP_CONNECTION_FORCED, u->text, 0);
}

void admin_close_user_connections(void *server_ptr, const char *user, const char *text)
{
    user_close u = {user, text};
    admin_foreach_conn(server_ptr, NULL, close_if_user, &u);
    if (server_stream_hub(server_ptr))
        sconn_hub_close_matching(server_stream_hub(server_ptr), NULL, user, text);
}

conn *admin_conn_find(server *s, uint64_t id)
{
    for (size_t i = 0; i < server_conn_count(s); i++) {
        conn *c = server_conn_at(s, i);
        if (conn_id(c) == id)
            return c;
    }
    return NULL;
}

/* The management plane, the definitions import and the timers of broker/
 * run on the first loop. */
loop *admin_loop(server *s) { return server_loop(s, 0); }
