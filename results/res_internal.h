/* results: what its files share and res.h does not show. */
#ifndef FABENCH_RES_INTERNAL_H
#define FABENCH_RES_INTERNAL_H

#include <stddef.h>

#include "res.h"

/* The error text into err (cap bytes), when the caller gave room for one. */
void res_errf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* A new, zeroed fabric model at the end of m, named; NULL with err when out of memory. */
res_fabric_cost *res_fabric_add(res_costmodel *m, const char *fabric, const char *transport, const char *source,
                                 int host_count, const char *topo, char *err, size_t cap);
/* Fills f->m's learned curves from f's residuals where f->learned (res_fit.c says how). */
void res_fabric_learn(res_fabric_cost *f);

#endif
