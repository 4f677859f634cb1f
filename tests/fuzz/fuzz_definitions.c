/* The definitions importer (definitions/): a document as POST
 * /api/definitions[/{vhost}] or load_definitions gives it, imported into a
 * real broker (fuzz_broker.h). A refused import says why and changes
 * nothing (the export before and after is the same); an accepted one
 * exports a document that imports again.
 *
 * Input: a flags byte (bit 0: into vhost "/" only), then the JSON text. */
#include "../../definitions/definitions.h"
#include "fuzz_broker.h"

static server *srv;

static char *exported(vhost *only)
{
    json_t *d = defs_export(srv, only);
    FUZZ_CHECK(d);
    char *text = json_dumps(d, JSON_SORT_KEYS | JSON_COMPACT);
    FUZZ_CHECK(text);
    json_decref(d);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        srv = fuzz_broker_start(NULL);
    fuzz_in in = {data, size};
    vhost *only = fuzz_byte(&in) & 1 ? server_vhost(srv, AMQP_CSTR("/")) : NULL;
    char *before = exported(NULL);
    defs_error err;
    memset(&err, 0, sizeof err);
    if (!defs_import_text(srv, (const char *)in.p, in.len, only, &err)) {
        FUZZ_CHECK(err.reason[0] && memchr(err.reason, 0, sizeof err.reason));
        char *after = exported(NULL);
        if (strcmp(before, after) != 0)
            fprintf(stderr, "refused (%s) but changed:\n%s\n%s\n", err.reason, before, after);
        FUZZ_CHECK(strcmp(before, after) == 0);
        free(after);
    } else {
        char *now = exported(only);
        bool again = defs_import_text(srv, now, strlen(now), only, &err);
        if (!again)
            fprintf(stderr, "export does not import again: %s\n%s\n", err.reason, now);
        FUZZ_CHECK(again);
        free(now);
    }
    free(before);
    return 0;
}
