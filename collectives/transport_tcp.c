/* tcp transport: sockets, S connections per peer (striping), non-blocking progress with poll,
 * TCP_NODELAY, and a framed header (magic, tag, length, sequence, check) validated before a
 * message is accepted. A receive reads header and payload with one recvmsg straight into the
 * user's buffer; a send writes both with one sendmsg: no staging copies. */
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "coll_internal.h"
#include "sock.h"

#define TCP_MAGIC 0x46425450u       /* "FBTP" */
#define TCP_HELLO_MAGIC 0x46425448u /* "FBTH" */
#define TCP_HELLO_S 5.0 /* how long one accepted connection may take to say hello */
#define TCP_STRIPE_MIN (128u * 1024u) /* smaller messages use one connection */
#define TCP_MAX_STREAMS 16
/* Idle waiting, when every rank of the host has a core: spin, then spin yielding the core,
 * and sleep in poll only after FABENCH_TCP_SPIN_US (default TCP_SPIN_S). Sleeping early costs
 * more than latency on loopback: the peer's send wakes the sleeper and the scheduler pulls it
 * onto the waker's core (wake-affine); once two ranks share a core each waits long enough to
 * sleep again, and they stay there, at about half the bandwidth. Spinning longer than 2 ms
 * did not make it rarer. */
#define TCP_SPIN_S 2e-3
#define TCP_SPIN_PURE 32 /* idle attempts before yielding the core in between */
/* Sleeping for a part, wake when this much of it is readable (SO_RCVLOWAT; less when less is
 * left): the part completes no sooner, and a slow link's trickle wakes the rank once per this
 * many bytes instead of once per packet, which saves host CPU on slow links at the same speed
 * (docs/measurements.md, "Waiting asleep"); the kernel still wakes a reader whose window is
 * closing (tcp_data_ready). */
#define TCP_LOWAT_MAX (256 * 1024)

/* len is the whole message's size, in every part's header: a part's own length alone would let
 * a striped message pass as a smaller unstriped one (both ends cut a message alike, so the size
 * and the connection it came on fix each part's place and length). */
typedef struct {
  uint32_t magic, tag;
  uint64_t len;
  uint32_t seq, check;
} tcp_hdr;

static uint32_t tcp_check(const tcp_hdr *h) {
  return h->magic ^ h->tag ^ (uint32_t)h->len ^ (uint32_t)(h->len >> 32) ^ h->seq ^ 0x9e3779b9u;
}

typedef struct tcp_req {
  int peer, is_send;
  uint32_t tag;
  size_t bytes;
  int parts_left;
} tcp_req;
_Static_assert(sizeof(tcp_req) <= sizeof(coll_req), "tcp_req must fit in coll_req");

/* One piece of a message on one connection. */
typedef struct tcp_part {
  struct tcp_part *next;
  tcp_req *req;
  char *buf;
  size_t len, done;
  tcp_hdr hdr;
  size_t hdr_done;
} tcp_part;

typedef struct {
  int fd, peer;
  tcp_part *sq, *sq_tail; /* sends in post order */
  tcp_part *rq, *rq_tail; /* receives in post order */
  uint32_t send_seq, recv_seq;
  int lowat; /* the socket's SO_RCVLOWAT as last set (0: the kernel's, 1) */
} tcp_conn;

typedef struct {
  coll_transport base;
  int streams;
  tcp_conn *conns;  /* [peer * streams + s]; own rank's entries unused */
  tcp_part *free_parts;
  struct pollfd *pfds;
  double spin_s;     /* spin before sleeping; 0 when ranks outnumber cores */
  int dead;          /* a connection failed: every later call fails with this message */
  char dead_msg[512];
} tcp_transport;

static const char *tcp_host(const tcp_transport *t, int r) { return coll_comm_host(t->base.comm, r); }

static int tcp_die(tcp_transport *t, coll_err *e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int tcp_die(tcp_transport *t, coll_err *e, const char *fmt, ...) {
  if (!t->dead) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->dead_msg, sizeof t->dead_msg, fmt, ap);
    va_end(ap);
    t->dead = 1;
  }
  return coll_fail(e, "%s", t->dead_msg);
}

