/* Detection: hwloc for the CPU side and the PCI tree, our sysfs readers for link state, NVML
 * (or hwloc's NVLinkBandwidth distances) for NVLink; then locality and path classes. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"
#include "topo_int.h"

void topo_warn(topo_info *ti, const char *fmt, ...) {
  size_t off = strlen(ti->warnings);
  if (off + 3 >= sizeof ti->warnings) return;
  if (off) off += (size_t)snprintf(ti->warnings + off, sizeof ti->warnings - off, "; ");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ti->warnings + off, sizeof ti->warnings - off, fmt, ap);
  va_end(ap);
}

const char *topo_path_name(topo_path_class c) {
  static const char *n[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};
  return (unsigned)c < sizeof n / sizeof n[0] ? n[c] : "?";
}

static void topo_list(char *out, size_t cap, hwloc_const_bitmap_t set) {
  if (!set || hwloc_bitmap_iszero(set)) {
    snprintf(out, cap, "%s", "");
    return;
  }
  hwloc_bitmap_list_snprintf(out, cap, set);
}

/* ---- path classes, as nvidia-smi topo -m prints them ---- */

static int topo_is_bridge(hwloc_obj_t o) { return o->type == HWLOC_OBJ_BRIDGE; }
static int topo_is_hostbridge(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

topo_path_class topo_path(const topo_info *ti, const topo_pcidev *a, const topo_pcidev *b,
                          int nvl, int *links) {
  (void)ti;
  if (links) *links = 0;
  if (a->obj == b->obj) return TOPO_PATH_X;
  if (nvl > 0) {
    if (links) *links = nvl;
    return TOPO_PATH_NV;
  }
  /* I/O objects have virtual depths, so hwloc_get_common_ancestor_obj cannot be used */
  hwloc_obj_t up[128];
  int n = 0;
  for (hwloc_obj_t o = a->obj->parent; o && n < 128; o = o->parent) up[n++] = o;
  hwloc_obj_t common = NULL;
  int db = 0; /* bridges between b and the common ancestor */
  for (hwloc_obj_t o = b->obj->parent; o && !common; o = o->parent) {
    for (int i = 0; i < n; i++)
      if (up[i] == o) common = o;
    if (!common && topo_is_bridge(o)) db++;
  }
  int da = 0;
  for (int i = 0; i < n && up[i] != common; i++)
    if (topo_is_bridge(up[i])) da++;
  if (common && hwloc_obj_type_is_io(common->type)) {
    if (topo_is_hostbridge(common)) return TOPO_PATH_PHB;
    /* below one PCIe switch: its upstream port plus one downstream port on each side */
    return (da <= 1 && db <= 1) ? TOPO_PATH_PIX : TOPO_PATH_PXB;
  }
  /* different host bridges: same NUMA node is NODE, else across the SMP interconnect */
  if (a->numa >= 0 && b->numa >= 0) return a->numa == b->numa ? TOPO_PATH_NODE : TOPO_PATH_SYS;
  return a->anc == b->anc ? TOPO_PATH_NODE : TOPO_PATH_SYS;
}

/* ---- building the model ---- */

static void topo_fill_pci(topo_info *ti, topo_pcidev *p, hwloc_obj_t o) {
  memset(p, 0, sizeof *p);
  p->obj = o;
  const struct hwloc_pcidev_attr_s *pa = &o->attr->pcidev;
  snprintf(p->bdf, sizeof p->bdf, "%04x:%02x:%02x.%01x", pa->domain, pa->bus, pa->dev, pa->func);
  p->vendor = pa->vendor_id;
  p->device = pa->device_id;
  p->class_id = pa->class_id;
  p->hwloc_gbs = pa->linkspeed > 0 ? pa->linkspeed : -1; /* 0 in VMs: unknown */
  p->anc = hwloc_get_non_io_ancestor_obj(ti->t, o);
  p->numa = -1;
  if (p->anc) {
    topo_list(p->cpuset, sizeof p->cpuset, p->anc->cpuset);
    topo_list(p->nodeset, sizeof p->nodeset, p->anc->nodeset);
    if (p->anc->nodeset && hwloc_bitmap_weight(p->anc->nodeset) == 1)
      p->numa = hwloc_bitmap_first(p->anc->nodeset);
  }
  if (ti->sysfs_root[0]) topo_sysfs_pcie(ti->sysfs_root, p->bdf, &p->link);
  else topo_sysfs_pcie(NULL, p->bdf, &p->link); /* all unknown */
}

static hwloc_obj_t topo_pci_parent(hwloc_obj_t o) {
  for (o = o->parent; o; o = o->parent)
    if (o->type == HWLOC_OBJ_PCI_DEVICE) return o;
  return NULL;
}

static int topo_is_nvswitch(hwloc_obj_t o) {
  if (!o || o->type != HWLOC_OBJ_PCI_DEVICE) return 0;
  if (o->subtype && !strcmp(o->subtype, "NVSwitch")) return 1;
  return o->attr->pcidev.vendor_id == 0x10de && o->attr->pcidev.class_id == 0x0680;
}

static int topo_gpu_index(const topo_info *ti, hwloc_obj_t pci) {
  for (int i = 0; i < ti->ngpus; i++)
    if (ti->gpu[i].pci.obj == pci) return i;
  return -1;
}

static void topo_find_gpus(topo_info *ti) {
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_pcidev(ti->t, o)) != NULL;) {
    const struct hwloc_pcidev_attr_s *pa = &o->attr->pcidev;
    if (pa->vendor_id != 0x10de || (pa->class_id >> 8) != 0x03) continue;
    if (ti->ngpus == TOPO_MAX_GPUS) {
      topo_warn(ti, "more than %d GPUs, the rest ignored", TOPO_MAX_GPUS);
      break;
    }
    topo_gpu *g = &ti->gpu[ti->ngpus];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "GPU%d", ti->ngpus);
    topo_fill_pci(ti, &g->pci, o);
    g->mem_bytes = -1;
    g->nearest_nic = -1;
    g->switch_links = -1;
    g->mig.mode = -1;
    /* prefer the CUDA/NVML plugin's objects when an XML carries them */
    for (hwloc_obj_t c = o->io_first_child; c; c = c->next_sibling) {
      if (c->type != HWLOC_OBJ_OS_DEVICE) continue;
      const char *m = hwloc_obj_get_info_by_name(c, "GPUModel");
      if (m && !g->model[0]) topo_copy(g->model, sizeof g->model, m);
      const char *mem = hwloc_obj_get_info_by_name(c, "CUDAGlobalMemorySize"); /* KiB */
      if (mem && g->mem_bytes < 0) g->mem_bytes = atoll(mem) * 1024LL;
      if (!g->osdev[0] || (c->subtype && (!strcmp(c->subtype, "CUDA") ||
                                          !strcmp(c->subtype, "NVML"))))
        topo_copy(g->osdev, sizeof g->osdev, c->name ? c->name : "");
    }
    if (!g->model[0]) {
      const char *m = hwloc_obj_get_info_by_name(o, "PCIDevice");
      if (m) topo_copy(g->model, sizeof g->model, m);
      else snprintf(g->model, sizeof g->model, "NVIDIA [10de:%04x]", pa->device_id);
    }
    ti->ngpus++;
  }
}

