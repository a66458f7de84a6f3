/* ucx transport: UCP tag API over one worker, one endpoint per peer.
 *
 * Tags are 64 bits: bit 63 marks our own control messages (wire-up check, close barrier),
 * bits 32..62 carry the sender's rank and bits 0..31 the caller's tag. A receive matches on the
 * sender's rank only, so receives from one peer take that peer's messages in post order (UCP
 * keeps tag messages on one endpoint in order); the caller's tag and size are then checked, and
 * a difference is a protocol error rather than a silent wait for another message.
 *
 * UCX picks its transports itself and honours UCX_TLS and UCX_NET_DEVICES (ucp_config_read).
 * What it picked is read back from ucp_ep_print_info and kept in the `fabric` string.
 *
 * Large messages go eager (UCX_RNDV_THRESH=inf unless the user set it) where tcp is the only
 * network: UCX's rendezvous over tcp waits for a reply queued behind the bulk data going the
 * other way, while over shared memory eager is the slower (docs/measurements.md, "Open
 * MPI's rendezvous on TCP"). So: tcp-only contexts, and beside shared memory where a peer is on
 * another host, since the bulk of a large call then crosses tcp. */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <ucp/api/ucp.h>

#include "coll_internal.h"

#define UCX_CTRL_BIT (1ull << 63)
#define UCX_SRC_SHIFT 32
#define UCX_SRC_MASK 0xffffffff00000000ull /* the control bit and the rank */
#define UCX_FULL_MASK 0xffffffffffffffffull
#define UCX_CTRL_HELLO 1u
#define UCX_CTRL_CLOSE 2u
#define UCX_CTRL_RKEY 3u   /* mem_alloc: a region's address and packed key */
#define UCX_CTRL_MAPPED 4u /* mem_alloc: whether a rank mapped every peer's copy */
#define UCX_RKEY_MAX 480   /* packed sysv/posix keys are a few dozen bytes */
#define UCX_CLOSE_TIMEOUT_MS 10000
#define UCX_PURE_SPIN_US 2      /* idle this long: poll only; then also yield the core */
#define UCX_SPIN_US_DEFAULT 200 /* idle this long: sleep on the worker's events */
#define UCX_SLEEP_SLICE_MS 10   /* longest sleep between progress calls */
/* How often UCX's keepalive probes the peers of endpoints with peer error handling (its default
 * is 20 s): a dead peer whose connection does not break by itself (a host gone, a link down)
 * is then reported within about this long. UCX_KEEPALIVE_INTERVAL overrides. */
#define UCX_KEEPALIVE_DEFAULT "1s"

enum { UREQ_PENDING = 1, UREQ_DONE = 2, UREQ_FAILED = 3 };

/* What lives in the caller's coll_req. */
typedef struct {
  void *ureq;  /* UCX request while pending, else NULL */
  ucp_tag_recv_info_t info; /* a finished receive: the sender's tag and the length */
  size_t bytes;
  uint32_t tag;
  int peer;
  int is_send;
  int state;
} ucx_req;
_Static_assert(sizeof(ucx_req) <= sizeof(coll_req), "ucx_req must fit in coll_req");

/* A coll_mem_alloc region. When `mapped`, every rank has mapped the copy of every rank on its
 * host: peer[p] is rank p's copy as seen from here (peer[rank] = base; NULL on other hosts). */
typedef struct {
  char *base;
  size_t bytes;
  ucp_mem_h mh;       /* NULL: plain memory (mapping off, UCX could not allocate, or not mapped) */
  ucp_rkey_h *rkeys;  /* size entries, NULL where none; the array may be NULL where not mapped */
  char **peer;        /* size entries; may be NULL where not mapped */
  int mapped;
  uint64_t id;        /* allocation number: equal on every rank for the same region */
} ucx_region;

/* What a rank tells every peer about its copy of a new region (one control message). */
typedef struct {
  uint64_t ok, addr, key_len;
  unsigned char key[UCX_RKEY_MAX];
} ucx_rkey_msg;

typedef struct {
  coll_transport base; /* first */
  ucp_context_h ctx;
  ucp_worker_h worker;
  ucp_ep_h *eps; /* size entries; eps[rank] is made on first use */
  ucs_status_t *gone; /* size entries: UCS_OK, or why the peer is known to have failed */
  int any_gone;
  /* Peers on this host talk over shared memory, which has no peer failure handler in UCX
   * (1.13): their endpoints are made without one and their processes are watched instead. */
  long *local_pid; /* size entries: the peer's pid when it runs on this host, else 0 */
  double pid_checked_ms;
  int failed;    /* an error was seen: close without the goodbye barrier */
  int efd;       /* the worker's event fd (sleeping when idle), -1: spin only */
  double spin_ms;
  int map;          /* coll_mem_alloc may hand out memory that peers map */
  int timeout_ms;
  ucx_region *regions;
  int nregions, cap_regions;
  uint64_t next_region;
} ucx_tp;

static double ucx_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static const char *ucx_host(const ucx_tp *u, int rank) {
  if (u->base.comm) {
    const char *h = coll_comm_host(u->base.comm, rank);
    if (h && *h) return h;
  }
  return "?";
}

static uint64_t ucx_tag(int src, uint32_t tag) {
  return ((uint64_t)(uint32_t)src << UCX_SRC_SHIFT) | tag;
}

/* UCX's peer error handling (UCP_ERR_HANDLING_MODE_PEER): called from ucp_worker_progress when
 * an endpoint's peer is found dead or unreachable, so waits fail at once instead of at the
 * timeout. The endpoint is unusable from then on. */
static void ucx_peer_failed(void *arg, ucp_ep_h ep, ucs_status_t status) {
  ucx_tp *u = arg;
  for (int p = 0; p < u->base.size; p++)
    if (u->eps[p] == ep && u->gone[p] == UCS_OK) {
      u->gone[p] = status != UCS_OK ? status : UCS_ERR_ENDPOINT_TIMEOUT;
      u->any_gone = 1;
      u->failed = 1;
    }
}

