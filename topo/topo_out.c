/* What topo/ says about a topology: the hash's canonical text, the JSON, the readable summary. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "topo_int.h"

/* ---- canonical description for the hash ----
 * Kept: the object tree (types, OS indexes of packages/cores/PUs/NUMA nodes, cache sizes,
 * NUMA memory rounded to GiB), PCI devices (bus id, vendor:device, class), bridges, OS device
 * names and kinds, CPU and GPU models, and NVLink link counts.
 * Left out as volatile: host name, process name, cgroup and allowed cpuset, OS release, time,
 * MAC addresses, GUIDs/LIDs, serials and UUIDs, exact NUMA memory (a few MB move between boots),
 * current PCIe link speed (idle GPUs downtrain), NIC speed, operstate and IB port state, and
 * network interfaces (eth0, ibp22s0): a network namespace shows only its own, and udev names
 * them by policy; the NIC's PCI device stays. */

typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} topo_buf;

static void topo_bprintf(topo_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void topo_bprintf(topo_buf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if ((size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    size_t nc = (b->cap + (size_t)n + 1) * 2;
    char *ns = realloc(b->s, nc);
    if (!ns) {
      b->oom = 1;
      return;
    }
    b->s = ns;
    b->cap = nc;
  }
}

static const char *const topo_kept_infos[] = {"CPUVendor", "CPUModel", "CPUFamilyNumber",
                                              "CPUModelNumber", "GPUModel", "Architecture"};

/* no link speed: it is the current one, and idle GPUs downtrain */
static void topo_canon_pci(topo_buf *b, const struct hwloc_pcidev_attr_s *p) {
  topo_bprintf(b, " %04x:%02x:%02x.%x %04x:%04x c%04x", p->domain, p->bus, p->dev, p->func,
               p->vendor_id, p->device_id, p->class_id);
}

static void topo_canon_obj(topo_buf *b, hwloc_obj_t o, int lvl) {
  if (o->type == HWLOC_OBJ_OS_DEVICE && topo_osdev_is(o, HWLOC_OBJ_OSDEV_NETWORK)) return;
  topo_bprintf(b, "%d %s", lvl, hwloc_obj_type_string(o->type));
  switch (o->type) {
  case HWLOC_OBJ_PACKAGE: case HWLOC_OBJ_CORE: case HWLOC_OBJ_PU: case HWLOC_OBJ_DIE:
    topo_bprintf(b, " #%u", o->os_index);
    break;
  case HWLOC_OBJ_NUMANODE:
    topo_bprintf(b, " #%u %lluGiB", o->os_index,
                 (o->attr->numanode.local_memory + (1ULL << 29)) >> 30);
    break;
  case HWLOC_OBJ_BRIDGE:
    topo_bprintf(b, " %d-%d", (int)o->attr->bridge.upstream_type,
                 (int)o->attr->bridge.downstream_type);
    if (o->attr->bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI)
      topo_bprintf(b, " [%02x-%02x]", o->attr->bridge.downstream.pci.secondary_bus,
                   o->attr->bridge.downstream.pci.subordinate_bus);
    if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
      topo_canon_pci(b, &o->attr->bridge.upstream.pci);
    break;
  case HWLOC_OBJ_PCI_DEVICE:
    topo_canon_pci(b, &o->attr->pcidev);
    break;
  case HWLOC_OBJ_OS_DEVICE:
#if HWLOC_API_VERSION >= 0x00030000
    topo_bprintf(b, " %s k%lx", o->name ? o->name : "", (unsigned long)o->attr->osdev.types);
#else
    topo_bprintf(b, " %s k%d", o->name ? o->name : "", (int)o->attr->osdev.type);
#endif
    break;
  default:
    if (hwloc_obj_type_is_cache(o->type))
      topo_bprintf(b, " %llu/%u/%d", (unsigned long long)o->attr->cache.size,
                   o->attr->cache.linesize, (int)o->attr->cache.type);
    break;
  }
  if (o->subtype) topo_bprintf(b, " s=%s", o->subtype);
  for (unsigned i = 0; i < o->infos_count; i++)
    for (size_t k = 0; k < sizeof topo_kept_infos / sizeof topo_kept_infos[0]; k++)
      if (!strcmp(o->infos[i].name, topo_kept_infos[k]))
        topo_bprintf(b, " %s=%s", o->infos[i].name, o->infos[i].value ? o->infos[i].value : "");
  topo_bprintf(b, "\n");
  for (hwloc_obj_t c = o->memory_first_child; c; c = c->next_sibling) topo_canon_obj(b, c, lvl + 1);
  for (hwloc_obj_t c = o->first_child; c; c = c->next_sibling) topo_canon_obj(b, c, lvl + 1);
  for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) topo_canon_obj(b, c, lvl + 1);
}

char *topo_canonical(const topo_info *ti) {
  topo_buf b = {NULL, 0, 0, 0};
  b.s = malloc(4096);
  if (!b.s) return NULL;
  b.cap = 4096;
  b.s[0] = 0;
  topo_bprintf(&b, "fabench-topo-hash 2\n");
  topo_canon_obj(&b, hwloc_get_root_obj(ti->t), 0);
  if (ti->nvlinks) {
    topo_bprintf(&b, "nvlink\n");
    for (int i = 0; i < ti->ngpus; i++) {
      for (int j = 0; j < ti->ngpus; j++) topo_bprintf(&b, " %d", ti->nvlinks[i * ti->ngpus + j]);
      topo_bprintf(&b, "\n");
    }
  }
  if (b.oom) {
    free(b.s);
    return NULL;
  }
  return b.s;
}

/* ---- JSON ---- */

static void topo_json_num_or_null(cJSON *o, const char *k, double v) {
  if (v > 0) cJSON_AddNumberToObject(o, k, v);
  else cJSON_AddNullToObject(o, k);
}

static void topo_json_str_or_null(cJSON *o, const char *k, const char *v) {
  if (v && *v) cJSON_AddStringToObject(o, k, v);
  else cJSON_AddNullToObject(o, k);
}

static cJSON *topo_json_pcie(const topo_pcidev *p) {
  cJSON *o = cJSON_CreateObject();
  topo_json_num_or_null(o, "max_gts", p->link.max_gts);
  topo_json_num_or_null(o, "max_width", p->link.max_width);
  topo_json_num_or_null(o, "max_gen", p->link.max_gen);
  topo_json_num_or_null(o, "cur_gts", p->link.cur_gts);
  topo_json_num_or_null(o, "cur_width", p->link.cur_width);
  topo_json_num_or_null(o, "cur_gen", p->link.cur_gen);
  if (p->link.downtrained < 0) cJSON_AddNullToObject(o, "downtrained");
  else cJSON_AddBoolToObject(o, "downtrained", p->link.downtrained);
  topo_json_num_or_null(o, "hwloc_gbs", p->hwloc_gbs);
  return o;
}

static void topo_json_locality(cJSON *o, const topo_pcidev *p) {
  cJSON_AddStringToObject(o, "pci", p->bdf);
  char id[16];
  snprintf(id, sizeof id, "%04x:%04x", p->vendor, p->device);
  cJSON_AddStringToObject(o, "pci_id", id);
  if (p->numa >= 0) cJSON_AddNumberToObject(o, "numa", p->numa);
  else cJSON_AddNullToObject(o, "numa");
  cJSON_AddStringToObject(o, "numa_nodes", p->nodeset);
  cJSON_AddStringToObject(o, "cpus", p->cpuset);
  cJSON_AddItemToObject(o, "pcie", topo_json_pcie(p));
}

static const char *topo_nvlink_version_name(unsigned v) {
  /* NVML's nvmlDeviceGetNvLinkVersion values */
  static const char *n[] = {NULL, "1.0", "2.0", "2.2", "3.0", "3.1", "4.0", "5.0"};
  return v < sizeof n / sizeof n[0] ? n[v] : NULL;
}

/* The cell of the path matrix between device i and j (GPUs first, then NICs). */
static void topo_cell(const topo_info *ti, int i, int j, char *out, size_t cap) {
  const topo_pcidev *a = i < ti->ngpus ? &ti->gpu[i].pci : &ti->nic[i - ti->ngpus].pci;
  const topo_pcidev *b = j < ti->ngpus ? &ti->gpu[j].pci : &ti->nic[j - ti->ngpus].pci;
  int nvl = (i < ti->ngpus && j < ti->ngpus && ti->nvlinks) ? ti->nvlinks[i * ti->ngpus + j] : 0;
  int links;
  topo_path_class c = topo_path(ti, a, b, nvl, &links);
  if (c == TOPO_PATH_NV) snprintf(out, cap, "NV%d", links);
  else snprintf(out, cap, "%s", topo_path_name(c));
}

int topo_gpu_path(const topo_info *ti, const char *bus_a, const char *bus_b, char *out, size_t cap) {
  int ia = -1, ib = -1;
  for (int g = 0; g < ti->ngpus; g++) {
    if (!strcasecmp(ti->gpu[g].pci.bdf, bus_a)) ia = g;
    if (!strcasecmp(ti->gpu[g].pci.bdf, bus_b)) ib = g;
  }
  if (ia < 0 || ib < 0) return -1;
  topo_cell(ti, ia, ib, out, cap);
  return 0;
}

double topo_gpu_pcie_gbs(const topo_info *ti, const char *bus, int *gen, int *width) {
  *gen = *width = -1;
  for (int g = 0; g < ti->ngpus; g++) {
    const topo_pcie_link *l = &ti->gpu[g].pci.link;
    if (strcasecmp(ti->gpu[g].pci.bdf, bus) || l->max_gen < 1 || l->max_width < 1) continue;
    *gen = l->max_gen;
    *width = l->max_width;
    /* line encoding: 8b/10b to Gen2, 128b/130b to Gen5, Gen6's FLITs carry 242 of 256 bytes */
    double enc = l->max_gen <= 2 ? 0.8 : l->max_gen <= 5 ? 128.0 / 130.0 : 242.0 / 256.0;
    return topo_pcie_gts(l->max_gen) * enc * l->max_width / 8.0;
  }
  return -1;
}

int topo_has_ib(const topo_info *ti) {
  for (int k = 0; k < ti->nnics; k++)
    if (strstr(ti->nic[k].kind, "infiniband") || strstr(ti->nic[k].kind, "roce")) return 1;
  return 0;
}

/* "cpu": packages, NUMA nodes, caches and CPU sets. */
static void topo_json_cpu(cJSON *j, const topo_info *ti) {
  cJSON *cpu = cJSON_AddObjectToObject(j, "cpu");
  cJSON_AddNumberToObject(cpu, "packages", ti->npkgs);
  cJSON *models = cJSON_AddArrayToObject(cpu, "package_models");
  for (int i = 0; i < ti->npkgs && i < TOPO_MAX_PKGS; i++)
    cJSON_AddItemToArray(models, cJSON_CreateString(ti->pkg_model[i]));
  cJSON_AddNumberToObject(cpu, "numa_nodes", ti->nnuma);
  cJSON_AddNumberToObject(cpu, "cores", ti->ncores);
  cJSON_AddNumberToObject(cpu, "pus", ti->npus);
  cJSON *numa = cJSON_AddArrayToObject(cpu, "numa");
  for (int i = 0; i < ti->nnuma && i < TOPO_MAX_NUMA; i++) {
    cJSON *n = cJSON_CreateObject();
    cJSON_AddNumberToObject(n, "os_index", ti->numa[i].os_index);
    cJSON_AddNumberToObject(n, "memory_bytes", (double)ti->numa[i].mem);
    cJSON_AddStringToObject(n, "cpus", ti->numa[i].cpuset);
    cJSON_AddItemToArray(numa, n);
  }
  cJSON *caches = cJSON_AddArrayToObject(cpu, "caches");
  int depth = hwloc_topology_get_depth(ti->t);
  for (int d = 0; d < depth; d++) {
    hwloc_obj_t o = hwloc_get_obj_by_depth(ti->t, d, 0);
    if (!o || !hwloc_obj_type_is_cache(o->type)) continue;
    char name[32];
    hwloc_obj_type_snprintf(name, sizeof name, o, 0);
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", name);
    cJSON_AddNumberToObject(c, "count", hwloc_get_nbobjs_by_depth(ti->t, d));
    cJSON_AddNumberToObject(c, "size_bytes", (double)o->attr->cache.size);
    cJSON_AddItemToArray(caches, c);
  }
  cJSON_AddStringToObject(cpu, "cpus", ti->complete_cpuset);
  cJSON_AddStringToObject(cpu, "allowed_cpus", ti->allowed_cpuset);
  topo_json_str_or_null(cpu, "bound_cpus", ti->bound_cpuset);
}

/* "gpus": each GPU with its locality, nearest NIC and MIG instances. */
static void topo_json_gpus(cJSON *j, const topo_info *ti) {
  cJSON *gpus = cJSON_AddArrayToObject(j, "gpus");
  for (int i = 0; i < ti->ngpus; i++) {
    const topo_gpu *g = &ti->gpu[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", g->name);
    cJSON_AddStringToObject(o, "model", g->model);
    topo_json_str_or_null(o, "osdev", g->osdev);
    topo_json_num_or_null(o, "memory_bytes", (double)g->mem_bytes);
    topo_json_locality(o, &g->pci);
    topo_json_str_or_null(o, "nearest_nic", g->nearest_nic >= 0 ? ti->nic[g->nearest_nic].name : NULL);
    if (g->nearest_nic >= 0) {
      char cell[16];
      topo_cell(ti, i, ti->ngpus + g->nearest_nic, cell, sizeof cell);
      cJSON_AddStringToObject(o, "nearest_nic_path", cell);
    } else {
      cJSON_AddNullToObject(o, "nearest_nic_path");
    }
    if (g->switch_links >= 0) cJSON_AddNumberToObject(o, "nvswitch_links", g->switch_links);
    else cJSON_AddNullToObject(o, "nvswitch_links");
    /* MIG: null when unknown, else the mode and the instances (each a device of its own) */
    if (g->mig.mode < 0) {
      cJSON_AddNullToObject(o, "mig");
    } else {
      cJSON *mg = cJSON_AddObjectToObject(o, "mig");
      cJSON_AddBoolToObject(mg, "enabled", g->mig.mode == 1);
      cJSON *ins = cJSON_AddArrayToObject(mg, "instances");
      for (int k = 0; k < g->mig.n; k++) {
        const topo_mig *x = &g->mig.inst[k];
        cJSON *io = cJSON_CreateObject();
        cJSON_AddNumberToObject(io, "gpu_instance", x->gi);
        cJSON_AddNumberToObject(io, "compute_instance", x->ci);
        cJSON_AddStringToObject(io, "name", x->name);
        topo_json_str_or_null(io, "uuid", x->uuid);
        topo_json_num_or_null(io, "memory_bytes", (double)x->mem_bytes);
        cJSON_AddItemToArray(ins, io);
      }
    }
    cJSON_AddItemToArray(gpus, o);
  }
}

/* "nics": each NIC with its net devices and InfiniBand ports. */
static void topo_json_nics(cJSON *j, const topo_info *ti) {
  cJSON *nics = cJSON_AddArrayToObject(j, "nics");
  for (int i = 0; i < ti->nnics; i++) {
    const topo_nic *n = &ti->nic[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", n->name);
    cJSON_AddStringToObject(o, "kind", n->kind);
    topo_json_str_or_null(o, "hca", n->hca);
    topo_json_num_or_null(o, "speed_gbps", n->speed_gbps);
    topo_json_locality(o, &n->pci);
    cJSON *nd = cJSON_AddArrayToObject(o, "netdevs");
    for (int k = 0; k < n->nnet; k++) {
      cJSON *x = cJSON_CreateObject();
      cJSON_AddStringToObject(x, "name", n->net[k].name);
      topo_json_str_or_null(x, "mac", n->net[k].st.mac);
      topo_json_num_or_null(x, "speed_mbps", (double)n->net[k].st.speed_mbps);
      topo_json_num_or_null(x, "mtu", (double)n->net[k].st.mtu);
      cJSON_AddStringToObject(x, "operstate", n->net[k].st.operstate);
      cJSON_AddItemToArray(nd, x);
    }
    cJSON *ports = cJSON_AddArrayToObject(o, "ports");
    for (int k = 0; k < n->nports; k++) {
      const topo_ib_port *p = &n->ports[k];
      cJSON *x = cJSON_CreateObject();
      cJSON_AddNumberToObject(x, "port", p->port);
      topo_json_str_or_null(x, "rate", p->rate);
      topo_json_num_or_null(x, "rate_gbps", p->rate_gbps);
      cJSON_AddStringToObject(x, "state", p->state);
      cJSON_AddStringToObject(x, "phys_state", p->phys_state);
      cJSON_AddStringToObject(x, "link_layer", p->link_layer);
      cJSON_AddItemToArray(ports, x);
    }
    cJSON_AddItemToArray(nics, o);
  }
}

/* "nvlink": the GPU pairs NVLink joins, where known. */
static void topo_json_nvlink(cJSON *j, const topo_info *ti) {
  cJSON *nv = cJSON_AddObjectToObject(j, "nvlink");
  cJSON_AddStringToObject(nv, "source", ti->nvlink_source);
  topo_json_str_or_null(nv, "note", ti->nvml_note);
  if (ti->nvlinks) {
    cJSON *pairs = cJSON_AddArrayToObject(nv, "pairs");
    for (int a = 0; a < ti->ngpus; a++)
      for (int b = a + 1; b < ti->ngpus; b++) {
        int l = ti->nvlinks[a * ti->ngpus + b];
        if (!l) continue;
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "a", ti->gpu[a].name);
        cJSON_AddStringToObject(x, "b", ti->gpu[b].name);
        cJSON_AddNumberToObject(x, "links", l);
        topo_json_str_or_null(x, "version",
                              topo_nvlink_version_name(ti->nvversion[a * ti->ngpus + b]));
        cJSON_AddBoolToObject(x, "via_nvswitch", ti->nvvia[a * ti->ngpus + b]);
        cJSON_AddItemToArray(pairs, x);
      }
  } else {
    cJSON_AddNullToObject(nv, "pairs");
  }
}

/* "paths": the device-to-device path matrix, as topo prints it. */
static void topo_json_paths(cJSON *j, const topo_info *ti) {
  cJSON *paths = cJSON_AddObjectToObject(j, "paths");
  int nd = ti->ngpus + ti->nnics;
  cJSON *devs = cJSON_AddArrayToObject(paths, "devices");
  for (int i = 0; i < nd; i++) {
    char name[24];
    if (i < ti->ngpus) topo_copy(name, sizeof name, ti->gpu[i].name);
    else snprintf(name, sizeof name, "NIC%d", i - ti->ngpus);
    cJSON_AddItemToArray(devs, cJSON_CreateString(name));
  }
  cJSON *mat = cJSON_AddArrayToObject(paths, "matrix");
  for (int a = 0; a < nd; a++) {
    cJSON *row = cJSON_CreateArray();
    for (int b = 0; b < nd; b++) {
      char cell[16];
      topo_cell(ti, a, b, cell, sizeof cell);
      cJSON_AddItemToArray(row, cJSON_CreateString(cell));
    }
    cJSON_AddItemToArray(mat, row);
  }
}

cJSON *topo_json(const topo_info *ti) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "schema", "fabench-topo");
  cJSON_AddNumberToObject(j, "schema_version", TOPO_SCHEMA_VERSION);
  cJSON_AddStringToObject(j, "host", ti->host);
  cJSON_AddStringToObject(j, "topo_hash", ti->hash);
  cJSON_AddStringToObject(j, "backend", ti->backend);
  cJSON_AddStringToObject(j, "source_backend", ti->source_backend);
  cJSON_AddBoolToObject(j, "this_system", ti->thissystem);
  cJSON_AddStringToObject(j, "hwloc_version", ti->hwloc_version);
  cJSON_AddStringToObject(j, "architecture", ti->arch);
  topo_json_str_or_null(j, "sysfs_root", ti->sysfs_root);

  topo_json_cpu(j, ti);
  topo_json_gpus(j, ti);
  topo_json_nics(j, ti);
  topo_json_nvlink(j, ti);
  topo_json_paths(j, ti);
  cJSON *w = cJSON_AddArrayToObject(j, "warnings");
  if (ti->warnings[0]) cJSON_AddItemToArray(w, cJSON_CreateString(ti->warnings));
  return j;
}

