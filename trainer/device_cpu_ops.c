/*
 * device_cpu_ops.c — the model operations of the CPU backend (device.h's encoder, LayerNorm,
 * matmul, attention, ring-attention blocks, mixture-of-experts, GELU, residual, cross-entropy,
 * sums, scale, add and AdamW): each one packs its arguments into a `cpu_task` and enqueues
 * it on a CPU stream, where it runs the reference kernel of kernels/cpu.
 *
 * Why a file of its own: device_cpu.c is the CPU device's machinery (memory, streams,
 * events, copies) and this is the arithmetic it runs; the two meet only through
 * cpu_stream_enqueue and cpu_stream_activation_dtype (device_cpu.h), and
 * dev_cpu_fill_model_ops puts these operations into the backend's table.
 */
#include "device_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "cpu_kernels.h"
#include "op_inputs.h"
#include "stepscope.h"

/* ---- model operations -------------------------------------------------------------
 * Each wrapper packs its arguments into a task (pointers in p[], integers in i[],
 * scalars in f[]), names its activation arguments (act() below: which p[], how many
 * elements, whether the kernel writes them), states the work's flops and bytes moved,
 * and enqueues it; the matching run_* unpacks and calls the reference kernel.
 *
 * bf16 activations: the reference kernels are fp32, so a task whose device stores
 * activations in bf16 runs on fp32 copies: run_staged widens every activation argument,
 * runs the kernel, and rounds the ones it writes back into bf16 (nearest even, like
 * __float2bfloat16_rn). That is exactly "bf16 storage, fp32 math, one rounding per store"
 * for every operation, which is what the CUDA kernels do (their accumulation order
 * differs), so a CPU run is the reference for a CUDA run in bf16. Accumulating backward
 * operations read their bf16 gradient, add in fp32 and store rounded, as on the GPU. */

#define P(k) (t->p[k])
#define I(k) ((int)t->i[k])
#define F(k) ((float)t->f[k])

/* Names p[index] an activation argument of rows x width elements, stride apart. */
static void act(cpu_task *t, int index, int written, size_t rows, size_t width, size_t stride) {
  cpu_act_arg *a = &t->acts[t->nacts++];
  a->index = index;
  a->written = written;
  a->bf16_always = 0;
  a->rows = rows;
  a->width = width;
  a->stride = stride;
}

/* A contiguous activation argument of n elements. */
static void act_n(cpu_task *t, int index, int written, size_t n) {
  act(t, index, written, 1, n, n);
}

/* A bf16 weight of n elements (read only), staged whatever the activation type. */
static void bf16_weight_arg(cpu_task *t, int index, size_t n) {
  act_n(t, index, 0, n);
  t->acts[t->nacts - 1].bf16_always = 1;
}

static size_t act_span(const cpu_act_arg *a) {
  return a->rows ? (a->rows - 1) * a->stride + a->width : 0;
}

/* Runs t->staged_run on fp32 copies of the task's bf16 activation arguments. Arguments
 * that alias (the same buffer twice) share one copy, as they would share memory. */
static int run_staged(cpu_task *t, char *err, size_t errlen) {
  void *orig[CPU_TASK_MAX_ACTS] = {0};
  float *tmp[CPU_TASK_MAX_ACTS] = {0};
  int owner[CPU_TASK_MAX_ACTS];
  int rc = 0;
  for (int k = 0; k < t->nacts; k++) {
    const cpu_act_arg *a = &t->acts[k];
    orig[k] = t->p[a->index];
    owner[k] = k;
    if (!orig[k]) continue;
    for (int j = 0; j < k; j++)
      if (orig[j] == orig[k] && tmp[j]) {
        owner[k] = j;
        break;
      }
    if (owner[k] != k && act_span(a) > act_span(&t->acts[owner[k]])) {
      snprintf(err, errlen, "%s: aliased activation arguments of different extents", t->name);
      rc = -1;
      goto out;
    }
    if (owner[k] != k) {
      t->p[a->index] = tmp[owner[k]];
      continue;
    }
    tmp[k] = malloc(act_span(a) * sizeof(float) + 1);
    if (!tmp[k]) {
      snprintf(err, errlen, "%s: out of memory staging bf16 activations", t->name);
      rc = -1;
      goto out;
    }
    for (size_t r = 0; r < a->rows; r++)
      bf16_widen(tmp[k] + r * a->stride, (const uint16_t *)orig[k] + r * a->stride, a->width);
    t->p[a->index] = tmp[k];
  }
  rc = t->staged_run(t, err, errlen);
  if (rc == 0)
    for (int k = 0; k < t->nacts; k++) {
      const cpu_act_arg *a = &t->acts[k];
      if (!orig[k] || !a->written) continue;
      for (size_t r = 0; r < a->rows; r++)
        bf16_round((uint16_t *)orig[k] + r * a->stride, tmp[owner[k]] + r * a->stride, a->width);
    }
out:
  for (int k = 0; k < t->nacts; k++) {
    free(tmp[k]);
    if (orig[k]) t->p[t->acts[k].index] = orig[k];
  }
  return rc;
}

