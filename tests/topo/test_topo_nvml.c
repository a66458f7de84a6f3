/* NVLink through the dlopen'd NVML, against the test-only libnvidia-ml.so.1 (found through
 * LD_LIBRARY_PATH, set by ctest): links, NVSwitches, missing symbols, error codes, fallbacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_topo_common.h"
#include "topo_int.h"

static topo_info *load_nvml(const char *fixture, const char *scenario, const char *lib) {
  char x[1024];
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.xml = tt_fixture(x, sizeof x, fixture);
  o.nvml = TOPO_NVML_ON;
  o.nvml_lib = lib;
  setenv("FABENCH_NVML_SHIM", scenario, 1);
  topo_info *ti = NULL;
  char err[512];
  int rc = topo_load(&ti, &o, err, sizeof err);
  unsetenv("FABENCH_NVML_SHIM");
  if (rc != 0) fail_msg("%s: %s", fixture, err);
  return ti;
}

static void shim_path(char *buf, size_t cap, const char *variant) {
  snprintf(buf, cap, "%s/nvml-%s/libnvidia-ml.so.1", TOPO_SHIM_DIR, variant);
}

static void test_query_direct(void **state) {
  (void)state;
  topo_nvml_info *nv = calloc(1, sizeof *nv);
  char err[256];
  setenv("FABENCH_NVML_SHIM", "dgx8", 1);
  assert_int_equal(topo_nvml_query(nv, NULL, err, sizeof err), 0);
  assert_int_equal(nv->ngpus, 8);
  const unsigned bus[8] = {0x15, 0x19, 0x35, 0x39, 0x55, 0x59, 0x75, 0x79};
  for (int g = 0; g < 8; g++) {
    assert_int_equal(nv->gpu[g].bus, bus[g]);
    assert_int_equal(nv->gpu[g].nvlink_known, 1);
    assert_int_equal(nv->gpu[g].nlinks, 18);
    assert_true(nv->gpu[g].mem_bytes == (80LL << 30) + g);
    int per[4] = {0, 0, 0, 0};
    for (int l = 0; l < nv->gpu[g].nlinks; l++) {
      assert_true(nv->gpu[g].links[l].bus >= 0x92 && nv->gpu[g].links[l].bus <= 0x95);
      per[nv->gpu[g].links[l].bus - 0x92]++;
      assert_int_equal(nv->gpu[g].links[l].version, 6);
    }
    assert_int_equal(per[0], 5);
    assert_int_equal(per[1], 4);
    assert_int_equal(per[2], 4);
    assert_int_equal(per[3], 5);
  }
  setenv("FABENCH_NVML_SHIM", "initfail", 1);
  assert_int_equal(topo_nvml_query(nv, NULL, err, sizeof err), -1);
  assert_non_null(strstr(err, "nvmlInit_v2"));
  assert_non_null(strstr(err, "Driver Not Loaded"));
  assert_non_null(strstr(err, "(9)"));
  unsetenv("FABENCH_NVML_SHIM");
  char lib[1024];
  shim_path(lib, sizeof lib, "nopci");
  assert_int_equal(topo_nvml_query(nv, lib, err, sizeof err), -1);
  assert_non_null(strstr(err, "nvmlDeviceGetPciInfo_v3"));
  assert_int_equal(topo_nvml_query(nv, "/nonexistent/libnvidia-ml.so.1", err, sizeof err), -1);
  assert_non_null(strstr(err, "could not be loaded"));
  shim_path(lib, sizeof lib, "nolinks");
  assert_int_equal(topo_nvml_query(nv, lib, err, sizeof err), 0);
  assert_int_equal(nv->ngpus, 8);
  assert_int_equal(nv->gpu[0].nvlink_known, 0);
  assert_non_null(strstr(nv->note, "lacks"));
  free(nv);
}

/* MIG: GPU 0 split into three instances, GPU 1 in MIG mode without any, the rest not in MIG
 * mode; in the JSON and in the printed summary. */
