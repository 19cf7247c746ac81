/*
 * test_attention.c — causal multi-head attention: forward against a double-precision
 * reference, softmax rows sum to 1 with zeros above the diagonal, causality (future
 * tokens cannot change past outputs), a single token attends only to itself, and a
 * gradient check of dqkv; dpreatt/datt are scratch and must not need zeroing.
 */
#include <math.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { B = 2, T = 5, NH = 2, HS = 3, C = NH * HS };

typedef struct {
  float *qkv, *out, *preatt, *att, *weights;
} attention_ctx;

static double attention_loss(void *p) {
  attention_ctx *c = p;
  cpu_attention_forward(c->out, c->preatt, c->att, c->qkv, B, T, C, NH);
  return check_weighted_sum(c->out, c->weights, B * T * C);
}

static void reference_forward(double *out, const float *qkv) {
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float *q = qkv + (b * T + t) * 3 * C + h * HS;
        double score[T], maxv = -INFINITY, sum = 0;
        for (int t2 = 0; t2 <= t; t2++) {
          const float *k = qkv + (b * T + t2) * 3 * C + C + h * HS;
          double d = 0;
          for (int i = 0; i < HS; i++)
            d += (double)q[i] * k[i];
          score[t2] = d / sqrt((double)HS);
          if (score[t2] > maxv) maxv = score[t2];
        }
        for (int t2 = 0; t2 <= t; t2++)
          sum += (score[t2] = exp(score[t2] - maxv));
        for (int i = 0; i < HS; i++) {
          double o = 0;
          for (int t2 = 0; t2 <= t; t2++)
            o += score[t2] / sum * qkv[(b * T + t2) * 3 * C + 2 * C + h * HS + i];
          out[(b * T + t) * C + h * HS + i] = o;
        }
      }
}

int test_attention(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 41);
  attention_ctx c = {check_floats(B * T * 3 * C), check_floats(B * T * C),
                     check_floats(B * NH * T * T), check_floats(B * NH * T * T),
                     check_floats(B * T * C)};
  check_fill_uniform(c.qkv, B * T * 3 * C, &rng, -1.5f, 1.5f);
  check_fill_uniform(c.weights, B * T * C, &rng, -1, 1);

  /* forward against double precision */
  cpu_attention_forward(c.out, c.preatt, c.att, c.qkv, B, T, C, NH);
  double want[B * T * C];
  reference_forward(want, c.qkv);
  failures += check_close("attention forward", c.out, want, B * T * C, 1e-5, 1e-6);

  /* rows of att are distributions over the visible prefix */
  float row_sum[B * NH * T], above_diagonal[B * NH * T];
  double ones[B * NH * T], zeros[B * NH * T];
  for (int r = 0; r < B * NH * T; r++) {
    int t = r % T;
    double s = 0, z = 0;
    for (int t2 = 0; t2 < T; t2++) {
      if (t2 <= t)
        s += c.att[r * T + t2];
      else
        z += fabs(c.att[r * T + t2]) + fabs(c.preatt[r * T + t2]);
    }
    row_sum[r] = (float)s;
    above_diagonal[r] = (float)z;
    ones[r] = 1.0;
    zeros[r] = 0.0;
  }
  failures += check_close("attention rows sum to 1", row_sum, ones, B * NH * T, 1e-6, 0);
  failures +=
      check_close("attention masked entries are 0", above_diagonal, zeros, B * NH * T, 0, 0);

  /* causality: changing the last token's q, k, v leaves earlier outputs unchanged */
  {
    float saved[B * T * C];
    for (int i = 0; i < B * T * C; i++)
      saved[i] = c.out[i];
    for (int i = 0; i < 3 * C; i++)
      c.qkv[(0 * T + T - 1) * 3 * C + i] += 0.5f;
    cpu_attention_forward(c.out, c.preatt, c.att, c.qkv, B, T, C, NH);
    double earlier[(T - 1) * C];
    for (int i = 0; i < (T - 1) * C; i++)
      earlier[i] = saved[i];
    failures += check_close("attention is causal", c.out, earlier, (T - 1) * C, 0, 0);
    for (int i = 0; i < 3 * C; i++)
      c.qkv[(0 * T + T - 1) * 3 * C + i] -= 0.5f;
  }

  /* a sequence of one token: att = 1, out = v */
  {
    float qkv1[3 * C], out1[C], pre1[NH], att1[NH];
    check_fill_uniform(qkv1, 3 * C, &rng, -1, 1);
    cpu_attention_forward(out1, pre1, att1, qkv1, 1, 1, C, NH);
    double v[C];
    for (int i = 0; i < C; i++)
      v[i] = qkv1[2 * C + i];
    failures += check_close("attention of one token returns v", out1, v, C, 1e-7, 0);
  }

  /* gradient; the scratch buffers are filled with garbage first on purpose */
  float *dqkv = check_floats(B * T * 3 * C), *dpreatt = check_floats(B * NH * T * T),
        *datt = check_floats(B * NH * T * T);
  check_fill_uniform(dpreatt, B * NH * T * T, &rng, -100, 100);
  check_fill_uniform(datt, B * NH * T * T, &rng, -100, 100);
  cpu_attention_forward(c.out, c.preatt, c.att, c.qkv, B, T, C, NH);
  cpu_attention_backward(dqkv, dpreatt, datt, c.weights, c.qkv, c.att, B, T, C, NH);
  failures +=
      check_gradient("attention dqkv", c.qkv, dqkv, B * T * 3 * C, attention_loss, &c, 1e-2f, 5e-3);

  float *to_free[] = {c.qkv, c.out, c.preatt, c.att, c.weights, dqkv, dpreatt, datt};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; i++)
    free(to_free[i]);
  return failures;
}
