/*
 * test_moe_cuda.c — the CUDA backend's mixture-of-experts operations (device.h moe_*,
 * trainer/cuda/device_cuda.c over kernels/cuda/moe.cu) on a real GPU, against the CPU
 * reference kernels (kernels/cpu/moe_*.c), for fp32 activations (fp32 precision) and bf16
 * activations (bf16 precision).
 *
 * Every operation is enqueued on one stream with all routing-dependent buffers on the
 * device; the host reads results only at the end (after a synchronization), then runs the
 * reference kernels on the same inputs — for each operation, the inputs the device itself
 * produced upstream (its experts, gates, plan), so that one operation's difference does
 * not hide in the next one's tolerance:
 *   - routing: quantized logits (exact ties) must choose exactly the reference's experts;
 *     probs and gates within 1e-6 relative (the GPU's expf may differ in the last bit);
 *   - plan (dropless and with a capacity that drops): counts, offsets, row_token, row_of
 *     and the dropped count exactly;
 *   - permute forward/backward, unpermute forward and its dyp: bitwise (copies and the
 *     CPU's additions in the CPU's order, products not contracted into FMAs);
 *   - dgate, router backward: 1e-6 relative; aux loss 1e-12 relative;
 *   - grouped expert GEMM forward, dinp, dweight, dbias: 1e-4 relative to the largest value
 *     for fp32 (1e-2 for bf16-stored outputs); rows past R untouched. In bf16 precision the
 *     GEMMs run on tensor cores with bf16 weights: the reference gets the weights rounded.
 * Shapes: N = 1000 tokens, E = 8 experts, top-2, C = 96, OC = 160 (several GEMM tiles
 * each way, partial ones). Exit status: 0 passed, 1 failed, 77 (SKIP) without a CUDA
 * device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/bf16.h"
#include "cpu_kernels.h"
#include "device_cuda.h"

enum { N = 1000, E = 8, K = 2, C = 96, OC = 160, NK = N * K };

static int failures;
static unsigned long long rng_state = 0x5DEECE66DULL;

static float urand(float lo, float hi) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
}

static float *random_vec(size_t n, float scale) {
  float *v = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++)
    v[i] = urand(-scale, scale);
  return v;
}

static void report(const char *what, int ok, const char *detail) {
  printf("%s %-58s %s\n", ok ? "ok  " : "FAIL", what, detail);
  failures += !ok;
}

static void expect_ints(const char *what, const int *got, const int *ref, size_t n) {
  size_t i = 0;
  while (i < n && got[i] == ref[i])
    i++;
  char d[128];
  if (i == n)
    snprintf(d, sizeof d, "exact (%zu)", n);
  else
    snprintf(d, sizeof d, "first difference at %zu: %d vs %d", i, got[i], ref[i]);
  report(what, i == n, d);
}

static void expect_bits(const char *what, const float *got, const float *ref, size_t n) {
  size_t i = 0;
  while (i < n && memcmp(&got[i], &ref[i], sizeof(float)) == 0)
    i++;
  char d[128];
  if (i == n)
    snprintf(d, sizeof d, "bitwise (%zu)", n);
  else
    snprintf(d, sizeof d, "first difference at %zu: %.9g vs %.9g", i, got[i], ref[i]);
  report(what, i == n, d);
}

static void expect_close(const char *what, const float *got, const float *ref, size_t n,
                         double tol) {
  double scale = 0, worst = 0;
  int finite = 1;
  for (size_t i = 0; i < n; i++) {
    scale = fmax(scale, fabs(ref[i]));
    worst = fmax(worst, fabs((double)got[i] - ref[i]));
    finite &= isfinite(got[i]) != 0;
  }
  double err = worst / (scale > 1e-12 ? scale : 1e-12);
  char d[128];
  snprintf(d, sizeof d, "rel. err %.2e (tol %.0e)", err, tol);
  report(what, finite && err <= tol, d);
}

/* ---- activations in the device's type ---------------------------------------------------- */

typedef struct run {
  dev_device *d;
  const dev_ops *o;
  dev_stream *s;
  dev_dtype act;
} run;

static void *dev_alloc(run *r, size_t bytes) {
  void *p = r->o->alloc(r->d, bytes);
  if (!p) {
    printf("FAIL alloc %zu bytes: %s\n", bytes, r->o->last_error(r->d));
    exit(1);
  }
  return p;
}

