/*
 * test_frameworks.c — the real frameworks' memory conventions (model/framework_memory.c,
 * docs/plan.md "Frameworks") against hand-computed cases.
 *
 * The model: L=4, C=256, H=8, V=1000, 128 positions, seq 128, micro-batch 2, tp 2, pp 2.
 * One block on a TP rank: attention 4C^2 = 262144, MLP 8C^2 = 524288, biases 5C + 4C = 2304,
 * all / tp, plus two LayerNorms 4C = 1024 whole: 395392. The vocabulary padded to 128 x tp =
 * 256: 1024, its table cut over TP: 1024 x 256 / 2 = 131072. Stage 0: 2 blocks + table +
 * positions 128 x 256 = 954624; stage 1: 2 blocks + final LN 512 + the LM head's copy of the
 * table = 922368.
 * Activations per layer and micro-batch with SP (Korthikanti et al.): sbh x 34 / t = 65536 x 17
 * = 1114112, plus flash attention's log-sum-exp 4 x 8 x 128 x 2 / 2 = 4096: 1118208.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "memory_model.h"
#include "model_flops.h"
#include "ssa_ops.h"
#include "ssa_plan.h"

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static mm_layout model(mm_framework framework) {
  mm_layout l;
  memset(&l, 0, sizeof l);
  l.framework = framework;
  l.layers = 4;
  l.hidden = 256;
  l.heads = 8;
  l.vocab = 1000;
  l.max_seq = 128;
  l.seq = 128;
  l.dp = 4;
  l.tp = 2;
  l.pp = 2;
  l.cp = 1;
  l.sp = 1;
  l.schedule = MM_SCHED_1F1B;
  l.virtual_stages = 1;
  l.microbatches = 4;
  l.micro_batch = 2;
  l.zero = 1;
  l.act_bytes = 2;
  l.bucket_mb = 1;
  return l;
}

static mm_breakdown mem(const mm_layout *l, int stage) {
  mm_breakdown b;
  char err[200];
  if (mm_rank_memory(l, stage, &b, err, sizeof err) != 0) {
    fprintf(stderr, "unexpected refusal: %s\n", err);
    failures++;
    memset(&b, 0, sizeof b);
  }
  return b;
}

enum { PSI0 = 954624, PSI1 = 922368, PSI = 1745920, LAYER = 1118208 };

static void model_states(void) {
  /* Megatron: bf16 parameters, fp32 main gradients, the distributed optimizer's 12 / n */
  mm_layout l = model(MM_FW_MEGATRON);
  mm_breakdown b = mem(&l, 0);
  CHECK(b.parameters == 2 * (size_t)PSI0 && b.gradients == 4 * (size_t)PSI0);
  CHECK(b.optimizer == 12 * (size_t)PSI0 / 4);
  l.zero = 0;
  b = mem(&l, 1);
  CHECK(b.parameters + b.gradients + b.optimizer == 18 * (size_t)PSI1);
  /* bf16 main gradients where the reduction is bf16 (grad_reduce_in_fp32 off, as
   * Megatron-Bridge's performance recipes run): 2 bytes, the rest unchanged */
  l.grad_bytes = 2;
  b = mem(&l, 1);
  CHECK(b.gradients == 2 * (size_t)PSI1 && b.parameters + b.optimizer == 14 * (size_t)PSI1);
  l.grad_bytes = 0;
  char err[200] = "";
  l.zero = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "ZeRO-1"));

  /* DeepSpeed, the ZeRO paper: 4 + 12/n, 2 + 14/n (+ its buckets), 16/n (+ two gathered blocks);
   * ZeRO-2/3 without a pipeline (its pipeline engine runs ZeRO-0/1 only): one stage holds the
   * four blocks, the table, the positions and the final LayerNorm, PSI = 1745920 */
  l = model(MM_FW_DEEPSPEED);
  b = mem(&l, 0);
  CHECK(b.parameters + b.gradients + b.optimizer == 4 * (size_t)PSI0 + 12 * (size_t)PSI0 / 4);
  l.zero = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "ZeRO-0/1"));
  l.pp = 1;
  b = mem(&l, 0);
  CHECK(b.parameters + b.gradients + b.optimizer ==
        2 * (size_t)PSI + 14 * (size_t)PSI / 4 + 2 * 1048576);
  l.zero = 3;
  l.dp = 64;
  b = mem(&l, 0);
  size_t block = 395392; /* the largest gathered unit: one block (the table is 131072) */
  CHECK(b.parameters == 2 * (size_t)PSI / 64 + 4 * block);
  CHECK(b.gradients == 2 * (size_t)PSI / 64 + 2 * 1048576 && b.optimizer == 12 * (size_t)PSI / 64);
  CHECK(b.peak == b.steady); /* never all parameters at once (the trainer's set-up does) */

  /* FSDP: FULL_SHARD 16/n + two blocks unsharded (bf16 parameters and gradients);
   * SHARD_GRAD_OP keeps the bf16 parameters whole */
  l = model(MM_FW_FSDP);
  l.zero = 3;
  b = mem(&l, 1);
  CHECK(b.parameters + b.gradients + b.optimizer == 16 * (size_t)PSI1 / 4 + 8 * block);
  l.zero = 2;
  b = mem(&l, 1);
  CHECK(b.parameters == 4 * (size_t)PSI1 / 4 + 2 * (size_t)PSI1);
  /* hybrid sharding (HYBRID_SHARD): the states sharded over the shard group of 2, not dp 4 */
  l.zero = 3;
  l.shard_group = 2;
  b = mem(&l, 1);
  CHECK(b.parameters + b.gradients + b.optimizer == 16 * (size_t)PSI1 / 2 + 8 * block);
}

/* What each framework runs at all (framework_memory.c: framework_cannot_run): the sweep offers
 * nothing else. */
static void what_frameworks_run(void) {
  char err[200] = "";
  mm_breakdown b;
  mm_layout l = model(MM_FW_MEGATRON); /* Megatron: no AFAB, no ZeRO-2/3 */
  l.schedule = MM_SCHED_AFAB;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "not AFAB"));
  l = model(MM_FW_FSDP); /* FSDP: NO_SHARD, SHARD_GRAD_OP, FULL_SHARD; GPipe is a schedule */
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "optimizer alone"));
  const int fsdp_stages[] = {0, 2, 3};
  for (int i = 0; i < 3; i++) {
    l.zero = fsdp_stages[i];
    l.schedule = MM_SCHED_AFAB;
    CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) == 0);
  }
  l = model(MM_FW_DEEPSPEED); /* DeepSpeed's pipeline engine: 1F1B, ZeRO-0/1 */
  l.schedule = MM_SCHED_INTERLEAVED;
  l.virtual_stages = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "interleaved"));
  l.schedule = MM_SCHED_1F1B;
  l.virtual_stages = 1;
  l.zero = 3;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "ZeRO-0/1"));
  l.pp = 1;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) == 0);
  /* no ring context parallelism under DeepSpeed (its sequence parallelism is Ulysses) */
  l.cp = 2;
  l.dp /= 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "Ulysses") &&
        strstr(err, "--cp 2"));
  l.cp = 1;
  l.dp *= 2;
  /* hybrid sharding is FSDP's, with ZeRO-2/3, over a group dividing DP x CP */
  l.shard_group = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "hybrid sharding"));
  l = model(MM_FW_FSDP);
  l.zero = 3;
  l.shard_group = 3;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "must divide"));
  l.shard_group = 4; /* the whole DP group: not hybrid */
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "smaller"));
  l.shard_group = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) == 0);
}

