/* topic: the topic exchange type, a trie over dot-separated words.
 *
 * Words split as RabbitMQ's split_topic_key does: "" is no words, and
 * every dot separates two (possibly empty) words, so "a..b" is a,"",b.
 * In a binding key, "*" matches exactly one word and "#" zero or more.
 *
 * Each trie node is one word of some binding key. A node's "*" and "#"
 * children hang off direct pointers; its literal children live in one
 * hash map per exchange keyed by (parent node, word), so a lookup is a
 * hash of the word (computed once per message word) and one probe, however
 * many children a node has. A node holds the bindings whose key ends there
 * and is freed when it has neither bindings nor children. Runs of "#" are
 * collapsed on insertion ("#.#" matches exactly what "#" does), so a "#"
 * node never has a "#" child.
 *
 * Matching walks the trie against the message's words. A "#" node may be
 * reached at many positions; each "#" node remembers (memo_gen, memo_from)
 * that this call already explored it for every position from memo_from
 * on, so each (node, position) pair is walked at most once per message:
 * the cost is bounded by trie size times words, never exponential, and
 * nothing is allocated.
 */
#include <stdlib.h>
#include <string.h>

#include "route_int.h"

enum { NODE_ROOT, NODE_WORD, NODE_STAR, NODE_HASH };

typedef struct topic_node {
    struct topic_node *parent;
    struct topic_node *star, *hash;
    size_t nwords; /* literal children, in the edge map */
    route_vec bindings;
    uint64_t memo_gen; /* "#" nodes: positions >= memo_from were walked in call memo_gen */
    uint32_t memo_from;
    uint8_t kind;
    uint64_t edge_hash; /* NODE_WORD: its key in the edge map */
    uint32_t word_len;
    uint8_t word[];
} topic_node;

typedef struct topic_state {
    topic_node *root;
    route_map edges; /* NODE_WORD nodes by (parent, word) */
} topic_state;

typedef struct edge_probe {
    const topic_node *parent;
    amqp_bytes word;
} edge_probe;

static uint64_t edge_hash(const topic_node *parent, uint64_t word_hash)
{
    return route_mix64(word_hash ^ (uint64_t)(uintptr_t)parent);
}

static bool edge_eq(const void *item, const void *key)
{
    const topic_node *n = item;
    const edge_probe *p = key;

    return n->parent == p->parent && n->word_len == p->word.len &&
           (p->word.len == 0 || memcmp(n->word, p->word.ptr, p->word.len) == 0);
}

/* The next word of `key` from *pos; false when there is none. */
static bool next_word(amqp_bytes key, uint32_t *pos, amqp_bytes *word)
{
    uint32_t end;

    if (key.len == 0 || *pos > key.len)
        return false;
    for (end = *pos; end < key.len && key.ptr[end] != '.'; end++)
        ;
    *word = (amqp_bytes){key.ptr + *pos, end - *pos};
    *pos = end + 1;
    return true;
}

static int word_kind(amqp_bytes w)
{
    if (w.len == 1 && w.ptr[0] == '*')
        return NODE_STAR;
    if (w.len == 1 && w.ptr[0] == '#')
        return NODE_HASH;
    return NODE_WORD;
}

/* ---- building and pruning the trie -------------------------------------- */

static topic_node *node_new(topic_state *s, topic_node *parent, amqp_bytes word, int kind)
{
    topic_node *n = calloc(1, sizeof *n + (kind == NODE_WORD ? word.len : 0));

    if (n == NULL)
        return NULL;
    n->parent = parent;
    n->kind = (uint8_t)kind;
    if (kind == NODE_WORD) {
        n->word_len = word.len;
        if (word.len > 0)
            memcpy(n->word, word.ptr, word.len);
        n->edge_hash = edge_hash(parent, route_hash_bytes(word.ptr, word.len));
        if (!route_map_insert(&s->edges, n->edge_hash, n)) {
            free(n);
            return NULL;
        }
        parent->nwords++;
    } else if (kind == NODE_STAR) {
        parent->star = n;
    } else {
        parent->hash = n;
    }
    return n;
}

/* The child of `parent` for `word`, created if missing; NULL on OOM. */
static topic_node *child_get(topic_state *s, topic_node *parent, amqp_bytes word)
{
    int kind = word_kind(word);
    topic_node *n;

    if (kind == NODE_STAR)
        n = parent->star;
    else if (kind == NODE_HASH)
        n = parent->hash;
    else {
        edge_probe p = {parent, word};
        n = route_map_find(&s->edges, edge_hash(parent, route_hash_bytes(word.ptr, word.len)),
                           edge_eq, &p);
    }
    return n ? n : node_new(s, parent, word, kind);
}

