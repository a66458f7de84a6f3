/* fabench train: what a run writes as it goes: each step's and evaluation's rows and log
 * lines, and each pair's train.csv row with its buckets, prediction and run.json entry. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

static const char *sched_name(nn_lr_kind k) {
  return k == NN_LR_CONST ? "const" : k == NN_LR_STEP ? "step" : "cosine";
}

int train_on_step(void *ctx, const nn_step_rec *rs, int n) {
  train_ctx *x = ctx;
  const train_args *a = x->a;
  char err[512];
  for (int r = 0; r < n; r++) {
    const nn_step_rec *q = &rs[r];
    res_train_steps_row row = {
        .run_id = x->s.run.run_id, .rank = q->rank, .host = coll_boot_host(x->boot, q->rank),
        .transport = x->pair->tname, .algo = x->pair->aname, .step = q->step, .epoch = q->epoch,
        .step_in_epoch = q->step_in_epoch, .images = q->images, .loss = q->loss,
        .batch_acc = q->batch_acc, .lr = q->lr, .step_ms = 1e3 * q->step_s,
        .data_ms = 1e3 * q->data_s, .load_ms = 1e3 * q->load_s, .fwd_ms = 1e3 * q->fwd_s,
        .bwd_ms = 1e3 * q->bwd_s, .comm_ms = 1e3 * q->comm_s, .comm_cpu_ms = 1e3 * q->comm_cpu_s,
        .exposed_comm_ms = 1e3 * q->exposed_s, .opt_ms = 1e3 * q->opt_s,
        .images_per_s = q->step_s > 0 ? q->images / q->step_s : 0,
        .warmup = q->warmup, .elapsed_s = q->elapsed_s, .round = x->round};
    if (res_table_put(x->tsteps, &row, err, sizeof err)) return bench_error("%s", err);
  }
  const nn_step_rec *q = &rs[0];
  const char *slow;
  int nslow = x->slow_said ? 0 : nn_net_slow_primitives(x->net, &slow);
  if (nslow) { /* the step's plan is built: a figure far below this CPU's, said why (once) */
    x->slow_said = 1;
    fprintf(stderr, "train: warning: oneDNN runs %d primitive(s) on its reference code on this CPU (the first: %s): "
            "expect steps many times slower\n", nslow, slow);
  }
  int epoch_end = q->step_in_epoch + 1 == x->spe;
  if (q->step == 1 || q->step % a->log_every == 0 || epoch_end) {
    double mx = 0;
    for (int r = 0; r < n; r++) mx = rs[r].step_s > mx ? rs[r].step_s : mx;
    printf("%-6s %-10s step %7lld  epoch %lld  %5lld/%lld  loss %.4f  acc %.3f  lr %.4g  "
           "%.1f img/s  comm %.1f ms (exposed %.1f)\n",
           train_role_names[x->pair->role], x->pair->role == ROLE_DP ? x->pair->tname : "-",
           (long long)q->step, (long long)q->epoch + 1, (long long)q->step_in_epoch + 1,
           (long long)x->spe, q->loss, q->batch_acc, q->lr, mx > 0 ? n * q->images / mx : 0,
           1e3 * q->comm_s, 1e3 * q->exposed_s);
    fflush(stdout);
  }
  if (x->heartbeat && x->size > 1 && train_heartbeat(x, 0, NULL)) return -1;
  return 0;
}

int train_on_eval(void *ctx, const nn_eval_rec *ev) {
  train_ctx *x = ctx;
  /* the step too: a run cut by --steps mid-epoch evaluates at its end, after its last whole
   * epoch's evaluation, which had the same epoch count */
  printf("%-6s %-10s epoch %lld  step %lld  test loss %.4f  test acc %.4f  (%lld images, %.1f s)  "
         "elapsed %.1f s\n",
         train_role_names[x->pair->role], x->pair->role == ROLE_DP ? x->pair->tname : "-",
         (long long)ev->epoch, (long long)ev->step, ev->loss, ev->acc, (long long)ev->images, ev->secs, ev->elapsed_s);
  fflush(stdout);
  res_train_eval_row row = {.run_id = x->s.run.run_id, .transport = x->pair->tname,
                            .algo = x->pair->aname, .epoch = ev->epoch, .step = ev->step,
                            .test_loss = ev->loss, .test_acc = ev->acc, .test_images = ev->images,
                            .eval_s = ev->secs, .elapsed_s = ev->elapsed_s, .round = x->round};
  char err[512];
  if (res_table_put(x->teval, &row, err, sizeof err)) return bench_error("%s", err);
  const train_args *a = x->a;
  res_train_epochs_row ep = {
      .run_id = x->s.run.run_id, .schema = RES_SCHEMA_VERSION, .setting = a->setting,
      .role = train_role_names[x->pair->role], .transport = x->pair->tname, .algo = x->pair->aname,
      .device = nn_net_device(x->net) == NN_DEV_CUDA ? "cuda" : "cpu", .ranks = x->ranks, .batch = a->batch,
      .global_batch = (int64_t)x->ranks * a->batch,
      .lr = nn_lr_scaled(a->lr, (int)a->batch * x->ranks, (int)a->ref_batch),
      .optimizer = nn_optim_name(a->optimizer), .epochs = a->epochs, .threads = a->threads,
      .loader_workers = a->loader_workers,
      .epoch = x->spe > 0 ? (double)ev->step / (double)x->spe : (double)ev->epoch, .step = ev->step, .test_acc = ev->acc,
      .test_loss = ev->loss, .elapsed_s = ev->elapsed_s, .round = x->round};
  if (res_table_put(x->tepochs, &ep, err, sizeof err)) return bench_error("%s", err);
  return 0;
}

