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
 * Precision. KCUDA_BF16 multiplies bf16 operands on tensor cores with fp32
 * accumulation. With fp32 activation storage (the default), activations are cast to
 * bf16 scratch copies (round to nearest even) at each call — in backward dout is cast
 * once for both GEMMs — and every output is fp32. With bf16 activation storage
 * (kcuda_ctx_set_act_dtype) the activation operands are used as they are (no cast):
 * the forward writes bf16 out (fp32 accumulation, rounded once, the fp32 bias added in
 * the epilogue: CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = CUDA_R_32F; should cuBLASLt offer
 * no algorithm for that, the GEMM runs without the epilogue and a kernel adds the bias,
 * which rounds twice — see lt_matmul), dinp accumulates into bf16
 * (beta = 1, C = D bf16: fp32 sum of the old value and the product, rounded once), and
 * dweight stays fp32 (bf16 A/B, fp32 C = D, beta = 1). Weights come from a cache of bf16
 * copies keyed by the fp32 weight's address and length (the *_w entry points): the
 * caller passes a "weights version" that it bumps whenever weight memory may have been
 * written (the optimizer step, a copy into the parameters, an all-gather); an entry cast
 * under an older version is recast at its next use, in stream order, so a GEMM never
 * reads a stale copy. Version 0 means "do not cache" (a per-call cast, as for fp32
 * activations). KCUDA_TF32 and KCUDA_FP32 (fp32 activations only) multiply the fp32
 * operands with the TF32 or the exact fp32 compute type.
 *
 * Algorithms. The heuristic's best algorithm is cached per (shape, layout, batch
 * strides, compute type, operand and output types, epilogue, alignment) in a small
 * table, so steady-state calls only build descriptors (cheap host work) and launch.
 *
 * The bias gradient and the fallback bias add are kernels templated on the activation
 * type (act_kernels.cuh).
 */
#include <string.h>

#include "gemm_plan.h"
#include "kcuda_internal.cuh"

#include "act_kernels.cuh"

#define LT_CHECK(call, what)                                                                       \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      rc = kcuda_fail(k, "%s: %s (%s)", what, cublasGetStatusString(st_), #call);                  \
      goto done;                                                                                   \
    }                                                                                              \
  } while (0)

/* The largest power of two (at most 256) dividing the address. */
static int alignment_of(const void *p) {
  uintptr_t a = (uintptr_t)p;
  int al = 256;
  while (al > 1 && (a % (uintptr_t)al) != 0)
    al >>= 1;
  return al;
}

static kcuda_algo_entry *algo_lookup(kcuda_ctx *k, const int *key, int *found) {
  unsigned h = 2166136261u;
  for (int i = 0; i < KCUDA_ALGO_KEY; i++)
    h = (h ^ (unsigned)key[i]) * 16777619u;
  kcuda_algo_entry *e = &k->algos[h % KCUDA_ALGO_CACHE];
  *found = e->valid && !memcmp(e->key, key, sizeof e->key);
  return e;
}

/* The bias gradient's and the fallback bias add's launches (act_kernels.cuh). */
template <class T>
static int bias_add(kcuda_ctx *k, T *out, const float *bias, int rows, int cols) {
  bias_add_kernel<T>
      <<<kcuda_grid_for(k, (size_t)rows * cols, 256), 256, 0, k->stream>>>(out, bias, rows, cols);
  return kcuda_check_launch(k, "matmul bias add");
}

/* Column-major D[m,n] = alpha op(A) op(B) + beta D, batched, with an optional fp32 bias
 * (per row of D) epilogue. A and B are of type `ab_type`, D (which is also C) of `d_type`
 * (CUDA_R_32F or CUDA_R_16BF). A bias on a bf16 D is declared fp32
 * (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE); if cuBLASLt refuses that anywhere (setting the
 * attribute, the heuristic, or cublasLtMatmul's own checks), the cache entry remembers it
 * (valid = 2) and such calls run the GEMM without the epilogue, then bias_add_kernel. */
