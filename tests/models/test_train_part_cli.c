/* `fabench train --mode partitioned` end to end: a small fully connected network on synthetic data,
 * two ranks, a few steps, writes its three rows (partitioned, conventional, data-parallel) with the
 * bytes each moved; refused inputs exit 2 with one clear line; an mlp model trains in the default
 * data-parallel mode too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "test_util.h"

static char dir[256];
static const char *bin;

#include "train_cli.h"

/* The CSV's rows as arrays of fields (quoted fields kept whole, quotes dropped). */
typedef struct {
  char head[64][96], f[8][64][96];
  int ncols, nrows;
} csv_t;

static int split(char *line, char fields[][96], int cap) {
  int k = 0, q = 0;
  size_t at = 0;
  for (char *c = line;; c++) {
    if (*c == '"') {
      q = !q;
      continue;
    }
    if ((*c == ',' && !q) || !*c || *c == '\n') {
      if (k < cap) fields[k][at < 95 ? at : 95] = 0;
      k++;
      at = 0;
      if (!*c || *c == '\n') break;
      continue;
    }
    if (k < cap && at < 95) fields[k][at] = *c;
    at++;
  }
  return k;
}

static void csv_read(csv_t *c, const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("no %s", path);
  char line[8192], tmp[64][96];
  memset(c, 0, sizeof *c);
  if (!fgets(line, sizeof line, f)) fail_msg("%s is empty", path);
  c->ncols = split(line, tmp, 64);
  for (int i = 0; i < c->ncols && i < 64; i++) memcpy(c->head[i], tmp[i], sizeof c->head[i]);
  while (c->nrows < 8 && fgets(line, sizeof line, f)) split(line, c->f[c->nrows++], 64);
  fclose(f);
}

static const char *col(const csv_t *c, int row, const char *name) {
  for (int i = 0; i < c->ncols; i++)
    if (!strcmp(c->head[i], name)) return c->f[row][i];
  fail_msg("no column %s", name);
  return NULL;
}

static double num(const csv_t *c, int row, const char *name) { return atof(col(c, row, name)); }

static void test_rows(void **state) {
  (void)state;
  char out[65536], path[512];
  /* 6x6 images, widths 36-24-16-12-4: cut after layer 2, at 16 wide; 3 steps of 16, 64 test images */
  expect(train(out, sizeof out, "--mode partitioned --parts 2 -n 2 --model mlp:36,24,16,12,4 "
                                "--data synthetic:1x6x6:4:128 --batch 16 --steps 3 --threads 1 "
                                "--recovery-epochs 1 --out rows"),
         out, 0, "data-parallel");
  snprintf(path, sizeof path, "%s/rows/train_partition.csv", dir);
  csv_t c;
  csv_read(&c, path);
  assert_int_equal(c.nrows, 3);
  assert_string_equal(col(&c, 0, "mode"), "partitioned");
  assert_string_equal(col(&c, 1, "mode"), "conventional");
  assert_string_equal(col(&c, 2, "mode"), "data-parallel");
  assert_string_equal(col(&c, 0, "model"), "mlp:36,24,16,12,4");
  assert_int_equal(num(&c, 0, "cut_layer"), 2);
  assert_int_equal(num(&c, 0, "cut_width"), 16);
  size_t params = 36 * 24 + 24 + 24 * 16 + 16 + 16 * 12 + 12 + 12 * 4 + 4;
  assert_int_equal(num(&c, 0, "params"), params);
  /* the parts exchange nothing while they train; the test set's cut activations cross once:
     its images x the width x 4 bytes */
  int64_t test_images = (int64_t)num(&c, 0, "infer_fabric_bytes") / (16 * 4);
  assert_true(test_images > 0);
  assert_int_equal(num(&c, 0, "infer_fabric_bytes"), test_images * 16 * 4);
  assert_int_equal(num(&c, 0, "fabric_bytes_per_epoch"), 0);
  /* recovery: the right part's weights to rank 0 (layers 2 and 3) */
  assert_int_equal(num(&c, 0, "recovery_fabric_bytes"), (16 * 12 + 12 + 12 * 4 + 4) * 4);
  assert_int_equal(num(&c, 1, "fabric_bytes_per_epoch"), 0);
  assert_int_equal(num(&c, 1, "infer_fabric_bytes"), 0);
  /* data-parallel: the gradient twice a step (2 (N-1) x bytes), 128 / (2 x 16) = 4 steps an epoch */
  assert_int_equal(num(&c, 2, "fabric_bytes_per_epoch"), 2 * params * 4 * 4);
  for (int r = 0; r < 3; r++) {
    double acc = num(&c, r, "test_acc"), e = num(&c, r, "epoch_s");
    assert_true(acc >= 0 && acc <= 1);
    assert_true(e > 0);
    assert_true(num(&c, r, "peak_rss_max_bytes") > 1e6);
    assert_true(num(&c, r, "peak_rss_max_bytes") >= num(&c, r, "peak_rss_rank1_bytes"));
    assert_int_equal(num(&c, r, "ranks"), r == 1 ? 1 : 2);
  }
  double before = num(&c, 0, "test_acc_before_recovery");
  assert_true(before >= 0 && before <= 1);
  assert_string_equal(col(&c, 1, "test_acc_before_recovery"), "");

  /* --no-compare: the partitioned row alone; no recovery: its accuracy is the parts' */
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:36,24,16,12,4 --data synthetic:1x6x6:4:128 "
                                "--batch 16 --steps 2 --threads 1 --no-compare --out alone"),
         out, 0, "partitioned");
  snprintf(path, sizeof path, "%s/alone/train_partition.csv", dir);
  csv_read(&c, path);
  assert_int_equal(c.nrows, 1);
  assert_string_equal(col(&c, 0, "test_acc"), col(&c, 0, "test_acc_before_recovery"));
  assert_int_equal(num(&c, 0, "recovery_fabric_bytes"), 0);
}

