/* `fabench train` sweeps end to end, on synthetic data and a tiny ResNet: the product of the
 * lists in its documented order (the first list slowest), a row each in train.csv and
 * train_epochs.csv recording every setting; --resume DIR adds only the missing rows; loader
 * workers change no number; the files' read rate, cold or warm; --device cpu,cuda; refused lists
 * exit 2 with one line. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "res.h"
#include "test_util.h"

static char dir[256];
static const char *bin;
static const char *tiny = "--model resnet8-w4 --data synthetic:1x8x8:4:64 --steps 2 --warmup-steps 1 --threads 1";

#include "train_cli.h"

/* A record's rows of run directory sub, read as fabench's own reader reads them. */
static void rows_of(res_rows *r, const res_schema *s, const char *sub) {
  char p[512], err[512];
  snprintf(p, sizeof p, "%s/%s", dir, sub);
  memset(r, 0, sizeof *r);
  if (res_table_read(r, s, p, err, sizeof err)) fail_msg("%s", err);
}

static void test_product_order(void **state) {
  (void)state;
  char out[65536];
  expect(train(out, sizeof out, "%s --batch 8,16 --lr 0.1,0.2 --optimizer sgd,adamw --out s1", tiny), out, 0,
         "setting 8 of 8");
  res_rows t, e;
  rows_of(&t, res_schema_train(), "s1");
  rows_of(&e, res_schema_train_epochs(), "s1");
  assert_int_equal(t.n, 8);
  assert_int_equal(e.n, 8); /* one evaluation each, at the end of its steps */
  const res_train_row *r = t.rows;
  const res_train_epochs_row *q = e.rows;
  for (int k = 0; k < 8; k++) {
    /* batch changes slowest, the optimizer fastest */
    long batch = k < 4 ? 8 : 16;
    double lr = (k / 2) % 2 ? 0.2 : 0.1;
    const char *opt = k % 2 ? "adamw" : "sgd";
    assert_int_equal(r[k].setting, k);
    assert_int_equal(r[k].batch, batch);
    assert_true(fabs(r[k].lr - lr) < 1e-12);
    assert_string_equal(r[k].optimizer, opt);
    assert_int_equal(r[k].threads, 1);
    assert_int_equal(r[k].loader_workers, 1);
    assert_int_equal(r[k].epochs, 1);
    assert_string_equal(r[k].status, "done");
    assert_true(r[k].images_per_s > 0 && isfinite(r[k].final_loss) && r[k].data_wait_ms >= 0);
    assert_string_equal(r[k].cache, "-"); /* synthetic: no files */
    assert_int_equal(q[k].setting, k);
    assert_int_equal(q[k].batch, batch);
    assert_string_equal(q[k].optimizer, opt);
    assert_true(fabs(q[k].test_acc - r[k].test_acc) < 1e-12);
    assert_true(fabs(q[k].epoch - 2.0 / (64.0 / (double)batch)) < 1e-12); /* 2 steps of 64 / batch an epoch */
  }
  /* the same batch and lr, sgd against adamw: another optimizer, another model */
  assert_true(r[0].final_loss != r[1].final_loss);
  res_rows_free(&t);
  res_rows_free(&e);
}

static void test_resume_skips_done(void **state) {
  (void)state;
  char out[65536];
  expect(train(out, sizeof out, "%s --batch 8,16 --out s2", tiny), out, 0, "train:");
  res_rows a, b;
  rows_of(&a, res_schema_train(), "s2");
  assert_int_equal(a.n, 2);
  expect(train(out, sizeof out, "%s --batch 8,16,32 --resume s2", tiny), out, 0, "setting 3 of 3");
  const char *said = strstr(out, "not trained again");
  assert_non_null(said);
  assert_non_null(strstr(said + 1, "not trained again"));
  assert_null(strstr(strstr(said + 1, "not trained again") + 1, "not trained again"));
  rows_of(&b, res_schema_train(), "s2");
  assert_int_equal(b.n, 3);
  const res_train_row *x = a.rows, *y = b.rows;
  for (int k = 0; k < 2; k++) { /* the rows there stay as measured */
    assert_int_equal(y[k].batch, x[k].batch);
    assert_true(y[k].images_per_s == x[k].images_per_s);
  }
  assert_int_equal(y[2].batch, 32);
  assert_int_equal(y[2].setting, 2);
  assert_string_equal(y[2].run_id, y[0].run_id); /* one run */
  /* all done: nothing trained, every row still there */
  expect(train(out, sizeof out, "%s --batch 8,16,32 --resume s2", tiny), out, 0, "train:");
  res_rows_free(&b);
  rows_of(&b, res_schema_train(), "s2");
  assert_int_equal(b.n, 3);
  /* another --out than the directory resumed: refused */
  expect(train(out, sizeof out, "%s --resume s2 --out s3", tiny), out, 2, "give no other --out");
  res_rows_free(&a);
  res_rows_free(&b);
}

