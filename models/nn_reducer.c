/* models: the data-parallel gradient reducer: buckets of the gradient arena all-reduced on a
 * communication thread as backward completes them (see nn_reducer.h). */
#include "nn_reducer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RED_BUCKET_DEFAULT (25u << 20)
#define RED_FIRST_DEFAULT (1u << 20)
#define RED_ALIGN 16 /* floats: buckets start on 64-byte boundaries */

struct nn_reducer {
  nn_reducer_opts o;
  float *grads;
  size_t count;
  size_t front;         /* floats reduced in arena order; the rest in forward order */
  nn_bucket *b;         /* the plan, in call order, with this step's times */
  nn_bucket *last;      /* the last completed step's */
  int nb;
  void *wire;           /* 16-bit wire buffer (count elements), or NULL */
  int nranks, rank;
  float inv_n;
  float *block;         /* sharded: a bucket's block, received (reduce-scatter) or sent (gather) */
  coll_algo rs_algo, ag_algo; /* sharded: the all-reduce's algorithm's halves */

  pthread_t thread;
  int have_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  size_t released;      /* floats the communication thread may reduce */
  int next;             /* first bucket (call order) not yet reduced this step */
  int active, quit, failed;
  double t0;            /* the step's time origin */
  double bwd_end;       /* nn_reducer_end_backward, absolute */
  double comm_s, last_comm_s;
  double cpu_s, last_cpu_s;  /* the thread's CPU time on the buckets */
  char err[1024];
};

static double red_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* This thread's CPU time, user and system: the transport's copies and the reductions, which on
 * cores shared with backward come out of backward's time. */
static double red_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t red_floats(size_t bytes) {
  size_t f = bytes / sizeof(float);
  return f < RED_ALIGN ? RED_ALIGN : f / RED_ALIGN * RED_ALIGN;
}

/* The plan of nn_reducer.h into a fresh array: 0, or -1 (out of memory). Called twice: once to
 * count (out NULL), once to fill. */
static int red_cut(const nn_reducer *r, size_t front, nn_bucket *out) {
  size_t first = red_floats(r->o.first_bucket_bytes), rest = red_floats(r->o.bucket_bytes);
  size_t n = r->count;
  int k = 0;
#define PUT(off, cnt)                                                                           \
  do {                                                                                          \
    if (out) out[k] = (nn_bucket){.offset = (off), .count = (cnt)};                             \
    k++;                                                                                        \
  } while (0)
  if (front >= n) {
    /* arena order: first, rest..., and a last bucket of `first` when there is room for it */
    if (n <= first) {
      PUT(0, n);
      return k;
    }
    size_t tail = n - first <= first ? 0 : first; /* the last floats, never overlapped */
    size_t off = 0, end = n - tail;
    PUT(0, first);
    off = first;
    while (off < end) {
      size_t c = end - off < rest ? end - off : rest;
      PUT(off, c);
      off += c;
    }
    if (tail) PUT(end, tail);
    return k;
  }
  /* front in arena order (aligned up; 0 stays 0) after the held-back first floats, then the
   * rest from the end backwards, then the held-back floats */
  size_t f = (front + RED_ALIGN - 1) / RED_ALIGN * RED_ALIGN;
  size_t held = f > 0 ? (first < n ? first : n) : 0;
  if (f > n - held) f = n - held;
  size_t off = held, fend = held + f, chunk = first;
  while (off < fend) {
    size_t c = fend - off < chunk ? fend - off : chunk;
    PUT(off, c);
    off += c;
    chunk = chunk * 2 < rest ? chunk * 2 : rest;
  }
  size_t end = n;
  chunk = first;
  while (end > fend) {
    size_t beg = end - fend <= chunk ? fend : (end - chunk) / RED_ALIGN * RED_ALIGN;
    if (beg < fend) beg = fend;
    PUT(beg, end - beg);
    end = beg;
    chunk = chunk * 2 < rest ? chunk * 2 : rest;
  }
  if (held) PUT(0, held);
#undef PUT
  return k;
}

static int red_plan(nn_reducer *r, size_t front) {
  int n = red_cut(r, front, NULL);
  nn_bucket *b = calloc((size_t)n, sizeof *b), *l = calloc((size_t)n, sizeof *l);
  if (!b || !l) {
    free(b);
    free(l);
    return -1;
  }
  red_cut(r, front, b);
  memcpy(l, b, (size_t)n * sizeof *l);
  free(r->b);
  free(r->last);
  r->b = b;
  r->last = l;
  r->nb = n;
  r->front = front;
  return 0;
}

/* One bucket over the fabric: f32 in place (sum, then 1/N unless the optimizer applies it), or
 * through the 16-bit wire buffer (1/N first, as DDP's compression hooks do, so the sum cannot
 * overflow the narrow type). */
