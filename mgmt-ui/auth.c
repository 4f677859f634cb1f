/* Who is asking (HTTP basic authentication, in one function) and what
 * they may see and change.
 *
 * The broker's access_login checks the password and loopback_users; the
 * user's tags decide which routes it may use. A request on the control socket without an Authorization header is the
 * local administrator (as rabbitmqctl needs no password); one that carries
 * the header is authenticated like a TCP request (warrenctl's
 * authenticate_user relies on that). loopback_users applies: the peer of a
 * TCP request is checked, the control socket is local.
 *
 * The route's tag is checked by the dispatcher; what depends on the object
 * is checked by the handlers with the functions below, which are RabbitMQ
 * 3.10's rabbit_mgmt_util is_authorized_* rules: a vhost (permissions in
 * it, or administrator; monitoring users also see it listed), another
 * user's connection or channel (is_authorized_user: read by monitoring
 * users, closed by administrators only), and the AMQP permission a change
 * needs. conformance/mgmt/authz_table.json is the whole table, route by
 * route and tag by tag, as recorded from RabbitMQ.
 */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "mgmt_int.h"

/* Standard base64 (padding optional); returns the decoded length or -1. */
static int base64_decode(const char *in, uint8_t *out, size_t cap)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;
    for (; *in && *in != '='; in++) {
        const char *p = strchr(alphabet, *in);
        if (!p || !*in)
            return -1;
        acc = acc << 6 | (uint32_t)(p - alphabet);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (n == cap)
                return -1;
            out[n++] = (uint8_t)(acc >> bits);
        }
    }
    return (int)n;
}

/* The broker's tag bits as this module's. */
static unsigned tags_of(unsigned access_tags)
{
    return (access_tags & ACCESS_TAG_ADMINISTRATOR ? TAG_ADMINISTRATOR : 0) |
           (access_tags & ACCESS_TAG_MONITORING ? TAG_MONITORING : 0) |
           (access_tags & ACCESS_TAG_POLICYMAKER ? TAG_POLICYMAKER : 0) |
           (access_tags & ACCESS_TAG_MANAGEMENT ? TAG_MANAGEMENT : 0);
}

bool mgmt_authenticate(mgmt_req *r, bool *had_credentials)
{
    const char *h = mgmt_header(r, "Authorization");
    *had_credentials = h != NULL;
    if (!h && r->control) {
        snprintf(r->user.name, sizeof r->user.name, "warrenctl");
        r->user.tags = TAG_ADMINISTRATOR;
        r->user.local = true;
        return true;
    }
    if (!h || strncasecmp(h, "Basic ", 6) != 0)
        return false;
    uint8_t raw[512];
    int n = base64_decode(h + 6, raw, sizeof raw);
    const uint8_t *colon = n > 0 ? memchr(raw, ':', (size_t)n) : NULL;
    if (!colon)
        return false;
    amqp_bytes user = {raw, (uint32_t)(colon - raw)};
    amqp_bytes pass = {colon + 1, (uint32_t)(n - (colon + 1 - raw))};
    bool local = r->control || server_sockaddr_loopback(http_req_peer(r->req));
    char why[256];
    const access_user *u = access_login(server_access(r->s), user, pass, local, why, sizeof why);
    if (!u) {
        log_msg(LOG_WARNING, "HTTP access denied: %s", why);
        return false;
    }
    snprintf(r->user.name, sizeof r->user.name, "%s", access_user_name(u));
    r->user.tags = tags_of(access_user_tag_flags(u));
    return true;
}

bool mgmt_vhost_allowed(mgmt_req *r, vhost *v)
{
    return (r->user.tags & TAG_ADMINISTRATOR) ||
           access_find_perms(server_access(r->s), AMQP_CSTR(r->user.name),
                             AMQP_CSTR(vhost_name(v))) != NULL;
}

int mgmt_permission(mgmt_req *r, vhost *v, access_kind kind, amqp_bytes name)
{
    if (r->user.local)
        return 1;
    access_control *a = server_access(r->s);
    const access_perms *p =
        access_find_perms(a, AMQP_CSTR(r->user.name), AMQP_CSTR(vhost_name(v)));
    return !p ? -1 : access_allowed(a, p, kind, name);
}

bool mgmt_permission_check(mgmt_req *r, vhost *v, access_kind kind, amqp_bytes name)
{
    if (mgmt_permission(r, v, kind, name) == 1)
        return true;
    mgmt_error(r, 401, "not_authorised", "Access refused.");
    return false;
}

bool mgmt_lists_all_vhosts(mgmt_req *r)
{
    return r->user.tags & (TAG_ADMINISTRATOR | TAG_MONITORING);
}

bool mgmt_vhost_visible(mgmt_req *r, vhost *v)
{
    return mgmt_lists_all_vhosts(r) || mgmt_vhost_allowed(r, v);
}

bool mgmt_sees_user(mgmt_req *r, const char *user)
{
    return (r->user.tags & (TAG_ADMINISTRATOR | TAG_MONITORING)) ||
           strcmp(user, r->user.name) == 0;
}

bool mgmt_user_object_allowed(mgmt_req *r, const char *owner)
{
    if (r->method != HTTP_DELETE)
        return mgmt_sees_user(r, owner);
    return (r->user.tags & TAG_ADMINISTRATOR) || strcmp(owner, r->user.name) == 0;
}
