/* Bootstrap: who we are and a slow all-gather for exchanging endpoint addresses.
 * Environment rendezvous: rank 0 listens at FABENCH_ROOT (or MASTER_ADDR:MASTER_PORT), the
 * others connect and present the job token; every exchange is a star through rank 0. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#if FABENCH_HAVE_MPI
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/eventfd.h>
#include <time.h>
#endif

#include "coll_internal.h"
#include "sock.h"

#define BOOT_MAGIC_HELLO 0x46424231u /* "FBB1" */
#define BOOT_MAGIC_REPLY 0x46424252u /* "FBBR" */
#define BOOT_MAGIC_GATHER 0x46424147u /* "FBAG" */
#define BOOT_VERSION 1u
#define BOOT_TOKEN_MAX 64

typedef struct {
  uint32_t magic, version;
  int32_t rank, size;
  char token[BOOT_TOKEN_MAX];
  char host[COLL_HOST_MAX];
} boot_hello;

/* Rank 0's answer to a hello: accepted (the host table follows), rejected, or, to the ranks that
 * joined, that the rendezvous failed (at rank 0's deadline, with the ranks missing). */
enum { BOOT_ACCEPTED = 0, BOOT_REJECTED = 1, BOOT_FAILED = 2 };
typedef struct {
  uint32_t magic;
  int32_t status; /* BOOT_ACCEPTED, ... */
  char reason[192];
} boot_reply;

typedef struct {
  uint32_t magic;
  uint32_t pad;
  uint64_t bytes;
} boot_frame;

#if FABENCH_HAVE_MPI
#define BOOT_MPI_SPIN_TESTS 64 /* polls of a bootstrap all-gather before each one sleeps */
#define BOOT_MPI_SLEEP_US 100
#define BOOT_FINALIZE_GRACE_MS 60000LL
/* MPI's blocking calls (MPI_Allgather, MPI_Comm_dup, MPI_Allreduce, MPI_Finalize) cannot time
 * out, and a dead or stopped rank would hold the others in them for ever; nor can a call that
 * should return at once: Open MPI's shared-memory queue spins in MPI_Test while a peer stopped
 * halfway through queueing a message (CI's fault matrix, p2p/mpi/stop: no rank said anything
 * and the job never ended). A thread watches the call in progress and ends the job when it
 * outlasts the timeout. */
typedef struct {
  pthread_t th;
  int started, wake;             /* wake: an eventfd that ends the thread at once */
  atomic_int rank;               /* for the message; the launcher's before MPI_Init */
  char host[COLL_HOST_MAX];
  atomic_int inited;             /* MPI_Init has returned and MPI_Finalize not begun: MPI_Abort
                                  * may be called */
  _Atomic(const char *) what;    /* the call in progress, or NULL */
  atomic_ullong seq;             /* calls begun: the watchdog times a call it sees twice */
  _Atomic long long extra_ms;    /* the call's allowance beyond the timeout */
} boot_watch;
#endif

struct coll_boot {
  coll_boot_kind kind; /* ENV or MPI; a world of one is ENV with size 1 */
  int rank, size, local_rank, host_count;
  int timeout_ms;
  char (*hosts)[COLL_HOST_MAX];
  int *fds;          /* rank 0: one per peer (index = rank); others: fds[0] to rank 0 */
  char root_desc[300];
  char local_addr[64];
#if FABENCH_HAVE_MPI
  boot_watch watch;
#endif
};

static double boot_deadline(const coll_boot *b) { return coll_sock_now() + b->timeout_ms / 1000.0; }

static const char *boot_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* This rank's host as it reports it: FABENCH_HOST where set (emulated hosts: tests, emulation),
 * else gethostname's. Addresses are still looked up by the real name (boot_first_ipv4). */
static void boot_hostname(char *out, size_t cap) {
  const char *h = boot_env("FABENCH_HOST");
  out[0] = '\0';
  if (h)
    snprintf(out, cap, "%s", h);
  else
    gethostname(out, cap - 1);
}

static int boot_env_int(const char *name, int *out) {
  const char *v = boot_env(name);
  if (!v) return 0;
  char *end;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1000000) return -1;
  *out = (int)x;
  return 1;
}

static void boot_fill_locals(coll_boot *b) {
  b->local_rank = 0;
  b->host_count = 0;
  for (int r = 0; r < b->size; r++) {
    int seen = 0;
    for (int q = 0; q < r; q++)
      if (!strcmp(b->hosts[q], b->hosts[r])) seen = 1;
    if (!seen) b->host_count++;
    if (r < b->rank && !strcmp(b->hosts[r], b->hosts[b->rank])) b->local_rank++;
  }
}

/* torchrun (and Kubernetes operators) say where a rank belongs: LOCAL_WORLD_SIZE ranks on its
 * host, it the LOCAL_RANK-th of them in rank order. A rank the launcher meant for another host
 * fails here, naming itself, its host and the ranks there, instead of a layout that
 * hier and the node-aware order would take for the truth. */
static int boot_check_local(const coll_boot *b, coll_err *e) {
  int lws = 0, lr = 0, here = 0;
  char list[256] = "";
  size_t len = 0;
  for (int r = 0; r < b->size; r++) {
    if (strcmp(b->hosts[r], b->hosts[b->rank])) continue;
    here++;
    if (len + 16 < sizeof list) len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? " " : "", r);
  }
  if (boot_env_int("LOCAL_WORLD_SIZE", &lws) == 1 && lws != here)
    return coll_fail(e, "rank %d (%s): started as one of LOCAL_WORLD_SIZE=%d ranks on its host, but %s has %d "
                        "(ranks %s): a rank started on the wrong host?", b->rank, b->hosts[b->rank], lws,
                     b->hosts[b->rank], here, list);
  if (boot_env_int("LOCAL_RANK", &lr) == 1 && boot_env("LOCAL_WORLD_SIZE") && lr != b->local_rank)
    return coll_fail(e, "rank %d (%s): started as LOCAL_RANK=%d, but it is local rank %d of %s (ranks %s in "
                        "rank order): a rank started on the wrong host?", b->rank, b->hosts[b->rank], lr,
                     b->local_rank, b->hosts[b->rank], list);
  return 0;
}

