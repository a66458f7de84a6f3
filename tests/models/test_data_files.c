/* Dataset files: IDX (gzip and plain) and CIFAR-10 batches written here with random contents and
 * awkward shapes, read back byte for byte; every kind of damage gives a clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "nn_data.h"
#include "test_util.h"

static char tmpdir[256];

static uint64_t rng_state = 12345;
static uint32_t rnd(void) { /* xorshift64*, the test's own generator */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static void path_in(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s", dir, name);
}

static void write_raw(const char *path, const uint8_t *p, size_t n, int gz) {
  if (gz) {
    gzFile f = gzopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(gzwrite(f, p, (unsigned)n), (int)n);
    assert_int_equal(gzclose(f), Z_OK);
  } else {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
  }
}

static void put_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* An IDX image file of n x rows x cols random pixels (returned in *px) and its label file. */
static void write_idx(const char *ipath, const char *lpath, uint32_t n, uint32_t rows,
                      uint32_t cols, uint32_t nlabels, int gz, uint8_t **px, uint8_t **lab) {
  size_t np = (size_t)n * rows * cols;
  uint8_t *img = malloc(16 + np), *l = malloc(8 + nlabels);
  put_be32(img, 0x803);
  put_be32(img + 4, n);
  put_be32(img + 8, rows);
  put_be32(img + 12, cols);
  for (size_t i = 0; i < np; i++) img[16 + i] = (uint8_t)rnd();
  put_be32(l, 0x801);
  put_be32(l + 4, nlabels);
  for (uint32_t i = 0; i < nlabels; i++) l[8 + i] = (uint8_t)(rnd() % 10);
  write_raw(ipath, img, 16 + np, gz);
  write_raw(lpath, l, 8 + nlabels, gz);
  if (px) {
    *px = malloc(np);
    memcpy(*px, img + 16, np);
  }
  if (lab) {
    *lab = malloc(nlabels);
    memcpy(*lab, l + 8, nlabels);
  }
  free(img);
  free(l);
}

static void expect_error(int rc, const char *err, const char *want) {
  assert_int_equal(rc, -1);
  if (!strstr(err, want)) fail_msg("error '%s' does not say '%s'", err, want);
}

static void test_idx_roundtrip(void **state) {
  (void)state;
  for (int gz = 0; gz < 2; gz++) {
    char ip[512], lp[512];
    path_in(ip, sizeof ip, tmpdir, gz ? "i.gz" : "i.raw");
    path_in(lp, sizeof lp, tmpdir, gz ? "l.gz" : "l.raw");
    uint8_t *px, *lab;
    write_idx(ip, lp, 37, 5, 7, 37, gz, &px, &lab);
    nn_dataset d;
    char err[1024] = "";
    assert_int_equal(nn_data_read_idx(&d, ip, lp, err, sizeof err), 0);
    assert_int_equal(d.n, 37);
    assert_int_equal(d.c, 1);
    assert_int_equal(d.h, 5);
    assert_int_equal(d.w, 7);
    assert_int_equal(d.classes, 10);
    assert_memory_equal(d.pixels, px, 37 * 5 * 7);
    for (int i = 0; i < 37; i++) assert_int_equal(d.labels[i], lab[i]);
    nn_data_free(&d);
    free(px);
    free(lab);
  }
}

