/* mpi transport: MPI_Isend/MPI_Irecv on MPI_COMM_WORLD, and MPI_Allreduce as the native
 * algorithm. Waits poll MPI_Test against a deadline, since MPI_Waitall cannot time out; where
 * the rank has no core to spin on (no_spin, or more ranks than cores) they sleep between polls.
 * MPI moves data only inside its calls, so sleeping slows the transfer, but training's
 * communication thread then leaves backward its core, which matters more (docs/measurements.md,
 * "Waiting asleep"). MPI's own MPI_Allreduce (native) spins inside Open MPI whatever we do. */
#include <mpi.h>
#include <stdio.h>
/* Open MPI's component headers (libopenmpi-dev ships them): to ask which pml and btl it chose */
#if defined(OPEN_MPI) && __has_include(<ompi/mca/pml/base/base.h>) &&     __has_include(<opal/mca/btl/base/base.h>) && __has_include(<ompi/mca/mtl/base/base.h>)
#define MPI_FABRIC_FROM_OMPI 1
#include <dlfcn.h>
#include <ompi/mca/mtl/base/base.h>
#include <ompi/mca/pml/base/base.h>
#include <opal/mca/btl/base/base.h>
#else
#define MPI_FABRIC_FROM_OMPI 0
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "coll_internal.h"
#include "sock.h"

typedef struct {
  MPI_Request req;
  int peer, is_send;
  size_t bytes;
} mpi_req;
_Static_assert(sizeof(mpi_req) <= sizeof(coll_req), "mpi_req must fit in coll_req");

typedef struct {
  coll_transport base;
  MPI_Comm comm;
  coll_boot *boot; /* its watchdog guards MPI_Allreduce */
  MPI_Op half_ops[2][COLL_NOPS]; /* f16 and bf16 reductions (no MPI datatype for them) */
  int tag_ub;
  long idle_sleep_ns; /* no core to spin on (coll_internal.h's oversubscribed): sleep between tests */
} mpi_transport;

#define MPI_SPIN_TESTS 16      /* unanswered polls before a wait starts sleeping */
#define MPI_IDLE_SLEEP_US 50.0 /* the longest sleep (FABENCH_MPI_SLEEP_US overrides; 0 spins) */

static const char *mpi_host(const mpi_transport *t, int r) { return coll_comm_host(t->base.comm, r); }

/* MPI has no 16-bit float types: reduce them with our kernels through user-defined ops. */
#define MPI_HALF_OP(NAME, DT, OP)                                                   \
  static void NAME(void *in, void *inout, int *len, MPI_Datatype *type) {          \
    (void)type;                                                                    \
    coll_reduce(inout, in, (size_t)*len, DT, OP);                                  \
  }
MPI_HALF_OP(mpi_f16_sum, COLL_F16, COLL_SUM)
MPI_HALF_OP(mpi_f16_prod, COLL_F16, COLL_PROD)
MPI_HALF_OP(mpi_f16_min, COLL_F16, COLL_MIN)
MPI_HALF_OP(mpi_f16_max, COLL_F16, COLL_MAX)
MPI_HALF_OP(mpi_bf16_sum, COLL_BF16, COLL_SUM)
MPI_HALF_OP(mpi_bf16_prod, COLL_BF16, COLL_PROD)
MPI_HALF_OP(mpi_bf16_min, COLL_BF16, COLL_MIN)
MPI_HALF_OP(mpi_bf16_max, COLL_BF16, COLL_MAX)

static int mpi_err(const mpi_transport *t, coll_err *e, int rc, const char *what, int peer) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, s, &len);
  return coll_fail(e, "rank %d (%s): %s%s%d (%s) failed: %s", t->base.rank, mpi_host(t, t->base.rank),
                   what, peer >= 0 ? " rank " : "", peer, peer >= 0 ? mpi_host(t, peer) : "", s);
}

/* MPI_Test under the boot's watchdog: it can spin for ever on a stopped peer (boot.c) */
static int mpi_test_watched(const mpi_transport *t, MPI_Request *req, int *done) {
  coll_boot_mpi_begin(t->boot, "MPI_Test");
  int rc = MPI_Test(req, done, MPI_STATUS_IGNORE);
  coll_boot_mpi_end(t->boot);
  return rc;
}

static int mpi_isend(coll_transport *tp, int peer, const void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  mpi_req *q = (mpi_req *)r;
  if (bytes > (size_t)INT32_MAX) return coll_fail(e, "mpi transport: message over 2 GiB");
  q->peer = peer;
  q->is_send = 1;
  q->bytes = bytes;
  coll_boot_mpi_begin(t->boot, "MPI_Isend");
  int rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, (int)(tag % (uint32_t)t->tag_ub), t->comm, &q->req);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Isend to", peer);
}

