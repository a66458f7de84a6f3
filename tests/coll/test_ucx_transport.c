/* The ucx transport on its own: what it reports as its fabric under UCX_TLS, ordered matching of
 * many messages of awkward sizes in flight at once (checked against this file's own pattern),
 * and the errors: a tag or size that differs from the posted receive, and a peer that never
 * sends (the error names the peer's rank and host). Ranks are forked with the environment
 * rendezvous. Memory no peer maps is ordinary memory, not huge pages. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "test_ranks.h"

typedef int (*scenario_fn)(coll_comm *c, int rank, int n, const void *arg);

static int child(int rank, int n, int port, const char *tls, const char *devs,
                 int timeout_ms, scenario_fn fn, const void *arg) {
  test_rank_env(rank, n, port, "ucx-test");
  setenv("UCX_TLS", tls, 1);
  if (devs)
    setenv("UCX_NET_DEVICES", devs, 1);
  else
    unsetenv("UCX_NET_DEVICES");
  coll_err e = {{0}};
  coll_boot *b;
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 20000, &e)) {
    fprintf(stderr, "rank %d: boot: %s\n", rank, e.msg);
    return 1;
  }
  coll_comm_opts o = {.transport = COLL_UCX, .timeout_ms = timeout_ms};
  coll_comm *c;
  if (coll_comm_open(&c, b, &o, &e)) {
    fprintf(stderr, "rank %d: open: %s\n", rank, e.msg);
    coll_boot_close(b);
    return 1;
  }
  int rc = fn(c, rank, n, arg);
  coll_comm_close(c);
  coll_boot_close(b);
  return rc;
}

/* Runs the scenario on n forked ranks; returns how many failed. */
static int run_ranks(int n, const char *tls, const char *devs, int timeout_ms, scenario_fn fn,
                     const void *arg) {
  int port = test_free_port();
  pid_t pids[16];
  for (int r = 0; r < n; r++) {
    pids[r] = fork();
    if (pids[r] == 0) exit(child(r, n, port, tls, devs, timeout_ms, fn, arg)); /* exit: leak checks run */
  }
  return test_wait_ranks(pids, n, 60);
}

/* ---- fabric ---- */

static int sc_fabric(coll_comm *c, int rank, int n, const void *arg) {
  (void)n;
  const char *want = arg, *got = coll_comm_fabric(c);
  int ok;
  if (!strcmp(want, "shm")) /* shared memory: some of sysv/posix/cma, no network */
    ok = !strncmp(got, "ucx:", 4) && !strstr(got, "tcp") &&
         (strstr(got, "sysv") || strstr(got, "posix") || strstr(got, "cma"));
  else
    ok = !strcmp(got, want);
  if (!ok) fprintf(stderr, "rank %d: fabric '%s', expected '%s'\n", rank, got, want);
  return ok ? 0 : 1;
}

static void test_fabric_tcp_lo(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "tcp", "lo", 10000, sc_fabric, "ucx:tcp/lo"), 0);
}

static void test_fabric_posix(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "posix,self", NULL, 10000, sc_fabric, "ucx:posix"), 0);
}

static void test_fabric_shm(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, "sm,self", NULL, 10000, sc_fabric, "shm"), 0);
}

/* ---- ordered matching under load: every rank sends K messages of awkward sizes to every
 * rank (itself included), all posted at once; each byte is checked against the pattern ---- */

#define K_MSGS 12
static size_t msg_size(int from, int to, int k) {
  static const size_t sizes[] = {0, 1, 7, 8, 93, 94, 4095, 8193, 65537, 262143, 262145, 1000003};
  return sizes[(size_t)(from * 5 + to * 3 + k) % (sizeof sizes / sizeof *sizes)];
}
static unsigned char msg_byte(int from, int to, int k, size_t i) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(from * 7919 + to * 104729 + k * 15485863);
  x ^= x >> 13;
  return (unsigned char)(x * 0x5bd1e995u >> 24);
}

