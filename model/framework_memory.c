/*
 * framework_memory.c — a rank's device memory under a real framework's conventions (Megatron-LM,
 * PyTorch FSDP, DeepSpeed ZeRO), in closed form, for the planner (memory_model.h:
 * mm_framework_rank_memory; docs/plan.md "Frameworks" names every convention and its source).
 *
 * Model states per parameter held by the rank (psi: the parameters of its stage on its TP rank;
 * n: the ranks the state is sharded over, dp x cp, or FSDP's hybrid shard group):
 *   megatron:  bf16 parameters 2, fp32 gradients 4 (main_grad), fp32 master + Adam m, v 12:
 *              18 bytes; ZeRO-1 = the distributed optimizer, 6 + 12/n (Megatron-LM
 *              docs/user-guide/features/dist_optimizer.md); ZeRO-2/3 refused (not Megatron's).
 *              main_grad has the reduction's dtype (param_and_grad_buffer.py: fp32 with
 *              grad_reduce_in_fp32, else the parameters'): 2 with a bf16 reduction. With fp8
 *              parameters (fp8_param_gather) a weight is its fp8 data and, for the backward on
 *              Hopper, its fp8 transpose: 2 bytes, as bf16's.
 *   deepspeed: the ZeRO paper (Rajbhandari et al. 2020, sec. 3-5), bf16 parameters and
 *              gradients: ZeRO-0 16, ZeRO-1 4 + 12/n, ZeRO-2 2 + 14/n, ZeRO-3 16/n; ZeRO-3 also
 *              holds the gathered bf16 parameters of the block in use and of the one prefetched.
 *   fsdp:      ZeRO-0 = DDP under autocast (fp32 parameters and gradients, Adam 8: 16);
 *              no ZeRO-1 (FSDP has no optimizer-only sharding); ZeRO-2 = SHARD_GRAD_OP: fp32 shards
 *              16/n plus the bf16 parameters kept unsharded from forward to backward (2);
 *              ZeRO-3 = FULL_SHARD: 16/n plus, at the peak, two blocks unsharded (the one
 *              computing and the one prefetched), their bf16 parameters and gradients.
 * Activations (Korthikanti et al. 2022, sec. 4, bytes per layer and micro-batch with s tokens of b
 * sequences, hidden h, TP t): 10 sbh replicated over TP (LayerNorm inputs 4, QKV and MLP inputs
 * 2 + 2, two dropout masks 2, none without dropout; divided by t with sequence parallelism) and
 * 24 sbh / t sharded (Q, K 4, V 2, projection input 2, the MLP's two 4h-wide tensors 16); with GQA
 * K and V shrink by kv/heads, a gated MLP keeps three F-wide tensors (a mixture of experts top_k
 * times each, and top_k copies of its permuted input); fused/flash attention keeps no s x s matrix
 * (the paper's 5as/h term is gone; selective recomputation then saves nothing), only its fp32
 * log-sum-exp (4 a s b / t); --attention unfused (Megatron before FlashAttention) keeps the
 * 5 a s^2 b / t of softmax and dropout (2 a s^2 b / t, the softmax output, without dropout) unless
 * selective or full recomputation drops it. Full recomputation keeps each layer's input
 * (2 sbh, / t with SP) and one layer's activations while it is recomputed. A stage keeps the
 * micro-batches its schedule has in flight: AFAB M, 1F1B min(p - stage, M), Megatron's interleaved
 * schedule 2 (p - stage - 1) + (v - 1) p + 1 model chunks (Narayanan et al. 2021, sec. 2.2;
 * Korthikanti et al.'s L (1 + (p-1)/(pv)) layers on the first stage). The last stage also holds
 * one micro-batch's logits, vocabulary-parallel: bf16 and the fp32 copy of the cross entropy,
 * 6 sbV / t.
 * fp8 GEMMs (TransformerEngine's Linear and LayerNormLinear save the input they quantized for
 * the forward GEMM: the backward's weight gradient reads it): the QKV and MLP inputs (the
 * LayerNorms' outputs) and the second MLP GEMM's input take 1 byte an element; the attention's
 * output stays bf16 (flash attention saves it, and Megatron-Core has linear_proj save that
 * original input for fp8 recipes other than delayed scaling, attention.py).
 */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "memory_model.h"
