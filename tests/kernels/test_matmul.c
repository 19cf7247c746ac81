/*
 * test_matmul.c — the blocked matmul against a naive double-precision reference on
 * shapes that cross every block and micro-tile edge (forward with and without bias,
 * all three gradients, NULL gradients skipped, accumulation), plus a finite-difference
 * gradient check on a small shape.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

static int check_shape(int N, int C, int OC, uint64_t seed) {
  int failures = 0;
  char what[96];
  check_rng rng;
  check_rng_seed(&rng, seed);
  float *inp = check_floats((size_t)N * C), *weight = check_floats((size_t)OC * C),
        *bias = check_floats(OC);
  float *out = check_floats((size_t)N * OC), *dout = check_floats((size_t)N * OC);
  float *dinp = check_floats((size_t)N * C), *dweight = check_floats((size_t)OC * C),
        *dbias = check_floats(OC);
  double *want_out = malloc(sizeof(double) * N * OC), *want_dinp = malloc(sizeof(double) * N * C);
  double *want_dweight = malloc(sizeof(double) * OC * C), *want_dbias = malloc(sizeof(double) * OC);
  if (!want_out || !want_dinp || !want_dweight || !want_dbias) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  check_fill_uniform(inp, (size_t)N * C, &rng, -1, 1);
  check_fill_uniform(weight, (size_t)OC * C, &rng, -1, 1);
  check_fill_uniform(bias, OC, &rng, -1, 1);
  check_fill_uniform(dout, (size_t)N * OC, &rng, -1, 1);
  /* gradients start non-zero to check that backward adds rather than overwrites */
  check_fill_uniform(dinp, (size_t)N * C, &rng, -1, 1);
  check_fill_uniform(dweight, (size_t)OC * C, &rng, -1, 1);
  check_fill_uniform(dbias, OC, &rng, -1, 1);

  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double s = bias[o];
      for (int i = 0; i < C; i++)
        s += (double)inp[(size_t)n * C + i] * weight[(size_t)o * C + i];
      want_out[(size_t)n * OC + o] = s;
    }
  for (int n = 0; n < N; n++)
    for (int i = 0; i < C; i++) {
      double s = dinp[(size_t)n * C + i];
      for (int o = 0; o < OC; o++)
        s += (double)dout[(size_t)n * OC + o] * weight[(size_t)o * C + i];
      want_dinp[(size_t)n * C + i] = s;
    }
  for (int o = 0; o < OC; o++) {
    for (int i = 0; i < C; i++) {
      double s = dweight[(size_t)o * C + i];
      for (int n = 0; n < N; n++)
        s += (double)dout[(size_t)n * OC + o] * inp[(size_t)n * C + i];
      want_dweight[(size_t)o * C + i] = s;
    }
    double s = dbias[o];
    for (int n = 0; n < N; n++)
      s += dout[(size_t)n * OC + o];
    want_dbias[o] = s;
  }

  /* float sums of up to a few hundred terms of size ~1: relative 1e-5 of the sum's
   * magnitude is generous for ascending-order float accumulation, yet any indexing
   * mistake is off by O(1) */
  double atol = 1e-5 * (C > N ? (C > OC ? C : OC) : (N > OC ? N : OC));
  cpu_matmul_forward(out, inp, weight, bias, N, C, OC);
  snprintf(what, sizeof what, "matmul forward N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, out, want_out, (size_t)N * OC, 1e-5, atol);

  cpu_matmul_forward(out, inp, weight, NULL, N, C, OC);
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++)
      want_out[(size_t)n * OC + o] -= bias[o];
  snprintf(what, sizeof what, "matmul forward without bias N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, out, want_out, (size_t)N * OC, 1e-5, atol);

  cpu_matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
  snprintf(what, sizeof what, "matmul dinp N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, dinp, want_dinp, (size_t)N * C, 1e-5, atol);
  snprintf(what, sizeof what, "matmul dweight N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, dweight, want_dweight, (size_t)OC * C, 1e-5, atol);
  snprintf(what, sizeof what, "matmul dbias N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, dbias, want_dbias, OC, 1e-5, atol);

  /* NULL gradients are skipped; the others still accumulate */
  for (int o = 0; o < OC; o++) {
    double s = 0;
    for (int n = 0; n < N; n++)
      s += dout[(size_t)n * OC + o];
    want_dbias[o] += s;
  }
  cpu_matmul_backward(NULL, NULL, dbias, dout, inp, weight, N, C, OC);
  snprintf(what, sizeof what, "matmul dbias only N=%d C=%d OC=%d", N, C, OC);
  failures += check_close(what, dbias, want_dbias, OC, 1e-5, atol);

  if (failures == 0) printf("ok   matmul N=%d C=%d OC=%d matches the double reference\n", N, C, OC);
  free(inp), free(weight), free(bias), free(out), free(dout), free(dinp), free(dweight),
      free(dbias);
  free(want_out), free(want_dinp), free(want_dweight), free(want_dbias);
  return failures;
}

enum { GN = 3, GC = 5, GOC = 4 };

typedef struct {
  float inp[GN * GC], weight[GOC * GC], bias[GOC], out[GN * GOC], weights[GN * GOC];
} matmul_ctx;

static double matmul_loss(void *p) {
  matmul_ctx *c = p;
  cpu_matmul_forward(c->out, c->inp, c->weight, c->bias, GN, GC, GOC);
  return check_weighted_sum(c->out, c->weights, GN * GOC);
}

int test_matmul(void) {
  int failures = 0;
  /* tiny, exactly one micro tile, ragged edges of tiles and of cache blocks (the
   * blocks are 64 deep and 128 wide), and sizes of the trainer's tiny model */
  failures += check_shape(1, 1, 1, 1);
  failures += check_shape(4, 16, 16, 2);
  failures += check_shape(5, 17, 19, 3);
  failures += check_shape(37, 70, 150, 4);
  failures += check_shape(64, 129, 257, 5);
  failures += check_shape(130, 64, 192, 6);
  failures += check_shape(7, 300, 3, 7);

  matmul_ctx c;
  check_rng rng;
  check_rng_seed(&rng, 31);
  check_fill_uniform(c.inp, GN * GC, &rng, -1, 1);
  check_fill_uniform(c.weight, GOC * GC, &rng, -1, 1);
  check_fill_uniform(c.bias, GOC, &rng, -1, 1);
  check_fill_uniform(c.weights, GN * GOC, &rng, -1, 1);
  float dinp[GN * GC] = {0}, dweight[GOC * GC] = {0}, dbias[GOC] = {0};
  cpu_matmul_backward(dinp, dweight, dbias, c.weights, c.inp, c.weight, GN, GC, GOC);
  failures += check_gradient("matmul dinp", c.inp, dinp, GN * GC, matmul_loss, &c, 1e-2f, 1e-3);
  failures +=
      check_gradient("matmul dweight", c.weight, dweight, GOC * GC, matmul_loss, &c, 1e-2f, 1e-3);
  failures += check_gradient("matmul dbias", c.bias, dbias, GOC, matmul_loss, &c, 1e-2f, 1e-3);
  return failures;
}
