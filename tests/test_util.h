/* Small helpers every test area uses: a scratch directory made and removed, files written and
 * read whole, lines counted. They report failure by return value (NULL, -1), so a cmocka test
 * asserts on them and a plain program can use them too. */
#ifndef FABENCH_TEST_UTIL_H
#define FABENCH_TEST_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Makes /tmp/fabench-<tag>-XXXXXX into dir (cap bytes); NULL when it cannot. */
static inline char *tu_tmpdir(char *dir, size_t cap, const char *tag) {
  int n = snprintf(dir, cap, "/tmp/fabench-%s-XXXXXX", tag);
  if (n < 0 || (size_t)n >= cap) return NULL;
  return mkdtemp(dir);
}

static inline int tu_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(p);
}

/* Removes dir and everything below it (links are removed, not followed); 0 or -1. */
static inline int tu_rmtree(const char *dir) {
  struct stat st;
  if (lstat(dir, &st) != 0) return 0; /* already gone */
  return nftw(dir, tu_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Writes text to dir/name; 0 or -1. */
static inline int tu_write(const char *dir, const char *name, const char *text) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  int bad = fputs(text, f) < 0;
  return fclose(f) != 0 || bad ? -1 : 0;
}

/* The whole file, NUL-terminated (len: its bytes, may be NULL); NULL when it cannot be read.
 * The caller frees. */
static inline char *tu_slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t n = 0, cap = 1 << 16;
  char *b = malloc(cap + 1);
  for (size_t got; b && (got = fread(b + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *nb = realloc(b, 2 * cap + 1);
      if (!nb) {
        free(b);
        b = NULL;
        break;
      }
      b = nb;
      cap *= 2;
    }
  }
  int bad = ferror(f);
  fclose(f);
  if (!b || bad) {
    free(b);
    return NULL;
  }
  b[n] = '\0';
  if (len) *len = n;
  return b;
}

/* Whether dir/name holds needle. */
static inline int tu_file_has(const char *dir, const char *name, const char *needle) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  char *t = tu_slurp(path, NULL);
  int has = t && strstr(t, needle);
  free(t);
  return has;
}

/* How many '\n' the text holds. */
static inline int tu_count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

#endif
