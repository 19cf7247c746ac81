/*
 * matmul.cu — GEMMs through cuBLASLt: the model's linear layers, forward and
 * backward, and a general row-major batched GEMM used by attention.
 *
 * Layout. The trainer's matrices are row-major; cuBLASLt is column-major. The
 * row-major product C = op(A) op(B) is computed as the column-major product
 * C^T = op(B)^T op(A)^T (gemm_plan.h, tested on the CPU).
 *
 * Linear layer (weight [OC,C] as in PyTorch), with N tokens:
 *     forward    out[N,OC]  = inp[N,C] @ W^T + b      bias as the BIAS epilogue
 *     backward   dinp[N,C] += dout[N,OC] @ W           beta = 1 (accumulate)
 *                dW[OC,C]  += dout^T @ inp             beta = 1
 *                db[OC]    += sum over rows of dout    a column-sum kernel: the
 *                BGRAD epilogues overwrite instead of accumulating, and gradients
 *                accumulate over micro-batches here.
 *
 * Precision. KCUDA_BF16 casts both operands to bf16 scratch copies (round to
 * nearest even) and multiplies them on tensor cores with fp32 accumulation into
 * the fp32 output; KCUDA_TF32 and KCUDA_FP32 multiply the fp32 operands with the
 * TF32 or the exact fp32 compute type.
 *
 * Algorithms. The heuristic's best algorithm is cached per (shape, layout,
 * precision, epilogue, alignment) in a small table, so steady-state calls only
 * build descriptors (cheap host work) and launch.
 */
#include <string.h>

#include "gemm_plan.h"
#include "kcuda_internal.cuh"

#define LT_CHECK(call, what)                                                                       \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            rc = kcuda_fail(k, "%s: %s (%s)", what, cublasGetStatusString(st_), #call);           \
            goto done;                                                                             \
        }                                                                                          \
    } while (0)

/* The largest power of two (at most 256) dividing the address. */
static int alignment_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    int al = 256;
    while (al > 1 && (a % (uintptr_t)al) != 0)
        al >>= 1;
    return al;
}

static kcuda_algo_entry *algo_lookup(kcuda_ctx *k, const int *key, int *found)
{
    unsigned h = 2166136261u;
    for (int i = 0; i < 12; i++)
        h = (h ^ (unsigned)key[i]) * 16777619u;
    kcuda_algo_entry *e = &k->algos[h % KCUDA_ALGO_CACHE];
    *found = e->valid && !memcmp(e->key, key, sizeof e->key);
    return e;
}

/* Column-major D[m,n] = alpha op(A) op(B) + beta D, batched, with an optional bias
 * (per row of D) epilogue. A and B are fp32 or bf16 per `ab_type`. */
static int lt_matmul(kcuda_ctx *k, cublasOperation_t opA, cublasOperation_t opB, int m, int n,
                     int kk, float alpha, const void *A, int lda, long long strideA, const void *B,
                     int ldb, long long strideB, float beta, float *D, int ldd, long long strideD,
                     int batch, const float *bias, cudaDataType_t ab_type,
                     cublasComputeType_t compute)
{
    int rc = 0;
    void *workspace = kcuda_scratch(k, KCUDA_SCRATCH_WORKSPACE, KCUDA_WORKSPACE_BYTES);
    if (!workspace)
        return -1;
    size_t workspace_bytes = k->scratch_bytes[KCUDA_SCRATCH_WORKSPACE];
    cublasLtMatmulDesc_t desc = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    int a_rows = opA == CUBLAS_OP_N ? m : kk, a_cols = opA == CUBLAS_OP_N ? kk : m;
    int b_rows = opB == CUBLAS_OP_N ? kk : n, b_cols = opB == CUBLAS_OP_N ? n : kk;
    LT_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA),
             "set TRANSA");
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB),
             "set TRANSB");
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                                sizeof epi),
                 "set EPILOGUE");
        LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof bias),
                 "set BIAS_POINTER");
    }
    LT_CHECK(cublasLtMatrixLayoutCreate(&la, ab_type, a_rows, a_cols, lda), "layout A");
    LT_CHECK(cublasLtMatrixLayoutCreate(&lb, ab_type, b_rows, b_cols, ldb), "layout B");
    LT_CHECK(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd), "layout D");
    if (batch > 1) {
        cublasLtMatrixLayout_t ls[3] = {la, lb, ld};
        long long strides[3] = {strideA, strideB, strideD};
        for (int i = 0; i < 3; i++) {
            LT_CHECK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &batch, sizeof batch),
                     "set BATCH_COUNT");
            LT_CHECK(cublasLtMatrixLayoutSetAttribute(
                         ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                         sizeof strides[i]),
                     "set STRIDED_BATCH_OFFSET");
        }
    }
    {
        int al_a = alignment_of(A), al_b = alignment_of(B), al_d = alignment_of(D);
        int al_bias = bias ? alignment_of(bias) : 256;
        int key[12] = {(int)opA, (int)opB, m, n, kk, lda, ldb, ldd, batch,
                       (int)compute * 8 + (int)ab_type + (bias ? 4096 : 0) + (beta != 0.0f ? 8192 : 0),
                       al_a * 1024 + al_b, al_d * 1024 + al_bias};
        int found = 0;
        kcuda_algo_entry *entry = algo_lookup(k, key, &found);
        if (!found) {
            LT_CHECK(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
            size_t ws = KCUDA_WORKSPACE_BYTES;
            uint32_t a32 = (uint32_t)al_a, b32 = (uint32_t)al_b, d32 = (uint32_t)al_d;
            LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
                     "set MAX_WORKSPACE_BYTES");
            LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof a32),
                     "set MIN_ALIGNMENT_A");
            LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, sizeof b32),
                     "set MIN_ALIGNMENT_B");
            LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d32, sizeof d32),
                     "set MIN_ALIGNMENT_C");
            LT_CHECK(cublasLtMatmulPreferenceSetAttribute(
                         pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d32, sizeof d32),
                     "set MIN_ALIGNMENT_D");
            cublasLtMatmulHeuristicResult_t result;
            int nresults = 0;
            LT_CHECK(cublasLtMatmulAlgoGetHeuristic(k->lt, desc, la, lb, ld, ld, pref, 1, &result,
                                                    &nresults),
                     "cublasLtMatmulAlgoGetHeuristic");
            if (nresults < 1) {
                rc = kcuda_fail(k,
                                "cuBLASLt has no algorithm for m=%d n=%d k=%d batch=%d (ops %d,%d, "
                                "%s%s)",
                                m, n, kk, batch, (int)opA, (int)opB,
                                kcuda_precision_name(k->precision), bias ? ", bias" : "");
                goto done;
            }
            memcpy(entry->key, key, sizeof key);
            entry->algo = result.algo;
            entry->valid = 1;
        }
        LT_CHECK(cublasLtMatmul(k->lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld,
                                &entry->algo, workspace, workspace_bytes, k->stream),
                 "cublasLtMatmul");
    }
