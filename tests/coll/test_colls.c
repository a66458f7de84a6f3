/* Reduce-scatter, all-gather, broadcast and all-to-all(v), each rank checking every element
 * against a reference computed here (test_values.h: the test's own values and arithmetic):
 * every dtype (and op, where it reduces), counts 0, 1, 2, 7, ranks - 1 and a large odd one,
 * at 1, 2, 3, 5 and 8 ranks over a forked transport. A broadcast goes from every root; an
 * all-to-allv has per-pair counts drawn from a seed, zeros among them (Bruck: the all-to-all of
 * equal blocks). The send buffers must
 * come back unchanged, and what ran is what was asked (rhd/rd off a power of two: the ring).
 * --layouts AABB,ABAB,...: instead of rank counts, groups whose ranks report hosts (FABENCH_HOST)
 * by letter, for hier (reduce-scatter's and all-gather's on hosts of unequal rank counts run the
 * ring, and say so; broadcast's and all-to-all's run on any).
 * --mem comm: the buffers from coll_mem_alloc; --mapped yes|no: direct must read the peers'
 * copies in place (ucx on shared memory), or must fall back (elsewhere). --intra T: hier's
 * phases inside hosts over transport T.
 * nccl: the buffers are on the GPU (coll_mem_alloc); the values go there and come back through
 * host memory, which is poisoned in between. Without a CUDA device it skips (exit 77).
 * --devemu grouped|staged (tcp): the same device paths on a device emulated on the host
 * (devemu.h: memory the host cannot touch outside the device's operations; messages grouped as
 * NCCL's, or staged one by one as CUDA IPC's).
 * usage: test_colls --transport T --coll rs|ag|bcast|a2a --algo A [--ranks 1,2,...]
 *                   [--layouts L,...] [--big N] [--mem comm] [--mapped yes|no] [--intra T]
 *                   [--devemu grouped|staged] */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "devemu.h"
#include "test_ranks.h"
#include "test_values.h"

typedef struct {
  const char *transport, *coll, *algo;
  const char *intra; /* hier's transport inside hosts (NULL: the one across) */
  size_t big;
  int mem_comm; /* buffers from coll_mem_alloc (ucx: memory the peers on this host map) */
  int mapped;   /* direct must read in place (1), must fall back (0), or either (-1) */
  int devemu;   /* an emulated device: 0 none, 1 staged (CUDA IPC's way), 2 grouped (NCCL's) */
} colls_cfg;
static colls_cfg cfg_g;

/* Element i of rank r's contribution (as ref_value, the op folded into the data's kind). */
static double val(size_t i, int r, int dt, int op) { return ref_value(i, r, dt, op); }

static void fill(void *b, size_t n, size_t first, int r, coll_dtype dt, int op) {
  for (size_t i = 0; i < n; i++) put(b, i, dt, val(first + i, r, dt, op));
}

/* Elements of b that differ from want (first: the first such index). */
static size_t diff(const void *b, const double *want, size_t n, coll_dtype dt, size_t *first) {
  size_t bad = 0;
  for (size_t i = 0; i < n; i++)
    if (get(b, i, dt) != want[i] && !bad++) *first = i;
  return bad;
}

static int report(int me, const char *what, coll_dtype dt, int op, size_t count, size_t bad, size_t first) {
  if (!bad) return 0;
  fprintf(stderr, "rank %d: %s %s/%s count %zu: %zu wrong, first at %zu\n", me, what, coll_dtype_name(dt),
          coll_op_name((coll_op)op), count, bad, first);
  return 1;
}

/* The all-to-allv count from rank p to rank q for this round: 0..3 times the base, some zero. */
static size_t a2a_count(int p, int q, size_t base, int round) {
  uint32_t x = (uint32_t)(p * 131 + q * 977 + round * 7919) * 2654435761u;
  x ^= x >> 13;
  return (x % 4) * base;
}

