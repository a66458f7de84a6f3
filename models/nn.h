/* models: ResNets on oneDNN (CPU) or cuDNN/cuBLAS (GPU, NN_DEV_CUDA), their parameter arenas,
 * SGD, and the data API (nn_data.h).
 *
 * Parameters, gradients and momentum live in three contiguous float arenas in PyTorch's plain
 * layout, ordered as backward produces the gradients (last layer first; weight before bias), so
 * data parallelism's gradient buckets are plain views of the arena. Activations stay in oneDNN's
 * blocked layouts (CPU) or NHWC (GPU). A GPU net keeps the arenas on the device in the same
 * layout, with host copies kept current (nn_net_params). */
#ifndef FABENCH_NN_H
#define FABENCH_NN_H

#include <stddef.h>
#include <stdint.h>

typedef struct nn_net nn_net;

/* Memory for the gradient arena from the caller: data parallelism takes it from collectives'
 * coll_mem_alloc, so ranks on one host can reduce in each other's copy. alloc returns 64-byte
 * aligned memory of `bytes` or NULL; free takes what alloc gave. */
typedef struct {
  void *(*alloc)(void *ctx, size_t bytes);
  void (*free)(void *ctx, void *p);
  void *ctx;
} nn_arena_alloc;

enum nn_device { NN_DEV_CPU = 0, NN_DEV_CUDA = 1 };
/* GPU arithmetic: fp32 (FMA only), tf32 (tensor cores on fp32 data), bf16 (bf16 activations and
   convolution weights, fp32 master weights, gradients, BN and loss; bf16 keeps fp32's exponent
   range, so no loss scaling). The CPU computes fp32 only. */
enum nn_precision { NN_PREC_FP32 = 0, NN_PREC_TF32 = 1, NN_PREC_BF16 = 2 };

/* nn_net_create's return when the device asked for is absent: built without CUDA/cuDNN, no GPU, or
   no driver (the command's exit status 3). Other failures return -1. */
#define NN_ENODEV (-3)

typedef struct {
  const char *model;  /* "mlp:IN,W1,...,OUT" (fully connected, ReLU between; IN = C*H*W, OUT =
                         classes) or "fc6" (6 layers: IN,1024,1024,512,512,256,classes);
                         "resnet18","resnet34","resnet50","resnet101","resnet152" (torchvision);
                         "resnet20","resnet32","resnet56", any 6n+2 depth (He et al. CIFAR);
                         an optional "-wN" suffix sets the base width (default 64, CIFAR 16),
                         e.g. "resnet18-w4" for small tests */
  int in_c, in_h, in_w; /* input image shape (1x28x28, 3x32x32, 3x224x224, ...) */
  int classes;
  int batch;          /* largest batch a step will be given */
  int threads;        /* oneDNN/OpenMP threads; 0 = all cores */
  uint64_t seed;      /* weight initialisation (PyTorch's default inits: kaiming-uniform a=sqrt(5)
                         for conv/linear, BN weight 1 bias 0) */
  const nn_arena_alloc *grad_alloc; /* NULL: the net allocates its gradient arena itself (on a
                                       GPU net: the host copy of the gradients) */
  int device;         /* enum nn_device */
  int precision;      /* enum nn_precision; NN_PREC_FP32 on the CPU */
  int cudnn_search;   /* GPU: 0 = cuDNN's heuristics pick each convolution's algorithms, 1 = timed
                         search (cudnnFind*AlgorithmEx); workspace bounded either way */
  int gpu;            /* GPU: CUDA device ordinal, or with gpu_of_rank a local rank */
  int gpu_of_rank;    /* 1: the device is gpu modulo the device count (ranks share GPUs) */
} nn_net_opts;

/* The parameter count of a model on an input shape, without building it (the gradient bytes a
   data-parallel step all-reduces are 4 x this). 0, or -1 with a message in err. */
int nn_model_param_count(const char *model, int in_c, int in_h, int in_w, int classes,
                         size_t *count, char *err, size_t errcap);

/* 1 for a fully connected model ("mlp:IN,W,...,OUT", "fc6"), which partitioned training cuts;
   0 for the others (ResNets). */
int nn_model_is_mlp(const char *model);

