/*
 * ssa_plan.h — the analyzer's plan floor (analyzer/src/plan): `stepscope plan`: the Ultra-Scale
 * Playbook's calculators for the bundled trainer's layouts, with a cost model that a measured run
 * can calibrate.
 *
 * What it answers: for a model on N devices, every layout (dp x tp x pp x cp, ZeRO 0-3,
 * recomputation, micro-batches, schedule, sequence parallelism) with its per-device memory
 * by component (model/memory_model.c: the formulas the trainer's own metadata uses and
 * that equal what it allocates), whether it fits, and its predicted step time, tokens/s
 * and MFU, broken down into compute, pipeline bubble, exposed communication (TP, CP, PP,
 * gradient synchronization) and host overhead, with the constraint that binds.
 *
 * Cost model (docs/plan.md says it in full): per micro-batch, the critical pipeline stage
 * computes its layers' FLOPs (and, on the last stage, the LM head's; recomputation adds
 * forward passes) at an achieved FLOP rate; the schedule adds its fill/drain bubble;
 * TP collectives (4 per layer per micro-batch) are exposed, CP's ring is exposed beyond the
 * attention it overlaps, gradient synchronization is exposed beyond the last micro-batch's
 * backward when overlap is on; each collective costs latency + bytes x bus factor /
 * bandwidth of its group (within a node when the group fits in one). Without calibration
 * the rate is the device's peak x a documented efficiency and the bandwidths come from the
 * device table ("assumed"); with one (plan_calibrate.c, from a traced run) they are the
 * run's measured rate, bandwidths, latency, host overhead and bubble excess.
 */
#ifndef SSA_PLAN_H
#define SSA_PLAN_H

#include <stdio.h>

#include "memory_model.h"
#include "ssa_io.h"

/* A device kind: the roofline defaults. */
typedef struct plan_device {
  const char *name;
  double peak_flops;     /* per device, dense, in the training precision */
  double memory_bytes;   /* device memory */
  double intra_bw;       /* bytes/s per device inside a node (NVLink; shared memory on cpu) */
  double inter_bw;       /* bytes/s per device between nodes */
  double latency_s;      /* per collective */
  double efficiency;     /* achieved / peak FLOP rate assumed without calibration */
  double baseline_bytes; /* runtime baseline per rank: context, libraries, comm buffers */
  int act_bytes;         /* activation storage the trainer uses there: 2 bf16, 4 fp32 */
  int cores;             /* CPU backend: cores of the machine the ranks share (0 for GPUs:
                            one device per rank, never shared); set at run time (--cores,
                            else the planning machine's, assumed) */
  int cores_assumed;     /* 1 when `cores` is the planning machine's, not given */
  int nics_per_node;     /* GPUs: the node's network interfaces, each inter_bw (0: every
                            collective leaving a node gets inter_bw per device, as on cpu) */
  /* compute by shape, for a framework's layouts without calibration (docs/plan.md "Compute
   * by shape"; 0 on cpu: the trainer's single efficiency above) */
  double gemm_efficiency;      /* large bf16 GEMMs' achieved share of peak (measured ceiling) */
  double attention_efficiency; /* fused attention's, per model FLOP (QK^T and PV counted whole) */
  double attention_length;     /* the sequence length attention_efficiency holds at (the table's
                                  2048; 0: a rate measured in a run, taken at the planned length) */
  double hbm_bw;               /* device memory bandwidth, bytes/s: element-wise work */
  double fp8_peak_flops;       /* dense fp8 peak (0: the device has no fp8) */
  int sms;                     /* streaming multiprocessors: one GEMM tile each per wave */
  int tile_rows, tile_cols;    /* a large GEMM's output tile (cuBLAS's 128 x 256 class) */
  /* GPUs: NCCL's network overhead per ring step for the node's host CPU (getNetOverhead in
   * NCCL's src/graph/tuning.cc: 1 us on Intel hosts, 2 us on AMD; 0: NCCL's latency model is
   * not used, the flat latency_s is) */
  double nccl_net_overhead_s;
  /* 1 where cuDNN's fused attention (TransformerEngine's on Hopper) was measured, so that
   * --attention-rate cudnn can charge its rate (plan_fused_attention_rate); 0 elsewhere */
  int cudnn_attention;
} plan_device;

