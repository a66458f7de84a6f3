/* collectives: private interfaces between the communicator, transports and algorithms. */
#ifndef FABENCH_COLL_INTERNAL_H
#define FABENCH_COLL_INTERNAL_H

#include "coll.h"

#include <stdarg.h>
#include <stdbool.h>
#include <string.h>

/* Formats the error once; returns -1 so callers can `return coll_fail(e, ...)`. */
int coll_fail(coll_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- transports ----
 * A transport moves bytes between ranks. Requests complete in post order per (peer, direction);
 * a receive must be posted with the same size and tag as the matching send, and a mismatch is
 * a protocol error. Progress happens inside test/waitall, for every outstanding request of the
 * transport, not only those waited on (so a pending send never stalls a waited receive). */
typedef struct coll_transport coll_transport;

typedef struct {
  const char *name;
  int (*isend)(coll_transport *t, int peer, const void *buf, size_t bytes, uint32_t tag,
               coll_req *r, coll_err *e);
  int (*irecv)(coll_transport *t, int peer, void *buf, size_t bytes, uint32_t tag, coll_req *r,
               coll_err *e);
  /* Progresses everything once, without blocking; *done = 1 when r has completed. */
  int (*test)(coll_transport *t, coll_req *r, int *done, coll_err *e);
  /* Blocks until all n complete or timeout_ms passes (an error naming the peer rank and host). */
  int (*waitall)(coll_transport *t, coll_req *r, int n, int timeout_ms, coll_err *e);
  /* Memory that peers on this host can read in place (collective: every rank, same bytes, same
   * order), or NULL ops: plain memory. mem_free takes what mem_alloc gave. */
  void *(*mem_alloc)(coll_transport *t, size_t bytes, coll_err *e);
  void (*mem_free)(coll_transport *t, void *p);
  /* Rank `peer`'s copy of [buf, buf + bytes) of a mem_alloc'd region, mapped into this process,
   * or NULL (not such memory, a peer on another host, or not every rank maps every rank on its
   * host). where[0..1] gets the region's number and the offset, so ranks can check that they
   * pass the same place. */
  const void *(*peer_ptr)(coll_transport *t, int peer, const void *buf, size_t bytes,
                          uint64_t where[2]);
  /* The library's own all-reduce, or NULL. */
  int (*allreduce)(coll_transport *t, void *buf, size_t count, coll_dtype dt, coll_op op,
                   coll_err *e);
  /* The library's own reduce-scatter, all-gather, broadcast and all-to-allv, as coll.h's
   * coll_reduce_scatter and the others define them, or NULL. */
  int (*reduce_scatter)(coll_transport *t, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                        coll_op op, coll_err *e);
  int (*allgather)(coll_transport *t, const void *sendbuf, void *recvbuf, size_t count, coll_dtype dt,
                   coll_err *e);
  int (*bcast)(coll_transport *t, void *buf, size_t count, coll_dtype dt, int root, coll_err *e);
  int (*alltoallv)(coll_transport *t, const void *sendbuf, const size_t *scounts, const size_t *sdispls,
                   void *recvbuf, const size_t *rcounts, const size_t *rdispls, coll_dtype dt, coll_err *e);
  /* Pushes out what sends reported complete left in the library's buffers (ucx), before this
   * rank waits on another transport and makes no progress on this one: a peer may be waiting
   * for those bytes. NULL: a completed send is out. */
  int (*flush)(coll_transport *t, int timeout_ms, coll_err *e);
  void (*close)(coll_transport *t);
  /* Device transports (nccl; NULL elsewhere): buffers live in GPU memory, and these stand in
   * for coll_reduce, memcpy and the scratch allocator, ordered on the transport's stream. A
   * failed launch is kept and returned by `finish`, which ends every all-reduce. */
  void (*dev_reduce)(coll_transport *t, void *inout, const void *in, size_t count, coll_dtype dt,
                     coll_op op);
  void (*dev_copy)(coll_transport *t, void *dst, const void *src, size_t bytes);
  /* dev_reduce whose result also goes to out2 (which may be `in`); with dev_reduce or neither. */
  void (*dev_reduce2)(coll_transport *t, void *inout, void *out2, const void *in, size_t count,
                      coll_dtype dt, coll_op op);
  void *(*dev_alloc)(coll_transport *t, size_t bytes, coll_err *e);
  void (*dev_free)(coll_transport *t, void *p);
  /* Marks (where base.marks > 0): dev_mark records mark `slot` (< base.marks) after the work
   * queued on this rank's stream so far, and dev_after orders this rank's later work after rank
   * `peer`'s (a ring neighbour's) last recording of its mark `slot`, on the GPU: a token saying "marked" then hands
   * work on without the host waiting for it. Without marks every dev_reduce and dev_copy has
   * finished when it returns. */
  int (*dev_mark)(coll_transport *t, int slot, coll_err *e);
  int (*dev_after)(coll_transport *t, int peer, int slot, coll_err *e);
  int (*finish)(coll_transport *t, coll_err *e);
} coll_transport_ops;

/* Every transport embeds this first. */
struct coll_transport {
  const coll_transport_ops *ops;
  int rank, size;
  const coll_comm *comm; /* for peer host names in errors */
  char fabric[128];      /* what it runs on, e.g. "tcp:lo" */
  int on_device, device; /* buffers in GPU memory, on this CUDA device (0: host memory) */
  char (*gpus)[32];      /* device transports: each rank's GPU, as a PCI bus id; else NULL */
  int grouped;           /* sends and receives move only as one group at each wait (NCCL's
                            ncclGroupStart/End): algorithms must post a step's messages and
                            wait them together; the ring then goes step by step */
  int rendezvous;        /* a large message waits for a handshake with its receiver (ucx over
                            shared memory or RDMA): the algorithms' chunks are then best large
                            (COLL_CHUNK_UCX) and the ring's ramp of small first chunks costs */
  int marks;             /* dev_mark's slots (0: none); set once mapped memory exists */
  int sleeps;            /* a waiting rank sleeps at once, never spins: the host's busy time
                            during a call is the call's work (coll_comm_sleeps) */
  int maps;              /* mem_alloc may give memory that peers on this host map (peer_ptr) */
};

/* Where this rank's transports listen and what they advertise: FABENCH_BIND_ADDR, else the
 * local address of the bootstrap connection, else 127.0.0.1 when every rank is on this host,
 * else this host's first non-loopback IPv4 address. */
int coll_boot_advertise_addr(const coll_boot *b, char *out, size_t cap, coll_err *e);

/* The environment rendezvous's two ends of one connection (boot.c), apart for tests and fuzzing.
 * admit (rank 0): reads a hello from fd and accepts it (1: fd is kept as that rank's) or
 * rejects it (0: fd is answered and closed). join (other ranks): presents this rank on fd to
 * rank 0 and receives every rank's host. */
int coll_boot_admit(coll_boot *b, int fd, const char *tok, double deadline);
int coll_boot_join(coll_boot *b, int fd, const char *tok, double deadline, coll_err *e);
/* How long rank 0's rendezvous may sleep in poll (ms, >= 0, not past deadline but for
 * rounding up) until wake, the first of its deadlines; times in seconds (coll_sock_now). */
int coll_boot_wait_ms(double now, double wake, double deadline);
/* A bootstrap over connections made elsewhere: rank 0 holds fds[r] for each peer r, the others
 * fds[0] (fds may be NULL: none yet); it takes and closes them. Hosts are "host<r>". */
int coll_boot_from_fds(coll_boot **out, int rank, int size, const int *fds, int timeout_ms,
                       coll_err *e);

/* Around a blocking MPI call (what: its name, a literal): the MPI bootstrap's watchdog aborts
 * the job when the call outlasts the timeout. No-ops for other bootstraps. */
void coll_boot_mpi_begin(coll_boot *b, const char *what);
void coll_boot_mpi_end(coll_boot *b);

/* Constructors: connect to every peer, exchanging addresses through the boot's all-gather. */
int coll_tcp_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e);
int coll_mpi_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e);
int coll_ucx_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                  coll_err *e);
/* The tcp transport over connections made elsewhere (tests and fuzzing): fds[peer * streams + s],
 * -1 for this rank's own entries; it takes and closes them. No spinning. */
