/* nccl transport: GPU buffers, one CUDA device per rank, on one stream per communicator.
 *
 * Two ways to move device data, chosen when the communicator opens:
 * - NCCL (every rank on its own GPU): `native` is ncclAllReduce; fabench's algorithms run over
 *   ncclSend/ncclRecv. NCCL moves point-to-point data only when a group is launched, so
 *   isend/irecv queue their calls and every test/wait launches the queue as one group on the
 *   stream; later work (reductions, next sends) follows in stream order. Algorithms therefore
 *   post a step's messages and wait for them together (base.grouped).
 * - A shared GPU (several ranks on one device, which NCCL refuses): CUDA IPC. coll_mem_alloc
 *   exports each rank's buffer and every rank maps every other's, so the ring reduces its
 *   neighbour's block in place, as on mapped ucx memory. Its tokens go over tcp; with
 *   interprocess CUDA events (dev_mark/dev_after) the neighbour's stream waits on the GPU
 *   instead of its host. Other algorithms stage device messages through host memory.
 * Host messages (barriers, tokens) go over an inner tcp transport; the NCCL unique id and the
 * device map are exchanged through the bootstrap. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "coll_cuda.h"
#include "coll_internal.h"

_Static_assert(COLL_CUDA_F32 == (int)COLL_F32 && COLL_CUDA_F64 == (int)COLL_F64 &&
                   COLL_CUDA_F16 == (int)COLL_F16 && COLL_CUDA_BF16 == (int)COLL_BF16 &&
                   COLL_CUDA_I32 == (int)COLL_I32 && COLL_CUDA_I64 == (int)COLL_I64,
               "coll_cuda.h's types follow coll_dtype");
_Static_assert(COLL_CUDA_SUM == (int)COLL_SUM && COLL_CUDA_PROD == (int)COLL_PROD &&
                   COLL_CUDA_MIN == (int)COLL_MIN && COLL_CUDA_MAX == (int)COLL_MAX,
               "coll_cuda.h's ops follow coll_op");

#define NC_TAG_CTRL 0xfff1u /* mem_alloc's control all-gathers on the inner tcp transport */

enum { NC_DONE = 0, NC_GROUP = 1, NC_HOST = 2 };

/* What lives in the caller's coll_req. */
typedef struct {
  int kind;
  void *slot; /* NC_HOST: an nc_host */
} nc_req;
_Static_assert(sizeof(nc_req) <= sizeof(coll_req), "nc_req must fit in coll_req");

/* A message over the inner tcp transport; device data is staged in `bounce`. */
typedef struct {
  coll_req inner; /* tcp keeps a pointer to it: it lives here, not in the caller's request */
  void *bounce;   /* host copy of device data, or NULL */
  void *dev;      /* a device receive: copied here once it has arrived */
  size_t bytes;
} nc_host;

typedef struct {
  int peer, is_send;
  void *buf;
  size_t bytes;
} nc_op;

typedef struct {
  char *base;
  size_t bytes;
  uint64_t id;
  char **peer; /* shared GPU: rank p's copy opened here (peer[rank] = base); NULL: not mapped */
} nc_region;

typedef struct {
  coll_transport base; /* first */
  coll_transport *tcp;
  int ipc;
  ncclComm_t nccl;
  cudaStream_t stream;
  cudaEvent_t ev[2];
  nc_op *pend;
  int npend, cappend;
  nc_region *regions;
  int nregions;
  uint64_t next_id;
  int timeout_ms;
  int marks_tried;     /* the marks were set up (base.marks > 0) or refused: once */
  cudaEvent_t *mark;   /* shared GPU: this rank's base.marks interprocess events */
  cudaEvent_t *peer_mark; /* [p * base.marks + slot]: rank p's, opened here */
  int stuck;           /* the GPU's work did not finish in time: close() must not wait for it */
  int failed;          /* a CUDA or NCCL call failed: finish() reports it once */
  char why[1024];
} nc_transport;

static const char *nc_host_name(const nc_transport *t) { return coll_comm_host(t->base.comm, t->base.rank); }

/* Keeps the first failure for finish(); returns -1. */
static int nc_note(nc_transport *t, const char *what, const char *cause) {
  if (!t->failed) {
    t->failed = 1;
    snprintf(t->why, sizeof t->why, "rank %d (%.64s), GPU %d: %.80s: %.600s", t->base.rank, nc_host_name(t),
             t->base.device, what, cause);
  }
  return -1;
}
static int nc_cuda(nc_transport *t, cudaError_t rc, const char *what) {
  return rc == cudaSuccess ? 0 : nc_note(t, what, cudaGetErrorString(rc));
}
static int nc_nccl(nc_transport *t, ncclResult_t rc, const char *what) {
  return rc == ncclSuccess ? 0 : nc_note(t, what, ncclGetErrorString(rc));
}
static int nc_report(nc_transport *t, coll_err *e) {
  if (!t->failed) return 0;
  t->failed = 0;
  return coll_fail(e, "%s", t->why);
}

static double nc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Waits for the stream (or one event) within the timeout: a peer that stopped leaves NCCL's
 * kernels waiting for ever, so the host never blocks in CUDA without a limit. */