/* A launcher started several processes but this one sees a world of one: say why. */
static int boot_check_single(coll_err *e) {
  static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                                     "SLURM_NTASKS", "WORLD_SIZE", "FABENCH_WORLD_SIZE"};
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
    int n = 0;
    if (boot_env_int(vars[i], &n) == 1 && n > 1)
      return coll_fail(e,
                       "launched as one of %d processes (%s=%d) but this process sees a world of "
                       "one: %s; refusing to run %d copies of a 1-rank benchmark",
                       n, vars[i], n,
                       FABENCH_HAVE_MPI ? "give the rendezvous address (FABENCH_ROOT=host:port "
                                          "or MASTER_ADDR/MASTER_PORT) or launch with an MPI "
                                          "that matches this fabench"
                                        : "this fabench was built without MPI; give "
                                          "FABENCH_ROOT=host:port (or MASTER_ADDR/MASTER_PORT) "
                                          "for the environment rendezvous",
                       n);
  }
  return 0;
}

static int boot_alloc(coll_boot *b, coll_err *e) {
  b->hosts = calloc((size_t)b->size, sizeof *b->hosts);
  b->fds = malloc((size_t)b->size * sizeof *b->fds);
  if (!b->hosts || !b->fds) return coll_fail(e, "out of memory");
  for (int i = 0; i < b->size; i++) b->fds[i] = -1;
  return 0;
}

/* Token comparison in constant time: every byte is looked at whatever the first mismatch,
 * so a stranger learns nothing from how long the rejection took. */
static int boot_token_eq(const char *a, const char *b) {
  unsigned char d = 0;
  for (size_t i = 0; i < BOOT_TOKEN_MAX; i++) d |= (unsigned char)(a[i] ^ b[i]);
  return d == 0;
}

/* Whether a whole hello may join: 0, or 1 with the reason in rep. tok: BOOT_TOKEN_MAX bytes,
 * zero-padded. */
static int boot_hello_verdict(const coll_boot *b, boot_hello *h, const char *tok, boot_reply *rep) {
  h->token[BOOT_TOKEN_MAX - 1] = '\0';
  h->host[COLL_HOST_MAX - 1] = '\0';
  rep->status = BOOT_REJECTED;
  if (h->magic != BOOT_MAGIC_HELLO)
    snprintf(rep->reason, sizeof rep->reason, "not a fabench bootstrap hello");
  else if (h->version != BOOT_VERSION)
    snprintf(rep->reason, sizeof rep->reason, "bootstrap version %u, rank 0 speaks %u", h->version, BOOT_VERSION);
  else if (!boot_token_eq(h->token, tok))
    snprintf(rep->reason, sizeof rep->reason, "wrong job token");
  else if (h->size != b->size)
    snprintf(rep->reason, sizeof rep->reason, "world size %d differs from rank 0's %d", h->size, b->size);
  else if (h->rank <= 0 || h->rank >= b->size || b->fds[h->rank] >= 0)
    snprintf(rep->reason, sizeof rep->reason, "rank %d is invalid or already joined", h->rank);
  else
    rep->status = BOOT_ACCEPTED;
  return rep->status;
}

/* A connection at rank 0 whose hello is still arriving. */
typedef struct {
  int fd;
  size_t got;
  double deadline; /* a stranger that says nothing is dropped then */
  boot_hello h;
} boot_pending;

#define BOOT_PENDING_MAX 64 /* more strangers than this at once: the oldest is dropped */
#define BOOT_HELLO_S 5.0    /* how long one connection may take to say hello */
/* How much longer than rank 0's deadline a rank that joined waits for rank 0's verdict: the
 * time the verdict may take to arrive. */
#define BOOT_VERDICT_GRACE_S 2.0

static void boot_pending_drop(boot_pending *p, int *n, int i) {
  close(p[i].fd);
  p[i] = p[--*n];
}

int coll_boot_wait_ms(double now, double wake, double deadline) {
  double s = (wake < deadline ? wake : deadline) - now;
  if (!(s > 0)) return 0; /* already due: poll(-1) would wait for ever */
  if (s > 3600.0) s = 3600.0; /* keep the int in range; the loop waits again */
  return (int)(s * 1000.0) + 1; /* rounded up: waking a little early would only spin */
}

/* Rank 0's admission in progress: the connections whose hello is still arriving and poll's set
 * over them (pfd[0] the listener, pfd[i + 1] pend[i]), kept between passes. */
typedef struct {
  coll_boot *b;
  int lfd;
  const char *tok, *me;
  double deadline;
  boot_pending pend[BOOT_PENDING_MAX];
  struct pollfd pfd[BOOT_PENDING_MAX + 1];
  int npend, joined;
} boot_admission;

/* A stranger's slot is freed when its time to say hello is up, so silence costs it its place. */
static void boot_pending_expire(boot_pending *p, int *n, double now) {
  for (int i = *n - 1; i >= 0; i--)
    if (now >= p[i].deadline) boot_pending_drop(p, n, i);
}

/* One wait for the listener or a hello; it wakes by the next stranger's deadline so that one is
 * dropped on time. Returns poll's result, errno as poll left it. */
static int boot_admit_poll(boot_admission *a, double now) {
  double wake = a->deadline;
  /* against this now, not the last pass's: a pass delayed past a stranger's deadline
   * (preempted, a slow accept) must drop it, not wait on it */
  boot_pending_expire(a->pend, &a->npend, now);
  for (int i = 0; i < a->npend; i++) wake = a->pend[i].deadline < wake ? a->pend[i].deadline : wake;
  a->pfd[0] = (struct pollfd){.fd = a->lfd, .events = POLLIN};
  for (int i = 0; i < a->npend; i++) a->pfd[i + 1] = (struct pollfd){.fd = a->pend[i].fd, .events = POLLIN};
  return poll(a->pfd, (nfds_t)a->npend + 1, coll_boot_wait_ms(now, wake, a->deadline));
}

