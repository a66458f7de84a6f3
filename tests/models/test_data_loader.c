#define _DEFAULT_SOURCE /* usleep */
/* The loader: permutations, rank shards, augmentation and normalization against a reference
 * written here (padding built explicitly, in double), resume positions and prefetch depths. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn_data.h"

static uint64_t rng_state = 99;
static uint32_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static nn_dataset random_dataset(int64_t n, int c, int h, int w) {
  nn_dataset d = {0};
  d.n = n;
  d.c = c;
  d.h = h;
  d.w = w;
  d.classes = 10;
  d.pixels = malloc((size_t)n * c * h * w);
  d.labels = malloc((size_t)n * sizeof *d.labels);
  for (int64_t i = 0; i < n * c * h * w; i++) d.pixels[i] = (uint8_t)rnd();
  for (int64_t i = 0; i < n; i++) d.labels[i] = (int32_t)(rnd() % 10);
  const float mean[3] = {0.3f, 0.5f, 0.45f}, std[3] = {0.2f, 0.3f, 0.25f};
  memcpy(d.mean, mean, sizeof mean);
  memcpy(d.std, std, sizeof std);
  return d;
}

static void test_perm(void **state) {
  (void)state;
  const int64_t sizes[] = {1, 2, 17, 1000};
  for (size_t s = 0; s < 4; s++) {
    int64_t n = sizes[s];
    int64_t *p = malloc(n * sizeof *p), *q = malloc(n * sizeof *q);
    char *seen = calloc(n, 1);
    nn_data_epoch_perm(p, n, 7, 3);
    for (int64_t i = 0; i < n; i++) {
      assert_in_range(p[i], 0, n - 1);
      assert_false(seen[p[i]]);
      seen[p[i]] = 1;
    }
    nn_data_epoch_perm(q, n, 7, 3);
    assert_memory_equal(p, q, n * sizeof *p); /* a function of (seed, epoch) */
    if (n >= 17) {
      nn_data_epoch_perm(q, n, 7, 4);
      assert_memory_not_equal(p, q, n * sizeof *p);
      nn_data_epoch_perm(q, n, 8, 3);
      assert_memory_not_equal(p, q, n * sizeof *p);
    }
    if (n >= 1000) {
      int fixed = 0; /* shuffled, not the identity: about one fixed point expected */
      for (int64_t i = 0; i < n; i++) fixed += p[i] == i;
      assert_true(fixed < 10);
    }
    free(p);
    free(q);
    free(seen);
  }
}

static void test_aug_draws(void **state) {
  (void)state;
  int hist_y[9] = {0}, hist_x[9] = {0}, flips = 0;
  for (int64_t i = 0; i < 9000; i++) {
    int dy, dx, f;
    nn_data_aug_draw(&dy, &dx, &f, 5, i % 3, i, 4);
    assert_in_range(dy, 0, 8);
    assert_in_range(dx, 0, 8);
    hist_y[dy]++;
    hist_x[dx]++;
    flips += f;
  }
  for (int k = 0; k < 9; k++) {
    assert_in_range(hist_y[k], 800, 1200); /* roughly uniform */
    assert_in_range(hist_x[k], 800, 1200);
  }
  assert_in_range(flips, 4200, 4800);
  int dy, dx, f;
  nn_data_aug_draw(&dy, &dx, &f, 5, 0, 3, 0);
  assert_int_equal(dy, 0);
  assert_int_equal(dx, 0);
}

/* What the loader must produce for image idx, computed the long way. */
static void reference_image(double *out, const nn_dataset *d, int64_t idx, int pad, int dy,
                            int dx, int flip) {
  int ph = d->h + 2 * pad, pw = d->w + 2 * pad;
  double *padded = calloc((size_t)ph * pw, sizeof *padded);
  for (int c = 0; c < d->c; c++) {
    for (int y = 0; y < ph; y++)
      for (int x = 0; x < pw; x++) {
        int sy = y - pad, sx = x - pad;
        padded[y * pw + x] = (sy >= 0 && sy < d->h && sx >= 0 && sx < d->w)
                                 ? d->pixels[((idx * d->c + c) * d->h + sy) * d->w + sx]
                                 : 0.0;
      }
    for (int y = 0; y < d->h; y++)
      for (int x = 0; x < d->w; x++) {
        double v = padded[(y + dy) * pw + (x + dx)];
        int ox = flip ? d->w - 1 - x : x;
        out[(c * d->h + y) * d->w + ox] = (v / 255.0 - d->mean[c]) / d->std[c];
      }
  }
  free(padded);
}

