/* models, partitioned training (Karadağ and Topaloğlu 2024, "Partitioned Neural Network Training
 * via Synthetic Intermediate Labels", arXiv 2403.11204). Included at the end of nn.h.
 *
 * A fully connected network is cut in two. Each class gets a fixed random vector at the cut, its
 * synthetic intermediate label (SIL). The left part learns to map an image to its class's SIL
 * (squared error); the right part learns to map the SILs to the classes (cross-entropy). The parts
 * train independently (on different ranks, nothing crossing between them); at inference they run
 * in sequence, the left's output being the right's input. The joined network is the model itself:
 * its parameter arena is the right part's followed by the left's (arenas are in backward order). */
#ifndef FABENCH_NN_PART_H
#define FABENCH_NN_PART_H

#include <stddef.h>
#include <stdint.h>

/* The parts a model may be cut into (2: left and right). */
#define NN_PART_MAX 2

/* Where an MLP is cut into `parts`: the left part is layers [0, *cut), the right the rest; *width
   is the cut's width (the left's outputs, the right's inputs). The cut is the middle layer count
   (L / 2, the left the smaller half of an odd count). 0, or -1 with why in err (not an MLP, one
   layer, parts other than 2). */
int nn_part_cut(const char *model, int in_c, int in_h, int in_w, int classes, int parts, int *cut,
                int *width, char *err, size_t errcap);

/* The synthetic intermediate labels: `classes` rows of `width` floats, uniform in [0, 1) (the
   cut follows a ReLU), a function of seed alone, no two rows equal. 0, or -1 (classes or width
   below 1). */
int nn_sil_make(float *sil, int classes, int width, uint64_t seed);

/* Part `part` (0 left, 1 right) of o's MLP as a net of its own: the left takes o's images and ends
   with the cut's ReLU; the right takes width x 1 x 1 inputs and ends with the classes. Weights
   from o->seed (each part its own draw). Returns as nn_net_create. */
int nn_part_net_create(nn_net **out, const nn_net_opts *o, int part, int parts, char *err,
                       size_t errcap);

/* The joined network's parameters (nl + nr floats) from the parts' arenas, and back. */
void nn_part_join(float *full, const float *left, size_t nl, const float *right, size_t nr);
void nn_part_split(const float *full, float *left, size_t nl, float *right, size_t nr);

/* The left part at inference: n images in, the cut's n x width activations out (what crosses to
   the right part's rank). */
int nn_part_left_infer(nn_net *left, const float *x, int n, float *out, char *err, size_t errcap);

/* The right part's inputs for a batch: row labels[i] of sil for each of the n images. */
void nn_part_sil_rows(float *x, const int32_t *labels, int n, const float *sil, int width);

/* One training step of the left part (labels in [0, classes), sil classes x width): forward of n
   images, the loss (the squared error against the images' SILs, the mean over images and width,
   as PyTorch's MSELoss), backward.
   Gradients are written into the net's arena as nn_net_train_step's. scratch: 2 x n x width
   floats. t may be NULL. */
int nn_part_left_step(nn_net *left, const float *x, const int32_t *labels, int n, const float *sil,
                      int classes, int width, float *scratch, float *loss, nn_step_times *t, char *err,
                      size_t errcap);

/* Training one part for whole epochs over a training set: SGD (momentum, weight decay) on the
   schedule; the left on the loader's images, the right on its SILs in the same per-epoch order of
   labels. on_step (may be NULL) after each step; non-zero stops the run as failed. */
typedef struct {
  nn_net *net;
  int part;                   /* 0 left, 1 right */
  const nn_dataset *train;
  const float *sil;           /* classes x width */
  int width;
  int batch;
  uint64_t seed;              /* the per-epoch order */
  int64_t epochs;
  int64_t stop_step;          /* 0: every step of the epochs */
  nn_lr_sched sched;
  nn_sgd_opts sgd;
  int prefetch;
  void *ctx;
  int (*on_step)(void *ctx, int64_t step, double loss);
} nn_part_train_opts;

typedef struct {
  int64_t steps;
  double train_s, final_loss;
} nn_part_train_result;

int nn_part_train(nn_part_train_result *r, const nn_part_train_opts *o, char *err, size_t errcap);

#endif
