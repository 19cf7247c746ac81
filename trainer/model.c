/*
 * model.c — GPT-2 forward and backward for one pipeline stage of one TP rank.
 *
 * See model.h for the layout. Everything here *enqueues* work on the compute
 * stream (device ops and TP collectives) and never touches device memory from
 * the host; model_init_params (model_init.c, with the parameter layout) stages the
 * initial weights in host memory and copies them in.
 *
 * The math per block (pre-LN, N tokens, residual stream x):
 *   h  = x + attproj(attention(qkv(ln1(x))))
 *   y  = h + fcproj(gelu(fc(ln2(h))))
 * Under TP the two "proj" matmuls give partial sums that are reduced over the
 * TP group (Megatron's g operator); in backward the gradient w.r.t. ln1/ln2's
 * output is reduced (the f operator). With --sp the residual stream holds only
 * this rank's N/tp tokens: the f/g all-reduces become all-gather (before the
 * column-parallel matmul) and reduce-scatter (after the row-parallel one), and
 * the LayerNorm gradients become partial sums that the trainer all-reduces.
 * Backward functions of the kernels accumulate, so gradient buffers are zeroed
 * before they are written and weight gradients simply accumulate over
 * micro-batches.
 */
#include "model_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stepscope.h"

void model_grid_of(model_grid *g, int world, int dp, int tp, int pp, int cp, int rank) {
  g->world = world;
  g->rank = rank;
  g->dp = dp;
  g->tp = tp;
  g->pp = pp;
  g->cp = cp;
  g->tp_rank = rank % tp;
  g->cp_rank = (rank / tp) % cp;
  g->pp_rank = (rank / (tp * cp)) % pp;
  g->dp_rank = rank / (tp * cp * pp);
  g->ep = 1;
  g->ep_rank = 0;
  g->edp_rank = g->dp_rank;
}

int model_grid_rank(const model_grid *g, int dp_rank, int pp_rank, int cp_rank, int tp_rank) {
  return ((dp_rank * g->pp + pp_rank) * g->cp + cp_rank) * g->tp + tp_rank;
}

/* What MoE layers add to a dense model when a token uses `experts_used` of the experts: per
 * MoE layer, the router [E,C] plus (experts_used - 1) more MLPs (8C^2 + 5C each). */
static size_t moe_extra_params(const train_config *cfg, int experts_used) {
  if (cfg->experts <= 0) return 0;
  size_t C = (size_t)cfg->hidden, per_mlp = 8 * C * C + 5 * C, n = 0;
  for (int l = 0; l < cfg->layers; l++)
    if (config_layer_is_moe(cfg, l))
      n += (size_t)cfg->experts * C + ((size_t)experts_used - 1) * per_mlp;
  return n;
}

size_t model_total_params(const train_config *cfg) {
  size_t C = (size_t)cfg->hidden;
  return (size_t)cfg->vocab * C + (size_t)cfg->max_seq * C +
         (size_t)cfg->layers * (12 * C * C + 13 * C) + 2 * C + moe_extra_params(cfg, cfg->experts);
}

size_t model_active_params(const train_config *cfg) {
  size_t C = (size_t)cfg->hidden;
  return (size_t)cfg->vocab * C + (size_t)cfg->max_seq * C +
         (size_t)cfg->layers * (12 * C * C + 13 * C) + 2 * C + moe_extra_params(cfg, cfg->top_k);
}

/* The fp32 parameter at flat offset `off` of unit `unit`: in the fp32 working copy when the
 * model keeps one (model_gemm.c), else wherever the unit is bound. Its gradient likewise. */
static float *param_at(const model *m, int unit, size_t off) {
  if (m->fp32_w) return model_fp32_copy_at(m, off);
  return m->unit_param[unit] + (off - m->unit_begin[unit]);
}

static float *grad_at(const model *m, int unit, size_t off) {
  return m->unit_grad[unit] + (off - m->unit_begin[unit]);
}

static int unit_of_block(const model *m, int b) {
  return m->nblocks - b;
}
static int embed_unit(const model *m) {
  return m->nblocks + 1;
}

static void begin_unit(model *m, int unit, int backward) {
  if (m->before_unit) m->before_unit(m->before_unit_arg, unit, backward);
}

/* ---- activations ----------------------------------------------------------------- */

/* The activation `elems` elements past p, and the bytes of `elems` activations. */
static dev_act *at(const model *m, const dev_act *p, size_t elems) {
  return dev_act_at(p, m->act, elems);
}
static size_t abytes(const model *m, size_t elems) {
  return elems * m->act_es;
}

/* Lays out one block's activations from base+*at (or only counts when base is NULL). A MoE
 * block (moe) has no dense MLP activations: its own are in moe.acts. */
