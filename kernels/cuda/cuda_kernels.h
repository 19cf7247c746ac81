/*
 * cuda_kernels.h — the CUDA kernels of stepscope's GPT trainer, callable from C.
 *
 * What it is for: the CUDA backend of stepscope-train (trainer/cuda/device_cuda.c)
 * runs every model operation through these functions; the GPU tests compare each
 * one with its plain-C reference in kernels/cpu/cpu_kernels.h, which is the
 * specification (same arguments, same layouts, same "forward overwrites, backward
 * accumulates" rule).
 *
 * How it works:
 *   - A `kcuda_ctx` belongs to one CUDA stream. It holds the cuBLASLt handle and
 *     workspace, a small cache of GEMM algorithms, and grow-only scratch buffers
 *     (for bf16 operand copies, attention's permuted heads, reduction partials)
 *     allocated stream-ordered (cudaMallocAsync), so growing never syncs the
 *     device. Everything a function does is enqueued on the context's stream.
 *   - Activations are stored in fp32 or bf16, a property of the context
 *     (kcuda_act_dtype below); parameters, their gradients and the optimizer state
 *     are always fp32. The precision of the GEMMs is a property of the context:
 *       KCUDA_BF16  bf16 operands on tensor cores (bf16 activations as stored,
 *                   fp32 activations rounded per call, weights from the bf16
 *                   weight cache), fp32 accumulation, output in the activation
 *                   type (weight gradients fp32) — bf16 mixed precision with fp32
 *                   master weights and fp32 optimizer state;
 *       KCUDA_TF32  fp32 operands on TF32 tensor cores;
 *       KCUDA_FP32  exact fp32 GEMMs (the reference-like mode).
 *     Element-wise kernels, LayerNorm, softmax and AdamW always compute in fp32.
 *   - Every function returns 0, or -1 after writing a message (API, status,
 *     shape) that kcuda_error() returns; launch errors are checked with
 *     cudaGetLastError. Errors that happen later on the device surface at the
 *     next synchronization, which is the caller's business.
 */
#ifndef STEPSCOPE_CUDA_KERNELS_H
#define STEPSCOPE_CUDA_KERNELS_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kcuda_ctx kcuda_ctx;

typedef enum kcuda_precision { KCUDA_FP32 = 0, KCUDA_TF32 = 1, KCUDA_BF16 = 2 } kcuda_precision;

/* Element type of activation storage: what the device API's activation pointers (dev_act in
 * trainer/device.h) point to. Activation arguments of the functions below are `void *` /
 * `const void *` of the context's activation type; parameters, gradients of parameters,
 * optimizer state, LayerNorm mean/rstd, losses, attention's preatt/att and ring attention's
 * lse stay fp32 (`float *`). Kernels load activations, compute in fp32 and round once when
 * they store (round to nearest even); backward functions that accumulate into a bf16
 * activation gradient read, add in fp32 and store rounded. */
typedef enum kcuda_act_dtype { KCUDA_ACT_F32 = 0, KCUDA_ACT_BF16 = 1 } kcuda_act_dtype;

/* Parses "fp32", "tf32", "bf16"; returns -1 for anything else. */
int kcuda_precision_parse(const char *name, kcuda_precision *out);
const char *kcuda_precision_name(kcuda_precision p);

/* A context for `stream` (on the current device). NULL with a message on failure. */
kcuda_ctx *kcuda_ctx_create(cudaStream_t stream, kcuda_precision precision, char *err,
                            size_t errlen);
/* Frees the context's buffers (stream-ordered) and handle. */
void kcuda_ctx_destroy(kcuda_ctx *k);
cudaStream_t kcuda_stream(const kcuda_ctx *k);
kcuda_precision kcuda_ctx_precision(const kcuda_ctx *k);
/* Sets the context's activation storage type (default KCUDA_ACT_F32). KCUDA_ACT_BF16 needs a
 * KCUDA_BF16 context (its GEMMs take bf16 operands as they are). Returns 0 or -1. */