static int nc_wait(nc_transport *t, cudaEvent_t ev, coll_err *e) {
  double t0 = nc_now_ms();
  for (long spin = 0;; spin++) {
    cudaError_t rc = ev ? cudaEventQuery(ev) : cudaStreamQuery(t->stream);
    if (rc == cudaSuccess) break;
    if (rc != cudaErrorNotReady) {
      nc_cuda(t, rc, "waiting for the GPU");
      return nc_report(t, e);
    }
    if ((spin & 1023) == 1023) {
      if (nc_now_ms() - t0 > t->timeout_ms) {
        if (t->nccl) ncclCommAbort(t->nccl), t->nccl = NULL;
        t->stuck = 1;
        return coll_fail(e, "rank %d (%s): the GPU's work did not finish within %d ms (a peer stopped or "
                            "sent a different message?)",
                         t->base.rank, nc_host_name(t), t->timeout_ms);
      }
      sched_yield();
    }
  }
  return nc_report(t, e);
}

static int nc_is_dev(const void *p) {
  struct cudaPointerAttributes a;
  if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError(); /* clear: plain host memory is not an error */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* Launches every queued NCCL call as one group. */
static int nc_flush(nc_transport *t) {
  if (t->npend == 0) return 0;
  int n = t->npend;
  t->npend = 0;
  if (!t->nccl) return nc_note(t, "ncclSend/ncclRecv", "the NCCL communicator was aborted");
  if (nc_nccl(t, ncclGroupStart(), "ncclGroupStart")) return -1;
  for (int i = 0; i < n; i++) {
    nc_op *o = &t->pend[i];
    ncclResult_t rc = o->is_send ? ncclSend(o->buf, o->bytes, ncclUint8, o->peer, t->nccl, t->stream)
                                 : ncclRecv(o->buf, o->bytes, ncclUint8, o->peer, t->nccl, t->stream);
    if (rc != ncclSuccess) {
      nc_nccl(t, rc, o->is_send ? "ncclSend" : "ncclRecv");
      ncclGroupEnd();
      return -1;
    }
  }
  return nc_nccl(t, ncclGroupEnd(), "ncclGroupEnd");
}

static int nc_post(coll_transport *tp, int peer, void *buf, size_t bytes, uint32_t tag, coll_req *r,
                   int is_send, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  nc_req *q = (nc_req *)r;
  q->kind = NC_DONE;
  q->slot = NULL;
  int dev = bytes > 0 && nc_is_dev(buf);
  if (dev && !t->ipc) {
    if (t->npend == t->cappend) {
      int cap = t->cappend ? 2 * t->cappend : 64;
      nc_op *p = realloc(t->pend, (size_t)cap * sizeof *p);
      if (!p) return coll_fail(e, "rank %d: out of memory for NCCL calls", t->base.rank);
      t->pend = p;
      t->cappend = cap;
    }
    t->pend[t->npend++] = (nc_op){peer, is_send, buf, bytes};
    q->kind = NC_GROUP;
    return 0;
  }
  nc_host *h = calloc(1, sizeof *h);
  if (!h) return coll_fail(e, "rank %d: out of memory for a request", t->base.rank);
  void *hbuf = buf;
  if (dev) { /* shared GPU: device data crosses in host memory */
    h->bounce = malloc(bytes);
    if (!h->bounce) {
      free(h);
      return coll_fail(e, "rank %d: cannot allocate %zu bytes to stage a message", t->base.rank, bytes);
    }
    hbuf = h->bounce;
    h->bytes = bytes;
    if (!is_send) {
      h->dev = buf;
    } else if (nc_cuda(t, cudaMemcpyAsync(h->bounce, buf, bytes, cudaMemcpyDeviceToHost, t->stream),
                       "cudaMemcpyAsync (stage a send)") ||
               nc_wait(t, NULL, e)) {
      free(h->bounce);
      free(h);
      return -1;
    }
  }
  int rc = is_send ? t->tcp->ops->isend(t->tcp, peer, hbuf, bytes, tag, &h->inner, e)
                   : t->tcp->ops->irecv(t->tcp, peer, hbuf, bytes, tag, &h->inner, e);
  if (rc != 0) {
    free(h->bounce);
    free(h);
    return -1;
  }
  q->kind = NC_HOST;
  q->slot = h;
  return 0;
}

static int nc_isend(coll_transport *tp, int peer, const void *buf, size_t bytes, uint32_t tag,
                    coll_req *r, coll_err *e) {
  return nc_post(tp, peer, (void *)buf, bytes, tag, r, 1, e);
}
static int nc_irecv(coll_transport *tp, int peer, void *buf, size_t bytes, uint32_t tag,
                    coll_req *r, coll_err *e) {
  return nc_post(tp, peer, buf, bytes, tag, r, 0, e);
}

/* A host message has arrived or left: a staged receive goes on to the device. */
static int nc_host_done(nc_transport *t, nc_req *q, coll_err *e) {
  nc_host *h = q->slot;
  int rc = 0;
  if (h->dev) {
    if (nc_cuda(t, cudaMemcpyAsync(h->dev, h->bounce, h->bytes, cudaMemcpyHostToDevice, t->stream),
                "cudaMemcpyAsync (a staged receive)") == 0)
      rc = nc_wait(t, NULL, e);
    else
      rc = nc_report(t, e);
  }
  free(h->bounce);
  free(h);
  q->kind = NC_DONE;
  q->slot = NULL;
  return rc;
}

static int nc_test(coll_transport *tp, coll_req *r, int *done, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  nc_req *q = (nc_req *)r;
  *done = 0;
  if (nc_flush(t)) return nc_report(t, e);
  if (q->kind != NC_HOST) {
    q->kind = NC_DONE;
    *done = 1;
    return 0;
  }
  nc_host *h = q->slot;
  if (t->tcp->ops->test(t->tcp, &h->inner, done, e) != 0) return -1;
  return *done ? nc_host_done(t, q, e) : 0;
}

static int nc_waitall(coll_transport *tp, coll_req *r, int n, int timeout_ms, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_flush(t)) return nc_report(t, e);
  for (int i = 0; i < n; i++) {
    nc_req *q = (nc_req *)&r[i];
    if (q->kind != NC_HOST) {
      q->kind = NC_DONE;
      continue;
    }
    nc_host *h = q->slot;
    /* tcp progresses every outstanding message in each wait, so waiting one by one is fair */
    if (t->tcp->ops->waitall(t->tcp, &h->inner, 1, timeout_ms, e) != 0) return -1;
    if (nc_host_done(t, q, e) != 0) return -1;
  }
  return 0;
}

