/* Private to the all-reduce algorithms (algo_*.c) and their unit tests: the pure planning logic
 * (the MPICH fold, binary tree shapes, the cost model behind `auto`) and a small request set that
 * skips empty messages. Everything here except the request set is pure, so tests can check it
 * without a communicator. */
#ifndef FABENCH_ALGO_PLAN_H
#define FABENCH_ALGO_PLAN_H

#include "coll_internal.h"

/* ---- the MPICH fold for rank counts that are not a power of two ----
 * pof2 = 2^floor(lg size), rem = size - pof2. Of the first 2*rem ranks the evens hand their
 * vector to the odd neighbour and sit out (newrank -1); the odds become newrank rank/2, every
 * rank >= 2*rem becomes newrank rank - rem. The pof2 newranks then run a power-of-two
 * algorithm and the odds hand the result back. */
typedef struct {
  int pof2, rem;
  int newrank; /* -1: folded away */
} coll_fold;
void coll_fold_plan(coll_fold *f, int size, int rank);
int coll_fold_real(const coll_fold *f, int newrank); /* the rank that plays newrank */

/* ---- binary trees over `size` ranks ----
 * Fills parent[size] (-1 at the root) and child[2*size] (child[2r], child[2r+1], -1 if none).
 * which 0: root 0 with one child, the largest power of two below size; below it an in-order
 * tree where rank r with lowest set bit b has children r - b/2 and r + b/2 (or the highest
 * r + b/2^i that exists). Odd ranks are always leaves.
 * which 1: the complementary tree of NCCL's double binary tree: tree 0 mirrored (r -> size-1-r)
 * for even sizes, shifted by one (r -> r+1) for odd sizes, so its leaves are tree 0's interior
 * nodes. No rank has more than two children in the two trees together.
 * Returns the root. */
int coll_btree(int *parent, int *child, int size, int which);
/* Heights (0 at leaves) and depths (0 at the root) of a tree from coll_btree. */
void coll_btree_levels(int *height, int *depth, const int *parent, const int *child, int size);

/* ---- hosts: the node-aware rank order and hier's blocks ----
 * coll_host_index: host_of[r] = rank r's host, numbered 0, 1, ... in order of first appearance
 * in rank order; returns the host count. coll_layout_plan: order[size] lists the ranks host by
 * host, hosts in that order and each host's ranks in rank order; host h's are order[start[h]
 * .. start[h+1]) (start: hosts + 1 entries); returns the host count. A ring over `order`
 * crosses each host boundary once each way (ranks 0,2 on host A and 1,3 on B: 0,2,1,3). */
int coll_host_index(int *host_of, const char (*hosts)[COLL_HOST_MAX], int size);
int coll_layout_plan(int *order, int *start, const int *host_of, int size);
/* hier cuts the vector into lmax blocks (coll_block), lmax the most ranks on one host; local
 * rank j of a host of L ranks owns the blocks k with k mod L == j, so every host has exactly one
 * owner of each block, whatever the hosts' rank counts. coll_hier_group: group[h] = the world
 * rank that owns block k on host h. */
static inline int coll_hier_owner(int k, int L) { return k % L; }
void coll_hier_group(int *group, const int *order, const int *start, int nhosts, int k);

/* ---- cost model: coll_model (coll.h); formulas documented in algo_auto.c ---- */
typedef coll_model coll_cost_model;
#define coll_cost(a, p, bytes, chunk, m) coll_model_time((m), (a), (p), (bytes), (chunk))
#define coll_auto_pick(p, bytes, chunk, m) coll_model_pick((m), (p), (bytes), (chunk))

/* ---- a set of outstanding requests on the communicator's request array ----
 * Sends and receives of zero bytes are skipped: both ends compute the same lengths. */
typedef struct {
  coll_comm *c;
  coll_req *r;
  int n, cap;
} coll_reqset;
int coll_reqset_init(coll_reqset *s, coll_comm *c, int cap, coll_err *e);
int coll_reqset_send(coll_reqset *s, int peer, const void *buf, size_t bytes, uint32_t tag,
                     coll_err *e);
int coll_reqset_recv(coll_reqset *s, int peer, void *buf, size_t bytes, uint32_t tag,
                     coll_err *e);
/* Waits for every request in the set and empties it. */
int coll_reqset_wait(coll_reqset *s, coll_err *e);

/* The ring's reduce-scatter (ag 0) or all-gather (ag 1) in place on buf's count elements cut
 * into lmax blocks (coll_block), among the communicator's (or view's) ranks: rank i's
 * "super-block" is blocks i, i + size, ...; after size - 1 steps rank i holds its super-block
 * reduced (ag 0) or every super-block (ag 1). hier's phases inside a host and the
 * reduce-scatter's and all-gather's ring (algo_hier.c). */
