/* Emulated fabrics (launch/emulate.c through launch/launch.c): each rank in its own namespace,
 * reaching the others only over its shaped link; nothing of a run is left behind, whether it
 * ends well, fails, is interrupted, or its launcher is killed (then the next run cleans up).
 * Needs root and iproute2; skips with a message without them.
 * Emulated clusters (NODESxRANKS): each node a host of its own (hostname, IPC namespace) whose
 * ranks share its network namespace; a slow node's link shaped apart; nothing left behind
 * either, the namespaces' holder processes included.
 * Run as `test_emulate --peer-rank`, this binary is a rank that checks its namespace; as
 * `test_emulate --node-rank DIR`, one that writes what host and namespaces it sees into DIR. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* ---------------- the rank side ---------------- */
static int peer_fail(int code, const char *what) {
  fprintf(stderr, "peer-rank %s: %s\n", getenv("FABENCH_RANK"), what);
  return code;
}

/* This namespace has lo and dev, and no other interface. */
static int alone_with(const char *dev) {
  int seen = 0, others = 0;
  struct if_nameindex *ifs = if_nameindex();
  for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
    if (!strcmp(i->if_name, dev)) seen++;
    else if (strcmp(i->if_name, "lo")) others++;
  }
  if (ifs) if_freenameindex(ifs);
  return seen == 1 && !others;
}

/* Sees only lo and its own interface, which carries FABENCH_BIND_ADDR; rank 0 accepts every
 * other rank on FABENCH_ROOT and checks each came from its own address. */
static int peer_rank(void) {
  const char *rs = getenv("FABENCH_RANK"), *ns = getenv("FABENCH_WORLD_SIZE");
  const char *root = getenv("FABENCH_ROOT"), *bind_addr = getenv("FABENCH_BIND_ADDR");
  const char *dev = getenv("UCX_NET_DEVICES"), *fabric = getenv("FABENCH_FABRIC");
  if (!rs || !ns || !root || !bind_addr || !dev || !fabric) return peer_fail(10, "env missing");
  int rank = atoi(rs), n = atoi(ns);
  if (strncmp(fabric, "emu-", 4) != 0) return peer_fail(11, "FABENCH_FABRIC");
  if (!alone_with(dev)) return peer_fail(12, "not alone in a namespace with its interface");
  int has_addr = 0;
  struct ifaddrs *ia = NULL;
  if (getifaddrs(&ia) == 0) {
    for (struct ifaddrs *i = ia; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || strcmp(i->ifa_name, dev)) continue;
      char a[64];
      inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a, sizeof a);
      if (!strcmp(a, bind_addr)) has_addr = 1;
    }
    freeifaddrs(ia);
  }
  if (!has_addr) return peer_fail(13, "FABENCH_BIND_ADDR not on its interface");
  char host[64];
  int port;
  if (sscanf(root, "%63[^:]:%d", host, &port) != 2) return peer_fail(14, "FABENCH_ROOT");
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, host, &sa.sin_addr);
  uint32_t base = ntohl(sa.sin_addr.s_addr) - 1; /* rank r is base + r + 1 */
  struct in_addr mine;
  inet_pton(AF_INET, bind_addr, &mine);
  if (ntohl(mine.s_addr) != base + (uint32_t)rank + 1) return peer_fail(15, "address");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (rank == 0) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 64) < 0)
      return peer_fail(16, "listen");
    for (int k = 1; k < n; k++) {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      if (poll(&p, 1, 10000) != 1) return peer_fail(17, "a peer did not connect");
      struct sockaddr_in from;
      socklen_t len = sizeof from;
      int c = accept(fd, (struct sockaddr *)&from, &len);
      int32_t r = -1;
      if (c < 0 || recv(c, &r, sizeof r, MSG_WAITALL) != sizeof r) return peer_fail(18, "recv");
      if (r < 1 || r >= n || ntohl(from.sin_addr.s_addr) != base + (uint32_t)r + 1)
        return peer_fail(19, "a peer from the wrong address");
      char ok = 'k';
      if (send(c, &ok, 1, 0) != 1) return peer_fail(20, "send");
      close(c);
    }
  } else {
    struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr = mine};
    if (bind(fd, (struct sockaddr *)&me, sizeof me) < 0) return peer_fail(21, "bind");
    double t0 = now_s();
    while (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
      if (now_s() - t0 > 10) return peer_fail(22, "connect");
      close(fd);
      fd = socket(AF_INET, SOCK_STREAM, 0);
      bind(fd, (struct sockaddr *)&me, sizeof me);
      usleep(20000);
    }
    int32_t r = rank;
    char ok = 0;
    if (send(fd, &r, sizeof r, 0) != sizeof r || recv(fd, &ok, 1, MSG_WAITALL) != 1 || ok != 'k')
      return peer_fail(23, "exchange");
  }
  close(fd);
  return 0;
}

/* A rank on an emulated host: writes DIR/node.<rank> with its hostname, local rank, the inodes
 * of its UTS, IPC and network namespaces, its address and UCX_TLS, after checking that its
 * namespace has lo and its node's interface alone, carrying FABENCH_BIND_ADDR. */
static unsigned long ns_inode(pid_t pid, const char *which) {
  char path[64], link[64];
  snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, which);
  ssize_t k = readlink(path, link, sizeof link - 1);
  if (k <= 0) return 0;
  link[k] = 0;
  const char *b = strchr(link, '[');
  return b ? strtoul(b + 1, NULL, 10) : 0;
}

