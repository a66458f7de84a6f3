/* fabench train: ResNet training on the CPU (oneDNN), one process or data-parallel over every
 * transport and all-reduce algorithm fabench has. This file holds the flags, the order in which
 * the pairs train and the records; the loop, the reducer, evaluation and checkpoints are models'
 * (nn_train.c). Files: train.csv (a row per pair, and for one rank alone), train_steps.csv (a
 * row per step and rank), train_eval.csv, train_buckets.csv, run.json. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "nn.h"
#include "res.h"
#include "topo.h"
#include "util.h"

static const char train_usage[] =
    "usage: fabench train [options]\n"
    "  -n N                 start N local ranks and train data-parallel (default: the\n"
    "                       launcher's world, or one process)\n"
    "  --transport LIST     tcp,ucx,mpi,none: each trains in turn from the same weights; none\n"
    "                       trains the same ranks with no gradient exchange (the baseline)\n"
    "                       [none,tcp,ucx (those built) with several ranks]\n"
    "  --algo LIST          ring,rhd,rd,tree,dtree,ps,ps:K,native,auto [ring]\n"
    "  --no-single          skip the one-rank run that scaling efficiency is measured against\n"
    "  --rounds R           the pairs (and the one-rank run) take turns R times, each round the\n"
    "                       same steps from the same weights; a pair's row is its fastest\n"
    "                       round, so a slow spell of the machine during one pair does not\n"
    "                       pass for its fabric's cost [1]\n"
    "  --bucket-mb X        gradient bucket size, MiB [25]\n"
    "  --first-bucket-mb X  the first (last layers') bucket [1]\n"
    "  --no-overlap         all-reduce after backward instead of during it\n"
    "  --overlap-step on|off|auto  the next step's forward starts while this step's gradients\n"
    "                       are still all-reduced, each layer waiting only for its own (CPU);\n"
    "                       auto: on after the warm-up where backward cannot hide the\n"
    "                       all-reduce [auto]\n"
    "  --grad-dtype T       f32|bf16|f16: the type gradients travel in [f32]\n"
    "  --check-every K      compare the ranks' parameter hashes every K steps too (always at\n"
    "                       epoch ends and at the end) [0]\n"
    "  --emulate RATE       with -n: each rank in its own network namespace, links shaped to\n"
    "                       RATE (e.g. 1gbit); needs root and iproute2\n"
    "  --emulate NxR:RATE   an emulated cluster of N hosts of R ranks (e.g. 2x2:1gbit): each\n"
    "                       host a namespace with a hostname of its own, its ranks sharing\n"
    "                       its memory and loopback, hosts linked at RATE\n"
    "  --emulate-slow K=RATE with NxR: host K's link at RATE instead (repeatable)\n"
    "  --intra-transport T  hier's phases inside hosts over T (tcp, ucx, mpi), only between\n"
    "                       hosts over the pair's transport (default: ucx, whose ranks on\n"
    "                       a host map each other's buffer, where it is built and the\n"
    "                       pair's transport is tcp or mpi; else the pair's own)\n"
    "  --mpirun-args ARGS   extra mpirun arguments when -n starts ranks through mpirun\n"
    "  --chunk SIZE         pipelining unit of the all-reduce algorithms\n"
    "  --bind HOW           auto|none|core|numa|nic|gpu [auto: --threads cores each where\n"
    "                       the host's ranks fit its cores and no launcher bound them]\n"
    "  --timeout SEC        every network wait [60]\n"
    "  --trace FILE         Chrome trace (Perfetto, chrome://tracing) of the measured steps:\n"
    "                       per rank, forward, each layer's backward, each bucket's all-reduce\n"
    "                       on the communication thread, and the waits\n"
    "  --trace-steps N      steps traced after the warm-up [5]\n"
    "  --device LIST        cpu|cuda|cpu,cuda: each trains every pair in turn, a row each [cpu]\n"
    "  --precision P        GPU arithmetic: fp32|tf32|bf16 (bf16 keeps fp32 master weights) [fp32]\n"
    "  --cudnn-search       GPU: time cuDNN's convolution algorithms instead of its heuristics\n"
    "  --gpu N              GPU ordinal of every rank [each rank's local rank modulo the\n"
    "                       GPU count: ranks beyond it share GPUs]\n"
    "  --model-from DIR|F   every data-parallel row gains the cost model's prediction of its\n"
    "                       step (from this run's none or one-rank profile and the fitted\n"
    "                       all-reduce model of its fabric) and the error\n"
    "  --model NAME         resnet18|34|50 (torchvision), resnet20|32|56 (CIFAR), '-wN' sets the\n"
    "                       base width (e.g. resnet20-w4) [resnet20]\n"
    "  --data SPEC          fmnist[:DIR] (default DIR " NN_DATA_FMNIST_DIR "),\n"
    "                       cifar10:DIR, synthetic[:CxHxW[:CLASSES[:N]]] [fmnist]\n"
    "  --batch N            images per step and rank [128]\n"
    "  --epochs N           epochs to train; also the schedule's length [1]\n"
    "  --steps N            stop after global step N (throughput runs) [0: whole epochs]\n"
    "  --warmup-steps N     first steps of this run left out of the figures [10]\n"
    "  --lr X               base learning rate [0.1]\n"
    "  --momentum X         [0.9]\n"
    "  --wd X               weight decay [5e-4]\n"
    "  --nesterov           Nesterov momentum\n"
    "  --lr-schedule S      const|step|cosine [cosine]\n"
    "  --warmup-epochs X    linear learning-rate warm-up [0]\n"
    "  --lr-milestones L    step schedule: epochs where lr is multiplied by --lr-gamma, e.g.\n"
    "                       30,60 or fractions of --epochs 0.5,0.75 [0.5,0.75]\n"
    "  --lr-gamma X         [0.1]\n"
    "  --ref-batch N        linear scaling rule: lr x global batch (ranks x batch) / N [off]\n"
    "  --threads N          oneDNN/OpenMP threads [all cores]\n"
    "  --seed N             weights, data order and augmentation [1]\n"
    "  --no-augment         no random crop or flip (default: crop and flip on fmnist, cifar10)\n"
    "  --crop-pad N         random-crop padding [2 fmnist, 4 cifar10, 0 synthetic]\n"
    "  --eval-every N       test-set evaluation every N epochs, 0 never [1]\n"
    "  --target-acc X       report the time to this test accuracy, and stop there\n"
    "  --no-stop-at-target  keep training after reaching --target-acc\n"
    "  --save FILE          checkpoint at every epoch end and at the end (no one-rank run)\n"
    "  --resume FILE        continue from a checkpoint (its seed and data position; no one-rank\n"
    "                       run)\n"
    "  --log-every N        step log period [20]\n"
    "  --prefetch N         batches the loader prepares ahead [2]\n"
    "  --out DIR            run directory [results/<UTC>-train]\n";

typedef struct {
  bench_rank_opts r; /* -n, --emulate, --mpirun-args, --bind, --timeout, --out */
  const char *model, *data, *save, *resume, *milestones;
  const char *transports, *algos, *trace, *model_from;
  int devices[2], ndevices, precision, cudnn_search;
  long gpu;                   /* -1: the local rank */
  long trace_steps;
  int no_single, overlap, overlap_step;
  coll_dtype grad_dtype;
  double bucket_mb, first_bucket_mb;
  long check_every;
  uint64_t chunk;
  nn_lr_kind sched;
  long batch, epochs, steps, warmup_steps, threads, ref_batch, eval_every, log_every, prefetch;
  long rounds;
  long crop_pad; /* -1: the data's default */
  double lr, momentum, wd, warmup_epochs, target_acc, gamma;
  int nesterov, augment, stop_at_target, epochs_given, seed_given;
  uint64_t seed;
} train_args;