/* pend[i] is readable: its rank joins once its whole hello passes, and it is dropped as soon as
 * it is garbage, rejected or closed. pend[i] may be replaced by the last entry. */
static void boot_admit_hello(boot_admission *a, int i) {
  coll_boot *b = a->b;
  boot_pending *p = &a->pend[i];
  ssize_t r = recv(p->fd, (char *)&p->h + p->got, sizeof p->h - p->got, 0);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r <= 0) { /* closed or failed before a whole hello */
    boot_pending_drop(a->pend, &a->npend, i);
    return;
  }
  p->got += (size_t)r;
  boot_hello *h = &p->h;
  boot_reply rep = {.magic = BOOT_MAGIC_REPLY};
  if (p->got >= sizeof h->magic && h->magic != BOOT_MAGIC_HELLO) {
    /* garbage: no need to wait for the rest */
    rep.status = BOOT_REJECTED;
    snprintf(rep.reason, sizeof rep.reason, "not a fabench bootstrap hello");
  } else if (p->got < sizeof *h) {
    return;
  } else {
    boot_hello_verdict(b, h, a->tok, &rep);
  }
  if (rep.status) {
    int named = h->magic == BOOT_MAGIC_HELLO; /* garbage has no host worth printing */
    fprintf(stderr, "fabench: rank 0 (%s): rejected a connection%s%s%s: %s\n", a->me,
            named ? " from host '" : "", named ? h->host : "", named ? "'" : "", rep.reason);
    /* best effort and without waiting: a stranger gets no time of ours */
    ssize_t w = send(p->fd, &rep, sizeof rep, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    boot_pending_drop(a->pend, &a->npend, i);
    return;
  }
  int fd = p->fd;
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK); /* the rest of the bootstrap blocks */
  b->fds[h->rank] = fd;
  snprintf(b->hosts[h->rank], COLL_HOST_MAX, "%s", h->host);
  if (!b->local_addr[0]) coll_sock_local_addr(fd, b->local_addr, sizeof b->local_addr);
  a->joined++;
  p->fd = -1;
  a->pend[i] = a->pend[--a->npend];
}

/* Every connection the listener holds, each given BOOT_HELLO_S to say hello; with the table
 * full the oldest stranger makes room, so a crowd of them cannot lock the ranks out. */
static void boot_admit_accept(boot_admission *a, double now) {
  for (;;) {
    int fd = accept4(a->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break; /* EAGAIN: none left; other errors: poll again */
    }
    coll_sock_tune(fd, 0); /* no Nagle: see coll_sock_connect */
    if (a->npend == BOOT_PENDING_MAX) {
      int oldest = 0;
      for (int i = 1; i < a->npend; i++)
        if (a->pend[i].deadline < a->pend[oldest].deadline) oldest = i;
      boot_pending_drop(a->pend, &a->npend, oldest);
    }
    double dl = now + BOOT_HELLO_S;
    a->pend[a->npend++] = (boot_pending){.fd = fd, .deadline = dl < a->deadline ? dl : a->deadline};
  }
}

/* The rendezvous failed at the deadline, or at poll's error (poll_errno): the error, and the
 * same news to the ranks that joined, name the ranks missing. */
static int boot_admit_fail(const boot_admission *a, int poll_errno, int rport, coll_err *e) {
  const coll_boot *b = a->b;
  const char *me = a->me;
  int size = b->size;
  char missing[256] = "";
  size_t off = 0;
  int nmissing = 0;
  for (int r = 1; r < size; r++)
    if (b->fds[r] < 0) {
      nmissing++;
      if (off < sizeof missing - 16) off += (size_t)snprintf(missing + off, sizeof missing - off, " %d", r);
      else if (off < sizeof missing - 4) off += (size_t)snprintf(missing + off, sizeof missing - off, " ...");
    }
  /* the ranks that joined are waiting for the answer to their hello: tell them who is missing,
   * else each fails with a closed connection that names no one. Best effort and without
   * waiting: the first message on a connection fits in its empty socket buffer. */
  boot_reply fail = {.magic = BOOT_MAGIC_REPLY, .status = BOOT_FAILED};
  if (poll_errno)
    snprintf(fail.reason, sizeof fail.reason, "rank 0 (%.*s) failed waiting for ranks%.*s: poll: %s", 60, me,
             72, missing, strerror(poll_errno));
  else
    snprintf(fail.reason, sizeof fail.reason, "rank 0 (%.*s) reports rank%s%.*s missing after %d ms", 60, me,
             nmissing > 1 ? "s" : "", 72, missing, b->timeout_ms);
  for (int r = 1; r < size; r++)
    if (b->fds[r] >= 0) {
      ssize_t w = send(b->fds[r], &fail, sizeof fail, MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)w;
    }
  if (poll_errno)
    return coll_fail(e, "rank 0 (%s): poll: %s (%d of %d ranks had joined the rendezvous at port %d; "
                        "missing ranks:%s)",
                     me, strerror(poll_errno), a->joined + 1, size, rport, missing);
  return coll_fail(e, "rank 0 (%s): %d of %d ranks joined the rendezvous at port %d within "
                      "%d ms; missing ranks:%s",
                   me, a->joined + 1, size, rport, b->timeout_ms, missing);
}

/* Rank 0 reads every hello at once (poll), so a connection that sends garbage or nothing
 * never holds up the ranks behind it; returns 0 when every rank has joined. */