static int node_rank(const char *dir) {
  const char *rs = getenv("FABENCH_RANK"), *lr = getenv("FABENCH_LOCAL_RANK");
  const char *bind_addr = getenv("FABENCH_BIND_ADDR"), *dev = getenv("UCX_NET_DEVICES");
  const char *tls = getenv("UCX_TLS"), *layout = getenv("FABENCH_EMU_LAYOUT");
  if (!rs || !lr || !bind_addr || !dev || !layout) return peer_fail(10, "env missing");
  if (!alone_with(dev)) return peer_fail(12, "not alone in a namespace with its node's interface");
  char host[64] = "", path[PATH_MAX], tmp[PATH_MAX];
  gethostname(host, sizeof host - 1);
  snprintf(tmp, sizeof tmp, "%s/tmp.%s", dir, rs);
  snprintf(path, sizeof path, "%s/node.%s", dir, rs);
  FILE *f = fopen(tmp, "w");
  if (!f) return peer_fail(24, "cannot write its report");
  fprintf(f, "%s %s %lu %lu %lu %s %s %s\n", host, lr, ns_inode(getpid(), "uts"), ns_inode(getpid(), "ipc"),
          ns_inode(getpid(), "net"), bind_addr, tls ? tls : "-", layout);
  if (fclose(f) || rename(tmp, path)) return peer_fail(25, "cannot write its report");
  return 0;
}

/* ---------------- helpers ---------------- */
static char self_exe[PATH_MAX];

static int read_file(const char *path, char *buf, size_t cap) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t k = fread(buf, 1, cap - 1, f);
  buf[k] = 0;
  fclose(f);
  return (int)k;
}

/* Output of a shell command line (constant text of ours) into buf. */
static void shell_out(const char *cmd, char *buf, size_t cap) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t k = fread(buf, 1, cap - 1, p);
  buf[k] = 0;
  pclose(p);
}

/* How many namespaces, links or qdiscs of set `id` exist (names fb<id> followed by br, n<r>,
 * h<r> or e<r>). */
static int leftovers(long id) {
  static char buf[1 << 20];
  char tag[32];
  shell_out("ip netns list; ip -o link show; tc qdisc show; "
            "for n in $(ip netns list | cut -d' ' -f1); do ip -n $n -o link show; done",
            buf, sizeof buf);
  snprintf(tag, sizeof tag, "fb%ld", id);
  int count = 0;
  for (char *s = strstr(buf, tag); s; s = strstr(s + 1, tag)) {
    char c = s[strlen(tag)];
    int before_ok = s == buf || !((s[-1] >= 'a' && s[-1] <= 'z') || (s[-1] >= '0' && s[-1] <= '9'));
    if (before_ok && (c == 'b' || c == 'n' || c == 'h' || c == 'e')) count++;
  }
  return count;
}

static int have_emulation(void) {
  launch_emu m;
  char err[256];
  memset(&m, 0, sizeof m);
  if (launch_emu_check(&m, err, sizeof err) < 0) {
    fprintf(stderr, "SKIP: %s\n", err);
    return 0;
  }
  return 1;
}

/* Waits for pid up to limit seconds (SIGKILL after); returns its wait status. */
static int wait_limit(pid_t pid, double limit) {
  double t0 = now_s();
  int st = 0;
  for (;;) {
    pid_t p = waitpid(pid, &st, WNOHANG);
    if (p == pid) return st;
    if (now_s() - t0 > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      fail_msg("pid %d still running after %.0f s", (int)pid, limit);
    }
    usleep(20000);
  }
}

/* Waits until dir holds files pid.0 .. pid.(n-1); fills pids. */
static void wait_pids(const char *dir, int n, long *pids) {
  double t0 = now_s();
  for (int r = 0; r < n; r++) {
    char path[128], buf[64] = "";
    snprintf(path, sizeof path, "%s/pid.%d", dir, r);
    while (read_file(path, buf, sizeof buf) <= 0) {
      assert_true(now_s() - t0 < 15);
      usleep(10000);
    }
    pids[r] = atol(buf);
    assert_true(pids[r] > 0);
  }
}

/* The host's default tcp congestion control, and one other than it (both built into Debian's
 * kernels): what a namespace holds tells whether it was set or inherited. */
static void host_cc(char *out, size_t cap) {
  out[0] = '\0';
  read_file("/proc/sys/net/ipv4/tcp_congestion_control", out, cap);
  out[strcspn(out, "\n")] = '\0';
}
static const char *other_cc(const char *host) { return strcmp(host, "reno") ? "reno" : "cubic"; }

static const char sleeper[] =
    "echo $$ > \"$0/pid.tmp.$FABENCH_RANK\"; mv \"$0/pid.tmp.$FABENCH_RANK\" "
    "\"$0/pid.$FABENCH_RANK\"; exec sleep 60";

/* A launcher (a child of ours) of n ranks of `script` (sleeper, node_sleeper) on the emulated
 * fabric `emulate`, once every rank has written its pid into dir (pids); the launcher's pid. */
static pid_t start_sleepers(const char *dir, const char *script, int n, const char *emulate, long *pids) {
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    char *argv[] = {"-c", (char *)script, (char *)dir, NULL};
    launch_opts o = {.n = n, .emulate = emulate, .timeout_s = 10};
    _exit(launch_ranks_prog(&o, "/bin/sh", argv));
  }
  wait_pids(dir, n, pids);
  return child;
}

