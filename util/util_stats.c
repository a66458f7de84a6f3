/* util: statistics of samples (percentiles, median, the spread between rounds). */
#include "util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int util_cmp_f64(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double util_rank_pct(const double *x, size_t n, double p) {
  size_t k = (size_t)ceil((double)n * p);
  if (k == 0) k = 1;
  if (k > n) k = n;
  return x[k - 1];
}

void util_stats_compute(util_stats *out, double *x, size_t n) {
  memset(out, 0, sizeof *out);
  out->n = n;
  if (n == 0) return;
  qsort(x, n, sizeof *x, util_cmp_f64);
  double sum = 0;
  for (size_t i = 0; i < n; i++) sum += x[i];
  double mean = sum / (double)n, var = 0;
  for (size_t i = 0; i < n; i++) var += (x[i] - mean) * (x[i] - mean);
  out->min = x[0];
  out->max = x[n - 1];
  out->p50 = util_rank_pct(x, n, 0.50);
  out->p90 = util_rank_pct(x, n, 0.90);
  out->p99 = util_rank_pct(x, n, 0.99);
  out->mean = mean;
  out->stddev = sqrt(var / (double)n);
}

double util_median(double *x, size_t n) {
  if (!n) return NAN;
  qsort(x, n, sizeof *x, util_cmp_f64);
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

double util_round_spread(double *x, size_t n, int rounds) {
  double lo = INFINITY, hi = -INFINITY;
  int k = 0;
  for (int r = 0; r < rounds; r++) {
    size_t a = n * (size_t)r / (size_t)rounds, b = n * (size_t)(r + 1) / (size_t)rounds;
    if (b <= a) continue;
    qsort(x + a, b - a, sizeof *x, util_cmp_f64);
    double m = util_rank_pct(x + a, b - a, 0.50);
    lo = m < lo ? m : lo, hi = m > hi ? m : hi, k++;
  }
  return k >= 2 && lo > 0 ? hi / lo - 1 : NAN;
}