/* ---- inputs for the trace -----------------------------------------------------------
 * A compute task's `inputs` callback describes its tensors from the shapes the task holds,
 * with the writers both backends share (op_inputs.h: PyTorch's record_shapes form), so that
 * `stepscope ops` costs the trainer's operations (docs/ops.md "The trainer's ops"). */

/* Two activations of i[0] elements: gelu_backward's dout and x, residual_forward's a and b. */
static void inputs_two_vectors(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_two_vectors(buf, cap, act, I(0));
}

static void enqueue_compute(dev_stream *s, cpu_task *t, const char *name, double flops,
                            double bytes) {
  t->name = name;
  t->category = STEPSCOPE_CAT_COMPUTE;
  t->flops = (uint64_t)flops;
  t->bytes = (uint64_t)bytes;
  if (cpu_stream_activation_dtype(s) != DEV_BF16) { /* stage only the bf16 weights */
    int kept = 0;
    for (int k = 0; k < t->nacts; k++)
      if (t->acts[k].bf16_always) t->acts[kept++] = t->acts[k];
    t->nacts = kept;
  }
  if (t->nacts > 0) {
    t->staged_run = t->run;
    t->run = run_staged;
  }
  cpu_stream_enqueue(s, t);
}

static int run_encoder_forward(cpu_task *t, char *e, size_t n) {
  cpu_encoder_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_encoder_forward(dev_stream *s, dev_act *out, const int *tokens, const float *wte,
                                   const float *wpe, int B, int T, int C) {
  cpu_task t = {.run = run_encoder_forward,
                .p = {out, (void *)tokens, (void *)wte, (void *)wpe},
                .i = {B, T, C}};
  act_n(&t, 0, 1, (size_t)B * T * C);
  enqueue_compute(s, &t, "encoder_forward", (double)B * T * C, 12.0 * B * T * C);
}

static int run_encoder_backward(cpu_task *t, char *e, size_t n) {
  cpu_encoder_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_encoder_backward(dev_stream *s, float *dwte, float *dwpe, const dev_act *dout,
                                    const int *tokens, int B, int T, int C) {
  cpu_task t = {
      .run = run_encoder_backward, .p = {dwte, dwpe, (void *)dout, (void *)tokens}, .i = {B, T, C}};
  act_n(&t, 2, 0, (size_t)B * T * C);
  enqueue_compute(s, &t, "encoder_backward", 2.0 * B * T * C, 20.0 * B * T * C);
}

static int run_layernorm_forward(cpu_task *t, char *e, size_t n) {
  cpu_layernorm_forward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1));
  return 0;
}
static void inputs_layernorm_forward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_layernorm_forward(buf, cap, act, I(0), I(1));
}
static void cpu_op_layernorm_forward(dev_stream *s, dev_act *out, float *mean, float *rstd,
                                     const dev_act *inp, const float *weight, const float *bias,
                                     int N, int C) {
  cpu_task t = {.run = run_layernorm_forward,
                .p = {out, mean, rstd, (void *)inp, (void *)weight, (void *)bias},
                .i = {N, C}};
  act_n(&t, 0, 1, (size_t)N * C);
  act_n(&t, 3, 0, (size_t)N * C);
  t.inputs = inputs_layernorm_forward;
  enqueue_compute(s, &t, "layernorm_forward", 8.0 * N * C, 8.0 * N * C);
}

static int run_layernorm_backward(cpu_task *t, char *e, size_t n) {
  cpu_layernorm_backward(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), I(0), I(1));
  return 0;
}
static void inputs_layernorm_backward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_layernorm_backward(buf, cap, act, I(0), I(1));
}
static void cpu_op_layernorm_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                      const dev_act *dout, const dev_act *inp, const float *weight,
                                      const float *mean, const float *rstd, int N, int C) {
  cpu_task t = {.run = run_layernorm_backward,
                .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight, (void *)mean,
                      (void *)rstd},
                .i = {N, C}};
  act_n(&t, 0, 1, (size_t)N * C);
  act_n(&t, 3, 0, (size_t)N * C);
  act_n(&t, 4, 0, (size_t)N * C);
  t.inputs = inputs_layernorm_backward;
  enqueue_compute(s, &t, "layernorm_backward", 14.0 * N * C, 16.0 * N * C);
}

