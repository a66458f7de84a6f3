/* bench: the cost model's helpers for the commands that fit, check and report it (model.c). */
#ifndef FABENCH_BENCH_MODEL_H
#define FABENCH_BENCH_MODEL_H

#include "res.h"

/* Reads the allreduce and p2p rows of run directories and fits them; the rows with an untimed
 * median are left out, with a note on stderr. */
int bench_fit_dirs_ex(res_model *m, char **dirs, int ndirs, const res_fit_opts *o, char *err,
                      size_t cap);
/* The allreduce and p2p rows of run directories (either may come back empty; -1 if neither); the
 * rows with an untimed median are left out, said on stderr unless quiet. */
int bench_read_dirs(res_rows *ar, res_rows *pp, char **dirs, int ndirs, int quiet, char *err,
                    size_t cap);
/* The reduction kernel's cost per byte for a fit of run directories: the one the runs recorded
 * (run.json's reduce_gbps; the middle one over the directories), so that two fits of the same
 * rows agree; measured now (bench_gamma_kernel) only where none did. */
double bench_fit_gamma(char *const *dirs, int ndirs);
/* The CPU cores and the last-level cache's bytes of the host a run directory was measured on
 * (run.json's topology; 0: unknown). */
void bench_dir_host(const char *dir, int *cores, double *llc);
/* The MTU of an emulated fabric's links when the run directory measured that fabric (0: not). */
int bench_dir_emu_mtu(const char *dir, const char *fabric);
/* What the run directories' run.json recorded that the fit needs: o->bursts, the emulated links'
 * shaper bursts (their ranks' FABENCH_EMU_BURST), and o->runs, each run's kernel rate
 * (reduce_gbps; none where o->gamma_kernel is NaN, fit --no-gamma-kernel), so that a fabric's
 * gamma comes from the runs that measured it, and whether its ranks waited asleep (--no-spin).
 * -1 when out of memory. Release with bench_fit_recorded_free. */
int bench_fit_recorded(res_fit_opts *o, char *const *dirs, int ndirs);
void bench_fit_recorded_free(res_fit_opts *o);

#endif
