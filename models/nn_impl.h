/* models: private header. The layer table, its ResNet builders, and the engine entry points the
 * tests use to run any table (single layers included) with plain NCHW inputs and outputs. */
#ifndef FABENCH_NN_IMPL_H
#define FABENCH_NN_IMPL_H

#include "nn.h"

enum nn_op { NN_CONV, NN_BN, NN_ADD_RELU, NN_MAXPOOL, NN_AVGPOOL, NN_FC };

/* One layer. Values are activations: value 0 is the input image, every layer makes one value. */
typedef struct {
  enum nn_op op;
  int in, in2, out;          /* value ids; in2 only for NN_ADD_RELU */
  int cout, k, stride, pad;  /* conv: out channels, kernel, stride, pad; pools: k, stride, pad;
                                avgpool k 0 = global; fc: cout = outputs */
  int relu;                  /* NN_BN, NN_FC: ReLU fused after the normalization or the product */
} nn_layer;

typedef struct { int c, h, w; } nn_shape;

typedef struct {
  int nlayers, nvalues, cap;
  nn_layer *layers;
  nn_shape *shapes;          /* per value; the fc output has h = w = 1 */
} nn_table;

/* Shape of an appended layer's output is computed here; returns the new value id or -1. */
int nn_table_init(nn_table *t, int in_c, int in_h, int in_w);
int nn_table_add(nn_table *t, nn_layer l, char *err, size_t errcap);
void nn_table_free(nn_table *t);
int nn_table_resnet(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes,
                    char *err, size_t errcap);
/* Fully connected networks (nn_mlp.c): "mlp:IN,W,...,OUT" or "fc6", a ReLU fused into every
   layer but the last; nn_mlp_check checks the name alone. nn_table_model: any model's table. */
int nn_table_mlp(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes, char *err,
                 size_t errcap);
int nn_mlp_check(const char *model, char *err, size_t errcap);
int nn_table_model(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes, char *err,
                   size_t errcap);

/* Parameter count of a table's layer (the arena holds them in reverse layer order). */
size_t nn_layer_param_count(const nn_table *t, int layer);

/* Engine over an arbitrary table. need_dx: backward also produces the input's gradient. */
typedef struct {
  int batch, threads, need_dx;
  uint64_t seed;
  const nn_arena_alloc *grad_alloc; /* NULL: calloc */
  int device, precision, search, gpu, gpu_of_rank; /* nn_net_opts' */
} nn_engine_opts;
int nn_net_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err,
                        size_t errcap);
/* Forward (train: batch statistics and running-stat update; else running statistics) of n images;
   y receives the last value in plain NCHW (or [n, cout] after fc). */
int nn_net_forward(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap);
/* Backward of the last nn_net_forward(train=1) from a plain dy; writes the gradient arena and,
   with need_dx, dx (plain NCHW). */
int nn_net_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap);

/* The GPU engine (nn_cuda.c) behind the same functions: its nets begin with a head whose ops the
   network front (nn_net.c) dispatches to; a CPU net's head is zero (ops NULL). */
typedef struct nn_net_ops {
  void (*destroy)(nn_net *net);
  int (*train_step)(nn_net *net, const float *x, const int32_t *labels, int n, float *loss, int *correct,
                    nn_step_times *t, char *err, size_t errcap);
  int (*eval)(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum, int *correct,
              char *err, size_t errcap);
  int (*forward)(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap);
  int (*backward)(nn_net *net, const float *dy, float *dx, char *err, size_t errcap);
  void (*on_grad_ready)(nn_net *net, nn_grad_ready_fn fn, void *ctx);
  float *(*arena)(nn_net *net, enum nn_arena a, size_t *count);
  void (*sgd_step)(nn_net *net, const nn_sgd_opts *o, size_t offset, size_t count); /* a range */
  const float *(*logits)(const nn_net *net, int *n, int *classes);
  int (*param_tensors)(const nn_net *net, const nn_param_info **info);
} nn_net_ops;
typedef struct {
  int device;                /* enum nn_device */
  const nn_net_ops *ops;     /* NULL: the oneDNN engine */
} nn_net_head;
#define NN_OPS(net) ((net) ? ((const nn_net_head *)(const void *)(net))->ops : NULL)

