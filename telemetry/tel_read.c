/* telemetry: the kernel's counters, read from a root (the machine's "/", or a test's fake tree):
 * /proc/stat, /proc/net/dev, /proc/net/snmp, /proc/net/netstat, the interfaces' speeds and the
 * InfiniBand ports' counters. A file that is missing is left out; one that does not parse is
 * said once (the first) and left out, never trusted in part. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tel_int.h"

#define TEL_FILE_MAX (1u << 20) /* /proc/stat of a few thousand cores fits */

static void tel_path(char *out, size_t cap, const tel_src *s, const char *rel) {
  snprintf(out, cap, "%s%s", strcmp(s->root, "/") ? s->root : "", rel);
}

/* The file root/rel into buf (NUL-terminated). 0; 1 when it is missing or unreadable (left out);
 * -1 when it is larger than the buffer. */
static int tel_slurp(const tel_src *s, const char *rel, char *buf, size_t cap) {
  char path[2048];
  tel_path(path, sizeof path, s, rel);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf + n, cap - 1 - n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      close(fd);
      return 1;
    }
    if (r == 0) break;
    n += (size_t)r;
    if (n == cap - 1) {
      close(fd);
      return -1;
    }
  }
  close(fd);
  buf[n] = '\0';
  return 0;
}

/* The first error wins: later ones add nothing the user needs first. */
static void tel_err_once(char *err, size_t cap, int *had, const tel_src *s, const char *rel,
                         const char *why) {
  if (*had) return;
  *had = 1;
  char path[2048];
  tel_path(path, sizeof path, s, rel);
  snprintf(err, cap, "telemetry: %s: %s", path, why);
}

/* An unsigned decimal at *p (after blanks): 0 and *p moved past it, or -1 (no digits, or more
 * than 64 bits hold). */
static int tel_num(const char **p, uint64_t *v) {
  const char *q = *p;
  while (*q == ' ' || *q == '\t') q++;
  if (*q < '0' || *q > '9') return -1;
  uint64_t x = 0;
  for (; *q >= '0' && *q <= '9'; q++) {
    uint64_t d = (uint64_t)(*q - '0');
    if (x > (UINT64_MAX - d) / 10) return -1;
    x = x * 10 + d;
  }
  *p = q;
  *v = x;
  return 0;
}

/* Whether only blanks are left of the line at p. */
static int tel_line_end(const char *p) {
  while (*p == ' ' || *p == '\t' || *p == '\r') p++;
  return *p == '\n' || *p == '\0';
}

static const char *tel_next_line(const char *p) {
  const char *nl = strchr(p, '\n');
  return nl ? nl + 1 : NULL;
}

/* /proc/stat: "cpu" and "cpuN" lines of at least 4 tick counts (user nice system idle [iowait irq
 * softirq steal ...]). */
static int tel_parse_stat(const tel_src *s, const char *txt, tel_snap *snap) {
  long hz = s->user_hz > 0 ? s->user_hz : 100;
  for (const char *p = txt; p && *p; p = tel_next_line(p)) {
    if (strncmp(p, "cpu", 3)) continue;
    const char *q = p + 3;
    int num = -1;
    if (*q >= '0' && *q <= '9') {
      uint64_t n;
      if (tel_num(&q, &n) || n > 1u << 20) return -1;
      num = (int)n;
    } else if (*q != ' ') {
      continue; /* some other "cpu..." key */
    }
    uint64_t f[10] = {0};
    int nf = 0;
    while (nf < 10 && !tel_line_end(q)) {
      if (tel_num(&q, &f[nf])) return -1;
      nf++;
    }
    if (nf < 4 || !tel_line_end(q)) return -1;
    tel_cpu *c;
    if (num < 0) {
      c = &snap->cpu[0];
      snap->have_cpu = 1;
    } else if (snap->ncpu < TEL_MAX_CPUS) {
      c = &snap->cpu[1 + snap->ncpu++];
    } else {
      continue;
    }
    c->num = num;
    uint64_t t[TEL_CPU_N] = {f[0] + f[1], f[2], f[5] + f[6], f[3] + f[4], f[7]};
    for (int k = 0; k < TEL_CPU_N; k++) c->ms[k] = t[k] * 1000 / (uint64_t)hz;
  }
  return snap->have_cpu ? 0 : -1;
}

/* An interface's speed from sysfs, looked up once (bits/s; 0: unknown, as for virtual ones). */
static double tel_if_rate(tel_src *s, const char *ifname) {
  for (int i = 0; i < s->nrate; i++)
    if (!strcmp(s->rate_name[i], ifname)) return s->rate[i];
  char rel[256], b[64];
  double bps = 0;
  snprintf(rel, sizeof rel, "/sys/class/net/%s/speed", ifname);
  if (!strchr(ifname, '/') && tel_slurp(s, rel, b, sizeof b) == 0) {
    long v = strtol(b, NULL, 10);
    bps = v > 0 ? (double)v * 1e6 : 0;
  }
  if (s->nrate < TEL_MAX_LINKS) {
    snprintf(s->rate_name[s->nrate], sizeof s->rate_name[0], "%s", ifname);
    s->rate[s->nrate++] = bps;
  }
  return bps;
}

