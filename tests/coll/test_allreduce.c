/* Multi-process all-reduce test: for rank counts 1..8, every dtype and op, and the counts
 * {0, 1, 2, 7, ranks-1, 1000003}, each rank checks every element against a reference computed
 * here, independently of the collectives (own generator, own arithmetic).
 * usage: test_allreduce --transport T --algo A [--ranks 1,2,...] [--layouts AABB,ABAB,...]
 *                      [--intra T2] (hier inside hosts over T2)
 *        [--big N] [--mem comm] [--mapped yes|no] [--idle yes]
 * --layouts: instead of rank counts, groups whose ranks report hosts (FABENCH_HOST) by letter:
 * ABAB is 4 ranks, 0 and 2 on host A, 1 and 3 on host B. Each rank checks that the communicator
 * sees its host's rank count, and auto that it picks hier exactly where the layout has several
 * hosts and a host of several ranks.
 * --idle yes: instead, each group checks that a no_spin rank waiting for a late peer sleeps.
 * --mem comm: the buffer comes from coll_mem_alloc (on ucx, memory the peers map); --mapped:
 * the fabric must (yes) or must not (no) say that the peers mapped it, so the test knows which
 * path of the ring it checked.
 * tcp/ucx ranks are forked with the environment rendezvous; mpi ranks are started by mpirun.
 * nccl: the buffer is on the GPU (coll_mem_alloc); the values go there and come back through
 * host memory, which is poisoned in between. Without a CUDA device it skips (exit 77). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "test_ranks.h"
#include "test_values.h"

typedef struct {
  const char *transport, *algo;
  const char *intra; /* hier's transport inside hosts (--intra), or NULL */
  const char *layout; /* this rank's group's hosts, one letter a rank (TEST_AR_LAYOUT), or NULL */
  size_t big;
  int mem_comm, mapped; /* mapped: 1 yes, 0 no, -1 unchecked */
  char self[4096];
} test_cfg;

static test_cfg cfg_g; /* the test binary's configuration (cmocka passes state only) */

/* want[i] = every rank's value of element i combined, rank by rank: the loop over the elements
 * is the inner one, so it runs without a call or branch on the op per element. */
static void reference(double *want, size_t cnt, int n, int dt, int op) {
  for (size_t i = 0; i < cnt; i++) want[i] = ref_value(i, 0, dt, op);
  for (int r = 1; r < n; r++) switch (op) {
    case COLL_SUM: for (size_t i = 0; i < cnt; i++) want[i] += ref_value(i, r, dt, COLL_SUM); break;
    case COLL_PROD: for (size_t i = 0; i < cnt; i++) want[i] *= ref_value(i, r, dt, COLL_PROD); break;
    case COLL_MIN:
      for (size_t i = 0; i < cnt; i++) want[i] = combine(want[i], ref_value(i, r, dt, COLL_MIN), COLL_MIN);
      break;
    default:
      for (size_t i = 0; i < cnt; i++) want[i] = combine(want[i], ref_value(i, r, dt, COLL_MAX), COLL_MAX);
      break;
    }
}

/* This rank's rendezvous and communicator for cfg's transport, with o's options (its
 * transport filled in here); -1 after saying why. */
static int open_rank(const test_cfg *cfg, coll_comm_opts *o, coll_boot **b, coll_comm **c, coll_algo *algo) {
  coll_err e = {{0}};
  coll_transport_kind tk;
  if (coll_transport_parse(cfg->transport, &tk) != 0 || coll_algo_parse(cfg->algo, algo) != 0) {
    fprintf(stderr, "bad transport/algo\n");
    return -1;
  }
  if (coll_boot_open(b, COLL_BOOT_AUTO, tk == COLL_MPI, 60000, &e) != 0) {
    fprintf(stderr, "boot: %s\n", e.msg);
    return -1;
  }
  o->transport = tk;
  if (coll_comm_open(c, *b, o, &e) != 0) {
    fprintf(stderr, "comm: %s\n", e.msg);
    coll_boot_close(*b);
    return -1;
  }
  return 0;
}

