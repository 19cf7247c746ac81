/*
 * test_gradcheck.c — whole-model finite-difference gradient check.
 *
 * Builds a tiny GPT-2 (2 layers, width 16, 2 heads, 8 positions, vocabulary 32)
 * on the CPU backend, computes the analytic gradient of the mean token loss
 * with model_forward + model_backward, and compares it with central
 * differences (loss(p + h) - loss(p - h)) / 2h for a sample of entries of
 * every parameter tensor. Runs once without and once with full and selective
 * recomputation (whose gradients must equal the plain ones bitwise), and once with
 * mixture-of-experts blocks (4 experts, top-2, every block): the objective is then the mean
 * token loss plus aux_scale x the load-balancing losses, and the router and expert weights
 * are checked too (the perturbations are small enough not to change the routing here).
 * Tolerance: |fd - g| <= 1e-3 + 3e-2 |g| with h = 1e-2 in fp32.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "config.h"
#include "device.h"
#include "model.h"

static int failures;

typedef struct fixture {
  dev_device *dev;
  const dev_ops *o;
  dev_stream *s;
  model m;
} fixture;

#define AUX_SCALE 0.1f

static unsigned long long routing_hash; /* of the last loss_of's expert choices */
static int skipped;                     /* MoE entries whose perturbation changed the routing */

static double loss_of(fixture *f) {
  double acc = 0, aux = 0;
  f->o->zero(f->s, f->m.loss_acc, sizeof(double));
  if (f->m.moe.nmoe) f->o->zero(f->s, f->m.moe.aux_acc, sizeof(double));
  model_forward(&f->m, 0, 0);
  f->o->copy_to_host(f->s, &acc, f->m.loss_acc, sizeof acc);
  if (f->m.moe.nmoe) f->o->copy_to_host(f->s, &aux, f->m.moe.aux_acc, sizeof aux);
  int nk = f->m.N * f->m.moe.K, ex[64 * 4];
  routing_hash = 1469598103934665603ull;
  for (int mi = 0; mi < f->m.moe.nmoe && nk <= 64 * 4; mi++) {
    f->o->copy_to_host(f->s, ex, f->m.moe.acts[mi].expert, (size_t)nk * sizeof(int));
    if (f->o->stream_synchronize(f->s) != 0) break;
    for (int i = 0; i < nk; i++)
      routing_hash = (routing_hash ^ (unsigned)ex[i]) * 1099511628211ull;
  }
  if (f->o->stream_synchronize(f->s) != 0) {
    printf("FAIL: stream error %s\n", dev_last_error(f->dev));
    exit(1);
  }
  return acc / f->m.N + AUX_SCALE * aux;
}

static float *grads_of(fixture *f) {
  float *g = malloc(f->m.nfloats * sizeof(float));
  f->o->zero(f->s, f->m.grad, f->m.nfloats_padded * 4);
  if (f->m.moe.nmoe) {
    f->o->zero(f->s, f->m.moe.grad, f->m.moe.nfloats * 4);
    f->m.moe.aux_scale = AUX_SCALE;
  }
  model_set_loss_weight(&f->m, 1.0f / (float)f->m.N);
  model_forward(&f->m, 0, 0);
  model_backward(&f->m, 0, 0, NULL, NULL);
  f->o->copy_to_host(f->s, g, f->m.grad, f->m.nfloats * sizeof(float));
  f->o->stream_synchronize(f->s);
  return g;
}

