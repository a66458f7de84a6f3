/* Telemetry during a measuring command (--telemetry-hz): each host's first rank samples its
 * host (telemetry/) into the run directory, and a measurement's marks give every rank the
 * verdict of the host that bound it. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "coll.h"
#include "launch.h"
#include "tel.h"

#define BENCH_TEL_DIR_MAX 1024 /* rank 0's run directory as the other hosts learn it */

/* The rate this rank's links are judged against: the emulated one (its node's, where
 * --emulate-slow slowed it), else 0 (each link's own speed). */
static double bench_tel_link_bps(int rank) {
  const char *rate = getenv("FABENCH_EMU_RATE"), *layout = getenv("FABENCH_EMU_LAYOUT");
  const char *slow = getenv("FABENCH_EMU_SLOW");
  uint64_t bps = 0;
  if (!rate || launch_emu_parse_rate(rate, &bps)) return 0;
  int nodes = 0, per_node = 0;
  if (slow && layout && sscanf(layout, "%dx%d", &nodes, &per_node) == 2 && per_node > 0) {
    int node = rank / per_node;
    for (const char *p = slow; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
      char r[32];
      int k;
      uint64_t s;
      if (sscanf(p, "%d=%31[a-z0-9]", &k, r) == 2 && k == node && !launch_emu_parse_rate(r, &s)) bps = s;
    }
  }
  return (double)bps;
}

/* mkdir -p: 0, or -1 with errno. */
static int bench_tel_mkdirs(const char *dir) {
  char p[BENCH_TEL_DIR_MAX];
  snprintf(p, sizeof p, "%s", dir);
  for (char *c = p + 1; *c; c++)
    if (*c == '/') {
      *c = '\0';
      if (mkdir(p, 0755) && errno != EEXIST) return -1;
      *c = '/';
    }
  return mkdir(p, 0755) && errno != EEXIST ? -1 : 0;
}

int bench_tel_start(bench_tel *t, struct coll_boot *b, double hz, const char *dir) {
  memset(t, 0, sizeof *t);
  t->hz = hz;
  if (!(hz > 0)) return 0;
  int me = coll_boot_rank(b), n = coll_boot_size(b);
  char mine[BENCH_TEL_DIR_MAX] = "", *all = calloc((size_t)n, sizeof mine);
  coll_err e = {{0}};
  if (!all) return bench_error("out of memory"), -1;
  if (me == 0 && dir) snprintf(mine, sizeof mine, "%s", dir);
  if (coll_boot_allgather(b, all, mine, sizeof mine, &e)) {
    free(all);
    return bench_error("%s", e.msg), -1;
  }
  char root_dir[BENCH_TEL_DIR_MAX];
  memcpy(root_dir, all, sizeof root_dir);
  root_dir[sizeof root_dir - 1] = '\0';
  free(all);
  if (coll_boot_local_rank(b) != 0 || !root_dir[0]) return 0; /* one sampler a host */
  const char *host = coll_boot_host(b, me);
  char csv[BENCH_TEL_DIR_MAX + 300], err[512];
  if (!strcmp(host, coll_boot_host(b, 0)))
    snprintf(csv, sizeof csv, "%s/telemetry.csv", root_dir);
  else /* the run directory where --out is shared, else one of that name on this host */
    snprintf(csv, sizeof csv, "%s/telemetry-%s.csv", root_dir, host);
  if (bench_tel_mkdirs(root_dir)) {
    fprintf(stderr, "fabench: warning: rank %d (%s): no telemetry: cannot make %s: %s\n", me, host, root_dir,
            strerror(errno));
    return 0;
  }
  tel_opts o = {.hz = hz, .csv_path = csv, .host = host, .link_bps = bench_tel_link_bps(me)};
  if (tel_start(&t->h, &o, err, sizeof err)) /* the measurement matters more than its telemetry */
    fprintf(stderr, "fabench: warning: rank %d (%s): no telemetry: %s\n", me, host, err);
  return 0;
}

void bench_tel_begin(bench_tel *t, const char *label) {
  char err[512];
  if (t->h && tel_mark_begin(t->h, label, err, sizeof err) && !t->warned) {
    t->warned = 1;
    fprintf(stderr, "fabench: warning: %s (left out of the telemetry)\n", err);
  }
}

/* What each host tells of a measurement. */
typedef struct {
  int32_t has;
  char bound[16];
  char host[64];
  double link_util, cpu_busy, cpu_busy_max, retrans;
} bench_tel_host;

