/* Our own sysfs readers (hwloc carries no NIC speed, IB rate or max PCIe link). Every reader
 * takes a root prefix so tests feed fake trees; unreadable, 0 or -1 values are "unknown". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "topo_int.h"

/* root "" or "/" is the real root; a trailing slash is dropped so paths never read "//sys". */
static void topo_path_join(char *out, size_t cap, const char *root, const char *rel) {
  size_t n = strlen(root);
  while (n > 0 && root[n - 1] == '/') n--;
  snprintf(out, cap, "%.*s%s", (int)n, root, rel);
}

/* Reads a small sysfs file, first line only, trailing whitespace dropped. -1 if unreadable. */
static int topo_read_line(const char *root, const char *rel, char *buf, size_t cap) {
  char path[4096];
  topo_path_join(path, sizeof path, root, rel);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  /* a read error (EINVAL on a down link's speed) is unreadable, not empty */
  char *r = fgets(buf, (int)cap, f);
  int bad = ferror(f);
  fclose(f);
  if (!r || bad) return -1;
  topo_rtrim(buf);
  return 0;
}

static long topo_read_long(const char *root, const char *rel) {
  char b[64];
  if (topo_read_line(root, rel, b, sizeof b) != 0) return -1;
  char *end;
  long v = strtol(b, &end, 10);
  if (end == b || *end) return -1;
  return v;
}

int topo_sysfs_net(const char *root, const char *ifname, topo_net_state *out) {
  out->speed_mbps = -1;
  out->mtu = -1;
  snprintf(out->operstate, sizeof out->operstate, "unknown");
  out->mac[0] = 0;
  if (!root || !ifname || strchr(ifname, '/')) return -1;
  char rel[512], path[4096];
  snprintf(rel, sizeof rel, "/sys/class/net/%s", ifname);
  topo_path_join(path, sizeof path, root, rel);
  struct stat sb;
  if (stat(path, &sb) != 0) return -1;
  char f[600];
  snprintf(f, sizeof f, "%s/speed", rel);
  long v = topo_read_long(root, f);
  out->speed_mbps = v > 0 ? v : -1; /* -1 (down/virtual) and 0 are unknown, never 0 Mb/s */
  snprintf(f, sizeof f, "%s/mtu", rel);
  v = topo_read_long(root, f);
  out->mtu = v > 0 ? v : -1;
  snprintf(f, sizeof f, "%s/operstate", rel);
  char b[64];
  if (topo_read_line(root, f, b, sizeof b) == 0 && b[0])
    topo_copy(out->operstate, sizeof out->operstate, b);
  snprintf(f, sizeof f, "%s/address", rel);
  if (topo_read_line(root, f, b, sizeof b) == 0) topo_copy(out->mac, sizeof out->mac, b);
  return 0;
}

/* "4: ACTIVE" -> "ACTIVE"; text without a number is kept as is. */
static void topo_after_colon(const char *in, char *out, size_t cap) {
  const char *c = strchr(in, ':');
  if (c) {
    c++;
    while (*c == ' ') c++;
  } else {
    c = in;
  }
  snprintf(out, cap, "%s", *c ? c : "unknown");
}

static int topo_cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

int topo_sysfs_ib_ports(const char *root, const char *hca, topo_ib_port *ports, int max) {
  if (!root || !hca || strchr(hca, '/')) return -1;
  char rel[512], path[4096];
  snprintf(rel, sizeof rel, "/sys/class/infiniband/%s/ports", hca);
  topo_path_join(path, sizeof path, root, rel);
  DIR *d = opendir(path);
  if (!d) return -1;
  int nums[64], n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 64) {
    char *end;
    long v = strtol(e->d_name, &end, 10);
    if (end != e->d_name && !*end && v >= 0 && v < 1000000) nums[n++] = (int)v;
  }
  closedir(d);
  qsort(nums, (size_t)n, sizeof nums[0], topo_cmp_int);
  if (n > max) n = max;
  for (int i = 0; i < n; i++) {
    topo_ib_port *p = &ports[i];
    memset(p, 0, sizeof *p);
    p->port = nums[i];
    p->rate_gbps = -1;
    char f[700], b[128];
    snprintf(f, sizeof f, "%s/%d/rate", rel, nums[i]);
    if (topo_read_line(root, f, b, sizeof b) == 0) {
      topo_copy(p->rate, sizeof p->rate, b);
      char *end;
      double r = strtod(b, &end);
      if (end != b && r > 0) p->rate_gbps = r;
    }
    snprintf(f, sizeof f, "%s/%d/state", rel, nums[i]);
    if (topo_read_line(root, f, b, sizeof b) == 0) topo_after_colon(b, p->state, sizeof p->state);
    else snprintf(p->state, sizeof p->state, "unknown");
    snprintf(f, sizeof f, "%s/%d/phys_state", rel, nums[i]);
    if (topo_read_line(root, f, b, sizeof b) == 0)
      topo_after_colon(b, p->phys_state, sizeof p->phys_state);
    else snprintf(p->phys_state, sizeof p->phys_state, "unknown");
    snprintf(f, sizeof f, "%s/%d/link_layer", rel, nums[i]);
    if (topo_read_line(root, f, b, sizeof b) == 0 && b[0])
      topo_copy(p->link_layer, sizeof p->link_layer, b);
    else snprintf(p->link_layer, sizeof p->link_layer, "unknown");
  }
  return n;
}

