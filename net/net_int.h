/* net's private helpers, shared by its transports. */
#ifndef WARREN_NET_INT_H
#define WARREN_NET_INT_H

#include "net.h"

/* A socket's peer address, or its own when `local` (the address op of
 * socket transports). */
bool net_socket_address(int fd, bool local, struct sockaddr_storage *out);
/* Frees a socket transport's readiness events (either may be NULL) and
 * closes its descriptor (if >= 0): the end of tcp_close and tls_close. */
struct event;
void net_socket_close(struct event *rev, struct event *wev, int fd);
/* The implementation's TLS session (an SSL *), NULL when not TLS. */
void *transport_tls_session(const transport *t);

#endif
