/* erl_format: field values printed the way RabbitMQ's error texts print
 * them, which is Erlang's ~p (and ~s for binaries) over the terms
 * rabbit_binary_parser makes: a longstr is <<"abc">>, a bool true, a
 * decimal {Scale,Value}, void undefined, a table a list of
 * {Key,Type,Value} and an array a list of {Type,Value}.
 *
 * A binary is a string when every byte is one ~p prints as a character:
 * printable latin1 (32..126, 160..255) or one of its escapes; so UTF-8
 * "é" prints as its two bytes between quotes and "€" (a byte in 128..159)
 * as <<226,130,172>>. queue/policy_term.c prints policy texts with the
 * same rules.
 *
 * Only error paths use this. Output is truncated to the caller's buffer;
 * ~p's line breaking of long terms is not reproduced.
 */
#include <assert.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp.h"

typedef struct out {
    char *buf;
    size_t cap, len; /* len < cap; buf[len] == 0 */
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Nothing more fits: loops over a value's bytes or entries stop here, so a
 * 16 MiB binary printed into 160 bytes costs 160 bytes' work. */
static bool full(const out *o) { return o->len + 1 >= o->cap; }

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n < o->cap - o->len ? (size_t)n : o->cap - o->len - 1;
}

const char *amqp_erl_type_name(uint8_t tag)
{
    switch (tag) {
    case 'b': return "byte";
    case 'B': return "unsignedbyte";
    case 's': return "short";
    case 'u': return "unsignedshort";
    case 'I': return "signedint";
    case 'i': return "unsignedint";
    case 'l': return "long";
    case 'L': return "unsignedlong";
    case 'f': return "float";
    case 'd': return "double";
    case 'D': return "decimal";
    case 't': return "bool";
    case 'S': return "longstr";
    case 'x': return "binary";
    case 'F': return "table";
    case 'A': return "array";
    case 'T': return "timestamp";
    case 'V': return "void";
    default: return "unknown";
    }
}

/* ---- binaries ----------------------------------------------------------- */

static const char *escape_of(uint8_t c)
{
    switch (c) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\v': return "\\v";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case 27: return "\\e";
    case '"': return "\\\"";
    case '\\': return "\\\\";
    default: return NULL;
    }
}

bool amqp_erl_printable(unsigned c)
{
    return (c >= 32 && c <= 126) || (c >= 160 && c <= 255) || escape_of((uint8_t)c) != NULL;
}

/* "..." with ~p's escapes; every byte printable. */
static void put_string(out *o, amqp_bytes s)
{
    uint32_t i;

    put(o, "\"");
    for (i = 0; i < s.len && !full(o); i++) {
        const char *e = escape_of(s.ptr[i]);
        if (e != NULL)
            put(o, "%s", e);
        else
            put(o, "%c", s.ptr[i]);
    }
    put(o, "\"");
}

char *amqp_erl_string(amqp_bytes s, char *buf, size_t cap)
{
    out o = {buf, cap, 0};

    assert(cap > 0);
    buf[0] = 0;
    put_string(&o, s);
    return buf;
}

static void put_binary(out *o, amqp_bytes b)
{
    uint32_t i;
    bool printable = b.len > 0;

    for (i = 0; printable && i < b.len; i++)
        printable = amqp_erl_printable(b.ptr[i]);
    put(o, "<<");
    if (printable)
        put_string(o, b);
    for (i = 0; !printable && i < b.len && !full(o); i++)
        put(o, i ? ",%u" : "%u", b.ptr[i]);
    put(o, ">>");
}

/* ---- floats ------------------------------------------------------------- */

/* Room for the 17 significant digits a double can need, and a NUL. */
#define DIGITS_MAX 17

/* The shortest decimal digits that read back as d (finite, not zero),
 * without dot or trailing zeros; *exp10 is the exponent of the first
 * digit. "%.*e" of a finite double is "-d.ddde-ddd" at most 25 bytes for
 * precision 17 -- the scan below stops at the buffer's end and at
 * DIGITS_MAX digits all the same, so no input can walk off either. */
