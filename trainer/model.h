/*
 * model.h — the GPT-2 model as one pipeline stage of one tensor-parallel rank.
 *
 * What it is for: the parameters, gradients and activations a rank holds, and
 * the forward and backward of its part of the model for one micro-batch, written
 * once over the device API (device.h) and the communicator (comm.h).
 *
 * How it works:
 *   - Parameters and gradients are flat device buffers laid out as
 *       [wte if the stage holds it][wpe if first stage][block 0..n-1][lnf if last]
 *     A block is [ln1w ln1b ln2w ln2b | attprojb fcprojb | qkvw qkvb attprojw fcw fcb
 *     fcprojw]; the first four are the parameters whose gradients are partial
 *     under sequence parallelism (all-reduced over TP), the next two biases of
 *     row-parallel layers (replicated, added by TP rank 0 only in forward).
 *   - Tensor parallelism (Megatron): qkv and fc are column-parallel (each TP rank
 *     holds the rows of its heads / its quarter of the MLP), attproj and fcproj
 *     row-parallel; their partial outputs are summed over TP (all-reduce, or
 *     reduce-scatter with --sp, whose tokens are sharded over the TP group along
 *     the flattened batch x sequence axis). Embeddings, LayerNorms and the tied
 *     LM head are replicated across TP ranks.
 *   - Pipeline parallelism: the last stage also holds wte (tied LM head); its
 *     gradient is summed with the first stage's over the "embed" group.
 *   - Weights are initialized from a counter-based RNG keyed by (seed, layer,
 *     tensor), so every layout gets the same model as one rank.
 *   - Context parallelism: the rank holds 2 of the 2 cp chunks of every sequence
 *     (zig-zag) in every layer; everything but attention is per token, and
 *     attention is ring attention over the CP group (ring_attention.h). Weights
 *     are replicated over CP; their gradients are partial sums (over the rank's
 *     tokens) that the trainer all-reduces over dp x cp.
 *   - Units (model_unit_range) are the lnf/LM head, each block and the embeddings; the model
 *     reaches a unit's parameters and gradients through per-unit pointers (model_bind_unit),
 *     so that ZeRO-2/3 can keep them outside the flat buffers.
 *   - Activations (dev_act: fp32 or bf16, the device's storage type; sizes go through
 *     act_es) live in `slots` (micro-batches in flight); with recomputation
 *     the dropped tensors live in one scratch set and are rebuilt in backward.
 */
#ifndef STEPSCOPE_TRAINER_MODEL_H
#define STEPSCOPE_TRAINER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "config.h"
#include "device.h"
#include "moe.h"
#include "ring_attention.h"

typedef struct model_grid {
  int world, rank;
  int dp, tp, pp, cp;
  int dp_rank, tp_rank, pp_rank, cp_rank;
  /* expert parallelism, carved out of DP: consecutive DP ranks form an EP group
   * (ep_rank = dp_rank % ep); ranks with the same ep_rank form the expert-data-parallel
   * group (edp_rank = dp_rank / ep, dp/ep members) that reduces the experts' gradients */
  int ep, ep_rank, edp_rank;
} model_grid;

/* Where a rank sits in the grid world = dp x pp x cp x tp: TP fastest, then CP,
 * then PP, then DP: rank = ((dp_rank * pp + pp_rank) * cp + cp_rank) * tp + tp_rank
 * (with cp = 1, the layout of dp x pp x tp). */
void model_grid_of(model_grid *g, int world, int dp, int tp, int pp, int cp, int rank);
int model_grid_rank(const model_grid *g, int dp_rank, int pp_rank, int cp_rank, int tp_rank);

/* What context parallelism needs besides the compute stream (model_create). */
typedef struct model_cp_links {
  comm *cp;                /* the CP group (a ring in group-rank order) */
  dev_stream *send, *recv; /* "comm cp send" and "comm cp recv" */
} model_cp_links;

