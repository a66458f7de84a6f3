/* `fabench train` end to end: bad flags and files give one clear line and the documented exit
 * status; a tiny run writes its files; a run interrupted by a checkpoint and resumed ends
 * bit-identical to an uninterrupted one; damaged or mismatched checkpoints are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "nn_data.h"
#include "test_util.h"

static char dir[256];
static const char *bin;

#include "train_cli.h"

/* Field `col` of data row `row` (0-based) of a CSV written by fabench (no quoting in ours). */
static int csv_get(char *val, size_t cap, const char *path, int row, const char *col) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[8192];
  int idx = -1, r = -1, found = -1;
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = 0;
    int k = 0; /* fields split at every comma: empty ones (not measured) count */
    for (char *t = line, *c; t; t = c ? c + 1 : NULL, k++) {
      if ((c = strchr(t, ','))) *c = 0;
      if (r == -1 && !strcmp(t, col)) idx = k;
      if (r == row && k == idx) {
        size_t len = strlen(t) < cap - 1 ? strlen(t) : cap - 1;
        memcpy(val, t, len);
        val[len] = 0;
        found = 0;
      }
    }
    if (r == row || (r == -1 && idx < 0)) break;
    r++;
  }
  fclose(f);
  return found;
}

static int csv_rows(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int n = -1, c;
  while ((c = fgetc(f)) != EOF) n += c == '\n';
  fclose(f);
  return n;
}

static double csv_num(const char *path, int row, const char *col) {
  char v[256];
  if (csv_get(v, sizeof v, path, row, col) != 0) fail_msg("%s: no %s in row %d", path, col, row);
  return strtod(v, NULL);
}

static void write_gz(const char *path, const uint8_t *p, size_t n) {
  gzFile f = gzopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(gzwrite(f, p, (unsigned)n), (int)n);
  gzclose(f);
}