/* ---- readable summary ---- */

static void topo_human_bytes(char *out, size_t cap, double v) {
  const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int i = 0;
  while (v >= 1024 && i < 4) {
    v /= 1024;
    i++;
  }
  /* one decimal where it says something: 63.98 GiB is "64 GiB", as an exact 64 is */
  double r = round(v * 10) / 10;
  snprintf(out, cap, r == floor(r) ? "%.0f %s" : "%.1f %s", r, u[i]);
}

static void topo_print_pcie(FILE *f, const topo_pcidev *p) {
  const topo_pcie_link *l = &p->link;
  if (l->max_gen > 0 || l->cur_gen > 0 || l->max_width > 0 || l->cur_width > 0) {
    fprintf(f, "PCIe ");
    if (l->cur_gen > 0) fprintf(f, "Gen%d", l->cur_gen); else fprintf(f, "Gen?");
    if (l->cur_width > 0) fprintf(f, " x%d", l->cur_width); else fprintf(f, " x?");
    fprintf(f, " (max ");
    if (l->max_gen > 0) fprintf(f, "Gen%d", l->max_gen); else fprintf(f, "Gen?");
    if (l->max_width > 0) fprintf(f, " x%d)", l->max_width); else fprintf(f, " x?)");
    if (l->downtrained == 1) fprintf(f, " BELOW MAX");
  } else if (p->hwloc_gbs > 0) {
    fprintf(f, "PCIe %.1f GB/s now", p->hwloc_gbs);
  } else {
    fprintf(f, "PCIe unknown");
  }
}

