/* models, private to the checkpoint files (ckpt.c: the gathered form, ckpt_shard.c: the sharded
 * form): the little-endian encoding, the 512-byte header both forms share, and the file read
 * and framing checks (magic, version, header length, checksum). */
#ifndef FABENCH_CKPT_INT_H
#define FABENCH_CKPT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nn.h"

#define CKPT_HDR_BYTES 512 /* fixed, zero-padded: room for fields of later versions */

_Static_assert(sizeof(float) == 4, "float32 arenas");

typedef struct {
  uint8_t *p;
  size_t off, cap;
} ckpt_wbuf;

static inline void ckpt_put_u32(ckpt_wbuf *b, uint32_t v) {
  for (int i = 0; i < 4; i++) b->p[b->off++] = (uint8_t)(v >> (8 * i));
}
static inline void ckpt_put_u64(ckpt_wbuf *b, uint64_t v) {
  for (int i = 0; i < 8; i++) b->p[b->off++] = (uint8_t)(v >> (8 * i));
}
static inline uint32_t ckpt_get_u32(const uint8_t *p, size_t *off) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[*off + i] << (8 * i);
  *off += 4;
  return v;
}
static inline uint64_t ckpt_get_u64(const uint8_t *p, size_t *off) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[*off + i] << (8 * i);
  *off += 8;
  return v;
}
static inline void ckpt_put_floats(ckpt_wbuf *b, const float *v, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &v[i], 4);
    ckpt_put_u32(b, u);
  }
}
static inline void ckpt_get_floats(float *v, const uint8_t *p, size_t *off, uint64_t n) {
  for (uint64_t i = 0; i < n; i++) {
    uint32_t u = ckpt_get_u32(p, off);
    memcpy(&v[i], &u, 4);
  }
}

/* The header with its magic, every nn_ckpt_info field and `extra` (a form's own count; 0 for
 * the gathered form); b->off ends at CKPT_HDR_BYTES. */
void ckpt_encode_header(ckpt_wbuf *b, const char magic[8], const nn_ckpt_info *in, uint32_t extra);
/* Checks magic, version and header length of n bytes at p, then decodes the header (and extra,
 * may be NULL). 0, or -1 with the reason in why. */
int ckpt_frame(const char magic[8], const uint8_t *p, size_t n, nn_ckpt_info *info, uint32_t *extra,
               char *why, size_t cap);
/* Whether the last 4 bytes are the crc32 of the rest (n >= 4). */
int ckpt_crc_ok(const uint8_t *p, size_t n);
/* The whole file into *out (free it). 0, or -1 with err naming the file. */
int ckpt_read_file(const char *path, uint8_t **out, size_t *len, char *err, size_t errcap);

/* A sharded set's manifest (ckpt_shard.c): verified and decoded; refs (may be NULL) gets the
 * info->world ranks' files' lengths and checksums. 0, or -1 with the reason in why. */
int ckpt_manifest_parse(const uint8_t *p, size_t n, nn_ckpt_info *info, nn_ckpt_shard_ref *refs, char *why,
                        size_t cap);

extern const char ckpt_magic_gathered[8], ckpt_magic_manifest[8], ckpt_magic_shard[8];

#endif
