/* The network setup's and the tcp transport's protocol checks: a striped message whose sender
 * and receiver disagree about its size, connections that say nothing to the tcp transport's
 * listener, a rendezvous address where nothing listens, and a rank that never joins the
 * rendezvous (every rank that did must name it). An argument runs only the tests it matches. */
#define _GNU_SOURCE 1
#include <errno.h>
#include <poll.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "coll.h"
#include "coll_internal.h"
#include "sock.h"
#include "test_ranks.h"

/* ---- the tcp transport's striping header ---- */

/* A connected pair of loopback TCP sockets: *a the connecting end, *b the accepted one. */
static void tcp_pair(int *a, int *b) {
  char err[256];
  int lfd, port;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 4, &lfd, &port, err, sizeof err), 0);
  double dl = coll_sock_now() + 5;
  if (coll_sock_connect("127.0.0.1", port, dl, a, err, sizeof err)) fail_msg("%s", err);
  if (coll_sock_accept(lfd, dl, b, err, sizeof err)) fail_msg("%s", err);
  close(lfd);
}

#define TCP_TEST_MAX_STREAMS 4

typedef struct {
  char hosts[2][COLL_HOST_MAX];
  coll_comm cm[2];
  coll_transport *t[2];
} tcp_two;

/* Ranks 0 and 1 of a tcp transport with `streams` connections each way, in this process. */
static void tcp_two_open(tcp_two *w, int streams) {
  memset(w, 0, sizeof *w);
  snprintf(w->hosts[0], COLL_HOST_MAX, "host0");
  snprintf(w->hosts[1], COLL_HOST_MAX, "host1");
  int fds[2][2 * TCP_TEST_MAX_STREAMS];
  for (int i = 0; i < 2 * streams; i++) fds[0][i] = fds[1][i] = -1;
  for (int s = 0; s < streams; s++) tcp_pair(&fds[0][streams + s], &fds[1][s]); /* [peer * streams + s] */
  for (int r = 0; r < 2; r++) {
    w->cm[r].rank = r;
    w->cm[r].size = w->cm[r].world_size = 2;
    w->cm[r].world_rank = r;
    w->cm[r].hosts = w->hosts;
    coll_err e = {{0}};
    if (coll_tcp_from_fds(&w->t[r], &w->cm[r], streams, fds[r], &e)) fail_msg("%s", e.msg);
  }
}

static void tcp_two_close(tcp_two *w) {
  for (int r = 0; r < 2; r++) w->t[r]->ops->close(w->t[r]);
}

/* Rank 1 sends sbytes to rank 0, which receives rbytes; both are progressed in turn until both
 * are done, one fails or 3 s pass. Returns the receiver's status (0, or -1 with e); *done says
 * whether the receive completed. */
static int tcp_two_exchange(tcp_two *w, char *sbuf, size_t sbytes, char *rbuf, size_t rbytes, int *done,
                            coll_err *e) {
  coll_req rs, rr;
  coll_err es = {{0}};
  assert_int_equal(w->t[1]->ops->isend(w->t[1], 0, sbuf, sbytes, 7, &rs, &es), 0);
  assert_int_equal(w->t[0]->ops->irecv(w->t[0], 1, rbuf, rbytes, 7, &rr, e), 0);
  int sdone = 0;
  *done = 0;
  double until = coll_sock_now() + 3;
  while (coll_sock_now() < until && !(sdone && *done)) {
    if (!sdone && w->t[1]->ops->test(w->t[1], &rs, &sdone, &es) != 0) fail_msg("sender: %s", es.msg);
    if (!*done && w->t[0]->ops->test(w->t[0], &rr, done, e) != 0) return -1;
  }
  return 0;
}

#define TCP_TEST_S (96u * 1024u) /* under the striping threshold; twice it is over */

/* Sender and receiver disagree about a message's size, one side striping it over both streams
 * and the other not: each part alone looks right, so only the whole message's size in the
 * header tells. The mismatch is reported at once, naming both sizes, either way round. */