static int ucx_gone_fail(ucx_tp *u, int peer, const char *doing, size_t bytes, coll_err *e) {
  char why[96];
  if (u->local_pid[peer] && u->gone[peer] == UCS_ERR_CONNECTION_RESET)
    snprintf(why, sizeof why, "its process %ld exited", u->local_pid[peer]);
  else
    snprintf(why, sizeof why, "UCX peer failure: %s", ucs_status_string(u->gone[peer]));
  return coll_fail(e, "ucx: rank %d (%s): rank %d (%s) is gone (%s) while %s %zu bytes %s it",
                   u->base.rank, ucx_host(u, u->base.rank), peer, ucx_host(u, peer), why, doing,
                   bytes, strcmp(doing, "sending") ? "from" : "to");
}

/* At most every 100 ms: marks gone the local peers of pending requests whose process is no
 * more (a killed rank; a stopped one is alive and left to the timeout). */
static void ucx_check_local_peers(ucx_tp *u, ucx_req **qs, int first, int n, double now) {
  if (now - u->pid_checked_ms < 100) return;
  u->pid_checked_ms = now;
  for (int i = first; i < n; i++) {
    int p = qs[i]->peer;
    if (qs[i]->state == UREQ_PENDING && u->local_pid[p] > 0 && u->gone[p] == UCS_OK &&
        kill((pid_t)u->local_pid[p], 0) != 0 && errno == ESRCH) {
      u->gone[p] = UCS_ERR_CONNECTION_RESET;
      u->any_gone = 1;
      u->failed = 1;
    }
  }
}

static ucp_ep_h ucx_ep(ucx_tp *u, int peer, coll_err *e) {
  if (peer < 0 || peer >= u->base.size) {
    coll_fail(e, "ucx: rank %d: peer rank %d out of range (size %d)", u->base.rank, peer,
              u->base.size);
    return NULL;
  }
  if (!u->eps[peer] && peer == u->base.rank) {
    /* a message to oneself: an endpoint to our own worker (self or any loopback transport) */
    ucp_address_t *addr;
    size_t len;
    ucs_status_t st = ucp_worker_get_address(u->worker, &addr, &len);
    if (st == UCS_OK) {
      ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS, .address = addr};
      st = ucp_ep_create(u->worker, &ep, &u->eps[peer]);
      ucp_worker_release_address(u->worker, addr);
    }
    if (st != UCS_OK) {
      coll_fail(e, "ucx: rank %d (%s): cannot reach itself: %s", u->base.rank,
                ucx_host(u, u->base.rank), ucs_status_string(st));
      return NULL;
    }
  }
  return u->eps[peer];
}

static int ucx_post_send(ucx_tp *u, int peer, const void *buf, size_t bytes, uint64_t tag,
                         ucx_req *q, coll_err *e) {
  ucp_ep_h ep = ucx_ep(u, peer, e);
  if (!ep) return -1;
  if (u->gone[peer] != UCS_OK) {
    q->ureq = NULL;
    q->state = UREQ_FAILED;
    return ucx_gone_fail(u, peer, "sending", bytes, e);
  }
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE,
                           .memory_type = UCS_MEMORY_TYPE_HOST};
  ucs_status_ptr_t r = ucp_tag_send_nbx(ep, bytes ? buf : (const void *)q, bytes, tag, &p);
  q->ureq = NULL;
  q->bytes = bytes;
  q->tag = (uint32_t)tag;
  q->peer = peer;
  q->is_send = 1;
  if (UCS_PTR_IS_ERR(r)) {
    q->state = UREQ_FAILED;
    u->failed = 1;
    return coll_fail(e, "ucx: rank %d (%s): send of %zu bytes to rank %d (%s) failed: %s",
                     u->base.rank, ucx_host(u, u->base.rank), bytes, peer, ucx_host(u, peer),
                     ucs_status_string(UCS_PTR_STATUS(r)));
  }
  q->ureq = r;
  q->state = r ? UREQ_PENDING : UREQ_DONE;
  return 0;
}

static int ucx_post_recv(ucx_tp *u, int peer, void *buf, size_t bytes, uint64_t tag,
                         uint64_t mask, ucx_req *q, coll_err *e) {
  if (peer < 0 || peer >= u->base.size)
    return coll_fail(e, "ucx: rank %d: peer rank %d out of range (size %d)", u->base.rank, peer,
                     u->base.size);
  if (u->gone[peer] != UCS_OK) {
    q->ureq = NULL;
    q->state = UREQ_FAILED;
    return ucx_gone_fail(u, peer, "receiving", bytes, e);
  }
  memset(&q->info, 0, sizeof q->info);
  /* always a request: the sender's tag and length are then read from it (ucp_tag_recv_request_
   * test), the one place UCX 1.13 reliably reports them */
  ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE |
                                           UCP_OP_ATTR_FLAG_NO_IMM_CMPL,
                           .memory_type = UCS_MEMORY_TYPE_HOST};
  ucs_status_ptr_t r = ucp_tag_recv_nbx(u->worker, bytes ? buf : (void *)q, bytes, tag, mask, &p);
  q->ureq = NULL;
  q->bytes = bytes;
  q->tag = (uint32_t)tag;
  q->peer = peer;
  q->is_send = 0;
  if (UCS_PTR_IS_ERR(r)) {
    q->state = UREQ_FAILED;
    u->failed = 1;
    return coll_fail(e, "ucx: rank %d (%s): receive of %zu bytes from rank %d (%s) failed: %s",
                     u->base.rank, ucx_host(u, u->base.rank), bytes, peer, ucx_host(u, peer),
                     ucs_status_string(UCS_PTR_STATUS(r)));
  }
  q->ureq = r;
  q->state = r ? UREQ_PENDING : UREQ_DONE;
  return 0;
}

