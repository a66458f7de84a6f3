/* Binding on this machine, checked with sched_getaffinity (not hwloc), and its errors. Each
 * case restores the test's own affinity. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <sched.h>

#include "test_topo_common.h"
#include "topo_int.h"

static cpu_set_t saved;

static int save(void **state) {
  (void)state;
  return sched_getaffinity(0, sizeof saved, &saved);
}

static int restore(void **state) {
  (void)state;
  return sched_setaffinity(0, sizeof saved, &saved);
}

static int allowed_cpus(int *cpus, int max) {
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < max; c++)
    if (CPU_ISSET(c, &saved)) cpus[n++] = c;
  return n;
}

static void test_parse(void **state) {
  (void)state;
  const char *ok[] = {"none", "core", "numa", "nic", "gpu", "auto"};
  for (int i = 0; i < 6; i++) {
    topo_bind_kind k;
    char err[128];
    assert_int_equal(topo_bind_parse(ok[i], &k, err, sizeof err), 0);
    assert_int_equal((int)k, i);
  }
  const char *bad[] = {"", "Core", "cores", "Auto", "socket", "core,numa", "gpu0", " core"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char err[128] = "";
    assert_int_equal(topo_bind_parse(bad[i], NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "--bind"));
  }
  char err[128];
  assert_int_equal(topo_bind_parse(NULL, NULL, err, sizeof err), -1);
}

/* One core per rank while ranks fit: every rank gets a single allowed cpu (one PU per core on
 * this box) and distinct ranks get distinct cores. */