int kcuda_ctx_set_act_dtype(kcuda_ctx *k, kcuda_act_dtype t);
kcuda_act_dtype kcuda_ctx_act_dtype(const kcuda_ctx *k);
/* The message of the last failure of this context ("" if none). */
const char *kcuda_error(const kcuda_ctx *k);
/* Bytes of device memory the context holds now (workspace + scratch). */
size_t kcuda_ctx_bytes(const kcuda_ctx *k);

/* ---- encoder.cu ---------------------------------------------------------------------------- */
int kcuda_encoder_forward(kcuda_ctx *k, void *out, const int *tokens, const float *wte,
                          const float *wpe, int B, int T, int C);
int kcuda_encoder_backward(kcuda_ctx *k, float *dwte, float *dwpe, const void *dout,
                           const int *tokens, int B, int T, int C);

/* ---- layernorm.cu --------------------------------------------------------------------------- */
int kcuda_layernorm_forward(kcuda_ctx *k, void *out, float *mean, float *rstd, const void *inp,
                            const float *weight, const float *bias, int N, int C);
int kcuda_layernorm_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                             const void *dout, const void *inp, const float *weight,
                             const float *mean, const float *rstd, int N, int C);
/* Fused: residual_out = a + b, then LayerNorm of residual_out (one read of a and b). */
int kcuda_residual_layernorm_forward(kcuda_ctx *k, void *residual_out, void *out, float *mean,
                                     float *rstd, const void *a, const void *b, const float *weight,
                                     const float *bias, int N, int C);

/* ---- matmul.cu (cuBLASLt) ------------------------------------------------------------------- */
/* out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC], fused as a cuBLASLt epilogue). */
int kcuda_matmul_forward(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                         const float *bias, int N, int C, int OC);
/* dinp += dout @ weight; dweight += dout^T @ inp; dbias += column sums of dout (NULL skips). */
int kcuda_matmul_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias, const void *dout,
                          const void *inp, const float *weight, int N, int C, int OC);
/* The same with bf16 weight copies kept between calls (KCUDA_BF16; see matmul.cu):
 * `weight_version` names the current contents of weight memory — the caller bumps it
 * after every write that may touch a weight — and 0 disables the cache for this call.
 * Other precisions ignore it. */
int kcuda_matmul_forward_w(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                           const float *bias, int N, int C, int OC,
                           unsigned long long weight_version);
int kcuda_matmul_backward_w(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                            const void *dout, const void *inp, const float *weight, int N, int C,
                            int OC, unsigned long long weight_version);
/* The same reading a bf16 weight [OC,C] the caller keeps (a working copy of fp32 master
 * weights, cast by kcuda_cast_f32_to_bf16): no cache; bf16 precision only. */
int kcuda_matmul_forward_bf16w(kcuda_ctx *k, void *out, const void *inp, const void *weight,
                               const float *bias, int N, int C, int OC);
int kcuda_matmul_backward_bf16w(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                                const void *dout, const void *inp, const void *weight, int N, int C,
                                int OC);
/* How many weight casts the cache has done (each entry once per version it is used in). */
unsigned long long kcuda_weight_casts(const kcuda_ctx *k);
/* Row-major batched GEMM: C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b < batch, where
 * op(A) is [M,K] (A stored [K,M] when transA), op(B) is [K,N] (B stored [N,K] when transB),
 * and consecutive matrices are strideA/strideB/strideC elements apart. */
int kcuda_gemm(kcuda_ctx *k, int transA, int transB, int M, int N, int K, float alpha,
               const float *A, const float *B, float beta, float *C, int batch, long long strideA,
               long long strideB, long long strideC);

/* ---- attention.cu (batched GEMMs + softmax) ---------------------------------------------------
 */
int kcuda_attention_forward(kcuda_ctx *k, void *out, float *preatt, float *att, const void *qkv,
                            int B, int T, int C, int NH);
int kcuda_attention_backward(kcuda_ctx *k, void *dqkv, float *dpreatt, float *datt,
                             const void *dout, const void *qkv, const float *att, int B, int T,
                             int C, int NH);

