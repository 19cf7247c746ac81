/*
 * matmul.c — the fully connected layer, out = inp @ weight^T + bias: the hot spot.
 *
 * Shapes: inp [N,C], weight [OC,C] (PyTorch's Linear layout: one row per output
 * channel), bias [OC], out [N,OC]. In a GPT nearly all the FLOPs are here.
 *
 * Math. out[n,o] = bias[o] + sum_c inp[n,c] weight[o,c]. The three gradients are
 *     dinp[n,c]    += sum_o dout[n,o] weight[o,c]     dinp    = dout   @ weight
 *     dweight[o,c] += sum_n dout[n,o] inp[n,c]        dweight = dout^T @ inp
 *     dbias[o]     += sum_n dout[n,o]
 *
 * How it is made fast in plain C. All three products are cast as one accumulating
 * kernel, gemm_accumulate: Cm[m,j] += sum_k A(m,k) Bm[k,j], where Bm is row-major
 * with j contiguous and A may be read with any row/column stride (so dout^T needs no
 * copy). Its inner loop is an "axpy" over j: for a fixed k, a scalar A(m,k) times a
 * contiguous row of Bm added into a contiguous row of Cm — no reduction, so the
 * compiler vectorizes it without reassociating floating-point sums. Around it:
 *   - register tile: MICRO_M rows x MICRO_N columns of Cm live in local accumulators
 *     across the whole k loop (4 x 8 floats: 8 SSE registers, leaving room for the
 *     operands; a 4 x 16 tile spills and runs 5x slower), so each loaded Bm value is
 *     used MICRO_M times and each A value MICRO_N times;
 *   - packing and cache blocks: k in blocks of BLOCK_K and j in blocks of BLOCK_N;
 *     each BLOCK_K x BLOCK_N block of Bm is first copied into a contiguous panel on
 *     the stack (32 KiB, no allocation) that every row of A then reuses from L1/L2.
 *     Packing matters: reading weight in place with its row stride of C floats ran
 *     dinp 5x slower (cache-set conflicts). The forward product needs weight^T, so
 *     its packing step transposes while it copies.
 * Measured on the 2-core AMD EPYC dev machine (gcc 12 -O3, SSE2 only), with the
 * opt-in bench_kernels_matmul: about 25 GFLOP/s forward and 20-27 backward for GPT-2
 * shapes, against about 2.2 for a naive dot-product loop.
 *
 * Determinism: every output element is a sum over k taken in ascending order in one
 * float accumulator (blocks resume from the stored partial sum), so the result does
 * not depend on the blocking and is bit-identical to a naive ascending loop compiled
 * with the same floating-point contraction settings.
 */
#include <stddef.h>

#include "cpu_kernels.h"

#define MICRO_M 4
#define MICRO_N 8
#define BLOCK_K 64
#define BLOCK_N 128

/* Cm[MICRO_M x MICRO_N tile] += A(rows, 0..K-1) * Bm(0..K-1, cols): the full-tile case. */
static void micro_tile_full(float *cm, size_t ldc, const float *a, size_t a_row_stride,
                            size_t a_col_stride, const float *bm, size_t ldb, int K) {
  float acc[MICRO_M][MICRO_N];
  for (int r = 0; r < MICRO_M; r++)
    for (int j = 0; j < MICRO_N; j++)
      acc[r][j] = cm[r * ldc + j];
  for (int k = 0; k < K; k++) {
    const float *b_row = bm + (size_t)k * ldb;
    for (int r = 0; r < MICRO_M; r++) {
      float av = a[r * a_row_stride + (size_t)k * a_col_stride];
      for (int j = 0; j < MICRO_N; j++)
        acc[r][j] += av * b_row[j];
    }
  }
  for (int r = 0; r < MICRO_M; r++)
    for (int j = 0; j < MICRO_N; j++)
      cm[r * ldc + j] = acc[r][j];
}

/* The same for a ragged tile at the edge (rows <= MICRO_M, cols <= MICRO_N). */
static void micro_tile_edge(float *cm, size_t ldc, const float *a, size_t a_row_stride,
                            size_t a_col_stride, const float *bm, size_t ldb, int K, int rows,
                            int cols) {
  for (int r = 0; r < rows; r++) {
    float acc[MICRO_N];
    for (int j = 0; j < cols; j++)
      acc[j] = cm[r * ldc + j];
    for (int k = 0; k < K; k++) {
      float av = a[r * a_row_stride + (size_t)k * a_col_stride];
      const float *b_row = bm + (size_t)k * ldb;
      for (int j = 0; j < cols; j++)
        acc[j] += av * b_row[j];
    }
    for (int j = 0; j < cols; j++)
      cm[r * ldc + j] = acc[j];
  }
}

