/* models: the GPU engine. Convolutions on cuDNN 9, fully connected layers (the classifier, MLPs)
 * on cuBLAS, everything else on our kernels (nn_cuda_kern.cu): batch norm with its ReLU, residual
 * add + ReLU, pooling, bias + ReLU, softmax cross-entropy, SGD, Adam and AdamW. Same layer table,
 * arenas and initialisation as the oneDNN engine; activations NHWC in fp32 or bf16.
 *
 * cuDNN's legacy convolution calls, not the graph API: deprecated in 9.x but shipped, they take
 * bf16/NHWC/tensor ops in a few lines of C where the graph API's C interface takes a hundred per
 * operation; it would only add fusing BN statistics into the epilogue. Batch norm is ours since
 * cuDNN's legacy BN has no bf16 (PyTorch avoids it too); ours fuses ReLU, keeps PyTorch's running
 * statistics and sums channels in double.
 *
 * Streams: a net's work runs in order on one stream; input batches and host copies of gradients
 * go on a second, copy stream from page-locked memory, so the next upload overlaps a step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_check.h"
#include "nn_impl.h"

#if FABENCH_HAVE_CUDA && FABENCH_HAVE_CUDNN

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "nn_blas.h"
#include "nn_cuda.h"

#define BN_EPS 1e-5f
#define BN_MOMENTUM 0.1f
#define NPLANS 4
#define WS_LIMIT ((size_t)1 << 30) /* workspace of one convolution call at most: 1 GiB */
#define NALGO 8

enum { SYNCED, DEV_NEWER, HOST_NEWER };

typedef struct {
  cudnnTensorDescriptor_t x, y;
  cudnnConvolutionFwdAlgo_t fa;
  cudnnConvolutionBwdDataAlgo_t da;
  cudnnConvolutionBwdFilterAlgo_t wa;
  cudnnMathType_t fm, dm, wm;  /* each algorithm's math type (the descriptors are the layer's,
                                  shared by the plans: set before each call) */
  size_t ws;
} convplan;

typedef struct {
  int n;
  long uses;
  convplan *cv; /* per layer; conv layers only */
} plan;

typedef struct {
  size_t poff, pcount, boff;
  float beta1, beta2;         /* backward writes (0) or adds to (1) its inputs' gradients */
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cf, cd, cw; /* forward, backward data, backward filter (own math) */
  void *w, *dw;               /* conv: weights and their gradient, OHWI in the compute type */
  float *mean, *invstd, *a, *b, *k;
  double *acc;
  int *idx;                   /* max pooling: the winners */
  float *fy, *fdy;            /* a hidden fully connected layer (MLPs): output and its gradient,
                                 [b, cout] fp32, read by the next one */
  cudaEvent_t ready;          /* backward: this layer's gradients are final where they are read */
} lstate;

typedef struct {
  nn_net_head head;
  nn_table t;
  nn_engine_opts o;
  int classes, bf, dev;
  size_t esz;                 /* bytes per activation element */
  lstate *L;
  nn_param_info *pinfo;
  int npinfo;
  size_t cnt[4];              /* floats per arena */
  float *d[4], *h[4];         /* device arenas and their host copies */
  int state[4];
  int grads_host, grads_registered;
  nn_arena_alloc galloc;
  void **val, **dval;         /* per value, NHWC, for the largest batch */
  float *fcin, *fcdx, *logits, *dlogits, *rowloss, *yplain;
  int *hits, *labels;
  float *xin[2];              /* device copies of input batches (plain NCHW float) */
  struct { const float *x; int n, pending; cudaEvent_t done; } slot[2];
  float *hx;                  /* page-locked staging of a pageable batch */
  int32_t *hlab;
  float *hloss, *hlogits;
  int *hhits;
  void *ws;
  size_t ws_size;
  cudnnHandle_t dnn;
  cublasHandle_t blas;
  nn_blas_api bl;
  cudaStream_t st, cp;
  cudaEvent_t e0, e1, e2, egrad;
  plan *main, *cache[NPLANS];
  plan *last;
  long clock;
  uint64_t pver, wver;
  int last_n, fwd_train;
  nn_grad_ready_fn ready_fn;
  void *ready_ctx;
  char name[512];
  float *adam_v;              /* Adam's second moment, made by its first step */
  char fail[320];             /* an optimizer step's error, for the next training step */
} cnet;

static cnet *C(nn_net *n) { return (cnet *)(void *)n; }
static const cnet *CC(const nn_net *n) { return (const cnet *)(const void *)n; }

/* ------------------------------------------------------------------------------------------------
 * errors: every call site names what failed and where */

static int cu_fail(char *err, size_t cap, cudaError_t e, const char *what, int layer) {
  snprintf(err, cap, "CUDA %s at layer %d: %s", cudaGetErrorString(e), layer, what);
  return -1;
}
#define CU(call, layer)                                                                            \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) return cu_fail(err, errcap, e_, #call, layer);                          \
  } while (0)