static int sc_ordered(coll_comm *c, int me, int n, const void *arg) {
  (void)arg;
  int total = 2 * n * K_MSGS, k = 0, bad = 0;
  coll_req *r = calloc((size_t)total, sizeof *r);
  unsigned char **in = calloc((size_t)(n * K_MSGS), sizeof *in);
  unsigned char **out = calloc((size_t)(n * K_MSGS), sizeof *out);
  coll_err e = {{0}};
  for (int p = 0; p < n; p++)
    for (int j = 0; j < K_MSGS; j++) {
      size_t bytes = msg_size(p, me, j);
      in[p * K_MSGS + j] = malloc(bytes + 1);
      memset(in[p * K_MSGS + j], 0, bytes + 1);
      /* the same tag for several messages: order, not the tag, decides the match */
      if (coll_irecv(c, p, in[p * K_MSGS + j], bytes, (uint32_t)(j % 3), &r[k++], &e)) goto fail;
    }
  for (int p = 0; p < n; p++)
    for (int j = 0; j < K_MSGS; j++) {
      size_t bytes = msg_size(me, p, j);
      unsigned char *b = out[p * K_MSGS + j] = malloc(bytes + 1);
      for (size_t i = 0; i < bytes; i++) b[i] = msg_byte(me, p, j, i);
      if (coll_isend(c, p, b, bytes, (uint32_t)(j % 3), &r[k++], &e)) goto fail;
    }
  if (coll_waitall(c, r, k, &e)) goto fail;
  for (int p = 0; p < n; p++)
    for (int j = 0; j < K_MSGS; j++) {
      size_t bytes = msg_size(p, me, j);
      for (size_t i = 0; i < bytes; i++)
        if (in[p * K_MSGS + j][i] != msg_byte(p, me, j, i)) {
          if (!bad)
            fprintf(stderr, "rank %d: message %d from %d (%zu bytes) wrong at byte %zu\n", me, j,
                    p, bytes, i);
          bad++;
          break;
        }
    }
  goto done;
fail:
  fprintf(stderr, "rank %d: %s\n", me, e.msg);
  bad = 1;
done:
  for (int i = 0; i < n * K_MSGS; i++) free(in[i]), free(out[i]);
  free(in);
  free(out);
  free(r);
  return bad ? 1 : 0;
}

static void test_ordered_tcp(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, "tcp", "lo", 20000, sc_ordered, NULL), 0);
}

static void test_ordered_shm(void **state) {
  (void)state;
  assert_int_equal(run_ranks(3, "sm,self", NULL, 20000, sc_ordered, NULL), 0);
}

/* ---- errors ---- */

typedef struct {
  size_t send_bytes, recv_bytes;
  uint32_t send_tag, recv_tag;
  const char *expect; /* in the receiver's error */
} mismatch_case;

static int sc_mismatch(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  const mismatch_case *m = arg;
  unsigned char buf[64] = {0};
  coll_req r;
  coll_err e = {{0}};
  if (me == 0) {
    if (coll_isend(c, 1, buf, m->send_bytes, m->send_tag, &r, &e) || coll_waitall(c, &r, 1, &e)) {
      fprintf(stderr, "sender: %s\n", e.msg);
      return 1;
    }
    return 0;
  }
  int rc = coll_irecv(c, 0, buf, m->recv_bytes, m->recv_tag, &r, &e);
  if (rc == 0) rc = coll_waitall(c, &r, 1, &e);
  if (rc == 0) {
    fprintf(stderr, "receiver: a mismatched message was accepted\n");
    return 1;
  }
  if (!strstr(e.msg, m->expect) || !strstr(e.msg, "rank 0")) {
    fprintf(stderr, "receiver: unexpected error: %s\n", e.msg);
    return 1;
  }
  return 0;
}

