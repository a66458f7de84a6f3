/* fabench train --mode partitioned: a fully connected network cut into two parts, each trained on
 * its own rank against synthetic intermediate labels (models' nn_part.h), nothing crossing the
 * fabric while they train; then the test set through the parts in sequence (the cut's activations
 * cross once per batch, counted), optional recovery epochs of the joined network, and (unless
 * --no-compare) the same network trained conventionally on one rank and data-parallel on all.
 * A row each in train_partition.csv: accuracy, time per epoch, bytes over the fabric, peak
 * memory per rank. docs/training.md, "Partitioned training". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "util.h"

#define PT_TAG_CUT 0x5117u
#define PT_TAG_PARAMS 0x5118u

int train_partitioned_check(const train_args *a) {
  if (a->mode != TRAIN_MODE_PARTITIONED) {
    if (a->parts_given || a->recovery_epochs || a->no_compare)
      return bench_usage_error(train_usage(), "--parts, --recovery-epochs and --no-compare belong to --mode partitioned");
    if (a->mode == TRAIN_MODE_CONVENTIONAL && a->r.nranks > 1)
      return bench_usage_error(train_usage(), "--mode conventional trains one rank: leave out -n %d", a->r.nranks);
    return 0;
  }
  if (!nn_model_is_mlp(a->model))
    return bench_usage_error(train_usage(), "--mode partitioned cuts a fully connected network, not '%s' "
                                          "(--model mlp:IN,W,...,OUT or fc6)", a->model);
  if (a->parts != 2)
    return bench_usage_error(train_usage(), "--parts %ld: partitioned training cuts a network into 2 parts", a->parts);
  if (a->r.nranks > 0 && a->r.nranks != a->parts)
    return bench_usage_error(train_usage(), "--mode partitioned --parts %ld trains a part a rank: -n %ld, not -n %d",
                             a->parts, a->parts, a->r.nranks);
  if (a->ndevices != 1 || a->devices[0] != NN_DEV_CPU)
    return bench_usage_error(train_usage(), "--mode partitioned trains on the CPU (--device cpu)");
  if (a->save || a->resume || a->rounds > 1 || a->trace)
    return bench_usage_error(train_usage(), "--mode partitioned takes no --save, --resume, --rounds or --trace");
  return 0;
}

/* ---- a run ---- */

typedef struct {
  train_args *a;
  bench_session s;  /* the bootstrap, rank 0's run directory (s.run) */
  coll_boot *boot;  /* the session's, for short */
  int rank, size;
  coll_comm *comm;
  coll_algo algo;
  char tname[16], aname[32];
  nn_dataset train, test;
  char dname[2200];
  res_table *tab;
  int cut, width;
  size_t nparams;             /* the joined network's */
  double beat_at;             /* when this rank last joined a heartbeat */
  int peer_failed;
} pt_job;

/* Peak resident memory: VmHWM, which writing 5 to clear_refs resets to the current size. */
static void rss_reset(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (f) {
    fputs("5", f);
    fclose(f);
  }
}

