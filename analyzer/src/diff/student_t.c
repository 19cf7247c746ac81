/*
 * student_t.c — Student's two-sample t-test on the runs of two sides: the
 * between-run test of `stepscope diff` when a side has repeated runs
 * (docs/diff.md "Noise test", test 3).
 *
 * With repeated runs the unit of observation is the run, not the step: the
 * steps of one run share its machine state (placement, clocks, neighbours),
 * so runs of one configuration differ by more than their steps scatter. The
 * test therefore compares the runs' medians, with the variance pooled over
 * both sides (df = runs A + runs B - 2), on their logarithms when every one is
 * positive: times and MFU vary by factors (a run slowed by a neighbour is
 * slower by a share of its time), and one run slower by 60 % inflates the
 * variance of the raw medians far more than that of their logarithms. With equal run counts per
 * side (the documented use: three and three) the pooled statistic equals Welch's and is robust to
 * unequal variances; the pooled degrees of freedom keep its power with three runs per side, where
 * Welch's can fall to 2.
 *
 * The p-value needs the t distribution's tail, i.e. the regularized
 * incomplete beta function: p = I_{df/(df+t^2)}(df/2, 1/2). libm has no such
 * function and the library that has one (GSL) is GPL, which the project
 * cannot link, so it is evaluated here by its continued fraction (Abramowitz
 * & Stegun 26.5.8, modified Lentz's method), converging in a few dozen terms
 * for the arguments used here; tests/diff checks it against reference values.
 */
#include <math.h>
#include <stddef.h>

#include "ssa_diff.h"

/* The continued fraction of I_x(a, b) (A&S 26.5.8), for x < (a + 1) / (a + b + 2). */
static double beta_fraction(double a, double b, double x) {
  const double tiny = 1e-300, eps = 1e-15;
  double c = 1.0, d = 1.0 - (a + b) * x / (a + 1.0);
  if (fabs(d) < tiny) d = tiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 300; m++) {
    double m2 = 2.0 * m;
    /* the even step */
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (fabs(d) < tiny) d = tiny;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    h *= d * c;
    /* the odd step */
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    c = 1.0 + num / c;
    if (fabs(d) < tiny) d = tiny;
    if (fabs(c) < tiny) c = tiny;
    d = 1.0 / d;
    double step = d * c;
    h *= step;
    if (fabs(step - 1.0) < eps) break;
  }
  return h;
}

/* The regularized incomplete beta function I_x(a, b), 0 <= x <= 1. */
static double incomplete_beta(double a, double b, double x) {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  double front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * beta_fraction(a, b, x) / a;
  return 1.0 -
         front * beta_fraction(b, a, 1.0 - x) / b; /* the symmetry I_x(a,b) = 1 - I_1-x(b,a) */
}

double ssa_student_t_p(double t, double df) {
  if (!(df > 0) || isnan(t)) return NAN;
  if (isinf(t)) return 0.0;
  return incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
}

/* Mean and sum of squared deviations of n values. */
static void mean_ss(const double *v, size_t n, double *mean, double *ss) {
  double s = 0;
  for (size_t i = 0; i < n; i++)
    s += v[i];
  *mean = n ? s / (double)n : NAN;
  *ss = 0;
  for (size_t i = 0; i < n; i++)
    *ss += (v[i] - *mean) * (v[i] - *mean);
}

/* Whether every value is positive (and finite): then the test runs on their logarithms. */
static int all_positive(const double *v, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!(v[i] > 0) || isinf(v[i])) return 0;
  return 1;
}

double ssa_diff_runs_t_test(const double *a, size_t na, const double *b, size_t nb,
                            int *direction) {
  if (direction) *direction = 0;
  if (na == 0 || nb == 0 || na + nb < 3 || na > SSA_DIFF_MAX_RUNS || nb > SSA_DIFF_MAX_RUNS)
    return NAN;
  double la[SSA_DIFF_MAX_RUNS], lb[SSA_DIFF_MAX_RUNS];
  if (all_positive(a, na) && all_positive(b, nb)) {
    for (size_t i = 0; i < na; i++)
      la[i] = log(a[i]);
    for (size_t i = 0; i < nb; i++)
      lb[i] = log(b[i]);
    a = la;
    b = lb;
  }
  double ma, ssa, mb, ssb;
  mean_ss(a, na, &ma, &ssa);
  mean_ss(b, nb, &mb, &ssb);
  double df = (double)(na + nb - 2);
  double pooled = (ssa + ssb) / df;
  double se = sqrt(pooled * (1.0 / (double)na + 1.0 / (double)nb));
  if (direction) *direction = (mb > ma) - (mb < ma);
  if (mb == ma) return 1.0;
  if (!(se > 0)) return 0.0; /* runs of each side identical, sides apart */
  return ssa_student_t_p((mb - ma) / se, df);
}
