/* collectives: bootstrap, communicators over a transport (tcp, mpi, ucx, nccl), all-reduce algorithms
 * and reduction kernels. Knows nothing of models or benches. All calls return 0 on success and
 * -1 on failure with the cause (naming ranks and hosts) in the coll_err. */
#ifndef FABENCH_COLL_H
#define FABENCH_COLL_H

#include <stddef.h>
#include <stdint.h>

typedef struct coll_err {
  char msg[1024];
} coll_err;

/* ---- element types and reductions ---- */
typedef enum { COLL_F32, COLL_F64, COLL_F16, COLL_BF16, COLL_I32, COLL_I64, COLL_NDTYPES } coll_dtype;
typedef enum { COLL_SUM, COLL_PROD, COLL_MIN, COLL_MAX, COLL_NOPS } coll_op;

size_t coll_dtype_size(coll_dtype dt);
const char *coll_dtype_name(coll_dtype dt); /* "f32", ... */
int coll_dtype_parse(const char *s, coll_dtype *out);
const char *coll_op_name(coll_op op); /* "sum", ... */
int coll_op_parse(const char *s, coll_op *out);

/* inout[i] = inout[i] (op) in[i] for i < count. Vectorized; f16/bf16 computed in f32 and
 * rounded to nearest even. */
void coll_reduce(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op);
/* Conversions used by reductions, tests and checkers. */
float coll_f16_to_f32(uint16_t h);
uint16_t coll_f32_to_f16(float f);
float coll_bf16_to_f32(uint16_t h);
uint16_t coll_f32_to_bf16(float f);
/* The same over arrays, vectorized: dst[i] = to_half(src[i] * scale) and dst[i] =
 * to_f32(src[i]), dt COLL_BF16 or COLL_F16 (gradients onto a 16-bit wire and back). */
void coll_f32_to_half_n(uint16_t *dst, const float *src, size_t n, float scale, coll_dtype dt);
void coll_half_to_f32_n(float *dst, const uint16_t *src, size_t n, coll_dtype dt);

/* ---- bootstrap: who we are, and a slow all-gather to exchange endpoint addresses ---- */
typedef enum { COLL_BOOT_AUTO, COLL_BOOT_ENV, COLL_BOOT_MPI } coll_boot_kind;
typedef struct coll_boot coll_boot;

/* Each rank's host is gethostname's, or FABENCH_HOST where that is set (emulating several hosts
 * on one machine, for tests and emulated runs: hier and the node-aware rank order follow it).
 * AUTO: MPI when launched by mpirun/srun with MPI built in (and MPI is wanted: want_mpi),
 * otherwise the environment rendezvous (FABENCH_RANK/WORLD_SIZE/ROOT/TOKEN, or torchrun's
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, Slurm's SLURM_PROCID/NTASKS, Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE), otherwise a world of one. A launcher that started several
 * processes that each see a world of one is refused with the reason. */
int coll_boot_open(coll_boot **out, coll_boot_kind kind, int want_mpi, int timeout_ms,
                   coll_err *e);
int coll_boot_rank(const coll_boot *b);
int coll_boot_size(const coll_boot *b);
const char *coll_boot_kind_name(const coll_boot *b); /* "env", "mpi", "single" */
const char *coll_boot_host(const coll_boot *b, int rank); /* hostname of a rank */
int coll_boot_local_rank(const coll_boot *b);           /* index among ranks on this host */
int coll_boot_host_count(const coll_boot *b);
/* all[r*bytes .. ] = rank r's `mine`. Collective over the boot world. */
int coll_boot_allgather(coll_boot *b, void *all, const void *mine, size_t bytes, coll_err *e);
int coll_boot_barrier(coll_boot *b, coll_err *e);
void coll_boot_close(coll_boot *b);
/* Ends a failed run. Under MPI: MPI_Abort, which stops every rank (MPI_Finalize would wait for
 * a dead or stopped rank for ever); it does not return. Otherwise coll_boot_close. */
void coll_boot_abort(coll_boot *b);

/* ---- communicators ---- */
typedef enum { COLL_TCP, COLL_MPI, COLL_UCX, COLL_NCCL, COLL_NTRANSPORTS } coll_transport_kind;
const char *coll_transport_name(coll_transport_kind k);
int coll_transport_parse(const char *s, coll_transport_kind *out);
int coll_transport_built(coll_transport_kind k); /* compiled into this binary? */

