/*
 * test_cuda_kernels.c — every CUDA kernel of kernels/cuda against its plain-C
 * reference (kernels/cpu) on small shapes, in fp32 and bf16 GEMM precision.
 *
 * How it works: each case fills host inputs from a fixed-seed generator, runs the
 * reference on the host and the CUDA kernel on device copies of the same inputs
 * (gradients start from the same non-zero values, so accumulation is checked too),
 * copies the results back and compares them with a normalized maximum error
 *     err = max_i |gpu_i - ref_i| / max(max_i |ref_i|, 1e-6).
 * Stated tolerances (one table below):
 *   - element-wise kernels, LayerNorm, softmax/cross-entropy, AdamW, sums: 1e-5
 *     (fp32 everywhere; only the order of additions and expf/tanhf differ);
 *   - GEMM-based kernels (matmul, attention) in fp32 mode: 1e-5;
 *   - the same in bf16 mode (operands rounded to 8-bit mantissas, fp32
 *     accumulation): 2e-2; TF32 (10-bit mantissas): 5e-3;
 *   - the fused (flash) attention, always bf16 tensor cores: 2e-2 forward, 3e-2 dqkv.
 * Activation storage: every kernel of act_kernels.cuh, the linear layers and both
 * attention paths (GEMM and fused; ring attention's blocks are in test_attention_block.c)
 * run again in a bf16-precision context with bf16 activations (kcuda_ctx_set_act_dtype).
 * Their activation inputs are the reference's inputs rounded to bf16 (so the reference
 * sees what the kernel sees) and every buffer is read back widened to fp32. Tolerances:
 * outputs stored in bf16 by element-wise, LayerNorm, encoder and cross-entropy kernels
 * 1e-2 (one rounding: at most 2^-8 = 3.9e-3 of the value); fp32 outputs computed from
 * bf16 inputs (losses, mean/rstd, parameter gradients) as in fp32 storage; GEMMs and
 * attention 2e-2 as in bf16 precision (fused attention 2e-2 / 3e-2 as above).
 * Element-wise kernels also run on device pointers one element past an allocation's start
 * (the kernels' scalar path instead of 16-byte vectors).
 * Exit status: 0 all passed, 1 a failure, 77 (SKIP) when no CUDA device is present.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cuda_kernels.h"

static int failures;
static unsigned long long rng_state = 0x2545F4914F6CDD1Dull;

static float frand(void) /* uniform in [-1, 1) */
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (float)((rng_state >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

static float *host_random(size_t n, float scale) {
  float *x = malloc(n * sizeof *x);
  if (!x) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    x[i] = frand() * scale;
  return x;
}

static float *host_copy(const float *x, size_t n) {
  float *y = malloc(n * sizeof *y);
  if (!y) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memcpy(y, x, n * sizeof *y);
  return y;
}

static void check_cuda(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
    exit(1);
  }
}

static void *to_device(const void *host, size_t bytes) {
  void *d = NULL;
  check_cuda(cudaMalloc(&d, bytes ? bytes : 1), "cudaMalloc");
  if (host)
    check_cuda(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  else
    check_cuda(cudaMemset(d, 0, bytes ? bytes : 1), "cudaMemset");
  return d;
}

static float *from_device(const void *dev, size_t n) {
  float *h = malloc(n * sizeof *h);
  if (!h) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  check_cuda(cudaDeviceSynchronize(), "kernel execution");
  check_cuda(cudaMemcpy(h, dev, n * sizeof *h, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  return h;
}

/* Compares n values; frees gpu. */
static void expect_close(const char *what, float *gpu, const float *ref, size_t n, double tol) {
  double maxref = 0, maxdiff = 0;
  size_t worst = 0;
  int nonfinite = 0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(gpu[i])) nonfinite = 1;
    double d = fabs((double)gpu[i] - ref[i]);
    if (fabs(ref[i]) > maxref) maxref = fabs(ref[i]);
    if (d > maxdiff) {
      maxdiff = d;
      worst = i;
    }
  }
  double err = maxdiff / (maxref > 1e-6 ? maxref : 1e-6);
  int ok = !nonfinite && err <= tol;
  printf("%s %-44s err %.3e (tol %.0e)%s\n", ok ? "ok  " : "FAIL", what, err, tol,
         nonfinite ? " non-finite values" : "");
  if (!ok) {
    printf("     worst at %zu: gpu %.8g ref %.8g\n", worst, gpu[worst], ref[worst]);
    failures++;
  }
  free(gpu);
}

#define TOL_EXACT 1e-5

static double gemm_tol(kcuda_precision p) {
  return p == KCUDA_BF16 ? 2e-2 : p == KCUDA_TF32 ? 5e-3 : 1e-5;
}

static void ck(kcuda_ctx *k, int rc, const char *what) {
  if (rc != 0) {
    printf("FAIL %s: %s\n", what, kcuda_error(k));
    failures++;
  }
}

/* ---- activation storage (fp32 or bf16, the context's type) ------------------------------- */

static int act_bf16; /* the storage type of the context under test */

static unsigned short bf16_bits(float f) /* round to nearest even, like __float2bfloat16_rn */
{
  unsigned u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

static float bf16_value(unsigned short h) {
  unsigned u = (unsigned)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static size_t act_bytes(size_t n) {
  return n * (act_bf16 ? 2 : 4);
}

/* Rounds host values in place to what the activation type stores (the reference's inputs). */
static float *act_round(float *x, size_t n) {
  if (act_bf16)
    for (size_t i = 0; i < n; i++)
      x[i] = bf16_value(bf16_bits(x[i]));
  return x;
}

/* A device activation buffer holding x (n values; NULL: zeros) in the context's type. */
static void *act_to_device(const float *x, size_t n) {
  if (!act_bf16 || !x) return to_device(x, act_bytes(n));
  unsigned short *h = malloc(n * 2 + 2);
  if (!h) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++)
    h[i] = bf16_bits(x[i]);
  void *d = to_device(h, n * 2);
  free(h);
  return d;
}

/* n activations from the device, widened to fp32 (caller frees). */
static float *act_from_device(const void *dev, size_t n) {
  if (!act_bf16) return from_device(dev, n);
  unsigned short *h = malloc(n * 2 + 2);
  float *f = malloc(n * sizeof *f + 4);
  if (!h || !f) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  check_cuda(cudaDeviceSynchronize(), "kernel execution");
  check_cuda(cudaMemcpy(h, dev, n * 2, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
  for (size_t i = 0; i < n; i++)
    f[i] = bf16_value(h[i]);
  free(h);
  return f;
}

/* Tolerance of an activation output stored by a non-GEMM kernel. */
static double act_tol(void) {
  return act_bf16 ? 1e-2 : TOL_EXACT;
}

static const char *act_name(void) {
  return act_bf16 ? "bf16 act" : "fp32 act";
}

/* ---- cases ------------------------------------------------------------------------------ */

static void test_encoder(kcuda_ctx *k, int C) {
  int B = 3, T = 7, V = 11;
  int tokens[21];
  for (int i = 0; i < B * T; i++)
    tokens[i] = (i * 7 + 3) % V; /* repeats, so dwte rows get several contributions */
  size_t n = (size_t)B * T * C;
  float *wte = host_random((size_t)V * C, 1), *wpe = host_random((size_t)T * C, 1);
  float *out = malloc(sizeof(float) * n);
  cpu_encoder_forward(out, tokens, wte, wpe, B, T, C);
  int *dtok = to_device(tokens, sizeof tokens);
  float *dwte_w = to_device(wte, sizeof(float) * V * C),
        *dwpe_w = to_device(wpe, sizeof(float) * T * C);
  void *dout = act_to_device(NULL, n);
  ck(k, kcuda_encoder_forward(k, dout, dtok, dwte_w, dwpe_w, B, T, C), "encoder_forward");
  char name[96];
  snprintf(name, sizeof name, "encoder_forward %s C=%d", act_name(), C);
  expect_close(name, act_from_device(dout, n), out, n, act_tol());
  float *g = act_round(host_random(n, 1), n);
  float *gw = host_random((size_t)V * C, 1), *gp = host_random((size_t)T * C, 1);
  void *d_g = act_to_device(g, n);
  float *d_gw = to_device(gw, sizeof(float) * V * C), *d_gp = to_device(gp, sizeof(float) * T * C);
  cpu_encoder_backward(gw, gp, g, tokens, B, T, C);
  ck(k, kcuda_encoder_backward(k, d_gw, d_gp, d_g, dtok, B, T, C), "encoder_backward");
  expect_close("encoder_backward dwte (accumulates)", from_device(d_gw, (size_t)V * C), gw,
               (size_t)V * C, TOL_EXACT);
  expect_close("encoder_backward dwpe (accumulates)", from_device(d_gp, (size_t)T * C), gp,
               (size_t)T * C, TOL_EXACT);
  cudaFree(dtok);
  cudaFree(dwte_w);
  cudaFree(dwpe_w);
  cudaFree(dout);
  cudaFree(d_g);
  cudaFree(d_gw);
  cudaFree(d_gp);
  free(wte);
  free(wpe);
  free(out);
  free(g);
  free(gw);
  free(gp);
}

static void test_layernorm(kcuda_ctx *k, int N, int C) {
  size_t n = (size_t)N * C;
  float *x = host_random(n, 2), *w = host_random((size_t)C, 1), *b = host_random((size_t)C, 1);
  for (size_t i = 0; i < n; i++)
    x[i] += 0.5f; /* a non-zero mean */
  act_round(x, n);
  float *y = malloc(n * 4), *mean = malloc((size_t)N * 4), *rstd = malloc((size_t)N * 4);
  cpu_layernorm_forward(y, mean, rstd, x, w, b, N, C);
  void *dx_ = act_to_device(x, n), *dy = act_to_device(NULL, n);
  float *dw = to_device(w, (size_t)C * 4), *db = to_device(b, (size_t)C * 4);
  float *dm = to_device(NULL, (size_t)N * 4), *dr = to_device(NULL, (size_t)N * 4);
  ck(k, kcuda_layernorm_forward(k, dy, dm, dr, dx_, dw, db, N, C), "layernorm_forward");
  char name[96];
  snprintf(name, sizeof name, "layernorm_forward %s out (N=%d C=%d)", act_name(), N, C);
  expect_close(name, act_from_device(dy, n), y, n, act_tol());
  expect_close("layernorm_forward mean", from_device(dm, (size_t)N), mean, (size_t)N, TOL_EXACT);
  expect_close("layernorm_forward rstd", from_device(dr, (size_t)N), rstd, (size_t)N, TOL_EXACT);
  /* fused residual + layernorm: a + b (stored in the activation type) then normalize it */
  float *a = act_round(host_random(n, 1), n), *bb = act_round(host_random(n, 1), n),
        *res = malloc(n * 4);
  cpu_residual_forward(res, a, bb, (int)n);
  act_round(res, n);
  cpu_layernorm_forward(y, mean, rstd, res, w, b, N, C);
  void *da = act_to_device(a, n), *dbb = act_to_device(bb, n), *dres = act_to_device(NULL, n);
  ck(k, kcuda_residual_layernorm_forward(k, dres, dy, dm, dr, da, dbb, dw, db, N, C),
     "residual_layernorm_forward");
  expect_close("residual_layernorm_forward residual", act_from_device(dres, n), res, n, act_tol());
  expect_close("residual_layernorm_forward out", act_from_device(dy, n), y, n, act_tol());
  /* backward from the forward of x */
  cpu_layernorm_forward(y, mean, rstd, x, w, b, N, C);
  check_cuda(cudaMemcpy(dm, mean, (size_t)N * 4, cudaMemcpyHostToDevice), "copy mean");
  check_cuda(cudaMemcpy(dr, rstd, (size_t)N * 4, cudaMemcpyHostToDevice), "copy rstd");
  float *g = act_round(host_random(n, 1), n), *gx = act_round(host_random(n, 1), n),
        *gw = host_random((size_t)C, 1), *gb = host_random((size_t)C, 1);
  void *d_g = act_to_device(g, n), *d_gx = act_to_device(gx, n);
  float *d_gw = to_device(gw, (size_t)C * 4), *d_gb = to_device(gb, (size_t)C * 4);
  cpu_layernorm_backward(gx, gw, gb, g, x, w, mean, rstd, N, C);
  ck(k, kcuda_layernorm_backward(k, d_gx, d_gw, d_gb, d_g, dx_, dw, dm, dr, N, C),
     "layernorm_backward");
  expect_close("layernorm_backward dinp (accumulates)", act_from_device(d_gx, n), gx, n, act_tol());
  expect_close("layernorm_backward dweight", from_device(d_gw, (size_t)C), gw, (size_t)C, 1e-4);
  expect_close("layernorm_backward dbias", from_device(d_gb, (size_t)C), gb, (size_t)C, 1e-4);
  void *bufs[] = {dx_, dw, db, dy, dm, dr, da, dbb, dres, d_g, d_gx, d_gw, d_gb};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(x);
  free(w);
  free(b);
  free(y);
  free(mean);
  free(rstd);
  free(a);
  free(bb);
  free(res);
  free(g);
  free(gx);
  free(gw);
  free(gb);
}

static void test_matmul(kcuda_ctx *k, kcuda_precision p, int N, int C, int OC, int with_bias) {
  double tol = gemm_tol(p);
  size_t nin = (size_t)N * C, nw = (size_t)OC * C, nout = (size_t)N * OC;
  float *x = act_round(host_random(nin, 1), nin), *w = host_random(nw, 1),
        *b = host_random((size_t)OC, 1);
  float *y = malloc(nout * 4);
  cpu_matmul_forward(y, x, w, with_bias ? b : NULL, N, C, OC);
  void *dx_ = act_to_device(x, nin), *dy = act_to_device(NULL, nout);
  float *dw = to_device(w, nw * 4), *db = to_device(b, (size_t)OC * 4);
  ck(k, kcuda_matmul_forward(k, dy, dx_, dw, with_bias ? db : NULL, N, C, OC), "matmul_forward");
  char name[128];
  snprintf(name, sizeof name, "matmul_forward %s %s N=%d C=%d OC=%d%s", kcuda_precision_name(p),
           act_name(), N, C, OC, with_bias ? " +bias" : "");
  expect_close(name, act_from_device(dy, nout), y, nout, tol);
  float *g = act_round(host_random(nout, 1), nout), *gx = act_round(host_random(nin, 1), nin),
        *gw = host_random(nw, 1), *gb = host_random((size_t)OC, 1);
  void *d_g = act_to_device(g, nout), *d_gx = act_to_device(gx, nin);
  float *d_gw = to_device(gw, nw * 4), *d_gb = to_device(gb, (size_t)OC * 4);
  cpu_matmul_backward(gx, gw, gb, g, x, w, N, C, OC);
  ck(k, kcuda_matmul_backward(k, d_gx, d_gw, d_gb, d_g, dx_, dw, N, C, OC), "matmul_backward");
  snprintf(name, sizeof name, "matmul_backward %s %s dinp", kcuda_precision_name(p), act_name());
  expect_close(name, act_from_device(d_gx, nin), gx, nin, tol);
  snprintf(name, sizeof name, "matmul_backward %s %s dweight", kcuda_precision_name(p), act_name());
  expect_close(name, from_device(d_gw, nw), gw, nw, tol);
  expect_close("matmul_backward dbias (fp32 column sums)", from_device(d_gb, (size_t)OC), gb,
               (size_t)OC, TOL_EXACT);
  void *bufs[] = {dx_, dw, db, dy, d_g, d_gx, d_gw, d_gb};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(x);
  free(w);
  free(b);
  free(y);
  free(g);
  free(gx);
  free(gw);
  free(gb);
}

/* bf16 weight copies (matmul.cu): cast once per weights version, recast after a bump, and
 * a forward/backward pair through the cache matches the reference like the uncached path. */
static void test_weight_cache(kcuda_ctx *k) {
  int N = 48, C = 64, OC = 80;
  size_t nin = (size_t)N * C, nw = (size_t)OC * C, nout = (size_t)N * OC;
  float *x = act_round(host_random(nin, 1), nin), *w = host_random(nw, 1), *w2 = host_random(nw, 1);
  float *y = malloc(nout * 4);
  void *d_x = act_to_device(x, nin), *d_y = act_to_device(NULL, nout);
  float *d_w = to_device(w, nw * 4);
  unsigned long long casts0 = kcuda_weight_casts(k);
  cpu_matmul_forward(y, x, w, NULL, N, C, OC);
  ck(k, kcuda_matmul_forward_w(k, d_y, d_x, d_w, NULL, N, C, OC, 7), "forward_w");
  ck(k, kcuda_matmul_forward_w(k, d_y, d_x, d_w, NULL, N, C, OC, 7), "forward_w again");
  expect_close("weight cache: forward through the cached copy", act_from_device(d_y, nout), y, nout,
               gemm_tol(KCUDA_BF16));
  int ok = kcuda_weight_casts(k) - casts0 == 1;
  printf("%s weight cache: two GEMMs under one version cast the weight once (%llu)\n",
         ok ? "ok  " : "FAIL", kcuda_weight_casts(k) - casts0);
  failures += !ok;
  /* new weights under the same version: the stale copy is (knowingly) still used */
  check_cuda(cudaMemcpy(d_w, w2, nw * 4, cudaMemcpyHostToDevice), "new weights");
  ck(k, kcuda_matmul_forward_w(k, d_y, d_x, d_w, NULL, N, C, OC, 7), "forward_w stale");
  expect_close("weight cache: same version keeps the old copy", act_from_device(d_y, nout), y, nout,
               gemm_tol(KCUDA_BF16));
  /* after a bump the copy is recast; backward's dinp GEMM reuses it */
  cpu_matmul_forward(y, x, w2, NULL, N, C, OC);
  ck(k, kcuda_matmul_forward_w(k, d_y, d_x, d_w, NULL, N, C, OC, 8), "forward_w bumped");
  expect_close("weight cache: a new version recasts", act_from_device(d_y, nout), y, nout,
               gemm_tol(KCUDA_BF16));
  float *g = act_round(host_random(nout, 1), nout), *gx = act_round(host_random(nin, 1), nin),
        *gw = host_random(nw, 1);
  void *d_g = act_to_device(g, nout), *d_gx = act_to_device(gx, nin);
  float *d_gw = to_device(gw, nw * 4);
  cpu_matmul_backward(gx, gw, NULL, g, x, w2, N, C, OC);
  ck(k, kcuda_matmul_backward_w(k, d_gx, d_gw, NULL, d_g, d_x, d_w, N, C, OC, 8), "backward_w");
  expect_close("weight cache: backward dinp", act_from_device(d_gx, nin), gx, nin,
               gemm_tol(KCUDA_BF16));
  expect_close("weight cache: backward dweight", from_device(d_gw, nw), gw, nw,
               gemm_tol(KCUDA_BF16));
  ok = kcuda_weight_casts(k) - casts0 == 2;
  printf("%s weight cache: backward under the same version did not recast (%llu casts)\n",
         ok ? "ok  " : "FAIL", kcuda_weight_casts(k) - casts0);
  failures += !ok;
  void *bufs[] = {d_x, d_w, d_y, d_g, d_gx, d_gw};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(x);
  free(w);
  free(w2);
  free(y);
  free(g);
  free(gx);
  free(gw);
}

static void test_attention(kcuda_ctx *k, kcuda_precision p, int B, int T, int C, int NH) {
  double tol = gemm_tol(p);
  size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
  float *qkv = act_round(host_random(nqkv, 1), nqkv), *out = malloc(nout * 4),
        *pre = malloc(natt * 4), *att = malloc(natt * 4);
  cpu_attention_forward(out, pre, att, qkv, B, T, C, NH);
  void *d_qkv = act_to_device(qkv, nqkv), *d_out = act_to_device(NULL, nout);
  float *d_pre = to_device(NULL, natt * 4), *d_att = to_device(NULL, natt * 4);
  ck(k, kcuda_attention_forward(k, d_out, d_pre, d_att, d_qkv, B, T, C, NH), "attention_forward");
  char name[128];
  snprintf(name, sizeof name, "attention_forward %s %s out (B=%d T=%d C=%d NH=%d)",
           kcuda_precision_name(p), act_name(), B, T, C, NH);
  expect_close(name, act_from_device(d_out, nout), out, nout, tol);
  expect_close("attention_forward preatt", from_device(d_pre, natt), pre, natt, tol);
  expect_close("attention_forward att", from_device(d_att, natt), att, natt, tol);
  /* backward from the reference's att, so that only backward's error is measured */
  check_cuda(cudaMemcpy(d_att, att, natt * 4, cudaMemcpyHostToDevice), "copy att");
  float *g = act_round(host_random(nout, 1), nout), *gqkv = act_round(host_random(nqkv, 1), nqkv),
        *dpre = malloc(natt * 4), *datt = malloc(natt * 4);
  void *d_g = act_to_device(g, nout), *d_gqkv = act_to_device(gqkv, nqkv);
  float *d_dpre = to_device(NULL, natt * 4), *d_datt = to_device(NULL, natt * 4);
  cpu_attention_backward(gqkv, dpre, datt, g, qkv, att, B, T, C, NH);
  ck(k, kcuda_attention_backward(k, d_gqkv, d_dpre, d_datt, d_g, d_qkv, d_att, B, T, C, NH),
     "attention_backward");
  snprintf(name, sizeof name, "attention_backward %s %s dqkv (accumulates)",
           kcuda_precision_name(p), act_name());
  expect_close(name, act_from_device(d_gqkv, nqkv), gqkv, nqkv, tol);
  expect_close("attention_backward dpreatt", from_device(d_dpre, natt), dpre, natt, tol);
  void *bufs[] = {d_qkv, d_out, d_pre, d_att, d_g, d_gqkv, d_dpre, d_datt};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(qkv);
  free(out);
  free(pre);
  free(att);
  free(g);
  free(gqkv);
  free(dpre);
  free(datt);
}

/* The fused (flash) attention against the reference: forward output, and dqkv from the
 * att that the fused forward saved (row log-sum-exp + output copy). bf16 tensor cores
 * with fp32 accumulation and online softmax: tolerance 2e-2 on out, 3e-2 on dqkv
 * (P and dS are rounded to bf16 as well), for either activation storage. */
#define TOL_FUSED_FWD 2e-2
#define TOL_FUSED_BWD 3e-2
static void test_attention_fused(kcuda_ctx *k, int B, int T, int C, int NH) {
  if (!kcuda_attention_fused_supported(B, T, C, NH)) {
    printf("FAIL fused attention should support B=%d T=%d C=%d NH=%d\n", B, T, C, NH);
    failures++;
    return;
  }
  size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
  float *qkv = host_random(nqkv, 1), *out = malloc(nout * 4), *pre = malloc(natt * 4),
        *att = malloc(natt * 4), *dpre = malloc(natt * 4), *datt = malloc(natt * 4);
  for (size_t i = 0; i < nqkv; i++)
    qkv[i] *= 2.0f; /* scores of a few units: a peaked softmax exercises the rescaling */
  act_round(qkv, nqkv);
  cpu_attention_forward(out, pre, att, qkv, B, T, C, NH);
  void *d_qkv = act_to_device(qkv, nqkv), *d_out = act_to_device(NULL, nout);
  float *d_att = to_device(NULL, natt * 4);
  ck(k, kcuda_attention_forward_fused(k, d_out, d_att, d_qkv, B, T, C, NH), "fused forward");
  char name[128];
  snprintf(name, sizeof name, "fused attention forward %s (B=%d T=%d C=%d NH=%d)", act_name(), B, T,
           C, NH);
  expect_close(name, act_from_device(d_out, nout), out, nout, TOL_FUSED_FWD);
  float *g = act_round(host_random(nout, 1), nout), *gqkv = act_round(host_random(nqkv, 1), nqkv);
  void *d_g = act_to_device(g, nout), *d_gqkv = act_to_device(gqkv, nqkv);
  cpu_attention_backward(gqkv, dpre, datt, g, qkv, att, B, T, C, NH);
  ck(k, kcuda_attention_backward_fused(k, d_gqkv, d_g, d_qkv, d_att, B, T, C, NH),
     "fused backward");
  snprintf(name, sizeof name, "fused attention backward %s dqkv (accumulates)", act_name());
  expect_close(name, act_from_device(d_gqkv, nqkv), gqkv, nqkv, TOL_FUSED_BWD);
  void *bufs[] = {d_qkv, d_out, d_att, d_g, d_gqkv};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(qkv);
  free(out);
  free(pre);
  free(att);
  free(dpre);
  free(datt);
  free(g);
  free(gqkv);
}

/* The activation element-wise kernels on n values, `off` elements past the start of their
 * allocations (off = 1: not 16-byte aligned, the kernels' scalar path). */
static void test_act_elementwise(kcuda_ctx *k, size_t n, size_t off) {
  float *x = act_round(host_random(n, 3), n), *y = malloc(n * 4),
        *b = act_round(host_random(n, 1), n);
  char *bx = act_to_device(NULL, n + off), *by = act_to_device(NULL, n + off),
       *bb = act_to_device(NULL, n + off);
  void *tmp = act_to_device(x, n);
  size_t sh = act_bytes(off);
  void *d_x = bx + sh, *d_y = by + sh, *d_b = bb + sh;
  check_cuda(cudaMemcpy(d_x, tmp, act_bytes(n), cudaMemcpyDeviceToDevice), "place x");
  cudaFree(tmp);
  tmp = act_to_device(b, n);
  check_cuda(cudaMemcpy(d_b, tmp, act_bytes(n), cudaMemcpyDeviceToDevice), "place b");
  cudaFree(tmp);
  char name[96];
  cpu_gelu_forward(y, x, (int)n);
  ck(k, kcuda_gelu_forward(k, d_y, d_x, n), "gelu_forward");
  snprintf(name, sizeof name, "gelu_forward %s n=%zu offset %zu", act_name(), n, off);
  expect_close(name, act_from_device(d_y, n), y, n, act_tol());
  float *g = act_round(host_random(n, 1), n), *gx = act_round(host_random(n, 1), n);
  void *d_g = act_to_device(g, n), *d_gx = act_to_device(gx, n); /* aligned */
  cpu_gelu_backward(gx, x, g, (int)n);
  ck(k, kcuda_gelu_backward(k, d_gx, d_x, d_g, n), "gelu_backward");
  snprintf(name, sizeof name, "gelu_backward (accumulates) %s offset %zu", act_name(), off);
  expect_close(name, act_from_device(d_gx, n), gx, n, act_tol());
  cpu_residual_forward(y, x, b, (int)n);
  ck(k, kcuda_residual_forward(k, d_y, d_x, d_b, n), "residual_forward");
  snprintf(name, sizeof name, "residual_forward %s offset %zu", act_name(), off);
  expect_close(name, act_from_device(d_y, n), y, n, act_tol());
  float *da = host_copy(x, n), *db = host_copy(b, n);
  cpu_residual_backward(da, db, g, (int)n);
  ck(k, kcuda_residual_backward(k, d_x, d_b, d_g, n), "residual_backward");
  snprintf(name, sizeof name, "residual_backward da %s offset %zu", act_name(), off);
  expect_close(name, act_from_device(d_x, n), da, n, act_tol());
  snprintf(name, sizeof name, "residual_backward db %s offset %zu", act_name(), off);
  expect_close(name, act_from_device(d_b, n), db, n, act_tol());
  void *bufs[] = {bx, by, bb, d_g, d_gx};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(x);
  free(y);
  free(b);
  free(g);
  free(gx);
  free(da);
  free(db);
}

/* fp32-only helpers: scale, fill, casts. */
static void test_fp32_elementwise(kcuda_ctx *k) {
  size_t n = 10007;
  float *x = host_random(n, 3), *g = host_random(n, 1);
  float *d_x = to_device(x, n * 4), *d_y = to_device(NULL, n * 4), *d_g = to_device(g, n * 4);
  float *s = host_copy(g, n);
  cpu_scale(s, 0.37f, n);
  ck(k, kcuda_scale(k, d_g, 0.37f, n), "scale");
  expect_close("scale", from_device(d_g, n), s, n, TOL_EXACT);
  for (size_t i = 0; i < n; i++)
    s[i] = -2.5f;
  ck(k, kcuda_fill(k, d_g, -2.5f, n), "fill");
  expect_close("fill", from_device(d_g, n), s, n, 0.0);
  void *bf = to_device(NULL, n * 2);
  ck(k, kcuda_cast_f32_to_bf16(k, bf, d_x, n), "cast to bf16");
  ck(k, kcuda_cast_bf16_to_f32(k, d_y, bf, n), "cast to fp32");
  expect_close("cast fp32 -> bf16 -> fp32 (bf16 rounding)", from_device(d_y, n), x, n, 1.0 / 256);
  /* and exactly the host's round-to-nearest-even */
  float *r = host_copy(x, n);
  for (size_t i = 0; i < n; i++)
    r[i] = bf16_value(bf16_bits(r[i]));
  expect_close("cast fp32 -> bf16 rounds to nearest even", from_device(d_y, n), r, n, 0.0);
  cudaFree(bf);
  void *bufs[] = {d_x, d_y, d_g};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(x);
  free(g);
  free(s);
  free(r);
}

static void test_crossentropy(kcuda_ctx *k, int N, int V, int Vp) {
  size_t n = (size_t)N * Vp;
  float *logits = act_round(host_random(n, 4), n), *probs = malloc(n * 4),
        *losses = malloc((size_t)N * 4);
  int *targets = malloc((size_t)N * sizeof *targets);
  for (int i = 0; i < N; i++)
    targets[i] = (i * 131 + 7) % V;
  cpu_softmax_crossentropy_forward(losses, probs, logits, targets, N, V, Vp);
  void *d_logits = act_to_device(logits, n), *d_probs = act_to_device(NULL, n);
  float *d_losses = to_device(NULL, (size_t)N * 4);
  int *d_t = to_device(targets, (size_t)N * sizeof *targets);
  ck(k, kcuda_crossentropy_forward(k, d_losses, d_probs, d_logits, d_t, N, V, Vp),
     "crossentropy_forward");
  char name[96];
  snprintf(name, sizeof name, "crossentropy_forward %s losses (V=%d Vp=%d)", act_name(), V, Vp);
  expect_close(name, from_device(d_losses, (size_t)N), losses, (size_t)N, TOL_EXACT);
  expect_close("crossentropy_forward probs (padded = 0)", act_from_device(d_probs, n), probs, n,
               act_tol());
  act_round(probs, n);
  float *dl = host_random((size_t)N, 1), *dlog = act_round(host_random(n, 1), n);
  float *d_dl = to_device(dl, (size_t)N * 4);
  void *d_dlog = act_to_device(dlog, n), *d_p = act_to_device(probs, n);
  cpu_softmax_crossentropy_backward(dlog, dl, probs, targets, N, V, Vp);
  ck(k, kcuda_crossentropy_backward(k, d_dlog, d_dl, d_p, d_t, N, V, Vp), "crossentropy_backward");
  expect_close("crossentropy_backward (accumulates, pad untouched)", act_from_device(d_dlog, n),
               dlog, n, act_tol());
  void *bufs[] = {d_logits, d_probs, d_losses, d_t, d_dl, d_dlog, d_p};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(logits);
  free(probs);
  free(losses);
  free(targets);
  free(dl);
  free(dlog);
}

static void test_adamw_and_sums(kcuda_ctx *k) {
  size_t n = 100003;
  float *p = host_random(n, 1), *g = host_random(n, 1), *m = host_random(n, 0.1f),
        *v = host_random(n, 0.1f);
  for (size_t i = 0; i < n; i++)
    v[i] = fabsf(v[i]);
  float *d_p = to_device(p, n * 4), *d_g = to_device(g, n * 4), *d_m = to_device(m, n * 4),
        *d_v = to_device(v, n * 4);
  for (int t = 1; t <= 3; t++) {
    cpu_adamw_update(p, g, m, v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t);
    ck(k, kcuda_adamw(k, d_p, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, t), "adamw");
  }
  expect_close("adamw params (3 steps)", from_device(d_p, n), p, n, TOL_EXACT);
  expect_close("adamw m", from_device(d_m, n), m, n, TOL_EXACT);
  expect_close("adamw v", from_device(d_v, n), v, n, TOL_EXACT);
  /* sums into a device double, accumulating */
  double init[2] = {1.5, -2.0}, got[2];
  double *d_acc = to_device(init, sizeof init);
  ck(k, kcuda_sum_accumulate(k, d_acc, d_g, n), "sum");
  ck(k, kcuda_sum_squares_accumulate(k, d_acc + 1, d_g, n), "sum_squares");
  check_cuda(cudaDeviceSynchronize(), "sums");
  check_cuda(cudaMemcpy(got, d_acc, sizeof got, cudaMemcpyDeviceToHost), "copy sums");
  double want_sum = 1.5, want_sq = -2.0 + cpu_sum_squares(g, n);
  for (size_t i = 0; i < n; i++)
    want_sum += g[i];
  int ok = fabs(got[0] - want_sum) <= 1e-9 * (1 + fabs(want_sum)) * n &&
           fabs(got[1] - want_sq) <= 1e-12 * fabs(want_sq) * n;
  printf("%s sum / sum_squares (double)                    %.12g %.12g vs %.12g %.12g\n",
         ok ? "ok  " : "FAIL", got[0], got[1], want_sum, want_sq);
  failures += !ok;
  /* bitwise reproducible */
  double again[2] = {0, 0};
  check_cuda(cudaMemcpy(d_acc, again, sizeof again, cudaMemcpyHostToDevice), "reset");
  ck(k, kcuda_sum_squares_accumulate(k, d_acc, d_g, n), "sum_squares");
  ck(k, kcuda_sum_squares_accumulate(k, d_acc + 1, d_g, n), "sum_squares");
  check_cuda(cudaDeviceSynchronize(), "sums");
  check_cuda(cudaMemcpy(again, d_acc, sizeof again, cudaMemcpyDeviceToHost), "copy sums");
  ok = memcmp(&again[0], &again[1], sizeof(double)) == 0;
  printf("%s sum_squares is bitwise reproducible\n", ok ? "ok  " : "FAIL");
  failures += !ok;
  void *bufs[] = {d_p, d_g, d_m, d_v, d_acc};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
    cudaFree(bufs[i]);
  free(p);
  free(g);
  free(m);
  free(v);
}

static void test_errors(kcuda_ctx *k) {
  /* a shape error is a message, not a crash */
  int rc = kcuda_attention_forward(k, NULL, NULL, NULL, NULL, 1, 4, 10, 3);
  int ok = rc != 0 && strstr(kcuda_error(k), "multiple") != NULL;
  printf("%s attention with C %% NH != 0 is refused: %s\n", ok ? "ok  " : "FAIL", kcuda_error(k));
  failures += !ok;
  /* bf16 activations need a bf16-precision context (k is fp32) */
  rc = kcuda_ctx_set_act_dtype(k, KCUDA_ACT_BF16);
  ok = rc != 0 && kcuda_ctx_act_dtype(k) == KCUDA_ACT_F32;
  printf("%s bf16 activations refused in a %s context: %s\n", ok ? "ok  " : "FAIL",
         kcuda_precision_name(kcuda_ctx_precision(k)), kcuda_error(k));
  failures += !ok;
}

/* Every kernel whose activations follow the context's storage type. */
static void test_act_kernels(kcuda_ctx *k) {
  test_encoder(k, 40); /* 16-byte vectors for fp32 and bf16 */
  test_encoder(k, 36); /* fp32 vectors, bf16 scalar (36 % 8 != 0) */
  test_encoder(k, 13); /* scalar */
  test_layernorm(k, 37, 64);
  test_layernorm(k, 16, 100);
  test_layernorm(k, 5, 13);
  test_layernorm(k, 8, 768);
  test_act_elementwise(k, 10007, 0);
  test_act_elementwise(k, 10007, 1);
  test_crossentropy(k, 13, 1000, 1024);
  test_crossentropy(k, 3, 37, 37);
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
  /* fp32 activations in fp32, tf32 and bf16 precision; then bf16 activations (bf16 only) */
  kcuda_precision precisions[4] = {KCUDA_FP32, KCUDA_TF32, KCUDA_BF16, KCUDA_BF16};
  for (int pi = 0; pi < 4; pi++) {
    char err[256];
    kcuda_ctx *k = kcuda_ctx_create(stream, precisions[pi], err, sizeof err);
    if (!k) {
      printf("FAIL kcuda_ctx_create: %s\n", err);
      return 1;
    }
    act_bf16 = pi == 3;
    if (act_bf16 && kcuda_ctx_set_act_dtype(k, KCUDA_ACT_BF16) != 0) {
      printf("FAIL kcuda_ctx_set_act_dtype(bf16): %s\n", kcuda_error(k));
      return 1;
    }
    printf("-- precision %s, %s\n", kcuda_precision_name(precisions[pi]), act_name());
    if (pi == 0 || act_bf16) test_act_kernels(k);
    if (pi == 0) {
      test_fp32_elementwise(k);
      test_adamw_and_sums(k);
      test_errors(k);
    }
    test_matmul(k, precisions[pi], 32, 64, 96, 1);
    test_matmul(k, precisions[pi], 30, 50, 77, 0); /* odd sizes: unaligned rows */
    test_matmul(k, precisions[pi], 30, 50, 77, 1); /* odd sizes with the bias epilogue */
    test_matmul(k, precisions[pi], 64, 768, 2304, 1);
    if (precisions[pi] == KCUDA_BF16) test_weight_cache(k);
    test_attention(k, precisions[pi], 2, 16, 64, 4);
    test_attention(k, precisions[pi], 1, 67, 96, 3);
    if (precisions[pi] == KCUDA_BF16) {
      test_attention_fused(k, 2, 67, 128, 2);  /* hs 64, a partial last tile */
      test_attention_fused(k, 1, 200, 256, 4); /* hs 64, four tiles per row */
      test_attention_fused(k, 2, 100, 64, 2);  /* hs 32 */
      test_attention_fused(k, 1, 130, 256, 2); /* hs 128 */
      test_attention_fused(k, 1, 64, 96, 3);   /* hs 32, exactly one tile */
    }
    kcuda_ctx_destroy(k);
  }
  cudaStreamDestroy(stream);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
