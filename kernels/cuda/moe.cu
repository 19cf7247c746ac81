/*
 * moe.cu — the mixture-of-experts kernels' host side: argument checks, grid sizes, scratch
 * and the launch sequence of each operation (the device code and the design are in
 * moe_kernels.cuh; kernels/cpu/moe_*.c is the specification).
 *
 * Everything is enqueued on the context's stream and nothing that depends on the routing
 * comes back to the host: grids are sized for the bounds (N K rows, ceil(N K / 64) + E row
 * tiles) and the kernels read offsets[E] themselves. Scratch (the plan's ranks and
 * per-chunk histograms; the aux loss's counts and per-expert sums) lives in the context's
 * KCUDA_SCRATCH_MOE slot, stream-ordered like every other scratch buffer.
 *
 * The grouped GEMM runs on bf16 tensor cores (moe_grouped_gemm_tc_kernel) in a KCUDA_BF16
 * context, like the dense GEMMs there (bf16 operands, weights rounded as they are loaded,
 * fp32 accumulation), and as fp32 SIMT tiles in fp32 and TF32 contexts (exact fp32 math).
 */
#include <mma.h>

#include "kcuda_internal.cuh"

#include "moe_kernels.cuh"

static int moe_check(kcuda_ctx *k, const char *what, int N, int E, int K) {
  if (N < 0 || E <= 0 || K <= 0 || K > E)
    return kcuda_fail(k, "%s: bad shape N=%d E=%d K=%d (need N >= 0, 0 < K <= E)", what, N, E, K);
  if (E > MOE_MAX_EXPERTS)
    return kcuda_fail(k, "%s: %d experts; the CUDA kernels take at most %d", what, E,
                      MOE_MAX_EXPERTS);
  if ((long long)N * K > 0x7fffffffLL)
    return kcuda_fail(k, "%s: N x K = %lld assignments overflow int", what, (long long)N * K);
  return 0;
}

static unsigned grid_cap(const kcuda_ctx *k, long long blocks) {
  long long cap = (long long)(k->sm_count > 0 ? k->sm_count : 132) * 16;
  if (blocks > cap) blocks = cap;
  return blocks > 0 ? (unsigned)blocks : 1u;
}

/* counts[e] of the routing decisions expert[N,K] */
static int count_assignments(kcuda_ctx *k, int *counts, const int *expert, int NK, int E) {
  moe_count_kernel<<<grid_cap(k, E), MOE_THREADS, 0, k->stream>>>(counts, expert, NK, E);
  return kcuda_check_launch(k, "moe count");
}

/* ---- router ----------------------------------------------------------------------------- */

template <class T>
static int router_forward(kcuda_ctx *k, int *expert, float *gate, float *probs, const T *logits,
                          int N, int E, int K, int renorm) {
  moe_router_forward_kernel<T><<<grid_cap(k, (N + 127) / 128), 128, 0, k->stream>>>(
      expert, gate, probs, logits, N, E, K, renorm);
  return kcuda_check_launch(k, "moe_router_forward");
}

int kcuda_moe_router_forward(kcuda_ctx *k, int *expert, float *gate, float *probs,
                             const void *logits, int N, int E, int K, int renorm) {
  if (moe_check(k, "moe_router_forward", N, E, K)) return -1;
  if (N == 0) return 0;
  int rc;
  KCUDA_WITH_ACT(
      k, rc = router_forward<ACT>(k, expert, gate, probs, (const ACT *)logits, N, E, K, renorm));
  return rc;
}

template <class T>
static int router_backward(kcuda_ctx *k, T *dlogits, const float *dgate, const float *probs,
                           const int *expert, const int *counts, int N, int E, int K, int renorm,
                           float aux_scale) {
  moe_router_backward_kernel<T><<<grid_cap(k, (N + 127) / 128), 128, 0, k->stream>>>(
      dlogits, dgate, probs, expert, counts, N, E, K, renorm, aux_scale);
  return kcuda_check_launch(k, "moe_router_backward");
}

