/*
 * plan_model.c — the planner's device table, compute and memory model and outputs (ssa_plan.h;
 * the model is written out in docs/plan.md). The cluster communication model (links, NICs,
 * collectives) is plan_comm.c's; the sweep over layouts is plan_sweep.c's.
 */
#include "ssa_plan.h"

#include <math.h>

#include "model_config.h"
#include "model_flops.h"
#include <stdlib.h>
#include <string.h>

/* ---- devices ---------------------------------------------------------------------------- */

/* Dense bf16 peaks from the vendors' data sheets; memory as NVML (nvidia-smi) reports the
 * card's total, not the data sheet's round gigabytes: H100 SXM "80 GB" is 81,559 MiB, H200
 * "141 GB" 143,771 MiB (seen on this project's lent H200, .library's KINDS.md), A100 80 GB
 * 81,920 MiB (Modal's table of NVML totals, thundergolfer.com/blog/nvidia-gpu-memory-capacity);
 * NVLink as the per-GPU one-way
 * bandwidth a ring all-reduce can use (NVLink 4: 900 GB/s both ways), the network as one
 * 400 Gb/s NIC per GPU; efficiency is a typical share of peak for GPT GEMM mixes (MFU
 * reports of Megatron-class trainers); baselines: CUDA context, cuBLAS workspace and NCCL
 * buffers on GPUs, the measured CPU trainer's process (trainer.memory_model) on cpu. The cpu
 * entry's peak and efficiency are per core; its core count is the machine's, set at run time
 * (cmd_plan.c), so it is 0 here. NCCL's network overhead per ring step follows the host CPU
 * of the nodes these devices come in: DGX H100/H200 (Intel Xeon 8480C) 1 us, DGX A100 (AMD EPYC
 * 7742) 2 us (NCCL's getNetOverhead). */
/* one device a row, in plan_device's order */
/* clang-format off */
static const plan_device devices[] = {
    {"h100-sxm", 989e12, 81559.0 * (1u << 20), 450e9, 50e9, 20e-6, 0.45, 1.5 * (1u << 30), 2, 0, 0,
     8, 0.62, 0.30, 2048, 3.35e12, 1979e12, 132, 128, 256, 1e-6, 1},
    {"h200", 989e12, 143771.0 * (1u << 20), 450e9, 50e9, 20e-6, 0.45, 1.5 * (1u << 30), 2, 0, 0,
     8, 0.62, 0.30, 2048, 4.8e12, 1979e12, 132, 128, 256, 1e-6, 1},
    {"a100-80g", 312e12, 81920.0 * (1u << 20), 300e9, 25e9, 25e-6, 0.50, 1.3 * (1u << 30), 2, 0, 0,
     8, 0.80, 0.45, 2048, 2.04e12, 0, 108, 128, 256, 2e-6, 0},
    {"cpu", 0.1e12, 4.0 * (1u << 30), 5e9, 1e9, 50e-6, 0.30, 96.0 * (1u << 20), 4, 0, 0,
     0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
};
/* clang-format on */

const plan_device *plan_device_find(const char *name) {
  for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++)
    if (!strcmp(devices[i].name, name)) return &devices[i];
  return NULL;
}

const char *plan_device_names(void) {
  return "h100-sxm|h200|a100-80g|cpu";
}

const char *plan_device_kind_of_name(const char *name) {
  if (!name) return "cpu";
  if (strstr(name, "H200")) return "h200";
  if (strstr(name, "H100")) return "h100-sxm";
  if (strstr(name, "A100")) return "a100-80g";
  return "cpu";
}

double plan_core_share(const plan_device *dev, int ranks) {
  if (dev->cores <= 0 || ranks <= dev->cores) return 1.0;
  return (double)dev->cores / ranks;
}

void plan_filter_any(plan_filter *f) {
  f->dp = f->tp = f->pp = f->cp = f->zero = f->recompute = f->microbatches = -1;
  f->shard_group = -1;
  f->schedule = f->virtual_stages = f->sp = f->ep = f->expert_tp = -1;
}

int plan_layer_is_moe(const mm_layout *l, int layer) {
  return l->experts > 0 && l->moe_every > 0 && (layer + 1) % l->moe_every == 0;
}

int plan_layer_is_sliding(const mm_layout *l, int layer) {
  if (l->window <= 0) return 0;
  return l->full_attention_every <= 0 || (layer + 1) % l->full_attention_every != 0;
}

/* Whether a framework's model has fine-grained experts (64 or more), the class whose published
 * runs the planner's compute under-predicts (bench/plan/published/README.md, "Fine-grained MoE
 * on H100"): said in the header and JSON's assumed. */
static int fine_grained_experts(const mm_layout *m) {
  return m->framework != MM_FW_STEPSCOPE && m->experts >= 64;
}

/* ---- FLOPs ---------------------------------------------------------------------------------- */

double plan_ffn(const mm_layout *l) {
  return l->ffn > 0 ? l->ffn : 4.0 * l->hidden;
}

double plan_attention_flops(const mm_layout *l, double tokens) {
  return 4.0 * mm_attention_width(l) * l->seq * tokens / l->tp;
}

/* Attention FLOPs (QK^T and PV) of global layer `layer`'s forward (< 0: a layer attending to
 * the whole sequence) for `tokens` tokens on one TP rank: a sliding-window layer's scaled by
 * the key tiles its kernel visits (plan_sliding_window_share). */
static double layer_attention_flops(const mm_layout *l, double tokens, int layer) {
  double att = plan_attention_flops(l, tokens);
  return layer >= 0 && plan_layer_is_sliding(l, layer) ? att * plan_sliding_window_share(l) : att;
}

/* Forward FLOPs of global layer `layer` (< 0: a dense layer attending to the whole sequence)
 * for `tokens` tokens on one TP rank: the GEMMs (qkv, projection, the two MLP matrices) and
 * attention (QK^T and PV over the whole sequence, as the trainer's MFU formula counts it; a
 * sliding-window layer's scaled by the blocks its kernel visits, plan_sliding_window_share). */
static double layer_fwd_flops(const mm_layout *l, double tokens, double *attention, int layer) {
  int moe = layer >= 0 && plan_layer_is_moe(l, layer);
  double C = l->hidden, F = plan_ffn(l);
  /* Q and the projection heads x head_dim wide, K and V kv_heads x head_dim (GQA: narrower) */
  double attention_w = mm_attention_params(l);
  double gemm = 2.0 * (attention_w + (l->gated_mlp ? 3.0 : 2.0) * C * F) * tokens / l->tp;
  if (moe && l->framework == MM_FW_STEPSCOPE) /* the router and K whole experts per token,
                                                 replicated over TP (moe.h) */
    gemm = 2.0 * 4.0 * C * C * tokens / l->tp +
           2.0 * (l->top_k * 2.0 * C * F + l->experts * C) * tokens;
  else if (moe) /* a framework's experts (moe_ffn wide) are cut over TP, the router is not */
    gemm = 2.0 *
               (attention_w + l->top_k * (l->gated_mlp ? 3.0 : 2.0) * C * mm_expert_ffn_width(l)) *
               tokens / l->tp +
           2.0 * l->experts * C * tokens;
  double att = layer_attention_flops(l, tokens, layer);
  if (attention) *attention = att;
  return gemm + att;
}

/* Whether a prediction computes by shape (docs/plan.md "Compute by shape"): a framework's
 * layouts, not calibrated on a run (--from), on a device with a GEMM ceiling (not cpu). */
static int computes_by_shape(const plan_job *job) {
  return job->model.framework != MM_FW_STEPSCOPE && !(job->cal.flops_rate > 0) &&
         job->dev.gemm_efficiency > 0;
}

/* Whether cuDNN's measured attention rate could apply to this plan: where it was measured
 * (plan_fused_attention_rate: Megatron-Core on Hopper with heads of 128), under compute by shape,
 * and the run's own rate was not measured (--ceilings-from). Said beside the long-context
 * caveat. */
static int cudnn_attention_available(const plan_job *job) {
  return computes_by_shape(job) && job->dev.attention_length > 0 &&
         plan_fused_attention_rate(&job->dev, &job->model) > 0;
}

/* How the plan charges its attention (plan_attention_rate): the request where cuDNN's rate can
 * apply, the device's share elsewhere. */
static plan_attention_rate attention_charge(const plan_job *job) {
  return cudnn_attention_available(job) ? job->attention_rate : PLAN_ATTENTION_SHARE;
}

/* Whether the plan's attention kernel runs at cuDNN's measured rate rather than the device's
 * share (--attention-rate split, the default, or cudnn) */
static int kernel_attention_applies(const plan_job *job) {
  return attention_charge(job) != PLAN_ATTENTION_SHARE;
}

