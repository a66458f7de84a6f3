/* launch: emulated fabrics (network namespaces on a bridge, tc tbf) and emulated hosts (UTS and
 * IPC namespaces per node). See emu.h.
 * ip(8) and tc(8) are run through fork + exec with argument vectors: no shell, so no string
 * from the command line is ever interpreted. */
#include "emu.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define EMU_NETNS_DIR "/var/run/netns"
#define EMU_LOCK_FILE "/run/lock/fabench-emu.lock"

int launch_emu_parse_rate(const char *s, uint64_t *bps) {
  if (!s || *s < '0' || *s > '9') return -1;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || v == 0) return -1;
  uint64_t mult;
  if (!strcmp(end, "kbit")) mult = 1000ull;
  else if (!strcmp(end, "mbit")) mult = 1000000ull;
  else if (!strcmp(end, "gbit")) mult = 1000000000ull;
  else return -1;
  if (v > 400000000000ull / mult) return -1;
  uint64_t r = v * mult;
  if (r < 1000000ull) return -1;
  *bps = r;
  return 0;
}

int launch_emu_parse_spec(const char *s, launch_emu_spec *out, char *err, size_t cap) {
  uint64_t bps;
  memset(out, 0, sizeof *out);
  const char *colon = s ? strchr(s, ':') : NULL;
  const char *rate = colon ? colon + 1 : s;
  if (colon) {
    char *x, *end;
    errno = 0;
    long nodes = strtol(s, &x, 10), per = 0;
    if (x != s && *x == 'x' && x[1] >= '0' && x[1] <= '9') per = strtol(x + 1, &end, 10);
    else end = x;
    if (errno || x == s || *x != 'x' || end != colon || nodes < 1 || per < 1) {
      snprintf(err, cap, "--emulate: '%s' is not NODESxRANKS:RATE (e.g. 2x2:1gbit, 4x1:10gbit)", s);
      return -1;
    }
    if (nodes > LAUNCH_EMU_MAX_NODES || per > 1024 || nodes * per > 1024) {
      snprintf(err, cap, "--emulate: '%s': at most %d nodes and 1024 ranks", s, LAUNCH_EMU_MAX_NODES);
      return -1;
    }
    out->nodes = (int)nodes;
    out->per_node = (int)per;
  }
  if (!rate || launch_emu_parse_rate(rate, &bps) || strlen(rate) >= sizeof out->rate) {
    snprintf(err, cap, "--emulate: '%s' is not a rate (e.g. 500mbit, 1gbit, 10gbit)%s", rate ? rate : "",
             colon ? "" : " or NODESxRANKS:RATE (e.g. 2x2:1gbit)");
    return -1;
  }
  snprintf(out->rate, sizeof out->rate, "%s", rate);
  return 0;
}

int launch_emu_parse_slow(const char *s, int *node, char *rate, size_t rate_cap, char *err,
                          size_t cap) {
  const char *eq = s ? strchr(s, '=') : NULL;
  uint64_t bps;
  char *end;
  errno = 0;
  long k = eq && s[0] >= '0' && s[0] <= '9' ? strtol(s, &end, 10) : -1;
  if (!eq || errno || k < 0 || end != eq || k >= LAUNCH_EMU_MAX_NODES) {
    snprintf(err, cap, "--emulate-slow: '%s' is not NODE=RATE (a node index from 0, e.g. 1=100mbit)",
             s ? s : "");
    return -1;
  }
  if (launch_emu_parse_rate(eq + 1, &bps) || strlen(eq + 1) >= rate_cap) {
    snprintf(err, cap, "--emulate-slow: '%s' is not a rate (e.g. 100mbit)", eq + 1);
    return -1;
  }
  *node = (int)k;
  snprintf(rate, rate_cap, "%s", eq + 1);
  return 0;
}