/* An mlp is an ordinary model too: data-parallel as the ResNets train. */
static void test_mlp_data_parallel(void **state) {
  (void)state;
  char out[65536], path[512];
  expect(train(out, sizeof out, "-n 2 --transport tcp --model mlp:36,24,16,12,4 --data synthetic:1x6x6:4:128 "
                                "--batch 16 --steps 3 --threads 1 --no-single --out dp"),
         out, 0, "train:");
  snprintf(path, sizeof path, "%s/dp/train.csv", dir);
  csv_t c;
  csv_read(&c, path);
  assert_true(c.nrows >= 1);
  expect(train(out, sizeof out, "--mode conventional --model fc6 --data synthetic:1x6x6:4:64 --batch 16 "
                                "--steps 2 --threads 1 --out conv"),
         out, 0, "train:");
}

static void test_refused(void **state) {
  (void)state;
  char out[65536];
  const char *d = "--data synthetic:1x6x6:4:128 --batch 16 --steps 2 --threads 1";
  expect(train(out, sizeof out, "--mode partitioned --parts 3 -n 3 --model fc6 %s", d), out, 2,
         "--parts 3: partitioned training cuts a network into 2 parts");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model resnet20 %s", d), out, 2,
         "--mode partitioned cuts a fully connected network, not 'resnet20'");
  expect(train(out, sizeof out, "--mode partitioned -n 3 --model fc6 %s", d), out, 2, "-n 2, not -n 3");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:36,0,4 %s", d), out, 2,
         "bad model 'mlp:36,0,4'");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:36,x,4 %s", d), out, 2, "bad model");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:36 %s", d), out, 2,
         "an input width and an output width");
  /* widths against the data: said once, by rank 0 */
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:30,8,4 %s", d), out, 2,
         "takes 30 inputs, the data's images have 1x6x6 = 36");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model mlp:36,4 %s", d), out, 2, "nothing to cut");
  expect(train(out, sizeof out, "--model resnet20 --parts 2 %s", d), out, 2, "belong to --mode partitioned");
  expect(train(out, sizeof out, "--mode conventional -n 2 --model fc6 %s", d), out, 2, "leave out -n 2");
  expect(train(out, sizeof out, "--mode sideways %s", d), out, 2, "bad --mode 'sideways'");
  expect(train(out, sizeof out, "--mode partitioned -n 2 --model fc6 --device cuda %s", d), out, 2,
         "trains on the CPU");
}

static int setup(void **state) {
  (void)state;
  return train_cli_setup("test-train-part");
}

int main(void) {
  if (!train_cli_have_bin()) return 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rows),
      cmocka_unit_test(test_mlp_data_parallel),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, setup, train_cli_teardown);
}
