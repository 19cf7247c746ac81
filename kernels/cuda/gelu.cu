/*
 * gelu.cu — GELU (tanh approximation), forward and backward, element-wise.
 *
 *     gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 *     gelu'(x) = 0.5 (1 + tanh u) + 0.5 x sech^2(u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
 * Backward accumulates into dinp (kernels/cpu/gelu.c is the specification).
 */
#include "kcuda_internal.cuh"

#define GELU_SCALE 0.7978845608028654f
#define GELU_CUBIC 0.044715f

__global__ void gelu_forward_kernel(float *out, const float *inp, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
        out[i] = 0.5f * x * (1.0f + tanhf(u));
    }
}

__global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = inp[i];
        float u = GELU_SCALE * (x + GELU_CUBIC * x * x * x);
        float th = tanhf(u);
        float sech2 = 1.0f - th * th;
        float local = 0.5f * (1.0f + th) +
                      0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * GELU_CUBIC * x * x);
        dinp[i] += local * dout[i];
    }
}

int kcuda_gelu_forward(kcuda_ctx *k, float *out, const float *inp, size_t N)
{
    gelu_forward_kernel<<<kcuda_grid_for(k, N, 256), 256, 0, k->stream>>>(out, inp, N);
    return kcuda_check_launch(k, "gelu_forward");
}

int kcuda_gelu_backward(kcuda_ctx *k, float *dinp, const float *inp, const float *dout, size_t N)
{
    gelu_backward_kernel<<<kcuda_grid_for(k, N, 256), 256, 0, k->stream>>>(dinp, inp, dout, N);
    return kcuda_check_launch(k, "gelu_backward");
}
