/* A rank's session: what every rank of a measuring command (the collectives, p2p, train) does
 * around its measurements, written once: the bootstrap under --timeout, the binding, rank 0's
 * run directory with the world in run.json, the telemetry, and the end (a clean close, or an
 * abort that stops MPI's ranks rather than wait for a dead one). */
#include <stdio.h>
#include <string.h>

#include "bench.h"

int bench_session_open(bench_session *s, const bench_rank_opts *r, int want_mpi) {
  memset(s, 0, sizeof *s);
  s->r = r;
  snprintf(s->bind_desc, sizeof s->bind_desc, "none");
  coll_err e = {{0}};
  if (coll_boot_open(&s->boot, COLL_BOOT_AUTO, want_mpi, (int)r->timeout_s * 1000, &e)) {
    s->boot = NULL;
    return bench_error("%s", e.msg);
  }
  s->rank = coll_boot_rank(s->boot);
  s->size = coll_boot_size(s->boot);
  return 0;
}

int bench_session_bind(bench_session *s, int threads) {
  return bench_bind_rank(s->boot, s->r->bind, threads, s->bind_desc, sizeof s->bind_desc) ? 1 : 0;
}

int bench_session_begin(bench_session *s, const char *command, int argc, char **argv, int ready,
                        bench_session_files_fn files, void *ctx) {
  int ok = ready;
  if (s->rank == 0 && ready && bench_run_begin(&s->run, s->r->out, command, argc, argv)) {
    /* no run: what it began to describe is dropped (run.meta.base NULL says none) */
    if (s->run.meta.base) bench_run_end(&s->run);
    memset(&s->run.meta, 0, sizeof s->run.meta);
    ok = 0;
  } else if (s->rank == 0 && ready && files) {
    ok = files(ctx, &s->run) == 0;
  }
  /* every rank stops alike where rank 0 cannot go on (it said why) */
  if (!bench_rank0_ok(s->boot, ok)) return 1;
  return bench_run_world(&s->run, s->boot, s->bind_desc) ? 1 : 0;
}

int bench_session_telemetry(bench_session *s) {
  return bench_tel_start(&s->tel, s->boot, s->r->telemetry_hz, s->run.dir) ? 1 : 0;
}

/* What both ends free: the sampler and rank 0's description of the run. */
static void bench_session_release(bench_session *s) {
  bench_tel_stop(&s->tel);
  if (s->run.meta.base) bench_run_end(&s->run);
}

void bench_session_close(bench_session *s) {
  bench_session_release(s);
  coll_boot_close(s->boot);
  s->boot = NULL;
}

void bench_session_abort(bench_session *s) {
  bench_session_release(s);
  coll_boot_abort(s->boot);
  s->boot = NULL;
}
