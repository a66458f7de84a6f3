/* fabench report's files and plots: each file written whole or not at all, each plot a gnuplot
 * script run for PNG and SVG, and the plots against size every section draws. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "report_int.h"
#include "util.h"

/* Every plot report draws (rp_plot's names) and every data file it writes: what a report into a
 * reused --out directory removes first, so that no plot of an earlier report is left beside
 * this one's (one it does not draw now would pass for this run's). Nothing else is removed. */
static const char *const rp_plot_names[] = {"busbw", "latency", "train_images", "train_breakdown", "pred_vs_meas",
                                            "scaling", "p2p_heatmap", "p2p_latency", "p2p_bw", "sweep_acc",
                                            "sweep_batch"};
static const char *const rp_data_names[] = {"allreduce.dat", "train.dat", "pred_vs_meas.dat", "scaling.dat",
                                            "p2p.dat", "p2p_matrix.dat", "sweep_epochs.dat", "sweep_batch.dat",
                                            "colls.dat"};
#define RP_COUNT(a) (sizeof a / sizeof *a)

/* A name rp_remove_old removes: one of rp_plot_names, or a collective's (RP_COLL_PLOT_PREFIX). */
static int rp_plot_known(const char *name) {
  if (!strncmp(name, RP_COLL_PLOT_PREFIX, strlen(RP_COLL_PLOT_PREFIX))) return 1;
  for (size_t i = 0; i < RP_COUNT(rp_plot_names); i++)
    if (!strcmp(rp_plot_names[i], name)) return 1;
  return 0;
}

/* A previous report's files, and what one stopped midway left (a plot gnuplot was drawing). */
void rp_remove_old(const char *dir) {
  static const char *const ext[] = {".png", ".svg", ".gp", ".png.tmp", ".svg.tmp"};
  char path[4200];
  /* the collectives' plots: named by what a run held, so found by their prefix and ending */
  DIR *dd = opendir(dir);
  for (struct dirent *de; dd && (de = readdir(dd));) {
    size_t n = strlen(de->d_name);
    if (strncmp(de->d_name, RP_COLL_PLOT_PREFIX, strlen(RP_COLL_PLOT_PREFIX))) continue;
    for (size_t e = 0; e < RP_COUNT(ext); e++)
      if (n > strlen(ext[e]) && !strcmp(de->d_name + n - strlen(ext[e]), ext[e])) {
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
        break;
      }
  }
  if (dd) closedir(dd);
  for (size_t i = 0; i < RP_COUNT(rp_plot_names); i++)
    for (size_t e = 0; e < RP_COUNT(ext); e++) {
      snprintf(path, sizeof path, "%s/%s%s", dir, rp_plot_names[i], ext[e]);
      unlink(path);
    }
  for (size_t i = 0; i < RP_COUNT(rp_data_names); i++) {
    snprintf(path, sizeof path, "%s/%s", dir, rp_data_names[i]);
    unlink(path);
  }
}

/* s for a Markdown table cell: a '|' would end the cell (a fabric is named by its transport's
 * own string), so it is escaped. Returns buf. */
const char *rp_md(char *buf, size_t cap, const char *s) {
  size_t n = 0;
  for (; *s && n + 2 < cap; s++) {
    if (*s == '|') buf[n++] = '\\';
    buf[n++] = *s;
  }
  buf[n] = '\0';
  return buf;
}

static void rp_write_failed(rp_ctx *x, const char *name, int e) {
  if (!x->werr[0]) snprintf(x->werr, sizeof x->werr, "cannot write %s/%s: %s", x->dir, name, e ? strerror(e) : "write error");
}

/* A file of the report, in memory until rp_close writes it whole: a report stopped midway
 * (a kill, a full disk) leaves the previous file or none, never a cut one. */
FILE *rp_open(rp_ctx *x, const char *name) {
  for (size_t i = 0; i < sizeof x->open / sizeof *x->open; i++) {
    if (x->open[i].f) continue;
    x->open[i].f = open_memstream(&x->open[i].buf, &x->open[i].len);
    if (!x->open[i].f) rp_write_failed(x, name, errno);
    return x->open[i].f;
  }
  rp_write_failed(x, name, EMFILE);
  return NULL;
}