/* ---------------- tests ---------------- */
static void test_setup_teardown(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  launch_emu m;
  char err[1024], cmd[256], out[8192], name[96];
  memset(&m, 0, sizeof m);
  assert_int_equal(launch_emu_check(&m, err, sizeof err), 0);
  long id = (long)getpid();
  int n = 3;
  /* a congestion control other than the host's default, so that the namespaces' cannot be
   * the one they inherit */
  char host[64];
  host_cc(host, sizeof host);
  const char *cc = other_cc(host);
  if (launch_emu_setup(&m, id, n, "500mbit", NULL, 1500, cc, err, sizeof err) < 0) fail_msg("%s", err);
  assert_int_equal(m.mtu, 1500);
  assert_string_equal(m.cc, cc);
  assert_true(m.burst >= 65536);
  assert_true(m.limit == 8u << 20); /* the floor: 5 ms of 500mbit is 312 kB */
  for (int r = 0; r < n; r++) {
    char ns[32], dev[32], addr[64];
    launch_emu_ns(&m, r, ns, sizeof ns);
    launch_emu_dev(&m, r, dev, sizeof dev);
    launch_emu_addr(&m, r, addr, sizeof addr);
    snprintf(cmd, sizeof cmd, "tc qdisc show dev fb%ldh%d", id, r);
    shell_out(cmd, out, sizeof out);
    assert_non_null(strstr(out, "tbf"));
    assert_non_null(strstr(out, "rate 500Mbit"));
    snprintf(cmd, sizeof cmd, "tc -n %s qdisc show dev %s", ns, dev);
    shell_out(cmd, out, sizeof out);
    assert_non_null(strstr(out, "rate 500Mbit"));
    /* the queue: 8 MiB less the bucket at 62.5 MB/s is 133 ms of traffic before tbf drops
     * (an incast of chunks queues, not drops); tc reports it as "lat", in us */
    snprintf(cmd, sizeof cmd, "tc -j -n %s qdisc show dev %s", ns, dev);
    shell_out(cmd, out, sizeof out);
    const char *lat = strstr(out, "\"lat\":");
    assert_non_null(lat);
    double lat_us = strtod(lat + 6, NULL);
    assert_true(lat_us > 120e3 && lat_us < 140e3);
    snprintf(cmd, sizeof cmd, "ip -n %s -o addr show", ns);
    shell_out(cmd, out, sizeof out);
    snprintf(name, sizeof name, "inet %s/24", addr);
    assert_non_null(strstr(out, name));
    assert_non_null(strstr(out, "inet 127.0.0.1/8")); /* loopback up */
    snprintf(cmd, sizeof cmd, "ip netns exec %s cat /proc/sys/net/ipv4/tcp_congestion_control", ns);
    shell_out(cmd, out, sizeof out);
    assert_int_equal(strncmp(out, cc, strlen(cc)), 0);
    assert_int_equal(out[strlen(cc)], '\n');
    assert_int_equal(strncmp(addr, "198.1", 5), 0);
    assert_true(addr[5] == '8' || addr[5] == '9');
  }
  assert_true(leftovers(id) > 0);
  launch_emu_teardown(&m);
  assert_int_equal(leftovers(id), 0);
  launch_emu_teardown(&m); /* twice is harmless */
}

/* A congestion control the kernel does not have: a clear error, nothing left behind. */
static void test_bad_cc(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  launch_emu m;
  char err[1024];
  memset(&m, 0, sizeof m);
  assert_int_equal(launch_emu_check(&m, err, sizeof err), 0);
  long id = (long)getpid();
  assert_int_equal(launch_emu_setup(&m, id, 2, "1gbit", NULL, 0, "nosuchcc", err, sizeof err), -1);
  assert_non_null(strstr(err, "tcp congestion control 'nosuchcc'"));
  assert_int_equal(leftovers(id), 0);
  assert_int_equal(launch_emu_setup(&m, id, 2, "1gbit", NULL, 0, "../reno", err, sizeof err), -1);
  assert_non_null(strstr(err, "bad tcp congestion control name"));
  assert_int_equal(leftovers(id), 0);
}

static void test_peer_ranks(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  for (int n = 2; n <= 4; n++) {
    char *argv[] = {"--peer-rank", NULL};
    launch_opts o = {.n = n, .emulate = "1gbit", .timeout_s = 10};
    assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 0);
    assert_int_equal(leftovers((long)getpid()), 0);
  }
}

static void test_failing_rank(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  char *argv[] = {"-c", "[ \"$FABENCH_RANK\" = 1 ] && exit 4; exec sleep 60", NULL};
  launch_opts o = {.n = 3, .emulate = "2gbit", .timeout_s = 10};
  double t0 = now_s();
  assert_int_equal(launch_ranks_prog(&o, "/bin/sh", argv), 4);
  assert_true(now_s() - t0 < 10);
  assert_int_equal(leftovers((long)getpid()), 0);
}

/* Two runs at once do not collide (names from the pid, a /24 each). */
static void test_two_runs(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    kids[k] = fork();
    assert_true(kids[k] >= 0);
    if (kids[k] == 0) {
      char *argv[] = {"--peer-rank", NULL};
      launch_opts o = {.n = 3, .emulate = "1gbit", .timeout_s = 10};
      _exit(launch_ranks_prog(&o, self_exe, argv));
    }
  }
  for (int k = 0; k < 2; k++) {
    int st = wait_limit(kids[k], 30);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(leftovers(kids[k]), 0);
  }
}

/* SIGINT or SIGTERM to the launcher: ranks stopped, everything removed. */
static void test_interrupted(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const int sigs[] = {SIGINT, SIGTERM};
  for (int s = 0; s < 2; s++) {
    char dir[64];
    long pids[3];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "emu"));
    pid_t child = start_sleepers(dir, sleeper, 3, "1gbit", pids);
    assert_true(leftovers(child) > 0);
    kill(child, sigs[s]);
    int st = wait_limit(child, 15);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 128 + sigs[s]);
    for (int r = 0; r < 3; r++) assert_true(kill((pid_t)pids[r], 0) < 0);
    assert_int_equal(leftovers(child), 0);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* MPI across the namespaces: PMIx over the bridge, ob1's TCP path on the set's subnet. */