/* inout = inout (op) in, and out2 too where it is not NULL. */
static void nc_reduce_to(nc_transport *t, void *inout, void *out2, const void *in, size_t count, coll_dtype dt,
                         coll_op op) {
  if (t->failed || count == 0) return;
  int rc = out2 ? coll_cuda_reduce2(inout, out2, in, count, (int)dt, (int)op, t->stream)
                : coll_cuda_reduce(inout, in, count, (int)dt, (int)op, t->stream);
  if (nc_cuda(t, (cudaError_t)rc, "reduction kernel")) return;
  if (t->ipc && !t->base.marks) {
    coll_err e;
    if (nc_wait(t, NULL, &e)) nc_note(t, "reduction kernel", e.msg);
  }
}

static void nc_dev_reduce(coll_transport *tp, void *inout, const void *in, size_t count, coll_dtype dt,
                          coll_op op) {
  nc_reduce_to((nc_transport *)tp, inout, NULL, in, count, dt, op);
}

static void nc_dev_reduce2(coll_transport *tp, void *inout, void *out2, const void *in, size_t count,
                           coll_dtype dt, coll_op op) {
  nc_reduce_to((nc_transport *)tp, inout, out2, in, count, dt, op);
}

static void nc_dev_copy(coll_transport *tp, void *dst, const void *src, size_t bytes) {
  nc_transport *t = (nc_transport *)tp;
  if (t->failed || bytes == 0) return;
  if (nc_cuda(t, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, t->stream), "cudaMemcpyAsync")) return;
  if (t->ipc && !t->base.marks) {
    coll_err e;
    if (nc_wait(t, NULL, &e)) nc_note(t, "cudaMemcpyAsync", e.msg);
  }
}

static void *nc_dev_alloc(coll_transport *tp, size_t bytes, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  void *p = NULL;
  if (nc_cuda(t, cudaMalloc(&p, bytes ? bytes : 64), "cudaMalloc")) {
    nc_report(t, e);
    return NULL;
  }
  return p;
}

static void nc_dev_free(coll_transport *tp, void *p) {
  (void)tp;
  if (p) cudaFree(p);
}

static int nc_finish(coll_transport *tp, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  nc_flush(t);
  if (!e) { /* the caller already has an error: drop ours */
    t->failed = 0;
    return -1;
  }
  return nc_report(t, e);
}

static ncclDataType_t nc_type(coll_dtype dt) {
  static const ncclDataType_t m[COLL_NDTYPES] = {ncclFloat32, ncclFloat64, ncclFloat16,
                                                 ncclBfloat16, ncclInt32, ncclInt64};
  return m[dt];
}
static ncclRedOp_t nc_redop(coll_op op) {
  static const ncclRedOp_t m[COLL_NOPS] = {ncclSum, ncclProd, ncclMin, ncclMax};
  return m[op];
}

static int nc_allreduce(coll_transport *tp, void *buf, size_t count, coll_dtype dt, coll_op op,
                        coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_flush(t) || !t->nccl) {
    if (!t->nccl) nc_note(t, "ncclAllReduce", "the NCCL communicator was aborted");
    return nc_report(t, e);
  }
  if (nc_nccl(t, ncclAllReduce(buf, buf, count, nc_type(dt), nc_redop(op), t->nccl, t->stream), "ncclAllReduce"))
    return nc_report(t, e);
  return 0;
}

/* The library's own reduce-scatter, all-gather and broadcast; all-to-allv as one group of
 * ncclSend/ncclRecv (NCCL has no all-to-all call of its own). */
