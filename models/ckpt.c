/* Checkpoints: a little-endian header, the parameter, momentum and buffer arenas as float32,
 * and a zlib crc32 of everything before it. Replaced whole (util_file_replace: synced, renamed). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nn_data.h"
#include "util.h"

static const char ckpt_magic[8] = {'F', 'A', 'B', 'C', 'K', 'P', 'T', '\n'};
#define HDR_BYTES 512 /* fixed, zero-padded: room for fields of later versions */

_Static_assert(sizeof(float) == 4, "float32 arenas");

typedef struct {
  uint8_t *p;
  size_t off, cap;
} wbuf;

static void put_u32(wbuf *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b->p[b->off++] = (uint8_t)(v >> (8 * i));
}
static void put_u64(wbuf *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b->p[b->off++] = (uint8_t)(v >> (8 * i));
}
static void put_f64(wbuf *b, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  put_u64(b, u);
}
static void put_str(wbuf *b, const char *s, size_t n) {
  memset(b->p + b->off, 0, n);
  memcpy(b->p + b->off, s, strnlen(s, n - 1));
  b->off += n;
}
static uint32_t get_u32(const uint8_t *p, size_t *off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[*off + i] << (8 * i);
  *off += 4;
  return v;
}
static uint64_t get_u64(const uint8_t *p, size_t *off) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[*off + i] << (8 * i);
  *off += 8;
  return v;
}
static double get_f64(const uint8_t *p, size_t *off) {
  uint64_t u = get_u64(p, off);
  double v;
  memcpy(&v, &u, 8);
  return v;
}
static void get_str(char *dst, size_t dcap, const uint8_t *p, size_t *off, size_t n) {
  size_t k = strnlen((const char *)p + *off, n);
  if (k >= dcap) k = dcap - 1;
  memcpy(dst, p + *off, k);
  dst[k] = 0;
  *off += n;
}

static void put_floats(wbuf *b, const float *v, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], 4);
    put_u32(b, u);
  }
}
static void get_floats(float *v, const uint8_t *p, size_t *off, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uint32_t u = get_u32(p, off);
    memcpy(&v[i], &u, 4);
  }
}

static void encode_header(wbuf *b, const nn_ckpt_info *in) {
  memcpy(b->p, ckpt_magic, 8);
  b->off = 8;
  put_u32(b, NN_CKPT_VERSION);
  put_u32(b, HDR_BYTES);
  put_str(b, in->model, sizeof in->model);
  put_str(b, in->data, sizeof in->data);
  int32_t ints[7] = {in->in_c, in->in_h, in->in_w, in->classes, in->batch, in->rank, in->world};
  for (int i = 0; i < 7; i++) put_u32(b, (uint32_t)ints[i]);
  put_u64(b, in->seed);
  put_u64(b, (uint64_t)in->epoch);
  put_u64(b, (uint64_t)in->step);
  put_u64(b, (uint64_t)in->global_step);
  put_f64(b, in->elapsed_s);
  put_u64(b, in->n_params);
  put_u64(b, in->n_momentum);
  put_u64(b, in->n_buffers);
  memset(b->p + b->off, 0, HDR_BYTES - b->off);
  b->off = HDR_BYTES;
}

static void decode_header(nn_ckpt_info *o, const uint8_t *p) {
  memset(o, 0, sizeof *o);
  size_t off = 16;
  get_str(o->model, sizeof o->model, p, &off, sizeof o->model);
  get_str(o->data, sizeof o->data, p, &off, sizeof o->data);
  int32_t *ints[7] = {&o->in_c, &o->in_h, &o->in_w, &o->classes, &o->batch, &o->rank, &o->world};
  for (int i = 0; i < 7; i++) *ints[i] = (int32_t)get_u32(p, &off);
  o->seed = get_u64(p, &off);
  o->epoch = (int64_t)get_u64(p, &off);
  o->step = (int64_t)get_u64(p, &off);
  o->global_step = (int64_t)get_u64(p, &off);
  o->elapsed_s = get_f64(p, &off);
  o->n_params = get_u64(p, &off);
  o->n_momentum = get_u64(p, &off);
  o->n_buffers = get_u64(p, &off);
}

int nn_ckpt_save(const char *path, const nn_ckpt_info *info, const float *params,
                 const float *momentum, const float *buffers, char *err, size_t errcap) {
  uint64_t nf = info->n_params + info->n_momentum + info->n_buffers;
  size_t total = HDR_BYTES + 4 * (size_t)nf + 4;
  wbuf b = {malloc(total), 0, total};
  if (!b.p) {
    snprintf(err, errcap, "checkpoint %s: out of memory", path);
    return -1;
  }
  encode_header(&b, info);
  put_floats(&b, params, info->n_params);
  put_floats(&b, momentum, info->n_momentum);
  put_floats(&b, buffers, info->n_buffers);
  put_u32(&b, (uint32_t)crc32_z(0L, b.p, b.off));

  /* whole or not at all, as run.json: a kill or a stop signal mid-save leaves the previous
   * checkpoint and no partial temporary beside it */
  char e[4400];
  int rc = util_file_replace(path, b.p, b.off, e, sizeof e);
  free(b.p);
  if (rc) snprintf(err, errcap, "checkpoint: %s", e);
  return rc;
}

