/* Not a test: time to a test accuracy, one process, through the training loop (nn_train_run) with
 * the recipe of docs/measurements.md's accuracy figures: SGD momentum 0.9, weight decay 5e-4, cosine schedule, batch
 * 128, random 2-pixel crops and flips, an evaluation every epoch.
 * usage: nn_tta MODEL DATA_DIR EPOCHS TARGET [cpu|fp32|tf32|bf16] [THREADS] [LR]
 *   e.g. nn_tta resnet20 /usr/share/datasets/fashion-mnist 5 0.91 fp32 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn.h"

static int on_eval(void *ctx, const nn_eval_rec *e) {
  (void)ctx;
  printf("epoch %lld step %lld: test accuracy %.4f loss %.4f at %.1f s (eval %.2f s)\n", (long long)e->epoch,
         (long long)e->step, e->acc, e->loss, e->elapsed_s, e->secs);
  fflush(stdout);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: nn_tta MODEL DATA_DIR EPOCHS TARGET [cpu|fp32|tf32|bf16] [THREADS] [LR]\n");
    return 2;
  }
  const char *dev = argc > 5 ? argv[5] : "cpu";
  int epochs = atoi(argv[3]), threads = argc > 6 ? atoi(argv[6]) : 0;
  double target = atof(argv[4]), lr = argc > 7 ? atof(argv[7]) : 0.1;
  char err[1024];
  nn_data_spec spec = {.kind = NN_DATA_FMNIST};
  snprintf(spec.dir, sizeof spec.dir, "%s", argv[2]);
  nn_dataset train, test;
  if (nn_data_load(&train, &test, &spec, 1, err, sizeof err)) {
    fprintf(stderr, "nn_tta: %s\n", err);
    return 1;
  }
  nn_net_opts o = {.model = argv[1], .in_c = train.c, .in_h = train.h, .in_w = train.w, .classes = train.classes,
                   .batch = 128, .threads = threads, .seed = 1};
  if (strcmp(dev, "cpu")) {
    o.device = NN_DEV_CUDA;
    o.precision = !strcmp(dev, "bf16") ? NN_PREC_BF16 : !strcmp(dev, "tf32") ? NN_PREC_TF32 : NN_PREC_FP32;
  }
  nn_net *net;
  int rc = nn_net_create(&net, &o, err, sizeof err);
  if (rc) {
    fprintf(stderr, "nn_tta: %s\n", err);
    nn_data_free(&train);
    nn_data_free(&test);
    return rc == NN_ENODEV ? 3 : 1;
  }
  int64_t spe = nn_data_steps_per_epoch(train.n, 1, o.batch, 1);
  nn_train_opts t = {.net = net, .train = &train, .test = &test,
                     .loader = {.batch = o.batch, .shuffle = 1, .drop_last = 1, .crop_pad = 2, .flip = 1, .seed = 1,
                                .prefetch = 2},
                     .sched = {.kind = NN_LR_COSINE, .base = lr, .total_steps = spe * epochs},
                     .sgd = {.lr = (float)lr, .momentum = 0.9f, .weight_decay = 5e-4f},
                     .steps_per_epoch = spe, .stop_step = spe * epochs, .epochs = epochs, .warmup_steps = 10,
                     .eval_every = 1, .target_acc = target, .stop_at_target = 1, .wire = COLL_F32, .overlap = 1,
                     .on_eval = on_eval};
  nn_train_result r;
  rc = nn_train_run(&r, &t, err, sizeof err);
  if (rc) fprintf(stderr, "nn_tta: %s\n", err);
  if (!rc)
    printf("%s %s %s: %s after %lld steps, test accuracy %.4f, time to %.2f: %.1f s, train %.1f s, %.0f images/s "
         "(step p50 %.2f ms)\n",
         argv[1], dev, nn_net_backend(net), r.status, (long long)r.steps, r.test_acc, target, r.time_to_target_s,
         r.train_s, r.images_per_s, 1e3 * r.step_p50_s);
  nn_net_destroy(net);
  nn_data_free(&train);
  nn_data_free(&test);
  return rc ? 1 : 0;
}