static int64_t rss_peak(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int64_t kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kb = strtoll(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb < 0 ? -1 : kb * 1024;
}

/* The heartbeat over the bootstrap (collective): each rank says 0 (training), 1 (done) or 2
 * (failed). A rank that has finished waits in it while the other trains, and the training rank
 * joins it every so often, so neither waits longer than --timeout for a word. *lo and *hi get the
 * least and most said. 0, or -1 after saying why. */
static int pt_beat(pt_job *j, int32_t say, int32_t *lo, int32_t *hi) {
  int32_t all[64];
  coll_err e = {{0}};
  if (coll_boot_allgather(j->boot, all, &say, sizeof say, &e)) return bench_error("%s", e.msg);
  *lo = *hi = all[0];
  for (int r = 1; r < j->size; r++) {
    *lo = all[r] < *lo ? all[r] : *lo;
    *hi = all[r] > *hi ? all[r] : *hi;
  }
  j->beat_at = util_now();
  return 0;
}

/* From a training rank: a beat when the last is a quarter of --timeout (at most a second) old. */
static int pt_alive(void *ctx) {
  pt_job *j = ctx;
  double period = j->a->r.timeout_s / 4.0;
  if (j->size < 2 || util_now() - j->beat_at < (period < 1 ? period : 1)) return 0;
  int32_t lo, hi;
  if (pt_beat(j, 0, &lo, &hi)) return -1;
  if (hi == 2) {
    j->peer_failed = 1;
    return -1;
  }
  return 0;
}

static int pt_on_step(void *ctx, int64_t step, double loss) {
  (void)step, (void)loss;
  return pt_alive(ctx);
}

/* Every rank done (ok) or failed: 0 when all are done, -1 when any failed (said by it). */
static int pt_wait_all(pt_job *j, int ok) {
  int32_t lo = 0, hi = 0;
  if (j->size < 2) return ok ? 0 : -1;
  do {
    if (pt_beat(j, ok ? 1 : 2, &lo, &hi)) return -1;
  } while (lo == 0 && hi != 2);
  return ok && hi != 2 ? 0 : -1;
}

/* Each rank's peak memory since rss_reset, to rank 0 (collective): the largest, and ranks 0 and 1. */
static int pt_peaks(pt_job *j, res_train_partition_row *row) {
  int64_t mine = rss_peak(), all[64] = {0};
  coll_err e = {{0}};
  if (j->size > 1 && coll_boot_allgather(j->boot, all, &mine, sizeof mine, &e)) return bench_error("%s", e.msg);
  if (j->size == 1) all[0] = mine;
  row->peak_rss_max_bytes = 0;
  for (int r = 0; r < j->size; r++) row->peak_rss_max_bytes = all[r] > row->peak_rss_max_bytes ? all[r] : row->peak_rss_max_bytes;
  row->peak_rss_rank0_bytes = all[0];
  row->peak_rss_rank1_bytes = j->size > 1 ? all[1] : -1;
  return 0;
}

/* The test accuracy of a whole net on one rank. */
static int pt_eval(nn_net *net, const nn_dataset *test, int batch, double *acc, char *err, size_t cap) {
  nn_loader *ld;
  nn_loader_opts lo = {.batch = batch, .world = 1, .epochs = 1, .prefetch = 2};
  if (nn_loader_create(&ld, test, &lo, err, cap)) return -1;
  int64_t hits = 0, seen = 0;
  int rc = 0;
  for (nn_batch b; nn_loader_next(ld, &b), b.n > 0;) {
    double ls = 0;
    int c = 0; /* nn_net_eval adds to both */
    if ((rc = nn_net_eval(net, b.x, b.labels, b.n, &ls, &c, err, cap))) break;
    hits += c;
    seen += b.n;
  }
  nn_loader_destroy(ld);
  *acc = seen ? (double)hits / (double)seen : NAN;
  return rc;
}

static nn_net_opts pt_net_opts(const pt_job *j) {
  const train_args *a = j->a;
  return (nn_net_opts){.model = a->model, .in_c = j->train.c, .in_h = j->train.h, .in_w = j->train.w,
                       .classes = j->train.classes, .batch = (int)a->batch, .threads = (int)a->threads,
                       .seed = a->seed, .device = NN_DEV_CPU};
}

static nn_lr_sched pt_sched(const train_args *a, int64_t spe, int64_t epochs) {
  return (nn_lr_sched){.kind = a->sched, .base = a->lr, .total_steps = spe * epochs, .gamma = a->gamma,
                       .warmup_steps = (int64_t)llround(a->warmup_epochs * (double)spe)};
}

static nn_sgd_opts pt_sgd(const train_args *a) {
  return (nn_sgd_opts){.momentum = (float)a->momentum, .weight_decay = (float)a->wd, .nesterov = a->nesterov};
}

/* The row's common columns. */
static void pt_row(const pt_job *j, res_train_partition_row *row, const char *mode, int ranks) {
  const train_args *a = j->a;
  res_row_init(res_schema_train_partition(), row);
  row->run_id = j->s.run.run_id;
  row->schema = RES_SCHEMA_VERSION;
  row->mode = mode;
  row->model = a->model;
  row->data = j->dname;
  row->ranks = ranks;
  row->parts = strcmp(mode, "partitioned") ? 1 : a->parts;
  row->cut_layer = j->cut;
  row->cut_width = j->width;
  row->params = (int64_t)j->nparams;
  row->epochs = a->epochs;
  row->recovery_epochs = strcmp(mode, "partitioned") ? 0 : a->recovery_epochs;
  row->batch = a->batch;
  row->lr = a->lr;
  row->threads = a->threads;
  row->fabric = ranks > 1 ? coll_comm_fabric(j->comm) : "-";
  row->infer_fabric_bytes = row->recovery_fabric_bytes = row->fabric_bytes_per_epoch = 0;
}

/* Rank 0: the row into the table, and a line. */
static int pt_put(pt_job *j, const res_train_partition_row *row) {
  char err[512];
  if (j->rank != 0) return 0;
  if (res_table_put(j->tab, row, err, sizeof err)) return bench_error("%s", err);
  printf("%-13s test acc %.4f", row->mode, row->test_acc);
  if (!isnan(row->test_acc_before_recovery))
    printf(" (before recovery %.4f)", row->test_acc_before_recovery);
  printf(", %.2f s/epoch, %lld B/epoch over the fabric, %lld B inference, peak %.1f MiB a rank\n", row->epoch_s,
         (long long)row->fabric_bytes_per_epoch, (long long)row->infer_fabric_bytes,
         (double)row->peak_rss_max_bytes / 1048576.0);
  fflush(stdout);
  return 0;
}

/* ---- the partitioned row ---- */

/* The test set through the parts in sequence: rank 0 runs the left part and sends each batch's
 * cut activations to rank 1, which runs the right part; the hits go back over the bootstrap.
 * *bytes: what crossed. */
static int pt_infer(pt_job *j, nn_net *part, double *acc, int64_t *bytes) {
  char err[1024];
  coll_err e = {{0}};
  int batch = (int)j->a->batch, w = j->width, rc = 0;
  float *mid = malloc((size_t)batch * w * sizeof *mid);
  nn_loader *ld = NULL;
  nn_loader_opts lo = {.batch = batch, .world = 1, .epochs = 1, .prefetch = 2};
  int64_t hits = 0, sent = 0;
  if (!mid) return bench_error("out of memory");
  if (j->rank == 0 && nn_loader_create(&ld, &j->test, &lo, err, sizeof err)) {
    free(mid);
    return bench_error("%s", err);
  }
  for (int64_t at = 0; at < j->test.n && !rc; at += batch) {
    int n = (int)(j->test.n - at < batch ? j->test.n - at : batch);
    size_t bytes = (size_t)n * w * sizeof *mid;
    coll_req rq;
    if (j->rank == 0) {
      nn_batch b;
      nn_loader_next(ld, &b);
      if (b.n != n) rc = bench_error("test batch of %d images, %d expected", b.n, n);
      else if (nn_part_left_infer(part, b.x, n, mid, err, sizeof err)) rc = bench_error("left part: %s", err);
      else if (coll_isend(j->comm, 1, mid, bytes, PT_TAG_CUT, &rq, &e) || coll_waitall(j->comm, &rq, 1, &e))
        rc = bench_error("sending the cut's activations: %s", e.msg);
      sent += (int64_t)bytes;
    } else if (j->rank == 1) {
      double ls = 0;
      int c = 0;
      if (coll_irecv(j->comm, 0, mid, bytes, PT_TAG_CUT, &rq, &e) || coll_waitall(j->comm, &rq, 1, &e))
        rc = bench_error("receiving the cut's activations: %s", e.msg);
      else if (nn_net_eval(part, mid, j->test.labels + at, n, &ls, &c, err, sizeof err))
        rc = bench_error("right part: %s", err);
      hits += c;
    }
  }
  nn_loader_destroy(ld);
  free(mid);
  int64_t mine[2] = {hits, rc}, all[2 * 64];
  if (coll_boot_allgather(j->boot, all, mine, sizeof mine, &e)) return bench_error("%s", e.msg);
  for (int r = 0; r < j->size; r++)
    if (all[2 * r + 1]) return -1; /* said by that rank */
  *acc = (double)all[2] / (double)j->test.n;
  *bytes = sent;
  return 0;
}

/* Recovery: rank 1 sends its part's weights to rank 0, which fine-tunes the joined network alone
 * (the other waits in the heartbeat) and tests it. */
static int pt_recover(pt_job *j, nn_net *part, res_train_partition_row *row) {
  char err[1024];
  coll_err e = {{0}};
  const train_args *a = j->a;
  size_t np;
  float *p = nn_net_params(part, &np);
  coll_req rq;
  int ok = 1;
  if (j->rank == 1) {
    if (coll_isend(j->comm, 0, p, np * sizeof *p, PT_TAG_PARAMS, &rq, &e) || coll_waitall(j->comm, &rq, 1, &e))
      return bench_error("sending the right part's weights: %s", e.msg);
    return pt_wait_all(j, 1);
  }
  if (j->rank != 0) return pt_wait_all(j, 1);
  size_t nr = j->nparams - np;
  float *right = malloc(nr * sizeof *right);
  nn_net *joined = NULL;
  nn_net_opts no = pt_net_opts(j);
  if (!right) return pt_wait_all(j, bench_error("out of memory") == 0);
  if (coll_irecv(j->comm, 1, right, nr * sizeof *right, PT_TAG_PARAMS, &rq, &e) || coll_waitall(j->comm, &rq, 1, &e))
    ok = !bench_error("receiving the right part's weights: %s", e.msg);
  row->recovery_fabric_bytes = (int64_t)(nr * sizeof *right);
  if (ok && nn_net_create(&joined, &no, err, sizeof err)) ok = !bench_error("%s", err);
  if (ok) {
    nn_part_join(nn_net_params(joined, NULL), p, np, right, nr);
    nn_net_params(joined, NULL); /* written */
    int64_t spe = nn_data_steps_per_epoch(j->train.n, 1, (int)a->batch, 1);
    nn_train_opts t = {.net = joined, .train = &j->train, .test = &j->test,
                       .loader = {.batch = (int)a->batch, .shuffle = 1, .drop_last = 1, .seed = a->seed + 1,
                                  .prefetch = (int)a->prefetch},
                       .sched = pt_sched(a, spe, a->recovery_epochs), .sgd = pt_sgd(a),
                       .steps_per_epoch = spe, .stop_step = spe * a->recovery_epochs, .epochs = a->recovery_epochs,
                       .world = 1, .ctx = j, .on_alive = j->size > 1 ? pt_alive : NULL};
    t.sched.base *= 0.1; /* a fine-tune: a tenth of the parts' rate */
    nn_train_result r;
    double t0 = util_now();
    if (nn_train_run(&r, &t, err, sizeof err)) ok = !bench_error("recovery epochs: %s", err);
    row->recovery_s = util_now() - t0;
    double acc;
    if (ok && pt_eval(joined, &j->test, (int)a->batch, &acc, err, sizeof err)) ok = !bench_error("%s", err);
    if (ok) row->test_acc = acc;
  }
  nn_net_destroy(joined);
  free(right);
  return pt_wait_all(j, ok);
}

static int pt_partitioned(pt_job *j) {
  const train_args *a = j->a;
  char err[1024];
  res_train_partition_row row;
  pt_row(j, &row, "partitioned", j->size);
  nn_net_opts no = pt_net_opts(j);
  nn_net *part = NULL;
  float *sil = malloc((size_t)j->train.classes * j->width * sizeof *sil);
  int ok = sil && !nn_sil_make(sil, j->train.classes, j->width, a->seed);
  if (!ok) bench_error("out of memory");
  rss_reset();
  if (ok && j->rank < 2 && nn_part_net_create(&part, &no, j->rank, 2, err, sizeof err))
    ok = !bench_error("part %d: %s", j->rank, err);
  nn_part_train_result r = {0};
  if (ok && part) {
    int64_t spe = j->train.n / a->batch;
    nn_part_train_opts o = {.net = part, .part = j->rank, .train = &j->train, .sil = sil, .width = j->width,
                            .batch = (int)a->batch, .seed = a->seed, .epochs = a->epochs,
                            .stop_step = a->steps, .sched = pt_sched(a, spe, a->epochs), .sgd = pt_sgd(a),
                            .prefetch = (int)a->prefetch, .ctx = j, .on_step = pt_on_step};
    if (nn_part_train(&r, &o, err, sizeof err) && !j->peer_failed)
      ok = !bench_error("%s part: %s", j->rank ? "right" : "left", err);
    else if (j->peer_failed)
      ok = 0;
  }
  if (pt_wait_all(j, ok)) {
    nn_net_destroy(part);
    free(sil);
    return -1;
  }
  /* the slowest part's time, per epoch of whole passes */
  double mine = r.train_s, all[64];
  int64_t steps = r.steps > 0 ? r.steps : 1, spe = j->train.n / a->batch;
  coll_err e = {{0}};
  if (coll_boot_allgather(j->boot, all, &mine, sizeof mine, &e)) {
    nn_net_destroy(part);
    free(sil);
    return bench_error("%s", e.msg);
  }
  row.train_s = 0;
  for (int q = 0; q < j->size; q++) row.train_s = all[q] > row.train_s ? all[q] : row.train_s;
  row.epoch_s = row.train_s / ((double)steps / (double)spe);
  row.final_loss = r.final_loss; /* this rank's; rank 0's is the left part's squared error */
  double acc = NAN;
  int64_t bytes = 0;
  int rc = pt_infer(j, part, &acc, &bytes);
  if (!rc) rc = pt_peaks(j, &row);
  row.test_acc = row.test_acc_before_recovery = acc;
  row.infer_fabric_bytes = bytes;
  if (!rc && a->recovery_epochs > 0) rc = pt_recover(j, part, &row);
  if (!rc) rc = pt_put(j, &row);
  nn_net_destroy(part);
  free(sil);
  return rc ? -1 : 0;
}

/* ---- the rows to compare: one rank alone, and data-parallel ---- */

static int pt_whole(pt_job *j, int dp) {
  const train_args *a = j->a;
  char err[1024];
  res_train_partition_row row;
  pt_row(j, &row, dp ? "data-parallel" : "conventional", dp ? j->size : 1);
  int ranks = dp ? j->size : 1, ok = 1;
  nn_net *net = NULL;
  nn_net_opts no = pt_net_opts(j);
  rss_reset();
  if (!dp && j->rank != 0) {
    if (pt_wait_all(j, 1)) return -1;
  } else {
    if (nn_net_create(&net, &no, err, sizeof err)) ok = !bench_error("%s", err);
    /* rank 0's weights everywhere, as the data-parallel run of train does */
    coll_err e = {{0}};
    size_t np = 0;
    float *p = ok ? nn_net_params(net, &np) : NULL;
    if (ok && dp && coll_bcast(j->comm, p, np * sizeof *p, 0, &e)) ok = !bench_error("%s", e.msg);
    if (ok) nn_net_params(net, NULL);
    int64_t spe = nn_data_steps_per_epoch(j->train.n, ranks, (int)a->batch, 1);
    int64_t stop = a->steps && a->steps < spe * a->epochs ? a->steps : spe * a->epochs;
    nn_train_opts t = {.net = net, .train = &j->train, .test = &j->test,
                       .loader = {.batch = (int)a->batch, .shuffle = 1, .drop_last = 1, .seed = a->seed,
                                  .prefetch = (int)a->prefetch},
                       .sched = pt_sched(a, spe, a->epochs), .sgd = pt_sgd(a), .steps_per_epoch = spe,
                       .stop_step = stop, .epochs = a->epochs, .rank = dp ? j->rank : 0, .world = ranks,
                       .boot = dp ? j->boot : NULL, .comm = dp ? j->comm : NULL, .algo = j->algo,
                       .wire = COLL_F32, .bucket_bytes = (size_t)(a->bucket_mb * 1048576.0),
                       .first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0), .overlap = a->overlap,
                       .overlap_step = NN_OSTEP_OFF, .ctx = j,
                       .on_alive = !dp && j->size > 1 ? pt_alive : NULL};
    nn_train_result r;
    if (ok && nn_train_run(&r, &t, err, sizeof err)) ok = !bench_error("%s: %s", row.mode, err);
    if (ok) {
      row.train_s = r.train_s;
      row.epoch_s = r.train_s / ((double)r.steps / (double)spe);
      row.final_loss = r.final_loss;
      /* the ring's (and every all-reduce's on two ranks) bytes: 2 (N - 1) x the gradient */
      row.fabric_bytes_per_epoch = dp ? (int64_t)(2.0 * (ranks - 1) * (double)r.grad_bytes * (double)spe) : 0;
      double acc;
      if (pt_eval(net, &j->test, (int)a->batch, &acc, err, sizeof err)) ok = !bench_error("%s", err);
      else row.test_acc = acc;
    }
    nn_net_destroy(net);
    if (!dp && pt_wait_all(j, ok)) return -1;
    if (dp) { /* every rank alike */
      int32_t lo, hi;
      if (pt_beat(j, ok ? 1 : 2, &lo, &hi) || hi == 2) return -1;
    }
  }
  if (pt_peaks(j, &row)) return -1;
  return pt_put(j, &row);
}