/* A finished receive must be the message that was posted for: same tag, same size. */
static int ucx_check_recv(ucx_tp *u, ucx_req *q, ucs_status_t st, coll_err *e) {
  const ucp_tag_recv_info_t *in = &q->info;
  uint32_t got_tag = (uint32_t)(in->sender_tag & 0xffffffffu);
  if (st == UCS_ERR_MESSAGE_TRUNCATED || (st == UCS_OK && (in->length != q->bytes ||
                                                            got_tag != q->tag))) {
    u->failed = 1;
    if (st == UCS_ERR_MESSAGE_TRUNCATED)
      return coll_fail(e,
                       "ucx: rank %d (%s): protocol error: message from rank %d (%s) is larger "
                       "than the %zu bytes posted (tag %u)",
                       u->base.rank, ucx_host(u, u->base.rank), q->peer, ucx_host(u, q->peer),
                       q->bytes, q->tag);
    return coll_fail(e,
                     "ucx: rank %d (%s): protocol error: expected tag %u of %zu bytes from rank "
                     "%d (%s), got tag %u of %zu bytes",
                     u->base.rank, ucx_host(u, u->base.rank), q->tag, q->bytes, q->peer,
                     ucx_host(u, q->peer), got_tag, in->length);
  }
  return 0;
}

/* Updates q from its UCX request: 1 when finished (done or failed), 0 while pending. */
static int ucx_poll(ucx_tp *u, ucx_req *q, coll_err *e, int *err) {
  if (q->state != UREQ_PENDING) return 1;
  ucs_status_t st;
  if (!q->is_send)
    st = ucp_tag_recv_request_test(q->ureq, &q->info);
  else
    st = ucp_request_check_status(q->ureq);
  if (st == UCS_INPROGRESS) return 0;
  ucp_request_free(q->ureq);
  q->ureq = NULL;
  if (st != UCS_OK && st != UCS_ERR_MESSAGE_TRUNCATED) {
    q->state = UREQ_FAILED;
    u->failed = 1;
    *err = coll_fail(e, "ucx: rank %d (%s): %s of %zu bytes %s rank %d (%s) failed: %s",
                     u->base.rank, ucx_host(u, u->base.rank), q->is_send ? "send" : "receive",
                     q->bytes, q->is_send ? "to" : "from", q->peer, ucx_host(u, q->peer),
                     ucs_status_string(st));
    return 1;
  }
  if (!q->is_send && ucx_check_recv(u, q, st, e) != 0) {
    q->state = UREQ_FAILED;
    *err = -1;
    return 1;
  }
  q->state = UREQ_DONE;
  return 1;
}

/* Gives up on a request (after a failure or timeout): receives are cancelled so UCX stops
 * matching into the caller's buffer. */
static void ucx_abandon(ucx_tp *u, ucx_req *q) {
  if (q->state == UREQ_PENDING && q->ureq) {
    if (!q->is_send) ucp_request_cancel(u->worker, q->ureq);
    ucp_request_free(q->ureq);
  }
  q->ureq = NULL;
  q->state = UREQ_FAILED;
}

/* Waits for n requests (our layout); on error or timeout every unfinished one is abandoned. */
static int ucx_wait(ucx_tp *u, ucx_req **qs, int n, int timeout_ms, const char *what,
                    coll_err *e) {
  double deadline = ucx_now_ms() + (timeout_ms > 0 ? timeout_ms : 60000);
  int first = 0; /* everything before this index has finished */
  int err = 0;
  double idle_since = -1;
  for (;;) {
    while (first < n && ucx_poll(u, qs[first], e, &err)) {
      if (err) goto fail;
      if (qs[first]->state == UREQ_FAILED) {
        err = coll_fail(e, "ucx: rank %d (%s): waited on a request that had failed",
                        u->base.rank, ucx_host(u, u->base.rank));
        goto fail;
      }
      first++;
    }
    /* later requests are polled too, so an error is seen as soon as it happens */
    for (int i = first + 1; i < n; i++) {
      ucx_poll(u, qs[i], e, &err);
      if (err) goto fail;
    }
    if (first == n) return 0;
    unsigned events = 0, k;
    while ((k = ucp_worker_progress(u->worker))) events += k;
    /* a receive is posted on the worker, not on an endpoint: UCX does not fail it when its
     * sender dies, so the requests on a peer its error handler reported are failed here */
    for (int i = first; u->any_gone && i < n; i++)
      if (qs[i]->state == UREQ_PENDING && u->gone[qs[i]->peer] != UCS_OK) {
        err = ucx_gone_fail(u, qs[i]->peer, qs[i]->is_send ? "sending" : "receiving",
                            qs[i]->bytes, e);
        goto fail;
      }
    if (events) {
      idle_since = -1;
      continue;
    }
    double now = ucx_now_ms();
    ucx_check_local_peers(u, qs, first, n, now);
    if (now > deadline) {
      ucx_req *q = qs[first];
      u->failed = 1;
      err = coll_fail(e,
                      "ucx: rank %d (%s): timed out after %d ms %s: %s of %zu bytes (tag %u) "
                      "%s rank %d (%s) did not complete",
                      u->base.rank, ucx_host(u, u->base.rank), timeout_ms, what,
                      q->is_send ? "send" : "receive", q->bytes, q->tag,
                      q->is_send ? "to" : "from", q->peer, ucx_host(u, q->peer));
      goto fail;
    }
    if (idle_since < 0) {
      idle_since = now;
    } else if (now - idle_since <= UCX_PURE_SPIN_US / 1000.0) {
      /* a message usually comes within microseconds: just poll */
    } else if (now - idle_since <= u->spin_ms) {
      /* still nothing: let a peer that waits for this core run (on a busy machine the
       * message we wait for may be stuck behind us) */
      sched_yield();
    } else if (u->efd >= 0 && now - idle_since > u->spin_ms) {
      /* idle for a while: sleep on the worker's events, so ranks that share cores with each
       * other (or with anything else) do not take each other's time slices */
      if (ucp_worker_arm(u->worker) == UCS_OK) {
        struct pollfd pfd = {.fd = u->efd, .events = POLLIN};
        double left = deadline - now;
        int ms = left < UCX_SLEEP_SLICE_MS ? (int)left + 1 : UCX_SLEEP_SLICE_MS;
        if (poll(&pfd, 1, ms) < 0 && errno != EINTR) { /* spin from now on */
          u->efd = -1;
          u->base.sleeps = 0;
        }
      }
      idle_since = -1;
    }
  }
fail:
  for (int i = 0; i < n; i++) ucx_abandon(u, qs[i]);
  return -1;
}

