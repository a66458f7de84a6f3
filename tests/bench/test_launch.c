/* The local launcher (launch/launch.c): ranks get the rendezvous environment, a failing rank's
 * status is reported and becomes the run's, the others are stopped, signals to the launcher are
 * forwarded, mpirun starts ranks too; and launch_own_strip. The ranks are small /bin/sh
 * scripts that write what they saw into files, checked here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <getopt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"
#include "launch.h"
#include "test_util.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t k = fread(buf, 1, cap - 1, f);
  buf[k] = 0;
  fclose(f);
  return (int)k;
}

/* Runs launch_ranks_prog with stderr captured into err. */
static int launch_capture(const launch_opts *o, const char *prog, char *const argv[],
                          char *err, size_t cap) {
  char path[] = "/tmp/fabench-launch-err-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  int rc = launch_ranks_prog(o, prog, argv);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  read_file(path, err, cap);
  unlink(path);
  fputs(err, stderr); /* keep it in the test log */
  return rc;
}

static int pid_gone(long pid) { return kill((pid_t)pid, 0) < 0 && errno == ESRCH; }

/* ---- launch_own_strip ---- */
/* Parses a copy of args (NULL-terminated) as a command does (the shared flags of
 * BENCH_RANK_OPTIONS and options of its own that take values), noting -n/--ranks and
 * --emulate, and strips them: the count left, argv[0..count) compared with want. Copies, as
 * main's argv has them: equal string literals may share one address. */
