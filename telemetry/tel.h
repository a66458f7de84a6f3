/* telemetry: what a host's CPUs, network interfaces, InfiniBand ports and GPUs did while a
 * measurement ran. A sampler thread reads the kernel's counters (/proc/stat, /proc/net/dev,
 * /proc/net/snmp, /proc/net/netstat, /sys/class/infiniband) and NVML's (loaded at run time, where
 * present) at a rate, into a CSV of raw cumulative counters; marks around a measurement give its
 * summary: link utilisation, CPU busy per core, retransmits, and which of them bound it.
 * The files and the verdict's thresholds are described in docs/records.md. */
#ifndef FABENCH_TEL_H
#define FABENCH_TEL_H

#include <stddef.h>

#define TEL_MAX_CPUS 512 /* cores summarised one by one; more are counted in the whole */

/* The verdict's default thresholds (tel_opts: 0 takes them). */
#define TEL_LINK_BOUND_UTIL 0.70 /* the busiest link carried at least this share of its rate */
#define TEL_CPU_BOUND_BUSY 0.90  /* all cores together at least this busy */
#define TEL_CORE_BOUND_BUSY 0.95 /* or one core at least this busy */

typedef struct {
  const char *root;     /* where proc/ and sys/ are read (NULL: "/"); tests give a fake tree */
  double hz;            /* samples a second by the thread; 0: no thread, the marks alone */
  const char *csv_path; /* the samples' CSV, created (NULL: none is written) */
  const char *host;     /* its host column (NULL: this host's name) */
  double link_bps;      /* the rate links are judged against, bits/s (0: each link's own, from
                           /sys/class/net/IF/speed or the InfiniBand port's rate) */
  const char *nvml;     /* NVML library to load (NULL: libnvidia-ml.so.1; "": no GPU counters) */
  double link_bound;    /* thresholds; 0: the defaults above */
  double cpu_bound, core_bound;
} tel_opts;

/* One marked measurement, from the counters read at its begin and end marks. A figure that
 * could not be read (no such file, or no link with a known rate) is NaN. */
typedef struct {
  char label[64];
  double secs;          /* between the marks */
  char link[80];        /* the busiest link other than loopback: "net:eth0", "ib:mlx5_0/1" ("": none) */
  double link_bits_s;   /* its traffic in the busier direction, bits/s */
  double link_bps;      /* the rate it is judged against: tel_opts.link_bps, else its own */
  double link_util;     /* the largest bits/s over rate among the links with a known rate */
  double cpu_busy;      /* all cores: (user, nice, system, irq, softirq) over all but steal */
  double cpu_busy_max;  /* the busiest core's */
  int cpu_busiest;      /* its number (-1: none read) */
  int ncpus;            /* cores in core_busy */
  double core_busy[TEL_MAX_CPUS];
  double retrans;       /* TCP segments retransmitted (RetransSegs), host-wide */
  double out_segs;      /* TCP segments sent (OutSegs) */
  double drops;         /* packets the interfaces dropped, both directions, loopback left out */
  const char *verdict;  /* "link-bound", "cpu-bound" or "neither" (link first: a spinning wait
                           makes a core busy, not the link) */
} tel_summary;

/* What a sampler did, told at its stop. */
typedef struct {
  long samples;   /* by the thread */
  double cpu_s;   /* the thread's own CPU time */
  double wall_s;  /* from start to stop */
  char error[256]; /* the first file that could not be parsed or written ("": none) */
} tel_stats;

typedef struct tel tel;

/* Starts the sampler (a thread when o->hz > 0): reads what sources the root has, loads NVML,
 * creates the CSV and writes its header. 0, or -1 with err. */
int tel_start(tel **out, const tel_opts *o, char *err, size_t errcap);
/* Reads every counter now (the measurement's start, written to the CSV with the label) and
 * labels the samples after it. A source missing is left out; a malformed one gives -1 with err,
 * the others read. */
int tel_mark_begin(tel *h, const char *label, char *err, size_t errcap);
/* Reads every counter now and summarises since tel_mark_begin into *s. 0, or -1 with err (a
 * malformed source, whose figures are NaN; or no mark begun). */
int tel_mark_end(tel *h, tel_summary *s, char *err, size_t errcap);
/* Stops the thread, closes the CSV and unloads NVML; st (may be NULL) gets what it did. h may be
 * NULL. */
void tel_stop(tel *h, tel_stats *st);

/* The verdict for figures (NaN: unknown) and thresholds (o may be NULL: the defaults). */
const char *tel_verdict(double link_util, double cpu_busy, double cpu_busy_max, const tel_opts *o);

#endif
