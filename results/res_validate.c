/* results: the arithmetic of fabench validate's leave-out design: which cells a fit holds out,
 * the relative errors, the no-overlap baseline's time, and the error summaries. */
#include "res.h"

#include <math.h>
#include <stdlib.h>

const char *res_validate_held(const res_vcell *c, const double *train_bps, int ntrain, int max_nodes) {
  int rate_in = 0;
  for (int i = 0; i < ntrain; i++) rate_in |= fabs(c->bps - train_bps[i]) <= 1e-9 * train_bps[i];
  int nodes_in = c->nodes <= max_nodes;
  return rate_in && nodes_in ? "" : rate_in ? "nodes" : nodes_in ? "rate" : "both";
}

double res_validate_err(double pred, double meas) {
  return pred > 0 && meas > 0 && isfinite(pred) && isfinite(meas) ? (pred - meas) / meas : NAN;
}

double res_validate_bytes_s(double bytes, const res_vcell *c, int hier) {
  if (!(c->bps > 0) || bytes <= 0) return 0;
  int nodes = c->nodes > 0 ? c->nodes : 1, ppn = c->ppn > 0 ? c->ppn : 1;
  if (nodes < 2) return 0; /* nothing crosses a link */
  /* hier: the node's ranks each all-reduce 1/ppn of the vector among the nodes, 2 (N-1)/N n
   * through the link in all; flat: the node-aware ring crosses each node's link once each way,
   * and each of its 2 (p-1) steps moves n/p over every edge */
  int p = hier ? nodes : nodes * ppn;
  return 2.0 * (p - 1) / p * bytes * 8 / c->bps;
}

static int rv_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void res_validate_abs_stats(const double *v, size_t nv, double *median, double *worst, size_t *n) {
  double *a = malloc((nv ? nv : 1) * sizeof *a);
  size_t k = 0;
  for (size_t i = 0; a && i < nv; i++)
    if (isfinite(v[i])) a[k++] = fabs(v[i]);
  *n = k;
  *median = *worst = NAN;
  if (k) {
    qsort(a, k, sizeof *a, rv_cmp);
    *median = k % 2 ? a[k / 2] : (a[k / 2 - 1] + a[k / 2]) / 2;
    *worst = a[k - 1];
  }
  free(a);
}
