/* The one harness of the collective commands (allreduce, reducescatter, allgather, bcast,
 * alltoall): flags, sweep, timing in rounds, verification, rows and report live here once; a
 * collective is a descriptor (bench_coll) in its command file. Internal to bench/. */
#ifndef FABENCH_COLLBENCH_H
#define FABENCH_COLLBENCH_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* One size of one collective on one rank: what its hooks fill, run and check. */
typedef struct {
  size_t count;        /* elements of the size swept (nccl-tests' count: the whole vector) */
  size_t block;        /* count / ranks for the collectives of blocks, else count */
  coll_dtype dt;
  coll_op op;
  int rank, size, root;
  uint64_t seed;
  size_t send_elems, recv_elems; /* this rank's buffers (the same buffer where in place) */
  /* all-to-all(v): the n x n counts (row: sender), this rank's counts and displacements */
  size_t *matrix, *sc, *sd, *rc, *rd;
  int uneven; /* the counts differ (--imbalance): the all-to-allv call */
} bench_coll_shape;

typedef struct bench_coll {
  const char *name;      /* the command, and colls.csv's coll column */
  const char *what;      /* in messages: "all-reduce", "reduce-scatter", ... */
  int kind;              /* coll_kind, or -1: all-reduce (allreduce.csv, its cost model) */
  const char *algos;     /* --algo's default */
  const char *algo_help; /* what --algo takes, for --help */
  int reduces;           /* takes --op */
  int in_place;          /* send and receive are one buffer */
  int rooted;            /* takes --root */
  int varies;            /* takes --imbalance (all-to-allv) */
  int blocks;            /* a size is ranks blocks: rounded to a multiple of ranks x element */
  double (*busbw)(int n); /* busbw = algbw x busbw(n) (nccl-tests' factors) */
  /* the shape's buffer sizes (and all-to-all's counts) for s->count; 0, or -1: out of memory */
  int (*shape)(bench_coll_shape *s, double imbalance);
  int (*call)(coll_comm *c, const bench_coll_shape *s, void *send, void *recv, coll_algo a,
              coll_algo *ran, coll_err *e);
  /* fresh inputs before a checked call (recv may be scribbled over: a result never written
   * must not pass) */
  void (*fill)(const bench_coll_shape *s, void *send, void *recv);
  /* wrong elements of recv after the call; *first the first */
  size_t (*check)(const bench_coll_shape *s, const void *recv, size_t *first);
  /* its algorithm by name (NULL: coll_algo_parse, all-reduce's) */
  int (*algo_parse)(const char *s, coll_algo *out);
  /* why algorithm a cannot run with these flags, or NULL (NULL hook: it always can) */
  const char *(*unsupported)(coll_algo a, double imbalance);
} bench_coll;

/* The command: parse, start the ranks (-n) or run this one. Its exit status. */
int bench_coll_main(const bench_coll *d, int argc, char **argv);

/* The collectives' descriptors (their command files). */
extern const bench_coll bench_coll_allreduce, bench_coll_reducescatter, bench_coll_allgather,
    bench_coll_bcast, bench_coll_alltoall;

#endif