static int run_matmul_forward(cpu_task *t, char *e, size_t n) {
  cpu_matmul_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void inputs_matmul_forward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_matmul_forward(buf, cap, act, I(0), I(1), I(2), P(3) != NULL, I(3));
}
/* matmul_forward on an fp32 weight, or (bf16_weight) a bf16 one staged like an activation */
static void enqueue_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                   const void *weight, int bf16_weight, const float *bias, int N,
                                   int C, int OC) {
  cpu_task t = {.run = run_matmul_forward,
                .p = {out, (void *)inp, (void *)weight, (void *)bias},
                .i = {N, C, OC, bf16_weight}};
  act_n(&t, 0, 1, (size_t)N * OC);
  act_n(&t, 1, 0, (size_t)N * C);
  if (bf16_weight) bf16_weight_arg(&t, 2, (size_t)OC * C);
  t.inputs = inputs_matmul_forward;
  enqueue_compute(s, &t, "matmul_forward", 2.0 * N * C * OC,
                  4.0 * ((double)N * C + (double)N * OC) +
                      (bf16_weight ? 2.0 : 4.0) * ((double)OC * C));
}
static void cpu_op_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                  const float *weight, const float *bias, int N, int C, int OC) {
  enqueue_matmul_forward(s, out, inp, weight, 0, bias, N, C, OC);
}
static void cpu_op_matmul_forward_bf16w(dev_stream *s, dev_act *out, const dev_act *inp,
                                        const dev_bf16 *weight, const float *bias, int N, int C,
                                        int OC) {
  enqueue_matmul_forward(s, out, inp, weight, 1, bias, N, C, OC);
}

static int run_matmul_backward(cpu_task *t, char *e, size_t n) {
  cpu_matmul_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2));
  return 0;
}
static void inputs_matmul_backward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_matmul_backward(buf, cap, act, I(0), I(1), I(2), P(0) != NULL, P(1) != NULL,
                            P(2) != NULL, I(3));
}
static void enqueue_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                    const dev_act *dout, const dev_act *inp, const void *weight,
                                    int bf16_weight, int N, int C, int OC) {
  cpu_task t = {.run = run_matmul_backward,
                .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight},
                .i = {N, C, OC, bf16_weight}};
  act_n(&t, 0, 1, (size_t)N * C);
  act_n(&t, 3, 0, (size_t)N * OC);
  act_n(&t, 4, 0, (size_t)N * C);
  if (bf16_weight) bf16_weight_arg(&t, 5, (size_t)OC * C);
  double flops = (dinp ? 2.0 * N * C * OC : 0) + (dweight ? 2.0 * N * C * OC : 0);
  t.inputs = inputs_matmul_backward;
  enqueue_compute(s, &t, "matmul_backward", flops,
                  8.0 * ((double)N * C + (double)N * OC) +
                      (bf16_weight ? 6.0 : 8.0) * ((double)OC * C));
}
static void cpu_op_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                   const dev_act *dout, const dev_act *inp, const float *weight,
                                   int N, int C, int OC) {
  enqueue_matmul_backward(s, dinp, dweight, dbias, dout, inp, weight, 0, N, C, OC);
}
static void cpu_op_matmul_backward_bf16w(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                         const dev_act *dout, const dev_act *inp,
                                         const dev_bf16 *weight, int N, int C, int OC) {
  enqueue_matmul_backward(s, dinp, dweight, dbias, dout, inp, weight, 1, N, C, OC);
}

static int run_cast_bf16(cpu_task *t, char *e, size_t n) {
  bf16_round(P(0), P(1), (size_t)t->i[0]);
  return 0;
}
static void cpu_op_cast_bf16(dev_stream *s, dev_bf16 *dst, const float *src, size_t n) {
  cpu_task t = {.run = run_cast_bf16, .p = {dst, (void *)src}, .i = {(int64_t)n}};
  enqueue_compute(s, &t, "cast_bf16", (double)n, 6.0 * n);
}

static int run_attention_forward(cpu_task *t, char *e, size_t n) {
  cpu_attention_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3));
  return 0;
}
static void inputs_attention_forward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_attention_forward(buf, cap, act, I(0), I(1), I(2), I(3));
}
static void cpu_op_attention_forward(dev_stream *s, dev_act *out, float *preatt, float *att,
                                     const dev_act *qkv, int B, int T, int C, int NH) {
  cpu_task t = {
      .run = run_attention_forward, .p = {out, preatt, att, (void *)qkv}, .i = {B, T, C, NH}};
  act_n(&t, 0, 1, (size_t)B * T * C);
  act_n(&t, 3, 0, (size_t)B * T * 3 * C);
  /* causal: about half of the T x T scores; QK^T and AV are 2*T*T*C each when full */
  t.inputs = inputs_attention_forward;
  enqueue_compute(s, &t, "attention_forward", 2.0 * B * (double)T * T * C,
                  4.0 * (4.0 * B * T * C + 2.0 * B * NH * (double)T * T));
}

static int run_attention_backward(cpu_task *t, char *e, size_t n) {
  cpu_attention_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2), I(3));
  return 0;
}
static void inputs_attention_backward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_attention_backward(buf, cap, act, I(0), I(1), I(2), I(3));
}
static void cpu_op_attention_backward(dev_stream *s, dev_act *dqkv, float *dpreatt, float *datt,
                                      const dev_act *dout, const dev_act *qkv, const float *att,
                                      int B, int T, int C, int NH) {
  cpu_task t = {.run = run_attention_backward,
                .p = {dqkv, dpreatt, datt, (void *)dout, (void *)qkv, (void *)att},
                .i = {B, T, C, NH}};
  act_n(&t, 0, 1, (size_t)B * T * 3 * C);
  act_n(&t, 3, 0, (size_t)B * T * C);
  act_n(&t, 4, 0, (size_t)B * T * 3 * C);
  t.inputs = inputs_attention_backward;
  enqueue_compute(s, &t, "attention_backward", 4.0 * B * (double)T * T * C,
                  4.0 * (8.0 * B * T * C + 4.0 * B * NH * (double)T * T));
}