typedef struct {
  coll_transport_kind transport;
  int timeout_ms;        /* every wait; default 60000 when 0 */
  int tcp_streams;       /* connections per peer (striping); default 1 when 0 */
  const char *tcp_bind;  /* address to listen on and advertise; NULL: the boot's own */
  const char *tcp_cc;    /* congestion control of the tcp sockets; NULL: COLL_TCP_CC_DEFAULT,
                            "system": the kernel's default (net.ipv4.tcp_congestion_control) */
  size_t chunk_bytes;    /* pipelining unit of the algorithms; 0: COLL_CHUNK_DEFAULT, or
                            COLL_CHUNK_UCX for ucx over shared memory or RDMA (rendezvous) */
  int no_peer_map;       /* ucx: coll_mem_alloc gives plain memory, peers never map it */
  int no_spin;           /* waits sleep at once instead of spinning first: the rank has other
                            work for its cores while it waits (training's backward); mpi polls
                            MPI_Test with sleeps in between */
  const struct coll_model *model; /* what `auto` picks by (copied); NULL: coll_model_default */
  const char *devices;   /* nccl: CUDA devices by local rank ("0,1,2,3"); NULL: local rank
                            modulo the device count */
  int has_intra;         /* hier's two phases inside a host over another transport: intra (a
                            second communicator, opened where the ranks span several hosts and
                            some host has several; host transports only), transport between */
  coll_transport_kind intra;
} coll_comm_opts;

/* reno: built into every kernel and allowed to every user. Pacing controls (bbr, a common
 * system default) pace even loopback and LAN links, which slows the all-reduce there
 * (docs/measurements.md). */
#define COLL_TCP_CC_DEFAULT "reno"
#define COLL_CHUNK_DEFAULT (256u * 1024u)
#define COLL_CHUNK_UCX (1024u * 1024u)

typedef struct coll_comm coll_comm;
int coll_comm_open(coll_comm **out, coll_boot *b, const coll_comm_opts *o, coll_err *e);
int coll_comm_rank(const coll_comm *c);
int coll_comm_size(const coll_comm *c);
const char *coll_comm_host(const coll_comm *c, int rank);
/* Ranks on this rank's host (itself included); with more than its cores, no transport spins. */
int coll_comm_local_size(const coll_comm *c);
/* 1 where this communicator's calls and the bootstrap's (coll_boot_allgather) go through one MPI
 * library initialised for one thread at a time (MPI_THREAD_SERIALIZED, the mpi transport under an
 * MPI bootstrap): the caller must not make them from two threads at once. */
int coll_comm_serial_with_boot(const coll_comm *c);
/* 1 where a waiting rank sleeps at once and never spins (tcp and ucx with more ranks than
 * cores, or no_spin): the host's busy CPU time during a call is then the call's own work. */
int coll_comm_sleeps(const coll_comm *c);
size_t coll_comm_chunk(const coll_comm *c); /* the pipelining unit in use */
/* What the transport runs on, e.g. "tcp:lo/reno" (interface/congestion control),
 * "ucx:posix", "mpi:ob1/tcp". */
const char *coll_comm_fabric(const coll_comm *c);
/* hier's transport inside hosts (coll_comm_opts.intra) as coll_comm_fabric says it, or NULL
 * where hier stays on the communicator's own. */
const char *coll_comm_intra_fabric(const coll_comm *c);
/* A byte count as a user types it: digits, then K, M or G (powers of two; also KiB, KB), into
 * *out. 0, or -1 where it is not one (or does not fit 64 bits). */
int coll_parse_size(const char *s, uint64_t *out);
/* A byte count as coll_parse_size reads it: "8M", "64K", "1G" where it is a whole number of
 * them, else plain digits. */
void coll_format_size(char *out, size_t cap, uint64_t bytes);
void coll_comm_close(coll_comm *c);
/* The run failed outside this communicator (a peer's death seen elsewhere, a failed step):
 * closing must not wait to say goodbye to peers that may be gone. */
void coll_comm_mark_failed(coll_comm *c);

