/*
 * plan_comm.c — the planner's cluster communication model (ssa_plan.h: plan_communication;
 * docs/plan.md "Clusters" and "Frameworks: communication").
 *
 * What it is for: a layout's collectives cost time that its compute may or may not hide; this
 * file says how long each group's traffic takes and how much of it is exposed. The links: a
 * group whose members share a node talks over the intra-node links (NVLink/NVSwitch); one that
 * spans nodes is carried by the NICs its members have there (hierarchical collectives: a ring
 * crosses each node once per channel). The traffic: TP's per-layer all-reduces, CP's ring of
 * K/V blocks beyond the attention it overlaps, the pipeline's fill and drain sends, the
 * experts' all-to-alls, and the gradient synchronization, the trainer's (buckets of fp32
 * gradients) or a real framework's (ZeRO stages' reduce-scatters and parameter all-gathers).
 * plan_model.c computes the compute time and calls plan_communication for the rest.
 */
#include "ssa_plan.h"

#include <math.h>

/* The process groups of a layout. */
/* GROUP_TP_EP: the expert-TP x EP group (Megatron's tp_ep_group), which the allgather
 * dispatcher gathers tokens over */
typedef enum { GROUP_TP, GROUP_CP, GROUP_PP, GROUP_DP, GROUP_EP, GROUP_TP_EP } group_kind;

/* The size of a layout's group of `kind`. */
static int group_size(const mm_layout *l, int kind) {
  return kind == GROUP_TP      ? l->tp
         : kind == GROUP_CP    ? l->cp
         : kind == GROUP_PP    ? l->pp
         : kind == GROUP_DP    ? l->dp * l->cp
         : kind == GROUP_TP_EP ? mm_expert_tp(l) * l->ep
                               : l->ep;
}

/* Rank r's coordinates in the layout. Ranks are laid out tp fastest, then cp, then, as the
 * framework does: Megatron-Core's default order "tp-cp-ep-dp-pp" (parallel_state.py
 * initialize_model_parallel; the experts' ranks inside dp), torchtitan's device mesh
 * (pp, dp, cp, tp: the pipeline outermost) and DeepSpeed's PipeModelDataParallelTopology
 * (pipe, data, model) put dp before pp; the stepscope trainer puts pp before dp (model_grid_of
 * in trainer/model.c). So a framework's data-parallel and expert groups share a node before
 * its pipeline's stages do. */
static void rank_coords(const mm_layout *l, int r, int *t, int *c, int *p, int *d) {
  *t = r % l->tp;
  *c = r / l->tp % l->cp;
  if (l->framework == MM_FW_STEPSCOPE) {
    *p = r / (l->tp * l->cp) % l->pp;
    *d = r / (l->tp * l->cp * l->pp);
  } else {
    *d = r / (l->tp * l->cp) % l->dp;
    *p = r / (l->tp * l->cp * l->dp);
  }
}

/* How many members the group of rank 0 has on node 0 (nodes of --gpus-per-node devices). An EP
 * group is ep consecutive DP ranks, or with experts whole on a rank (expert TP 1, Megatron's MoE
 * parallel folding) ep consecutive ranks of the stage's tp x cp x dp; the expert-TP x EP group
 * is the EP group with each member's TP ranks (with experts whole, the EP group). */
static int group_members_in_node(const plan_job *job, const mm_layout *l, int kind) {
  int G = job->gpus_per_node > 0 ? job->gpus_per_node : 8, N = l->dp * l->tp * l->pp * l->cp;
  if ((kind == GROUP_EP || kind == GROUP_TP_EP) && mm_expert_tp(l) != l->tp) {
    int stage = l->tp * l->cp * l->dp; /* a framework's stage is consecutive ranks */
    return G < l->ep ? G : l->ep < stage ? l->ep : stage;
  }
  int members = 0;
  for (int r = 0; r < G && r < N; r++) {
    int t, c, p, d;
    rank_coords(l, r, &t, &c, &p, &d);
    members += kind == GROUP_TP   ? c == 0 && p == 0 && d == 0
               : kind == GROUP_CP ? t == 0 && p == 0 && d == 0
               : kind == GROUP_PP ? t == 0 && c == 0 && d == 0
               : kind == GROUP_DP ? t == 0 && p == 0
               : kind == GROUP_EP ? t == 0 && c == 0 && p == 0 && d < l->ep
                                  : c == 0 && p == 0 && d < l->ep;
  }
  return members;
}

