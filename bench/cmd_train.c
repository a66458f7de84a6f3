/* fabench train: ResNet training on the CPU (oneDNN) or GPU, one process or data-parallel over
 * every transport and all-reduce algorithm fabench has. This file holds the run's flow: set-up,
 * the order in which the pairs train, the one-rank run and the end; the flags are
 * train_args.c's, the pairs train_pairs.c's, the rows train_rows.c's, the trace train_trace.c's,
 * and the loop, the reducer, evaluation and checkpoints are models' (nn_train.c). Files:
 * train.csv (a row per pair, and for one rank alone), train_steps.csv (a row per step and rank),
 * train_eval.csv, train_buckets.csv, run.json. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"
#include "util.h"

/* The canonical --data string recorded in checkpoints and CSVs. */
static void data_name(char *out, size_t cap, const nn_data_spec *sp, const nn_dataset *tr) {
  switch (sp->kind) {
  case NN_DATA_FMNIST: snprintf(out, cap, "fmnist:%s", sp->dir); break;
  case NN_DATA_CIFAR10: snprintf(out, cap, "cifar10:%s", sp->dir); break;
  default:
    snprintf(out, cap, "synthetic:%dx%dx%d:%d:%lld", sp->c, sp->h, sp->w, sp->classes,
             (long long)tr->n);
  }
}

/* The one-rank run's heartbeat over the bootstrap: rank 0 says 0 (going on), 1 (done) or
 * 2 (failed) after each of its steps; the other ranks wait in this exchange, so a dead rank 0
 * is noticed within the timeout, not after the whole run. */
int train_heartbeat(train_ctx *x, int32_t say, int32_t *heard) {
  int32_t *all = calloc((size_t)x->size, sizeof *all);
  coll_err e = {{0}};
  if (!all) return bench_error("out of memory");
  int rc = coll_boot_allgather(x->boot, all, &say, sizeof say, &e);
  if (rc) bench_error("%s", e.msg);
  else if (heard) *heard = all[0];
  x->alive_said = util_now();
  free(all);
  return rc ? -1 : 0;
}

/* The one-rank run's steps (between layers) and evaluation batches keep the heartbeat going: the
 * waiting ranks would time out on a step or a test set that takes longer than --timeout. At most
 * once a second, and four times within --timeout, since a beat every second leaves a gap of more
 * than a second (--timeout 1) once the call that sends it comes late. The waiters take each 0 as
 * one more turn of their loop. */
static int on_alive(void *ctx) {
  train_ctx *x = ctx;
  if (!x->heartbeat || x->size < 2) return 0;
  double period = x->a->r.timeout_s / 4.0;
  if (util_now() - x->alive_said < (period < 1 ? period : 1)) return 0;
  return train_heartbeat(x, 0, NULL);
}

/* The options of the training loop common to every pair. */
static void loop_opts(nn_train_opts *t, train_ctx *x, const nn_lr_sched *sched,
                      const nn_sgd_opts *so, const nn_ckpt_info *want, int64_t epochs) {
  const train_args *a = x->a;
  *t = (nn_train_opts){
      .net = x->net, .train = &x->train, .test = &x->test,
      .loader = {.batch = (int)a->batch, .shuffle = 1, .drop_last = 1, .crop_pad = x->crop_pad,
                 .flip = x->augment, .seed = a->seed, .prefetch = (int)a->prefetch,
                 .workers = a->loader_workers ? (int)a->loader_workers : NN_LOADER_NO_THREAD},
      .same_data = x->same_data,
      .sched = *sched, .sgd = *so, .epochs = epochs, .warmup_steps = a->warmup_steps,
      .eval_every = a->eval_every, .target_acc = a->target_acc,
      .stop_at_target = a->stop_at_target, .check_every = a->check_every, .save = a->save,
      .save_sharded = a->save_sharded,
      .ckpt = *want, .rank = x->rank, .world = x->size, .wire = a->grad_dtype,
      .bucket_bytes = (size_t)(a->bucket_mb * 1048576.0),
      .first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0), .overlap = a->overlap,
      .overlap_step = a->overlap_step, .sharded = a->dp_sharded, .ctx = x, .on_step = train_on_step, .on_eval = train_on_eval,
      .trace_steps = a->trace ? a->trace_steps : 0, .on_trace = train_on_trace};
  /* tests: FABENCH_TEST_CORRUPT=RANK:STEP[:ROUND] perturbs that rank's weights after that step
   * (of that round of --rounds only) */
  const char *cor = getenv("FABENCH_TEST_CORRUPT");
  long cr, cs, cround;
  int got = cor ? sscanf(cor, "%ld:%ld:%ld", &cr, &cs, &cround) : 0;
  if (got == 2 || (got == 3 && cround == x->round)) {
    t->corrupt_rank = (int)cr;
    t->corrupt_step = cs;
  }
}

