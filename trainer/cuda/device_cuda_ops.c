/*
 * device_cuda_ops.c — the CUDA backend's model operations, one call into kernels/cuda each
 * on the stream's kernel context (device_cuda.c has the overview), and the backend's
 * operations table (dev_cuda_ops), which names them and the functions of device_cuda.c and
 * device_cuda_streams.c.
 *
 * Why a file of its own: the operations are thin wrappers, one per device-API operation,
 * that grow with the model (attention variants, mixture of experts); the device and its
 * streams do not change with them.
 */
#include "device_cuda_internal.h"

#include <stdio.h>

#include "comm_nccl.h"
#include "op_inputs.h"
#include "stepscope.h"

/* After a kernel-library call: a failure becomes the device's error. */
static void kernel_result(dev_stream *s, int rc, const char *op) {
  if (rc == 0) return;
  char msg[640];
  snprintf(msg, sizeof msg, "%s on stream %s: %s", op, s->name, kcuda_error(s->k));
  dev_cuda_fail(s->d, msg);
}

/* The weights version a GEMM on `weight` may cache under (0: no cache). */
static unsigned long long weights_version(dev_device *d, const float *weight) {
  if (d->precision != KCUDA_BF16) return 0;
  if (weight_watch_find(&d->watch, weight) >= 0) return d->watch.version;
  for (size_t i = 0; i < d->nallocs; i++) {
    uintptr_t lo = (uintptr_t)d->allocs[i].p, a = (uintptr_t)weight;
    if (a >= lo && a < lo + d->allocs[i].bytes)
      return weight_watch_version_for(&d->watch, weight, d->allocs[i].p, d->allocs[i].bytes);
  }
  return 0; /* not device-API memory: cast at every call */
}

/* ---- the operations' inputs in the trace ------------------------------------------------
 * When tracing, a compute operation's inputs (op_inputs.h, as the CPU backend writes them)
 * go into a RANGE of domain "cpu_op" on the calling thread around the launch of its kernels:
 * `stepscope ops` joins each kernel to its runtime launch by correlation id and the launch
 * to the range that contains it, as for a Kineto trace's cpu_op events (docs/ops.md "The
 * trainer's ops"). Not tracing, it costs one flag check. */
typedef struct launch_inputs {
  uint64_t start_ns; /* 0: not tracing */
  const char *act;   /* the activations' type name */
  char text[OP_INPUTS_MAX];
} launch_inputs;

/* Whether to describe the launch that follows (tracing): then starts the range. */
static int launch_inputs_begin(dev_stream *s, launch_inputs *n) {
  n->start_ns = stepscope_active() ? stepscope_now_ns() : 0;
  n->act = op_inputs_act_type(s->d->act);
  n->text[0] = 0;
  return n->start_ns != 0;
}

/* After the launch: the range named `op` with the inputs described. */
static void launch_inputs_end(const launch_inputs *n, const char *op) {
  if (n->start_ns) op_inputs_launch_range(op, n->text, n->start_ns);
}

/* ---- model operations: one call into kernels/cuda each ------------------------------ */

static void op_encoder_forward(dev_stream *s, dev_act *out, const int *tokens, const float *wte,
                               const float *wpe, int B, int T, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_encoder_forward(s->k, out, tokens, wte, wpe, B, T, C), "encoder_forward");
}

static void op_encoder_backward(dev_stream *s, float *dwte, float *dwpe, const dev_act *dout,
                                const int *tokens, int B, int T, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dwte);
  wrote(s, dwpe);
  kernel_result(s, kcuda_encoder_backward(s->k, dwte, dwpe, dout, tokens, B, T, C),
                "encoder_backward");
}

static void op_layernorm_forward(dev_stream *s, dev_act *out, float *mean, float *rstd,
                                 const dev_act *inp, const float *weight, const float *bias, int N,
                                 int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, mean);
  wrote(s, rstd);
  launch_inputs n;
  if (launch_inputs_begin(s, &n)) op_inputs_layernorm_forward(n.text, sizeof n.text, n.act, N, C);
  kernel_result(s, kcuda_layernorm_forward(s->k, out, mean, rstd, inp, weight, bias, N, C),
                "layernorm_forward");
  launch_inputs_end(&n, "layernorm_forward");
}

