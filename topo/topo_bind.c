/* Binding a rank next to its core, NUMA node, NIC or GPU, or as auto decides; the description
 * says what the kernel actually gave (read back), which is what the results record. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topo_int.h"

int topo_bind_parse(const char *how, topo_bind_kind *kind, char *err, size_t errcap) {
  static const char *names[] = {"none", "core", "numa", "nic", "gpu", "auto"};
  for (int i = 0; how && i < 6; i++)
    if (!strcmp(how, names[i])) {
      if (kind) *kind = (topo_bind_kind)i;
      return 0;
    }
  snprintf(err, errcap, "invalid --bind '%s' (expected auto, none, core, numa, nic or gpu)",
           how ? how : "");
  return -1;
}

/* Ranks spread evenly over n places while they fit, then round robin. */
static int topo_spread(int rank, int size, int n) {
  return size <= n ? (int)((long)rank * n / size) : rank % n;
}

static int topo_pick_nic(const topo_info *ti, const char *hint, int rank, char *err,
                         size_t errcap) {
  if (ti->nnics == 0) {
    snprintf(err, errcap, "--bind nic: this machine has no NIC on PCI");
    return -1;
  }
  if (!hint || !*hint) return rank % ti->nnics;
  for (int i = 0; i < ti->nnics; i++) {
    const topo_nic *n = &ti->nic[i];
    if (!strcmp(n->name, hint) || !strcmp(n->hca, hint) || !strcmp(n->pci.bdf, hint)) return i;
    for (int k = 0; k < n->nnet; k++)
      if (!strcmp(n->net[k].name, hint)) return i;
  }
  snprintf(err, errcap, "--bind nic: no NIC named '%s'", hint);
  return -1;
}

static int topo_pick_gpu(const topo_info *ti, const char *hint, int rank, char *err,
                         size_t errcap) {
  if (ti->ngpus == 0) {
    snprintf(err, errcap, "--bind gpu: this machine has no GPU");
    return -1;
  }
  if (!hint || !*hint) return rank % ti->ngpus;
  char *end;
  long v = strtol(hint, &end, 10);
  if (end != hint && !*end) {
    if (v < 0 || v >= ti->ngpus) {
      snprintf(err, errcap, "--bind gpu: GPU %ld does not exist (%d GPUs)", v, ti->ngpus);
      return -1;
    }
    return (int)v;
  }
  for (int i = 0; i < ti->ngpus; i++)
    if (!strcasecmp(ti->gpu[i].pci.bdf, hint) || !strcmp(ti->gpu[i].name, hint)) return i;
  snprintf(err, errcap, "--bind gpu: no GPU '%s'", hint);
  return -1;
}

/* The n-th object of type T whose cpus intersect the allowed set. */
static hwloc_obj_t topo_nth_allowed(hwloc_topology_t t, hwloc_obj_type_t type,
                                    hwloc_const_bitmap_t allowed, int rank, int size, int *count) {
  int n = 0;
  hwloc_obj_t o = NULL;
  while ((o = hwloc_get_next_obj_by_type(t, type, o)) != NULL)
    if (o->cpuset && hwloc_bitmap_intersects(o->cpuset, allowed)) n++;
  *count = n;
  if (!n) return NULL;
  int want = topo_spread(rank, size, n), i = 0;
  while ((o = hwloc_get_next_obj_by_type(t, type, o)) != NULL)
    if (o->cpuset && hwloc_bitmap_intersects(o->cpuset, allowed) && i++ == want) return o;
  return NULL;
}

/* auto: `threads` allowed cores of its own for each local rank, where they fit (set, what and 1);
 * else 0 and what says why not. A process bound already (by mpirun, srun, taskset) keeps that:
 * its launcher chose. Unbound, a rank's communication thread and the kernel's work for its
 * messages drift to whichever core woke them, so the ranks take turns at losing backward time
 * and every step waits for the one that lost (docs/measurements.md, "Binding by default"). */