/* The CPU engine (nn_dnnl.c) behind the front: the public functions of the same names for a CPU
   net (head zero; a NULL net where the public one takes one). Without oneDNN none is made:
   nn_dnnl_available and nn_dnnl_create_table say so. */
int nn_dnnl_available(char *err, size_t errcap);
int nn_dnnl_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap);
void nn_dnnl_destroy(nn_net *net);
int nn_dnnl_forward(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap);
int nn_dnnl_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap);
int nn_dnnl_train_step(nn_net *net, const float *x, const int32_t *labels, int n, float *loss, int *correct,
                       nn_step_times *t, char *err, size_t errcap);
int nn_dnnl_eval(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum, int *correct,
                 char *err, size_t errcap);
void nn_dnnl_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx);
int nn_dnnl_on_forward(nn_net *net, nn_fwd_layer_fn fn, void *ctx);
float *nn_dnnl_params(nn_net *net, size_t *count);
float *nn_dnnl_grads(nn_net *net, size_t *count);
float *nn_dnnl_momentum(nn_net *net, size_t *count);
float *nn_dnnl_buffers(nn_net *net, size_t *count);
void nn_dnnl_sgd_step_range(nn_net *net, const nn_sgd_opts *o, size_t offset, size_t count);
const float *nn_dnnl_logits(const nn_net *net, int *n, int *classes);
int nn_dnnl_param_tensors(const nn_net *net, const nn_param_info **info);
int nn_dnnl_slow_primitives(const nn_net *net, const char **first);

/* A GPU net over a table: 0, NN_ENODEV or -1 with the cause in err. */
int nn_cuda_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err,
                         size_t errcap);

/* The arenas' layout, the same in both engines: parameters in reverse layer order (backward's),
   each layer's weight before its bias; batch norm's running statistics in the buffer arena.
   poff, boff and pcount (nlayers each) get each layer's offsets and parameter count, pinfo
   (room for 2 x nlayers, or NULL) the tensors; returns their number, the arenas' sizes in *np,
   *nb. */
int nn_arena_layout(const nn_table *t, size_t *poff, size_t *boff, size_t *pcount, nn_param_info *pinfo,
                    size_t *np, size_t *nb);

/* PyTorch's default initialisation of a table's parameters (both engines: the same seed gives the
   same weights) into arenas laid out as nn_arena_layout says: 0, or -1 (out of memory). */
int nn_params_init(const nn_table *t, uint64_t seed, float *params, float *bufs);

/* Mean softmax cross-entropy over n rows of logits [n, classes]; dlogits (may be NULL) gets
   d(loss)/d(logits); returns the summed per-row loss in *loss_sum and the argmax hits. */
void nn_softmax_xent(const float *logits, const int32_t *labels, int n, int classes, double *loss_sum,
                     int *correct, float *dlogits);
void nn_sgd_apply(float *p, const float *g, float *m, size_t count, const nn_sgd_opts *o);
/* The optimizer o->kind names over count floats of the arenas (v: the second moment's, at the
   same offset; NULL for SGD), nn_optim.c. */
void nn_optim_apply(float *p, const float *g, float *m, float *v, size_t count, const nn_sgd_opts *o);
/* Adam's and AdamW's per-step scalars from o (its kind, t, lr, ...) for nn_adam_one (nn_adam.h),
   on the CPU and in the GPU kernel alike. */
typedef struct nn_adam_coef nn_adam_coef;
void nn_adam_coefs(nn_adam_coef *c, const nn_sgd_opts *o);

/* Deterministic uniform floats in [lo, hi) from a seed (splitmix64 state). */
float nn_rand_uniform(uint64_t *state, float lo, float hi);

#endif
