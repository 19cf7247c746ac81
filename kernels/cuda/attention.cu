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
 *
 * Storage: qkv, out, dout, dqkv are activations of the context's type (k->act); preatt,
 * att, dpreatt, datt stay fp32. The permuted heads q, k, v, y, dy are scratch of the
 * activation type too: with bf16 storage (a bf16-precision context) the permute kernels
 * copy bf16 as it is and the GEMMs take the bf16 operands directly (kcuda_gemm_ex), except
 * that the fp32 T x T operands (att, dpreatt) are cast to bf16 scratch first, which is what
 * a bf16-precision GEMM does with fp32 operands anyway; y is written by its GEMM in bf16.
 * dq, dk, dv come out of their GEMMs in fp32 and are added into dqkv by one kernel (read,
 * add in fp32, store rounded: one rounding per call). With fp32 storage everything is as
 * before (fp32 scratch; the GEMMs cast to bf16 themselves in a bf16 context).
 */
#include <math.h>

#include "kcuda_internal.cuh"

/* Where element i of a head-major [B,NH,T,hs] tensor goes in a token-major tensor whose
 * rows (b, t) are row_width wide and hold the heads side by side: row_width = NH*hs for
 * out and dout, 3*NH*hs for qkv (the offset is then q's; k and v follow at +C, +2C). */
__device__ __forceinline__ size_t token_major_offset(size_t i, int T, int NH, int hs,
                                                     size_t row_width) {
  int d = (int)(i % hs);
  size_t r = i / hs;
  int t = (int)(r % T);
  r /= T;
  int h = (int)(r % NH);
  int b = (int)(r / NH);
  return ((size_t)b * T + t) * row_width + (size_t)h * hs + d;
}

/* qkv [B,T,3,NH,hs] -> q,k,v each [B,NH,T,hs] (same element type) */
template <class ACT>
__global__ void permute_qkv_kernel(ACT *q, ACT *k, ACT *v, const ACT *qkv, int B, int T, int NH,
                                   int hs) {
  size_t total = (size_t)B * NH * T * hs;
  int C = NH * hs;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t src = token_major_offset(i, T, NH, hs, 3 * (size_t)C);
    q[i] = qkv[src];
    k[i] = qkv[src + C];
    v[i] = qkv[src + 2 * (size_t)C];
  }
}

/* y [B,NH,T,hs] -> out [B,T,NH*hs] (overwrite; same element type) */
template <class ACT>
__global__ void unpermute_kernel(ACT *out, const ACT *y, int B, int T, int NH, int hs) {
  size_t total = (size_t)B * NH * T * hs;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x)
    out[token_major_offset(i, T, NH, hs, (size_t)NH * hs)] = y[i];
}

/* dout [B,T,NH*hs] -> dy [B,NH,T,hs] (same element type) */
template <class ACT>
__global__ void permute_dout_kernel(ACT *dy, const ACT *dout, int B, int T, int NH, int hs) {
  size_t total = (size_t)B * NH * T * hs;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x)
    dy[i] = dout[token_major_offset(i, T, NH, hs, (size_t)NH * hs)];
}

/* dqkv [B,T,3,NH,hs] += (dq | dk | dv) [B,NH,T,hs] (fp32; read, add, store rounded) */
template <class ACT>
__global__ void unpermute_add_qkv_kernel(ACT *dqkv, const float *dq, const float *dk,
                                         const float *dv, int B, int T, int NH, int hs) {
  size_t total = (size_t)B * NH * T * hs;
  int C = NH * hs;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
       i += (size_t)gridDim.x * blockDim.x) {
    size_t dst = token_major_offset(i, T, NH, hs, 3 * (size_t)C);
    kcuda_st(dqkv, dst, kcuda_ld(dqkv, dst) + dq[i]);
    kcuda_st(dqkv, dst + C, kcuda_ld(dqkv, dst + C) + dk[i]);
    kcuda_st(dqkv, dst + 2 * (size_t)C, kcuda_ld(dqkv, dst + 2 * (size_t)C) + dv[i]);
  }
}

