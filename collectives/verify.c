/* Seeded, integer-valued data and its exact expected reduction, for --check and the tests. */
#include "coll_internal.h"

/* splitmix64 of (seed, rank, index): cheap, stateless, so any element can be regenerated. */
static uint64_t verify_mix(uint64_t seed, int rank, size_t i) {
  uint64_t z = seed ^ ((uint64_t)(uint32_t)rank << 40) ^ (uint64_t)i;
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double coll_pattern_value(size_t i, coll_dtype dt, coll_op op, int rank, uint64_t seed) {
  uint64_t h = verify_mix(seed ^ ((uint64_t)dt << 56) ^ ((uint64_t)op << 60), rank, i);
  if (op == COLL_PROD) {
    static const double v[4] = {1, 2, -1, -2};
    return v[h & 3];
  }
  return (double)(int)(h % 9) - 4.0;
}

static void elem_set(void *buf, size_t i, coll_dtype dt, double v) {
  switch (dt) {
  case COLL_F32: ((float *)buf)[i] = (float)v; break;
  case COLL_F64: ((double *)buf)[i] = v; break;
  case COLL_F16: ((uint16_t *)buf)[i] = coll_f32_to_f16((float)v); break;
  case COLL_BF16: ((uint16_t *)buf)[i] = coll_f32_to_bf16((float)v); break;
  case COLL_I32: ((int32_t *)buf)[i] = (int32_t)v; break;
  case COLL_I64: ((int64_t *)buf)[i] = (int64_t)v; break;
  default: break;
  }
}

double coll_elem_get(const void *buf, size_t i, coll_dtype dt) {
  switch (dt) {
  case COLL_F32: return ((const float *)buf)[i];
  case COLL_F64: return ((const double *)buf)[i];
  case COLL_F16: return coll_f16_to_f32(((const uint16_t *)buf)[i]);
  case COLL_BF16: return coll_bf16_to_f32(((const uint16_t *)buf)[i]);
  case COLL_I32: return ((const int32_t *)buf)[i];
  case COLL_I64: return (double)((const int64_t *)buf)[i];
  default: return 0;
  }
}

void coll_pattern_fill(void *buf, size_t count, coll_dtype dt, coll_op op, int rank, uint64_t seed) {
  for (size_t i = 0; i < count; i++) elem_set(buf, i, dt, coll_pattern_value(i, dt, op, rank, seed));
}

size_t coll_pattern_check(const void *buf, size_t count, coll_dtype dt, coll_op op, int nranks,
                          uint64_t seed, size_t *first_bad) {
  return coll_pattern_check_at(buf, count, dt, op, nranks, seed, 0, first_bad);
}

size_t coll_pattern_check_at(const void *buf, size_t count, coll_dtype dt, coll_op op, int nranks,
                             uint64_t seed, size_t offset, size_t *first_bad) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++) {
    double want = coll_pattern_value(offset + i, dt, op, 0, seed);
    for (int r = 1; r < nranks; r++) {
      double v = coll_pattern_value(offset + i, dt, op, r, seed);
      switch (op) {
      case COLL_SUM: want += v; break;
      case COLL_PROD: want *= v; break;
      case COLL_MIN: want = v < want ? v : want; break;
      default: want = v > want ? v : want; break;
      }
    }
    if (coll_elem_get(buf, i, dt) != want) {
      if (!bad && first_bad) *first_bad = i;
      bad++;
    }
  }
  return bad;
}

size_t coll_pattern_check_rank(const void *buf, size_t count, coll_dtype dt, coll_op op, int rank,
                               uint64_t seed, size_t offset, size_t *first_bad) {
  size_t bad = 0;
  for (size_t i = 0; i < count; i++)
    if (coll_elem_get(buf, i, dt) != coll_pattern_value(offset + i, dt, op, rank, seed)) {
      if (!bad && first_bad) *first_bad = i;
      bad++;
    }
  return bad;
}
