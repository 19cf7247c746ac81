/*
 * attention.cu — causal multi-head attention through batched GEMMs and a softmax
 * kernel (kernels/cpu/attention.c is the specification, including its saved
 * tensors: preatt holds the scaled scores and att the softmax, both zero above
 * the diagonal).
 *
 * Forward, with the B*NH heads as one strided batch:
 *   1. permute qkv [B,T,3,NH,hs] into q, k, v [B,NH,T,hs] (scratch);
 *   2. preatt = (1/sqrt(hs)) q k^T               batched GEMM [T,hs] x [hs,T];
 *   3. softmax over t2 <= t row by row (one warp per row), writing att and
 *      zeroing both tensors above the diagonal;
 *   4. y = att v                                   batched GEMM [T,T] x [T,hs];
 *   5. unpermute y [B,NH,T,hs] into out [B,T,NH*hs].
 * Backward:
 *   1. permute dout into dy [B,NH,T,hs] (and q, k, v again: the scratch is shared);
 *   2. datt = dy v^T;   dv = att^T dy              (batched GEMMs)
 *   3. dpreatt = att (datt - rowsum(att datt))    (softmax backward, one warp per row)
 *   4. dq = scale dpreatt k;   dk = scale dpreatt^T q
 *   5. add dq, dk, dv into dqkv (the gradient accumulates, like every backward).
 * The GEMMs run over full T x T tiles although half is masked: simple first; a fused
 * flash-style kernel is the next step if the profile says attention dominates.
 */
#include <math.h>

#include "kcuda_internal.cuh"

/* qkv [B,T,3,NH,hs] -> q,k,v each [B,NH,T,hs] */
__global__ void permute_qkv_kernel(float *q, float *k, float *v, const float *qkv, int B, int T,
                                   int NH, int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    int C = NH * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH);
        int b = (int)(r / NH);
        size_t src = ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
        q[i] = qkv[src];
        k[i] = qkv[src + C];
        v[i] = qkv[src + 2 * (size_t)C];
    }
}

/* y [B,NH,T,hs] -> out [B,T,NH*hs] (overwrite) */
__global__ void unpermute_kernel(float *out, const float *y, int B, int T, int NH, int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH);
        int b = (int)(r / NH);
        out[((size_t)b * T + t) * NH * hs + (size_t)h * hs + d] = y[i];
    }
}

/* dout [B,T,NH*hs] -> dy [B,NH,T,hs] */
__global__ void permute_dout_kernel(float *dy, const float *dout, int B, int T, int NH, int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH);
        int b = (int)(r / NH);
        dy[i] = dout[((size_t)b * T + t) * NH * hs + (size_t)h * hs + d];
    }
}

/* dqkv [B,T,3,NH,hs] += (dq | dk | dv) [B,NH,T,hs] */
__global__ void unpermute_add_qkv_kernel(float *dqkv, const float *dq, const float *dk,
                                         const float *dv, int B, int T, int NH, int hs)
{
    size_t total = (size_t)B * NH * T * hs;
    int C = NH * hs;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int d = (int)(i % hs);
        size_t r = i / hs;
        int t = (int)(r % T);
        r /= T;
        int h = (int)(r % NH);
        int b = (int)(r / NH);
        size_t dst = ((size_t)b * T + t) * 3 * C + (size_t)h * hs + d;
        dqkv[dst] += dq[i];
        dqkv[dst + C] += dk[i];
        dqkv[dst + 2 * (size_t)C] += dv[i];
    }
}

/* One warp per row (b, h, t) of the [B*NH*T, T] score matrix. */
__global__ void causal_softmax_kernel(float *att, float *preatt, int rows, int T)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    int t = row % T;
    float *p = preatt + (size_t)row * T, *a = att + (size_t)row * T;
    float m = -INFINITY;
    for (int j = lane; j <= t; j += 32)
        m = fmaxf(m, p[j]);
    m = kcuda_warp_max(m);
    float s = 0.0f;
    for (int j = lane; j <= t; j += 32)
        s += expf(p[j] - m);
    float inv = 1.0f / kcuda_warp_sum(s);
    for (int j = lane; j < T; j += 32) {
        if (j <= t) {
            a[j] = expf(p[j] - m) * inv;
        } else {
            a[j] = 0.0f;
            p[j] = 0.0f;
        }
    }
}

__global__ void causal_softmax_backward_kernel(float *dpreatt, float *datt, const float *att,
                                               int rows, int T)
{
    int lane = threadIdx.x & 31;
    int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    int t = row % T;
    const float *a = att + (size_t)row * T;
    float *da = datt + (size_t)row * T, *dp = dpreatt + (size_t)row * T;
    float w = 0.0f;
    for (int j = lane; j <= t; j += 32)
        w += a[j] * da[j];
    w = kcuda_warp_sum(w);
    for (int j = lane; j < T; j += 32) {
        if (j <= t) {
            dp[j] = a[j] * (da[j] - w);
        } else {
            dp[j] = 0.0f;
            da[j] = 0.0f;
        }
    }
}

