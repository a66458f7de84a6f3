/* collectives: small socket helpers with deadlines (private). Deadlines are res-free
 * monotonic seconds from coll_sock_now(). */
#ifndef FABENCH_COLL_SOCK_H
#define FABENCH_COLL_SOCK_H

#include <stddef.h>

double coll_sock_now(void);
/* Listens on host:port (port 0: any); writes the bound port. host NULL or "": all addresses. */
int coll_sock_listen(const char *host, int port, int backlog, int *fd, int *bound_port, char *err,
                     size_t cap);
/* A listening socket handed down by the launcher (as text, from the environment): 0 if it is one
 * bound to port, and then it closes on exec; -1 otherwise. */
int coll_sock_adopt_listener(const char *fd_text, int port, int *fd);
/* Accepts one connection before the deadline. */
int coll_sock_accept(int lfd, double deadline, int *fd, char *err, size_t cap);
/* Connects to host:port, retrying refused connections until the deadline. On failure errno
 * holds the last cause seen (ECONNREFUSED: nothing listens there), and err says it. */
int coll_sock_connect(const char *host, int port, double deadline, int *fd, char *err, size_t cap);
/* Sends/receives exactly n bytes before the deadline (blocking or non-blocking fd). Returns 0,
 * -1 on error/timeout with the cause in err; a closed peer is reported as such. */
int coll_sock_send_all(int fd, const void *buf, size_t n, double deadline, char *err, size_t cap);
int coll_sock_recv_all(int fd, void *buf, size_t n, double deadline, char *err, size_t cap);
/* TCP_NODELAY and (when > 0) socket buffer sizes. */
void coll_sock_tune(int fd, int bufsize);
int coll_sock_set_nonblock(int fd);
/* Local address of a connected socket, as text. */
int coll_sock_local_addr(int fd, char *out, size_t cap);
/* "host:port" -> host, port. Accepts "[v6]:port". */
int coll_sock_split(const char *hostport, char *host, size_t hcap, int *port);

#endif
