/*
 * test_gelu.c — GELU (tanh approximation): values at known points, the derivative
 * at 0 (= 1/2), and a gradient check of the backward on random inputs.
 */
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { N = 64 };

typedef struct {
  float inp[N], out[N], weights[N];
} gelu_ctx;

static double gelu_loss(void *p) {
  gelu_ctx *c = p;
  cpu_gelu_forward(c->out, c->inp, N);
  return check_weighted_sum(c->out, c->weights, N);
}

int test_gelu(void) {
  int failures = 0;
  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated in double precision */
  float x[] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -3.0f, 10.0f, -10.0f};
  double want[] = {0.0,
                   0.8411919906082768,
                   -0.15880800939172324,
                   1.954597694087775,
                   0.34571400982514394,
                   -0.0036373920817729943,
                   10.0,
                   0.0};
  float got[8];
  cpu_gelu_forward(got, x, 8);
  failures += check_close("gelu known values", got, want, 8, 2e-6, 1e-7);

  float zero = 0.0f, one = 1.0f, d0 = 0.0f;
  cpu_gelu_backward(&d0, &zero, &one, 1);
  double half = 0.5;
  failures += check_close("gelu'(0) = 1/2", &d0, &half, 1, 1e-7, 0);

  gelu_ctx c;
  check_rng rng;
  check_rng_seed(&rng, 51);
  check_fill_uniform(c.inp, N, &rng, -4, 4);
  check_fill_uniform(c.weights, N, &rng, -1, 1);
  float dinp[N] = {0};
  cpu_gelu_backward(dinp, c.inp, c.weights, N);
  failures += check_gradient("gelu dinp", c.inp, dinp, N, gelu_loss, &c, 1e-2f, 5e-3);
  return failures;
}
