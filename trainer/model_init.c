/*
 * model_init.c — the model's parameter layout and initial weights (model.h): where every
 * parameter of the stage lies in the flat buffer (param_info, the block offsets, the units
 * that gradient buckets and ZeRO-3 gathers work on), and model_init_params, which draws the
 * full weights from a counter-based RNG and keeps this TP rank's slice, so that every
 * parallel layout starts from the same model.
 *
 * Why a file of its own: the layout and initialization run once, on the host, before the
 * first step; model.c keeps the allocation and the forward/backward passes that enqueue work
 * on the device.
 */
#include "model_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parameter layout ---------------------------------------------------------- */

static int add_param(model *m, const char *name, int layer, size_t offset, size_t count, int decay,
                     int replicated) {
  param_info *p = &m->params[m->nparams++];
  p->name = name;
  p->layer = layer;
  p->offset = offset;
  p->count = count;
  p->decay = decay;
  p->tp_replicated = replicated;
  p->norm_counted = !replicated || m->grid.tp_rank == 0;
  return 0;
}

/* The parameter just added is a GEMM weight: it gets the next place in the working copy. */
static void gemm_weight(model *m) {
  param_info *p = &m->params[m->nparams - 1];
  p->gemm = 1;
  p->gemm_at = m->gemm_floats;
  m->gemm_floats += p->count;
}

int model_build_layout(model *m, const train_config *cfg) {
  m->block_floats = BO_END(m);
  m->params = calloc((size_t)m->nblocks * 12 + 8, sizeof(param_info));
  m->block_off = calloc((size_t)m->nblocks + 1, sizeof(size_t));
  m->block_moe = calloc((size_t)m->nblocks + 1, sizeof(int));
  if (!m->params || !m->block_off || !m->block_moe) return -1;
  int nmoe = 0;
  for (int b = 0; b < m->nblocks; b++) {
    int moe = config_layer_is_moe(cfg, m->first_layer + b);
    m->block_moe[b] = moe ? nmoe++ : -1;
    m->block_off[b + 1] =
        m->block_off[b] + (moe ? BO_FCW(m) + (size_t)cfg->experts * m->C : BO_END(m));
  }
  size_t at = 0;
  size_t C = (size_t)m->C;
  m->off_wte = m->off_wpe = (size_t)-1;
  if (m->has_wte) {
    m->off_wte = at;
    add_param(m, "wte", -1, at, (size_t)m->Vp * C, 1, 1);
    /* the last stage's copy of the tied weight is counted by the first stage */
    if (!m->first_stage) m->params[m->nparams - 1].norm_counted = 0;
    if (m->last_stage) gemm_weight(m); /* the tied LM head */
    at += (size_t)m->Vp * C;
  }
  if (m->first_stage) {
    m->off_wpe = at;
    add_param(m, "wpe", -1, at, (size_t)m->maxT * C, 1, 1);
    at += (size_t)m->maxT * C;
  }
  m->off_blocks = at;
  for (int b = 0; b < m->nblocks; b++) {
    int layer = m->first_layer + b;
    size_t base = at + m->block_off[b];
    add_param(m, "ln1w", layer, base + BO_LN1W(m), C, 0, 1);
    add_param(m, "ln1b", layer, base + BO_LN1B(m), C, 0, 1);
    add_param(m, "ln2w", layer, base + BO_LN2W(m), C, 0, 1);
    add_param(m, "ln2b", layer, base + BO_LN2B(m), C, 0, 1);
    add_param(m, "attprojb", layer, base + BO_ATTPROJB(m), C, 0, 1);
    if (m->block_moe[b] < 0) add_param(m, "fcprojb", layer, base + BO_FCPROJB(m), C, 0, 1);
    add_param(m, "qkvw", layer, base + BO_QKVW(m), 3 * (size_t)m->Cl * C, 1, 0);
    gemm_weight(m);
    add_param(m, "qkvb", layer, base + BO_QKVB(m), 3 * (size_t)m->Cl, 0, 0);
    add_param(m, "attprojw", layer, base + BO_ATTPROJW(m), C * m->Cl, 1, 0);
    gemm_weight(m);
    if (m->block_moe[b] >= 0) { /* the router, replicated over TP; the experts: moe.c */
      add_param(m, "routerw", layer, base + BO_FCW(m),
                m->block_off[b + 1] - m->block_off[b] - BO_FCW(m), 1, 1);
      gemm_weight(m);
      continue;
    }
    add_param(m, "fcw", layer, base + BO_FCW(m), 4 * (size_t)m->Cl * C, 1, 0);
    gemm_weight(m);
    add_param(m, "fcb", layer, base + BO_FCB(m), 4 * (size_t)m->Cl, 0, 0);
    add_param(m, "fcprojw", layer, base + BO_FCPROJW(m), C * 4 * m->Cl, 1, 0);
    gemm_weight(m);
  }
  at += m->block_off[m->nblocks];
  m->off_lnf = at;
  if (m->last_stage) {
    add_param(m, "lnfw", -2, at, C, 0, 1);
    add_param(m, "lnfb", -2, at + C, C, 0, 1);
    at += 2 * C;
  }
  m->nfloats = at;
  return 0;
}