static void test_idx_errors(void **state) {
  (void)state;
  char ip[512], lp[512], err[1024];
  nn_dataset d;
  path_in(ip, sizeof ip, tmpdir, "e_i.gz");
  path_in(lp, sizeof lp, tmpdir, "e_l.gz");

  /* missing */
  char missing[512];
  path_in(missing, sizeof missing, tmpdir, "nope.gz");
  write_idx(ip, lp, 4, 3, 3, 4, 1, NULL, NULL);
  expect_error(nn_data_read_idx(&d, missing, lp, err, sizeof err), err, "cannot open");
  assert_non_null(strstr(err, "nope.gz"));

  /* wrong magic: a label file given as images, and the reverse */
  expect_error(nn_data_read_idx(&d, lp, lp, err, sizeof err), err, "wrong magic");
  expect_error(nn_data_read_idx(&d, ip, ip, err, sizeof err), err, "wrong magic");

  /* counts disagree */
  write_idx(ip, lp, 6, 3, 3, 5, 1, NULL, NULL);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "inconsistent");

  /* pixel data shorter than the header says (a valid gzip of a cut IDX) */
  uint8_t hdr[16 + 20];
  put_be32(hdr, 0x803);
  put_be32(hdr + 4, 3);
  put_be32(hdr + 8, 3);
  put_be32(hdr + 12, 3);
  memset(hdr + 16, 7, 20);
  write_raw(ip, hdr, sizeof hdr, 1);
  write_idx(missing, lp, 3, 3, 3, 3, 1, NULL, NULL);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "truncated");
  /* and longer */
  uint8_t big[16 + 30];
  memcpy(big, hdr, 16);
  memset(big + 16, 1, 30);
  write_raw(ip, big, sizeof big, 1);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "trailing");
  /* a header cut short */
  write_raw(ip, hdr, 10, 0);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "truncated");
  unlink(missing);

  /* a gzip stream cut in the middle */
  write_idx(ip, lp, 50, 9, 9, 50, 1, NULL, NULL);
  FILE *f = fopen(ip, "rb");
  uint8_t buf[8192];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  assert_true(n > 100);
  write_raw(ip, buf, n / 2, 0);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "gzip");
  /* a flipped byte inside the compressed data: CRC or inflate error, never silent */
  write_idx(ip, lp, 50, 9, 9, 50, 1, NULL, NULL);
  f = fopen(ip, "rb");
  n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  buf[n - 6] ^= 0x5a; /* inside the CRC trailer */
  write_raw(ip, buf, n, 0);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "gzip");

  /* a label out of range */
  write_idx(ip, lp, 4, 2, 2, 4, 0, NULL, NULL);
  uint8_t lab[8 + 4];
  put_be32(lab, 0x801);
  put_be32(lab + 4, 4);
  lab[8] = 1;
  lab[9] = 2;
  lab[10] = 10;
  lab[11] = 0;
  write_raw(lp, lab, sizeof lab, 0);
  expect_error(nn_data_read_idx(&d, ip, lp, err, sizeof err), err, "out of range");
}

static void make_fmnist_dir(const char *dir, uint32_t tr, uint32_t trows, uint32_t te,
                            uint32_t terows) {
  mkdir(dir, 0755);
  char ip[512], lp[512];
  path_in(ip, sizeof ip, dir, "train-images-idx3-ubyte.gz");
  path_in(lp, sizeof lp, dir, "train-labels-idx1-ubyte.gz");
  write_idx(ip, lp, tr, trows, 6, tr, 1, NULL, NULL);
  /* the test split uncompressed: both forms are found */
  path_in(ip, sizeof ip, dir, "t10k-images-idx3-ubyte");
  path_in(lp, sizeof lp, dir, "t10k-labels-idx1-ubyte");
  write_idx(ip, lp, te, terows, 6, te, 0, NULL, NULL);
}

static void test_fmnist_dir(void **state) {
  (void)state;
  char dir[512], spec[600], err[2048];
  nn_data_spec sp;
  nn_dataset tr, te;
  path_in(dir, sizeof dir, tmpdir, "fm");
  make_fmnist_dir(dir, 13, 6, 5, 6);
  snprintf(spec, sizeof spec, "fmnist:%s", dir);
  assert_int_equal(nn_data_parse_spec(&sp, spec, err, sizeof err), 0);
  assert_int_equal(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), 0);
  assert_int_equal(tr.n, 13);
  assert_int_equal(te.n, 5);
  nn_data_free(&tr);
  nn_data_free(&te);

  /* shapes that disagree between the splits */
  make_fmnist_dir(dir, 13, 6, 5, 7);
  expect_error(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), err, "inconsistent shapes");

  /* a directory without the files */
  path_in(dir, sizeof dir, tmpdir, "empty");
  mkdir(dir, 0755);
  snprintf(spec, sizeof spec, "fmnist:%s", dir);
  assert_int_equal(nn_data_parse_spec(&sp, spec, err, sizeof err), 0);
  expect_error(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), err, "train-images-idx3-ubyte.gz");
}

