/* --beside-compute: a thread that multiplies 64x64 matrices without pause, counting them. The
 * host's CPU per byte measured with idle cores understates what a training step's compute loses
 * to its communication, so the loss is measured directly (docs/measurements.md, "What the cores
 * lose beside the all-reduce"). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "collbench_int.h"

struct cb_load {
  pthread_t th;
  atomic_int stop;
  atomic_uint_fast64_t done;
};

static void *cb_load_main(void *arg) {
  cb_load *l = arg;
  enum { N = 64 };
  float a[N * N], b[N * N], c[N * N];
  for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7) * 0.25f, b[i] = (float)(i % 5) * 0.5f;
  volatile float sink = 0;
  while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
    memset(c, 0, sizeof c);
    for (int i = 0; i < N; i++)
      for (int k = 0; k < N; k++)
        for (int j = 0; j < N; j++) c[i * N + j] += a[i * N + k] * b[k * N + j];
    sink += c[N * N - 1];
    atomic_fetch_add_explicit(&l->done, 1, memory_order_relaxed);
  }
  (void)sink;
  return NULL;
}

cb_load *cb_load_start(void) {
  cb_load *l = calloc(1, sizeof *l);
  if (l && pthread_create(&l->th, NULL, cb_load_main, l)) {
    free(l);
    l = NULL;
  }
  return l;
}

uint64_t cb_load_done(const cb_load *l) {
  return l ? atomic_load_explicit(&((cb_load *)l)->done, memory_order_relaxed) : 0;
}

void cb_load_stop(cb_load *l) {
  if (!l) return;
  atomic_store(&l->stop, 1);
  pthread_join(l->th, NULL);
  free(l);
}
