/*
 * trainer_op_models.c — FLOPs and bytes of the stepscope trainer's own operations (both its
 * backends write each compute operation's inputs in the form of PyTorch's record_shapes,
 * trainer/op_inputs.c), so that `stepscope ops` costs a trainer run with the op models of a
 * PyTorch trace (op_models.c). Each operation is the PyTorch op that does the same math
 * (matmul_forward is aten::linear, layernorm_forward aten::native_layer_norm...), or, where
 * none does (a linear layer's backward, the trainer's attention on packed qkv, the experts'
 * grouped GEMM), a model built from the same formulas. docs/ops.md "The trainer's ops" states
 * each one.
 */
#include <stdio.h>
#include <string.h>

#include "ssa_ops.h"

/* Input i when it is a tensor of `ndims` dims, else NULL. */
static const ssa_op_input *tensor_of(const ssa_op_inputs *in, int i, int ndims) {
  if (i < 0 || i >= in->n) return NULL;
  const ssa_op_input *t = &in->in[i];
  return ssa_op_is_tensor(t) && ssa_op_type_bytes(t->type) && t->ndims == ndims ? t : NULL;
}

static double bytes_of(const ssa_op_input *t) {
  return t ? (double)ssa_op_numel(t) * ssa_op_type_bytes(t->type) : 0.0;
}

/* The trainer's activations are fp32 ("float") or bf16. */
static ssa_peak_dtype peak_dtype(const ssa_op_input *t) {
  return !strcmp(t->type, "c10::BFloat16") ? SSA_PEAK_BF16 : SSA_PEAK_FP32;
}

/* An integer scalar argument (its concrete value), or -1. */
static long long scalar_int(const ssa_op_inputs *in, int i) {
  long long v;
  char end;
  if (i < 0 || i >= in->n || sscanf(in->in[i].concrete, "%lld%c", &v, &end) != 1) return -1;
  return v;
}

/* A tensor input of dims d[0..n) and element type `type`, for a PyTorch op's inputs. */
static ssa_op_input make_tensor(const char *type, int n, const int64_t *d) {
  ssa_op_input x;
  memset(&x, 0, sizeof x);
  x.ndims = n;
  for (int k = 0; k < n; k++)
    x.dims[k] = d[k];
  snprintf(x.type, sizeof x.type, "%s", type);
  return x;
}

/* Attention of B x heads query rows Tq against Tk keys (head size C / heads, the same for
 * values), causal or not, as aten::_scaled_dot_product_flash_attention costs it; `q` gives the
 * element type. 1, or 0 when the shapes do not fit. */
static int attention_cost(const ssa_op_input *q, int64_t B, int64_t Tq, int64_t Tk, int64_t C,
                          long long heads, int causal, ssa_op_cost *o) {
  if (heads <= 0 || C % heads) return 0;
  ssa_op_inputs sdpa;
  memset(&sdpa, 0, sizeof sdpa);
  int64_t dq[4] = {B, heads, Tq, C / heads}, dk[4] = {B, heads, Tk, C / heads};
  sdpa.in[0] = make_tensor(q->type, 4, dq);
  sdpa.in[1] = make_tensor(q->type, 4, dk);
  sdpa.in[2] = make_tensor(q->type, 4, dk);
  sdpa.in[3] = make_tensor("Scalar", 0, NULL); /* dropout_p */
  snprintf(sdpa.in[3].concrete, sizeof sdpa.in[3].concrete, "0.");
  sdpa.in[4] = make_tensor("Scalar", 0, NULL); /* is_causal */
  snprintf(sdpa.in[4].concrete, sizeof sdpa.in[4].concrete, "%s", causal ? "True" : "False");
  sdpa.n = 5;
  return ssa_op_cost_of("aten::_scaled_dot_product_flash_attention", &sdpa, o);
}

/* A linear layer's backward (dense: weight [OC, C]; grouped experts: [E, OC, C]) with mask
 * [dinp, dweight, dbias]: the two GEMMs of 2 R C OC each and the bias gradient's R OC sums. */
