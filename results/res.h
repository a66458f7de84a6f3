/* results: record tables (CSV + JSON Lines), run directories, run metadata, the cost model
 * fit and predictions. Files, JSON files, statistics and the clock are util.h's.
 * results knows nothing of how a figure was measured; benches hand it rows. */
#ifndef FABENCH_RES_H
#define FABENCH_RES_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

#include "coll.h" /* coll_model: the fitted model is collectives' type, which `auto` takes */

#define RES_SCHEMA_VERSION 1

/* ---- tables: one CSV and one JSONL file with the same rows, flushed row by row ---- */
typedef enum { RES_STR, RES_INT, RES_F64 } res_kind;
typedef struct {
  const char *name;
  res_kind kind;
} res_col;

typedef struct res_table res_table;

/* Creates <dir>/<base>.csv and <dir>/<base>.jsonl and writes the CSV header. */
int res_table_open(res_table **out, const char *dir, const char *base, const res_col *cols,
                   size_t ncols, char *err, size_t errcap);
/* Values are given in column order, one call per column, then res_row_end writes and flushes
 * the row to both files. A wrong count or kind is an error (reported at res_row_end). */
void res_row_str(res_table *t, const char *v);
void res_row_int(res_table *t, int64_t v);
void res_row_f64(res_table *t, double v);
int res_row_end(res_table *t, char *err, size_t errcap);
void res_table_close(res_table *t);

/* ---- records: columns defined once (res_rec.h), commands fill a struct ---- */
typedef struct {
  const char *name;
  res_kind kind;
  size_t offset; /* of the field in the record's row struct */
  int optional;  /* added after the record's first files: a file may lack it (res_rec.h) */
} res_field;
typedef struct {
  const char *base;       /* file base name: <base>.csv, <base>.jsonl */
  int version;            /* schema version the columns belong to */
  const res_field *fields;
  size_t nfields;
  size_t row_size;        /* sizeof the row struct */
} res_schema;

#include "res_rec.h" /* the records: res_<rec>_row and res_schema_<rec>() */

/* A row with every F64 NaN (written as not measured), every INT 0 and every STR NULL. */
void res_row_init(const res_schema *s, void *row);
/* Creates <dir>/<base>.csv and <dir>/<base>.jsonl for the record and writes the CSV header. */
int res_table_open_schema(res_table **out, const char *dir, const res_schema *s, char *err,
                          size_t errcap);
/* The same with append 1: where <dir>/<base>.csv exists with this record's header, the rows go
 * after those the files hold (a continued run); a CSV with another header is refused. */
int res_table_open_schema_mode(res_table **out, const char *dir, const res_schema *s, int append, char *err,
                               size_t errcap);
/* Writes and flushes one row (a res_<rec>_row of the table's record) to both files. NULL
 * strings are written as empty, non-finite F64 as an empty CSV field and JSON null. */
int res_table_put(res_table *t, const void *row, char *err, size_t errcap);

/* Rows read back from a record's CSV or JSONL file. */
typedef struct {
  const res_schema *schema;
  void *rows; /* n rows of schema->row_size bytes: a res_<rec>_row array */
  size_t n;
} res_rows;
/* Reads a record's rows from path: a run directory (<base>.csv, else <base>.jsonl) or a
 * .csv/.jsonl file, columns matched by name; an optional column the file lacks reads as NaN, 0
 * or "". An error names the file: a missing required or unknown column, a malformed value, a
 * schema newer than s->version (a row's or run.json's), or a run.json beside it that is not an
 * object with a whole schema number. Strings are owned by out; free with res_rows_free. */
int res_table_read(res_rows *out, const res_schema *s, const char *path, char *err,
                   size_t errcap);
void res_rows_free(res_rows *r);
/* Moves src's rows to the end of dst (same record; dst may start zeroed). src is left empty. */
int res_rows_move(res_rows *dst, res_rows *src, char *err, size_t errcap);
/* Whether path holds the record's file (a directory with <base>.csv or .jsonl, or a file). */
int res_table_exists(const res_schema *s, const char *path);
/* Reads a run directory's tables: for each of the n schemas whose file dir holds, its rows are
 * appended to rows[k] (zeroed, or holding rows of schemas[k]). Returns how many tables were
 * read, or -1 with err (rows keep what was read before: res_rows_free each). */
int res_run_read(res_rows *rows, const res_schema *const *schemas, size_t n, const char *dir,
                 char *err, size_t errcap);
/* Checks a run directory's run.json, when it has one: a JSON object whose schema is a whole
 * number from 1 to RES_SCHEMA_VERSION. 1 when there is none, 0 when it is good, -1 with err
 * naming the file otherwise. run_id (may be NULL) gets its run_id ("" when none). */