static int boot_root_admit(coll_boot *b, int lfd, const char *tok, double deadline,
                           const char *me, int rport, coll_err *e) {
  boot_admission a = {.b = b, .lfd = lfd, .tok = tok, .me = me, .deadline = deadline};
  int poll_errno = 0;
  coll_sock_set_nonblock(lfd);
  while (a.joined < b->size - 1) {
    double now = coll_sock_now();
    if (now >= deadline) break;
    int n = boot_admit_poll(&a, now);
    if (n < 0 && errno != EINTR) { /* the joined ranks are still told, below */
      poll_errno = errno;
      break;
    }
    now = coll_sock_now();
    /* hellos first (indices shift as entries are dropped: walk down) */
    for (int i = a.npend - 1; n > 0 && i >= 0; i--)
      if (a.pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) boot_admit_hello(&a, i);
    /* strangers that said too little in time */
    boot_pending_expire(a.pend, &a.npend, now);
    if (n > 0 && (a.pfd[0].revents & POLLIN)) boot_admit_accept(&a, now); /* new connections */
  }
  for (int i = 0; i < a.npend; i++) close(a.pend[i].fd);
  if (a.joined == b->size - 1) return 0;
  return boot_admit_fail(&a, poll_errno, rport, e);
}

/* One connection, read to its end (blocking, 5 s at most): the fuzz target's entry; the
 * rendezvous itself reads every connection at once (boot_root_admit). */
int coll_boot_admit(coll_boot *b, int fd, const char *tok, double deadline) {
  char err[512];
  boot_hello h;
  boot_reply rep = {.magic = BOOT_MAGIC_REPLY};
  /* a stranger that connects and says nothing must not stall the rendezvous */
  double hello_deadline = coll_sock_now() + 5.0 < deadline ? coll_sock_now() + 5.0 : deadline;
  if (coll_sock_recv_all(fd, &h, sizeof h, hello_deadline, err, sizeof err) != 0) {
    close(fd);
    return 0;
  }
  char padded[BOOT_TOKEN_MAX] = ""; /* the verdict compares whole buffers */
  snprintf(padded, sizeof padded, "%s", tok);
  if (boot_hello_verdict(b, &h, padded, &rep)) {
    fprintf(stderr, "fabench: rank 0 (%s): rejected a peer from host '%s': %s\n", b->hosts[0], h.host, rep.reason);
    coll_sock_send_all(fd, &rep, sizeof rep, deadline, err, sizeof err);
    close(fd);
    return 0;
  }
  b->fds[h.rank] = fd;
  snprintf(b->hosts[h.rank], COLL_HOST_MAX, "%s", h.host);
  if (!b->local_addr[0]) coll_sock_local_addr(fd, b->local_addr, sizeof b->local_addr);
  return 1;
}

int coll_boot_join(coll_boot *b, int fd, const char *tok, double deadline, coll_err *e) {
  char err[512], me[COLL_HOST_MAX];
  snprintf(me, sizeof me, "%s", b->hosts[b->rank]); /* b->hosts is overwritten below */
  int rank = b->rank, size = b->size;
  b->fds[0] = fd;
  coll_sock_local_addr(fd, b->local_addr, sizeof b->local_addr);
  boot_hello h = {.magic = BOOT_MAGIC_HELLO, .version = BOOT_VERSION, .rank = rank, .size = size};
  snprintf(h.token, sizeof h.token, "%s", tok);
  snprintf(h.host, sizeof h.host, "%s", me);
  boot_reply rep;
  if (coll_sock_send_all(fd, &h, sizeof h, deadline, err, sizeof err) != 0 ||
      coll_sock_recv_all(fd, &rep, sizeof rep, deadline, err, sizeof err) != 0)
    return coll_fail(e, "rank %d (%s): rendezvous with rank 0 at %s failed: %s", rank, me,
                     b->root_desc, err);
  rep.reason[sizeof rep.reason - 1] = '\0';
  if (rep.magic != BOOT_MAGIC_REPLY)
    return coll_fail(e, "rank %d (%s): %s did not answer as a fabench rank 0", rank, me, b->root_desc);
  if (rep.status == BOOT_FAILED)
    return coll_fail(e, "rank %d (%s): rendezvous failed: %s", rank, me, rep.reason);
  if (rep.status != BOOT_ACCEPTED)
    return coll_fail(e, "rank %d (%s): rank 0 at %s rejected this rank: %s", rank, me,
                     b->root_desc, rep.reason);
  if (coll_sock_recv_all(fd, b->hosts, (size_t)size * COLL_HOST_MAX, deadline, err, sizeof err) != 0)
    return coll_fail(e, "rank %d (%s): rendezvous with rank 0 at %s failed: %s", rank, me,
                     b->root_desc, err);
  for (int r = 0; r < size; r++) b->hosts[r][COLL_HOST_MAX - 1] = '\0';
  return 0;
}

int coll_boot_from_fds(coll_boot **out, int rank, int size, const int *fds, int timeout_ms,
                       coll_err *e) {
  *out = NULL;
  coll_boot *b = calloc(1, sizeof *b);
  if (!b) return coll_fail(e, "out of memory");
  b->kind = COLL_BOOT_ENV;
  b->rank = rank;
  b->size = size;
  b->timeout_ms = timeout_ms;
  snprintf(b->root_desc, sizeof b->root_desc, "fds");
  if (rank < 0 || rank >= size || boot_alloc(b, e) != 0) {
    coll_boot_close(b);
    return rank < 0 || rank >= size ? coll_fail(e, "bad rank %d of %d", rank, size) : -1;
  }
  for (int r = 0; r < size; r++) {
    snprintf(b->hosts[r], COLL_HOST_MAX, "host%d", r);
    if (fds) b->fds[r] = fds[r];
  }
  boot_fill_locals(b);
  *out = b;
  return 0;
}

