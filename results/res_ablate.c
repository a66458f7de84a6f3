/* results: the model's terms, each of which can be turned off, so that a held-out comparison
 * (fabench validate) shows what each one earns. */
#include "res_internal.h"

#include <stdio.h>
#include <string.h>

static const char *const ra_names[] = {"curves", "cpu", "burst", "share"};
#define RA_N (sizeof ra_names / sizeof *ra_names)

const char *res_term_name(unsigned bit) {
  for (unsigned i = 0; i < RA_N; i++)
    if (bit == 1u << i) return ra_names[i];
  return NULL;
}

int res_terms_parse(const char *list, unsigned *mask, char *err, size_t cap) {
  *mask = 0;
  for (const char *p = list; p && *p;) {
    const char *e = strchr(p, ',');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (!n || (e && !e[1])) {
      res_errf(err, cap, "'%s': an empty item", list);
      return -1;
    }
    unsigned i = 0;
    while (i < RA_N && !(strlen(ra_names[i]) == n && !strncmp(ra_names[i], p, n))) i++;
    if (i == RA_N) {
      res_errf(err, cap, "'%.*s' is not a term of the model (curves, cpu, burst, share)", (int)n, p);
      return -1;
    }
    *mask |= 1u << i;
    p = e ? e + 1 : p + n;
  }
  return 0;
}

void res_costmodel_ablate(res_costmodel *m, unsigned mask) {
  for (size_t i = 0; m && i < m->n; i++) {
    res_fabric_cost *f = &m->f[i];
    coll_model *c = &f->m;
    if (mask & RES_TERM_CURVES) c->ncurves = 0, f->learned = 0;
    if (mask & RES_TERM_CPU) c->beta_cpu = 0;
    if (mask & RES_TERM_BURST) c->burst = 0, c->red_hidden = 0;
    if (mask & RES_TERM_SHARE) f->cpu_byte = 0, f->nbusy = 0;
  }
}