/* Closes a file rp_open opened and writes it out whole; 0 when all of it was written. */
int rp_close(rp_ctx *x, FILE *f, const char *name) {
  size_t i = 0;
  while (x->open[i].f != f) i++; /* rp_open gave it out */
  int bad = ferror(f), rc = -1;
  errno = 0;
  if (fclose(f) != 0 || bad) {
    rp_write_failed(x, name, errno ? errno : ENOMEM);
  } else {
    char path[4200], err[sizeof x->werr];
    snprintf(path, sizeof path, "%s/%s", x->dir, name);
    rc = util_file_replace(path, x->open[i].buf, x->open[i].len, err, sizeof err);
    if (rc && !x->werr[0]) memcpy(x->werr, err, sizeof err);
  }
  free(x->open[i].buf);
  memset(&x->open[i], 0, sizeof x->open[i]);
  return rc;
}

/* A name for a plot: gnuplot's single-quoted strings end at a quote, and the data files' fields
 * at a comma (data: for a label written into a .dat file). Names are drawn noenhanced, as
 * written: enhanced text made the _ of a fabric such as ucx:sysv+cma+rkey_ptr a subscript. */
void rp_label(char *s, int data) {
  for (; *s; s++)
    if (*s == '\'' || (data && *s == ',')) *s = ' ';
}

#define RP_PLOT_WIDTH 1000 /* px, every plot's canvas */

/* The canvas's height for a plot body: 700 px, and taller where its key below needs more rows
 * than fit under a plot of about 450 px. gnuplot makes the key's columns as wide as its longest
 * title (about 9 px a character at its default font, and 150 for the sample line and gaps), 19
 * px a row: 48 curves of four runs, one a row, overflowed the canvas's top and hid the title. */
static int rp_plot_height(const char *body) {
  size_t n = 0, longest = 0;
  for (const char *p = strstr(body, " title '"); p; p = strstr(p, " title '")) {
    p += strlen(" title '");
    const char *e = strchr(p, '\'');
    if (!e) break;
    n++;
    if ((size_t)(e - p) > longest) longest = (size_t)(e - p);
    p = e;
  }
  size_t cols = RP_PLOT_WIDTH / (longest * 9 + 150);
  if (cols < 1) cols = 1;
  size_t rows = (n + cols - 1) / cols, need = 520 + 19 * rows;
  return need > 700 ? (int)(need < 4000 ? need : 4000) : 700;
}

/* Writes NAME.gp around the plot body (run once per terminal) and runs it; the Markdown gets
 * the PNG and a link to the SVG. A plot of no points (npoints: those its axes can show) is
 * not drawn, and the Markdown says so: gnuplot fails on it, on a log scale above all. */
void rp_plot_sized(rp_ctx *x, const char *name, const char *title, const char *body, size_t npoints,
                          int height) {
  if (!rp_plot_known(name) && !x->werr[0]) /* rp_remove_old must know it */
    snprintf(x->werr, sizeof x->werr, "internal: plot '%s' is not in rp_plot_names", name);
  if (!npoints) {
    fprintf(x->md, "\n*%s*: not drawn, nothing to plot.\n", title);
    return;
  }
  char gp[128];
  snprintf(gp, sizeof gp, "%s.gp", name);
  FILE *f = rp_open(x, gp);
  if (!f) return;
  /* the key below the plot: a suite's 30 curves to the right left the plot a fifth of the width */
  fprintf(f, "set datafile separator ','\nset grid\nset key outside below\n");
  if (height <= 0) height = rp_plot_height(body);
  for (int t = 0; t < 2; t++) {
    fprintf(f, t ? "set terminal svg size %d,%d dynamic\nset output '%s.svg.tmp'\n"
                 : "set terminal pngcairo size %d,%d\nset output '%s.png.tmp'\n",
            RP_PLOT_WIDTH, height, name);
    fprintf(f, "set title '%s'\n%s\n", title, body);
  }
  if (rp_close(x, f, gp)) return;
  fprintf(x->md, "\n![%s](%s.png)\n\n[%s.svg](%s.svg)\n", title, name, name, name);
  x->nplots++;
  if (!x->plot) return;
  char err[1024];
  if (bench_gnuplot(x->dir, gp, err, sizeof err) && !x->failed[0]) snprintf(x->failed, sizeof x->failed, "%s", err);
}

void rp_plot(rp_ctx *x, const char *name, const char *title, const char *body, size_t npoints) {
  rp_plot_sized(x, name, title, body, npoints, 0);
}

