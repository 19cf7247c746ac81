/*
 * op_models.c — FLOPs and bytes moved of one PyTorch op from its name and inputs (ssa_ops.h).
 * docs/ops.md states every formula here with the reference it follows; keep them in step.
 *
 * Conventions: a multiply-add is 2 FLOPs; bytes are each input tensor read once and each
 * output written once, in the tensors' own element sizes (a roofline's minimum traffic, not
 * the cache behaviour of a kernel); an in-place op's output is its first input, written
 * back. The peak dtype is the first tensor input's (bf16, fp16, fp8, else fp32). A model
 * gives up (0) when the inputs do not say enough (no shapes, a list of tensors, a concrete
 * value it needs that the trace did not record), never guesses.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

const char *const ssa_op_family_names[SSA_OPF_N] = {
    "", "gemm", "conv", "attention", "norm", "softmax", "elementwise", "reduction", "embedding"};
const char *const ssa_peak_dtype_names[SSA_PEAK_N] = {"fp32", "tf32", "bf16", "fp16", "fp8"};

/* ---- inputs ---- */

/* Input i when it is a tensor with shapes, else NULL. */
static const ssa_op_input *tensor(const ssa_op_inputs *in, int i) {
  if (i < 0 || i >= in->n) return NULL;
  const ssa_op_input *t = &in->in[i];
  return ssa_op_is_tensor(t) && ssa_op_type_bytes(t->type) ? t : NULL;
}

static double tbytes(const ssa_op_input *t) {
  return t ? (double)ssa_op_numel(t) * ssa_op_type_bytes(t->type) : 0.0;
}

static ssa_peak_dtype dtype_of(const ssa_op_input *t) {
  const char *s = t ? t->type : "";
  if (!strcmp(s, "c10::BFloat16")) return SSA_PEAK_BF16;
  if (!strcmp(s, "c10::Half")) return SSA_PEAK_FP16;
  if (!strncmp(s, "c10::Float8", 11)) return SSA_PEAK_FP8;
  return SSA_PEAK_FP32;
}

/* A concrete integer list ("[1, 1]") or integer ("2") into v[0..cap): the count, or -1 when
 * there is none (not recorded). */
static int concrete_ints(const ssa_op_inputs *in, int i, int64_t *v, int cap) {
  if (i < 0 || i >= in->n) return -1;
  const char *p = in->in[i].concrete;
  int n = 0;
  if (!*p) return -1; /* not recorded */
  while (*p == ' ' || *p == '[')
    p++;
  if (!*p || *p == ']') return 0; /* "[]": empty */
  while (*p) {
    char *end;
    long long x = strtoll(p, &end, 10);
    if (end == p) return -1;
    if (n < cap) v[n] = x;
    n++;
    p = end;
    while (*p == ',' || *p == ' ' || *p == ']')
      p++;
  }
  return n;
}

