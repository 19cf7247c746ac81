/*
 * cpu_kernels.h — the plain-C reference kernels of stepscope's GPT trainer.
 *
 * What it is for: every operation the GPT-2-style model needs (token and position
 * embedding, LayerNorm, matmul, causal multi-head attention, GELU, residual add,
 * fused softmax + cross-entropy, AdamW, gradient-norm helpers, and the mixture-of-experts
 * router, dispatch/combine and grouped expert GEMM), forward and backward.
 * The CPU backend of stepscope-train runs these directly; the CUDA kernels in
 * kernels/<op>.cu are tested against them, so they are also the specification.
 *
 * Conventions (llm.c style):
 *   - fp32, row-major, contiguous. "N" is a number of rows (usually B*T tokens),
 *     "C" a number of channels, "OC" output channels.
 *   - Forward functions OVERWRITE their outputs.
 *   - Backward functions ACCUMULATE (+=) into every gradient they write, so that
 *     gradient accumulation across micro-batches and gradients flowing into one
 *     tensor from several places need no extra add. Callers zero gradients first.
 *   - Pointers never alias unless stated; no function allocates memory, so none can
 *     fail: shapes are the caller's responsibility.
 *   - Each operation lives in its own file (kernels/cpu/<op>.c) with forward and
 *     backward side by side and comments deriving the math.
 */
#ifndef STEPSCOPE_CPU_KERNELS_H
#define STEPSCOPE_CPU_KERNELS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- encoder.c: out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:] ------------------------- */
/* tokens [B,T], wte [V,C], wpe [maxT,C] (rows 0..T-1 used), out [B,T,C]. */
void cpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                         int T, int C);
/* dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]. */
void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                          int T, int C);

/* ---- layernorm.c: out = (x - mean) * rstd * weight + bias, per row of C ----------- */
/* inp/out [N,C], weight/bias [C], mean/rstd [N] saved for backward (eps = 1e-5). */
void cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C);
void cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int C);

/* ---- matmul.c -------------------------------------------------------------------- */
/* out[N,OC] = inp[N,C] @ weight[OC,C]^T (+ bias[OC] if bias != NULL) */
void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC);
/* dinp[N,C] += dout @ weight; dweight[OC,C] += dout^T @ inp; dbias[OC] += sum dout (any of
 * dinp/dweight/dbias may be NULL to skip) */
void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC);

/* ---- attention.c ----------------------------------------------------------------- */
/* causal multi-head attention; qkv [B,T,3C] (q|k|v each C = NH*hs); out [B,T,C]; preatt, att
 * [B,NH,T,T] saved for backward */
/* preatt holds the scaled scores q.k/sqrt(hs); att the softmax; entries above the diagonal are 0.
 */
void cpu_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T,
                           int C, int NH);
/* dqkv [B,T,3C] += gradient w.r.t. qkv. dpreatt, datt [B,NH,T,T] are scratch space that this
 * function OVERWRITES (unlike the gradients, they need not be zeroed). */
void cpu_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout,
                            const float *qkv, const float *att, int B, int T, int C, int NH);

/* ---- attention_block.c: one (query block, key block) piece of attention, merged by ----
 * log-sum-exp (ring attention under context parallelism) -------------------------------- */
/* Query row (b,t) is q + (b*Tq + t)*q_stride (NH heads of hs = C/NH channels); key row (b,j)
 * is kv + (b*Tk + j)*kv_stride and its value row follows at +C (so kv may point at the k
 * part of a fused [.,3C] qkv buffer, stride 3C, or at a packed [.,2C] k|v buffer, stride 2C).
 * out [B,Tq,C] and lse [B,NH,Tq] hold the running result over the key blocks merged so far
 * (start: out = 0, lse = -INFINITY); this block is merged in exactly (online softmax).
 * causal: query t sees keys j <= t only (a diagonal block: both blocks cover the same
 * positions, Tq == Tk); else every key is visible. scratch: Tk floats. */
void cpu_attention_block_forward(float *out, float *lse, const float *q, int q_stride,
                                 const float *kv, int kv_stride, int B, int Tq, int Tk, int C,
                                 int NH, int causal, float *scratch);
/* Backward of one block, given the FINAL out and lse (every block merged) and dout [B,Tq,C]:
 * dq (rows of dq_stride) += the block's part of dL/dq; dkv (rows of dkv_stride: dk | dv at
 * +C) += dL/dk, dL/dv of the block's keys. Accumulates. scratch: Tk floats. */
void cpu_attention_block_backward(float *dq, int dq_stride, float *dkv, int dkv_stride,
                                  const float *dout, const float *out, const float *lse,
                                  const float *q, int q_stride, const float *kv, int kv_stride,
                                  int B, int Tq, int Tk, int C, int NH, int causal, float *scratch);