static tcp_part *tcp_part_get(tcp_transport *t) {
  tcp_part *p = t->free_parts;
  if (p) {
    t->free_parts = p->next;
  } else {
    p = malloc(sizeof *p);
    if (!p) return NULL;
  }
  memset(p, 0, sizeof *p);
  return p;
}

static void tcp_part_put(tcp_transport *t, tcp_part *p) {
  p->next = t->free_parts;
  t->free_parts = p;
}

static int tcp_nparts(const tcp_transport *t, size_t bytes) {
  return bytes < TCP_STRIPE_MIN ? 1 : t->streams;
}

static int tcp_post(coll_transport *tp, int peer, void *buf, size_t bytes, uint32_t tag,
                    coll_req *r, int is_send, coll_err *e) {
  tcp_transport *t = (tcp_transport *)tp;
  if (t->dead) return coll_fail(e, "%s", t->dead_msg);
  if (peer == tp->rank)
    return coll_fail(e, "rank %d: tcp transport has no self-connection", tp->rank);
  tcp_req *q = (tcp_req *)r;
  q->peer = peer;
  q->is_send = is_send;
  q->tag = tag;
  q->bytes = bytes;
  int np = tcp_nparts(t, bytes);
  q->parts_left = np;
  for (int s = 0; s < np; s++) {
    tcp_part *p = tcp_part_get(t);
    if (!p) return coll_fail(e, "rank %d: out of memory", tp->rank);
    size_t off, len;
    coll_block(bytes, np, s, &off, &len);
    p->req = q;
    p->buf = (char *)buf + off;
    p->len = len;
    tcp_conn *c = &t->conns[peer * t->streams + s];
    if (is_send) {
      p->hdr.magic = TCP_MAGIC;
      p->hdr.tag = tag;
      p->hdr.len = bytes;
      p->hdr.seq = c->send_seq++;
      p->hdr.check = tcp_check(&p->hdr);
      if (c->sq_tail) c->sq_tail->next = p;
      else c->sq = p;
      c->sq_tail = p;
    } else {
      if (c->rq_tail) c->rq_tail->next = p;
      else c->rq = p;
      c->rq_tail = p;
    }
  }
  return 0;
}

static int tcp_isend(coll_transport *tp, int peer, const void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  return tcp_post(tp, peer, (void *)buf, bytes, tag, r, 1, e);
}

static int tcp_irecv(coll_transport *tp, int peer, void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  return tcp_post(tp, peer, buf, bytes, tag, r, 0, e);
}

/* What is left of a part on the wire: its header's rest, then its payload's rest. */
static int tcp_part_iov(tcp_part *p, struct iovec iov[2]) {
  int n = 0;
  if (p->hdr_done < sizeof p->hdr) {
    iov[n].iov_base = (char *)&p->hdr + p->hdr_done;
    iov[n++].iov_len = sizeof p->hdr - p->hdr_done;
  }
  if (p->done < p->len) {
    iov[n].iov_base = p->buf + p->done;
    iov[n++].iov_len = p->len - p->done;
  }
  return n;
}

static void tcp_part_advance(tcp_part *p, size_t bytes) {
  size_t h = sizeof p->hdr - p->hdr_done;
  if (bytes >= h) {
    p->hdr_done = sizeof p->hdr;
    p->done += bytes - h;
  } else {
    p->hdr_done += bytes;
  }
}

/* Bytes of a part still to cross: its header's rest and its payload's rest. */
static size_t tcp_part_left(const tcp_part *p) { return sizeof p->hdr - p->hdr_done + p->len - p->done; }
static int tcp_part_done(const tcp_part *p) { return tcp_part_left(p) == 0; }

