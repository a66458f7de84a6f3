/* The loader: one thread turns uint8 images into normalized, augmented float batches ahead of
 * the training loop. Batch contents depend only on (seed, epoch, step, rank, world), never on
 * timing, so a resumed run sees exactly the batches an uninterrupted one would. */
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
  size_t per;                 /* floats per image */
  float lut[3][256];          /* pixel -> normalized value, per channel */
  int64_t *perm;              /* current epoch's order */
  int nslots;
  float **x;
  int32_t **lab;
  nn_batch *meta;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int64_t produced, released, consumed;
  int holding, finished, stop;
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

static void fill(nn_loader *l, int slot, int64_t epoch, int64_t step) {
  double t0 = now_s();
  const nn_loader_opts *o = &l->o;
  int64_t first = step * o->batch;
  int64_t n = l->shard - first < o->batch ? l->shard - first : o->batch;
  for (int64_t k = 0; k < n; k++) {
    int64_t idx = l->perm[o->rank + (first + k) * o->world];
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

static void set_perm(nn_loader *l, int64_t epoch) {
  if (l->o.shuffle) {
    nn_data_epoch_perm(l->perm, l->d->n, l->o.seed, epoch);
  } else {
    for (int64_t i = 0; i < l->d->n; i++) l->perm[i] = i;
  }
}

static void *producer(void *arg) {
  nn_loader *l = arg;
  int64_t epoch = l->o.epoch, step = l->o.step;
  set_perm(l, epoch);
  for (;;) {
    if (l->o.epochs > 0 && epoch >= l->o.epochs) break;
    pthread_mutex_lock(&l->mu);
    while (!l->stop && l->produced - l->released >= l->nslots) pthread_cond_wait(&l->cv, &l->mu);
    int stop = l->stop;
    int slot = (int)(l->produced % l->nslots);
    pthread_mutex_unlock(&l->mu);
    if (stop) break;
    fill(l, slot, epoch, step);
    pthread_mutex_lock(&l->mu);
    l->produced++;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (++step == l->spe) {
      step = 0;
      epoch++;
      if (l->o.epochs <= 0 || epoch < l->o.epochs) set_perm(l, epoch);
    }
  }
  pthread_mutex_lock(&l->mu);
  l->finished = 1;
  pthread_cond_broadcast(&l->cv);
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
  free(l->perm);
  free(l);
}

int nn_loader_create(nn_loader **out, const nn_dataset *d, const nn_loader_opts *o, char *err,
                     size_t errcap) {
  *out = NULL;
  if (o->batch < 1 || o->world < 1 || o->rank < 0 || o->rank >= o->world || o->crop_pad < 0 ||
      o->prefetch < 1 || o->epoch < 0 || o->step < 0 || d->c < 1 || d->c > 3 || !o->host_alloc != !o->host_free) {
    snprintf(err, errcap, "loader: bad options (batch %d, rank %d of %d, pad %d, prefetch %d)",
             o->batch, o->rank, o->world, o->crop_pad, o->prefetch);
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
  l->nslots = o->prefetch + 1; /* one held by the consumer, prefetch ready ahead */
  l->perm = malloc((size_t)d->n * sizeof *l->perm);
  l->x = calloc((size_t)l->nslots, sizeof *l->x);
  l->lab = calloc((size_t)l->nslots, sizeof *l->lab);
  l->meta = calloc((size_t)l->nslots, sizeof *l->meta);
  int ok = l->perm && l->x && l->lab && l->meta;
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
  if (pthread_create(&l->thread, NULL, producer, l) != 0) {
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free_loader(l);
    snprintf(err, errcap, "loader: cannot start its thread");
    return -1;
  }
  *out = l;
  return 0;
}

void nn_loader_next(nn_loader *l, nn_batch *b) {
  pthread_mutex_lock(&l->mu);
  if (l->holding) {
    l->released++;
    l->holding = 0;
    pthread_cond_broadcast(&l->cv);
  }
  while (l->produced == l->consumed && !l->finished) pthread_cond_wait(&l->cv, &l->mu);
  if (l->produced > l->consumed) {
    *b = l->meta[l->consumed % l->nslots];
    l->consumed++;
    l->holding = 1;
  } else {
    memset(b, 0, sizeof *b);
  }
  pthread_mutex_unlock(&l->mu);
}

int nn_loader_peek(nn_loader *l, nn_batch *b) {
  pthread_mutex_lock(&l->mu);
  int ready = l->produced > l->consumed;
  if (ready) *b = l->meta[l->consumed % l->nslots];
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
  pthread_join(l->thread, NULL);
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free_loader(l);
}