#include "model_config.h"

/* Virtual stages (model chunks) of the layout: pp, or pp x v with the interleaved schedule. */
static int virtual_stages(const mm_layout *l) {
  int V = l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1 ? l->virtual_stages : 1;
  return l->pp * V;
}

/* Blocks of virtual stage j (chunk j / pp of pipeline rank j % pp) of P: ceil(layers / P), one
 * fewer on the first, the last, the second, the second last, ... virtual stage in turn until
 * they add up to the layers. */
static int chunk_layers(const mm_layout *l, int j, int P) {
  int base = (l->layers + P - 1) / P, fewer = base * P - l->layers;
  int from_end = P - 1 - j, order = j <= from_end ? 2 * j : 2 * from_end + 1;
  return base - (order < fewer ? 1 : 0);
}

int mm_stages_even(const mm_layout *l) {
  return l->layers % virtual_stages(l) == 0;
}

int mm_stages_valid(const mm_layout *l) {
  int P = virtual_stages(l);
  if (mm_stages_even(l)) return l->layers >= P;
  /* uneven: a framework's, and every chunk keeps a block */
  return l->framework != MM_FW_STEPSCOPE && (l->layers + P - 1) / P >= 2;
}

int mm_stage_layers(const mm_layout *l, int stage) {
  int P = virtual_stages(l);
  if (l->framework == MM_FW_STEPSCOPE || mm_stages_even(l)) return l->layers / l->pp;
  int n = 0;
  for (int j = stage; j < P; j += l->pp)
    n += chunk_layers(l, j, P);
  return n;
}

int mm_fullest_stage(const mm_layout *l) {
  int best = 0, most = mm_stage_layers(l, 0);
  for (int s = 1; s < l->pp; s++) {
    int n = mm_stage_layers(l, s);
    if (n > most) {
      most = n;
      best = s;
    }
  }
  return best;
}

double mm_ffn_width(const mm_layout *l) {
  return l->ffn > 0 ? l->ffn : 4.0 * l->hidden;
}

double mm_expert_ffn_width(const mm_layout *l) {
  return l->moe_ffn > 0 ? l->moe_ffn : mm_ffn_width(l);
}

double mm_attention_width(const mm_layout *l) {
  return l->head_dim > 0 ? (double)l->heads * l->head_dim : l->hidden;
}

double mm_kv_width(const mm_layout *l) {
  double kv = l->kv_heads > 0 ? (double)l->kv_heads / l->heads : 1.0; /* GQA: K, V narrower */
  return mm_attention_width(l) * kv;
}

double mm_attention_params(const mm_layout *l) {
  return 2.0 * l->hidden * mm_attention_width(l) + 2.0 * l->hidden * mm_kv_width(l);
}

/* One block's parameters on a TP rank: the attention (Q and the projection heads x head_dim
 * wide, K and V kv_heads x head_dim) and MLP matrices and biases cut over TP, the two
 * LayerNorms whole. */
static double block_params(const mm_layout *l) {
  double C = l->hidden, F = mm_ffn_width(l), A = mm_attention_width(l), KV = mm_kv_width(l);
  double attention = mm_attention_params(l);
  double mlp = (l->gated_mlp ? 3.0 : 2.0) * C * F;
  double biases = l->gated_mlp ? 0 : A + 2.0 * KV + C + F + C;
  return (attention + mlp + biases) / l->tp + 4.0 * C;
}

/* The vocabulary as Megatron pads it: a multiple of 128 x tp. */
static double padded_vocab(const mm_layout *l) {
  long unit = 128L * l->tp;
  return (double)((l->vocab + unit - 1) / unit * unit);
}

