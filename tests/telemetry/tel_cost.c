/* tel_cost HZ SECONDS [MAX_PERCENT]: the sampler's own cost on this machine. Samples the real
 * host ("/", NVML where present) at HZ for SECONDS into a scratch CSV and prints the sampler
 * thread's CPU time per second of wall time, as a share of one core; with MAX_PERCENT, exits 1
 * when the share is above it. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tel.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: tel_cost HZ SECONDS [MAX_PERCENT]\n");
    return 2;
  }
  double hz = atof(argv[1]), secs = atof(argv[2]), max = argc > 3 ? atof(argv[3]) : 0;
  char csv[] = "/tmp/fabench-telcost-XXXXXX";
  int fd = mkstemp(csv);
  if (fd < 0 || !(hz > 0) || !(secs > 0)) {
    fprintf(stderr, "tel_cost: bad arguments or no scratch file\n");
    return 2;
  }
  close(fd);
  tel_opts o = {.hz = hz, .csv_path = csv};
  char err[512];
  tel *h;
  if (tel_start(&h, &o, err, sizeof err)) {
    fprintf(stderr, "tel_cost: %s\n", err);
    unlink(csv);
    return 1;
  }
  struct timespec ts = {(time_t)secs, (long)((secs - (double)(time_t)secs) * 1e9)};
  nanosleep(&ts, NULL);
  tel_stats st;
  tel_stop(h, &st);
  struct stat sb;
  long long bytes = stat(csv, &sb) == 0 ? (long long)sb.st_size : -1;
  unlink(csv);
  double share = st.wall_s > 0 ? 100 * st.cpu_s / st.wall_s : 0;
  printf("tel_cost: %ld readings at %g Hz in %.1f s: the sampler thread used %.2f ms of CPU a second, "
         "%.3f%% of a core (%.0f us a reading), CSV %lld bytes (%.0f a reading)%s%s\n",
         st.samples, hz, st.wall_s, 1e3 * st.cpu_s / st.wall_s, share,
         st.samples ? 1e6 * st.cpu_s / (double)st.samples : 0, bytes,
         st.samples ? (double)bytes / (double)st.samples : 0, st.error[0] ? "; " : "", st.error);
  if (max > 0 && share > max) {
    fprintf(stderr, "tel_cost: %.3f%% of a core is above %g%%\n", share, max);
    return 1;
  }
  return st.samples > 0 ? 0 : 1;
}
