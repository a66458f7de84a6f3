/* NVLink through NVML, loaded at run time: fabench must run (and build) where no NVIDIA driver
 * is. The library is opened, queried and closed within one call, so no state outlives it. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "topo_int.h"

typedef struct {
  nvmlInit_v2_fn init;
  nvmlShutdown_fn shutdown;
  nvmlErrorString_fn errstr;
  nvmlDeviceGetCount_v2_fn count;
  nvmlDeviceGetHandleByIndex_v2_fn handle;
  nvmlDeviceGetPciInfo_v3_fn pci;
  nvmlDeviceGetName_fn name;
  nvmlDeviceGetMemoryInfo_fn mem;
  nvmlDeviceGetNvLinkState_fn lstate;
  nvmlDeviceGetNvLinkVersion_fn lversion;
  nvmlDeviceGetNvLinkRemotePciInfo_v2_fn lremote;
  nvmlDeviceGetMigMode_fn migmode;
  nvmlDeviceGetMaxMigDeviceCount_fn migmax;
  nvmlDeviceGetMigDeviceHandleByIndex_fn mighandle;
  nvmlDeviceGetGpuInstanceId_fn gi;
  nvmlDeviceGetComputeInstanceId_fn ci;
  nvmlDeviceGetUUID_fn uuid;
  nvmlDeviceGetMaxPcieLinkGeneration_fn pgen;
  nvmlDeviceGetMaxPcieLinkWidth_fn pwidth;
} topo_nvml_api;

/* The MIG instances of a GPU: mode -1 when NVML cannot say (no MIG on this GPU or driver). */
static void topo_nvml_mig(const topo_nvml_api *a, nvmlDevice_t d, topo_mig_info *m) {
  memset(m, 0, sizeof *m);
  m->mode = -1;
  unsigned cur = 0, pend = 0, max = 0;
  if (!a->migmode || a->migmode(d, &cur, &pend) != NVML_SUCCESS) return;
  m->mode = cur == 1;
  if (!m->mode || !a->migmax || !a->mighandle || a->migmax(d, &max) != NVML_SUCCESS) return;
  for (unsigned i = 0; i < max && m->n < TOPO_MAX_MIG; i++) {
    nvmlDevice_t md = NULL;
    if (a->mighandle(d, i, &md) != NVML_SUCCESS) continue; /* an empty slot */
    topo_mig *x = &m->inst[m->n++];
    x->mem_bytes = -1;
    if (a->gi) a->gi(md, &x->gi);
    if (a->ci) a->ci(md, &x->ci);
    if (a->name && a->name(md, x->name, sizeof x->name) != NVML_SUCCESS) x->name[0] = 0;
    if (a->uuid && a->uuid(md, x->uuid, sizeof x->uuid) != NVML_SUCCESS) x->uuid[0] = 0;
    x->name[sizeof x->name - 1] = x->uuid[sizeof x->uuid - 1] = 0;
    nvmlMemory_t mm;
    if (a->mem && a->mem(md, &mm) == NVML_SUCCESS) x->mem_bytes = (long long)mm.total;
  }
}

/* dlsym returns void*; the detour through memcpy keeps -Wpedantic-style casts out. */
static void *topo_sym(void *h, const char *name, void *fp, size_t fpsize) {
  void *s = dlsym(h, name);
  memcpy(fp, &s, fpsize);
  return s;
}
#define TOPO_SYM(h, field, name) topo_sym((h), (name), &(field), sizeof(field))

static const char *topo_nvml_err(const topo_nvml_api *a, nvmlReturn_t r) {
  const char *s = a->errstr ? a->errstr(r) : NULL;
  return s ? s : "unknown error";
}

/* "00000000:17:00.0" (NVML writes an 8-digit domain) */
static int topo_parse_busid(const nvmlPciInfo_t *p, unsigned *dom, unsigned *bus, unsigned *dev,
                            unsigned *fn) {
  char id[33];
  memcpy(id, p->busId, 32);
  id[32] = 0;
  if (sscanf(id, "%x:%x:%x.%x", dom, bus, dev, fn) == 4) return 0;
  memcpy(id, p->busIdLegacy, 16);
  id[16] = 0;
  if (sscanf(id, "%x:%x:%x.%x", dom, bus, dev, fn) == 4) return 0;
  *dom = p->domain;
  *bus = p->bus;
  *dev = p->device;
  *fn = 0;
  return 0;
}