/* The share of a core each rank gets when `ranks` ranks share the device's cores:
 * min(1, cores / ranks); 1 when the device has no cores to share (GPUs). */
double plan_core_share(const plan_device *dev, int ranks);

/* The known devices (docs/plan.md), NULL-terminated by name; NULL if `name` is unknown. */
const plan_device *plan_device_find(const char *name);
const char *plan_device_names(void); /* "h100-sxm|h200|a100-80g|cpu" */
/* The device kind of a run's device name (its trace header), e.g. "NVIDIA H100 80GB HBM3" ->
 * "h100-sxm"; "cpu" for anything else, NULL included. */
const char *plan_device_kind_of_name(const char *device_name);

/* A GEMM ceiling measured from a real run (plan_ceilings.c, `plan --ceilings-from RUN`). */
typedef struct plan_measured_gemm {
  const char *source;  /* the run's path (NULL: none measured) */
  char device[128];    /* the run's device, as its trace names it */
  const char *dtype;   /* "bf16" or "fp8" */
  double peak_flops;   /* that device's dense peak for it (the datasheet's) */
  unsigned long gemms; /* GEMM op instances counted */
  double flops, time_s;
  double share;               /* flops / time_s / peak_flops */
  unsigned long filled_gemms; /* those whose outputs fill the device's waves (quantization
                                 <= 1.10): the ceiling's */
  double ceiling;             /* their FLOP/s over the peak, their small quantization taken out */
} plan_measured_gemm;

/* The fused-attention rate measured from the same run (plan_ceilings.c), per FLOP as the
 * planner counts attention (QK^T and PV over every pair, a backward twice its forward). */
typedef struct plan_measured_attention {
  int measured;               /* 1: ceiling below replaces the table's; 0: why says why not */
  char why[256];              /* when not measured */
  unsigned long forward_ops;  /* causal bf16/fp16 fused-attention op instances counted */
  unsigned long backward_ops; /* the same, backward */
  unsigned long left_out_ops; /* attention ops not counted (not causal, no shapes) */
  double forward_flops, forward_time_s;   /* counted as the planner counts them */
  double backward_flops, backward_time_s; /* (twice the forward's) */
  double forward_share, backward_share;   /* their FLOP/s over the bf16 peak */
  double ceiling; /* the two weighed as the planner charges them: 3 / (1/fwd + 2/bwd) */
} plan_measured_attention;

struct ssa_op_table;
/* Measures the GEMM share and ceiling of a run's op table (bf16, or fp8): 0, or -1 with why in
 * err (a CPU-only trace, a device without known ceilings, under 1 ms of such GEMMs). */
int plan_ceilings_from_ops(const struct ssa_op_table *t, int fp8, plan_measured_gemm *out,
                           char *err, size_t errlen);
/* Measures the fused-attention rate of the same table (its causal forward and backward ops):
 * out->measured 1, or 0 with out->why (none of both, under 1 ms, not causal...). */
void plan_attention_from_ops(const struct ssa_op_table *t, plan_measured_attention *out);