static int linear_backward_cost(const ssa_op_inputs *in, int wdims, ssa_op_cost *o) {
  const ssa_op_input *dout = tensor_of(in, 0, 2), *x = tensor_of(in, 1, 2),
                     *w = tensor_of(in, 2, wdims);
  int m[3];
  if (!dout || !x || !w || ssa_op_concrete_mask(in, 3, m, 3)) return 0;
  double R = (double)x->dims[0], C = (double)x->dims[1], OC = (double)dout->dims[1];
  if (dout->dims[0] != x->dims[0] || w->dims[wdims - 1] != x->dims[1] ||
      w->dims[wdims - 2] != dout->dims[1])
    return 0;
  double bias_elems = (double)ssa_op_numel(w) / C; /* OC, or E x OC */
  int e = ssa_op_type_bytes(x->type);
  o->family = SSA_OPF_GEMM;
  o->dtype = peak_dtype(dout);
  o->flops = 2.0 * R * C * OC * (m[0] + m[1]) + m[2] * R * OC;
  /* dout read; dinp: the weight read, dinp read and written (accumulated); dweight: x read,
   * the fp32 gradient read and written; dbias: read and written */
  o->bytes = bytes_of(dout) + m[0] * (bytes_of(w) + 2.0 * R * C * e) +
             m[1] * (bytes_of(x) + 2.0 * bytes_of(w)) + m[2] * 2.0 * bias_elems * 4;
  return 1;
}

/* The experts' grouped GEMM x[R, C] by weight [E, OC, C] (+ bias [E, OC]): each of the R rows
 * multiplied by its expert's weight, as aten::linear costs one. */
static int expert_forward_cost(const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *x = tensor_of(in, 0, 2), *w = tensor_of(in, 1, 3), *b = tensor_of(in, 2, 2);
  if (!x || !w || w->dims[2] != x->dims[1]) return 0;
  double R = (double)x->dims[0], C = (double)x->dims[1], OC = (double)w->dims[1];
  o->family = SSA_OPF_GEMM;
  o->dtype = peak_dtype(x);
  o->flops = 2.0 * R * C * OC + (b ? R * OC : 0.0);
  o->bytes = bytes_of(x) + bytes_of(w) + bytes_of(b) + R * OC * ssa_op_type_bytes(x->type);
  return 1;
}

/* The trainer's attention on packed qkv [B, T, 3C] (causal), forward or backward: its
 * backward keeps the forward's probabilities, so it does not recompute QK^T: 2 x the
 * forward's FLOPs (dP, dV, dQ, dK), and the backward's bytes of op_models.c (2 x the
 * forward's). */
static int packed_attention_cost(const ssa_op_inputs *in, int backward, ssa_op_cost *o) {
  const ssa_op_input *qkv = tensor_of(in, backward ? 1 : 0, 3);
  if (!qkv || qkv->dims[2] % 3) return 0;
  int64_t T = qkv->dims[1];
  if (!attention_cost(qkv, qkv->dims[0], T, T, qkv->dims[2] / 3, scalar_int(in, backward ? 2 : 1),
                      1, o))
    return 0;
  o->flops *= backward ? 2.0 : 1.0;
  o->bytes *= backward ? 2.0 : 1.0;
  o->attention_backward = backward;
  return 1;
}

/* Ring attention's block of q [B, Tq, C] against kv [B, Tk, 2C]: forward as
 * _scaled_dot_product_flash_attention, backward as its backward (it recomputes the scores:
 * 2.5 x the forward's FLOPs, 2 x its bytes). */
static int block_attention_cost(const ssa_op_inputs *in, int backward, ssa_op_cost *o) {
  int at = backward ? 1 : 0;
  const ssa_op_input *q = tensor_of(in, at, 3), *kv = tensor_of(in, at + 1, 3);
  if (!q || !kv || kv->dims[2] != 2 * q->dims[2]) return 0;
  const char *c = at + 3 < in->n ? in->in[at + 3].concrete : "";
  int causal = !strcmp(c, "True") ? 1 : !strcmp(c, "False") ? 0 : -1;
  if (causal < 0 || !attention_cost(q, q->dims[0], q->dims[1], kv->dims[1], q->dims[2],
                                    scalar_int(in, at + 2), causal, o))
    return 0;
  o->flops *= backward ? 2.5 : 1.0;
  o->bytes *= backward ? 2.0 : 1.0;
  o->attention_backward = backward;
  return 1;
}

/* The trainer's layernorm_backward(dout[N,C], x[N,C], w[C], mean[N], rstd[N]) writes dx, dw
 * and db: aten::native_layer_norm_backward with output_mask [True, True, True] (a bias of the
 * weight's size), and it adds into its gradients (+=): one more add per element of dx and a
 * read of dx, dw and db. */
