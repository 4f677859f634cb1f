/* The import entry points: a document (object, text or file) is checked
 * whole by defs_check, then applied by defs_apply. The context's name
 * sets live for one import. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "defs_int.h"

static bool ctx_init(defs_ctx *c, server *s, const json_t *doc, vhost *only, defs_error *err)
{
    memset(err, 0, sizeof *err);
    *c = (defs_ctx){.s = s, .only = only, .doc = doc, .err = err};
    c->vhosts = json_object();
    c->users = json_object();
    c->exchanges = json_object();
    c->queues = json_object();
    return (c->vhosts && c->users && c->exchanges && c->queues) || defs_fail(c, "out of memory");
}

static void ctx_done(defs_ctx *c)
{
    json_decref(c->vhosts);
    json_decref(c->users);
    json_decref(c->exchanges);
    json_decref(c->queues);
}

bool defs_import(server *s, const json_t *doc, vhost *only, defs_error *err)
{
    defs_ctx *c = malloc(sizeof *c); /* the table buffer is large: not on the stack */
    if (!c) {
        snprintf(err->reason, sizeof err->reason, "out of memory");
        return false;
    }
    bool ok = ctx_init(c, s, doc, only, err) && defs_check(c) && defs_apply(c);
    ctx_done(c);
    free(c);
    return ok;
}

static bool syntax_error(defs_error *err, const json_error_t *je)
{
    memset(err, 0, sizeof *err);
    err->line = je->line > 0 ? je->line : 0;
    err->column = je->column > 0 ? je->column : 0;
    snprintf(err->reason, sizeof err->reason, "JSON syntax error: %s", je->text);
    return false;
}

bool defs_import_text(server *s, const char *text, size_t len, vhost *only, defs_error *err)
{
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    if (!doc)
        return syntax_error(err, &je);
    bool ok = defs_import(s, doc, only, err);
    json_decref(doc);
    return ok;
}

static bool import_one_file(server *s, const char *path, defs_error *err)
{
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    if (!doc) {
        /* jansson reports an unreadable file at line -1 */
        if (je.line < 0) {
            memset(err, 0, sizeof *err);
            snprintf(err->reason, sizeof err->reason, "cannot read: %s", je.text);
            return false;
        }
        return syntax_error(err, &je);
    }
    log_msg(LOG_INFO, "importing definitions from %s", path);
    bool ok = defs_import(s, doc, NULL, err);
    json_decref(doc);
    return ok;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A directory: its *.json files in name order, as RabbitMQ reads one. */
static bool import_directory(server *s, const char *path, defs_error *err, char *failed,
                             size_t failedlen)
{
    DIR *d = opendir(path);
    char **names = NULL;
    size_t n = 0, cap = 0;
    bool ok = d != NULL;
    for (struct dirent *e; ok && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if (n == cap) {
            char **grown = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
            ok = grown != NULL;
            names = ok ? grown : names;
        }
        if (ok)
            ok = (names[n++] = strdup(e->d_name)) != NULL;
    }
    if (!ok)
        snprintf(err->reason, sizeof err->reason, "cannot read the directory: %s",
                 strerror(errno));
    if (d)
        closedir(d);
    if (n)
        qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        snprintf(failed, failedlen, "%s/%s", path, names[i]);
        ok = ok && import_one_file(s, failed, err);
        free(names[i]);
    }
    free(names);
    return ok;
}

bool defs_import_file(server *s, const char *path, defs_error *err, char *failed,
                      size_t failedlen)
{
    struct stat st;
    memset(err, 0, sizeof *err);
    snprintf(failed, failedlen, "%s", path);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return import_directory(s, path, err, failed, failedlen);
    return import_one_file(s, path, err);
}
