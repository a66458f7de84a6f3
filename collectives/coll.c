/* The communicator: names, dispatch to transports and algorithms, point-to-point wrappers,
 * barrier and broadcast. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algo_plan.h"

#if FABENCH_HAVE_MPI
#include <mpi.h>
#endif
#ifdef FABENCH_BUILD_UCX
#include <ucp/api/ucp.h>
#endif

int coll_fail(coll_err *e, const char *fmt, ...) {
  if (e) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
  }
  return -1;
}

static const char *const coll_dtype_names[COLL_NDTYPES] = {"f32", "f64", "f16", "bf16", "i32", "i64"};
static const size_t coll_dtype_sizes[COLL_NDTYPES] = {4, 8, 2, 2, 4, 8};
static const char *const coll_op_names[COLL_NOPS] = {"sum", "prod", "min", "max"};
static const char *const coll_transport_names[COLL_NTRANSPORTS] = {"tcp", "mpi", "ucx", "nccl"};
static const char *const coll_algo_names[COLL_NALGOS] = {"ring", "rhd", "rd",   "tree", "dtree",
                                                         "ps",   "native", "auto", "hier",
                                                         "bruck", "chain", "vdg", "pairwise", "direct",
                                                         "linear"};

size_t coll_dtype_size(coll_dtype dt) { return dt < COLL_NDTYPES ? coll_dtype_sizes[dt] : 0; }
const char *coll_dtype_name(coll_dtype dt) { return dt < COLL_NDTYPES ? coll_dtype_names[dt] : "?"; }
const char *coll_op_name(coll_op op) { return op < COLL_NOPS ? coll_op_names[op] : "?"; }
const char *coll_transport_name(coll_transport_kind k) {
  return k < COLL_NTRANSPORTS ? coll_transport_names[k] : "?";
}

static int coll_lookup(const char *s, const char *const *names, int n) {
  for (int i = 0; s && i < n; i++)
    if (!strcmp(s, names[i])) return i;
  return -1;
}

int coll_dtype_parse(const char *s, coll_dtype *out) {
  int i = coll_lookup(s, coll_dtype_names, COLL_NDTYPES);
  if (i < 0 && s) { /* common aliases */
    if (!strcmp(s, "float")) i = COLL_F32;
    else if (!strcmp(s, "double")) i = COLL_F64;
    else if (!strcmp(s, "half")) i = COLL_F16;
    else if (!strcmp(s, "int")) i = COLL_I32;
  }
  if (i < 0) return -1;
  *out = (coll_dtype)i;
  return 0;
}

int coll_op_parse(const char *s, coll_op *out) {
  int i = coll_lookup(s, coll_op_names, COLL_NOPS);
  if (i < 0) return -1;
  *out = (coll_op)i;
  return 0;
}

int coll_transport_parse(const char *s, coll_transport_kind *out) {
  int i = coll_lookup(s, coll_transport_names, COLL_NTRANSPORTS);
  if (i < 0) return -1;
  *out = (coll_transport_kind)i;
  return 0;
}

int coll_transport_built(coll_transport_kind k) {
  switch (k) {
  case COLL_TCP: return 1;
  case COLL_MPI: return FABENCH_HAVE_MPI;
#ifdef FABENCH_BUILD_UCX
  case COLL_UCX: return 1;
#endif
#ifdef FABENCH_BUILD_NCCL
  case COLL_NCCL: return 1;
#endif
  default: return 0;
  }
}

