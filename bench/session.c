/* A rank's session: what every rank of a measuring command (the collectives, p2p, train) does
 * around its measurements, written once: the bootstrap under --timeout, the binding, rank 0's
 * run directory with the world in run.json, the telemetry, and the end (a clean close, or an
 * abort that stops MPI's ranks rather than wait for a dead one). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "topo.h"
#include "util.h"

typedef struct {
  uint64_t xml_bytes; /* 0: not a host leader, or its topology could not be read */
  char host[256];
  char hash[32];
} bench_host_stamp;

static char *bench_read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, n = 0, got;
  do {
    if (n + 65536 > cap) {
      char *nb = realloc(buf, cap = cap * 2 + 65536);
      if (!nb) {
        free(buf);
        fclose(f);
        return NULL;
      }
      buf = nb;
    }
    got = fread(buf + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  *len = n;
  return buf;
}

/* run.json's hosts (rank 0): rank 0's own, and each other host whose first rank sent its
 * topology, with the boot world's ranks on it. 0, or -1 out of memory. */
static int bench_run_hosts(bench_run *r, struct coll_boot *b, const bench_host_stamp *all) {
  res_run_desc *d = &r->meta;
  int n = coll_boot_size(b);
  if (!(d->hosts = calloc((size_t)n, sizeof *d->hosts))) return -1;
  d->has_hosts = 1;
  for (int i = 0; i < n; i++) {
    if (i != 0 && !all[i].xml_bytes) continue;
    res_run_host *h = &d->hosts[d->nhosts++];
    snprintf(h->host, sizeof h->host, "%s", i == 0 ? r->host : all[i].host);
    snprintf(h->topo_hash, sizeof h->topo_hash, "%s", i == 0 ? r->topo_hash : all[i].hash);
    if (!(h->ranks = malloc((size_t)n * sizeof *h->ranks))) return -1;
    for (int k = 0; k < n; k++)
      if (!strcmp(coll_boot_host(b, k), coll_boot_host(b, i))) h->ranks[h->nranks++] = k;
  }
  return 0;
}

/* Multi-host runs: every host's first rank sends its hwloc XML and topology stamp to rank 0,
 * which writes topo-<host>.xml for each host and a "hosts" list (host, topo_hash, ranks) into
 * run.json. Collective over the boot world; r is rank 0's run (ignored on other ranks). */
static int bench_run_gather_hosts(bench_run *r, struct coll_boot *b) {
  int me = coll_boot_rank(b), n = coll_boot_size(b);
  bench_host_stamp mine = {0}, *all = calloc((size_t)n, sizeof *all);
  char *xml = NULL, *xmls = NULL;
  coll_err e = {{0}};
  int rc = -1;
  if (!all) return bench_error("out of memory"), -1;
  /* rank 0 recorded its own host in bench_run_begin; other hosts' first ranks record theirs */
  if (me != 0 && coll_boot_local_rank(b) == 0 && strcmp(coll_boot_host(b, me), coll_boot_host(b, 0))) {
    char tmp[] = "/tmp/fabench-topo-XXXXXX", err[512];
    topo_stamp st;
    cJSON *sum = NULL;
    if (mkdtemp(tmp) && topo_record(tmp, &st, &sum, err, sizeof err) == 0) {
      char path[4400];
      snprintf(path, sizeof path, "%s/topo-%s.xml", tmp, st.host);
      size_t len = 0;
      xml = bench_read_all(path, &len);
      if (xml) mine.xml_bytes = len;
      snprintf(mine.host, sizeof mine.host, "%s", st.host);
      snprintf(mine.hash, sizeof mine.hash, "%s", st.hash);
      unlink(path);
      rmdir(tmp);
    } else {
      bench_error("rank %d (%s): topology not recorded: %s", me, coll_boot_host(b, me), err);
    }
    cJSON_Delete(sum);
  }
  if (coll_boot_allgather(b, all, &mine, sizeof mine, &e)) goto out;
  uint64_t maxlen = 0;
  for (int i = 0; i < n; i++) maxlen = all[i].xml_bytes > maxlen ? all[i].xml_bytes : maxlen;
  if (maxlen) {
    /* XML rides a padded all-gather: slow, but once per run and only across hosts */
    char *pad = calloc(1, maxlen);
    xmls = malloc((size_t)maxlen * (size_t)n);
    if (!pad || !xmls) {
      free(pad);
      bench_error("out of memory");
      goto out;
    }
    if (xml) memcpy(pad, xml, mine.xml_bytes);
    int grc = coll_boot_allgather(b, xmls, pad, maxlen, &e);
    free(pad);
    if (grc) goto out;
  }
  if (me == 0) {
    if (bench_run_hosts(r, b, all)) {
      bench_error("out of memory");
      goto out;
    }
    for (int i = 1; i < n; i++) {
      if (!all[i].xml_bytes) continue;
      char path[4400];
      snprintf(path, sizeof path, "%s/topo-%s.xml", r->dir, all[i].host);
      char werr[512]; /* whole or not at all, as rank 0's own XML (topo_write_xml) */
      if (util_file_replace(path, xmls + (size_t)i * maxlen, all[i].xml_bytes, werr, sizeof werr))
        bench_error("%s", werr);
    }
    bench_run_write(r);
  }
  rc = 0;
out:
  if (rc && e.msg[0]) bench_error("%s", e.msg);
  free(all);
  free(xml);
  free(xmls);
  return rc;
}

/* Binds this rank as `how` (--bind; NULL: auto) asks, among the ranks on its host, each running
 * `threads` compute threads (auto's cores per rank); desc gets what it got ("none" for "none").
 * 0, or -1 after reporting the error. */
static int bench_bind_rank(struct coll_boot *b, const char *how, int threads, char *desc, size_t cap) {
  snprintf(desc, cap, "none");
  if (!how) how = "auto";
  if (!strcmp(how, "none")) return 0;
  int me = coll_boot_rank(b), local_size = 0, local = coll_boot_local_rank(b);
  for (int r = 0; r < coll_boot_size(b); r++)
    local_size += !strcmp(coll_boot_host(b, r), coll_boot_host(b, me));
  /* an emulated cluster's hosts (FABENCH_EMU_LAYOUT) share this machine's cores: bound by their
   * index among its hosts' ranks each, every host's first rank took the same core */
  const char *layout = getenv("FABENCH_EMU_LAYOUT");
  if (layout && *layout) local = me, local_size = coll_boot_size(b);
  char err[256];
  if (topo_bind(how, local, local_size, threads, NULL, desc, cap, err, sizeof err)) {
    bench_error("rank %d (%s): --bind %s: %s", me, coll_boot_host(b, me), how, err);
    return -1;
  }
  return 0;
}

static char *bench_strdup_env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? strdup(v) : NULL;
}

