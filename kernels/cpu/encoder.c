/*
 * encoder.c — token + position embedding, forward and backward.
 *
 * The first layer of the GPT: each token id selects a row of the token embedding
 * table wte [V,C], and each position t selects row t of the position table wpe
 * [maxT,C]; the two are added:
 *
 *     out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
 *
 * Backward is the transpose of that gather: a scatter-add. Row tokens[b,t] of dwte
 * and row t of dwpe each receive dout[b,t,:]. Several positions may hold the same
 * token, and every batch row uses every position, so both are sums (+=) and order
 * matters only at the level of float rounding; we walk b, t in order so results are
 * deterministic.
 */
#include "cpu_kernels.h"

void cpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                         int T, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      float *out_bt = out + ((size_t)b * T + t) * C;
      const float *wte_row = wte + (size_t)tokens[b * T + t] * C;
      const float *wpe_row = wpe + (size_t)t * C;
      for (int c = 0; c < C; c++)
        out_bt[c] = wte_row[c] + wpe_row[c];
    }
  }
}

void cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                          int T, int C) {
  for (int b = 0; b < B; b++) {
    for (int t = 0; t < T; t++) {
      const float *dout_bt = dout + ((size_t)b * T + t) * C;
      float *dwte_row = dwte + (size_t)tokens[b * T + t] * C;
      float *dwpe_row = dwpe + (size_t)t * C;
      for (int c = 0; c < C; c++) {
        dwte_row[c] += dout_bt[c];
        dwpe_row[c] += dout_bt[c];
      }
    }
  }
}