static int lt_matmul(kcuda_ctx *k, cublasOperation_t opA, cublasOperation_t opB, int m, int n,
                     int kk, float alpha, const void *A, int lda, long long strideA, const void *B,
                     int ldb, long long strideB, float beta, void *D, int ldd, long long strideD,
                     int batch, const float *bias, cudaDataType_t ab_type, cudaDataType_t d_type,
                     cublasComputeType_t compute) {
  int rc = 0;
  void *workspace = kcuda_scratch(k, KCUDA_SCRATCH_WORKSPACE, KCUDA_WORKSPACE_BYTES);
  if (!workspace) return -1;
  size_t workspace_bytes = k->scratch_bytes[KCUDA_SCRATCH_WORKSPACE];
  cublasLtMatmulDesc_t desc = NULL;
  cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
  cublasLtMatmulPreference_t pref = NULL;
  int a_rows = opA == CUBLAS_OP_N ? m : kk, a_cols = opA == CUBLAS_OP_N ? kk : m;
  int b_rows = opB == CUBLAS_OP_N ? kk : n, b_cols = opB == CUBLAS_OP_N ? n : kk;
  int al_a = alignment_of(A), al_b = alignment_of(B), al_d = alignment_of(D);
  int al_bias = bias ? alignment_of(bias) : 256;
  /* batch strides in units of 16 bytes of alignment they keep, folded with their size (an
   * algorithm is valid for the layouts it was chosen for); compute type, operand and output
   * types and the epilogue/beta flags packed in one word (each type < 64, compute < 128) */
  int key[KCUDA_ALGO_KEY] = {(int)opA,
                             (int)opB,
                             m,
                             n,
                             kk,
                             lda,
                             ldb,
                             ldd,
                             batch,
                             (((int)compute * 64 + (int)ab_type) * 64 + (int)d_type) * 4 +
                                 (bias ? 1 : 0) + (beta != 0.0f ? 2 : 0),
                             al_a * 1024 + al_b,
                             al_d * 1024 + al_bias,
                             batch > 1 ? (int)(strideA ^ (strideA >> 31)) : 0,
                             batch > 1 ? (int)((strideB * 31) ^ (strideD * 7)) : 0};
  int found = 0;
  kcuda_algo_entry *entry = algo_lookup(k, key, &found);
  /* An fp32 bias on a bf16 D that cuBLASLt refuses at any point (the attribute, the
   * heuristic, or the call itself) is added by bias_add_kernel after a plain GEMM. */
  const int bias_fallback = bias && d_type != CUDA_R_32F && batch == 1 && ldd == m;
  if (found && entry->valid == 2) {
    /* no BIAS epilogue for these types: GEMM, then the bias kernel */
    rc = lt_matmul(k, opA, opB, m, n, kk, alpha, A, lda, strideA, B, ldb, strideB, beta, D, ldd,
                   strideD, batch, NULL, ab_type, d_type, compute);
    if (rc == 0)
      rc = d_type == CUDA_R_16BF ? bias_add(k, (__nv_bfloat16 *)D, bias, n, m)
                                 : bias_add(k, (float *)D, bias, n, m);
    return rc;
  }
  LT_CHECK(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F), "cublasLtMatmulDescCreate");
  LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof opA),
           "set TRANSA");
  LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof opB),
           "set TRANSB");
  if (bias) {
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    LT_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
             "set EPILOGUE");
    LT_CHECK(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
        "set BIAS_POINTER");
    if (d_type != CUDA_R_32F) {
      int32_t bias_type = CUDA_R_32F; /* the default is D's type */
      cublasStatus_t st = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                         &bias_type, sizeof bias_type);
      if (st != CUBLAS_STATUS_SUCCESS && bias_fallback) goto take_fallback;
      LT_CHECK(st, "set BIAS_DATA_TYPE");
    }
  }
  LT_CHECK(cublasLtMatrixLayoutCreate(&la, ab_type, a_rows, a_cols, lda), "layout A");
  LT_CHECK(cublasLtMatrixLayoutCreate(&lb, ab_type, b_rows, b_cols, ldb), "layout B");
  LT_CHECK(cublasLtMatrixLayoutCreate(&ld, d_type, m, n, ldd), "layout D");
  if (batch > 1) {
    cublasLtMatrixLayout_t ls[3] = {la, lb, ld};
    long long strides[3] = {strideA, strideB, strideD};
    for (int i = 0; i < 3; i++) {
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                                sizeof batch),
               "set BATCH_COUNT");
      LT_CHECK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                &strides[i], sizeof strides[i]),
               "set STRIDED_BATCH_OFFSET");
    }
  }
  if (!found) {
    LT_CHECK(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    size_t ws = KCUDA_WORKSPACE_BYTES;
    uint32_t a32 = (uint32_t)al_a, b32 = (uint32_t)al_b, d32 = (uint32_t)al_d;
    const struct {
      cublasLtMatmulPreferenceAttributes_t attr;
      const void *value;
      size_t size;
      const char *what;
    } prefs[] = {
        {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws, "set MAX_WORKSPACE_BYTES"},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a32, sizeof a32, "set MIN_ALIGNMENT_A"},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &b32, sizeof b32, "set MIN_ALIGNMENT_B"},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d32, sizeof d32, "set MIN_ALIGNMENT_C"},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d32, sizeof d32, "set MIN_ALIGNMENT_D"}};
    for (const auto &p : prefs)
      LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, p.attr, p.value, p.size), p.what);
    cublasLtMatmulHeuristicResult_t result;
    int nresults = 0;
    cublasStatus_t hs =
        cublasLtMatmulAlgoGetHeuristic(k->lt, desc, la, lb, ld, ld, pref, 1, &result, &nresults);
    if ((hs != CUBLAS_STATUS_SUCCESS || nresults < 1) && bias_fallback)
      goto take_fallback; /* whatever the status: an fp32 bias on bf16 D refused */
    if (hs != CUBLAS_STATUS_SUCCESS && hs != CUBLAS_STATUS_NOT_SUPPORTED) {
      rc = kcuda_fail(k, "cublasLtMatmulAlgoGetHeuristic: %s", cublasGetStatusString(hs));
      goto done;
    }
    if (hs != CUBLAS_STATUS_SUCCESS || nresults < 1) {
      rc = kcuda_fail(k,
                      "cuBLASLt has no algorithm for m=%d n=%d k=%d batch=%d (ops %d,%d, "
                      "%s, %s operands, %s output%s)",
                      m, n, kk, batch, (int)opA, (int)opB, kcuda_precision_name(k->precision),
                      ab_type == CUDA_R_16BF ? "bf16" : "fp32",
                      d_type == CUDA_R_16BF ? "bf16" : "fp32", bias ? ", bias" : "");
      goto done;
    }
    memcpy(entry->key, key, sizeof key);
    entry->algo = result.algo;
    entry->valid = 1;
  }
  {
    cublasStatus_t st = cublasLtMatmul(k->lt, desc, &alpha, A, la, B, lb, &beta, D, ld, D, ld,
                                       &entry->algo, workspace, workspace_bytes, k->stream);
    /* The heuristic offered an algorithm, but the call refused the fp32 bias on bf16 D
     * (cuBLASLt checks some combinations only here): nothing was launched, so the
     * fallback computes the whole product. */
    if (st != CUBLAS_STATUS_SUCCESS && bias_fallback) goto take_fallback;
    LT_CHECK(st, "cublasLtMatmul");
  }
  goto done;