static void test_mpi(void **state) {
  (void)state;
#if !defined(FABENCH_MPIRUN) || !defined(EMU_MPI_RANK)
  skip();
#else
  if (!have_emulation()) skip();
  /* Open MPI keeps allocations until exit, some in dlopen'ed components that suppressions
   * cannot name: no leak check in the MPI helper (it is not the code under test). */
  const char *asan = getenv("ASAN_OPTIONS");
  char *asan_old = asan ? strdup(asan) : NULL, asan_new[1024];
  snprintf(asan_new, sizeof asan_new, "%s%sdetect_leaks=0", asan ? asan : "", asan ? ":" : "");
  setenv("ASAN_OPTIONS", asan_new, 1);
  /* on 2 ranks a congestion control other than the host's, which MPI's sockets must take; on 3
   * none, and they keep the host's */
  char host[64];
  host_cc(host, sizeof host);
  const char *cc2 = other_cc(host);
  for (int n = 2; n <= 3; n++) {
    char path[] = "/tmp/fabench-emu-out-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    char *argv[] = {"100003", NULL};
    launch_opts o = {.n = n, .emulate = "1gbit", .use_mpirun = 1, .timeout_s = 20,
                           .tcp_cc = n == 2 ? cc2 : NULL};
    int rc = launch_ranks_prog(&o, EMU_MPI_RANK, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    close(fd);
    static char out[65536];
    read_file(path, out, sizeof out);
    unlink(path);
    fputs(out, stderr);
    assert_int_equal(rc, 0);
    for (int r = 0; r < n; r++) {
      char want[128];
      /* ok, and the only interface it saw was its own in its namespace */
      snprintf(want, sizeof want, "mpi-rank %d of %d ok ", r, n);
      char *line = strstr(out, want);
      assert_non_null(line);
      snprintf(want, sizeof want, " fb%lde%d \n", (long)getpid(), r);
      char *eol = strchr(line, '\n');
      assert_non_null(eol);
      assert_true(strstr(line, want) && strstr(line, want) < eol);
      if (n == 2) snprintf(want, sizeof want, " cc=%s/%s ", cc2, cc2);
      else snprintf(want, sizeof want, " cc=%s/- ", host);
      assert_true(strstr(line, want) && strstr(line, want) < eol);
    }
    assert_int_equal(leftovers((long)getpid()), 0);
  }
  if (asan_old) setenv("ASAN_OPTIONS", asan_old, 1);
  else unsetenv("ASAN_OPTIONS");
  free(asan_old);
#endif
}

/* ---- the real thing: fabench allreduce on emulated links ---- */
static const char *fabench_bin(void) {
  const char *bin = getenv("FABENCH_BIN");
  if (!bin || access(bin, X_OK) != 0) {
    fprintf(stderr, "SKIP: FABENCH_BIN not set or not executable\n");
    return NULL;
  }
  char cmd[PATH_MAX + 64];
  snprintf(cmd, sizeof cmd, "'%s' allreduce --help >/dev/null 2>&1", bin);
  if (system(cmd) != 0) {
    fprintf(stderr, "SKIP: this fabench has no allreduce command yet\n");
    return NULL;
  }
  return bin;
}

static pid_t spawn(char *const argv[]) {
  pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  return pid;
}

/* Rows of dir/allreduce.csv: count rows, assert errors == 0 and the emulated fabric. */
static int check_csv(const char *dir, const char *fabric) {
  char path[256];
  snprintf(path, sizeof path, "%s/allreduce.csv", dir);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  static char line[8192];
  assert_non_null(fgets(line, sizeof line, f));
  int col_err = -1, col_fab = -1, ncol = 0;
  for (char *save = NULL, *t = strtok_r(line, ",\r\n", &save); t; t = strtok_r(NULL, ",\r\n", &save), ncol++) {
    if (!strcmp(t, "errors")) col_err = ncol;
    if (!strcmp(t, "fabric")) col_fab = ncol;
  }
  assert_true(col_err >= 0 && col_fab >= 0);
  int rows = 0;
  while (fgets(line, sizeof line, f)) {
    int c = 0;
    char *p = line;
    for (;;) {
      char *comma = strchr(p, ',');
      if (comma) *comma = 0;
      if (c == col_err) assert_int_equal(atol(p), 0);
      if (c == col_fab) assert_non_null(strstr(p, fabric));
      if (!comma) break;
      p = comma + 1;
      c++;
    }
    rows++;
  }
  fclose(f);
  return rows;
}

/* The first "topo_hash" value in dir/file, into out (17 bytes). */
static void topo_hash_of(const char *dir, const char *file, char *out) {
  char path[300];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  char *buf = tu_slurp(path, NULL);
  assert_non_null(buf);
  char *p = strstr(buf, "\"topo_hash\"");
  assert_non_null(p);
  p = strchr(p + 11, '"');
  assert_non_null(p);
  assert_int_equal(strspn(p + 1, "0123456789abcdef"), 16);
  memcpy(out, p + 1, 16);
  out[16] = 0;
  free(buf);
}

static void test_fabench_allreduce(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const char *bin = fabench_bin();
  if (!bin) skip();
  /* the ranks see only their namespace's network interfaces, yet run on this machine: the
   * run records this machine's topology hash (a fit keys fabrics by it, and predict takes a
   * stack's CPU cost from the same machine's loopback fits) */
  char tdir[64], here[17], there[17];
  assert_non_null(tu_tmpdir(tdir, sizeof tdir, "emu"));
  char *targv[] = {(char *)bin, "topo", "--out", tdir, NULL};
  int tst = wait_limit(spawn(targv), 60);
  assert_true(WIFEXITED(tst) && WEXITSTATUS(tst) == 0);
  topo_hash_of(tdir, "topo.json", here);
  assert_int_equal(tu_rmtree(tdir), 0);
  for (int n = 2; n <= 3; n++) {
    char dir[64], nstr[16];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "emu"));
    snprintf(nstr, sizeof nstr, "%d", n);
    /* on 3 ranks the namespaces keep the host's congestion control (--tcp-cc system) */
    char *argv[] = {(char *)bin, "allreduce", "-n", nstr, "--emulate", "1gbit", "--transport",
                    "tcp", "--algo", "ring", "--min-bytes", "8", "--max-bytes", "1M",
                    "--iters", "3", "--warmup", "1", "--out", dir,
                    n == 3 ? "--tcp-cc" : NULL, "system", NULL};
    pid_t pid = spawn(argv);
    int st = wait_limit(pid, 60);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true(check_csv(dir, "emu-1gbit") >= 10);
    topo_hash_of(dir, "run.json", there);
    assert_string_equal(there, here);
    /* on 2 ranks the namespaces took the tcp transport's congestion control
     * (COLL_TCP_CC_DEFAULT), and run.json says so; on 3 none was set */
    static char meta[1 << 16];
    char path[128];
    snprintf(path, sizeof path, "%s/run.json", dir);
    assert_true(read_file(path, meta, sizeof meta) > 0);
    if (n == 2) assert_non_null(strstr(meta, "\"FABENCH_EMU_CC\":\t\"reno\""));
    else assert_null(strstr(meta, "FABENCH_EMU_CC"));
    if (n == 3) { /* the tcp transport read back its sockets' own: the host's default */
      char host[64], want[80];
      host_cc(host, sizeof host);
      snprintf(want, sizeof want, "/%s\"", host);
      assert_non_null(strstr(meta, want));
    }
    assert_int_equal(leftovers(pid), 0);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* Children of pid (the launcher's ranks). */
static int children_of(pid_t parent, pid_t *out, int cap) {
  int n = 0;
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    char path[300], buf[512];
    snprintf(path, sizeof path, "/proc/%s/stat", de->d_name);
    if (read_file(path, buf, sizeof buf) <= 0) continue;
    char *rp = strrchr(buf, ')');
    int ppid = 0;
    char stt;
    if (!rp || sscanf(rp + 1, " %c %d", &stt, &ppid) != 2) continue;
    if (ppid == parent && n < cap) out[n++] = atoi(de->d_name);
  }
  if (d) closedir(d);
  return n;
}

/* The launcher's ranks among its children: those in a network namespace of their own (an
 * emulated node's holder, its child too, stays in ours). */
static int ranks_of(pid_t launcher, pid_t *out, int cap) {
  pid_t kids[32];
  int nk = children_of(launcher, kids, 32), n = 0;
  unsigned long ours = ns_inode(getpid(), "net");
  for (int i = 0; i < nk && n < cap; i++) {
    unsigned long net = ns_inode(kids[i], "net");
    if (net && net != ours) out[n++] = kids[i];
  }
  return n;
}

/* Waits (15 s at most) until the launcher runs `want` ranks; their pids into out. */
static void wait_ranks(pid_t launcher, int want, pid_t *out, int cap) {
  double t0 = now_s();
  while (ranks_of(launcher, out, cap) < want) {
    assert_true(now_s() - t0 < 15);
    usleep(20000);
  }
}

static void test_fabench_killed_rank(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const char *bin = fabench_bin();
  if (!bin) skip();
  char dir[64];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "emu"));
  char *argv[] = {(char *)bin, "allreduce", "-n", "3", "--emulate", "1gbit", "--transport",
                  "tcp", "--algo", "ring", "--min-bytes", "1M", "--max-bytes", "16M",
                  "--iters", "20", "--timeout", "20", "--out", dir, NULL};
  pid_t pid = spawn(argv);
  pid_t kids[8];
  wait_ranks(pid, 3, kids, 8);
  usleep(700000); /* mid-run */
  int victim = rand() % 3;
  assert_int_equal(ranks_of(pid, kids, 8), 3);
  kill(kids[victim], SIGKILL);
  int st = wait_limit(pid, 30);
  assert_true(WIFEXITED(st));
  assert_int_not_equal(WEXITSTATUS(st), 0);
  assert_int_equal(leftovers(pid), 0);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* ---- emulated clusters: NODESxRANKS ---- */

