/* fabench train: the pairs a run trains (a transport with an algorithm, or none). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_internal.h"

const char *const train_role_names[] = {"single", "none", "dp"};

int train_make_pairs(train_pair *pairs, const train_args *a, int size, coll_transport_kind *tks,
                      int *ntk, int *want_mpi, int *rc) {
  const char *tl = a->transports;
  char deflt[64] = "none,tcp";
  if (!tl) {
    if (coll_transport_built(COLL_UCX)) strcat(deflt, ",ucx");
    tl = size > 1 ? deflt : "none";
  }
  char *items[TRAIN_MAX_PAIRS], *store = NULL;
  int nt = bench_split_list(tl, items, TRAIN_MAX_PAIRS, &store), na, np = 0;
  coll_algo algos[16];
  *ntk = 0;
  *want_mpi = 0;
  if (nt <= 0) {
    *rc = bench_usage_error(train_usage(), "--transport: '%s' is empty, has an empty item or is too long", tl);
    goto fail;
  }
  if ((*rc = bench_parse_algos(a->algos, algos, 16, &na, train_usage()))) goto fail;
  /* a pair twice trains twice into rows that cannot be told apart: refused, as allreduce and
   * p2p refuse a transport twice; ps and ps:1 are one server alike */
  for (int i = 0; i < na; i++)
    for (int j = 0; j < i; j++) {
      int pi = algos[i].kind == COLL_ALGO_PS && algos[i].param < 1 ? 1 : algos[i].param;
      int pj = algos[j].kind == COLL_ALGO_PS && algos[j].param < 1 ? 1 : algos[j].param;
      if (algos[i].kind == algos[j].kind && pi == pj) {
        char an[32];
        coll_algo_format(an, sizeof an, algos[i]);
        *rc = bench_usage_error(train_usage(), "algorithm '%s' given twice", an);
        goto fail;
      }
    }
  /* every pair gets a row and a communicator: more than the table holds is refused, not cut */
  int total = 0, seen_none = 0;
  for (int i = 0; i < nt; i++) total += strcmp(items[i], "none") ? na : 1;
  if (total > TRAIN_MAX_PAIRS) {
    *rc = bench_usage_error(train_usage(), "--transport x --algo: more than %d pairs", TRAIN_MAX_PAIRS);
    goto fail;
  }
  for (int i = 0; i < nt; i++) {
    if (!strcmp(items[i], "none")) {
      if (seen_none++) {
        *rc = bench_usage_error(train_usage(), "transport 'none' given twice");
        goto fail;
      }
      pairs[np++] = (train_pair){.role = ROLE_NONE, .tname = "none", .aname = "-"};
      continue;
    }
    coll_transport_kind tk;
    if (coll_transport_parse(items[i], &tk)) {
      *rc = bench_usage_error(train_usage(), "--transport: unknown transport '%s'", items[i]);
      goto fail;
    }
    for (int j = 0; j < *ntk; j++)
      if (tks[j] == tk) {
        *rc = bench_usage_error(train_usage(), "transport '%s' given twice", coll_transport_name(tk));
        goto fail;
      }
    if ((*rc = bench_transport_check(tk, train_usage()))) goto fail;
    tks[(*ntk)++] = tk;
    *want_mpi |= tk == COLL_MPI;
    for (int j = 0; j < na; j++) {
      train_pair *p = &pairs[np++];
      *p = (train_pair){.role = ROLE_DP, .tk = tk, .algo = algos[j]};
      snprintf(p->tname, sizeof p->tname, "%s", coll_transport_name(tk));
      coll_algo_format(p->aname, sizeof p->aname, algos[j]);
    }
  }
  free(store);
  return np;
fail:
  free(store);
  return -1;
}