/* Whether global layer `layer` is a mixture of experts (every moe_every-th, as the trainer's). */
static int layer_is_moe(const mm_layout *l, int layer) {
  return l->experts > 0 && l->moe_every > 0 && (layer + 1) % l->moe_every == 0;
}

double mm_megatron_grad_bytes(const mm_layout *l) {
  return l->grad_bytes > 0 ? l->grad_bytes : 4.0;
}

int mm_expert_tp(const mm_layout *l) {
  return l->expert_tp > 0 ? l->expert_tp : l->tp;
}

double mm_mlp_params(const mm_layout *l, double F) {
  double C = l->hidden;
  return (l->gated_mlp ? 3.0 : 2.0) * C * F + (l->gated_mlp ? 0 : F + C);
}

/* The rank's E / ep experts of one mixture-of-experts block, each an MLP moe_ffn wide cut over
 * the expert TP ranks (TP, or whole with Megatron's --expert-tensor-parallel-size 1). */
static double moe_expert_params(const mm_layout *l) {
  double ep = l->ep > 0 ? l->ep : 1;
  return l->experts / ep * mm_mlp_params(l, mm_expert_ffn_width(l)) / mm_expert_tp(l);
}

/* A mixture-of-experts block on a TP rank: the dense block's attention and norms, the router
 * (E x C, whole) and the rank's experts instead of the dense MLP. */
static double moe_block_params(const mm_layout *l) {
  return block_params(l) - mm_mlp_params(l, mm_ffn_width(l)) / l->tp +
         (double)l->experts * l->hidden + moe_expert_params(l);
}

double mm_framework_stage_expert_params(const mm_layout *l, int stage) {
  int first = 0;
  double p = 0;
  for (int s = 0; s < stage; s++)
    first += mm_stage_layers(l, s);
  for (int k = 0; k < mm_stage_layers(l, stage); k++)
    p += layer_is_moe(l, first + k) ? moe_expert_params(l) : 0;
  return p;
}

double mm_framework_stage_shard(const mm_layout *l, int stage) {
  double n = l->shard_group > 0 ? (double)l->shard_group : (double)l->dp * l->cp;
  double experts = mm_framework_stage_expert_params(l, stage);
  double n_experts = fmax(1.0, n * l->tp / mm_expert_tp(l) / (l->ep > 0 ? l->ep : 1));
  return (mm_framework_stage_params(l, stage) - experts) / n + experts / n_experts;
}

double mm_framework_stage_params(const mm_layout *l, int stage) {
  double C = l->hidden, table = padded_vocab(l) * C / l->tp, p = 0;
  int first = 0;
  for (int s = 0; s < stage; s++)
    first += mm_stage_layers(l, s);
  for (int k = 0; k < mm_stage_layers(l, stage); k++)
    p += layer_is_moe(l, first + k) ? moe_block_params(l) : block_params(l);
  if (stage == 0) p += table + (l->rope ? 0 : (double)l->max_seq * C);
  if (stage == l->pp - 1) p += 2.0 * C + (l->pp > 1 || l->untied ? table : 0);
  return p;
}

int mm_recompute_modules(const mm_layout *l) {
  return l->recompute_modules ? l->recompute_modules : MM_RC_CORE_ATTN;
}

int mm_recomputes(const mm_layout *l, int module) {
  if (l->recompute == MM_RECOMPUTE_FULL) return 1;
  return l->recompute == MM_RECOMPUTE_SELECTIVE && (mm_recompute_modules(l) & module) != 0;
}

/* One layer's activations for one micro-batch by what stores them (Korthikanti et al.), in
 * bytes, before any recomputation. */
typedef struct {
  double layernorm_outputs; /* the QKV and MLP GEMMs' inputs (the two LayerNorms' outputs) */
  double other_replicated;  /* the LayerNorms' inputs, the dropout masks (if any) */
  double attention;         /* Q, K, V, the attention's output (heads x head_dim wide) */
  double mlp;               /* the MLP's (a mixture's routed copies): fc1's output, the
                               activation's output (fc2's input) */
  double activation_output; /* of which the activation's output */
  double expert_inputs;     /* a mixture's permuted inputs to its first expert GEMM */
  double scores;            /* without a flash kernel, the s x s softmax, mask and output */
  double lse;               /* with one, its fp32 log-sum-exp */
  int moe;                  /* the blocks are mixtures of experts */
} layer_activations;

