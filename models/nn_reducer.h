/* models: the data-parallel gradient reducer (private to models/ and its tests).
 *
 * The gradient arena is in backward order, so backward finishes it front to back. The reducer cuts
 * it into buckets (the first `first_bucket_bytes`, then `bucket_bytes` each; cuts may fall inside
 * a tensor, which is harmless since every rank cuts alike) and a communication thread all-reduces
 * each bucket as soon as backward has reported it complete (nn_reducer_ready), while backward goes
 * on: PyTorch DDP's reducer, on a contiguous arena. Gradients are averaged over the ranks. With a
 * 16-bit wire type each bucket is scaled by 1/N, rounded to bf16 or f16 into a wire buffer,
 * all-reduced there and widened back (DDP's compression hooks): half the bytes on the fabric.
 *
 * With no communicator the reducer only records when each bucket became ready: the one-rank
 * profile and the no-communication baseline measure the same timeline without an exchange. */
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
  const nn_arena_alloc *wire_alloc; /* memory of the 16-bit wire buffer (collective, like the
                                       arena's); NULL: malloc */
} nn_reducer_opts;

typedef struct {
  size_t offset, count;       /* floats of the arena */
  double ready_s;             /* this step, seconds after nn_reducer_begin: backward completed it */
  double start_s, done_s;     /* its all-reduce started and ended (0 without a communicator) */
} nn_bucket;

typedef struct {
  double comm_s;              /* the buckets' all-reduce times, added up */
  double exposed_s;           /* from the end of backward until the last bucket was reduced */
  double bwd_end_s;           /* the end of backward, seconds after nn_reducer_begin */
  size_t wire_bytes;          /* bytes all-reduced this step */
} nn_reducer_stats;

typedef struct nn_reducer nn_reducer;

/* grads: the arena of count floats (it must stay put; on a communicator the same place on every
 * rank). Collective when o->comm is set. 0, or -1 with the cause in err. */
int nn_reducer_create(nn_reducer **out, const nn_reducer_opts *o, float *grads, size_t count,
                      char *err, size_t errcap);
void nn_reducer_destroy(nn_reducer *r);

/* The bucket plan (times are the last step's). */
int nn_reducer_buckets(const nn_reducer *r, const nn_bucket **b);

/* A step starts: nothing of the arena is final yet. */
void nn_reducer_begin(nn_reducer *r);
/* Backward's progress: the first `ready` floats are final (nn_grad_ready_fn's contract). */
void nn_reducer_ready(nn_reducer *r, size_t ready);
/* Backward has ended: waits until every bucket is averaged over the ranks. 0, or -1 with the
 * cause (a peer's failure names the rank and host) in err; after a failure the reducer (and its
 * communicator) must not be used again. */
int nn_reducer_finish(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap);


#endif
