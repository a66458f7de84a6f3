/* Reduction kernels. Plain loops over restrict pointers that gcc vectorizes; this file is
 * built with -O3 (see CMakeLists.txt), as -O2 leaves loops of unknown length scalar. f16
 * and bf16 go through f32 in blocks so the conversion loops vectorize too. */
#include <math.h>
#include <string.h>

#include "coll_internal.h"

/* x86 with F16C converts in hardware; elsewhere the portable bit manipulation below. */
#if defined(__F16C__)
#include <immintrin.h>
#endif

float coll_f16_to_f32(uint16_t h) {
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else { /* subnormal: normalise */
      int e = -1;
      do {
        e++;
        man <<= 1;
      } while (!(man & 0x400u));
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112u) << 23) | (man << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

uint16_t coll_f32_to_f16(float f) {
#if defined(__F16C__)
  return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
#else
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) /* inf or nan */
    return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
  if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to inf */
  if (ax < 0x38800000u) {                                   /* subnormal or zero in f16 */
    if (ax < 0x33000000u) return (uint16_t)sign;
    uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14 + (113 - e) - 1 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(sign | r);
  }
  uint32_t r = ((ax - 0x38000000u) >> 13);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) r++;
  return (uint16_t)(sign | r);
#endif
}

float coll_bf16_to_f32(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t coll_f32_to_bf16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet nan */
  x += 0x7fffu + ((x >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(x >> 16);
}

void coll_f32_to_half_n(uint16_t *restrict dst, const float *restrict src, size_t n, float scale,
                        coll_dtype dt) {
  if (dt == COLL_BF16)
    for (size_t i = 0; i < n; i++) dst[i] = coll_f32_to_bf16(src[i] * scale);
  else
    for (size_t i = 0; i < n; i++) dst[i] = coll_f32_to_f16(src[i] * scale);
}

void coll_half_to_f32_n(float *restrict dst, const uint16_t *restrict src, size_t n, coll_dtype dt) {
  if (dt == COLL_BF16)
    for (size_t i = 0; i < n; i++) dst[i] = coll_bf16_to_f32(src[i]);
  else
    for (size_t i = 0; i < n; i++) dst[i] = coll_f16_to_f32(src[i]);
}

#define COLL_DEF_REDUCE(T, NAME)                                                          \
  static void NAME##_sum(T *restrict a, const T *restrict b, size_t n) {                  \
    for (size_t i = 0; i < n; i++) a[i] += b[i];                                          \
  }                                                                                       \
  static void NAME##_prod(T *restrict a, const T *restrict b, size_t n) {                 \
    for (size_t i = 0; i < n; i++) a[i] *= b[i];                                          \
  }                                                                                       \
  static void NAME##_min(T *restrict a, const T *restrict b, size_t n) {                  \
    for (size_t i = 0; i < n; i++) a[i] = b[i] < a[i] ? b[i] : a[i];                      \
  }                                                                                       \
  static void NAME##_max(T *restrict a, const T *restrict b, size_t n) {                  \
    for (size_t i = 0; i < n; i++) a[i] = b[i] > a[i] ? b[i] : a[i];                      \
  }                                                                                       \
  static void NAME(void *a, const void *b, size_t n, coll_op op) {                        \
    switch (op) {                                                                         \
    case COLL_SUM: NAME##_sum(a, b, n); break;                                            \
    case COLL_PROD: NAME##_prod(a, b, n); break;                                          \
    case COLL_MIN: NAME##_min(a, b, n); break;                                            \
    default: NAME##_max(a, b, n); break;                                                  \
    }                                                                                     \
  }

COLL_DEF_REDUCE(float, coll_red_f32)
COLL_DEF_REDUCE(double, coll_red_f64)
COLL_DEF_REDUCE(int32_t, coll_red_i32)
COLL_DEF_REDUCE(int64_t, coll_red_i64)

/* Integer sum and product wrap around (two's complement), as MPI and NCCL do; computed in
 * unsigned arithmetic so it is defined behaviour. */
static void coll_red_i32w(void *a, const void *b, size_t n, coll_op op) {
  if (op != COLL_SUM && op != COLL_PROD) return coll_red_i32(a, b, n, op);
  uint32_t *restrict x = a;
  const uint32_t *restrict y = b;
  if (op == COLL_SUM)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
  else
    for (size_t i = 0; i < n; i++) x[i] *= y[i];
}
static void coll_red_i64w(void *a, const void *b, size_t n, coll_op op) {
  if (op != COLL_SUM && op != COLL_PROD) return coll_red_i64(a, b, n, op);
  uint64_t *restrict x = a;
  const uint64_t *restrict y = b;
  if (op == COLL_SUM)
    for (size_t i = 0; i < n; i++) x[i] += y[i];
  else
    for (size_t i = 0; i < n; i++) x[i] *= y[i];
}