static layer_activations activations_of(const mm_layout *l) {
  layer_activations a;
  double s = (double)l->seq / l->cp, b = l->micro_batch, h = l->hidden, t = l->tp;
  double sbh = s * b * h, rep = l->sp && l->tp > 1 ? t : 1.0;
  /* a mixture of experts keeps the MLP's tensors of every token once per expert it goes to
   * (every block of the layout taken as one: the MLP tensors x top_k when all are MoE) */
  a.moe = l->experts > 0 && l->moe_every == 1;
  double routed = a.moe ? l->top_k : 1.0;
  double width = a.moe ? mm_expert_ffn_width(l) : mm_ffn_width(l);
  /* the activation's input (a gated one's two halves) and output, the second GEMM's input; in
   * fp8 that output is kept quantized, 1 byte (TransformerEngine's Linear saves its quantized
   * input for the weight gradient: Megatron's and DeepSpeed's fp8); FSDP's fp8 is torchao's
   * Float8Linear (torchtitan's), which saves the bf16 input and casts it again in backward */
  double gemm_input = l->fp8 && l->framework != MM_FW_FSDP ? 1.0 : 2.0;
  a.mlp = ((l->gated_mlp ? 4.0 : 2.0) + gemm_input) * width / h * routed * sbh / t;
  a.activation_output = gemm_input * width / h * routed * sbh / t;
  /* Q and the attention's output (heads x head_dim wide), K and V (kv_heads x head_dim) */
  a.attention = (4.0 * mm_attention_width(l) / h + 4.0 * mm_kv_width(l) / h) * sbh / t;
  a.lse = 4.0 * l->heads * s * b / t; /* flash attention's log-sum-exp, fp32 */
  /* without a flash kernel: the softmax output, its dropout mask and output, 5 a s^2 b / t; the
   * softmax output alone without dropout (it is the PV GEMM's input) */
  a.scores = l->unfused_attention ? (l->no_dropout ? 2.0 : 5.0) * l->heads * s * s * b / t : 0.0;
  /* replicated: LayerNorm inputs 4, the QKV and MLP GEMMs' inputs 2 + 2 (in fp8 1 + 1: the
   * LayerNorms' outputs quantized), dropout masks 2 (1 byte an element: the attention
   * projection's and the MLP's outputs; none at probability 0); the attention's output stays
   * bf16 in fp8 (Megatron-Core sets save_original_input on linear_proj for fp8 recipes other
   * than delayed scaling: flash attention keeps it already) */
  a.layernorm_outputs = 2.0 * gemm_input * sbh / rep;
  a.other_replicated = (l->no_dropout ? 4.0 : 6.0) * sbh / rep;
  /* a mixture of experts' first expert GEMM reads its permuted input for its weight gradient:
   * top_k copies of each token (hidden wide; 1 byte in fp8), on every rank of an expert cut
   * over TP (the TP group gathers the routed tokens), a tp-th of them with whole experts */
  a.expert_inputs = a.moe ? routed * gemm_input / (mm_expert_tp(l) == l->tp ? 1.0 : t) * sbh : 0.0;
  return a;
}

/* Of a's bytes, those selective recomputation's modules recompute (0 unless selective). */
static double recomputed_of(const mm_layout *l, const layer_activations *a) {
  if (l->recompute != MM_RECOMPUTE_SELECTIVE) return 0;
  int m = mm_recompute_modules(l);
  double r = 0;
  if (m & MM_RC_CORE_ATTN) r += a->scores; /* flash attention: nothing but its lse, kept */
  if (m & MM_RC_LAYERNORM) r += a->layernorm_outputs;
  if (a->moe && (m & MM_RC_MOE)) /* the MoE's input (the pre-MLP LayerNorm's output) stays */
    r += a->mlp + a->expert_inputs;
  else if (a->moe && (m & MM_RC_MOE_ACT))
    r += a->activation_output;
  else if (!a->moe && (m & MM_RC_MLP))
    r += a->mlp;
  return r;
}

