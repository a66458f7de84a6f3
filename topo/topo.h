/* topo: what a node has (hwloc, sysfs, NVML), how its devices sit, and binding near them. */
#ifndef FABENCH_TOPO_H
#define FABENCH_TOPO_H

#include <stddef.h>
#include <stdio.h>
#include <cjson/cJSON.h>

#define TOPO_SCHEMA_VERSION 1

/* The identity of one host's topology, stamped on every result row. */
typedef struct {
  char host[256];
  char hash[32];    /* hash of the topology without volatile fields; identical nodes share it */
  char backend[32]; /* how it was obtained: "Linux", "XML", "Synthetic" */
} topo_stamp;

/* Detects this host, writes <dir>/topo-<host>.xml, and returns the stamp and the topology JSON
 * (caller frees; schema "fabench-topo" version TOPO_SCHEMA_VERSION) for topo.json and
 * run.json's topology.summary. Never fails for want of GPUs, NICs or NVML. */
int topo_record(const char *dir, topo_stamp *stamp, cJSON **summary, char *err, size_t errcap);

/* ---- detection ---- */
typedef struct topo_info topo_info;

enum { TOPO_NVML_AUTO = 0, TOPO_NVML_OFF, TOPO_NVML_ON };
typedef struct {
  const char *xml;        /* an hwloc XML file instead of this machine (NULL: this machine) */
  const char *synthetic;  /* or an hwloc synthetic description ("pack:2 core:4 pu:2") */
  const char *sysfs_root; /* root of /sys for our readers; NULL: "/" for this machine, none
                           * (all link state unknown) for XML or synthetic input */
  const char *nvml_lib;   /* NULL: "libnvidia-ml.so.1" */
  int nvml;               /* AUTO: only for this machine; ON: also for XML input (tests) */
} topo_opts;

/* Loads and analyses a topology. o may be NULL (this machine, defaults). */
int topo_load(topo_info **out, const topo_opts *o, char *err, size_t errcap);
void topo_free(topo_info *ti);
void topo_get_stamp(const topo_info *ti, topo_stamp *st);
/* The versioned JSON description (caller frees). */
cJSON *topo_json(const topo_info *ti);
/* Readable summary plus the GPU/NIC path matrix (nvidia-smi topo -m style). */
void topo_print(FILE *f, const topo_info *ti);
/* The path between two GPUs given by PCI bus id ("0000:17:00.0"), named as nvidia-smi topo -m
 * names it ("X", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS"); -1 when either is not here. */
int topo_gpu_path(const topo_info *ti, const char *bus_a, const char *bus_b, char *out, size_t cap);
/* The PCIe link of that GPU at its maximum generation and width (sysfs, else NVML), and the
 * GB/s it carries each way after line encoding (Gen5 x16: 63.0); -1 (gen, width -1) unknown. */
double topo_gpu_pcie_gbs(const topo_info *ti, const char *bus, int *gen, int *width);
/* 1 when a NIC of the topology is InfiniBand or RoCE. */
int topo_has_ib(const topo_info *ti);
/* hwloc's XML of the topology. */
int topo_write_xml(const topo_info *ti, const char *path, char *err, size_t errcap);

/* ---- binding ---- */
typedef enum { TOPO_BIND_NONE = 0, TOPO_BIND_CORE, TOPO_BIND_NUMA, TOPO_BIND_NIC,
               TOPO_BIND_GPU, TOPO_BIND_AUTO } topo_bind_kind;
/* Parses "none|core|numa|nic|gpu|auto"; -1 with a message in err for anything else. */
int topo_bind_parse(const char *how, topo_bind_kind *kind, char *err, size_t errcap);
/* Binds the calling process (all its threads) for local rank local_rank of local_size:
 *   core: one allowed core, ranks spread evenly (shared round robin past the core count);
 *   numa: the cpus of one NUMA node, ranks spread evenly over nodes;
 *   nic:  the cpus nearest the NIC named by hint ("mlx5_0", "eth0"), else NIC local_rank % n;
 *   gpu:  the cpus nearest the GPU given by hint (index "3" or PCI "0000:17:00.0"), else GPU
 *         local_rank % n;
 *   none: nothing;
 *   auto: `threads` allowed cores of its own, the ranks in order, where local_size x threads
 *         fit the allowed cores and the process is not bound already (a launcher's binding is
 *         kept); else nothing, and desc says why ("auto: none (4 rank(s) x 1 thread(s) on 2
 *         core(s))"). A topology that is not this machine's gives nothing, not an error.
 * Always intersected with the allowed cpuset. desc receives what was actually got, read back
 * with get_cpubind, e.g. "core:3 cpuset=0x00000008 cpus=3". Returns 0 or -1 (err). */
int topo_bind(const char *how, int local_rank, int local_size, int threads, const char *hint, char *desc,
              size_t desccap, char *err, size_t errcap);

#endif
