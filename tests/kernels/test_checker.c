/*
 * test_checker.c — tests of the gradient checker itself, so that the kernel tests
 * built on it can fail: a correct gradient of a known function passes, and the same
 * gradient with one element off by 5 %, with a wrong sign, or NaN is rejected.
 */
#include <math.h>
#include <stdio.h>

#include "kernel_check.h"
#include "kernel_tests.h"

/* L(x) = sum_i w_i * x_i^3, dL/dx_i = 3 w_i x_i^2 */
typedef struct {
  float *x, *w;
  size_t n;
} cubic_ctx;

static double cubic_loss(void *p) {
  cubic_ctx *c = p;
  double sum = 0.0;
  for (size_t i = 0; i < c->n; i++) {
    float cube = c->x[i] * c->x[i] * c->x[i];
    sum += (double)c->w[i] * cube;
  }
  return sum;
}

int test_checker(void) {
  int failures = 0;
  enum { n = 32 };
  float x[n], w[n], grad[n];
  check_rng rng;
  check_rng_seed(&rng, 1);
  check_fill_uniform(x, n, &rng, -1.5f, 1.5f);
  check_fill_uniform(w, n, &rng, -1.0f, 1.0f);
  for (size_t i = 0; i < n; i++)
    grad[i] = 3.0f * w[i] * x[i] * x[i];
  cubic_ctx ctx = {x, w, n};

  failures += check_gradient("cubic (correct)", x, grad, n, cubic_loss, &ctx, 1e-2f, 1e-2);

  printf("(the next checks are built to fail; their FAIL lines are expected)\n");
  /* errors are judged relative to max(|numeric_i|, 0.1 max|numeric|): a 5 % error on
   * the largest element must be caught */
  size_t largest = 0;
  for (size_t i = 1; i < n; i++)
    if (fabsf(grad[i]) > fabsf(grad[largest])) largest = i;
  float saved = grad[largest];
  grad[largest] *= 1.05f;
  if (!check_gradient("cubic (largest element 5% off, must fail)", x, grad, n, cubic_loss, &ctx,
                      1e-2f, 1e-2)) {
    printf("FAIL checker accepted a 5%% error\n");
    failures++;
  }
  grad[largest] = saved;
  /* and so must an absolute error of 5 % of the largest gradient on a small element */
  size_t smallest = 0;
  for (size_t i = 1; i < n; i++)
    if (fabsf(grad[i]) < fabsf(grad[smallest])) smallest = i;
  saved = grad[smallest];
  grad[smallest] += 0.05f * fabsf(grad[largest]);
  if (!check_gradient("cubic (small element off by 5% of the scale, must fail)", x, grad, n,
                      cubic_loss, &ctx, 1e-2f, 1e-2)) {
    printf("FAIL checker accepted an absolute error of 5%% of the scale\n");
    failures++;
  }
  grad[smallest] = saved;
  grad[3] = -grad[3];
  if (!check_gradient("cubic (one sign flipped, must fail)", x, grad, n, cubic_loss, &ctx, 1e-2f,
                      1e-2)) {
    printf("FAIL checker accepted a flipped sign\n");
    failures++;
  }
  grad[3] = -grad[3];
  grad[0] = NAN;
  if (!check_gradient("cubic (NaN, must fail)", x, grad, n, cubic_loss, &ctx, 1e-2f, 1e-2)) {
    printf("FAIL checker accepted NaN\n");
    failures++;
  }

  double want[2] = {1.0, 2.0};
  float got_ok[2] = {1.0f, 2.0f}, got_bad[2] = {1.0f, 2.1f};
  failures += check_close("close (equal)", got_ok, want, 2, 1e-6, 0.0);
  if (!check_close("close (off, must fail)", got_bad, want, 2, 1e-3, 0.0)) {
    printf("FAIL check_close accepted a 5%% error\n");
    failures++;
  }
  return failures;
}