static void op_layernorm_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                  const dev_act *dout, const dev_act *inp, const float *weight,
                                  const float *mean, const float *rstd, int N, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  wrote(s, dweight);
  wrote(s, dbias);
  launch_inputs n;
  if (launch_inputs_begin(s, &n)) op_inputs_layernorm_backward(n.text, sizeof n.text, n.act, N, C);
  kernel_result(
      s, kcuda_layernorm_backward(s->k, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C),
      "layernorm_backward");
  launch_inputs_end(&n, "layernorm_backward");
}

/* matmul_forward on an fp32 weight (through the kernels' cache of bf16 copies in bf16
 * precision) or, bf16_weight, on a bf16 working copy the model keeps */
static void matmul_forward_on(dev_stream *s, dev_act *out, const dev_act *inp, const void *weight,
                              int bf16_weight, const float *bias, int N, int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_matmul_forward(n.text, sizeof n.text, n.act, N, C, OC, bias != NULL, bf16_weight);
  int rc = bf16_weight ? kcuda_matmul_forward_bf16w(s->k, out, inp, weight, bias, N, C, OC)
                       : kcuda_matmul_forward_w(s->k, out, inp, weight, bias, N, C, OC,
                                                weights_version(s->d, weight));
  kernel_result(s, rc, "matmul_forward");
  launch_inputs_end(&n, "matmul_forward");
}
static void op_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp, const float *weight,
                              const float *bias, int N, int C, int OC) {
  matmul_forward_on(s, out, inp, weight, 0, bias, N, C, OC);
}
static void op_matmul_forward_bf16w(dev_stream *s, dev_act *out, const dev_act *inp,
                                    const dev_bf16 *weight, const float *bias, int N, int C,
                                    int OC) {
  matmul_forward_on(s, out, inp, weight, 1, bias, N, C, OC);
}

static void matmul_backward_on(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                               const dev_act *dout, const dev_act *inp, const void *weight,
                               int bf16_weight, int N, int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  wrote(s, dweight);
  wrote(s, dbias);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_matmul_backward(n.text, sizeof n.text, n.act, N, C, OC, dinp != NULL, dweight != NULL,
                              dbias != NULL, bf16_weight);
  int rc = bf16_weight ? kcuda_matmul_backward_bf16w(s->k, dinp, dweight, dbias, dout, inp, weight,
                                                     N, C, OC)
                       : kcuda_matmul_backward_w(s->k, dinp, dweight, dbias, dout, inp, weight, N,
                                                 C, OC, weights_version(s->d, weight));
  kernel_result(s, rc, "matmul_backward");
  launch_inputs_end(&n, "matmul_backward");
}
static void op_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                               const dev_act *dout, const dev_act *inp, const float *weight, int N,
                               int C, int OC) {
  matmul_backward_on(s, dinp, dweight, dbias, dout, inp, weight, 0, N, C, OC);
}
static void op_matmul_backward_bf16w(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                     const dev_act *dout, const dev_act *inp,
                                     const dev_bf16 *weight, int N, int C, int OC) {
  matmul_backward_on(s, dinp, dweight, dbias, dout, inp, weight, 1, N, C, OC);
}

static void op_cast_bf16(dev_stream *s, dev_bf16 *dst, const float *src, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  kernel_result(s, kcuda_cast_f32_to_bf16(s->k, dst, src, n), "cast_bf16");
}

/* The fused kernels (flash_attention.cu) where the device runs them and the shape fits them;
 * the model sizes its attention buffers by the same answer (dev_attention_fused). */
static int cuda_attention_fused(const dev_device *d, int B, int T, int C, int NH) {
  return d->fused_attention && kcuda_attention_fused_supported(B, T, C, NH);
}

