/* results: predictions from the cost model: an all-reduce as a job runs it (flat or
 * hierarchical) and a data-parallel training step with its bucket timeline. */
#include "res.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A ring reduce-scatter or all-gather on p ranks of one node, n bytes in all: p - 1 steps of
 * n/p (the node's ranks share its cores as in coll_model_time). */
static double rp_ring_half(const coll_model *m, int p, double n, int reduce) {
  if (p < 2 || n <= 0) return 0;
  double pr = (double)(p - 1) / p, share = m->cores > 0 && p > m->cores ? (double)p / m->cores : 1;
  return (p - 1) * m->alpha + pr * n * (m->beta + (share - 1) * m->beta_cpu) + (reduce ? pr * n * share * m->gamma : 0);
}

double res_allreduce_time(const res_ar_spec *s, double bytes) {
  if (s->ranks < 2 || bytes <= 0) return 0;
  int ppn = s->ranks_per_node > 0 ? s->ranks_per_node : s->ranks;
  if (ppn > s->ranks) ppn = s->ranks;
  int nodes = (s->ranks + ppn - 1) / ppn;
  if (nodes <= 1) return coll_model_time(s->intra, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
  /* across nodes: the ranks of a host (its cores, its cache) are those of one node */
  coll_model im = s->inter ? *s->inter : *s->intra;
  im.hosts = nodes;
  const coll_model *inter = &im;
  if (!s->hier || ppn == 1) return coll_model_time(inter, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
  /* hierarchical: the node's ranks each own 1/ppn of the vector across nodes */
  double t = s->intra->delta + rp_ring_half(s->intra, ppn, bytes, 1);
  t += coll_model_time(inter, s->algo, nodes, (size_t)(bytes / ppn), s->chunk_bytes);
  t += rp_ring_half(s->intra, ppn, bytes, 0);
  return t;
}

/* Backward's clock against the wall: it runs at full speed, and at 1 / (1 + share) while a
 * reduction runs (the intervals iv[0..niv), in order, not overlapping). Advances (*w, *p), the
 * wall time and backward's progress (ms of the profile), until progress reaches target. */
static void rp_advance(double *w, double *p, double target, const double (*iv)[2], size_t niv, double share) {
  size_t k = 0;
  while (*p < target) {
    while (k < niv && iv[k][1] <= *w) k++;
    int busy = k < niv && iv[k][0] <= *w;
    double rate = busy ? 1 / (1 + share) : 1;
    double until = busy ? iv[k][1] : k < niv ? iv[k][0] : INFINITY;
    double dp = (until - *w) * rate;
    if (*p + dp >= target) {
      *w += (target - *p) / rate;
      *p = target;
    } else {
      *w = until;
      *p += dp;
    }
  }
}

void res_predict_step(res_step_out *out, const res_step_in *in) {
  double (*iv)[2] = in->nbuckets ? malloc(in->nbuckets * sizeof *iv) : NULL;
  double share = in->overlap && in->share > 0 ? in->share : 0;
  double w = 0, p = 0, done = 0, comm = 0, front_done = 0, front_off = -1, off = 0;
  size_t niv = 0;
  for (size_t i = 0; i < in->nbuckets; i++) {
    double t = res_allreduce_time(&in->ar, in->buckets[i].bytes) * 1e3;
    double ready = in->overlap ? in->buckets[i].ready_ms : in->bwd_ms;
    if (ready > in->bwd_ms) ready = in->bwd_ms;
    rp_advance(&w, &p, ready, (const double(*)[2])iv, niv, share);
    double start = w > done ? w : done;
    done = start + t;
    comm += t;
    if (iv) iv[niv][0] = start, iv[niv][1] = done, niv++;
    /* the bucket with the largest offset holds the first layers: the next forward needs it
     * first (buckets are listed in reduction order; their offsets accumulate in plan order) */
    if (off >= front_off) front_off = off, front_done = done;
    off += in->buckets[i].bytes;
  }
  rp_advance(&w, &p, in->bwd_ms, (const double(*)[2])iv, niv, share);
  free(iv);
  double end_bwd = w, exposed = in->nbuckets && done > end_bwd ? done - end_bwd : 0;
  if (in->overlap_step && in->nbuckets) {
    double a = front_done - end_bwd, b = done - end_bwd - in->fwd_ms;
    exposed = a > b ? a : b;
    if (exposed < 0) exposed = 0;
  }
  double compute = in->data_ms + in->fwd_ms + in->bwd_ms + in->opt_ms;
  out->comm_ms = comm;
  out->bwd_ms = end_bwd;
  out->exposed_comm_ms = exposed;
  out->step_ms = compute + (end_bwd - in->bwd_ms) + exposed;
  int ranks = in->ar.ranks > 0 ? in->ar.ranks : 1;
  out->images_per_s = out->step_ms > 0 ? 1e3 * in->batch * ranks / out->step_ms : NAN;
  out->scaling_eff = out->step_ms > 0 ? compute / out->step_ms : NAN;
}

double res_comm_share(const coll_model *m, coll_algo a, int ranks, int threads, double bytes, size_t chunk_bytes) {
  if (!(m->cores > 0) || ranks < 2 || bytes <= 0) return 0;
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (ranks + hosts - 1) / hosts;
  if (local * (threads > 0 ? threads : 1) < m->cores) return 0; /* a core is free for the reduction */
  double t = coll_model_time(m, a, ranks, (size_t)bytes, chunk_bytes);
  /* the CPU terms: beta_cpu (a byte's CPU cost, which sharing multiplies) for each byte moved,
   * gamma for each reduced, the cache term */
  coll_model cpu = *m;
  cpu.alpha = cpu.delta = 0;
  cpu.beta = m->beta_cpu < m->beta ? m->beta_cpu : m->beta;
  cpu.beta_cpu = cpu.beta;
  double c = coll_model_time(&cpu, a, ranks, (size_t)bytes, chunk_bytes);
  return t > 0 ? (c < t ? c / t : 1) : 0;
}

/* Adds a bucket to a growing array. */
static int rp_push(res_bucket **b, size_t *n, size_t *cap, res_bucket x) {
  if (*n == *cap) {
    res_bucket *nb = realloc(*b, 2 * *cap * sizeof *nb);
    if (!nb) return -1;
    *b = nb, *cap *= 2;
  }
  (*b)[(*n)++] = x;
  return 0;
}

/* When the profile's backward had completed `end` bytes of the arena: its buckets' (end
 * offset, ready) points, interpolated linearly from (0, 0); past the last, the end of backward. */
static double rp_ready_at(const res_train_buckets_row *const *pb, size_t np, double end, double bwd_ms) {
  double x0 = 0, y0 = 0;
  for (size_t i = 0; i < np; i++) {
    double x1 = (double)(pb[i]->offset_bytes + pb[i]->bytes), y1 = pb[i]->ready_ms;
    if (end <= x1 + 0.5) return x1 > x0 ? y0 + (y1 - y0) * (end - x0) / (x1 - x0) : y1;
    x0 = x1, y0 = y1;
  }
  return bwd_ms > y0 ? bwd_ms : y0;
}

static int rp_cmp_end(const void *a, const void *b) {
  const res_train_buckets_row *x = *(const res_train_buckets_row *const *)a, *y = *(const res_train_buckets_row *const *)b;
  int64_t ex = x->offset_bytes + x->bytes, ey = y->offset_bytes + y->bytes;
  return (ex > ey) - (ex < ey);
}

int res_predict_train_row(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                          const res_model *m) {
  coll_algo a;
  const res_fabric_model *f = m ? res_model_find(m, row->fabric, row->transport, (int)row->host_count) : NULL;
  if (!one || !f || row->ranks < 2 || !(one->fwd_ms > 0) || !(one->bwd_ms > 0) || coll_algo_parse(row->algo, &a) ||
      a.kind == COLL_ALGO_AUTO || a.kind == COLL_ALGO_NATIVE)
    return -1;
  size_t cap = 64, n = 0, np = 0;
  /* the buckets' bytes are f32 gradients; 16-bit ones travel in half the bytes */
  double wire = row->grad_dtype && (!strcmp(row->grad_dtype, "bf16") || !strcmp(row->grad_dtype, "f16")) ? 0.5 : 1.0;
  double scale = one->batch > 0 && row->batch > 0 ? (double)row->batch / (double)one->batch : 1;
  res_bucket *b = malloc(cap * sizeof *b);
  const res_train_buckets_row *k = buckets ? buckets->rows : NULL;
  size_t nk = k ? buckets->n : 0;
  const res_train_buckets_row **pb = malloc((nk ? nk : 1) * sizeof *pb);
  if (!b || !pb) return free(b), free(pb), -1;
  /* the profile's buckets: its run, rank count and role (one rank alone, or the same ranks
   * with no exchange), sorted by where they end in the arena */
  for (size_t i = 0; i < nk; i++)
    if (k[i].ranks == one->ranks && !strcmp(k[i].run_id, one->run_id) &&
        !(one->role && k[i].role && strcmp(k[i].role, one->role)) && k[i].bytes > 0 && isfinite(k[i].ready_ms))
      pb[np++] = &k[i];
  qsort(pb, np, sizeof *pb, rp_cmp_end);
  /* the plan: the row's own run's buckets, as its reducer made and reduced them */
  int rc = 0;
  for (size_t i = 0; i < nk && !rc; i++) {
    const res_train_buckets_row *x = &k[i];
    if (!row->run_id || strcmp(x->run_id, row->run_id) || x->ranks != row->ranks || !x->transport ||
        strcmp(x->transport, row->transport) || !x->algo || strcmp(x->algo, row->algo) || !(x->bytes > 0) ||
        (x->role && row->role && strcmp(x->role, row->role)))
      continue;
    double ready = np ? rp_ready_at(pb, np, (double)(x->offset_bytes + x->bytes), one->bwd_ms)
                      : one->bwd_ms * (double)(x->offset_bytes + x->bytes) / (double)(row->grad_bytes > 0 ? row->grad_bytes : x->offset_bytes + x->bytes);
    rc = rp_push(&b, &n, &cap, (res_bucket){wire * (double)x->bytes, ready});
  }
  for (size_t i = 0, own = n; !own && i < np && !rc; i++) /* else the profile's own plan */
    rc = rp_push(&b, &n, &cap, (res_bucket){wire * (double)pb[i]->bytes, pb[i]->ready_ms});
  if (!n && !rc) { /* no bucket rows: the row's bucket plan, gradients ready evenly over backward */
    double total = (double)row->grad_bytes, off = 0;
    double bmb = row->bucket_mb > 0 ? row->bucket_mb : 25, fmb = row->first_bucket_mb > 0 ? row->first_bucket_mb : bmb;
    while (off < total && !rc) {
      double sz = (n ? bmb : fmb) * 1048576.0;
      if (sz > total - off) sz = total - off;
      off += sz;
      rc = rp_push(&b, &n, &cap, (res_bucket){wire * sz, one->bwd_ms * off / total});
    }
  }
  free(pb);
  if (rc) return free(b), -1;
  res_step_in in = {.data_ms = (isfinite(one->data_ms) ? one->data_ms : 0) * scale, .fwd_ms = one->fwd_ms * scale,
                    .bwd_ms = one->bwd_ms * scale, .opt_ms = isfinite(one->opt_ms) ? one->opt_ms : 0,
                    .buckets = b, .nbuckets = n, .overlap = (int)row->overlap, .batch = (int)row->batch,
                    .ar = {.intra = &f->m, .algo = a, .ranks = (int)row->ranks, .ranks_per_node = (int)row->ranks,
                           .chunk_bytes = f->chunk_bytes > 0 ? (size_t)f->chunk_bytes : 0}};
  /* the reduction's CPU work slows backward where the host's cores are all computing: its
   * share at the plan's typical (largest) bucket */
  double big = 0;
  for (size_t i = 0; i < n; i++) {
    b[i].ready_ms *= scale;
    if (b[i].bytes > big) big = b[i].bytes;
  }
  in.share = res_comm_share(&f->m, a, (int)row->ranks, (int)row->threads, big, in.ar.chunk_bytes);
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
