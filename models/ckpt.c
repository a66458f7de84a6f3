/* Checkpoints, the gathered form: a little-endian header, the parameter, momentum and buffer
 * arenas as float32, and a zlib crc32 of everything before it. Replaced whole
 * (util_file_replace: synced, renamed). The header and the framing checks are shared with the
 * sharded form (ckpt_shard.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "ckpt_int.h"
#include "util.h"

const char ckpt_magic_gathered[8] = {'F', 'A', 'B', 'C', 'K', 'P', 'T', '\n'};
const char ckpt_magic_manifest[8] = {'F', 'A', 'B', 'C', 'K', 'M', 'F', '\n'};
const char ckpt_magic_shard[8] = {'F', 'A', 'B', 'C', 'K', 'S', 'H', '\n'};

static void put_f64(ckpt_wbuf *b, double v) {
  uint64_t u;
  memcpy(&u, &v, 8);
  ckpt_put_u64(b, u);
}
static void put_str(ckpt_wbuf *b, const char *s, size_t n) {
  memset(b->p + b->off, 0, n);
  memcpy(b->p + b->off, s, strnlen(s, n - 1));
  b->off += n;
}
static double get_f64(const uint8_t *p, size_t *off) {
  uint64_t u = ckpt_get_u64(p, off);
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

/* The gathered form leaves sharded, set_id and extra 0: the padding its first files had there. */
void ckpt_encode_header(ckpt_wbuf *b, const char magic[8], const nn_ckpt_info *in, uint32_t extra) {
  memcpy(b->p, magic, 8);
  b->off = 8;
  ckpt_put_u32(b, NN_CKPT_VERSION);
  ckpt_put_u32(b, CKPT_HDR_BYTES);
  put_str(b, in->model, sizeof in->model);
  put_str(b, in->data, sizeof in->data);
  int32_t ints[7] = {in->in_c, in->in_h, in->in_w, in->classes, in->batch, in->rank, in->world};
  for (int i = 0; i < 7; i++) ckpt_put_u32(b, (uint32_t)ints[i]);
  ckpt_put_u64(b, in->seed);
  ckpt_put_u64(b, (uint64_t)in->epoch);
  ckpt_put_u64(b, (uint64_t)in->step);
  ckpt_put_u64(b, (uint64_t)in->global_step);
  put_f64(b, in->elapsed_s);
  ckpt_put_u64(b, in->n_params);
  ckpt_put_u64(b, in->n_momentum);
  ckpt_put_u64(b, in->n_buffers);
  ckpt_put_u32(b, (uint32_t)in->sharded);
  ckpt_put_u64(b, in->set_id);
  ckpt_put_u32(b, extra);
  memset(b->p + b->off, 0, CKPT_HDR_BYTES - b->off);
  b->off = CKPT_HDR_BYTES;
}

static void decode_header(nn_ckpt_info *o, uint32_t *extra, const uint8_t *p) {
  memset(o, 0, sizeof *o);
  size_t off = 16;
  get_str(o->model, sizeof o->model, p, &off, sizeof o->model);
  get_str(o->data, sizeof o->data, p, &off, sizeof o->data);
  int32_t *ints[7] = {&o->in_c, &o->in_h, &o->in_w, &o->classes, &o->batch, &o->rank, &o->world};
  for (int i = 0; i < 7; i++) *ints[i] = (int32_t)ckpt_get_u32(p, &off);
  o->seed = ckpt_get_u64(p, &off);
  o->epoch = (int64_t)ckpt_get_u64(p, &off);
  o->step = (int64_t)ckpt_get_u64(p, &off);
  o->global_step = (int64_t)ckpt_get_u64(p, &off);
  o->elapsed_s = get_f64(p, &off);
  o->n_params = ckpt_get_u64(p, &off);
  o->n_momentum = ckpt_get_u64(p, &off);
  o->n_buffers = ckpt_get_u64(p, &off);
  o->sharded = (int32_t)ckpt_get_u32(p, &off);
  o->set_id = ckpt_get_u64(p, &off);
  uint32_t x = ckpt_get_u32(p, &off);
  if (extra) *extra = x;
}

int ckpt_frame(const char magic[8], const uint8_t *p, size_t n, nn_ckpt_info *info, uint32_t *extra,
               char *why, size_t cap) {
  memset(info, 0, sizeof *info);
  if (n < 16) {
    snprintf(why, cap, "truncated (shorter than its header)");
    return -1;
  }
  if (memcmp(p, magic, 8) != 0) {
    const char *what = !memcmp(p, ckpt_magic_gathered, 8)   ? "a gathered checkpoint (one file of the whole model)"
                       : !memcmp(p, ckpt_magic_manifest, 8) ? "a sharded checkpoint's manifest"
                       : !memcmp(p, ckpt_magic_shard, 8)    ? "one rank's shard of a sharded checkpoint"
                                                            : NULL;
    if (what) snprintf(why, cap, "%s, not %s", what,
                       magic == ckpt_magic_gathered   ? "a gathered checkpoint"
                       : magic == ckpt_magic_manifest ? "a sharded checkpoint's manifest"
                                                      : "a checkpoint shard");
    else snprintf(why, cap, "not a fabench checkpoint (wrong magic)");
    return -1;
  }
  size_t off = 8;
  uint32_t ver = ckpt_get_u32(p, &off), hdr = ckpt_get_u32(p, &off);
  if (ver != NN_CKPT_VERSION) {
    snprintf(why, cap, "version %u, this fabench reads version %d", ver, NN_CKPT_VERSION);
    return -1;
  }
  if (hdr != CKPT_HDR_BYTES || n < CKPT_HDR_BYTES + 4) {
    snprintf(why, cap, "truncated or damaged header");
    return -1;
  }
  decode_header(info, extra, p);
  return 0;
}

