/* fabench fit: the cost model from run directories' allreduce and p2p rows, as model.json. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "res.h"

static const char fit_usage[] =
    "usage: fabench fit [options] DIR...\n"
    "  Fits alpha (start-up), beta (s/byte) and gamma (reduction s/byte) per fabric and host\n"
    "  count from the run directories' allreduce.csv (and p2p.csv), and writes model.json.\n"
    "  --out FILE        where to write the model (default: DIR/model.json of the first DIR)\n"
    "  --gamma-kernel    measure the reduction kernel here, for fabrics whose rows cannot tell\n"
    "                    gamma from beta (default: on)\n"
    "  --no-gamma-kernel use the transport's default gamma instead (fits on another machine)\n";

static void fit_print(const res_model *m) {
  printf("# %-22s %-5s %5s %-9s %9s %9s %10s %10s %7s %7s %7s\n", "fabric", "trans", "hosts", "source",
         "alpha(us)", "delta(us)", "link(GB/s)", "red.(GB/s)", "R^2", "rms_rel", "used");
  for (size_t i = 0; i < m->n; i++) {
    const res_fabric_model *f = &m->f[i];
    char used[32];
    snprintf(used, sizeof used, "%zu/%zu", f->n_used, f->n);
    printf("  %-22.22s %-5s %5d %-9s %9.2f %9.2f %10.3f %9.3f%s %7.4f %7.3f %7s\n", f->fabric,
           f->transport, f->host_count, f->source, f->m.alpha * 1e6, f->m.delta * 1e6,
           1e-9 / f->m.beta, 1e-9 / f->m.gamma, f->gamma_fixed ? "*" : " ", f->r2, f->rms_rel, used);
  }
  if (isfinite(m->gamma_kernel)) printf("# reduction kernel (f32 sum, 8 MiB): %.3f GB/s", 1e-9 / m->gamma_kernel);
  printf("%s\n", isfinite(m->gamma_kernel) ? "; * = gamma from the kernel (not identified by the rows)" : "");
}

int bench_cmd_fit(int argc, char **argv) {
  const char *out = NULL;
  int kernel = 1;
  enum { O_OUT = 256, O_K, O_NOK, O_HELP };
  static const struct option lo[] = {{"out", 1, 0, O_OUT}, {"gamma-kernel", 0, 0, O_K},
                                     {"no-gamma-kernel", 0, 0, O_NOK}, {"help", 0, 0, O_HELP},
                                     {0, 0, 0, 0}};
  opterr = 0;
  optind = 1;
  int ch;
  while ((ch = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
    switch (ch) {
    case O_OUT: out = optarg; break;
    case O_K: kernel = 1; break;
    case O_NOK: kernel = 0; break;
    case 'h':
    case O_HELP: fputs(fit_usage, stdout); return 0;
    case ':': return bench_usage_error(fit_usage, "option '%s' needs a value", argv[optind - 1]);
    default: return bench_usage_error(fit_usage, "unknown option '%s'", argv[optind - 1]);
    }
  }
  if (optind >= argc) return bench_usage_error(fit_usage, "no run directory given");
  res_model m;
  char err[1024];
  if (bench_fit_dirs(&m, argv + optind, argc - optind, kernel ? bench_gamma_kernel() : NAN, err, sizeof err))
    return bench_error("fit: %s", err);
  char path[4200];
  if (out)
    snprintf(path, sizeof path, "%s", out);
  else
    snprintf(path, sizeof path, "%s/model.json", argv[optind]);
  fit_print(&m);
  int rc = res_model_write(&m, path, err, sizeof err);
  res_model_free(&m);
  if (rc) return bench_error("fit: %s", err);
  printf("# model: %s\n", path);
  return 0;
}
