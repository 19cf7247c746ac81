/*
 * plan_shape_costs.c — costs of a framework's step that depend on the shapes of its work rather
 * than on its FLOP count (ssa_plan.h; docs/plan.md "Compute by shape"), for the planner's
 * compute by shape (plan_model.c: stage_time_by_shape):
 *   - GEMM tile and wave quantization: a GEMM's output is computed in tiles, one thread block
 *     each, in waves of one tile per SM, so an output whose tiles do not fill the last wave (or
 *     whose sides are not whole tiles) pays for the idle part (NVIDIA, "Matrix Multiplication
 *     Background User's Guide", DU-09799-001, sec. 3.1-3.2). Smaller micro-batches and wider
 *     tensor parallelism make smaller outputs and lose more;
 *   - GEMMs bound by memory: a GEMM pass takes at least the time its HBM traffic takes (the
 *     roofline, Williams, Waterman and Patterson, CACM 2009): the weights it reads (forward and
 *     input gradient), its activations in and out, and for the weight gradient the gradient it
 *     writes, under Megatron read and written too (gradient_accumulation_fusion adds it into
 *     main_grad). A layer's large-token GEMMs stay compute-bound; a mixture of experts' GEMMs
 *     with few tokens an expert (experts many, expert parallelism small) do not: expert
 *     parallelism exists to gather more tokens per expert. So each GEMM pass takes the longer of
 *     its FLOPs (at its own quantization: the experts' grouped GEMMs at theirs, not the dense
 *     layer's) and its traffic (plan_layer_gemm_s);
 *   - the attention kernel's length: FlashAttention's rate grows with the length it runs on at a
 *     fixed token count (pytorch/benchmark commit ff65cb6, Triton FlashAttention-2 forward on
 *     H100, head size 128, batch x sequence 16K: 329 TFLOP/s at 512, 390 at 1K, 434 at 2K, 458
 *     at 4K, 471 at 8K, 477 at 16K; FA3 in the same ratios within 2 %), and a ring step of
 *     context parallelism runs it on one chunk of seq / cp positions. The device's attention
 *     share holds at 2,048 positions (the length most of the published runs it was set on
 *     trained at); the rate is scaled by rate(seq / cp) / rate(2048). A share measured in a run
 *     (--ceilings-from) is taken at the planned length: rate(seq / cp) / rate(seq);
 *   - cuDNN's measured attention rate by length: where TransformerEngine's fused attention
 *     (cuDNN's on Hopper) was measured, its own rate (plan_fused_attention_rate), by default with
 *     the share's excess over it at 2K charged per token (--attention-rate split,
 *     plan_attention_rest_s), alone with --attention-rate cudnn, not at all with share;
 *   - sliding-window attention: a layer whose queries attend to the last `window` positions
 *     costs the key tiles FlashAttention visits for it, a share of a causal layer's;
 *   - the optimizer step: Adam's update is element-wise, memory-bound work over the parameters
 *     the rank updates (all of its stage's without ZeRO, its shard with ZeRO-1 and up), charged
 *     as HBM traffic the way the layers' element-wise work is.
 */
#include "ssa_plan.h"

#include <math.h>

/* The quantization of `count` GEMMs of one output shape launched together (a grouped GEMM, as
 * the experts' are): their tiles fill the waves together. */
static double grouped_quantization(const plan_device *dev, double rows, double cols, double count) {
  if (dev->sms <= 0 || dev->tile_rows <= 0 || dev->tile_cols <= 0 || rows < 1 || cols < 1 ||
      count < 1)
    return 1.0;
  double best = 0; /* the tile in either orientation, whichever wastes less */
  for (int turn = 0; turn < 2; turn++) {
    double tr = turn ? dev->tile_cols : dev->tile_rows, tc = turn ? dev->tile_rows : dev->tile_cols;
    double waves = ceil(count * ceil(rows / tr) * ceil(cols / tc) / dev->sms);
    double q = waves * dev->sms * tr * tc / (count * rows * cols);
    if (turn == 0 || q < best) best = q;
  }
  return best;
}

