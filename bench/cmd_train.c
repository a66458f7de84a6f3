/* Placeholder until the train subcommand lands; replaced by its owner. */
#include "bench.h"
int bench_cmd_train(int argc, char **argv) {
  (void)argc;
  (void)argv;
  return bench_error("'train' is not built yet");
}
