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
  nn_bucket *b;
  int nb;
  void *wire;           /* 16-bit wire buffer (count elements), or NULL */
  int nranks;
  float inv_n;

  pthread_t thread;
  int have_thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* under mu */
  size_t released;      /* floats the communication thread may reduce */
  int next;             /* first bucket not yet reduced this step */
  int active, quit, failed;
  double t0;            /* nn_reducer_begin */
  double comm_s;
  char err[1024];
};

static double red_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Buckets of first_bytes, then bucket_bytes, in whole 64-byte lines; the last takes the rest. */
static int red_plan(nn_reducer *r) {
  size_t first = r->o.first_bucket_bytes / sizeof(float), rest = r->o.bucket_bytes / sizeof(float);
  first = first < RED_ALIGN ? RED_ALIGN : first / RED_ALIGN * RED_ALIGN;
  rest = rest < RED_ALIGN ? RED_ALIGN : rest / RED_ALIGN * RED_ALIGN;
  int n = 0;
  for (size_t off = 0; off < r->count || n == 0; n++) off += n == 0 ? first : rest;
  if (!(r->b = calloc((size_t)n, sizeof *r->b))) return -1;
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    size_t want = i == 0 ? first : rest, left = r->count - off;
    r->b[i].offset = off;
    r->b[i].count = want < left ? want : left;
    off += r->b[i].count;
  }
  r->nb = n;
  return 0;
}

/* One bucket over the fabric: f32 in place (sum, then 1/N), or through the 16-bit wire buffer
 * (1/N first, as DDP's compression hooks do, so the sum cannot overflow the narrow type). */
static int red_bucket(nn_reducer *r, const nn_bucket *k, coll_err *e) {
  float *g = r->grads + k->offset;
  size_t n = k->count;
  if (n == 0) return 0;
  if (r->o.wire == COLL_F32) {
    if (coll_allreduce(r->o.comm, g, n, COLL_F32, COLL_SUM, r->o.algo, NULL, e)) return -1;
    if (r->nranks > 1)
      for (size_t i = 0; i < n; i++) g[i] *= r->inv_n;
    return 0;
  }
  uint16_t *w = (uint16_t *)r->wire + k->offset;
  int bf = r->o.wire == COLL_BF16;
  for (size_t i = 0; i < n; i++) {
    float v = g[i] * r->inv_n;
    w[i] = bf ? coll_f32_to_bf16(v) : coll_f32_to_f16(v);
  }
  if (coll_allreduce(r->o.comm, w, n, r->o.wire, COLL_SUM, r->o.algo, NULL, e)) return -1;
  for (size_t i = 0; i < n; i++) g[i] = bf ? coll_bf16_to_f32(w[i]) : coll_f16_to_f32(w[i]);
  return 0;
}

static void *red_main(void *arg) {
  nn_reducer *r = arg;
  pthread_mutex_lock(&r->mu);
  for (;;) {
    while (!r->quit && !(r->active && r->next < r->nb &&
                         r->released >= r->b[r->next].offset + r->b[r->next].count))
      pthread_cond_wait(&r->cv, &r->mu);
    if (r->quit) break;
    nn_bucket *k = &r->b[r->next];
    pthread_mutex_unlock(&r->mu);
    coll_err e = {{0}};
    double s = red_now();
    int rc = red_bucket(r, k, &e);
    double d = red_now();
    pthread_mutex_lock(&r->mu);
    k->start_s = s - r->t0;
    k->done_s = d - r->t0;
    r->comm_s += d - s;
    if (rc) {
      r->failed = 1;
      snprintf(r->err, sizeof r->err, "%s", e.msg);
      r->next = r->nb;
    } else {
      r->next++;
    }
    if (r->next == r->nb) r->active = 0;
    pthread_cond_broadcast(&r->cv);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
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
  if (red_plan(r)) goto oom;
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
  free(r->b);
  free(r);
}

int nn_reducer_buckets(const nn_reducer *r, const nn_bucket **b) {
  *b = r->b;
  return r->nb;
}

void nn_reducer_begin(nn_reducer *r) {
  pthread_mutex_lock(&r->mu);
  r->t0 = red_now();
  r->released = 0;
  r->next = 0;
  r->comm_s = 0;
  r->active = !r->failed;
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
    r->released = ready;
    pthread_cond_broadcast(&r->cv);
  }
}

void nn_reducer_ready(nn_reducer *r, size_t ready) {
  pthread_mutex_lock(&r->mu);
  red_advance(r, ready, r->o.overlap);
  pthread_mutex_unlock(&r->mu);
}


int nn_reducer_finish(nn_reducer *r, nn_reducer_stats *st, char *err, size_t errcap) {
  pthread_mutex_lock(&r->mu);
  red_advance(r, r->count, 1);
  double end = red_now();
  if (r->have_thread)
    while (r->active) pthread_cond_wait(&r->cv, &r->mu);
  double done = red_now();
  int failed = r->failed;
  if (st) {
    st->bwd_end_s = end - r->t0;
    st->exposed_s = done - end;
    st->comm_s = r->comm_s;
    st->wire_bytes = r->o.comm ? r->count * coll_dtype_size(r->o.wire) : 0;
  }
  if (failed) snprintf(err, errcap, "%s", r->err);
  pthread_mutex_unlock(&r->mu);
  return failed ? -1 : 0;
}