/* A concrete boolean: 1, 0, or -1 when not recorded. */
static int concrete_bool(const ssa_op_inputs *in, int i) {
  if (i < 0 || i >= in->n) return -1;
  const char *s = in->in[i].concrete;
  if (!strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1")) return 1;
  if (!strcmp(s, "False") || !strcmp(s, "false") || !strcmp(s, "0")) return 0;
  return -1;
}

/* The element size of a ScalarType code given as a concrete value (out_dtype), or `dflt`. */
static int scalar_type_bytes(const ssa_op_inputs *in, int i, int dflt) {
  int64_t code;
  if (concrete_ints(in, i, &code, 1) != 1) return dflt;
  switch (code) {
  case 5: return 2;  /* Half */
  case 6: return 4;  /* Float */
  case 7: return 8;  /* Double */
  case 15: return 2; /* BFloat16 */
  case 23:
  case 24: return 1; /* Float8_e5m2, Float8_e4m3fn */
  default: return dflt;
  }
}

static int set_cost(ssa_op_cost *o, ssa_peak_dtype dt, double flops, double bytes) {
  o->dtype = dt;
  o->flops = flops;
  o->bytes = bytes;
  return 1;
}

/* ---- matmul family ---- */

/* out = a[..., M, K] x b[..., K, N] (batch dims broadcast; a 1-d a is [1, K], a 1-d b [K, 1]),
 * plus `bias` (added: M x N x batch FLOPs) when not NULL. */
/* a[..., M, K] x b[..., K, N] with broadcast batch dims: *batch, *m, *n, *k; 0 when the inner
 * dimensions disagree or an operand is missing. */
static int matmul_dims(const ssa_op_input *a, const ssa_op_input *b, double *batch, double *m,
                       double *n, double *k) {
  if (!a || !b || a->ndims < 1 || b->ndims < 1) return 0;
  int64_t M = a->ndims >= 2 ? a->dims[a->ndims - 2] : 1, K = a->dims[a->ndims - 1];
  int64_t N = b->ndims >= 2 ? b->dims[b->ndims - 1] : 1;
  int64_t Kb = b->ndims >= 2 ? b->dims[b->ndims - 2] : b->dims[0];
  if (K != Kb) return 0;
  *batch = 1;
  int ba = a->ndims - 2, bb = b->ndims - 2; /* batch dims of each */
  for (int i = 0; i < (ba > bb ? ba : bb); i++) {
    int64_t x = i < ba ? a->dims[ba - 1 - i] : 1, y = i < bb ? b->dims[bb - 1 - i] : 1;
    *batch *= (double)(x > y ? x : y);
  }
  *m = (double)M;
  *n = (double)N;
  *k = (double)K;
  return 1;
}

static int matmul_cost(const ssa_op_input *a, const ssa_op_input *b, const ssa_op_input *bias,
                       int out_bytes, ssa_op_cost *o) {
  double batch, M, N, K;
  if (!matmul_dims(a, b, &batch, &M, &N, &K)) return 0;
  double mn = batch * M * N;
  double flops = 2.0 * mn * K + (bias ? mn : 0.0);
  int eo = out_bytes ? out_bytes : ssa_op_type_bytes(a->type);
  return set_cost(o, dtype_of(a), flops, tbytes(a) + tbytes(b) + tbytes(bias) + mn * eo);
}

static int gemm_model(const char *op, const ssa_op_inputs *in, ssa_op_cost *o) {
  if (!strcmp(op, "mm") || !strcmp(op, "matmul") || !strcmp(op, "bmm"))
    return matmul_cost(tensor(in, 0), tensor(in, 1), NULL, 0, o);
  if (!strcmp(op, "addmm") || !strcmp(op, "baddbmm") || !strcmp(op, "addbmm"))
    return matmul_cost(tensor(in, 1), tensor(in, 2), tensor(in, 0), 0, o);
  if (!strcmp(op, "linear")) { /* x[..., K] w[N, K]: x (w^T) */
    const ssa_op_input *x = tensor(in, 0), *w = tensor(in, 1);
    if (!x || !w || w->ndims != 2 || x->ndims < 1) return 0;
    ssa_op_input wt = *w;
    wt.dims[0] = w->dims[1];
    wt.dims[1] = w->dims[0];
    ssa_op_input x2 = *x; /* the leading dims as one M */
    int64_t m = 1;
    for (int i = 0; i + 1 < x->ndims; i++)
      m *= x->dims[i];
    x2.ndims = 2;
    x2.dims[0] = m;
    x2.dims[1] = x->dims[x->ndims - 1];
    return matmul_cost(&x2, &wt, tensor(in, 2), 0, o);
  }
  if (!strcmp(op, "_scaled_mm")) { /* a, b, scale_a, scale_b, bias, scale_result, out_dtype */
    if (!matmul_cost(tensor(in, 0), tensor(in, 1), tensor(in, 4), scalar_type_bytes(in, 6, 2), o))
      return 0;
    o->bytes += tbytes(tensor(in, 2)) + tbytes(tensor(in, 3)) + tbytes(tensor(in, 5));
    return 1;
  }
  return 0;
}

/* ---- convolution ---- */

typedef struct conv_args {
  const char *op;
  int bias, stride, padding, dilation, transposed, output_padding, groups;
} conv_args;

static const conv_args conv_table[] = {
    {"convolution", 2, 3, 4, 5, 6, 7, 8},
    {"_convolution", 2, 3, 4, 5, 6, 7, 8},
    {"conv1d", 2, 3, 4, 5, -1, -1, 6},
    {"conv2d", 2, 3, 4, 5, -1, -1, 6},
    {"conv3d", 2, 3, 4, 5, -1, -1, 6},
    {"mkldnn_convolution", 2, 4, 3, 5, -1, -1, 6},
    {"cudnn_convolution", -1, 3, 2, 4, -1, -1, 5},
};

static int conv_model(const conv_args *ca, const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *x = tensor(in, 0), *w = tensor(in, 1);
  if (!x || !w || x->ndims < 3 || x->ndims != w->ndims) return 0;
  int sp = x->ndims - 2;
  int64_t stride[6], pad[6], dil[6], opad[6] = {0};
  int transposed = ca->transposed >= 0 ? concrete_bool(in, ca->transposed) : 0;
  if (transposed < 0) return 0;
  int same = ca->padding < in->n && !strcmp(in->in[ca->padding].concrete, "same");
  int ns = concrete_ints(in, ca->stride, stride, 6), nd = concrete_ints(in, ca->dilation, dil, 6);
  int np = same ? sp : concrete_ints(in, ca->padding, pad, 6);
  if (ns < 1 || nd < 1 || np < 1) return 0;
  if (transposed && concrete_ints(in, ca->output_padding, opad, 6) < 1) return 0;
  double out_sp = 1, in_sp = 1;
  for (int i = 0; i < sp; i++) {
    int64_t s = stride[ns == 1 ? 0 : i], d = dil[nd == 1 ? 0 : i], k = w->dims[2 + i];
    int64_t p = same ? 0 : pad[np == 1 ? 0 : i], n = x->dims[2 + i], out;
    if (transposed)
      out = (n - 1) * s - 2 * p + d * (k - 1) + opad[i] + 1;
    else
      out = same ? n : (n + 2 * p - d * (k - 1) - 1) / s + 1;
    if (out <= 0) return 0;
    out_sp *= (double)out;
    in_sp *= (double)n;
  }
  int64_t groups = 1;
  if (ca->groups >= 0 && concrete_ints(in, ca->groups, &groups, 1) != 1) return 0;
  double k_out = transposed ? (double)w->dims[1] * (double)groups : (double)w->dims[0];
  double batch = (double)x->dims[0], wn = (double)ssa_op_numel(w);
  /* each output (input, when transposed) point: one multiply-add per weight of its group */
  double flops = 2.0 * batch * (transposed ? in_sp : out_sp) * wn;
  const ssa_op_input *bias = ca->bias >= 0 ? tensor(in, ca->bias) : NULL;
  double out_n = batch * k_out * out_sp;
  if (bias) flops += out_n;
  return set_cost(o, dtype_of(x), flops,
                  tbytes(x) + tbytes(w) + tbytes(bias) + out_n * ssa_op_type_bytes(x->type));
}

/* convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
 * transposed, output_padding, groups, output_mask): each of grad input and grad weight costs
 * one forward's multiply-adds; grad bias is a sum over grad_output. */
static int conv_backward_model(const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *go = tensor(in, 0), *x = tensor(in, 1), *w = tensor(in, 2);
  if (!go || !x || !w || x->ndims < 3 || go->ndims != x->ndims) return 0;
  int mask[3];
  int transposed = concrete_bool(in, 7);
  if (transposed < 0 || ssa_op_concrete_mask(in, 10, mask, 3)) return 0;
  const ssa_op_input *big = transposed ? x : go; /* the side each weight meets once per point */
  double pts = (double)big->dims[0];
  for (int i = 2; i < big->ndims; i++)
    pts *= (double)big->dims[i];
  double fwd = 2.0 * pts * (double)ssa_op_numel(w);
  double flops = fwd * (double)(mask[0] + mask[1]) + (mask[2] ? (double)ssa_op_numel(go) : 0);
  double bytes = tbytes(go) + (mask[1] ? tbytes(x) : 0) + (mask[0] ? tbytes(w) : 0) +
                 (mask[0] ? tbytes(x) : 0) + (mask[1] ? tbytes(w) : 0) +
                 (mask[2] ? (double)go->dims[1] * ssa_op_type_bytes(go->type) : 0);
  return set_cost(o, dtype_of(go), flops, bytes);
}

/* ---- attention ---- */

typedef struct attn_args {
  const char *op;
  int q;         /* position of q (k, v follow) */
  int causal;    /* position of is_causal (or custom_mask_type: 1 causal), -1 none */
  int varlen;    /* position of cum_seq_q / cu_seqlens_q, -1 none */
  int bshd;      /* q is [B, S, H, D] (else [B, H, S, D]) */
  int backward;  /* a backward: 2.5 x the forward's FLOPs */
  int mask_type; /* `causal` is custom_mask_type */
} attn_args;

static const attn_args attn_table[] = {
    {"scaled_dot_product_attention", 0, 5, -1, 0, 0, 0},
    {"_scaled_dot_product_flash_attention", 0, 4, -1, 0, 0, 0},
    {"_scaled_dot_product_flash_attention_for_cpu", 0, 4, -1, 0, 0, 0},
    {"_scaled_dot_product_efficient_attention", 0, 6, -1, 0, 0, 0},
    {"_scaled_dot_product_cudnn_attention", 0, 6, -1, 0, 0, 0},
    {"_flash_attention_forward", 0, 8, 3, 1, 0, 0},
    {"_efficient_attention_forward", 0, 9, 4, 1, 0, 1},
    {"_scaled_dot_product_flash_attention_backward", 1, 11, -1, 0, 1, 0},
    {"_scaled_dot_product_flash_attention_for_cpu_backward", 1, 7, -1, 0, 1, 0},
    {"_scaled_dot_product_efficient_attention_backward", 1, 11, -1, 0, 1, 0},
    {"_scaled_dot_product_cudnn_attention_backward", 1, 14, -1, 0, 1, 0},
    {"_flash_attention_backward", 1, 11, 6, 1, 1, 0},
    {"_efficient_attention_backward", 1, 14, 6, 1, 1, 1},
};

static int attention_model(const attn_args *aa, const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *q = tensor(in, aa->q), *k = tensor(in, aa->q + 1), *v = tensor(in, aa->q + 2);
  if (!q || !k || !v || q->ndims != 4 || k->ndims != 4 || v->ndims != 4) return 0;
  if (aa->varlen >= 0 && tensor(in, aa->varlen)) return 0; /* per-sequence lengths unknown */
  int s = aa->bshd ? 1 : 2, h = aa->bshd ? 2 : 1;
  double B = (double)q->dims[0], H = (double)q->dims[h], D = (double)q->dims[3],
         Dv = (double)v->dims[3];
  int64_t Sq = q->dims[s], Sk = k->dims[s];
  int causal = 0;
  if (aa->causal >= 0 && aa->causal < in->n) {
    int64_t c;
    if (aa->mask_type)
      causal = concrete_ints(in, aa->causal, &c, 1) == 1 ? c != 0 : -1;
    else
      causal = concrete_bool(in, aa->causal);
  }
  if (causal < 0) return 0;
  double pairs = 0;
  if (causal) /* query i sees keys 0..i (top-left, PyTorch's is_causal) */
    pairs = Sq <= Sk ? (double)Sq * (double)(Sq + 1) / 2
                     : (double)Sk * (double)(Sk + 1) / 2 + (double)(Sq - Sk) * (double)Sk;
  else
    pairs = (double)Sq * (double)Sk;
  double fwd = 2.0 * B * H * pairs * (D + Dv);
  int e = ssa_op_type_bytes(q->type);
  double out = B * H * (double)Sq * Dv * e;
  double qkv = tbytes(q) + tbytes(k) + tbytes(v);
  o->attention_whole_flops = 2.0 * B * H * (double)Sq * (double)Sk * (D + Dv);
  o->attention_causal = causal;
  o->attention_backward = aa->backward;
  if (aa->backward) return set_cost(o, dtype_of(q), 2.5 * fwd, 2.0 * qkv + 2.0 * out);
  return set_cost(o, dtype_of(q), fwd, qkv + out);
}

/* ---- norms, softmax, elementwise, reductions, embedding ---- */

static int norm_model(const char *op, const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *x = tensor(in, 0);
  if (!x) return 0;
  double n = (double)ssa_op_numel(x);
  if (!strcmp(op, "layer_norm") || !strcmp(op, "native_layer_norm") || !strcmp(op, "group_norm") ||
      !strcmp(op, "native_group_norm")) {
    int wi = strstr(op, "group") ? 1 : 2;
    const ssa_op_input *w = tensor(in, wi), *b = tensor(in, wi + 1);
    return set_cost(o, dtype_of(x), n * (5 + (w != NULL) + (b != NULL)),
                    2 * tbytes(x) + tbytes(w) + tbytes(b));
  }
  if (!strcmp(op, "batch_norm") || !strcmp(op, "native_batch_norm") ||
      !strcmp(op, "_native_batch_norm_legit") ||
      !strcmp(op, "_native_batch_norm_legit_no_training")) {
    const ssa_op_input *w = tensor(in, 1), *b = tensor(in, 2);
    return set_cost(o, dtype_of(x), n * (5 + (w != NULL) + (b != NULL)),
                    2 * tbytes(x) + tbytes(w) + tbytes(b) + tbytes(tensor(in, 3)) +
                        tbytes(tensor(in, 4)));
  }
  /* rms_norm(input, normalized_shape, weight, eps) */
  const ssa_op_input *w = tensor(in, 2);
  return set_cost(o, dtype_of(x), n * (3 + (w != NULL)), 2 * tbytes(x) + tbytes(w));
}

/* The arguments of a norm's backward (native_functions.yaml). */
typedef struct norm_bwd_args {
  const char *op;
  int dy, x;  /* grad_out and input */
  int mean;   /* the saved mean (rms: -1, none); rstd follows it (rms: at `rstd`) */
  int rstd;   /* rms norm's saved rstd, -1 for the others */
  int weight; /* -1 none */
  int bias;   /* -1 none (the bias gradient then has the weight's size) */
  int mask;   /* output_mask [dx, dw, db] ([dx, dw] for rms); -1: all three always */
  int train;  /* batch norm's `train` / `update` (else -1): eval uses the running statistics,
                 the two inputs after the weight */
} norm_bwd_args;

static const norm_bwd_args norm_bwd_table[] = {
    {"native_layer_norm_backward", 0, 1, 3, -1, 5, 6, 7, -1},
    {"native_group_norm_backward", 0, 1, 2, -1, 4, -1, 9, -1},
    {"native_batch_norm_backward", 0, 1, 5, -1, 2, -1, 9, 7},
    {"batch_norm_backward", 0, 1, 5, -1, 2, -1, 9, 7},
    {"cudnn_batch_norm_backward", 1, 0, 5, -1, 2, -1, -1, -1}, /* training only */
    {"miopen_batch_norm_backward", 1, 0, 5, -1, 2, -1, -1, -1},
    {"_fused_rms_norm_backward", 0, 1, -1, 3, 4, -1, 5, -1},
};

/* A norm's backward, one operation per arithmetic step of the textbook gradient (docs/ops.md
 * "Norm backwards"), per element of x: xhat = (x - mean) * rstd recomputed (2; rms x * rstd,
 * 1) when dw, or dx in training, is asked; dx: g = dy * w (1, with a weight), sum(g) (1; not
 * rms), sum(g * xhat) (2), rstd * (g - mean(g) - xhat * mean(g * xhat)) (4; rms 3) — batch
 * norm in eval: g * rstd (1); dw: sum(dy * xhat) (2); db: sum(dy) (1). Per-row steps are not
 * counted. Read: dy; x and the mean with xhat; rstd with xhat or dx; w with dx. */
static int norm_backward_model(const norm_bwd_args *na, const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *dy = tensor(in, na->dy), *x = tensor(in, na->x);
  const ssa_op_input *w = tensor(in, na->weight), *b = tensor(in, na->bias);
  int m[3] = {1, 1, 1}, rms = na->mean < 0;
  int train = na->train >= 0 ? concrete_bool(in, na->train) : 1;
  if (!dy || !x || train < 0) return 0;
  if (na->mask >= 0 && ssa_op_concrete_mask(in, na->mask, m, rms ? 2 : 3)) return 0;
  if (rms) m[2] = 0;
  int stats = rms ? na->rstd : train ? na->mean : na->weight + 1;
  const ssa_op_input *mean = rms ? NULL : tensor(in, stats),
                     *rstd = tensor(in, rms ? stats : stats + 1);
  if (!rstd || (!rms && !mean) || ((m[1] || m[2]) && !w)) return 0;
  double n = (double)ssa_op_numel(x), xhat = (m[0] && train) || m[1];
  double dx = !train ? 1 : rms ? 5 : 7;
  double flops = n * (xhat * (rms ? 1 : 2) + m[0] * (dx + (w != NULL)) + 2 * m[1] + m[2]);
  double bytes = tbytes(dy) + xhat * (tbytes(x) + tbytes(mean)) + (xhat || m[0]) * tbytes(rstd) +
                 m[0] * (tbytes(w) + n * ssa_op_type_bytes(x->type)) + m[1] * tbytes(w) +
                 m[2] * tbytes(b ? b : w);
  return set_cost(o, dtype_of(dy), flops, bytes);
}

static int softmax_model(const char *op, const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *x = tensor(in, 0);
  if (!x) return 0;
  double n = (double)ssa_op_numel(x);
  if (strstr(op, "backward")) /* grad_output, output: grad_in = y (g - sum(g y)) */
    return set_cost(o, dtype_of(x), 4 * n, tbytes(x) + tbytes(tensor(in, 1)) + tbytes(x));
  int out_e = ssa_op_type_bytes(x->type);
  if (op[0] == '_' && concrete_bool(in, 2) == 1) out_e = 4; /* _softmax(x, dim, half_to_float) */
  return set_cost(o, dtype_of(x), 5 * n, tbytes(x) + n * out_e);
}

typedef struct ew_op {
  const char *op;
  int flops; /* per output element */
} ew_op;

/* Elementwise ops: one FLOP per output element for arithmetic and activations (addcmul and
 * addcdiv: 3), none for copies and fills. */
static const ew_op ew_table[] = {
    {"add", 1},
    {"sub", 1},
    {"mul", 1},
    {"div", 1},
    {"rsub", 1},
    {"addcmul", 3},
    {"addcdiv", 3},
    {"lerp", 3},
    {"where", 1},
    {"relu", 1},
    {"gelu", 1},
    {"silu", 1},
    {"sigmoid", 1},
    {"tanh", 1},
    {"exp", 1},
    {"log", 1},
    {"neg", 1},
    {"sqrt", 1},
    {"rsqrt", 1},
    {"pow", 1},
    {"clamp", 1},
    {"clamp_min", 1},
    {"abs", 1},
    {"maximum", 1},
    {"minimum", 1},
    {"reciprocal", 1},
    {"erf", 1},
    {"threshold_backward", 1},
    {"gelu_backward", 1},
    {"silu_backward", 1},
    {"sigmoid_backward", 1},
    {"tanh_backward", 1},
    {"hardtanh", 1},
    {"masked_fill", 0},
    {"fill", 0},
    {"zero", 0},
    {"copy", 0},
    {"clone", 0},
    {"_to_copy", 0},
};

static const ew_op *ew_find(const char *op) {
  size_t n = strlen(op);
  if (n && op[n - 1] == '_') n--; /* the in-place form */
  for (size_t i = 0; i < sizeof ew_table / sizeof ew_table[0]; i++)
    if (strlen(ew_table[i].op) == n && !strncmp(op, ew_table[i].op, n)) return &ew_table[i];
  return NULL;
}

static int elementwise_model(const ew_op *e, const char *op, const ssa_op_inputs *in,
                             ssa_op_cost *o) {
  const ssa_op_input *first = NULL;
  int ndims = 0;
  int64_t out[SSA_OP_MAX_DIMS];
  for (int d = 0; d < SSA_OP_MAX_DIMS; d++)
    out[d] = 1;
  double in_bytes = 0;
  for (int i = 0; i < in->n; i++) { /* the output: the inputs' dims broadcast */
    const ssa_op_input *t = tensor(in, i);
    if (!t) continue;
    if (!first) first = t;
    in_bytes += tbytes(t);
    for (int d = 0; d < t->ndims; d++) /* aligned to the right; a 1 takes the other's size */
      if (t->dims[d] != 1) out[SSA_OP_MAX_DIMS - t->ndims + d] = t->dims[d];
    if (t->ndims > ndims) ndims = t->ndims;
  }
  if (!first) return 0;
  double n = 1;
  for (int d = SSA_OP_MAX_DIMS - ndims; d < SSA_OP_MAX_DIMS; d++)
    n *= (double)out[d];
  const ssa_op_input *value = first; /* what the output is made of */
  if (!strncmp(op, "where", 5) && tensor(in, 1)) value = tensor(in, 1); /* first: the condition */
  int out_e = ssa_op_type_bytes(value->type);
  if (!strcmp(op, "_to_copy")) out_e = scalar_type_bytes(in, 1, out_e);
  if (!strcmp(op, "copy_") || !strcmp(op, "fill_") || !strcmp(op, "zero_"))
    in_bytes -= tbytes(first); /* the destination is written, not read */
  return set_cost(o, dtype_of(value), n * e->flops, in_bytes + n * out_e);
}

static const char *const reductions[] = {
    "sum", "mean", "amax", "amin",   "max",    "min",       "norm",
    "var", "std",  "prod", "argmax", "argmin", "logsumexp", "linalg_vector_norm"};

static int reduction_model(const ssa_op_inputs *in, ssa_op_cost *o) {
  const ssa_op_input *x = tensor(in, 0);
  if (!x) return 0;
  double n = (double)ssa_op_numel(x), out = 1;
  int64_t dims[SSA_OP_MAX_DIMS];
  /* the dims reduced: a concrete list or integer at 1 ("[]", none or another kind: all) */
  int nd = in->n > 1 && tensor(in, 1) == NULL ? concrete_ints(in, 1, dims, SSA_OP_MAX_DIMS) : 0;
  if (nd < 0) nd = 0;
  if (nd > 0) { /* the kept dims' sizes */
    out = n;
    for (int i = 0; i < nd && i < SSA_OP_MAX_DIMS; i++) {
      int64_t d = dims[i] < 0 ? dims[i] + x->ndims : dims[i];
      if (d < 0 || d >= x->ndims) return 0;
      out /= (double)x->dims[d];
    }
  }
  return set_cost(o, dtype_of(x), n, tbytes(x) + out * ssa_op_type_bytes(x->type));
}

static int embedding_model(const char *op, const ssa_op_inputs *in, ssa_op_cost *o) {
  if (!strcmp(op, "embedding")) { /* weight[V, D], indices */
    const ssa_op_input *w = tensor(in, 0), *idx = tensor(in, 1);
    if (!w || !idx || w->ndims != 2) return 0;
    double rows = (double)ssa_op_numel(idx) * (double)w->dims[1] * ssa_op_type_bytes(w->type);
    return set_cost(o, dtype_of(w), 0, tbytes(idx) + 2 * rows);
  }
  /* embedding_dense_backward(grad_output[..., D], indices, num_weights, ...) */
  const ssa_op_input *g = tensor(in, 0), *idx = tensor(in, 1);
  int64_t nw;
  if (!g || !idx || g->ndims < 1 || concrete_ints(in, 2, &nw, 1) != 1) return 0;
  double table = (double)nw * (double)g->dims[g->ndims - 1] * ssa_op_type_bytes(g->type);
  return set_cost(o, dtype_of(g), (double)ssa_op_numel(g), tbytes(g) + tbytes(idx) + table);
}

/* ---- dispatch ---- */

static const char *bare(const char *name) {
  return !strncmp(name, "aten::", 6) ? name + 6 : name;
}

static ssa_op_family family_of(const char *op, const conv_args **ca, const attn_args **aa,
                               const norm_bwd_args **na, const ew_op **ew) {
  static const char *const gemms[] = {"mm",     "addmm",  "bmm",    "baddbmm",
                                      "addbmm", "matmul", "linear", "_scaled_mm"};
  static const char *const norms[] = {"layer_norm",
                                      "native_layer_norm",
                                      "rms_norm",
                                      "_fused_rms_norm",
                                      "group_norm",
                                      "native_group_norm",
                                      "batch_norm",
                                      "native_batch_norm",
                                      "_native_batch_norm_legit",
                                      "_native_batch_norm_legit_no_training"};
  static const char *const softmaxes[] = {"softmax",
                                          "_softmax",
                                          "log_softmax",
                                          "_log_softmax",
                                          "_softmax_backward_data",
                                          "_log_softmax_backward_data"};
#define IN(list, fam)                                                                              \
  for (size_t i = 0; i < sizeof list / sizeof list[0]; i++)                                        \
    if (!strcmp(op, list[i])) return fam;
  IN(gemms, SSA_OPF_GEMM)
  IN(norms, SSA_OPF_NORM)
  IN(softmaxes, SSA_OPF_SOFTMAX)
  IN(reductions, SSA_OPF_REDUCTION)
#undef IN
  for (size_t i = 0; i < sizeof conv_table / sizeof conv_table[0]; i++)
    if (!strcmp(op, conv_table[i].op)) {
      *ca = &conv_table[i];
      return SSA_OPF_CONV;
    }
  if (!strcmp(op, "convolution_backward")) return SSA_OPF_CONV;
  for (size_t i = 0; i < sizeof attn_table / sizeof attn_table[0]; i++)
    if (!strcmp(op, attn_table[i].op)) {
      *aa = &attn_table[i];
      return SSA_OPF_ATTENTION;
    }
  for (size_t i = 0; i < sizeof norm_bwd_table / sizeof norm_bwd_table[0]; i++)
    if (!strcmp(op, norm_bwd_table[i].op)) {
      *na = &norm_bwd_table[i];
      return SSA_OPF_NORM;
    }
  if (!strcmp(op, "embedding") || !strcmp(op, "embedding_dense_backward")) return SSA_OPF_EMBEDDING;
  if ((*ew = ew_find(op)) != NULL) return SSA_OPF_ELEMENTWISE;
  return SSA_OPF_NONE;
}

int ssa_op_has_model(const char *name) {
  ssa_op_cost unused;
  if (ssa_trainer_op_cost(name, NULL, &unused) >= 0) return 1;
  const conv_args *ca = NULL;
  const attn_args *aa = NULL;
  const norm_bwd_args *na = NULL;
  const ew_op *ew = NULL;
  return family_of(bare(name), &ca, &aa, &na, &ew) != SSA_OPF_NONE;
}

int ssa_op_is_composite(const char *name) {
  static const char *const composites[] = {
      "linear",     "matmul",      "conv1d",       "conv2d",
      "conv3d",     "convolution", "_convolution", "scaled_dot_product_attention",
      "layer_norm", "group_norm",  "batch_norm",   "rms_norm",
      "softmax",    "log_softmax", "einsum"};
  const char *op = bare(name);
  for (size_t i = 0; i < sizeof composites / sizeof composites[0]; i++)
    if (!strcmp(op, composites[i])) return 1;
  return 0;
}

int ssa_op_cost_of(const char *name, const ssa_op_inputs *in, ssa_op_cost *out) {
  int trainer = ssa_trainer_op_cost(name, in, out);
  if (trainer >= 0) return trainer;
  const char *op = bare(name);
  const conv_args *ca = NULL;
  const attn_args *aa = NULL;
  const norm_bwd_args *na = NULL;
  const ew_op *ew = NULL;
  memset(out, 0, sizeof *out);
  ssa_op_family f = family_of(op, &ca, &aa, &na, &ew);
  out->family = f;
  int ok = 0;
  switch (f) {
  case SSA_OPF_GEMM: ok = gemm_model(op, in, out); break;
  case SSA_OPF_CONV: ok = ca ? conv_model(ca, in, out) : conv_backward_model(in, out); break;
  case SSA_OPF_ATTENTION: ok = attention_model(aa, in, out); break;
  case SSA_OPF_NORM: ok = na ? norm_backward_model(na, in, out) : norm_model(op, in, out); break;
  case SSA_OPF_SOFTMAX: ok = softmax_model(op, in, out); break;
  case SSA_OPF_ELEMENTWISE: ok = elementwise_model(ew, op, in, out); break;
  case SSA_OPF_REDUCTION: ok = reduction_model(in, out); break;
  case SSA_OPF_EMBEDDING: ok = embedding_model(op, in, out); break;
  default: break;
  }
  return ok;
}

int ssa_gemm_output(const char *name, const ssa_op_inputs *in, double *batch, double *rows,
                    double *cols) {
  const char *op = name ? bare(name) : "";
  double k;
  /* the stepscope trainer's matmul_forward is a linear (trainer_op_models.c) */
  if (!strcmp(op, "linear") || !strcmp(op, "matmul_forward")) { /* x[..., K] w[N, K] */
    const ssa_op_input *x = tensor(in, 0), *w = tensor(in, 1);
    if (!x || !w || w->ndims != 2 || x->ndims < 1) return 0;
    *batch = 1;
    *rows = 1;
    for (int i = 0; i + 1 < x->ndims; i++)
      *rows *= (double)x->dims[i];
    *cols = (double)w->dims[0];
    return 1;
  }
  int shifted = !strcmp(op, "addmm") || !strcmp(op, "baddbmm") || !strcmp(op, "addbmm");
  if (!shifted && strcmp(op, "mm") && strcmp(op, "matmul") && strcmp(op, "bmm") &&
      strcmp(op, "_scaled_mm"))
    return 0;
  return matmul_dims(tensor(in, shifted), tensor(in, shifted + 1), batch, rows, cols, &k);
}
