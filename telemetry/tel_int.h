/* telemetry's private parts: one reading of every counter (a snapshot), the readers of the
 * kernel's files and NVML, and the summary of two snapshots. */
#ifndef FABENCH_TEL_INT_H
#define FABENCH_TEL_INT_H

#include <stdint.h>

#include "tel.h"

#define TEL_MAX_LINKS 64
#define TEL_MAX_GPUS 16

/* a core's (or, as cpu[0], all cores') time in ms: user+nice, system, irq+softirq, idle+iowait,
 * steal */
enum { TEL_CPU_USER, TEL_CPU_SYSTEM, TEL_CPU_SOFTIRQ, TEL_CPU_IDLE, TEL_CPU_STEAL, TEL_CPU_N };
typedef struct {
  int num; /* -1: all cores ("cpu") */
  uint64_t ms[TEL_CPU_N];
} tel_cpu;

/* an interface or InfiniBand port; the names are the CSV's sources */
enum { TEL_RX_BYTES, TEL_TX_BYTES, TEL_RX_PACKETS, TEL_TX_PACKETS, TEL_RX_DROPS, TEL_TX_DROPS, TEL_LINK_N };
typedef struct {
  char name[80];  /* "net:eth0", "ib:mlx5_0/1" */
  int loopback;
  double rate_bps; /* its own rate (0: unknown) */
  uint64_t v[TEL_LINK_N];
} tel_link;

/* TCP, host-wide (per network namespace) */
enum { TEL_TCP_RETRANS, TEL_TCP_OUTSEGS, TEL_TCP_TIMEOUTS, TEL_TCP_LOST_RETRANS, TEL_TCP_N };

enum { TEL_GPU_UTIL, TEL_GPU_MEM_UTIL, TEL_GPU_MEM_USED, TEL_GPU_NVL_TX, TEL_GPU_NVL_RX, TEL_GPU_N };
typedef struct {
  int have[TEL_GPU_N];
  uint64_t v[TEL_GPU_N];
} tel_gpu;

typedef struct {
  double mono, wall; /* when read: monotonic and Unix time, seconds */
  int ncpu;          /* cpu[0] is all cores where have_cpu */
  int have_cpu;
  tel_cpu cpu[TEL_MAX_CPUS + 1];
  int nlink;
  tel_link link[TEL_MAX_LINKS];
  int have_tcp[TEL_TCP_N];
  uint64_t tcp[TEL_TCP_N];
  int ngpu;
  tel_gpu gpu[TEL_MAX_GPUS];
} tel_snap;

/* what is known of the host once, at start */
typedef struct {
  char root[1024];
  char ib[TEL_MAX_LINKS][80]; /* "mlx5_0/1": the ports found */
  double ib_rate[TEL_MAX_LINKS];
  int nib;
  char rate_name[TEL_MAX_LINKS][32]; /* interfaces whose speed was looked up, and it */
  double rate[TEL_MAX_LINKS];
  int nrate;
  long user_hz;
  char *buf; /* a file being parsed (TEL_FILE_MAX bytes) */
} tel_src;

/* ---- the kernel's files (tel_read.c) ---- */
/* What the root has: its InfiniBand ports (and their rates). */
void tel_src_init(tel_src *s, const char *root);
void tel_src_free(tel_src *s);
/* Every counter of the kernel's files into snap (cleared first); a missing file is left out.
 * 0, or -1 with err naming the first malformed file (its counters are left out). */
int tel_read_kernel(tel_src *s, tel_snap *snap, char *err, size_t errcap);

/* ---- NVML (tel_nvml.c) ---- */
typedef struct tel_nvml tel_nvml;
/* NULL where the library, a GPU or nvmlInit is missing: no GPU counters, not an error. */
tel_nvml *tel_nvml_open(const char *lib);
void tel_nvml_read(tel_nvml *n, tel_snap *snap);
void tel_nvml_close(tel_nvml *n);

/* ---- the summary (tel_sum.c) ---- */
void tel_summarise(const tel_snap *a, const tel_snap *b, const tel_opts *o, tel_summary *s);

#endif