int launch_emu_plan(const char *emulate, const char *const *slow, int nslow, int *n, launch_emu_spec *spec,
                    const char **slow_rate, char *err, size_t cap) {
  const char *seen[LAUNCH_EMU_MAX_NODES] = {0};
  memset(spec, 0, sizeof *spec);
  if (emulate && launch_emu_parse_spec(emulate, spec, err, cap) < 0) return -1;
  if (nslow > 0 && !spec->nodes) {
    snprintf(err, cap, "--emulate-slow needs an emulated cluster (--emulate NODESxRANKS:RATE)");
    return -1;
  }
  for (int i = 0; i < nslow; i++) {
    int node;
    char rate[32];
    if (launch_emu_parse_slow(slow[i], &node, rate, sizeof rate, err, cap) < 0) return -1;
    if (node >= spec->nodes) {
      snprintf(err, cap, "--emulate-slow %s: there is no node %d (--emulate %s has nodes 0 to %d)", slow[i], node,
               emulate, spec->nodes - 1);
      return -1;
    }
    if (seen[node]) {
      snprintf(err, cap, "--emulate-slow: node %d given twice", node);
      return -1;
    }
    seen[node] = strchr(slow[i], '=') + 1;
  }
  if (slow_rate) memcpy(slow_rate, seen, sizeof seen);
  if (!emulate) return 0;
  if (spec->nodes) {
    int want = spec->nodes * spec->per_node;
    if (*n && *n != want) {
      snprintf(err, cap, "-n %d disagrees with --emulate %s (%d nodes of %d ranks: -n %d, or leave -n out)", *n,
               emulate, spec->nodes, spec->per_node, want);
      return -1;
    }
    *n = want;
  } else if (!*n) {
    snprintf(err, cap, "--emulate needs -n with a plain RATE (%s), or a cluster NODESxRANKS:RATE", emulate);
    return -1;
  } else if (*n > LAUNCH_EMU_MAX_NODES) {
    snprintf(err, cap, "--emulate %s: at most %d ranks (one namespace each)", emulate, LAUNCH_EMU_MAX_NODES);
    return -1;
  }
  return 0;
}

/* Runs argv (argv[0] a path), output (stdout and stderr) into out. Returns the exit status, or
 * -1 when it could not run or was killed. */