static void setup(fixture *f, recompute_kind rc, int experts) {
  train_config cfg;
  char err[256];
  char *argv[] = {"x", NULL};
  config_parse(&cfg, 1, argv, err, sizeof err);
  cfg.layers = 2;
  cfg.hidden = 16;
  cfg.heads = 2;
  cfg.seq = cfg.max_seq = 8;
  cfg.vocab = 32;
  cfg.batch = 2;
  cfg.microbatches = 1;
  cfg.world = cfg.dp = cfg.tp = cfg.pp = 1;
  cfg.recompute = rc;
  cfg.experts = experts;
  cfg.top_k = 2;
  model_grid g;
  model_grid_of(&g, 1, 1, 1, 1, 1, 0);
  f->dev = dev_cpu_open(err, sizeof err);
  f->o = dev_get_ops(f->dev);
  f->s = f->o->stream_create(f->dev, "compute");
  if (model_create(&f->m, &cfg, &g, f->dev, f->s, NULL, NULL, NULL, 2, 1, err, sizeof err) != 0 ||
      model_init_params(&f->m, 42, err, sizeof err) != 0) {
    printf("FAIL: setup: %s\n", err);
    exit(1);
  }
  int tokens[16], targets[16];
  unsigned x = 12345;
  for (int i = 0; i < 16; i++) {
    x = x * 1103515245u + 12345u;
    tokens[i] = (int)((x >> 16) % 32);
    x = x * 1103515245u + 12345u;
    targets[i] = (int)((x >> 16) % 32);
  }
  f->o->copy_to_device(f->s, f->m.slots[0].tokens, tokens, sizeof tokens);
  f->o->copy_to_device(f->s, f->m.slots[0].targets, targets, sizeof targets);
  f->o->stream_synchronize(f->s);
}

static void teardown(fixture *f) {
  f->o->stream_synchronize(f->s);
  model_destroy(&f->m);
  dev_close(f->dev);
}

/* Checks sampled entries of the n floats at dev_param (host copy p, analytic gradient g). */
static int check_entries(fixture *f, float *dev_param, float *p, const float *g, const char *name,
                         int layer, size_t off, size_t limit, unsigned *x) {
  const float h = 1e-3f; /* smaller than the dense check's: fewer routing flips */
  int checked = 0;
  loss_of(f);
  unsigned long long base = routing_hash;
  for (int s = 0; s < 6; s++) {
    *x = *x * 1103515245u + 12345u;
    size_t i = off + (*x >> 8) % limit;
    float orig = p[i];
    p[i] = orig + h;
    f->o->copy_to_device(f->s, dev_param + i, &p[i], 4);
    double lp = loss_of(f);
    int flipped = routing_hash != base;
    p[i] = orig - h;
    f->o->copy_to_device(f->s, dev_param + i, &p[i], 4);
    double lm = loss_of(f);
    flipped |= routing_hash != base;
    p[i] = orig;
    f->o->copy_to_device(f->s, dev_param + i, &p[i], 4);
    if (flipped) { /* the top-k choice is not differentiable: no finite difference */
      skipped++;
      continue;
    }
    double fd = (lp - lm) / (2 * h);
    double err = fabs(fd - g[i]);
    checked++;
    if (err > 1e-3 + 3e-2 * fabs(g[i])) {
      printf("FAIL %s[%zu] (layer %d): analytic %.6g finite-difference %.6g\n", name, i - off,
             layer, g[i], fd);
      failures++;
    }
  }
  return checked;
}

