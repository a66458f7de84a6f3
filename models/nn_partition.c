/* models: partitioned training with synthetic intermediate labels (nn_part.h): the cut, the labels,
 * the parts as nets of their own, the left part's squared-error step and the loop that trains one
 * part over whole epochs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_check.h"
#include "nn_impl.h"

static double pt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The model's table and its cut. 0, or -1 with why in err. */
static int part_table(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes, int parts,
                      int *cut, int *width, char *err, size_t errcap) {
  if (!nn_model_is_mlp(model)) {
    snprintf(err, errcap, "model '%s' is not fully connected: partitioned training cuts an MLP "
             "(mlp:IN,W,...,OUT or fc6)", model ? model : "(null)");
    return -1;
  }
  if (parts != 2) {
    snprintf(err, errcap, "%d parts: partitioned training cuts a network into 2", parts);
    return -1;
  }
  if (nn_table_mlp(t, model, in_c, in_h, in_w, classes, err, errcap)) return -1;
  if (t->nlayers < 2) {
    snprintf(err, errcap, "model '%s' has one layer: nothing to cut (two layers at least)", model);
    nn_table_free(t);
    return -1;
  }
  *cut = t->nlayers / 2;
  *width = t->layers[*cut - 1].cout;
  return 0;
}

int nn_part_cut(const char *model, int in_c, int in_h, int in_w, int classes, int parts, int *cut,
                int *width, char *err, size_t errcap) {
  nn_table t;
  if (part_table(&t, model, in_c, in_h, in_w, classes, parts, cut, width, err, errcap)) return -1;
  nn_table_free(&t);
  return 0;
}

int nn_sil_make(float *sil, int classes, int width, uint64_t seed) {
  if (classes < 1 || width < 1) return -1;
  uint64_t st = seed ^ 0x5111ab1e5ull; /* a stream apart from the weights' */
  for (int c = 0; c < classes; c++) {
    float *row = sil + (size_t)c * width;
    for (int again = 1; again;) {
      for (int j = 0; j < width; j++) row[j] = nn_rand_uniform(&st, 0.0f, 1.0f);
      again = 0;
      for (int d = 0; d < c && !again; d++)
        again = !memcmp(row, sil + (size_t)d * width, (size_t)width * sizeof *row);
    }
  }
  return 0;
}

int nn_part_net_create(nn_net **out, const nn_net_opts *o, int part, int parts, char *err, size_t errcap) {
  *out = NULL;
  nn_table full, t;
  int cut, width;
  if (part < 0 || part >= parts) {
    snprintf(err, errcap, "part %d of %d", part, parts);
    return -1;
  }
  if (o->device == NN_DEV_CUDA) {
    snprintf(err, errcap, "partitioned training runs on the CPU (--device cpu)");
    return -1;
  }
  if (nn_dnnl_available(err, errcap)) return -1;
  if (part_table(&full, o->model, o->in_c, o->in_h, o->in_w, o->classes, parts, &cut, &width, err, errcap))
    return -1;
  int first = part ? cut : 0, last = part ? full.nlayers : cut;
  nn_shape in = part ? (nn_shape){width, 1, 1} : full.shapes[0];
  int rc = -1;
  if (nn_table_init(&t, in.c, in.h, in.w)) {
    snprintf(err, errcap, "out of memory");
    nn_table_free(&full);
    return -1;
  }
  int x = 0;
  for (int i = first; i < last && x >= 0; i++) {
    nn_layer l = full.layers[i];
    l.in = x;
    x = nn_table_add(&t, l, err, errcap);
  }
  if (x >= 0) {
    nn_engine_opts eo = {.batch = o->batch, .threads = o->threads, .seed = o->seed + (uint64_t)part,
                         .grad_alloc = o->grad_alloc, .device = NN_DEV_CPU};
    rc = nn_net_create_table(out, &t, &eo, err, errcap);
  }
  nn_table_free(&t);
  nn_table_free(&full);
  return rc;
}

void nn_part_join(float *full, const float *left, size_t nl, const float *right, size_t nr) {
  memcpy(full, right, nr * sizeof *full);
  memcpy(full + nr, left, nl * sizeof *full);
}

void nn_part_split(const float *full, float *left, size_t nl, float *right, size_t nr) {
  memcpy(right, full, nr * sizeof *full);
  memcpy(left, full + nr, nl * sizeof *full);
}

int nn_part_left_infer(nn_net *left, const float *x, int n, float *out, char *err, size_t errcap) {
  return nn_net_forward(left, x, n, 0, out, err, errcap);
}

