/*
 * plan_ceilings.c — the GEMM ceiling a framework's compute-by-shape model assumes, measured
 * from a real run instead (`stepscope plan --ceilings-from RUN`; docs/plan.md "Compute by
 * shape").
 *
 * What it is for: the device table's GEMM share (62 % of an H100's dense bf16 peak, 80 % of an
 * A100's) was set on published runs; a user who has a trace of their own job on their own GPUs
 * (PyTorch's profiler with record_shapes, or a stepscope trace) has the measurement itself.
 *
 * How: the run's op table (metrics/ssa_ops.h, the one `stepscope ops` prints) gives every GEMM
 * op's FLOPs from its shapes and the device time of the kernels it launched. Over the GEMMs of
 * the precision planned (bf16; fp8 with --precision fp8) the share is their FLOPs / their time /
 * the run's device's dense peak for that precision (the datasheet's, ssa_ceilings_of_device).
 * The planner charges each GEMM its tile and wave quantization on top of the ceiling
 * (plan_shape_costs.c), so the ceiling is taken from the GEMMs whose output fills the device's
 * waves by that model (quantization <= 1.10: one matrix, 128 x 256 tiles on the run's SMs),
 * each GEMM's time divided by its small quantization factor. Not from the others: on real H100
 * traces the model charges outputs of few tiles far more than they lose (TraceLens' H100
 * traces: 5185 x 1024 outputs, quantization 1.63, ran at 67 % of peak beside 75 % for 5185 x
 * 4096 ones, docs/plan.md), so dividing their time by it would inflate the ceiling. A CPU-only
 * trace (host times) and a run with under 1 ms of such GEMMs are refused: nothing to measure.
 *
 * The fused-attention rate comes from the same table when it can (plan_attention_from_ops).
 * The planner charges a layer's attention as MFU counts it: QK^T and PV over every (query,
 * key) pair, the backward twice the forward, all at one rate per such FLOP. Its models are
 * causal decoders, whose kernels compute about half the pairs, so the rate is measured on the
 * run's causal fused-attention ops only, each counted as the planner would count it (the op
 * models' attention_whole_flops; twice that for a backward): a non-causal op's time says
 * nothing reliable about a causal kernel's, which skips work unevenly (tiles on the diagonal),
 * so it is left out rather than converted. Forward and backward kernels reach different rates
 * (the backward recomputes the scores), so both must be there, and they are weighed as the
 * planner charges them, one forward to two backward FLOPs: 3 / (1/forward + 2/backward),
 * whatever the trace's mix (with recomputation the planner charges the forward once more at
 * the same rate). An inference trace (no backward) keeps the device table's rate and says so.
 */
#include "ssa_plan.h"

#include <stdio.h>
#include <string.h>

#include "ssa_ops.h"

/* Less GEMM device time than this measures nothing worth planning on. */
#define PLAN_CEILING_MIN_TIME_NS 1000000
/* GEMMs whose outputs fill the device's waves this well (the planner's quantization model)
 * make the ceiling. */
#define PLAN_CEILING_MAX_QUANTIZATION 1.10
/* Less attention device time than this (forward and backward together) measures nothing. */
#define PLAN_ATTENTION_MIN_TIME_NS 1000000

