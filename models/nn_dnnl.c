/* models: the CPU engine on oneDNN 2.6's C API, behind the network front (nn_net.c), which
 * calls its nn_dnnl_* functions for CPU nets. Every oneDNN call of the module is in this file, so
 * a port to the 3.x API (which replaced the *_desc_init functions) touches only it.
 *
 * A plan is the layer table compiled for one batch size: primitives created once, activations in
 * the blocked layouts oneDNN chooses, and three step lists (forward training, forward inference,
 * backward) that are replayed every step. Reorders happen only at the edges: the input batch, the
 * weights from and gradients to the plain arenas, the logits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nn_check.h"
#include "nn_impl.h"

#if FABENCH_HAVE_DNNL

#include <dnnl.h>
#include <dnnl_debug.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* oneDNN's Debian build runs on OpenMP: its thread count is the calling thread's OpenMP setting,
   so it is set before every call (train-data may step from another thread than it created on). */
static void set_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

static int cores(void) {
#ifdef _OPENMP
  return omp_get_num_procs();
#else
  return 1;
#endif
}

#define NN_BN_EPS 1e-5f
#define NN_BN_MOMENTUM 0.1
#define NN_MAX_PLANS 4

enum { K_PRIM, K_ADD_RELU_FWD, K_ADD_RELU_BWD, K_ACC, K_RUNSTAT, K_WPAD, K_WUNPAD, K_RELU_FWD, K_RELU_BWD };

typedef struct {
  int kind, scratch, layer;
  dnnl_primitive_t prim;
  int nargs;
  dnnl_exec_arg_t args[12];
  dnnl_memory_t ma, mb, mc, md, me; /* custom kernels' operands (read at run time: the input's */
  float *a, *b, *c, *d, *e;          /* buffer changes every call), or raw pointers */
  size_t n;
  double cnt;
  int64_t wdim[4], wstr[4], icp; /* K_WPAD, K_WUNPAD: the arena's weights view, the padded inputs */
} step;

typedef struct {
  step *v;
  int n, cap;
} steplist;

typedef struct {
  int n, full;     /* batch size; full: has the backward */
  steplist wfwd;   /* weights arena -> blocked, run when the weights changed */
  steplist fwd, fwd_eval, bwd;
  dnnl_primitive_t *prims;
  int nprims, capprims;
  dnnl_memory_t *mems;
  int nmems, capmems;
  dnnl_memory_desc_t *vmd;       /* per value: layout chosen by its producer */
  dnnl_memory_t *vmem, *dmem, *dacc;
  int *writers;                  /* build state: consumers that wrote d(value) so far */
  struct pbuf { void *ptr; size_t size; int used; } *pool; /* gradient buffers, reused once dead */
  int npool, cappool;
  dnnl_memory_t y, dy;           /* plain output and its gradient (edges) */
  size_t scratch_size;
  dnnl_memory_t scratch;
  uint64_t wver;
  long uses;
} plan;

typedef struct {
  size_t poff, pcount, boff;     /* offsets into params/grads/momentum and buffers */
} layer_info;

struct nn_net {
  nn_net_head head;              /* zero: a CPU net (nn_impl.h) */
  nn_table t;
  nn_engine_opts o;
  int classes;
  layer_info *li;
  nn_param_info *pinfo;
  int npinfo;
  float *params, *grads, *mom, *bufs, *dlogits;
  size_t nparams, nbufs;
  dnnl_engine_t eng;
  dnnl_stream_t strm;
  dnnl_primitive_attr_t attr;
  plan *main;
  plan *cache[NN_MAX_PLANS];
  long clock;
  uint64_t pver;                 /* bumped whenever the parameter arena may have changed */
  plan *last;                    /* plan of the last forward */
  int last_n;
  nn_grad_ready_fn ready_fn;     /* backward's progress through the gradient arena */
  void *ready_ctx;
  nn_fwd_layer_fn fwd_fn;        /* the training forward's per-layer hook */
  void *fwd_ctx;
  nn_arena_alloc galloc;         /* who owns the gradient arena (alloc NULL: we do) */
  int nslow;                     /* primitives built on oneDNN's reference code (pd_is_ref) */
  char slow[192];                /* the first of them (slow_name) */
};

/* ------------------------------------------------------------------------------------------------
 * plan building helpers */

typedef struct {
  nn_net *net;
  plan *p;
  char *err;
  size_t cap;
  int layer;
} bctx;

#define DN(call)                                                                                  \
  do {                                                                                            \
    dnnl_status_t s_ = (call);                                                                    \
    if (s_ != dnnl_success) {                                                                     \
      snprintf(b->err, b->cap, "oneDNN %s at layer %d: %s", dnnl_status2str(s_), b->layer, #call); \
      return -1;                                                                                  \
    }                                                                                             \
  } while (0)

static int grow(void **v, int *cap, int need, size_t elem) {
  if (need <= *cap) return 0;
  int nc = *cap ? *cap * 2 : 32;
  while (nc < need) nc *= 2;
  void *nv = realloc(*v, (size_t)nc * elem);
  if (!nv) return -1;
  *v = nv;
  *cap = nc;
  return 0;
}

static step *push(bctx *b, steplist *l) {
  if (grow((void **)&l->v, &l->cap, l->n + 1, sizeof(step))) {
    snprintf(b->err, b->cap, "out of memory");
    return NULL;
  }
  step *s = &l->v[l->n++];
  memset(s, 0, sizeof(*s));
  s->layer = b->layer;
  return s;
}

static const dnnl_memory_desc_t *md_of(dnnl_memory_t m) {
  const dnnl_memory_desc_t *md = NULL;
  dnnl_memory_get_memory_desc(m, &md);
  return md;
}

static float *ptr_of(dnnl_memory_t m) {
  void *h = NULL;
  dnnl_memory_get_data_handle(m, &h);
  return h;
}

static size_t nfloats(dnnl_memory_t m) { return dnnl_memory_desc_get_size(md_of(m)) / sizeof(float); }

static int keep_mem(bctx *b, dnnl_memory_t m) {
  plan *p = b->p;
  if (grow((void **)&p->mems, &p->capmems, p->nmems + 1, sizeof(*p->mems))) {
    dnnl_memory_destroy(m);
    snprintf(b->err, b->cap, "out of memory");
    return -1;
  }
  p->mems[p->nmems++] = m;
  return 0;
}

/* Memory oneDNN allocates (64-byte aligned, zeroed here so padded channels start at zero). */
static dnnl_memory_t mem_new(bctx *b, const dnnl_memory_desc_t *md) {
  dnnl_memory_t m = NULL;
  dnnl_status_t s = dnnl_memory_create(&m, md, b->net->eng, DNNL_MEMORY_ALLOCATE);
  if (s != dnnl_success) {
    snprintf(b->err, b->cap, "oneDNN %s allocating %zu bytes at layer %d", dnnl_status2str(s),
             dnnl_memory_desc_get_size(md), b->layer);
    return NULL;
  }
  if (keep_mem(b, m)) return NULL;
  memset(ptr_of(m), 0, dnnl_memory_desc_get_size(md));
  return m;
}

static dnnl_memory_t mem_user(bctx *b, const dnnl_memory_desc_t *md, void *ptr) {
  dnnl_memory_t m = NULL;
  if (dnnl_memory_create(&m, md, b->net->eng, ptr) != dnnl_success) {
    snprintf(b->err, b->cap, "oneDNN: cannot wrap memory at layer %d", b->layer);
    return NULL;
  }
  return keep_mem(b, m) ? NULL : m;
}

static int md_plain(bctx *b, dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims) {
  static const dnnl_format_tag_t tags[] = {dnnl_format_tag_undef, dnnl_a, dnnl_ab, dnnl_abc, dnnl_abcd};
  DN(dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, tags[nd]));
  return 0;
}

static int md_any(bctx *b, dnnl_memory_desc_t *md, int nd, const dnnl_dims_t dims) {
  DN(dnnl_memory_desc_init_by_tag(md, nd, dims, dnnl_f32, dnnl_format_tag_any));
  return 0;
}

/* The implementation oneDNN chose ("jit:avx2", "ref:any", ...; "?" if it does not say). */
static const char *pd_impl(const_dnnl_primitive_desc_t pd) {
  const char *s = NULL;
  return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &s) == dnnl_success && s ? s : "?";
}

/* oneDNN's reference implementation: right, but hundreds of times slower than its JIT or GEMM
 * ones (conv_bwdw_plain; nn_net_slow_primitives). */
static int pd_is_ref(const_dnnl_primitive_desc_t pd) { return !strncmp(pd_impl(pd), "ref", 3); }

/* Names a primitive on the reference code for nn_net_slow_primitives' warning: the layer, its shape,
 * the primitive and the implementation, e.g. "layer 17 (convolution 8->8 3x3/1 on 28x28: convolution
 * backward_data), ref:any". */
static void slow_name(bctx *b, const_dnnl_primitive_desc_t pd) {
  static const char *const ops[] = {"convolution", "batch norm", "residual add", "max pooling", "average pooling",
                                    "fully connected"};
  char lay[96] = "";
  if (b->layer >= 0) {
    const nn_layer *l = &b->net->t.layers[b->layer];
    nn_shape si = b->net->t.shapes[l->in], so = b->net->t.shapes[l->out];
    if (l->op == NN_CONV)
      snprintf(lay, sizeof lay, "%s %d->%d %dx%d/%d on %dx%d: ", ops[l->op], si.c, so.c, l->k, l->k, l->stride, si.h,
               si.w);
    else
      snprintf(lay, sizeof lay, "%s %d on %dx%d: ", ops[l->op], si.c, si.h, si.w);
  }
  dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
  dnnl_prop_kind_t prop = dnnl_prop_kind_undef;
  dnnl_primitive_desc_query(pd, dnnl_query_primitive_kind, 0, &kind);
  dnnl_primitive_desc_query(pd, dnnl_query_prop_kind, 0, &prop);
  const char *pk = prop == dnnl_prop_kind_undef ? "" : dnnl_prop_kind2str(prop);
  if (b->layer >= 0)
    snprintf(b->net->slow, sizeof b->net->slow, "layer %d (%s%s%s%s), %s", b->layer, lay, dnnl_prim_kind2str(kind),
             *pk ? " " : "", pk, pd_impl(pd));
  else
    snprintf(b->net->slow, sizeof b->net->slow, "%s at the network's edge, %s", dnnl_prim_kind2str(kind), pd_impl(pd));
}