/* The values as the activation type stores them (bf16: rounded), in place. */
static void as_stored(run *r, float *v, size_t n) {
  if (r->act == DEV_BF16)
    for (size_t i = 0; i < n; i++)
      v[i] = bf16_to_float(bf16_from_float(v[i]));
}

static dev_act *act_upload(run *r, const float *v, size_t n) {
  dev_act *p = dev_alloc(r, n * dev_dtype_bytes(r->act));
  if (r->act == DEV_BF16) {
    uint16_t *h = malloc(n * 2);
    bf16_round(h, v, n);
    r->o->copy_to_device(r->s, p, h, n * 2);
    r->o->stream_synchronize(r->s); /* h is freed next */
    free(h);
  } else {
    r->o->copy_to_device(r->s, p, v, n * 4);
  }
  return p;
}

static void *f32_upload(run *r, const void *v, size_t bytes) {
  void *p = dev_alloc(r, bytes);
  r->o->copy_to_device(r->s, p, v, bytes);
  return p;
}

/* Device to host, after everything enqueued so far (synchronizes). */
static void act_download(run *r, float *dst, const dev_act *p, size_t n) {
  if (r->act == DEV_BF16) {
    uint16_t *h = malloc(n * 2);
    r->o->copy_to_host(r->s, h, p, n * 2);
    r->o->stream_synchronize(r->s);
    bf16_widen(dst, h, n);
    free(h);
  } else {
    r->o->copy_to_host(r->s, dst, p, n * 4);
    r->o->stream_synchronize(r->s);
  }
}

static void download(run *r, void *dst, const void *p, size_t bytes) {
  r->o->copy_to_host(r->s, dst, p, bytes);
  r->o->stream_synchronize(r->s);
}

/* ---- the checks ---------------------------------------------------------------------------- */

