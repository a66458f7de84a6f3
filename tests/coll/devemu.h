/* A device transport emulated on the host, for testing the algorithms' device paths without a
 * GPU: a tcp communicator is given the nccl transport's device operations (coll_internal.h:
 * dev_copy, dev_reduce, dev_reduce2, dev_alloc, dev_free, finish) and on_device, and its
 * "device memory" is host memory that is mapped PROT_NONE except while one of those operations
 * (or a message's staging copy) runs, so any direct host access of it by an algorithm (a
 * memcpy, a reduction on the host, a read through a pointer) is a SIGSEGV, reported as such.
 * Messages of device memory cross through host copies (as CUDA IPC's do); grouped, they are
 * queued and launched together at the next wait, which returns only when every launched
 * message is done (as an NCCL group on the stream): device data moves only at waits, in the
 * order NCCL's stream gives it. A grouped send is done only once its receiver says the data is
 * in (a word over a second transport), and a group's messages progress together, so a group
 * that NCCL would hold for ever for want of the peer's matching receive (a send-only group on
 * both sides of a pair, a step's messages not posted together) times out here.
 * Test-only: single-threaded, one communicator per process. */
#ifndef FABENCH_TEST_DEVEMU_H
#define FABENCH_TEST_DEVEMU_H

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "coll_internal.h"

#define DEVEMU_REGIONS 64

typedef struct devemu_op {
  coll_req inner; /* the tcp transport keeps a pointer to it */
  void *bounce;   /* host copy of device data, or NULL (a host message) */
  void *dev;      /* a device receive: the bounce goes here once in */
  const void *src; /* a queued device send: staged when launched */
  size_t bytes;
  int peer, is_send, posted, done;
  int rdv;                  /* grouped device message: done only with the receiver's word */
  int data_done, ack_done;  /* the data is through; the word came back (send) or went (receive) */
  coll_req ack;             /* the word, on the second transport */
  unsigned char ackb;
  uint32_t tag;
} devemu_op;

static struct {
  coll_transport_ops ops;
  const coll_transport_ops *orig;
  coll_transport *ack; /* a second tcp transport: receivers' words that their data is in */
  int grouped;
  struct {
    void *base;
    size_t len;
  } reg[DEVEMU_REGIONS];
  devemu_op **live; /* launched (or queued) and not yet completed */
  int nlive, caplive;
} devemu_g;

static void devemu_segv(int sig) {
  (void)sig;
  static const char m[] = "devemu: the host touched device memory (SIGSEGV)\n";
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  _exit(4);
}

/* Every device region readable and writable (1) or not (0). */
static void devemu_open(int on) {
  for (int i = 0; i < DEVEMU_REGIONS; i++)
    if (devemu_g.reg[i].base) mprotect(devemu_g.reg[i].base, devemu_g.reg[i].len, on ? PROT_READ | PROT_WRITE : PROT_NONE);
}

static int devemu_is_dev(const void *p) {
  const char *q = p;
  for (int i = 0; i < DEVEMU_REGIONS; i++) {
    const char *b = devemu_g.reg[i].base;
    if (b && q >= b && q < b + devemu_g.reg[i].len) return 1;
  }
  return 0;
}

static void *devemu_alloc(size_t bytes) {
  long pg = sysconf(_SC_PAGESIZE);
  size_t len = ((bytes ? bytes : 1) + (size_t)pg - 1) / (size_t)pg * (size_t)pg;
  for (int i = 0; i < DEVEMU_REGIONS; i++) {
    if (devemu_g.reg[i].base) continue;
    void *p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    devemu_g.reg[i].base = p;
    devemu_g.reg[i].len = len;
    return p;
  }
  return NULL;
}

static void devemu_free(void *p) {
  for (int i = 0; p && i < DEVEMU_REGIONS; i++)
    if (devemu_g.reg[i].base == p) {
      munmap(p, devemu_g.reg[i].len);
      devemu_g.reg[i].base = NULL;
      return;
    }
}

/* Host <-> device copies of the test itself (coll_mem_copy's part). */
static void devemu_copy(void *dst, const void *src, size_t bytes) {
  devemu_open(1);
  memcpy(dst, src, bytes);
  devemu_open(0);
}

