/*
 * memory_model.h — the bundled trainer's per-rank memory, in closed form.
 *
 * What it is for: ONE implementation of the memory formulas, used both by stepscope-train
 * (the predicted breakdown it writes into its trace's "memory" metadata) and by the planner
 * (`stepscope plan`), which predicts every layout of a model without allocating anything.
 * The formulas follow what the trainer allocates through its device API, buffer by buffer
 * (model.c: parameters, gradients, per-slot activations, recomputation scratch, backward
 * scratch, ring attention blocks; train.c and grad_sync.c: AdamW moments, ZeRO shards and bucket
 * buffers), so that the prediction can be checked exactly against the device API's own peak of live
 * allocations (tests/trainer: trainer.memory_model), and per component they reduce to the
 * Ultra-Scale Playbook's formulas (fp32 master weights: 4 bytes per parameter for the
 * weights, 4 for the gradients, 8 for the two Adam moments; divided per ZeRO stage;
 * activations per layer and micro-batch in flight, less with recomputation).
 *
 * It depends on nothing but the C library: the analyzer links it for the planner.
 */
#ifndef STEPSCOPE_TRAINER_MEMORY_MODEL_H
#define STEPSCOPE_TRAINER_MEMORY_MODEL_H

#include <stddef.h>

typedef enum { MM_SCHED_AFAB = 0, MM_SCHED_1F1B = 1, MM_SCHED_INTERLEAVED = 2 } mm_schedule;
/* Whose conventions the memory follows: 0, the bundled trainer's (the formulas of this file,
 * exact against its device API; stepscope-cpu / stepscope-cuda differ only in act_bytes and
 * bf16_weight_copies), or a real framework's (framework_memory.c, docs/plan.md). */
typedef enum {
  MM_FW_STEPSCOPE = 0,
  MM_FW_MEGATRON = 1,
  MM_FW_FSDP = 2,
  MM_FW_DEEPSPEED = 3
} mm_framework;

typedef enum {
  MM_RECOMPUTE_NONE = 0,
  MM_RECOMPUTE_SELECTIVE = 1,
  MM_RECOMPUTE_FULL = 2
} mm_recompute;

/* What selective recomputation recomputes under Megatron-Core (--recompute-modules;
 * megatron/core/transformer/transformer_config.py recompute_modules): a bit set of these; 0 is
 * the attention core alone, every framework's selective recomputation (Korthikanti et al.). */
typedef enum {
  MM_RC_CORE_ATTN = 1 << 0, /* the attention core (QK^T, softmax, PV) */
  MM_RC_LAYERNORM = 1 << 1, /* the input and pre-MLP LayerNorms' outputs */
  MM_RC_MLP = 1 << 2,       /* a dense block's MLP */
  MM_RC_MOE_ACT = 1 << 3,   /* the experts' activation function (its output, fc2's input) */
  MM_RC_MOE = 1 << 4        /* the whole mixture of experts: router, exchange, experts */
} mm_recompute_module;
#define MM_RC_MODULES 5