static int topo_cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int topo_sysfs_ib_netdevs(const char *root, const char *hca, char *buf, size_t cap) {
  if (cap) buf[0] = 0;
  if (!root || !hca || strchr(hca, '/')) return -1;
  char rel[512], path[4096];
  snprintf(rel, sizeof rel, "/sys/class/infiniband/%s/device/net", hca);
  topo_path_join(path, sizeof path, root, rel);
  DIR *d = opendir(path);
  if (!d) return -1;
  char names[32][32];
  char *ptrs[32];
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < 32) {
    if (e->d_name[0] == '.') continue;
    topo_copy(names[n], sizeof names[n], e->d_name);
    ptrs[n] = names[n];
    n++;
  }
  closedir(d);
  qsort(ptrs, (size_t)n, sizeof ptrs[0], topo_cmp_str);
  size_t off = 0;
  for (int i = 0; i < n && off < cap; i++)
    off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? "," : "", ptrs[i]);
  return n;
}

double topo_pcie_gts(int gen) {
  static const double g[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  return gen >= 1 && gen <= 6 ? g[gen - 1] : -1;
}

int topo_pcie_gen(double gts) {
  static const double g[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  for (int i = 0; i < 6; i++)
    if (gts > g[i] * 0.9 && gts < g[i] * 1.1) return i + 1;
  return -1;
}

/* "8.0 GT/s PCIe", "2.5 GT/s", "Unknown" -> GT/s or -1. */
static double topo_read_gts(const char *root, const char *rel) {
  char b[64];
  if (topo_read_line(root, rel, b, sizeof b) != 0) return -1;
  char *end;
  double v = strtod(b, &end);
  if (end == b || v <= 0) return -1;
  return v;
}

int topo_sysfs_pcie(const char *root, const char *bdf, topo_pcie_link *out) {
  out->max_gts = out->cur_gts = -1;
  out->max_width = out->cur_width = -1;
  out->max_gen = out->cur_gen = -1;
  out->downtrained = -1;
  if (!root || !bdf || strchr(bdf, '/')) return -1;
  char rel[600];
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/max_link_speed", bdf);
  out->max_gts = topo_read_gts(root, rel);
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/current_link_speed", bdf);
  out->cur_gts = topo_read_gts(root, rel);
  long w;
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/max_link_width", bdf);
  w = topo_read_long(root, rel);
  out->max_width = w > 0 ? (int)w : -1;
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/current_link_width", bdf);
  w = topo_read_long(root, rel);
  out->cur_width = w > 0 ? (int)w : -1;
  out->max_gen = out->max_gts > 0 ? topo_pcie_gen(out->max_gts) : -1;
  out->cur_gen = out->cur_gts > 0 ? topo_pcie_gen(out->cur_gts) : -1;
  int speed_known = out->max_gts > 0 && out->cur_gts > 0;
  int width_known = out->max_width > 0 && out->cur_width > 0;
  if (speed_known || width_known) {
    int below = (speed_known && out->cur_gts < out->max_gts * 0.99) ||
                (width_known && out->cur_width < out->max_width);
    /* one side unknown and the other at max: we cannot say it is not downtrained */
    out->downtrained = below ? 1 : (speed_known && width_known ? 0 : -1);
  }
  return (out->max_gts > 0 || out->cur_gts > 0 || out->max_width > 0 || out->cur_width > 0) ? 0
                                                                                           : -1;
}