/* ---- set-up ---- */

static int pt_open(pt_job *j, int argc, char **argv) {
  train_args *a = j->a;
  char err[4096];
  coll_err e = {{0}};
  train_pair pairs[TRAIN_MAX_PAIRS];
  coll_transport_kind tks[TRAIN_MAX_PAIRS];
  int ntk, want_mpi, rc = 0, np;
  if ((np = train_make_pairs(pairs, a, (int)a->parts, tks, &ntk, &want_mpi, &rc)) < 0) return rc;
  const train_pair *dp = NULL;
  for (int i = 0; i < np && !dp; i++)
    if (pairs[i].role == ROLE_DP) dp = &pairs[i];
  if (!dp) return bench_usage_error(train_usage(), "--mode partitioned needs a transport (tcp, ucx or mpi)");
  j->algo = dp->algo;
  snprintf(j->tname, sizeof j->tname, "%s", dp->tname);
  snprintf(j->aname, sizeof j->aname, "%s", dp->aname);
  if (bench_session_open(&j->s, &a->r, want_mpi)) return 1;
  j->boot = j->s.boot;
  j->rank = j->s.rank;
  j->size = j->s.size;
  if (j->size != a->parts)
    return j->rank == 0 ? bench_usage_error(train_usage(), "--mode partitioned --parts %ld trains a part a rank: "
                                            "%d rank(s) here (-n %ld)", a->parts, j->size, a->parts) : 2;
  if (bench_rank_threads(j->boot, &a->threads, "train")) return 1;
  nn_data_spec spec;
  if (nn_data_parse_spec(&spec, a->data, err, sizeof err)) return bench_usage_error(train_usage(), "%s", err);
  if (nn_data_load(&j->train, &j->test, &spec, a->seed, err, sizeof err)) return bench_error("%s", err);
  if (spec.kind == NN_DATA_SYNTHETIC)
    snprintf(j->dname, sizeof j->dname, "synthetic:%dx%dx%d:%d:%lld", spec.c, spec.h, spec.w, spec.classes,
             (long long)j->train.n);
  else
    snprintf(j->dname, sizeof j->dname, "%s:%s", spec.kind == NN_DATA_FMNIST ? "fmnist" : "cifar10", spec.dir);
  /* the widths against the data: a usage error, said once */
  if (nn_part_cut(a->model, j->train.c, j->train.h, j->train.w, j->train.classes, (int)a->parts, &j->cut,
                  &j->width, err, sizeof err))
    return j->rank == 0 ? bench_usage_error(train_usage(), "bad --model for --mode partitioned: %s", err) : 2;
  if (nn_model_param_count(a->model, j->train.c, j->train.h, j->train.w, j->train.classes, &j->nparams, err,
                           sizeof err))
    return bench_error("%s", err);
  if (j->train.n < a->batch * j->size) return bench_error("%s: %lld training images is less than a batch of %ld on each of %d ranks",
                                                           j->dname, (long long)j->train.n, a->batch, j->size);
  if (bench_session_bind(&j->s, (int)a->threads)) return 1;
  coll_comm_opts co = {.transport = dp->tk, .timeout_ms = (int)a->r.timeout_s * 1000,
                       .chunk_bytes = (size_t)a->chunk, .no_spin = 1};
  bench_comm_intra(&a->r, &co, 0);
  if (coll_comm_open(&j->comm, j->boot, &co, &e)) return bench_error("%s", e.msg);
  if (bench_session_begin(&j->s, "train", argc, argv, 1, NULL, NULL)) return 1;
  int ready = 1;
  if (j->rank == 0) {
    j->s.run.meta.train = (res_run_train){.on = 1, .model = a->model, .params = (double)j->nparams,
                                        .backend = nn_backend_version(), .data = j->dname,
                                        .train_images = (double)j->train.n, .test_images = (double)j->test.n,
                                        .classes = j->train.classes, .ranks = j->size, .batch = (double)a->batch,
                                        .global_batch = (double)a->batch * j->size, .threads = (double)a->threads,
                                        .rounds = 1, .seed = (double)a->seed,
                                        .gradients = "partitioned: none cross; data-parallel row: averaged"};
    res_run_add_fabric(&j->s.run.meta, coll_transport_name(dp->tk), coll_comm_fabric(j->comm));
    if (bench_run_write(&j->s.run)) ready = 0;
    else if (res_table_open_schema(&j->tab, j->s.run.dir, res_schema_train_partition(), err, sizeof err))
      ready = !bench_error("%s", err);
    if (ready) {
      printf("train --mode partitioned: %s (%zu params) cut after layer %d (width %d) on %s, %d ranks x batch "
             "%ld, %ld thread(s), %s/%s, %s\n", a->model, j->nparams, j->cut, j->width, j->dname, j->size, a->batch,
             a->threads, j->tname, j->aname, j->s.run.dir);
      fflush(stdout);
    }
  }
  return bench_rank0_ok(j->boot, ready) ? 0 : 1;
}

int train_partitioned_main(train_args *a, int argc, char **argv) {
  pt_job *j = calloc(1, sizeof *j);
  if (!j) return bench_error("out of memory");
  j->a = a;
  j->beat_at = util_now();
  int status = pt_open(j, argc, argv);
  if (!status && pt_partitioned(j)) status = 1;
  if (!status && !a->no_compare && (pt_whole(j, 0) || pt_whole(j, 1))) status = 1;
  if (j->rank == 0 && j->s.run.meta.base) {
    j->s.run.meta.status = status ? "failed" : "ok";
    if (bench_run_write(&j->s.run) && !status) status = 1;
    printf("train: %s\n", j->s.run.dir);
  }
  res_table_close(j->tab);
  if (j->comm) {
    if (status == 1) coll_comm_mark_failed(j->comm);
    coll_comm_close(j->comm);
  }
  nn_data_free(&j->train);
  nn_data_free(&j->test);
  if (status == 1) bench_session_abort(&j->s);
  else bench_session_close(&j->s);
  free(j);
  return status;
}
