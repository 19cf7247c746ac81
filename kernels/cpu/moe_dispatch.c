/*
 * moe_dispatch.c — mixture-of-experts token dispatch and combine (reference): the routing
 * plan (which rows of the expert-grouped buffer hold which token), the permutation of token
 * rows into that buffer, and the weighted un-permutation back, forward and backward.
 *
 * The plan is a stable counting sort of the N K assignments (t, k) by expert: expert e's
 * rows are [offsets[e], offsets[e+1]), holding its tokens in token order (then k order), so
 * the layout is a pure function of the routing. Dropless (capacity < 0) keeps every
 * assignment; with capacity >= 0 an expert keeps its first `capacity` assignments in that
 * order and the others are dropped (row_of = -1: the token gets nothing from that expert,
 * only the residual carries it, as in Switch/GShard with a capacity factor).
 *
 * permute:   xp[r,:] = x[row_token[r],:]           backward: dx[row_token[r],:] += dxp[r,:]
 * unpermute: out[t,:] = sum_k gate[t,k] yp[row_of[t,k],:]   (dropped assignments add 0)
 *   backward: dyp[row,:] += gate[t,k] dout[t,:];  dgate[t,k] += <dout[t,:], yp[row,:]>.
 */
#include "cpu_kernels.h"

#include <string.h>

int cpu_moe_dispatch_plan(int *counts, int *offsets, int *row_token, int *row_of, const int *expert,
                          int N, int E, int K, int capacity) {
  int dropped = 0;
  for (int e = 0; e < E; e++)
    counts[e] = 0;
  for (size_t a = 0; a < (size_t)N * K; a++) { /* kept per expert, in assignment order */
    int e = expert[a];
    if (capacity >= 0 && counts[e] >= capacity) {
      row_of[a] = -1;
      dropped++;
    } else {
      row_of[a] = counts[e]++; /* rank within the expert for now */
    }
  }
  offsets[0] = 0;
  for (int e = 0; e < E; e++)
    offsets[e + 1] = offsets[e] + counts[e];
  for (size_t a = 0; a < (size_t)N * K; a++) {
    if (row_of[a] < 0) continue;
    row_of[a] += offsets[expert[a]];
    row_token[row_of[a]] = (int)(a / (size_t)K);
  }
  return dropped;
}

void cpu_moe_permute_forward(float *xp, const float *x, const int *row_token, int R, int C) {
  for (int r = 0; r < R; r++)
    memcpy(xp + (size_t)r * C, x + (size_t)row_token[r] * C, sizeof(float) * (size_t)C);
}

void cpu_moe_permute_backward(float *dx, const float *dxp, const int *row_token, int R, int C) {
  for (int r = 0; r < R; r++) {
    float *d = dx + (size_t)row_token[r] * C;
    const float *s = dxp + (size_t)r * C;
    for (int c = 0; c < C; c++)
      d[c] += s[c];
  }
}

void cpu_moe_unpermute_forward(float *out, const float *yp, const float *gate, const int *row_of,
                               int N, int K, int C) {
  for (int t = 0; t < N; t++) {
    float *o = out + (size_t)t * C;
    memset(o, 0, sizeof(float) * (size_t)C);
    for (int k = 0; k < K; k++) {
      int r = row_of[(size_t)t * K + k];
      if (r < 0) continue;
      float g = gate[(size_t)t * K + k];
      const float *y = yp + (size_t)r * C;
      for (int c = 0; c < C; c++)
        o[c] += g * y[c];
    }
  }
}

void cpu_moe_unpermute_backward(float *dyp, float *dgate, const float *dout, const float *yp,
                                const float *gate, const int *row_of, int N, int K, int C) {
  for (int t = 0; t < N; t++) {
    const float *d = dout + (size_t)t * C;
    for (int k = 0; k < K; k++) {
      int r = row_of[(size_t)t * K + k];
      if (r < 0) continue;
      float g = gate[(size_t)t * K + k];
      const float *y = yp + (size_t)r * C;
      float *dy = dyp + (size_t)r * C;
      double dot = 0;
      for (int c = 0; c < C; c++) {
        dy[c] += g * d[c];
        dot += (double)d[c] * y[c];
      }
      dgate[(size_t)t * K + k] += (float)dot;
    }
  }
}
