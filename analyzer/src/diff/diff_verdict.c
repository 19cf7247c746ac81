/*
 * diff_verdict.c — the noise test of `stepscope diff`: whether the change of
 * one metric between two runs is real, noise, or cannot be told (docs/diff.md
 * "Noise test" gives the reasoning and the constants).
 *
 * Input: the metric's per-step series of each run, in time order. A change is
 * real only when all of these hold:
 *   1. each run has enough steps for a rank test to be able to reject at all
 *      (at least SSA_DIFF_MIN_STEPS, and 2 / C(nA + nB, nA) < alpha);
 *      otherwise the verdict is "unknown";
 *   2. a Mann-Whitney U test over the steps (two-sided, exact permutation
 *      distribution with mid-ranks up to SSA_DIFF_EXACT_MAX values, normal
 *      approximation with tie correction above) rejects at alpha = 0.05;
 *   3. the change of medians exceeds both runs' step-to-step spread (IQR);
 *   4. it exceeds both runs' within-run drift (how far the median of the
 *      second half of a run moved from the first half): the machine's speed
 *      is known to move that much within one run, so it can move at least as
 *      much between two runs;
 *   5. it reaches a minimum effect (1 % of run A's step time for times, 1 %
 *      of A for MFU, 1 point for overlap and bubble ratios);
 *   6. the two runs were measured under comparable load (the caller's
 *      load_differs flag, from the devices' queued idle: diff_runs.c);
 *   7. with repeated runs on a side (the same configuration measured again),
 *      a t-test over the runs' medians (student_t.c; one-sided toward worse for
 *      a gate's metric), adjusted for the metrics judged together
 *      (ssa_diff_between_runs_family, below), rejects at alpha: runs
 *      of one configuration can differ by more than their steps scatter, and
 *      only repeats measure by how much. With repeats the run is the unit, so
 *      tests 3 and 4 (the steps' spread and drift, which stand in for the
 *      between-run variation when it is not measured) are not applied;
 *   8. it exceeds the between-run noise floor when the caller gives one (one
 *      run per side: the default or --run-noise; with repeats: --run-noise
 *      only): a fraction of A's step time for times, of A for MFU, points
 *      for the overlap and bubble ratios.
 * The checks run in the order load, 7, 2, 3, 4, 5, 8; the first that fails is
 * the reason given (so a change within the floor that the steps alone would call real is
 * told apart from one the steps already call noise).
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_diff.h"

typedef struct pooled {
  double v;
  int side; /* 0 a, 1 b */
} pooled;

static int cmp_pooled(const void *pa, const void *pb) {
  const pooled *x = pa, *y = pb;
  return x->v < y->v ? -1 : x->v > y->v;
}

/* log C(n, k) */
static double log_choose(size_t n, size_t k) {
  return lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1);
}

double ssa_diff_min_p(size_t na, size_t nb) {
  if (na == 0 || nb == 0) return 1.0;
  double p = 2.0 * exp(-log_choose(na + nb, na));
  return p > 1.0 ? 1.0 : p;
}

