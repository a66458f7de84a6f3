/* bench: what the train command's files share (cmd_train.c: the run's flow; train_args.c: its
 * flags; train_pairs.c: the pairs it trains; train_rows.c: its rows and run.json's results;
 * train_trace.c: --trace). */
#ifndef FABENCH_TRAIN_INTERNAL_H
#define FABENCH_TRAIN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "coll.h"
#include "nn.h"
#include "res.h"

/* ---- flags (train_args.c) ---- */
/* The usage text, made from the flag table (train_args.c). */
const char *train_usage(void);

/* A sweep (train_sweep.c): the flags that take a list, in the order of the product (the first
 * changes slowest); a flag not given is a list of its one value. */
enum { SW_BATCH, SW_LR, SW_OPTIM, SW_EPOCHS, SW_THREADS, SW_WORKERS, SW_DIMS };
#define TRAIN_SWEEP_MAX_ITEMS 16
#define TRAIN_SWEEP_MAX 256 /* settings of one run */
typedef struct {
  int n[SW_DIMS];                            /* 0: not given */
  double v[SW_DIMS][TRAIN_SWEEP_MAX_ITEMS];
} train_sweep;

typedef struct {
  bench_rank_opts r; /* -n, --emulate, --mpirun-args, --bind, --timeout, --out */
  const char *model, *data, *save, *resume, *milestones;
  const char *transports, *algos, *trace, *model_from;
  uint64_t link_bps;          /* --link: the rate the rows are priced at (0: their own fabric) */
  int devices[2], ndevices, precision, cudnn_search;
  long gpu;                   /* -1: the local rank */
  long trace_steps;
  int no_single, overlap, overlap_step;
  int dp_sharded; /* --dp: 0 replicated, 2 sharded (ZeRO stage 2), 3 sharded3 (stage 3) */
  int save_sharded; /* --save-format sharded */
  coll_dtype grad_dtype;
  double bucket_mb, first_bucket_mb;
  long check_every;
  uint64_t chunk;
  nn_lr_kind sched;
  long batch, epochs, steps, warmup_steps, threads, ref_batch, eval_every, log_every, prefetch;
  long rounds;
  long crop_pad; /* -1: the data's default */
  double lr, momentum, wd, warmup_epochs, target_acc, gamma;
  int nesterov, augment, stop_at_target, epochs_given, seed_given;
  uint64_t seed;
  int mode;                   /* TRAIN_MODE_*: --mode */
  long parts, recovery_epochs; /* --mode partitioned: --parts, --recovery-epochs */
  int no_compare;             /* --mode partitioned: no conventional and data-parallel rows */
  int parts_given;
  int optimizer;              /* enum nn_optim_kind */
  double beta1, beta2, eps;   /* Adam's */
  long loader_workers;        /* 0: the training thread makes each batch */
  int cold_cache;             /* drop the dataset files from the page cache before reading */
  const char *continue_dir;   /* --resume DIR: rows go on in this run directory */
  train_sweep sw;
  int setting;                /* the sweep's setting being trained, from 0 */
} train_args;

/* --mode: data-parallel (the default: every pair, and one rank alone), conventional (one rank),
 * partitioned (train_partitioned.c) */
enum { TRAIN_MODE_DP = 0, TRAIN_MODE_CONVENTIONAL = 1, TRAIN_MODE_PARTITIONED = 2 };
extern const char *const train_mode_names[];
/* The --dp value a run was given: replicated, sharded or sharded3 (the rows' dp column). */
const char *train_dp_name(const train_args *a);

/* --overlap-step's words, indexed by NN_OSTEP_* */
extern const char *const train_ostep_names[];

/* Parses the flags into a (defaults first). 0, or the exit status after a usage error. */
int train_parse_args(train_args *a, int argc, char **argv);
/* 0 when every device of the list can train here, else NN_ENODEV and why: a rank's GPU is --gpu,
 * or its local rank modulo the GPU count */
int train_devices_usable(const train_args *a, int local_rank, char *err, size_t errcap);
/* Milestones in epochs ("30,60,80" or fractions "0.5,0.75" of --epochs) to steps. */
int train_parse_milestones(nn_lr_sched *s, const char *list, long epochs, int64_t spe);
/* --trace and --save before anything trains (rank 0, which writes them): their directory must
 * exist and take files, and an existing FILE must be a writable file. 0, or -1 after saying why. */
int train_out_file_check(const char *flag, const char *path);
/* A sharded checkpoint (have, from its manifest) against this run (want: its job's description,
 * its rank count): the same --dp stage, rank count, model, data and batch. 0, or -1 with err
 * naming --resume's file and why. */
int train_shards_resumable(const train_args *a, const nn_ckpt_info *have, const nn_ckpt_info *want, char *err,
                           size_t errcap);

/* ---- sweeps (train_sweep.c) ---- */
/* A list flag's value into dimension dim (every item checked; an empty one refused). 0, or the
 * exit status of a usage error. */
int train_sweep_list(train_args *a, int dim, const char *flag, const char *list);
/* The number of settings (the product of the lists' lengths). */
int train_sweep_count(const train_args *a);
/* Before set-up: the largest batch, epochs and threads of the lists (the checks and the net's
 * first build take them), the other flags at the first setting's values. */
void train_sweep_prepare(train_args *a);
/* Setting k's values into a's flags (a->setting = k): the last list changes fastest. */
void train_sweep_apply(train_args *a, int k);
/* The rows of the run directory a sweep continues in (rank 0), and whether entry (role, pair,
 * device) of the current setting is among them, done: the row, or NULL. */
