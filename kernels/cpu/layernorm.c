/*
 * layernorm.c — Layer normalization over the last dimension, forward and backward.
 *
 * Forward, for each row x of C values:
 *     mean = (1/C) sum x_i
 *     var  = (1/C) sum (x_i - mean)^2          (biased, like PyTorch)
 *     rstd = 1 / sqrt(var + eps),  eps = 1e-5
 *     xhat = (x - mean) * rstd
 *     y    = xhat * weight + bias
 * mean and rstd are saved per row so the backward pass need not recompute them.
 *
 * Backward. Let g = dy * weight (the gradient reaching xhat). The parameters get
 *     dbias   += dy,   dweight += dy * xhat.
 * For the input, xhat depends on every x_j through mean and rstd. Differentiating
 *     dxhat_i/dx_j = rstd (delta_ij - 1/C - xhat_i xhat_j / C)
 * and contracting with g gives the well-known closed form
 *     dx_i = rstd * (g_i - mean(g) - xhat_i * mean(g * xhat)).
 * The mean and the variance are accumulated in double: the extra precision is
 * nearly free and keeps the reference kernel the accurate one.
 */
#include <math.h>

#include "cpu_kernels.h"

#define LAYERNORM_EPS 1e-5

void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C) {
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    float *y = out + (size_t)n * C;
    double sum = 0.0;
    for (int c = 0; c < C; c++)
      sum += x[c];
    double m = sum / C;
    double sq = 0.0;
    for (int c = 0; c < C; c++) {
      double d = x[c] - m;
      sq += d * d;
    }
    double s = 1.0 / sqrt(sq / C + LAYERNORM_EPS);
    float mf = (float)m, sf = (float)s;
    for (int c = 0; c < C; c++)
      y[c] = (x[c] - mf) * sf * weight[c] + bias[c];
    mean[n] = mf;
    rstd[n] = sf;
  }
}

void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C) {
  for (int n = 0; n < N; n++) {
    const float *x = inp + (size_t)n * C;
    const float *dy = dout + (size_t)n * C;
    float *dx = dinp + (size_t)n * C;
    float m = mean[n], s = rstd[n];

    /* the two row means of the closed form: mean(g) and mean(g * xhat) */
    double g_sum = 0.0, gx_sum = 0.0;
    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * s;
      float g = dy[c] * weight[c];
      g_sum += g;
      gx_sum += (double)g * xhat;
    }
    float g_mean = (float)(g_sum / C), gx_mean = (float)(gx_sum / C);

    for (int c = 0; c < C; c++) {
      float xhat = (x[c] - m) * s;
      float g = dy[c] * weight[c];
      dbias[c] += dy[c];
      dweight[c] += xhat * dy[c];
      dx[c] += s * (g - g_mean - xhat * gx_mean);
    }
  }
}