/* root_var: the variable(s) root came from, for the message when it is no host:port */
static int boot_open_env(coll_boot *b, int rank, int size, const char *root, const char *root_var,
                         const char *token, coll_err *e) {
  char rhost[256], err[512];
  int rport;
  char me[COLL_HOST_MAX] = "";
  boot_hostname(me, sizeof me);
  b->kind = COLL_BOOT_ENV;
  b->rank = rank;
  b->size = size;
  if (rank < 0 || rank >= size)
    return coll_fail(e, "bootstrap: rank %d is outside the world of %d", rank, size);
  if (boot_alloc(b, e) != 0) return -1;
  snprintf(b->hosts[rank], COLL_HOST_MAX, "%s", me);
  if (size == 1) {
    b->local_rank = 0;
    b->host_count = 1;
    return 0;
  }
  if (!root || coll_sock_split(root, rhost, sizeof rhost, &rport) != 0)
    return coll_fail(e, "rank %d (%s): bad or missing rendezvous address %s='%s' (want host:port)",
                     rank, me, root_var ? root_var : "FABENCH_ROOT", root ? root : "");
  snprintf(b->root_desc, sizeof b->root_desc, "%s:%d", rhost, rport);
  double deadline = boot_deadline(b);
  char tok[BOOT_TOKEN_MAX] = "";
  if (strlen(token) >= sizeof tok) /* a cut token would admit other jobs sharing its start */
    return coll_fail(e, "rank %d (%s): the job token is %zu characters, at most %d", rank, me,
                     strlen(token), BOOT_TOKEN_MAX - 1);
  snprintf(tok, sizeof tok, "%s", token);

  if (rank == 0) {
    int lfd, bound;
    const char *inherited = boot_env("FABENCH_ROOT_FD");
    if (inherited) {
      /* the launcher's own socket, listening since before any rank started: its port cannot
       * have been taken meanwhile, as a port it had only found free could */
      if (coll_sock_adopt_listener(inherited, rport, &lfd) != 0)
        return coll_fail(e, "rank 0 (%s): FABENCH_ROOT_FD=%s is not a socket listening on port %d", me,
                         inherited, rport);
    } else if (coll_sock_listen(NULL, rport, size + BOOT_PENDING_MAX, &lfd, &bound, err, sizeof err) != 0) {
      /* listen on every address: peers may reach the root by any of its names */
      return coll_fail(e, "rank 0 (%s): %s", me, err);
    }
    int rc = boot_root_admit(b, lfd, tok, deadline, me, rport, e);
    if (rc != 0) {
      close(lfd);
      return rc;
    }
    close(lfd);
    boot_reply ok = {.magic = BOOT_MAGIC_REPLY, .status = BOOT_ACCEPTED};
    for (int r = 1; r < size; r++) {
      if (coll_sock_send_all(b->fds[r], &ok, sizeof ok, deadline, err, sizeof err) != 0 ||
          coll_sock_send_all(b->fds[r], b->hosts, (size_t)size * COLL_HOST_MAX, deadline, err, sizeof err) != 0)
        return coll_fail(e, "rank 0 (%s): rendezvous with rank %d (%s) failed: %s", me, r, b->hosts[r], err);
    }
  } else {
    int fd;
    if (coll_sock_connect(rhost, rport, deadline, &fd, err, sizeof err) != 0) {
      /* refused every time: nothing listens there, a wrong address rather than a slow network */
      int refused = errno == ECONNREFUSED;
      return coll_fail(e, "rank %d (%s): cannot reach rank 0 at %s: %s%s%s%s", rank, me, b->root_desc, err,
                       refused ? " (is rank 0 running, and is " : "",
                       refused ? (root_var ? root_var : "FABENCH_ROOT") : "",
                       refused ? " its address and port?)" : "");
    }
    /* rank 0 gives its verdict by its own deadline, at most the timeout after it began to
     * listen, so before then: wait for it that long from now, also when this rank started
     * earlier and its own deadline comes first (else it would fail naming no missing rank) */
    double join_deadline = coll_sock_now() + b->timeout_ms / 1000.0 + BOOT_VERDICT_GRACE_S;
    if (coll_boot_join(b, fd, tok, join_deadline, e) != 0) return -1;
  }
  boot_fill_locals(b);
  return boot_check_local(b, e);
}

#if FABENCH_HAVE_MPI
static void *boot_watch_main(void *arg) {
  coll_boot *b = arg;
  struct pollfd pf = {.fd = b->watch.wake, .events = POLLIN};
  unsigned long long seen = 0; /* the call this thread is timing (seq), 0: none */
  double since = 0;            /* when it first saw it: at most one poll after it began */
  while (poll(&pf, 1, 100) == 0) {
    const char *what = atomic_load_explicit(&b->watch.what, memory_order_acquire);
    unsigned long long seq = atomic_load_explicit(&b->watch.seq, memory_order_relaxed);
    double now = coll_sock_now();
    if (!what || seq != seen) {
      seen = what ? seq : 0;
      since = now;
      continue;
    }
    long long extra = atomic_load_explicit(&b->watch.extra_ms, memory_order_relaxed);
    if ((now - since) * 1000.0 > (double)(b->timeout_ms + extra)) {
      fprintf(stderr, "fabench: rank %d (%s): %s did not complete within %d ms (a rank is dead, "
                      "stopped or unreachable): aborting the MPI job\n",
              atomic_load(&b->watch.rank), b->watch.host, what, b->timeout_ms);
      if (atomic_load(&b->watch.inited)) MPI_Abort(MPI_COMM_WORLD, 1);
      /* stuck in MPI_Init or MPI_Finalize, where MPI_Abort is not allowed: this rank's exit
       * makes the launcher stop the job, as MPI_Abort would */
      _exit(1);
    }
  }
  return NULL;
}

/* Watches `what` from now, allowed extra_ms beyond the timeout. Around every MPI_Test of a
 * wait, so no clock and no locked instruction here, only stores: the watchdog times the call
 * itself, and the calls never overlap (MPI_THREAD_SERIALIZED), so seq has one writer at a
 * time. A clock read here would be a tenth of a one-byte MPI message's latency. */
static void boot_watch_arm(coll_boot *b, const char *what, long long extra_ms) {
  if (!b || !b->watch.started) return;
  unsigned long long seq = atomic_load_explicit(&b->watch.seq, memory_order_relaxed);
  atomic_store_explicit(&b->watch.seq, seq + 1, memory_order_relaxed);
  atomic_store_explicit(&b->watch.extra_ms, extra_ms, memory_order_relaxed);
  atomic_store_explicit(&b->watch.what, what, memory_order_release);
}

