/* results: the scaling table, a cluster predicted from this machine's fit: nodes of the
 * topology's ranks, inside a node the transport as measured here on one host, between nodes
 * each fitted link and stated rates priced held out, flat and hier. One host's own fabric is
 * never stretched past one node. */
#include "res.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adds a curve (both algorithms where the nodes have several ranks). -1 when out of memory. */
static int rs_add(res_scale_plan *p, const res_fabric_cost *intra, const res_fabric_cost *inter, double cpu_beta,
                  const char *name, const char *from, int stated) {
  int algos = p->ppn > 1 ? 2 : 1;
  res_scale_curve *c = realloc(p->c, (p->n + (size_t)algos) * sizeof *c);
  if (!c) return -1;
  p->c = c;
  for (int a = 0; a < algos; a++) {
    res_scale_curve *k = &p->c[p->n++];
    memset(k, 0, sizeof *k);
    k->intra = intra;
    k->inter = *inter;
    /* a cluster's node is a host like this machine: its whole cores, whatever an emulated fit
     * divided them among; its hosts are set per point (res_scaling_spec) */
    k->inter.m.cores = res_machine_cores(inter);
    k->inter.resid = NULL, k->inter.nresid = 0; /* the plan's copy does not own them */
    k->stated = stated;
    k->cpu_beta = cpu_beta;
    k->hier = a == 1;
    snprintf(k->inter_name, sizeof k->inter_name, "%s", name);
    snprintf(k->label, sizeof k->label, "%s, %s %s%s%s (%s)", k->hier ? "hier:ring" : "ring", name, inter->transport,
             from ? " from " : "", from ? from : "", stated ? "stated, held-out" : "predicted, held-out");
  }
  return 0;
}

int res_scaling_plan(res_scale_plan *p, const res_costmodel *m, int ppn, const double *stated_bps, int nstated) {
  memset(p, 0, sizeof *p);
  p->ppn = ppn > 0 ? ppn : 1;
  int rc = 0;
  /* the transports this machine measured on one host without emulation: each a node's inside */
  for (size_t t = 0; t < m->n && !rc; t++) {
    const res_fabric_cost *own = &m->f[t], *intra = NULL, *in = NULL;
    if (own->host_count > 1 || res_fabric_emulated(own)) continue;
    int first = 1; /* one entry per transport: its first such fabric in m */
    for (size_t q = 0; q < t; q++)
      first &= !(m->f[q].host_count <= 1 && !res_fabric_emulated(&m->f[q]) && !strcmp(m->f[q].transport, own->transport));
    if (!first) continue;
    int fitted = 0;
    /* between nodes: every fitted link of the transport (an emulated one, or a real cluster's) */
    for (size_t i = 0; i < m->n && !rc; i++) {
      const res_fabric_cost *f = &m->f[i];
      if (strcmp(f->transport, own->transport) || (f->host_count <= 1 && !res_fabric_emulated(f))) continue;
      /* inside its nodes: the transport's one-host fit of f's machine (res_costmodel_levels) */
      if (res_costmodel_levels(m, f->fabric, f->transport, 2, 2, 4, f->topo, &intra, &in) || !intra) continue;
      char l[200];
      rc = rs_add(p, intra, f, res_fabric_cpu_beta(m, f), res_costmodel_label(m, f, l, sizeof l), NULL, 0);
      fitted = 1;
    }
    /* stated rates: the nearest fitted rate of the transport scaled, else this stack at the rate */
    for (int s = 0; s < nstated && !rc; s++) {
      if (!(stated_bps[s] > 0)) continue;
      res_fabric_cost *x = malloc(sizeof *x);
      if (!x) return res_scaling_plan_free(p), -1;
      const res_fabric_cost *src = NULL;
      char name[64], from[200];
      if (stated_bps[s] >= 1e9) snprintf(name, sizeof name, "%ggbit", stated_bps[s] / 1e9);
      else snprintf(name, sizeof name, "%gmbit", stated_bps[s] / 1e6);
      intra = NULL;
      if (fitted && !res_fabric_at_rate(x, m, own->transport, 2, own->topo, stated_bps[s], name, &src) &&
          !res_costmodel_levels(m, src->fabric, src->transport, 2, 2, 4, src->topo, &intra, &in) && intra) {
        res_costmodel_label(m, src, from, sizeof from);
      } else {
        /* no fitted link: the stack measured here, its link at the stated rate */
        intra = own;
        src = own;
        res_fabric_scaled(x, m, own, stated_bps[s] / 8.0 * own->m.beta, name);
        snprintf(from, sizeof from, "the %s stack", own->fabric);
      }
      x->m.hosts = 2, x->host_count = 2;
      /* the machine's cores as src had them (res_fabric_at_rate divided an emulated one's) */
      x->m.cores = res_machine_cores(src);
      rc = rs_add(p, intra, x, res_fabric_cpu_beta(m, src), name, from, 1);
      free(x);
    }
  }
  if (rc) res_scaling_plan_free(p);
  return rc;
}

void res_scaling_plan_free(res_scale_plan *p) {
  free(p->c);
  p->c = NULL;
  p->n = 0;
}

const res_fabric_cost *res_scaling_spec(res_scale_curve *c, int ppn, int ranks, res_ar_spec *s) {
  int nodes = (ranks + ppn - 1) / ppn;
  c->inter.m.hosts = nodes;
  c->inter.host_count = nodes;
  *s = (res_ar_spec){.intra = &c->intra->m, .inter = nodes > 1 ? &c->inter.m : NULL,
                     .algo = {COLL_ALGO_RING, 0}, .hier = c->hier && nodes > 1, .ranks = ranks,
                     .ranks_per_node = ppn};
  /* one node: the fabric measured here; past it, the link between nodes bounds the CPU share */
  const res_fabric_cost *bound = nodes > 1 ? &c->inter : c->intra;
  s->chunk_bytes = bound->chunk_bytes > 0 ? (size_t)bound->chunk_bytes : 0;
  return bound;
}
