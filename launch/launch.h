/* launch: how ranks start and on what network. The local launcher (-n N), through fork + exec
 * or mpirun, and emulated fabrics and clusters on one machine (--emulate, --emulate-slow); the
 * commands in bench/ use this header alone. */
#ifndef FABENCH_LAUNCH_H
#define FABENCH_LAUNCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define LAUNCH_EMU_DEFAULT_MTU 9000
#define LAUNCH_EMU_MAX_NODES 250 /* namespaces of one emulated set (a /24) */
#define LAUNCH_EMU_SLOW_MAX 16   /* --emulate-slow items */

/* "500mbit", "1gbit", "10gbit", "100kbit": an integer and one of kbit, mbit, gbit; from 1mbit
 * to 400gbit. Returns 0, or -1 for anything else. */
int launch_emu_parse_rate(const char *s, uint64_t *bps);
/* The tbf bucket, in bytes, that a link of bps gets. */
uint64_t launch_emu_burst(uint64_t bps);

/* --emulate's value. "RATE": one rank per network namespace, every namespace on this host
 * (one host; the rank count comes from -n). "NODESxRANKS:RATE" (e.g. "2x2:1gbit"): NODES
 * emulated hosts, each a network namespace with a hostname and IPC namespace of its own,
 * RANKS ranks in each; only the nodes' links are shaped. */
typedef struct {
  int nodes;    /* NODES; 0 for the plain RATE form */
  int per_node; /* RANKS; 0 for the plain RATE form */
  char rate[32];
} launch_emu_spec;
/* 0, or -1 with the reason in err. */
int launch_emu_parse_spec(const char *s, launch_emu_spec *out, char *err, size_t cap);
/* --emulate-slow NODE=RATE: node index and its rate. 0, or -1 with the reason in err. */
int launch_emu_parse_slow(const char *s, int *node, char *rate, size_t rate_cap, char *err,
                          size_t cap);
/* --emulate (may be NULL) with its --emulate-slow items, for *n ranks (0: a cluster's own
 * count, which *n then gets; a plain RATE needs one): spec gets --emulate's value, and
 * slow_rate (LAUNCH_EMU_MAX_NODES entries, or NULL) each slowed node's rate, pointing into the
 * items. Every check the two options need together (a slowed node that exists, once; -n that
 * agrees with the cluster). 0, or -1 with the reason in err. */
int launch_emu_plan(const char *emulate, const char *const *slow, int nslow, int *n, launch_emu_spec *spec,
                    const char **slow_rate, char *err, size_t cap);
/* Can this process set up emulated fabrics (root, iproute2)? 0, or -1 with the reason. */
int launch_emu_usable(char *why, size_t cap);

typedef struct {
  int n;                   /* ranks to start on this host (>= 1) */
  int use_mpirun;          /* start through mpirun (the mpi transport is wanted) */
  const char *mpirun_args; /* extra mpirun arguments, space separated (may be NULL) */
  const char *emulate;     /* NULL, or --emulate's value (launch_emu_spec): "1gbit" puts each
                              rank in a network namespace of its own on a bridge; "2x2:1gbit"
                              emulates 2 hosts of 2 ranks; every link is shaped with tc tbf */
  const char *const *slow; /* with a NODESxRANKS emulate: --emulate-slow items "NODE=RATE" */
  int nslow;
  const char *tcp_cc;      /* with emulate: the namespaces' default tcp congestion control,
                              which sockets that do not choose take (UCX's, Open MPI's); NULL:
                              the host's */
  int timeout_s;           /* rendezvous / wait timeout the ranks use */
} launch_opts;

/* Starts o->n ranks of this program, each executing rank_argv (NULL-terminated; rank_argv[0]
 * is the subcommand, e.g. "allreduce", followed by its flags without -n/--emulate), and waits.
 * Ranks get FABENCH_RANK, FABENCH_WORLD_SIZE, FABENCH_LOCAL_RANK, FABENCH_ROOT (host:port),
 * FABENCH_TOKEN and FABENCH_LAUNCHER=1 (or are started by mpirun); under --emulate also
 * FABENCH_BIND_ADDR (the rank's address), FABENCH_FABRIC ("emu-<rate>"), FABENCH_EMU_RATE,
 * FABENCH_EMU_CC (where tcp_cc is set) and UCX_NET_DEVICES (the rank's interface); with
 * NODESxRANKS FABENCH_EMU_LAYOUT ("2x2") and FABENCH_EMU_SLOW ("1=100mbit,..."), each rank in
 * its node's hostname and IPC namespace, FABENCH_LOCAL_RANK its index in the node. Says each
 * rank's exit on failure; when one rank fails the others are stopped (SIGTERM, then SIGKILL), at
 * once where it was killed, after 2 s where it exited with an error of its own, so that they can
 * write what they measured. Returns the run's exit status (0 when every rank exited 0). */
int launch_ranks(const launch_opts *o, char *const rank_argv[]);

/* launch_ranks with an explicit program instead of this one (/proc/self/exe): the ranks run
 * `prog rank_argv...`. For tests, which launch small programs of their own. */
int launch_ranks_prog(const launch_opts *o, const char *prog, char *const rank_argv[]);

/* While a command runs children (ranks, the suite's steps) it takes SIGINT, SIGTERM, SIGHUP
 * and SIGCHLD synchronously (sigtimedwait) and forwards them, instead of dying with its
 * children still running. SIGCHLD goes to its default meanwhile: a caller that ignores it would
 * have the children reaped behind our back. */
typedef struct {
  sigset_t set;                /* the signals taken */
  sigset_t old;                /* the caller's mask, restored, and the children's */
  struct sigaction chld_old;   /* the caller's SIGCHLD action */
} launch_sigs;
void launch_sigs_take(launch_sigs *s);
/* Drains what is pending (a forwarded SIGINT would otherwise kill us on unblocking), then
 * restores the caller's mask and SIGCHLD action. */
void launch_sigs_restore(launch_sigs *s);

/* The launcher's own options (-n/--ranks, --emulate) as the command's getopt_long parsed them:
 * the argv elements to leave out of the ranks' argv. Noted by the parser, not found by looking
 * at the strings, so that another option's value that only looks like one ("--mpirun-args
 * '-npernode 2'", "--out -n") stays. */
#define LAUNCH_OWN_MAX 32
typedef struct {
  const char *arg[LAUNCH_OWN_MAX];
  int n;
  int over; /* more than LAUNCH_OWN_MAX elements: not all noted */
} launch_own;

/* Right after getopt_long returned one of those options (with its required value), given the
 * optind (next) and optarg (value) it left: notes the elements it took ("-n" "4", "-n4",
 * "--ranks=4"). */
void launch_own_note(launch_own *own, char *const *argv, int next, const char *value);

/* Removes the elements noted in own from argv (in place, argv stays NULL-terminated) and
 * returns the new argc; -1 (argv untouched) when own could not note them all. */
int launch_own_strip(int argc, char **argv, const launch_own *own);

#endif