static void check_stream(const nn_dataset *d, const nn_loader_opts *o, int64_t nbatches) {
  nn_loader *l;
  char err[256];
  assert_int_equal(nn_loader_create(&l, d, o, err, sizeof err), 0);
  int64_t spe = nn_loader_steps_per_epoch(l);
  int64_t shard = d->n / o->world;
  assert_int_equal(spe, o->drop_last ? shard / o->batch : (shard + o->batch - 1) / o->batch);
  size_t per = (size_t)d->c * d->h * d->w;
  double *ref = malloc(per * sizeof *ref);
  int64_t *perm = malloc(d->n * sizeof *perm);
  int64_t epoch = o->epoch, step = o->step;
  for (int64_t b = 0; b < nbatches; b++) {
    nn_batch bt;
    nn_loader_next(l, &bt);
    assert_int_equal(bt.epoch, epoch);
    assert_int_equal(bt.step, step);
    int64_t want_n = shard - step * o->batch < o->batch ? shard - step * o->batch : o->batch;
    assert_int_equal(bt.n, want_n);
    if (o->shuffle) nn_data_epoch_perm(perm, d->n, o->seed, epoch);
    else
      for (int64_t i = 0; i < d->n; i++) perm[i] = i;
    for (int k = 0; k < bt.n; k++) {
      int64_t idx = perm[o->rank + (step * o->batch + k) * o->world];
      assert_int_equal(bt.labels[k], d->labels[idx]);
      int dy = o->crop_pad, dx = o->crop_pad, f = 0;
      if (o->crop_pad || o->flip) nn_data_aug_draw(&dy, &dx, &f, o->seed, epoch, idx, o->crop_pad);
      if (!o->flip) f = 0;
      reference_image(ref, d, idx, o->crop_pad, dy, dx, f);
      for (size_t i = 0; i < per; i++)
        if (fabs(bt.x[k * per + i] - ref[i]) > 1e-5 * (1 + fabs(ref[i])))
          fail_msg("epoch %lld step %lld image %d elem %zu: %g want %g", (long long)epoch,
                   (long long)step, k, i, bt.x[k * per + i], ref[i]);
    }
    if (++step == spe) {
      step = 0;
      epoch++;
    }
  }
  free(ref);
  free(perm);
  nn_loader_destroy(l);
}

static void test_stream_matches_reference(void **state) {
  (void)state;
  nn_dataset d = random_dataset(23, 3, 5, 7);
  nn_loader_opts o = {.batch = 4, .shuffle = 1, .drop_last = 1, .crop_pad = 2, .flip = 1,
                      .rank = 1, .world = 2, .seed = 11, .prefetch = 2};
  check_stream(&d, &o, 7); /* 11 images per rank, 2 steps per epoch: crosses 3 epochs */
  o.drop_last = 0;
  o.rank = 0;
  o.world = 3;
  o.crop_pad = 0;
  check_stream(&d, &o, 6); /* flip only, partial last batch */
  o.flip = 0;
  o.crop_pad = 3;
  o.shuffle = 0;
  o.epoch = 2;
  o.step = 1;
  check_stream(&d, &o, 5); /* crop only, dataset order, a start position */
  nn_data_free(&d);
  nn_dataset g = random_dataset(9, 1, 4, 4);
  nn_loader_opts e = {.batch = 9, .world = 1, .seed = 1, .prefetch = 1};
  check_stream(&g, &e, 3); /* no augmentation: plain normalization */
  nn_data_free(&g);
}

/* Rank shards are disjoint and together cover all but the world-indivisible tail. */
static void test_shards(void **state) {
  (void)state;
  nn_dataset d = random_dataset(103, 1, 2, 2);
  for (int i = 0; i < d.n; i++) d.labels[i] = i; /* labels identify images */
  for (int world = 1; world <= 5; world++) {
    char *seen = calloc(d.n, 1);
    for (int rank = 0; rank < world; rank++) {
      nn_loader_opts o = {.batch = 5, .shuffle = 1, .rank = rank, .world = world, .seed = 3,
                          .epochs = 1, .prefetch = 3};
      nn_loader *l;
      char err[256];
      assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
      int64_t got = 0;
      for (;;) {
        nn_batch b;
        nn_loader_next(l, &b);
        if (b.n == 0) break;
        for (int k = 0; k < b.n; k++) {
          assert_false(seen[b.labels[k]]);
          seen[b.labels[k]] = 1;
        }
        got += b.n;
      }
      assert_int_equal(got, 103 / world);
      nn_loader_destroy(l);
    }
    int total = 0;
    for (int i = 0; i < d.n; i++) total += seen[i];
    assert_int_equal(total, 103 / world * world);
    free(seen);
  }
  nn_data_free(&d);
}

