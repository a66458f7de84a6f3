/* Checkpoint files: exact round trip of awkward arrays and every header field; damaged,
 * truncated, foreign and mismatched files are refused with a message that says why. The sharded
 * form: each rank's ranges come back where they were and nothing else is written; a truncated,
 * flipped, missing or other save's shard, a damaged manifest, another rank count, stage or range
 * plan are refused naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "nn_data.h"
#include "test_util.h"

static char dir[256];

static uint64_t rng_state = 4242;
static uint32_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

enum { NP = 1001, NM = 1001, NB = 37 };

static nn_ckpt_info sample_info(void) {
  nn_ckpt_info in = {.in_c = 3, .in_h = 32, .in_w = 30, .classes = 11, .batch = 13, .rank = 0,
                     .world = 1, .seed = 0xfedcba9876543210ull, .epoch = 4, .step = 17,
                     .global_step = 1234567890123ll, .elapsed_s = 98.765,
                     .n_params = NP, .n_momentum = NM, .n_buffers = NB};
  snprintf(in.model, sizeof in.model, "resnet20");
  snprintf(in.data, sizeof in.data, "synthetic:3x32x30:11");
  return in;
}

static void random_floats(float *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t u = rnd();
    memcpy(&v[i], &u, 4); /* any bit pattern, NaNs included, must survive */
  }
}

static void path(char *out, size_t cap, const char *name) { snprintf(out, cap, "%s/%s", dir, name); }