double plan_gemm_quantization(const plan_device *dev, double rows, double cols) {
  return grouped_quantization(dev, rows, cols, 1);
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

/* One GEMM shape of a layer: `count` GEMMs of m tokens, in -> out wide, on one rank; `tiled`:
 * its passes pay the tile and wave quantization (all but the router: its output is E wide, and
 * a weight gradient that small over thousands of tokens is split over them (split-K) rather
 * than left to one wave of a few tiles; it is charged its FLOPs or its traffic). */
typedef struct {
  double m, in, out, count;
  int tiled;
} layer_gemm;

/* A layer's GEMMs on one rank with their token counts: the dense layer's four (layer_gemms) at
 * `tokens`; a mixture of experts' attention GEMMs at `tokens`, its router (C -> E, whole on
 * every TP rank, over all of the rank's tokens) and its experts' two per local expert at the
 * tokens routed to each. Balanced routing: the ep ranks of an expert group dispatch tokens x
 * top_k assignments each over the experts (each rank its sequence-parallel share with whole
 * experts, --expert-tp 1), so a local expert sees ep x dispatched x top_k / E tokens; there are
 * E / ep of them, their widths cut over the expert TP. */
static int layer_gemm_shapes(const mm_layout *l, double tokens, int moe, layer_gemm g[5]) {
  double in[4], out[4];
  layer_gemms(l, in, out);
  int n = 0;
  for (int i = 0; i < (moe ? 2 : 4); i++)
    g[n++] = (layer_gemm){tokens, in[i], out[i], 1, 1};
  if (moe) {
    double ep = l->ep > 0 ? l->ep : 1, etp = mm_expert_tp(l), C = l->hidden;
    double dispatched = etp == l->tp ? tokens : tokens / l->tp;
    double m = dispatched * ep * l->top_k / l->experts, local = l->experts / ep;
    double Fe = mm_expert_ffn_width(l) / etp;
    g[n++] = (layer_gemm){tokens, C, l->experts, 1, 0};
    g[n++] = (layer_gemm){m, C, (l->gated_mlp ? 2.0 : 1.0) * Fe, local, 1};
    g[n++] = (layer_gemm){m, Fe, C, local, 1};
  }
  return n;
}

/* The GEMMs g[first..n) of a layer: `forwards` forward passes and, with `backward`, the input
 * and weight gradients, each pass the longer of its FLOPs at `rate` (at its own quantization)
 * and its HBM traffic. */
static double gemm_passes_s(const plan_device *dev, const mm_layout *l, const layer_gemm *g,
                            int first, int n, int forwards, int backward, double rate) {
  double x = l->fp8 ? 1.0 : 2.0; /* an fp8 GEMM's operands (weights, the stored inputs) */
  /* the weight gradient's output: Megatron adds it into main_grad (read and written, its
   * dtype: fp32, or bf16 with a bf16 reduction), DeepSpeed into its bf16 gradients, FSDP
   * writes a bf16 one */
  double grad = l->framework == MM_FW_MEGATRON    ? 2.0 * mm_megatron_grad_bytes(l)
                : l->framework == MM_FW_DEEPSPEED ? 4.0
                                                  : 2.0;
  double bw = dev->hbm_bw > 0 ? dev->hbm_bw : INFINITY, t = 0;
  for (int i = first; i < n; i++) {
    double m = g[i].m, in = g[i].in, out = g[i].out, flops = 2.0 * m * in * out;
    if (m <= 0) continue;
    double c = g[i].count, q = g[i].tiled; /* experts' GEMMs are grouped: tiles share waves */
    double f = flops * (q ? grouped_quantization(dev, m, out, c) : 1) / rate,
           d = flops * (q ? grouped_quantization(dev, m, in, c) : 1) / rate,
           w = flops * (q ? grouped_quantization(dev, in, out, c) : 1) / rate;
    double f_bytes = x * in * out + x * m * in + 2.0 * m * out,
           d_bytes = x * in * out + x * m * out + 2.0 * m * in,
           w_bytes = x * m * in + x * m * out + grad * in * out;
    t += c * (forwards * fmax(f, f_bytes / bw) +
              backward * (fmax(d, d_bytes / bw) + fmax(w, w_bytes / bw)));
  }
  return t;
}

double plan_layer_gemm_s(const plan_device *dev, const mm_layout *l, double tokens, int forwards,
                         int moe, double rate) {
  if (!(rate > 0)) return 0;
  layer_gemm g[5];
  int n = layer_gemm_shapes(l, tokens, moe, g);
  return gemm_passes_s(dev, l, g, 0, n, forwards, 1, rate);
}

/* The MLP's GEMMs follow the attention's two (QKV, projection) in layer_gemm_shapes: a dense
 * block's fc1 and fc2, a mixture's router and its experts' two. */
double plan_layer_mlp_forward_s(const plan_device *dev, const mm_layout *l, double tokens, int moe,
                                double rate) {
  if (!(rate > 0)) return 0;
  layer_gemm g[5];
  int n = layer_gemm_shapes(l, tokens, moe, g);
  return gemm_passes_s(dev, l, g, 2, n, 1, 0, rate);
}

/* FlashAttention's rate at a length (the table above), interpolated in log2 of the length and
 * held at its ends outside 512..16K. */
static double flash_rate_at(double len) {
  static const double lg[] = {9, 10, 11, 12, 13, 14}; /* log2 of 512 .. 16384 */
  static const double tflops[] = {329, 390, 434, 458, 471, 477};
  double x = log2(len > 1 ? len : 1);
  if (x <= lg[0]) return tflops[0];
  for (int i = 1; i < 6; i++)
    if (x <= lg[i]) return tflops[i - 1] + (tflops[i] - tflops[i - 1]) * (x - lg[i - 1]);
  return tflops[5];
}

/* A sliding-window layer's attention work over a causal layer's, as FlashAttention does it: in
 * tiles of 128 queries by 128 keys (FlashAttention-2's forward tiles for heads of 64 and 128),
 * skipping the tiles its mask leaves empty and computing the partly masked ones whole. A causal
 * layer's query tile q (0-based, n of them) visits q + 1 key tiles; a sliding one min(q, k) + 1,
 * k = ceil((window - 1) / 128) tiles behind its own. GPT-OSS's window of 128 at 4096 positions:
 * 63 of 528 tiles, 0.119 (the pairs it attends to are 0.062 of the causal layer's: the tile
 * along the window's edge is computed whole). 1 where the window covers the sequence. */
double plan_sliding_window_share(const mm_layout *l) {
  const double tile = 128;
  double n = ceil((double)l->seq / tile), k = ceil((l->window - 1.0) / tile);
  if (l->window <= 0 || k >= n - 1) return 1.0;
  double causal = n * (n + 1) / 2, sliding = k * (k + 1) / 2 + (n - k) * (k + 1);
  return sliding / causal;
}

/* TransformerEngine's fused attention on Hopper is cuDNN's: TE has preferred it to
 * FlashAttention there since 1.6 (May 2024; transformer_engine/pytorch/attention/
 * dot_product_attention/utils.py: "Disabling FlashAttention to give FusedAttention preference on
 * Hopper+ for performance reasons"). Its rate, measured by NVIDIA: cudnn-frontend's
 * benchmark/sdpa_benchmark_training (commit 3929da2), results/h200_919_only_cudnn/
 * llama3.1_20260227_034703.csv: cuDNN 9.19 on an H200, bf16, causal ("top_left"), 64 query
 * heads of 128 and 8 K/V heads, batch 1. Its TFLOP/s count the pairs a causal kernel computes
 * (half of them) and the backward as 2.5 forwards; the planner counts every pair and the
 * backward as two forwards, so one forward and its backward, 3 F here, take
 * F / 2 / forward + 2.5 F / 2 / backward there. H100 SXM has the H200's SMs and clocks; the
 * kernel is bound by its math, not by the H200's faster memory. */
static const struct {
  double length, forward_tflops, backward_tflops;
} cudnn_hopper_causal[] = {
    {2048, 484, 370}, {4096, 591, 474}, {8192, 644, 541}, {16384, 673, 579}, {32768, 688, 581},
};

static double cudnn_rate_at(int i) {
  return 3.0e12 / (0.5 / cudnn_hopper_causal[i].forward_tflops +
                   1.25 / cudnn_hopper_causal[i].backward_tflops);
}

double plan_fused_attention_rate(const plan_device *dev, const mm_layout *l) {
  double head_dim =
      l->head_dim > 0 ? l->head_dim : (l->heads > 0 ? (double)l->hidden / l->heads : 0);
  /* only what was measured: Megatron-Core's layouts, a Hopper device, heads of 128 (a head of
   * 64 runs at about half the rate per FLOP in the same benchmark's GPT-OSS rows, whose sliding
   * window muddles how much: --attention-rate cudnn refuses them) */
  if (!dev->cudnn_attention || l->framework != MM_FW_MEGATRON || head_dim != 128) return 0;
  const int n = (int)(sizeof cudnn_hopper_causal / sizeof cudnn_hopper_causal[0]);
  double len = (double)l->seq / (l->cp > 0 ? l->cp : 1), x = log2(len > 1 ? len : 1);
  /* held at 32K above it; below 2K (not measured) FlashAttention's curve from the 2K rate */
  if (len >= cudnn_hopper_causal[n - 1].length) return cudnn_rate_at(n - 1);
  if (len <= cudnn_hopper_causal[0].length)
    return cudnn_rate_at(0) * flash_rate_at(len) / flash_rate_at(2048);
  for (int i = 1; i < n; i++)
    if (len <= cudnn_hopper_causal[i].length) {
      double x0 = log2(cudnn_hopper_causal[i - 1].length), x1 = log2(cudnn_hopper_causal[i].length);
      return cudnn_rate_at(i - 1) +
             (cudnn_rate_at(i) - cudnn_rate_at(i - 1)) * (x - x0) / (x1 - x0);
    }
  return cudnn_rate_at(n - 1);
}

/* The split (--attention-rate split, the default where cuDNN's rate applies): the device's
 * attention share was fit on published runs at 2K-8K (plan_model.c's device table), and at its
 * length it charges attention 2.3x cuDNN's kernel time. Published runs at 16K-128K positions
 * (bench/plan/published, Megatron-MoE-ModelZoo's Qwen3-235B) grow as the kernel does, not as the
 * share does: the time beyond the kernel does not grow with the length. So it is charged per
 * token each time the kernel runs over a rank's tokens (once a pass, cp times in context
 * parallelism's ring, one chunk of keys at a time), the share's excess at its own length: what
 * attention over `tokens` tokens costs there at the share less what it costs at the kernel's
 * rate. Where the chunk is the share's length the split is the share. Which work that time is
 * (element-wise work around the kernel, the ring's merging of partial outputs, the layout
 * changes TransformerEngine makes) no measurement here names; a traced Megatron-Core step
 * would. */
double plan_attention_rest_s(const plan_device *dev, const mm_layout *l, double tokens) {
  if (!(dev->attention_length > 0)) return 0;
  mm_layout at = *l;
  at.seq = (int)dev->attention_length;
  at.cp = 1;
  double kernel = plan_fused_attention_rate(dev, &at);
  double share = dev->peak_flops * dev->attention_efficiency;
  if (!(kernel > share) || !(share > 0)) return 0;
  return l->cp * plan_attention_flops(&at, tokens) * (1.0 / share - 1.0 / kernel);
}

double plan_attention_length_factor(const mm_layout *l, double at) {
  if (l->seq < 1) return 1.0;
  return flash_rate_at((double)l->seq / (l->cp > 0 ? l->cp : 1)) /
         flash_rate_at(at > 0 ? at : l->seq);
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
  double grad = l->framework == MM_FW_DEEPSPEED  ? 2.0
                : l->framework == MM_FW_MEGATRON ? mm_megatron_grad_bytes(l)
                                                 : 4.0;
  double copy = l->framework == MM_FW_FSDP ? 0.0 : 2.0;
  return updated * (12.0 + grad + 12.0 + copy) / dev->hbm_bw;
}