int res_run_meta_check(const char *dir, char *run_id, size_t idcap, char *err, size_t errcap);
/* Keeps the first of the run directories in dirs[0..*ndirs) that name the same run: the same
 * directory however spelled (realpath), or the same run_id in run.json (a copy). The order
 * stays; *ndirs shrinks. note (may be NULL) gets one line naming those left out, "" when none.
 * Returns how many were left out. */
int res_run_dirs_unique(char **dirs, int *ndirs, char *note, size_t notecap);
/* Removes the rows whose measure is negative or not a number: not a measurement (NaN is what the
 * writer leaves for one not measured; a negative one is damage). The measure is an all-reduce
 * row's median time (t_p50_us), a p2p latency row's t_p50_us and another p2p row's rate (gbps);
 * other records are left as they are. Order kept; returns how many were removed. */
size_t res_rows_drop_untimed(res_rows *t);
/* A colls.csv row: the all-reduce row's columns (its strings borrowed), then the collective's
 * name, broadcast's root and all-to-all's imbalance. */
void res_colls_row_of(res_colls_row *c, const res_allreduce_row *a, const char *coll, int64_t root, double imbalance);

/* ---- run directory and metadata ---- */
/* Makes the run directory: `out` if given, else results/<UTC YYYYmmddTHHMMSSZ>-<command>.
 * Parents are created. Writes the chosen path into dir (cap bytes). */
int res_run_dir(char *dir, size_t cap, const char *out, const char *command, char *err,
                size_t errcap);
/* A run id: UTC timestamp plus random hex, unique enough to join CSVs of several runs. */
void res_run_id(char *id, size_t cap);
/* Starts run.json's object with the fields every command records: schema, run_id, command,
 * argv, fabench version, start time, hostname, and a filtered environment (FABENCH_*, OMPI_*,
 * UCX_*, NCCL_*, SLURM_*, OMP_*, HWLOC_*, CUDA_VISIBLE_DEVICES) without secrets: no variable
 * whose name holds TOKEN, SECRET, KEY, PASSWORD, PASSWD or CREDENTIAL (any case), nor Open MPI's
 * PSM key OMPI_MCA_orte_precondition_transports, nor any value or argument holding the job
 * token FABENCH_TOKEN. Caller adds more fields. */
cJSON *res_meta_new(const char *run_id, const char *command, int argc, char **argv);
/* Writes the object as <dir>/run.json (atomically: util_file_replace). */
int res_meta_write(const char *dir, const cJSON *meta, char *err, size_t errcap);

/* ---- run.json (res_run.c): the run as its command describes it; results writes the JSON ---- */
/* A host of a multi-host run: its topology stamp and the boot world's ranks on it. */
typedef struct {
  char host[256], topo_hash[32];
  int *ranks; /* owned by the res_run_desc */
  int nranks;
} res_run_host;
/* The world of a multi-rank command: strings and arrays are the res_run_desc's own (malloc'd,
 * freed by res_run_desc_free); rank_hosts and binding have `ranks` entries. */
typedef struct {
  int ranks, host_count;
  char *bootstrap, *library_versions;
  char **rank_hosts, **binding;
  double reduce_gbps; /* the reduction kernel's rate where the rows are measured (NaN: none) */
  char *emulated_fabric, *emulated_rate, *emulated_layout, *emulated_slow; /* NULL: none */
} res_run_world;
/* p2p's object. Strings are static. */
typedef struct {
  int on;
  const char *pairs;         /* "all", "rounds" or "one" */
  int src, dst;              /* the one pair (pairs "one") */
  double min_bytes, max_bytes, step_factor, window;
  double iters;              /* 0: time_per_size_s timed each size instead */
  double time_per_size_s;
  const char *status;        /* "running" until the end */
  int data_ok;               /* -1: not known yet */
} res_run_p2p;
/* train's object. Strings are the caller's and must live until the last res_run_write. */
typedef struct {
  int on;
  const char *model, *backend, *data, *input, *overlap_step, *grad_dtype, *gradients, *batch_norm;
  const char *resumed_from; /* NULL: not resumed */
  double params, bn_buffers, train_images, test_images, batch, global_batch, threads, rounds, seed;
  double bucket_mb, first_bucket_mb;
  int classes, ranks, overlap;
} res_run_train;
/* One pair's entry in train's results. */
typedef struct {
  char role[32], transport[32], algo[32], status[64];
  double steps, end_step, images_per_s, step_ms_p50, train_time_s;
  double test_acc;         /* NaN: not measured */
  double time_to_target_s; /* < 0: target not reached or none */
} res_run_train_result;
#define RES_RUN_FABRICS 32
/* A run's run.json, described: a command fills what it records and calls res_run_write after
 * each change (the file is rewritten whole). Sections not filled are left out. */
