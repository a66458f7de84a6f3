/* results: predictions from the cost model: an all-reduce as a job runs it (flat or
 * hierarchical) and a data-parallel training step with its bucket timeline. */
#include "res.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A ring reduce-scatter or all-gather on p ranks of n bytes in all: p - 1 steps of n/p. */
static double rp_ring_half(const coll_model *m, int p, double n, int reduce) {
  if (p < 2 || n <= 0) return 0;
  double pr = (double)(p - 1) / p;
  return (p - 1) * m->alpha + pr * n * m->beta + (reduce ? pr * n * m->gamma : 0);
}

double res_allreduce_time(const res_ar_spec *s, double bytes) {
  if (s->ranks < 2 || bytes <= 0) return 0;
  int ppn = s->ranks_per_node > 0 ? s->ranks_per_node : s->ranks;
  if (ppn > s->ranks) ppn = s->ranks;
  int nodes = (s->ranks + ppn - 1) / ppn;
  const coll_model *inter = s->inter ? s->inter : s->intra;
  if (nodes <= 1) return coll_model_time(s->intra, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
  if (!s->hier || ppn == 1) return coll_model_time(inter, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
  /* hierarchical: the node's ranks each own 1/ppn of the vector across nodes */
  double t = s->intra->delta + rp_ring_half(s->intra, ppn, bytes, 1);
  t += coll_model_time(inter, s->algo, nodes, (size_t)(bytes / ppn), s->chunk_bytes);
  t += rp_ring_half(s->intra, ppn, bytes, 0);
  return t;
}

void res_predict_step(res_step_out *out, const res_step_in *in) {
  double end_bwd = in->bwd_ms, done = 0, comm = 0;
  for (size_t i = 0; i < in->nbuckets; i++) {
    double t = res_allreduce_time(&in->ar, in->buckets[i].bytes) * 1e3;
    double ready = in->overlap ? in->buckets[i].ready_ms : end_bwd;
    double start = ready > done ? ready : done;
    done = start + t;
    comm += t;
  }
  double exposed = in->nbuckets && done > end_bwd ? done - end_bwd : 0;
  double compute = in->data_ms + in->fwd_ms + in->bwd_ms + in->opt_ms;
  out->comm_ms = comm;
  out->exposed_comm_ms = exposed;
  out->step_ms = compute + exposed;
  int ranks = in->ar.ranks > 0 ? in->ar.ranks : 1;
  out->images_per_s = out->step_ms > 0 ? 1e3 * in->batch * ranks / out->step_ms : NAN;
  out->scaling_eff = out->step_ms > 0 ? compute / out->step_ms : NAN;
}

int res_predict_train_row(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                          const res_model *m) {
  coll_algo a;
  const res_fabric_model *f = m ? res_model_find(m, row->fabric, row->transport, (int)row->host_count) : NULL;
  if (!one || !f || row->ranks < 2 || !(one->fwd_ms > 0) || !(one->bwd_ms > 0) || coll_algo_parse(row->algo, &a) ||
      a.kind == COLL_ALGO_AUTO || a.kind == COLL_ALGO_NATIVE)
    return -1;
  size_t cap = 64, n = 0;
  /* the profile's buckets hold f32 gradients; 16-bit ones travel in half the bytes */
  double wire = row->grad_dtype && (!strcmp(row->grad_dtype, "bf16") || !strcmp(row->grad_dtype, "f16")) ? 0.5 : 1.0;
  res_bucket *b = malloc(cap * sizeof *b);
  if (!b) return -1;
  const res_train_buckets_row *k = buckets ? buckets->rows : NULL;
  for (size_t i = 0; k && i < buckets->n; i++) {
    /* the profile's own buckets: its run, rank count and role (one rank alone, or the same
     * ranks with no exchange) */
    if (k[i].ranks != one->ranks || strcmp(k[i].run_id, one->run_id) ||
        (one->role && k[i].role && strcmp(k[i].role, one->role)) || !(k[i].bytes > 0) ||
        !isfinite(k[i].ready_ms))
      continue;
    if (n == cap) {
      res_bucket *nb = realloc(b, 2 * cap * sizeof *b);
      if (!nb) return free(b), -1;
      b = nb, cap *= 2;
    }
    b[n++] = (res_bucket){wire * (double)k[i].bytes, k[i].ready_ms};
  }
  if (!n) { /* the row's bucket plan, gradients ready evenly over backward */
    double total = (double)row->grad_bytes, off = 0;
    double bmb = row->bucket_mb > 0 ? row->bucket_mb : 25, fmb = row->first_bucket_mb > 0 ? row->first_bucket_mb : bmb;
    while (off < total) {
      if (n == cap) {
        res_bucket *nb = realloc(b, 2 * cap * sizeof *b);
        if (!nb) return free(b), -1;
        b = nb, cap *= 2;
      }
      double sz = (n ? bmb : fmb) * 1048576.0;
      if (sz > total - off) sz = total - off;
      off += sz;
      b[n++] = (res_bucket){sz, one->bwd_ms * off / total};
    }
  }
  double scale = one->batch > 0 && row->batch > 0 ? (double)row->batch / (double)one->batch : 1;
  res_step_in in = {.data_ms = (isfinite(one->data_ms) ? one->data_ms : 0) * scale, .fwd_ms = one->fwd_ms * scale,
                    .bwd_ms = one->bwd_ms * scale, .opt_ms = isfinite(one->opt_ms) ? one->opt_ms : 0,
                    .buckets = b, .nbuckets = n, .overlap = (int)row->overlap, .batch = (int)row->batch,
                    .ar = {.intra = &f->m, .algo = a, .ranks = (int)row->ranks, .ranks_per_node = (int)row->ranks,
                           .chunk_bytes = f->chunk_bytes > 0 ? (size_t)f->chunk_bytes : 0}};
  for (size_t i = 0; i < n; i++) b[i].ready_ms *= scale;
  res_step_out o;
  res_predict_step(&o, &in);
  free(b);
  double meas = isfinite(row->step_ms_mean) ? row->step_ms_mean : row->step_ms;
  row->step_ms_pred = o.step_ms;
  row->images_per_s_pred = o.images_per_s;
  row->exposed_comm_ms_pred = o.exposed_comm_ms;
  row->pred_err = isfinite(meas) && o.step_ms > 0 ? (meas - o.step_ms) / o.step_ms : NAN;
  return 0;
}
