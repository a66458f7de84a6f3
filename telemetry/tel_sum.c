/* telemetry: a measurement's summary from the counters at its two marks, and the verdict. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tel_int.h"

const char *tel_verdict(double link_util, double cpu_busy, double cpu_busy_max, const tel_opts *o) {
  double lb = o && o->link_bound > 0 ? o->link_bound : TEL_LINK_BOUND_UTIL;
  double cb = o && o->cpu_bound > 0 ? o->cpu_bound : TEL_CPU_BOUND_BUSY;
  double kb = o && o->core_bound > 0 ? o->core_bound : TEL_CORE_BOUND_BUSY;
  /* NaN compares false: an unknown figure bounds nothing */
  if (link_util >= lb) return "link-bound";
  if (cpu_busy >= cb || cpu_busy_max >= kb) return "cpu-bound";
  return "neither";
}

/* A counter's growth; a counter that went back (a reset, a device replaced) grew by nothing. */
static double tel_delta(uint64_t a, uint64_t b) { return b >= a ? (double)(b - a) : 0; }

/* busy over busy + idle (steal is the hypervisor's, neither) between two readings */
static double tel_busy(const tel_cpu *a, const tel_cpu *b) {
  double busy = tel_delta(a->ms[TEL_CPU_USER], b->ms[TEL_CPU_USER]) +
                tel_delta(a->ms[TEL_CPU_SYSTEM], b->ms[TEL_CPU_SYSTEM]) +
                tel_delta(a->ms[TEL_CPU_SOFTIRQ], b->ms[TEL_CPU_SOFTIRQ]);
  double all = busy + tel_delta(a->ms[TEL_CPU_IDLE], b->ms[TEL_CPU_IDLE]);
  return all > 0 ? busy / all : NAN;
}

static void tel_sum_cpu(const tel_snap *a, const tel_snap *b, tel_summary *s) {
  if (!a->have_cpu || !b->have_cpu) return;
  s->cpu_busy = tel_busy(&a->cpu[0], &b->cpu[0]);
  for (int i = 1; i <= b->ncpu; i++) {
    const tel_cpu *cb = &b->cpu[i];
    for (int k = 1; k <= a->ncpu; k++) {
      if (a->cpu[k].num != cb->num) continue;
      double v = tel_busy(&a->cpu[k], cb);
      if (cb->num < TEL_MAX_CPUS) {
        while (s->ncpus <= cb->num) s->core_busy[s->ncpus++] = NAN;
        s->core_busy[cb->num] = v;
      }
      if (v > s->cpu_busy_max || (isnan(s->cpu_busy_max) && !isnan(v))) {
        s->cpu_busy_max = v;
        s->cpu_busiest = cb->num;
      }
      break;
    }
  }
}

static void tel_sum_links(const tel_snap *a, const tel_snap *b, const tel_opts *o, tel_summary *s) {
  double secs = s->secs, best_bits = -1;
  int util_known = 0;
  for (int i = 0; i < b->nlink; i++) {
    const tel_link *lb = &b->link[i], *la = NULL;
    for (int k = 0; k < a->nlink && !la; k++)
      if (!strcmp(a->link[k].name, lb->name)) la = &a->link[k];
    if (!la || lb->loopback) continue;
    double drops = tel_delta(la->v[TEL_RX_DROPS], lb->v[TEL_RX_DROPS]) +
                   tel_delta(la->v[TEL_TX_DROPS], lb->v[TEL_TX_DROPS]);
    s->drops = isnan(s->drops) ? drops : s->drops + drops;
    if (!(secs > 0)) continue;
    double rx = tel_delta(la->v[TEL_RX_BYTES], lb->v[TEL_RX_BYTES]);
    double tx = tel_delta(la->v[TEL_TX_BYTES], lb->v[TEL_TX_BYTES]);
    double bits = 8 * (rx > tx ? rx : tx) / secs;
    double rate = o && o->link_bps > 0 ? o->link_bps : lb->rate_bps;
    double util = rate > 0 ? bits / rate : NAN;
    /* the link named: the most utilised of those with a rate, else the busiest */
    int take = !isnan(util) ? !util_known || util > s->link_util : !util_known && bits > best_bits;
    if (!take) continue;
    util_known |= !isnan(util);
    best_bits = bits;
    snprintf(s->link, sizeof s->link, "%s", lb->name);
    s->link_bits_s = bits;
    s->link_bps = rate > 0 ? rate : NAN;
    s->link_util = util;
  }
}

void tel_summarise(const tel_snap *a, const tel_snap *b, const tel_opts *o, tel_summary *s) {
  char label[sizeof s->label];
  memcpy(label, s->label, sizeof label);
  memset(s, 0, sizeof *s);
  memcpy(s->label, label, sizeof label);
  s->secs = b->mono - a->mono;
  s->link_bits_s = s->link_bps = s->link_util = NAN;
  s->cpu_busy = s->cpu_busy_max = NAN;
  s->cpu_busiest = -1;
  s->retrans = s->out_segs = s->drops = NAN;
  tel_sum_cpu(a, b, s);
  tel_sum_links(a, b, o, s);
  if (a->have_tcp[TEL_TCP_RETRANS] && b->have_tcp[TEL_TCP_RETRANS])
    s->retrans = tel_delta(a->tcp[TEL_TCP_RETRANS], b->tcp[TEL_TCP_RETRANS]);
  if (a->have_tcp[TEL_TCP_OUTSEGS] && b->have_tcp[TEL_TCP_OUTSEGS])
    s->out_segs = tel_delta(a->tcp[TEL_TCP_OUTSEGS], b->tcp[TEL_TCP_OUTSEGS]);
  s->verdict = tel_verdict(s->link_util, s->cpu_busy, s->cpu_busy_max, o);
}