double mm_framework_recomputed_activations(const mm_layout *l) {
  layer_activations a = activations_of(l);
  return recomputed_of(l, &a);
}

/* Bytes of one layer's stored activations for one micro-batch (Korthikanti et al.): all of
 * them (full recomputation keeps each layer's input instead, and one layer's while it is
 * recomputed: mm_framework_rank_memory), less what selective recomputation recomputes. */
double mm_framework_layer_activations(const mm_layout *l) {
  layer_activations a = activations_of(l);
  double stored = a.layernorm_outputs + a.other_replicated + a.attention + a.mlp + a.expert_inputs +
                  (l->unfused_attention ? a.scores : a.lse);
  if (l->recompute == MM_RECOMPUTE_SELECTIVE) return stored - recomputed_of(l, &a);
  if (l->recompute == MM_RECOMPUTE_FULL) return stored - a.scores; /* the layer recomputed */
  return stored;
}

/* Model chunks' micro-batches in flight on `stage`, in units of the stage's layers. */
static double layers_in_flight(const mm_layout *l, int stage, int layers) {
  int M = l->microbatches, p = l->pp;
  if (p == 1) return layers;
  if (l->schedule == MM_SCHED_AFAB) return (double)M * layers;
  if (l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1) {
    int V = l->virtual_stages, chunks = 2 * (p - stage - 1) + (V - 1) * p + 1;
    if (chunks > M * V) chunks = M * V;
    return (double)chunks * layers / V;
  }
  int inflight = p - stage < M ? p - stage : M;
  return (double)inflight * layers;
}

/* Whether the framework has the layout's ZeRO stage and pipeline schedule at all (docs/plan.md
 * "Frameworks: what each can run"; the sweep offers only what the framework runs):
 *   megatron:  ZeRO-0, or ZeRO-1 as its distributed optimizer (Megatron-FSDP's ZeRO-2/3-like
 *              strategies are not modelled); schedules: no pipelining, 1F1B, interleaved 1F1B
 *              (megatron/core/pipeline_parallel/schedules.py: get_forward_backward_func), no
 *              all-forward-all-backward;
 *   fsdp:      torch.distributed.fsdp.ShardingStrategy: NO_SHARD (ZeRO-0), SHARD_GRAD_OP
 *              (ZeRO-2), FULL_SHARD (ZeRO-3), and their hybrid forms (_HYBRID_SHARD_ZERO2,
 *              HYBRID_SHARD: sharded over shard_group ranks, replicated across the groups);
 *              nothing shards the optimizer states alone; the
 *              pipeline schedules of torch.distributed.pipelining (GPipe, 1F1B, interleaved);
 *   deepspeed: ZeRO-0 to 3, but with pipeline parallelism only ZeRO-0/1 (PipelineEngine asserts
 *              "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism") and one schedule,
 *              TrainSchedule's 1F1B (deepspeed/runtime/pipe/schedule.py), not interleaved; no
 *              ring context parallelism: its sequence parallelism is Ulysses (an all-to-all
 *              that trades the sequence for the heads, Megatron-DeepSpeed's
 *              --ds-sequence-parallel-size), which the planner does not model. */
