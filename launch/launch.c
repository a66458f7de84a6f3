/* launch: the local launcher (-n N), through mpirun or fork + exec, optionally on an emulated
 * fabric or cluster. See launch.h for the contract with the commands.
 *
 * Signals: the launcher blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD and takes them with
 * sigtimedwait, so it needs no handler and no global state; children get the caller's mask
 * back before exec. */
#include "launch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "emu.h"

extern char **environ;

#define LAUNCH_GRACE_S 3.0 /* SIGTERM to SIGKILL */
/* A rank that exits with an error of its own has usually told the others (a failed check that
 * every rank makes), and they are still writing what they measured; they get this long to end
 * before the SIGTERM. A rank killed by a signal gets its peers the SIGTERM at once. */
#define LAUNCH_SETTLE_S 2.0
#define LAUNCH_MAX_RANKS 1024
#define LAUNCH_EMU_ROOT_PORT 29500 /* rank 0's namespace is fresh: every port is free there */

static void launch_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void launch_err(const char *fmt, ...) {
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "fabench: %s\n", line);
}

static double launch_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- argument and environment vectors (built before fork: the child only execs) ---- */
typedef struct {
  char **v;
  int n, cap;
  int oom;
} launch_vec;

static void vec_push(launch_vec *a, const char *s) {
  if (a->oom) return;
  if (a->n + 2 > a->cap) {
    int cap = a->cap ? 2 * a->cap : 32;
    char **v = realloc(a->v, (size_t)cap * sizeof *v);
    if (!v) {
      a->oom = 1;
      return;
    }
    a->v = v;
    a->cap = cap;
  }
  char *d = strdup(s);
  if (!d) {
    a->oom = 1;
    return;
  }
  a->v[a->n++] = d;
  a->v[a->n] = NULL;
}

static void vec_pushf(launch_vec *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void vec_pushf(launch_vec *a, const char *fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  vec_push(a, buf);
}

static void vec_free(launch_vec *a) {
  for (int i = 0; i < a->n; i++) free(a->v[i]);
  free(a->v);
  memset(a, 0, sizeof *a);
}

/* The variables the launcher sets; copies of the caller's are dropped. The last two are set
 * only under emulation: otherwise the user's UCX_NET_DEVICES is theirs to keep. */
static const char *const launch_keys[] = {
    "FABENCH_RANK", "FABENCH_WORLD_SIZE", "FABENCH_LOCAL_RANK", "FABENCH_ROOT",
    "FABENCH_TOKEN", "FABENCH_LAUNCHER", "FABENCH_TIMEOUT_S", "FABENCH_BIND_ADDR", "FABENCH_ROOT_FD",
    "FABENCH_FABRIC", "FABENCH_EMU_RATE", "FABENCH_EMU_MTU", "FABENCH_EMU_BURST", "FABENCH_EMU_QUEUE",
    "FABENCH_EMU_CC", "FABENCH_EMU_LAYOUT", "FABENCH_EMU_SLOW", NULL};
static const char *const launch_emu_keys[] = {"UCX_NET_DEVICES", "PMIX_MCA_ptl_tcp_if_include", NULL};

static int launch_in(const char *kv, const char *const *keys) {
  for (int i = 0; keys[i]; i++) {
    size_t l = strlen(keys[i]);
    if (!strncmp(kv, keys[i], l) && kv[l] == '=') return 1;
  }
  return 0;
}

static void env_base(launch_vec *env, int emulating) {
  for (char **e = environ; e && *e; e++)
    if (!launch_in(*e, launch_keys) && !(emulating && launch_in(*e, launch_emu_keys))) vec_push(env, *e);
}

/* ---- launch_own_strip ---- */
void launch_own_note(launch_own *own, char *const *argv, int next, const char *value) {
  int last = next - 1;
  /* a value of its own element ("-n" "4") follows the option; else both share one ("-n4") */
  int first = last > 1 && value == argv[last] ? last - 1 : last;
  for (int i = first; i <= last && i > 0; i++) {
    if (own->n == LAUNCH_OWN_MAX) {
      own->over = 1;
      return;
    }
    own->arg[own->n++] = argv[i];
  }
}

int launch_own_strip(int argc, char **argv, const launch_own *own) {
  if (own->over) return -1;
  int out = 0;
  for (int i = 0; i < argc; i++) {
    int drop = 0;
    /* by identity, not by content: the same text elsewhere is another option's value */
    for (int k = 0; k < own->n && !drop; k++) drop = argv[i] == own->arg[k];
    if (!drop) argv[out++] = argv[i];
  }
  argv[out] = NULL;
  return out;
}

/* ---- the job ---- */
typedef struct {
  pid_t pid;
  int done;     /* reaped */
  int status;   /* from waitpid */
  int signaled; /* the last signal we sent it to stop it (0: none) */
} launch_rank;

static int launch_token(char *out, size_t cap) {
  unsigned char b[16];
  size_t got = 0;
  while (got < sizeof b) {
    ssize_t k = getrandom(b + got, sizeof b - got, 0);
    if (k < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    got += (size_t)k;
  }
  for (size_t i = 0; i < sizeof b && 2 * i + 2 < cap; i++) snprintf(out + 2 * i, 3, "%02x", b[i]);
  return 0;
}

/* Rank 0's rendezvous socket, listening on a free loopback port, made here and inherited by rank
 * 0 (FABENCH_ROOT_FD): a port the launcher only found free could be taken by another process
 * before rank 0 bound it (CI saw "Address already in use"). Not close-on-exec until rank 0 is
 * started. The fd, or -1 with errno. */
static int launch_root_socket(int backlog, int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, backlog) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  *port = ntohs(sa.sin_port);
  return fd;
}

/* hostns: an emulated node's UTS and IPC namespaces to join before exec (-1: none). */
static pid_t launch_spawn(const char *path, char **argv, char **envp, const sigset_t *mask,
                          const int hostns[2]) {
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid != 0) return pid;
  /* Ranks die with the launcher even if it is SIGKILLed (nothing else could stop them). */
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(127);
  sigprocmask(SIG_SETMASK, mask, NULL);
  if (hostns && ((hostns[0] >= 0 && setns(hostns[0], CLONE_NEWUTS) < 0) ||
                 (hostns[1] >= 0 && setns(hostns[1], CLONE_NEWIPC) < 0))) {
    const char *why = strerror(errno);
    if (write(2, "fabench: cannot enter the emulated node's namespaces: ", 54) < 0 ||
        write(2, why, strlen(why)) < 0 || write(2, "\n", 1) < 0) {
    }
    _exit(127);
  }
  execve(path, argv, envp);
  const char *why = strerror(errno);
  if (write(2, "fabench: cannot run ", 20) < 0 || write(2, path, strlen(path)) < 0 ||
      write(2, ": ", 2) < 0 || write(2, why, strlen(why)) < 0 || write(2, "\n", 1) < 0) {
  }
  _exit(127);
}

