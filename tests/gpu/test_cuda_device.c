/*
 * test_cuda_device.c — the CUDA device backend (trainer/cuda/device_cuda.c) through
 * its operation table: zeroed allocations, staged and large copies, a producer and
 * a consumer stream ordered by an event, a model operation, the pitched copy of ring
 * attention (copy_2d), the sticky error of a failed operation, the memory counters, and
 * bf16 activation storage (refused in fp32 precision; in bf16 precision a residual add
 * and a GELU store exactly the bf16 rounding of the fp32 result).
 * Exit status: 0 passed, 1 failed, 77 (SKIP) without a CUDA device.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/cpu/bf16.h"
#include "device_cuda.h"

static int failures;

#define EXPECT(cond, ...)                                                                          \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                                                  \
      printf(__VA_ARGS__);                                                                         \
      printf("\n");                                                                                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

int main(void) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    printf("SKIP: no CUDA device\n");
    return 77;
  }
  char err[512];
  dev_device *d = dev_cuda_open(0, "fp32", err, sizeof err);
  if (!d) {
    printf("FAIL dev_cuda_open: %s\n", err);
    return 1;
  }
  const dev_ops *o = dev_cuda_ops();
  EXPECT(dev_is_cuda(d) && !strcmp(o->backend_name, "cuda"), "table");
  printf("device: %s, peak bf16 %.0f TFLOP/s (row '%s')\n", o->name(d),
         dev_cuda_peak_flops_bf16(o->name(d)) / 1e12, dev_cuda_peak_table_match(o->name(d)));
  dev_stream *a = o->stream_create(d, "compute"), *b = o->stream_create(d, "comm");
  dev_event *ev = o->event_create(d);
  EXPECT(a && b && ev, "streams and event: %s", o->last_error(d));
  if (!a || !b || !ev) return 1;
  size_t n = 3 << 20; /* 12 MiB: larger than a staging slot */
  float *x = o->alloc(d, n * 4), *y = o->alloc(d, n * 4);
  float *host = malloc(n * 4), *back = malloc(n * 4);
  EXPECT(x && y && host && back, "alloc");
  EXPECT(o->bytes_in_use(d) >= 2 * n * 4, "bytes in use %zu", o->bytes_in_use(d));
  o->copy_to_host(a, back, x, n * 4);
  EXPECT(o->stream_synchronize(a) == 0, "sync");
  int zero = 1;
  for (size_t i = 0; i < n; i++)
    zero &= back[i] == 0.0f;
  EXPECT(zero, "allocations are zeroed");
  /* producer: copy + scale on a; consumer: b waits for the event, then copies */
  for (size_t i = 0; i < n; i++)
    host[i] = (float)(i % 1000);
  o->copy_to_device(a, x, host, n * 4);
  o->scale(a, x, 2.0f, n);
  o->event_record(ev, a);
  o->stream_wait_event(b, ev);
  o->copy(b, y, x, n * 4);
  o->copy_to_host(b, back, y, n * 4);
  EXPECT(o->stream_synchronize(b) == 0, "sync b: %s", o->last_error(d));
  int same = 1;
  for (size_t i = 0; i < n; i++)
    same &= back[i] == 2.0f * (float)(i % 1000);
  EXPECT(same, "event orders the consumer after the producer");
  /* many small staged copies in a row (the ring of pinned slots wraps) */
  int tok[64];
  for (int round = 0; round < 40; round++) {
    for (int i = 0; i < 64; i++)
      tok[i] = round * 100 + i;
    o->copy_to_device(a, (char *)x + (size_t)round * sizeof tok, tok, sizeof tok);
  }
  int tback[64 * 40];
  o->copy_to_host(a, tback, x, sizeof tback);
  EXPECT(o->stream_synchronize(a) == 0, "sync staged");
  int staged_ok = 1;
  for (int i = 0; i < 64 * 40; i++)
    staged_ok &= tback[i] == (i / 64) * 100 + i % 64;
  EXPECT(staged_ok, "staged copies keep their contents after the host buffer is reused");
  /* copy_2d: the k|v columns of a [rows, 3C] qkv into a packed [rows, 2C] buffer, as ring
   * attention packs them (x still holds tback's staged ints: overwrite it with floats) */
  EXPECT(o->copy_2d && o->attention_block_forward && o->attention_block_backward,
         "context-parallel operations present");
  {
    const size_t rows = 300, C = 24;
    float *qkv = malloc(rows * 3 * C * 4), *kv = malloc(rows * 2 * C * 4);
    EXPECT(qkv && kv, "alloc");
    for (size_t i = 0; i < rows * 3 * C; i++)
      qkv[i] = (float)i;
    o->copy_to_device(a, x, qkv, rows * 3 * C * 4);
    o->copy_2d(a, y, 2 * C * 4, x + C, 3 * C * 4, 2 * C * 4, rows);
    o->copy_to_host(a, kv, y, rows * 2 * C * 4);
    EXPECT(o->stream_synchronize(a) == 0, "sync copy_2d: %s", o->last_error(d));
    int packed = 1;
    for (size_t r = 0; r < rows; r++)
      for (size_t c = 0; c < 2 * C; c++)
        packed &= kv[r * 2 * C + c] == (float)(r * 3 * C + C + c);
    EXPECT(packed, "copy_2d packs the k|v columns");
    free(qkv);
    free(kv);
  }
  /* a failing operation: sticky error with the op's name, later work skipped */
  o->attention_forward(a, (dev_act *)y, y, y, (const dev_act *)x, 1, 4, 10, 3);
  EXPECT(o->stream_synchronize(a) != 0, "failed op makes sync fail");
  EXPECT(strstr(o->last_error(d), "attention_forward") != NULL, "error names the op: %s",
         o->last_error(d));
  printf("error message: %s\n", o->last_error(d));
  EXPECT(o->bytes_peak(d) >= o->bytes_in_use(d), "peak >= in use");
  const char *source = NULL;
  size_t measured = dev_cuda_measured_peak(d, &source);
  printf("bytes in use %zu, peak %zu, measured peak %zu (%s)\n", o->bytes_in_use(d),
         o->bytes_peak(d), measured, source);
  EXPECT(source != NULL, "the measured peak names its source");
  EXPECT(o->set_activation_dtype(d, DEV_BF16, err, sizeof err) != 0 &&
             strstr(err, "bf16 precision") != NULL,
         "bf16 activations refused in fp32 precision: '%s'", err);
  o->free(d, x);
  o->free(d, y);
  o->event_destroy(ev);
  o->close(d);
  /* bf16 storage: out = round(a + b), then gelu into bf16 */
  {
    dev_device *d2 = dev_cuda_open(0, "bf16", err, sizeof err);
    EXPECT(d2 != NULL, "dev_cuda_open bf16: %s", err);
    if (d2) {
      EXPECT(o->set_activation_dtype(d2, DEV_BF16, err, sizeof err) == 0, "bf16: %s", err);
      EXPECT(o->activation_dtype(d2) == DEV_BF16, "activation type reads back");
      dev_stream *s2 = o->stream_create(d2, "compute");
      const int m = 1000;
      uint16_t ha[1000], hb[1000], hout[1000], hg[1000];
      for (int i = 0; i < m; i++) {
        ha[i] = bf16_from_float(0.37f * (float)(i % 97) - 11.0f);
        hb[i] = bf16_from_float(1.0f / (float)(i + 3));
      }
      dev_act *da = o->alloc(d2, m * 2), *db = o->alloc(d2, m * 2), *dout = o->alloc(d2, m * 2),
              *dg = o->alloc(d2, m * 2);
      o->copy_to_device(s2, da, ha, sizeof ha);
      o->copy_to_device(s2, db, hb, sizeof hb);
      o->residual_forward(s2, dout, da, db, m);
      o->gelu_forward(s2, dg, dout, m);
      o->copy_to_host(s2, hout, dout, sizeof hout);
      o->copy_to_host(s2, hg, dg, sizeof hg);
      EXPECT(o->stream_synchronize(s2) == 0, "sync bf16: %s", o->last_error(d2));
      int exact = 1, close = 1;
      for (int i = 0; i < m; i++) {
        float sum = bf16_to_float(ha[i]) + bf16_to_float(hb[i]);
        exact &= hout[i] == bf16_from_float(sum);
        float x0 = bf16_to_float(hout[i]);
        float g = 0.5f * x0 * (1.0f + tanhf(0.7978845608f * (x0 + 0.044715f * x0 * x0 * x0)));
        close &= fabsf(bf16_to_float(hg[i]) - g) <= 1e-2f * (fabsf(g) + 1e-3f);
      }
      EXPECT(exact, "bf16 residual add stores round(a + b)");
      EXPECT(close, "bf16 gelu within one bf16 rounding of the fp32 formula");
      o->free(d2, da);
      o->free(d2, db);
      o->free(d2, dout);
      o->free(d2, dg);
      o->close(d2);
    }
  }
  free(host);
  free(back);
  printf("%s: %d failure(s)\n", failures ? "FAILED" : "PASSED", failures);
  return failures ? 1 : 0;
}