take_fallback:
  /* fp32 bias on a bf16 D not offered: remember (valid = 2), GEMM then bias kernel */
  memcpy(entry->key, key, sizeof key);
  entry->valid = 2;
  rc = lt_matmul(k, opA, opB, m, n, kk, alpha, A, lda, strideA, B, ldb, strideB, beta, D, ldd,
                 strideD, batch, bias, ab_type, d_type, compute);
done:
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (ld) cublasLtMatrixLayoutDestroy(ld);
  if (lb) cublasLtMatrixLayoutDestroy(lb);
  if (la) cublasLtMatrixLayoutDestroy(la);
  if (desc) cublasLtMatmulDescDestroy(desc);
  return rc;
}

/* Row-major GEMM on operands already in their final type (fp32, or bf16 in KCUDA_BF16):
 * C[M,N] = alpha op(A) op(B) + beta C (see the file comment), C of type c_type. */
static int rm_gemm_typed(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
                         const void *A, long long strideA, const void *B, long long strideB,
                         float beta, void *C, long long strideC, int batch, const float *bias,
                         cudaDataType_t type, cudaDataType_t c_type) {
  if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
    return kcuda_fail(k, "gemm: bad shape M=%d N=%d K=%d batch=%d", M, N, K, batch);
  kcuda_gemm_plan plan = kcuda_plan_row_major(transA, transB, M, N, K);
  cublasComputeType_t compute =
      k->precision == KCUDA_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  /* column-major: C^T[N,M] = op(B)^T op(A)^T (gemm_plan.h) */
  return lt_matmul(k, plan.trans1 ? CUBLAS_OP_T : CUBLAS_OP_N,
                   plan.trans2 ? CUBLAS_OP_T : CUBLAS_OP_N, plan.m, plan.n, plan.k, alpha, B,
                   plan.ld1, strideB, A, plan.ld2, strideA, beta, C, plan.ldd, strideC, batch, bias,
                   type, c_type, compute);
}

