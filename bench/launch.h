/* bench: the local launcher (-n N) and emulated fabrics (--emulate RATE). Private to bench/. */
#ifndef FABENCH_BENCH_LAUNCH_H
#define FABENCH_BENCH_LAUNCH_H

typedef struct {
  int n;                   /* ranks to start on this host (>= 1) */
  int use_mpirun;          /* start through mpirun (the mpi transport is wanted) */
  const char *mpirun_args; /* extra mpirun arguments, space separated (may be NULL) */
  const char *emulate;     /* NULL, or a link rate ("1gbit", "500mbit"): one network namespace
                              per rank on a bridge, every link shaped with tc tbf */
  int timeout_s;           /* rendezvous / wait timeout the ranks use */
} bench_launch_opts;

/* Starts o->n ranks of this program, each executing rank_argv (NULL-terminated; rank_argv[0]
 * is the subcommand, e.g. "allreduce", followed by its flags without -n/--emulate), and waits.
 * Ranks get FABENCH_RANK, FABENCH_WORLD_SIZE, FABENCH_LOCAL_RANK, FABENCH_ROOT (host:port),
 * FABENCH_TOKEN and FABENCH_LAUNCHER=1 (or are started by mpirun); under --emulate also
 * FABENCH_BIND_ADDR (the rank's address), FABENCH_FABRIC ("emu-<rate>"), FABENCH_EMU_RATE and
 * UCX_NET_DEVICES (the rank's interface). Says each rank's exit on failure; when one rank fails
 * the others are stopped. Returns the run's exit status (0 when every rank exited 0). */
int bench_launch(const bench_launch_opts *o, char *const rank_argv[]);

/* bench_launch with an explicit program instead of this one (/proc/self/exe): the ranks run
 * `prog rank_argv...`. For tests, which launch small programs of their own. */
int bench_launch_prog(const bench_launch_opts *o, const char *prog, char *const rank_argv[]);

/* Removes "-n N", "-nN", "--ranks N", "--emulate R" and "--emulate=R" from argv (in place,
 * argv stays NULL-terminated) and returns the new argc. */
int bench_launch_strip(int argc, char **argv);

#endif