static void layout_block(model *m, block_acts *a, char *base, size_t *at, int with_rest,
                         int with_att, int moe) {
  size_t NsC = (size_t)m->Ns * m->C, NC = (size_t)m->N * m->C;
  /* TAKE: n elements of `size` bytes, 64-byte aligned, as type `type` */
#define TAKE(field, type, n, size)                                                                 \
  do {                                                                                             \
    if (base) a->field = (type *)(base + *at);                                                     \
    *at += ((size_t)(n) * (size) + 63) & ~(size_t)63;                                              \
  } while (0)
#define TAKE_ACT(field, n) TAKE(field, dev_act, n, m->act_es)
#define TAKE_F32(field, n) TAKE(field, float, n, sizeof(float))
  /* a LayerNorm's output, mean and rstd, and its gathered [N,C] input of the next matmul
   * (under SP; else the output itself) */
#define TAKE_LAYERNORM(ln)                                                                         \
  do {                                                                                             \
    TAKE_ACT(ln, NsC);                                                                             \
    TAKE_F32(ln##_mean, m->Ns);                                                                    \
    TAKE_F32(ln##_rstd, m->Ns);                                                                    \
    if (m->sp)                                                                                     \
      TAKE_ACT(ln##_full, NC);                                                                     \
    else if (base)                                                                                 \
      a->ln##_full = a->ln;                                                                        \
  } while (0)
  if (with_rest) {
    TAKE_LAYERNORM(ln1);
    TAKE_ACT(qkv, (size_t)m->N * 3 * m->Cl);
    TAKE_ACT(atty, (size_t)m->N * m->Cl);
    if (m->cp > 1) TAKE_F32(lse, (size_t)m->B * m->NHl * m->T);
    TAKE_ACT(res2, NsC);
    TAKE_LAYERNORM(ln2);
    if (!moe) {
      TAKE_ACT(fch, (size_t)m->N * 4 * m->Cl);
      TAKE_ACT(fch_gelu, (size_t)m->N * 4 * m->Cl);
    }
  }
  if (with_att && m->cp == 1) /* ring attention stores no attention matrix; fused attention
                                 its rows' log-sum-exp and output (dev_attention_fused) */
    TAKE_F32(att, (size_t)m->B * m->NHl * m->T *
                      (m->fused_att ? 1 + (size_t)(m->Cl / m->NHl) : (size_t)m->T));
#undef TAKE_LAYERNORM
#undef TAKE_F32
#undef TAKE_ACT
#undef TAKE
}

static size_t stored_block_bytes(model *m, int moe) {
  block_acts a;
  size_t at = 0;
  layout_block(m, &a, NULL, &at, m->recompute != RECOMPUTE_FULL, m->recompute == RECOMPUTE_NONE,
               moe);
  return at;
}

/* Where block b's stored activations start in a slot's arena (blocks differ: MoE or dense). */
static size_t block_arena_offset(model *m, int b) {
  size_t at = 0;
  for (int k = 0; k < b; k++)
    at += stored_block_bytes(m, m->block_moe[k] >= 0);
  return at;
}

static block_acts acts_of(model *m, int slot, int b) {
  block_acts a;
  if (m->recompute == RECOMPUTE_FULL) {
    a = m->scratch;
  } else {
    size_t at = block_arena_offset(m, b);
    memset(&a, 0, sizeof a);
    layout_block(m, &a, m->slots[slot].arena, &at, 1, m->recompute == RECOMPUTE_NONE,
                 m->block_moe[b] >= 0);
    if (m->recompute == RECOMPUTE_SELECTIVE) a.att = m->scratch.att;
  }
  model_slot *s = &m->slots[slot];
  a.in = b == 0 ? s->stage_in : at(m, s->block_in, (size_t)(b - 1) * m->Ns * m->C);
  return a;
}

static dev_act *block_out(model *m, int slot, int b) {
  model_slot *s = &m->slots[slot];
  return b == m->nblocks - 1 ? s->stage_out : at(m, s->block_in, (size_t)b * m->Ns * m->C);
}

static void *dalloc(model *m, size_t bytes, int *fail) {
  if (bytes == 0) return NULL;
  void *p = m->ops->alloc(m->dev, bytes);
  if (!p)
    *fail = 1;
  else
    m->act_bytes_total += bytes;
  return p;
}

/* The model's shape on this rank (its stage, TP slice, CP share, micro-batch) and what it
 * runs on; model_create's first step, nothing allocated yet. */
static void set_shape(model *m, const train_config *cfg, const model_grid *g, dev_device *dev,
                      dev_stream *compute, comm *tp_comm, int micro_batch, int nslots) {
  memset(m, 0, sizeof *m);
  m->dev = dev;
  m->ops = dev_get_ops(dev);
  m->grid = *g;
  m->act = dev_activation_dtype(dev);
  m->act_es = dev_dtype_bytes(m->act);
  m->compute = compute;
  m->tp_comm = g->tp > 1 ? tp_comm : NULL;
  m->L = cfg->layers;
  m->C = cfg->hidden;
  m->NH = cfg->heads;
  m->V = cfg->vocab;
  m->Vp = config_padded_vocab(cfg);
  m->maxT = cfg->max_seq;
  m->B = micro_batch;
  m->cp = g->cp;
  m->T = cfg->seq / g->cp;
  m->Tc = g->cp > 1 ? cfg->seq / (2 * g->cp) : cfg->seq;
  m->N = m->B * m->T;
  m->sp = cfg->sp && g->tp > 1;
  m->Ns = m->sp ? m->N / g->tp : m->N;
  m->Cl = m->C / g->tp;
  m->NHl = m->NH / g->tp;
  m->fused_att = m->cp == 1 && dev_attention_fused(dev, m->B, m->T, m->Cl, m->NHl);
  m->recompute = cfg->recompute;
  m->nblocks = m->L / g->pp;
  m->first_layer = g->pp_rank * m->nblocks;
  m->first_stage = g->pp_rank == 0;
  m->last_stage = g->pp_rank == g->pp - 1;
  m->has_wte = m->first_stage || m->last_stage;
  m->nslots = nslots;
}

/* The parameter layout, the flat parameter and gradient buffers (padded for ZeRO-1 shards)
 * and the units bound to them. 0, or -1 with err set. */
static int alloc_params(model *m, const train_config *cfg, char *err, size_t errlen) {
  const model_grid *g = &m->grid;
  dev_device *dev = m->dev;
  if (model_build_layout(m, cfg) != 0) {
    snprintf(err, errlen, "out of memory building the parameter layout");
    return -1;
  }
  size_t unit = (size_t)g->dp * g->cp * 16; /* ZeRO-1 shards over dp x cp */
  m->nfloats_padded = (m->nfloats + unit - 1) / unit * unit;
  size_t pbytes = m->nfloats_padded * sizeof(float);
  /* --zero 3: no full parameter buffer, --zero 2/3: no full gradient buffer (the trainer
   * binds its shards' gathered and bucket buffers to the units) */
  model_plan_fp32_copy(m);
  int sharded = model_master_sharded(cfg, dev); /* the working copies instead (model_gemm.c) */
  m->param = cfg->zero >= 3 || sharded ? NULL : m->ops->alloc(dev, pbytes);
  m->grad = cfg->zero >= 2 ? NULL : m->ops->alloc(dev, pbytes);
  if (sharded) m->fp32_w = m->ops->alloc(dev, (m->fp32_floats ? m->fp32_floats : 1) * 4);
  if ((cfg->zero < 3 && !sharded && !m->param) || (cfg->zero < 2 && !m->grad) ||
      (sharded && !m->fp32_w)) {
    snprintf(err, errlen, "out of device memory for %zu parameters", m->nfloats);
    return -1;
  }
  if (model_gemm_weights_bf16(cfg, dev)) { /* model_gemm.c */
    if (!m->ops->matmul_forward_bf16w || !m->ops->matmul_backward_bf16w || !m->ops->cast_bf16) {
      snprintf(err, errlen, "--gemm-weights bf16: the %s backend has no GEMMs on bf16 weights",
               m->ops->backend_name);
      return -1;
    }
    m->gemm_w = m->ops->alloc(dev, (m->gemm_floats ? m->gemm_floats : 1) * 2);
    if (!m->gemm_w) {
      snprintf(err, errlen, "out of device memory for %zu bf16 GEMM weights", m->gemm_floats);
      return -1;
    }
  }
  int units = model_unit_count(m);
  m->unit_param = calloc((size_t)units, sizeof(float *));
  m->unit_grad = calloc((size_t)units, sizeof(float *));
  m->unit_begin = calloc((size_t)units, sizeof(size_t));
  if (!m->unit_param || !m->unit_grad || !m->unit_begin) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  for (int u = 0; u < units; u++) {
    size_t b, e;
    model_unit_range(m, u, &b, &e);
    m->unit_begin[u] = b;
    m->unit_param[u] = m->param ? m->param + b : NULL;
    m->unit_grad[u] = m->grad ? m->grad + b : NULL;
  }
  return 0;
}

/* Every slot's activations (one slot per micro-batch in flight): inputs, the blocks'
 * stored activations, the last stage's head; counted in act_bytes_total. -1 with err set
 * when the slot table cannot be allocated; a device allocation that fails sets *failp. */
static int alloc_slots(model *m, int *failp, char *err, size_t errlen) {
  int nslots = m->nslots, fail = 0;
  size_t NsC = (size_t)m->Ns * m->C, NC = (size_t)m->N * m->C;
  size_t NVp = (size_t)m->N * m->Vp;
  m->slots = calloc((size_t)nslots, sizeof(model_slot));
  if (!m->slots) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  size_t arena_bytes = block_arena_offset(m, m->nblocks);
  m->act_bytes_total = 0;
  for (int k = 0; k < nslots; k++) {
    model_slot *s = &m->slots[k];
    s->tokens = dalloc(m, (size_t)m->N * sizeof(int), &fail);
    s->targets = dalloc(m, (size_t)m->N * sizeof(int), &fail);
    s->stage_in = dalloc(m, abytes(m, NsC), &fail);
    s->block_in =
        m->nblocks > 1 ? dalloc(m, abytes(m, (size_t)(m->nblocks - 1) * NsC), &fail) : NULL;
    s->stage_out = dalloc(m, abytes(m, NsC), &fail);
    s->grad_in = dalloc(m, abytes(m, NsC), &fail);
    s->grad_out = dalloc(m, abytes(m, NsC), &fail);
    s->arena = dalloc(m, arena_bytes, &fail);
    if (m->last_stage) {
      s->final_full = m->sp ? dalloc(m, abytes(m, NC), &fail) : s->stage_out;
      s->lnf = dalloc(m, abytes(m, NC), &fail);
      s->lnf_mean = dalloc(m, (size_t)m->N * 4, &fail);
      s->lnf_rstd = dalloc(m, (size_t)m->N * 4, &fail);
      s->probs = dalloc(m, abytes(m, NVp), &fail);
    }
  }
  m->slot_act_bytes = nslots ? m->act_bytes_total / (size_t)nslots : 0;
  if (fail) *failp = 1;
  return 0;
}

/* The buffers shared by every slot: recompute scratch, attention matrices, the backward
 * pass's gradients of activations, losses and the loss accumulator. A device allocation
 * that fails sets *failp. */
static void alloc_work_buffers(model *m, int *failp) {
  int fail = 0;
  size_t NsC = (size_t)m->Ns * m->C, NC = (size_t)m->N * m->C;
  size_t att = m->cp > 1 || m->fused_att ? 0 : (size_t)m->B * m->NHl * m->T * m->T;
  size_t NVp = (size_t)m->N * m->Vp;
  int dense_blocks = 0;
  for (int b = 0; b < m->nblocks; b++)
    dense_blocks += m->block_moe[b] < 0;
  /* recompute scratch */
  if (m->recompute != RECOMPUTE_NONE) {
    size_t at = 0;
    int rest = m->recompute == RECOMPUTE_FULL;
    layout_block(m, &m->scratch, NULL, &at, rest, 1, 0);
    m->scratch_arena = dalloc(m, at, &fail);
    if (m->scratch_arena) {
      at = 0;
      layout_block(m, &m->scratch, m->scratch_arena, &at, rest, 1, 0);
    }
  }
  m->preatt = dalloc(m, att * 4, &fail);
  m->dpreatt = dalloc(m, att * 4, &fail);
  m->datt = dalloc(m, att * 4, &fail);
  m->d_full = dalloc(m, abytes(m, NC), &fail);
  m->dres_a = dalloc(m, abytes(m, NsC), &fail);
  m->dres_b = dalloc(m, abytes(m, NsC), &fail);
  if (dense_blocks) { /* the dense MLP's backward scratch */
    m->d_fch = dalloc(m, abytes(m, (size_t)m->N * 4 * m->Cl), &fail);
    m->d_fch_gelu = dalloc(m, abytes(m, (size_t)m->N * 4 * m->Cl), &fail);
  }
  m->dln_full = dalloc(m, abytes(m, NC), &fail);
  m->dln = dalloc(m, abytes(m, NsC), &fail);
  m->datty = dalloc(m, abytes(m, (size_t)m->N * m->Cl), &fail);
  m->dqkv = dalloc(m, abytes(m, (size_t)m->N * 3 * m->Cl), &fail);
  m->proj_full = dalloc(m, abytes(m, NC), &fail);
  m->proj_red = dalloc(m, abytes(m, NsC), &fail);
  m->enc_full = dalloc(m, abytes(m, NC), &fail);
  m->losses = dalloc(m, (size_t)m->N * 4, &fail);
  m->dlosses = dalloc(m, (size_t)m->N * 4, &fail);
  if (m->last_stage) {
    m->logits = dalloc(m, abytes(m, NVp), &fail);
    m->dlnf = dalloc(m, abytes(m, NC), &fail);
    m->dfinal_full = dalloc(m, abytes(m, NC), &fail);
  }
  m->loss_acc = dalloc(m, sizeof(double), &fail);
  if (fail) *failp = 1;
}

int model_create(model *m, const train_config *cfg, const model_grid *g, dev_device *dev,
                 dev_stream *compute, comm *tp_comm, const model_cp_links *cp, comm *ep_comm,
                 int micro_batch, int nslots, char *err, size_t errlen) {
  set_shape(m, cfg, g, dev, compute, tp_comm, micro_batch, nslots);
  if (alloc_params(m, cfg, err, errlen) != 0) return -1;
  int fail = 0;
  if (alloc_slots(m, &fail, err, errlen) != 0) return -1;
  alloc_work_buffers(m, &fail);
  if (!fail && m->cp > 1) {
    if (!cp || !cp->cp || comm_size(cp->cp) != m->cp) {
      snprintf(err, errlen, "internal: --cp %d without a CP group", m->cp);
      return -1;
    }
    if (ring_attention_create(&m->ring, dev, cp->cp, compute, cp->send, cp->recv, m->B, m->Tc,
                              m->Cl, m->NHl, err, errlen) != 0)
      return -1;
    m->act_bytes_total += m->ring.bytes;
  }
  if (fail) {
    snprintf(err, errlen, "out of device memory for activations (%zu bytes so far)",
             m->act_bytes_total);
    return -1;
  }
  if (cfg->experts > 0) {
    if (moe_create(m, cfg->experts, cfg->top_k, cfg->capacity_factor, g->ep > 1 ? ep_comm : NULL,
                   err, errlen) != 0)
      return -1;
    m->act_bytes_total += m->moe.act_bytes;
  }
  return 0;
}

void model_destroy(model *m) {
  if (!m->ops) return;
  dev_device *d = m->dev;
  const dev_ops *o = m->ops;
  for (int k = 0; m->slots && k < m->nslots; k++) {
    model_slot *s = &m->slots[k];
    o->free(d, s->tokens);
    o->free(d, s->targets);
    o->free(d, s->stage_in);
    o->free(d, s->block_in);
    o->free(d, s->stage_out);
    o->free(d, s->grad_in);
    o->free(d, s->grad_out);
    o->free(d, s->arena);
    if (m->last_stage) {
      if (m->sp) o->free(d, s->final_full);
      o->free(d, s->lnf);
      o->free(d, s->lnf_mean);
      o->free(d, s->lnf_rstd);
      o->free(d, s->probs);
    }
  }
  free(m->slots);
  void *bufs[] = {m->scratch_arena, m->preatt,   m->dpreatt, m->datt,       m->d_full,
                  m->dres_a,        m->dres_b,   m->d_fch,   m->d_fch_gelu, m->dln_full,
                  m->dln,           m->datty,    m->dqkv,    m->proj_full,  m->proj_red,
                  m->enc_full,      m->losses,   m->dlosses, m->logits,     m->dlnf,
                  m->dfinal_full,   m->loss_acc, m->param,   m->grad,       m->gemm_w,
                  m->fp32_w};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    o->free(d, bufs[i]);
  free(m->params);
  free(m->unit_param);
  free(m->unit_grad);
  free(m->unit_begin);
  ring_attention_destroy(&m->ring);
  moe_destroy(m);
  free(m->block_off);
  free(m->block_moe);
  memset(m, 0, sizeof *m);
}

/* ---- TP helpers (no-ops with one TP rank) ------------------------------------------ */

/* TP collectives move activations in their storage type (bf16 sums are rounded once). */
static comm_dtype act_comm_dtype(const model *m) {
  return m->act == DEV_BF16 ? COMM_BFLOAT16 : COMM_FLOAT32;
}

/* The sum over the TP group of the partial [N,C] sums in full: all-reduced in place, or under
 * SP reduce-scattered into `shard` [Ns,C]; returns where the result is. */
static dev_act *tp_reduce(model *m, dev_act *full, dev_act *shard) {
  if (!m->tp_comm) return full;
  if (m->sp) {
    comm_reduce_scatter(m->tp_comm, m->compute, shard, full, (size_t)m->Ns * m->C,
                        act_comm_dtype(m));
    return shard;
  }
  comm_allreduce(m->tp_comm, m->compute, full, (size_t)m->N * m->C, act_comm_dtype(m));
  return full;
}

/* The reduction after a row-parallel matmul: returns the [Ns,C] result. */
static dev_act *tp_reduce_out(model *m, dev_act *full) {
  return tp_reduce(m, full, m->proj_red);
}

/* The gathering before a column-parallel matmul (SP only): [Ns,C] -> [N,C]. */
static const dev_act *tp_gather(model *m, dev_act *dst_full, const dev_act *shard) {
  if (!m->sp) return shard;
  comm_allgather(m->tp_comm, m->compute, dst_full, shard, (size_t)m->Ns * m->C, act_comm_dtype(m));
  return dst_full;
}

/* The gradient reduction after a column-parallel matmul's backward: [N,C] -> [Ns,C]. */
static dev_act *tp_reduce_grad(model *m, dev_act *full) {
  return tp_reduce(m, full, m->dln);
}

/* ---- one block ----------------------------------------------------------------------- */

static void range_push_layer(const char *name, int mb, int stage, int layer) {
  if (!stepscope_active()) return;
  char args[96];
  snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d,\"layer\":%d}", mb, stage, layer);
  stepscope_range_push(name, args);
}

static void range_pop(void) {
  if (stepscope_active()) stepscope_range_pop();
}

static void block_forward(model *m, const block_acts *a, int slot, int b, dev_act *out) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  size_t boff = m->off_blocks + m->block_off[b];
  int u = unit_of_block(m, b);
  int N = m->N, Ns = m->Ns, C = m->C, Cl = m->Cl;
  int bias_here = m->grid.tp_rank == 0;
  o->layernorm_forward(s, a->ln1, a->ln1_mean, a->ln1_rstd, a->in,
                       param_at(m, u, boff + BO_LN1W(m)), param_at(m, u, boff + BO_LN1B(m)), Ns, C);
  const dev_act *x1 = tp_gather(m, a->ln1_full, a->ln1);
  model_gemm_forward(m, boff + BO_QKVW(m), a->qkv, x1, param_at(m, u, boff + BO_QKVB(m)), N, C,
                     3 * Cl);
  if (m->cp > 1)
    ring_attention_forward(&m->ring, a->atty, a->lse, a->qkv);
  else
    o->attention_forward(s, a->atty, m->preatt, a->att, a->qkv, m->B, m->T, Cl, m->NHl);
  model_gemm_forward(m, boff + BO_ATTPROJW(m), m->proj_full, a->atty,
                     bias_here ? param_at(m, u, boff + BO_ATTPROJB(m)) : NULL, N, Cl, C);
  dev_act *r1 = tp_reduce_out(m, m->proj_full);
  o->residual_forward(s, a->res2, a->in, r1, Ns * C);
  o->layernorm_forward(s, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2,
                       param_at(m, u, boff + BO_LN2W(m)), param_at(m, u, boff + BO_LN2B(m)), Ns, C);
  const dev_act *x2 = tp_gather(m, a->ln2_full, a->ln2);
  if (m->block_moe[b] >= 0) {
    /* replicated over TP: the whole output on every TP rank, no reduction (no --sp) */
    moe_forward(m, slot, m->block_moe[b], boff + BO_FCW(m), x2, m->proj_full);
    o->residual_forward(s, out, a->res2, m->proj_full, Ns * C);
    return;
  }
  model_gemm_forward(m, boff + BO_FCW(m), a->fch, x2, param_at(m, u, boff + BO_FCB(m)), N, C,
                     4 * Cl);
  o->gelu_forward(s, a->fch_gelu, a->fch, N * 4 * Cl);
  model_gemm_forward(m, boff + BO_FCPROJW(m), m->proj_full, a->fch_gelu,
                     bias_here ? param_at(m, u, boff + BO_FCPROJB(m)) : NULL, N, 4 * Cl, C);
  dev_act *r2 = tp_reduce_out(m, m->proj_full);
  o->residual_forward(s, out, a->res2, r2, Ns * C);
}

/* dout [Ns,C] -> dinp [Ns,C] (dinp may alias dout), accumulating weight gradients. */
static void block_backward(model *m, const block_acts *a, int slot, int b, const dev_act *dout,
                           dev_act *dinp) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  size_t boff = m->off_blocks + m->block_off[b];
  int u = unit_of_block(m, b);
  float *g = grad_at(m, u, boff);
  int N = m->N, Ns = m->Ns, C = m->C, Cl = m->Cl;
  size_t NsC = (size_t)Ns * C;
  dev_act *dres2 = m->dres_a;
  o->copy(s, dres2, dout, abytes(m, NsC));
  /* MLP branch */
  const dev_act *gy = tp_gather(m, m->d_full, dout);
  dev_act *dln2;
  if (m->block_moe[b] >= 0) {
    /* the MoE's input gradient is whole on every TP rank: no reduction */
    o->zero(s, m->dln_full, abytes(m, (size_t)N * C));
    moe_backward(m, slot, m->block_moe[b], boff + BO_FCW(m), g + BO_FCW(m), a->ln2_full, gy,
                 m->dln_full);
    dln2 = m->dln_full;
  } else {
    o->zero(s, m->d_fch_gelu, abytes(m, (size_t)N * 4 * Cl));
    model_gemm_backward(m, boff + BO_FCPROJW(m), m->d_fch_gelu, g + BO_FCPROJW(m),
                        g + BO_FCPROJB(m), gy, a->fch_gelu, N, 4 * Cl, C);
    o->zero(s, m->d_fch, abytes(m, (size_t)N * 4 * Cl));
    o->gelu_backward(s, m->d_fch, a->fch, m->d_fch_gelu, N * 4 * Cl);
    o->zero(s, m->dln_full, abytes(m, (size_t)N * C));
    model_gemm_backward(m, boff + BO_FCW(m), m->dln_full, g + BO_FCW(m), g + BO_FCB(m), m->d_fch,
                        a->ln2_full, N, C, 4 * Cl);
    dln2 = tp_reduce_grad(m, m->dln_full);
  }
  o->layernorm_backward(s, dres2, g + BO_LN2W(m), g + BO_LN2B(m), dln2, a->res2,
                        param_at(m, u, boff + BO_LN2W(m)), a->ln2_mean, a->ln2_rstd, Ns, C);
  /* attention branch */
  o->copy(s, dinp, dres2, abytes(m, NsC));
  const dev_act *gh = tp_gather(m, m->d_full, dres2);
  o->zero(s, m->datty, abytes(m, (size_t)N * Cl));
  model_gemm_backward(m, boff + BO_ATTPROJW(m), m->datty, g + BO_ATTPROJW(m), g + BO_ATTPROJB(m),
                      gh, a->atty, N, Cl, C);
  o->zero(s, m->dqkv, abytes(m, (size_t)N * 3 * Cl));
  if (m->cp > 1)
    ring_attention_backward(&m->ring, m->dqkv, m->datty, a->atty, a->lse, a->qkv);
  else
    o->attention_backward(s, m->dqkv, m->dpreatt, m->datt, m->datty, a->qkv, a->att, m->B, m->T, Cl,
                          m->NHl);
  o->zero(s, m->dln_full, abytes(m, (size_t)N * C));
  model_gemm_backward(m, boff + BO_QKVW(m), m->dln_full, g + BO_QKVW(m), g + BO_QKVB(m), m->dqkv,
                      a->ln1_full, N, C, 3 * Cl);
  dev_act *dln1 = tp_reduce_grad(m, m->dln_full);
  o->layernorm_backward(s, dinp, g + BO_LN1W(m), g + BO_LN1B(m), dln1, a->in,
                        param_at(m, u, boff + BO_LN1W(m)), a->ln1_mean, a->ln1_rstd, Ns, C);
}

