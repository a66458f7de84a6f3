/* `fabench topo --input FILE`: an hwloc XML topology, loaded by hwloc and then walked by our
 * analysis (packages, caches, NICs, GPUs, PCI paths, NVLink), printed and turned into JSON. The
 * input is given to topo_load as a file, the way the command gives it (a memfd, nothing on
 * disk), so it takes the command's path: hwloc loads it in a child (topo_xml.c), where an
 * abort or crash of hwloc's becomes an error, and the analysis runs here on hwloc's export. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <hwloc.h>

#include "fuzz.h"
#include "topo.h"

/* On some malformed files (a bad encoding declaration) libxml2 keeps error state in its globals;
 * once hwloc unloads its libxml2 plugin (with the last topology) LeakSanitizer sees that memory
 * as leaked (found by this target; kept as regress-libxml-bad-encoding.xml). A topology kept for
 * the whole run keeps the plugin loaded, as it stays in fabench while its topology lives. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  static hwloc_topology_t keep; /* lives until exit, on purpose */
  hwloc_topology_init(&keep);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[64];
  int fd = fuzz_file("fuzz-topo.xml", data, size, path, sizeof path);
  if (fd < 0) return 0;
  topo_opts o;
  memset(&o, 0, sizeof o);
  o.xml = path;
  o.nvml = TOPO_NVML_OFF;
  topo_info *ti = NULL;
  char err[512];
  err[0] = '\0';
  int rc = topo_load(&ti, &o, err, sizeof err);
  FUZZ_SAY(rc, err);
  if (rc == 0) {
    topo_stamp st;
    topo_get_stamp(ti, &st);
    FUZZ_CHECK(strnlen(st.hash, sizeof st.hash) < sizeof st.hash);
    cJSON *j = topo_json(ti);
    if (j) {
      char *txt = cJSON_PrintUnformatted(j);
      FUZZ_CHECK(txt != NULL);
      cJSON *back = cJSON_Parse(txt); /* what we write, we can read */
      FUZZ_CHECK(back != NULL);
      cJSON_Delete(back);
      free(txt);
      cJSON_Delete(j);
    }
    FILE *f = fopen("/dev/null", "w");
    if (f) {
      topo_print(f, ti);
      fclose(f);
    }
    topo_free(ti);
  } else {
    FUZZ_CHECK(err[0] != '\0');
  }
  close(fd);
  return 0;
}