static void launch_describe(char *out, size_t cap, int status) {
  if (WIFSIGNALED(status))
    snprintf(out, cap, "killed by signal %d", WTERMSIG(status));
  else
    snprintf(out, cap, "exited with status %d", WEXITSTATUS(status));
}

static int launch_failed(int status) {
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
}

/* Does the user's mpirun argument list already set MCA parameter `name`? (Open MPI refuses a
 * parameter given twice.) */
static int mpirun_has_mca(const launch_vec *user, const char *name) {
  for (int i = 0; i + 1 < user->n; i++)
    if ((!strcmp(user->v[i], "--mca") || !strcmp(user->v[i], "-mca")) &&
        !strcmp(user->v[i + 1], name))
      return 1;
  return 0;
}

/* mpirun -np N --oversubscribe --bind-to none <user args> -x ... [emulation] prog argv... */
static void build_mpirun(launch_vec *a, const launch_opts *o, const char *mpirun,
                         const char *prog, char *const rank_argv[], const launch_emu *emu,
                         int per_node, const char *nsenter) {
  launch_vec user = {0};
  if (o->mpirun_args) {
    char *copy = strdup(o->mpirun_args);
    if (!copy) {
      a->oom = 1;
      return;
    }
    char *save = NULL;
    for (char *t = strtok_r(copy, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save))
      vec_push(&user, t);
    free(copy);
  }
  vec_push(a, mpirun);
  vec_push(a, "-np");
  vec_pushf(a, "%d", o->n);
  vec_push(a, "--oversubscribe");
  vec_push(a, "--bind-to");
  vec_push(a, "none");
  for (int i = 0; i < user.n; i++) vec_push(a, user.v[i]);
  static const char *const exported[] = {"FABENCH_TOKEN", "FABENCH_TIMEOUT_S", "FABENCH_LAUNCHER",
                                         NULL};
  for (int i = 0; exported[i]; i++) {
    vec_push(a, "-x");
    vec_push(a, exported[i]);
  }
  if (emu) {
    char subnet[32], pre[32], nspre[32], devpre[32];
    launch_emu_subnet(emu, subnet, sizeof subnet);
    launch_emu_prefix(emu, pre, sizeof pre);
    snprintf(nspre, sizeof nspre, "fb%ldn", emu->id);
    snprintf(devpre, sizeof devpre, "fb%lde", emu->id);
    static const char *const emu_exported[] = {"FABENCH_FABRIC", "FABENCH_EMU_RATE",
                                               "FABENCH_EMU_MTU", "FABENCH_EMU_BURST", "FABENCH_EMU_QUEUE",
                                               "PMIX_MCA_ptl_tcp_if_include", "UCX_TLS", NULL};
    for (int i = 0; emu_exported[i]; i++) {
      vec_push(a, "-x");
      vec_push(a, emu_exported[i]);
    }
    int slow = 0; /* as cc below: only those set (env_emu) */
    for (int k = 0; k < emu->n; k++) slow |= emu->node_rate[k][0] != 0;
    if (per_node > 0) vec_push(a, "-x"), vec_push(a, "FABENCH_EMU_LAYOUT");
    if (slow) vec_push(a, "-x"), vec_push(a, "FABENCH_EMU_SLOW");
    if (emu->cc[0]) { /* set only then (env_emu): mpirun warns of an -x it cannot find */
      vec_push(a, "-x");
      vec_push(a, "FABENCH_EMU_CC");
    }
    /* Ranks in other namespaces reach only the set's subnet: MPI's TCP path must use it, and
     * not shared memory (which would bypass the shaped links). */
    if (!mpirun_has_mca(&user, "btl")) {
      vec_push(a, "--mca");
      vec_push(a, "btl");
      vec_push(a, "tcp,self");
    }
    if (!mpirun_has_mca(&user, "btl_tcp_if_include")) {
      vec_push(a, "--mca");
      vec_push(a, "btl_tcp_if_include");
      vec_push(a, subnet);
    }
    /* Each rank enters its node's namespaces (node = rank / per_node; with emulated hosts
     * also the node holder's UTS and IPC ones, through nsenter); the shell text is constant,
     * every name and every user argument travels as a positional parameter. */
    char holders[LAUNCH_EMU_MAX_NODES * 12 + 1] = "";
    size_t hl = 0;
    for (int k = 0; emu->hosts && k < emu->n && hl + 12 < sizeof holders; k++)
      hl += (size_t)snprintf(holders + hl, sizeof holders - hl, "%s%d", k ? " " : "", (int)emu->holder[k]);
    vec_push(a, "/bin/sh");
    vec_push(a, "-c");
    vec_push(a,
             "r=$OMPI_COMM_WORLD_RANK; k=$((r / $5)); FABENCH_BIND_ADDR=$2$((k + 1)); "
             "UCX_NET_DEVICES=$3$k; export FABENCH_BIND_ADDR UCX_NET_DEVICES; ns=$1$k; ip=$4; "
             "h=; i=0; for p in $6; do [ $i = $k ] && h=$p; i=$((i + 1)); done; ne=$7; shift 7; "
             "if [ -n \"$h\" ]; then exec \"$ne\" -t \"$h\" -u -i \"$ip\" netns exec \"$ns\" \"$@\"; fi; "
             "exec \"$ip\" netns exec \"$ns\" \"$@\"");
    vec_push(a, "fabench-netns");
    vec_push(a, nspre);
    vec_push(a, pre);
    vec_push(a, devpre);
    vec_push(a, emu->ip);
    vec_pushf(a, "%d", per_node > 0 ? per_node : 1);
    vec_push(a, holders);
    vec_push(a, nsenter ? nsenter : "nsenter");
  }
  vec_push(a, prog);
  for (int i = 0; rank_argv[i]; i++) vec_push(a, rank_argv[i]);
  vec_free(&user);
}