static int shortest_digits(double d, char digits[DIGITS_MAX + 1], int *exp10)
{
    char tmp[48];
    const char *e;
    int prec, len = 0;

    assert(isfinite(d) && d != 0);
    for (prec = 1; prec < DIGITS_MAX; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
    e = strchr(tmp, 'e');
    for (const char *p = tmp; *p && p != e && len < DIGITS_MAX; p++)
        if (*p >= '0' && *p <= '9')
            digits[len++] = *p;
    *exp10 = e ? atoi(e + 1) : 0;
    while (len > 1 && digits[len - 1] == '0')
        len--;
    digits[len] = 0;
    return len;
}

static void put_zeros(out *o, int n)
{
    while (n-- > 0)
        put(o, "0");
}

/* io_lib_format's shortest round-trip form (insert_decimal/3): "1.5",
 * "0.1", "100.0", "1.0e10", "1.2345e-7", whichever of plain and exponent
 * notation is shorter. The value is digits * 10^place. */
static void put_float(out *o, double d)
{
    char digits[DIGITS_MAX + 1], expl[16];
    int exp10, len, place, exp_cost;

    /* Erlang has no NaN or infinity, and the codec refuses tables holding
     * them; should one reach here anyway, it prints as a word. */
    if (isnan(d)) {
        put(o, "nan");
        return;
    }
    if (isinf(d)) {
        put(o, "%s", d < 0 ? "-inf" : "inf");
        return;
    }
    if (d == 0) {
        put(o, "%s", signbit(d) ? "-0.0" : "0.0");
        return;
    }
    len = shortest_digits(d, digits, &exp10);
    place = exp10 - (len - 1);
    snprintf(expl, sizeof expl, "%d", exp10);
    exp_cost = (int)strlen(expl) + 2;
    if (d < 0)
        put(o, "-");
    if (place < 0 && exp10 >= 0) {
        put(o, "%.*s.%s", len + place, digits, digits + len + place);
    } else if (place < 0 && 2 - place - len <= exp_cost) {
        put(o, "0.");
        put_zeros(o, -place - len);
        put(o, "%s", digits);
    } else if (place >= 0 && exp_cost + (len == 1) >= place + 2 && fabs(d) < 9007199254740992.0) {
        put(o, "%s", digits);
        put_zeros(o, place);
        put(o, ".0");
    } else if (len == 1) {
        put(o, "%s.0e%s", digits, expl);
    } else {
        put(o, "%c.%se%s", digits[0], digits + 1, expl);
    }
}

/* ---- terms -------------------------------------------------------------- */

static void put_term(out *o, const amqp_field *f);

static void put_container(out *o, const amqp_field *f)
{
    amqp_iter it;
    amqp_bytes key = {0}; /* set by amqp_table_next; LTO cannot tell */
    amqp_field v;
    bool first = true;

    put(o, "[");
    amqp_iter_init(&it, f->v.bytes);
    while (!full(o) && (f->type == 'F' ? amqp_table_next(&it, &key, &v) : amqp_array_next(&it, &v))) {
        put(o, first ? "{" : ",{");
        first = false;
        if (f->type == 'F') {
            put_binary(o, key);
            put(o, ",");
        }
        put(o, "%s,", amqp_erl_type_name(v.type));
        put_term(o, &v);
        put(o, "}");
    }
    put(o, "]");
}

static void put_term(out *o, const amqp_field *f)
{
    switch (f->type) {
    case 'S': case 'x': put_binary(o, f->v.bytes); break;
    case 't': put(o, "%s", f->v.i ? "true" : "false"); break;
    case 'f': put_float(o, f->v.f); break;
    case 'd': put_float(o, f->v.d); break;
    case 'D': put(o, "{%u,%u}", f->v.decimal.scale, (unsigned)f->v.decimal.value); break;
    case 'V': put(o, "undefined"); break;
    case 'F': case 'A': put_container(o, f); break;
    case 'T': put(o, "%llu", (unsigned long long)f->v.i); break;
    default: put(o, "%lld", (long long)f->v.i); break;
    }
}

char *amqp_erl_term(const amqp_field *f, char *buf, size_t cap)
{
    out o = {buf, cap, 0};

    assert(cap > 0);
    buf[0] = 0;
    put_term(&o, f);
    return buf;
}

char *amqp_erl_value(const amqp_field *f, char *buf, size_t cap)
{
    out o = {buf, cap, 0};

    assert(cap > 0);
    buf[0] = 0;
    if (f->type == 'S' || f->type == 'x')
        put(&o, "%.*s", (int)f->v.bytes.len, (const char *)f->v.bytes.ptr);
    else
        put_term(&o, f);
    return buf;
}