void coll_boot_mpi_begin(coll_boot *b, const char *what) { boot_watch_arm(b, what, 0); }

void coll_boot_mpi_end(coll_boot *b) {
  if (b && b->watch.started) atomic_store_explicit(&b->watch.what, (const char *)NULL, memory_order_relaxed);
}

static void boot_watch_stop(coll_boot *b) {
  if (!b->watch.started) return;
  uint64_t one = 1;
  if (write(b->watch.wake, &one, sizeof one) == (ssize_t)sizeof one) pthread_join(b->watch.th, NULL);
  close(b->watch.wake);
  b->watch.started = 0;
}

static int boot_open_mpi(coll_boot *b, coll_err *e) {
  int inited = 0, provided;
  char me[COLL_HOST_MAX] = "";
  boot_hostname(me, sizeof me);
  /* watched from the start: MPI_Init itself waits for every rank */
  int env_rank = -1;
  boot_env_int("OMPI_COMM_WORLD_RANK", &env_rank);
  atomic_store(&b->watch.rank, env_rank);
  snprintf(b->watch.host, sizeof b->watch.host, "%s", me);
  b->watch.wake = eventfd(0, EFD_CLOEXEC);
  if (b->watch.wake < 0 || pthread_create(&b->watch.th, NULL, boot_watch_main, b) != 0) {
    if (b->watch.wake >= 0) close(b->watch.wake);
    return coll_fail(e, "rank %d (%s): cannot start the MPI watchdog", env_rank, me);
  }
  b->watch.started = 1;
  MPI_Initialized(&inited);
  coll_boot_mpi_begin(b, "MPI_Init");
  /* SERIALIZED, not MULTIPLE: with MULTIPLE, Open MPI's UCX layer takes locks that cost both
   * MPI_Allreduce and our own ucx transport about 3x at 1-16 MiB (measured 2.8 -> 10 GB/s) */
  if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
    return coll_fail(e, "MPI_Init_thread failed");
  coll_boot_mpi_end(b);
  atomic_store(&b->watch.inited, 1);
  b->kind = COLL_BOOT_MPI;
  MPI_Comm_rank(MPI_COMM_WORLD, &b->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b->size);
  atomic_store(&b->watch.rank, b->rank);
  if (boot_alloc(b, e) != 0) return -1;
  snprintf(b->hosts[b->rank], COLL_HOST_MAX, "%s", me);
  coll_boot_mpi_begin(b, "MPI_Allgather (bootstrap)");
  MPI_Allgather(me, COLL_HOST_MAX, MPI_CHAR, b->hosts, COLL_HOST_MAX, MPI_CHAR, MPI_COMM_WORLD);
  coll_boot_mpi_end(b);
  boot_fill_locals(b);
  return 0;
}
#else
void coll_boot_mpi_begin(coll_boot *b, const char *what) { (void)b, (void)what; }
void coll_boot_mpi_end(coll_boot *b) { (void)b; }
#endif

/* mpirun's variables, or a PMI server's (srun --mpi=pmix or pmi2). Slurm's own SLURM_PROCID is
 * no sign of one: a plain srun gives none, MPI_Init then aborts, and the environment rendezvous
 * takes its rank from SLURM_PROCID instead. */
static int boot_launched_by_mpi(void) {
  return boot_env("OMPI_COMM_WORLD_SIZE") || boot_env("PMIX_RANK") || boot_env("PMI_RANK");
}

/* torchrun sets all four, also when it runs inside sbatch or under mpirun: its rendezvous,
 * not the outer launcher's, is the one its processes share. */
static int boot_launched_by_torchrun(void) {
  return boot_env("RANK") && boot_env("WORLD_SIZE") && boot_env("MASTER_ADDR") && boot_env("MASTER_PORT");
}

/* The rank and world size a launcher gave in rvar and svar: 1 when both are good, 0 when rvar
 * is unset, -1 (with e naming the variables) when rvar is set but either is not a rank of a
 * world. A launcher that names a rank and no size is a mistake, not a world of one. */
static int boot_env_rank_size(const char *rvar, const char *svar, const char *me, int *rank,
                              int *size, coll_err *e) {
  if (!boot_env(rvar)) return 0;
  if (boot_env_int(rvar, rank) != 1)
    return coll_fail(e, "bootstrap (%s): %s='%s' is not a rank (want an integer >= 0)", me, rvar,
                     boot_env(rvar));
  if (!boot_env(svar))
    return coll_fail(e, "bootstrap (%s): %s=%d is set but %s is not: give the number of ranks", me,
                     rvar, *rank, svar);
  if (boot_env_int(svar, size) != 1 || *size < 1)
    return coll_fail(e, "bootstrap (%s): %s='%s' is not a world size (want an integer >= 1)", me,
                     svar, boot_env(svar));
  if (*rank >= *size)
    return coll_fail(e, "bootstrap (%s): rank %d is outside the world of %d (%s=%d, %s=%d)", me,
                     *rank, *size, rvar, *rank, svar, *size);
  return 1;
}

/* A launcher that named a world of several ranks (rvar, svar) must give its rendezvous
 * address, and torchrun's (from_master: MASTER_ADDR/MASTER_PORT) in both of its parts. */
static int boot_env_root_check(const char *root, int from_master, const char *rvar, int rank,
                               const char *svar, int size, const char *me, coll_err *e) {
  if (!root)
    return coll_fail(e, "bootstrap (%s): %s=%d of %s=%d but no rendezvous address: set "
                        "FABENCH_ROOT=host:port (or MASTER_ADDR and MASTER_PORT)",
                     me, rvar, rank, svar, size);
  if (!from_master) return 0;
  if (!boot_env("MASTER_ADDR"))
    return coll_fail(e, "bootstrap (%s): MASTER_PORT=%s is set but MASTER_ADDR is not", me,
                     boot_env("MASTER_PORT"));
  int port = 0;
  if (boot_env_int("MASTER_PORT", &port) != 1 || port < 1 || port > 65535)
    return coll_fail(e, "bootstrap (%s): MASTER_PORT='%s' is not a port (want 1-65535)", me,
                     boot_env("MASTER_PORT") ? boot_env("MASTER_PORT") : "");
  return 0;
}