/* Creates the primitive of a descriptor and remembers the largest scratchpad. */
static dnnl_primitive_t prim_of(bctx *b, dnnl_primitive_desc_t pd) {
  plan *p = b->p;
  dnnl_primitive_t prim = NULL;
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  if (smd) {
    size_t sz = dnnl_memory_desc_get_size(smd);
    if (sz > p->scratch_size) p->scratch_size = sz;
  }
  dnnl_status_t s = dnnl_primitive_create(&prim, pd);
  if (s != dnnl_success) {
    snprintf(b->err, b->cap, "oneDNN %s creating a primitive at layer %d", dnnl_status2str(s), b->layer);
    return NULL;
  }
  if (pd_is_ref(pd) && b->net->nslow++ == 0) slow_name(b, pd);
  if (grow((void **)&p->prims, &p->capprims, p->nprims + 1, sizeof(*p->prims))) {
    dnnl_primitive_destroy(prim);
    snprintf(b->err, b->cap, "out of memory");
    return NULL;
  }
  p->prims[p->nprims++] = prim;
  return prim;
}

static int pd_new(bctx *b, dnnl_primitive_desc_t *pd, const void *desc, const_dnnl_primitive_desc_t hint,
                  const char *what) {
  dnnl_status_t s = dnnl_primitive_desc_create(pd, desc, b->net->attr, b->net->eng, hint);
  if (s != dnnl_success) {
    snprintf(b->err, b->cap, "oneDNN %s creating %s at layer %d", dnnl_status2str(s), what, b->layer);
    return -1;
  }
  return 0;
}

static int add_prim(bctx *b, steplist *l, dnnl_primitive_t prim, int nargs, const dnnl_exec_arg_t *args) {
  step *s = push(b, l);
  if (!s) return -1;
  s->kind = K_PRIM;
  s->prim = prim;
  s->scratch = 1;
  s->nargs = nargs;
  memcpy(s->args, args, (size_t)nargs * sizeof(*args));
  return 0;
}

/* A primitive step from a descriptor (the descriptor is released once the primitive exists). */
static int prim_step(bctx *b, steplist *l, dnnl_primitive_desc_t pd, int nargs, const dnnl_exec_arg_t *args) {
  dnnl_primitive_t prim = prim_of(b, pd);
  dnnl_primitive_desc_destroy(pd);
  if (!prim) return -1;
  return add_prim(b, l, prim, nargs, args);
}

static int reorder_prim(bctx *b, dnnl_memory_t src, dnnl_memory_t dst, dnnl_primitive_t *prim) {
  dnnl_primitive_desc_t pd;
  DN(dnnl_reorder_primitive_desc_create(&pd, md_of(src), b->net->eng, md_of(dst), b->net->eng, NULL));
  *prim = prim_of(b, pd);
  dnnl_primitive_desc_destroy(pd);
  return *prim ? 0 : -1;
}

/* Reorder src -> dst appended to one or two lists (same primitive). */
static int reorder_step(bctx *b, steplist *l1, steplist *l2, dnnl_memory_t src, dnnl_memory_t dst) {
  dnnl_primitive_t prim;
  if (reorder_prim(b, src, dst, &prim)) return -1;
  dnnl_exec_arg_t a[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
  if (add_prim(b, l1, prim, 2, a)) return -1;
  l1->v[l1->n - 1].scratch = 0;
  if (l2) {
    if (add_prim(b, l2, prim, 2, a)) return -1;
    l2->v[l2->n - 1].scratch = 0;
  }
  return 0;
}

/* Memory of value v in layout md: v itself, or a reordered copy made in the forward lists. */
static dnnl_memory_t value_as(bctx *b, int v, const dnnl_memory_desc_t *md) {
  plan *p = b->p;
  if (dnnl_memory_desc_equal(md, &p->vmd[v])) return p->vmem[v];
  dnnl_memory_t m = mem_new(b, md);
  if (!m || reorder_step(b, &p->fwd, &p->fwd_eval, p->vmem[v], m)) return NULL;
  return m;
}

/* A gradient buffer: a dead one of the plan if one is large enough (backward needs a value's
   gradient only between its first consumer and its producer, so about half the memory goes). */
static dnnl_memory_t diff_mem(bctx *b, const dnnl_memory_desc_t *md) {
  plan *p = b->p;
  size_t need = dnnl_memory_desc_get_size(md);
  int best = -1;
  for (int i = 0; i < p->npool; i++)
    if (!p->pool[i].used && p->pool[i].size >= need && (best < 0 || p->pool[i].size < p->pool[best].size)) best = i;
  if (best >= 0) {
    p->pool[best].used = 1;
    return mem_user(b, md, p->pool[best].ptr);
  }
  if (grow((void **)&p->pool, &p->cappool, p->npool + 1, sizeof(*p->pool))) {
    snprintf(b->err, b->cap, "out of memory");
    return NULL;
  }
  dnnl_memory_t m = mem_new(b, md);
  if (m) p->pool[p->npool++] = (struct pbuf){ptr_of(m), need, 1};
  return m;
}

/* Steps built after this may reuse m's buffer (each gradient memory is released once). */
static void diff_release(plan *p, dnnl_memory_t m) {
  if (!m) return;
  void *h = ptr_of(m);
  for (int i = 0; i < p->npool; i++)
    if (p->pool[i].ptr == h) p->pool[i].used = 0;
}

/* Where a consumer's backward writes d(value v) in layout md. The first consumer (in backward order)
   writes the value's gradient, the second its accumulator; *tgt gets that memory (NULL when the
   gradient is not needed) and *wr the memory to write (a temporary when the layouts differ). */
static int diff_into(bctx *b, int v, const dnnl_memory_desc_t *md, dnnl_memory_t *wr, dnnl_memory_t *tgt) {
  plan *p = b->p;
  *tgt = NULL;
  if (v == 0 && !b->net->o.need_dx) {
    *wr = diff_mem(b, md);
    return *wr ? 0 : -1;
  }
  dnnl_memory_t *slot;
  if (p->writers[v] == 0) {
    slot = &p->dmem[v];
  } else if (p->writers[v] == 1) {
    slot = &p->dacc[v];
  } else {
    snprintf(b->err, b->cap, "value %d has more than two consumers", v);
    return -1;
  }
  p->writers[v]++;
  if (!*slot && !(*slot = (v == 0 ? mem_new(b, &p->vmd[v]) : diff_mem(b, &p->vmd[v])))) return -1;
  *tgt = *slot;
  *wr = dnnl_memory_desc_equal(md, &p->vmd[v]) ? *slot : diff_mem(b, md);
  return *wr ? 0 : -1;
}

static int diff_done(bctx *b, dnnl_memory_t wr, dnnl_memory_t tgt) {
  if (wr == tgt) return 0;
  int rc = tgt ? reorder_step(b, &b->p->bwd, NULL, wr, tgt) : 0;
  diff_release(b->p, wr); /* a temporary, or a gradient nobody wants */
  return rc;
}

/* d(value v) complete before its producer's backward reads it: adds the accumulator unless the
   producer's kernel does it itself (fused). */
static int diff_ready(bctx *b, int v, int fused) {
  plan *p = b->p;
  if (p->writers[v] == 0) {
    snprintf(b->err, b->cap, "value %d is never used", v);
    return -1;
  }
  if (p->writers[v] == 2 && !fused) {
    step *s = push(b, &p->bwd);
    if (!s) return -1;
    s->kind = K_ACC;
    s->ma = p->dmem[v];
    s->mb = p->dacc[v];
    s->n = nfloats(p->dmem[v]);
  }
  return 0;
}

static void dims4(dnnl_dims_t d, int n, nn_shape s) {
  d[0] = n;
  d[1] = s.c;
  d[2] = s.h;
  d[3] = s.w;
}

/* A convolution with a 1x1 output whose window covers the whole (padded) input only ever multiplies
   the taps that see the input: taps [pad, pad + h) x [pad, pad + w). It runs as an h x w convolution
   without padding on a strided view of the arena, which skips the work and the weight traffic of
   the taps that only see padding (ResNet-18's last stage on 28x28 or 32x32 images: 512x512 3x3
   convolutions on 1x1 inputs use 1 tap of 9, the strided one on 2x2 inputs 4 of 9). The skipped
   taps' gradients are zero. Returns 1 and the sub-kernel when that applies. */
static int conv_taps(const nn_net *net, const nn_layer *l, int *kh, int *kw) {
  nn_shape si = net->t.shapes[l->in], so = net->t.shapes[l->out];
  *kh = *kw = l->k;
  if (so.h != 1 || so.w != 1 || l->pad + si.h > l->k || l->pad + si.w > l->k) return 0;
  if (si.h == l->k && si.w == l->k) return 0; /* nothing to skip */
  *kh = si.h;
  *kw = si.w;
  return 1;
}

/* The layer's weights (or gradients) in the arena as oneDNN sees them: OIHW, or the used taps. */
static int conv_arena_md(bctx *b, const nn_layer *l, dnnl_memory_desc_t *md) {
  nn_shape si = b->net->t.shapes[l->in];
  int kh, kw;
  if (!conv_taps(b->net, l, &kh, &kw)) {
    dnnl_dims_t wd = {l->cout, si.c, l->k, l->k};
    return md_plain(b, md, 4, wd);
  }
  dnnl_dims_t wd = {l->cout, si.c, kh, kw}, ws = {(int64_t)si.c * l->k * l->k, (int64_t)l->k * l->k, l->k, 1};
  DN(dnnl_memory_desc_init_by_strides(md, 4, wd, dnnl_f32, ws));
  md->offset0 = (int64_t)l->pad * l->k + l->pad;
  return 0;
}

/* Kernel, stride and padding the primitive gets. */
static void conv_geom(const nn_net *net, const nn_layer *l, int64_t *kh, int64_t *kw, dnnl_dims_t st, dnnl_dims_t pad) {
  int h, w, c = conv_taps(net, l, &h, &w);
  *kh = h;
  *kw = w;
  st[0] = st[1] = c ? 1 : l->stride;
  pad[0] = pad[1] = c ? 0 : l->pad;
}

/* oneDNN's Winograd convolution (F(4x4, 3x3): a quarter of the multiplications; AVX-512 only,
 * channels in 16s) for a 3x3 stride-1 layer whose output fills at least half of its 4x4 tiles: the
 * CIFAR ResNets' layers at 32x32 down to 7x7 train faster than on the direct kernels, while the
 * 2x2 maps of ResNet-18's last stages on small images, three quarters padding, train slower.
 * Not the network's input (1 or 3 channels). FABENCH_NO_WINO in the environment keeps every layer
 * on the direct kernels, to compare the two. */
static int conv_wino_fits(const nn_net *net, const nn_layer *l) {
  nn_shape so = net->t.shapes[l->out];
  int64_t kh, kw;
  dnnl_dims_t st, pad;
  conv_geom(net, l, &kh, &kw, st, pad);
  if (!l->in || kh != 3 || kw != 3 || st[0] != 1 || getenv("FABENCH_NO_WINO")) return 0;
  int64_t th = (so.h + 3) / 4 * 4, tw = (so.w + 3) / 4 * 4;
  return 2 * (int64_t)so.h * so.w >= th * tw;
}

/* The algorithm a convolution's forward descriptor was made with (its backward uses the same). */
static dnnl_alg_kind_t conv_alg(const_dnnl_primitive_desc_t pd) {
  const dnnl_convolution_desc_t *d = NULL;
  if (dnnl_primitive_desc_query(pd, dnnl_query_convolution_d, 0, &d) != dnnl_success || !d)
    return dnnl_convolution_direct;
  return d->alg_kind;
}

/* ------------------------------------------------------------------------------------------------
 * layers: forward builders (in layer order) */

/* The forward half that convolution and inner product share: the weights in the layout fpd
 * wants (reordered from the plain arena by the weights step when it differs) and the output. */
static int fwd_weights_dst(bctx *b, dnnl_primitive_desc_t fpd, dnnl_memory_t wp,
                           const dnnl_memory_desc_t *wplain, int out, dnnl_memory_t *wmem) {
  plan *p = b->p;
  const dnnl_memory_desc_t *wq = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
  if (dnnl_memory_desc_equal(wq, wplain)) {
    *wmem = wp;
  } else if (!(*wmem = mem_new(b, wq)) || reorder_step(b, &p->wfwd, NULL, wp, *wmem)) {
    return -1;
  }
  p->vmd[out] = *dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0);
  return (p->vmem[out] = mem_new(b, &p->vmd[out])) ? 0 : -1;
}