/* Memory for buffers to be all-reduced on c. Collective: every rank calls it with the same
 * bytes, in the same order. On ucx (c's transport, or the one inside hosts, coll_comm_opts.intra),
 * when every rank can map the copies of the other ranks on its host (UCX's sysv/posix shared
 * memory), it is a UCX-allocated segment that those peers map (ucp_rkey_ptr): on one host the
 * ring then reduces straight from its neighbour's copy instead of receiving it, and across hosts
 * hier's phases inside each host read their peers' copies; the fabric then ends in "+rkey_ptr"
 * (and "+nt<size>" where FABENCH_RING_STREAM_BYTES has the ring stream its results from that
 * size). Otherwise it is plain 64-byte aligned memory. Ranks must pass the same place (region
 * and offset) of it to one call. Free before closing c. */
void *coll_mem_alloc(coll_comm *c, size_t bytes, coll_err *e);
void coll_mem_free(coll_comm *c, void *p);
/* Whether coll_mem_alloc on c may give memory that peers map (ucx, mapping not turned off). */
int coll_comm_maps(const coll_comm *c);

/* ---- device memory (the nccl transport: coll_mem_alloc gives GPU memory) ----
 * 0 when the transport can run on this machine, else -1 and why (nccl: no CUDA device). */
int coll_transport_usable(coll_transport_kind k, coll_err *e);
/* The CUDA device of c's buffers, or -1 when they are host memory. */
int coll_comm_device(const coll_comm *c);
/* Rank `rank`'s GPU as a PCI bus id ("0000:17:00.0"), or "" (host memory). */
const char *coll_comm_gpu(const coll_comm *c, int rank);
/* Copies bytes between host memory and c's (either way, or within); returns when done. */
int coll_mem_copy(coll_comm *c, void *dst, const void *src, size_t bytes, coll_err *e);
/* Device time (CUDA events on c's stream) from start to stop; stop waits for the work between
 * and gives seconds. Device communicators only. */
int coll_timer_start(coll_comm *c, coll_err *e);
int coll_timer_stop(coll_comm *c, double *sec, coll_err *e);
/* The GPU's copy ceilings, as nvbandwidth measures them: within its memory (D2D), from and to
 * pinned host memory (H2D, D2H), and to another GPU of this process (PEER: to CUDA device
 * `peer`), by the copy engines (cudaMemcpy) or, the _SM kinds, by a kernel of ours that loads
 * and stores 16 bytes a thread (pinned host memory read or written over PCIe by the SMs).
 * After two warm-up copies, iters copies of `bytes`, each timed with CUDA events, into
 * sec[0..iters); *bad gets the bytes of the copied data that differ from the source. */
typedef enum {
  COLL_COPY_D2D, COLL_COPY_H2D, COLL_COPY_D2H, COLL_COPY_PEER, COLL_COPY_D2D_SM, COLL_COPY_H2D_SM,
  COLL_COPY_D2H_SM
} coll_copy_kind;
int coll_copy_bench(coll_comm *c, coll_copy_kind k, int peer, size_t bytes, int iters, double *sec,
                    int64_t *bad, coll_err *e);

/* ---- all-reduce ---- */
/* hier: reduce-scatter inside each host, an all-reduce across hosts among the ranks holding the
 * same block (param: the algorithm that runs it), all-gather inside each host (algo_hier.c).
 * The flat algorithms but ps visit the ranks host by host (node-aware order): a ring crosses
 * each host boundary once each way. */
typedef enum {
  COLL_ALGO_RING, COLL_ALGO_RHD, COLL_ALGO_RD, COLL_ALGO_TREE, COLL_ALGO_DTREE,
  COLL_ALGO_PS, COLL_ALGO_NATIVE, COLL_ALGO_AUTO, COLL_ALGO_HIER,
  /* the other collectives' own (coll_colls_algo says which collective runs which) */
  COLL_ALGO_BRUCK, COLL_ALGO_CHAIN, COLL_ALGO_VDG, COLL_ALGO_PAIRWISE, COLL_ALGO_DIRECT, COLL_ALGO_LINEAR,
  COLL_NALGOS
} coll_algo_kind;
typedef struct {
  coll_algo_kind kind;
  int param; /* ps: number of servers (0 or 1: one); hier: the kind across hosts (ring, rhd, rd,
                tree or dtree; 0 is ring) */
} coll_algo;
/* "ring", "ps:4", "hier" (= "hier:ring"), "hier:rhd", ... */
int coll_algo_parse(const char *s, coll_algo *out);
/* Writes e.g. "ring", "ps:4" or "hier:ring". */
void coll_algo_format(char *out, size_t cap, coll_algo a);
/* Can this communicator run this algorithm? (native needs a library that has one.) */
int coll_algo_supported(const coll_comm *c, coll_algo a);

