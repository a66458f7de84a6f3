/* util: reading a whole file, and a path's directory. */
#include "util.h"
#include "util_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void util_errf(char *err, size_t cap, const char *fmt, ...) {
  if (!err || !cap) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, cap, fmt, ap);
  va_end(ap);
}

int util_path_dir(char *dir, size_t cap, const char *path) {
  const char *slash = strrchr(path, '/');
  int len = !slash ? snprintf(dir, cap, ".") : snprintf(dir, cap, "%.*s", slash == path ? 1 : (int)(slash - path), path);
  return len < 0 || (size_t)len >= cap ? -1 : 0;
}

int util_file_read(const char *path, size_t max, char **out, size_t *len, char *err, size_t errcap) {
  *out = NULL;
  *len = 0;
  FILE *f = fopen(path, "rb");
  if (!f) {
    util_errf(err, errcap, "cannot open '%s': %s", path, strerror(errno));
    return -2;
  }
  char *txt = NULL;
  size_t n = 0, cap = 0, lim = max < SIZE_MAX - 2 ? max + 2 : SIZE_MAX; /* max + 1 bytes tell */
  int oom = 0;
  while (!feof(f) && !ferror(f) && n <= max) {
    if (n + 1 >= cap) { /* room for the next read and the terminating NUL */
      size_t nc = cap ? (cap < lim / 2 ? 2 * cap : lim) : (lim < 65536 ? lim : 65536);
      char *nt = realloc(txt, nc);
      if (!nt) {
        oom = 1;
        break;
      }
      txt = nt, cap = nc;
    }
    n += fread(txt + n, 1, cap - n - 1, f);
  }
  int bad = ferror(f);
  fclose(f);
  int too_large = n > max;
  if (too_large || oom || bad) {
    free(txt);
    if (too_large)
      util_errf(err, errcap, "'%s' is too large (more than %zu bytes)", path, max);
    else
      util_errf(err, errcap, "cannot read '%s': %s", path, oom ? "out of memory" : "read error");
    return -1;
  }
  txt[n] = '\0';
  *out = txt;
  *len = n;
  return 0;
}
