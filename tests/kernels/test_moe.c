/*
 * test_moe.c — the mixture-of-experts reference kernels (moe_router.c, moe_dispatch.c,
 * moe_expert_matmul.c):
 *   moe_router    top-k choice and deterministic ties, gates (raw and renormalized), the
 *                 load-balancing loss (1 when balanced), and a gradient check of the router
 *                 backward (gates and auxiliary loss together) in both gate modes;
 *   moe_dispatch  the routing plan by hand (grouping, token order, capacity drops), and
 *                 gradient checks of permute and of the weighted unpermute (rows and gates);
 *   moe_layer     a whole MoE FFN (router matmul, top-2 of 4 experts, dispatch, expert GEMM,
 *                 GELU, expert GEMM, combine, auxiliary loss) against a naive per-token
 *                 computation, and finite-difference gradients of its input, router weights
 *                 and expert weights, dropless and with a capacity that drops tokens.
 * Finite differences need the routing to stay put under the +-h perturbation: the inputs are
 * drawn so that the top-k choice has a margin (checked, not assumed).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "kernel_check.h"
#include "kernel_tests.h"

/* ---- router --------------------------------------------------------------------------- */

enum { RN = 6, RE = 5, RK = 2 };

typedef struct {
  float logits[RN * RE], probs[RN * RE], gate[RN * RK], wgate[RN * RK];
  int expert[RN * RK], counts[RE];
  int renorm;
  float aux_scale;
} router_ctx;

static double router_loss(void *p) {
  router_ctx *c = p;
  cpu_moe_router_forward(c->expert, c->gate, c->probs, c->logits, RN, RE, RK, c->renorm);
  return check_weighted_sum(c->gate, c->wgate, RN * RK) +
         c->aux_scale * cpu_moe_aux_loss(c->probs, c->expert, RN, RE, RK, c->counts);
}

/* Logits whose sorted values are at least 0.3 apart: a +-1e-2 step never changes the top k. */
static void separated_logits(float *z, int N, int E, check_rng *rng) {
  for (int t = 0; t < N; t++) {
    int perm[16];
    for (int i = 0; i < E; i++)
      perm[i] = i;
    for (int i = E - 1; i > 0; i--) {
      int j = check_rng_below(rng, i + 1), tmp = perm[i];
      perm[i] = perm[j];
      perm[j] = tmp;
    }
    for (int i = 0; i < E; i++)
      z[t * E + i] = 0.5f * perm[i] - 1.0f + check_rng_uniform(rng, -0.1f, 0.1f);
  }
}

