/* The algorithms' pure planning logic (collectives/algo_plan.h): the MPICH fold, the binary and
 * double binary trees, and the cost model behind `auto`. Checked against properties computed here
 * independently (reachability by walking parents, heights by recursion), for every size up to 300. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo_plan.h"

#define MAXP 300

static void test_fold(void **state) {
  (void)state;
  for (int p = 1; p <= 70; p++) {
    int seen[128] = {0}, pof2 = 1;
    while (pof2 * 2 <= p) pof2 *= 2;
    for (int r = 0; r < p; r++) {
      coll_fold f;
      coll_fold_plan(&f, p, r);
      assert_int_equal(f.pof2, pof2);
      assert_int_equal(f.rem, p - pof2);
      if (f.newrank < 0) {
        /* folded away: an even rank among the first 2*rem, whose odd neighbour stays */
        assert_true(r < 2 * f.rem && r % 2 == 0);
        coll_fold g;
        coll_fold_plan(&g, p, r + 1);
        assert_true(g.newrank >= 0);
        continue;
      }
      assert_true(f.newrank < pof2);
      assert_int_equal(seen[f.newrank], 0);
      seen[f.newrank] = 1;
      assert_int_equal(coll_fold_real(&f, f.newrank), r);
    }
    for (int i = 0; i < pof2; i++) assert_int_equal(seen[i], 1);
  }
}

static int height_rec(const int *child, int r) {
  int h = 0;
  for (int i = 0; i < 2; i++) {
    int c = child[2 * r + i];
    if (c >= 0) {
      int x = height_rec(child, c) + 1;
      if (x > h) h = x;
    }
  }
  return h;
}

static int ceil_lg(int p) {
  int h = 0;
  while ((1 << h) < p) h++;
  return h;
}

/* A valid spanning tree: one root, parent and child links agree, every rank reaches the root. */
static void check_tree(const int *parent, const int *child, int p, int root) {
  assert_true(root >= 0 && root < p);
  assert_int_equal(parent[root], -1);
  int links = 0;
  for (int r = 0; r < p; r++) {
    if (r != root) assert_true(parent[r] >= 0 && parent[r] < p && parent[r] != r);
    for (int i = 0; i < 2; i++) {
      int c = child[2 * r + i];
      if (c < 0) continue;
      assert_true(c < p);
      assert_int_equal(parent[c], r);
      links++;
    }
    int x = r, steps = 0;
    while (x != root && steps <= p) x = parent[x], steps++;
    assert_int_equal(x, root);
  }
  assert_int_equal(links, p - 1); /* every non-root rank is exactly one node's child */
  if (p > 1) assert_true(child[2 * root] != child[2 * root + 1]);
}

static void test_trees(void **state) {
  (void)state;
  static int parent[2][MAXP], child[2][2 * MAXP], height[MAXP], depth[MAXP];
  for (int p = 1; p <= MAXP; p++) {
    int root[2];
    for (int w = 0; w < 2; w++) {
      root[w] = coll_btree(parent[w], child[w], p, w);
      check_tree(parent[w], child[w], p, root[w]);
      coll_btree_levels(height, depth, parent[w], child[w], p);
      for (int r = 0; r < p; r++) {
        assert_int_equal(height[r], height_rec(child[w], r));
        assert_int_equal(depth[r], parent[w][r] < 0 ? 0 : depth[parent[w][r]] + 1);
      }
      /* pipelined steps grow with the height: it must stay ceil(lg p) */
      assert_int_equal(height[root[w]], ceil_lg(p));
    }
    assert_int_equal(root[0], 0);
    for (int r = 0; r < p; r++) {
      int n0 = (child[0][2 * r] >= 0) + (child[0][2 * r + 1] >= 0);
      int n1 = (child[1][2 * r] >= 0) + (child[1][2 * r + 1] >= 0);
      if (r % 2) assert_int_equal(n0, 0); /* odd ranks are leaves of tree 0 */
      /* the double binary tree's point: no rank is a full interior node of both trees */
      assert_true(n0 + n1 <= 2);
    }
  }
}