int coll_tcp_from_fds(coll_transport **out, const coll_comm *c, int streams, const int *fds,
                      coll_err *e);
/* The tcp transport's listening side (apart for tests): accepts on lfd the connections of the
 * ranks above `rank` and reads every one's hello at once, each into fds[r * streams + s] (the
 * entries still -1 are the ones waited for). A connection whose hello is not whole within
 * hello_s seconds, or is wrong, or repeats a (rank, stream) already seen, is closed and the wait
 * goes on. 0 when every one has come; -1 with the cause in err at the deadline (the fds found
 * stay). Times are coll_sock_now() seconds. */
int coll_tcp_accept_hellos(int *fds, int lfd, int rank, int size, int streams, double deadline,
                           double hello_s, char *err, size_t cap);
int coll_nccl_open(coll_transport **out, coll_comm *c, coll_boot *b, const coll_comm_opts *o,
                   coll_err *e);
/* transport_nccl.c: is there a CUDA device; the library's version for coll_versions (returns
 * the characters written); copies on the device's stream (waits); the stream's event timer
 * (stop: seconds since start, waited for). */
int coll_nccl_usable(coll_err *e);
size_t coll_nccl_version(char *out, size_t cap, int sep);
int coll_nccl_copy_wait(coll_transport *t, void *dst, const void *src, size_t bytes, coll_err *e);
int coll_nccl_timer(coll_transport *t, int stop, double *sec, coll_err *e);
int coll_nccl_copy_bench(coll_transport *t, coll_copy_kind k, int peer, size_t bytes, int iters,
                         double *sec, int64_t *bad, coll_err *e);