static void write_cifar(const char *path, int records, uint8_t **out) {
  size_t n = (size_t)records * 3073;
  uint8_t *p = malloc(n);
  for (size_t r = 0; r < (size_t)records; r++) {
    p[r * 3073] = (uint8_t)(rnd() % 10);
    for (int k = 1; k < 3073; k++) p[r * 3073 + k] = (uint8_t)rnd();
  }
  write_raw(path, p, n, 0);
  if (out) *out = p;
  else free(p);
}

static void test_cifar(void **state) {
  (void)state;
  char dir[512], sub[600], p[700], spec[700], err[2048];
  path_in(dir, sizeof dir, tmpdir, "cifar");
  mkdir(dir, 0755);
  snprintf(sub, sizeof sub, "%s/cifar-10-batches-bin", dir); /* the archive's own layout */
  mkdir(sub, 0755);
  const int recs[5] = {3, 1, 4, 2, 5};
  uint8_t *files[6];
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/data_batch_%d.bin", sub, i + 1);
    write_cifar(p, recs[i], &files[i]);
  }
  snprintf(p, sizeof p, "%s/test_batch.bin", sub);
  write_cifar(p, 2, &files[5]);

  nn_data_spec sp;
  nn_dataset tr, te;
  snprintf(spec, sizeof spec, "cifar10:%s", dir);
  assert_int_equal(nn_data_parse_spec(&sp, spec, err, sizeof err), 0);
  assert_int_equal(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), 0);
  assert_int_equal(tr.n, 15);
  assert_int_equal(te.n, 2);
  assert_int_equal(tr.c, 3);
  assert_int_equal(tr.h, 32);
  int64_t k = 0;
  for (int i = 0; i < 5; i++)
    for (int r = 0; r < recs[i]; r++, k++) {
      assert_int_equal(tr.labels[k], files[i][r * 3073]);
      assert_memory_equal(tr.pixels + k * 3072, files[i] + r * 3073 + 1, 3072);
    }
  assert_memory_equal(te.pixels + 3072, files[5] + 3073 + 1, 3072);
  nn_data_free(&tr);
  nn_data_free(&te);

  /* a torn record */
  snprintf(p, sizeof p, "%s/data_batch_4.bin", sub);
  uint8_t *torn = malloc(3073 * 2 + 5);
  memcpy(torn, files[3], 3073 * 2);
  memset(torn + 3073 * 2, 0, 5);
  write_raw(p, torn, 3073 * 2 + 5, 0);
  expect_error(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), err, "data_batch_4.bin");
  assert_non_null(strstr(err, "truncated"));
  /* a label out of range */
  torn[3073] = 11;
  write_raw(p, torn, 3073 * 2, 0);
  expect_error(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), err, "out of range");
  /* a missing batch */
  unlink(p);
  expect_error(nn_data_load(&tr, &te, &sp, 1, err, sizeof err), err, "data_batch_4.bin");
  assert_non_null(strstr(err, "cannot open"));
  free(torn);
  for (int i = 0; i < 6; i++) free(files[i]);
}

static void test_specs(void **state) {
  (void)state;
  nn_data_spec sp;
  char err[512];
  assert_int_equal(nn_data_parse_spec(&sp, "fmnist", err, sizeof err), 0);
  assert_int_equal(sp.kind, NN_DATA_FMNIST);
  assert_string_equal(sp.dir, NN_DATA_FMNIST_DIR);
  assert_int_equal(nn_data_parse_spec(&sp, "synthetic:3x224x224:1000", err, sizeof err), 0);
  assert_int_equal(sp.kind, NN_DATA_SYNTHETIC);
  assert_int_equal(sp.c, 3);
  assert_int_equal(sp.h, 224);
  assert_int_equal(sp.w, 224);
  assert_int_equal(sp.classes, 1000);
  assert_int_equal(nn_data_parse_spec(&sp, "synthetic:1x28x20:7:99", err, sizeof err), 0);
  assert_int_equal(sp.w, 20);
  assert_int_equal(sp.n, 99);
  const char *bad[] = {"cifar10",          "cifar10:",         "imagenet",
                       "synthetic:3x224",  "synthetic:4x8x8",  "synthetic:3x8x8:1",
                       "synthetic:3x8x8:10:0", "synthetic:3x8x8x:10", "synthetic:3x8x8:10:5:5",
                       "synthetic:axbxc",  "fmnistx",          "synthetic:3x8x8::5", "synthetic:3x8x8:10:",
                       "synthetic:"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    err[0] = 0;
    if (nn_data_parse_spec(&sp, bad[i], err, sizeof err) == 0) fail_msg("'%s' accepted", bad[i]);
    assert_non_null(strstr(err, "--data"));
  }
}