static void activations(void) {
  mm_layout l = model(MM_FW_MEGATRON);
  /* 1F1B: stage 0 keeps min(pp, M) = 2 micro-batches of its 2 layers, the last stage one, and
   * one micro-batch's logits (bf16 + fp32, 6 s b V / t) and final LayerNorm input */
  CHECK(mem(&l, 0).activations == 4 * (size_t)LAYER);
  CHECK(mem(&l, 1).activations == 2 * (size_t)LAYER + 6 * 128 * 2 * 1024 / 2 + 2 * 65536);
  /* without SP the 10 sbh of LayerNorm inputs, dropout masks and GEMM inputs are whole */
  l.sp = 0;
  CHECK(mem(&l, 0).activations == 4 * ((size_t)65536 * (10 + 12) + 4096));
  l.sp = 1;
  /* fp8 (TransformerEngine): the QKV and MLP GEMMs' inputs (the LayerNorms' outputs, 1 + 1
   * sbh of the replicated 10, / t with SP) and the second MLP GEMM's input (4h wide, 4 of the
   * MLP's 16 sharded) kept quantized, 1 byte: 34 - 2 - 4 = 28 sbh / t, with and without SP */
  l.fp8 = 1;
  CHECK(mem(&l, 0).activations == 4 * ((size_t)65536 * 28 / 2 + 4096));
  l.sp = 0;
  CHECK(mem(&l, 0).activations == 4 * ((size_t)65536 * (8 + 10) + 4096));
  l.sp = 1;
  /* FSDP's fp8 (torchao's Float8Linear) saves the bf16 input: bf16's activations */
  mm_layout f = l;
  f.framework = MM_FW_FSDP;
  f.zero = 2;
  f.pp = 1;
  CHECK(mm_framework_layer_activations(&f) == 65536.0 * 34 / 2 + 4096);
  l.fp8 = 0;
  /* full recomputation: each layer's input (2 sbh / t) and one layer recomputed */
  l.recompute = MM_RECOMPUTE_FULL;
  CHECK(mem(&l, 0).activations == 4 * (size_t)65536 + LAYER);
  /* flash attention: selective recomputation saves nothing */
  l.recompute = MM_RECOMPUTE_SELECTIVE;
  CHECK(mem(&l, 0).activations == 4 * (size_t)LAYER);
  /* Megatron's interleaved schedule, v = 2: 2 (p - 1) + (v - 1) p + 1 = 5 chunks of one layer
   * on stage 0 (Korthikanti et al.: L (1 + (p-1)/(pv)) = 5 layers) */
  l.recompute = MM_RECOMPUTE_NONE;
  l.schedule = MM_SCHED_INTERLEAVED;
  l.virtual_stages = 2;
  CHECK(mem(&l, 0).activations == 5 * (size_t)LAYER);
  /* AFAB (GPipe, a schedule of torch.distributed.pipelining; Megatron has none): every
   * micro-batch */
  l.framework = MM_FW_FSDP;
  l.zero = 2;
  l.schedule = MM_SCHED_AFAB;
  l.virtual_stages = 1;
  CHECK(mem(&l, 0).activations == 8 * (size_t)LAYER);
}

static void models_as_they_are(void) {
  /* uneven stages: one fewer block on the first and the last stage (Llama 3: 126 on 16) */
  mm_layout l = model(MM_FW_MEGATRON);
  l.layers = 126;
  l.pp = 16;
  int total = 0;
  for (int s = 0; s < 16; s++)
    total += mm_stage_layers(&l, s);
  CHECK(total == 126 && mm_stage_layers(&l, 0) == 7 && mm_stage_layers(&l, 15) == 7 &&
        mm_stage_layers(&l, 1) == 8);
  l.layers = 10;
  l.pp = 4;
  CHECK(mm_stage_layers(&l, 0) == 2 && mm_stage_layers(&l, 1) == 3 && mm_stage_layers(&l, 2) == 3 &&
        mm_stage_layers(&l, 3) == 2);
  /* the first stage holding the most blocks (what the step's pace and the memory check) */
  CHECK(mm_fullest_stage(&l) == 1);
  /* interleaved: the chunks are uneven, not the stages (126 layers on 16 x v chunks: v = 4,
   * chunks of 2 but 1 on the first and the last; v = 3, chunks of 3 but 2 on the first nine
   * and the last nine); every layout adds up to the layers */
  {
    mm_layout il = model(MM_FW_MEGATRON);
    il.layers = 126;
    il.pp = 16;
    il.schedule = MM_SCHED_INTERLEAVED;
    for (int v = 2; v <= 4; v++) {
      il.virtual_stages = v;
      int sum = 0;
      for (int s = 0; s < 16; s++)
        sum += mm_stage_layers(&il, s);
      CHECK(sum == 126 && mm_stages_valid(&il) && !mm_stages_even(&il));
    }
    il.virtual_stages = 4;
    CHECK(mm_stage_layers(&il, 0) == 7 && mm_stage_layers(&il, 15) == 7 &&
          mm_stage_layers(&il, 1) == 8 && mm_fullest_stage(&il) == 1);
    il.virtual_stages = 3; /* stage 8: chunks 8 (2), 24 (3), 40 (2); 15: 15, 31 (3), 47 (2) */
    CHECK(mm_stage_layers(&il, 0) == 8 && mm_stage_layers(&il, 8) == 7 &&
          mm_stage_layers(&il, 9) == 8 && mm_stage_layers(&il, 15) == 8);
    mm_breakdown b;
    char why[200] = "";
    CHECK(mm_framework_rank_memory(&il, 0, &b, why, sizeof why) == 0);
    il.layers = 20; /* 32 chunks for 20 blocks: a chunk would be empty */
    il.virtual_stages = 2;
    CHECK(!mm_stages_valid(&il) && mm_framework_rank_memory(&il, 0, &b, why, sizeof why) == -1 &&
          strstr(why, "no block") != NULL);
    il.layers = 126; /* the trainer's stages stay even */
    il.framework = MM_FW_STEPSCOPE;
    CHECK(!mm_stages_valid(&il));
  }
  l.layers = 112;
  l.pp = 64;
  CHECK(mm_fullest_stage(&l) == 8 && mm_stage_layers(&l, 7) == 1 && mm_stage_layers(&l, 8) == 2);
  l.layers = 126;
  l.pp = 16;
  CHECK(mm_fullest_stage(&l) == 1 && mm_stage_layers(&l, 1) == 8);
  /* the trainer's stages stay even */
  l.framework = MM_FW_STEPSCOPE;
  l.layers = 8;
  l.pp = 4;
  CHECK(mm_stage_layers(&l, 0) == 2);

  /* GQA (2 of 8 heads for K and V), SwiGLU (three C x F, no biases), RoPE (no table): one block
   * (2C^2 + 2C^2/4 + 3 x C x 512) / 2 + 4C = 278528 + 1024; stage 0 adds only the table */
  l = model(MM_FW_MEGATRON);
  l.kv_heads = 2;
  l.gated_mlp = 1;
  l.ffn = 512;
  l.rope = 1;
  l.zero = 0;
  mm_breakdown b = mem(&l, 0);
  CHECK(b.parameters == 2 * (size_t)(2 * (278528 + 1024) + 131072));
  /* untied on one stage: the embedding and the LM head both */
  l.pp = 1;
  l.untied = 1;
  b = mem(&l, 0);
  CHECK(b.parameters == 2 * (size_t)(4 * (278528 + 1024) + 2 * 131072 + 512));
  /* --head-dim 64 (Qwen3-like: 8 heads x 64 = 512 on a width of 256; K and V 2 heads, 128): a
   * block on a TP rank (2C x 512 + 2C x 128 + 3 x C x 512) / 2 + 4C = 361472; stage 0 of 2 =
   * 2 blocks + the table, 854016 parameters. The MFU's count (whole, not cut): 1000 x 256 +
   * 4 x 721920 + 2C = 3144192 parameters, and attention 12 x 4 x 512 (not 256) x 128 a token */
  mm_layout hd = model(MM_FW_MEGATRON);
  hd.kv_heads = 2;
  hd.gated_mlp = 1;
  hd.ffn = 512;
  hd.rope = 1;
  hd.zero = 0;
  hd.head_dim = 64;
  CHECK(mm_framework_stage_params(&hd, 0) == 854016.0);
  CHECK(mf_flop_params(&hd) == 3144192.0);
  CHECK(mf_model_flops_per_step(&hd, 1) == 6.0 * 3144192 * 128 + 12.0 * 4 * 512 * 128 * 128);
  /* --moe-ffn 128: a MoE block swaps its MLP (393216 / 2) for the router (E x C = 1024) and its
   * E / ep = 2 experts of 3 x C x 128 / 2 = 49152: 264192 a block, 659456 on stage 0, 196608
   * of them experts; the MFU's count takes top_k = 2 experts a token for the dense MLP:
   * 3144192 + 4 x (1024 + 2 x 98304 - 393216) = 2361856 */
  hd.experts = 4;
  hd.top_k = 2;
  hd.moe_every = 1;
  hd.ep = 2;
  hd.moe_ffn = 128;
  CHECK(mm_framework_stage_params(&hd, 0) == 659456.0);
  CHECK(mm_framework_stage_expert_params(&hd, 0) == 196608.0);
  CHECK(mf_flop_params(&hd) == 2361856.0);
  /* a mixture of experts (4 experts, ep 2, every block): a block loses its MLP (2CF + F + C =
   * 525568, / tp) and gains the router (E x C = 1024, whole) and its 2 experts' MLPs / tp:
   * 395392 + 262784 + 1024 = 659200; stage 0 = 2 of them + table + positions */
  mm_layout moe = model(MM_FW_MEGATRON);
  moe.experts = 4;
  moe.top_k = 2;
  moe.moe_every = 1;
  moe.ep = 2;
  b = mem(&moe, 0);
  CHECK(b.parameters == 2 * (size_t)(2 * 659200 + 131072 + 32768));
  /* ZeRO-1 shards a dense parameter's optimizer states over the 4 DP ranks, but an expert's
   * only over the 4 / ep = 2 ranks that hold that expert (Megatron's expert data-parallel
   * group): the stage's 2 x 2 experts' MLPs / tp = 1051136 of its 1482240 parameters, so
   * 12 x (431104 / 4 + 1051136 / 2) = 7600128 bytes, not 12 x 1482240 / 4 */
  CHECK(mm_framework_stage_expert_params(&moe, 0) == 1051136.0);
  CHECK(b.optimizer == 7600128);
  /* its activations per layer (sbh = 65536, SP over tp 2): LayerNorm inputs, GEMM inputs and
   * masks 10 / 2, Q, O, K, V 8 / 2, the experts' MLP tensors (GeLU's input and output, 4h wide
   * each: 16) x top_k 2 / 2, and the first expert GEMM's permuted input, top_k copies of each
   * token (2 x 2 bytes), whole on each TP rank of the experts: 5 + 4 + 16 + 4 = 29 sbh, plus the
   * log-sum-exp 4096 */
  CHECK(mm_framework_layer_activations(&moe) == 29.0 * 65536 + 4096);
  /* Megatron's --expert-tensor-parallel-size 1: each expert whole on a rank (2 x 525568 a block,
   * 2102272 on the stage, psi 431104 + 2102272 = 2533376), its states sharded over the
   * tp x dp / ep = 4 ranks holding it: the same 7600128 optimizer bytes, twice the experts'
   * parameter bytes */
  moe.expert_tp = 1;
  b = mem(&moe, 0);
  CHECK(mm_framework_stage_expert_params(&moe, 0) == 2102272.0);
  CHECK(b.parameters == 2 * (size_t)2533376 && b.optimizer == 7600128);
  /* whole experts: each rank dispatched its tp-th of the tokens, so it keeps a tp-th of the
   * permuted inputs: 4 / 2 = 2 sbh fewer */
  CHECK(mm_framework_layer_activations(&moe) == 27.0 * 65536 + 4096);
  /* refused: without SP (Megatron asserts it for experts with TP), an EP degree not dividing
   * tp x cp x dp (8), another framework's */
  char why[200] = "";
  moe.sp = 0;
  CHECK(mm_framework_rank_memory(&moe, 0, &b, why, sizeof why) == -1 &&
        strstr(why, "sequence parallelism") != NULL);
  moe.sp = 1;
  moe.ep = 4;
  moe.experts = 12;
  CHECK(mm_framework_rank_memory(&moe, 0, &b, why, sizeof why) == 0); /* 4 divides 8 and 12 */
  moe.ep = 3;
  CHECK(mm_framework_rank_memory(&moe, 0, &b, why, sizeof why) == -1 &&
        strstr(why, "tp x cp x dp = 8") != NULL);
  moe.ep = 2;
  moe.experts = 4;
  moe.framework = MM_FW_FSDP;
  moe.zero = 2;
  CHECK(mm_framework_rank_memory(&moe, 0, &b, why, sizeof why) == -1 &&
        strstr(why, "--expert-tp is 1") != NULL);
  /* the trainer refuses what it does not have */
  l.framework = MM_FW_STEPSCOPE;
  char err[200] = "";
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0);

  /* the LM head is vocabulary-parallel under a framework, whole on every TP rank in the
   * trainer: the last stage's extra FLOPs are 3 x 2 x C x V x tokens / tp */
  l = model(MM_FW_MEGATRON);
  double tokens = 2.0 * 128, head = 6.0 * 256 * 1024 * tokens;
  double extra = plan_stage_flops_per_microbatch(&l, 1) - plan_stage_flops_per_microbatch(&l, 0);
  CHECK(extra > head / 2 * 0.999999 && extra < head / 2 * 1.000001);
  l.framework = MM_FW_STEPSCOPE;
  extra = plan_stage_flops_per_microbatch(&l, 1) - plan_stage_flops_per_microbatch(&l, 0);
  CHECK(extra > head * 0.999999 && extra < head * 1.000001);
}

