/*
 * diff_runs.c — compares two analysed runs (see ssa_diff.h, docs/diff.md).
 *
 * 1. Per-step series of every headline metric are read from each run's
 *    windows (ssa_rank_result.windows) and run steps (ssa_analysis.steps),
 *    reduced to median and spread, and compared with a noise verdict.
 * 2. When both runs have the same rank set, the same is done per rank.
 * 3. Steps are paired by order (step numbers usually differ between runs).
 * 4. Kernels are matched by name and collectives by (op, group, bytes);
 *    both are normalised per analysed step so that runs with different step
 *    counts compare.
 * 5. Findings (diff_findings.c): plain sentences for the changes beyond noise,
 *    the metrics that did not move, and the largest kernel and collective changes.
 */
#include "ssa_diff.h"

#include <math.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const ssa_diff_metric_names[SSA_DM_N] = {"step_time",    "compute",       "comm",
                                                     "exposed_comm", "overlap_ratio", "exposed_mem",
                                                     "idle",         "bubble_ratio",  "mfu"};
const int ssa_diff_metric_is_time[SSA_DM_N] = {1, 1, 1, 1, 0, 1, 1, 0, 0};
const int ssa_diff_metric_better[SSA_DM_N] = {-1, -1, -1, -1, +1, -1, -1, -1, +1};

/* Linear-interpolated quantile of sorted values. */
static double quantile(const double *v, size_t n, double q) {
  if (n == 1) return v[0];
  double pos = q * (double)(n - 1);
  size_t i = (size_t)pos;
  if (i + 1 >= n) return v[n - 1];
  return v[i] + (pos - (double)i) * (v[i + 1] - v[i]);
}

void ssa_diff_stats(double *v, size_t n, ssa_diff_stat *s) {
  memset(s, 0, sizeof *s);
  s->n = n;
  if (n == 0) return;
  qsort(v, n, sizeof *v, ssa_cmp_double);
  s->known = 1;
  s->min = v[0];
  s->max = v[n - 1];
  s->median = v[SSA_MEDIAN_INDEX(n)]; /* analyze's median: a measured value */
  s->p25 = quantile(v, n, 0.25);
  s->p75 = quantile(v, n, 0.75);
  s->spread = n >= 4 ? s->p75 - s->p25 : s->max - s->min;
}

/* The value of metric k for one window; NaN when undefined. */
static double window_value(const ssa_rank_result *rr, const ssa_window *w, int k) {
  switch (k) {
  case SSA_DM_STEP_TIME: return (double)w->span;
  case SSA_DM_COMPUTE: return (double)w->compute;
  case SSA_DM_COMM: return (double)w->comm;
  case SSA_DM_EXPOSED_COMM: return (double)w->exposed_comm;
  case SSA_DM_OVERLAP_RATIO: return w->comm > 0 ? (double)w->overlap / (double)w->comm : NAN;
  case SSA_DM_EXPOSED_MEM: return (double)w->exposed_mem;
  case SSA_DM_IDLE: return (double)w->idle;
  case SSA_DM_BUBBLE_RATIO:
    return rr->pipeline && w->span > 0 ? (double)w->bubble / (double)w->span : NAN;
  default: return NAN;
  }
}

/* Aggregate of metric k over the ranks' windows of step number `step`
 * (totals windows when step == INT64_MIN). */
static double run_step_value(const ssa_analysis *a, int64_t step, int k) {
  double sum = 0, num = 0, den = 0;
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *rr = &a->ranks[i];
    if (a->opt.rank >= 0 && rr->rank->rank != a->opt.rank) continue;
    const ssa_window *w = NULL;
    if (step == INT64_MIN) {
      w = &rr->totals;
    } else {
      for (size_t s = 0; s < rr->nsteps && !w; s++)
        if (rr->windows[s].step == step) w = &rr->windows[s];
    }
    if (!w) continue;
    if (k == SSA_DM_OVERLAP_RATIO) {
      num += (double)w->overlap;
      den += (double)w->comm;
    } else if (k == SSA_DM_BUBBLE_RATIO) {
      if (!rr->pipeline) continue;
      num += (double)w->bubble;
      den += (double)w->span;
    } else if (k == SSA_DM_STEP_TIME) {
      if ((double)w->span > sum) sum = (double)w->span; /* the slowest rank */
      n = 1;
    } else {
      sum += window_value(rr, w, k);
      n++;
    }
  }
  if (k == SSA_DM_OVERLAP_RATIO || k == SSA_DM_BUBBLE_RATIO) return den > 0 ? num / den : NAN;
  return n ? sum / (double)n : NAN;
}

