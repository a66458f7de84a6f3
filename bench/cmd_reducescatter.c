/* fabench reducescatter: the reduce-scatter (MPI_Reduce_scatter_block) on the collective
 * harness (collbench.c). A size is the whole vector; each rank ends with its block reduced. */
#include <string.h>

#include "bench.h"
#include "collbench.h"

/* nccl-tests' factor: each rank receives (n-1)/n of the vector. */
static double rs_busbw(int n) { return (double)(n - 1) / n; }

static int rs_shape(bench_coll_shape *s, double imbalance) {
  (void)imbalance;
  s->send_elems = s->count;
  s->recv_elems = s->block;
  return 0;
}

static int rs_call(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
                   coll_algo *ran, coll_err *e) {
  return coll_reduce_scatter(c, send, recv, s->block, s->dt, s->op, a, ran, e);
}

static void rs_fill(const bench_coll_shape *s, void *send, void *recv) {
  coll_pattern_fill(send, s->count, s->dt, s->op, s->rank, s->seed);
  memset(recv, 0xa5, s->block * coll_dtype_size(s->dt));
}

/* Block `rank` of the reduction over every rank's vector. */
static size_t rs_check(const bench_coll_shape *s, const void *recv, size_t *first) {
  return coll_pattern_check_at(recv, s->block, s->dt, s->op, s->size, s->seed, (size_t)s->rank * s->block, first);
}

static int rs_algo(const char *s, coll_algo *a) { return coll_colls_algo_parse(COLL_REDUCE_SCATTER, s, a); }

const bench_coll bench_coll_reducescatter = {
    .name = "reducescatter",
    .what = "reduce-scatter",
    .kind = COLL_REDUCE_SCATTER,
    .algos = "ring,rhd,native",
    .algo_help = "ring,rhd (recursive halving; a power of two of ranks, else ring),hier (inside hosts, "
                 "then across them; hosts of equal rank counts, else ring),direct (the peers' mapped copies read in "
                 "place: ucx, one host; else ring),native,auto",
    .reduces = 1,
    .blocks = 1,
    .busbw = rs_busbw,
    .shape = rs_shape,
    .call = rs_call,
    .fill = rs_fill,
    .check = rs_check,
    .algo_parse = rs_algo,
};

int bench_cmd_reducescatter(int argc, char **argv) { return bench_coll_main(&bench_coll_reducescatter, argc, argv); }