static int mpi_irecv(coll_transport *tp, int peer, void *buf, size_t bytes, uint32_t tag,
                     coll_req *r, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  mpi_req *q = (mpi_req *)r;
  if (bytes > (size_t)INT32_MAX) return coll_fail(e, "mpi transport: message over 2 GiB");
  q->peer = peer;
  q->is_send = 0;
  q->bytes = bytes;
  coll_boot_mpi_begin(t->boot, "MPI_Irecv");
  int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, (int)(tag % (uint32_t)t->tag_ub), t->comm, &q->req);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Irecv from", peer);
}

static int mpi_test(coll_transport *tp, coll_req *r, int *done, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  mpi_req *q = (mpi_req *)r;
  int rc = mpi_test_watched(t, &q->req, done);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Test with", q->peer);
}

static int mpi_waitall(coll_transport *tp, coll_req *r, int n, int timeout_ms, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  double deadline = coll_sock_now() + timeout_ms / 1000.0;
  int first = 0, idle = 0;
  while (first < n) {
    mpi_req *q = (mpi_req *)&r[first];
    int done = 0;
    int rc = mpi_test_watched(t, &q->req, &done);
    if (rc != MPI_SUCCESS) return mpi_err(t, e, rc, "waiting for", q->peer);
    if (done) {
      first++;
      idle = 0;
      continue;
    }
    if (t->idle_sleep_ns && ++idle > MPI_SPIN_TESTS) {
      /* 2, 4, 8 ... us, up to the full sleep: a message's partner must poll too (a rendezvous
       * needs both ends), and most waits end soon after they start sleeping */
      int k = idle - MPI_SPIN_TESTS - 1;
      /* Linux stretches a normal thread's sleep by its timer slack (50 us by default), which
       * would make every step of this backoff a 50 us sleep: the waiting thread asks for none */
      if (k == 0) prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
      long ns = k < 16 && (2000L << k) < t->idle_sleep_ns ? 2000L << k : t->idle_sleep_ns;
      struct timespec ts = {0, ns};
      nanosleep(&ts, NULL);
    }
    if (coll_sock_now() > deadline)
      return coll_fail(e, "rank %d (%s): timed out after %d ms waiting to %s %zu bytes %s rank %d (%s)",
                       tp->rank, mpi_host(t, tp->rank), timeout_ms, q->is_send ? "send" : "receive",
                       q->bytes, q->is_send ? "to" : "from", q->peer, mpi_host(t, q->peer));
  }
  return 0;
}

static MPI_Datatype mpi_type(coll_dtype dt) {
  switch (dt) {
  case COLL_F32: return MPI_FLOAT;
  case COLL_F64: return MPI_DOUBLE;
  case COLL_I32: return MPI_INT32_T;
  case COLL_I64: return MPI_INT64_T;
  default: return MPI_UINT16_T; /* f16, bf16: with our own ops */
  }
}

static int mpi_allreduce(coll_transport *tp, void *buf, size_t count, coll_dtype dt, coll_op op,
                         coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  static const MPI_Op builtin[COLL_NOPS] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  if (count > (size_t)INT32_MAX) return coll_fail(e, "MPI_Allreduce: count over 2^31");
  MPI_Op mop = builtin[op];
  if (dt == COLL_F16) mop = t->half_ops[0][op];
  if (dt == COLL_BF16) mop = t->half_ops[1][op];
  coll_boot_mpi_begin(t->boot, "MPI_Allreduce");
  int rc = MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, mpi_type(dt), mop, t->comm);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Allreduce", -1);
}

static int mpi_reduce_scatter(coll_transport *tp, const void *sb, void *rb, size_t count, coll_dtype dt,
                              coll_op op, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  static const MPI_Op builtin[COLL_NOPS] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  if (count > (size_t)INT32_MAX) return coll_fail(e, "MPI_Reduce_scatter_block: count over 2^31");
  MPI_Op mop = dt == COLL_F16 ? t->half_ops[0][op] : dt == COLL_BF16 ? t->half_ops[1][op] : builtin[op];
  coll_boot_mpi_begin(t->boot, "MPI_Reduce_scatter_block");
  int rc = MPI_Reduce_scatter_block(sb, rb, (int)count, mpi_type(dt), mop, t->comm);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Reduce_scatter_block", -1);
}

