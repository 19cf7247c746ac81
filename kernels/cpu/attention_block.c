/*
 * attention_block.c — attention of a block of queries against a block of keys,
 * merged into a running result by log-sum-exp: the building block of ring
 * attention (context parallelism), forward and backward.
 *
 * Why blocks. Under context parallelism each rank holds a share of the sequence;
 * its queries must attend to keys and values held by the other ranks, which
 * arrive one block at a time around a ring. The softmax over all keys is
 * computed piecewise ("online softmax"): for one query row and one block of
 * keys j with scores s_j = scale q.k_j,
 *     m = max_j s_j,  l = sum_j exp(s_j - m),  o_blk = sum_j exp(s_j - m) v_j / l,
 *     lse_blk = m + log l          (the log of the block's softmax denominator)
 * and two partial results (o1, lse1), (o2, lse2) over disjoint key sets merge
 * exactly into the result over their union:
 *     lse = log(exp(lse1) + exp(lse2)) = M + log(exp(lse1 - M) + exp(lse2 - M)),
 *     o   = o1 exp(lse1 - lse) + o2 exp(lse2 - lse),       M = max(lse1, lse2).
 * Starting from (o, lse) = (0, -inf) the first merge just takes the block's
 * result. Nothing of size Tq x Tk is stored: the saved state is out and lse.
 *
 * Backward (the FlashAttention-2 recurrence), given the FINAL out and lse of
 * the whole attention and dout, for every block again:
 *     P_j  = exp(s_j - lse)                 (the softmax probabilities, exactly)
 *     D    = dout . out                     (= sum_j P_j dout.v_j)
 *     dS_j = P_j (dout . v_j - D)           (softmax backward)
 *     dq  += scale sum_j dS_j k_j,  dk_j += scale dS_j q,  dv_j += P_j dout.
 * The block's contributions are independent of the other blocks, so dk/dv can
 * be accumulated into a buffer that travels with the keys around the ring.
 *
 * Layouts (see cpu_kernels.h): rows of queries and of keys/values are strided so
 * that the same code reads a fused qkv buffer ([.., 3C] rows: q | k | v) or a
 * packed key/value buffer ([.., 2C] rows: k | v) received from another rank.
 */
#include <math.h>

#include "cpu_kernels.h"

/* Scores of query q against the visible keys of one (batch, head), into s[0..n);
 * returns n (the number of visible keys). */
static int block_scores(float *s, const float *q, const float *kv, int kv_stride, int hoff, int hs,
                        int t, int Tk, int causal, float scale) {
  int n = causal ? t + 1 : Tk;
  for (int j = 0; j < n; j++) {
    const float *k = kv + (size_t)j * kv_stride + hoff;
    float dot = 0.0f;
    for (int i = 0; i < hs; i++)
      dot += q[i] * k[i];
    s[j] = dot * scale;
  }
  return n;
}

void cpu_attention_block_forward(float *out, float *lse, const float *q, int q_stride,
                                 const float *kv, int kv_stride, int B, int Tq, int Tk, int C,
                                 int NH, int causal, float *scratch) {
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++) {
    const float *kvb = kv + (size_t)b * Tk * kv_stride;
    for (int h = 0; h < NH; h++) {
      const int hoff = h * hs;
      for (int t = 0; t < Tq; t++) {
        const float *qt = q + ((size_t)b * Tq + t) * q_stride + hoff;
        float *s = scratch;
        int n = block_scores(s, qt, kvb, kv_stride, hoff, hs, t, Tk, causal, scale);
        if (n == 0) continue;
        float m = -INFINITY;
        for (int j = 0; j < n; j++)
          if (s[j] > m) m = s[j];
        float l = 0.0f;
        for (int j = 0; j < n; j++) {
          s[j] = expf(s[j] - m);
          l += s[j];
        }
        float blk_lse = m + logf(l);
        float *lp = lse + ((size_t)b * NH + h) * Tq + t;
        float old = *lp;
        float M = old > blk_lse ? old : blk_lse;
        float new_lse = M + logf(expf(old - M) + expf(blk_lse - M));
        float keep = expf(old - new_lse);         /* 0 when old = -inf */
        float take = expf(blk_lse - new_lse) / l; /* normalizes the block too */
        float *o = out + ((size_t)b * Tq + t) * C + hoff;
        for (int i = 0; i < hs; i++)
          o[i] *= keep;
        for (int j = 0; j < n; j++) {
          const float *v = kvb + (size_t)j * kv_stride + C + hoff;
          float w = s[j] * take;
          for (int i = 0; i < hs; i++)
            o[i] += w * v[i];
        }
        *lp = new_lse;
      }
    }
  }
}

void cpu_attention_block_backward(float *dq, int dq_stride, float *dkv, int dkv_stride,
                                  const float *dout, const float *out, const float *lse,
                                  const float *q, int q_stride, const float *kv, int kv_stride,
                                  int B, int Tq, int Tk, int C, int NH, int causal,
                                  float *scratch) {
  const int hs = C / NH;
  const float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < B; b++) {
    const float *kvb = kv + (size_t)b * Tk * kv_stride;
    float *dkvb = dkv + (size_t)b * Tk * dkv_stride;
    for (int h = 0; h < NH; h++) {
      const int hoff = h * hs;
      for (int t = 0; t < Tq; t++) {
        size_t row = (size_t)b * Tq + t;
        const float *qt = q + row * q_stride + hoff;
        float *dqt = dq + row * dq_stride + hoff;
        const float *go = dout + row * C + hoff, *o = out + row * C + hoff;
        float L = lse[((size_t)b * NH + h) * Tq + t];
        float *p = scratch;
        int n = block_scores(p, qt, kvb, kv_stride, hoff, hs, t, Tk, causal, scale);
        float D = 0.0f;
        for (int i = 0; i < hs; i++)
          D += go[i] * o[i];
        for (int j = 0; j < n; j++) {
          const float *k = kvb + (size_t)j * kv_stride + hoff;
          const float *v = k + C;
          float *dk = dkvb + (size_t)j * dkv_stride + hoff;
          float *dv = dk + C;
          float pj = expf(p[j] - L);
          float dp = 0.0f;
          for (int i = 0; i < hs; i++) {
            dp += go[i] * v[i];
            dv[i] += pj * go[i];
          }
          float ds = pj * (dp - D) * scale;
          for (int i = 0; i < hs; i++) {
            dqt[i] += ds * k[i];
            dk[i] += ds * qt[i];
          }
        }
      }
    }
  }
}