/* Every host of the layout ("AABB": a letter a rank) has as many ranks; no layout: one host. */
static int layout_even(const char *layout) {
  int count[26] = {0}, want = 0;
  for (const char *p = layout; p && *p; p++) count[(*p - 'A') % 26]++;
  for (int i = 0; i < 26; i++)
    if (count[i] && want && count[i] != want) return 0;
    else if (count[i]) want = count[i];
  return 1;
}

/* The layout spans several hosts and some host has several ranks (where auto's broadcast runs
 * hier); no layout: one host. */
static int layout_hier(const char *layout) {
  int count[26] = {0}, hosts = 0, most = 0;
  for (const char *p = layout; p && *p; p++) count[(*p - 'A') % 26]++;
  for (int i = 0; i < 26; i++) {
    hosts += count[i] > 0;
    if (count[i] > most) most = count[i];
  }
  return hosts > 1 && most > 1;
}

/* A device communicator's buffers (ds, dr) get the host's (hs, hr: the bytes the call reads and
 * the receive buffer's bytes), which are then poisoned: a result that never comes back cannot
 * pass. 0, or -1 (said). */
static int to_dev(coll_comm *c, void *ds, unsigned char *hs, size_t sbytes, void *dr, unsigned char *hr,
                  size_t rbytes) {
  coll_err e = {{0}};
  if (cfg_g.devemu) {
    devemu_copy(ds, hs, sbytes), devemu_copy(dr, hr, rbytes);
  } else if (coll_mem_copy(c, ds, hs, sbytes, &e) || coll_mem_copy(c, dr, hr, rbytes, &e)) {
    fprintf(stderr, "rank %d: to the device: %s\n", coll_comm_rank(c), e.msg);
    return -1;
  }
  memset(hs, 0x5a, sbytes);
  memset(hr, 0x5a, rbytes);
  return 0;
}

/* Both buffers back from the device (the send buffer too: it must come back unchanged). */
static int from_dev(coll_comm *c, unsigned char *hs, const void *ds, size_t sbytes, unsigned char *hr, const void *dr,
                    size_t rbytes) {
  coll_err e = {{0}};
  if (cfg_g.devemu) {
    devemu_copy(hs, ds, sbytes), devemu_copy(hr, dr, rbytes);
  } else if (coll_mem_copy(c, hs, ds, sbytes, &e) || coll_mem_copy(c, hr, dr, rbytes, &e)) {
    fprintf(stderr, "rank %d: from the device: %s\n", coll_comm_rank(c), e.msg);
    return -1;
  }
  return 0;
}

