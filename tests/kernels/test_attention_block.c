/*
 * test_attention_block.c — the block attention of ring attention (attention_block.c)
 * against the full causal attention (attention.c).
 *
 * The sequence is cut into 4 chunks, as context parallelism does. For every query
 * chunk, the key chunks at or before it are merged one by one, in a scrambled order,
 * some read from a fused q|k|v buffer (stride 3C) and some from a packed k|v buffer
 * (stride 2C): the merged output must equal cpu_attention_forward's and the
 * log-sum-exp a double-precision reference. Backward: the per-block gradients, given
 * the final out and lse, summed over blocks, must equal cpu_attention_backward's dqkv
 * (itself checked by finite differences in test_attention.c); dk/dv accumulate
 * into per-chunk buffers as they do when they travel around the ring. A block
 * merged into an empty result (lse = -inf) is the block's own softmax.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

enum { B = 2, NCHUNK = 4, TC = 3, T = NCHUNK * TC, NH = 2, HS = 4, C = NH * HS };

/* chunk c's rows of a [B,T,W] buffer, as a [B,TC,W] buffer (the chunk-major layout) */
static void take_chunk(float *dst, const float *src, int c, int W) {
  for (int b = 0; b < B; b++)
    memcpy(dst + (size_t)b * TC * W, src + ((size_t)b * T + (size_t)c * TC) * W,
           sizeof(float) * TC * W);
}

static void put_chunk(float *dst, const float *src, int c, int W) {
  for (int b = 0; b < B; b++)
    memcpy(dst + ((size_t)b * T + (size_t)c * TC) * W, src + (size_t)b * TC * W,
           sizeof(float) * TC * W);
}

