/*
 * test_moe_ops.c — the CPU backend's mixture-of-experts operations (device.h: moe_*), run
 * through the device API on a stream.
 *
 * A whole MoE FFN (router matmul, top-2 of 4 experts, dispatch plan with a capacity that
 * drops tokens, permute, expert GEMM, GELU, expert GEMM, weighted combine, load-balancing
 * loss; then the whole backward) is enqueued with every routing-dependent buffer on the
 * device and nothing read by the host in between:
 *   - in fp32 its outputs and every gradient must be bitwise those of the reference
 *     kernels called directly (the operations only pack arguments and stage them);
 *   - with bf16 activations it must stay within bf16 rounding of the fp32 run (relative
 *     3e-2 of the largest value), route the same tokens, and count the same drops.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "cpu_kernels.h"
#include "device.h"

enum { N = 16, C = 8, H = 12, E = 4, K = 2, CAP = 6 };

typedef struct host_in {
  float x[N * C], wr[E * C], w1[E * H * C], b1[E * H], w2[E * C * H], b2[E * C], dout[N * C];
} host_in;

typedef struct result {
  float out[N * C], dx[N * C], dwr[E * C], dw1[E * H * C], db1[E * H], dw2[E * C * H], db2[E * C];
  int expert[N * K], dropped;
  double aux;
} result;

static unsigned long long rng_state = 12345;
static float urand(float lo, float hi) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (hi - lo) * (float)((rng_state >> 40) & 0xffffff) / 16777216.0f;
}

/* The same layer with the reference kernels, directly. */
static void reference(const host_in *in, result *r) {
  static float logits[N * E], probs[N * E], gate[N * K], xp[N * K * C], h[N * K * H], a[N * K * H],
      yp[N * K * C];
  static float dyp[N * K * C], dgate[N * K], da[N * K * H], dh[N * K * H], dxp[N * K * C],
      dlogits[N * E];
  int counts[E], offsets[E + 1], row_token[N * K], row_of[N * K];
  memset(r, 0, sizeof *r);
  memset(dyp, 0, sizeof dyp);
  memset(dgate, 0, sizeof dgate);
  memset(da, 0, sizeof da);
  memset(dh, 0, sizeof dh);
  memset(dxp, 0, sizeof dxp);
  memset(dlogits, 0, sizeof dlogits);
  memset(xp, 0, sizeof xp);
  memset(h, 0, sizeof h);
  memset(a, 0, sizeof a);
  memset(yp, 0, sizeof yp);
  cpu_matmul_forward(logits, in->x, in->wr, NULL, N, C, E);
  cpu_moe_router_forward(r->expert, gate, probs, logits, N, E, K, 1);
  r->dropped = cpu_moe_dispatch_plan(counts, offsets, row_token, row_of, r->expert, N, E, K, CAP);
  cpu_moe_permute_forward(xp, in->x, row_token, offsets[E], C);
  cpu_moe_expert_matmul_forward(h, xp, in->w1, in->b1, offsets, E, C, H);
  cpu_gelu_forward(a, h, N * K * H);
  cpu_moe_expert_matmul_forward(yp, a, in->w2, in->b2, offsets, E, H, C);
  cpu_moe_unpermute_forward(r->out, yp, gate, row_of, N, K, C);
  r->aux = cpu_moe_aux_loss(probs, r->expert, N, E, K, counts);
  cpu_moe_unpermute_backward(dyp, dgate, in->dout, yp, gate, row_of, N, K, C);
  cpu_moe_expert_matmul_backward(da, r->dw2, r->db2, dyp, a, in->w2, offsets, E, H, C);
  cpu_gelu_backward(dh, h, da, N * K * H);
  cpu_moe_expert_matmul_backward(dxp, r->dw1, r->db1, dh, xp, in->w1, offsets, E, C, H);
  cpu_moe_permute_backward(r->dx, dxp, row_token, offsets[E], C);
  cpu_moe_router_backward(dlogits, dgate, probs, r->expert, N, E, K, 1, 0.25f, counts);
  cpu_matmul_backward(r->dx, r->dwr, NULL, dlogits, in->x, in->wr, N, C, E);
}

/* Device buffers of one run, freed at its end. */
static void *bufs[64];
static int nbufs;
static void *dalloc(const dev_ops *o, dev_device *d, size_t bytes) {
  void *p = o->alloc(d, bytes);
  if (p && nbufs < 64) bufs[nbufs++] = p;
  return p;
}

