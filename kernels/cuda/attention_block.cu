/*
 * attention_block.cu — one block of queries against one block of keys and values,
 * merged into a running (out, lse) by log-sum-exp, forward and backward: the device
 * operations of ring attention (context parallelism) on CUDA. The specification is
 * kernels/cpu/attention_block.c (cpu_attention_block_*): same arguments, layouts and
 * rules — q rows q_stride floats apart, k rows kv_stride apart with v at +C, out
 * [B,Tq,C] and lse [B,NH,Tq] hold the result over the key blocks merged so far (start:
 * out = 0, lse = -inf), `causal` lets query t see keys j <= t only, the backward takes
 * the FINAL out and lse and ACCUMULATES into dq and dkv (dk | dv at +C).
 *
 * Two paths, chosen by the context's precision and the head size (kcuda_attention_
 * block_path; forward and backward choose alike):
 *
 * Tensor cores (bf16/tf32 contexts, head size 16, 32, 64 or 128): flash-attention
 * tiles in the style of flash_attention.cu — bf16 WMMA 16x16x16 with fp32
 * accumulation, 64 queries x 64 keys per tile, a block of 4 warps (16 query rows each).
 *   Forward, block = (query tile, b*NH+h): Q tile -> shared (bf16); for each key tile
 *   (all of them, or up to the diagonal when causal): K, V -> shared; S = Q K^T into
 *   the warp's scratch; mask (keys past Tk, and j > t when causal); online softmax
 *   (two lanes per row): m' = max(m, rowmax), P = exp(s - m') (bf16), l = l e^(m-m') +
 *   rowsum P, O = O e^(m-m') + P V (O in shared fp32: a WMMA accumulator's element-to-
 *   row mapping is unspecified). At the end the block's (O / l, m + log l) is merged
 *   into (out, lse) row by row, exactly as the reference does; each (row, head) belongs
 *   to one thread block, so the read-modify-write needs no atomics.
 *   Backward: Dv = rowsum(dout o out) (one warp per row, into scratch); then block =
 *   (key tile, b*NH+h): K, V -> shared; for each query tile (all, or from the diagonal
 *   down when causal): Q, dO -> shared; S = Q K^T, dP = dO V^T; P = exp(scale S - lse)
 *   under the mask, dS = P (dP - Dv); dV += P^T dO and dK += dS^T Q in WMMA registers;
 *   dQ_tile = dS K added into dq with fp32 atomicAdd (several key tiles add into one
 *   query row, so dq's last bits vary between runs); at the end scale dK and dV are
 *   added into dkv (each key row of a head belongs to one thread block: plain adds).
 *   Numerics: Q, K, V, dO, P, dS rounded to bf16; statistics and sums fp32.
 *
 * fp32 (fp32 contexts, and any head size up to 256 the tiles do not take): one warp
 * per query row, 32 keys at a time (a lane per key for the dot products, then the
 * lanes over the head's channels for P V), online softmax in fp32 registers, no
 * shared memory. Backward likewise, dq in registers, dk/dv with atomicAdd (the
 * order of those adds varies between runs). Simple and exact to fp32 rounding, not
 * fast: it is the reference-like mode and the fallback for odd head sizes.
 *
 * The device code lives in attention_block_kernels.cuh (so that a CPU emulation of the
 * CUDA API in tests/gpu runs exactly it); this file holds the host wrappers.
 */
#include <math.h>
#include <mma.h>

#include "kcuda_internal.cuh"

#include "attention_block_kernels.cuh"

/* ---- host side ------------------------------------------------------------------------------ */

int kcuda_attention_block_path(kcuda_precision precision, int B, int C, int NH)
{
    if (NH <= 0 || C <= 0 || C % NH != 0)
        return -1;
    int hs = C / NH;
    if (precision != KCUDA_FP32 && (hs == 16 || hs == 32 || hs == 64 || hs == 128) &&
        (long long)B * NH <= 65535)
        return KCUDA_BLOCK_TENSOR_CORES;
    return hs <= AB_F32_MAX_HS ? KCUDA_BLOCK_FP32 : -1;
}

