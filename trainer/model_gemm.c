/*
 * model_gemm.c — the weights the model's GEMMs read: the fp32 parameters, or a bf16 working
 * copy of them (--gemm-weights bf16; model.h: gemm_w).
 *
 * What it is for: mixed precision as the ZeRO paper counts it keeps the fp32 weights as the
 * optimizer's master copy and lets the GEMMs multiply bf16 weights. The working copy holds
 * only the GEMM weights (params[k].gemm, laid out in parameter order at params[k].gemm_at:
 * 2 bytes each, Ψ_G of docs/plan.md); the LayerNorms, biases, position table and the embedding
 * lookup keep reading fp32. It is cast from the fp32 parameters (bf16, round to nearest even)
 * whenever they change, so a GEMM reads exactly the bf16 values the CUDA backend's cache of
 * bf16 copies gives it; on the CPU backend the GEMMs widen them (device_cpu_ops.c), so a CPU
 * run in this mode is the reference for a CUDA one.
 *
 * With --gemm-weights bf16 under ZeRO-1/2 (model_master_sharded) the fp32 master weights exist
 * only as the ranks' shards (master_shard.c; every model chunk of an interleaved rank): the
 * model keeps an fp32 working copy of the weights kernels read in fp32 (fp32_w: LayerNorms,
 * biases, the position table, the embedding table where the first stage looks tokens up) beside
 * the bf16 one, and model_load_working_copies fills both from the gathered master weights after
 * every change.
 *
 * How it works: model_gemm_forward/backward find the parameter at a flat offset and call the
 * bf16-weight operation on its place in the working copy, or the fp32 operation on the parameter
 * wherever its unit is bound. model_refresh_gemm_weights enqueues one cast per GEMM weight on the
 * compute stream.
 */
#include <string.h>

#include "model.h"

int model_gemm_weights_bf16(const train_config *cfg, const dev_device *dev) {
  if (cfg->zero >= 3) return 0;
  if (!strcmp(cfg->gemm_weights, "bf16")) return 1;
  return !strcmp(cfg->gemm_weights, "auto") && dev_auto_activation_dtype(dev) == DEV_BF16;
}

int model_master_sharded(const train_config *cfg, const dev_device *dev) {
  return (cfg->zero == 1 || cfg->zero == 2) && model_gemm_weights_bf16(cfg, dev);
}

void model_plan_fp32_copy(model *m) {
  m->fp32_floats = 0;
  for (int k = 0; k < m->nparams; k++) {
    param_info *p = &m->params[k];
    p->fp32_read = !p->gemm || (m->first_stage && p->offset == m->off_wte);
    if (!p->fp32_read) continue;
    p->fp32_at = m->fp32_floats;
    m->fp32_floats += p->count;
  }
}

/* The parameter holding flat offset off (a scan of the layout). */
static const param_info *param_holding(const model *m, size_t off) {
  for (int k = 0; k < m->nparams; k++)
    if (off - m->params[k].offset < m->params[k].count) return &m->params[k];
  return NULL;
}

float *model_fp32_copy_at(const model *m, size_t off) {
  const param_info *p = param_holding(m, off);
  return m->fp32_w + p->fp32_at + (off - p->offset);
}

void model_working_spans(const model *m, size_t lo, size_t hi, size_t span[4]) {
  span[0] = span[1] = span[2] = span[3] = 0;
  for (int k = 0; k < m->nparams; k++) {
    const param_info *p = &m->params[k];
    size_t b = p->offset > lo ? p->offset : lo;
    size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
    if (e <= b) continue;
    if (p->gemm) {
      if (!span[1]) span[0] = p->gemm_at + (b - p->offset);
      span[1] += e - b;
    }
    if (p->fp32_read) {
      if (!span[3]) span[2] = p->fp32_at + (b - p->offset);
      span[3] += e - b;
    }
  }
}

void model_load_working_copies(model *m, dev_stream *s, const float *flat, size_t lo, size_t hi) {
  for (int k = 0; k < m->nparams; k++) {
    const param_info *p = &m->params[k];
    size_t b = p->offset > lo ? p->offset : lo;
    size_t e = p->offset + p->count < hi ? p->offset + p->count : hi;
    if (e <= b) continue;
    if (p->gemm)
      m->ops->cast_bf16(s, (dev_bf16 *)((char *)m->gemm_w + 2 * (p->gemm_at + (b - p->offset))),
                        flat + (b - lo), e - b);
    if (p->fp32_read)
      m->ops->copy(s, m->fp32_w + p->fp32_at + (b - p->offset), flat + (b - lo), (e - b) * 4);
  }
}

/* The parameter starting at flat offset off (a scan of the layout: a dozen entries per block,
 * nothing beside the GEMM it is looked up for; NULL when none starts there). */
static const param_info *param_starting_at(const model *m, size_t off) {
  for (int k = 0; k < m->nparams; k++)
    if (m->params[k].offset == off) return &m->params[k];
  return NULL;
}

/* The fp32 parameter at flat offset off, wherever its unit is bound. */
static float *fp32_weight(const model *m, size_t off) {
  int u = model_unit_of(m, off);
  return m->unit_param[u] + (off - m->unit_begin[u]);
}

/* The working copy of the GEMM weight at flat offset off. */
static dev_bf16 *bf16_weight(const model *m, size_t off) {
  const param_info *p = param_starting_at(m, off);
  return (dev_bf16 *)((char *)m->gemm_w + 2 * p->gemm_at);
}

void model_refresh_gemm_weights(model *m) {
  if (!m->gemm_w || m->fp32_w) return; /* sharded masters: the gathers load it */
  for (int k = 0; k < m->nparams; k++) {
    const param_info *p = &m->params[k];
    if (p->gemm)
      m->ops->cast_bf16(m->compute, bf16_weight(m, p->offset), fp32_weight(m, p->offset), p->count);
  }
}

void model_gemm_forward(model *m, size_t off, dev_act *out, const dev_act *inp, const float *bias,
                        int N, int C, int OC) {
  if (m->gemm_w)
    m->ops->matmul_forward_bf16w(m->compute, out, inp, bf16_weight(m, off), bias, N, C, OC);
  else
    m->ops->matmul_forward(m->compute, out, inp, fp32_weight(m, off), bias, N, C, OC);
}

void model_gemm_backward(model *m, size_t off, dev_act *dinp, float *dweight, float *dbias,
                         const dev_act *dout, const dev_act *inp, int N, int C, int OC) {
  if (m->gemm_w)
    m->ops->matmul_backward_bf16w(m->compute, dinp, dweight, dbias, dout, inp, bf16_weight(m, off),
                                  N, C, OC);
  else
    m->ops->matmul_backward(m->compute, dinp, dweight, dbias, dout, inp, fp32_weight(m, off), N, C,
                            OC);
}