/* Writes as much of the connection's send queue as the socket takes. 1: progressed. */
static int tcp_progress_send(tcp_transport *t, tcp_conn *c, coll_err *e, int *err) {
  int moved = 0;
  while (c->sq) {
    tcp_part *p = c->sq;
    struct iovec iov[2];
    int n = tcp_part_iov(p, iov);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = n ? sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) : 0;
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
      *err = tcp_die(t, e, "rank %d (%s): sending to rank %d (%s) failed: %s (the peer exited or was killed?)",
                     t->base.rank, tcp_host(t, t->base.rank), c->peer, tcp_host(t, c->peer), strerror(errno));
      return moved;
    }
    moved = 1;
    tcp_part_advance(p, (size_t)w);
    if (!tcp_part_done(p)) return moved; /* socket full */
    c->sq = p->next;
    if (!c->sq) c->sq_tail = NULL;
    p->req->parts_left--;
    tcp_part_put(t, p);
  }
  return moved;
}

static int tcp_progress_recv(tcp_transport *t, tcp_conn *c, coll_err *e, int *err) {
  int moved = 0;
  while (c->rq) {
    tcp_part *p = c->rq;
    struct iovec iov[2];
    int n = tcp_part_iov(p, iov);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t r = recvmsg(c->fd, &mh, MSG_DONTWAIT);
    if (r == 0) {
      *err = tcp_die(t, e, "rank %d (%s): rank %d (%s) closed the connection (it exited or was killed)",
                     t->base.rank, tcp_host(t, t->base.rank), c->peer, tcp_host(t, c->peer));
      return moved;
    }
    if (r < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return moved;
      *err = tcp_die(t, e, "rank %d (%s): receiving from rank %d (%s) failed: %s",
                     t->base.rank, tcp_host(t, t->base.rank), c->peer, tcp_host(t, c->peer), strerror(errno));
      return moved;
    }
    moved = 1;
    int hdr_was_partial = p->hdr_done < sizeof p->hdr;
    tcp_part_advance(p, (size_t)r);
    if (hdr_was_partial && p->hdr_done == sizeof p->hdr) {
      /* the header is validated before the message counts as received */
      const tcp_hdr *x = &p->hdr;
      if (x->magic != TCP_MAGIC || x->check != tcp_check(x)) {
        *err = tcp_die(t, e, "rank %d (%s): corrupt message header from rank %d (%s)",
                       t->base.rank, tcp_host(t, t->base.rank), c->peer, tcp_host(t, c->peer));
        return moved;
      }
      if (x->seq != c->recv_seq || x->tag != p->req->tag || x->len != p->req->bytes) {
        *err = tcp_die(t, e, "rank %d (%s): protocol mismatch with rank %d (%s): got message seq %u tag 0x%x "
                             "of %llu bytes, expected seq %u tag 0x%x of %zu bytes",
                       t->base.rank, tcp_host(t, t->base.rank), c->peer, tcp_host(t, c->peer), x->seq, x->tag,
                       (unsigned long long)x->len, c->recv_seq, p->req->tag, p->req->bytes);
        return moved;
      }
      c->recv_seq++;
    }
    if (!tcp_part_done(p)) return moved;
    c->rq = p->next;
    if (!c->rq) c->rq_tail = NULL;
    p->req->parts_left--;
    tcp_part_put(t, p);
  }
  return moved;
}

/* One pass over every connection with work. Returns 1 if anything moved, -1 on error. */
static int tcp_progress(tcp_transport *t, coll_err *e) {
  int moved = 0, err = 0;
  int n = t->base.size * t->streams;
  for (int i = 0; i < n && !err; i++) {
    tcp_conn *c = &t->conns[i];
    if (c->fd < 0) continue;
    if (c->rq) moved |= tcp_progress_recv(t, c, e, &err);
    if (c->sq && !err) moved |= tcp_progress_send(t, c, e, &err);
  }
  return err ? -1 : moved;
}

static int tcp_test(coll_transport *tp, coll_req *r, int *done, coll_err *e) {
  tcp_transport *t = (tcp_transport *)tp;
  if (t->dead) return coll_fail(e, "%s", t->dead_msg);
  if (tcp_progress(t, e) < 0) return -1;
  *done = ((tcp_req *)r)->parts_left == 0;
  return 0;
}