int plan_dp_members_in_node(const plan_job *job, const mm_layout *l) {
  return group_members_in_node(job, l, GROUP_DP);
}

/* The network bandwidth one device of a node has when all of them use it at once: the node's
 * NICs shared by its devices (without NICs, cpu: inter_bw a device). */
static double nic_share(const plan_job *job) {
  const plan_device *dev = &job->dev;
  int G = job->gpus_per_node > 0 ? job->gpus_per_node : 8;
  return dev->nics_per_node > 0 ? dev->inter_bw * dev->nics_per_node / G : dev->inter_bw;
}

/* The bus bandwidth a group's collectives get. Inside a node: the intra-node links. Across
 * nodes, with the device's NICs known: a ring (NCCL's, one channel per NIC) crosses each node
 * once per channel, so a node's inter-node bytes are one device's bus bytes, carried by the
 * NICs this group has there (nics x members in the node / devices per node: the node's other
 * groups use the rest), at most the intra-node bandwidth; a pipeline's point-to-point sends
 * use one NIC. Without NICs (cpu): inter_bw per device. */
static double group_bw(const plan_job *job, const mm_layout *l, int kind, double calibrated) {
  if (calibrated > 0) return calibrated;
  int members = group_members_in_node(job, l, kind);
  const plan_device *dev = &job->dev;
  if (members >= group_size(l, kind)) return dev->intra_bw;
  if (dev->nics_per_node <= 0) return dev->inter_bw;
  return fmin(dev->intra_bw, nic_share(job) * (kind == GROUP_PP ? 1 : members));
}

/* The latency of one of a group's large collectives as NCCL's own tuning model has it
 * (ncclTopoTuneModel in src/graph/tuning.cc, its default constants, the Simple protocol of
 * large messages): a ring all-gather or reduce-scatter of n ranks on `nodes` nodes takes the
 * ring base latency, 8.4 us, plus n - 1 steps, nodes - 1 of them between nodes at 14 us and the
 * rest inside a node at 3.4 us (NVLink), or at 3 x the host's network overhead when that is
 * larger and the ring leaves the node; a ring all-reduce twice the steps; NCCL's tree
 * all-reduce 2 ((n / nodes - 1) 4 us + log2(nodes) 14 us), and NCCL takes the shorter. So a
 * collective over thousands of ranks costs milliseconds of latency (a ring's steps grow with
 * the ranks) where a flat per-collective latency said microseconds. Devices without
 * nccl_net_overhead_s, and calibrated runs, keep the flat latency. */
static double nccl_latency_of(const plan_job *job, int n, int per_node, int allreduce,
                              double flat) {
  const plan_device *dev = &job->dev;
  if (dev->nccl_net_overhead_s <= 0 || job->cal.latency_s > 0 || n <= 1) return flat;
  if (per_node < 1) per_node = 1;
  int nodes = (n + per_node - 1) / per_node;
  double intra = 3.4e-6, inter = 14e-6;
  if (nodes > 1) intra = fmax(intra, 3.0 * dev->nccl_net_overhead_s);
  int steps = (allreduce ? 2 : 1) * (n - 1), inter_steps = (allreduce ? 2 : 1) * (nodes - 1);
  double ring = 8.4e-6 + (steps - inter_steps) * intra + inter_steps * inter;
  if (!allreduce) return ring;
  double tree = 2.0 * ((per_node - 1) * 4.0e-6 + floor(log2((double)nodes)) * 14e-6);
  return fmin(ring, tree);
}

static double nccl_latency(const plan_job *job, const mm_layout *l, int kind, int allreduce,
                           double flat) {
  return nccl_latency_of(job, group_size(l, kind), group_members_in_node(job, l, kind), allreduce,
                         flat);
}

/* One of the experts' all-to-alls, each rank of the EP group sending `bytes`, 1 / ep of them to
 * itself: to the peers in its node over the intra-node links and to the others over its share of
 * the node's NICs, both at once. NCCL runs an all-to-all as grouped point-to-point sends, one a
 * peer, so unlike a ring's (group_bw: one device's bytes cross each node boundary) every rank's
 * off-node bytes go through the NICs: an EP group of 16 on two nodes of 8 sends half of its
 * bytes at 50 GB/s a device, not all of them at 400. A run's calibrated bandwidth stands. */