/* sizes as 1K, 32K, 1M at powers of 2: gnuplot's 1x10^6 labels ran into each other, and its
 * binary format (%b%B) put 127 ki at 2^17 */
#define RP_SIZE_AXIS                                                                                         \
  "set logscale xy\nset xtics (\"1\" 1, \"32\" 32, \"1K\" 1024, \"32K\" 32768, \"1M\" 1048576, \"32M\" " \
  "33554432, \"1G\" 1073741824, \"32G\" 34359738368.)\nset xlabel 'bytes'\n"

/* A log-log plot against bytes of the given plot clauses (npoints: those it can show). */
void rp_against_size(rp_ctx *x, const char *name, const char *title, const char *ylabel, const char *extra,
                            const char *plots, size_t npoints) {
  size_t cap = strlen(plots) + strlen(ylabel) + strlen(extra) + 512; /* and the fixed clauses below */
  char *body = malloc(cap);
  if (!body) return;
  snprintf(body, cap, RP_SIZE_AXIS "set ylabel '%s'\n%splot %s", ylabel, extra, plots);
  rp_plot(x, name, title, body, npoints);
  free(body);
}

void rp_panel_add(rp_panel *p, const char *clause, const char *curve_title, size_t npoints) {
  size_t need = strlen(clause) + 3;
  if (p->len + need > p->cap) {
    size_t cap = 2 * (p->len + need);
    char *n = realloc(p->plots, cap);
    if (!n) return;
    p->plots = n, p->cap = cap;
  }
  p->len += (size_t)snprintf(p->plots + p->len, p->cap - p->len, "%s%s", p->len ? ", " : "", clause);
  p->npoints += npoints;
  p->ncurves++;
  if (strlen(curve_title) > p->longest) p->longest = strlen(curve_title);
}

/* Log-log plots against bytes, a panel each (two a row), one canvas: the suite's 26 curves of 5
 * fabrics in one plot, and their key of 52 lines, hid each other. Panels with no point are left
 * out (gnuplot fails on them). */
void rp_panels_against_size(rp_ctx *x, const char *name, const char *title, const char *ylabel,
                                   const rp_panel *p, size_t np) {
  size_t shown = 0, cap = 1024, keyrows = 0, npoints = 0;
  for (size_t i = 0; i < np; i++)
    if (p[i].npoints) {
      shown++, npoints += p[i].npoints, cap += p[i].len + 2 * sizeof p[i].title;
      /* the key below a panel of half the width, as rp_plot_height counts it */
      size_t cols = RP_PLOT_WIDTH / 2 / (p[i].longest * 9 + 150);
      if (!cols) cols = 1;
      if ((p[i].ncurves + cols - 1) / cols > keyrows) keyrows = (p[i].ncurves + cols - 1) / cols;
    }
  if (shown < 2) { /* one panel: a plot as any other */
    for (size_t i = 0; i < np; i++)
      if (p[i].npoints) {
        char both[512];
        snprintf(both, sizeof both, "%s, %s", title, p[i].title);
        rp_against_size(x, name, both, ylabel, "", p[i].plots, p[i].npoints);
        return;
      }
    rp_plot(x, name, title, "", 0);
    return;
  }
  char *body = malloc(cap);
  if (!body) return;
  size_t cols = 2, rows = (shown + cols - 1) / cols, len = 0;
  len += (size_t)snprintf(body + len, cap - len, RP_SIZE_AXIS "set ylabel '%s'\nset multiplot layout %zu,%zu title '%s'\n",
                          ylabel, rows, cols, title);
  for (size_t i = 0; i < np; i++)
    if (p[i].npoints)
      len += (size_t)snprintf(body + len, cap - len, "set title '%s' noenhanced\nplot %s\n", p[i].title, p[i].plots);
  snprintf(body + len, cap - len, "unset multiplot");
  int panel_h = 380 + 19 * (int)keyrows;
  rp_plot_sized(x, name, title, body, npoints, 40 + (int)rows * panel_h);
  free(body);
}

/* " (RUN)" where another run has the key too, so that each curve and table row says whose it is. */
void rp_run_suffix(char *out, size_t cap, int elsewhere, const char *run_id) {
  if (elsewhere) snprintf(out, cap, " (%s)", run_id);
  else if (cap) out[0] = '\0';
}