/* The cluster (docs/plan.md "Devices"): 16 H100s, 8 a node, 8 NICs of 50 GB/s. A DP group with
 * 8 members a node rings over all 8 NICs (400 GB/s, under NVLink's 450); with tp 8 it has one
 * member a node and one NIC (50 GB/s). Megatron ZeRO-0 without overlap: an all-reduce of the fp32
 * gradients per bucket (one bucket: the model is under Megatron's 40M parameters), NCCL's
 * latency + 2 x 4 Psi (n - 1)/n / bw; 2 Psi with 16-bit ones. The latencies are NCCL's model
 * (src/graph/tuning.cc, Simple protocol), written out here: 16 ranks on 2 nodes, a ring
 * all-gather or reduce-scatter 8.4 + 14 x 3.4 + 1 x 14 = 70 us; an all-reduce the shorter of the
 * ring's 8.4 + 28 x 3.4 + 2 x 14 = 131.6 us and the tree's 2 (7 x 4 + 1 x 14) = 84 us; 2 ranks on
 * 2 nodes (one a node) the tree's 2 x 14 = 28 us (ring: 8.4 + 2 x 14 = 36.4 us). */
static void clusters(void) {
  plan_job j;
  memset(&j, 0, sizeof j);
  j.model = model(MM_FW_MEGATRON);
  j.gpus = 16;
  j.gpus_per_node = 8;
  j.global_batch = 16;
  j.dev = *plan_device_find("h100-sxm");
  j.overlap = 0;
  mm_layout l = model(MM_FW_MEGATRON);
  l.dp = 16;
  l.tp = 1;
  l.pp = 1;
  l.sp = 0;
  l.zero = 0;
  l.microbatches = 1;
  l.micro_batch = 1;
  plan_result r;
  char err[200];
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double psi = mm_framework_stage_params(&r.layout, 0), lat = 70e-6;
  double want = 84e-6 + 2 * 4 * psi * 15 / 16 / 400e9;
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  /* --grad-reduce-dtype fp16 (Megatron-LM of 2021 with --fp16): half the bytes, as many
   * latencies */
  j.grad_reduce_bytes = 2;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  want = 84e-6 + 2 * 2 * psi * 15 / 16 / 400e9;
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  j.grad_reduce_bytes = 0;
  l.dp = 2;
  l.tp = 8;
  l.micro_batch = 8;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  psi = mm_framework_stage_params(&r.layout, 0);
  want = 28e-6 + 2 * 4 * psi / 2 / 50e9;
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  /* TP inside a node: NVLink */
  CHECK(r.tp_s > 0);
  /* a cluster of its own (--nics-per-node 4 --nic-gbps 200 --nvlink-gbs 300): the node's 4 NICs
   * of 25 GB/s are shared by its 8 devices, so the DP group of one member a node has half a
   * NIC (12.5 GB/s) and the DP group of eight members a node all four (100 GB/s, below the
   * 300 GB/s of NVLink) */
  plan_job own = j;
  own.dev.nics_per_node = 4;
  own.dev.inter_bw = 200e9 / 8;
  own.dev.intra_bw = 300e9;
  CHECK(plan_predict(&own, &l, &r, err, sizeof err) == 0);
  want = 28e-6 + 2 * 4 * psi / 2 / 12.5e9;
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  l.dp = 16;
  l.tp = 1;
  l.micro_batch = 1;
  CHECK(plan_predict(&own, &l, &r, err, sizeof err) == 0);
  double psi16 = mm_framework_stage_params(&r.layout, 0);
  want = 84e-6 + 2 * 4 * psi16 * 15 / 16 / 100e9;
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  l.dp = 2;
  l.tp = 8;
  l.micro_batch = 8;
  /* overlapped, a ZeRO-3 micro-batch long enough to hide its gathers and reduce-scatters still
   * exposes the first unit gathered in forward and the last reduced in backward (nothing to
   * overlap them with): a unit is a block, psi / 5 on this one-stage model of 4 blocks (FSDP
   * FULL_SHARD: bf16 gathers, fp32 reduce-scatters); and the compute beside the rest runs
   * plan_overlap_slowdown (18.9 %) slower for as long as it runs: the forward beside the 4
   * gathers after the first, the backward (BACKWARD_PRE) beside 5 gathers and the 4
   * reduce-scatters before the last */
  j.model.framework = MM_FW_FSDP;
  j.overlap = 1;
  j.global_batch = 1024;
  l.dp = 16;
  l.tp = 1;
  l.zero = 3;
  l.micro_batch = 64;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double unit = mm_framework_stage_params(&r.layout, 0) / 5, shard = 15.0 / 16 / 400e9;
  double tau = plan_overlap_slowdown;
  CHECK(tau > 0.18 && tau < 0.19); /* Lee et al. 2025's average (plan_comm.c) */
  double gathers = 5 * lat + 2 * 5 * unit * shard, reduces = 5 * lat + 4 * 5 * unit * shard;
  double gather_tail = lat + 2 * unit * shard, reduce_tail = lat + 4 * unit * shard;
  want = gather_tail + reduce_tail +
         tau * ((gathers - gather_tail) + (gathers + reduces - reduce_tail));
  CHECK(fabs(r.grad_sync_s - want) < 1e-9 * want);
  j.global_batch = 2048; /* per micro-batch: two of them expose it twice */
  l.microbatches = 2;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(fabs(r.grad_sync_s - 2 * want) < 1e-9 * want);
  /* FSDP's BACKWARD_POST (--backward-prefetch post, Composer's default): a unit's backward
   * all-gather is issued only after the previous unit's gradient computation and the unit waits
   * for it, so each micro-batch also exposes its whole backward gather (5 units, 5 latencies);
   * the reduce-scatters still hide behind the next unit's computation (and slow it) */
  double pre = r.grad_sync_s;
  j.backward_prefetch_post = 1;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double post = gather_tail + tau * (gathers - gather_tail) + gathers + reduce_tail +
                tau * (reduces - reduce_tail);
  CHECK(fabs(r.grad_sync_s - 2 * post) < 1e-9 * post);
  CHECK(r.grad_sync_s > pre);
  /* hybrid sharding over the node's 8 (BACKWARD_PRE again): gathers and reduce-scatters inside
   * the node (NVLink, 450 GB/s; NCCL's ring of 8 in one node: 8.4 + 7 x 3.4 = 32.2 us), and
   * each reduced shard all-reduced across the 2 replicas, one rank a node, over its one NIC
   * (50 GB/s; NCCL's tree of 2 nodes: 2 x 14 = 28 us): the tails as above, the last reduced
   * unit's all-reduce with them; the compute slowed beside all of them */
  j.backward_prefetch_post = 0;
  l.shard_group = 8;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double lat8 = 32.2e-6, shard8 = 7.0 / 8 / 450e9, across = 2 * 4 * 0.5 / 50e9 / 8;
  double gather_tail8 = lat8 + 2 * unit * shard8;
  double reduce_tail8 = lat8 + 4 * unit * shard8 + 28e-6 + unit * across;
  double hsdp = gather_tail8 + reduce_tail8;
  double gathers8 = 5 * lat8 + 2 * 5 * unit * shard8;
  double reduces8 = 5 * lat8 + 4 * 5 * unit * shard8 + 5 * 28e-6 + 5 * unit * across;
  hsdp += tau * ((gathers8 - gather_tail8) + (gathers8 + reduces8 - reduce_tail8));
  CHECK(fabs(r.grad_sync_s - 2 * hsdp) < 1e-9 * hsdp);
  l.shard_group = 0;
  j.backward_prefetch_post = 1;
  /* at scale a ring's latency grows with its ranks (NCCL's model): FSDP over 4,096 H100s on 512
   * nodes exposes, per micro-batch, at least its 5 backward gathers' latencies, each
   * 8.4 + 3,584 x 3.4 + 511 x 14 us = 19.3 ms, where a flat latency said 20 us */
  j.gpus = 4096;
  j.global_batch = 4096 * 64 * 2;
  l.dp = 4096;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double ring4096 = 8.4e-6 + 3584 * 3.4e-6 + 511 * 14e-6;
  CHECK(r.grad_sync_s >= 2 * 5 * ring4096 && r.grad_sync_s < 2 * 5 * ring4096 + 1.0);
  j.gpus = 16;
  j.global_batch = 2048;
  l.dp = 16;
  /* DeepSpeed's ZeRO-3 is not FSDP: its prefetch is as before */
  j.model.framework = l.framework = MM_FW_DEEPSPEED;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double post_flag = r.grad_sync_s;
  j.backward_prefetch_post = 0;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(post_flag == r.grad_sync_s);
  /* Gradient accumulation: torch FSDP without a pipeline reduces in every micro-batch's
   * backward (no no_sync(), as Composer runs it), and SHARD_GRAD_OP gathers the parameters
   * again in each forward, so four micro-batches of the same size expose twice two's; under a
   * pipeline schedule (torch's pipelining) FSDP, and Megatron's distributed optimizer always,
   * reduce once, in the last micro-batch's backward, and gather once: the same as two */
  static const struct {
    int framework, zero, pp, per_micro_batch;
  } sync[] = {{MM_FW_FSDP, 2, 1, 1},     {MM_FW_FSDP, 0, 1, 1},     {MM_FW_FSDP, 2, 2, 0},
              {MM_FW_MEGATRON, 1, 1, 0}, {MM_FW_MEGATRON, 0, 1, 0}, {MM_FW_MEGATRON, 1, 2, 0}};
  for (size_t k = 0; k < sizeof sync / sizeof *sync; k++) {
    double one = 0;
    for (int m = 1; m <= 2; m++) {
      j.model.framework = l.framework = sync[k].framework;
      l.zero = sync[k].zero;
      l.pp = sync[k].pp;
      l.dp = 16 / sync[k].pp;
      j.gpus = 16;
      l.microbatches = 2 * m; /* 2 and 4: a pipeline of 2 stages fills */
      j.global_batch = l.dp * l.micro_batch * l.microbatches;
      if (plan_predict(&j, &l, &r, err, sizeof err) != 0) {
        fprintf(stderr, "case %zu: %s\n", k, err);
        failures++;
      }
      if (m == 1) one = r.grad_sync_s;
    }
    CHECK(one > 0);
    CHECK(fabs(r.grad_sync_s - (sync[k].per_micro_batch ? 2 : 1) * one) < 1e-9 * one);
  }
}

