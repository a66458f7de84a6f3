/* Datasets: Fashion-MNIST IDX (gzip or plain), CIFAR-10 binary batches, synthetic images;
 * per-epoch permutations, rank shards and augmentation draws. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nn_data.h"

/* ---- deterministic randomness: counter-based, so any rank and any resume point agree ---- */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Uniform in [0, k) without the modulo's bias worth mentioning (Lemire's multiply-shift). */
static uint64_t below(uint64_t r, uint64_t k) { return (uint64_t)(((__uint128_t)r * k) >> 64); }

void nn_data_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch) {
  for (int64_t i = 0; i < n; i++) perm[i] = i;
  uint64_t s = mix64(mix64(seed ^ 0x5045524d5045524dull) + (uint64_t)epoch);
  for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates */
    s += 0x9e3779b97f4a7c15ull;
    int64_t j = (int64_t)below(mix64(s), (uint64_t)i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
}

int64_t nn_data_shard_len(int64_t n, int world) { return world > 0 ? n / world : 0; }

int64_t nn_data_steps_per_epoch(int64_t n, int world, int batch, int drop_last) {
  int64_t s = nn_data_shard_len(n, world);
  if (batch <= 0) return 0;
  return drop_last ? s / batch : (s + batch - 1) / batch;
}

void nn_data_aug_draw(int *dy, int *dx, int *flip, uint64_t seed, int64_t epoch, int64_t index,
                      int pad) {
  uint64_t r = mix64(mix64(mix64(seed ^ 0x4155474d454e5421ull) + (uint64_t)epoch) + (uint64_t)index);
  uint64_t span = (uint64_t)(2 * pad + 1);
  *dy = (int)below(r, span);
  *dx = (int)below(mix64(r), span);
  *flip = (int)(r >> 63);
}

/* ---- files ---- */
/* An error message that holds a path may be cut to errcap, and that is fine; going through
 * vsnprintf says so to gcc, whose -Wformat-truncation at -O3 otherwise fails the build. */
__attribute__((format(printf, 3, 4))) static void data_errf(char *err, size_t errcap,
                                                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errcap, fmt, ap);
  va_end(ap);
}

/* Reads a whole file; gzip is decompressed, a plain file is read as it is (zlib's transparent
 * mode). A damaged gzip stream (bad CRC, cut short) is an error, not a short read. */
static int read_whole(uint8_t **out, size_t *len, const char *path, char *err, size_t errcap) {
  *out = NULL;
  *len = 0;
  errno = 0;
  gzFile f = gzopen(path, "rb");
  if (!f) {
    snprintf(err, errcap, "cannot open %s: %s", path, errno ? strerror(errno) : "out of memory");
    return -1;
  }
  gzbuffer(f, 1 << 18);
  size_t cap = 1 << 20, n = 0;
  uint8_t *buf = malloc(cap);
  if (!buf) {
    gzclose(f);
    snprintf(err, errcap, "%s: out of memory", path);
    return -1;
  }
  for (;;) {
    if (cap - n < (1u << 18)) {
      uint8_t *nb = realloc(buf, cap * 2);
      if (!nb) {
        free(buf);
        gzclose(f);
        snprintf(err, errcap, "%s: out of memory", path);
        return -1;
      }
      buf = nb;
      cap *= 2;
    }
    int got = gzread(f, buf + n, (unsigned)(cap - n));
    if (got < 0) break;
    n += (size_t)got;
    if (got == 0) break;
  }
  int zerr = Z_OK;
  const char *msg = gzerror(f, &zerr);
  if (zerr != Z_OK && zerr != Z_STREAM_END) {
    snprintf(err, errcap, "%s: damaged gzip data (%s)", path,
             zerr == Z_BUF_ERROR ? "truncated" : msg);
    free(buf);
    gzclose(f);
    return -1;
  }
  gzclose(f);
  *out = buf;
  *len = n;
  return 0;
}

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void nn_data_free(nn_dataset *d) {
  if (!d) return;
  free(d->pixels);
  free(d->labels);
  memset(d, 0, sizeof *d);
}

