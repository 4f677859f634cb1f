/* delay: the x-delayed-message exchange type (RabbitMQ's
 * rabbitmq-delayed-message-exchange plugin) as far as routing goes.
 *
 * A delayed exchange is an exchange of its x-delayed-type (direct, fanout,
 * topic, headers) -- same ops, same binding index -- with `delayed` set.
 * When the router takes one off its work list and the message's x-delay
 * header asks for a delay, the exchange routes nothing now: it is put on
 * the table's held list (exchange, delay) for the caller, which keeps the
 * message and routes it through the exchange again at its deadline. As in
 * the plugin, that exchange then matches nothing for this message, so a
 * mandatory publish is returned at once (312 NO_ROUTE) although the message
 * is delivered later. Unlike the plugin (its issue #36, acknowledged
 * upstream), a held message does not go to the alternate exchange now: the
 * alternate exchange applies at the deadline, when nothing matches then.
 *
 * x-delay, as the plugin's get_delay: an integer of any AMQP width; a
 * longstr holding a decimal integer; a float or double, truncated. The
 * message is held when 0 < delay <= 2^32-1 ms (Erlang's longest timer);
 * otherwise -- negative, zero, too long, missing, another type, or a
 * string that is not an integer (which crashes the plugin's channel) -- it
 * is routed at once.
 */
#include <math.h>
#include <stdlib.h>

#include "route_int.h"

static bool string_int(amqp_bytes s, int64_t *out)
{
    uint32_t i = 0;
    bool neg = false;
    int64_t v = 0;

    if (s.len > 0 && (s.ptr[0] == '-' || s.ptr[0] == '+'))
        neg = s.ptr[i++] == '-';
    if (i == s.len)
        return false;
    for (; i < s.len; i++) {
        if (s.ptr[i] < '0' || s.ptr[i] > '9')
            return false;
        if (v > (INT64_MAX - 9) / 10)
            v = INT64_MAX / 10; /* saturates: far beyond any delay held */
        v = v * 10 + (s.ptr[i] - '0');
    }
    *out = neg ? -v : v;
    return true;
}

static bool float_int(double d, int64_t *out)
{
    if (!isfinite(d))
        return false;
    *out = d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : (int64_t)d; /* trunc */
    return true;
}

bool route_delay_of(amqp_bytes headers, int64_t *delay)
{
    amqp_field f;

    if (headers.len == 0 || !amqp_table_get(headers, "x-delay", &f))
        return false;
    switch (f.type) {
    case 'b': case 'B': case 's': case 'u': case 'I': case 'i': case 'l':
        *delay = f.v.i;
        return true;
    case 'S': return string_int(f.v.bytes, delay);
    case 'f': return float_int(f.v.f, delay);
    case 'd': return float_int(f.v.d, delay);
    default: return false;
    }
}

bool route_delay_holds(int64_t delay) { return delay > 0 && delay <= ROUTE_DELAY_MAX; }

bool route_exchange_delayed(const route_exchange *ex) { return ex->delayed; }

const route_hold *route_held(const route_table *t, size_t *n)
{
    *n = t->nheld;
    return t->held;
}

void route_held_clear(route_table *t) { t->nheld = 0; }

bool route_run_hold(route_run *run, route_exchange *x)
{
    route_table *t = run->t;
    int64_t d;

    if (!route_delay_of(run->headers, &d) || !route_delay_holds(d))
        return false;
    for (size_t i = 0; i < t->nheld; i++)
        if (t->held[i].exchange == x)
            return true; /* held already by this message's route with another key (CC) */
    if (t->nheld == t->held_cap) {
        size_t cap = t->held_cap ? t->held_cap * 2 : 4;
        route_hold *h = realloc(t->held, cap * sizeof *h);
        if (h == NULL)
            return false; /* out of memory: routed at once rather than lost */
        t->held = h;
        t->held_cap = cap;
    }
    t->held[t->nheld++] = (route_hold){.exchange = x, .delay_ms = (uint32_t)d};
    return true;
}

/* The plugin's validate/1: x-delayed-type names an existing type other
 * than itself (checked with rabbit_exchange:check_type's 503). */
const route_type_ops *route_delayed_base(route_table *t, const route_exchange_spec *spec,
                                         const route_type_ops *(*lookup)(amqp_bytes),
                                         amqp_error *err)
{
    amqp_field f;
    const route_type_ops *ops;

    (void)t;
    if (!amqp_table_get(spec->arguments, "x-delayed-type", &f) ||
        (f.type != 'S' && f.type != 'x')) {
        amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                  "Invalid argument, 'x-delayed-type' must be an existing exchange type");
        return NULL;
    }
    if (amqp_bytes_equal_cstr(f.v.bytes, ROUTE_DELAYED_NAME)) {
        amqp_fail(err, AMQP_PRECONDITION_FAILED, AMQP_EXCHANGE_DECLARE,
                  "Invalid argument, 'x-delayed-message' can't be used for 'x-delayed-type'");
        return NULL;
    }
    if ((ops = lookup(f.v.bytes)) == NULL)
        amqp_fail(err, AMQP_COMMAND_INVALID, AMQP_EXCHANGE_DECLARE,
                  "unknown exchange type '%.*s'", (int)f.v.bytes.len, (const char *)f.v.bytes.ptr);
    return ops;
}