static void test_tag_mismatch(void **state) {
  (void)state;
  mismatch_case m = {16, 16, 5, 6, "protocol error"};
  assert_int_equal(run_ranks(2, "sm,self", NULL, 5000, sc_mismatch, &m), 0);
}

static void test_size_larger_than_posted(void **state) {
  (void)state;
  mismatch_case m = {32, 8, 5, 5, "protocol error"};
  assert_int_equal(run_ranks(2, "tcp", "lo", 5000, sc_mismatch, &m), 0);
}

static void test_size_smaller_than_posted(void **state) {
  (void)state;
  mismatch_case m = {8, 32, 5, 5, "protocol error"};
  assert_int_equal(run_ranks(2, "sm,self", NULL, 5000, sc_mismatch, &m), 0);
}

/* ---- tcp alone: large messages go eager ----
 * Rank 1 sends 1 MiB while rank 0 stays away from its worker for 2 s. Eager, the send is on
 * its way (written to the socket) at once; by rendezvous it waits for rank 0's reply, which
 * cannot come before rank 0 posts its receive (a protocol check: 1.2 s is 1000x what 1 MiB
 * takes on loopback). The chunk follows: 256 KiB where messages stream, 1 MiB where each
 * costs a handshake. A user's UCX_RNDV_THRESH is kept. */
typedef struct {
  int eager;    /* expected: 1 the send completes before the receiver posts */
  size_t chunk; /* expected coll_comm_chunk */
} eager_case;