static size_t file_bytes(const char *p, unsigned char **buf) {
  FILE *f = fopen(p, "rb");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  *buf = malloc((size_t)n);
  assert_int_equal(fread(*buf, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  return (size_t)n;
}

static void put_bytes(const char *p, const unsigned char *b, size_t n) {
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  if (n) assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

static void expect_refused(const char *p, const nn_ckpt_info *want, const char *why) {
  float *a = malloc(NP * 4), *b = malloc(NM * 4), *c = malloc(NB * 4);
  nn_ckpt_info got;
  char err[1024] = "";
  assert_int_equal(nn_ckpt_load(p, &got, a, b, c, want, err, sizeof err), -1);
  if (!strstr(err, why)) fail_msg("error '%s' does not say '%s'", err, why);
  free(a);
  free(b);
  free(c);
}

static void test_roundtrip(void **state) {
  (void)state;
  nn_ckpt_info in = sample_info();
  float *p = malloc(NP * 4), *m = malloc(NM * 4), *b = malloc(NB * 4);
  random_floats(p, NP);
  random_floats(m, NM);
  random_floats(b, NB);
  char f[512], err[1024];
  path(f, sizeof f, "a.ckpt");
  assert_int_equal(nn_ckpt_save(f, &in, p, m, b, err, sizeof err), 0);
  assert_int_not_equal(access(f, R_OK), -1);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", f);
  assert_int_equal(access(tmp, F_OK), -1); /* renamed into place */

  float *p2 = malloc(NP * 4), *m2 = malloc(NM * 4), *b2 = malloc(NB * 4);
  nn_ckpt_info out;
  if (nn_ckpt_load(f, &out, p2, m2, b2, &in, err, sizeof err) != 0) fail_msg("%s", err);
  assert_memory_equal(p, p2, NP * 4);
  assert_memory_equal(m, m2, NM * 4);
  assert_memory_equal(b, b2, NB * 4);
  assert_string_equal(out.model, in.model);
  assert_string_equal(out.data, in.data);
  assert_int_equal(out.in_c, 3);
  assert_int_equal(out.in_h, 32);
  assert_int_equal(out.in_w, 30);
  assert_int_equal(out.classes, 11);
  assert_int_equal(out.batch, 13);
  assert_int_equal(out.world, 1);
  assert_true(out.seed == in.seed);
  assert_int_equal(out.epoch, 4);
  assert_int_equal(out.step, 17);
  assert_true(out.global_step == in.global_step);
  assert_true(out.elapsed_s == in.elapsed_s);
  nn_ckpt_info hdr;
  assert_int_equal(nn_ckpt_read_info(f, &hdr, err, sizeof err), 0);
  assert_int_equal(hdr.n_params, NP);
  free(p);
  free(m);
  free(b);
  free(p2);
  free(m2);
  free(b2);
}

static void test_damage(void **state) {
  (void)state;
  nn_ckpt_info in = sample_info();
  char f[512], g[512], err[1024];
  path(f, sizeof f, "a.ckpt");
  path(g, sizeof g, "bad.ckpt");
  unsigned char *orig;
  size_t n = file_bytes(f, &orig);
  unsigned char *buf = malloc(n);

  /* one flipped bit anywhere: in the header, each arena, the checksum itself */
  const size_t where[] = {100, 512 + 5, 512 + 4 * NP + 3, 512 + 4 * (NP + NM) + 7, n - 2};
  for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
    memcpy(buf, orig, n);
    buf[where[i]] ^= 0x10;
    put_bytes(g, buf, n);
    expect_refused(g, &in, "corrupted");
  }
  /* cut at several places */
  const size_t cuts[] = {0, 7, 15, 400, 512 + 4, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    put_bytes(g, orig, cuts[i]);
    expect_refused(g, &in, "truncated");
  }
  /* an extra byte */
  memcpy(buf, orig, n);
  put_bytes(g, buf, n - 1);
  FILE *fp = fopen(g, "ab");
  fwrite(orig + n - 1, 1, 1, fp);
  fputc(0, fp);
  fclose(fp);
  expect_refused(g, &in, "wrong length");
  /* not a checkpoint at all */
  memcpy(buf, orig, n);
  memcpy(buf, "\x1f\x8b\x08\x00", 4);
  put_bytes(g, buf, n);
  expect_refused(g, &in, "wrong magic");
  /* a later version */
  memcpy(buf, orig, n);
  buf[8] = 9;
  put_bytes(g, buf, n);
  expect_refused(g, &in, "version 9");
  /* missing */
  path(g, sizeof g, "none.ckpt");
  expect_refused(g, &in, "No such file");
  /* unwritable destination */
  float x = 0;
  nn_ckpt_info tiny = in;
  tiny.n_params = tiny.n_momentum = tiny.n_buffers = 1;
  assert_int_equal(nn_ckpt_save("/nonexistent-dir/x.ckpt", &tiny, &x, &x, &x, err, sizeof err), -1);
  assert_non_null(strstr(err, "/nonexistent-dir/x.ckpt"));
  free(buf);
  free(orig);
}

static void test_mismatch(void **state) {
  (void)state;
  char f[512];
  path(f, sizeof f, "a.ckpt");
  nn_ckpt_info w;
  w = sample_info(); snprintf(w.model, sizeof w.model, "resnet32");
  expect_refused(f, &w, "model 'resnet20'");
  w = sample_info(); w.in_c = 1;
  expect_refused(f, &w, "in_c 3");
  w = sample_info(); w.classes = 10;
  expect_refused(f, &w, "classes 11");
  w = sample_info(); w.n_params = NP + 1;
  expect_refused(f, &w, "n_params 1001");
  w = sample_info(); w.n_buffers = NB - 1;
  expect_refused(f, &w, "n_buffers");
  w = sample_info(); w.batch = 14;
  expect_refused(f, &w, "batch 13");
  w = sample_info(); snprintf(w.data, sizeof w.data, "fmnist");
  expect_refused(f, &w, "data 'synthetic:3x32x30:11'");
  w = sample_info(); w.world = 2;
  expect_refused(f, &w, "world 1");
}

/* A save killed outright at any moment (SIGKILL: a rank its launcher kills) leaves the previous
 * checkpoint, whole, and (but for a kill in the instant between naming the new file and renaming
 * it) no temporary: the bytes go to an unnamed file. Written to a named x.ckpt.tmp, as saves
 * were, most of these kills left one behind, 16 MB each. */
static void test_killed_save_leaves_no_temporary(void **state) {
  (void)state;
  enum { BIG = 2 << 20 }; /* floats per arena: most of a round is spent inside the save */
  nn_ckpt_info in = sample_info();
  in.n_params = in.n_momentum = BIG, in.n_buffers = 0;
  float *a = calloc(BIG, 4);
  assert_non_null(a);
  char f[512], tmp[600], err[1024];
  path(f, sizeof f, "k.ckpt");
  snprintf(tmp, sizeof tmp, "%s.tmp", f);
  if (nn_ckpt_save(f, &in, a, a, a, err, sizeof err)) fail_msg("%s", err);
  unsigned seed = (unsigned)time(NULL);
  int left = 0;
  for (int round = 0; round < 12; round++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      for (;;)
        if (nn_ckpt_save(f, &in, a, a, a, err, sizeof err)) _exit(4);
    }
    usleep((useconds_t)(rand_r(&seed) % 60000));
    assert_int_equal(kill(pid, SIGKILL), 0);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFSIGNALED(st)) fail_msg("round %d: the saving child ended with status 0x%x", round, st);
    if (access(tmp, F_OK) == 0) left++, unlink(tmp);
    nn_ckpt_info out;
    if (nn_ckpt_load(f, &out, a, a, a, &in, err, sizeof err)) fail_msg("round %d: %s", round, err);
  }
  if (left > 1) fail_msg("%d of 12 killed saves left %s behind", left, tmp);
  free(a);
}


