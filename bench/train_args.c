/* fabench train: its flags (usage, parsing and the checks of what they name). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "launch.h" /* launch_emu_parse_rate: --link */
#include "train_internal.h"
#include "util.h"

const char train_usage[] =
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
    "  --dp replicated|sharded  replicated: every rank all-reduces the gradients and updates\n"
    "                       all parameters (DDP); sharded: ZeRO stage 2, each bucket\n"
    "                       reduce-scattered, each rank updating its block and keeping its\n"
    "                       block of the optimizer state, the parameters then all-gathered\n"
    "                       (CPU, f32, no --overlap-step) [replicated]\n"
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
    BENCH_TELEMETRY_USAGE("    ")
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
    "  --link RATE          with --model-from: price the rows on a link of RATE (1gbit,\n"
    "                       500mbit) of their transport instead: a held-out prediction\n"
    "                       from the model's nearest emulated rate scaled to it\n"
    "  --model NAME         resnet18|34|50 (torchvision), resnet20|32|56 (CIFAR), '-wN' sets the\n"
    "                       base width (e.g. resnet20-w4); mlp:IN,W,...,OUT fully connected\n"
    "                       (IN = C*H*W, OUT = classes, ReLU between) or fc6 (IN,1024,1024,512,\n"
    "                       512,256,classes), CPU only [resnet20]\n"
    "  --data SPEC          fmnist[:DIR] (default DIR " NN_DATA_FMNIST_DIR "),\n"
    "                       cifar10:DIR, synthetic[:CxHxW[:CLASSES[:N]]] [fmnist]\n"
    "  --batch LIST         images per step and rank [128]\n"
    "  --epochs LIST        epochs to train; also the schedule's length [1]\n"
    "  --steps N            stop after global step N (throughput runs) [0: whole epochs]\n"
    "  --warmup-steps N     first steps of this run left out of the figures [10]\n"
    "  --lr LIST            base learning rate [0.1]\n"
    "  --optimizer LIST     sgd|adam|adamw, as torch.optim has them (adam and adamw: CPU) [sgd]\n"
    "  --momentum X         SGD's momentum [0.9]\n"
    "  --wd X, --weight-decay X  weight decay (adamw: decoupled, p *= 1 - lr wd) [5e-4]\n"
    "  --nesterov           Nesterov momentum\n"
    "  --beta1 X, --beta2 X, --eps X  Adam's [0.9, 0.999, 1e-8]\n"
    "  --lr-schedule S      const|step|cosine [cosine]\n"
    "  --warmup-epochs X    linear learning-rate warm-up [0]\n"
    "  --lr-milestones L    step schedule: epochs where lr is multiplied by --lr-gamma, e.g.\n"
    "                       30,60 or fractions of --epochs 0.5,0.75 [0.5,0.75]\n"
    "  --lr-gamma X         [0.1]\n"
    "  --ref-batch N        linear scaling rule: lr x global batch (ranks x batch) / N [off]\n"
    "  --threads LIST       oneDNN/OpenMP threads per rank [the cores of this rank's CPU\n"
    "                       set divided among the ranks on this machine with the same set]\n"
    "  --seed N             weights, data order and augmentation [1]\n"
    "  --no-augment         no random crop or flip (default: crop and flip on fmnist, cifar10)\n"
    "  --crop-pad N         random-crop padding [2 fmnist, 4 cifar10, 0 synthetic]\n"
    "  --eval-every N       test-set evaluation every N epochs, 0 never [1]\n"
    "  --target-acc X       report the time to this test accuracy, and stop there\n"
    "  --no-stop-at-target  keep training after reaching --target-acc\n"
    "  --save FILE          checkpoint at every epoch end and at the end (no one-rank run)\n"
    "  --resume FILE        continue from a checkpoint (its seed and data position; no one-rank\n"
    "                       run)\n"
    "  --resume DIR         continue an interrupted run (a sweep) in its run directory, with\n"
    "                       the same flags: rows already in its train.csv are not trained\n"
    "                       again, new rows are added to its files\n"
    "  --log-every N        step log period [20]\n"
    "  --prefetch N         batches the loader prepares ahead [2]\n"
    "  --loader-workers LIST  loader threads; 0: the training thread makes each batch [1]\n"
    "  --cold-cache         drop the dataset's files from the page cache before reading them\n"
    "                       (posix_fadvise DONTNEED; rows say cache cold, else warm)\n"
    "  --out DIR            run directory [results/<UTC>-train]\n"
    "  --mode M             data-parallel (every pair, and one rank alone), conventional (one\n"
    "                       rank) or partitioned: a fully connected --model cut into --parts\n"
    "                       trained on their own ranks with synthetic intermediate labels, with\n"
    "                       the conventional and data-parallel rows of the same network in\n"
    "                       train_partition.csv (docs/training.md) [data-parallel]\n"
    "  --parts N            partitioned: parts, one a rank (-n N); 2 only [2]\n"
    "  --recovery-epochs N  partitioned: epochs fine-tuning the joined network after the parts\n"
    "                       [0]\n"
    "  --no-compare         partitioned: no conventional and data-parallel rows\n"
    "Sweeps: --batch, --lr, --optimizer, --epochs, --threads and --loader-workers take comma\n"
    "lists; the run trains their product (at most 256 settings), a row each in train.csv and\n"
    "the accuracy after each epoch in train_epochs.csv. Order: --batch changes slowest, then\n"
    "--lr, --optimizer, --epochs, --threads, and --loader-workers fastest; within a setting,\n"
    "each --device, and on it the one-rank run, none and the pairs. See docs/training.md.\n";

