/*
 * test_encoder.c — token + position embedding: exact forward values, gradient check
 * of dwte and dwpe (with repeated tokens, so scatter-add collisions are exercised),
 * and the accumulate (+=) contract of the backward pass.
 */
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { B = 2, T = 5, C = 6, V = 4, MAXT = 7 };

typedef struct {
  int tokens[B * T];
  float *wte, *wpe, *out, *weights;
} encoder_ctx;

static double encoder_loss(void *p) {
  encoder_ctx *c = p;
  cpu_encoder_forward(c->out, c->tokens, c->wte, c->wpe, B, T, C);
  return check_weighted_sum(c->out, c->weights, (size_t)B * T * C);
}

int test_encoder(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 11);
  encoder_ctx c;
  for (int i = 0; i < B * T; i++)
    c.tokens[i] = check_rng_below(&rng, V); /* 10 tokens from 4 ids: repeats */
  c.wte = check_floats(V * C);
  c.wpe = check_floats(MAXT * C);
  c.out = check_floats(B * T * C);
  c.weights = check_floats(B * T * C);
  check_fill_uniform(c.wte, V * C, &rng, -1, 1);
  check_fill_uniform(c.wpe, MAXT * C, &rng, -1, 1);
  check_fill_uniform(c.weights, B * T * C, &rng, -1, 1);

  /* forward, exactly */
  cpu_encoder_forward(c.out, c.tokens, c.wte, c.wpe, B, T, C);
  double want[B * T * C];
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int ch = 0; ch < C; ch++)
        want[(b * T + t) * C + ch] =
            (double)(c.wte[c.tokens[b * T + t] * C + ch] + c.wpe[t * C + ch]);
  failures += check_close("encoder forward", c.out, want, B * T * C, 0.0, 0.0);

  /* backward against finite differences (the op is linear: differences are exact
   * up to rounding of the loss) */
  float *dwte = check_floats(V * C), *dwpe = check_floats(MAXT * C);
  cpu_encoder_backward(dwte, dwpe, c.weights, c.tokens, B, T, C);
  failures += check_gradient("encoder dwte", c.wte, dwte, V * C, encoder_loss, &c, 1e-2f, 1e-3);
  failures += check_gradient("encoder dwpe", c.wpe, dwpe, MAXT * C, encoder_loss, &c, 1e-2f, 1e-3);

  /* accumulate: a second backward doubles the gradients */
  float once_wte[V * C];
  for (int i = 0; i < V * C; i++)
    once_wte[i] = dwte[i];
  cpu_encoder_backward(dwte, dwpe, c.weights, c.tokens, B, T, C);
  double twice[V * C];
  for (int i = 0; i < V * C; i++)
    twice[i] = 2.0 * once_wte[i];
  failures += check_close("encoder backward accumulates", dwte, twice, V * C, 1e-6, 1e-7);
  /* rows T..MAXT-1 of wpe are unused and must get no gradient */
  double zeros[(MAXT - T) * C] = {0};
  failures += check_close("encoder unused positions untouched", dwpe + T * C, zeros, (MAXT - T) * C,
                          0.0, 0.0);

  float *to_free[] = {c.wte, c.wpe, c.out, c.weights, dwte, dwpe};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; i++)
    free(to_free[i]);
  return failures;
}