typedef struct param_info {
  const char *name;
  int layer;     /* global layer index, -1 embeddings, -2 final LayerNorm */
  size_t offset; /* in floats, into the stage's flat buffer */
  size_t count;
  int decay;         /* AdamW weight decay applies (matrices, embeddings) */
  int tp_replicated; /* identical on every TP rank (counted once in the norm) */
  int norm_counted;  /* counted in the global gradient norm on this rank */
  int gemm;          /* a weight the GEMMs multiply (matmul_forward/backward) */
  size_t gemm_at;    /* a GEMM weight: its elements' offset in the bf16 working copy */
  int fp32_read;     /* a weight kernels read in fp32 (every one but the GEMM weights, and the
                        embedding table where the first stage looks tokens up) */
  size_t fp32_at;    /* such a weight: its elements' offset in the fp32 working copy */
} param_info;

/* Activations of one block for one micro-batch (dev_act: the device's activation
 * type; statistics and attention matrices stay fp32). */
typedef struct block_acts {
  dev_act *in;                /* [Ns,C] block input (residual) */
  dev_act *ln1;               /* [Ns,C] */
  float *ln1_mean, *ln1_rstd; /* [Ns],[Ns] */
  dev_act *ln1_full;          /* [N,C] (== ln1 without --sp) */
  dev_act *qkv;               /* [N,3C/tp] */
  dev_act *atty;              /* [N,C/tp] */
  float *att;                 /* [B,NH/tp,T,T] (not with --cp > 1) */
  float *lse;                 /* [2,B,NH/tp,Tc] --cp > 1: ring attention's log-sum-exp */
  dev_act *res2;              /* [Ns,C] */
  dev_act *ln2;
  float *ln2_mean, *ln2_rstd;
  dev_act *ln2_full;
  dev_act *fch, *fch_gelu; /* [N,4C/tp] */
} block_acts;

typedef struct model_slot {
  int *tokens, *targets; /* [N] device */
  dev_act *stage_in;     /* [Ns,C]: embedding output or received activation */
  dev_act *block_in;     /* [nblocks,Ns,C] inputs of blocks 1.. (block 0 uses stage_in) */
  dev_act *stage_out;    /* [Ns,C] */
  dev_act *grad_in;      /* [Ns,C] gradient received from the next stage */
  dev_act *grad_out;     /* [Ns,C] gradient w.r.t. stage_in (sent to the previous stage) */
  char *arena;           /* the rest of the stored activations */
  dev_act *final_full;   /* [N,C] last stage: input of lnf (gathered) */
  dev_act *lnf;          /* last stage */
  float *lnf_mean, *lnf_rstd;
  dev_act *probs; /* [N,Vp] last stage */
} model_slot;