/* ---- a run from set-up to the end ---- */

/* What a run holds between its phases: the pairs and their communicators, the net's and the
 * checkpoint's descriptions, the weights every pair starts from, and the training order. */
typedef struct {
  train_ctx x;                 /* the callbacks' context */
  train_args *a;
  train_pair pairs[TRAIN_MAX_PAIRS];
  int npairs, ntk, do_single;
  coll_transport_kind tks[TRAIN_MAX_PAIRS];
  coll_comm *comms[TRAIN_MAX_PAIRS], *owner;
  nn_arena_alloc galloc;
  nn_net_opts no;
  nn_ckpt_info have, want;    /* the checkpoint resumed from; the one this run writes */
  size_t nb;                   /* batch-norm buffers */
  float *init, *init_bufs, *init_mom; /* every pair starts from these (init_mom: resumed runs) */
  int order[2 * (TRAIN_MAX_PAIRS + 1)], odev[2 * (TRAIN_MAX_PAIRS + 1)], norder; /* -1: one rank */
} train_job;

static const train_pair train_single = {.role = ROLE_SINGLE, .tname = "-", .aname = "-"};

/* The steps a run of spe steps an epoch trains: --steps alone runs as many epochs as it needs;
 * the schedule spans --epochs, or --steps. */
static void train_span(const train_args *a, int64_t spe, int64_t *epochs, int64_t *horizon, int64_t *stop) {
  *epochs = a->steps && !a->epochs_given && spe > 0 ? (a->steps + spe - 1) / spe : a->epochs;
  *horizon = a->epochs_given || !a->steps ? *epochs * spe : a->steps;
  *stop = a->steps && a->steps < *epochs * spe ? a->steps : *epochs * spe;
}

/* The ranks, their pairs and communicators; the checks every rank agrees on before anything is
 * loaded. 0, or the run's exit status after saying why. */
static int job_open(train_job *j) {
  train_args *a = j->a;
  train_ctx *x = &j->x;
  char err[4096];
  coll_err e = {{0}};
  int want_mpi = 0, rc = 0;
  /* a resumed run continues the checkpoint's data order, so its seed wins */
  uint64_t seed_given = a->seed;
  if (a->resume) {
    if (nn_ckpt_read_info(a->resume, &j->have, err, sizeof err) != 0) return bench_error("%s", err);
    a->seed = j->have.seed;
  }
  /* usage errors before any rank starts talking */
  if (train_make_pairs(j->pairs, a, 2, j->tks, &j->ntk, &want_mpi, &rc) < 0) return rc;
  if (bench_session_open(&x->s, &a->r, want_mpi)) return 1;
  x->boot = x->s.boot;
  x->rank = x->s.rank;
  x->size = x->s.size;
  if (a->mode == TRAIN_MODE_CONVENTIONAL && x->size > 1) /* under another launcher's world */
    return x->rank == 0 ? bench_usage_error(train_usage(), "--mode conventional trains one rank; this "
                                                         "world has %d", x->size) : 2;
  if (bench_rank_threads(x->boot, &a->threads, "train")) return 1;
  j->npairs = train_make_pairs(j->pairs, a, x->size, j->tks, &j->ntk, &want_mpi, &rc);
  if (x->size == 1) { /* one process: it trains alone, whatever the list */
    j->npairs = 1;
    j->pairs[0] = train_single;
  }
  int ntrain = 0;
  for (int i = 0; i < j->npairs; i++) ntrain += j->pairs[i].role != ROLE_SINGLE;
  if ((a->save || a->resume) && ntrain > 1)
    return bench_usage_error(train_usage(), "--save and --resume continue one training: give "
                                          "one --transport and one --algo");
  j->do_single = x->size > 1 && !a->no_single && !a->save && !a->resume;
  /* the files only rank 0 writes, checked before anything trains: a bad --trace used to fail
   * after the first pair trained, a bad --save at the first epoch's end */
  if (!bench_rank0_ok(x->boot, x->rank != 0 || (!train_out_file_check("--trace", a->trace) &&
                                    !train_out_file_check("--save", a->save))))
    return 1;
  if (x->rank == 0 && a->resume && a->seed_given && seed_given != j->have.seed)
    fprintf(stderr, "train: warning: --seed %llu ignored: checkpoint %s continues with its own seed %llu "
            "(its data order and augmentation)\n", (unsigned long long)seed_given, a->resume,
            (unsigned long long)j->have.seed);
  /* rank 0 reads it; the others stop with it, not later on a vanished peer */
  int model_ok = !(a->model_from && x->rank == 0 && bench_costmodel_load(&x->model, a->model_from, 0, err, sizeof err));
  if (!model_ok) bench_usage_error(train_usage(), "--model-from: %s", err);
  if (!bench_rank0_ok(x->boot, model_ok)) return 2;

  if (bench_session_bind(&x->s, (int)a->threads)) return 1;
  for (int t = 0; x->size > 1 && t < j->ntk; t++) {
    coll_comm_opts co = {.transport = j->tks[t], .timeout_ms = (int)a->r.timeout_s * 1000,
                         .chunk_bytes = (size_t)a->chunk, .no_spin = 1};
    int may_hier = 0;
    for (int i = 0; i < j->npairs; i++)
      may_hier |= j->pairs[i].role == ROLE_DP && j->pairs[i].tk == j->tks[t] &&
                  (j->pairs[i].algo.kind == COLL_ALGO_HIER || j->pairs[i].algo.kind == COLL_ALGO_AUTO);
    bench_comm_intra(&a->r, &co, may_hier);
    if (coll_comm_open(&j->comms[t], x->boot, &co, &e)) return bench_error("%s", e.msg);
    /* the gradients from a communicator whose ranks map them: ucx's own, else one inside hosts */
    if (coll_comm_maps(j->comms[t]) && (!j->owner || j->tks[t] == COLL_UCX)) j->owner = j->comms[t];
    for (int i = 0; i < j->npairs; i++)
      if (j->pairs[i].role == ROLE_DP && j->pairs[i].tk == j->tks[t]) j->pairs[i].comm = j->comms[t];
  }
  return 0;
}