int topo_nvml_query(topo_nvml_info *out, const char *lib, char *err, size_t errcap) {
  memset(out, 0, sizeof *out);
  const char *path = lib ? lib : "libnvidia-ml.so.1";
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(err, errcap, "NVML not available (%s could not be loaded)", path);
    return -1;
  }
  topo_nvml_api a;
  memset(&a, 0, sizeof a);
  const char *missing = NULL;
  if (!TOPO_SYM(h, a.init, "nvmlInit_v2")) missing = "nvmlInit_v2";
  else if (!TOPO_SYM(h, a.shutdown, "nvmlShutdown")) missing = "nvmlShutdown";
  else if (!TOPO_SYM(h, a.count, "nvmlDeviceGetCount_v2")) missing = "nvmlDeviceGetCount_v2";
  else if (!TOPO_SYM(h, a.handle, "nvmlDeviceGetHandleByIndex_v2"))
    missing = "nvmlDeviceGetHandleByIndex_v2";
  else if (!TOPO_SYM(h, a.pci, "nvmlDeviceGetPciInfo_v3")) missing = "nvmlDeviceGetPciInfo_v3";
  if (missing) {
    snprintf(err, errcap, "NVML library %s lacks %s", path, missing);
    dlclose(h);
    return -1;
  }
  /* optional: without them GPUs are still listed, NVLink is unknown */
  TOPO_SYM(h, a.errstr, "nvmlErrorString");
  TOPO_SYM(h, a.name, "nvmlDeviceGetName");
  TOPO_SYM(h, a.mem, "nvmlDeviceGetMemoryInfo");
  TOPO_SYM(h, a.lstate, "nvmlDeviceGetNvLinkState");
  TOPO_SYM(h, a.lversion, "nvmlDeviceGetNvLinkVersion");
  TOPO_SYM(h, a.lremote, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  TOPO_SYM(h, a.migmode, "nvmlDeviceGetMigMode");
  TOPO_SYM(h, a.migmax, "nvmlDeviceGetMaxMigDeviceCount");
  TOPO_SYM(h, a.mighandle, "nvmlDeviceGetMigDeviceHandleByIndex");
  TOPO_SYM(h, a.gi, "nvmlDeviceGetGpuInstanceId");
  TOPO_SYM(h, a.ci, "nvmlDeviceGetComputeInstanceId");
  TOPO_SYM(h, a.uuid, "nvmlDeviceGetUUID");
  TOPO_SYM(h, a.pgen, "nvmlDeviceGetMaxPcieLinkGeneration");
  TOPO_SYM(h, a.pwidth, "nvmlDeviceGetMaxPcieLinkWidth");

  nvmlReturn_t r = a.init();
  if (r != NVML_SUCCESS) {
    snprintf(err, errcap, "nvmlInit_v2 failed: %s (%d)", topo_nvml_err(&a, r), r);
    dlclose(h);
    return -1;
  }
  int rc = 0;
  unsigned n = 0;
  r = a.count(&n);
  if (r != NVML_SUCCESS) {
    snprintf(err, errcap, "nvmlDeviceGetCount_v2 failed: %s (%d)", topo_nvml_err(&a, r), r);
    rc = -1;
    goto done;
  }
  if (n > TOPO_MAX_GPUS) n = TOPO_MAX_GPUS;
  if (!a.lstate || !a.lremote)
    snprintf(out->note, sizeof out->note, "NVML lacks %s",
             !a.lstate ? "nvmlDeviceGetNvLinkState" : "nvmlDeviceGetNvLinkRemotePciInfo_v2");
  for (unsigned i = 0; i < n; i++) {
    nvmlDevice_t d = NULL;
    r = a.handle(i, &d);
    if (r != NVML_SUCCESS) {
      snprintf(err, errcap, "nvmlDeviceGetHandleByIndex_v2(%u) failed: %s (%d)", i,
               topo_nvml_err(&a, r), r);
      rc = -1;
      goto done;
    }
    topo_nvml_gpu *g = &out->gpu[out->ngpus];
    memset(g, 0, sizeof *g);
    g->mem_bytes = -1;
    nvmlPciInfo_t pi;
    memset(&pi, 0, sizeof pi);
    r = a.pci(d, &pi);
    if (r != NVML_SUCCESS) {
      snprintf(err, errcap, "nvmlDeviceGetPciInfo_v3(%u) failed: %s (%d)", i,
               topo_nvml_err(&a, r), r);
      rc = -1;
      goto done;
    }
    topo_parse_busid(&pi, &g->domain, &g->bus, &g->dev, &g->func);
    if (a.name && a.name(d, g->name, sizeof g->name) != NVML_SUCCESS) g->name[0] = 0;
    g->name[sizeof g->name - 1] = 0;
    nvmlMemory_t m;
    if (a.mem && a.mem(d, &m) == NVML_SUCCESS) g->mem_bytes = (long long)m.total;
    unsigned pv = 0;
    g->pcie_gen = a.pgen && a.pgen(d, &pv) == NVML_SUCCESS && pv > 0 ? (int)pv : -1;
    g->pcie_width = a.pwidth && a.pwidth(d, &pv) == NVML_SUCCESS && pv > 0 ? (int)pv : -1;
    topo_nvml_mig(&a, d, &g->mig);
    out->ngpus++;
    if (!a.lstate || !a.lremote) continue;
    g->nvlink_known = 1;
    for (unsigned l = 0; l < NVML_NVLINK_MAX_LINKS; l++) {
      nvmlEnableState_t st = NVML_FEATURE_DISABLED;
      r = a.lstate(d, l, &st);
      /* links past the GPU's count answer INVALID_ARGUMENT or NOT_SUPPORTED: the end */
      if (r == NVML_ERROR_INVALID_ARGUMENT || r == NVML_ERROR_NOT_SUPPORTED) continue;
      if (r != NVML_SUCCESS) {
        g->nvlink_known = 0;
        snprintf(out->note, sizeof out->note, "nvmlDeviceGetNvLinkState(%u, %u): %s (%d)", i, l,
                 topo_nvml_err(&a, r), r);
        break;
      }
      if (st != NVML_FEATURE_ENABLED) continue;
      topo_nvml_link *k = &g->links[g->nlinks];
      memset(&pi, 0, sizeof pi);
      r = a.lremote(d, l, &pi);
      if (r != NVML_SUCCESS) {
        g->nvlink_known = 0;
        snprintf(out->note, sizeof out->note,
                 "nvmlDeviceGetNvLinkRemotePciInfo_v2(%u, %u): %s (%d)", i, l,
                 topo_nvml_err(&a, r), r);
        break;
      }
      topo_parse_busid(&pi, &k->domain, &k->bus, &k->dev, &k->func);
      unsigned v = 0;
      if (a.lversion && a.lversion(d, l, &v) != NVML_SUCCESS) v = 0;
      k->version = v;
      g->nlinks++;
    }
  }
done:
  a.shutdown();
  dlclose(h);
  return rc;
}