int kcuda_moe_router_backward(kcuda_ctx *k, void *dlogits, const float *dgate, const float *probs,
                              const int *expert, int *counts, int N, int E, int K, int renorm,
                              float aux_scale) {
  if (moe_check(k, "moe_router_backward", N, E, K)) return -1;
  if (N == 0) return 0;
  if (count_assignments(k, counts, expert, N * K, E)) return -1;
  int rc;
  KCUDA_WITH_ACT(k, rc = router_backward<ACT>(k, (ACT *)dlogits, dgate, probs, expert, counts, N, E,
                                              K, renorm, aux_scale));
  return rc;
}

int kcuda_moe_aux_loss_accumulate(kcuda_ctx *k, double *acc, const float *probs, const int *expert,
                                  int *counts, int N, int E, int K) {
  if (moe_check(k, "moe_aux_loss", N, E, K)) return -1;
  if (N == 0) return 0; /* the CPU reference divides by N: nothing to add for no tokens */
  double *P = (double *)kcuda_scratch(k, KCUDA_SCRATCH_MOE, sizeof(double) * (size_t)E);
  if (!P) return -1;
  if (count_assignments(k, counts, expert, N * K, E)) return -1;
  moe_prob_sum_kernel<<<grid_cap(k, E), MOE_THREADS, 0, k->stream>>>(P, probs, N, E);
  if (kcuda_check_launch(k, "moe_aux_loss (sums)")) return -1;
  moe_aux_loss_kernel<<<1, 32, 0, k->stream>>>(acc, P, counts, N, E, K);
  return kcuda_check_launch(k, "moe_aux_loss");
}

/* ---- dispatch plan ------------------------------------------------------------------------ */

int kcuda_moe_dispatch_plan(kcuda_ctx *k, int *counts, int *offsets, int *row_token, int *row_of,
                            int *dropped_acc, const int *expert, int N, int E, int K,
                            int capacity) {
  if (moe_check(k, "moe_dispatch_plan", N, E, K)) return -1;
  int NK = N * K;
  int nchunks = (NK + MOE_PLAN_CHUNK - 1) / MOE_PLAN_CHUNK;
  size_t hist_n = (size_t)(nchunks > 0 ? nchunks : 1) * E;
  int *scr = (int *)kcuda_scratch(k, KCUDA_SCRATCH_MOE, sizeof(int) * (hist_n + (size_t)NK));
  if (!scr) return -1;
  int *hist = scr, *rank = scr + hist_n;
  cudaError_t ce = cudaMemsetAsync(hist, 0, sizeof(int) * hist_n, k->stream);
  if (ce != cudaSuccess)
    return kcuda_fail(k, "moe_dispatch_plan: cudaMemsetAsync: %s", cudaGetErrorString(ce));
  if (nchunks > 0) {
    moe_plan_rank_kernel<<<grid_cap(k, nchunks), MOE_PLAN_CHUNK, 0, k->stream>>>(rank, hist, expert,
                                                                                 NK, E);
    if (kcuda_check_launch(k, "moe_dispatch_plan (rank)")) return -1;
  }
  moe_plan_scan_kernel<<<1, MOE_THREADS, 0, k->stream>>>(hist, counts, offsets, dropped_acc,
                                                         nchunks, E, capacity);
  if (kcuda_check_launch(k, "moe_dispatch_plan (scan)")) return -1;
  if (NK == 0) return 0;
  moe_plan_assign_kernel<<<grid_cap(k, (NK + 255) / 256), 256, 0, k->stream>>>(
      row_of, row_token, rank, hist, offsets, expert, NK, E, K, capacity);
  return kcuda_check_launch(k, "moe_dispatch_plan (assign)");
}

/* ---- permute / unpermute ------------------------------------------------------------------ */

static unsigned row_threads(int C) {
  return C >= 256 ? 256u : C > 64 ? 128u : 64u;
}

/* A kernel of rows (tokens or expert rows; grid-stride over them): `rows` blocks, capped, of
 * `threads` threads each. */
template <class... Params, class... Args>
static void launch_rows(kcuda_ctx *k, void (*kernel)(Params...), long long rows, unsigned threads,
                        Args... args) {
  kernel<<<grid_cap(k, rows), threads, 0, k->stream>>>(args...);
}

int kcuda_moe_permute_forward(kcuda_ctx *k, void *xp, const void *x, const int *row_token,
                              const int *offsets, int N, int E, int K, int C) {
  if (moe_check(k, "moe_permute_forward", N, E, K)) return -1;
  int Rmax = N * K;
  if (Rmax == 0 || C <= 0) return 0;
  KCUDA_WITH_ACT(k, launch_rows(k, moe_permute_forward_kernel<ACT>, Rmax, row_threads(C), (ACT *)xp,
                                (const ACT *)x, row_token, offsets, Rmax, E, C));
  return kcuda_check_launch(k, "moe_permute_forward");
}

