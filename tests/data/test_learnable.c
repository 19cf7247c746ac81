/*
 * test_learnable.c — the built-in corpus is learnable in a demo's time
 * (data.builtin_learnable): a minimal language model built from the CPU reference
 * kernels (token + position embedding, LayerNorm, linear head, softmax cross-entropy,
 * AdamW) trains on byte batches of the built-in corpus for 20 steps, and the loss
 * must fall from about ln 256 = 5.55 to below 80 % of its first value. This exercises
 * corpus, batching and kernels together; the real GPT is the trainer's business.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "data_check.h"
#include "dataset.h"

int data_check_failures = 0;

enum { B = 8, T = 32, C = 32, V = 256, STEPS = 20 };

static float *zeros(size_t n) {
  float *p = calloc(n, sizeof *p);
  if (!p) {
    printf("out of memory\n");
    exit(1);
  }
  return p;
}

int main(void) {
  stepscope_dataset *ds = NULL;
  char err[256] = "";
  if (stepscope_dataset_open(&ds, NULL, err, sizeof err) != 0) {
    printf("FAIL cannot open the built-in corpus: %s\n", err);
    return 1;
  }
  /* parameters: wte [V,C], wpe [T,C], ln weight/bias [C], head [V,C], head bias [V] */
  size_t sizes[6] = {V * C, T * C, C, C, V * C, V};
  size_t total = 0;
  for (int i = 0; i < 6; i++)
    total += sizes[i];
  float *params = zeros(total), *grads = zeros(total), *m = zeros(total), *v = zeros(total);
  float *wte = params, *wpe = wte + V * C, *lnw = wpe + T * C, *lnb = lnw + C, *head = lnb + C,
        *head_b = head + V * C;
  float *dwte = grads, *dwpe = dwte + V * C, *dlnw = dwpe + T * C, *dlnb = dlnw + C,
        *dhead = dlnb + C, *dhead_b = dhead + V * C;
  unsigned rng = 12345;
  for (size_t i = 0; i < total; i++) {
    rng = rng * 1664525u + 1013904223u;
    params[i] = 0.02f * (((float)(rng >> 8) / 16777216.0f) * 2.0f - 1.0f);
  }
  for (int c = 0; c < C; c++)
    lnw[c] = 1.0f, lnb[c] = 0.0f;

  float *x = zeros(B * T * C), *xn = zeros(B * T * C), *mean = zeros(B * T), *rstd = zeros(B * T);
  float *logits = zeros(B * T * V), *probs = zeros(B * T * V), *losses = zeros(B * T),
        *dlosses = zeros(B * T);
  float *dlogits = zeros(B * T * V), *dxn = zeros(B * T * C), *dx = zeros(B * T * C);
  int inputs[B * T], targets[B * T];
  stepscope_data_cursor cursor;
  stepscope_data_cursor_init(&cursor, 1, 0, 1);
  double first = 0, last = 0;
  for (int step = 1; step <= STEPS; step++) {
    stepscope_dataset_next_batch(ds, &cursor, inputs, targets, B, T);
    cpu_encoder_forward(x, inputs, wte, wpe, B, T, C);
    cpu_layernorm_forward(xn, mean, rstd, x, lnw, lnb, B * T, C);
    cpu_matmul_forward(logits, xn, head, head_b, B * T, C, V);
    cpu_softmax_crossentropy_forward(losses, probs, logits, targets, B * T, V, V);
    double loss = 0;
    for (int i = 0; i < B * T; i++)
      loss += losses[i];
    loss /= B * T;
    if (step == 1) first = loss;
    last = loss;
    printf("step %2d loss %.4f\n", step, loss);

    memset(grads, 0, total * sizeof *grads);
    memset(dlogits, 0, sizeof(float) * B * T * V);
    memset(dxn, 0, sizeof(float) * B * T * C);
    memset(dx, 0, sizeof(float) * B * T * C);
    for (int i = 0; i < B * T; i++)
      dlosses[i] = 1.0f / (B * T);
    cpu_softmax_crossentropy_backward(dlogits, dlosses, probs, targets, B * T, V, V);
    cpu_matmul_backward(dxn, dhead, dhead_b, dlogits, xn, head, B * T, C, V);
    cpu_layernorm_backward(dx, dlnw, dlnb, dxn, x, lnw, mean, rstd, B * T, C);
    cpu_encoder_backward(dwte, dwpe, dx, inputs, B, T, C);
    cpu_adamw_update(params, grads, m, v, total, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f, step);
  }
  CHECK(fabs(first - log(256.0)) < 0.1, "initial loss %.3f should be near ln 256 = 5.545", first);
  CHECK(last < 0.8 * first, "loss fell only from %.3f to %.3f in %d steps", first, last, STEPS);
  printf("loss %.3f -> %.3f in %d steps\n", first, last, STEPS);

  float *to_free[] = {params, grads, m,      v,       x,       xn,  mean, rstd,
                      logits, probs, losses, dlosses, dlogits, dxn, dx};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; i++)
    free(to_free[i]);
  stepscope_dataset_close(ds);
  printf("%s (%d failed checks)\n", data_check_failures ? "FAIL" : "PASS", data_check_failures);
  return data_check_failures ? 1 : 0;
}