/* A model and its parallel layout, as stepscope-train takes them (config.h). */
typedef struct mm_layout {
  int layers, hidden, heads, vocab; /* vocab: the real one (padded to 64 inside) */
  int ffn;                          /* MLP width; 0: 4 x hidden (the trainer's) */
  int max_seq;                      /* position table rows (1024 for the GPT-2 presets) */
  int seq;                          /* sequence length trained */
  int dp, tp, pp, cp, sp;           /* sp: sequence parallelism inside TP (tp > 1) */
  mm_schedule schedule;
  int virtual_stages; /* interleaved: chunks per pipeline rank; else 1 */
  int microbatches;   /* per DP rank and step */
  int micro_batch;    /* sequences per micro-batch */
  int zero;           /* 0..3 */
  mm_recompute recompute;
  int act_bytes;          /* activation storage: 4 (fp32) or 2 (bf16) */
  double bucket_mb;       /* DP gradient bucket size */
  int bf16_weight_copies; /* the CUDA backend in bf16 precision keeps a bf16 copy of
                             every weight its GEMMs multiply (2 bytes per GEMM weight:
                             qkv, projections, MLP, router, the LM head's table; not
                             LayerNorms, biases, the position table, experts); the CPU
                             backend none */
  int fused_attention;    /* the CUDA backend's fused attention runs this shape (the
                             trainer: dev_attention_fused; the planner:
                             mm_fused_attention_supported): per block it saves each row's
                             log-sum-exp and output instead of the T x T probabilities,
                             and there are no T x T scratch buffers */
  int gemm_weights_bf16;  /* the trainer's --gemm-weights bf16 (a run's "gemm_weights"): the
                             model keeps the bf16 working copy of its GEMM weights (counted
                             through bf16_weight_copies) */
  /* mixture of experts (0 experts: dense; zero-initialized layouts stay dense): every
   * moe_every-th block (layers moe_every-1, 2 moe_every-1, ...) has `experts` expert MLPs,
   * top_k per token, sharded over ep ranks of DP (moe.h, expert_parallel.h) */
  int experts, top_k, moe_every, ep;
  /* a real framework's expert tensor parallelism (Megatron-Core's
   * --expert-tensor-parallel-size): 0 or tp, each expert cut over the TP group and EP carved
   * out of dp (the trainer's, and Megatron's default); 1, each expert whole on a rank and the
   * EP group folded into the tp x cp x dp ranks of a stage (MoE parallel folding) */
  int expert_tp;
  /* a real framework's conventions (0: the trainer's); the model as real ones are (all 0 in the
   * trainer's layouts, which have none of them): kv_heads (GQA; 0 = heads), gated_mlp (SwiGLU:
   * three F x C matrices, no biases), untied (a separate LM head), rope (no position table) */
  int framework;
  int kv_heads, gated_mlp, untied, rope;
  /* a framework's model as real ones are, continued: head_dim, a head's width where heads x it
   * is not the hidden size (Qwen3: 64 heads of 128 on 4096; 0 = hidden / heads); moe_ffn, an
   * expert's MLP width where it is not the dense one's (0 = ffn) */
  int head_dim, moe_ffn;
  int unfused_attention; /* a framework's attention without a flash kernel (s x s stored) */
  /* a framework's model trained without dropout (probability 0: Llama, Mixtral, Qwen3, GPT-OSS,
   * MPT as their recipes run them): no dropout masks stored, since torch's dropout at p = 0
   * returns its input (aten/src/ATen/native/Dropout.cpp); 0: Megatron's default, 0.1, masks
   * stored (framework_memory.c) */
  int no_dropout;
  /* FSDP's hybrid sharding (HYBRID_SHARD with --zero 3, _HYBRID_SHARD_ZERO2 with --zero 2):
   * the states are sharded over groups of this many ranks of the DP x CP group (a node's) and
   * replicated across the groups; 0: sharded over the whole DP x CP group */
  int shard_group;
  /* Megatron's gradient buffer (main_grad): bytes an element, its dtype the reduction's
   * (DistributedDataParallelConfig.grad_reduce_in_fp32: fp32 4, else the parameters' bf16 2;
   * Megatron-LM's --bf16 turns fp32 on, Megatron-Bridge's performance recipes turn it off);
   * 0: 4 */
  int grad_bytes;
  /* a framework's GEMMs in fp8 (--precision fp8): under TransformerEngine (megatron, deepspeed)
   * each GEMM's input saved for the backward quantized, 1 byte an element; torchao's (fsdp)
   * saves bf16 (framework_memory.c) */
  int fp8;
  /* sliding-window attention (0: none): a query of a sliding layer attends to the `window` most
   * recent positions, itself included (GPT-OSS: 128; Megatron-Core's window_size (window - 1,
   * 0)); every full_attention_every-th layer (1-based: layers N, 2N, ...) attends to the whole
   * sequence (Megatron-Core's window_attn_skip_freq; GPT-OSS: 2, alternating; 0: every layer
   * sliding). FLOPs and time only: FlashAttention stores the same per query either way. */
  int window, full_attention_every;
  /* with MM_RECOMPUTE_SELECTIVE: mm_recompute_module bits, what it recomputes (0: the attention
   * core alone) */
  int recompute_modules;
} mm_layout;

/* One rank's device memory in bytes, by component (every field a sum of allocations). */
typedef struct mm_breakdown {
  size_t parameters;  /* fp32 weights (ZeRO-3: the shard and two gathered buckets), plus
                         the GEMM weights' bf16 copies when bf16_weight_copies */
  size_t gradients;   /* fp32 gradients (ZeRO-2/3: the shard and the bucket buffers) */
  size_t optimizer;   /* AdamW moments m and v, fp32, sharded from ZeRO-1 on */
  size_t activations; /* stored activations of the micro-batches in flight + scratch */
  size_t other;       /* small optimizer statistics */
  size_t steady;      /* the sum of the above: what the rank holds while it trains */
  size_t init_peak;   /* what set-up holds at most: = steady for the trainer (ZeRO-3 draws
                         its shards directly), a framework may differ */
  size_t peak;        /* max(steady, init_peak): the device API's peak of live bytes */
} mm_breakdown;

/* Whether the CUDA backend's fused attention kernels take a shape (B sequences of T, per TP
 * rank C wide with NH heads): kernels/cuda/flash_attention.cu's kcuda_attention_fused_supported,
 * for the planner, which has no device to ask. */
int mm_fused_attention_supported(int B, int T, int C, int NH);

/* The padded vocabulary (a multiple of 64), as the trainer lays out its embeddings. */
int mm_padded_vocab(int vocab);

/* The micro-batches whose activations pipeline rank `stage` keeps at once (slots). */
int mm_slots(const mm_layout *l, int stage);