static void test_tcp_stripe_size_mismatch(void **st) {
  (void)st;
  char *sbuf = calloc(2, TCP_TEST_S), *rbuf = calloc(2, TCP_TEST_S);
  assert_true(sbuf && rbuf);
  static const size_t sizes[2][2] = {{2 * TCP_TEST_S, TCP_TEST_S}, {TCP_TEST_S, 2 * TCP_TEST_S}};
  for (int k = 0; k < 2; k++) {
    tcp_two w;
    tcp_two_open(&w, 2);
    coll_err e = {{0}};
    int done = 0;
    int rc = tcp_two_exchange(&w, sbuf, sizes[k][0], rbuf, sizes[k][1], &done, &e);
    if (rc == 0)
      fail_msg("sent %zu bytes, received as %zu: %s", sizes[k][0], sizes[k][1],
               done ? "accepted" : "no error within 3 s");
    char want[128];
    snprintf(want, sizeof want, "of %zu bytes, expected seq 0 tag 0x7 of %zu bytes", sizes[k][0], sizes[k][1]);
    if (!strstr(e.msg, "rank 0 (host0): protocol mismatch with rank 1 (host1)") || !strstr(e.msg, want))
      fail_msg("sent %zu bytes, received as %zu: '%s'", sizes[k][0], sizes[k][1], e.msg);
    print_message("%s\n", e.msg);
    tcp_two_close(&w);
  }
  free(sbuf);
  free(rbuf);
}

/* Messages that agree still go through, striped and not, with their bytes intact. */
static void test_tcp_stripe_sizes_agree(void **st) {
  (void)st;
  static const size_t sizes[] = {0, 1, TCP_TEST_S, 128u * 1024u, 2 * TCP_TEST_S + 3, 1u << 20};
  char *sbuf = malloc(1u << 20), *rbuf = malloc(1u << 20);
  assert_true(sbuf && rbuf);
  for (size_t i = 0; i < 1u << 20; i++) sbuf[i] = (char)(i * 7 + 1);
  for (int streams = 1; streams <= 3; streams += 2) {
    tcp_two w;
    tcp_two_open(&w, streams);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
      memset(rbuf, 0, 1u << 20);
      coll_err e = {{0}};
      int done = 0;
      if (tcp_two_exchange(&w, sbuf, sizes[k], rbuf, sizes[k], &done, &e) != 0)
        fail_msg("%d streams, %zu bytes: %s", streams, sizes[k], e.msg);
      if (!done) fail_msg("%d streams, %zu bytes: not received within 3 s", streams, sizes[k]);
      assert_memory_equal(rbuf, sbuf, sizes[k]);
    }
    tcp_two_close(&w);
  }
  free(sbuf);
  free(rbuf);
}

/* ---- the tcp transport's listener: hellos ---- */

/* The hello a connecting rank sends first (transport_tcp.c's tcp_hello, read independently). */
typedef struct {
  uint32_t magic;
  int32_t rank, stream, size;
} test_hello;
#define TEST_HELLO_MAGIC 0x46425448u

static int test_connect(int port) {
  char err[256];
  int fd;
  if (coll_sock_connect("127.0.0.1", port, coll_sock_now() + 5, &fd, err, sizeof err)) fail_msg("%s", err);
  return fd;
}

static void test_send(int fd, const void *p, size_t n) {
  assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* 1 when the peer closed fd within ms, 0 when it is still open, a byte sent -1. */
static int test_closed_within(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, ms) != 1) return 0;
  char c;
  ssize_t r = recv(fd, &c, 1, MSG_DONTWAIT);
  return r == 0 || (r < 0 && errno == ECONNRESET) ? 1 : r > 0 ? -1 : 0;
}

/* Strangers connect to a rank's tcp listener first and say nothing, or something wrong; the real
 * ranks' connections queue behind them. Every connection's hello is read at once: the real
 * ones are identified in far less than the 5 s a single stranger may take, each to its own
 * (rank, stream), and the strangers, the wrong hellos and the duplicate are closed. */
