/*
 * layernorm.cu — LayerNorm over the last dimension, forward and backward, and a
 * fused residual add + LayerNorm forward (host side; the kernels are in act_kernels.cuh,
 * templated on the activation storage type).
 *
 * Math: see kernels/cpu/layernorm.c (eps = 1e-5, biased variance, mean and rstd
 * saved per row; dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w). Activations
 * (inp, out, dout, dinp, the residual) are in the context's type; weight, bias, their
 * gradients, mean and rstd are fp32; all arithmetic is fp32.
 *
 * Forward: one warp per row. The row is read twice from global memory (mean, then
 * the centered sum of squares: more accurate than E[x^2] - E[x]^2 and the second
 * read hits L1/L2) and written once; 16 bytes per lane per access when C is a multiple
 * of 4 (fp32) / 8 (bf16) and the pointers are 16-byte aligned.
 * Backward: one warp per row for dx (two row means, then the closed form, added
 * into dinp: read, add in fp32, store rounded). The parameter gradients sum over all
 * rows: each block owns a range of rows and accumulates dweight/dbias for them in shared
 * memory (2C floats), then adds its partial sums to global memory with one atomicAdd per
 * column — a few hundred atomics per column instead of N.
 * Fused residual: the transformer computes h = x + y and immediately normalizes h;
 * doing both in one pass saves one read of h (used where the device API allows). The
 * normalization reads h as stored (rounded), like the unfused pair of calls.
 */
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

static unsigned ln_blocks(const kcuda_ctx *k, int N) {
  unsigned need = (unsigned)((N + ACT_LN_WARPS - 1) / ACT_LN_WARPS);
  unsigned cap = (unsigned)(k->sm_count > 0 ? k->sm_count : 132) * 4;
  return need < cap ? (need ? need : 1) : cap;
}

template <class T>
static int layernorm_forward(kcuda_ctx *k, T *out, float *mean, float *rstd, const T *inp,
                             const float *weight, const float *bias, int N, int C) {
  layernorm_forward_kernel<T><<<ln_blocks(k, N), ACT_LN_WARPS * 32, 0, k->stream>>>(
      out, mean, rstd, inp, weight, bias, N, C);
  return kcuda_check_launch(k, "layernorm_forward");
}

template <class T>
static int residual_layernorm_forward(kcuda_ctx *k, T *res, T *out, float *mean, float *rstd,
                                      const T *a, const T *b, const float *weight,
                                      const float *bias, int N, int C) {
  residual_layernorm_forward_kernel<T><<<ln_blocks(k, N), ACT_LN_WARPS * 32, 0, k->stream>>>(
      res, out, mean, rstd, a, b, weight, bias, N, C);
  return kcuda_check_launch(k, "residual_layernorm_forward");
}

template <class T>
static int layernorm_backward(kcuda_ctx *k, T *dinp, float *dweight, float *dbias, const T *dout,
                              const T *inp, const float *weight, const float *mean,
                              const float *rstd, int N, int C, size_t smem, unsigned blocks) {
  layernorm_backward_kernel<T><<<blocks, ACT_LN_WARPS * 32, smem, k->stream>>>(
      dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  return kcuda_check_launch(k, "layernorm_backward");
}

int kcuda_layernorm_forward(kcuda_ctx *k, void *out, float *mean, float *rstd, const void *inp,
                            const float *weight, const float *bias, int N, int C) {
  if (N <= 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = layernorm_forward<ACT>(k, (ACT *)out, mean, rstd, (const ACT *)inp, weight,
                                                bias, N, C));
  return rc;
}

int kcuda_residual_layernorm_forward(kcuda_ctx *k, void *residual_out, void *out, float *mean,
                                     float *rstd, const void *a, const void *b, const float *weight,
                                     const float *bias, int N, int C) {
  if (N <= 0) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = residual_layernorm_forward<ACT>(k, (ACT *)residual_out, (ACT *)out, mean,
                                                         rstd, (const ACT *)a, (const ACT *)b,
                                                         weight, bias, N, C));
  return rc;
}

int kcuda_layernorm_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                             const void *dout, const void *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C) {
  size_t smem = 2 * (size_t)C * sizeof(float);
  if (smem > 48 * 1024)
    return kcuda_fail(k,
                      "layernorm_backward: C=%d is larger than the 6144 channels the "
                      "shared-memory accumulators hold",
                      C);
  if (N <= 0) return 0;
  /* fewer blocks than forward: each block's partial sums cost 2C atomics */
  unsigned blocks = ln_blocks(k, N);
  unsigned cap = (unsigned)(k->sm_count > 0 ? k->sm_count : 132) * 2;
  if (blocks > cap) blocks = cap;
  int rc;
  KCUDA_WITH_ACT(k, rc = layernorm_backward<ACT>(k, (ACT *)dinp, dweight, dbias, (const ACT *)dout,
                                                 (const ACT *)inp, weight, mean, rstd, N, C, smem,
                                                 blocks));
  return rc;
}