/* linear (all-to-all, broadcast): peers in flight each way at most (algo_a2a.c, algo_bcast.c). */
#define COLL_LINEAR_WINDOW 8
/* The pipelined ring's sub-chunks in flight each way (algo_ring.c's ring_flow). */
#define COLL_RING_SLOTS 4
/* The mapped ring on a GPU goes in pieces of a block, one per COLL_RING_PIECE_BYTES, at most
 * COLL_RING_PIECES_MAX (algo_ring.c's ring_pieces); the marks a rank needs follow from it. */
#define COLL_RING_PIECE_BYTES (64u << 20)
#define COLL_RING_PIECES_MAX 8
/* auto runs the ring from this size on when the buffer is mapped (algo_auto.c). */
#define COLL_AUTO_MAPPED_RING (128u * 1024u)

/* ---- the communicator ---- */
#define COLL_HOST_MAX 64
struct coll_comm {
  int rank, size;
  coll_transport_kind kind;
  coll_transport *tp;
  int timeout_ms;
  size_t chunk_bytes;
  coll_model model;    /* auto's parameters (fixed once open) */
  size_t auto_bytes;   /* auto's last size and its pick: a call repeats its size, and the pick */
  coll_algo auto_algo; /* walks the trees' schedule (costly at many ranks); auto_bytes 0: none */
  int ring_ramp;       /* ring: sub-chunks chunk>>ramp .. chunk>>1 lead each block (algo_ring.c) */
  size_t ring_stream_bytes; /* mapped ring: streaming stores from this buffer size on, where
                               FABENCH_RING_STREAM_BYTES asks (SIZE_MAX: never; the fabric then
                               ends in "+nt<size>") */
  int ring_pieces;          /* mapped ring: pieces a step (0: its choice; FABENCH_RING_PIECES) */
  int local_size;      /* ranks on this rank's host */
  /* The layout (algo_plan.h, coll_layout_plan): hosts numbered by first appearance in rank
   * order; node_order[start[h] .. start[h+1]) are host h's ranks in rank order. */
  int nhosts, lmax;    /* hosts; most ranks on one host */
  struct coll_comm *intra; /* hier's phases inside hosts, on another transport (NULL: this one) */
  int *node_order, *host_start;
  int node_pos;        /* this rank's place in node_order */
  int node_host;       /* this rank's host: node_order[host_start[node_host] ..] holds it */
  int node_identity;   /* node_order is 0, 1, ..., size-1: the flat algorithms need no view */
  int *group;          /* nhosts entries for hier's groups across hosts */
  /* The group view (coll_view_set): while `view` is set, rank and size are this rank's index
   * in a group of ranks and the group's size, and coll_isend/coll_irecv take group indices,
   * view[i] being the world rank of index i. world_rank and world_size stay the world's. */
  const int *view;
  int world_rank, world_size;
  int oversubscribed;  /* more ranks than cores on this host, or no_spin: transports must not spin */
  int serial_with_boot; /* mpi over an MPI bootstrap: one library, one thread at a time */
  char (*hosts)[COLL_HOST_MAX]; /* size entries */
  void *scratch;                /* grows on demand; owned by the communicator */
  size_t scratch_bytes;
  void *scratch2;
  size_t scratch2_bytes;
  uint32_t seq; /* per-call tag base, so stale messages are caught */
  int failed;   /* coll_comm_mark_failed: the transport closes without talking to its peers */
  coll_req *reqs; /* request array reused across calls */
  size_t reqs_cap;
};

