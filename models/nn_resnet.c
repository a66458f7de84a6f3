/* models: the layer table and the ResNet builders (torchvision ResNet-18/34/50/101/152 and the
 * CIFAR ResNets of He et al. 2016 §4.2). Networks are data: the engine only walks this table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"

int nn_table_init(nn_table *t, int in_c, int in_h, int in_w) {
  memset(t, 0, sizeof(*t));
  t->cap = 16;
  t->layers = calloc((size_t)t->cap, sizeof(*t->layers));
  t->shapes = calloc((size_t)t->cap + 1, sizeof(*t->shapes));
  if (!t->layers || !t->shapes) {
    nn_table_free(t);
    return -1;
  }
  t->shapes[0] = (nn_shape){in_c, in_h, in_w};
  t->nvalues = 1;
  return 0;
}

void nn_table_free(nn_table *t) {
  free(t->layers);
  free(t->shapes);
  memset(t, 0, sizeof(*t));
}

static int out_dim(int in, int k, int s, int p) { return (in + 2 * p - k) / s + 1; }

int nn_table_add(nn_table *t, nn_layer l, char *err, size_t errcap) {
  if (l.in < 0 || l.in >= t->nvalues || (l.op == NN_ADD_RELU && (l.in2 < 0 || l.in2 >= t->nvalues))) {
    snprintf(err, errcap, "layer %d: input value out of range", t->nlayers);
    return -1;
  }
  nn_shape s = t->shapes[l.in], o = s;
  switch (l.op) {
  case NN_CONV:
    if (l.cout <= 0 || l.k <= 0 || l.stride <= 0 || l.pad < 0) goto bad;
    o = (nn_shape){l.cout, out_dim(s.h, l.k, l.stride, l.pad), out_dim(s.w, l.k, l.stride, l.pad)};
    break;
  case NN_MAXPOOL:
    if (l.k <= 0 || l.stride <= 0 || l.pad < 0 || l.pad * 2 >= l.k + 1) goto bad;
    o = (nn_shape){s.c, out_dim(s.h, l.k, l.stride, l.pad), out_dim(s.w, l.k, l.stride, l.pad)};
    break;
  case NN_AVGPOOL: /* global */
    l.k = 0;
    o = (nn_shape){s.c, 1, 1};
    break;
  case NN_FC:
    if (l.cout <= 0) goto bad;
    o = (nn_shape){l.cout, 1, 1};
    break;
  case NN_BN:
    break;
  case NN_ADD_RELU: {
    nn_shape s2 = t->shapes[l.in2];
    if (s2.c != s.c || s2.h != s.h || s2.w != s.w) {
      snprintf(err, errcap, "layer %d: residual add of %dx%dx%d and %dx%dx%d", t->nlayers, s.c, s.h,
               s.w, s2.c, s2.h, s2.w);
      return -1;
    }
    break;
  }
  default:
    goto bad;
  }
  if (o.h <= 0 || o.w <= 0) {
    snprintf(err, errcap, "layer %d: input %dx%d is too small", t->nlayers, s.h, s.w);
    return -1;
  }
  if (t->nlayers == t->cap) {
    int cap = t->cap * 2;
    nn_layer *nl = realloc(t->layers, (size_t)cap * sizeof(*nl));
    if (!nl) goto oom;
    t->layers = nl;
    nn_shape *ns = realloc(t->shapes, ((size_t)cap + 1) * sizeof(*ns));
    if (!ns) goto oom;
    t->shapes = ns;
    t->cap = cap;
  }
  l.out = t->nvalues++;
  t->layers[t->nlayers++] = l;
  t->shapes[l.out] = o;
  return l.out;
bad:
  snprintf(err, errcap, "layer %d: bad layer parameters", t->nlayers);
  return -1;
oom:
  snprintf(err, errcap, "out of memory");
  return -1;
}