/* --overlap-step's words, indexed by NN_OSTEP_* */
static const char *const ostep_names[] = {"off", "on", "auto"};
_Static_assert(NN_OSTEP_OFF == 0 && NN_OSTEP_ON == 1 && NN_OSTEP_AUTO == 2, "ostep_names follows NN_OSTEP_*");

/* 0 when every device of the list can train here, else NN_ENODEV and why: a rank's GPU is --gpu,
 * or its local rank modulo the GPU count */
static int devices_usable(const train_args *a, int local_rank, char *err, size_t errcap) {
  for (int d = 0; d < a->ndevices; d++) {
    int gpu = a->gpu >= 0 ? (int)a->gpu : local_rank;
    int rc = nn_device_check(a->devices[d], &gpu, a->gpu < 0, err, errcap);
    if (rc) return rc;
  }
  return 0;
}

enum {
  O_MODEL = 256, O_DATA, O_BATCH, O_EPOCHS, O_STEPS, O_WSTEPS, O_LR, O_MOM, O_WD, O_NEST, O_SCHED,
  O_WEPOCHS, O_MILE, O_GAMMA, O_REF, O_THREADS, O_SEED, O_NOAUG, O_PAD, O_EVAL, O_TARGET,
  O_NOSTOP, O_SAVE, O_RESUME, O_LOG, O_PREFETCH, O_OUT, O_TRANSPORT, O_ALGO, O_NOSINGLE, O_BUCKET,
  O_FIRSTB, O_NOOVERLAP, O_OSTEP, O_GDTYPE, O_CHECK, O_CHUNK, O_TRACE, O_TRACESTEPS, O_MODELFROM,
  O_DEVICE, O_PREC, O_SEARCH, O_GPU, O_ROUNDS
};