static int emu_run(char *const argv[], char *out, size_t cap) {
  int p[2];
  if (out && cap) out[0] = 0;
  if (pipe2(p, O_CLOEXEC) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull >= 0) dup2(devnull, 0);
    dup2(p[1], 1);
    dup2(p[1], 2);
    execv(argv[0], argv);
    _exit(127);
  }
  close(p[1]);
  size_t got = 0;
  char sink[512];
  for (;;) {
    char *dst = (out && got + 1 < cap) ? out + got : sink;
    size_t room = (out && got + 1 < cap) ? cap - 1 - got : sizeof sink;
    ssize_t k = read(p[0], dst, room);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (dst != sink) got += (size_t)k;
  }
  if (out && cap) out[got] = 0;
  close(p[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs argv and on failure writes "`ip link add ...`: <its first output line>" into err. */
static int emu_do(char *const argv[], char *err, size_t cap) {
  char out[1024];
  if (emu_run(argv, out, sizeof out) == 0) return 0;
  char cmd[512];
  size_t len = 0;
  cmd[0] = 0;
  for (int i = 0; argv[i] && len + 1 < sizeof cmd; i++) {
    const char *a = i == 0 ? (strrchr(argv[i], '/') ? strrchr(argv[i], '/') + 1 : argv[i])
                           : argv[i];
    int k = snprintf(cmd + len, sizeof cmd - len, "%s%s", i ? " " : "", a);
    if (k < 0) break;
    len += (size_t)k;
    if (len >= sizeof cmd) len = sizeof cmd - 1;
  }
  char *nl = strchr(out, '\n');
  if (nl) *nl = 0;
  snprintf(err, cap, "emulated fabric: '%s' failed: %s", cmd, out[0] ? out : "(no output)");
  return -1;
}

int launch_emu_find_tool(const char *name, char *out, size_t cap) {
  static const char *const dirs[] = {"/usr/sbin", "/sbin", "/usr/bin", "/bin"};
  const char *path = getenv("PATH");
  char buf[PATH_MAX];
  if (path) {
    const char *s = path;
    while (*s) {
      const char *e = strchr(s, ':');
      size_t l = e ? (size_t)(e - s) : strlen(s);
      if (l && l < sizeof buf - strlen(name) - 2) {
        snprintf(buf, sizeof buf, "%.*s/%s", (int)l, s, name);
        if (access(buf, X_OK) == 0 && buf[0] == '/' && strlen(buf) < cap) {
          memcpy(out, buf, strlen(buf) + 1);
          return 0;
        }
      }
      if (!e) break;
      s = e + 1;
    }
  }
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(buf, sizeof buf, "%s/%s", dirs[i], name);
    if (access(buf, X_OK) == 0 && strlen(buf) < cap) {
      memcpy(out, buf, strlen(buf) + 1);
      return 0;
    }
  }
  return -1;
}

/* The bucket holds 1 ms of traffic (>= rate/HZ for HZ >= 1000; tbf's watchdog is an hrtimer
 * anyway) and at least 64 KiB so a whole GSO super-packet passes without being split. More
 * would let idle gaps (barriers) bank credit and inflate short transfers. */
uint64_t launch_emu_burst(uint64_t bps) {
  uint64_t b = bps / 8 / 1000;
  return b < 65536 ? 65536 : b;
}

/* The queue holds 5 ms of traffic and at least 8 MiB, as a switch port's buffer would: the
 * chunks of a pipelined tree or a parameter server converge on one rank and must queue, not
 * drop (docs/measurements.md, "The emulated link's queue and credit"). */
uint64_t launch_emu_limit(uint64_t bps) {
  uint64_t q = bps / 8 / 200 + launch_emu_burst(bps);
  return q < (8u << 20) ? 8u << 20 : q;
}

int launch_emu_check(launch_emu *m, char *err, size_t cap) {
  if (geteuid() != 0) {
    snprintf(err, cap, "--emulate needs root (network namespaces and tc); run as root");
    return -1;
  }
  if (launch_emu_find_tool("ip", m->ip, sizeof m->ip) < 0 || launch_emu_find_tool("tc", m->tc, sizeof m->tc) < 0) {
    snprintf(err, cap, "--emulate needs iproute2 (ip and tc); install it (scripts/install-deps.sh)");
    return -1;
  }
  return 0;
}

int launch_emu_usable(char *why, size_t cap) {
  launch_emu m;
  memset(&m, 0, sizeof m);
  return launch_emu_check(&m, why, cap);
}

void launch_emu_ns(const launch_emu *m, int node, char *out, size_t cap) {
  snprintf(out, cap, "fb%ldn%d", m->id, node);
}
void launch_emu_dev(const launch_emu *m, int node, char *out, size_t cap) {
  snprintf(out, cap, "fb%lde%d", m->id, node);
}
void launch_emu_prefix(const launch_emu *m, char *out, size_t cap) {
  snprintf(out, cap, "198.%d.%d.", 18 + m->subnet / 256, m->subnet % 256);
}
void launch_emu_addr(const launch_emu *m, int node, char *out, size_t cap) {
  snprintf(out, cap, "198.%d.%d.%d", 18 + m->subnet / 256, m->subnet % 256, node + 1);
}
void launch_emu_subnet(const launch_emu *m, char *out, size_t cap) {
  snprintf(out, cap, "198.%d.%d.0/24", 18 + m->subnet / 256, m->subnet % 256);
}

/* Parses "fb<id><kind><num>" (kind 'n', 'h', 'e') or "fb<id>br"; returns the id or -1. */
static long emu_name_id(const char *name, char *kind) {
  if (strncmp(name, "fb", 2) != 0 || name[2] < '1' || name[2] > '9') return -1;
  char *end;
  long id = strtol(name + 2, &end, 10);
  if (id <= 0) return -1;
  if (!strcmp(end, "br")) {
    *kind = 'b';
    return id;
  }
  if ((*end != 'n' && *end != 'h' && *end != 'e') || end[1] < '0' || end[1] > '9') return -1;
  for (const char *p = end + 1; *p; p++)
    if (*p < '0' || *p > '9') return -1;
  *kind = *end;
  return id;
}

static int emu_alive(long id) { return kill((pid_t)id, 0) == 0 || errno == EPERM; }

/* Kills what runs in namespace ns (a stale set's leftovers). */
static void emu_kill_ns_pids(const launch_emu *m, const char *ns) {
  char out[4096];
  char *argv[] = {(char *)m->ip, "netns", "pids", (char *)ns, NULL};
  if (emu_run(argv, out, sizeof out) != 0) return;
  for (char *s = out; *s;) {
    char *end;
    long pid = strtol(s, &end, 10);
    if (end == s) break;
    if (pid > 1 && pid != getpid()) kill((pid_t)pid, SIGKILL);
    s = end;
    while (*s == '\n' || *s == ' ') s++;
  }
}

/* Removes everything of set `id`: host-side veths (their peers and qdiscs go with them), the
 * bridge, the namespaces. kill_pids: also kill processes still inside (stale sets). */
static void emu_remove_set(const launch_emu *m, long id, int kill_pids) {
  char name[IF_NAMESIZE + 8];
  DIR *d = opendir(EMU_NETNS_DIR);
  if (kill_pids && d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      char kind;
      if (emu_name_id(de->d_name, &kind) == id && kind == 'n') emu_kill_ns_pids(m, de->d_name);
    }
    rewinddir(d);
  }
  struct if_nameindex *ifs = if_nameindex();
  for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
    char kind;
    if (emu_name_id(i->if_name, &kind) != id || kind == 'b') continue;
    snprintf(name, sizeof name, "%s", i->if_name);
    char *argv[] = {(char *)m->ip, "link", "del", "dev", name, NULL};
    emu_run(argv, NULL, 0);
  }
  if (ifs) if_freenameindex(ifs);
  snprintf(name, sizeof name, "fb%ldbr", id);
  if (if_nametoindex(name)) {
    char *argv[] = {(char *)m->ip, "link", "del", "dev", name, NULL};
    emu_run(argv, NULL, 0);
  }
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      char kind;
      if (emu_name_id(de->d_name, &kind) != id || kind != 'n') continue;
      char *argv[] = {(char *)m->ip, "netns", "del", de->d_name, NULL};
      emu_run(argv, NULL, 0);
    }
    closedir(d);
  }
}