#define ROWS_PER_BLOCK 8

int kcuda_attention_forward(kcuda_ctx *k, float *out, float *preatt, float *att, const float *qkv,
                            int B, int T, int C, int NH)
{
    if (NH <= 0 || C % NH != 0)
        return kcuda_fail(k, "attention_forward: C=%d is not a multiple of NH=%d", C, NH);
    int hs = C / NH, batch = B * NH;
    size_t n = (size_t)B * T * C;
    float *scr = (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, 4 * n * sizeof(float));
    if (!scr)
        return -1;
    float *q = scr, *kk = scr + n, *v = scr + 2 * n, *y = scr + 3 * n;
    unsigned grid = kcuda_grid_for(k, n, 256);
    permute_qkv_kernel<<<grid, 256, 0, k->stream>>>(q, kk, v, qkv, B, T, NH, hs);
    if (kcuda_check_launch(k, "attention_forward permute") != 0)
        return -1;
    float scale = 1.0f / sqrtf((float)hs);
    long long sH = (long long)T * hs, sTT = (long long)T * T;
    if (kcuda_gemm(k, 0, 1, T, T, hs, scale, q, kk, 0.0f, preatt, batch, sH, sH, sTT) != 0)
        return -1;
    int rows = batch * T;
    causal_softmax_kernel<<<(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, ROWS_PER_BLOCK * 32, 0,
                            k->stream>>>(att, preatt, rows, T);
    if (kcuda_check_launch(k, "attention_forward softmax") != 0)
        return -1;
    if (kcuda_gemm(k, 0, 0, T, hs, T, 1.0f, att, v, 0.0f, y, batch, sTT, sH, sH) != 0)
        return -1;
    unpermute_kernel<<<grid, 256, 0, k->stream>>>(out, y, B, T, NH, hs);
    return kcuda_check_launch(k, "attention_forward unpermute");
}

int kcuda_attention_backward(kcuda_ctx *k, float *dqkv, float *dpreatt, float *datt,
                             const float *dout, const float *qkv, const float *att, int B, int T,
                             int C, int NH)
{
    if (NH <= 0 || C % NH != 0)
        return kcuda_fail(k, "attention_backward: C=%d is not a multiple of NH=%d", C, NH);
    int hs = C / NH, batch = B * NH;
    size_t n = (size_t)B * T * C;
    float *scr = (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, 7 * n * sizeof(float));
    if (!scr)
        return -1;
    float *q = scr, *kk = scr + n, *v = scr + 2 * n, *dy = scr + 3 * n;
    float *dq = scr + 4 * n, *dk = scr + 5 * n, *dv = scr + 6 * n;
    unsigned grid = kcuda_grid_for(k, n, 256);
    permute_qkv_kernel<<<grid, 256, 0, k->stream>>>(q, kk, v, qkv, B, T, NH, hs);
    permute_dout_kernel<<<grid, 256, 0, k->stream>>>(dy, dout, B, T, NH, hs);
    if (kcuda_check_launch(k, "attention_backward permute") != 0)
        return -1;
    float scale = 1.0f / sqrtf((float)hs);
    long long sH = (long long)T * hs, sTT = (long long)T * T;
    /* datt[T,T] = dy[T,hs] v^T;  dv[T,hs] = att^T dy */
    if (kcuda_gemm(k, 0, 1, T, T, hs, 1.0f, dy, v, 0.0f, datt, batch, sH, sH, sTT) != 0)
        return -1;
    if (kcuda_gemm(k, 1, 0, T, hs, T, 1.0f, att, dy, 0.0f, dv, batch, sTT, sH, sH) != 0)
        return -1;
    int rows = batch * T;
    causal_softmax_backward_kernel<<<(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK,
                                     ROWS_PER_BLOCK * 32, 0, k->stream>>>(dpreatt, datt, att, rows,
                                                                          T);
    if (kcuda_check_launch(k, "attention_backward softmax") != 0)
        return -1;
    /* dq = scale dpreatt k;  dk = scale dpreatt^T q */
    if (kcuda_gemm(k, 0, 0, T, hs, T, scale, dpreatt, kk, 0.0f, dq, batch, sTT, sH, sH) != 0)
        return -1;
    if (kcuda_gemm(k, 1, 0, T, hs, T, scale, dpreatt, q, 0.0f, dk, batch, sTT, sH, sH) != 0)
        return -1;
    unpermute_add_qkv_kernel<<<grid, 256, 0, k->stream>>>(dqkv, dq, dk, dv, B, T, NH, hs);
    return kcuda_check_launch(k, "attention_backward unpermute");
}
