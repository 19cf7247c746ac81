/*
 * residual.c — the residual connection, out = a + b, forward and backward.
 *
 * Addition passes its incoming gradient unchanged to both operands:
 * d(a+b)/da = d(a+b)/db = 1, so da += dout and db += dout. The accumulate (+=)
 * matters here more than anywhere: the residual stream's gradient is the sum of
 * what comes back through the skip path and through the block.
 */
#include "cpu_kernels.h"

void cpu_residual_forward(float *out, const float *a, const float *b, int N) {
  for (int i = 0; i < N; i++)
    out[i] = a[i] + b[i];
}

void cpu_residual_backward(float *da, float *db, const float *dout, int N) {
  for (int i = 0; i < N; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}