int coll_algo_parse(const char *s, coll_algo *out) {
  if (!s) return -1;
  char name[32];
  const char *colon = strchr(s, ':');
  size_t n = colon ? (size_t)(colon - s) : strlen(s);
  if (n == 0 || n >= sizeof name) return -1;
  memcpy(name, s, n);
  name[n] = '\0';
  int i = coll_lookup(name, coll_algo_names, COLL_NALGOS);
  if (i < 0 || i > COLL_ALGO_HIER) return -1; /* all-reduce's only (coll_colls_algo_parse) */
  if (i == COLL_ALGO_HIER) { /* hier[:ALG], ALG a flat kind but ps (no parameter of its own) */
    int k = colon ? coll_lookup(colon + 1, coll_algo_names, COLL_NALGOS) : COLL_ALGO_RING;
    if (k < 0 || k == COLL_ALGO_PS || !coll_algo_flat((coll_algo_kind)k)) return -1;
    *out = (coll_algo){COLL_ALGO_HIER, k};
    return 0;
  }
  out->kind = (coll_algo_kind)i;
  out->param = 0;
  if (colon) {
    if (i != COLL_ALGO_PS) return -1; /* only ps and hier take a parameter */
    char *end;
    long k = strtol(colon + 1, &end, 10);
    if (*end || end == colon + 1 || k < 1 || k > 4096) return -1;
    out->param = (int)k;
  }
  return 0;
}

void coll_algo_format(char *out, size_t cap, coll_algo a) {
  const char *n = a.kind < COLL_NALGOS ? coll_algo_names[a.kind] : "?";
  if (a.kind == COLL_ALGO_PS && a.param > 1)
    snprintf(out, cap, "%s:%d", n, a.param);
  else if (a.kind == COLL_ALGO_HIER)
    snprintf(out, cap, "%s:%s", n, a.param >= 0 && a.param < COLL_ALGO_PS ? coll_algo_names[a.param] : "?");
  else
    snprintf(out, cap, "%s", n);
}

/* hier's algorithm across hosts, or NULL where param names none (ps has a parameter of its own) */
static coll_algo_fn coll_hier_across(int param) {
  return param >= 0 && param < COLL_ALGO_PS ? coll_algo_flat((coll_algo_kind)param) : NULL;
}

int coll_algo_supported(const coll_comm *c, coll_algo a) {
  if (a.kind >= COLL_NALGOS) return 0;
  if (a.kind == COLL_ALGO_NATIVE) return c->tp->ops->allreduce != NULL;
  if (a.kind == COLL_ALGO_HIER) return coll_hier_across(a.param) != NULL;
  return a.kind == COLL_ALGO_AUTO || coll_algo_flat(a.kind) != NULL;
}

void coll_format_size(char *out, size_t cap, uint64_t bytes) {
  static const char unit[] = "GMK";
  for (int u = 0; u < 3; u++) {
    uint64_t of = (uint64_t)1 << (10 * (3 - u));
    if (bytes && bytes % of == 0) {
      snprintf(out, cap, "%llu%c", (unsigned long long)(bytes / of), unit[u]);
      return;
    }
  }
  snprintf(out, cap, "%llu", (unsigned long long)bytes);
}

int coll_parse_size(const char *s, uint64_t *out) {
  if (!s || *s < '0' || *s > '9') return -1;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno) return -1;
  unsigned shift = 0;
  if (*end) {
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    default: return -1;
    }
    end++;
    if (*end == 'i' || *end == 'B' || *end == 'b') end++; /* 4KiB, 4KB */
    if (*end == 'B') end++;
    if (*end) return -1;
  }
  if (v > (UINT64_MAX >> shift)) return -1;
  *out = (uint64_t)v << shift;
  return 0;
}

/* coll_parse_size into a size_t */
static int coll_size_parse(const char *s, size_t *out) {
  uint64_t v;
  if (coll_parse_size(s, &v) || v > SIZE_MAX) return -1;
  *out = (size_t)v;
  return 0;
}

static void coll_comm_free_layout(coll_comm *c) {
  free(c->node_order);
  free(c->host_start);
  free(c->group);
}

