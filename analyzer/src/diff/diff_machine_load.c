/*
 * diff_machine_load.c — the third load sign of `stepscope diff` (docs/diff.md, noise test 2):
 * the machine's load as the traces' `machine` metadata records it (the tracer writes the CPUs
 * online and the 1-minute load average when tracing starts and stops: model/trace_metadata.h).
 *
 * A run's load is the median over its selected ranks of the mean of the start and end load
 * averages (whichever the rank has); a side's is the median over its runs. The two sides'
 * loads differ when they are more than SSA_DIFF_LOAD_MACHINE runnable threads per CPU apart:
 * one run shared the machine with other work the other did not, which moves step times by far
 * more than a change anyone tunes for, and the verdicts are withheld (said, with the loads).
 * Runs without the metadata (Kineto traces, older traces) have no such sign.
 */
#include <math.h>
#include <stdlib.h>

#include "ssa_diff.h"

static int cmp_double(const void *pa, const void *pb) {
  double a = *(const double *)pa, b = *(const double *)pb;
  return a < b ? -1 : a > b;
}

/* The median of v[0, n) (sorted in place; SSA_MEDIAN_INDEX); NaN when n is 0. */
static double median(double *v, size_t n) {
  if (!n) return NAN;
  qsort(v, n, sizeof *v, cmp_double);
  return v[SSA_MEDIAN_INDEX(n)];
}

/* A run's load and (into *cpus, the largest) its CPUs; NaN when no rank says. */
static double run_load(const ssa_analysis *a, double *cpus) {
  double v[64];
  size_t n = 0;
  for (size_t i = 0; i < a->nranks && n < sizeof v / sizeof v[0]; i++) {
    if (!ssa_diff_selected(a, &a->ranks[i])) continue;
    const ssa_meta_machine *m = &a->ranks[i].rank->tmeta.machine;
    if (!m->present) continue;
    double s = m->load_1m_start, e = m->load_1m_end;
    double load = isnan(s) ? e : isnan(e) ? s : (s + e) / 2.0;
    if (isnan(load)) continue;
    v[n++] = load;
    if (m->cpus > *cpus || isnan(*cpus)) *cpus = m->cpus;
  }
  return median(v, n);
}

static double side_load(const ssa_analysis *const *runs, size_t nruns, double *cpus) {
  double v[SSA_DIFF_MAX_RUNS];
  size_t n = 0;
  for (size_t i = 0; i < nruns && i < SSA_DIFF_MAX_RUNS; i++) {
    double load = run_load(runs[i], cpus);
    if (!isnan(load)) v[n++] = load;
  }
  return median(v, n);
}

void ssa_diff_machine_load(ssa_diff *d) {
  d->machine_cpus = NAN;
  d->machine_load_a = side_load(d->runs_a, d->nruns_a, &d->machine_cpus);
  d->machine_load_b = side_load(d->runs_b, d->nruns_b, &d->machine_cpus);
  double cpus = isnan(d->machine_cpus) ? 1 : d->machine_cpus;
  d->machine_differs = fabs(d->machine_load_a - d->machine_load_b) > SSA_DIFF_LOAD_MACHINE * cpus;
}