static int topo_auto(topo_info *ti, hwloc_const_bitmap_t allowed, hwloc_bitmap_t set, hwloc_bitmap_t got,
                     int local_rank, int local_size, int threads, char *what, size_t cap) {
  if (hwloc_get_cpubind(ti->t, got, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_isincluded(allowed, got)) {
    snprintf(what, cap, "auto: the launcher's");
    return 0;
  }
  hwloc_obj_type_t type = HWLOC_OBJ_CORE;
  int n = 0;
  if (!topo_nth_allowed(ti->t, type, allowed, 0, 1, &n)) /* some VMs expose PUs only */
    type = HWLOC_OBJ_PU, topo_nth_allowed(ti->t, type, allowed, 0, 1, &n);
  int each = threads > 0 ? threads : 1;
  if (n < 1 || (long)local_size * each > n) {
    snprintf(what, cap, "auto: none (%d rank(s) x %d thread(s) on %d core(s))", local_size, each, n);
    return 0;
  }
  unsigned first = 0, last = 0;
  for (int i = 0; i < each; i++) {
    hwloc_obj_t o = topo_nth_allowed(ti->t, type, allowed, local_rank * each + i, n, &n);
    if (!o) break;
    hwloc_bitmap_or(set, set, o->cpuset);
    if (i == 0) first = o->logical_index;
    last = o->logical_index;
  }
  if (first == last) snprintf(what, cap, "auto: core:%u", first);
  else snprintf(what, cap, "auto: cores:%u-%u", first, last);
  return 1;
}

int topo_bind(const char *how, int local_rank, int local_size, int threads, const char *hint, char *desc,
              size_t desccap, char *err, size_t errcap) {
  if (desccap) desc[0] = 0;
  topo_bind_kind kind;
  if (topo_bind_parse(how, &kind, err, errcap) != 0) return -1;
  if (local_size < 1 || local_rank < 0 || local_rank >= local_size) {
    snprintf(err, errcap, "--bind %s: local rank %d of %d is not a rank", how, local_rank,
             local_size);
    return -1;
  }
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.nvml = TOPO_NVML_OFF;
  topo_info *ti = NULL;
  if (topo_load(&ti, &o, err, errcap) != 0) return -1;
  int rc = -1;
  hwloc_bitmap_t set = hwloc_bitmap_alloc(), got = hwloc_bitmap_alloc();
  if (!set || !got) {
    snprintf(err, errcap, "out of memory");
    goto out;
  }
  /* XML or synthetic topologies make binding a silent no-op: refuse instead (auto: leave it) */
  if (!ti->thissystem || strcmp(ti->backend, "Linux") != 0) {
    if (kind == TOPO_BIND_AUTO) {
      snprintf(desc, desccap, "auto: none (the topology is not this machine's)");
      rc = 0;
    } else {
      snprintf(err, errcap, "--bind %s: the topology is not this machine's (backend %s%s)", how,
               ti->backend, getenv("HWLOC_XMLFILE") ? ", HWLOC_XMLFILE is set" : "");
    }
    goto out;
  }
  hwloc_const_bitmap_t allowed = hwloc_topology_get_allowed_cpuset(ti->t);
  char what[96] = "none";
  int n = 0, bind = kind != TOPO_BIND_NONE;
  hwloc_obj_t obj = NULL;
  switch (kind) {
  case TOPO_BIND_NONE:
    break;
  case TOPO_BIND_AUTO:
    bind = topo_auto(ti, allowed, set, got, local_rank, local_size, threads, what, sizeof what);
    break;
  case TOPO_BIND_CORE:
    obj = topo_nth_allowed(ti->t, HWLOC_OBJ_CORE, allowed, local_rank, local_size, &n);
    if (!obj) /* some VMs and synthetic shapes expose PUs only */
      obj = topo_nth_allowed(ti->t, HWLOC_OBJ_PU, allowed, local_rank, local_size, &n);
    if (!obj) {
      snprintf(err, errcap, "--bind core: no allowed core");
      goto out;
    }
    snprintf(what, sizeof what, "core:%u", obj->logical_index);
    hwloc_bitmap_copy(set, obj->cpuset);
    break;
  case TOPO_BIND_NUMA:
    obj = topo_nth_allowed(ti->t, HWLOC_OBJ_NUMANODE, allowed, local_rank, local_size, &n);
    if (!obj) {
      snprintf(err, errcap, "--bind numa: no NUMA node with allowed cpus");
      goto out;
    }
    snprintf(what, sizeof what, "numa:%u", obj->os_index);
    hwloc_bitmap_copy(set, obj->cpuset);
    break;
  case TOPO_BIND_NIC: {
    int i = topo_pick_nic(ti, hint, local_rank, err, errcap);
    if (i < 0) goto out;
    snprintf(what, sizeof what, "nic:%s", ti->nic[i].name);
    hwloc_bitmap_copy(set, ti->nic[i].pci.anc->cpuset);
    break;
  }
  case TOPO_BIND_GPU: {
    int i = topo_pick_gpu(ti, hint, local_rank, err, errcap);
    if (i < 0) goto out;
    snprintf(what, sizeof what, "gpu:%s(%s)", ti->gpu[i].name, ti->gpu[i].pci.bdf);
    hwloc_bitmap_copy(set, ti->gpu[i].pci.anc->cpuset);
    break;
  }
  }
  if (bind) {
    hwloc_bitmap_and(set, set, allowed);
    if (hwloc_bitmap_iszero(set)) {
      snprintf(err, errcap, "--bind %s: %s has no cpu this process may use", how, what);
      goto out;
    }
    if (hwloc_set_cpubind(ti->t, set, HWLOC_CPUBIND_PROCESS) != 0) {
      snprintf(err, errcap, "--bind %s: binding to %s failed", how, what);
      goto out;
    }
  }
  if (hwloc_get_cpubind(ti->t, got, HWLOC_CPUBIND_PROCESS) != 0) {
    snprintf(err, errcap, "--bind %s: cannot read the binding back", how);
    goto out;
  }
  char hex[256], list[256];
  hwloc_bitmap_snprintf(hex, sizeof hex, got);
  hwloc_bitmap_list_snprintf(list, sizeof list, got);
  snprintf(desc, desccap, "%s cpuset=%s cpus=%s", what, hex, list);
  rc = 0;
out:
  hwloc_bitmap_free(set);
  hwloc_bitmap_free(got);
  topo_free(ti);
  return rc;
}
