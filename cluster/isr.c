/* The in-sync replica set as etcd holds it: {"epoch": E, "nodes": [names]}
 * where E is the leadership that last wrote it. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_int.h"

bool isr_has(const isr_set *s, const char *name)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0)
            return true;
    return false;
}

bool isr_add(isr_set *s, const char *name)
{
    if (isr_has(s, name))
        return true;
    if (s->n == CLUSTER_MAX_NODES || strlen(name) >= sizeof s->names[0])
        return false;
    strcpy(s->names[s->n++], name);
    return true;
}

void isr_remove(isr_set *s, const char *name)
{
    for (unsigned i = 0; i < s->n; i++)
        if (strcmp(s->names[i], name) == 0) {
            memmove(s->names[i], s->names[i + 1], (s->n - i - 1) * sizeof s->names[0]);
            s->n--;
            return;
        }
}

char *isr_encode(const isr_set *s)
{
    json_t *o = json_object(), *a = json_array();
    for (unsigned i = 0; i < s->n; i++)
        json_array_append_new(a, json_string(s->names[i]));
    json_object_set_new(o, "epoch", json_integer(s->epoch));
    json_object_set_new(o, "nodes", a);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return text;
}

bool isr_decode(const void *value, size_t len, isr_set *out)
{
    json_error_t e;
    json_t *o = json_loadb(value, len, 0, &e);
    json_t *epoch = json_object_get(o, "epoch"), *nodes = json_object_get(o, "nodes");
    bool ok = json_is_integer(epoch) && json_is_array(nodes) &&
              json_array_size(nodes) <= CLUSTER_MAX_NODES;
    isr_set s = {.epoch = ok ? json_integer_value(epoch) : 0};
    for (size_t i = 0; ok && i < json_array_size(nodes); i++) {
        const json_t *n = json_array_get(nodes, i);
        ok = json_is_string(n) && isr_add(&s, json_string_value(n));
    }
    json_decref(o);
    if (ok) {
        s.mod_revision = out->mod_revision;
        *out = s;
    }
    return ok;
}
