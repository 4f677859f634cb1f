/* Private to queue/policy*.c: Erlang terms for RabbitMQ's validation texts.
 *
 * RabbitMQ words a bad policy with ~p of the offending JSON value (decoded
 * by its JSON library: strings are binaries, objects maps, null the atom
 * null), and ~p breaks terms that do not fit in 80 columns. pt_print is a
 * port of OTP's io_lib_pretty for the shapes these texts use: atomic
 * values, lists, tuples without an atom tag, and maps.
 */
#ifndef WARREN_POLICY_INTERNAL_H
#define WARREN_POLICY_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "../amqp/amqp.h"

typedef struct pt pt;
/* Owns every term made from it; pt_arena_free releases them all. Makers
 * return NULL after an allocation failed (and printing NULL prints ""). */
typedef struct pt_arena {
    pt *all;
    bool oom;
} pt_arena;

/* An AMQP field as RabbitMQ's JSON decoder would give it: ints, floats,
 * <<"binaries">>, true/false, null, lists (a list of printable latin1
 * codes is a "string", as ~p prints it) and #{maps}. */
pt *pt_json(pt_arena *a, const amqp_field *f);
pt *pt_binary(pt_arena *a, amqp_bytes b);
pt *pt_string(pt_arena *a, const char *s); /* an Erlang string: "..." */
pt *pt_int(pt_arena *a, long long v);
pt *pt_atom(pt_arena *a, const char *name); /* printed bare: none */
/* Containers of n terms (taken from kids; n may be 0 for a list). */
pt *pt_tuple(pt_arena *a, pt *const *kids, size_t n);
pt *pt_list(pt_arena *a, pt *const *kids, size_t n);
void pt_arena_free(pt_arena *a);
/* qsort order of amqp_bytes as Erlang orders binaries: byte-wise, a
 * prefix first. */
int pt_bytes_order(const void *x, const void *y);

/* Appends ~p of `t` to out (NUL-terminated, truncated at cap) as if the
 * line already held `col` characters. Returns the length written. */
size_t pt_print(const pt *t, size_t col, char *out, size_t cap);

#endif