/* Whether the plan's attention share is the device table's at 32K positions or more, where the
 * published runs disagree with it (bench/plan/published/README.md, "Long sequences"): the share
 * was set on runs of 512 to 8K positions, and at 32K-128K runs on current kernels (Megatron-Core
 * with TransformerEngine, Llama 3's framework) went faster than predicted, MPT's 2023 kernel as
 * predicted. */
static int long_context_unvalidated(const plan_job *job) {
  return computes_by_shape(job) && job->dev.attention_length > 0 && job->model.seq >= 32768 &&
         !kernel_attention_applies(job);
}

/* The GEMMs' rate under compute by shape: the precision's dense peak at the GEMM ceiling. */
static double gemm_rate_of(const plan_device *dev, int fp8) {
  return (fp8 ? dev->fp8_peak_flops : dev->peak_flops) * dev->gemm_efficiency;
}

double plan_layer_gemm_forward_s(const plan_job *job, const mm_layout *l, double rate) {
  const plan_device *dev = &job->dev;
  double tokens = (double)l->micro_batch * l->seq / l->cp, att;
  double gemm = layer_fwd_flops(l, tokens, &att, -1) - att;
  if (!computes_by_shape(job)) return gemm / rate;
  /* a dense layer's forward, input- and weight-gradient GEMM passes as compute by shape charges
   * them (each at its own quantization, or its HBM traffic where longer), averaged over them */
  return plan_layer_gemm_s(dev, l, tokens, 1, 0, gemm_rate_of(dev, job->fp8)) / 3.0;
}

/* The first global layer of pipeline rank `stage` (stages may be uneven: mm_stage_layers). */
static int stage_first_layer(const mm_layout *l, int stage) {
  int first = 0;
  for (int s = 0; s < stage; s++)
    first += mm_stage_layers(l, s);
  return first;
}

double plan_stage_flops_per_microbatch(const mm_layout *l, int stage) {
  double tokens = (double)l->micro_batch * l->seq / l->cp, att;
  int layers = mm_stage_layers(l, stage), first = stage_first_layer(l, stage);
  double flops = 0;
  for (int k = 0; k < layers; k++) {
    double fwd = layer_fwd_flops(l, tokens, &att, first + k);
    double per_layer = 3.0 * fwd; /* forward + backward (2x forward) */
    if (l->recompute == MM_RECOMPUTE_FULL)
      per_layer += fwd;
    else if (l->recompute == MM_RECOMPUTE_SELECTIVE)
      per_layer += att;
    flops += per_layer;
  }
  if (stage == l->pp - 1) /* the LM head, forward + backward: the trainer's is replicated over
                             TP, the frameworks' vocabulary-parallel (cut over TP) */
    flops += 3.0 * 2.0 * l->hidden * (double)mm_padded_vocab(l->vocab) * tokens /
             (l->framework == MM_FW_STEPSCOPE ? 1 : l->tp);
  return flops;
}

/* The work of one micro-batch on `stage` in FLOP-equivalents at the calibrated rate: its
 * FLOPs, but recomputation charged at the time share of what it repeats, when a run measured
 * it (plan_calibration.forward_share): on the CPU backend the forward is 42-47 % of the
 * compute time, not the third its FLOPs say (GELU's tanh, the T x T softmax and the other
 * element-wise ops cost far more than their FLOPs), so repeating it costs more. */
static double stage_work(const plan_job *job, const mm_layout *l, int stage) {
  double phi = job->cal.forward_share, alpha = job->cal.attention_forward_share;
  if (l->recompute == MM_RECOMPUTE_NONE || !(phi > 0))
    return plan_stage_flops_per_microbatch(l, stage);
  mm_layout plain = *l;
  plain.recompute = MM_RECOMPUTE_NONE;
  double work = plan_stage_flops_per_microbatch(&plain, stage), att;
  int layers = mm_stage_layers(l, stage), first = stage_first_layer(l, stage);
  for (int k = 0; k < layers; k++) {
    double fwd = layer_fwd_flops(l, (double)l->micro_batch * l->seq / l->cp, &att, first + k);
    double layer = 3.0 * fwd; /* a layer's forward + backward */
    if (l->recompute == MM_RECOMPUTE_FULL)
      work += phi * layer;
    else
      work += alpha > 0 ? alpha * layer : att;
  }
  return work;
}

/* The least time Megatron-Core takes for one layer's forward and backward of one micro-batch,
 * however little its GPU work: the host issuing the layer's kernels (Python, autograd,
 * TransformerEngine's wrappers) and, in a mixture of experts, the dispatcher's device-to-host
 * synchronisations on the token counts (Megatron-LM issue #1598) that keep the host from
 * running ahead of the GPU. Measured, not modelled: Megatron-LM's functional tests on DGX
 * H100 (golden values of iteration-time, dev branch 9c5258f109, August 2026) train models of
 * hidden size 512 whose GPU work is a small fraction of a millisecond a layer; their step
 * divided by the layers and micro-batches a rank runs is at least 4.1 ms (median 7.0, 55 tests)
 * for dense layers and at least 8.2 ms (median 12.0, 22 tests) for MoE layers, the least of each
 * taken here (tests with 48 layer micro-batches a rank, so the step's fixed costs weigh least;
 * docs/plan.md "A layer's host floor"; bench/plan/published/megatron_ci_floor.py). The MoE
 * tests' dispatcher matters: 20 of the 22 run the allgather dispatcher (least 8.2 ms); the two
 * that run the alltoall dispatcher, whose preprocessing gathers every EP rank's token counts
 * and synchronises on them before its all-to-all (token_dispatcher.py, "before_ep_alltoall"),
 * take 12.0 and 17.2 ms. So a layer whose experts exchange tokens by NCCL's all-to-all (the
 * planner's default dispatcher, ep > 1) is held to the least of those, 12.0 ms; under the
 * allgather dispatcher the least of its tests, 8.2 ms; under DeepEP or HybridEP (Megatron's
 * flex dispatcher; no such test there) the least of all MoE tests stands in (the same 8.2).
 * A layer recomputed in full issues its forward twice. Other frameworks: not measured, no
 * floor. */
#define MEGATRON_DENSE_LAYER_FLOOR_S        4.1e-3
#define MEGATRON_MOE_LAYER_FLOOR_S          8.2e-3
#define MEGATRON_MOE_ALLTOALL_LAYER_FLOOR_S 12.0e-3

const char *plan_ep_dispatcher_name(plan_ep_dispatcher d) {
  static const char *const names[PLAN_EP_DISPATCHERS] = {[PLAN_EP_ALLTOALL] = "alltoall",
                                                         [PLAN_EP_ALLGATHER] = "allgather",
                                                         [PLAN_EP_DEEPEP] = "deepep"};
  return (unsigned)d < PLAN_EP_DISPATCHERS ? names[d] : "?";
}

static double layer_host_floor_s(const plan_job *job, const mm_layout *l, int moe) {
  if (l->framework != MM_FW_MEGATRON) return 0;
  double floor = !moe ? MEGATRON_DENSE_LAYER_FLOOR_S
                 : l->ep > 1 && job->ep_dispatcher == PLAN_EP_ALLTOALL
                     ? MEGATRON_MOE_ALLTOALL_LAYER_FLOOR_S
                     : MEGATRON_MOE_LAYER_FLOOR_S;
  return l->recompute == MM_RECOMPUTE_FULL ? floor * 4.0 / 3.0 : floor;
}

/* Whether a plan's layouts are held to Megatron-Core's host floor (above): a Megatron job's
 * compute by shape; said in the header and JSON (job.layer_host_floor_s, assumed). */
static int host_floor_applies(const plan_job *job) {
  return job->model.framework == MM_FW_MEGATRON && computes_by_shape(job);
}

/* One micro-batch on `stage` under a framework, from its shapes (docs/plan.md "Compute by
 * shape"): the GEMMs at the device's measured GEMM ceiling, slowed by their outputs' tile and
 * wave quantization (plan_shape_costs.c), fused attention at its own rate per
 * model FLOP, and the element-wise work (LayerNorms, activation functions, dropout, residuals,
 * the attention kernel's traffic) as HBM traffic: every stored activation byte
 * (mm_framework_layer_activations, Korthikanti et al.) written in forward and read and written
 * in backward, three passes, four with full recomputation. GEMMs grow as h^2 per token and the
 * element-wise work as h, so small hidden sizes reach a smaller share of peak. A layer whose
 * work takes less than its framework's host floor (layer_host_floor_s) takes the floor;
 * what the floor adds is returned in *host too (the breakdown's host). Given the layers'
 * collectives a micro-batch (comm: [0] dense, [1] MoE; NULL on the first pass, before they are
 * known), *busy sums the part of each layer's gap under the floor that they fill: they run on
 * the GPU while the host issues the layer, so a layer takes max(floor, work + collectives), and
 * the GPU waits for the host only for the rest of the gap. */