/* Stops the namespace holders that have started (holder[k] > 0) and reaps them. */
static void emu_hosts_down(launch_emu *m) {
  for (int k = 0; k < m->n && k < LAUNCH_EMU_MAX_NODES; k++) {
    if (m->holder[k] <= 0) continue;
    kill(m->holder[k], SIGKILL);
    while (waitpid(m->holder[k], NULL, 0) < 0 && errno == EINTR) {
    }
    m->holder[k] = 0;
  }
  m->hosts = 0;
}

void launch_emu_teardown(launch_emu *m) {
  emu_hosts_down(m);
  if (m->id > 0) emu_remove_set(m, m->id, 0);
}

void launch_emu_hostname(int node, char *out, size_t cap) { snprintf(out, cap, "node%d", node); }

/* One node's holder: a child in a UTS and an IPC namespace of its own, named, asleep until
 * killed or orphaned. It tells its parent it is ready (or why not) over a pipe. */
static pid_t emu_holder(int node, char *err, size_t cap) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0) {
    snprintf(err, cap, "emulated hosts: pipe: %s", strerror(errno));
    return -1;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, cap, "emulated hosts: fork: %s", strerror(errno));
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    close(p[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    char name[32];
    launch_emu_hostname(node, name, sizeof name);
    int code = 0;
    if (getppid() != parent) _exit(1);
    if (unshare(CLONE_NEWUTS | CLONE_NEWIPC) < 0) code = errno;
    else if (sethostname(name, strlen(name)) < 0) code = errno;
    unsigned char b = (unsigned char)code;
    if (write(p[1], &b, 1) != 1 || code) _exit(1);
    close(p[1]);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (;;) pause();
  }
  close(p[1]);
  unsigned char b = 255;
  ssize_t k;
  while ((k = read(p[0], &b, 1)) < 0 && errno == EINTR) {
  }
  close(p[0]);
  if (k == 1 && b == 0) return pid;
  kill(pid, SIGKILL);
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
  snprintf(err, cap, "emulated hosts: cannot make node %d's UTS and IPC namespaces: %s", node,
           k == 1 ? strerror(b) : "the helper process died");
  return -1;
}

