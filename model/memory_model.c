/*
 * memory_model.c — the trainer's per-rank memory in closed form (memory_model.h).
 *
 * Each function below mirrors one piece of the trainer's set-up, allocation by allocation,
 * and names the code it follows; a change there must be made here too, and the test
 * trainer.memory_model (the prediction against the device API's measured peak, exactly, on
 * many layouts) fails until it is. Sizes are in bytes; "floats" are fp32 elements.
 */
#include "memory_model.h"

#include <stdio.h>
#include <string.h>

int mm_fused_attention_supported(int B, int T, int C, int NH) {
  if (B <= 0 || T <= 0 || NH <= 0 || C % NH != 0 || B * NH > 65535) return 0;
  int hs = C / NH;
  return (hs == 32 || hs == 64 || hs == 128) && T >= hs + 1;
}

int mm_padded_vocab(int vocab) {
  return (vocab + 63) / 64 * 64;
}

/* schedule.c: schedule_slots (interleaved: one slot per micro-batch and chunk). */
int mm_slots(const mm_layout *l, int stage) {
  if (l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1) return l->microbatches;
  if (l->pp == 1) return 1;
  if (l->schedule == MM_SCHED_AFAB) return l->microbatches;
  int inflight = l->pp - stage;
  return inflight < l->microbatches ? inflight : l->microbatches;
}

/* One model chunk's shape on a rank (model.c: model_create's derived sizes). */
typedef struct chunk_shape {
  size_t C, Cl, Fl, NHl, Vp, maxT, B, T, Tc, N, Ns, es;
  int sp, cp, nblocks, first, last;
  int fused;            /* fused attention: no T x T buffers (mm_layout.fused_attention) */
  int nmoe;             /* MoE blocks on this chunk */
  size_t expert_floats; /* the chunk's expert buffer (moe.c) */
  size_t nfloats, nfloats_padded;
  size_t off_blocks, block_floats, off_lnf;
  size_t gemm_floats; /* the weights its GEMMs multiply (matmul_forward/backward): what the CUDA
                         backend in bf16 keeps bf16 copies of (bf16_weight_copies) */
} chunk_shape;