/* Megatron's --tp-comm-overlap (plan_comm.c tp_overlapped): with GEMMs far longer than TP's
 * collectives (C = 8192, seq 4096, tp 8 in one node), a layer's forward exposes only its two
 * reduce-scatters' last of 4 splits, t / 4 for t an all-reduce's time (20 us + 4096 x 8192 x 2
 * bytes x 2 x 7/8 / 450 GB/s), and the pipelined and bulk overlaps take 16 of the H100's 132 SMs
 * for t each way; where the collectives outlast the GEMMs (C = 256) what the GEMMs cannot hide
 * is exposed, and never more than without the overlap. Megatron refuses it without SP. */
static void tp_comm_overlap(void) {
  plan_job j;
  memset(&j, 0, sizeof j);
  j.model = model(MM_FW_MEGATRON);
  j.model.layers = 4;
  j.model.hidden = 8192;
  j.model.heads = 64;
  j.model.vocab = 1024;
  j.model.seq = j.model.max_seq = 4096;
  j.gpus = 8;
  j.gpus_per_node = 8;
  j.global_batch = 4;
  j.dev = *plan_device_find("h100-sxm");
  j.overlap = 1;
  mm_layout l = j.model;
  l.dp = 1;
  l.tp = 8;
  l.pp = 1;
  l.zero = 0;
  l.microbatches = 4;
  l.micro_batch = 1;
  plan_result r;
  char err[200];
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double t = 20e-6 + 4096.0 * 8192 * 2 * 2 * 7 / 8 / 450e9, plain = r.tp_s;
  CHECK(fabs(plain - 4 * 4 * 4 * t) < 1e-9 * plain);
  j.tp_comm_overlap = 1;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double want = 4 * 4 * (t / 4 + 2 * 16.0 / 132 * t);
  CHECK(fabs(r.tp_s - want) < 1e-9 * want);
  CHECK(plan_layer_gemm_forward_s(&j, &r.layout, 1) > 2 * t);
  /* full recomputation runs the forward's collectives again */
  l.recompute = MM_RECOMPUTE_FULL;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  want = 4 * 4 * (2 * (t / 4 + 16.0 / 132 * t) + 16.0 / 132 * t);
  CHECK(fabs(r.tp_s - want) < 1e-9 * want);
  l.recompute = MM_RECOMPUTE_NONE;
  /* C = 256: the collectives outlast the GEMMs */
  j.model.hidden = l.hidden = 256;
  j.model.heads = l.heads = 8;
  j.model.seq = j.model.max_seq = l.seq = l.max_seq = 128;
  j.tp_comm_overlap = 0;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  plain = r.tp_s;
  j.tp_comm_overlap = 1;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  t = 20e-6 + 128.0 * 256 * 2 * 2 * 7 / 8 / 450e9;
  double gemm = plan_layer_gemm_forward_s(&j, &r.layout, 1);
  CHECK(gemm >= 2.0 * 12 * 256 * 256 * 128 / 8 / (989e12 * 0.62) && gemm < 2 * t);
  want = 4 * 4 * (2 * t - gemm + 2 * t - 2 * gemm + 2 * 16.0 / 132 * t);
  CHECK(fabs(r.tp_s - want) < 1e-9 * want);
  CHECK(r.tp_s < plain);
  l.sp = 0;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) != 0 && strstr(err, "sequence parallelism"));
  /* userbuffers stay inside a node (TransformerEngine issue #1071): tp 16 on nodes of 8 */
  l.sp = 1;
  l.tp = 16;
  j.model.heads = l.heads = 16;
  j.gpus = 16;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) != 0 && strstr(err, "inside a node"));
  j.tp_comm_overlap = 0;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
}