/* /proc/net/dev: two header lines, then "IF: 16 counts" (8 receive, 8 transmit). */
static int tel_parse_dev(tel_src *s, const char *txt, tel_snap *snap) {
  for (const char *p = txt; p && *p; p = tel_next_line(p)) {
    if (strchr(p, '|') && (!strchr(p, '\n') || strchr(p, '|') < strchr(p, '\n'))) continue; /* a header */
    if (tel_line_end(p)) continue;
    const char *colon = strchr(p, ':'), *nl = strchr(p, '\n');
    if (!colon || (nl && colon > nl)) return -1;
    const char *a = p;
    while (*a == ' ') a++;
    size_t len = (size_t)(colon - a);
    if (len == 0 || len > 31) return -1;
    char ifname[32];
    memcpy(ifname, a, len);
    ifname[len] = '\0';
    uint64_t f[16];
    const char *q = colon + 1;
    for (int k = 0; k < 16; k++)
      if (tel_num(&q, &f[k])) return -1;
    if (!tel_line_end(q)) return -1;
    if (snap->nlink == TEL_MAX_LINKS) continue;
    tel_link *l = &snap->link[snap->nlink++];
    snprintf(l->name, sizeof l->name, "net:%s", ifname);
    l->loopback = !strcmp(ifname, "lo");
    l->rate_bps = l->loopback ? 0 : tel_if_rate(s, ifname);
    uint64_t v[TEL_LINK_N] = {f[0], f[8], f[1], f[9], f[3], f[11]};
    memcpy(l->v, v, sizeof v);
  }
  return 0;
}

/* /proc/net/snmp and /proc/net/netstat: "Key: name name ..." then "Key: value value ...". The
 * names asked (n of them) into out where found (have[i] set). */
static int tel_parse_pairs(const char *txt, const char *key, const char *const *names, int n,
                           uint64_t *out, int *have) {
  size_t kl = strlen(key);
  const char *head = NULL;
  for (const char *p = txt; p && *p; p = tel_next_line(p)) {
    if (strncmp(p, key, kl) || p[kl] != ' ') continue;
    if (!head) {
      head = p;
      continue;
    }
    /* p: the values under head's names, token by token */
    const char *h = head + kl, *v = p + kl;
    for (;;) {
      while (*h == ' ') h++;
      int hend = *h == '\n' || *h == '\0' || *h == '\r';
      if (hend) return tel_line_end(v) ? 0 : -1;
      size_t tl = strcspn(h, " \r\n");
      uint64_t x;
      if (tel_num(&v, &x)) {
        /* a negative counter (RtoMax -1, MaxConn -1) is no count we ask for */
        while (*v == ' ') v++;
        if (*v != '-') return -1;
        v++;
        if (tel_num(&v, &x)) return -1;
        x = 0;
      }
      for (int i = 0; i < n; i++)
        if (strlen(names[i]) == tl && !strncmp(h, names[i], tl)) out[i] = x, have[i] = 1;
      h += tl;
    }
  }
  return head ? -1 : 0; /* names without their values */
}

static int tel_parse_snmp(const char *txt, tel_snap *snap) {
  static const char *const names[] = {"RetransSegs", "OutSegs"};
  return tel_parse_pairs(txt, "Tcp:", names, 2, &snap->tcp[TEL_TCP_RETRANS], &snap->have_tcp[TEL_TCP_RETRANS]);
}

static int tel_parse_netstat(const char *txt, tel_snap *snap) {
  static const char *const names[] = {"TCPTimeouts", "TCPLostRetransmit"};
  return tel_parse_pairs(txt, "TcpExt:", names, 2, &snap->tcp[TEL_TCP_TIMEOUTS],
                         &snap->have_tcp[TEL_TCP_TIMEOUTS]);
}

/* One InfiniBand counter file: 0 with *v; 1 missing; -1 malformed. */
static int tel_ib_counter(const tel_src *s, const char *port, const char *name, uint64_t *v, char *rel,
                          size_t relcap) {
  char b[64];
  snprintf(rel, relcap, "/sys/class/infiniband/%.*s/ports/%s/counters/%s", (int)strcspn(port, "/"), port,
           strchr(port, '/') + 1, name);
  int rc = tel_slurp(s, rel, b, sizeof b);
  if (rc) return rc > 0 ? 1 : -1;
  const char *q = b;
  return tel_num(&q, v) || !tel_line_end(q) ? -1 : 0;
}

/* The ports' counters: data in 4-byte words (port_xmit_data, port_rcv_data), packets, and what
 * stands for drops (port_xmit_discards, port_rcv_errors). A port without its data counters is
 * left out. */
