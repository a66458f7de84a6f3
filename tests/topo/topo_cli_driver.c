/* `fabench topo` without the rest of fabench: argv[1..] are the subcommand's arguments. */
#include "bench.h"

int main(int argc, char **argv) {
  argv[0] = "topo";
  return bench_cmd_topo(argc, argv);
}