/* run.json's world (rank 0) from the boot world and every rank's binding (binds: ranks entries
 * of stride bytes). 0, or -1 out of memory. */
static int bench_run_world_desc(res_run_world *w, struct coll_boot *b, const char *binds, size_t stride) {
  int n = coll_boot_size(b);
  w->ranks = n;
  w->host_count = coll_boot_host_count(b);
  w->bootstrap = strdup(coll_boot_kind_name(b));
  w->rank_hosts = calloc((size_t)n, sizeof *w->rank_hosts);
  w->binding = calloc((size_t)n, sizeof *w->binding);
  if (!w->bootstrap || !w->rank_hosts || !w->binding) return -1;
  for (int k = 0; k < n; k++)
    if (!(w->rank_hosts[k] = strdup(coll_boot_host(b, k))) || !(w->binding[k] = strdup(binds + (size_t)k * stride)))
      return -1;
  char vers[512];
  coll_versions(vers, sizeof vers);
  if (!(w->library_versions = strdup(vers))) return -1;
  /* the reduction kernel's rate where and when the rows are measured: fit checks gamma against
   * it, and measuring it at fit time instead made two fits of the same rows differ */
  double g = bench_gamma_kernel();
  w->reduce_gbps = g > 0 && isfinite(g) ? 1e-9 / g : NAN;
  w->emulated_fabric = bench_strdup_env("FABENCH_FABRIC");
  w->emulated_rate = bench_strdup_env("FABENCH_EMU_RATE");
  /* an emulated cluster: NODESxRANKS, and the nodes whose link is slower than the rest */
  w->emulated_layout = bench_strdup_env("FABENCH_EMU_LAYOUT");
  w->emulated_slow = bench_strdup_env("FABENCH_EMU_SLOW");
  return 0;
}

