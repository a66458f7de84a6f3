/* Helpers shared by the subcommands: parsing, errors, run directories. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "res.h"
#include "topo.h"
#include "util.h"

/* strto* skip leading space and take a sign (strtoull wraps "-5" to 2^64 - 5), and strtod
 * also takes "nan", "inf" and hex: a number here is what a user types, only chars, starting
 * with a digit (after a '-', or a '.' where chars has one). */
static int bench_plain_number(const char *s, const char *chars) {
  const char *d = s + (*s == '-' && strchr(chars, '-'));
  if (*d == '.' && strchr(chars, '.')) d++;
  return *d >= '0' && *d <= '9' && s[strspn(s, chars)] == '\0';
}

int bench_parse_size(const char *s, uint64_t *out) {
  uint64_t v;
  /* the bound also keeps size + slack and size * step (bench_sizes) from wrapping */
  if (coll_parse_size(s, &v) || v > BENCH_SIZE_MAX) return -1;
  *out = v;
  return 0;
}

int bench_parse_int(const char *s, long min, long max, long *out) {
  if (!s || !bench_plain_number(s, "-0123456789")) return -1;
  errno = 0;
  char *end;
  long v = strtol(s, &end, 10);
  if (errno || *end || end == s || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int bench_parse_double(const char *s, double min, double max, double *out) {
  if (!s || !bench_plain_number(s, "-+.0123456789eE")) return -1;
  errno = 0;
  char *end;
  double v = strtod(s, &end);
  if (errno || *end || end == s || !isfinite(v) || v < min || v > max) return -1;
  *out = v;
  return 0;
}

int bench_parse_name(const char *s, size_t maxlen) {
  size_t n = s ? strlen(s) : 0;
  if (n == 0 || n > maxlen) return -1;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_' || s[i] == '-'))
      return -1;
  return 0;
}

int bench_split_list(const char *s, char **items, int max, char **store) {
  *store = strdup(s ? s : "");
  if (!*store) return -1;
  if (!**store) return 0;
  int n = 0;
  for (char *p = *store;;) {
    char *comma = strchr(p, ',');
    if (comma) *comma = '\0';
    /* "8,,64" or a trailing comma: a slip, not a shorter list (strtok would pass over it) */
    if (!*p || n == max) return -1;
    items[n++] = p;
    if (!comma) return n;
    p = comma + 1;
  }
}

/* "fabench: <message>" and a newline on stderr. */
static void bench_vline(const char *fmt, va_list ap) {
  fputs("fabench: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

int bench_usage_error(const char *usage, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vline(fmt, ap);
  va_end(ap);
  fputs(usage, stderr);
  return 2;
}

int bench_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  bench_vline(fmt, ap);
  va_end(ap);
  return 1;
}

int bench_stdout_check(const char *command) {
  errno = 0;
  if (fflush(stdout) == 0 && !ferror(stdout)) return 0;
  return bench_error("%s: cannot write standard output: %s", command, errno ? strerror(errno) : "write error");
}

int bench_flag_common(int ch, char **argv, const char *usage) {
  if (ch == 'h') return fputs(usage, stdout), 1;
  if (ch == ':') return bench_usage_error(usage, "option '%s' needs a value", argv[optind - 1]);
  return bench_usage_error(usage, "unknown option '%s'", argv[optind - 1]);
}

void bench_rank_opts_init(bench_rank_opts *r) {
  *r = (bench_rank_opts){.timeout_s = 60, .tcp_streams = 1, .telemetry_hz = 10};
}

int bench_rank_flag(bench_rank_opts *r, int ch, char **argv, const char *usage) {
  long v;
  switch (ch) {
  case 'n':
    if (bench_parse_int(optarg, 1, 4096, &v)) return bench_usage_error(usage, "-n: '%s' is not a rank count (1..4096)", optarg);
    r->nranks = (int)v;
    launch_own_note(&r->own, argv, optind, optarg);
    return 0;
  case BENCH_O_EMULATE: {
    launch_emu_spec sp;
    char err[256];
    if (launch_emu_parse_spec(optarg, &sp, err, sizeof err)) return bench_usage_error(usage, "%s", err);
    r->emulate = optarg;
    launch_own_note(&r->own, argv, optind, optarg);
    return 0;
  }
  case BENCH_O_EMULATE_SLOW: {
    int node;
    char rate[32], err[256];
    if (launch_emu_parse_slow(optarg, &node, rate, sizeof rate, err, sizeof err))
      return bench_usage_error(usage, "%s", err);
    if (r->nslow == LAUNCH_EMU_SLOW_MAX)
      return bench_usage_error(usage, "--emulate-slow: at most %d of them", LAUNCH_EMU_SLOW_MAX);
    r->slow[r->nslow++] = optarg;
    launch_own_note(&r->own, argv, optind, optarg);
    return 0;
  }
  case BENCH_O_MPIRUN: r->mpirun_args = optarg; return 0;
  case BENCH_O_INTRA: {
    int rc = 0;
    if (coll_transport_parse(optarg, &r->intra) || r->intra == COLL_NCCL)
      return bench_usage_error(usage, "--intra-transport: '%s' is not a host transport (tcp, ucx, mpi)", optarg);
    if ((rc = bench_transport_check(r->intra, usage))) return rc;
    r->has_intra = 1;
    return 0;
  }
  case BENCH_O_BIND: {
    topo_bind_kind k;
    char err[256];
    if (topo_bind_parse(optarg, &k, err, sizeof err)) return bench_usage_error(usage, "--bind: %s", err);
    r->bind = optarg;
    return 0;
  }
  case BENCH_O_TIMEOUT:
    if (bench_parse_int(optarg, 1, 86400, &r->timeout_s))
      return bench_usage_error(usage, "--timeout: '%s' is not seconds (1..86400)", optarg);
    return 0;
  case BENCH_O_OUT: r->out = optarg; return 0;
  case BENCH_O_TELEMETRY:
    if (bench_parse_double(optarg, 0, 100, &r->telemetry_hz))
      return bench_usage_error(usage, "--telemetry-hz: '%s' is not samples a second (0 to 100; 0: off)", optarg);
    return 0;
  case BENCH_O_TCP_STREAMS: /* the tcp transport opens at most 16 */
    if (bench_parse_int(optarg, 1, 16, &r->tcp_streams))
      return bench_usage_error(usage, "--tcp-streams: '%s' is not 1..16", optarg);
    return 0;
  case BENCH_O_TCP_CC:
    if (bench_parse_name(optarg, 15))
      return bench_usage_error(usage, "--tcp-cc: '%s' is not a congestion control name", optarg);
    r->tcp_cc = optarg;
    return 0;
  default: return bench_flag_common(ch, argv, usage);
  }
}

int bench_rank_check(bench_rank_opts *r, int argc, char **argv, const char *usage) {
  launch_emu_spec sp;
  char err[512];
  if (optind < argc) return bench_usage_error(usage, "unexpected argument '%s'", argv[optind]);
  int n = r->nranks;
  if (launch_emu_plan(r->emulate, r->slow, r->nslow, &n, &sp, NULL, err, sizeof err))
    return bench_usage_error(usage, "%s", err);
  r->nranks = n;
  return 0;
}

void bench_comm_intra(const bench_rank_opts *r, coll_comm_opts *co, int may_hier) {
  co->has_intra = r->has_intra;
  co->intra = r->intra;
  /* by default the fastest inside a host: ucx, whose ranks there map each other's buffers */
  if (!r->has_intra && may_hier && coll_transport_built(COLL_UCX) &&
      (co->transport == COLL_TCP || co->transport == COLL_MPI)) {
    co->has_intra = 1;
    co->intra = COLL_UCX;
  }
}

void bench_record_intra(bench_run *run, coll_transport_kind tk, const coll_comm *c) {
  const char *f = coll_comm_intra_fabric(c);
  char key[32];
  snprintf(key, sizeof key, "%s/intra", coll_transport_name(tk));
  if (f) res_run_add_fabric(&run->meta, key, f);
}

int bench_transport_check(coll_transport_kind tk, const char *usage) {
  coll_err ue;
  if (tk == COLL_NCCL && coll_transport_usable(COLL_NCCL, &ue)) {
    fprintf(stderr, "fabench: %s\n", ue.msg);
    return 3; /* not a usage error: this machine has no GPU */
  }
  if (!coll_transport_built(tk))
    return bench_usage_error(usage, "--transport: '%s' is not built into this fabench", coll_transport_name(tk));
  return 0;
}

int bench_parse_transports(const char *list, coll_transport_kind *out, int max, int *n,
                           int *want_mpi, const char *usage) {
  char *items[16], *store = NULL;
  int got = bench_split_list(list, items, max < 16 ? max : 16, &store), rc = 0;
  *n = 0;
  *want_mpi = 0;
  if (got <= 0) rc = bench_usage_error(usage, "--transport: empty or too long list");
  for (int i = 0; i < got && !rc; i++) {
    if (coll_transport_parse(items[i], &out[i]))
      rc = bench_usage_error(usage, "--transport: unknown transport '%s' (tcp, ucx, mpi, nccl)", items[i]);
    else if (!(rc = bench_transport_check(out[i], usage)))
      *want_mpi |= out[i] == COLL_MPI;
    for (int j = 0; j < i && !rc; j++) /* twice would measure it twice, in rows alike */
      if (out[j] == out[i]) rc = bench_usage_error(usage, "transport '%s' given twice", coll_transport_name(out[i]));
  }
  free(store);
  if (!rc) *n = got;
  return rc;
}

int bench_parse_algos(const char *list, coll_algo *out, int max, int *n, const char *usage) {
  char *items[64], *store = NULL;
  int got = bench_split_list(list, items, max < 64 ? max : 64, &store), rc = 0;
  *n = 0;
  if (got <= 0) rc = bench_usage_error(usage, "--algo: empty or too long list");
  for (int i = 0; i < got && !rc; i++)
    if (coll_algo_parse(items[i], &out[i]))
      rc = bench_usage_error(usage, "--algo: unknown algorithm '%s'", items[i]);
  free(store);
  if (!rc) *n = got;
  return rc;
}

int bench_rank_relaunch(const bench_rank_opts *r, int argc, char **argv, int use_mpirun) {
  if (r->mpirun_args && !use_mpirun) /* accepted and dropped, it once looked applied */
    return bench_error("--mpirun-args: -n starts these ranks without mpirun (no mpi transport), so "
                       "they would be ignored; leave them out"),
           2;
  return bench_relaunch(argc, argv, &r->own, r->nranks, use_mpirun, r->mpirun_args, r->emulate, r->slow, r->nslow,
                        r->tcp_cc, (int)r->timeout_s);
}

int bench_run_begin(bench_run *r, const char *out, const char *command, int argc, char **argv) {
  memset(r, 0, sizeof *r);
  char err[512];
  /* another command's run in --out would be overwritten file by file and its run.json replaced,
   * leaving a directory that mixes two runs (fit and report read such a mix as one run) */
  char had[256];
  if (out && *out && res_run_command(out, had, sizeof had) == 0 && strcmp(had, command))
    return bench_error("--out %s holds a `%s` run (its run.json): give %s a directory of its own", out, had,
                       command), -1;
  if (res_run_dir(r->dir, sizeof r->dir, out, command, err, sizeof err) != 0)
    return bench_error("%s", err), -1;
  res_run_id(r->run_id, sizeof r->run_id);
  if (res_run_desc_init(&r->meta, r->run_id, command, argc, argv)) return bench_error("out of memory"), -1;
  snprintf(r->meta.run_dir, sizeof r->meta.run_dir, "%s", r->dir);
  gethostname(r->host, sizeof r->host - 1);

  topo_stamp st;
  cJSON *summary = NULL;
  if (topo_record(r->dir, &st, &summary, err, sizeof err) == 0) {
    snprintf(r->topo_hash, sizeof r->topo_hash, "%s", st.hash);
    snprintf(r->meta.topo_host, sizeof r->meta.topo_host, "%s", st.host);
    snprintf(r->meta.topo_hash, sizeof r->meta.topo_hash, "%s", st.hash);
    snprintf(r->meta.topo_backend, sizeof r->meta.topo_backend, "%s", st.backend);
    if (summary) {
      char path[4400];
      snprintf(path, sizeof path, "%s/topo.json", r->dir);
      if (util_json_write_file(path, summary, err, sizeof err) != 0) bench_error("%s", err);
      r->meta.topo_summary = summary;
    }
  } else {
    /* a run is still worth having without its topology; say so once */
    bench_error("topology not recorded: %s", err);
    snprintf(r->meta.topology_error, sizeof r->meta.topology_error, "%s", err);
  }
  return bench_run_write(r);
}

int bench_run_write(bench_run *r) {
  char err[512];
  if (res_run_write(r->dir, &r->meta, err, sizeof err) != 0) return bench_error("%s", err), -1;
  return 0;
}

void bench_run_end(bench_run *r) {
  res_run_desc_free(&r->meta);
}

/* What decides which ranks share cores: the kernel they run on and their CPU set. */
typedef struct {
  char kernel[40];
  unsigned char set[128];
  int cores;
} bench_cpu_share;

int bench_rank_threads(struct coll_boot *b, long *threads, const char *who) {
  bench_cpu_share me, *all = calloc((size_t)coll_boot_size(b), sizeof *all);
  memset(&me, 0, sizeof me);
  if (!all) return bench_error("out of memory"), -1;
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (!f || !fgets(me.kernel, sizeof me.kernel, f)) /* no boot id: the host's name stands in */
    snprintf(me.kernel, sizeof me.kernel, "%s", coll_boot_host(b, coll_boot_rank(b)));
  if (f) fclose(f);
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    me.cores = CPU_COUNT(&set);
    memcpy(me.set, &set, sizeof set < sizeof me.set ? sizeof set : sizeof me.set);
  } else {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    me.cores = n > 0 ? (int)n : 1;
  }
  coll_err e = {{0}};
  if (coll_boot_allgather(b, all, &me, sizeof me, &e)) {
    free(all);
    return bench_error("%s", e.msg), -1;
  }
  int sharing = 0, first = -1;
  for (int r = 0; r < coll_boot_size(b); r++)
    if (!memcmp(&all[r], &me, sizeof me)) sharing++, first = first < 0 ? r : first;
  free(all);
  if (sharing < 1) sharing = 1;
  long def = me.cores / sharing > 0 ? me.cores / sharing : 1;
  if (*threads <= 0)
    *threads = def;
  else if (*threads * sharing > me.cores && coll_boot_rank(b) == first)
    fprintf(stderr, "%s: warning: --threads %ld on each of the %d rank(s) sharing %s's %d core(s) is %ld "
            "threads: they oversubscribe the cores (the default would be %ld)\n",
            who, *threads, sharing, coll_boot_host(b, first), me.cores, *threads * sharing, def);
  return 0;
}

double bench_host_cpu_s(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return NAN;
  unsigned long long user, nice, sys, idle, iowait, irq, softirq;
  int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &sys, &idle, &iowait, &irq, &softirq);
  fclose(f);
  long hz = sysconf(_SC_CLK_TCK);
  if (n != 7 || hz <= 0) return NAN;
  return (double)(user + nice + sys + irq + softirq) / (double)hz;
}

double bench_gamma_kernel(void) {
  /* f32 sum over 8 MiB (beyond the caches, as the large all-reduces are): the best of a few
   * passes, so a busy core does not inflate it */
  size_t count = (8u << 20) / sizeof(float);
  float *a = malloc(count * sizeof *a), *b = malloc(count * sizeof *b);
  if (!a || !b) {
    free(a);
    free(b);
    return NAN;
  }
  for (size_t i = 0; i < count; i++) a[i] = (float)(i & 7), b[i] = 1.0f;
  double best = INFINITY;
  for (int rep = 0; rep < 7; rep++) {
    double t0 = util_now();
    coll_reduce(a, b, count, COLL_F32, COLL_SUM);
    double t = util_now() - t0;
    if (t < best) best = t;
  }
  free(a);
  free(b);
  return best / (double)(count * sizeof(float));
}

int bench_rank0_ok(struct coll_boot *b, int ok) {
  int n = coll_boot_size(b);
  if (n < 2) return ok;
  int32_t mine = ok, *all = calloc((size_t)n, sizeof *all);
  coll_err e = {{0}};
  if (!all) return !bench_error("out of memory");
  int rc = coll_boot_allgather(b, all, &mine, sizeof mine, &e);
  if (rc) bench_error("%s", e.msg);
  ok = !rc && all[0];
  free(all);
  return ok;
}

int bench_ranks_per_host(const struct coll_boot *b) {
  int n = coll_boot_size(b), most = 0;
  for (int r = 0; r < n; r++) {
    int on = 0;
    for (int k = 0; k < n; k++) on += !strcmp(coll_boot_host(b, k), coll_boot_host(b, r));
    if (on > most) most = on;
  }
  return most;
}

int bench_relaunch(int argc, char **argv, const launch_own *own, int n, int use_mpirun,
                   const char *mpirun_args, const char *emulate, const char *const *slow, int nslow,
                   const char *tcp_cc, int timeout_s) {
  if (getenv("FABENCH_LAUNCHER")) return bench_error("-n given to a rank that a launcher started");
  if (own->over) return bench_error("-n and --emulate given too many times");
  char **rargv = calloc((size_t)argc + 1, sizeof *rargv);
  if (!rargv) return bench_error("out of memory");
  for (int i = 0; i < argc; i++) rargv[i] = argv[i];
  launch_own_strip(argc, rargv, own);
  /* the emulated namespaces' sockets that choose none (UCX's, Open MPI's) take the tcp
   * transport's congestion control, not the host's default (docs/measurements.md, "reno for
   * the tcp transport") */
  if (!tcp_cc) tcp_cc = COLL_TCP_CC_DEFAULT;
  launch_opts lo = {.n = n, .use_mpirun = use_mpirun, .mpirun_args = mpirun_args,
                          .emulate = emulate, .slow = slow, .nslow = nslow, .tcp_cc = strcmp(tcp_cc, "system") ? tcp_cc : NULL,
                          .timeout_s = timeout_s};
  int rc = launch_ranks(&lo, rargv);
  free(rargv);
  return rc;
}

int bench_sizes(uint64_t min, uint64_t max, double f, size_t esize, uint64_t **out) {
  size_t cap = 64, n = 0;
  if (max > BENCH_SIZE_MAX) return -1; /* s * f must not pass 2^64 */
  uint64_t *v = malloc(cap * sizeof *v);
  if (!v) return -1;
  for (uint64_t s = min; s <= max;) {
    uint64_t b = esize ? (s + esize - 1) / esize * esize : s;
    if (b <= max && (n == 0 || v[n - 1] != b)) {
      if (n == cap) {
        uint64_t *nv = realloc(v, (cap *= 2) * sizeof *v);
        if (!nv) return free(v), -1;
        v = nv;
      }
      v[n++] = b;
    }
    uint64_t next = s == 0 ? (esize ? esize : 1) : (uint64_t)ceil((double)s * f);
    s = next > s ? next : s + 1;
  }
  *out = v;
  return (int)n;
}
