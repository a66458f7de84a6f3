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

enum {
  O_MODEL = 256, O_DATA, O_BATCH, O_EPOCHS, O_STEPS, O_WSTEPS, O_LR, O_MOM, O_WD, O_NEST, O_SCHED,
  O_WEPOCHS, O_MILE, O_GAMMA, O_REF, O_THREADS, O_SEED, O_NOAUG, O_PAD, O_EVAL, O_TARGET,
  O_NOSTOP, O_SAVE, O_RESUME, O_LOG, O_PREFETCH, O_TRANSPORT, O_ALGO, O_NOSINGLE, O_BUCKET,
  O_FIRSTB, O_NOOVERLAP, O_OSTEP, O_DP, O_GDTYPE, O_CHECK, O_CHUNK, O_TRACE, O_TRACESTEPS, O_MODELFROM, O_LINK,
  O_DEVICE, O_PREC, O_SEARCH, O_GPU, O_ROUNDS, O_MODE, O_PARTS, O_RECOVERY, O_NOCOMPARE, O_OPTIM, O_BETA1,
  O_BETA2, O_EPS, O_WORKERS, O_COLD, O_SAVEFMT
};

/* Every flag once: getopt_long's options, --help, and the default (written as a user would type
 * it, and set through the same parsing). */
static const bench_flag train_flags[] = {
    {"n", "N", NULL, "start N local ranks and train data-parallel (default: the launcher's world, or one process)", 'n'},
    {"transport", "LIST", NULL, "tcp,ucx,mpi,none: each trains in turn from the same weights; none trains the same "
                                "ranks with no gradient exchange, the baseline (default: none,tcp,ucx, those built, "
                                "with several ranks)", O_TRANSPORT},
    {"algo", "LIST", "ring", "ring,rhd,rd,tree,dtree,ps,ps:K,native,auto,hier,hier:ALG", O_ALGO},
    {"no-single", NULL, NULL, "skip the one-rank run that scaling efficiency is measured against", O_NOSINGLE},
    {"rounds", "R", "1", "the pairs (and the one-rank run) take turns R times, each round the same steps from the "
                         "same weights; a pair's row is its fastest round, so a slow spell of the machine during "
                         "one pair does not pass for its fabric's cost", O_ROUNDS},
    {"bucket-mb", "X", "25", "gradient bucket size, MiB", O_BUCKET},
    {"first-bucket-mb", "X", "1", "the first (last layers') bucket, MiB", O_FIRSTB},
    {"no-overlap", NULL, NULL, "all-reduce after backward instead of during it", O_NOOVERLAP},
    {"overlap-step", "on|off|auto", "auto", "the next step's forward starts while this step's gradients are still "
                                            "all-reduced, each layer waiting only for its own (CPU); auto: on after "
                                            "the warm-up where backward cannot hide the all-reduce", O_OSTEP},
    {"grad-dtype", "T", "f32", "f32|bf16|f16: the type gradients travel in", O_GDTYPE},
    {"dp", "replicated|sharded|sharded3", "replicated", "replicated: every rank all-reduces the gradients and "
                                              "updates all parameters (DDP); sharded: ZeRO stage 2, each bucket "
                                              "reduce-scattered, each rank updating its block and keeping its block "
                                              "of the optimizer state, the parameters then all-gathered; sharded3: "
                                              "ZeRO stage 3 (FSDP FULL_SHARD), between steps each rank keeps only its "
                                              "block of the parameters too, each bucket all-gathered before the "
                                              "forward reads it and again before the backward (CPU, f32, no "
                                              "--overlap-step)", O_DP},
    {"check-every", "K", "0", "compare the ranks' parameter hashes every K steps too (always at epoch ends and at "
                              "the end)", O_CHECK},
    BENCH_FLAG_EMULATE,
    BENCH_FLAG_EMULATE_SLOW,
    {"intra-transport", "T", NULL, "hier's phases inside hosts over T (tcp, ucx, mpi), only between hosts over the "
                                   "pair's transport (default: ucx, whose ranks on a host map each other's buffer, "
                                   "where it is built and the pair's transport is tcp or mpi; else the pair's own)",
     BENCH_O_INTRA},
    {"mpirun-args", "ARGS", NULL, "extra mpirun arguments when -n starts ranks through mpirun", BENCH_O_MPIRUN},
    {"chunk", "SIZE", NULL, "pipelining unit of the all-reduce algorithms", O_CHUNK},
    {"bind", "HOW", NULL, "auto|none|core|numa|nic|gpu (default: auto, --threads cores each where the host's ranks "
                          "fit its cores and no launcher bound them)", BENCH_O_BIND},
    BENCH_FLAG_TIMEOUT,
    BENCH_FLAG_TELEMETRY,
    {"trace", "FILE", NULL, "Chrome trace (Perfetto, chrome://tracing) of the measured steps: per rank, forward, "
                            "each layer's backward, each bucket's all-reduce on the communication thread, and the "
                            "waits", O_TRACE},
    {"trace-steps", "N", "5", "steps traced after the warm-up", O_TRACESTEPS},
    {"device", "LIST", "cpu", "cpu|cuda|cpu,cuda: each trains every pair in turn, a row each", O_DEVICE},
    {"precision", "P", "fp32", "GPU arithmetic: fp32|tf32|bf16 (bf16 keeps fp32 master weights)", O_PREC},
    {"cudnn-search", NULL, NULL, "GPU: time cuDNN's convolution algorithms instead of its heuristics", O_SEARCH},
    {"gpu", "N", NULL, "GPU ordinal of every rank (default: each rank's local rank modulo the GPU count: ranks beyond "
                       "it share GPUs)", O_GPU},
    {"model-from", "DIR|F", NULL, "every data-parallel row gains the cost model's prediction of its step (from this "
                                  "run's none or one-rank profile and the fitted all-reduce model of its fabric) and "
                                  "the error", O_MODELFROM},
    {"link", "RATE", NULL, "with --model-from: price the rows on a link of RATE (1gbit, 500mbit) of their transport "
                           "instead: a held-out prediction from the model's nearest emulated rate scaled to it",
     O_LINK},
    {"model", "NAME", "resnet20", "resnet18|34|50 (torchvision), resnet20|32|56 (CIFAR), '-wN' sets the base width "
                                  "(e.g. resnet20-w4); mlp:IN,W,...,OUT fully connected (IN = C*H*W, OUT = classes, "
                                  "ReLU between) or fc6 (IN,1024,1024,512,512,256,classes)", O_MODEL},
    {"data", "SPEC", "fmnist", "fmnist[:DIR] (default DIR " NN_DATA_FMNIST_DIR "), cifar10:DIR, "
                               "synthetic[:CxHxW[:CLASSES[:N]]]", O_DATA},
    {"batch", "LIST", "128", "images per step and rank", O_BATCH},
    {"epochs", "LIST", "1", "epochs to train; also the schedule's length", O_EPOCHS},
    {"steps", "N", NULL, "stop after global step N, for throughput runs (default: whole epochs)", O_STEPS},
    {"warmup-steps", "N", "10", "first steps of this run left out of the figures", O_WSTEPS},
    {"lr", "LIST", "0.1", "base learning rate", O_LR},
    {"optimizer", "LIST", "sgd", "sgd|adam|adamw, as torch.optim has them", O_OPTIM},
    {"momentum", "X", "0.9", "SGD's momentum", O_MOM},
    {"wd", "X", "5e-4", "weight decay (adamw: decoupled, p *= 1 - lr wd)", O_WD},
    {"weight-decay", "X", NULL, "the same as --wd", O_WD},
    {"nesterov", NULL, NULL, "Nesterov momentum", O_NEST},
    {"beta1", "X", "0.9", "Adam's first moment's decay", O_BETA1},
    {"beta2", "X", "0.999", "Adam's second moment's decay", O_BETA2},
    {"eps", "X", "1e-8", "Adam's term added outside the square root", O_EPS},
    {"lr-schedule", "S", "cosine", "const|step|cosine", O_SCHED},
    {"warmup-epochs", "X", "0", "linear learning-rate warm-up", O_WEPOCHS},
    {"lr-milestones", "L", NULL, "step schedule: epochs where lr is multiplied by --lr-gamma, e.g. 30,60 or fractions "
                                 "of --epochs 0.5,0.75 (default: 0.5,0.75)", O_MILE},
    {"lr-gamma", "X", "0.1", "the step schedule's factor", O_GAMMA},
    {"ref-batch", "N", NULL, "linear scaling rule: lr x global batch (ranks x batch) / N (default: off)", O_REF},
    {"threads", "LIST", NULL, "oneDNN/OpenMP threads per rank (default: the cores of this rank's CPU set divided "
                              "among the ranks on this machine with the same set)", O_THREADS},
    {"seed", "N", "1", "weights, data order and augmentation", O_SEED},
    {"no-augment", NULL, NULL, "no random crop or flip (by default crop and flip on fmnist and cifar10)", O_NOAUG},
    {"crop-pad", "N", NULL, "random-crop padding (default: 2 fmnist, 4 cifar10, 0 synthetic)", O_PAD},
    {"eval-every", "N", "1", "test-set evaluation every N epochs, 0 never", O_EVAL},
    {"target-acc", "X", NULL, "report the time to this test accuracy, and stop there", O_TARGET},
    {"no-stop-at-target", NULL, NULL, "keep training after reaching --target-acc", O_NOSTOP},
    {"save", "FILE", NULL, "checkpoint at every epoch end and at the end (no one-rank run)", O_SAVE},
    {"save-format", "gathered|sharded", "gathered", "gathered: --save is one file of the whole model (rank 0 "
                                                    "writes it); sharded (--dp sharded or sharded3): each rank "
                                                    "writes its own shard, FILE.stepG.rankRofN, and rank 0 the "
                                                    "manifest FILE; it resumes at the same -n and --dp", O_SAVEFMT},
    {"resume", "FILE|DIR", NULL, "FILE: continue from a checkpoint (its seed and data position; no one-rank run); "
                                 "DIR: continue an interrupted run (a sweep) in its run directory, with the same "
                                 "flags: rows already in its train.csv are not trained again, new rows are added to "
                                 "its files", O_RESUME},
    {"log-every", "N", "20", "step log period", O_LOG},
    {"prefetch", "N", "2", "batches the loader prepares ahead", O_PREFETCH},
    {"loader-workers", "LIST", "1", "loader threads; 0: the training thread makes each batch", O_WORKERS},
    {"cold-cache", NULL, NULL, "drop the dataset's files from the page cache before reading them (posix_fadvise "
                               "DONTNEED; rows say cache cold, else warm)", O_COLD},
    {"out", "DIR", NULL, "run directory (default: results/<UTC>-train)", BENCH_O_OUT},
    {"mode", "M", "data-parallel", "data-parallel (every pair, and one rank alone), conventional (one rank) or "
                                   "partitioned: a fully connected --model cut into --parts trained on their own "
                                   "ranks with synthetic intermediate labels, with the conventional and "
                                   "data-parallel rows of the same network in train_partition.csv "
                                   "(docs/training.md)", O_MODE},
    {"parts", "N", "2", "partitioned: parts, one a rank (-n N); 2 only", O_PARTS},
    {"recovery-epochs", "N", "0", "partitioned: epochs fine-tuning the joined network after the parts", O_RECOVERY},
    {"no-compare", NULL, NULL, "partitioned: no conventional and data-parallel rows", O_NOCOMPARE},
};
#define TRAIN_NFLAGS (sizeof train_flags / sizeof train_flags[0])

