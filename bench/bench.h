/* bench: the `fabench` command. Private to bench/: subcommands and the helpers they share. */
#ifndef FABENCH_BENCH_H
#define FABENCH_BENCH_H

#include <stddef.h>
#include <getopt.h> /* struct option */
#include <stdint.h>
#include <cjson/cJSON.h>

#include "coll.h"   /* coll_transport_kind */
#include "launch.h" /* launch_own */
#include "res.h"    /* res_run_desc: run.json, described */

/* Subcommands: each returns the process exit status (0 ok, 1 failure, 2 usage error). */
int bench_cmd_allreduce(int argc, char **argv);
int bench_cmd_reducescatter(int argc, char **argv);
int bench_cmd_allgather(int argc, char **argv);
int bench_cmd_bcast(int argc, char **argv);
int bench_cmd_alltoall(int argc, char **argv);
int bench_cmd_p2p(int argc, char **argv);
int bench_cmd_train(int argc, char **argv);
int bench_cmd_topo(int argc, char **argv);
int bench_cmd_suite(int argc, char **argv);
int bench_cmd_fit(int argc, char **argv);
int bench_cmd_predict(int argc, char **argv);
int bench_cmd_report(int argc, char **argv);
int bench_cmd_validate(int argc, char **argv);
int bench_cmd_accept(int argc, char **argv);

/* ---- parsing: each returns 0 or -1 (never prints) ---- */
/* The largest size (and train's seed): 8 PiB, beyond any buffer, exact in run.json's numbers,
 * and far enough from 2^64 that sizes stepped up from it cannot wrap. */
#define BENCH_SIZE_MAX (1ull << 53)
/* "8", "64K", "1M", "2G" (powers of two) up to BENCH_SIZE_MAX; "1.5M", " 8", "+8", "-8" not
 * allowed. */
int bench_parse_size(const char *s, uint64_t *out);
/* Digits with an optional '-' (no space, '+' or other base), min..max. */
int bench_parse_int(const char *s, long min, long max, long *out);
/* A finite decimal number ("0.5", "1e-3"; not "nan", "inf", hex or space), min..max. */
int bench_parse_double(const char *s, double min, double max, double *out);
/* A name of 1..maxlen characters from [a-z0-9_-] (a congestion control, ...). */
int bench_parse_name(const char *s, size_t maxlen);
/* Splits a comma list into at most max items (pointers into a strdup'd copy in *store): their
 * count, 0 for "", -1 where an item is empty ("8,,64", "ring,") or there are more than max. */
int bench_split_list(const char *s, char **items, int max, char **store);

