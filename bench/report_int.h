/* fabench report's parts (cmd_report.c, report_plot.c, report_colls.c): the rows read, the files
 * being written, and the plot machinery every section draws with. Private to bench/. */
#ifndef FABENCH_BENCH_REPORT_INT_H
#define FABENCH_BENCH_REPORT_INT_H

#include <stddef.h>
#include <stdio.h>

#include "res.h"

enum { RP_AR, RP_P2P, RP_MAT, RP_TRAIN, RP_BUCKETS, RP_PREDICT, RP_EPOCHS, RP_COLLS, RP_COLL_RANKS, RP_NREC };

typedef struct {
  res_rows rec[RP_NREC];
  res_costmodel model;
  int have_model;
  char model_src[4200];
  FILE *md;
  const char *dir;
  int plot;
  int nplots;
  char failed[1024];
  char werr[1024]; /* the first file that could not be written, and why */
  struct {         /* the files open: each is written whole at rp_close */
    FILE *f;
    char *buf;
    size_t len;
  } open[4];
  size_t untimed;  /* all-reduce and p2p rows left out: no valid measure */
  char untimed_in[600];
} rp_ctx;

/* The prefix of the plots drawn per collective and rank count (report_colls.c): rp_remove_old
 * removes a previous report's plots of that prefix, whatever collectives it had. */
#define RP_COLL_PLOT_PREFIX "coll_"

/* Removes a previous report's plots and data files from dir (only those report writes). */
void rp_remove_old(const char *dir);
/* s for a Markdown table cell ('|' escaped) in buf; returns buf. */
const char *rp_md(char *buf, size_t cap, const char *s);
/* A file of the report, in memory until rp_close writes it whole (NULL, and x->werr, on failure). */
FILE *rp_open(rp_ctx *x, const char *name);
/* Closes a file rp_open opened and writes it out whole; 0 when all of it was written. */
int rp_close(rp_ctx *x, FILE *f, const char *name);
/* Makes s safe as a gnuplot title (data: also as a field of a .dat file). */
void rp_label(char *s, int data);
/* " (RUN)" in out where another run has the key too, else "". */
void rp_run_suffix(char *out, size_t cap, int elsewhere, const char *run_id);

/* Draws plot NAME (PNG and SVG) from the gnuplot body and links it from report.md; npoints:
 * the points its axes can show (none: not drawn, and said). height 0: from its key. */
void rp_plot_sized(rp_ctx *x, const char *name, const char *title, const char *body, size_t npoints, int height);
void rp_plot(rp_ctx *x, const char *name, const char *title, const char *body, size_t npoints);
/* A log-log plot against bytes of the given plot clauses. */
void rp_against_size(rp_ctx *x, const char *name, const char *title, const char *ylabel, const char *extra,
                     const char *plots, size_t npoints);

/* One panel of a plot against bytes: its curves (plot clauses) and how many of their points a
 * log-log plot can show. */
typedef struct {
  char title[300];
  char *plots;
  size_t len, cap, npoints, ncurves, longest; /* longest: a curve's title, for its key */
} rp_panel;

void rp_panel_add(rp_panel *p, const char *clause, const char *curve_title, size_t npoints);
/* Log-log plots against bytes, a panel each (two a row) on one canvas; one panel: a plain plot. */
void rp_panels_against_size(rp_ctx *x, const char *name, const char *title, const char *ylabel, const rp_panel *p,
                            size_t np);

/* The sections of the collectives other than all-reduce (colls.csv, coll_ranks.csv). */
void rp_colls(rp_ctx *x);
/* Who the others waited for (coll_ranks.csv, every collective's): the straggler where one stands out. */
void rp_waits(rp_ctx *x);

/* The acceptance section of each accept run directory among dirs (its accept.json): the verdict,
 * the rules' table and the suspects (report_accept.c). */
void rp_accept(rp_ctx *x, char *const *dirs, int n);

#endif