/* A bf16 copy of n floats in scratch `slot` (NULL after kcuda_fail). */
static const void *bf16_scratch_copy(kcuda_ctx *k, int slot, const float *x, size_t n) {
  void *c = kcuda_scratch(k, slot, n * 2);
  if (!c || kcuda_cast_f32_to_bf16(k, c, x, n) != 0) return NULL;
  return c;
}

/* The bf16 copy of weight w (n floats) for `version` (0: no cache, a scratch copy). The
 * cast is enqueued on this context's stream, so it runs after everything the stream was
 * already ordered after — in particular after the write that bumped the version, which the
 * GEMM reading w must be ordered after anyway. */
static const void *bf16_weight(kcuda_ctx *k, const float *w, size_t n, unsigned long long version) {
  if (version == 0) return bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_W, w, n);
  kcuda_weight_entry *e = NULL;
  for (int i = 0; i < k->nweights; i++)
    if (k->weights[i].src == w && k->weights[i].n == n) {
      e = &k->weights[i];
      break;
    }
  if (!e) {
    if (k->nweights == KCUDA_WEIGHT_CACHE) return bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_W, w, n);
    void *p = NULL;
    cudaError_t ce = cudaMallocAsync(&p, n * 2, k->stream);
    if (ce != cudaSuccess) {
      kcuda_fail(k, "cudaMallocAsync of %zu bytes for a bf16 weight copy: %s", n * 2,
                 cudaGetErrorString(ce));
      return NULL;
    }
    e = &k->weights[k->nweights++];
    e->src = w;
    e->n = n;
    e->bf16 = p;
    e->version = 0; /* never cast */
    k->weight_bytes += n * 2;
  }
  if (e->version != version) {
    if (kcuda_cast_f32_to_bf16(k, e->bf16, w, n) != 0) return NULL;
    e->version = version;
    k->weight_casts++;
  }
  return e->bf16;
}

static const char *type_name(cudaDataType_t t) {
  return t == CUDA_R_16BF ? "bf16" : t == CUDA_R_32F ? "fp32" : "unsupported";
}

