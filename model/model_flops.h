/*
 * model_flops.h — the FLOPs of one optimizer step of the bundled GPT model: the numerator of
 * the trainer's MFU and HFU (its "flops" metadata, docs/metrics.md) and of the planner's MFU
 * (`stepscope plan`). One implementation, in the stepscope_model_math library (C library
 * only), so that a run and its prediction count the same work.
 */
#ifndef STEPSCOPE_TRAINER_MODEL_FLOPS_H
#define STEPSCOPE_TRAINER_MODEL_FLOPS_H

#include "memory_model.h"

/* Parameters behind the FLOPs: all of them but the position embedding, a lookup that does no
 * multiply-add (nanoGPT's estimate_mfu leaves it out the same way; the token embedding stays
 * because, tied, it is the LM head's matmul). Per block 4C^2 + 2CF weights and 9C + F
 * biases and LayerNorm parameters, the final LayerNorm's 2C, the V x C embedding (the real
 * vocabulary, not the padded one). Reads layers, hidden, ffn (0: 4 x hidden), vocab. */
double mf_flop_params(const mm_layout *shape);

/* Model FLOPs of one step of `sequences` sequences of shape->seq tokens: 6 x flop params x
 * tokens + 12 x layers x hidden x seq x tokens (attention's QK^T and PV, forward and
 * backward; a framework's model with head_dim: heads x head_dim for hidden). With experts the
 * params count the router and top_k experts (moe_ffn wide) for each MoE block's MLP. */
double mf_model_flops_per_step(const mm_layout *shape, double sequences);

/* Hardware FLOPs: the model's plus what recomputation does again (shape->recompute): full
 * recomputation one more forward of the blocks (not the LM head, the embeddings or the final
 * LayerNorm), selective the attention matrix's forward (not with context parallelism, whose
 * ring attention keeps no matrix: shape->cp > 1). */
double mf_hardware_flops_per_step(const mm_layout *shape, double sequences);

#endif /* STEPSCOPE_TRAINER_MODEL_FLOPS_H */