/* One warp per row (b, h, t) of the [B*NH*T, T] score matrix. */
__global__ void causal_softmax_kernel(float *att, float *preatt, int rows, int T) {
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
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
                                               int rows, int T) {
  int lane = threadIdx.x & 31;
  int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= rows) return;
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

template <class ACT> static cudaDataType_t act_type();
template <> cudaDataType_t act_type<float>() {
  return CUDA_R_32F;
}
template <> cudaDataType_t act_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}

/* n elements rounded up to 128 bytes' worth, so that each scratch region stays aligned */
template <class T> static size_t padded(size_t n) {
  size_t per = 128 / sizeof(T);
  return (n + per - 1) / per * per;
}

/* An fp32 T x T operand (att, dpreatt) as a GEMM operand next to ACT operands: as it is for
 * fp32 storage, a bf16 copy (KCUDA_SCRATCH_CAST_A) for bf16 storage. NULL after kcuda_fail. */
template <class ACT> static const ACT *tt_operand(kcuda_ctx *k, const float *x, size_t n) {
  if (sizeof(ACT) == sizeof(float)) return (const ACT *)(const void *)x;
  void *c = kcuda_scratch(k, KCUDA_SCRATCH_CAST_A, n * 2);
  if (!c || kcuda_cast_f32_to_bf16(k, c, x, n) != 0) return NULL;
  return (const ACT *)c;
}

static int check_args(kcuda_ctx *k, const char *what, int C, int NH) {
  if (NH <= 0 || C % NH != 0)
    return kcuda_fail(k, "%s: C=%d is not a multiple of NH=%d", what, C, NH);
  if (k->act == KCUDA_ACT_BF16 && k->precision != KCUDA_BF16)
    return kcuda_fail(k, "%s: bf16 activations need a bf16-precision context", what);
  return 0;
}

