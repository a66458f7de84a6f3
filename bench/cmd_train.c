/* fabench train: ResNet training in one process on the CPU (oneDNN): data, schedule, step log,
 * per-epoch evaluation, checkpoints, and the run directory's train.csv, train_steps.csv,
 * train_eval.csv and run.json. Figures exclude warm-up steps. */
#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "nn.h"
#include "res.h"

static const char train_usage[] =
    "usage: fabench train [options]\n"
    "  --model NAME         resnet18|34|50 (torchvision), resnet20|32|56 (CIFAR), '-wN' sets the\n"
    "                       base width (e.g. resnet20-w4) [resnet20]\n"
    "  --data SPEC          fmnist[:DIR] (default DIR " NN_DATA_FMNIST_DIR "),\n"
    "                       cifar10:DIR, synthetic[:CxHxW[:CLASSES[:N]]] [fmnist]\n"
    "  --batch N            images per step [128]\n"
    "  --epochs N           epochs to train; also the schedule's length [1]\n"
    "  --steps N            stop after global step N (throughput runs) [0: whole epochs]\n"
    "  --warmup-steps N     first steps of this run left out of the figures [10]\n"
    "  --lr X               base learning rate [0.1]\n"
    "  --momentum X         [0.9]\n"
    "  --wd X               weight decay [5e-4]\n"
    "  --nesterov           Nesterov momentum\n"
    "  --lr-schedule S      const|step|cosine [cosine]\n"
    "  --warmup-epochs X    linear learning-rate warm-up [0]\n"
    "  --lr-milestones L    step schedule: epochs where lr is multiplied by --lr-gamma [50%,75%]\n"
    "  --lr-gamma X         [0.1]\n"
    "  --ref-batch N        linear scaling rule: lr x global batch / N [off]\n"
    "  --threads N          oneDNN/OpenMP threads [all cores]\n"
    "  --seed N             weights, data order and augmentation [1]\n"
    "  --no-augment         no random crop or flip (default: crop and flip on fmnist, cifar10)\n"
    "  --crop-pad N         random-crop padding [2 fmnist, 4 cifar10, 0 synthetic]\n"
    "  --eval-every N       test-set evaluation every N epochs, 0 never [1]\n"
    "  --target-acc X       report the time to this test accuracy, and stop there\n"
    "  --no-stop-at-target  keep training after reaching --target-acc\n"
    "  --save FILE          checkpoint at every epoch end and at the end\n"
    "  --resume FILE        continue from a checkpoint (its seed and data position)\n"
    "  --log-every N        step log period [20]\n"
    "  --prefetch N         batches the loader prepares ahead [2]\n"
    "  --out DIR            run directory [results/<UTC>-train]\n";

typedef struct {
  const char *model, *data, *save, *resume, *out, *milestones;
  nn_lr_kind sched;
  long batch, epochs, steps, warmup_steps, threads, ref_batch, eval_every, log_every, prefetch;
  long crop_pad; /* -1: the data's default */
  double lr, momentum, wd, warmup_epochs, target_acc, gamma;
  int nesterov, augment, stop_at_target, epochs_given;
  uint64_t seed;
} train_args;

enum {
  O_MODEL = 256, O_DATA, O_BATCH, O_EPOCHS, O_STEPS, O_WSTEPS, O_LR, O_MOM, O_WD, O_NEST, O_SCHED,
  O_WEPOCHS, O_MILE, O_GAMMA, O_REF, O_THREADS, O_SEED, O_NOAUG, O_PAD, O_EVAL, O_TARGET,
  O_NOSTOP, O_SAVE, O_RESUME, O_LOG, O_PREFETCH, O_OUT
};

static int digits(const char **p) {
  const char *s = *p;
  while (isdigit((unsigned char)**p)) (*p)++;
  return *p > s;
}