int coll_boot_open(coll_boot **out, coll_boot_kind kind, int want_mpi, int timeout_ms, coll_err *e) {
  *out = NULL;
  coll_boot *b = calloc(1, sizeof *b);
  if (!b) return coll_fail(e, "out of memory");
  b->timeout_ms = timeout_ms > 0 ? timeout_ms : 60000;
  int rc;
  (void)want_mpi;
  if (kind == COLL_BOOT_AUTO) {
    if (boot_env("FABENCH_RANK") || boot_launched_by_torchrun()) kind = COLL_BOOT_ENV;
    else if (FABENCH_HAVE_MPI && boot_launched_by_mpi()) kind = COLL_BOOT_MPI;
    else kind = COLL_BOOT_ENV;
  }
  if (kind == COLL_BOOT_MPI) {
#if FABENCH_HAVE_MPI
    rc = boot_open_mpi(b, e);
    if (rc == 0 && b->size == 1) rc = boot_check_single(e);
#else
    rc = coll_fail(e, "MPI bootstrap requested but this fabench was built without MPI");
#endif
  } else {
    /* rank and size: ours, torchrun's, Slurm's, Open MPI's; the root: ours or torchrun's */
    int rank = -1, size = -1;
    char me[COLL_HOST_MAX] = "", rootbuf[300];
    boot_hostname(me, sizeof me);
    const char *root = boot_env("FABENCH_ROOT"), *root_var = "FABENCH_ROOT";
    const char *rvar = "FABENCH_RANK", *svar = "FABENCH_WORLD_SIZE";
    int given = boot_env_rank_size(rvar, svar, me, &rank, &size, e);
    if (given == 0) {
      rvar = "RANK", svar = "WORLD_SIZE";
      given = boot_env_rank_size(rvar, svar, me, &rank, &size, e);
    }
    if (given < 0) {
      rc = -1;
      goto done;
    }
    /* Slurm's and Open MPI's own variables only count with a rendezvous address: without
     * one, boot_check_single says why a world of one will not do */
    if (rank < 0) boot_env_int("SLURM_PROCID", &rank), boot_env_int("SLURM_NTASKS", &size);
    if (rank < 0) boot_env_int("OMPI_COMM_WORLD_RANK", &rank), boot_env_int("OMPI_COMM_WORLD_SIZE", &size);
    if (!root && (boot_env("MASTER_ADDR") || boot_env("MASTER_PORT"))) {
      snprintf(rootbuf, sizeof rootbuf, "%s:%s", boot_env("MASTER_ADDR") ? boot_env("MASTER_ADDR") : "",
               boot_env("MASTER_PORT") ? boot_env("MASTER_PORT") : "");
      root = rootbuf;
      root_var = "MASTER_ADDR/MASTER_PORT";
    }
    rc = given && size > 1 ? boot_env_root_check(root, root == rootbuf, rvar, rank, svar, size, me, e) : 0;
    if (rc == 0 && (rank < 0 || size < 1 || (size > 1 && !root))) {
      rc = boot_check_single(e);
      if (rc == 0) rc = boot_open_env(b, 0, 1, NULL, NULL, "", e); /* a world of one */
    } else if (rc == 0) {
      /* the token ties ranks to one job; without FABENCH_TOKEN, a job id stands in */
      const char *tok = boot_env("FABENCH_TOKEN");
      if (!tok) tok = boot_env("TORCHELASTIC_RUN_ID");
      if (!tok) tok = boot_env("SLURM_JOB_ID");
      if (!tok) tok = "fabench";
      rc = boot_open_env(b, rank, size, root, root_var, tok, e);
    }
  }
done:
  if (rc != 0) {
    coll_boot_close(b);
    return -1;
  }
  *out = b;
  return 0;
}

int coll_boot_rank(const coll_boot *b) { return b->rank; }
int coll_boot_size(const coll_boot *b) { return b->size; }
int coll_boot_local_rank(const coll_boot *b) { return b->local_rank; }
int coll_boot_host_count(const coll_boot *b) { return b->host_count; }
const char *coll_boot_host(const coll_boot *b, int rank) {
  return rank >= 0 && rank < b->size ? b->hosts[rank] : "?";
}
const char *coll_boot_kind_name(const coll_boot *b) {
  if (b->kind == COLL_BOOT_MPI) return "mpi";
  return b->size == 1 ? "single" : "env";
}

