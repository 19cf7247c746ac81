/*
 * attention.c — causal multi-head self-attention, forward and backward.
 *
 * Layout. qkv [B,T,3C] holds, for every token, its query, key and value vectors one
 * after the other (q | k | v, each C = NH * hs wide); head h owns channels
 * h*hs .. h*hs+hs-1 of each. This is what one matmul with a [3C,C] weight produces.
 *
 * Forward, for each batch row b, head h and query position t:
 *     preatt[t2] = (q_t . k_t2) / sqrt(hs)                 for t2 <= t (causal mask)
 *     att[t2]    = exp(preatt[t2] - max) / sum exp(...)     softmax over t2 <= t
 *     out_t      = sum_{t2 <= t} att[t2] v_t2
 * Masked entries (t2 > t) are stored as 0 in both preatt and att, so the saved
 * tensors are fully defined. This is the textbook O(T^2) algorithm: the reference,
 * not the fast path (a flash-attention style kernel belongs to the CUDA backend).
 *
 * Backward, walking the forward in reverse for each (b, h, t):
 *     out_t = sum att[t2] v_t2   =>  datt[t2] = dout_t . v_t2,   dv_t2 += att[t2] dout_t
 *     softmax: with a = att, da = datt, the Jacobian da_i/dz_j = a_i (delta_ij - a_j)
 *              gives dpreatt[t2] = a[t2] (datt[t2] - sum_u a[u] datt[u])   (O(T), not O(T^2))
 *     preatt = scale q.k  =>  dq_t += scale sum dpreatt[t2] k_t2,  dk_t2 += scale dpreatt[t2] q_t
 * datt and dpreatt are scratch buffers of this function: written, not accumulated.
 */
#include <math.h>

#include "cpu_kernels.h"

void cpu_attention_forward(float *out, float *preatt, float *att, const float *qkv, int B, int T,
                           int C, int NH) {
  const int hs = C / NH;
  const size_t C3 = (size_t)3 * C;
  const float scale = 1.0f / sqrtf((float)hs);

  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      for (int t = 0; t < T; t++) {
        const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
        float *preatt_row = preatt + (((size_t)b * NH + h) * T + t) * T;
        float *att_row = att + (((size_t)b * NH + h) * T + t) * T;

        /* scores against every visible key, and their maximum */
        float maxval = -INFINITY;
        for (int t2 = 0; t2 <= t; t2++) {
          const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
          float dot = 0.0f;
          for (int i = 0; i < hs; i++)
            dot += q[i] * k[i];
          dot *= scale;
          preatt_row[t2] = dot;
          if (dot > maxval) maxval = dot;
        }

        /* softmax, shifted by the maximum so exp never overflows */
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          float e = expf(preatt_row[t2] - maxval);
          att_row[t2] = e;
          sum += e;
        }
        float inv = 1.0f / sum;
        for (int t2 = 0; t2 <= t; t2++)
          att_row[t2] *= inv;
        for (int t2 = t + 1; t2 < T; t2++) {
          preatt_row[t2] = 0.0f;
          att_row[t2] = 0.0f;
        }

        /* weighted sum of the values */
        float *o = out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++)
          o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) {
          const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * hs;
          float a = att_row[t2];
          for (int i = 0; i < hs; i++)
            o[i] += a * v[i];
        }
      }
    }
  }
}

void cpu_attention_backward(float *dqkv, float *dpreatt, float *datt, const float *dout,
                            const float *qkv, const float *att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const size_t C3 = (size_t)3 * C;
  const float scale = 1.0f / sqrtf((float)hs);

  for (int b = 0; b < B; b++) {
    for (int h = 0; h < NH; h++) {
      for (int t = 0; t < T; t++) {
        const float *att_row = att + (((size_t)b * NH + h) * T + t) * T;
        float *datt_row = datt + (((size_t)b * NH + h) * T + t) * T;
        float *dpreatt_row = dpreatt + (((size_t)b * NH + h) * T + t) * T;
        const float *q = qkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
        float *dq = dqkv + ((size_t)b * T + t) * C3 + (size_t)h * hs;
        const float *dout_t = dout + ((size_t)b * T + t) * C + (size_t)h * hs;

        /* through the weighted sum of values */
        for (int t2 = 0; t2 <= t; t2++) {
          const float *v = qkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * hs;
          float *dv = dqkv + ((size_t)b * T + t2) * C3 + 2 * (size_t)C + (size_t)h * hs;
          float a = att_row[t2];
          float dot = 0.0f;
          for (int i = 0; i < hs; i++) {
            dot += dout_t[i] * v[i];
            dv[i] += a * dout_t[i];
          }
          datt_row[t2] = dot;
        }

        /* through the softmax: a (datt - <a, datt>) */
        float weighted = 0.0f;
        for (int t2 = 0; t2 <= t; t2++)
          weighted += att_row[t2] * datt_row[t2];
        for (int t2 = 0; t2 <= t; t2++)
          dpreatt_row[t2] = att_row[t2] * (datt_row[t2] - weighted);
        for (int t2 = t + 1; t2 < T; t2++) {
          datt_row[t2] = 0.0f;
          dpreatt_row[t2] = 0.0f;
        }

        /* through the scaled dot products q.k */
        for (int t2 = 0; t2 <= t; t2++) {
          const float *k = qkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
          float *dk = dqkv + ((size_t)b * T + t2) * C3 + C + (size_t)h * hs;
          float d = dpreatt_row[t2] * scale;
          for (int i = 0; i < hs; i++) {
            dq[i] += d * k[i];
            dk[i] += d * q[i];
          }
        }
      }
    }
  }
}