static void test_tcp_hellos_not_delayed(void **st) {
  (void)st;
  enum { RANK = 0, SIZE = 3, STREAMS = 2, NSILENT = 3 };
  char err[256];
  int lfd, port;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 64, &lfd, &port, err, sizeof err), 0);
  int silent[NSILENT], bad[5], real[SIZE][STREAMS], dup = -1;
  for (int i = 0; i < NSILENT; i++) silent[i] = test_connect(port);
  test_hello wrong[] = {{0x12345678u, 1, 0, SIZE},       /* not a hello */
                        {TEST_HELLO_MAGIC, 1, 0, SIZE + 1}, /* another world */
                        {TEST_HELLO_MAGIC, 0, 0, SIZE},     /* a rank that connects to no one */
                        {TEST_HELLO_MAGIC, 1, STREAMS, SIZE}};
  for (int i = 0; i < 4; i++) {
    bad[i] = test_connect(port);
    test_send(bad[i], &wrong[i], sizeof wrong[i]);
  }
  bad[4] = test_connect(port); /* half a hello, then nothing */
  test_hello half = {TEST_HELLO_MAGIC, 2, 1, SIZE};
  test_send(bad[4], &half, sizeof half / 2);
  for (int r = RANK + 1; r < SIZE; r++)
    for (int s = 0; s < STREAMS; s++) {
      real[r][s] = test_connect(port);
      test_hello h = {TEST_HELLO_MAGIC, r, s, SIZE};
      test_send(real[r][s], &h, sizeof h);
      if (r == 1 && s == 0) { /* a second (1, 0): the first one keeps its place */
        dup = test_connect(port);
        test_send(dup, &h, sizeof h);
      }
    }
  int fds[SIZE * STREAMS];
  for (int i = 0; i < SIZE * STREAMS; i++) fds[i] = -1;
  double t0 = coll_sock_now();
  int rc = coll_tcp_accept_hellos(fds, lfd, RANK, SIZE, STREAMS, t0 + 30, 5.0, err, sizeof err);
  double took = coll_sock_now() - t0;
  if (rc) fail_msg("after %.1f s: %s", took, err);
  /* one stranger's 5 s would be too long: they are not waited on in turn */
  if (took > 4.5) fail_msg("identifying the ranks took %.1f s behind %d silent connections", took, NSILENT);
  for (int r = RANK + 1; r < SIZE; r++)
    for (int s = 0; s < STREAMS; s++) {
      int fd = fds[r * STREAMS + s];
      if (fd < 0) fail_msg("rank %d stream %d not identified", r, s);
      char c = (char)(r * 10 + s), got = 0;
      test_send(fd, &c, 1);
      struct pollfd p = {.fd = real[r][s], .events = POLLIN};
      if (poll(&p, 1, 2000) != 1 || recv(real[r][s], &got, 1, 0) != 1 || got != c)
        fail_msg("rank %d stream %d: its connection is not the one it came on", r, s);
      close(fd);
      close(real[r][s]);
    }
  for (int i = 0; i < RANK * STREAMS; i++) assert_int_equal(fds[i], -1);
  for (int i = 0; i < NSILENT; i++) {
    if (test_closed_within(silent[i], 2000) != 1) fail_msg("silent connection %d left open", i);
    close(silent[i]);
  }
  for (int i = 0; i < 5; i++) {
    if (test_closed_within(bad[i], 2000) != 1) fail_msg("wrong hello %d left open", i);
    close(bad[i]);
  }
  if (test_closed_within(dup, 2000) != 1) fail_msg("the duplicate hello was left open");
  close(dup);
  close(lfd);
}

/* A connection that says nothing is dropped after its own hello time, and the rank that
 * connects afterwards is still identified before the deadline. */
static void test_tcp_silent_hello_dropped(void **st) {
  (void)st;
  char err[256];
  int lfd, port;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 8, &lfd, &port, err, sizeof err), 0);
  int stranger = test_connect(port);
  pid_t pid = fork();
  if (pid == 0) { /* the real rank connects only once the stranger has been dropped */
    int dropped = test_closed_within(stranger, 3000) == 1;
    int fd = test_connect(port);
    test_hello h = {TEST_HELLO_MAGIC, 1, 0, 2};
    _exit(send(fd, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h && dropped ? 0 : 1);
  }
  int fds[2] = {-1, -1};
  double t0 = coll_sock_now();
  int rc = coll_tcp_accept_hellos(fds, lfd, 0, 2, 1, t0 + 10, 0.3, err, sizeof err);
  double took = coll_sock_now() - t0;
  int status = 0;
  waitpid(pid, &status, 0);
  if (rc) fail_msg("%s", err);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("the silent connection was not dropped");
  if (took > 2.5) fail_msg("took %.1f s", took);
  assert_true(fds[1] >= 0);
  close(fds[1]);
  close(stranger);
  close(lfd);
}

/* Ranks that never come: the wait ends at the deadline, with what was identified kept. */
static void test_tcp_hellos_deadline(void **st) {
  (void)st;
  char err[256];
  int lfd, port;
  assert_int_equal(coll_sock_listen("127.0.0.1", 0, 8, &lfd, &port, err, sizeof err), 0);
  int silent = test_connect(port), one = test_connect(port);
  test_hello h = {TEST_HELLO_MAGIC, 1, 0, 3};
  test_send(one, &h, sizeof h);
  int fds[3] = {-1, -1, -1};
  double t0 = coll_sock_now();
  assert_int_equal(coll_tcp_accept_hellos(fds, lfd, 0, 3, 1, t0 + 0.5, 5.0, err, sizeof err), -1);
  double took = coll_sock_now() - t0;
  if (took < 0.45 || took > 2.5) fail_msg("gave up after %.2f s, not at the deadline", took);
  if (!strstr(err, "timed out")) fail_msg("'%s'", err);
  assert_true(fds[1] >= 0);
  assert_int_equal(fds[2], -1);
  assert_int_equal(test_closed_within(silent, 1000), 1);
  close(fds[1]);
  close(one);
  close(silent);
  close(lfd);
}