/* ---- the vtable ---- */

static int ucx_isend(coll_transport *t, int peer, const void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  return ucx_post_send(u, peer, buf, bytes, ucx_tag(t->rank, tag), (ucx_req *)r->opaque, e);
}

static int ucx_irecv(coll_transport *t, int peer, void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  ucx_req *q = (ucx_req *)r->opaque;
  if (ucx_post_recv(u, peer, buf, bytes, ucx_tag(peer, 0), UCX_SRC_MASK, q, e) != 0) return -1;
  q->tag = tag; /* what is expected; the match itself is on the sender only */
  if (q->state == UREQ_DONE && ucx_check_recv(u, q, UCS_OK, e) != 0) {
    q->state = UREQ_FAILED;
    return -1;
  }
  return 0;
}

static int ucx_test(coll_transport *t, coll_req *r, int *done, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  ucx_req *q = (ucx_req *)r->opaque;
  while (ucp_worker_progress(u->worker)) {
  }
  int err = 0;
  *done = ucx_poll(u, q, e, &err);
  if (err) return -1;
  if (!*done && u->gone[q->peer] != UCS_OK) {
    int rc = ucx_gone_fail(u, q->peer, q->is_send ? "sending" : "receiving", q->bytes, e);
    ucx_abandon(u, q);
    return rc;
  }
  if (*done && q->state == UREQ_FAILED)
    return coll_fail(e, "ucx: rank %d (%s): tested a request that had failed", t->rank,
                     ucx_host(u, t->rank));
  return 0;
}

static int ucx_waitall(coll_transport *t, coll_req *r, int n, int timeout_ms, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  ucx_req *stackq[64];
  ucx_req **qs = n <= 64 ? stackq : malloc(sizeof *qs * (size_t)n);
  if (!qs) return coll_fail(e, "ucx: out of memory");
  for (int i = 0; i < n; i++) qs[i] = (ucx_req *)r[i].opaque;
  int rc = ucx_wait(u, qs, n, timeout_ms, "in waitall", e);
  if (qs != stackq) free(qs);
  return rc;
}


/* Every rank sends `len` bytes to every peer and, unless `all` is NULL, receives each peer's
 * into all + p * len (its own goes to all + rank * len). */
static int ucx_ctrl_allgather(ucx_tp *u, uint32_t what, const void *mine, size_t len, void *all,
                              int timeout_ms, const char *doing, coll_err *e) {
  int n = u->base.size, me = u->base.rank, k = 0, rc = 0;
  ucx_req *q = calloc((size_t)(2 * n), sizeof *q);
  ucx_req **qs = calloc((size_t)(2 * n), sizeof *qs);
  if (!q || !qs) {
    free(q);
    free(qs);
    return coll_fail(e, "ucx: out of memory");
  }
  if (all) memcpy((char *)all + (size_t)me * len, mine, len);
  for (int p = 0; p < n && rc == 0 && all; p++) {
    if (p == me) continue;
    rc = ucx_post_recv(u, p, (char *)all + (size_t)p * len, len, UCX_CTRL_BIT | ucx_tag(p, what),
                       UCX_FULL_MASK, &q[k], e);
    if (rc == 0) qs[k] = &q[k], k++;
  }
  for (int p = 0; p < n && rc == 0; p++) {
    if (p == me) continue;
    rc = ucx_post_send(u, p, mine, len, UCX_CTRL_BIT | ucx_tag(me, what), &q[k], e);
    if (rc == 0) qs[k] = &q[k], k++;
  }
  if (rc != 0)
    for (int i = 0; i < k; i++) ucx_abandon(u, qs[i]);
  else
    rc = ucx_wait(u, qs, k, timeout_ms, doing, e);
  free(q);
  free(qs);
  return rc;
}

/* Every rank tells every peer `what` and (hear_back) hears it from each: proves the endpoints
 * work (open) and that nobody still needs us (close). */
static int ucx_exchange(ucx_tp *u, uint32_t what, int hear_back, int timeout_ms, coll_err *e) {
  unsigned char out = (unsigned char)what, *in = hear_back ? calloc((size_t)u->base.size, 1) : NULL;
  if (hear_back && !in) return coll_fail(e, "ucx: out of memory");
  int rc = ucx_ctrl_allgather(u, what, &out, 1, in, timeout_ms,
                              what == UCX_CTRL_HELLO ? "connecting to peers" : "closing", e);
  free(in);
  return rc;
}

/* ---- memory that peers read in place ----
 * ucp_mem_map(ALLOCATE) takes the memory from UCX's allocators, shared memory (sysv, posix)
 * first; its packed key lets a peer on the same host attach the segment (ucp_rkey_ptr), the
 * single-copy path UCX offers for shared memory. The ring then reads its neighbour's partial
 * sums where they lie instead of having UCX copy them over (a rendezvous with a CMA copy into
 * scratch, then a reduction from it): one pass over the data instead of two, no page pinning
 * and no handshake per message. */
/* Is rank p on this rank's host (itself included)? Without a communicator to name hosts, every
 * rank is taken to be. */
static int ucx_same_host(const ucx_tp *u, int p) {
  return p == u->base.rank || !u->base.comm || u->local_pid[p] != 0;
}