typedef struct res_run_desc {
  cJSON *base;               /* res_run_desc_init's: schema, run_id, command, argv, version, start
                                time, hostname, environment (res_meta_new) */
  char run_dir[4096];        /* "": not recorded */
  /* this host's topology (topo_host ""), or why it is missing (topology_error "") */
  char topo_host[256], topo_hash[32], topo_backend[32], topology_error[512];
  cJSON *topo_summary;       /* topo's summary, owned (NULL: none) */
  res_run_host *hosts;       /* owned; the key is written once has_hosts */
  int nhosts, has_hosts;
  res_run_world world;
  int has_world;
  struct {
    char key[48], fabric[256]; /* a transport's name, or "<transport>/intra": hier's inside hosts */
  } fabrics[RES_RUN_FABRICS];
  int nfabrics;
  /* allreduce's */
  int has_rounds;
  long rounds;
  int check;                 /* -1: not recorded */
  int beside_compute;
  res_run_p2p p2p;
  res_run_train train;
  res_run_train_result *results; /* owned (res_run_add_result) */
  int nresults;
  /* predict's: the fabrics and the compute profile it was given (NULL: not recorded) */
  const char *intra, *inter, *compute;
  const char *status;        /* the run's end (static; NULL: not yet) */
} res_run_desc;
/* Starts a description with the fields every command records (res_meta_new's, taken now).
 * 0, or -1 out of memory. */
int res_run_desc_init(res_run_desc *d, const char *run_id, const char *command, int argc, char **argv);
void res_run_desc_free(res_run_desc *d);
/* Adds a fabric to run.json's "fabrics" (copied; a full table drops it). */
void res_run_add_fabric(res_run_desc *d, const char *key, const char *fabric);
/* Adds a pair's entry to train's results (copied). 0, or -1 out of memory. */
int res_run_add_result(res_run_desc *d, const res_run_train_result *r);
/* Writes the description as <dir>/run.json (atomically: res_meta_write). */
int res_run_write(const char *dir, const res_run_desc *d, char *err, size_t errcap);
/* The command a run directory's run.json names, into cmd: 0, or -1 where there is no readable
 * run.json that names one. */
int res_run_command(const char *dir, char *cmd, size_t cap);

/* ---- the cost model fit (res_fit.c): alpha-beta-gamma per fabric and host count ---- */
#define RES_BUSY_MAX 16 /* a fabric's (ranks, size) points measured beside a load */
/* The share of a computing thread's pace an all-reduce of `bytes` on `ranks` took, and the
 * all-reduce's own pace beside it (the model's time over the measured; NaN: not known). */
typedef struct {
  int ranks;
  double bytes, loss, pace;
} res_busy;
/* One measured point against the fitted model. */
typedef struct {
  char algo[16];
  int ranks;
  int64_t bytes;
  double t_us, pred_us, resid; /* resid = (t - pred) / pred */
  int outlier;                 /* left out of the final fit */
} res_resid;
typedef struct {
  char fabric[160];    /* the rows' fabric string */
  char transport[16];
  int host_count;
  char topo[40];       /* the rows' topo_hash: the machine fitted on, so that two clusters with one
                          fabric string are fitted apart ("": not recorded) */
  char source[16];     /* "allreduce" (all three fitted from all-reduce rows) or "p2p" */
  coll_model m;
  int gamma_fixed;     /* gamma was not identified by the rows: the kernel's rate was used */
  double r2;           /* of the times (used rows) */
  double rms_rel;      /* root mean square relative residual (used rows) */
  size_t n, n_used;
  int64_t chunk_bytes; /* the all-reduce rows' pipelining unit (0: unknown) */
  double cpu_byte;     /* host CPU seconds per byte the host's ranks send (kernel, shaper and
                          library work, its reductions at the model's gamma apart): the median
                          over rows from 1 MiB with host_cpu_us (measured where no rank spun);
                          0: none. Only the training step's share of the cores uses it */
  /* what computing cores lost to the all-reduce, from rows measured beside a load
   * (compute_loss: allreduce --beside-compute), per ranks and size, sorted; the training
   * step's share of the cores takes it where it exceeds the share from cpu_byte */
  res_busy busy[RES_BUSY_MAX];
  int nbusy;
  res_resid *resid;
  size_t nresid;
  int learned;         /* its predictions carry what the formulas miss, learned from resid (the
                          non-outliers' ln(t / pred) per algorithm and rank count: m.curve) */
} res_fabric_cost;
typedef struct res_costmodel {
  res_fabric_cost *f;
  size_t n;
  double gamma_kernel; /* s/byte of the reduction kernel where measured, else NaN */
} res_costmodel;