/* The layer through the device API; activations in the device's type. */
static int through_device(const host_in *in, dev_dtype act, result *r) {
  char err[256];
  dev_device *d = dev_cpu_open(err, sizeof err);
  if (!d || dev_set_activation_dtype(d, act, err, sizeof err) != 0) {
    printf("cannot open the cpu device: %s\n", err);
    return -1;
  }
  const dev_ops *o = dev_get_ops(d);
  dev_stream *s = o->stream_create(d, "compute");
  size_t es = dev_dtype_bytes(act);
#define ACT(n) dalloc(o, d, (size_t)(n)*es)
#define F32(n) dalloc(o, d, (size_t)(n)*4)
  void *x = ACT(N * C), *logits = ACT(N * E), *xp = ACT(N * K * C), *h = ACT(N * K * H),
       *a = ACT(N * K * H), *yp = ACT(N * K * C), *out = ACT(N * C), *dout = ACT(N * C);
  void *dyp = ACT(N * K * C), *da = ACT(N * K * H), *dh = ACT(N * K * H), *dxp = ACT(N * K * C),
       *dlogits = ACT(N * E), *dx = ACT(N * C);
  float *wr = F32(E * C), *w1 = F32(E * H * C), *b1 = F32(E * H), *w2 = F32(E * C * H),
        *b2 = F32(E * C), *probs = F32(N * E), *gate = F32(N * K), *dgate = F32(N * K);
  float *dwr = F32(E * C), *dw1 = F32(E * H * C), *db1 = F32(E * H), *dw2 = F32(E * C * H),
        *db2 = F32(E * C);
  int *expert = dalloc(o, d, sizeof(int) * N * K), *counts = dalloc(o, d, sizeof(int) * E),
      *offsets = dalloc(o, d, sizeof(int) * (E + 1)),
      *row_token = dalloc(o, d, sizeof(int) * N * K), *row_of = dalloc(o, d, sizeof(int) * N * K),
      *dropped = dalloc(o, d, sizeof(int));
  double *aux = dalloc(o, d, sizeof(double));
  /* activations in: x and dout in the device's type */
  static uint16_t tmp16[N * C];
  if (act == DEV_BF16) {
    bf16_round(tmp16, in->x, N * C);
    o->copy_to_device(s, x, tmp16, N * C * 2);
    o->stream_synchronize(s);
    bf16_round(tmp16, in->dout, N * C);
    o->copy_to_device(s, dout, tmp16, N * C * 2);
  } else {
    o->copy_to_device(s, x, in->x, N * C * 4);
    o->copy_to_device(s, dout, in->dout, N * C * 4);
  }
  o->copy_to_device(s, wr, in->wr, sizeof in->wr);
  o->copy_to_device(s, w1, in->w1, sizeof in->w1);
  o->copy_to_device(s, b1, in->b1, sizeof in->b1);
  o->copy_to_device(s, w2, in->w2, sizeof in->w2);
  o->copy_to_device(s, b2, in->b2, sizeof in->b2);
  o->matmul_forward(s, logits, x, wr, NULL, N, C, E);
  o->moe_router_forward(s, expert, gate, probs, logits, N, E, K, 1);
  o->moe_dispatch_plan(s, counts, offsets, row_token, row_of, dropped, expert, N, E, K, CAP);
  o->moe_permute_forward(s, xp, x, row_token, offsets, N, E, K, C);
  o->moe_expert_matmul_forward(s, h, xp, w1, b1, offsets, N * K, E, C, H);
  o->gelu_forward(s, a, h, N * K * H);
  o->moe_expert_matmul_forward(s, yp, a, w2, b2, offsets, N * K, E, H, C);
  o->moe_unpermute_forward(s, out, yp, gate, row_of, N, K, C);
  o->moe_aux_loss_accumulate(s, aux, probs, expert, counts, N, E, K);
  o->moe_unpermute_backward(s, dyp, dgate, dout, yp, gate, row_of, N, K, C);
  o->moe_expert_matmul_backward(s, da, dw2, db2, dyp, a, w2, offsets, N * K, E, H, C);
  o->gelu_backward(s, dh, h, da, N * K * H);
  o->moe_expert_matmul_backward(s, dxp, dw1, db1, dh, xp, w1, offsets, N * K, E, C, H);
  o->moe_permute_backward(s, dx, dxp, row_token, offsets, N, E, K, C);
  o->moe_router_backward(s, dlogits, dgate, probs, expert, counts, N, E, K, 1, 0.25f);
  o->matmul_backward(s, dx, dwr, NULL, dlogits, x, wr, N, C, E);
  memset(r, 0, sizeof *r);
  static uint16_t o16[N * C], dx16[N * C];
  if (act == DEV_BF16) {
    o->copy_to_host(s, o16, out, N * C * 2);
    o->copy_to_host(s, dx16, dx, N * C * 2);
  } else {
    o->copy_to_host(s, r->out, out, N * C * 4);
    o->copy_to_host(s, r->dx, dx, N * C * 4);
  }
  o->copy_to_host(s, r->dwr, dwr, sizeof r->dwr);
  o->copy_to_host(s, r->dw1, dw1, sizeof r->dw1);
  o->copy_to_host(s, r->db1, db1, sizeof r->db1);
  o->copy_to_host(s, r->dw2, dw2, sizeof r->dw2);
  o->copy_to_host(s, r->db2, db2, sizeof r->db2);
  o->copy_to_host(s, r->expert, expert, sizeof r->expert);
  o->copy_to_host(s, &r->dropped, dropped, sizeof(int));
  o->copy_to_host(s, &r->aux, aux, sizeof(double));
  int rc = o->stream_synchronize(s);
  if (rc != 0) printf("stream failed: %s\n", dev_last_error(d));
  if (act == DEV_BF16) {
    bf16_widen(r->out, o16, N * C);
    bf16_widen(r->dx, dx16, N * C);
  }
  for (int k = 0; k < nbufs; k++)
    o->free(d, bufs[k]);
  nbufs = 0;
  dev_close(d);
  return rc;
}

