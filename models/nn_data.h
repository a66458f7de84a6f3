/* models, data side: datasets in memory, the prefetching loader, learning-rate schedules and
 * checkpoints. Included at the end of nn.h. Shapes are NCHW; images are stored as uint8 and
 * normalized to float by the loader. */
#ifndef FABENCH_NN_DATA_H
#define FABENCH_NN_DATA_H

#include <stddef.h>
#include <stdint.h>

/* ---- datasets: one split held in memory ---- */
typedef struct {
  int c, h, w;            /* image shape */
  int classes;
  int64_t n;              /* images */
  uint8_t *pixels;        /* n x c x h x w */
  int32_t *labels;        /* n, each in [0, classes) */
  float mean[3], std[3];  /* per channel, applied to pixel/255 */
} nn_dataset;

typedef enum { NN_DATA_FMNIST, NN_DATA_CIFAR10, NN_DATA_SYNTHETIC } nn_data_kind;

/* What --data names: "fmnist[:DIR]", "cifar10:DIR", "synthetic[:CxHxW[:CLASSES[:N]]]". */
typedef struct {
  nn_data_kind kind;
  char dir[2048];         /* fmnist and cifar10 */
  int c, h, w, classes;   /* synthetic */
  int64_t n;              /* synthetic training images (0: as many as fit 128 MiB, 64..1024) */
} nn_data_spec;

#define NN_DATA_FMNIST_DIR "/usr/share/datasets/fashion-mnist"

int nn_data_parse_spec(nn_data_spec *out, const char *s, char *err, size_t errcap);
/* Loads the training and test splits. Synthetic images are drawn from seed. */
int nn_data_load(nn_dataset *train, nn_dataset *test, const nn_data_spec *spec, uint64_t seed,
                 char *err, size_t errcap);
/* One IDX pair (gzip or plain): images magic 2051 (n x rows x cols), labels magic 2049 (n). */
int nn_data_read_idx(nn_dataset *out, const char *images_path, const char *labels_path,
                     char *err, size_t errcap);
/* CIFAR-10 binary batches: records of 1 label byte and 3x32x32 pixels, concatenated in order. */
int nn_data_read_cifar(nn_dataset *out, const char *const *paths, int npaths, char *err,
                       size_t errcap);
/* The same from bytes in memory (the files' contents; names only for messages). The IDX parser
 * takes img (a malloc'd buffer: it becomes the dataset's pixels, or is freed). */
int nn_data_parse_idx(nn_dataset *out, uint8_t *img, size_t ilen, const uint8_t *lab, size_t llen,
                      const char *images_path, const char *labels_path, char *err, size_t errcap);
int nn_data_parse_cifar(nn_dataset *out, const uint8_t *const *bufs, const size_t *lens,
                        const char *const *paths, int npaths, char *err, size_t errcap);
void nn_data_free(nn_dataset *d);

/* ---- epochs, shards and augmentation (pure functions: any rank can recompute them) ---- */
/* perm (n entries) is epoch's permutation of 0..n-1, a function of (seed, epoch) only. */
void nn_data_epoch_perm(int64_t *perm, int64_t n, uint64_t seed, int64_t epoch);
/* Rank r of world reads positions r, r+world, ... of each epoch's permutation; the tail that
 * does not divide evenly is dropped so every rank gets n/world images (DistributedSampler). */
int64_t nn_data_shard_len(int64_t n, int world);
int64_t nn_data_steps_per_epoch(int64_t n, int world, int batch, int drop_last);
/* Random crop offsets (0..2*pad each) and flip for image `index` in `epoch`. */
void nn_data_aug_draw(int *dy, int *dx, int *flip, uint64_t seed, int64_t epoch, int64_t index,
                      int pad);