static int nc_ready(nc_transport *t, const char *what, coll_err *e) {
  if (nc_flush(t) || !t->nccl) {
    if (!t->nccl) nc_note(t, what, "the NCCL communicator was aborted");
    return nc_report(t, e);
  }
  return 0;
}

static int nc_reduce_scatter(coll_transport *tp, const void *sb, void *rb, size_t count, coll_dtype dt,
                             coll_op op, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_ready(t, "ncclReduceScatter", e)) return -1;
  if (nc_nccl(t, ncclReduceScatter(sb, rb, count, nc_type(dt), nc_redop(op), t->nccl, t->stream), "ncclReduceScatter"))
    return nc_report(t, e);
  return 0;
}

static int nc_allgather(coll_transport *tp, const void *sb, void *rb, size_t count, coll_dtype dt, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_ready(t, "ncclAllGather", e)) return -1;
  if (nc_nccl(t, ncclAllGather(sb, rb, count, nc_type(dt), t->nccl, t->stream), "ncclAllGather"))
    return nc_report(t, e);
  return 0;
}

static int nc_bcast(coll_transport *tp, void *buf, size_t count, coll_dtype dt, int root, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_ready(t, "ncclBroadcast", e)) return -1;
  if (nc_nccl(t, ncclBroadcast(buf, buf, count, nc_type(dt), root, t->nccl, t->stream), "ncclBroadcast"))
    return nc_report(t, e);
  return 0;
}

static int nc_alltoallv(coll_transport *tp, const void *sb, const size_t *sc, const size_t *sd, void *rb,
                        const size_t *rc, const size_t *rd, coll_dtype dt, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  size_t es = coll_dtype_size(dt);
  if (nc_ready(t, "ncclSend/ncclRecv", e)) return -1;
  if (nc_nccl(t, ncclGroupStart(), "ncclGroupStart")) return nc_report(t, e);
  for (int p = 0; p < tp->size; p++) {
    ncclResult_t r1 = sc[p] ? ncclSend((const char *)sb + sd[p] * es, sc[p] * es, ncclUint8, p, t->nccl, t->stream) : ncclSuccess;
    ncclResult_t r2 = rc[p] ? ncclRecv((char *)rb + rd[p] * es, rc[p] * es, ncclUint8, p, t->nccl, t->stream) : ncclSuccess;
    if (r1 != ncclSuccess || r2 != ncclSuccess) {
      nc_nccl(t, r1 != ncclSuccess ? r1 : r2, r1 != ncclSuccess ? "ncclSend" : "ncclRecv");
      ncclGroupEnd();
      return nc_report(t, e);
    }
  }
  if (nc_nccl(t, ncclGroupEnd(), "ncclGroupEnd")) return nc_report(t, e);
  return 0;
}

/* ---- coll_mem_alloc: device memory; on a shared GPU, every rank opens every other's ---- */

/* all[p] = rank p's `mine` (bytes each), over the inner tcp transport. */
static int nc_ctrl_allgather(nc_transport *t, void *all, const void *mine, size_t bytes, coll_err *e) {
  int n = t->base.size, me = t->base.rank;
  memcpy((char *)all + (size_t)me * bytes, mine, bytes);
  coll_req *r = calloc((size_t)(2 * n), sizeof *r);
  if (!r) return coll_fail(e, "rank %d: out of memory", me);
  int k = 0, rc = 0;
  for (int p = 0; p < n && !rc; p++) {
    if (p == me) continue;
    rc = t->tcp->ops->irecv(t->tcp, p, (char *)all + (size_t)p * bytes, bytes, NC_TAG_CTRL, &r[k++], e);
    if (!rc) rc = t->tcp->ops->isend(t->tcp, p, mine, bytes, NC_TAG_CTRL, &r[k++], e);
  }
  if (!rc) rc = t->tcp->ops->waitall(t->tcp, r, k, t->timeout_ms, e);
  free(r);
  return rc;
}

typedef struct {
  uint64_t ok;
  cudaIpcMemHandle_t h;
} nc_handle_msg;

static void nc_region_unmap(nc_transport *t, nc_region *g) {
  if (!g->peer) return;
  for (int p = 0; p < t->base.size; p++)
    if (p != t->base.rank && g->peer[p]) cudaIpcCloseMemHandle(g->peer[p]);
  free(g->peer);
  g->peer = NULL;
}

/* The marks a rank of n makes: the mapped ring's hello, its 2n - 2 steps' pieces, AG done. */
static int nc_mark_slots(int n) { return (2 * n - 2) * COLL_RING_PIECES_MAX + 2; }

static void nc_marks_close(nc_transport *t) {
  int n = t->base.size, k = nc_mark_slots(n);
  if (t->peer_mark)
    for (int i = 0; i < n * k; i++)
      if (t->peer_mark[i]) cudaEventDestroy(t->peer_mark[i]);
  if (t->mark)
    for (int i = 0; i < k; i++)
      if (t->mark[i]) cudaEventDestroy(t->mark[i]);
  free(t->peer_mark), free(t->mark);
  t->peer_mark = t->mark = NULL;
  t->base.marks = 0;
}

