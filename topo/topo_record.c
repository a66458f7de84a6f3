/* Placeholder recorder: hwloc XML and a hash of it. Replaced by the topo module proper. */
#include "topo.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int topo_record(const char *dir, topo_stamp *stamp, cJSON **summary, char *err, size_t errcap) {
  memset(stamp, 0, sizeof *stamp);
  *summary = NULL;
  gethostname(stamp->host, sizeof stamp->host - 1);
  hwloc_topology_t t;
  if (hwloc_topology_init(&t) != 0) {
    snprintf(err, errcap, "hwloc init failed");
    return -1;
  }
  hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(t) != 0) {
    snprintf(err, errcap, "hwloc load failed");
    hwloc_topology_destroy(t);
    return -1;
  }
  char path[4400];
  snprintf(path, sizeof path, "%s/topo-%s.xml", dir, stamp->host);
  hwloc_topology_export_xml(t, path, 0);
  const char *be = hwloc_obj_get_info_by_name(hwloc_get_root_obj(t), "Backend");
  snprintf(stamp->backend, sizeof stamp->backend, "%s", be ? be : "unknown");
  unsigned long h = 5381;
  int ncores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  h = h * 33 + (unsigned long)ncores;
  snprintf(stamp->hash, sizeof stamp->hash, "%016lx", h);
  cJSON *s = cJSON_CreateObject();
  cJSON_AddNumberToObject(s, "cores", ncores);
  *summary = s;
  hwloc_topology_destroy(t);
  return 0;
}