const char *const train_mode_names[] = {"data-parallel", "conventional", "partitioned"};

const char *const train_ostep_names[] = {"off", "on", "auto"};
_Static_assert(NN_OSTEP_OFF == 0 && NN_OSTEP_ON == 1 && NN_OSTEP_AUTO == 2, "train_ostep_names follows NN_OSTEP_*");

int train_devices_usable(const train_args *a, int local_rank, char *err, size_t errcap) {
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
  O_FIRSTB, O_NOOVERLAP, O_OSTEP, O_DP, O_GDTYPE, O_CHECK, O_CHUNK, O_TRACE, O_TRACESTEPS, O_MODELFROM, O_LINK,
  O_DEVICE, O_PREC, O_SEARCH, O_GPU, O_ROUNDS, O_MODE, O_PARTS, O_RECOVERY, O_NOCOMPARE, O_OPTIM, O_BETA1,
  O_BETA2, O_EPS, O_WORKERS, O_COLD
};

/* Every flag's default. */
static void train_args_defaults(train_args *a) {
  *a = (train_args){.model = "resnet20", .data = "fmnist", .sched = NN_LR_COSINE, .batch = 128,
                    .epochs = 1, .warmup_steps = 10, .eval_every = 1, .log_every = 20,
                    .prefetch = 2, .crop_pad = -1, .lr = 0.1, .momentum = 0.9, .wd = 5e-4,
                    .gamma = 0.1, .augment = 1, .stop_at_target = 1, .seed = 1,
                    .algos = "ring", .overlap = 1, .overlap_step = NN_OSTEP_AUTO,
                    .grad_dtype = COLL_F32, .bucket_mb = 25, .first_bucket_mb = 1, .trace_steps = 5,
                    .devices = {NN_DEV_CPU}, .ndevices = 1, .gpu = -1, .rounds = 1, .parts = 2,
                    .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .loader_workers = 1};
  bench_rank_opts_init(&a->r);
}

/* The flags whose value is a word or a list to parse (--overlap-step, --grad-dtype, --chunk,
 * --device, --precision, --lr-schedule, --seed), else the flags every command that starts ranks
 * shares. 0, or the exit status of a usage error. */