static int sc_eager(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  const eager_case *w = arg;
  coll_err e = {{0}};
  size_t bytes = 1 << 20;
  unsigned char *b = malloc(bytes);
  int bad = 0;
  if (coll_comm_chunk(c) != w->chunk) {
    fprintf(stderr, "rank %d: chunk %zu, expected %zu\n", me, coll_comm_chunk(c), w->chunk);
    bad = 1;
  }
  coll_req r;
  if (me == 1) {
    for (size_t i = 0; i < bytes; i++) b[i] = (unsigned char)(i * 31 + 7);
    if (coll_isend(c, 0, b, bytes, 9, &r, &e)) goto fail;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (coll_waitall(c, &r, 1, &e)) goto fail;
    clock_gettime(CLOCK_MONOTONIC, &t);
    double took = (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9;
    int early = took < 1.2; /* the receiver posts after 2 s */
    if (early != w->eager) {
      fprintf(stderr, "rank 1: the send took %.2f s with the receiver away for 2 s (expected %s)\n",
              took, w->eager ? "eager: at once" : "rendezvous: until it posts");
      bad = 1;
    }
  } else {
    sleep(2);
    memset(b, 0, bytes);
    if (coll_irecv(c, 1, b, bytes, 9, &r, &e) || coll_waitall(c, &r, 1, &e)) goto fail;
    for (size_t i = 0; i < bytes; i++)
      if (b[i] != (unsigned char)(i * 31 + 7)) {
        fprintf(stderr, "rank 0: byte %zu wrong\n", i);
        bad = 1;
        break;
      }
  }
  free(b);
  return bad;
fail:
  fprintf(stderr, "rank %d: %s\n", me, e.msg);
  free(b);
  return 1;
}

static void test_tcp_alone_goes_eager(void **state) {
  (void)state;
  eager_case w = {1, COLL_CHUNK_DEFAULT};
  assert_int_equal(run_ranks(2, "tcp", "lo", 20000, sc_eager, &w), 0);
}

static void test_tcp_user_threshold_kept(void **state) {
  (void)state;
  eager_case w = {0, COLL_CHUNK_UCX};
  setenv("UCX_RNDV_THRESH", "16k", 1);
  int failed = run_ranks(2, "tcp", "lo", 20000, sc_eager, &w);
  unsetenv("UCX_RNDV_THRESH");
  assert_int_equal(failed, 0);
}

static void test_shm_keeps_rendezvous(void **state) {
  (void)state;
  eager_case w = {0, COLL_CHUNK_UCX};
  assert_int_equal(run_ranks(2, "posix,self", NULL, 20000, sc_eager, &w), 0);
}

/* Mapped buffers (coll_mem_alloc): ranks that pass different places of it to one all-reduce
 * get an error naming the other rank, rather than sums of the wrong elements. */
static int sc_mapped_elsewhere(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  (void)arg;
  coll_err e = {{0}};
  size_t count = 1 << 18;
  float *buf = coll_mem_alloc(c, count * sizeof *buf + 256, &e);
  if (!buf) {
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
    return 1;
  }
  int rc = 1;
  coll_algo ring = {COLL_ALGO_RING, 0};
  if (!strstr(coll_comm_fabric(c), "+rkey_ptr"))
    fprintf(stderr, "rank %d: fabric %s: not mapped\n", me, coll_comm_fabric(c));
  else if (coll_allreduce(c, buf + 16 * me, count, COLL_F32, COLL_SUM, ring, NULL, &e) == 0)
    fprintf(stderr, "rank %d: an all-reduce over different places succeeded\n", me);
  else if (!strstr(e.msg, "different buffer") || !strstr(e.msg, me ? "rank 0" : "rank 1"))
    fprintf(stderr, "rank %d: unexpected error: %s\n", me, e.msg);
  else
    rc = 0;
  coll_mem_free(c, buf);
  return rc;
}

/* Rank r's element i, exact in f32 summed over a few ranks. */
static float sum_input(size_t i, int r) { return (float)((i * 7 + (size_t)r * 13) % 101); }

/* Every element of buf against the sum over n ranks of sum_input; 0 when all are right. */
static int check_sums(const float *buf, size_t count, int n, int me) {
  for (size_t i = 0; i < count; i++) {
    float want = 0;
    for (int r = 0; r < n; r++) want += sum_input(i, r);
    if (buf[i] != want) {
      fprintf(stderr, "rank %d: element %zu is %g, want %g\n", me, i, buf[i], want);
      return 1;
    }
  }
  return 0;
}

/* auto on a mapped buffer runs the ring (which then reads in place) from 128 KiB on, and the
 * result is right on every element. */
static int sc_mapped_auto(coll_comm *c, int me, int n, const void *arg) {
  (void)arg;
  coll_err e = {{0}};
  size_t count = 1 << 18;
  float *buf = coll_mem_alloc(c, count * sizeof *buf, &e);
  if (!buf) {
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
    return 1;
  }
  for (size_t i = 0; i < count; i++) buf[i] = sum_input(i, me);
  coll_algo autoa = {COLL_ALGO_AUTO, 0}, ran = {COLL_ALGO_NATIVE, 0};
  int rc = 1;
  if (coll_allreduce(c, buf, count, COLL_F32, COLL_SUM, autoa, &ran, &e) != 0)
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
  else if (ran.kind != COLL_ALGO_RING)
    fprintf(stderr, "rank %d: auto ran algorithm %d on a mapped 1 MiB buffer, not the ring\n", me, (int)ran.kind);
  else
    rc = check_sums(buf, count, n, me);
  coll_mem_free(c, buf);
  return rc;
}

static void test_mapped_auto_runs_ring(void **state) {
  (void)state;
  /* 4 ranks: there the model alone picks rhd at 1 MiB */
  assert_int_equal(run_ranks(4, "sm,self", NULL, 5000, sc_mapped_auto, NULL), 0);
}

static void test_mapped_places_differ(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "sm,self", NULL, 5000, sc_mapped_elsewhere, NULL), 0);
}

/* The mapped ring's stores are in the fabric: cached unless FABENCH_RING_STREAM_BYTES asks
 * ("+rkey_ptr" alone), streamed from that size where it does ("+rkey_ptr+nt<size>"), so that
 * runs of the two are fitted apart. arg: the fabric's expected ending. */
