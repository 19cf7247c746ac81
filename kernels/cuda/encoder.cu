/*
 * encoder.cu — token + position embedding, forward and backward.
 *
 * Forward: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:], one thread per element
 * (coalesced along C).
 * Backward: dwpe[t,:] += sum over b of dout[b,t,:] — one thread per (t,c) sums the
 * B rows in order (deterministic); dwte[tok,:] += dout[b,t,:] — tokens repeat, so
 * rows of dwte receive several contributions; they are added with atomicAdd (the
 * summation order, and so the last bits, can vary from run to run).
 */
#include "kcuda_internal.cuh"

__global__ void encoder_forward_kernel(float *out, const int *tokens, const float *wte,
                                       const float *wpe, int B, int T, int C)
{
    size_t total = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C), t = (int)(bt % T);
        out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)t * C + c];
    }
}

__global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C)
{
    size_t total = (size_t)T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int b = 0; b < B; b++)
            s += dout[(size_t)b * T * C + i];
        dwpe[i] += s;
    }
}

__global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int *tokens,
                                            int B, int T, int C)
{
    size_t total = (size_t)B * T * C;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        size_t bt = i / C;
        int c = (int)(i % C);
        atomicAdd(&dwte[(size_t)tokens[bt] * C + c], dout[i]);
    }
}

int kcuda_encoder_forward(kcuda_ctx *k, float *out, const int *tokens, const float *wte,
                          const float *wpe, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_forward_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(out, tokens, wte, wpe,
                                                                              B, T, C);
    return kcuda_check_launch(k, "encoder_forward");
}

int kcuda_encoder_backward(kcuda_ctx *k, float *dwte, float *dwpe, const float *dout,
                           const int *tokens, int B, int T, int C)
{
    size_t n = (size_t)B * T * C;
    encoder_backward_wpe_kernel<<<kcuda_grid_for(k, (size_t)T * C, 256), 256, 0, k->stream>>>(
        dwpe, dout, B, T, C);
    if (kcuda_check_launch(k, "encoder_backward (wpe)") != 0)
        return -1;
    encoder_backward_wte_kernel<<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(dwte, dout,
                                                                                   tokens, B, T, C);
    return kcuda_check_launch(k, "encoder_backward (wte)");
}