/* The data and the net (every rank alike), the checkpoint resumed from, and the checks of what
 * they hold, said before anything is written. 0, or the run's exit status after saying why. */
static int job_load(train_job *j, const nn_data_spec *spec) {
  train_args *a = j->a;
  train_ctx *x = &j->x;
  char err[4096];
  /* the files' read rate (cold: dropped from the page cache first) */
  x->cold = a->cold_cache;
  if (train_data_files(spec, a->cold_cache, &x->files_bytes, err, sizeof err)) {
    bench_error("%s", err); /* said, and the rows say warm: not every page was dropped */
    x->cold = 0;
  }
  double t0 = util_now();
  if (nn_data_load(&x->train, &x->test, spec, a->seed, err, sizeof err) != 0) return bench_error("%s", err);
  x->files_s = util_now() - t0;
  data_name(x->dname, sizeof x->dname, spec, &x->train);
  x->augment = a->augment && spec->kind != NN_DATA_SYNTHETIC;
  x->crop_pad = a->crop_pad >= 0 ? (int)a->crop_pad
                : !x->augment ? 0 : spec->kind == NN_DATA_CIFAR10 ? 4 : 2;
  if (!a->augment) x->crop_pad = 0;
  snprintf(x->shape, sizeof x->shape, "%dx%dx%d", x->train.c, x->train.h, x->train.w);
  /* the gradient arena from the ucx communicator when there is one: ranks on one host then
   * reduce in each other's copy (the other transports use it as plain memory) */
  j->galloc = nn_arena_from_comm(j->owner);
  j->no = (nn_net_opts){.model = a->model, .in_c = x->train.c, .in_h = x->train.h, .in_w = x->train.w,
                        .classes = x->train.classes, .batch = (int)a->batch, .threads = (int)a->threads,
                        .seed = a->seed, .grad_alloc = &j->galloc, .device = a->devices[0],
                        .precision = a->precision, .cudnn_search = a->cudnn_search,
                        .gpu = a->gpu >= 0 ? (int)a->gpu : coll_boot_local_rank(x->boot),
                        .gpu_of_rank = a->gpu < 0};
  /* every device of the list before the first trains: cpu,cuda must not fail after the CPU's run */
  int nrc = train_devices_usable(a, coll_boot_local_rank(x->boot), err, sizeof err);
  if (!nrc) nrc = nn_net_create(&x->net, &j->no, err, sizeof err);
  if (nrc != 0) {
    bench_error("%s", err);
    return nrc == NN_ENODEV ? 3 : 1; /* no such device: not a usage error, not a failure */
  }
  size_t nm;
  float *params = nn_net_params(x->net, &x->np);
  float *mom = nn_net_momentum(x->net, &nm);
  float *bufs = nn_net_buffers(x->net, &j->nb);
  /* the job's checkpoint: rank 0 writes it, every rank of a world of this size reads it */
  j->want = (nn_ckpt_info){.in_c = x->train.c, .in_h = x->train.h, .in_w = x->train.w,
                           .classes = x->train.classes, .batch = (int)a->batch, .rank = 0,
                           .world = x->size, .seed = a->seed, .n_params = x->np, .n_momentum = nm,
                           .n_buffers = j->nb};
  snprintf(j->want.model, sizeof j->want.model, "%.*s", (int)sizeof j->want.model - 1, a->model);
  if ((a->save || a->resume) &&
      (strlen(x->dname) >= sizeof j->want.data || strlen(a->model) >= sizeof j->want.model))
    return bench_error("--data or --model too long for a checkpoint (%zu and %zu bytes at most)",
                       sizeof j->want.data - 1, sizeof j->want.model - 1);
  size_t dlen = strnlen(x->dname, sizeof j->want.data - 1); /* whole where checkpoints are kept */
  memcpy(j->want.data, x->dname, dlen);
  j->want.data[dlen] = 0;
  if (a->resume && j->have.sharded) { /* each rank reads its own file once its ranges are planned */
    if (train_shards_resumable(a, &j->have, &j->want, err, sizeof err)) {
      if (x->rank == 0) bench_error("%s", err); /* every rank stops alike: said once */
      bench_rank0_ok(x->boot, 0);
      return 1;
    }
  } else if (a->resume && nn_ckpt_load(a->resume, &j->have, params, mom, bufs, &j->want, err, sizeof err) != 0) {
    return bench_error("%s", err);
  }
  /* a shard too small for one batch */
  if (nn_data_steps_per_epoch(x->train.n, x->same_data ? 1 : x->size, (int)a->batch, 1) < 1) {
    if (x->rank == 0) /* every rank stops alike: said once */
      bench_error("%s: %lld training images is less than one batch of %ld on each of %d rank(s)",
                  x->dname, (long long)x->train.n, a->batch, x->size);
    bench_rank0_ok(x->boot, 0); /* the others end after rank 0 has said it: the launcher stops all at the first end */
    return 1;
  }
  /* the ranks evaluate shards of the test set, which the loader refuses empty: said here, not
   * after the training (as "less than one batch") */
  if (a->eval_every > 0 && x->size > 1 && !x->same_data && x->test.n < x->size) {
    if (x->rank == 0) /* every rank stops alike: said once */
      bench_error("%s: %lld test images for %d ranks: each rank evaluates a share of at least one "
                  "(or --eval-every 0)", x->dname, (long long)x->test.n, x->size);
    bench_rank0_ok(x->boot, 0);
    return 1;
  }
  if (a->resume) { /* what is left to train */
    int64_t epochs, horizon, stop;
    train_span(a, nn_data_steps_per_epoch(x->train.n, x->size, (int)a->batch, 1), &epochs, &horizon, &stop);
    if (j->have.global_step >= stop)
      return bench_error("checkpoint %s is at step %lld; nothing left to train (stop at %lld)", a->resume,
                         (long long)j->have.global_step, (long long)stop);
  }
  return 0;
}