double ssa_diff_mann_whitney(const double *a, size_t na, const double *b, size_t nb) {
  if (na == 0 || nb == 0) return NAN;
  size_t n = na + nb;
  pooled *p = malloc(n * sizeof *p);
  long *r2 = malloc(n * sizeof *r2); /* doubled mid-ranks: integers */
  if (!p || !r2) {
    free(p);
    free(r2);
    return NAN;
  }
  for (size_t i = 0; i < na; i++)
    p[i] = (pooled){a[i], 0};
  for (size_t i = 0; i < nb; i++)
    p[na + i] = (pooled){b[i], 1};
  qsort(p, n, sizeof *p, cmp_pooled);
  double ties = 0; /* sum of t^3 - t over tie blocks */
  long ra = 0;     /* doubled rank sum of a */
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && p[j + 1].v == p[i].v)
      j++;
    double t = (double)(j - i + 1);
    ties += t * t * t - t;
    for (size_t k = i; k <= j; k++) {
      r2[k] = (long)(i + j + 2);
      if (p[k].side == 0) ra += r2[k];
    }
    i = j + 1;
  }
  long expect2 = (long)(na * (n + 1)); /* E[doubled rank sum of a] */
  long dev = labs(ra - expect2);
  double pval;
  if (n <= SSA_DIFF_EXACT_MAX) {
    /* exact permutation distribution of the doubled rank sum of a */
    size_t maxs = n * (n + 1);
    double *cnt = calloc((na + 1) * (maxs + 1), sizeof *cnt);
    if (!cnt) {
      free(p);
      free(r2);
      return NAN;
    }
#define CNT(j, s) cnt[(size_t)(j) * (maxs + 1) + (size_t)(s)]
    CNT(0, 0) = 1;
    size_t reach = 0; /* largest sum reachable so far */
    for (size_t i = 0; i < n; i++) {
      size_t top = i + 1 < na ? i + 1 : na;
      reach += (size_t)r2[i];
      size_t hi = reach < maxs ? reach : maxs;
      for (size_t j = top; j >= 1; j--) {
        for (size_t s = hi; s >= (size_t)r2[i]; s--)
          CNT(j, s) += CNT(j - 1, s - (size_t)r2[i]);
      }
    }
    double total = 0, tail = 0;
    for (size_t s = 0; s <= maxs; s++) {
      double c = CNT(na, s);
      if (c == 0) continue;
      total += c;
      if (labs((long)s - expect2) >= dev) tail += c;
    }
#undef CNT
    free(cnt);
    pval = total > 0 ? tail / total : 1.0;
  } else {
    double u = (double)ra / 2.0 - (double)na * ((double)na + 1) / 2.0;
    double mu = (double)na * (double)nb / 2.0;
    double var =
        (double)na * (double)nb / 12.0 * (((double)n + 1) - ties / ((double)n * ((double)n - 1)));
    if (var <= 0) {
      pval = 1.0;
    } else {
      double z = (fabs(u - mu) - 0.5) / sqrt(var);
      pval = z <= 0 ? 1.0 : erfc(z / sqrt(2.0));
    }
  }
  free(p);
  free(r2);
  return pval > 1.0 ? 1.0 : pval;
}

static double median_of(double *v, size_t n) {
  ssa_diff_stat s;
  ssa_diff_stats(v, n, &s);
  return s.median;
}

/* The middle of n values (sorted in place): the mean of the two middle ones for an even
 * count. Only for the drift, which must see a shift in half of a half (4 of 8 steps) that the
 * lower middle (the headline median, SSA_MEDIAN_INDEX) would not. */