/* Resuming at (epoch, step) gives the bytes an uninterrupted loader gives there; every prefetch
 * depth gives the same stream. */
static void test_resume_and_prefetch(void **state) {
  (void)state;
  nn_dataset d = random_dataset(50, 2, 6, 5);
  nn_loader_opts o = {.batch = 7, .shuffle = 1, .drop_last = 1, .crop_pad = 1, .flip = 1,
                      .world = 1, .seed = 77, .prefetch = 1};
  size_t per = 2 * 6 * 5, bytes = 7 * per * sizeof(float);
  char err[256];
  nn_loader *full;
  assert_int_equal(nn_loader_create(&full, &d, &o, err, sizeof err), 0);
  float *stream = malloc(20 * bytes);
  int32_t lab[20][7];
  for (int b = 0; b < 20; b++) {
    nn_batch bt;
    nn_loader_next(full, &bt);
    assert_int_equal(bt.n, 7);
    memcpy(stream + b * 7 * per, bt.x, bytes);
    memcpy(lab[b], bt.labels, sizeof lab[b]);
  }
  nn_loader_destroy(full);
  for (int depth = 1; depth <= 4; depth++) {
    nn_loader_opts r = o;
    r.prefetch = depth;
    r.epoch = 1; /* 7 steps per epoch: batch 9 of the stream */
    r.step = 2;
    nn_loader *l;
    assert_int_equal(nn_loader_create(&l, &d, &r, err, sizeof err), 0);
    for (int b = 9; b < 20; b++) {
      nn_batch bt;
      nn_loader_next(l, &bt);
      assert_memory_equal(bt.x, stream + b * 7 * per, bytes);
      assert_memory_equal(bt.labels, lab[b], sizeof lab[b]);
    }
    nn_loader_destroy(l);
  }
  free(stream);
  nn_data_free(&d);
}

/* The batches, their bytes and order, are the same for any number of loader threads (none: the
 * caller makes each), and match the reference; across several epochs (the loader keeps two
 * epochs' orders), to the end of --epochs, and from a start position. */
static void test_workers_same_batches(void **state) {
  (void)state;
  nn_dataset d = random_dataset(23, 3, 5, 7);
  const int workers[] = {NN_LOADER_NO_THREAD, 1, 2, 3};
  size_t per = 3 * 5 * 7, bytes = 4 * per * sizeof(float);
  float *first = malloc(40 * bytes);
  int32_t lab[40][4];
  int64_t count0 = -1;
  for (int prefetch = 1; prefetch <= 3; prefetch += 2)
    for (int w = 0; w < 4; w++) {
      nn_loader_opts o = {.batch = 4, .shuffle = 1, .drop_last = 1, .crop_pad = 2, .flip = 1, .rank = 1,
                          .world = 2, .seed = 11, .prefetch = prefetch, .workers = workers[w]};
      check_stream(&d, &o, 9); /* 2 steps an epoch: five epochs */
      o.epochs = 17;           /* to the end: 34 batches, then none */
      nn_loader *l;
      char err[256];
      assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
      int64_t count = 0;
      for (;;) {
        nn_batch b;
        nn_loader_next(l, &b);
        if (b.n == 0) break;
        assert_true(count < 40);
        assert_true(b.wait_s >= 0 && b.load_s >= 0);
        if (count0 < 0) { /* the first loader's stream: every other one gives these bytes */
          memcpy(first + count * 4 * per, b.x, bytes);
          memcpy(lab[count], b.labels, sizeof lab[count]);
        } else {
          assert_memory_equal(b.x, first + count * 4 * per, bytes);
          assert_memory_equal(b.labels, lab[count], sizeof lab[count]);
        }
        count++;
      }
      nn_batch b;
      nn_loader_next(l, &b); /* stays at the end */
      assert_int_equal(b.n, 0);
      nn_loader_destroy(l);
      assert_int_equal(count, 34);
      if (count0 < 0) count0 = count;
      o.epochs = 0;
      o.epoch = 3;
      o.step = 1;
      check_stream(&d, &o, 6);
      /* destroyed while its threads wait for free slots */
      assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
      nn_loader_next(l, &b);
      usleep(1000);
      nn_loader_destroy(l);
    }
  free(first);
  nn_loader_opts bad = {.batch = 4, .world = 1, .prefetch = 1, .workers = NN_LOADER_MAX_WORKERS + 1};
  nn_loader *l;
  char err[256];
  assert_int_equal(nn_loader_create(&l, &d, &bad, err, sizeof err), -1);
  bad.workers = -2;
  assert_int_equal(nn_loader_create(&l, &d, &bad, err, sizeof err), -1);
  nn_data_free(&d);
}