/* Compute by shape (docs/plan.md): on one H100, a micro-batch's time is, per layer, the GEMMs
 * (forward 2 x (4C^2 + 8C^2) x tokens, three times with backward) at 62 % of peak, attention
 * (forward 4 x C x seq x tokens, three times) at 30 % at 2,048 positions, here 128 (the kernel's
 * rate held at its table's 512: 329 of 434 TFLOP/s), and five passes of HBM traffic over the
 * stored activations (sbh x 34 + the log-sum-exp) at 3.35 TB/s; plus the LM head's 6 C V tokens
 * at the GEMM rate and its loss, five passes over the logits' 6 V tokens bytes (bf16 and fp32)
 * at 3.35 TB/s. A small hidden size reaches a smaller share of peak than a large one. */
static void compute_by_shape(void) {
  plan_job j;
  memset(&j, 0, sizeof j);
  j.model = model(MM_FW_MEGATRON);
  j.gpus = 1;
  j.gpus_per_node = 8;
  j.global_batch = 2;
  j.dev = *plan_device_find("h100-sxm");
  j.overlap = 1;
  mm_layout l = model(MM_FW_MEGATRON);
  l.dp = l.tp = l.pp = 1;
  l.sp = 0;
  l.zero = 0;
  l.microbatches = 1;
  plan_result r;
  char err[200];
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double tokens = 256, C = 256, peak = 989e12;
  double gemm = 2 * 12 * C * C * tokens, att = 4 * C * 128 * tokens;
  double acts = 65536.0 * 34 + 4 * 8 * 128 * 2;
  /* GEMM quantization on 132 SMs with 128 x 256 tiles (either orientation): the 256-token
   * forward outputs 256 x 768 (QKV: 6 tiles, one wave of 132 x 32768 elements: 22x its
   * 196608), 256 x 256 (66x), 256 x 1024 (16.5x), 256 x 256 (66x), weighted by FLOPs 38.5x;
   * the input gradients (256 x in) 49.5x, the weight gradients (in x out) 22x: 110 forward
   * GEMM times. The LM head (256 x 1024, 256 x 256, 256 x 1024): 16.5 + 66 + 16.5 = 99. */
  double layer =
      110 * gemm / (0.62 * peak) + 3 * att / (0.30 * 329 / 434 * peak) + 5 * acts / 3.35e12;
  double want =
      4 * layer + 99 * 2 * C * 1024 * tokens / (0.62 * peak) + 5 * 6 * 1024 * tokens / 3.35e12;
  /* and the optimizer step without ZeRO: 30 bytes of HBM traffic per parameter under Megatron
   * (fp32 gradient, master weight, m, v read; master, m, v and the bf16 copy written) */
  want += mm_framework_stage_params(&r.layout, 0) * 30 / 3.35e12;
  CHECK(fabs(r.compute_s - want) < 1e-9 * want);
  /* Megatron-Core's host floor (docs/plan.md "A layer's host floor"): each of these layers' work
   * is far under 4.1 ms, so each takes 4.1 ms and the difference is the breakdown's host; the
   * compute stays the GPU's work */
  CHECK(layer < 4.1e-3 && fabs(r.host_s - 4 * (4.1e-3 - layer)) < 1e-12);
  CHECK(!strcmp(r.binding, "host"));
  /* recomputed in full, the floor is a third more (the forward issued twice); with experts
   * 8.2 ms: the head and the optimizer step aside, compute + host is layers x floor */
  plan_result rf, re;
  mm_layout lf = l;
  lf.recompute = MM_RECOMPUTE_FULL;
  CHECK(plan_predict(&j, &lf, &rf, err, sizeof err) == 0);
  double head = 99 * 2 * C * 1024 * tokens / (0.62 * peak) + 5 * 6 * 1024 * tokens / 3.35e12;
  double opt = mm_framework_stage_params(&r.layout, 0) * 30 / 3.35e12;
  CHECK(fabs(rf.compute_s + rf.host_s - head - opt - 4 * 4.1e-3 * 4 / 3) < 1e-12);
  plan_job je = j;
  je.model.experts = 4;
  je.model.top_k = 2;
  je.model.moe_every = 1;
  CHECK(plan_predict(&je, &l, &re, err, sizeof err) == 0);
  CHECK(fabs(re.compute_s + re.host_s - plan_optimizer_step_s(&je.dev, &re.layout, 0) - head -
             4 * 8.2e-3) < 1e-12);
  /* experts exchanging tokens across 2 EP ranks by the all-to-all dispatcher (the default):
   * 12.0 ms, the least of Megatron's alltoall tests; under the allgather dispatcher, DeepEP, and
   * without expert parallelism (no exchange), the least of the allgather (all MoE) tests,
   * 8.2 ms. The exchanges run on the GPU while the host issues the layer: they fill part of the
   * gap under the floor, the host part is the rest, and the layers still take the floor (the
   * exchange is far shorter) */
  plan_job j2 = je;
  j2.gpus = 2;
  j2.global_batch = 2 * je.global_batch; /* the same micro-batch on each rank */
  mm_layout l2 = l;
  l2.dp = 2;
  l2.ep = 2;
  const struct {
    int ep;
    plan_ep_dispatcher dispatcher;
    double floor;
  } exchanges[] = {{2, PLAN_EP_ALLTOALL, 12.0e-3},
                   {2, PLAN_EP_ALLGATHER, 8.2e-3},
                   {2, PLAN_EP_DEEPEP, 8.2e-3},
                   {1, PLAN_EP_ALLTOALL, 8.2e-3}};
  for (size_t i = 0; i < sizeof exchanges / sizeof exchanges[0]; i++) {
    j2.ep_dispatcher = exchanges[i].dispatcher;
    l2.ep = exchanges[i].ep;
    CHECK(plan_predict(&j2, &l2, &re, err, sizeof err) == 0);
    CHECK((re.ep_s > 0) == (exchanges[i].ep > 1) && re.tp_s == 0 && re.cp_s == 0);
    CHECK(fabs(re.compute_s + re.host_s + re.ep_s - plan_optimizer_step_s(&j2.dev, &re.layout, 0) -
               head - 4 * exchanges[i].floor) < 1e-12);
  }
  /* the allgather dispatcher's exchange by hand (token_dispatcher.py's
   * MoEAllGatherTokenDispatcher): each of the 2 ranks gathers the other's 256 tokens, their
   * routing map (a byte an expert: 4) and probabilities (bf16, 4) and reduce-scatters its
   * experts' outputs in forward; backward reduce-scatters the tokens' and probabilities'
   * gradients and gathers the outputs'. Ring collectives inside a node at 450 GB/s, each NCCL's
   * latency for 2 ranks on one node (8.4 + 3.4 us) */
  j2.ep_dispatcher = PLAN_EP_ALLGATHER;
  l2.ep = 2;
  CHECK(plan_predict(&j2, &l2, &re, err, sizeof err) == 0);
  {
    double lat = 8.4e-6 + 3.4e-6, rows = 256.0 / 450e9;
    double hid = lat + rows * C * 2, probs = lat + rows * 4 * 2, map = lat + rows * 4;
    double layer_exchange = (2 * hid + probs + map) + (2 * hid + probs);
    CHECK(fabs(re.ep_s - 4 * layer_exchange) < 1e-15);
  }
  /* with TP 2 and the experts split by it (expert TP 2), the allgather dispatcher gathers over
   * the 4 ranks of expert TP x EP, in place of the MoE MLP's TP collectives: a MoE layer keeps
   * its attention's half of them, as with experts whole on a rank; the all-to-all keeps all */
  {
    plan_job jt = j2;
    mm_layout lt = l2;
    jt.gpus = 4;
    lt.tp = 2;
    lt.sp = 1;
    plan_result ag, a2a;
    jt.ep_dispatcher = PLAN_EP_ALLGATHER;
    CHECK(plan_predict(&jt, &lt, &ag, err, sizeof err) == 0);
    jt.ep_dispatcher = PLAN_EP_ALLTOALL;
    CHECK(plan_predict(&jt, &lt, &a2a, err, sizeof err) == 0);
    CHECK(ag.tp_s > 0 && fabs(ag.tp_s - 0.5 * a2a.tp_s) < 1e-12 * a2a.tp_s);
    /* each rank gathers its 3 peers' sequence-parallel halves: 3 x 128 rows */
    double lat = 8.4e-6 + 3 * 3.4e-6, rows = 3 * 128.0 / 450e9;
    double hid = lat + rows * C * 2, probs = lat + rows * 4 * 2, map = lat + rows * 4;
    CHECK(fabs(ag.ep_s - 4 * ((2 * hid + probs + map) + (2 * hid + probs))) < 1e-15);
  }
  /* an exchange longer than the gap (a slow link): the GPU never waits for the host, no host
   * part, the layers take their work and the all-to-alls */
  j2.ep_dispatcher = PLAN_EP_ALLTOALL;
  l2.ep = 2;
  j2.dev.intra_bw = 1e6;
  CHECK(plan_predict(&j2, &l2, &re, err, sizeof err) == 0);
  CHECK(re.host_s == 0 && re.ep_s > 4 * 12.0e-3);
  /* no floor is measured for the other frameworks: FSDP's layers take their GPU work */
  plan_job jf = j;
  jf.model.framework = MM_FW_FSDP;
  mm_layout lfs = l;
  lfs.framework = MM_FW_FSDP;
  CHECK(plan_predict(&jf, &lfs, &rf, err, sizeof err) == 0);
  CHECK(rf.host_s == 0 && !strcmp(rf.binding, "compute"));
  /* ZeRO-1 updates the rank's shard only: a dp-4 layout's optimizer step is a quarter */
  plan_job j4 = j;
  mm_layout l4 = l;
  j4.gpus = l4.dp = 4;
  j4.global_batch = 8;
  plan_result r0, r1;
  CHECK(plan_predict(&j4, &l4, &r0, err, sizeof err) == 0);
  l4.zero = 1;
  CHECK(plan_predict(&j4, &l4, &r1, err, sizeof err) == 0);
  CHECK(fabs((r0.compute_s - r1.compute_s) -
             mm_framework_stage_params(&r.layout, 0) * 30 * 0.75 / 3.35e12) < 1e-12);
  /* the same layer 8x wider (GEMMs 64x, element-wise 8x): a larger share of peak */
  double small_mfu = r.mfu;
  j.model.hidden = l.hidden = 2048;
  j.model.heads = l.heads = 16;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(r.mfu > small_mfu * 1.2);
}

