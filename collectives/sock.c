/* Socket helpers with deadlines, shared by the bootstrap and the tcp transport. */
#include "sock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

double coll_sock_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int coll_sock_ms_left(double deadline) {
  double left = deadline - coll_sock_now();
  if (left <= 0) return 0;
  return left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
}

int coll_sock_split(const char *hostport, char *host, size_t hcap, int *port) {
  const char *colon;
  const char *h = hostport;
  size_t hl;
  if (hostport[0] == '[') {
    const char *rb = strchr(hostport, ']');
    if (!rb || rb[1] != ':') return -1;
    h = hostport + 1;
    hl = (size_t)(rb - h);
    colon = rb + 1;
  } else {
    colon = strrchr(hostport, ':');
    if (!colon) return -1;
    hl = (size_t)(colon - hostport);
  }
  if (hl == 0 || hl >= hcap) return -1;
  char *end;
  long p = strtol(colon + 1, &end, 10);
  if (*end || end == colon + 1 || p < 1 || p > 65535) return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  *port = (int)p;
  return 0;
}

int coll_sock_set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void coll_sock_tune(int fd, int bufsize) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (bufsize > 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufsize, sizeof bufsize);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufsize, sizeof bufsize);
  }
}

int coll_sock_listen(const char *host, int port, int backlog, int *fd, int *bound_port, char *err,
                     size_t cap) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  int rc = getaddrinfo(host && *host ? host : NULL, ps, &hints, &res);
  if (rc != 0) {
    snprintf(err, cap, "cannot resolve listen address '%s': %s", host ? host : "*", gai_strerror(rc));
    return -1;
  }
  int s = -1, saved = 0;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
    if (s < 0) continue;
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, ai->ai_addr, ai->ai_addrlen) == 0 && listen(s, backlog) == 0) break;
    saved = errno;
    close(s);
    s = -1;
  }
  freeaddrinfo(res);
  if (s < 0) {
    snprintf(err, cap, "cannot listen on %s:%d: %s", host && *host ? host : "*", port,
             strerror(saved ? saved : EADDRNOTAVAIL));
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  getsockname(s, (struct sockaddr *)&ss, &sl);
  *bound_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                : ((struct sockaddr_in *)&ss)->sin_port);
  *fd = s;
  return 0;
}

int coll_sock_adopt_listener(const char *fd_text, int port, int *fd) {
  char *end;
  long v = strtol(fd_text, &end, 10);
  if (end == fd_text || *end || v < 3 || v > 1 << 20) return -1;
  int s = (int)v, on = 0;
  socklen_t ol = sizeof on;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (fcntl(s, F_SETFD, FD_CLOEXEC) != 0 || getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &on, &ol) != 0 || !on ||
      getsockname(s, (struct sockaddr *)&ss, &sl) != 0 ||
      (ss.ss_family != AF_INET && ss.ss_family != AF_INET6))
    return -1;
  int bound = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                             : ((struct sockaddr_in *)&ss)->sin_port);
  if (bound != port) return -1;
  *fd = s;
  return 0;
}

int coll_sock_accept(int lfd, double deadline, int *fd, char *err, size_t cap) {
  for (;;) {
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int ms = coll_sock_ms_left(deadline);
    if (ms == 0) {
      snprintf(err, cap, "timed out waiting for a connection");
      return -1;
    }
    int n = poll(&p, 1, ms);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(err, cap, "poll: %s", strerror(errno));
      return -1;
    }
    if (n == 0) continue;
    int s = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (s < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      snprintf(err, cap, "accept: %s", strerror(errno));
      return -1;
    }
    coll_sock_tune(s, 0); /* see coll_sock_connect */
    *fd = s;
    return 0;
  }
}

/* A connection to a local port nobody listens on can get that same port as its own ephemeral
 * one and connect to itself (TCP's simultaneous open): the port is then taken, and the rank that
 * was about to listen there fails with "Address already in use". */
static int sock_self_connected(int s) {
  struct sockaddr_storage a, b;
  socklen_t la = sizeof a, lb = sizeof b;
  memset(&a, 0, sizeof a);
  memset(&b, 0, sizeof b);
  return getsockname(s, (struct sockaddr *)&a, &la) == 0 && getpeername(s, (struct sockaddr *)&b, &lb) == 0 &&
         la == lb && memcmp(&a, &b, la) == 0;
}