int nn_data_read_idx(nn_dataset *out, const char *images_path, const char *labels_path,
                     char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  uint8_t *img = NULL, *lab = NULL;
  size_t ilen = 0, llen = 0;
  int rc = -1;
  if (read_whole(&img, &ilen, images_path, err, errcap) == 0 &&
      read_whole(&lab, &llen, labels_path, err, errcap) == 0) {
    rc = nn_data_parse_idx(out, img, ilen, lab, llen, images_path, labels_path, err, errcap);
    img = NULL; /* the parser took it */
  }
  free(img);
  free(lab);
  return rc;
}

int nn_data_parse_idx(nn_dataset *out, uint8_t *img, size_t ilen, const uint8_t *lab, size_t llen,
                      const char *images_path, const char *labels_path, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  int rc = -1;
  if (ilen >= 4 && be32(img) != 0x00000803u) {
    snprintf(err, errcap, "%s: wrong magic 0x%08x (IDX images are 0x00000803)", images_path,
             be32(img));
    goto done;
  }
  if (ilen < 16) {
    snprintf(err, errcap, "%s: truncated (%zu bytes, an IDX image header is 16)", images_path, ilen);
    goto done;
  }
  if (llen >= 4 && be32(lab) != 0x00000801u) {
    snprintf(err, errcap, "%s: wrong magic 0x%08x (IDX labels are 0x00000801)", labels_path,
             be32(lab));
    goto done;
  }
  if (llen < 8) {
    snprintf(err, errcap, "%s: truncated (%zu bytes, an IDX label header is 8)", labels_path, llen);
    goto done;
  }
  uint64_t n = be32(img + 4), rows = be32(img + 8), cols = be32(img + 12), nl = be32(lab + 4);
  if (n == 0 || rows == 0 || cols == 0 || rows > 65536 || cols > 65536) {
    snprintf(err, errcap, "%s: bad shape %llu x %llu x %llu", images_path, (unsigned long long)n,
             (unsigned long long)rows, (unsigned long long)cols);
    goto done;
  }
  uint64_t want = 16 + n * rows * cols;
  if (ilen != want) {
    snprintf(err, errcap, "%s: %s (%zu bytes, the header's %llu x %llu x %llu needs %llu)",
             images_path, ilen < want ? "truncated" : "trailing bytes", ilen,
             (unsigned long long)n, (unsigned long long)rows, (unsigned long long)cols,
             (unsigned long long)want);
    goto done;
  }
  if (llen != 8 + nl) {
    snprintf(err, errcap, "%s: %s (%zu bytes, the header's %llu labels need %llu)", labels_path,
             llen < 8 + nl ? "truncated" : "trailing bytes", llen, (unsigned long long)nl,
             (unsigned long long)(8 + nl));
    goto done;
  }
  if (nl != n) {
    snprintf(err, errcap, "inconsistent: %s has %llu images but %s has %llu labels", images_path,
             (unsigned long long)n, labels_path, (unsigned long long)nl);
    goto done;
  }
  out->c = 1;
  out->h = (int)rows;
  out->w = (int)cols;
  out->classes = 10;
  out->n = (int64_t)n;
  out->mean[0] = 0.2860f; /* Fashion-MNIST training set statistics */
  out->std[0] = 0.3530f;
  out->labels = malloc(n * sizeof *out->labels);
  if (!out->labels) {
    snprintf(err, errcap, "%s: out of memory", labels_path);
    goto done;
  }
  for (uint64_t i = 0; i < n; i++) {
    if (lab[8 + i] >= 10) {
      snprintf(err, errcap, "%s: label %u of image %llu is out of range (10 classes)", labels_path,
               lab[8 + i], (unsigned long long)i);
      goto done;
    }
    out->labels[i] = lab[8 + i];
  }
  /* keep the pixel buffer, without its header */
  memmove(img, img + 16, n * rows * cols);
  out->pixels = img;
  img = NULL;
  rc = 0;
done:
  free(img);
  if (rc != 0) nn_data_free(out);
  return rc;
}