/* Fits every (fabric, transport, host_count, topo_hash) of the rows: all-reduce rows by robust
 * least squares on relative residuals, p2p-only fabrics from one-way times, gamma from
 * gamma_kernel (s/byte; NaN: coll_model_default's) where the rows cannot tell it from beta. An
 * all-reduce fabric then learns what its formulas miss at the sizes fitted (unless
 * formulas_only). Either rows pointer may be NULL. Rules: docs/cost-model.md, "The fit". */
int res_fit(res_costmodel *out, const res_rows *allreduce, const res_rows *p2p, double gamma_kernel,
            char *err, size_t errcap);
/* An emulated fabric's shaper burst in bytes, as its run recorded it. */
typedef struct {
  char fabric[64];
  double bytes;
  double ceil_beta; /* seconds per byte of TCP payload its shaped links carry at most; 0: unknown */
} res_fit_burst;
/* The reduction kernel's rate a run recorded (run.json's reduce_gbps), by run_id. */
typedef struct {
  char run_id[128];
  double gamma_kernel; /* s/byte (NaN: not recorded) */
} res_fit_run;
/* res_fit with its options: the reduction kernel's rate, the cores of the rows' host (0:
 * unknown, no sharing modelled), the smallest size fitted (0: all), and the emulated fabrics'
 * shapers, whose short rows are left out and whose link is split into its ceiling and a CPU
 * cost where it fitted slower (a fabric not listed keeps every row and its fit). */
typedef struct {
  double gamma_kernel;
  int cores;
  int64_t min_bytes;
  const res_fit_burst *bursts;
  size_t nbursts;
  /* the runs' recorded kernel rates: a fabric's gamma_kernel is then the median over the runs
   * its rows came from (by their run_id) that recorded one, else gamma_kernel above; so adding
   * an unrelated run to the fit changes no fabric's fit */
  const res_fit_run *runs;
  size_t nruns;
  int formulas_only; /* learn nothing from the residuals: the formulas alone predict */
} res_fit_opts;
int res_fit_ex(res_costmodel *out, const res_rows *allreduce, const res_rows *p2p, const res_fit_opts *o,
               char *err, size_t errcap);
/* ---- the fit's inputs from run directories (res_fit_dirs.c) ---- */
/* The allreduce and p2p rows of run directories (either may come back empty; -1 if neither); the
 * rows with an untimed median are left out, said on stderr unless quiet. */
int res_fit_read_dirs(res_rows *ar, res_rows *pp, char *const *dirs, int ndirs, int quiet, char *err,
                      size_t cap);
/* The reduction kernel's cost per byte the runs with rows to fit (all-reduce or p2p) recorded
 * (run.json's reduce_gbps; the middle one over the directories), so that two fits of the same
 * rows agree; NaN where none did. */
double res_fit_dirs_gamma(char *const *dirs, int ndirs);
/* The CPU cores of the host a run directory was measured on (run.json's topology; 0: unknown). */
void res_fit_dir_host(const char *dir, int *cores);
/* The MTU of an emulated fabric's links when the run directory measured that fabric (0: not). */
int res_fit_dir_emu_mtu(const char *dir, const char *fabric);
/* What the run directories' run.json recorded that the fit needs: o->bursts, the emulated links'
 * shaper bursts (their ranks' FABENCH_EMU_BURST), and o->runs, each run's kernel rate
 * (reduce_gbps; none where o->gamma_kernel is NaN, fit --no-gamma-kernel), so that a fabric's
 * gamma comes from the runs that measured it.
 * -1 when out of memory. Release with res_fit_recorded_free. */
int res_fit_recorded(res_fit_opts *o, char *const *dirs, int ndirs);
void res_fit_recorded_free(res_fit_opts *o);
/* Fits run directories: their rows (res_fit_read_dirs) under o and what the runs recorded
 * (res_fit_recorded). */
int res_fit_dirs(res_costmodel *m, char *const *dirs, int ndirs, const res_fit_opts *o, int quiet, char *err,
                 size_t cap);
/* The bandwidth (GB/s, 1e9) a model gives one rank's link in a ring at this rank count: 1 /
 * max(beta, beta_cpu x the host's ranks per core it sends with, at least 1: the rate of large
 * vectors). NaN when zero. */
