/*
 * attention_block.cu — one block of queries against one block of keys and values,
 * merged into a running (out, lse) by log-sum-exp, forward and backward: the device
 * operations of ring attention (context parallelism) on CUDA. The specification is
 * kernels/cpu/attention_block.c (cpu_attention_block_*): same arguments, layouts and
 * rules — q rows q_stride elements apart, k rows kv_stride apart with v at +C, out
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
 * Storage: q, kv, out, dout, dq, dkv are activations of the context's type (k->act: fp32
 * or bf16, loaded and computed in fp32, stored rounded); lse is fp32. The merge into out
 * reads, merges in fp32 and stores rounded. Where blocks accumulate with atomicAdd (dq of
 * the tiles, dk/dv of the fp32 kernels), fp32 storage takes the atomics directly; bf16
 * storage accumulates into zeroed fp32 scratch (KCUDA_SCRATCH_ATTN, after Dv) and one
 * kernel adds it into the activation at the end.
 *
 * The device code lives in attention_block_kernels.cuh (so that a CPU emulation of the
 * CUDA API in tests/gpu runs exactly it); this file holds the host wrappers.
 */
#include <math.h>
#include <mma.h>

#include "kcuda_internal.cuh"

#include "attention_block_kernels.cuh"

/* ---- host side ------------------------------------------------------------------------------ */

int kcuda_attention_block_path(kcuda_precision precision, int B, int C, int NH) {
  if (NH <= 0 || C <= 0 || C % NH != 0) return -1;
  int hs = C / NH;
  if (precision != KCUDA_FP32 && (hs == 16 || hs == 32 || hs == 64 || hs == 128) &&
      (long long)B * NH <= 65535)
    return KCUDA_BLOCK_TENSOR_CORES;
  return hs <= AB_F32_MAX_HS ? KCUDA_BLOCK_FP32 : -1;
}

/* Common argument checks; 1 when there is nothing to do, -1 on a bad shape, else 0. */
static int block_args(kcuda_ctx *k, const char *what, int q_stride, int kv_stride, int B, int Tq,
                      int Tk, int C, int NH) {
  if (B < 0 || Tq < 0 || Tk < 0 || NH <= 0 || C <= 0 || C % NH != 0)
    return kcuda_fail(k,
                      "%s: bad shape B=%d Tq=%d Tk=%d C=%d NH=%d (C must be a multiple "
                      "of NH)",
                      what, B, Tq, Tk, C, NH);
  if (q_stride < C || kv_stride < 2 * C)
    return kcuda_fail(k, "%s: row strides q %d, kv %d too small for C=%d (q >= C, kv >= 2C)", what,
                      q_stride, kv_stride, C);
  if (kcuda_attention_block_path(k->precision, B, C, NH) < 0)
    return kcuda_fail(k, "%s: head size %d is not supported (at most %d)", what, C / NH,
                      AB_F32_MAX_HS);
  if ((long long)B * NH * Tq > 0x7fffffffLL || (long long)B * NH * Tk > 0x7fffffffLL)
    return kcuda_fail(k, "%s: B*NH*T over 2^31 rows", what);
  return B == 0 || Tq == 0 || Tk == 0 ? 1 : 0;
}

/* Scratch (KCUDA_SCRATCH_ATTN) for `head` floats and then, when acc_floats > 0, a zeroed
 * fp32 accumulator of acc_floats at *acc (256-byte aligned). NULL after kcuda_fail. */
static float *attn_scratch(kcuda_ctx *k, size_t head, size_t acc_floats, float **acc) {
  size_t head_pad = (head + 63) / 64 * 64;
  float *s =
      (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, (head_pad + acc_floats) * sizeof(float) + 1);
  if (!s) return NULL;
  *acc = NULL;
  if (acc_floats > 0) {
    *acc = s + head_pad;
    cudaError_t e = cudaMemsetAsync(*acc, 0, acc_floats * sizeof(float), k->stream);
    if (e != cudaSuccess) {
      kcuda_fail(k, "attention block: clearing %zu bytes of scratch: %s",
                 acc_floats * sizeof(float), cudaGetErrorString(e));
      return NULL;
    }
  }
  return s;
}

/* dst (rows x width activations, rows dst_stride apart) += src (fp32, packed). */
template <class ACT>
static int add_rows_into(kcuda_ctx *k, ACT *dst, int dst_stride, const float *src, size_t rows,
                         int width, const char *what) {
  at_add_rows_kernel<ACT><<<kcuda_grid_for(k, rows * (size_t)width, 256), 256, 0, k->stream>>>(
      dst, dst_stride, src, rows, width);
  return kcuda_check_launch(k, what);
}