/* 16-bit floats: widen a block to f32, reduce, narrow back. */
#define COLL_HBLOCK 256
static void coll_red_half(uint16_t *a, const uint16_t *b, size_t n, coll_op op, int bf) {
  float fa[COLL_HBLOCK], fb[COLL_HBLOCK];
  for (size_t s = 0; s < n; s += COLL_HBLOCK) {
    size_t m = n - s < COLL_HBLOCK ? n - s : COLL_HBLOCK;
    if (bf) {
      for (size_t i = 0; i < m; i++) fa[i] = coll_bf16_to_f32(a[s + i]);
      for (size_t i = 0; i < m; i++) fb[i] = coll_bf16_to_f32(b[s + i]);
    } else {
      for (size_t i = 0; i < m; i++) fa[i] = coll_f16_to_f32(a[s + i]);
      for (size_t i = 0; i < m; i++) fb[i] = coll_f16_to_f32(b[s + i]);
    }
    coll_red_f32(fa, fb, m, op);
    if (bf)
      for (size_t i = 0; i < m; i++) a[s + i] = coll_f32_to_bf16(fa[i]);
    else
      for (size_t i = 0; i < m; i++) a[s + i] = coll_f32_to_f16(fa[i]);
  }
}

void coll_reduce(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op) {
  if (count == 0) return;
  switch (dt) {
  case COLL_F32: coll_red_f32(inout, in, count, op); break;
  case COLL_F64: coll_red_f64(inout, in, count, op); break;
  case COLL_I32: coll_red_i32w(inout, in, count, op); break;
  case COLL_I64: coll_red_i64w(inout, in, count, op); break;
  case COLL_F16: coll_red_half(inout, in, count, op, 0); break;
  case COLL_BF16: coll_red_half(inout, in, count, op, 1); break;
  default: break;
  }
}

/* ---- streaming variants: results that another core reads next go to memory, not to this
 * core's cache (non-temporal stores). See algo_ring.c for when and why. ---- */
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static void coll_stream_bytes(void *dst, const void *src, size_t bytes) {
  char *d = dst;
  const char *s = src;
#if defined(__SSE2__)
  size_t head = (16 - ((uintptr_t)d & 15)) & 15;
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head, s += head, bytes -= head;
  for (; bytes >= 64; d += 64, s += 64, bytes -= 64) {
    __m128i x0 = _mm_loadu_si128((const __m128i *)s), x1 = _mm_loadu_si128((const __m128i *)(s + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(s + 32)), x3 = _mm_loadu_si128((const __m128i *)(s + 48));
    _mm_stream_si128((__m128i *)d, x0);
    _mm_stream_si128((__m128i *)(d + 16), x1);
    _mm_stream_si128((__m128i *)(d + 32), x2);
    _mm_stream_si128((__m128i *)(d + 48), x3);
  }
  for (; bytes >= 16; d += 16, s += 16, bytes -= 16)
    _mm_stream_si128((__m128i *)d, _mm_loadu_si128((const __m128i *)s));
#endif
  memcpy(d, s, bytes);
}

static void coll_stream_fence(void) {
#if defined(__SSE2__)
  _mm_sfence(); /* streaming stores are weakly ordered: visible before any later signal */
#endif
}

void coll_copy_stream(void *dst, const void *src, size_t bytes) {
  coll_stream_bytes(dst, src, bytes);
  coll_stream_fence();
}

/* Tile by tile: a tile of `first` is reduced with `second`'s in L1 by the ordinary kernels, then
 * written to out (and out2 unless NULL), streamed where `stream`. An output may be either input:
 * each tile is read before it is written. */
#define COLL_STREAM_TILE 8192
static void coll_reduce_tiles(char *out, char *out2, const char *first, const char *second, size_t count,
                              coll_dtype dt, coll_op op, int stream) {
  size_t es = coll_dtype_size(dt), per = COLL_STREAM_TILE / es;
  _Alignas(64) unsigned char tile[COLL_STREAM_TILE];
  for (size_t s = 0; s < count; s += per) {
    size_t m = count - s < per ? count - s : per, off = s * es;
    memcpy(tile, first + off, m * es);
    coll_reduce(tile, second + off, m, dt, op);
    for (int k = 0; k < 2; k++) {
      char *o = k ? out2 : out;
      if (!o) continue;
      if (stream)
        coll_stream_bytes(o + off, tile, m * es);
      else
        memcpy(o + off, tile, m * es);
    }
  }
  if (stream) coll_stream_fence();
}

void coll_reduce_stream(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op) {
  coll_reduce_tiles(inout, NULL, inout, in, count, dt, op, 1);
}

/* inout = in (op) inout, the operands in that order (rd's upper partner, the fold's odd rank): one
 * pass where a reduction into a scratch and a copy back took two. */
void coll_reduce_rev(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op) {
  coll_reduce_tiles(inout, NULL, in, inout, count, dt, op, 0);
}

/* The mapped ring's last reduce-scatter step, which hands its block to the right neighbour too:
 * the tile, still in L1, is written to the second place as well. out2 may be `in` (two ranks). */
void coll_reduce2(void *inout, void *out2, const void *in, size_t count, coll_dtype dt, coll_op op, int stream) {
  coll_reduce_tiles(inout, out2, inout, in, count, dt, op, stream);
}
