/* Checks against measurements the model did not see: the model without one fabric, a row priced
 * on a rate from that model, and the suite's choice of a rate to hold out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "res.h"

int res_costmodel_without(res_costmodel *view, const res_costmodel *m, const char *fabric) {
  *view = *m;
  view->f = malloc((m->n ? m->n : 1) * sizeof *view->f);
  if (!view->f) return -1;
  view->n = 0;
  for (size_t i = 0; i < m->n; i++)
    if (!fabric || strcmp(m->f[i].fabric, fabric)) view->f[view->n++] = m->f[i];
  return 0;
}

int res_predict_train_row_heldout(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                                  const res_costmodel *m, double bps, char *src, size_t cap) {
  if (!m || !(bps > 0) || !row->transport) return -1;
  char name[64];
  double g = bps / 1e9, mb = bps / 1e6; /* as the fit names an emulated fabric */
  if (g >= 1 && g == floor(g)) snprintf(name, sizeof name, "emu-%.0fgbit", g);
  else if (mb >= 1 && mb == floor(mb)) snprintf(name, sizeof name, "emu-%.0fmbit", mb);
  else snprintf(name, sizeof name, "emu-%.0fkbit", bps / 1e3);
  res_costmodel view;
  if (res_costmodel_without(&view, m, name)) return -1;
  res_train_row at = *row;
  at.fabric = name;
  int rc = res_predict_train_row(&at, one, buckets, &view);
  if (!rc && src) {
    /* the fitted fabric it was scaled from, as res_predict_train_row chose it */
    const res_fabric_cost *from = NULL;
    res_fabric_cost *tmp = malloc(sizeof *tmp);
    if (tmp && !res_fabric_at_rate(tmp, &view, row->transport, (int)row->host_count, row->topo_hash, bps, name,
                                   &from))
      snprintf(src, cap, "%s", from->fabric);
    else
      snprintf(src, cap, "?");
    free(tmp);
  }
  free(view.f);
  if (rc) return -1;
  row->step_ms_pred = at.step_ms_pred;
  row->images_per_s_pred = at.images_per_s_pred;
  row->exposed_comm_ms_pred = at.exposed_comm_ms_pred;
  row->pred_kind = res_pred_kind_name(RES_PRED_HELDOUT);
  row->pred_err = NAN;
  return 0;
}

/* x rounded to `digits` significant digits */
static double round_sig(double x, int digits) {
  double p = pow(10.0, floor(log10(x)) - (digits - 1));
  return round(x / p) * p;
}

static int rate_taken(const double *bps, int n, double r) {
  for (int i = 0; i < n; i++)
    if (fabs(bps[i] - r) <= 1e-9 * r) return 1;
  return 0;
}

double res_middle_rate(const double *bps, int n) {
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < n; i++)
    if (bps[i] > 0) lo = fmin(lo, bps[i]), hi = fmax(hi, bps[i]);
  if (!(hi > 0)) return 0;
  if (lo == hi) return rate_taken(bps, n, 2 * lo) ? 0 : 2 * lo;
  double geo = sqrt(lo * hi), cand[3] = {round_sig(geo, 1), round_sig(geo, 2), round_sig((lo + hi) / 2, 2)};
  for (int k = 0; k < 3; k++)
    if (cand[k] > lo && cand[k] < hi && !rate_taken(bps, n, cand[k])) return cand[k];
  return 0;
}
