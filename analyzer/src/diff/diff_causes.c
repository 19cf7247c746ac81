/*
 * diff_causes.c — what changed the step time, in parts that add up to the change
 * (docs/diff.md "What changed the step time").
 *
 * A step's time is the span of the rank that set it (the longest in that step). That rank's
 * window of the step is a partition (docs/metrics.md): compute + exposed communication +
 * exposed copies + idle, and idle is a partition by cause (data loading, host wait, launch
 * gaps, syncs, other). So per side, over its judged steps (those not cut by the trace's end,
 * unless all are; every run of the side), the mean step time is the sum of the parts' means,
 * and B's mean minus A's is exactly the sum of the parts' changes. The parts are ranked by the
 * size of their change; each one's share of the change is signed, and the shares sum to
 * 100 %. (The median step time of the headline can move by another amount than the mean: the
 * decomposition says which it decomposes.) The pipeline bubble, which cuts across these parts
 * (idle and exposed pipeline transfers), is given beside them, not in the sum.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_diff.h"

const char *ssa_diff_part_name(int part) {
  static const char *const fixed[] = {"compute", "exposed communication", "exposed copies"};
  static const char *const idle[SSA_IDLE_N] = {"idle: host wait", "idle: launch gaps",
                                               "idle: syncs", "idle: other (queued work)",
                                               "idle: data loading"};
  if (part >= 0 && part < SSA_DPART_IDLE) return fixed[part];
  if (part >= SSA_DPART_IDLE && part < SSA_DPART_N) return idle[part - SSA_DPART_IDLE];
  return "?";
}

/* The machine-readable name of a part (JSON): compute, exposed_comm, exposed_mem, or idle.
 * and the idle cause's name (ssa_idle_cause_names, in its order). */
const char *ssa_diff_part_key(int part) {
  static const char *const keys[SSA_DPART_N] = {
      "compute",         "exposed_comm",   "exposed_mem", "idle.host_wait",
      "idle.launch_gap", "idle.sync_wait", "idle.other",  "idle.data_loading"};
  return part >= 0 && part < SSA_DPART_N ? keys[part] : "?";
}

typedef struct step_window {
  int64_t step;
  const ssa_window *w;
} step_window;

static int cmp_step_span(const void *pa, const void *pb) {
  const step_window *a = pa, *b = pb;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  return a->w->span > b->w->span ? -1 : a->w->span < b->w->span; /* the longest first */
}

/* Adds one run's steps to the side's sums: per judged step, the window of the rank that set
 * it. Returns the number of steps added, or -1 when out of memory. */
static long add_run(const ssa_analysis *a, double *parts, double *total, double *bubble,
                    int *pipeline) {
  size_t n = 0, ncut = 0;
  for (size_t i = 0; i < a->nranks; i++)
    if (ssa_diff_selected(a, &a->ranks[i])) n += a->ranks[i].nsteps;
  step_window *v = malloc((n ? n : 1) * sizeof *v);
  if (!v) return -1;
  n = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (!ssa_diff_selected(a, rr)) continue;
    for (size_t s = 0; s < rr->nsteps; s++) {
      v[n++] = (step_window){rr->windows[s].step, &rr->windows[s]};
      ncut += rr->windows[s].cut != 0;
    }
  }
  if (n > 1) qsort(v, n, sizeof *v, cmp_step_span);
  long steps = 0;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    int cut = v[g].w->cut;
    while (e < n && v[e].step == v[g].step)
      cut |= v[e++].w->cut;
    if (cut && ncut < n) { /* cut by the trace's end on some rank: left out, unless all are */
      g = e;
      continue;
    }
    const ssa_window *w = v[g].w; /* the rank that set the step */
    parts[SSA_DPART_COMPUTE] += (double)w->compute;
    parts[SSA_DPART_EXPOSED_COMM] += (double)w->exposed_comm;
    parts[SSA_DPART_EXPOSED_COPY] += (double)w->exposed_mem;
    for (int k = 0; k < SSA_IDLE_N; k++)
      parts[SSA_DPART_IDLE + k] += (double)w->idle_cause[k];
    *total += (double)w->span;
    *bubble += (double)w->bubble;
    *pipeline |= w->has_bubble_causes;
    steps++;
    g = e;
  }
  free(v);
  return steps;
}

static long add_side(const ssa_analysis *const *runs, size_t nruns, double *parts, double *mean,
                     double *bubble, int *pipeline) {
  double total = 0, bub = 0;
  long steps = 0;
  memset(parts, 0, SSA_DPART_N * sizeof *parts);
  for (size_t r = 0; r < nruns; r++) {
    long k = add_run(runs[r], parts, &total, &bub, pipeline);
    if (k < 0) return -1;
    steps += k;
  }
  if (steps > 0) {
    for (int p = 0; p < SSA_DPART_N; p++)
      parts[p] /= (double)steps;
    *mean = total / (double)steps;
    *bubble = bub / (double)steps;
  }
  return steps;
}

int ssa_diff_decompose(ssa_diff *d) {
  ssa_diff_decomp *x = &d->decomp;
  memset(x, 0, sizeof *x);
  int pipe_a = 0, pipe_b = 0;
  long na = add_side(d->runs_a, d->nruns_a, x->part_a, &x->mean_a, &x->bubble_a, &pipe_a);
  long nb = add_side(d->runs_b, d->nruns_b, x->part_b, &x->mean_b, &x->bubble_b, &pipe_b);
  if (na < 0 || nb < 0) return STEPSCOPE_E_NOMEM;
  x->steps_a = (size_t)na;
  x->steps_b = (size_t)nb;
  x->known = na > 0 && nb > 0;
  x->pipeline = pipe_a || pipe_b;
  for (int p = 0; p < SSA_DPART_N; p++)
    x->order[p] = p;
  for (int i = 1; i < SSA_DPART_N; i++) /* by the size of the change, descending */
    for (int j = i; j > 0; j--) {
      int p = x->order[j], q = x->order[j - 1];
      if (fabs(x->part_b[p] - x->part_a[p]) <= fabs(x->part_b[q] - x->part_a[q])) break;
      x->order[j] = q;
      x->order[j - 1] = p;
    }
  return 0;
}
