/* The ResNet layer tables: parameter counts against torchvision's published ones, shapes, the
 * arena order, and clear errors for unknown models and impossible inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "nn_impl.h"

static size_t params_of(const char *model, int c, int h, int w, int classes) {
  nn_table t;
  char err[256];
  if (nn_table_resnet(&t, model, c, h, w, classes, err, sizeof(err))) fail_msg("%s: %s", model, err);
  size_t n = 0;
  for (int i = 0; i < t.nlayers; i++) n += nn_layer_param_count(&t, i);
  nn_table_free(&t);
  return n;
}

static void test_counts(void **state) {
  (void)state;
  /* torchvision.models.resnetXX(num_classes=1000) parameter counts */
  assert_int_equal(params_of("resnet18", 3, 224, 224, 1000), 11689512);
  assert_int_equal(params_of("resnet34", 3, 224, 224, 1000), 21797672);
  assert_int_equal(params_of("resnet50", 3, 224, 224, 1000), 25557032);
  assert_int_equal(params_of("resnet101", 3, 224, 224, 1000), 44549160);
  /* 1 input channel and 10 classes: the stem loses 2x64x49 weights, the fc 990x513 */
  assert_int_equal(params_of("resnet18", 1, 28, 28, 10), 11689512 - 2 * 64 * 49 - 990 * 513);
  /* He et al. CIFAR ResNets with projection shortcuts (0.27M for ResNet-20) */
  assert_int_equal(params_of("resnet20", 3, 32, 32, 10), 272474);
  assert_int_equal(params_of("resnet32", 3, 32, 32, 10), 466906);
  assert_int_equal(params_of("resnet56", 3, 32, 32, 10), 855770);
}

static void test_shapes(void **state) {
  (void)state;
  nn_table t;
  char err[256];
  assert_int_equal(nn_table_resnet(&t, "resnet50", 3, 224, 224, 1000, err, sizeof(err)), 0);
  /* the value before the global pool: 2048x7x7 */
  const nn_layer *pool = &t.layers[t.nlayers - 2];
  assert_int_equal(pool->op, NN_AVGPOOL);
  nn_shape s = t.shapes[pool->in];
  assert_int_equal(s.c, 2048);
  assert_int_equal(s.h, 7);
  assert_int_equal(s.w, 7);
  int convs = 0, bns = 0, adds = 0;
  for (int i = 0; i < t.nlayers; i++) {
    convs += t.layers[i].op == NN_CONV;
    bns += t.layers[i].op == NN_BN;
    adds += t.layers[i].op == NN_ADD_RELU;
  }
  assert_int_equal(convs, 53); /* 1 + 16x3 + 4 projections */
  assert_int_equal(bns, 53);
  assert_int_equal(adds, 16);
  nn_table_free(&t);
  assert_int_equal(nn_table_resnet(&t, "resnet18", 1, 28, 28, 10, err, sizeof(err)), 0);
  s = t.shapes[t.layers[t.nlayers - 2].in];
  assert_int_equal(s.c, 512);
  assert_int_equal(s.h, 1); /* 28 -> 14 -> 7 -> 7, 4, 2, 1 */
  nn_table_free(&t);
  assert_int_equal(nn_table_resnet(&t, "resnet20-w4", 1, 13, 11, 3, err, sizeof(err)), 0);
  s = t.shapes[t.layers[t.nlayers - 2].in];
  assert_int_equal(s.c, 16);
  assert_int_equal(s.h, 4); /* 13 -> 7 -> 4 */
  assert_int_equal(s.w, 3); /* 11 -> 6 -> 3 */
  nn_table_free(&t);
}

static void test_errors(void **state) {
  (void)state;
  nn_table t;
  char err[256];
  const char *bad[] = {"resnet19", "resnet", "vgg16", "resnet18-w0", "resnet18-x4", "resnet18w4", "resnet20-w4x",
                       "resnet18-w1025", "resnet1208", "resnet999999998", NULL};
  for (int i = 0; bad[i]; i++) {
    err[0] = 0;
    assert_int_equal(nn_table_resnet(&t, bad[i], 3, 32, 32, 10, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "unknown model"));
  }
  /* the largest names there are: ResNet-1202 (CIFAR) and a base width of 1024 */
  assert_int_equal(nn_table_resnet(&t, "resnet1202", 3, 32, 32, 10, err, sizeof(err)), 0);
  nn_table_free(&t);
  assert_int_equal(nn_table_resnet(&t, "resnet18-w1024", 3, 32, 32, 10, err, sizeof(err)), 0);
  nn_table_free(&t);
  assert_int_equal(nn_table_resnet(&t, "resnet18", 0, 32, 32, 10, err, sizeof(err)), -1);
  assert_int_equal(nn_table_resnet(&t, "resnet18", 3, 32, 32, 0, err, sizeof(err)), -1);
  nn_net *net = NULL;
  nn_net_opts o = {.model = "resnet20", .in_c = 1, .in_h = 28, .in_w = 28, .classes = 10, .batch = 0, .threads = 1};
  assert_int_equal(nn_net_create(&net, &o, err, sizeof(err)), -1);
  assert_null(net);
#if !FABENCH_HAVE_DNNL
  o.batch = 8;
  assert_int_equal(nn_net_create(&net, &o, err, sizeof(err)), -1);
  assert_non_null(strstr(err, "without oneDNN"));
#endif
}

/* The arenas: one contiguous range per tensor, in backward order (fc first, stem conv last). */
static void test_arena_order(void **state) {
  (void)state;
#if FABENCH_HAVE_DNNL
  nn_net *net;
  char err[256];
  nn_net_opts o = {.model = "resnet20-w4", .in_c = 3, .in_h = 9, .in_w = 9, .classes = 5, .batch = 2, .threads = 1, .seed = 3};
  if (nn_net_create(&net, &o, err, sizeof(err))) fail_msg("%s", err);
  const nn_param_info *pi;
  int n = nn_net_param_tensors(net, &pi);
  size_t total, off = 0, nb;
  nn_net_params(net, &total);
  nn_net_buffers(net, &nb);
  assert_string_equal(pi[0].kind, "fc.weight");
  assert_int_equal(pi[0].count, 5 * 16);
  assert_string_equal(pi[1].kind, "fc.bias");
  assert_string_equal(pi[n - 1].kind, "conv.weight");
  assert_int_equal(pi[n - 1].layer, 0);
  assert_int_equal(pi[n - 1].count, 4 * 3 * 3 * 3);
  for (int i = 0; i < n; i++) {
    assert_int_equal(pi[i].offset, off);
    off += pi[i].count;
    if (i) assert_true(pi[i].layer <= pi[i - 1].layer);
  }
  assert_int_equal(off, total);
  assert_int_equal(nb, 2 * (4 + 6 * 4 + 6 * 8 + 6 * 16 + 8 + 16)); /* every BN: mean and variance */
  /* BN starts as weight 1, bias 0, running mean 0, variance 1 */
  float *p = nn_net_params(net, NULL), *b = nn_net_buffers(net, NULL);
  assert_true(p[pi[2].offset] == 1.0f && p[pi[3].offset] == 0.0f);
  assert_true(b[0] == 0.0f && b[nb - 1] == 1.0f);
  nn_net_destroy(net);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_counts), cmocka_unit_test(test_shapes),
                                     cmocka_unit_test(test_errors), cmocka_unit_test(test_arena_order)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