void topo_print(FILE *f, const topo_info *ti) {
  fprintf(f, "host %s  backend %s  hwloc %s  topo_hash %s\n", ti->host, ti->backend,
          ti->hwloc_version, ti->hash);
  fprintf(f, "CPU     %d package%s", ti->npkgs, ti->npkgs == 1 ? "" : "s");
  if (ti->npkgs > 0) fprintf(f, " (%s)", ti->pkg_model[0]);
  fprintf(f, ", %d NUMA node%s, %d cores, %d PUs; allowed cpus %s\n", ti->nnuma,
          ti->nnuma == 1 ? "" : "s", ti->ncores, ti->npus, ti->allowed_cpuset);
  for (int i = 0; i < ti->nnuma && i < TOPO_MAX_NUMA; i++) {
    char m[32];
    topo_human_bytes(m, sizeof m, (double)ti->numa[i].mem);
    fprintf(f, "NUMA %-3u %s, cpus %s\n", ti->numa[i].os_index, m, ti->numa[i].cpuset);
  }
  fprintf(f, "Caches ");
  int depth = hwloc_topology_get_depth(ti->t);
  for (int d = 0; d < depth; d++) {
    hwloc_obj_t o = hwloc_get_obj_by_depth(ti->t, d, 0);
    if (!o || !hwloc_obj_type_is_cache(o->type)) continue;
    char name[32], sz[32];
    hwloc_obj_type_snprintf(name, sizeof name, o, 0);
    topo_human_bytes(sz, sizeof sz, (double)o->attr->cache.size);
    fprintf(f, " %s %d x %s", name, hwloc_get_nbobjs_by_depth(ti->t, d), sz);
  }
  fprintf(f, "\n");
  fprintf(f, "GPUs    %d\n", ti->ngpus);
  for (int i = 0; i < ti->ngpus; i++) {
    const topo_gpu *g = &ti->gpu[i];
    char m[32] = "memory unknown";
    if (g->mem_bytes > 0) topo_human_bytes(m, sizeof m, (double)g->mem_bytes);
    fprintf(f, "  %-6s %s  %s  %s  NUMA %s  ", g->name, g->pci.bdf, g->model, m,
            g->pci.numa >= 0 ? g->pci.nodeset : "?");
    topo_print_pcie(f, &g->pci);
    fprintf(f, "  nearest NIC %s\n", g->nearest_nic >= 0 ? ti->nic[g->nearest_nic].name : "none");
    if (g->mig.mode == 1) fprintf(f, "         MIG enabled, %d instance(s)\n", g->mig.n);
    for (int k = 0; k < g->mig.n; k++) {
      const topo_mig *x = &g->mig.inst[k];
      char mm[32] = "memory unknown";
      if (x->mem_bytes > 0) topo_human_bytes(mm, sizeof mm, (double)x->mem_bytes);
      fprintf(f, "         MIG gi %u ci %u  %s  %s  %s\n", x->gi, x->ci, x->name, mm, x->uuid);
    }
  }
  fprintf(f, "NICs    %d\n", ti->nnics);
  for (int i = 0; i < ti->nnics; i++) {
    const topo_nic *n = &ti->nic[i];
    fprintf(f, "  NIC%-3d %-10s %s  %-10s ", i, n->name, n->pci.bdf, n->kind);
    if (n->speed_gbps > 0) fprintf(f, "%g Gb/s  ", n->speed_gbps);
    else fprintf(f, "speed unknown  ");
    fprintf(f, "NUMA %s  ", n->pci.numa >= 0 ? n->pci.nodeset : "?");
    topo_print_pcie(f, &n->pci);
    fprintf(f, "\n");
    for (int k = 0; k < n->nnet; k++) {
      const topo_netdev *d = &n->net[k];
      fprintf(f, "         netdev %s %s", d->name, d->st.operstate);
      if (d->st.speed_mbps > 0) fprintf(f, " %ld Mb/s", d->st.speed_mbps);
      else fprintf(f, " speed unknown");
      if (d->st.mtu > 0) fprintf(f, " mtu %ld", d->st.mtu);
      fprintf(f, "\n");
    }
    for (int k = 0; k < n->nports; k++) {
      const topo_ib_port *p = &n->ports[k];
      fprintf(f, "         port %d %s/%s %s %s\n", p->port, p->state, p->phys_state,
              p->link_layer, p->rate[0] ? p->rate : "rate unknown");
    }
  }
  fprintf(f, "NVLink  %s", ti->nvlink_source);
  if (ti->nvml_note[0]) fprintf(f, " (%s)", ti->nvml_note);
  fprintf(f, "\n");
  int nd = ti->ngpus + ti->nnics;
  if (nd > 0) {
    fprintf(f, "\n%-8s", "");
    for (int i = 0; i < nd; i++) {
      char name[24];
      if (i < ti->ngpus) topo_copy(name, sizeof name, ti->gpu[i].name);
      else snprintf(name, sizeof name, "NIC%d", i - ti->ngpus);
      fprintf(f, "%-6s", name);
    }
    fprintf(f, "%-20s%s\n", "CPU Affinity", "NUMA Affinity");
    for (int a = 0; a < nd; a++) {
      const topo_pcidev *p = a < ti->ngpus ? &ti->gpu[a].pci : &ti->nic[a - ti->ngpus].pci;
      char name[24];
      if (a < ti->ngpus) topo_copy(name, sizeof name, ti->gpu[a].name);
      else snprintf(name, sizeof name, "NIC%d", a - ti->ngpus);
      fprintf(f, "%-8s", name);
      for (int b = 0; b < nd; b++) {
        char cell[16];
        topo_cell(ti, a, b, cell, sizeof cell);
        fprintf(f, "%-6s", cell);
      }
      fprintf(f, "%-19s %s\n", p->cpuset[0] ? p->cpuset : "N/A",
              p->nodeset[0] ? p->nodeset : "N/A");
    }
    fprintf(f, "\nLegend: X self, NV# bonded NVLinks, PIX one PCIe switch, PXB several PCIe "
               "switches, PHB a PCIe host bridge,\n        NODE host bridges within a NUMA node, "
               "SYS across NUMA nodes (SMP interconnect)\n");
    if (ti->nnics) fprintf(f, "NIC Legend:\n");
    for (int i = 0; i < ti->nnics; i++) fprintf(f, "  NIC%d: %s\n", i, ti->nic[i].name);
  }
  if (ti->warnings[0]) fprintf(f, "warnings: %s\n", ti->warnings);
}