static int parse_args(train_args *a, int argc, char **argv) {
  static const struct option opts[] = {
      {"model", 1, 0, O_MODEL},         {"data", 1, 0, O_DATA},
      {"batch", 1, 0, O_BATCH},         {"epochs", 1, 0, O_EPOCHS},
      {"steps", 1, 0, O_STEPS},         {"warmup-steps", 1, 0, O_WSTEPS},
      {"lr", 1, 0, O_LR},               {"momentum", 1, 0, O_MOM},
      {"wd", 1, 0, O_WD},               {"nesterov", 0, 0, O_NEST},
      {"lr-schedule", 1, 0, O_SCHED},   {"warmup-epochs", 1, 0, O_WEPOCHS},
      {"lr-milestones", 1, 0, O_MILE},  {"lr-gamma", 1, 0, O_GAMMA},
      {"ref-batch", 1, 0, O_REF},       {"threads", 1, 0, O_THREADS},
      {"seed", 1, 0, O_SEED},           {"no-augment", 0, 0, O_NOAUG},
      {"crop-pad", 1, 0, O_PAD},        {"eval-every", 1, 0, O_EVAL},
      {"target-acc", 1, 0, O_TARGET},   {"no-stop-at-target", 0, 0, O_NOSTOP},
      {"save", 1, 0, O_SAVE},           {"resume", 1, 0, O_RESUME},
      {"log-every", 1, 0, O_LOG},       {"prefetch", 1, 0, O_PREFETCH},
      BENCH_RANK_OPTIONS,               {"transport", 1, 0, O_TRANSPORT},
      {"algo", 1, 0, O_ALGO},           {"no-single", 0, 0, O_NOSINGLE},
      {"bucket-mb", 1, 0, O_BUCKET},    {"first-bucket-mb", 1, 0, O_FIRSTB},
      {"no-overlap", 0, 0, O_NOOVERLAP}, {"grad-dtype", 1, 0, O_GDTYPE},
      {"overlap-step", 1, 0, O_OSTEP},
      {"check-every", 1, 0, O_CHECK},   {"chunk", 1, 0, O_CHUNK},
      {"trace", 1, 0, O_TRACE},         {"trace-steps", 1, 0, O_TRACESTEPS},
      {"model-from", 1, 0, O_MODELFROM}, {"device", 1, 0, O_DEVICE},
      {"precision", 1, 0, O_PREC},      {"cudnn-search", 0, 0, O_SEARCH},
      {"gpu", 1, 0, O_GPU},             {"rounds", 1, 0, O_ROUNDS},
      {0, 0, 0, 0}};
  *a = (train_args){.model = "resnet20", .data = "fmnist", .sched = NN_LR_COSINE, .batch = 128,
                    .epochs = 1, .warmup_steps = 10, .eval_every = 1, .log_every = 20,
                    .prefetch = 2, .crop_pad = -1, .lr = 0.1, .momentum = 0.9, .wd = 5e-4,
                    .gamma = 0.1, .augment = 1, .stop_at_target = 1, .seed = 1,
                    .algos = "ring", .overlap = 1, .overlap_step = NN_OSTEP_AUTO,
                    .grad_dtype = COLL_F32, .bucket_mb = 25, .first_bucket_mb = 1, .trace_steps = 5,
                    .devices = {NN_DEV_CPU}, .ndevices = 1, .gpu = -1, .rounds = 1};
  bench_rank_opts_init(&a->r);
  optind = 1;
  opterr = 0;
  int c, li = 0, rc;
  long v;
  double d;
#define BAD(...) return bench_usage_error(train_usage, __VA_ARGS__)
#define INT(lo, hi, dst)                                                              \
  do {                                                                                \
    if (bench_parse_int(optarg, lo, hi, &v) != 0)                                     \
      BAD("bad value '%s' for --%s (an integer %ld..%ld)", optarg, opts[li].name, (long)(lo), \
          (long)(hi));                                                               \
    dst = v;                                                                          \
  } while (0)
#define DBL(lo, hi, dst)                                                              \
  do {                                                                                \
    if (bench_parse_double(optarg, lo, hi, &d) != 0)                                  \
      BAD("bad value '%s' for --%s (a number %g..%g)", optarg, opts[li].name, (double)(lo), \
          (double)(hi));                                                             \
    dst = d;                                                                          \
  } while (0)
  while ((c = getopt_long(argc, argv, ":hn:", opts, &li)) != -1) {
    switch (c) {
    case O_TRANSPORT: a->transports = optarg; break;
    case O_ALGO: a->algos = optarg; break;
    case O_NOSINGLE: a->no_single = 1; break;
    case O_BUCKET: DBL(0.001, 1 << 20, a->bucket_mb); break;
    case O_FIRSTB: DBL(0.001, 1 << 20, a->first_bucket_mb); break;
    case O_NOOVERLAP: a->overlap = 0; break;
    case O_OSTEP: {
      int k = 0;
      while (k < 3 && strcmp(optarg, ostep_names[k])) k++;
      if (k == 3) BAD("bad --overlap-step '%s' (on, off or auto)", optarg);
      a->overlap_step = k;
      break;
    }
    case O_GDTYPE:
      if (coll_dtype_parse(optarg, &a->grad_dtype) ||
          (a->grad_dtype != COLL_F32 && a->grad_dtype != COLL_BF16 && a->grad_dtype != COLL_F16))
        BAD("bad --grad-dtype '%s' (f32, bf16 or f16)", optarg);
      break;
    case O_CHECK: INT(0, 1L << 40, a->check_every); break;
    case O_CHUNK:
      if (bench_parse_size(optarg, &a->chunk) || a->chunk < 64)
        BAD("bad --chunk '%s' (a size >= 64)", optarg);
      break;
    case O_TRACE: a->trace = optarg; break;
    case O_TRACESTEPS: INT(1, 100000, a->trace_steps); break;
    case O_MODELFROM: a->model_from = optarg; break;
    case O_DEVICE: {
      char *items[3], *store = NULL;
      int n = bench_split_list(optarg, items, 3, &store), ok = n >= 1 && n <= 2;
      for (int i = 0; ok && i < n; i++) {
        ok = !strcmp(items[i], "cpu") || !strcmp(items[i], "cuda");
        a->devices[i] = !strcmp(items[i], "cuda") ? NN_DEV_CUDA : NN_DEV_CPU;
        ok = ok && (i == 0 || a->devices[1] != a->devices[0]);
      }
      free(store);
      if (!ok) BAD("bad --device '%s' (cpu, cuda or cpu,cuda)", optarg);
      a->ndevices = n;
      break;
    }
    case O_PREC:
      if (!strcmp(optarg, "fp32")) a->precision = NN_PREC_FP32;
      else if (!strcmp(optarg, "tf32")) a->precision = NN_PREC_TF32;
      else if (!strcmp(optarg, "bf16")) a->precision = NN_PREC_BF16;
      else BAD("bad --precision '%s' (fp32, tf32 or bf16)", optarg);
      break;
    case O_SEARCH: a->cudnn_search = 1; break;
    case O_GPU: INT(0, 1023, a->gpu); break;
    case O_ROUNDS: INT(1, 100, a->rounds); break;
    case O_MODEL: a->model = optarg; break;
    case O_DATA: a->data = optarg; break;
    case O_BATCH: INT(1, 1 << 20, a->batch); break;
    case O_EPOCHS: INT(1, 1000000, a->epochs); a->epochs_given = 1; break;
    case O_STEPS: INT(1, 1L << 40, a->steps); break;
    case O_WSTEPS: INT(0, 1L << 40, a->warmup_steps); break;
    case O_LR: DBL(0, 1e3, a->lr); break;
    case O_MOM: DBL(0, 1, a->momentum); break;
    case O_WD: DBL(0, 1, a->wd); break;
    case O_NEST: a->nesterov = 1; break;
    case O_SCHED:
      if (!strcmp(optarg, "const")) a->sched = NN_LR_CONST;
      else if (!strcmp(optarg, "step")) a->sched = NN_LR_STEP;
      else if (!strcmp(optarg, "cosine")) a->sched = NN_LR_COSINE;
      else BAD("bad --lr-schedule '%s' (const, step or cosine)", optarg);
      break;
    case O_WEPOCHS: DBL(0, 1e6, a->warmup_epochs); break;
    case O_MILE: a->milestones = optarg; break;
    case O_GAMMA: DBL(0, 1e3, a->gamma); break;
    case O_REF: INT(1, 1 << 30, a->ref_batch); break;
    case O_THREADS: INT(1, 4096, a->threads); break;
    case O_SEED: {
      uint64_t s;
      if (bench_parse_size(optarg, &s) != 0 || strpbrk(optarg, "kKmMgGiBb"))
        BAD("bad value '%s' for --seed (a non-negative integer)", optarg);
      a->seed = s;
      a->seed_given = 1;
      break;
    }
    case O_NOAUG: a->augment = 0; break;
    case O_PAD: INT(0, 64, a->crop_pad); break;
    case O_EVAL: INT(0, 1000000, a->eval_every); break;
    case O_TARGET: DBL(0, 1, a->target_acc); break;
    case O_NOSTOP: a->stop_at_target = 0; break;
    case O_SAVE: a->save = optarg; break;
    case O_RESUME: a->resume = optarg; break;
    case O_LOG: INT(1, 1L << 40, a->log_every); break;
    case O_PREFETCH: INT(1, 64, a->prefetch); break;
    default: /* the flags every command that starts ranks shares */
      if ((rc = bench_rank_flag(&a->r, c, argv, train_usage)) != 0) return rc;
    }
  }
  if ((rc = bench_rank_check(&a->r, argc, argv, train_usage)) != 0) return rc;
  if (a->milestones) {
    char *items[NN_LR_MAX_MILESTONES], *store;
    int n = bench_split_list(a->milestones, items, NN_LR_MAX_MILESTONES, &store), ok = n > 0;
    for (int i = 0; ok && i < n; i++) ok = bench_parse_double(items[i], 0, 1e9, &d) == 0;
    free(store);
    if (!ok) BAD("bad --lr-milestones '%s' (epochs, comma separated, at most %d)", a->milestones,
                 NN_LR_MAX_MILESTONES);
  }
  if (a->target_acc > 0 && a->eval_every == 0) BAD("--target-acc needs test-set evaluation (--eval-every >= 1)");
  /* each round trains afresh: a checkpoint would hold whichever round ended last */
  if (a->rounds > 1 && (a->save || a->resume)) BAD("--rounds %ld with --save or --resume: a checkpoint continues one training; rounds retrain the same steps", a->rounds);
  /* the builder's own rule: a depth no ResNet has is a usage error, not a failure after setup */
  char merr[512];
  if (nn_model_check(a->model, merr, sizeof merr)) BAD("bad --model: %s", merr);
#undef INT
#undef DBL
  return 0;
}