static const char train_sweeps_help[] =
    "Sweeps: --batch, --lr, --optimizer, --epochs, --threads and --loader-workers take comma\n"
    "lists; the run trains their product (at most 256 settings), a row each in train.csv and\n"
    "the accuracy after each epoch in train_epochs.csv. Order: --batch changes slowest, then\n"
    "--lr, --optimizer, --epochs, --threads, and --loader-workers fastest; within a setting,\n"
    "each --device, and on it the one-rank run, none and the pairs. See docs/training.md.\n";

const char *train_usage(void) {
  static char *text; /* made once from the table; the process's for its life */
  if (!text) {
    char *flags = bench_flags_usage("usage: fabench train [options]\n", train_flags, TRAIN_NFLAGS);
    size_t n = flags ? strlen(flags) + sizeof train_sweeps_help : 0;
    if (n && (text = malloc(n))) snprintf(text, n, "%s%s", flags, train_sweeps_help);
    free(flags);
  }
  return text ? text : "usage: fabench train [options] (--help: out of memory)\n";
}

/* What no flag sets, and what the defaults leave before they are applied. */
static void train_args_defaults(train_args *a) {
  *a = (train_args){.augment = 1, .stop_at_target = 1, .overlap = 1, .crop_pad = -1, .gpu = -1};
  bench_rank_opts_init(&a->r);
}

