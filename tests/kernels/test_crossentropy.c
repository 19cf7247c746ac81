/*
 * test_crossentropy.c — fused softmax + cross-entropy: uniform logits give loss log V
 * and probabilities 1/V, a two-class case by hand, huge logits stay finite, padded
 * columns get probability 0 and no gradient, and a gradient check of dlogits.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { N = 4, V = 7, VP = 8 };

typedef struct {
  float logits[N * VP], probs[N * VP], losses[N], dlosses[N];
  int targets[N];
} ce_ctx;

static double ce_loss(void *p) {
  ce_ctx *c = p;
  cpu_softmax_crossentropy_forward(c->losses, c->probs, c->logits, c->targets, N, V, VP);
  return check_weighted_sum(c->losses, c->dlosses, N);
}

int test_crossentropy(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 71);
  ce_ctx c;

  /* uniform logits: every class has probability 1/V, the loss is log V */
  for (int i = 0; i < N * VP; i++)
    c.logits[i] = 0.25f;
  for (int i = 0; i < N; i++)
    c.targets[i] = i % V;
  cpu_softmax_crossentropy_forward(c.losses, c.probs, c.logits, c.targets, N, V, VP);
  double log_v[N], prob_row[VP];
  for (int i = 0; i < N; i++)
    log_v[i] = log((double)V);
  for (int v = 0; v < VP; v++)
    prob_row[v] = v < V ? 1.0 / V : 0.0;
  failures += check_close("ce uniform loss = log V", c.losses, log_v, N, 1e-6, 0);
  for (int i = 0; i < N; i++)
    failures +=
        check_close("ce uniform probs = 1/V, padding 0", c.probs + i * VP, prob_row, VP, 1e-6, 0);

  /* two classes with logits 0 and ln 2: p = (1/3, 2/3), loss for class 0 = ln 3 */
  {
    float logits[2] = {0.0f, (float)log(2.0)}, probs[2], loss;
    int target = 0;
    cpu_softmax_crossentropy_forward(&loss, probs, logits, &target, 1, 2, 2);
    double want_p[2] = {1.0 / 3.0, 2.0 / 3.0}, want_loss = log(3.0);
    failures += check_close("ce two-class probs", probs, want_p, 2, 1e-6, 0);
    failures += check_close("ce two-class loss", &loss, &want_loss, 1, 1e-6, 0);
  }

  /* a target 1000 below the maximum: probability underflows, the loss must not */
  {
    float logits[3] = {1000.0f, 0.0f, 0.0f}, probs[3], loss;
    int target = 1;
    cpu_softmax_crossentropy_forward(&loss, probs, logits, &target, 1, 3, 3);
    double want_loss = 1000.0;
    failures += check_close("ce huge logit gap stays finite", &loss, &want_loss, 1, 1e-6, 0);
  }

  /* gradient of sum_i dlosses_i * loss_i with respect to the logits */
  check_fill_uniform(c.logits, N * VP, &rng, -3, 3);
  check_fill_uniform(c.dlosses, N, &rng, 0.1f, 1.0f);
  for (int i = 0; i < N; i++)
    c.targets[i] = check_rng_below(&rng, V);
  float dlogits[N * VP];
  for (int i = 0; i < N * VP; i++)
    dlogits[i] = 0.0f;
  cpu_softmax_crossentropy_forward(c.losses, c.probs, c.logits, c.targets, N, V, VP);
  cpu_softmax_crossentropy_backward(dlogits, c.dlosses, c.probs, c.targets, N, V, VP);
  failures += check_gradient("ce dlogits", c.logits, dlogits, N * VP, ce_loss, &c, 1e-2f, 5e-3);
  /* padded column untouched (its finite difference is 0 too, but say it exactly) */
  double zero = 0.0;
  for (int i = 0; i < N; i++)
    failures +=
        check_close("ce padded column gets no gradient", &dlogits[i * VP + V], &zero, 1, 0, 0);
  return failures;
}
