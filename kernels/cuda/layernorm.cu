/*
 * layernorm.cu — LayerNorm over the last dimension, forward and backward, and a
 * fused residual add + LayerNorm forward.
 *
 * Math: see kernels/cpu/layernorm.c (eps = 1e-5, biased variance, mean and rstd
 * saved per row; dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w).
 *
 * Forward: one warp per row. The row is read twice from global memory (mean, then
 * the centered sum of squares: more accurate than E[x^2] - E[x]^2 and the second
 * read hits L1/L2) and written once.
 * Backward: one warp per row for dx (two row means, then the closed form, added
 * into dinp). The parameter gradients sum over all rows: each block owns a range of
 * rows and accumulates dweight/dbias for them in shared memory (2C floats), then
 * adds its partial sums to global memory with one atomicAdd per column — a few
 * hundred atomics per column instead of N.
 * Fused residual: the transformer computes h = x + y and immediately normalizes h;
 * doing both in one pass saves one read of h (used where the device API allows).
 */
#include "kcuda_internal.cuh"

#define LN_EPS 1e-5f
#define LN_WARPS 8 /* warps (rows in flight) per block */

__device__ __forceinline__ void ln_row(float *y, float *mean, float *rstd, const float *x,
                                       const float *w, const float *b, int row, int C, int lane)
{
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    float m = kcuda_warp_sum(s) / C;
    float v = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - m;
        v += d * d;
    }
    float r = rsqrtf(kcuda_warp_sum(v) / C + LN_EPS);
    for (int c = lane; c < C; c += 32)
        y[c] = (x[c] - m) * r * w[c] + b[c];
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int N, int C)
{
    int lane = threadIdx.x & 31;
    for (int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5); row < N;
         row += gridDim.x * LN_WARPS)
        ln_row(out + (size_t)row * C, mean, rstd, inp + (size_t)row * C, weight, bias, row, C,
               lane);
}

__global__ void residual_layernorm_forward_kernel(float *res, float *out, float *mean, float *rstd,
                                                  const float *a, const float *bb,
                                                  const float *weight, const float *bias, int N,
                                                  int C)
{
    int lane = threadIdx.x & 31;
    for (int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5); row < N;
         row += gridDim.x * LN_WARPS) {
        size_t off = (size_t)row * C;
        for (int c = lane; c < C; c += 32)
            res[off + c] = a[off + c] + bb[off + c];
        __syncwarp();
        ln_row(out + off, mean, rstd, res + off, weight, bias, row, C, lane);
    }
}

__global__ void layernorm_backward_kernel(float *dinp, float *dweight, float *dbias,
                                          const float *dout, const float *inp, const float *weight,
                                          const float *mean, const float *rstd, int N, int C)
{
    extern __shared__ float acc[]; /* [2C]: dweight partials, then dbias partials */
    for (int c = threadIdx.x; c < 2 * C; c += blockDim.x)
        acc[c] = 0.0f;
    __syncthreads();
    int lane = threadIdx.x & 31;
    for (int row = blockIdx.x * LN_WARPS + (threadIdx.x >> 5); row < N;
         row += gridDim.x * LN_WARPS) {
        const float *x = inp + (size_t)row * C, *dy = dout + (size_t)row * C;
        float *dx = dinp + (size_t)row * C;
        float m = mean[row], r = rstd[row];
        float gs = 0.0f, gxs = 0.0f;
        for (int c = lane; c < C; c += 32) {
            float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
            gs += g;
            gxs += g * xhat;
        }
        float gmean = kcuda_warp_sum(gs) / C, gxmean = kcuda_warp_sum(gxs) / C;
        for (int c = lane; c < C; c += 32) {
            float xhat = (x[c] - m) * r, g = dy[c] * weight[c];
            dx[c] += r * (g - gmean - xhat * gxmean);
            atomicAdd(&acc[c], xhat * dy[c]);
            atomicAdd(&acc[C + c], dy[c]);
        }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        atomicAdd(&dweight[c], acc[c]);
        atomicAdd(&dbias[c], acc[C + c]);
    }
}

static unsigned ln_blocks(const kcuda_ctx *k, int N)
{
    unsigned need = (unsigned)((N + LN_WARPS - 1) / LN_WARPS);
    unsigned cap = (unsigned)(k->sm_count > 0 ? k->sm_count : 132) * 4;
    return need < cap ? (need ? need : 1) : cap;
}

int kcuda_layernorm_forward(kcuda_ctx *k, float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C)
{
    layernorm_forward_kernel<<<ln_blocks(k, N), LN_WARPS * 32, 0, k->stream>>>(
        out, mean, rstd, inp, weight, bias, N, C);
    return kcuda_check_launch(k, "layernorm_forward");
}

int kcuda_residual_layernorm_forward(kcuda_ctx *k, float *residual_out, float *out, float *mean,
                                     float *rstd, const float *a, const float *b,
                                     const float *weight, const float *bias, int N, int C)
{
    residual_layernorm_forward_kernel<<<ln_blocks(k, N), LN_WARPS * 32, 0, k->stream>>>(
        residual_out, out, mean, rstd, a, b, weight, bias, N, C);
    return kcuda_check_launch(k, "residual_layernorm_forward");
}

int kcuda_layernorm_backward(kcuda_ctx *k, float *dinp, float *dweight, float *dbias,
                             const float *dout, const float *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C)
{
    size_t smem = 2 * (size_t)C * sizeof(float);
    if (smem > 48 * 1024)
        return kcuda_fail(k, "layernorm_backward: C=%d is larger than the 6144 channels the "
                             "shared-memory accumulators hold", C);
    /* fewer blocks than forward: each block's partial sums cost 2C atomics */
    unsigned blocks = ln_blocks(k, N);
    unsigned cap = (unsigned)(k->sm_count > 0 ? k->sm_count : 132) * 2;
    if (blocks > cap)
        blocks = cap;
    layernorm_backward_kernel<<<blocks, LN_WARPS * 32, smem, k->stream>>>(
        dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    return kcuda_check_launch(k, "layernorm_backward");
}
