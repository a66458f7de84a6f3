/* Flag tables: one declaration per flag gives both getopt_long's options and the usage text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* A growing string; a failed growth leaves ok 0. */
typedef struct {
  char *s;
  size_t n, cap;
  int ok;
} fl_buf;

static void fl_put(fl_buf *b, const char *s, size_t len) {
  if (!b->ok) return;
  if (b->n + len + 1 > b->cap) {
    size_t cap = (b->n + len + 1) * 2;
    char *t = realloc(b->s, cap);
    if (!t) {
      b->ok = 0;
      return;
    }
    b->s = t, b->cap = cap;
  }
  memcpy(b->s + b->n, s, len);
  b->n += len;
  b->s[b->n] = '\0';
}
static void fl_puts(fl_buf *b, const char *s) { fl_put(b, s, strlen(s)); }

/* The help column starts at 24; words wrap at 96. */
enum { FL_COL = 24, FL_WIDTH = 96 };

/* text (its own '\n's kept) from column FL_COL, starting at column col of the current line. */
static void fl_wrap(fl_buf *b, const char *text, size_t col) {
  char pad[FL_COL + 1];
  memset(pad, ' ', FL_COL);
  pad[FL_COL] = '\0';
  if (col + 1 >= FL_COL) fl_puts(b, "\n"), col = 0; /* a name too long for the column: help below it */
  fl_put(b, pad, FL_COL - col);
  col = FL_COL;
  for (const char *p = text; *p;) {
    if (*p == '\n') {
      fl_puts(b, "\n"), fl_puts(b, pad), col = FL_COL, p++;
      continue;
    }
    size_t w = strcspn(p, " \n");
    if (col > FL_COL && col + 1 + w > FL_WIDTH) fl_puts(b, "\n"), fl_puts(b, pad), col = FL_COL;
    else if (col > FL_COL) fl_puts(b, " "), col++;
    fl_put(b, p, w);
    col += w;
    p += w;
    while (*p == ' ') p++;
  }
  fl_puts(b, "\n");
}

char *bench_flags_usage(const char *head, const bench_flag *f, size_t n) {
  fl_buf b = {.ok = 1};
  fl_puts(&b, head);
  for (size_t i = 0; i < n; i++) {
    char lead[64], help[1024];
    snprintf(lead, sizeof lead, "  %s%s%s%s", strlen(f[i].name) == 1 ? "-" : "--", f[i].name,
             f[i].arg ? " " : "", f[i].arg ? f[i].arg : "");
    snprintf(help, sizeof help, "%s%s%s%s", f[i].help, f[i].def ? " (default: " : "", f[i].def ? f[i].def : "",
             f[i].def ? ")" : "");
    fl_puts(&b, lead);
    fl_wrap(&b, help, strlen(lead));
  }
  if (!b.ok) free(b.s);
  return b.ok ? b.s : NULL;
}

struct option *bench_flags_options(const bench_flag *f, size_t n, const struct option *extra) {
  size_t ne = 0;
  while (extra && extra[ne].name) ne++;
  struct option *o = calloc(n + ne + 1, sizeof *o);
  if (!o) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strlen(f[i].name) > 1) /* -n is a short option */
      o[k++] = (struct option){f[i].name, f[i].arg ? 1 : 0, NULL, f[i].code};
  for (size_t i = 0; i < ne; i++) o[k++] = extra[i];
  return o;
}
