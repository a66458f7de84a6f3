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

enum { O_JSON = 256, O_XML, O_INPUT, O_SYNTH, O_SYSFS, O_NVML, O_NONVML, O_OUT };

static const bench_flag topo_flags[] = {
    {"json", NULL, NULL, "the topology as JSON (schema fabench-topo, versioned) on stdout (default: a readable "
                         "summary and the GPU/NIC path matrix)", O_JSON},
    {"xml", "FILE", NULL, "also write hwloc's XML of the topology to FILE", O_XML},
    {"input", "FILE", NULL, "read an hwloc XML instead of this machine", O_INPUT},
    {"synthetic", "DESC", NULL, "an hwloc synthetic topology, e.g. \"pack:2 core:4 pu:2\" (not with --input)", O_SYNTH},
    {"sysfs-root", "DIR", NULL, "read NIC, InfiniBand and PCIe link state under DIR instead of / (with --input, link "
                                "state is unknown unless this is given)", O_SYSFS},
    {"nvml", NULL, NULL, "ask this machine's NVML even with --input (the XML is from here)", O_NVML},
    {"no-nvml", NULL, NULL, "do not load NVML (NVLink then unknown unless the XML has it)", O_NONVML},
    {"out", "DIR", NULL, "also write DIR/topo.json and DIR/topo-<host>.xml", O_OUT},
};
static const bench_flags_cmd topo_cmd = {"usage: fabench topo [options]\n", topo_flags,
                                         sizeof topo_flags / sizeof *topo_flags, NULL, NULL, NULL};

typedef struct {
  int json;
  const char *xml_out, *out_dir;
  topo_opts o;
} topo_args;

/* Every value names a file, a directory or a description: an empty one is a slip. */
static int topo_set(void *ctx, int code, const char *val, int given) {
  topo_args *a = ctx;
  (void)given;
  if (val && !val[0])
    return bench_usage_error(bench_flags_help(&topo_cmd), "topo: --%s needs a value", bench_flags_name(&topo_cmd, code));
  switch (code) {
  case O_JSON: a->json = 1; break;
  case O_XML: a->xml_out = val; break;
  case O_INPUT: a->o.xml = val; break;
  case O_SYNTH: a->o.synthetic = val; break;
  case O_SYSFS: a->o.sysfs_root = val; break;
  case O_NVML: a->o.nvml = TOPO_NVML_ON; break;
  case O_NONVML: a->o.nvml = TOPO_NVML_OFF; break;
  case O_OUT: a->out_dir = val; break;
  }
  return 0;
}

int bench_cmd_topo(int argc, char **argv) {
  topo_args a;
  memset(&a, 0, sizeof a);
  int rc = bench_flags_parse(&topo_cmd, argc, argv, topo_set, &a, NULL);
  if (rc) return rc == 1 ? 0 : rc; /* 1: --help */
  if (a.o.xml && a.o.synthetic)
    return bench_usage_error(bench_flags_help(&topo_cmd), "topo: --input and --synthetic exclude each other");
  int json = a.json;
  const char *xml_out = a.xml_out, *out_dir = a.out_dir;
  topo_opts o = a.o;

  char err[512];
  topo_info *ti = NULL;
  if (topo_load(&ti, &o, err, sizeof err) != 0) return bench_error("topo: %s", err);
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