static int layernorm_backward_cost(const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *dout = tensor_of(in, 0, 2), *x = tensor_of(in, 1, 2),
                     *w = tensor_of(in, 2, 1);
  const ssa_op_input *mean = tensor_of(in, 3, 1), *rstd = tensor_of(in, 4, 1);
  if (!dout || !x || !w || !mean || !rstd) return 0;
  ssa_op_inputs aten;
  memset(&aten, 0, sizeof aten);
  aten.in[0] = *dout;
  aten.in[1] = *x;
  aten.in[2] = make_tensor("ScalarList", 0, NULL); /* normalized_shape */
  snprintf(aten.in[2].concrete, sizeof aten.in[2].concrete, "[%lld]", (long long)w->dims[0]);
  aten.in[3] = *mean;
  aten.in[4] = *rstd;
  aten.in[5] = *w;
  aten.in[6] = *w; /* the bias: the weight's size */
  aten.in[7] = make_tensor("ScalarList", 0, NULL);
  snprintf(aten.in[7].concrete, sizeof aten.in[7].concrete, "[True, True, True]");
  aten.n = 8;
  if (!ssa_op_cost_of("aten::native_layer_norm_backward", &aten, o)) return 0;
  o->flops += (double)ssa_op_numel(x);
  o->bytes += bytes_of(x) + 2.0 * bytes_of(w);
  return 1;
}

typedef enum {
  AS_ATEN,            /* the PyTorch op `aten` with the same inputs */
  LINEAR_BACKWARD,    /* dout, x, weight [OC, C], mask */
  EXPERT_FORWARD,     /* x, weight [E, OC, C], bias */
  EXPERT_BACKWARD,    /* dout, x, weight [E, OC, C], mask */
  ATTENTION,          /* qkv, heads */
  ATTENTION_BACKWARD, /* dout, qkv, heads */
  BLOCK,              /* q, kv, heads, causal */
  BLOCK_BACKWARD,     /* dout, q, kv, heads, causal */
  LAYERNORM_BACKWARD  /* dout, x, weight, mean, rstd */
} trainer_model;

static const struct {
  const char *name;
  trainer_model model;
  const char *aten;
} trainer_ops[] = {
    {"matmul_forward", AS_ATEN, "aten::linear"},
    {"matmul_backward", LINEAR_BACKWARD, NULL},
    {"moe_expert_matmul_forward", EXPERT_FORWARD, NULL},
    {"moe_expert_matmul_backward", EXPERT_BACKWARD, NULL},
    {"attention_forward", ATTENTION, NULL},
    {"attention_backward", ATTENTION_BACKWARD, NULL},
    {"attention_block_forward", BLOCK, NULL},
    {"attention_block_backward", BLOCK_BACKWARD, NULL},
    {"layernorm_forward", AS_ATEN, "aten::native_layer_norm"},
    {"layernorm_backward", LAYERNORM_BACKWARD, NULL},
    {"gelu_forward", AS_ATEN, "aten::gelu"},
    {"gelu_backward", AS_ATEN, "aten::gelu_backward"},
    {"residual_forward", AS_ATEN, "aten::add"},
};

int ssa_trainer_op_cost(const char *name, const ssa_op_inputs *in, ssa_op_cost *o) {
  for (size_t i = 0; i < sizeof trainer_ops / sizeof trainer_ops[0]; i++) {
    if (strcmp(name, trainer_ops[i].name)) continue;
    memset(o, 0, sizeof *o);
    if (!in) return 0;
    switch (trainer_ops[i].model) {
    case AS_ATEN: return ssa_op_cost_of(trainer_ops[i].aten, in, o);
    case LINEAR_BACKWARD: return linear_backward_cost(in, 2, o);
    case EXPERT_FORWARD: return expert_forward_cost(in, o);
    case EXPERT_BACKWARD: return linear_backward_cost(in, 3, o);
    case ATTENTION: return packed_attention_cost(in, 0, o);
    case ATTENTION_BACKWARD: return packed_attention_cost(in, 1, o);
    case BLOCK: return block_attention_cost(in, 0, o);
    case BLOCK_BACKWARD: return block_attention_cost(in, 1, o);
    case LAYERNORM_BACKWARD: return layernorm_backward_cost(in, o);
    }
  }
  return -1;
}