static int mpi_allgather(coll_transport *tp, const void *sb, void *rb, size_t count, coll_dtype dt, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  if (count > (size_t)INT32_MAX) return coll_fail(e, "MPI_Allgather: count over 2^31");
  coll_boot_mpi_begin(t->boot, "MPI_Allgather");
  int rc = MPI_Allgather(sb, (int)count, mpi_type(dt), rb, (int)count, mpi_type(dt), t->comm);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Allgather", -1);
}

static int mpi_bcast(coll_transport *tp, void *buf, size_t count, coll_dtype dt, int root, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  if (count > (size_t)INT32_MAX) return coll_fail(e, "MPI_Bcast: count over 2^31");
  coll_boot_mpi_begin(t->boot, "MPI_Bcast");
  int rc = MPI_Bcast(buf, (int)count, mpi_type(dt), root, t->comm);
  coll_boot_mpi_end(t->boot);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Bcast", -1);
}

/* MPI takes int counts and displacements: the size_t ones converted, each checked. */
static int mpi_alltoallv(coll_transport *tp, const void *sb, const size_t *sc, const size_t *sd, void *rb,
                         const size_t *rc_, const size_t *rd, coll_dtype dt, coll_err *e) {
  mpi_transport *t = (mpi_transport *)tp;
  int n = tp->size, *v = malloc(4 * (size_t)n * sizeof *v);
  if (!v) return coll_fail(e, "MPI_Alltoallv: out of memory");
  const size_t *from[4] = {sc, sd, rc_, rd};
  for (int k = 0; k < 4; k++)
    for (int p = 0; p < n; p++) {
      if (from[k][p] > (size_t)INT32_MAX) {
        free(v);
        return coll_fail(e, "MPI_Alltoallv: a count or displacement over 2^31");
      }
      v[k * n + p] = (int)from[k][p];
    }
  coll_boot_mpi_begin(t->boot, "MPI_Alltoallv");
  int rc = MPI_Alltoallv(sb, v, v + n, mpi_type(dt), rb, v + 2 * n, v + 3 * n, mpi_type(dt), t->comm);
  coll_boot_mpi_end(t->boot);
  free(v);
  return rc == MPI_SUCCESS ? 0 : mpi_err(t, e, rc, "MPI_Alltoallv", -1);
}

static void mpi_close(coll_transport *tp) {
  mpi_transport *t = (mpi_transport *)tp;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) {
    for (int h = 0; h < 2; h++)
      for (int o = 0; o < COLL_NOPS; o++)
        if (t->half_ops[h][o] != MPI_OP_NULL) MPI_Op_free(&t->half_ops[h][o]);
    if (t->comm != MPI_COMM_NULL) MPI_Comm_free(&t->comm);
  }
  free(t);
}

static const coll_transport_ops mpi_ops = {
    .name = "mpi",
    .isend = mpi_isend,
    .irecv = mpi_irecv,
    .test = mpi_test,
    .waitall = mpi_waitall,
    .allreduce = mpi_allreduce,
    .reduce_scatter = mpi_reduce_scatter,
    .allgather = mpi_allgather,
    .bcast = mpi_bcast,
    .alltoallv = mpi_alltoallv,
    .close = mpi_close,
};

/* What Open MPI was asked to use, from the MCA settings mpirun hands its ranks: only where
 * the library cannot be asked (another MPI, or Open MPI's headers missing). */
static void mpi_fabric_asked(char *out, size_t cap) {
  const char *pml = getenv("OMPI_MCA_pml"), *btl = getenv("OMPI_MCA_btl");
  const char *tls = getenv("OMPI_MCA_pml_ucx_tls");
  if (pml && !strcmp(pml, "ucx"))
    snprintf(out, cap, "mpi:ucx%s%s?", tls ? "/" : "", tls ? tls : "");
  else if (btl)
    snprintf(out, cap, "mpi:%s/%s?", pml ? pml : "ob1", btl);
  else
    snprintf(out, cap, "mpi:unknown");
}

#if MPI_FABRIC_FROM_OMPI
/* A component Open MPI selected, checked to be of the type expected (a layout that changed
 * under us would fail that check, not print garbage). */
static const char *mpi_component_name(const mca_base_component_t *c, const char *type) {
  if (!c || strncmp(c->mca_type_name, type, sizeof c->mca_type_name)) return NULL;
  if (!memchr(c->mca_component_name, '\0', sizeof c->mca_component_name)) return NULL;
  return c->mca_component_name[0] ? c->mca_component_name : NULL;
}

/* What Open MPI uses, asked of the library after MPI_Init: its selected pml (ob1, ucx, cm)
 * and, under ob1, the byte transfer layers it brought up. ob1 sends to a peer through the
 * reaching btl of highest exclusivity: on one host that is the best local one (vader over
 * tcp); across hosts, the network ones too. Under cm, the selected mtl. */