/* Reads and verifies the whole file: size, magic, version, length, checksum. */
static int read_verified(uint8_t **out, size_t *len, nn_ckpt_info *info, const char *path,
                         char *err, size_t errcap) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errcap, "checkpoint %s: %s", path, strerror(errno));
    return -1;
  }
  uint8_t *p = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : (1 << 20);
      uint8_t *np = realloc(p, cap);
      if (!np) {
        free(p);
        fclose(f);
        snprintf(err, errcap, "checkpoint %s: out of memory", path);
        return -1;
      }
      p = np;
    }
    size_t got = fread(p + n, 1, cap - n, f);
    n += got;
    if (got == 0) break;
  }
  int ioerr = ferror(f);
  fclose(f);
  char why[200];
  if (ioerr) snprintf(why, sizeof why, "read error");
  if (ioerr || nn_ckpt_parse(info, p, n, why, sizeof why) != 0) {
    snprintf(err, errcap, "checkpoint %s: %s", path, why);
    free(p);
    return -1;
  }
  *out = p;
  *len = n;
  return 0;
}

int nn_ckpt_parse(nn_ckpt_info *info, const uint8_t *p, size_t n, char *why, size_t cap) {
  memset(info, 0, sizeof *info);
  if (n < 16) {
    snprintf(why, cap, "truncated (shorter than its header)");
    return -1;
  }
  if (memcmp(p, ckpt_magic, 8) != 0) {
    snprintf(why, cap, "not a fabench checkpoint (wrong magic)");
    return -1;
  }
  size_t off = 8;
  uint32_t ver = get_u32(p, &off), hdr = get_u32(p, &off);
  if (ver != NN_CKPT_VERSION) {
    snprintf(why, cap, "version %u, this fabench reads version %d", ver, NN_CKPT_VERSION);
    return -1;
  }
  if (hdr != HDR_BYTES || n < HDR_BYTES + 4) {
    snprintf(why, cap, "truncated or damaged header");
    return -1;
  }
  decode_header(info, p);
  uint64_t nf = info->n_params + info->n_momentum + info->n_buffers;
  if (info->n_params > (1ull << 40) || info->n_momentum > (1ull << 40) ||
      info->n_buffers > (1ull << 40) || n != HDR_BYTES + 4 * nf + 4) {
    snprintf(why, cap, "%s (%zu bytes, its header says %llu)",
             n < HDR_BYTES + 4 * nf + 4 ? "truncated" : "wrong length", n,
             (unsigned long long)(HDR_BYTES + 4 * nf + 4));
    return -1;
  }
  size_t o2 = n - 4;
  uint32_t want = get_u32(p, &o2);
  if ((uint32_t)crc32_z(0L, p, n - 4) != want) {
    snprintf(why, cap, "corrupted (checksum mismatch)");
    return -1;
  }
  return 0;
}

int nn_ckpt_read_info(const char *path, nn_ckpt_info *info, char *err, size_t errcap) {
  uint8_t *p;
  size_t n;
  if (read_verified(&p, &n, info, path, err, errcap) != 0) return -1;
  free(p);
  return 0;
}

int nn_ckpt_check(const nn_ckpt_info *have, const nn_ckpt_info *want, char *err, size_t errcap) {
#define DIFF_STR(f)                                                                      \
  if (strcmp(have->f, want->f) != 0) {                                                   \
    snprintf(err, errcap, "checkpoint is for " #f " '%s', this run has '%s'", have->f, want->f); \
    return -1;                                                                           \
  }
#define DIFF_NUM(f)                                                                      \
  if (have->f != want->f) {                                                              \
    snprintf(err, errcap, "checkpoint has " #f " %lld, this run has %lld", (long long)have->f, \
             (long long)want->f);                                                        \
    return -1;                                                                           \
  }
  DIFF_STR(model)
  DIFF_NUM(in_c)
  DIFF_NUM(in_h)
  DIFF_NUM(in_w)
  DIFF_NUM(classes)
  DIFF_NUM(n_params)
  DIFF_NUM(n_momentum)
  DIFF_NUM(n_buffers)
  DIFF_STR(data)
  DIFF_NUM(batch)
  DIFF_NUM(world)
  DIFF_NUM(rank)
#undef DIFF_STR
#undef DIFF_NUM
  return 0;
}

int nn_ckpt_load(const char *path, nn_ckpt_info *info, float *params, float *momentum,
                 float *buffers, const nn_ckpt_info *want, char *err, size_t errcap) {
  uint8_t *p;
  size_t n;
  if (read_verified(&p, &n, info, path, err, errcap) != 0) return -1;
  char e[512];
  if (nn_ckpt_check(info, want, e, sizeof e) != 0) {
    snprintf(err, errcap, "checkpoint %s: %s", path, e);
    free(p);
    return -1;
  }
  size_t off = HDR_BYTES;
  get_floats(params, p, &off, info->n_params);
  get_floats(momentum, p, &off, info->n_momentum);
  get_floats(buffers, p, &off, info->n_buffers);
  free(p);
  return 0;
}