static double stage_time_by_shape(const plan_job *job, const mm_layout *l, int stage, double *host,
                                  const plan_layer_comm *comm, double *busy) {
  const plan_device *dev = &job->dev;
  double tokens = (double)l->micro_batch * l->seq / l->cp;
  double gemm_rate = gemm_rate_of(dev, l->fp8);
  /* the attention kernel's rate grows with the length it runs on (context parallelism's ring
   * runs it on chunks): the device's share holds at its attention_length */
  double att_rate = dev->peak_flops * dev->attention_efficiency *
                    plan_attention_length_factor(l, dev->attention_length);
  /* --attention-rate split or cudnn: cuDNN's measured rate instead (kernel_attention_applies);
   * split adds the share's rest per token (plan_attention_rest_s) */
  if (kernel_attention_applies(job)) att_rate = plan_fused_attention_rate(dev, l);
  double att_rest =
      attention_charge(job) == PLAN_ATTENTION_SPLIT ? plan_attention_rest_s(dev, l, tokens) : 0;
  int layers = mm_stage_layers(l, stage), first = stage_first_layer(l, stage);
  int full = l->recompute == MM_RECOMPUTE_FULL, again = mm_recomputes(l, MM_RC_CORE_ATTN);
  double traffic = full ? 6.0 : 5.0, t = 0;
  /* the traffic is the stored bytes without recomputation (what is recomputed is written
   * again), in bf16: fp8 stores some of them quantized, but its casts read and write them too
   * (the casts themselves are not charged) */
  mm_layout stored = *l;
  stored.recompute = MM_RECOMPUTE_NONE;
  stored.fp8 = 0;
  double elementwise = traffic * mm_framework_layer_activations(&stored) / dev->hbm_bw;
  /* selective recomputation writes again what it recomputes (Megatron-Core's modules: the
   * LayerNorms, the experts' activation, the MLP or the mixture of experts) */
  elementwise += mm_framework_recomputed_activations(l) / dev->hbm_bw;
  for (int k = 0; k < layers; k++) {
    int moe = plan_layer_is_moe(l, first + k);
    double att = layer_attention_flops(l, tokens, first + k);
    /* the GEMMs' passes (forward, input and weight gradients, forward again with full
     * recomputation), each at its own tile and wave quantization or, where its HBM traffic
     * takes longer (experts with few tokens each), at that; the attention forward, its
     * backward (twice the forward), and the forward again when the attention core is
     * recomputed (full, or selective's core_attn); recomputing the MLP (dense blocks) or the
     * mixture of experts (selective's mlp, moe) repeats its GEMMs' forward (full
     * recomputation's passes count it already) */
    int mlp_again = !full && mm_recomputes(l, moe ? MM_RC_MOE : MM_RC_MLP);
    double layer = plan_layer_gemm_s(dev, l, tokens, full ? 2 : 1, moe, gemm_rate) +
                   (mlp_again ? plan_layer_mlp_forward_s(dev, l, tokens, moe, gemm_rate) : 0) +
                   (att / att_rate + att_rest) * (3.0 + again) + elementwise;
    double floor = layer_host_floor_s(job, l, moe);
    if (comm && layer < floor)
      *busy += fmin(floor - layer, comm[moe].tp + comm[moe].cp + comm[moe].ep);
    if (layer < floor) {
      *host += floor - layer;
      layer = floor;
    }
    t += layer;
  }
  if (stage == l->pp - 1) { /* the LM head's GEMMs, and its loss over the vocabulary: the logits'
                              bf16 and fp32 bytes (6 per entry, the memory model's) in the same
                              five passes as a layer's stored bytes (element-wise, memory-bound) */
    double vocab = (double)mm_padded_vocab(l->vocab) * tokens / l->tp;
    t += plan_head_gemm_passes(dev, l, tokens) * 2.0 * l->hidden * vocab / gemm_rate +
         5.0 * 6.0 * vocab / dev->hbm_bw;
  }
  return t;
}

/* ---- one layout ---------------------------------------------------------------------------- */

/* The layout as the planner runs it: the job's model in it, and the conventions of its
 * framework (the trainer's activation bytes, bf16 weight copies and fused attention). */
static mm_layout job_layout(const plan_job *job, const mm_layout *layout) {
  mm_layout l = *layout;
  l.layers = job->model.layers;
  l.hidden = job->model.hidden;
  l.heads = job->model.heads;
  l.vocab = job->model.vocab;
  l.ffn = job->model.ffn;
  l.seq = job->model.seq;
  l.max_seq = job->model.max_seq;
  l.experts = job->model.experts;
  l.top_k = job->model.top_k;
  l.moe_every = job->model.moe_every;
  if (l.experts <= 0 || l.ep < 1) l.ep = 1;
  if (l.experts <= 0 || l.expert_tp == l.tp) l.expert_tp = 0; /* 0: the experts cut over TP */
  l.framework = job->model.framework;
  l.kv_heads = job->model.kv_heads;
  l.head_dim = job->model.head_dim;
  l.moe_ffn = job->model.moe_ffn;
  l.gated_mlp = job->model.gated_mlp;
  l.untied = job->model.untied;
  l.rope = job->model.rope;
  l.window = job->model.window;
  l.full_attention_every = job->model.full_attention_every;
  if (job->model.recompute_modules) l.recompute_modules = job->model.recompute_modules;
  l.unfused_attention = job->model.unfused_attention;
  l.no_dropout = job->model.no_dropout;
  int trainer = l.framework == MM_FW_STEPSCOPE;
  l.grad_bytes = trainer ? 0 : plan_grad_reduce_bytes(job);
  l.fp8 = !trainer && job->fp8;
  l.act_bytes = trainer ? job->dev.act_bytes : 2; /* the frameworks: bf16 activations */
  /* the trainer's bf16 working copy of its GEMM weights: a run's --gemm-weights bf16 on any
   * device, and what auto means on GPUs (bf16 precision) below ZeRO-3; bf16 GEMMs on cached bf16
   * weights there at ZeRO-3 (the frameworks' bf16 copies are in their own parameter bytes) */
  l.gemm_weights_bf16 =
      trainer && l.zero < 3 && (job->model.gemm_weights_bf16 || job->dev.act_bytes == 2);
  l.bf16_weight_copies = trainer && (job->dev.act_bytes == 2 || l.gemm_weights_bf16);
  /* the trainer's CUDA backend with STEPSCOPE_CUDA_ATTENTION=fused (--attention flash), on the
   * shapes its kernels take */
  l.fused_attention =
      trainer && job->dev.act_bytes == 2 && job->model.fused_attention &&
      mm_fused_attention_supported(l.micro_batch, l.seq / l.cp, l.hidden / l.tp, l.heads / l.tp);
  if (l.bucket_mb <= 0) l.bucket_mb = 1;
  return l;
}

/* Why the job cannot have layout l at all (the device count, the batch, the schedule's and
 * options' own requirements): 0, or -1 with why in err. */