int model_unit_count(const model *m) {
  return m->nblocks + 2;
}

void model_unit_range(const model *m, int unit, size_t *begin, size_t *end) {
  if (unit == 0) {
    *begin = m->off_lnf;
    *end = m->nfloats;
  } else if (unit <= m->nblocks) {
    int b = m->nblocks - unit;
    *begin = m->off_blocks + m->block_off[b];
    *end = m->off_blocks + m->block_off[b + 1];
  } else {
    *begin = 0;
    *end = m->off_blocks;
  }
}

int model_unit_of(const model *m, size_t off) {
  if (off < m->off_blocks) return m->nblocks + 1;
  if (off >= m->off_lnf) return 0;
  int b = 0;
  while (b + 1 < m->nblocks && off - m->off_blocks >= m->block_off[b + 1])
    b++;
  return m->nblocks - b;
}

void model_bind_unit(model *m, int unit, float *param, float *grad) {
  if (param) m->unit_param[unit] = param;
  if (grad) m->unit_grad[unit] = grad;
}

/* ---- initialization --------------------------------------------------------------- */

typedef struct rng {
  uint64_t s;
} rng;

static uint64_t rng_next(rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double rng_uniform(rng *r) {
  return ((double)(rng_next(r) >> 11) + 0.5) / 9007199254740992.0;
}

void model_fill_normal(float *x, size_t n, double std, unsigned long long seed, int layer,
                       int tensor) {
  rng r = {seed * 0x100000001b3ull ^ ((uint64_t)(layer + 7) << 20) ^ (uint64_t)tensor * 0x9e37ull};
  for (int k = 0; k < 4; k++)
    rng_next(&r);
  for (size_t i = 0; i < n; i += 2) {
    double u1 = rng_uniform(&r), u2 = rng_uniform(&r);
    double rad = sqrt(-2.0 * log(u1));
    x[i] = (float)(std * rad * cos(2 * M_PI * u2));
    if (i + 1 < n) x[i + 1] = (float)(std * rad * sin(2 * M_PI * u2));
  }
}

/* Copies the TP rank's rows [row0, row0+rows) of a full [R, cols] matrix. */
static void take_rows(float *dst, const float *full, size_t cols, size_t row0, size_t rows) {
  memcpy(dst, full + row0 * cols, rows * cols * sizeof(float));
}

/* Copies columns [col0, col0+cols) of a full [rows, fullcols] matrix. */
static void take_cols(float *dst, const float *full, size_t rows, size_t fullcols, size_t col0,
                      size_t cols) {
  for (size_t r = 0; r < rows; r++)
    memcpy(dst + r * cols, full + r * fullcols + col0, cols * sizeof(float));
}

/* Draws unit `unit`'s initial values (model_unit_range: the LayerNorm of the head, a block, or
 * the embeddings) into dst, which holds the unit's floats from its first and is zeroed by the
 * caller; full is scratch for one whole weight matrix before its TP slice is taken. */
static void init_unit(const model *m, unsigned long long seed, int unit, float *dst, float *full) {
  size_t C = (size_t)m->C, Cl = (size_t)m->Cl;
  int tr = m->grid.tp_rank;
  const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * m->L);
  if (unit == 0) { /* the final LayerNorm (last stage): weight 1, bias 0 */
    if (m->last_stage)
      for (size_t i = 0; i < C; i++)
        dst[i] = 1.0f;
    return;
  }
  if (unit > m->nblocks) { /* the embeddings, from flat float 0 */
    if (m->has_wte)
      model_fill_normal(dst + m->off_wte, (size_t)m->V * C, std, seed, -1, 0); /* pad rows: 0 */
    if (m->first_stage) model_fill_normal(dst + m->off_wpe, (size_t)m->maxT * C, std, seed, -1, 1);
    return;
  }
  int b = m->nblocks - unit, layer = m->first_layer + b;
  float *blk = dst;
  for (size_t i = 0; i < C; i++) {
    blk[BO_LN1W(m) + i] = 1.0f;
    blk[BO_LN2W(m) + i] = 1.0f;
  }
  /* biases start at zero (already) */
  model_fill_normal(full, 3 * C * C, std, seed, layer, 2); /* qkv [3C, C] */
  for (int part = 0; part < 3; part++)
    take_rows(blk + BO_QKVW(m) + (size_t)part * Cl * C, full, C, part * C + tr * Cl, Cl);
  model_fill_normal(full, C * C, proj_std, seed, layer, 3); /* attproj [C, C] */
  take_cols(blk + BO_ATTPROJW(m), full, C, C, tr * Cl, Cl);
  if (m->block_moe[b] >= 0) { /* the router [E,C]; the experts: moe_init_params */
    model_fill_normal(blk + BO_FCW(m), m->block_off[b + 1] - m->block_off[b] - BO_FCW(m), std, seed,
                      layer, 6);
    return;
  }
  model_fill_normal(full, 4 * C * C, std, seed, layer, 4); /* fc [4C, C] */
  take_rows(blk + BO_FCW(m), full, C, tr * 4 * Cl, 4 * Cl);
  model_fill_normal(full, 4 * C * C, proj_std, seed, layer, 5); /* fcproj [C, 4C] */
  take_cols(blk + BO_FCPROJW(m), full, C, 4 * C, tr * 4 * Cl, 4 * Cl);
}