static const char *launch_signame(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "signal";
}

/* Sends sig to every live process of the job, and SIGCONT after it: a stopped rank (SIGSTOP,
 * a debugger gone) would otherwise hold its SIGTERM until the SIGKILL a grace period later. */
static void launch_signal_all(launch_rank *rk, int n, int sig) {
  for (int i = 0; i < n; i++)
    if (!rk[i].done && rk[i].pid > 0) {
      kill(rk[i].pid, sig);
      kill(rk[i].pid, SIGCONT);
      rk[i].signaled = sig;
    }
}

/* LLVM's OpenMP runtime (libomp, which a clang build links) registers every process in
 * /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> and removes that file at exit; a rank killed by a
 * signal leaves it for good (libomp reclaims one only when a later process gets the same pid).
 * Once the rank is reaped, no process has its pid: the file is stale and the launcher, the one
 * that knows the pid, removes it. No file (GNU libgomp, a clean exit): nothing happens. */
static void launch_forget_omp(pid_t pid) {
  char path[96];
  snprintf(path, sizeof path, "/dev/shm/__KMP_REGISTERED_LIB_%d_%d", (int)pid, (int)getuid());
  unlink(path);
}

/* Through mpirun the ranks are mpirun's children, not ours: note their pids (the children of
 * each of its threads) while they run, so their libomp files can go once they are gone, and
 * which rank ended first. mpirun names a rank that died, but not always: under load its
 * "process rank N ... exited on signal" line can go missing when another rank's exit reaches it
 * first. The first rank to end while the others ran is then the launcher's to name. */