static int tel_read_ib(const tel_src *s, tel_snap *snap, char *err, size_t errcap, int *had) {
  static const char *const files[TEL_LINK_N] = {"port_rcv_data",      "port_xmit_data",    "port_rcv_packets",
                                                "port_xmit_packets", "port_rcv_errors", "port_xmit_discards"};
  int bad = 0;
  for (int i = 0; i < s->nib && snap->nlink < TEL_MAX_LINKS; i++) {
    tel_link *l = &snap->link[snap->nlink];
    memset(l, 0, sizeof *l);
    int ok = 1;
    for (int k = 0; k < TEL_LINK_N && ok; k++) {
      char rel[512];
      int rc = tel_ib_counter(s, s->ib[i], files[k], &l->v[k], rel, sizeof rel);
      if (rc < 0) {
        tel_err_once(err, errcap, had, s, rel, "not a counter");
        bad = 1;
        ok = 0;
      } else if (rc > 0 && k < 2) {
        ok = 0;
      }
    }
    if (!ok) continue;
    l->v[TEL_RX_BYTES] *= 4;
    l->v[TEL_TX_BYTES] *= 4;
    snprintf(l->name, sizeof l->name, "ib:%.60s", s->ib[i]);
    l->rate_bps = s->ib_rate[i];
    snap->nlink++;
  }
  return bad ? -1 : 0;
}

void tel_src_init(tel_src *s, const char *root) {
  memset(s, 0, sizeof *s);
  snprintf(s->root, sizeof s->root, "%s", root && *root ? root : "/");
  s->user_hz = sysconf(_SC_CLK_TCK);
  s->buf = malloc(TEL_FILE_MAX);
  char path[2048];
  tel_path(path, sizeof path, s, "/sys/class/infiniband");
  DIR *d = opendir(path);
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    char ports[2200];
    if (e->d_name[0] == '.' || strlen(e->d_name) > 40 ||
        (size_t)snprintf(ports, sizeof ports, "%s/%.40s/ports", path, e->d_name) >= sizeof ports)
      continue;
    DIR *pd = opendir(ports);
    struct dirent *pe;
    while (pd && (pe = readdir(pd)) != NULL && s->nib < TEL_MAX_LINKS) {
      char *end;
      long pn = strtol(pe->d_name, &end, 10);
      if (end == pe->d_name || *end || pn < 0 || pn > 1000) continue;
      snprintf(s->ib[s->nib], sizeof s->ib[0], "%.40s/%ld", e->d_name, pn);
      char rel[256], b[128];
      snprintf(rel, sizeof rel, "/sys/class/infiniband/%.40s/ports/%ld/rate", e->d_name, pn);
      double gbs = tel_slurp(s, rel, b, sizeof b) == 0 ? strtod(b, NULL) : 0; /* "100 Gb/sec (4X EDR)" */
      s->ib_rate[s->nib++] = gbs > 0 ? gbs * 1e9 : 0;
    }
    if (pd) closedir(pd);
  }
  if (d) closedir(d);
}

void tel_src_free(tel_src *s) {
  free(s->buf);
  s->buf = NULL;
}

int tel_read_kernel(tel_src *s, tel_snap *snap, char *err, size_t errcap) {
  memset(snap, 0, sizeof *snap);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  snap->mono = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  clock_gettime(CLOCK_REALTIME, &ts);
  snap->wall = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  char *buf = s->buf;
  if (!buf) {
    snprintf(err, errcap, "telemetry: out of memory");
    return -1;
  }
  int had = 0, rc;
  static const char *const rels[] = {"/proc/stat", "/proc/net/dev", "/proc/net/snmp", "/proc/net/netstat"};
  for (int f = 0; f < 4; f++) {
    rc = tel_slurp(s, rels[f], buf, TEL_FILE_MAX);
    if (rc > 0) continue; /* missing: left out */
    if (rc < 0) {
      tel_err_once(err, errcap, &had, s, rels[f], "larger than 1 MiB");
      continue;
    }
    int nlink = snap->nlink, prc;
    switch (f) {
    case 0: prc = tel_parse_stat(s, buf, snap); break;
    case 1: prc = tel_parse_dev(s, buf, snap); break;
    case 2: prc = tel_parse_snmp(buf, snap); break;
    default: prc = tel_parse_netstat(buf, snap); break;
    }
    if (prc) {
      tel_err_once(err, errcap, &had, s, rels[f], "malformed");
      if (f == 0) snap->have_cpu = 0, snap->ncpu = 0;
      if (f == 1) snap->nlink = nlink;
      if (f == 2) snap->have_tcp[TEL_TCP_RETRANS] = snap->have_tcp[TEL_TCP_OUTSEGS] = 0;
      if (f == 3) snap->have_tcp[TEL_TCP_TIMEOUTS] = snap->have_tcp[TEL_TCP_LOST_RETRANS] = 0;
    }
  }
  tel_read_ib(s, snap, err, errcap, &had);
  return had ? -1 : 0;
}