/* The marks (coll_internal.h) of the shared GPU: nc_mark_slots interprocess events a rank,
 * each rank opening its ring neighbours'. Collective, like the mapping it follows; off
 * where any rank cannot share its events, or where FABENCH_IPC_EVENTS=0 (the ring then waits
 * on the host at every step, as a comparison or a way round a driver that mishandles them). */
static int nc_marks_open(nc_transport *t, coll_err *e) {
  int n = t->base.size, me = t->base.rank, k = nc_mark_slots(n);
  t->marks_tried = 1;
  const char *env = getenv("FABENCH_IPC_EVENTS");
  size_t one = sizeof(uint64_t) + (size_t)k * sizeof(cudaIpcEventHandle_t);
  char *all = calloc((size_t)n, one);
  uint64_t *oks = calloc((size_t)n, sizeof *oks);
  t->mark = calloc((size_t)k, sizeof *t->mark);
  t->peer_mark = calloc((size_t)(n * k), sizeof *t->peer_mark);
  if (!all || !oks || !t->mark || !t->peer_mark) {
    free(all), free(oks), nc_marks_close(t);
    return coll_fail(e, "rank %d: out of memory", me);
  }
  char *mine = all + (size_t)me * one;
  uint64_t ok = !(env && !strcmp(env, "0"));
  for (int i = 0; i < k && ok; i++)
    ok = cudaEventCreateWithFlags(&t->mark[i], cudaEventDisableTiming | cudaEventInterprocess) == cudaSuccess &&
         cudaIpcGetEventHandle((cudaIpcEventHandle_t *)(mine + sizeof ok) + i, t->mark[i]) == cudaSuccess;
  cudaGetLastError();
  memcpy(mine, &ok, sizeof ok);
  int rc = nc_ctrl_allgather(t, all, mine, one, e);
  uint64_t opened = ok; /* every rank so far made its events, and this one opened them */
  for (int p = 0; p < n && !rc && opened; p++) {
    const char *h = all + (size_t)p * one;
    memcpy(&opened, h, sizeof opened);
    int near = p == (me + 1) % n || p == (me + n - 1) % n;
    for (int i = 0; i < k && opened && p != me && near; i++)
      opened = cudaIpcOpenEventHandle(&t->peer_mark[p * k + i], ((const cudaIpcEventHandle_t *)(h + sizeof ok))[i]) ==
               cudaSuccess;
  }
  cudaGetLastError();
  if (!rc) rc = nc_ctrl_allgather(t, oks, &opened, sizeof opened, e);
  int every = !rc;
  for (int p = 0; p < n && every; p++) every = oks[p] != 0;
  free(all), free(oks);
  if (every)
    t->base.marks = k;
  else
    nc_marks_close(t);
  return rc;
}

static int nc_dev_mark(coll_transport *tp, int slot, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_cuda(t, cudaEventRecord(t->mark[slot], t->stream), "cudaEventRecord (a mark)")) return nc_report(t, e);
  return 0;
}

static int nc_dev_after(coll_transport *tp, int peer, int slot, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_cuda(t, cudaStreamWaitEvent(t->stream, t->peer_mark[peer * t->base.marks + slot], 0),
              "cudaStreamWaitEvent (a peer's mark)"))
    return nc_report(t, e);
  return 0;
}