/* ---- stage forward / backward ----------------------------------------------------------- */

/* The micro-batch's tokens come in this rank's chunks of every sequence, chunk-major
 * [chunks][B][Tc]: one chunk, the whole sequences, without --cp; under --cp the two chunks h
 * of ring_attention_chunk. chunk_start: the position of chunk h's first token. */
static int token_chunks(const model *m) {
  return m->cp > 1 ? 2 : 1;
}
static size_t chunk_start(const model *m, int h) {
  return (size_t)ring_attention_chunk(m->cp, m->grid.cp_rank, h) * m->Tc;
}

/* Token + position embedding of the micro-batch's tokens into out [N,C], a call per chunk
 * with the wpe rows of its positions. */
static void embed(model *m, dev_act *out, const int *tokens) {
  int u = embed_unit(m);
  const float *wte = param_at(m, u, m->off_wte), *wpe = param_at(m, u, m->off_wpe);
  size_t rows = (size_t)m->B * m->Tc;
  for (int h = 0; h < token_chunks(m); h++)
    m->ops->encoder_forward(m->compute, at(m, out, h * rows * m->C), tokens + h * rows, wte,
                            wpe + chunk_start(m, h) * m->C, m->B, m->Tc, m->C);
}

static void embed_backward(model *m, const dev_act *dout, const int *tokens) {
  int u = embed_unit(m);
  float *dwte = grad_at(m, u, m->off_wte), *dwpe = grad_at(m, u, m->off_wpe);
  size_t rows = (size_t)m->B * m->Tc;
  for (int h = 0; h < token_chunks(m); h++)
    m->ops->encoder_backward(m->compute, dwte, dwpe + chunk_start(m, h) * m->C,
                             at(m, dout, h * rows * m->C), tokens + h * rows, m->B, m->Tc, m->C);
}