static int layout_refused(const plan_job *job, const mm_layout *l, char *err, size_t errlen) {
  int N = l->dp * l->tp * l->pp * l->cp;
  if (N != job->gpus) {
    snprintf(err, errlen, "dp x tp x pp x cp = %d, not the %d devices of the job", N, job->gpus);
    return -1;
  }
  if ((long)l->dp * l->microbatches * l->micro_batch != job->global_batch) {
    snprintf(err, errlen, "dp %d x micro-batches %d x micro-batch %d is not the global batch %d",
             l->dp, l->microbatches, l->micro_batch, job->global_batch);
    return -1;
  }
  if (l->schedule == MM_SCHED_INTERLEAVED &&
      (l->pp < 2 || l->virtual_stages < 2 || l->microbatches % l->pp)) {
    snprintf(err, errlen,
             "interleaved needs pp >= 2, virtual stages >= 2 and micro-batches a "
             "multiple of pp");
    return -1;
  }
  if (l->sp && (l->tp < 2 || ((long)l->micro_batch * (l->seq / l->cp)) % l->tp)) {
    snprintf(err, errlen, "sequence parallelism needs tp > 1 dividing the micro-batch's tokens");
    return -1;
  }
  /* Megatron asserts sequence parallelism with it, and turns SP off at tp 1 first
   * (megatron/training/arguments.py) */
  if (job->tp_comm_overlap && (l->tp < 2 || !l->sp)) {
    snprintf(err, errlen,
             "--tp-comm-overlap needs tp > 1 with sequence parallelism (Megatron "
             "asserts SP with it and turns SP off at tp 1)");
    return -1;
  }
  /* TransformerEngine's userbuffers reach the TP peers through CUDA multicast or IPC handles,
   * inside one NVLink domain (a node here): "the comm+GEMM overlap is currently only possible
   * with single-node tensor-parallelism" (TransformerEngine issue #1071) */
  int node = job->gpus_per_node > 0 ? job->gpus_per_node : 8;
  if (job->tp_comm_overlap && l->tp > 1 && node % l->tp && N > node) {
    snprintf(err, errlen,
             "--tp-comm-overlap needs each TP group inside a node (tp %d, %d devices "
             "a node): TransformerEngine's userbuffers do not cross nodes",
             l->tp, node);
    return -1;
  }
  if (l->zero && l->dp * l->cp == 1) {
    snprintf(err, errlen, "ZeRO shards over dp x cp = 1 rank: nothing to shard");
    return -1;
  }
  /* Composer wraps the model in FSDP and nothing else (llm-foundry's FSDP-only training; its
   * experimental tp_config cuts the MLP alone, which is not this tensor parallelism), and its
   * activation_checkpointing wraps whole blocks (docs/plan.md "What each framework can run") */
  if (job->composer && (l->tp > 1 || l->pp > 1 || l->cp > 1)) {
    snprintf(err, errlen,
             "Composer (llm-foundry) runs FSDP's data parallelism alone: no tensor, pipeline "
             "or context parallelism (--tp %d --pp %d --cp %d; --framework fsdp has torch's)",
             l->tp, l->pp, l->cp);
    return -1;
  }
  if (job->composer && l->recompute == MM_RECOMPUTE_SELECTIVE) {
    snprintf(err, errlen,
             "Composer's activation checkpointing recomputes whole blocks: --recompute none "
             "or full, not selective");
    return -1;
  }
  return 0;
}

/* The pipeline's bubble for micro-batches of t_mb seconds on the slowest stage, V chunks a
 * stage; `share` of a core each rank gets on `ranks_node` ranks a node. */
static double bubble_time(const plan_job *job, const mm_layout *l, int V, double t_mb, double share,
                          int ranks_node, double compute_s) {
  int M = l->microbatches;
  double bubble = (l->pp - 1) * t_mb / V;
  if (share < 1) {
    /* ranks outnumber cores: a stage idle in the fill or drain leaves its core to
     * the others. The schedule is V*M + p - 1 slots of one chunk (t_mb / V at the
     * shared rate); in slot k, a_k = min(k + 1, p, V*M, V*M + p - 1 - k) of the p
     * stages work, i.e. ranks_node * a_k / p ranks of the node, each at
     * min(1, cores / active) of a core, so the slot lasts the chunk's one-core time
     * times max(1, active / cores). The bubble is what the slots take beyond M * t_mb. */
    int S = V * M, K = S + l->pp - 1;
    double chunk_core = t_mb / V * share, sched = 0;
    for (int k = 0; k < K; k++) {
      int a = k + 1;
      if (a > l->pp) a = l->pp;
      if (a > S) a = S;
      if (a > K - k) a = K - k;
      double active = (double)ranks_node * a / l->pp;
      sched += chunk_core * fmax(1.0, active / job->dev.cores);
    }
    bubble = fmax(0.0, sched - compute_s);
  }
  if (job->cal.bubble_excess > 0) bubble += job->cal.bubble_excess * (compute_s + bubble);
  return bubble;
}

/* What binds the step: memory when it does not fit, else its largest part. */
static const char *binding_of(const plan_result *r) {
  double comm = r->tp_s + r->cp_s + r->pp_s + r->ep_s + r->grad_sync_s + r->wait_s;
  if (!r->fits) return "memory";
  if (r->compute_s >= comm && r->compute_s >= r->bubble_s && r->compute_s >= r->host_s)
    return "compute";
  if (comm >= r->bubble_s && comm >= r->host_s) return "exposed communication";
  if (r->bubble_s >= r->host_s) return "bubble";
  return "host";
}

int plan_predict(const plan_job *job, const mm_layout *layout, plan_result *out, char *err,
                 size_t errlen) {
  memset(out, 0, sizeof *out);
  mm_layout l = job_layout(job, layout);
  out->layout = l;
  if (layout_refused(job, &l, err, errlen)) return -1;
  int N = l.dp * l.tp * l.pp * l.cp;
  int V = l.schedule == MM_SCHED_INTERLEAVED ? l.virtual_stages : 1;
  /* memory: the worst stage (the first holds the most micro-batches and the embeddings,
   * the last the LM head; every middle stage holds less than the first) */
  /* (with uneven stages, also the first stage holding the most blocks) */
  int stages[4] = {0, l.pp - 1, l.pp > 2 ? 1 : 0, mm_fullest_stage(&l)};
  for (int i = 0; i < 4; i++) {
    mm_breakdown b;
    if (mm_rank_memory(&l, stages[i], &b, err, errlen) != 0) return -1;
    if (i == 0 || b.peak > out->mem.peak) {
      out->mem = b;
      out->mem_stage = stages[i];
    }
  }
  double baseline = job->cal.baseline_bytes > 0 ? job->cal.baseline_bytes : job->dev.baseline_bytes;
  out->memory_total = (double)out->mem.peak + baseline;
  out->fits = out->memory_total <= job->dev.memory_bytes;

  /* compute: the slowest stage's micro-batch sets the pace. On the CPU backend the ranks of
   * a node share its cores: each gets min(1, cores / ranks) of a core's rate (a calibrated
   * rate is first brought back to one core's by the calibration run's own share). */
  int G = job->gpus_per_node > 0 ? job->gpus_per_node : 8;
  int ranks_node = N < G ? N : G;
  double share = plan_core_share(&job->dev, ranks_node);
  double core_rate = job->dev.peak_flops * job->dev.efficiency;
  if (job->cal.flops_rate > 0) {
    const mm_layout *cl = &job->cal.layout;
    int cn = cl->dp * cl->tp * cl->pp * cl->cp;
    core_rate = job->cal.flops_rate / plan_core_share(&job->dev, cn < G ? cn : G);
  }
  double rate = core_rate * share;
  double t_mb = 0, host_mb = 0; /* the slowest stage's micro-batch, and its host floor's part */
  int pace = -1;                /* that stage */
  int by_shape = computes_by_shape(job);
  int fullest = mm_fullest_stage(&l);
  for (int s = 0; s < l.pp; s += (l.pp > 3 && s == 1) ? l.pp - 2 : 1) { /* 0, 1 and the last */
    /* and, with uneven stages, the first holding the most blocks (before stage 1) */
    int stage[2] = {s == 1 && fullest > 1 ? fullest : -1, s};
    for (int k = 0; k < 2; k++) {
      if (stage[k] < 0) continue;
      double host = 0;
      double t = by_shape ? stage_time_by_shape(job, &l, stage[k], &host, NULL, NULL)
                          : stage_work(job, &l, stage[k]) / rate;
      if (t > t_mb) {
        t_mb = t;
        host_mb = host;
        pace = stage[k];
      }
    }
  }
  int M = l.microbatches;
  out->compute_s = M * (t_mb - host_mb);
  if (by_shape) /* and the optimizer step on the stage that holds the most (plan_shape_costs.c) */
    out->compute_s += plan_optimizer_step_s(&job->dev, &l, out->mem_stage);
  if (l.pp > 1) {
    out->bubble_theory = (double)(l.pp - 1) / ((double)V * M + l.pp - 1);
    out->bubble_s = bubble_time(job, &l, V, t_mb, share, ranks_node, out->compute_s);
  }

  if (plan_communication(job, &l, t_mb, rate, out, err, errlen) != 0) return -1;
  /* a layer's collectives run on the GPU while the host issues it: in the layers' gaps under
   * the host floor the GPU waits for the host only where they leave it idle
   * (stage_time_by_shape); the collectives stay in their own parts of the breakdown */
  if (by_shape && host_mb > 0 && pace >= 0) {
    double host = 0, busy = 0;
    stage_time_by_shape(job, &l, pace, &host, out->layer_comm, &busy);
    host_mb = fmax(0.0, host_mb - busy);
  }

  /* descheduled waits: ranks outnumbering cores reach each collective at times as
   * different as their turns on the cores; the waits are the calibrated share of the
   * compute, scaled by the time a rank is off a core, 1 - share (a pipeline's stages wait
   * in the schedule instead: its bubble above gives their cores back) */
  if (share < 1 && l.pp == 1 && job->cal.wait_share > 0)
    out->wait_s = job->cal.wait_share * (1.0 - share) * out->compute_s;
  out->host_s = M * host_mb + (job->cal.host_s_per_step > 0 ? job->cal.host_s_per_step : 0);
  out->step_s = out->compute_s + out->bubble_s + out->tp_s + out->cp_s + out->pp_s + out->ep_s +
                out->grad_sync_s + out->wait_s + out->host_s;
  out->tokens_per_s = (double)job->global_batch * l.seq / out->step_s;
  out->mfu = mf_model_flops_per_step(&l, job->global_batch) / /* the trainer's MFU numerator */
             (out->step_s * job->dev.peak_flops * job->gpus);
  out->binding = binding_of(out);
  return 0;
}

