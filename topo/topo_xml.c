/* An hwloc XML file given to us (`fabench topo --input`, HWLOC_XMLFILE) is outside input, and
 * hwloc 2.9's XML import is not safe on bad input: built with assert() on, a malformed file can
 * abort the process, crash it, or keep it busy for minutes. Two defences, in this order:
 * - topo_xml_sane: cheap textual checks for what fuzzing found, each with a precise message;
 * - topo_xml_isolated: the load itself in a forked child, since no precise check covers every
 *   assert reachable from an attribute; a child that dies becomes one line of error. The child
 *   hands back hwloc's own XML export, which it has loaded once more itself, so the parent's load
 *   takes a path that already succeeded. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "topo_int.h"

/* A real machine's XML loads in well under a second; hwloc kept busy for 5 s is stuck. The limit
 * stays under the fuzzer's 10 s per input, so a hung child is reported as this clear error, not
 * as the fuzzer's timeout. */
#define TOPO_XML_TIMEOUT_MS 5000
#define TOPO_XML_MAX_BYTES (256u << 20)

void topo_hwloc_prepare(hwloc_topology_t t) {
  /* before load, also for XML: otherwise PCI/OS devices and NVLink distances vanish */
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  /* the whole machine, not only what a cgroup allows: identical nodes must hash alike */
  hwloc_topology_set_flags(t, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  /* Linux's own sysfs PCI discovery gives the same tree; the libpciaccess plugin leaks on every
   * load (LeakSanitizer) and adds only device names. */
  hwloc_topology_set_components(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "pci");
}

/* ---- textual checks, before hwloc sees the file ----
 * - a PU or NUMA node without os_index: taken as index 2^32-1, with a bitmap sized to hold it
 *   (half a GiB, a minute of work); an index past any machine's is the same;
 * - a cpuset without its complete_cpuset, a nodeset without its complete_nodeset: a NULL
 *   bitmap written to (SIGSEGV in hwloc_insert_object_by_parent). */
#define TOPO_XML_MAX_INDEX (1u << 20)
/* The value of attribute `name` in one tag's text (after any white space), or NULL. */
static const char *topo_xml_attr(const char *tag, const char *name) {
  size_t l = strlen(name);
  for (const char *a = strstr(tag, name); a; a = strstr(a + 1, name))
    if (a > tag && strchr(" \t\r\n", a[-1]) && a[l] == '=' && a[l + 1] == '"') return a + l + 2;
  return NULL;
}

int topo_xml_sane(const char *path, char *err, size_t errcap) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    snprintf(err, errcap, "cannot read %s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap + 1);
  for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *nb = cap < TOPO_XML_MAX_BYTES ? realloc(buf, 2 * cap + 1) : NULL;
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
  }
  fclose(f);
  if (!buf) {
    snprintf(err, errcap, "%s: out of memory", path);
    return -1;
  }
  buf[n] = '\0';
  int rc = 0;
  for (char *t = strstr(buf, "<object"); t && !rc; t = strstr(t + 1, "<object")) {
    char *end = strchr(t, '>');
    if (!end) break;
    *end = '\0'; /* the tag alone */
    const char *type = topo_xml_attr(t, "type");
    int needs = type && (!strncmp(type, "PU\"", 3) || !strncmp(type, "NUMANode\"", 9));
    const char *idx = topo_xml_attr(t, "os_index");
    if (needs && !idx) {
      snprintf(err, errcap, "%s: a PU or NUMA node without os_index", path);
      rc = -1;
    } else if (idx && strtoul(idx, NULL, 10) >= TOPO_XML_MAX_INDEX) {
      snprintf(err, errcap, "%s: os_index %.20s is out of range (at most %u)", path, idx,
               TOPO_XML_MAX_INDEX - 1);
      rc = -1;
    } else if ((topo_xml_attr(t, "cpuset") && !topo_xml_attr(t, "complete_cpuset")) ||
               (topo_xml_attr(t, "nodeset") && !topo_xml_attr(t, "complete_nodeset"))) {
      snprintf(err, errcap, "%s: an object with a cpuset or nodeset but not its complete_ set", path);
      rc = -1;
    }
    *end = '>';
    t = end;
  }
  free(buf);
  return rc;
}

/* ---- the load in a child ---- */
enum { TX_OK = 0, TX_INIT = 10, TX_SET, TX_LOAD, TX_EXPORT, TX_RELOAD, TX_WRITE };

/* In the child: load path, export, check that the export loads, write it to fd. The exit code
 * says which step failed. */