/* run.json's train object (rank 0). */
static void job_meta(train_job *j) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  x->s.run.meta.train = (res_run_train){
      .on = 1,
      .model = a->model,
      .params = (double)x->np,
      .bn_buffers = (double)j->nb,
      .backend = nn_net_backend(x->net),
      .data = x->dname,
      .train_images = (double)x->train.n,
      .test_images = (double)x->test.n,
      .input = x->shape,
      .classes = x->train.classes,
      .ranks = x->size,
      .batch = (double)a->batch,
      .global_batch = (double)a->batch * x->size,
      .threads = (double)a->threads,
      .rounds = (double)a->rounds,
      .seed = (double)a->seed,
      .bucket_mb = a->bucket_mb,
      .first_bucket_mb = a->first_bucket_mb,
      .overlap = a->overlap,
      .overlap_step = train_ostep_names[a->overlap_step],
      .grad_dtype = coll_dtype_name(a->grad_dtype),
      .gradients = x->size > 1 ? "averaged over the ranks (all-reduce, then 1/N in SGD; 16-bit wires: 1/N first)"
                               : "one rank: no averaging",
      .batch_norm = "statistics local to each rank (PyTorch DDP)",
      .resumed_from = a->resume};
  for (int t = 0; t < j->ntk; t++)
    if (j->comms[t]) {
      res_run_add_fabric(&x->s.run.meta, coll_transport_name(j->tks[t]), coll_comm_fabric(j->comms[t]));
      bench_record_intra(&x->s.run, j->tks[t], j->comms[t]);
    }
}

/* The run_id of the run a sweep continues (bench_session_begin's files; ctx: the id). */
static int job_keep_id(void *ctx, bench_run *run) { return train_sweep_keep_id(run, ctx); }

/* The run directory, run.json and the tables (rank 0), and rank 0's weights for every rank,
 * kept to restart every pair from. 0, or the run's exit status after saying why. */
