/* Private to topo/ (and its tests): the detected model and the readers that fill it. */
#ifndef FABENCH_TOPO_INT_H
#define FABENCH_TOPO_INT_H

#include <hwloc.h>
#include <stddef.h>
#include <string.h>

#include "nvml_min.h"
#include "topo.h"

#define TOPO_MAX_GPUS 64
#define TOPO_MAX_NICS 128
#define TOPO_MAX_NETDEVS 8 /* per NIC (PCI function) */
#define TOPO_MAX_PORTS 8   /* per HCA */
#define TOPO_MAX_NUMA 64
#define TOPO_MAX_PKGS 16

/* Copies with truncation (snprintf "%s" trips -Wformat-truncation on fixed buffers). */
static inline void topo_copy(char *dst, size_t cap, const char *src) {
  size_t n = strlen(src);
  if (n >= cap) n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = 0;
}

/* Drops trailing blanks and newlines (sysfs lines; CPUID's space-padded brand strings). */
static inline void topo_rtrim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

/* hwloc 3.0 turns osdev.type (an enum) into the bitmask osdev.types. */
static inline int topo_osdev_is(hwloc_obj_t o, int kind) {
#if HWLOC_API_VERSION >= 0x00030000
  return (o->attr->osdev.types & (unsigned long)kind) != 0;
#else
  return o->attr->osdev.type == (hwloc_obj_osdev_type_t)kind;
#endif
}

/* ---- sysfs readers: root is a prefix ("" or "/" for the real one); -1 means unknown ---- */
typedef struct {
  long speed_mbps;    /* /sys/class/net/<if>/speed; <= 0 or unreadable: -1 */
  long mtu;           /* -1 unknown */
  char operstate[16]; /* "up", "down", ...; "unknown" when unreadable */
  char mac[64];       /* "" when unreadable */
} topo_net_state;
/* Returns 0 when /sys/class/net/<ifname> exists, -1 when not (out then says unknown). */
int topo_sysfs_net(const char *root, const char *ifname, topo_net_state *out);

typedef struct {
  int port;
  double rate_gbps;     /* from "100 Gb/sec (4X EDR)"; -1 unknown */
  char rate[48];        /* the text as read, "" when unreadable */
  char state[24];       /* "ACTIVE", "DOWN", ...; "unknown" */
  char phys_state[24];  /* "LinkUp", "Disabled", ...; "unknown" */
  char link_layer[24];  /* "InfiniBand" or "Ethernet" (RoCE); "unknown" */
} topo_ib_port;
/* Ports of /sys/class/infiniband/<hca>, sorted by number. Returns the count, -1 if the HCA is
 * not there. */
int topo_sysfs_ib_ports(const char *root, const char *hca, topo_ib_port *ports, int max);
/* Netdevs of an HCA (/sys/class/infiniband/<hca>/device/net/ *), comma separated, sorted. */
int topo_sysfs_ib_netdevs(const char *root, const char *hca, char *buf, size_t cap);

typedef struct {
  double max_gts, cur_gts; /* GT/s per lane; -1 unknown */
  int max_width, cur_width; /* lanes; -1 unknown */
  int max_gen, cur_gen;     /* 1..6 from the GT/s; -1 unknown */
  int downtrained;          /* 1 current below max, 0 not, -1 unknown */
} topo_pcie_link;
/* /sys/bus/pci/devices/<bdf>/{max,current}_link_{speed,width}. Returns 0 if any was read. */
int topo_sysfs_pcie(const char *root, const char *bdf, topo_pcie_link *out);
int topo_pcie_gen(double gts);
double topo_pcie_gts(int gen); /* -1 unknown */

/* ---- NVML through dlopen ---- */
typedef struct {
  unsigned domain, bus, dev, func;
  unsigned version; /* NVML's value for the link (0 unknown) */
} topo_nvml_link;
#define TOPO_MAX_MIG 8 /* an H100 or A100 splits into at most 7 */
typedef struct {
  unsigned gi, ci;     /* GPU and compute instance ids */
  char name[96];       /* "NVIDIA H100 80GB HBM3 MIG 2g.20gb" */
  char uuid[96];       /* "MIG-..." */
  long long mem_bytes; /* -1 unknown */
} topo_mig;
typedef struct {
  int mode; /* -1 unknown (no MIG support, or NVML lacks the calls), 0 disabled, 1 enabled */
  int n;
  topo_mig inst[TOPO_MAX_MIG];
} topo_mig_info;
typedef struct {
  unsigned domain, bus, dev, func;
  char name[96];
  long long mem_bytes; /* -1 unknown */
  int pcie_gen, pcie_width; /* the link's maximum generation and lanes; -1 unknown */
  topo_mig_info mig;
  int nlinks;          /* active links listed in links[] */
  int nvlink_known;    /* 0: the NVLink calls were missing or failed */
  topo_nvml_link links[NVML_NVLINK_MAX_LINKS];
} topo_nvml_gpu;
typedef struct {
  int ngpus;
  topo_nvml_gpu gpu[TOPO_MAX_GPUS];
  char note[256]; /* why NVLink is unknown, when it is */
} topo_nvml_info;
/* Loads lib (NULL: "libnvidia-ml.so.1"), lists GPUs and their active NVLinks. Returns 0, or -1
 * with the reason in err (library missing, a required symbol missing, an NVML error). */
