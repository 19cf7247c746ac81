/*
 * diff_findings.c — the diff's findings (ssa_diff.h, docs/diff.md "Findings"): plain
 * sentences, built once the comparison is done (diff_runs.c), for the changes beyond noise
 * with how many ranks agree, the metrics that did not move and why (noise, load, the
 * between-run floor, too few steps), configuration and layout differences, and the kernels
 * and collectives that moved most. Every sentence reads the comparison's records; nothing is
 * measured here.
 */
#include "ssa_diff.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int finding(ssa_diff *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int finding(ssa_diff *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int rc = ssa_text_list_vadd(&d->findings, &d->nfindings, &d->findings_cap, 600, fmt, ap);
  va_end(ap);
  return rc;
}

static void fmt_value(char *buf, size_t n, int k, double v) {
  if (ssa_diff_metric_is_time[k])
    ssa_fmt_time(buf, n, v);
  else
    snprintf(buf, n, "%.1f %%", v * 100.0);
}

static const char *const metric_words[SSA_DM_N] = {
    "step time",
    "compute time per step",
    "communication time per step",
    "exposed communication",
    "the overlap ratio (communication hidden under compute)",
    "exposed copies and memsets",
    "device idle time",
    "the pipeline bubble",
    "MFU"};

/* How many ranks moved in the direction of the run-level change, beyond noise. */
static void rank_agreement(const ssa_diff *d, int k, size_t *agree, size_t *total) {
  *agree = *total = 0;
  if (!d->same_layout) return;
  double dir = d->m[k].abs_change;
  for (size_t i = 0; i < d->nranks; i++) {
    const ssa_diff_metric *m = &d->ranks[i].m[k];
    if (!m->comparable) continue;
    (*total)++;
    if (m->verdict == SSA_DV_REAL && m->abs_change * dir > 0) (*agree)++;
  }
}

/* Appends ", ITEM" (the first without the comma) to the list buf of *len bytes, cut at cap. */
static void list_add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void list_add(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len + 1 >= cap) return;
  if (*len) *len += (size_t)snprintf(buf + *len, cap - *len, ", ");
  if (*len + 1 >= cap) {
    *len = cap - 1;
    return;
  }
  va_list ap;
  va_start(ap, fmt);
  *len += (size_t)vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (*len >= cap) *len = cap - 1;
}