static chunk_shape shape_of(const mm_layout *l, int stage, int chunk) {
  chunk_shape s;
  memset(&s, 0, sizeof s);
  int V = l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1 ? l->virtual_stages : 1;
  int pp_c = l->pp * V, rank_c = chunk * l->pp + stage; /* train.c: chunk_grid */
  s.C = (size_t)l->hidden;
  s.Cl = s.C / (size_t)l->tp;
  s.Fl = (l->ffn > 0 ? (size_t)l->ffn : 4 * s.C) / (size_t)l->tp; /* MLP width per TP rank */
  s.NHl = (size_t)(l->heads / l->tp);
  s.Vp = (size_t)mm_padded_vocab(l->vocab);
  s.maxT = (size_t)l->max_seq;
  s.B = (size_t)l->micro_batch;
  s.cp = l->cp;
  s.T = (size_t)(l->seq / l->cp);
  s.Tc = l->cp > 1 ? (size_t)(l->seq / (2 * l->cp)) : (size_t)l->seq;
  s.N = s.B * s.T;
  s.sp = l->sp && l->tp > 1;
  s.Ns = s.sp ? s.N / (size_t)l->tp : s.N;
  s.es = (size_t)l->act_bytes;
  s.fused = l->fused_attention && l->cp == 1;
  s.nblocks = l->layers / pp_c;
  s.first = rank_c == 0;
  s.last = rank_c == pp_c - 1;
  /* model.c: build_layout */
  size_t at = 0;
  if (s.first || s.last) at += s.Vp * s.C; /* wte (tied) */
  if (s.first) at += s.maxT * s.C;         /* wpe */
  s.off_blocks = at;
  s.block_floats =
      6 * s.C + 3 * s.Cl * s.C + 3 * s.Cl + s.C * s.Cl + s.Fl * s.C + s.Fl + s.C * s.Fl;
  /* a MoE block: the dense layout up to the MLP, then the router [E,C] (model.c) */
  size_t moe_block = 6 * s.C + 3 * s.Cl * s.C + 3 * s.Cl + s.C * s.Cl + (size_t)l->experts * s.C;
  int ep = l->ep > 0 ? l->ep : 1;
  /* model.c: the GEMM weights of a block (qkv, attention projection, and the MLP's two or a
   * MoE block's router; the experts' grouped GEMM reads fp32), and the tied LM head */
  size_t attention_gemms = 3 * s.Cl * s.C + s.C * s.Cl;
  for (int b = 0; b < s.nblocks; b++) {
    int layer = rank_c * s.nblocks + b;
    int moe = l->experts > 0 && l->moe_every > 0 && (layer + 1) % l->moe_every == 0;
    at += moe ? moe_block : s.block_floats;
    s.gemm_floats += attention_gemms + (moe ? (size_t)l->experts * s.C : 2 * s.Fl * s.C);
    s.nmoe += moe;
  }
  if (s.last) s.gemm_floats += s.Vp * s.C;
  size_t F = l->ffn > 0 ? (size_t)l->ffn : 4 * s.C; /* an expert is a whole MLP (not TP-cut) */
  s.expert_floats = (size_t)s.nmoe * (size_t)(l->experts / ep) * (2 * s.C * F + F + s.C);
  size_t eunit = (size_t)(l->dp / ep) * 16; /* moe.c: padded to edp x 16 */
  s.expert_floats = (s.expert_floats + eunit - 1) / eunit * eunit;
  s.off_lnf = at;
  if (s.last) at += 2 * s.C;
  s.nfloats = at;
  size_t unit = (size_t)l->dp * (size_t)l->cp * 16; /* ZeRO-1 shards over dp x cp */
  s.nfloats_padded = (s.nfloats + unit - 1) / unit * unit;
  return s;
}

static size_t take(size_t n, size_t size) {
  return (n * size + 63) & ~(size_t)63;
}

/* model.c: layout_block, counting only (moe: a MoE block, without the dense MLP's). */
static size_t block_bytes(const chunk_shape *s, int with_rest, int with_att, int moe) {
  size_t NsC = s->Ns * s->C, NC = s->N * s->C, at = 0;
  if (with_rest) {
    at += take(NsC, s->es) + 2 * take(s->Ns, 4);
    if (s->sp) at += take(NC, s->es);
    at += take(s->N * 3 * s->Cl, s->es) + take(s->N * s->Cl, s->es);
    if (s->cp > 1) at += take(s->B * s->NHl * s->T, 4);
    at += take(NsC, s->es) + take(NsC, s->es) + 2 * take(s->Ns, 4);
    if (s->sp) at += take(NC, s->es);
    if (!moe) at += 2 * take(s->N * s->Fl, s->es);
  }
  if (with_att && s->cp == 1) /* fused: each row's log-sum-exp and output */
    at += take(s->B * s->NHl * s->T * (s->fused ? 1 + s->Cl / s->NHl : s->T), 4);
  return at;
}

/* model.c: model_create's activation allocations (dalloc: zero-byte requests allocate
 * nothing), and ring_attention.c's blocks. */