static void check_all(run *r, int capacity) {
  const dev_ops *o = r->o;
  dev_stream *s = r->s;
  const char *tn = dev_dtype_name(r->act);
  char what[128];
  double tol_act = r->act == DEV_BF16 ? 1e-2 : 1e-4;

  /* router forward on quantized logits (ties) */
  float *logits = random_vec((size_t)N * E, 2.0f);
  for (size_t i = 0; i < (size_t)N * E; i++)
    logits[i] = roundf(logits[i] * 2.0f) * 0.5f;
  dev_act *dlogits_in = act_upload(r, logits, (size_t)N * E);
  int *expert = dev_alloc(r, sizeof(int) * NK), *counts = dev_alloc(r, sizeof(int) * E),
      *offsets = dev_alloc(r, sizeof(int) * (E + 1)), *row_token = dev_alloc(r, sizeof(int) * NK),
      *row_of = dev_alloc(r, sizeof(int) * NK), *dropped = dev_alloc(r, sizeof(int));
  float *gate = dev_alloc(r, sizeof(float) * NK), *probs = dev_alloc(r, sizeof(float) * N * E);
  double *aux = dev_alloc(r, sizeof(double));
  o->moe_router_forward(s, expert, gate, probs, dlogits_in, N, E, K, 1);
  o->moe_dispatch_plan(s, counts, offsets, row_token, row_of, dropped, expert, N, E, K, capacity);
  o->moe_aux_loss_accumulate(s, aux, probs, expert, counts, N, E, K);

  /* permute / unpermute */
  float *x = random_vec((size_t)N * C, 1.0f), *dxp0 = random_vec((size_t)NK * C, 1.0f);
  float *dx0 = random_vec((size_t)N * C, 1.0f), *yp = random_vec((size_t)NK * C, 1.0f);
  float *dout = random_vec((size_t)N * C, 1.0f), *dyp0 = random_vec((size_t)NK * C, 1.0f);
  float *dgate0 = random_vec(NK, 1.0f), *sentinel = malloc(sizeof(float) * NK * C);
  for (size_t i = 0; i < (size_t)NK * C; i++)
    sentinel[i] = 7.0f;
  as_stored(r, x, (size_t)N * C);
  as_stored(r, dxp0, (size_t)NK * C);
  as_stored(r, dx0, (size_t)N * C);
  as_stored(r, yp, (size_t)NK * C);
  as_stored(r, dout, (size_t)N * C);
  as_stored(r, dyp0, (size_t)NK * C);
  dev_act *d_x = act_upload(r, x, (size_t)N * C), *d_xp = act_upload(r, sentinel, (size_t)NK * C);
  dev_act *d_dxp = act_upload(r, dxp0, (size_t)NK * C), *d_dx = act_upload(r, dx0, (size_t)N * C);
  dev_act *d_yp = act_upload(r, yp, (size_t)NK * C), *d_out = act_upload(r, dx0, (size_t)N * C);
  dev_act *d_dout = act_upload(r, dout, (size_t)N * C),
          *d_dyp = act_upload(r, dyp0, (size_t)NK * C);
  float *d_dgate = f32_upload(r, dgate0, sizeof(float) * NK);
  o->moe_permute_forward(s, d_xp, d_x, row_token, offsets, N, E, K, C);
  o->moe_permute_backward(s, d_dx, d_dxp, row_token, offsets, N, E, K, C);
  o->moe_unpermute_forward(s, d_out, d_yp, gate, row_of, N, K, C);
  o->moe_unpermute_backward(s, d_dyp, d_dgate, d_dout, d_yp, gate, row_of, N, K, C);

  /* router backward from the device's dgate */
  float *dl0 = random_vec((size_t)N * E, 0.5f);
  as_stored(r, dl0, (size_t)N * E);
  dev_act *d_dl = act_upload(r, dl0, (size_t)N * E);
  o->moe_router_backward(s, d_dl, d_dgate, probs, expert, counts, N, E, K, 1, 0.3f);

  /* grouped GEMM on the permuted rows */
  float *w = random_vec((size_t)E * OC * C, 0.3f), *b = random_vec((size_t)E * OC, 0.3f);
  float *g = random_vec((size_t)NK * OC, 1.0f), *gi0 = random_vec((size_t)NK * C, 1.0f);
  float *gw0 = random_vec((size_t)E * OC * C, 1.0f), *gb0 = random_vec((size_t)E * OC, 1.0f);
  as_stored(r, g, (size_t)NK * OC);
  as_stored(r, gi0, (size_t)NK * C);
  float *sent_oc = malloc(sizeof(float) * NK * OC);
  for (size_t i = 0; i < (size_t)NK * OC; i++)
    sent_oc[i] = 5.0f;
  float *d_w = f32_upload(r, w, sizeof(float) * E * OC * C),
        *d_b = f32_upload(r, b, sizeof(float) * E * OC);
  float *d_gw = f32_upload(r, gw0, sizeof(float) * E * OC * C);
  float *d_gb = f32_upload(r, gb0, sizeof(float) * E * OC);
  dev_act *d_y = act_upload(r, sent_oc, (size_t)NK * OC), *d_g = act_upload(r, g, (size_t)NK * OC);
  dev_act *d_gi = act_upload(r, gi0, (size_t)NK * C);
  o->moe_expert_matmul_forward(s, d_y, d_xp, d_w, d_b, offsets, NK, E, C, OC);
  o->moe_expert_matmul_backward(s, d_gi, d_gw, d_gb, d_g, d_xp, d_w, offsets, NK, E, C, OC);

  if (o->stream_synchronize(s) != 0) {
    printf("FAIL stream: %s\n", o->last_error(r->d));
    failures++;
    return;
  }

  /* ---- the device's results, and the reference on the same inputs ---- */
  int h_expert[NK], h_counts[E], h_offsets[E + 1], h_row_token[NK], h_row_of[NK], h_dropped;
  static float h_gate[NK], h_probs[N * E];
  double h_aux;
  download(r, h_expert, expert, sizeof h_expert);
  download(r, h_counts, counts, sizeof h_counts);
  download(r, h_offsets, offsets, sizeof h_offsets);
  download(r, h_row_token, row_token, sizeof h_row_token);
  download(r, h_row_of, row_of, sizeof h_row_of);
  download(r, &h_dropped, dropped, sizeof h_dropped);
  download(r, h_gate, gate, sizeof h_gate);
  download(r, h_probs, probs, sizeof h_probs);
  download(r, &h_aux, aux, sizeof h_aux);

  as_stored(r, logits, (size_t)N * E);
  static int ex_ref[NK], c_ref[E], o_ref[E + 1], rt_ref[NK], ro_ref[NK];
  static float gate_ref[NK], probs_ref[N * E];
  cpu_moe_router_forward(ex_ref, gate_ref, probs_ref, logits, N, E, K, 1);
  snprintf(what, sizeof what, "%s router experts (ties in the logits)", tn);
  expect_ints(what, h_expert, ex_ref, NK);
  snprintf(what, sizeof what, "%s router probs", tn);
  expect_close(what, h_probs, probs_ref, (size_t)N * E, 1e-6);
  snprintf(what, sizeof what, "%s router gates (renormalized)", tn);
  expect_close(what, h_gate, gate_ref, NK, 1e-6);

  int drop_ref = cpu_moe_dispatch_plan(c_ref, o_ref, rt_ref, ro_ref, h_expert, N, E, K, capacity);
  snprintf(what, sizeof what, "%s plan capacity %d: counts", tn, capacity);
  expect_ints(what, h_counts, c_ref, E);
  snprintf(what, sizeof what, "%s plan capacity %d: offsets", tn, capacity);
  expect_ints(what, h_offsets, o_ref, E + 1);
  snprintf(what, sizeof what, "%s plan capacity %d: row_token", tn, capacity);
  expect_ints(what, h_row_token, rt_ref, (size_t)o_ref[E]);
  snprintf(what, sizeof what, "%s plan capacity %d: row_of", tn, capacity);
  expect_ints(what, h_row_of, ro_ref, NK);
  snprintf(what, sizeof what, "%s plan capacity %d: dropped", tn, capacity);
  expect_ints(what, &h_dropped, &drop_ref, 1);
  int R = o_ref[E];
  if (capacity >= 0) {
    snprintf(what, sizeof what, "%s capacity %d drops assignments (the path is exercised)", tn,
             capacity);
    report(what, drop_ref > 0, "");
  }
  printf("     %s capacity %d: R = %d of %d rows, %d dropped\n", tn, capacity, R, NK, drop_ref);

  int cref[E];
  double aux_ref = cpu_moe_aux_loss(h_probs, h_expert, N, E, K, cref);
  {
    char d[96];
    double err = fabs(h_aux - aux_ref) / fabs(aux_ref);
    snprintf(d, sizeof d, "%.9f vs %.9f (rel. %.1e, tol 1e-12)", h_aux, aux_ref, err);
    snprintf(what, sizeof what, "%s aux loss", tn);
    report(what, err <= 1e-12, d);
  }

  float *got = malloc(sizeof(float) * NK * OC), *ref = malloc(sizeof(float) * NK * OC);
  memcpy(ref, sentinel, sizeof(float) * NK * C);
  cpu_moe_permute_forward(ref, x, h_row_token, R, C);
  act_download(r, got, d_xp, (size_t)NK * C);
  snprintf(what, sizeof what, "%s permute_forward (rows past R untouched)", tn);
  expect_bits(what, got, ref, (size_t)NK * C);
  float *xp_dev = malloc(sizeof(float) * NK * C);
  memcpy(xp_dev, got, sizeof(float) * NK * C);

  memcpy(ref, dx0, sizeof(float) * N * C);
  cpu_moe_permute_backward(ref, dxp0, h_row_token, R, C);
  as_stored(r, ref, (size_t)N * C);
  act_download(r, got, d_dx, (size_t)N * C);
  snprintf(what, sizeof what, "%s permute_backward (accumulates)", tn);
  expect_bits(what, got, ref, (size_t)N * C);

  cpu_moe_unpermute_forward(ref, yp, h_gate, h_row_of, N, K, C);
  as_stored(r, ref, (size_t)N * C);
  act_download(r, got, d_out, (size_t)N * C);
  snprintf(what, sizeof what, "%s unpermute_forward (overwrites)", tn);
  expect_bits(what, got, ref, (size_t)N * C);

  float *dgate_ref = malloc(sizeof(float) * NK), *dgate_dev = malloc(sizeof(float) * NK);
  memcpy(dgate_ref, dgate0, sizeof(float) * NK);
  memcpy(ref, dyp0, sizeof(float) * NK * C);
  cpu_moe_unpermute_backward(ref, dgate_ref, dout, yp, h_gate, h_row_of, N, K, C);
  as_stored(r, ref, (size_t)NK * C);
  act_download(r, got, d_dyp, (size_t)NK * C);
  download(r, dgate_dev, d_dgate, sizeof(float) * NK);
  snprintf(what, sizeof what, "%s unpermute_backward dyp (accumulates)", tn);
  expect_bits(what, got, ref, (size_t)NK * C);
  snprintf(what, sizeof what, "%s unpermute_backward dgate", tn);
  expect_close(what, dgate_dev, dgate_ref, NK, 1e-6);

  memcpy(ref, dl0, sizeof(float) * N * E);
  cpu_moe_router_backward(ref, dgate_dev, h_probs, h_expert, N, E, K, 1, 0.3f, cref);
  as_stored(r, ref, (size_t)N * E);
  act_download(r, got, d_dl, (size_t)N * E);
  snprintf(what, sizeof what, "%s router_backward (accumulates)", tn);
  expect_close(what, got, ref, (size_t)N * E, r->act == DEV_BF16 ? 1e-2 : 1e-6);

  /* bf16 precision: the tensor cores take the weights rounded to bf16 (the activations
   * are bf16 already), so the reference does too */
  as_stored(r, w, (size_t)E * OC * C);
  for (size_t i = 0; i < (size_t)NK * OC; i++)
    ref[i] = 5.0f;
  cpu_moe_expert_matmul_forward(ref, xp_dev, w, b, h_offsets, E, C, OC);
  as_stored(r, ref, (size_t)NK * OC);
  act_download(r, got, d_y, (size_t)NK * OC);
  snprintf(what, sizeof what, "%s expert_matmul_forward", tn);
  expect_close(what, got, ref, (size_t)NK * OC, tol_act);
  int tail = 1;
  for (size_t i = (size_t)R * OC; i < (size_t)NK * OC; i++)
    tail &= got[i] == 5.0f;
  snprintf(what, sizeof what, "%s expert_matmul_forward: rows past R untouched", tn);
  report(what, tail, "");

  float *gw_ref = malloc(sizeof(float) * E * OC * C), *gb_ref = malloc(sizeof(float) * E * OC);
  float *gw_dev = malloc(sizeof(float) * E * OC * C), *gb_dev = malloc(sizeof(float) * E * OC);
  memcpy(gw_ref, gw0, sizeof(float) * E * OC * C);
  memcpy(gb_ref, gb0, sizeof(float) * E * OC);
  memcpy(ref, gi0, sizeof(float) * NK * C);
  cpu_moe_expert_matmul_backward(ref, gw_ref, gb_ref, g, xp_dev, w, h_offsets, E, C, OC);
  as_stored(r, ref, (size_t)NK * C);
  act_download(r, got, d_gi, (size_t)NK * C);
  download(r, gw_dev, d_gw, sizeof(float) * E * OC * C);
  download(r, gb_dev, d_gb, sizeof(float) * E * OC);
  snprintf(what, sizeof what, "%s expert_matmul_backward dinp", tn);
  expect_close(what, got, ref, (size_t)NK * C, tol_act);
  snprintf(what, sizeof what, "%s expert_matmul_backward dweight", tn);
  expect_close(what, gw_dev, gw_ref, (size_t)E * OC * C, 1e-4);
  snprintf(what, sizeof what, "%s expert_matmul_backward dbias (rows in order)", tn);
  expect_bits(what, gb_dev, gb_ref, (size_t)E * OC);

  free(logits);
  free(x);
  free(dxp0);
  free(dx0);
  free(yp);
  free(dout);
  free(dyp0);
  free(dgate0);
  free(sentinel);
  free(dl0);
  free(w);
  free(b);
  free(g);
  free(gi0);
  free(gw0);
  free(gb0);
  free(sent_oc);
  free(got);
  free(ref);
  free(xp_dev);
  free(dgate_ref);
  free(dgate_dev);
  free(gw_ref);
  free(gb_ref);
  free(gw_dev);
  free(gb_dev);
}

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  const char *precisions[2] = {"fp32", "bf16"};
  for (int p = 0; p < 2; p++) {
    char err[512];
    run r = {0};
    r.d = dev_cuda_open(0, precisions[p], err, sizeof err);
    if (!r.d) {
      printf("FAIL dev_cuda_open(%s): %s\n", precisions[p], err);
      return 1;
    }
    r.o = dev_cuda_ops();
    r.act = p ? DEV_BF16 : DEV_F32;
    if (r.o->set_activation_dtype(r.d, r.act, err, sizeof err) != 0) {
      printf("FAIL set_activation_dtype(%s): %s\n", dev_dtype_name(r.act), err);
      return 1;
    }
    r.s = r.o->stream_create(r.d, "compute");
    if (!r.s || !r.o->moe_router_forward || !r.o->moe_expert_matmul_backward) {
      printf("FAIL: no stream or no MoE operations in the CUDA table\n");
      return 1;
    }
    check_all(&r, -1);  /* dropless */
    check_all(&r, 180); /* N K / E = 250 per expert on average: drops */
    r.o->stream_destroy(r.s);
    r.o->close(r.d);
  }
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
  return failures ? 1 : 0;
}