#define CIFAR_REC (1 + 3 * 32 * 32)

int nn_data_read_cifar(nn_dataset *out, const char *const *paths, int npaths, char *err,
                       size_t errcap) {
  memset(out, 0, sizeof *out);
  uint8_t *bufs[16] = {0};
  size_t lens[16] = {0};
  int rc = -1;
  if (npaths < 1 || npaths > 16) {
    snprintf(err, errcap, "cifar10: %d files (1 to 16)", npaths);
    return -1;
  }
  int i = 0;
  while (i < npaths && read_whole(&bufs[i], &lens[i], paths[i], err, errcap) == 0) i++;
  if (i == npaths)
    rc = nn_data_parse_cifar(out, (const uint8_t *const *)bufs, lens, paths, npaths, err, errcap);
  for (i = 0; i < npaths; i++) free(bufs[i]);
  return rc;
}

int nn_data_parse_cifar(nn_dataset *out, const uint8_t *const *bufs, const size_t *lens,
                        const char *const *paths, int npaths, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  int64_t total = 0;
  int rc = -1;
  if (npaths < 1 || npaths > 16) {
    snprintf(err, errcap, "cifar10: %d files (1 to 16)", npaths);
    return -1;
  }
  for (int i = 0; i < npaths; i++) {
    if (lens[i] == 0 || lens[i] % CIFAR_REC != 0) {
      data_errf(err, errcap, "%s: %s (%zu bytes is not a whole number of %d-byte records)",
               paths[i], lens[i] == 0 ? "empty" : "truncated or not a CIFAR-10 batch", lens[i],
               CIFAR_REC);
      goto done;
    }
    total += (int64_t)(lens[i] / CIFAR_REC);
  }
  out->c = 3;
  out->h = out->w = 32;
  out->classes = 10;
  out->n = total;
  const float mean[3] = {0.4914f, 0.4822f, 0.4465f}, std[3] = {0.2470f, 0.2435f, 0.2616f};
  memcpy(out->mean, mean, sizeof mean);
  memcpy(out->std, std, sizeof std);
  out->pixels = malloc((size_t)total * (CIFAR_REC - 1));
  out->labels = malloc((size_t)total * sizeof *out->labels);
  if (!out->pixels || !out->labels) {
    snprintf(err, errcap, "cifar10: out of memory");
    goto done;
  }
  int64_t k = 0;
  for (int i = 0; i < npaths; i++) {
    for (size_t r = 0; r < lens[i] / CIFAR_REC; r++, k++) {
      const uint8_t *rec = bufs[i] + r * CIFAR_REC;
      if (rec[0] >= 10) {
        data_errf(err, errcap, "%s: label %u of record %zu is out of range (10 classes)", paths[i],
                 rec[0], r);
        goto done;
      }
      out->labels[k] = rec[0];
      memcpy(out->pixels + (size_t)k * (CIFAR_REC - 1), rec + 1, CIFAR_REC - 1);
    }
  }
  rc = 0;
done:
  if (rc != 0) nn_data_free(out);
  return rc;
}

/* ---- the --data spec ---- */
static int parse_shape(const char *s, int *c, int *h, int *w) {
  char tail;
  if (sscanf(s, "%dx%dx%d%c", c, h, w, &tail) != 3) return -1;
  if (*c < 1 || *c > 3 || *h < 1 || *w < 1 || *h > 4096 || *w > 4096) return -1;
  return 0;
}