int train_sweep_load_done(res_rows *rows, const char *dir, char *err, size_t cap);
const res_train_row *train_sweep_done(const res_rows *rows, const train_args *a, const char *role,
                                      const char *transport, const char *algo, const char *device,
                                      int ranks, double lr);
/* A continued run's run_id back into r and its run.json. 0, or -1 after saying why. */
int train_sweep_keep_id(bench_run *r, const char *id);
/* The dataset's files (fmnist and cifar10 directories): their bytes, after dropping them from
 * the page cache with drop (posix_fadvise DONTNEED); 0, or -1 with err (NaN bytes: no files). */
int train_data_files(const nn_data_spec *sp, int drop, double *bytes, char *err, size_t cap);

/* ---- what one run trains: the roles in turn, each from the same initial weights ---- */
typedef enum { ROLE_SINGLE, ROLE_NONE, ROLE_DP } train_role;
extern const char *const train_role_names[]; /* indexed by train_role */

typedef struct {
  train_role role;
  coll_comm *comm;        /* ROLE_DP */
  coll_transport_kind tk;
  coll_algo algo;
  char tname[16], aname[32];
} train_pair;

#define TRAIN_MAX_PAIRS 64

typedef struct {
  const train_args *a;
  bench_session s;        /* the bootstrap, rank 0's run directory (s.run), the telemetry (s.tel):
                             a mark around each pair's last round */
  coll_boot *boot;        /* the session's, for short */
  int rank, size;
  res_table *tsteps, *teval, *trun, *tbuckets, *tepochs;
  res_rows done;          /* rank 0, --resume DIR: the rows there (entries not trained again) */
  double files_bytes, files_s; /* the dataset's files and the time reading them took (NaN: none) */
  int cold;               /* they were dropped from the page cache first (--cold-cache) */
  nn_net *net;
  nn_dataset train, test;
  char dname[2200], shape[64];
  int crop_pad, augment;
  size_t np;
  const train_pair *pair; /* being trained */
  int ranks;              /* of the pair being trained */
  int64_t spe;            /* of the pair being trained */
  double single_ips, none_ips; /* 0 until measured */
  int heartbeat;          /* the one-rank run: rank 0 tells the waiting ranks it goes on */
  cJSON *trace;           /* rank 0: the trace events so far (--trace) */
  int same_data;          /* tests (FABENCH_TEST_SAME_DATA=1): every rank reads one rank's data */
  res_costmodel model;        /* --model-from (n == 0 without) */
  /* the predictions' compute profile: the none run's rows (the same ranks sharing the cores as
   * training does), else one rank alone's */
  res_train_row profile;
  res_train_buckets_row prof_buckets[NN_TRAIN_MAX_BUCKETS];
  res_train_buckets_row bk_rows[2 * NN_TRAIN_MAX_BUCKETS]; /* a data-parallel pair's, after the profile's */
  int have_profile, nprof_buckets;
  int role_index;         /* of the pair being trained: its trace's process ids */
  int round;              /* of --rounds, from 1 */
  int slow_said;          /* the warning about oneDNN's reference code is out */
  double alive_said;      /* when the heartbeat last went (rank 0) */
  bench_tel_result bound; /* what bound the pair whose row is written next */
} train_ctx;

/* ---- the pairs (train_pairs.c) ---- */
/* "none", "tcp", ... into pairs with every algorithm; pairs a transport cannot run are said
 * and skipped. Returns the count, or -1 after a usage error (rc set). */
int train_make_pairs(train_pair *pairs, const train_args *a, int size, coll_transport_kind *tks, int *ntk,
                     int *want_mpi, int *rc);

/* ---- rows (train_rows.c) ---- */
/* --rounds: what one entry of the training order has measured so far, for its row */
typedef struct {
  nn_train_result best; /* its fastest round */
  double slowest_ips;
  int rounds;           /* done */
  nn_lr_sched sched;
  nn_sgd_opts so;
  int64_t epochs;
} train_kept;
/* The training loop's callbacks: a step's rows and log line, an evaluation's row. */
int train_on_step(void *ctx, const nn_step_rec *rs, int n);
int train_on_eval(void *ctx, const nn_eval_rec *ev);
/* Takes one round's result into k (r of a rank that trained nothing has images_per_s NaN). */
void train_kept_add(train_kept *k, const nn_train_result *r, const nn_lr_sched *sched, const nn_sgd_opts *so,
                    int64_t epochs);
/* The row of pair p from what its rounds measured (rank 0), with its buckets and run.json's
 * entry; the one-rank and none rows set the denominators of the rows after them. */
int train_kept_write(train_ctx *x, const train_pair *p, const train_kept *k);

/* ---- the trace (train_trace.c) ---- */
/* The loop's trace callback: gathers Chrome trace events (rank 0). */
int train_on_trace(void *ctx, const nn_trace_ev *ev, size_t n);
/* The trace so far into --trace (rank 0, after each pair's row). 0, or -1 after saying why. */
int train_write_trace(train_ctx *x);

/* ---- partitioned training (train_partitioned.c) ---- */
/* --mode partitioned, once the flags are read: what they ask together. 0, or the exit status of
 * a usage error. */
int train_partitioned_check(const train_args *a);
/* A rank's whole partitioned run: the parts, and the conventional and data-parallel rows of the
 * same network; the run's exit status. */
int train_partitioned_main(train_args *a, int argc, char **argv);

/* ---- the run (cmd_train.c) ---- */
/* The one-rank run's heartbeat over the bootstrap (collective): rank 0 says 0 (going on),
 * 1 (done) or 2 (failed); heard (may be NULL) gets rank 0's word. 0, or -1 after saying why. */
int train_heartbeat(train_ctx *x, int32_t say, int32_t *heard);

#endif