static int one_rank(const colls_cfg *cfg) {
  coll_err e = {{0}};
  coll_boot *b;
  coll_comm *c;
  coll_transport_kind tk;
  coll_algo algo;
  static const char *const kinds[] = {"rs", "ag", "bcast", "a2a"};
  int kind = 0;
  while (kind < 3 && strcmp(cfg->coll, kinds[kind])) kind++;
  if (coll_transport_parse(cfg->transport, &tk) || coll_colls_algo_parse((coll_kind)kind, cfg->algo, &algo)) return 1;
  coll_comm_opts o = {.transport = tk, .timeout_ms = 60000, .chunk_bytes = 4096};
  if (cfg->intra && coll_transport_parse(cfg->intra, &o.intra) == 0) o.has_intra = 1;
  if (coll_boot_open(&b, COLL_BOOT_AUTO, tk == COLL_MPI, 60000, &e) || coll_comm_open(&c, b, &o, &e)) {
    fprintf(stderr, "open: %s\n", e.msg);
    return 1;
  }
  coll_comm *ack = NULL; /* devemu's second transport (its receivers' words) */
  if (cfg->devemu) {
    coll_comm_opts ao = {.transport = COLL_TCP, .timeout_ms = 60000};
    if (coll_comm_open(&ack, b, &ao, &e)) {
      fprintf(stderr, "open: %s\n", e.msg);
      return 1;
    }
    devemu_install(c, cfg->devemu == 2, ack);
  }
  int n = coll_comm_size(c), me = coll_comm_rank(c), fails = 0;
  int pow2 = (n & (n - 1)) == 0;
  size_t counts[6] = {0, 1, 2, 7, (size_t)(n - 1), cfg->big}, maxc = 3 * cfg->big * (size_t)n + 64;
  /* on a GPU the calls get device buffers (ds, dr) and the test writes and checks host copies */
  int dev = coll_comm_device(c) >= 0, comm_mem = (cfg->mem_comm || dev) && !cfg->devemu;
  unsigned char *ds = cfg->devemu ? devemu_alloc(maxc * 8) : comm_mem ? coll_mem_alloc(c, maxc * 8, &e) : malloc(maxc * 8);
  unsigned char *dr = cfg->devemu ? devemu_alloc(maxc * 8) : comm_mem ? coll_mem_alloc(c, maxc * 8, &e) : malloc(maxc * 8);
  unsigned char *keep = malloc(maxc * 8);
  unsigned char *sb = dev ? malloc(maxc * 8) : ds, *rb = dev ? malloc(maxc * 8) : dr;
  double *want = malloc(maxc * sizeof *want);
  size_t *sc = calloc((size_t)n, sizeof *sc), *sd = calloc((size_t)n, sizeof *sd);
  size_t *rc = calloc((size_t)n, sizeof *rc), *rd = calloc((size_t)n, sizeof *rd);
  if (!ds || !dr || !sb || !rb || !keep || !want || !sc || !sd || !rc || !rd) {
    fprintf(stderr, "rank %d: buffers: %s\n", me, e.msg[0] ? e.msg : "out of memory");
    return 1;
  }
  const char *k = cfg->coll;
  /* every algorithm but native runs on any communicator, a device's (nccl, devemu) too */
  if (algo.kind != COLL_ALGO_NATIVE && !coll_colls_supported(c, (coll_kind)kind, algo)) {
    fprintf(stderr, "rank %d: %s %s: not supported on %s%s\n", me, k, cfg->algo, coll_comm_fabric(c),
            dev ? " (device memory)" : "");
    fails++;
  }
  for (int dt = 0; dt < COLL_NDTYPES && !fails; dt++)
    for (int op = 0; op < (strcmp(k, "rs") ? 1 : COLL_NOPS) && !fails; op++)
      for (int ci = 0; ci < 6 && !fails; ci++) {
        size_t cnt = counts[ci], es = coll_dtype_size((coll_dtype)dt), first = 0;
        coll_algo ran = {COLL_NALGOS, 0};
        int rcall = 0;
        if (!strcmp(k, "rs")) {
          fill(sb, cnt * (size_t)n, 0, me, (coll_dtype)dt, op);
          memcpy(keep, sb, cnt * (size_t)n * es);
          size_t sn = cnt * (size_t)n * es, rn = cnt * es;
          if (dev && to_dev(c, ds, sb, sn, dr, rb, rn)) return 1;
          rcall = coll_reduce_scatter(c, ds, dr, cnt, (coll_dtype)dt, (coll_op)op, algo, &ran, &e);
          if (dev && !rcall && from_dev(c, sb, ds, sn, rb, dr, rn)) return 1;
          for (size_t i = 0; i < cnt; i++) { /* my block of every rank's vector, combined */
            want[i] = val((size_t)me * cnt + i, 0, dt, op);
            for (int r = 1; r < n; r++) want[i] = combine(want[i], val((size_t)me * cnt + i, r, dt, op), (coll_op)op);
          }
          if (!rcall) fails += report(me, "reduce-scatter", (coll_dtype)dt, op, cnt, diff(rb, want, cnt, (coll_dtype)dt, &first), first);
          if (!rcall && memcmp(keep, sb, cnt * (size_t)n * es)) fails += report(me, "reduce-scatter's send buffer", (coll_dtype)dt, op, cnt, 1, 0);
        } else if (!strcmp(k, "ag")) {
          fill(sb, cnt, 0, me, (coll_dtype)dt, op);
          memset(rb, 0xa5, cnt * (size_t)n * es);
          size_t sn = cnt * es, rn = cnt * (size_t)n * es;
          if (dev && to_dev(c, ds, sb, sn, dr, rb, rn)) return 1;
          rcall = coll_allgather(c, ds, dr, cnt, (coll_dtype)dt, algo, &ran, &e);
          if (dev && !rcall && from_dev(c, sb, ds, sn, rb, dr, rn)) return 1;
          for (int r = 0; r < n; r++)
            for (size_t i = 0; i < cnt; i++) want[(size_t)r * cnt + i] = val(i, r, dt, op);
          if (!rcall) fails += report(me, "all-gather", (coll_dtype)dt, op, cnt, diff(rb, want, cnt * (size_t)n, (coll_dtype)dt, &first), first);
        } else if (!strcmp(k, "bcast")) {
          for (int root = 0; root < n && !rcall && !fails; root++) {
            if (me == root) fill(rb, cnt, 0, root, (coll_dtype)dt, op);
            else memset(rb, 0xa5, cnt * es);
            if (dev && to_dev(c, ds, sb, 0, dr, rb, cnt * es)) return 1;
            rcall = coll_broadcast(c, dr, cnt, (coll_dtype)dt, root, algo, &ran, &e);
            if (dev && !rcall && from_dev(c, sb, ds, 0, rb, dr, cnt * es)) return 1;
            for (size_t i = 0; i < cnt; i++) want[i] = val(i, root, dt, op);
            if (!rcall) fails += report(me, "broadcast", (coll_dtype)dt, op, cnt, diff(rb, want, cnt, (coll_dtype)dt, &first), first);
          }
        } else { /* a2a: the data rank p sends rank q starts at element p*1000 + q*100000 of p's values */
          size_t st = 0, rt = 0;
          /* the all-to-all of equal blocks (coll_alltoall) */
          int even = algo.kind == COLL_ALGO_BRUCK || algo.kind == COLL_ALGO_DIRECT;
          for (int q = 0; q < n; q++) {
            sc[q] = even ? cnt : a2a_count(me, q, cnt, ci), sd[q] = st, st += sc[q];
            rc[q] = even ? cnt : a2a_count(q, me, cnt, ci), rd[q] = rt, rt += rc[q];
          }
          for (int q = 0; q < n; q++) fill(sb + sd[q] * es, sc[q], (size_t)q * 100000, me, (coll_dtype)dt, op);
          memset(rb, 0xa5, rt * es);
          if (dev && to_dev(c, ds, sb, st * es, dr, rb, rt * es)) return 1;
          rcall = even ? coll_alltoall(c, ds, dr, cnt, (coll_dtype)dt, algo, &ran, &e)
                       : coll_alltoallv(c, ds, sc, sd, dr, rc, rd, (coll_dtype)dt, algo, &ran, &e);
          if (dev && !rcall && from_dev(c, sb, ds, st * es, rb, dr, rt * es)) return 1;
          for (int p = 0; p < n; p++)
            for (size_t i = 0; i < rc[p]; i++) want[rd[p] + i] = val((size_t)me * 100000 + i, p, dt, op);
          if (!rcall) fails += report(me, "all-to-allv", (coll_dtype)dt, op, cnt, diff(rb, want, rt, (coll_dtype)dt, &first), first);
        }
        if (rcall) {
          fprintf(stderr, "rank %d: %s %s count %zu: %s\n", me, k, coll_dtype_name(dt), cnt, e.msg);
          fails++;
        }
        /* what ran: what was asked, auto resolved, rhd/rd off a power of two the ring */
        coll_algo_kind want_kind = algo.kind;
        if ((want_kind == COLL_ALGO_RHD || want_kind == COLL_ALGO_RD) && !pow2) want_kind = COLL_ALGO_RING;
        /* hier of reduce-scatter and all-gather wants hosts of equal rank counts; broadcast's and
         * all-to-all's take any */
        if (want_kind == COLL_ALGO_HIER && kind < 2 && !layout_even(getenv("TEST_COLLS_LAYOUT"))) want_kind = COLL_ALGO_RING;
        /* direct reads in place where asked to (--mapped yes), else falls back to the ring (the
         * tree, pairwise); a single rank or nothing to move: whatever it says */
        int fallback = !strcmp(k, "bcast") ? COLL_ALGO_TREE : !strcmp(k, "a2a") ? COLL_ALGO_PAIRWISE : COLL_ALGO_RING;
        if (want_kind == COLL_ALGO_DIRECT && cfg->mapped >= 0 && n > 1 && cnt > 0)
          want_kind = cfg->mapped ? COLL_ALGO_DIRECT : (coll_algo_kind)fallback;
        else if (want_kind == COLL_ALGO_DIRECT && ran.kind == (coll_algo_kind)fallback)
          want_kind = ran.kind;
        if (!rcall && algo.kind != COLL_ALGO_AUTO && ran.kind != want_kind) {
          fprintf(stderr, "rank %d: %s ran algorithm %d, asked %s\n", me, k, (int)ran.kind, cfg->algo);
          fails++;
        }
        /* auto's broadcast: hier exactly where the ranks span hosts and some host has several */
        if (!rcall && algo.kind == COLL_ALGO_AUTO && kind == COLL_BCAST &&
            (ran.kind == COLL_ALGO_HIER) != layout_hier(getenv("TEST_COLLS_LAYOUT"))) {
          fprintf(stderr, "rank %d: auto's broadcast ran algorithm %d\n", me, (int)ran.kind);
          fails++;
        }
      }
  if (cfg->devemu) devemu_free(ds), devemu_free(dr);
  else if (comm_mem) coll_mem_free(c, ds), coll_mem_free(c, dr);
  else free(ds), free(dr);
  if (dev) free(sb), free(rb);
  free(keep), free(want), free(sc), free(sd), free(rc), free(rd);
  coll_comm_close(c);
  coll_comm_close(ack);
  coll_boot_close(b);
  if (cfg->devemu) devemu_release();
  return fails ? 1 : 0;
}