/* A round of small tokens: `mine` (sz bytes) to every other rank of c (its view), theirs into
 * all + i x sz; under c's seq and this step's tag. */
int coll_tokens(coll_comm *c, const void *mine, unsigned char *all, size_t sz, uint32_t step, coll_err *e);
/* The most ranks whose mapped copies one round compares. */
#define COLL_MAPPED_MAX 64
/* One round of tokens: 1 where every rank of c passed the same place of memory its peers on this
 * host map (coll_host_ptr: then each may read the others' copies in place), 0 where none did,
 * -2 where some did or the places differ, -1 on a failed round. */
int coll_mapped_same(coll_comm *c, const void *buf, size_t bytes, uint32_t step, coll_err *e);
/* The collectives by direct reads of the peers' mapped copies (algo_direct.c), where every rank
 * is on one host and coll_mapped_same says 1; 1 (not done: the caller runs its fallback, every
 * rank alike) where that is not so; 0 done; -1 failed. */
int coll_ag_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t bb, coll_err *e);
int coll_rs_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_op op,
                   coll_err *e);
int coll_bcast_direct(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e);
int coll_a2a_direct(coll_comm *c, const void *sendbuf, void *recvbuf, size_t bb, coll_err *e);
/* Two-level reduce-scatter and all-gather (algo_rsag_hier.c): fits where every host has as many
 * ranks (outside a group view); else the caller runs the flat ring. */
int coll_rsag_hier_fits(const coll_comm *c);
int coll_rs_hier(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_op op,
                 coll_err *e);
int coll_ag_hier(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt, coll_err *e);
int coll_ring_phase(coll_comm *c, unsigned char *buf, size_t count, int lmax, coll_dtype dt, coll_op op,
                    int ag, coll_err *e);
/* Two-level broadcast and all-to-all(v) (algo_colls_hier.c), for hosts of any rank counts: only
 * one leader per host talks across hosts. Set c->seq themselves (three sub-steps at most). */
int coll_bcast_hier(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e);
int coll_a2a_hier(coll_comm *c, const void *sendbuf, const size_t *scounts, const size_t *sdispls, void *recvbuf,
                  const size_t *rcounts, const size_t *rdispls, size_t es, coll_err *e);
/* The flat broadcast k (tree, chain, vdg or linear; anything else: tree) on c or its view. */
int coll_bcast_flat(coll_comm *c, coll_algo_kind k, void *buf, size_t bytes, int root, coll_err *e);
/* The cheapest of k's one-level algorithms by m (hier left out): what hier runs at each level. */
coll_algo coll_colls_pick_flat(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes);
/* auto's pick of collective k on c (bytes as coll_colls_time's): the formulas with c's hosts
 * (hier priced where they are several and some has more than one rank). */
coll_algo coll_colls_auto(const coll_comm *c, coll_kind k, size_t bytes);

/* An exchange with one partner whose received elements are reduced into dst: sends scount
 * elements from sbuf and receives rcount, in pieces of the communicator's chunk, COLL_RING_SLOTS
 * in flight each way, each received piece landing in a scratch slot (scratch 0) and reduced as
 * soon as it is in. So the reduction overlaps the transfer and reads what it received from
 * cache, as the ring's does. Both ends cut their ranges from the start the same way, so the
 * partner's pieces are ours. rev: dst = received (op) dst, the partner's vector first (it is the
 * lower rank). sbuf may be dst (the same range): a piece is reduced only once its send is done.
 * On a device, one piece: each piece would be a kernel and a wait of the host. */
int coll_xchg_reduce(coll_comm *c, int peer, const void *sbuf, size_t scount, void *dst, size_t rcount,
                     coll_dtype dt, coll_op op, int rev, uint32_t tag, coll_err *e);

/* The fold's two ends, shared by rd and rhd. coll_fold_in: the evens of the first 2*rem ranks
 * send their vector to the odd neighbour, which makes buf = (even's) op (own): lower rank first,
 * so every rank evaluates the same expression (coll_xchg_reduce, so scratch 0 is its slots). coll_fold_out: the
 * odds hand the result back (a fixed tag step, so both ends agree). */
int coll_fold_in(coll_comm *c, const coll_fold *f, void *buf, size_t count, coll_dtype dt, coll_op op,
                 uint32_t step, coll_err *e);
int coll_fold_out(coll_comm *c, const coll_fold *f, coll_reqset *rs, void *buf, size_t bytes,
                  coll_err *e);

#endif
