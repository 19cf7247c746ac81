/*
 * run_metadata.c — what the run's metadata adds to the measurements:
 * step times across ranks, MFU and HFU from the `flops` metadata, predicted
 * versus measured memory from `memory`, and the theoretical pipeline bubble
 * of the `schedule`.
 *
 * Step time of step S = the longest span of S's window over the ranks (the
 * slowest rank sets the pace; windows partition the timeline, so a span is
 * an iteration period); the run's step time is the median over the selected
 * steps (SSA_MEDIAN_INDEX: the lower middle for an even count; `diff` uses the same steps
 * and the same median). Device latency of S (first start
 * to last end of the work S launched) likewise: longest over ranks, median
 * over the steps that launched work. Steps cut by the trace's end and stubs are left out of
 * both medians unless every step is. A stub is a rank's last step (in time) that launched
 * nothing and during which its devices did nothing, while an earlier step launched work: a
 * final ProfilerStep of host time only (49 us against 9.3 ms steps on one trace); a run's
 * step is a stub when it is one on every rank that has it.
 * MFU = model_flops_per_step / (step_seconds x peak_flops_per_device x world);
 * HFU the same with hardware_flops_per_step. Bubble theory: ssa_bubble_theory
 * (trainer_meta.c).
 */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

typedef struct step_ref {
  int64_t step, start_rel, end_rel, span, latency;
  int cut, stub;
} step_ref;

static int cmp_ref(const void *pa, const void *pb) {
  const step_ref *a = pa, *b = pb;
  return a->step < b->step ? -1 : a->step > b->step;
}

/* The decoded metadata of the first analysed rank that declared an object: `present` is the
 * offset of that object's `present` flag in ssa_trainer_meta. NULL when no rank did. */
static const ssa_trainer_meta *meta_any(const ssa_analysis *a, size_t present) {
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_trainer_meta *m = &a->ranks[i].rank->tmeta;
    if (*(const int *)((const char *)m + present)) return m;
  }
  return NULL;
}

/* No device does more than its peak: a run MFU or HFU above 100 % means the FLOPs per step or
 * the peak in the metadata is wrong (a peak given for the wrong precision, FLOPs counted for
 * another configuration); it is warned about, with what it was computed from, and MFU and
 * HFU are not reported (NaN), for the run and every step. A step above 100 % in a plausible
 * run is too short for the FLOPs of a step (a partial step): its own MFU is left out. */
static void drop_implausible_utilization(ssa_analysis *a, double peak_per_s) {
  int run = a->mfu > 1.0 || a->hfu > 1.0;
  size_t steps = 0;
  for (size_t i = 0; i < a->nsteps; i++)
    if (run || a->steps[i].mfu > 1.0 || a->steps[i].hfu > 1.0) {
      steps += a->steps[i].mfu > 1.0 || a->steps[i].hfu > 1.0;
      a->steps[i].mfu = a->steps[i].hfu = NAN;
    }
  if (run) {
    ssa_analysis_warn(a,
                      "MFU/HFU of %.0f %% exceeds 100 %%: the FLOPs per step (model %.4g, "
                      "hardware %.4g) or the peak (%.4g FLOP/s for the %d devices) in the "
                      "metadata is implausible; MFU and HFU are not reported",
                      100.0 * fmax(a->mfu, a->hfu), a->model_flops_per_step,
                      a->hardware_flops_per_step, peak_per_s, a->flops_world);
    a->mfu = a->hfu = NAN;
  } else if (steps) {
    ssa_analysis_warn(a,
                      "%zu step(s) would have an MFU/HFU above 100 %%: too short for the FLOPs "
                      "of a step (partial steps); their MFU is not reported",
                      steps);
  }
}