/* The channel block of a blocked 4-d layout (aBcd8b: 8, aBcd16b: 16), else 0. */
static int md_cblock(const dnnl_memory_desc_t *md) {
  const dnnl_blocking_desc_t *bl = &md->format_desc.blocking;
  if (md->format_kind != dnnl_blocked || md->ndims != 4 || bl->inner_nblks != 1 || bl->inner_idxs[0] != 1) return 0;
  return (int)bl->inner_blks[0];
}

static int md_padded(const dnnl_memory_desc_t *md) { return md_cblock(md) && md->padded_dims[1] != md->dims[1]; }

static dnnl_format_tag_t cblock_tag(int block) { return block == 16 ? dnnl_aBcd16b : dnnl_aBcd8b; }

/* The same bytes as a padded value, seen with its padding as channels of their own (zeros: oneDNN
 * keeps padding zero and so does the residual add). Returns 1 and *view where md is such a value. */
static int md_padded_view(const dnnl_memory_desc_t *md, dnnl_memory_desc_t *view) {
  if (!md_padded(md)) return 0;
  dnnl_dims_t d = {md->dims[0], md->padded_dims[1], md->dims[2], md->dims[3]};
  if (dnnl_memory_desc_init_by_tag(view, 4, d, dnnl_f32, cblock_tag(md_cblock(md))) != dnnl_success) return 0;
  for (int i = 0; i < 4; i++)
    if (view->format_desc.blocking.strides[i] != md->format_desc.blocking.strides[i]) return 0;
  return dnnl_memory_desc_get_size(view) == dnnl_memory_desc_get_size(md);
}

/* oneDNN's own choice for a convolution (every layout "any") suits channel counts that fill its
 * ISA's blocks, not narrow ones: under 16 input channels on AVX-512 (8 on AVX2) it takes its
 * first-layer kernel, which reads plain NCHW (a reorder of the blocked value every step) and whose
 * data gradient, plain too, only its reference code writes; and it pads 8 or 12 channels to 16,
 * doubling the work. Where its choice reorders the input, pads the output or is the reference
 * code, the convolution is tried on the producer's layout with the output blocked by 8 (AVX2
 * kernels, no padding for multiples of 8) or by the input's block; then, for inputs narrower than
 * their block, with the padding taken as input channels of zero weight (the weights are padded
 * with zeros: conv_fwd's K_WPAD). The first that is not the reference code replaces *fpd. The
 * network's input (plain; its stem has no data gradient) only gets the output's layout chosen. */
static int conv_fwd_layout(bctx *b, const nn_layer *l, dnnl_primitive_desc_t *fpd, const dnnl_memory_desc_t *smd,
                           const dnnl_memory_desc_t *dmd, const dnnl_dims_t st, const dnnl_dims_t pad) {
  plan *p = b->p;
  const dnnl_memory_desc_t *vmd = l->in ? &p->vmd[l->in] : smd;
  int vblock = l->in ? md_cblock(vmd) : 16;
  if (!vblock) return 0;
  if (!pd_is_ref(*fpd) && (!l->in || dnnl_memory_desc_equal(dnnl_primitive_desc_query_md(*fpd, dnnl_query_src_md, 0), vmd)) &&
      !md_padded(dnnl_primitive_desc_query_md(*fpd, dnnl_query_dst_md, 0)))
    return 0;
  dnnl_memory_desc_t srcs[2];
  srcs[0] = *vmd;
  int nsrc = l->in && md_padded_view(vmd, &srcs[1]) ? 2 : 1;
  for (int k = 0; k < 2 * nsrc; k++) {
    const dnnl_memory_desc_t *sk = &srcs[k / 2];
    dnnl_memory_desc_t d, w;
    dnnl_convolution_desc_t cd;
    dnnl_primitive_desc_t alt = NULL;
    dnnl_dims_t wd = {dmd->dims[1], sk->dims[1], 0, 0};
    const dnnl_memory_desc_t *fw = dnnl_primitive_desc_query_md(*fpd, dnnl_query_weights_md, 0);
    wd[2] = fw->dims[2];
    wd[3] = fw->dims[3];
    if (md_any(b, &w, 4, wd)) return -1;
    DN(dnnl_memory_desc_init_by_tag(&d, 4, dmd->dims, dnnl_f32, cblock_tag(k % 2 ? vblock : 8)));
    DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, sk, &w, NULL, &d,
                                          st, pad, pad));
    if (dnnl_primitive_desc_create(&alt, &cd, b->net->attr, b->net->eng, NULL) != dnnl_success) continue;
    if (pd_is_ref(alt)) {
      dnnl_primitive_desc_destroy(alt);
      continue;
    }
    dnnl_primitive_desc_destroy(*fpd);
    *fpd = alt;
    return 0;
  }
  return 0;
}

/* The convolution reads its input with more channels than the layer has (a padded view, above):
 * the weights and their gradient pass through a plain OIHW buffer of icp input channels, zero
 * beyond the layer's, which the K_WPAD and K_WUNPAD steps copy from and to the arena's view wv
 * (the padding's gradients are dropped). */
static dnnl_memory_t wpad_mem(bctx *b, const dnnl_memory_desc_t *wv, int64_t icp, dnnl_memory_desc_t *pmd) {
  dnnl_dims_t d = {wv->dims[0], icp, wv->dims[2], wv->dims[3]};
  return md_plain(b, pmd, 4, d) ? NULL : mem_new(b, pmd);
}

static int wpad_step(bctx *b, steplist *l, int kind, const dnnl_memory_desc_t *wv, float *arena, dnnl_memory_t m) {
  step *s = push(b, l);
  if (!s) return -1;
  s->kind = kind;
  s->a = arena + wv->offset0;
  s->c = ptr_of(m);
  s->icp = md_of(m)->dims[1];
  for (int i = 0; i < 4; i++) {
    s->wdim[i] = wv->dims[i];
    s->wstr[i] = wv->format_desc.blocking.strides[i];
  }
  return 0;
}

static int conv_fwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t *fpd, dnnl_memory_t *csrc,
                    dnnl_memory_t *wmem) {
  nn_net *net = b->net;
  plan *p = b->p;
  nn_shape si = net->t.shapes[l->in], so = net->t.shapes[l->out];
  int64_t kh, kw;
  dnnl_dims_t sd, dd, st, pad;
  conv_geom(net, l, &kh, &kw, st, pad);
  dnnl_dims_t wd = {l->cout, si.c, kh, kw};
  dims4(sd, p->n, si);
  dims4(dd, p->n, so);
  dnnl_memory_desc_t smd, wmd, dmd, warena, wplain;
  if (md_any(b, &smd, 4, sd) || md_any(b, &wmd, 4, wd) || md_any(b, &dmd, 4, dd) || conv_arena_md(b, l, &warena))
    return -1;
  dnnl_convolution_desc_t cd;
  DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_direct, &smd, &wmd,
                                        NULL, &dmd, st, pad, pad));
  if (pd_new(b, fpd, &cd, NULL, "convolution")) return -1;
  if (conv_fwd_layout(b, l, fpd, &smd, &dmd, st, pad)) return -1;
  if (conv_wino_fits(net, l)) { /* on the layouts chosen above, where oneDNN has it */
    dnnl_primitive_desc_t wpd = NULL;
    if (dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training, dnnl_convolution_winograd,
                                           dnnl_primitive_desc_query_md(*fpd, dnnl_query_src_md, 0), &wmd, NULL,
                                           dnnl_primitive_desc_query_md(*fpd, dnnl_query_dst_md, 0), st, pad,
                                           pad) == dnnl_success &&
        dnnl_primitive_desc_create(&wpd, &cd, net->attr, net->eng, NULL) == dnnl_success) {
      if (pd_is_ref(wpd)) {
        dnnl_primitive_desc_destroy(wpd);
      } else {
        dnnl_primitive_desc_destroy(*fpd);
        *fpd = wpd;
      }
    }
  }
  const dnnl_memory_desc_t *fsrc = dnnl_primitive_desc_query_md(*fpd, dnnl_query_src_md, 0);
  float *arena = net->params + net->li[b->layer].poff;
  dnnl_memory_t wp;
  if (fsrc->dims[1] == si.c) {
    if (!(*csrc = value_as(b, l->in, fsrc))) return -1;
    wplain = warena;
    wp = mem_user(b, &wplain, arena);
  } else { /* the padded view of the value */
    if (!(*csrc = mem_user(b, fsrc, ptr_of(p->vmem[l->in])))) return -1;
    if (!(wp = wpad_mem(b, &warena, fsrc->dims[1], &wplain)) || wpad_step(b, &p->wfwd, K_WPAD, &warena, arena, wp))
      return -1;
  }
  if (!wp) return -1;
  if (fwd_weights_dst(b, *fpd, wp, &wplain, l->out, wmem)) return -1;
  dnnl_primitive_t prim = prim_of(b, *fpd);
  if (!prim) return -1;
  dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, *csrc}, {DNNL_ARG_WEIGHTS, *wmem}, {DNNL_ARG_DST, p->vmem[l->out]}};
  if (add_prim(b, &p->fwd, prim, 3, a) || add_prim(b, &p->fwd_eval, prim, 3, a)) return -1;
  return 0;
}