void plan_calibration_fit_host(plan_job *job) {
  plan_calibration *c = &job->cal;
  if (!c->present || c->measured_step_s <= 0) return;
  plan_job base = *job;
  const mm_layout *l = &c->layout;
  base.gpus = l->dp * l->tp * l->pp * l->cp;
  base.global_batch = l->dp * l->microbatches * l->micro_batch;
  base.cal.host_s_per_step = 0;
  base.cal.wait_share = 0;
  plan_result r;
  char err[256];
  if (plan_predict(&base, l, &r, err, sizeof err) != 0) return;
  /* descheduled waits: the run's exposed collective time beyond what the modelled
   * collectives take, as a share of its compute per unit of time off a core (only a run
   * whose ranks outnumbered the cores, without a pipeline: a pipeline's waits are its
   * schedule's) */
  int G = job->gpus_per_node > 0 ? job->gpus_per_node : 8;
  double share = plan_core_share(&job->dev, base.gpus < G ? base.gpus : G);
  c->wait_share = 0;
  if (share < 1 && l->pp == 1 && r.compute_s > 0) {
    double modelled = r.tp_s + r.cp_s + r.pp_s + r.ep_s + r.grad_sync_s;
    c->wait_share = fmax(0.0, c->exposed_comm_s - modelled) / ((1.0 - share) * r.compute_s);
    base.cal.wait_share = c->wait_share;
    if (plan_predict(&base, l, &r, err, sizeof err) != 0) return;
  }
  /* a pipelined run on shared cores: its bubble's excess is over what the slot model gives
   * (less than the one-device theory the analysis compares with) */
  if (share < 1 && l->pp > 1 && c->bubble_fraction > 0) {
    base.cal.bubble_excess = 0;
    if (plan_predict(&base, l, &r, err, sizeof err) != 0) return;
    double slots = r.compute_s + r.bubble_s > 0 ? r.bubble_s / (r.compute_s + r.bubble_s) : 0;
    c->bubble_excess = fmax(0.0, c->bubble_fraction - slots);
    base.cal.bubble_excess = c->bubble_excess;
    if (plan_predict(&base, l, &r, err, sizeof err) != 0) return;
  }
  double rest = c->measured_step_s - r.step_s;
  /* the parts already exceed the measured step (the median rank's rate is slower than the
   * critical path's): take the rate that makes them fit. Compute, bubble and waits scale
   * with 1 / rate, the overlap of the gradient sync does not quite, so a few rounds. */
  for (int round = 0; round < 8 && rest < -1e-9 * c->measured_step_s; round++) {
    double pace = r.compute_s + r.bubble_s + r.wait_s;
    if (pace <= -rest) break;
    c->flops_rate =
        (c->flops_rate > 0 ? c->flops_rate : job->dev.peak_flops * job->dev.efficiency) * pace /
        (pace + rest);
    c->rate_raised = 1;
    base.cal = *c;
    base.cal.host_s_per_step = 0;
    if (plan_predict(&base, l, &r, err, sizeof err) != 0) return;
    rest = c->measured_step_s - r.step_s;
  }
  c->host_s_per_step = rest > 0 ? rest : 0;
}

/* ---- output ---------------------------------------------------------------------------------- */

static const char *schedule_name(const mm_layout *l) {
  return l->pp == 1 ? "none" : mm_schedule_name(l->schedule);
}

static const char *recompute_name(mm_recompute r) {
  return mm_recompute_name(r);
}

void plan_layout_name(const mm_layout *l, char *buf, size_t size) {
  char sched[32];
  if (l->pp == 1)
    snprintf(sched, sizeof sched, "-");
  else if (l->schedule == MM_SCHED_INTERLEAVED)
    snprintf(sched, sizeof sched, "interleaved v%d", l->virtual_stages);
  else
    snprintf(sched, sizeof sched, "%s", schedule_name(l));
  char ep[24] = ""; /* and " etp1" when the experts are whole on a rank */
  if (l->experts > 0)
    snprintf(ep, sizeof ep, " ep%d%s", l->ep > 0 ? l->ep : 1,
             mm_expert_tp(l) != l->tp ? " etp1" : "");
  char hybrid[24] = ""; /* FSDP's hybrid sharding: the shard group's size */
  if (l->shard_group > 0) snprintf(hybrid, sizeof hybrid, " hybrid%d", l->shard_group);
  char rc[96];
  mm_recompute_text(l->recompute, l->recompute_modules, rc, sizeof rc);
  snprintf(buf, size, "dp%d%s tp%d%s pp%d cp%d zero%d%s %s m%d x %d rc=%s", l->dp, ep, l->tp,
           l->sp ? "+sp" : "", l->pp, l->cp, l->zero, hybrid, sched, l->microbatches,
           l->micro_batch, rc);
}

static double gib(double b) {
  return b / (double)(1u << 30);
}

/* Whether --ceilings-from's run ran on the kind of device planned (a share of peak carries over
 * between devices only as far as they reach the same share). */
static int measured_on_planned_device(const plan_job *job) {
  return !strcmp(plan_device_kind_of_name(job->gemm_measured.device), job->dev.name);
}

/* What an uncalibrated prediction assumes, as the model uses it: a framework's compute by
 * shape or the trainer's single efficiency; the cluster's links (the device table's, or
 * --nics-per-node, --nic-gbps, --nvlink-gbs); the latencies. */