/* The block kernels need Tk floats of scratch (one row of scores). */
static int run_attention_block_forward(cpu_task *t, char *e, size_t n) {
  float *scratch = malloc(sizeof(float) * (size_t)(t->i[4] > 0 ? t->i[4] : 1));
  if (!scratch) {
    snprintf(e, n, "attention_block_forward: out of memory");
    return -1;
  }
  cpu_attention_block_forward(P(0), P(1), P(2), I(0), P(3), I(1), I(2), I(3), I(4), I(5), I(6),
                              I(7), scratch);
  free(scratch);
  return 0;
}
static void inputs_attention_block_forward(const cpu_task *t, const char *act, char *buf,
                                           size_t cap) {
  op_inputs_attention_block(buf, cap, act, 0, I(2), I(3), I(4), I(5), I(6), I(7));
}
static void cpu_op_attention_block_forward(dev_stream *s, dev_act *out, float *lse,
                                           const dev_act *q, int q_stride, const dev_act *kv,
                                           int kv_stride, int B, int Tq, int Tk, int C, int NH,
                                           int causal) {
  cpu_task t = {.run = run_attention_block_forward,
                .p = {out, lse, (void *)q, (void *)kv},
                .i = {q_stride, kv_stride, B, Tq, Tk, C, NH, causal}};
  act_n(&t, 0, 1, (size_t)B * Tq * C);
  act(&t, 2, 0, (size_t)B * Tq, (size_t)C, (size_t)q_stride);
  act(&t, 3, 0, (size_t)B * Tk, 2 * (size_t)C, (size_t)kv_stride);
  /* scores and the weighted sum: 2*Tq*Tk*C each, half of it on a causal block */
  double pairs = causal ? 0.5 * Tq * (Tk + 1.0) : (double)Tq * Tk;
  t.inputs = inputs_attention_block_forward;
  enqueue_compute(s, &t, "attention_block_forward", 4.0 * B * pairs * C,
                  4.0 * B * (3.0 * Tq * C + 2.0 * Tk * C + 2.0 * NH * Tq));
}

static int run_attention_block_backward(cpu_task *t, char *e, size_t n) {
  float *scratch = malloc(sizeof(float) * (size_t)(t->i[7] > 0 ? t->i[7] : 1));
  if (!scratch) {
    snprintf(e, n, "attention_block_backward: out of memory");
    return -1;
  }
  cpu_attention_block_backward(P(0), I(0), P(1), I(1), P(2), P(3), P(4), P(5), I(2), P(6), I(3),
                               I(4), I(5), I(6), I(7), I(8), I(9), scratch);
  free(scratch);
  return 0;
}
static void inputs_attention_block_backward(const cpu_task *t, const char *act, char *buf,
                                            size_t cap) {
  op_inputs_attention_block(buf, cap, act, 1, I(4), I(5), I(6), I(7), I(8), I(9));
}
static void cpu_op_attention_block_backward(dev_stream *s, dev_act *dq, int dq_stride, dev_act *dkv,
                                            int dkv_stride, const dev_act *dout, const dev_act *out,
                                            const float *lse, const dev_act *q, int q_stride,
                                            const dev_act *kv, int kv_stride, int B, int Tq, int Tk,
                                            int C, int NH, int causal) {
  cpu_task t = {.run = run_attention_block_backward,
                .p = {dq, dkv, (void *)dout, (void *)out, (void *)lse, (void *)q, (void *)kv},
                .i = {dq_stride, dkv_stride, q_stride, kv_stride, B, Tq, Tk, C, NH, causal}};
  act(&t, 0, 1, (size_t)B * Tq, (size_t)C, (size_t)dq_stride);
  act(&t, 1, 1, (size_t)B * Tk, 2 * (size_t)C, (size_t)dkv_stride);
  act_n(&t, 2, 0, (size_t)B * Tq * C);
  act_n(&t, 3, 0, (size_t)B * Tq * C);
  act(&t, 5, 0, (size_t)B * Tq, (size_t)C, (size_t)q_stride);
  act(&t, 6, 0, (size_t)B * Tk, 2 * (size_t)C, (size_t)kv_stride);
  /* recomputed scores, dv, dp, dq and dk: 2*Tq*Tk*C each */
  double pairs = causal ? 0.5 * Tq * (Tk + 1.0) : (double)Tq * Tk;
  t.inputs = inputs_attention_block_backward;
  enqueue_compute(s, &t, "attention_block_backward", 10.0 * B * pairs * C,
                  4.0 * B * (6.0 * Tq * C + 4.0 * Tk * C + NH * Tq));
}