/* ---- the sharded form ---- */

/* Two ranks' ranges of an arena of NP floats, as the reducer cuts them: each rank a block of
 * every bucket, and the buckets' tails (every rank's). */
enum { NR = 3 };
static const size_t sh_off[2][NR] = {{0, 300, 990}, {100, 350, 990}};
static const size_t sh_cnt[2][NR] = {{100, 50, 11}, {100, 50, 11}};

static nn_ckpt_info shard_info(int rank) {
  nn_ckpt_info in = sample_info();
  in.rank = rank;
  in.world = 2;
  in.sharded = 2;
  in.set_id = 0x1234567890abcdefull;
  return in;
}

/* Saves the set of two ranks under manifest name `name` from p, m and each rank's buffers. */
static void save_set(const char *name, const float *p, const float *m, float *const b[2]) {
  char f[512], sp[700], err[1024];
  path(f, sizeof f, name);
  nn_ckpt_shard_ref refs[2];
  nn_ckpt_info in;
  for (int r = 0; r < 2; r++) {
    in = shard_info(r);
    nn_ckpt_shard_path(sp, sizeof sp, f, in.global_step, r, 2);
    if (nn_ckpt_shard_save(sp, &in, sh_off[r], sh_cnt[r], NR, p, m, b[r], &refs[r], err, sizeof err))
      fail_msg("%s", err);
  }
  in = shard_info(0);
  if (nn_ckpt_manifest_save(f, &in, refs, err, sizeof err)) fail_msg("%s", err);
}

/* want->rank's load of the set `name`; 0, or -1 with the message in err. */
static int load_rank(const char *name, const nn_ckpt_info *want, const size_t *off, const size_t *cnt, float *p,
                     float *m, float *b, char *err, size_t cap) {
  char f[512];
  path(f, sizeof f, name);
  return nn_ckpt_shard_load(f, want, off, cnt, NR, p, m, b, err, cap);
}

static void expect_shard_refused(const char *name, const nn_ckpt_info *want, const size_t *off, const size_t *cnt,
                                 const char *file, const char *why) {
  float *a = malloc(NP * 4), *b = malloc(NM * 4), *c = malloc(NB * 4);
  char err[2048] = "";
  assert_int_equal(load_rank(name, want, off, cnt, a, b, c, err, sizeof err), -1);
  if (!strstr(err, why)) fail_msg("error '%s' does not say '%s'", err, why);
  if (!strstr(err, file)) fail_msg("error '%s' does not name '%s'", err, file);
  free(a);
  free(b);
  free(c);
}