/* Sleeps until a connection with work is ready, or ms pass. */
static void tcp_sleep(tcp_transport *t, int ms) {
  int n = 0, total = t->base.size * t->streams;
  for (int i = 0; i < total; i++) {
    tcp_conn *c = &t->conns[i];
    if (c->fd < 0 || (!c->rq && !c->sq)) continue;
    if (c->rq) { /* wake for what the part still needs, up to TCP_LOWAT_MAX */
      size_t left = tcp_part_left(c->rq);
      int want = left < TCP_LOWAT_MAX ? (int)left : TCP_LOWAT_MAX;
      if (want != c->lowat && setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &want, sizeof want) == 0) c->lowat = want;
    }
    t->pfds[n].fd = c->fd;
    t->pfds[n].events = (short)((c->rq ? POLLIN : 0) | (c->sq ? POLLOUT : 0));
    t->pfds[n].revents = 0;
    n++;
  }
  if (n) poll(t->pfds, (nfds_t)n, ms);
}

static int tcp_waitall(coll_transport *tp, coll_req *r, int n, int timeout_ms, coll_err *e) {
  tcp_transport *t = (tcp_transport *)tp;
  if (t->dead) return coll_fail(e, "%s", t->dead_msg);
  double deadline = coll_sock_now() + timeout_ms / 1000.0;
  int first = 0, idle = 0;
  double idle_since = 0;
  for (;;) {
    while (first < n && ((tcp_req *)&r[first])->parts_left == 0) first++;
    if (first == n) return 0;
    int m = tcp_progress(t, e);
    if (m < 0) return -1;
    if (m) {
      idle = 0;
      continue;
    }
    /* spin a little, then spin yielding the core (a peer waiting for it can answer), then
     * sleep in poll */
    double now = coll_sock_now();
    if (idle++ == 0) idle_since = now;
    if (now - idle_since < t->spin_s) {
      if (idle > TCP_SPIN_PURE) sched_yield();
      continue;
    }
    if (now >= deadline) {
      const tcp_req *q = (tcp_req *)&r[first];
      return coll_fail(e, "rank %d (%s): timed out after %d ms waiting to %s %zu bytes %s rank %d (%s)",
                       tp->rank, tcp_host(t, tp->rank), timeout_ms, q->is_send ? "send" : "receive",
                       q->bytes, q->is_send ? "to" : "from", q->peer, tcp_host(t, q->peer));
    }
    double left_ms = (deadline - now) * 1000.0;
    tcp_sleep(t, left_ms < 100 ? (int)left_ms + 1 : 100);
  }
}

static void tcp_close(coll_transport *tp) {
  tcp_transport *t = (tcp_transport *)tp;
  if (t->conns)
    for (int i = 0; i < tp->size * t->streams; i++)
      if (t->conns[i].fd >= 0) close(t->conns[i].fd);
  while (t->free_parts) {
    tcp_part *p = t->free_parts;
    t->free_parts = p->next;
    free(p);
  }
  /* parts still queued (a failed run) are freed with their connections' queues */
  if (t->conns)
    for (int i = 0; i < tp->size * t->streams; i++) {
      for (tcp_part *p = t->conns[i].sq, *nx; p; p = nx) nx = p->next, free(p);
      for (tcp_part *p = t->conns[i].rq, *nx; p; p = nx) nx = p->next, free(p);
    }
  free(t->conns);
  free(t->pfds);
  free(t);
}

static const coll_transport_ops tcp_ops = {
    .name = "tcp",
    .isend = tcp_isend,
    .irecv = tcp_irecv,
    .test = tcp_test,
    .waitall = tcp_waitall,
    .allreduce = NULL,
    .close = tcp_close,
};

/* The interface that holds addr ("lo", "eth0"), or addr itself when none does. */
static void tcp_ifname(const char *addr, char *out, size_t cap) {
  snprintf(out, cap, "%s", addr);
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return;
  for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) continue;
    char host[NI_MAXHOST];
    socklen_t sl = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
    if (getnameinfo(i->ifa_addr, sl, host, sizeof host, NULL, 0, NI_NUMERICHOST) == 0 && !strcmp(host, addr)) {
      snprintf(out, cap, "%s", i->ifa_name);
      break;
    }
  }
  freeifaddrs(ifs);
}