/* ---- the collectives sharded training uses: reduce-scatter, all-gather, broadcast, all-to-all
 * Rank r's block of a reduce-scatter or all-gather is elements [r count, (r+1) count) of the
 * whole vector. Every algorithm is correct for any rank count; one a rank count does not suit
 * (rhd and rd want a power of two) runs the ring instead, and *ran (may be NULL) says what ran.
 *   reduce-scatter: ring, rhd (recursive halving), hier, auto
 *   all-gather:     ring, rd (recursive doubling), bruck, hier, auto
 *   (hier: inside each host, then among the ranks of one local index across hosts; hosts of
 *   different rank counts run the ring)
 *   broadcast:      tree (binomial), chain (pipelined in the communicator's chunks), vdg
 *                   (scatter down the binomial tree, then the ring all-gather: van de Geijn),
 *                   hier (among one leader per host, the root leading its own, then inside each
 *                   host), auto
 *   all-to-all(v):  pairwise, linear (every peer's receive and send posted at once, up to a
 *                   window of peers in flight), bruck (all-to-all only: equal counts), hier
 *                   (what crosses hosts through one leader per host: gathered, exchanged
 *                   between hosts, handed out; the rest pairwise inside the host; any counts),
 *                   auto
 *   (the broadcast's and all-to-all's hier take hosts of any rank counts)
 *   every one:      direct (all-to-all only: equal counts): each rank reads what it needs from its
 *                   peers' copies in place, where every rank is on one host and passed the same
 *                   place of memory they map (coll_mem_alloc over ucx); elsewhere the ring (the
 *                   tree, pairwise) runs
 * and native where the transport's library has its own (mpi: MPI_Reduce_scatter_block,
 * MPI_Allgather, MPI_Bcast, MPI_Alltoallv; nccl: ncclReduceScatter, ncclAllGather,
 * ncclBroadcast, and ncclSend/ncclRecv in one group for the all-to-allv).
 * auto: the fastest by the communicator's cost model (coll_colls_time). The send and receive
 * buffers must not overlap. */
typedef enum { COLL_REDUCE_SCATTER, COLL_ALLGATHER, COLL_BCAST, COLL_ALLTOALL, COLL_NCOLLS } coll_kind;
/* Does collective k have algorithm a? */
int coll_colls_algo(coll_kind k, coll_algo a);
/* Can this communicator run collective k by algorithm a? Native only where the transport's
 * library has it (nccl: not where ranks share a GPU, which goes by CUDA IPC). A device
 * communicator runs every algorithm on its GPU buffers; direct there runs its fallback. */
int coll_colls_supported(const coll_comm *c, coll_kind k, coll_algo a);
/* One of collective k's algorithms by name ("ring", "bruck", ...); -1 where k has none such.
 * (coll_algo_parse takes all-reduce's only.) */
int coll_colls_algo_parse(coll_kind k, const char *s, coll_algo *out);
/* recvbuf (count elements) = block `rank` of every rank's sendbuf (size blocks) reduced. */
int coll_reduce_scatter(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                        coll_op op, coll_algo algo, coll_algo *ran, coll_err *e);
/* recvbuf (size blocks of count elements): block r = rank r's sendbuf. */
int coll_allgather(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                   coll_algo algo, coll_algo *ran, coll_err *e);
/* buf (count elements) = rank root's buf, on every rank. */
int coll_broadcast(coll_comm *c, void *buf, size_t count, coll_dtype dt, int root, coll_algo algo,
                   coll_algo *ran, coll_err *e);
/* recvbuf + rdispls[p] gets rcounts[p] elements from rank p, which sent them from its sendbuf +
 * sdispls[this rank] (its scounts[this rank] equal to rcounts[p]); counts may be 0. */
int coll_alltoallv(coll_comm *c, const void *sendbuf, const size_t *scounts, const size_t *sdispls,
                   void *recvbuf, const size_t *rcounts, const size_t *rdispls, coll_dtype dt,
                   coll_algo algo, coll_algo *ran, coll_err *e);
/* All-to-all of equal blocks: recvbuf block p (count elements) = block `rank` of rank p's
 * sendbuf (size blocks). */