/* ---- mixture of experts (kernels/cpu/moe_*.c) --------------------------------------------
 * The routing-dependent row count R is offsets[E], read when the task runs; activation
 * arguments in the expert-grouped layout are staged for their bound Rmax = N x K rows. */

static int run_moe_router_forward(cpu_task *t, char *e, size_t n) {
  cpu_moe_router_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3));
  return 0;
}
static void cpu_op_moe_router_forward(dev_stream *s, int *expert, float *gate, float *probs,
                                      const dev_act *logits, int N, int E, int K, int renorm) {
  cpu_task t = {.run = run_moe_router_forward,
                .p = {expert, gate, probs, (void *)logits},
                .i = {N, E, K, renorm}};
  act_n(&t, 3, 0, (size_t)N * E);
  enqueue_compute(s, &t, "moe_router_forward", 5.0 * N * E + (double)N * E * K,
                  8.0 * N * E + 8.0 * N * K);
}

static int run_moe_router_backward(cpu_task *t, char *e, size_t n) {
  cpu_moe_router_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2), I(3), F(0), P(4));
  return 0;
}
static void cpu_op_moe_router_backward(dev_stream *s, dev_act *dlogits, const float *dgate,
                                       const float *probs, const int *expert, int *counts, int N,
                                       int E, int K, int renorm, float aux_scale) {
  cpu_task t = {.run = run_moe_router_backward,
                .p = {dlogits, (void *)dgate, (void *)probs, (void *)expert, counts},
                .i = {N, E, K, renorm},
                .f = {aux_scale}};
  act_n(&t, 0, 1, (size_t)N * E);
  enqueue_compute(s, &t, "moe_router_backward", 6.0 * N * E + 4.0 * N * E * K,
                  12.0 * N * E + 8.0 * N * K);
}

static int run_moe_aux_loss(cpu_task *t, char *e, size_t n) {
  *(double *)P(0) += cpu_moe_aux_loss(P(1), P(2), I(0), I(1), I(2), P(3));
  return 0;
}
static void cpu_op_moe_aux_loss_accumulate(dev_stream *s, double *acc, const float *probs,
                                           const int *expert, int *counts, int N, int E, int K) {
  cpu_task t = {
      .run = run_moe_aux_loss, .p = {acc, (void *)probs, (void *)expert, counts}, .i = {N, E, K}};
  enqueue_compute(s, &t, "moe_aux_loss", 2.0 * N * E, 4.0 * N * E + 4.0 * N * K);
}

static int run_moe_dispatch_plan(cpu_task *t, char *e, size_t n) {
  int dropped = cpu_moe_dispatch_plan(P(0), P(1), P(2), P(3), P(5), I(0), I(1), I(2), I(3));
  if (P(4)) *(int *)P(4) += dropped;
  return 0;
}
static void cpu_op_moe_dispatch_plan(dev_stream *s, int *counts, int *offsets, int *row_token,
                                     int *row_of, int *dropped_acc, const int *expert, int N, int E,
                                     int K, int capacity) {
  cpu_task t = {.run = run_moe_dispatch_plan,
                .p = {counts, offsets, row_token, row_of, dropped_acc, (void *)expert},
                .i = {N, E, K, capacity}};
  enqueue_compute(s, &t, "moe_dispatch_plan", 0, 16.0 * N * K);
}

static int run_moe_permute_forward(cpu_task *t, char *e, size_t n) {
  const int *offsets = P(3);
  cpu_moe_permute_forward(P(0), P(1), P(2), offsets[I(0)], I(1));
  return 0;
}
static void cpu_op_moe_permute_forward(dev_stream *s, dev_act *xp, const dev_act *x,
                                       const int *row_token, const int *offsets, int N, int E,
                                       int K, int C) {
  cpu_task t = {.run = run_moe_permute_forward,
                .p = {xp, (void *)x, (void *)row_token, (void *)offsets},
                .i = {E, C}};
  act_n(&t, 0, 1, (size_t)N * K * C);
  act_n(&t, 1, 0, (size_t)N * C);
  enqueue_compute(s, &t, "moe_permute_forward", 0, 8.0 * N * K * C);
}

static int run_moe_permute_backward(cpu_task *t, char *e, size_t n) {
  const int *offsets = P(3);
  cpu_moe_permute_backward(P(0), P(1), P(2), offsets[I(0)], I(1));
  return 0;
}
static void cpu_op_moe_permute_backward(dev_stream *s, dev_act *dx, const dev_act *dxp,
                                        const int *row_token, const int *offsets, int N, int E,
                                        int K, int C) {
  cpu_task t = {.run = run_moe_permute_backward,
                .p = {dx, (void *)dxp, (void *)row_token, (void *)offsets},
                .i = {E, C}};
  act_n(&t, 0, 1, (size_t)N * C);
  act_n(&t, 1, 0, (size_t)N * K * C);
  enqueue_compute(s, &t, "moe_permute_backward", (double)N * K * C, 12.0 * N * K * C);
}