static void test_synthetic(void **state) {
  (void)state;
  nn_data_spec sp;
  char err[512];
  assert_int_equal(nn_data_parse_spec(&sp, "synthetic:2x5x3:7:11", err, sizeof err), 0);
  nn_dataset a, at, b, bt, c, ct;
  assert_int_equal(nn_data_load(&a, &at, &sp, 42, err, sizeof err), 0);
  assert_int_equal(nn_data_load(&b, &bt, &sp, 42, err, sizeof err), 0);
  assert_int_equal(nn_data_load(&c, &ct, &sp, 43, err, sizeof err), 0);
  assert_int_equal(a.n, 11);
  assert_true(at.n >= 1);
  assert_int_equal(a.c, 2);
  assert_int_equal(a.h, 5);
  assert_int_equal(a.w, 3);
  assert_int_equal(a.classes, 7);
  for (int i = 0; i < 11; i++) assert_in_range(a.labels[i], 0, 6);
  assert_memory_equal(a.pixels, b.pixels, 11 * 30);
  assert_memory_not_equal(a.pixels, c.pixels, 11 * 30);
  assert_memory_not_equal(a.pixels, at.pixels, at.n * 30); /* test split is not the train split */
  nn_data_free(&a);
  nn_data_free(&at);
  nn_data_free(&b);
  nn_data_free(&bt);
  nn_data_free(&c);
  nn_data_free(&ct);
  /* the default pool: 64..1024 images within 128 MiB */
  assert_int_equal(nn_data_parse_spec(&sp, "synthetic:3x224x224:1000", err, sizeof err), 0);
  assert_int_equal(nn_data_load(&a, &at, &sp, 1, err, sizeof err), 0);
  assert_in_range(a.n, 64, 1024);
  assert_true((uint64_t)a.n * 3 * 224 * 224 <= (128u << 20));
  for (int64_t i = 0; i < a.n; i++) assert_in_range(a.labels[i], 0, 999);
  nn_data_free(&a);
  nn_data_free(&at);
}

/* The installed Fashion-MNIST, when present: the shapes and label balance the dataset documents. */
static void test_real_fmnist(void **state) {
  (void)state;
  if (access(NN_DATA_FMNIST_DIR "/train-images-idx3-ubyte.gz", R_OK) != 0) {
    skip();
  }
  nn_data_spec sp;
  nn_dataset tr, te;
  char err[1024];
  assert_int_equal(nn_data_parse_spec(&sp, "fmnist", err, sizeof err), 0);
  if (nn_data_load(&tr, &te, &sp, 1, err, sizeof err) != 0) fail_msg("%s", err);
  assert_int_equal(tr.n, 60000);
  assert_int_equal(te.n, 10000);
  assert_int_equal(tr.h, 28);
  assert_int_equal(tr.w, 28);
  int count[10] = {0};
  for (int64_t i = 0; i < tr.n; i++) count[tr.labels[i]]++;
  for (int k = 0; k < 10; k++) assert_int_equal(count[k], 6000);
  double sum = 0;
  for (int64_t i = 0; i < tr.n * 784; i++) sum += tr.pixels[i];
  assert_float_equal(sum / (tr.n * 784.0) / 255.0, tr.mean[0], 1e-3);
  nn_data_free(&tr);
  nn_data_free(&te);
}

static int setup(void **state) {
  (void)state;
  return tu_tmpdir(tmpdir, sizeof tmpdir, "test-data") ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  return tu_rmtree(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_idx_roundtrip), cmocka_unit_test(test_idx_errors),
      cmocka_unit_test(test_fmnist_dir),    cmocka_unit_test(test_cifar),
      cmocka_unit_test(test_specs),         cmocka_unit_test(test_synthetic),
      cmocka_unit_test(test_real_fmnist),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