static int bench_tel_rank(const char *bound) {
  return !strcmp(bound, "link-bound") ? 2 : !strcmp(bound, "cpu-bound") ? 1 : 0;
}

int bench_tel_end(bench_tel *t, struct coll_boot *b, bench_tel_result *out) {
  memset(out, 0, sizeof *out);
  out->link_util = out->cpu_busy = out->retrans = NAN;
  if (!(t->hz > 0)) return 0;
  bench_tel_host mine;
  memset(&mine, 0, sizeof mine);
  if (t->h) {
    tel_summary s;
    char err[512];
    if (tel_mark_end(t->h, &s, err, sizeof err) && !t->warned) {
      t->warned = 1;
      fprintf(stderr, "fabench: warning: %s (left out of the telemetry)\n", err);
    }
    mine.has = 1;
    snprintf(mine.bound, sizeof mine.bound, "%s", s.verdict);
    snprintf(mine.host, sizeof mine.host, "%s", b ? coll_boot_host(b, coll_boot_rank(b)) : "");
    mine.link_util = s.link_util;
    mine.cpu_busy = s.cpu_busy;
    mine.cpu_busy_max = s.cpu_busy_max;
    mine.retrans = s.retrans;
  }
  int n = b ? coll_boot_size(b) : 1;
  bench_tel_host *all = calloc((size_t)n, sizeof *all);
  coll_err e = {{0}};
  if (!all) return bench_error("out of memory"), -1;
  if (n > 1 && coll_boot_allgather(b, all, &mine, sizeof mine, &e)) {
    free(all);
    return bench_error("%s", e.msg), -1;
  }
  if (n == 1) all[0] = mine;
  /* the worst host names the bound: link before CPU; among equals the most utilised link, else
   * the busiest CPUs */
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (!all[i].has) continue;
    all[i].bound[sizeof all[i].bound - 1] = all[i].host[sizeof all[i].host - 1] = '\0';
    if (!isnan(all[i].retrans)) out->retrans = (isnan(out->retrans) ? 0 : out->retrans) + all[i].retrans;
    if (all[i].link_util > out->link_util || (isnan(out->link_util) && !isnan(all[i].link_util)))
      out->link_util = all[i].link_util;
    if (all[i].cpu_busy > out->cpu_busy || (isnan(out->cpu_busy) && !isnan(all[i].cpu_busy)))
      out->cpu_busy = all[i].cpu_busy;
    if (best < 0) {
      best = i;
      continue;
    }
    int a = bench_tel_rank(all[i].bound), c = bench_tel_rank(all[best].bound);
    double ui = isnan(all[i].link_util) ? -1 : all[i].link_util;
    double ub = isnan(all[best].link_util) ? -1 : all[best].link_util;
    double ci = isnan(all[i].cpu_busy_max) ? -1 : all[i].cpu_busy_max;
    double cb = isnan(all[best].cpu_busy_max) ? -1 : all[best].cpu_busy_max;
    if (a > c || (a == c && (a == 1 ? ci > cb : ui > ub))) best = i;
  }
  if (best >= 0) {
    snprintf(out->bound, sizeof out->bound, "%s", all[best].bound);
    snprintf(out->host, sizeof out->host, "%s", all[best].host);
  }
  free(all);
  return 0;
}

void bench_tel_print(const bench_tel_result *r, const char *what) {
  if (!r->bound[0]) return;
  char link[32] = "no link rate known", cpu[32] = "CPU busy unknown", re[48] = "";
  if (!isnan(r->link_util)) snprintf(link, sizeof link, "busiest link at %.0f%%", 100 * r->link_util);
  if (!isnan(r->cpu_busy)) snprintf(cpu, sizeof cpu, "CPUs %.0f%% busy", 100 * r->cpu_busy);
  if (!isnan(r->retrans)) snprintf(re, sizeof re, ", %.0f TCP retransmits", r->retrans);
  printf("# telemetry, %s: %s%s%s (%s, %s%s)\n", what, r->bound, r->host[0] ? " on " : "", r->host, link, cpu, re);
}

void bench_tel_stop(bench_tel *t) {
  if (!t->h) return;
  tel_stats st;
  tel_stop(t->h, &st);
  t->h = NULL;
  if (st.error[0] && !t->warned) fprintf(stderr, "fabench: warning: %s\n", st.error);
}