/* MB of the state a rank keeps with `params` floats of the parameters held: those, the whole
 * gradient arena (backward writes all of it) and the optimizer's state. */
static double train_state_mb(const train_ctx *x, const nn_train_result *r, const nn_sgd_opts *so, size_t params) {
  size_t opt = (so->kind == NN_OPT_SGD ? 1 : 2) * (r->opt_floats ? r->opt_floats : x->np);
  return (double)((params ? params : x->np) + x->np + opt) * sizeof(float) / 1e6;
}

/* The pair's train.csv row from what it measured (rank 0), before any prediction. */
static void result_row(res_train_row *row, const train_ctx *x, const nn_train_result *r, double slowest_ips,
                       int rounds, const nn_sgd_opts *so, const nn_lr_sched *sched, int64_t epochs) {
  const train_args *a = x->a;
  const train_pair *p = x->pair;
  int n = x->ranks;
  const char *fabric = p->role != ROLE_DP ? "-"
                       : getenv("FABENCH_FABRIC") ? getenv("FABENCH_FABRIC")
                                                  : coll_comm_fabric(p->comm);
  double comm_s = r->comm_s;
  /* the exchange's busbw: what a rank sent over the time its calls took (the all-reduce's bytes x
   * 2(n-1)/n, as allreduce's; sharded, the halves' and stage 3's second gathers) */
  double busbw = comm_s > 0 && n > 1 ? r->sent_bytes / comm_s / 1e9 : NAN;
  double scaling = x->single_ips > 0 ? r->images_per_s / (n * x->single_ips) : NAN;
  double fabric_eff = p->role == ROLE_DP && x->none_ips > 0 ? r->images_per_s / x->none_ips
                      : p->role == ROLE_NONE && r->measured > 0 ? 1.0 : NAN;
  *row = (res_train_row){
      .run_id = x->s.run.run_id, .schema = RES_SCHEMA_VERSION, .host = x->s.run.host,
      .host_count = coll_boot_host_count(x->boot), .ranks_per_host = bench_ranks_per_host(x->boot),
      .topo_hash = x->s.run.topo_hash, .ranks = n,
      .role = train_role_names[p->role], .fabric = fabric, .transport = p->tname, .algo = p->aname,
      .model = a->model, .params = (int64_t)x->np, .data = x->dname, .input = x->shape,
      .classes = x->train.classes,
      .device = nn_net_device(x->net) == NN_DEV_CUDA ? "cuda" : "cpu", .batch = a->batch,
      .global_batch = (int64_t)n * a->batch, .threads = a->threads,
      .bucket_mb = p->role == ROLE_DP ? a->bucket_mb : NAN,
      .first_bucket_mb = p->role == ROLE_DP ? a->first_bucket_mb : NAN,
      .buckets = r->nbuckets, .overlap = p->role == ROLE_DP ? a->overlap : 0,
      .overlap_step = p->role == ROLE_DP ? r->overlap_step : 0,
      .grad_dtype = p->role == ROLE_DP ? coll_dtype_name(a->grad_dtype) : "-",
      .grad_bytes = (int64_t)r->grad_bytes, .epochs = epochs, .steps = r->steps,
      .measured_steps = r->measured, .warmup_steps = r->steps - r->measured, .lr = sched->base,
      .lr_schedule = sched_name(a->sched), .warmup_epochs = a->warmup_epochs,
      .momentum = so->momentum, .wd = so->weight_decay, .nesterov = so->nesterov,
      .augment = x->crop_pad || x->augment ? "crop+flip" : "none", .seed = (int64_t)a->seed,
      .images_per_s = r->images_per_s, .images_per_s_rank = r->images_per_s / n,
      .compute_images_per_s = r->compute_images_per_s, .step_ms = 1e3 * r->step_p50_s,
      .step_ms_mean = 1e3 * r->step_mean_s, .step_ms_p90 = 1e3 * r->step_p90_s,
      .data_ms = 1e3 * r->data_s, .load_ms = 1e3 * r->load_s, .fwd_ms = 1e3 * r->fwd_s,
      .bwd_ms = 1e3 * r->bwd_s, .comm_ms = 1e3 * r->comm_s, .comm_cpu_ms = 1e3 * r->comm_cpu_s,
      .exposed_comm_ms = 1e3 * r->exposed_s, .opt_ms = 1e3 * r->opt_s,
      .imbalance_ms = 1e3 * r->imbalance_s, .comm_busbw_gbps = busbw,
      .scaling_eff = scaling, .fabric_eff = fabric_eff, .final_loss = r->final_loss,
      .test_loss = r->test_loss, .test_acc = r->test_acc,
      .target_acc = a->target_acc > 0 ? a->target_acc : NAN,
      .time_to_target_s = r->time_to_target_s >= 0 ? r->time_to_target_s : NAN,
      .train_time_s = r->train_s, .start_step = r->start_step, .end_step = r->end_step,
      .backend = nn_net_backend(x->net) ? nn_net_backend(x->net) : nn_backend_version(),
      .status = r->status, .step_ms_pred = NAN,
      .images_per_s_pred = NAN, .exposed_comm_ms_pred = NAN, .pred_err = NAN,
      .rounds = rounds, .images_per_s_slowest = slowest_ips,
      .dp = p->role == ROLE_DP ? train_dp_name(a) : "-",
      /* the all-reduce's 2(n-1)/n of the gradients' bytes, or its halves, stage 3's second gather */
      .sent_mb_step = p->role == ROLE_DP && n > 1 ? r->sent_bytes / 1e6 : 0,
      /* parameters (stage 3: the rank's blocks), gradients, optimizer state: SGD keeps one arena
         (momentum), Adam two */
      .state_mb = train_state_mb(x, r, so, r->params_held),
      .peak_mb = train_state_mb(x, r, so, r->params_peak),
      .bound = x->bound.bound[0] ? x->bound.bound : NULL,
      .link_util = x->bound.bound[0] ? x->bound.link_util : NAN,
      .cpu_busy = x->bound.bound[0] ? x->bound.cpu_busy : NAN,
      .tcp_retrans = x->bound.bound[0] ? x->bound.retrans : NAN,
      .setting = a->setting,
      .optimizer = nn_optim_name(so->kind), .loader_workers = a->loader_workers,
      .data_wait_ms = 1e3 * r->wait_s, .loader_mb_s = x->files_bytes / x->files_s / 1e6,
      .loader_images_s = isfinite(x->files_bytes) ? (double)(x->train.n + x->test.n) / x->files_s : NAN,
      .cache = !isfinite(x->files_bytes) ? "-" : x->cold ? "cold" : "warm"};
}