int coll_alltoall(coll_comm *c, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                  coll_algo algo, coll_algo *ran, coll_err *e);

/* ---- the cost model: one fabric's alpha-beta-gamma parameters (results/ fits them) ----
 * What the formulas miss, learned from the rows they were fitted to: per algorithm and rank
 * count, ln(measured / formula) at the sizes fitted. coll_model_time interpolates it linearly in
 * log size between them and fades it to nothing over one octave beyond either end; it applies
 * at the pipelining unit it was measured with, and nowhere else (other rank counts, other
 * algorithms: the formulas alone). */
#define COLL_MODEL_CURVES 32
#define COLL_MODEL_POINTS 32
typedef struct {
  coll_algo algo;
  int ranks, n;
  float lg[COLL_MODEL_POINTS]; /* log2 of the size, increasing */
  float ln[COLL_MODEL_POINTS]; /* ln(measured / formula) at that size */
} coll_model_curve;

/* The all-reduce formulas per algorithm are documented in algo_auto.c; `auto` picks the
 * cheapest of ring, rhd, rd, tree and dtree under the communicator's model (the ring on
 * memory every rank maps is chosen from 128 KiB whatever the model says), but hier:ring where
 * the ranks span several hosts and some host has more than one. */
typedef struct coll_model {
  double alpha; /* seconds per message (start-up) */
  double beta;  /* seconds per byte on one link */
  double gamma; /* seconds per byte reduced, on a core of its own */
  /* Fitted too, 0 where the rows cannot tell them apart (see algo_auto.c): */
  double beta_cpu; /* CPU seconds per byte a rank sends (kernel copies, shared memory, both
                      ends): a host sends its ranks' bytes with at most its cores, and a call
                      is bound by the slower of that and the busiest link; 0: no such bound */
  /* What the fabric is, not fitted: */
  double cores;       /* CPU cores of a node: a host's, or an emulated node's share of the machine
                         it shares with the other emulated nodes (a fraction where they outnumber
                         them: res_node_cores); 0: unknown (no sharing modelled) */
  int hosts;          /* hosts the ranks spread over evenly (0: one) */
  int mapped;         /* ranks map each other's buffers: the ring reads its neighbour's
                         partial sums in place from 16 KiB (ucx on one host) */
  double burst;      /* bytes a link banks while it idles: an emulated link's shaper bucket (0:
                         a real link, which banks nothing) */
  int red_hidden;     /* the link banks the pauses of a pipelined reduction (a shaper's bucket):
                         every algorithm reduces in pieces as they arrive, at no cost to the
                         call */
  /* what the formulas miss (above); ncurves 0: the formulas alone */
  size_t learned_chunk; /* the pipelining unit the curves were measured with (0: the default) */
  int ncurves;
  coll_model_curve curve[COLL_MODEL_CURVES];
} coll_model;
/* Order-of-magnitude defaults of a transport kind, for a communicator that was given no fit. */
void coll_model_default(coll_model *m, coll_transport_kind kind);
/* Modelled seconds of one all-reduce of `bytes` per rank on p ranks, with pipelining unit
 * chunk_bytes (0: COLL_CHUNK_DEFAULT). 0 for p < 2 or no bytes; INFINITY for native, auto
 * and hier (no formula here: results/ prices hier from two fabrics). Linear in alpha, beta and gamma
 * for fixed cores, hosts, mapped and ratio beta_cpu / beta (the fit relies on it), times what
 * the formulas miss where the model learned it (coll_model_learned). */
double coll_model_time(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes);
/* The factor coll_model_time puts on the formulas' time for what they miss (1: nothing learned
 * for this algorithm, rank count, size and pipelining unit). */
double coll_model_learned(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes);
/* Did m learn algorithm a on p ranks at exactly this size (and pipelining unit)? There its time
 * is the measurement it learned from, not a prediction. */
int coll_model_learned_at(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes);
/* What one call asks of a host's CPUs under the formulas: the bytes its ranks send (S / hosts)
 * and the bytes they reduce (R at each reducing rank of the host). */
void coll_model_host_bytes(const coll_model *m, coll_algo a, int p, size_t bytes, size_t chunk_bytes,
                           double *sent, double *reduced);