typedef struct model {
  dev_device *dev;
  const dev_ops *ops;
  model_grid grid;
  dev_dtype act; /* activation type (the device's) */
  size_t act_es; /* its bytes per element */
  /* shape */
  int L, C, NH, V, Vp, maxT;
  int B, T, N, Ns; /* micro-batch sequences, seq (this CP rank's share), tokens, tokens in the
                    * local residual stream */
  int cp, Tc;      /* CP degree; chunk length seq/(2 cp): a CP rank holds 2 chunks per sequence,
                    * chunk-major ([2][B][Tc]) */
  int Cl, NHl;     /* C/tp, NH/tp */
  int sp;
  int fused_att; /* the device's fused attention: no T x T buffers (dev_attention_fused) */
  recompute_kind recompute;
  int first_layer, nblocks, first_stage, last_stage, has_wte;
  /* parameters */
  param_info *params;
  int nparams;
  size_t nfloats;        /* stage parameter count */
  size_t nfloats_padded; /* allocated: a multiple of dp (ZeRO-1 shards are equal) */
  size_t block_floats;   /* per dense block */
  /* Blocks are dense or mixture-of-experts (--experts; config_layer_is_moe): block b's
   * floats are [off_blocks + block_off[b], off_blocks + block_off[b+1]); block_moe[b] is
   * its index among the stage's MoE blocks, or -1. A MoE block has the dense block's
   * layout up to qkv/attproj, its fcprojb slot unused, then the router Wr [E,C] where the
   * dense block has fcw; its experts live in moe.param (moe.h). */
  size_t *block_off;
  int *block_moe;
  moe_state moe;
  int cur_mb; /* the micro-batch being enqueued (trace annotations, MoE statistics) */
  size_t off_wte, off_wpe, off_blocks, off_lnf;
  float *param, *grad; /* grad is NULL under --zero 2/3 (the trainer binds per-unit buffers) */
  /* The GEMM weights (params[k].gemm: every block's qkv, attention-projection and MLP
   * matrices or a MoE block's router, the last stage's tied LM head): gemm_floats elements.
   * --gemm-weights bf16 (model_gemm_weights_bf16): the GEMMs read gemm_w, a bf16 working
   * copy of them that model_refresh_gemm_weights casts from the fp32 parameters after every
   * change; NULL: the GEMMs read the fp32 parameters. */
  size_t gemm_floats;
  dev_bf16 *gemm_w;
  /* The fp32 master weights sharded (model_master_sharded: --gemm-weights bf16 under ZeRO-1/2):
   * no flat parameter buffer (param NULL); the kernels read the weights they take in fp32
   * (params[k].fp32_read, fp32_floats elements) from fp32_w, a working copy laid out at
   * params[k].fp32_at, and the GEMMs gemm_w. The trainer keeps the master shard and loads both
   * copies from the gathered master weights (model_load_working_copies). NULL otherwise. */
  size_t fp32_floats;
  float *fp32_w;
  /* Where each unit's parameters and gradients live (model_bind_unit): the first float of
   * unit u (model_unit_range's begin) is at unit_param[u] / unit_grad[u]. By default they
   * point into param/grad; ZeRO-2 binds the gradients to bucket buffers and ZeRO-3 the
   * parameters to gathered working buffers. Read when an operation is enqueued. */
  float **unit_param, **unit_grad;
  size_t *unit_begin;
  /* Optional: called (on the host, while enqueueing) before a unit's forward or backward
   * (backward = 1) uses its parameters: ZeRO-3 gathers them there. The last stage's LM head
   * also reads the embedding unit's wte: the hook is called for both units. */
  void (*before_unit)(void *arg, int unit, int backward);
  void *before_unit_arg;
  /* activations */
  model_slot *slots;
  int nslots;
  size_t slot_act_bytes; /* stored activation bytes per slot */
  block_acts scratch;    /* recompute target */
  char *scratch_arena;
  /* backward scratch */
  float *preatt, *dpreatt, *datt;
  dev_act *d_full, *dres_a, *dres_b, *d_fch, *d_fch_gelu, *dln_full, *dln, *datty, *dqkv;
  dev_act *proj_full, *proj_red, *enc_full, *logits, *dlnf, *dfinal_full;
  float *losses, *dlosses;
  double *loss_acc; /* device double */
  /* communicators (NULL when the group has one member) */
  comm *tp_comm;
  ring_attention ring; /* --cp > 1 */
  /* streams */
  dev_stream *compute;
  size_t act_bytes_total; /* activation bytes allocated (stored + scratch) */
} model;

/* Builds the stage's layout and buffers. micro_batch = sequences per
 * micro-batch, nslots = micro-batches in flight. Returns 0 or -1 with err. */
int model_create(model *m, const train_config *cfg, const model_grid *g, dev_device *dev,
                 dev_stream *compute, comm *tp_comm, const model_cp_links *cp, comm *ep_comm,
                 int micro_batch, int nslots, char *err, size_t errlen);
/* Counter-based normal draws keyed by (seed, layer, tensor): the same values on every
 * layout (model_init_params, moe_init_params). */
void model_fill_normal(float *x, size_t n, double std, unsigned long long seed, int layer,
                       int tensor);
void model_destroy(model *m);

/* Initializes the parameters (GPT-2 init, layout-independent) and their bf16 GEMM working copy
 * (if any) and waits; under ZeRO-3 (no full parameter buffer) only the experts and gradients,
 * the trainer draws the shards. */
int model_init_params(model *m, unsigned long long seed, char *err, size_t errlen);
/* The initial values of the stage's flat floats [lo, hi) (beyond nfloats: zeros) into host
 * dst, the same bits model_init_params gives there; drawn unit by unit (model_unit_range), so
 * only the units the range touches are drawn and at most one whole unit is held besides dst.
 * 0, or -1 with err when out of host memory. */
int model_init_param_range(const model *m, unsigned long long seed, size_t lo, size_t hi,
                           float *dst, char *err, size_t errlen);