static size_t activation_bytes(const chunk_shape *s, const mm_layout *l, int nslots) {
  size_t NsC = s->Ns * s->C, NC = s->N * s->C, NVp = s->N * s->Vp, es = s->es;
  size_t per_block =
      block_bytes(s, l->recompute != MM_RECOMPUTE_FULL, l->recompute == MM_RECOMPUTE_NONE, 0);
  size_t per_moe_block =
      block_bytes(s, l->recompute != MM_RECOMPUTE_FULL, l->recompute == MM_RECOMPUTE_NONE, 1);
  size_t slot = 2 * s->N * 4                                                 /* tokens, targets */
                + NsC * es                                                   /* stage_in */
                + (s->nblocks > 1 ? (size_t)(s->nblocks - 1) * NsC * es : 0) /* block_in */
                + 3 * NsC * es                               /* stage_out, grad_in, grad_out */
                + per_block * (size_t)(s->nblocks - s->nmoe) /* the blocks' arena */
                + per_moe_block * (size_t)s->nmoe;
  if (s->last) slot += (s->sp ? NC * es : 0) + NC * es + 2 * s->N * 4 + NVp * es;
  size_t total = slot * (size_t)nslots;
  if (l->recompute != MM_RECOMPUTE_NONE)
    total += block_bytes(s, l->recompute == MM_RECOMPUTE_FULL, 1, 0);
  size_t att = s->cp > 1 || s->fused ? 0 : s->B * s->NHl * s->T * s->T;
  total += 3 * att * 4;                                         /* preatt, dpreatt, datt */
  total += NC * es + 2 * NsC * es                               /* d_full, dres_a, dres_b */
           + (s->nblocks > s->nmoe ? 2 * s->N * s->Fl * es : 0) /* d_fch, d_fch_gelu */
           + NC * es + NsC * es                                 /* dln_full, dln */
           + s->N * s->Cl * es + s->N * 3 * s->Cl * es          /* datty, dqkv */
           + NC * es + NsC * es + NC * es                       /* proj_full, proj_red, enc_full */
           + 2 * s->N * 4;                                      /* losses, dlosses */
  if (s->last) total += NVp * es + 2 * NC * es;                 /* logits, dlnf, dfinal_full */
  total += sizeof(double);                                      /* loss_acc */
  if (s->cp > 1) total += 6 * (2 * s->B * s->Tc) * 2 * s->Cl * es; /* ring: kv[3], dkv[3] */
  if (s->nmoe > 0) { /* moe.c: moe_create; expert_parallel.c: ep_create, ep_route_init */
    size_t E = (size_t)l->experts, K = (size_t)l->top_k, N = s->N, C = s->C, NK = N * K;
    size_t F = l->ffn > 0 ? (size_t)l->ffn : 4 * C;
    size_t ep = l->ep > 1 ? (size_t)l->ep : 1, El = E / ep;
    size_t Rmax = ep > 1 ? ep * N * (K < El ? K : El) : NK;
    size_t per = N * E * es + N * E * 4 + NK * 4 + NK * 4 + E * 4 + (E + 1) * 4 + 2 * NK * 4 +
                 2 * NK * C * es + 2 * Rmax * F * es;
    if (ep > 1) per += 2 * Rmax * C * es + (El + 1) * 4;
    total += per * (size_t)s->nmoe * (size_t)nslots;
    total += N * E * es + NK * 4 + 2 * NK * C * es + 2 * Rmax * F * es + sizeof(double) +
             sizeof(int) + E * 4;
    if (ep > 1) total += 2 * Rmax * C * es + ep * El * 4 + Rmax * C * es;
  }
  return total;
}

/* trainer/grad_sync.c (build_buckets and zero_setup, reached through grad_sync_init), on chunk 0
 * (ZeRO-2/3 run without interleaving). */