/* Entries of /dev/shm (POSIX shared memory, where UCX and Open MPI keep their segments). */
static int shm_entries(void) {
  int n = 0;
  DIR *d = opendir("/dev/shm");
  struct dirent *de;
  while (d && (de = readdir(d))) n += de->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

/* Processes whose UTS namespace is `inode` (an emulated node's holder and ranks). */
static int uts_users(unsigned long inode) {
  int n = 0;
  DIR *d = opendir("/proc");
  struct dirent *de;
  while (d && (de = readdir(d))) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    if (ns_inode((pid_t)atoi(de->d_name), "uts") == inode) n++;
  }
  if (d) closedir(d);
  return n;
}

typedef struct {
  char host[64];
  int local;
  unsigned long uts, ipc, net;
  char addr[64], tls[64], layout[32];
} node_report;

static void read_report(const char *dir, int r, node_report *p) {
  char path[PATH_MAX], buf[512];
  snprintf(path, sizeof path, "%s/node.%d", dir, r);
  assert_true(read_file(path, buf, sizeof buf) > 0);
  assert_int_equal(sscanf(buf, "%63s %d %lu %lu %lu %63s %63s %31s", p->host, &p->local, &p->uts,
                          &p->ipc, &p->net, p->addr, p->tls, p->layout), 8);
}

/* 2x2, 3x2, 2x3, 4x1: rank r runs on host node<r/RANKS> with local rank r%RANKS; the ranks of
 * a node share its UTS, IPC and network namespaces and its address, and no two nodes share
 * any; UCX may use shared memory only within a node. Afterwards no namespace, link, qdisc or
 * process of the set is left. */