int kcuda_moe_permute_backward(kcuda_ctx *k, void *dx, const void *dxp, const int *row_token,
                               const int *offsets, int N, int E, int K, int C) {
  if (moe_check(k, "moe_permute_backward", N, E, K)) return -1;
  if (N == 0 || C <= 0) return 0;
  KCUDA_WITH_ACT(k, launch_rows(k, moe_permute_backward_kernel<ACT>, N, row_threads(C), (ACT *)dx,
                                (const ACT *)dxp, row_token, offsets, N, E, C));
  return kcuda_check_launch(k, "moe_permute_backward");
}

int kcuda_moe_unpermute_forward(kcuda_ctx *k, void *out, const void *yp, const float *gate,
                                const int *row_of, int N, int K, int C) {
  if (N < 0 || K <= 0) return kcuda_fail(k, "moe_unpermute_forward: bad shape N=%d K=%d", N, K);
  if (N == 0 || C <= 0) return 0;
  KCUDA_WITH_ACT(k, launch_rows(k, moe_unpermute_forward_kernel<ACT>, N, row_threads(C), (ACT *)out,
                                (const ACT *)yp, gate, row_of, N, K, C));
  return kcuda_check_launch(k, "moe_unpermute_forward");
}

int kcuda_moe_unpermute_backward(kcuda_ctx *k, void *dyp, float *dgate, const void *dout,
                                 const void *yp, const float *gate, const int *row_of, int N, int K,
                                 int C) {
  if (N < 0 || K <= 0) return kcuda_fail(k, "moe_unpermute_backward: bad shape N=%d K=%d", N, K);
  if (N == 0 || C <= 0) return 0;
  KCUDA_WITH_ACT(k, launch_rows(k, moe_unpermute_backward_kernel<ACT>, N, MOE_THREADS, (ACT *)dyp,
                                dgate, (const ACT *)dout, (const ACT *)yp, gate, row_of, N, K, C));
  return kcuda_check_launch(k, "moe_unpermute_backward");
}

/* ---- the experts' grouped GEMM ------------------------------------------------------------ */

template <class T>
static void gemm_rows(kcuda_ctx *k, dim3 grid, T *Y, const T *A, const float *W, const float *bias,
                      const int *offsets, int E, int Kd, int Nout, int b_rowmajor_kn,
                      int accumulate) {
  moe_grouped_gemm_rows_kernel<T><<<grid, MOE_THREADS, 0, k->stream>>>(
      Y, A, W, bias, offsets, E, Kd, Nout, b_rowmajor_kn, accumulate);
}

template <class T>
static void gemm_dweight(kcuda_ctx *k, dim3 grid, float *dweight, const T *dout, const T *inp,
                         const int *offsets, int C, int OC) {
  moe_grouped_dweight_kernel<T>
      <<<grid, MOE_THREADS, 0, k->stream>>>(dweight, dout, inp, offsets, C, OC);
}

template <class T>
static void gemm_dbias(kcuda_ctx *k, unsigned blocks, float *dbias, const T *dout,
                       const int *offsets, int E, int OC) {
  moe_grouped_dbias_kernel<T><<<blocks, 256, 0, k->stream>>>(dbias, dout, offsets, E, OC);
}

template <class T, int MODE>
static void gemm_tc(kcuda_ctx *k, dim3 grid, void *Y, const T *A, const T *Bact, const float *W,
                    const float *bias, const int *offsets, int E, int Kd, int Nout, int Mtot) {
  moe_grouped_gemm_tc_kernel<T, MODE>
      <<<grid, MOE_TC_THREADS, 0, k->stream>>>(Y, A, Bact, W, bias, offsets, E, Kd, Nout, Mtot);
}