/* Milestones in epochs ("30,60,80" or fractions "0.5,0.75" of --epochs) to steps. */
static int parse_milestones(nn_lr_sched *s, const char *list, long epochs, int64_t spe) {
  char *items[NN_LR_MAX_MILESTONES], *store;
  int n = bench_split_list(list, items, NN_LR_MAX_MILESTONES, &store);
  if (n < 0) {
    free(store);
    return -1;
  }
  for (int i = 0; i < n; i++) {
    double e;
    if (bench_parse_double(items[i], 0, 1e9, &e) != 0) {
      free(store);
      return -1;
    }
    s->milestones[i] = (int64_t)llround((e < 1 && strchr(items[i], '.') ? e * epochs : e) * spe);
  }
  s->nmilestones = n;
  free(store);
  return 0;
}

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

static const char *sched_name(nn_lr_kind k) {
  return k == NN_LR_CONST ? "const" : k == NN_LR_STEP ? "step" : "cosine";
}

/* ---- what one run trains: the roles in turn, each from the same initial weights ---- */

typedef enum { ROLE_SINGLE, ROLE_NONE, ROLE_DP } train_role;
static const char *const role_names[] = {"single", "none", "dp"};

typedef struct {
  train_role role;
  coll_comm *comm;        /* ROLE_DP */
  coll_transport_kind tk;
  coll_algo algo;
  char tname[16], aname[32];
} train_pair;

#define TRAIN_MAX_PAIRS 64

typedef struct {
  const train_args *a;
  coll_boot *boot;
  int rank, size;
  bench_run run;          /* rank 0 */
  res_table *tsteps, *teval, *trun, *tbuckets;
  nn_net *net;
  nn_dataset train, test;
  char dname[2200], shape[64];
  int crop_pad, augment;
  size_t np;
  const train_pair *pair; /* being trained */
  int ranks;              /* of the pair being trained */
  int64_t spe;            /* of the pair being trained */
  double single_ips, none_ips; /* 0 until measured */
  int heartbeat;          /* the one-rank run: rank 0 tells the waiting ranks it goes on */
  cJSON *trace;           /* rank 0: the trace events so far (--trace) */
  int same_data;          /* tests (FABENCH_TEST_SAME_DATA=1): every rank reads one rank's data */
  res_model model;        /* --model-from (n == 0 without) */
  /* the predictions' compute profile: the none run's rows (the same ranks sharing the cores as
   * training does), else one rank alone's */
  res_train_row profile;
  res_train_buckets_row prof_buckets[NN_TRAIN_MAX_BUCKETS];
  res_train_buckets_row bk_rows[2 * NN_TRAIN_MAX_BUCKETS]; /* a data-parallel pair's, after the profile's */
  int have_profile, nprof_buckets;
  int role_index;         /* of the pair being trained: its trace's process ids */
  int round;              /* of --rounds, from 1 */
  int slow_said;          /* the warning about oneDNN's reference code is out */
  double alive_said;      /* when the heartbeat last went (rank 0) */
} train_ctx;

/* The one-rank run's heartbeat over the bootstrap: rank 0 says 0 (going on), 1 (done) or
 * 2 (failed) after each of its steps; the other ranks wait in this exchange, so a dead rank 0
 * is noticed within the timeout, not after the whole run. */