double res_costmodel_link_gbps(const coll_model *m, int ranks);
/* model.json: write, and read back from a file or a directory holding one. */
int res_costmodel_write(const res_costmodel *m, const char *path, char *err, size_t errcap);
int res_costmodel_read(res_costmodel *m, const char *path, char *err, size_t errcap);
/* The model of a fabric and transport (NULL: any) for rows of this host count and topology
 * hash (NULL or "": unknown): the same host count before another, and among those the same
 * machine before another (a model fitted on one cluster still prices another's rows where
 * that one has none of its own); NULL where the fabric has none. (Emulated links name one
 * fabric for every transport.) */
const res_fabric_cost *res_costmodel_find(const res_costmodel *m, const char *fabric,
                                       const char *transport, int host_count, const char *topo);
/* The CPU cores one of `nodes` nodes has: a real host its own (machine_cores); an emulated
 * node shares the machine's with the other emulated nodes' ranks, machine_cores / nodes for
 * nodes of as many ranks each. 0 where machine_cores is unknown (0). */
double res_node_cores(double machine_cores, int emulated, int nodes);
/* Is f an emulated link's fit (named emu-<rate> by bench/emulate.c): its nodes share one machine? */
int res_fabric_emulated(const res_fabric_cost *f);
/* The cores of the machine f's nodes ran on: an emulated fabric's nodes' together, else a host's. */
double res_machine_cores(const res_fabric_cost *f);
/* f as it prices ranks spread over host_count hosts: its hosts, and an emulated fabric's node
 * cores (the machine's, as fitted on f->m.hosts nodes, divided among host_count); a real link's
 * hosts keep their cores. */
void res_fabric_on_hosts(res_fabric_cost *f, int host_count);
/* f's name for tables and plots: its fabric, and where another entry of m has the same
 * fabric, transport and host count (another machine's), the first 8 digits of its topology
 * hash in brackets. Returns buf. */
const char *res_costmodel_label(const res_costmodel *m, const res_fabric_cost *f, char *buf, size_t cap);
void res_costmodel_free(res_costmodel *m);

/* ---- predictions (res_predict.c): pure functions of the model ---- */
/* One all-reduce as a job would run it: flat over one fabric, or hierarchical (ranks per node
 * > 1 and more than one node: a ring reduce-scatter inside the node, algo_inter across nodes
 * on 1/ranks_per_node of the bytes, a ring all-gather inside the node). */
typedef struct {
  const coll_model *intra; /* inside a node (also a flat run's fabric when inter is NULL) */
  const coll_model *inter; /* between nodes; NULL: one fabric, flat */
  coll_algo algo;          /* flat algorithm, or the one across nodes when hier */
  int hier;
  int ranks, ranks_per_node;
  size_t chunk_bytes;
} res_ar_spec;
/* Seconds of one all-reduce of `bytes` under the spec. A flat run over several nodes is
 * bound by the inter-node fabric (every ring crosses it). */
double res_allreduce_time(const res_ar_spec *s, double bytes);
/* The model's seconds for an all-reduce row (its algo_ran, else its algo): one fabric's
 * (coll_model_time), or both levels' (res_allreduce_time) where it ran across hosts of several
 * ranks; NaN without the fabrics, and for native and auto. formulas (may be NULL) gets the
 * formulas' time alone; learned_at (may be NULL) whether the model learned this very row's
 * algorithm, ranks and size (a two-level row learned nothing). A row on an emulated rate the
 * model did not fit is priced held out (res_fabric_at_rate). */
double res_allreduce_row_time(const res_costmodel *m, const res_allreduce_row *r, double *formulas, int *learned_at);
/* Does a row of algorithm a measure one fabric that the formulas price (not native, auto or
 * hier; on host_count hosts of at most ranks_per_host ranks, not two fabrics at once: several
 * hosts with several ranks each)? What fit learns from, and checks. */
int res_row_one_fabric(coll_algo a, int64_t host_count, int64_t ranks_per_host, int64_t ranks);
/* The fabrics that price a row of `fabric` and transport on host_count hosts of ranks_per_host
 * ranks (0: ranks / host_count): *inter the row's own fabric (res_costmodel_find); where there are
 * several hosts with several ranks each, also *intra, the same transport's fit on one host of
 * this machine (topo), not an emulated link, unmapped memory preferred (the ranks of one host
 * of a cluster map no buffers: algo_hier.c); else *intra NULL. 0, or -1 where the row's fabric
 * or the intra-node one is missing. */
int res_costmodel_levels(const res_costmodel *m, const char *fabric, const char *transport, int host_count,
                     int ranks_per_host, int ranks, const char *topo, const res_fabric_cost **intra,
                     const res_fabric_cost **inter);