done:
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (desc)
        cublasLtMatmulDescDestroy(desc);
    return rc;
}

/* Row-major front end: C[M,N] = alpha op(A) op(B) + beta C (see the file comment). In bf16
 * mode the operands go through bf16 scratch copies first. */
static int rm_gemm(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
                   const float *A, long long strideA, const float *B, long long strideB,
                   float beta, float *C, long long strideC, int batch, const float *bias)
{
    if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
        return kcuda_fail(k, "gemm: bad shape M=%d N=%d K=%d batch=%d", M, N, K, batch);
    kcuda_gemm_plan plan = kcuda_plan_row_major(transA, transB, M, N, K);
    const void *a = A, *b = B;
    cudaDataType_t type = CUDA_R_32F;
    cublasComputeType_t compute = k->precision == KCUDA_FP32   ? CUBLAS_COMPUTE_32F
                                  : k->precision == KCUDA_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                               : CUBLAS_COMPUTE_32F;
    if (k->precision == KCUDA_BF16) {
        /* the stored extent of a strided batch: (batch-1) strides plus one matrix */
        size_t na = (size_t)(batch - 1) * (size_t)strideA + (size_t)M * K;
        size_t nb = (size_t)(batch - 1) * (size_t)strideB + (size_t)K * N;
        void *ca = kcuda_scratch(k, KCUDA_SCRATCH_CAST_A, na * 2);
        void *cb = ca ? kcuda_scratch(k, KCUDA_SCRATCH_CAST_B, nb * 2) : NULL;
        if (!cb)
            return -1;
        if (kcuda_cast_f32_to_bf16(k, ca, A, na) != 0 || kcuda_cast_f32_to_bf16(k, cb, B, nb) != 0)
            return -1;
        a = ca;
        b = cb;
        type = CUDA_R_16BF;
    }
    /* column-major: C^T[N,M] = op(B)^T op(A)^T (gemm_plan.h) */
    return lt_matmul(k, plan.trans1 ? CUBLAS_OP_T : CUBLAS_OP_N,
                     plan.trans2 ? CUBLAS_OP_T : CUBLAS_OP_N, plan.m, plan.n, plan.k, alpha, b,
                     plan.ld1, strideB, a, plan.ld2, strideA, beta, C, plan.ldd, strideC, batch,
                     bias, type, compute);
}

int kcuda_gemm(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
               const float *A, const float *B, float beta, float *C, int batch, long long strideA,
               long long strideB, long long strideC)
{
    return rm_gemm(k, transA, transB, M, N, K, alpha, A, strideA, B, strideB, beta, C, strideC,
                   batch, NULL);
}

int kcuda_matmul_forward(kcuda_ctx *k, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int C, int OC)
{
    /* out[N,OC] = inp[N,C] @ weight[OC,C]^T; the bias runs along out's rows (OC), which is
     * the column-major D's first dimension: exactly cuBLASLt's BIAS epilogue. */
    return rm_gemm(k, 0, 1, N, OC, C, 1.0f, inp, 0, weight, 0, 0.0f, out, 0, 1, bias);
}

/* dbias[OC] += sum over the N rows of dout[N,OC]: one thread per column, a block of
 * 32 x 8 threads covers 32 columns, each of the 8 row groups strides over rows and the
 * partial sums meet in shared memory (deterministic). */
__global__ void dbias_kernel(float *dbias, const float *dout, int N, int OC)
{
    __shared__ float part[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;
    if (col < OC)
        for (int r = threadIdx.y; r < N; r += 8)
            s += dout[(size_t)r * OC + col];
    part[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < OC) {
        float t = 0.0f;
        for (int i = 0; i < 8; i++)
            t += part[i][threadIdx.x];
        dbias[col] += t;
    }
}

int kcuda_matmul_backward(kcuda_ctx *k, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *weight, int N, int C,
                          int OC)
{
    if (dinp && rm_gemm(k, 0, 0, N, C, OC, 1.0f, dout, 0, weight, 0, 1.0f, dinp, 0, 1, NULL) != 0)
        return -1;
    if (dweight &&
        rm_gemm(k, 1, 0, OC, C, N, 1.0f, dout, 0, inp, 0, 1.0f, dweight, 0, 1, NULL) != 0)
        return -1;
    if (dbias) {
        dim3 block(32, 8);
        dbias_kernel<<<(OC + 31) / 32, block, 0, k->stream>>>(dbias, dout, N, OC);
        return kcuda_check_launch(k, "matmul_backward dbias");
    }
    return 0;
}