/* The hosts' layout from c->hosts: node order, each host's ranks, the most on one host. */
static int coll_comm_layout(coll_comm *c) {
  int n = c->size, *host_of = malloc(sizeof(int) * (size_t)n);
  c->node_order = malloc(sizeof(int) * (size_t)n);
  c->host_start = malloc(sizeof(int) * (size_t)(n + 1));
  c->group = malloc(sizeof(int) * (size_t)n);
  if (!host_of || !c->node_order || !c->host_start || !c->group) {
    free(host_of);
    return -1;
  }
  coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])c->hosts, n);
  c->nhosts = coll_layout_plan(c->node_order, c->host_start, host_of, n);
  free(host_of);
  c->lmax = 0;
  for (int h = 0; h < c->nhosts; h++)
    if (c->host_start[h + 1] - c->host_start[h] > c->lmax) c->lmax = c->host_start[h + 1] - c->host_start[h];
  c->node_identity = 1;
  for (int i = 0; i < n; i++) {
    if (c->node_order[i] != i) c->node_identity = 0;
    if (c->node_order[i] == c->rank) c->node_pos = i;
  }
  c->node_host = 0;
  while (c->host_start[c->node_host + 1] <= c->node_pos) c->node_host++;
  c->local_size = c->host_start[c->node_host + 1] - c->host_start[c->node_host];
  return 0;
}

int coll_comm_open(coll_comm **out, coll_boot *b, const coll_comm_opts *o, coll_err *e) {
  *out = NULL;
  if (!coll_transport_built(o->transport))
    return coll_fail(e, "transport '%s' is not built into this fabench", coll_transport_name(o->transport));
  coll_comm *c = calloc(1, sizeof *c);
  if (!c) return coll_fail(e, "out of memory");
  c->rank = coll_boot_rank(b);
  c->size = coll_boot_size(b);
  c->kind = o->transport;
  c->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 60000;
  if (o->model)
    c->model = *o->model;
  else
    coll_model_default(&c->model, o->transport);
  const char *sb = getenv("FABENCH_RING_STREAM_BYTES");
  c->ring_stream_bytes = SIZE_MAX;
  if (sb && *sb && coll_size_parse(sb, &c->ring_stream_bytes)) {
    free(c);
    return coll_fail(e, "FABENCH_RING_STREAM_BYTES='%s' is not a byte count (e.g. 8M, 65536, 0)", sb);
  }
  const char *pc = getenv("FABENCH_RING_PIECES");
  c->ring_pieces = pc && *pc ? atoi(pc) : 0;
  c->hosts = calloc((size_t)c->size, sizeof *c->hosts);
  if (!c->hosts) {
    free(c);
    return coll_fail(e, "out of memory");
  }
  for (int r = 0; r < c->size; r++) snprintf(c->hosts[r], COLL_HOST_MAX, "%s", coll_boot_host(b, r));
  c->world_rank = c->rank;
  c->world_size = c->size;
  if (coll_comm_layout(c) != 0) {
    coll_comm_free_layout(c);
    free(c->hosts);
    free(c);
    return coll_fail(e, "out of memory");
  }
  /* the host's cores, not this rank's affinity: a rank bound to one core has peers on others */
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  c->oversubscribed = o->no_spin || c->local_size > (ncpu > 0 ? ncpu : 1);
  c->serial_with_boot = o->transport == COLL_MPI && !strcmp(coll_boot_kind_name(b), "mpi");
  int rc = -1;
  switch (o->transport) {
  case COLL_TCP: rc = coll_tcp_open(&c->tp, c, b, o, e); break;
#if FABENCH_HAVE_MPI
  case COLL_MPI: rc = coll_mpi_open(&c->tp, c, b, o, e); break;
#endif
#ifdef FABENCH_BUILD_UCX
  case COLL_UCX: rc = coll_ucx_open(&c->tp, c, b, o, e); break;
#endif
#ifdef FABENCH_BUILD_NCCL
  case COLL_NCCL: rc = coll_nccl_open(&c->tp, c, b, o, e); break;
#endif
  default: rc = coll_fail(e, "transport '%s' is not built", coll_transport_name(o->transport)); break;
  }
  if (rc != 0) {
    coll_comm_free_layout(c);
    free(c->hosts);
    free(c);
    return -1;
  }
  /* A transport that moves each large message by rendezvous (a handshake, then one copy by the
   * receiver) pays a handshake per sub-chunk. Measured on ucx over shared memory at 2 ranks
   * against MPI_Allreduce: 256 KiB sub-chunks gave 0.80-0.86 at 16 MiB, 1 MiB 0.93-1.0; the
   * ring's ramp of small first sub-chunks (which pays on streamed transports) gave 0.92-0.97 at
   * 1-2 MiB, none 1.00-1.03. */
  c->chunk_bytes = o->chunk_bytes ? o->chunk_bytes : c->tp->rendezvous ? COLL_CHUNK_UCX : COLL_CHUNK_DEFAULT;
  c->ring_ramp = c->tp->rendezvous ? 0 : 2;
  /* hier inside hosts over another transport: a second communicator on the same world, opened
   * by every rank alike (the layout is the same on all) */
  if (o->has_intra && o->intra != o->transport && c->nhosts > 1 && c->lmax > 1) {
    if (o->intra == COLL_NCCL || o->transport == COLL_NCCL) {
      coll_comm_close(c);
      return coll_fail(e, "hier inside hosts over another transport: host transports only (tcp, ucx, mpi), not nccl");
    }
    coll_comm_opts io = *o;
    io.transport = o->intra;
    io.has_intra = 0;
    io.model = NULL;
    if (coll_comm_open(&c->intra, b, &io, e) != 0) {
      coll_comm_close(c);
      return -1;
    }
  }
  *out = c;
  return 0;
}