int topo_nvml_query(topo_nvml_info *out, const char *lib, char *err, size_t errcap);

/* ---- the model ---- */
typedef enum {
  TOPO_PATH_X = 0, TOPO_PATH_NV, TOPO_PATH_PIX, TOPO_PATH_PXB, TOPO_PATH_PHB, TOPO_PATH_NODE,
  TOPO_PATH_SYS
} topo_path_class;
const char *topo_path_name(topo_path_class c);

typedef struct {
  char bdf[16];      /* "0000:17:00.0" */
  unsigned vendor, device, class_id;
  hwloc_obj_t obj;   /* the PCIDev */
  int numa;          /* nearest NUMA node (os index); -1 when several or unknown */
  char nodeset[64];  /* NUMA nodes of the nearest CPU-side ancestor, as a list "0" or "0-1" */
  char cpuset[256];  /* its cpus as a list "0-23,48-71" */
  hwloc_obj_t anc;   /* hwloc_get_non_io_ancestor_obj */
  topo_pcie_link link;
  double hwloc_gbs;  /* hwloc's current link speed in GB/s; -1 unknown (0 in VMs) */
} topo_pcidev;

typedef struct {
  char name[32];       /* netdev, "eth0" */
  topo_net_state st;
} topo_netdev;

typedef struct {
  char name[64];    /* HCA name if any ("mlx5_0"), else the first netdev */
  char kind[16];    /* "ethernet", "infiniband", "roce", "ib+eth" */
  char hca[32];     /* "" if not an OpenFabrics device */
  topo_pcidev pci;
  int nnet;
  topo_netdev net[TOPO_MAX_NETDEVS];
  int nports;
  topo_ib_port ports[TOPO_MAX_PORTS];
  double speed_gbps; /* best of netdev speeds and active port rates; -1 unknown */
} topo_nic;

typedef struct {
  char name[16];    /* "GPU0" */
  char model[96];
  char osdev[32];   /* hwloc OS device name (cuda0, nvml0, card0) or "" */
  long long mem_bytes; /* -1 unknown */
  topo_pcidev pci;
  int nearest_nic;  /* index in nics, -1 none */
  int switch_links; /* NVLinks to NVSwitches; -1 unknown */
  unsigned switch_version; /* NVML version of those links (0 unknown) */
  topo_mig_info mig;       /* MIG partitions (NVML); mode -1 unknown */
} topo_gpu;

struct topo_info {
  hwloc_topology_t t;
  char host[256];
  char backend[32];        /* how this topology was obtained: Linux, XML, Synthetic */
  char source_backend[32]; /* the root's Backend info (an XML keeps its origin's) */
  char arch[64];
  char hwloc_version[32];
  char sysfs_root[1024];   /* "" when sysfs was not read */
  int thissystem;
  int npkgs, nnuma, ncores, npus;
  char pkg_model[TOPO_MAX_PKGS][128];
  struct { unsigned os_index; unsigned long long mem; char cpuset[256]; } numa[TOPO_MAX_NUMA];
  char allowed_cpuset[256]; /* what this process may use (cgroup, Slurm); volatile */
  char bound_cpuset[256];   /* this process's current binding (this machine only); volatile */
  char complete_cpuset[256];
  int ngpus, nnics;
  topo_gpu gpu[TOPO_MAX_GPUS];
  topo_nic nic[TOPO_MAX_NICS];
  char nvlink_source[16];  /* "nvml", "hwloc", "unknown" */
  int *nvlinks;            /* ngpus x ngpus link counts (NULL when unknown) */
  unsigned *nvversion;     /* ngpus x ngpus NVML link version (0 unknown) */
  unsigned char *nvvia;    /* ngpus x ngpus: 1 when the links go through NVSwitches */
  char nvml_note[256];
  char warnings[1024];
  char hash[32];
};

topo_path_class topo_path(const topo_info *ti, const topo_pcidev *a, const topo_pcidev *b,
                          int nvl, int *links);
/* topo_xml.c. The filters and flags of every load (before hwloc_topology_load). */
void topo_hwloc_prepare(hwloc_topology_t t);
/* Refuses, with the reason, an XML that hwloc 2.9 is known not to survive (found by fuzzing). */
int topo_xml_sane(const char *path, char *err, size_t errcap);
/* Loads path in a child process and sets t (prepared, not loaded) to read hwloc's export of it:
 * a child that aborts, crashes or hangs is an error here, never a dead process. */
int topo_xml_isolated(hwloc_topology_t t, const char *path, char *err, size_t errcap);
/* Appends a warning ("; "-separated). */
void topo_warn(topo_info *ti, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The canonical, volatile-free description that the hash is taken of (caller frees). */
char *topo_canonical(const topo_info *ti);

#endif
