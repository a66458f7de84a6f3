/* Helpers shared by the topo tests. */
#ifndef TEST_TOPO_COMMON_H
#define TEST_TOPO_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_util.h"

/* Writes text to root/rel, creating the directories on the way. */
static inline void tt_write(const char *root, const char *rel, const char *fmt, ...) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *c = path + strlen(root) + 1; *c; c++)
    if (*c == '/') {
      *c = 0;
      mkdir(path, 0755);
      *c = '/';
    }
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "cannot write %s\n", path);
    abort();
  }
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

static inline void tt_rmtree(const char *dir) {
  if (tu_rmtree(dir) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

static inline const char *tt_fixture(char *buf, size_t cap, const char *name) {
  int n = snprintf(buf, cap, "%s/%s", TOPO_FIXTURES, name);
  if (n < 0 || (size_t)n >= cap) { /* a cut path would name another file */
    fprintf(stderr, "fixture path too long: %s/%s\n", TOPO_FIXTURES, name);
    abort();
  }
  return buf;
}

#endif