/* The test model 1024 wide with an MLP of 4096, whole on one rank (no TP): GEMMs of a size
 * whose passes the tests below work out by hand. */
static mm_layout wide_layer(void) {
  mm_layout l = model(MM_FW_MEGATRON);
  l.hidden = 1024;
  l.ffn = 4096;
  l.tp = 1;
  l.sp = 0;
  return l;
}

/* A layer's GEMM time (plan_shape_costs.c: plan_layer_gemm_s), each pass the longer of its
 * FLOPs at its own quantization and its HBM traffic (the roofline): on an H100 without its SM
 * count first (no quantization), GEMMs at 62 % of 989 TFLOP/s, HBM 3.35 TB/s. A Megatron MoE
 * layer, C 1024, 8 heads, 64 experts of F 4096 (not gated), top-1, 8192 tokens. Its FLOPs: QKV
 * and the projection 2 x 8192 x 4C^2, the router 2 x 8192 x 64C, the experts 2 x 8192 x 2CF,
 * three passes: 1.0138890963 ms at the rate. The attention's GEMMs are compute-bound. The
 * router (1024 -> 64) is not: its forward moves 2 x 1024 x 64 + 2 x 8192 x 1024 + 2 x 8192 x 64
 * bytes = 5.360 us against 1.751 us of FLOPs, its input gradient the same, its weight gradient
 * (reading and writing the fp32 main_grad) 5.478 us: +10.945 us. With ep 1 each of the 64 local
 * experts sees 128 tokens: its fc1 forward moves 2 x 1024 x 4096 + 2 x 128 x 1024 + 2 x 128 x
 * 4096 bytes = 9.7 MB, 2.89 us against 1.75 us of FLOPs (+1.14 us; its input gradient the same);
 * its weight gradient reads both activations and reads and writes main_grad (8 x 1024 x 4096):
 * 10.41 us against 1.75 (+8.66 us); fc2 the same: 64 x 2 x 10.94 us = 1.4009 ms. Total 2.4258 ms.
 * Full recomputation repeats the forward: 2.9138 ms. With ep 8 an expert sees 1024 tokens and
 * only the router is bound by memory: 1.0248 ms. The same layer dense (MLP 4096): its FLOPs. */
static void gemm_roofline(void) {
  plan_device dev = *plan_device_find("h100-sxm");
  dev.sms = 0;
  mm_layout l = wide_layer();
  l.experts = 64;
  l.top_k = 1;
  l.moe_every = 1;
  l.ep = 1;
  double rate = 0.62 * 989e12;
  double moe = plan_layer_gemm_s(&dev, &l, 8192, 1, 1, rate);
  CHECK(fabs(moe - 2.4257734901e-3) < 1e-12);
  CHECK(fabs(plan_layer_gemm_s(&dev, &l, 8192, 2, 1, rate) - 2.9138055801e-3) < 1e-12);
  l.ep = 8;
  CHECK(fabs(plan_layer_gemm_s(&dev, &l, 8192, 1, 1, rate) - 1.0248339366e-3) < 1e-12);
  double dense = 3 * 2.0 * 8192 * (4.0 * 1024 * 1024 + 2.0 * 1024 * 4096) / rate;
  CHECK(fabs(plan_layer_gemm_s(&dev, &l, 8192, 1, 0, rate) - dense) < 1e-12);
  /* a bf16 main_grad (--grad-reduce-dtype bf16) halves the weight gradient's gradient bytes */
  l.ep = 1;
  l.grad_bytes = 2;
  CHECK(plan_layer_gemm_s(&dev, &l, 8192, 1, 1, rate) < moe);
  /* With the device's 132 SMs and 128 x 256 tiles, 6144 tokens and ep 16: each of the 4 local
   * experts sees 1536 tokens, 96 tiles of fc1's forward output (1536 x 4096); grouped, the 4
   * experts' 384 tiles fill 3 waves (quantization 1.031), where one expert alone would leave a
   * third of its wave idle (1.375). The attention's GEMMs at 6144 x 3072 and 6144 x 1024 outputs
   * pay 1.146 and 1.375 (their weight gradients 1.375 and 4.125); the router none: 0.98013 ms
   * (1.26906 ms with each expert quantized alone). */
  dev = *plan_device_find("h100-sxm");
  l.grad_bytes = 0;
  l.ep = 16;
  CHECK(fabs(plan_layer_gemm_s(&dev, &l, 6144, 1, 1, rate) - 9.8012992446e-4) < 1e-12);
}

/* Sliding-window attention (plan_shape_costs.c, plan_model.c): Megatron-Core's pattern, every
 * full_attention_every-th layer 1-based whole (GPT-OSS: layers 2, 4, ...; 0-based 1, 3, ...),
 * every layer sliding without it; the work in FlashAttention's 128 x 128 tiles: at 4096
 * positions 32 query tiles, a causal layer visits 1 + 2 + ... + 32 = 528 key tiles, a window of
 * 128 (one tile behind its own) 1 + 31 x 2 = 63; a window of 1000 (k = 8 tiles behind) 36 + 24
 * x 9 = 252; a window covering the sequence, or none, 1. */
static void sliding_window(void) {
  mm_layout l = model(MM_FW_MEGATRON);
  l.layers = 4;
  l.seq = 4096;
  CHECK(!plan_layer_is_sliding(&l, 0) && plan_sliding_window_share(&l) == 1.0);
  l.window = 128;
  CHECK(plan_layer_is_sliding(&l, 0) && plan_layer_is_sliding(&l, 1));
  l.full_attention_every = 2;
  CHECK(plan_layer_is_sliding(&l, 0) && !plan_layer_is_sliding(&l, 1) &&
        plan_layer_is_sliding(&l, 2) && !plan_layer_is_sliding(&l, 3));
  CHECK(fabs(plan_sliding_window_share(&l) - 63.0 / 528) < 1e-15);
  l.window = 1000;
  CHECK(fabs(plan_sliding_window_share(&l) - 252.0 / 528) < 1e-15);
  l.window = 4096;
  CHECK(plan_sliding_window_share(&l) == 1.0);
}

