/* models: the network front. Every public nn_net_* call lands here and goes to the engine that
 * made the net: a GPU net's head names its engine's functions (nn_cuda.c's nn_net_ops); a CPU
 * net's head is zero and its calls go to the oneDNN engine (nn_dnnl.c's nn_dnnl_*). */
#include <stdint.h>
#include <stdio.h>

#include "nn_impl.h"

/* Either build: the options' ResNet on the engine nn_net_create_table picks. */
int nn_net_create(nn_net **out, const nn_net_opts *o, char *err, size_t errcap) {
  *out = NULL;
  if (!o) {
    snprintf(err, errcap, "no network options");
    return -1;
  }
  /* before the table: without oneDNN, the model is not the trouble */
  if (o->device != NN_DEV_CUDA && nn_dnnl_available(err, errcap)) return -1;
  nn_table t;
  if (nn_table_model(&t, o->model, o->in_c, o->in_h, o->in_w, o->classes, err, errcap)) return -1;
  nn_engine_opts eo = {.batch = o->batch, .threads = o->threads, .need_dx = 0, .seed = o->seed,
                       .grad_alloc = o->grad_alloc, .device = o->device, .precision = o->precision,
                       .search = o->cudnn_search, .gpu = o->gpu, .gpu_of_rank = o->gpu_of_rank};
  int rc = nn_net_create_table(out, &t, &eo, err, errcap);
  nn_table_free(&t);
  return rc;
}

int nn_net_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  *out = NULL;
  if (o && o->device == NN_DEV_CUDA) return nn_cuda_create_table(out, t, o, err, errcap);
  return nn_dnnl_create_table(out, t, o, err, errcap);
}

void nn_net_destroy(nn_net *net) {
  if (NN_OPS(net))
    NN_OPS(net)->destroy(net);
  else
    nn_dnnl_destroy(net);
}

int nn_net_forward(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap) {
  if (NN_OPS(net)) return NN_OPS(net)->forward(net, x, n, train, y, err, errcap);
  return nn_dnnl_forward(net, x, n, train, y, err, errcap);
}

int nn_net_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap) {
  if (NN_OPS(net)) return NN_OPS(net)->backward(net, dy, dx, err, errcap);
  return nn_dnnl_backward(net, dy, dx, err, errcap);
}

int nn_net_train_step(nn_net *net, const float *x, const int32_t *labels, int n, float *loss, int *correct,
                      nn_step_times *t, char *err, size_t errcap) {
  if (NN_OPS(net)) return NN_OPS(net)->train_step(net, x, labels, n, loss, correct, t, err, errcap);
  return nn_dnnl_train_step(net, x, labels, n, loss, correct, t, err, errcap);
}

int nn_net_eval(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum, int *correct,
                char *err, size_t errcap) {
  if (NN_OPS(net)) return NN_OPS(net)->eval(net, x, labels, n, loss_sum, correct, err, errcap);
  return nn_dnnl_eval(net, x, labels, n, loss_sum, correct, err, errcap);
}

void nn_net_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx) {
  if (NN_OPS(net))
    NN_OPS(net)->on_grad_ready(net, fn, ctx);
  else
    nn_dnnl_on_grad_ready(net, fn, ctx);
}

int nn_net_on_forward(nn_net *net, nn_fwd_layer_fn fn, void *ctx) {
  if (NN_OPS(net)) return fn ? -1 : 0; /* GPU nets queue their whole forward at once */
  return nn_dnnl_on_forward(net, fn, ctx);
}

float *nn_net_params(nn_net *net, size_t *count) {
  if (NN_OPS(net)) return NN_OPS(net)->arena(net, NN_ARENA_PARAMS, count);
  return nn_dnnl_params(net, count);
}

float *nn_net_grads(nn_net *net, size_t *count) {
  if (NN_OPS(net)) return NN_OPS(net)->arena(net, NN_ARENA_GRADS, count);
  return nn_dnnl_grads(net, count);
}

float *nn_net_momentum(nn_net *net, size_t *count) {
  if (NN_OPS(net)) return NN_OPS(net)->arena(net, NN_ARENA_MOMENTUM, count);
  return nn_dnnl_momentum(net, count);
}

float *nn_net_buffers(nn_net *net, size_t *count) {
  if (NN_OPS(net)) return NN_OPS(net)->arena(net, NN_ARENA_BUFFERS, count);
  return nn_dnnl_buffers(net, count);
}

void nn_sgd_step_range(nn_net *net, const nn_sgd_opts *o, size_t offset, size_t count) {
  if (NN_OPS(net))
    NN_OPS(net)->sgd_step(net, o, offset, count);
  else
    nn_dnnl_sgd_step_range(net, o, offset, count);
}

void nn_sgd_step(nn_net *net, const nn_sgd_opts *o) { nn_sgd_step_range(net, o, 0, SIZE_MAX); }

const float *nn_net_logits(const nn_net *net, int *n, int *classes) {
  if (NN_OPS(net)) return NN_OPS(net)->logits(net, n, classes);
  return nn_dnnl_logits(net, n, classes);
}

int nn_net_param_tensors(const nn_net *net, const nn_param_info **info) {
  if (NN_OPS(net)) return NN_OPS(net)->param_tensors(net, info);
  return nn_dnnl_param_tensors(net, info);
}

int nn_net_slow_primitives(const nn_net *net, const char **first) {
  if (first) *first = "";
  if (!net || NN_OPS(net)) return 0; /* only oneDNN falls back to reference code */
  return nn_dnnl_slow_primitives(net, first);
}
