/*
 * test_bf16_weights.c — the CPU backend's GEMMs on bf16 weights (device.h: matmul_forward_bf16w,
 * matmul_backward_bf16w, cast_bf16), run through the device API on a stream.
 *
 * A bf16 weight is a working copy of fp32 master weights (the ZeRO paper's layout: the GEMMs
 * read bf16, AdamW updates fp32): cast_bf16 must round exactly as bf16.h does (nearest even,
 * as __float2bfloat16_rn on the GPU), and a GEMM on the bf16 weight must give bitwise what the
 * fp32 GEMM gives on the widened weight — forward output, and backward's accumulated dinp,
 * dweight and dbias — with fp32 activations and with bf16 activations. The rounding must
 * matter (the fp32 GEMM on the unrounded weight differs), so the comparison cannot pass by a
 * GEMM that ignores the weight's type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "device.h"

enum { N = 12, C = 24, OC = 20 };

static unsigned long long rng_state = 777;
static float urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return -1.0f + 2.0f * (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
}

typedef struct gemm_out {
  float out[N * OC], dinp[N * C], dweight[OC * C], dbias[OC];
} gemm_out;

static int failures;

static void expect(int ok, const char *what, dev_dtype act) {
  if (!ok) {
    fprintf(stderr, "FAIL (%s activations): %s\n", dev_dtype_name(act), what);
    failures++;
  }
}

/* Activations of n host floats on the device in type act (rounded once when bf16). */
static void upload_act(const dev_ops *o, dev_stream *s, void *dst, const float *src, size_t n,
                       dev_dtype act) {
  if (act == DEV_F32) {
    o->copy_to_device(s, dst, src, n * 4);
  } else {
    uint16_t *tmp = malloc(n * 2);
    bf16_round(tmp, src, n);
    o->copy_to_device(s, dst, tmp, n * 2);
    o->stream_synchronize(s);
    free(tmp);
  }
}

static void download_act(const dev_ops *o, dev_stream *s, float *dst, const void *src, size_t n,
                         dev_dtype act) {
  if (act == DEV_F32) {
    o->copy_to_host(s, dst, src, n * 4);
    o->stream_synchronize(s);
  } else {
    uint16_t *tmp = malloc(n * 2);
    o->copy_to_host(s, tmp, src, n * 2);
    o->stream_synchronize(s);
    bf16_widen(dst, tmp, n);
    free(tmp);
  }
}

/* Forward and backward of one linear layer: on the bf16 weight `w16` when not NULL, else on
 * the fp32 weight `w32`. dinp starts from `dinp0` (backward accumulates into it). */
static void run_layer(const dev_ops *o, dev_device *d, dev_stream *s, dev_dtype act, const float *x,
                      const float *dout, const float *dinp0, const float *bias, const float *w32,
                      const dev_bf16 *w16, gemm_out *r) {
  size_t es = dev_dtype_bytes(act);
  dev_act *dx = o->alloc(d, N * C * es), *dy = o->alloc(d, N * OC * es);
  dev_act *ddout = o->alloc(d, N * OC * es), *ddinp = o->alloc(d, N * C * es);
  float *db = o->alloc(d, OC * 4), *ddw = o->alloc(d, OC * C * 4), *ddb = o->alloc(d, OC * 4);
  float *dw = w16 ? NULL : o->alloc(d, OC * C * 4);
  upload_act(o, s, dx, x, N * C, act);
  upload_act(o, s, ddout, dout, N * OC, act);
  upload_act(o, s, ddinp, dinp0, N * C, act);
  o->copy_to_device(s, db, bias, OC * 4);
  if (w16) {
    o->matmul_forward_bf16w(s, dy, dx, w16, db, N, C, OC);
    o->matmul_backward_bf16w(s, ddinp, ddw, ddb, ddout, dx, w16, N, C, OC);
  } else {
    o->copy_to_device(s, dw, w32, OC * C * 4);
    o->matmul_forward(s, dy, dx, dw, db, N, C, OC);
    o->matmul_backward(s, ddinp, ddw, ddb, ddout, dx, dw, N, C, OC);
  }
  download_act(o, s, r->out, dy, N * OC, act);
  download_act(o, s, r->dinp, ddinp, N * C, act);
  o->copy_to_host(s, r->dweight, ddw, sizeof r->dweight);
  o->copy_to_host(s, r->dbias, ddb, sizeof r->dbias);
  if (o->stream_synchronize(s) != 0) {
    fprintf(stderr, "FAIL: %s\n", dev_last_error(d));
    failures++;
  }
  void *bufs[] = {dx, dy, ddout, ddinp, db, ddw, ddb, dw};
  for (size_t k = 0; k < sizeof bufs / sizeof bufs[0]; k++)
    if (bufs[k]) o->free(d, bufs[k]);
}

