/*
 * residual.cu — the residual add, forward (out = a + b) and backward (da += dout,
 * db += dout), element-wise. The fused residual + LayerNorm lives in layernorm.cu.
 */
#include "kcuda_internal.cuh"

__global__ void residual_forward_kernel(float *out, const float *a, const float *b, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

__global__ void residual_backward_kernel(float *da, float *db, const float *dout, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = dout[i];
        da[i] += d;
        db[i] += d;
    }
}

int kcuda_residual_forward(kcuda_ctx *k, float *out, const float *a, const float *b, size_t N)
{
    residual_forward_kernel<<<kcuda_grid_for(k, N, 256), 256, 0, k->stream>>>(out, a, b, N);
    return kcuda_check_launch(k, "residual_forward");
}

int kcuda_residual_backward(kcuda_ctx *k, float *da, float *db, const float *dout, size_t N)
{
    residual_backward_kernel<<<kcuda_grid_for(k, N, 256), 256, 0, k->stream>>>(da, db, dout, N);
    return kcuda_check_launch(k, "residual_backward");
}
