/*
 * crossentropy.cu — fused softmax + cross-entropy over the vocabulary, forward and
 * backward (kernels/cpu/crossentropy.c is the specification).
 *
 * Forward: one block per row of logits [N,Vp]; only the first V columns are real.
 * Pass 1 finds the row maximum, pass 2 sums exp(z - max) and stores the
 * unnormalized exponentials into probs, pass 3 scales them by 1/sum and zeroes the
 * padded columns. loss = log(sum) + max - z[target] (from the log-sum-exp, finite
 * even when p[target] underflows).
 * Backward: dlogits[i,v] += (p[i,v] - [v == target_i]) * dlosses[i] over the real
 * columns; padded columns are not touched.
 */
#include "kcuda_internal.cuh"

#define CE_BLOCK 512

__global__ void crossentropy_forward_kernel(float *losses, float *probs, const float *logits,
                                            const int *targets, int V, int Vp)
{
    __shared__ float shared[32];
    int row = blockIdx.x;
    const float *z = logits + (size_t)row * Vp;
    float *p = probs + (size_t)row * Vp;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        m = fmaxf(m, z[v]);
    m = kcuda_block_max(m, shared);
    float s = 0.0f;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float e = expf(z[v] - m);
        p[v] = e;
        s += e;
    }
    s = kcuda_block_sum(s, shared);
    float inv = 1.0f / s;
    for (int v = threadIdx.x; v < Vp; v += blockDim.x)
        p[v] = v < V ? p[v] * inv : 0.0f;
    if (threadIdx.x == 0)
        losses[row] = logf(s) + m - z[targets[row]];
}

__global__ void crossentropy_backward_kernel(float *dlogits, const float *dlosses,
                                             const float *probs, const int *targets, int N, int V,
                                             int Vp)
{
    size_t total = (size_t)N * V;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        int row = (int)(i / V), v = (int)(i % V);
        size_t at = (size_t)row * Vp + v;
        float indicator = v == targets[row] ? 1.0f : 0.0f;
        dlogits[at] += (probs[at] - indicator) * dlosses[row];
    }
}

int kcuda_crossentropy_forward(kcuda_ctx *k, float *losses, float *probs, const float *logits,
                               const int *targets, int N, int V, int Vp)
{
    if (N <= 0)
        return 0;
    crossentropy_forward_kernel<<<N, CE_BLOCK, 0, k->stream>>>(losses, probs, logits, targets, V,
                                                               Vp);
    return kcuda_check_launch(k, "crossentropy_forward");
}

int kcuda_crossentropy_backward(kcuda_ctx *k, float *dlogits, const float *dlosses,
                                const float *probs, const int *targets, int N, int V, int Vp)
{
    size_t n = (size_t)N * V;
    crossentropy_backward_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(
        dlogits, dlosses, probs, targets, N, V, Vp);
    return kcuda_check_launch(k, "crossentropy_backward");
}