/* No loader thread, one or two: the same batches, so the same losses and accuracy. */
static void test_loader_workers_same_numbers(void **state) {
  (void)state;
  char out[65536];
  expect(train(out, sizeof out, "%s --steps 5 --batch 8 --loader-workers 0,1,2 --data synthetic:3x8x8:4:64 --out s4", tiny),
         out, 0, "train:");
  res_rows t;
  rows_of(&t, res_schema_train(), "s4");
  assert_int_equal(t.n, 3);
  const res_train_row *r = t.rows;
  for (int k = 0; k < 3; k++) {
    assert_int_equal(r[k].loader_workers, k);
    assert_true(r[k].final_loss == r[0].final_loss);
    assert_true(r[k].test_loss == r[0].test_loss);
  }
  res_rows_free(&t);
}

/* A Fashion-MNIST look-alike of plain IDX files in sub: n training and n test images of 8 x 8. */
static void make_idx(const char *sub, int n) {
  char d[512], p[600];
  snprintf(d, sizeof d, "%s/%s", dir, sub);
  assert_int_equal(mkdir(d, 0755), 0);
  const char *names[2][2] = {{"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
                             {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
  for (int split = 0; split < 2; split++) {
    unsigned char head[16] = {0, 0, 8, 3, 0, 0, (unsigned char)(n >> 8), (unsigned char)n, 0, 0, 0, 8, 0, 0, 0, 8};
    snprintf(p, sizeof p, "%s/%s", d, names[split][0]);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(head, 1, 16, f);
    for (int i = 0; i < n * 64; i++) fputc((i * 7 + split) & 255, f);
    fclose(f);
    unsigned char lh[8] = {0, 0, 8, 1, 0, 0, (unsigned char)(n >> 8), (unsigned char)n};
    snprintf(p, sizeof p, "%s/%s", d, names[split][1]);
    f = fopen(p, "wb");
    assert_non_null(f);
    fwrite(lh, 1, 8, f);
    for (int i = 0; i < n; i++) fputc(i % 10, f);
    fclose(f);
  }
}

/* The files' read rate and the cache they were read from, per row. */
static void test_cold_cache(void **state) {
  (void)state;
  char out[65536];
  make_idx("fm", 64);
  expect(train(out, sizeof out, "--model resnet8-w4 --data fmnist:fm --batch 16 --steps 2 --warmup-steps 1 "
                                "--threads 1 --cold-cache --out s6"),
         out, 0, "train:");
  expect(train(out, sizeof out, "--model resnet8-w4 --data fmnist:fm --batch 16 --steps 2 --warmup-steps 1 "
                                "--threads 1 --out s7"),
         out, 0, "train:");
  res_rows c, w;
  rows_of(&c, res_schema_train(), "s6");
  rows_of(&w, res_schema_train(), "s7");
  const res_train_row *rc = c.rows, *rw = w.rows;
  assert_string_equal(rc[0].cache, "cold");
  assert_string_equal(rw[0].cache, "warm");
  for (int k = 0; k < 2; k++) {
    const res_train_row *r = k ? rw : rc;
    assert_true(r->loader_mb_s > 0 && isfinite(r->loader_mb_s));
    assert_true(r->loader_images_s > 0 && isfinite(r->loader_images_s));
    /* 128 images of 64 bytes, labels and headers, over the same time as the images */
    double bytes = 2 * (16 + 64 * 64 + 8 + 64);
    assert_true(fabs(r->loader_mb_s * 1e6 / r->loader_images_s - bytes / 128) < 1e-6 * bytes);
  }
  res_rows_free(&c);
  res_rows_free(&w);
}

/* --device cpu,cuda in a sweep: on each setting every device, Adam and AdamW on the GPU too. Without
 * a GPU the run says so in one line, exit status 3, before any setting trains (no row, where the
 * CPU's rows would otherwise stand beside a failure); with one, a row per setting and device. */
static void test_device_list(void **state) {
  (void)state;
  char out[65536], p[512];
  int rc = train(out, sizeof out, "%s --optimizer sgd,adamw --device cpu,cuda --out s8", tiny);
  snprintf(p, sizeof p, "%s/s8", dir);
  if (rc != 0) {
    expect(rc, out, 3, "CUDA");
    assert_null(strstr(out, "train:"));
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    if (lines != 1) fail_msg("%d lines:\n%s", lines, out);
    assert_false(res_table_exists(res_schema_train(), p));
    print_message("[  SKIPPED ] the cuda rows: no CUDA device here (refused as it should be)\n");
    return;
  }
  res_rows t;
  rows_of(&t, res_schema_train(), "s8");
  assert_int_equal(t.n, 4);
  const res_train_row *r = t.rows;
  for (int k = 0; k < 4; k++) { /* the optimizer slowest, then the device */
    assert_string_equal(r[k].optimizer, k < 2 ? "sgd" : "adamw");
    assert_string_equal(r[k].device, k % 2 ? "cuda" : "cpu");
    assert_string_equal(r[k].status, "done");
    assert_true(isfinite(r[k].final_loss) && r[k].images_per_s > 0);
  }
  assert_true(r[1].final_loss != r[3].final_loss); /* adamw on the GPU is not sgd */
  res_rows_free(&t);
}

static void test_refused(void **state) {
  (void)state;
  char out[65536];
  expect(train(out, sizeof out, "%s --batch 8,,16", tiny), out, 2, "bad --batch '8,,16'");
  expect(train(out, sizeof out, "%s --lr 0.1,", tiny), out, 2, "bad --lr '0.1,'");
  expect(train(out, sizeof out, "%s --optimizer adagrad", tiny), out, 2, "bad --optimizer 'adagrad'");
  expect(train(out, sizeof out, "%s --optimizer sgd,Adam", tiny), out, 2, "bad --optimizer 'Adam'");
  expect(train(out, sizeof out, "%s --batch 8,16,8", tiny), out, 2, "'8' twice");
  expect(train(out, sizeof out, "%s --loader-workers 65", tiny), out, 2, "bad value '65' for --loader-workers");
  expect(train(out, sizeof out, "%s --epochs 1,0", tiny), out, 2, "bad value '0' for --epochs");
  expect(train(out, sizeof out,
               "%s --batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 --lr 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16 "
               "--loader-workers 0,1", tiny),
         out, 2, "make 512 settings; at most 256");
  expect(train(out, sizeof out, "%s --batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", tiny), out, 2,
         "1 to 16 values");
  expect(train(out, sizeof out, "%s --batch 8,16 --save s5.ckpt", tiny), out, 2, "(this run has 2 settings)");
  expect(train(out, sizeof out, "%s --optimizer adam --save s5.ckpt", tiny), out, 2, "SGD's state only");
  expect(train(out, sizeof out, "%s --beta1 1", tiny), out, 2, "bad value '1' for --beta1");
}

static int setup(void **state) {
  (void)state;
  return train_cli_setup("test-sweep");
}

int main(void) {
  if (!train_cli_have_bin()) return 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused),
      cmocka_unit_test(test_product_order),
      cmocka_unit_test(test_resume_skips_done),
      cmocka_unit_test(test_loader_workers_same_numbers),
      cmocka_unit_test(test_cold_cache),
      cmocka_unit_test(test_device_list),
  };
  return cmocka_run_group_tests(tests, setup, train_cli_teardown);
}