static int job_begin(train_job *j, int argc, char **argv) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  char err[4096];
  coll_err e = {{0}};
  /* a continued run keeps its run_id: its rows, old and new, are one run's */
  char old_id[128] = "";
  int go = 1;
  if (x->rank == 0 && a->continue_dir && res_run_meta_check(a->continue_dir, old_id, sizeof old_id, err, sizeof err) < 0)
    go = !bench_error("--resume %s: %s", a->continue_dir, err);
  if (bench_session_begin(&x->s, "train", argc, argv, go, *old_id ? job_keep_id : NULL, old_id)) return 1;
  /* rank 0's weights for everyone (they start alike from the seed; a resumed or changed rank
   * would not) */
  float *params = nn_net_params(x->net, NULL), *bufs = nn_net_buffers(x->net, NULL);
  if (x->size > 1 && j->ntk > 0 &&
      (coll_bcast(j->comms[0], params, x->np * sizeof *params, 0, &e) ||
       coll_bcast(j->comms[0], bufs, j->nb * sizeof *bufs, 0, &e)))
    return bench_error("%s", e.msg);
  nn_net_params(x->net, NULL); /* written through a kept pointer */
  if (!(j->init = malloc(x->np * sizeof *j->init)) || !(j->init_bufs = malloc((j->nb ? j->nb : 1) * sizeof *bufs)) ||
      (a->resume && !(j->init_mom = malloc(x->np * sizeof *j->init_mom))))
    return bench_error("out of memory");
  memcpy(j->init, params, x->np * sizeof *j->init);
  memcpy(j->init_bufs, bufs, j->nb * sizeof *bufs);
  if (j->init_mom) memcpy(j->init_mom, nn_net_momentum(x->net, NULL), x->np * sizeof *j->init_mom);

  int ready = 1; /* rank 0: run.json and the tables */
  if (x->rank == 0) {
    job_meta(j);
    if (bench_run_write(&x->s.run) != 0) ready = 0;
    else if ((a->continue_dir && train_sweep_load_done(&x->done, x->s.run.dir, err, sizeof err)) ||
             res_table_open_schema_mode(&x->tsteps, x->s.run.dir, res_schema_train_steps(), !!a->continue_dir, err, sizeof err) ||
             res_table_open_schema_mode(&x->teval, x->s.run.dir, res_schema_train_eval(), !!a->continue_dir, err, sizeof err) ||
             res_table_open_schema_mode(&x->trun, x->s.run.dir, res_schema_train(), !!a->continue_dir, err, sizeof err) ||
             res_table_open_schema_mode(&x->tbuckets, x->s.run.dir, res_schema_train_buckets(), !!a->continue_dir, err, sizeof err) ||
             res_table_open_schema_mode(&x->tepochs, x->s.run.dir, res_schema_train_epochs(), !!a->continue_dir, err, sizeof err)) {
      bench_error("%s", err);
      ready = 0;
    }
  }
  if (!bench_rank0_ok(x->boot, ready)) return 1; /* rank 0 said why */
  if (x->rank == 0) {
    printf("train: %s (%zu params, %s) on %s %s, %lld images, %d rank(s) x batch %ld, %ld "
           "thread(s), %s%s\n",
           a->model, x->np, nn_net_backend(x->net), x->dname, x->shape, (long long)x->train.n, x->size,
           a->batch, a->threads, x->s.run.dir, a->resume ? " (from checkpoint)" : "");
    /* the one-rank run would need its own checkpoints (and a resumed one cannot continue the
     * ranks' data position): said, since it leaves scaling_eff empty */
    if (x->size > 1 && !a->no_single && !j->do_single)
      printf("# no one-rank run, so no scaling_eff: --save and --resume continue one training of "
             "%d ranks (run without them for the scaling figure)\n", x->size);
    fflush(stdout);
  }
  return 0;
}

/* The order the roles train in, per device (--device cpu,cuda: every pair on each): one rank
 * alone, then the pairs, none first (the fabric's denominator); pairs the transport cannot run
 * are said and skipped. */
static void job_order(train_job *j) {
  const train_args *a = j->a;
  j->norder = 0;
  for (int d = 0; d < a->ndevices; d++) {
    if (j->do_single) j->odev[j->norder] = a->devices[d], j->order[j->norder++] = -1;
    for (int i = 0; i < j->npairs; i++)
      if (j->pairs[i].role == ROLE_NONE || j->pairs[i].role == ROLE_SINGLE)
        j->odev[j->norder] = a->devices[d], j->order[j->norder++] = i;
    for (int i = 0; i < j->npairs; i++) {
      const train_pair *p = &j->pairs[i];
      if (p->role != ROLE_DP) continue;
      if (!coll_algo_supported(p->comm, p->algo)) {
        if (j->x.rank == 0 && d == 0)
          printf("# skipping %s/%s: %s\n", p->tname, p->aname,
                 p->algo.kind == COLL_ALGO_NATIVE ? "this transport has no native all-reduce"
                                                  : "not available in this build");
        continue;
      }
      j->odev[j->norder] = a->devices[d], j->order[j->norder++] = i;
    }
  }
}