/* Common argument checks; 1 when there is nothing to do, -1 on a bad shape, else 0. */
static int block_args(kcuda_ctx *k, const char *what, int q_stride, int kv_stride, int B, int Tq,
                      int Tk, int C, int NH)
{
    if (B < 0 || Tq < 0 || Tk < 0 || NH <= 0 || C <= 0 || C % NH != 0)
        return kcuda_fail(k, "%s: bad shape B=%d Tq=%d Tk=%d C=%d NH=%d (C must be a multiple "
                             "of NH)", what, B, Tq, Tk, C, NH);
    if (q_stride < C || kv_stride < 2 * C)
        return kcuda_fail(k, "%s: row strides q %d, kv %d too small for C=%d (q >= C, kv >= 2C)",
                          what, q_stride, kv_stride, C);
    if (kcuda_attention_block_path(k->precision, B, C, NH) < 0)
        return kcuda_fail(k, "%s: head size %d is not supported (at most %d)", what, C / NH,
                          AB_F32_MAX_HS);
    if ((long long)B * NH * Tq > 0x7fffffffLL || (long long)B * NH * Tk > 0x7fffffffLL)
        return kcuda_fail(k, "%s: B*NH*T over 2^31 rows", what);
    return B == 0 || Tq == 0 || Tk == 0 ? 1 : 0;
}

template <int HS>
static int tc_forward(kcuda_ctx *k, float *out, float *lse, const float *q, int q_stride,
                      const float *kv, int kv_stride, int B, int Tq, int Tk, int NH, int causal)
{
    typedef ab_dims<HS> D;
    cudaError_t e = cudaFuncSetAttribute(ab_forward_kernel<HS>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)D::FWD_SMEM);
    if (e != cudaSuccess)
        return kcuda_fail(k, "attention block forward: %zu bytes of shared memory: %s",
                          D::FWD_SMEM, cudaGetErrorString(e));
    dim3 grid((Tq + AB_BR - 1) / AB_BR, B * NH);
    ab_forward_kernel<HS><<<grid, AB_THREADS, D::FWD_SMEM, k->stream>>>(
        out, lse, q, q_stride, kv, kv_stride, Tq, Tk, NH, causal, 1.0f / sqrtf((float)HS));
    return kcuda_check_launch(k, "attention block forward");
}

template <int HS>
static int tc_backward(kcuda_ctx *k, float *dq, int dq_stride, float *dkv, int dkv_stride,
                       const float *dout, const float *out, const float *lse, const float *q,
                       int q_stride, const float *kv, int kv_stride, int B, int Tq, int Tk,
                       int NH, int causal)
{
    typedef ab_dims<HS> D;
    int rows = B * NH * Tq;
    float *Dv = (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, (size_t)rows * sizeof(float));
    if (!Dv)
        return -1;
    ab_dot_kernel<<<(rows + 7) / 8, 256, 0, k->stream>>>(Dv, dout, out, rows, Tq, NH, HS);
    if (kcuda_check_launch(k, "attention block backward (dout . out)") != 0)
        return -1;
    cudaError_t e = cudaFuncSetAttribute(ab_backward_kernel<HS>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         (int)D::BWD_SMEM);
    if (e != cudaSuccess)
        return kcuda_fail(k, "attention block backward: %zu bytes of shared memory: %s",
                          D::BWD_SMEM, cudaGetErrorString(e));
    dim3 grid((Tk + AB_BC - 1) / AB_BC, B * NH);
    ab_backward_kernel<HS><<<grid, AB_THREADS, D::BWD_SMEM, k->stream>>>(
        dq, dq_stride, dkv, dkv_stride, dout, lse, Dv, q, q_stride, kv, kv_stride, Tq, Tk, NH,
        causal, 1.0f / sqrtf((float)HS));
    return kcuda_check_launch(k, "attention block backward");
}