static int mpi_fabric_selected(char *out, size_t cap, int host_count) {
  const mca_pml_base_component_t *pmlc = dlsym(RTLD_DEFAULT, "mca_pml_base_selected_component");
  const char *pml = pmlc ? mpi_component_name(&pmlc->pmlm_version, "pml") : NULL;
  if (!pml) return -1;
  if (!strcmp(pml, "cm")) {
    const mca_mtl_base_component_t *mtl = dlsym(RTLD_DEFAULT, "ompi_mtl_base_selected_component");
    const mca_mtl_base_component_t *const *pm = (const mca_mtl_base_component_t *const *)mtl;
    const char *name = pm && *pm ? mpi_component_name(&(*pm)->mtl_version, "mtl") : NULL;
    snprintf(out, cap, "mpi:cm/%s", name ? name : "?");
    return 0;
  }
  if (strcmp(pml, "ob1") != 0) {
    snprintf(out, cap, "mpi:%s", pml); /* ucx picks per peer inside UCX: not visible here */
    return 0;
  }
  opal_list_t *mods = dlsym(RTLD_DEFAULT, "mca_btl_base_modules_initialized");
  if (!mods) return -1;
  char list[128] = "";
  const char *best = NULL;
  uint32_t best_excl = 0;
  mca_btl_base_selected_module_t *m;
  OPAL_LIST_FOREACH(m, mods, mca_btl_base_selected_module_t) {
    const char *name = m->btl_component ? mpi_component_name(&m->btl_component->btl_version, "btl") : NULL;
    if (!name || !strcmp(name, "self") || !m->btl_module) continue;
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", used ? "+" : "", name);
    if (!best || m->btl_module->btl_exclusivity > best_excl) {
      best = name;
      best_excl = m->btl_module->btl_exclusivity;
    }
  }
  /* a list too long for the column is cut: the return value says so to gcc at -Os */
  int n = snprintf(out, cap, "mpi:ob1/%s", host_count > 1 ? (list[0] ? list : "?") : (best ? best : "self"));
  return n < 0 ? -1 : 0;
}
#endif

static void mpi_fabric(char *out, size_t cap, int host_count) {
#if MPI_FABRIC_FROM_OMPI
  if (mpi_fabric_selected(out, cap, host_count) == 0) return;
#else
  (void)host_count;
#endif
  mpi_fabric_asked(out, cap);
}

int coll_mpi_open(coll_transport **out, coll_comm *cm, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e) {
  (void)o;
  *out = NULL;
  if (strcmp(coll_boot_kind_name(b), "mpi") != 0 && coll_boot_size(b) > 1)
    return coll_fail(e, "the mpi transport needs ranks started by mpirun or srun (use -n with "
                        "--transport mpi, or launch fabench with mpirun)");
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
      return coll_fail(e, "MPI_Init_thread failed");
  }
  mpi_transport *t = calloc(1, sizeof *t);
  if (!t) return coll_fail(e, "out of memory");
  t->base.ops = &mpi_ops;
  t->base.rank = cm->rank;
  t->base.size = cm->size;
  t->base.comm = cm;
  /* a communicator of our own, so our messages never meet anyone else's */
  t->boot = b;
  coll_boot_mpi_begin(b, "MPI_Comm_dup");
  MPI_Comm_dup(MPI_COMM_WORLD, &t->comm);
  coll_boot_mpi_end(b);
  MPI_Comm_set_errhandler(t->comm, MPI_ERRORS_RETURN);
  int *ub = NULL, flag = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
  t->tag_ub = flag && ub && *ub > 0 ? *ub : 32767;
  MPI_User_function *fns[2][COLL_NOPS] = {{mpi_f16_sum, mpi_f16_prod, mpi_f16_min, mpi_f16_max},
                                          {mpi_bf16_sum, mpi_bf16_prod, mpi_bf16_min, mpi_bf16_max}};
  for (int h = 0; h < 2; h++)
    for (int op = 0; op < COLL_NOPS; op++) MPI_Op_create(fns[h][op], 1, &t->half_ops[h][op]);
  mpi_fabric(t->base.fabric, sizeof t->base.fabric, coll_boot_host_count(b));
  const char *sl = getenv("FABENCH_MPI_SLEEP_US");
  t->idle_sleep_ns = cm->oversubscribed ? (long)((sl && *sl ? atof(sl) : MPI_IDLE_SLEEP_US) * 1000) : 0;
  *out = &t->base;
  return 0;
}
