/*
 * median_interval.c — a distribution-free confidence interval for the median of a sample
 * (ssa_diff.h): the interval between two order statistics, x_(j) .. x_(n+1-j), covers the true
 * median with probability 1 - 2 P(B < j), B ~ Binomial(n, 1/2) (the sign-test interval, e.g.
 * Conover, "Practical Nonparametric Statistics", sec. 3.2). No assumption about the shape of
 * the step-time distribution, which is skewed by stragglers and outliers: what a step time
 * measured over a handful of steps can and cannot tell.
 *
 * Written here because it is ten lines: the binomial tail is summed term by term in log space
 * (lgamma), linear in the steps, so thousands of steps neither overflow nor lose the tail.
 */
#include <math.h>
#include <stdlib.h>

#include "ssa_diff.h"

/* P(B = i), B ~ Binomial(n, 1/2), in log space (no overflow for thousands of steps). */
static double binomial_half_pmf(size_t n, size_t i) {
  return exp(lgamma((double)n + 1) - lgamma((double)i + 1) - lgamma((double)(n - i) + 1) -
             (double)n * log(2.0));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int ssa_median_interval(double *v, size_t n, double confidence, double *lo, double *hi,
                        double *achieved) {
  if (n == 0 || !(confidence > 0 && confidence < 1)) return -1;
  qsort(v, n, sizeof *v, cmp_double);
  /* the largest j (1-based) with 2 P(B <= j - 1) <= 1 - confidence */
  size_t j = 0;
  double tail = 0, cdf = 0; /* cdf: P(B <= j), summed as j grows (linear in n) */
  while (j + 1 <= n / 2) {
    cdf += binomial_half_pmf(n, j); /* the tail if x_(j+1) is the bound */
    if (2 * cdf > 1 - confidence) break;
    tail = cdf;
    j++;
  }
  if (j == 0) return -1; /* even [min, max] covers with less than `confidence` */
  *lo = v[j - 1];
  *hi = v[n - j];
  *achieved = 1 - 2 * tail;
  return 0;
}