static void test_node_layouts(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  static const int lay[][2] = {{2, 2}, {3, 2}, {2, 3}, {4, 1}};
  unsigned long host_uts = ns_inode(getpid(), "uts"), host_ipc = ns_inode(getpid(), "ipc");
  for (size_t l = 0; l < sizeof lay / sizeof lay[0]; l++) {
    int nodes = lay[l][0], per = lay[l][1], n = nodes * per;
    char dir[64], spec[32], want[64];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "emunodes"));
    snprintf(spec, sizeof spec, "%dx%d:1gbit", nodes, per);
    char *argv[] = {"--node-rank", dir, NULL};
    launch_opts o = {.n = n, .emulate = spec, .timeout_s = 10};
    assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 0);
    node_report rep[8];
    for (int r = 0; r < n; r++) {
      read_report(dir, r, &rep[r]);
      snprintf(want, sizeof want, "node%d", r / per);
      assert_string_equal(rep[r].host, want);
      assert_int_equal(rep[r].local, r % per);
      assert_string_equal(rep[r].tls, "self,sysv,posix,tcp");
      snprintf(want, sizeof want, "%dx%d", nodes, per);
      assert_string_equal(rep[r].layout, want);
      assert_true(rep[r].uts != host_uts && rep[r].ipc != host_ipc);
    }
    for (int a = 0; a < n; a++)
      for (int b = 0; b < n; b++) {
        int same = a / per == b / per;
        assert_int_equal(rep[a].uts == rep[b].uts, same);
        assert_int_equal(rep[a].ipc == rep[b].ipc, same);
        assert_int_equal(rep[a].net == rep[b].net, same);
        assert_int_equal(!strcmp(rep[a].addr, rep[b].addr), same);
      }
    assert_int_equal(leftovers((long)getpid()), 0);
    for (int r = 0; r < n; r += per) assert_int_equal(uts_users(rep[r].uts), 0); /* holders gone */
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* --emulate-slow: the slow node's link, both ends, at its own rate; the others at the set's. */
static void test_node_slow(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  launch_emu m;
  char err[1024], cmd[256], out[8192], ns[32], dev[32];
  memset(&m, 0, sizeof m);
  assert_int_equal(launch_emu_check(&m, err, sizeof err), 0);
  long id = (long)getpid();
  const char *rates[3] = {NULL, "100mbit", NULL};
  if (launch_emu_setup(&m, id, 3, "1gbit", rates, 0, NULL, err, sizeof err) < 0) fail_msg("%s", err);
  for (int k = 0; k < 3; k++) {
    const char *want = k == 1 ? "rate 100Mbit" : "rate 1Gbit";
    launch_emu_ns(&m, k, ns, sizeof ns);
    launch_emu_dev(&m, k, dev, sizeof dev);
    snprintf(cmd, sizeof cmd, "tc qdisc show dev fb%ldh%d; tc -n %s qdisc show dev %s", id, k, ns, dev);
    shell_out(cmd, out, sizeof out);
    char *first = strstr(out, want);
    assert_non_null(first);
    assert_non_null(strstr(first + 1, want)); /* both ends */
  }
  launch_emu_teardown(&m);
  assert_int_equal(leftovers(id), 0);
  /* what the command line gives: a node that does not exist, a node twice, no cluster */
  char *argv[] = {"--node-rank", "/nonexistent", NULL};
  const char *bad1[] = {"2=100mbit"}, *bad2[] = {"1=100mbit", "1=200mbit"}, *bad3[] = {"1=fast"};
  launch_opts o = {.n = 4, .emulate = "2x2:1gbit", .slow = bad1, .nslow = 1, .timeout_s = 10};
  assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 2);
  o.slow = bad2, o.nslow = 2;
  assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 2);
  o.slow = bad3, o.nslow = 1;
  assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 2);
  o.slow = bad1, o.emulate = "1gbit";
  assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 2);
  o.emulate = "2x2:1gbit", o.nslow = 0, o.n = 3; /* -n disagrees with the layout */
  assert_int_equal(launch_ranks_prog(&o, self_exe, argv), 2);
  assert_int_equal(leftovers(id), 0);
  launch_emu_spec sp;
  static const char *const badspec[] = {"2x:1gbit", "x2:1gbit", "2x2", "2x2:", "0x2:1gbit", "2x0:1gbit",
                                        "2x2:1gbps", "251x1:1gbit", "2x2x2:1gbit", "-2x2:1gbit", NULL};
  for (int i = 0; badspec[i]; i++)
    assert_int_equal(launch_emu_parse_spec(badspec[i], &sp, err, sizeof err), -1);
  assert_int_equal(launch_emu_parse_spec("3x2:500mbit", &sp, err, sizeof err), 0);
  assert_true(sp.nodes == 3 && sp.per_node == 2 && !strcmp(sp.rate, "500mbit"));
  assert_int_equal(launch_emu_parse_spec("10gbit", &sp, err, sizeof err), 0);
  assert_true(sp.nodes == 0 && !strcmp(sp.rate, "10gbit"));
}

/* A rank of an emulated cluster that fails, or is killed: the others stopped, the error names
 * the rank and its node, nothing left (holders included). */
static void test_nodes_failing_rank(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  char path[] = "/tmp/fabench-emu-err-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  for (int kill9 = 0; kill9 < 2; kill9++) {
    char *argv[] = {"-c",
                    kill9 ? "[ \"$FABENCH_RANK\" = 3 ] && kill -9 $$; exec sleep 60"
                          : "[ \"$FABENCH_RANK\" = 3 ] && exit 4; exec sleep 60",
                    NULL};
    launch_opts o = {.n = 4, .emulate = "2x2:1gbit", .timeout_s = 10};
    fflush(stderr);
    int saved = dup(2);
    assert_int_equal(ftruncate(fd, 0), 0);
    lseek(fd, 0, SEEK_SET);
    dup2(fd, 2);
    double t0 = now_s();
    int rc = launch_ranks_prog(&o, "/bin/sh", argv);
    dup2(saved, 2);
    close(saved);
    assert_true(now_s() - t0 < 10);
    assert_int_equal(rc, kill9 ? 1 : 4);
    static char err[8192];
    assert_true(read_file(path, err, sizeof err) > 0);
    fputs(err, stderr);
    assert_non_null(strstr(err, "rank 3 (node1)"));
    assert_int_equal(leftovers((long)getpid()), 0);
  }
  close(fd);
  unlink(path);
}

/* Ranks of an emulated cluster that each write their pid and UTS namespace's inode. */
static const char node_sleeper[] =
    "readlink /proc/self/ns/uts | tr -dc 0-9 > \"$0/uts.$FABENCH_RANK\"; "
    "echo $$ > \"$0/pid.tmp.$FABENCH_RANK\"; mv \"$0/pid.tmp.$FABENCH_RANK\" "
    "\"$0/pid.$FABENCH_RANK\"; exec sleep 60";

static unsigned long read_uts(const char *dir, int r) {
  char path[128], buf[64] = "";
  snprintf(path, sizeof path, "%s/uts.%d", dir, r);
  assert_true(read_file(path, buf, sizeof buf) > 0);
  return strtoul(buf, NULL, 10);
}

