/* topo_record, as bench_run_begin calls it for every run: the XML beside the results, the
 * stamp, and the JSON summary; the same hash as a fresh detection. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_topo_common.h"
#include "topo_int.h"

static void test_record(void **state) {
  (void)state;
  char dir[] = "/tmp/topo-rec-XXXXXX";
  assert_non_null(mkdtemp(dir));
  topo_stamp st;
  cJSON *sum = NULL;
  char err[256];
  assert_int_equal(topo_record(dir, &st, &sum, err, sizeof err), 0);
  assert_non_null(sum);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  assert_string_equal(st.host, host);
  assert_string_equal(st.backend, "Linux");
  assert_int_equal(strlen(st.hash), 16);
  assert_string_equal(cJSON_GetObjectItem(sum, "topo_hash")->valuestring, st.hash);
  assert_string_equal(cJSON_GetObjectItem(sum, "schema")->valuestring, "fabench-topo");
  /* the XML written is this machine's: loading it gives the same hash */
  char path[512];
  snprintf(path, sizeof path, "%s/topo-%s.xml", dir, host);
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.xml = path;
  topo_info *ti = NULL;
  assert_int_equal(topo_load(&ti, &o, err, sizeof err), 0);
  assert_string_equal(ti->hash, st.hash);
  topo_free(ti);
  /* a second record: the same stamp */
  topo_stamp st2;
  cJSON *sum2 = NULL;
  assert_int_equal(topo_record(dir, &st2, &sum2, err, sizeof err), 0);
  assert_string_equal(st.hash, st2.hash);
  cJSON_Delete(sum);
  cJSON_Delete(sum2);
  /* an unwritable directory is an error with a message, not a crash */
  assert_int_equal(topo_record("/nonexistent/run", &st, &sum, err, sizeof err), -1);
  assert_null(sum);
  assert_non_null(strstr(err, "/nonexistent/run"));
  tt_rmtree(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_record)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
