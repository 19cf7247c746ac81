/*
 * diff_prediction.c — a measured run against the planner's prediction for it
 * (`stepscope diff RUN PREDICTION.json`; ssa_diff.h, docs/diff.md).
 *
 * Which layout: the run's configuration (the trainer's, in the trace header) names its
 * model, batch and layout; the prediction's layout with the same dp, tp, pp, cp, sp, ZeRO
 * stage, recomputation, micro-batches, schedule and virtual stages is compared. A file with
 * one layout (a single-layout plan or --what-if) is compared whatever it is, with a warning
 * naming every difference, so that "I predicted A and ran B" still shows the numbers.
 *
 * What is measured, and how it meets the prediction's definition (docs/plan.md):
 *   step time       the run's median step time (the slowest rank's span), as --from calibrates;
 *   compute         per step, the largest over ranks of the device's compute time
 *                   (the planner's compute is the slowest pipeline stage's);
 *   exposed comm.   per step, the mean over ranks of the time collectives other than the
 *                   pipeline's sends and receives run while nothing computes (exposed_comm -
 *                   pipeline_comm_only of docs/metrics.md; it also holds waits for slower
 *                   ranks; predicted: TP + CP + gradient synchronization);
 *   bubble          per step, the mean over pipeline ranks of their bubble (no compute and no
 *                   other collective: pipeline transfers and their waits are in it), and the
 *                   bubble fraction sum(bubble) / sum(span) (predicted: bubble + PP
 *                   transfers, and that over the step time);
 *   device memory   the device API's peak of live allocations, the largest over ranks
 *                   (predicted: the worst stage's total without the runtime baseline);
 *   process memory  the peak RSS, the largest over ranks (predicted: total with baseline);
 *   MFU             the run's (its own peak); the prediction's is rescaled to that peak when
 *                   the two peaks differ;
 *   tokens/s        tokens per step / step time.
 * Memory by component is not compared: the device API counts live bytes, not their purpose.
 */
#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_diff.h"
#include "model_config.h"
#include "ssa_plan.h"