/* The world every multi-rank command records (collective over the boot world): every host's
 * topology (bench_run_gather_hosts), and on rank 0 run.json's ranks, host_count, bootstrap,
 * rank_hosts, library_versions, emulation, an empty "fabrics" object for the transports, and
 * each rank's binding. 0, or -1 after reporting the error. */
static int bench_run_world(bench_run *r, struct coll_boot *b, const char *bind_desc) {
  if (bench_run_gather_hosts(r, b)) return -1;
  int n = coll_boot_size(b);
  char mine[256], *all = malloc((size_t)n * sizeof mine);
  coll_err e = {{0}};
  snprintf(mine, sizeof mine, "%s", bind_desc);
  if (!all || coll_boot_allgather(b, all, mine, sizeof mine, &e)) {
    bench_error("%s", all ? e.msg : "out of memory");
    free(all);
    return -1;
  }
  if (coll_boot_rank(b) == 0) {
    if (bench_run_world_desc(&r->meta.world, b, all, sizeof mine)) {
      free(all);
      return bench_error("out of memory"), -1;
    }
    r->meta.has_world = 1;
    bench_run_write(r);
  }
  free(all);
  return 0;
}


int bench_session_open(bench_session *s, const bench_rank_opts *r, int want_mpi) {
  memset(s, 0, sizeof *s);
  s->r = r;
  snprintf(s->bind_desc, sizeof s->bind_desc, "none");
  coll_err e = {{0}};
  if (coll_boot_open(&s->boot, COLL_BOOT_AUTO, want_mpi, (int)r->timeout_s * 1000, &e)) {
    s->boot = NULL;
    return bench_error("%s", e.msg);
  }
  s->rank = coll_boot_rank(s->boot);
  s->size = coll_boot_size(s->boot);
  return 0;
}

int bench_session_bind(bench_session *s, int threads) {
  return bench_bind_rank(s->boot, s->r->bind, threads, s->bind_desc, sizeof s->bind_desc) ? 1 : 0;
}

int bench_session_begin(bench_session *s, const char *command, int argc, char **argv, int ready,
                        bench_session_files_fn files, void *ctx) {
  int ok = ready;
  if (s->rank == 0 && ready && bench_run_begin(&s->run, s->r->out, command, argc, argv)) {
    /* no run: what it began to describe is dropped (run.meta.base NULL says none) */
    if (s->run.meta.base) bench_run_end(&s->run);
    memset(&s->run.meta, 0, sizeof s->run.meta);
    ok = 0;
  } else if (s->rank == 0 && ready && files) {
    ok = files(ctx, &s->run) == 0;
  }
  /* every rank stops alike where rank 0 cannot go on (it said why) */
  if (!bench_rank0_ok(s->boot, ok)) return 1;
  return bench_run_world(&s->run, s->boot, s->bind_desc) ? 1 : 0;
}

int bench_session_telemetry(bench_session *s) {
  return bench_tel_start(&s->tel, s->boot, s->r->telemetry_hz, s->run.dir) ? 1 : 0;
}

/* What both ends free: the sampler and rank 0's description of the run. */
static void bench_session_release(bench_session *s) {
  bench_tel_stop(&s->tel);
  if (s->run.meta.base) bench_run_end(&s->run);
}

void bench_session_close(bench_session *s) {
  bench_session_release(s);
  coll_boot_close(s->boot);
  s->boot = NULL;
}

void bench_session_abort(bench_session *s) {
  bench_session_release(s);
  coll_boot_abort(s->boot);
  s->boot = NULL;
}
