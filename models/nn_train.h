/* models, training side: the training loop, one process or data-parallel over a collectives
 * communicator. Included at the end of nn.h.
 *
 * The loop owns data, steps, the gradient reducer, the optimizer, evaluation, the parameter
 * check and checkpoints; the caller (bench) owns flags and records, and sees each step and each
 * evaluation through hooks. Every rank calls nn_train_run with the same options but rank. */
#ifndef FABENCH_NN_TRAIN_H
#define FABENCH_NN_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "coll.h"

/* The gradient arena from a communicator's coll_mem_alloc (so ranks on one host over ucx reduce
 * in each other's copy); c NULL: malloc. */
nn_arena_alloc nn_arena_from_comm(coll_comm *c);

/* overlap_step: off; on (after the warm-up); auto: on after the warm-up only where rank 0's
 * profile says the link cannot reduce the gradients within backward (the front is less than the
 * arena in every warm-up step after the first): where it can, overlapping the forward hides
 * nothing and its per-layer waits and updates cost a little (docs/measurements.md, "The
 * training loop's figures"). */
enum { NN_OSTEP_OFF = 0, NN_OSTEP_ON = 1, NN_OSTEP_AUTO = 2 };

/* One step of one rank. Times in seconds. */
typedef struct {
  int32_t rank, images, warmup;
  int64_t step;               /* global steps done after this one */
  int64_t epoch, step_in_epoch;
  double loss, batch_acc, lr;
  double step_s;              /* data + fwd + bwd + exposed + opt: wall time from the end of
                                 the last step to the end of this one (less evaluations, checks
                                 and checkpoints between them) */
  double data_s, load_s, fwd_s, bwd_s; /* data: the batch, and the last step's record exchange
                                 with the other ranks (they meet there); load: the loader's
                                 decoding and augmentation of the batch */
  double wait_s;              /* the wait for the batch alone (with no loader thread: its making) */
  double comm_s;              /* the buckets' all-reduce times, added up (overlaps bwd); with
                                 overlap_step those this step waited for: the previous step's,
                                 or its own where it drained */
  double comm_cpu_s;          /* the communication thread's CPU time on them: on cores that
                                 backward shares, what the exchange takes out of compute */
  double exposed_s;           /* the training thread's waits for the all-reduce: from the end of
                                 backward until the last bucket was reduced; with overlap_step,
                                 the forward's waits for its layers' buckets plus any drain */
  double opt_s, elapsed_s;    /* opt: SGD (with overlap_step: the bucket updates in the forward,
                                 and the whole update where it drained; a deferred parameter
                                 check) */
} nn_step_rec;

typedef struct {
  int64_t epoch, step, images;
  double loss, acc, secs, elapsed_s;
} nn_eval_rec;

/* One span of a traced step (Chrome trace events): tid 0 is the training thread (data, fwd, each
   layer's backward, the wait for the last bucket, sgd), tid 1 the communication thread (each
   bucket's all-reduce). Seconds from the start of the run on that rank. */
typedef struct {
  char name[24];
  int32_t rank, tid;
  int64_t step;
  double ts_s, dur_s;
} nn_trace_ev;

#define NN_TRAIN_MAX_BUCKETS 256
typedef struct {
  size_t offset, count;       /* floats of the arena */
  double ready_s;             /* medians over measured steps, rank 0: backward completed it, */
  double comm_s;              /* its all-reduce took, */
  double done_s;              /* it was reduced (both from the start of backward) */
} nn_bucket_rec;

typedef struct {
  const char *status;         /* "done", "target reached", "target not reached", "failed" */
  int64_t steps, measured, start_step, end_step;
  double images_per_s;        /* all ranks: global images over the measured steps' wall time (the
                                 longest of the ranks' summed steps), as the DDP peer counts */
  double compute_images_per_s;/* global images over the slowest rank's fwd + bwd + opt, summed */
  double step_p50_s, step_mean_s, step_p90_s; /* a step's period: the mean over ranks of the time
                                 between their consecutive step ends (mean: wall time / steps) */
  /* means over steps and ranks; all but load and comm (inside the others) add up to the mean
     step */
  double data_s, load_s, fwd_s, bwd_s, comm_s, exposed_s, opt_s;
  double comm_cpu_s;          /* mean over steps and ranks of nn_step_rec's */
  double wait_s;              /* the same: each step's wait for its batch */
  int overlap_step;           /* the next forward overlapped the all-reduce (auto: as decided) */
  double imbalance_s;         /* median of (slowest rank's step - fastest's) */
  double final_loss, test_loss, test_acc, time_to_target_s, train_s;
  size_t grad_bytes;          /* bytes each rank all-reduced per step (sharded: reduce-scattered,
                                 and as many parameter bytes all-gathered) */
  size_t opt_floats;          /* floats of optimizer state this rank keeps up to date (sharded: its
                                 blocks; else every parameter's) */
  double sent_bytes;          /* bytes this rank sends per step by the algorithms' bus factors
                                 (nn_reducer_step_bytes); 0 with no exchange */
  size_t params_held;         /* floats of parameters this rank holds between steps (stage 3: its
                                 blocks; else all) */
  size_t params_peak;         /* the most it held at once during a step (stage 3: its blocks and the
                                 buckets gathered then; evaluations, checks and checkpoints, which
                                 gather all between steps, not counted) */
  int nbuckets;
  nn_bucket_rec buckets[NN_TRAIN_MAX_BUCKETS];
} nn_train_result;