/* Flags the stub window of each rank (see the top of the file). */
static void flag_stubs(ssa_analysis *a) {
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    size_t last = 0;
    int earlier_work = 0;
    for (size_t s = 1; s < rr->nsteps; s++)
      if (rr->windows[s].start > rr->windows[last].start) last = s;
    for (size_t s = 0; s < rr->nsteps; s++)
      earlier_work |= s != last && rr->windows[s].projected;
    if (rr->nsteps > 1 && earlier_work && !rr->windows[last].projected &&
        rr->windows[last].busy == 0)
      rr->windows[last].stub = 1;
  }
}

double ssa_metadata_model_flops(const ssa_analysis *a) {
  const ssa_trainer_meta *fm = meta_any(a, offsetof(ssa_trainer_meta, flops.present));
  return fm ? fm->flops.model_flops_per_step : NAN;
}

/* FLOPs per step and the peak (metadata `flops`): MFU and HFU of the run and of each step. */
static void read_flops(ssa_analysis *a) {
  const ssa_trainer_meta *fm = meta_any(a, offsetof(ssa_trainer_meta, flops.present));
  const ssa_meta_flops *flops = fm ? &fm->flops : NULL;
  double world = 0;
  if (flops) {
    a->model_flops_per_step = ssa_metadata_model_flops(a); /* NaN when absent, as initialised */
    a->hardware_flops_per_step = flops->hardware_flops_per_step;
    a->peak_flops_per_device = flops->peak_flops_per_device;
    a->tokens_per_step = flops->tokens_per_step;
    world = ssa_meta_or(flops->world, 0);
  }
  if (world <= 0 && a->nranks) world = a->ranks[0].rank->world_size;
  a->flops_world = (int)world;
  if (flops && world > 0 && a->peak_flops_per_device > 0) {
    double denom_per_s = a->peak_flops_per_device * world;
    for (size_t i = 0; i < a->nsteps; i++) {
      double sec = (double)a->steps[i].time * 1e-9;
      if (sec <= 0) continue;
      a->steps[i].mfu = a->model_flops_per_step / (sec * denom_per_s);
      a->steps[i].hfu = a->hardware_flops_per_step / (sec * denom_per_s);
    }
    if (a->step_time_median > 0) {
      double sec = (double)a->step_time_median * 1e-9;
      a->mfu = a->model_flops_per_step / (sec * denom_per_s);
      a->hfu = a->hardware_flops_per_step / (sec * denom_per_s);
    }
    drop_implausible_utilization(a, denom_per_s);
  }
}