int nn_data_parse_spec(nn_data_spec *out, const char *s, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  if (!s || !*s) s = "fmnist";
  const char *colon = strchr(s, ':');
  size_t kl = colon ? (size_t)(colon - s) : strlen(s);
  const char *arg = colon ? colon + 1 : NULL;
  if (kl == 6 && !strncmp(s, "fmnist", 6)) {
    out->kind = NN_DATA_FMNIST;
    snprintf(out->dir, sizeof out->dir, "%s", arg && *arg ? arg : NN_DATA_FMNIST_DIR);
    return 0;
  }
  if (kl == 7 && !strncmp(s, "cifar10", 7)) {
    if (!arg || !*arg) {
      snprintf(err, errcap, "--data cifar10 needs a directory: cifar10:DIR");
      return -1;
    }
    out->kind = NN_DATA_CIFAR10;
    snprintf(out->dir, sizeof out->dir, "%s", arg);
    return 0;
  }
  if (kl == 9 && !strncmp(s, "synthetic", 9)) {
    out->kind = NN_DATA_SYNTHETIC;
    out->c = 3;
    out->h = out->w = 32;
    out->classes = 10;
    if (!arg) return 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", arg);
    char *parts[8] = {0};
    int np = 0, empty = 0;
    for (char *t = buf; t && np < 8;) { /* "3x32x32::5": an empty part, not N = 5 */
      char *colon = strchr(t, ':');
      if (colon) *colon = '\0';
      empty |= !*t;
      parts[np++] = t;
      t = colon ? colon + 1 : NULL;
    }
    char *end;
    long v;
    if (np == 0 || np > 3 || empty || parse_shape(parts[0], &out->c, &out->h, &out->w)) {
      snprintf(err, errcap, "bad --data '%s': want synthetic:CxHxW[:CLASSES[:N]], C 1..3", s);
      return -1;
    }
    if (np > 1) {
      errno = 0;
      v = strtol(parts[1], &end, 10);
      if (errno || *end || v < 2 || v > 100000) {
        snprintf(err, errcap, "bad --data '%s': classes must be 2..100000", s);
        return -1;
      }
      out->classes = (int)v;
    }
    if (np > 2) {
      errno = 0;
      v = strtol(parts[2], &end, 10);
      if (errno || *end || v < 1 || v > 100000000) {
        snprintf(err, errcap, "bad --data '%s': image count must be 1..1e8", s);
        return -1;
      }
      out->n = v;
    }
    return 0;
  }
  snprintf(err, errcap, "bad --data '%s': want fmnist[:DIR], cifar10:DIR or synthetic:CxHxW[:CLASSES[:N]]", s);
  return -1;
}

/* Learnable synthetic images: a class-dependent level plus noise, so a few steps of training
 * visibly lower the loss; pixels and labels are a function of (seed, split, index). */
static int make_synthetic(nn_dataset *d, const nn_data_spec *sp, int64_t n, uint64_t seed,
                          uint64_t split, char *err, size_t errcap) {
  memset(d, 0, sizeof *d);
  d->c = sp->c;
  d->h = sp->h;
  d->w = sp->w;
  d->classes = sp->classes;
  d->n = n;
  for (int c = 0; c < 3; c++) {
    d->mean[c] = 0.5f;
    d->std[c] = 0.25f;
  }
  size_t per = (size_t)d->c * d->h * d->w;
  d->pixels = malloc((size_t)n * per);
  d->labels = malloc((size_t)n * sizeof *d->labels);
  if (!d->pixels || !d->labels) {
    nn_data_free(d);
    snprintf(err, errcap, "synthetic: out of memory for %lld images", (long long)n);
    return -1;
  }
  uint64_t base = mix64(seed ^ mix64(split));
  for (int64_t i = 0; i < n; i++) {
    uint64_t s = mix64(base + (uint64_t)i);
    int label = (int)below(s, (uint64_t)d->classes);
    d->labels[i] = label;
    int level = 32 + (int)(160 * (int64_t)label / (d->classes - 1 > 0 ? d->classes - 1 : 1));
    uint8_t *px = d->pixels + (size_t)i * per;
    for (size_t k = 0; k < per; k += 8) {
      s += 0x9e3779b97f4a7c15ull;
      uint64_t r = mix64(s);
      for (size_t b = 0; b < 8 && k + b < per; b++) px[k + b] = (uint8_t)(level + ((r >> (8 * b)) & 63));
    }
  }
  return 0;
}

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