static double alltoall_s(const plan_job *job, const mm_layout *l, double bytes, double latency) {
  if (job->cal.dp_bw > 0) return latency + bytes * (l->ep - 1) / l->ep / job->cal.dp_bw;
  int members = group_members_in_node(job, l, GROUP_EP);
  double inside = bytes * (members - 1) / l->ep / job->dev.intra_bw;
  double across = bytes * (l->ep - members) / l->ep / nic_share(job);
  return latency + fmax(inside, across);
}

/* The probability that a token's top_k experts (distinct, uniformly random: balanced routing)
 * include one of `held` given experts of the E: 1 - C(E - held, k) / C(E, k). */
static double routed_to_any(const mm_layout *l, double held) {
  double miss = 1;
  for (int i = 0; i < l->top_k; i++)
    miss *= fmax(0.0, (l->experts - held - i) / (l->experts - i));
  return 1 - miss;
}

/* One of DeepEP's (or HybridEP's) dispatches or combines of `tokens` tokens of `token_bytes`
 * each a rank (Megatron-Core's flex dispatcher; DeepSeek-V3's report, sec. 3.2.2): a token goes
 * to each rank holding one of its experts once, not once an expert, and across nodes once to
 * each node holding one, on the NIC of the same local rank there, which forwards it over
 * NVLink to the ranks that need it. A rank's NVLink bytes are its own tokens to the ranks of its
 * node and, by symmetry, the tokens it forwards for the other nodes: tokens x (members - 1) x
 * P(rank) x nodes; its network bytes tokens x (nodes - 1) x P(node). Both at once. */
static double deepep_s(const plan_job *job, const mm_layout *l, double tokens, double token_bytes,
                       double latency) {
  int members = group_members_in_node(job, l, GROUP_EP);
  int nodes = (l->ep + members - 1) / members;
  double held = (double)l->experts / l->ep; /* a rank's experts */
  double rank = routed_to_any(l, held), node = routed_to_any(l, held * members);
  double inside = tokens * token_bytes * (members - 1) * rank * nodes / job->dev.intra_bw;
  double across = tokens * token_bytes * (nodes - 1) * node / nic_share(job);
  return latency + fmax(inside, across);
}

/* One MoE layer's token exchange for a micro-batch under Megatron's allgather dispatcher
 * (MoEAllGatherTokenDispatcher, megatron/core/transformer/moe/token_dispatcher.py): forward,
 * each rank of the expert-TP x EP group of n gathers every member's `sent` tokens (hidden
 * states), their routing map (a byte an expert) and their probabilities, keeps the tokens
 * routed to its experts, and reduce-scatters its experts' outputs back (the exchange takes
 * the place of the MLP's sequence-parallel gather and reduce-scatter); backward,
 * reduce-scatters of the hidden states' and probabilities' gradients and an all-gather of the
 * outputs'. Ring collectives on the group, each rank receiving or sending (n - 1) x sent rows:
 * n / top_k times an all-to-all's bytes, every token to every rank whether routed there or
 * not. Recomputing the mixture of experts gathers and reduce-scatters again. */
static double allgather_exchange_s(const plan_job *job, const mm_layout *l, double sent, double es,
                                   int again, double flat_latency) {
  int n = group_size(l, GROUP_TP_EP);
  double bw = group_bw(job, l, GROUP_TP_EP, job->cal.dp_bw);
  double lat = nccl_latency(job, l, GROUP_TP_EP, 0, flat_latency);
  double rows = sent * (n - 1) / bw; /* seconds a byte of row width */
  double hidden = lat + rows * l->hidden * es, probs = lat + rows * l->experts * es,
         map = lat + rows * l->experts;
  double forward = 2.0 * hidden + probs + map, backward = 2.0 * hidden + probs;
  return (1 + again) * forward + backward;
}

/* A collective of `bytes` on a group of n ranks: latency + bus bytes / bandwidth. */
static double coll_time(double bytes, double bus_factor, double bw, double latency) {
  return latency + bytes * bus_factor / bw;
}

/* The parameters a framework moves in one bucket of its data-parallel traffic, at most the
 * stage's psi: Megatron-Core's DDP buckets, max(40M, 1M x dp) parameters
 * (DistributedDataParallelConfig.bucket_size); DeepSpeed's reduce/allgather_bucket_size, 5e8
 * elements; PyTorch DDP's (FSDP NO_SHARD here) bucket_cap_mb, 25 MiB of fp32 gradients; FSDP's
 * SHARD_GRAD_OP/FULL_SHARD and DeepSpeed's ZeRO-3, one wrapped unit (a block: psi / units). */
