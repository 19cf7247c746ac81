/*
 * flash_attention.cu — fused causal attention (flash-attention style), forward and
 * backward, on bf16 tensor cores (WMMA 16x16x16, fp32 accumulation), with no T x T
 * buffer. The CUDA device selects it with STEPSCOPE_CUDA_ATTENTION=fused; the
 * default stays the batched-GEMM path of attention.cu until a GPU run shows which is
 * faster (docs/cuda-backend.md). kernels/cpu/attention.c is the specification of
 * what is computed; the saved tensors differ (below).
 *
 * Shapes: qkv [B,T,3,NH,hs] as in attention.c, hs in {32, 64, 128}. Tiles of 64
 * queries x 64 keys; a block of 4 warps, each warp owning 16 rows of a tile.
 *
 * Forward, block = (query tile, b*NH+h), heaviest (last) query tiles first:
 *   Q tile -> shared (bf16). For each key tile up to the diagonal: K, V -> shared
 *   (bf16); S = Q K^T (WMMA, fp32) into the warp's scratch; the causal mask and the
 *   online softmax per row (2 lanes per row): m' = max(m, rowmax(s)),
 *   P = exp(s - m') (bf16), l = l exp(m - m') + rowsum(P), O = O exp(m - m') + P V
 *   (O kept in shared fp32, since a WMMA accumulator's element-to-row mapping is
 *   unspecified and cannot be rescaled per row in registers). Finally out = O / l and
 *   the row's log-sum-exp lse = m + log l.
 * Saved for backward (the device API passes `att` [B,NH,T,T] from forward to
 * backward): att[0 .. B*NH*T) holds lse, and att[B*NH*T ..) a copy of O in
 * [B,NH,T,hs] layout (needs T >= hs + 1 floats per row: kcuda_attention_fused_supported
 * says so; otherwise the device uses the GEMM path). preatt is not used.
 *
 * Backward (FlashAttention-2), block = (key tile, b*NH+h):
 *   Dv_i = dO_i . O_i (a small kernel, one warp per row);
 *   K, V tile -> shared; for each query tile from the diagonal down: Q, dO -> shared;
 *   S = Q K^T, dP = dO V^T (WMMA); P = exp(scale S - lse) under the causal mask,
 *   dS = P (dP - Dv) (bf16, shared); dV += P^T dO and dK += dS^T Q accumulate in
 *   WMMA registers (each warp owns 16 keys); dQ_tile = dS K goes to dqkv with
 *   atomicAdd (several key tiles add into one query row: the order, and so the last
 *   bits, vary between runs). At the end dK (times the softmax scale) and dV are added
 *   into dqkv (each key row belongs to one block: plain adds).
 *   Like every backward, dqkv accumulates; dpreatt and datt are not used.
 * Numerics: Q, K, V, dO, P and dS are rounded to bf16 for the tensor cores; sums,
 * softmax statistics and outputs are fp32. Tolerances are in tests/gpu.
 *
 * Storage: qkv, out, dout and dqkv are activations of the context's type (k->act): with
 * bf16 storage the tiles load q, k, v, dO as they are (no conversion), out is stored
 * rounded, the k|v columns of dqkv are read, added in fp32 and stored rounded, and dq,
 * which several key tiles add into with atomics, accumulates in zeroed fp32 scratch
 * (KCUDA_SCRATCH_ATTN, after Dv) that one kernel adds into dqkv at the end. att (lse and
 * the output copy, used for Dv) stays fp32. With fp32 storage dq's atomics go straight
 * into dqkv, as before.
 *
 * The device code lives in flash_attention_kernels.cuh (so that the CPU emulation in
 * tests/gpu runs exactly it); this file holds the host side.
 */
#include <math.h>
#include <mma.h>

#include "kcuda_internal.cuh"

#include "flash_attention_kernels.cuh"

/* ---- host side ------------------------------------------------------------------------------ */

int kcuda_attention_fused_supported(int B, int T, int C, int NH) {
  if (B <= 0 || T <= 0 || NH <= 0 || C % NH != 0 || B * NH > 65535) return 0;
  int hs = C / NH;
  return (hs == 32 || hs == 64 || hs == 128) && T >= hs + 1;
}

template <int HS, class ACT>
static int fused_forward(kcuda_ctx *k, ACT *out, float *att, const ACT *qkv, int B, int T, int NH) {
  typedef at_dims<HS> D;
  if (kcuda_allow_shared(k, flash_forward_kernel<HS, ACT>, D::FWD_SMEM, "fused attention forward"))
    return -1;
  size_t rows = (size_t)B * NH * T;
  dim3 grid((T + AT_BR - 1) / AT_BR, B * NH);
  flash_forward_kernel<HS, ACT><<<grid, AT_THREADS, D::FWD_SMEM, k->stream>>>(
      out, att, att + rows, qkv, T, NH, 1.0f / sqrtf((float)HS));
  return kcuda_check_launch(k, "fused attention forward");
}