template <class ACT>
static int attention_forward(kcuda_ctx *k, ACT *out, float *preatt, float *att, const ACT *qkv,
                             int B, int T, int C, int NH) {
  int hs = C / NH, batch = B * NH;
  size_t n = (size_t)B * T * C, np = padded<ACT>(n);
  ACT *scr = (ACT *)kcuda_scratch(k, KCUDA_SCRATCH_ATTN, 4 * np * sizeof(ACT));
  if (!scr) return -1;
  ACT *q = scr, *kk = scr + np, *v = scr + 2 * np, *y = scr + 3 * np;
  const cudaDataType_t at = act_type<ACT>();
  unsigned grid = kcuda_grid_for(k, n, 256);
  permute_qkv_kernel<ACT><<<grid, 256, 0, k->stream>>>(q, kk, v, qkv, B, T, NH, hs);
  if (kcuda_check_launch(k, "attention_forward permute") != 0) return -1;
  float scale = 1.0f / sqrtf((float)hs);
  long long sH = (long long)T * hs, sTT = (long long)T * T;
  if (kcuda_gemm_ex(k, 0, 1, T, T, hs, scale, q, kk, at, 0.0f, preatt, CUDA_R_32F, batch, sH, sH,
                    sTT) != 0)
    return -1;
  int rows = batch * T;
  causal_softmax_kernel<<<(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK, ROWS_PER_BLOCK * 32, 0,
                          k->stream>>>(att, preatt, rows, T);
  if (kcuda_check_launch(k, "attention_forward softmax") != 0) return -1;
  const ACT *a = tt_operand<ACT>(k, att, (size_t)batch * T * T);
  if (!a) return -1;
  if (kcuda_gemm_ex(k, 0, 0, T, hs, T, 1.0f, a, v, at, 0.0f, y, at, batch, sTT, sH, sH) != 0)
    return -1;
  unpermute_kernel<ACT><<<grid, 256, 0, k->stream>>>(out, y, B, T, NH, hs);
  return kcuda_check_launch(k, "attention_forward unpermute");
}

template <class ACT>
static int attention_backward(kcuda_ctx *k, ACT *dqkv, float *dpreatt, float *datt, const ACT *dout,
                              const ACT *qkv, const float *att, int B, int T, int C, int NH) {
  int hs = C / NH, batch = B * NH;
  size_t n = (size_t)B * T * C, np = padded<ACT>(n), nf = padded<float>(n);
  /* q, k, v, dy of the activation type, then dq, dk, dv in fp32 */
  unsigned char *scr = (unsigned char *)kcuda_scratch(
      k, KCUDA_SCRATCH_ATTN, 4 * np * sizeof(ACT) + 3 * nf * sizeof(float));
  if (!scr) return -1;
  ACT *q = (ACT *)scr, *kk = q + np, *v = q + 2 * np, *dy = q + 3 * np;
  float *dq = (float *)(scr + 4 * np * sizeof(ACT)), *dk = dq + nf, *dv = dq + 2 * nf;
  const cudaDataType_t at = act_type<ACT>();
  unsigned grid = kcuda_grid_for(k, n, 256);
  permute_qkv_kernel<ACT><<<grid, 256, 0, k->stream>>>(q, kk, v, qkv, B, T, NH, hs);
  permute_dout_kernel<ACT><<<grid, 256, 0, k->stream>>>(dy, dout, B, T, NH, hs);
  if (kcuda_check_launch(k, "attention_backward permute") != 0) return -1;
  float scale = 1.0f / sqrtf((float)hs);
  long long sH = (long long)T * hs, sTT = (long long)T * T;
  size_t ntt = (size_t)batch * T * T;
  /* datt[T,T] = dy[T,hs] v^T;  dv[T,hs] = att^T dy */
  if (kcuda_gemm_ex(k, 0, 1, T, T, hs, 1.0f, dy, v, at, 0.0f, datt, CUDA_R_32F, batch, sH, sH,
                    sTT) != 0)
    return -1;
  const ACT *a = tt_operand<ACT>(k, att, ntt);
  if (!a || kcuda_gemm_ex(k, 1, 0, T, hs, T, 1.0f, a, dy, at, 0.0f, dv, CUDA_R_32F, batch, sTT, sH,
                          sH) != 0)
    return -1;
  int rows = batch * T;
  causal_softmax_backward_kernel<<<(rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK,
                                   ROWS_PER_BLOCK * 32, 0, k->stream>>>(dpreatt, datt, att, rows,
                                                                        T);
  if (kcuda_check_launch(k, "attention_backward softmax") != 0) return -1;
  /* dq = scale dpreatt k;  dk = scale dpreatt^T q (the bf16 copy of dpreatt reuses the
   * scratch of att's: the stream orders the cast after the GEMM that read att's) */
  const ACT *dp = tt_operand<ACT>(k, dpreatt, ntt);
  if (!dp) return -1;
  if (kcuda_gemm_ex(k, 0, 0, T, hs, T, scale, dp, kk, at, 0.0f, dq, CUDA_R_32F, batch, sTT, sH,
                    sH) != 0)
    return -1;
  if (kcuda_gemm_ex(k, 1, 0, T, hs, T, scale, dp, q, at, 0.0f, dk, CUDA_R_32F, batch, sTT, sH,
                    sH) != 0)
    return -1;
  unpermute_add_qkv_kernel<ACT><<<grid, 256, 0, k->stream>>>(dqkv, dq, dk, dv, B, T, NH, hs);
  return kcuda_check_launch(k, "attention_backward unpermute");
}

int kcuda_attention_forward(kcuda_ctx *k, void *out, float *preatt, float *att, const void *qkv,
                            int B, int T, int C, int NH) {
  if (check_args(k, "attention_forward", C, NH) != 0) return -1;
  int rc;
  KCUDA_WITH_ACT(
      k, rc = attention_forward<ACT>(k, (ACT *)out, preatt, att, (const ACT *)qkv, B, T, C, NH));
  return rc;
}

int kcuda_attention_backward(kcuda_ctx *k, void *dqkv, float *dpreatt, float *datt,
                             const void *dout, const void *qkv, const float *att, int B, int T,
                             int C, int NH) {
  if (check_args(k, "attention_backward", C, NH) != 0) return -1;
  int rc;
  KCUDA_WITH_ACT(k, rc = attention_backward<ACT>(k, (ACT *)dqkv, dpreatt, datt, (const ACT *)dout,
                                                 (const ACT *)qkv, att, B, T, C, NH));
  return rc;
}
