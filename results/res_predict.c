/* results: predictions from the cost model: an all-reduce as a job runs it (flat or
 * hierarchical) and a data-parallel training step with its bucket timeline. */
#include "res.h"

#include <math.h>

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