/* Metric k's per-step series of a run, in step order (*v malloc'd; NaN values left out). */
static int run_series(const ssa_analysis *a, int k, double **v, size_t *m) {
  size_t n = a->nsteps ? a->nsteps : 1;
  *m = 0;
  *v = malloc(n * sizeof **v);
  if (!*v) return STEPSCOPE_E_NOMEM;
  if (a->nsteps == 0) {
    double x = k == SSA_DM_MFU ? a->mfu : run_step_value(a, INT64_MIN, k);
    if (!isnan(x)) (*v)[(*m)++] = x;
  } else {
    for (size_t i = 0; i < a->nsteps; i++) {
      if (!a->steps[i].in_medians) continue; /* the steps analyze's medians count */
      double x;
      if (k == SSA_DM_STEP_TIME)
        x = (double)a->steps[i].time;
      else if (k == SSA_DM_MFU)
        x = a->steps[i].mfu;
      else
        x = run_step_value(a, a->steps[i].step, k);
      if (!isnan(x)) (*v)[(*m)++] = x;
    }
  }
  return 0;
}

static int cmp_run_step(const void *key, const void *elem) {
  int64_t k = *(const int64_t *)key, s = ((const ssa_run_step *)elem)->step;
  return k < s ? -1 : k > s;
}

/* Whether the run counts step `step` in its medians (a->steps are sorted by number). */
static int step_in_medians(const ssa_analysis *a, int64_t step) {
  const ssa_run_step *s = bsearch(&step, a->steps, a->nsteps, sizeof *a->steps, cmp_run_step);
  return s ? s->in_medians : 1;
}

static int rank_series(const ssa_analysis *a, const ssa_rank_result *rr, int k, double **v,
                       size_t *m) {
  size_t n = rr->nsteps ? rr->nsteps : 1;
  *m = 0;
  *v = malloc(n * sizeof **v);
  if (!*v) return STEPSCOPE_E_NOMEM;
  if (rr->nsteps == 0) {
    double x = window_value(rr, &rr->totals, k);
    if (!isnan(x)) (*v)[(*m)++] = x;
  } else {
    for (size_t i = 0; i < rr->nsteps; i++) {
      if (!step_in_medians(a, rr->windows[i].step)) continue;
      double x = window_value(rr, &rr->windows[i], k);
      if (!isnan(x)) (*v)[(*m)++] = x;
    }
  }
  return 0;
}

/* Share of a window during which the device sat idle with work already
 * launched (idle cause `other`): on a shared machine, the time other
 * processes held the CPU or GPU. NaN for steps that launched nothing. */
static double queued_share(const ssa_window *w) {
  /* a step that launched nothing is its host range, idle through: no sign of load */
  if (!w->projected) return NAN;
  return w->span > 0 ? (double)w->idle_cause[SSA_IDLE_OTHER] / (double)w->span : NAN;
}

/* Appends to v, for each step of a, the mean over the selected ranks of
 * queued_share (steps where no rank has a value are left out). */
static void collect_queued(const ssa_analysis *a, double *v, size_t *m) {
  for (size_t i = 0; i < a->nsteps; i++) {
    double sum = 0;
    size_t n = 0;
    for (size_t r = 0; r < a->nranks; r++) {
      const ssa_rank_result *rr = &a->ranks[r];
      if (a->opt.rank >= 0 && rr->rank->rank != a->opt.rank) continue;
      for (size_t s = 0; s < rr->nsteps; s++) {
        if (rr->windows[s].step != a->steps[i].step) continue;
        double q = queued_share(&rr->windows[s]);
        if (!isnan(q)) {
          sum += q;
          n++;
        }
        break;
      }
    }
    if (n) v[(*m)++] = sum / (double)n;
  }
}