void model_set_loss_weight(model *m, float dloss) {
  m->ops->fill(m->compute, m->dlosses, dloss, (size_t)m->N);
}

void model_forward(model *m, int slot, int mb) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  model_slot *sl = &m->slots[slot];
  int stage = m->grid.pp_rank;
  size_t NsC = (size_t)m->Ns * m->C;
  m->cur_mb = mb;
  if (m->first_stage) {
    dev_act *dst = m->sp ? m->enc_full : sl->stage_in;
    begin_unit(m, embed_unit(m), 0);
    embed(m, dst, sl->tokens);
    if (m->sp)
      o->copy(s, sl->stage_in, at(m, m->enc_full, (size_t)m->grid.tp_rank * NsC), abytes(m, NsC));
  }
  for (int b = 0; b < m->nblocks; b++) {
    range_push_layer("layer", mb, stage, m->first_layer + b);
    begin_unit(m, unit_of_block(m, b), 0);
    block_acts a = acts_of(m, slot, b);
    block_forward(m, &a, slot, b, block_out(m, slot, b));
    range_pop();
  }
  if (m->last_stage) {
    range_push_layer("lm_head", mb, stage, m->L);
    begin_unit(m, 0, 0);
    begin_unit(m, embed_unit(m), 0);
    const dev_act *fin = tp_gather(m, sl->final_full, sl->stage_out);
    o->layernorm_forward(s, sl->lnf, sl->lnf_mean, sl->lnf_rstd, fin, param_at(m, 0, m->off_lnf),
                         param_at(m, 0, m->off_lnf + m->C), m->N, m->C);
    model_gemm_forward(m, m->off_wte, m->logits, sl->lnf, NULL, m->N, m->C, m->Vp);
    o->crossentropy_forward(s, m->losses, sl->probs, m->logits, sl->targets, m->N, m->V, m->Vp);
    o->sum_accumulate(s, m->loss_acc, m->losses, (size_t)m->N);
    range_pop();
  }
}