/* What a measured run taught (plan_calibrate.c); a field <= 0 keeps the default. */
typedef struct plan_calibration {
  int present;
  char source[256];      /* the run directory */
  char device_name[128]; /* rank 0's device, as its trace header names it */
  double flops_rate;     /* achieved FLOP/s per rank on the model's math (in the run: with
                            the run's core share, plan_core_share of its ranks per node) */
  double tp_bw, dp_bw, pp_bw, cp_bw; /* measured bus bandwidth per group, bytes/s */
  double latency_s;                  /* smallest collective transfer seen */
  double host_s_per_step;            /* step time no part of the model explains (host, launches) */
  double exposed_comm_s;  /* measured exposed collective time per step, median over ranks */
  double wait_share;      /* descheduled waits: (measured exposed collectives - modelled
                             collectives) / compute on the run's layout, per unit of the
                             time a rank is off a core (1 - core share); 0 unless the run's
                             ranks outnumbered the cores and it had no pipeline */
  double bubble_excess;   /* measured bubble fraction - theory (pipelined runs); with ranks
                             sharing cores, - the shared cores' slot model (fit_host) */
  double bubble_fraction; /* measured bubble / span, median over a pipelined run's ranks */
  int rate_raised;        /* fit_host raised flops_rate: the modelled parts exceeded the step */
  double baseline_bytes;  /* measured runtime baseline per rank */
  double forward_share;   /* forward compute time / (forward + backward), measured (a run
                             without recomputation); what full recomputation repeats */
  double attention_forward_share; /* attention's forward / (forward + backward): what
                             selective recomputation repeats */
  mm_layout layout;               /* the layout the run had */
  double measured_step_s;         /* its median step time */
} plan_calibration;

/* --attention-rate: how a framework's fused attention is charged where cuDNN's rate was measured
 * (docs/plan.md "Compute by shape"). The zero value is the default. */
typedef enum {
  /* cuDNN's kernel rate by length, plus the rest of the time the device's share charges at its
   * attention_length, per token (plan_attention_rest_s): the share was fit on published runs
   * at 2K-8K and holds time that is not the kernel's; that time does not grow with the length */
  PLAN_ATTENTION_SPLIT = 0,
  PLAN_ATTENTION_SHARE, /* the device's share, grown with the length as FlashAttention's rate */
  PLAN_ATTENTION_CUDNN, /* cuDNN's kernel rate alone */
} plan_attention_rate;

/* --ep-dispatcher: how a framework's experts exchange tokens (Megatron-Core's
 * --moe-token-dispatcher-type; plan_comm.c). The zero value is the default. */
typedef enum {
  /* NCCL's all-to-all, one copy a (token, expert) pair: Megatron's alltoall dispatcher */
  PLAN_EP_ALLTOALL = 0,
  /* each rank all-gathers every token of its expert-TP x EP group, with the routing map and
   * probabilities, keeps those for its experts, and reduce-scatters the outputs back: Megatron's
   * allgather dispatcher (its default) */
  PLAN_EP_ALLGATHER,
  /* DeepEP (and HybridEP: Megatron's flex dispatcher): each token once to every rank it goes
   * to and across nodes once to every node, forwarded over NVLink there */
  PLAN_EP_DEEPEP,
} plan_ep_dispatcher;
#define PLAN_EP_DISPATCHERS (PLAN_EP_DEEPEP + 1)

/* A dispatcher's name as --ep-dispatcher and JSON's job.ep_dispatcher spell it. */
const char *plan_ep_dispatcher_name(plan_ep_dispatcher d);