/* Median (and in *p75 the upper quartile) over the steps of every run of a
 * side of the mean over the selected ranks of queued_share; NaN without steps. */
static double side_queued_idle(const ssa_analysis *const *runs, size_t nruns, double *p75) {
  *p75 = NAN;
  size_t total = 0;
  for (size_t i = 0; i < nruns; i++)
    total += runs[i]->nsteps;
  if (total == 0) return NAN;
  double *v = malloc(total * sizeof *v);
  if (!v) return NAN;
  size_t m = 0;
  for (size_t i = 0; i < nruns; i++)
    collect_queued(runs[i], v, &m);
  ssa_diff_stat st;
  ssa_diff_stats(v, m, &st);
  free(v);
  if (st.known) *p75 = st.p75;
  return st.known ? st.median : NAN;
}

static double rank_queued_idle(const ssa_rank_result *rr, double *p75) {
  *p75 = NAN;
  if (rr->nsteps == 0) return NAN;
  double *v = malloc(rr->nsteps * sizeof *v);
  if (!v) return NAN;
  size_t m = 0;
  for (size_t i = 0; i < rr->nsteps; i++) {
    double q = queued_share(&rr->windows[i]);
    if (!isnan(q)) v[m++] = q;
  }
  ssa_diff_stat st;
  ssa_diff_stats(v, m, &st);
  free(v);
  if (st.known) *p75 = st.p75;
  return st.known ? st.median : NAN;
}

/* Queued-idle shares (median and upper quartile of each run) more than
 * SSA_DIFF_LOAD_PT apart: one run shared the machine (all of it, or in a
 * quarter of its steps or more). */
static int load_differs(double qa, double qa75, double qb, double qb75) {
  if (!isnan(qa) && !isnan(qb) && fabs(qa - qb) > SSA_DIFF_LOAD_PT) return 1;
  return !isnan(qa75) && !isnan(qb75) && fabs(qa75 - qb75) > SSA_DIFF_LOAD_PT;
}