static void devemu_dev_copy(coll_transport *t, void *dst, const void *src, size_t bytes) {
  (void)t;
  devemu_open(1);
  memmove(dst, src, bytes);
  devemu_open(0);
}
static void devemu_dev_reduce(coll_transport *t, void *inout, const void *in, size_t count, coll_dtype dt, coll_op op) {
  (void)t;
  devemu_open(1);
  coll_reduce(inout, in, count, dt, op);
  devemu_open(0);
}
static void devemu_dev_reduce2(coll_transport *t, void *inout, void *out2, const void *in, size_t count, coll_dtype dt,
                               coll_op op) {
  (void)t;
  devemu_open(1);
  coll_reduce2(inout, out2, in, count, dt, op, 0);
  devemu_open(0);
}
static void *devemu_dev_alloc(coll_transport *t, size_t bytes, coll_err *e) {
  void *p = devemu_alloc(bytes);
  if (!p) coll_fail(e, "rank %d: devemu: no region for %zu bytes", t->rank, bytes);
  return p;
}
static void devemu_dev_free(coll_transport *t, void *p) {
  (void)t;
  devemu_free(p);
}

#define DEVEMU_ACK 0xacu

/* Launches a queued message on the tcp transport (a device send staged now: in stream order).
 * A grouped device send also waits for its receiver's word that the data is in (rendezvous). */
static int devemu_launch(coll_transport *t, devemu_op *o, coll_err *e) {
  if (o->posted) return 0;
  o->posted = 1;
  if (o->bounce && o->is_send) devemu_copy(o->bounce, o->src, o->bytes);
  void *buf = o->bounce ? o->bounce : o->dev ? o->dev : (void *)o->src;
  int rc = o->is_send ? devemu_g.orig->isend(t, o->peer, buf, o->bytes, o->tag, &o->inner, e)
                      : devemu_g.orig->irecv(t, o->peer, buf, o->bytes, o->tag, &o->inner, e);
  if (rc == 0 && o->rdv && o->is_send)
    rc = devemu_g.ack->ops->irecv(devemu_g.ack, o->peer, &o->ackb, 1, DEVEMU_ACK, &o->ack, e);
  return rc;
}

/* One round of progress on o; o->done once its data is through (a device receive landed) and,
 * grouped, the receiver's word has come back or gone out. */
static int devemu_progress(coll_transport *t, devemu_op *o, coll_err *e) {
  int d = 0;
  if (!o->data_done) {
    if (devemu_g.orig->test(t, &o->inner, &d, e) != 0) return -1;
    if (!d) return 0;
    o->data_done = 1;
    if (o->bounce && !o->is_send) devemu_copy(o->dev, o->bounce, o->bytes);
    if (o->rdv && !o->is_send && devemu_g.ack->ops->isend(devemu_g.ack, o->peer, &o->ackb, 1, DEVEMU_ACK, &o->ack, e))
      return -1;
  }
  if (o->rdv && !o->ack_done) {
    if (devemu_g.ack->ops->test(devemu_g.ack, &o->ack, &d, e) != 0) return -1;
    o->ack_done = d;
  }
  if (o->data_done && (!o->rdv || o->ack_done)) {
    o->done = 1;
    for (int i = 0; i < devemu_g.nlive; i++)
      if (devemu_g.live[i] == o) {
        devemu_g.live[i] = devemu_g.live[--devemu_g.nlive];
        break;
      }
  }
  return 0;
}

static int devemu_post(coll_transport *t, int peer, const void *buf, size_t bytes, uint32_t tag, coll_req *r,
                       int is_send, coll_err *e) {
  devemu_op *o = calloc(1, sizeof *o);
  if (!o || (devemu_g.nlive == devemu_g.caplive &&
             !(devemu_g.live = realloc(devemu_g.live, (size_t)(devemu_g.caplive += 64) * sizeof *devemu_g.live)))) {
    free(o);
    return coll_fail(e, "rank %d: devemu: out of memory", t->rank);
  }
  int dev = bytes > 0 && devemu_is_dev(buf);
  *o = (devemu_op){.bytes = bytes, .peer = peer, .is_send = is_send, .tag = tag, .src = buf,
                   .rdv = dev && devemu_g.grouped};
  if (dev && !(o->bounce = malloc(bytes))) {
    free(o);
    return coll_fail(e, "rank %d: devemu: out of memory", t->rank);
  }
  if (!is_send) o->dev = (void *)buf, o->src = NULL;
  memcpy(r, &o, sizeof o);
  devemu_g.live[devemu_g.nlive++] = o;
  /* host messages go at once (NCCL's transport sends them over tcp beside the groups) */
  return o->rdv ? 0 : devemu_launch(t, o, e);
}

static int devemu_isend(coll_transport *t, int peer, const void *buf, size_t bytes, uint32_t tag, coll_req *r,
                        coll_err *e) {
  return devemu_post(t, peer, buf, bytes, tag, r, 1, e);
}
static int devemu_irecv(coll_transport *t, int peer, void *buf, size_t bytes, uint32_t tag, coll_req *r,
                        coll_err *e) {
  return devemu_post(t, peer, buf, bytes, tag, r, 0, e);
}

