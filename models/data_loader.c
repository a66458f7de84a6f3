/* The loader: worker threads (or none: the caller's thread) turn uint8 images into normalized,
 * augmented float batches ahead of the training loop, each claiming the next batch number and
 * filling its slot. Batch contents depend only on (seed, epoch, step, rank, world), never on
 * timing or the number of workers, so a resumed run sees exactly the batches an uninterrupted
 * one would, and the batches come out in their order whichever worker filled them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_data.h"

struct nn_loader {
  const nn_dataset *d;
  nn_loader_opts o;
  int64_t spe, shard;
  int64_t total;              /* batches from the start position to the end (INT64_MAX: endless) */
  size_t per;                 /* floats per image */
  float lut[3][256];          /* pixel -> normalized value, per channel */
  /* two epochs' orders: a batch of epoch e reads perm[e % 2]; the first claim of an epoch waits
   * until no batch of epoch e - 2 is still being filled from that slot */
  int64_t *perm[2], perm_epoch[2];
  int busy[2];                /* batches being filled from each order */
  int nslots;
  float **x;
  int32_t **lab;
  nn_batch *meta;
  int64_t *ready;             /* per slot: the batch number it holds once filled (-1: none) */
  pthread_t *threads;
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t claimed, released, consumed;
  int holding, stop;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One image into dst, cropped from the zero-padded source at (dy, dx) and maybe mirrored. */
static void put_image(const nn_loader *l, float *dst, const uint8_t *src, int pad, int dy,
                      int dx, int flip) {
  const nn_dataset *d = l->d;
  for (int c = 0; c < d->c; c++) {
    const float *lut = l->lut[c];
    const uint8_t *s = src + (size_t)c * d->h * d->w;
    float *o = dst + (size_t)c * d->h * d->w;
    if (pad == 0 && !flip) {
      for (int i = 0; i < d->h * d->w; i++) o[i] = lut[s[i]];
      continue;
    }
    for (int y = 0; y < d->h; y++) {
      int sy = y + dy - pad;
      float *orow = o + (size_t)y * d->w;
      if (sy < 0 || sy >= d->h) {
        for (int x = 0; x < d->w; x++) orow[x] = lut[0];
        continue;
      }
      const uint8_t *srow = s + (size_t)sy * d->w;
      for (int x = 0; x < d->w; x++) {
        int sx = (flip ? d->w - 1 - x : x) + dx - pad;
        orow[x] = (sx < 0 || sx >= d->w) ? lut[0] : lut[srow[sx]];
      }
    }
  }
}

static void fill(nn_loader *l, int slot, int64_t epoch, int64_t step, const int64_t *perm) {
  double t0 = now_s();
  const nn_loader_opts *o = &l->o;
  int64_t first = step * o->batch;
  int64_t n = l->shard - first < o->batch ? l->shard - first : o->batch;
  for (int64_t k = 0; k < n; k++) {
    int64_t idx = perm[o->rank + (first + k) * o->world];
    int dy = 0, dx = 0, flip = 0;
    if (o->crop_pad > 0 || o->flip) {
      nn_data_aug_draw(&dy, &dx, &flip, o->seed, epoch, idx, o->crop_pad);
      if (!o->flip) flip = 0;
    }
    put_image(l, l->x[slot] + (size_t)k * l->per, l->d->pixels + (size_t)idx * l->per,
              o->crop_pad, dy, dx, flip);
    l->lab[slot][k] = l->d->labels[idx];
  }
  nn_batch *m = &l->meta[slot];
  m->x = l->x[slot];
  m->labels = l->lab[slot];
  m->n = (int)n;
  m->epoch = epoch;
  m->step = step;
  m->load_s = now_s() - t0;
}

static void set_perm(nn_loader *l, int64_t *perm, int64_t epoch) {
  if (l->o.shuffle) {
    nn_data_epoch_perm(perm, l->d->n, l->o.seed, epoch);
  } else {
    for (int64_t i = 0; i < l->d->n; i++) perm[i] = i;
  }
}

