/*
 * adamw.cu — the AdamW step on fp32 master weights with fp32 moments
 * (kernels/cpu/adamw.c is the specification; the bias corrections 1 - beta^t are
 * computed once on the host in double and passed in).
 */
#include <math.h>

#include "kcuda_internal.cuh"

__global__ void adamw_kernel(float *params, const float *grads, float *m, float *v, size_t n,
                             float lr, float beta1, float beta2, float eps, float weight_decay,
                             float correction1, float correction2) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float g = grads[i];
    float mi = beta1 * m[i] + (1.0f - beta1) * g;
    float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
    float mhat = mi / correction1;
    float vhat = vi / correction2;
    m[i] = mi;
    v[i] = vi;
    float p = params[i];
    params[i] = p - lr * (mhat / (sqrtf(vhat) + eps) + weight_decay * p);
  }
}

int kcuda_adamw(kcuda_ctx *k, float *params, const float *grads, float *m, float *v, size_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
  if (n == 0) return 0;
  float c1 = (float)(1.0 - pow((double)beta1, (double)t));
  float c2 = (float)(1.0 - pow((double)beta2, (double)t));
  adamw_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(params, grads, m, v, n, lr, beta1,
                                                                 beta2, eps, weight_decay, c1, c2);
  return kcuda_check_launch(k, "adamw");
}