static int same_bits(const char *what, const float *a, const float *b, size_t n) {
  if (memcmp(a, b, n * sizeof(float)) == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      printf("FAIL %s: element %zu is %.9g through the device, %.9g directly\n", what, i, a[i],
             b[i]);
      break;
    }
  return 1;
}

static int close_rel(const char *what, const float *a, const float *b, size_t n, double tol) {
  double scale = 0, worst = 0;
  for (size_t i = 0; i < n; i++)
    scale = fmax(scale, fabs(b[i]));
  for (size_t i = 0; i < n; i++)
    worst = fmax(worst, fabs((double)a[i] - b[i]));
  int bad = worst > tol * scale;
  printf("%s %s: worst difference %.3g of max %.3g (tolerance %.1g relative)\n",
         bad ? "FAIL" : "ok  ", what, worst, scale, tol);
  return bad;
}

int main(void) {
  static host_in in;
  for (int i = 0; i < N * C; i++) {
    in.x[i] = urand(-1, 1);
    in.dout[i] = urand(-1, 1);
  }
  for (int i = 0; i < E * C; i++)
    in.wr[i] = urand(-2, 2);
  for (int i = 0; i < E * H * C; i++)
    in.w1[i] = urand(-0.5f, 0.5f);
  for (int i = 0; i < E * H; i++)
    in.b1[i] = urand(-0.1f, 0.1f);
  for (int i = 0; i < E * C * H; i++)
    in.w2[i] = urand(-0.5f, 0.5f);
  for (int i = 0; i < E * C; i++)
    in.b2[i] = urand(-0.1f, 0.1f);
  static result ref, dev, dev16;
  reference(&in, &ref);
  int bad = 0;
  if (through_device(&in, DEV_F32, &dev) != 0) return 1;
  printf("fp32: %d of %d assignments dropped by capacity %d, aux %.6f\n", ref.dropped, N * K, CAP,
         ref.aux);
  if (ref.dropped == 0) {
    printf("FAIL: the capacity dropped nothing (the drop path is not exercised)\n");
    bad = 1;
  }
  bad |= memcmp(dev.expert, ref.expert, sizeof ref.expert) != 0;
  bad |= dev.dropped != ref.dropped || dev.aux != ref.aux;
  if (bad)
    printf("FAIL: fp32 routing, drops (%d vs %d) or aux (%.9g vs %.9g) differ\n", dev.dropped,
           ref.dropped, dev.aux, ref.aux);
  bad |= same_bits("out", dev.out, ref.out, N * C);
  bad |= same_bits("dx", dev.dx, ref.dx, N * C);
  bad |= same_bits("drouter", dev.dwr, ref.dwr, E * C);
  bad |= same_bits("dw1", dev.dw1, ref.dw1, E * H * C);
  bad |= same_bits("db1", dev.db1, ref.db1, E * H);
  bad |= same_bits("dw2", dev.dw2, ref.dw2, E * C * H);
  bad |= same_bits("db2", dev.db2, ref.db2, E * C);
  if (!bad) printf("ok   fp32 through the device API: bitwise equal to the reference kernels\n");
  if (through_device(&in, DEV_BF16, &dev16) != 0) return 1;
  if (memcmp(dev16.expert, ref.expert, sizeof ref.expert) != 0 || dev16.dropped != ref.dropped) {
    printf("FAIL: bf16 routed differently or dropped %d (fp32 %d)\n", dev16.dropped, ref.dropped);
    bad = 1;
  }
  bad |= close_rel("bf16 out", dev16.out, ref.out, N * C, 3e-2);
  bad |= close_rel("bf16 dx", dev16.dx, ref.dx, N * C, 3e-2);
  bad |= close_rel("bf16 dw1", dev16.dw1, ref.dw1, E * H * C, 3e-2);
  bad |= close_rel("bf16 dw2", dev16.dw2, ref.dw2, E * C * H, 3e-2);
  bad |= close_rel("bf16 drouter", dev16.dwr, ref.dwr, E * C, 3e-2);
  printf(bad ? "FAILED\n" : "OK\n");
  return bad;
}