int ssa_diff_build_findings(ssa_diff *d) {
  int rc = 0;
  if (!d->same_layout) rc |= finding(d, "%s", d->layout_note);
  if (d->nconfig_diffs) {
    char what[1200];
    ssa_diff_config_text(d, what, sizeof what);
    rc |= finding(
        d, "%.500s: this compares two configurations, not one configuration measured twice", what);
  }
  if (d->mfu_incomparable)
    rc |= finding(d,
                  "MFU not compared: the FLOPs per step differ (A %.4g, B %.4g) while the "
                  "configuration %s, so the FLOPs count or its convention changed between the "
                  "runs' producers; compare step time instead",
                  d->flops_a, d->flops_b, d->config_known ? "is the same" : "is not recorded");
  else if (d->flops_differ)
    rc |= finding(d, "the FLOPs per step differ (A %.4g, B %.4g): MFU compares different work",
                  d->flops_a, d->flops_b);
  static const int order[] = {SSA_DM_STEP_TIME, SSA_DM_EXPOSED_COMM, SSA_DM_OVERLAP_RATIO,
                              SSA_DM_IDLE,      SSA_DM_BUBBLE_RATIO, SSA_DM_MFU,
                              SSA_DM_COMPUTE,   SSA_DM_COMM,         SSA_DM_EXPOSED_MEM};
  if (d->load_differs) {
    char stretch[96] = "", machine[160] = "";
    if (!isnan(d->kernel_stretch))
      snprintf(stretch, sizeof stretch,
               "; the same kernels' launches stretched %.2fx as much in B as in A",
               d->kernel_stretch);
    if (d->machine_differs)
      snprintf(machine, sizeof machine,
               "; the machine's load average was %.1f in A and %.1f in B (%.0f CPUs)",
               d->machine_load_a, d->machine_load_b, d->machine_cpus);
    rc |= finding(
        d,
        "no verdicts: the machine was busier during one run (other processes held the CPU or GPU): "
        "devices idle with work already launched %.1f %% of a step in A, %.1f %% in B%s%s; measure "
        "both "
        "runs on a quiet machine",
        d->queued_idle_a * 100.0, d->queued_idle_b * 100.0, stretch, machine);
  }
  char unchanged[300] = "", unknown[300] = "", floored[400] = "";
  size_t ulen = 0, klen = 0, flen = 0;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    int k = order[i];
    const ssa_diff_metric *m = &d->m[k];
    if (!m->comparable) continue;
    if (m->verdict == SSA_DV_UNKNOWN) {
      list_add(unknown, sizeof unknown, &klen, "%s", ssa_diff_metric_names[k]);
      continue;
    }
    if (m->verdict != SSA_DV_REAL && m->noise_reason == SSA_DN_RUN_NOISE) {
      char ch[48];
      if (!ssa_diff_metric_is_time[k])
        snprintf(ch, sizeof ch, "%+.1f pt", m->abs_change * 100.0);
      else if (!isnan(m->rel_change))
        snprintf(ch, sizeof ch, "%+.1f %%", m->rel_change * 100.0);
      else
        ssa_fmt_time(ch, sizeof ch, m->abs_change);
      list_add(floored, sizeof floored, &flen, "%s %s", ssa_diff_metric_names[k], ch);
      continue;
    }
    if (m->verdict != SSA_DV_REAL) {
      list_add(unchanged, sizeof unchanged, &ulen, "%s", ssa_diff_metric_names[k]);
      continue;
    }
    char va[48], vb[48], sp[48];
    fmt_value(va, sizeof va, k, m->a.median);
    fmt_value(vb, sizeof vb, k, m->b.median);
    double spread = m->a.spread > m->b.spread ? m->a.spread : m->b.spread;
    fmt_value(sp, sizeof sp, k, spread);
    const char *verb = m->abs_change > 0 ? "rose" : "fell";
    int better = (m->abs_change > 0 ? 1 : -1) == ssa_diff_metric_better[k];
    char rel[48] = "";
    if (!isnan(m->rel_change)) snprintf(rel, sizeof rel, " (%+.1f %%)", m->rel_change * 100.0);
    char where[64] = "";
    size_t agree, total;
    rank_agreement(d, k, &agree, &total);
    if (total > 1 && k != SSA_DM_STEP_TIME && k != SSA_DM_MFU)
      snprintf(where, sizeof where, agree == total ? " on every rank" : " on %zu of %zu ranks",
               agree, total);
    const char *per_step = ssa_diff_metric_is_time[k] && k != SSA_DM_STEP_TIME ? " per step" : "";
    rc |= finding(d, "%s %s from %s to %s%s%s%s; %s (step-to-step spread %s)", metric_words[k],
                  verb, va, vb, per_step, rel, where, better ? "better" : "worse", sp);
  }
  int any_real = 0;
  for (int k = 0; k < SSA_DM_N; k++)
    any_real |= d->m[k].comparable && d->m[k].verdict == SSA_DV_REAL;
  if (any_real && d->nruns_a == 1 && d->nruns_b == 1 && isnan(d->run_noise))
    rc |= finding(
        d,
        "one run per side and no run-to-run floor (--run-noise 0): these verdicts assume that "
        "separate runs of one configuration differ no more than their steps scatter; repeat each "
        "run (--repeat-a, --repeat-b) to measure it");
  if (ulen && d->load_differs)
    rc |= finding(d, "not judged (the load differs between the runs): %s", unchanged);
  else if (ulen)
    rc |= finding(d, "unchanged within %s noise: %s",
                  d->nruns_a > 1 || d->nruns_b > 1 ? "step-to-step and run-to-run" : "step-to-step",
                  unchanged);
  if (flen) {
    char floor[200];
    ssa_diff_floor_text(d, floor, sizeof floor);
    rc |= finding(d,
                  "within the between-run noise floor (%s): %s; separate runs of one "
                  "configuration can differ that much",
                  floor, floored);
  }
  if (klen)
    rc |= finding(d,
                  "cannot tell with %zu and %zu steps (at least %d per side, and enough for the "
                  "rank test): %s",
                  d->a->nsteps, d->b->nsteps, SSA_DIFF_MIN_STEPS, unknown);
  /* the kernels and collectives that moved most, when it matters (>= 1 % of step time) */
  for (size_t i = 0; i < d->nkernels && i < 3 && ssa_diff_kernel_moved(d, &d->kernels[i]); i++) {
    const ssa_diff_kernel *k = &d->kernels[i];
    char ta[48], tb[48];
    ssa_fmt_time(ta, sizeof ta, k->time_a);
    ssa_fmt_time(tb, sizeof tb, k->time_b);
    char name[72];
    snprintf(name, sizeof name, "%.60s%s", k->name, strlen(k->name) > 60 ? "..." : "");
    if (!k->in_a)
      rc |= finding(d, "new kernel %s: %s per step", name, tb);
    else if (!k->in_b)
      rc |= finding(d, "kernel %s no longer runs (was %s per step)", name, ta);
    else
      rc |= finding(d, "%s kernel %s: %s -> %s per step (%.1f -> %.1f launches per step)",
                    k->comm ? "communication" : "compute", name, ta, tb, k->count_a, k->count_b);
  }
  for (size_t i = 0; i < d->ncolls && i < 2 && ssa_diff_coll_moved(d, &d->colls[i]); i++) {
    const ssa_diff_coll *c = &d->colls[i];
    ssa_diff_coll_text t;
    ssa_diff_coll_describe(c, &t);
    if (!c->in_a || !c->in_b)
      rc |= finding(d, "%s %s of %llu bytes (group %s) %s",
                    !c->in_a ? "new collective" : "collective", t.op, (unsigned long long)c->bytes,
                    t.group, !c->in_a ? "appears in run B" : "is gone in run B");
    else
      rc |= finding(
          d, "%s of %llu bytes (group %s): transfer %s -> %s, waits of all ranks %s -> %s per step",
          t.op, (unsigned long long)c->bytes, t.group, t.transfer_a, t.transfer_b, t.wait_a,
          t.wait_b);
  }
  return rc ? STEPSCOPE_E_NOMEM : 0;
}
