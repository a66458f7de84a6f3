/* Flag tables: one declaration per flag gives getopt_long's options, the usage text and the
 * default, and (bench_flags_parse) the parsing loop every table-driven command shares. */
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

/* The usage of f[0..n), where alt (NULL: none) gives the defaults that alt_name switches to. */
static char *fl_usage(const char *head, const bench_flag *f, size_t n, const char *alt_name,
                      const bench_flag_alt *alt) {
  fl_buf b = {.ok = 1};
  fl_puts(&b, head);
  for (size_t i = 0; i < n; i++) {
    const char *q = NULL;
    for (const bench_flag_alt *a = alt; a && a->code; a++)
      if (a->code == f[i].code) q = a->value;
    char lead[64], help[1024], def[256] = "";
    snprintf(lead, sizeof lead, "  %s%s%s%s", strlen(f[i].name) == 1 ? "-" : "--", f[i].name,
             f[i].arg ? " " : "", f[i].arg ? f[i].arg : "");
    if (f[i].def && q)
      snprintf(def, sizeof def, " (default: %s; --%s: %s)", f[i].def, alt_name, q);
    else if (f[i].def)
      snprintf(def, sizeof def, " (default: %s)", f[i].def);
    else if (q)
      snprintf(def, sizeof def, " (--%s: %s)", alt_name, q);
    snprintf(help, sizeof help, "%s%s", f[i].help ? f[i].help : "", def);
    fl_puts(&b, lead);
    fl_wrap(&b, help, strlen(lead));
  }
  if (!b.ok) free(b.s);
  return b.ok ? b.s : NULL;
}

char *bench_flags_usage(const char *head, const bench_flag *f, size_t n) { return fl_usage(head, f, n, NULL, NULL); }

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

const char *bench_flags_help(const bench_flags_cmd *c) {
  static const bench_flags_cmd *made_for; /* the process's usage text, made once per command */
  static char *text;
  if (made_for != c) {
    free(text);
    text = NULL;
    made_for = c;
    char *flags = fl_usage(c->head, c->f, c->n, c->alt_name, c->alt);
    size_t len = flags ? strlen(flags) + (c->tail ? strlen(c->tail) : 0) + 1 : 0;
    if (len && (text = malloc(len))) snprintf(text, len, "%s%s", flags, c->tail ? c->tail : "");
    free(flags);
  }
  return text ? text : c->head; /* out of memory: the usage line alone */
}

const char *bench_flags_name(const bench_flags_cmd *c, int code) {
  for (size_t i = 0; i < c->n; i++)
    if (c->f[i].code == code) return c->f[i].name;
  return "?";
}

int bench_flags_list(const char *usage, const char *flag, const char *s, char **items, int max, int *n,
                     char **store) {
  free(*store);
  *store = NULL;
  *n = bench_split_list(s, items, max, store);
  if (*n <= 0)
    return bench_usage_error(usage, "%s: '%s' is empty, has an empty item or more than %d items", flag, s, max);
  return 0;
}

int bench_flags_parse(const bench_flags_cmd *c, int argc, char **argv, bench_flag_set set, void *ctx, int *first) {
  const char *usage = bench_flags_help(c);
  int rc = 0;
  for (size_t i = 0; i < c->n && !rc; i++) /* the defaults, as given values parse */
    if (c->f[i].def && c->f[i].arg) rc = set(ctx, c->f[i].code, c->f[i].def, 0);
  if (rc) return bench_error("internal: a default of %s's flags does not parse", argv[0]);
  static const struct option help[] = {{"help", 0, 0, 'h'}, {0, 0, 0, 0}};
  struct option *lo = bench_flags_options(c->f, c->n, help);
  char *given = calloc(c->n + 1, 1);
  char shorts[64] = ":h"; /* ':' first: a missing value is told apart from an unknown flag */
  for (size_t i = 0, k = 2; i < c->n && k + 3 < sizeof shorts; i++)
    if (strlen(c->f[i].name) == 1) {
      shorts[k++] = c->f[i].name[0];
      if (c->f[i].arg) shorts[k++] = ':';
      shorts[k] = '\0';
    }
  if (!lo || !given) {
    free(lo);
    free(given);
    return bench_error("out of memory");
  }
  opterr = 0;
  optind = 1;
  int ch, alt = 0;
  while (!rc && (ch = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
    size_t i = ch == 'h' || ch == ':' || ch == '?' ? c->n : 0; /* getopt_long's own codes */
    while (i < c->n && c->f[i].code != ch) i++;
    if (i == c->n) {
      rc = bench_flag_common(ch, argv, usage); /* --help (1), a missing value or an unknown flag */
      break;
    }
    given[i] = 1;
    alt |= c->alt_name && !strcmp(c->f[i].name, c->alt_name);
    rc = set(ctx, ch, c->f[i].arg ? optarg : NULL, 1);
  }
  for (const bench_flag_alt *a = c->alt; alt && a->code && !rc; a++) { /* --quick's defaults */
    size_t i = 0;
    while (i < c->n && c->f[i].code != a->code) i++;
    if (i < c->n && !given[i] && set(ctx, a->code, a->value, 0))
      rc = bench_error("internal: a --%s default of %s's flags does not parse", c->alt_name, argv[0]);
  }
  free(lo);
  free(given);
  if (rc) return rc;
  if (first)
    *first = optind;
  else if (optind < argc)
    return bench_usage_error(usage, "unexpected argument '%s'", argv[optind]);
  return 0;
}
