/* The topology recorded with every run: topo-<host>.xml beside the results, and the stamp and
 * JSON that go into run.json and topo.json. */
#include <stdio.h>
#include <string.h>

#include "topo_int.h"

int topo_record(const char *dir, topo_stamp *stamp, cJSON **summary, char *err, size_t errcap) {
  memset(stamp, 0, sizeof *stamp);
  *summary = NULL;
  topo_info *ti = NULL;
  if (topo_load(&ti, NULL, err, errcap) != 0) return -1;
  topo_get_stamp(ti, stamp);
  /* a host name is a file name here: keep it from escaping the run directory */
  char host[256];
  topo_copy(host, sizeof host, ti->host);
  for (char *c = host; *c; c++)
    if (*c == '/' || *c == '\\') *c = '_';
  char path[4400];
  snprintf(path, sizeof path, "%s/topo-%s.xml", dir, host);
  if (topo_write_xml(ti, path, err, errcap) != 0) {
    topo_free(ti);
    return -1;
  }
  *summary = topo_json(ti);
  topo_free(ti);
  if (!*summary) {
    snprintf(err, errcap, "out of memory");
    return -1;
  }
  return 0;
}