template <int HS, class ACT>
static int fused_backward(kcuda_ctx *k, ACT *dqkv, const ACT *dout, const ACT *qkv,
                          const float *att, int B, int T, int NH) {
  typedef at_dims<HS> D;
  const int C = NH * HS, rows = B * NH * T;
  const bool f32 = sizeof(ACT) == sizeof(float);
  /* scratch: Dv [rows], then (bf16 storage) dq's fp32 accumulator [B*T, C], zeroed */
  size_t dv_pad = ((size_t)rows + 63) / 64 * 64, nacc = f32 ? 0 : (size_t)B * T * C;
  float *Dv = (float *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, (dv_pad + nacc) * sizeof(float));
  if (!Dv) return -1;
  float *dq_acc = Dv + dv_pad;
  if (!f32) {
    cudaError_t ze = cudaMemsetAsync(dq_acc, 0, nacc * sizeof(float), k->stream);
    if (ze != cudaSuccess)
      return kcuda_fail(k, "fused attention backward: clearing %zu bytes of scratch: %s",
                        nacc * sizeof(float), cudaGetErrorString(ze));
  }
  flash_backward_dot_kernel<ACT>
      <<<(rows + 7) / 8, 256, 0, k->stream>>>(Dv, dout, att + rows, rows, T, NH, HS);
  if (kcuda_check_launch(k, "fused attention backward (dO . O)") != 0) return -1;
  if (kcuda_allow_shared(k, flash_backward_kernel<HS, ACT>, D::BWD_SMEM,
                         "fused attention backward"))
    return -1;
  dim3 grid((T + AT_BC - 1) / AT_BC, B * NH);
  flash_backward_kernel<HS, ACT><<<grid, AT_THREADS, D::BWD_SMEM, k->stream>>>(
      f32 ? (float *)(void *)dqkv : dq_acc, f32 ? 3 * C : C, dqkv, dout, qkv, att, Dv, T, NH,
      1.0f / sqrtf((float)HS));
  if (kcuda_check_launch(k, "fused attention backward") != 0) return -1;
  if (f32) return 0;
  size_t n = (size_t)B * T * C;
  at_add_rows_kernel<ACT>
      <<<kcuda_grid_for(k, n, 256), 256, 0, k->stream>>>(dqkv, 3 * C, dq_acc, (size_t)B * T, C);
  return kcuda_check_launch(k, "fused attention backward (dq into bf16)");
}

template <class ACT>
static int forward_hs(kcuda_ctx *k, ACT *out, float *att, const ACT *qkv, int B, int T, int C,
                      int NH) {
  switch (C / NH) {
  case 32: return fused_forward<32, ACT>(k, out, att, qkv, B, T, NH);
  case 64: return fused_forward<64, ACT>(k, out, att, qkv, B, T, NH);
  default: return fused_forward<128, ACT>(k, out, att, qkv, B, T, NH);
  }
}

template <class ACT>
static int backward_hs(kcuda_ctx *k, ACT *dqkv, const ACT *dout, const ACT *qkv, const float *att,
                       int B, int T, int C, int NH) {
  switch (C / NH) {
  case 32: return fused_backward<32, ACT>(k, dqkv, dout, qkv, att, B, T, NH);
  case 64: return fused_backward<64, ACT>(k, dqkv, dout, qkv, att, B, T, NH);
  default: return fused_backward<128, ACT>(k, dqkv, dout, qkv, att, B, T, NH);
  }
}

/* bf16 storage belongs to bf16-precision contexts (kcuda_ctx_set_act_dtype refuses others). */
static int check_act(kcuda_ctx *k) {
  if (k->act == KCUDA_ACT_BF16 && k->precision != KCUDA_BF16)
    return kcuda_fail(k, "fused attention: bf16 activations need a bf16-precision context");
  return 0;
}

int kcuda_attention_forward_fused(kcuda_ctx *k, void *out, float *att, const void *qkv, int B,
                                  int T, int C, int NH) {
  if (!kcuda_attention_fused_supported(B, T, C, NH))
    return kcuda_fail(k,
                      "fused attention: unsupported shape B=%d T=%d C=%d NH=%d (head size "
                      "32, 64 or 128 and T > head size)",
                      B, T, C, NH);
  if (check_act(k) != 0) return -1;
  int rc;
  KCUDA_WITH_ACT(k, rc = forward_hs<ACT>(k, (ACT *)out, att, (const ACT *)qkv, B, T, C, NH));
  return rc;
}

int kcuda_attention_backward_fused(kcuda_ctx *k, void *dqkv, const void *dout, const void *qkv,
                                   const float *att, int B, int T, int C, int NH) {
  if (!kcuda_attention_fused_supported(B, T, C, NH))
    return kcuda_fail(k, "fused attention: unsupported shape B=%d T=%d C=%d NH=%d", B, T, C, NH);
  if (check_act(k) != 0) return -1;
  int rc;
  KCUDA_WITH_ACT(k, rc = backward_hs<ACT>(k, (ACT *)dqkv, (const ACT *)dout, (const ACT *)qkv, att,
                                          B, T, C, NH));
  return rc;
}