static char self_g[4096];

/* One test's group: n ranks, on hosts by letter where layout is set. */
typedef struct {
  int n;
  char layout[20];
} group_cfg;

static void test_group(void **state) {
  const group_cfg *gc = *state;
  int n = gc->n, port = test_free_port();
  assert_true(port > 0);
  pid_t pids[16];
  if (!strcmp(cfg_g.transport, "mpi")) { /* mpirun starts the ranks: this binary again */
#ifdef FABENCH_MPIRUN
    pid_t p = fork();
    if (p == 0) {
      char ns[16], big[32];
      snprintf(ns, sizeof ns, "%d", n);
      snprintf(big, sizeof big, "%zu", cfg_g.big);
      setenv("TEST_COLLS_CHILD", "1", 1);
      setenv("ASAN_OPTIONS", "detect_leaks=0", 1); /* Open MPI's unloaded plugins (test_allreduce.c) */
      execl(FABENCH_MPIRUN, FABENCH_MPIRUN, "-np", ns, "--oversubscribe", "--bind-to", "none", "--mca", "btl",
            "self,vader,tcp", self_g, "--transport", "mpi", "--coll", cfg_g.coll, "--algo", cfg_g.algo, "--big", big,
            (char *)NULL);
      _exit(127);
    }
    int failed = test_wait_ranks(&p, 1, 240);
    if (failed) fail_msg("%s mpi/%s at %d ranks: mpirun failed", cfg_g.coll, cfg_g.algo, n);
    return;
#else
    skip();
#endif
  }
  char tok[32];
  snprintf(tok, sizeof tok, "c%d-%d", (int)getpid(), n);
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p == 0) {
      test_rank_env(r, n, port, tok);
      if (gc->layout[0]) {
        char host[16];
        snprintf(host, sizeof host, "host-%c", gc->layout[r]);
        setenv("FABENCH_HOST", host, 1);
        setenv("TEST_COLLS_LAYOUT", gc->layout, 1);
      }
      _exit(one_rank(&cfg_g));
    }
    pids[r] = p;
  }
  int failed = test_wait_ranks(pids, n, 240);
  if (failed) fail_msg("%s %s/%s at %d ranks: %d rank(s) failed", cfg_g.coll, cfg_g.transport, cfg_g.algo, n, failed);
}