static void ucx_region_release(ucx_tp *u, ucx_region *g) {
  for (int p = 0; g->rkeys && p < u->base.size; p++)
    if (g->rkeys[p]) ucp_rkey_destroy(g->rkeys[p]);
  if (g->mh)
    ucp_mem_unmap(u->ctx, g->mh);
  else
    free(g->base);
  free(g->rkeys);
  free(g->peer);
  memset(g, 0, sizeof *g);
}

static void *ucx_mem_alloc(coll_transport *t, size_t bytes, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  int n = t->size, me = t->rank;
  if (u->nregions == u->cap_regions) {
    int cap = u->cap_regions ? 2 * u->cap_regions : 4;
    ucx_region *r = realloc(u->regions, (size_t)cap * sizeof *r);
    if (!r) return coll_fail(e, "ucx: out of memory"), NULL;
    u->regions = r;
    u->cap_regions = cap;
  }
  ucx_region g = {.id = u->next_region++};
  g.bytes = bytes ? bytes : 64;
  g.rkeys = calloc((size_t)n, sizeof *g.rkeys);
  g.peer = calloc((size_t)n, sizeof *g.peer);
  ucx_rkey_msg *msg = calloc(1, sizeof *msg), *all = calloc((size_t)n, sizeof *all);
  unsigned char ok_all = 0, *oks = calloc((size_t)n, 1);
  if (!g.rkeys || !g.peer || !msg || !all || !oks) {
    coll_fail(e, "ucx: out of memory");
    goto fail;
  }
  if (u->map && n > 1) {
    ucp_mem_map_params_t mp = {.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                                             UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                                             UCP_MEM_MAP_PARAM_FIELD_FLAGS,
                               .address = NULL,
                               .length = g.bytes,
                               .flags = UCP_MEM_MAP_ALLOCATE};
    ucp_mem_attr_t at = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS};
    void *key = NULL;
    size_t key_len = 0;
    if (ucp_mem_map(u->ctx, &mp, &g.mh) != UCS_OK) g.mh = NULL;
    if (g.mh && ucp_mem_query(g.mh, &at) == UCS_OK && ucp_rkey_pack(u->ctx, g.mh, &key, &key_len) == UCS_OK) {
      g.base = at.address;
      if (key_len <= UCX_RKEY_MAX) {
        msg->ok = 1;
        msg->addr = (uint64_t)(uintptr_t)g.base;
        msg->key_len = key_len;
        memcpy(msg->key, key, key_len);
      }
      ucp_rkey_buffer_release(key);
    } else if (g.mh) {
      ucp_mem_unmap(u->ctx, g.mh);
      g.mh = NULL;
    }
    /* collective from here on, whatever this rank got: the peers wait for our key */
    if (ucx_ctrl_allgather(u, UCX_CTRL_RKEY, msg, sizeof *msg, all, u->timeout_ms, "exchanging memory keys", e) != 0)
      goto fail;
    /* Every peer on this host must map (bit 0 of what a rank tells); peers on other hosts are
     * not tried. bit 1: this rank has a peer on its host, so that mapping is of use to someone. */
    int mapped = msg->ok != 0, local = 0;
    for (int p = 0; p < n && mapped; p++) {
      if (p == me) {
        g.peer[p] = g.base;
        continue;
      }
      if (!ucx_same_host(u, p)) continue;
      void *ptr = NULL;
      local = 1;
      if (!all[p].ok || ucp_ep_rkey_unpack(u->eps[p], all[p].key, &g.rkeys[p]) != UCS_OK ||
          ucp_rkey_ptr(g.rkeys[p], all[p].addr, &ptr) != UCS_OK)
        mapped = 0; /* a key from another allocator, or no shared memory */
      g.peer[p] = ptr;
    }
    unsigned char mine = (unsigned char)(mapped | local << 1);
    if (ucx_ctrl_allgather(u, UCX_CTRL_MAPPED, &mine, 1, oks, u->timeout_ms, "exchanging memory keys", e) != 0)
      goto fail;
    unsigned char used = 0;
    ok_all = 1;
    for (int p = 0; p < n; p++) ok_all &= oks[p] & 1, used |= oks[p] & 2;
    ok_all = ok_all && used;
    /* Memory no peer reads in place is ordinary memory: without shared memory UCX allocates
     * transparent huge pages, on which compute ran slower in spells (docs/measurements.md,
     * "Mapped buffers on ucx: ordinary memory where nothing maps") */
    if (!ok_all && g.mh) {
      ucx_region plain = {.id = g.id, .bytes = g.bytes};
      ucx_region_release(u, &g);
      g = plain;
    }
  }
  if (!g.base) {
    void *p = NULL;
    if (posix_memalign(&p, 64, g.bytes) != 0) {
      coll_fail(e, "ucx: rank %d: cannot allocate %zu bytes", me, g.bytes);
      goto fail;
    }
    g.base = p;
  }
  g.mapped = ok_all;
  if (g.mapped && !strstr(t->fabric, "+rkey_ptr")) {
    size_t used = strlen(t->fabric);
    snprintf(t->fabric + used, sizeof t->fabric - used, "+rkey_ptr");
  }
  u->regions[u->nregions++] = g;
  free(msg);
  free(all);
  free(oks);
  return g.base;
fail:
  ucx_region_release(u, &g);
  free(msg);
  free(all);
  free(oks);
  return NULL;
}

static void ucx_mem_free(coll_transport *t, void *p) {
  ucx_tp *u = (ucx_tp *)t;
  for (int i = 0; i < u->nregions; i++)
    if (u->regions[i].base == p) {
      ucx_region_release(u, &u->regions[i]);
      u->regions[i] = u->regions[--u->nregions];
      return;
    }
}