size_t coll_comm_chunk(const coll_comm *c) { return c->chunk_bytes; }
const coll_model *coll_comm_model(const coll_comm *c) { return &c->model; }

int coll_mem_copy(coll_comm *c, void *dst, const void *src, size_t bytes, coll_err *e) {
#ifdef FABENCH_BUILD_NCCL
  if (c->tp->on_device) return coll_nccl_copy_wait(c->tp, dst, src, bytes, e);
#endif
  (void)c, (void)e;
  memcpy(dst, src, bytes);
  return 0;
}

int coll_timer_start(coll_comm *c, coll_err *e) {
#ifdef FABENCH_BUILD_NCCL
  if (c->tp->on_device) return coll_nccl_timer(c->tp, 0, NULL, e);
#endif
  return coll_fail(e, "rank %d: %s has no device timer", c->rank, c->tp->ops->name);
}

int coll_copy_bench(coll_comm *c, coll_copy_kind k, int peer, size_t bytes, int iters, double *sec,
                    int64_t *bad, coll_err *e) {
#ifdef FABENCH_BUILD_NCCL
  if (c->tp->on_device) return coll_nccl_copy_bench(c->tp, k, peer, bytes, iters, sec, bad, e);
#endif
  (void)k, (void)peer, (void)bytes, (void)iters, (void)sec, (void)bad;
  return coll_fail(e, "rank %d: %s has no GPU to copy on", c->rank, c->tp->ops->name);
}

int coll_timer_stop(coll_comm *c, double *sec, coll_err *e) {
#ifdef FABENCH_BUILD_NCCL
  if (c->tp->on_device) return coll_nccl_timer(c->tp, 1, sec, e);
#endif
  (void)sec;
  return coll_fail(e, "rank %d: %s has no device timer", c->rank, c->tp->ops->name);
}

void *coll_mem_alloc(coll_comm *c, size_t bytes, coll_err *e) {
  if (!c->tp->ops->mem_alloc && c->intra && c->intra->tp->ops->mem_alloc)
    return coll_mem_alloc(c->intra, bytes, e); /* hier's phases inside hosts map it there */
  if (c->tp->ops->mem_alloc) {
    void *p = c->tp->ops->mem_alloc(c->tp, bytes, e);
    /* the mapped ring's stores are part of what carries the data: a run that streams them
     * names another fabric ("+nt<size>"), fitted apart */
    char *fab = c->tp->fabric;
    if (p && c->ring_stream_bytes != SIZE_MAX && !c->tp->on_device && strstr(fab, "+rkey_ptr") &&
        !strstr(fab, "+nt")) {
      char sz[32];
      coll_format_size(sz, sizeof sz, c->ring_stream_bytes);
      size_t used = strlen(fab);
      snprintf(fab + used, sizeof c->tp->fabric - used, "+nt%s", sz);
    }
    return p;
  }
  void *p = NULL;
  if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) {
    coll_fail(e, "rank %d: cannot allocate %zu bytes", c->rank, bytes);
    return NULL;
  }
  return p;
}

