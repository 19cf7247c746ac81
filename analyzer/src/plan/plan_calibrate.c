/*
 * plan_calibrate.c — what a measured run of the bundled trainer teaches the planner
 * (`stepscope plan --from RUN`): the layout it ran (its configuration in the trace header),
 * the FLOP rate its ranks achieved on the model's math, the bus bandwidth each
 * communicator group reached, the smallest collective time (latency), the step time that
 * nothing in the model explains (host overhead, per step), the collective time its ranks
 * spent exposed (split by plan_calibration_fit_host into the waits of ranks descheduled on
 * an oversubscribed CPU and the rest), how far its pipeline
 * bubble exceeded the schedule's theory, and its runtime memory baseline.
 *
 * Every figure is a median or a bytes-weighted mean over ranks and collectives of the
 * analysis that `stepscope analyze` prints (analyze.c); docs/plan.md says which.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"
#include "ssa_plan.h"
#include "ssa_metrics.h"
#include "ssa_import.h"

static double median(double *v, size_t n) {
  if (!n) return 0;
  qsort(v, n, sizeof *v, ssa_cmp_double);
  return v[(n - 1) / 2];
}

/* The trainer's configuration JSON read through the metadata lookups (json_lookup.c). */
static int config_number(void *ctx, const char *key, double *out) {
  return ssa_json_number(ctx, key, out);
}

static int config_string(void *ctx, const char *key, char *buf, size_t size) {
  return ssa_json_string(ctx, key, buf, size);
}

static int config_bool(void *ctx, const char *key, int *out) {
  return ssa_json_bool(ctx, key, out);
}

int plan_layout_of_config(const char *json, mm_layout *l, char *err, size_t errlen) {
  mm_config_reader r = {config_number, config_string, config_bool, (void *)json};
  return mm_layout_from_config(&r, l, err, errlen);
}

/* A host range the trainer opens around a phase of each micro-batch. */
typedef struct phase_span {
  int64_t start, end;
  int backward;
} phase_span;

/* The rank's compute time inside its analysed window by the phase whose host range
 * ("forward" / "backward") holds the op's launch: forward, backward, and attention's forward
 * (ops named "attention..."). Returns 0, or -1 when the rank has no such ranges or memory. */
static int phase_times(const ssa_rank *r, int64_t t0, int64_t t1, double *fwd, double *bwd,
                       double *att_fwd) {
  *fwd = *bwd = *att_fwd = 0;
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++) {
    const char *name = ssa_rank_str(r, r->ranges[i].name);
    n += name && (!strcmp(name, "forward") || !strcmp(name, "backward"));
  }
  if (!n) return -1;
  phase_span *p = malloc(n * sizeof *p);
  if (!p) return -1;
  n = 0;
  for (size_t i = 0; i < r->nranges; i++) { /* sorted by start (rank_finish.c) */
    const char *name = ssa_rank_str(r, r->ranges[i].name);
    if (name && (!strcmp(name, "forward") || !strcmp(name, "backward")))
      p[n++] = (phase_span){r->ranges[i].start, r->ranges[i].end, name[0] == 'b'};
  }
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->cls != SSA_CLS_COMPUTE || o->launch == SSA_NONE || o->end <= o->start || o->start < t0 ||
        o->start >= t1)
      continue;
    int64_t t = r->apis[o->launch].start;
    size_t k = ssa_count_at_most(p, n, sizeof *p, t); /* p[k - 1]: the last span starting by t */
    if (k == 0 || p[k - 1].end <= t) continue;
    double d = (double)(o->end - o->start);
    if (p[k - 1].backward) {
      *bwd += d;
    } else {
      *fwd += d;
      const char *name = ssa_rank_str(r, o->name);
      if (name && !strncmp(name, "attention", 9)) *att_fwd += d;
    }
  }
  free(p);
  return *fwd + *bwd > 0 ? 0 : -1;
}