static const void *ucx_peer_ptr(coll_transport *t, int peer, const void *buf, size_t bytes,
                                uint64_t where[2]) {
  ucx_tp *u = (ucx_tp *)t;
  const char *b = buf;
  if (peer < 0 || peer >= t->size || !ucx_same_host(u, peer)) return NULL;
  for (int i = 0; i < u->nregions; i++) {
    const ucx_region *g = &u->regions[i];
    if (!g->mapped || b < g->base || b > g->base + g->bytes || bytes > (size_t)(g->base + g->bytes - b))
      continue;
    size_t off = (size_t)(b - g->base);
    where[0] = g->id;
    where[1] = off;
    return g->peer[peer] + off;
  }
  return NULL;
}

/* Does the context reach other processes through tcp only (its resources, self apart)? */
/* Is tcp the context's only network transport? Shared memory ones (sysv, posix, cma, knem,
 * xpmem) and self count as no network; sm gets 1 where there is one. */
static int ucx_tcp_only(ucp_context_h ctx, int *sm) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return 0;
  ucp_context_print_info(ctx, f);
  fclose(f);
  int tcp = 0, other = 0;
  static const char *const shm[] = {"sysv/", "posix/", "cma/", "knem/", "xpmem/", NULL};
  *sm = 0;
  /* "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0" */
  for (char *line = text; line && (line = strstr(line, "resource ")); line++) {
    char *tl = strstr(line, "-- ");
    char *eol = strchr(line, '\n');
    if (!tl || (eol && tl > eol)) continue;
    tl += 3;
    int is_sm = 0;
    for (int i = 0; shm[i]; i++) is_sm |= !strncmp(tl, shm[i], strlen(shm[i]));
    if (!strncmp(tl, "tcp/", 4))
      tcp = 1;
    else if (is_sm)
      *sm = 1;
    else if (strncmp(tl, "self/", 5))
      other = 1;
  }
  free(text);
  return tcp && !other;
}

/* "tcp/lo.0" -> "tcp/lo"; shared memory devices ("memory", "memory0") name no device. */
static void ucx_lane_name(char *out, size_t cap, const char *tl_dev) {
  char tmp[96];
  snprintf(tmp, sizeof tmp, "%s", tl_dev);
  char *slash = strchr(tmp, '/');
  if (slash) {
    char *dev = slash + 1;
    char *dot = strrchr(dev, '.');
    if (dot && dot[1] >= '0' && dot[1] <= '9') *dot = '\0';
    if (strncmp(dev, "memory", 6) == 0) *slash = '\0';
  }
  snprintf(out, cap, "%s", tmp);
}

/* Reads the lanes of one endpoint from ucp_ep_print_info and appends the transport/device of
 * each lane not yet listed in `fab` (entries separated by '+'). */
static void ucx_add_lanes(ucp_ep_h ep, char *fab, size_t cap) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) return;
  ucp_ep_print_info(ep, f);
  fclose(f);
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    /* "#   lane[0]:  3:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255] am am_bw#0" */
    char *lane = strstr(line, "lane[");
    if (!lane) continue;
    char *colon = strchr(lane, ':');
    if (!colon) continue;
    char *p = colon + 1;
    while (*p == ' ') p++;
    while (*p >= '0' && *p <= '9') p++; /* resource index */
    if (*p != ':') continue;
    p++;
    char tl_dev[96];
    size_t i = 0;
    while (p[i] && p[i] != ' ' && i + 1 < sizeof tl_dev) tl_dev[i] = p[i], i++;
    tl_dev[i] = '\0';
    char name[96];
    ucx_lane_name(name, sizeof name, tl_dev);
    if (!*name) continue;
    /* already listed? */
    int seen = 0;
    for (const char *s = fab; *s;) {
      size_t l = strcspn(s, "+");
      if (l == strlen(name) && strncmp(s, name, l) == 0) seen = 1;
      s += l;
      if (*s == '+') s++;
    }
    if (seen) continue;
    size_t used = strlen(fab);
    if (used + strlen(name) + 2 > cap) break;
    snprintf(fab + used, cap - used, "%s%s", used ? "+" : "", name);
  }
  free(text);
}

static void ucx_close(coll_transport *t) {
  ucx_tp *u = (ucx_tp *)t;
  if (!u) return;
  if (u->worker) {
    coll_err e;
    /* best effort; after a failure we only tell the peers, so none waits for us in vain */
    if (u->base.comm && u->base.comm->failed) u->failed = 1; /* the run failed elsewhere */
    if (u->base.size > 1)
      ucx_exchange(u, UCX_CTRL_CLOSE, !u->failed, u->failed ? 200 : UCX_CLOSE_TIMEOUT_MS, &e);
    /* regions the caller did not free; keys go before the endpoints they were unpacked on */
    for (int i = 0; i < u->nregions; i++) ucx_region_release(u, &u->regions[i]);
    /* After the goodbye exchange no traffic is left in either direction, so the endpoints
     * are closed locally (force): a flushing close would talk to peers that may already have
     * destroyed their workers, and UCX would log endpoint timeouts for them. */
    ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                             .flags = UCP_EP_CLOSE_FLAG_FORCE};
    double deadline = ucx_now_ms() + UCX_CLOSE_TIMEOUT_MS;
    for (int i = 0; u->eps && i < u->base.size; i++) {
      if (!u->eps[i]) continue;
      ucs_status_ptr_t r = ucp_ep_close_nbx(u->eps[i], &p);
      if (UCS_PTR_IS_PTR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS && ucx_now_ms() < deadline)
          ucp_worker_progress(u->worker);
        ucp_request_free(r);
      }
      u->eps[i] = NULL;
    }
    ucp_worker_destroy(u->worker);
  }
  free(u->regions);
  if (u->ctx) ucp_cleanup(u->ctx);
  free(u->eps);
  free(u->gone);
  free(u->local_pid);
  free(u);
}

/* A completed eager send may still sit in UCT's buffers (tcp's send buffer) until the worker
 * progresses again: ucp_worker_flush pushes everything out. */
