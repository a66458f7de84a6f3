/* accept: the rules of `fabench accept`, their judging against run directories, the suspects
 * and the outputs. Private to bench/ (accept_rules.c, accept_judge.c, accept_name.c,
 * accept_out.c; the command is cmd_accept.c). */
#ifndef FABENCH_ACCEPT_H
#define FABENCH_ACCEPT_H

#include <stddef.h>
#include <stdint.h>

#define ACC_ARGS_MAX 64   /* words of a rule's run */
#define ACC_DIRS_MAX 32   /* run directories a rule is judged on (its repeats) */
#define ACC_NAME_MAX 64
#define ACC_PATH_MAX 4096
#define ACC_TEXT_MAX 512
#define ACC_REPEAT_MAX 20

/* What a rule measures: a figure of a command's rows (the worst of the rows it selects). */
typedef enum {
  ACC_M_BUSBW, ACC_M_ALGBW, ACC_M_TIME_P50, ACC_M_TIME_P99, /* allreduce.csv */
  ACC_M_BW, ACC_M_BIBW, ACC_M_LATENCY, ACC_M_LATENCY_P99,   /* p2p.csv */
  ACC_M_IMAGES,                                             /* train.csv */
  ACC_M_NONE                                                /* topo: the expectations alone */
} acc_metric;
/* A metric's quantity: rates in GB/s, times in us, throughput in images/s. */
typedef enum { ACC_Q_RATE, ACC_Q_TIME, ACC_Q_IMAGES } acc_quantity;
/* What a threshold is relative to. */
typedef enum { ACC_REF_ABS, ACC_REF_LINK, ACC_REF_MODEL, ACC_REF_REFERENCE, ACC_REF_NODES } acc_ref;

typedef struct {
  char name[ACC_NAME_MAX];
  int line;                    /* of the rule in the rules file (1-based) */
  char run[ACC_TEXT_MAX];      /* as written */
  char *argv[ACC_ARGS_MAX];    /* its words (argv[0] the command), into argstore */
  int argc;
  char argstore[ACC_TEXT_MAX];
  acc_metric metric;
  int at_least;                /* 1: value >= threshold; 0: value <= threshold */
  acc_ref ref;
  double value;                /* ACC_REF_ABS: in the metric's unit (GB/s, us, images/s); else the factor */
  char threshold_text[128];    /* as written */
  char transport[32], algo[32];/* row selection ("": any) */
  int64_t bytes;               /* row selection (0: the largest size for rates and images, the smallest for times) */
  int repeat;                  /* measurements a failing rule is judged on (1: no repeat) */
} acc_rule;

typedef struct {
  char path[ACC_PATH_MAX];      /* the rules file */
  char model[ACC_PATH_MAX];     /* model.json for `x model` ("": none), resolved from the file's folder */
  char reference[ACC_PATH_MAX]; /* a reference run directory for `x reference` ("": none) */
  int gpus;                     /* expected GPUs per host (-1: not stated) */
  double nic_gbit;              /* expected NIC speed, Gbit/s (0: not stated) */
  int pcie_width;               /* expected PCIe link width of every GPU and NIC (0: not stated) */
  acc_rule *rules;
  int n;
} acc_rules;

/* Reads a rules file (YAML). 0, or -1 with err as "FILE:LINE: key 'K': why" (2 is the exit
 * status the command gives it). */
int acc_rules_load(acc_rules *r, const char *path, char *err, size_t cap);
void acc_rules_free(acc_rules *r);
/* The metric's name, its quantity and its unit's name. */
const char *acc_metric_name(acc_metric m);
acc_quantity acc_metric_quantity(acc_metric m);
const char *acc_quantity_unit(acc_quantity q);
/* "10 GB/s", "20us", "500 images/s": a number with a unit of quantity q, in q's unit. 0 or -1. */
int acc_parse_quantity(const char *s, acc_quantity q, double *out);

/* ---- hostlists (accept_out.c) ---- */
/* Slurm's compressed form of hosts: "node[03,17]", "node[01-03],login1". Sorted, duplicates
 * dropped. Returns the length written (truncated to cap) or -1 out of memory. */
int acc_hostlist_compress(char *const *hosts, int n, char *out, size_t cap);
/* Expands "node[01-03,07],login1" into *hosts (malloc'd array of malloc'd names; free with
 * acc_hostlist_free). Returns the count, or -1 for a malformed list (err says where). */
int acc_hostlist_expand(const char *list, char ***hosts, char *err, size_t cap);
void acc_hostlist_free(char **hosts, int n);

/* ---- judging (accept_judge.c) ---- */
typedef struct {
  char kind[8];                 /* "host", "link" or "rank" (a straggler) */
  char host[256];               /* the host (a link's source where kind is link) */
  char link[520];               /* "a->b" for a link, "" for a host */
  int rank;                     /* a rank on that host (-1: not known) */
  double ratio;                 /* its figure over the median (1: not a figure: topology) */
  double score;                 /* higher: more suspect */
  char evidence[ACC_TEXT_MAX];
  /* where it came from a p2p rule: the rule, a pair of ranks to retest it alone (a link's own;
   * a host's link to a host not named; -1: none), and the bound it lies beyond */
  char rule[ACC_NAME_MAX];
  int pair_src, pair_dst;
  double median, limit;
  int higher_worse;
  int runs;                     /* the runs its figures are medians over (0: not a figure) */
} acc_suspect;