int kcuda_gemm_ex(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
                  const void *A, const void *B, cudaDataType_t ab_type, float beta, void *C,
                  cudaDataType_t c_type, int batch, long long strideA, long long strideB,
                  long long strideC) {
  if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
    return kcuda_fail(k, "gemm: bad shape M=%d N=%d K=%d batch=%d", M, N, K, batch);
  if ((ab_type != CUDA_R_32F && ab_type != CUDA_R_16BF) ||
      (c_type != CUDA_R_32F && c_type != CUDA_R_16BF) ||
      (k->precision != KCUDA_BF16 && (ab_type != CUDA_R_32F || c_type != CUDA_R_32F)))
    return kcuda_fail(k, "gemm: %s operands with %s output in a %s context are not supported",
                      type_name(ab_type), type_name(c_type), kcuda_precision_name(k->precision));
  if (k->precision != KCUDA_BF16 || ab_type == CUDA_R_16BF)
    return rm_gemm_typed(k, transA, transB, M, N, K, alpha, A, strideA, B, strideB, beta, C,
                         strideC, batch, NULL, ab_type, c_type);
  /* fp32 operands in bf16 mode: bf16 scratch copies of the stored extent of each strided
   * batch ((batch-1) strides plus one matrix) */
  size_t na = (size_t)(batch - 1) * (size_t)strideA + (size_t)M * K;
  size_t nb = (size_t)(batch - 1) * (size_t)strideB + (size_t)K * N;
  const void *a = bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_A, (const float *)A, na);
  const void *b = a ? bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_B, (const float *)B, nb) : NULL;
  if (!b) return -1;
  return rm_gemm_typed(k, transA, transB, M, N, K, alpha, a, strideA, b, strideB, beta, C, strideC,
                       batch, NULL, CUDA_R_16BF, c_type);
}

unsigned long long kcuda_weight_casts(const kcuda_ctx *k) {
  return k->weight_casts;
}

int kcuda_gemm(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
               const float *A, const float *B, float beta, float *C, int batch, long long strideA,
               long long strideB, long long strideC) {
  return kcuda_gemm_ex(k, transA, transB, M, N, K, alpha, A, B, CUDA_R_32F, beta, C, CUDA_R_32F,
                       batch, strideA, strideB, strideC);
}

/* Activation storage the GEMMs can take: bf16 storage needs bf16 precision (also refused
 * by kcuda_ctx_set_act_dtype; checked again because the context's fields are visible). */
static int act_bf16(kcuda_ctx *k, const char *what, int *bf16) {
  *bf16 = k->act == KCUDA_ACT_BF16;
  if (*bf16 && k->precision != KCUDA_BF16)
    return kcuda_fail(k, "%s: bf16 activations need a bf16-precision context", what);
  return 0;
}

/* Bf16 weights need the bf16 GEMMs (checked by the *_bf16w entry points). */
static int bf16_weights_ok(kcuda_ctx *k, const char *what) {
  if (k->precision != KCUDA_BF16)
    return kcuda_fail(k, "%s: bf16 weights need a bf16-precision context", what);
  return 0;
}

/* matmul_forward in bf16 precision on a bf16 weight w (a cached copy or a working copy). */
static int matmul_forward_bf16(kcuda_ctx *k, void *out, const void *inp, const void *w,
                               const float *bias, int N, int C, int OC, int bf16_act) {
  const void *a =
      bf16_act ? inp
               : bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_A, (const float *)inp, (size_t)N * C);
  if (!a || !w) return -1;
  return rm_gemm_typed(k, 0, 1, N, OC, C, 1.0f, a, 0, w, 0, 0.0f, out, 0, 1, bias, CUDA_R_16BF,
                       bf16_act ? CUDA_R_16BF : CUDA_R_32F);
}

