/* util: JSON files read whole and written atomically. */
#include "util.h"
#include "util_internal.h"

#include <stdlib.h>
#include <string.h>

int util_json_read_file(const char *path, cJSON **out, char *err, size_t errcap) {
  *out = NULL;
  char *txt;
  size_t n;
  int rc = util_file_read(path, UTIL_JSON_MAX_BYTES, &txt, &n, err, errcap);
  if (rc) return rc;
  const char *end = NULL;
  *out = cJSON_ParseWithLengthOpts(txt, n, &end, 0);
  if (!*out) {
    /* where the parser stopped, as line:column, so a hand-edited file can be mended */
    size_t line = 1, col = 1, at = end && end >= txt && end <= txt + n ? (size_t)(end - txt) : 0;
    for (size_t i = 0; i < at; i++) {
      if (txt[i] == '\n') line++, col = 1;
      else col++;
    }
    util_errf(err, errcap, "%s:%zu:%zu: not JSON", path, line, col);
    rc = -1;
  }
  free(txt);
  return rc;
}

int util_json_write_file(const char *path, const cJSON *v, char *err, size_t errcap) {
  char *txt = cJSON_Print(v);
  size_t n = txt ? strlen(txt) : 0;
  char *line = txt ? realloc(txt, n + 2) : NULL; /* a text file ends its last line */
  if (!line) {
    free(txt);
    util_errf(err, errcap, "cannot render JSON for '%s'", path);
    return -1;
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  int rc = util_file_replace(path, line, n + 1, err, errcap);
  free(line);
  return rc;
}