typedef struct {
  pid_t pid[LAUNCH_MAX_RANKS];
  int rank[LAUNCH_MAX_RANKS]; /* -1 until its environment (after exec) tells */
  char gone[LAUNCH_MAX_RANKS];
  int n;
  int first, first_alone; /* index of the first rank seen gone; 1: no other went with it */
  double first_at;
} launch_seen;

/* OMPI_COMM_WORLD_RANK from a process's environment; -1 if it has none (yet). */
static int launch_rank_of(pid_t pid) {
  char path[64], buf[1 << 15];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t k = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (k <= 0) return -1;
  buf[k] = 0;
  static const char key[] = "OMPI_COMM_WORLD_RANK=";
  for (char *e = buf; e < buf + k; e += strlen(e) + 1)
    if (!strncmp(e, key, sizeof key - 1)) return atoi(e + sizeof key - 1);
  return -1;
}

/* Gone: no such process, or a zombie mpirun has not reaped yet. */
static int launch_gone(pid_t pid) {
  char path[64], st[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  ssize_t k = read(fd, st, sizeof st - 1);
  close(fd);
  if (k <= 0) return 1;
  st[k] = 0;
  char *paren = strrchr(st, ')');
  return paren && paren[1] == ' ' && paren[2] == 'Z';
}

static void launch_note_children(launch_seen *seen, pid_t parent, double t0) {
  char dir[64];
  snprintf(dir, sizeof dir, "/proc/%d/task", (int)parent);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    char *end;
    long tid = strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end) continue; /* . and .. */
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task/%ld/children", (int)parent, tid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    int pid;
    while (fscanf(f, "%d", &pid) == 1) {
      int known = 0;
      for (int i = 0; i < seen->n && !known; i++) known = seen->pid[i] == pid;
      if (!known && seen->n < LAUNCH_MAX_RANKS) {
        seen->rank[seen->n] = -1;
        seen->pid[seen->n++] = pid;
      }
    }
    fclose(f);
  }
  closedir(d);
  int went = -1, nwent = 0, live = 0;
  for (int i = 0; i < seen->n; i++) {
    if (seen->gone[i]) continue;
    if (seen->rank[i] < 0) seen->rank[i] = launch_rank_of(seen->pid[i]);
    if (seen->rank[i] < 0) continue; /* not a rank, or not exec'd yet */
    if (launch_gone(seen->pid[i])) {
      seen->gone[i] = 1;
      went = i;
      nwent++;
    } else {
      live++;
    }
  }
  if (nwent > 0 && seen->first < 0) {
    seen->first = went;
    seen->first_alone = nwent == 1 && live > 0;
    seen->first_at = launch_now() - t0;
  }
}

/* After mpirun: a rank it reaped is gone; one it left running (mpirun need not wait for ranks
 * it stopped) is now our child, as the launcher is their subreaper in mpirun mode: reap it, with
 * SIGKILL after the grace. Either way, once its pid is free, its libomp file goes. */