/* SIGINT to the launcher of a 3x2 cluster: ranks and holders stopped, everything removed. */
static void test_nodes_interrupted(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  char dir[64];
  long pids[6];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "emunodes"));
  pid_t child = start_sleepers(dir, node_sleeper, 6, "3x2:1gbit", pids);
  unsigned long uts[3];
  for (int k = 0; k < 3; k++) {
    uts[k] = read_uts(dir, 2 * k);
    assert_int_equal(uts_users(uts[k]), 3); /* the holder and the node's two ranks */
  }
  assert_true(leftovers(child) > 0);
  kill(child, SIGINT);
  int st = wait_limit(child, 15);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 128 + SIGINT);
  for (int r = 0; r < 6; r++) assert_true(kill((pid_t)pids[r], 0) < 0);
  for (int k = 0; k < 3; k++) assert_int_equal(uts_users(uts[k]), 0);
  assert_int_equal(leftovers(child), 0);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* A SIGKILLed launcher cannot clean up: its ranks (and on an emulated cluster, per_node > 0,
 * its nodes' holders) die with it, and the next set-up removes the stale set; a set whose owner
 * is alive is kept. */
static void killed_launcher(const char *script, int n, const char *emulate, int per_node) {
  char dir[64], err[1024];
  long pids[8];
  unsigned long uts[8];
  int nodes = per_node > 0 ? n / per_node : 0;
  assert_non_null(tu_tmpdir(dir, sizeof dir, "emu"));
  pid_t child = start_sleepers(dir, script, n, emulate, pids);
  for (int k = 0; k < nodes; k++) uts[k] = read_uts(dir, k * per_node);
  kill(child, SIGKILL);
  int st = wait_limit(child, 5);
  assert_true(WIFSIGNALED(st));
  double t0 = now_s();
  for (int r = 0; r < n; r++) {
    int live = 1;
    while (live) { /* PR_SET_PDEATHSIG, ranks and holders alike */
      live = kill((pid_t)pids[r], 0) == 0;
      for (int k = 0; k < nodes; k++) live |= uts_users(uts[k]) > 0;
      assert_true(now_s() - t0 < 5);
      if (live) usleep(10000);
    }
  }
  assert_true(leftovers(child) > 0);
  launch_emu live;
  memset(&live, 0, sizeof live);
  assert_int_equal(launch_emu_check(&live, err, sizeof err), 0);
  if (launch_emu_setup(&live, (long)getpid(), 1, "1gbit", NULL, 0, NULL, err, sizeof err) < 0)
    fail_msg("%s", err);
  assert_true(launch_emu_cleanup_stale(&live, err, sizeof err) >= 1);
  assert_int_equal(leftovers(child), 0);
  assert_true(leftovers((long)getpid()) > 0); /* ours: alive, kept */
  launch_emu_teardown(&live);
  assert_int_equal(leftovers((long)getpid()), 0);
  assert_int_equal(tu_rmtree(dir), 0);
}

static void test_stale(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  killed_launcher(sleeper, 2, "1gbit", 0);
}

static void test_nodes_stale(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  killed_launcher(node_sleeper, 4, "2x2:1gbit", 2);
}

/* fabench allreduce on an emulated 2x2 cluster, tcp and ucx, hier over tcp with ucx inside the
 * nodes: every row checked, run.json records two hosts, the ranks' hosts, the layout, the
 * fabric inside the nodes, and a topology file per host. */
static void test_fabench_nodes(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const char *bin = fabench_bin();
  if (!bin) skip();
  char dir[64];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "emunodes"));
  char *argv[] = {(char *)bin, "allreduce", "--emulate", "2x2:1gbit", "--emulate-slow", "1=500mbit",
                  "--transport", "tcp,ucx", "--intra-transport", "ucx", "--algo", "ring,rhd,hier",
                  "--min-bytes", "8", "--max-bytes", "256K",
                  "--step-factor", "8", "--iters", "3", "--warmup", "1", "--peer", "none", "--out", dir, NULL};
  int shm = shm_entries();
  pid_t pid = spawn(argv);
  int st = wait_limit(pid, 90);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
  assert_int_equal(shm_entries(), shm); /* UCX's shared memory between a node's ranks: gone */
  assert_true(check_csv(dir, "emu-1gbit") >= 24);
  /* each row says the layout too: 2 hosts, 2 ranks on each (ranks_per_host) */
  char *line, *save = NULL, path[128];
  snprintf(path, sizeof path, "%s/allreduce.csv", dir);
  char *csv = tu_slurp(path, NULL);
  assert_non_null(csv);
  line = strtok_r(csv, "\n", &save);
  assert_true(line && strstr(line, "host_count"));
  int col = -1, k = 0;
  for (char *f = line, *end; f; f = end ? end + 1 : NULL, k++) {
    end = strchr(f, ',');
    if (!strncmp(f, "ranks_per_host", end ? (size_t)(end - f) : strlen(f)) && (end ? end - f : (long)strlen(f)) == 14)
      col = k;
  }
  assert_true(col > 0);
  while ((line = strtok_r(NULL, "\n", &save))) {
    const char *f = line;
    for (int i = 0; i < col && f; i++) f = strchr(f, ',') ? strchr(f, ',') + 1 : NULL;
    assert_non_null(f);
    assert_int_equal(atoi(f), 2);
  }
  free(csv);
  static char meta[1 << 16];
  snprintf(path, sizeof path, "%s/run.json", dir);
  assert_true(read_file(path, meta, sizeof meta) > 0);
  assert_non_null(strstr(meta, "\"host_count\":\t2"));
  assert_non_null(strstr(meta, "\"emulated_layout\":\t\"2x2\""));
  assert_non_null(strstr(meta, "\"emulated_slow\":\t\"1=500mbit\""));
  assert_non_null(strstr(meta, "\"node0\", \"node0\", \"node1\", \"node1\""));
  /* hier over tcp went inside the nodes over ucx; ucx's own needs no second one */
  assert_non_null(strstr(meta, "\"tcp/intra\":\t\"ucx:"));
  assert_null(strstr(meta, "\"ucx/intra\""));
  for (int k = 0; k < 2; k++) {
    snprintf(path, sizeof path, "%s/topo-node%d.xml", dir, k);
    assert_int_equal(access(path, R_OK), 0);
  }
  assert_int_equal(leftovers(pid), 0);
  assert_int_equal(tu_rmtree(dir), 0);
}