/* The spec of a row's all-reduce of algorithm a on ranks over host_count hosts of
 * ranks_per_host (0: ranks / host_count) from res_costmodel_levels' two fabrics: hier as the
 * two-level algorithm where there are both, else as the ring on one host or its algorithm across
 * hosts of one rank each. 0, or -1 where a has no formula (native, auto). */
int res_ar_spec_for(res_ar_spec *s, const res_fabric_cost *intra, const res_fabric_cost *inter, coll_algo a,
                    int ranks, int host_count, int ranks_per_host);

typedef struct {
  double bytes;    /* the bucket's gradients */
  double ready_ms; /* from the start of backward until they are complete (one rank) */
} res_bucket;
typedef struct {
  double data_ms, fwd_ms, bwd_ms, opt_ms; /* one rank's step without communication */
  const res_bucket *buckets;              /* in the order the reducer reduces them */
  size_t nbuckets;
  int overlap;   /* buckets are reduced while backward runs (else all after it) */
  int overlap_step; /* the next step's forward starts before the reduction ends: it needs
                       each bucket when it reaches the bucket's layers (the first layers'
                       at once, the last layers' at its end), in proportion to when backward
                       had completed the bucket */
  double share;  /* the communication's CPU work on the compute's cores: the part of them a
                    reduction needs to keep its pace. While a bucket is reduced during
                    backward (or, with overlap_step, the next forward) the reduction gets that
                    up to half the cores, and the compute the rest (0: the reduction takes no
                    compute) */
  double pace;   /* the reduction's pace beside the compute, measured (0 < pace < 1), where
                    that is slower than the share of the cores gives it; else 0 */
  int batch;     /* images per rank per step */
  double meet_ms; /* of data_ms, the faster ranks' wait for the slowest: a profile of several
                     ranks meets at the step's end and counts the wait in the next step's data;
                     with an exchange they meet at the last bucket, as exposed communication */
  res_ar_spec ar;
} res_step_in;
typedef struct {
  double step_ms, comm_ms, exposed_comm_ms; /* comm_ms: the buckets' all-reduce time, summed */
  double bwd_ms;                            /* backward, stretched by the reduction beside it */
  double images_per_s;                      /* over all ranks */
  double scaling_eff;                       /* images/s over ranks x one rank's */
} res_step_out;
/* A data-parallel step: one communication thread reduces the buckets in order, each when it is
 * ready and the previous one is done; beside backward it takes `share` of the cores (half at
 * most; under half it runs at `pace` where that was measured slower) and backward the rest.
 * Exposed communication: from backward's end until the last bucket is reduced (overlap_step:
 * the forward's longest wait), at least the ranks' meeting (meet_ms); the wait for data hides
 * behind it (the loader has its own thread). */
void res_predict_step(res_step_out *out, const res_step_in *in);
/* The communication's CPU share for res_step_in.share: the part of an all-reduce of `bytes`
 * under the model that is host CPU work (cpu_beta per byte on the busiest link, or the host's
 * CPU bound beta_cpu, whichever is more; the gamma and cache terms), where the host's cores are
 * all busy computing (ranks x threads >= cores); 0 when cores are free or unknown. */
double res_comm_share(const coll_model *m, coll_algo a, int ranks, int threads, double bytes, size_t chunk_bytes,
                      double cpu_beta);
/* The prediction of a data-parallel train row (ranks > 1, a named algorithm) from a compute
 * profile row of the same model (one rank alone, or the same ranks with no exchange) and
 * train_buckets rows: the row's own run's bucket plan where given, else the profile's, each
 * bucket ready when the profile's backward had completed that much of the arena; no bucket
 * rows: bucket_mb and first_bucket_mb, ready evenly over backward. Fills step_ms_pred,
 * images_per_s_pred, exposed_comm_ms_pred and pred_err. 0, or -1 (fields untouched) when there
 * is nothing to predict. */
int res_predict_train_row(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                          const res_costmodel *m);
/* A data-parallel row's compute profile among train rows, as `train` takes it: its run's
 * no-communication row (role none) at the same rank count, the ranks sharing the cores as they
 * did; NULL if there is none. */
const res_train_row *res_train_profile(const res_rows *train, const res_train_row *r);
/* What bounds a data-parallel row, against the same ranks with no communication (none may be
 * NULL): the link where over a fifth of the step waits; where the step outgrew none's by over a
 * tenth, the larger of its losses: the wait (link) or the rest (cores, which the exchange's CPU
 * work takes from compute); else the compute. Steps compared by step_ms_mean (else step_ms);
 * *step and *base (may be NULL) get the two (NaN without none). */
