/*
 * culprit_verdict.c — is a straggler a culprit, or noise? (docs/metrics.md "Culprits beyond
 * noise").
 *
 * The walk-back (culprits.c) charges every step in which a rank arrived late beyond the
 * schedule to a (rank, phase) row; on a busy machine, with nothing wrong, some rank is always
 * last somewhere, so the rows alone would name a culprit in every run. This file judges them
 * against the run's own step-to-step variation:
 *   judged steps   the selected steps not cut by the trace's end (all, when all are cut);
 *   noise          1.4826 x the median absolute deviation of their step times (a robust
 *                  standard deviation: one slow warm-up step does not widen it);
 *   threshold      max(3 x noise, 10 % of the median step time);
 *   effect         per (rank, step): the longest any one peer waited for the rank in the
 *                  step, beyond the schedule (the step's delay as its peers felt it);
 *   culprit        a rank whose effect exceeds the threshold in more than half of the judged
 *                  steps (a one-step hiccup does not recur; a slow rank does).
 * With fewer than 3 judged steps the noise cannot be measured: the verdict is "undecided".
 * The verdict names the top candidate either way (most steps beyond the threshold, then the
 * largest median effect): the culprit, or the largest candidate shown as information. When
 * more than one rank is beyond noise it names the next ones too, each marked tied when it is
 * as many steps late as the culprit and its median effect is within the threshold of the
 * culprit's: the run cannot tell which of them held the others up more (two stragglers of
 * one pipeline schedule, say). The rows are ordered ranks beyond noise first, then by caused
 * wait.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

enum { MIN_JUDGED_STEPS = 3 };

static int cmp_effect(const void *pa, const void *pb) {
  const ssa_culprit_effect *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return a->step < b->step ? -1 : a->step > b->step;
}

/* Lower median of v[0, n) (sorts v); 0 when n is 0. */
static int64_t lower_median(int64_t *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, ssa_cmp_i64);
  return v[(n - 1) / 2];
}

/* Per rank: what the test looks at. */
typedef struct candidate {
  int rank;
  uint64_t steps_late;
  int64_t effect_median, effect_max, caused;
} candidate;

static int better(const candidate *a, const candidate *b) {
  if (a->steps_late != b->steps_late) return a->steps_late > b->steps_late;
  if (a->effect_median != b->effect_median) return a->effect_median > b->effect_median;
  return a->caused > b->caused;
}

/* The best SSA_CULPRIT_ALSO + 1 ranks beyond noise, best first (an insertion: few are kept). */
typedef struct top_list {
  candidate c[SSA_CULPRIT_ALSO + 1];
  size_t n, beyond; /* kept; every rank beyond noise */
} top_list;

static void top_add(top_list *t, const candidate *c) {
  enum { KEPT = SSA_CULPRIT_ALSO + 1 };
  t->beyond++;
  if (t->n == KEPT && !better(c, &t->c[KEPT - 1])) return; /* not among the best */
  size_t i = t->n < KEPT ? t->n++ : KEPT - 1;              /* full: the last one goes */
  for (; i > 0 && better(c, &t->c[i - 1]); i--)
    t->c[i] = t->c[i - 1];
  t->c[i] = *c;
}

/* The ranks beyond noise after the culprit (top->c[0]) into the verdict. */
static void name_also(ssa_culprit_verdict *v, const top_list *top) {
  const candidate *first = &top->c[0];
  v->nalso = top->beyond > 0 ? top->beyond - 1 : 0;
  for (size_t k = 1; k < top->n; k++) {
    const candidate *c = &top->c[k];
    int64_t gap = first->effect_median - c->effect_median;
    v->also[k - 1] =
        (ssa_culprit_also){c->rank, c->steps_late == first->steps_late && gap <= v->threshold_ns,
                           c->steps_late, c->effect_median, c->caused};
  }
}

/* The judged steps' numbers (sorted) and the noise and threshold of their times. */
static int judged_steps(ssa_analysis *a, int64_t **numbers, size_t *n) {
  ssa_culprit_verdict *v = &a->culprit_verdict;
  size_t ncut = 0;
  for (size_t i = 0; i < a->nsteps; i++)
    ncut += a->steps[i].cut != 0;
  int64_t *num = malloc((a->nsteps ? a->nsteps : 1) * sizeof *num);
  int64_t *dev = malloc((a->nsteps ? a->nsteps : 1) * sizeof *dev);
  if (!num || !dev) {
    free(num);
    free(dev);
    return STEPSCOPE_E_NOMEM;
  }
  size_t k = 0;
  for (size_t i = 0; i < a->nsteps; i++)
    if (!a->steps[i].cut || ncut == a->nsteps) {
      num[k] = a->steps[i].step;
      dev[k++] = a->steps[i].time;
    }
  int64_t median = lower_median(dev, k);
  for (size_t i = 0; i < k; i++)
    dev[i] = dev[i] > median ? dev[i] - median : median - dev[i];
  v->noise_ns = (int64_t)llround(1.4826 * (double)lower_median(dev, k));
  v->threshold_ns = 3 * v->noise_ns > median / 10 ? 3 * v->noise_ns : median / 10;
  v->steps = k;
  v->steps_needed = k / 2 + 1;
  free(dev);
  qsort(num, k, sizeof *num, ssa_cmp_i64);
  *numbers = num;
  *n = k;
  return 0;
}