static double middle_of(double *v, size_t n) {
  ssa_diff_stat s;
  ssa_diff_stats(v, n, &s);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

double ssa_diff_drift(const double *v, size_t n) {
  if (n < 2) return 0;
  size_t h = n / 2;
  double *c = malloc(n * sizeof *c);
  if (!c) return NAN;
  memcpy(c, v, n * sizeof *c);
  double first = middle_of(c, h), second = middle_of(c + h, n - h);
  free(c);
  return fabs(second - first);
}

/* The smallest change that counts (docs/diff.md), in the metric's unit. */
static double min_effect(int k, double a_median, double step_a) {
  if (k == SSA_DM_OVERLAP_RATIO || k == SSA_DM_BUBBLE_RATIO) return SSA_DIFF_MIN_EFFECT_PT;
  if (k == SSA_DM_MFU) return SSA_DIFF_MIN_EFFECT_REL * fabs(a_median);
  return SSA_DIFF_MIN_EFFECT_REL * (step_a > 0 ? step_a : fabs(a_median));
}

/* The between-run noise floor (docs/diff.md test 8) in the metric's unit; NaN when none. */
static double run_floor(int k, double a_median, double step_a, double run_noise) {
  if (!(run_noise > 0)) return NAN;
  if (k == SSA_DM_OVERLAP_RATIO || k == SSA_DM_BUBBLE_RATIO) return run_noise;
  if (k == SSA_DM_MFU) return run_noise * fabs(a_median);
  return run_noise * (step_a > 0 ? step_a : fabs(a_median));
}

/* Each run's own median into st->run_median, their range into st->between,
 * and the largest of the runs' drifts into st->drift. */
static int per_run(const double *v, const size_t *seg, size_t k, ssa_diff_stat *st) {
  st->runs = 0;
  st->between = NAN;
  st->drift = 0;
  size_t off = 0, most = 0;
  for (size_t i = 0; i < k; i++)
    most = seg[i] > most ? seg[i] : most;
  double *c = malloc((most ? most : 1) * sizeof *c);
  if (!c) return STEPSCOPE_E_NOMEM;
  double lo = INFINITY, hi = -INFINITY;
  for (size_t i = 0; i < k; off += seg[i], i++) {
    if (!seg[i]) continue;
    double drift = ssa_diff_drift(v + off, seg[i]);
    if (isnan(drift) || drift > st->drift) st->drift = drift;
    memcpy(c, v + off, seg[i] * sizeof *c);
    double med = median_of(c, seg[i]);
    st->run_median[st->runs++] = med;
    lo = fmin(lo, med);
    hi = fmax(hi, med);
  }
  free(c);
  if (st->runs >= 2) st->between = hi - lo;
  return 0;
}

/* Distance between the nearest runs of the two sides, in the direction of
 * the change: positive when every run of B lies beyond every run of A. */
static double run_gap(const ssa_diff_stat *a, const ssa_diff_stat *b, double change) {
  double amin = INFINITY, amax = -INFINITY, bmin = INFINITY, bmax = -INFINITY;
  for (size_t i = 0; i < a->runs; i++) {
    amin = fmin(amin, a->run_median[i]);
    amax = fmax(amax, a->run_median[i]);
  }
  for (size_t i = 0; i < b->runs; i++) {
    bmin = fmin(bmin, b->run_median[i]);
    bmax = fmax(bmax, b->run_median[i]);
  }
  return change > 0 ? bmin - amax : amin - bmax;
}

int ssa_diff_compare_runs(const double *va, const size_t *seg_a, size_t ka, const double *vb,
                          const size_t *seg_b, size_t kb, int k, double step_a, unsigned flags,
                          double run_noise, ssa_diff_metric *m) {
  int load_differs = (flags & SSA_DIFF_LOAD_DIFFERS) != 0;
  if (ka > SSA_DIFF_MAX_RUNS || kb > SSA_DIFF_MAX_RUNS) return STEPSCOPE_E_ARGUMENT;
  size_t na = 0, nb = 0;
  for (size_t i = 0; i < ka; i++)
    na += seg_a[i];
  for (size_t i = 0; i < kb; i++)
    nb += seg_b[i];
  double *sa = malloc((na ? na : 1) * sizeof *sa), *sb = malloc((nb ? nb : 1) * sizeof *sb);
  if (!sa || !sb) {
    free(sa);
    free(sb);
    return STEPSCOPE_E_NOMEM;
  }
  memcpy(sa, va, na * sizeof *sa);
  memcpy(sb, vb, nb * sizeof *sb);
  ssa_diff_stats(sa, na, &m->a);
  ssa_diff_stats(sb, nb, &m->b);
  free(sa);
  free(sb);
  if (per_run(va, seg_a, ka, &m->a) || per_run(vb, seg_b, kb, &m->b)) return STEPSCOPE_E_NOMEM;
  m->comparable = m->a.known && m->b.known;
  m->abs_change = m->rel_change = m->p_value = m->min_effect = m->run_gap = m->run_floor =
      m->run_p_value = m->run_p_adjusted = NAN;
  m->noise = 0;
  m->verdict = SSA_DV_UNKNOWN;
  m->noise_reason = SSA_DN_NONE;
  if (!m->comparable) return 0;
  m->abs_change = m->b.median - m->a.median;
  if (m->a.median != 0) m->rel_change = m->abs_change / fabs(m->a.median);
  if (na < SSA_DIFF_MIN_STEPS || nb < SSA_DIFF_MIN_STEPS ||
      ssa_diff_min_p(na, nb) >= SSA_DIFF_ALPHA) {
    m->noise_reason = SSA_DN_TOO_FEW;
    return 0;
  }
  m->p_value = ssa_diff_mann_whitney(va, na, vb, nb);
  m->min_effect = min_effect(k, m->a.median, step_a);
  m->run_floor = run_floor(k, m->a.median, step_a, run_noise);
  double change = fabs(m->abs_change);
  double spread = fmax(m->a.spread, m->b.spread);
  double drift = fmax(m->a.drift, m->b.drift);
  /* with repeated runs: are the sides' run medians apart beyond how far the
   * runs of one side lie apart (a t-test with the run as the unit); the gap
   * between the nearest runs is reported for the reader */
  int repeated = m->a.runs >= 2 || m->b.runs >= 2;
  m->run_p_value = m->run_p_adjusted = NAN;
  m->run_one_sided = 0;
  if (repeated) {
    m->run_gap = run_gap(&m->a, &m->b, m->abs_change);
    int direction;
    m->run_p_value =
        ssa_diff_runs_t_test(m->a.run_median, m->a.runs, m->b.run_median, m->b.runs, &direction);
    /* A gate fails only on a change for the worse, so for its metrics the test asks that one
     * question: one-sided, half the two-sided p when the runs moved the worse way. An
     * improvement keeps the two-sided test. */
    int worse = -ssa_diff_metric_better[k];
    if ((flags & SSA_DIFF_GATE_METRIC) && direction == worse &&
        (m->abs_change > 0 ? 1 : -1) == worse && !isnan(m->run_p_value)) {
      m->run_p_value /= 2;
      m->run_one_sided = 1;
    }
  }
  if (change == 0) {
    m->verdict = SSA_DV_SAME;
  } else if (load_differs) {
    m->noise_reason = SSA_DN_LOAD;
  } else if (repeated && !(m->run_p_value < SSA_DIFF_ALPHA)) {
    m->noise_reason = SSA_DN_BETWEEN_RUNS;
  } else if (!(m->p_value < SSA_DIFF_ALPHA)) {
    m->noise_reason = SSA_DN_RANK_TEST;
  } else if (!repeated && change <= spread) {
    m->noise_reason = SSA_DN_SPREAD;
  } else if (!repeated && change <= drift) {
    m->noise_reason = SSA_DN_DRIFT;
  } else if (change < m->min_effect) {
    m->noise_reason = SSA_DN_MIN_EFFECT;
  } else if (change <= m->run_floor) {
    m->noise_reason = SSA_DN_RUN_NOISE;
  } else {
    m->verdict = SSA_DV_REAL;
  }
  if (m->verdict == SSA_DV_UNKNOWN) m->verdict = SSA_DV_NOISE;
  m->noise = m->verdict != SSA_DV_REAL;
  return 0;
}

/* Test 3 judges several metrics at once: at alpha = 0.05 each, an A/A pair of repeated runs
 * would show a spurious verdict on one of the nine metrics in about a third of pairs. The
 * metrics named in advance (the gate's) form one family, adjusted by Bonferroni (p times
 * their count); the others another, adjusted by Holm's step-down procedure (the i-th smallest
 * of m p-values times m - i + 1, never below the one before). Each family then holds its
 * spurious verdicts to alpha. A metric whose adjusted p is not below alpha is noise for
 * reason between_runs, which comes before the tests after it (diff_verdict.c). */
void ssa_diff_between_runs_family(ssa_diff *d, unsigned declared) {
  int order[SSA_DM_N], n = 0, ndeclared = 0;
  for (int k = 0; k < SSA_DM_N; k++) {
    ssa_diff_metric *m = &d->m[k];
    m->run_p_adjusted = NAN;
    if (!m->comparable || isnan(m->run_p_value)) continue;
    if (declared & (1u << k))
      ndeclared++;
    else
      order[n++] = k;
  }
  for (int k = 0; k < SSA_DM_N; k++)
    if ((declared & (1u << k)) && d->m[k].comparable && !isnan(d->m[k].run_p_value))
      d->m[k].run_p_adjusted = fmin(1.0, d->m[k].run_p_value * ndeclared);
  for (int i = 1; i < n; i++) /* ascending p: insertion sort of at most SSA_DM_N */
    for (int j = i; j > 0 && d->m[order[j]].run_p_value < d->m[order[j - 1]].run_p_value; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  double running = 0;
  for (int i = 0; i < n; i++) {
    ssa_diff_metric *m = &d->m[order[i]];
    running = fmax(running, fmin(1.0, m->run_p_value * (n - i)));
    m->run_p_adjusted = running;
  }
  for (int k = 0; k < SSA_DM_N; k++) {
    ssa_diff_metric *m = &d->m[k];
    if (isnan(m->run_p_adjusted) || m->run_p_adjusted < SSA_DIFF_ALPHA) continue;
    if (m->verdict != SSA_DV_REAL && m->verdict != SSA_DV_NOISE) continue;
    if (m->noise_reason == SSA_DN_LOAD || m->noise_reason == SSA_DN_BETWEEN_RUNS) continue;
    m->verdict = SSA_DV_NOISE;
    m->noise_reason = SSA_DN_BETWEEN_RUNS;
    m->noise = 1;
  }
}

int ssa_diff_compare_series(const double *va, size_t na, const double *vb, size_t nb, int k,
                            double step_a, int load_differs, double run_noise, ssa_diff_metric *m) {
  return ssa_diff_compare_runs(va, &na, 1, vb, &nb, 1, k, step_a,
                               load_differs ? SSA_DIFF_LOAD_DIFFERS : 0, run_noise, m);
}

int ssa_diff_parse_run_noise(const char *pct, double *fraction, char *err, size_t errlen) {
  /* digits, optionally '.' and digits, optionally '%': no signs, exponents, hex, nan or inf */
  const char *p = pct;
  size_t digits = 0;
  int ok = 1;
  while (isdigit((unsigned char)*p))
    p++, digits++;
  if (*p == '.') {
    const char *frac = ++p;
    while (isdigit((unsigned char)*p))
      p++;
    ok = p > frac;
  }
  if (*p == '%') p++;
  double v = ok && digits && digits < 12 && !*p ? strtod(pct, NULL) : NAN;
  if (!(v >= 0 && v <= SSA_DIFF_RUN_NOISE_MAX * 100.0)) {
    snprintf(err, errlen, "bad --run-noise '%.40s': want a percentage 0..%g, e.g. 5 or 2.5", pct,
             SSA_DIFF_RUN_NOISE_MAX * 100.0);
    return -1;
  }
  *fraction = v / 100.0;
  return 0;
}

const char *ssa_diff_verdict_word(const ssa_diff_metric *m, int k) {
  if (!m->comparable) return "";
  switch (m->verdict) {
  case SSA_DV_SAME: return "same";
  case SSA_DV_NOISE: return "noise";
  case SSA_DV_REAL:
    return (m->abs_change > 0 ? 1 : -1) == ssa_diff_metric_better[k] ? "better" : "WORSE";
  default: return "unknown";
  }
}

const char *const ssa_diff_noise_reason_names[SSA_DN_N] = {
    NULL,     "too_few_steps", "load_differs", "between_runs", "rank_test",
    "spread", "drift",         "min_effect",   "run_noise"};
