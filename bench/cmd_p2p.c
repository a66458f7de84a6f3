/* Placeholder until the p2p subcommand lands; replaced by its owner. */
#include "bench.h"
int bench_cmd_p2p(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return bench_error("'p2p' is not built yet");
}