static void print_assumptions(FILE *f, const plan_job *job) {
  const plan_device *d = &job->dev;
  const plan_measured_gemm *g = &job->gemm_measured;
  const plan_measured_attention *a = &job->attention_measured;
  char attention[400];
  if (kernel_attention_applies(job)) { /* the kernel's own rate, at the chunk lengths it has */
    mm_layout at2k = job->model, at32k = job->model;
    at2k.seq = 2048, at32k.seq = 32768;
    at2k.cp = at32k.cp = 1;
    char rest[200] = "";
    if (attention_charge(job) == PLAN_ATTENTION_SPLIT)
      snprintf(rest, sizeof rest,
               " plus, per token, the time beyond it that the %.0f %% share of peak charges at "
               "%.0f positions (fit on published runs at 2K-8K), not grown with the length",
               100 * d->attention_efficiency, d->attention_length);
    snprintf(attention, sizeof attention,
             "attention at cuDNN's measured rate (TransformerEngine's fused attention on Hopper, "
             "heads of 128: %.0f TFLOP/s at 2K positions a chunk to %.0f at 32K, every "
             "query-key pair counted)%s",
             plan_fused_attention_rate(d, &at2k) / 1e12,
             plan_fused_attention_rate(d, &at32k) / 1e12, rest);
  } else {
    char at_length[96] = "";
    if (d->attention_length > 0)
      snprintf(at_length, sizeof at_length,
               " at %.0f positions, scaled by the kernel's rate at the length it runs on",
               d->attention_length);
    snprintf(attention, sizeof attention, "attention at %.*f %%%s of the %.3g FLOP/s peak%s",
             a->measured ? 1 : 0, 100 * d->attention_efficiency,
             a->measured ? " (measured, below)" : "", d->peak_flops, at_length);
  }
  if (computes_by_shape(job))
    fprintf(f,
            "%s (no --from RUN): compute by shape, GEMMs at %.*f %%%s of the %s%.3g FLOP/s peak "
            "and %s, element-wise work at %.3g TB/s (docs/plan.md)\n",
            g->source ? "measured and assumed" : "assumed", g->source ? 1 : 0,
            100 * d->gemm_efficiency, g->source ? " (measured, below)" : "", job->fp8 ? "fp8 " : "",
            job->fp8 ? d->fp8_peak_flops : d->peak_flops, attention, d->hbm_bw / 1e12);
  else
    fprintf(f, "assumed (no --from RUN): %.0f %% of the %.3g FLOP/s peak (docs/plan.md)\n",
            100 * d->efficiency, d->peak_flops);
  if (g->source)
    fprintf(f,
            "  GEMM ceiling measured in %s: %lu %s GEMMs on %s, %.3g FLOP in %.3f ms, %.1f %% of "
            "its %.4g FLOP/s peak; the %lu whose outputs fill its waves: %.1f %%\n",
            g->source, g->gemms, g->dtype, g->device, g->flops, g->time_s * 1e3, 100 * g->share,
            g->peak_flops, g->filled_gemms, 100 * g->ceiling);
  if (g->source && !measured_on_planned_device(job))
    fprintf(f,
            "  note: measured on %s, planned for %s: a share of peak carries over only as far as "
            "the two devices reach the same share of theirs\n",
            g->device, d->name);
  if (g->source && a->measured)
    fprintf(f,
            "  attention measured there: %lu causal forward ops at %.1f %% and %lu backward at "
            "%.1f %% of its bf16 peak (every query-key pair counted, the backward twice the "
            "forward), weighed 1:2 as the planner charges them: %.1f %%\n",
            a->forward_ops, 100 * a->forward_share, a->backward_ops, 100 * a->backward_share,
            100 * a->ceiling);
  else if (g->source && kernel_attention_applies(job))
    fprintf(f, "  attention not measured there, the rate above kept: %s\n", a->why);
  else if (g->source)
    fprintf(f, "  attention not measured there, the table's %.0f %% kept: %s\n",
            100 * d->attention_efficiency, a->why);
  int G = job->gpus_per_node > 0 ? job->gpus_per_node : 8;
  if (d->nics_per_node > 0)
    fprintf(f,
            "  cluster: nodes of %d, %.0f GB/s a device inside a node, %d NICs x %.0f Gb/s a node "
            "between nodes; %s%.0f us a collective\n",
            G, d->intra_bw / 1e9, d->nics_per_node, d->inter_bw * 8 / 1e9,
            d->nccl_net_overhead_s > 0 ? "NCCL's latency model for data-parallel ones, " : "",
            d->latency_s * 1e6);
  else
    fprintf(f,
            "  links: %.0f / %.0f GB/s a device in / between nodes of %d, %.0f us a collective\n",
            d->intra_bw / 1e9, d->inter_bw / 1e9, G, d->latency_s * 1e6);
  if (job->model.framework != MM_FW_STEPSCOPE)
    fprintf(f,
            "  overlap: compute beside an overlapped data-parallel collective runs %.1f %% "
            "slower than alone (Lee et al. 2025's measured average; docs/plan.md), charged in "
            "the gradient sync\n",
            100 * plan_overlap_slowdown);
  if (job->composer)
    fprintf(f, "  framework: composer: PyTorch FSDP's conventions on the layouts llm-foundry runs, "
               "data parallelism alone with recomputation none or full (--framework fsdp sweeps "
               "torch's tensor, pipeline and context parallelism too)\n");
  if (job->model.window > 0) {
    const mm_layout *m = &job->model;
    int sliding = 0;
    for (int k = 0; k < m->layers; k++)
      sliding += plan_layer_is_sliding(m, k);
    fprintf(f,
            "  attention: a sliding window of %d positions on %d of %d layers, at %.3f of a "
            "causal layer's work (FlashAttention's 128 x 128 tiles); CP's ring as for whole "
            "sequences\n",
            m->window, sliding, m->layers, plan_sliding_window_share(m));
  }
  if (job->model.framework != MM_FW_STEPSCOPE && !job->model.no_dropout)
    fprintf(f, "  model: dropout masks stored (2 sbh a layer: Megatron's default dropout 0.1); "
               "--dropout 0 for a model trained without, as Llama, Mixtral, Qwen3 and MPT "
               "are\n");
  if (job->model.recompute_modules) {
    char names[80];
    mm_recompute_modules_text(job->model.recompute_modules, ", ", names, sizeof names);
    fprintf(f, "  recompute: selective recomputes %s (Megatron-Core's --recompute-modules)\n",
            names);
  }
  if (host_floor_applies(job))
    fprintf(f,
            "  host: Megatron-Core takes at least %.1f ms for a layer's forward and backward of "
            "one micro-batch (%.1f ms with experts, %.1f ms where they exchange tokens by the "
            "all-to-all dispatcher, a third more recomputed in full), however little its GPU "
            "work: the least Megatron-LM's own tests on DGX H100 measured (docs/plan.md); the "
            "gap under that floor that a layer's work and its collectives leave is its "
            "breakdown's host\n",
            1e3 * MEGATRON_DENSE_LAYER_FLOOR_S, 1e3 * MEGATRON_MOE_LAYER_FLOOR_S,
            1e3 * MEGATRON_MOE_ALLTOALL_LAYER_FLOOR_S);
  if (long_context_unvalidated(job))
    fprintf(f,
            "  attention: %d positions: published runs on current kernels (Megatron-Core with "
            "TransformerEngine, Llama 3) at 32K or more ran faster than this share predicts, "
            "by up to 2x at 128K (bench/plan/published), so long-context step times are likely "
            "pessimistic; --ceilings-from a trace of your kernel measures its rate%s\n",
            job->model.seq,
            cudnn_attention_available(job)
                ? "; without --attention-rate share, cuDNN's measured one is charged"
                : "");
  if (attention_charge(job) == PLAN_ATTENTION_CUDNN)
    fprintf(f, "  attention: with cuDNN's measured rate alone, published Megatron-Core runs on "
               "H100 came out faster than measured: one MoE job by 17-19 %% at every length from "
               "16K to 128K positions (the share: 24-55 %% slower), dense runs at 4K-8K by 1-27 %% "
               "(median 7 %%); those steps spend time the kernel does not, so take these step "
               "times as optimistic; the default (split) charges it (bench/plan/published)\n");
  if (attention_charge(job) == PLAN_ATTENTION_SPLIT)
    fprintf(f, "  attention: so charged, published Megatron-Core runs on H100 came out within "
               "-1..+15 %% of measured at 4K-8K (dense; the smaller the model the faster) and "
               "+0..+11 %% for one MoE job at 16K-128K positions; the time beyond the kernel is "
               "fit, not named by a measurement (bench/plan/published)\n");
  if (job->model.experts > 0) { /* what the published figures here do not settle (docs/plan.md) */
    fprintf(f, "  experts: routing taken as balanced; a dropless run's imbalance is not in these "
               "figures (measured: forced balance ran 4 %% faster on Mixtral 8x22B, 9-24 %% on "
               "Qwen3-235B at 128K-16K positions; bench/plan/published), nor its extra activation "
               "memory\n");
    if (fine_grained_experts(&job->model) && host_floor_applies(job))
      fprintf(f, "  experts: fine-grained (64 or more): published Megatron-Core runs of "
                 "128-expert models are predicted less well than dense ones; fp8 did not speed "
                 "up the one such job measured in both precisions (bench/plan/published), so "
                 "take a speedup predicted here from fp8, or from more tokens a rank lifting "
                 "its layers off the host floor, as a hypothesis to measure\n");
    else if (fine_grained_experts(&job->model))
      fprintf(f, "  experts: fine-grained (64 or more): in most published Megatron-Core runs of "
                 "128-expert models a MoE layer's work besides attention took 1.5-2.2x the time "
                 "predicted without a host floor, which this framework is not charged (none "
                 "measured; bench/plan/published), so these step times are likely "
                 "optimistic\n");
    if (job->ep_dispatcher == PLAN_EP_DEEPEP)
      fprintf(f, "  experts: tokens exchanged as DeepEP does, once to each rank and across nodes "
                 "once to each node they go to (--ep-dispatcher deepep)\n");
    else if (job->ep_dispatcher == PLAN_EP_ALLGATHER)
      fprintf(f, "  experts: tokens exchanged as Megatron's allgather dispatcher does, every "
                 "token of the expert-TP x EP group gathered to each rank with its routing, the "
                 "outputs reduce-scattered back (--ep-dispatcher allgather); its gathered buffer "
                 "is not in the memory figures\n");
    fprintf(f, "  experts: expert parallelism against its all-to-alls is ranked by the model "
               "alone: the one 128-expert job measured at two layouts (Qwen3-235B on 256 H100s) "
               "is ordered as measured only since Megatron-Core's host floor is charged "
               "(docs/plan.md, bench/plan/published), so take its EP ranking as a hypothesis "
               "to measure\n");
  }
}