/* ---- loader: a thread that prepares batches ahead of the training loop ---- */
typedef struct {
  int batch;
  int shuffle;            /* per-epoch permutation (training) or dataset order (evaluation) */
  int drop_last;          /* drop each epoch's last partial batch */
  int crop_pad;           /* random crop of the image zero-padded by this many pixels (0: none) */
  int flip;               /* random horizontal flip */
  int rank, world;        /* which shard of each epoch this process reads (0 and 1 for one process) */
  uint64_t seed;
  int64_t epoch, step;    /* start position (resume): epoch, and step within it */
  int64_t epochs;         /* stop after this epoch count (absolute; 0: endless) */
  int prefetch;           /* batches prepared ahead, >= 1 */
  int workers;            /* loader threads (0: one; NN_LOADER_NO_THREAD: none, each batch is
                             made in nn_loader_next by the caller); the batches are the same
                             for any count */
  /* where batches live (NULL: malloc/free); a GPU net gives page-locked memory, so a batch's
   * upload is one asynchronous copy that overlaps the step before it */
  void *(*host_alloc)(void *ctx, size_t bytes);
  void (*host_free)(void *ctx, void *p);
  void *host_ctx;
} nn_loader_opts;

typedef struct {
  const float *x;         /* n x c x h x w, normalized */
  const int32_t *labels;  /* n */
  int n;                  /* 0: no more batches */
  int64_t epoch, step;    /* this batch's position */
  double load_s;          /* time the loader spent preparing it (decoding, augmentation) */
  double wait_s;          /* time nn_loader_next took to hand it over (waiting, or making it) */
} nn_batch;
#define NN_LOADER_MAX_WORKERS 64
#define NN_LOADER_NO_THREAD (-1)

typedef struct nn_loader nn_loader;
/* The dataset must outlive the loader. */
int nn_loader_create(nn_loader **out, const nn_dataset *d, const nn_loader_opts *o, char *err,
                     size_t errcap);
/* Blocks until the next batch is ready. Its memory stays valid until the next call. */
void nn_loader_next(nn_loader *l, nn_batch *b);
/* The batch the next nn_loader_next will return, if it is ready (1), without waiting or taking
 * it (0: not ready or no more). Its memory stays valid until the call after that one. */
int nn_loader_peek(nn_loader *l, nn_batch *b);
int64_t nn_loader_steps_per_epoch(const nn_loader *l);
void nn_loader_destroy(nn_loader *l);

/* ---- learning rate: linear warm-up, then constant, step or cosine decay ---- */
typedef enum { NN_LR_CONST, NN_LR_STEP, NN_LR_COSINE } nn_lr_kind;
#define NN_LR_MAX_MILESTONES 16
typedef struct {
  nn_lr_kind kind;
  double base;              /* the rate after warm-up (after the linear scaling rule) */
  int64_t warmup_steps;     /* lr = base * (step + 1) / warmup_steps before */
  int64_t total_steps;      /* cosine: reaches 0 here and stays */
  int64_t milestones[NN_LR_MAX_MILESTONES]; /* step: multiply by gamma at each (in steps) */
  int nmilestones;
  double gamma;
} nn_lr_sched;
double nn_lr_at(const nn_lr_sched *s, int64_t step);
/* The linear scaling rule (Goyal et al. 2017): lr * global_batch / ref_batch; ref_batch 0: lr. */
double nn_lr_scaled(double lr, int global_batch, int ref_batch);

/* ---- checkpoints: weights, momentum, BN running statistics and the data position ---- */
#define NN_CKPT_VERSION 1
typedef struct {
  char model[32];
  char data[256];           /* the --data spec it was trained on */
  int32_t in_c, in_h, in_w, classes, batch, rank, world;
  uint64_t seed;            /* the data order and augmentation follow it */
  int64_t epoch, step;      /* next batch to train: step `step` of epoch `epoch` */
  int64_t global_step;      /* steps trained so far */
  double elapsed_s;         /* training time so far (time to accuracy spans resumes) */
  uint64_t n_params, n_momentum, n_buffers;
  int32_t sharded;          /* 0: the gathered form; 2 or 3: a sharded set of that ZeRO stage */
  uint64_t set_id;          /* sharded: the save the files belong to (one id per save) */
} nn_ckpt_info;
/* Written to path.tmp then renamed, so a crash never leaves half a checkpoint under path. */
int nn_ckpt_save(const char *path, const nn_ckpt_info *info, const float *params,
                 const float *momentum, const float *buffers, char *err, size_t errcap);