int launch_emu_hosts_up(launch_emu *m, char *err, size_t cap) {
  for (int k = 0; k < m->n; k++) {
    pid_t pid = emu_holder(k, err, cap);
    if (pid < 0) {
      emu_hosts_down(m);
      return -1;
    }
    m->holder[k] = pid;
  }
  m->hosts = 1;
  return 0;
}

int launch_emu_host_fds(const launch_emu *m, int node, int fds[2]) {
  fds[0] = fds[1] = -1;
  if (!m->hosts || node < 0 || node >= m->n) return 0;
  static const char *const which[2] = {"uts", "ipc"};
  for (int i = 0; i < 2; i++) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)m->holder[node], which[i]);
    if ((fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
      int saved = errno;
      if (i) close(fds[0]);
      fds[0] = fds[1] = -1;
      errno = saved;
      return -1;
    }
  }
  return 0;
}

/* Adds id to ids[] (unique); returns the new count. */
static int emu_add_id(long *ids, int n, int cap, long id) {
  for (int i = 0; i < n; i++)
    if (ids[i] == id) return n;
  if (n < cap) ids[n++] = id;
  return n;
}

int launch_emu_cleanup_stale(const launch_emu *m, char *err, size_t cap) {
  long ids[256];
  int nids = 0;
  char kind;
  DIR *d = opendir(EMU_NETNS_DIR);
  if (d) {
    struct dirent *de;
    while ((de = readdir(d))) {
      long id = emu_name_id(de->d_name, &kind);
      if (id > 0) nids = emu_add_id(ids, nids, 256, id);
    }
    closedir(d);
  }
  struct if_nameindex *ifs = if_nameindex();
  if (!ifs && errno != 0 && !d) {
    snprintf(err, cap, "emulated fabric: cannot list network interfaces: %s", strerror(errno));
    return -1;
  }
  for (struct if_nameindex *i = ifs; i && i->if_index; i++) {
    long id = emu_name_id(i->if_name, &kind);
    if (id > 0) nids = emu_add_id(ids, nids, 256, id);
  }
  if (ifs) if_freenameindex(ifs);
  int removed = 0;
  for (int i = 0; i < nids; i++) {
    if (ids[i] == (long)getpid() || emu_alive(ids[i])) continue;
    emu_remove_set(m, ids[i], 1);
    removed++;
  }
  return removed;
}

/* Writes "1" to an IPv6 conf knob (no link-local chatter on our links); best effort. */
static void emu_no_ipv6(const char *dev) {
  char path[128];
  snprintf(path, sizeof path, "/proc/sys/net/ipv6/conf/%s/disable_ipv6", dev);
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  if (write(fd, "1", 1) < 0) { /* IPv6 may be absent: nothing to silence */
  }
  close(fd);
}

/* Namespace ns's own settings, written from inside it (the net sysctls under /proc/sys are
 * those of the opener's namespace): no IPv6 on the defaults that devices moved in there inherit
 * (best effort), and unless cc is NULL the default TCP congestion control, which every socket
 * opened there takes (UCX's and Open MPI's too, which have no setting of their own). 0, or -1
 * with the reason. */