int test_moe_router(void) {
  int failures = 0;
  /* known choice: token 0 prefers 3 then 1; token 1 has a tie between 0 and 2 (lower wins) */
  float z[2 * 4] = {0.0f, 1.0f, -1.0f, 2.0f, 1.5f, 0.0f, 1.5f, -3.0f};
  int ex[4], counts[4];
  float g[4], p[8];
  cpu_moe_router_forward(ex, g, p, z, 2, 4, 2, 0);
  int want_ex[4] = {3, 1, 0, 2};
  if (memcmp(ex, want_ex, sizeof ex) != 0) {
    printf("moe router choice: got %d %d %d %d, want 3 1 0 2\n", ex[0], ex[1], ex[2], ex[3]);
    failures++;
  }
  double s0 = exp(0.0) + exp(1.0) + exp(-1.0) + exp(2.0);
  double want_g[4] = {exp(2.0) / s0, exp(1.0) / s0, 0, 0};
  double s1 = 2 * exp(1.5) + exp(0.0) + exp(-3.0);
  want_g[2] = want_g[3] = exp(1.5) / s1;
  failures += check_close("moe router gates", g, want_g, 4, 1e-6, 1e-7);
  cpu_moe_router_forward(ex, g, p, z, 2, 4, 2, 1);
  double want_rn[4] = {exp(2.0) / (exp(2.0) + exp(1.0)), exp(1.0) / (exp(2.0) + exp(1.0)), 0.5,
                       0.5};
  failures += check_close("moe router renormalized gates", g, want_rn, 4, 1e-6, 1e-7);

  /* balanced: equal probabilities, every expert chosen equally often -> aux = 1 */
  float zu[4 * 4] = {0};
  int exu[4 * 2] = {0, 1, 2, 3, 0, 1, 2, 3};
  float pu[16];
  float gu[8];
  int tmp_ex[8];
  cpu_moe_router_forward(tmp_ex, gu, pu, zu, 4, 4, 2, 0);
  float aux = (float)cpu_moe_aux_loss(pu, exu, 4, 4, 2, counts);
  double one = 1.0;
  failures += check_close("moe aux loss balanced = 1", &aux, &one, 1, 1e-6, 0);
  /* all on expert 0 with probability ~1: aux -> E */
  float zc[2 * 4] = {30, 0, 0, 0, 30, 0, 0, 0};
  int exc[2];
  float gc[2], pc[8];
  cpu_moe_router_forward(exc, gc, pc, zc, 2, 4, 1, 0);
  aux = (float)cpu_moe_aux_loss(pc, exc, 2, 4, 1, counts);
  double four = 4.0;
  failures += check_close("moe aux loss collapsed = E", &aux, &four, 1, 1e-6, 0);

  for (int renorm = 0; renorm < 2; renorm++) {
    router_ctx c;
    memset(&c, 0, sizeof c);
    check_rng rng;
    check_rng_seed(&rng, 71 + (uint64_t)renorm);
    separated_logits(c.logits, RN, RE, &rng);
    check_fill_uniform(c.wgate, RN * RK, &rng, -1, 1);
    c.renorm = renorm;
    c.aux_scale = 0.7f;
    router_loss(&c);
    float dlogits[RN * RE] = {0};
    cpu_moe_router_backward(dlogits, c.wgate, c.probs, c.expert, RN, RE, RK, renorm, c.aux_scale,
                            c.counts);
    failures += check_gradient(renorm ? "moe router dlogits (renorm)" : "moe router dlogits",
                               c.logits, dlogits, RN * RE, router_loss, &c, 1e-2f, 5e-3);
  }
  return failures;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

enum { DN = 5, DK = 2, DE = 3, DC = 4 };

typedef struct {
  float x[DN * DC], xp[DN * DK * DC], yp[DN * DK * DC], gate[DN * DK], out[DN * DC];
  float w_xp[DN * DK * DC], w_out[DN * DC];
  int row_token[DN * DK], row_of[DN * DK], R;
} dispatch_ctx;

static double permute_loss(void *p) {
  dispatch_ctx *c = p;
  cpu_moe_permute_forward(c->xp, c->x, c->row_token, c->R, DC);
  return check_weighted_sum(c->xp, c->w_xp, (size_t)c->R * DC);
}

static double unpermute_loss(void *p) {
  dispatch_ctx *c = p;
  cpu_moe_unpermute_forward(c->out, c->yp, c->gate, c->row_of, DN, DK, DC);
  return check_weighted_sum(c->out, c->w_out, DN * DC);
}

int test_moe_dispatch(void) {
  int failures = 0;
  /* tokens 0..4, two experts each */
  int expert[DN * DK] = {1, 0, 2, 1, 1, 2, 0, 1, 2, 0};
  int counts[DE], offsets[DE + 1];
  dispatch_ctx c;
  memset(&c, 0, sizeof c);
  int dropped =
      cpu_moe_dispatch_plan(counts, offsets, c.row_token, c.row_of, expert, DN, DE, DK, -1);
  /* expert 0: tokens 0,3,4; expert 1: tokens 0,1,2,3; expert 2: tokens 1,2,4 */
  int want_off[DE + 1] = {0, 3, 7, 10};
  int want_tok[10] = {0, 3, 4, 0, 1, 2, 3, 1, 2, 4};
  int want_row[10] = {3, 0, 7, 4, 5, 8, 1, 6, 9, 2};
  if (dropped != 0 || memcmp(offsets, want_off, sizeof want_off) ||
      memcmp(c.row_token, want_tok, sizeof want_tok) ||
      memcmp(c.row_of, want_row, sizeof want_row)) {
    printf("moe dispatch plan (dropless): wrong grouping (dropped %d)\n", dropped);
    failures++;
  } else {
    printf("moe dispatch plan (dropless): ok\n");
  }
  int tok2[10], row2[10];
  dropped = cpu_moe_dispatch_plan(counts, offsets, tok2, row2, expert, DN, DE, DK, 2);
  /* capacity 2: expert 0 keeps tokens 0,3 (drops 4), expert 1 keeps 0,1 (drops 2,3),
   * expert 2 keeps 1,2 (drops 4) */
  int want_off2[DE + 1] = {0, 2, 4, 6};
  int want_row2[10] = {2, 0, 4, 3, -1, 5, 1, -1, -1, -1};
  if (dropped != 4 || memcmp(offsets, want_off2, sizeof want_off2) ||
      memcmp(row2, want_row2, sizeof want_row2)) {
    printf("moe dispatch plan (capacity 2): wrong (dropped %d, want 4)\n", dropped);
    failures++;
  } else {
    printf("moe dispatch plan (capacity 2): ok, 4 dropped\n");
  }

  c.R = 10;
  check_rng rng;
  check_rng_seed(&rng, 83);
  check_fill_uniform(c.x, DN * DC, &rng, -1, 1);
  check_fill_uniform(c.yp, DN * DK * DC, &rng, -1, 1);
  check_fill_uniform(c.gate, DN * DK, &rng, 0, 1);
  check_fill_uniform(c.w_xp, DN * DK * DC, &rng, -1, 1);
  check_fill_uniform(c.w_out, DN * DC, &rng, -1, 1);
  float dx[DN * DC] = {0};
  cpu_moe_permute_backward(dx, c.w_xp, c.row_token, c.R, DC);
  failures += check_gradient("moe permute dx", c.x, dx, DN * DC, permute_loss, &c, 1e-2f, 1e-3);
  for (int cap = 0; cap < 2; cap++) {
    if (cap) /* the capacity plan: dropped assignments get no gradient */
      memcpy(c.row_of, row2, sizeof row2);
    float dyp[DN * DK * DC] = {0}, dgate[DN * DK] = {0};
    cpu_moe_unpermute_backward(dyp, dgate, c.w_out, c.yp, c.gate, c.row_of, DN, DK, DC);
    failures += check_gradient(cap ? "moe unpermute dyp (capacity)" : "moe unpermute dyp", c.yp,
                               dyp, DN * DK * DC, unpermute_loss, &c, 1e-2f, 1e-3);
    failures += check_gradient(cap ? "moe unpermute dgate (capacity)" : "moe unpermute dgate",
                               c.gate, dgate, DN * DK, unpermute_loss, &c, 1e-2f, 1e-3);
  }
  return failures;
}

/* ---- a whole MoE FFN --------------------------------------------------------------------- */

enum { LN = 8, LC = 6, LH = 10, LE = 4, LK = 2 };

typedef struct {
  float x[LN * LC], wr[LE * LC], w1[LE * LH * LC], b1[LE * LH], w2[LE * LC * LH], b2[LE * LC];
  float wout[LN * LC];
  float logits[LN * LE], probs[LN * LE], gate[LN * LK];
  float xp[LN * LK * LC], h[LN * LK * LH], a[LN * LK * LH], yp[LN * LK * LC], out[LN * LC];
  int expert[LN * LK], counts[LE], offsets[LE + 1], row_token[LN * LK], row_of[LN * LK];
  int R, capacity, dropped;
  float aux_scale;
} layer_ctx;

static double layer_loss(void *p) {
  layer_ctx *c = p;
  cpu_matmul_forward(c->logits, c->x, c->wr, NULL, LN, LC, LE);
  cpu_moe_router_forward(c->expert, c->gate, c->probs, c->logits, LN, LE, LK, 1);
  c->dropped = cpu_moe_dispatch_plan(c->counts, c->offsets, c->row_token, c->row_of, c->expert, LN,
                                     LE, LK, c->capacity);
  c->R = c->offsets[LE];
  cpu_moe_permute_forward(c->xp, c->x, c->row_token, c->R, LC);
  cpu_moe_expert_matmul_forward(c->h, c->xp, c->w1, c->b1, c->offsets, LE, LC, LH);
  cpu_gelu_forward(c->a, c->h, c->R * LH);
  cpu_moe_expert_matmul_forward(c->yp, c->a, c->w2, c->b2, c->offsets, LE, LH, LC);
  cpu_moe_unpermute_forward(c->out, c->yp, c->gate, c->row_of, LN, LK, LC);
  int counts[LE];
  return check_weighted_sum(c->out, c->wout, LN * LC) +
         c->aux_scale * cpu_moe_aux_loss(c->probs, c->expert, LN, LE, LK, counts);
}

/* The smallest gap, over tokens, between the k-th and (k+1)-th largest router logit. */
static float routing_margin(const float *logits) {
  float margin = INFINITY;
  for (int t = 0; t < LN; t++) {
    float s[LE];
    memcpy(s, logits + t * LE, sizeof s);
    for (int i = 0; i < LE; i++)
      for (int j = i + 1; j < LE; j++)
        if (s[j] > s[i]) {
          float tmp = s[i];
          s[i] = s[j];
          s[j] = tmp;
        }
    for (int k = 0; k + 1 < LE; k++)
      if (s[k] - s[k + 1] < margin) margin = s[k] - s[k + 1];
  }
  return margin;
}

static int layer_check(int capacity, uint64_t seed0) {
  static layer_ctx c;
  int failures = 0;
  /* draw until every token's routing has a margin of 0.05 in the logits: the checks below
   * move one input by 1e-3, which moves a logit by far less */
  uint64_t seed = seed0;
  for (;; seed++) {
    memset(&c, 0, sizeof c);
    check_rng rng;
    check_rng_seed(&rng, seed);
    check_fill_uniform(c.x, LN * LC, &rng, -1, 1);
    check_fill_uniform(c.wr, LE * LC, &rng, -1, 1);
    check_fill_uniform(c.w1, LE * LH * LC, &rng, -0.5f, 0.5f);
    check_fill_uniform(c.b1, LE * LH, &rng, -0.1f, 0.1f);
    check_fill_uniform(c.w2, LE * LC * LH, &rng, -0.5f, 0.5f);
    check_fill_uniform(c.b2, LE * LC, &rng, -0.1f, 0.1f);
    check_fill_uniform(c.wout, LN * LC, &rng, -1, 1);
    c.capacity = capacity;
    c.aux_scale = 0.3f;
    cpu_matmul_forward(c.logits, c.x, c.wr, NULL, LN, LC, LE);
    if (routing_margin(c.logits) > 0.05f) break;
  }
  layer_loss(&c);
  printf("moe layer (capacity %d, seed %llu): %d rows, %d dropped, tokens per expert %d %d %d %d\n",
         capacity, (unsigned long long)seed, c.R, c.dropped, c.counts[0], c.counts[1], c.counts[2],
         c.counts[3]);
  if (capacity >= 0 && c.dropped == 0) {
    printf("moe layer: the capacity check dropped nothing (the test would prove nothing)\n");
    failures++;
  }

  /* forward against a naive per-token computation in double */
  double want[LN * LC];
  for (int t = 0; t < LN; t++) {
    for (int o = 0; o < LC; o++)
      want[t * LC + o] = 0;
    for (int k = 0; k < LK; k++) {
      if (c.row_of[t * LK + k] < 0) continue;
      int e = c.expert[t * LK + k];
      double hbuf[LH];
      for (int j = 0; j < LH; j++) {
        double s = c.b1[e * LH + j];
        for (int i = 0; i < LC; i++)
          s += (double)c.w1[(e * LH + j) * LC + i] * c.x[t * LC + i];
        hbuf[j] = 0.5 * s * (1 + tanh(sqrt(2 / M_PI) * (s + 0.044715 * s * s * s)));
      }
      for (int o = 0; o < LC; o++) {
        double s = c.b2[e * LC + o];
        for (int j = 0; j < LH; j++)
          s += (double)c.w2[(e * LC + o) * LH + j] * hbuf[j];
        want[t * LC + o] += c.gate[t * LK + k] * s;
      }
    }
  }
  failures += check_close("moe layer forward vs naive", c.out, want, LN * LC, 1e-4, 1e-5);

  /* backward: combine, expert GEMM 2, GELU, expert GEMM 1, dispatch, router, router matmul */
  static float dyp[LN * LK * LC], dgate[LN * LK], da[LN * LK * LH], dh[LN * LK * LH];
  static float dxp[LN * LK * LC], dlogits[LN * LE], dx[LN * LC], dwr[LE * LC];
  static float dw1[LE * LH * LC], db1[LE * LH], dw2[LE * LC * LH], db2[LE * LC];
  memset(dyp, 0, sizeof dyp);
  memset(dgate, 0, sizeof dgate);
  memset(da, 0, sizeof da);
  memset(dh, 0, sizeof dh);
  memset(dxp, 0, sizeof dxp);
  memset(dlogits, 0, sizeof dlogits);
  memset(dx, 0, sizeof dx);
  memset(dwr, 0, sizeof dwr);
  memset(dw1, 0, sizeof dw1);
  memset(db1, 0, sizeof db1);
  memset(dw2, 0, sizeof dw2);
  memset(db2, 0, sizeof db2);
  int counts[LE];
  cpu_moe_unpermute_backward(dyp, dgate, c.wout, c.yp, c.gate, c.row_of, LN, LK, LC);
  cpu_moe_expert_matmul_backward(da, dw2, db2, dyp, c.a, c.w2, c.offsets, LE, LH, LC);
  cpu_gelu_backward(dh, c.h, da, c.R * LH);
  cpu_moe_expert_matmul_backward(dxp, dw1, db1, dh, c.xp, c.w1, c.offsets, LE, LC, LH);
  cpu_moe_permute_backward(dx, dxp, c.row_token, c.R, LC);
  cpu_moe_router_backward(dlogits, dgate, c.probs, c.expert, LN, LE, LK, 1, c.aux_scale, counts);
  cpu_matmul_backward(dx, dwr, NULL, dlogits, c.x, c.wr, LN, LC, LE);

  char what[64];
  snprintf(what, sizeof what, "moe layer dx (capacity %d)", capacity);
  failures += check_gradient(what, c.x, dx, LN * LC, layer_loss, &c, 1e-3f, 2e-2);
  snprintf(what, sizeof what, "moe layer drouter (capacity %d)", capacity);
  failures += check_gradient(what, c.wr, dwr, LE * LC, layer_loss, &c, 1e-3f, 2e-2);
  snprintf(what, sizeof what, "moe layer dw1 (capacity %d)", capacity);
  failures += check_gradient(what, c.w1, dw1, LE * LH * LC, layer_loss, &c, 1e-3f, 2e-2);
  snprintf(what, sizeof what, "moe layer db1 (capacity %d)", capacity);
  failures += check_gradient(what, c.b1, db1, LE * LH, layer_loss, &c, 1e-3f, 2e-2);
  snprintf(what, sizeof what, "moe layer dw2 (capacity %d)", capacity);
  failures += check_gradient(what, c.w2, dw2, LE * LC * LH, layer_loss, &c, 1e-3f, 2e-2);
  snprintf(what, sizeof what, "moe layer db2 (capacity %d)", capacity);
  failures += check_gradient(what, c.b2, db2, LE * LC, layer_loss, &c, 1e-3f, 2e-2);
  return failures;
}

int test_moe_layer(void) {
  /* dropless, then capacity 3 rows per expert of the 16 assignments (4 would fit evenly) */
  return layer_check(-1, 101) + layer_check(3, 101);
}