static double dp_bucket_params(const mm_layout *l, double psi, int units) {
  double n = (double)l->dp * l->cp, bucket = psi / units;
  if (l->framework == MM_FW_MEGATRON)
    bucket = fmax(40e6, 1e6 * n);
  else if (l->framework == MM_FW_DEEPSPEED && l->zero < 3)
    bucket = 5e8;
  else if (l->framework == MM_FW_FSDP && l->zero == 0)
    bucket = 25.0 * 1048576.0 / 4.0;
  return fmin(bucket, psi);
}

/* A real framework's data-parallel traffic per step, exposed beyond the compute it overlaps
 * (docs/plan.md "Frameworks: communication"): psi parameters of the stage on the DP x CP group
 * of n; gradients reduced in fp32 (Megatron's main_grad, FSDP's default reduce dtype) or bf16
 * (DeepSpeed, the ZeRO paper). ZeRO-0: an all-reduce during the last micro-batch's backward.
 * ZeRO-1/2 (Megatron's distributed optimizer): a reduce-scatter of the gradients during that
 * backward, an all-gather of the bf16 parameters during the next forward. FSDP's NO_SHARD and
 * SHARD_GRAD_OP without a pipeline do theirs in every micro-batch (below). ZeRO-3 (FSDP
 * FULL_SHARD, DeepSpeed stage 3): every micro-batch gathers the bf16 parameters in its forward
 * and again in its backward (exposed whole under FSDP's BACKWARD_POST), and reduce-scatters
 * its gradients in its backward. Whatever the
 * overlap, the first bucket gathered has no compute before it and the last bucket reduced none
 * after it: each is exposed whole (its `tail`); what overlaps slows the compute beside it
 * (overlap_cost). */
int plan_grad_reduce_bytes(const plan_job *job) {
  if (job->grad_reduce_bytes > 0) return job->grad_reduce_bytes;
  return job->model.framework == MM_FW_DEEPSPEED ? 2 : 4;
}

/* Compute that runs beside a collective runs slower than alone: the collective's kernels hold
 * SMs (NCCL: a thread block per channel) and memory bandwidth while the GEMMs run. Lee et al.
 * 2025 ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
 * Learning", arXiv 2507.03114) measured it with GPT and LLaMA models on A100, H100, MI250 and
 * MI210: overlapped computation 18.9 % slower on average, 40 % at most. The planner charges that
 * average on the compute each overlapped data-parallel collective runs beside. Not fitted to the
 * published runs (bench/plan/published gives the figures at 0.1 and 0.3 as well). */
const double plan_overlap_slowdown = 0.189;

/* A collective of `comm` seconds beside `compute` seconds of compute, `tail` of it (its first
 * or last bucket) with nothing to overlap: exposed max(tail, comm - compute), and the rest
 * (exposed + overlapped = comm) runs beside the compute and slows it. */
static double overlap_cost(double comm, double compute, double tail) {
  double exposed = fmax(tail, comm - compute);
  return exposed + plan_overlap_slowdown * fmax(0.0, comm - exposed);
}

