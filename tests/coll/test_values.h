/* The collectives tests' own data: integer values whose reductions are exact in every dtype
 * (small sums, products of +-1 and 2), written and read per dtype without the library's
 * conversions, and how two values combine under an op. */
#ifndef FABENCH_TEST_VALUES_H
#define FABENCH_TEST_VALUES_H

#include <stdint.h>
#include <string.h>

#include "coll.h"

/* The test's own data: integer values with exact reductions, not the library's pattern. */
static inline double ref_value(size_t i, int rank, int dt, int op) {
  uint64_t x = (uint64_t)i * 0x9E3779B1u + (uint64_t)(rank + 1) * 0x85EBCA77u + (uint64_t)(dt * 31 + op);
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  if (op == COLL_PROD) return (x & 1 ? 1.0 : 2.0) * (x & 2 ? -1.0 : 1.0);
  return (double)(int)(x & 7) - 4.0;
}

static inline void put(void *b, size_t i, coll_dtype dt, double v) {
  switch (dt) {
  case COLL_F32: ((float *)b)[i] = (float)v; break;
  case COLL_F64: ((double *)b)[i] = v; break;
  case COLL_I32: ((int32_t *)b)[i] = (int32_t)v; break;
  case COLL_I64: ((int64_t *)b)[i] = (int64_t)v; break;
  case COLL_F16: { /* small integers: exact in f16; build the bits by hand */
    float f = (float)v;
    uint16_t h = 0;
    if (f != 0) {
      uint16_t sign = f < 0 ? 0x8000 : 0;
      float a = f < 0 ? -f : f;
      int e = 0;
      while (a >= 2) a /= 2, e++;
      uint16_t man = (uint16_t)((a - 1.0f) * 1024.0f);
      h = (uint16_t)(sign | ((e + 15) << 10) | man);
    }
    ((uint16_t *)b)[i] = h;
    break;
  }
  case COLL_BF16: {
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    ((uint16_t *)b)[i] = (uint16_t)(u >> 16); /* exact for small integers */
    break;
  }
  default: break;
  }
}

static inline double get(const void *b, size_t i, coll_dtype dt) {
  switch (dt) {
  case COLL_F32: return ((const float *)b)[i];
  case COLL_F64: return ((const double *)b)[i];
  case COLL_I32: return ((const int32_t *)b)[i];
  case COLL_I64: return (double)((const int64_t *)b)[i];
  case COLL_F16: {
    uint16_t h = ((const uint16_t *)b)[i];
    if ((h & 0x7fff) == 0) return 0;
    int e = ((h >> 10) & 31) - 15;
    double m = 1.0 + (h & 1023) / 1024.0;
    double v = m;
    for (; e > 0; e--) v *= 2;
    for (; e < 0; e++) v /= 2;
    return h & 0x8000 ? -v : v;
  }
  case COLL_BF16: {
    uint32_t u = (uint32_t)((const uint16_t *)b)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
  }
  default: return 0;
  }
}

static inline double combine(double a, double b, coll_op op) {
  switch (op) {
  case COLL_SUM: return a + b;
  case COLL_PROD: return a * b;
  case COLL_MIN: return b < a ? b : a;
  default: return b > a ? b : a;
  }
}

#endif
