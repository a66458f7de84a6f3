/* launch: emulated fabrics and clusters on one machine (--emulate), private to launch/ and its
 * tests (launch.h is the public side). One network namespace per node (per rank for the plain
 * RATE form), joined to a bridge by veth pairs shaped with tbf at both ends: a full-duplex link
 * of the node's rate to a non-blocking switch. With NODESxRANKS each node also has a hostname
 * (node<k>) and an IPC namespace, held by one sleeping process that its ranks join, so they see
 * one host and share System V memory while other nodes are other hosts. Addresses come from
 * 198.18.0.0/15; names carry the owner's pid (fb<id>n<k> namespace, fb<id>e<k> its interface,
 * fb<id>h<k> the bridge's end, fb<id>br the bridge), and a set whose owner is gone is stale. */
#ifndef FABENCH_LAUNCH_EMU_H
#define FABENCH_LAUNCH_EMU_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launch.h"

typedef struct {
  long id;           /* the set's id (the owner's pid) */
  int n;             /* namespaces: nodes (ranks in the plain RATE form) */
  int subnet;        /* 0..511: 198.18.0.0/15 cut in /24s */
  int mtu;           /* of every link in the set */
  uint64_t rate_bps; /* bits per second */
  char rate[32];     /* as given, e.g. "1gbit" */
  char cc[32];       /* the namespaces' default tcp congestion control; "": the host's */
  uint64_t burst;    /* tbf bucket, bytes */
  uint64_t limit;    /* tbf queue, bytes */
  char ip[256];      /* path of ip(8) */
  char tc[256];      /* path of tc(8) */
  char node_rate[LAUNCH_EMU_MAX_NODES][32]; /* each node's link ("" : rate) */
  int hosts;                                /* launch_emu_hosts_up ran: holder[] live */
  pid_t holder[LAUNCH_EMU_MAX_NODES];       /* each node's namespace holder */
} launch_emu;

/* The bytes a link of bps queues before tbf drops. */
uint64_t launch_emu_limit(uint64_t bps);

/* A program's path: PATH first, then the sbin and bin directories. 0, or -1 where none. */
int launch_emu_find_tool(const char *name, char *out, size_t cap);

/* Root and iproute2 present? 0, or -1 with the reason. Fills m->ip and m->tc. */
int launch_emu_check(launch_emu *m, char *err, size_t cap);

/* Removes every set whose owner pid is gone (killing what still runs in its namespaces).
 * Returns the number of sets removed, or -1 with the reason. Needs launch_emu_check first. */
int launch_emu_cleanup_stale(const launch_emu *m, char *err, size_t cap);

/* Creates set `id` of n namespaces shaped to rate (already checked by launch_emu_check), node k
 * to node_rate[k] instead where node_rate (n entries, may be NULL) has a non-NULL one. mtu 0 means
 * FABENCH_EMU_MTU from the environment, or LAUNCH_EMU_DEFAULT_MTU. cc, unless NULL, is every
 * namespace's default tcp congestion control: the one sockets take that do not choose (UCX's,
 * Open MPI's), where the host's default may pace (bbr). On failure everything already created
 * is removed. 0, or -1 with the reason. */
int launch_emu_setup(launch_emu *m, long id, int n, const char *rate, const char *const *node_rate,
                     int mtu, const char *cc, char *err, size_t cap);

/* Host namespaces for the set's nodes: per node a child of this process, in a UTS and an IPC
 * namespace of its own with the hostname "node<k>", that sleeps until killed (or this process
 * dies). 0, or -1 with the reason (those started are stopped). */
int launch_emu_hosts_up(launch_emu *m, char *err, size_t cap);
/* Node k's hostname ("node<k>"). */
void launch_emu_hostname(int node, char *out, size_t cap);
/* Opens node k's UTS and IPC namespaces (close-on-exec) into fds[0], fds[1] for setns(2) in a
 * rank about to exec; fds -1 where there are none (no host namespaces). 0, or -1 with errno. */
int launch_emu_host_fds(const launch_emu *m, int node, int fds[2]);

/* Removes everything named after set m->id (also a partial set) and stops the namespace
 * holders. Safe to call twice. */
void launch_emu_teardown(launch_emu *m);

/* Names and addresses of a set. */
void launch_emu_ns(const launch_emu *m, int node, char *out, size_t cap);     /* fb<id>n<k> */
void launch_emu_dev(const launch_emu *m, int node, char *out, size_t cap);    /* fb<id>e<k> */
void launch_emu_addr(const launch_emu *m, int node, char *out, size_t cap);   /* 198.x.y.(k+1) */
void launch_emu_prefix(const launch_emu *m, char *out, size_t cap);           /* "198.x.y." */
void launch_emu_subnet(const launch_emu *m, char *out, size_t cap);           /* 198.x.y.0/24 */

#endif
