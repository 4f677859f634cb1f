/* Values as rabbitmqctl prints them. rabbitmqctl's table formatter prints an
 * info item with Erlang's ~tp after a little prettifying: binaries bare,
 * atoms bare, lists of items as "[a, b]", AMQP field tables as
 * [{"key",Value},...] (Erlang strings in quotes, nested tables as lists,
 * void as undefined), floats in Erlang's shortest form. Its JSON formatter
 * keeps AMQP tables typed: [["key","signedint",1],...]. The API's JSON has
 * lost the AMQP types, so they are inferred from the JSON type (a string is
 * longstr, an integer signedint or long by size, a real double). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wctl_internal.h"

/* ---- numbers ---------------------------------------------------------------- */

/* Shortest digits that read back as d: "12345", and the decimal exponent of
 * the first digit (d = 1.2345e<exp>). */
static void shortest_digits(double d, char *digits, int *exp)
{
    char tmp[40];
    for (int prec = 0; prec <= 16; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    char *e = strchr(tmp, 'e');
    *exp = atoi(e + 1);
    int n = 0;
    for (char *p = tmp; p < e; p++)
        if (*p >= '0' && *p <= '9')
            digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0')
        n--;
    digits[n] = '\0';
}

void wctl_format_float(wctl_buf *out, double d)
{
    if (!isfinite(d)) { /* JSON cannot carry these; print something readable */
        wctl_buf_puts(out, isnan(d) ? "nan" : d > 0 ? "inf" : "-inf");
        return;
    }
    char digits[40], fixed[400], sci[64];
    int exp, n;
    if (signbit(d))
        wctl_buf_puts(out, "-");
    d = fabs(d);
    if (d == 0) {
        wctl_buf_puts(out, "0.0");
        return;
    }
    shortest_digits(d, digits, &exp);
    n = (int)strlen(digits);
    snprintf(sci, sizeof sci, "%c.%se%d", digits[0], n > 1 ? digits + 1 : "0", exp);
    wctl_buf f = {0};
    if (exp >= 0) { /* digits, zeros up to the point, then the rest or 0 */
        int ilen = exp + 1;
        wctl_buf_append(&f, digits, (size_t)(ilen < n ? ilen : n));
        for (int i = n; i < ilen; i++)
            wctl_buf_puts(&f, "0");
        wctl_buf_puts(&f, ".");
        wctl_buf_puts(&f, ilen < n ? digits + ilen : "0");
    } else {
        wctl_buf_puts(&f, "0.");
        for (int i = 1; i < -exp; i++)
            wctl_buf_puts(&f, "0");
        wctl_buf_puts(&f, digits);
    }
    snprintf(fixed, sizeof fixed, "%s", wctl_buf_str(&f));
    wctl_buf_free(&f);
    /* Erlang shows floats of 2^53 and above in scientific notation, since
     * integers there are no longer exact; otherwise the shorter form. */
    bool use_sci = d >= 9007199254740992.0 || strlen(sci) < strlen(fixed);
    wctl_buf_puts(out, use_sci ? sci : fixed);
}

/* ---- Erlang terms ------------------------------------------------------------- */

/* Next code point of UTF-8 text (invalid bytes read as Latin-1). */
static uint32_t next_cp(const unsigned char **p)
{
    const unsigned char *s = *p;
    int len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 : (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
    uint32_t cp = len == 1 ? s[0] : len == 2 ? s[0] & 31 : len == 3 ? s[0] & 15 : s[0] & 7;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            len = 0;
            break;
        }
        cp = cp << 6 | (s[i] & 63);
    }
    if (len == 0) {
        *p = s + 1;
        return s[0];
    }
    *p = s + len;
    return cp;
}

static const char *erl_escape(uint32_t cp)
{
    switch (cp) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\f': return "\\f";
    case '\b': return "\\b";
    case '\v': return "\\v";
    case 27: return "\\e";
    default: return NULL;
    }
}

/* io_lib:printable_unicode_list/1's idea of a printable character. */
static bool erl_printable(uint32_t cp)
{
    return (cp >= 32 && cp < 127) || (cp >= 160 && cp < 0xD800) || (cp > 0xDFFF && cp < 0xFFFE) ||
           (cp > 0xFFFF && cp <= 0x10FFFF) || (cp != '"' && cp != '\\' && erl_escape(cp));
}

/* A string as ~tp prints a charlist: "..." when printable, [] when empty,
 * else the list of its code points. */