const char *train_dp_name(const train_args *a) {
  return a->dp_sharded == 3 ? "sharded3" : a->dp_sharded ? "sharded" : "replicated";
}

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

/* The flags whose value is a word or a list to parse (--overlap-step, --dp, --save-format, --grad-dtype,
 * --chunk, --device, --precision, --lr-schedule, --mode, --seed). 0; 2 after a usage error; -1:
 * not one of them. */
static int train_flag_word(train_args *a, int c, const char *val) {
  switch (c) {
  case O_OSTEP: {
    int k = 0;
    while (k < 3 && strcmp(val, train_ostep_names[k])) k++;
    if (k == 3) return bench_usage_error(train_usage(), "bad --overlap-step '%s' (on, off or auto)", val);
    a->overlap_step = k;
    break;
  }
  case O_DP:
    if (strcmp(val, "replicated") && strcmp(val, "sharded") && strcmp(val, "sharded3"))
      return bench_usage_error(train_usage(), "bad --dp '%s' (replicated, sharded or sharded3)", val);
    a->dp_sharded = !strcmp(val, "sharded") ? 2 : !strcmp(val, "sharded3") ? 3 : 0;
    break;
  case O_SAVEFMT:
    if (strcmp(val, "gathered") && strcmp(val, "sharded"))
      return bench_usage_error(train_usage(), "bad --save-format '%s' (gathered or sharded)", val);
    a->save_sharded = !strcmp(val, "sharded");
    break;
  case O_GDTYPE:
    if (coll_dtype_parse(val, &a->grad_dtype) ||
        (a->grad_dtype != COLL_F32 && a->grad_dtype != COLL_BF16 && a->grad_dtype != COLL_F16))
      return bench_usage_error(train_usage(), "bad --grad-dtype '%s' (f32, bf16 or f16)", val);
    break;
  case O_CHUNK:
    if (bench_parse_size(val, &a->chunk) || a->chunk < 64)
      return bench_usage_error(train_usage(), "bad --chunk '%s' (a size >= 64)", val);
    break;
  case O_DEVICE: {
    char *items[3], *store = NULL;
    int n = bench_split_list(val, items, 3, &store), ok = n >= 1 && n <= 2;
    for (int i = 0; ok && i < n; i++) {
      ok = !strcmp(items[i], "cpu") || !strcmp(items[i], "cuda");
      a->devices[i] = !strcmp(items[i], "cuda") ? NN_DEV_CUDA : NN_DEV_CPU;
      ok = ok && (i == 0 || a->devices[1] != a->devices[0]);
    }
    free(store);
    if (!ok) return bench_usage_error(train_usage(), "bad --device '%s' (cpu, cuda or cpu,cuda)", val);
    a->ndevices = n;
    break;
  }
  case O_PREC:
    if (!strcmp(val, "fp32")) a->precision = NN_PREC_FP32;
    else if (!strcmp(val, "tf32")) a->precision = NN_PREC_TF32;
    else if (!strcmp(val, "bf16")) a->precision = NN_PREC_BF16;
    else return bench_usage_error(train_usage(), "bad --precision '%s' (fp32, tf32 or bf16)", val);
    break;
  case O_SCHED:
    if (!strcmp(val, "const")) a->sched = NN_LR_CONST;
    else if (!strcmp(val, "step")) a->sched = NN_LR_STEP;
    else if (!strcmp(val, "cosine")) a->sched = NN_LR_COSINE;
    else return bench_usage_error(train_usage(), "bad --lr-schedule '%s' (const, step or cosine)", val);
    break;
  case O_MODE: {
    int k = 0;
    while (k < 3 && strcmp(val, train_mode_names[k])) k++;
    if (k == 3)
      return bench_usage_error(train_usage(), "bad --mode '%s' (data-parallel, conventional or partitioned)", val);
    a->mode = k;
    break;
  }
  case O_SEED: {
    uint64_t s;
    if (bench_parse_size(val, &s) != 0 || strpbrk(val, "kKmMgGiBb"))
      return bench_usage_error(train_usage(), "bad value '%s' for --seed (a non-negative integer)", val);
    a->seed = s;
    a->seed_given = 1;
    break;
  }
  default: return -1; /* not the command's own */
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
    if (!ok) return bench_usage_error(train_usage(), "bad --lr-milestones '%s' (epochs, comma separated, at most %d)", a->milestones,
                 NN_LR_MAX_MILESTONES);
  }
  /* --resume DIR: a run directory to go on in (a file is a checkpoint) */
  struct stat st;
  if (a->resume && stat(a->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
    if (a->r.out && strcmp(a->r.out, a->resume))
      return bench_usage_error(train_usage(), "--resume %s continues in that run directory: give no other --out (%s)",
                               a->resume, a->r.out);
    a->continue_dir = a->r.out = a->resume;
    a->resume = NULL;
  }
  if (a->link_bps && !a->model_from) return bench_usage_error(train_usage(), "--link prices the rows by a model: it needs --model-from");
  if (a->target_acc > 0 && a->eval_every == 0) return bench_usage_error(train_usage(), "--target-acc needs test-set evaluation (--eval-every >= 1)");
  /* each round trains afresh: a checkpoint would hold whichever round ended last */
  if (a->rounds > 1 && (a->save || a->resume)) return bench_usage_error(train_usage(), "--rounds %ld with --save or --resume: a checkpoint continues one training; rounds retrain the same steps", a->rounds);
  if (a->dp_sharded) { /* ZeRO stages 2 and 3 as built: f32 buckets, the update after the gather */
    const char *dp = train_dp_name(a);
    if (a->grad_dtype != COLL_F32) return bench_usage_error(train_usage(), "--dp %s: gradients travel as f32 (not --grad-dtype %s)", dp, coll_dtype_name(a->grad_dtype));
    if (a->overlap_step == NN_OSTEP_ON) return bench_usage_error(train_usage(), "--dp %s takes no --overlap-step on: each rank's update waits for the parameters' all-gather", dp);
    for (int i = 0; i < a->ndevices; i++)
      if (a->devices[i] != NN_DEV_CPU) return bench_usage_error(train_usage(), "--dp %s trains on the CPU only (not --device cuda)", dp);
    a->overlap_step = NN_OSTEP_OFF;
  }
  if (a->save_sharded && (!a->save || !a->dp_sharded))
    return bench_usage_error(train_usage(), "--save-format sharded writes each rank's shard of a sharded run: it needs "
                                          "--save FILE and --dp sharded or sharded3");
  int settings = train_sweep_count(a);
  if (settings > TRAIN_SWEEP_MAX)
    return bench_usage_error(train_usage(), "the lists make %d settings; at most %d in one run", settings, TRAIN_SWEEP_MAX);
  if (settings > 1 && (a->save || a->resume))
    return bench_usage_error(train_usage(), "--save and --resume FILE continue one training: give one value to each "
                                          "list flag (this run has %d settings)", settings);
  int adam = a->optimizer != NN_OPT_SGD;
  for (int i = 0; i < a->sw.n[SW_OPTIM]; i++) adam |= a->sw.v[SW_OPTIM][i] != NN_OPT_SGD;
  if (adam && (a->save || a->resume))
    return bench_usage_error(train_usage(), "--save and --resume FILE keep SGD's state only: not with --optimizer adam or adamw");
  train_sweep_prepare(a);
  /* the builder's own rule: a depth no ResNet has is a usage error, not a failure after setup */
  char merr[512];
  if (nn_model_check(a->model, merr, sizeof merr)) return bench_usage_error(train_usage(), "bad --model: %s", merr);
  return train_partitioned_check(a);
}

/* One flag's value (given, or its default): the command's own flags. 0; 2 after a usage error;
 * -1: a flag every rank command shares. */
static int train_set(train_args *a, int c, const char *val, const char *name) {
  long v;
  double d;
  int rc;
#define BAD(...) return bench_usage_error(train_usage(), __VA_ARGS__)
#define INT(lo, hi, dst)                                                                           \
  do {                                                                                             \
    if (bench_parse_int(val, lo, hi, &v) != 0)                                                     \
      BAD("bad value '%s' for --%s (an integer %ld..%ld)", val, name, (long)(lo), (long)(hi));     \
    dst = v;                                                                                       \
  } while (0)
#define DBL(lo, hi, dst)                                                                           \
  do {                                                                                             \
    if (bench_parse_double(val, lo, hi, &d) != 0)                                                  \
      BAD("bad value '%s' for --%s (a number %g..%g)", val, name, (double)(lo), (double)(hi));     \
    dst = d;                                                                                       \
  } while (0)
#define SWEEP(dim)                                                                                 \
  do {                                                                                             \
    if ((rc = train_sweep_list(a, dim, name, val)) != 0) return rc;                                \
  } while (0)
  switch (c) {
  case O_TRANSPORT: a->transports = val; break;
  case O_ALGO: a->algos = val; break;
  case O_NOSINGLE: a->no_single = 1; break;
  case O_BUCKET: DBL(0.001, 1 << 20, a->bucket_mb); break;
  case O_FIRSTB: DBL(0.001, 1 << 20, a->first_bucket_mb); break;
  case O_NOOVERLAP: a->overlap = 0; break;
  case O_CHECK: INT(0, 1L << 40, a->check_every); break;
  case O_TRACE: a->trace = val; break;
  case O_TRACESTEPS: INT(1, 100000, a->trace_steps); break;
  case O_MODELFROM: a->model_from = val; break;
  case O_LINK:
    if (launch_emu_parse_rate(val, &a->link_bps))
      BAD("--link: '%s' is not a rate (1mbit to 400gbit, as 1gbit or 500mbit)", val);
    break;
  case O_SEARCH: a->cudnn_search = 1; break;
  case O_GPU: INT(0, 1023, a->gpu); break;
  case O_ROUNDS: INT(1, 100, a->rounds); break;
  case O_MODEL: a->model = val; break;
  case O_DATA: a->data = val; break;
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
  case O_MILE: a->milestones = val; break;
  case O_GAMMA: DBL(0, 1e3, a->gamma); break;
  case O_REF: INT(1, 1 << 30, a->ref_batch); break;
  case O_THREADS: SWEEP(SW_THREADS); break;
  case O_NOAUG: a->augment = 0; break;
  case O_PAD: INT(0, 64, a->crop_pad); break;
  case O_EVAL: INT(0, 1000000, a->eval_every); break;
  case O_TARGET: DBL(0, 1, a->target_acc); break;
  case O_NOSTOP: a->stop_at_target = 0; break;
  case O_SAVE: a->save = val; break;
  case O_RESUME: a->resume = val; break;
  case O_LOG: INT(1, 1L << 40, a->log_every); break;
  case O_PREFETCH: INT(1, 64, a->prefetch); break;
  case O_PARTS: INT(1, 64, a->parts); a->parts_given = 1; break;
  case O_RECOVERY: INT(0, 1000000, a->recovery_epochs); break;
  case O_NOCOMPARE: a->no_compare = 1; break;
  default: return train_flag_word(a, c, val); /* words and lists to parse, or shared */
  }
#undef BAD
#undef INT
#undef DBL
#undef SWEEP
  return 0;
}

int train_parse_args(train_args *a, int argc, char **argv) {
  static const struct option extra[] = {{"ranks", 1, 0, 'n'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct option *opts = bench_flags_options(train_flags, TRAIN_NFLAGS, extra);
  if (!opts) return bench_error("out of memory");
  train_args_defaults(a);
  int rc = 0;
  for (size_t i = 0; i < TRAIN_NFLAGS && !rc; i++) { /* the defaults, as given values parse */
    const bench_flag *f = &train_flags[i];
    if (!f->def || !f->arg) continue;
    optarg = (char *)f->def;
    rc = train_set(a, f->code, f->def, f->name);
    if (rc < 0) rc = bench_rank_flag(&a->r, f->code, argv, train_usage());
  }
  if (rc) {
    free(opts);
    return bench_error("internal: a default of train's flags does not parse");
  }
  a->epochs_given = a->parts_given = a->seed_given = 0; /* the defaults were not given */
  optind = 1;
  opterr = 0;
  int c, li = 0;
  while (!rc && (c = getopt_long(argc, argv, ":hn:", opts, &li)) != -1) {
    const char *name = c == 'n' ? "n" : opts[li].name;
    rc = train_set(a, c, optarg, name);
    if (rc < 0) rc = bench_rank_flag(&a->r, c, argv, train_usage());
    li = 0;
  }
  free(opts);
  if (rc) return rc;
  if ((rc = bench_rank_check(&a->r, argc, argv, train_usage())) != 0) return rc;
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

int train_shards_resumable(const train_args *a, const nn_ckpt_info *have, const nn_ckpt_info *want, char *err,
                           size_t errcap) {
  const char *dp = have->sharded == 3 ? "sharded3" : "sharded";
  char why[512];
  if (!a->dp_sharded)
    snprintf(err, errcap, "checkpoint %s: a sharded checkpoint (--dp %s, %d ranks); this run is --dp replicated: "
             "resume it with --dp %s -n %d", a->resume, dp, have->world, dp, have->world);
  else if (a->dp_sharded != have->sharded)
    snprintf(err, errcap, "checkpoint %s: a sharded checkpoint of --dp %s; this run is --dp %s", a->resume, dp,
             train_dp_name(a));
  else if (have->world != want->world)
    snprintf(err, errcap, "checkpoint %s: a sharded checkpoint of %d ranks; this run has %d (each rank resumes "
             "its own shard)", a->resume, have->world, want->world);
  else if (nn_ckpt_check(have, want, why, sizeof why))
    snprintf(err, errcap, "checkpoint %s: %s", a->resume, why);
  else
    return 0;
  return -1;
}