/* Megatron-Core's --recompute-modules (framework_memory.c, plan_shape_costs.c): the test model
 * (sbh = 65536 on each of tp 2 ranks with SP) with 4 experts of 4h, top 2, each cut over TP
 * stores 29 sbh a layer (models_as_they_are): the LayerNorms' outputs 2 (the QKV and MLP GEMMs'
 * inputs, 2 + 2 / 2), their inputs and the masks 3, Q, K, V, O 4, the experts' GeLU input and
 * output 8 + 8 (4h wide, x top_k 2, / 2), the permuted expert inputs 4; plus the log-sum-exp
 * 4096. layernorm recomputes 2 of them, moe_act the GeLU's output 8, moe the experts' 16 and the
 * permuted inputs 4; the attention core nothing (flash). Stage 0 of the 1F1B pp 2 keeps 2
 * micro-batches of its 2 layers, and one layer's recomputed tensors while its backward runs. A
 * dense block's mlp recomputes its 8 (GeLU's input and output, 4h wide, / 2) of 17. */
static void recompute_modules(void) {
  mm_layout l = model(MM_FW_MEGATRON);
  l.experts = 4;
  l.top_k = 2;
  l.moe_every = 1;
  l.ep = 1;
  const double sbh = 65536, lse = 4096;
  CHECK(mm_framework_layer_activations(&l) == 29 * sbh + lse);
  l.recompute = MM_RECOMPUTE_SELECTIVE; /* the attention core: nothing stored less */
  CHECK(mm_framework_layer_activations(&l) == 29 * sbh + lse);
  CHECK(mm_framework_recomputed_activations(&l) == 0);
  l.recompute_modules = MM_RC_LAYERNORM;
  CHECK(mm_framework_layer_activations(&l) == 27 * sbh + lse);
  CHECK(mem(&l, 0).activations == (size_t)(4 * (27 * sbh + lse) + 2 * sbh));
  l.recompute_modules = MM_RC_MOE_ACT;
  CHECK(mm_framework_layer_activations(&l) == 21 * sbh + lse);
  l.recompute_modules = MM_RC_MOE | MM_RC_LAYERNORM; /* Megatron-MoE-ModelZoo's long context */
  CHECK(mm_framework_layer_activations(&l) == 7 * sbh + lse);
  CHECK(mem(&l, 0).activations == (size_t)(4 * (7 * sbh + lse) + 22 * sbh));
  l.recompute_modules = MM_RC_MLP; /* a dense block's module: nothing in a mixture */
  CHECK(mm_framework_layer_activations(&l) == 29 * sbh + lse);
  l.recompute = MM_RECOMPUTE_NONE; /* the modules only name what selective recomputes */
  l.recompute_modules = MM_RC_MOE;
  CHECK(mm_framework_layer_activations(&l) == 29 * sbh + lse);
  mm_layout d = model(MM_FW_MEGATRON);
  d.recompute = MM_RECOMPUTE_SELECTIVE;
  d.recompute_modules = MM_RC_MLP;
  CHECK(mm_framework_layer_activations(&d) == 9 * sbh + lse);
  d.recompute_modules = MM_RC_MOE_ACT; /* an experts' module: nothing in a dense block */
  CHECK(mm_framework_layer_activations(&d) == 17 * sbh + lse);
  /* recomputing the MLP repeats its GEMMs' forward: a dense layer's fc1 and fc2 (1024 x 4096
   * and back, 8192 tokens, compute-bound without the SM count's quantization); a mixture's
   * router and experts, what two forwards cost beyond one, less the attention's four C x C */
  plan_device dev = *plan_device_find("h100-sxm");
  dev.sms = 0;
  mm_layout g = wide_layer();
  double rate = 0.62 * 989e12, tokens = 8192;
  CHECK(fabs(plan_layer_mlp_forward_s(&dev, &g, tokens, 0, rate) -
             2 * tokens * 2 * 1024.0 * 4096 / rate) < 1e-15);
  g.experts = 64;
  g.top_k = 1;
  g.moe_every = 1;
  g.ep = 8;
  double attention = 2 * tokens * 4 * 1024.0 * 1024 / rate;
  double twice = plan_layer_gemm_s(&dev, &g, tokens, 2, 1, rate),
         once = plan_layer_gemm_s(&dev, &g, tokens, 1, 1, rate);
  CHECK(fabs(plan_layer_mlp_forward_s(&dev, &g, tokens, 1, rate) - (twice - once - attention)) <
        1e-15);
}

/* The attention kernel's length (plan_shape_costs.c): FlashAttention's rate at seq / cp over
 * its rate at the length the device's share holds at, from the cited table (329, 390, 434, 458,
 * 471, 477 TFLOP/s at 512 .. 16K). The table's share holds at 2048: Llama 3's 8K sequence
 * 471 / 434, on cp 8 (1K chunks) 390 / 434; 64K held at the table's end, 477 / 434; 512, 329 /
 * 434. A measured share (at <= 0) holds at the planned length: no CP, 1; cp 8, 390 / 471; cp 2
 * 458 / 471; between two lengths in log2 (1536 is 0.585 of the way from 1K to 2K: 415.7). */
static void attention_lengths(void) {
  mm_layout l = model(MM_FW_MEGATRON);
  l.seq = 8192;
  CHECK(fabs(plan_attention_length_factor(&l, 2048) - 471.0 / 434.0) < 1e-12);
  CHECK(plan_attention_length_factor(&l, 0) == 1.0);
  l.cp = 8;
  CHECK(fabs(plan_attention_length_factor(&l, 2048) - 390.0 / 434.0) < 1e-12);
  CHECK(fabs(plan_attention_length_factor(&l, 0) - 390.0 / 471.0) < 1e-12);
  l.cp = 2;
  CHECK(fabs(plan_attention_length_factor(&l, 0) - 458.0 / 471.0) < 1e-12);
  l.cp = 1;
  l.seq = 65536;
  CHECK(fabs(plan_attention_length_factor(&l, 2048) - 477.0 / 434.0) < 1e-12);
  l.seq = 512;
  CHECK(fabs(plan_attention_length_factor(&l, 2048) - 329.0 / 434.0) < 1e-12);
  l.seq = 2048;
  CHECK(plan_attention_length_factor(&l, 2048) == 1.0);
  l.seq = 3072; /* 1536 a chunk, against 3072: halfway 434 .. 458 */
  l.cp = 2;
  CHECK(fabs(plan_attention_length_factor(&l, 0) -
             (390.0 + 44.0 * (log2(1536) - 10)) / (434.0 + 24.0 * (log2(3072) - 11))) < 1e-12);
  CHECK(fabs(390.0 + 44.0 * (log2(1536) - 10) - 415.74) < 0.01);
}

/* cuDNN's measured attention rate (plan_shape_costs.c; --attention-rate cudnn): cudnn-frontend's
 * forward and backward TFLOP/s on the pairs a causal kernel computes, the backward counted 2.5
 * forwards, turned into the planner's count (every pair, the backward two forwards): one
 * forward and backward, 3 F, take F / 2 / forward + 2.5 F / 2 / backward. */
static double cudnn_at(double forward, double backward) {
  return 3e12 / (0.5 / forward + 1.25 / backward);
}

/* A Megatron-Core job of model() with heads of 128 on one device at `seq` positions, and its
 * one layout (no parallelism, one micro-batch) in *one. */
static plan_job one_rank_job(const plan_device *dev, int seq, mm_layout *one) {
  plan_job j;
  memset(&j, 0, sizeof j);
  j.model = model(MM_FW_MEGATRON);
  j.model.heads = 2;
  j.model.seq = j.model.max_seq = seq;
  j.gpus = 1;
  j.gpus_per_node = 8;
  j.global_batch = 2;
  j.dev = *dev;
  j.overlap = 1;
  *one = j.model;
  one->dp = one->tp = one->pp = 1;
  one->sp = 0;
  one->zero = 0;
  one->microbatches = 1;
  return j;
}