static void test_core(void **state) {
  (void)state;
  int cpus[CPU_SETSIZE];
  int n = allowed_cpus(cpus, CPU_SETSIZE);
  assert_true(n >= 1);
  int size = n < 4 ? n : 4;
  cpu_set_t seen;
  CPU_ZERO(&seen);
  for (int r = 0; r < size; r++) {
    char desc[256], err[256];
    assert_int_equal(topo_bind("core", r, size, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
    cpu_set_t got;
    assert_int_equal(sched_getaffinity(0, sizeof got, &got), 0);
    assert_true(CPU_COUNT(&got) >= 1);
    cpu_set_t both;
    CPU_AND(&both, &got, &saved);
    assert_true(CPU_EQUAL(&both, &got)); /* only allowed cpus */
    CPU_AND(&both, &got, &seen);
    assert_int_equal(CPU_COUNT(&both), 0); /* not shared with an earlier rank */
    CPU_OR(&seen, &seen, &got);
    assert_non_null(strstr(desc, "core:"));
    /* the description names exactly the cpus the kernel reports */
    char want[64];
    int first = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &got)) {
        first = c;
        break;
      }
    snprintf(want, sizeof want, "cpus=%d", first);
    assert_non_null(strstr(desc, want));
    restore(NULL);
  }
  /* more ranks than cores: round robin, still one core each */
  char desc[256], err[256];
  assert_int_equal(topo_bind("core", n, 2 * n, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
  cpu_set_t got;
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_ISSET(cpus[0], &got));
}

static void test_numa_and_none(void **state) {
  (void)state;
  char desc[256], err[256];
  assert_int_equal(topo_bind("numa", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
  assert_non_null(strstr(desc, "numa:"));
  cpu_set_t got;
  sched_getaffinity(0, sizeof got, &got);
  /* one NUMA node here: all allowed cpus of it */
  topo_info *ti = NULL;
  assert_int_equal(topo_load(&ti, NULL, err, sizeof err), 0);
  if (ti->nnuma == 1) assert_true(CPU_EQUAL(&got, &saved));
  topo_free(ti);
  restore(NULL);
  assert_int_equal(topo_bind("none", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
  assert_int_equal(strncmp(desc, "none cpuset=", 12), 0);
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved)); /* untouched */
}

static void test_nic_gpu(void **state) {
  (void)state;
  topo_info *ti = NULL;
  char err[256], desc[256];
  assert_int_equal(topo_load(&ti, NULL, err, sizeof err), 0);
  if (ti->nnics > 0) {
    assert_int_equal(topo_bind("nic", 0, 1, 1, ti->nic[0].name, desc, sizeof desc, err, sizeof err), 0);
    assert_non_null(strstr(desc, ti->nic[0].name));
    cpu_set_t got;
    sched_getaffinity(0, sizeof got, &got);
    assert_true(CPU_COUNT(&got) >= 1);
    restore(NULL);
    assert_int_equal(topo_bind("nic", 0, 1, 1, "no-such-nic0", desc, sizeof desc, err, sizeof err), -1);
    assert_non_null(strstr(err, "no-such-nic0"));
  } else {
    assert_int_equal(topo_bind("nic", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
    assert_non_null(strstr(err, "no NIC"));
  }
  if (ti->ngpus == 0) {
    assert_int_equal(topo_bind("gpu", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
    assert_non_null(strstr(err, "no GPU"));
  } else {
    assert_int_equal(topo_bind("gpu", 0, 1, 1, "0", desc, sizeof desc, err, sizeof err), 0);
    restore(NULL);
    assert_int_equal(topo_bind("gpu", 0, 1, 1, "999", desc, sizeof desc, err, sizeof err), -1);
  }
  topo_free(ti);
}

static void test_errors(void **state) {
  (void)state;
  char desc[256], err[256];
  assert_int_equal(topo_bind("socket", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
  assert_int_equal(topo_bind("core", 2, 2, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
  assert_non_null(strstr(err, "rank"));
  assert_int_equal(topo_bind("core", -1, 2, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
  assert_int_equal(topo_bind("core", 0, 0, 1, NULL, desc, sizeof desc, err, sizeof err), -1);
  /* an XML in HWLOC_XMLFILE would make binding a silent no-op: refused */
  char fx[1024];
  setenv("HWLOC_XMLFILE", tt_fixture(fx, sizeof fx, "cpuonly.xml"), 1);
  int rc = topo_bind("core", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err);
  unsetenv("HWLOC_XMLFILE");
  assert_int_equal(rc, -1);
  assert_non_null(strstr(err, "not this machine"));
  cpu_set_t got;
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved));
}

/* auto: a core of its own for each rank while they fit; else nothing, and a binding the
 * process already has (its launcher's) is kept */
static void test_auto(void **state) {
  (void)state;
  char desc[256], err[256];
  topo_info *ti = NULL;
  assert_int_equal(topo_load(&ti, NULL, err, sizeof err), 0);
  int cores = ti->ncores > 0 ? ti->ncores : ti->npus, pus = ti->npus;
  topo_free(ti);
  int cpus[CPU_SETSIZE], n = allowed_cpus(cpus, CPU_SETSIZE);
  if (n < pus) { /* bound by whoever ran the test: auto must keep that */
    assert_int_equal(topo_bind("auto", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
    assert_non_null(strstr(desc, "launcher's"));
    cpu_set_t got;
    sched_getaffinity(0, sizeof got, &got);
    assert_true(CPU_EQUAL(&got, &saved));
    skip(); /* the rest needs an unbound process */
  }
  cpu_set_t seen, got;
  CPU_ZERO(&seen);
  for (int r = 0; r < cores; r++) { /* as many ranks as cores: one each, none shared */
    assert_int_equal(topo_bind("auto", r, cores, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
    assert_int_equal(strncmp(desc, "auto: core:", 11), 0);
    sched_getaffinity(0, sizeof got, &got);
    assert_true(CPU_COUNT(&got) >= 1 && CPU_COUNT(&got) <= pus / cores);
    cpu_set_t both;
    CPU_AND(&both, &got, &seen);
    assert_int_equal(CPU_COUNT(&both), 0);
    CPU_OR(&seen, &seen, &got);
    restore(NULL);
  }
  /* one rank of `cores` threads: all of them */
  assert_int_equal(topo_bind("auto", 0, 1, cores, NULL, desc, sizeof desc, err, sizeof err), 0);
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved));
  assert_non_null(strstr(desc, cores > 1 ? "auto: cores:" : "auto: core:"));
  restore(NULL);
  /* more ranks x threads than cores: nothing bound, and why */
  assert_int_equal(topo_bind("auto", 0, cores, 2, NULL, desc, sizeof desc, err, sizeof err), 0);
  assert_non_null(strstr(desc, "auto: none ("));
  assert_non_null(strstr(desc, "thread(s) on"));
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved));
  assert_int_equal(topo_bind("auto", cores, cores + 1, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
  assert_non_null(strstr(desc, "auto: none ("));
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved));
  /* bound already, as mpirun or srun leave a rank: kept */
  if (n > 1) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[n - 1], &one);
    assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
    assert_int_equal(topo_bind("auto", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err), 0);
    assert_non_null(strstr(desc, "auto: the launcher's"));
    sched_getaffinity(0, sizeof got, &got);
    assert_true(CPU_EQUAL(&got, &one));
    restore(NULL);
  }
  /* not this machine's topology: nothing bound, not an error */
  char fx[1024];
  setenv("HWLOC_XMLFILE", tt_fixture(fx, sizeof fx, "cpuonly.xml"), 1);
  int rc = topo_bind("auto", 0, 1, 1, NULL, desc, sizeof desc, err, sizeof err);
  unsetenv("HWLOC_XMLFILE");
  assert_int_equal(rc, 0);
  assert_non_null(strstr(desc, "not this machine's"));
  sched_getaffinity(0, sizeof got, &got);
  assert_true(CPU_EQUAL(&got, &saved));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_parse),
      cmocka_unit_test_setup_teardown(test_core, save, restore),
      cmocka_unit_test_setup_teardown(test_numa_and_none, save, restore),
      cmocka_unit_test_setup_teardown(test_nic_gpu, save, restore),
      cmocka_unit_test_setup_teardown(test_errors, save, restore),
      cmocka_unit_test_setup_teardown(test_auto, save, restore),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
