/* sysfs readers on fake trees: random values read back exactly, and every "unknown" case
 * (-1, 0, unreadable, missing) is unknown, never 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "test_topo_common.h"
#include "topo_int.h"

typedef struct {
  char root[256];
} tree;

static int setup(void **state) {
  tree *t = calloc(1, sizeof *t);
  snprintf(t->root, sizeof t->root, "/tmp/topo-sysfs-XXXXXX");
  if (!mkdtemp(t->root)) return -1;
  *state = t;
  return 0;
}

static int teardown(void **state) {
  tree *t = *state;
  tt_rmtree(t->root);
  free(t);
  return 0;
}

static void test_net_random(void **state) {
  tree *t = *state;
  srand((unsigned)time(NULL));
  long speeds[40], mtus[40];
  for (int i = 0; i < 40; i++) {
    speeds[i] = 1 + rand() % 800000; /* 1 Mb/s .. 800 Gb/s */
    mtus[i] = 68 + rand() % 9000;
    char rel[128];
    snprintf(rel, sizeof rel, "sys/class/net/n%d/speed", i);
    tt_write(t->root, rel, "%ld\n", speeds[i]);
    snprintf(rel, sizeof rel, "sys/class/net/n%d/mtu", i);
    tt_write(t->root, rel, "%ld\n", mtus[i]);
    snprintf(rel, sizeof rel, "sys/class/net/n%d/operstate", i);
    tt_write(t->root, rel, i % 3 ? "up\n" : "down\n");
  }
  for (int i = 0; i < 40; i++) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    topo_net_state st;
    /* the root is given with a trailing slash on odd i: both forms must work */
    char root[300];
    snprintf(root, sizeof root, "%s%s", t->root, i % 2 ? "/" : "");
    assert_int_equal(topo_sysfs_net(root, name, &st), 0);
    assert_int_equal(st.speed_mbps, speeds[i]);
    assert_int_equal(st.mtu, mtus[i]);
    assert_string_equal(st.operstate, i % 3 ? "up" : "down");
  }
}

static void test_net_unknown(void **state) {
  tree *t = *state;
  tt_write(t->root, "sys/class/net/neg/speed", "-1\n");
  tt_write(t->root, "sys/class/net/zero/speed", "0\n");
  tt_write(t->root, "sys/class/net/zero/mtu", "0\n");
  tt_write(t->root, "sys/class/net/junk/speed", "fast\n");
  tt_write(t->root, "sys/class/net/empty/speed", "");
  /* a directory where the file should be: the read fails, as EINVAL does on a down link */
  tt_write(t->root, "sys/class/net/einval/speed/x", "1");
  tt_write(t->root, "sys/class/net/nospeed/operstate", "dormant\n");
  const char *names[] = {"neg", "zero", "junk", "empty", "einval", "nospeed"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    topo_net_state st;
    assert_int_equal(topo_sysfs_net(t->root, names[i], &st), 0);
    assert_int_equal(st.speed_mbps, -1);
    assert_int_equal(st.mtu, -1);
  }
  topo_net_state st;
  assert_int_equal(topo_sysfs_net(t->root, "nospeed", &st), 0);
  assert_string_equal(st.operstate, "dormant");
  assert_int_equal(topo_sysfs_net(t->root, "zero", &st), 0);
  assert_string_equal(st.operstate, "unknown");
  /* missing interface, missing root, path tricks */
  assert_int_equal(topo_sysfs_net(t->root, "absent", &st), -1);
  assert_int_equal(st.speed_mbps, -1);
  assert_int_equal(topo_sysfs_net("/nonexistent-root", "neg", &st), -1);
  assert_int_equal(topo_sysfs_net(t->root, "../net/neg", &st), -1);
  assert_int_equal(topo_sysfs_net(NULL, "neg", &st), -1);
}