/* A small Fashion-MNIST look-alike: n images of s x s whose class sets their brightness. */
static void make_fmnist(const char *sub, int ntrain, int ntest, int s, uint32_t img_magic) {
  char d[512], p[600];
  snprintf(d, sizeof d, "%s/%s", dir, sub);
  mkdir(d, 0755);
  const char *names[2][2] = {{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"},
                             {"t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"}};
  uint32_t seed = 7;
  for (int split = 0; split < 2; split++) {
    int n = split ? ntest : ntrain;
    size_t ib = 16 + (size_t)n * s * s;
    uint8_t *img = malloc(ib), *lab = malloc(8 + (size_t)n);
    const uint32_t hdr[4] = {img_magic, (uint32_t)n, (uint32_t)s, (uint32_t)s};
    for (int k = 0; k < 4; k++)
      for (int b = 0; b < 4; b++) img[4 * k + b] = (uint8_t)(hdr[k] >> (24 - 8 * b));
    const uint32_t lh[2] = {0x801, (uint32_t)n};
    for (int k = 0; k < 2; k++)
      for (int b = 0; b < 4; b++) lab[4 * k + b] = (uint8_t)(lh[k] >> (24 - 8 * b));
    for (int i = 0; i < n; i++) {
      seed = seed * 1103515245u + 12345u;
      int cls = (int)((seed >> 16) % 10);
      lab[8 + i] = (uint8_t)cls;
      for (int k = 0; k < s * s; k++) {
        seed = seed * 1103515245u + 12345u;
        img[16 + (size_t)i * s * s + k] = (uint8_t)(20 * cls + ((seed >> 16) & 31));
      }
    }
    snprintf(p, sizeof p, "%s/%s", d, names[split][0]);
    write_gz(p, img, ib);
    snprintf(p, sizeof p, "%s/%s", d, names[split][1]);
    write_gz(p, lab, 8 + (size_t)n);
    free(img);
    free(lab);
  }
}

static int exists(const char *rel) {
  char p[600];
  snprintf(p, sizeof p, "%s/%s", dir, rel);
  struct stat st;
  return stat(p, &st) == 0;
}

static void test_bad_flags(void **state) {
  (void)state;
  char out[16384];
  const struct {
    const char *args, *msg;
  } cases[] = {
      {"--batch 0", "--batch"},
      {"--batch=x", "--batch"},
      {"--epochs -1", "--epochs"},
      {"--lr abc", "--lr"},
      {"--momentum 2", "--momentum"},
      {"--threads 0", "--threads"},
      {"--lr-schedule linear", "--lr-schedule"},
      {"--lr-schedule step --lr-milestones 1,x --data synthetic:1x8x8:3:16", "--lr-milestones"},
      {"--data imagenet", "--data"},
      {"--data synthetic:1x8", "--data"},
      {"--model vgg16", "--model"},
      {"--frobnicate", "unknown option '--frobnicate'"},
      {"--save", "needs a value"},
      {"stray", "unexpected argument"},
      {"--seed -3", "--seed"},
      {"--target-acc 1.5", "--target-acc"},
      {"--target-acc 0.5 --eval-every 0", "--eval-every"}, /* a target never evaluated */
      /* more pairs than a run holds: refused, not cut short (65 pairs crashed rank 0) */
      {"-n 2 --transport tcp,tcp,tcp,tcp,none --algo ring,rhd,rd,tree,dtree,ps,ps:2,ps:3,ps:4,ps:5,"
       "ps:6,ps:7,ps:8,ps:9,ps:10,ps:11", "more than 64 pairs"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc = train(out, sizeof out, "--out badflags %s", cases[i].args);
    expect(rc, out, 2, cases[i].msg);
    expect(rc, out, 2, "usage: fabench train");
    assert_false(exists("badflags")); /* nothing written for a refused command */
  }
  /* a depth no ResNet has: refused with the flags, naming the depths there are (it passed the
   * spelling check and failed after the setup, exit 1) */
  const char *r7[] = {"", "-n 2 "};
  for (size_t i = 0; i < sizeof r7 / sizeof *r7; i++) {
    int rc = train(out, sizeof out, "--out badflags %s--model resnet7 --data synthetic:1x8x8:3:16", r7[i]);
    expect(rc, out, 2, "bad --model: unknown model 'resnet7': no ResNet has depth 7");
    expect(rc, out, 2, "D is 18|34|50|101|152 (torchvision) or any 6n+2 from 8 to 1202, e.g. 20|32|56|110");
    expect(rc, out, 2, "usage: fabench train");
    assert_false(exists("badflags"));
  }
  assert_int_equal(train(out, sizeof out, "--help"), 0);
  assert_non_null(strstr(out, "--target-acc"));
}

/* Without a CUDA device, a GPU run says so in one line and exit status 3 before anything trains:
 * --device cpu,cuda used to train the CPU's row first and fail after it, and with -n every rank
 * said it (and nccl's absence was exit status 1). */
static void test_no_device_first(void **state) {
  (void)state;
  const char *runs[] = {"--device cpu,cuda", "-n 2 --device cuda --transport tcp", "-n 2 --transport none,nccl"};
  for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
    char out[16384];
    int rc = train(out, sizeof out, "--out nodev %s --data synthetic:1x8x8:3:32 --model resnet20-w4 --batch 8 "
                   "--steps 2 --eval-every 0 --threads 1", runs[i]);
    if (rc == 0) {
      print_message("[  SKIPPED ] a CUDA device is present\n");
      return;
    }
    expect(rc, out, 3, "CUDA");
    assert_null(strstr(out, "train:")); /* nothing trained, no header */
    int lines = 0;
    for (const char *c = out; *c; c++) lines += *c == '\n';
    if (lines != 1) fail_msg("%s: %d lines:\n%s", runs[i], lines, out);
  }
}

static void test_bad_files(void **state) {
  (void)state;
  char out[16384];
  const char *small = "--model resnet8-w2 --batch 4 --threads 1 --steps 2 --out badfiles";
  expect(train(out, sizeof out, "--data fmnist:%s/none %s", dir, small), out, 1, "cannot open");
  make_fmnist("magic", 20, 8, 8, 0x802);
  expect(train(out, sizeof out, "--data fmnist:%s/magic %s", dir, small), out, 1, "wrong magic");
  /* a truncated image file: a gzip whose content stops half-way */
  make_fmnist("trunc", 20, 8, 8, 0x803);
  char p[600];
  snprintf(p, sizeof p, "%s/trunc/train-images-idx3-ubyte.gz", dir);
  uint8_t hdr[16 + 100] = {0, 0, 8, 3, 0, 0, 0, 20, 0, 0, 0, 8, 0, 0, 0, 8};
  write_gz(p, hdr, sizeof hdr);
  expect(train(out, sizeof out, "--data fmnist:%s/trunc %s", dir, small), out, 1, "truncated");
  /* splits of different image sizes */
  make_fmnist("shape", 20, 8, 8, 0x803);
  make_fmnist("shape9", 20, 8, 9, 0x803);
  char q[600];
  snprintf(p, sizeof p, "%s/shape9/t10k-images-idx3-ubyte.gz", dir);
  snprintf(q, sizeof q, "%s/shape/t10k-images-idx3-ubyte.gz", dir);
  rename(p, q);
  snprintf(p, sizeof p, "%s/shape9/t10k-labels-idx1-ubyte.gz", dir);
  snprintf(q, sizeof q, "%s/shape/t10k-labels-idx1-ubyte.gz", dir);
  rename(p, q);
  expect(train(out, sizeof out, "--data fmnist:%s/shape %s", dir, small), out, 1,
         "inconsistent shapes");
  /* fewer images than one batch */
  expect(train(out, sizeof out, "--data synthetic:1x8x8:3:3 %s", small), out, 1, "less than one batch");
  assert_false(exists("badfiles"));
}

static void test_tiny_run(void **state) {
  (void)state;
  char out[65536], csv[600], v[256];
  int rc = train(out, sizeof out,
                 "--model resnet8-w2 --data synthetic:1x8x8:3:64 --batch 8 --epochs 4 --threads 1"
                 " --warmup-steps 2 --lr 0.05 --eval-every 2 --target-acc 0.01 --no-stop-at-target"
                 " --out tiny");
  expect(rc, out, 0, "test acc");
  assert_non_null(strstr(out, "step       1"));
  /* each evaluation says its step (a mid-epoch end's had its last epoch's count) */
  assert_non_null(strstr(out, "epoch 2  step 16  test loss"));
  assert_non_null(strstr(out, "epoch 4  step 32  test loss"));
  snprintf(csv, sizeof csv, "%s/tiny/train.csv", dir);
  assert_int_equal(csv_rows(csv), 1);
  assert_int_equal((int)csv_num(csv, 0, "steps"), 32);
  assert_int_equal((int)csv_num(csv, 0, "measured_steps"), 30);
  assert_int_equal((int)csv_num(csv, 0, "batch"), 8);
  assert_int_equal((int)csv_num(csv, 0, "threads"), 1);
  assert_true(csv_num(csv, 0, "images_per_s") > 0);
  double step = csv_num(csv, 0, "step_ms_mean"), parts = csv_num(csv, 0, "data_ms") +
                csv_num(csv, 0, "fwd_ms") + csv_num(csv, 0, "bwd_ms") + csv_num(csv, 0, "opt_ms");
  assert_true(parts <= step * 1.0001 && parts > 0.5 * step); /* the parts are the step's */
  double acc = csv_num(csv, 0, "test_acc");
  assert_true(acc >= 0 && acc <= 1);
  assert_true(csv_num(csv, 0, "time_to_target_s") >= 0);
  assert_int_equal(csv_get(v, sizeof v, csv, 0, "model"), 0);
  assert_string_equal(v, "resnet8-w2");
  assert_int_equal(csv_get(v, sizeof v, csv, 0, "backend"), 0);
  assert_non_null(strstr(v, "oneDNN"));
  assert_int_equal(csv_get(v, sizeof v, csv, 0, "host"), 0);
  assert_true(strlen(v) > 0);
  snprintf(csv, sizeof csv, "%s/tiny/train_eval.csv", dir);
  assert_int_equal(csv_rows(csv), 2); /* epochs 2 and 4 */
  snprintf(csv, sizeof csv, "%s/tiny/train_steps.csv", dir);
  assert_int_equal(csv_rows(csv), 32);
  assert_int_equal((int)csv_num(csv, 0, "warmup"), 1);
  assert_int_equal((int)csv_num(csv, 2, "warmup"), 0);
  assert_int_equal((int)csv_num(csv, 8, "epoch"), 1);
  assert_int_equal((int)csv_num(csv, 8, "step_in_epoch"), 0);
  /* cosine over 32 steps, no warm-up */
  assert_float_equal(csv_num(csv, 0, "lr"), 0.05, 1e-7);
  assert_float_equal(csv_num(csv, 16, "lr"), 0.025, 1e-7);
  /* it learns: the class sets the brightness */
  double first = 0, last = 0;
  for (int i = 0; i < 4; i++) {
    first += csv_num(csv, i, "loss");
    last += csv_num(csv, 28 + i, "loss");
  }
  if (!(last < 0.7 * first)) fail_msg("loss %g -> %g: not learning", first / 4, last / 4);
  char rj[600];
  snprintf(rj, sizeof rj, "%s/tiny/run.json", dir);
  FILE *f = fopen(rj, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  fclose(f);
  assert_non_null(strstr(out, "\"backend\":\t\"oneDNN"));
  assert_non_null(strstr(out, "\"params\""));
  assert_non_null(strstr(out, "\"time_to_target_s\""));
}

/* Runs that time nothing or train nothing say so: no throughput of 0 in the row, no success for
 * a run without rows, and no bucket plan cut short in the records. */
static void test_nothing_measured(void **state) {
  (void)state;
  char out[65536], csv[600], v[256];
  const char *small = "--model resnet8-w2 --data synthetic:1x8x8:3:64 --batch 8 --threads 1 --eval-every 0";
  /* every step a warm-up step (default 10) */
  int rc = train(out, sizeof out, "%s --steps 3 --out allwarm", small);
  expect(rc, out, 0, "no step timed");
  snprintf(csv, sizeof csv, "%s/allwarm/train.csv", dir);
  assert_int_equal(csv_rows(csv), 1);
  assert_int_equal((int)csv_num(csv, 0, "measured_steps"), 0);
  assert_int_equal(csv_get(v, sizeof v, csv, 0, "images_per_s"), 0);
  assert_string_equal(v, ""); /* not measured, not 0 */
  /* every pair skipped and no one-rank run */
  rc = train(out, sizeof out, "-n 2 %s --steps 2 --transport tcp --algo native --no-single --out noneleft", small);
  expect(rc, out, 1, "nothing to train");
  /* 1 KiB buckets of ResNet-20's 1 MB: more buckets than the records hold */
  rc = train(out, sizeof out, "-n 2 --model resnet20 --data synthetic:1x8x8:3:64 --batch 8 --threads 1 --eval-every 0"
             " --steps 2 --transport tcp --no-single --bucket-mb 0.001 --first-bucket-mb 0.001 --out manyb");
  expect(rc, out, 1, "raise --bucket-mb");
  /* one test image for two ranks: said before training, once, not as a loader's batch error after it */
  rc = train(out, sizeof out, "-n 2 %s --steps 2 --transport tcp --no-single --eval-every 1 --data synthetic:1x8x8:3:4"
             " --batch 2 --out tinytest", "--model resnet8-w2 --threads 1");
  expect(rc, out, 1, "1 test images for 2 ranks");
  assert_null(strstr(strstr(out, "test images") + 1, "test images"));
  assert_null(strstr(out, "step       1"));
}

/* The one-rank run's evaluation takes longer than --timeout: the waiting ranks are told rank 0
 * is alive (they timed out on it, and the run failed, before on_alive). */
static void test_single_eval_outlasts_timeout(void **state) {
  (void)state;
  char out[65536];
  /* 6000 test images of 3x16x16 through ResNet-20 on one thread: seconds, against 2, where a
   * training step (on which the heartbeat also goes) takes a fraction of a second even in a
   * sanitizer build */
  int rc = train(out, sizeof out, "-n 2 --model resnet20 --data synthetic:3x16x16:10:24000 --batch 32 --threads 1"
                 " --warmup-steps 1 --steps 2 --transport tcp --timeout 2 --out longeval");
  expect(rc, out, 0, "test acc");
  if (!strstr(out, "single")) fail_msg("no one-rank run:\n%s", out);
}

/* A one-rank training step takes longer than --timeout: the steps tell the waiting ranks rank 0 is
 * alive too, between layers (they timed out on it, and the run failed naming the healthy rank 0,
 * before). The batch is sized from a short run for a step of about 1.5 s on this machine, against 1;
 * a machine too fast for that within the largest batch allowed passes without the check. */
static void test_single_step_outlasts_timeout(void **state) {
  (void)state;
  char out[65536], csv[600];
  const char *net = "--model resnet18 --threads 1 --eval-every 0 --transport none";
  expect(train(out, sizeof out, "%s --data synthetic:3x32x32:10:128 --batch 64 --steps 2 --warmup-steps 1"
               " --out stepcal", net), out, 0, "train:");
  snprintf(csv, sizeof csv, "%s/stepcal/train_steps.csv", dir);
  double ms = csv_num(csv, 1, "step_ms"); /* the measured step */
  long batch = ms > 0 ? (long)(64 * 1500 / ms) : 384;
  batch = batch < 32 ? 32 : batch > 384 ? 384 : batch; /* 384: about 600 MB a rank */
  /* one step each: the one-rank run's (its first, with the plan built in it), then the ranks' */
  int rc = train(out, sizeof out, "-n 2 %s --data synthetic:3x32x32:10:%ld --batch %ld --steps 1 --warmup-steps 0"
                 " --timeout 1 --out longstep", net, 2 * batch, batch);
  expect(rc, out, 0, "scaling eff");
  if (!strstr(out, "single -          -        1 rank(s)")) fail_msg("no one-rank run:\n%s", out);
}

static void load_arenas(const char *path, float **p, float **m, float **b, nn_ckpt_info *info) {
  char err[1024];
  assert_int_equal(nn_ckpt_read_info(path, info, err, sizeof err), 0);
  *p = malloc(info->n_params * 4 + 4);
  *m = malloc(info->n_momentum * 4 + 4);
  *b = malloc(info->n_buffers * 4 + 4);
  nn_ckpt_info got;
  if (nn_ckpt_load(path, &got, *p, *m, *b, info, err, sizeof err) != 0) fail_msg("%s", err);
}

static void test_resume_bit_identical(void **state) {
  (void)state;
  char out[65536], a[600], b[600];
  make_fmnist("fm", 44, 12, 10, 0x803); /* 11 steps of 4 per epoch, with crop and flip */
  const char *cfg = "--model resnet8-w2 --batch 4 --epochs 3 --threads 1 --lr 0.05 --seed 9"
                    " --warmup-epochs 0.5 --eval-every 1";
  expect(train(out, sizeof out, "--data fmnist:%s/fm %s --steps 17 --save full.ckpt --out A", dir,
               cfg), out, 0, "train:");
  /* interrupted mid-epoch 0, resumed across the epoch boundary to the same step */
  expect(train(out, sizeof out, "--data fmnist:%s/fm %s --steps 7 --save part.ckpt --out B1", dir,
               cfg), out, 0, "train:");
  expect(train(out, sizeof out, "--data fmnist:%s/fm %s --steps 17 --resume part.ckpt"
               " --save resumed.ckpt --out B2", dir, cfg), out, 0, "from checkpoint");
  snprintf(a, sizeof a, "%s/full.ckpt", dir);
  snprintf(b, sizeof b, "%s/resumed.ckpt", dir);
  float *pa, *ma, *ba, *pb, *mb, *bb;
  nn_ckpt_info ia, ib;
  load_arenas(a, &pa, &ma, &ba, &ia);
  load_arenas(b, &pb, &mb, &bb, &ib);
  assert_int_equal(ia.global_step, 17);
  assert_int_equal(ib.global_step, 17);
  assert_int_equal(ib.epoch, 1);
  assert_int_equal(ib.step, 6);
  assert_memory_equal(pa, pb, ia.n_params * 4);
  assert_memory_equal(ma, mb, ia.n_momentum * 4);
  assert_memory_equal(ba, bb, ia.n_buffers * 4);
  /* and the weights did move */
  float *p0, *m0, *b0;
  nn_ckpt_info i0;
  snprintf(b, sizeof b, "%s/part.ckpt", dir);
  load_arenas(b, &p0, &m0, &b0, &i0);
  assert_memory_not_equal(p0, pa, ia.n_params * 4);
  /* the per-step losses after the resume point agree exactly */
  snprintf(a, sizeof a, "%s/A/train_steps.csv", dir);
  snprintf(b, sizeof b, "%s/B2/train_steps.csv", dir);
  assert_int_equal(csv_rows(b), 10);
  for (int i = 0; i < 10; i++) {
    char la[64], lb[64], sa[64], sb[64];
    assert_int_equal(csv_get(la, sizeof la, a, 7 + i, "loss"), 0);
    assert_int_equal(csv_get(lb, sizeof lb, b, i, "loss"), 0);
    assert_int_equal(csv_get(sa, sizeof sa, a, 7 + i, "step"), 0);
    assert_int_equal(csv_get(sb, sizeof sb, b, i, "step"), 0);
    assert_string_equal(sa, sb);
    assert_string_equal(la, lb);
  }
  free(pa), free(ma), free(ba), free(pb), free(mb), free(bb), free(p0), free(m0), free(b0);
}

static void test_bad_checkpoints(void **state) {
  (void)state;
  char out[65536], p[600];
  make_fmnist("fm2", 24, 8, 10, 0x803);
  const char *cfg = "--model resnet8-w2 --batch 4 --epochs 2 --threads 1 --eval-every 0";
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 %s --steps 3 --save good.ckpt --out C1",
               dir, cfg), out, 0, "train:");
  snprintf(p, sizeof p, "%s/good.ckpt", dir);
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(n > 600 && n < sizeof buf);

  snprintf(p, sizeof p, "%s/flip.ckpt", dir);
  buf[n / 2] ^= 1;
  f = fopen(p, "wb");
  fwrite(buf, 1, n, f);
  fclose(f);
  buf[n / 2] ^= 1;
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 %s --resume flip.ckpt --out C2", dir, cfg),
         out, 1, "corrupted");
  snprintf(p, sizeof p, "%s/cut.ckpt", dir);
  f = fopen(p, "wb");
  fwrite(buf, 1, n - 100, f);
  fclose(f);
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 %s --resume cut.ckpt --out C2", dir, cfg),
         out, 1, "truncated");
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 %s --resume %s/fm2/t10k-images-idx3-ubyte.gz"
               " --out C2", dir, cfg, dir), out, 1, "wrong magic");
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 --model resnet8-w3 --batch 4 --epochs 2"
               " --threads 1 --resume good.ckpt --out C2", dir), out, 1, "model 'resnet8-w2'");
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 --model resnet8-w2 --batch 3 --epochs 2"
               " --threads 1 --resume good.ckpt --out C2", dir), out, 1, "batch 4");
  expect(train(out, sizeof out, "--data synthetic:1x10x10:10:24 %s --resume good.ckpt --out C2",
               cfg), out, 1, "checkpoint is for data");
  expect(train(out, sizeof out, "--data fmnist:%s/fm2 %s --steps 3 --resume good.ckpt --out C2",
               dir, cfg), out, 1, "nothing left to train");
  assert_false(exists("C2"));
}