/* The MoE model: every dense parameter, the routers and the experts. */
static int check_moe(void) {
  fixture f;
  setup(&f, RECOMPUTE_NONE, 4);
  float *g = grads_of(&f);
  moe_state *q = &f.m.moe;
  float *ge = malloc(q->nfloats * 4), *pe = malloc(q->nfloats * 4);
  float *p = malloc(f.m.nfloats * 4);
  f.o->copy_to_host(f.s, ge, q->grad, q->nfloats * 4);
  f.o->copy_to_host(f.s, pe, q->param, q->nfloats * 4);
  f.o->copy_to_host(f.s, p, f.m.param, f.m.nfloats * 4);
  f.o->stream_synchronize(f.s);
  unsigned x = 4242;
  int checked = 0;
  double router_norm = 0;
  for (int k = 0; k < f.m.nparams; k++) {
    param_info *pi = &f.m.params[k];
    size_t limit = pi->count;
    if (!strcmp(pi->name, "wte")) limit = (size_t)f.m.V * f.m.C;
    if (!strcmp(pi->name, "wpe")) limit = (size_t)f.m.T * f.m.C;
    checked += check_entries(&f, f.m.param, p, g, pi->name, pi->layer, pi->offset, limit, &x);
    if (!strcmp(pi->name, "routerw"))
      for (size_t i = 0; i < pi->count; i++)
        router_norm += (double)g[pi->offset + i] * g[pi->offset + i];
  }
  for (int k = 0; k < q->nparams; k++) {
    moe_param *pi = &q->params[k];
    checked += check_entries(&f, q->param, pe, ge, pi->name, pi->layer, pi->offset, pi->count, &x);
  }
  if (skipped * 4 > checked) {
    printf("FAIL: %d of %d MoE entries changed the routing when perturbed\n", skipped,
           checked + skipped);
    failures++;
  }
  printf("moe: %d entries checked, %d skipped (routing changed)\n", checked, skipped);
  if (!(router_norm > 1e-12)) {
    printf("FAIL: the routers' gradient is ~0 (%g)\n", router_norm);
    failures++;
  }
  teardown(&f); /* drains the stream: the last restoring copies read pe and p */
  free(g);
  free(ge);
  free(pe);
  free(p);
  return checked;
}

int main(void) {
  fixture f;
  setup(&f, RECOMPUTE_NONE, 0);
  float *g = grads_of(&f);
  float *p = malloc(f.m.nfloats * sizeof(float));
  f.o->copy_to_host(f.s, p, f.m.param, f.m.nfloats * sizeof(float));
  f.o->stream_synchronize(f.s);
  const float h = 1e-2f;
  int checked = 0;
  unsigned x = 777;
  for (int k = 0; k < f.m.nparams; k++) {
    param_info *pi = &f.m.params[k];
    size_t limit = pi->count;
    if (!strcmp(pi->name, "wte")) limit = (size_t)f.m.V * f.m.C; /* padded rows are never used */
    if (!strcmp(pi->name, "wpe")) limit = (size_t)f.m.T * f.m.C;
    for (int s = 0; s < 6; s++) {
      x = x * 1103515245u + 12345u;
      size_t i = pi->offset + (x >> 8) % limit;
      float orig = p[i];
      p[i] = orig + h;
      f.o->copy_to_device(f.s, f.m.param + i, &p[i], 4);
      double lp = loss_of(&f);
      p[i] = orig - h;
      f.o->copy_to_device(f.s, f.m.param + i, &p[i], 4);
      double lm = loss_of(&f);
      p[i] = orig;
      f.o->copy_to_device(f.s, f.m.param + i, &p[i], 4);
      double fd = (lp - lm) / (2 * h);
      double err = fabs(fd - g[i]);
      checked++;
      if (err > 1e-3 + 3e-2 * fabs(g[i])) {
        printf("FAIL %s[%zu] (layer %d): analytic %.6g finite-difference %.6g\n", pi->name,
               i - pi->offset, pi->layer, g[i], fd);
        failures++;
      }
    }
  }
  /* the gradient must not be trivially zero */
  double norm = 0;
  for (size_t i = 0; i < f.m.nfloats; i++)
    norm += (double)g[i] * g[i];
  if (!(norm > 1e-6)) {
    printf("FAIL: gradient norm %g is ~0\n", norm);
    failures++;
  }
  teardown(&f);
  /* recomputation changes nothing */
  for (int rc = RECOMPUTE_SELECTIVE; rc <= RECOMPUTE_FULL; rc++) {
    fixture r;
    setup(&r, (recompute_kind)rc, 0);
    float *gr = grads_of(&r);
    if (memcmp(gr, g, f.m.nfloats * 0 + r.m.nfloats * sizeof(float)) != 0) {
      printf("FAIL: recompute %d gives different gradients\n", rc);
      failures++;
    }
    free(gr);
    teardown(&r);
  }
  free(g);
  free(p);
  checked += check_moe();
  printf("%d entries checked, %d failures\n", checked, failures);
  return failures ? 1 : 0;
}