/* The pair's buckets into bks from at on (rank 0): the count. */
static int result_buckets(const train_ctx *x, const nn_train_result *r, res_train_buckets_row *bks, int at) {
  const train_pair *p = x->pair;
  int nbk = r->nbuckets < NN_TRAIN_MAX_BUCKETS ? r->nbuckets : NN_TRAIN_MAX_BUCKETS;
  for (int k = 0; k < nbk; k++) {
    const nn_bucket_rec *b = &r->buckets[k];
    bks[at + k] = (res_train_buckets_row){
        .run_id = x->s.run.run_id, .role = train_role_names[p->role], .transport = p->tname,
        .algo = p->aname, .ranks = x->ranks, .bucket = k,
        .offset_bytes = (int64_t)(b->offset * sizeof(float)),
        .bytes = (int64_t)(b->count * sizeof(float)), .ready_ms = 1e3 * b->ready_s,
        .comm_ms = p->role == ROLE_DP ? 1e3 * b->comm_s : NAN,
        .done_ms = p->role == ROLE_DP ? 1e3 * b->done_s : NAN};
  }
  return nbk;
}

/* The pair's entry in run.json's results (rank 0), written with the next bench_run_write. */
static void result_meta(train_ctx *x, const res_train_row *row, const nn_train_result *r) {
  res_run_train_result e = {.steps = (double)r->steps,
                            .end_step = (double)r->end_step,
                            .images_per_s = r->images_per_s,
                            .step_ms_p50 = 1e3 * r->step_p50_s,
                            .test_acc = r->test_acc,
                            .time_to_target_s = r->time_to_target_s,
                            .train_time_s = r->train_s};
  snprintf(e.role, sizeof e.role, "%s", row->role);
  snprintf(e.transport, sizeof e.transport, "%s", row->transport);
  snprintf(e.algo, sizeof e.algo, "%s", row->algo);
  snprintf(e.status, sizeof e.status, "%s", r->status);
  if (res_run_add_result(&x->s.run.meta, &e)) bench_error("out of memory: run.json's results miss a pair");
}