typedef struct {
  nn_net *net;
  const nn_dataset *train, *test;
  /* data: batch per rank, augmentation, prefetch; rank and world are filled by the loop */
  nn_loader_opts loader;
  int same_data;              /* tests: every rank reads what one rank alone would */
  nn_lr_sched sched;
  nn_sgd_opts sgd;            /* lr is set from sched every step */
  int64_t steps_per_epoch, start_step, stop_step; /* global steps */
  int64_t epochs;
  int64_t warmup_steps;       /* first steps of this run left out of the figures */
  int64_t eval_every;         /* epochs; 0 never */
  double target_acc;          /* 0: none */
  int stop_at_target;
  int64_t check_every;        /* compare parameter hashes every K steps too (0: epochs, end) */
  const char *save;           /* checkpoint (rank 0 writes) at every epoch end and the end */
  int save_sharded;           /* sharded runs: save is the manifest of a sharded set, every rank
                                 writing its own file of its ranges, nothing gathered
                                 (nn_ckpt_shard_save); else the gathered form */
  const char *resume_shards;  /* sharded runs: each rank starts from its file of the sharded set
                                 whose manifest this is, read once the reducer has planned its
                                 ranges (the set's must be the same); a rank that refuses its file
                                 stops every rank before the first step */
  nn_ckpt_info ckpt;          /* its fixed fields */
  double elapsed0;            /* training time of the run this one resumes */

  /* data parallelism: boot NULL is one process alone */
  coll_boot *boot;            /* control traffic: step records, hashes, evaluation sums */
  int rank, world;
  coll_comm *comm;            /* gradients; NULL: no exchange (the no-communication baseline) */
  coll_algo algo;             /* of the gradient all-reduce */
  coll_dtype wire;            /* the gradients travel as f32, bf16 or f16 */
  size_t bucket_bytes, first_bucket_bytes;
  int overlap;
  int overlap_step;           /* NN_OSTEP_*: the next step's forward starts while this step's
                                 gradients are still being all-reduced: each layer's forward waits
                                 only for its own parameters' buckets, each bucket updated (SGD)
                                 once reduced; CPU nets (a GPU net drains before its forward) */
  const nn_arena_alloc *wire_alloc;
  int sharded;                /* 0, 2 or 3. ZeRO stage 2 (--dp sharded): gradients reduce-scattered
                                 per bucket, each rank updates its own block of the parameters and
                                 keeps its block of the optimizer state; the next step's forward
                                 waits, layer by layer, for the parameters' all-gather, bucket by
                                 bucket, which the reducer's thread starts with the step; 3 (--dp
                                 sharded3): between steps a rank holds only its blocks of the
                                 parameters too, and gathers again before the backward the buckets
                                 the forward released; f32 wire, no overlap_step, CPU nets
                                 (nn_reducer.h) */
  int corrupt_rank;           /* tests: this rank's weights are perturbed after step */
  int64_t corrupt_step;       /* corrupt_step (0: never) */

  /* hooks (rank 0; may be NULL): each step with every rank's record, each evaluation.
     A non-zero return stops the run as failed (the hook has reported why). */
  void *ctx;
  int (*on_step)(void *ctx, const nn_step_rec *ranks, int n);
  int (*on_eval)(void *ctx, const nn_eval_rec *e);
  /* rank 0 during an evaluation, after each batch, and with boot NULL (one process training
     alone) during each step too, between layers: ranks that wait for it alone can be told it is
     alive (a long step or test set outlasted their timeout). Called often: the hook rate-limits.
     Never inside a step with a boot, where every rank is in the step. */
  int (*on_alive)(void *ctx);
  /* the trace: the first trace_steps measured steps of every rank, handed to rank 0 at the end
     (0: no trace; collective) */
  int64_t trace_steps;
  int (*on_trace)(void *ctx, const nn_trace_ev *ev, size_t n);
} nn_train_opts;

/* Trains from the net's current weights. 0 (the result filled on every rank), or -1 with the
 * cause in err (a peer's failure names its rank and host). */
int nn_train_run(nn_train_result *res, const nn_train_opts *o, char *err, size_t errcap);

/* A 64-bit hash of the parameter arena's bytes (the ranks' check that they agree). */
uint64_t nn_params_hash(const float *p, size_t count);

#endif