/* Cm[M, Ncols] (row stride ldc) += A[M, K] * Bm[K, Ncols] for one cache block of Bm
 * (K <= BLOCK_K, Ncols <= BLOCK_N); Bm row stride ldb. */
static void gemm_block(float *cm, size_t ldc, const float *a, size_t a_row_stride,
                       size_t a_col_stride, const float *bm, size_t ldb, int M, int Ncols, int K) {
  int m = 0;
  for (; m + MICRO_M <= M; m += MICRO_M) {
    int j = 0;
    for (; j + MICRO_N <= Ncols; j += MICRO_N)
      micro_tile_full(cm + (size_t)m * ldc + j, ldc, a + (size_t)m * a_row_stride, a_row_stride,
                      a_col_stride, bm + j, ldb, K);
    if (j < Ncols)
      micro_tile_edge(cm + (size_t)m * ldc + j, ldc, a + (size_t)m * a_row_stride, a_row_stride,
                      a_col_stride, bm + j, ldb, K, MICRO_M, Ncols - j);
  }
  if (m < M) {
    for (int j = 0; j < Ncols; j += MICRO_N) {
      int cols = Ncols - j < MICRO_N ? Ncols - j : MICRO_N;
      micro_tile_edge(cm + (size_t)m * ldc + j, ldc, a + (size_t)m * a_row_stride, a_row_stride,
                      a_col_stride, bm + j, ldb, K, M - m, cols);
    }
  }
}

/* Cm[M, Ncols] += A[M,K] * Bm[K,Ncols], Bm packed block by block (row stride ldb). */
static void gemm_accumulate(float *cm, size_t ldc, const float *a, size_t a_row_stride,
                            size_t a_col_stride, const float *bm, size_t ldb, int M, int Ncols,
                            int K) {
  float panel[BLOCK_K * BLOCK_N];
  for (int j0 = 0; j0 < Ncols; j0 += BLOCK_N) {
    int nb = Ncols - j0 < BLOCK_N ? Ncols - j0 : BLOCK_N;
    for (int k0 = 0; k0 < K; k0 += BLOCK_K) {
      int kb = K - k0 < BLOCK_K ? K - k0 : BLOCK_K;
      for (int k = 0; k < kb; k++)
        for (int j = 0; j < nb; j++)
          panel[k * BLOCK_N + j] = bm[(size_t)(k0 + k) * ldb + j0 + j];
      gemm_block(cm + j0, ldc, a + (size_t)k0 * a_col_stride, a_row_stride, a_col_stride, panel,
                 BLOCK_N, M, nb, kb);
    }
  }
}

void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC) {
  /* start from the bias (or zero), then accumulate inp @ weight^T */
  for (int n = 0; n < N; n++) {
    float *row = out + (size_t)n * OC;
    for (int o = 0; o < OC; o++)
      row[o] = bias ? bias[o] : 0.0f;
  }

  /* weight^T panel [BLOCK_K][BLOCK_N]: k = input channel c, j = output channel o */
  float panel[BLOCK_K * BLOCK_N];
  for (int o0 = 0; o0 < OC; o0 += BLOCK_N) {
    int nb = OC - o0 < BLOCK_N ? OC - o0 : BLOCK_N;
    for (int c0 = 0; c0 < C; c0 += BLOCK_K) {
      int kb = C - c0 < BLOCK_K ? C - c0 : BLOCK_K;
      for (int j = 0; j < nb; j++) {
        const float *w_row = weight + (size_t)(o0 + j) * C + c0;
        for (int k = 0; k < kb; k++)
          panel[k * BLOCK_N + j] = w_row[k];
      }
      gemm_block(out + o0, (size_t)OC, inp + c0, (size_t)C, 1, panel, BLOCK_N, N, nb, kb);
    }
  }
}

void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC) {
  /* dinp[N,C] += dout[N,OC] @ weight[OC,C]: A = dout (k = o), Bm = weight as stored */
  if (dinp) gemm_accumulate(dinp, (size_t)C, dout, (size_t)OC, 1, weight, (size_t)C, N, C, OC);

  /* dweight[OC,C] += dout^T @ inp: A(o, n) = dout[n,o] read with strides (1, OC), Bm = inp */
  if (dweight) gemm_accumulate(dweight, (size_t)C, dout, 1, (size_t)OC, inp, (size_t)C, OC, C, N);

  /* dbias[o] += column sums of dout, row by row so the inner loop is contiguous */
  if (dbias) {
    for (int n = 0; n < N; n++) {
      const float *row = dout + (size_t)n * OC;
      for (int o = 0; o < OC; o++)
        dbias[o] += row[o];
    }
  }
}