/* 0 where nn_net_create knows the model's name, else -1 with the names it knows in err (a caller's
   usage error, before any setup). */
int nn_model_check(const char *model, char *err, size_t errcap);

/* Returns 0, NN_ENODEV (no such device), or -1; with a message in err. */
int nn_net_create(nn_net **out, const nn_net_opts *o, char *err, size_t errcap);
void nn_net_destroy(nn_net *net);

typedef struct { double fwd_s, bwd_s; } nn_step_times;

/* One training step's compute: x is n images, float NCHW contiguous (n <= batch), labels in
   [0, classes). Forward in training mode (batch statistics; running mean/var updated with PyTorch's
   momentum 0.1 and unbiased variance), mean cross-entropy loss, backward; gradients are written (not
   accumulated) into the gradient arena. correct = argmax hits. t may be NULL. */
int nn_net_train_step(nn_net *net, const float *x, const int32_t *labels, int n, float *loss,
                      int *correct, nn_step_times *t, char *err, size_t errcap);

/* Called during backward, on its thread, each time a layer's backward has ended (layer: its
   index in the layer table; -1 for a step's last call) and the first `ready` floats of the
   gradient arena are final. Within a step `ready` never decreases and the last call gives the
   whole count, so a reducer can start on a bucket while backward goes on. fn NULL: no calls.
   GPU nets queue the whole backward first, then report each layer with parameters as its
   gradients land where they are read (host arena or device memory), holding back no device
   work. */
typedef void (*nn_grad_ready_fn)(void *ctx, int layer, size_t ready);
void nn_net_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx);

/* Called by the training forward (nn_net_train_step), on its thread, just before a layer with
   parameters reads them (the arena's floats [offset, offset + count)). The hook may wait for
   them and update them (nn_sgd_step_range), so the next step's forward can start while the
   last step's gradients are still being reduced. A non-zero return stops the forward with the
   hook's message in err. fn NULL: no calls. -1 where the engine cannot call it (GPU nets queue
   the whole forward at once: update before the step). */
typedef int (*nn_fwd_layer_fn)(void *ctx, int layer, size_t offset, size_t count, char *err,
                               size_t errcap);
int nn_net_on_forward(nn_net *net, nn_fwd_layer_fn fn, void *ctx);

/* Inference mode (running statistics): adds the summed loss and the correct count over n images. */
int nn_net_eval(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum,
                int *correct, char *err, size_t errcap);

/* The contiguous arenas, in the plain layout and backward order. Writing parameters is allowed
   (resume, rank 0's broadcast); call nn_net_params again after writing through an older pointer.
   Taps that only ever see padding get zero gradients. CPU nets: the arenas themselves.
   GPU nets: host copies, downloaded where the device changed them and then marked written, so
   the next device use uploads them; a pointer kept across a step is stale. nn_net_grads also
   switches to host gradients (each backward copies them into the host arena, nn_sgd_step reads
   them back), so a host-memory reducer may rewrite them in place; nn_net_grads_on_host(net, 0)
   switches back. */
float *nn_net_params(nn_net *net, size_t *count);
float *nn_net_grads(nn_net *net, size_t *count);
float *nn_net_momentum(nn_net *net, size_t *count);
float *nn_net_buffers(nn_net *net, size_t *count); /* BN running mean/var, for checkpoints */

/* The optimizers (nn_optim.c): torch.optim.SGD, Adam and AdamW. */
enum nn_optim_kind { NN_OPT_SGD = 0, NN_OPT_ADAM = 1, NN_OPT_ADAMW = 2 };

typedef struct {
  float lr, momentum, weight_decay;
  int nesterov;
  float grad_scale; /* SGD reads each gradient times this: data parallelism's 1/N average folded
                       into the optimizer's one pass over the arena instead of a pass of its own
                       (0 means 1; a power of two keeps the average exact) */
  /* Adam and AdamW (kind): the momentum arena holds the first moment (exp_avg), v the second
     (exp_avg_sq, as many floats as the parameters, zeroed before the first step); t is the step
     being taken, from 1, for the bias corrections. momentum and nesterov are SGD's only. */
  int kind;                 /* enum nn_optim_kind */
  double beta1, beta2, eps;
  int64_t t;
  float *v;
} nn_sgd_opts;
/* "sgd", "adam", "adamw" to enum nn_optim_kind; -1 for another word. */
int nn_optim_parse(const char *name);
const char *nn_optim_name(int kind);