/* Rank memory of pipeline rank `stage` (0..pp-1; every DP/TP/CP rank of a stage holds the
 * same). Returns 0, or -1 with a reason in err when the layout is not one the trainer runs. */
int mm_rank_memory(const mm_layout *l, int stage, mm_breakdown *out, char *err, size_t errlen);

/* A real framework's rank memory (framework_memory.c; l->framework != MM_FW_STEPSCOPE):
 * mm_rank_memory calls it for such layouts. */
int mm_framework_rank_memory(const mm_layout *l, int stage, mm_breakdown *out, char *err,
                             size_t errlen);

/* A real framework's parameters on pipeline rank `stage` of one TP rank (Psi of docs/plan.md:
 * its blocks, and the tables and heads it holds). */
double mm_framework_stage_params(const mm_layout *l, int stage);

/* The experts' part of it: the rank's E / ep experts of each mixture-of-experts block on the
 * stage. Their states are sharded over the expert data-parallel group (dp x cp / ep), not the
 * whole DP x CP group. */
double mm_framework_stage_expert_params(const mm_layout *l, int stage);

/* A ZeRO-sharded state's parameters on one rank of the stage: the dense ones over the DP x CP
 * group (or FSDP's hybrid shard group, n), an expert's only over the ranks that hold that
 * expert, n x tp / (expert tp x ep) (Megatron's expert data-parallel group, DeepSpeed-MoE's
 * expert_data_parallel_group): psi / n without experts. */
double mm_framework_stage_shard(const mm_layout *l, int stage);
/* Bytes of an element of Megatron's main_grad (its reduction's dtype: l->grad_bytes, else fp32's
 * 4); the memory model's gradients, and what the planner's optimizer step and weight-gradient
 * GEMMs read and write. */
double mm_megatron_grad_bytes(const mm_layout *l);

/* The attention's widths (whole, before TP): the queries' and the output projection's,
 * heads x head_dim (the hidden size without head_dim), and K's or V's, kv_heads x head_dim. */
double mm_attention_width(const mm_layout *l);
double mm_kv_width(const mm_layout *l);

/* The attention's weights, whole (before any cut): Q and the output projection C x heads x
 * head_dim each, K and V C x kv_heads x head_dim each. */
double mm_attention_params(const mm_layout *l);

/* A MLP's width: the dense blocks' (ffn, 4 x hidden without it), and an expert's (moe_ffn, or
 * the dense one). */
double mm_ffn_width(const mm_layout *l);
double mm_expert_ffn_width(const mm_layout *l);

/* One MLP's weights and biases, F wide, whole (before any cut): 3CF for SwiGLU, 2CF + F + C. */
double mm_mlp_params(const mm_layout *l, double F);

/* The ranks one expert is cut over: l->expert_tp, or tp when 0. */
int mm_expert_tp(const mm_layout *l);

/* A real framework's stored activations of one layer and micro-batch, in bytes (Korthikanti et
 * al. 2022 with flash attention; docs/plan.md "Frameworks"). */
double mm_framework_layer_activations(const mm_layout *l);
/* Of those, the bytes selective recomputation does not store but recomputes in backward
 * (l->recompute_modules; 0 unless MM_RECOMPUTE_SELECTIVE): with flash attention the attention
 * core's are none (the kernel keeps only its log-sum-exp); without it, the s x s scores. */
double mm_framework_recomputed_activations(const mm_layout *l);
/* The modules selective recomputation recomputes: l->recompute_modules, or the attention core
 * when none are named. */
int mm_recompute_modules(const mm_layout *l);
/* Whether layout l runs `module` (one MM_RC_* bit) forward again in backward: every module
 * under full recomputation, the named ones (mm_recompute_modules) under selective, none
 * without recomputation. */
int mm_recomputes(const mm_layout *l, int module);

/* The transformer blocks pipeline rank `stage` holds (every chunk together): layers / pp, or
 * with a real framework and layers not divisible by the model chunks (pp, or pp x v when
 * interleaved), ceil(layers / chunks) per chunk and one fewer on the first, the last, the
 * second, the second last, ... chunk in turn (Llama 3's balancing of the embedding and the LM
 * head: 126 layers on 16 stages are 7, 8 x 14, 7; interleaved with v = 4, chunks of 2 but 1 on
 * the first and the last). */
int mm_stage_layers(const mm_layout *l, int stage);
/* Whether the layers divide evenly over the model chunks (pp x v). */
int mm_stages_even(const mm_layout *l);
/* Whether the layers can be laid out on the model chunks: evenly, or (a framework, not the
 * trainer) unevenly with every chunk keeping a block. */
int mm_stages_valid(const mm_layout *l);

/* The first pipeline rank holding the most blocks (0 when the stages are even). */
int mm_fullest_stage(const mm_layout *l);

/* The stage with the largest peak, and its breakdown. */
int mm_max_memory(const mm_layout *l, mm_breakdown *out, int *stage, char *err, size_t errlen);

#endif /* STEPSCOPE_TRAINER_MEMORY_MODEL_H */
