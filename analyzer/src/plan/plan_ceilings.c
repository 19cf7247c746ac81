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