static void test_cost_model(void **state) {
  (void)state;
  coll_cost_model m = {.alpha = 40e-6, .beta = 1.0 / 1.5e9, .gamma = 1.0 / 4e9};
  size_t chunk = 256 * 1024, big = 64u << 20;
  coll_algo ring = {COLL_ALGO_RING, 0}, rhd = {COLL_ALGO_RHD, 0}, rd = {COLL_ALGO_RD, 0};
  coll_algo tree = {COLL_ALGO_TREE, 0}, dtree = {COLL_ALGO_DTREE, 0}, ps = {COLL_ALGO_PS, 1};
  for (int p = 2; p <= 16; p++) {
    /* the pick is the cheapest candidate at every size */
    coll_algo cand[] = {ring, rhd, rd, tree, dtree};
    for (size_t bytes = 8; bytes <= big; bytes *= 8) {
      coll_algo a = coll_auto_pick(p, bytes, chunk, &m);
      for (size_t i = 0; i < 5; i++)
        assert_true(coll_cost(a, p, bytes, chunk, &m) <= coll_cost(cand[i], p, bytes, chunk, &m));
    }
    /* small: latency-bound; lg p messages beat the ring's p - 1 from 4 ranks on */
    coll_algo a = coll_auto_pick(p, 8, chunk, &m);
    if ((p & (p - 1)) == 0 && p >= 4) assert_int_equal(a.kind, COLL_ALGO_RD);
    assert_true(a.kind != COLL_ALGO_TREE && a.kind != COLL_ALGO_DTREE);
    /* large: bandwidth-bound, ring or rhd (2 (p-1)/p n, the lower bound) */
    a = coll_auto_pick(p, big, chunk, &m);
    assert_true(a.kind == COLL_ALGO_RING || a.kind == COLL_ALGO_RHD);
    /* the many-to-one bottleneck: one server is about p/2 times slower than the ring */
    double r = coll_cost(ps, p, big, chunk, &m) / coll_cost(ring, p, big, chunk, &m);
    assert_true(r > 0.8 * p / 2 && r < 1.3 * p / 2 + 0.5);
    /* K = p servers move what the ring moves */
    coll_algo psp = {COLL_ALGO_PS, p};
    r = coll_cost(psp, p, big, chunk, &m) / coll_cost(ring, p, big, chunk, &m);
    assert_true(r > 0.9 && r < 1.6);
    /* double binary tree: 2n beta against 3n beta for one tree, and n gamma against 2n (on 2
     * ranks both trees are one edge: n each way either way, but dtree splits the reduction
     * between the two roots) */
    r = coll_cost(tree, p, big, chunk, &m) / coll_cost(dtree, p, big, chunk, &m);
    if (p == 2)
      assert_true(r > 1.0 && r < 1.25);
    else
      if (!(r > (p == 3 ? 1.25 : 1.3) && r < 1.65)) fail_msg("p %d tree/dtree %.3f", p, r); /* 3: tree 0 is a chain */
    /* rd moves lg p whole vectors: never better than rhd for large messages */
    assert_true(coll_cost(rd, p, big, chunk, &m) >= coll_cost(rhd, p, big, chunk, &m));
  }
  coll_algo one = coll_auto_pick(1, 1024, chunk, &m);
  assert_int_equal(one.kind, COLL_ALGO_RING);
  assert_true(coll_cost(ring, 4, 0, chunk, &m) == 0);
  /* the defaults depend on the transport: ucx (shared memory here) starts faster than tcp */
  coll_cost_model t, s;
  coll_model_default(&t, COLL_TCP);
  coll_model_default(&s, COLL_UCX);
  assert_true(s.alpha < t.alpha);
}

/* Hosts of a layout string, one letter a rank ("ABAB": 0 and 2 on host A), as names. */
static int layout_hosts(char (*hosts)[COLL_HOST_MAX], const char *layout) {
  int n = (int)strlen(layout);
  for (int r = 0; r < n; r++) snprintf(hosts[r], COLL_HOST_MAX, "node-%c", layout[r]);
  return n;
}

/* Times a ring over order steps from one host to another (the last rank back to the first
 * included). */
static int ring_crossings(const int *order, const char (*hosts)[COLL_HOST_MAX], int n) {
  int x = 0;
  for (int i = 0; i < n; i++) x += strcmp(hosts[order[i]], hosts[order[(i + 1) % n]]) != 0;
  return x;
}