/* The job: a model, a device count and kind, a global batch. */
typedef struct plan_job {
  mm_layout model; /* model fields: layers, hidden, heads, vocab, ffn, seq, max_seq */
  int gpus, gpus_per_node, global_batch;
  plan_device dev;
  plan_calibration cal;
  int overlap; /* DP all-reduce overlapped with backward (the trainer's default) */
  /* a framework's gradient reduction over DP x CP, bytes an element (--grad-reduce-dtype);
   * 0: the framework's own (plan_grad_reduce_bytes) */
  int grad_reduce_bytes;
  /* FSDP's backward_prefetch (--backward-prefetch) for FULL_SHARD: 0 BACKWARD_PRE (torch's
   * default: the next unit's all-gather overlaps the current gradient computation), 1
   * BACKWARD_POST (Composer's default: issued after it, so each backward all-gather is exposed) */
  int backward_prefetch_post;
  /* --framework composer: MosaicML Composer's FSDP as llm-foundry drives it. PyTorch FSDP's
   * conventions (model.framework MM_FW_FSDP) on data parallelism alone, with whole-block
   * activation checkpointing (recompute none or full) and BACKWARD_POST unless
   * --backward-prefetch says otherwise (docs/plan.md "What each framework can run") */
  int composer;
  int fp8; /* a framework's GEMMs in fp8 (--precision fp8): at the fp8 peak; MFU stays
              against the bf16 peak */
  /* Megatron's --tp-comm-overlap (TransformerEngine's userbuffers; needs sequence
   * parallelism): TP's all-gathers and reduce-scatters overlap the GEMMs that consume or
   * produce them (plan_comm.c, docs/plan.md "Frameworks: communication") */
  int tp_comm_overlap;
  /* --ep-dispatcher: how a framework's experts exchange tokens (above) */
  plan_ep_dispatcher ep_dispatcher;
  /* --attention-rate: how a framework's fused attention is charged where cuDNN's rate was
   * measured (plan_fused_attention_rate > 0; elsewhere always the device's share) */
  plan_attention_rate attention_rate;
  /* --ceilings-from RUN: the GEMM ceiling measured there (dev.gemm_efficiency is set from it) */
  plan_measured_gemm gemm_measured;
  plan_measured_attention attention_measured; /* with gemm_measured.source */
  /* --undecided-within: plan_ranking's band; 0: PLAN_BAND_DEFAULT */
  double ranking_band;
} plan_job;

/* A micro-batch's exposed collectives inside one layer, in seconds: TP's, CP's ring, the
 * experts' all-to-alls (plan_communication). They keep the GPU busy while the host issues the
 * layer: under Megatron-Core's host floor the GPU waits for the host only for what they leave. */
typedef struct plan_layer_comm {
  double tp, cp, ep;
} plan_layer_comm;

/* One layout's prediction. Times are seconds per optimizer step. */
typedef struct plan_result {
  mm_layout layout;
  mm_breakdown mem; /* the worst stage's */
  int mem_stage;
  double memory_total; /* mem.peak + runtime baseline */
  double comm_buffers; /* (in mem: the trainer's gradient buckets are counted there) */
  int fits;
  double step_s, tokens_per_s, mfu;
  double compute_s, bubble_s, tp_s, cp_s, pp_s, grad_sync_s, host_s;
  double ep_s;          /* expert parallelism: the token all-to-alls (dispatch, combine) */
  double wait_s;        /* CPU ranks outnumbering cores: waits in collectives for ranks
                           that are descheduled (docs/plan.md) */
  double bubble_theory; /* the schedule's fraction */
  /* [0] a dense layer's, [1] a MoE layer's collectives a micro-batch (plan_communication), which
   * fill the layers' gaps under Megatron-Core's host floor (plan_predict: less host) */
  plan_layer_comm layer_comm[2];
  const char *binding; /* "memory", "compute", "exposed communication", "bubble", "host" */
} plan_result;

/* How many members the DP x CP group of rank 0 has on node 0 (plan_comm.c): FSDP's hybrid
 * shard group (the states sharded inside a node, replicated across nodes). */
int plan_dp_members_in_node(const plan_job *job, const mm_layout *l);

/* Which layout options to enumerate: a field < 0 means "every value". */
typedef struct plan_filter {
  int dp, tp, pp, cp, zero, recompute, microbatches, schedule, virtual_stages, sp;
  int ep;          /* with experts (job->model.experts > 0) */
  int expert_tp;   /* with experts under Megatron: 1 (whole experts), or tp (0 here: either) */
  int shard_group; /* FSDP's hybrid shard group (mm_layout.shard_group; 0: full sharding) */
} plan_filter;
void plan_filter_any(plan_filter *f);

/* Predicts one layout (layout.* set; the model fields are taken from job->model).
 * Returns 0, or -1 with the reason in err when the trainer cannot run it. */
int plan_predict(const plan_job *job, const mm_layout *layout, plan_result *out, char *err,
                 size_t errlen);