void plan_print_table(FILE *f, const plan_job *job, const plan_result *r, long n, long top) {
  long fitting = 0;
  for (long i = 0; i < n; i++)
    fitting += r[i].fits;
  fprintf(f, "%ld layouts of %d x %s (%.0f GiB each), global batch %d x %d tokens; %ld fit%s\n", n,
          job->gpus, job->dev.name, gib(job->dev.memory_bytes), job->global_batch, job->model.seq,
          fitting, job->cal.present ? "" : "");
  if (job->cal.present)
    fprintf(f,
            "calibrated by %s: %.3g FLOP/s per rank achieved, measured bandwidths, "
            "latency, host overhead\n",
            job->cal.source, job->cal.flops_rate);
  else
    print_assumptions(f, job);
  if (job->dev.cores > 0)
    fprintf(f,
            "the ranks of a node share %d cores%s: each gets min(1, cores / ranks) of a "
            "core's rate\n",
            job->dev.cores, job->dev.cores_assumed ? " (assumed: this machine's; --cores N)" : "");
  /* the layout column is as wide as the longest name shown (module sets make long ones) */
  int width = (int)strlen("layout");
  for (long i = 0; i < n && i < top; i++) {
    char name[128];
    plan_layout_name(&r[i].layout, name, sizeof name);
    if ((int)strlen(name) > width) width = (int)strlen(name);
  }
  fprintf(f, "\n%-4s %-*s %9s %4s %10s %11s %6s  %s\n", "#", width, "layout", "mem GiB", "fits",
          "step s", "tokens/s", "MFU", "binding");
  for (long i = 0; i < n && i < top; i++) {
    char name[128];
    plan_layout_name(&r[i].layout, name, sizeof name);
    fprintf(f, "%-4ld %-*s %9.2f %4s %10.4g %11.4g %5.1f%%  %s\n", i + 1, width, name,
            gib(r[i].memory_total), r[i].fits ? "yes" : "NO", r[i].step_s, r[i].tokens_per_s,
            100 * r[i].mfu, r[i].binding);
  }
  if (n > top) fprintf(f, "... %ld more (--top N, or --json/--csv for all)\n", n - top);
  if (n > 0) {
    const plan_result *b = &r[0];
    fprintf(f,
            "\nbest: %s\n  memory per device (stage %d): parameters %.2f, gradients %.2f, "
            "optimizer %.2f, activations %.2f, runtime baseline %.2f GiB = %.2f GiB\n"
            "  step %.4g s = compute %.4g + bubble %.4g + TP %.4g + CP %.4g + PP %.4g + "
            "EP %.4g + gradient sync %.4g + descheduled waits %.4g + host %.4g\n",
            b->fits ? "fits" : "does NOT fit", b->mem_stage, gib(b->mem.parameters),
            gib(b->mem.gradients), gib(b->mem.optimizer), gib(b->mem.activations),
            gib(b->memory_total - b->mem.peak), gib(b->memory_total), b->step_s, b->compute_s,
            b->bubble_s, b->tp_s, b->cp_s, b->pp_s, b->ep_s, b->grad_sync_s, b->wait_s, b->host_s);
  }
}

static void json_layout(ssa_out *o, const plan_result *r) {
  const mm_layout *l = &r->layout;
  char name[128];
  plan_layout_name(l, name, sizeof name);
  ssa_out_printf(o,
                 "{\"layout\":{\"name\":\"%s\",\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"sp\":%s,"
                 "\"zero\":%d,\"recompute\":\"%s\",\"microbatches\":%d,\"micro_batch\":%d,"
                 "\"schedule\":\"%s\",\"virtual_stages\":%d,\"bucket_mb\":%g,\"ep\":%d,"
                 "\"expert_tp\":%d,\"shard_group\":%d",
                 name, l->dp, l->tp, l->pp, l->cp, l->sp ? "true" : "false", l->zero,
                 recompute_name(l->recompute), l->microbatches, l->micro_batch, schedule_name(l),
                 l->schedule == MM_SCHED_INTERLEAVED ? l->virtual_stages : 1, l->bucket_mb,
                 l->ep > 0 ? l->ep : 1, l->experts > 0 ? mm_expert_tp(l) : 0, l->shard_group);
  if (l->recompute == MM_RECOMPUTE_SELECTIVE && l->recompute_modules) { /* Megatron's modules */
    char names[80];
    mm_recompute_modules_text(l->recompute_modules, "\",\"", names, sizeof names);
    ssa_out_printf(o, ",\"recompute_modules\":[\"%s\"]", names);
  }
  ssa_out_str(o, "},");
  ssa_out_printf(o,
                 "\"memory_bytes\":{\"parameters\":%zu,\"gradients\":%zu,\"optimizer\":%zu,"
                 "\"activations\":%zu,\"other\":%zu,\"runtime_baseline\":%.0f,\"total\":%.0f},"
                 "\"memory_stage\":%d,\"fits\":%s,",
                 r->mem.parameters, r->mem.gradients, r->mem.optimizer, r->mem.activations,
                 r->mem.other, r->memory_total - (double)r->mem.peak, r->memory_total, r->mem_stage,
                 r->fits ? "true" : "false");
  ssa_out_printf(
      o,
      "\"step_time_s\":%.9g,\"tokens_per_s\":%.9g,\"mfu\":%.9g,\"bubble_theory\":%.6f,"
      "\"breakdown_s\":{\"compute\":%.9g,\"bubble\":%.9g,\"tp\":%.9g,\"cp\":%.9g,\"pp\":%.9g,"
      "\"ep\":%.9g,\"grad_sync\":%.9g,\"wait\":%.9g,\"host\":%.9g},\"binding\":\"%s\"}",
      r->step_s, r->tokens_per_s, r->mfu, r->bubble_theory, r->compute_s, r->bubble_s, r->tp_s,
      r->cp_s, r->pp_s, r->ep_s, r->grad_sync_s, r->wait_s, r->host_s, r->binding);
}

static const char *framework_name(const plan_job *job) {
  static const char *const names[] = {"stepscope", "megatron", "fsdp", "deepspeed"};
  int framework = job->model.framework;
  if (job->composer) return "composer";
  return framework >= 0 && framework < 4 ? names[framework] : "?";
}