/* An array of at least n requests owned by the communicator (valid until the next call). */
coll_req *coll_reqs(coll_comm *c, size_t n, coll_err *e);

/* Scratch space of at least `bytes`, reused across calls (64-byte aligned). which: 0 or 1. */
void *coll_scratch(coll_comm *c, int which, size_t bytes, coll_err *e);

/* coll_reduce and memcpy with non-temporal stores: the result goes to memory rather than
 * staying dirty in this core's cache (reduce.c). */
void coll_reduce_stream(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op);
void coll_copy_stream(void *dst, const void *src, size_t bytes);
/* inout = inout (op) in, written to out2 as well (which may be `in`); streamed where `stream`. */
void coll_reduce2(void *inout, void *out2, const void *in, size_t count, coll_dtype dt, coll_op op, int stream);

/* inout = in (op) inout: the result where the right operand was (reduce.c). */
void coll_reduce_rev(void *inout, const void *in, size_t count, coll_dtype dt, coll_op op);

/* The transport's peer_ptr, or NULL when it has none, in a group view and across several
 * hosts: the mapped ring's tokens and a device's marks belong to the world's ring on one host,
 * so a group or a cluster goes by messages. */
const void *coll_peer_ptr(coll_comm *c, int peer, const void *buf, size_t bytes, uint64_t where[2]);
/* Group member `peer`'s copy of host memory buf (as coll_peer_ptr) where it is on this rank's
 * host and mapped, in a group view too; NULL otherwise (device memory included). hier's phases
 * inside a host read their peers' vectors through it. */
const void *coll_host_ptr(coll_comm *c, int peer, const void *buf, size_t bytes, uint64_t where[2]);

/* Runs the algorithms on a group of ranks as if it were the whole communicator: map[i] is the
 * world rank of group index i (n of them; this rank is map[idx]). The communicator's rank and
 * size become idx and n until coll_view_clear. Views do not nest: map holds world ranks. Every
 * member must enter the same group with the same map, and with a c->seq of its own (coll_tag). */
void coll_view_set(coll_comm *c, const int *map, int n, int idx);
void coll_view_clear(coll_comm *c);

