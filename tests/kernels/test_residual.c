/*
 * test_residual.c — residual add: exact forward, and the backward adds dout into
 * both operands' (non-zero) gradients.
 */
#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { N = 37 };

int test_residual(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 61);
  float a[N], b[N], out[N], dout[N], da[N], db[N];
  double want[N], want_da[N], want_db[N];
  check_fill_uniform(a, N, &rng, -1, 1);
  check_fill_uniform(b, N, &rng, -1, 1);
  check_fill_uniform(dout, N, &rng, -1, 1);
  check_fill_uniform(da, N, &rng, -1, 1);
  check_fill_uniform(db, N, &rng, -1, 1);
  for (int i = 0; i < N; i++) {
    want[i] = (double)(a[i] + b[i]);
    want_da[i] = (double)(da[i] + dout[i]);
    want_db[i] = (double)(db[i] + dout[i]);
  }
  cpu_residual_forward(out, a, b, N);
  failures += check_close("residual forward", out, want, N, 0, 0);
  cpu_residual_backward(da, db, dout, N);
  failures += check_close("residual da accumulates", da, want_da, N, 0, 0);
  failures += check_close("residual db accumulates", db, want_db, N, 0, 0);
  return failures;
}