static void *nc_mem_alloc(coll_transport *tp, size_t bytes, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  int n = t->base.size, me = t->base.rank;
  nc_region *rg = realloc(t->regions, (size_t)(t->nregions + 1) * sizeof *rg);
  if (!rg) {
    coll_fail(e, "rank %d: out of memory", me);
    return NULL;
  }
  t->regions = rg;
  nc_region *g = &rg[t->nregions];
  memset(g, 0, sizeof *g);
  g->bytes = bytes ? bytes : 64;
  g->id = t->next_id++;
  if (nc_cuda(t, cudaMalloc((void **)&g->base, g->bytes), "cudaMalloc")) {
    nc_report(t, e);
    return NULL;
  }
  t->nregions++;
  if (!t->ipc || n == 1) return g->base;
  /* Every rank must know that every other mapped it, or the ranks would disagree on whether
   * the ring reads in place: two all-gathers, the handles and then who opened them all. */
  nc_handle_msg mine = {0}, *all = calloc((size_t)n, sizeof *all);
  uint64_t opened = 1, *oks = calloc((size_t)n, sizeof *oks);
  g->peer = calloc((size_t)n, sizeof *g->peer);
  if (!all || !oks || !g->peer) {
    free(all), free(oks);
    coll_fail(e, "rank %d: out of memory", me);
    return NULL;
  }
  mine.ok = cudaIpcGetMemHandle(&mine.h, g->base) == cudaSuccess;
  cudaGetLastError();
  if (nc_ctrl_allgather(t, all, &mine, sizeof mine, e)) {
    free(all), free(oks);
    return NULL;
  }
  g->peer[me] = g->base;
  for (int p = 0; p < n; p++) {
    if (p == me) continue;
    void *q = NULL;
    if (!all[p].ok || cudaIpcOpenMemHandle(&q, all[p].h, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      cudaGetLastError();
      opened = 0;
      q = NULL;
    }
    g->peer[p] = q;
  }
  int rc = nc_ctrl_allgather(t, oks, &opened, sizeof opened, e);
  int every = !rc;
  for (int p = 0; p < n && every; p++) every = oks[p] != 0;
  free(all), free(oks);
  if (!every) nc_region_unmap(t, g); /* plain device memory: staged messages, no in-place ring */
  else if (!strstr(t->base.fabric, "+mapped"))
    strncat(t->base.fabric, "+mapped", sizeof t->base.fabric - strlen(t->base.fabric) - 1);
  if (!rc && every && !t->marks_tried) rc = nc_marks_open(t, e);
  if (rc) return NULL;
  return g->base;
}

static void nc_mem_free(coll_transport *tp, void *p) {
  nc_transport *t = (nc_transport *)tp;
  for (int i = 0; i < t->nregions; i++) {
    nc_region *g = &t->regions[i];
    if (g->base != p) continue;
    nc_region_unmap(t, g);
    cudaFree(g->base);
    t->regions[i] = t->regions[--t->nregions];
    return;
  }
}

static const void *nc_peer_ptr(coll_transport *tp, int peer, const void *buf, size_t bytes,
                               uint64_t where[2]) {
  nc_transport *t = (nc_transport *)tp;
  const char *b = buf;
  for (int i = 0; i < t->nregions; i++) {
    nc_region *g = &t->regions[i];
    if (!g->peer || b < g->base || b + bytes > g->base + g->bytes) continue;
    where[0] = g->id;
    where[1] = (uint64_t)(b - g->base);
    return g->peer[peer] + (b - g->base);
  }
  return NULL;
}

static void nc_close(coll_transport *tp) {
  nc_transport *t = (nc_transport *)tp;
  /* A stream stuck on a stopped peer would hold every call below for ever: the process's exit
   * frees the GPU's side then. */
  if (!t->stuck) {
    if (t->stream) cudaStreamSynchronize(t->stream);
    for (int i = 0; i < t->nregions; i++) {
      nc_region_unmap(t, &t->regions[i]);
      cudaFree(t->regions[i].base);
    }
    if (t->nccl) ncclCommDestroy(t->nccl);
    nc_marks_close(t);
    for (int i = 0; i < 2; i++)
      if (t->ev[i]) cudaEventDestroy(t->ev[i]);
    if (t->stream) cudaStreamDestroy(t->stream);
  } else {
    for (int i = 0; i < t->nregions; i++) free(t->regions[i].peer);
    free(t->mark), free(t->peer_mark);
  }
  free(t->regions);
  if (t->tcp) t->tcp->ops->close(t->tcp);
  free(t->base.gpus);
  free(t->pend);
  free(t);
}

/* The operations both kinds of transport share; each table adds its own. */
#define NC_OPS_SHARED                                                                          \
  .name = "nccl", .isend = nc_isend, .irecv = nc_irecv, .test = nc_test, .waitall = nc_waitall, \
  .mem_alloc = nc_mem_alloc, .mem_free = nc_mem_free, .peer_ptr = nc_peer_ptr, .close = nc_close, \
  .dev_reduce = nc_dev_reduce, .dev_copy = nc_dev_copy, .dev_reduce2 = nc_dev_reduce2,           \
  .dev_alloc = nc_dev_alloc, .dev_free = nc_dev_free, .finish = nc_finish

static const coll_transport_ops nc_ops = {NC_OPS_SHARED, .allreduce = nc_allreduce,
                                         .reduce_scatter = nc_reduce_scatter, .allgather = nc_allgather,
                                         .bcast = nc_bcast, .alltoallv = nc_alltoallv};
/* Shared GPU: no NCCL, so no native all-reduce; the ranks order their streams by marks. */
static const coll_transport_ops nc_ipc_ops = {NC_OPS_SHARED, .dev_mark = nc_dev_mark, .dev_after = nc_dev_after};
#undef NC_OPS_SHARED

int coll_nccl_usable(coll_err *e) {
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess || n < 1)
    return coll_fail(e, "nccl: no CUDA device is present (%s)",
                     rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver sees none");
  return 0;
}

size_t coll_nccl_version(char *out, size_t cap, int sep) {
  int v = 0, rt = 0;
  ncclGetVersion(&v);
  cudaRuntimeGetVersion(&rt);
  int w = snprintf(out, cap, "%sNCCL %d.%d.%d; CUDA runtime %d.%d", sep ? "; " : "", v / 10000,
                   v / 100 % 100, v % 100, rt / 1000, rt % 1000 / 10);
  return w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap - 1;
}

int coll_nccl_copy_wait(coll_transport *tp, void *dst, const void *src, size_t bytes, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_flush(t)) return nc_report(t, e);
  if (bytes && nc_cuda(t, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, t->stream), "cudaMemcpyAsync"))
    return nc_report(t, e);
  return nc_wait(t, NULL, e);
}