static int framework_cannot_run(const mm_layout *l, char *err, size_t errlen) {
  const char *why = NULL;
  int pipelined = l->pp > 1;
  int schedule = 0, context = 0; /* the refusal is the schedule's or CP's, not ZeRO's */
  if (l->framework == MM_FW_MEGATRON && l->zero >= 2)
    why = "Megatron-LM shards the optimizer (ZeRO-1, its distributed optimizer), not more: "
          "--framework fsdp or deepspeed";
  else if (l->framework == MM_FW_MEGATRON && pipelined && l->schedule == MM_SCHED_AFAB) {
    why = "Megatron-LM's pipeline schedules are 1F1B and interleaved 1F1B, not AFAB";
    schedule = 1;
  } else if (l->framework == MM_FW_FSDP && l->zero == 1)
    why = "PyTorch FSDP shards gradients with the optimizer (SHARD_GRAD_OP, ZeRO-2) or everything "
          "(FULL_SHARD, ZeRO-3), not the optimizer alone";
  else if (l->shard_group > 0 && (l->framework != MM_FW_FSDP || l->zero < 2))
    why = "hybrid sharding is PyTorch FSDP's (HYBRID_SHARD, _HYBRID_SHARD_ZERO2): --framework "
          "fsdp with --zero 2 or 3";
  else if (l->shard_group > 0 &&
           (l->shard_group >= l->dp * l->cp || (l->dp * l->cp) % l->shard_group))
    why = "a hybrid shard group must divide the DP x CP group and be smaller than it";
  else if (l->framework == MM_FW_DEEPSPEED && pipelined && l->zero >= 2)
    why = "DeepSpeed's pipeline engine runs ZeRO-0/1 only";
  else if (l->framework == MM_FW_DEEPSPEED && l->cp > 1) {
    why = "DeepSpeed has no ring context parallelism (its sequence parallelism is Ulysses, an "
          "all-to-all over the heads, not modelled here): --framework megatron or fsdp";
    context = 1;
  } else if (l->framework == MM_FW_DEEPSPEED && pipelined && l->schedule != MM_SCHED_1F1B) {
    why = "DeepSpeed's pipeline engine runs 1F1B (TrainSchedule), not AFAB or the interleaved "
          "schedule";
    schedule = 1;
  }
  if (!why) return 0;
  if (err && schedule)
    snprintf(err, errlen, "%s (--schedule %s, --pp %d)", why, mm_schedule_name(l->schedule), l->pp);
  else if (err && context)
    snprintf(err, errlen, "%s (--cp %d)", why, l->cp);
  else if (err)
    snprintf(err, errlen, "%s (--zero %d, --pp %d)", why, l->zero, l->pp);
  return 1;
}

int mm_framework_rank_memory(const mm_layout *l, int stage, mm_breakdown *out, char *err,
                             size_t errlen) {
  memset(out, 0, sizeof *out);
#define REFUSE(...)                                                                                \
  do {                                                                                             \
    if (err) snprintf(err, errlen, __VA_ARGS__);                                                   \
    return -1;                                                                                     \
  } while (0)
  int V = l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1 ? l->virtual_stages : 1;
  if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->cp < 1 || l->hidden < 1 || l->heads < 1 ||
      l->layers < l->pp || l->vocab < 1 || l->seq < 1 || l->micro_batch < 1 || l->microbatches < 1)
    REFUSE("every size and degree must be at least 1, and every stage needs a layer");
  if (stage < 0 || stage >= l->pp) REFUSE("pipeline rank %d is outside --pp %d", stage, l->pp);
  int kv = l->kv_heads > 0 ? l->kv_heads : l->heads;
  if (!l->head_dim && l->hidden % l->heads)
    REFUSE("--hidden %d is not divisible by --heads %d (a head's width must be whole)", l->hidden,
           l->heads);
  if (l->heads % l->tp || kv % l->tp || (l->ffn > 0 && l->ffn % l->tp) ||
      (l->experts > 0 && l->moe_ffn > 0 && l->moe_ffn % mm_expert_tp(l)))
    REFUSE("the heads (%d, %d of them K/V) and the MLP widths must be divisible by --tp %d",
           l->heads, kv, l->tp);
  if (V > 1 && !mm_stages_valid(l))
    REFUSE("--layers %d on pp x virtual stages = %d model chunks: a chunk would hold no block",
           l->layers, l->pp * V);
  if (l->seq % (l->cp > 1 ? 2 * l->cp : 1))
    REFUSE("--seq %d is not divisible by 2 x --cp %d", l->seq, l->cp);
  int ep = l->ep > 0 ? l->ep : 1, etp = mm_expert_tp(l), folded = l->tp * l->cp * l->dp;
  if (l->experts > 0 && etp == l->tp &&
      (l->dp % ep || l->experts % ep || l->top_k < 1 || l->moe_every < 1))
    REFUSE("--ep %d must divide --dp %d and the %d experts", ep, l->dp, l->experts);
  if (l->experts > 0 && etp != l->tp) {
    if (etp != 1 || l->framework != MM_FW_MEGATRON)
      REFUSE("--expert-tp is 1 (Megatron-Core's --expert-tensor-parallel-size 1) or --tp");
    if (folded % ep || l->experts % ep || l->top_k < 1 || l->moe_every < 1)
      REFUSE("--ep %d must divide tp x cp x dp = %d and the %d experts (--expert-tp 1)", ep, folded,
             l->experts);
    if (l->tp > 1 && !l->sp)
      REFUSE("--expert-tp 1 with --tp %d needs sequence parallelism (Megatron asserts it for "
             "experts with TP)",
             l->tp);
  }
  if (framework_cannot_run(l, err, errlen)) return -1;
