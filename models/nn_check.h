/* models: private. The checks of a batch that both engines (nn_dnnl.c, nn_cuda.c) make alike,
 * so that a bad batch reads the same whichever engine runs it. */
#ifndef FABENCH_NN_CHECK_H
#define FABENCH_NN_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* 1..batch images at x. */
static inline int nn_check_batch(const void *x, int n, int batch, char *err, size_t errcap) {
  if (!x || n <= 0 || n > batch) {
    snprintf(err, errcap, "batch of %d images (this network takes 1..%d)", n, batch);
    return -1;
  }
  return 0;
}

/* Every label one of the classes. */
static inline int nn_check_labels(const int32_t *labels, int n, int classes, char *err, size_t errcap) {
  for (int i = 0; i < n; i++)
    if (labels[i] < 0 || labels[i] >= classes) {
      snprintf(err, errcap, "label %d of image %d is outside 0..%d", (int)labels[i], i, classes - 1);
      return -1;
    }
  return 0;
}

#endif