/* The data-gradient half that convolution and inner product share: the weights in the layout
 * the backward-data primitive pd wants, then the input's gradient. Owns pd. */
static int bwd_data_exec(bctx *b, dnnl_primitive_desc_t pd, dnnl_memory_t wmem, dnnl_memory_t dy, int in,
                         const dnnl_memory_desc_t *smd) {
  plan *p = b->p;
  const dnnl_memory_desc_t *bwq = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
  dnnl_memory_t bw = wmem;
  if (!dnnl_memory_desc_equal(bwq, md_of(wmem))) {
    if (!(bw = mem_new(b, bwq)) || reorder_step(b, &p->bwd, NULL, wmem, bw)) goto fail;
  }
  /* a padded view (conv_fwd_layout) writes the value's gradient itself, its padding zero */
  int view = smd->dims[1] != b->net->t.shapes[in].c;
  dnnl_memory_t wr, tgt, ws;
  if (diff_into(b, in, view ? &p->vmd[in] : smd, &wr, &tgt)) goto fail;
  if (!(ws = view ? mem_user(b, smd, ptr_of(wr)) : wr)) goto fail;
  dnnl_exec_arg_t ad[] = {{DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_WEIGHTS, bw}, {DNNL_ARG_DIFF_SRC, ws}};
  if (prim_step(b, &p->bwd, pd, 3, ad)) return -1;
  return diff_done(b, wr, tgt);
fail:
  dnnl_primitive_desc_destroy(pd);
  return -1;
}

/* On AVX2 (no AVX-512) oneDNN 2.6's JIT weights gradient refuses some blocked shapes (ResNet-18's
 * 256-channel 3x3 at 2x2, a one-channel input) and its reference code takes them, hundreds of
 * times slower than the other layers (docs/measurements.md). In plain layouts its GEMM implementation takes
 * them, for a reorder of the input and of the output's gradient. Replaces *pd, *src and *dy
 * where that helps; 0, or -1 with *pd still the caller's. */
static int conv_bwdw_plain(bctx *b, dnnl_primitive_desc_t *pd, const dnnl_memory_desc_t *wany, const dnnl_dims_t st,
                           const dnnl_dims_t pad, const_dnnl_primitive_desc_t fpd, dnnl_memory_t *src,
                           dnnl_memory_t *dy) {
  if (!pd_is_ref(*pd)) return 0;
  const dnnl_memory_desc_t *smd = md_of(*src), *dmd = md_of(*dy);
  dnnl_memory_desc_t sp, dp;
  if (md_plain(b, &sp, 4, smd->dims) || md_plain(b, &dp, 4, dmd->dims)) return -1;
  dnnl_convolution_desc_t cd;
  DN(dnnl_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, &sp, wany, NULL, &dp, st, pad, pad));
  dnnl_primitive_desc_t alt = NULL;
  if (dnnl_primitive_desc_create(&alt, &cd, b->net->attr, b->net->eng, fpd) != dnnl_success) return 0;
  if (pd_is_ref(alt)) {
    dnnl_primitive_desc_destroy(alt);
    return 0;
  }
  plan *p = b->p;
  dnnl_memory_t ps = dnnl_memory_desc_equal(&sp, smd) ? *src : mem_new(b, &sp);
  dnnl_memory_t pdy = dnnl_memory_desc_equal(&dp, dmd) ? *dy : mem_new(b, &dp);
  if (!ps || !pdy || (ps != *src && reorder_step(b, &p->bwd, NULL, *src, ps)) ||
      (pdy != *dy && reorder_step(b, &p->bwd, NULL, *dy, pdy))) {
    dnnl_primitive_desc_destroy(alt);
    return -1;
  }
  dnnl_primitive_desc_destroy(*pd);
  *pd = alt;
  *src = ps;
  *dy = pdy;
  return 0;
}

/* A backward descriptor (weights, or data) of the forward's algorithm; the direct one where oneDNN
 * has that algorithm only on its reference code or not at all. */
static int conv_bwd_pd(bctx *b, dnnl_primitive_desc_t *pd, int weights, dnnl_alg_kind_t alg,
                       const dnnl_memory_desc_t *smd, const dnnl_memory_desc_t *wany, const dnnl_memory_desc_t *dmd,
                       const dnnl_dims_t st, const dnnl_dims_t pad, const_dnnl_primitive_desc_t fpd) {
  dnnl_convolution_desc_t cd;
  if (alg != dnnl_convolution_direct) {
    dnnl_status_t s = weights ? dnnl_convolution_backward_weights_desc_init(&cd, alg, smd, wany, NULL, dmd, st, pad, pad)
                              : dnnl_convolution_backward_data_desc_init(&cd, alg, smd, wany, dmd, st, pad, pad);
    if (s == dnnl_success && dnnl_primitive_desc_create(pd, &cd, b->net->attr, b->net->eng, fpd) == dnnl_success) {
      if (!pd_is_ref(*pd)) return 0;
      dnnl_primitive_desc_destroy(*pd);
    }
  }
  if (weights)
    DN(dnnl_convolution_backward_weights_desc_init(&cd, dnnl_convolution_direct, smd, wany, NULL, dmd, st, pad, pad));
  else
    DN(dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct, smd, wany, dmd, st, pad, pad));
  return pd_new(b, pd, &cd, fpd, weights ? "convolution backward weights" : "convolution backward data");
}

static int conv_bwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t fpd, dnnl_memory_t csrc, dnnl_memory_t wmem) {
  nn_net *net = b->net;
  plan *p = b->p;
  int64_t kh, kw;
  dnnl_dims_t st, pad;
  conv_geom(net, l, &kh, &kw, st, pad);
  int kh_, kw_;
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
  const dnnl_memory_desc_t *dmd = &p->vmd[l->out];
  dnnl_dims_t wd = {l->cout, smd->dims[1], kh, kw}; /* input channels: padded ones too (conv_fwd_layout) */
  int padded = smd->dims[1] != net->t.shapes[l->in].c;
  dnnl_memory_desc_t wany, warena, wplain;
  if (md_any(b, &wany, 4, wd) || conv_arena_md(b, l, &warena) || diff_ready(b, l->out, 0)) return -1;
  if (conv_taps(net, l, &kh_, &kw_)) /* the taps that only see padding: zero gradients, never written */
    memset(net->grads + net->li[b->layer].poff, 0, net->li[b->layer].pcount * sizeof(float));
  dnnl_memory_t dy = p->dmem[l->out];

  /* weights gradient, written to the plain gradient arena */
  dnnl_primitive_desc_t pd;
  dnnl_alg_kind_t alg = conv_alg(fpd);
  if (conv_bwd_pd(b, &pd, 1, alg, smd, &wany, dmd, st, pad, fpd)) return -1;
  dnnl_memory_t wsrc = csrc, wdy = dy;
  if (conv_bwdw_plain(b, &pd, &wany, st, pad, fpd, &wsrc, &wdy)) goto fail;
  float *arena = net->grads + net->li[b->layer].poff;
  wplain = warena;
  dnnl_memory_t gp = padded ? wpad_mem(b, &warena, wd[1], &wplain) : mem_user(b, &warena, arena), dw = gp;
  const dnnl_memory_desc_t *dwq = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
  if (!gp || (!dnnl_memory_desc_equal(dwq, &wplain) && !(dw = mem_new(b, dwq)))) goto fail;
  dnnl_exec_arg_t aw[] = {{DNNL_ARG_SRC, wsrc}, {DNNL_ARG_DIFF_DST, wdy}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
  if (prim_step(b, &p->bwd, pd, 3, aw)) return -1;
  if (dw != gp && reorder_step(b, &p->bwd, NULL, dw, gp)) return -1;
  if (padded && wpad_step(b, &p->bwd, K_WUNPAD, &warena, arena, gp)) return -1;

  /* data gradient */
  if (l->in == 0 && !net->o.need_dx) return 0;
  if (conv_bwd_pd(b, &pd, 0, alg, smd, &wany, dmd, st, pad, fpd)) return -1;
  return bwd_data_exec(b, pd, wmem, dy, l->in, smd);
fail:
  dnnl_primitive_desc_destroy(pd);
  return -1;
}

typedef struct {
  dnnl_memory_t scale, shift, mean, var, ws;
} bn_mems;

static int bn_fwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t *fpd, bn_mems *m) {
  nn_net *net = b->net;
  plan *p = b->p;
  nn_shape s = net->t.shapes[l->in];
  layer_info *li = &net->li[b->layer];
  unsigned flags = dnnl_use_scale | dnnl_use_shift | (l->relu ? dnnl_fuse_norm_relu : 0);
  dnnl_batch_normalization_desc_t d;
  DN(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_training, &p->vmd[l->in], NN_BN_EPS, flags));
  if (pd_new(b, fpd, &d, NULL, "batch normalization")) return -1;
  dnnl_memory_desc_t cmd;
  dnnl_dims_t c = {s.c};
  if (md_plain(b, &cmd, 1, c)) return -1;
  memset(m, 0, sizeof(*m));
  if (!(m->scale = mem_user(b, &cmd, net->params + li->poff)) ||
      !(m->shift = mem_user(b, &cmd, net->params + li->poff + s.c)) || !(m->mean = mem_new(b, &cmd)) ||
      !(m->var = mem_new(b, &cmd)))
    return -1;
  if (l->relu && !(m->ws = mem_new(b, dnnl_primitive_desc_query_md(*fpd, dnnl_query_workspace_md, 0))))
    return -1;
  p->vmd[l->out] = p->vmd[l->in];
  if (!(p->vmem[l->out] = mem_new(b, &p->vmd[l->out]))) return -1;
  dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, p->vmem[l->in]}, {DNNL_ARG_DST, p->vmem[l->out]},
                         {DNNL_ARG_SCALE, m->scale},     {DNNL_ARG_SHIFT, m->shift},
                         {DNNL_ARG_MEAN, m->mean},       {DNNL_ARG_VARIANCE, m->var},
                         {DNNL_ARG_WORKSPACE, m->ws}};
  dnnl_primitive_t prim = prim_of(b, *fpd);
  if (!prim || add_prim(b, &p->fwd, prim, l->relu ? 7 : 6, a)) return -1;
  step *rs = push(b, &p->fwd);
  if (!rs) return -1;
  rs->kind = K_RUNSTAT;
  rs->a = ptr_of(m->mean);
  rs->b = ptr_of(m->var);
  rs->c = net->bufs + li->boff;
  rs->d = net->bufs + li->boff + s.c;
  rs->n = (size_t)s.c;
  rs->cnt = (double)p->n * s.h * s.w;

  /* inference: running statistics */
  dnnl_primitive_desc_t ipd;
  DN(dnnl_batch_normalization_forward_desc_init(&d, dnnl_forward_inference, &p->vmd[l->in], NN_BN_EPS,
                                                flags | dnnl_use_global_stats));
  if (pd_new(b, &ipd, &d, NULL, "batch normalization inference")) return -1;
  dnnl_memory_t rm = mem_user(b, &cmd, net->bufs + li->boff), rv = mem_user(b, &cmd, net->bufs + li->boff + s.c);
  if (!rm || !rv) {
    dnnl_primitive_desc_destroy(ipd);
    return -1;
  }
  dnnl_exec_arg_t ai[] = {{DNNL_ARG_SRC, p->vmem[l->in]}, {DNNL_ARG_DST, p->vmem[l->out]},
                          {DNNL_ARG_SCALE, m->scale},     {DNNL_ARG_SHIFT, m->shift},
                          {DNNL_ARG_MEAN, rm},            {DNNL_ARG_VARIANCE, rv}};
  return prim_step(b, &p->fwd_eval, ipd, 6, ai);
}