size_t nn_layer_param_count(const nn_table *t, int i) {
  const nn_layer *l = &t->layers[i];
  nn_shape s = t->shapes[l->in];
  switch (l->op) {
  case NN_CONV: return (size_t)l->cout * s.c * l->k * l->k;
  case NN_BN: return 2 * (size_t)s.c;
  case NN_FC: return (size_t)l->cout * s.c * s.h * s.w + l->cout;
  default: return 0;
  }
}

/* Builder state: errors stick, so the builders read as straight-line code. */
typedef struct {
  nn_table *t;
  char *err;
  size_t errcap;
  int failed;
} bld;

static int add(bld *b, nn_layer l) {
  if (b->failed) return 0;
  int v = nn_table_add(b->t, l, b->err, b->errcap);
  if (v < 0) {
    b->failed = 1;
    return 0;
  }
  return v;
}
static int conv(bld *b, int in, int cout, int k, int s, int p) {
  return add(b, (nn_layer){.op = NN_CONV, .in = in, .cout = cout, .k = k, .stride = s, .pad = p});
}
static int bn(bld *b, int in, int relu) { return add(b, (nn_layer){.op = NN_BN, .in = in, .relu = relu}); }

/* torchvision BasicBlock / Bottleneck (v1.5: stride on the 3x3). Forward order of the layers is
   torchvision's module call order: conv1, bn1, conv2, bn2, [conv3, bn3,] downsample conv, bn. */
static int block(bld *b, int x, int cin, int planes, int stride, int bottleneck) {
  int cout = bottleneck ? planes * 4 : planes, y;
  if (bottleneck) {
    y = bn(b, conv(b, x, planes, 1, 1, 0), 1);
    y = bn(b, conv(b, y, planes, 3, stride, 1), 1);
    y = bn(b, conv(b, y, cout, 1, 1, 0), 0);
  } else {
    y = bn(b, conv(b, x, planes, 3, stride, 1), 1);
    y = bn(b, conv(b, y, planes, 3, 1, 1), 0);
  }
  int id = x;
  if (stride != 1 || cin != cout) id = bn(b, conv(b, x, cout, 1, stride, 0), 0);
  return add(b, (nn_layer){.op = NN_ADD_RELU, .in = y, .in2 = id});
}

/* Decimal digits only (no sign, no blanks), at most 9: 0 and the value, or -1. */
static int name_int(const char **p, int *v) {
  int n = 0, k = 0;
  for (; **p >= '0' && **p <= '9'; (*p)++, k++) {
    if (k == 9) return -1;
    n = 10 * n + (**p - '0');
  }
  *v = n;
  return k ? 0 : -1;
}

static const int tv_depth[] = {18, 34, 50, 101, 152};
static const int tv_blocks[][4] = {{2, 2, 2, 2}, {3, 4, 6, 3}, {3, 4, 6, 3}, {3, 4, 23, 3}, {3, 8, 36, 3}};
/* The largest ResNet published is the CIFAR ResNet-1202; a wider or deeper name is a typo, and
 * would fail later allocating gigabytes. */
#define RESNET_MAX_DEPTH 1202
#define RESNET_MAX_WIDTH 1024
#define RESNET_NAMES "resnetD or resnetD-wN: D is 18|34|50|101|152 (torchvision) or any 6n+2 " \
                     "from 8 to 1202, e.g. 20|32|56|110 (CIFAR), N the base width (1 to 1024); or a " \
                     "fully connected mlp:IN,W,...,OUT or fc6"

/* resnet<depth>[-w<width>]: 0 with the depth, the width (0: the default) and the torchvision
 * table's row (-1: a CIFAR ResNet), or -1 with why in err. The one rule for the builder and
 * nn_model_check. */