typedef struct {
  char addr[64];
  int32_t port;
  int32_t streams;
} tcp_endpoint;

typedef struct {
  uint32_t magic;
  int32_t rank, stream, size;
} tcp_hello;

/* A connection at the listener whose hello is still arriving. */
typedef struct {
  int fd;
  size_t got;
  double deadline; /* dropped then if its hello is not whole */
  tcp_hello h;
} tcp_pending;

#define TCP_PENDING_EXTRA 64 /* strangers held at once beyond the expected connections */

/* Drops entry i, keeping the others in the order they came. */
static void tcp_pending_drop(tcp_pending *p, int *n, int i) {
  close(p[i].fd);
  memmove(&p[i], &p[i + 1], (size_t)(*n - i - 1) * sizeof *p);
  (*n)--;
}

/* Reads what entry i has sent. 1: a whole hello of an expected connection, now in fds; -1: it
 * failed, closed or said something wrong (dropped); 0: not whole yet. */
static int tcp_pending_read(tcp_pending *p, int *n, int i, int *fds, int me, int size, int streams) {
  tcp_pending *q = &p[i];
  ssize_t r = recv(q->fd, (char *)&q->h + q->got, sizeof q->h - q->got, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (r <= 0) {
    tcp_pending_drop(p, n, i);
    return -1;
  }
  q->got += (size_t)r;
  const tcp_hello *h = &q->h;
  if (q->got >= sizeof h->magic && h->magic != TCP_HELLO_MAGIC) { /* garbage: no need for the rest */
    tcp_pending_drop(p, n, i);
    return -1;
  }
  if (q->got < sizeof *h) return 0;
  /* not one of ours, or a duplicate: the first of a (rank, stream) keeps its place */
  if (h->size != size || h->rank <= me || h->rank >= size || h->stream < 0 || h->stream >= streams ||
      fds[h->rank * streams + h->stream] >= 0) {
    tcp_pending_drop(p, n, i);
    return -1;
  }
  fds[h->rank * streams + h->stream] = q->fd;
  q->fd = -1;
  memmove(&p[i], &p[i + 1], (size_t)(*n - i - 1) * sizeof *p);
  (*n)--;
  return 1;
}

int coll_tcp_accept_hellos(int *fds, int lfd, int me, int size, int streams, double deadline, double hello_s,
                           char *err, size_t cap) {
  int want = 0;
  for (int i = (me + 1) * streams; i < size * streams; i++) want += fds[i] < 0;
  /* room for every expected connection at once, and a bounded number of strangers: when more
   * come, the oldest stranger goes */
  int room = want + TCP_PENDING_EXTRA, npend = 0, rc = -1;
  tcp_pending *pend = malloc((size_t)room * sizeof *pend);
  struct pollfd *pfd = malloc((size_t)(room + 1) * sizeof *pfd);
  if (!pend || !pfd) {
    snprintf(err, cap, "out of memory");
    goto done;
  }
  coll_sock_set_nonblock(lfd);
  while (want > 0) {
    double now = coll_sock_now(), wake = deadline;
    if (now >= deadline) {
      snprintf(err, cap, "timed out waiting for a connection");
      goto done;
    }
    /* against this now: a pass delayed past a connection's time drops it, not waits on it */
    for (int i = npend - 1; i >= 0; i--)
      if (now >= pend[i].deadline) tcp_pending_drop(pend, &npend, i);
    for (int i = 0; i < npend; i++) wake = pend[i].deadline < wake ? pend[i].deadline : wake;
    pfd[0] = (struct pollfd){.fd = lfd, .events = POLLIN};
    for (int i = 0; i < npend; i++) pfd[i + 1] = (struct pollfd){.fd = pend[i].fd, .events = POLLIN};
    int np = npend, ready = poll(pfd, (nfds_t)np + 1, coll_boot_wait_ms(now, wake, deadline));
    if (ready < 0 && errno != EINTR) {
      snprintf(err, cap, "poll: %s", strerror(errno));
      goto done;
    }
    if (ready <= 0) continue;
    /* hellos, in the order the connections came (entries shift as others go: found by fd) */
    for (int j = 0; j < np; j++)
      if (pfd[j + 1].revents) {
        int i = 0;
        while (i < npend && pend[i].fd != pfd[j + 1].fd) i++;
        if (i < npend && tcp_pending_read(pend, &npend, i, fds, me, size, streams) == 1) want--;
      }
    if (!(pfd[0].revents & POLLIN)) continue;
    now = coll_sock_now();
    for (;;) {
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break; /* none left */
        snprintf(err, cap, "accept: %s", strerror(errno)); /* out of fds: polling again would spin */
        goto done;
      }
      coll_sock_tune(fd, 0); /* no Nagle: see coll_sock_connect */
      if (npend == room) tcp_pending_drop(pend, &npend, 0); /* the oldest */
      double dl = now + hello_s;
      pend[npend++] = (tcp_pending){.fd = fd, .deadline = dl < deadline ? dl : deadline};
      /* a rank's hello is usually there already */
      if (tcp_pending_read(pend, &npend, npend - 1, fds, me, size, streams) == 1 && --want == 0) break;
    }
  }
  rc = 0;
done:
  for (int i = 0; i < npend; i++) close(pend[i].fd);
  free(pend);
  free(pfd);
  return rc;
}