int coll_nccl_timer(coll_transport *tp, int stop, double *sec, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  if (nc_flush(t) || nc_cuda(t, cudaEventRecord(t->ev[stop], t->stream), "cudaEventRecord"))
    return nc_report(t, e);
  if (!stop) return 0;
  if (nc_wait(t, t->ev[1], e)) return -1;
  float ms = 0;
  if (nc_cuda(t, cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]), "cudaEventElapsedTime")) return nc_report(t, e);
  *sec = (double)ms * 1e-3;
  return 0;
}

/* The device of this rank: entry `local` of the list, or local modulo the count. */
static int nc_pick_device(const char *list, int local, int ndev, int *dev, coll_err *e) {
  if (!list || !*list) {
    *dev = local % ndev;
    return 0;
  }
  const char *s = list;
  for (int i = 0;; i++) {
    char *end;
    long d = strtol(s, &end, 10);
    if (end == s || (*end && *end != ',') || d < 0)
      return coll_fail(e, "--devices: '%s' is not a list of CUDA device numbers", list);
    if (i == local) {
      if (d >= ndev) return coll_fail(e, "--devices: device %ld does not exist (%d CUDA device(s))", d, ndev);
      *dev = (int)d;
      return 0;
    }
    if (!*end) return coll_fail(e, "--devices: '%s' names %d device(s), but this host runs more ranks", list, i + 1);
    s = end + 1;
  }
}

typedef struct {
  char host[COLL_HOST_MAX];
  char bus[32];
} nc_where;

