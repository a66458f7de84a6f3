/* Learning-rate schedules: linear warm-up, then constant, step or cosine decay, per step. */
#include <math.h>

#include "nn_data.h"

double nn_lr_at(const nn_lr_sched *s, int64_t step) {
  if (step < 0) step = 0;
  if (step < s->warmup_steps) return s->base * (double)(step + 1) / (double)s->warmup_steps;
  switch (s->kind) {
  case NN_LR_STEP: {
    double lr = s->base;
    for (int i = 0; i < s->nmilestones; i++)
      if (step >= s->milestones[i]) lr *= s->gamma;
    return lr;
  }
  case NN_LR_COSINE: {
    /* the cosine spans what is left after warm-up, as PyTorch's CosineAnnealingLR would */
    int64_t span = s->total_steps - s->warmup_steps;
    if (span <= 0) return s->base;
    int64_t t = step - s->warmup_steps;
    if (t >= span) return 0.0;
    return 0.5 * s->base * (1.0 + cos(M_PI * (double)t / (double)span));
  }
  case NN_LR_CONST:
  default:
    return s->base;
  }
}

double nn_lr_scaled(double lr, int global_batch, int ref_batch) {
  return ref_batch > 0 ? lr * (double)global_batch / (double)ref_batch : lr;
}