/* The transport without connections: every fd -1. */
static tcp_transport *tcp_new(const coll_comm *cm, int streams) {
  tcp_transport *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->base.ops = &tcp_ops;
  t->base.rank = cm->rank;
  t->base.size = cm->size;
  t->base.comm = cm;
  t->streams = streams > 0 ? streams : 1;
  if (t->streams > TCP_MAX_STREAMS) t->streams = TCP_MAX_STREAMS;
  int total = cm->size * t->streams;
  t->conns = calloc((size_t)total, sizeof *t->conns);
  t->pfds = calloc((size_t)total, sizeof *t->pfds);
  if (!t->conns || !t->pfds) {
    tcp_close(&t->base);
    return NULL;
  }
  for (int i = 0; i < total; i++) {
    t->conns[i].fd = -1;
    t->conns[i].peer = i / t->streams;
  }
  return t;
}

int coll_tcp_from_fds(coll_transport **out, const coll_comm *cm, int streams, const int *fds,
                      coll_err *e) {
  *out = NULL;
  tcp_transport *t = tcp_new(cm, streams);
  if (!t) return coll_fail(e, "out of memory");
  for (int i = 0; i < cm->size * t->streams; i++) {
    t->conns[i].fd = fds[i];
    if (fds[i] >= 0) coll_sock_set_nonblock(fds[i]);
  }
  snprintf(t->base.fabric, sizeof t->base.fabric, "tcp:fds");
  *out = &t->base;
  return 0;
}

/* What coll_tcp_open's phases share. */
typedef struct {
  tcp_transport *t;
  coll_comm *cm;
  int me, n;
  int sockbuf;       /* socket buffer size; 0: the kernel's autotuning */
  tcp_endpoint mine; /* what this rank tells the others */
  int lfd;           /* the listener; -1 when there is none (one rank) or it is closed */
  double deadline;   /* for every connection and hello */
  char err[512];
} tcp_open_ctx;

/* This rank's address (--tcp-bind, else the bootstrap's) and, with peers, a listener on it. */
static int tcp_open_listen(tcp_open_ctx *x, coll_boot *b, const coll_comm_opts *o, coll_err *e) {
  if (o->tcp_bind && *o->tcp_bind)
    snprintf(x->mine.addr, sizeof x->mine.addr, "%s", o->tcp_bind);
  else if (coll_boot_advertise_addr(b, x->mine.addr, sizeof x->mine.addr, e) != 0)
    return -1;
  if (x->n > 1 && coll_sock_listen(x->mine.addr, 0, 1024, &x->lfd, &x->mine.port, x->err, sizeof x->err) != 0)
    return coll_fail(e, "rank %d (%s): tcp transport: %s", x->me, x->cm->hosts[x->me], x->err);
  return 0;
}

