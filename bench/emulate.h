/* bench: emulated fabrics on one machine (--emulate RATE). Private to bench/.
 *
 * One network namespace per rank, joined by a bridge in the root namespace through veth pairs;
 * both ends of every veth are shaped with tc tbf to the rate, so each rank has a full-duplex
 * link of that rate to a non-blocking switch. Addresses come from 198.18.0.0/15 (RFC 2544,
 * benchmarking), one free /24 per set; nothing is routed anywhere else. Names (the same scheme
 * as scripts/fabric-emu.sh), with <id> the owner's pid:
 *   fb<id>n<r>  rank r's namespace          fb<id>e<r>  rank r's interface (in its namespace)
 *   fb<id>h<r>  its peer on the bridge      fb<id>br    the bridge (address .254 of the /24)
 * A set whose owner pid is gone is stale and is removed by the next set-up. */
#ifndef FABENCH_BENCH_EMULATE_H
#define FABENCH_BENCH_EMULATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_EMU_MAX_RANKS 250
#define BENCH_EMU_DEFAULT_MTU 9000

typedef struct {
  long id;           /* the set's id (the owner's pid) */
  int n;             /* ranks */
  int subnet;        /* 0..511: 198.18.0.0/15 cut in /24s */
  int mtu;           /* of every link in the set */
  uint64_t rate_bps; /* bits per second */
  char rate[32];     /* as given, e.g. "1gbit" */
  char cc[32];       /* the namespaces' default tcp congestion control; "": the host's */
  uint64_t burst;    /* tbf bucket, bytes */
  uint64_t limit;    /* tbf queue, bytes */
  char ip[256];      /* path of ip(8) */
  char tc[256];      /* path of tc(8) */
} bench_emu;

/* "500mbit", "1gbit", "10gbit", "100kbit": an integer and one of kbit, mbit, gbit; from 1mbit
 * to 400gbit. Returns 0, or -1 for anything else. */
int bench_emu_parse_rate(const char *s, uint64_t *bps);

/* The tbf bucket, in bytes, that a link of bps gets. */
uint64_t bench_emu_burst(uint64_t bps);

/* The bytes a link of bps queues before tbf drops. */
uint64_t bench_emu_limit(uint64_t bps);

/* Root and iproute2 present? 0, or -1 with the reason. Fills m->ip and m->tc. */
int bench_emu_check(bench_emu *m, char *err, size_t cap);

/* Removes every set whose owner pid is gone (killing what still runs in its namespaces).
 * Returns the number of sets removed, or -1 with the reason. Needs bench_emu_check first. */
int bench_emu_cleanup_stale(const bench_emu *m, char *err, size_t cap);

/* Creates set `id` of n ranks shaped to rate (already checked by bench_emu_check). mtu 0 means
 * FABENCH_EMU_MTU from the environment, or BENCH_EMU_DEFAULT_MTU. cc, unless NULL, is every
 * namespace's default tcp congestion control: the one sockets take that do not choose (UCX's,
 * Open MPI's), where the host's default may pace (bbr). On failure everything already created
 * is removed. 0, or -1 with the reason. */
int bench_emu_setup(bench_emu *m, long id, int n, const char *rate, int mtu, const char *cc,
                    char *err, size_t cap);

/* Removes everything named after set m->id (also a partial set). Safe to call twice. */
void bench_emu_teardown(const bench_emu *m);

/* Names and addresses of a set. */
void bench_emu_ns(const bench_emu *m, int rank, char *out, size_t cap);     /* fb<id>n<r> */
void bench_emu_dev(const bench_emu *m, int rank, char *out, size_t cap);    /* fb<id>e<r> */
void bench_emu_addr(const bench_emu *m, int rank, char *out, size_t cap);   /* 198.x.y.(r+1) */
void bench_emu_prefix(const bench_emu *m, char *out, size_t cap);           /* "198.x.y." */
void bench_emu_subnet(const bench_emu *m, char *out, size_t cap);           /* 198.x.y.0/24 */

#endif