/* ---- the rendezvous ---- */

static pid_t spawn(test_child_fn fn, int arg, int *rfd) {
  pid_t pid = test_child_spawn(fn, arg, rfd);
  assert_true(pid > 0);
  return pid;
}

static int finish(pid_t pid, int rfd, char *out, size_t cap) { return test_child_finish(pid, rfd, out, cap, 30); }

static int g_port; /* per test, set before forking */

/* arg: rank * 100 + size * 10 (+ 0); the rendezvous times out after 1500 ms. */
static int child_boot(int arg, char *err, size_t cap) {
  int rank = arg / 100, size = (arg / 10) % 10;
  test_rank_env(rank, size, g_port, "job");
  coll_boot *b;
  coll_err e = {{0}};
  if (coll_boot_open(&b, COLL_BOOT_ENV, 0, 1500, &e) != 0) {
    snprintf(err, cap, "%s", e.msg);
    return 1;
  }
  coll_boot_close(b);
  return 0;
}

/* Nothing listens at the rendezvous address: the connection is refused every time, and the
 * error says so (not "timed out"), with a hint to check the address. */
static void test_refused_root_named(void **st) {
  (void)st;
  int port = test_free_port();
  char err[512];
  int fd;
  double t0 = coll_sock_now();
  assert_int_equal(coll_sock_connect("127.0.0.1", port, t0 + 0.4, &fd, err, sizeof err), -1);
  char want[128];
  snprintf(want, sizeof want, "connection refused by 127.0.0.1:%d for 0.", port);
  if (!strstr(err, want)) fail_msg("'%s' does not say '%s'", err, want);
  assert_null(strstr(err, "timed out"));
  /* the bootstrap adds where to look */
  g_port = port;
  int f1;
  pid_t p1 = spawn(child_boot, 1 * 100 + 2 * 10, &f1);
  char e1[1024];
  assert_int_not_equal(finish(p1, f1, e1, sizeof e1), 0);
  snprintf(want, sizeof want, "cannot reach rank 0 at 127.0.0.1:%d: connection refused by", port);
  if (!strstr(e1, want) || !strstr(e1, "is rank 0 running, and is FABENCH_ROOT its address and port?"))
    fail_msg("'%s'", e1);
  print_message("%s\n", e1);
}

/* Rank 2 of 3 never starts: rank 0 names it, and so does rank 1, which joined (told by rank 0
 * before it gives up), also when rank 1 started first and its own deadline comes first. */
static void test_missing_rank_named_by_all(void **st) {
  (void)st;
  g_port = test_free_port();
  int f0, f1;
  pid_t p1 = spawn(child_boot, 1 * 100 + 3 * 10, &f1);
  usleep(300 * 1000);
  pid_t p0 = spawn(child_boot, 0 * 100 + 3 * 10, &f0);
  char e0[1024], e1[1024];
  double t0 = coll_sock_now();
  int s1 = finish(p1, f1, e1, sizeof e1), s0 = finish(p0, f0, e0, sizeof e0);
  double took = coll_sock_now() - t0;
  if (!s0 || !strstr(e0, "missing ranks: 2")) fail_msg("rank 0: %d '%s'", s0, e0);
  if (!s1 || !strstr(e1, "rank 1 (") || !strstr(e1, "rendezvous failed: rank 0 (") ||
      !strstr(e1, "reports rank 2 missing after 1500 ms"))
    fail_msg("rank 1: %d '%s'", s1, e1);
  if (took > 10) fail_msg("the ranks took %.1f s to fail", took);
  print_message("%s\n%s\n", e0, e1);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (argc > 1) cmocka_set_test_filter(argv[1]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_tcp_stripe_size_mismatch),
      cmocka_unit_test(test_tcp_stripe_sizes_agree),
      cmocka_unit_test(test_tcp_hellos_not_delayed),
      cmocka_unit_test(test_tcp_silent_hello_dropped),
      cmocka_unit_test(test_tcp_hellos_deadline),
      cmocka_unit_test(test_refused_root_named),
      cmocka_unit_test(test_missing_rank_named_by_all),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
