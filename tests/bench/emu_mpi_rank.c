/* A small MPI program for the launcher tests: an MPI_Allreduce of seeded integer data over
 * MPI_COMM_WORLD, checked against the sum computed locally. Prints one line per rank:
 * "mpi-rank R of N ok <seconds> cc=<CC>/<EMU_CC> <netns-interface>" and exits 0, or 1 on a wrong
 * result; CC is the default tcp congestion control its sockets take (its namespace's), EMU_CC
 * the launcher's FABENCH_EMU_CC ("-" where unset).
 * argv[1] (optional): elements (int32) to reduce; default 1000003. */
#include <mpi.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int32_t value(int rank, size_t i) { return (int32_t)((i * 2654435761u + (unsigned)rank * 40503u) % 1000u); }

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000003u;
  int32_t *buf = malloc(n * sizeof *buf + 1);
  if (!buf) MPI_Abort(MPI_COMM_WORLD, 1);
  for (size_t i = 0; i < n; i++) buf[i] = value(rank, i);
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime();
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
  double t = MPI_Wtime() - t0;
  size_t bad = 0;
  for (size_t i = 0; i < n; i++) {
    int64_t want = 0;
    for (int r = 0; r < size; r++) want += value(r, i);
    if (buf[i] != want) bad++;
  }
  /* The interfaces this rank sees (its namespace's, under emulation). */
  char ifs[256] = "";
  struct if_nameindex *ni = if_nameindex();
  for (struct if_nameindex *p = ni; p && p->if_index; p++)
    if (strcmp(p->if_name, "lo") && strlen(ifs) + strlen(p->if_name) + 2 < sizeof ifs) {
      strcat(ifs, p->if_name);
      strcat(ifs, " ");
    }
  if (ni) if_freenameindex(ni);
  char cc[64] = "?";
  FILE *f = fopen("/proc/sys/net/ipv4/tcp_congestion_control", "r");
  if (f && fgets(cc, sizeof cc, f)) cc[strcspn(cc, "\n")] = 0;
  if (f) fclose(f);
  const char *emu_cc = getenv("FABENCH_EMU_CC");
  printf("mpi-rank %d of %d %s %.6f cc=%s/%s %s\n", rank, size, bad ? "BAD" : "ok", t, cc,
         emu_cc && *emu_cc ? emu_cc : "-", ifs);
  free(buf);
  MPI_Finalize();
  return bad ? 1 : 0;
}