static int topo_xml_child(const char *path, int fd) {
  hwloc_topology_t t, back;
  if (hwloc_topology_init(&t) != 0) return TX_INIT;
  topo_hwloc_prepare(t);
  if (hwloc_topology_set_xml(t, path) != 0) return TX_SET;
  if (hwloc_topology_load(t) != 0) return TX_LOAD;
  char *xml = NULL;
  int len = 0;
  if (hwloc_topology_export_xmlbuffer(t, &xml, &len, 0) != 0 || len <= 0) return TX_EXPORT;
  if (hwloc_topology_init(&back) != 0) return TX_INIT;
  topo_hwloc_prepare(back);
  if (hwloc_topology_set_xmlbuffer(back, xml, len) != 0 || hwloc_topology_load(back) != 0)
    return TX_RELOAD;
  for (size_t off = 0; off < (size_t)len;) {
    ssize_t w = write(fd, xml + off, (size_t)len - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return TX_WRITE;
    off += (size_t)w;
  }
  /* the process ends here: nothing is freed (the parent's copy of memory is its own) */
  return TX_OK;
}

static long topo_ms_since(const struct timespec *t0) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* The last non-empty line the child wrote to stderr (hwloc's or assert's), without our
 * program's "name: " prefix; "" when none. */
static void topo_xml_last_line(int efd, char *out, size_t cap) {
  out[0] = '\0';
  char buf[4096];
  off_t end = lseek(efd, 0, SEEK_END);
  if (end <= 0) return;
  off_t start = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
  ssize_t n = pread(efd, buf, (size_t)(end - start), start);
  if (n <= 0) return;
  buf[n] = '\0';
  while (n > 0 && strchr("\r\n \t", buf[n - 1])) buf[--n] = '\0';
  char *line = strrchr(buf, '\n');
  line = line ? line + 1 : buf;
  size_t pl = strlen(program_invocation_short_name);
  if (!strncmp(line, program_invocation_short_name, pl) && !strncmp(line + pl, ": ", 2))
    line += pl + 2;
  topo_copy(out, cap, line);
}

/* Copies what the child wrote to stderr to ours: hwloc's warnings on an XML it could load. */
static void topo_xml_pass_stderr(int efd) {
  char buf[4096];
  off_t off = 0;
  for (ssize_t n; (n = pread(efd, buf, sizeof buf, off)) > 0; off += n)
    if (write(STDERR_FILENO, buf, (size_t)n) < 0) break;
}

int topo_xml_isolated(hwloc_topology_t t, const char *path, char *err, size_t errcap) {
  int efd = memfd_create("fabench-hwloc-stderr", MFD_CLOEXEC);
  int p[2] = {-1, -1};
  if (efd < 0 || pipe2(p, O_CLOEXEC) != 0) {
    snprintf(err, errcap, "%s: cannot load it apart: %s", path, strerror(errno));
    if (efd >= 0) close(efd);
    return -1;
  }
  fflush(NULL); /* nothing buffered is written twice */
  pid_t pid = fork();
  if (pid < 0) {
    snprintf(err, errcap, "%s: cannot load it apart: fork: %s", path, strerror(errno));
    close(efd);
    close(p[0]);
    close(p[1]);
    return -1;
  }
  if (pid == 0) {
    /* the kernel's default on a crash: no handler of ours or a fuzzer's runs in the child */
    int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGPIPE};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) signal(sigs[i], SIG_DFL);
    close(p[0]);
    dup2(efd, STDERR_FILENO);
    _exit(topo_xml_child(path, p[1]));
  }
  close(p[1]);
  char *xml = NULL;
  size_t n = 0, cap = 0;
  int timed_out = 0, too_big = 0, rerr = 0;
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    long left = TOPO_XML_TIMEOUT_MS - topo_ms_since(&t0);
    if (left <= 0) {
      timed_out = 1;
      break;
    }
    struct pollfd pf = {.fd = p[0], .events = POLLIN};
    int pr = poll(&pf, 1, (int)left);
    if (pr < 0 && errno == EINTR) continue;
    if (pr < 0) {
      rerr = errno;
      break;
    }
    if (pr == 0) continue; /* the deadline is checked above */
    if (n + 1 >= cap) {
      size_t nc = cap ? 2 * cap : 1 << 16;
      char *nx = nc <= TOPO_XML_MAX_BYTES ? realloc(xml, nc) : NULL;
      if (!nx) {
        too_big = 1;
        break;
      }
      xml = nx;
      cap = nc;
    }
    ssize_t r = read(p[0], xml + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      rerr = errno;
      break;
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(p[0]);
  if (timed_out || too_big || rerr) kill(pid, SIGKILL);
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  char why[256];
  topo_xml_last_line(efd, why, sizeof why);
  int rc = -1;
  if (timed_out)
    snprintf(err, errcap, "%s: hwloc did not load it within %d s (malformed XML?)", path,
             TOPO_XML_TIMEOUT_MS / 1000);
  else if (too_big)
    snprintf(err, errcap, "%s: hwloc's export of it exceeds %u MiB", path,
             TOPO_XML_MAX_BYTES >> 20);
  else if (rerr)
    snprintf(err, errcap, "%s: reading hwloc's export: %s", path, strerror(rerr));
  else if (WIFSIGNALED(st))
    snprintf(err, errcap, "%s: malformed XML: hwloc %s loading it%s%s", path,
             WTERMSIG(st) == SIGABRT ? "aborted" : "crashed", why[0] ? ": " : "", why);
  else if (!WIFEXITED(st) || WEXITSTATUS(st) == TX_LOAD)
    snprintf(err, errcap, "%s: hwloc could not load it (malformed or not an hwloc topology)", path);
  else if (WEXITSTATUS(st) == TX_SET)
    snprintf(err, errcap, "%s: not an hwloc XML topology", path);
  else if (WEXITSTATUS(st) != TX_OK || n == 0)
    snprintf(err, errcap, "%s: hwloc loaded it but could not hand it over (step %d)%s%s", path,
             WEXITSTATUS(st), why[0] ? ": " : "", why);
  else if (hwloc_topology_set_xmlbuffer(t, xml, (int)n) != 0) /* copies the buffer */
    snprintf(err, errcap, "%s: hwloc refused its own export of it", path);
  else {
    topo_xml_pass_stderr(efd);
    rc = 0;
  }
  close(efd);
  free(xml);
  return rc;
}
