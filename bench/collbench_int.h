/* The collective harness's own parts, shared by its files (collbench*.c) only. */
#ifndef FABENCH_COLLBENCH_INT_H
#define FABENCH_COLLBENCH_INT_H

#include <stdatomic.h>

#include "bench.h"
#include "collbench.h"

#define CB_MAX_LIST 16

/* --pairs and --nodes: an all-reduce inside groups of ranks (collbench_groups.c). */
typedef enum { CB_G_NONE, CB_G_PAIR, CB_G_ALL, CB_G_ROUNDS, CB_G_NODES, CB_G_NODE_REF } cb_groups_mode;

/* What the flags asked. */
typedef struct {
  const bench_coll *d;
  char *usage;       /* composed from the flag table (freed by cb_opts_free) */
  bench_rank_opts r; /* -n, --emulate, --timeout, --out, --tcp-*, ... */
  coll_transport_kind transports[CB_MAX_LIST];
  int ntransports, want_mpi;
  coll_algo algos[CB_MAX_LIST];
  int nalgos;
  coll_dtype dtypes[CB_MAX_LIST];
  int ndtypes;
  coll_op ops[CB_MAX_LIST];
  int nops;
  uint64_t min_bytes, max_bytes, chunk;
  double step, time_per_size, imbalance;
  long warmup, iters, seed, rounds, root;
  int pipelined, check, no_peer_map, no_spin, beside;
  const char *model_from, *devices;
  int has_peer;   /* rows carry busbw relative to this pair, when measured */
  int peer_given; /* --peer named it: it must run, not just be asked for */
  coll_transport_kind peer_tk;
  coll_algo peer_algo;
  cb_groups_mode groups; /* CB_G_NONE: the whole world */
  long pair_src, pair_dst; /* --pairs S,D */
} cb_opts;

/* Parses argv into o: 0, 1 after --help (printed), or 2 after a usage error (said). */
int cb_parse(cb_opts *o, const bench_coll *d, int argc, char **argv);
void cb_opts_free(cb_opts *o);
int cb_algo_eq(coll_algo a, coll_algo b);

/* --beside-compute's load: a computing thread (collbench_load.c). start: NULL where no thread
 * could start; done: the products it has made; stop joins and frees it (NULL: nothing). */
typedef struct cb_load cb_load;
cb_load *cb_load_start(void);
uint64_t cb_load_done(const cb_load *l);
void cb_load_stop(cb_load *l);

/* The groups' run (--pairs, --nodes), after the run directory: every transport's communicator
 * (comms[t], o->transports' order), a host buffer of max_bytes + 8, and rank 0's table
 * (allreduce_groups.csv) with the run's id and topology hash. 0, or 1 after saying why; *wrong:
 * a group's result was wrong. */
typedef struct {
  const cb_opts *o;
  coll_comm *const *comms;
  void *buf;
  struct res_table *tab;
  const char *run_id, *topo_hash;
  double (*busbw)(int n); /* the all-reduce's bus factor (its descriptor's) */
} cb_groups_in;
int cb_groups_run(const cb_groups_in *g, int *wrong);

/* What carries a GPU communicator's data (rank 0's topology), e.g. "nccl:nvlink/NV18". */
void cb_gpu_fabric(coll_comm *c, char *fabric, size_t fcap);

#endif