/* d->kernel_stretch from the matched kernels (build_kernels first). */
static int kernel_stretch(ssa_diff *d) {
  double *v = malloc((d->nkernels ? d->nkernels : 1) * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  size_t m = 0;
  for (size_t i = 0; i < d->nkernels; i++) {
    const ssa_diff_kernel *k = &d->kernels[i];
    if (k->comm || !k->in_a || !k->in_b || k->launches_a != k->launches_b ||
        k->launches_a < SSA_DIFF_STRETCH_MIN_LAUNCHES || !(k->min_a > 0) || !(k->min_b > 0))
      continue;
    v[m++] = (k->mean_b / k->min_b) / (k->mean_a / k->min_a);
  }
  ssa_diff_stat st;
  ssa_diff_stats(v, m, &st);
  free(v);
  d->stretch_kernels = m;
  d->kernel_stretch = m >= 3 ? st.median : NAN;
  return 0;
}

/* Concatenates the series of a side's runs: *v (malloc'd) holds them in
 * run order, seg[i] how many values run i gave. series(i) fills one run's. */
typedef int (*series_fn)(const void *ctx, size_t run, int k, double **v, size_t *n);

static int side_series(series_fn series, const void *ctx, size_t nruns, int k, double **v,
                       size_t *seg) {
  double *all = NULL;
  size_t n = 0, cap = 0;
  *v = NULL;
  for (size_t i = 0; i < nruns; i++) {
    double *one;
    if (series(ctx, i, k, &one, &seg[i])) {
      free(all);
      return STEPSCOPE_E_NOMEM;
    }
    if (seg[i] && ssa_grow((void **)&all, &cap, n + seg[i], sizeof *all)) {
      free(one);
      free(all);
      return STEPSCOPE_E_NOMEM;
    }
    if (seg[i]) memcpy(all + n, one, seg[i] * sizeof *all);
    n += seg[i];
    free(one);
  }
  *v = all ? all : malloc(sizeof *all);
  return *v ? 0 : STEPSCOPE_E_NOMEM;
}

/* Compares metric k of the two sides (series freed). */
static int compare_metric(double *va, const size_t *seg_a, size_t ka, double *vb,
                          const size_t *seg_b, size_t kb, int k, double step_a, unsigned flags,
                          double run_noise, ssa_diff_metric *m) {
  int rc = ssa_diff_compare_runs(va, seg_a, ka, vb, seg_b, kb, k, step_a, flags, run_noise, m);
  free(va);
  free(vb);
  return rc;
}

static int run_series_of(const void *ctx, size_t run, int k, double **v, size_t *n) {
  return run_series(((const ssa_analysis *const *)ctx)[run], k, v, n);
}

typedef struct rank_ctx {
  const ssa_analysis *const *runs;
  int rank;
} rank_ctx;

/* One rank's series in one run of a side: empty when that run lacks the rank. */
static int rank_series_of(const void *ctx, size_t run, int k, double **v, size_t *n) {
  const rank_ctx *c = ctx;
  const ssa_rank_result *rr = ssa_diff_find_rank(c->runs[run], c->rank);
  if (rr) return rank_series(c->runs[run], rr, k, v, n);
  *n = 0;
  *v = malloc(sizeof **v);
  return *v ? 0 : STEPSCOPE_E_NOMEM;
}

static int check_layout(ssa_diff *d) {
  d->world_a = ssa_diff_world(d->a);
  d->world_b = ssa_diff_world(d->b);
  char why[200];
  if (ssa_diff_same_layout(d->a, d->b, why, sizeof why)) return 1;
  snprintf(d->layout_note, sizeof d->layout_note, "%s: compared on aggregates only", why);
  return 0;
}

static int build_ranks(ssa_diff *d) {
  const ssa_analysis *a = d->a, *b = d->b;
  d->ranks = calloc(a->nranks ? a->nranks : 1, sizeof *d->ranks);
  if (!d->ranks) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks; i++) {
    const ssa_rank_result *ra = &a->ranks[i];
    if (!ssa_diff_selected(a, ra)) continue;
    const ssa_rank_result *rb = ssa_diff_find_rank(b, ra->rank->rank);
    ssa_diff_rank *x = &d->ranks[d->nranks++];
    x->rank = ra->rank->rank;
    x->in_a = 1;
    x->in_b = rb != NULL;
    x->coll_wait_a = ra->coll_wait;
    x->coll_wait_b = rb ? rb->coll_wait : 0;
    double qa75, qb75;
    double qa = rank_queued_idle(ra, &qa75), qb = rb ? rank_queued_idle(rb, &qb75) : NAN;
    int load = d->load_differs || (rb && load_differs(qa, qa75, qb, qb75));
    rank_ctx ca = {d->runs_a, x->rank}, cb = {d->runs_b, x->rank};
    double step_a = NAN;
    for (int k = 0; k < SSA_DM_N; k++) { /* step span first: the minimum effect needs it */
      if (k == SSA_DM_MFU) continue;
      double *va, *vb;
      size_t seg_a[SSA_DIFF_MAX_RUNS], seg_b[SSA_DIFF_MAX_RUNS];
      if (side_series(rank_series_of, &ca, d->nruns_a, k, &va, seg_a)) return STEPSCOPE_E_NOMEM;
      if (side_series(rank_series_of, &cb, d->nruns_b, k, &vb, seg_b)) {
        free(va);
        return STEPSCOPE_E_NOMEM;
      }
      if (compare_metric(va, seg_a, d->nruns_a, vb, seg_b, d->nruns_b, k, step_a,
                         load ? SSA_DIFF_LOAD_DIFFERS : 0, d->run_noise, &x->m[k]))
        return STEPSCOPE_E_NOMEM;
      if (k == SSA_DM_STEP_TIME) step_a = x->m[k].a.known ? x->m[k].a.median : NAN;
    }
  }
  return 0;
}