static void test_shards_roundtrip(void **state) {
  (void)state;
  float *p = malloc(NP * 4), *m = malloc(NM * 4), *b0 = malloc(NB * 4), *b1 = malloc(NB * 4);
  random_floats(p, NP);
  random_floats(m, NM);
  random_floats(b0, NB);
  random_floats(b1, NB);
  save_set("s.ckpt", p, m, (float *[]){b0, b1});
  char f[512], err[1024];
  path(f, sizeof f, "s.ckpt");
  /* the manifest reads as the set's description */
  nn_ckpt_info hdr;
  if (nn_ckpt_read_info(f, &hdr, err, sizeof err)) fail_msg("%s", err);
  assert_int_equal(hdr.sharded, 2);
  assert_int_equal(hdr.world, 2);
  assert_true(hdr.global_step == sample_info().global_step);
  assert_true(hdr.set_id == shard_info(0).set_id);
  assert_true(hdr.seed == sample_info().seed);
  /* each rank gets its ranges and its own buffers, and nothing outside its ranges changes */
  for (int r = 0; r < 2; r++) {
    float *p2 = malloc(NP * 4), *m2 = malloc(NM * 4), *b2 = malloc(NB * 4);
    for (size_t i = 0; i < NP; i++) p2[i] = -7.0f, m2[i] = -9.0f;
    nn_ckpt_info want = shard_info(r);
    if (load_rank("s.ckpt", &want, sh_off[r], sh_cnt[r], p2, m2, b2, err, sizeof err)) fail_msg("%s", err);
    size_t mine = 0;
    for (size_t i = 0; i < NP; i++) {
      int in = 0;
      for (int k = 0; k < NR; k++) in |= i >= sh_off[r][k] && i < sh_off[r][k] + sh_cnt[r][k];
      mine += (size_t)in;
      if (in && (memcmp(&p2[i], &p[i], 4) || memcmp(&m2[i], &m[i], 4)))
        fail_msg("rank %d: float %zu not restored", r, i);
      if (!in && (p2[i] != -7.0f || m2[i] != -9.0f)) fail_msg("rank %d: float %zu outside its ranges written", r, i);
    }
    assert_int_equal(mine, 161);
    assert_memory_equal(b2, r ? b1 : b0, NB * 4);
    free(p2);
    free(m2);
    free(b2);
  }
  /* the gathered reader refuses the manifest by name */
  nn_ckpt_info w = sample_info();
  expect_refused(f, &w, "sharded checkpoint's manifest, not a gathered checkpoint");
  free(p);
  free(m);
  free(b0);
  free(b1);
}

/* A copy of set "s.ckpt" under manifest name `name`; its rank 1 file's path into shard1. */
static void copy_set(const char *name, char *shard1, size_t cap) {
  char f[512], g[512], sp[700];
  path(f, sizeof f, "s.ckpt");
  path(g, sizeof g, name);
  unsigned char *buf;
  size_t n = file_bytes(f, &buf);
  put_bytes(g, buf, n);
  free(buf);
  for (int r = 0; r < 2; r++) {
    nn_ckpt_shard_path(sp, sizeof sp, f, sample_info().global_step, r, 2);
    n = file_bytes(sp, &buf);
    nn_ckpt_shard_path(sp, sizeof sp, g, sample_info().global_step, r, 2);
    put_bytes(sp, buf, n);
    free(buf);
  }
  nn_ckpt_shard_path(shard1, cap, g, sample_info().global_step, 1, 2);
}