static int red_bucket(nn_reducer *r, const nn_bucket *k, coll_err *e) {
  float *g = r->grads + k->offset;
  size_t n = k->count;
  if (n == 0) return 0;
  if (r->o.sharded && r->nranks > 1) { /* the sum of this rank's block only; 1/N in the optimizer */
    size_t b = n / (size_t)r->nranks, tail = n - b * (size_t)r->nranks;
    if (b && coll_reduce_scatter(r->o.comm, g, r->block, b, COLL_F32, COLL_SUM, r->rs_algo, NULL, e)) return -1;
    if (b) memcpy(g + (size_t)r->rank * b, r->block, b * sizeof *g);
    return tail ? coll_allreduce(r->o.comm, g + b * (size_t)r->nranks, tail, COLL_F32, COLL_SUM, r->o.algo, NULL, e) : 0;
  }
  if (r->o.wire == COLL_F32) {
    if (coll_allreduce(r->o.comm, g, n, COLL_F32, COLL_SUM, r->o.algo, NULL, e)) return -1;
    if (r->nranks > 1 && !r->o.scale_in_sgd)
      for (size_t i = 0; i < n; i++) g[i] *= r->inv_n;
    return 0;
  }
  /* the conversions hold the link idle: collectives' vectorized loops, not a call a float */
  uint16_t *w = (uint16_t *)r->wire + k->offset;
  coll_f32_to_half_n(w, g, n, r->inv_n, r->o.wire);
  if (coll_allreduce(r->o.comm, w, n, r->o.wire, COLL_SUM, r->o.algo, NULL, e)) return -1;
  coll_half_to_f32_n(g, w, n, r->o.wire);
  return 0;
}

/* The step is complete (under mu): its figures become the last step's. */
static void red_complete(nn_reducer *r) {
  memcpy(r->last, r->b, (size_t)r->nb * sizeof *r->last);
  r->last_comm_s = r->comm_s;
  r->last_cpu_s = r->cpu_s;
}

static void *red_main(void *arg) {
  nn_reducer *r = arg;
  pthread_setname_np(pthread_self(), "fabench-comm"); /* for top -H, perf and gdb */
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->quit && !(r->active && r->next < r->nb &&
                         r->released >= r->b[r->next].offset + r->b[r->next].count))
      pthread_cond_wait(&r->cv, &r->mu);
    if (r->quit) break;
    nn_bucket *k = &r->b[r->next];
    pthread_mutex_unlock(&r->mu);
    coll_err e = {{0}};
    double s = red_now(), c = red_cpu();
    int rc = red_bucket(r, k, &e);
    double d = red_now();
    c = red_cpu() - c;
    pthread_mutex_lock(&r->mu);
    k->start_s = s - r->t0;
    k->done_s = d - r->t0;
    r->comm_s += d - s;
    r->cpu_s += c;
    if (rc) {
      r->failed = 1;
      snprintf(r->err, sizeof r->err, "%s", e.msg);
      r->next = r->nb;
    } else {
      r->next++;
    }
    if (r->next == r->nb) {
      r->active = 0;
      if (!rc) red_complete(r);
    }
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

/* Sharded: the block buffer (the largest bucket's block) and the all-reduce algorithm's halves:
 * ring's are rings, rhd's recursive halving and doubling, hier's two-level rings, native's the
 * library's own, the others' rings. 0, or -1 (out of memory). */
static int red_shard_setup(nn_reducer *r) {
  /* no plan (nn_reducer_set_front's either) has a bucket longer than the arena or the sizes */
  size_t first = red_floats(r->o.first_bucket_bytes), rest = red_floats(r->o.bucket_bytes);
  size_t most = first > rest ? first : rest;
  most = (most < r->count ? most : r->count) / (size_t)r->nranks + 1;
  if (posix_memalign((void **)&r->block, 64, most * sizeof *r->block)) return r->block = NULL, -1;
  coll_algo_kind k = r->o.algo.kind;
  int same = k == COLL_ALGO_RHD || k == COLL_ALGO_NATIVE || k == COLL_ALGO_AUTO || k == COLL_ALGO_HIER;
  r->rs_algo = (coll_algo){same ? k : COLL_ALGO_RING, 0};
  r->ag_algo = (coll_algo){k == COLL_ALGO_RHD ? COLL_ALGO_RD : r->rs_algo.kind, 0};
  return 0;
}