static void test_node_order(void **state) {
  (void)state;
  char hosts[MAXP][COLL_HOST_MAX];
  int host_of[MAXP], order[MAXP], start[MAXP + 1];
  /* round-robin over two hosts: the ring visits 0,2,1,3 */
  int n = layout_hosts(hosts, "ABAB");
  assert_int_equal(coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])hosts, n), 2);
  assert_int_equal(coll_layout_plan(order, start, host_of, n), 2);
  static const int want[] = {0, 2, 1, 3};
  for (int i = 0; i < 4; i++) assert_int_equal(order[i], want[i]);
  assert_int_equal(start[0], 0), assert_int_equal(start[1], 2), assert_int_equal(start[2], 4);
  /* hosts numbered by first appearance: C (rank 1) is host 1 */
  n = layout_hosts(hosts, "ACCABA");
  assert_int_equal(coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])hosts, n), 3);
  static const int want_h[] = {0, 1, 1, 0, 2, 0}, want_o[] = {0, 3, 5, 1, 2, 4};
  assert_int_equal(coll_layout_plan(order, start, host_of, n), 3);
  for (int i = 0; i < n; i++) assert_int_equal(host_of[i], want_h[i]), assert_int_equal(order[i], want_o[i]);
  /* random layouts: a permutation, each host's ranks together and in rank order, so a ring
   * over it crosses each boundary once each way: one crossing a host (none on one host) */
  unsigned x = 12345;
  for (int t = 0; t < 2000; t++) {
    x = x * 1103515245u + 12345u;
    n = 1 + (int)((x >> 8) % 40);
    int nh = 1 + (int)((x >> 20) % 6);
    char lay[64];
    for (int r = 0; r < n; r++) x = x * 1103515245u + 12345u, lay[r] = (char)('A' + (x >> 16) % (unsigned)nh);
    lay[n] = '\0';
    layout_hosts(hosts, lay);
    int h = coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])hosts, n);
    assert_int_equal(coll_layout_plan(order, start, host_of, n), h);
    int seen[64] = {0};
    for (int i = 0; i < n; i++) seen[order[i]]++;
    for (int r = 0; r < n; r++) assert_int_equal(seen[r], 1);
    assert_int_equal(start[0], 0), assert_int_equal(start[h], n);
    for (int k = 0; k < h; k++)
      for (int i = start[k]; i < start[k + 1]; i++) {
        assert_int_equal(host_of[order[i]], k);
        if (i > start[k]) assert_true(order[i] > order[i - 1]);
      }
    if (ring_crossings(order, (const char(*)[COLL_HOST_MAX])hosts, n) != (h > 1 ? h : 0))
      fail_msg("layout %s: the ring crosses hosts %d times, want %d", lay,
               ring_crossings(order, (const char(*)[COLL_HOST_MAX])hosts, n), h > 1 ? h : 0);
  }
}

/* hier's blocks: on every host each of the lmax blocks has exactly one owner, local rank
 * k mod L; the group of block k holds one rank of each host, in host order. */
static void test_hier_blocks(void **state) {
  (void)state;
  static const char *const layouts[] = {"AABB", "AAABCC", "ABACCA", "AAAAB", "ABCD", "AAAA", "BAABBBCA"};
  char hosts[MAXP][COLL_HOST_MAX];
  int host_of[MAXP], order[MAXP], start[MAXP + 1], group[MAXP];
  for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
    int n = layout_hosts(hosts, layouts[l]);
    coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])hosts, n);
    int nh = coll_layout_plan(order, start, host_of, n), lmax = 0;
    for (int h = 0; h < nh; h++)
      if (start[h + 1] - start[h] > lmax) lmax = start[h + 1] - start[h];
    int owned[MAXP] = {0};
    for (int k = 0; k < lmax; k++) {
      coll_hier_group(group, order, start, nh, k);
      for (int h = 0; h < nh; h++) {
        assert_int_equal(host_of[group[h]], h);
        /* the owner is the host's local rank k mod L: the one its reduce-scatter gives block k */
        int L = start[h + 1] - start[h], j = 0;
        while (order[start[h] + j] != group[h]) j++;
        assert_int_equal(j, k % L);
        owned[group[h]]++;
      }
    }
    /* and so every rank owns a block, the ranks of a host as evenly as lmax allows */
    for (int h = 0; h < nh; h++)
      for (int i = start[h]; i < start[h + 1]; i++) {
        int L = start[h + 1] - start[h];
        assert_true(owned[order[i]] == lmax / L || owned[order[i]] == (lmax + L - 1) / L);
      }
  }
  /* 4 + 1: the lone rank owns all four blocks, with a different partner for each */
  int n = layout_hosts(hosts, "AAAAB");
  coll_host_index(host_of, (const char(*)[COLL_HOST_MAX])hosts, n);
  int nh = coll_layout_plan(order, start, host_of, n);
  for (int k = 0; k < 4; k++) {
    coll_hier_group(group, order, start, nh, k);
    assert_int_equal(group[0], k), assert_int_equal(group[1], 4);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold),
      cmocka_unit_test(test_trees),
      cmocka_unit_test(test_cost_model),
      cmocka_unit_test(test_node_order),
      cmocka_unit_test(test_hier_blocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