static double framework_sync(const plan_job *job, const mm_layout *l, int stage, double t_mb,
                             double flat_lat) {
  double n = (double)l->dp * l->cp, psi = mm_framework_stage_params(l, stage);
  /* one gather or reduce-scatter, and one all-reduce (ZeRO-0), as NCCL's model has them */
  double lat = nccl_latency(job, l, GROUP_DP, 0, flat_lat);
  double lat_ar = nccl_latency(job, l, GROUP_DP, 1, flat_lat);
  double bw = group_bw(job, l, GROUP_DP, job->cal.dp_bw);
  double grad = plan_grad_reduce_bytes(job);
  int blocks = mm_stage_layers(l, stage) + 1;
  int hybrid = l->shard_group > 0 && l->shard_group < n;
  /* FSDP's hybrid sharding: the gathers and reduce-scatters inside the shard group (a node's
   * DP members, or a group spanning nodes with all of them), then the replicas' all-reduce */
  const plan_device *dev = &job->dev;
  int node = 0;     /* hybrid: the DP group's members in a node */
  double share = 0; /* hybrid: the network bandwidth one rank of a node has */
  if (hybrid) {
    node = group_members_in_node(job, l, GROUP_DP);
    share = nic_share(job);
    int S = l->shard_group;
    n = S;
    lat = nccl_latency_of(job, S, S < node ? S : node, 0, flat_lat);
    bw = S <= node ? dev->intra_bw : fmin(dev->intra_bw, share * node);
  }
  double shard = (n - 1) / n / bw, fwd = t_mb / 3, bwd = 2 * t_mb / 3;
  double bucket = dp_bucket_params(l, psi, blocks);
  double colls = ceil(psi / bucket - 1e-9); /* one collective a bucket (FSDP: a block) */
  double gather = colls * lat + 2.0 * psi * shard, reduce = colls * lat + grad * psi * shard;
  double gather_tail = lat + 2.0 * bucket * shard, reduce_tail = lat + grad * bucket * shard;
  if (hybrid) {
    /* ... and each reduced shard all-reduced across the replicas (one rank a node when the
     * shard group holds the node's DP members; torch's HSDP: after the reduce-scatter, on the
     * same stream), over the NICs those ranks have there */
    int replicas = l->dp * l->cp / l->shard_group;
    int per_node = l->shard_group >= node ? 1 : node / l->shard_group; /* replicas a node */
    double rbw = per_node >= replicas ? dev->intra_bw : fmin(dev->intra_bw, share * per_node);
    double rlat = nccl_latency_of(job, replicas, per_node, 1, flat_lat);
    double across = 2.0 * grad * (replicas - 1) / replicas / rbw / n; /* a parameter's shard */
    reduce += colls * rlat + psi * across;
    reduce_tail += rlat + bucket * across;
  }
  if (l->zero >= 3) {
    /* FSDP's BACKWARD_POST issues a unit's backward all-gather only after the previous unit's
     * gradient computation, and the unit's computation waits for it: every backward gather is
     * exposed, the reduce-scatters overlap the next unit's computation (torch's BackwardPrefetch
     * docs); BACKWARD_PRE (and DeepSpeed's prefetch) overlaps both with the backward */
    int post = job->backward_prefetch_post && l->framework == MM_FW_FSDP;
    double backward = post ? gather + overlap_cost(reduce, bwd, reduce_tail)
                           : overlap_cost(gather + reduce, bwd, reduce_tail);
    return l->microbatches * (overlap_cost(gather, fwd, gather_tail) + backward);
  }
  /* Without a pipeline, torch FSDP reduces in every micro-batch's backward (unless the loop
   * enters no_sync(), which Composer does only for DDP modules: ddp_sync_context returns at
   * once for FSDP), and SHARD_GRAD_OP then frees the gathered parameters
   * (_should_free_in_backward: _sync_gradients), so each micro-batch gathers them again in its
   * forward. Under a pipeline schedule (torch.distributed.pipelining's
   * backward_maybe_with_nosync: "accumulate gradients on previous steps and reduce them on the
   * last step"; the Llama 3 paper's framework), as Megatron and DeepSpeed, once, in the last
   * micro-batch's backward. */
  int syncs = l->framework == MM_FW_FSDP && l->pp == 1 ? l->microbatches : 1;
  if (l->zero == 0) {
    double allreduce = colls * lat_ar + 2.0 * grad * psi * shard;
    double allreduce_tail = lat_ar + 2.0 * grad * bucket * shard;
    return syncs * (job->overlap ? overlap_cost(allreduce, bwd, allreduce_tail) : allreduce);
  }
  return syncs * ((job->overlap ? overlap_cost(reduce, bwd, reduce_tail) : reduce) +
                  overlap_cost(gather, fwd, gather_tail));
}