/* ---- flash_attention.cu (fused, bf16 tensor cores; STEPSCOPE_CUDA_ATTENTION=fused) ---------- */
/* 1 when the fused kernels handle this shape: head size 32, 64 or 128, T > head size (att,
 * [B,NH,T,T], must hold the row statistics and a copy of the output), B*NH <= 65535. */
int kcuda_attention_fused_supported(int B, int T, int C, int NH);
/* out as kcuda_attention_forward; att receives what the fused backward needs (row
 * log-sum-exp, then the output in [B,NH,T,hs]), not the softmax; no preatt. */
int kcuda_attention_forward_fused(kcuda_ctx *k, void *out, float *att, const void *qkv, int B,
                                  int T, int C, int NH);
/* dqkv += the gradient, from the att that the fused forward wrote. */
int kcuda_attention_backward_fused(kcuda_ctx *k, void *dqkv, const void *dout, const void *qkv,
                                   const float *att, int B, int T, int C, int NH);

/* ---- attention_block.cu (ring attention under context parallelism) ------------------------- */
/* The math and layouts of cpu_attention_block_* (kernels/cpu/cpu_kernels.h): one block of
 * queries (rows q_stride floats apart) against one block of keys (rows kv_stride apart, v
 * at +C), merged into out [B,Tq,C] / lse [B,NH,Tq] by log-sum-exp (start: out = 0, lse =
 * -inf); causal: query t sees keys j <= t. The backward takes the final out and lse and
 * ACCUMULATES into dq (rows dq_stride apart) and dkv (dk | dv at +C, rows dkv_stride). */
int kcuda_attention_block_forward(kcuda_ctx *k, void *out, float *lse, const void *q, int q_stride,
                                  const void *kv, int kv_stride, int B, int Tq, int Tk, int C,
                                  int NH, int causal);
int kcuda_attention_block_backward(kcuda_ctx *k, void *dq, int dq_stride, void *dkv, int dkv_stride,
                                   const void *dout, const void *out, const float *lse,
                                   const void *q, int q_stride, const void *kv, int kv_stride,
                                   int B, int Tq, int Tk, int C, int NH, int causal);
/* Which kernels a context of this precision runs for the shape: bf16 tensor-core tiles
 * (bf16/tf32 contexts, head size 16/32/64/128, B*NH <= 65535), the fp32 warp-per-row
 * kernels (fp32 contexts and other head sizes up to 256), or -1 (not supported). */
#define KCUDA_BLOCK_TENSOR_CORES 1
#define KCUDA_BLOCK_FP32         2
int kcuda_attention_block_path(kcuda_precision precision, int B, int C, int NH);

/* ---- gelu.cu, residual.cu ----------------------------------------------------------------------
 */
int kcuda_gelu_forward(kcuda_ctx *k, void *out, const void *inp, size_t N);
int kcuda_gelu_backward(kcuda_ctx *k, void *dinp, const void *inp, const void *dout, size_t N);
int kcuda_residual_forward(kcuda_ctx *k, void *out, const void *a, const void *b, size_t N);
int kcuda_residual_backward(kcuda_ctx *k, void *da, void *db, const void *dout, size_t N);

/* ---- crossentropy.cu ------------------------------------------------------------------------- */
int kcuda_crossentropy_forward(kcuda_ctx *k, float *losses, void *probs, const void *logits,
                               const int *targets, int N, int V, int Vp);
int kcuda_crossentropy_backward(kcuda_ctx *k, void *dlogits, const float *dlosses,
                                const void *probs, const int *targets, int N, int V, int Vp);

/* ---- adamw.cu ------------------------------------------------------------------------------- */
int kcuda_adamw(kcuda_ctx *k, float *params, const float *grads, float *m, float *v, size_t n,
                float lr, float beta1, float beta2, float eps, float weight_decay, int t);

/* ---- reduce.cu: fills, scaling, deterministic sums into a device double -----------------------
 */