static const train_pair *job_pair(const train_job *j, int oi) {
  return j->order[oi] < 0 ? &train_single : &j->pairs[j->order[oi]];
}

/* The one-rank run: rank 0 trains alone; the others wait in its heartbeat (on_alive: in the
 * steps too). 0, or -1 after saying why. */
static int job_single(train_job *j, nn_train_opts *t, nn_train_result *r) {
  train_ctx *x = &j->x;
  char err[4096];
  int32_t heard = 0;
  t->boot = NULL;
  t->world = 1;
  t->on_alive = x->size > 1 ? on_alive : NULL;
  if (x->rank != 0) {
    while (heard == 0)
      if (train_heartbeat(x, 0, &heard)) break;
    return heard == 1 ? 0 : -1;
  }
  x->heartbeat = 1;
  int trc = nn_train_run(r, t, err, sizeof err);
  x->heartbeat = 0;
  if (trc) bench_error("one rank alone: %s", err);
  if (x->size > 1 && train_heartbeat(x, trc ? 2 : 1, NULL)) trc = -1;
  return trc ? -1 : 0;
}

/* Entry oi of the order, one round: its device's net, the same weights as every other entry,
 * its schedule, and the training. 0, or the run's exit status after saying why. */
static int job_entry(train_job *j, int oi, int round, train_kept *kept) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  const train_pair *p = job_pair(j, oi);
  char err[4096];
  x->pair = p;
  x->role_index = oi;
  x->round = round;
  /* the next device, or a sweep's batch or threads: its own net, the same weights */
  if (j->odev[oi] != nn_net_device(x->net) || j->no.batch != (int)a->batch || j->no.threads != (int)a->threads) {
    nn_net_destroy(x->net);
    x->net = NULL;
    j->no.device = j->odev[oi];
    j->no.batch = (int)a->batch;
    j->no.threads = (int)a->threads;
    int crc = nn_net_create(&x->net, &j->no, err, sizeof err);
    if (crc) {
      bench_error("%s", err);
      return crc == NN_ENODEV ? 3 : 1;
    }
    x->have_profile = 0;
    x->single_ips = x->none_ips = 0;
  }
  x->ranks = p->role == ROLE_SINGLE ? 1 : x->size;
  x->spe = nn_data_steps_per_epoch(x->train.n, x->same_data ? 1 : x->ranks, (int)a->batch, 1);
  int64_t epochs, horizon, stop, start = a->resume ? j->have.global_step : 0;
  train_span(a, x->spe, &epochs, &horizon, &stop);
  if (start >= stop)
    return bench_error("checkpoint %s is at step %lld; nothing left to train (stop at %lld)", a->resume,
                       (long long)start, (long long)stop);
  nn_lr_sched sched = {.kind = a->sched, .gamma = a->gamma, .total_steps = horizon,
                       .base = nn_lr_scaled(a->lr, (int)a->batch * x->ranks, (int)a->ref_batch),
                       .warmup_steps = (int64_t)llround(a->warmup_epochs * (double)x->spe)};
  if (a->sched == NN_LR_STEP &&
      train_parse_milestones(&sched, a->milestones ? a->milestones : "0.5,0.75", (long)epochs, x->spe))
    return bench_usage_error(train_usage(), "bad --lr-milestones '%s'", a->milestones);
  nn_sgd_opts so = {.momentum = (float)a->momentum, .weight_decay = (float)a->wd, .nesterov = a->nesterov,
                    .kind = a->optimizer, .beta1 = a->beta1, .beta2 = a->beta2, .eps = a->eps};
  /* every pair from the same weights (the calls mark the copies written: a GPU net uploads) */
  memcpy(nn_net_params(x->net, NULL), j->init, x->np * sizeof *j->init);
  memcpy(nn_net_buffers(x->net, NULL), j->init_bufs, j->nb * sizeof *j->init_bufs);
  float *mom = nn_net_momentum(x->net, NULL);
  if (j->init_mom) memcpy(mom, j->init_mom, x->np * sizeof *mom);
  else memset(mom, 0, x->np * sizeof *mom);

  if (x->rank == 0 && round == 1 && a->overlap_step == NN_OSTEP_ON && p->role == ROLE_DP &&
      coll_comm_serial_with_boot(p->comm))
    printf("# %s/%s: --overlap-step off: the step's records would go through MPI beside the gradient "
           "thread's calls, and MPI takes one thread at a time here\n", p->tname, p->aname);
  nn_train_opts t;
  loop_opts(&t, x, &sched, &so, &j->want, epochs);
  t.steps_per_epoch = x->spe;
  t.start_step = start;
  t.stop_step = stop;
  t.elapsed0 = a->resume ? j->have.elapsed_s : 0;
  t.resume_shards = a->resume && j->have.sharded ? a->resume : NULL;
  if (round > 1) t.trace_steps = 0; /* the trace is the first round's */
  nn_train_result r;
  memset(&r, 0, sizeof r);
  r.images_per_s = NAN; /* the waiting ranks of the one-rank run measure nothing */
  if (p->role == ROLE_SINGLE) {
    if (job_single(j, &t, &r)) return 1;
  } else {
    t.boot = x->size > 1 ? x->boot : NULL;
    t.comm = p->role == ROLE_DP ? p->comm : NULL;
    t.algo = p->algo;
    t.wire_alloc = &j->galloc;
    if (nn_train_run(&r, &t, err, sizeof err))
      return bench_error("%s %s/%s: %s", train_role_names[p->role], p->tname, p->aname, err);
  }
  train_kept_add(kept, &r, &sched, &so, epochs);
  if (round < a->rounds && x->rank == 0) { /* the rows come with the last round */
    printf("%-6s %-10s %-8s round %d of %ld: %.1f images/s\n", train_role_names[p->role], p->tname, p->aname,
           round, a->rounds, r.images_per_s);
    fflush(stdout);
  }
  return 0;
}