/* Every layout of the job allowed by the filter, ranked best first (fitting layouts by
 * tokens/s, then those that do not fit by memory), predicted on the calling thread. *out is
 * malloc'd. Returns the count, or -1 with a message. `why_none` gets, when 0 layouts are
 * valid, the reason of the last refusal seen. */
long plan_enumerate(const plan_job *job, const plan_filter *f, plan_result **out, char *why_none,
                    size_t why_size);

/* plan_enumerate on threads, with progress (plan_sweep.c): the same ranked list whatever the
 * threads. threads: 0 all cores, 1 the calling thread only; progress (may be NULL): called on
 * the calling thread after each batch with the layouts predicted so far and the sweep's total. */
typedef struct plan_sweep_options {
  int threads;
  void (*progress)(void *ctx, long predicted, long total);
  void *ctx;
} plan_sweep_options;
long plan_sweep(const plan_job *job, const plan_filter *f, const plan_sweep_options *opt,
                plan_result **out, char *why_none, size_t why_size);

/* Text table (best first, at most `top` rows), JSON (schema in docs/plan.md) and CSV; the
 * files are written through the analyzer's output stream (ssa_io.h). 0, or -1 after a
 * write error (the stream's). */
void plan_print_table(FILE *f, const plan_job *job, const plan_result *r, long n, long top);
/* base: with --what-if, the run's own layout under the same model (its verdict goes in
 * "what_if"); NULL otherwise */
int plan_write_json(ssa_out *o, const plan_job *job, const plan_result *r, long n,
                    const plan_result *base);
int plan_write_csv(ssa_out *o, const plan_result *r, long n);

/* How far the ranking goes (plan_ranking.c; docs/plan.md "How far the ranking goes"): the
 * fitting layouts predicted within `band` (relative tokens/s) of the best form one undecided
 * group, since the planner's error between two layouts of one job is that large: 10 %, the 75th
 * percentile of that error as measured between two published runs of one model, device and
 * sequence length (bench/plan/published, 9.0 %) and between two layouts of a calibrated CPU run
 * (bench/plan/RESULTS.md, the quiet machine: 10.3 %). */
#define PLAN_BAND_DEFAULT 0.10

/* The interleaved schedule's model chunks per pipeline rank the sweep offers: 2 to 8. The
 * published runs go to 8 (Megatron-Core's Mixtral 8x7B reference mapping, VP 8; Mixtral 8x22B,
 * 7). The model charges more chunks nothing beyond their fill-and-drain sends and in-flight
 * activations (the per-chunk send overheads that make a middle value the best in practice,
 * Megatron-Core's MoE guide, are not modelled), so a larger cap would rank extremes first. A
 * --virtual-stages the user names is predicted past it. */
#define PLAN_MAX_VIRTUAL_STAGES 8
enum {
  PLAN_FIELD_DP,
  PLAN_FIELD_TP,
  PLAN_FIELD_SP,
  PLAN_FIELD_PP,
  PLAN_FIELD_CP,
  PLAN_FIELD_EP,
  PLAN_FIELD_ZERO,
  PLAN_FIELD_SCHEDULE,
  PLAN_FIELD_MICRO_BATCH,
  PLAN_FIELD_RECOMPUTE,
  PLAN_FIELD_SHARD_GROUP,
  PLAN_FIELDS
};
#define PLAN_RANK_VALUES 32 /* distinct values kept per field; more: not listed */
typedef struct plan_field_values {
  int n, overflow;
  int v[PLAN_RANK_VALUES]; /* codes (plan_ranking.c: field_code), in order of first sight */
} plan_field_values;
typedef struct plan_ranking {
  double band;       /* relative: 0.10 = within 10 % of the best's tokens/s */
  long undecided;    /* fitting layouts within the band, the best included; 0: none fits */
  long least_memory; /* index of the one among them needing the least memory; -1 */
  double next_gap;   /* undecided == 1: 1 - the next fitting layout's tokens/s over the best's
                        (as the band counts); -1 when there is no next or the group has several */
  /* per field: the values among the group (open) and those of fitting layouts outside it
   * only (ruled out: every layout with them predicted more than the band slower) */
  plan_field_values open[PLAN_FIELDS], ruled_out[PLAN_FIELDS];
} plan_ranking;
/* job->ranking_band, else PLAN_BAND_DEFAULT */
double plan_ranking_band(const plan_job *job);
void plan_rank_resolution(const plan_result *r, long n, double band, plan_ranking *out);
const char *plan_field_name(int field);
void plan_print_ranking(FILE *f, const plan_ranking *k, const plan_result *r);
/* A --what-if verdict: `after` against `before` (both predicted by the same model) decided only
 * when their tokens/s differ by more than the band, else "undecided". */