int kcuda_matmul_forward_w(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                           const float *bias, int N, int C, int OC,
                           unsigned long long weight_version) {
  /* out[N,OC] = inp[N,C] @ weight[OC,C]^T; the bias runs along out's rows (OC), which is
   * the column-major D's first dimension: exactly cuBLASLt's BIAS epilogue. */
  if (N <= 0 || C <= 0 || OC <= 0)
    return kcuda_fail(k, "matmul_forward: bad shape N=%d C=%d OC=%d", N, C, OC);
  int bf16_act;
  if (act_bf16(k, "matmul_forward", &bf16_act) != 0) return -1;
  if (k->precision != KCUDA_BF16)
    return rm_gemm_typed(k, 0, 1, N, OC, C, 1.0f, inp, 0, weight, 0, 0.0f, out, 0, 1, bias,
                         CUDA_R_32F, CUDA_R_32F);
  const void *w = bf16_weight(k, weight, (size_t)OC * C, weight_version);
  return matmul_forward_bf16(k, out, inp, w, bias, N, C, OC, bf16_act);
}

int kcuda_matmul_forward_bf16w(kcuda_ctx *k, void *out, const void *inp, const void *weight,
                               const float *bias, int N, int C, int OC) {
  if (N <= 0 || C <= 0 || OC <= 0)
    return kcuda_fail(k, "matmul_forward: bad shape N=%d C=%d OC=%d", N, C, OC);
  int bf16_act;
  if (bf16_weights_ok(k, "matmul_forward") != 0 || act_bf16(k, "matmul_forward", &bf16_act) != 0)
    return -1;
  return matmul_forward_bf16(k, out, inp, weight, bias, N, C, OC, bf16_act);
}

int kcuda_matmul_forward(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                         const float *bias, int N, int C, int OC) {
  return kcuda_matmul_forward_w(k, out, inp, weight, bias, N, C, OC, 0);
}

/* dbias[OC] += sum over the N rows of dout[N,OC], deterministically and in parallel:
 * pass 1, a grid of (column groups of 32) x (row chunks), each block of 32 x 8 threads
 * sums its chunk's rows for its 32 columns (8 row lanes meeting in shared memory) and
 * writes one partial per (chunk, column); pass 2 adds the chunks' partials in chunk
 * order into dbias. The chunking depends only on N, OC and the GPU's SM count, so the
 * result has the same bits on every run. dout is an activation (fp32 or bf16). */
template <class T>
static int dbias_accumulate(kcuda_ctx *k, float *dbias, const T *dout, int N, int OC) {
  int col_groups = (OC + 31) / 32;
  int sms = k->sm_count > 0 ? k->sm_count : 132;
  /* about 4 blocks per SM in total, each chunk at least 64 rows */
  int chunks = (4 * sms + col_groups - 1) / col_groups;
  int max_chunks = (N + 63) / 64;
  if (chunks > max_chunks) chunks = max_chunks;
  if (chunks < 1) chunks = 1;
  int rows_per_chunk = (N + chunks - 1) / chunks;
  chunks = (N + rows_per_chunk - 1) / rows_per_chunk;
  float *partial =
      (float *)kcuda_scratch(k, KCUDA_SCRATCH_DBIAS, (size_t)chunks * OC * sizeof(float));
  if (!partial) return -1;
  dim3 grid(col_groups, chunks);
  dbias_partial_kernel<T>
      <<<grid, ACT_DBIAS_THREADS, 0, k->stream>>>(partial, dout, N, OC, rows_per_chunk);
  if (kcuda_check_launch(k, "matmul_backward dbias (partials)") != 0) return -1;
  dbias_final_kernel<><<<(OC + 255) / 256, 256, 0, k->stream>>>(dbias, partial, chunks, OC);
  return kcuda_check_launch(k, "matmul_backward dbias");
}

/* The two GEMMs of matmul_backward in bf16 precision; the weight is w (a bf16 working copy)
 * or, when w is NULL, the cached copy of the fp32 `weight` for `version`. */