int kcuda_fill(kcuda_ctx *k, float *x, float value, size_t n);
int kcuda_scale(kcuda_ctx *k, float *x, float factor, size_t n);
/* dst[i] += src[i] for n floats (add.cu). */
int kcuda_add_f32(kcuda_ctx *k, float *dst, const float *src, size_t n);
/* *acc += sum(x) / sum(x^2), accumulated in double in a fixed order (bitwise reproducible). */
int kcuda_sum_accumulate(kcuda_ctx *k, double *acc, const float *x, size_t n);
int kcuda_sum_squares_accumulate(kcuda_ctx *k, double *acc, const float *x, size_t n);

/* ---- moe.cu: mixture of experts (router, dispatch plan, permutations, grouped expert GEMM) ---
 * The math, the layouts and the accumulation rules of cpu_moe_* (kernels/cpu/cpu_kernels.h);
 * routing-dependent sizes are read on the device (R = offsets[E]; the expert-grouped
 * buffers hold Rmax = N x K rows), never on the host. logits/dlogits, x/dx, xp/dxp, yp/dyp,
 * out/dout and the GEMM's inp/out/dinp/dout are activations (the context's type); probs,
 * gate, dgate, weights, biases and their gradients fp32; expert, counts, offsets, row_token
 * and row_of int. At most 1024 experts. Routing, the plan and the permutations reproduce the
 * CPU exactly (see moe_kernels.cuh); the GEMMs accumulate in fp32 in their own order. */
int kcuda_moe_router_forward(kcuda_ctx *k, int *expert, float *gate, float *probs,
                             const void *logits, int N, int E, int K, int renorm);
/* counts [E]: scratch, refilled with the routing decisions per expert */
int kcuda_moe_router_backward(kcuda_ctx *k, void *dlogits, const float *dgate, const float *probs,
                              const int *expert, int *counts, int N, int E, int K, int renorm,
                              float aux_scale);
/* *acc (device double) += the load-balancing loss; counts [E] scratch as above */
int kcuda_moe_aux_loss_accumulate(kcuda_ctx *k, double *acc, const float *probs, const int *expert,
                                  int *counts, int N, int E, int K);
/* *dropped_acc (device int, may be NULL) += assignments dropped by capacity (< 0: none) */
int kcuda_moe_dispatch_plan(kcuda_ctx *k, int *counts, int *offsets, int *row_token, int *row_of,
                            int *dropped_acc, const int *expert, int N, int E, int K, int capacity);
int kcuda_moe_permute_forward(kcuda_ctx *k, void *xp, const void *x, const int *row_token,
                              const int *offsets, int N, int E, int K, int C);
/* needs row_token as moe_dispatch_plan writes it (increasing within each expert's rows) */
int kcuda_moe_permute_backward(kcuda_ctx *k, void *dx, const void *dxp, const int *row_token,
                               const int *offsets, int N, int E, int K, int C);
int kcuda_moe_unpermute_forward(kcuda_ctx *k, void *out, const void *yp, const float *gate,
                                const int *row_of, int N, int K, int C);
int kcuda_moe_unpermute_backward(kcuda_ctx *k, void *dyp, float *dgate, const void *dout,
                                 const void *yp, const float *gate, const int *row_of, int N, int K,
                                 int C);
/* weight [E,OC,C], bias [E,OC] or NULL; backward: dinp, dweight, dbias may each be NULL */
int kcuda_moe_expert_matmul_forward(kcuda_ctx *k, void *out, const void *inp, const float *weight,
                                    const float *bias, const int *offsets, int Rmax, int E, int C,
                                    int OC);
int kcuda_moe_expert_matmul_backward(kcuda_ctx *k, void *dinp, float *dweight, float *dbias,
                                     const void *dout, const void *inp, const float *weight,
                                     const int *offsets, int Rmax, int E, int C, int OC);

/* ---- cast.cu: fp32 <-> bf16 (round to nearest even) -------------------------------------------
 */
/* dst holds n bf16 values (2 bytes each). */
int kcuda_cast_f32_to_bf16(kcuda_ctx *k, void *dst, const float *src, size_t n);
int kcuda_cast_bf16_to_f32(kcuda_ctx *k, float *dst, const void *src, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_CUDA_KERNELS_H */