static int ucx_flush(coll_transport *t, int timeout_ms, coll_err *e) {
  ucx_tp *u = (ucx_tp *)t;
  ucp_request_param_t p = {0};
  ucs_status_ptr_t r = ucp_worker_flush_nbx(u->worker, &p);
  if (r == NULL) return 0;
  if (UCS_PTR_IS_ERR(r))
    return coll_fail(e, "ucx: rank %d (%s): flushing the worker: %s", u->base.rank, ucx_host(u, u->base.rank),
                     ucs_status_string(UCS_PTR_STATUS(r)));
  double deadline = ucx_now_ms() + (timeout_ms > 0 ? timeout_ms : 60000);
  ucs_status_t st;
  while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS && ucx_now_ms() < deadline)
    ucp_worker_progress(u->worker);
  if (st == UCS_INPROGRESS) ucp_request_cancel(u->worker, r);
  ucp_request_free(r);
  if (st == UCS_OK) return 0;
  u->failed = 1;
  return coll_fail(e, "ucx: rank %d (%s): flushing the worker: %s", u->base.rank, ucx_host(u, u->base.rank),
                   st == UCS_INPROGRESS ? "timed out (a peer does not take what this rank sent)" : ucs_status_string(st));
}

static const coll_transport_ops ucx_ops = {
    .name = "ucx",
    .isend = ucx_isend,
    .irecv = ucx_irecv,
    .test = ucx_test,
    .waitall = ucx_waitall,
    .mem_alloc = ucx_mem_alloc,
    .mem_free = ucx_mem_free,
    .peer_ptr = ucx_peer_ptr,
    .allreduce = NULL,
    .flush = ucx_flush,
    .close = ucx_close,
};

/* What coll_ucx_open's phases share. The buffers are the open's own: ucx_open_end frees them
 * whether it succeeded or not. */
typedef struct {
  ucx_tp *u;
  coll_comm *c;
  int rank, size;
  uint64_t *lens;            /* per rank: its worker address's length, its pid */
  uint64_t max_len;          /* the longest address; every one is padded to it */
  unsigned char *mine, *all; /* this rank's padded address; every rank's */
  ucp_address_t *addr;       /* this worker's */
  size_t addr_len;
} ucx_open_ctx;

/* The transport's fields and per-peer tables. */
static int ucx_open_alloc(ucx_open_ctx *x, const coll_comm_opts *o, int timeout_ms, coll_err *e) {
  ucx_tp *u = x->u;
  int size = x->size;
  u->base.ops = &ucx_ops;
  u->base.rank = x->rank;
  u->base.size = size;
  u->base.comm = x->c;
  u->efd = -1;
  u->map = !(o && o->no_peer_map);
  u->base.maps = u->map;
  u->timeout_ms = timeout_ms;
  u->eps = calloc((size_t)size, sizeof *u->eps);
  u->gone = calloc((size_t)size, sizeof *u->gone); /* UCS_OK is 0 */
  u->local_pid = calloc((size_t)size, sizeof *u->local_pid);
  x->lens = calloc((size_t)size * 2, sizeof *x->lens);
  if (!u->eps || !u->gone || !u->local_pid || !x->lens) return coll_fail(e, "ucx: out of memory");
  return 0;
}

/* The UCP context. Over tcp alone it is made again with large messages eager (see the top of
 * this file), unless the user chose UCX_RNDV_THRESH. */
static int ucx_open_context(ucx_open_ctx *x, coll_err *e) {
  ucx_tp *u = x->u;
  ucp_config_t *cfg;
  ucs_status_t st = ucp_config_read(NULL, NULL, &cfg); /* UCX_TLS, UCX_NET_DEVICES, ... */
  if (st != UCS_OK)
    return coll_fail(e, "ucx: rank %d: reading the UCX configuration (UCX_* variables): %s", x->rank,
                     ucs_status_string(st));
  if (!getenv("UCX_KEEPALIVE_INTERVAL")) ucp_config_modify(cfg, "KEEPALIVE_INTERVAL", UCX_KEEPALIVE_DEFAULT);
  ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS |
                                   UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                     .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                     .estimated_num_eps = (size_t)x->size,
                     .mt_workers_shared = 0};
  st = ucp_init(&pp, cfg, &u->ctx);
  u->base.rendezvous = 1;
  int remote = 0, sm = 0; /* a peer on another host */
  for (int r = 0; r < x->size; r++) remote |= strcmp(coll_comm_host(x->c, r), coll_comm_host(x->c, x->rank)) != 0;
  if (st == UCS_OK && !getenv("UCX_RNDV_THRESH") && ucx_tcp_only(u->ctx, &sm) && (!sm || remote)) {
    ucp_cleanup(u->ctx);
    u->base.rendezvous = ucp_config_modify(cfg, "RNDV_THRESH", "inf") != UCS_OK;
    st = ucp_init(&pp, cfg, &u->ctx);
  }
  ucp_config_release(cfg);
  if (st != UCS_OK) {
    u->ctx = NULL;
    return coll_fail(e, "ucx: rank %d: ucp_init: %s (check UCX_TLS / UCX_NET_DEVICES)", x->rank,
                     ucs_status_string(st));
  }
  return 0;
}