/* The cheapest of ring, rhd, rd, tree, dtree under m (ring on a tie or for p < 2). */
coll_algo coll_model_pick(const coll_model *m, int p, size_t bytes, size_t chunk_bytes);
/* The other collectives' formulas (algo_colls_model.c): seconds for collective k by algorithm a
 * on p ranks, bytes being the whole vector (reduce-scatter, all-gather), the message
 * (broadcast) or what one rank sends in all (all-to-all); alpha, beta and gamma only (nothing
 * learned yet; hier by level, on m->hosts hosts). INFINITY for native and for what k does not
 * have (reduce-scatter's and all-gather's hier). */
double coll_colls_time(const coll_model *m, coll_kind k, coll_algo a, int p, size_t bytes, size_t chunk_bytes);
/* The fastest of k's algorithms by those formulas (auto). */
coll_algo coll_colls_pick(const coll_model *m, coll_kind k, int p, size_t bytes, size_t chunk_bytes);
/* The model a communicator's `auto` uses. */
const coll_model *coll_comm_model(const coll_comm *c);

/* In place on count elements; every rank passes the same count, dtype, op and algo.
 * `ran` (may be NULL) receives the algorithm actually run (auto picks one). */
int coll_allreduce(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op,
                   coll_algo algo, coll_algo *ran, coll_err *e);
/* An all-reduce inside groups of ranks, disjoint groups at once (pairwise and per-node tests):
 * every rank of c calls it, each with its own group (world ranks, listed alike by every member,
 * this rank among them) or n 0 for a rank in no group. Flat algorithms only (ring, rhd, rd,
 * tree, dtree, ps); messages only (no mapped memory). */
int coll_allreduce_group(coll_comm *c, const int *group, int n, void *buf, size_t count, coll_dtype dt,
                         coll_op op, coll_algo algo, coll_err *e);
int coll_barrier(coll_comm *c, coll_err *e);
int coll_bcast(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e);

/* ---- point to point (the p2p benchmark, and the algorithms) ---- */
/* A request lives in caller memory that must stay put until it completes. */
typedef union coll_req {
  void *align_p;
  uint64_t align_u;
  unsigned char opaque[128];
} coll_req;
/* Messages between one pair of ranks are matched in the order they were posted; the tag is
 * checked, not searched for. */
int coll_isend(coll_comm *c, int peer, const void *buf, size_t bytes, uint32_t tag, coll_req *r,
               coll_err *e);
int coll_irecv(coll_comm *c, int peer, void *buf, size_t bytes, uint32_t tag, coll_req *r,
               coll_err *e);
/* Waits for all n requests, within the communicator's timeout. */
int coll_waitall(coll_comm *c, coll_req *r, int n, coll_err *e);

/* The communication libraries built in, with versions, e.g. "Open MPI v4.1.4; UCX 1.13.1". */
void coll_versions(char *out, size_t cap);

/* ---- verification: seeded integer-valued inputs whose reductions are exact in every dtype ----
 * Values lie in [-4, 4] (sum, min, max) or {-2, -1, 1, 2} (prod), so sums over up to 64 ranks
 * and products over up to 8 ranks are exact even in f16 and bf16. */
void coll_pattern_fill(void *buf, size_t count, coll_dtype dt, coll_op op, int rank, uint64_t seed);
/* The value rank `rank` put at element i. */
double coll_pattern_value(size_t i, coll_dtype dt, coll_op op, int rank, uint64_t seed);
/* Counts elements of buf that differ from the exact reduction over ranks 0..nranks-1;
 * *first_bad (may be NULL) gets the first such index. */
size_t coll_pattern_check(const void *buf, size_t count, coll_dtype dt, coll_op op, int nranks,
                          uint64_t seed, size_t *first_bad);
/* The same for elements offset.. of the whole vector (a reduce-scatter's block). */
size_t coll_pattern_check_at(const void *buf, size_t count, coll_dtype dt, coll_op op, int nranks,
                             uint64_t seed, size_t offset, size_t *first_bad);
/* Counts elements of buf that differ from what rank `rank` put at offset.. (a copy of its data:
 * all-gather, broadcast, all-to-all). */
size_t coll_pattern_check_rank(const void *buf, size_t count, coll_dtype dt, coll_op op, int rank,
                               uint64_t seed, size_t offset, size_t *first_bad);
/* Element i of buf as a double. */
double coll_elem_get(const void *buf, size_t i, coll_dtype dt);

#endif