static void zero_buffers(const chunk_shape *s, const mm_layout *l, size_t *shard_len, size_t *grads,
                         size_t *params) {
  size_t limit = (size_t)(l->bucket_mb * 1024 * 1024 / 4);
  if (limit < 1) limit = 1;
  size_t n = (size_t)l->dp * (size_t)l->cp;
  int units = s->nblocks + 2;
  size_t begin = 0, end = 0, rot = 0, emb = 0, max_piece = 0;
  int open = 0, last_unit = -1;
  *shard_len = 0;
  /* one bucket [b, e) whose last unit is `ready` is planned (zero.c: zero_plan_build) */
#define CLOSE_BUCKET(b, e, ready)                                                                  \
  do {                                                                                             \
    size_t len_ = ((e) == s->nfloats ? s->nfloats_padded : (e)) - (b);                             \
    size_t piece_ = ((len_ + n - 1) / n + 15) / 16 * 16;                                           \
    *shard_len += piece_;                                                                          \
    if (piece_ > max_piece) max_piece = piece_;                                                    \
    if ((ready) == units - 1)                                                                      \
      emb = piece_ * n;                                                                            \
    else if (piece_ * n > rot)                                                                     \
      rot = piece_ * n;                                                                            \
  } while (0)
  for (int u = 0; u < units; u++) {
    size_t b, e; /* model.c: model_unit_range */
    if (u == 0) {
      b = s->off_lnf;
      e = s->nfloats;
    } else if (u <= s->nblocks) {
      b = s->off_blocks + (size_t)(s->nblocks - u) * s->block_floats;
      e = b + s->block_floats;
    } else {
      b = 0;
      e = s->off_blocks;
    }
    if (e <= b) continue;
    if (u == units - 1 && open) {
      CLOSE_BUCKET(begin, end, last_unit);
      open = 0;
    }
    if (!open) {
      begin = b;
      end = e;
      open = 1;
    } else {
      begin = b;
    }
    last_unit = u;
    if (end - begin >= limit) {
      CLOSE_BUCKET(begin, end, last_unit);
      open = 0;
    }
  }
  if (open) CLOSE_BUCKET(begin, end, last_unit);
#undef CLOSE_BUCKET
  *grads = *shard_len * 4 + (max_piece ? max_piece : 1) * 4 + 2 * rot * 4 + emb * 4;
  *params = l->zero >= 3 ? *shard_len * 4 + 2 * rot * 4 + emb * 4 : 0;
}