/* Batch q (from the start position): its epoch and step. */
static void position(const nn_loader *l, int64_t q, int64_t *epoch, int64_t *step) {
  int64_t at = l->o.step + q;
  *epoch = l->o.epoch + at / l->spe;
  *step = at % l->spe;
}

/* The order of epoch e for batch q, under the lock: set by the first claim of its epoch (claims
 * come in order, so no later batch of e - 2 is claimed after it). */
static const int64_t *take_order(nn_loader *l, int64_t e) {
  int k = (int)(e % 2);
  if (l->perm_epoch[k] != e) {
    set_perm(l, l->perm[k], e);
    l->perm_epoch[k] = e;
  }
  l->busy[k]++;
  return l->perm[k];
}

/* A loader thread: claims the next batch once its slot is free (and, at an epoch's first batch,
 * once that epoch's order may be set), fills it, and marks the slot ready. Any number of them
 * fill the same batches: what a batch holds depends on its number only. */
static void *worker(void *arg) {
  nn_loader *l = arg;
  pthread_mutex_lock(&l->mu);
  for (;;) {
    int64_t e = 0, st = 0;
    if (!l->stop && l->claimed < l->total) position(l, l->claimed, &e, &st);
    if (l->stop || l->claimed >= l->total) break;
    if (l->claimed - l->released >= l->nslots || (l->perm_epoch[e % 2] != e && l->busy[e % 2] > 0)) {
      pthread_cond_wait(&l->cv, &l->mu);
      continue;
    }
    int64_t q = l->claimed++;
    const int64_t *perm = take_order(l, e);
    pthread_mutex_unlock(&l->mu);
    int slot = (int)(q % l->nslots);
    fill(l, slot, e, st, perm);
    pthread_mutex_lock(&l->mu);
    l->busy[e % 2]--;
    l->ready[slot] = q;
    pthread_cond_broadcast(&l->cv);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

static void free_loader(nn_loader *l) {
  if (l->x)
    for (int i = 0; i < l->nslots; i++) {
      if (!l->x[i]) continue;
      if (l->o.host_free)
        l->o.host_free(l->o.host_ctx, l->x[i]);
      else
        free(l->x[i]);
    }
  if (l->lab)
    for (int i = 0; i < l->nslots; i++) free(l->lab[i]);
  free(l->x);
  free(l->lab);
  free(l->meta);
  free(l->perm[0]);
  free(l->perm[1]);
  free(l->ready);
  free(l->threads);
  free(l);
}

int nn_loader_create(nn_loader **out, const nn_dataset *d, const nn_loader_opts *o, char *err,
                     size_t errcap) {
  *out = NULL;
  if (o->batch < 1 || o->world < 1 || o->rank < 0 || o->rank >= o->world || o->crop_pad < 0 ||
      o->prefetch < 1 || o->epoch < 0 || o->step < 0 || d->c < 1 || d->c > 3 || !o->host_alloc != !o->host_free ||
      o->workers < NN_LOADER_NO_THREAD || o->workers > NN_LOADER_MAX_WORKERS) {
    snprintf(err, errcap, "loader: bad options (batch %d, rank %d of %d, pad %d, prefetch %d, workers %d)",
             o->batch, o->rank, o->world, o->crop_pad, o->prefetch, o->workers);
    return -1;
  }
  int64_t spe = nn_data_steps_per_epoch(d->n, o->world, o->batch, o->drop_last);
  if (spe < 1) {
    snprintf(err, errcap, "loader: %lld images over %d rank(s) is less than one batch of %d",
             (long long)d->n, o->world, o->batch);
    return -1;
  }
  if (o->step >= spe) {
    snprintf(err, errcap, "loader: start step %lld is past the epoch's %lld steps",
             (long long)o->step, (long long)spe);
    return -1;
  }
  nn_loader *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, errcap, "loader: out of memory");
    return -1;
  }
  l->d = d;
  l->o = *o;
  l->spe = spe;
  l->shard = nn_data_shard_len(d->n, o->world);
  l->per = (size_t)d->c * d->h * d->w;
  for (int c = 0; c < d->c; c++)
    for (int p = 0; p < 256; p++) l->lut[c][p] = ((float)p / 255.0f - d->mean[c]) / d->std[c];
  l->total = o->epochs > 0 ? (o->epochs - o->epoch) * spe - o->step : INT64_MAX;
  if (l->total < 0) l->total = 0;
  /* one held by the consumer, prefetch ready ahead (no thread: the one being filled) */
  l->nthreads = o->workers == NN_LOADER_NO_THREAD ? 0 : o->workers ? o->workers : 1;
  l->nslots = l->nthreads ? o->prefetch + 1 : 1;
  for (int k = 0; k < 2; k++) {
    l->perm[k] = malloc((size_t)(d->n ? d->n : 1) * sizeof *l->perm[k]);
    l->perm_epoch[k] = -1;
  }
  l->x = calloc((size_t)l->nslots, sizeof *l->x);
  l->lab = calloc((size_t)l->nslots, sizeof *l->lab);
  l->meta = calloc((size_t)l->nslots, sizeof *l->meta);
  l->ready = malloc((size_t)l->nslots * sizeof *l->ready);
  l->threads = calloc((size_t)(l->nthreads ? l->nthreads : 1), sizeof *l->threads);
  int ok = l->perm[0] && l->perm[1] && l->x && l->lab && l->meta && l->ready && l->threads;
  for (int i = 0; ok && i < l->nslots; i++) l->ready[i] = -1;
  for (int i = 0; ok && i < l->nslots; i++) {
    size_t xb = (size_t)o->batch * l->per * sizeof(float);
    l->x[i] = o->host_alloc ? o->host_alloc(o->host_ctx, xb) : malloc(xb);
    l->lab[i] = malloc((size_t)o->batch * sizeof(int32_t));
    ok = l->x[i] && l->lab[i];
  }
  if (!ok) {
    free_loader(l);
    snprintf(err, errcap, "loader: out of memory for %d batches of %d", o->prefetch + 1, o->batch);
    return -1;
  }
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  for (int i = 0; i < l->nthreads; i++)
    if (pthread_create(&l->threads[i], NULL, worker, l) != 0) {
      l->nthreads = i; /* those started are stopped and joined */
      nn_loader_destroy(l);
      snprintf(err, errcap, "loader: cannot start its thread %d of %d", i + 1, l->nthreads);
      return -1;
    }
  *out = l;
  return 0;
}