static void op_attention_forward(dev_stream *s, dev_act *out, float *preatt, float *att,
                                 const dev_act *qkv, int B, int T, int C, int NH) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, preatt);
  wrote(s, att);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_attention_forward(n.text, sizeof n.text, n.act, B, T, C, NH);
  /* the choice is a function of the device and the shape only, so backward makes the
   * same one and finds in att what this forward saved */
  if (cuda_attention_fused(s->d, B, T, C, NH))
    kernel_result(s, kcuda_attention_forward_fused(s->k, out, att, qkv, B, T, C, NH),
                  "attention_forward (fused)");
  else
    kernel_result(s, kcuda_attention_forward(s->k, out, preatt, att, qkv, B, T, C, NH),
                  "attention_forward");
  launch_inputs_end(&n, "attention_forward");
}

static void op_attention_backward(dev_stream *s, dev_act *dqkv, float *dpreatt, float *datt,
                                  const dev_act *dout, const dev_act *qkv, const float *att, int B,
                                  int T, int C, int NH) {
  SKIP_IF_FAILED(s);
  wrote(s, dqkv);
  wrote(s, dpreatt);
  wrote(s, datt);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_attention_backward(n.text, sizeof n.text, n.act, B, T, C, NH);
  if (cuda_attention_fused(s->d, B, T, C, NH))
    kernel_result(s, kcuda_attention_backward_fused(s->k, dqkv, dout, qkv, att, B, T, C, NH),
                  "attention_backward (fused)");
  else
    kernel_result(s,
                  kcuda_attention_backward(s->k, dqkv, dpreatt, datt, dout, qkv, att, B, T, C, NH),
                  "attention_backward");
  launch_inputs_end(&n, "attention_backward");
}

/* Ring attention's blocks (attention_block.cu): bf16 tensor-core tiles, or the fp32 kernels
 * in fp32 precision and for head sizes the tiles do not take. */
static void op_attention_block_forward(dev_stream *s, dev_act *out, float *lse, const dev_act *q,
                                       int q_stride, const dev_act *kv, int kv_stride, int B,
                                       int Tq, int Tk, int C, int NH, int causal) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  wrote(s, lse);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_attention_block(n.text, sizeof n.text, n.act, 0, B, Tq, Tk, C, NH, causal);
  kernel_result(s,
                kcuda_attention_block_forward(s->k, out, lse, q, q_stride, kv, kv_stride, B, Tq, Tk,
                                              C, NH, causal),
                "attention_block_forward");
  launch_inputs_end(&n, "attention_block_forward");
}

static void op_attention_block_backward(dev_stream *s, dev_act *dq, int dq_stride, dev_act *dkv,
                                        int dkv_stride, const dev_act *dout, const dev_act *out,
                                        const float *lse, const dev_act *q, int q_stride,
                                        const dev_act *kv, int kv_stride, int B, int Tq, int Tk,
                                        int C, int NH, int causal) {
  SKIP_IF_FAILED(s);
  wrote(s, dq);
  wrote(s, dkv);
  launch_inputs n;
  if (launch_inputs_begin(s, &n))
    op_inputs_attention_block(n.text, sizeof n.text, n.act, 1, B, Tq, Tk, C, NH, causal);
  kernel_result(s,
                kcuda_attention_block_backward(s->k, dq, dq_stride, dkv, dkv_stride, dout, out, lse,
                                               q, q_stride, kv, kv_stride, B, Tq, Tk, C, NH,
                                               causal),
                "attention_block_backward");
  launch_inputs_end(&n, "attention_block_backward");
}

/* Mixture of experts (moe.cu): routing, the plan and the permutations as the CPU computes
 * them; the routing-dependent row count is read by the kernels, never here. */
static void op_moe_router_forward(dev_stream *s, int *expert, float *gate, float *probs,
                                  const dev_act *logits, int N, int E, int K, int renorm) {
  SKIP_IF_FAILED(s);
  wrote(s, expert);
  wrote(s, gate);
  wrote(s, probs);
  kernel_result(s, kcuda_moe_router_forward(s->k, expert, gate, probs, logits, N, E, K, renorm),
                "moe_router_forward");
}