int nn_reducer_create(nn_reducer **out, const nn_reducer_opts *o, float *grads, size_t count,
                      char *err, size_t errcap) {
  *out = NULL;
  if (o->wire != COLL_F32 && o->wire != COLL_BF16 && o->wire != COLL_F16) {
    snprintf(err, errcap, "gradients travel as f32, bf16 or f16, not %s", coll_dtype_name(o->wire));
    return -1;
  }
  nn_reducer *r = calloc(1, sizeof *r);
  if (!r) goto oom;
  r->o = *o;
  if (!r->o.bucket_bytes) r->o.bucket_bytes = RED_BUCKET_DEFAULT;
  if (!r->o.first_bucket_bytes) r->o.first_bucket_bytes = RED_FIRST_DEFAULT;
  r->grads = grads;
  r->count = count;
  r->nranks = o->comm ? coll_comm_size(o->comm) : 1;
  r->inv_n = 1.0f / (float)r->nranks;
  pthread_mutex_init(&r->mu, NULL);
  pthread_cond_init(&r->cv, NULL);
  if (red_plan(r, count)) goto oom;
  if (o->sharded && (o->wire != COLL_F32 || !o->scale_in_sgd)) {
    snprintf(err, errcap, "sharded gradients travel as f32, scaled in the optimizer");
    nn_reducer_destroy(r);
    return -1;
  }
  r->rank = o->comm ? coll_comm_rank(o->comm) : 0;
  if (o->sharded && r->nranks > 1 && red_shard_setup(r)) goto oom;
  if (o->comm && o->wire != COLL_F32) {
    size_t bytes = (count ? count : 1) * sizeof(uint16_t);
    r->wire = o->wire_alloc ? o->wire_alloc->alloc(o->wire_alloc->ctx, bytes) : malloc(bytes);
    if (!r->wire) {
      snprintf(err, errcap, "cannot allocate the %s gradient buffer (%zu bytes)",
               coll_dtype_name(o->wire), bytes);
      nn_reducer_destroy(r);
      return -1;
    }
  }
  if (o->comm) {
    if (pthread_create(&r->thread, NULL, red_main, r)) {
      snprintf(err, errcap, "cannot start the communication thread");
      nn_reducer_destroy(r);
      return -1;
    }
    r->have_thread = 1;
  }
  *out = r;
  return 0;
oom:
  snprintf(err, errcap, "out of memory for the gradient reducer");
  nn_reducer_destroy(r);
  return -1;
}

void nn_reducer_destroy(nn_reducer *r) {
  if (!r) return;
  if (r->have_thread) {
    pthread_mutex_lock(&r->mu);
    r->quit = 1;
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
  }
  if (r->wire) {
    if (r->o.wire_alloc)
      r->o.wire_alloc->free(r->o.wire_alloc->ctx, r->wire);
    else
      free(r->wire);
  }
  pthread_mutex_destroy(&r->mu);
  pthread_cond_destroy(&r->cv);
  free(r->block);
  free(r->b);
  free(r->last);
  free(r);
}

int nn_reducer_set_front(nn_reducer *r, size_t front) {
  pthread_mutex_lock(&r->mu);
  while (r->have_thread && r->active) pthread_cond_wait(&r->cv, &r->mu);
  int rc = front == r->front ? 0 : red_plan(r, front);
  pthread_mutex_unlock(&r->mu);
  return rc;
}

size_t nn_reducer_front_choose(double least, double most, size_t count) {
  double f = most > least ? least + 0.75 * (most - least) : least;
  return f >= (double)count ? count : f > 0 ? (size_t)f : 0;
}

int nn_reducer_nbuckets(const nn_reducer *r) { return r->nb; }

int nn_reducer_last(nn_reducer *r, nn_bucket *out, int cap, nn_reducer_stats *st) {
  pthread_mutex_lock(&r->mu);
  int n = r->nb;
  if (out) memcpy(out, r->last, (size_t)(n < cap ? n : cap) * sizeof *out);
  if (st) {
    memset(st, 0, sizeof *st);
    st->comm_s = r->last_comm_s;
    st->comm_cpu_s = r->last_cpu_s;
  }
  pthread_mutex_unlock(&r->mu);
  return n;
}

int nn_reducer_shards(const nn_reducer *r, size_t *off, size_t *count, int cap) {
  if (!r->o.sharded || r->nranks == 1) {
    if (cap > 0) off[0] = 0, count[0] = r->count;
    return 1;
  }
  int k = 0;
  for (int i = 0; i < r->nb; i++) {
    size_t n = r->b[i].count, b = n / (size_t)r->nranks, tail = n - b * (size_t)r->nranks;
    if (b && k < cap) off[k] = r->b[i].offset + (size_t)r->rank * b, count[k] = b;
    k += b > 0;
    if (tail && k < cap) off[k] = r->b[i].offset + b * (size_t)r->nranks, count[k] = tail;
    k += tail > 0;
  }
  return k;
}