/* torch.optim.SGD semantics (weight decay added to the gradient, momentum buffer, dampening 0,
   nesterov optional); with kind Adam or AdamW, torch.optim.Adam's (weight decay added to the
   gradient) or AdamW's (decoupled: p *= 1 - lr wd), bias-corrected, eps outside the square root,
   no amsgrad. Applies to every parameter (PyTorch's default applies weight decay to BN
   parameters too). A GPU net keeps Adam's second moment on the device (v unused), zeroed by
   a step with t 1. */
void nn_sgd_step(nn_net *net, const nn_sgd_opts *o);
/* The same on the arenas' floats [offset, offset + count) only (an update layer by layer: the
   result is bit-identical to nn_sgd_step once every float has been updated once). */
void nn_sgd_step_range(nn_net *net, const nn_sgd_opts *o, size_t offset, size_t count);

const char *nn_backend_version(void); /* e.g. "oneDNN 2.6.3" for run.json */
/* How many of the primitives built so far run on the CPU backend's reference code (hundreds of
 * times slower than its JIT ones: oneDNN's kernels for this CPU's ISA refuse a shape); *first
 * (if given) names the first. 0 for GPU nets. */
int nn_net_slow_primitives(const nn_net *net, const char **first);

/* 0 when a net can be made on device (enum nn_device; the CPU always), else NN_ENODEV and why.
   For CUDA, *gpu is the ordinal, or with of_rank a local rank, made an ordinal (modulo the count). */
int nn_device_check(int device, int *gpu, int of_rank, char *err, size_t errcap);

/* GPU nets. On a CPU net these return NULL, 0 or do nothing. */
enum nn_arena { NN_ARENA_PARAMS, NN_ARENA_GRADS, NN_ARENA_MOMENTUM, NN_ARENA_BUFFERS };
int nn_net_device(const nn_net *net);            /* enum nn_device */
/* The net's backend for records: libraries, precision and device ("cuDNN 9.19.0 cuBLAS 13.0.0
   bf16 <GPU name>"). */
const char *nn_net_backend(const nn_net *net);
/* The device arena (its current contents: uploads a host copy marked written first) and the CUDA
   stream (a cudaStream_t) every device operation of the net runs on, in order. */
float *nn_net_device_arena(nn_net *net, enum nn_arena a, size_t *count);
void *nn_net_stream(nn_net *net);
void nn_net_grads_on_host(nn_net *net, int on);
/* Every host copy up to date (to_host 1), or every written host copy uploaded (0). */
int nn_net_sync(nn_net *net, int to_host, char *err, size_t errcap);
/* Starts copying the next batch to the device on the net's copy stream, overlapping the step that
   runs meanwhile; the next train step or eval given the same x and n uses it. x must not change
   until then. Faster from page-locked memory (nn_host_alloc). CPU nets: nothing. */
int nn_net_prefetch(nn_net *net, const float *x, int n, char *err, size_t errcap);
/* Page-locked host memory of the net's device (plain malloc for a CPU net), for batches. Freeing
   it waits for a prefetch from it and forgets it, so new memory at that address is never taken
   for the old batch. */
void *nn_host_alloc(const nn_net *net, size_t bytes);
void nn_host_free(nn_net *net, void *p);

/* Additions beyond the issue-5 contract. */

/* Logits of the last train step or eval call: n x classes, row-major. */
const float *nn_net_logits(const nn_net *net, int *n, int *classes);

/* One parameter tensor of the arena, in arena order (index 0 = first gradient produced). */
typedef struct {
  const char *kind;   /* "conv.weight", "bn.weight", "bn.bias", "fc.weight", "fc.bias" */
  int layer;          /* index in the layer table (forward order) */
  size_t offset, count; /* in floats, into the params/grads/momentum arenas */
} nn_param_info;
int nn_net_param_tensors(const nn_net *net, const nn_param_info **info);

#include "nn_data.h"
#include "nn_train.h"
#include "nn_part.h"

#endif