static int emu_ns_settings(const char *ns, const char *cc, char *err, size_t cap) {
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/%s", EMU_NETNS_DIR, ns);
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, cap, "emulated fabric: cannot fork: %s", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) _exit(100);
    emu_no_ipv6("default");
    emu_no_ipv6("all");
    if (!cc) _exit(0);
    int k = open("/proc/sys/net/ipv4/tcp_congestion_control", O_WRONLY | O_CLOEXEC);
    if (k < 0 || write(k, cc, strlen(cc)) != (ssize_t)strlen(cc))
      _exit(errno > 0 && errno < 99 ? errno : 99);
    _exit(0);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
  if (code == 0) return 0;
  if (code == 100)
    snprintf(err, cap, "emulated fabric: cannot enter namespace %s", ns);
  else
    snprintf(err, cap, "emulated fabric: tcp congestion control '%s' in namespace %s: %s (see "
                       "/proc/sys/net/ipv4/tcp_available_congestion_control)", cc, ns,
             code == ENOENT ? "the kernel has no such congestion control"
             : code == 99   ? "failed"
                            : strerror(code));
  return -1;
}

/* A /24 of 198.18.0.0/15 that no interface of this namespace uses, starting from a hint. */
static int emu_pick_subnet(long hint) {
  unsigned char used[512] = {0};
  struct ifaddrs *ifa = NULL;
  if (getifaddrs(&ifa) == 0) {
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
      uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
      if ((a & 0xfffe0000u) == 0xc6120000u) used[(a >> 8) & 0x1ff] = 1;
    }
    freeifaddrs(ifa);
  }
  for (int k = 0; k < 512; k++) {
    int s = (int)((hint + k) % 512);
    if (!used[s]) return s;
  }
  return -1;
}