/* Whether entry oi of the current setting has its row in the train.csv of the run this one
 * continues (--resume DIR): rank 0 looks, every rank hears. Such an entry is not trained again;
 * a one-rank or none row gives its denominator from there. */
static int job_done_before(train_job *j, int oi) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  if (!a->continue_dir) return 0;
  const train_pair *p = job_pair(j, oi);
  const res_train_row *row = NULL;
  if (x->rank == 0) {
    int ranks = p->role == ROLE_SINGLE ? 1 : x->size;
    double lr = nn_lr_scaled(a->lr, (int)a->batch * ranks, (int)a->ref_batch);
    row = train_sweep_done(&x->done, a, train_role_names[p->role], p->tname, p->aname,
                           j->odev[oi] == NN_DEV_CUDA ? "cuda" : "cpu", ranks, lr);
    if (row && p->role == ROLE_SINGLE) x->single_ips = row->images_per_s;
    if (row && p->role == ROLE_NONE) x->none_ips = row->images_per_s;
    if (row) {
      printf("# %s %s/%s on %s: its row is in %s already, not trained again\n", train_role_names[p->role], p->tname,
             p->aname, j->odev[oi] == NN_DEV_CUDA ? "cuda" : "cpu", x->s.run.dir);
      fflush(stdout);
    }
  }
  return bench_rank0_ok(x->boot, row != NULL);
}

/* Every entry of the order for the current setting, --rounds times: the whole order again each
 * round, so that a slow spell of the machine hits one round of a pair, not the pair; each
 * entry's row is written with its last round (its fastest round, and the slowest figure).
 * 0, or the run's exit status. */
static int job_setting(train_job *j, train_kept *kept, int *done) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  int status = 0, written = 0; /* entries of the order whose row is out */
  for (int oi = 0; oi < j->norder; oi++) done[oi] = job_done_before(j, oi);
  for (int round = 1; round <= a->rounds && !status; round++)
    for (int oi = 0; oi < j->norder && !status; oi++) {
      if (done[oi]) continue;
      const train_pair *p = job_pair(j, oi);
      char label[80];
      snprintf(label, sizeof label, "%s %s/%s", train_role_names[p->role], p->tname, p->aname);
      if (round == a->rounds) bench_tel_begin(&x->s.tel, label); /* the round whose row is written */
      if ((status = job_entry(j, oi, round, &kept[oi])) || round < a->rounds) continue;
      bench_tel_end(&x->s.tel, x->boot, &x->bound); /* collective; a row without it still goes out */
      /* the row before the trace: a trace that cannot be written loses no row */
      int wrc = x->rank == 0 ? train_kept_write(x, job_pair(j, oi), &kept[oi]) : 0;
      written = oi + 1;
      if (x->rank == 0 && train_write_trace(x)) wrc = -1;
      if (!bench_rank0_ok(x->boot, !wrc)) status = 1; /* every rank stops alike */
    }
  /* a later round failed: the rounds done are measured, and kept (rows of the entries on the
   * net's device; another device's would be written with this one's name), without a bound */
  x->bound.bound[0] = '\0';
  for (int oi = written; x->rank == 0 && a->rounds > 1 && oi < j->norder; oi++) {
    const train_pair *p = job_pair(j, oi);
    if (!kept[oi].rounds || !x->net || j->odev[oi] != nn_net_device(x->net)) continue;
    printf("# %s %s/%s: the row of its %d round(s) of %ld done\n", train_role_names[p->role], p->tname,
           p->aname, kept[oi].rounds, a->rounds);
    if (train_kept_write(x, p, &kept[oi])) break;
  }
  return status;
}