int coll_sock_connect(const char *host, int port, double deadline, int *fd, char *err, size_t cap) {
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  char ps[16];
  snprintf(ps, sizeof ps, "%d", port);
  int rc = getaddrinfo(host, ps, &hints, &res);
  if (rc != 0) {
    snprintf(err, cap, "cannot resolve %s: %s", host, gai_strerror(rc));
    errno = EHOSTUNREACH; /* no address at all: never to be taken for a refusal */
    return -1;
  }
  /* the last answer a try got: a try the deadline cut short tells nothing, and must not turn
   * "refused every time" (a wrong port) into "timed out" (a slow network) */
  int last = 0;
  double start = coll_sock_now();
  for (;;) {
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (s < 0) {
        last = errno;
        continue;
      }
      int r = connect(s, ai->ai_addr, ai->ai_addrlen), cut = 0;
      if (r != 0 && errno == EINPROGRESS) {
        struct pollfd p = {.fd = s, .events = POLLOUT};
        int ms = coll_sock_ms_left(deadline), wait = ms < 1000 ? ms : 1000;
        int n = ms ? poll(&p, 1, wait) : 0;
        if (n == 1) {
          int soerr = 0;
          socklen_t sl = sizeof soerr;
          getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl);
          r = soerr ? -1 : 0;
          errno = soerr;
        } else {
          r = -1;
          errno = ETIMEDOUT;
          cut = wait < 1000; /* the deadline, not the peer, ended this try */
        }
      }
      if (r == 0 && sock_self_connected(s)) {
        r = -1;
        errno = ECONNREFUSED; /* nobody listens yet: retry, as for a refusal */
      }
      if (r == 0) {
        int fl = fcntl(s, F_GETFL);
        fcntl(s, F_SETFL, fl & ~O_NONBLOCK);
        /* every socket here carries framed messages written in parts (a header, then the
         * payload): with Nagle's algorithm the second part waits for the peer's ACK, which a
         * delayed ACK holds up to 40 ms */
        coll_sock_tune(s, 0);
        freeaddrinfo(res);
        *fd = s;
        return 0;
      }
      if (!cut || !last) last = errno;
      close(s);
    }
    double left = deadline - coll_sock_now();
    if (left <= 0) break;
    /* the listener may not be up yet: retry shortly */
    double nap = left < 0.05 ? left : 0.05;
    struct timespec ts = {0, (long)(nap * 1e9)};
    nanosleep(&ts, NULL);
  }
  freeaddrinfo(res);
  double took = coll_sock_now() - start;
  if (!last) last = ETIMEDOUT;
  if (last == ECONNREFUSED)
    snprintf(err, cap, "connection refused by %s:%d for %.3g s", host, port, took);
  else if (last == ETIMEDOUT)
    snprintf(err, cap, "no answer from %s:%d within %.3g s", host, port, took);
  else
    snprintf(err, cap, "cannot connect to %s:%d: %s (tried for %.3g s)", host, port, strerror(last), took);
  errno = last;
  return -1;
}

int coll_sock_send_all(int fd, const void *buf, size_t n, double deadline, char *err, size_t cap) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      struct pollfd pf = {.fd = fd, .events = POLLOUT};
      int ms = coll_sock_ms_left(deadline);
      if (ms == 0) {
        snprintf(err, cap, "timed out sending");
        return -1;
      }
      poll(&pf, 1, ms);
      continue;
    }
    snprintf(err, cap, "send failed: %s", strerror(errno));
    return -1;
  }
  return 0;
}

int coll_sock_recv_all(int fd, void *buf, size_t n, double deadline, char *err, size_t cap) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    if (r > 0) {
      p += r;
      n -= (size_t)r;
      continue;
    }
    if (r == 0) {
      snprintf(err, cap, "connection closed by the peer");
      return -1;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      struct pollfd pf = {.fd = fd, .events = POLLIN};
      int ms = coll_sock_ms_left(deadline);
      if (ms == 0) {
        snprintf(err, cap, "timed out receiving");
        return -1;
      }
      poll(&pf, 1, ms);
      continue;
    }
    snprintf(err, cap, "receive failed: %s", strerror(errno));
    return -1;
  }
  return 0;
}

int coll_sock_local_addr(int fd, char *out, size_t cap) {
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) return -1;
  return getnameinfo((struct sockaddr *)&ss, sl, out, (socklen_t)cap, NULL, 0, NI_NUMERICHOST) == 0
             ? 0
             : -1;
}