static int bn_bwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t fpd, const bn_mems *m) {
  nn_net *net = b->net;
  plan *p = b->p;
  nn_shape s = net->t.shapes[l->in];
  layer_info *li = &net->li[b->layer];
  unsigned flags = dnnl_use_scale | dnnl_use_shift | (l->relu ? dnnl_fuse_norm_relu : 0);
  if (diff_ready(b, l->out, 0)) return -1;
  dnnl_batch_normalization_desc_t d;
  dnnl_primitive_desc_t pd;
  DN(dnnl_batch_normalization_backward_desc_init(&d, dnnl_backward, &p->vmd[l->in], &p->vmd[l->in], NN_BN_EPS, flags));
  if (pd_new(b, &pd, &d, fpd, "batch normalization backward")) return -1;
  dnnl_memory_desc_t cmd;
  dnnl_dims_t c = {s.c};
  dnnl_memory_t gs, gb, wr, tgt;
  if (md_plain(b, &cmd, 1, c) || !(gs = mem_user(b, &cmd, net->grads + li->poff)) ||
      !(gb = mem_user(b, &cmd, net->grads + li->poff + s.c)) || diff_into(b, l->in, &p->vmd[l->in], &wr, &tgt)) {
    dnnl_primitive_desc_destroy(pd);
    return -1;
  }
  dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, p->vmem[l->in]}, {DNNL_ARG_MEAN, m->mean},
                         {DNNL_ARG_VARIANCE, m->var},    {DNNL_ARG_DIFF_DST, p->dmem[l->out]},
                         {DNNL_ARG_SCALE, m->scale},     {DNNL_ARG_SHIFT, m->shift},
                         {DNNL_ARG_DIFF_SRC, wr},        {DNNL_ARG_DIFF_SCALE, gs},
                         {DNNL_ARG_DIFF_SHIFT, gb},      {DNNL_ARG_WORKSPACE, m->ws}};
  if (prim_step(b, &p->bwd, pd, l->relu ? 10 : 9, a)) return -1;
  return diff_done(b, wr, tgt);
}

static int pool_fwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t *fpd, dnnl_memory_t *ws) {
  nn_net *net = b->net;
  plan *p = b->p;
  nn_shape si = net->t.shapes[l->in], so = net->t.shapes[l->out];
  int maxp = l->op == NN_MAXPOOL;
  dnnl_dims_t dd, k, st, pad, dil = {0, 0};
  dims4(dd, p->n, so);
  if (maxp) {
    k[0] = k[1] = l->k;
    st[0] = st[1] = l->stride;
    pad[0] = pad[1] = l->pad;
  } else { /* global average */
    k[0] = si.h;
    k[1] = si.w;
    st[0] = st[1] = 1;
    pad[0] = pad[1] = 0;
  }
  dnnl_memory_desc_t dmd;
  if (md_any(b, &dmd, 4, dd)) return -1;
  dnnl_pooling_v2_desc_t d;
  DN(dnnl_pooling_v2_forward_desc_init(&d, dnnl_forward_training,
                                       maxp ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding,
                                       &p->vmd[l->in], &dmd, st, k, dil, pad, pad));
  if (pd_new(b, fpd, &d, NULL, "pooling")) return -1;
  p->vmd[l->out] = *dnnl_primitive_desc_query_md(*fpd, dnnl_query_dst_md, 0);
  if (!(p->vmem[l->out] = mem_new(b, &p->vmd[l->out]))) return -1;
  *ws = NULL;
  if (maxp && !(*ws = mem_new(b, dnnl_primitive_desc_query_md(*fpd, dnnl_query_workspace_md, 0)))) return -1;
  dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, p->vmem[l->in]}, {DNNL_ARG_DST, p->vmem[l->out]}, {DNNL_ARG_WORKSPACE, *ws}};
  dnnl_primitive_t prim = prim_of(b, *fpd);
  if (!prim || add_prim(b, &p->fwd, prim, maxp ? 3 : 2, a) || add_prim(b, &p->fwd_eval, prim, maxp ? 3 : 2, a))
    return -1;
  return 0;
}

static int pool_bwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t fpd, dnnl_memory_t ws) {
  nn_net *net = b->net;
  plan *p = b->p;
  nn_shape si = net->t.shapes[l->in];
  int maxp = l->op == NN_MAXPOOL;
  dnnl_dims_t k, st, pad, dil = {0, 0};
  if (maxp) {
    k[0] = k[1] = l->k;
    st[0] = st[1] = l->stride;
    pad[0] = pad[1] = l->pad;
  } else {
    k[0] = si.h;
    k[1] = si.w;
    st[0] = st[1] = 1;
    pad[0] = pad[1] = 0;
  }
  if (diff_ready(b, l->out, 0)) return -1;
  dnnl_pooling_v2_desc_t d;
  dnnl_primitive_desc_t pd;
  DN(dnnl_pooling_v2_backward_desc_init(&d, maxp ? dnnl_pooling_max : dnnl_pooling_avg_exclude_padding,
                                        &p->vmd[l->in], &p->vmd[l->out], st, k, dil, pad, pad));
  if (pd_new(b, &pd, &d, fpd, "pooling backward")) return -1;
  dnnl_memory_t wr, tgt;
  if (diff_into(b, l->in, &p->vmd[l->in], &wr, &tgt)) {
    dnnl_primitive_desc_destroy(pd);
    return -1;
  }
  dnnl_exec_arg_t a[] = {{DNNL_ARG_DIFF_DST, p->dmem[l->out]}, {DNNL_ARG_DIFF_SRC, wr}, {DNNL_ARG_WORKSPACE, ws}};
  if (prim_step(b, &p->bwd, pd, maxp ? 3 : 2, a)) return -1;
  return diff_done(b, wr, tgt);
}

/* A fully connected layer's operands: 4-d (n, c, h, w) after a feature map, 2-d (n, c) after
   another fully connected layer, whose output is 2-d. */
static int fc_nd(const nn_net *net, const nn_layer *l) {
  return l->in != 0 && net->t.layers[l->in - 1].op == NN_FC ? 2 : 4;
}

static void fc_dims(const nn_net *net, const nn_layer *l, int n, dnnl_dims_t sd, dnnl_dims_t wd) {
  nn_shape si = net->t.shapes[l->in];
  int64_t s[4] = {n, si.c, si.h, si.w}, w[4] = {l->cout, si.c, si.h, si.w};
  for (int i = 0; i < 4; i++) sd[i] = s[i], wd[i] = w[i];
}

/* A ReLU after a fully connected layer (MLPs): forward in place on its output; backward masks the
   output's gradient in place before the layer's own backward reads it. */
static int relu_step(bctx *b, steplist *l, int kind, dnnl_memory_t y, dnnl_memory_t dy) {
  step *s = push(b, l);
  if (!s) return -1;
  s->kind = kind;
  s->ma = y;
  s->mb = dy;
  s->n = nfloats(y);
  return 0;
}

static int fc_fwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t *fpd, dnnl_memory_t *csrc, dnnl_memory_t *wmem) {
  nn_net *net = b->net;
  plan *p = b->p;
  int nd = fc_nd(net, l);
  dnnl_dims_t sd, wd, bd = {l->cout}, dd = {p->n, l->cout};
  fc_dims(net, l, p->n, sd, wd);
  dnnl_memory_desc_t smd, wmd, bmd, dmd, wplain;
  if (md_any(b, &smd, nd, sd) || md_any(b, &wmd, nd, wd) || md_plain(b, &bmd, 1, bd) || md_any(b, &dmd, 2, dd) ||
      md_plain(b, &wplain, nd, wd))
    return -1;
  dnnl_inner_product_desc_t d;
  DN(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_training, &smd, &wmd, &bmd, &dmd));
  if (pd_new(b, fpd, &d, NULL, "inner product")) return -1;
  if (!(*csrc = value_as(b, l->in, dnnl_primitive_desc_query_md(*fpd, dnnl_query_src_md, 0)))) return -1;
  size_t off = net->li[b->layer].poff;
  dnnl_memory_t wp = mem_user(b, &wplain, net->params + off);
  dnnl_memory_t bias = mem_user(b, &bmd, net->params + off + (size_t)wd[0] * wd[1] * wd[2] * wd[3]);
  if (!wp || !bias) return -1;
  if (fwd_weights_dst(b, *fpd, wp, &wplain, l->out, wmem)) return -1;
  dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, *csrc}, {DNNL_ARG_WEIGHTS, *wmem}, {DNNL_ARG_BIAS, bias},
                         {DNNL_ARG_DST, p->vmem[l->out]}};
  dnnl_primitive_t prim = prim_of(b, *fpd);
  if (!prim || add_prim(b, &p->fwd, prim, 4, a) || add_prim(b, &p->fwd_eval, prim, 4, a)) return -1;
  if (l->relu && (relu_step(b, &p->fwd, K_RELU_FWD, p->vmem[l->out], NULL) ||
                  relu_step(b, &p->fwd_eval, K_RELU_FWD, p->vmem[l->out], NULL)))
    return -1;
  return 0;
}