static const char *topo_ib_state_name(long v) {
  switch (v) {
  case 1: return "DOWN";
  case 2: return "INIT";
  case 3: return "ARMED";
  case 4: return "ACTIVE";
  case 5: return "ACTIVE_DEFER";
  default: return "unknown";
  }
}

static void topo_find_nics(topo_info *ti) {
  for (hwloc_obj_t o = NULL; (o = hwloc_get_next_osdev(ti->t, o)) != NULL;) {
    int is_net = topo_osdev_is(o, HWLOC_OBJ_OSDEV_NETWORK);
    int is_ofed = topo_osdev_is(o, HWLOC_OBJ_OSDEV_OPENFABRICS);
    if ((!is_net && !is_ofed) || !o->name) continue;
    hwloc_obj_t pci = topo_pci_parent(o);
    if (!pci) continue; /* virtual interfaces are not fabric ports */
    topo_nic *nic = NULL;
    for (int i = 0; i < ti->nnics; i++)
      if (ti->nic[i].pci.obj == pci) nic = &ti->nic[i];
    if (!nic) {
      if (ti->nnics == TOPO_MAX_NICS) {
        topo_warn(ti, "more than %d NICs, the rest ignored", TOPO_MAX_NICS);
        break;
      }
      nic = &ti->nic[ti->nnics++];
      memset(nic, 0, sizeof *nic);
      topo_fill_pci(ti, &nic->pci, pci);
      nic->speed_gbps = -1;
    }
    if (is_ofed) {
      if (!nic->hca[0]) topo_copy(nic->hca, sizeof nic->hca, o->name);
      /* hwloc's Port<N>State, used when sysfs is not read */
      for (unsigned k = 0; k < o->infos_count && nic->nports < TOPO_MAX_PORTS; k++) {
        int port;
        char tail[16];
        if (sscanf(o->infos[k].name, "Port%d%15s", &port, tail) == 2 && !strcmp(tail, "State")) {
          topo_ib_port *p = &nic->ports[nic->nports++];
          memset(p, 0, sizeof *p);
          p->port = port;
          p->rate_gbps = -1;
          topo_copy(p->state, sizeof p->state, topo_ib_state_name(atol(o->infos[k].value)));
          snprintf(p->phys_state, sizeof p->phys_state, "unknown");
          snprintf(p->link_layer, sizeof p->link_layer, "unknown");
        }
      }
    } else if (nic->nnet < TOPO_MAX_NETDEVS) {
      topo_netdev *nd = &nic->net[nic->nnet++];
      memset(nd, 0, sizeof *nd);
      topo_copy(nd->name, sizeof nd->name, o->name);
      topo_sysfs_net(ti->sysfs_root[0] ? ti->sysfs_root : NULL, o->name, &nd->st);
      const char *mac = hwloc_obj_get_info_by_name(o, "Address");
      if (!nd->st.mac[0] && mac) topo_copy(nd->st.mac, sizeof nd->st.mac, mac);
    }
  }
  for (int i = 0; i < ti->nnics; i++) {
    topo_nic *nic = &ti->nic[i];
    if (nic->hca[0] && ti->sysfs_root[0]) {
      topo_ib_port ports[TOPO_MAX_PORTS];
      int n = topo_sysfs_ib_ports(ti->sysfs_root, nic->hca, ports, TOPO_MAX_PORTS);
      if (n > 0) {
        memcpy(nic->ports, ports, sizeof ports[0] * (size_t)n);
        nic->nports = n;
      }
    }
    topo_copy(nic->name, sizeof nic->name, nic->hca[0] ? nic->hca : (nic->nnet ? nic->net[0].name : nic->pci.bdf));
    int ib = 0, eth = 0;
    for (int p = 0; p < nic->nports; p++) {
      if (!strcmp(nic->ports[p].link_layer, "InfiniBand")) ib++;
      if (!strcmp(nic->ports[p].link_layer, "Ethernet")) eth++;
      if (!strcmp(nic->ports[p].state, "ACTIVE") && nic->ports[p].rate_gbps > nic->speed_gbps)
        nic->speed_gbps = nic->ports[p].rate_gbps;
    }
    for (int k = 0; k < nic->nnet; k++)
      if (nic->net[k].st.speed_mbps > 0 && nic->net[k].st.speed_mbps / 1000.0 > nic->speed_gbps)
        nic->speed_gbps = nic->net[k].st.speed_mbps / 1000.0;
    const char *kind;
    int ipoib = 0; /* without sysfs the link layer is unknown; an ib* netdev still says IB */
    for (int k = 0; k < nic->nnet; k++) ipoib |= !strncmp(nic->net[k].name, "ib", 2);
    if (nic->hca[0])
      kind = ib && eth ? "ib+roce" : ib ? "infiniband" : eth ? "roce" : ipoib ? "infiniband"
                                                                               : "openfabrics";
    else kind = (nic->nnet && !strncmp(nic->net[0].name, "ib", 2)) ? "infiniband" : "ethernet";
    topo_copy(nic->kind, sizeof nic->kind, kind);
  }
}