static int train_flag_word(train_args *a, int c, char **argv) {
  switch (c) {
  case O_OSTEP: {
    int k = 0;
    while (k < 3 && strcmp(optarg, train_ostep_names[k])) k++;
    if (k == 3) return bench_usage_error(train_usage, "bad --overlap-step '%s' (on, off or auto)", optarg);
    a->overlap_step = k;
    break;
  }
  case O_DP:
    if (strcmp(optarg, "replicated") && strcmp(optarg, "sharded"))
      return bench_usage_error(train_usage, "bad --dp '%s' (replicated or sharded)", optarg);
    a->dp_sharded = !strcmp(optarg, "sharded");
    break;
  case O_GDTYPE:
    if (coll_dtype_parse(optarg, &a->grad_dtype) ||
        (a->grad_dtype != COLL_F32 && a->grad_dtype != COLL_BF16 && a->grad_dtype != COLL_F16))
      return bench_usage_error(train_usage, "bad --grad-dtype '%s' (f32, bf16 or f16)", optarg);
    break;
  case O_CHUNK:
    if (bench_parse_size(optarg, &a->chunk) || a->chunk < 64)
      return bench_usage_error(train_usage, "bad --chunk '%s' (a size >= 64)", optarg);
    break;
  case O_DEVICE: {
    char *items[3], *store = NULL;
    int n = bench_split_list(optarg, items, 3, &store), ok = n >= 1 && n <= 2;
    for (int i = 0; ok && i < n; i++) {
      ok = !strcmp(items[i], "cpu") || !strcmp(items[i], "cuda");
      a->devices[i] = !strcmp(items[i], "cuda") ? NN_DEV_CUDA : NN_DEV_CPU;
      ok = ok && (i == 0 || a->devices[1] != a->devices[0]);
    }
    free(store);
    if (!ok) return bench_usage_error(train_usage, "bad --device '%s' (cpu, cuda or cpu,cuda)", optarg);
    a->ndevices = n;
    break;
  }
  case O_PREC:
    if (!strcmp(optarg, "fp32")) a->precision = NN_PREC_FP32;
    else if (!strcmp(optarg, "tf32")) a->precision = NN_PREC_TF32;
    else if (!strcmp(optarg, "bf16")) a->precision = NN_PREC_BF16;
    else return bench_usage_error(train_usage, "bad --precision '%s' (fp32, tf32 or bf16)", optarg);
    break;
  case O_SCHED:
    if (!strcmp(optarg, "const")) a->sched = NN_LR_CONST;
    else if (!strcmp(optarg, "step")) a->sched = NN_LR_STEP;
    else if (!strcmp(optarg, "cosine")) a->sched = NN_LR_COSINE;
    else return bench_usage_error(train_usage, "bad --lr-schedule '%s' (const, step or cosine)", optarg);
    break;
  case O_MODE: {
    int k = 0;
    while (k < 3 && strcmp(optarg, train_mode_names[k])) k++;
    if (k == 3)
      return bench_usage_error(train_usage, "bad --mode '%s' (data-parallel, conventional or partitioned)", optarg);
    a->mode = k;
    break;
  }
  case O_SEED: {
    uint64_t s;
    if (bench_parse_size(optarg, &s) != 0 || strpbrk(optarg, "kKmMgGiBb"))
      return bench_usage_error(train_usage, "bad value '%s' for --seed (a non-negative integer)", optarg);
    a->seed = s;
    a->seed_given = 1;
    break;
  }
  default: return bench_rank_flag(&a->r, c, argv, train_usage);
  }
  return 0;
}

/* What the flags ask together, checked once they are all read. 0, or the exit status of a
 * usage error. */
