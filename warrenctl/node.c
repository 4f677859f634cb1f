/* rabbitmqctl's node names ("rabbit@host"), for -n / --node: which host a
 * name means, and whether that host is this machine -- where warrenctl
 * talks to the broker over its control socket, as rabbitmqctl talks to a
 * local node with the Erlang cookie; any other host is reached through its
 * management HTTP API (client.c decides). */
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "warrenctl.h"

bool wctl_node_host(const char *node, char *host, size_t cap)
{
    const char *at = strchr(node, '@');
    return (size_t)snprintf(host, cap, "%s", at ? at + 1 : "") < cap;
}

static bool loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return false;
}

/* Every address the name resolves to is a loopback one (and there is one). */
static bool resolves_to_loopback(const char *host)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return false;
    bool all = res != NULL;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        all = all && loopback(a->ai_addr);
    freeaddrinfo(res);
    return all;
}

bool wctl_host_is_local(const char *host)
{
    char me[256] = "";
    if (!*host || strcasecmp(host, "localhost") == 0)
        return true;
    gethostname(me, sizeof me - 1);
    size_t short_len = strcspn(me, ".");
    if (*me && (strcasecmp(host, me) == 0 ||
                (strlen(host) == short_len && strncasecmp(host, me, short_len) == 0)))
        return true;
    return resolves_to_loopback(host);
}