#define DNN(call, layer)                                                                           \
  do {                                                                                             \
    cudnnStatus_t s_ = (call);                                                                     \
    if (s_ != CUDNN_STATUS_SUCCESS) {                                                              \
      snprintf(err, errcap, "cuDNN %s at layer %d: %s", cudnnGetErrorString(s_), layer, #call);    \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)
#define BLAS(call, layer)                                                                          \
  do {                                                                                             \
    cublasStatus_t s_ = (call);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                             \
      snprintf(err, errcap, "cuBLAS %s at layer %d: %s", n->bl.cublasGetStatusString(s_), layer, #call); \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)

static cudnnDataType_t dtype(const cnet *n) { return n->bf ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT; }
static size_t velems(const cnet *n, int v) {
  nn_shape s = n->t.shapes[v];
  return (size_t)s.c * s.h * s.w;
}

/* ------------------------------------------------------------------------------------------------
 * host copies of the arenas */

static int to_host(cnet *n, int a, char *err, size_t errcap) {
  if (n->state[a] != DEV_NEWER) return 0;
  CU(cudaMemcpyAsync(n->h[a], n->d[a], n->cnt[a] * sizeof(float), cudaMemcpyDeviceToHost, n->st), -1);
  CU(cudaStreamSynchronize(n->st), -1);
  n->state[a] = SYNCED;
  return 0;
}

static int to_dev(cnet *n, int a, char *err, size_t errcap) {
  if (n->state[a] != HOST_NEWER) return 0;
  CU(cudaMemcpyAsync(n->d[a], n->h[a], n->cnt[a] * sizeof(float), cudaMemcpyHostToDevice, n->st), -1);
  if (a == NN_ARENA_PARAMS) n->pver++;
  n->state[a] = SYNCED;
  return 0;
}

static int upload_all(cnet *n, char *err, size_t errcap) {
  for (int a = 0; a < 4; a++)
    if (to_dev(n, a, err, errcap)) return -1;
  return 0;
}

/* ------------------------------------------------------------------------------------------------
 * plans: descriptors and algorithms of every convolution for one batch size */

static void plan_free(cnet *n, plan *p) {
  if (!p) return;
  for (int i = 0; i < n->t.nlayers; i++) {
    if (p->cv[i].x) cudnnDestroyTensorDescriptor(p->cv[i].x);
    if (p->cv[i].y) cudnnDestroyTensorDescriptor(p->cv[i].y);
  }
  free(p->cv);
  free(p);
}

static int nhwc_desc(cnet *n, cudnnTensorDescriptor_t *d, int b, nn_shape s, char *err, size_t errcap,
                     int layer) {
  DNN(cudnnCreateTensorDescriptor(d), layer);
  DNN(cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NHWC, dtype(n), b, s.c, s.h, s.w), layer);
  return 0;
}

/* Grows the shared workspace (every call runs on one stream, one at a time). */
static int ws_need(cnet *n, size_t bytes, char *err, size_t errcap) {
  if (bytes <= n->ws_size) return 0;
  CU(cudaStreamSynchronize(n->st), -1);
  cudaFree(n->ws);
  n->ws = NULL;
  n->ws_size = 0;
  CU(cudaMalloc(&n->ws, bytes), -1);
  n->ws_size = bytes;
  return 0;
}

/* The fastest algorithm that succeeds within the workspace bound: cuDNN's heuristics (perf lists
   come sorted by expected time), or its timed search on the net's own buffers. The descriptor's
   math type follows the choice, except in fp32, which stays FMA-only. */
static int conv_algos(cnet *n, const nn_layer *l, lstate *L, convplan *c, char *err, size_t errcap,
                      int i) {
  int got = 0;
  size_t lim = WS_LIMIT;
  if (n->o.search && ws_need(n, lim, err, errcap)) return -1;
  void *x = n->val[l->in], *y = n->val[l->out], *dy = n->dval[l->out];
  int fp32 = n->o.precision == NN_PREC_FP32;
  cudnnMathType_t base = fp32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH; /* what the query allows */
  DNN(cudnnSetConvolutionMathType(L->cf, base), i);
  DNN(cudnnSetConvolutionMathType(L->cd, base), i);
  DNN(cudnnSetConvolutionMathType(L->cw, base), i);
  {
    cudnnConvolutionFwdAlgoPerf_t pf[NALGO];
    if (n->o.search)
      DNN(cudnnFindConvolutionForwardAlgorithmEx(n->dnn, c->x, x, L->wd, L->w, L->cf, c->y, y, NALGO, &got, pf,
                                                 n->ws, lim), i);
    else
      DNN(cudnnGetConvolutionForwardAlgorithm_v7(n->dnn, c->x, L->wd, L->cf, c->y, NALGO, &got, pf), i);
    int k = 0;
    while (k < got && (pf[k].status != CUDNN_STATUS_SUCCESS || pf[k].memory > lim)) k++;
    if (k == got) {
      snprintf(err, errcap, "cuDNN: no forward convolution algorithm at layer %d within %zu bytes", i, lim);
      return -1;
    }
    c->fa = pf[k].algo;
    if (pf[k].memory > c->ws) c->ws = pf[k].memory;
    c->fm = fp32 ? CUDNN_FMA_MATH : pf[k].mathType;
  }
  {
    cudnnConvolutionBwdFilterAlgoPerf_t pf[NALGO];
    if (n->o.search)
      DNN(cudnnFindConvolutionBackwardFilterAlgorithmEx(n->dnn, c->x, x, c->y, dy, L->cw, L->wd, L->dw, NALGO, &got,
                                                        pf, n->ws, lim), i);
    else
      DNN(cudnnGetConvolutionBackwardFilterAlgorithm_v7(n->dnn, c->x, c->y, L->cw, L->wd, NALGO, &got, pf), i);
    int k = 0;
    while (k < got && (pf[k].status != CUDNN_STATUS_SUCCESS || pf[k].memory > lim)) k++;
    if (k == got) {
      snprintf(err, errcap, "cuDNN: no backward-filter algorithm at layer %d within %zu bytes", i, lim);
      return -1;
    }
    c->wa = pf[k].algo;
    if (pf[k].memory > c->ws) c->ws = pf[k].memory;
    c->wm = fp32 ? CUDNN_FMA_MATH : pf[k].mathType;
  }
  if (l->in != 0 || n->o.need_dx) {
    cudnnConvolutionBwdDataAlgoPerf_t pf[NALGO];
    if (n->o.search)
      DNN(cudnnFindConvolutionBackwardDataAlgorithmEx(n->dnn, L->wd, L->w, c->y, dy, L->cd, c->x, n->dval[l->in],
                                                      NALGO, &got, pf, n->ws, lim), i);
    else
      DNN(cudnnGetConvolutionBackwardDataAlgorithm_v7(n->dnn, L->wd, c->y, L->cd, c->x, NALGO, &got, pf), i);
    int k = 0;
    while (k < got && (pf[k].status != CUDNN_STATUS_SUCCESS || pf[k].memory > lim)) k++;
    if (k == got) {
      snprintf(err, errcap, "cuDNN: no backward-data algorithm at layer %d within %zu bytes", i, lim);
      return -1;
    }
    c->da = pf[k].algo;
    if (pf[k].memory > c->ws) c->ws = pf[k].memory;
    c->dm = fp32 ? CUDNN_FMA_MATH : pf[k].mathType;
  }
  return 0;
}

static plan *plan_new(cnet *n, int b, char *err, size_t errcap) {
  plan *p = calloc(1, sizeof(*p));
  if (!p || !(p->cv = calloc((size_t)n->t.nlayers, sizeof(*p->cv)))) {
    free(p);
    snprintf(err, errcap, "out of memory");
    return NULL;
  }
  p->n = b;
  size_t ws = 0;
  for (int i = 0; i < n->t.nlayers; i++) {
    const nn_layer *l = &n->t.layers[i];
    if (l->op != NN_CONV) continue;
    convplan *c = &p->cv[i];
    if (nhwc_desc(n, &c->x, b, n->t.shapes[l->in], err, errcap, i) ||
        nhwc_desc(n, &c->y, b, n->t.shapes[l->out], err, errcap, i) || conv_algos(n, l, &n->L[i], c, err, errcap, i))
      goto fail;
    if (c->ws > ws) ws = c->ws;
  }
  if (ws_need(n, ws, err, errcap)) goto fail;
  return p;
fail:
  plan_free(n, p);
  return NULL;
}

static plan *plan_for(cnet *n, int b, char *err, size_t errcap) {
  n->clock++;
  if (b == n->o.batch) return n->main;
  int free_slot = -1, oldest = -1;
  for (int i = 0; i < NPLANS; i++) {
    plan *p = n->cache[i];
    if (!p) {
      free_slot = i;
      continue;
    }
    if (p->n == b) {
      p->uses = n->clock;
      return p;
    }
    if (oldest < 0 || p->uses < n->cache[oldest]->uses) oldest = i;
  }
  int slot = free_slot >= 0 ? free_slot : oldest;
  plan *p = plan_new(n, b, err, errcap);
  if (!p) return NULL;
  if (n->cache[slot]) {
    cudaStreamSynchronize(n->st);
    plan_free(n, n->cache[slot]);
  }
  n->cache[slot] = p;
  p->uses = n->clock;
  return p;
}

/* ------------------------------------------------------------------------------------------------
 * forward and backward */

static int is_pinned(const void *p) {
  struct cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return a.type == cudaMemoryTypeHost;
}

/* Starts x's upload into a free slot on the copy stream; returns the slot. */
static int upload(cnet *n, const float *x, int b, char *err, size_t errcap) {
  int s = !n->slot[0].pending ? 0 : !n->slot[1].pending ? 1 : 0;
  size_t bytes = (size_t)b * velems(n, 0) * sizeof(float);
  const float *src = x;
  if (!is_pinned(x)) { /* staged: the copy stream's earlier uploads from the staging buffer are done */
    CU(cudaStreamSynchronize(n->cp), -1);
    memcpy(n->hx, x, bytes);
    src = n->hx;
  }
  CU(cudaStreamWaitEvent(n->cp, n->slot[s].done, 0), -1); /* the slot's last reader is done */
  CU(cudaMemcpyAsync(n->xin[s], src, bytes, cudaMemcpyHostToDevice, n->cp), -1);
  CU(cudaEventRecord(n->slot[s].done, n->cp), -1);
  n->slot[s].x = x;
  n->slot[s].n = b;
  n->slot[s].pending = 1;
  return s;
}

/* The batch x on the device (a prefetched copy, or uploaded now), value 0 filled from it. */
static int input(cnet *n, const float *x, int b, char *err, size_t errcap) {
  int s = -1;
  for (int i = 0; i < 2; i++)
    if (n->slot[i].pending && n->slot[i].x == x && n->slot[i].n == b) s = i;
  if (s < 0 && (s = upload(n, x, b, err, errcap)) < 0) return -1;
  n->slot[s].pending = 0;
  CU(cudaStreamWaitEvent(n->st, n->slot[s].done, 0), -1);
  nn_shape i0 = n->t.shapes[0];
  nnk_nchw_to_nhwc(n->val[0], n->bf, n->xin[s], b, i0.c, i0.h, i0.w, 0.0f, n->st);
  CU(cudaEventRecord(n->slot[s].done, n->st), -1); /* the slot may be refilled after this */
  return 0;
}

static int pack_weights(cnet *n, char *err, size_t errcap) {
  if (n->wver == n->pver) return 0;
  for (int i = 0; i < n->t.nlayers; i++) {
    const nn_layer *l = &n->t.layers[i];
    if (l->op != NN_CONV) continue;
    nn_shape s = n->t.shapes[l->in];
    nnk_nchw_to_nhwc(n->L[i].w, n->bf, n->d[NN_ARENA_PARAMS] + n->L[i].poff, l->cout, s.c, l->k, l->k, 0.0f,
                     n->st);
  }
  CU(cudaGetLastError(), -1);
  n->wver = n->pver;
  return 0;
}

/* Fully connected layers in a chain (MLPs) pass plain [b, c] fp32 from one to the next; the first
   of a chain reads its input made plain (NCHW order, the CPU's) in fcin, and the last writes the
   logits. */
static int fc_after_fc(const cnet *n, const nn_layer *l) { return l->in != 0 && n->t.layers[l->in - 1].op == NN_FC; }
static const float *fc_in(const cnet *n, const nn_layer *l) { return fc_after_fc(n, l) ? n->L[l->in - 1].fy : n->fcin; }
static float *fc_out(const cnet *n, int i) { return i == n->t.nlayers - 1 ? n->logits : n->L[i].fy; }
static float *fc_dout(const cnet *n, int i) { return i == n->t.nlayers - 1 ? n->dlogits : n->L[i].fdy; }

static int forward(cnet *n, plan *p, int b, int train, char *err, size_t errcap) {
  const float one = 1.0f, zero = 0.0f;
  if (upload_all(n, err, errcap) || pack_weights(n, err, errcap)) return -1;
  float *P = n->d[NN_ARENA_PARAMS], *B = n->d[NN_ARENA_BUFFERS];
  for (int i = 0; i < n->t.nlayers; i++) {
    const nn_layer *l = &n->t.layers[i];
    lstate *L = &n->L[i];
    nn_shape si = n->t.shapes[l->in], so = n->t.shapes[l->out];
    size_t rows = (size_t)b * si.h * si.w;
    switch (l->op) {
    case NN_CONV:
      DNN(cudnnSetConvolutionMathType(L->cf, p->cv[i].fm), i);
      DNN(cudnnConvolutionForward(n->dnn, &one, p->cv[i].x, n->val[l->in], L->wd, L->w, L->cf, p->cv[i].fa, n->ws,
                                  n->ws_size, &zero, p->cv[i].y, n->val[l->out]),
          i);
      break;
    case NN_BN:
      if (train) {
        CU(cudaMemsetAsync(L->acc, 0, 2 * (size_t)si.c * sizeof(double), n->st), i);
        nnk_bn_stats(L->acc, n->val[l->in], n->bf, rows, si.c, n->st);
      }
      nnk_bn_coef(L->a, L->b, L->mean, L->invstd, B + L->boff, B + L->boff + si.c, L->acc, P + L->poff,
                  P + L->poff + si.c, rows, si.c, BN_MOMENTUM, BN_EPS, train, n->st);
      nnk_bn_apply(n->val[l->out], n->val[l->in], n->bf, L->a, L->b, rows, si.c, l->relu, n->st);
      break;
    case NN_MAXPOOL:
      nnk_maxpool(n->val[l->out], L->idx, n->val[l->in], n->bf, b, si.c, si.h, si.w, so.h, so.w, l->k, l->stride,
                  l->pad, n->st);
      break;
    case NN_AVGPOOL:
      nnk_avgpool(n->val[l->out], n->val[l->in], n->bf, b, si.c, si.h * si.w, n->st);
      break;
    case NN_ADD_RELU:
      nnk_add_relu(n->val[l->out], n->val[l->in], n->val[l->in2], n->bf, (size_t)b * velems(n, l->out), n->st);
      break;
    case NN_FC: {
      int K = l->cout, Cin = (int)velems(n, l->in);
      if (!fc_after_fc(n, l)) nnk_nhwc_to_nchw(n->fcin, n->val[l->in], n->bf, b, si.c, si.h, si.w, 0.0f, n->st);
      float *y = fc_out(n, i);
      /* Y^T (K x b, column-major) = W (K x Cin) . X^T (Cin x b); W is [K, Cin] row-major */
      BLAS(n->bl.cublasSgemm(n->blas, CUBLAS_OP_T, CUBLAS_OP_N, K, b, Cin, &one, P + L->poff, Cin, fc_in(n, l), Cin,
                             &zero, y, K),
           i);
      nnk_bias_add(y, P + L->poff + (size_t)K * Cin, b, K, l->relu, n->st);
      break;
    }
    }
  }
  if (train) n->state[NN_ARENA_BUFFERS] = DEV_NEWER;
  CU(cudaGetLastError(), -1);
  n->last = p;
  n->last_n = b;
  n->fwd_train = train;
  return 0;
}

/* Backward of the last training forward; dval[last] (or dlogits) holds the output's gradient.
   Each layer's parameter gradients end in the fp32 arena, then its event marks them final (after
   their copy to the host arena when gradients live there). */
static int backward(cnet *n, plan *p, char *err, size_t errcap) {
  const float one = 1.0f, zero = 0.0f;
  int b = n->last_n;
  float *P = n->d[NN_ARENA_PARAMS], *G = n->d[NN_ARENA_GRADS];
  for (int i = n->t.nlayers - 1; i >= 0; i--) {
    const nn_layer *l = &n->t.layers[i];
    lstate *L = &n->L[i];
    nn_shape si = n->t.shapes[l->in], so = n->t.shapes[l->out];
    size_t rows = (size_t)b * si.h * si.w;
    int need_in = l->in != 0 || n->o.need_dx;
    float beta = L->beta1;
    switch (l->op) {
    case NN_CONV:
      DNN(cudnnSetConvolutionMathType(L->cw, p->cv[i].wm), i);
      DNN(cudnnConvolutionBackwardFilter(n->dnn, &one, p->cv[i].x, n->val[l->in], p->cv[i].y, n->dval[l->out], L->cw,
                                         p->cv[i].wa, n->ws, n->ws_size, &zero, L->wd, L->dw),
          i);
      nnk_nhwc_to_nchw(G + L->poff, L->dw, n->bf, l->cout, si.c, l->k, l->k, 0.0f, n->st);
      break;
    case NN_BN:
      CU(cudaMemsetAsync(L->acc, 0, 2 * (size_t)si.c * sizeof(double), n->st), i);
      nnk_bn_bwd_reduce(L->acc, n->val[l->in], n->val[l->out], n->dval[l->out], n->bf, L->mean, L->invstd, rows,
                        si.c, l->relu, n->st);
      nnk_bn_bwd_coef(G + L->poff, G + L->poff + si.c, L->k, L->acc, P + L->poff, L->invstd, rows, si.c, n->st);
      break;
    case NN_FC: {
      int K = l->cout, Cin = (int)velems(n, l->in);
      float *dy = fc_dout(n, i);
      if (l->relu) nnk_relu_bwd(dy, fc_out(n, i), (size_t)b * K, n->st);
      /* dW^T (Cin x K) = X^T (Cin x b) . dY (b x K) */
      BLAS(n->bl.cublasSgemm(n->blas, CUBLAS_OP_N, CUBLAS_OP_T, Cin, K, b, &one, fc_in(n, l), Cin, dy, K, &zero,
                             G + L->poff, Cin),
           i);
      nnk_bias_grad(G + L->poff + (size_t)K * Cin, dy, b, K, n->st);
      break;
    }
    default:
      break;
    }
    if (L->pcount) {
      if (n->grads_host) {
        CU(cudaEventRecord(n->egrad, n->st), i);
        CU(cudaStreamWaitEvent(n->cp, n->egrad, 0), i);
        CU(cudaMemcpyAsync(n->h[NN_ARENA_GRADS] + L->poff, G + L->poff, L->pcount * sizeof(float),
                           cudaMemcpyDeviceToHost, n->cp),
           i);
        CU(cudaEventRecord(L->ready, n->cp), i);
      } else {
        CU(cudaEventRecord(L->ready, n->st), i);
      }
    }
    /* the input's gradient */
    if (!need_in) continue;
    switch (l->op) {
    case NN_CONV:
      DNN(cudnnSetConvolutionMathType(L->cd, p->cv[i].dm), i);
      DNN(cudnnConvolutionBackwardData(n->dnn, &one, L->wd, L->w, p->cv[i].y, n->dval[l->out], L->cd, p->cv[i].da,
                                       n->ws, n->ws_size, &beta, p->cv[i].x, n->dval[l->in]),
          i);
      break;
    case NN_BN:
      nnk_bn_bwd_apply(n->dval[l->in], n->val[l->in], n->val[l->out], n->dval[l->out], n->bf, L->mean, L->invstd,
                       L->k, rows, si.c, l->relu, beta, n->st);
      break;
    case NN_MAXPOOL:
      nnk_maxpool_bwd(n->dval[l->in], beta, n->dval[l->out], L->idx, n->bf, b, si.c, si.h, si.w, so.h, so.w, l->k,
                      l->stride, l->pad, n->st);
      break;
    case NN_AVGPOOL:
      nnk_avgpool_bwd(n->dval[l->in], beta, n->dval[l->out], n->bf, b, si.c, si.h * si.w, n->st);
      break;
    case NN_ADD_RELU:
      nnk_add_relu_bwd(n->dval[l->in], L->beta1, n->dval[l->in2], L->beta2, n->val[l->out], n->dval[l->out], n->bf,
                       (size_t)b * velems(n, l->out), n->st);
      break;
    case NN_FC: {
      int K = l->cout, Cin = (int)velems(n, l->in), chain = fc_after_fc(n, l);
      /* dX^T (Cin x b) = W^T (Cin x K) . dY^T (K x b): into the previous layer's own gradient
         (added to it where beta is 1), or plain here and then into the value's */
      float *dx = chain ? n->L[l->in - 1].fdy : n->fcdx;
      BLAS(n->bl.cublasSgemm(n->blas, CUBLAS_OP_N, CUBLAS_OP_N, Cin, b, K, &one, P + L->poff, Cin, fc_dout(n, i), K,
                             chain ? &beta : &zero, dx, Cin),
           i);
      if (!chain) nnk_nchw_to_nhwc(n->dval[l->in], n->bf, n->fcdx, b, si.c, si.h, si.w, beta, n->st);
      break;
    }
    }
  }
  CU(cudaGetLastError(), -1);
  n->state[NN_ARENA_GRADS] = n->grads_host ? HOST_NEWER : DEV_NEWER;
  /* the host hears of each layer's gradients as they become final, in arena order: everything is
     queued already, so waiting here holds back no device work */
  for (int i = n->t.nlayers - 1; i >= 0 && n->ready_fn; i--) {
    lstate *L = &n->L[i];
    if (!L->pcount) continue;
    CU(cudaEventSynchronize(L->ready), i);
    n->ready_fn(n->ready_ctx, i, L->poff + L->pcount);
  }
  CU(cudaStreamSynchronize(n->st), -1);
  if (n->grads_host) CU(cudaStreamSynchronize(n->cp), -1);
  if (n->ready_fn) n->ready_fn(n->ready_ctx, -1, n->cnt[NN_ARENA_GRADS]);
  return 0;
}

/* Softmax cross-entropy of the logits on the device; loss and hits copied back with the logits. */
static int loss_kernel(cnet *n, const int32_t *labels, int b, char *err, size_t errcap) {
  memcpy(n->hlab, labels, (size_t)b * sizeof(int32_t));
  CU(cudaMemcpyAsync(n->labels, n->hlab, (size_t)b * sizeof(int32_t), cudaMemcpyHostToDevice, n->st), -1);
  nnk_xent(n->dlogits, n->rowloss, n->hits, n->logits, n->labels, b, n->classes, n->st);
  CU(cudaMemcpyAsync(n->hloss, n->rowloss, (size_t)b * sizeof(float), cudaMemcpyDeviceToHost, n->st), -1);
  CU(cudaMemcpyAsync(n->hhits, n->hits, (size_t)b * sizeof(int), cudaMemcpyDeviceToHost, n->st), -1);
  CU(cudaMemcpyAsync(n->hlogits, n->logits, (size_t)b * n->classes * sizeof(float), cudaMemcpyDeviceToHost, n->st),
     -1);
  return 0;
}

static void loss_sum(cnet *n, int b, double *sum, int *hits) {
  double s = 0;
  int h = 0;
  for (int i = 0; i < b; i++) {
    s += n->hloss[i];
    h += n->hhits[i];
  }
  *sum = s;
  *hits = h;
}

static int c_train_step(nn_net *net, const float *x, const int32_t *labels, int b, float *loss, int *correct,
                        nn_step_times *t, char *err, size_t errcap) {
  cnet *n = C(net);
  if (n->fail[0]) {
    snprintf(err, errcap, "%s", n->fail);
    return -1;
  }
  if (nn_check_batch(x, b, n->o.batch, err, errcap) || nn_check_labels(labels, b, n->classes, err, errcap)) return -1;
  if (n->classes <= 0) {
    snprintf(err, errcap, "this network has no classifier");
    return -1;
  }
  plan *p = plan_for(n, b, err, errcap);
  if (!p) return -1;
  CU(cudaEventRecord(n->e0, n->st), -1);
  if (input(n, x, b, err, errcap) || forward(n, p, b, 1, err, errcap) || loss_kernel(n, labels, b, err, errcap))
    return -1;
  CU(cudaEventRecord(n->e1, n->st), -1);
  if (backward(n, p, err, errcap)) return -1;
  CU(cudaEventRecord(n->e2, n->st), -1);
  CU(cudaEventSynchronize(n->e2), -1);
  double sum;
  int hits;
  loss_sum(n, b, &sum, &hits);
  if (loss) *loss = (float)(sum / b);
  if (correct) *correct = hits;
  if (t) {
    float f = 0, g = 0;
    cudaEventElapsedTime(&f, n->e0, n->e1);
    cudaEventElapsedTime(&g, n->e1, n->e2);
    t->fwd_s = 1e-3 * f;
    t->bwd_s = 1e-3 * g;
  }
  return 0;
}

static int c_eval(nn_net *net, const float *x, const int32_t *labels, int b, double *loss_sum_out, int *correct,
                  char *err, size_t errcap) {
  cnet *n = C(net);
  if (nn_check_batch(x, b, n->o.batch, err, errcap) || nn_check_labels(labels, b, n->classes, err, errcap)) return -1;
  plan *p = plan_for(n, b, err, errcap);
  if (!p || input(n, x, b, err, errcap) || forward(n, p, b, 0, err, errcap) || loss_kernel(n, labels, b, err, errcap))
    return -1;
  CU(cudaStreamSynchronize(n->st), -1);
  double sum;
  int hits;
  loss_sum(n, b, &sum, &hits);
  if (loss_sum_out) *loss_sum_out += sum;
  if (correct) *correct += hits;
  return 0;
}

/* Plain NCHW output of the last value (or [n, cout] logits), for the layer tests. */
static int c_forward(nn_net *net, const float *x, int b, int train, float *y, char *err, size_t errcap) {
  cnet *n = C(net);
  if (nn_check_batch(x, b, n->o.batch, err, errcap)) return -1;
  plan *p = plan_for(n, b, err, errcap);
  if (!p || input(n, x, b, err, errcap) || forward(n, p, b, train, err, errcap)) return -1;
  int last = n->t.layers[n->t.nlayers - 1].out;
  nn_shape so = n->t.shapes[last];
  size_t cnt = (size_t)b * velems(n, last);
  if (n->t.layers[n->t.nlayers - 1].op == NN_FC) {
    CU(cudaMemcpyAsync(n->hlogits, n->logits, cnt * sizeof(float), cudaMemcpyDeviceToHost, n->st), -1);
  } else {
    nnk_nhwc_to_nchw(n->yplain, n->val[last], n->bf, b, so.c, so.h, so.w, 0.0f, n->st);
  }
  CU(cudaStreamSynchronize(n->st), -1);
  if (y) {
    if (n->t.layers[n->t.nlayers - 1].op == NN_FC)
      memcpy(y, n->hlogits, cnt * sizeof(float));
    else
      CU(cudaMemcpy(y, n->yplain, cnt * sizeof(float), cudaMemcpyDeviceToHost), -1);
  }
  return 0;
}

static int c_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap) {
  cnet *n = C(net);
  if (!n->last || !n->fwd_train) {
    snprintf(err, errcap, "backward without a training forward");
    return -1;
  }
  int b = n->last_n, last = n->t.layers[n->t.nlayers - 1].out;
  nn_shape so = n->t.shapes[last];
  size_t cnt = (size_t)b * velems(n, last);
  if (n->t.layers[n->t.nlayers - 1].op == NN_FC) {
    CU(cudaMemcpy(n->dlogits, dy, cnt * sizeof(float), cudaMemcpyHostToDevice), -1);
  } else {
    CU(cudaMemcpy(n->yplain, dy, cnt * sizeof(float), cudaMemcpyHostToDevice), -1);
    nnk_nchw_to_nhwc(n->dval[last], n->bf, n->yplain, b, so.c, so.h, so.w, 0.0f, n->st);
  }
  if (backward(n, n->last, err, errcap)) return -1;
  if (dx && n->o.need_dx) {
    nn_shape si = n->t.shapes[0];
    nnk_nhwc_to_nchw(n->xin[0], n->dval[0], n->bf, b, si.c, si.h, si.w, 0.0f, n->st);
    CU(cudaStreamSynchronize(n->st), -1);
    CU(cudaMemcpy(dx, n->xin[0], (size_t)b * velems(n, 0) * sizeof(float), cudaMemcpyDeviceToHost), -1);
    n->slot[0].pending = 0; /* its input copy is gone */
  }
  return 0;
}

static void c_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx) {
  C(net)->ready_fn = fn;
  C(net)->ready_ctx = ctx;
}

/* Errors here have no channel (the functions return pointers): they are reported on stderr once
   and the host copy is returned as it is. */
static float *c_arena(nn_net *net, enum nn_arena a, size_t *count) {
  cnet *n = C(net);
  char err[256];
  size_t errcap = sizeof err;
  if (count) *count = n->cnt[a];
  if (a == NN_ARENA_GRADS) n->grads_host = 1;
  if (to_host(n, a, err, errcap)) fprintf(stderr, "fabench: %s\n", err);
  n->state[a] = HOST_NEWER;
  return n->h[a];
}

/* An error of the optimizer step (which has no channel of its own): said on stderr now, and the
   next training step fails with it, so a run does not go on without its updates. */
static void step_fail(cnet *n, const char *what) {
  fprintf(stderr, "fabench: %s\n", what);
  if (!n->fail[0]) snprintf(n->fail, sizeof n->fail, "optimizer step: %s", what);
}

/* SGD, Adam or AdamW over [off, off + count) of the arenas, one launch. Adam's second moment is
   the net's own device arena (o->v is the CPU's), made at the first Adam step and zeroed where a
   training's first step (t 1) updates it, as PyTorch starts it. */
static void c_sgd_step(nn_net *net, const nn_sgd_opts *o, size_t off, size_t count) {
  cnet *n = C(net);
  if (off >= n->cnt[NN_ARENA_PARAMS]) return;
  if (count > n->cnt[NN_ARENA_PARAMS] - off) count = n->cnt[NN_ARENA_PARAMS] - off;
  char err[256];
  size_t errcap = sizeof err;
  if (upload_all(n, err, errcap)) {
    step_fail(n, err);
    return;
  }
  float *p = n->d[NN_ARENA_PARAMS] + off, *g = n->d[NN_ARENA_GRADS] + off, *m = n->d[NN_ARENA_MOMENTUM] + off;
  if (o->kind == NN_OPT_SGD) {
    nnk_sgd(p, g, m, count, o->lr, o->momentum, o->weight_decay, o->nesterov,
            o->grad_scale != 0.0f ? o->grad_scale : 1.0f, n->st);
  } else {
    size_t all = n->cnt[NN_ARENA_PARAMS] * sizeof(float);
    cudaError_t e = cudaSuccess;
    if (!n->adam_v) {
      e = cudaMalloc((void **)&n->adam_v, all);
      if (e == cudaSuccess) e = cudaMemsetAsync(n->adam_v, 0, all, n->st);
    } else if (o->t <= 1) {
      e = cudaMemsetAsync(n->adam_v + off, 0, count * sizeof(float), n->st);
    }
    if (e != cudaSuccess) {
      snprintf(err, errcap, "%s's second moment (%zu floats) on the GPU: %s", nn_optim_name(o->kind),
               n->cnt[NN_ARENA_PARAMS], cudaGetErrorString(e));
      step_fail(n, err);
      return;
    }
    nn_adam_coef c;
    nn_adam_coefs(&c, o);
    nnk_adam(p, g, m, n->adam_v + off, count, &c, n->st);
  }
  n->state[NN_ARENA_PARAMS] = n->state[NN_ARENA_MOMENTUM] = DEV_NEWER;
  n->pver++;
}

static const float *c_logits(const nn_net *net, int *b, int *classes) {
  const cnet *n = CC(net);
  if (b) *b = n->last ? n->last_n : 0;
  if (classes) *classes = n->classes;
  return n->last ? n->hlogits : NULL;
}

static int c_param_tensors(const nn_net *net, const nn_param_info **info) {
  *info = CC(net)->pinfo;
  return CC(net)->npinfo;
}

static void c_destroy(nn_net *net) {
  cnet *n = C(net);
  if (!n) return;
  if (n->st) cudaStreamSynchronize(n->st);
  if (n->cp) cudaStreamSynchronize(n->cp);
  plan_free(n, n->main);
  for (int i = 0; i < NPLANS; i++) plan_free(n, n->cache[i]);
  if (n->L)
    for (int i = 0; i < n->t.nlayers; i++) {
      lstate *L = &n->L[i];
      if (L->wd) cudnnDestroyFilterDescriptor(L->wd);
      if (L->cf) cudnnDestroyConvolutionDescriptor(L->cf);
      if (L->cd) cudnnDestroyConvolutionDescriptor(L->cd);
      if (L->cw) cudnnDestroyConvolutionDescriptor(L->cw);
      cudaFree(L->w);
      cudaFree(L->dw);
      cudaFree(L->mean); /* mean, invstd, a, b, k in one allocation */
      cudaFree(L->acc);
      cudaFree(L->idx);
      cudaFree(L->fy);
      cudaFree(L->fdy);
      if (L->ready) cudaEventDestroy(L->ready);
    }
  if (n->val)
    for (int v = 0; v < n->t.nvalues; v++) {
      cudaFree(n->val[v]);
      cudaFree(n->dval[v]);
    }
  void *dev[] = {n->fcin, n->fcdx, n->logits, n->dlogits, n->rowloss, n->yplain, n->hits, n->labels, n->xin[0],
                 n->xin[1], n->ws, n->d[0], n->d[1], n->d[2], n->d[3], n->adam_v};
  for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) cudaFree(dev[i]);
  void *host[] = {n->hx, n->hlab, n->hloss, n->hlogits, n->hhits, n->h[0], n->h[2], n->h[3]};
  for (size_t i = 0; i < sizeof host / sizeof *host; i++) cudaFreeHost(host[i]);
  if (n->galloc.alloc) {
    if (n->grads_registered) cudaHostUnregister(n->h[1]);
    if (n->h[1]) n->galloc.free(n->galloc.ctx, n->h[1]);
  } else {
    cudaFreeHost(n->h[1]);
  }
  for (int i = 0; i < 2; i++)
    if (n->slot[i].done) cudaEventDestroy(n->slot[i].done);
  cudaEvent_t ev[] = {n->e0, n->e1, n->e2, n->egrad};
  for (int i = 0; i < 4; i++)
    if (ev[i]) cudaEventDestroy(ev[i]);
  if (n->blas) n->bl.cublasDestroy(n->blas);
  nn_blas_close(&n->bl);
  if (n->dnn) cudnnDestroy(n->dnn);
  if (n->st) cudaStreamDestroy(n->st);
  if (n->cp) cudaStreamDestroy(n->cp);
  nn_table_free(&n->t);
  free(n->L);
  free(n->pinfo);
  free(n->val);
  free(n->dval);
  free(n);
}

static const nn_net_ops cuda_ops = {c_destroy,       c_train_step, c_eval,     c_forward,         c_backward,
                                    c_on_grad_ready, c_arena,      c_sgd_step, c_logits,          c_param_tensors};

/* ------------------------------------------------------------------------------------------------
 * creation */

static cudaError_t dmalloc(void **p, size_t bytes) { return cudaMalloc(p, bytes > 0 ? bytes : 1); }
#define DMALLOC(ptr, bytes, layer) CU(dmalloc((void **)&(ptr), (bytes)), layer)

static int layer_setup(cnet *n, int i, char *err, size_t errcap) {
  const nn_layer *l = &n->t.layers[i];
  lstate *L = &n->L[i];
  nn_shape si = n->t.shapes[l->in], so = n->t.shapes[l->out];
  size_t B = (size_t)n->o.batch;
  /* a fully connected layer's output goes to the next fully connected layer or out as the logits */
  if (l->op == NN_FC && i != n->t.nlayers - 1 &&
      (n->t.layers[i + 1].op != NN_FC || n->t.layers[i + 1].in != l->out)) {
    snprintf(err, errcap, "layer %d: a fully connected layer feeds only the next fully connected one on the GPU "
             "engine (--device cpu)", i);
    return -1;
  }
  switch (l->op) {
  case NN_CONV: {
    size_t wn = (size_t)l->cout * si.c * l->k * l->k;
    DMALLOC(L->w, wn * n->esz, i);
    DMALLOC(L->dw, wn * n->esz, i);
    DNN(cudnnCreateFilterDescriptor(&L->wd), i);
    DNN(cudnnSetFilter4dDescriptor(L->wd, dtype(n), CUDNN_TENSOR_NHWC, l->cout, si.c, l->k, l->k), i);
    cudnnConvolutionDescriptor_t *cds[] = {&L->cf, &L->cd, &L->cw};
    for (int k = 0; k < 3; k++) {
      DNN(cudnnCreateConvolutionDescriptor(cds[k]), i);
      DNN(cudnnSetConvolution2dDescriptor(*cds[k], l->pad, l->pad, l->stride, l->stride, 1, 1,
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          i);
      DNN(cudnnSetConvolutionMathType(*cds[k], n->o.precision == NN_PREC_FP32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
          i);
    }
    break;
  }
  case NN_BN:
    DMALLOC(L->mean, 7 * (size_t)si.c * sizeof(float), i);
    L->invstd = L->mean + si.c;
    L->a = L->mean + 2 * si.c;
    L->b = L->mean + 3 * si.c;
    L->k = L->mean + 4 * si.c;
    DMALLOC(L->acc, 2 * (size_t)si.c * sizeof(double), i);
    break;
  case NN_MAXPOOL:
    DMALLOC(L->idx, B * so.c * so.h * so.w * sizeof(int), i);
    break;
  case NN_FC:
    if (i != n->t.nlayers - 1) {
      DMALLOC(L->fy, B * l->cout * sizeof(float), i);
      DMALLOC(L->fdy, B * l->cout * sizeof(float), i);
    }
    break;
  default:
    break;
  }
  CU(cudaEventCreateWithFlags(&L->ready, cudaEventDisableTiming), i);
  return 0;
}

static int create(cnet *n, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  n->o = *o;
  n->bf = o->precision == NN_PREC_BF16;
  n->esz = n->bf ? 2 : 4;
  if (nn_table_init(&n->t, t->shapes[0].c, t->shapes[0].h, t->shapes[0].w)) goto oom;
  for (int i = 0; i < t->nlayers; i++)
    if (nn_table_add(&n->t, t->layers[i], err, errcap) < 0) return -1;
  int nl = n->t.nlayers, nv = n->t.nvalues;
  const nn_layer *lastl = &n->t.layers[nl - 1];
  n->classes = lastl->op == NN_FC ? lastl->cout : 0;
  if (!(n->L = calloc((size_t)nl, sizeof(*n->L))) || !(n->pinfo = calloc(2 * (size_t)nl, sizeof(*n->pinfo))) ||
      !(n->val = calloc((size_t)nv, sizeof(void *))) || !(n->dval = calloc((size_t)nv, sizeof(void *))))
    goto oom;
  /* arena order: nn_arena_layout's, as the CPU engine */
  size_t np, nb;
  {
    size_t *off = malloc(3 * (size_t)nl * sizeof *off);
    if (!off) goto oom;
    n->npinfo = nn_arena_layout(&n->t, off, off + nl, off + 2 * nl, n->pinfo, &np, &nb);
    for (int i = 0; i < nl; i++) {
      n->L[i].poff = off[i];
      n->L[i].boff = off[nl + i];
      n->L[i].pcount = off[2 * nl + i];
    }
    free(off);
  }
  /* backward writes the first consumer's gradient of a value and adds the later ones' */
  {
    char *seen = calloc((size_t)nv, 1);
    if (!seen) goto oom;
    for (int i = nl - 1; i >= 0; i--) {
      const nn_layer *l = &n->t.layers[i];
      n->L[i].beta1 = seen[l->in] ? 1.0f : 0.0f;
      seen[l->in] = 1;
      if (l->op == NN_ADD_RELU) {
        n->L[i].beta2 = seen[l->in2] ? 1.0f : 0.0f;
        if (l->in2 == l->in) n->L[i].beta2 = n->L[i].beta1;
        seen[l->in2] = 1;
      }
    }
    free(seen);
  }
  n->cnt[0] = n->cnt[1] = n->cnt[2] = np;
  n->cnt[3] = nb;

  CU(cudaSetDevice(o->gpu), -1);
  CU(cudaStreamCreateWithFlags(&n->st, cudaStreamNonBlocking), -1);
  CU(cudaStreamCreateWithFlags(&n->cp, cudaStreamNonBlocking), -1);
  cudaEvent_t *ev[] = {&n->e0, &n->e1, &n->e2};
  for (int i = 0; i < 3; i++) CU(cudaEventCreate(ev[i]), -1);
  CU(cudaEventCreateWithFlags(&n->egrad, cudaEventDisableTiming), -1);
  for (int i = 0; i < 2; i++) CU(cudaEventCreateWithFlags(&n->slot[i].done, cudaEventDisableTiming), -1);
  DNN(cudnnCreate(&n->dnn), -1);
  DNN(cudnnSetStream(n->dnn, n->st), -1);
  if (nn_blas_open(&n->bl, err, errcap)) return -1;
  BLAS(n->bl.cublasCreate(&n->blas), -1);
  BLAS(n->bl.cublasSetStream(n->blas, n->st), -1);
  BLAS(n->bl.cublasSetMathMode(n->blas, o->precision == NN_PREC_FP32 ? CUBLAS_PEDANTIC_MATH : CUBLAS_TF32_TENSOR_OP_MATH),
       -1);

  /* arenas: device, and host copies in page-locked memory (the gradients' from the caller's
     allocator when it gives one, registered with CUDA when that works) */
  for (int a = 0; a < 4; a++) {
    DMALLOC(n->d[a], n->cnt[a] * sizeof(float), -1);
    if (a == NN_ARENA_GRADS && o->grad_alloc) {
      n->galloc = *o->grad_alloc;
      if (!(n->h[a] = n->galloc.alloc(n->galloc.ctx, (n->cnt[a] ? n->cnt[a] : 1) * sizeof(float)))) {
        snprintf(err, errcap, "cannot allocate the gradient arena (%zu bytes)", n->cnt[a] * sizeof(float));
        return -1;
      }
      n->grads_registered = cudaHostRegister(n->h[a], n->cnt[a] * sizeof(float), cudaHostRegisterDefault) == cudaSuccess;
      if (!n->grads_registered) cudaGetLastError(); /* pageable copies still work, synchronously */
    } else {
      CU(cudaMallocHost((void **)&n->h[a], (n->cnt[a] ? n->cnt[a] : 1) * sizeof(float)), -1);
    }
    memset(n->h[a], 0, n->cnt[a] * sizeof(float));
  }
  if (nn_params_init(&n->t, o->seed, n->h[NN_ARENA_PARAMS], n->h[NN_ARENA_BUFFERS])) goto oom;
  for (int a = 0; a < 4; a++) n->state[a] = HOST_NEWER;

  /* activations and their gradients, for the largest batch */
  size_t B = (size_t)o->batch;
  for (int v = 0; v < nv; v++) {
    DMALLOC(n->val[v], B * velems(n, v) * n->esz, -1);
    if (v > 0 || o->need_dx) DMALLOC(n->dval[v], B * velems(n, v) * n->esz, -1);
  }
  for (int i = 0; i < nl; i++)
    if (layer_setup(n, i, err, errcap)) return -1;
  size_t in0 = velems(n, 0), fcn = 1, outn = velems(n, n->t.layers[nl - 1].out);
  for (int i = 0; i < nl; i++) /* the first layer of a fully connected chain reads fcin */
    if (n->t.layers[i].op == NN_FC && !fc_after_fc(n, &n->t.layers[i]) && velems(n, n->t.layers[i].in) > fcn)
      fcn = velems(n, n->t.layers[i].in);
  size_t k = n->classes > 0 ? (size_t)n->classes : 1;
  DMALLOC(n->fcin, B * fcn * sizeof(float), -1);
  DMALLOC(n->fcdx, B * fcn * sizeof(float), -1);
  DMALLOC(n->logits, B * k * sizeof(float), -1);
  DMALLOC(n->dlogits, B * k * sizeof(float), -1);
  DMALLOC(n->rowloss, B * sizeof(float), -1);
  DMALLOC(n->hits, B * sizeof(int), -1);
  DMALLOC(n->labels, B * sizeof(int), -1);
  DMALLOC(n->yplain, B * outn * sizeof(float), -1);
  for (int i = 0; i < 2; i++) DMALLOC(n->xin[i], B * in0 * sizeof(float), -1);
  CU(cudaMallocHost((void **)&n->hx, B * in0 * sizeof(float)), -1);
  CU(cudaMallocHost((void **)&n->hlab, B * sizeof(int32_t)), -1);
  CU(cudaMallocHost((void **)&n->hloss, B * sizeof(float)), -1);
  CU(cudaMallocHost((void **)&n->hhits, B * sizeof(int)), -1);
  CU(cudaMallocHost((void **)&n->hlogits, B * (outn > k ? outn : k) * sizeof(float)), -1);
  /* the weights must exist before a timed search runs the convolutions */
  if (upload_all(n, err, errcap) || pack_weights(n, err, errcap)) return -1;
  n->state[NN_ARENA_PARAMS] = n->state[NN_ARENA_GRADS] = n->state[NN_ARENA_MOMENTUM] = n->state[NN_ARENA_BUFFERS] =
      SYNCED;
  if (!(n->main = plan_new(n, o->batch, err, errcap))) return -1;
  CU(cudaStreamSynchronize(n->st), -1);

  struct cudaDeviceProp prop;
  CU(cudaGetDeviceProperties(&prop, o->gpu), -1);
  int bl = 0;
  n->bl.cublasGetVersion(n->blas, &bl);
  size_t dv = cudnnGetVersion();
  static const char *prec[] = {"fp32", "tf32", "bf16"};
  snprintf(n->name, sizeof n->name, "cuDNN %zu.%zu.%zu cuBLAS %d.%d.%d %s %s", dv / 10000, dv / 100 % 100, dv % 100,
           bl / 10000, bl / 100 % 100, bl % 100, prec[o->precision], prop.name);
  return 0;
oom:
  snprintf(err, errcap, "out of memory");
  return -1;
}

int nn_cuda_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  *out = NULL;
  if (!t || t->nlayers <= 0 || !o || o->batch <= 0) {
    snprintf(err, errcap, "bad network options (batch %d)", o ? o->batch : 0);
    return -1;
  }
  if (o->precision < NN_PREC_FP32 || o->precision > NN_PREC_BF16) {
    snprintf(err, errcap, "unknown precision %d", o->precision);
    return -1;
  }
  nn_engine_opts eo = *o;
  int rc = nn_device_check(NN_DEV_CUDA, &eo.gpu, eo.gpu_of_rank, err, errcap);
  if (rc) return rc;
  cnet *n = calloc(1, sizeof(*n));
  if (!n) {
    snprintf(err, errcap, "out of memory");
    return -1;
  }
  n->head = (nn_net_head){NN_DEV_CUDA, &cuda_ops};
  if (create(n, t, &eo, err, errcap)) {
    c_destroy((nn_net *)(void *)n);
    return -1;
  }
  *out = (nn_net *)(void *)n;
  return 0;
}

/* GPU-only entry points of nn.h */

int nn_device_check(int device, int *gpu, int of_rank, char *err, size_t errcap) {
  if (device != NN_DEV_CUDA) return 0;
  int ndev = 0;
  cudaError_t e = cudaGetDeviceCount(&ndev);
  if (e != cudaSuccess || ndev == 0) {
    snprintf(err, errcap, "no CUDA device: %s", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    cudaGetLastError();
    return NN_ENODEV;
  }
  if (of_rank && *gpu >= 0) *gpu %= ndev;
  if (*gpu < 0 || *gpu >= ndev) {
    snprintf(err, errcap, "no CUDA device %d (this machine has %d)", *gpu, ndev);
    return NN_ENODEV;
  }
  return 0;
}

float *nn_net_device_arena(nn_net *net, enum nn_arena a, size_t *count) {
  if (count) *count = 0;
  if (!NN_OPS(net)) return NULL;
  cnet *n = C(net);
  char err[256];
  size_t errcap = sizeof err;
  cudaError_t e = cudaSuccess;
  if (to_dev(n, a, err, errcap) || (e = cudaStreamSynchronize(n->st)) != cudaSuccess) {
    if (e != cudaSuccess) cu_fail(err, errcap, e, "cudaStreamSynchronize", -1);
    fprintf(stderr, "fabench: %s\n", err);
  }
  if (count) *count = n->cnt[a];
  return n->d[a];
}

void *nn_net_stream(nn_net *net) { return NN_OPS(net) ? (void *)C(net)->st : NULL; }

void nn_net_grads_on_host(nn_net *net, int on) {
  if (NN_OPS(net)) C(net)->grads_host = on;
}

int nn_net_sync(nn_net *net, int host, char *err, size_t errcap) {
  if (!NN_OPS(net)) return 0;
  cnet *n = C(net);
  for (int a = 0; a < 4; a++)
    if (host ? to_host(n, a, err, errcap) : to_dev(n, a, err, errcap)) return -1;
  CU(cudaStreamSynchronize(n->st), -1);
  return 0;
}

int nn_net_prefetch(nn_net *net, const float *x, int b, char *err, size_t errcap) {
  if (!NN_OPS(net)) return 0;
  cnet *n = C(net);
  if (nn_check_batch(x, b, n->o.batch, err, errcap)) return -1;
  return upload(n, x, b, err, errcap) < 0 ? -1 : 0;
}

void *nn_host_alloc(const nn_net *net, size_t bytes) {
  if (!NN_OPS(net)) return malloc(bytes);
  void *p = NULL;
  return cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

void nn_host_free(nn_net *net, void *p) {
  if (!NN_OPS(net)) {
    free(p);
    return;
  }
  if (!p) return;
  cnet *n = C(net);
  for (int s = 0; s < 2; s++)
    if (n->slot[s].pending && n->slot[s].x == p) {
      cudaStreamSynchronize(n->cp);
      n->slot[s].pending = 0;
    }
  cudaFreeHost(p);
}

int nn_net_device(const nn_net *net) { return NN_OPS(net) ? NN_DEV_CUDA : NN_DEV_CPU; }

const char *nn_net_backend(const nn_net *net) { return NN_OPS(net) ? CC(net)->name : nn_backend_version(); }

#else /* no CUDA or no cuDNN: every CPU path as before, GPU nets refused with NN_ENODEV */

int nn_cuda_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  (void)t, (void)o;
  *out = NULL;
  snprintf(err, errcap, "fabench was built without CUDA and cuDNN: no GPU training (--device cpu works)");
  return NN_ENODEV;
}
int nn_device_check(int device, int *gpu, int of_rank, char *err, size_t errcap) {
  (void)gpu, (void)of_rank;
  if (device != NN_DEV_CUDA) return 0;
  snprintf(err, errcap, "fabench was built without CUDA and cuDNN: no GPU training (--device cpu works)");
  return NN_ENODEV;
}
float *nn_net_device_arena(nn_net *net, enum nn_arena a, size_t *count) {
  (void)net, (void)a;
  if (count) *count = 0;
  return NULL;
}
void *nn_net_stream(nn_net *net) { return (void)net, NULL; }
void nn_net_grads_on_host(nn_net *net, int on) { (void)net, (void)on; }
int nn_net_sync(nn_net *net, int host, char *err, size_t errcap) { return (void)net, (void)host, (void)err, (void)errcap, 0; }
int nn_net_prefetch(nn_net *net, const float *x, int b, char *err, size_t errcap) {
  return (void)net, (void)x, (void)b, (void)err, (void)errcap, 0;
}
void *nn_host_alloc(const nn_net *net, size_t bytes) { return (void)net, malloc(bytes); }
void nn_host_free(nn_net *net, void *p) { (void)net, free(p); }
int nn_net_device(const nn_net *net) { return (void)net, NN_DEV_CPU; }
const char *nn_net_backend(const nn_net *net) { return (void)net, nn_backend_version(); }

#endif