int ckpt_crc_ok(const uint8_t *p, size_t n) {
  size_t o2 = n - 4;
  return (uint32_t)crc32_z(0L, p, n - 4) == ckpt_get_u32(p, &o2);
}

int nn_ckpt_save(const char *path, const nn_ckpt_info *info, const float *params,
                 const float *momentum, const float *buffers, char *err, size_t errcap) {
  uint64_t nf = info->n_params + info->n_momentum + info->n_buffers;
  size_t total = CKPT_HDR_BYTES + 4 * (size_t)nf + 4;
  ckpt_wbuf b = {malloc(total), 0, total};
  if (!b.p) {
    snprintf(err, errcap, "checkpoint %s: out of memory", path);
    return -1;
  }
  nn_ckpt_info in = *info;
  in.sharded = 0;
  in.set_id = 0;
  ckpt_encode_header(&b, ckpt_magic_gathered, &in, 0);
  ckpt_put_floats(&b, params, info->n_params);
  ckpt_put_floats(&b, momentum, info->n_momentum);
  ckpt_put_floats(&b, buffers, info->n_buffers);
  ckpt_put_u32(&b, (uint32_t)crc32_z(0L, b.p, b.off));

  /* whole or not at all, as run.json: a kill or a stop signal mid-save leaves the previous
   * checkpoint and no partial temporary beside it */
  char e[4400];
  int rc = util_file_replace(path, b.p, b.off, e, sizeof e);
  free(b.p);
  if (rc) snprintf(err, errcap, "checkpoint: %s", e);
  return rc;
}

int ckpt_read_file(const char *path, uint8_t **out, size_t *len, char *err, size_t errcap) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errcap, "%s: %s", path, strerror(errno));
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
        snprintf(err, errcap, "%s: out of memory", path);
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
  if (ioerr) {
    free(p);
    snprintf(err, errcap, "%s: read error", path);
    return -1;
  }
  *out = p;
  *len = n;
  return 0;
}

/* Reads and verifies the whole file: size, magic, version, length, checksum. */
static int read_verified(uint8_t **out, size_t *len, nn_ckpt_info *info, const char *path,
                         char *err, size_t errcap) {
  char e[4400], why[200];
  if (ckpt_read_file(path, out, len, e, sizeof e)) {
    snprintf(err, errcap, "checkpoint %s", e);
    return -1;
  }
  if (nn_ckpt_parse(info, *out, *len, why, sizeof why) != 0) {
    snprintf(err, errcap, "checkpoint %s: %s", path, why);
    free(*out);
    *out = NULL;
    return -1;
  }
  return 0;
}

int nn_ckpt_parse(nn_ckpt_info *info, const uint8_t *p, size_t n, char *why, size_t cap) {
  if (ckpt_frame(ckpt_magic_gathered, p, n, info, NULL, why, cap)) return -1;
  info->sharded = 0; /* the gathered form's padding, whatever a damaged file holds there */
  info->set_id = 0;
  uint64_t nf = info->n_params + info->n_momentum + info->n_buffers;
  if (info->n_params > (1ull << 40) || info->n_momentum > (1ull << 40) ||
      info->n_buffers > (1ull << 40) || n != CKPT_HDR_BYTES + 4 * nf + 4) {
    snprintf(why, cap, "%s (%zu bytes, its header says %llu)",
             n < CKPT_HDR_BYTES + 4 * nf + 4 ? "truncated" : "wrong length", n,
             (unsigned long long)(CKPT_HDR_BYTES + 4 * nf + 4));
    return -1;
  }
  if (!ckpt_crc_ok(p, n)) {
    snprintf(why, cap, "corrupted (checksum mismatch)");
    return -1;
  }
  return 0;
}

int nn_ckpt_read_info(const char *path, nn_ckpt_info *info, char *err, size_t errcap) {
  uint8_t *p;
  size_t n;
  char e[4400], why[200];
  if (ckpt_read_file(path, &p, &n, e, sizeof e)) {
    snprintf(err, errcap, "checkpoint %s", e);
    return -1;
  }
  /* either form: a sharded set's manifest says sharded (its ZeRO stage) */
  int rc = n >= 8 && !memcmp(p, ckpt_magic_manifest, 8) ? ckpt_manifest_parse(p, n, info, NULL, why, sizeof why)
                                                       : nn_ckpt_parse(info, p, n, why, sizeof why);
  if (rc) snprintf(err, errcap, "checkpoint %s: %s", path, why);
  free(p);
  return rc ? -1 : 0;
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
  size_t off = CKPT_HDR_BYTES;
  ckpt_get_floats(params, p, &off, info->n_params);
  ckpt_get_floats(momentum, p, &off, info->n_momentum);
  ckpt_get_floats(buffers, p, &off, info->n_buffers);
  free(p);
  return 0;
}
