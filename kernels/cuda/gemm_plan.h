/*
 * gemm_plan.h — how a row-major GEMM becomes a column-major (cuBLAS) one.
 *
 * What it is for: the trainer's matrices are row-major, cuBLASLt's are
 * column-major. This is the one place that translates; it is plain C so that a CPU
 * test (tests/gpu/test_cpu_side.c) checks it against a naive column-major GEMM on
 * machines without a GPU.
 *
 * How it works: a row-major [R,C] matrix is the column-major [C,R] matrix with the
 * same bytes. The row-major product C[M,N] = op(A)[M,K] op(B)[K,N] is therefore the
 * column-major product C^T[N,M] = op(B)^T op(A)^T: the first column-major operand is
 * B, the second A, the transposition flags stay with their matrices, and every
 * leading dimension is the row length of the row-major matrix as stored
 * (A stored [M,K], or [K,M] when transposed; B stored [K,N], or [N,K]).
 */
#ifndef STEPSCOPE_KCUDA_GEMM_PLAN_H
#define STEPSCOPE_KCUDA_GEMM_PLAN_H

typedef struct kcuda_gemm_plan {
  int first_is_b;     /* always 1: column-major operand 1 is the row-major B */
  int trans1, trans2; /* transposition of column-major operands 1 and 2 */
  int m, n, k;        /* column-major D[m,n] = op1[m,k] op2[k,n] */
  int ld1, ld2, ldd;
} kcuda_gemm_plan;

static inline kcuda_gemm_plan kcuda_plan_row_major(int transA, int transB, int M, int N, int K) {
  kcuda_gemm_plan p;
  p.first_is_b = 1;
  p.trans1 = transB;
  p.trans2 = transA;
  p.m = N;
  p.n = M;
  p.k = K;
  p.ld1 = transB ? K : N; /* B stored [N,K] or [K,N] */
  p.ld2 = transA ? M : K; /* A stored [K,M] or [M,K] */
  p.ldd = N;
  return p;
}

#endif /* STEPSCOPE_KCUDA_GEMM_PLAN_H */
