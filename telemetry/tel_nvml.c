/* telemetry: the GPUs' counters through NVML, loaded at run time as topo/ does (fabench runs and
 * builds where no NVIDIA driver is): utilisation, memory in use and the NVLink data counters.
 * The library stays loaded from the sampler's start to its stop. */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_min.h"
#include "tel_int.h"

_Static_assert(offsetof(nvmlFieldValue_t, value) == 32 && sizeof(nvmlFieldValue_t) == 40,
               "nvmlFieldValue_t as NVML lays it out");

struct tel_nvml {
  void *lib;
  nvmlShutdown_fn shutdown;
  nvmlDeviceGetUtilizationRates_fn util;
  nvmlDeviceGetMemoryInfo_fn mem;
  nvmlDeviceGetFieldValues_fn fields;
  int ngpu;
  nvmlDevice_t dev[TEL_MAX_GPUS];
};

/* dlsym's void * into a function pointer without a cast between them */
static void *tel_sym(void *h, const char *name, void *fp, size_t size) {
  void *s = dlsym(h, name);
  memcpy(fp, &s, size);
  return s;
}
#define TEL_SYM(h, field, name) tel_sym((h), (name), &(field), sizeof(field))

tel_nvml *tel_nvml_open(const char *lib) {
  if (lib && !*lib) return NULL;
  void *h = dlopen(lib ? lib : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return NULL;
  tel_nvml *n = calloc(1, sizeof *n);
  nvmlInit_v2_fn init = NULL;
  nvmlDeviceGetCount_v2_fn count = NULL;
  nvmlDeviceGetHandleByIndex_v2_fn handle = NULL;
  unsigned cnt = 0;
  if (!n || !TEL_SYM(h, init, "nvmlInit_v2") || !TEL_SYM(h, n->shutdown, "nvmlShutdown") ||
      !TEL_SYM(h, count, "nvmlDeviceGetCount_v2") || !TEL_SYM(h, handle, "nvmlDeviceGetHandleByIndex_v2") ||
      init() != NVML_SUCCESS) {
    free(n);
    dlclose(h);
    return NULL;
  }
  n->lib = h;
  TEL_SYM(h, n->util, "nvmlDeviceGetUtilizationRates");
  TEL_SYM(h, n->mem, "nvmlDeviceGetMemoryInfo");
  TEL_SYM(h, n->fields, "nvmlDeviceGetFieldValues");
  if (count(&cnt) == NVML_SUCCESS)
    for (unsigned i = 0; i < cnt && n->ngpu < TEL_MAX_GPUS; i++)
      if (handle(i, &n->dev[n->ngpu]) == NVML_SUCCESS) n->ngpu++;
  if (n->ngpu == 0) {
    tel_nvml_close(n);
    return NULL;
  }
  return n;
}

static int tel_field_u64(const nvmlFieldValue_t *f, uint64_t *v) {
  if (f->nvmlReturn != NVML_SUCCESS) return -1;
  switch (f->valueType) {
  case 0: *v = f->value.dVal > 0 ? (uint64_t)f->value.dVal : 0; return 0;
  case 1: *v = f->value.uiVal; return 0;
  case 2: *v = f->value.ulVal; return 0;
  case 3: *v = f->value.ullVal; return 0;
  case 4: *v = f->value.sllVal > 0 ? (uint64_t)f->value.sllVal : 0; return 0;
  default: return -1;
  }
}

void tel_nvml_read(tel_nvml *n, tel_snap *snap) {
  if (!n) return;
  snap->ngpu = n->ngpu;
  for (int i = 0; i < n->ngpu; i++) {
    tel_gpu *g = &snap->gpu[i];
    memset(g, 0, sizeof *g);
    nvmlUtilization_t u;
    if (n->util && n->util(n->dev[i], &u) == NVML_SUCCESS) {
      g->v[TEL_GPU_UTIL] = u.gpu, g->have[TEL_GPU_UTIL] = 1;
      g->v[TEL_GPU_MEM_UTIL] = u.memory, g->have[TEL_GPU_MEM_UTIL] = 1;
    }
    nvmlMemory_t m;
    if (n->mem && n->mem(n->dev[i], &m) == NVML_SUCCESS) g->v[TEL_GPU_MEM_USED] = m.used, g->have[TEL_GPU_MEM_USED] = 1;
    nvmlFieldValue_t f[2];
    memset(f, 0, sizeof f);
    f[0].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    f[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    if (n->fields && n->fields(n->dev[i], 2, f) == NVML_SUCCESS) {
      g->have[TEL_GPU_NVL_TX] = !tel_field_u64(&f[0], &g->v[TEL_GPU_NVL_TX]);
      g->have[TEL_GPU_NVL_RX] = !tel_field_u64(&f[1], &g->v[TEL_GPU_NVL_RX]);
    }
  }
}

void tel_nvml_close(tel_nvml *n) {
  if (!n) return;
  n->shutdown();
  dlclose(n->lib);
  free(n);
}