void nn_part_sil_rows(float *x, const int32_t *labels, int n, const float *sil, int width) {
  for (int i = 0; i < n; i++)
    memcpy(x + (size_t)i * width, sil + (size_t)labels[i] * width, (size_t)width * sizeof *x);
}

int nn_part_left_step(nn_net *left, const float *x, const int32_t *labels, int n, const float *sil, int classes,
                      int width, float *scratch, float *loss, nn_step_times *t, char *err, size_t errcap) {
  if (nn_check_labels(labels, n, classes, err, errcap)) return -1;
  float *y = scratch, *dy = scratch + (size_t)n * width;
  double t0 = pt_now();
  if (nn_net_forward(left, x, n, 1, y, err, errcap)) return -1;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    const float *tg = sil + (size_t)labels[i] * width;
    for (int j = 0; j < width; j++) {
      size_t k = (size_t)i * width + j;
      float d = y[k] - tg[j];
      sum += (double)d * d;
      dy[k] = 2.0f * d / ((float)n * (float)width);
    }
  }
  double t1 = pt_now();
  if (nn_net_backward(left, dy, NULL, err, errcap)) return -1;
  if (loss) *loss = (float)(sum / ((double)n * width));
  if (t) {
    t->fwd_s = t1 - t0;
    t->bwd_s = pt_now() - t1;
  }
  return 0;
}

/* The right part's epoch order: the labels of the left's loader's images, in the same order. */
static void right_batch(const nn_part_train_opts *o, const int64_t *perm, int64_t at, int32_t *lab, float *x) {
  for (int i = 0; i < o->batch; i++) lab[i] = o->train->labels[perm[at + i]];
  nn_part_sil_rows(x, lab, o->batch, o->sil, o->width);
}

int nn_part_train(nn_part_train_result *r, const nn_part_train_opts *o, char *err, size_t errcap) {
  memset(r, 0, sizeof *r);
  int64_t n = o->train->n, spe = n / o->batch;
  if (spe < 1) {
    snprintf(err, errcap, "%lld training images is less than one batch of %d", (long long)n, o->batch);
    return -1;
  }
  int64_t stop = o->epochs * spe;
  if (o->stop_step > 0 && o->stop_step < stop) stop = o->stop_step;
  nn_loader *ld = NULL;
  int64_t *perm = NULL;
  int32_t *lab = NULL;
  float *x = NULL, *scratch = NULL;
  int rc = -1;
  if (o->part == 0) {
    nn_loader_opts lo = {.batch = o->batch, .shuffle = 1, .drop_last = 1, .seed = o->seed, .world = 1,
                         .epochs = o->epochs, .prefetch = o->prefetch > 0 ? o->prefetch : 2};
    if (nn_loader_create(&ld, o->train, &lo, err, errcap)) return -1;
    scratch = malloc(2 * (size_t)o->batch * o->width * sizeof *scratch);
  } else {
    perm = malloc((size_t)n * sizeof *perm);
    lab = malloc((size_t)o->batch * sizeof *lab);
    x = malloc((size_t)o->batch * o->width * sizeof *x);
  }
  if (o->part == 0 ? !scratch : (!perm || !lab || !x)) {
    snprintf(err, errcap, "out of memory");
    goto out;
  }
  double t0 = pt_now();
  for (int64_t step = 0; step < stop; step++) {
    int64_t epoch = step / spe, in_epoch = step % spe;
    float loss = 0;
    nn_sgd_opts so = o->sgd;
    so.lr = (float)nn_lr_at(&o->sched, step);
    if (o->part == 0) {
      nn_batch b;
      nn_loader_next(ld, &b);
      if (b.n == 0) break;
      if (nn_part_left_step(o->net, b.x, b.labels, b.n, o->sil, o->train->classes, o->width, scratch, &loss, NULL, err, errcap))
        goto out;
    } else {
      /* the loader's order: each epoch's permutation, whole batches (drop_last) */
      if (in_epoch == 0) nn_data_epoch_perm(perm, n, o->seed, epoch);
      right_batch(o, perm, in_epoch * o->batch, lab, x);
      if (nn_net_train_step(o->net, x, lab, o->batch, &loss, NULL, NULL, err, errcap)) goto out;
    }
    nn_sgd_step(o->net, &so);
    r->steps = step + 1;
    r->final_loss = loss;
    if (o->on_step && o->on_step(o->ctx, step + 1, loss)) {
      snprintf(err, errcap, "stopped after step %lld", (long long)step + 1);
      goto out;
    }
  }
  r->train_s = pt_now() - t0;
  rc = 0;
out:
  nn_loader_destroy(ld);
  free(perm);
  free(lab);
  free(x);
  free(scratch);
  return rc;
}