int test_attention_block(void) {
  int failures = 0;
  check_rng rng;
  check_rng_seed(&rng, 97);
  float *qkv = check_floats(B * T * 3 * C), *dout = check_floats(B * T * C);
  float *out_full = check_floats(B * T * C), *preatt = check_floats(B * NH * T * T),
        *att = check_floats(B * NH * T * T), *dqkv_full = check_floats(B * T * 3 * C),
        *dpreatt = check_floats(B * NH * T * T), *datt = check_floats(B * NH * T * T);
  check_fill_uniform(qkv, B * T * 3 * C, &rng, -2.0f, 2.0f);
  check_fill_uniform(dout, B * T * C, &rng, -1, 1);
  cpu_attention_forward(out_full, preatt, att, qkv, B, T, C, NH);
  cpu_attention_backward(dqkv_full, dpreatt, datt, dout, qkv, att, B, T, C, NH);

  /* per chunk: fused rows, packed k|v rows, the running result */
  float *qkv_c[NCHUNK], *kv_c[NCHUNK], *out_c[NCHUNK], *lse_c[NCHUNK], *dout_c[NCHUNK];
  float *dq_c[NCHUNK], *dkv_c[NCHUNK];
  float scratch[T];
  for (int c = 0; c < NCHUNK; c++) {
    qkv_c[c] = check_floats(B * TC * 3 * C);
    kv_c[c] = check_floats(B * TC * 2 * C);
    out_c[c] = check_floats(B * TC * C);
    lse_c[c] = check_floats(B * NH * TC);
    dout_c[c] = check_floats(B * TC * C);
    dq_c[c] = check_floats(B * TC * 3 * C);
    dkv_c[c] = check_floats(B * TC * 2 * C);
    take_chunk(qkv_c[c], qkv, c, 3 * C);
    take_chunk(dout_c[c], dout, c, C);
    for (int r = 0; r < B * TC; r++)
      memcpy(kv_c[c] + (size_t)r * 2 * C, qkv_c[c] + (size_t)r * 3 * C + C, sizeof(float) * 2 * C);
    for (int i = 0; i < B * NH * TC; i++)
      lse_c[c][i] = -INFINITY;
  }
  static const int order[NCHUNK] = {2, 0, 3, 1}; /* key chunks in a scrambled order */
  for (int qc = 0; qc < NCHUNK; qc++)
    for (int k = 0; k < NCHUNK; k++) {
      int kc = order[k];
      if (kc > qc) continue;
      const float *kv = kc % 2 ? qkv_c[kc] + C : kv_c[kc];
      int stride = kc % 2 ? 3 * C : 2 * C;
      cpu_attention_block_forward(out_c[qc], lse_c[qc], qkv_c[qc], 3 * C, kv, stride, B, TC, TC, C,
                                  NH, kc == qc, scratch);
    }

  /* the merged output is the full attention's */
  float *out_blocks = check_floats(B * T * C);
  double *want = malloc(sizeof(double) * B * T * 3 * C);
  if (!want) exit(1);
  for (int c = 0; c < NCHUNK; c++)
    put_chunk(out_blocks, out_c[c], c, C);
  for (int i = 0; i < B * T * C; i++)
    want[i] = out_full[i];
  failures +=
      check_close("block attention = full attention", out_blocks, want, B * T * C, 2e-5, 1e-6);

  /* lse = log sum_{j <= t} exp(q.k_j / sqrt(hs)), in double */
  float got_lse[B * NH * T];
  double want_lse[B * NH * T];
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * HS;
        double m = -INFINITY, s[T];
        for (int j = 0; j <= t; j++) {
          const float *kk = qkv + ((size_t)b * T + j) * 3 * C + C + h * HS;
          double d = 0;
          for (int i = 0; i < HS; i++)
            d += (double)q[i] * kk[i];
          s[j] = d / sqrt((double)HS);
          if (s[j] > m) m = s[j];
        }
        double sum = 0;
        for (int j = 0; j <= t; j++)
          sum += exp(s[j] - m);
        int idx = (b * NH + h) * T + t;
        want_lse[idx] = m + log(sum);
        got_lse[idx] = lse_c[t / TC][(b * NH + h) * TC + t % TC];
      }
  failures += check_close("block attention log-sum-exp", got_lse, want_lse, B * NH * T, 1e-5, 1e-6);

  /* backward: sum over blocks of the block gradients = the full attention's gradient */
  for (int qc = 0; qc < NCHUNK; qc++)
    for (int k = 0; k < NCHUNK; k++) {
      int kc = order[k];
      if (kc > qc) continue;
      cpu_attention_block_backward(dq_c[qc], 3 * C, dkv_c[kc], 2 * C, dout_c[qc], out_c[qc],
                                   lse_c[qc], qkv_c[qc], 3 * C, kv_c[kc], 2 * C, B, TC, TC, C, NH,
                                   kc == qc, scratch);
    }
  float *dqkv_blocks = check_floats(B * T * 3 * C);
  for (int c = 0; c < NCHUNK; c++) {
    /* q columns from dq, k|v columns from the travelling dkv */
    for (int r = 0; r < B * TC; r++)
      memcpy(dq_c[c] + (size_t)r * 3 * C + C, dkv_c[c] + (size_t)r * 2 * C, sizeof(float) * 2 * C);
    put_chunk(dqkv_blocks, dq_c[c], c, 3 * C);
  }
  for (int i = 0; i < B * T * 3 * C; i++)
    want[i] = dqkv_full[i];
  failures += check_close("block attention backward = full backward", dqkv_blocks, want,
                          B * T * 3 * C, 1e-4, 1e-5);

  /* one non-causal block into an empty result: the plain softmax over the block */
  {
    float o[B * TC * C], l[B * NH * TC];
    memset(o, 0, sizeof o);
    for (int i = 0; i < B * NH * TC; i++)
      l[i] = -INFINITY;
    cpu_attention_block_forward(o, l, qkv_c[3], 3 * C, kv_c[1], 2 * C, B, TC, TC, C, NH, 0,
                                scratch);
    double ref[B * TC * C];
    for (int b = 0; b < B; b++)
      for (int h = 0; h < NH; h++)
        for (int t = 0; t < TC; t++) {
          const float *q = qkv_c[3] + ((size_t)b * TC + t) * 3 * C + h * HS;
          double s[TC], m = -INFINITY, sum = 0;
          for (int j = 0; j < TC; j++) {
            const float *kk = kv_c[1] + ((size_t)b * TC + j) * 2 * C + h * HS;
            double d = 0;
            for (int i = 0; i < HS; i++)
              d += (double)q[i] * kk[i];
            s[j] = d / sqrt((double)HS);
            if (s[j] > m) m = s[j];
          }
          for (int j = 0; j < TC; j++)
            sum += (s[j] = exp(s[j] - m));
          for (int i = 0; i < HS; i++) {
            double acc = 0;
            for (int j = 0; j < TC; j++)
              acc += s[j] / sum * kv_c[1][((size_t)b * TC + j) * 2 * C + C + h * HS + i];
            ref[((size_t)b * TC + t) * C + h * HS + i] = acc;
          }
        }
    failures += check_close("one full block = its softmax", o, ref, B * TC * C, 1e-5, 1e-6);
  }

  for (int c = 0; c < NCHUNK; c++) {
    float *per[] = {qkv_c[c], kv_c[c], out_c[c], lse_c[c], dout_c[c], dq_c[c], dkv_c[c]};
    for (size_t i = 0; i < sizeof per / sizeof per[0]; i++)
      free(per[i]);
  }
  float *to_free[] = {qkv,       dout,    out_full, preatt,     att,
                      dqkv_full, dpreatt, datt,     out_blocks, dqkv_blocks};
  for (size_t i = 0; i < sizeof to_free / sizeof to_free[0]; i++)
    free(to_free[i]);
  free(want);
  return failures;
}