static int model_spelled_ok(const char *m) {
  if (strncmp(m, "resnet", 6) != 0) return 0;
  const char *p = m + 6;
  if (!digits(&p)) return 0;
  if (*p == 0) return 1;
  if (strncmp(p, "-w", 2) != 0) return 0;
  p += 2;
  return digits(&p) && *p == 0;
}

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
      {"out", 1, 0, O_OUT},             {"help", 0, 0, 'h'},
      {0, 0, 0, 0}};
  *a = (train_args){.model = "resnet20", .data = "fmnist", .sched = NN_LR_COSINE, .batch = 128,
                    .epochs = 1, .warmup_steps = 10, .eval_every = 1, .log_every = 20,
                    .prefetch = 2, .crop_pad = -1, .lr = 0.1, .momentum = 0.9, .wd = 5e-4,
                    .gamma = 0.1, .augment = 1, .stop_at_target = 1, .seed = 1};
  optind = 1;
  opterr = 0;
  int c, li = 0;
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
  while ((c = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
    switch (c) {
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
    case O_OUT: a->out = optarg; break;
    case 'h': fputs(train_usage, stdout); return 1;
    case ':': BAD("option %s needs a value", argv[optind - 1]);
    default: BAD("unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind < argc) BAD("unexpected argument '%s'", argv[optind]);
  if (a->milestones) {
    char *items[NN_LR_MAX_MILESTONES], *store;
    int n = bench_split_list(a->milestones, items, NN_LR_MAX_MILESTONES, &store), ok = n > 0;
    for (int i = 0; ok && i < n; i++) ok = bench_parse_double(items[i], 0, 1e9, &d) == 0;
    free(store);
    if (!ok) BAD("bad --lr-milestones '%s' (epochs, comma separated, at most %d)", a->milestones,
                 NN_LR_MAX_MILESTONES);
  }
  /* the model's spelling here; whether that depth exists is the network builder's to say */
  if (!model_spelled_ok(a->model))
    BAD("bad --model '%s' (resnetN or resnetN-wW, e.g. resnet20, resnet18-w4)", a->model);
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

typedef struct {
  double loss, acc, secs;
  int64_t images;
} eval_result;

static int evaluate(eval_result *r, nn_net *net, const nn_dataset *test, int batch, int prefetch,
                    char *err, size_t errcap) {
  double t0 = res_now();
  nn_loader_opts o = {.batch = batch, .world = 1, .epochs = 1, .prefetch = prefetch};
  nn_loader *l;
  if (nn_loader_create(&l, test, &o, err, errcap) != 0) return -1;
  double loss = 0;
  int64_t correct = 0, seen = 0;
  for (;;) {
    nn_batch b;
    nn_loader_next(l, &b);
    if (b.n == 0) break;
    int c = 0;
    if (nn_net_eval(net, b.x, b.labels, b.n, &loss, &c, err, errcap) != 0) {
      nn_loader_destroy(l);
      return -1;
    }
    correct += c;
    seen += b.n;
  }
  nn_loader_destroy(l);
  r->images = seen;
  r->loss = seen ? loss / (double)seen : 0;
  r->acc = seen ? (double)correct / (double)seen : 0;
  r->secs = res_now() - t0;
  return 0;
}

static double mean_of(const double *x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += x[i];
  return n ? s / (double)n : 0;
}

static const res_col step_cols[] = {
    {"run_id", RES_STR},     {"step", RES_INT},       {"epoch", RES_INT},
    {"step_in_epoch", RES_INT}, {"images", RES_INT},  {"loss", RES_F64},
    {"batch_acc", RES_F64},  {"lr", RES_F64},         {"step_ms", RES_F64},
    {"data_ms", RES_F64},    {"load_ms", RES_F64},    {"fwd_ms", RES_F64},
    {"bwd_ms", RES_F64},     {"opt_ms", RES_F64},     {"images_per_s", RES_F64},
    {"warmup", RES_INT},     {"elapsed_s", RES_F64}};
static const res_col eval_cols[] = {
    {"run_id", RES_STR},   {"epoch", RES_INT},     {"step", RES_INT},
    {"test_loss", RES_F64}, {"test_acc", RES_F64}, {"test_images", RES_INT},
    {"eval_s", RES_F64},   {"elapsed_s", RES_F64}};
static const res_col run_cols[] = {
    {"run_id", RES_STR},         {"schema", RES_INT},          {"host", RES_STR},
    {"topo_hash", RES_STR},      {"model", RES_STR},           {"params", RES_INT},
    {"data", RES_STR},           {"input", RES_STR},           {"classes", RES_INT},
    {"ranks", RES_INT},          {"batch", RES_INT},           {"global_batch", RES_INT},
    {"threads", RES_INT},        {"epochs", RES_INT},          {"steps", RES_INT},
    {"measured_steps", RES_INT}, {"warmup_steps", RES_INT},    {"lr", RES_F64},
    {"lr_schedule", RES_STR},    {"warmup_epochs", RES_F64},   {"momentum", RES_F64},
    {"wd", RES_F64},             {"nesterov", RES_INT},        {"augment", RES_STR},
    {"seed", RES_INT},           {"images_per_s", RES_F64},    {"compute_images_per_s", RES_F64},
    {"step_ms", RES_F64},        {"step_ms_p50", RES_F64},     {"step_ms_p90", RES_F64},
    {"data_ms", RES_F64},        {"load_ms", RES_F64},         {"fwd_ms", RES_F64},
    {"bwd_ms", RES_F64},         {"opt_ms", RES_F64},          {"final_loss", RES_F64},
    {"test_loss", RES_F64},      {"test_acc", RES_F64},        {"target_acc", RES_F64},
    {"time_to_target_s", RES_F64}, {"train_time_s", RES_F64},  {"start_step", RES_INT},
    {"end_step", RES_INT},       {"backend", RES_STR},         {"status", RES_STR}};

static const char *sched_name(nn_lr_kind k) {
  return k == NN_LR_CONST ? "const" : k == NN_LR_STEP ? "step" : "cosine";
}

int bench_cmd_train(int argc, char **argv) {
  train_args a;
  int rc = parse_args(&a, argc, argv);
  if (rc == 1) return 0; /* --help */
  if (rc) return rc;
  char err[4096];
  nn_data_spec spec;
  if (nn_data_parse_spec(&spec, a.data, err, sizeof err) != 0)
    return bench_usage_error(train_usage, "%s", err);
  if (a.threads == 0) a.threads = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;

  /* a resumed run continues the checkpoint's data order, so its seed wins */
  nn_ckpt_info have = {0};
  if (a.resume) {
    if (nn_ckpt_read_info(a.resume, &have, err, sizeof err) != 0) return bench_error("%s", err);
    a.seed = have.seed;
  }

  nn_dataset train = {0}, test = {0};
  nn_net *net = NULL;
  nn_loader *loader = NULL;
  res_table *tsteps = NULL, *teval = NULL, *trun = NULL;
  double *st = NULL, *dt = NULL, *ft = NULL, *bt = NULL, *ot = NULL, *lt = NULL;
  bench_run run = {0};
  int status = 1, have_run = 0;

  if (nn_data_load(&train, &test, &spec, a.seed, err, sizeof err) != 0) {
    bench_error("%s", err);
    goto out;
  }
  char dname[2200];
  data_name(dname, sizeof dname, &spec, &train);
  int augment = a.augment && spec.kind != NN_DATA_SYNTHETIC;
  int crop_pad = a.crop_pad >= 0 ? (int)a.crop_pad
                 : !augment ? 0 : spec.kind == NN_DATA_CIFAR10 ? 4 : 2;
  if (!a.augment) crop_pad = 0;

  nn_net_opts no = {.model = a.model, .in_c = train.c, .in_h = train.h, .in_w = train.w,
                    .classes = train.classes, .batch = (int)a.batch, .threads = (int)a.threads,
                    .seed = a.seed};
  if (nn_net_create(&net, &no, err, sizeof err) != 0) {
    bench_error("%s", err);
    goto out;
  }
  size_t np, nm, nb;
  float *params = nn_net_params(net, &np);
  float *mom = nn_net_momentum(net, &nm);
  float *bufs = nn_net_buffers(net, &nb);
  nn_ckpt_info want = {.in_c = train.c, .in_h = train.h, .in_w = train.w,
                       .classes = train.classes, .batch = (int)a.batch, .rank = 0, .world = 1,
                       .seed = a.seed, .n_params = np, .n_momentum = nm, .n_buffers = nb};
  snprintf(want.model, sizeof want.model, "%s", a.model);
  if (strlen(dname) >= sizeof want.data || strlen(a.model) >= sizeof want.model) {
    bench_error("--data or --model too long for a checkpoint (%zu and %zu bytes at most)",
                sizeof want.data - 1, sizeof want.model - 1);
    goto out;
  }
  memcpy(want.data, dname, strlen(dname) + 1);
  if (a.resume && nn_ckpt_load(a.resume, &have, params, mom, bufs, &want, err, sizeof err) != 0) {
    bench_error("%s", err);
    goto out;
  }
  int64_t epoch0 = a.resume ? have.epoch : 0, step0 = a.resume ? have.step : 0;
  int64_t gstep = a.resume ? have.global_step : 0, start_step = gstep;
  double elapsed0 = a.resume ? have.elapsed_s : 0;

  nn_loader_opts lo = {.batch = (int)a.batch, .shuffle = 1, .drop_last = 1, .crop_pad = crop_pad,
                       .flip = augment, .rank = 0, .world = 1, .seed = a.seed, .epoch = epoch0,
                       .step = step0, .prefetch = (int)a.prefetch};
  int64_t spe = nn_data_steps_per_epoch(train.n, 1, (int)a.batch, 1);
  if (spe < 1) {
    bench_error("%s: %lld training images is less than one batch of %ld", dname,
                (long long)train.n, a.batch);
    goto out;
  }
  /* --steps alone runs as many epochs as it needs; the schedule spans --epochs, or --steps */
  long epochs = a.epochs;
  if (a.steps && !a.epochs_given) epochs = (long)((a.steps + spe - 1) / spe);
  int64_t horizon = a.epochs_given || !a.steps ? (int64_t)epochs * spe : a.steps;
  int64_t stop = a.steps ? a.steps : (int64_t)epochs * spe;
  if (stop > (int64_t)epochs * spe) stop = (int64_t)epochs * spe;
  if (gstep >= stop) {
    bench_error("checkpoint %s is at step %lld; nothing left to train (stop at %lld)", a.resume,
                (long long)gstep, (long long)stop);
    goto out;
  }
  lo.epochs = epochs;
  if (nn_loader_create(&loader, &train, &lo, err, sizeof err) != 0) {
    bench_error("%s", err);
    goto out;
  }

  nn_lr_sched sched = {.kind = a.sched, .gamma = a.gamma, .total_steps = horizon,
                       .base = nn_lr_scaled(a.lr, (int)a.batch, (int)a.ref_batch),
                       .warmup_steps = (int64_t)llround(a.warmup_epochs * (double)spe)};
  if (a.sched == NN_LR_STEP &&
      parse_milestones(&sched, a.milestones ? a.milestones : "0.5,0.75", epochs, spe) != 0) {
    status = bench_usage_error(train_usage, "bad --lr-milestones '%s' (epochs, comma separated)",
                               a.milestones);
    goto out;
  }

  if (bench_run_begin(&run, a.out, "train", argc, argv) != 0) goto out;
  have_run = 1;
  cJSON *tj = cJSON_AddObjectToObject(run.meta, "train");
  cJSON_AddStringToObject(tj, "model", a.model);
  cJSON_AddNumberToObject(tj, "params", (double)np);
  cJSON_AddNumberToObject(tj, "bn_buffers", (double)nb);
  cJSON_AddStringToObject(tj, "backend", nn_backend_version());
  cJSON_AddStringToObject(tj, "data", dname);
  cJSON_AddNumberToObject(tj, "train_images", (double)train.n);
  cJSON_AddNumberToObject(tj, "test_images", (double)test.n);
  char shape[64];
  snprintf(shape, sizeof shape, "%dx%dx%d", train.c, train.h, train.w);
  cJSON_AddStringToObject(tj, "input", shape);
  cJSON_AddNumberToObject(tj, "classes", train.classes);
  cJSON_AddNumberToObject(tj, "ranks", 1);
  cJSON_AddNumberToObject(tj, "batch", (double)a.batch);
  cJSON_AddNumberToObject(tj, "global_batch", (double)a.batch);
  cJSON_AddNumberToObject(tj, "threads", (double)a.threads);
  cJSON_AddNumberToObject(tj, "epochs", (double)epochs);
  cJSON_AddNumberToObject(tj, "steps_per_epoch", (double)spe);
  cJSON_AddNumberToObject(tj, "stop_step", (double)stop);
  cJSON_AddNumberToObject(tj, "warmup_steps_excluded", (double)a.warmup_steps);
  cJSON_AddNumberToObject(tj, "lr", a.lr);
  cJSON_AddNumberToObject(tj, "lr_scaled", sched.base);
  cJSON_AddNumberToObject(tj, "ref_batch", (double)a.ref_batch);
  cJSON_AddStringToObject(tj, "lr_schedule", sched_name(a.sched));
  cJSON_AddNumberToObject(tj, "lr_warmup_steps", (double)sched.warmup_steps);
  cJSON_AddNumberToObject(tj, "momentum", a.momentum);
  cJSON_AddNumberToObject(tj, "weight_decay", a.wd);
  cJSON_AddBoolToObject(tj, "nesterov", a.nesterov);
  cJSON_AddNumberToObject(tj, "seed", (double)a.seed);
  cJSON_AddNumberToObject(tj, "crop_pad", crop_pad);
  cJSON_AddBoolToObject(tj, "flip", augment);
  cJSON_AddStringToObject(tj, "gradients", "one rank: no averaging");
  if (a.resume) {
    cJSON_AddStringToObject(tj, "resumed_from", a.resume);
    cJSON_AddNumberToObject(tj, "resumed_at_step", (double)gstep);
  }
  if (bench_run_write(&run) != 0) goto out;

  if (res_table_open(&tsteps, run.dir, "train_steps", step_cols,
                     sizeof step_cols / sizeof *step_cols, err, sizeof err) != 0 ||
      res_table_open(&teval, run.dir, "train_eval", eval_cols,
                     sizeof eval_cols / sizeof *eval_cols, err, sizeof err) != 0 ||
      res_table_open(&trun, run.dir, "train", run_cols, sizeof run_cols / sizeof *run_cols, err,
                     sizeof err) != 0) {
    bench_error("%s", err);
    goto out;
  }

  printf("train: %s (%zu params, %s) on %s %s, %lld images, batch %ld, %ld thread(s), %s\n",
         a.model, np, nn_backend_version(), dname, shape, (long long)train.n, a.batch, a.threads,
         run.dir);
  printf("train: %lld steps/epoch, steps %lld..%lld, lr %g (%s, warm-up %lld steps), momentum %g, "
         "wd %g%s, augment %s, seed %llu%s\n",
         (long long)spe, (long long)gstep, (long long)stop, sched.base, sched_name(a.sched),
         (long long)sched.warmup_steps, a.momentum, a.wd, a.nesterov ? " nesterov" : "",
         crop_pad || augment ? "crop+flip" : "none", (unsigned long long)a.seed,
         a.resume ? " (from checkpoint)" : "");
  fflush(stdout);

  size_t cap = (size_t)(stop - gstep);
  st = malloc(cap * sizeof *st);
  dt = malloc(cap * sizeof *dt);
  ft = malloc(cap * sizeof *ft);
  bt = malloc(cap * sizeof *bt);
  ot = malloc(cap * sizeof *ot);
  lt = malloc(cap * sizeof *lt);
  if (!st || !dt || !ft || !bt || !ot || !lt) {
    bench_error("out of memory for %zu step records", cap);
    goto out;
  }
  size_t nmeas = 0;
  int64_t meas_images = 0, run_steps = 0;
  double final_loss = NAN, test_loss = NAN, test_acc = NAN, to_target = -1;
  int64_t last_eval_step = -1;
  const char *why = "done";
  nn_sgd_opts so = {.momentum = (float)a.momentum, .weight_decay = (float)a.wd,
                    .nesterov = a.nesterov};
  double t_start = res_now();
  int failed = 0;

  while (gstep < stop) {
    double t0 = res_now();
    nn_batch b;
    nn_loader_next(loader, &b);
    double t1 = res_now();
    if (b.n == 0) break;
    float loss = 0;
    int correct = 0;
    nn_step_times tm = {0, 0};
    if (nn_net_train_step(net, b.x, b.labels, b.n, &loss, &correct, &tm, err, sizeof err) != 0) {
      bench_error("step %lld: %s", (long long)gstep, err);
      failed = 1;
      break;
    }
    double t2 = res_now();
    so.lr = (float)nn_lr_at(&sched, gstep);
    nn_sgd_step(net, &so);
    double t3 = res_now();
    double step_s = t3 - t0;
    int warm = run_steps < a.warmup_steps;
    if (!warm) {
      st[nmeas] = step_s;
      dt[nmeas] = t1 - t0;
      lt[nmeas] = b.load_s;
      ft[nmeas] = tm.fwd_s;
      bt[nmeas] = tm.bwd_s;
      ot[nmeas] = t3 - t2;
      nmeas++;
      meas_images += b.n;
    }
    run_steps++;
    gstep++;
    final_loss = loss;
    double elapsed = elapsed0 + (t3 - t_start);
    res_row_str(tsteps, run.run_id);
    res_row_int(tsteps, gstep);
    res_row_int(tsteps, b.epoch);
    res_row_int(tsteps, b.step);
    res_row_int(tsteps, b.n);
    res_row_f64(tsteps, loss);
    res_row_f64(tsteps, (double)correct / b.n);
    res_row_f64(tsteps, so.lr);
    res_row_f64(tsteps, 1e3 * step_s);
    res_row_f64(tsteps, 1e3 * (t1 - t0));
    res_row_f64(tsteps, 1e3 * b.load_s);
    res_row_f64(tsteps, 1e3 * tm.fwd_s);
    res_row_f64(tsteps, 1e3 * tm.bwd_s);
    res_row_f64(tsteps, 1e3 * (t3 - t2));
    res_row_f64(tsteps, b.n / step_s);
    res_row_int(tsteps, warm);
    res_row_f64(tsteps, elapsed);
    if (res_row_end(tsteps, err, sizeof err) != 0) {
      bench_error("%s", err);
      failed = 1;
      break;
    }
    if (!isfinite(loss)) {
      bench_error("step %lld: the loss is %g; training diverged (lower --lr?)", (long long)gstep,
                  (double)loss);
      failed = 1;
      break;
    }
    int epoch_end = b.step + 1 == spe;
    if (run_steps == 1 || gstep % a.log_every == 0 || gstep == stop || epoch_end) {
      printf("step %7lld  epoch %lld  %5lld/%lld  loss %.4f  acc %.3f  lr %.4g  %.1f img/s  data %.2f ms\n",
             (long long)gstep, (long long)b.epoch + 1, (long long)b.step + 1, (long long)spe,
             loss, (double)correct / b.n, so.lr, b.n / step_s, 1e3 * (t1 - t0));
      fflush(stdout);
    }
    if (!epoch_end) continue;
    int64_t done_epochs = b.epoch + 1;
    if (a.eval_every > 0 && (done_epochs % a.eval_every == 0 || done_epochs == epochs)) {
      eval_result er;
      if (evaluate(&er, net, &test, (int)a.batch, (int)a.prefetch, err, sizeof err) != 0) {
        bench_error("evaluation: %s", err);
        failed = 1;
        break;
      }
      test_loss = er.loss;
      test_acc = er.acc;
      last_eval_step = gstep;
      double el = elapsed0 + (res_now() - t_start);
      printf("epoch %lld/%ld  test loss %.4f  test acc %.4f  (%lld images, %.1f s)  elapsed %.1f s\n",
             (long long)done_epochs, epochs, er.loss, er.acc, (long long)er.images, er.secs, el);
      fflush(stdout);
      res_row_str(teval, run.run_id);
      res_row_int(teval, done_epochs);
      res_row_int(teval, gstep);
      res_row_f64(teval, er.loss);
      res_row_f64(teval, er.acc);
      res_row_int(teval, er.images);
      res_row_f64(teval, er.secs);
      res_row_f64(teval, el);
      if (res_row_end(teval, err, sizeof err) != 0) bench_error("%s", err);
      if (a.target_acc > 0 && to_target < 0 && er.acc >= a.target_acc) {
        to_target = el;
        printf("target accuracy %.4f reached after %.1f s (epoch %lld)\n", a.target_acc, el,
               (long long)done_epochs);
        if (a.stop_at_target) why = "target reached";
      }
    }
    if (a.save) {
      nn_ckpt_info ci = want;
      ci.epoch = done_epochs;
      ci.step = 0;
      ci.global_step = gstep;
      ci.elapsed_s = elapsed0 + (res_now() - t_start);
      if (nn_ckpt_save(a.save, &ci, params, mom, bufs, err, sizeof err) != 0) {
        bench_error("%s", err);
        failed = 1;
        break;
      }
    }
    if (!strcmp(why, "target reached")) break;
  }
  double train_s = res_now() - t_start;

  /* a run cut by --steps mid-epoch still reports where it stands */
  if (!failed && a.eval_every > 0 && last_eval_step != gstep && strcmp(why, "target reached")) {
    eval_result er;
    if (evaluate(&er, net, &test, (int)a.batch, (int)a.prefetch, err, sizeof err) != 0) {
      bench_error("evaluation: %s", err);
      failed = 1;
    } else {
      test_loss = er.loss;
      test_acc = er.acc;
      printf("step %lld  test loss %.4f  test acc %.4f  (%lld images, %.1f s)\n", (long long)gstep,
             er.loss, er.acc, (long long)er.images, er.secs);
      res_row_str(teval, run.run_id);
      res_row_int(teval, gstep / spe);
      res_row_int(teval, gstep);
      res_row_f64(teval, er.loss);
      res_row_f64(teval, er.acc);
      res_row_int(teval, er.images);
      res_row_f64(teval, er.secs);
      res_row_f64(teval, elapsed0 + (res_now() - t_start));
      if (res_row_end(teval, err, sizeof err) != 0) bench_error("%s", err);
      if (a.target_acc > 0 && to_target < 0 && er.acc >= a.target_acc)
        to_target = elapsed0 + (res_now() - t_start);
    }
  }
  if (!failed && a.save && (gstep % spe != 0)) {
    nn_ckpt_info ci = want;
    ci.epoch = gstep / spe;
    ci.step = gstep % spe;
    ci.global_step = gstep;
    ci.elapsed_s = elapsed0 + train_s;
    if (nn_ckpt_save(a.save, &ci, params, mom, bufs, err, sizeof err) != 0) {
      bench_error("%s", err);
      failed = 1;
    }
  }
  if (failed) why = "failed";
  else if (a.target_acc > 0 && to_target < 0) why = "target not reached";

  double sum_st = 0, sum_comp = 0;
  for (size_t i = 0; i < nmeas; i++) {
    sum_st += st[i];
    sum_comp += ft[i] + bt[i] + ot[i];
  }
  double ips = sum_st > 0 ? (double)meas_images / sum_st : 0;
  double cips = sum_comp > 0 ? (double)meas_images / sum_comp : 0;
  double mean_step = mean_of(st, nmeas), mdata = mean_of(dt, nmeas), mload = mean_of(lt, nmeas);
  double mf = mean_of(ft, nmeas), mb = mean_of(bt, nmeas), mo = mean_of(ot, nmeas);
  res_stats ss;
  res_stats_compute(&ss, st, nmeas);

  res_row_str(trun, run.run_id);
  res_row_int(trun, RES_SCHEMA_VERSION);
  res_row_str(trun, run.host);
  res_row_str(trun, run.topo_hash);
  res_row_str(trun, a.model);
  res_row_int(trun, (int64_t)np);
  res_row_str(trun, dname);
  res_row_str(trun, shape);
  res_row_int(trun, train.classes);
  res_row_int(trun, 1);
  res_row_int(trun, a.batch);
  res_row_int(trun, a.batch);
  res_row_int(trun, a.threads);
  res_row_int(trun, epochs);
  res_row_int(trun, run_steps);
  res_row_int(trun, (int64_t)nmeas);
  res_row_int(trun, run_steps - (int64_t)nmeas);
  res_row_f64(trun, sched.base);
  res_row_str(trun, sched_name(a.sched));
  res_row_f64(trun, a.warmup_epochs);
  res_row_f64(trun, a.momentum);
  res_row_f64(trun, a.wd);
  res_row_int(trun, a.nesterov);
  res_row_str(trun, crop_pad || augment ? "crop+flip" : "none");
  res_row_int(trun, (int64_t)a.seed);
  res_row_f64(trun, ips);
  res_row_f64(trun, cips);
  res_row_f64(trun, 1e3 * mean_step);
  res_row_f64(trun, 1e3 * ss.p50);
  res_row_f64(trun, 1e3 * ss.p90);
  res_row_f64(trun, 1e3 * mdata);
  res_row_f64(trun, 1e3 * mload);
  res_row_f64(trun, 1e3 * mf);
  res_row_f64(trun, 1e3 * mb);
  res_row_f64(trun, 1e3 * mo);
  res_row_f64(trun, final_loss);
  res_row_f64(trun, test_loss);
  res_row_f64(trun, test_acc);
  res_row_f64(trun, a.target_acc);
  res_row_f64(trun, to_target);
  res_row_f64(trun, elapsed0 + train_s);
  res_row_int(trun, start_step);
  res_row_int(trun, gstep);
  res_row_str(trun, nn_backend_version());
  res_row_str(trun, why);
  if (res_row_end(trun, err, sizeof err) != 0) {
    bench_error("%s", err);
    failed = 1;
  }

  cJSON *rj = cJSON_AddObjectToObject(run.meta, "result");
  cJSON_AddStringToObject(rj, "status", why);
  cJSON_AddNumberToObject(rj, "steps", (double)run_steps);
  cJSON_AddNumberToObject(rj, "end_step", (double)gstep);
  cJSON_AddNumberToObject(rj, "images_per_s", ips);
  cJSON_AddNumberToObject(rj, "step_ms_p50", 1e3 * ss.p50);
  if (isfinite(test_acc)) cJSON_AddNumberToObject(rj, "test_acc", test_acc);
  if (to_target >= 0) cJSON_AddNumberToObject(rj, "time_to_target_s", to_target);
  cJSON_AddNumberToObject(rj, "train_time_s", elapsed0 + train_s);
  if (bench_run_write(&run) != 0) failed = 1;

  printf("train: %lld steps, %.1f images/s (compute only %.1f) over %zu measured steps, step %.2f ms "
         "(data %.2f, fwd %.2f, bwd %.2f, opt %.2f)\n",
         (long long)run_steps, ips, cips, nmeas, 1e3 * mean_step, 1e3 * mdata, 1e3 * mf, 1e3 * mb,
         1e3 * mo);
  if (isfinite(test_acc))
    printf("train: final loss %.4f, test loss %.4f, test accuracy %.4f", final_loss, test_loss,
           test_acc);
  else
    printf("train: final loss %.4f", final_loss);
  if (a.target_acc > 0) {
    if (to_target >= 0) printf(", time to %.4f: %.1f s", a.target_acc, to_target);
    else printf(", target %.4f not reached", a.target_acc);
  }
  printf("\ntrain: %s\n", run.dir);
  status = failed ? 1 : 0;

out:
  free(st);
  free(dt);
  free(ft);
  free(bt);
  free(ot);
  free(lt);
  res_table_close(tsteps);
  res_table_close(teval);
  res_table_close(trun);
  nn_loader_destroy(loader);
  nn_net_destroy(net);
  nn_data_free(&train);
  nn_data_free(&test);
  if (have_run) bench_run_end(&run);
  return status;
}
