/* A test-only libnvidia-ml.so.1: just enough NVML for topo_nvml_query's dlopen path. What it
 * reports is chosen per call by FABENCH_NVML_SHIM (read on every call, so one test process can
 * switch scenarios):
 *   dgx8        8 GPUs at dgx8.xml's bus ids, each with 5+4+4+5 links to 4 NVSwitches
 *               (0000:92..95:00.0), NVLink version 6 (4.0); the default
 *   hidden      as dgx8 but the switches sit at bus ids hwloc does not list (f0..f3)
 *   pairs       GPU 2k and 2k+1 joined by 4 direct links of version 4 (3.0), no switches
 *   initfail    nvmlInit_v2 answers NVML_ERROR_DRIVER_NOT_LOADED
 *   linkerr     nvmlDeviceGetNvLinkState answers NVML_ERROR_UNKNOWN on link 2
 *   mig         as dgx8, but GPU 0 is in MIG mode with three instances (GPU instances 1, 2
 *               and 5, slots 0, 1 and 3 of 7; 2g.20gb each) and GPU 1 has MIG switched on
 *               and no instances yet. In every other scenario MIG is off.
 * Built three times: complete, without the NVLink symbols (SHIM_NO_NVLINK), and without the
 * required nvmlDeviceGetPciInfo_v3 (SHIM_NO_PCI). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_min.h"

#define SHIM_EXPORT __attribute__((visibility("default")))

static const unsigned shim_gpu_bus[8] = {0x15, 0x19, 0x35, 0x39, 0x55, 0x59, 0x75, 0x79};

static const char *shim_mode(void) {
  const char *m = getenv("FABENCH_NVML_SHIM");
  return m && *m ? m : "dgx8";
}

/* GPU handles are 1..8; MIG instance handles 1000 + 8 * gpu + slot. */
static int shim_index(nvmlDevice_t d) { return (int)(uintptr_t)d - 1; }
static int shim_is_mig(nvmlDevice_t d) { return (uintptr_t)d >= 1000; }

static void shim_fill_pci(nvmlPciInfo_t *p, unsigned bus) {
  memset(p, 0, sizeof *p);
  p->domain = 0;
  p->bus = bus;
  p->device = 0;
  p->pciDeviceId = 0x233010de;
  snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02x:00.0", bus);
  snprintf(p->busId, sizeof p->busId, "00000000:%02x:00.0", bus);
}

SHIM_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  return strcmp(shim_mode(), "initfail") ? NVML_SUCCESS : NVML_ERROR_DRIVER_NOT_LOADED;
}

SHIM_EXPORT nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }

SHIM_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
  case NVML_SUCCESS: return "Success";
  case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
  case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
  default: return "Unknown Error";
  }
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n) {
  *n = 8;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d) {
  if (i >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  *d = (nvmlDevice_t)(uintptr_t)(i + 1);
  return NVML_SUCCESS;
}

#ifndef SHIM_NO_PCI
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p) {
  int i = shim_index(d);
  if (i < 0 || i >= 8) return NVML_ERROR_INVALID_ARGUMENT;
  shim_fill_pci(p, shim_gpu_bus[i]);
  return NVML_SUCCESS;
}
#endif

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len) {
  snprintf(name, len, "NVIDIA H100 80GB HBM3%s (shim)", shim_is_mig(d) ? " MIG 2g.20gb" : "");
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
  m->total = shim_is_mig(d) ? 20ULL << 30 : (80ULL << 30) + (unsigned long long)shim_index(d);
  m->free = m->total;
  m->used = 0;
  return NVML_SUCCESS;
}

/* telemetry's counters: GPU i busy 10 i + 1 %, its memory 5 %; its NVLink counters 1000 + i
 * KiB sent and 2000 + i received (the last GPU's NVLink counters unsupported) */
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
  u->gpu = 10u * (unsigned)shim_index(d) + 1;
  u->memory = 5;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *f) {
  for (int k = 0; k < n; k++) {
    unsigned id = f[k].fieldId;
    f[k].nvmlReturn = shim_index(d) == 7 ? NVML_ERROR_NOT_SUPPORTED : NVML_SUCCESS;
    f[k].valueType = 3;
    f[k].value.ullVal = (id == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX ? 1000u : 2000u) + (unsigned)shim_index(d);
  }
  return NVML_SUCCESS;
}

/* Gen5 x16 links, but the last GPU's are unknown to NVML */
SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned *gen) {
  if (shim_index(d) == 7) return NVML_ERROR_NOT_SUPPORTED;
  *gen = 5;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned *width) {
  if (shim_index(d) == 7) return NVML_ERROR_NOT_SUPPORTED;
  *width = 16;
  return NVML_SUCCESS;
}

static const unsigned shim_mig_gi[7] = {1, 2, 0, 5, 0, 0, 0}; /* GPU 0's slots; 0: empty */

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned *cur, unsigned *pend) {
  if (shim_is_mig(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *cur = *pend = !strcmp(shim_mode(), "mig") && shim_index(d) < 2;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned *n) {
  (void)d;
  *n = 7;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned i,
                                                              nvmlDevice_t *md) {
  int g = shim_index(d);
  if (strcmp(shim_mode(), "mig") || g != 0 || i >= 7 || !shim_mig_gi[i]) return NVML_ERROR_NOT_FOUND;
  *md = (nvmlDevice_t)(uintptr_t)(1000 + 8 * g + (int)i);
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned *id) {
  if (!shim_is_mig(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *id = shim_mig_gi[((uintptr_t)d - 1000) % 8];
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned *id) {
  if (!shim_is_mig(d)) return NVML_ERROR_INVALID_ARGUMENT;
  *id = 0;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned len) {
  if (shim_is_mig(d))
    snprintf(uuid, len, "MIG-shim-%u", (unsigned)((uintptr_t)d - 1000));
  else
    snprintf(uuid, len, "GPU-shim-%d", shim_index(d));
  return NVML_SUCCESS;
}

#ifndef SHIM_NO_NVLINK
static const int shim_per_switch[4] = {5, 4, 4, 5};

/* Which remote a link reaches in the current scenario; 0 when the link is off. */
static int shim_link(int gpu, unsigned link, unsigned *bus) {
  const char *m = shim_mode();
  if (!strcmp(m, "pairs")) {
    if (link >= 4) return 0;
    *bus = shim_gpu_bus[gpu ^ 1];
    return 1;
  }
  unsigned base = strcmp(m, "hidden") ? 0x92 : 0xf0;
  unsigned l = link;
  for (int s = 0; s < 4; s++) {
    if (l < (unsigned)shim_per_switch[s]) {
      *bus = base + (unsigned)s;
      return 1;
    }
    l -= (unsigned)shim_per_switch[s];
  }
  return 0;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link,
                                                  nvmlEnableState_t *st) {
  if (link >= NVML_NVLINK_MAX_LINKS) return NVML_ERROR_INVALID_ARGUMENT;
  if (!strcmp(shim_mode(), "linkerr") && link == 2) return NVML_ERROR_UNKNOWN;
  unsigned bus;
  *st = shim_link(shim_index(d), link, &bus) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t d, unsigned link,
                                                             nvmlPciInfo_t *p) {
  unsigned bus;
  if (!shim_link(shim_index(d), link, &bus)) return NVML_ERROR_INVALID_ARGUMENT;
  shim_fill_pci(p, bus);
  return NVML_SUCCESS;
}

SHIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkVersion(nvmlDevice_t d, unsigned link, unsigned *v) {
  (void)d;
  (void)link;
  *v = strcmp(shim_mode(), "pairs") ? 6 : 4;
  return NVML_SUCCESS;
}
#endif