/* The pair's line (rank 0); the efficiencies as its row has them. */
static void result_print(const train_ctx *x, const res_train_row *row, const nn_train_result *r) {
  const train_args *a = x->a;
  const train_pair *p = x->pair;
  printf("%-6s %-10s %-8s %d rank(s): ", train_role_names[p->role], p->tname, p->aname, x->ranks);
  if (r->measured == 0) /* no figure, rather than a throughput of 0 */
    printf("no step timed, every step was a warm-up step (--warmup-steps %ld)", (long)a->warmup_steps);
  else
    printf("%.1f images/s, step %.1f ms (data %.1f, fwd %.1f, bwd %.1f, comm %.1f using %.1f of CPU, "
           "exposed %.1f, opt %.1f)",
           r->images_per_s, 1e3 * r->step_p50_s, 1e3 * r->data_s, 1e3 * r->fwd_s, 1e3 * r->bwd_s,
           1e3 * r->comm_s, 1e3 * r->comm_cpu_s, 1e3 * r->exposed_s, 1e3 * r->opt_s);
  if (isfinite(row->fabric_eff) && p->role == ROLE_DP) printf(", fabric eff %.2f", row->fabric_eff);
  if (isfinite(row->scaling_eff) && p->role != ROLE_SINGLE) printf(", scaling eff %.2f", row->scaling_eff);
  if (isfinite(r->test_acc)) printf(", test acc %.4f", r->test_acc);
  if (a->target_acc > 0) {
    if (r->time_to_target_s >= 0) printf(", %.4f after %.1f s", a->target_acc, r->time_to_target_s);
    else printf(", %.4f not reached", a->target_acc);
  }
  printf("\n");
  fflush(stdout);
}

/* The pair's train.csv row and its buckets (rank 0). */
static int write_result(train_ctx *x, const nn_train_result *r, double slowest_ips, int rounds,
                        const nn_sgd_opts *so, const nn_lr_sched *sched, int64_t epochs) {
  const train_pair *p = x->pair;
  res_train_row row;
  result_row(&row, x, r, slowest_ips, rounds, so, sched, epochs);
  /* the pair's buckets, after the profile's: the prediction takes this run's own plan (with
   * --overlap-step it differs from the profile's) and the profile's ready times */
  int profile = p->role == ROLE_NONE || (p->role == ROLE_SINGLE && !x->have_profile);
  res_train_buckets_row *bks = profile ? x->prof_buckets : x->bk_rows;
  int at = p->role == ROLE_DP ? x->nprof_buckets : 0;
  for (int k = 0; k < at; k++) bks[k] = x->prof_buckets[k];
  int nbk = result_buckets(x, r, bks, at);
  if (p->role == ROLE_DP && x->model.n && x->have_profile) {
    res_rows bk = {.schema = res_schema_train_buckets(), .rows = bks, .n = (size_t)(at + nbk)};
    res_predict_train_row_rate(&row, &x->profile, &bk, &x->model, (double)x->a->link_bps);
  }
  char err[512];
  if (res_table_put(x->trun, &row, err, sizeof err)) return bench_error("%s", err);
  result_meta(x, &row, r);
  if (bench_run_write(&x->s.run)) return 1;
  for (int k = 0; k < nbk; k++)
    if (res_table_put(x->tbuckets, &bks[at + k], err, sizeof err)) return bench_error("%s", err);
  if (profile) {
    x->profile = row; /* its buckets are in prof_buckets already (bks) */
    x->nprof_buckets = nbk;
    x->have_profile = 1;
  }
  result_print(x, &row, r);
  return 0;
}

void train_kept_add(train_kept *k, const nn_train_result *r, const nn_lr_sched *sched,
                     const nn_sgd_opts *so, int64_t epochs) {
  double v = r->images_per_s;
  if (!k->rounds || v > k->best.images_per_s || (isnan(k->best.images_per_s) && !isnan(v))) k->best = *r;
  if (!k->rounds || v < k->slowest_ips || (isnan(k->slowest_ips) && !isnan(v))) k->slowest_ips = v;
  k->rounds++;
  k->sched = *sched;
  k->so = *so;
  k->epochs = epochs;
}

/* The row of pair p from what its rounds measured (rank 0); the one-rank and none rows set
 * the denominators of the rows after them. */
int train_kept_write(train_ctx *x, const train_pair *p, const train_kept *k) {
  x->pair = p;
  x->ranks = p->role == ROLE_SINGLE ? 1 : x->size;
  if (p->role == ROLE_SINGLE) x->single_ips = k->best.images_per_s;
  if (p->role == ROLE_NONE) x->none_ips = k->best.images_per_s;
  return write_result(x, &k->best, k->slowest_ips, k->rounds, &k->so, &k->sched, k->epochs);
}