int plan_ceilings_from_ops(const ssa_op_table *t, int fp8, plan_measured_gemm *out, char *err,
                           size_t errlen) {
  memset(out, 0, sizeof *out);
  snprintf(out->device, sizeof out->device, "%s", t->device_name[0] ? t->device_name : "unknown");
  if (t->host_time) {
    snprintf(err, errlen, "a CPU-only trace: its ops' times are the host's, not a GPU's");
    return -1;
  }
  ssa_ceilings c;
  if (!ssa_ceilings_of_device(t->device_name, &c)) {
    snprintf(err, errlen, "its device '%s' is not in the ceilings table (%s)", out->device,
             ssa_ceilings_devices());
    return -1;
  }
  ssa_peak_dtype dtype = fp8 ? SSA_PEAK_FP8 : SSA_PEAK_BF16;
  out->dtype = ssa_peak_dtype_names[dtype];
  out->peak_flops = c.flops[dtype];
  /* the run's device as the planner knows it, for its SMs and tile (none: no correction) */
  const plan_device *dev = plan_device_find(plan_device_kind_of_name(t->device_name));
  double filled_flops = 0, filled_time = 0; /* the waves-filling GEMMs: their FLOPs, their
                                               time without their quantization */
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_op_row *r = &t->rows[i];
    if (r->family != SSA_OPF_GEMM || r->dtype != dtype || r->time_ns <= 0 || !(r->flops > 0))
      continue;
    double q = 0, batch, rows, cols; /* 0: unknown (batched, no output shape, no SM count) */
    ssa_op_inputs in;
    if (dev && dev->sms > 0 && r->inputs && ssa_op_inputs_parse(r->inputs, &in) == 0 &&
        ssa_gemm_output(r->name, &in, &batch, &rows, &cols) && batch == 1)
      q = plan_gemm_quantization(dev, rows, cols);
    out->gemms += r->count;
    out->flops += r->flops;
    out->time_s += r->time_ns * 1e-9;
    if (q > 0 && q <= PLAN_CEILING_MAX_QUANTIZATION) {
      out->filled_gemms += r->count;
      filled_flops += r->flops;
      filled_time += r->time_ns * 1e-9 / q;
    }
  }
  if (filled_time * 1e9 < PLAN_CEILING_MIN_TIME_NS || !(out->peak_flops > 0)) {
    snprintf(err, errlen,
             "%.3f ms of %s GEMMs with shapes whose outputs fill the device's waves (of %.3f ms "
             "of %s GEMMs; at least 1 ms to measure a ceiling; record the profile with "
             "record_shapes=True)",
             filled_time * 1e3, out->dtype, out->time_s * 1e3, out->dtype);
    return -1;
  }
  out->ceiling = filled_flops / filled_time / out->peak_flops;
  out->share = out->flops / out->time_s / out->peak_flops;
  return 0;
}

void plan_attention_from_ops(const ssa_op_table *t, plan_measured_attention *out) {
  memset(out, 0, sizeof *out);
  ssa_ceilings c;
  if (t->host_time || !ssa_ceilings_of_device(t->device_name, &c) ||
      !(c.flops[SSA_PEAK_BF16] > 0)) {
    snprintf(out->why, sizeof out->why, "no GPU times or no known bf16 peak");
    return;
  }
  double peak = c.flops[SSA_PEAK_BF16];
  for (size_t i = 0; i < t->nrows; i++) {
    const ssa_op_row *r = &t->rows[i];
    if (r->family != SSA_OPF_ATTENTION || r->time_ns <= 0) continue;
    ssa_op_inputs in;
    ssa_op_cost cost;
    if (!r->inputs || ssa_op_inputs_parse(r->inputs, &in) || !ssa_op_cost_of(r->name, &in, &cost) ||
        !cost.attention_causal || (cost.dtype != SSA_PEAK_BF16 && cost.dtype != SSA_PEAK_FP16)) {
      out->left_out_ops += r->count;
      continue;
    }
    double flops = (double)r->count * cost.attention_whole_flops, time_s = r->time_ns * 1e-9;
    if (cost.attention_backward) {
      out->backward_ops += r->count;
      out->backward_flops += 2.0 * flops;
      out->backward_time_s += time_s;
    } else {
      out->forward_ops += r->count;
      out->forward_flops += flops;
      out->forward_time_s += time_s;
    }
  }
  double total_ns = (out->forward_time_s + out->backward_time_s) * 1e9;
  if (!out->forward_ops && !out->backward_ops)
    snprintf(out->why, sizeof out->why, "no causal bf16 fused-attention ops with shapes");
  else if (!out->forward_ops || !out->backward_ops)
    snprintf(out->why, sizeof out->why,
             "%lu causal bf16 fused-attention forward and %lu backward ops (both needed: they run "
             "at different rates%s)",
             out->forward_ops, out->backward_ops,
             out->backward_ops ? "" : "; an inference trace has no backward");
  else if (total_ns < PLAN_ATTENTION_MIN_TIME_NS)
    snprintf(out->why, sizeof out->why,
             "%.3f ms of causal fused attention (at least 1 ms to measure a rate)",
             total_ns * 1e-6);
  if (out->why[0]) {
    if (out->left_out_ops)
      snprintf(out->why + strlen(out->why), sizeof out->why - strlen(out->why),
               "; %lu attention ops left out (not causal, not bf16/fp16, or no shapes)",
               out->left_out_ops);
    return;
  }
  out->forward_share = out->forward_flops / out->forward_time_s / peak;
  out->backward_share = out->backward_flops / out->backward_time_s / peak;
  out->ceiling = 3.0 / (1.0 / out->forward_share + 2.0 / out->backward_share);
  out->measured = 1;
}