static void cudnn_attention_rates(void) {
  const plan_device *h100 = plan_device_find("h100-sxm");
  mm_layout l = model(MM_FW_MEGATRON);
  l.heads = 2; /* heads of 128 */
  l.seq = 4096;
  CHECK(fabs(plan_fused_attention_rate(h100, &l) - cudnn_at(591, 474)) < 1e-3);
  CHECK(fabs(cudnn_at(591, 474) / 1e12 - 861.3) < 0.1); /* docs/plan.md's figure */
  l.seq = 8192, l.cp = 2;                               /* the ring's chunk: 4096 */
  CHECK(fabs(plan_fused_attention_rate(h100, &l) - cudnn_at(591, 474)) < 1e-3);
  l.seq = 6144, l.cp = 1; /* between 4K and 8K, in log2 of the length */
  double x = log2(6144.0) - 12;
  CHECK(fabs(plan_fused_attention_rate(h100, &l) -
             (cudnn_at(591, 474) + (cudnn_at(644, 541) - cudnn_at(591, 474)) * x)) < 1e-3);
  l.seq = 131072; /* held at 32K's above it */
  CHECK(fabs(plan_fused_attention_rate(h100, &l) - cudnn_at(688, 581)) < 1e-3);
  l.seq = 1024; /* below 2K, FlashAttention-2's curve from the 2K rate */
  CHECK(fabs(plan_fused_attention_rate(h100, &l) - cudnn_at(484, 370) * 390 / 434) < 1e-3);
  CHECK(plan_fused_attention_rate(plan_device_find("h200"), &l) > 0);
  /* measured nowhere else: another framework, another device, other heads */
  mm_layout f = l;
  f.framework = MM_FW_FSDP;
  CHECK(plan_fused_attention_rate(h100, &f) == 0);
  CHECK(plan_fused_attention_rate(plan_device_find("a100-80g"), &l) == 0);
  f = l;
  f.heads = 4; /* heads of 64 */
  CHECK(plan_fused_attention_rate(h100, &f) == 0);
  f.heads = 8, f.head_dim = 128; /* heads x head_dim wider than the model */
  CHECK(plan_fused_attention_rate(h100, &f) > 0);

  /* a prediction charges exactly that rate: the same as the share set to it (with the length
   * taken as the plan's: attention_length 0), and only when asked (job.attention_rate) */
  mm_layout one;
  plan_job j = one_rank_job(h100, 128, &one);
  j.attention_rate = PLAN_ATTENTION_CUDNN;
  plan_result rk, rs, rd;
  char err[200];
  CHECK(plan_predict(&j, &one, &rk, err, sizeof err) == 0);
  plan_job js = j;
  js.attention_rate = PLAN_ATTENTION_SHARE;
  js.dev.attention_length = 0;
  js.dev.attention_efficiency = plan_fused_attention_rate(h100, &one) / h100->peak_flops;
  CHECK(plan_predict(&js, &one, &rs, err, sizeof err) == 0);
  CHECK(fabs(rk.compute_s - rs.compute_s) < 1e-12 * rs.compute_s);
  plan_job jd = j; /* the share asked for: slower than cuDNN's rate */
  jd.attention_rate = PLAN_ATTENTION_SHARE;
  CHECK(plan_predict(&jd, &one, &rd, err, sizeof err) == 0);
  CHECK(rd.compute_s > rk.compute_s);
  jd = js; /* a measured rate (--ceilings-from: attention_length 0) wins over the request */
  jd.attention_rate = PLAN_ATTENTION_CUDNN;
  jd.dev.attention_efficiency = 0.2;
  js.dev.attention_efficiency = 0.2;
  CHECK(plan_predict(&jd, &one, &rk, err, sizeof err) == 0);
  CHECK(plan_predict(&js, &one, &rs, err, sizeof err) == 0);
  CHECK(rk.compute_s == rs.compute_s);
  jd.attention_rate = PLAN_ATTENTION_SPLIT; /* and over the split */
  CHECK(plan_predict(&jd, &one, &rk, err, sizeof err) == 0);
  CHECK(rk.compute_s == rs.compute_s);
}

/* --attention-rate split, the default where cuDNN's rate applies (plan_attention_rest_s): at the
 * length the device's share holds at (2048 on h100-sxm), the share's time; elsewhere cuDNN's
 * kernel plus, per token, the share's excess over it there, the same at every length. */
static void split_attention(void) {
  const plan_device *h100 = plan_device_find("h100-sxm");
  mm_layout l = model(MM_FW_MEGATRON);
  l.heads = 2; /* heads of 128 */
  l.seq = 2048;
  double tokens = 4096, share = h100->peak_flops * h100->attention_efficiency;
  double rest = plan_attention_flops(&l, tokens) * (1 / share - 1 / cudnn_at(484, 370));
  CHECK(rest > 0 && fabs(plan_attention_rest_s(h100, &l, tokens) - rest) < 1e-12 * rest);
  l.seq = 32768; /* per token: the length does not change it */
  CHECK(fabs(plan_attention_rest_s(h100, &l, tokens) - rest) < 1e-12 * rest);
  l.cp = 4; /* CP's ring runs the kernel 4 times over the rank's tokens */
  CHECK(fabs(plan_attention_rest_s(h100, &l, tokens) - 4 * rest) < 1e-12 * rest);
  l.seq = 4 * 2048; /* chunks of 2048: the share's time */
  CHECK(fabs(plan_attention_flops(&l, tokens) / cudnn_at(484, 370) +
             plan_attention_rest_s(h100, &l, tokens) - plan_attention_flops(&l, tokens) / share) <
        1e-9 * plan_attention_flops(&l, tokens) / share);
  mm_layout f = l; /* none where cuDNN's rate was not measured */
  f.framework = MM_FW_FSDP;
  CHECK(plan_attention_rest_s(h100, &f, tokens) == 0);
  CHECK(plan_attention_rest_s(plan_device_find("a100-80g"), &l, tokens) == 0);

  mm_layout one;
  plan_job j = one_rank_job(h100, 2048, &one);
  CHECK(j.attention_rate == PLAN_ATTENTION_SPLIT); /* attention_rate 0: the default */
  plan_result split, shared, kernel;
  char err[200];
  plan_job js = j, jk = j;
  js.attention_rate = PLAN_ATTENTION_SHARE;
  jk.attention_rate = PLAN_ATTENTION_CUDNN;
  CHECK(plan_predict(&j, &one, &split, err, sizeof err) == 0);
  CHECK(plan_predict(&js, &one, &shared, err, sizeof err) == 0);
  CHECK(plan_predict(&jk, &one, &kernel, err, sizeof err) == 0);
  /* at 2048 the share's time exactly, and slower than the kernel alone */
  CHECK(fabs(split.compute_s - shared.compute_s) < 1e-9 * shared.compute_s);
  CHECK(kernel.compute_s < split.compute_s);
  /* at 16K: the kernel's time plus the rest, 3 passes (forward, backward = 2) a layer */
  j.model.seq = j.model.max_seq = 16384;
  js.model = jk.model = j.model;
  one.seq = one.max_seq = 16384;
  CHECK(plan_predict(&j, &one, &split, err, sizeof err) == 0);
  CHECK(plan_predict(&js, &one, &shared, err, sizeof err) == 0);
  CHECK(plan_predict(&jk, &one, &kernel, err, sizeof err) == 0);
  double added = 3.0 * j.model.layers * plan_attention_rest_s(h100, &one, 2.0 * 16384);
  CHECK(fabs(split.compute_s - kernel.compute_s - added) < 1e-9 * split.compute_s);
  CHECK(split.compute_s < shared.compute_s);
}

/* The GEMM outputs --ceilings-from reads for their quantization (plan_ceilings.c): linear x[4,
 * 1000, 1024] w[3000, 1024] is 4000 x 3000; addmm's operands follow its bias; bmm keeps its
 * batch; the trainer's matmul_forward is a linear; a non-GEMM has none. */
static void gemm_outputs(void) {
  ssa_op_inputs in;
  double b, r, c;
  CHECK(
      ssa_op_inputs_parse("{\"Input Dims\":[[4,1000,1024],[3000,1024],[3000]],"
                          "\"Input type\":[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\"]}",
                          &in) == 0);
  CHECK(ssa_gemm_output("aten::linear", &in, &b, &r, &c) == 1 && b == 1 && r == 4000 && c == 3000);
  CHECK(ssa_gemm_output("matmul_forward", &in, &b, &r, &c) == 1 && r == 4000 && c == 3000);
  CHECK(ssa_gemm_output("aten::add", &in, &b, &r, &c) == 0);
  CHECK(ssa_op_inputs_parse("{\"Input Dims\":[[3000],[4000,1024],[1024,3000]],"
                            "\"Input type\":[\"float\",\"float\",\"float\"]}",
                            &in) == 0);
  CHECK(ssa_gemm_output("aten::addmm", &in, &b, &r, &c) == 1 && b == 1 && r == 4000 && c == 3000);
  CHECK(ssa_op_inputs_parse("{\"Input Dims\":[[16,5185,64],[16,64,5185]],"
                            "\"Input type\":[\"float\",\"float\"]}",
                            &in) == 0);
  CHECK(ssa_gemm_output("aten::bmm", &in, &b, &r, &c) == 1 && b == 16 && r == 5185 && c == 5185);
  CHECK(ssa_gemm_output("aten::mm", &in, &b, &r, &c) == 1); /* batch dims broadcast as matmul's */
}

int main(void) {
  gemm_outputs();
  gemm_roofline();
  sliding_window();
  attention_lengths();
  cudnn_attention_rates();
  split_attention();
  recompute_modules();
  compute_by_shape();
  clusters();
  tp_comm_overlap();
  model_states();
  activations();
  what_frameworks_run();
  models_as_they_are();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