/* ---- gelu.c ---------------------------------------------------------------------- */
void cpu_gelu_forward(float *out, const float *inp, int N); /* tanh approximation */
void cpu_gelu_backward(float *dinp, const float *inp, const float *dout, int N);

/* ---- residual.c ------------------------------------------------------------------ */
void cpu_residual_forward(float *out, const float *a, const float *b, int N);
void cpu_residual_backward(float *da, float *db, const float *dout, int N);

/* ---- crossentropy.c -------------------------------------------------------------- */
/* logits [N,Vp] (Vp >= V padded), probs [N,Vp], losses[N] = -log probs[target] */
/* Only the first V columns take part in the softmax; probs of padded columns are 0. */
void cpu_softmax_crossentropy_forward(float *losses, float *probs, const float *logits,
                                      const int *targets, int N, int V, int Vp);
/* dlogits[N,Vp] += (probs - onehot) * dlosses[i]; padded columns get 0 */
void cpu_softmax_crossentropy_backward(float *dlogits, const float *dlosses, const float *probs,
                                       const int *targets, int N, int V, int Vp);

/* ---- adamw.c --------------------------------------------------------------------- */
/* AdamW step t (from 1) with decoupled weight decay */
/* m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; mhat = m/(1-b1^t); vhat = v/(1-b2^t);
 * p -= lr * (mhat / (sqrt(vhat) + eps) + weight_decay * p). */
void cpu_adamw_update(float *params, const float *grads, float *m, float *v, size_t n, float lr,
                      float beta1, float beta2, float eps, float weight_decay, int t);
double cpu_sum_squares(const float *x, size_t n); /* for global-norm gradient clipping */
void cpu_scale(float *x, float s, size_t n);

/* ---- moe_router.c: mixture-of-experts router (softmax over E experts, top K) ---------
 * logits/probs [N,E]; expert [N,K] the chosen experts by decreasing probability (ties: the
 * lower index, so routing is deterministic); gate [N,K] their probabilities, renormalized
 * over the K when renorm != 0. counts [E] is filled with the routing decisions per expert. */
void cpu_moe_router_forward(int *expert, float *gate, float *probs, const float *logits, int N,
                            int E, int K, int renorm);
/* Switch/GShard load-balancing loss E * sum_i f_i P_i (f_i = counts_i / (N K), P_i = mean
 * probability of expert i); 1 when perfectly balanced. */
double cpu_moe_aux_loss(const float *probs, const int *expert, int N, int E, int K, int *counts);
/* dlogits [N,E] += gradient of sum dgate * gate + aux_scale * aux (the choice of experts has
 * no gradient). */
void cpu_moe_router_backward(float *dlogits, const float *dgate, const float *probs,
                             const int *expert, int N, int E, int K, int renorm, float aux_scale,
                             int *counts);

/* ---- moe_dispatch.c: token dispatch (permute) and combine (weighted unpermute) --------
 * Plan: the N*K assignments grouped by expert in token order; expert e's rows are
 * [offsets[e], offsets[e+1]) (offsets [E+1]), counts [E] rows kept per expert, row_token [R]
 * the token of each row (R = offsets[E]), row_of [N*K] the row of assignment (t,k) or -1 if
 * dropped (capacity >= 0: at most capacity rows per expert; < 0: dropless). Returns the
 * number of dropped assignments. */
int cpu_moe_dispatch_plan(int *counts, int *offsets, int *row_token, int *row_of, const int *expert,
                          int N, int E, int K, int capacity);
/* xp [R,C] = x [N,C] rows by row_token; backward: dx += (scatter-add of dxp). */
void cpu_moe_permute_forward(float *xp, const float *x, const int *row_token, int R, int C);
void cpu_moe_permute_backward(float *dx, const float *dxp, const int *row_token, int R, int C);
/* out [N,C] = sum_k gate[t,k] yp[row_of[t,k]] (OVERWRITES); backward accumulates dyp [R,C]
 * and dgate [N,K]. */
void cpu_moe_unpermute_forward(float *out, const float *yp, const float *gate, const int *row_of,
                               int N, int K, int C);
void cpu_moe_unpermute_backward(float *dyp, float *dgate, const float *dout, const float *yp,
                                const float *gate, const int *row_of, int N, int K, int C);

/* ---- moe_expert_matmul.c: the experts' grouped GEMM ---------------------------------
 * Rows [offsets[e], offsets[e+1]) of inp [R,C] times expert e's weight [OC,C] (weight
 * [E,OC,C], bias [E,OC] or NULL) into out [R,OC]; backward as cpu_matmul_backward, per expert. */
void cpu_moe_expert_matmul_forward(float *out, const float *inp, const float *weight,
                                   const float *bias, const int *offsets, int E, int C, int OC);
void cpu_moe_expert_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, const int *offsets,
                                    int E, int C, int OC);

#ifdef __cplusplus
}
#endif

#endif /* STEPSCOPE_CPU_KERNELS_H */