static int fc_bwd(bctx *b, const nn_layer *l, dnnl_primitive_desc_t fpd, dnnl_memory_t csrc, dnnl_memory_t wmem) {
  nn_net *net = b->net;
  plan *p = b->p;
  int nd = fc_nd(net, l);
  dnnl_dims_t sd, wd, bd = {l->cout};
  fc_dims(net, l, p->n, sd, wd);
  const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0);
  dnnl_memory_desc_t wany, wplain, bmd;
  if (md_any(b, &wany, nd, wd) || md_plain(b, &wplain, nd, wd) || md_plain(b, &bmd, 1, bd) ||
      diff_ready(b, l->out, 0))
    return -1;
  dnnl_memory_t dy = p->dmem[l->out];
  if (l->relu && relu_step(b, &p->bwd, K_RELU_BWD, p->vmem[l->out], dy)) return -1;
  size_t off = net->li[b->layer].poff;
  dnnl_inner_product_desc_t d;
  dnnl_primitive_desc_t pd;
  DN(dnnl_inner_product_backward_weights_desc_init(&d, smd, &wany, &bmd, &p->vmd[l->out]));
  if (pd_new(b, &pd, &d, fpd, "inner product backward weights")) return -1;
  dnnl_memory_t gp = mem_user(b, &wplain, net->grads + off), dw = gp;
  dnnl_memory_t gb = mem_user(b, &bmd, net->grads + off + (size_t)wd[0] * wd[1] * wd[2] * wd[3]);
  const dnnl_memory_desc_t *dwq = dnnl_primitive_desc_query_md(pd, dnnl_query_diff_weights_md, 0);
  if (!gp || !gb || (!dnnl_memory_desc_equal(dwq, &wplain) && !(dw = mem_new(b, dwq)))) goto fail;
  dnnl_exec_arg_t aw[] = {{DNNL_ARG_SRC, csrc}, {DNNL_ARG_DIFF_DST, dy}, {DNNL_ARG_DIFF_WEIGHTS, dw},
                          {DNNL_ARG_DIFF_BIAS, gb}};
  if (prim_step(b, &p->bwd, pd, 4, aw)) return -1;
  if (dw != gp && reorder_step(b, &p->bwd, NULL, dw, gp)) return -1;
  if (l->in == 0 && !net->o.need_dx) return 0;
  DN(dnnl_inner_product_backward_data_desc_init(&d, smd, &wany, &p->vmd[l->out]));
  if (pd_new(b, &pd, &d, fpd, "inner product backward data")) return -1;
  return bwd_data_exec(b, pd, wmem, dy, l->in, smd);
fail:
  dnnl_primitive_desc_destroy(pd);
  return -1;
}

/* Residual add + ReLU: ours, one pass over the blocked buffers (elementwise, so any layout works as
   long as both operands share it; padded channels stay zero). */
static int add_fwd(bctx *b, const nn_layer *l) {
  plan *p = b->p;
  p->vmd[l->out] = p->vmd[l->in];
  dnnl_memory_t m2 = value_as(b, l->in2, &p->vmd[l->in]);
  if (!m2 || !(p->vmem[l->out] = mem_new(b, &p->vmd[l->out]))) return -1;
  for (int i = 0; i < 2; i++) {
    step *s = push(b, i ? &p->fwd_eval : &p->fwd);
    if (!s) return -1;
    s->kind = K_ADD_RELU_FWD;
    s->ma = p->vmem[l->in];
    s->mb = m2;
    s->mc = p->vmem[l->out];
    s->n = nfloats(p->vmem[l->out]);
  }
  return 0;
}

static int add_bwd(bctx *b, const nn_layer *l) {
  plan *p = b->p;
  if (diff_ready(b, l->out, 1)) return -1;
  dnnl_memory_t w1, t1, w2, t2;
  if (diff_into(b, l->in, &p->vmd[l->in], &w1, &t1) || diff_into(b, l->in2, &p->vmd[l->in], &w2, &t2)) return -1;
  step *s = push(b, &p->bwd);
  if (!s) return -1;
  s->kind = K_ADD_RELU_BWD;
  s->ma = p->vmem[l->out];
  s->mb = p->dmem[l->out];
  s->mc = p->writers[l->out] == 2 ? p->dacc[l->out] : NULL;
  s->md = w1;
  s->me = w2;
  s->n = nfloats(p->vmem[l->out]);
  return diff_done(b, w1, t1) || diff_done(b, w2, t2) ? -1 : 0;
}

/* ------------------------------------------------------------------------------------------------
 * plans */

static void plan_free(plan *p) {
  if (!p) return;
  for (int i = 0; i < p->nprims; i++) dnnl_primitive_destroy(p->prims[i]);
  for (int i = 0; i < p->nmems; i++) dnnl_memory_destroy(p->mems[i]);
  free(p->prims);
  free(p->mems);
  free(p->wfwd.v);
  free(p->fwd.v);
  free(p->fwd_eval.v);
  free(p->bwd.v);
  free(p->vmd);
  free(p->vmem);
  free(p->dmem);
  free(p->dacc);
  free(p->writers);
  free(p->pool);
  free(p);
}

static int plan_build(bctx *b) {
  nn_net *net = b->net;
  plan *p = b->p;
  const nn_table *t = &net->t;
  int nl = t->nlayers, last = t->layers[nl - 1].out;
  b->layer = -1;
  dnnl_dims_t xd;
  dims4(xd, p->n, t->shapes[0]);
  if (md_plain(b, &p->vmd[0], 4, xd) || !(p->vmem[0] = mem_user(b, &p->vmd[0], NULL))) return -1;

  /* per-layer state kept between the forward and backward builders */
  dnnl_primitive_desc_t *fpd = calloc((size_t)nl, sizeof(*fpd));
  dnnl_memory_t *m1 = calloc((size_t)nl, sizeof(*m1)), *m2 = calloc((size_t)nl, sizeof(*m2));
  bn_mems *bm = calloc((size_t)nl, sizeof(*bm));
  int rc = -1;
  if (!fpd || !m1 || !m2 || !bm) {
    snprintf(b->err, b->cap, "out of memory");
    goto out;
  }
  for (int i = 0; i < nl; i++) {
    const nn_layer *l = &t->layers[i];
    b->layer = i;
    if (l->in != 0 && t->layers[l->in - 1].op == NN_FC && l->op != NN_FC) {
      snprintf(b->err, b->cap, "layer %d: only a fully connected layer may follow one", i);
      goto out;
    }
    int r = 0;
    switch (l->op) {
    case NN_CONV: r = conv_fwd(b, l, &fpd[i], &m1[i], &m2[i]); break;
    case NN_BN: r = bn_fwd(b, l, &fpd[i], &bm[i]); break;
    case NN_MAXPOOL:
    case NN_AVGPOOL: r = pool_fwd(b, l, &fpd[i], &m1[i]); break;
    case NN_FC: r = fc_fwd(b, l, &fpd[i], &m1[i], &m2[i]); break;
    case NN_ADD_RELU: r = add_fwd(b, l); break;
    }
    if (r) goto out;
  }
  b->layer = -1;
  /* output edge: the last value in plain layout */
  nn_shape so = t->shapes[last];
  dnnl_memory_desc_t ymd;
  dnnl_dims_t yd;
  dims4(yd, p->n, so);
  int ynd = t->layers[nl - 1].op == NN_FC ? 2 : 4;
  if (md_plain(b, &ymd, ynd, yd)) goto out;
  if (dnnl_memory_desc_equal(&ymd, &p->vmd[last])) {
    p->y = p->vmem[last];
  } else if (!(p->y = mem_new(b, &ymd)) || reorder_step(b, &p->fwd, &p->fwd_eval, p->vmem[last], p->y)) {
    goto out;
  }
  if (p->full) {
    /* gradient edge, then the layers in reverse */
    if (!(p->dmem[last] = diff_mem(b, &p->vmd[last]))) goto out;
    p->writers[last] = 1;
    if (dnnl_memory_desc_equal(&ymd, &p->vmd[last])) {
      p->dy = p->dmem[last];
    } else if (!(p->dy = mem_new(b, &ymd)) || reorder_step(b, &p->bwd, NULL, p->dy, p->dmem[last])) {
      goto out;
    }
    for (int i = nl - 1; i >= 0; i--) {
      const nn_layer *l = &t->layers[i];
      b->layer = i;
      int r = 0;
      switch (l->op) {
      case NN_CONV: r = conv_bwd(b, l, fpd[i], m1[i], m2[i]); break;
      case NN_BN: r = bn_bwd(b, l, fpd[i], &bm[i]); break;
      case NN_MAXPOOL:
      case NN_AVGPOOL: r = pool_bwd(b, l, fpd[i], m1[i]); break;
      case NN_FC: r = fc_bwd(b, l, fpd[i], m1[i], m2[i]); break;
      case NN_ADD_RELU: r = add_bwd(b, l); break;
      }
      if (r) goto out;
      diff_release(p, p->dmem[l->out]); /* its producer was the last to read it */
      diff_release(p, p->dacc[l->out]);
    }
    b->layer = -1;
    if (net->o.need_dx && diff_ready(b, 0, 0)) goto out;
  }
  /* one scratchpad for every primitive of the plan (they run one at a time) */
  if (p->scratch_size) {
    dnnl_memory_desc_t smd;
    dnnl_dims_t sz = {(int64_t)p->scratch_size};
    DN(dnnl_memory_desc_init_by_tag(&smd, 1, sz, dnnl_u8, dnnl_a));
    if (!(p->scratch = mem_new(b, &smd))) goto out;
  }
  steplist *lists[] = {&p->wfwd, &p->fwd, &p->fwd_eval, &p->bwd};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < lists[k]->n; i++) {
      step *s = &lists[k]->v[i];
      if (s->kind == K_PRIM && s->scratch && p->scratch) s->args[s->nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, p->scratch};
    }
  rc = 0;
out:
  if (fpd)
    for (int i = 0; i < nl; i++)
      if (fpd[i]) dnnl_primitive_desc_destroy(fpd[i]);
  free(fpd);
  free(m1);
  free(m2);
  free(bm);
  return rc;
}

static plan *plan_new(nn_net *net, int n, int full, char *err, size_t errcap) {
  plan *p = calloc(1, sizeof(*p));
  int nv = net->t.nvalues;
  if (!p || !(p->vmd = calloc((size_t)nv, sizeof(*p->vmd))) || !(p->vmem = calloc((size_t)nv, sizeof(*p->vmem))) ||
      !(p->dmem = calloc((size_t)nv, sizeof(*p->dmem))) || !(p->dacc = calloc((size_t)nv, sizeof(*p->dacc))) ||
      !(p->writers = calloc((size_t)nv, sizeof(*p->writers)))) {
    plan_free(p);
    snprintf(err, errcap, "out of memory");
    return NULL;
  }
  p->n = n;
  p->full = full;
  p->wver = ~(uint64_t)0;
  bctx b = {net, p, err, errcap, -1};
  if (plan_build(&b)) {
    plan_free(p);
    return NULL;
  }
  return p;
}