static void erl_string(wctl_buf *out, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    bool printable = *p != 0;
    while (*p && printable)
        printable = erl_printable(next_cp(&p));
    if (!printable) {
        wctl_buf_puts(out, "[");
        for (p = (const unsigned char *)s; *p;) {
            bool first = p == (const unsigned char *)s;
            uint32_t cp = next_cp(&p);
            wctl_buf_printf(out, "%s%u", first ? "" : ",", cp);
        }
        wctl_buf_puts(out, "]");
        return;
    }
    wctl_buf_puts(out, "\"");
    for (p = (const unsigned char *)s; *p;) {
        const unsigned char *start = p;
        const char *esc = erl_escape(next_cp(&p));
        if (esc)
            wctl_buf_puts(out, esc);
        else
            wctl_buf_append(out, (const char *)start, (size_t)(p - start));
    }
    wctl_buf_puts(out, "\"");
}

static void erl_number(wctl_buf *out, const json_t *v)
{
    if (json_is_integer(v))
        wctl_buf_printf(out, "%lld", (long long)json_integer_value(v));
    else
        wctl_format_float(out, json_real_value(v));
}

static void erl_table(wctl_buf *out, const json_t *obj);

/* "[e1<sep>e2...]", each element through `each`. */
static void erl_list(wctl_buf *out, const json_t *arr, const char *sep,
                     void (*each)(wctl_buf *, const json_t *))
{
    size_t i;
    const json_t *e;
    wctl_buf_puts(out, "[");
    json_array_foreach(arr, i, e) {
        if (i)
            wctl_buf_puts(out, sep);
        each(out, e);
    }
    wctl_buf_puts(out, "]");
}

/* A value inside an AMQP table, as ~tp prints the prettified term. */
static void erl_term(wctl_buf *out, const json_t *v)
{
    if (json_is_string(v)) {
        erl_string(out, json_string_value(v));
    } else if (json_is_number(v)) {
        erl_number(out, v);
    } else if (json_is_boolean(v)) {
        wctl_buf_puts(out, json_is_true(v) ? "true" : "false");
    } else if (json_is_object(v)) {
        erl_table(out, v);
    } else if (json_is_array(v)) {
        erl_list(out, v, ",", erl_term);
    } else {
        wctl_buf_puts(out, "undefined");
    }
}

static void erl_table(wctl_buf *out, const json_t *obj)
{
    const char *k;
    json_t *v;
    bool first = true;
    wctl_buf_puts(out, "[");
    json_object_foreach((json_t *)obj, k, v) {
        wctl_buf_puts(out, first ? "{" : ",{");
        erl_string(out, k);
        wctl_buf_puts(out, ",");
        erl_term(out, v);
        wctl_buf_puts(out, "}");
        first = false;
    }
    wctl_buf_puts(out, "]");
}

/* ---- table cells ------------------------------------------------------------------ */

static void plain_cell(wctl_buf *out, const json_t *v)
{
    if (json_is_string(v)) {
        wctl_buf_puts(out, json_string_value(v));
    } else if (json_is_number(v)) {
        erl_number(out, v);
    } else if (json_is_boolean(v)) {
        wctl_buf_puts(out, json_is_true(v) ? "true" : "false");
    } else if (json_is_array(v)) {
        erl_list(out, v, ", ", plain_cell);
    } else if (json_is_object(v)) {
        erl_table(out, v);
    } /* null: rabbitmqctl prints '' and undefined items as nothing */
}

/* "AMQP 0-9-1" -> 0, 9, 1; false for anything else. */
static bool protocol_version(const json_t *v, int ver[3])
{
    const char *s = json_string_value(v);
    char tail;
    return s && sscanf(s, "AMQP %d-%d-%d%c", &ver[0], &ver[1], &ver[2], &tail) == 3;
}

static int dump_to_buf(const char *s, size_t n, void *data)
{
    wctl_buf_append(data, s, n);
    return 0;
}

static void compact_json(wctl_buf *out, const json_t *v, size_t flags)
{
    json_dump_callback(v, dump_to_buf, out, JSON_ENCODE_ANY | JSON_COMPACT | flags);
}

/* A policy definition is shown as JSON text when it is an object; a
 * runtime parameter's value whatever it is. */
static bool as_json_text(const json_t *v, wctl_kind kind)
{
    return kind == WCTL_KIND_JSON_TEXT ? v != NULL : json_is_object(v);
}