/* Every setting of the sweep (one without lists), in order, each a fresh set of rows with its own
 * denominators. 0, or the run's exit status. */
static int job_train(train_job *j) {
  train_args *a = j->a;
  train_ctx *x = &j->x;
  int status = 0, nset = train_sweep_count(a);
  job_order(j);
  if (j->norder == 0) { /* every pair skipped and no one-rank run: a run with no row is no success */
    fflush(stdout); /* the skipped pairs' lines first */
    if (x->rank == 0) bench_error("train: nothing to train: every transport/algorithm pair was skipped (above)");
    status = 1;
  }
  train_kept *kept = calloc(j->norder ? (size_t)j->norder : 1, sizeof *kept);
  int *done = calloc(j->norder ? (size_t)j->norder : 1, sizeof *done);
  if (!kept || !done) status = bench_error("out of memory");
  for (int k = 0; k < nset && !status; k++) {
    train_sweep_apply(a, k);
    x->single_ips = x->none_ips = 0; /* this setting's own */
    x->have_profile = 0;
    memset(kept, 0, (size_t)j->norder * sizeof *kept);
    if (nset > 1 && x->rank == 0) {
      printf("# setting %d of %d: batch %ld, lr %g, %s, %ld epoch(s), %ld thread(s), %ld loader worker(s)\n", k + 1,
             nset, a->batch, a->lr, nn_optim_name(a->optimizer), a->epochs, a->threads, a->loader_workers);
      fflush(stdout);
    }
    status = job_setting(j, kept, done);
  }
  free(kept);
  free(done);
  if (x->rank == 0) {
    x->s.run.meta.status = status ? "failed" : "ok";
    if (bench_run_write(&x->s.run) && !status) status = 1;
    printf("train: %s\n", x->s.run.dir);
  }
  return status;
}

/* Frees what the run holds; a failed run (status 1) marks its communicators failed and, under
 * MPI, aborts rather than wait for a rank that may be dead or stopped. */
static void job_close(train_job *j, int status) {
  train_ctx *x = &j->x;
  if (x->rank == 0) {
    res_table_close(x->tsteps);
    res_table_close(x->teval);
    res_table_close(x->trun);
    res_table_close(x->tbuckets);
    res_table_close(x->tepochs);
    res_rows_free(&x->done);
  }
  nn_net_destroy(x->net); /* frees the arena through its communicator: before closing them */
  free(j->init);
  free(j->init_bufs);
  free(j->init_mom);
  for (int t = 0; t < j->ntk; t++) {
    if (j->comms[t] && status == 1) coll_comm_mark_failed(j->comms[t]);
    if (j->comms[t]) coll_comm_close(j->comms[t]);
  }
  nn_data_free(&x->train);
  nn_data_free(&x->test);
  cJSON_Delete(x->trace);
  if (x->model.n) res_costmodel_free(&x->model);
  if (status == 1) bench_session_abort(&x->s);
  else bench_session_close(&x->s);
}

static int train_rank_main(train_args *a, int argc, char **argv) {
  char err[4096];
  if (a->mode == TRAIN_MODE_PARTITIONED) return train_partitioned_main(a, argc, argv);
  nn_data_spec spec;
  if (nn_data_parse_spec(&spec, a->data, err, sizeof err) != 0)
    return bench_usage_error(train_usage(), "%s", err);
  train_job *j = calloc(1, sizeof *j);
  if (!j) return bench_error("out of memory");
  const char *same = getenv("FABENCH_TEST_SAME_DATA");
  j->a = a;
  j->x.a = a;
  j->x.same_data = same && !strcmp(same, "1");
  int status = job_open(j);
  if (!status) status = job_load(j, &spec);
  if (!status) status = job_begin(j, argc, argv);
  if (!status && bench_session_telemetry(&j->x.s)) status = 1;
  if (!status) status = job_train(j);
  job_close(j, status);
  free(j);
  return status;
}

int bench_cmd_train(int argc, char **argv) {
  train_args a;
  int rc = train_parse_args(&a, argc, argv);
  if (rc == 1) return 0; /* --help */
  if (rc) return rc;
  if (a.r.nranks > 0) {
    /* the lists checked here, once, before any rank starts */
    train_pair pairs[TRAIN_MAX_PAIRS];
    coll_transport_kind tks[TRAIN_MAX_PAIRS];
    int ntk, use_mpirun;
    if (train_make_pairs(pairs, &a, a.r.nranks, tks, &ntk, &use_mpirun, &rc) < 0) return rc;
    char err[256];
    if (train_devices_usable(&a, 0, err, sizeof err)) { /* one line here, not one a rank */
      fprintf(stderr, "fabench: %s\n", err);
      return 3;
    }
    return bench_rank_relaunch(&a.r, argc, argv, use_mpirun);
  }
  return train_rank_main(&a, argc, argv);
}
