/*
 * plan_shape_costs.c — costs of a framework's step that depend on the shapes of its work rather
 * than on its FLOP count (ssa_plan.h; docs/plan.md "Compute by shape"), for the planner's
 * compute by shape (plan_model.c: stage_time_by_shape):
 *   - GEMM tile and wave quantization: a GEMM's output is computed in tiles, one thread block
 *     each, in waves of one tile per SM, so an output whose tiles do not fill the last wave (or
 *     whose sides are not whole tiles) pays for the idle part (NVIDIA, "Matrix Multiplication
 *     Background User's Guide", DU-09799-001, sec. 3.1-3.2). Smaller micro-batches and wider
 *     tensor parallelism make smaller outputs and lose more;
 *   - the optimizer step: Adam's update is element-wise, memory-bound work over the parameters
 *     the rank updates (all of its stage's without ZeRO, its shard with ZeRO-1 and up), charged
 *     as HBM traffic the way the layers' element-wise work is.
 */
#include "ssa_plan.h"

#include <math.h>

double plan_gemm_quantization(const plan_device *dev, double rows, double cols) {
  if (dev->sms <= 0 || dev->tile_rows <= 0 || dev->tile_cols <= 0 || rows < 1 || cols < 1)
    return 1.0;
  double best = 0; /* the tile in either orientation, whichever wastes less */
  for (int turn = 0; turn < 2; turn++) {
    double tr = turn ? dev->tile_cols : dev->tile_rows, tc = turn ? dev->tile_rows : dev->tile_cols;
    double waves = ceil(ceil(rows / tr) * ceil(cols / tc) / dev->sms);
    double q = waves * dev->sms * tr * tc / (rows * cols);
    if (turn == 0 || q < best) best = q;
  }
  return best;
}

/* The GEMMs of one dense layer on a TP rank, (input width, output width): QKV (K and V narrower
 * with GQA), the attention projection, the MLP's first matrix (gate and up fused when gated) and
 * its second. */
static int layer_gemms(const mm_layout *l, double in[4], double out[4]) {
  double C = l->hidden, F = plan_ffn(l), t = l->tp;
  double A = mm_attention_width(l), KV = mm_kv_width(l); /* heads x head_dim; K, V's */
  in[0] = C, out[0] = (A + 2.0 * KV) / t;
  in[1] = A / t, out[1] = C;
  in[2] = C, out[2] = (l->gated_mlp ? 2.0 : 1.0) * F / t;
  in[3] = F / t, out[3] = C;
  return 4;
}

/* Average slow-down of a GEMM pass over its FLOPs: forward (tokens x out), the input gradient
 * (tokens x in) and the weight gradient (in x out, independent of the tokens). */
static void passes_quantization(const plan_device *dev, double tokens, const double *in,
                                const double *out, int n, double *fwd, double *dgrad,
                                double *wgrad) {
  double flops = 0, f = 0, d = 0, w = 0;
  for (int i = 0; i < n; i++) {
    double work = in[i] * out[i];
    flops += work;
    f += work * plan_gemm_quantization(dev, tokens, out[i]);
    d += work * plan_gemm_quantization(dev, tokens, in[i]);
    w += work * plan_gemm_quantization(dev, in[i], out[i]);
  }
  *fwd = f / flops, *dgrad = d / flops, *wgrad = w / flops;
}

double plan_layer_gemm_passes(const plan_device *dev, const mm_layout *l, double tokens,
                              int forwards) {
  double in[4], out[4], f, d, w;
  int n = layer_gemms(l, in, out);
  passes_quantization(dev, tokens, in, out, n, &f, &d, &w);
  return forwards * f + d + w;
}

double plan_head_gemm_passes(const plan_device *dev, const mm_layout *l, double tokens) {
  double in = l->hidden, out = (double)mm_padded_vocab(l->vocab) / l->tp, f, d, w;
  passes_quantization(dev, tokens, &in, &out, 1, &f, &d, &w);
  return f + d + w;
}

double plan_optimizer_step_s(const plan_device *dev, const mm_layout *l, int stage) {
  if (!(dev->hbm_bw > 0)) return 0;
  double psi = mm_framework_stage_params(l, stage);
  double updated = l->zero >= 1 ? mm_framework_stage_shard(l, stage) : psi;
  /* read: the fp32 weights it updates, Adam's m and v, the gradient (fp32 main_grad under
   * Megatron and FSDP, bf16 under DeepSpeed); written: the weights, m, v, and the bf16 copy the
   * GEMMs read where the fp32 weights are a master copy (Megatron, DeepSpeed) */
  double grad = l->framework == MM_FW_DEEPSPEED ? 2.0 : 4.0;
  double copy = l->framework == MM_FW_FSDP ? 0.0 : 2.0;
  return updated * (12.0 + grad + 12.0 + copy) / dev->hbm_bw;
}