static void test_ib_ports(void **state) {
  tree *t = *state;
  /* ports listed out of order and past 9 so that sorting is numeric, not textual */
  const int nums[] = {10, 2, 1};
  const char *rates[] = {"25 Gb/sec (1X EDR)", "400 Gb/sec (4X NDR)", "200 Gb/sec (4X HDR)"};
  const char *states[] = {"1: DOWN", "4: ACTIVE", "4: ACTIVE"};
  const char *phys[] = {"3: Disabled", "5: LinkUp", "5: LinkUp"};
  const char *ll[] = {"InfiniBand", "Ethernet", "InfiniBand"};
  for (int i = 0; i < 3; i++) {
    char rel[200];
    snprintf(rel, sizeof rel, "sys/class/infiniband/mlx5_9/ports/%d/rate", nums[i]);
    tt_write(t->root, rel, "%s\n", rates[i]);
    snprintf(rel, sizeof rel, "sys/class/infiniband/mlx5_9/ports/%d/state", nums[i]);
    tt_write(t->root, rel, "%s\n", states[i]);
    snprintf(rel, sizeof rel, "sys/class/infiniband/mlx5_9/ports/%d/phys_state", nums[i]);
    tt_write(t->root, rel, "%s\n", phys[i]);
    snprintf(rel, sizeof rel, "sys/class/infiniband/mlx5_9/ports/%d/link_layer", nums[i]);
    tt_write(t->root, rel, "%s\n", ll[i]);
  }
  tt_write(t->root, "sys/class/infiniband/mlx5_9/ports/notaport/rate", "1\n");
  tt_write(t->root, "sys/class/infiniband/mlx5_9/device/net/ib1/ifindex", "5\n");
  tt_write(t->root, "sys/class/infiniband/mlx5_9/device/net/ib0/ifindex", "4\n");
  topo_ib_port p[8];
  int n = topo_sysfs_ib_ports(t->root, "mlx5_9", p, 8);
  assert_int_equal(n, 3);
  assert_int_equal(p[0].port, 1);
  assert_int_equal(p[1].port, 2);
  assert_int_equal(p[2].port, 10);
  assert_true(p[0].rate_gbps == 200.0);
  assert_true(p[1].rate_gbps == 400.0);
  assert_true(p[2].rate_gbps == 25.0);
  assert_string_equal(p[0].state, "ACTIVE");
  assert_string_equal(p[2].state, "DOWN");
  assert_string_equal(p[2].phys_state, "Disabled");
  assert_string_equal(p[1].link_layer, "Ethernet");
  assert_string_equal(p[0].rate, "200 Gb/sec (4X HDR)");
  /* max caps the count */
  assert_int_equal(topo_sysfs_ib_ports(t->root, "mlx5_9", p, 2), 2);
  char nd[64];
  assert_int_equal(topo_sysfs_ib_netdevs(t->root, "mlx5_9", nd, sizeof nd), 2);
  assert_string_equal(nd, "ib0,ib1");

  /* a port with nothing readable is all unknown */
  tt_write(t->root, "sys/class/infiniband/hfi1_0/ports/1/.keep", "");
  n = topo_sysfs_ib_ports(t->root, "hfi1_0", p, 8);
  assert_int_equal(n, 1);
  assert_true(p[0].rate_gbps < 0);
  assert_string_equal(p[0].state, "unknown");
  assert_string_equal(p[0].link_layer, "unknown");
  assert_int_equal(topo_sysfs_ib_ports(t->root, "absent", p, 8), -1);
  assert_int_equal(topo_sysfs_ib_netdevs(t->root, "hfi1_0", nd, sizeof nd), -1);
}