int plan_write_json(ssa_out *o, const plan_job *job, const plan_result *r, long n,
                    const plan_result *base) {
  const mm_layout *m = &job->model;
  ssa_out_printf(
      o,
      "{\"schema_version\":1,\"kind\":\"stepscope.plan\",\"job\":{\"layers\":%d,\"hidden\":%d,"
      "\"heads\":%d,\"vocab\":%d,"
      "\"ffn\":%d,\"seq\":%d,\"max_seq\":%d,\"gpus\":%d,\"gpus_per_node\":%d,"
      "\"global_batch\":%d,\"overlap\":%s,\"experts\":%d,\"top_k\":%d,\"moe_every\":%d,"
      "\"framework\":\"%s\",\"kv_heads\":%d,\"mlp\":\"%s\",\"untied\":%s,\"positions\":\"%s\","
      "\"attention\":\"%s\",\"precision\":\"%s\",\"head_dim\":%d,\"moe_ffn\":%d",
      m->layers, m->hidden, m->heads, m->vocab, m->ffn > 0 ? m->ffn : 4 * m->hidden, m->seq,
      m->max_seq, job->gpus, job->gpus_per_node, job->global_batch, job->overlap ? "true" : "false",
      m->experts, m->experts > 0 ? m->top_k : 0, m->experts > 0 ? m->moe_every : 0,
      framework_name(job), m->kv_heads > 0 ? m->kv_heads : m->heads,
      m->gated_mlp ? "swiglu" : "gelu", m->untied ? "true" : "false", m->rope ? "rope" : "learned",
      m->unfused_attention ? "unfused" : "flash", job->fp8 ? "fp8" : "bf16",
      (int)(mm_attention_width(m) / m->heads), m->experts > 0 ? (int)mm_expert_ffn_width(m) : 0);
  if (m->window > 0)
    ssa_out_printf(o, ",\"sliding_window\":%d,\"full_attention_every\":%d", m->window,
                   m->full_attention_every);
  if (m->framework != MM_FW_STEPSCOPE) /* a framework's model: its dropout masks stored or not */
    ssa_out_printf(o, ",\"dropout_masks\":%s", m->no_dropout ? "false" : "true");
  if (m->recompute_modules) { /* what its selective layouts recompute (--recompute-modules) */
    char names[80];
    mm_recompute_modules_text(m->recompute_modules, "\",\"", names, sizeof names);
    ssa_out_printf(o, ",\"recompute_modules\":[\"%s\"]", names);
  }
  if (m->framework != MM_FW_STEPSCOPE) /* the trainer reduces fp32 gradients, always */
    ssa_out_printf(o, ",\"grad_reduce_bytes\":%d,\"overlap_slowdown\":%.3f",
                   plan_grad_reduce_bytes(job), plan_overlap_slowdown);
  if (m->framework == MM_FW_FSDP)
    ssa_out_printf(o, ",\"backward_prefetch\":\"%s\"",
                   job->backward_prefetch_post ? "post" : "pre");
  if (m->framework == MM_FW_MEGATRON)
    ssa_out_printf(o, ",\"tp_comm_overlap\":%s", job->tp_comm_overlap ? "true" : "false");
  if (host_floor_applies(job)) /* a layer's least time: dense, with experts, with experts
                                  exchanging tokens by the all-to-all dispatcher (docs/plan.md) */
    ssa_out_printf(o, ",\"layer_host_floor_s\":{\"dense\":%g,\"moe\":%g,\"moe_alltoall\":%g}",
                   MEGATRON_DENSE_LAYER_FLOOR_S, MEGATRON_MOE_LAYER_FLOOR_S,
                   MEGATRON_MOE_ALLTOALL_LAYER_FLOOR_S);
  if (m->experts > 0 && m->framework != MM_FW_STEPSCOPE)
    ssa_out_printf(o, ",\"ep_dispatcher\":\"%s\"", plan_ep_dispatcher_name(job->ep_dispatcher));
  ssa_out_str(o, "},");
  const plan_device *d = &job->dev;
  ssa_out_str(o, "\"device\":{\"name\":");
  ssa_out_json_string(o, d->name);
  ssa_out_printf(o,
                 ",\"peak_flops\":%.6g,\"memory_bytes\":%.0f,\"intra_node_bw\":%.6g,"
                 "\"inter_node_bw\":%.6g,\"nics_per_node\":%d,\"latency_s\":%.6g,"
                 "\"efficiency\":%.4f,\"gemm_efficiency\":%.4f,\"attention_efficiency\":%.4f,"
                 "\"attention_length\":%.0f,\"hbm_bw\":%.6g,\"runtime_baseline_bytes\":%.0f,"
                 "\"activation_bytes\":%d,"
                 "\"cores\":%d,\"cores_assumed\":%s},",
                 d->peak_flops, d->memory_bytes, d->intra_bw, d->inter_bw, d->nics_per_node,
                 d->latency_s, d->efficiency, d->gemm_efficiency, d->attention_efficiency,
                 d->attention_length, d->hbm_bw, d->baseline_bytes, d->act_bytes, d->cores,
                 d->cores_assumed ? "true" : "false");
  const plan_measured_gemm *g = &job->gemm_measured;
  if (g->source) { /* --ceilings-from: where gemm_efficiency came from */
    ssa_out_str(o, "\"gemm_ceiling_measured\":{\"source\":");
    ssa_out_json_string(o, g->source);
    ssa_out_str(o, ",\"device\":");
    ssa_out_json_string(o, g->device);
    ssa_out_printf(o,
                   ",\"dtype\":\"%s\",\"peak_flops\":%.6g,\"gemms\":%lu,\"flops\":%.9g,"
                   "\"time_s\":%.9g,\"share\":%.6f,\"filled_gemms\":%lu,\"ceiling\":%.6f,"
                   "\"same_device\":%s},",
                   g->dtype, g->peak_flops, g->gemms, g->flops, g->time_s, g->share,
                   g->filled_gemms, g->ceiling, measured_on_planned_device(job) ? "true" : "false");
    const plan_measured_attention *a = &job->attention_measured;
    ssa_out_printf(o,
                   "\"attention_ceiling_measured\":{\"forward_ops\":%lu,\"backward_ops\":%lu,"
                   "\"left_out_ops\":%lu,\"forward_flops\":%.9g,\"forward_time_s\":%.9g,"
                   "\"backward_flops\":%.9g,\"backward_time_s\":%.9g,",
                   a->forward_ops, a->backward_ops, a->left_out_ops, a->forward_flops,
                   a->forward_time_s, a->backward_flops, a->backward_time_s);
    if (a->measured)
      ssa_out_printf(o,
                     "\"forward_share\":%.6f,\"backward_share\":%.6f,\"ceiling\":%.6f,"
                     "\"why\":null},",
                     a->forward_share, a->backward_share, a->ceiling);
    else {
      ssa_out_str(o, "\"forward_share\":null,\"backward_share\":null,\"ceiling\":null,\"why\":");
      ssa_out_json_string(o, a->why);
      ssa_out_str(o, "},");
    }
  }
  const plan_calibration *c = &job->cal;
  if (c->present) {
    ssa_out_str(o, "\"calibration\":{\"source\":");
    ssa_out_json_string(o, c->source); /* a run's path: whatever the user named it */
    ssa_out_printf(o,
                   ",\"flops_rate\":%.6g,\"tp_bw\":%.6g,"
                   "\"dp_bw\":%.6g,\"pp_bw\":%.6g,\"cp_bw\":%.6g,\"latency_s\":%.6g,"
                   "\"host_s_per_step\":%.6g,\"bubble_excess\":%.6f,"
                   "\"runtime_baseline_bytes\":%.0f,\"measured_step_s\":%.6g,"
                   "\"forward_share\":%.4f,\"attention_forward_share\":%.4f,"
                   "\"exposed_comm_s\":%.6g,\"wait_share\":%.6g,\"bubble_fraction\":%.6f,"
                   "\"rate_raised\":%s},",
                   c->flops_rate, c->tp_bw, c->dp_bw, c->pp_bw, c->cp_bw, c->latency_s,
                   c->host_s_per_step, c->bubble_excess, c->baseline_bytes, c->measured_step_s,
                   c->forward_share, c->attention_forward_share, c->exposed_comm_s, c->wait_share,
                   c->bubble_fraction, c->rate_raised ? "true" : "false");
  } else {
    ssa_out_printf(
        o,
        "\"calibration\":null,\"assumed\":[\"flops_rate\",\"bandwidths\",\"latency\","
        "\"runtime_baseline\",\"host_overhead\"%s%s%s%s%s%s],",
        job->model.framework != MM_FW_STEPSCOPE ? ",\"overlap_slowdown\"" : "",
        host_floor_applies(job) ? ",\"megatron_layer_host_floor\"" : "",
        attention_charge(job) == PLAN_ATTENTION_CUDNN   ? ",\"megatron_cudnn_attention_rate\""
        : attention_charge(job) == PLAN_ATTENTION_SPLIT ? ",\"megatron_cudnn_attention_split\""
                                                        : "",
        job->model.experts > 0
            ? ",\"balanced_expert_routing\",\"expert_parallel_ranking_unvalidated\""
            : "",
        fine_grained_experts(&job->model) ? ",\"fine_grained_expert_compute_unvalidated\"" : "",
        long_context_unvalidated(job) ? ",\"long_context_attention_rate_unvalidated\"" : "");
  }
  plan_ranking ranking;
  plan_rank_resolution(r, n, plan_ranking_band(job), &ranking);
  plan_write_ranking_json(o, &ranking);
  if (base && n > 0) plan_write_change_json(o, plan_ranking_band(job), base, &r[0]);
  ssa_out_printf(o, "\"layouts\":[");
  for (long i = 0; i < n; i++) {
    if (i) ssa_out_char(o, ',');
    json_layout(o, &r[i]);
  }
  ssa_out_printf(o, "]}\n");
  return o->error ? -1 : 0;
}

int plan_write_csv(ssa_out *o, const plan_result *r, long n) {
  ssa_out_printf(
      o, "rank,dp,tp,pp,cp,sp,zero,recompute,microbatches,micro_batch,schedule,"
         "virtual_stages,parameters_bytes,gradients_bytes,optimizer_bytes,activations_bytes,"
         "memory_total_bytes,fits,step_time_s,tokens_per_s,mfu,compute_s,bubble_s,tp_s,cp_s,"
         "pp_s,grad_sync_s,host_s,binding,ep,ep_s,wait_s,shard_group,expert_tp,"
         "recompute_modules\n");
  for (long i = 0; i < n; i++) {
    const plan_result *x = &r[i];
    const mm_layout *l = &x->layout;
    char modules[80] = ""; /* Megatron-Core's, joined by '+' (no comma inside a CSV field) */
    if (l->recompute == MM_RECOMPUTE_SELECTIVE)
      mm_recompute_modules_text(l->recompute_modules, "+", modules, sizeof modules);
    ssa_out_printf(o,
                   "%ld,%d,%d,%d,%d,%d,%d,%s,%d,%d,%s,%d,%zu,%zu,%zu,%zu,%.0f,%d,%.9g,%.9g,%.9g,"
                   "%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%s,%d,%.9g,%.9g,%d,%d,%s\n",
                   i + 1, l->dp, l->tp, l->pp, l->cp, l->sp, l->zero, recompute_name(l->recompute),
                   l->microbatches, l->micro_batch, schedule_name(l),
                   l->schedule == MM_SCHED_INTERLEAVED ? l->virtual_stages : 1, x->mem.parameters,
                   x->mem.gradients, x->mem.optimizer, x->mem.activations, x->memory_total, x->fits,
                   x->step_s, x->tokens_per_s, x->mfu, x->compute_s, x->bubble_s, x->tp_s, x->cp_s,
                   x->pp_s, x->grad_sync_s, x->host_s, x->binding, l->ep > 0 ? l->ep : 1, x->ep_s,
                   x->wait_s, l->shard_group, l->experts > 0 ? mm_expert_tp(l) : 0, modules);
  }
  return o->error ? -1 : 0;
}