/* One-line error and the usage on stderr; returns 2 (the exit status for bad usage). */
int bench_usage_error(const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* One-line error on stderr, prefixed with "fabench: "; returns 1. */
int bench_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* After a command's output: 0 when all of stdout reached it, else 1 after an error naming
 * the command (a full disk or a closed pipe under stdout loses the output). */
int bench_stdout_check(const char *command);

/* ---- flags ---- */
/* What every command answers alike, for a getopt_long result (ch) it does not take itself:
 * -h/--help (long option {"help", 0, 0, 'h'}) prints usage on stdout (1: the command exits 0);
 * a missing value (':', with ":" leading the optstring) or an unknown flag gets a usage error (2). */
int bench_flag_common(int ch, char **argv, const char *usage);

/* A command's flags, declared once: the parser and --help both read the table. A flag's default
 * is written once, as a user would type it, and set through the same parsing as a given value. */
typedef struct {
  const char *name; /* long name, without the dashes ("min-bytes"); "n" for -n */
  const char *arg;  /* its value's name ("SIZE"), or NULL where it takes none */
  const char *def;  /* the default (NULL: none, or said in help) */
  const char *help; /* what it does; '\n' starts another line */
  int code;         /* getopt_long's code */
} bench_flag;
/* The usage: head, then a line per flag ("  --name ARG  help (default: DEF)"), wrapped. The
 * caller frees it; NULL: out of memory. */
char *bench_flags_usage(const char *head, const bench_flag *f, size_t n);
/* struct options for getopt_long: the table's, then extra (terminated by a zero entry), then a
 * zero entry. The caller frees it; NULL: out of memory. */
struct option *bench_flags_options(const bench_flag *f, size_t n, const struct option *extra);

/* A default that a flag without a value (--quick) switches to where the flag it is of is not
 * given: a second default, written once too and shown beside the first in --help. */
typedef struct {
  int code;          /* the flag's getopt_long code; 0 ends a list */
  const char *value; /* as a user would type it */
} bench_flag_alt;
/* A command's flags whole, for bench_flags_parse: the table and the usage's text around it. */
typedef struct {
  const char *head;           /* "usage: fabench CMD [options] DIR...\n" and any lines of what it does */
  const bench_flag *f;
  size_t n;
  const char *tail;           /* after the flags (NULL: nothing) */
  const char *alt_name;       /* the flag (without a value) that switches to alt's defaults, or NULL */
  const bench_flag_alt *alt;  /* ended by a zero code */
} bench_flags_cmd;
/* Sets the flag of getopt_long code `code` from val (NULL for a flag without a value) into ctx:
 * 0, or 2 after a usage error naming the flag and the value. Called for each default too (given
 * 0), before the flags given (given 1). */
typedef int (*bench_flag_set)(void *ctx, int code, const char *val, int given);
/* The usage of c (head, a line per flag with its default, tail), made once for the process. */
const char *bench_flags_help(const bench_flags_cmd *c);
/* Parses argv by c: each default through set, each flag given in turn (a repeatable flag's set
 * gathers its values), then, where alt_name was given, alt's defaults of the flags not given.
 * -h/--help prints the usage on stdout and returns 1; a missing value or an unknown flag is a
 * usage error (2), as is a set's refusal (its status). first NULL: no positional argument is
 * taken (one is a usage error); else *first is the index of the first (argv is permuted so that
 * they come last). 0 when all parsed. */
int bench_flags_parse(const bench_flags_cmd *c, int argc, char **argv, bench_flag_set set, void *ctx, int *first);
/* The long name (without dashes) of c's flag of getopt_long code `code` ("?" where none). */
const char *bench_flags_name(const bench_flags_cmd *c, int code);
/* A comma-list flag's value split into at most max items (bench_split_list; *store freed first,
 * so a flag given again replaces its list): 0, or 2 after a usage error naming flag and s. */
int bench_flags_list(const char *usage, const char *flag, const char *s, char **items, int max, int *n,
                     char **store);

/* The table entries of the shared flags whose value and meaning every rank command has alike
 * (the codes below; their defaults are bench_rank_opts_init's). */
#define BENCH_FLAG_EMULATE                                                                        \
  {"emulate", "RATE|NxR:RATE", NULL,                                                             \
   "RATE with -n: each rank in its own network namespace, links shaped to RATE (e.g. 1gbit); "    \
   "NxR:RATE an emulated cluster of N hosts of R ranks (e.g. 2x2:1gbit), each host a namespace "  \
   "with a hostname of its own, its ranks sharing its memory and loopback; needs root and "       \
   "iproute2", BENCH_O_EMULATE}
#define BENCH_FLAG_EMULATE_SLOW                                                                   \
  {"emulate-slow", "K=RATE", NULL, "with NxR: host K's link at RATE instead (repeatable)", BENCH_O_EMULATE_SLOW}
#define BENCH_FLAG_TIMEOUT {"timeout", "SEC", "60", "every network wait", BENCH_O_TIMEOUT}
#define BENCH_FLAG_TELEMETRY                                                                      \
  {"telemetry-hz", "HZ", "10",                                                                   \
   "sample each host's CPUs, interfaces, TCP, InfiniBand ports and GPUs HZ times a second into "  \
   "telemetry.csv, and name what bound each measurement in its rows (docs/records.md); 0: off",   \
   BENCH_O_TELEMETRY}
#define BENCH_FLAG_TCP_STREAMS {"tcp-streams", "N", "1", "tcp connections per peer, 1..16", BENCH_O_TCP_STREAMS}
#define BENCH_FLAG_TCP_CC                                                                         \
  {"tcp-cc", "NAME", COLL_TCP_CC_DEFAULT,                                                        \
   "congestion control of the tcp sockets, or 'system' for the kernel's default; with --emulate " \
   "also the namespaces' default, which ucx's and mpi's sockets take", BENCH_O_TCP_CC}

/* The flags of the commands that start ranks (allreduce, p2p). */
/* getopt_long codes of the shared flags, clear of a command's own (256 and up). */
enum { BENCH_O_EMULATE = 0x4000, BENCH_O_MPIRUN, BENCH_O_BIND, BENCH_O_TIMEOUT, BENCH_O_OUT,
       BENCH_O_TCP_STREAMS, BENCH_O_TCP_CC, BENCH_O_EMULATE_SLOW, BENCH_O_INTRA, BENCH_O_TELEMETRY };
/* Entries of a command's struct option list: how its ranks start, where the run goes, help. */
#define BENCH_RANK_OPTIONS                                                                    \
  {"ranks", 1, 0, 'n'}, {"emulate", 1, 0, BENCH_O_EMULATE}, {"emulate-slow", 1, 0, BENCH_O_EMULATE_SLOW}, \
      {"mpirun-args", 1, 0, BENCH_O_MPIRUN}, {"intra-transport", 1, 0, BENCH_O_INTRA}, \
      {"bind", 1, 0, BENCH_O_BIND}, {"timeout", 1, 0, BENCH_O_TIMEOUT}, {"out", 1, 0, BENCH_O_OUT}, \
      {"telemetry-hz", 1, 0, BENCH_O_TELEMETRY}, {"help", 0, 0, 'h'}
/* The tcp transport's flags, for a command that opens tcp communicators. */
#define BENCH_TCP_OPTIONS {"tcp-streams", 1, 0, BENCH_O_TCP_STREAMS}, {"tcp-cc", 1, 0, BENCH_O_TCP_CC}
typedef struct {
  int nranks;              /* -n N: ranks started here; 0: the launcher's world */
  const char *emulate;     /* --emulate RATE (needs -n) or NODESxRANKS:RATE (-n optional) */
  const char *slow[LAUNCH_EMU_SLOW_MAX]; /* --emulate-slow NODE=RATE, each */
  int nslow;
  const char *mpirun_args; /* --mpirun-args ARGS */
  const char *bind;        /* --bind HOW (NULL: auto) */
  long timeout_s;          /* --timeout: every network wait (default 60) */
  const char *out;         /* --out DIR */
  long tcp_streams;        /* --tcp-streams (default 1) */
  const char *tcp_cc;      /* --tcp-cc NAME (NULL: the transport's default) */
  int has_intra;           /* --intra-transport T: hier inside hosts over T */
  coll_transport_kind intra;
  double telemetry_hz;     /* --telemetry-hz: samples a second of each host (default 10; 0: off) */
  launch_own own;          /* the argv elements of -n, --emulate and --emulate-slow, left out of
                              the ranks' */
} bench_rank_opts;
/* The defaults. */
void bench_rank_opts_init(bench_rank_opts *r);
/* One getopt_long result (ch; the value in optarg) that the command does not take itself: a
 * shared flag goes into r (0); -h/--help prints usage on stdout (1: the command exits 0); a
 * bad value, a missing value or an unknown flag gets a usage error (2). */
int bench_rank_flag(bench_rank_opts *r, int ch, char **argv, const char *usage);
/* After the flags: no stray argument, --emulate RATE only with -n, -n agreeing with
 * --emulate NODESxRANKS:RATE (which sets it where it is missing), --emulate-slow only with
 * that. 0, or 2 after a usage error. */
int bench_rank_check(bench_rank_opts *r, int argc, char **argv, const char *usage);
/* co's hier inside hosts: as --intra-transport asked; where it was not given and co may run
 * hier (may_hier: hier or auto is asked for), ucx where it is built and co's transport is tcp
 * or mpi (coll_comm_open opens it only where hosts have several ranks). */
void bench_comm_intra(const bench_rank_opts *r, coll_comm_opts *co, int may_hier);
/* One transport of a --transport list: 0 when built in and usable here; 2 after a usage error;
 * 3 for nccl on a machine without a usable GPU (said on stderr, one line). */
int bench_transport_check(coll_transport_kind tk, const char *usage);
/* A --transport list of at most max (<= 16) transports, each known, built in and named once: 0;
 * 2 after a usage error; 3 when it names nccl on a machine without a usable GPU (said on
 * stderr). *want_mpi: the list holds mpi (the ranks then start through mpirun). */
int bench_parse_transports(const char *list, coll_transport_kind *out, int max, int *n,
                           int *want_mpi, const char *usage);
/* --algo's comma list into out (at most max): 0 with the count in *n, or 2 after a usage
 * error naming the unknown algorithm. */
int bench_parse_algos(const char *list, coll_algo *out, int max, int *n, const char *usage);
/* -n N: bench_relaunch with the shared flags. */
int bench_rank_relaunch(const bench_rank_opts *r, int argc, char **argv, int use_mpirun);

/* ---- a run directory with its metadata ---- */
typedef struct {
  char dir[4096];
  char run_id[64];
  char host[256];      /* this host */
  char topo_hash[32];  /* this host's topology hash ("" if unknown) */
  res_run_desc meta;   /* run.json, described (res_run_write renders it); meta.base NULL: none */
} bench_run;
/* Creates the run directory (--out or results/<UTC>-<command>), starts run.json with the common
 * fields, and records this host's topology into it (topo.json, topo-<host>.xml). */
int bench_run_begin(bench_run *r, const char *out, const char *command, int argc, char **argv);
/* hier's fabric inside hosts in run.json's "fabrics" as "<transport>/intra" where the
 * communicator has one (rank 0's run). */
void bench_record_intra(bench_run *run, coll_transport_kind tk, const coll_comm *c);
/* The most ranks any one host of the boot world runs. */
int bench_ranks_per_host(const struct coll_boot *b);
/* Compute threads per rank (collective over the boot world). The ranks that share this rank's
 * cores are those on the same kernel (its boot id: emulated nodes share one) with the same CPU
 * set (a launcher that binds gives each its own): *threads 0 becomes those cores divided among
 * them, at least 1; an explicit count that oversubscribes them gets a one-line warning from the
 * first of them, naming the figures. `who` opens the warning. 0, or -1 after reporting. */
int bench_rank_threads(struct coll_boot *b, long *threads, const char *who);
/* Whether rank 0 goes on (ok: rank 0's verdict; the other ranks' is ignored), told to every rank
 * through the bootstrap (collective): a step only rank 0 does (the run directory, its files, a
 * row) then stops every rank alike, rank 0 having said why, instead of leaving the others to fail
 * later on a vanished peer. 1 or 0; 0 also after a failed exchange (said). */
int bench_rank0_ok(struct coll_boot *b, int ok);
/* -n N: runs this command again as N local ranks (argv without the elements own noted: -n,
 * --emulate) and returns the run's exit status. Refused inside a rank that a launcher started.
 * tcp_cc (NULL: COLL_TCP_CC_DEFAULT; "system": the host's) is the emulated namespaces' default
 * tcp congestion control. */
int bench_relaunch(int argc, char **argv, const launch_own *own, int n, int use_mpirun,
                   const char *mpirun_args, const char *emulate, const char *const *slow, int nslow,
                   const char *tcp_cc, int timeout_s);
/* Message sizes min, min*f, ... up to max (at most BENCH_SIZE_MAX), rounded up to whole
 * elements of esize bytes (duplicates dropped). Returns the count (0: no whole element fits
 * between min and max) and a malloc'd array, or -1. */
int bench_sizes(uint64_t min, uint64_t max, double f, size_t esize, uint64_t **out);
/* Round r (0 .. n-2, n rounded up to even) of a round-robin tournament of n ranks (pairs.c):
 * pair k is (a[k], b[k]) with a[k] < b[k]; n/2 pairs at most, a rank in one at most; every pair
 * of ranks meets in exactly one round. Returns the count. */
int bench_round_pairs(int n, int r, int *a, int *b);
/* CPU seconds this host's cores have been busy since boot (/proc/stat: user, nice, system,
 * irq and softirq, so the kernel's network work in any context counts; not steal or idle),
 * in jiffies; NaN where unreadable. */
double bench_host_cpu_s(void);
/* Seconds per byte of the f32 sum kernel over 8 MiB, the best of a few passes (NaN: no memory). */
double bench_gamma_kernel(void);
/* ---- telemetry during the measurements (telem.c) ---- */
struct tel;
typedef struct {
  struct tel *h; /* this host's sampler: its first rank's, where --telemetry-hz is not 0 */
  double hz;
  int warned;    /* a file that did not parse has been said */
} bench_tel;
/* A measurement's verdict over every host: the worst host's ("link-bound" before "cpu-bound"
 * before "neither"; "" without telemetry) and its name, the most utilised link's utilisation and
 * the busiest host's CPU busy fraction (any hosts), and the TCP retransmits of all hosts (NaN:
 * unknown). */
typedef struct {
  char bound[16];
  char host[64];
  double link_util, cpu_busy, retrans;
} bench_tel_result;
/* Collective over the boot world: with hz > 0 each host's first rank starts sampling its host
 * into rank 0's run directory dir (given on rank 0): telemetry.csv for rank 0's host,
 * telemetry-<host>.csv for another (where that directory is not shared, one of its name is made
 * on that host). Telemetry that cannot start is a warning, not a failed run: 0, or -1 after
 * saying why (a failed exchange). */
int bench_tel_start(bench_tel *t, struct coll_boot *b, double hz, const char *dir);
/* The start of a measurement, labelled in the CSV (every rank may call it; the sampling rank
 * reads). */
void bench_tel_begin(bench_tel *t, const char *label);
/* Its end: the summary, over every host of b's world (collective when b is not NULL; NULL: this
 * host's alone) into *out, on every rank. 0, or -1 after saying why. */
int bench_tel_end(bench_tel *t, struct coll_boot *b, bench_tel_result *out);
/* "# telemetry, <what>: <bound> ..." on stdout (nothing without telemetry). */
void bench_tel_print(const bench_tel_result *r, const char *what);
/* Stops this host's sampler (a file that could not be parsed or written is said). */
void bench_tel_stop(bench_tel *t);

/* ---- a rank's session (session.c): the collectives, p2p and train run inside one ---- */
typedef struct {
  const bench_rank_opts *r; /* --bind, --timeout, --out, --telemetry-hz */
  coll_boot *boot;          /* NULL where open failed */
  int rank, size;
  char bind_desc[256];      /* what --bind got ("none" before bench_session_bind) */
  bench_run run;            /* rank 0's run directory and run.json (run.meta.base NULL: none
                               begun) */
  bench_tel tel;            /* this host's sampler (--telemetry-hz) */
} bench_session;
/* The bootstrap (the launcher's rendezvous, or MPI's where want_mpi), every wait of it under
 * r's --timeout; r is kept (it outlives the session). 0, or 1 after saying why. */
int bench_session_open(bench_session *s, const bench_rank_opts *r, int want_mpi);
/* Binds this rank as --bind asks (auto: a core each where the host's ranks fit its cores), each
 * rank running threads compute threads. 0, or 1 after saying why. */
int bench_session_bind(bench_session *s, int threads);
/* The command's own files in the run directory (its tables, run.json's fields), made by rank 0
 * once the directory is: 0, or non-zero after saying why. */
typedef int (*bench_session_files_fn)(void *ctx, bench_run *run);
/* Rank 0, where ready (its verdict so far; the other ranks' is ignored): the run directory
 * (bench_run_begin under --out) and then files(ctx, &s->run) (NULL: none). Every rank learns
 * whether rank 0 goes on, so all stop alike; then the world goes into run.json: every host's
 * topology (topo-<host>.xml and "hosts"), the ranks, their hosts and bindings, the bootstrap,
 * the library versions and the emulation. Collective. 0, or 1 after saying why. */
int bench_session_begin(bench_session *s, const char *command, int argc, char **argv, int ready,
                        bench_session_files_fn files, void *ctx);
/* Starts the sampling of each host into rank 0's run directory (--telemetry-hz; collective).
 * 0, or 1 after saying why. */
int bench_session_telemetry(bench_session *s);
/* The end of a run that every rank reached: the sampler stopped, run.json's description freed,
 * the bootstrap closed. */
void bench_session_close(bench_session *s);
/* The end of a failed run (its rows are already written): as close, but under MPI the runtime
 * stops every rank instead of waiting for one that may be dead or stopped (it does not return). */
void bench_session_abort(bench_session *s);

/* ---- the cost model (costmodel.c) ---- */
struct res_costmodel;
/* The reduction kernel's cost per byte for a fit of run directories: the one the runs recorded
 * (res_fit_dirs_gamma), so that two fits of the same rows agree; measured now
 * (bench_gamma_kernel) only where none did. */
double bench_fit_gamma(char *const *dirs, int ndirs);
/* --model-from: a model.json, a directory with one, or a run directory fitted on the spot (its
 * notes on rows left out on stderr unless quiet: one rank says them for all). The terms that
 * FABENCH_MODEL_OFF names (curves, cpu, burst, share) are turned off in it
 * (res_costmodel_ablate); a name it does not know is an error. */
int bench_costmodel_load(struct res_costmodel *m, const char *from, int quiet, char *err, size_t cap);
/* ---- plots (plot.c) ---- */
/* Runs `gnuplot script` in dir, its output appended to dir/gnuplot.log under the script's name;
 * bench_gnuplot_log_reset starts that log afresh, so it holds one run's plots only. The script
 * (STEM.gp) draws STEM.png.tmp and STEM.svg.tmp, renamed to STEM.png and STEM.svg once gnuplot
 * has succeeded and removed if not: a plot stopped midway or past a disk's end is not left cut. */
int bench_gnuplot(const char *dir, const char *script, char *err, size_t cap);
void bench_gnuplot_log_reset(const char *dir);

/* ---- child commands (child.c) ---- */
#define BENCH_CHILD_MAX_ARGS 128
#include <signal.h>
/* Runs `self args...` (args NULL-terminated, at most BENCH_CHILD_MAX_ARGS) with stdout and
 * stderr in log and returns its exit status (128 + signal where one ended it; -1 where it could
 * not start, said). sigs (SIGINT, SIGTERM, SIGHUP, SIGCHLD; launch_sigs_take) are blocked by the
 * caller: one of the first three is forwarded to the child, which is waited for (one left running
 * would go on writing), and set in *interrupted; a second one, or the child outliving a grace of
 * 10 s after it, gets SIGKILL. timeout_s > 0: a child running longer is stopped the same way. */
int bench_child_run(const char *self, char *const *args, const char *log, double timeout_s, const sigset_t *sigs,
                    const sigset_t *old_mask, int *interrupted);
/* A failed child's report on stderr: its log's first "fabench:" error lines (which a usage
 * text would push out of the tail), then its last lines, indented. */
void bench_child_log_tail(const char *log);

/* Writes run.json (can be called again to update it) . */
int bench_run_write(bench_run *r);
void bench_run_end(bench_run *r);

#endif