static void test_shards_refused(void **state) {
  (void)state;
  char s1[700], f[512];
  nn_ckpt_info w1 = shard_info(1), w;
  unsigned char *buf;
  size_t n;
  /* rank 1's file cut short, at its end and inside its ranges */
  copy_set("t.ckpt", s1, sizeof s1);
  n = file_bytes(s1, &buf);
  put_bytes(s1, buf, n - 9);
  expect_shard_refused("t.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "truncated");
  put_bytes(s1, buf, 512 + 20);
  expect_shard_refused("t.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "truncated");
  put_bytes(s1, buf, 100);
  expect_shard_refused("t.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "truncated");
  /* one flipped byte: in the header, the ranges, the floats */
  const size_t where[] = {40, 512 + 3, 512 + 48 + 17, n - 20};
  for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
    buf[where[i]] ^= 0x04;
    put_bytes(s1, buf, n);
    buf[where[i]] ^= 0x04;
    expect_shard_refused("t.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "corrupted");
  }
  free(buf);
  /* a file of another save (its own checksum right, not the one its manifest names) */
  copy_set("u.ckpt", s1, sizeof s1);
  float *p = calloc(NP, 4), *b = calloc(NB, 4);
  nn_ckpt_info other = shard_info(1);
  other.set_id ^= 1;
  char err[1024];
  if (nn_ckpt_shard_save(s1, &other, sh_off[1], sh_cnt[1], NR, p, p, b, NULL, err, sizeof err)) fail_msg("%s", err);
  expect_shard_refused("u.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "not the file its manifest names");
  /* missing */
  unlink(s1);
  expect_shard_refused("u.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "No such file");
  /* a damaged manifest */
  copy_set("v.ckpt", s1, sizeof s1);
  path(f, sizeof f, "v.ckpt");
  n = file_bytes(f, &buf);
  buf[n - 6] ^= 0x80;
  put_bytes(f, buf, n);
  expect_shard_refused("v.ckpt", &w1, sh_off[1], sh_cnt[1], f, "corrupted manifest");
  put_bytes(f, buf, n - 1);
  expect_shard_refused("v.ckpt", &w1, sh_off[1], sh_cnt[1], f, "truncated manifest");
  free(buf);
  /* another rank count, stage, model or range plan */
  path(f, sizeof f, "s.ckpt");
  w = w1, w.world = 3;
  expect_shard_refused("s.ckpt", &w, sh_off[1], sh_cnt[1], f, "of 2 ranks; this run has 3");
  w = w1, w.sharded = 3;
  expect_shard_refused("s.ckpt", &w, sh_off[1], sh_cnt[1], f, "--dp sharded; this run is --dp sharded3");
  w = w1, w.batch = 14;
  expect_shard_refused("s.ckpt", &w, sh_off[1], sh_cnt[1], f, "batch 13");
  nn_ckpt_shard_path(s1, sizeof s1, f, sample_info().global_step, 1, 2);
  const size_t off2[NR] = {100, 350, 989}, cnt2[NR] = {100, 50, 12};
  expect_shard_refused("s.ckpt", &w1, off2, cnt2, s1, "ranges");
  /* rank 0's file where rank 1's should be */
  char s0[700];
  nn_ckpt_shard_path(s0, sizeof s0, f, sample_info().global_step, 0, 2);
  copy_set("x.ckpt", s1, sizeof s1);
  n = file_bytes(s0, &buf);
  put_bytes(s1, buf, n);
  free(buf);
  expect_shard_refused("x.ckpt", &w1, sh_off[1], sh_cnt[1], s1, "not the file its manifest names");
  free(p);
  free(b);
}

static int setup(void **state) {
  (void)state;
  return tu_tmpdir(dir, sizeof dir, "test-ckpt") ? 0 : -1;
}
static int teardown(void **state) {
  (void)state;
  return tu_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_roundtrip),
      cmocka_unit_test(test_damage),
      cmocka_unit_test(test_mismatch),
      cmocka_unit_test(test_killed_save_leaves_no_temporary),
      cmocka_unit_test(test_shards_roundtrip),
      cmocka_unit_test(test_shards_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
