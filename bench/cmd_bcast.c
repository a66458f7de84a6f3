/* fabench bcast: the broadcast (MPI_Bcast) from --root on the collective harness
 * (collbench.c). */
#include <string.h>

#include "bench.h"
#include "collbench.h"

/* nccl-tests' factor: 1 (every rank receives the whole buffer once). */
static double bc_busbw(int n) { return (void)n, 1.0; }

static int bc_shape(bench_coll_shape *s, double imbalance) {
  (void)imbalance;
  s->send_elems = s->recv_elems = s->count;
  return 0;
}

static int bc_call(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
                   coll_algo *ran, coll_err *e) {
  (void)recv; /* in place */
  return coll_broadcast(c, send, s->count, s->dt, s->root, a, ran, e);
}

/* The root's pattern; every other rank's buffer scribbled over, so only a delivered copy passes. */
static void bc_fill(const bench_coll_shape *s, void *send, void *recv) {
  (void)recv;
  if (s->rank == s->root) coll_pattern_fill(send, s->count, s->dt, COLL_SUM, s->root, s->seed);
  else memset(send, 0xa5, s->count * coll_dtype_size(s->dt));
}

static size_t bc_check(const bench_coll_shape *s, const void *recv, size_t *first) {
  return coll_pattern_check_rank(recv, s->count, s->dt, COLL_SUM, s->root, s->seed, 0, first);
}

static int bc_algo(const char *s, coll_algo *a) { return coll_colls_algo_parse(COLL_BCAST, s, a); }

const bench_coll bench_coll_bcast = {
    .name = "bcast",
    .what = "broadcast",
    .kind = COLL_BCAST,
    .algos = "tree,chain,vdg,native",
    .algo_help = "tree (binomial),chain (pipelined in --chunk pieces),vdg (scatter, then the ring "
                 "all-gather: van de Geijn),linear (the root sends every rank the whole message, 8 sends "
                 "in flight at most),hier (among one leader per host, then inside each host),direct "
                 "(the root's mapped copy read in place: ucx, one host; else tree),native,auto",
    .in_place = 1,
    .rooted = 1,
    .busbw = bc_busbw,
    .shape = bc_shape,
    .call = bc_call,
    .fill = bc_fill,
    .check = bc_check,
    .algo_parse = bc_algo,
};

int bench_cmd_bcast(int argc, char **argv) { return bench_coll_main(&bench_coll_bcast, argc, argv); }