template <int U>
static int f32_forward(kcuda_ctx *k, float *out, float *lse, const float *q, int q_stride,
                       const float *kv, int kv_stride, int B, int Tq, int Tk, int C, int NH,
                       int causal)
{
    size_t rows = (size_t)B * NH * Tq, per_block = AB_F32_THREADS / 32;
    int hs = C / NH;
    ab_forward_f32_kernel<U><<<(unsigned)((rows + per_block - 1) / per_block), AB_F32_THREADS, 0,
                               k->stream>>>(out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH,
                                            hs, causal, 1.0f / sqrtf((float)hs));
    return kcuda_check_launch(k, "attention block forward (fp32)");
}

template <int U>
static int f32_backward(kcuda_ctx *k, float *dq, int dq_stride, float *dkv, int dkv_stride,
                        const float *dout, const float *out, const float *lse, const float *q,
                        int q_stride, const float *kv, int kv_stride, int B, int Tq, int Tk,
                        int C, int NH, int causal)
{
    size_t rows = (size_t)B * NH * Tq, per_block = AB_F32_THREADS / 32;
    int hs = C / NH;
    ab_backward_f32_kernel<U><<<(unsigned)((rows + per_block - 1) / per_block), AB_F32_THREADS,
                                0, k->stream>>>(dq, dq_stride, dkv, dkv_stride, dout, out, lse, q,
                                                q_stride, kv, kv_stride, B, Tq, Tk, NH, hs,
                                                causal, 1.0f / sqrtf((float)hs));
    return kcuda_check_launch(k, "attention block backward (fp32)");
}

int kcuda_attention_block_forward(kcuda_ctx *k, float *out, float *lse, const float *q,
                                  int q_stride, const float *kv, int kv_stride, int B, int Tq,
                                  int Tk, int C, int NH, int causal)
{
    int rc = block_args(k, "attention block forward", q_stride, kv_stride, B, Tq, Tk, C, NH);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    int hs = C / NH;
    if (kcuda_attention_block_path(k->precision, B, C, NH) == KCUDA_BLOCK_TENSOR_CORES) {
        switch (hs) {
        case 16: return tc_forward<16>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, causal);
        case 32: return tc_forward<32>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, causal);
        case 64: return tc_forward<64>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, causal);
        default: return tc_forward<128>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, causal);
        }
    }
    if (hs <= 32)
        return f32_forward<1>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH, causal);
    if (hs <= 64)
        return f32_forward<2>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH, causal);
    if (hs <= 128)
        return f32_forward<4>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH, causal);
    return f32_forward<8>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH, causal);
}

int kcuda_attention_block_backward(kcuda_ctx *k, float *dq, int dq_stride, float *dkv,
                                   int dkv_stride, const float *dout, const float *out,
                                   const float *lse, const float *q, int q_stride, const float *kv,
                                   int kv_stride, int B, int Tq, int Tk, int C, int NH, int causal)
{
    int rc = block_args(k, "attention block backward", q_stride, kv_stride, B, Tq, Tk, C, NH);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (dq_stride < C || dkv_stride < 2 * C)
        return kcuda_fail(k, "attention block backward: row strides dq %d, dkv %d too small for "
                             "C=%d", dq_stride, dkv_stride, C);
    int hs = C / NH;
    if (kcuda_attention_block_path(k->precision, B, C, NH) == KCUDA_BLOCK_TENSOR_CORES) {
        switch (hs) {
        case 16:
            return tc_backward<16>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride,
                                   kv, kv_stride, B, Tq, Tk, NH, causal);
        case 32:
            return tc_backward<32>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride,
                                   kv, kv_stride, B, Tq, Tk, NH, causal);
        case 64:
            return tc_backward<64>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride,
                                   kv, kv_stride, B, Tq, Tk, NH, causal);
        default:
            return tc_backward<128>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride,
                                    kv, kv_stride, B, Tq, Tk, NH, causal);
        }
    }
#define AB_F32_BWD(U)                                                                             \
    f32_backward<U>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride, kv, kv_stride, \
                    B, Tq, Tk, C, NH, causal)
    if (hs <= 32)
        return AB_F32_BWD(1);
    if (hs <= 64)
        return AB_F32_BWD(2);
    if (hs <= 128)
        return AB_F32_BWD(4);
    return AB_F32_BWD(8);
#undef AB_F32_BWD
}