static int topo_pci_match(hwloc_obj_t o, unsigned dom, unsigned bus, unsigned dev, unsigned fn) {
  const struct hwloc_pcidev_attr_s *p = &o->attr->pcidev;
  return p->domain == dom && p->bus == bus && p->dev == dev && p->func == fn;
}

static int topo_nvlink_alloc(topo_info *ti) {
  size_t n = (size_t)ti->ngpus * (size_t)ti->ngpus;
  ti->nvlinks = calloc(n ? n : 1, sizeof *ti->nvlinks);
  ti->nvversion = calloc(n ? n : 1, sizeof *ti->nvversion);
  ti->nvvia = calloc(n ? n : 1, 1);
  return ti->nvlinks && ti->nvversion && ti->nvvia ? 0 : -1;
}

/* GPUs that reach NVSwitches talk to each other through them (DGX/HGX: every switch reaches
 * every GPU), so a pair without direct links gets the smaller of the two switch link counts. */
static void topo_nvlink_through_switches(topo_info *ti) {
  int n = ti->ngpus;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j || ti->nvlinks[i * n + j] > 0) continue;
      int a = ti->gpu[i].switch_links, b = ti->gpu[j].switch_links;
      if (a > 0 && b > 0) {
        ti->nvlinks[i * n + j] = a < b ? a : b;
        ti->nvvia[i * n + j] = 1;
        unsigned va = ti->gpu[i].switch_version, vb = ti->gpu[j].switch_version;
        ti->nvversion[i * n + j] = va < vb ? va : vb;
      }
    }
}