typedef struct {
  const acc_rule *rule;         /* NULL: the topology's testcase */
  char name[ACC_NAME_MAX];
  int measured;                 /* a measurement was there to judge */
  int pass;
  int error;                    /* could not measure (exit status 3) */
  double value, threshold;      /* judged value and its threshold (NaN: none) */
  double spread;                /* (max - min) / median over the repeats (NaN: one run) */
  int nvalues;
  double values[ACC_DIRS_MAX];
  char where[ACC_TEXT_MAX];     /* which row, host or link gave the value */
  char evidence[ACC_TEXT_MAX];  /* why it passed or failed, in a line */
  char dirs[ACC_DIRS_MAX][ACC_PATH_MAX];
  int ndirs;
  double seconds;               /* measuring time (0 with --from) */
} acc_result;

typedef struct {
  const acc_rules *rules;
  char **exclude;               /* hosts left out */
  int nexclude;
} acc_ctx;

/* snprintf that may cut its text short (evidence lines quote paths of any length). */
void acc_say(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A point judged: a row of a run (or a host, for `x median of nodes`). */
typedef struct {
  double value, thr, pred;      /* pred: the model's figure for it (NaN: none) */
  char src[256], dst[256];      /* a p2p row's hosts ("": not a p2p row); a host point: src */
  int src_rank, dst_rank;
  char where[ACC_TEXT_MAX];
} acc_pt;
typedef struct {
  acc_pt *pt;
  int n, cap;
} acc_pts;
acc_pt *acc_pts_add(acc_pts *p); /* a zeroed point (pred NaN), or NULL out of memory */
void acc_pts_free(acc_pts *p);
int acc_host_excluded(const acc_ctx *c, const char *host);
/* The link's rate a run recorded in GB/s (its emulated rate, else its fastest NIC); NaN: unknown. */
double acc_link_gbs(const char *dir);
/* The points of a rule in one run directory (the rows it selects; model may be NULL). 0; -1
 * with why when the directory cannot be read (could not measure), -2 when it was measured and
 * fails (wrong elements, a failed run or training). */
struct res_costmodel;
int acc_dir_points(const acc_ctx *c, const acc_rule *r, const char *dir, const struct res_costmodel *m, acc_pts *p,
                   char *why, size_t cap);

/* Judges a rule on its run directories (res->dirs, res->ndirs, filled by the caller). */
void acc_judge_rule(const acc_ctx *c, acc_result *res);
/* The topology's testcase over every directory judged: the rules' expectations and the
 * majority's topo_hash; hosts that differ become suspects. */
void acc_judge_topology(const acc_ctx *c, const acc_result *res, int nres, acc_result *topo, acc_suspect **sus,
                        int *nsus);
/* Suspects from the per-link figures of the p2p rules' directories (accept_name.c): hosts whose
 * links' median is a robust outlier among the hosts, then links not explained by a named host.
 * Appends to *sus. */
void acc_name_suspects(const acc_ctx *c, const acc_result *res, int nres, acc_suspect **sus, int *nsus);
/* Stragglers (accept_strag.c): from each train rule's last run (train_steps.csv) and each
 * all-reduce or collective rule's (coll_ranks.csv), the rank the others waited for, named as a
 * suspect of kind "rank" where their wait is at least a tenth of the step (call) and its own at
 * most a third of theirs. Appends to *sus. */
void acc_name_stragglers(const acc_result *res, int nres, acc_suspect **sus, int *nsus);
/* Robust outliers (accept_name.c): of x[0..n), the indexes whose value lies below the median
 * (above where higher is worse) by more than max(k x 1.4826 x MAD, min_rel x median). Marks
 * out[i] = 1; returns the count and the median in *med. */
int acc_outliers(const double *x, int n, int higher_worse, double *med, int *out);
/* The bound acc_outliers holds figures to: the distance from the median beyond which one is an
 * outlier, for these figures (n >= 3). */
double acc_outlier_limit(const double *x, int n, int higher_worse, double *med);
/* Appends a suspect (score: higher is more suspect; a topology that differs scores 1). 0 or -1. */
int acc_suspect_add(acc_suspect **sus, int *nsus, const char *kind, const char *host, const char *link, int rank,
                    double ratio, double score, const char *evidence);
/* Sorts suspects, most suspect first. */
void acc_suspects_sort(acc_suspect *s, int n);

/* ---- outputs (accept_out.c) ---- */
/* The table on stdout. */
void acc_print(const acc_result *res, int nres, const acc_suspect *sus, int nsus);
/* accept.json, accept.xml and suspects.txt in dir. 0, or -1 with err. */
int acc_write(const char *dir, const acc_rules *rules, const acc_result *res, int nres, const acc_suspect *sus,
              int nsus, int status, double seconds, char *err, size_t cap);

#endif