/* The plan for batch n: the main one, or a cached one built on first use (partial batches, eval). */
static plan *plan_for(nn_net *net, int n, int full, char *err, size_t errcap) {
  net->clock++;
  set_threads(net->o.threads); /* primitives are laid out for the thread count they are made with */
  if (n == net->o.batch) return net->main;
  int free_slot = -1, oldest = -1;
  for (int i = 0; i < NN_MAX_PLANS; i++) {
    plan *p = net->cache[i];
    if (!p) {
      free_slot = i;
      continue;
    }
    if (p->n == n && (p->full || !full)) {
      p->uses = net->clock;
      return p;
    }
    if (oldest < 0 || p->uses < net->cache[oldest]->uses) oldest = i;
  }
  int slot = free_slot >= 0 ? free_slot : oldest;
  plan *p = plan_new(net, n, full, err, errcap);
  if (!p) return NULL;
  plan_free(net->cache[slot]);
  net->cache[slot] = p;
  p->uses = net->clock;
  return p;
}

/* ------------------------------------------------------------------------------------------------
 * execution */

/* Backward has finished layer `layer` (steps run in falling layer order): every gradient of it and
   of the layers after it, the arena's prefix up to its end, is final. */
static void grads_ready(nn_net *net, int layer) {
  if (!net->ready_fn || layer < 0) return;
  dnnl_stream_wait(net->strm);
  net->ready_fn(net->ready_ctx, layer, net->li[layer].poff + net->li[layer].pcount);
}

static int run_list(nn_net *net, steplist *l, int notify, char *err, size_t errcap) {
  for (int i = 0; i < l->n; i++) {
    step *s = &l->v[i];
    size_t n = s->n;
    if (s->kind != K_PRIM && s->kind != K_RUNSTAT && s->kind != K_WPAD && s->kind != K_WUNPAD) {
      s->a = s->ma ? ptr_of(s->ma) : NULL;
      s->b = s->mb ? ptr_of(s->mb) : NULL;
      s->c = s->mc ? ptr_of(s->mc) : NULL;
      s->d = s->md ? ptr_of(s->md) : NULL;
      s->e = s->me ? ptr_of(s->me) : NULL;
    }
    switch (s->kind) {
    case K_PRIM: {
      dnnl_status_t st = dnnl_primitive_execute(s->prim, net->strm, s->nargs, s->args);
      if (st != dnnl_success) {
        snprintf(err, errcap, "oneDNN %s executing layer %d", dnnl_status2str(st), s->layer);
        return -1;
      }
      break;
    }
    case K_ADD_RELU_FWD: {
      const float *a = s->a, *bb = s->b;
      float *c = s->c;
#pragma omp parallel for simd schedule(static)
      for (size_t j = 0; j < n; j++) {
        float v = a[j] + bb[j];
        c[j] = v > 0.0f ? v : 0.0f;
      }
      break;
    }
    case K_ADD_RELU_BWD: {
      const float *y = s->a, *dy = s->b, *acc = s->c;
      float *d1 = s->d, *d2 = s->e;
      if (acc) {
#pragma omp parallel for simd schedule(static)
        for (size_t j = 0; j < n; j++) {
          float g = y[j] > 0.0f ? dy[j] + acc[j] : 0.0f;
          d1[j] = g;
          d2[j] = g;
        }
      } else {
#pragma omp parallel for simd schedule(static)
        for (size_t j = 0; j < n; j++) {
          float g = y[j] > 0.0f ? dy[j] : 0.0f;
          d1[j] = g;
          d2[j] = g;
        }
      }
      break;
    }
    case K_RELU_FWD: {
      float *a = s->a;
#pragma omp parallel for simd schedule(static)
      for (size_t j = 0; j < n; j++) a[j] = a[j] > 0.0f ? a[j] : 0.0f;
      break;
    }
    case K_RELU_BWD: { /* a: the ReLU's output, b: its gradient, masked in place */
      const float *y = s->a;
      float *g = s->b;
#pragma omp parallel for simd schedule(static)
      for (size_t j = 0; j < n; j++) g[j] = y[j] > 0.0f ? g[j] : 0.0f;
      break;
    }
    case K_ACC: {
      float *a = s->a;
      const float *bb = s->b;
#pragma omp parallel for simd schedule(static)
      for (size_t j = 0; j < n; j++) a[j] += bb[j];
      break;
    }
    case K_WPAD:
    case K_WUNPAD: { /* a: the arena's view (wdim, wstr), c: plain OIHW with icp input channels */
      const int64_t *d = s->wdim, *st = s->wstr;
      for (int64_t o = 0; o < d[0]; o++)
        for (int64_t i = 0; i < d[1]; i++)
          for (int64_t h = 0; h < d[2]; h++)
            for (int64_t w = 0; w < d[3]; w++) {
              float *av = s->a + o * st[0] + i * st[1] + h * st[2] + w * st[3];
              float *cv = s->c + ((o * s->icp + i) * d[2] + h) * d[3] + w;
              if (s->kind == K_WPAD)
                *cv = *av;
              else
                *av = *cv;
            }
      break;
    }
    case K_RUNSTAT: { /* PyTorch: running = (1-m) running + m stat, variance unbiased */
      double m = NN_BN_MOMENTUM, unb = s->cnt > 1 ? s->cnt / (s->cnt - 1) : 1.0;
      for (size_t j = 0; j < n; j++) {
        s->c[j] = (float)((1 - m) * s->c[j] + m * s->a[j]);
        s->d[j] = (float)((1 - m) * s->d[j] + m * s->b[j] * unb);
      }
      break;
    }
    }
    if (notify && (i + 1 == l->n || l->v[i + 1].layer != s->layer)) grads_ready(net, s->layer);
  }
  return 0;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The training forward with the per-layer hook: before the first step of each layer with
   parameters, the hook (which may wait for them and update them), then that layer's weight
   reorders, then its steps. Both lists are in layer order (the output's edge, layer -1, last). */
static int forward_hooked(nn_net *net, plan *p, char *err, size_t errcap) {
  steplist one = {0};
  int w = 0, i = 0;
  while (i < p->fwd.n) {
    int layer = p->fwd.v[i].layer, j = i;
    while (j < p->fwd.n && p->fwd.v[j].layer == layer) j++;
    if (layer >= 0 && net->li[layer].pcount > 0) {
      dnnl_stream_wait(net->strm); /* the hook's updates must not race a running primitive */
      if (net->fwd_fn(net->fwd_ctx, layer, net->li[layer].poff, net->li[layer].pcount, err, errcap))
        return -1;
    }
    while (w < p->wfwd.n && p->wfwd.v[w].layer < layer) w++; /* layers without forward steps */
    int w0 = w;
    while (w < p->wfwd.n && p->wfwd.v[w].layer == layer) w++;
    one.v = p->wfwd.v + w0;
    one.n = w - w0;
    if (one.n && run_list(net, &one, 0, err, errcap)) return -1;
    one.v = p->fwd.v + i;
    one.n = j - i;
    if (run_list(net, &one, 0, err, errcap)) return -1;
    i = j;
  }
  p->wver = net->pver;
  return 0;
}

static int forward(nn_net *net, plan *p, const float *x, int train, char *err, size_t errcap) {
  set_threads(net->o.threads);
  if (dnnl_memory_set_data_handle(p->vmem[0], (void *)x) != dnnl_success) {
    snprintf(err, errcap, "oneDNN: cannot set the input buffer");
    return -1;
  }
  if (train && net->fwd_fn) {
    if (forward_hooked(net, p, err, errcap)) return -1;
    dnnl_stream_wait(net->strm);
    net->last = p;
    net->last_n = p->n;
    return 0;
  }
  if (p->wver != net->pver) {
    if (run_list(net, &p->wfwd, 0, err, errcap)) return -1;
    p->wver = net->pver;
  }
  if (run_list(net, train ? &p->fwd : &p->fwd_eval, 0, err, errcap)) return -1;
  dnnl_stream_wait(net->strm);
  net->last = p;
  net->last_n = p->n;
  return 0;
}

int nn_dnnl_forward(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap) {
  if (nn_check_batch(x, n, net->o.batch, err, errcap)) return -1;
  plan *p = plan_for(net, n, train, err, errcap);
  if (!p || forward(net, p, x, train, err, errcap)) return -1;
  if (y) memcpy(y, ptr_of(p->y), nfloats(p->y) * sizeof(float));
  return 0;
}

static int backward(nn_net *net, plan *p, char *err, size_t errcap) {
  if (run_list(net, &p->bwd, 1, err, errcap)) return -1;
  dnnl_stream_wait(net->strm);
  if (net->ready_fn) net->ready_fn(net->ready_ctx, -1, net->nparams);
  return 0;
}

void nn_dnnl_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx) {
  net->ready_fn = fn;
  net->ready_ctx = ctx;
}

int nn_dnnl_on_forward(nn_net *net, nn_fwd_layer_fn fn, void *ctx) {
  net->fwd_fn = fn;
  net->fwd_ctx = ctx;
  return 0;
}

int nn_dnnl_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap) {
  plan *p = net->last;
  if (!p || !p->full) {
    snprintf(err, errcap, "backward without a training forward");
    return -1;
  }
  memcpy(ptr_of(p->dy), dy, nfloats(p->dy) * sizeof(float));
  if (backward(net, p, err, errcap)) return -1;
  if (dx && net->o.need_dx) memcpy(dx, ptr_of(p->dmem[0]), nfloats(p->dmem[0]) * sizeof(float));
  return 0;
}

int nn_dnnl_train_step(nn_net *net, const float *x, const int32_t *labels, int n, float *loss, int *correct,
                      nn_step_times *t, char *err, size_t errcap) {
  if (nn_check_batch(x, n, net->o.batch, err, errcap) || nn_check_labels(labels, n, net->classes, err, errcap)) return -1;
  if (net->classes <= 0) {
    snprintf(err, errcap, "this network has no classifier");
    return -1;
  }
  double t0 = now_s();
  plan *p = plan_for(net, n, 1, err, errcap);
  if (!p || forward(net, p, x, 1, err, errcap)) return -1;
  double sum;
  int hits;
  nn_softmax_xent(ptr_of(p->y), labels, n, net->classes, &sum, &hits, ptr_of(p->dy));
  double t1 = now_s();
  if (backward(net, p, err, errcap)) return -1;
  double t2 = now_s();
  if (loss) *loss = (float)(sum / n);
  if (correct) *correct = hits;
  if (t) {
    t->fwd_s = t1 - t0;
    t->bwd_s = t2 - t1;
  }
  return 0;
}