static int build_steps(ssa_diff *d) {
  size_t n = d->a->nsteps > d->b->nsteps ? d->a->nsteps : d->b->nsteps;
  d->steps = calloc(n ? n : 1, sizeof *d->steps);
  if (!d->steps) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n; i++) {
    ssa_diff_step *s = &d->steps[i];
    s->index = i;
    s->step_a = i < d->a->nsteps ? d->a->steps[i].step : -1;
    s->time_a = i < d->a->nsteps ? d->a->steps[i].time : -1;
    s->step_b = i < d->b->nsteps ? d->b->steps[i].step : -1;
    s->time_b = i < d->b->nsteps ? d->b->steps[i].time : -1;
  }
  d->nsteps = n;
  return 0;
}

static double per_step_div(const ssa_analysis *a) {
  return a->nsteps ? (double)a->nsteps : 1.0;
}

/* Kernel tables sum over the analysed ranks: per step and per rank. */
static double per_rank_step_div(const ssa_analysis *a) {
  size_t n = 0;
  for (size_t i = 0; i < a->nranks; i++)
    n += a->opt.rank < 0 || a->ranks[i].rank->rank == a->opt.rank;
  return per_step_div(a) * (double)(n ? n : 1);
}

/* How much a kernel row moved per step: the kernel rows' order, largest first. */
static double kernel_change(const ssa_diff_kernel *k) {
  return fabs(k->time_b - k->time_a);
}

static int cmp_kernel_change(const void *pa, const void *pb) {
  double x = kernel_change(pa), y = kernel_change(pb);
  return x > y ? -1 : x < y;
}

static int build_kernels(ssa_diff *d) {
  const ssa_analysis *a = d->a, *b = d->b;
  ssa_strtab t;
  ssa_strtab_init(&t);
  size_t cap = a->nkernels + b->nkernels;
  d->kernels = calloc(cap ? cap : 1, sizeof *d->kernels);
  uint32_t *slot = NULL; /* strtab id -> kernel index + 1 */
  size_t slot_cap = 0;
  int rc = STEPSCOPE_E_NOMEM;
  if (!d->kernels) goto out;
  double sa = per_rank_step_div(a), sb = per_rank_step_div(b);
  for (int side = 0; side < 2; side++) {
    const ssa_analysis *x = side ? b : a;
    for (size_t i = 0; i < x->nkernels; i++) {
      const ssa_kernel_row *row = &x->kernels[i];
      const char *name = ssa_name(x, row->name);
      uint32_t id = ssa_strtab_intern(&t, name, strlen(name));
      if (!id) goto out;
      if (id >= slot_cap) {
        size_t old = slot_cap;
        if (ssa_grow((void **)&slot, &slot_cap, (size_t)id + 1, sizeof *slot)) goto out;
        memset(slot + old, 0, (slot_cap - old) * sizeof *slot);
      }
      ssa_diff_kernel *k;
      if (slot[id]) {
        k = &d->kernels[slot[id] - 1];
      } else {
        k = &d->kernels[d->nkernels++];
        slot[id] = (uint32_t)d->nkernels;
        k->name = name;
        k->mean_a = k->mean_b = NAN;
        k->min_a = k->min_b = NAN;
      }
      k->comm |= row->comm;
      double mean = row->count ? (double)row->total / (double)row->count : NAN;
      if (side) {
        k->in_b = 1;
        k->count_b = (double)row->count / sb;
        k->time_b = (double)row->total / sb;
        k->mean_b = mean;
        k->launches_b = row->count;
        k->min_b = (double)row->min;
      } else {
        k->in_a = 1;
        k->count_a = (double)row->count / sa;
        k->time_a = (double)row->total / sa;
        k->mean_a = mean;
        k->launches_a = row->count;
        k->min_a = (double)row->min;
      }
    }
  }
  qsort(d->kernels, d->nkernels, sizeof *d->kernels, cmp_kernel_change);
  rc = 0;
out:
  free(slot);
  ssa_strtab_free(&t);
  return rc;
}