static int heartbeat(train_ctx *x, int32_t say, int32_t *heard) {
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

static int on_step(void *ctx, const nn_step_rec *rs, int n) {
  train_ctx *x = ctx;
  const train_args *a = x->a;
  char err[512];
  for (int r = 0; r < n; r++) {
    const nn_step_rec *q = &rs[r];
    res_train_steps_row row = {
        .run_id = x->run.run_id, .rank = q->rank, .host = coll_boot_host(x->boot, q->rank),
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
           role_names[x->pair->role], x->pair->role == ROLE_DP ? x->pair->tname : "-",
           (long long)q->step, (long long)q->epoch + 1, (long long)q->step_in_epoch + 1,
           (long long)x->spe, q->loss, q->batch_acc, q->lr, mx > 0 ? n * q->images / mx : 0,
           1e3 * q->comm_s, 1e3 * q->exposed_s);
    fflush(stdout);
  }
  if (x->heartbeat && x->size > 1 && heartbeat(x, 0, NULL)) return -1;
  return 0;
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
  return heartbeat(x, 0, NULL);
}

static int on_eval(void *ctx, const nn_eval_rec *ev) {
  train_ctx *x = ctx;
  /* the step too: a run cut by --steps mid-epoch evaluates at its end, after its last whole
   * epoch's evaluation, which had the same epoch count */
  printf("%-6s %-10s epoch %lld  step %lld  test loss %.4f  test acc %.4f  (%lld images, %.1f s)  "
         "elapsed %.1f s\n",
         role_names[x->pair->role], x->pair->role == ROLE_DP ? x->pair->tname : "-",
         (long long)ev->epoch, (long long)ev->step, ev->loss, ev->acc, (long long)ev->images, ev->secs, ev->elapsed_s);
  fflush(stdout);
  res_train_eval_row row = {.run_id = x->run.run_id, .transport = x->pair->tname,
                            .algo = x->pair->aname, .epoch = ev->epoch, .step = ev->step,
                            .test_loss = ev->loss, .test_acc = ev->acc, .test_images = ev->images,
                            .eval_s = ev->secs, .elapsed_s = ev->elapsed_s, .round = x->round};
  char err[512];
  if (res_table_put(x->teval, &row, err, sizeof err)) return bench_error("%s", err);
  return 0;
}

/* Chrome trace events ("X" spans in microseconds): one process per rank and pair, a thread for
 * compute and one for communication. Only gathered here: the file is rewritten after the pair's
 * row is written (write_trace), so a trace that cannot be written loses no row. */
static int on_trace(void *ctx, const nn_trace_ev *ev, size_t n) {
  train_ctx *x = ctx;
  if (!x->trace && !(x->trace = cJSON_CreateArray())) return bench_error("out of memory");
  for (int r = 0; r < x->ranks; r++) {
    int pid = 1000 * x->role_index + r;
    char pname[96];
    snprintf(pname, sizeof pname, "%s %s/%s rank %d", role_names[x->pair->role], x->pair->tname,
             x->pair->aname, r);
    const char *tn[2] = {"training", "communication"};
    for (int t = -1; t < 2; t++) {
      cJSON *m = cJSON_CreateObject();
      cJSON_AddStringToObject(m, "name", t < 0 ? "process_name" : "thread_name");
      cJSON_AddStringToObject(m, "ph", "M");
      cJSON_AddNumberToObject(m, "pid", pid);
      cJSON_AddNumberToObject(m, "tid", t < 0 ? 0 : t);
      cJSON_AddStringToObject(cJSON_AddObjectToObject(m, "args"), "name", t < 0 ? pname : tn[t]);
      cJSON_AddItemToArray(x->trace, m);
    }
  }
  for (size_t i = 0; i < n; i++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", ev[i].name);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "pid", 1000 * x->role_index + ev[i].rank);
    cJSON_AddNumberToObject(e, "tid", ev[i].tid);
    cJSON_AddNumberToObject(e, "ts", 1e6 * ev[i].ts_s);
    cJSON_AddNumberToObject(e, "dur", 1e6 * ev[i].dur_s);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(e, "args"), "step", (double)ev[i].step);
    cJSON_AddItemToArray(x->trace, e);
  }
  return 0;
}

/* The trace so far into --trace (rank 0, after each pair's row). 0, or -1 after saying why. */
static int write_trace(train_ctx *x) {
  if (!x->a->trace || !x->trace) return 0;
  cJSON *doc = cJSON_CreateObject();
  if (!doc) return bench_error("out of memory");
  cJSON_AddItemReferenceToObject(doc, "traceEvents", x->trace);
  cJSON_AddStringToObject(doc, "displayTimeUnit", "ms");
  char err[512];
  int rc = util_json_write_file(x->a->trace, doc, err, sizeof err);
  cJSON_Delete(doc);
  return rc ? bench_error("--trace: %s", err) : 0;
}

/* --trace and --save before anything trains (rank 0, which writes them): their directory must
 * exist and take files (both write FILE.tmp, then rename it), and an existing FILE must be a
 * writable file. 0, or -1 after saying why. */
