/*
 * grad_clip.c — helpers for global-norm gradient clipping.
 *
 * Clipping by global norm rescales all gradients together when their joint L2 norm
 * exceeds a threshold: norm = sqrt(sum over every tensor of sum g^2); if
 * norm > max_norm, every gradient is multiplied by max_norm / norm. The sum over
 * tensors (and, in a sharded run, over ranks, with an all-reduce of the partial sums)
 * is the trainer's business; these two kernels do the per-buffer parts.
 * The sum of squares is accumulated in double so that it does not depend visibly on
 * how the gradient is split into buffers or shards.
 */
#include "cpu_kernels.h"

double cpu_sum_squares(const float *x, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += (double)x[i] * (double)x[i];
  return sum;
}

void cpu_scale(float *x, float s, size_t n) {
  for (size_t i = 0; i < n; i++)
    x[i] *= s;
}
