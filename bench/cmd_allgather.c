/* fabench allgather: the all-gather (MPI_Allgather) on the collective harness (collbench.c). A
 * size is the whole gathered vector; each rank contributes one block. */
#include <string.h>

#include "bench.h"
#include "collbench.h"

/* nccl-tests' factor: each rank receives (n-1)/n of the vector. */
static double ag_busbw(int n) { return (double)(n - 1) / n; }

static int ag_shape(bench_coll_shape *s, double imbalance) {
  (void)imbalance;
  s->send_elems = s->block;
  s->recv_elems = s->count;
  return 0;
}

static int ag_call(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
                   coll_algo *ran, coll_err *e) {
  return coll_allgather(c, send, recv, s->block, s->dt, a, ran, e);
}

/* Rank r's block is its pattern's first block (the op only picks the pattern's values). */
static void ag_fill(const bench_coll_shape *s, void *send, void *recv) {
  coll_pattern_fill(send, s->block, s->dt, COLL_SUM, s->rank, s->seed);
  memset(recv, 0xa5, s->count * coll_dtype_size(s->dt));
}

static size_t ag_check(const bench_coll_shape *s, const void *recv, size_t *first) {
  size_t bad = 0, es = coll_dtype_size(s->dt);
  for (int p = 0; p < s->size; p++) {
    size_t f = 0, b = coll_pattern_check_rank((const char *)recv + (size_t)p * s->block * es, s->block, s->dt,
                                              COLL_SUM, p, s->seed, 0, &f);
    if (b && !bad) *first = (size_t)p * s->block + f;
    bad += b;
  }
  return bad;
}

static int ag_algo(const char *s, coll_algo *a) { return coll_colls_algo_parse(COLL_ALLGATHER, s, a); }

const bench_coll bench_coll_allgather = {
    .name = "allgather",
    .what = "all-gather",
    .kind = COLL_ALLGATHER,
    .algos = "ring,rd,bruck,native",
    .algo_help = "ring,rd (recursive doubling; a power of two of ranks, else ring),bruck,hier (inside "
                 "hosts, then across them; hosts of equal rank counts, else ring),direct (the peers' mapped copies read "
                 "in place: ucx, one host; else ring),native,auto",
    .blocks = 1,
    .busbw = ag_busbw,
    .shape = ag_shape,
    .call = ag_call,
    .fill = ag_fill,
    .check = ag_check,
    .algo_parse = ag_algo,
};

int bench_cmd_allgather(int argc, char **argv) { return bench_coll_main(&bench_coll_allgather, argc, argv); }