/* colls.csv's rows: every one verified (errors 0), on the emulated fabric, ran `ran`, from
 * `hosts` hosts. Returns the row count. */
static int check_colls_csv(const char *dir, const char *ran, int hosts) {
  char path[256];
  snprintf(path, sizeof path, "%s/colls.csv", dir);
  char *csv = tu_slurp(path, NULL);
  assert_non_null(csv);
  char *save = NULL, *line = strtok_r(csv, "\n", &save);
  assert_non_null(line);
  int col[4] = {-1, -1, -1, -1}, k = 0, rows = 0; /* errors, fabric, algo_ran, host_count */
  static const char *const names[4] = {"errors", "fabric", "algo_ran", "host_count"};
  for (char *s2 = NULL, *t = strtok_r(line, ",", &s2); t; t = strtok_r(NULL, ",", &s2), k++)
    for (int i = 0; i < 4; i++)
      if (!strcmp(t, names[i])) col[i] = k;
  for (int i = 0; i < 4; i++) assert_true(col[i] >= 0);
  while ((line = strtok_r(NULL, "\n", &save))) {
    char *f = line;
    for (int c = 0; f; c++) {
      char *comma = strchr(f, ',');
      if (comma) *comma = 0;
      if (c == col[0]) assert_int_equal(atol(f), 0);
      if (c == col[1]) assert_non_null(strstr(f, "emu-1gbit"));
      if (c == col[2]) assert_string_equal(f, ran);
      if (c == col[3]) assert_int_equal(atoi(f), hosts);
      f = comma ? comma + 1 : NULL;
    }
    rows++;
  }
  free(csv);
  return rows;
}

/* fabench bcast (from a root that is not its host's first rank) and alltoall (skewed: the
 * all-to-allv) by hier on an emulated 2x2 cluster, over tcp (ucx inside the nodes) and ucx: every
 * element checked on every rank, and hier is what ran. */
static void test_fabench_nodes_colls(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const char *bin = fabench_bin();
  if (!bin) skip();
  static const char *const cmds[2][4] = {{"bcast", "--root", "3", NULL}, {"alltoall", "--imbalance", "1", NULL}};
  for (int i = 0; i < 2; i++) {
    char dir[64];
    assert_non_null(tu_tmpdir(dir, sizeof dir, "emucolls"));
    char *argv[] = {(char *)bin, (char *)cmds[i][0], (char *)cmds[i][1], (char *)cmds[i][2], "--emulate", "2x2:1gbit",
                    "--transport", "tcp,ucx", "--algo", "hier", "--min-bytes", "8", "--max-bytes", "64K",
                    "--step-factor", "16", "--iters", "2", "--warmup", "1", "--peer", "none", "--out", dir, NULL};
    pid_t pid = spawn(argv);
    int st = wait_limit(pid, 60);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true(check_colls_csv(dir, "hier:ring", 2) >= 8); /* 4 sizes x 2 transports at least */
    assert_int_equal(leftovers(pid), 0);
    assert_int_equal(tu_rmtree(dir), 0);
  }
}

/* A rank of a 2x2 cluster killed mid-run over ucx (a node's ranks on shared memory): the run
 * fails, and no namespace, link, qdisc, holder or shared-memory segment is left. */
static void test_fabench_nodes_killed_rank(void **state) {
  (void)state;
  if (!have_emulation()) skip();
  const char *bin = fabench_bin();
  if (!bin) skip();
  char dir[64];
  assert_non_null(tu_tmpdir(dir, sizeof dir, "emunodes"));
  char *argv[] = {(char *)bin, "allreduce", "--emulate", "2x2:1gbit", "--transport", "ucx", "--algo", "hier",
                  "--min-bytes", "1M", "--max-bytes", "16M", "--iters", "20", "--timeout", "20", "--out", dir, NULL};
  int shm = shm_entries();
  pid_t pid = spawn(argv);
  pid_t ranks[16];
  int nr = 4; /* the launcher's children: 4 ranks and 2 holders */
  wait_ranks(pid, nr, ranks, 16);
  unsigned long uts[16];
  for (int i = 0; i < nr; i++) uts[i] = ns_inode(ranks[i], "uts");
  usleep(1500000); /* mid-run */
  kill(ranks[rand() % nr], SIGKILL);
  int st = wait_limit(pid, 60);
  assert_true(WIFEXITED(st));
  assert_int_not_equal(WEXITSTATUS(st), 0);
  assert_int_equal(leftovers(pid), 0);
  for (int i = 0; i < nr; i++) assert_int_equal(uts_users(uts[i]), 0); /* ranks and holders */
  assert_int_equal(shm_entries(), shm);
  assert_int_equal(tu_rmtree(dir), 0);
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--peer-rank")) return peer_rank();
  if (argc > 2 && !strcmp(argv[1], "--node-rank")) return node_rank(argv[2]);
  ssize_t k = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (k <= 0) return 1;
  self_exe[k] = 0;
  srand((unsigned)time(NULL) ^ (unsigned)getpid());
  if (getenv("TEST_EMULATE_ONLY")) cmocka_set_test_filter(getenv("TEST_EMULATE_ONLY")); /* one test by name */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_setup_teardown), cmocka_unit_test(test_bad_cc),
      cmocka_unit_test(test_peer_ranks),
      cmocka_unit_test(test_failing_rank),   cmocka_unit_test(test_two_runs),
      cmocka_unit_test(test_interrupted),
      cmocka_unit_test(test_stale),          cmocka_unit_test(test_mpi),
      cmocka_unit_test(test_fabench_allreduce), cmocka_unit_test(test_fabench_killed_rank),
      cmocka_unit_test(test_node_layouts),   cmocka_unit_test(test_node_slow),
      cmocka_unit_test(test_nodes_failing_rank), cmocka_unit_test(test_nodes_interrupted),
      cmocka_unit_test(test_nodes_stale),    cmocka_unit_test(test_fabench_nodes),
      cmocka_unit_test(test_fabench_nodes_killed_rank), cmocka_unit_test(test_fabench_nodes_colls),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