template <int HS, class ACT>
static int tc_forward(kcuda_ctx *k, ACT *out, float *lse, const ACT *q, int q_stride, const ACT *kv,
                      int kv_stride, int B, int Tq, int Tk, int NH, int causal) {
  typedef at_dims<HS> D;
  if (kcuda_allow_shared(k, ab_forward_kernel<HS, ACT>, D::FWD_SMEM, "attention block forward"))
    return -1;
  dim3 grid((Tq + AT_BR - 1) / AT_BR, B * NH);
  ab_forward_kernel<HS, ACT><<<grid, AT_THREADS, D::FWD_SMEM, k->stream>>>(
      out, lse, q, q_stride, kv, kv_stride, Tq, Tk, NH, causal, 1.0f / sqrtf((float)HS));
  return kcuda_check_launch(k, "attention block forward");
}

template <int HS, class ACT>
static int tc_backward(kcuda_ctx *k, ACT *dq, int dq_stride, ACT *dkv, int dkv_stride,
                       const ACT *dout, const ACT *out, const float *lse, const ACT *q,
                       int q_stride, const ACT *kv, int kv_stride, int B, int Tq, int Tk, int NH,
                       int causal) {
  typedef at_dims<HS> D;
  const int C = NH * HS, rows = B * NH * Tq;
  const bool f32 = sizeof(ACT) == sizeof(float);
  /* dq's atomics: into dq itself (fp32 storage) or into zeroed fp32 scratch [B*Tq, C] */
  float *dq_acc = NULL;
  float *Dv = attn_scratch(k, (size_t)rows, f32 ? 0 : (size_t)B * Tq * C, &dq_acc);
  if (!Dv) return -1;
  ab_dot_kernel<ACT><<<(rows + 7) / 8, 256, 0, k->stream>>>(Dv, dout, out, rows, Tq, NH, HS);
  if (kcuda_check_launch(k, "attention block backward (dout . out)") != 0) return -1;
  if (kcuda_allow_shared(k, ab_backward_kernel<HS, ACT>, D::BWD_SMEM, "attention block backward"))
    return -1;
  dim3 grid((Tk + AT_BC - 1) / AT_BC, B * NH);
  ab_backward_kernel<HS, ACT><<<grid, AT_THREADS, D::BWD_SMEM, k->stream>>>(
      f32 ? (float *)(void *)dq : dq_acc, f32 ? dq_stride : C, dkv, dkv_stride, dout, lse, Dv, q,
      q_stride, kv, kv_stride, Tq, Tk, NH, causal, 1.0f / sqrtf((float)HS));
  if (kcuda_check_launch(k, "attention block backward") != 0) return -1;
  if (f32) return 0;
  return add_rows_into(k, dq, dq_stride, dq_acc, (size_t)B * Tq, C,
                       "attention block backward (dq into bf16)");
}

template <int U, class ACT>
static int f32_forward(kcuda_ctx *k, ACT *out, float *lse, const ACT *q, int q_stride,
                       const ACT *kv, int kv_stride, int B, int Tq, int Tk, int C, int NH,
                       int causal) {
  size_t rows = (size_t)B * NH * Tq, per_block = AB_F32_THREADS / 32;
  int hs = C / NH;
  ab_forward_f32_kernel<U, ACT>
      <<<(unsigned)((rows + per_block - 1) / per_block), AB_F32_THREADS, 0, k->stream>>>(
          out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, hs, causal, 1.0f / sqrtf((float)hs));
  return kcuda_check_launch(k, "attention block forward (fp32)");
}

template <int U, class ACT>
static int f32_backward(kcuda_ctx *k, ACT *dq, int dq_stride, ACT *dkv, int dkv_stride,
                        const ACT *dout, const ACT *out, const float *lse, const ACT *q,
                        int q_stride, const ACT *kv, int kv_stride, int B, int Tq, int Tk, int C,
                        int NH, int causal) {
  size_t rows = (size_t)B * NH * Tq, per_block = AB_F32_THREADS / 32;
  int hs = C / NH;
  const bool f32 = sizeof(ACT) == sizeof(float);
  /* dk/dv's atomics: into dkv itself (fp32 storage) or into zeroed fp32 scratch [B*Tk, 2C] */
  float *dkv_acc = NULL;
  if (!f32 && !attn_scratch(k, 0, (size_t)B * Tk * 2 * C, &dkv_acc)) return -1;
  ab_backward_f32_kernel<U, ACT>
      <<<(unsigned)((rows + per_block - 1) / per_block), AB_F32_THREADS, 0, k->stream>>>(
          dq, dq_stride, f32 ? (float *)(void *)dkv : dkv_acc, f32 ? dkv_stride : 2 * C, dout, out,
          lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, hs, causal, 1.0f / sqrtf((float)hs));
  if (kcuda_check_launch(k, "attention block backward (fp32)") != 0) return -1;
  if (f32) return 0;
  return add_rows_into(k, dkv, dkv_stride, dkv_acc, (size_t)B * Tk, 2 * C,
                       "attention block backward (dkv into bf16)");
}