/* Megatron's --tp-comm-overlap, one layer and micro-batch (TransformerEngine's userbuffers,
 * its default configuration: transformer_engine/pytorch/module/base.py initialize_ub). With
 * sequence parallelism a layer's forward all-gathers the input of the qkv and fc1 GEMMs and
 * reduce-scatters the output of the projection and fc2 GEMMs: t, an all-reduce's time, is two
 * of them. The all-gathers are ring exchanges on the copy engines, a chunk arriving while the
 * previous chunk's GEMM runs; the reduce-scatters are pipelined in 4 splits, the last split's
 * exposed; in backward the gathers and reduce-scatters overlap the input- and weight-gradient
 * GEMMs (ring exchange and "bulk"). So a pass exposes what its GEMMs cannot hide, at least the
 * reduce-scatters' last splits in forward (2 x (t / 2) / 4). The pipelined and bulk overlaps
 * run on 16 SMs (num_sm) while they last, which the GEMMs lose: 16 / SMs of their duration
 * (the forward's reduce-scatters, t; backward's bulk ones, t). Full recomputation runs the
 * forward's again. (plan_predict refuses a TP group that spans nodes: userbuffers reach the TP
 * peers' buffers through CUDA multicast or IPC handles, inside one NVLink domain.) */
static double tp_overlapped(const plan_job *job, const mm_layout *l, double t, double rate) {
  double gemm = plan_layer_gemm_forward_s(job, l, rate);
  double sm = job->dev.sms > 0 ? 16.0 / job->dev.sms : 0.0;
  double forward = fmax(t / 4.0, 2.0 * t - gemm) + sm * t;
  double backward = fmax(0.0, 2.0 * t - 2.0 * gemm) + sm * t;
  return forward * (l->recompute == MM_RECOMPUTE_FULL ? 2 : 1) + backward;
}