static void test_mig(void **state) {
  (void)state;
  topo_info *ti = load_nvml("dgx8.xml", "mig", NULL);
  assert_int_equal(ti->gpu[0].mig.mode, 1);
  assert_int_equal(ti->gpu[0].mig.n, 3);
  const unsigned gi[3] = {1, 2, 5};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(ti->gpu[0].mig.inst[k].gi, gi[k]);
    assert_true(ti->gpu[0].mig.inst[k].mem_bytes == 20LL << 30);
    assert_non_null(strstr(ti->gpu[0].mig.inst[k].name, "MIG 2g.20gb"));
  }
  assert_string_equal(ti->gpu[0].mig.inst[2].uuid, "MIG-shim-3");
  assert_int_equal(ti->gpu[1].mig.mode, 1);
  assert_int_equal(ti->gpu[1].mig.n, 0);
  assert_int_equal(ti->gpu[2].mig.mode, 0);
  cJSON *j = topo_json(ti);
  cJSON *gpus = cJSON_GetObjectItem(j, "gpus");
  cJSON *m0 = cJSON_GetObjectItem(cJSON_GetArrayItem(gpus, 0), "mig");
  assert_true(cJSON_IsTrue(cJSON_GetObjectItem(m0, "enabled")));
  cJSON *ins = cJSON_GetObjectItem(m0, "instances");
  assert_int_equal(cJSON_GetArraySize(ins), 3);
  assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(ins, 2), "gpu_instance")->valueint, 5);
  cJSON *m2 = cJSON_GetObjectItem(cJSON_GetArrayItem(gpus, 2), "mig");
  assert_true(cJSON_IsFalse(cJSON_GetObjectItem(m2, "enabled")));
  cJSON_Delete(j);
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  topo_print(f, ti);
  fclose(f);
  assert_non_null(strstr(buf, "MIG enabled, 3 instance(s)"));
  assert_non_null(strstr(buf, "MIG gi 5 ci 0"));
  free(buf);
  topo_free(ti);
  /* without NVML's answer (an XML alone) MIG is unknown: null, not "disabled" */
  ti = load_nvml("dgx8.xml", "mig", "/nonexistent/libnvidia-ml.so.1");
  assert_int_equal(ti->gpu[0].mig.mode, -1);
  j = topo_json(ti);
  assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "gpus"), 0), "mig")));
  cJSON_Delete(j);
  topo_free(ti);
}

static void check_all_pairs(const topo_info *ti, int links, int via) {
  for (int a = 0; a < ti->ngpus; a++)
    for (int b = 0; b < ti->ngpus; b++)
      if (a != b) {
        assert_int_equal(ti->nvlinks[a * ti->ngpus + b], links);
        assert_int_equal(ti->nvvia[a * ti->ngpus + b], via);
      }
}

static void test_switches(void **state) {
  (void)state;
  topo_info *ti = load_nvml("dgx8.xml", "dgx8", NULL);
  assert_string_equal(ti->nvlink_source, "nvml");
  for (int g = 0; g < 8; g++) {
    assert_int_equal(ti->gpu[g].switch_links, 18);
    assert_string_equal(ti->gpu[g].model, "NVIDIA H100 80GB HBM3 (shim)");
    assert_true(ti->gpu[g].mem_bytes == (80LL << 30) + g);
  }
  check_all_pairs(ti, 18, 1);
  /* an XML has no sysfs: the PCIe links come from NVML (Gen5 x16: 32 GT/s x 128/130 x 16 / 8) */
  int gen = 0, width = 0;
  assert_float_equal(topo_gpu_pcie_gbs(ti, "0000:15:00.0", &gen, &width), 63.015, 1e-3);
  assert_int_equal(gen, 5);
  assert_int_equal(width, 16);
  assert_true(topo_gpu_pcie_gbs(ti, "0000:79:00.0", &gen, &width) < 0); /* NVML did not say */
  assert_int_equal(gen, -1);
  assert_true(topo_gpu_pcie_gbs(ti, "0000:99:00.0", &gen, &width) < 0); /* no such GPU */
  cJSON *j = topo_json(ti);
  cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "nvlink"), "pairs"), 0);
  assert_string_equal(cJSON_GetObjectItem(p0, "version")->valuestring, "4.0");
  cJSON_Delete(j);
  topo_free(ti);
  /* switches hidden from the PCI tree still count as switches */
  ti = load_nvml("dgx8.xml", "hidden", NULL);
  assert_string_equal(ti->nvlink_source, "nvml");
  check_all_pairs(ti, 18, 1);
  topo_free(ti);
}