int coll_comm_maps(const coll_comm *c) {
  return c && ((c->tp->maps && !c->tp->on_device) || coll_comm_maps(c->intra));
}

void coll_mem_free(coll_comm *c, void *p) {
  if (!p) return;
  if (!c->tp->ops->mem_free && c->intra && c->intra->tp->ops->mem_free) {
    coll_mem_free(c->intra, p);
    return;
  }
  if (c->tp->ops->mem_free)
    c->tp->ops->mem_free(c->tp, p);
  else
    free(p);
}

const void *coll_peer_ptr(coll_comm *c, int peer, const void *buf, size_t bytes, uint64_t where[2]) {
  if (!c->tp->ops->peer_ptr || c->view || c->nhosts > 1) return NULL;
  return c->tp->ops->peer_ptr(c->tp, peer, buf, bytes, where);
}

const void *coll_host_ptr(coll_comm *c, int peer, const void *buf, size_t bytes, uint64_t where[2]) {
  if (!c->tp->ops->peer_ptr || c->tp->on_device || peer < 0 || peer >= c->size) return NULL;
  /* the transport's peer_ptr gives nothing for a peer on another host */
  return c->tp->ops->peer_ptr(c->tp, c->view ? c->view[peer] : peer, buf, bytes, where);
}

void coll_view_set(coll_comm *c, const int *map, int n, int idx) {
  c->view = map;
  c->rank = idx;
  c->size = n;
}

void coll_view_clear(coll_comm *c) {
  c->view = NULL;
  c->rank = c->world_rank;
  c->size = c->world_size;
}

int coll_comm_rank(const coll_comm *c) { return c->world_rank; }
int coll_comm_size(const coll_comm *c) { return c->world_size; }
const char *coll_comm_host(const coll_comm *c, int rank) {
  return rank >= 0 && rank < c->world_size ? c->hosts[rank] : "?";
}
int coll_comm_local_size(const coll_comm *c) { return c->local_size; }
int coll_comm_serial_with_boot(const coll_comm *c) { return c && c->serial_with_boot; }
int coll_comm_sleeps(const coll_comm *c) { return c->tp->sleeps; }
const char *coll_comm_fabric(const coll_comm *c) { return c->tp->fabric; }
const char *coll_comm_intra_fabric(const coll_comm *c) { return c->intra ? c->intra->tp->fabric : NULL; }

void coll_comm_mark_failed(coll_comm *c) {
  if (c) c->failed = 1;
  if (c && c->intra) c->intra->failed = 1;
}

void coll_comm_close(coll_comm *c) {
  if (!c) return;
  coll_comm_close(c->intra);
  if (c->tp && c->tp->ops->dev_free) { /* device scratch goes before the device's context */
    c->tp->ops->dev_free(c->tp, c->scratch);
    c->tp->ops->dev_free(c->tp, c->scratch2);
    c->scratch = c->scratch2 = NULL;
  }
  if (c->tp) c->tp->ops->close(c->tp);
  free(c->scratch);
  free(c->scratch2);
  free(c->reqs);
  coll_comm_free_layout(c);
  free(c->hosts);
  free(c);
}

void *coll_scratch(coll_comm *c, int which, size_t bytes, coll_err *e) {
  void **p = which ? &c->scratch2 : &c->scratch;
  size_t *cap = which ? &c->scratch2_bytes : &c->scratch_bytes;
  if (bytes == 0) bytes = 64;
  if (*cap < bytes) {
    size_t want = (bytes + 63) & ~(size_t)63;
    void *n = NULL;
    if (c->tp->ops->dev_alloc) { /* device buffers need device scratch */
      if (!(n = c->tp->ops->dev_alloc(c->tp, want, e))) return NULL;
      c->tp->ops->dev_free(c->tp, *p);
      *p = n;
      *cap = want;
      return n;
    }
    if (posix_memalign(&n, 64, want) != 0) {
      coll_fail(e, "rank %d: cannot allocate %zu bytes of scratch", c->rank, want);
      return NULL;
    }
    free(*p);
    *p = n;
    *cap = want;
  }
  return *p;
}