static void op_moe_router_backward(dev_stream *s, dev_act *dlogits, const float *dgate,
                                   const float *probs, const int *expert, int *counts, int N, int E,
                                   int K, int renorm, float aux_scale) {
  SKIP_IF_FAILED(s);
  wrote(s, dlogits);
  wrote(s, counts);
  kernel_result(s,
                kcuda_moe_router_backward(s->k, dlogits, dgate, probs, expert, counts, N, E, K,
                                          renorm, aux_scale),
                "moe_router_backward");
}

static void op_moe_aux_loss_accumulate(dev_stream *s, double *acc, const float *probs,
                                       const int *expert, int *counts, int N, int E, int K) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  wrote(s, counts);
  kernel_result(s, kcuda_moe_aux_loss_accumulate(s->k, acc, probs, expert, counts, N, E, K),
                "moe_aux_loss");
}

static void op_moe_dispatch_plan(dev_stream *s, int *counts, int *offsets, int *row_token,
                                 int *row_of, int *dropped_acc, const int *expert, int N, int E,
                                 int K, int capacity) {
  SKIP_IF_FAILED(s);
  wrote(s, counts);
  wrote(s, offsets);
  wrote(s, row_token);
  wrote(s, row_of);
  if (dropped_acc) wrote(s, dropped_acc);
  kernel_result(s,
                kcuda_moe_dispatch_plan(s->k, counts, offsets, row_token, row_of, dropped_acc,
                                        expert, N, E, K, capacity),
                "moe_dispatch_plan");
}

static void op_moe_permute_forward(dev_stream *s, dev_act *xp, const dev_act *x,
                                   const int *row_token, const int *offsets, int N, int E, int K,
                                   int C) {
  SKIP_IF_FAILED(s);
  wrote(s, xp);
  kernel_result(s, kcuda_moe_permute_forward(s->k, xp, x, row_token, offsets, N, E, K, C),
                "moe_permute_forward");
}

static void op_moe_permute_backward(dev_stream *s, dev_act *dx, const dev_act *dxp,
                                    const int *row_token, const int *offsets, int N, int E, int K,
                                    int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dx);
  kernel_result(s, kcuda_moe_permute_backward(s->k, dx, dxp, row_token, offsets, N, E, K, C),
                "moe_permute_backward");
}

static void op_moe_unpermute_forward(dev_stream *s, dev_act *out, const dev_act *yp,
                                     const float *gate, const int *row_of, int N, int K, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(s, kcuda_moe_unpermute_forward(s->k, out, yp, gate, row_of, N, K, C),
                "moe_unpermute_forward");
}

static void op_moe_unpermute_backward(dev_stream *s, dev_act *dyp, float *dgate,
                                      const dev_act *dout, const dev_act *yp, const float *gate,
                                      const int *row_of, int N, int K, int C) {
  SKIP_IF_FAILED(s);
  wrote(s, dyp);
  wrote(s, dgate);
  kernel_result(s, kcuda_moe_unpermute_backward(s->k, dyp, dgate, dout, yp, gate, row_of, N, K, C),
                "moe_unpermute_backward");
}

/* The experts' grouped GEMM reads the fp32 weights directly (bf16 tensor cores round them as
 * they are staged, no cached bf16 copies; see moe_kernels.cuh for why it is not cuBLAS).
 * Their inputs are not in the trace: the rows they multiply (offsets[E]) are known on the
 * device only, and reading them here would wait for the stream. */
static void op_moe_expert_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                         const float *weight, const float *bias, const int *offsets,
                                         int Rmax, int E, int C, int OC) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  kernel_result(
      s, kcuda_moe_expert_matmul_forward(s->k, out, inp, weight, bias, offsets, Rmax, E, C, OC),
      "moe_expert_matmul_forward");
}