int coll_nccl_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                   coll_err *e) {
  *out = NULL;
  int n = coll_boot_size(b), me = coll_boot_rank(b), ndev = 0, dev = 0;
  if (coll_nccl_usable(e)) return -1;
  cudaGetDeviceCount(&ndev);
  if (nc_pick_device(o->devices, coll_boot_local_rank(b), ndev, &dev, e)) return -1;
  nc_transport *t = calloc(1, sizeof *t);
  nc_where *wh = calloc((size_t)n, sizeof *wh);
  ncclUniqueId *ids = calloc((size_t)n, sizeof *ids);
  if (!t || !wh || !ids) {
    free(t), free(wh), free(ids);
    return coll_fail(e, "rank %d: out of memory", me);
  }
  t->base.ops = &nc_ops;
  t->base.rank = me;
  t->base.size = n;
  t->base.comm = c;
  t->base.on_device = 1;
  t->base.device = dev;
  t->timeout_ms = c->timeout_ms;
  int rc = -1;
  nc_where mine = {{0}, {0}};
  snprintf(mine.host, sizeof mine.host, "%s", coll_boot_host(b, me));
  if (nc_cuda(t, cudaSetDevice(dev), "cudaSetDevice") ||
      nc_cuda(t, cudaDeviceGetPCIBusId(mine.bus, sizeof mine.bus, dev), "cudaDeviceGetPCIBusId") ||
      nc_cuda(t, cudaStreamCreateWithFlags(&t->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      nc_cuda(t, cudaEventCreate(&t->ev[0]), "cudaEventCreate") ||
      nc_cuda(t, cudaEventCreate(&t->ev[1]), "cudaEventCreate")) {
    nc_report(t, e);
    goto out;
  }
  if (coll_tcp_open(&t->tcp, c, b, o, e) || coll_boot_allgather(b, wh, &mine, sizeof mine, e)) goto out;
  int shared = 0, hosts_apart = 0;
  for (int p = 0; p < n; p++) {
    hosts_apart |= strcmp(wh[p].host, wh[me].host) != 0;
    for (int q = p + 1; q < n; q++) shared |= !strcmp(wh[p].host, wh[q].host) && !strcmp(wh[p].bus, wh[q].bus);
  }
  if (shared && hosts_apart) {
    coll_fail(e, "nccl: ranks share a GPU on one host but the job spans several hosts: NCCL needs one GPU "
                 "per rank, and the shared-GPU path (CUDA IPC) one host; give each rank its own GPU "
                 "(--devices)");
    goto out;
  }
  t->ipc = shared;
  if (!(t->base.gpus = calloc((size_t)n, sizeof *t->base.gpus))) {
    coll_fail(e, "rank %d: out of memory", me);
    goto out;
  }
  for (int p = 0; p < n; p++) {
    snprintf(t->base.gpus[p], sizeof t->base.gpus[p], "%s", wh[p].bus);
    for (char *q = t->base.gpus[p]; *q; q++) *q = (char)(*q >= 'A' && *q <= 'F' ? *q - 'A' + 'a' : *q);
  }
  if (t->ipc) {
    t->base.ops = &nc_ipc_ops;
    snprintf(t->base.fabric, sizeof t->base.fabric, "cuda-ipc:1gpu");
  } else {
    t->base.grouped = 1;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (me == 0 && nc_nccl(t, ncclGetUniqueId(&id), "ncclGetUniqueId")) {
      nc_report(t, e); /* the others then time out in the all-gather below, naming rank 0 */
      goto out;
    }
    if (coll_boot_allgather(b, ids, &id, sizeof id, e)) goto out;
    if (nc_nccl(t, ncclCommInitRank(&t->nccl, n, ids[0], me), "ncclCommInitRank")) {
      nc_report(t, e);
      goto out;
    }
    snprintf(t->base.fabric, sizeof t->base.fabric, "nccl:%s", n == 1 ? "local" : hosts_apart ? "net" : "p2p");
  }
  rc = 0;
out:
  free(wh);
  free(ids);
  if (rc) {
    nc_close(&t->base);
    return -1;
  }
  *out = &t->base;
  return 0;
}

/* ---- the copy ceilings ---- */

int coll_nccl_copy_bench(coll_transport *tp, coll_copy_kind k, int peer, size_t bytes, int iters,
                         double *sec, int64_t *bad, coll_err *e) {
  nc_transport *t = (nc_transport *)tp;
  int dev = t->base.device, ndev = 0;
  char *src = NULL, *dst = NULL, *host = NULL;
  int sm = k >= COLL_COPY_D2D_SM; /* the same copies by a kernel */
  if (sm) k = (coll_copy_kind)(k - COLL_COPY_D2D_SM);
  int src_host = k == COLL_COPY_H2D, dst_host = k == COLL_COPY_D2H, rc = -1;
  size_t n = bytes ? bytes : 1;
  *bad = 0;
  if (k == COLL_COPY_PEER) {
    cudaGetDeviceCount(&ndev);
    if (peer < 0 || peer >= ndev || peer == dev)
      return coll_fail(e, "rank %d: no other CUDA device %d to copy to (%d device(s))", t->base.rank, peer, ndev);
    int can = 0;
    cudaDeviceCanAccessPeer(&can, dev, peer);
    cudaError_t pe = can ? cudaDeviceEnablePeerAccess(peer, 0) : cudaSuccess;
    if (pe != cudaSuccess && pe != cudaErrorPeerAccessAlreadyEnabled) {
      nc_cuda(t, pe, "cudaDeviceEnablePeerAccess");
      return nc_report(t, e);
    }
    cudaGetLastError();
  }
  host = malloc(n);
  if (!host) return coll_fail(e, "rank %d: out of memory", t->base.rank);
  for (size_t i = 0; i < n; i++) host[i] = (char)(i * 131u + (i >> 12) + 7u); /* not periodic in a page */
  if ((src_host ? nc_cuda(t, cudaMallocHost((void **)&src, n), "cudaMallocHost")
                : nc_cuda(t, cudaMalloc((void **)&src, n), "cudaMalloc")))
    goto out;
  if (k == COLL_COPY_PEER) {
    if (nc_cuda(t, cudaSetDevice(peer), "cudaSetDevice") ||
        nc_cuda(t, cudaMalloc((void **)&dst, n), "cudaMalloc (peer)") ||
        nc_cuda(t, cudaSetDevice(dev), "cudaSetDevice"))
      goto out;
  } else if (dst_host ? nc_cuda(t, cudaMallocHost((void **)&dst, n), "cudaMallocHost")
                      : nc_cuda(t, cudaMalloc((void **)&dst, n), "cudaMalloc")) {
    goto out;
  }
  if (nc_cuda(t, cudaMemcpy(src, host, n, cudaMemcpyDefault), "cudaMemcpy (source)")) goto out;
  if (dst_host)
    memset(dst, 0, n); /* what was not copied cannot pass the check */
  else if (nc_cuda(t, cudaMemset(dst, 0, n), "cudaMemset"))
    goto out;
  for (int i = -2; i < iters; i++) {
    if (i >= 0 && nc_cuda(t, cudaEventRecord(t->ev[0], t->stream), "cudaEventRecord")) goto out;
    cudaError_t ce = sm ? (cudaError_t)coll_cuda_copy(dst, src, bytes, t->stream)
                     : k == COLL_COPY_PEER ? cudaMemcpyPeerAsync(dst, peer, src, dev, bytes, t->stream)
                                           : cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, t->stream);
    if (nc_cuda(t, ce, sm ? "coll_cuda_copy" : "cudaMemcpyAsync")) goto out;
    if (i < 0) continue;
    float ms = 0;
    if (nc_cuda(t, cudaEventRecord(t->ev[1], t->stream), "cudaEventRecord") || nc_wait(t, t->ev[1], e) ||
        nc_cuda(t, cudaEventElapsedTime(&ms, t->ev[0], t->ev[1]), "cudaEventElapsedTime"))
      goto out;
    sec[i] = (double)ms * 1e-3;
  }
  if (nc_wait(t, NULL, e)) goto out;
  /* the copied bytes, back on the host, against the source */
  char *back = malloc(n);
  if (!back) {
    coll_fail(e, "rank %d: out of memory", t->base.rank);
    goto out;
  }
  if (nc_cuda(t, cudaMemcpy(back, dst, bytes, cudaMemcpyDefault), "cudaMemcpy (check)") == 0) {
    for (size_t i = 0; i < bytes; i++) *bad += back[i] != host[i];
    rc = 0;
  }
  free(back);
out:
  if (rc && t->failed) nc_report(t, e);
  t->failed = 0;
  if (src) src_host ? cudaFreeHost(src) : cudaFree(src);
  if (dst) dst_host ? cudaFreeHost(dst) : cudaFree(dst);
  free(host);
  return rc;
}
