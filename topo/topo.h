/* topo: what a node has (hwloc, sysfs, NVML) and how its devices sit. */
#ifndef FABENCH_TOPO_H
#define FABENCH_TOPO_H

#include <stddef.h>
#include <cjson/cJSON.h>

/* The identity of one host's topology, stamped on every result row. */
typedef struct {
  char host[256];
  char hash[32];    /* hash of the topology without volatile fields; identical nodes share it */
  char backend[32]; /* hwloc's Backend info: "Linux", "XML", "Synthetic" */
} topo_stamp;

/* Detects this host, writes <dir>/topo-<host>.xml, and returns the stamp and a JSON summary
 * (caller frees) for topo.json / run.json. */
int topo_record(const char *dir, topo_stamp *stamp, cJSON **summary, char *err, size_t errcap);

#endif
