/* models: the data-parallel gradient reducer (private to models/ and its tests), PyTorch DDP's
 * on a contiguous arena in backward order. The arena is cut into buckets (a cut may fall inside
 * a tensor: every rank cuts alike) and a communication thread all-reduces each bucket as soon as
 * backward reports it complete (nn_reducer_ready). A 16-bit wire scales by 1/N and rounds into a
 * wire buffer (DDP's compression hooks); f32 sums in place, the 1/N there or in the optimizer.
 *
 * The call order depends only on the sizes and `front`, never on timing, or the ranks would
 * deadlock: arena order with a small first and last bucket, or with --overlap-step the front in
 * arena order and the rest in forward order (docs/training.md, "The reducer" and "Overlapping the
 * next step"). With no communicator it only records when each bucket became ready. */
#ifndef FABENCH_NN_REDUCER_H
#define FABENCH_NN_REDUCER_H

#include <stddef.h>

#include "coll.h"
#include "nn.h"

typedef struct {
  coll_comm *comm;            /* NULL: no exchange */
  coll_algo algo;
  coll_dtype wire;            /* COLL_F32, COLL_BF16 or COLL_F16 */
  size_t bucket_bytes;        /* of f32 gradients; 0: 25 MiB */
  size_t first_bucket_bytes;  /* 0: 1 MiB */
  int overlap;                /* 0: nothing starts before backward has ended */
  int scale_in_sgd;           /* f32: leave the sum; the optimizer applies nn_reducer_grad_scale */
  const nn_arena_alloc *wire_alloc; /* memory of the 16-bit wire buffer (collective, like the
                                       arena's); NULL: malloc */
  int sharded;                /* 0; 2: ZeRO stage 2 (train --dp sharded): each bucket is
                                 reduce-scattered, so a rank holds the sum of its own block of it
                                 only (the bucket's count / N floats at offset + rank x that, plus
                                 the tail that does not divide, all-reduced); needs an f32 wire and
                                 scale_in_sgd; 3: stage 3 (with params) */
  float *params;              /* sharded: the parameter arena, each bucket all-gathered by the thread
                                 at the start of each step, in forward order, for the forward to wait
                                 for (nn_reducer_wait_params), so the gather of the last update
                                 overlaps the forward; the plan stays in arena order (no
                                 nn_reducer_set_front). Stage 3 (FSDP's FULL_SHARD): between steps a
                                 rank holds only its ranges (nn_reducer_shards); the thread gathers
                                 again for the backward what the forward released
                                 (nn_reducer_release) and drops each bucket's other blocks once it is
                                 reduce-scattered. NULL: the caller gathers (nn_reducer_gather) */
} nn_reducer_opts;

typedef struct {
  size_t offset, count;       /* floats of the arena */
  double ready_s;             /* seconds after the step's t0 (nn_reducer_begin): backward
                                 completed it */
  double start_s, done_s;     /* its all-reduce started and ended (0 without a communicator) */
  double ag_start_s[2], ag_done_s[2]; /* sharded: its parameters' all-gather for the forward [0]
                                         and, stage 3, again for the backward [1] (0: none) */
} nn_bucket;

typedef struct {
  double comm_s;              /* the buckets' all-reduce times, added up (sharded: the
                                 reduce-scatters' and the parameters' gathers') */
  double comm_cpu_s;          /* the communication thread's CPU time on them (user + system) */
  double exposed_s;           /* the time this call waited (finish: from the end of backward until
                                 the last bucket was reduced) */
  double bwd_end_s;           /* the end of backward, seconds after the step's t0 */
  size_t wire_bytes;          /* bytes all-reduced this step (sharded: reduce-scattered) */
} nn_reducer_stats;

typedef struct nn_reducer nn_reducer;

/* grads: the arena of count floats (it must stay put; on a communicator the same place on every
 * rank). Collective when o->comm is set. 0, or -1 with the cause in err. */
int nn_reducer_create(nn_reducer **out, const nn_reducer_opts *o, float *grads, size_t count,
                      char *err, size_t errcap);
void nn_reducer_destroy(nn_reducer *r);

/* The plan for the steps to come (see above); only between steps, with nothing in flight (after
 * nn_reducer_finish or nn_reducer_drain). Every rank must pass the same front. 0, or -1 (out of
 * memory: the old plan stays). */
int nn_reducer_set_front(nn_reducer *r, size_t front);
/* The front to set from a profile's estimates, in floats: least, what the link reduces while
 * backward goes on; most, all but what it must still reduce during the next step's forward.
 * Three quarters of the way from least to most where most is the larger, else least; within
 * [0, count]. Not least alone, since overlapped backward runs slower than in the warm-up that
 * measured it (docs/measurements.md, "The overlapped step"); a longer front costs nothing while
 * the rest still covers the forward. */