static int run_moe_unpermute_forward(cpu_task *t, char *e, size_t n) {
  cpu_moe_unpermute_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_moe_unpermute_forward(dev_stream *s, dev_act *out, const dev_act *yp,
                                         const float *gate, const int *row_of, int N, int K,
                                         int C) {
  cpu_task t = {.run = run_moe_unpermute_forward,
                .p = {out, (void *)yp, (void *)gate, (void *)row_of},
                .i = {N, K, C}};
  act_n(&t, 0, 1, (size_t)N * C);
  act_n(&t, 1, 0, (size_t)N * K * C);
  enqueue_compute(s, &t, "moe_unpermute_forward", 2.0 * N * K * C, 4.0 * N * C + 4.0 * N * K * C);
}

static int run_moe_unpermute_backward(cpu_task *t, char *e, size_t n) {
  cpu_moe_unpermute_backward(P(0), P(1), P(2), P(3), P(4), P(5), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_moe_unpermute_backward(dev_stream *s, dev_act *dyp, float *dgate,
                                          const dev_act *dout, const dev_act *yp, const float *gate,
                                          const int *row_of, int N, int K, int C) {
  cpu_task t = {.run = run_moe_unpermute_backward,
                .p = {dyp, dgate, (void *)dout, (void *)yp, (void *)gate, (void *)row_of},
                .i = {N, K, C}};
  act_n(&t, 0, 1, (size_t)N * K * C);
  act_n(&t, 2, 0, (size_t)N * C);
  act_n(&t, 3, 0, (size_t)N * K * C);
  enqueue_compute(s, &t, "moe_unpermute_backward", 4.0 * N * K * C, 4.0 * N * C + 12.0 * N * K * C);
}

static int run_moe_expert_matmul_forward(cpu_task *t, char *e, size_t n) {
  cpu_moe_expert_matmul_forward(P(0), P(1), P(2), P(3), P(4), I(0), I(1), I(2));
  return 0;
}
static void inputs_moe_expert_matmul_forward(const cpu_task *t, const char *act, char *buf,
                                             size_t cap) {
  /* R = offsets[E], the rows routed, read once the task has run */
  const int *offsets = P(4);
  op_inputs_expert_matmul_forward(buf, cap, act, offsets[I(0)], I(0), I(1), I(2), P(3) != NULL);
}
static void cpu_op_moe_expert_matmul_forward(dev_stream *s, dev_act *out, const dev_act *inp,
                                             const float *weight, const float *bias,
                                             const int *offsets, int Rmax, int E, int C, int OC) {
  cpu_task t = {.run = run_moe_expert_matmul_forward,
                .p = {out, (void *)inp, (void *)weight, (void *)bias, (void *)offsets},
                .i = {E, C, OC}};
  act_n(&t, 0, 1, (size_t)Rmax * OC);
  act_n(&t, 1, 0, (size_t)Rmax * C);
  /* the bound: the rows actually multiplied are offsets[E] <= Rmax */
  t.inputs = inputs_moe_expert_matmul_forward;
  enqueue_compute(s, &t, "moe_expert_matmul_forward", 2.0 * Rmax * C * OC,
                  4.0 * ((double)Rmax * (C + OC) + (double)E * OC * C));
}

static int run_moe_expert_matmul_backward(cpu_task *t, char *e, size_t n) {
  cpu_moe_expert_matmul_backward(P(0), P(1), P(2), P(3), P(4), P(5), P(6), I(0), I(1), I(2));
  return 0;
}
static void inputs_moe_expert_matmul_backward(const cpu_task *t, const char *act, char *buf,
                                              size_t cap) {
  const int *offsets = P(6);
  op_inputs_expert_matmul_backward(buf, cap, act, offsets[I(0)], I(0), I(1), I(2), P(0) != NULL,
                                   P(1) != NULL, P(2) != NULL);
}
static void cpu_op_moe_expert_matmul_backward(dev_stream *s, dev_act *dinp, float *dweight,
                                              float *dbias, const dev_act *dout, const dev_act *inp,
                                              const float *weight, const int *offsets, int Rmax,
                                              int E, int C, int OC) {
  cpu_task t = {
      .run = run_moe_expert_matmul_backward,
      .p = {dinp, dweight, dbias, (void *)dout, (void *)inp, (void *)weight, (void *)offsets},
      .i = {E, C, OC}};
  act_n(&t, 0, 1, (size_t)Rmax * C);
  act_n(&t, 3, 0, (size_t)Rmax * OC);
  act_n(&t, 4, 0, (size_t)Rmax * C);
  t.inputs = inputs_moe_expert_matmul_backward;
  enqueue_compute(s, &t, "moe_expert_matmul_backward", 4.0 * Rmax * C * OC,
                  8.0 * ((double)Rmax * (C + OC) + (double)E * OC * C));
}

static int run_gelu_forward(cpu_task *t, char *e, size_t n) {
  cpu_gelu_forward(P(0), P(1), I(0));
  return 0;
}
static void inputs_gelu_forward(const cpu_task *t, const char *act, char *buf, size_t cap) {
  op_inputs_gelu_forward(buf, cap, act, I(0));
}
static void cpu_op_gelu_forward(dev_stream *s, dev_act *out, const dev_act *inp, int N) {
  cpu_task t = {.run = run_gelu_forward, .p = {out, (void *)inp}, .i = {N}};
  act_n(&t, 0, 1, (size_t)N);
  act_n(&t, 1, 0, (size_t)N);
  t.inputs = inputs_gelu_forward;
  enqueue_compute(s, &t, "gelu_forward", 10.0 * N, 8.0 * N);
}

static int run_gelu_backward(cpu_task *t, char *e, size_t n) {
  cpu_gelu_backward(P(0), P(1), P(2), I(0));
  return 0;
}
static void cpu_op_gelu_backward(dev_stream *s, dev_act *dinp, const dev_act *inp,
                                 const dev_act *dout, int N) {
  cpu_task t = {.run = run_gelu_backward, .p = {dinp, (void *)inp, (void *)dout}, .i = {N}};
  act_n(&t, 0, 1, (size_t)N);
  act_n(&t, 1, 0, (size_t)N);
  act_n(&t, 2, 0, (size_t)N);
  t.inputs = inputs_two_vectors;
  enqueue_compute(s, &t, "gelu_backward", 20.0 * N, 16.0 * N);
}

static int run_residual_forward(cpu_task *t, char *e, size_t n) {
  cpu_residual_forward(P(0), P(1), P(2), I(0));
  return 0;
}
static void cpu_op_residual_forward(dev_stream *s, dev_act *out, const dev_act *a, const dev_act *b,
                                    int N) {
  cpu_task t = {.run = run_residual_forward, .p = {out, (void *)a, (void *)b}, .i = {N}};
  act_n(&t, 0, 1, (size_t)N);
  act_n(&t, 1, 0, (size_t)N);
  act_n(&t, 2, 0, (size_t)N);
  t.inputs = inputs_two_vectors;
  enqueue_compute(s, &t, "residual_forward", 1.0 * N, 12.0 * N);
}

static int run_residual_backward(cpu_task *t, char *e, size_t n) {
  cpu_residual_backward(P(0), P(1), P(2), I(0));
  return 0;
}
static void cpu_op_residual_backward(dev_stream *s, dev_act *da, dev_act *db, const dev_act *dout,
                                     int N) {
  cpu_task t = {.run = run_residual_backward, .p = {da, db, (void *)dout}, .i = {N}};
  act_n(&t, 0, 1, (size_t)N);
  act_n(&t, 1, 1, (size_t)N);
  act_n(&t, 2, 0, (size_t)N);
  enqueue_compute(s, &t, "residual_backward", 2.0 * N, 20.0 * N);
}

static int run_crossentropy_forward(cpu_task *t, char *e, size_t n) {
  cpu_softmax_crossentropy_forward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_crossentropy_forward(dev_stream *s, float *losses, dev_act *probs,
                                        const dev_act *logits, const int *targets, int N, int V,
                                        int Vp) {
  cpu_task t = {.run = run_crossentropy_forward,
                .p = {losses, probs, (void *)logits, (void *)targets},
                .i = {N, V, Vp}};
  act_n(&t, 1, 1, (size_t)N * Vp);
  act_n(&t, 2, 0, (size_t)N * Vp);
  enqueue_compute(s, &t, "crossentropy_forward", 5.0 * N * (double)V, 8.0 * N * (double)Vp);
}

static int run_crossentropy_backward(cpu_task *t, char *e, size_t n) {
  cpu_softmax_crossentropy_backward(P(0), P(1), P(2), P(3), I(0), I(1), I(2));
  return 0;
}
static void cpu_op_crossentropy_backward(dev_stream *s, dev_act *dlogits, const float *dlosses,
                                         const dev_act *probs, const int *targets, int N, int V,
                                         int Vp) {
  cpu_task t = {.run = run_crossentropy_backward,
                .p = {dlogits, (void *)dlosses, (void *)probs, (void *)targets},
                .i = {N, V, Vp}};
  act_n(&t, 0, 1, (size_t)N * Vp);
  act_n(&t, 2, 0, (size_t)N * Vp);
  enqueue_compute(s, &t, "crossentropy_backward", 3.0 * N * (double)V, 12.0 * N * (double)Vp);
}

static int run_fill(cpu_task *t, char *e, size_t n) {
  float *x = P(0);
  float v = F(0);
  for (size_t k = 0; k < (size_t)t->i[0]; k++)
    x[k] = v;
  return 0;
}
static void cpu_op_fill(dev_stream *s, float *x, float value, size_t n) {
  cpu_task t = {.run = run_fill, .p = {x}, .i = {(int64_t)n}, .f = {value}};
  t.name = "fill";
  t.category = STEPSCOPE_CAT_MEMSET;
  t.bytes = 4 * n;
  cpu_stream_enqueue(s, &t);
}

static int run_sum_accumulate(cpu_task *t, char *e, size_t n) {
  const float *x = P(1);
  double acc = 0;
  for (size_t k = 0; k < (size_t)t->i[0]; k++)
    acc += x[k];
  *(double *)P(0) += acc;
  return 0;
}
static void cpu_op_sum_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  cpu_task t = {.run = run_sum_accumulate, .p = {acc, (void *)x}, .i = {(int64_t)n}};
  enqueue_compute(s, &t, "sum", (double)n, 4.0 * n);
}

static int run_sum_squares_accumulate(cpu_task *t, char *e, size_t n) {
  *(double *)P(0) += cpu_sum_squares(P(1), (size_t)t->i[0]);
  return 0;
}
static void cpu_op_sum_squares_accumulate(dev_stream *s, double *acc, const float *x, size_t n) {
  cpu_task t = {.run = run_sum_squares_accumulate, .p = {acc, (void *)x}, .i = {(int64_t)n}};
  enqueue_compute(s, &t, "sum_squares", 2.0 * n, 4.0 * n);
}

static int run_scale(cpu_task *t, char *e, size_t n) {
  cpu_scale(P(0), F(0), (size_t)t->i[0]);
  return 0;
}
static void cpu_op_scale(dev_stream *s, float *x, float factor, size_t n) {
  cpu_task t = {.run = run_scale, .p = {x}, .i = {(int64_t)n}, .f = {factor}};
  enqueue_compute(s, &t, "scale", (double)n, 8.0 * n);
}

static int run_add(cpu_task *t, char *e, size_t n) {
  float *dst = P(0);
  const float *src = P(1);
  for (size_t k = 0; k < (size_t)t->i[0]; k++)
    dst[k] += src[k];
  return 0;
}
static void cpu_op_add(dev_stream *s, float *dst, const float *src, size_t n) {
  cpu_task t = {.run = run_add, .p = {dst, (void *)src}, .i = {(int64_t)n}};
  enqueue_compute(s, &t, "add", (double)n, 12.0 * n);
}

static int run_adamw(cpu_task *t, char *e, size_t n) {
  cpu_adamw_update(P(0), P(1), P(2), P(3), (size_t)t->i[0], F(0), F(1), F(2), F(3), F(4),
                   (int)t->i[1]);
  return 0;
}
static void cpu_op_adamw(dev_stream *s, float *params, const float *grads, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, int step) {
  cpu_task t = {.run = run_adamw,
                .p = {params, (void *)grads, m, v},
                .i = {(int64_t)n, step},
                .f = {lr, beta1, beta2, eps, weight_decay}};
  enqueue_compute(s, &t, "adamw", 12.0 * n, 28.0 * n);
}

/* ---- the table -------------------------------------------------------------------- */

void dev_cpu_fill_model_ops(dev_ops *o) {
  o->encoder_forward = cpu_op_encoder_forward;
  o->encoder_backward = cpu_op_encoder_backward;
  o->layernorm_forward = cpu_op_layernorm_forward;
  o->layernorm_backward = cpu_op_layernorm_backward;
  o->matmul_forward = cpu_op_matmul_forward;
  o->matmul_backward = cpu_op_matmul_backward;
  o->matmul_forward_bf16w = cpu_op_matmul_forward_bf16w;
  o->matmul_backward_bf16w = cpu_op_matmul_backward_bf16w;
  o->cast_bf16 = cpu_op_cast_bf16;
  o->attention_forward = cpu_op_attention_forward;
  o->attention_backward = cpu_op_attention_backward;
  o->attention_block_forward = cpu_op_attention_block_forward;
  o->attention_block_backward = cpu_op_attention_block_backward;
  o->moe_router_forward = cpu_op_moe_router_forward;
  o->moe_router_backward = cpu_op_moe_router_backward;
  o->moe_aux_loss_accumulate = cpu_op_moe_aux_loss_accumulate;
  o->moe_dispatch_plan = cpu_op_moe_dispatch_plan;
  o->moe_permute_forward = cpu_op_moe_permute_forward;
  o->moe_permute_backward = cpu_op_moe_permute_backward;
  o->moe_unpermute_forward = cpu_op_moe_unpermute_forward;
  o->moe_unpermute_backward = cpu_op_moe_unpermute_backward;
  o->moe_expert_matmul_forward = cpu_op_moe_expert_matmul_forward;
  o->moe_expert_matmul_backward = cpu_op_moe_expert_matmul_backward;
  o->gelu_forward = cpu_op_gelu_forward;
  o->gelu_backward = cpu_op_gelu_backward;
  o->residual_forward = cpu_op_residual_forward;
  o->residual_backward = cpu_op_residual_backward;
  o->crossentropy_forward = cpu_op_crossentropy_forward;
  o->crossentropy_backward = cpu_op_crossentropy_backward;
  o->fill = cpu_op_fill;
  o->sum_accumulate = cpu_op_sum_accumulate;
  o->sum_squares_accumulate = cpu_op_sum_squares_accumulate;
  o->scale = cpu_op_scale;
  o->add = cpu_op_add;
  o->adamw = cpu_op_adamw;
}