template <class ACT>
static int block_forward(kcuda_ctx *k, ACT *out, float *lse, const ACT *q, int q_stride,
                         const ACT *kv, int kv_stride, int B, int Tq, int Tk, int C, int NH,
                         int causal) {
  int hs = C / NH;
  if (kcuda_attention_block_path(k->precision, B, C, NH) == KCUDA_BLOCK_TENSOR_CORES) {
#define AB_TC_FWD(HS)                                                                              \
  tc_forward<HS, ACT>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, NH, causal)
    switch (hs) {
    case 16: return AB_TC_FWD(16);
    case 32: return AB_TC_FWD(32);
    case 64: return AB_TC_FWD(64);
    default: return AB_TC_FWD(128);
    }
#undef AB_TC_FWD
  }
#define AB_F32_FWD(U)                                                                              \
  f32_forward<U, ACT>(k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH, causal)
  if (hs <= 32) return AB_F32_FWD(1);
  if (hs <= 64) return AB_F32_FWD(2);
  if (hs <= 128) return AB_F32_FWD(4);
  return AB_F32_FWD(8);
#undef AB_F32_FWD
}

template <class ACT>
static int block_backward(kcuda_ctx *k, ACT *dq, int dq_stride, ACT *dkv, int dkv_stride,
                          const ACT *dout, const ACT *out, const float *lse, const ACT *q,
                          int q_stride, const ACT *kv, int kv_stride, int B, int Tq, int Tk, int C,
                          int NH, int causal) {
  int hs = C / NH;
  if (kcuda_attention_block_path(k->precision, B, C, NH) == KCUDA_BLOCK_TENSOR_CORES) {
#define AB_TC_BWD(HS)                                                                              \
  tc_backward<HS, ACT>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride, kv,         \
                       kv_stride, B, Tq, Tk, NH, causal)
    switch (hs) {
    case 16: return AB_TC_BWD(16);
    case 32: return AB_TC_BWD(32);
    case 64: return AB_TC_BWD(64);
    default: return AB_TC_BWD(128);
    }
#undef AB_TC_BWD
  }
#define AB_F32_BWD(U)                                                                              \
  f32_backward<U, ACT>(k, dq, dq_stride, dkv, dkv_stride, dout, out, lse, q, q_stride, kv,         \
                       kv_stride, B, Tq, Tk, C, NH, causal)
  if (hs <= 32) return AB_F32_BWD(1);
  if (hs <= 64) return AB_F32_BWD(2);
  if (hs <= 128) return AB_F32_BWD(4);
  return AB_F32_BWD(8);
#undef AB_F32_BWD
}

int kcuda_attention_block_forward(kcuda_ctx *k, void *out, float *lse, const void *q, int q_stride,
                                  const void *kv, int kv_stride, int B, int Tq, int Tk, int C,
                                  int NH, int causal) {
  int rc = block_args(k, "attention block forward", q_stride, kv_stride, B, Tq, Tk, C, NH);
  if (rc != 0) return rc < 0 ? -1 : 0;
  KCUDA_WITH_ACT(k, rc = block_forward<ACT>(k, (ACT *)out, lse, (const ACT *)q, q_stride,
                                            (const ACT *)kv, kv_stride, B, Tq, Tk, C, NH, causal));
  return rc;
}

int kcuda_attention_block_backward(kcuda_ctx *k, void *dq, int dq_stride, void *dkv, int dkv_stride,
                                   const void *dout, const void *out, const float *lse,
                                   const void *q, int q_stride, const void *kv, int kv_stride,
                                   int B, int Tq, int Tk, int C, int NH, int causal) {
  int rc = block_args(k, "attention block backward", q_stride, kv_stride, B, Tq, Tk, C, NH);
  if (rc != 0) return rc < 0 ? -1 : 0;
  if (dq_stride < C || dkv_stride < 2 * C)
    return kcuda_fail(k,
                      "attention block backward: row strides dq %d, dkv %d too small for "
                      "C=%d",
                      dq_stride, dkv_stride, C);
  KCUDA_WITH_ACT(k, rc = block_backward<ACT>(k, (ACT *)dq, dq_stride, (ACT *)dkv, dkv_stride,
                                             (const ACT *)dout, (const ACT *)out, lse,
                                             (const ACT *)q, q_stride, (const ACT *)kv, kv_stride,
                                             B, Tq, Tk, C, NH, causal));
  return rc;
}