static int train_args_check(train_args *a) {
  double d;
  if (a->milestones) {
    char *items[NN_LR_MAX_MILESTONES], *store;
    int n = bench_split_list(a->milestones, items, NN_LR_MAX_MILESTONES, &store), ok = n > 0;
    for (int i = 0; ok && i < n; i++) ok = bench_parse_double(items[i], 0, 1e9, &d) == 0;
    free(store);
    if (!ok) return bench_usage_error(train_usage, "bad --lr-milestones '%s' (epochs, comma separated, at most %d)", a->milestones,
                 NN_LR_MAX_MILESTONES);
  }
  /* --resume DIR: a run directory to go on in (a file is a checkpoint) */
  struct stat st;
  if (a->resume && stat(a->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (a->r.out && strcmp(a->r.out, a->resume))
      return bench_usage_error(train_usage, "--resume %s continues in that run directory: give no other --out (%s)",
                               a->resume, a->r.out);
    a->continue_dir = a->r.out = a->resume;
    a->resume = NULL;
  }
  if (a->link_bps && !a->model_from) return bench_usage_error(train_usage, "--link prices the rows by a model: it needs --model-from");
  if (a->target_acc > 0 && a->eval_every == 0) return bench_usage_error(train_usage, "--target-acc needs test-set evaluation (--eval-every >= 1)");
  /* each round trains afresh: a checkpoint would hold whichever round ended last */
  if (a->rounds > 1 && (a->save || a->resume)) return bench_usage_error(train_usage, "--rounds %ld with --save or --resume: a checkpoint continues one training; rounds retrain the same steps", a->rounds);
  if (a->dp_sharded) { /* ZeRO stage 2 as built: f32 buckets, the update after the gather */
    if (a->grad_dtype != COLL_F32) return bench_usage_error(train_usage, "--dp sharded: gradients travel as f32 (not --grad-dtype %s)", coll_dtype_name(a->grad_dtype));
    if (a->overlap_step == NN_OSTEP_ON) return bench_usage_error(train_usage, "--dp sharded takes no --overlap-step on: each rank's update waits for the parameters' all-gather");
    for (int i = 0; i < a->ndevices; i++)
      if (a->devices[i] != NN_DEV_CPU) return bench_usage_error(train_usage, "--dp sharded trains on the CPU only (not --device cuda)");
    a->overlap_step = NN_OSTEP_OFF;
  }
  int settings = train_sweep_count(a);
  if (settings > TRAIN_SWEEP_MAX)
    return bench_usage_error(train_usage, "the lists make %d settings; at most %d in one run", settings, TRAIN_SWEEP_MAX);
  if (settings > 1 && (a->save || a->resume))
    return bench_usage_error(train_usage, "--save and --resume FILE continue one training: give one value to each "
                                          "list flag (this run has %d settings)", settings);
  int adam = a->optimizer != NN_OPT_SGD;
  for (int i = 0; i < a->sw.n[SW_OPTIM]; i++) adam |= a->sw.v[SW_OPTIM][i] != NN_OPT_SGD;
  for (int d = 0; adam && d < a->ndevices; d++)
    if (a->devices[d] == NN_DEV_CUDA) return bench_usage_error(train_usage, "--optimizer adam and adamw train on the CPU only: give sgd for --device cuda");
  if (adam && (a->save || a->resume))
    return bench_usage_error(train_usage, "--save and --resume FILE keep SGD's state only: not with --optimizer adam or adamw");
  train_sweep_prepare(a);
  /* the builder's own rule: a depth no ResNet has is a usage error, not a failure after setup */
  char merr[512];
  if (nn_model_check(a->model, merr, sizeof merr)) return bench_usage_error(train_usage, "bad --model: %s", merr);
  return train_partitioned_check(a);
}

int train_parse_args(train_args *a, int argc, char **argv) {
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
      {"overlap-step", 1, 0, O_OSTEP}, {"dp", 1, 0, O_DP},
      {"check-every", 1, 0, O_CHECK},   {"chunk", 1, 0, O_CHUNK},
      {"trace", 1, 0, O_TRACE},         {"trace-steps", 1, 0, O_TRACESTEPS},
      {"model-from", 1, 0, O_MODELFROM}, {"device", 1, 0, O_DEVICE}, {"link", 1, 0, O_LINK},
      {"precision", 1, 0, O_PREC},      {"cudnn-search", 0, 0, O_SEARCH},
      {"gpu", 1, 0, O_GPU},             {"rounds", 1, 0, O_ROUNDS},
      {"mode", 1, 0, O_MODE},           {"parts", 1, 0, O_PARTS},
      {"recovery-epochs", 1, 0, O_RECOVERY}, {"no-compare", 0, 0, O_NOCOMPARE},
      {"optimizer", 1, 0, O_OPTIM},     {"weight-decay", 1, 0, O_WD},
      {"beta1", 1, 0, O_BETA1},         {"beta2", 1, 0, O_BETA2},
      {"eps", 1, 0, O_EPS},             {"loader-workers", 1, 0, O_WORKERS},
      {"cold-cache", 0, 0, O_COLD},
      {0, 0, 0, 0}};
  train_args_defaults(a);
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
#define SWEEP(dim)                                                                    \
  do {                                                                                \
    if ((rc = train_sweep_list(a, dim, opts[li].name, optarg)) != 0) return rc;     \
  } while (0)
  while ((c = getopt_long(argc, argv, ":hn:", opts, &li)) != -1) {
    switch (c) {
    case O_TRANSPORT: a->transports = optarg; break;
    case O_ALGO: a->algos = optarg; break;
    case O_NOSINGLE: a->no_single = 1; break;
    case O_BUCKET: DBL(0.001, 1 << 20, a->bucket_mb); break;
    case O_FIRSTB: DBL(0.001, 1 << 20, a->first_bucket_mb); break;
    case O_NOOVERLAP: a->overlap = 0; break;
    case O_CHECK: INT(0, 1L << 40, a->check_every); break;
    case O_TRACE: a->trace = optarg; break;
    case O_TRACESTEPS: INT(1, 100000, a->trace_steps); break;
    case O_MODELFROM: a->model_from = optarg; break;
    case O_LINK:
      if (launch_emu_parse_rate(optarg, &a->link_bps))
        return bench_usage_error(train_usage, "--link: '%s' is not a rate (1mbit to 400gbit, as 1gbit or 500mbit)", optarg);
      break;
    case O_SEARCH: a->cudnn_search = 1; break;
    case O_GPU: INT(0, 1023, a->gpu); break;
    case O_ROUNDS: INT(1, 100, a->rounds); break;
    case O_MODEL: a->model = optarg; break;
    case O_DATA: a->data = optarg; break;
    case O_BATCH: SWEEP(SW_BATCH); break;
    case O_EPOCHS: SWEEP(SW_EPOCHS); a->epochs_given = 1; break;
    case O_OPTIM: SWEEP(SW_OPTIM); break;
    case O_WORKERS: SWEEP(SW_WORKERS); break;
    case O_BETA1: DBL(0, 0.999999, a->beta1); break;
    case O_BETA2: DBL(0, 0.999999999, a->beta2); break;
    case O_EPS: DBL(1e-30, 1, a->eps); break;
    case O_COLD: a->cold_cache = 1; break;
    case O_STEPS: INT(1, 1L << 40, a->steps); break;
    case O_WSTEPS: INT(0, 1L << 40, a->warmup_steps); break;
    case O_LR: SWEEP(SW_LR); break;
    case O_MOM: DBL(0, 1, a->momentum); break;
    case O_WD: DBL(0, 1, a->wd); break;
    case O_NEST: a->nesterov = 1; break;
    case O_WEPOCHS: DBL(0, 1e6, a->warmup_epochs); break;
    case O_MILE: a->milestones = optarg; break;
    case O_GAMMA: DBL(0, 1e3, a->gamma); break;
    case O_REF: INT(1, 1 << 30, a->ref_batch); break;
    case O_THREADS: SWEEP(SW_THREADS); break;
    case O_NOAUG: a->augment = 0; break;
    case O_PAD: INT(0, 64, a->crop_pad); break;
    case O_EVAL: INT(0, 1000000, a->eval_every); break;
    case O_TARGET: DBL(0, 1, a->target_acc); break;
    case O_NOSTOP: a->stop_at_target = 0; break;
    case O_SAVE: a->save = optarg; break;
    case O_RESUME: a->resume = optarg; break;
    case O_LOG: INT(1, 1L << 40, a->log_every); break;
    case O_PREFETCH: INT(1, 64, a->prefetch); break;
    case O_PARTS: INT(1, 64, a->parts); a->parts_given = 1; break;
    case O_RECOVERY: INT(0, 1000000, a->recovery_epochs); break;
    case O_NOCOMPARE: a->no_compare = 1; break;
    default: /* the flags with words to parse, and those every command that starts ranks shares */
      if ((rc = train_flag_word(a, c, argv)) != 0) return rc;
    }
  }
  if ((rc = bench_rank_check(&a->r, argc, argv, train_usage)) != 0) return rc;
#undef INT
#undef DBL
#undef SWEEP
  return train_args_check(a);
}

int train_parse_milestones(nn_lr_sched *s, const char *list, long epochs, int64_t spe) {
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

/* --trace and --save before anything trains (rank 0, which writes them): their directory must
 * exist and take files (both write FILE.tmp, then rename it), and an existing FILE must be a
 * writable file. 0, or -1 after saying why. */
int train_out_file_check(const char *flag, const char *path) {
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
