/* Placeholder until the topo subcommand lands; replaced by its owner. */
#include "bench.h"
int bench_cmd_topo(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return bench_error("'topo' is not built yet");
}