static void check(dev_dtype act) {
  char err[256];
  dev_device *d = dev_cpu_open(err, sizeof err);
  if (!d || dev_set_activation_dtype(d, act, err, sizeof err) != 0) {
    fprintf(stderr, "FAIL: %s\n", err);
    failures++;
    return;
  }
  const dev_ops *o = dev_get_ops(d);
  dev_stream *s = o->stream_create(d, "compute");
  static float x[N * C], dout[N * OC], dinp0[N * C], bias[OC], w[OC * C], widened[OC * C];
  static uint16_t rounded[OC * C], cast[OC * C];
  for (int k = 0; k < N * C; k++)
    x[k] = urand(), dinp0[k] = 0.25f * urand();
  for (int k = 0; k < N * OC; k++)
    dout[k] = urand();
  for (int k = 0; k < OC; k++)
    bias[k] = 0.1f * urand();
  for (int k = 0; k < OC * C; k++)
    w[k] = 0.3f * urand();
  bf16_round(rounded, w, OC * C);
  bf16_widen(widened, rounded, OC * C);

  /* the working copy: cast on the device from the fp32 master */
  float *master = o->alloc(d, sizeof w);
  dev_bf16 *w16 = o->alloc(d, sizeof cast);
  o->copy_to_device(s, master, w, sizeof w);
  o->cast_bf16(s, w16, master, OC * C);
  o->copy_to_host(s, cast, w16, sizeof cast);
  o->stream_synchronize(s);
  expect(!memcmp(cast, rounded, sizeof cast), "cast_bf16 rounds as bf16_round", act);

  static gemm_out on_bf16, on_widened, on_fp32;
  run_layer(o, d, s, act, x, dout, dinp0, bias, NULL, w16, &on_bf16);
  run_layer(o, d, s, act, x, dout, dinp0, bias, widened, NULL, &on_widened);
  run_layer(o, d, s, act, x, dout, dinp0, bias, w, NULL, &on_fp32);
  expect(!memcmp(on_bf16.out, on_widened.out, sizeof on_bf16.out),
         "forward on the bf16 weight == forward on its widened fp32 values", act);
  expect(!memcmp(on_bf16.dinp, on_widened.dinp, sizeof on_bf16.dinp),
         "backward dinp (accumulated) on the bf16 weight == on the widened weight", act);
  expect(!memcmp(on_bf16.dweight, on_widened.dweight, sizeof on_bf16.dweight),
         "backward dweight (fp32) equal", act);
  expect(!memcmp(on_bf16.dbias, on_widened.dbias, sizeof on_bf16.dbias),
         "backward dbias (fp32) equal", act);
  expect(memcmp(on_bf16.out, on_fp32.out, sizeof on_bf16.out) != 0,
         "the rounding of the weight shows in the output", act);
  o->free(d, master);
  o->free(d, w16);
  o->stream_destroy(s);
  dev_close(d);
}

int main(void) {
  check(DEV_F32);
  check(DEV_BF16);
  if (failures) return 1;
  printf("bf16 weights: cast and GEMMs bitwise as on the widened weight (fp32 and bf16 "
         "activations)\n");
  return 0;
}