static void op_moe_expert_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight,
                                          float *dbias, const dev_act *dout, const dev_act *inp,
                                          const float *weight, const int *offsets, int Rmax, int E,
                                          int C, int OC) {
  SKIP_IF_FAILED(s);
  if (dinp) wrote(s, dinp);
  if (dweight) wrote(s, dweight);
  if (dbias) wrote(s, dbias);
  kernel_result(s,
                kcuda_moe_expert_matmul_backward(s->k, dinp, dweight, dbias, dout, inp, weight,
                                                 offsets, Rmax, E, C, OC),
                "moe_expert_matmul_backward");
}

static void op_gelu_forward(dev_stream *s, dev_act *out, const dev_act *inp, int N) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  launch_inputs n;
  if (launch_inputs_begin(s, &n)) op_inputs_gelu_forward(n.text, sizeof n.text, n.act, N);
  kernel_result(s, kcuda_gelu_forward(s->k, out, inp, (size_t)N), "gelu_forward");
  launch_inputs_end(&n, "gelu_forward");
}

static void op_gelu_backward(dev_stream *s, dev_act *dinp, const dev_act *inp, const dev_act *dout,
                             int N) {
  SKIP_IF_FAILED(s);
  wrote(s, dinp);
  launch_inputs n;
  if (launch_inputs_begin(s, &n)) op_inputs_two_vectors(n.text, sizeof n.text, n.act, N);
  kernel_result(s, kcuda_gelu_backward(s->k, dinp, inp, dout, (size_t)N), "gelu_backward");
  launch_inputs_end(&n, "gelu_backward");
}

static void op_residual_forward(dev_stream *s, dev_act *out, const dev_act *a, const dev_act *b,
                                int N) {
  SKIP_IF_FAILED(s);
  wrote(s, out);
  launch_inputs n;
  if (launch_inputs_begin(s, &n)) op_inputs_two_vectors(n.text, sizeof n.text, n.act, N);
  kernel_result(s, kcuda_residual_forward(s->k, out, a, b, (size_t)N), "residual_forward");
  launch_inputs_end(&n, "residual_forward");
}

static void op_residual_backward(dev_stream *s, dev_act *da, dev_act *db, const dev_act *dout,
                                 int N) {
  SKIP_IF_FAILED(s);
  wrote(s, da);
  wrote(s, db);
  kernel_result(s, kcuda_residual_backward(s->k, da, db, dout, (size_t)N), "residual_backward");
}

static void op_crossentropy_forward(dev_stream *s, float *losses, dev_act *probs,
                                    const dev_act *logits, const int *targets, int N, int V,
                                    int Vp) {
  SKIP_IF_FAILED(s);
  wrote(s, losses);
  wrote(s, probs);
  kernel_result(s, kcuda_crossentropy_forward(s->k, losses, probs, logits, targets, N, V, Vp),
                "crossentropy_forward");
}

static void op_crossentropy_backward(dev_stream *s, dev_act *dlogits, const float *dlosses,
                                     const dev_act *probs, const int *targets, int N, int V,
                                     int Vp) {
  SKIP_IF_FAILED(s);
  wrote(s, dlogits);
  kernel_result(s, kcuda_crossentropy_backward(s->k, dlogits, dlosses, probs, targets, N, V, Vp),
                "crossentropy_backward");
}

static void op_fill(dev_stream *s, float *x, float value, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, x);
  kernel_result(s, kcuda_fill(s->k, x, value, n), "fill");
}

static void op_sum_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  kernel_result(s, kcuda_sum_accumulate(s->k, acc, x, n), "sum");
}

static void op_sum_squares_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, acc);
  kernel_result(s, kcuda_sum_squares_accumulate(s->k, acc, x, n), "sum_squares");
}

static void op_scale(dev_stream *s, float *x, float factor, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, x);
  kernel_result(s, kcuda_scale(s->k, x, factor, n), "scale");
}

