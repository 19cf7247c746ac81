/*
 * test_attention_block.c — ring attention's CUDA block kernels (kernels/cuda/
 * attention_block.cu) against the CPU reference (kernels/cpu/attention_block.c).
 *
 * How it works: for each shape, a query block of Tq rows attends to several key
 * blocks the way ring attention uses them: a diagonal block (causal, Tq == Tk) and
 * earlier blocks (full), plus, outside what the ring does but inside the operation's
 * contract, a full block with Tk != Tq. The queries sit in a fused [B,Tq,3C] qkv buffer
 * (stride 3C); the diagonal block's keys and values are that qkv's k|v columns (stride
 * 3C), the other blocks packed [B,Tk,2C] buffers (stride 2C), as received from another
 * rank. Forward: both sides start from out = 0, lse = -inf and merge every block in the
 * same scrambled order; out and lse are compared. Backward: both sides get the CPU's
 * final out/lse and the same dout, dq (inside a [B,Tq,3C] dqkv, stride 3C) and every
 * block's dkv start from the same random values (accumulation is checked), the blocks
 * run in another scrambled order, and the accumulated increments (result - start) are
 * compared, so the starting values cannot hide an error.
 * Error measure: max_i |gpu_i - ref_i| / max_i |ref_i| (normalized maximum error).
 * Tolerances:
 *   - fp32 contexts (the fp32 warp-per-row kernels): 1e-4 forward, 1e-4 backward
 *     (fp32 everywhere; only summation order and expf/logf differ);
 *   - bf16/tf32 contexts with head size 16/32/64/128 (bf16 WMMA tiles: Q, K, V, dout,
 *     P, dS rounded to 8-bit mantissas, fp32 accumulation): 2e-2 forward, 3e-2 backward
 *     (the fused causal attention's tolerances in test_cuda_kernels.c); other head sizes
 *     in those contexts take the fp32 kernels and get the fp32 tolerances.
 *   - lse is compared with the same measure (values around log Tk).
 * Activation storage: bf16 contexts run every shape twice, with fp32 and with bf16
 * activations (kcuda_ctx_set_act_dtype). With bf16 storage the inputs (q, k, v, dout, the
 * backward's out, the start values of dq/dkv) are the reference's inputs rounded to bf16,
 * so both sides compute on the same values; the device rounds out at every merge and
 * dq/dkv at every backward call (read, add in fp32, store rounded). A rounding moves a
 * value x by at most 2^-8 |x| (bf16's unit roundoff), so each element's difference is
 * first reduced by 2^-8 x the sum of the magnitudes stored into it along the reference's
 * chain of calls; the rest is held to the tolerances above (the raw error is printed too).
 * tests/gpu/test_attention_block_emu.cpp runs the same comparison on a CPU emulation.
 * Exit status: 0 all passed, 1 a failure, 77 (SKIP) without a CUDA device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cuda_kernels.h"

#define MAX_BLOCKS 6

static int failures;
static unsigned long long rng_state = 0x9E3779B97F4A7C15ull;

static float frand(void) /* uniform in [-1, 1) */
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static void *xmalloc(size_t bytes) {
  void *p = malloc(bytes ? bytes : 1);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

static float *host_random(size_t n, float scale) {
  float *x = xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++)
    x[i] = frand() * scale;
  return x;
}

static float *host_copy(const float *x, size_t n) {
  float *y = xmalloc(n * sizeof *y);
  memcpy(y, x, n * sizeof *y);
  return y;
}

static void check_cuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