/* Reads only the header (checksum verified over the whole file). */
int nn_ckpt_read_info(const char *path, nn_ckpt_info *info, char *err, size_t errcap);
/* Verifies a checkpoint's bytes (size, magic, version, length, checksum) and decodes its header;
 * -1 with the reason in why. The arenas follow the header as little-endian float32. */
int nn_ckpt_parse(nn_ckpt_info *info, const uint8_t *p, size_t n, char *why, size_t cap);
/* Refuses (-1, naming the first differing field) a checkpoint whose model, shapes, counts, batch,
 * shard or data differ from want. */
int nn_ckpt_check(const nn_ckpt_info *have, const nn_ckpt_info *want, char *err, size_t errcap);
/* Verifies the file, checks it against want, then fills the arrays (sized by want's counts). */
int nn_ckpt_load(const char *path, nn_ckpt_info *info, float *params, float *momentum,
                 float *buffers, const nn_ckpt_info *want, char *err, size_t errcap);

/* The sharded form (train --dp sharded --save-format sharded): each rank writes its own file,
 * its ranges of the parameter and momentum arenas (n_momentum == n_params) and its batch-norm
 * buffers, with the ranges and the set's id in its header; once every rank's file is in place
 * rank 0 writes the manifest at the --save path (the header, then each rank's file length and
 * crc32). nn_ckpt_read_info reads a manifest too (info->sharded set). Every file is replaced
 * whole (temporary, then rename); the files of a set are named after its global step, so a save
 * cut short leaves the previous set and its manifest as they were. */
#define NN_CKPT_MAX_RANKS 65536
typedef struct {
  uint64_t bytes;
  uint32_t crc;             /* the crc32 the file ends with (of all its bytes before it) */
} nn_ckpt_shard_ref;
/* Rank `rank` of `world`'s file in the set saved after global step gstep under the manifest
 * path: MANIFEST.stepG.rankRofN. */
void nn_ckpt_shard_path(char *out, size_t cap, const char *manifest, int64_t gstep, int rank, int world);
/* Writes this rank's file at path (info: rank, world, sharded, set_id, the whole arenas' counts);
 * the nr ranges [off[i], off[i] + cnt[i]) of the arenas. ref gets its length and checksum. 0, or
 * -1 with err naming the file. */
int nn_ckpt_shard_save(const char *path, const nn_ckpt_info *info, const size_t *off, const size_t *cnt, int nr,
                       const float *params, const float *momentum, const float *buffers, nn_ckpt_shard_ref *ref,
                       char *err, size_t errcap);
/* Rank 0, after every rank's nn_ckpt_shard_save: the manifest (refs: info->world of them). */
int nn_ckpt_manifest_save(const char *path, const nn_ckpt_info *info, const nn_ckpt_shard_ref *refs, char *err,
                          size_t errcap);
/* want->rank's file of the set whose manifest is at path, verified (framing, checksum, the
 * manifest's length and checksum for it, the set's id), checked against want (as nn_ckpt_check,
 * and its stage and rank count) and against this run's ranges, then its ranges of the arenas and
 * its buffers filled (arenas of want's counts). 0, or -1 with err naming the file and why. */
int nn_ckpt_shard_load(const char *path, const nn_ckpt_info *want, const size_t *off, const size_t *cnt, int nr,
                       float *params, float *momentum, float *buffers, char *err, size_t errcap);

#endif
