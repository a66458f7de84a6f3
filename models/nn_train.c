/* models: the training loop, one process or data-parallel (nn_train.h).
 *
 * A step: the next batch of this rank's shard, forward, backward with the reducer all-reducing
 * each finished bucket on its thread, the wait for the last bucket, SGD. With overlap_step the
 * step ends with backward: the next forward waits layer by layer for the buckets holding its
 * parameters, each bucket updated as soon as it is reduced. Before anything that needs final
 * weights (evaluation, checkpoints, the end) a step drains; a parameter check comes after the
 * next forward, before its update. Sharded, the reducer reduce-scatters, each rank updates its
 * ranges and the next forward waits layer by layer for the parameters' gathers (stage 3: and
 * releases them, the backward waiting for them again). Between steps, over the bootstrap (the
 * gradient communicator belongs to the reducer's thread): step records to rank 0, parameter
 * hashes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nn.h"
#include "nn_reducer.h"

static double tr_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- batches in the net's host memory (page-locked for a GPU net) ---- */

static void *tr_host_alloc(void *net, size_t bytes) { return nn_host_alloc(net, bytes); }
static void tr_host_free(void *net, void *p) { nn_host_free(net, p); }

static void tr_host_mem(nn_loader_opts *lo, nn_net *net) {
  lo->host_alloc = tr_host_alloc;
  lo->host_free = tr_host_free;
  lo->host_ctx = net;
}

/* ---- the gradient arena from a communicator ---- */

static void *arena_alloc(void *ctx, size_t bytes) {
  coll_err e = {{0}};
  return coll_mem_alloc(ctx, bytes, &e);
}
static void arena_free(void *ctx, void *p) { coll_mem_free(ctx, p); }
static void *plain_alloc(void *ctx, size_t bytes) {
  (void)ctx;
  void *p = NULL;
  return posix_memalign(&p, 64, bytes ? bytes : 64) ? NULL : p;
}
static void plain_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

nn_arena_alloc nn_arena_from_comm(coll_comm *c) {
  if (!c) return (nn_arena_alloc){plain_alloc, plain_free, NULL};
  return (nn_arena_alloc){arena_alloc, arena_free, c};
}

uint64_t nn_params_hash(const float *p, size_t count) {
  /* FNV-1a over 64-bit words in 4 interleaved lanes (the last odd words 32 bits at a time), the
   * lanes folded with the count, then a final mix. Each step is a bijection of the lane and of
   * the word, so any changed bit of any weight changes the hash. Four independent multiply
   * chains, since one chain waits a multiply's latency a word (docs/measurements.md, "The training
   * loop's figures"). */
  const uint64_t prime = 0x100000001b3ull, basis = 0xcbf29ce484222325ull;
  const unsigned char *b = (const unsigned char *)p;
  size_t bytes = count * sizeof *p, i = 0;
  uint64_t h0 = basis, h1 = basis + 1, h2 = basis + 2, h3 = basis + 3;
  for (; i + 32 <= bytes; i += 32) {
    uint64_t w[4];
    memcpy(w, b + i, sizeof w);
    h0 = (h0 ^ w[0]) * prime;
    h1 = (h1 ^ w[1]) * prime;
    h2 = (h2 ^ w[2]) * prime;
    h3 = (h3 ^ w[3]) * prime;
  }
  for (; i + 4 <= bytes; i += 4) {
    uint32_t v;
    memcpy(&v, b + i, sizeof v);
    h0 = (h0 ^ v) * prime;
  }
  uint64_t x = (uint64_t)count;
  x = (x ^ h0) * prime;
  x = (x ^ h1) * prime;
  x = (x ^ h2) * prime;
  x = (x ^ h3) * prime;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}

/* ---- the state of one run ---- */

#define TR_PARTS 9

typedef struct {
  const nn_train_opts *o;
  nn_reducer *red;
  char *err;
  size_t cap;
  int world;                  /* ranks exchanging (1 alone) */
  nn_step_rec *all;           /* one step of every rank (rank 0's gather) */
  /* measured steps, for the result */
  /* data, load, fwd, bwd, comm, exposed, opt, comm_cpu, wait */
  double *step_per, *step_max, *step_min, *part[TR_PARTS];
  double *rank_wall;          /* [world]: each rank's measured steps, summed */
  double *comp;
  double *bready, *bcomm, *bdone;        /* [measured][nbuckets], rank 0's */
  size_t nmeas, cap_meas;
  int nb;
  /* the buckets of the last completed step, their time origin and forward time */
  nn_bucket *lastb;
  double lastb_t1, lastb_fwd;
  nn_reducer_stats last_rs;   /* its all-reduce and CPU times */
  int64_t lastb_step;         /* the step they belong to */
  int lastb_traced;           /* in the trace, or not for it: each traced step's buckets go in once */
  /* overlap_step */
  int hooked;                 /* overlap_step's forward hook is on */
  int fwd_hook;               /* the net calls on_forward (overlap_step, alive) */
  int alive;                  /* alone while others wait: the step calls on_alive too */
  int alive_failed;           /* on_alive stopped the run inside backward, which goes on */
  int upload_ahead;           /* a GPU net: the next batch is uploaded while a step computes */
  int ostep;                  /* overlapping from this step on (after the warm-up's profile) */
  int pending;                /* the last step's update is still to be applied, bucket by bucket */
  nn_sgd_opts pso;            /* its options */
  nn_bucket *plan;            /* the buckets' ranges, in call order */
  int applied;                /* the plan's first `applied` buckets are updated */
  int64_t check_due;          /* a parameter check deferred from that step (0: none) */
  int begun;                  /* this step's reducer step has begun (backward's first report) */
  double t1, t1_prev, fwd_prev; /* this step's time origin; the last step's, and its forward */
  double hook_wait, hook_opt; /* this step's forward: waits for buckets, layer updates */
  double gap;                 /* the last step's record exchange (a wait for the other ranks) */
  double *front_est;          /* warm-up steps' estimates of the front (floats): the least */
  double *front_hi;           /* and the most that leaves the next forward's reduction its time */
  size_t *shoff, *shcnt;      /* sharded: this rank's ranges of the arenas (nn_reducer_shards) */
  int nsh;
  /* sharded: the parameters gathered in the forward (fwdg); stage 3 */
  int fwdg, stage3;
  int whole;                  /* the parameters are gathered whole (evaluation, check, checkpoint) */
  int *free_at;               /* [nb]: the forward releases bucket k before this layer (-1: kept) */
  size_t *lay_lo, *lay_hi;    /* [layers]: each layer's parameters in the arena (lo == hi: none) */
  int nlay;
  double bwd_wait;            /* this step's backward: waits for its layers' parameters */
  int gather_failed;          /* a backward wait failed (backward goes on; the step then fails) */
  size_t nfront;
  char shard_prev[4400];      /* the sharded checkpoint file this rank wrote (or resumed) last */
  /* the trace of this rank */
  nn_trace_ev *tev;
  size_t ntev, cap_tev;
  int tracing, tracing_prev;  /* this step is traced; the last one was */
  int64_t tstep;
  double tbase, tlast;        /* run start; end of the last traced span of backward */
} train_state;

static void trace_add(train_state *s, const char *name, int tid, double t0, double t1) {
  if (s->ntev == s->cap_tev) {
    size_t cap = s->cap_tev ? 2 * s->cap_tev : 1024;
    nn_trace_ev *v = realloc(s->tev, cap * sizeof *v);
    if (!v) return; /* a shorter trace, not a failed run */
    s->tev = v;
    s->cap_tev = cap;
  }
  nn_trace_ev *e = &s->tev[s->ntev++];
  memset(e, 0, sizeof *e);
  snprintf(e->name, sizeof e->name, "%s", name);
  e->rank = s->o->rank;
  e->tid = tid;
  e->step = s->tstep;
  e->ts_s = t0 - s->tbase;
  e->dur_s = t1 - t0;
}

