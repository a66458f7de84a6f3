/* models: fully connected networks (MLPs) as layer tables: "mlp:IN,W1,...,OUT" with any widths,
 * and "fc6", the 6-layer shape of partitioned training's study (docs/training.md says why these
 * widths). A ReLU follows every layer but the last, fused into the layer (NN_FC with relu). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn_impl.h"

#define MLP_MAX_WIDTH 65536
#define MLP_NAMES "mlp:IN,W1,...,OUT (IN the input's C*H*W, OUT the classes, every width 1 to 65536, " \
                  "at least 2 numbers) or fc6"
/* fc6's hidden widths, between the input and the classes */
static const int fc6_hidden[] = {1024, 1024, 512, 512, 256};
#define FC6_HIDDEN ((int)(sizeof fc6_hidden / sizeof *fc6_hidden))

int nn_model_is_mlp(const char *model) {
  return model && (!strncmp(model, "mlp:", 4) || !strcmp(model, "fc6"));
}

/* The widths of an mlp: name, input first (at most cap); 0 with *n, or -1 with why in err. */
static int mlp_widths(const char *model, int *w, int cap, int *n, char *err, size_t errcap) {
  const char *p = model + 4;
  *n = 0;
  for (;;) {
    int v = 0, k = 0;
    for (; *p >= '0' && *p <= '9'; p++, k++) {
      if (k == 6) break;
      v = 10 * v + (*p - '0');
    }
    if (!k || v < 1 || v > MLP_MAX_WIDTH || (*p >= '0' && *p <= '9')) {
      snprintf(err, errcap, "bad model '%s': width %d is not a number from 1 to %d; " MLP_NAMES,
               model, *n + 1, MLP_MAX_WIDTH);
      return -1;
    }
    if (*n == cap) {
      snprintf(err, errcap, "bad model '%s': more than %d widths", model, cap);
      return -1;
    }
    w[(*n)++] = v;
    if (!*p) break;
    if (*p != ',') {
      snprintf(err, errcap, "bad model '%s': '%c' after width %d; " MLP_NAMES, model, *p, *n);
      return -1;
    }
    p++;
  }
  if (*n < 2) {
    snprintf(err, errcap, "bad model '%s': an input width and an output width at least; " MLP_NAMES,
             model);
    return -1;
  }
  return 0;
}

#define MLP_MAX_LAYERS 64

int nn_mlp_check(const char *model, char *err, size_t errcap) {
  int w[MLP_MAX_LAYERS + 1], n;
  if (!nn_model_is_mlp(model)) {
    snprintf(err, errcap, "unknown model '%s'; " MLP_NAMES, model ? model : "(null)");
    return -1;
  }
  return strcmp(model, "fc6") ? mlp_widths(model, w, MLP_MAX_LAYERS + 1, &n, err, errcap) : 0;
}

int nn_table_mlp(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes, char *err,
                 size_t errcap) {
  int w[MLP_MAX_LAYERS + 1], n;
  if (nn_mlp_check(model, err, errcap)) return -1;
  if (in_c <= 0 || in_h <= 0 || in_w <= 0 || classes <= 0) {
    snprintf(err, errcap, "bad input shape %dx%dx%d or class count %d", in_c, in_h, in_w, classes);
    return -1;
  }
  long in = (long)in_c * in_h * in_w;
  if (!strcmp(model, "fc6")) {
    n = 0;
    w[n++] = (int)(in < MLP_MAX_WIDTH ? in : MLP_MAX_WIDTH);
    for (int i = 0; i < FC6_HIDDEN; i++) w[n++] = fc6_hidden[i];
    w[n++] = classes;
  } else if (mlp_widths(model, w, MLP_MAX_LAYERS + 1, &n, err, errcap)) {
    return -1;
  }
  if (w[0] != in && strcmp(model, "fc6")) {
    snprintf(err, errcap, "model '%s' takes %d inputs, the data's images have %dx%dx%d = %ld", model, w[0],
             in_c, in_h, in_w, in);
    return -1;
  }
  if (w[n - 1] != classes) {
    snprintf(err, errcap, "model '%s' has %d outputs, the data has %d classes", model, w[n - 1], classes);
    return -1;
  }
  if (nn_table_init(t, in_c, in_h, in_w)) {
    snprintf(err, errcap, "out of memory");
    return -1;
  }
  int x = 0;
  for (int i = 1; i < n; i++) {
    x = nn_table_add(t, (nn_layer){.op = NN_FC, .in = x, .cout = w[i], .relu = i < n - 1}, err, errcap);
    if (x < 0) {
      nn_table_free(t);
      return -1;
    }
  }
  return 0;
}

/* Every model's table: an MLP or a ResNet by its name. */
int nn_table_model(nn_table *t, const char *model, int in_c, int in_h, int in_w, int classes, char *err,
                   size_t errcap) {
  if (nn_model_is_mlp(model)) return nn_table_mlp(t, model, in_c, in_h, in_w, classes, err, errcap);
  return nn_table_resnet(t, model, in_c, in_h, in_w, classes, err, errcap);
}