coll_req *coll_reqs(coll_comm *c, size_t n, coll_err *e) {
  if (n == 0) n = 1;
  if (c->reqs_cap < n) {
    coll_req *r = realloc(c->reqs, n * sizeof *r);
    if (!r) {
      coll_fail(e, "rank %d: cannot allocate %zu requests", c->rank, n);
      return NULL;
    }
    c->reqs = r;
    c->reqs_cap = n;
  }
  return c->reqs;
}

int coll_isend(coll_comm *c, int peer, const void *buf, size_t bytes, uint32_t tag, coll_req *r,
               coll_err *e) {
  if (peer < 0 || peer >= c->size) return coll_fail(e, "rank %d: send to invalid rank %d", c->rank, peer);
  return c->tp->ops->isend(c->tp, c->view ? c->view[peer] : peer, buf, bytes, tag, r, e);
}

int coll_irecv(coll_comm *c, int peer, void *buf, size_t bytes, uint32_t tag, coll_req *r,
               coll_err *e) {
  if (peer < 0 || peer >= c->size) return coll_fail(e, "rank %d: receive from invalid rank %d", c->rank, peer);
  return c->tp->ops->irecv(c->tp, c->view ? c->view[peer] : peer, buf, bytes, tag, r, e);
}

int coll_waitall(coll_comm *c, coll_req *r, int n, coll_err *e) {
  if (n <= 0) return 0;
  return c->tp->ops->waitall(c->tp, r, n, c->timeout_ms, e);
}

/* Dissemination barrier: log2(n) rounds of empty messages. */
int coll_barrier(coll_comm *c, coll_err *e) {
  c->seq++;
  uint8_t in = 0, out = 0;
  uint32_t step = 0;
  for (int k = 1; k < c->size; k <<= 1, step++) {
    coll_req r[2];
    int to = (c->rank + k) % c->size, from = (c->rank - k + c->size) % c->size;
    if (coll_irecv(c, from, &in, 1, coll_tag(c, step), &r[0], e) != 0) return -1;
    if (coll_isend(c, to, &out, 1, coll_tag(c, step), &r[1], e) != 0) return -1;
    if (coll_waitall(c, r, 2, e) != 0) return -1;
  }
  return 0;
}

/* The binomial tree over the whole buffer (weights once per run: latency matters little). */
int coll_bcast(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e) {
  c->seq++;
  return coll_bcast_tree(c, buf, bytes, root, e);
}

coll_algo_fn coll_algo_flat(coll_algo_kind k) {
  switch (k) {
  case COLL_ALGO_RING: return coll_ar_ring;
  case COLL_ALGO_RHD: return coll_ar_rhd;
  case COLL_ALGO_RD: return coll_ar_rd;
  case COLL_ALGO_TREE: return coll_ar_tree;
  case COLL_ALGO_DTREE: return coll_ar_dtree;
  case COLL_ALGO_PS: return coll_ar_ps;
  default: return NULL;
  }
}

