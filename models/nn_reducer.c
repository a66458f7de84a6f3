/* models: the data-parallel gradient reducer: buckets of the gradient arena all-reduced on a
 * communication thread as backward completes them (see nn_reducer.h). */
#include "nn_reducer.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define RED_BUCKET_DEFAULT (25u << 20)
#define RED_FIRST_DEFAULT (1u << 20)
#define RED_ALIGN 16 /* floats: buckets start on 64-byte boundaries */

/* What the communication thread does, in order: reduce a bucket's gradients; with the parameters
 * given, also gather a bucket's parameters for the forward or (stage 3) again for the backward. */
enum { JOB_RED, JOB_AGF, JOB_AGB };
typedef struct {
  int kind, k;
} red_job;

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
  /* parameters given: gathered per bucket for the forward (fwdg); stage 3 drops them too */
  int fwdg, stage3;
  unsigned char *refetch;  /* [nb] gathered again for the backward */
  int *need;               /* [nb] the backward's gathers up to this bucket come before reducing it */
  red_job *jobs;           /* a step's jobs, in order (else one JOB_RED a bucket, in plan order) */
  int njobs;
  size_t own;              /* floats of the parameters this rank always holds: its ranges */

  pthread_t thread;
  int have_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  size_t released;      /* floats the communication thread may reduce */
  int next;             /* first bucket (call order) not yet reduced this step */
  int job;              /* first job not yet done this step */
  unsigned char *agf, *agb, *rel; /* fwdg, [nb]: gathered for the forward, for the backward;
                           released by the forward */
  size_t held, held_peak; /* floats of the parameters held now; the most during a step */
  int fwd_need;         /* fwdg: the bucket the forward waits for (-1: none) */
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
  r->njobs = n;
  r->front = front;
  return 0;
}

/* fwdg: the step's jobs from the plan, refetch and need (stage 3's; none in stage 2): every bucket gathered in forward
 * order (the arena's end first), then in arena order each bucket's gradients reduced, the
 * backward's gathers up to its need[k] just before: the backward finds its next layer's there,
 * and no reduction waits for a layer that waits for a gather behind it. */
static void red_jobs(nn_reducer *r) {
  int j = 0, g = 0;
  for (int k = r->nb - 1; k >= 0; k--) r->jobs[j++] = (red_job){JOB_AGF, k};
  for (int k = 0; k < r->nb; k++) {
    int upto = r->need[k] < r->nb ? r->need[k] : r->nb - 1;
    for (; g <= upto; g++)
      if (r->refetch[g]) r->jobs[j++] = (red_job){JOB_AGB, g};
    r->jobs[j++] = (red_job){JOB_RED, k};
  }
  for (; g < r->nb; g++)
    if (r->refetch[g]) r->jobs[j++] = (red_job){JOB_AGB, g}; /* none: need[nb - 1] covers all */
  r->njobs = j;
}

/* Bucket k's parameters of the other ranks' blocks: b floats each (0: the bucket is all tail). */
static size_t red_block(const nn_reducer *r, int k) { return r->b[k].count / (size_t)r->nranks; }
static size_t red_others(const nn_reducer *r, int k) { return red_block(r, k) * (size_t)(r->nranks - 1); }

/* Drops floats [p, p + n) of the parameters: whole pages go back to the system (they read as
 * zeros until written), the ends of partial pages become NaN, so a read before the next gather
 * shows. */
static void red_drop_range(float *p, size_t n) {
  if (!n) return;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)p, e = (uintptr_t)(p + n);
  uintptr_t pa = (a + page - 1) / page * page, pe = e / page * page;
  if (pe > pa && madvise((void *)pa, pe - pa, MADV_DONTNEED) == 0) {
    for (float *q = p; (uintptr_t)q < pa; q++) *q = NAN;
    for (float *q = (float *)pe; q < p + n; q++) *q = NAN;
  } else {
    for (size_t i = 0; i < n; i++) p[i] = NAN;
  }
}