static int devemu_launch_all(coll_transport *t, coll_err *e) {
  for (int i = 0; i < devemu_g.nlive; i++)
    if (devemu_launch(t, devemu_g.live[i], e) != 0) return -1;
  return 0;
}

/* Progress on every launched device message of a grouped transport (one (o == NULL): the
 * group and what the stream holds before it, all at once, as NCCL's kernels move them) or on
 * o alone, until done or timeout_ms. */
static int devemu_until(coll_transport *t, devemu_op *o, int timeout_ms, coll_err *e) {
  struct timespec t0, now;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (long spin = 0;; spin++) {
    int left = 0;
    for (int i = 0; i < devemu_g.nlive && !o; i++) {
      devemu_op *q = devemu_g.live[i];
      if (!q->rdv) continue;
      if (devemu_progress(t, q, e) != 0) return -1;
      left += !q->done; /* a done one left live: the next takes its place */
      if (q->done) i--;
    }
    if (o && !o->done && devemu_progress(t, o, e) != 0) return -1;
    if (o ? o->done : left == 0) return 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 > timeout_ms)
      return coll_fail(e, "rank %d: devemu: %s did not complete within %d ms (NCCL's stream would wait for ever)",
                       t->rank, o ? "a message" : "a group of device messages", timeout_ms);
    if (spin > 64) usleep(50);
  }
}

/* Grouped: every queued message launches, and the wait is for every device message launched. */
static int devemu_waitall(coll_transport *t, coll_req *r, int n, int timeout_ms, coll_err *e) {
  if (devemu_launch_all(t, e) != 0) return -1;
  if (devemu_g.grouped && devemu_until(t, NULL, timeout_ms, e) != 0) return -1;
  for (int i = 0; i < n; i++) {
    devemu_op *o;
    memcpy(&o, &r[i], sizeof o);
    if (!o->done && !o->rdv) { /* a host message, or staged: the transport's own wait */
      if (devemu_g.orig->waitall(t, &o->inner, 1, timeout_ms, e) != 0) return -1;
      if (devemu_progress(t, o, e) != 0) return -1;
    }
    if (!o->done && devemu_until(t, o, timeout_ms, e) != 0) return -1;
    free(o->bounce);
    free(o);
  }
  return 0;
}

static int devemu_test(coll_transport *t, coll_req *r, int *done, coll_err *e) {
  devemu_op *o;
  memcpy(&o, r, sizeof o);
  *done = 0;
  if (devemu_launch_all(t, e) != 0) return -1;
  if (!o->done && devemu_progress(t, o, e) != 0) return -1;
  *done = o->done;
  if (*done) free(o->bounce), free(o);
  return 0;
}

/* The end of every collective: nothing may be left queued or unwaited. */
static int devemu_finish(coll_transport *t, coll_err *e) {
  if (devemu_g.nlive == 0 || !e) return e ? 0 : -1;
  return coll_fail(e, "rank %d: devemu: %d message(s) left unwaited at the end of a call", t->rank, devemu_g.nlive);
}

/* Gives c (a tcp communicator) the emulated device; grouped as NCCL's messages, or staged one by
 * one as CUDA IPC's. */
static void devemu_install(coll_comm *c, int grouped, coll_comm *ack) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = devemu_segv;
  sigaction(SIGSEGV, &sa, NULL);
  devemu_g.orig = c->tp->ops;
  devemu_g.ops = *c->tp->ops;
  devemu_g.grouped = grouped;
  devemu_g.ack = ack->tp;
  devemu_g.ops.isend = devemu_isend;
  devemu_g.ops.irecv = devemu_irecv;
  devemu_g.ops.waitall = devemu_waitall;
  devemu_g.ops.test = devemu_test;
  devemu_g.ops.dev_copy = devemu_dev_copy;
  devemu_g.ops.dev_reduce = devemu_dev_reduce;
  devemu_g.ops.dev_reduce2 = devemu_dev_reduce2;
  devemu_g.ops.dev_alloc = devemu_dev_alloc;
  devemu_g.ops.dev_free = devemu_dev_free;
  devemu_g.ops.finish = devemu_finish;
  c->tp->ops = &devemu_g.ops;
  c->tp->on_device = 1;
  c->tp->device = 0;
  c->tp->grouped = grouped;
}

/* After the communicator closed: what the emulation holds. */
static void devemu_release(void) {
  free(devemu_g.live);
  devemu_g.live = NULL;
  devemu_g.nlive = devemu_g.caplive = 0;
}

#endif