int coll_allreduce(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op,
                   coll_algo algo, coll_algo *ran, coll_err *e) {
  if (dt >= COLL_NDTYPES || op >= COLL_NOPS) return coll_fail(e, "invalid dtype or op");
  if (algo.kind == COLL_ALGO_AUTO) algo = coll_auto_choose(c, buf, count * coll_dtype_size(dt));
  /* more servers than ranks: every rank serves (coll_ar_ps), and what ran says so */
  if (algo.kind == COLL_ALGO_PS && algo.param > c->size) algo.param = c->size;
  if (ran) *ran = algo;
  if (algo.kind == COLL_ALGO_NATIVE) {
    if (!c->tp->ops->allreduce)
      return coll_fail(e, "transport %s has no native all-reduce", c->tp->ops->name);
    return c->tp->ops->allreduce(c->tp, buf, count, dt, op, e);
  }
  coll_algo_fn f = algo.kind == COLL_ALGO_HIER ? coll_ar_hier : coll_algo_flat(algo.kind);
  if (!f || (algo.kind == COLL_ALGO_HIER && !coll_hier_across(algo.param)))
    return coll_fail(e, "unknown all-reduce algorithm");
  if (c->view) return coll_fail(e, "rank %d: internal: an all-reduce inside a group view", c->world_rank);
  c->seq++;
  if (c->size == 1 || count == 0) return 0;
  /* the flat algorithms visit the ranks host by host (ps keeps its servers on the first ranks) */
  int ordered = !c->node_identity && algo.kind != COLL_ALGO_HIER && algo.kind != COLL_ALGO_PS;
  if (ordered) coll_view_set(c, c->node_order, c->size, c->node_pos);
  int rc = f(c, buf, count, dt, op, algo.param, e);
  if (ordered) coll_view_clear(c);
  if (c->tp->ops->finish && c->tp->ops->finish(c->tp, rc ? NULL : e) != 0) rc = -1;
  return rc;
}

int coll_allreduce_group(coll_comm *c, const int *group, int n, void *buf, size_t count, coll_dtype dt,
                         coll_op op, coll_algo algo, coll_err *e) {
  if (dt >= COLL_NDTYPES || op >= COLL_NOPS) return coll_fail(e, "invalid dtype or op");
  coll_algo_fn f = coll_algo_flat(algo.kind);
  if (!f) return coll_fail(e, "rank %d: a group all-reduce runs the flat algorithms only", c->world_rank);
  if (c->view) return coll_fail(e, "rank %d: internal: a group all-reduce inside a group view", c->world_rank);
  c->seq++; /* every rank alike, in a group or not: the next call's tags agree everywhere */
  if (n <= 1 || count == 0) return 0;
  int idx = -1;
  for (int i = 0; i < n; i++) {
    if (group[i] < 0 || group[i] >= c->world_size) return coll_fail(e, "rank %d: group rank %d out of range", c->world_rank, group[i]);
    if (group[i] == c->world_rank) idx = i;
  }
  if (idx < 0) return coll_fail(e, "rank %d: internal: not in its own group", c->world_rank);
  if (algo.kind == COLL_ALGO_PS && algo.param > n) algo.param = n;
  coll_view_set(c, group, n, idx);
  int rc = f(c, buf, count, dt, op, algo.param, e);
  coll_view_clear(c);
  if (c->tp->ops->finish && c->tp->ops->finish(c->tp, rc ? NULL : e) != 0) rc = -1;
  return rc;
}

int coll_colls_algo(coll_kind k, coll_algo a) {
  coll_algo_kind x = a.kind;
  if (x == COLL_ALGO_NATIVE || x == COLL_ALGO_DIRECT) return k < COLL_NCOLLS; /* native: where the library has it */
  switch (k) {
  case COLL_REDUCE_SCATTER: return x == COLL_ALGO_AUTO || x == COLL_ALGO_RING || x == COLL_ALGO_RHD || x == COLL_ALGO_HIER;
  case COLL_ALLGATHER:
    return x == COLL_ALGO_AUTO || x == COLL_ALGO_RING || x == COLL_ALGO_RD || x == COLL_ALGO_BRUCK || x == COLL_ALGO_HIER;
  case COLL_BCAST:
    return x == COLL_ALGO_AUTO || x == COLL_ALGO_TREE || x == COLL_ALGO_CHAIN || x == COLL_ALGO_VDG ||
           x == COLL_ALGO_LINEAR || x == COLL_ALGO_HIER;
  case COLL_ALLTOALL:
    return x == COLL_ALGO_AUTO || x == COLL_ALGO_PAIRWISE || x == COLL_ALGO_LINEAR || x == COLL_ALGO_BRUCK ||
           x == COLL_ALGO_HIER;
  default: return 0;
  }
}