/* Parameter counts of the whole model (all stages, one TP replica). */
size_t model_total_params(const train_config *cfg);
/* Of those, the ones a token's forward multiplies with (with experts: K of the E experts
 * per MoE layer, plus the router). Equal to model_total_params for a dense model. */
size_t model_active_params(const train_config *cfg);

/* Forward of micro-batch in `slot`: first stage: embeds slot->tokens (with --cp,
 * the rank's two chunks of each sequence, chunk-major, at their global positions); otherwise
 * reads slot->stage_in. Leaves slot->stage_out (or, on the last stage, adds the
 * sum of the token losses to *loss_acc). `mb` is only for trace annotations. */
void model_forward(model *m, int slot, int mb);
/* Backward: last stage starts from the loss (token weight `dloss`, the inverse
 * of the global tokens per step); other stages from slot->grad_in. Leaves the
 * gradient w.r.t. the stage input in slot->grad_out (not on the first stage).
 * `unit_done(arg, unit)` is called after the gradients of a unit are complete
 * for this micro-batch (units: 0 = lnf/LM head, 1..nblocks = blocks from the
 * last, nblocks+1 = embeddings). */
void model_backward(model *m, int slot, int mb, void (*unit_done)(void *arg, int unit), void *arg);
/* Sets the per-token loss weight used by backward. */
void model_set_loss_weight(model *m, float dloss);

/* Whether the GEMMs read a bf16 working copy of their weights (--gemm-weights: bf16, or auto
 * where the device computes its GEMMs in bf16 anyway, the CUDA backend in bf16 precision;
 * never under --zero 3, whose parameters exist only bucket by bucket). */
int model_gemm_weights_bf16(const train_config *cfg, const dev_device *dev);
/* Whether the fp32 master weights exist only as the ranks' shards (--gemm-weights bf16 under
 * --zero 1 or 2; interleaved, every model chunk): the model then keeps working copies only
 * (model.h: fp32_w). */
int model_master_sharded(const train_config *cfg, const dev_device *dev);
/* Casts the fp32 GEMM weights into the bf16 working copy (on the compute stream; nothing
 * without one, or when the master weights are sharded): after the parameters are initialized,
 * updated or restored. */
void model_refresh_gemm_weights(model *m);
/* With sharded master weights: loads the working copies (bf16 GEMM weights, fp32 rest) of the
 * stage's flat floats [lo, hi) from the device buffer `flat` holding them (flat[0] is float
 * lo), on stream s. */
void model_load_working_copies(model *m, dev_stream *s, const float *flat, size_t lo, size_t hi);
/* Where the flat floats [lo, hi) are in the working copies: span[0], span[1] elements from it,
 * in the bf16 one, span[2], span[3] in the fp32 one (each contiguous: the parameters are laid
 * out, and given their places in the copies, in flat order). */
void model_working_spans(const model *m, size_t lo, size_t hi, size_t span[4]);
/* The fp32 working copy of the weight float at flat offset off (a fp32_read parameter's). */
float *model_fp32_copy_at(const model *m, size_t off);
/* Gives the fp32_read parameters their places in the fp32 working copy (fp32_floats). */
void model_plan_fp32_copy(model *m);
/* The GEMMs on the GEMM weight at flat offset `off` (params[k].offset of a gemm parameter):
 * its bf16 working copy, or the fp32 parameter wherever its unit is bound. */
void model_gemm_forward(model *m, size_t off, dev_act *out, const dev_act *inp, const float *bias,
                        int N, int C, int OC);
void model_gemm_backward(model *m, size_t off, dev_act *dinp, float *dweight, float *dbias,
                         const dev_act *dout, const dev_act *inp, int N, int C, int OC);

/* Points unit `unit`'s parameters (NULL: keep) and gradients (NULL: keep) at buffers holding
 * the unit's range of the flat layout from its first float on. Takes effect for operations
 * enqueued afterwards. */
void model_bind_unit(model *m, int unit, float *param, float *grad);
/* The unit holding the flat offset `off` (a parameter's unit). */
int model_unit_of(const model *m, size_t off);

/* Float offset range of a unit in the flat buffers: [*begin, *end). */
void model_unit_range(const model *m, int unit, size_t *begin, size_t *end);
int model_unit_count(const model *m);

#endif /* STEPSCOPE_TRAINER_MODEL_H */