static int topo_nvlink_from_nvml(topo_info *ti, const topo_nvml_info *nv) {
  int n = ti->ngpus;
  if (topo_nvlink_alloc(ti) != 0) return -1;
  int known = 1;
  for (int i = 0; i < n; i++) ti->gpu[i].switch_links = 0;
  for (int k = 0; k < nv->ngpus; k++) {
    const topo_nvml_gpu *g = &nv->gpu[k];
    int gi = -1;
    for (int i = 0; i < n; i++)
      if (topo_pci_match(ti->gpu[i].pci.obj, g->domain, g->bus, g->dev, g->func)) gi = i;
    if (!g->nvlink_known) known = 0;
    if (gi < 0) {
      topo_warn(ti, "NVML GPU %04x:%02x:%02x.%x is not in the PCI tree", g->domain, g->bus,
                g->dev, g->func);
      continue;
    }
    topo_gpu *tg = &ti->gpu[gi];
    if (g->name[0]) topo_copy(tg->model, sizeof tg->model, g->name);
    if (g->mem_bytes > 0) tg->mem_bytes = g->mem_bytes;
    tg->mig = g->mig;
    topo_pcie_link *pl = &tg->pci.link; /* sysfs first; NVML where sysfs could not read it */
    if (pl->max_gen < 1 && g->pcie_gen > 0) {
      pl->max_gen = g->pcie_gen;
      pl->max_gts = topo_pcie_gts(g->pcie_gen);
    }
    if (pl->max_width < 1 && g->pcie_width > 0) pl->max_width = g->pcie_width;
    for (int l = 0; l < g->nlinks; l++) {
      const topo_nvml_link *lk = &g->links[l];
      int peer = -1;
      for (int j = 0; j < n; j++)
        if (topo_pci_match(ti->gpu[j].pci.obj, lk->domain, lk->bus, lk->dev, lk->func)) peer = j;
      if (peer >= 0 && peer != gi) {
        ti->nvlinks[gi * n + peer]++;
        if (lk->version > ti->nvversion[gi * n + peer]) ti->nvversion[gi * n + peer] = lk->version;
        continue;
      }
      hwloc_obj_t r = hwloc_get_pcidev_by_busid(ti->t, lk->domain, lk->bus, lk->dev, lk->func);
      /* NVSwitches are often hidden from the host's PCI tree: not a GPU and not found is one */
      if (!r || topo_is_nvswitch(r)) {
        tg->switch_links++;
        if (lk->version > tg->switch_version) tg->switch_version = lk->version;
      }
    }
  }
  if (!known) return 1;
  topo_nvlink_through_switches(ti);
  return 0;
}

/* hwloc's NVLinkBandwidth (NVML plugin, saved in an XML): values are MB/s, 20000 per NVLink 1.0
 * link and 25000 per later link (as hwloc's NVML backend adds them); NVSwitch bridges and POWER
 * packages may be among the objects. */