int coll_boot_allgather(coll_boot *b, void *all, const void *mine, size_t bytes, coll_err *e) {
  char *dst = all;
  if (b->size == 1) {
    memmove(dst, mine, bytes);
    return 0;
  }
#if FABENCH_HAVE_MPI
  if (b->kind == COLL_BOOT_MPI) {
    if (bytes > (size_t)1 << 30) return coll_fail(e, "bootstrap all-gather too large");
    /* not MPI_Allgather: Open MPI spins inside it, and a rank waiting here (the one-rank run's
     * heartbeat, a step's records) took a whole core from the ranks that compute; the control
     * plane can afford BOOT_MPI_SLEEP_US a poll */
    MPI_Request req;
    int done = 0;
    coll_boot_mpi_begin(b, "MPI_Allgather (bootstrap)");
    MPI_Iallgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD, &req);
    for (int polls = 0; MPI_Test(&req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done; polls++)
      if (polls >= BOOT_MPI_SPIN_TESTS) nanosleep(&(struct timespec){0, BOOT_MPI_SLEEP_US * 1000}, NULL);
    coll_boot_mpi_end(b);
    return done ? 0 : coll_fail(e, "rank %d (%s): MPI_Test failed in the bootstrap all-gather", b->rank, b->hosts[b->rank]);
  }
#endif
  char err[512];
  double deadline = boot_deadline(b);
  boot_frame f = {.magic = BOOT_MAGIC_GATHER, .bytes = bytes};
  if (b->rank == 0) {
    memmove(dst, mine, bytes);
    for (int r = 1; r < b->size; r++) {
      boot_frame g;
      if (coll_sock_recv_all(b->fds[r], &g, sizeof g, deadline, err, sizeof err) != 0)
        return coll_fail(e, "rank 0 (%s): bootstrap exchange with rank %d (%s): %s", b->hosts[0], r,
                         b->hosts[r], err);
      if (g.magic != BOOT_MAGIC_GATHER || g.bytes != bytes)
        return coll_fail(e, "rank 0 (%s): rank %d (%s) sent a bootstrap message of %llu bytes, "
                            "expected %zu (different fabench versions or flags?)",
                         b->hosts[0], r, b->hosts[r], (unsigned long long)g.bytes, bytes);
      if (coll_sock_recv_all(b->fds[r], dst + (size_t)r * bytes, bytes, deadline, err, sizeof err) != 0)
        return coll_fail(e, "rank 0 (%s): bootstrap exchange with rank %d (%s): %s", b->hosts[0], r,
                         b->hosts[r], err);
    }
    boot_frame out = {.magic = BOOT_MAGIC_GATHER, .bytes = bytes * (uint64_t)b->size};
    for (int r = 1; r < b->size; r++)
      if (coll_sock_send_all(b->fds[r], &out, sizeof out, deadline, err, sizeof err) != 0 ||
          coll_sock_send_all(b->fds[r], dst, bytes * (size_t)b->size, deadline, err, sizeof err) != 0)
        return coll_fail(e, "rank 0 (%s): bootstrap exchange with rank %d (%s): %s", b->hosts[0], r,
                         b->hosts[r], err);
    return 0;
  }
  boot_frame g;
  if (coll_sock_send_all(b->fds[0], &f, sizeof f, deadline, err, sizeof err) != 0 ||
      coll_sock_send_all(b->fds[0], mine, bytes, deadline, err, sizeof err) != 0 ||
      coll_sock_recv_all(b->fds[0], &g, sizeof g, deadline, err, sizeof err) != 0)
    return coll_fail(e, "rank %d (%s): bootstrap exchange with rank 0 (%s): %s", b->rank,
                     b->hosts[b->rank], b->hosts[0], err);
  if (g.magic != BOOT_MAGIC_GATHER || g.bytes != bytes * (uint64_t)b->size)
    return coll_fail(e, "rank %d (%s): rank 0 (%s) sent a malformed bootstrap message",
                     b->rank, b->hosts[b->rank], b->hosts[0]);
  if (coll_sock_recv_all(b->fds[0], dst, bytes * (size_t)b->size, deadline, err, sizeof err) != 0)
    return coll_fail(e, "rank %d (%s): bootstrap exchange with rank 0 (%s): %s", b->rank,
                     b->hosts[b->rank], b->hosts[0], err);
  return 0;
}

int coll_boot_barrier(coll_boot *b, coll_err *e) {
  uint8_t one = 1, *all = malloc((size_t)b->size);
  if (!all) return coll_fail(e, "out of memory");
  int rc = coll_boot_allgather(b, all, &one, 1, e);
  free(all);
  return rc;
}

static int boot_first_ipv4(char *out, size_t cap) {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host, NULL, &hints, &res) != 0) return -1;
  int rc = -1;
  for (struct addrinfo *ai = res; ai && rc; ai = ai->ai_next) {
    struct sockaddr_in *sin = (struct sockaddr_in *)ai->ai_addr;
    if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127) continue;
    if (inet_ntop(AF_INET, &sin->sin_addr, out, (socklen_t)cap)) rc = 0;
  }
  freeaddrinfo(res);
  return rc;
}

int coll_boot_advertise_addr(const coll_boot *b, char *out, size_t cap, coll_err *e) {
  const char *bind = boot_env("FABENCH_BIND_ADDR");
  if (bind) {
    snprintf(out, cap, "%s", bind);
    return 0;
  }
  if (b->host_count <= 1) {
    snprintf(out, cap, "127.0.0.1");
    return 0;
  }
  if (b->local_addr[0]) {
    snprintf(out, cap, "%s", b->local_addr);
    return 0;
  }
  if (boot_first_ipv4(out, cap) == 0) return 0;
  return coll_fail(e, "rank %d (%s): cannot find an address for peers to reach; set FABENCH_BIND_ADDR",
                   b->rank, b->hosts[b->rank]);
}

void coll_boot_abort(coll_boot *b) {
#if FABENCH_HAVE_MPI
  if (b && b->kind == COLL_BOOT_MPI && b->size > 1) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) {
      fflush(NULL);
      MPI_Abort(MPI_COMM_WORLD, 1); /* the runtime stops every rank; it does not return */
    }
  }
#endif
  coll_boot_close(b);
}

void coll_boot_close(coll_boot *b) {
  if (!b) return;
  if (b->fds)
    for (int i = 0; i < b->size; i++)
      if (b->fds[i] >= 0) close(b->fds[i]);
#if FABENCH_HAVE_MPI
  if (b->kind == COLL_BOOT_MPI) {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) { /* Open MPI's MPI_Finalize waits for every rank: a stopped one would hold it */
      atomic_store(&b->watch.inited, 0);
      /* a healthy job's ranks come to it at their own pace (rank 0 writes the results first):
       * a minute more than any other call */
      boot_watch_arm(b, "MPI_Finalize", BOOT_FINALIZE_GRACE_MS);
      MPI_Finalize();
      coll_boot_mpi_end(b);
    }
  }
  boot_watch_stop(b);
#endif
  free(b->fds);
  free(b->hosts);
  free(b);
}