#undef REFUSE
  /* a sharded state holds `shard` of the stage's psi parameters (mm_framework_stage_shard) */
  double psi = mm_framework_stage_params(l, stage), shard = mm_framework_stage_shard(l, stage);
  double block = block_params(l), table = padded_vocab(l) * l->hidden / l->tp;
  if (l->experts > 0 && moe_block_params(l) > block) block = moe_block_params(l);
  double unit = block > table ? block : table; /* the largest block FSDP/ZeRO-3 gathers */
  double params = 0, grads = 0, optim = 0;
  switch (l->framework) {
  case MM_FW_MEGATRON:
    params = 2 * psi;
    grads = mm_megatron_grad_bytes(l) * psi;
    optim = 12 * (l->zero >= 1 ? shard : psi);
    break;
  case MM_FW_DEEPSPEED:
    params = l->zero >= 3 ? 2 * shard + 2 * 2 * unit : 2 * psi;
    grads = l->zero >= 2 ? 2 * shard + 2 * l->bucket_mb * 1048576.0 : 2 * psi;
    optim = 12 * (l->zero >= 1 ? shard : psi);
    break;
  default: /* MM_FW_FSDP: NO_SHARD (DDP), SHARD_GRAD_OP, FULL_SHARD */
    if (l->zero == 0) {
      params = 4 * psi;
      grads = 4 * psi;
      optim = 8 * psi;
    } else {
      params = 4 * shard + (l->zero == 2 ? 2 * psi : 2 * 2 * unit);
      grads = 4 * shard + 2 * 2 * unit;
      optim = 8 * shard;
    }
  }
  int layers = mm_stage_layers(l, stage);
  double per_layer = mm_framework_layer_activations(l), s = (double)l->seq / l->cp,
         b = l->micro_batch;
  double input = 2.0 * s * b * l->hidden / (l->sp && l->tp > 1 ? l->tp : 1);
  /* selective recomputation holds one layer's recomputed tensors while its backward runs */
  double acts =
      l->recompute == MM_RECOMPUTE_FULL
          ? layers_in_flight(l, stage, layers) * input + per_layer
          : layers_in_flight(l, stage, layers) * per_layer + mm_framework_recomputed_activations(l);
  if (stage == l->pp - 1) acts += 6.0 * s * b * padded_vocab(l) / l->tp + 2.0 * s * b * l->hidden;
  out->parameters = (size_t)params;
  out->gradients = (size_t)grads;
  out->optimizer = (size_t)optim;
  out->activations = (size_t)acts;
  out->other = 0;
  out->steady = out->parameters + out->gradients + out->optimizer + out->activations;
  out->init_peak = out->steady;
  out->peak = out->steady;
  return 0;
}