static int gemm_shape(kcuda_ctx *k, const char *what, int Rmax, int E, int C, int OC,
                      unsigned *row_tiles) {
  if (Rmax < 0 || E <= 0 || C <= 0 || OC <= 0)
    return kcuda_fail(k, "%s: bad shape Rmax=%d E=%d C=%d OC=%d", what, Rmax, E, C, OC);
  if (E > MOE_MAX_EXPERTS)
    return kcuda_fail(k, "%s: %d experts; the CUDA kernels take at most %d", what, E,
                      MOE_MAX_EXPERTS);
  long long tiles = ((long long)Rmax + MOE_TM - 1) / MOE_TM + E; /* expert-aligned bound */
  if (tiles > 65535)
    return kcuda_fail(k, "%s: %lld row tiles exceed the grid's 65535 (Rmax=%d)", what, tiles, Rmax);
  *row_tiles = (unsigned)tiles;
  return 0;
}

int kcuda_moe_expert_matmul_forward(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                                    const float *bias, const int *offsets, int Rmax, int E, int C,
                                    int OC) {
  unsigned tiles = 0; /* set by gemm_shape (-O3 cannot see it on every path) */
  if (gemm_shape(k, "moe_expert_matmul_forward", Rmax, E, C, OC, &tiles)) return -1;
  if (Rmax == 0) return 0;
  dim3 grid((unsigned)((OC + MOE_TN - 1) / MOE_TN), tiles);
  if (k->precision == KCUDA_BF16)
    KCUDA_WITH_ACT(k, (gemm_tc<ACT, MOE_TC_FWD>(k, grid, out, (const ACT *)inp, (const ACT *)0,
                                                weight, bias, offsets, E, C, OC, 0)));
  else
    KCUDA_WITH_ACT(k, gemm_rows<ACT>(k, grid, (ACT *)out, (const ACT *)inp, weight, bias, offsets,
                                     E, C, OC, 0, 0));
  return kcuda_check_launch(k, "moe_expert_matmul_forward");
}

int kcuda_moe_expert_matmul_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                                     const void *dout, const void *inp, const float *weight,
                                     const int *offsets, int Rmax, int E, int C, int OC) {
  unsigned tiles = 0; /* set by gemm_shape (-O3 cannot see it on every path) */
  if (gemm_shape(k, "moe_expert_matmul_backward", Rmax, E, C, OC, &tiles)) return -1;
  if (Rmax == 0) return 0;
  if (dinp) {
    dim3 grid((unsigned)((C + MOE_TN - 1) / MOE_TN), tiles);
    if (k->precision == KCUDA_BF16)
      KCUDA_WITH_ACT(k,
                     (gemm_tc<ACT, MOE_TC_DINP>(k, grid, dinp, (const ACT *)dout, (const ACT *)0,
                                                weight, (const float *)0, offsets, E, OC, C, 0)));
    else
      KCUDA_WITH_ACT(k, gemm_rows<ACT>(k, grid, (ACT *)dinp, (const ACT *)dout, weight,
                                       (const float *)0, offsets, E, OC, C, 1, 1));
    if (kcuda_check_launch(k, "moe_expert_matmul_backward (dinp)")) return -1;
  }
  if (dweight) {
    if ((OC + MOE_TM - 1) / MOE_TM > 65535)
      return kcuda_fail(k, "moe_expert_matmul_backward: OC=%d too large for the grid", OC);
    dim3 grid((unsigned)((C + MOE_TN - 1) / MOE_TN), (unsigned)((OC + MOE_TM - 1) / MOE_TM),
              (unsigned)E);
    if (k->precision == KCUDA_BF16)
      KCUDA_WITH_ACT(
          k, (gemm_tc<ACT, MOE_TC_DW>(k, grid, dweight, (const ACT *)dout, (const ACT *)inp,
                                      (const float *)0, (const float *)0, offsets, E, 0, C, OC)));
    else
      KCUDA_WITH_ACT(k, gemm_dweight<ACT>(k, grid, dweight, (const ACT *)dout, (const ACT *)inp,
                                          offsets, C, OC));
    if (kcuda_check_launch(k, "moe_expert_matmul_backward (dweight)")) return -1;
  }
  if (dbias) {
    long long n = (long long)E * OC;
    KCUDA_WITH_ACT(k, gemm_dbias<ACT>(k, grid_cap(k, (n + 255) / 256), dbias, (const ACT *)dout,
                                      offsets, E, OC));
    if (kcuda_check_launch(k, "moe_expert_matmul_backward (dbias)")) return -1;
  }
  return 0;
}
