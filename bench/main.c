/* fabench: one binary, subcommands. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "util.h"

static const char fabench_usage[] =
    "usage: fabench <command> [options]\n"
    "commands:\n"
    "  suite      the main job: topology, microbenchmarks and training per fabric, the cost\n"
    "             model and the report (no flags needed)\n"
    "  allreduce  all-reduce sweep over transports and algorithms, verified\n"
    "  reducescatter, allgather, bcast, alltoall\n"
    "             the other collectives, the same sweep and flags as allreduce\n"
    "  p2p        point-to-point latency and bandwidth\n"
    "  train      ResNet training (CPU, oneDNN), one process or data-parallel (-n N)\n"
    "  topo       this machine's topology (or an hwloc XML's)\n"
    "  fit        the cost model (alpha, beta, gamma per fabric) from run directories\n"
    "  predict    what-if: training throughput at many ranks from the cost model\n"
    "  report     report.md with plots from one or more run directories\n"
    "  validate   the cost model against measurements it was not fitted on (emulated links)\n"
    "  accept     judges a cluster against a rules file: pass or fail per rule, the suspect\n"
    "             hosts and links named (JUnit XML, a Slurm hostlist)\n"
    "  version    print the version\n"
    "fabench <command> --help shows a command's options.\n";

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(fabench_usage, stderr);
    return 2;
  }
  const char *cmd = argv[1];
  if (util_stop_signals_install() != 0) perror("fabench: sigaction");
  if (!strcmp(cmd, "allreduce")) return bench_cmd_allreduce(argc - 1, argv + 1);
  if (!strcmp(cmd, "reducescatter")) return bench_cmd_reducescatter(argc - 1, argv + 1);
  if (!strcmp(cmd, "allgather")) return bench_cmd_allgather(argc - 1, argv + 1);
  if (!strcmp(cmd, "bcast")) return bench_cmd_bcast(argc - 1, argv + 1);
  if (!strcmp(cmd, "alltoall")) return bench_cmd_alltoall(argc - 1, argv + 1);
  if (!strcmp(cmd, "p2p")) return bench_cmd_p2p(argc - 1, argv + 1);
  if (!strcmp(cmd, "train")) return bench_cmd_train(argc - 1, argv + 1);
  if (!strcmp(cmd, "topo")) return bench_cmd_topo(argc - 1, argv + 1);
  if (!strcmp(cmd, "suite")) return bench_cmd_suite(argc - 1, argv + 1);
  if (!strcmp(cmd, "fit")) return bench_cmd_fit(argc - 1, argv + 1);
  if (!strcmp(cmd, "predict")) return bench_cmd_predict(argc - 1, argv + 1);
  if (!strcmp(cmd, "report")) return bench_cmd_report(argc - 1, argv + 1);
  if (!strcmp(cmd, "validate")) return bench_cmd_validate(argc - 1, argv + 1);
  if (!strcmp(cmd, "accept")) return bench_cmd_accept(argc - 1, argv + 1);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    printf("fabench %s\n", FABENCH_VERSION);
    return 0;
  }
  if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
    fputs(fabench_usage, stdout);
    return 0;
  }
  fprintf(stderr, "fabench: unknown command '%s'\n", cmd);
  fputs(fabench_usage, stderr);
  return 2;
}