static void strip_parsed(char *const *args, const char *const *want, int nwant) {
  int argc = 0;
  while (args[argc]) argc++;
  char **copy = calloc((size_t)argc + 1, sizeof *copy), **argv = calloc((size_t)argc + 1, sizeof *argv);
  assert_non_null(copy);
  assert_non_null(argv);
  for (int i = 0; i < argc; i++) assert_non_null(argv[i] = copy[i] = strdup(args[i]));
  static const struct option lo[] = {{"ranks", 1, 0, 'n'}, {"emulate", 1, 0, 'E'},
                                     {"mpirun-args", 1, 0, 'M'}, {"out", 1, 0, 'O'},
                                     {"iters", 1, 0, 'I'}, {"max-bytes", 1, 0, 'X'},
                                     {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  launch_own own = {0};
  opterr = 0;
  optind = 0; /* a fresh scan, whatever the last one left */
  int ch;
  while ((ch = getopt_long(argc, argv, ":n:h", lo, NULL)) != -1) {
    assert_true(ch != '?' && ch != ':');
    if (ch == 'n' || ch == 'E') launch_own_note(&own, argv, optind, optarg);
  }
  assert_int_equal(optind, argc);
  assert_int_equal(launch_own_strip(argc, argv, &own), nwant);
  for (int i = 0; i < nwant; i++) assert_string_equal(argv[i], want[i]);
  assert_null(argv[nwant]);
  for (int i = 0; i < argc; i++) free(copy[i]);
  free(copy);
  free(argv);
}

static void test_strip(void **state) {
  (void)state;
  strip_parsed((char *[]){"allreduce", "-n", "4", "--emulate", "1gbit", "--iters", "5", "-n3", "--ranks", "2",
                          "--emulate=5gbit", "--out", "d", "--ranks=6", "--ran", "7", NULL},
               (const char *[]){"allreduce", "--iters", "5", "--out", "d"}, 5);
  strip_parsed((char *[]){"p2p", "--out", "tcp", NULL}, (const char *[]){"p2p", "--out", "tcp"}, 3);
  /* values of other options that look like -n or --emulate stay, with their options: once
   * "--mpirun-args '-npernode 2'" lost its value and the run failed on a stray '1K' */
  strip_parsed((char *[]){"allreduce", "-n", "2", "--mpirun-args", "-npernode 2", "--max-bytes", "1K", "--out",
                          "-n", "--mpirun-args", "--emulate", "--mpirun-args=-n 2", NULL},
               (const char *[]){"allreduce", "--mpirun-args", "-npernode 2", "--max-bytes", "1K", "--out", "-n",
                                "--mpirun-args", "--emulate", "--mpirun-args=-n 2"},
               10);
  /* the same text as the value of -n, elsewhere, is another element */
  strip_parsed((char *[]){"allreduce", "-n", "2", "--out", "2", NULL}, (const char *[]){"allreduce", "--out", "2"}, 3);

  char *d[] = {"allreduce", "-n", "2", NULL};
  launch_own full = {.over = 1}; /* could not note them all: nothing stripped */
  assert_int_equal(launch_own_strip(3, d, &full), -1);
  assert_string_equal(d[1], "-n");
}

static void test_parse_rate(void **state) {
  (void)state;
  uint64_t b = 0;
  assert_int_equal(launch_emu_parse_rate("1gbit", &b), 0);
  assert_true(b == 1000000000ull);
  assert_int_equal(launch_emu_parse_rate("500mbit", &b), 0);
  assert_true(b == 500000000ull);
  assert_int_equal(launch_emu_parse_rate("10gbit", &b), 0);
  assert_true(b == 10000000000ull);
  assert_int_equal(launch_emu_parse_rate("2000kbit", &b), 0);
  assert_true(b == 2000000ull);
  const char *bad[] = {"", "1", "1g", "1gb", "1GBIT", "gbit", "-1gbit", "0gbit", "1.5gbit",
                       "1gbit ", " 1gbit", "999kbit", "401gbit", "99999999999999999999gbit"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(launch_emu_parse_rate(bad[i], &b), -1);
}

static void test_bad_opts(void **state) {
  (void)state;
  char err[1024];
  char *argv[] = {"-c", "exit 0", NULL};
  launch_opts o = {.n = 0, .timeout_s = 5};
  assert_int_equal(launch_capture(&o, "/bin/sh", argv, err, sizeof err), 2);
  o.n = 2;
  o.emulate = "fast";
  assert_int_equal(launch_capture(&o, "/bin/sh", argv, err, sizeof err), 2);
  assert_non_null(strstr(err, "fast"));
}

/* Every rank sees its own rank, the world, one root and one token; rank 0 alone inherits the
 * rendezvous socket, already listening (FABENCH_ROOT_FD), and no other rank holds a socket. */
static void test_env(void **state) {
  (void)state;
  char dir[64], path[128], buf[512];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
  setenv("FABENCH_RANK", "99", 1); /* the caller's must not leak through */
  int n = 2 + rand() % 6;
  char *argv[] = {"-c",
                  "echo \"$FABENCH_RANK $FABENCH_WORLD_SIZE $FABENCH_LOCAL_RANK $FABENCH_ROOT "
                  "$FABENCH_TOKEN $FABENCH_LAUNCHER $FABENCH_TIMEOUT_S ${FABENCH_ROOT_FD:--} "
                  "$(ls -l /proc/$$/fd | grep -c socket:)\" > \"$0/rank.$FABENCH_RANK\"",
                  dir, NULL};
  launch_opts o = {.n = n, .timeout_s = 17};
  assert_int_equal(launch_ranks_prog(&o, "/bin/sh", argv), 0);
  unsetenv("FABENCH_RANK");
  char root0[64] = "", token0[64] = "";
  for (int r = 0; r < n; r++) {
    snprintf(path, sizeof path, "%s/rank.%d", dir, r);
    assert_true(read_file(path, buf, sizeof buf) > 0);
    int rank, size, local, launcher, timeout, sockets;
    char root[64], token[64], rootfd[16];
    assert_int_equal(sscanf(buf, "%d %d %d %63s %63s %d %d %15s %d", &rank, &size, &local, root, token,
                            &launcher, &timeout, rootfd, &sockets), 9);
    if (r == 0) {
      assert_true(atoi(rootfd) > 2);
      assert_int_equal(sockets, 1);
    } else {
      assert_string_equal(rootfd, "-");
      assert_int_equal(sockets, 0);
    }
    assert_int_equal(rank, r);
    assert_int_equal(size, n);
    assert_int_equal(local, r);
    assert_int_equal(launcher, 1);
    assert_int_equal(timeout, 17);
    assert_int_equal(strlen(token), 32);
    assert_int_equal(strspn(token, "0123456789abcdef"), 32);
    int port = 0;
    assert_int_equal(sscanf(root, "127.0.0.1:%d", &port), 1);
    assert_true(port > 0 && port < 65536);
    if (r == 0) {
      strcpy(root0, root);
      strcpy(token0, token);
    }
    assert_string_equal(root, root0);
    assert_string_equal(token, token0);
  }
  snprintf(path, sizeof path, "%s/rank.%d", dir, n);
  assert_true(access(path, F_OK) != 0);
  /* A second job gets another token. */
  assert_int_equal(launch_ranks_prog(&o, "/bin/sh", argv), 0);
  snprintf(path, sizeof path, "%s/rank.0", dir);
  read_file(path, buf, sizeof buf);
  assert_null(strstr(buf, token0));
  assert_int_equal(tu_rmtree(dir), 0);
}

/* Ranks other than `bad` write their pid and sleep (ignoring SIGTERM when stubborn); `bad`
 * waits until they all have, then fails with `how` ("exit 7", "kill -9 $$"). */
static int run_failing(int n, int bad, const char *how, int stubborn, char *dir, char *err,
                       size_t cap, long *pids) {
  char script[1024];
  snprintf(script, sizeof script,
           "if [ \"$FABENCH_RANK\" = %d ]; then "
           "  while [ $(ls \"$0\"/pid.[0-9]* 2>/dev/null | wc -l) -lt %d ]; do sleep 0.02; done; %s; "
           "else echo $$ > \"$0/pid.tmp.$FABENCH_RANK\"; mv \"$0/pid.tmp.$FABENCH_RANK\" "
           "\"$0/pid.$FABENCH_RANK\"; %s exec sleep 60; fi",
           bad, n - 1, how, stubborn ? "trap '' TERM;" : "");
  char *argv[] = {"-c", script, dir, NULL};
  launch_opts o = {.n = n, .timeout_s = 10};
  int rc = launch_capture(&o, "/bin/sh", argv, err, cap);
  for (int r = 0; r < n; r++) {
    char path[128], buf[64];
    snprintf(path, sizeof path, "%s/pid.%d", dir, r);
    pids[r] = read_file(path, buf, sizeof buf) > 0 ? atol(buf) : 0;
  }
  return rc;
}

static void test_failing_rank(void **state) {
  (void)state;
  for (int trial = 0; trial < 3; trial++) {
    char dir[64], err[2048], want[128];
    long pids[16];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
    int n = 2 + rand() % 7, bad = rand() % n, code = 2 + rand() % 100;
    char how[32];
    snprintf(how, sizeof how, "exit %d", code);
    double t0 = now_s();
    int rc = run_failing(n, bad, how, 0, dir, err, sizeof err, pids);
    assert_int_equal(rc, code);
    assert_true(now_s() - t0 < 10);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "fabench: rank %d (%s): pid ", bad, host); /* rank and host */
    assert_non_null(strstr(err, want));
    snprintf(want, sizeof want, " exited with status %d\n", code);
    assert_non_null(strstr(err, want));
    for (int r = 0; r < n; r++) {
      if (r == bad) continue;
      assert_true(pids[r] > 0);
      assert_true(pid_gone(pids[r])); /* stopped and reaped */
    }
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* A rank that exits with an error does not cut the others short: they saw the same error (a
 * check every rank makes) and are still writing what they measured. Here they take 0.5 s to
 * end, within the launcher's settle time; each must have finished (its file written) and none
 * been signalled. */
static void test_failing_rank_lets_others_finish(void **state) {
  (void)state;
  char dir[64], err[2048], script[1024];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
  int n = 3, bad = 1;
  snprintf(script, sizeof script,
           "if [ \"$FABENCH_RANK\" = %d ]; then "
           "  while [ $(ls \"$0\"/pid.[0-9]* 2>/dev/null | wc -l) -lt %d ]; do sleep 0.02; done; exit 3; "
           "else trap 'echo > \"$0/term.$FABENCH_RANK\"; exit 143' TERM; echo $$ > \"$0/pid.$FABENCH_RANK\"; "
           "sleep 0.5; echo > \"$0/done.$FABENCH_RANK\"; exit 3; fi",
           bad, n - 1);
  char *argv[] = {"-c", script, dir, NULL};
  launch_opts o = {.n = n, .timeout_s = 10};
  assert_int_equal(launch_capture(&o, "/bin/sh", argv, err, sizeof err), 3);
  for (int r = 0; r < n; r++) {
    if (r == bad) continue;
    char path[128], buf[8];
    snprintf(path, sizeof path, "%s/done.%d", dir, r);
    if (read_file(path, buf, sizeof buf) < 0) fail_msg("rank %d was stopped before it ended:\n%s", r, err);
    snprintf(path, sizeof path, "%s/term.%d", dir, r);
    assert_true(read_file(path, buf, sizeof buf) < 0);
  }
  assert_int_equal(tu_rmtree(dir), 0);
}

static void test_killed_rank(void **state) {
  (void)state;
  char dir[64], err[2048], want[128];
  long pids[16];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
  int n = 3 + rand() % 4, bad = rand() % n;
  /* The others ignore SIGTERM: SIGKILL after the grace must still end them. */
  double t0 = now_s();
  int rc = run_failing(n, bad, "kill -9 $$", 1, dir, err, sizeof err, pids);
  assert_int_equal(rc, 1);
  assert_true(now_s() - t0 < 15);
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  snprintf(want, sizeof want, "fabench: rank %d (%s): pid ", bad, host);
  assert_non_null(strstr(err, want));
  assert_non_null(strstr(err, " killed by signal 9\n"));
  for (int r = 0; r < n; r++)
    if (r != bad) assert_true(pid_gone(pids[r]));
  assert_int_equal(tu_rmtree(dir), 0);
}

/* SIGINT / SIGTERM to the launcher reach the ranks; it returns 128 + signal. */
static void test_launcher_signal(void **state) {
  (void)state;
  const int sigs[] = {SIGINT, SIGTERM};
  for (int s = 0; s < 2; s++) {
    char dir[64];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
    int n = 3;
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
      char *argv[] = {"-c",
                      "echo $$ > \"$0/pid.tmp.$FABENCH_RANK\"; mv \"$0/pid.tmp.$FABENCH_RANK\" "
                      "\"$0/pid.$FABENCH_RANK\"; exec sleep 60",
                      dir, NULL};
      launch_opts o = {.n = n, .timeout_s = 10};
      _exit(launch_ranks_prog(&o, "/bin/sh", argv));
    }
    long pids[3] = {0};
    double t0 = now_s();
    for (int r = 0; r < n; r++) {
      char path[128], buf[64];
      snprintf(path, sizeof path, "%s/pid.%d", dir, r);
      while (read_file(path, buf, sizeof buf) <= 0 && now_s() - t0 < 10) usleep(10000);
      pids[r] = atol(buf);
      assert_true(pids[r] > 0);
    }
    kill(child, sigs[s]);
    int st;
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 128 + sigs[s]);
    assert_true(now_s() - t0 < 10);
    for (int r = 0; r < n; r++) assert_true(pid_gone(pids[r]));
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* Through mpirun: every rank runs, with the token; a failing rank fails the run. */
static void test_mpirun(void **state) {
  (void)state;
#ifndef FABENCH_MPIRUN
  skip(); /* built without MPI */
#else
  char dir[64], path[128], buf[256], err[4096];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
  int n = 3;
  char *argv[] = {"-c",
                  "echo \"$OMPI_COMM_WORLD_SIZE $FABENCH_TOKEN $FABENCH_LAUNCHER $FABENCH_TIMEOUT_S\""
                  " > \"$0/rank.$OMPI_COMM_WORLD_RANK\"",
                  dir, NULL};
  launch_opts o = {.n = n, .use_mpirun = 1, .timeout_s = 9,
                         .mpirun_args = " --mca  btl self,tcp "};
  assert_int_equal(launch_capture(&o, "/bin/sh", argv, err, sizeof err), 0);
  char token0[64] = "";
  for (int r = 0; r < n; r++) {
    snprintf(path, sizeof path, "%s/rank.%d", dir, r);
    assert_true(read_file(path, buf, sizeof buf) > 0);
    int size, launcher, timeout;
    char token[64];
    assert_int_equal(sscanf(buf, "%d %63s %d %d", &size, token, &launcher, &timeout), 4);
    assert_int_equal(size, n);
    assert_int_equal(strlen(token), 32);
    assert_int_equal(launcher, 1);
    assert_int_equal(timeout, 9);
    if (r == 0) strcpy(token0, token);
    assert_string_equal(token, token0);
  }
  char *fail[] = {"-c", "[ \"$OMPI_COMM_WORLD_RANK\" = 1 ] && exit 3; sleep 30", NULL};
  double t0 = now_s();
  assert_int_not_equal(launch_capture(&o, "/bin/sh", fail, err, sizeof err), 0);
  assert_true(now_s() - t0 < 20);
  assert_non_null(strstr(err, "fabench: mpirun (pid "));
  assert_int_equal(tu_rmtree(dir), 0);
#endif
}

/* A rank that dies by a signal leaves LLVM libomp's registration file,
 * /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> (libomp removes it only at a clean exit): the
 * launcher removes it once the rank is reaped, started directly or through mpirun, and leaves
 * every other process's alone. The ranks here write such a file the way libomp names it. */
static void check_omp_files(int use_mpirun) {
  char dir[64], path[128], buf[64], err[4096];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "launch"));
  int n = 3;
  char *argv[] = {"-c",
                  "r=${FABENCH_RANK:-$OMPI_COMM_WORLD_RANK}; echo $$ > \"$0/pid.$r\"; "
                  "echo x > /dev/shm/__KMP_REGISTERED_LIB_$$_$(id -u); "
                  "[ \"$r\" = 1 ] && { sleep 1; kill -9 $$; }; exec sleep 30",
                  dir, NULL};
  /* someone else's file (a live process that is no rank: ours) stays */
  char other[96];
  snprintf(other, sizeof other, "/dev/shm/__KMP_REGISTERED_LIB_%d_%d", (int)getppid(), (int)getuid());
  int other_fd = open(other, O_CREAT | O_EXCL | O_WRONLY, 0600);
  launch_opts o = {.n = n, .timeout_s = 9, .use_mpirun = use_mpirun,
                         .mpirun_args = use_mpirun ? " --mca btl self,tcp " : NULL};
  double t0 = now_s();
  assert_int_not_equal(launch_capture(&o, "/bin/sh", argv, err, sizeof err), 0);
  assert_true(now_s() - t0 < 20);
  int seen = 0;
  for (int r = 0; r < n; r++) {
    snprintf(path, sizeof path, "%s/pid.%d", dir, r);
    if (read_file(path, buf, sizeof buf) <= 0) continue; /* stopped before it began */
    seen++;
    char kmp[96];
    snprintf(kmp, sizeof kmp, "/dev/shm/__KMP_REGISTERED_LIB_%ld_%d", atol(buf), (int)getuid());
    int left = access(kmp, F_OK) == 0;
    unlink(kmp);
    assert_false(left);
  }
  assert_true(seen >= 2); /* rank 1 and one more at least ran: the test tested something */
  if (other_fd >= 0) {
    close(other_fd);
    int kept = access(other, F_OK) == 0;
    unlink(other);
    assert_true(kept);
  }
  assert_int_equal(tu_rmtree(dir), 0);
}

static void test_omp_files(void **state) {
  (void)state;
  check_omp_files(0);
#ifdef FABENCH_MPIRUN
  check_omp_files(1);
#endif
}

int main(void) {
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strip),          cmocka_unit_test(test_parse_rate),
      cmocka_unit_test(test_bad_opts),       cmocka_unit_test(test_env),
      cmocka_unit_test(test_failing_rank),   cmocka_unit_test(test_failing_rank_lets_others_finish),
      cmocka_unit_test(test_killed_rank),
      cmocka_unit_test(test_launcher_signal), cmocka_unit_test(test_mpirun),
      cmocka_unit_test(test_omp_files),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
