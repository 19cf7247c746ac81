/*
 * crossentropy.c — fused softmax + cross-entropy loss over the vocabulary.
 *
 * The LM head produces logits [N,Vp]; only the first V columns are real tokens,
 * the rest (V..Vp-1) pad the vocabulary to a friendly multiple and never take part.
 *
 * Forward, per row z (real columns only):
 *     p_v  = exp(z_v - max z) / sum_u exp(z_u - max z)      (shift by max: no overflow)
 *     loss = -log p_target = log sum_u exp(z_u - max z) + max z - z_target
 * We compute the loss from the log-sum-exp rather than from log(p_target): the latter
 * is -inf when p_target underflows to 0, the former stays finite. Padded columns get
 * probability 0.
 *
 * Backward: the derivative of -log softmax(z)_y with respect to z_v is p_v - [v == y],
 * so the whole softmax Jacobian collapses to one subtraction; scaled by the incoming
 * dlosses[i] (e.g. 1/N for a mean loss). Padded columns receive nothing (they are not
 * touched, which for an accumulating gradient means adding 0).
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_softmax_crossentropy_forward(float *losses, float *probs, const float *logits,
                                      const int *targets, int N, int V, int Vp) {
  for (int i = 0; i < N; i++) {
    const float *z = logits + (size_t)i * Vp;
    float *p = probs + (size_t)i * Vp;
    float maxz = z[0];
    for (int v = 1; v < V; v++)
      if (z[v] > maxz) maxz = z[v];
    double sum = 0.0;
    for (int v = 0; v < V; v++) {
      float e = expf(z[v] - maxz);
      p[v] = e;
      sum += e;
    }
    float inv = (float)(1.0 / sum);
    for (int v = 0; v < V; v++)
      p[v] *= inv;
    for (int v = V; v < Vp; v++)
      p[v] = 0.0f;
    losses[i] = (float)(log(sum) + (double)maxz - (double)z[targets[i]]);
  }
}

void cpu_softmax_crossentropy_backward(float *dlogits, const float *dlosses, const float *probs,
                                       const int *targets, int N, int V, int Vp) {
  for (int i = 0; i < N; i++) {
    float *dz = dlogits + (size_t)i * Vp;
    const float *p = probs + (size_t)i * Vp;
    float dl = dlosses[i];
    int y = targets[i];
    for (int v = 0; v < V; v++) {
      float indicator = v == y ? 1.0f : 0.0f;
      dz[v] += (p[v] - indicator) * dl;
    }
  }
}
