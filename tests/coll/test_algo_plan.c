/* The algorithms' pure planning logic (collectives/algo_plan.h): the MPICH fold, the binary and
 * double binary trees, and the cost model behind `auto`. Checked against properties computed here
 * independently (reachability by walking parents, heights by recursion), for every size up to 300. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fold),
      cmocka_unit_test(test_trees),
      cmocka_unit_test(test_cost_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