int model_init_param_range(const model *m, unsigned long long seed, size_t lo, size_t hi,
                           float *dst, char *err, size_t errlen) {
  size_t C = (size_t)m->C;
  float *full = malloc(sizeof(float) * (size_t)4 * C * C + sizeof(float) * 4 * C);
  float *part = NULL; /* one whole unit, for a unit that [lo, hi) holds only part of */
  if (!full) goto oom;
  memset(dst, 0, (hi - lo) * sizeof(float));
  for (int u = 0; u < model_unit_count(m); u++) {
    size_t b, e;
    model_unit_range(m, u, &b, &e);
    size_t from = b > lo ? b : lo, to = e < hi ? e : hi;
    if (to <= from) continue;
    if (b >= lo && e <= hi) { /* whole in the range: drawn in place */
      init_unit(m, seed, u, dst + (b - lo), full);
      continue;
    }
    free(part);
    if (!(part = calloc(e - b, sizeof(float)))) goto oom;
    init_unit(m, seed, u, part, full);
    memcpy(dst + (from - lo), part + (from - b), (to - from) * sizeof(float));
  }
  free(part);
  free(full);
  return 0;
oom:
  free(full);
  snprintf(err, errlen, "out of host memory initializing parameters");
  return -1;
}

int model_init_params(model *m, unsigned long long seed, char *err, size_t errlen) {
  float *host = NULL;
  if (m->param) { /* none under ZeRO-3: each rank draws its shard (grad_sync.c: zero_setup) */
    if (!(host = malloc(m->nfloats * sizeof(float)))) {
      snprintf(err, errlen, "out of host memory initializing parameters");
      return -1;
    }
    if (model_init_param_range(m, seed, 0, m->nfloats, host, err, errlen) != 0) {
      free(host);
      return -1;
    }
    m->ops->copy_to_device(m->compute, m->param, host, m->nfloats * sizeof(float));
    model_refresh_gemm_weights(m); /* their bf16 working copy (model_gemm.c) */
  }
  if (m->grad) m->ops->zero(m->compute, m->grad, m->nfloats_padded * sizeof(float));
  int rc = m->ops->stream_synchronize(m->compute);
  free(host);
  if (rc == 0 && moe_init_params(m, seed) != 0) rc = -1;
  if (m->moe.grad) m->ops->zero(m->compute, m->moe.grad, m->moe.nfloats * sizeof(float));
  if (rc != 0) {
    snprintf(err, errlen, "initializing parameters: %s", dev_last_error(m->dev));
    return -1;
  }
  return 0;
}