static double coll_change(const ssa_diff_coll *c) {
  return fabs((c->wait_b + c->transfer_b * c->count_b) - (c->wait_a + c->transfer_a * c->count_a));
}

static int cmp_coll_change(const void *pa, const void *pb) {
  double x = coll_change(pa), y = coll_change(pb);
  return x > y ? -1 : x < y;
}

static int build_colls(ssa_diff *d) {
  const ssa_analysis *a = d->a, *b = d->b;
  size_t cap = a->ncoll_summaries + b->ncoll_summaries;
  d->colls = calloc(cap ? cap : 1, sizeof *d->colls);
  if (!d->colls) return STEPSCOPE_E_NOMEM;
  double sa = per_step_div(a), sb = per_step_div(b);
  for (int side = 0; side < 2; side++) {
    const ssa_analysis *x = side ? b : a;
    for (size_t i = 0; i < x->ncoll_summaries; i++) {
      const ssa_coll_summary *s = &x->coll_summaries[i];
      const char *group = ssa_name(x, s->group);
      ssa_diff_coll *c = NULL;
      for (size_t j = 0; j < d->ncolls && !c; j++)
        if (d->colls[j].op == s->op && d->colls[j].bytes == s->bytes &&
            strcmp(d->colls[j].group, group) == 0)
          c = &d->colls[j];
      if (!c) {
        c = &d->colls[d->ncolls++];
        c->op = s->op;
        c->group = group;
        c->bytes = s->bytes;
        c->busbw_a = c->busbw_b = NAN;
      }
      double mean = s->count ? (double)s->transfer_total / (double)s->count : 0;
      if (side) {
        c->in_b = 1;
        c->count_b = (double)s->count / sb;
        c->transfer_b = mean;
        c->busbw_b = s->busbw;
        c->wait_b = (double)s->wait_total / sb;
      } else {
        c->in_a = 1;
        c->count_a = (double)s->count / sa;
        c->transfer_a = mean;
        c->busbw_a = s->busbw;
        c->wait_a = (double)s->wait_total / sa;
      }
    }
  }
  qsort(d->colls, d->ncolls, sizeof *d->colls, cmp_coll_change);
  return 0;
}

/* Whether a row that moved by `change` per step is named as a cause (ssa_diff.h). */
static int moved(const ssa_diff *d, double change) {
  double step_a = d->m[SSA_DM_STEP_TIME].a.known ? d->m[SSA_DM_STEP_TIME].a.median : 0;
  return step_a > 0 && !(change < 0.01 * step_a);
}

int ssa_diff_kernel_moved(const ssa_diff *d, const ssa_diff_kernel *k) {
  return moved(d, kernel_change(k));
}

int ssa_diff_coll_moved(const ssa_diff *d, const ssa_diff_coll *c) {
  return moved(d, coll_change(c));
}

void ssa_diff_coll_describe(const ssa_diff_coll *c, ssa_diff_coll_text *t) {
  const char *op = stepscope_collective_op_name(c->op);
  t->op = op ? op : "?";
  t->group = c->group[0] ? c->group : "?";
  ssa_fmt_time(t->wait_a, sizeof t->wait_a, c->wait_a);
  ssa_fmt_time(t->wait_b, sizeof t->wait_b, c->wait_b);
  ssa_fmt_time(t->transfer_a, sizeof t->transfer_a, c->transfer_a);
  ssa_fmt_time(t->transfer_b, sizeof t->transfer_b, c->transfer_b);
}

/* The between-run floor: the one given, else the default with one run per side, else none
 * (repeated runs measure it: test 3). */
static void choose_floor(ssa_diff *d, double given) {
  if (!isnan(given)) {
    d->run_noise_source = SSA_DIFF_FLOOR_GIVEN;
    d->run_noise = given > 0 ? given : NAN;
  } else if (d->nruns_a > 1 || d->nruns_b > 1) {
    d->run_noise_source = SSA_DIFF_FLOOR_MEASURED;
    d->run_noise = NAN;
  } else {
    d->run_noise_source = SSA_DIFF_FLOOR_DEFAULT;
    d->run_noise = SSA_DIFF_RUN_NOISE_DEFAULT;
  }
}