static void recompute_block(model *m, int slot, int b, int mb) {
  /* ring attention keeps out and lse, never an attention matrix: selective
   * recomputation has nothing to rebuild under --cp */
  if (m->recompute == RECOMPUTE_NONE || (m->recompute == RECOMPUTE_SELECTIVE && m->cp > 1)) return;
  range_push_layer("recompute", mb, m->grid.pp_rank, m->first_layer + b);
  block_acts a = acts_of(m, slot, b);
  if (m->recompute == RECOMPUTE_FULL)
    block_forward(m, &a, slot, b, m->dln); /* the output is not needed again */
  else
    m->ops->attention_forward(m->compute, a.atty, m->preatt, a.att, a.qkv, m->B, m->T, m->Cl,
                              m->NHl);
  range_pop();
}

void model_backward(model *m, int slot, int mb, void (*unit_done)(void *arg, int unit), void *arg) {
  const dev_ops *o = m->ops;
  dev_stream *s = m->compute;
  model_slot *sl = &m->slots[slot];
  int stage = m->grid.pp_rank;
  size_t NsC = (size_t)m->Ns * m->C, NC = (size_t)m->N * m->C;
  const dev_act *dtop;
  if (m->last_stage) {
    range_push_layer("lm_head", mb, stage, m->L);
    begin_unit(m, 0, 1);
    begin_unit(m, embed_unit(m), 1);
    const dev_act *fin = m->sp ? sl->final_full : sl->stage_out;
    float *gl = grad_at(m, 0, m->off_lnf);
    o->zero(s, m->logits, abytes(m, (size_t)m->N * m->Vp));
    o->crossentropy_backward(s, m->logits, m->dlosses, sl->probs, sl->targets, m->N, m->V, m->Vp);
    o->zero(s, m->dlnf, abytes(m, NC));
    model_gemm_backward(m, m->off_wte, m->dlnf, grad_at(m, embed_unit(m), m->off_wte), NULL,
                        m->logits, sl->lnf, m->N, m->C, m->Vp);
    o->zero(s, m->dfinal_full, abytes(m, NC));
    o->layernorm_backward(s, m->dfinal_full, gl, gl + m->C, m->dlnf, fin,
                          param_at(m, 0, m->off_lnf), sl->lnf_mean, sl->lnf_rstd, m->N, m->C);
    dtop = m->sp ? at(m, m->dfinal_full, (size_t)m->grid.tp_rank * NsC) : m->dfinal_full;
    range_pop();
  } else {
    dtop = sl->grad_in;
  }
  if (unit_done) unit_done(arg, 0);
  const dev_act *dout = dtop;
  for (int b = m->nblocks - 1; b >= 0; b--) {
    begin_unit(m, unit_of_block(m, b), 1);
    recompute_block(m, slot, b, mb);
    range_push_layer("layer", mb, stage, m->first_layer + b);
    block_acts a = acts_of(m, slot, b);
    dev_act *dinp = (b == 0 && !m->first_stage) ? sl->grad_out : m->dres_b;
    block_backward(m, &a, slot, b, dout, dinp);
    dout = dinp;
    range_pop();
    if (unit_done) unit_done(arg, m->nblocks - b);
  }
  if (m->first_stage) {
    begin_unit(m, embed_unit(m), 1);
    const dev_act *g = tp_gather(m, m->d_full, dout);
    embed_backward(m, g, sl->tokens);
  }
  if (unit_done) unit_done(arg, m->nblocks + 1);
}