/* The worker, how it waits when idle, and its address for the peers. */
static int ucx_open_worker(ucx_open_ctx *x, coll_err *e) {
  ucx_tp *u = x->u;
  ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                            .thread_mode = UCS_THREAD_MODE_SINGLE};
  ucs_status_t st = ucp_worker_create(u->ctx, &wp, &u->worker);
  if (st != UCS_OK) {
    u->worker = NULL;
    return coll_fail(e, "ucx: rank %d: ucp_worker_create: %s", x->rank, ucs_status_string(st));
  }
  /* How long to busy-poll before sleeping on the worker's events: a while, unless this host
   * has more ranks than cores (then a spinning rank only delays the one it
   * waits for). FABENCH_UCX_SPIN_US overrides (-1: never sleep). */
  u->efd = -1;
  u->spin_ms = UCX_SPIN_US_DEFAULT / 1000.0;
  if (x->c->oversubscribed) u->spin_ms = 0;
  const char *spin = getenv("FABENCH_UCX_SPIN_US");
  if (spin && *spin) u->spin_ms = atof(spin) / 1000.0;
  if (u->spin_ms >= 0 && ucp_worker_get_efd(u->worker, &u->efd) != UCS_OK) u->efd = -1;
  u->base.sleeps = u->spin_ms == 0 && u->efd >= 0; /* a few microseconds of polling aside */
  st = ucp_worker_get_address(u->worker, &x->addr, &x->addr_len);
  if (st != UCS_OK) {
    x->addr = NULL;
    return coll_fail(e, "ucx: rank %d: ucp_worker_get_address: %s", x->rank, ucs_status_string(st));
  }
  return 0;
}

/* Every rank's worker address through the bootstrap. Addresses differ in length: all-gather the
 * lengths (and pids), then the padded addresses. */
static int ucx_open_exchange(ucx_open_ctx *x, coll_boot *b, coll_err *e) {
  ucx_tp *u = x->u;
  coll_comm *c = x->c;
  int rank = x->rank, size = x->size;
  uint64_t my_len[2] = {x->addr_len, (uint64_t)getpid()};
  if (coll_boot_allgather(b, x->lens, my_len, sizeof my_len, e) != 0) return -1;
  for (int i = 0; i < size; i++) x->max_len = x->lens[2 * i] > x->max_len ? x->lens[2 * i] : x->max_len;
  /* peers on this host are watched by pid (see ucx_tp) */
  for (int p = 0; p < size; p++)
    if (p != rank && c && !strcmp(coll_comm_host(c, p), coll_comm_host(c, rank)))
      u->local_pid[p] = (long)x->lens[2 * p + 1];
  x->mine = calloc(1, x->max_len);
  x->all = calloc((size_t)size, x->max_len);
  if (!x->mine || !x->all) return coll_fail(e, "ucx: out of memory");
  memcpy(x->mine, x->addr, x->addr_len);
  return coll_boot_allgather(b, x->all, x->mine, x->max_len, e) != 0 ? -1 : 0;
}

/* An endpoint to every peer. FABENCH_UCX_PEER_ERR: peer (UCX's peer error handling for every
 * peer: UCX then leaves out transports without it, shared memory among them), none, or auto
 * (default: for peers on other hosts; those on this host are watched by pid) */
static int ucx_open_endpoints(ucx_open_ctx *x, coll_err *e) {
  ucx_tp *u = x->u;
  coll_comm *c = x->c;
  const char *pe = getenv("FABENCH_UCX_PEER_ERR");
  int peer_err_all = pe && !strcmp(pe, "peer"), peer_err_none = pe && !strcmp(pe, "none");
  for (int p = 0; p < x->size; p++) {
    if (p == x->rank) continue;
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = (const ucp_address_t *)(x->all + (size_t)p * x->max_len),
                          .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ucx_peer_failed, .arg = u}};
    int want_peer = peer_err_all || (!peer_err_none && !u->local_pid[p]);
    ucs_status_t st = want_peer ? ucp_ep_create(u->worker, &ep, &u->eps[p]) : UCS_ERR_UNSUPPORTED;
    if (st != UCS_OK && !peer_err_all) { /* no transport with peer failure handling: without */
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      st = ucp_ep_create(u->worker, &ep, &u->eps[p]);
    }
    if (st != UCS_OK) {
      u->eps[p] = NULL;
      return coll_fail(e, "ucx: rank %d: cannot create an endpoint to rank %d (%s): %s "
                       "(no common transport? check UCX_TLS / UCX_NET_DEVICES)",
                       x->rank, p, c ? coll_comm_host(c, p) : "?", ucs_status_string(st));
    }
  }
  return 0;
}

/* What UCX chose, from the endpoints' lanes: it picks the transports itself. */
static void ucx_open_fabric(ucx_tp *u) {
  char fab[sizeof u->base.fabric - 4] = "";
  for (int p = 0; p < u->base.size; p++)
    if (u->eps[p]) ucx_add_lanes(u->eps[p], fab, sizeof fab);
  snprintf(u->base.fabric, sizeof u->base.fabric, "ucx:%s", *fab ? fab : "none");
}

/* The open's buffers go either way. A failed transport says goodbye without waiting for the
 * peers' (they may never get this far). */
static int ucx_open_end(ucx_open_ctx *x, coll_transport **out, int rc) {
  ucx_tp *u = x->u;
  if (x->addr) ucp_worker_release_address(u->worker, x->addr);
  free(x->lens);
  free(x->all);
  free(x->mine);
  if (rc != 0) {
    u->failed = 1;
    ucx_close(&u->base);
    return -1;
  }
  *out = &u->base;
  return 0;
}

int coll_ucx_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e) {
  *out = NULL;
  int rank = coll_boot_rank(b), size = coll_boot_size(b);
  int timeout_ms = o && o->timeout_ms > 0 ? o->timeout_ms : 60000;
  ucx_tp *u = calloc(1, sizeof *u);
  if (!u) return coll_fail(e, "ucx: out of memory");
  ucx_open_ctx x = {.u = u, .c = c, .rank = rank, .size = size};
  if (ucx_open_alloc(&x, o, timeout_ms, e) != 0 || ucx_open_context(&x, e) != 0 || ucx_open_worker(&x, e) != 0 ||
      ucx_open_exchange(&x, b, e) != 0 || ucx_open_endpoints(&x, e) != 0 ||
      (size > 1 && ucx_exchange(u, UCX_CTRL_HELLO, 1, timeout_ms, e) != 0))
    return ucx_open_end(&x, out, -1);
  ucx_open_fabric(u);
  return ucx_open_end(&x, out, 0);
}
