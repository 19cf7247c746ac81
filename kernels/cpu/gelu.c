/*
 * gelu.c — GELU activation (tanh approximation, as in GPT-2), forward and backward.
 *
 * GELU(x) = x * Phi(x), Phi the standard normal CDF. GPT-2 uses the tanh form
 *
 *     gelu(x) = 0.5 x (1 + tanh(u)),   u = s (x + k x^3),   s = sqrt(2/pi), k = 0.044715
 *
 * Its derivative, by the product rule and tanh' = 1 - tanh^2 = sech^2:
 *
 *     gelu'(x) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) s (1 + 3 k x^2)
 *
 * The backward pass recomputes u from the saved input instead of storing tanh(u):
 * it is cheap and keeps the activation memory at one tensor.
 */
#include <math.h>

#include "cpu_kernels.h"

#define GELU_SCALE 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_CUBIC 0.044715f

void cpu_gelu_forward(float *out, const float *inp, int N) {
  for (int i = 0; i < N; i++) {
    float x = inp[i];
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanhf(u));
  }
}

void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, int N) {
  for (int i = 0; i < N; i++) {
    float x = inp[i];
    float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
    float th = tanhf(u);
    float sech2 = 1.0f - th * th;
    float local =
        0.5f * (1.0f + th) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
    dinp[i] += local * dout[i];
  }
}