/* Every rank's endpoint, through the bootstrap; NULL after saying why. The streams must agree:
 * both ends of a pair cut a message into the same parts. */
static tcp_endpoint *tcp_open_exchange(tcp_open_ctx *x, coll_boot *b, coll_err *e) {
  const tcp_transport *t = x->t;
  x->mine.streams = t->streams;
  tcp_endpoint *eps = calloc((size_t)x->n, sizeof *eps);
  if (!eps) {
    coll_fail(e, "out of memory");
    return NULL;
  }
  if (coll_boot_allgather(b, eps, &x->mine, sizeof x->mine, e) != 0) {
    free(eps);
    return NULL;
  }
  for (int r = 0; r < x->n; r++)
    if (eps[r].streams != t->streams) {
      coll_fail(e, "rank %d (%s): rank %d uses %d tcp streams, this rank %d", x->me, x->cm->hosts[x->me], r,
                eps[r].streams, t->streams);
      free(eps);
      return NULL;
    }
  return eps;
}

/* Lower ranks listen, higher ranks connect: each pair once per stream. */
static int tcp_open_connect(tcp_open_ctx *x, tcp_endpoint *eps, coll_err *e) {
  tcp_transport *t = x->t;
  const coll_comm *cm = x->cm;
  int me = x->me;
  for (int r = 0; r < me; r++) {
    for (int s = 0; s < t->streams; s++) {
      int fd;
      eps[r].addr[sizeof eps[r].addr - 1] = '\0';
      if (coll_sock_connect(eps[r].addr, eps[r].port, x->deadline, &fd, x->err, sizeof x->err) != 0)
        return coll_fail(e, "rank %d (%s): tcp connect to rank %d (%s): %s", me, cm->hosts[me], r, cm->hosts[r],
                         x->err);
      /* the listener learns from it which rank and stream this connection is */
      tcp_hello h = {TCP_HELLO_MAGIC, me, s, x->n};
      if (coll_sock_send_all(fd, &h, sizeof h, x->deadline, x->err, sizeof x->err) != 0) {
        close(fd);
        return coll_fail(e, "rank %d (%s): tcp hello to rank %d (%s): %s", me, cm->hosts[me], r, cm->hosts[r],
                         x->err);
      }
      t->conns[r * t->streams + s].fd = fd;
    }
  }
  return 0;
}

/* " 2 (hostb) 3 (hostc)": the higher ranks (and streams) not connected, as many as fit. */
static void tcp_open_missing(const tcp_open_ctx *x, char *missing, size_t cap) {
  const tcp_transport *t = x->t;
  size_t off = 0;
  missing[0] = '\0';
  for (int r = x->me + 1; r < x->n && off < cap - 32; r++)
    for (int s = 0; s < t->streams && off < cap - 32; s++)
      if (t->conns[r * t->streams + s].fd < 0) {
        if (t->streams > 1)
          off += (size_t)snprintf(missing + off, cap - off, " %d (%s, stream %d)", r, x->cm->hosts[r], s);
        else
          off += (size_t)snprintf(missing + off, cap - off, " %d (%s)", r, x->cm->hosts[r]);
      }
}

/* Every connection's hello is read at once: one that says nothing (a port scanner, a stuck
 * peer) is dropped after TCP_HELLO_S, and the real ranks behind it are not kept waiting. */
static int tcp_open_accept(tcp_open_ctx *x, coll_err *e) {
  tcp_transport *t = x->t;
  int me = x->me, n = x->n, total = n * t->streams;
  int *fds = malloc((size_t)total * sizeof *fds);
  if (!fds) return coll_fail(e, "out of memory");
  for (int i = 0; i < total; i++) fds[i] = t->conns[i].fd;
  int arc = n > 1 ? coll_tcp_accept_hellos(fds, x->lfd, me, n, t->streams, x->deadline, TCP_HELLO_S, x->err,
                                           sizeof x->err)
                  : 0;
  /* the connections accepted before a failure too: tcp_close closes them */
  for (int i = 0; i < total; i++) t->conns[i].fd = fds[i];
  free(fds);
  if (arc != 0) {
    char missing[256];
    tcp_open_missing(x, missing, sizeof missing);
    return coll_fail(e, "rank %d (%s): waiting for tcp connections from higher ranks: %s; missing ranks:%s",
                     me, x->cm->hosts[me], x->err, missing);
  }
  return 0;
}