static bool node_unused(const topic_node *n)
{
    return n->bindings.count == 0 && n->star == NULL && n->hash == NULL && n->nwords == 0;
}

/* Frees `n` and then its ancestors for as long as they are unused. */
static void prune(topic_state *s, topic_node *n)
{
    while (n->kind != NODE_ROOT && node_unused(n)) {
        topic_node *parent = n->parent;

        if (n->kind == NODE_WORD) {
            route_map_remove(&s->edges, n->edge_hash, n);
            parent->nwords--;
        } else if (n->kind == NODE_STAR) {
            parent->star = NULL;
        } else {
            parent->hash = NULL;
        }
        route_vec_free(&n->bindings);
        free(n);
        n = parent;
    }
}

/* ---- the type's functions ----------------------------------------------- */

static bool topic_create(route_exchange *ex)
{
    topic_state *s = calloc(1, sizeof *s);

    if (s == NULL || (s->root = calloc(1, sizeof *s->root)) == NULL) {
        free(s);
        return false;
    }
    s->root->kind = NODE_ROOT;
    ex->state = s;
    return true;
}

static bool topic_bind(route_exchange *ex, route_binding *b)
{
    topic_state *s = ex->state;
    topic_node *n = s->root, *child;
    amqp_bytes key = route_binding_key(b), word;
    uint32_t pos = 0;

    while (next_word(key, &pos, &word)) {
        if (n->kind == NODE_HASH && word_kind(word) == NODE_HASH)
            continue; /* "#.#" is "#" */
        if ((child = child_get(s, n, word)) == NULL) {
            prune(s, n);
            return false;
        }
        n = child;
    }
    if (!route_vec_push(&n->bindings, b)) {
        prune(s, n);
        return false;
    }
    b->type_data = n;
    return true;
}

static void topic_unbind(route_exchange *ex, route_binding *b)
{
    topic_node *n = b->type_data;

    route_vec_remove(&n->bindings, b);
    prune(ex->state, n);
}

typedef struct topic_walk {
    route_run *run;
    const route_map *edges;
    const route_word *words;
    uint32_t nwords;
    size_t matched;
} topic_walk;

static void walk(topic_walk *w, topic_node *n, uint32_t i);

/* `h` is a "#" node reached with words [i, nwords) left: it may swallow
 * any number of them, so its children continue at every j >= i. */
static void walk_hash(topic_walk *w, topic_node *h, uint32_t i)
{
    uint32_t from = h->memo_gen == w->run->gen ? h->memo_from : w->nwords + 1;
    uint32_t j;

    assert(h->hash == NULL);
    if (i >= from)
        return;
    h->memo_gen = w->run->gen;
    h->memo_from = i;
    for (j = i; j < from; j++)
        walk(w, h, j);
}

static void walk(topic_walk *w, topic_node *n, uint32_t i)
{
    if (n->hash != NULL)
        walk_hash(w, n->hash, i);
    if (i == w->nwords) {
        w->matched += route_run_collect_vec(w->run, &n->bindings);
        return;
    }
    if (n->star != NULL)
        walk(w, n->star, i + 1);
    if (n->nwords > 0) {
        edge_probe p = {n, w->words[i].word};
        topic_node *child =
            route_map_find(w->edges, edge_hash(n, w->words[i].hash), edge_eq, &p);
        if (child != NULL)
            walk(w, child, i + 1);
    }
}

static size_t topic_route(route_exchange *ex, route_run *run)
{
    topic_state *s = ex->state;
    topic_walk w = {.run = run, .edges = &s->edges};

    if (!route_run_words(run))
        return 0;
    w.words = run->t->words;
    w.nwords = (uint32_t)run->nwords;
    walk(&w, s->root, 0);
    return w.matched;
}

static void topic_destroy(route_exchange *ex)
{
    topic_state *s = ex->state;

    assert(node_unused(s->root) && s->edges.count == 0);
    route_vec_free(&s->root->bindings);
    free(s->root);
    route_map_free(&s->edges);
    free(s);
}

const route_type_ops route_topic_ops = {
    .type = ROUTE_TOPIC,
    .validate = NULL,
    .create = topic_create,
    .bind = topic_bind,
    .unbind = topic_unbind,
    .route = topic_route,
    .destroy = topic_destroy,
};
