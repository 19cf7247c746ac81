/*
 * test_gemm_weights.c — the memory model's bf16 weight copies against the weights the model
 * really hands to its GEMMs.
 *
 * The CUDA backend in bf16 precision keeps one bf16 copy per distinct GEMM weight (the
 * cache of kernels/cuda/matmul.cu, keyed by the fp32 weight's address and length), so its
 * memory holds 2 bytes for every float of those weights. model/memory_model.c predicts them
 * from the shapes (bf16_weight_copies: Psi_G). This test needs no GPU: it builds the model of
 * a stage on the CPU backend with the device's operations table wrapped so that
 * matmul_forward and matmul_backward record every (weight, OC x C) they are given, runs one
 * forward and one backward, and checks that 2 x the floats of the distinct weights equal what
 * the model adds for the copies (parameters with bf16_weight_copies minus without), for a
 * dense stage holding everything, both stages of pp 2 (the first stage's embedding table is
 * only looked up, the last stage's is the LM head's weight), and a stage with a MoE block (its
 * router is a GEMM weight, its experts' grouped GEMM is not).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "device.h"
#include "memory_model.h"
#include "model.h"

static int failures;

/* The distinct (weight, floats) pairs the GEMMs were given. */
static struct {
  const float *w;
  size_t n;
} seen[256];
static int nseen;
static const dev_ops *cpu_ops;

static void note(const float *w, size_t n) {
  for (int i = 0; i < nseen; i++)
    if (seen[i].w == w && seen[i].n == n) return;
  if (nseen == (int)(sizeof seen / sizeof seen[0])) {
    fprintf(stderr, "more GEMM weights than the test records\n");
    failures++;
    return;
  }
  seen[nseen].w = w;
  seen[nseen].n = n;
  nseen++;
}

static void matmul_forward_noted(dev_stream *s, dev_act *out, const dev_act *inp,
                                 const float *weight, const float *bias, int N, int C, int OC) {
  note(weight, (size_t)OC * (size_t)C);
  cpu_ops->matmul_forward(s, out, inp, weight, bias, N, C, OC);
}

static void matmul_backward_noted(dev_stream *s, dev_act *dinp, float *dweight, float *dbias,
                                  const dev_act *dout, const dev_act *inp, const float *weight,
                                  int N, int C, int OC) {
  note(weight, (size_t)OC * (size_t)C);
  cpu_ops->matmul_backward(s, dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}

/* One stage (pipeline rank `stage` of `pp`) of a small GPT, with experts in every second
 * block when `experts` > 0: the floats of the distinct GEMM weights its forward and backward
 * use, against the memory model's copies. */
static void check_stage(const char *what, int pp, int stage, int experts) {
  train_config cfg;
  char err[256];
  char *argv[] = {"x", NULL};
  config_parse(&cfg, 1, argv, err, sizeof err);
  cfg.layers = 4;
  cfg.hidden = 32;
  cfg.heads = 2;
  cfg.seq = 8;
  cfg.max_seq = 16;
  cfg.vocab = 100;
  cfg.batch = 2;
  cfg.microbatches = 1;
  cfg.world = pp;
  cfg.dp = cfg.tp = cfg.cp = 1;
  cfg.pp = pp;
  cfg.experts = experts;
  cfg.top_k = 2;
  cfg.moe_every = 2;
  model_grid g;
  model_grid_of(&g, pp, 1, 1, pp, 1, stage);
  dev_device *dev = dev_cpu_open(err, sizeof err);
  if (!dev) {
    fprintf(stderr, "%s: %s\n", what, err);
    failures++;
    return;
  }
  cpu_ops = dev_get_ops(dev);
  dev_ops noted = *cpu_ops;
  noted.matmul_forward = matmul_forward_noted;
  noted.matmul_backward = matmul_backward_noted;
  ((dev_device_header *)dev)->ops = &noted;
  nseen = 0;
  dev_stream *s = noted.stream_create(dev, "compute");
  model m;
  if (model_create(&m, &cfg, &g, dev, s, NULL, NULL, NULL, 2, 1, err, sizeof err) != 0 ||
      model_init_params(&m, 42, err, sizeof err) != 0) {
    fprintf(stderr, "%s: setup: %s\n", what, err);
    failures++;
    ((dev_device_header *)dev)->ops = cpu_ops;
    dev_close(dev);
    return;
  }
  model_set_loss_weight(&m, 1.0f);
  model_forward(&m, 0, 0);
  model_backward(&m, 0, 0, NULL, NULL);
  if (noted.stream_synchronize(s) != 0) {
    fprintf(stderr, "%s: stream error: %s\n", what, dev_last_error(dev));
    failures++;
  }
  size_t gemm = 0;
  for (int i = 0; i < nseen; i++) {
    gemm += seen[i].n;
    if (seen[i].w < m.param || seen[i].w + seen[i].n > m.param + m.nfloats) {
      fprintf(stderr, "%s: a GEMM weight outside the stage's parameters\n", what);
      failures++;
    }
  }
  model_destroy(&m);
  ((dev_device_header *)dev)->ops = cpu_ops;
  dev_close(dev);

  mm_layout l;
  memset(&l, 0, sizeof l);
  l.layers = cfg.layers;
  l.hidden = cfg.hidden;
  l.heads = cfg.heads;
  l.vocab = cfg.vocab;
  l.max_seq = cfg.max_seq;
  l.seq = cfg.seq;
  l.dp = l.tp = l.cp = 1;
  l.pp = pp;
  l.schedule = MM_SCHED_1F1B;
  l.virtual_stages = 1;
  l.microbatches = 1;
  l.micro_batch = cfg.batch;
  l.act_bytes = 4;
  l.bucket_mb = 1;
  l.experts = experts;
  l.top_k = 2;
  l.moe_every = 2;
  l.ep = 1;
  mm_breakdown without, with;
  l.bf16_weight_copies = 0;
  int rc = mm_rank_memory(&l, stage, &without, err, sizeof err);
  l.bf16_weight_copies = 1;
  rc |= mm_rank_memory(&l, stage, &with, err, sizeof err);
  if (rc != 0) {
    fprintf(stderr, "%s: the memory model refuses: %s\n", what, err);
    failures++;
    return;
  }
  size_t predicted = with.parameters - without.parameters;
  int ok = predicted == 2 * gemm && gemm > 0;
  printf("%s %-34s %d GEMM weights, %zu floats: copies %zu bytes, predicted %zu\n",
         ok ? "ok  " : "FAIL", what, nseen, gemm, 2 * gemm, predicted);
  if (!ok) failures++;
}

int main(void) {
  check_stage("dense, one stage", 1, 0, 0);
  check_stage("dense, pp 2, first stage", 2, 0, 0);
  check_stage("dense, pp 2, last stage", 2, 1, 0);
  check_stage("experts every 2nd block, one stage", 1, 0, 4);
  if (failures) printf("%d failure(s)\n", failures);
  return failures ? 1 : 0;
}
