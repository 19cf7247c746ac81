/*
 * adamw.c — the AdamW optimizer step (Loshchilov & Hutter, decoupled weight decay).
 *
 * For each parameter p with gradient g, first moment m and second moment v, at
 * step t (counting from 1):
 *     m    = beta1 m + (1 - beta1) g
 *     v    = beta2 v + (1 - beta2) g^2
 *     mhat = m / (1 - beta1^t)           bias corrections: m and v start at 0 and
 *     vhat = v / (1 - beta2^t)           would otherwise be too small early on
 *     p   -= lr (mhat / (sqrt(vhat) + eps) + weight_decay p)
 * "Decoupled": the decay acts on the parameter directly, not through the gradient,
 * so it is not rescaled by the adaptive denominator (that would be Adam + L2).
 * The trainer passes weight_decay = 0 for parameters that should not decay
 * (biases, LayerNorm gains) by calling this once per parameter group.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int t) {
  /* computed in double: beta^t for large t loses digits in float */
  float correction1 = (float)(1.0 - pow((double)beta1, (double)t));
  float correction2 = (float)(1.0 - pow((double)beta2, (double)t));
  for (size_t i = 0; i < n; i++) {
    float g = grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    float mhat = mi / correction1;
    float vhat = vi / correction2;
    m[i] = mi;
    v[i] = vi;
    params[i] -= lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * params[i]);
  }
}
