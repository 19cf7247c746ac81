/*
 * model_flops.c — FLOPs per optimizer step (model_flops.h): the Kaplan/PaLM count
 * 6 x parameters x tokens plus attention's 12 x L x C x T per token, as the trainer's MFU and
 * the planner's both use it.
 */
#include "model_flops.h"

/* Weights, biases and LayerNorm parameters of one block (Q and the projection heads x head_dim
 * wide, K and V kv_heads x head_dim: memory_model.h's widths). */
static double block_params(const mm_layout *s) {
  double C = s->hidden, F = mm_ffn_width(s), A = mm_attention_width(s), KV = mm_kv_width(s);
  if (s->gated_mlp) /* SwiGLU: three F x C matrices, no biases (Llama) */
    return mm_attention_params(s) + 3.0 * C * F + 4.0 * C;
  return mm_attention_params(s) + 2.0 * C * F + 6.0 * C + A + 2.0 * KV + F;
}

/* Whether global layer `layer` is a mixture of experts (config.c: config_layer_is_moe). */
static int layer_is_moe(const mm_layout *s, int layer) {
  return s->experts > 0 && s->moe_every > 0 && (layer + 1) % s->moe_every == 0;
}

/* With experts, the parameters a token is multiplied with: per MoE layer the router
 * (E x C) and K expert MLPs instead of one, not all E — MFU counts the FLOPs a step
 * really needs (docs/metrics.md). */
double mf_flop_params(const mm_layout *s) {
  double C = s->hidden;
  double params = (double)s->vocab * C + (double)s->layers * block_params(s) + 2.0 * C;
  for (int k = 0; k < s->layers; k++) /* the router and top_k experts for the dense MLP */
    if (layer_is_moe(s, k))
      params += (double)s->experts * C + s->top_k * mm_mlp_params(s, mm_expert_ffn_width(s)) -
                mm_mlp_params(s, mm_ffn_width(s));
  return params;
}

/* Attention's QK^T and PV over the whole sequence, forward and backward, per token: 12 x layers
 * x the queries' width (heads x head_dim) x sequence. */
static double attention_flops_per_token(const mm_layout *s) {
  return 12.0 * s->layers * mm_attention_width(s) * s->seq;
}

double mf_model_flops_per_step(const mm_layout *s, double sequences) {
  double tokens = sequences * s->seq;
  return 6.0 * mf_flop_params(s) * tokens + attention_flops_per_token(s) * tokens;
}

double mf_hardware_flops_per_step(const mm_layout *s, double sequences) {
  double tokens = sequences * s->seq;
  double extra = 0;
  if (s->recompute == MM_RECOMPUTE_FULL)
    extra = 2.0 * s->layers * block_params(s) * tokens + attention_flops_per_token(s) / 3 * tokens;
  else if (s->recompute == MM_RECOMPUTE_SELECTIVE && s->cp <= 1)
    extra = attention_flops_per_token(s) / 3 * tokens;
  return mf_model_flops_per_step(s, sequences) + extra;
}