static void trace(train_state *s, const char *name, int tid, double t0, double t1) {
  if (s->tracing) trace_add(s, name, tid, t0, t1);
}

/* This step's reducer step begins (with overlap_step at backward's first report: by then the
 * forward has waited for every bucket of the last step); the last step's buckets are kept. */
static void begin_step(train_state *s) {
  nn_reducer_begin(s->red, s->t1);
  s->begun = 1;
  if (s->pending) { /* the last step's buckets, reduced behind this forward: not traced yet */
    s->lastb_step = s->tstep - 1;
    s->lastb_traced = !s->tracing_prev;
  }
  s->pending = 0;
  nn_reducer_last(s->red, s->lastb, s->nb, &s->last_rs);
}

/* The buckets in lastb into the trace, on the communication thread's row, labelled with
 * their own step: with overlap_step they are reduced during the next step. */
static void trace_buckets(train_state *s, double origin) {
  if (s->lastb_traced || !s->o->comm) return;
  s->lastb_traced = 1;
  for (int k = 0; k < s->nb; k++) {
    char name[24];
    snprintf(name, sizeof name, s->fwdg ? "reducescatter b%d" : "allreduce b%d", k);
    size_t at = s->ntev;
    trace_add(s, name, 1, origin + s->lastb[k].start_s, origin + s->lastb[k].done_s);
    /* sharded: the parameters' gathers, for the forward and (stage 3) again for the backward */
    for (int w = 0; w < 2; w++)
      if (s->lastb[k].ag_done_s[w] > 0) {
        snprintf(name, sizeof name, w ? "allgather b%d bwd" : "allgather b%d", k);
        trace_add(s, name, 1, origin + s->lastb[k].ag_start_s[w], origin + s->lastb[k].ag_done_s[w]);
      }
    for (size_t i = at; i < s->ntev; i++) s->tev[i].step = s->lastb_step;
  }
}

/* Alone while other ranks wait (alive): a step longer than their timeout must not look like a dead
 * rank 0, so the step says it is alive between layers (on_alive rate-limits). Backward cannot be
 * stopped: a failure there stops the run at the step's end. */
static int step_alive(train_state *s) {
  if (s->alive && !s->alive_failed && s->o->on_alive(s->o->ctx)) s->alive_failed = 1;
  return s->alive_failed ? -1 : 0;
}

/* Backward's progress: to the reducer, a span per layer into the trace, and alive. */
static void on_ready(void *ctx, int layer, size_t ready) {
  train_state *s = ctx;
  if (!s->begun) begin_step(s);
  nn_reducer_ready(s->red, ready);
  step_alive(s);
  /* stage 3: the next layer of the backward (its parameters start where the final gradients
   * end) waits for them to be gathered again */
  for (int l = 0; s->stage3 && !s->gather_failed && l < s->nlay; l++) {
    if (s->lay_lo[l] != ready || s->lay_hi[l] == ready) continue;
    double w = 0;
    char rerr[1024];
    if (nn_reducer_wait_params(s->red, ready, s->lay_hi[l] - ready, 1, &w, rerr, sizeof rerr)) {
      s->gather_failed = 1;
      snprintf(s->err, s->cap, "step %lld, parameter all-gather: %s", (long long)s->tstep, rerr);
    }
    s->bwd_wait += w;
    break;
  }
  if (s->tracing && layer >= 0) {
    double t = tr_now();
    char name[24];
    snprintf(name, sizeof name, "bwd L%d", layer);
    trace(s, name, 0, s->tlast, t);
    s->tlast = t;
  }
}

/* overlap_step: the last step's update of every bucket reduced by now. SGD is elementwise, so a
 * bucket is updated whole as soon as it is reduced: what backward reduced (the last layers') is
 * then updated while the forward waits for its first layers, not at the forward's end, where
 * the link has nothing to carry until the next backward. Never later than its layers' forward,
 * whose hook waits for it. */
static void apply_done(train_state *s) {
  int k = nn_reducer_ndone(s->red);
  if (s->applied >= k) return;
  double t = tr_now();
  for (; s->applied < k; s->applied++)
    nn_sgd_step_range(s->o->net, &s->pso, s->plan[s->applied].offset, s->plan[s->applied].count);
  s->hook_opt += tr_now() - t;
}

/* A layer's forward is about to read its parameters: alive, and with overlap_step the last
 * step's update of them, once their buckets are reduced. */
static int on_forward(void *ctx, int layer, size_t off, size_t count, char *err, size_t cap) {
  train_state *s = ctx;
  if (step_alive(s)) {
    snprintf(err, cap, "stopped during step %lld", (long long)s->tstep);
    return -1;
  }
  if (s->fwdg) { /* stage 3: release what the forward has read for the last time; wait for this layer */
    for (int k = 0; k < s->nb && s->stage3; k++)
      if (s->free_at[k] == layer) nn_reducer_release(s->red, k);
    double w = 0;
    char rerr[1024];
    if (nn_reducer_wait_params(s->red, off, count, 0, &w, rerr, sizeof rerr)) {
      snprintf(err, cap, "step %lld, parameter all-gather: %s", (long long)s->tstep, rerr);
      return -1;
    }
    s->hook_wait += w;
    return 0;
  }
  if (!s->pending) return 0;
  apply_done(s);
  double w = 0, t = tr_now();
  char rerr[1024];
  if (nn_reducer_wait_range(s->red, off, count, &w, rerr, sizeof rerr)) {
    snprintf(err, cap, "step %lld, gradient all-reduce: %s", (long long)s->tstep - 1, rerr);
    return -1;
  }
  double t2 = tr_now();
  s->hook_wait += w;
  apply_done(s); /* this layer's buckets among them */
  if (s->tracing && w > 1e-5) {
    char name[24];
    snprintf(name, sizeof name, "wait L%d", layer);
    trace(s, name, 0, t, t2);
  }
  return 0;
}

static int ts_fail(train_state *s, const char *fmt, const char *what) {
  snprintf(s->err, s->cap, fmt, what);
  return -1;
}

static int gather(train_state *s, void *all, const void *mine, size_t bytes) {
  coll_err e = {{0}};
  if (s->world == 1) {
    memcpy(all, mine, bytes);
    return 0;
  }
  if (coll_boot_allgather(s->o->boot, all, mine, bytes, &e)) return ts_fail(s, "%s", e.msg);
  return 0;
}

/* Every rank's trace to rank 0 (collective). */
static int gather_trace(train_state *s) {
  int w = s->world;
  int64_t mine = (int64_t)s->ntev, *counts = calloc((size_t)w, sizeof *counts), most = 0;
  if (!counts) return ts_fail(s, "%s", "out of memory");
  if (gather(s, counts, &mine, sizeof mine)) {
    free(counts);
    return -1;
  }
  for (int r = 0; r < w; r++) most = counts[r] > most ? counts[r] : most;
  size_t per = (size_t)(most ? most : 1);
  nn_trace_ev *pad = calloc(per, sizeof *pad), *all = calloc(per * (size_t)w, sizeof *all);
  int rc = -1;
  if (pad && all) {
    if (s->ntev) memcpy(pad, s->tev, s->ntev * sizeof *pad);
    if (!gather(s, all, pad, per * sizeof *pad)) {
      size_t n = 0; /* packed: rank after rank */
      for (int r = 0; r < w; r++)
        for (int64_t i = 0; i < counts[r]; i++) all[n++] = all[(size_t)r * per + (size_t)i];
      rc = s->o->rank == 0 && s->o->on_trace ? (s->o->on_trace(s->o->ctx, all, n) ? -1 : 0) : 0;
      if (rc) snprintf(s->err, s->cap, "writing the trace failed");
    }
  } else {
    ts_fail(s, "%s", "out of memory");
  }
  free(counts);
  free(pad);
  free(all);
  return rc;
}