typedef enum { RES_BOUND_COMPUTE, RES_BOUND_LINK, RES_BOUND_CORES } res_bound;
res_bound res_train_bound(const res_train_row *r, const res_train_row *none, double *step, double *base);
/* The same prediction on a link `factor` times faster than the row's fabric: its beta divided
 * by factor, but not below the smallest beta of the same transport on one host without
 * emulation in m (the stack's own cost per byte, which a faster link does not remove). For the
 * suite's "a 10gbit link would give ..." 0, or -1 (row untouched) as res_predict_train_row. */
int res_predict_train_row_link(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                               const res_costmodel *m, double factor);

/* ---- held-out pricing: stated rates, the step's CPU share, replay or held-out ---- */
/* What a prediction rests on. A replay prices a configuration whose all-reduce the model fitted
 * (the same fabric, host count, rank count and algorithm: its learned residuals apply); a
 * held-out prediction prices anything else from the fitted parameters alone. */
typedef enum { RES_PRED_HELDOUT, RES_PRED_REPLAY } res_pred_kind;
/* "replay" or "held-out": the pred_kind column's values. */
const char *res_pred_kind_name(res_pred_kind k);
/* Did fabric f's fit measure algorithm `algo` (as its rows name it) at `ranks` on `host_count`
 * hosts (its residuals, outliers apart)? Then a prediction of that configuration is a replay. */
int res_fabric_measured(const res_fabric_cost *f, const char *algo, int ranks, int host_count);
/* f on a link `factor` times faster (below 1: slower): beta / factor, but not below the
 * smallest beta of the same transport on one host of f's machine without emulation in m (the
 * stack's own cost per byte, which a faster link does not remove); the shaper's bucket scaled
 * alike. What f measured of its own link is left out: its learned residuals, its host CPU per
 * byte and what it lost beside a load. out->fabric names the rate where given (NULL: f's). */
void res_fabric_scaled(res_fabric_cost *out, const res_costmodel *m, const res_fabric_cost *f, double factor,
                       const char *fabric);
/* A stated link rate (bits/s) of a transport, unmeasured: the model's emulated fabric of that
 * transport nearest in rate (log scale; the same host count, then the same machine preferred),
 * scaled to it by res_fabric_scaled and named emu-<rate> where the rate is tc's (name may be
 * NULL). *src (may be NULL) gets the fitted fabric it came from. 0, or -1 where the model has
 * no emulated fabric of the transport. */
int res_fabric_at_rate(res_fabric_cost *out, const res_costmodel *m, const char *transport, int host_count,
                       const char *topo, double bps, const char *name, const res_fabric_cost **src);
/* res_predict_train_row on a link of bps (bits/s; 0: the row's own fabric) of the row's
 * transport: the row priced as a row of emulated fabric emu-<rate> (its fit where the model has
 * one, else held out by res_fabric_at_rate). pred_err is left NaN unless the row ran on that
 * rate. */
int res_predict_train_row_rate(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                               const res_costmodel *m, double bps);
/* The CPU cost of a byte on fabric f's link for the training step's share of the cores (on one
 * host without emulation beta; through an emulated link at least the same transport's loopback
 * cost and any emulated link's fitted CPU bound; a real link 0). */
double res_fabric_cpu_beta(const res_costmodel *m, const res_fabric_cost *f);
/* The training step of `in` on `ranks` ranks of `threads` compute threads each, the
 * communication's CPU share of the cores (in->share, in->pace) taken from fabric f, the bound
 * fabric of in->ar: its measured host CPU per byte, else its CPU terms with cpu_beta per link
 * byte (res_comm_share), raised to what it lost beside a load. The one pricing of a step that
 * `predict`, `train --model-from`, the suite and `report` share. */
void res_price_step(res_step_out *out, res_step_in *in, const res_fabric_cost *f, double cpu_beta, int ranks,
                    int threads);

/* ---- checks against measurements left out (res_check.c): the suite's side by side ---- */
/* view: m without its fabrics named `fabric` (every host count): what the model knows without
 * that fabric's rows, each fabric being fitted from its own. The entries are m's (shallow
 * copies): free view->f alone, never res_costmodel_free(view). 0, or -1 out of memory. */
int res_costmodel_without(res_costmodel *view, const res_costmodel *m, const char *fabric);
/* row (a data-parallel train row: its ranks, hosts, algorithm, model) priced on an emulated link
 * of bps by the model without any fabric at that rate (res_costmodel_without), so a measurement
 * at bps cannot enter its own prediction: from the nearest fitted rate scaled
 * (res_fabric_at_rate). Fills row's *_pred and pred_kind (held-out); *src (may be NULL) gets
 * the fitted fabric's name it came from (cap bytes). 0, or -1 as res_predict_train_row. */