int mm_rank_memory(const mm_layout *l, int stage, mm_breakdown *out, char *err, size_t errlen) {
  if (l->framework != MM_FW_STEPSCOPE) return mm_framework_rank_memory(l, stage, out, err, errlen);
  memset(out, 0, sizeof *out);
  int V = l->schedule == MM_SCHED_INTERLEAVED && l->virtual_stages > 1 ? l->virtual_stages : 1;
#define REFUSE(...)                                                                                \
  do {                                                                                             \
    if (err) snprintf(err, errlen, __VA_ARGS__);                                                   \
    return -1;                                                                                     \
  } while (0)
  if (l->dp < 1 || l->tp < 1 || l->pp < 1 || l->cp < 1 || l->hidden < 1 || l->heads < 1 ||
      l->layers < 1 || l->vocab < 1 || l->seq < 1 || l->micro_batch < 1 || l->microbatches < 1)
    REFUSE("every size and degree must be at least 1");
  if (l->kv_heads || l->gated_mlp || l->untied || l->rope)
    REFUSE("the stepscope trainer has no GQA, gated MLP, untied head or RoPE");
  if (stage < 0 || stage >= l->pp) REFUSE("pipeline rank %d is outside --pp %d", stage, l->pp);
  if (l->hidden % l->tp || l->heads % l->tp || (l->ffn > 0 && l->ffn % l->tp))
    REFUSE("--hidden %d, --heads %d and the MLP width must be divisible by --tp %d", l->hidden,
           l->heads, l->tp);
  if (l->layers % (l->pp * V))
    REFUSE("--layers %d is not divisible by pp x virtual stages = %d", l->layers, l->pp * V);
  if (l->seq % (l->cp > 1 ? 2 * l->cp : 1))
    REFUSE("--seq %d is not divisible by 2 x --cp %d", l->seq, l->cp);
  if (l->zero >= 2 && V > 1)
    REFUSE("ZeRO-%d with an interleaved schedule is not supported by the trainer", l->zero);
  if (l->act_bytes != 2 && l->act_bytes != 4)
    REFUSE("activation storage must be 2 (bf16) or 4 (fp32) bytes");
  if (l->experts > 0) {
    int ep = l->ep > 0 ? l->ep : 1;
    if (l->dp % ep || l->experts % ep)
      REFUSE("--ep %d must divide --dp %d and --experts %d", ep, l->dp, l->experts);
    if (l->top_k < 1 || l->top_k > l->experts || l->moe_every < 1)
      REFUSE("--top-k %d / --moe-every %d: not a mixture of experts the trainer runs", l->top_k,
             l->moe_every);
    if (l->cp > 1 || l->sp || l->zero >= 2 || V > 1 || l->recompute == MM_RECOMPUTE_FULL)
      REFUSE("experts with cp, sp, ZeRO-2/3, interleaving or full recomputation are not "
             "supported by the trainer");
  }
#undef REFUSE
  int nslots = mm_slots(l, stage);
  size_t n = (size_t)l->dp * (size_t)l->cp;
  /* --gemm-weights bf16 under ZeRO-1/2 (trainer/model_gemm.c: model_master_sharded): the fp32
   * master weights only as the rank's shard, cut as its moments are (interleaved: every chunk's
   * slice); the model keeps the bf16 copies below and an fp32 working copy of what its kernels
   * read in fp32 (every weight but the GEMMs', and the embedding table where the first stage
   * looks tokens up; a MoE block's unused fcprojb slot is no weight) */
  int sharded = l->gemm_weights_bf16 && (l->zero == 1 || l->zero == 2);
  for (int j = 0; j < V; j++) {
    chunk_shape s = shape_of(l, stage, j);
    size_t P = s.nfloats_padded * 4;
    if (sharded)
      out->parameters += (s.nfloats - s.gemm_floats - (size_t)s.nmoe * s.C +
                          (s.first && s.last ? s.Vp * s.C : 0)) *
                         4;
    else if (l->zero < 3)
      out->parameters += P;
    /* the CUDA backend in bf16: kernels/cuda/matmul.cu's bf16 copy of every GEMM weight (the
     * embedding table only where the LM head multiplies it: the last stage); ZeRO-3: an
     * estimate, copies of the gathered pieces only, one 1/n each (not yet checked on a GPU) */
    if (l->bf16_weight_copies)
      out->parameters += (l->zero >= 3 ? s.nfloats_padded / n : s.gemm_floats) * 2;
    if (l->zero < 2) out->gradients += P;
    out->activations += activation_bytes(&s, l, nslots);
    size_t state = l->zero ? s.nfloats_padded / n : s.nfloats_padded;
    if (j == 0 && l->zero >= 2) {
      size_t shard_len, g, p;
      zero_buffers(&s, l, &shard_len, &g, &p);
      out->gradients += g;
      out->parameters += p;
      state = shard_len;
    }
    out->optimizer += (sharded ? 3 : 2) * state * 4; /* (the master shard,) AdamW m and v */
    /* the experts: their own buffer, gradients and (never sharded) AdamW moments */
    out->parameters += s.expert_floats * 4;
    out->gradients += s.expert_floats * 4;
    int edp = l->experts > 0 ? l->dp / (l->ep > 0 ? l->ep : 1) : 1;
    out->optimizer +=
        2 * (l->zero >= 1 && edp > 1 ? s.expert_floats / (size_t)edp : s.expert_floats) * 4;
  }
  out->other = 4 * sizeof(double); /* train.c: t->stat */
  out->steady = out->parameters + out->gradients + out->optimizer + out->activations + out->other;
  /* ZeRO-3 draws each rank's parameter shard directly (grad_sync.c: zero3_init_shard): set-up
   * holds no buffer beyond what training holds */
  out->init_peak = out->steady;
  out->peak = out->init_peak > out->steady ? out->init_peak : out->steady;
  return 0;
}

int mm_max_memory(const mm_layout *l, mm_breakdown *out, int *stage, char *err, size_t errlen) {
  int best = -1;
  for (int p = 0; p < l->pp; p++) {
    mm_breakdown b;
    if (mm_rank_memory(l, p, &b, err, errlen) != 0) return -1;
    if (best < 0 || b.peak > out->peak) {
      *out = b;
      best = p;
    }
  }
  if (stage) *stage = best;
  return 0;
}