static int parse_name(const char *model, int *depth, int *width, int *tv, char *err, size_t errcap) {
  const char *p = model;
  *width = 0;
  *tv = -1;
  if (!p || strncmp(p, "resnet", 6)) goto unknown;
  p += 6;
  if (name_int(&p, depth)) goto unknown;
  if (*p == '-') {
    if (strncmp(p, "-w", 2)) goto unknown;
    p += 2;
    if (name_int(&p, width) || *width <= 0) goto unknown;
  }
  if (*p) goto unknown;
  if (*width > RESNET_MAX_WIDTH) {
    snprintf(err, errcap, "unknown model '%s': base width %d is above %d; " RESNET_NAMES, model,
             *width, RESNET_MAX_WIDTH);
    return -1;
  }
  for (int i = 0; i < 5; i++)
    if (*depth == tv_depth[i]) *tv = i;
  if (*tv < 0 && (*depth < 8 || *depth > RESNET_MAX_DEPTH || (*depth - 2) % 6)) {
    snprintf(err, errcap, "unknown model '%s': no ResNet has depth %d; " RESNET_NAMES, model, *depth);
    return -1;
  }
  return 0;
unknown:
  snprintf(err, errcap, "unknown model '%s'; " RESNET_NAMES, model ? model : "(null)");
  return -1;
}

int nn_model_check(const char *model, char *err, size_t errcap) {
  int depth, width, tv;
  if (nn_model_is_mlp(model)) return nn_mlp_check(model, err, errcap);
  return parse_name(model, &depth, &width, &tv, err, errcap);
}

int nn_table_resnet(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes,
                    char *err, size_t errcap) {
  int depth, width, tv;
  if (parse_name(model, &depth, &width, &tv, err, errcap)) return -1;
  if (in_c <= 0 || in_h <= 0 || in_w <= 0 || classes <= 0) {
    snprintf(err, errcap, "bad input shape %dx%dx%d or class count %d", in_c, in_h, in_w, classes);
    return -1;
  }
  if (nn_table_init(t, in_c, in_h, in_w)) {
    snprintf(err, errcap, "out of memory");
    return -1;
  }
  bld b = {t, err, errcap, 0};
  int x = 0, c;
  if (tv >= 0) {
    int w = width ? width : 64, bottleneck = depth >= 50;
    x = bn(&b, conv(&b, x, w, 7, 2, 3), 1);
    x = add(&b, (nn_layer){.op = NN_MAXPOOL, .in = x, .k = 3, .stride = 2, .pad = 1});
    c = w;
    for (int s = 0; s < 4; s++) {
      int planes = w << s;
      for (int i = 0; i < tv_blocks[tv][s]; i++) {
        x = block(&b, x, c, planes, (s > 0 && i == 0) ? 2 : 1, bottleneck);
        c = bottleneck ? planes * 4 : planes;
      }
    }
  } else {
    int w = width ? width : 16, n = (depth - 2) / 6;
    x = bn(&b, conv(&b, x, w, 3, 1, 1), 1);
    c = w;
    for (int s = 0; s < 3; s++)
      for (int i = 0; i < n; i++) {
        x = block(&b, x, c, w << s, (s > 0 && i == 0) ? 2 : 1, 0);
        c = w << s;
      }
  }
  x = add(&b, (nn_layer){.op = NN_AVGPOOL, .in = x});
  add(&b, (nn_layer){.op = NN_FC, .in = x, .cout = classes});
  if (b.failed) {
    char msg[200];
    snprintf(msg, sizeof(msg), "%s", err);
    snprintf(err, errcap, "%s on %dx%dx%d input: %s", model, in_c, in_h, in_w, msg);
    nn_table_free(t);
    return -1;
  }
  return 0;
}

int nn_model_param_count(const char *model, int in_c, int in_h, int in_w, int classes,
                         size_t *count, char *err, size_t errcap) {
  nn_table t;
  if (nn_table_model(&t, model, in_c, in_h, in_w, classes, err, errcap)) return -1;
  size_t n = 0;
  for (int i = 0; i < t.nlayers; i++) n += nn_layer_param_count(&t, i);
  nn_table_free(&t);
  *count = n;
  return 0;
}
