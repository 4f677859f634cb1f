/* What the etcd tests share: a watch callback that records what it saw. */
#ifndef TEST_ETCD_UTIL_H
#define TEST_ETCD_UTIL_H

#include <stdio.h>

#include "../../etcd/etcd.h"

typedef struct seen {
    char log[64][16];
    int64_t revs[64];
    int n;
    etcd_status end;
    int64_t compact;
    bool ended;
} seen;

static inline void on_events(const etcd_watch_result *r, void *arg)
{
    seen *w = arg;
    if (r->status != ETCD_OK) {
        w->ended = true;
        w->end = r->status;
        w->compact = r->compact_revision;
        return;
    }
    for (size_t i = 0; i < r->n_events && w->n < 64; i++) {
        const etcd_event *e = &r->events[i];
        snprintf(w->log[w->n], 16, "%c%.*s", e->type == ETCD_EVENT_PUT ? '+' : '-',
                 (int)e->kv.key_len, (const char *)e->kv.key);
        w->revs[w->n++] = e->kv.mod_revision;
    }
}

#endif