static int topo_nvlink_from_hwloc(topo_info *ti) {
  unsigned nr = 1;
  struct hwloc_distances_s *d = NULL;
  if (hwloc_distances_get_by_name(ti->t, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0)
    return -1;
  int n = ti->ngpus;
  if (topo_nvlink_alloc(ti) != 0) {
    hwloc_distances_release(ti->t, d);
    return -1;
  }
  unsigned m = d->nbobjs;
  int *gi = calloc(m ? m : 1, sizeof *gi);
  if (!gi) {
    hwloc_distances_release(ti->t, d);
    return -1;
  }
  int all25 = 1, all20 = 1;
  unsigned long long minv = 0;
  for (unsigned i = 0; i < m; i++) {
    hwloc_obj_t o = d->objs[i];
    gi[i] = -2; /* other (a CPU package) */
    if (o && o->type == HWLOC_OBJ_OS_DEVICE) o = topo_pci_parent(o);
    if (o && o->type == HWLOC_OBJ_PCI_DEVICE) gi[i] = topo_gpu_index(ti, o);
    if (gi[i] == -1 && topo_is_nvswitch(o)) gi[i] = -3;
    for (unsigned j = 0; j < m; j++) {
      unsigned long long v = d->values[i * m + j];
      if (i == j || !v) continue;
      if (v % 25000) all25 = 0;
      if (v % 20000) all20 = 0;
      if (!minv || v < minv) minv = v;
    }
  }
  unsigned long long per = all25 ? 25000 : all20 ? 20000 : (minv ? minv : 1);
  unsigned ver = all25 ? 0 : all20 ? 1 : 0;
  for (int i = 0; i < n; i++) ti->gpu[i].switch_links = 0;
  for (unsigned i = 0; i < m; i++) {
    if (gi[i] < 0) continue;
    for (unsigned j = 0; j < m; j++) {
      if (i == j) continue;
      int links = (int)(d->values[i * m + j] / per);
      if (gi[j] >= 0) {
        ti->nvlinks[gi[i] * n + gi[j]] = links;
        ti->nvversion[gi[i] * n + gi[j]] = links ? ver : 0;
      } else if (gi[j] == -3) {
        ti->gpu[gi[i]].switch_links += links;
        if (links) ti->gpu[gi[i]].switch_version = ver;
      }
    }
  }
  free(gi);
  hwloc_distances_release(ti->t, d);
  topo_nvlink_through_switches(ti);
  return 0;
}

static void topo_nvlink(topo_info *ti, const topo_opts *o) {
  snprintf(ti->nvlink_source, sizeof ti->nvlink_source, "unknown");
  int want = o->nvml == TOPO_NVML_ON || (o->nvml == TOPO_NVML_AUTO && ti->thissystem &&
                                         !strcmp(ti->backend, "Linux"));
  if (want && ti->ngpus > 0) {
    topo_nvml_info *nv = calloc(1, sizeof *nv);
    char err[256] = "";
    if (!nv) {
      snprintf(ti->nvml_note, sizeof ti->nvml_note, "out of memory");
    } else if (topo_nvml_query(nv, o->nvml_lib, err, sizeof err) != 0) {
      topo_copy(ti->nvml_note, sizeof ti->nvml_note, err);
    } else {
      int r = topo_nvlink_from_nvml(ti, nv);
      if (r == 0) {
        snprintf(ti->nvlink_source, sizeof ti->nvlink_source, "nvml");
      } else {
        topo_copy(ti->nvml_note, sizeof ti->nvml_note, nv->note[0] ? nv->note : "NVLink state unreadable");
        free(ti->nvlinks);
        free(ti->nvversion);
        free(ti->nvvia);
        ti->nvlinks = NULL;
        ti->nvversion = NULL;
        ti->nvvia = NULL;
        for (int i = 0; i < ti->ngpus; i++) ti->gpu[i].switch_links = -1;
      }
    }
    free(nv);
  } else if (ti->ngpus > 0) {
    topo_copy(ti->nvml_note, sizeof ti->nvml_note, want ? "" : "NVML not queried (the topology is not this machine's)");
  }
  if (!ti->nvlinks && ti->ngpus > 0 && topo_nvlink_from_hwloc(ti) == 0)
    snprintf(ti->nvlink_source, sizeof ti->nvlink_source, "hwloc");
}

static void topo_nearest_nics(topo_info *ti) {
  for (int g = 0; g < ti->ngpus; g++) {
    int best = -1;
    topo_path_class bc = TOPO_PATH_SYS;
    for (int k = 0; k < ti->nnics; k++) {
      topo_path_class c = topo_path(ti, &ti->gpu[g].pci, &ti->nic[k].pci, 0, NULL);
      if (best < 0 || c < bc) {
        best = k;
        bc = c;
      }
    }
    ti->gpu[g].nearest_nic = best;
  }
}

static int topo_load_hwloc(topo_info *ti, const topo_opts *o, char *err, size_t errcap) {
  if (hwloc_topology_init(&ti->t) != 0) {
    snprintf(err, errcap, "hwloc_topology_init failed");
    ti->t = NULL;
    return -1;
  }
  topo_hwloc_prepare(ti->t);
  /* an XML file, ours to read or hwloc's through the environment: outside input (topo_xml.c) */
  const char *envxml = getenv("HWLOC_XMLFILE");
  const char *xml = o->xml ? o->xml : !o->synthetic && envxml && *envxml ? envxml : NULL;
  if (xml) {
    if (topo_xml_sane(xml, err, errcap) != 0) return -1;
    if (topo_xml_isolated(ti->t, xml, err, errcap) != 0) return -1;
  } else if (o->synthetic) {
    if (hwloc_topology_set_synthetic(ti->t, o->synthetic) != 0) {
      snprintf(err, errcap, "invalid synthetic topology '%s'", o->synthetic);
      return -1;
    }
  }
  if (hwloc_topology_load(ti->t) != 0) {
    snprintf(err, errcap, "%s: hwloc could not load it (malformed or not an hwloc topology)",
             xml ? xml : o->synthetic ? o->synthetic : "this machine");
    return -1;
  }
  return 0;
}

int topo_load(topo_info **out, const topo_opts *opts, char *err, size_t errcap) {
  *out = NULL;
  topo_opts defaults;
  memset(&defaults, 0, sizeof defaults);
  const topo_opts *o = opts ? opts : &defaults;
  if (o->sysfs_root) {
    struct stat sb;
    if (stat(o->sysfs_root, &sb) != 0) {
      snprintf(err, errcap, "sysfs root %s: %s", o->sysfs_root, strerror(errno));
      return -1;
    }
    if (!S_ISDIR(sb.st_mode)) {
      snprintf(err, errcap, "sysfs root %s: not a directory", o->sysfs_root);
      return -1;
    }
    if (access(o->sysfs_root, R_OK | X_OK) != 0) {
      snprintf(err, errcap, "sysfs root %s: %s", o->sysfs_root, strerror(errno));
      return -1;
    }
  }
  topo_info *ti = calloc(1, sizeof *ti);
  if (!ti) {
    snprintf(err, errcap, "out of memory");
    return -1;
  }
  if (topo_load_hwloc(ti, o, err, errcap) != 0) {
    topo_free(ti);
    return -1;
  }
  hwloc_obj_t root = hwloc_get_root_obj(ti->t);
  ti->thissystem = hwloc_topology_is_thissystem(ti->t);
  const char *be = hwloc_obj_get_info_by_name(root, "Backend");
  topo_copy(ti->source_backend, sizeof ti->source_backend, be ? be : "unknown");
  /* an XML keeps its origin's Backend info, so say ourselves how this one was obtained */
  const char *envxml = getenv("HWLOC_XMLFILE"), *envsyn = getenv("HWLOC_SYNTHETIC");
  if (o->xml) snprintf(ti->backend, sizeof ti->backend, "XML");
  else if (o->synthetic) snprintf(ti->backend, sizeof ti->backend, "Synthetic");
  else if (envxml && *envxml) {
    snprintf(ti->backend, sizeof ti->backend, "XML");
    topo_warn(ti, "HWLOC_XMLFILE=%s replaces this machine's topology", envxml);
  } else if (envsyn && *envsyn) {
    snprintf(ti->backend, sizeof ti->backend, "Synthetic");
    topo_warn(ti, "HWLOC_SYNTHETIC replaces this machine's topology");
  } else if (!ti->thissystem) {
    snprintf(ti->backend, sizeof ti->backend, "XML");
    topo_warn(ti, "hwloc says the topology is not this system's");
  } else {
    topo_copy(ti->backend, sizeof ti->backend, be ? be : "Linux");
  }
  int mine = !o->xml && !o->synthetic && !strcmp(ti->backend, "Linux");
  if (o->sysfs_root) topo_copy(ti->sysfs_root, sizeof ti->sysfs_root, o->sysfs_root);
  else if (mine) snprintf(ti->sysfs_root, sizeof ti->sysfs_root, "/");
  if (mine) {
    gethostname(ti->host, sizeof ti->host - 1);
  } else {
    const char *h = hwloc_obj_get_info_by_name(root, "HostName");
    topo_copy(ti->host, sizeof ti->host, h ? h : "unknown");
  }
  const char *arch = hwloc_obj_get_info_by_name(root, "Architecture");
  topo_copy(ti->arch, sizeof ti->arch, arch ? arch : "unknown");
  /* the library's version (an XML's hwlocVersion info is its exporter's) */
  topo_copy(ti->hwloc_version, sizeof ti->hwloc_version, HWLOC_VERSION);

  ti->npkgs = hwloc_get_nbobjs_by_type(ti->t, HWLOC_OBJ_PACKAGE);
  ti->nnuma = hwloc_get_nbobjs_by_type(ti->t, HWLOC_OBJ_NUMANODE);
  ti->ncores = hwloc_get_nbobjs_by_type(ti->t, HWLOC_OBJ_CORE);
  ti->npus = hwloc_get_nbobjs_by_type(ti->t, HWLOC_OBJ_PU);
  for (int i = 0; i < ti->npkgs && i < TOPO_MAX_PKGS; i++) {
    hwloc_obj_t p = hwloc_get_obj_by_type(ti->t, HWLOC_OBJ_PACKAGE, (unsigned)i);
    const char *m = hwloc_obj_get_info_by_name(p, "CPUModel");
    topo_copy(ti->pkg_model[i], sizeof ti->pkg_model[i], m ? m : "unknown");
    topo_rtrim(ti->pkg_model[i]); /* CPUID pads the brand string with spaces on some CPUs */
  }
  for (int i = 0; i < ti->nnuma && i < TOPO_MAX_NUMA; i++) {
    hwloc_obj_t nn = hwloc_get_obj_by_type(ti->t, HWLOC_OBJ_NUMANODE, (unsigned)i);
    ti->numa[i].os_index = nn->os_index;
    ti->numa[i].mem = nn->attr->numanode.local_memory;
    topo_list(ti->numa[i].cpuset, sizeof ti->numa[i].cpuset, nn->cpuset);
  }
  topo_list(ti->allowed_cpuset, sizeof ti->allowed_cpuset,
            hwloc_topology_get_allowed_cpuset(ti->t));
  topo_list(ti->complete_cpuset, sizeof ti->complete_cpuset,
            hwloc_topology_get_complete_cpuset(ti->t));
  if (mine) {
    hwloc_bitmap_t b = hwloc_bitmap_alloc();
    if (b && hwloc_get_cpubind(ti->t, b, HWLOC_CPUBIND_PROCESS) == 0)
      topo_list(ti->bound_cpuset, sizeof ti->bound_cpuset, b);
    hwloc_bitmap_free(b);
  }

  topo_find_gpus(ti);
  topo_find_nics(ti);
  topo_nearest_nics(ti);
  topo_nvlink(ti, o);
  char *canon = topo_canonical(ti);
  if (!canon) {
    snprintf(err, errcap, "out of memory");
    topo_free(ti);
    return -1;
  }
  /* FNV-1a 64: stable across runs and builds, which a pointer-seeded hash would not be */
  unsigned long long h = 0xcbf29ce484222325ULL;
  for (const unsigned char *c = (const unsigned char *)canon; *c; c++) {
    h ^= *c;
    h *= 0x100000001b3ULL;
  }
  free(canon);
  snprintf(ti->hash, sizeof ti->hash, "%016llx", h);
  *out = ti;
  return 0;
}

void topo_free(topo_info *ti) {
  if (!ti) return;
  if (ti->t) hwloc_topology_destroy(ti->t);
  free(ti->nvlinks);
  free(ti->nvversion);
  free(ti->nvvia);
  free(ti);
}

void topo_get_stamp(const topo_info *ti, topo_stamp *st) {
  memset(st, 0, sizeof *st);
  topo_copy(st->host, sizeof st->host, ti->host);
  topo_copy(st->hash, sizeof st->hash, ti->hash);
  topo_copy(st->backend, sizeof st->backend, ti->backend);
}

int topo_write_xml(const topo_info *ti, const char *path, char *err, size_t errcap) {
  /* through a buffer, not hwloc's own file export: the file is replaced whole (a run killed as it
   * starts left a partial XML) */
  char *xml = NULL;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(ti->t, &xml, &len, 0) != 0 || len <= 0) {
    snprintf(err, errcap, "cannot write %s: hwloc could not export the topology", path);
    return -1;
  }
  int rc = util_file_replace(path, xml, (size_t)len - 1, err, errcap); /* len counts the NUL */
  hwloc_free_xmlbuffer(ti->t, xml);
  return rc;
}