/* bf16 <-> fp32 on the host: round to nearest even on the float's bits (NaN stays NaN) */
static uint16_t bf16_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float bf16_value(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* Rounds host values to what the activation type holds (bf16: in place; fp32: nothing). */
static void round_act(float *x, size_t n, kcuda_act_dtype act) {
  if (act == KCUDA_ACT_BF16)
    for (size_t i = 0; i < n; i++)
      x[i] = bf16_value(bf16_bits(x[i]));
}

static void upload(void *dev, const float *host, size_t n, kcuda_act_dtype act) {
  if (act == KCUDA_ACT_BF16) {
    uint16_t *b = xmalloc(n * 2);
    for (size_t i = 0; i < n; i++)
      b[i] = bf16_bits(host[i]);
    check_cuda(cudaMemcpy(dev, b, n * 2, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    free(b);
    return;
  }
  check_cuda(cudaMemcpy(dev, host, n * 4, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

/* n values on the device as the activation type (fp32 for lse: KCUDA_ACT_F32). */
static void *to_device(const float *host, size_t n, kcuda_act_dtype act) {
  void *d = NULL;
  size_t es = act == KCUDA_ACT_BF16 ? 2 : 4;
  check_cuda(cudaMalloc(&d, n ? n * es : 1), "cudaMalloc");
  upload(d, host, n, act);
  return d;
}

static float *from_device(const void *dev, size_t n, kcuda_act_dtype act) {
  float *h = xmalloc(n * sizeof *h);
  check_cuda(cudaDeviceSynchronize(), "kernel execution");
  if (act == KCUDA_ACT_BF16) {
    uint16_t *b = xmalloc(n ? n * 2 : 1);
    check_cuda(cudaMemcpy(b, dev, n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    for (size_t i = 0; i < n; i++)
      h[i] = bf16_value(b[i]);
    free(b);
    return h;
  }
  check_cuda(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return h;
}

/* Normalized max error of (gpu - base) against (ref - base) (base NULL: plain values).
 * stored (bf16 storage, else NULL): per element, the sum of the magnitudes stored into it
 * along the reference's chain of calls; 2^-8 of it is subtracted from the element's
 * difference first (what the storage's roundings alone can cause). */
static void expect_close(const char *what, const float *gpu, const float *ref, const float *base,
                         size_t n, double tol, const double *stored) {
  double maxref = 0, maxdiff = 0, maxraw = 0;
  size_t worst = 0;
  int nonfinite = 0;
  for (size_t i = 0; i < n; i++) {
    double g = gpu[i] - (base ? base[i] : 0.0f), r = ref[i] - (base ? base[i] : 0.0f);
    double d = fabs(g - r) - (stored ? ldexp(stored[i], -8) : 0.0);
    if (!isfinite(gpu[i])) nonfinite = 1;
    if (fabs(r) > maxref) maxref = fabs(r);
    if (fabs(g - r) > maxraw) maxraw = fabs(g - r);
    if (d > maxdiff) {
      maxdiff = d;
      worst = i;
    }
  }
  double norm = maxref > 1e-6 ? maxref : 1e-6, err = maxdiff / norm;
  int ok = !nonfinite && err <= tol;
  char raw[48] = "";
  if (stored) snprintf(raw, sizeof raw, " (raw %.3e)", maxraw / norm);
  printf("%s %-58s err %.3e%s (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, err, raw, tol,
         nonfinite ? " non-finite values" : "");
  if (!ok) {
    printf("     worst at %zu: gpu %.8g ref %.8g\n", worst, gpu[worst], ref[worst]);
    failures++;
  }
}

static void ck(kcuda_ctx *k, int rc, const char *what) {
  if (rc != 0) {
    printf("FAIL %s: %s\n", what, kcuda_error(k));
    failures++;
  }
}

/* One key block: its length, whether it is the causal diagonal, and where it lives. */
typedef struct key_block {
  int Tk, causal, in_qkv; /* in_qkv: the k|v columns of the qkv buffer (stride 3C) */
  float *h_kv;            /* packed [B,Tk,2C] (NULL when in_qkv) */
  void *d_kv;
  float *h_dkv0, *h_dkv; /* start values, CPU result [B,Tk,2C] */
  void *d_dkv;           /* device buffer */
  double *stored;        /* bf16 storage: magnitudes stored into dkv (expect_close) */
} key_block;

/* A fixed scrambled order of nb blocks, different for each `salt`. */
static void scrambled(int *order, int nb, int salt) {
  for (int i = 0; i < nb; i++)
    order[i] = i;
  for (int i = nb - 1; i > 0; i--) {
    int j = (i * 7 + salt * 3 + 1) % (i + 1);
    int t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
}

/* Sum of magnitudes stored: acc[i] += |x[i]| (for expect_close's rounding allowance). */
static void add_stored(double *acc, const float *x, size_t n) {
  for (size_t i = 0; i < n; i++)
    acc[i] += fabs(x[i]);
}

/* B sequences, Tq queries; `full` earlier full blocks of Tq keys, the diagonal block, and
 * (if extra_tk > 0) one full block of extra_tk keys. Activations in the context's type. */
static void test_blocks(kcuda_ctx *k, kcuda_precision p, int B, int Tq, int C, int NH, int full,
                        int extra_tk) {
  const kcuda_act_dtype act = kcuda_ctx_act_dtype(k);
  const int bf = act == KCUDA_ACT_BF16;
  const size_t es = bf ? 2 : 4; /* bytes per activation */
  int path = kcuda_attention_block_path(p, B, C, NH);
  int tc = path == KCUDA_BLOCK_TENSOR_CORES;
  double tol_f = tc ? 2e-2 : 1e-4, tol_b = tc ? 3e-2 : 1e-4;
  const size_t C3 = 3 * (size_t)C, C2 = 2 * (size_t)C;
  const size_t nq = (size_t)B * Tq, nl = (size_t)B * NH * Tq;
  key_block blk[MAX_BLOCKS];
  int nb = 0;
  for (int i = 0; i < full; i++)
    blk[nb++] = (key_block){.Tk = Tq};
  blk[nb++] = (key_block){.Tk = Tq, .causal = 1, .in_qkv = 1};
  if (extra_tk > 0) blk[nb++] = (key_block){.Tk = extra_tk};
  /* inputs: scale 1 keeps the softmax peaked enough that blocks matter unevenly; rounded
   * to the storage type so that the reference computes on what the device reads */
  float *h_qkv = host_random(nq * C3, 1.0f);
  round_act(h_qkv, nq * C3, act);
  void *d_qkv = to_device(h_qkv, nq * C3, act);
  for (int i = 0; i < nb; i++) {
    size_t n = (size_t)B * blk[i].Tk * C2;
    if (!blk[i].in_qkv) {
      blk[i].h_kv = host_random(n, 1.0f);
      round_act(blk[i].h_kv, n, act);
      blk[i].d_kv = to_device(blk[i].h_kv, n, act);
    }
    blk[i].h_dkv0 = host_random(n, 0.5f);
    round_act(blk[i].h_dkv0, n, act);
    blk[i].h_dkv = host_copy(blk[i].h_dkv0, n);
    blk[i].d_dkv = to_device(blk[i].h_dkv0, n, act);
    blk[i].stored = calloc(n ? n : 1, sizeof(double));
    if (!blk[i].stored) {
      fprintf(stderr, "out of memory\n");
      exit(1);
    }
  }
  int maxTk = Tq > extra_tk ? Tq : extra_tk;
  float *scratch = xmalloc((size_t)maxTk * sizeof(float));
  double *out_stored = calloc(nq * C, sizeof(double)), *dq_stored = calloc(nq * C3, sizeof(double));
  if (!out_stored || !dq_stored) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  char name[160], label[32];
  snprintf(label, sizeof label, "%s/%s %s", kcuda_precision_name(p), bf ? "bf16" : "fp32",
           tc ? "tc " : "f32");

  /* ---- forward: merge every block in a scrambled order ---- */
  float *h_out = xmalloc(nq * C * sizeof(float)), *h_lse = xmalloc(nl * 4);
  for (size_t i = 0; i < nq * C; i++)
    h_out[i] = 0.0f;
  for (size_t i = 0; i < nl; i++)
    h_lse[i] = -INFINITY;
  void *d_out = to_device(h_out, nq * C, act);
  float *d_lse = to_device(h_lse, nl, KCUDA_ACT_F32);
  int order[MAX_BLOCKS];
  scrambled(order, nb, B + Tq);
  for (int oi = 0; oi < nb; oi++) {
    key_block *kb = &blk[order[oi]];
    const float *hk = kb->in_qkv ? h_qkv + C : kb->h_kv;
    const void *dk = kb->in_qkv ? (const char *)d_qkv + C * es : kb->d_kv;
    int ks = kb->in_qkv ? (int)C3 : (int)C2;
    cpu_attention_block_forward(h_out, h_lse, h_qkv, (int)C3, hk, ks, B, Tq, kb->Tk, C, NH,
                                kb->causal, scratch);
    add_stored(out_stored, h_out, nq * C);
    ck(k,
       kcuda_attention_block_forward(k, d_out, d_lse, d_qkv, (int)C3, dk, ks, B, Tq, kb->Tk, C, NH,
                                     kb->causal),
       "attention block forward");
  }
  snprintf(name, sizeof name, "%s fwd out  B=%d Tq=%d C=%d NH=%d blocks=%d", label, B, Tq, C, NH,
           nb);
  float *g = from_device(d_out, nq * C, act);
  expect_close(name, g, h_out, NULL, nq * C, tol_f, bf ? out_stored : NULL);
  free(g);
  snprintf(name, sizeof name, "%s fwd lse  B=%d Tq=%d C=%d NH=%d", label, B, Tq, C, NH);
  g = from_device(d_lse, nl, KCUDA_ACT_F32);
  expect_close(name, g, h_lse, NULL, nl, tol_f, NULL);
  free(g);

  /* ---- backward from the CPU's final out (as stored) and lse, another scrambled order ---- */
  round_act(h_out, nq * C, act);
  upload(d_out, h_out, nq * C, act);
  upload(d_lse, h_lse, nl, KCUDA_ACT_F32);
  float *h_dout = host_random(nq * C, 1.0f);
  round_act(h_dout, nq * C, act);
  void *d_dout = to_device(h_dout, nq * C, act);
  float *h_dqkv0 = host_random(nq * C3, 0.5f);
  round_act(h_dqkv0, nq * C3, act);
  float *h_dqkv = host_copy(h_dqkv0, nq * C3);
  void *d_dqkv = to_device(h_dqkv0, nq * C3, act);
  scrambled(order, nb, B * 5 + Tq + 1);
  for (int oi = 0; oi < nb; oi++) {
    key_block *kb = &blk[order[oi]];
    const float *hk = kb->in_qkv ? h_qkv + C : kb->h_kv;
    const void *dk = kb->in_qkv ? (const char *)d_qkv + C * es : kb->d_kv;
    int ks = kb->in_qkv ? (int)C3 : (int)C2;
    cpu_attention_block_backward(h_dqkv, (int)C3, kb->h_dkv, (int)C2, h_dout, h_out, h_lse, h_qkv,
                                 (int)C3, hk, ks, B, Tq, kb->Tk, C, NH, kb->causal, scratch);
    add_stored(dq_stored, h_dqkv, nq * C3);
    add_stored(kb->stored, kb->h_dkv, (size_t)B * kb->Tk * C2);
    ck(k,
       kcuda_attention_block_backward(k, d_dqkv, (int)C3, kb->d_dkv, (int)C2, d_dout, d_out, d_lse,
                                      d_qkv, (int)C3, dk, ks, B, Tq, kb->Tk, C, NH, kb->causal),
       "attention block backward");
  }
  /* dq (and the untouched k|v columns of dqkv: they must keep their start values) */
  snprintf(name, sizeof name, "%s bwd dq (accumulates)  B=%d Tq=%d", label, B, Tq);
  g = from_device(d_dqkv, nq * C3, act);
  expect_close(name, g, h_dqkv, h_dqkv0, nq * C3, tol_b, bf ? dq_stored : NULL);
  int untouched = 1;
  for (size_t r = 0; r < nq; r++)
    for (size_t c = C; c < C3; c++)
      untouched &= g[r * C3 + c] == h_dqkv0[r * C3 + c];
  if (!untouched) {
    printf("FAIL %s: the k|v columns of dqkv were written\n", name);
    failures++;
  }
  free(g);
  for (int i = 0; i < nb; i++) {
    size_t n = (size_t)B * blk[i].Tk * C2;
    snprintf(name, sizeof name, "%s bwd dkv block %d (Tk=%d%s, accumulates)", label, i, blk[i].Tk,
             blk[i].causal ? ", causal" : "");
    g = from_device(blk[i].d_dkv, n, act);
    expect_close(name, g, blk[i].h_dkv, blk[i].h_dkv0, n, tol_b, bf ? blk[i].stored : NULL);
    free(g);
  }

  for (int i = 0; i < nb; i++) {
    free(blk[i].h_kv);
    free(blk[i].h_dkv0);
    free(blk[i].h_dkv);
    free(blk[i].stored);
    if (blk[i].d_kv) cudaFree(blk[i].d_kv);
    cudaFree(blk[i].d_dkv);
  }
  free(h_qkv);
  free(h_out);
  free(h_lse);
  free(h_dout);
  free(h_dqkv0);
  free(h_dqkv);
  free(scratch);
  free(out_stored);
  free(dq_stored);
  cudaFree(d_qkv);
  cudaFree(d_out);
  cudaFree(d_lse);
  cudaFree(d_dout);
  cudaFree(d_dqkv);
}

/* A bad argument is a message, not a crash; an empty shape does nothing. */
static void test_errors(kcuda_ctx *k) {
  int rc = kcuda_attention_block_forward(k, NULL, NULL, NULL, 30, NULL, 60, 1, 4, 4, 10, 3, 1);
  int ok = rc != 0 && strstr(kcuda_error(k), "multiple") != NULL;
  printf("%s C %% NH != 0 is refused: %s\n", ok ? "ok  " : "FAIL", kcuda_error(k));
  failures += !ok;
  rc = kcuda_attention_block_forward(k, NULL, NULL, NULL, 8, NULL, 8, 1, 4, 4, 8, 2, 0);
  ok = rc != 0 && strstr(kcuda_error(k), "stride") != NULL;
  printf("%s a kv stride below 2C is refused: %s\n", ok ? "ok  " : "FAIL", kcuda_error(k));
  failures += !ok;
  rc = kcuda_attention_block_backward(k, NULL, 24, NULL, 16, NULL, NULL, NULL, NULL, 24, NULL, 16,
                                      2, 0, 5, 8, 2, 1);
  ok = rc == 0;
  printf("%s Tq = 0 is a no-op\n", ok ? "ok  " : "FAIL");
  failures += !ok;
  if (kcuda_ctx_precision(k) != KCUDA_BF16) {
    ok = kcuda_ctx_set_act_dtype(k, KCUDA_ACT_BF16) != 0 && kcuda_ctx_act_dtype(k) == KCUDA_ACT_F32;
    printf("%s bf16 activations are refused in a %s context\n", ok ? "ok  " : "FAIL",
           kcuda_precision_name(kcuda_ctx_precision(k)));
    failures += !ok;
  }
}

int main(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 77;
  }
  struct cudaDeviceProp prop;
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  cudaStream_t stream;
  check_cuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  kcuda_precision precisions[3] = {KCUDA_FP32, KCUDA_BF16, KCUDA_TF32};
  for (int pi = 0; pi < 3; pi++) {
    char err[256];
    kcuda_ctx *k = kcuda_ctx_create(stream, precisions[pi], err, sizeof err);
    if (!k) {
      printf("FAIL kcuda_ctx_create: %s\n", err);
      return 1;
    }
    printf("-- precision %s\n", kcuda_precision_name(precisions[pi]));
    if (precisions[pi] == KCUDA_TF32) {
      test_blocks(k, precisions[pi], 2, 70, 128, 2, 1, 0); /* same tiles as bf16 */
      kcuda_ctx_destroy(k);
      continue;
    }
    if (pi == 0) test_errors(k);
    /* bf16 contexts: fp32 activations, then bf16 activations */
    for (int bf = 0; bf <= (precisions[pi] == KCUDA_BF16); bf++) {
      if (kcuda_ctx_set_act_dtype(k, bf ? KCUDA_ACT_BF16 : KCUDA_ACT_F32) != 0) {
        printf("FAIL kcuda_ctx_set_act_dtype: %s\n", kcuda_error(k));
        failures++;
        continue;
      }
      printf("-- activations %s\n", bf ? "bf16" : "fp32");
      kcuda_precision p = precisions[pi];
      /*          B   Tq    C  NH full extra_tk */
      test_blocks(k, p, 2, 64, 64, 4, 2, 0);    /* hs 16, one whole tile */
      test_blocks(k, p, 1, 67, 128, 2, 2, 29);  /* hs 64, partial tiles */
      test_blocks(k, p, 3, 100, 64, 2, 1, 131); /* hs 32, Tk 131 */
      test_blocks(k, p, 1, 130, 256, 2, 1, 0);  /* hs 128, three tiles */
      test_blocks(k, p, 2, 16, 96, 6, 3, 5);    /* hs 16, tiny blocks */
      test_blocks(k, p, 2, 33, 96, 2, 1, 40);   /* hs 48: the fp32 kernels */
      test_blocks(k, p, 1, 1, 64, 2, 2, 3);     /* one query row */
      test_blocks(k, p, 1, 20, 400, 2, 1, 0);   /* hs 200: fp32, 7 per lane */
    }
    kcuda_ctx_destroy(k);
  }
  cudaStreamDestroy(stream);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