static void warn(ssa_pred_diff *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(ssa_pred_diff *d, const char *fmt, ...) {
  if (d->nwarnings >= SSA_PRED_MAX_WARNINGS) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(d->warnings[d->nwarnings++], sizeof d->warnings[0], fmt, ap);
  va_end(ap);
}

/* Appends ", what run X prediction Y" to buf when the two ints differ. */
static void differs(char *buf, size_t size, const char *what, int run, int pred) {
  if (run == pred) return;
  size_t n = strlen(buf);
  snprintf(buf + n, size - n, "%s%s %d (predicted %d)", n ? ", " : "", what, run, pred);
}

/* What differs between the run's layout and a predicted one ("" when nothing). */
static void layout_differences(const mm_layout *run, const mm_layout *p, char *buf, size_t size) {
  buf[0] = '\0';
  differs(buf, size, "dp", run->dp, p->dp);
  differs(buf, size, "tp", run->tp, p->tp);
  differs(buf, size, "pp", run->pp, p->pp);
  differs(buf, size, "cp", run->cp, p->cp);
  differs(buf, size, "sp", run->sp != 0, p->sp != 0);
  differs(buf, size, "zero", run->zero, p->zero);
  differs(buf, size, "microbatches", run->microbatches, p->microbatches);
  differs(buf, size, "micro_batch", run->micro_batch, p->micro_batch);
  differs(buf, size, "ep", run->ep > 0 ? run->ep : 1, p->ep > 0 ? p->ep : 1);
  differs(buf, size, "shard_group", run->shard_group, p->shard_group);
  size_t n = strlen(buf);
  if (run->recompute != p->recompute)
    snprintf(buf + n, size - n, "%srecompute %s (predicted %s)", n ? ", " : "",
             mm_recompute_name(run->recompute), mm_recompute_name(p->recompute));
  n = strlen(buf);
  if (run->pp > 1 && p->pp > 1 && run->schedule != p->schedule)
    snprintf(buf + n, size - n, "%sschedule %s (predicted %s)", n ? ", " : "",
             mm_schedule_name(run->schedule), mm_schedule_name(p->schedule));
  if (run->pp > 1 && p->pp > 1 && run->schedule == MM_SCHED_INTERLEAVED &&
      p->schedule == MM_SCHED_INTERLEAVED)
    differs(buf, size, "virtual_stages", run->virtual_stages, p->virtual_stages);
}

/* What differs between the run's model and the prediction's job. */
static void model_differences(const mm_layout *run, const ssa_prediction *p, char *buf,
                              size_t size) {
  buf[0] = '\0';
  differs(buf, size, "layers", run->layers, p->layers);
  differs(buf, size, "hidden", run->hidden, p->hidden);
  differs(buf, size, "heads", run->heads, p->heads);
  differs(buf, size, "vocab", run->vocab, p->vocab);
  differs(buf, size, "seq", run->seq, p->seq);
  if (p->ffn > 0) differs(buf, size, "ffn", 4 * run->hidden, p->ffn);
  differs(buf, size, "global batch", run->dp * run->microbatches * run->micro_batch,
          p->global_batch);
}

static void metric(ssa_pred_diff *d, int k, const char *name, const char *what, double pred,
                   double meas, int is_bytes) {
  ssa_pred_metric *m = &d->m[k];
  m->name = name;
  m->what = what;
  m->predicted = pred;
  m->measured = meas;
  m->is_bytes = is_bytes;
  m->rel_error = isfinite(pred) && isfinite(meas) && meas != 0 ? (pred - meas) / fabs(meas) : NAN;
}

/* The largest value of a member of the ranks' "memory" metadata, NaN if none has it. */
static double max_memory_meta(const ssa_run *run, size_t offset) {
  double best = NAN;
  for (size_t i = 0; i < run->nranks; i++) {
    double v = *(const double *)((const char *)&run->ranks[i].tmeta.memory + offset);
    if (v > 0 && !(v <= best)) best = v;
  }
  return best;
}

/* The run's own noise on its median step time: the 95 % interval of the median over the steps
 * the median counts (median_interval.c); too few steps leave it unknown (d->noise_ok 0). */
static void step_noise(const ssa_analysis *an, ssa_pred_diff *d) {
  d->noise_ok = 0;
  d->noise_steps = 0;
  double *v = an->nsteps ? malloc(an->nsteps * sizeof *v) : NULL;
  if (!v) return;
  for (size_t i = 0; i < an->nsteps; i++)
    if (an->steps[i].in_medians && an->steps[i].time > 0)
      v[d->noise_steps++] = (double)an->steps[i].time * 1e-9;
  d->noise_ok = ssa_median_interval(v, d->noise_steps, 0.95, &d->noise_lo_s, &d->noise_hi_s,
                                    &d->noise_confidence) == 0;
  free(v);
}

int ssa_prediction_diff(const ssa_run *run, const ssa_analysis *an, const char *run_path,
                        const ssa_prediction *p, const char *prediction_path, ssa_pred_diff *d,
                        char *err, size_t errlen) {
  memset(d, 0, sizeof *d);
  snprintf(d->run_path, sizeof d->run_path, "%s", run_path);
  snprintf(d->prediction_path, sizeof d->prediction_path, "%s", prediction_path);
  d->nlayouts = p->nlayouts;
  d->calibrated = p->calibrated;
  snprintf(d->calibration_source, sizeof d->calibration_source, "%s", p->calibration_source);

  /* the run's layout */
  const char *config = NULL;
  for (size_t i = 0; i < run->nranks && !config; i++)
    config = run->ranks[i].config_json;
  mm_layout rl;
  char why[256] = "";
  int have_layout = config && plan_layout_of_config(config, &rl, why, sizeof why) == 0;
  if (!have_layout) {
    if (p->nlayouts > 1) {
      snprintf(err, errlen,
               "%s: %s; the prediction has %zu layouts and nothing says which one "
               "the run had",
               run_path, config ? why : "no rank carries the trainer's configuration", p->nlayouts);
      return -1;
    }
    snprintf(d->run_layout, sizeof d->run_layout, "unknown");
    warn(d,
         "the run does not say its layout (%s): the prediction's only layout is compared "
         "unchecked",
         config ? why : "no trainer configuration in its traces");
    d->layout_index = 0;
  } else {
    plan_layout_name(&rl, d->run_layout, sizeof d->run_layout);
    size_t found = p->nlayouts;
    char diff[512];
    for (size_t i = 0; i < p->nlayouts && found == p->nlayouts; i++) {
      layout_differences(&rl, &p->layouts[i].layout, diff, sizeof diff);
      if (!diff[0]) found = i;
    }
    if (found == p->nlayouts && p->nlayouts > 1) {
      snprintf(err, errlen, "none of the prediction's %zu layouts is the run's (%s)", p->nlayouts,
               d->run_layout);
      return -1;
    }
    d->layout_index = found < p->nlayouts ? found : 0;
    layout_differences(&rl, &p->layouts[d->layout_index].layout, diff, sizeof diff);
    d->layout_matches = !diff[0];
    if (diff[0]) warn(d, "the run's layout is not the predicted one: %s", diff);
    model_differences(&rl, p, diff, sizeof diff);
    if (diff[0]) {
      d->layout_matches = 0;
      warn(d, "the run's model or batch is not the predicted job's: %s", diff);
    }
  }
  const ssa_pred_layout *pl = &p->layouts[d->layout_index];
  d->predicted = pl;

  /* the device the prediction assumed against the one the run had */
  const char *dev_name = run->nranks ? run->ranks[0].device_name : NULL;
  const char *kind = plan_device_kind_of_name(dev_name);
  if (p->device[0] && strcmp(kind, p->device))
    warn(d, "the prediction is for device %s, the run ran on %s (%s)", p->device, kind,
         dev_name ? dev_name : "no device name");
  if (!an->nsteps || an->step_time_median <= 0)
    warn(d, "the run has no steps: its step time is unknown");

  /* measured */
  double step = an->step_time_median > 0 ? an->step_time_median * 1e-9 : NAN;
  double compute = NAN, exposed = 0, bubble = 0, bubble_sum = 0, span_sum = 0;
  size_t nexp = 0, npipe = 0;
  for (size_t i = 0; i < an->nranks; i++) {
    const ssa_rank_result *rr = &an->ranks[i];
    if (rr->error || !rr->nsteps) continue;
    double steps = (double)rr->nsteps;
    double c = rr->totals.compute / steps * 1e-9;
    if (!(c <= compute)) compute = c;
    exposed += (rr->totals.exposed_comm - rr->totals.pipeline_comm_only) / steps * 1e-9;
    nexp++;
    if (rr->pipeline) {
      bubble += rr->totals.bubble / steps * 1e-9;
      bubble_sum += (double)rr->totals.bubble;
      span_sum += (double)rr->totals.span;
      npipe++;
    }
  }
  double exposed_mean = nexp ? exposed / (double)nexp : NAN;
  double bubble_mean = npipe ? bubble / (double)npipe : nexp ? 0.0 : NAN;
  double bubble_frac = npipe && span_sum > 0 ? bubble_sum / span_sum : nexp ? 0.0 : NAN;
  double tokens_step = an->tokens_per_step > 0 ? an->tokens_per_step
                       : have_layout ? (double)rl.dp * rl.microbatches * rl.micro_batch * rl.seq
                                     : NAN;
  double mfu_pred = pl->mfu;
  if (isfinite(an->peak_flops_per_device) && an->peak_flops_per_device > 0 &&
      isfinite(p->peak_flops) && p->peak_flops > 0 && p->peak_flops != an->peak_flops_per_device) {
    mfu_pred = pl->mfu * p->peak_flops / an->peak_flops_per_device;
    warn(d,
         "the run's MFU uses a peak of %.4g FLOP/s per device, the prediction's %.4g: the "
         "predicted MFU is rescaled to the run's peak",
         an->peak_flops_per_device, p->peak_flops);
  }
  /* descheduled waits (an oversubscribed CPU, docs/plan.md) are waits in collectives: the
   * trace counts them as exposed; predictions older than the term have none */
  double pred_exposed = pl->tp_s + pl->cp_s + pl->grad_sync_s +
                        (isfinite(pl->wait_s) ? pl->wait_s : 0) +
                        (isfinite(pl->ep_s) ? pl->ep_s : 0);
  double pred_bubble = pl->bubble_s + pl->pp_s;
  step_noise(an, d);
  metric(d, SSA_PM_STEP_TIME, "step_time_s", "step time (s)", pl->step_time_s, step, 0);
  metric(d, SSA_PM_COMPUTE, "compute_s", "compute per step, slowest rank (s)", pl->compute_s,
         compute, 0);
  metric(d, SSA_PM_EXPOSED_COMM, "exposed_comm_s", "exposed collectives per step (s)", pred_exposed,
         exposed_mean, 0);
  metric(d, SSA_PM_BUBBLE, "bubble_s", "pipeline bubble per step (s)", pred_bubble, bubble_mean, 0);
  metric(d, SSA_PM_BUBBLE_FRACTION, "bubble_fraction", "bubble fraction",
         pl->step_time_s > 0 ? pred_bubble / pl->step_time_s : NAN, bubble_frac, 0);
  metric(d, SSA_PM_DEVICE_MEMORY, "device_memory_bytes", "device memory peak",
         pl->mem_total - pl->mem_runtime_baseline,
         max_memory_meta(run, offsetof(ssa_meta_memory, measured_peak_bytes)), 1);
  metric(d, SSA_PM_PROCESS_MEMORY, "process_memory_bytes", "process peak RSS (with baseline)",
         pl->mem_total, max_memory_meta(run, offsetof(ssa_meta_memory, rss_peak_bytes)), 1);
  metric(d, SSA_PM_MFU, "mfu", "MFU", mfu_pred, an->mfu, 0);
  metric(d, SSA_PM_TOKENS_PER_S, "tokens_per_s", "tokens/s", pl->tokens_per_s,
         isfinite(step) ? tokens_step / step : NAN, 0);
  return 0;
}

/* ---- reports ------------------------------------------------------------------------------ */

static void value_text(const ssa_pred_metric *m, double v, char *buf, size_t size) {
  if (!isfinite(v))
    snprintf(buf, size, "-");
  else if (m->is_bytes)
    snprintf(buf, size, "%.2f MiB", v / 1048576.0);
  else if (!strcmp(m->name, "mfu") || !strcmp(m->name, "bubble_fraction"))
    snprintf(buf, size, "%.2f %%", 100 * v);
  else
    snprintf(buf, size, "%.4g", v);
}

void ssa_prediction_diff_text(const ssa_pred_diff *d, FILE *f) {
  fputs("run:        ", f);
  sc_fputs_safe(d->run_path, f);
  fprintf(f, " (%s)\nprediction: ", d->run_layout);
  sc_fputs_safe(d->prediction_path, f);
  fprintf(f, ", layout %zu of %zu (%s)%s", d->layout_index + 1, d->nlayouts, d->predicted->name,
          d->calibrated ? ", calibrated by " : ", uncalibrated (device table)");
  if (d->calibrated) sc_fputs_safe(d->calibration_source, f);
  fputc('\n', f);
  for (int i = 0; i < d->nwarnings; i++) {
    fputs("warning: ", f);
    sc_fputs_safe(d->warnings[i], f);
    fputc('\n', f);
  }
  fprintf(f, "\n%-38s %14s %14s %9s\n", "", "predicted", "measured", "error");
  for (int k = 0; k < SSA_PM_N; k++) {
    const ssa_pred_metric *m = &d->m[k];
    char p[48], v[48], e[24];
    value_text(m, m->predicted, p, sizeof p);
    value_text(m, m->measured, v, sizeof v);
    if (isfinite(m->rel_error))
      snprintf(e, sizeof e, "%+.1f %%", 100 * m->rel_error);
    else
      snprintf(e, sizeof e, "-");
    fprintf(f, "%-38s %14s %14s %9s\n", m->what, p, v, e);
  }
  const ssa_pred_metric *st = &d->m[SSA_PM_STEP_TIME];
  if (!isfinite(st->predicted) || !isfinite(st->measured)) {
    /* no step time on one side: nothing to judge */
  } else if (!d->noise_ok)
    fprintf(f,
            "\nverdict: undecided: %zu steps are too few to bound the run's median step time "
            "(6 give a 95 %% interval)\n",
            d->noise_steps);
  else if (st->predicted >= d->noise_lo_s && st->predicted <= d->noise_hi_s)
    fprintf(f,
            "\nverdict: the predicted step time is within the run's own noise: its median lies "
            "in %.4g-%.4g s (%.1f %% over %zu steps)\n",
            d->noise_lo_s, d->noise_hi_s, 100 * d->noise_confidence, d->noise_steps);
  else
    fprintf(f,
            "\nverdict: the prediction misses the step time beyond the run's noise (%+.1f %%): "
            "its median lies in %.4g-%.4g s (%.1f %% over %zu steps)\n",
            100 * st->rel_error, d->noise_lo_s, d->noise_hi_s, 100 * d->noise_confidence,
            d->noise_steps);
  fprintf(f, "\nerror = (predicted - measured) / measured. Exposed collectives: TP, CP and "
             "gradient sync\n(measured, with their waits for slower ranks); the bubble holds the "
             "pipeline's transfers.\n");
}

void ssa_prediction_diff_json(const ssa_pred_diff *d, ssa_out *o) {
  ssa_out_str(o, "{\"schema_version\":1,\"kind\":\"stepscope.diff_prediction\",\"run\":");
  ssa_out_json_string(o, d->run_path);
  ssa_out_field_string(o, "run_layout", d->run_layout);
  ssa_out_field_string(o, "prediction", d->prediction_path);
  ssa_out_field_u64(o, "layout_index", d->layout_index);
  ssa_out_field_u64(o, "layouts", d->nlayouts);
  ssa_out_field_string(o, "predicted_layout", d->predicted->name);
  ssa_out_field_bool(o, "layout_matches", d->layout_matches);
  ssa_out_field_bool(o, "calibrated", d->calibrated);
  ssa_out_key(o, "calibration_source");
  if (d->calibrated)
    ssa_out_json_string(o, d->calibration_source);
  else
    ssa_out_str(o, "null");
  ssa_out_str(o, ",\"metrics\":{");
  for (int k = 0; k < SSA_PM_N; k++) {
    const ssa_pred_metric *m = &d->m[k];
    if (k) ssa_out_char(o, ',');
    ssa_out_json_string(o, m->name);
    ssa_out_str(o, ":{\"predicted\":");
    ssa_out_double(o, m->predicted);
    ssa_out_field_double(o, "measured", m->measured);
    ssa_out_field_double(o, "rel_error", m->rel_error);
    ssa_out_char(o, '}');
  }
  ssa_out_str(o, "},\"step_time_noise\":");
  if (d->noise_ok) {
    ssa_out_str(o, "{\"median_interval_s\":[");
    ssa_out_double(o, d->noise_lo_s);
    ssa_out_char(o, ',');
    ssa_out_double(o, d->noise_hi_s);
    ssa_out_str(o, "]");
    ssa_out_field_double(o, "confidence", d->noise_confidence);
    ssa_out_field_u64(o, "steps", d->noise_steps);
    const ssa_pred_metric *st = &d->m[SSA_PM_STEP_TIME];
    ssa_out_field_bool(o, "prediction_inside",
                       st->predicted >= d->noise_lo_s && st->predicted <= d->noise_hi_s);
    ssa_out_char(o, '}');
  } else {
    ssa_out_str(o, "null");
  }
  ssa_out_str(o, ",\"warnings\":[");
  for (int i = 0; i < d->nwarnings; i++) {
    if (i) ssa_out_char(o, ',');
    ssa_out_json_string(o, d->warnings[i]);
  }
  ssa_out_str(o, "]}\n");
}
