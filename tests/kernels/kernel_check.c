/*
 * kernel_check.c — implementation of the kernel test helpers (see kernel_check.h):
 * a splitmix64 random generator, buffer allocation, closeness and finite-difference
 * gradient checks that print what they measured.
 */
#include "kernel_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

void check_rng_seed(check_rng *rng, uint64_t seed) {
  rng->state = seed;
}

static uint64_t rng_next(check_rng *rng) {
  uint64_t z = (rng->state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float check_rng_uniform(check_rng *rng, float lo, float hi) {
  double u = (double)(rng_next(rng) >> 11) / 9007199254740992.0; /* 2^53 */
  return (float)(lo + (hi - lo) * u);
}

int check_rng_below(check_rng *rng, int n) {
  return (int)(rng_next(rng) % (uint64_t)n);
}

void check_fill_uniform(float *x, size_t n, check_rng *rng, float lo, float hi) {
  for (size_t i = 0; i < n; i++)
    x[i] = check_rng_uniform(rng, lo, hi);
}

float *check_floats(size_t n) {
  float *p = calloc(n ? n : 1, sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory allocating %zu floats\n", n);
    exit(1);
  }
  return p;
}

int *check_ints(size_t n) {
  int *p = calloc(n ? n : 1, sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory allocating %zu ints\n", n);
    exit(1);
  }
  return p;
}

double check_weighted_sum(const float *out, const float *weights, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; i++)
    sum += (double)out[i] * (double)weights[i];
  return sum;
}

int check_close(const char *what, const float *got, const double *want, size_t n, double rtol,
                double atol) {
  size_t worst = 0;
  double worst_excess = -1.0;
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double diff = fabs((double)got[i] - want[i]);
    double allowed = atol + rtol * fabs(want[i]);
    if (!(diff <= allowed)) /* also catches NaN */
      bad = 1;
    double excess = diff - allowed;
    if (excess > worst_excess || isnan(diff)) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad) {
    printf("FAIL %s: element %zu got %.9g want %.9g (rtol %g atol %g)\n", what, worst,
           (double)got[worst], want[worst], rtol, atol);
    return 1;
  }
  return 0;
}

double check_gradient_error(const double *numeric, const float *analytic, size_t n) {
  double scale = 0.0;
  for (size_t i = 0; i < n; i++)
    if (fabs(numeric[i]) > scale) scale = fabs(numeric[i]);
  double floor_value = 0.1 * scale;
  if (floor_value < 1e-12) floor_value = 1e-12;
  double worst = 0.0;
  for (size_t i = 0; i < n; i++) {
    double denom = fabs(numeric[i]) > floor_value ? fabs(numeric[i]) : floor_value;
    double err = fabs((double)analytic[i] - numeric[i]) / denom;
    if (isnan(err)) return INFINITY;
    if (err > worst) worst = err;
  }
  return worst;
}

int check_gradient(const char *what, float *x, const float *analytic, size_t n, check_loss_fn loss,
                   void *ctx, float h, double tol) {
  double *numeric = malloc((n ? n : 1) * sizeof *numeric);
  if (!numeric) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) {
    float saved = x[i];
    float plus = saved + h, minus = saved - h;
    x[i] = plus;
    double loss_plus = loss(ctx);
    x[i] = minus;
    double loss_minus = loss(ctx);
    x[i] = saved;
    /* divide by the step actually taken after rounding x +- h to float */
    numeric[i] = (loss_plus - loss_minus) / ((double)plus - (double)minus);
  }
  double err = check_gradient_error(numeric, analytic, n);
  int failed = !(err <= tol);
  printf("%s gradcheck %s: n=%zu h=%g worst relative error %.3e (tolerance %.1e)\n",
         failed ? "FAIL" : "ok  ", what, n, (double)h, err, tol);
  free(numeric);
  return failed;
}