size_t nn_reducer_front_choose(double least, double most, size_t count);
/* The bucket plan, in the order of the all-reduce calls. */
int nn_reducer_nbuckets(const nn_reducer *r);
/* The last completed step's buckets and times, and in st (if not NULL) its summed all-reduce
 * time and CPU time (a copy: the thread may be at work on the next step). Returns the bucket
 * count; at most cap are copied. */
int nn_reducer_last(nn_reducer *r, nn_bucket *out, int cap, nn_reducer_stats *st);
/* What the optimizer must multiply the gradients by: 1/N with scale_in_sgd on an f32 wire and
 * more than one rank, else 1. */
float nn_reducer_grad_scale(const nn_reducer *r);

/* Sharded: this rank's ranges of the arena (its block of each bucket, then the bucket's tail),
 * in plan order, at most cap of them; returns their count (all of the arena, one range, when
 * not sharded or alone). */
int nn_reducer_shards(const nn_reducer *r, size_t *off, size_t *count, int cap);
/* Sharded: every rank's blocks of `arena` (parameters after each rank updated its own, or the
 * optimizer's state before a checkpoint) all-gathered, so every rank holds all of it; on the
 * calling thread, with nothing in flight (after nn_reducer_drain). *secs (may be NULL) gets
 * its time. Collective. 0, or -1 with the cause in err. */
int nn_reducer_gather(nn_reducer *r, float *arena, double *secs, char *err, size_t errcap);

/* Stage 3. The buckets the forward releases and the backward gathers again (refetch[k] for the
 * plan's bucket k, 1 or 0), and before reducing bucket k, the backward's gathers of the buckets up
 * to need[k] (at least those of the layer holding bucket k's last float, which must end before
 * it is reduced, or the ranks deadlock; one more lets the backward find its next layer's there);
 * the same on every rank. Before the first call none is released. 0, or -1 (not stage 3 or a
 * step in flight). */
int nn_reducer_set_refetch(nn_reducer *r, const unsigned char *refetch, const int *need);
/* With params, the training thread: waits until every bucket holding a float of [offset, offset
 * + count) is gathered for the forward (backward 0) or, stage 3 where refetched, for the backward
 * (1); without, returns at once.
 * *waited_s (may be NULL) gets the time waited. 0, or -1 with the cause in err. */
int nn_reducer_wait_params(nn_reducer *r, size_t offset, size_t count, int backward, double *waited_s,
                           char *err, size_t errcap);
/* Stage 3, the forward: bucket k's parameters are read no more before the backward; the other
 * ranks' blocks of it are dropped (their pages given back) and the thread may gather it again. */
void nn_reducer_release(nn_reducer *r, int k);
/* Stage 3, between steps (nothing in flight): every bucket's other blocks dropped, so the rank
 * holds its ranges only (after nn_reducer_gather, which makes the arena whole). */
void nn_reducer_reshard(nn_reducer *r);
/* The bytes this rank sends in one step by the algorithms' bus factors: all-reduce 2(N-1)/N of
 * the bucket, reduce-scatter and all-gather (N-1)/N each (stage 2's post-update gather, stage 3's
 * forward and backward gathers included); 0 with no communicator or alone. */
double nn_reducer_step_bytes(const nn_reducer *r);
/* Floats of the parameter arena this rank holds between steps (stage 3: its ranges, else all),
 * and the most it held at once during the steps so far. */
void nn_reducer_params_held(nn_reducer *r, size_t *between, size_t *peak);

/* A step starts: nothing of the arena is final yet. t0: the step's time origin (CLOCK_MONOTONIC
 * seconds; 0: now). Waits first until the previous step's buckets are all reduced (nothing of
 * the arena may be rewritten before). */
void nn_reducer_begin(nn_reducer *r, double t0);
/* Backward's progress: the first `ready` floats are final (nn_grad_ready_fn's contract). */
void nn_reducer_ready(nn_reducer *r, size_t ready);
/* Backward has ended: everything is final; returns at once. */
void nn_reducer_end_backward(nn_reducer *r);
/* Waits until every bucket holding a float of [offset, offset + count) is reduced; *waited_s (may
 * be NULL) gets the time waited. 0, or -1 with the cause in err (as nn_reducer_finish). */
int nn_reducer_wait_range(nn_reducer *r, size_t offset, size_t count, double *waited_s, char *err,
                          size_t errcap);
/* How many of the plan's buckets (call order, which is the order the thread reduces them in)
 * this step has reduced so far; never waits. 0 after a failure (the waits report it). */
int nn_reducer_ndone(nn_reducer *r);
/* Waits until every bucket of this step is reduced; st gets the step's figures. 0, or -1 with the
 * cause (a peer's failure names the rank and host) in err; after a failure the reducer (and its
 * communicator) must not be used again. */
int nn_reducer_drain(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap);
/* nn_reducer_end_backward, then nn_reducer_drain. */
int nn_reducer_finish(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap);

#endif
