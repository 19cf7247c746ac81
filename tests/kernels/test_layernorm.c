/*
 * test_layernorm.c — LayerNorm: forward against a double-precision computation
 * (mean, rstd, output), the normalized rows have mean 0 and variance 1, and
 * gradient checks of dinp, dweight, dbias on random shapes.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { N = 6, C = 10 };

typedef struct {
  float *inp, *weight, *bias, *out, *mean, *rstd, *weights;
} layernorm_ctx;

static double layernorm_loss(void *p) {
  layernorm_ctx *c = p;
  cpu_layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->weight, c->bias, N, C);
  return check_weighted_sum(c->out, c->weights, N * C);
}

int test_layernorm(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 21);
  layernorm_ctx c = {check_floats(N * C), check_floats(C), check_floats(C),    check_floats(N * C),
                     check_floats(N),     check_floats(N), check_floats(N * C)};
  check_fill_uniform(c.inp, N * C, &rng, -2, 3);
  check_fill_uniform(c.weight, C, &rng, 0.5f, 1.5f);
  check_fill_uniform(c.bias, C, &rng, -0.5f, 0.5f);
  check_fill_uniform(c.weights, N * C, &rng, -1, 1);

  /* forward against double precision */
  cpu_layernorm_forward(c.out, c.mean, c.rstd, c.inp, c.weight, c.bias, N, C);
  double want_out[N * C], want_mean[N], want_rstd[N];
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int i = 0; i < C; i++)
      m += c.inp[n * C + i];
    m /= C;
    for (int i = 0; i < C; i++)
      v += (c.inp[n * C + i] - m) * (c.inp[n * C + i] - m);
    v /= C;
    double s = 1.0 / sqrt(v + 1e-5);
    want_mean[n] = m;
    want_rstd[n] = s;
    for (int i = 0; i < C; i++)
      want_out[n * C + i] = (c.inp[n * C + i] - m) * s * c.weight[i] + c.bias[i];
  }
  failures += check_close("layernorm mean", c.mean, want_mean, N, 1e-6, 1e-6);
  failures += check_close("layernorm rstd", c.rstd, want_rstd, N, 1e-6, 0);
  failures += check_close("layernorm out", c.out, want_out, N * C, 1e-5, 1e-5);

  /* with weight 1, bias 0 every row is standardized: mean 0, variance 1 - eps*rstd^2 ~ 1 */
  {
    float ones[C], zeros[C], out[N * C], mean[N], rstd[N];
    for (int i = 0; i < C; i++) {
      ones[i] = 1.0f;
      zeros[i] = 0.0f;
    }
    cpu_layernorm_forward(out, mean, rstd, c.inp, ones, zeros, N, C);
    float row_mean[N], row_var[N];
    double want_zero[N], want_one[N];
    for (int n = 0; n < N; n++) {
      double m = 0, v = 0;
      for (int i = 0; i < C; i++)
        m += out[n * C + i];
      m /= C;
      for (int i = 0; i < C; i++)
        v += (out[n * C + i] - m) * (out[n * C + i] - m);
      row_mean[n] = (float)m;
      row_var[n] = (float)(v / C);
      want_zero[n] = 0.0;
      want_one[n] = 1.0;
    }
    failures += check_close("layernorm standardized mean", row_mean, want_zero, N, 0, 1e-6);
    failures += check_close("layernorm standardized variance", row_var, want_one, N, 1e-3, 0);
  }

  /* gradients */
  float *dinp = check_floats(N * C), *dweight = check_floats(C), *dbias = check_floats(C);
  cpu_layernorm_forward(c.out, c.mean, c.rstd, c.inp, c.weight, c.bias, N, C);
  cpu_layernorm_backward(dinp, dweight, dbias, c.weights, c.inp, c.weight, c.mean, c.rstd, N, C);
  failures += check_gradient("layernorm dinp", c.inp, dinp, N * C, layernorm_loss, &c, 1e-2f, 5e-3);
  failures +=
      check_gradient("layernorm dweight", c.weight, dweight, C, layernorm_loss, &c, 1e-2f, 5e-3);
  failures += check_gradient("layernorm dbias", c.bias, dbias, C, layernorm_loss, &c, 1e-2f, 5e-3);

  float *to_free[] = {c.inp,  c.weight,  c.bias, c.out,   c.mean,
                      c.rstd, c.weights, dinp,   dweight, dbias};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; i++)
    free(to_free[i]);
  return failures;
}