/* Every connection's options, then the fabric's name from what the kernel took. */
static int tcp_open_tune(tcp_open_ctx *x, const coll_comm_opts *o, coll_err *e) {
  tcp_transport *t = x->t;
  int total = x->n * t->streams;
  const char *cc = o->tcp_cc ? o->tcp_cc : COLL_TCP_CC_DEFAULT;
  char cc_got[32] = "";
  for (int i = 0; i < total; i++)
    if (t->conns[i].fd >= 0) {
      coll_sock_tune(t->conns[i].fd, x->sockbuf);
      coll_sock_set_nonblock(t->conns[i].fd);
      if (strcmp(cc, "system") != 0 &&
          setsockopt(t->conns[i].fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0)
        return coll_fail(e, "rank %d (%s): tcp congestion control '%s': %s (see "
                            "/proc/sys/net/ipv4/tcp_available_congestion_control; without CAP_NET_ADMIN "
                            "only those in tcp_allowed_congestion_control)",
                         x->me, x->cm->hosts[x->me], cc, strerror(errno));
      socklen_t gl = sizeof cc_got - 1;
      if (!cc_got[0] && getsockopt(t->conns[i].fd, IPPROTO_TCP, TCP_CONGESTION, cc_got, &gl) != 0)
        cc_got[0] = '\0';
    }
  char ifn[64];
  tcp_ifname(x->mine.addr, ifn, sizeof ifn);
  /* the congestion control in use (read back), or the one asked for when there is no peer */
  snprintf(t->base.fabric, sizeof t->base.fabric, "tcp:%s/%s", ifn, cc_got[0] ? cc_got : cc);
  return 0;
}

/* A failed open: the listener if still open (a failed listen leaves lfd -1), and every
 * connection made so far. */
static int tcp_open_fail(tcp_open_ctx *x) {
  if (x->lfd >= 0) close(x->lfd);
  tcp_close(&x->t->base);
  return -1;
}

int coll_tcp_open(coll_transport **out, coll_comm *cm, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e) {
  *out = NULL;
  tcp_transport *t = tcp_new(cm, o->tcp_streams);
  if (!t) return coll_fail(e, "out of memory");
  tcp_open_ctx x = {.t = t, .cm = cm, .me = cm->rank, .n = cm->size, .lfd = -1};
  /* Spinning is cheap latency while every rank has a core; when ranks outnumber the cores a
   * spinning rank steals the time its peer needs to answer, so sleep in poll at once. */
  const char *spin_env = getenv("FABENCH_TCP_SPIN_US");
  t->spin_s = cm->oversubscribed ? 0 : spin_env ? atof(spin_env) * 1e-6 : TCP_SPIN_S;
  t->base.sleeps = !(t->spin_s > 0);
  const char *bufenv = getenv("FABENCH_TCP_SOCKBUF");
  x.sockbuf = bufenv ? atoi(bufenv) : 0;

  if (tcp_open_listen(&x, b, o, e) != 0) return tcp_open_fail(&x);
  tcp_endpoint *eps = tcp_open_exchange(&x, b, e);
  if (!eps) return tcp_open_fail(&x);
  x.deadline = coll_sock_now() + cm->timeout_ms / 1000.0;
  int rc = tcp_open_connect(&x, eps, e);
  free(eps);
  if (rc != 0 || tcp_open_accept(&x, e) != 0) return tcp_open_fail(&x);
  if (x.lfd >= 0) close(x.lfd);
  x.lfd = -1; /* the failure paths below close it again otherwise: maybe another thread's fd */
  if (tcp_open_tune(&x, o, e) != 0) return tcp_open_fail(&x);
  *out = &t->base;
  return 0;
}