static void test_pairs(void **state) {
  (void)state;
  topo_info *ti = load_nvml("dgx8.xml", "pairs", NULL);
  assert_string_equal(ti->nvlink_source, "nvml"); /* NVML wins over the XML's distances */
  for (int a = 0; a < 8; a++) {
    assert_int_equal(ti->gpu[a].switch_links, 0);
    for (int b = 0; b < 8; b++) {
      if (a == b) continue;
      int want = (b == (a ^ 1)) ? 4 : 0;
      assert_int_equal(ti->nvlinks[a * 8 + b], want);
      assert_int_equal(ti->nvvia[a * 8 + b], 0);
    }
  }
  cJSON *j = topo_json(ti);
  cJSON *nv = cJSON_GetObjectItem(j, "nvlink");
  cJSON *pairs = cJSON_GetObjectItem(nv, "pairs");
  assert_int_equal(cJSON_GetArraySize(pairs), 4);
  assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(pairs, 0), "version")->valuestring,
                      "3.0");
  cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "paths"), "matrix");
  assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(m, 0), 1)->valuestring, "NV4");
  /* without NVLink the PCI class shows: GPU0-GPU2 sit on two host bridges of package 0 */
  assert_string_equal(cJSON_GetArrayItem(cJSON_GetArrayItem(m, 0), 2)->valuestring, "NODE");
  cJSON_Delete(j);
  topo_free(ti);
}

static void test_failures_fall_back(void **state) {
  (void)state;
  /* NVML refuses to start: GPUs still listed, NVLink from the XML's distances ... */
  topo_info *ti = load_nvml("dgx8.xml", "initfail", NULL);
  assert_int_equal(ti->ngpus, 8);
  assert_string_equal(ti->nvlink_source, "hwloc");
  assert_non_null(strstr(ti->nvml_note, "Driver Not Loaded"));
  topo_free(ti);
  /* ... or unknown when there are none */
  ti = load_nvml("pcie4.xml", "initfail", NULL);
  assert_int_equal(ti->ngpus, 4);
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_null(ti->nvlinks);
  topo_free(ti);
  /* an error code in the middle of the link walk: NVLink unknown from NVML */
  ti = load_nvml("pcie4.xml", "linkerr", NULL);
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_non_null(strstr(ti->nvml_note, "nvmlDeviceGetNvLinkState"));
  for (int g = 0; g < ti->ngpus; g++) assert_int_equal(ti->gpu[g].switch_links, -1);
  topo_free(ti);
  /* missing NVLink symbols */
  char lib[1024];
  shim_path(lib, sizeof lib, "nolinks");
  ti = load_nvml("pcie4.xml", "dgx8", lib);
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_non_null(strstr(ti->nvml_note, "lacks"));
  topo_free(ti);
  /* missing required symbol, missing library */
  shim_path(lib, sizeof lib, "nopci");
  ti = load_nvml("dgx8.xml", "dgx8", lib);
  assert_string_equal(ti->nvlink_source, "hwloc");
  assert_non_null(strstr(ti->nvml_note, "nvmlDeviceGetPciInfo_v3"));
  topo_free(ti);
  ti = load_nvml("pcie4.xml", "dgx8", "/nonexistent/libnvidia-ml.so.1");
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_non_null(strstr(ti->nvml_note, "could not be loaded"));
  topo_free(ti);
}

/* AUTO never asks this machine's NVML about another machine's XML. */
static void test_auto_skips_xml(void **state) {
  (void)state;
  char x[1024];
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.xml = tt_fixture(x, sizeof x, "pcie4.xml");
  setenv("FABENCH_NVML_SHIM", "pairs", 1);
  topo_info *ti = NULL;
  char err[256];
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), 0);
  unsetenv("FABENCH_NVML_SHIM");
  assert_string_equal(ti->nvlink_source, "unknown");
  assert_non_null(strstr(ti->nvml_note, "not queried"));
  topo_free(ti);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_query_direct),       cmocka_unit_test(test_switches),
      cmocka_unit_test(test_pairs),              cmocka_unit_test(test_failures_fall_back),
      cmocka_unit_test(test_auto_skips_xml),     cmocka_unit_test(test_mig),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