static void op_add(dev_stream *s, float *dst, const float *src, size_t n) {
  SKIP_IF_FAILED(s);
  wrote(s, dst);
  kernel_result(s, kcuda_add_f32(s->k, dst, src, n), "add");
}

static void op_adamw(dev_stream *s, float *params, const float *grads, float *m, float *v, size_t n,
                     float lr, float beta1, float beta2, float eps, float weight_decay, int t) {
  SKIP_IF_FAILED(s);
  wrote(s, params);
  wrote(s, m);
  wrote(s, v);
  kernel_result(s,
                kcuda_adamw(s->k, params, grads, m, v, n, lr, beta1, beta2, eps, weight_decay, t),
                "adamw");
}

static const dev_ops cuda_ops = {
    .backend_name = "cuda",
    .close = dev_cuda_close,
    .name = dev_cuda_name,
    .last_error = dev_cuda_last_error,
    .trace_started = dev_cuda_trace_started,
    .set_progress_hook = dev_cuda_set_progress_hook,
    .bytes_in_use = dev_cuda_bytes_in_use,
    .bytes_peak = dev_cuda_bytes_peak,
    .abort = dev_cuda_abort,
    .set_activation_dtype = dev_cuda_set_activation_dtype,
    .activation_dtype = dev_cuda_activation_dtype,
    .auto_activation_dtype = dev_cuda_auto_activation_dtype,
    .peak_flops = dev_cuda_peak_flops,
    .measured_peak = dev_cuda_measured_peak,
    .attention_fused = cuda_attention_fused,
    .comm = &comm_nccl_dev_ops,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .stream_synchronize = cuda_stream_synchronize,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait_event = cuda_stream_wait_event,
    .copy_to_device = cuda_copy_to_device,
    .copy_to_host = cuda_copy_to_host,
    .copy = cuda_copy,
    .zero = cuda_zero,
    .copy_2d = cuda_copy_2d,
    .encoder_forward = op_encoder_forward,
    .encoder_backward = op_encoder_backward,
    .layernorm_forward = op_layernorm_forward,
    .layernorm_backward = op_layernorm_backward,
    .matmul_forward = op_matmul_forward,
    .matmul_backward = op_matmul_backward,
    .matmul_forward_bf16w = op_matmul_forward_bf16w,
    .matmul_backward_bf16w = op_matmul_backward_bf16w,
    .cast_bf16 = op_cast_bf16,
    .attention_forward = op_attention_forward,
    .attention_backward = op_attention_backward,
    .attention_block_forward = op_attention_block_forward,
    .attention_block_backward = op_attention_block_backward,
    .moe_router_forward = op_moe_router_forward,
    .moe_router_backward = op_moe_router_backward,
    .moe_aux_loss_accumulate = op_moe_aux_loss_accumulate,
    .moe_dispatch_plan = op_moe_dispatch_plan,
    .moe_permute_forward = op_moe_permute_forward,
    .moe_permute_backward = op_moe_permute_backward,
    .moe_unpermute_forward = op_moe_unpermute_forward,
    .moe_unpermute_backward = op_moe_unpermute_backward,
    .moe_expert_matmul_forward = op_moe_expert_matmul_forward,
    .moe_expert_matmul_backward = op_moe_expert_matmul_backward,
    .gelu_forward = op_gelu_forward,
    .gelu_backward = op_gelu_backward,
    .residual_forward = op_residual_forward,
    .residual_backward = op_residual_backward,
    .crossentropy_forward = op_crossentropy_forward,
    .crossentropy_backward = op_crossentropy_backward,
    .fill = op_fill,
    .sum_accumulate = op_sum_accumulate,
    .sum_squares_accumulate = op_sum_squares_accumulate,
    .scale = op_scale,
    .add = op_add,
    .adamw = op_adamw,
};

const dev_ops *dev_cuda_ops(void) {
  return &cuda_ops;
}

int dev_is_cuda(const dev_device *d) {
  return d && ((const dev_device_header *)d)->ops == &cuda_ops;
}