static int matmul_backward_bf16(kcuda_ctx *k, void *dinp, float *dweight, const void *dout,
                                const void *inp, const void *w, const float *weight,
                                unsigned long long version, int N, int C, int OC, int bf16_act) {
  /* fp32 storage: dout is cast once and serves both GEMMs; bf16 storage: used as is */
  const void *g =
      bf16_act ? dout
               : bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_A, (const float *)dout, (size_t)N * OC);
  if (!g) return -1;
  if (dinp) {
    /* dinp[N,C] += dout[N,OC] @ weight[OC,C] (a bf16 dinp: C = D bf16, fp32 sum) */
    if (!w) w = bf16_weight(k, weight, (size_t)OC * C, version);
    if (!w || rm_gemm_typed(k, 0, 0, N, C, OC, 1.0f, g, 0, w, 0, 1.0f, dinp, 0, 1, NULL,
                            CUDA_R_16BF, bf16_act ? CUDA_R_16BF : CUDA_R_32F) != 0)
      return -1;
  }
  if (dweight) {
    /* dweight[OC,C] += dout^T @ inp (fp32 parameter gradient) */
    const void *x =
        bf16_act ? inp
                 : bf16_scratch_copy(k, KCUDA_SCRATCH_CAST_B, (const float *)inp, (size_t)N * C);
    if (!x || rm_gemm_typed(k, 1, 0, OC, C, N, 1.0f, g, 0, x, 0, 1.0f, dweight, 0, 1, NULL,
                            CUDA_R_16BF, CUDA_R_32F) != 0)
      return -1;
  }
  return 0;
}

/* dbias (if any) of matmul_backward: the sum of dout's rows, of the activation type. */
static int matmul_backward_dbias(kcuda_ctx *k, float *dbias, const void *dout, int N, int OC) {
  if (!dbias) return 0;
  int rc;
  KCUDA_WITH_ACT(k, rc = dbias_accumulate<ACT>(k, dbias, (const ACT *)dout, N, OC));
  return rc;
}

int kcuda_matmul_backward_w(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                            const void *dout, const void *inp, const float *weight, int N, int C,
                            int OC, unsigned long long weight_version) {
  if (N <= 0 || C <= 0 || OC <= 0)
    return kcuda_fail(k, "matmul_backward: bad shape N=%d C=%d OC=%d", N, C, OC);
  int bf16_act;
  if (act_bf16(k, "matmul_backward", &bf16_act) != 0) return -1;
  if (k->precision != KCUDA_BF16) {
    if (dinp && rm_gemm_typed(k, 0, 0, N, C, OC, 1.0f, dout, 0, weight, 0, 1.0f, dinp, 0, 1, NULL,
                              CUDA_R_32F, CUDA_R_32F) != 0)
      return -1;
    if (dweight && rm_gemm_typed(k, 1, 0, OC, C, N, 1.0f, dout, 0, inp, 0, 1.0f, dweight, 0, 1,
                                 NULL, CUDA_R_32F, CUDA_R_32F) != 0)
      return -1;
  } else if ((dinp || dweight) && matmul_backward_bf16(k, dinp, dweight, dout, inp, NULL, weight,
                                                       weight_version, N, C, OC, bf16_act) != 0) {
    return -1;
  }
  return matmul_backward_dbias(k, dbias, dout, N, OC);
}

int kcuda_matmul_backward_bf16w(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                                const void *dout, const void *inp, const void *weight, int N, int C,
                                int OC) {
  if (N <= 0 || C <= 0 || OC <= 0)
    return kcuda_fail(k, "matmul_backward: bad shape N=%d C=%d OC=%d", N, C, OC);
  int bf16_act;
  if (bf16_weights_ok(k, "matmul_backward") != 0 || act_bf16(k, "matmul_backward", &bf16_act) != 0)
    return -1;
  if ((dinp || dweight) &&
      matmul_backward_bf16(k, dinp, dweight, dout, inp, weight, NULL, 0, N, C, OC, bf16_act) != 0)
    return -1;
  return matmul_backward_dbias(k, dbias, dout, N, OC);
}

int kcuda_matmul_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias, const void *dout,
                          const void *inp, const float *weight, int N, int C, int OC) {
  return kcuda_matmul_backward_w(k, dinp, dweight, dbias, dout, inp, weight, N, C, OC, 0);
}
