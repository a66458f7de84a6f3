/* util: what its files share and util.h does not show. */
#ifndef FABENCH_UTIL_INTERNAL_H
#define FABENCH_UTIL_INTERNAL_H

#include <stddef.h>

/* The error text into err (cap bytes), when the caller gave room for one. */
void util_errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