void plan_print_change(FILE *f, double band, const plan_result *before, const plan_result *after);
/* The same as `"what_if":{...},` into a JSON object being written. */
void plan_write_change_json(ssa_out *o, double band, const plan_result *before,
                            const plan_result *after);
/* `"ranking":{...},` into a JSON object being written. 0, or -1 after a write error. */
int plan_write_ranking_json(ssa_out *o, const plan_ranking *k);

/* A layout in the trainer's words ("dp2 tp2 pp2 cp1 zero1 1f1b m8 recompute=none sp"). */
void plan_layout_name(const mm_layout *l, char *buf, size_t size);

/* Calibrates on a traced stepscope-train run (plan_calibrate.c): loads and analyzes it
 * with `threads` threads and the importers' options `import` (ssa_import.h; NULL: the
 * defaults). Returns 0, or -1 with a message. */
struct ssa_import_options;
int plan_calibrate_from_run(const char *run_dir, int threads,
                            const struct ssa_import_options *import, plan_calibration *cal,
                            char *err, size_t errlen);

/* The layout of a stepscope-train run from its configuration JSON (the trace header's,
 * trainer/config.c: config_to_json): 0, or -1 with a reason when the JSON does not describe
 * a model (plan_calibrate.c). */
int plan_layout_of_config(const char *json, mm_layout *l, char *err, size_t errlen);

/* Completes a calibration for the job's device: the step time of the measured layout that
 * no modelled part explains becomes host overhead per micro-batch, so that the model
 * reproduces the measured run's median step time on its own layout. */
void plan_calibration_fit_host(plan_job *job);

/* FLOPs of one micro-batch's forward + backward (+ recomputation) on pipeline rank `stage`
 * of layout l, per TP rank: what the calibration divides by its measured compute time. */
double plan_stage_flops_per_microbatch(const mm_layout *l, int stage);

/* The exposed communication of a layout (plan_comm.c): fills out's tp_s, cp_s, pp_s, ep_s and
 * grad_sync_s for layout l (job's devices, calibration and overlap), given the critical stage's
 * micro-batch time t_mb, the achieved FLOP rate per rank `rate` (CP's ring hides behind the
 * attention at that rate) and out->mem_stage (the stage whose gradients are synchronized).
 * Returns 0, or -1 with a message. */
int plan_communication(const plan_job *job, const mm_layout *l, double t_mb, double rate,
                       plan_result *out, char *err, size_t errlen);

/* Bytes a gradient element takes in a framework's data-parallel reduction: --grad-reduce-dtype,
 * else the framework's own (Megatron's fp32 main_grad, FSDP's fp32 reduce dtype, DeepSpeed's
 * bf16 gradients). */
int plan_grad_reduce_bytes(const plan_job *job);

/* The share by which compute beside an overlapped data-parallel collective runs slower than
 * alone (plan_comm.c; docs/plan.md "Frameworks: communication"): a collective costs its
 * exposed part, max(tail, collective - compute), plus this x its overlapped part (the rest). */
extern const double plan_overlap_slowdown;

