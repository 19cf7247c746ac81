/*
 * test_grad_clip.c — the clipping helpers: sum of squares (exact small case and a
 * large buffer against a double sum) and in-place scaling.
 */
#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

#include <stdlib.h>

int test_grad_clip(void) {
  int failures = 0;
  float x[4] = {3.0f, 4.0f, -12.0f, 0.0f};
  float ss = (float)cpu_sum_squares(x, 4);
  double want_ss = 169.0;
  failures += check_close("sum of squares 3,4,-12,0", &ss, &want_ss, 1, 0, 0);

  cpu_scale(x, 0.5f, 4);
  double want_scaled[4] = {1.5, 2.0, -6.0, 0.0};
  failures += check_close("scale by 1/2", x, want_scaled, 4, 0, 0);

  size_t n = 100003;
  float *big = check_floats(n);
  check_rng rng;
  check_rng_seed(&rng, 81);
  check_fill_uniform(big, n, &rng, -1, 1);
  double want = 0.0;
  for (size_t i = 0; i < n; i++)
    want += (double)big[i] * big[i];
  float got = (float)cpu_sum_squares(big, n);
  failures += check_close("sum of squares, 100003 values", &got, &want, 1, 1e-6, 0);
  free(big);
  return failures;
}