static int sc_mapped_fabric(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  const char *want = arg;
  coll_err e = {{0}};
  void *buf = coll_mem_alloc(c, 1 << 20, &e), *more = buf ? coll_mem_alloc(c, 1 << 20, &e) : NULL;
  if (!more) {
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
    coll_mem_free(c, buf);
    return 1;
  }
  const char *fab = coll_comm_fabric(c);
  size_t fl = strlen(fab), wl = strlen(want);
  /* the ending, and no other "+nt" before it (the second allocation added none) */
  int rc = fl < wl || strcmp(fab + fl - wl, want) || strstr(fab, "+nt") != strstr(fab + fl - wl, "+nt");
  if (rc) fprintf(stderr, "rank %d: fabric '%s', want it to end in '%s' (once)\n", me, fab, want);
  coll_mem_free(c, more);
  coll_mem_free(c, buf);
  return rc;
}

static void test_mapped_stream_in_fabric(void **state) {
  (void)state;
  unsetenv("FABENCH_RING_STREAM_BYTES");
  assert_int_equal(run_ranks(2, "sm,self", NULL, 5000, sc_mapped_fabric, "+rkey_ptr"), 0);
  setenv("FABENCH_RING_STREAM_BYTES", "8M", 1);
  int failed = run_ranks(2, "sm,self", NULL, 5000, sc_mapped_fabric, "+rkey_ptr+nt8M");
  setenv("FABENCH_RING_STREAM_BYTES", "0", 1);
  failed += run_ranks(2, "sm,self", NULL, 5000, sc_mapped_fabric, "+rkey_ptr+nt0");
  unsetenv("FABENCH_RING_STREAM_BYTES");
  assert_int_equal(failed, 0);
}

/* The VmFlags of the mapping that holds p (/proc/self/smaps), into flags; -1: not found. */
static int vm_flags_at(const void *p, char *flags, size_t cap) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  int inside = 0, rc = -1;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) /* a mapping's first line; its fields follow */
      inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
    else if (inside && !strncmp(line, "VmFlags:", 8)) {
      snprintf(flags, cap, "%s", line + 8);
      flags[strcspn(flags, "\n")] = '\0';
      rc = 0;
      break;
    }
  }
  fclose(f);
  return rc;
}

/* Memory no peer maps (ucx over tcp alone) is ordinary memory, not UCX's transparent or
 * explicit huge pages (VmFlags hg / ht), on which a training step's compute ran 1.3-2x slower
 * in spells; an all-reduce over it is right on every element. */
static int sc_unmapped_plain(coll_comm *c, int me, int n, const void *arg) {
  (void)arg;
  coll_err e = {{0}};
  size_t count = (8u << 20) / sizeof(float) + 3;
  float *buf = coll_mem_alloc(c, count * sizeof *buf, &e);
  if (!buf) {
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
    return 1;
  }
  for (size_t i = 0; i < count; i++) buf[i] = sum_input(i, me);
  char flags[512] = "";
  int rc = 1;
  coll_algo ring = {COLL_ALGO_RING, 0};
  if (strstr(coll_comm_fabric(c), "+rkey_ptr"))
    fprintf(stderr, "rank %d: fabric %s: mapped over tcp\n", me, coll_comm_fabric(c));
  else if (vm_flags_at(buf, flags, sizeof flags))
    fprintf(stderr, "rank %d: no mapping in /proc/self/smaps holds %p\n", me, (void *)buf);
  else if (strstr(flags, " hg") || strstr(flags, " ht"))
    fprintf(stderr, "rank %d: the buffer is on huge pages (VmFlags:%s)\n", me, flags);
  else if (coll_allreduce(c, buf, count, COLL_F32, COLL_SUM, ring, NULL, &e))
    fprintf(stderr, "rank %d: %s\n", me, e.msg);
  else
    rc = check_sums(buf, count, n, me);
  coll_mem_free(c, buf);
  return rc;
}

static void test_unmapped_is_plain_memory(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "tcp,self", "lo", 20000, sc_unmapped_plain, NULL), 0);
}