/* Shape-dependent costs of a framework's step (plan_shape_costs.c, docs/plan.md "Compute by
 * shape"). plan_gemm_quantization: the time of a GEMM with a rows x cols output over its FLOPs'
 * share of whole waves of tiles (>= 1; 1 without an SM count). plan_head_gemm_passes: the LM
 * head's GEMM time for `tokens` tokens (one forward, the input and the weight gradients) in
 * units of its forward GEMM FLOPs at the ceiling rate. plan_layer_gemm_s: the seconds
 * a layer's GEMMs take on one rank for `tokens` tokens (`forwards` forward passes, the input and
 * the weight gradients), each pass the longer of its FLOPs at `rate` slowed by its own
 * quantization and its HBM traffic (the roofline; `moe`: the layer is a mixture of experts,
 * whose router sees every token and whose experts' grouped GEMMs see only the tokens routed to
 * them). plan_optimizer_step_s: the Adam
 * update of the parameters pipeline rank `stage` updates, as HBM traffic. */
double plan_gemm_quantization(const plan_device *dev, double rows, double cols);
double plan_head_gemm_passes(const plan_device *dev, const mm_layout *l, double tokens);
double plan_layer_gemm_s(const plan_device *dev, const mm_layout *l, double tokens, int forwards,
                         int moe, double rate);
/* One forward pass of a layer's MLP GEMMs alone (a dense block's two; a mixture's router and
 * experts), as plan_layer_gemm_s charges them: what recomputing the MLP or the mixture of experts
 * (Megatron-Core's --recompute-modules mlp, moe) repeats. */
double plan_layer_mlp_forward_s(const plan_device *dev, const mm_layout *l, double tokens, int moe,
                                double rate);
double plan_optimizer_step_s(const plan_device *dev, const mm_layout *l, int stage);
/* The fused attention's rate on the length its kernel runs on (seq / cp positions: context
 * parallelism's ring runs it on chunks) over its rate at `at` positions, the length the device's
 * attention share holds at (dev->attention_length; at <= 0: the whole sequence, seq). */
double plan_attention_length_factor(const mm_layout *l, double at);
/* cuDNN's fused attention's measured rate, FLOP/s per planner-counted FLOP (every query-key
 * pair, the backward two forwards) at the length it runs on (seq / cp), where it was measured:
 * Megatron-Core (TransformerEngine's attention) on Hopper with heads of 128 (plan_shape_costs.c).
 * 0 elsewhere. Charged unless --attention-rate share (plan_job.attention_rate). */
double plan_fused_attention_rate(const plan_device *dev, const mm_layout *l);
/* --attention-rate split: the time the device's attention share charges at its attention_length
 * beyond cuDNN's kernel there, for one forward pass of a layer's attention over `tokens` tokens
 * on one TP rank, whatever the length (per token and kernel run, cp runs in CP's ring; not per
 * query-key pair); 0 where cuDNN's rate was not measured or the device has no attention_length. */
double plan_attention_rest_s(const plan_device *dev, const mm_layout *l, double tokens);
/* A sliding-window layer's attention work over a causal layer's, in the key tiles
 * FlashAttention visits (<= 1; 1 without a window or one that covers the sequence). */
double plan_sliding_window_share(const mm_layout *l);

/* Shared by the compute and communication models (plan_model.c): whether global layer `layer`
 * is a mixture of experts (trainer/config.c: config_layer_is_moe), the MLP width, and the
 * attention FLOPs (QK^T and PV) of one layer's forward for `tokens` tokens on one TP rank. */
int plan_layer_is_moe(const mm_layout *l, int layer);
/* Whether global layer `layer` (0-based) attends to a sliding window (mm_layout.window,
 * full_attention_every: Megatron-Core's is_layer_window_attention). */
int plan_layer_is_sliding(const mm_layout *l, int layer);
double plan_ffn(const mm_layout *l);
double plan_attention_flops(const mm_layout *l, double tokens);
/* One pass of a dense layer's GEMMs (its forward) for one micro-batch on one TP rank, in
 * seconds: at the compute-by-shape rate with its tile quantization, else at `rate` (FLOP/s). */
double plan_layer_gemm_forward_s(const plan_job *job, const mm_layout *l, double rate);

#endif /* SSA_PLAN_H */