void nn_loader_next(nn_loader *l, nn_batch *b) {
  double t0 = now_s();
  pthread_mutex_lock(&l->mu);
  if (l->holding) {
    l->released++;
    l->holding = 0;
    pthread_cond_broadcast(&l->cv);
  }
  if (l->consumed >= l->total) {
    pthread_mutex_unlock(&l->mu);
    memset(b, 0, sizeof *b);
    return;
  }
  int slot = (int)(l->consumed % l->nslots);
  if (l->nthreads == 0) { /* no loader thread: this one fills it */
    int64_t e, st;
    position(l, l->consumed, &e, &st);
    const int64_t *perm = take_order(l, e);
    pthread_mutex_unlock(&l->mu);
    fill(l, slot, e, st, perm);
    pthread_mutex_lock(&l->mu);
    l->busy[e % 2]--;
    l->ready[slot] = l->consumed;
  }
  while (l->ready[slot] != l->consumed) pthread_cond_wait(&l->cv, &l->mu);
  *b = l->meta[slot];
  l->consumed++;
  l->holding = 1;
  pthread_mutex_unlock(&l->mu);
  b->wait_s = now_s() - t0;
}

int nn_loader_peek(nn_loader *l, nn_batch *b) {
  pthread_mutex_lock(&l->mu);
  int slot = (int)(l->consumed % l->nslots);
  int ready = l->consumed < l->total && l->ready[slot] == l->consumed;
  if (ready) *b = l->meta[slot];
  pthread_mutex_unlock(&l->mu);
  return ready;
}

int64_t nn_loader_steps_per_epoch(const nn_loader *l) { return l->spe; }

void nn_loader_destroy(nn_loader *l) {
  if (!l) return;
  pthread_mutex_lock(&l->mu);
  l->stop = 1;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  for (int i = 0; i < l->nthreads; i++) pthread_join(l->threads[i], NULL);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free_loader(l);
}
