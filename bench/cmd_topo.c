/* fabench topo: what this machine (or an hwloc XML) has, and how its GPUs and NICs sit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench.h"
#include "res.h"
#include "topo.h"
#include "util.h"

static const char topo_usage[] =
    "usage: fabench topo [--json] [--xml FILE] [--input FILE | --synthetic DESC]\n"
    "                    [--sysfs-root DIR] [--nvml | --no-nvml] [--out DIR]\n"
    "  (default)         readable summary and the GPU/NIC path matrix\n"
    "  --json            the topology as JSON (schema fabench-topo, versioned) on stdout\n"
    "  --xml FILE        also write hwloc's XML of the topology to FILE\n"
    "  --input FILE      read an hwloc XML instead of this machine\n"
    "  --synthetic DESC  an hwloc synthetic topology, e.g. \"pack:2 core:4 pu:2\"\n"
    "  --sysfs-root DIR  read NIC, InfiniBand and PCIe link state under DIR instead of /\n"
    "                    (with --input, link state is unknown unless this is given)\n"
    "  --nvml            ask this machine's NVML even with --input (the XML is from here)\n"
    "  --no-nvml         do not load NVML (NVLink then unknown unless the XML has it)\n"
    "  --out DIR         also write DIR/topo.json and DIR/topo-<host>.xml\n";

int bench_cmd_topo(int argc, char **argv) {
  int json = 0;
  const char *xml_out = NULL, *out_dir = NULL;
  topo_opts o;
  memset(&o, 0, sizeof o);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **val = NULL;
    if (!strcmp(a, "--json")) json = 1;
    else if (!strcmp(a, "--no-nvml")) o.nvml = TOPO_NVML_OFF;
    else if (!strcmp(a, "--nvml")) o.nvml = TOPO_NVML_ON;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(topo_usage, stdout);
      return 0;
    } else if (!strcmp(a, "--xml")) val = &xml_out;
    else if (!strcmp(a, "--input")) val = &o.xml;
    else if (!strcmp(a, "--synthetic")) val = &o.synthetic;
    else if (!strcmp(a, "--sysfs-root")) val = &o.sysfs_root;
    else if (!strcmp(a, "--out")) val = &out_dir;
    else return bench_usage_error(topo_usage, "topo: unknown option '%s'", a);
    if (val) {
      if (i + 1 >= argc || !argv[i + 1][0])
        return bench_usage_error(topo_usage, "topo: %s needs a value", a);
      *val = argv[++i];
    }
  }
  if (o.xml && o.synthetic)
    return bench_usage_error(topo_usage, "topo: --input and --synthetic exclude each other");

  char err[512];
  topo_info *ti = NULL;
  if (topo_load(&ti, &o, err, sizeof err) != 0) return bench_error("topo: %s", err);
  int rc = 0;
  cJSON *j = topo_json(ti);
  if (xml_out && topo_write_xml(ti, xml_out, err, sizeof err) != 0) {
    rc = bench_error("topo: %s", err);
    goto done;
  }
  if (out_dir) {
    topo_stamp st;
    topo_get_stamp(ti, &st);
    char path[4400];
    if (mkdir(out_dir, 0777) != 0 && errno != EEXIST) {
      rc = bench_error("topo: cannot create %s: %s", out_dir, strerror(errno));
      goto done;
    }
    for (char *c = st.host; *c; c++)
      if (*c == '/') *c = '_';
    snprintf(path, sizeof path, "%s/topo-%s.xml", out_dir, st.host);
    if (topo_write_xml(ti, path, err, sizeof err) != 0) {
      rc = bench_error("topo: %s", err);
      goto done;
    }
    snprintf(path, sizeof path, "%s/topo.json", out_dir);
    if (util_json_write_file(path, j, err, sizeof err) != 0) {
      rc = bench_error("topo: %s", err);
      goto done;
    }
  }
  if (json) {
    char *s = cJSON_Print(j);
    if (!s) {
      rc = bench_error("topo: out of memory");
      goto done;
    }
    puts(s);
    free(s);
  } else {
    topo_print(stdout, ti);
  }
  rc = bench_stdout_check("topo");
done:
  cJSON_Delete(j);
  topo_free(ti);
  return rc;
}