int launch_emu_setup(launch_emu *m, long id, int n, const char *rate, const char *const *node_rate,
                     int mtu, const char *cc, char *err, size_t cap) {
  char ip_[sizeof m->ip], tc_[sizeof m->tc];
  memcpy(ip_, m->ip, sizeof ip_);
  memcpy(tc_, m->tc, sizeof tc_);
  memset(m, 0, sizeof *m);
  memcpy(m->ip, ip_, sizeof ip_);
  memcpy(m->tc, tc_, sizeof tc_);
  if (launch_emu_parse_rate(rate, &m->rate_bps) < 0) {
    snprintf(err, cap, "--emulate: bad rate '%s' (use e.g. 500mbit, 1gbit, 10gbit)", rate);
    return -1;
  }
  if (n < 1 || n > LAUNCH_EMU_MAX_NODES) {
    snprintf(err, cap, "--emulate: %d namespaces (1 to %d)", n, LAUNCH_EMU_MAX_NODES);
    return -1;
  }
  for (int k = 0; node_rate && k < n; k++) {
    uint64_t bps;
    if (!node_rate[k]) continue;
    if (launch_emu_parse_rate(node_rate[k], &bps) < 0 || strlen(node_rate[k]) >= sizeof m->node_rate[k]) {
      snprintf(err, cap, "--emulate-slow: bad rate '%s' for node %d", node_rate[k], k);
      return -1;
    }
    snprintf(m->node_rate[k], sizeof m->node_rate[k], "%s", node_rate[k]);
  }
  if (id <= 0 || id > 9999999) {
    snprintf(err, cap, "emulated fabric: bad set id %ld", id);
    return -1;
  }
  if (mtu == 0) {
    const char *e = getenv("FABENCH_EMU_MTU");
    mtu = LAUNCH_EMU_DEFAULT_MTU;
    if (e && *e) {
      char *end;
      long v = strtol(e, &end, 10);
      if (*end || v < 576 || v > 65535) {
        snprintf(err, cap, "FABENCH_EMU_MTU=%s: an MTU from 576 to 65535", e);
        return -1;
      }
      mtu = (int)v;
    }
  }
  if (cc && (!*cc || strlen(cc) >= sizeof m->cc || strchr(cc, '/') || strchr(cc, '\n'))) {
    snprintf(err, cap, "emulated fabric: bad tcp congestion control name '%s'", cc);
    return -1;
  }
  m->id = id;
  m->n = n;
  m->mtu = mtu;
  snprintf(m->cc, sizeof m->cc, "%s", cc ? cc : "");
  snprintf(m->rate, sizeof m->rate, "%s", rate);
  m->burst = launch_emu_burst(m->rate_bps);
  m->limit = launch_emu_limit(m->rate_bps);

  char ns[32], dev[32], host[32], br[32], addr[64], pre[32], mtus[16], burst[32], limit[32];
  snprintf(br, sizeof br, "fb%ldbr", id);
  snprintf(mtus, sizeof mtus, "%d", mtu);

  /* Subnet choice and the bridge's address under one lock, so two set-ups never pick the same
   * /24 (the bridges' addresses share the root namespace's routing table). */
  int lock = open(EMU_LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock >= 0) flock(lock, LOCK_EX);
  m->subnet = emu_pick_subnet(id);
  if (m->subnet < 0) {
    if (lock >= 0) close(lock);
    snprintf(err, cap, "emulated fabric: every /24 of 198.18.0.0/15 is in use");
    return -1;
  }
  launch_emu_prefix(m, pre, sizeof pre);
  snprintf(addr, sizeof addr, "%s254/24", pre);
  {
    char *a1[] = {m->ip, "link", "add", "name", br, "mtu", mtus, "type", "bridge", NULL};
    char *a2[] = {m->ip, "addr", "add", addr, "dev", br, NULL};
    char *a3[] = {m->ip, "link", "set", "dev", br, "up", NULL};
    int rc = emu_do(a1, err, cap);
    if (rc == 0) {
      emu_no_ipv6(br);
      rc = emu_do(a2, err, cap);
    }
    if (rc == 0) rc = emu_do(a3, err, cap);
    if (lock >= 0) close(lock);
    if (rc < 0) goto fail;
  }
  for (int r = 0; r < n; r++) {
    launch_emu_ns(m, r, ns, sizeof ns);
    launch_emu_dev(m, r, dev, sizeof dev);
    snprintf(host, sizeof host, "fb%ldh%d", id, r);
    snprintf(addr, sizeof addr, "%s%d/24", pre, r + 1);
    /* a slow node's link has its own rate, and the bucket and queue that rate gets */
    char *lrate = m->node_rate[r][0] ? m->node_rate[r] : m->rate;
    uint64_t lbps = m->rate_bps;
    if (m->node_rate[r][0]) launch_emu_parse_rate(lrate, &lbps);
    snprintf(burst, sizeof burst, "%llu", (unsigned long long)launch_emu_burst(lbps));
    snprintf(limit, sizeof limit, "%llu", (unsigned long long)launch_emu_limit(lbps));
    char *c1[] = {m->ip, "netns", "add", ns, NULL};
    if (emu_do(c1, err, cap) < 0) goto fail;
    if (emu_ns_settings(ns, cc, err, cap) < 0) goto fail;
    char *c2[] = {m->ip, "link", "add", "name", host, "mtu", mtus, "type", "veth",
                  "peer", "name", dev, "mtu", mtus, "netns", ns, NULL};
    char *c3[] = {m->ip, "link", "set", "dev", host, "master", br, "up", NULL};
    char *c4[] = {m->ip, "-n", ns, "link", "set", "dev", "lo", "up", NULL};
    char *c5[] = {m->ip, "-n", ns, "addr", "add", addr, "dev", dev, NULL};
    char *c6[] = {m->ip, "-n", ns, "link", "set", "dev", dev, "up", NULL};
    /* Both directions: the host side shapes what the rank receives, its own end what it sends. */
    char *c7[] = {m->tc, "qdisc", "add", "dev", host, "root", "tbf", "rate", lrate,
                  "burst", burst, "limit", limit, NULL};
    char *c8[] = {m->tc, "-n", ns, "qdisc", "add", "dev", dev, "root", "tbf", "rate", lrate,
                  "burst", burst, "limit", limit, NULL};
    if (emu_do(c2, err, cap) < 0) goto fail;
    emu_no_ipv6(host);
    if (emu_do(c3, err, cap) < 0 || emu_do(c4, err, cap) < 0 || emu_do(c5, err, cap) < 0 ||
        emu_do(c6, err, cap) < 0 || emu_do(c7, err, cap) < 0 || emu_do(c8, err, cap) < 0)
      goto fail;
  }
  return 0;
fail:
  launch_emu_teardown(m);
  return -1;
}
