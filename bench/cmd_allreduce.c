/* fabench allreduce: the all-reduce on the collective harness (collbench.c). */
#include "bench.h"
#include "collbench.h"

/* nccl-tests' factor: every rank sends and receives 2(n-1)/n of the vector. */
static double ar_busbw(int n) { return 2.0 * (n - 1) / n; }

static int ar_shape(bench_coll_shape *s, double imbalance) {
  (void)imbalance;
  s->send_elems = s->recv_elems = s->count;
  return 0;
}

static int ar_call(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
                   coll_algo *ran, coll_err *e) {
  (void)recv; /* in place */
  return coll_allreduce(c, send, s->count, s->dt, s->op, a, ran, e);
}

static void ar_fill(const bench_coll_shape *s, void *send, void *recv) {
  (void)recv;
  coll_pattern_fill(send, s->count, s->dt, s->op, s->rank, s->seed);
}

static size_t ar_check(const bench_coll_shape *s, const void *recv, size_t *first) {
  return coll_pattern_check(recv, s->count, s->dt, s->op, s->size, s->seed, first);
}

const bench_coll bench_coll_allreduce = {
    .name = "allreduce",
    .what = "all-reduce",
    .kind = -1,
    .algos = "ring,native",
    .algo_help = "ring,rhd,rd,tree,dtree,ps,ps:K,native,auto,hier,hier:ALG (hier: within hosts, "
                 "ALG across them)",
    .reduces = 1,
    .in_place = 1,
    .busbw = ar_busbw,
    .shape = ar_shape,
    .call = ar_call,
    .fill = ar_fill,
    .check = ar_check,
};

int bench_cmd_allreduce(int argc, char **argv) { return bench_coll_main(&bench_coll_allreduce, argc, argv); }