/* Stage 3: bucket k's other ranks' blocks dropped (the caller accounts for them). */
static void red_drop(nn_reducer *r, int k) {
  size_t b = red_block(r, k), off = r->b[k].offset, me = (size_t)r->rank;
  red_drop_range(r->o.params + off, me * b);
  red_drop_range(r->o.params + off + (me + 1) * b, ((size_t)r->nranks - me - 1) * b);
}

/* Bucket k's blocks of `arena` all-gathered from every rank's own. */
static int red_gather_one(nn_reducer *r, float *arena, int k, coll_err *e) {
  size_t b = red_block(r, k);
  float *at = arena + r->b[k].offset;
  if (!b) return 0;
  memcpy(r->block, at + (size_t)r->rank * b, b * sizeof *at); /* the call's buffers must not overlap */
  return coll_allgather(r->o.comm, r->block, at, b, COLL_F32, r->ag_algo, NULL, e);
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

/* The step's current job (under mu): 1 and its kind and bucket where there is one. */
static int red_current(const nn_reducer *r, red_job *j) {
  if (!r->active || r->job >= r->njobs) return 0;
  *j = r->fwdg ? r->jobs[r->job] : (red_job){JOB_RED, r->job};
  return 1;
}

/* Stage 3 (under mu): the buckets the forward holds that it will release (gathered, not yet
 * released). */
static int red_fwd_held(const nn_reducer *r) {
  int n = 0;
  for (int k = 0; k < r->nb; k++) n += r->agf[k] && r->refetch[k] && !r->rel[k];
  return n;
}

/* The current job can run (under mu): its gradients are final; a backward gather, once the forward
 * has released its parameters; a forward gather while the forward holds fewer than two buckets it
 * releases (the one it reads, the next gathered ahead: FSDP's limit on gathers in flight, so the
 * memory held stays near two buckets) or waits for more (a layer over several buckets). */
static int red_runnable(const nn_reducer *r, red_job *j) {
  if (!red_current(r, j)) return 0;
  if (j->kind == JOB_RED) return r->released >= r->b[j->k].offset + r->b[j->k].count;
  if (j->kind == JOB_AGB) return r->rel[j->k];
  return (r->fwd_need >= 0 && !r->agf[r->fwd_need]) || red_fwd_held(r) < 2;
}

static void red_hold(nn_reducer *r, size_t more) {
  r->held += more;
  if (r->held > r->held_peak) r->held_peak = r->held;
}

static void *red_main(void *arg) {
  nn_reducer *r = arg;
  pthread_setname_np(pthread_self(), "fabench-comm"); /* for top -H, perf and gdb */
  pthread_mutex_lock(&r->mu);
  for (;;) {
    red_job j;
    while (!r->quit && !red_runnable(r, &j)) pthread_cond_wait(&r->cv, &r->mu);
    if (r->quit) break;
    nn_bucket *k = &r->b[j.k];
    if (j.kind != JOB_RED && r->stage3) red_hold(r, red_others(r, j.k)); /* stage 2 holds all */
    pthread_mutex_unlock(&r->mu);
    coll_err e = {{0}};
    double s = red_now(), c = red_cpu();
    int rc = j.kind == JOB_RED ? red_bucket(r, k, &e) : red_gather_one(r, r->o.params, j.k, &e);
    if (!rc && j.kind == JOB_RED && r->stage3) red_drop(r, j.k); /* the backward is past it */
    double d = red_now();
    c = red_cpu() - c;
    pthread_mutex_lock(&r->mu);
    if (j.kind == JOB_RED) {
      k->start_s = s - r->t0;
      k->done_s = d - r->t0;
      if (r->stage3) r->held -= red_others(r, j.k);
    } else {
      int w = j.kind == JOB_AGB;
      (w ? r->agb : r->agf)[j.k] = 1;
      k->ag_start_s[w] = s - r->t0;
      k->ag_done_s[w] = d - r->t0;
    }
    r->comm_s += d - s;
    r->cpu_s += c;
    if (rc) {
      r->failed = 1;
      snprintf(r->err, sizeof r->err, "%s", e.msg);
      r->next = r->nb;
      r->job = r->njobs;
    } else {
      r->next += j.kind == JOB_RED;
      r->job++;
    }
    if (r->job == r->njobs) {
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
  r->held = r->held_peak = r->own = count;
  if (o->params && o->sharded && r->nranks > 1) {
    r->fwdg = 1;
    r->stage3 = o->sharded == 3;
    int nb = r->nb;
    r->refetch = calloc((size_t)nb, 1), r->agf = calloc((size_t)nb, 1), r->agb = calloc((size_t)nb, 1);
    r->rel = calloc((size_t)nb, 1);
    r->need = calloc((size_t)nb, sizeof *r->need);
    r->jobs = calloc(3 * (size_t)nb + 1, sizeof *r->jobs);
    if (!r->refetch || !r->agf || !r->agb || !r->rel || !r->need || !r->jobs) goto oom;
    red_jobs(r);
    for (int k = 0; k < nb && r->stage3; k++) r->own -= red_others(r, k);
    r->held_peak = r->own; /* a step's figure: the whole arena until nn_reducer_reshard is not */
  }
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
  free(r->refetch);
  free(r->need);
  free(r->agf);
  free(r->agb);
  free(r->rel);
  free(r->jobs);
  free(r->b);
  free(r->last);
  free(r);
}

int nn_reducer_set_front(nn_reducer *r, size_t front) {
  pthread_mutex_lock(&r->mu);
  while (r->have_thread && r->active) pthread_cond_wait(&r->cv, &r->mu);
  int rc = front == r->front ? 0 : r->fwdg ? -1 : red_plan(r, front);
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
  for (int i = 0; i < r->nb && !rc && r->o.sharded && r->nranks > 1; i++) rc = red_gather_one(r, arena, i, &e);
  if (rc) snprintf(err, errcap, "%s", e.msg);
  if (!rc && r->stage3 && arena == r->o.params) {
    pthread_mutex_lock(&r->mu);
    r->held = r->count; /* between steps: not a step's peak */
    pthread_mutex_unlock(&r->mu);
  }
  if (secs) *secs = red_now() - t;
  return rc;
}

float nn_reducer_grad_scale(const nn_reducer *r) {
  return r->o.scale_in_sgd && r->o.wire == COLL_F32 && r->nranks > 1 ? r->inv_n : 1.0f;
}

int nn_reducer_set_refetch(nn_reducer *r, const unsigned char *refetch, const int *need) {
  pthread_mutex_lock(&r->mu);
  int ok = r->stage3 && !r->active;
  if (ok) {
    for (int k = 0; k < r->nb; k++) r->refetch[k] = refetch[k] != 0, r->need[k] = need[k];
    red_jobs(r);
  }
  pthread_mutex_unlock(&r->mu);
  return ok ? 0 : -1;
}

int nn_reducer_wait_params(nn_reducer *r, size_t offset, size_t count, int backward, double *waited_s,
                           char *err, size_t errcap) {
  double t = red_now();
  pthread_mutex_lock(&r->mu);
  for (int k = 0; k < r->nb && r->fwdg && count; k++) {
    if (!(r->b[k].offset < offset + count && offset < r->b[k].offset + r->b[k].count)) continue;
    unsigned char *done = backward && r->refetch[k] ? r->agb : r->agf;
    if (!done[k] && !backward) {
      r->fwd_need = k;
      pthread_cond_broadcast(&r->cv);
    }
    while (!done[k] && !r->failed && r->active) pthread_cond_wait(&r->cv, &r->mu);
    r->fwd_need = -1;
  }
  int failed = r->failed;
  if (failed) snprintf(err, errcap, "%s", r->err);
  pthread_mutex_unlock(&r->mu);
  if (waited_s) *waited_s = red_now() - t;
  return failed ? -1 : 0;
}

void nn_reducer_release(nn_reducer *r, int k) {
  if (!r->stage3 || k < 0 || k >= r->nb) return;
  pthread_mutex_lock(&r->mu);
  /* its forward gather must be over (a failed step: nothing is gathered again) */
  while (!r->agf[k] && !r->failed && r->active) pthread_cond_wait(&r->cv, &r->mu);
  int skip = r->rel[k] || !r->agf[k];
  pthread_mutex_unlock(&r->mu);
  if (skip) return;
  red_drop(r, k); /* before the thread may gather it again */
  pthread_mutex_lock(&r->mu);
  r->rel[k] = 1;
  r->held -= red_others(r, k);
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

void nn_reducer_reshard(nn_reducer *r) {
  if (!r->stage3) return;
  pthread_mutex_lock(&r->mu);
  while (r->have_thread && r->active) pthread_cond_wait(&r->cv, &r->mu);
  if (r->held != r->own)
    for (int k = 0; k < r->nb; k++) red_drop(r, k);
  r->held = r->own;
  pthread_mutex_unlock(&r->mu);
}

double nn_reducer_step_bytes(const nn_reducer *r) {
  if (!r->o.comm || r->nranks < 2) return 0;
  double n = r->nranks, sum = 0;
  if (!r->o.sharded) return 2.0 * (n - 1) / n * (double)r->count * (double)coll_dtype_size(r->o.wire);
  for (int k = 0; k < r->nb; k++) {
    size_t b = red_block(r, k), tail = r->b[k].count - b * (size_t)r->nranks;
    /* reduce-scatter and one gather (for the forward), a second for the backward where stage 3
     * refetches; the tail all-reduced */
    double gathers = 1 + (r->stage3 ? r->refetch[k] : 0);
    sum += ((1 + gathers) * (n - 1) * (double)b + 2.0 * (n - 1) / n * (double)tail) * sizeof(float);
  }
  return sum;
}

void nn_reducer_params_held(nn_reducer *r, size_t *between, size_t *peak) {
  pthread_mutex_lock(&r->mu);
  *between = r->own;
  *peak = r->held_peak;
  pthread_mutex_unlock(&r->mu);
}

void nn_reducer_begin(nn_reducer *r, double t0) {
  /* stage 3: a step starts from the rank's ranges (an evaluation or checkpoint gathered all) */
  nn_reducer_reshard(r);
  pthread_mutex_lock(&r->mu);
  /* the last step's buckets are rewritten by this step's backward: they must be done */
  while (r->have_thread && r->active) pthread_cond_wait(&r->cv, &r->mu);
  r->t0 = t0 > 0 ? t0 : red_now();
  r->bwd_end = 0;
  r->released = 0;
  r->next = 0;
  r->job = 0;
  r->fwd_need = -1;
  if (r->fwdg) {
    memset(r->agf, 0, (size_t)r->nb);
    memset(r->agb, 0, (size_t)r->nb);
    memset(r->rel, 0, (size_t)r->nb);
  }
  r->comm_s = 0;
  r->cpu_s = 0;
  r->active = !r->failed && r->have_thread;
  for (int i = 0; i < r->nb; i++) {
    nn_bucket *k = &r->b[i];
    k->ready_s = k->start_s = k->done_s = 0;
    k->ag_start_s[0] = k->ag_start_s[1] = k->ag_done_s[0] = k->ag_done_s[1] = 0;
  }
  if (r->fwdg) pthread_cond_broadcast(&r->cv); /* the forward's gathers can start */
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
    red_job j;
    size_t need = red_current(r, &j) && j.kind == JOB_RED ? r->b[j.k].offset + r->b[j.k].count : (size_t)-1;
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