static void test_pcie_random(void **state) {
  tree *t = *state;
  const double gts[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  const int widths[] = {1, 2, 4, 8, 16, 32};
  for (int i = 0; i < 50; i++) {
    int mg = rand() % 6, cg = rand() % (mg + 1);
    int mw = rand() % 6, cw = rand() % (mw + 1);
    char bdf[16], rel[128];
    snprintf(bdf, sizeof bdf, "0000:%02x:00.%d", i, i % 8);
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/max_link_speed", bdf);
    tt_write(t->root, rel, "%.1f GT/s PCIe\n", gts[mg]);
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/current_link_speed", bdf);
    /* older kernels print "2.5 GT/s" without "PCIe" */
    tt_write(t->root, rel, i % 2 ? "%.1f GT/s\n" : "%g GT/s PCIe\n", gts[cg]);
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/max_link_width", bdf);
    tt_write(t->root, rel, "%d\n", widths[mw]);
    snprintf(rel, sizeof rel, "sys/bus/pci/devices/%s/current_link_width", bdf);
    tt_write(t->root, rel, "%d\n", widths[cw]);
    topo_pcie_link l;
    assert_int_equal(topo_sysfs_pcie(t->root, bdf, &l), 0);
    assert_int_equal(l.max_gen, mg + 1);
    assert_int_equal(l.cur_gen, cg + 1);
    assert_int_equal(l.max_width, widths[mw]);
    assert_int_equal(l.cur_width, widths[cw]);
    assert_true(l.max_gts == gts[mg]);
    assert_int_equal(l.downtrained, (cg < mg || cw < mw) ? 1 : 0);
  }
}

static void test_pcie_unknown(void **state) {
  tree *t = *state;
  /* a VM: "Unknown" speeds and width 0 */
  tt_write(t->root, "sys/bus/pci/devices/0000:00:05.0/max_link_speed", "Unknown\n");
  tt_write(t->root, "sys/bus/pci/devices/0000:00:05.0/current_link_speed", "Unknown\n");
  tt_write(t->root, "sys/bus/pci/devices/0000:00:05.0/max_link_width", "0\n");
  tt_write(t->root, "sys/bus/pci/devices/0000:00:05.0/current_link_width", "0\n");
  topo_pcie_link l;
  assert_int_equal(topo_sysfs_pcie(t->root, "0000:00:05.0", &l), -1);
  assert_true(l.max_gts < 0 && l.cur_gts < 0);
  assert_int_equal(l.max_width, -1);
  assert_int_equal(l.cur_gen, -1);
  assert_int_equal(l.downtrained, -1);
  /* only the speeds known: width unknown cannot make it "not downtrained" */
  tt_write(t->root, "sys/bus/pci/devices/0000:00:06.0/max_link_speed", "16.0 GT/s PCIe\n");
  tt_write(t->root, "sys/bus/pci/devices/0000:00:06.0/current_link_speed", "16.0 GT/s PCIe\n");
  assert_int_equal(topo_sysfs_pcie(t->root, "0000:00:06.0", &l), 0);
  assert_int_equal(l.max_gen, 4);
  assert_int_equal(l.downtrained, -1);
  /* ... but a known shortfall is a shortfall */
  tt_write(t->root, "sys/bus/pci/devices/0000:00:07.0/max_link_width", "16\n");
  tt_write(t->root, "sys/bus/pci/devices/0000:00:07.0/current_link_width", "4\n");
  assert_int_equal(topo_sysfs_pcie(t->root, "0000:00:07.0", &l), 0);
  assert_int_equal(l.downtrained, 1);
  assert_int_equal(topo_sysfs_pcie(t->root, "0000:99:00.0", &l), -1);
  assert_int_equal(l.max_width, -1);
  assert_int_equal(topo_pcie_gen(8.0), 3);
  assert_int_equal(topo_pcie_gen(2.5), 1);
  assert_int_equal(topo_pcie_gen(7.0), -1);
}

/* The committed fake tree of the cpuonly fixture, read directly. */
static void test_fixture_tree(void **state) {
  (void)state;
  char root[1024];
  tt_fixture(root, sizeof root, "sysfs/cpuonly");
  topo_net_state st;
  assert_int_equal(topo_sysfs_net(root, "eth0", &st), 0);
  assert_int_equal(st.speed_mbps, 25000);
  assert_string_equal(st.mac, "00:25:90:00:00:01");
  assert_int_equal(topo_sysfs_net(root, "ib0", &st), 0);
  assert_int_equal(st.speed_mbps, -1); /* unreadable */
  assert_int_equal(st.mtu, 4092);
  assert_int_equal(topo_sysfs_net(root, "eth1", &st), 0);
  assert_int_equal(st.speed_mbps, -1); /* -1 */
  assert_string_equal(st.operstate, "down");
  topo_pcie_link l;
  assert_int_equal(topo_sysfs_pcie(root, "0000:02:00.0", &l), 0);
  assert_int_equal(l.downtrained, 1);
  assert_int_equal(topo_sysfs_pcie(root, "0000:01:00.0", &l), 0);
  assert_int_equal(l.downtrained, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_net_random, setup, teardown),
      cmocka_unit_test_setup_teardown(test_net_unknown, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ib_ports, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pcie_random, setup, teardown),
      cmocka_unit_test_setup_teardown(test_pcie_unknown, setup, teardown),
      cmocka_unit_test(test_fixture_tree),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