/* Does the fabric (or hier's inside hosts) say that the peers mapped the buffer? */
static int fabric_maps(const coll_comm *c) {
  const char *f = coll_comm_fabric(c), *in = coll_comm_intra_fabric(c);
  return strstr(f, "+rkey_ptr") || strstr(f, "+mapped") || (in && strstr(in, "+rkey_ptr"));
}

/* One rank's whole job; returns the number of wrong elements (or -1 on a failed call). */
static long run_rank(const test_cfg *cfg) {
  coll_err e = {{0}};
  coll_boot *b;
  coll_comm *c;
  coll_algo algo;
  coll_comm_opts o = {.timeout_ms = 60000, .chunk_bytes = 64 * 1024};
  const char *streams = getenv("TEST_TCP_STREAMS");
  if (streams) o.tcp_streams = atoi(streams);
  if (cfg->intra && coll_transport_parse(cfg->intra, &o.intra) == 0) o.has_intra = 1;
  if (open_rank(cfg, &o, &b, &c, &algo)) return -1;
  int n = coll_comm_size(c), me = coll_comm_rank(c);
  int want_hier = -1; /* auto on a layout: hier or not (-1: unchecked) */
  if (cfg->layout) {
    int mine = 0, hosts = 0, crowded = 0;
    for (int r = 0; r < n; r++) {
      int on = 0, first = 1;
      for (int q = 0; q < n; q++) on += cfg->layout[q] == cfg->layout[r];
      for (int q = 0; q < r; q++) first &= cfg->layout[q] != cfg->layout[r];
      hosts += first, crowded |= on > 1;
      if (r == me) mine = on;
    }
    if ((size_t)n != strlen(cfg->layout) || coll_comm_local_size(c) != mine) {
      fprintf(stderr, "rank %d of %d: layout %s: %d rank(s) on this host, want %d\n", me, n, cfg->layout,
              coll_comm_local_size(c), mine);
      coll_comm_close(c);
      coll_boot_close(b);
      return -1;
    }
    if (algo.kind == COLL_ALGO_AUTO) want_hier = hosts > 1 && crowded;
    /* --intra: a second communicator of that transport exactly where hier has two levels */
    const char *inf = coll_comm_intra_fabric(c);
    if (cfg->intra && (hosts > 1 && crowded) != (inf != NULL && !strncmp(inf, cfg->intra, strlen(cfg->intra)))) {
      fprintf(stderr, "rank %d: layout %s: hier inside hosts over '%s', want %s\n", me, cfg->layout,
              inf ? inf : "(none)", hosts > 1 && crowded ? cfg->intra : "none");
      coll_comm_close(c);
      coll_boot_close(b);
      return -1;
    }
  }
  size_t counts[6] = {0, 1, 2, 7, (size_t)(n - 1), cfg->big};
  size_t maxc = cfg->big > 7 ? cfg->big : 7;
  int dev = coll_comm_device(c) >= 0;
  void *buf = cfg->mem_comm || dev ? coll_mem_alloc(c, maxc * 8, &e) : malloc(maxc * 8);
  void *hbuf = dev ? malloc(maxc * 8) : buf; /* what the test writes and checks */
  double *want = malloc(maxc * sizeof *want);
  long bad = 0;
  if (!buf || !hbuf) {
    fprintf(stderr, "rank %d: buffer: %s\n", me, e.msg);
    bad = -1;
  } else if (cfg->mapped >= 0 && n > 1 && fabric_maps(c) != cfg->mapped) {
    fprintf(stderr, "rank %d: fabric %s (inside hosts %s): the peers %s the buffer, expected otherwise\n", me,
            coll_comm_fabric(c), coll_comm_intra_fabric(c) ? coll_comm_intra_fabric(c) : "-",
            cfg->mapped ? "did not map" : "mapped");
    bad = -1;
  }
  for (int dt = 0; dt < COLL_NDTYPES && bad >= 0; dt++)
    for (int op = 0; op < COLL_NOPS && bad >= 0; op++)
      for (int k = 0; k < 6 && bad >= 0; k++) {
        size_t cnt = counts[k];
        for (size_t i = 0; i < cnt; i++) put(hbuf, i, (coll_dtype)dt, ref_value(i, me, dt, op));
        reference(want, cnt, n, dt, op);
        coll_algo ran;
        size_t nb = cnt * coll_dtype_size((coll_dtype)dt);
        if (dev && coll_mem_copy(c, buf, hbuf, nb, &e) != 0) {
          fprintf(stderr, "rank %d: to the device: %s\n", me, e.msg);
          bad = -1;
          break;
        }
        if (dev) memset(hbuf, 0x5a, nb);
        if (coll_allreduce(c, buf, cnt, (coll_dtype)dt, (coll_op)op, algo, &ran, &e) != 0 ||
            (dev && coll_mem_copy(c, hbuf, buf, nb, &e) != 0)) {
          fprintf(stderr, "rank %d: allreduce %s/%s count %zu: %s\n", me, coll_dtype_name(dt),
                  coll_op_name(op), cnt, e.msg);
          bad = -1;
          break;
        }
        /* what ran is what was asked, but a ps:K of more servers than ranks: ps:n */
        coll_algo asked = algo;
        if (asked.kind == COLL_ALGO_PS && asked.param > n) asked.param = n;
        if (algo.kind != COLL_ALGO_AUTO && (ran.kind != asked.kind || ran.param != asked.param)) {
          char rn[32], an[32];
          coll_algo_format(rn, sizeof rn, ran), coll_algo_format(an, sizeof an, asked);
          fprintf(stderr, "rank %d of %d: ran %s, want %s\n", me, n, rn, an);
          bad = -1;
          break;
        }
        if (want_hier >= 0 && cnt > 0 && (ran.kind == COLL_ALGO_HIER) != want_hier) {
          char rn[32];
          coll_algo_format(rn, sizeof rn, ran);
          fprintf(stderr, "rank %d: auto on layout %s ran %s\n", me, cfg->layout, rn);
          bad = -1;
          break;
        }
        size_t wrong = 0;
        for (size_t i = 0; i < cnt; i++)
          if (get(hbuf, i, (coll_dtype)dt) != want[i]) {
            if (!wrong)
              fprintf(stderr, "rank %d of %d: %s %s count %zu: element %zu is %g, want %g\n", me, n,
                      coll_dtype_name(dt), coll_op_name(op), cnt, i, get(hbuf, i, (coll_dtype)dt), want[i]);
            wrong++;
          }
        bad += (long)wrong;
      }
  if (cfg->mem_comm || dev)
    coll_mem_free(c, buf);
  else
    free(buf);
  if (dev) free(hbuf);
  free(want);
  coll_comm_close(c);
  coll_boot_close(b);
  return bad;
}