void wctl_format_cell(wctl_buf *out, const json_t *v, wctl_kind kind, const char *constant)
{
    int ver[3];
    const char *k;
    json_t *e;
    switch (kind) {
    case WCTL_KIND_CONSTANT:
        wctl_buf_puts(out, constant);
        return;
    case WCTL_KIND_TABLE:
        if (json_is_null(v))
            wctl_buf_puts(out, "[]");
        else if (v)
            erl_term(out, v);
        return;
    case WCTL_KIND_PROTOCOL:
        if (protocol_version(v, ver))
            wctl_buf_printf(out, "{%d,%d,%d}", ver[0], ver[1], ver[2]);
        else
            plain_cell(out, v);
        return;
    case WCTL_KIND_NODE_MAP:
        if (!json_is_object(v))
            break;
        wctl_buf_puts(out, "[");
        bool first = true;
        json_object_foreach((json_t *)v, k, e) {
            wctl_buf_printf(out, "%s{%s, ", first ? "" : ", ", k);
            plain_cell(out, e);
            wctl_buf_puts(out, "}");
            first = false;
        }
        wctl_buf_puts(out, "]");
        return;
    case WCTL_KIND_DEFINITION:
    case WCTL_KIND_JSON_TEXT:
        if (as_json_text(v, kind)) {
            compact_json(out, v, kind == WCTL_KIND_DEFINITION ? JSON_SORT_KEYS : 0);
            return;
        }
        break;
    case WCTL_KIND_PLAIN:
        break;
    }
    plain_cell(out, v);
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void typed_table_json(wctl_buf *out, const json_t *obj);

/* The AMQP type rabbitmqctl would name for a JSON value. */
static const char *amqp_type(const json_t *v)
{
    if (json_is_string(v))
        return "longstr";
    if (json_is_boolean(v))
        return "bool";
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        return i >= INT32_MIN && i <= INT32_MAX ? "signedint" : "long";
    }
    if (json_is_real(v))
        return "double";
    if (json_is_object(v))
        return "table";
    if (json_is_array(v))
        return "array";
    return "void";
}

/* A typed value. rabbitmqctl's JSON encoder turns an AMQP array (a list of
 * {Type, Value}) into an object keyed by type, so that is what it prints. */
static void typed_value_json(wctl_buf *out, const json_t *v)
{
    if (json_is_object(v)) {
        typed_table_json(out, v);
    } else if (json_is_array(v)) {
        size_t i;
        const json_t *e;
        if (json_array_size(v) == 0) {
            wctl_buf_puts(out, "[]");
            return;
        }
        wctl_buf_puts(out, "{");
        json_array_foreach(v, i, e) {
            wctl_buf_printf(out, "%s\"%s\":", i ? "," : "", amqp_type(e));
            typed_value_json(out, e);
        }
        wctl_buf_puts(out, "}");
    } else if (json_is_null(v)) {
        wctl_buf_puts(out, "\"undefined\"");
    } else if (json_is_real(v)) {
        wctl_format_float(out, json_real_value(v));
    } else {
        compact_json(out, v, 0);
    }
}

static void typed_table_json(wctl_buf *out, const json_t *obj)
{
    const char *k;
    json_t *v;
    bool first = true;
    wctl_buf_puts(out, "[");
    json_object_foreach((json_t *)obj, k, v) {
        wctl_buf_puts(out, first ? "[" : ",[");
        json_t *key = json_string(k);
        compact_json(out, key, 0);
        json_decref(key);
        wctl_buf_printf(out, ",\"%s\",", amqp_type(v));
        typed_value_json(out, v);
        wctl_buf_puts(out, "]");
        first = false;
    }
    wctl_buf_puts(out, "]");
}

static void plain_json(wctl_buf *out, const json_t *v)
{
    if (!v || json_is_null(v))
        wctl_buf_puts(out, "\"\"");
    else if (json_is_real(v))
        wctl_format_float(out, json_real_value(v));
    else
        compact_json(out, v, 0);
}

static void string_json(wctl_buf *out, const char *s)
{
    json_t *j = json_string(s);
    if (!j) /* not UTF-8: keep the bytes readable rather than drop them */
        j = json_stringn_nocheck(s, strlen(s));
    compact_json(out, j, 0);
    json_decref(j);
}

void wctl_format_json(wctl_buf *out, const json_t *v, wctl_kind kind, const char *constant)
{
    int ver[3];
    wctl_buf text = {0};
    switch (kind) {
    case WCTL_KIND_CONSTANT:
        string_json(out, constant);
        return;
    case WCTL_KIND_TABLE:
        if (json_is_object(v))
            typed_table_json(out, v);
        else if (json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
            wctl_buf_puts(out, "[]");
        else
            plain_json(out, v);
        return;
    case WCTL_KIND_PROTOCOL:
        if (protocol_version(v, ver)) {
            wctl_buf_printf(out, "[%d,%d,%d]", ver[0], ver[1], ver[2]);
            return;
        }
        break;
    case WCTL_KIND_DEFINITION:
    case WCTL_KIND_JSON_TEXT:
        if (as_json_text(v, kind)) {
            compact_json(&text, v, kind == WCTL_KIND_DEFINITION ? JSON_SORT_KEYS : 0);
            string_json(out, wctl_buf_str(&text));
            wctl_buf_free(&text);
            return;
        }
        break;
    case WCTL_KIND_NODE_MAP:
    case WCTL_KIND_PLAIN:
        break;
    }
    plain_json(out, v);
}