int nn_dnnl_eval(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum, int *correct,
                char *err, size_t errcap) {
  if (nn_check_batch(x, n, net->o.batch, err, errcap) || nn_check_labels(labels, n, net->classes, err, errcap)) return -1;
  plan *p = plan_for(net, n, 0, err, errcap);
  if (!p || forward(net, p, x, 0, err, errcap)) return -1;
  double sum;
  int hits;
  nn_softmax_xent(ptr_of(p->y), labels, n, net->classes, &sum, &hits, NULL);
  if (loss_sum) *loss_sum += sum;
  if (correct) *correct += hits;
  return 0;
}

/* ------------------------------------------------------------------------------------------------
 * creation */

int nn_dnnl_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  *out = NULL;
  if (o && o->precision != NN_PREC_FP32) {
    snprintf(err, errcap, "the CPU engine computes in fp32 only (tf32 and bf16 are GPU precisions)");
    return -1;
  }
  if (!t || t->nlayers <= 0 || !o || o->batch <= 0 || o->threads < 0) {
    snprintf(err, errcap, "bad network options (batch %d, threads %d)", o ? o->batch : 0, o ? o->threads : 0);
    return -1;
  }
  nn_net *net = calloc(1, sizeof(*net));
  if (!net) goto oom;
  net->o = *o;
  if (net->o.threads == 0) net->o.threads = cores();
  /* private copy of the table */
  if (nn_table_init(&net->t, t->shapes[0].c, t->shapes[0].h, t->shapes[0].w)) goto oom;
  for (int i = 0; i < t->nlayers; i++)
    if (nn_table_add(&net->t, t->layers[i], err, errcap) < 0) goto fail;
  const nn_layer *lastl = &t->layers[t->nlayers - 1];
  net->classes = lastl->op == NN_FC ? lastl->cout : 0;
  int nl = net->t.nlayers;
  if (!(net->li = calloc((size_t)nl, sizeof(*net->li))) || !(net->pinfo = calloc(2 * (size_t)nl, sizeof(*net->pinfo))))
    goto oom;
  {
    size_t *off = malloc(3 * (size_t)nl * sizeof *off);
    if (!off) goto oom;
    net->npinfo = nn_arena_layout(&net->t, off, off + nl, off + 2 * nl, net->pinfo, &net->nparams, &net->nbufs);
    for (int i = 0; i < nl; i++)
      net->li[i] = (layer_info){.poff = off[i], .boff = off[nl + i], .pcount = off[2 * nl + i]};
    free(off);
  }
  size_t np = net->nparams ? net->nparams : 1, nb = net->nbufs ? net->nbufs : 1;
  if (o->grad_alloc) {
    net->galloc = *o->grad_alloc;
    if (!(net->grads = net->galloc.alloc(net->galloc.ctx, np * sizeof(float)))) {
      snprintf(err, errcap, "cannot allocate the gradient arena (%zu bytes)", np * sizeof(float));
      goto fail;
    }
    memset(net->grads, 0, np * sizeof(float));
  } else if (!(net->grads = calloc(np, sizeof(float)))) {
    goto oom;
  }
  if (!(net->params = calloc(np, sizeof(float))) || !(net->mom = calloc(np, sizeof(float))) ||
      !(net->bufs = calloc(nb, sizeof(float))))
    goto oom;
  if (nn_params_init(&net->t, net->o.seed, net->params, net->bufs)) goto oom;
  dnnl_status_t s;
  if ((s = dnnl_engine_create(&net->eng, dnnl_cpu, 0)) != dnnl_success ||
      (s = dnnl_stream_create(&net->strm, net->eng, dnnl_stream_default_flags)) != dnnl_success ||
      (s = dnnl_primitive_attr_create(&net->attr)) != dnnl_success ||
      (s = dnnl_primitive_attr_set_scratchpad_mode(net->attr, dnnl_scratchpad_mode_user)) != dnnl_success) {
    snprintf(err, errcap, "oneDNN %s creating the CPU engine", dnnl_status2str(s));
    goto fail;
  }
  set_threads(net->o.threads);
  if (!(net->main = plan_new(net, net->o.batch, 1, err, errcap))) goto fail;
  *out = net;
  return 0;
oom:
  snprintf(err, errcap, "out of memory");
fail:
  nn_dnnl_destroy(net);
  return -1;
}

void nn_dnnl_destroy(nn_net *net) {
  if (!net) return;
  plan_free(net->main);
  for (int i = 0; i < NN_MAX_PLANS; i++) plan_free(net->cache[i]);
  if (net->attr) dnnl_primitive_attr_destroy(net->attr);
  if (net->strm) dnnl_stream_destroy(net->strm);
  if (net->eng) dnnl_engine_destroy(net->eng);
  nn_table_free(&net->t);
  free(net->li);
  free(net->pinfo);
  free(net->params);
  if (net->galloc.alloc)
    net->galloc.free(net->galloc.ctx, net->grads);
  else
    free(net->grads);
  free(net->mom);
  free(net->bufs);
  free(net);
}

int nn_dnnl_slow_primitives(const nn_net *net, const char **first) {
  if (first) *first = net->slow;
  return net->nslow;
}

float *nn_dnnl_params(nn_net *net, size_t *count) {
  if (count) *count = net ? net->nparams : 0;
  if (!net) return NULL;
  net->pver++; /* the caller may write the weights */
  return net->params;
}
float *nn_dnnl_grads(nn_net *net, size_t *count) {
  if (count) *count = net ? net->nparams : 0;
  return net ? net->grads : NULL;
}
float *nn_dnnl_momentum(nn_net *net, size_t *count) {
  if (count) *count = net ? net->nparams : 0;
  return net ? net->mom : NULL;
}
float *nn_dnnl_buffers(nn_net *net, size_t *count) {
  if (count) *count = net ? net->nbufs : 0;
  return net ? net->bufs : NULL;
}

void nn_dnnl_sgd_step_range(nn_net *net, const nn_sgd_opts *o, size_t off, size_t count) {
  if (!net || !o || off >= net->nparams) return;
  if (count > net->nparams - off) count = net->nparams - off;
  set_threads(net->o.threads);
  nn_optim_apply(net->params + off, net->grads + off, net->mom + off, o->v ? o->v + off : NULL, count, o);
  net->pver++;
}

const float *nn_dnnl_logits(const nn_net *net, int *n, int *classes) {
  if (!net || !net->last) {
    if (n) *n = 0;
    return NULL;
  }
  if (n) *n = net->last_n;
  if (classes) *classes = net->classes;
  return ptr_of(net->last->y);
}

int nn_dnnl_param_tensors(const nn_net *net, const nn_param_info **info) {
  *info = net ? net->pinfo : NULL;
  return net ? net->npinfo : 0;
}

#define NN_STR2(x) #x
#define NN_STR(x) NN_STR2(x)
/* The header's version: a literal, so no buffer; Debian's headers and library come together. */
const char *nn_backend_version(void) {
  return "oneDNN " NN_STR(DNNL_VERSION_MAJOR) "." NN_STR(DNNL_VERSION_MINOR) "." NN_STR(DNNL_VERSION_PATCH);
}

#else /* !FABENCH_HAVE_DNNL: the binary links; CPU nets cannot be made, GPU nets work */

#define NO_DNNL "fabench was built without oneDNN (install libdnnl-dev and re-run cmake)"

int nn_dnnl_create_table(nn_net **out, const nn_table *t, const nn_engine_opts *o, char *err, size_t errcap) {
  (void)t, (void)o;
  *out = NULL;
  snprintf(err, errcap, NO_DNNL);
  return -1;
}
/* No CPU net exists in this build: what follows answers for none (a NULL net). */
void nn_dnnl_destroy(nn_net *net) { (void)net; }
void nn_dnnl_on_grad_ready(nn_net *net, nn_grad_ready_fn fn, void *ctx) { (void)net, (void)fn, (void)ctx; }
int nn_dnnl_on_forward(nn_net *net, nn_fwd_layer_fn fn, void *ctx) {
  (void)net, (void)ctx;
  return fn ? -1 : 0;
}
int nn_dnnl_forward(nn_net *net, const float *x, int n, int train, float *y, char *err, size_t errcap) {
  (void)net, (void)x, (void)n, (void)train, (void)y;
  snprintf(err, errcap, NO_DNNL);
  return -1;
}
int nn_dnnl_backward(nn_net *net, const float *dy, float *dx, char *err, size_t errcap) {
  (void)net, (void)dy, (void)dx;
  snprintf(err, errcap, NO_DNNL);
  return -1;
}
int nn_dnnl_train_step(nn_net *net, const float *x, const int32_t *labels, int n, float *loss, int *correct,
                       nn_step_times *t, char *err, size_t errcap) {
  (void)net, (void)x, (void)labels, (void)n, (void)loss, (void)correct, (void)t;
  snprintf(err, errcap, NO_DNNL);
  return -1;
}
int nn_dnnl_eval(nn_net *net, const float *x, const int32_t *labels, int n, double *loss_sum, int *correct,
                 char *err, size_t errcap) {
  (void)net, (void)x, (void)labels, (void)n, (void)loss_sum, (void)correct;
  snprintf(err, errcap, NO_DNNL);
  return -1;
}
static float *arena(size_t *count) {
  if (count) *count = 0;
  return NULL;
}
float *nn_dnnl_params(nn_net *net, size_t *count) { return (void)net, arena(count); }
float *nn_dnnl_grads(nn_net *net, size_t *count) { return (void)net, arena(count); }
float *nn_dnnl_momentum(nn_net *net, size_t *count) { return (void)net, arena(count); }
float *nn_dnnl_buffers(nn_net *net, size_t *count) { return (void)net, arena(count); }
void nn_dnnl_sgd_step_range(nn_net *net, const nn_sgd_opts *o, size_t offset, size_t count) {
  (void)net, (void)o, (void)offset, (void)count;
}
const float *nn_dnnl_logits(const nn_net *net, int *n, int *classes) {
  (void)net, (void)classes;
  if (n) *n = 0;
  return NULL;
}
int nn_dnnl_param_tensors(const nn_net *net, const nn_param_info **info) {
  (void)net;
  *info = NULL;
  return 0;
}
int nn_dnnl_slow_primitives(const nn_net *net, const char **first) {
  (void)net;
  if (first) *first = "";
  return 0;
}
const char *nn_backend_version(void) { return "none (built without oneDNN)"; }

#endif

int nn_dnnl_available(char *err, size_t errcap) {
#if FABENCH_HAVE_DNNL
  (void)err, (void)errcap;
  return 0;
#else
  snprintf(err, errcap, NO_DNNL);
  return -1;
#endif
}