static void launch_reap_orphans(const launch_seen *seen) {
  char done[LAUNCH_MAX_RANKS] = {0};
  int left = seen->n, killed = 0;
  double kill_at = launch_now() + LAUNCH_GRACE_S;
  while (left > 0) {
    for (int i = 0; i < seen->n; i++) {
      if (done[i]) continue;
      int st;
      pid_t p = waitpid(seen->pid[i], &st, WNOHANG);
      if (p == 0) continue; /* our child, still running */
      if (p < 0 && errno == EINTR) continue;
      /* p < 0: not our child; its pid is free unless some later process took it */
      if (p > 0 || (kill(seen->pid[i], 0) < 0 && errno == ESRCH)) launch_forget_omp(seen->pid[i]);
      done[i] = 1;
      left--;
    }
    if (left == 0) break;
    if (!killed && launch_now() >= kill_at) {
      for (int i = 0; i < seen->n; i++)
        if (!done[i]) kill(seen->pid[i], SIGKILL);
      killed = 1;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

/* Where rank r runs: the emulated node's hostname where per_node > 0 (emulated hosts), else
 * this host's name. */
static const char *launch_where(char *out, size_t cap, int r, int per_node, const char *host) {
  if (per_node > 0 && r >= 0) launch_emu_hostname(r / per_node, out, cap);
  else snprintf(out, cap, "%s", host);
  return out;
}

/* Waits for every process; returns the job's exit status. mpirun_mode: rk[0] is mpirun.
 * per_node > 0: the ranks run on emulated hosts of that many ranks each (for the messages). */
static int launch_wait(launch_rank *rk, int n, int mpirun_mode, const sigset_t *set, int per_node) {
  int alive = n, first_fail = -1, interrupted = 0;
  char host[256] = "", where[256];
  gethostname(host, sizeof host - 1); /* every rank the launcher starts runs here */
  double kill_at = 0, term_at = 0; /* when stopping: the SIGKILL deadline; a SIGTERM still due */
  launch_seen *seen = mpirun_mode ? calloc(1, sizeof *seen) : NULL;
  if (seen) seen->first = -1;
  double t0 = launch_now();
  while (alive > 0) {
    if (seen && !rk[0].done) launch_note_children(seen, rk[0].pid, t0);
    struct timespec ts = {0, 200 * 1000 * 1000};
    siginfo_t info;
    int sig = sigtimedwait(set, &info, &ts);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
      if (interrupted) { /* a second one: no more grace */
        launch_signal_all(rk, n, SIGKILL);
      } else {
        launch_err("%s: stopping the ranks", launch_signame(sig));
        interrupted = sig;
        launch_signal_all(rk, n, sig == SIGHUP ? SIGTERM : sig);
        if (kill_at == 0) kill_at = launch_now() + LAUNCH_GRACE_S;
      }
    }
    for (int i = 0; i < n; i++) {
      if (rk[i].done) continue;
      int st;
      pid_t p = waitpid(rk[i].pid, &st, WNOHANG);
      if (p == 0 || (p < 0 && errno == EINTR)) continue;
      rk[i].done = 1;
      alive--;
      if (p < 0) { /* not ours any more: count it as lost */
        st = 0x7f00;
      }
      rk[i].status = st;
      if (p > 0 && WIFSIGNALED(st)) launch_forget_omp(p);
      if (!launch_failed(st)) continue;
      char what[64];
      launch_describe(what, sizeof what, st);
      if (first_fail < 0 && !interrupted) {
        first_fail = i;
        if (mpirun_mode) {
          launch_err("mpirun (pid %d) on %s %s", (int)rk[i].pid, host, what);
          if (seen && seen->first >= 0 && seen->first_alone)
            launch_err("rank %d (%s): pid %d was the first rank here to end, %.2f s into the job",
                       seen->rank[seen->first],
                       launch_where(where, sizeof where, seen->rank[seen->first], per_node, host),
                       (int)seen->pid[seen->first], seen->first_at);
        } else
          launch_err("rank %d (%s): pid %d %s", i, launch_where(where, sizeof where, i, per_node, host),
                     (int)rk[i].pid, what);
        if (alive > 0) term_at = launch_now() + (WIFEXITED(st) ? LAUNCH_SETTLE_S : 0);
      } else if (!interrupted && (!rk[i].signaled || (WIFSIGNALED(st) && WTERMSIG(st) != rk[i].signaled))) {
        /* also one that died of another signal than ours: it ended on its own, perhaps first
         * (a killed ucx rank is reaped after the peer its death made abort) */
        launch_err("rank %d (%s): pid %d %s", i, launch_where(where, sizeof where, i, per_node, host),
                   (int)rk[i].pid, what);
      }
    }
    if (term_at > 0 && alive > 0 && !interrupted && launch_now() >= term_at) {
      launch_signal_all(rk, n, SIGTERM);
      kill_at = launch_now() + LAUNCH_GRACE_S;
      term_at = 0;
    }
    if (kill_at > 0 && alive > 0 && launch_now() >= kill_at) {
      launch_signal_all(rk, n, SIGKILL);
      kill_at = launch_now() + 3600; /* SIGKILL is final; just reap */
    }
  }
  if (seen) {
    launch_reap_orphans(seen);
    free(seen);
  }
  if (first_fail >= 0) {
    int st = rk[first_fail].status;
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 1;
  }
  if (interrupted) return 128 + interrupted;
  return 0;
}

int launch_ranks(const launch_opts *o, char *const rank_argv[]) {
  char exe[PATH_MAX];
  ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (k <= 0) {
    launch_err("cannot find this program (/proc/self/exe): %s", strerror(errno));
    return 1;
  }
  exe[k] = 0;
  return launch_ranks_prog(o, exe, rank_argv);
}

/* The checks of the options before anything starts: 0, or the exit status after saying why
 * (emu_store checked where o->emulate, *mpirun set where o->use_mpirun). */
static int launch_check(const launch_opts *o, launch_emu *emu_store, launch_emu_spec *spec,
                        const char **slow_rate, const char **mpirun) {
  char err[1024];
  if (o->n < 1 || o->n > LAUNCH_MAX_RANKS) {
    launch_err("-n %d: ranks must be 1 to %d", o->n, LAUNCH_MAX_RANKS);
    return 2;
  }
  int n = o->n;
  if (launch_emu_plan(o->emulate, o->slow, o->nslow, &n, spec, slow_rate, err, sizeof err) < 0) {
    launch_err("%s", err);
    return 2;
  }
  if (o->emulate) {
    memset(emu_store, 0, sizeof *emu_store);
    if (launch_emu_check(emu_store, err, sizeof err) < 0) {
      launch_err("%s", err);
      return 1;
    }
  }
  *mpirun = NULL;
  if (o->use_mpirun) {
#ifdef FABENCH_MPIRUN
    *mpirun = FABENCH_MPIRUN;
#endif
    if (!*mpirun || !**mpirun || access(*mpirun, X_OK) != 0) {
      launch_err("starting ranks through mpirun: no mpirun in this build (MPI not found)");
      return 1;
    }
  }
  return 0;
}

/* The emulated fabric of n namespaces (node k's link at slow[k] where set), after the stale sets
 * of runs that are gone, with host namespaces where hosts. 0; 128 + signal after an interrupt
 * during set-up; 1 after saying why (torn down by the caller). */
static int launch_emu_up(launch_emu *emu, int n, const char *rate, const char *const *slow, int hosts,
                         const char *cc) {
  char err[1024];
  int stale = launch_emu_cleanup_stale(emu, err, sizeof err);
  if (stale > 0) launch_err("removed %d stale emulated fabric set(s) of runs that are gone", stale);
  /* A set named after our pid can only be a dead process's whose pid we now have. */
  emu->id = (long)getpid();
  launch_emu_teardown(emu);
  if (launch_emu_setup(emu, (long)getpid(), n, rate, slow, 0, cc, err, sizeof err) < 0 ||
      (hosts && launch_emu_hosts_up(emu, err, sizeof err) < 0)) {
    launch_err("%s", err);
    return 1;
  }
  /* An interrupt during set-up: stop here. */
  struct timespec zero = {0, 0};
  sigset_t stopset;
  sigemptyset(&stopset);
  sigaddset(&stopset, SIGINT);
  sigaddset(&stopset, SIGTERM);
  sigaddset(&stopset, SIGHUP);
  int sig = sigtimedwait(&stopset, NULL, &zero);
  if (sig > 0) {
    launch_err("%s during set-up of the emulated fabric", launch_signame(sig));
    return 128 + sig;
  }
  return 0;
}

/* What the ranks of one launch share: the job's token, where rank 0 listens, and the emulated
 * fabric's description (emu NULL: none). */
typedef struct {
  const launch_opts *o;
  const char *prog;
  char *const *rank_argv;
  const launch_emu *emu;
  char token[40], root_addr[64], fabric[64], mtu[16], burst[24], queue[24], subnet[32];
  char layout[32], slow[512]; /* emulated hosts: "2x2", "1=100mbit,..." ("": none) */
  int per_node;     /* ranks per emulated host (0: no emulated hosts) */
  char nsenter[256]; /* its path, for mpirun's ranks on emulated hosts */
  int port, root_fd;
  const char *ucx_tls; /* UCX_TLS for the ranks (NULL: the user's) */
  const sigset_t *set, *old; /* the signals taken; the caller's mask, for the children */
} launch_job;

/* The emulated fabric's variables every rank gets, whichever way it starts. */
static void env_emu(launch_vec *e, const launch_job *j) {
  vec_pushf(e, "FABENCH_FABRIC=%s", j->fabric);
  vec_pushf(e, "FABENCH_EMU_RATE=%s", j->emu->rate);
  vec_pushf(e, "FABENCH_EMU_MTU=%s", j->mtu);
  vec_pushf(e, "FABENCH_EMU_BURST=%s", j->burst); /* run.json records it for the fit */
  vec_pushf(e, "FABENCH_EMU_QUEUE=%s", j->queue);
  if (j->emu->cc[0]) vec_pushf(e, "FABENCH_EMU_CC=%s", j->emu->cc);
  if (j->layout[0]) vec_pushf(e, "FABENCH_EMU_LAYOUT=%s", j->layout);
  if (j->slow[0]) vec_pushf(e, "FABENCH_EMU_SLOW=%s", j->slow);
  if (j->ucx_tls) vec_pushf(e, "UCX_TLS=%s", j->ucx_tls);
}

/* The ranks through mpirun: its exit status, or 1 after saying why. */
static int launch_mpirun(const launch_job *j, const char *mpirun) {
  const launch_opts *o = j->o;
  launch_vec env = {0}, argv = {0};
  launch_rank rk = {0};
  int rc = 1;
  env_base(&env, j->emu != NULL);
  vec_pushf(&env, "FABENCH_TOKEN=%s", j->token);
  vec_pushf(&env, "FABENCH_TIMEOUT_S=%d", o->timeout_s);
  vec_push(&env, "FABENCH_LAUNCHER=1");
  if (getuid() == 0 && !getenv("OMPI_ALLOW_RUN_AS_ROOT")) vec_push(&env, "OMPI_ALLOW_RUN_AS_ROOT=1");
  if (getuid() == 0 && !getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"))
    vec_push(&env, "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  if (j->emu) {
    env_emu(&env, j);
    /* PMIx listens on loopback only by default; ranks in their namespaces reach the root
     * namespace through the bridge's address. */
    vec_pushf(&env, "PMIX_MCA_ptl_tcp_if_include=%s", j->subnet);
  }
  build_mpirun(&argv, o, mpirun, j->prog, j->rank_argv, j->emu, j->per_node, j->nsenter);
  if (env.oom || argv.oom) {
    launch_err("out of memory");
  } else {
    /* Ranks mpirun leaves behind come to us, not to init, to be reaped (launch_reap_orphans). */
    int was_reaper = 0;
    prctl(PR_GET_CHILD_SUBREAPER, &was_reaper);
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    rk.pid = launch_spawn(argv.v[0], argv.v, env.v, j->old, NULL);
    if (rk.pid < 0) launch_err("cannot start mpirun: %s", strerror(errno));
    else rc = launch_wait(&rk, 1, 1, j->set, j->per_node);
    prctl(PR_SET_CHILD_SUBREAPER, was_reaper);
  }
  vec_free(&env);
  vec_free(&argv);
  return rc;
}

/* Starts rank r (fork + exec, through `ip netns exec` on an emulated fabric): its pid, or -1
 * after saying why. */
static pid_t launch_one(const launch_job *j, int r) {
  launch_vec e = {0}, a = {0};
  env_base(&e, j->emu != NULL);
  vec_pushf(&e, "FABENCH_RANK=%d", r);
  vec_pushf(&e, "FABENCH_WORLD_SIZE=%d", j->o->n);
  int node = j->per_node > 0 ? r / j->per_node : r; /* its namespace */
  vec_pushf(&e, "FABENCH_LOCAL_RANK=%d", j->per_node > 0 ? r % j->per_node : r);
  vec_pushf(&e, "FABENCH_ROOT=%s:%d", j->root_addr, j->port);
  vec_pushf(&e, "FABENCH_TOKEN=%s", j->token);
  vec_push(&e, "FABENCH_LAUNCHER=1");
  vec_pushf(&e, "FABENCH_TIMEOUT_S=%d", j->o->timeout_s);
  if (r == 0 && j->root_fd >= 0) vec_pushf(&e, "FABENCH_ROOT_FD=%d", j->root_fd);
  const char *path = j->prog;
  int hostns[2] = {-1, -1};
  if (j->emu) {
    char addr[64], dev[32], ns[32];
    launch_emu_addr(j->emu, node, addr, sizeof addr);
    launch_emu_dev(j->emu, node, dev, sizeof dev);
    launch_emu_ns(j->emu, node, ns, sizeof ns);
    if (launch_emu_host_fds(j->emu, node, hostns) < 0) {
      launch_err("rank %d: cannot open node %d's namespaces: %s", r, node, strerror(errno));
      vec_free(&e);
      vec_free(&a);
      return -1;
    }
    vec_pushf(&e, "FABENCH_BIND_ADDR=%s", addr);
    env_emu(&e, j);
    vec_pushf(&e, "UCX_NET_DEVICES=%s", dev);
    /* ip netns exec (not a bare setns): it also remounts /sys for the namespace, where UCX
     * looks for its network devices. */
    vec_push(&a, j->emu->ip);
    vec_push(&a, "netns");
    vec_push(&a, "exec");
    vec_push(&a, ns);
    path = j->emu->ip;
  }
  vec_push(&a, j->prog);
  for (int i = 0; j->rank_argv[i]; i++) vec_push(&a, j->rank_argv[i]);
  int oom = e.oom || a.oom;
  pid_t pid = oom ? -1 : launch_spawn(path, a.v, e.v, j->old, hostns);
  int saved = errno;
  for (int i = 0; i < 2; i++)
    if (hostns[i] >= 0) close(hostns[i]);
  vec_free(&e);
  vec_free(&a);
  if (pid < 0) launch_err("cannot start rank %d: %s", r, oom ? "out of memory" : strerror(saved));
  return pid;
}

/* The ranks started here, one by one: the first failed exit status, or 1 after saying why (the
 * ranks started then killed). Closes j->root_fd, which rank 0 holds once started. */
static int launch_local(launch_job *j) {
  int n = j->o->n, started = 0, rc = 1;
  launch_rank *rk = calloc((size_t)n, sizeof *rk);
  if (!rk) launch_err("out of memory");
  for (int r = 0; rk && r < n; r++) {
    if ((rk[r].pid = launch_one(j, r)) < 0) break;
    started++;
    if (r == 0 && j->root_fd >= 0) fcntl(j->root_fd, F_SETFD, FD_CLOEXEC); /* rank 0's alone */
  }
  if (j->root_fd >= 0) close(j->root_fd); /* rank 0 holds it now */
  j->root_fd = -1;
  if (rk && started < n) {
    launch_signal_all(rk, started, SIGKILL);
    launch_wait(rk, started, 0, j->set, j->per_node);
  } else if (rk) {
    rc = launch_wait(rk, n, 0, j->set, j->per_node);
  }
  free(rk);
  return rc;
}

void launch_sigs_take(launch_sigs *s) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGCHLD, &dfl, &s->chld_old);
  sigemptyset(&s->set);
  sigaddset(&s->set, SIGINT);
  sigaddset(&s->set, SIGTERM);
  sigaddset(&s->set, SIGHUP);
  sigaddset(&s->set, SIGCHLD);
  sigprocmask(SIG_BLOCK, &s->set, &s->old);
}

void launch_sigs_restore(launch_sigs *s) {
  struct timespec zero = {0, 0};
  while (sigtimedwait(&s->set, NULL, &zero) > 0) {
  }
  sigprocmask(SIG_SETMASK, &s->old, NULL);
  sigaction(SIGCHLD, &s->chld_old, NULL);
}

int launch_ranks_prog(const launch_opts *o, const char *prog, char *const rank_argv[]) {
  launch_emu emu_store;
  launch_emu_spec spec;
  const char *mpirun, *slow[LAUNCH_EMU_MAX_NODES] = {0};
  int rc = launch_check(o, &emu_store, &spec, slow, &mpirun);
  if (rc) return rc;

  launch_sigs sg; /* from here on, signals are taken synchronously and forwarded to the ranks */
  launch_sigs_take(&sg);
  launch_job j = {.o = o, .prog = prog, .rank_argv = rank_argv, .root_addr = "127.0.0.1",
                  .port = LAUNCH_EMU_ROOT_PORT, .root_fd = -1, .set = &sg.set, .old = &sg.old};
  if (o->emulate) {
    j.emu = &emu_store;
    int hosts = spec.nodes > 0;
    if ((rc = launch_emu_up(&emu_store, hosts ? spec.nodes : o->n, spec.rate, slow, hosts, o->tcp_cc)))
      goto out;
    if (hosts) {
      j.per_node = spec.per_node;
      snprintf(j.layout, sizeof j.layout, "%dx%d", spec.nodes, spec.per_node);
      size_t sl = 0;
      for (int k = 0; k < spec.nodes && sl + 40 < sizeof j.slow; k++)
        if (slow[k]) sl += (size_t)snprintf(j.slow + sl, sizeof j.slow - sl, "%s%d=%s", sl ? "," : "", k, slow[k]);
      if (mpirun && launch_emu_find_tool("nsenter", j.nsenter, sizeof j.nsenter) < 0) {
        launch_err("--emulate %s through mpirun needs nsenter (util-linux)", o->emulate);
        rc = 1;
        goto out;
      }
    }
    launch_emu_addr(j.emu, 0, j.root_addr, sizeof j.root_addr);
    snprintf(j.fabric, sizeof j.fabric, "emu-%s", j.emu->rate); /* the level between nodes */
    snprintf(j.mtu, sizeof j.mtu, "%d", j.emu->mtu);
    snprintf(j.burst, sizeof j.burst, "%llu", (unsigned long long)j.emu->burst);
    snprintf(j.queue, sizeof j.queue, "%llu", (unsigned long long)j.emu->limit);
    launch_emu_subnet(j.emu, j.subnet, sizeof j.subnet);
    /* Under emulation UCX must not use shared memory or cross-memory attach between nodes
     * (they bypass the links), unless the user chose: tcp alone where every rank is a node;
     * within an emulated host also System V and POSIX shared memory, which UCX offers only
     * within one IPC namespace, but not cross-memory attach, which it would offer across
     * nodes (they share a PID namespace). */
    const char *ucx_tls = getenv("UCX_TLS");
    if (!ucx_tls || !*ucx_tls) j.ucx_tls = hosts ? "self,sysv,posix,tcp" : "self,tcp";
  }
  rc = 1;
  if (launch_token(j.token, sizeof j.token) < 0) {
    launch_err("no random bytes for the job token: %s", strerror(errno));
  } else if (!j.emu && !mpirun && o->n > 1 && (j.root_fd = launch_root_socket(o->n + 64, &j.port)) < 0) {
    launch_err("cannot listen on 127.0.0.1 for the rendezvous: %s", strerror(errno));
  } else {
    rc = mpirun ? launch_mpirun(&j, mpirun) : launch_local(&j);
  }

out:
  if (j.root_fd >= 0) close(j.root_fd);
  if (j.emu) launch_emu_teardown(&emu_store);
  launch_sigs_restore(&sg);
  return rc;
}