int ssa_read_run_metadata(ssa_analysis *a) {
  a->mfu = a->hfu = NAN;
  a->model_flops_per_step = a->hardware_flops_per_step = NAN;
  a->peak_flops_per_device = a->tokens_per_step = NAN;
  a->mem_predicted_total = a->mem_predicted_parameters = a->mem_predicted_gradients = -1;
  a->mem_predicted_optimizer = a->mem_predicted_activations = a->mem_measured_peak = -1;
  a->bubble_theory = NAN;
  a->step_time_median = -1;
  a->device_latency_median = -1;

  flag_stubs(a);
  /* step times */
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++)
    n += a->ranks[i].nsteps;
  step_ref *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  size_t k = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    for (size_t s = 0; s < rr->nsteps; s++) {
      const ssa_window *w = &rr->windows[s];
      v[k++] = (step_ref){w->step,
                          ssa_rel_time(a->run, rr->rank, w->start),
                          ssa_rel_time(a->run, rr->rank, w->end),
                          w->span,
                          w->device_latency,
                          w->cut,
                          w->stub};
    }
  }
  qsort(v, n, sizeof *v, cmp_ref);
  a->steps = malloc((n ? n : 1) * sizeof *a->steps);
  int64_t *times = malloc((n ? n : 1) * sizeof *times);
  int64_t *lat = malloc((n ? n : 1) * sizeof *lat);
  size_t nlat = 0;
  if (!a->steps || !times || !lat) {
    free(v);
    free(times);
    free(lat);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && v[e].step == v[g].step)
      e++;
    ssa_run_step *s = &a->steps[a->nsteps++];
    s->step = v[g].step;
    s->start_rel = v[g].start_rel;
    s->end_rel = v[g].end_rel;
    s->time = v[g].span;
    s->device_latency = -1;
    s->cut = 0;
    s->stub = 1; /* a stub when every rank's window of it is */
    for (size_t x = g; x < e; x++) {
      if (v[x].start_rel < s->start_rel) s->start_rel = v[x].start_rel;
      if (v[x].end_rel > s->end_rel) s->end_rel = v[x].end_rel;
      if (v[x].span > s->time) s->time = v[x].span;
      if (v[x].latency > s->device_latency) s->device_latency = v[x].latency;
      s->cut |= v[x].cut;
      s->stub &= v[x].stub;
    }
    s->mfu = s->hfu = NAN;
    g = e;
  }
  free(v);
  /* the medians leave out steps cut by the trace's end and stubs, unless all are */
  size_t nout = 0, nt = 0;
  for (size_t i = 0; i < a->nsteps; i++)
    nout += a->steps[i].cut || a->steps[i].stub;
  for (size_t i = 0; i < a->nsteps; i++) {
    a->steps[i].in_medians = !(a->steps[i].cut || a->steps[i].stub) || nout == a->nsteps;
    if (!a->steps[i].in_medians) continue;
    times[nt++] = a->steps[i].time;
    if (a->steps[i].device_latency >= 0) lat[nlat++] = a->steps[i].device_latency;
  }
  if (nt) {
    qsort(times, nt, sizeof *times, ssa_cmp_i64);
    a->step_time_median = times[SSA_MEDIAN_INDEX(nt)];
  }
  if (nlat) {
    qsort(lat, nlat, sizeof *lat, ssa_cmp_i64);
    a->device_latency_median = lat[SSA_MEDIAN_INDEX(nlat)];
  }
  free(times);
  free(lat);

  read_flops(a);

  /* memory */
  const ssa_trainer_meta *mm = meta_any(a, offsetof(ssa_trainer_meta, memory.present));
  if (mm) {
    const ssa_meta_memory *mem = &mm->memory;
    a->mem_predicted_total = ssa_meta_or(mem->predicted_total, a->mem_predicted_total);
    a->mem_predicted_parameters =
        ssa_meta_or(mem->predicted_parameters, a->mem_predicted_parameters);
    a->mem_predicted_gradients = ssa_meta_or(mem->predicted_gradients, a->mem_predicted_gradients);
    a->mem_predicted_optimizer = ssa_meta_or(mem->predicted_optimizer, a->mem_predicted_optimizer);
    a->mem_predicted_activations =
        ssa_meta_or(mem->predicted_activations, a->mem_predicted_activations);
    a->mem_measured_peak = ssa_meta_or(mem->measured_peak_bytes, a->mem_measured_peak);
  }
  if (a->mem_measured_peak < 0) {
    uint64_t peak = 0;
    for (size_t i = 0; i < a->nranks; i++)
      if (a->ranks[i].rank->memory_peak_bytes > peak) peak = a->ranks[i].rank->memory_peak_bytes;
    if (peak) a->mem_measured_peak = (double)peak;
  }

  /* schedule */
  const ssa_trainer_meta *sm = meta_any(a, offsetof(ssa_trainer_meta, schedule.present));
  if (sm) {
    const ssa_meta_schedule *sched = &sm->schedule;
    double p = ssa_meta_or(sched->stages, 0), m = ssa_meta_or(sched->microbatches, 0);
    double vs = ssa_meta_or(sched->virtual_stages, 1);
    if (sched->has_name) memcpy(a->schedule_name, sched->name, sizeof a->schedule_name);
    a->schedule_stages = (int)p;
    a->schedule_microbatches = (int)m;
    a->schedule_virtual = (int)vs;
    a->bubble_theory = ssa_bubble_theory(a->schedule_name, (int)p, (int)m, (int)vs);
    if (isnan(a->bubble_theory)) a->bubble_theory = sched->bubble_theory;
  }
  return 0;
}