/* Sharded, between steps: the parameters gathered whole for what reads them all (stage 2's next
 * forward would gather the update; stage 3's next step starts from the rank's ranges again). 0,
 * or -1 with s->err set. */
static int tr_whole(train_state *s) {
  if (!s->fwdg || s->whole) return 0;
  char rerr[1024];
  if (nn_reducer_gather(s->red, nn_net_params(s->o->net, NULL), NULL, rerr, sizeof rerr)) {
    snprintf(s->err, s->cap, "parameter all-gather: %s", rerr);
    return -1;
  }
  s->whole = 1;
  return 0;
}

/* Every rank's hash of its parameters; a mismatch names the ranks that differ from rank 0. */
static int check_params(train_state *s, int64_t step) {
  /* without an exchange the ranks' models part ways by design (unless they read alike) */
  if (s->world == 1 || (!s->o->comm && !s->o->same_data)) return 0;
  if (tr_whole(s)) return -1;
  size_t np;
  const float *p = nn_net_params(s->o->net, &np);
  uint64_t h = nn_params_hash(p, np), *all = calloc((size_t)s->world, sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory");
  if (gather(s, all, &h, sizeof h)) {
    free(all);
    return -1;
  }
  char list[512] = "";
  size_t len = 0;
  for (int r = 1; r < s->world; r++)
    if (all[r] != all[0] && len + 24 < sizeof list)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%d (%s)", len ? ", " : "", r,
                              coll_boot_host(s->o->boot, r));
  free(all);
  if (len) {
    snprintf(s->err, s->cap,
             "after step %lld the parameters differ between rank 0 (%s) and rank(s) %s: the "
             "ranks no longer train one model",
             (long long)step, coll_boot_host(s->o->boot, 0), list);
    return -1;
  }
  return 0;
}