/* coll_reduce and memcpy on the communicator's memory (the device's, for nccl). */
static inline void coll_creduce(coll_comm *c, void *inout, const void *in, size_t count,
                                coll_dtype dt, coll_op op) {
  if (c->tp->ops->dev_reduce)
    c->tp->ops->dev_reduce(c->tp, inout, in, count, dt, op);
  else
    coll_reduce(inout, in, count, dt, op);
}
static inline void coll_ccopy(coll_comm *c, void *dst, const void *src, size_t bytes) {
  if (c->tp->ops->dev_copy)
    c->tp->ops->dev_copy(c->tp, dst, src, bytes);
  else
    memcpy(dst, src, bytes);
}
/* coll_reduce2 on the communicator's memory (`stream` only on the host's). */
static inline void coll_creduce2(coll_comm *c, void *inout, void *out2, const void *in, size_t count,
                                 coll_dtype dt, coll_op op, int stream) {
  if (c->tp->ops->dev_reduce2)
    c->tp->ops->dev_reduce2(c->tp, inout, out2, in, count, dt, op);
  else
    coll_reduce2(inout, out2, in, count, dt, op, stream);
}
/* inout = in (op) inout, where the lower rank's vector must come first so that partners agree bit
 * for bit; `in` may be overwritten (the device's kernel writes the result there as well). */
static inline void coll_creduce_rev(coll_comm *c, void *inout, void *in, size_t count, coll_dtype dt,
                                    coll_op op) {
  if (c->tp->ops->dev_reduce2)
    c->tp->ops->dev_reduce2(c->tp, in, inout, inout, count, dt, op);
  else
    coll_reduce_rev(inout, in, count, dt, op);
}

/* Tag for step `step` of the current collective call (c->seq is advanced per call). */
static inline uint32_t coll_tag(const coll_comm *c, uint32_t step) {
  return ((c->seq & 0xffffu) << 16) | (step & 0xffffu);
}

/* ---- algorithms: in place on count elements, written only against coll_isend/irecv/waitall,
 * coll_reduce and (the ring, on mapped memory) coll_peer_ptr. Every one handles any size >= 1
 * and any count (0, < size, odd). ---- */
typedef int (*coll_algo_fn)(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op,
                            int param, coll_err *e);
int coll_ar_ring(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e);
int coll_ar_rhd(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                coll_err *e);
int coll_ar_rd(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
               coll_err *e);
int coll_ar_tree(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e);
int coll_ar_dtree(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                  coll_err *e);
int coll_ar_ps(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
               coll_err *e);
/* param: the kind across hosts (coll_algo's). Sets c->seq itself (several sub-steps). */
int coll_ar_hier(coll_comm *c, void *buf, size_t count, coll_dtype dt, coll_op op, int param,
                 coll_err *e);
/* The algorithm of a flat kind (ring, rhd, rd, tree, dtree, ps), or NULL (coll.c). */
coll_algo_fn coll_algo_flat(coll_algo_kind k);
/* auto: returns the algorithm it would run for this size on buf (the ring on a mapped one). */
coll_algo coll_auto_choose(coll_comm *c, const void *buf, size_t bytes);

/* The other collectives' entry points (algo_rsag.c, algo_bcast.c, algo_a2a.c): begin checks the
 * dtype and that k has algorithm a (not auto: resolved before) and takes the call's seq; end
 * lets a device transport finish, keeping the first error. */
int coll_colls_begin(coll_comm *c, coll_kind k, coll_algo a, coll_dtype dt, coll_err *e);
int coll_colls_end(coll_comm *c, int rc, coll_err *e);
/* The binomial broadcast of `bytes` from root under the call's seq (coll_bcast, coll_broadcast). */
int coll_bcast_tree(coll_comm *c, void *buf, size_t bytes, int root, coll_err *e);

/* Split count elements into `parts` nearly equal blocks: block i is [off, off+len). */
static inline void coll_block(size_t count, int parts, int i, size_t *off, size_t *len) {
  size_t base = count / (size_t)parts, rem = count % (size_t)parts;
  size_t ui = (size_t)i;
  *off = ui * base + (ui < rem ? ui : rem);
  *len = base + (ui < rem ? 1 : 0);
}

#endif
