/* results: predictions from the cost model: an all-reduce as a job runs it (flat or
 * hierarchical) and a data-parallel training step with its bucket timeline. */
#include "res.h"
#include "launch.h" /* launch_emu_parse_rate, launch_emu_burst: an emulated fabric's name gives its rate */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A ring reduce-scatter or all-gather on p ranks of one node, n bytes in all: p - 1 steps of
 * n/p (the node's ranks share its cores as in coll_model_time: they send (p-1) n with at most
 * its cores). */
static double rp_ring_half(const coll_model *m, int p, double n, int reduce) {
  if (p < 2 || n <= 0) return 0;
  int many = m->cores > 0 && p > m->cores;
  double pr = (double)(p - 1) / p, share = many ? (double)p / m->cores : 1, senders = many ? m->cores : p;
  double link = pr * n * m->beta, cpu = (p - 1) * n / senders * m->beta_cpu;
  return (p - 1) * m->alpha + (link > cpu ? link : cpu) +
         (reduce ? pr * n * share * m->gamma : 0);
}

double res_allreduce_time(const res_ar_spec *s, double bytes) {
  if (s->ranks < 2 || bytes <= 0) return 0;
  int ppn = s->ranks_per_node > 0 ? s->ranks_per_node : s->ranks;
  if (ppn > s->ranks) ppn = s->ranks;
  int nodes = (s->ranks + ppn - 1) / ppn;
  if (nodes <= 1) return coll_model_time(s->intra, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
  /* across nodes: the ranks of a host (its cores) are those of one node, and inside
   * it they have the node's cores (the inter-node fabric's: an emulated node's share of the
   * machine, a cluster host's own), not those of the host the intra-node fabric was fitted on */
  coll_model im = s->inter ? *s->inter : *s->intra, node = *s->intra;
  if (s->inter && s->inter->cores > 0) node.cores = s->inter->cores;
  const coll_model *intra = &node;
  /* what the fabric learned holds only for the configuration it learned at: a flat algorithm
   * across as many hosts as the fit's, one rank each */
  if (ppn > 1 || im.hosts != nodes) im.ncurves = 0;
  im.hosts = nodes;
  const coll_model *inter = &im;
  int pow2 = (ppn & (ppn - 1)) == 0 && (nodes & (nodes - 1)) == 0 && s->ranks == nodes * ppn;
  if (!s->hier && s->algo.kind == COLL_ALGO_RHD && ppn > 1 && pow2 && s->inter) {
    /* rhd goes nearest first (algo_rhd.c): its first lg ppn exchanges are an rhd of each node's
     * ranks on the whole vector, the rest an rhd across nodes of 1/ppn of it, the node's ppn
     * ranks sharing its link */
    coll_model shared = im;
    shared.beta *= ppn;
    return coll_model_time(intra, s->algo, ppn, (size_t)bytes, s->chunk_bytes) +
           coll_model_time(&shared, s->algo, nodes, (size_t)(bytes / ppn), s->chunk_bytes);
  }
  if (!s->hier || ppn == 1) {
    /* a flat algorithm's messages cross both fabrics, and each of its steps waits for its
     * slowest link: as slow as it would be over either alone (an intra-node fabric slower than
     * the inter-node one still bounds it) */
    /* the host's CPU per byte sent: of a ring over ranks grouped by node, 1 byte in ppn
     * crosses nodes at the link's cost, the rest stays inside at the node's */
    if (ppn > 1 && s->inter) im.beta_cpu = im.beta_cpu / ppn + intra->beta_cpu * (1 - 1.0 / ppn);
    double t = coll_model_time(inter, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
    if (ppn > 1 && s->inter) {
      coll_model in = *intra;
      in.hosts = nodes;
      in.ncurves = 0; /* learned on one host, not across nodes */
      double ti = coll_model_time(&in, s->algo, s->ranks, (size_t)bytes, s->chunk_bytes);
      if (ti > t) t = ti;
    }
    return t;
  }
  /* hierarchical: the node's ranks each own 1/ppn of the vector across nodes, and their ppn
   * all-reduces run at once through the node's one link, each at 1/ppn of its rate */
  coll_model shared = im;
  shared.beta *= ppn;
  /* and the node's cores send their ppn all-reduces' bytes together: ppn times one's bytes
   * on min(ppn, cores) cores, where coll_model_time gives one all-reduce min(1, cores) */
  double c = im.cores > 0 ? im.cores : ppn;
  shared.beta_cpu *= ppn * (c < 1 ? c : 1) / (c < ppn ? c : ppn);
  double t = rp_ring_half(intra, ppn, bytes, 1);
  t += coll_model_time(&shared, s->algo, nodes, (size_t)(bytes / ppn), s->chunk_bytes);
  t += rp_ring_half(intra, ppn, bytes, 0);
  return t;
}

static double rp_row_time(const res_fabric_cost *f, const res_fabric_cost *intra, const res_allreduce_row *r,
                          coll_algo a, double *formulas, int *learned_at) {
  int p = (int)r->ranks, hc = (int)r->host_count;
  size_t bytes = (size_t)r->bytes, chunk = (size_t)r->chunk_bytes;
  /* the row's own hosts share its bytes: an emulated node's share of the cores */
  res_fabric_cost *fc = malloc(sizeof *fc);
  if (!fc) return NAN;
  *fc = *f;
  if (hc > 0) res_fabric_on_hosts(fc, hc);
  coll_model *fm = &fc->m;
  double t = NAN;
  res_ar_spec s;
  if (res_row_one_fabric(a, r->host_count, r->ranks_per_host, r->ranks)) {
    if (hc > 0 && f->host_count != hc) fm->ncurves = 0; /* what f learned holds at its own host count only */
    t = coll_model_time(fm, a, p, bytes, chunk);
    if (formulas) *formulas = t / coll_model_learned(fm, a, p, bytes, chunk);
    if (learned_at) *learned_at = coll_model_learned_at(fm, a, p, bytes, chunk);
  } else if (!res_ar_spec_for(&s, intra, fc, a, p, hc, (int)r->ranks_per_host)) {
    s.chunk_bytes = chunk > 0 ? chunk : s.chunk_bytes;
    t = res_allreduce_time(&s, (double)r->bytes);
    if (formulas) *formulas = t;
  }
  free(fc);
  return t;
}

double res_allreduce_row_time(const res_costmodel *m, const res_allreduce_row *r, double *formulas, int *learned_at) {
  const res_fabric_cost *f, *intra, *src;
  coll_algo a;
  const char *an = r->algo_ran && *r->algo_ran ? r->algo_ran : r->algo;
  int hc = (int)r->host_count, ppn = (int)r->ranks_per_host, p = (int)r->ranks;
  if (formulas) *formulas = NAN;
  if (learned_at) *learned_at = 0;
  if (!m || !an || !r->fabric || coll_algo_parse(an, &a)) return NAN;
  if (!res_costmodel_levels(m, r->fabric, r->transport, hc, ppn, p, r->topo_hash, &intra, &f))
    return rp_row_time(f, intra, r, a, formulas, learned_at);
  /* an emulated rate the model did not fit: held out, its nearest fitted rate scaled to it */
  uint64_t bps = 0;
  res_fabric_cost *at = malloc(sizeof *at);
  double t = NAN;
  if (at && r->transport && !strncmp(r->fabric, "emu-", 4) && !launch_emu_parse_rate(r->fabric + 4, &bps) &&
      !res_fabric_at_rate(at, m, r->transport, hc, r->topo_hash, (double)bps, r->fabric, &src) &&
      !res_costmodel_levels(m, src->fabric, r->transport, hc, ppn, p, r->topo_hash, &intra, &f))
    t = rp_row_time(at, intra, r, a, formulas, learned_at);
  free(at);
  return t;
}

void res_predict_step(res_step_out *out, const res_step_in *in) {
  /* Backward (B ms of work) and the communication thread side by side on the wall clock. Bucket
   * i needs t[i] ms of reduction once backward has done ready[i] of its work and bucket i-1 is
   * reduced. While both run, the reduction gets the `share` of the cores it needs, up to half
   * (rc: its speed), and backward the rest (rb), as the scheduler shares cores among as many
   * threads of each: a link-bound reduction keeps its pace and takes its CPU out of backward
   * (docs/measurements.md, "The predicted training step"). Events: a bucket becomes ready, a
   * reduction ends, backward ends. */
  double B = in->bwd_ms, s = in->overlap && in->share > 0 ? in->share : 0;
  double rc = s > 0.5 ? 0.5 / s : 1, rb = 1 - s * rc;
  /* a reduction that keeps its pace by the shares (link-bound) runs at the pace measured beside
   * a load where that is slower; one that needs over half the cores is priced by the shares
   * alone (taking its measured pace too would count the cores twice) */
  if (s > 0 && s <= 0.5 && in->pace > 0 && in->pace < rc) rc = in->pace;
  double w = 0, p = 0, end_bwd = B > 0 ? -1 : 0, comm = 0, rem = 0, done = 0;
  double late = -INFINITY; /* overlap_step: the latest (done - when the next forward needs it) */
  size_t j = 0, n = in->nbuckets;
  int active = 0; /* bucket j is being reduced, rem ms of work left */
  while (p < B || j < n) {
    if (!active && j < n) {
      double r = in->overlap ? in->buckets[j].ready_ms : B;
      if (r > B) r = B;
      if (r <= p) { /* ready: start it */
        double t = res_allreduce_time(&in->ar, in->buckets[j].bytes) * 1e3;
        if (!(t >= 0)) t = 0; /* NaN: no formula; never stall the loop */
        comm += t;
        rem = t;
        active = 1;
        continue;
      }
      w += r - p; /* backward alone until it is */
      p = r;
      if (p >= B && end_bwd < 0) end_bwd = w;
      continue;
    }
    if (active && p < B) { /* both, at rb and rc, until one ends */
      double tb = (B - p) / rb, tc = rem / rc, dt = tb < tc ? tb : tc;
      w += dt;
      p += dt * rb;
      rem -= dt * rc;
      if (tb <= tc) p = B, end_bwd = w;
      if (tc <= tb) rem = 0;
    } else if (active) { /* backward is done: the reduction alone */
      w += rem;
      rem = 0;
    } else { /* nothing to reduce: backward alone to its end */
      w += B - p;
      p = B;
      end_bwd = w;
    }
    if (active && rem <= 0) {
      active = 0;
      done = w;
      /* the next forward runs the layers in the reverse of backward's order, so it needs a
       * bucket when it has done the share of its work that backward had left when the bucket
       * was complete: the first layers' (complete at backward's end) at once, the last
       * layers' at the forward's end */
      double r = in->buckets[j].ready_ms, need = B > 0 ? in->fwd_ms * (1 - (r < B ? r : B) / B) : 0;
      if (w - need > late) late = w - need;
      j++;
    }
  }
  if (end_bwd < 0) end_bwd = w;
  double exposed = n && done > end_bwd ? done - end_bwd : 0;
  /* overlap_step: each wait of the forward delays the rest of it, so the longest is the one;
   * the reductions that run under the forward take their share of its cores too */
  double under_fwd = 0;
  if (in->overlap_step && n) {
    exposed = late > end_bwd ? late - end_bwd : 0;
    under_fwd = done - end_bwd - exposed;
    under_fwd = under_fwd < 0 ? 0 : under_fwd > in->fwd_ms ? in->fwd_ms : under_fwd;
  }
  /* the loader prepares the next batch on its own thread, so the wait for it that the profile
   * measured hides behind the wait for the all-reduce (docs/measurements.md, "The predicted
   * training step") */
  double data = in->data_ms > exposed ? in->data_ms - exposed : 0;
  double alone = in->data_ms + in->fwd_ms + in->bwd_ms + in->opt_ms, compute = alone - in->data_ms + data;
  out->comm_ms = comm;
  out->bwd_ms = end_bwd;
  /* the step is the same either way; what differs is where the ranks wait: after backward, the
   * profile's data wait included */
  out->exposed_comm_ms = in->meet_ms > exposed ? in->meet_ms : exposed;
  out->step_ms = compute + (end_bwd - in->bwd_ms) + exposed + (1 / rb - 1) * under_fwd;
  int ranks = in->ar.ranks > 0 ? in->ar.ranks : 1;
  out->images_per_s = out->step_ms > 0 ? 1e3 * in->batch * ranks / out->step_ms : NAN;
  out->scaling_eff = out->step_ms > 0 ? alone / out->step_ms : NAN;
}

const res_train_row *res_train_profile(const res_rows *train, const res_train_row *r) {
  const res_train_row *t = train->rows;
  for (size_t i = 0; i < train->n; i++)
    if (t[i].role && !strcmp(t[i].role, "none") && t[i].run_id && r->run_id && !strcmp(t[i].run_id, r->run_id) &&
        t[i].ranks == r->ranks && t[i].fwd_ms > 0 && t[i].bwd_ms > 0)
      return &t[i];
  return NULL;
}

res_bound res_train_bound(const res_train_row *r, const res_train_row *none, double *step, double *base) {
  double s = r->step_ms_mean > 0 ? r->step_ms_mean : r->step_ms;
  double b = none ? (none->step_ms_mean > 0 ? none->step_ms_mean : none->step_ms) : NAN;
  if (step) *step = s;
  if (base) *base = b;
  double wait = r->exposed_comm_ms;
  if (wait > 0.2 * s) return RES_BOUND_LINK;
  /* a step over a tenth slower than none: the larger of its two losses names it, so a step that
   * lost mostly to waiting is link-bound even where under a fifth of it waited */
  if (b > 0 && s - b > 0.1 * s) return wait >= s - b - wait ? RES_BOUND_LINK : RES_BOUND_CORES;
  return RES_BOUND_COMPUTE;
}

/* Do the communication's CPU work and the compute share cores: every core of a host (known)
 * computing, an exchange (ranks > 1) of some bytes. Else a core is free for it, or none known. */
static int rp_cores_shared(const coll_model *m, int ranks, int threads, double bytes) {
  if (!(m->cores > 0) || ranks < 2 || bytes <= 0) return 0;
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (ranks + hosts - 1) / hosts;
  return local * (threads > 0 ? threads : 1) >= m->cores;
}

double res_comm_share(const coll_model *m, coll_algo a, int ranks, int threads, double bytes, size_t chunk_bytes,
                      double cpu_beta) {
  if (!rp_cores_shared(m, ranks, threads, bytes)) return 0;
  double t = coll_model_time(m, a, ranks, (size_t)bytes, chunk_bytes);
  /* the CPU terms: cpu_beta for each byte on the link, or beta_cpu for each sent (the host's
   * cores share it), gamma for each reduced */
  coll_model cpu = *m;
  cpu.alpha = 0;
  cpu.red_hidden = 0; /* a reduction the link does not feel still takes the cores' time */
  cpu.beta = cpu_beta < m->beta ? cpu_beta : m->beta;
  double c = coll_model_time(&cpu, a, ranks, (size_t)bytes, chunk_bytes);
  /* c / t of a core, out of the cores a rank of the node computes with (its node's cores over
   * its ranks: under one where emulated nodes outnumber the machine's cores) */
  int hosts = m->hosts > 1 ? m->hosts : 1, local = (ranks + hosts - 1) / hosts;
  double per_rank = m->cores / local, s = t > 0 ? c / t / per_rank : 0;
  return s < 1 ? s : 1;
}

/* The share from the fabric's measured host CPU cost (cpu_byte): the CPU seconds a host spends
 * on an all-reduce of `bytes` (what its ranks send at cpu_byte, what they reduce at gamma), over
 * the call's seconds, spread over its cores; 0 where a core is free. NaN: not measured. */
static double rp_measured_share(const res_fabric_cost *f, coll_algo a, int ranks, int threads, double bytes,
                                size_t chunk_bytes) {
  const coll_model *m = &f->m;
  if (!(f->cpu_byte > 0)) return NAN;
  if (!rp_cores_shared(m, ranks, threads, bytes)) return 0;
  double sent, red, t = coll_model_time(m, a, ranks, (size_t)bytes, chunk_bytes);
  coll_model_host_bytes(m, a, ranks, (size_t)bytes, chunk_bytes, &sent, &red);
  double s = t > 0 ? (sent * f->cpu_byte + red * m->gamma) / (m->cores * t) : 0;
  return s < 1 ? s : 1;
}

/* What was measured beside a load (f->busy, the same rank count) at `bytes`: the computing
 * cores' loss (pace 0) or the all-reduce's own pace (pace 1), interpolated in log size between
 * the measured sizes, the nearest beyond them; NaN: not measured. */
static double rp_busy_at(const res_fabric_cost *f, int ranks, double bytes, int pace) {
  const res_busy *lo = NULL, *hi = NULL;
  for (int i = 0; i < f->nbusy; i++) {
    const res_busy *p = &f->busy[i];
    if (p->ranks != ranks || (pace && !(p->pace > 0))) continue;
    if (p->bytes <= bytes) lo = p; /* sorted by size: the last at or below */
    else if (!hi) hi = p;
  }
  if (!lo && !hi) return NAN;
  double l = lo ? (pace ? lo->pace : lo->loss) : 0, h = hi ? (pace ? hi->pace : hi->loss) : 0;
  return !hi ? l : !lo ? h : l + (h - l) * log(bytes / lo->bytes) / log(hi->bytes / lo->bytes);
}

/* The share computing cores lost to an all-reduce of `bytes` on `ranks`, as measured beside a
 * load; 0 where a core is free; NaN: not measured. */
static double rp_busy_share(const res_fabric_cost *f, int ranks, int threads, double bytes) {
  double l = rp_busy_at(f, ranks, bytes, 0);
  if (isnan(l) || !rp_cores_shared(&f->m, ranks, threads, bytes)) return isnan(l) ? l : 0;
  return l < 0 ? 0 : l > 1 ? 1 : l;
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

/* g was fitted on the machine of topology hash topo (or either is not recorded): a stack's CPU
 * cost per byte is its host's, not another cluster's */
static int rp_same_machine(const res_fabric_cost *g, const char *topo) {
  return !topo || !*topo || !*g->topo || !strcmp(g->topo, topo);
}

/* The smallest beta of a transport on one host without emulation in m (emulated fabrics are
 * named emu-<rate> by bench/emulate.c) on topo's machine: the stack's own cost per byte, all CPU
 * work; 0: none. */
static double rp_stack_beta(const res_costmodel *m, const char *transport, const char *topo) {
  double b = 0;
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_cost *g = &m->f[i];
    double c = g->m.beta_cpu > g->m.beta ? g->m.beta_cpu : g->m.beta; /* a CPU-bound stack: its bound */
    if (g->host_count <= 1 && !strcmp(g->transport, transport) && strncmp(g->fabric, "emu-", 4) && c > 0 &&
        rp_same_machine(g, topo) && (b == 0 || c < b))
      b = c;
  }
  return b;
}

/* The CPU cost of a byte on fabric f's link, for the training step's share of the cores. On one
 * host without emulation (loopback, shared memory) moving a byte is CPU work only: beta. Through
 * an emulated link the kernel does at least the work it does on loopback for the same transport,
 * and as much as a CPU bound fitted on any emulated link of that transport (the shaped rate does
 * not change the work per byte). Elsewhere (a real link): 0, its beta_cpu counts on its own. */
double res_fabric_cpu_beta(const res_costmodel *m, const res_fabric_cost *f) {
  int emulated = !strncmp(f->fabric, "emu-", 4);
  if (!emulated) return f->host_count <= 1 ? f->m.beta : 0;
  double b = rp_stack_beta(m, f->transport, f->topo);
  for (size_t i = 0; i < m->n; i++)
    if (!strncmp(m->f[i].fabric, "emu-", 4) && !strcmp(m->f[i].transport, f->transport) &&
        rp_same_machine(&m->f[i], f->topo) && m->f[i].m.beta_cpu > b)
      b = m->f[i].m.beta_cpu;
  return b;
}

void res_price_step(res_step_out *out, res_step_in *in, const res_fabric_cost *f, double cpu_beta, int ranks,
                    int threads) {
  /* hier's part across hosts stands for the algorithm in the CPU shares */
  coll_algo a = in->ar.algo;
  /* the reduction's CPU work slows backward where the host's cores are all computing: its
   * share at the plan's typical (largest) bucket */
  double big = 0;
  for (size_t i = 0; i < in->nbuckets; i++)
    if (in->buckets[i].bytes > big) big = in->buckets[i].bytes;
  in->share = rp_measured_share(f, a, ranks, threads, big, in->ar.chunk_bytes);
  if (isnan(in->share)) in->share = res_comm_share(&f->m, a, ranks, threads, big, in->ar.chunk_bytes, cpu_beta);
  /* computing cores lose more than the exchange's CPU time where that was measured beside a load
   * (docs/measurements.md, "What the cores lose beside the all-reduce") */
  double busy = rp_busy_share(f, ranks, threads, big);
  if (busy > in->share) in->share = busy;
  /* and a link-bound reduction beside them slows too, where its sender waits for a core */
  double pace = rp_busy_at(f, ranks, big, 1);
  in->pace = pace > 0 && pace < 1 ? pace : 0;
  res_predict_step(out, in);
}

/* The prediction of a data-parallel row on fabric f (and inside its hosts intra, where it has
 * several hosts of several ranks), whose link's bytes cost cpu_beta of CPU. */
static int rp_predict_row(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                          const res_fabric_cost *f, const res_fabric_cost *intra, double cpu_beta) {
  coll_algo a;
  res_ar_spec ar;
  if (!one || row->ranks < 2 || !(one->fwd_ms > 0) || !(one->bwd_ms > 0) || coll_algo_parse(row->algo, &a) ||
      res_ar_spec_for(&ar, intra, f, a, (int)row->ranks, (int)row->host_count, (int)row->ranks_per_host))
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
  if (!n && !rc) { /* no bucket rows: the reducer's rule (first F, then B each, and a last F
                     * again when more than 2F: nn_reducer.h), gradients ready evenly over backward */
    double total = (double)row->grad_bytes, off = 0;
    double bmb = row->bucket_mb > 0 ? row->bucket_mb : 25, fmb = row->first_bucket_mb > 0 ? row->first_bucket_mb : bmb;
    double tail = total - fmb * 1048576.0 > fmb * 1048576.0 ? fmb * 1048576.0 : 0;
    while (off < total && !rc) {
      double sz = (n ? bmb : fmb) * 1048576.0, end = off < total - tail ? total - tail : total;
      if (sz > end - off) sz = end - off;
      off += sz;
      rc = rp_push(&b, &n, &cap, (res_bucket){wire * sz, one->bwd_ms * off / total});
    }
  }
  free(pb);
  if (rc) return free(b), -1;
  res_step_in in = {.data_ms = (isfinite(one->data_ms) ? one->data_ms : 0) * scale, .fwd_ms = one->fwd_ms * scale,
                    .bwd_ms = one->bwd_ms * scale, .opt_ms = isfinite(one->opt_ms) ? one->opt_ms : 0,
                    .buckets = b, .nbuckets = n, .overlap = (int)row->overlap,
                    .overlap_step = (int)row->overlap_step, .batch = (int)row->batch,
                    .meet_ms = one->ranks > 1 && isfinite(one->data_ms)
                                   ? (one->data_ms - (isfinite(one->load_ms) ? one->load_ms : 0)) * scale
                                   : 0,
                    .ar = ar};
  for (size_t i = 0; i < n; i++) b[i].ready_ms *= scale;
  res_step_out o;
  res_price_step(&o, &in, f, cpu_beta, (int)row->ranks, (int)row->threads);
  free(b);
  double meas = isfinite(row->step_ms_mean) ? row->step_ms_mean : row->step_ms;
  row->step_ms_pred = o.step_ms;
  row->images_per_s_pred = o.images_per_s;
  row->exposed_comm_ms_pred = o.exposed_comm_ms;
  row->pred_err = isfinite(meas) && o.step_ms > 0 ? (meas - o.step_ms) / o.step_ms : NAN;
  return 0;
}

const char *res_pred_kind_name(res_pred_kind k) { return k == RES_PRED_REPLAY ? "replay" : "held-out"; }

int res_fabric_measured(const res_fabric_cost *f, const char *algo, int ranks, int host_count) {
  if (!f || !algo || f->host_count != host_count) return 0;
  for (size_t i = 0; i < f->nresid; i++)
    if (!f->resid[i].outlier && f->resid[i].ranks == ranks && !strcmp(f->resid[i].algo, algo)) return 1;
  return 0;
}

void res_fabric_scaled(res_fabric_cost *out, const res_costmodel *m, const res_fabric_cost *f, double factor,
                       const char *fabric) {
  double floor = m ? rp_stack_beta(m, f->transport, f->topo) : 0;
  *out = *f;
  out->m.beta = f->m.beta / factor > floor ? f->m.beta / factor : floor;
  /* a shaper's bucket is a fixed time of its rate, at least 64 KiB (bench/emulate.c) */
  if (f->m.burst > 0) out->m.burst = f->m.burst * factor > 65536 ? f->m.burst * factor : 65536;
  /* learned and measured on f's own link: they do not carry to another rate */
  out->m.ncurves = 0;
  out->learned = 0;
  out->resid = NULL, out->nresid = 0;
  out->cpu_byte = 0, out->nbusy = 0;
  if (fabric) snprintf(out->fabric, sizeof out->fabric, "%s", fabric);
}

/* An emulated fabric's name for a rate as tc writes it (bench/emulate.c): emu-2gbit, emu-2500mbit. */
static const char *rp_emu_name(char *buf, size_t cap, double bps) {
  double g = bps / 1e9, mb = bps / 1e6;
  if (g >= 1 && g == floor(g)) snprintf(buf, cap, "emu-%.0fgbit", g);
  else if (mb >= 1 && mb == floor(mb)) snprintf(buf, cap, "emu-%.0fmbit", mb);
  else snprintf(buf, cap, "emu-%.0fkbit", bps / 1e3);
  return buf;
}

int res_fabric_at_rate(res_fabric_cost *out, const res_costmodel *m, const char *transport, int host_count,
                       const char *topo, double bps, const char *name, const res_fabric_cost **src) {
  const res_fabric_cost *best = NULL;
  double best_d = INFINITY, best_bps = 0;
  int best_s = -1;
  for (size_t i = 0; m && transport && bps > 0 && i < m->n; i++) {
    const res_fabric_cost *g = &m->f[i];
    uint64_t r = 0;
    if (strcmp(g->transport, transport) || strncmp(g->fabric, "emu-", 4) || launch_emu_parse_rate(g->fabric + 4, &r) ||
        !r || !(g->m.beta > 0))
      continue;
    int s = 2 * (g->host_count == host_count) + (topo && *topo && !strcmp(g->topo, topo));
    double d = fabs(log(bps / (double)r));
    /* the same host count first, then the nearest rate, then the same machine, then the faster */
    int better = !best || (s >> 1) != (best_s >> 1) ? !best || (s >> 1) > (best_s >> 1)
                 : fabs(d - best_d) > 1e-12     ? d < best_d
                 : (s & 1) != (best_s & 1)      ? (s & 1)
                                                : (double)r > best_bps;
    if (better) best = g, best_s = s, best_d = d, best_bps = (double)r;
  }
  if (src) *src = best;
  if (!best) return -1;
  char label[64];
  if (!name) name = rp_emu_name(label, sizeof label, bps);
  res_fabric_scaled(out, m, best, bps / best_bps, name);
  if (best->m.burst > 0 && bps < 1.8e19) out->m.burst = (double)launch_emu_burst((uint64_t)bps);
  /* the ranks of a row spread over its own hosts, not the fitted run's: an emulated cluster's
   * nodes share the machine's cores, a cluster's hosts (a name not emu-) have them each */
  if (host_count > 0) {
    int emu = !strncmp(out->fabric, "emu-", 4);
    out->m.cores = res_node_cores(res_machine_cores(best), emu, host_count);
    out->host_count = host_count, out->m.hosts = host_count;
  }
  return 0;
}

/* f as it prices a row on host_count hosts: what it learned only where it learned it (its own
 * host count; the curves are per algorithm and rank count already). tmp holds the copy. */
static const res_fabric_cost *rp_at_hosts(const res_fabric_cost *f, int host_count, res_fabric_cost *tmp) {
  int hosts = f->m.hosts > 1 ? f->m.hosts : 1;
  if (host_count < 1 || ((f->host_count == host_count || !f->m.ncurves) && hosts == host_count)) return f;
  *tmp = *f;
  if (f->host_count != host_count) tmp->m.ncurves = 0;
  res_fabric_on_hosts(tmp, host_count); /* its hosts, an emulated node's share of the cores */
  return tmp;
}

int res_predict_train_row(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                          const res_costmodel *m) {
  const res_fabric_cost *f, *intra;
  int hc = (int)row->host_count, ranks = (int)row->ranks;
  if (!m || !row->fabric) return -1;
  res_fabric_cost *tmp = malloc(sizeof *tmp); /* a fabric with its curves is ~10 KiB */
  if (!tmp) return -1;
  int rc = -1, replay = 0;
  if (!res_costmodel_levels(m, row->fabric, row->transport, hc, (int)row->ranks_per_host, ranks, row->topo_hash,
                            &intra, &f)) {
    replay = !intra && res_fabric_measured(f, row->algo, ranks, hc);
    rc = rp_predict_row(row, one, buckets, rp_at_hosts(f, hc, tmp), intra, res_fabric_cpu_beta(m, f));
  } else {
    /* an emulated rate the model did not fit: held out, from the nearest fitted rate of the
     * transport scaled to it (the levels inside the hosts from that fabric's) */
    uint64_t bps = 0;
    const res_fabric_cost *src = NULL;
    if (row->transport && !strncmp(row->fabric, "emu-", 4) && !launch_emu_parse_rate(row->fabric + 4, &bps) &&
        !res_fabric_at_rate(tmp, m, row->transport, hc, row->topo_hash, (double)bps, row->fabric, &src) &&
        !res_costmodel_levels(m, src->fabric, row->transport, hc, (int)row->ranks_per_host, ranks,
                              row->topo_hash, &intra, &f))
      rc = rp_predict_row(row, one, buckets, tmp, intra, res_fabric_cpu_beta(m, src));
  }
  free(tmp);
  if (!rc) row->pred_kind = res_pred_kind_name(replay ? RES_PRED_REPLAY : RES_PRED_HELDOUT);
  return rc;
}

int res_predict_train_row_link(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                               const res_costmodel *m, double factor) {
  const res_fabric_cost *f = NULL, *intra = NULL;
  if (!m || !row->fabric || !row->transport ||
      res_costmodel_levels(m, row->fabric, row->transport, (int)row->host_count, (int)row->ranks_per_host,
                       (int)row->ranks, row->topo_hash, &intra, &f) ||
      !(factor > 0))
    return -1;
  res_fabric_cost *fast = malloc(sizeof *fast);
  if (!fast) return -1;
  res_fabric_scaled(fast, m, f, factor, NULL);
  int rc = rp_predict_row(row, one, buckets, fast, intra, res_fabric_cpu_beta(m, f));
  free(fast);
  if (!rc) row->pred_kind = res_pred_kind_name(RES_PRED_HELDOUT);
  return rc;
}

int res_predict_train_row_rate(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                               const res_costmodel *m, double bps) {
  if (!(bps > 0)) return res_predict_train_row(row, one, buckets, m);
  char name[64];
  rp_emu_name(name, sizeof name, bps);
  res_train_row at = *row;
  at.fabric = name;
  /* at the stated rate, not the row's own: held out, and the link's host count is the row's */
  if (res_predict_train_row(&at, one, buckets, m)) return -1;
  row->step_ms_pred = at.step_ms_pred;
  row->images_per_s_pred = at.images_per_s_pred;
  row->exposed_comm_ms_pred = at.exposed_comm_ms_pred;
  row->pred_err = row->fabric && !strcmp(row->fabric, name) ? at.pred_err : NAN;
  row->pred_kind = at.pred_kind;
  return 0;
}