int coll_colls_algo_parse(coll_kind k, const char *s, coll_algo *out) {
  /* "hier:ring" is how coll_algo_format writes hier (rows' algo_ran): the same algorithm */
  int i = s && !strcmp(s, "hier:ring") ? COLL_ALGO_HIER : s ? coll_lookup(s, coll_algo_names, COLL_NALGOS) : -1;
  if (i < 0 || !coll_colls_algo(k, (coll_algo){(coll_algo_kind)i, 0})) return -1;
  *out = (coll_algo){(coll_algo_kind)i, 0};
  return 0;
}

/* The transport's native call of collective k (NULL: none). */
static const void *coll_colls_native(const coll_transport_ops *o, coll_kind k) {
  const void *native[COLL_NCOLLS] = {(const void *)o->reduce_scatter, (const void *)o->allgather,
                                     (const void *)o->bcast, (const void *)o->alltoallv};
  return k < COLL_NCOLLS ? native[k] : NULL;
}

/* Every algorithm also runs on a device communicator's buffers: its copies and reductions go
 * through coll_ccopy and coll_creduce (the transport's stream), its messages through the
 * transport, and direct, which reads only host memory the peers map, falls back there. */
int coll_colls_supported(const coll_comm *c, coll_kind k, coll_algo a) {
  if (k >= COLL_NCOLLS || !coll_colls_algo(k, a)) return 0;
  return a.kind != COLL_ALGO_NATIVE || coll_colls_native(c->tp->ops, k) != NULL;
}

int coll_colls_begin(coll_comm *c, coll_kind k, coll_algo a, coll_dtype dt, coll_err *e) {
  static const char *const names[COLL_NCOLLS] = {"reduce-scatter", "all-gather", "broadcast", "all-to-all"};
  if (dt >= COLL_NDTYPES) return coll_fail(e, "invalid dtype");
  if (!coll_colls_algo(k, a)) {
    char an[32];
    coll_algo_format(an, sizeof an, a);
    return coll_fail(e, "%s has no algorithm '%s'", names[k], an);
  }
  if (c->view) return coll_fail(e, "rank %d: internal: a %s inside a group view", c->world_rank, names[k]);
  const coll_transport_ops *o = c->tp->ops;
  if (a.kind == COLL_ALGO_NATIVE && !coll_colls_native(o, k))
    return coll_fail(e, "transport %s has no native %s", o->name, names[k]);
  c->seq++;
  return 0;
}

int coll_colls_end(coll_comm *c, int rc, coll_err *e) {
  if (c->tp->ops->finish && c->tp->ops->finish(c->tp, rc ? NULL : e) != 0) rc = -1;
  return rc;
}

int coll_transport_usable(coll_transport_kind k, coll_err *e) {
  if (k == COLL_NCCL) {
#ifdef FABENCH_BUILD_NCCL
    return coll_nccl_usable(e);
#else
    return coll_fail(e, "nccl: no CUDA device is present (this fabench was built without CUDA and NCCL)");
#endif
  }
  if (!coll_transport_built(k))
    return coll_fail(e, "transport '%s' is not built into this fabench", coll_transport_name(k));
  return 0;
}

int coll_comm_device(const coll_comm *c) { return c->tp->on_device ? c->tp->device : -1; }
const char *coll_comm_gpu(const coll_comm *c, int rank) {
  return c->tp->gpus && rank >= 0 && rank < c->size ? c->tp->gpus[rank] : "";
}

void coll_versions(char *out, size_t cap) {
  size_t off = 0;
  out[0] = '\0';
#if FABENCH_HAVE_MPI
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  v[strcspn(v, ",\n")] = '\0'; /* first clause: "Open MPI v4.1.4" */
  off += (size_t)snprintf(out + off, cap - off, "%s", v);
#endif
#ifdef FABENCH_BUILD_UCX
  if (off < cap) off += (size_t)snprintf(out + off, cap - off, "%sUCX %s", off ? "; " : "", ucp_get_version_string());
#endif
#ifdef FABENCH_BUILD_NCCL
  if (off < cap) off += coll_nccl_version(out + off, cap - off, off > 0);
#endif
  (void)off;
}