int main(int argc, char **argv) {
  colls_cfg *cfg = &cfg_g;
  *cfg = (colls_cfg){.transport = "tcp", .coll = "rs", .algo = "ring", .big = 4099, .mapped = -1};
  const char *ranks = "1,2,3,5,8", *layouts = NULL;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--layouts")) layouts = argv[i + 1];
    if (!strcmp(argv[i], "--transport")) cfg->transport = argv[i + 1];
    else if (!strcmp(argv[i], "--coll")) cfg->coll = argv[i + 1];
    else if (!strcmp(argv[i], "--algo")) cfg->algo = argv[i + 1];
    else if (!strcmp(argv[i], "--ranks")) ranks = argv[i + 1];
    else if (!strcmp(argv[i], "--big")) cfg->big = (size_t)strtoull(argv[i + 1], NULL, 10);
    else if (!strcmp(argv[i], "--mem")) cfg->mem_comm = !strcmp(argv[i + 1], "comm");
    else if (!strcmp(argv[i], "--intra")) cfg->intra = argv[i + 1];
    else if (!strcmp(argv[i], "--mapped")) cfg->mapped = !strcmp(argv[i + 1], "yes");
    else if (!strcmp(argv[i], "--devemu")) cfg->devemu = !strcmp(argv[i + 1], "grouped") ? 2 : 1;
  }
  if (getenv("TEST_COLLS_CHILD")) return one_rank(cfg);
  ssize_t l = readlink("/proc/self/exe", self_g, sizeof self_g - 1);
  if (l > 0) self_g[l] = '\0';
  coll_transport_kind tk;
  if (coll_transport_parse(cfg->transport, &tk) || !coll_transport_built(tk)) {
    printf("SKIP: transport %s is not built into this fabench\n", cfg->transport);
    return 0;
  }
  /* Is there a GPU (nccl)? */
  if (tk == COLL_NCCL) {
    int pr = test_transport_probe(tk, cfg->transport);
    if (pr) return pr;
  }
  coll_algo a;
  static const char *const kinds[] = {"rs", "ag", "bcast", "a2a"};
  int kind = -1;
  for (int i = 0; i < 4; i++)
    if (!strcmp(cfg->coll, kinds[i])) kind = i;
  if (kind < 0 || coll_colls_algo_parse((coll_kind)kind, cfg->algo, &a)) {
    fprintf(stderr, "no collective %s with algorithm %s\n", cfg->coll, cfg->algo);
    return 1;
  }
  static group_cfg gs[12];
  static char names[12][80];
  struct CMUnitTest tests[12];
  int nt = 0;
  char *list = strdup(layouts ? layouts : ranks), *save = NULL;
  for (char *t = strtok_r(list, ",", &save); t && nt < 12; t = strtok_r(NULL, ",", &save)) {
    gs[nt].n = layouts ? (int)strlen(t) : atoi(t);
    if (gs[nt].n < 1 || gs[nt].n > 16) continue;
    if (layouts) snprintf(gs[nt].layout, sizeof gs[nt].layout, "%s", t);
    snprintf(names[nt], sizeof names[nt], "%s_%s%s_%s_%s%s", cfg->coll, cfg->transport,
             cfg->devemu == 2 ? "_devemu_grouped" : cfg->devemu ? "_devemu_staged" : "", cfg->algo,
             layouts ? "layout" : "ranks", t);
    tests[nt] = (struct CMUnitTest){names[nt], test_group, NULL, NULL, &gs[nt]};
    nt++;
  }
  free(list);
  return _cmocka_run_group_tests(cfg->coll, tests, (size_t)nt, NULL, NULL);
}