int res_predict_train_row_heldout(res_train_row *row, const res_train_row *one, const res_rows *buckets,
                                  const res_costmodel *m, double bps, char *src, size_t cap);
/* The suite's held-out rate among its n emulated rates (bits/s): the geometric middle of the
 * slowest and fastest rounded to one significant digit, else to two, else their arithmetic
 * middle rounded to two; one rate alone: twice it. Never one of the rates; 0 where none
 * qualifies (no rates, or no rate between them apart from theirs). */
double res_middle_rate(const double *bps, int n);

/* ---- the scaling table (res_scaling.c): a cluster predicted from this machine's fit ---- */
/* One curve: nodes of ppn ranks, inside each the transport's fit on one host of this machine
 * (intra), between them inter: a fitted link (emulated, or a real cluster's) or a stated rate
 * (the nearest fitted rate of the transport scaled to it by res_fabric_at_rate, else this
 * stack's fit at that rate by res_fabric_scaled), its nodes having the machine's whole cores;
 * the flat ring or hier:ring. Every point past one node is held out. */
typedef struct {
  char label[400];             /* the plot's key: algorithm, inter-node fabric, held-out */
  char inter_name[160];
  const res_fabric_cost *intra; /* the model's */
  res_fabric_cost inter;       /* a copy (resid not owned: NULL) */
  double cpu_beta;             /* the CPU cost of a link byte (res_fabric_cpu_beta of its source) */
  int stated, hier;
} res_scale_curve;
typedef struct {
  res_scale_curve *c;
  size_t n;
  int ppn;
} res_scale_plan;
/* The curves for model m: per transport with a one-host fit, each of its fitted links and the
 * stated rates (bits/s), nodes of ppn ranks (the topology's cores or GPUs). One host's own
 * fabric is never the link between nodes. 0, or -1 out of memory. */
int res_scaling_plan(res_scale_plan *p, const res_costmodel *m, int ppn, const double *stated_bps, int nstated);
void res_scaling_plan_free(res_scale_plan *p);
/* The all-reduce of curve c at `ranks` (ppn a node): one node's ranks over the intra-node fabric
 * alone, more over both levels (s->inter set). Returns the fabric that bounds it, for
 * res_price_step's CPU share (c->inter past one node, its hosts set to the nodes). */
const res_fabric_cost *res_scaling_spec(res_scale_curve *c, int ppn, int ranks, res_ar_spec *s);

/* ---- ablation: the model's terms, each of which can be turned off ---- */
enum {
  RES_TERM_CURVES = 1u << 0, /* learned residuals (what the formulas miss) */
  RES_TERM_CPU = 1u << 1,    /* beta_cpu, the host's CPU bound on sending */
  RES_TERM_BURST = 1u << 2,  /* the shaper's banked bucket and hidden reductions */
  RES_TERM_SHARE = 1u << 3,  /* the training step's CPU share (host CPU per byte, loss beside a load) */
};
#define RES_TERMS_ALL 0xfu
/* The terms' names, in bit order: curves, cpu, burst, share. */
const char *res_term_name(unsigned bit);
/* A comma list of term names ("" or NULL: none) into a mask. 0, or -1 naming the bad one. */
int res_terms_parse(const char *list, unsigned *mask, char *err, size_t cap);
/* Turns the terms of mask off in every fabric of m: their parameters 0, the curves dropped. */
void res_costmodel_ablate(res_costmodel *m, unsigned mask);

/* ---- validation (res_validate.c): the leave-out design's split and arithmetic ---- */
/* A cell of fabench validate's grid: a link rate (bits/s), nodes of ranks_per_node ranks. */
typedef struct {
  double bps;
  int nodes, ppn;
} res_vcell;
/* What a cell holds out of a fit on the rates train_bps[0..ntrain) and up to max_nodes nodes:
 * "" (a training cell), "rate", "nodes" or "both". */
const char *res_validate_held(const res_vcell *c, const double *train_bps, int ntrain, int max_nodes);
/* (pred - meas) / meas; NaN where either is not a positive number. */
double res_validate_err(double pred, double meas);
/* Seconds to move an all-reduce's n bytes over the links at bps, nothing else counted: the ring's
 * 2 (p-1)/p n through each node's link, p the ranks (flat: the node-aware ring crosses each
 * link once each way) or the nodes (hier); 0 on one node. */
double res_validate_bytes_s(double bytes, const res_vcell *c, int hier);
/* The median and the largest of |v[i]| over the finite ones (NaN when none); *n their count. */
void res_validate_abs_stats(const double *v, size_t nv, double *median, double *worst, size_t *n);

#endif