static void test_eval_pass_and_bad_options(void **state) {
  (void)state;
  nn_dataset d = random_dataset(10, 1, 3, 3);
  nn_loader_opts o = {.batch = 4, .world = 1, .epochs = 1, .prefetch = 2};
  nn_loader *l;
  char err[256];
  assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
  int sizes[3];
  for (int b = 0; b < 3; b++) {
    nn_batch bt;
    nn_loader_next(l, &bt);
    sizes[b] = bt.n;
    for (int k = 0; k < bt.n; k++) assert_int_equal(bt.labels[k], d.labels[b * 4 + k]);
  }
  assert_int_equal(sizes[0], 4);
  assert_int_equal(sizes[2], 2);
  for (int again = 0; again < 2; again++) {
    nn_batch bt;
    nn_loader_next(l, &bt);
    assert_int_equal(bt.n, 0);
  }
  nn_loader_destroy(l);

  /* a loader destroyed while its thread waits for room */
  o.epochs = 0;
  assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
  nn_loader_destroy(l);

  nn_loader_opts bad[] = {
      {.batch = 0, .world = 1, .prefetch = 1},
      {.batch = 4, .world = 1, .rank = 1, .prefetch = 1},
      {.batch = 4, .world = 1, .prefetch = 0},
      {.batch = 11, .world = 1, .drop_last = 1, .prefetch = 1}, /* no whole batch */
      {.batch = 4, .world = 1, .step = 3, .prefetch = 1},      /* past the epoch */
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    assert_int_equal(nn_loader_create(&l, &d, &bad[i], err, sizeof err), -1);
    assert_non_null(strstr(err, "loader"));
  }
  nn_data_free(&d);
}

/* Batches in the caller's memory, and a look at the next batch that neither waits nor takes it. */
typedef struct {
  int allocs, frees;
  size_t bytes;
} host_count;

static void *count_alloc(void *ctx, size_t bytes) {
  host_count *c = ctx;
  c->allocs++;
  c->bytes = bytes;
  return malloc(bytes);
}

static void count_free(void *ctx, void *p) {
  ((host_count *)ctx)->frees++;
  free(p);
}

static void test_host_memory_and_peek(void **state) {
  (void)state;
  nn_dataset d = random_dataset(10, 1, 3, 3);
  host_count hc = {0};
  nn_loader_opts o = {.batch = 4, .world = 1, .epochs = 1, .prefetch = 2, .host_alloc = count_alloc,
                      .host_free = count_free, .host_ctx = &hc};
  nn_loader *l;
  char err[256];
  assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), 0);
  assert_int_equal(hc.allocs, 3); /* prefetch + the one held */
  assert_int_equal(hc.bytes, 4 * 9 * sizeof(float));
  nn_batch peeked = {0}, got;
  for (int b = 0; b < 3; b++) {
    if (b > 0) assert_true(peeked.n > 0); /* the step before saw this batch */
    nn_loader_next(l, &got);
    assert_int_equal(got.step, b);
    if (b > 0) {
      assert_ptr_equal(peeked.x, got.x);
      assert_int_equal(peeked.step, got.step);
      assert_int_equal(peeked.n, got.n);
    }
    for (int k = 0; k < got.n; k++) assert_int_equal(got.labels[k], d.labels[b * 4 + k]);
    /* the loader thread has room for the next batch; wait for it (a second at most) */
    memset(&peeked, 0, sizeof peeked);
    for (int t = 0; t < 1000 && b < 2 && !nn_loader_peek(l, &peeked); t++) usleep(1000);
    if (b < 2) assert_int_equal(peeked.step, b + 1);
    nn_batch again;
    if (b < 2) { /* peeking does not take it */
      assert_int_equal(nn_loader_peek(l, &again), 1);
      assert_ptr_equal(again.x, peeked.x);
    }
  }
  nn_batch end;
  for (int t = 0; t < 50; t++) assert_int_equal(nn_loader_peek(l, &end), 0); /* no more */
  nn_loader_next(l, &end);
  assert_int_equal(end.n, 0);
  nn_loader_destroy(l);
  assert_int_equal(hc.frees, 3);

  o.host_free = NULL; /* one without the other */
  assert_int_equal(nn_loader_create(&l, &d, &o, err, sizeof err), -1);
  nn_data_free(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_perm),
      cmocka_unit_test(test_aug_draws),
      cmocka_unit_test(test_stream_matches_reference),
      cmocka_unit_test(test_shards),
      cmocka_unit_test(test_resume_and_prefetch),
      cmocka_unit_test(test_eval_pass_and_bad_options),
      cmocka_unit_test(test_host_memory_and_peek),
      cmocka_unit_test(test_workers_same_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