int plan_communication(const plan_job *job, const mm_layout *l, double t_mb, double rate,
                       plan_result *out, char *err, size_t errlen) {
  int trainer = l->framework == MM_FW_STEPSCOPE, M = l->microbatches;
  int V = l->schedule == MM_SCHED_INTERLEAVED ? l->virtual_stages : 1;
  double lat = job->cal.latency_s > 0 ? job->cal.latency_s : job->dev.latency_s;
  double tokens = (double)l->micro_batch * l->seq / l->cp;
  double es = l->act_bytes;
  int layers_stage = trainer ? l->layers / l->pp : mm_stage_layers(l, mm_fullest_stage(l));
  int nmoe_stage = 0;
  for (int k = 0; k < layers_stage; k++)
    nmoe_stage += plan_layer_is_moe(l, out->mem_stage * layers_stage + k);
  /* with experts whole on a rank (expert TP 1) a MoE block's MLP has no TP collectives: the
   * tokens stay sequence-parallel through the dispatch, only its attention's remain (half);
   * the allgather dispatcher's exchange over expert TP x EP takes their place too */
  int whole_experts = l->experts > 0 && mm_expert_tp(l) != l->tp;
  int allgather = l->experts > 0 && l->ep > 1 && job->ep_dispatcher == PLAN_EP_ALLGATHER;
  int moe_mlp_without_tp = whole_experts || allgather;
  if (l->tp > 1) {
    double bw = group_bw(job, l, GROUP_TP, job->cal.tp_bw);
    int per_layer = 4 + (l->recompute == MM_RECOMPUTE_FULL ? 2 : 0);
    double t = coll_time(tokens * l->hidden * es, 2.0 * (l->tp - 1) / l->tp, bw, lat);
    double layer =
        job->tp_comm_overlap && !trainer ? tp_overlapped(job, l, t, rate) : per_layer * t;
    double layers = layers_stage - (moe_mlp_without_tp ? 0.5 * nmoe_stage : 0.0);
    out->tp_s = (double)M * layers * layer;
    out->layer_comm[0].tp = layer;
    out->layer_comm[1].tp = moe_mlp_without_tp ? 0.5 * layer : layer;
  }
  if (l->cp > 1) {
    double bw = group_bw(job, l, GROUP_CP, job->cal.cp_bw);
    /* K and V of the rank's chunks, kv_heads x head_dim wide (GQA's narrower K and V) */
    double kv = 2.0 * tokens * (mm_kv_width(l) / l->tp) * es;
    double comm = 3.0 * (l->cp - 1) * (lat + kv / bw); /* forward, and kv + dkv back */
    double att = plan_attention_flops(l, tokens);
    double hidden_by = 3.0 * att / rate;
    /* under a framework the ring's last hop in backward (the final dK, dV) has no attention
     * left to hide behind */
    double last_hop = trainer ? 0.0 : lat + kv / bw;
    out->cp_s = (double)M * layers_stage * fmax(last_hop, comm - hidden_by);
    out->layer_comm[0].cp = out->layer_comm[1].cp = fmax(last_hop, comm - hidden_by);
  }
  if (l->pp > 1) {
    double bw = group_bw(job, l, GROUP_PP, job->cal.pp_bw);
    double t = lat + tokens * l->hidden * es / bw;
    out->pp_s = 2.0 * (l->pp * V - 1) * t; /* fill and drain cross every boundary */
    /* a framework's non-interleaved 1F1B waits for each micro-batch's send and receive in the
     * steady state too (Megatron-Core's schedule refuses overlap_p2p_comm without interleaving;
     * the interleaved one overlaps them) */
    if (!trainer && V == 1) out->pp_s += 2.0 * M * t;
  }
  /* experts: per MoE layer and micro-batch, four token all-to-alls (dispatch and combine,
   * forward and backward; each rank sends its tokens x K rows, (ep-1)/ep of them away:
   * alltoall_s; or as DeepEP does: deepep_s) and the counts exchange (latency), or the
   * allgather dispatcher's gathers and reduce-scatters (allgather_exchange_s), on the
   * critical path; EP groups are
   * consecutive DP ranks (consecutive ranks of the stage with expert TP 1) */
  double expert_grad_bytes = 0;
  if (l->experts > 0) {
    double F = plan_ffn(l), C = l->hidden;
    if (trainer) /* a framework's experts are in framework_sync's parameters */
      expert_grad_bytes = 4.0 * nmoe_stage * (l->experts / l->ep) * (2.0 * C * F + F + C);
    if (l->ep > 1) {
      /* recomputing the mixture of experts (full recomputation, or selective's
       * --recompute-modules moe) dispatches and combines its tokens again in backward */
      int again = mm_recomputes(l, MM_RC_MOE);
      double t;
      if (allgather) { /* each rank gathers the group's sequence-parallel shares */
        t = allgather_exchange_s(job, l, tokens / (l->sp ? l->tp : 1), es, again, lat);
      } else { /* each dispatches its sequence-parallel share when its experts are whole */
        double sent = tokens / (whole_experts ? l->tp : 1);
        double one = job->ep_dispatcher == PLAN_EP_DEEPEP
                         ? deepep_s(job, l, sent, C * es, lat)
                         : alltoall_s(job, l, sent * l->top_k * C * es, lat);
        t = (4.0 + 2.0 * again) * one + (1.0 + again) * lat;
      }
      int most = 0; /* the stage with the most MoE layers sets the pace */
      for (int s = 0; s < l->pp; s++) {
        int c = 0;
        for (int k = 0; k < layers_stage; k++)
          c += plan_layer_is_moe(l, s * layers_stage + k);
        if (c > most) most = c;
      }
      out->ep_s = (double)M * most * t;
      out->layer_comm[1].ep = t;
    }
  }
  int n = l->dp * l->cp;
  if (n > 1 && !trainer)
    out->grad_sync_s = framework_sync(job, l, out->mem_stage, t_mb, lat);
  else if (n > 1) {
    double bw = group_bw(job, l, GROUP_DP, job->cal.dp_bw);
    mm_layout unsharded = *l;
    unsharded.zero = 0;
    mm_breakdown u;
    if (mm_rank_memory(&unsharded, out->mem_stage, &u, err, errlen) != 0) return -1;
    /* fp32 gradients of the stage's dense weights (the experts' go over EDP, below) */
    double grad_bytes = (double)u.gradients - expert_grad_bytes;
    double buckets = fmax(1.0, grad_bytes / (l->bucket_mb * 1048576.0));
    double sync = buckets * lat + grad_bytes * 2.0 * (n - 1) / n / bw; /* RS + AG = AR */
    double exposed = sync;
    if (job->overlap) /* buckets go while the last micro-batch's backward runs */
      exposed = fmax(0.0, sync - (2.0 / 3.0) * t_mb);
    if (l->zero >= 3) /* parameters gathered again in forward, prefetched over compute */
      exposed += fmax(0.0, grad_bytes * (n - 1) / n / bw - (1.0 / 3.0) * t_mb * M);
    out->grad_sync_s = exposed;
  }
  int edp = l->experts > 0 ? l->dp / l->ep : 1;
  if (edp > 1 && expert_grad_bytes > 0) { /* after backward, on the compute stream */
    double bw = group_bw(job, l, GROUP_DP, job->cal.dp_bw);
    out->grad_sync_s += lat + expert_grad_bytes * 2.0 * (edp - 1) / edp / bw;
  }
  return 0;
}