static int out_file_check(const char *flag, const char *path) {
  if (!path) return 0;
  char d[4096];
  const char *slash = strrchr(path, '/');
  if (!*path || (slash && !slash[1]))
    return bench_error("%s '%s': not a file name", flag, path);
  if (strlen(path) >= sizeof d || util_path_dir(d, sizeof d, path)) return bench_error("%s: path too long", flag);
  struct stat st;
  if (stat(d, &st) != 0)
    return bench_error("%s %s: directory '%s': %s", flag, path, d, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return bench_error("%s %s: '%s' is not a directory", flag, path, d);
  if (access(d, W_OK | X_OK) != 0)
    return bench_error("%s %s: directory '%s' is not writable: %s", flag, path, d, strerror(errno));
  if (stat(path, &st) == 0) {
    if (S_ISDIR(st.st_mode)) return bench_error("%s %s: is a directory", flag, path);
    if (access(path, W_OK) != 0)
      return bench_error("%s %s: not writable: %s", flag, path, strerror(errno));
  }
  return 0;
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
  /* the gradient all-reduce's busbw: its bytes over the time the buckets took, as allreduce */
  double busbw = comm_s > 0 && n > 1 ? (double)r->grad_bytes / comm_s / 1e9 * 2.0 * (n - 1) / n : NAN;
  double scaling = x->single_ips > 0 ? r->images_per_s / (n * x->single_ips) : NAN;
  double fabric_eff = p->role == ROLE_DP && x->none_ips > 0 ? r->images_per_s / x->none_ips
                      : p->role == ROLE_NONE && r->measured > 0 ? 1.0 : NAN;
  *row = (res_train_row){
      .run_id = x->run.run_id, .schema = RES_SCHEMA_VERSION, .host = x->run.host,
      .host_count = coll_boot_host_count(x->boot), .ranks_per_host = bench_ranks_per_host(x->boot),
      .topo_hash = x->run.topo_hash, .ranks = n,
      .role = role_names[p->role], .fabric = fabric, .transport = p->tname, .algo = p->aname,
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
      .rounds = rounds, .images_per_s_slowest = slowest_ips};
}

/* The pair's buckets into bks from at on (rank 0): the count. */
static int result_buckets(const train_ctx *x, const nn_train_result *r, res_train_buckets_row *bks, int at) {
  const train_pair *p = x->pair;
  int nbk = r->nbuckets < NN_TRAIN_MAX_BUCKETS ? r->nbuckets : NN_TRAIN_MAX_BUCKETS;
  for (int k = 0; k < nbk; k++) {
    const nn_bucket_rec *b = &r->buckets[k];
    bks[at + k] = (res_train_buckets_row){
        .run_id = x->run.run_id, .role = role_names[p->role], .transport = p->tname,
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
  if (res_run_add_result(&x->run.meta, &e)) bench_error("out of memory: run.json's results miss a pair");
}

/* The pair's line (rank 0); the efficiencies as its row has them. */
static void result_print(const train_ctx *x, const res_train_row *row, const nn_train_result *r) {
  const train_args *a = x->a;
  const train_pair *p = x->pair;
  printf("%-6s %-10s %-8s %d rank(s): ", role_names[p->role], p->tname, p->aname, x->ranks);
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
    res_predict_train_row(&row, &x->profile, &bk, &x->model);
  }
  char err[512];
  if (res_table_put(x->trun, &row, err, sizeof err)) return bench_error("%s", err);
  result_meta(x, &row, r);
  if (bench_run_write(&x->run)) return 1;
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

/* "none", "tcp", ... into pairs with every algorithm; pairs a transport cannot run are said
 * and skipped. Returns the count, or -1 after a usage error (rc set). */
static int make_pairs(train_pair *pairs, const train_args *a, int size, coll_transport_kind *tks,
                      int *ntk, int *want_mpi, int *rc) {
  const char *tl = a->transports;
  char deflt[64] = "none,tcp";
  if (!tl) {
    if (coll_transport_built(COLL_UCX)) strcat(deflt, ",ucx");
    tl = size > 1 ? deflt : "none";
  }
  char *items[TRAIN_MAX_PAIRS], *store = NULL;
  int nt = bench_split_list(tl, items, TRAIN_MAX_PAIRS, &store), na, np = 0;
  coll_algo algos[16];
  *ntk = 0;
  *want_mpi = 0;
  if (nt <= 0) {
    *rc = bench_usage_error(train_usage, "--transport: '%s' is empty, has an empty item or is too long", tl);
    goto fail;
  }
  if ((*rc = bench_parse_algos(a->algos, algos, 16, &na, train_usage))) goto fail;
  /* a pair twice trains twice into rows that cannot be told apart: refused, as allreduce and
   * p2p refuse a transport twice; ps and ps:1 are one server alike */
  for (int i = 0; i < na; i++)
    for (int j = 0; j < i; j++) {
      int pi = algos[i].kind == COLL_ALGO_PS && algos[i].param < 1 ? 1 : algos[i].param;
      int pj = algos[j].kind == COLL_ALGO_PS && algos[j].param < 1 ? 1 : algos[j].param;
      if (algos[i].kind == algos[j].kind && pi == pj) {
        char an[32];
        coll_algo_format(an, sizeof an, algos[i]);
        *rc = bench_usage_error(train_usage, "algorithm '%s' given twice", an);
        goto fail;
      }
    }
  /* every pair gets a row and a communicator: more than the table holds is refused, not cut */
  int total = 0, seen_none = 0;
  for (int i = 0; i < nt; i++) total += strcmp(items[i], "none") ? na : 1;
  if (total > TRAIN_MAX_PAIRS) {
    *rc = bench_usage_error(train_usage, "--transport x --algo: more than %d pairs", TRAIN_MAX_PAIRS);
    goto fail;
  }
  for (int i = 0; i < nt; i++) {
    if (!strcmp(items[i], "none")) {
      if (seen_none++) {
        *rc = bench_usage_error(train_usage, "transport 'none' given twice");
        goto fail;
      }
      pairs[np++] = (train_pair){.role = ROLE_NONE, .tname = "none", .aname = "-"};
      continue;
    }
    coll_transport_kind tk;
    if (coll_transport_parse(items[i], &tk)) {
      *rc = bench_usage_error(train_usage, "--transport: unknown transport '%s'", items[i]);
      goto fail;
    }
    for (int j = 0; j < *ntk; j++)
      if (tks[j] == tk) {
        *rc = bench_usage_error(train_usage, "transport '%s' given twice", coll_transport_name(tk));
        goto fail;
      }
    if ((*rc = bench_transport_check(tk, train_usage))) goto fail;
    tks[(*ntk)++] = tk;
    *want_mpi |= tk == COLL_MPI;
    for (int j = 0; j < na; j++) {
      train_pair *p = &pairs[np++];
      *p = (train_pair){.role = ROLE_DP, .tk = tk, .algo = algos[j]};
      snprintf(p->tname, sizeof p->tname, "%s", coll_transport_name(tk));
      coll_algo_format(p->aname, sizeof p->aname, algos[j]);
    }
  }
  free(store);
  return np;
fail:
  free(store);
  return -1;
}

/* --rounds: what one entry of the training order has measured so far, for its row */
typedef struct {
  nn_train_result best; /* its fastest round */
  double slowest_ips;
  int rounds;           /* done */
  nn_lr_sched sched;
  nn_sgd_opts so;
  int64_t epochs;
} train_kept;

/* Takes one round's result into k (r of a rank that trained nothing has images_per_s NaN). */
static void kept_add(train_kept *k, const nn_train_result *r, const nn_lr_sched *sched,
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
static int kept_write(train_ctx *x, const train_pair *p, const train_kept *k) {
  x->pair = p;
  x->ranks = p->role == ROLE_SINGLE ? 1 : x->size;
  if (p->role == ROLE_SINGLE) x->single_ips = k->best.images_per_s;
  if (p->role == ROLE_NONE) x->none_ips = k->best.images_per_s;
  return write_result(x, &k->best, k->slowest_ips, k->rounds, &k->so, &k->sched, k->epochs);
}

/* The options of the training loop common to every pair. */
static void loop_opts(nn_train_opts *t, train_ctx *x, const nn_lr_sched *sched,
                      const nn_sgd_opts *so, const nn_ckpt_info *want, int64_t epochs) {
  const train_args *a = x->a;
  *t = (nn_train_opts){
      .net = x->net, .train = &x->train, .test = &x->test,
      .loader = {.batch = (int)a->batch, .shuffle = 1, .drop_last = 1, .crop_pad = x->crop_pad,
                 .flip = x->augment, .seed = a->seed, .prefetch = (int)a->prefetch},
      .same_data = x->same_data,
      .sched = *sched, .sgd = *so, .epochs = epochs, .warmup_steps = a->warmup_steps,
      .eval_every = a->eval_every, .target_acc = a->target_acc,
      .stop_at_target = a->stop_at_target, .check_every = a->check_every, .save = a->save,
      .ckpt = *want, .rank = x->rank, .world = x->size, .wire = a->grad_dtype,
      .bucket_bytes = (size_t)(a->bucket_mb * 1048576.0),
      .first_bucket_bytes = (size_t)(a->first_bucket_mb * 1048576.0), .overlap = a->overlap,
      .overlap_step = a->overlap_step, .ctx = x, .on_step = on_step, .on_eval = on_eval,
      .trace_steps = a->trace ? a->trace_steps : 0, .on_trace = on_trace};
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
  int npairs, ntk, do_single, have_run;
  coll_transport_kind tks[TRAIN_MAX_PAIRS];
  coll_comm *comms[TRAIN_MAX_PAIRS], *owner;
  nn_arena_alloc galloc;
  nn_net_opts no;
  nn_ckpt_info have, want;    /* the checkpoint resumed from; the one this run writes */
  char bind_desc[256];
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
  if (make_pairs(j->pairs, a, 2, j->tks, &j->ntk, &want_mpi, &rc) < 0) return rc;
  if (coll_boot_open(&x->boot, COLL_BOOT_AUTO, want_mpi, (int)a->r.timeout_s * 1000, &e))
    return bench_error("%s", e.msg);
  x->rank = coll_boot_rank(x->boot);
  x->size = coll_boot_size(x->boot);
  j->npairs = make_pairs(j->pairs, a, x->size, j->tks, &j->ntk, &want_mpi, &rc);
  if (x->size == 1) { /* one process: it trains alone, whatever the list */
    j->npairs = 1;
    j->pairs[0] = train_single;
  }
  int ntrain = 0;
  for (int i = 0; i < j->npairs; i++) ntrain += j->pairs[i].role != ROLE_SINGLE;
  if ((a->save || a->resume) && ntrain > 1)
    return bench_usage_error(train_usage, "--save and --resume continue one training: give "
                                          "one --transport and one --algo");
  j->do_single = x->size > 1 && !a->no_single && !a->save && !a->resume;
  /* the files only rank 0 writes, checked before anything trains: a bad --trace used to fail
   * after the first pair trained, a bad --save at the first epoch's end */
  if (!bench_rank0_ok(x->boot, x->rank != 0 || (!out_file_check("--trace", a->trace) &&
                                    !out_file_check("--save", a->save))))
    return 1;
  if (x->rank == 0 && a->resume && a->seed_given && seed_given != j->have.seed)
    fprintf(stderr, "train: warning: --seed %llu ignored: checkpoint %s continues with its own seed %llu "
            "(its data order and augmentation)\n", (unsigned long long)seed_given, a->resume,
            (unsigned long long)j->have.seed);
  /* rank 0 reads it; the others stop with it, not later on a vanished peer */
  int model_ok = !(a->model_from && x->rank == 0 && bench_model_load(&x->model, a->model_from, 0, err, sizeof err));
  if (!model_ok) bench_usage_error(train_usage, "--model-from: %s", err);
  if (!bench_rank0_ok(x->boot, model_ok)) return 2;

  if (bench_bind_rank(x->boot, a->r.bind, (int)a->threads, j->bind_desc, sizeof j->bind_desc)) return 1;
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
  if (nn_data_load(&x->train, &x->test, spec, a->seed, err, sizeof err) != 0) return bench_error("%s", err);
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
  int nrc = devices_usable(a, coll_boot_local_rank(x->boot), err, sizeof err);
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
  snprintf(j->want.model, sizeof j->want.model, "%s", a->model);
  if (strlen(x->dname) >= sizeof j->want.data || strlen(a->model) >= sizeof j->want.model)
    return bench_error("--data or --model too long for a checkpoint (%zu and %zu bytes at most)",
                       sizeof j->want.data - 1, sizeof j->want.model - 1);
  memcpy(j->want.data, x->dname, strlen(x->dname) + 1);
  if (a->resume && nn_ckpt_load(a->resume, &j->have, params, mom, bufs, &j->want, err, sizeof err) != 0)
    return bench_error("%s", err);
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
  x->run.meta.train = (res_run_train){
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
      .overlap_step = ostep_names[a->overlap_step],
      .grad_dtype = coll_dtype_name(a->grad_dtype),
      .gradients = x->size > 1 ? "averaged over the ranks (all-reduce, then 1/N in SGD; 16-bit wires: 1/N first)"
                               : "one rank: no averaging",
      .batch_norm = "statistics local to each rank (PyTorch DDP)",
      .resumed_from = a->resume};
  for (int t = 0; t < j->ntk; t++)
    if (j->comms[t]) {
      res_run_add_fabric(&x->run.meta, coll_transport_name(j->tks[t]), coll_comm_fabric(j->comms[t]));
      bench_record_intra(&x->run, j->tks[t], j->comms[t]);
    }
}

/* The run directory, run.json and the tables (rank 0), and rank 0's weights for every rank,
 * kept to restart every pair from. 0, or the run's exit status after saying why. */
static int job_begin(train_job *j, int argc, char **argv) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  char err[4096];
  coll_err e = {{0}};
  if (x->rank == 0 && bench_run_begin(&x->run, a->r.out, "train", argc, argv) == 0) j->have_run = 1;
  if (!bench_rank0_ok(x->boot, x->rank != 0 || j->have_run)) return 1; /* rank 0 said why */
  if (bench_run_world(&x->run, x->boot, j->bind_desc)) return 1;
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
    if (bench_run_write(&x->run) != 0) ready = 0;
    else if (res_table_open_schema(&x->tsteps, x->run.dir, res_schema_train_steps(), err, sizeof err) ||
             res_table_open_schema(&x->teval, x->run.dir, res_schema_train_eval(), err, sizeof err) ||
             res_table_open_schema(&x->trun, x->run.dir, res_schema_train(), err, sizeof err) ||
             res_table_open_schema(&x->tbuckets, x->run.dir, res_schema_train_buckets(), err, sizeof err)) {
      bench_error("%s", err);
      ready = 0;
    }
  }
  if (!bench_rank0_ok(x->boot, ready)) return 1; /* rank 0 said why */
  if (x->rank == 0) {
    printf("train: %s (%zu params, %s) on %s %s, %lld images, %d rank(s) x batch %ld, %ld "
           "thread(s), %s%s\n",
           a->model, x->np, nn_net_backend(x->net), x->dname, x->shape, (long long)x->train.n, x->size,
           a->batch, a->threads, x->run.dir, a->resume ? " (from checkpoint)" : "");
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
      if (heartbeat(x, 0, &heard)) break;
    return heard == 1 ? 0 : -1;
  }
  x->heartbeat = 1;
  int trc = nn_train_run(r, t, err, sizeof err);
  x->heartbeat = 0;
  if (trc) bench_error("one rank alone: %s", err);
  if (x->size > 1 && heartbeat(x, trc ? 2 : 1, NULL)) trc = -1;
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
  if (j->odev[oi] != nn_net_device(x->net)) { /* the next device: its own net, the same weights */
    nn_net_destroy(x->net);
    x->net = NULL;
    j->no.device = j->odev[oi];
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
      parse_milestones(&sched, a->milestones ? a->milestones : "0.5,0.75", (long)epochs, x->spe))
    return bench_usage_error(train_usage, "bad --lr-milestones '%s'", a->milestones);
  nn_sgd_opts so = {.momentum = (float)a->momentum, .weight_decay = (float)a->wd, .nesterov = a->nesterov};
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
      return bench_error("%s %s/%s: %s", role_names[p->role], p->tname, p->aname, err);
  }
  kept_add(kept, &r, &sched, &so, epochs);
  if (round < a->rounds && x->rank == 0) { /* the rows come with the last round */
    printf("%-6s %-10s %-8s round %d of %ld: %.1f images/s\n", role_names[p->role], p->tname, p->aname,
           round, a->rounds, r.images_per_s);
    fflush(stdout);
  }
  return 0;
}

/* Every entry of the order, --rounds times: the whole order again each round, so that a slow
 * spell of the machine hits one round of a pair, not the pair; each entry's row is written with
 * its last round (its fastest round, and the slowest figure). 0, or the run's exit status. */
static int job_train(train_job *j) {
  const train_args *a = j->a;
  train_ctx *x = &j->x;
  int status = 0, written = 0; /* entries of the order whose row is out */
  job_order(j);
  if (j->norder == 0) { /* every pair skipped and no one-rank run: a run with no row is no success */
    fflush(stdout); /* the skipped pairs' lines first */
    if (x->rank == 0) bench_error("train: nothing to train: every transport/algorithm pair was skipped (above)");
    status = 1;
  }
  train_kept *kept = calloc(j->norder ? (size_t)j->norder : 1, sizeof *kept);
  if (!kept) status = bench_error("out of memory");
  for (int round = 1; round <= a->rounds && !status; round++)
    for (int oi = 0; oi < j->norder && !status; oi++) {
      if ((status = job_entry(j, oi, round, &kept[oi])) || round < a->rounds) continue;
      /* the row before the trace: a trace that cannot be written loses no row */
      int wrc = x->rank == 0 ? kept_write(x, job_pair(j, oi), &kept[oi]) : 0;
      written = oi + 1;
      if (x->rank == 0 && write_trace(x)) wrc = -1;
      if (!bench_rank0_ok(x->boot, !wrc)) status = 1; /* every rank stops alike */
    }
  /* a later round failed: the rounds done are measured, and kept (rows of the entries on the
   * net's device; another device's would be written with this one's name) */
  for (int oi = written; x->rank == 0 && a->rounds > 1 && kept && oi < j->norder; oi++) {
    const train_pair *p = job_pair(j, oi);
    if (!kept[oi].rounds || !x->net || j->odev[oi] != nn_net_device(x->net)) continue;
    printf("# %s %s/%s: the row of its %d round(s) of %ld done\n", role_names[p->role], p->tname,
           p->aname, kept[oi].rounds, a->rounds);
    if (kept_write(x, p, &kept[oi])) break;
  }
  free(kept);
  if (x->rank == 0) {
    x->run.meta.status = status ? "failed" : "ok";
    if (bench_run_write(&x->run) && !status) status = 1;
    printf("train: %s\n", x->run.dir);
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
  if (j->have_run) bench_run_end(&x->run);
  cJSON_Delete(x->trace);
  if (x->model.n) res_model_free(&x->model);
  if (status == 1) coll_boot_abort(x->boot);
  else coll_boot_close(x->boot);
}

static int train_rank_main(train_args *a, int argc, char **argv) {
  char err[4096];
  nn_data_spec spec;
  if (nn_data_parse_spec(&spec, a->data, err, sizeof err) != 0)
    return bench_usage_error(train_usage, "%s", err);
  if (a->threads == 0)
    a->threads = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
  train_job *j = calloc(1, sizeof *j);
  if (!j) return bench_error("out of memory");
  const char *same = getenv("FABENCH_TEST_SAME_DATA");
  j->a = a;
  j->x.a = a;
  j->x.same_data = same && !strcmp(same, "1");
  int status = job_open(j);
  if (!status) status = job_load(j, &spec);
  if (!status) status = job_begin(j, argc, argv);
  if (!status) status = job_train(j);
  job_close(j, status);
  free(j);
  return status;
}

int bench_cmd_train(int argc, char **argv) {
  train_args a;
  int rc = parse_args(&a, argc, argv);
  if (rc == 1) return 0; /* --help */
  if (rc) return rc;
  if (a.r.nranks > 0) {
    /* the lists checked here, once, before any rank starts */
    train_pair pairs[TRAIN_MAX_PAIRS];
    coll_transport_kind tks[TRAIN_MAX_PAIRS];
    int ntk, use_mpirun;
    if (make_pairs(pairs, &a, a.r.nranks, tks, &ntk, &use_mpirun, &rc) < 0) return rc;
    char err[256];
    if (devices_usable(&a, 0, err, sizeof err)) { /* one line here, not one a rank */
      fprintf(stderr, "fabench: %s\n", err);
      return 3;
    }
    return bench_rank_relaunch(&a.r, argc, argv, use_mpirun);
  }
  return train_rank_main(&a, argc, argv);
}