/* Rank 0 leaves without sending; rank 1's receive times out with an error naming rank 0 and
 * its host. */
static int sc_silent_peer(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  (void)arg;
  if (me == 0) _exit(0); /* gone, without a goodbye */
  unsigned char buf[8];
  coll_req r;
  coll_err e = {{0}};
  if (coll_irecv(c, 0, buf, sizeof buf, 1, &r, &e) == 0 && coll_waitall(c, &r, 1, &e) == 0) {
    fprintf(stderr, "a receive from a silent peer completed\n");
    return 1;
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  if (!strstr(e.msg, "rank 0") || !strstr(e.msg, coll_comm_host(c, 0)) ||
      strcmp(coll_comm_host(c, 0), host)) {
    fprintf(stderr, "the error does not name rank 0 on %s: %s\n", host, e.msg);
    return 1;
  }
  return 0;
}

static void test_silent_peer_times_out(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "sm,self", NULL, 500, sc_silent_peer, NULL), 0);
}

/* Rank 0 is killed after the wire-up; rank 1, waiting with a 20 s timeout, must hear of it
 * at once (UCX's peer error handling over tcp; the watched pid on shared memory), with an error
 * naming rank 0 and its host. */
static int sc_dead_peer(coll_comm *c, int me, int n, const void *arg) {
  (void)n;
  const char *cause = arg; /* how it must have been noticed */
  if (me == 0) {
    usleep(200 * 1000); /* rank 1 is waiting by now */
    raise(SIGKILL);
  }
  unsigned char buf[8];
  coll_req r;
  coll_err e = {{0}};
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (coll_irecv(c, 0, buf, sizeof buf, 1, &r, &e) == 0 && coll_waitall(c, &r, 1, &e) == 0) {
    fprintf(stderr, "a receive from a dead peer completed\n");
    return 1;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double took = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (took > 5.0 || !strstr(e.msg, "is gone") || !strstr(e.msg, cause) || !strstr(e.msg, "rank 0 (") ||
      !strstr(e.msg, coll_comm_host(c, 0))) {
    fprintf(stderr, "the dead peer was reported after %.1f s as: %s\n", took, e.msg);
    return 1;
  }
  return 0;
}

static void test_dead_peer_tcp(void **state) {
  (void)state;
  setenv("FABENCH_UCX_PEER_ERR", "peer", 1); /* UCX's handler, as for peers on other hosts */
  int failed = run_ranks(2, "tcp", "lo", 20000, sc_dead_peer, "UCX peer failure");
  unsetenv("FABENCH_UCX_PEER_ERR");
  assert_int_equal(failed, 1); /* rank 0, killed */
}

static void test_dead_peer_shm(void **state) {
  (void)state;
  assert_int_equal(run_ranks(2, "sm,self", NULL, 20000, sc_dead_peer, "exited"), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fabric_tcp_lo),
      cmocka_unit_test(test_fabric_posix),
      cmocka_unit_test(test_fabric_shm),
      cmocka_unit_test(test_ordered_tcp),
      cmocka_unit_test(test_ordered_shm),
      cmocka_unit_test(test_tag_mismatch),
      cmocka_unit_test(test_size_larger_than_posted),
      cmocka_unit_test(test_size_smaller_than_posted),
      cmocka_unit_test(test_silent_peer_times_out),
      cmocka_unit_test(test_dead_peer_tcp),
      cmocka_unit_test(test_dead_peer_shm),
      cmocka_unit_test(test_mapped_places_differ),
      cmocka_unit_test(test_mapped_auto_runs_ring),
      cmocka_unit_test(test_mapped_stream_in_fabric),
      cmocka_unit_test(test_unmapped_is_plain_memory),
      cmocka_unit_test(test_tcp_alone_goes_eager),
      cmocka_unit_test(test_tcp_user_threshold_kept),
      cmocka_unit_test(test_shm_keeps_rendezvous),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