/* Rank 0's batch-norm running statistics to every rank, so that all evaluate one model. */
static int share_buffers(train_state *s) {
  if (s->world == 1) return 0;
  size_t nb;
  float *b = nn_net_buffers(s->o->net, &nb);
  float *all = malloc((size_t)s->world * nb * sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory");
  int rc = gather(s, all, b, nb * sizeof *b);
  if (!rc) memcpy(b, all, nb * sizeof *b);
  free(all);
  return rc;
}

/* The test set, each rank a shard, summed over the ranks. */
static int evaluate(train_state *s, nn_eval_rec *r) {
  const nn_train_opts *o = s->o;
  double t0 = tr_now();
  if (tr_whole(s) || share_buffers(s)) return -1;
  nn_loader_opts lo = {.batch = o->loader.batch, .world = s->world, .rank = s->world > 1 ? o->rank : 0, .workers = o->loader.workers,
                       .epochs = 1, .prefetch = o->loader.prefetch > 0 ? o->loader.prefetch : 1};
  tr_host_mem(&lo, o->net);
  nn_loader *l;
  double sums[3] = {0, 0, 0}; /* loss, correct, images */
  if (nn_loader_create(&l, o->test, &lo, s->err, s->cap)) return -1;
  for (;;) {
    nn_batch b;
    nn_loader_next(l, &b);
    if (b.n == 0) break;
    double loss = 0;
    int c = 0;
    if (nn_net_eval(o->net, b.x, b.labels, b.n, &loss, &c, s->err, s->cap)) {
      nn_loader_destroy(l);
      return -1;
    }
    sums[0] += loss;
    sums[1] += c;
    sums[2] += b.n;
    if (o->rank == 0 && o->on_alive && o->on_alive(o->ctx)) {
      nn_loader_destroy(l);
      return ts_fail(s, "%s", "stopped during the evaluation");
    }
  }
  nn_loader_destroy(l);
  double *all = calloc((size_t)s->world * 3, sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory");
  if (gather(s, all, sums, sizeof sums)) {
    free(all);
    return -1;
  }
  double tot[3] = {0, 0, 0};
  for (int q = 0; q < s->world; q++)
    for (int k = 0; k < 3; k++) tot[k] += all[3 * q + k];
  free(all);
  r->images = (int64_t)tot[2];
  r->loss = tot[2] > 0 ? tot[0] / tot[2] : NAN;
  r->acc = tot[2] > 0 ? tot[1] / tot[2] : NAN;
  r->secs = tr_now() - t0;
  return 0;
}

/* Which rank, if any, failed a collective step (ok: this rank's word): -1 where none did; the
 * others' error names it. -2 with s->err set where the exchange failed. */
static int first_failed(train_state *s, int32_t ok, const char *what) {
  int32_t *all = calloc((size_t)s->world, sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory"), -2;
  if (gather(s, all, &ok, sizeof ok)) {
    free(all);
    return -2;
  }
  int bad = -1;
  for (int r = 0; r < s->world && bad < 0; r++)
    if (!all[r]) bad = r;
  free(all);
  if (bad >= 0 && ok) snprintf(s->err, s->cap, "rank %d (%s) %s (it says why)", bad, coll_boot_host(s->o->boot, bad), what);
  return bad;
}

/* The sharded form: every rank its file of its ranges (under the set's id, rank 0's), then rank
 * 0 the manifest naming them all, then each rank removes its file of the set saved before. No
 * gather: each rank writes what it holds. Collective. 0, or -1 with s->err set. */
static int save_shards(train_state *s, const nn_ckpt_info *ci0) {
  const nn_train_opts *o = s->o;
  nn_ckpt_info ci = *ci0;
  ci.rank = o->rank;
  ci.world = s->world;
  ci.sharded = o->sharded == 3 ? 3 : 2;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t id = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ ((uint64_t)ci.global_step << 40);
  id = (id ^ (id >> 31)) * 0x9e3779b97f4a7c15ull; /* rank 0's; distinct per save */
  uint64_t *ids = calloc((size_t)s->world, sizeof *ids);
  if (!ids) return ts_fail(s, "%s", "out of memory");
  int rc = gather(s, ids, &id, sizeof id);
  ci.set_id = ids[0];
  free(ids);
  if (rc) return -1;
  char path[sizeof s->shard_prev];
  nn_ckpt_shard_path(path, sizeof path, o->save, ci.global_step, o->rank, s->world);
  size_t np, nm, nb;
  float *p = nn_net_params(o->net, &np), *m = nn_net_momentum(o->net, &nm), *b = nn_net_buffers(o->net, &nb);
  struct {
    uint64_t bytes;
    uint32_t crc;
    int32_t ok;
  } mine = {0, 0, 0}, *all = calloc((size_t)s->world, sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory");
  nn_ckpt_shard_ref ref = {0, 0};
  mine.ok = !nn_ckpt_shard_save(path, &ci, s->shoff, s->shcnt, s->nsh, p, m, b, &ref, s->err, s->cap);
  mine.bytes = ref.bytes;
  mine.crc = ref.crc;
  rc = gather(s, all, &mine, sizeof mine);
  int bad = -1;
  for (int r = 0; !rc && r < s->world && bad < 0; r++)
    if (!all[r].ok) bad = r;
  size_t nw = s->world > 0 ? (size_t)s->world : 1;
  nn_ckpt_shard_ref *refs = rc || bad >= 0 ? NULL : calloc(nw, sizeof *refs);
  for (int r = 0; refs && r < s->world; r++) refs[r] = (nn_ckpt_shard_ref){all[r].bytes, all[r].crc};
  free(all);
  if (rc) return -1;
  if (bad >= 0) {
    if (mine.ok) snprintf(s->err, s->cap, "rank %d (%s) could not write its checkpoint shard (it says why)", bad,
                          coll_boot_host(o->boot, bad));
    return -1;
  }
  int32_t ok = 1;
  if (!refs) ok = !ts_fail(s, "%s", "out of memory");
  else if (o->rank == 0) ok = !nn_ckpt_manifest_save(o->save, &ci, refs, s->err, s->cap);
  free(refs);
  /* the manifest is in place (or every rank stops): the files it no longer names go */
  bad = first_failed(s, ok, "could not write the checkpoint's manifest");
  if (bad != -1) return -1;
  if (*s->shard_prev && strcmp(s->shard_prev, path)) unlink(s->shard_prev);
  snprintf(s->shard_prev, sizeof s->shard_prev, "%s", path);
  return 0;
}

/* resume_shards: this rank's ranges of the parameters and momentum and its buffers from its
 * file; the step's first gather brings the other ranks' ranges. Every rank hears whether all
 * could, so none starts a step that another will not. Collective. 0, or -1 with s->err set. */
static int load_shards(train_state *s) {
  const nn_train_opts *o = s->o;
  nn_ckpt_info want = o->ckpt;
  want.rank = o->rank;
  want.world = s->world;
  want.sharded = o->sharded == 3 ? 3 : 2;
  int32_t ok = 0;
  if (!s->fwdg)
    snprintf(s->err, s->cap, "checkpoint %s: a sharded checkpoint resumes in a --dp sharded run of several ranks "
             "with a gradient exchange", o->resume_shards);
  else
    ok = !nn_ckpt_shard_load(o->resume_shards, &want, s->shoff, s->shcnt, s->nsh, nn_net_params(o->net, NULL),
                             nn_net_momentum(o->net, NULL), nn_net_buffers(o->net, NULL), s->err, s->cap);
  nn_net_params(o->net, NULL); /* written through a kept pointer */
  if (s->world > 1 && first_failed(s, ok, "refused its checkpoint shard") != -1) return -1;
  if (!ok) return -1;
  /* the next save there replaces this set (it was saved after the step this run starts from) */
  if (o->save && !strcmp(o->save, o->resume_shards))
    nn_ckpt_shard_path(s->shard_prev, sizeof s->shard_prev, o->resume_shards, o->start_step, o->rank, s->world);
  return 0;
}

static int save_ckpt(train_state *s, int64_t epoch, int64_t step, int64_t gstep, double elapsed) {
  const nn_train_opts *o = s->o;
  if (!o->save) return 0;
  nn_ckpt_info ci = o->ckpt;
  ci.epoch = epoch;
  ci.step = step;
  ci.global_step = gstep;
  ci.elapsed_s = elapsed;
  if (o->save_sharded) return save_shards(s, &ci);
  /* sharded: every rank's block of the optimizer state first, so the checkpoint is whole */
  if (o->sharded && o->comm && s->world > 1 &&
      nn_reducer_gather(s->red, nn_net_momentum(o->net, NULL), NULL, s->err, s->cap))
    return -1;
  if (tr_whole(s)) return -1; /* sharded: the parameters too */
  int rc = 0;
  if (o->rank == 0) { /* the arenas only where written: a GPU net downloads them */
    size_t np, nm, nb;
    float *p = nn_net_params(o->net, &np), *m = nn_net_momentum(o->net, &nm),
          *b = nn_net_buffers(o->net, &nb);
    rc = nn_ckpt_save(o->save, &ci, p, m, b, s->err, s->cap);
  }
  /* a gathered file over the sharded set this run resumed: once it is in place, the set's files go */
  if (*s->shard_prev) {
    if (first_failed(s, rc == 0, "could not write the checkpoint") != -1) return -1;
    unlink(s->shard_prev);
    s->shard_prev[0] = 0;
  }
  return rc;
}

static double median(double *x, size_t n) {
  if (!n) return NAN;
  for (size_t i = 1; i < n; i++) /* insertion sort: a few thousand values at most */
    for (size_t j = i; j > 0 && x[j - 1] > x[j]; j--) {
      double t = x[j];
      x[j] = x[j - 1];
      x[j - 1] = t;
    }
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static double mean(const double *x, size_t n) {
  double t = 0;
  for (size_t i = 0; i < n; i++) t += x[i];
  return n ? t / (double)n : NAN;
}

static int ts_alloc(train_state *s, size_t cap) {
  s->cap_meas = cap ? cap : 1;
  double **v[] = {&s->step_per, &s->step_max, &s->step_min, &s->comp, &s->front_est, &s->front_hi};
  for (size_t i = 0; i < sizeof v / sizeof *v; i++)
    if (!(*v[i] = calloc(s->cap_meas, sizeof(double)))) return -1;
  for (int k = 0; k < TR_PARTS; k++)
    if (!(s->part[k] = calloc(s->cap_meas, sizeof(double)))) return -1;
  if (!(s->all = calloc((size_t)s->world, sizeof *s->all))) return -1;
  if (!(s->rank_wall = calloc((size_t)s->world, sizeof *s->rank_wall))) return -1;
  return 0;
}

/* The bucket arrays for the plan in use (it changes once, before the first measured step). */
static int ts_buckets(train_state *s) {
  free(s->bready);
  free(s->bcomm);
  free(s->bdone);
  free(s->lastb);
  free(s->plan);
  s->plan = NULL;
  s->bready = s->bcomm = s->bdone = NULL;
  s->nb = nn_reducer_nbuckets(s->red);
  size_t nbk = s->cap_meas * (size_t)(s->nb ? s->nb : 1);
  if (!(s->bready = calloc(nbk, sizeof(double))) || !(s->bcomm = calloc(nbk, sizeof(double))) ||
      !(s->bdone = calloc(nbk, sizeof(double))) ||
      !(s->lastb = calloc((size_t)(s->nb ? s->nb : 1), sizeof *s->lastb)) ||
      !(s->plan = calloc((size_t)(s->nb ? s->nb : 1), sizeof *s->plan)))
    return -1;
  nn_reducer_last(s->red, s->plan, s->nb, NULL); /* the ranges are the plan's, whatever step */
  s->lastb_traced = 1; /* the old plan's buckets went with it */
  return 0;
}

static void ts_free(train_state *s) {
  free(s->shoff);
  free(s->shcnt);
  free(s->step_per);
  free(s->step_max);
  free(s->step_min);
  free(s->rank_wall);
  for (int i = 0; i < TR_PARTS; i++) free(s->part[i]);
  free(s->comp);
  free(s->bready);
  free(s->bcomm);
  free(s->bdone);
  free(s->lastb);
  free(s->plan);
  free(s->front_est);
  free(s->front_hi);
  free(s->all);
  free(s->tev);
}

/* Keeps one measured step: every rank's record (all) and rank 0's bucket times (the last
 * completed step's, from the start of its backward). */
static void keep(train_state *s, const nn_step_rec *all) {
  double fwd_s = s->lastb_fwd;
  size_t i = s->nmeas++;
  double mx = 0, mn = INFINITY, sum[TR_PARTS] = {0}, comp = 0, per = 0;
  for (int r = 0; r < s->world; r++) {
    const nn_step_rec *q = &all[r];
    s->rank_wall[r] += q->step_s;
    per += q->step_s / s->world;
    mx = q->step_s > mx ? q->step_s : mx;
    mn = q->step_s < mn ? q->step_s : mn;
    double p[TR_PARTS] = {q->data_s, q->load_s,    q->fwd_s,      q->bwd_s,
                          q->comm_s, q->exposed_s, q->opt_s, q->comm_cpu_s, q->wait_s};
    for (int k = 0; k < TR_PARTS; k++) sum[k] += p[k];
    comp = q->fwd_s + q->bwd_s + q->opt_s > comp ? q->fwd_s + q->bwd_s + q->opt_s : comp;
  }
  s->step_per[i] = per;
  s->step_max[i] = mx;
  s->step_min[i] = mn;
  for (int k = 0; k < TR_PARTS; k++) s->part[k][i] = sum[k] / s->world;
  s->comp[i] = comp;
  const nn_bucket *b = s->lastb;
  for (int k = 0; k < s->nb; k++) {
    s->bready[(size_t)k * s->cap_meas + i] = b[k].ready_s - fwd_s;
    s->bcomm[(size_t)k * s->cap_meas + i] = b[k].done_s - b[k].start_s;
    s->bdone[(size_t)k * s->cap_meas + i] = b[k].done_s > 0 ? b[k].done_s - fwd_s : NAN;
  }
}

/* Throughput from wall time, not from each step's slowest rank: a step record ends where its
 * rank reaches the exchange, so the rank that waited there carries the wait into its next step,
 * and with overlap_step the ranks take turns at being late; summing each step's slowest rank
 * would count those turns twice (docs/measurements.md, "The training loop's figures"). */
static void summarize(train_state *s, nn_train_result *res, int64_t images) {
  size_t n = s->nmeas;
  double wall = 0, tcomp = 0;
  for (int r = 0; r < s->world; r++) wall = s->rank_wall[r] > wall ? s->rank_wall[r] : wall;
  for (size_t i = 0; i < n; i++) tcomp += s->comp[i];
  res->measured = (int64_t)n;
  /* no step timed (all were warm-up): no figure, not a throughput of 0 */
  res->images_per_s = wall > 0 ? (double)images / wall : NAN;
  res->compute_images_per_s = tcomp > 0 ? (double)images / tcomp : NAN;
  res->step_mean_s = n ? wall / (double)n : NAN;
  double *imb = malloc((n ? n : 1) * sizeof *imb);
  for (size_t i = 0; imb && i < n; i++) imb[i] = s->step_max[i] - s->step_min[i];
  res->imbalance_s = imb ? median(imb, n) : NAN;
  free(imb);
  res->step_p50_s = median(s->step_per, n);
  res->step_p90_s = n ? s->step_per[(size_t)ceil(0.9 * (double)n) - 1] : NAN; /* sorted now */
  double *dst[TR_PARTS] = {&res->data_s, &res->load_s,    &res->fwd_s,      &res->bwd_s,
                           &res->comm_s, &res->exposed_s, &res->opt_s, &res->comm_cpu_s, &res->wait_s};
  /* means: all but load, comm, comm_cpu and wait (inside the others) add up to the mean step */
  for (int k = 0; k < TR_PARTS; k++) *dst[k] = mean(s->part[k], n);
  const nn_bucket *b = s->lastb;
  int nb = s->nb;
  res->nbuckets = nb < NN_TRAIN_MAX_BUCKETS ? nb : NN_TRAIN_MAX_BUCKETS;
  for (int k = 0; k < res->nbuckets; k++) {
    nn_bucket_rec *q = &res->buckets[k];
    q->offset = b[k].offset;
    q->count = b[k].count;
    q->ready_s = median(s->bready + (size_t)k * s->cap_meas, n);
    q->comm_s = median(s->bcomm + (size_t)k * s->cap_meas, n);
    q->done_s = median(s->bdone + (size_t)k * s->cap_meas, n);
  }
}

/* One step: its batch, its times, and what happens at its end. */
typedef struct {
  nn_batch b;
  float loss;
  int correct;
  nn_step_times tm;
  double t0, t1, t2, t3;      /* before the batch, after it, after backward, after the update */
  double bwd_end, wait_end;   /* from t1: backward's end; the wait for the buckets after it */
  double comm, comm_cpu;      /* the step's all-reduce time and its thread's CPU */
  size_t step_ev;             /* its first trace event */
  int epoch_end, eval_due, last, check, drain, warm;
  int64_t done;               /* epochs, at an epoch's end */
  nn_reducer_stats rs;
} tr_step;

/* A warm-up step's estimates of the front (nn_reducer.h), at this step's all-reduce rate. The
 * least: what the link reduces while backward goes on, from the first bucket's readiness to
 * backward's end; a shorter front leaves the link idle before backward ends. The most: all but
 * what the link must still reduce while the next step's data and forward run, and its backward
 * reaches the first bucket; a longer rest leaves the link idle during that forward. */
static void front_estimate(train_state *s, const tr_step *st, size_t count) {
  double comm_s = st->rs.comm_s;
  if (comm_s <= 0 || !s->nb) return;
  const nn_step_times *tm = &st->tm;
  double rate = (double)count / comm_s, ready0 = s->lastb[0].ready_s - tm->fwd_s;
  double window = tm->bwd_s - ready0, next = (st->t1 - st->t0) + tm->fwd_s + ready0;
  double lo = rate * (window > 0 ? window : 0), hi = (double)count - rate * next;
  s->front_est[s->nfront] = lo < (double)count ? lo : (double)count;
  s->front_hi[s->nfront++] = hi > 0 ? hi : 0;
}

/* overlap_step from now on, with rank 0's front (nn_reducer_front_choose on the medians of its
 * warm-up estimates; without any, the whole arena, which keeps arena order) on every rank, since
 * the all-reduce calls must be the same everywhere. With NN_OSTEP_AUTO only if even rank 0's
 * best estimate is short of the arena: one warm-up step on a slow spell of a fast link must not
 * turn it on. Collective. */
static int set_front(train_state *s, size_t count) {
  double mine[3] = {(double)count, (double)count, (double)count}; /* median, best, most */
  if (s->nfront) {
    mine[2] = median(s->front_hi, s->nfront);
    mine[0] = median(s->front_est, s->nfront); /* sorts */
    mine[1] = s->front_est[s->nfront - 1];
  }
  double *all = calloc((size_t)s->world * 3, sizeof *all);
  if (!all) return ts_fail(s, "%s", "out of memory");
  int rc = gather(s, all, mine, sizeof mine);
  double f = all[0], best = all[1], most = all[2];
  free(all);
  if (rc) return -1;
  size_t front = nn_reducer_front_choose(f, most, count);
  if (s->o->overlap_step == NN_OSTEP_AUTO && best >= (double)count) {
    s->hooked = 0; /* backward hides the all-reduce: stay off */
    if (!s->alive) {
      nn_net_on_forward(s->o->net, NULL, NULL);
      s->fwd_hook = 0;
    }
    return 0;
  }
  if (nn_reducer_set_front(s->red, front) || ts_buckets(s))
    return ts_fail(s, "%s", "out of memory for the bucket plan");
  if (s->nb > NN_TRAIN_MAX_BUCKETS) return ts_fail(s, "%s", "the forward's split gives more buckets than are recorded");
  s->ostep = 1;
  return 0;
}

/* Stage 3: where the forward releases each bucket (before the first layer after the last that
 * reads it; layers run in index order) and so which the backward gathers again, the layers'
 * ranges for the backward's waits; then the parameters dropped to the rank's ranges. The
 * backward's first layer (the arena's start) reads its parameters with no wait before it: its
 * buckets are never released (the last layer's, as FSDP keeps its root's). 0, or -1. */
static int stage3_plan(train_state *s, const nn_param_info *pi, int npi) {
  int nb = nn_reducer_nbuckets(s->red), nlay = 0;
  nn_bucket *b = calloc((size_t)nb, sizeof *b);
  for (int i = 0; i < npi; i++) nlay = pi[i].layer + 1 > nlay ? pi[i].layer + 1 : nlay;
  s->free_at = calloc((size_t)nb, sizeof *s->free_at);
  s->lay_lo = calloc((size_t)nlay + 1, sizeof *s->lay_lo);
  s->lay_hi = calloc((size_t)nlay + 1, sizeof *s->lay_hi);
  unsigned char *refetch = calloc((size_t)nb, 1);
  int *need = calloc((size_t)nb, sizeof *need), rc = -1;
  if (!b || !s->free_at || !s->lay_lo || !s->lay_hi || !refetch || !need) {
    snprintf(s->err, s->cap, "out of memory");
    goto out;
  }
  s->nlay = nlay;
  for (int l = 0; l < nlay; l++) s->lay_lo[l] = (size_t)-1, s->lay_hi[l] = 0;
  for (int i = 0; i < npi; i++) {
    int l = pi[i].layer;
    if (pi[i].offset < s->lay_lo[l]) s->lay_lo[l] = pi[i].offset;
    if (pi[i].offset + pi[i].count > s->lay_hi[l]) s->lay_hi[l] = pi[i].offset + pi[i].count;
  }
  for (int l = 0; l < nlay; l++)
    if (s->lay_hi[l] == 0) s->lay_lo[l] = 0; /* no parameters */
  nn_reducer_last(s->red, b, nb, NULL); /* the plan */
  for (int k = 0; k < nb; k++) {
    int last = -1, next = -1;
    for (int l = 0; l < nlay; l++)
      if (s->lay_hi[l] > s->lay_lo[l] && s->lay_lo[l] < b[k].offset + b[k].count && b[k].offset < s->lay_hi[l])
        last = l;
    for (int l = last + 1; l < nlay && next < 0; l++)
      if (s->lay_hi[l] > s->lay_lo[l]) next = l;
    s->free_at[k] = last >= 0 ? next : -1;
    if (b[k].offset == 0) s->free_at[k] = -1; /* the backward's first layer's */
    refetch[k] = s->free_at[k] >= 0;
  }
  /* before reducing bucket k, the gathers of the buckets of the layer holding its last float (it
   * must end first) and of the next bucket */
  for (int k = 0; k < nb; k++) {
    size_t last = b[k].offset + b[k].count - 1, hi = last + 1;
    for (int l = 0; l < nlay; l++)
      if (s->lay_lo[l] <= last && last < s->lay_hi[l]) hi = s->lay_hi[l];
    need[k] = k + 1;
    for (int q = k; q < nb; q++)
      if (b[q].offset < hi && need[k] < q) need[k] = q;
  }
  if (nn_reducer_set_refetch(s->red, refetch, need)) {
    snprintf(s->err, s->cap, "internal: the reducer is not at stage 3");
    goto out;
  }
  nn_reducer_reshard(s->red);
  s->stage3 = 1;
  rc = 0;
out:
  free(b);
  free(refetch);
  free(need);
  return rc;
}

/* The reducer, the net's hooks, the loader and the records of a run. 0, or -1 with s->err set. */
static int tr_open(train_state *s, nn_loader **loader, size_t *np) {
  const nn_train_opts *o = s->o;
  /* host gradients only for an exchange over host memory: a GPU net without one keeps them on
   * the device (the reducer then only times when backward completes each bucket) */
  const nn_param_info *pi;
  int npi = nn_net_param_tensors(o->net, &pi);
  for (int i = 0; i < npi; i++) *np += pi[i].count;
  float *grads = NULL;
  if (o->comm) grads = nn_net_grads(o->net, NULL);
  else nn_net_grads_on_host(o->net, 0);
  nn_reducer_opts ro = {.comm = o->comm, .algo = o->algo, .wire = o->wire,
                        .bucket_bytes = o->bucket_bytes, .first_bucket_bytes = o->first_bucket_bytes,
                        .overlap = o->overlap, .scale_in_sgd = 1, .wire_alloc = o->wire_alloc,
                        .sharded = !o->sharded || !o->comm ? 0 : o->sharded == 3 ? 3 : 2,
                        .params = o->sharded && o->comm && s->world > 1 ? nn_net_params(o->net, NULL) : NULL};
  if (o->sharded && o->comm && (o->overlap_step == NN_OSTEP_ON || nn_net_device(o->net) != NN_DEV_CPU)) {
    snprintf(s->err, s->cap, "sharded training runs on the CPU without overlap_step");
    return -1;
  }
  if (nn_reducer_create(&s->red, &ro, grads, *np, s->err, s->cap)) return -1;
  s->nsh = nn_reducer_shards(s->red, NULL, NULL, 0);
  s->shoff = malloc((size_t)s->nsh * sizeof *s->shoff), s->shcnt = malloc((size_t)s->nsh * sizeof *s->shcnt);
  if (!s->shoff || !s->shcnt) return snprintf(s->err, s->cap, "out of memory"), -1;
  nn_reducer_shards(s->red, s->shoff, s->shcnt, s->nsh);
  s->fwdg = ro.params != NULL;
  if (ro.params && ro.sharded == 3 && stage3_plan(s, pi, npi)) return -1;
  if (o->save && o->save_sharded && !s->fwdg) {
    snprintf(s->err, s->cap, "--save-format sharded: each rank writes its shard of a --dp sharded exchange; this "
             "run has none (one rank, or no gradient exchange)");
    return -1;
  }
  if (o->resume_shards && load_shards(s)) return -1;
  nn_net_on_grad_ready(o->net, on_ready, s);
  /* the others are not in this loop but wait outside it; with a boot they are in every step */
  s->alive = !o->boot && o->on_alive;
  /* a GPU net cannot stop its forward layer by layer: it drains every step (and is alive from
   * backward only) */
  s->fwd_hook = (o->overlap_step || s->alive || s->fwdg) && nn_net_on_forward(o->net, on_forward, s) == 0;
  if (s->fwdg && !s->fwd_hook) {
    snprintf(s->err, s->cap, "sharded training needs a net that calls its forward hook layer by layer");
    return -1;
  }
  /* overlap_step exchanges a step's records and checks while the communication thread reduces:
   * not where both go through one MPI library that takes one thread at a time */
  s->hooked = o->overlap_step && !ro.sharded && s->fwd_hook && !coll_comm_serial_with_boot(o->comm);
  s->upload_ahead = nn_net_device(o->net) == NN_DEV_CUDA;

  nn_loader_opts lo = o->loader;
  lo.rank = o->same_data || s->world == 1 ? 0 : o->rank;
  lo.world = o->same_data ? 1 : s->world;
  lo.epochs = o->epochs;
  lo.epoch = o->start_step / o->steps_per_epoch;
  lo.step = o->start_step % o->steps_per_epoch;
  tr_host_mem(&lo, o->net);
  if (nn_loader_create(loader, o->train, &lo, s->err, s->cap)) return -1;
  if (nn_loader_steps_per_epoch(*loader) != o->steps_per_epoch) {
    snprintf(s->err, s->cap, "internal: %lld steps per epoch, the caller planned %lld",
             (long long)nn_loader_steps_per_epoch(*loader), (long long)o->steps_per_epoch);
    return -1;
  }
  if (ts_alloc(s, (size_t)(o->stop_step - o->start_step)) || ts_buckets(s)) {
    snprintf(s->err, s->cap, "out of memory for %lld step records", (long long)(o->stop_step - o->start_step));
    return -1;
  }
  /* every rank plans the same buckets, so every rank stops here alike; the records hold at most
   * NN_TRAIN_MAX_BUCKETS, and a plan cut short would mislead the predictions that read it */
  if (s->nb > NN_TRAIN_MAX_BUCKETS) {
    snprintf(s->err, s->cap, "the bucket sizes give %d buckets, more than the %d recorded: raise --bucket-mb or --first-bucket-mb",
             s->nb, NN_TRAIN_MAX_BUCKETS);
    return -1;
  }
  return 0;
}

/* The step's batch, forward and backward (its buckets handed to the reducer as backward
 * completes them). 0; 1: the data ran out; -1 with s->err set. */
static int tr_compute(train_state *s, nn_loader *loader, tr_step *st, int64_t gstep, int64_t run_steps) {
  const nn_train_opts *o = s->o;
  st->t0 = tr_now();
  nn_loader_next(loader, &st->b);
  double t1 = st->t1 = tr_now();
  if (st->b.n == 0) return 1;
  /* a GPU net uploads the next batch on its copy stream while this step computes; not after
   * the last step, whose upload nothing would wait for */
  nn_batch nb;
  if (s->upload_ahead && gstep + 1 < o->stop_step && nn_loader_peek(loader, &nb) &&
      nb.n > 0 && nn_net_prefetch(o->net, nb.x, nb.n, s->err, s->cap))
    return -1;
  s->tracing_prev = s->tracing;
  s->tracing = o->trace_steps > 0 && run_steps >= o->warmup_steps && run_steps < o->warmup_steps + o->trace_steps;
  s->tstep = gstep + 1;
  s->tlast = t1; /* mended in tr_trace_step once the forward's end is known */
  st->step_ev = s->ntev;
  s->t1 = t1;
  s->begun = 0;
  s->hook_wait = s->hook_opt = s->bwd_wait = 0;
  s->whole = 0; /* sharded: the update leaves the others' blocks stale (stage 3: dropped) */
  if (!s->ostep) begin_step(s);
  if (nn_net_train_step(o->net, st->b.x, st->b.labels, st->b.n, &st->loss, &st->correct, &st->tm, s->err, s->cap))
    return -1;
  if (s->gather_failed) return -1;
  if (s->alive_failed) {
    snprintf(s->err, s->cap, "stopped during step %lld", (long long)gstep + 1);
    return -1;
  }
  if (!s->begun) begin_step(s);
  return 0;
}

/* The optimizer's step: on the whole arena, or (sharded) on this rank's ranges only: the
 * reducer's thread gathers every rank's updated blocks bucket by bucket at the next step's start,
 * while the forward runs (tr_whole where something reads them all before). */
static void tr_update(train_state *s, const nn_sgd_opts *so) {
  const nn_train_opts *o = s->o;
  if (!s->fwdg) {
    nn_sgd_step(o->net, so);
    return;
  }
  for (int i = 0; i < s->nsh; i++) nn_sgd_step_range(o->net, so, s->shoff[i], s->shcnt[i]);
}

/* The step's end: the last buckets to the reducer, the deferred parameter check, then the update
 * now (a drained step) or bucket by bucket in the next forward (overlap_step). 0, or -1 with
 * s->err set. */
static int tr_reduce(train_state *s, tr_step *st, nn_sgd_opts *so, int64_t gstep) {
  const nn_train_opts *o = s->o;
  so->lr = (float)nn_lr_at(&o->sched, gstep);
  so->t = gstep + 1; /* Adam's bias corrections count the steps of the whole training */
  st->epoch_end = st->b.step + 1 == o->steps_per_epoch;
  st->done = st->b.epoch + 1;
  st->eval_due = st->epoch_end && o->eval_every > 0 && (st->done % o->eval_every == 0 || st->done == o->epochs);
  st->last = gstep + 1 == o->stop_step;
  st->check = st->epoch_end || st->last || (o->check_every > 0 && (gstep + 1) % o->check_every == 0);
  /* what reads the final weights drains the step; the parameter check need not: it waits
   * for the next step's forward, which brings this step's update in, and checks before the
   * next update (so overlap_step keeps the link busy across epochs and --check-every) */
  st->drain = !s->ostep || st->last || st->eval_due || (st->epoch_end && o->save);
  char rerr[1024];
  st->t2 = tr_now();
  st->wait_end = 0;
  nn_reducer_end_backward(s->red);
  st->bwd_end = st->t2 - st->t1;
  /* the deferred check, once this step's last buckets are handed to the thread */
  if (s->check_due && check_params(s, s->check_due)) return -1;
  s->check_due = 0;
  if (!st->drain) {
    s->pso = *so;
    s->pending = 1;
    s->applied = 0;
    s->lastb_t1 = s->t1_prev; /* begin_step copied the last step's buckets */
    s->lastb_fwd = s->fwd_prev;
    return 0;
  }
  if (nn_reducer_drain(s->red, &st->rs, rerr, sizeof rerr)) {
    snprintf(s->err, s->cap, "step %lld, gradient all-reduce: %s", (long long)gstep + 1, rerr);
    return -1;
  }
  st->bwd_end = st->rs.bwd_end_s;
  st->wait_end = st->rs.exposed_s;
  st->comm += st->rs.comm_s;
  st->comm_cpu += st->rs.comm_cpu_s;
  tr_update(s, so);
  /* the last step's, if reduced behind this one, then this step's buckets, for the record */
  trace_buckets(s, s->t1_prev);
  nn_reducer_last(s->red, s->lastb, s->nb, NULL);
  s->lastb_step = gstep + 1;
  s->lastb_traced = !s->tracing;
  s->lastb_t1 = st->t1;
  s->lastb_fwd = st->tm.fwd_s;
  return 0;
}

/* A traced step's spans, and the buckets of the step they belong to. */
static void tr_trace_step(train_state *s, const tr_step *st) {
  double t1 = st->t1;
  if (s->tracing) {
    /* the first layer's backward began when the forward (and loss) ended */
    if (s->ntev > st->step_ev) {
      nn_trace_ev *f = &s->tev[st->step_ev];
      double end = f->ts_s + f->dur_s, beg = t1 + st->tm.fwd_s - s->tbase;
      f->ts_s = beg < end ? beg : end;
      f->dur_s = end - f->ts_s;
    }
    trace(s, "data", 0, st->t0, t1);
    trace(s, "fwd", 0, t1, t1 + st->tm.fwd_s);
    if (st->drain) {
      trace(s, "wait", 0, t1 + st->bwd_end, t1 + st->bwd_end + st->wait_end);
      trace(s, "sgd", 0, t1 + st->bwd_end + st->wait_end, st->t3);
    }
  }
  trace_buckets(s, s->lastb_t1); /* a traced step's buckets, at their step's origin */
  s->t1_prev = t1;
  s->fwd_prev = st->tm.fwd_s;
}

/* Step gstep's record, exchanged among the ranks: kept where measured, given to on_step (rank
 * 0), and checked for divergence on every rank. 0, or -1 with s->err set. */
static int tr_record(train_state *s, const tr_step *st, const nn_sgd_opts *so, int64_t gstep, double t_start,
                     int64_t *images) {
  const nn_train_opts *o = s->o;
  double hooks = s->hook_wait + s->hook_opt, t0 = st->t0, t3 = st->t3;
  nn_step_rec me = {.rank = o->rank, .images = st->b.n, .warmup = st->warm, .step = gstep,
                    .epoch = st->b.epoch, .step_in_epoch = st->b.step, .loss = st->loss,
                    .batch_acc = (double)st->correct / st->b.n, .lr = so->lr, .step_s = t3 - t0 + s->gap,
                    .data_s = st->t1 - t0 + s->gap, .load_s = st->b.load_s, .wait_s = st->t1 - t0, .fwd_s = st->tm.fwd_s - hooks,
                    .bwd_s = st->tm.bwd_s - s->bwd_wait, .comm_s = st->comm, .comm_cpu_s = st->comm_cpu,
                    .exposed_s = s->hook_wait + s->bwd_wait + st->wait_end,
                    .opt_s = s->hook_opt + (t3 - st->t2) - st->wait_end,
                    .elapsed_s = o->elapsed0 + (t3 - t_start)};
  if (gather(s, s->all, &me, sizeof me)) return -1;
  if (!st->warm) {
    keep(s, s->all);
    for (int r = 0; r < s->world; r++) *images += s->all[r].images;
  }
  if (o->rank == 0 && o->on_step && o->on_step(o->ctx, s->all, s->world)) {
    snprintf(s->err, s->cap, "stopped after step %lld", (long long)gstep);
    return -1;
  }
  /* wall time between steps: the record's exchange (where the ranks meet, and with
   * overlap_step where one waits for the other's all-reduce) counts in the next step */
  s->gap = tr_now() - t3;
  for (int r = 0; r < s->world; r++)
    if (!isfinite(s->all[r].loss)) {
      snprintf(s->err, s->cap, "step %lld: rank %d's loss is %g; training diverged (lower --lr?)",
               (long long)gstep, r, s->all[r].loss);
      return -1;
    }
  return 0;
}

/* An evaluation after step gstep at epoch `epoch` (its record to on_eval, rank 0). 1: it
 * reached --target-acc first; 0; -1 with s->err set. */
static int tr_eval(train_state *s, nn_train_result *res, int64_t epoch, int64_t gstep, double t_start) {
  const nn_train_opts *o = s->o;
  nn_eval_rec er = {.epoch = epoch, .step = gstep};
  if (evaluate(s, &er)) return -1;
  er.elapsed_s = o->elapsed0 + (tr_now() - t_start);
  res->test_loss = er.loss;
  res->test_acc = er.acc;
  if (o->rank == 0 && o->on_eval && o->on_eval(o->ctx, &er)) return -1;
  if (o->target_acc > 0 && res->time_to_target_s < 0 && er.acc >= o->target_acc) {
    res->time_to_target_s = er.elapsed_s;
    return 1;
  }
  return 0;
}

int nn_train_run(nn_train_result *res, const nn_train_opts *o, char *err, size_t errcap) {
  memset(res, 0, sizeof *res);
  res->status = "failed";
  res->final_loss = res->test_loss = res->test_acc = NAN;
  res->time_to_target_s = -1;
  res->start_step = res->end_step = o->start_step;
  train_state s = {.o = o, .err = err, .cap = errcap, .lastb_traced = 1};
  s.world = o->boot ? o->world : 1;
  nn_loader *loader = NULL;
  size_t np = 0;
  float *adam_v = NULL;
  int rc = -1;
  if (tr_open(&s, &loader, &np)) goto out;

  nn_sgd_opts so = o->sgd;
  so.grad_scale = nn_reducer_grad_scale(s.red);
  /* Adam's second moment, from zero as PyTorch starts it (a GPU net keeps its own on the device) */
  if (so.kind != NN_OPT_SGD && !so.v && nn_net_device(o->net) == NN_DEV_CPU) {
    if (!(adam_v = calloc(np ? np : 1, sizeof *adam_v))) {
      snprintf(err, errcap, "out of memory for %s's second moment", nn_optim_name(so.kind));
      goto out;
    }
    so.v = adam_v;
  }
  int64_t gstep = o->start_step, run_steps = 0, images = 0, last_eval = -1;
  double t_start = tr_now();
  s.tbase = t_start;
  const char *why = "done";
  res->grad_bytes = o->comm ? np * coll_dtype_size(o->wire) : 0;
  res->sent_bytes = nn_reducer_step_bytes(s.red);
  for (int i = 0; i < s.nsh; i++) res->opt_floats += s.shcnt[i];
  while (gstep < o->stop_step) {
    if (s.hooked && !s.ostep && run_steps == o->warmup_steps && set_front(&s, np)) goto out;
    tr_step st = {.tm = {0, 0}};
    int had_pending = s.pending;
    int c = tr_compute(&s, loader, &st, gstep, run_steps);
    if (c > 0) break;
    if (c < 0) goto out;
    /* the last step's buckets, reduced behind this step's forward and backward, count in it */
    st.comm = had_pending ? s.last_rs.comm_s : 0;
    st.comm_cpu = had_pending ? s.last_rs.comm_cpu_s : 0;
    if (tr_reduce(&s, &st, &so, gstep)) goto out;
    st.t3 = tr_now();
    tr_trace_step(&s, &st);
    st.warm = run_steps < o->warmup_steps;
    if (st.warm && s.hooked && st.drain && o->comm && run_steps > 0) front_estimate(&s, &st, np);
    run_steps++;
    gstep++;
    if (o->corrupt_step == gstep && o->corrupt_rank == o->rank) {
      float *p = nn_net_params(o->net, NULL);
      p[0] += 1e-3f; /* tests: the hash check must notice */
    }
    res->final_loss = st.loss;
    res->end_step = gstep;
    if (tr_record(&s, &st, &so, gstep, t_start, &images)) goto out;
    if (st.check && !st.drain) s.check_due = gstep;
    else if (st.check && check_params(&s, gstep)) goto out;
    if (!st.epoch_end) continue;
    if (st.eval_due) {
      int reached = tr_eval(&s, res, st.done, gstep, t_start);
      if (reached < 0) goto out;
      last_eval = gstep;
      if (reached && o->stop_at_target) why = "target reached";
    }
    if (save_ckpt(&s, st.done, 0, gstep, o->elapsed0 + (tr_now() - t_start))) goto out;
    if (!strcmp(why, "target reached")) break;
  }
  if (s.pending) { /* the data ran out mid-overlap: the last update */
    char rerr[1024];
    if (nn_reducer_drain(s.red, NULL, rerr, sizeof rerr)) {
      snprintf(err, errcap, "step %lld, gradient all-reduce: %s", (long long)gstep, rerr);
      goto out;
    }
    nn_sgd_step(o->net, &s.pso);
    s.pending = 0;
    if (s.check_due && check_params(&s, gstep)) goto out;
  }
  double train_s = tr_now() - t_start;
  if (tr_whole(&s)) goto out; /* sharded: the caller gets the whole model */
  /* a run cut by the step count mid-epoch still reports where it stands */
  if (o->eval_every > 0 && last_eval != gstep && strcmp(why, "target reached") &&
      tr_eval(&s, res, gstep / o->steps_per_epoch, gstep, t_start) < 0)
    goto out;
  if (gstep % o->steps_per_epoch != 0 &&
      save_ckpt(&s, gstep / o->steps_per_epoch, gstep % o->steps_per_epoch, gstep,
                o->elapsed0 + train_s))
    goto out;
  if (o->trace_steps > 0 && gather_trace(&s)) goto out;
  if (o->target_acc > 0 && res->time_to_target_s < 0) why = "target not reached";
  res->steps = run_steps;
  res->train_s = o->elapsed0 + train_s;
  summarize(&s, res, images);
  res->overlap_step = s.ostep;
  nn_reducer_params_held(s.red, &res->params_held, &res->params_peak);
  res->status = why;
  rc = 0;
out:
  nn_net_on_grad_ready(o->net, NULL, NULL);
  if (s.fwd_hook) nn_net_on_forward(o->net, NULL, NULL);
  nn_loader_destroy(loader);
  nn_reducer_destroy(s.red);
  ts_free(&s);
  free(s.free_at);
  free(s.lay_lo);
  free(s.lay_hi);
  free(adam_v);
  return rc;
}