int ssa_diff_runs_repeated(const ssa_analysis *const *a, size_t na, const ssa_analysis *const *b,
                           size_t nb, const char *path_a, const char *path_b, double run_noise,
                           unsigned declared, ssa_diff *d) {
  memset(d, 0, sizeof *d);
  if (na < 1 || nb < 1 || na > SSA_DIFF_MAX_RUNS || nb > SSA_DIFF_MAX_RUNS)
    return STEPSCOPE_E_ARGUMENT;
  d->a = a[0];
  d->b = b[0];
  memcpy(d->runs_a, a, na * sizeof *a);
  memcpy(d->runs_b, b, nb * sizeof *b);
  d->nruns_a = na;
  d->nruns_b = nb;
  d->path_a = path_a;
  d->path_b = path_b;
  choose_floor(d, run_noise);
  if (build_kernels(d) || kernel_stretch(d)) return STEPSCOPE_E_NOMEM;
  d->queued_idle_a = side_queued_idle(d->runs_a, na, &d->queued_idle_a_p75);
  d->queued_idle_b = side_queued_idle(d->runs_b, nb, &d->queued_idle_b_p75);
  ssa_diff_machine_load(d);
  d->load_differs =
      load_differs(d->queued_idle_a, d->queued_idle_a_p75, d->queued_idle_b,
                   d->queued_idle_b_p75) ||
      (!isnan(d->kernel_stretch) && (d->kernel_stretch > SSA_DIFF_LOAD_STRETCH ||
                                     d->kernel_stretch < 1.0 / SSA_DIFF_LOAD_STRETCH)) ||
      d->machine_differs;
  double step_a = NAN;
  for (int k = 0; k < SSA_DM_N; k++) { /* step time first: the minimum effect needs it */
    double *va, *vb;
    size_t seg_a[SSA_DIFF_MAX_RUNS], seg_b[SSA_DIFF_MAX_RUNS];
    if (side_series(run_series_of, d->runs_a, na, k, &va, seg_a)) return STEPSCOPE_E_NOMEM;
    if (side_series(run_series_of, d->runs_b, nb, k, &vb, seg_b)) {
      free(va);
      return STEPSCOPE_E_NOMEM;
    }
    unsigned flags = (d->load_differs ? SSA_DIFF_LOAD_DIFFERS : 0) |
                     (declared & (1u << k) ? SSA_DIFF_GATE_METRIC : 0);
    if (compare_metric(va, seg_a, na, vb, seg_b, nb, k, step_a, flags, d->run_noise, &d->m[k]))
      return STEPSCOPE_E_NOMEM;
    if (k == SSA_DM_STEP_TIME) step_a = d->m[k].a.known ? d->m[k].a.median : NAN;
  }
  ssa_diff_configs(d); /* may take MFU out of the comparison */
  ssa_diff_between_runs_family(d, declared);
  d->same_layout = check_layout(d);
  int rc = 0;
  if (d->same_layout) rc = build_ranks(d);
  if (!rc) rc = build_steps(d);
  if (!rc) rc = build_colls(d);
  if (!rc) rc = ssa_diff_decompose(d);
  if (!rc) rc = ssa_diff_build_findings(d);
  return rc;
}

int ssa_diff_runs(const ssa_analysis *a, const ssa_analysis *b, const char *path_a,
                  const char *path_b, ssa_diff *d) {
  return ssa_diff_runs_repeated(&a, 1, &b, 1, path_a, path_b, NAN, 0, d);
}

void ssa_diff_free(ssa_diff *d) {
  free(d->ranks);
  free(d->steps);
  free(d->kernels);
  free(d->colls);
  for (size_t i = 0; i < d->nfindings; i++)
    free(d->findings[i]);
  free(d->findings);
  memset(d, 0, sizeof *d);
}