/* A transport or algorithm given twice trained the same pair twice, into rows that could not be
 * told apart: refused as a usage error, as allreduce and p2p refuse a transport twice (ps and
 * ps:1 are one server alike). */
static void test_repeated_pairs(void **state) {
  (void)state;
  char out[16384];
  const struct {
    const char *args, *msg;
  } cases[] = {
      {"--transport tcp,tcp", "transport 'tcp' given twice"},
      {"--transport none,tcp,none", "transport 'none' given twice"},
      {"--transport tcp --algo ring,ring", "algorithm 'ring' given twice"},
      {"--transport tcp --algo ps:4,rd,ps:4", "algorithm 'ps:4' given twice"},
      {"--transport tcp --algo ps,ps:1", "algorithm 'ps' given twice"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc = train(out, sizeof out, "-n 2 %s --model resnet8-w2 --data synthetic:1x8x8:4:64 --batch 8 --steps 1"
                   " --threads 1 --eval-every 0 --no-single --out repeated", cases[i].args);
    expect(rc, out, 2, cases[i].msg);
    expect(rc, out, 2, "usage: fabench train");
    assert_false(exists("repeated"));
  }
  /* different servers are different pairs */
  int rc = train(out, sizeof out, "-n 2 --transport tcp --algo ps,ps:2 --model resnet8-w2 --data synthetic:1x8x8:4:64"
                 " --batch 8 --steps 1 --threads 1 --eval-every 0 --no-single --out twops");
  expect(rc, out, 0, "train:");
  char csv[600];
  snprintf(csv, sizeof csv, "%s/twops/train.csv", dir);
  assert_int_equal(csv_rows(csv), 2);
}

/* The files only rank 0 writes are checked before anything trains: a bad --trace failed after the
 * first pair trained (and lost its row), a bad --save at the first epoch's end, with rank 1 adding
 * "Connection reset by peer". Every rank stops alike, rank 0 saying why once; an unwritable --out
 * too (rank 1 said "bootstrap exchange ... Connection reset by peer"). */
static void test_out_files_first(void **state) {
  (void)state;
  char out[65536], f[600];
  const char *small = "--model resnet8-w2 --data synthetic:1x8x8:4:64 --batch 8 --steps 4 --threads 1 --eval-every 0";
  snprintf(f, sizeof f, "%s/plainfile", dir);
  FILE *fp = fopen(f, "w");
  assert_non_null(fp);
  fclose(fp);
  const struct {
    const char *np, *args, *msg;
  } cases[] = {
      {"-n 2 --transport tcp", "--trace nodir/x.json", "--trace nodir/x.json: directory 'nodir': No such file"},
      {"-n 2 --transport tcp", "--save nodir/ck.bin", "--save nodir/ck.bin: directory 'nodir': No such file"},
      {"-n 2 --transport none,tcp", "--trace plainfile/x.json", "'plainfile' is not a directory"},
      {"", "--save nodir/ck.bin", "--save nodir/ck.bin: directory 'nodir'"},
      {"", "--trace .", "--trace .: is a directory"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int rc = train(out, sizeof out, "%s %s %s --out early", cases[i].np, small, cases[i].args);
    expect(rc, out, 1, cases[i].msg);
    assert_null(strstr(out, "step       1")); /* nothing trained */
    assert_null(strstr(out, "reset by peer"));
    assert_false(exists("early"));
  }
  int rc = train(out, sizeof out, "-n 2 --transport tcp %s --out plainfile/run", small);
  expect(rc, out, 1, "cannot create directory");
  assert_null(strstr(out, "reset by peer"));
  assert_null(strstr(out, "bootstrap exchange"));
  /* --model-from is rank 0's to read: the others stop with it */
  rc = train(out, sizeof out, "-n 2 --transport tcp %s --model-from nodir/model.json --out early", small);
  expect(rc, out, 2, "--model-from");
  assert_null(strstr(out, "reset by peer"));
  assert_null(strstr(out, "bootstrap exchange"));
  assert_false(exists("early"));

  /* a trace that still fails to be written (FILE.tmp is a directory) loses no row: the pair's row
   * is written first, and the ranks stop alike after it */
  char tmpd[600], csv[600], v[64];
  snprintf(tmpd, sizeof tmpd, "%s/late.json.tmp", dir);
  assert_int_equal(mkdir(tmpd, 0755), 0);
  rc = train(out, sizeof out, "-n 2 --transport tcp %s --warmup-steps 1 --trace late.json --out late", small);
  expect(rc, out, 1, "--trace: cannot create");
  assert_null(strstr(out, "reset by peer"));
  assert_null(strstr(out, "dp     tcp")); /* stopped after the first pair */
  snprintf(csv, sizeof csv, "%s/late/train.csv", dir);
  assert_int_equal(csv_rows(csv), 1);
  assert_int_equal(csv_get(v, sizeof v, csv, 0, "role"), 0);
  assert_string_equal(v, "single");
  rmdir(tmpd);
}

/* --save and --resume leave out the one-rank run (its own checkpoints; a resumed one cannot
 * continue the ranks' data position): said, since scaling_eff stays empty. A resume's --seed
 * that differs from the checkpoint's is said to be ignored. Both were silent. */
static void test_resume_notes(void **state) {
  (void)state;
  char out[65536], csv[600];
  const char *small = "--model resnet8-w2 --data synthetic:1x8x8:4:64 --batch 8 --threads 1 --eval-every 0";
  const char *note = "# no one-rank run, so no scaling_eff";
  expect(train(out, sizeof out, "-n 2 --transport tcp %s --steps 2 --save n2.ckpt --out notes1", small), out, 0, note);
  snprintf(csv, sizeof csv, "%s/notes1/train.csv", dir);
  assert_int_equal(csv_rows(csv), 1);
  expect(train(out, sizeof out, "-n 2 --transport tcp %s --steps 3 --resume n2.ckpt --out notes2", small), out, 0, note);
  /* asked for: nothing to say */
  expect(train(out, sizeof out, "-n 2 --transport tcp %s --steps 2 --no-single --save n2.ckpt --out notes3",
               small), out, 0, "train:");
  assert_null(strstr(out, note));

  expect(train(out, sizeof out, "%s --steps 2 --seed 9 --save n1.ckpt --out notes4", small), out, 0, "train:");
  assert_null(strstr(out, note)); /* one process: there is no one-rank run to leave out */
  const char *warn = "--seed 5 ignored: checkpoint n1.ckpt continues with its own seed 9";
  expect(train(out, sizeof out, "%s --steps 4 --seed 5 --resume n1.ckpt --out notes5", small), out, 0, warn);
  const char *lines = strstr(out, warn);
  assert_null(strstr(lines + 1, warn)); /* once */
  expect(train(out, sizeof out, "%s --steps 4 --seed 9 --resume n1.ckpt --out notes6", small), out, 0, "train:");
  assert_null(strstr(out, "ignored"));
  expect(train(out, sizeof out, "%s --steps 4 --resume n1.ckpt --out notes7", small), out, 0, "train:");
  assert_null(strstr(out, "ignored"));
}

static int setup(void **state) {
  (void)state;
  return train_cli_setup("test-train");
}

int main(void) {
  if (!train_cli_have_bin()) return 0;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_flags),       cmocka_unit_test(test_bad_files),
      cmocka_unit_test(test_tiny_run),        cmocka_unit_test(test_resume_bit_identical),
      cmocka_unit_test(test_bad_checkpoints), cmocka_unit_test(test_no_device_first),
      cmocka_unit_test(test_nothing_measured), cmocka_unit_test(test_single_eval_outlasts_timeout),
      cmocka_unit_test(test_single_step_outlasts_timeout), cmocka_unit_test(test_repeated_pairs),
      cmocka_unit_test(test_out_files_first), cmocka_unit_test(test_resume_notes),
  };
  return cmocka_run_group_tests(tests, setup, train_cli_teardown);
}