/* Prefers NAME.gz, falls back to the uncompressed NAME; reports the .gz name when neither is. */
static void idx_path(char *out, size_t cap, const char *dir, const char *name) {
  snprintf(out, cap, "%s/%s.gz", dir, name);
  if (file_exists(out)) return;
  snprintf(out, cap, "%s/%s", dir, name);
  if (file_exists(out)) return;
  snprintf(out, cap, "%s/%s.gz", dir, name);
}

static int same_shape(const nn_dataset *a, const nn_dataset *b, char *err, size_t errcap) {
  if (a->c == b->c && a->h == b->h && a->w == b->w) return 0;
  snprintf(err, errcap, "inconsistent shapes: training images are %dx%dx%d, test images %dx%dx%d",
           a->c, a->h, a->w, b->c, b->h, b->w);
  return -1;
}

int nn_data_load(nn_dataset *train, nn_dataset *test, const nn_data_spec *sp, uint64_t seed,
                 char *err, size_t errcap) {
  memset(train, 0, sizeof *train);
  memset(test, 0, sizeof *test);
  char e[1536];
  switch (sp->kind) {
  case NN_DATA_FMNIST: {
    char ti[2600], tl[2600], vi[2600], vl[2600];
    idx_path(ti, sizeof ti, sp->dir, "train-images-idx3-ubyte");
    idx_path(tl, sizeof tl, sp->dir, "train-labels-idx1-ubyte");
    idx_path(vi, sizeof vi, sp->dir, "t10k-images-idx3-ubyte");
    idx_path(vl, sizeof vl, sp->dir, "t10k-labels-idx1-ubyte");
    if (nn_data_read_idx(train, ti, tl, e, sizeof e) != 0 ||
        nn_data_read_idx(test, vi, vl, e, sizeof e) != 0 || same_shape(train, test, e, sizeof e)) {
      snprintf(err, errcap, "fmnist: %s", e);
      goto fail;
    }
    return 0;
  }
  case NN_DATA_CIFAR10: {
    char dir[2100];
    snprintf(dir, sizeof dir, "%s/cifar-10-batches-bin", sp->dir);
    char probe[2200];
    snprintf(probe, sizeof probe, "%s/data_batch_1.bin", dir);
    if (!file_exists(probe)) snprintf(dir, sizeof dir, "%s", sp->dir);
    char paths[5][2200], testp[2200];
    const char *pp[5];
    for (int i = 0; i < 5; i++) {
      snprintf(paths[i], sizeof paths[i], "%s/data_batch_%d.bin", dir, i + 1);
      pp[i] = paths[i];
    }
    snprintf(testp, sizeof testp, "%s/test_batch.bin", dir);
    const char *tp[1] = {testp};
    if (nn_data_read_cifar(train, pp, 5, e, sizeof e) != 0 ||
        nn_data_read_cifar(test, tp, 1, e, sizeof e) != 0) {
      snprintf(err, errcap, "cifar10: %s", e);
      goto fail;
    }
    return 0;
  }
  case NN_DATA_SYNTHETIC: {
    size_t per = (size_t)sp->c * sp->h * sp->w;
    int64_t n = sp->n;
    if (n <= 0) {
      n = (int64_t)((128u << 20) / per);
      if (n > 1024) n = 1024;
      if (n < 64) n = 64;
    }
    int64_t nt = n / 4 > 0 ? n / 4 : 1;
    if (make_synthetic(train, sp, n, seed, 1, err, errcap) != 0) goto fail;
    if (make_synthetic(test, sp, nt, seed, 2, err, errcap) != 0) goto fail;
    return 0;
  }
  }
  snprintf(err, errcap, "unknown data kind");
fail:
  nn_data_free(train);
  nn_data_free(test);
  return -1;
}