static int is_judged(const int64_t *numbers, size_t n, int64_t step) {
  return bsearch(&step, numbers, n, sizeof *numbers, ssa_cmp_i64) != NULL;
}

int ssa_judge_culprits(ssa_analysis *a, ssa_culprit_effect *effects, size_t n) {
  ssa_culprit_verdict *v = &a->culprit_verdict;
  memset(v, 0, sizeof *v);
  v->rank = v->phase = -1;
  int64_t *numbers = NULL;
  size_t nj = 0;
  int rc = judged_steps(a, &numbers, &nj);
  if (rc) return rc;
  int64_t *series = malloc((nj ? nj : 1) * sizeof *series);
  /* the rows by (rank number, row): the rows of one rank are one range */
  ssa_key_index *by_rank = malloc((a->nculprits ? a->nculprits : 1) * sizeof *by_rank);
  if (!series || !by_rank) {
    free(numbers);
    free(series);
    free(by_rank);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t i = 0; i < a->nculprits; i++)
    by_rank[i] = (ssa_key_index){a->culprits[i].rank, i};
  if (a->nculprits > 1) qsort(by_rank, a->nculprits, sizeof *by_rank, ssa_cmp_key_index);
  if (n > 1) qsort(effects, n, sizeof *effects, cmp_effect);
  candidate best = {-1, 0, 0, 0, 0};
  top_list top = {.n = 0};
  for (size_t g = 0; g < n;) {
    size_t e = g;
    candidate c = {a->ranks[effects[g].rank_idx].summary.rank, 0, 0, 0, 0};
    size_t ns = 0;
    while (e < n && effects[e].rank_idx == effects[g].rank_idx) {
      /* one value per judged step: the largest of the rank's groups in it */
      int64_t step = effects[e].step, eff = 0;
      for (; e < n && effects[e].rank_idx == effects[g].rank_idx && effects[e].step == step; e++)
        if (effects[e].effect > eff) eff = effects[e].effect;
      if (!is_judged(numbers, nj, step)) continue;
      series[ns++] = eff;
      c.steps_late += eff > v->threshold_ns;
      if (eff > c.effect_max) c.effect_max = eff;
    }
    while (ns < nj) /* steps in which it was not late */
      series[ns++] = 0;
    c.effect_median = lower_median(series, ns);
    size_t first = ssa_count_below(by_rank, a->nculprits, sizeof *by_rank, c.rank), end = first;
    for (; end < a->nculprits && by_rank[end].key == c.rank; end++)
      c.caused += a->culprits[by_rank[end].index].caused;
    int beyond = nj >= MIN_JUDGED_STEPS && c.steps_late >= v->steps_needed;
    for (size_t k = first; k < end; k++) { /* a victim's row (collective) never is */
      ssa_culprit *row = &a->culprits[by_rank[k].index];
      row->beyond_noise = beyond && row->phase != SSA_PHASE_COLLECTIVE;
    }
    if (best.rank < 0 || better(&c, &best)) best = c;
    if (beyond) top_add(&top, &c);
    g = e;
  }
  free(series);
  free(numbers);
  free(by_rank);
  rc = ssa_order_culprit_rows(a->culprits, a->nculprits, best.rank);
  if (rc) return rc;
  if (best.rank < 0) {
    v->status = SSA_CULPRIT_NO_LATE;
    return 0;
  }
  v->status = nj < MIN_JUDGED_STEPS                ? SSA_CULPRIT_UNDECIDED
              : best.steps_late >= v->steps_needed ? SSA_CULPRIT_FOUND
                                                   : SSA_CULPRIT_WITHIN_NOISE;
  v->rank = best.rank;
  v->steps_late = best.steps_late;
  v->effect_median = best.effect_median;
  v->effect_max = best.effect_max;
  v->caused = best.caused;
  if (v->status == SSA_CULPRIT_FOUND) name_also(v, &top);
  /* its row with the most steps, then the most caused (rows are in that order); a victim's
   * row (collective) only when it has no other */
  const ssa_culprit *row = NULL;
  for (size_t i = 0; i < a->nculprits; i++) {
    const ssa_culprit *c = &a->culprits[i];
    if (c->rank != best.rank) continue;
    if (!row || (row->phase == SSA_PHASE_COLLECTIVE && c->phase != SSA_PHASE_COLLECTIVE)) row = c;
  }
  if (row) {
    v->phase = row->phase;
    v->phase_excess = row->excess;
    v->phase_steps = row->steps;
    v->phase_via_victim = row->via_victim;
  }
  return 0;
}