/* --idle: with no_spin, a rank whose peer comes 400 ms late waits asleep. Rank 1 sleeps before
 * the all-reduce; rank 0 fails when its process used the CPU for over half of its wait (a
 * spinning wait uses all of it). */
static int idle_rank(const test_cfg *cfg) {
  coll_err e = {{0}};
  coll_boot *b;
  coll_comm *c;
  coll_algo algo;
  coll_comm_opts o = {.timeout_ms = 60000, .no_spin = 1};
  if (open_rank(cfg, &o, &b, &c, &algo)) return 1;
  int me = coll_comm_rank(c), rc = 0;
  float v[16] = {0};
  /* the all-reduce, then the bootstrap's all-gather (training's heartbeat and step records;
   * under mpirun it goes through MPI) */
  for (int what = 0; what < 2 && !rc; what++) {
    struct timespec w0, w1, c0, c1;
    if (me == 1) nanosleep(&(struct timespec){0, 400000000}, NULL);
    clock_gettime(CLOCK_MONOTONIC, &w0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    coll_algo ran;
    int32_t mine = me, all[2];
    if (what == 0 ? coll_allreduce(c, v, 16, COLL_F32, COLL_SUM, algo, &ran, &e)
                  : coll_boot_allgather(b, all, &mine, sizeof mine, &e)) {
      fprintf(stderr, "rank %d: %s: %s\n", me, what ? "bootstrap all-gather" : "allreduce", e.msg);
      rc = 1;
    } else if (what == 1 && (all[0] != 0 || all[1] != 1)) {
      fprintf(stderr, "rank %d: bootstrap all-gather gave %d %d\n", me, (int)all[0], (int)all[1]);
      rc = 1;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &w1);
    double wall = (double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) * 1e-9;
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + (c1.tv_nsec - c0.tv_nsec) * 1e-9;
    if (me == 0 && !rc) {
      fprintf(stderr, "%s/%s: rank 0 waited %.0f ms in the %s using %.0f ms of CPU\n", cfg->transport, cfg->algo,
              wall * 1e3, what ? "bootstrap all-gather" : "all-reduce", cpu * 1e3);
      if (wall < 0.2 || cpu > 0.5 * wall) rc = 1;
    }
  }
  coll_comm_close(c);
  coll_boot_close(b);
  return rc;
}

static int child_main(const test_cfg *cfg) {
  if (getenv("TEST_AR_IDLE")) return idle_rank(cfg);
  long bad = run_rank(cfg);
  return bad == 0 ? 0 : 1;
}

/* Starts n ranks and returns how many failed (a group that outlives its deadline is killed).
 * layout (or NULL): each rank's host, a letter a rank. */
static int run_group(const test_cfg *cfg, int n, const char *layout) {
  pid_t pids[64];
  int np = 0;
  /* a port the kernel just handed out, so concurrent tests do not collide */
  int port = test_free_port();
  if (!port) return -1;
  if (!strcmp(cfg->transport, "mpi")) {
#ifdef FABENCH_MPIRUN
    pid_t p = fork();
    if (p == 0) {
      char ns[16];
      snprintf(ns, sizeof ns, "%d", n);
      setenv("TEST_AR_CHILD", "1", 1);
      /* Open MPI unloads its plugins before exit, so LeakSanitizer can neither attribute nor
       * suppress their allocations: leak checking is off for MPI ranks (only matters under ASan) */
      setenv("ASAN_OPTIONS", "detect_leaks=0", 1);
      execl(FABENCH_MPIRUN, FABENCH_MPIRUN, "-np", ns, "--oversubscribe", "--bind-to", "none",
            "--mca", "btl", "self,vader,tcp", cfg->self, "--transport", cfg->transport, "--algo",
            cfg->algo, "--big", getenv("TEST_AR_BIG"), (char *)NULL);
      _exit(127);
    }
    pids[np++] = p;
#else
    return -1;
#endif
  } else {
    char tok[32];
    snprintf(tok, sizeof tok, "t%d-%d", (int)getpid(), n);
    for (int r = 0; r < n; r++) {
      pid_t p = fork();
      if (p == 0) {
        test_rank_env(r, n, port, tok);
        if (layout) {
          char host[16];
          snprintf(host, sizeof host, "host-%c", layout[r]);
          setenv("FABENCH_HOST", host, 1);
          setenv("FABENCH_BIND_ADDR", "127.0.0.1", 1); /* the hosts are one */
          setenv("TEST_AR_LAYOUT", layout, 1);
        }
        if (getenv("TEST_AR_LAYOUT")) cfg_g.layout = getenv("TEST_AR_LAYOUT");
        _exit(child_main(cfg));
      }
      pids[np++] = p;
    }
  }
  return test_wait_ranks(pids, np, 240);
}

typedef struct {
  int n;
  char layout[64]; /* "" for a plain group of n ranks */
} test_group_def;

static void test_group(void **state) {
  const test_group_def *g = *state;
  char name[96];
  snprintf(name, sizeof name, "%s/%s %s%s", cfg_g.transport, cfg_g.algo, *g->layout ? "layout " : "ranks=",
           *g->layout ? g->layout : "");
  if (!*g->layout) snprintf(name + strlen(name), sizeof name - strlen(name), "%d", g->n);
  int failed = run_group(&cfg_g, g->n, *g->layout ? g->layout : NULL);
  if (failed) fail_msg("%s: %d rank(s) failed", name, failed);
}

int main(int argc, char **argv) {
  test_cfg *cfg = &cfg_g;
  cfg->transport = "tcp";
  cfg->algo = "ring";
  cfg->big = 1000003;
  cfg->mapped = -1;
  const char *ranks = "1,2,3,4,5,6,7,8", *layouts = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--transport")) cfg->transport = argv[i + 1];
    else if (!strcmp(argv[i], "--algo")) cfg->algo = argv[i + 1];
    else if (!strcmp(argv[i], "--intra")) cfg->intra = argv[i + 1];
    else if (!strcmp(argv[i], "--ranks")) ranks = argv[i + 1];
    else if (!strcmp(argv[i], "--layouts")) layouts = argv[i + 1];
    else if (!strcmp(argv[i], "--big")) cfg->big = (size_t)strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--mem")) cfg->mem_comm = !strcmp(argv[i + 1], "comm");
    else if (!strcmp(argv[i], "--mapped")) cfg->mapped = !strcmp(argv[i + 1], "yes");
    else if (!strcmp(argv[i], "--idle") && !strcmp(argv[i + 1], "yes")) setenv("TEST_AR_IDLE", "1", 1);
  }
  /* the sanitizer and clang runs' smaller matrix (the idle check keeps its own rank count) */
  if (getenv("TEST_AR_RANKS") && !getenv("TEST_AR_IDLE")) ranks = getenv("TEST_AR_RANKS");
  /* the sanitizer build runs a smaller large count (it is many times slower) */
  if (getenv("FABENCH_TEST_BIG")) cfg->big = (size_t)strtoull(getenv("FABENCH_TEST_BIG"), NULL, 10);
  if (getenv("TEST_AR_CHILD")) return child_main(cfg);
  char bigs[32];
  snprintf(bigs, sizeof bigs, "%zu", cfg->big);
  setenv("TEST_AR_BIG", bigs, 1);
  ssize_t l = readlink("/proc/self/exe", cfg->self, sizeof cfg->self - 1);
  if (l > 0) cfg->self[l] = '\0';
  coll_transport_kind tk;
  if (coll_transport_parse(cfg->transport, &tk) != 0 || !coll_transport_built(tk)) {
    printf("SKIP: transport %s is not built into this fabench\n", cfg->transport);
    return 0;
  }
  /* Is there a GPU (nccl)? */
  int pr = test_transport_probe(tk, cfg->transport);
  if (pr) return pr;
  if (layouts && !strcmp(cfg->transport, "mpi")) {
    printf("--layouts: forked transports only (tcp, ucx)\n");
    return 1;
  }
  char *list = strdup(layouts ? layouts : ranks), *save = NULL;
  static test_group_def vals[16];
  struct CMUnitTest tests[16];
  int nt = 0;
  static char names[16][96];
  for (char *t = strtok_r(list, ",", &save); t && nt < 16; t = strtok_r(NULL, ",", &save)) {
    if (layouts) {
      snprintf(vals[nt].layout, sizeof vals[nt].layout, "%s", t);
      vals[nt].n = (int)strlen(vals[nt].layout);
      snprintf(names[nt], sizeof names[nt], "%s_%s_%s", cfg->transport, cfg->algo, vals[nt].layout);
    } else {
      vals[nt].n = atoi(t);
      snprintf(names[nt], sizeof names[nt], "%s_%s_ranks%d", cfg->transport, cfg->algo, vals[nt].n);
    }
    tests[nt] = (struct CMUnitTest){names[nt], test_group, NULL, NULL, &vals[nt]};
    nt++;
  }
  int rc = _cmocka_run_group_tests(cfg->algo, tests, (size_t)nt, NULL, NULL);
  free(list);
  return rc;
}
