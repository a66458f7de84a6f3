/* The rounds of a round-robin tournament: every pair of n ranks in n-1 rounds (n even) of n/2
 * disjoint pairs, for the pairwise tests that run pairs at once (p2p and allreduce --pairs). */
#include "bench.h"

int bench_round_pairs(int n, int r, int *a, int *b) {
  /* the circle method over m = n rounded up to even slots; a rank paired with slot n, which is
   * no rank, sits the round out */
  int m = n + (n & 1), k = 0;
  for (int i = 0; i < m / 2; i++) {
    int p = i == 0 ? m - 1 : (r + i) % (m - 1), q = i == 0 ? r : (r - i + m - 1) % (m - 1);
    if (p >= n || q >= n) continue;
    a[k] = p < q ? p : q;
    b[k++] = p < q ? q : p;
  }
  return k;
}