int plan_calibrate_from_run(const char *run_dir, int threads,
                            const struct ssa_import_options *import, plan_calibration *cal,
                            char *err, size_t errlen) {
  memset(cal, 0, sizeof *cal);
  ssa_load_options lo = {.threads = threads, .progress = 0};
  ssa_run run;
  stepscope_error e;
  memset(&e, 0, sizeof e);
  if (ssa_run_load_import(&run, run_dir, &lo, NULL, import, &e)) {
    snprintf(err, errlen, "%s", e.message[0] ? e.message : "cannot load the run");
    ssa_run_free(&run);
    return -1;
  }
  int rc = -1;
  ssa_options opt;
  ssa_options_default(&opt);
  opt.threads = threads;
  ssa_analysis an;
  memset(&an, 0, sizeof an);
  if (run.nranks == 0 || !run.ranks[0].config_json) {
    snprintf(err, errlen,
             "%s: no rank carries the trainer's configuration (a stepscope-train "
             "run traced with --trace or under stepscope record is needed)",
             run_dir);
    goto out;
  }
  if (plan_layout_of_config(run.ranks[0].config_json, &cal->layout, err, errlen) != 0) goto out;
  if (ssa_analyze(&run, &opt, &an, &e)) {
    snprintf(err, errlen, "%s", e.message[0] ? e.message : "analysis failed");
    goto out;
  }
  const mm_layout *l = &cal->layout;
  double *rates = calloc(an.nranks + 1, sizeof *rates);
  double *hosts = calloc(an.nranks + 1, sizeof *hosts);
  double *excess = calloc(an.nranks + 1, sizeof *excess);
  double *fshare = calloc(an.nranks + 1, sizeof *fshare);
  double *ashare = calloc(an.nranks + 1, sizeof *ashare);
  double *exposed = calloc(an.nranks + 1, sizeof *exposed);
  double *bfrac = calloc(an.nranks + 1, sizeof *bfrac);
  if (!rates || !hosts || !excess || !fshare || !ashare || !exposed || !bfrac) {
    free(bfrac);
    free(exposed);
    free(fshare);
    free(ashare);
    free(rates);
    free(hosts);
    free(excess);
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  size_t nr = 0, nh = 0, ne = 0, nf = 0;
  for (size_t i = 0; i < an.nranks; i++) {
    const ssa_rank_result *rr = &an.ranks[i];
    if (rr->error || rr->nsteps == 0 || rr->totals.compute <= 0) continue;
    int stage = rr->stage >= 0 && rr->stage < l->pp ? rr->stage : 0;
    double steps = (double)rr->nsteps;
    double compute_s = rr->totals.compute / steps / 1e9;
    rates[nr++] = plan_stage_flops_per_microbatch(l, stage) * l->microbatches / compute_s;
    double span = rr->totals.span / steps, bubble = rr->pipeline ? rr->totals.bubble / steps : 0;
    double rest = span - rr->totals.compute / steps - rr->totals.exposed_comm / steps -
                  rr->totals.exposed_mem / steps - bubble;
    hosts[nh++] = fmax(0.0, rest) / 1e9;
    exposed[nr - 1] = rr->totals.exposed_comm / steps / 1e9;
    if (rr->pipeline && isfinite(rr->bubble_theory) && span > 0) {
      bfrac[ne] = bubble / span;
      excess[ne++] = bubble / span - rr->bubble_theory;
    }
    double f, b, a;
    if (l->recompute == MM_RECOMPUTE_NONE && /* else backward holds forwards again */
        phase_times(rr->rank, rr->totals.start, rr->totals.end, &f, &b, &a) == 0) {
      fshare[nf] = f / (f + b);
      ashare[nf++] = a / (f + b);
    }
  }
  if (nf) {
    cal->forward_share = median(fshare, nf);
    cal->attention_forward_share = median(ashare, nf);
  }
  free(fshare);
  free(ashare);
  if (!nr) {
    free(rates);
    free(hosts);
    free(excess);
    free(exposed);
    free(bfrac);
    snprintf(err, errlen, "%s: no rank has steps with compute to calibrate on", run_dir);
    goto out;
  }
  cal->flops_rate = median(rates, nr);
  cal->exposed_comm_s = median(exposed, nr); /* split into waits and host by fit_host */
  free(exposed);
  cal->host_s_per_step = median(hosts, nh);
  cal->bubble_excess = ne ? fmax(0.0, median(excess, ne)) : 0;
  cal->bubble_fraction = ne ? median(bfrac, ne) : 0; /* fit_host: excess over shared cores' */
  free(bfrac);
  free(rates);
  free(hosts);
  free(excess);
  /* bandwidths by communicator group, bytes-weighted over op summaries; latency = the
   * smallest transfer of any collective */
  double bytes[4] = {0}, time[4] = {0}, lat = 0;
  for (size_t i = 0; i < an.ncoll_summaries; i++) {
    const ssa_coll_summary *s = &an.coll_summaries[i];
    const char *g = ssa_name(&an, s->group);
    int k = !g                     ? -1
            : !strncmp(g, "tp", 2) ? 0
            : !strncmp(g, "dp", 2) ? 1
            : !strncmp(g, "pp", 2) ? 2
            : !strncmp(g, "cp", 2) ? 3
                                   : -1;
    if (s->transfer_min > 0 && (lat == 0 || s->transfer_min / 1e9 < lat))
      lat = s->transfer_min / 1e9;
    if (k < 0 || s->busbw <= 0 || s->transfer_total <= 0) continue;
    double b = s->busbw * (double)s->transfer_total; /* bus bytes */
    bytes[k] += b;
    time[k] += (double)s->transfer_total;
  }
  cal->tp_bw = time[0] > 0 ? bytes[0] / time[0] * 1e9 : 0;
  cal->dp_bw = time[1] > 0 ? bytes[1] / time[1] * 1e9 : 0;
  cal->pp_bw = time[2] > 0 ? bytes[2] / time[2] * 1e9 : 0;
  cal->cp_bw = time[3] > 0 ? bytes[3] / time[3] * 1e9 : 0;
  cal->latency_s = lat;
  cal->measured_step_s = an.step_time_median > 0 ? an.step_time_median / 1e9 : 0;
  if (run.ranks[0].tmeta.memory.runtime_baseline_bytes > 0) /* NaN when absent: false */
    cal->baseline_bytes = run.ranks[0].tmeta.memory.runtime_baseline_bytes;
  snprintf(cal->source, sizeof cal->source, "%s", run_dir);
  snprintf(cal->device_name, sizeof cal->device_name, "%s",
           run.ranks[0].device_name ? run.ranks[0].device_name : "");
  cal->present = 1;
  rc = 0;
out:
  ssa_analysis_free(&an);
  ssa_run_free(&run);
  return rc;
}