int nn_reducer_gather(nn_reducer *r, float *arena, double *secs, char *err, size_t errcap) {
  double t = red_now();
  coll_err e = {{0}};
  int rc = 0;
  for (int i = 0; i < r->nb && !rc && r->o.sharded && r->nranks > 1; i++) {
    size_t b = r->b[i].count / (size_t)r->nranks;
    float *at = arena + r->b[i].offset;
    if (!b) continue;
    memcpy(r->block, at + (size_t)r->rank * b, b * sizeof *at); /* the call's buffers must not overlap */
    rc = coll_allgather(r->o.comm, r->block, at, b, COLL_F32, r->ag_algo, NULL, &e);
  }
  if (rc) snprintf(err, errcap, "%s", e.msg);
  if (secs) *secs = red_now() - t;
  return rc;
}

float nn_reducer_grad_scale(const nn_reducer *r) {
  return r->o.scale_in_sgd && r->o.wire == COLL_F32 && r->nranks > 1 ? r->inv_n : 1.0f;
}

void nn_reducer_begin(nn_reducer *r, double t0) {
  pthread_mutex_lock(&r->mu);
  /* the last step's buckets are rewritten by this step's backward: they must be done */
  while (r->have_thread && r->active) pthread_cond_wait(&r->cv, &r->mu);
  r->t0 = t0 > 0 ? t0 : red_now();
  r->bwd_end = 0;
  r->released = 0;
  r->next = 0;
  r->comm_s = 0;
  r->cpu_s = 0;
  r->active = !r->failed && r->have_thread;
  for (int i = 0; i < r->nb; i++) r->b[i].ready_s = r->b[i].start_s = r->b[i].done_s = 0;
  pthread_mutex_unlock(&r->mu);
}

/* Stamps the buckets that `ready` floats complete; with overlap, hands them to the thread. */
static void red_advance(nn_reducer *r, size_t ready, int release) {
  double t = red_now() - r->t0;
  for (int i = 0; i < r->nb; i++) {
    const nn_bucket *k = &r->b[i];
    if (k->ready_s == 0 && ready >= k->offset + k->count) r->b[i].ready_s = t;
  }
  if (release && ready > r->released) {
    /* wake the thread only when the bucket it waits for is complete: backward reports every
     * layer, and a wake-up per layer costs the cores backward runs on */
    size_t need = r->next < r->nb ? r->b[r->next].offset + r->b[r->next].count : (size_t)-1;
    int wake = r->released < need && ready >= need;
    r->released = ready;
    if (wake) pthread_cond_broadcast(&r->cv);
  }
}

void nn_reducer_ready(nn_reducer *r, size_t ready) {
  pthread_mutex_lock(&r->mu);
  red_advance(r, ready, r->o.overlap);
  pthread_mutex_unlock(&r->mu);
}

void nn_reducer_end_backward(nn_reducer *r) {
  pthread_mutex_lock(&r->mu);
  red_advance(r, r->count, 1);
  r->bwd_end = red_now();
  if (!r->have_thread) red_complete(r); /* no exchange: the ready times are the step's figures */
  pthread_mutex_unlock(&r->mu);
}

int nn_reducer_wait_range(nn_reducer *r, size_t offset, size_t count, double *waited_s, char *err,
                          size_t errcap) {
  double t = red_now();
  pthread_mutex_lock(&r->mu);
  int need = -1; /* the last bucket in call order that holds a float of the range */
  for (int i = 0; i < r->nb && count; i++)
    if (r->b[i].offset < offset + count && offset < r->b[i].offset + r->b[i].count) need = i;
  if (r->have_thread)
    while (r->active && r->next <= need) pthread_cond_wait(&r->cv, &r->mu);
  int failed = r->failed;
  if (failed) snprintf(err, errcap, "%s", r->err);
  pthread_mutex_unlock(&r->mu);
  if (waited_s) *waited_s = red_now() - t;
  return failed ? -1 : 0;
}

int nn_reducer_ndone(nn_reducer *r) {
  pthread_mutex_lock(&r->mu);
  int n = r->failed ? 0 : r->have_thread && r->active ? r->next : r->nb;
  pthread_mutex_unlock(&r->mu);
  return n;
}

int nn_reducer_drain(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap) {
  pthread_mutex_lock(&r->mu);
  double t = red_now();
  if (r->have_thread)
    while (r->active) pthread_cond_wait(&r->cv, &r->mu);
  double done = red_now();
  int failed = r->failed;
  if (st) {
    st->bwd_end_s = r->bwd_end > 0 ? r->bwd_end - r->t0 : 0;
    st->exposed_s = r->o.comm ? done - t : 0; /* no exchange (none, one rank): nothing to wait for */
    st->comm_s = r->comm_s;
    st->comm_cpu_s = r->cpu_s;
    st->wire_bytes = r->o.comm ? r->count * coll_dtype_size(r->o.wire) : 0;
  }
  if (failed) snprintf(err, errcap, "%s", r->err);
  pthread_mutex_unlock(&r->mu);
  return failed ? -1 : 0;
}

int nn_reducer_finish(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap) {
  nn_reducer_end_backward(r);
  return nn_reducer_drain(r, st, err, errcap);
}
