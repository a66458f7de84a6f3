/* bench: the local launcher (-n N) and emulated fabrics (--emulate RATE). Private to bench/. */
#ifndef FABENCH_BENCH_LAUNCH_H
#define FABENCH_BENCH_LAUNCH_H

#include <signal.h>

typedef struct {
  int n;                   /* ranks to start on this host (>= 1) */
  int use_mpirun;          /* start through mpirun (the mpi transport is wanted) */
  const char *mpirun_args; /* extra mpirun arguments, space separated (may be NULL) */
  const char *emulate;     /* NULL, or a link rate ("1gbit", "500mbit"): one network namespace
                              per rank on a bridge, every link shaped with tc tbf */
  const char *tcp_cc;      /* with emulate: the namespaces' default tcp congestion control,
                              which sockets that do not choose take (UCX's, Open MPI's); NULL:
                              the host's */
  int timeout_s;           /* rendezvous / wait timeout the ranks use */
} bench_launch_opts;

/* Starts o->n ranks of this program, each executing rank_argv (NULL-terminated; rank_argv[0]
 * is the subcommand, e.g. "allreduce", followed by its flags without -n/--emulate), and waits.
 * Ranks get FABENCH_RANK, FABENCH_WORLD_SIZE, FABENCH_LOCAL_RANK, FABENCH_ROOT (host:port),
 * FABENCH_TOKEN and FABENCH_LAUNCHER=1 (or are started by mpirun); under --emulate also
 * FABENCH_BIND_ADDR (the rank's address), FABENCH_FABRIC ("emu-<rate>"), FABENCH_EMU_RATE,
 * FABENCH_EMU_CC (where tcp_cc is set) and UCX_NET_DEVICES (the rank's interface). Says each
 * rank's exit on failure; when one rank fails the others are stopped (SIGTERM, then SIGKILL), at
 * once where it was killed, after 2 s where it exited with an error of its own, so that they can
 * write what they measured. Returns the run's exit status (0 when every rank exited 0). */
int bench_launch(const bench_launch_opts *o, char *const rank_argv[]);

/* bench_launch with an explicit program instead of this one (/proc/self/exe): the ranks run
 * `prog rank_argv...`. For tests, which launch small programs of their own. */
int bench_launch_prog(const bench_launch_opts *o, const char *prog, char *const rank_argv[]);

/* While a command runs children (ranks, the suite's steps) it takes SIGINT, SIGTERM, SIGHUP
 * and SIGCHLD synchronously (sigtimedwait) and forwards them, instead of dying with its
 * children still running. SIGCHLD goes to its default meanwhile: a caller that ignores it would
 * have the children reaped behind our back. */
typedef struct {
  sigset_t set;                /* the signals taken */
  sigset_t old;                /* the caller's mask, restored, and the children's */
  struct sigaction chld_old;   /* the caller's SIGCHLD action */
} bench_sigs;
void bench_sigs_take(bench_sigs *s);
/* Drains what is pending (a forwarded SIGINT would otherwise kill us on unblocking), then
 * restores the caller's mask and SIGCHLD action. */
void bench_sigs_restore(bench_sigs *s);

/* The launcher's own options (-n/--ranks, --emulate) as the command's getopt_long parsed them:
 * the argv elements to leave out of the ranks' argv. Noted by the parser, not found by looking
 * at the strings, so that another option's value that only looks like one ("--mpirun-args
 * '-npernode 2'", "--out -n") stays. */
#define BENCH_LAUNCH_OWN_MAX 32
typedef struct {
  const char *arg[BENCH_LAUNCH_OWN_MAX];
  int n;
  int over; /* more than BENCH_LAUNCH_OWN_MAX elements: not all noted */
} bench_launch_own;

/* Right after getopt_long returned one of those options (with its required value), given the
 * optind (next) and optarg (value) it left: notes the elements it took ("-n" "4", "-n4",
 * "--ranks=4"). */
void bench_launch_note(bench_launch_own *own, char *const *argv, int next, const char *value);

/* Removes the elements noted in own from argv (in place, argv stays NULL-terminated) and
 * returns the new argc; -1 (argv untouched) when own could not note them all. */
int bench_launch_strip(int argc, char **argv, const bench_launch_own *own);

#endif
