/*
 * moe_router.c — the mixture-of-experts router (reference): a softmax over E experts per
 * token, the top K experts chosen deterministically, their gate weights, and the
 * Switch/GShard load-balancing auxiliary loss, forward and backward.
 *
 * Routing. probs[t,:] = softmax(logits[t,:]) (max subtracted, sum in double). The K experts
 * are taken in order of decreasing probability; equal probabilities go to the lower expert
 * index, so routing is a pure function of the logits (the same on every rank and every
 * backend that computes the same logits). gate[t,k] = probs[t,e_k], or with `renorm`
 * probs[t,e_k] / S_t, S_t = sum_k probs[t,e_k] (Mixtral: the K gates sum to 1).
 *
 * Load balancing (Switch Transformer eq. 4, GShard): aux = E * sum_i f_i * P_i, where
 * f_i = (assignments to expert i) / (N K) is the fraction of routing decisions that chose i
 * (a count: no gradient) and P_i = (1/N) sum_t probs[t,i] the mean router probability; a
 * perfectly balanced router gives aux = 1. d aux / d probs[t,i] = E f_i / N.
 *
 * Backward. With dp[t,:] the gradient with respect to the probabilities,
 *   dp[t,i]   = aux_scale * E f_i / N                       (the auxiliary loss)
 *   dp[t,e_k] += dgate[t,k]                                 (no renorm), or
 *   dp[t,e_k] += dgate[t,k] / S_t - (sum_m dgate[t,m] probs[t,e_m]) / S_t^2   (renorm),
 * and the softmax gives dlogits[t,i] += probs[t,i] (dp[t,i] - sum_j probs[t,j] dp[t,j]).
 * The choice of experts is piecewise constant in the logits: it has no gradient.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_moe_router_forward(int *expert, float *gate, float *probs, const float *logits, int N,
                            int E, int K, int renorm) {
  for (int t = 0; t < N; t++) {
    const float *z = logits + (size_t)t * E;
    float *p = probs + (size_t)t * E;
    float mx = z[0];
    for (int i = 1; i < E; i++)
      if (z[i] > mx) mx = z[i];
    double sum = 0;
    for (int i = 0; i < E; i++) {
      p[i] = expf(z[i] - mx);
      sum += p[i];
    }
    for (int i = 0; i < E; i++)
      p[i] = (float)(p[i] / sum);
    int *ex = expert + (size_t)t * K;
    float *g = gate + (size_t)t * K;
    double s = 0;
    for (int k = 0; k < K; k++) {
      int best = -1;
      for (int i = 0; i < E; i++) {
        int taken = 0;
        for (int m = 0; m < k; m++)
          taken |= ex[m] == i;
        if (!taken && (best < 0 || p[i] > p[best])) /* ties: the lower index */
          best = i;
      }
      ex[k] = best;
      g[k] = p[best];
      s += p[best];
    }
    if (renorm)
      for (int k = 0; k < K; k++)
        g[k] = (float)(g[k] / s);
  }
}

/* counts[E] (ints) of the routing decisions; the fractions f_i are counts[i] / (N K). */
static void count_assignments(int *counts, const int *expert, int N, int E, int K) {
  for (int i = 0; i < E; i++)
    counts[i] = 0;
  for (size_t a = 0; a < (size_t)N * K; a++)
    counts[expert[a]]++;
}

double cpu_moe_aux_loss(const float *probs, const int *expert, int N, int E, int K, int *counts) {
  count_assignments(counts, expert, N, E, K);
  double aux = 0;
  for (int i = 0; i < E; i++) {
    double P = 0;
    for (int t = 0; t < N; t++)
      P += probs[(size_t)t * E + i];
    aux += (double)counts[i] / ((double)N * K) * (P / N);
  }
  return E * aux;
}

void cpu_moe_router_backward(float *dlogits, const float *dgate, const float *probs,
                             const int *expert, int N, int E, int K, int renorm, float aux_scale,
                             int *counts) {
  count_assignments(counts, expert, N, E, K);
  double aux_per = (double)aux_scale * E / ((double)N * K * N); /* times counts[i] */
  for (int t = 0; t < N; t++) {
    const float *p = probs + (size_t)t * E;
    const int *ex = expert + (size_t)t * K;
    const float *dg = dgate + (size_t)t * K;
    float *dz = dlogits + (size_t)t * E;
    double S = 0, sg = 0;
    for (int k = 0; k < K; k++) {
      S += p[ex[k]];
      sg += (double)dg[k] * p[ex[k]];
    }
    /* dot = sum_j p_j dp_j, the aux part over every expert plus the chosen ones' extra */
    double dot = 0;
    for (int i = 0; i < E; i++)
      dot += p[i] * (aux_per * counts[i]);
    for (int k = 0; k < K; k++) {
      double extra = renorm ? dg[k] / S - sg / (S * S) : dg[k];
      dot += p[ex[k]] * extra;
    }
    for (int i = 0; i < E; i++) {
      double dp = aux_per * counts[i];
      for (int k = 0; k < K; k++)
        if (ex[k] == i) dp += renorm ? dg[k] / S - sg / (S * S) : dg[k];
      dz[i] += (float)(p[i] * (dp - dot));
    }
  }
}
