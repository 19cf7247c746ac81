/*
 * test_plan.c — the planner's memory formulas against hand-computed cases, and its cost
 * model and enumeration against their documented rules (docs/plan.md).
 *
 * Memory (model/memory_model.c) for a small GPT (L=2, C=64, H=4, V=256, 1024 positions,
 * seq 64): the flat parameter count by hand is
 *   wte 256x64 = 16384, wpe 1024x64 = 65536,
 *   per block 6C + 12C^2 + 7C = 384 + 49152 + 448 = 49984, two blocks 99968, final LN 128,
 *   Psi = 182016 (a multiple of dp x cp x 16 = 32 already).
 * The Playbook's fp32 training: parameters 4 Psi, gradients 4 Psi, Adam 8 Psi; ZeRO-1 the
 * moments / N, ZeRO-2 also the gradients (+ bucket buffers), ZeRO-3 also the parameters;
 * bf16 GEMMs on GPUs add the bf16 copies of the GEMM weights (2 Psi_G). Activations: full
 * recomputation < selective < none; 1F1B keeps min(pp - stage, m) micro-batches, AFAB all m.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_model.h"
#include "ssa_plan.h"

static int failures;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                     \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

static mm_layout small(void) {
  mm_layout l;
  memset(&l, 0, sizeof l);
  l.layers = 2;
  l.hidden = 64;
  l.heads = 4;
  l.vocab = 256;
  l.max_seq = 1024;
  l.seq = 64;
  l.dp = l.tp = l.pp = l.cp = 1;
  l.schedule = MM_SCHED_1F1B;
  l.virtual_stages = 1;
  l.microbatches = 1;
  l.micro_batch = 4;
  l.act_bytes = 4;
  l.bucket_mb = 1;
  return l;
}

static mm_breakdown mem(const mm_layout *l, int stage) {
  mm_breakdown b;
  char err[200];
  if (mm_rank_memory(l, stage, &b, err, sizeof err) != 0) {
    fprintf(stderr, "unexpected refusal: %s\n", err);
    failures++;
    memset(&b, 0, sizeof b);
  }
  return b;
}

static void memory_formulas(void) {
  const size_t psi = 182016;
  mm_layout l = small();
  l.dp = 2;
  mm_breakdown z0 = mem(&l, 0);
  CHECK(z0.parameters == 4 * psi);
  CHECK(z0.gradients == 4 * psi);
  CHECK(z0.optimizer == 8 * psi);
  CHECK(z0.other == 32); /* train.c: t->stat, 4 doubles (loss, norm, MoE aux loss, spare) */
  CHECK(z0.steady == z0.parameters + z0.gradients + z0.optimizer + z0.activations + z0.other);
  CHECK(z0.peak == z0.steady);
  l.zero = 1;
  mm_breakdown z1 = mem(&l, 0);
  CHECK(z1.parameters == 4 * psi && z1.gradients == 4 * psi);
  CHECK(z1.optimizer == 8 * psi / 2);
  /* ZeRO-2/3 by hand: with 1 MiB buckets the embedding unit is a bucket of its own,
   * B = [0, 81920), and the final LN and both blocks make A = [81920, 182016) (100096
   * floats). n = 2: pieces 50048 and 40960 (multiples of 16), shard 91008 floats, largest
   * piece 50048; rotating bucket buffers of A's padded 100096, the embedding's 81920. */
  l.zero = 2;
  mm_breakdown z2 = mem(&l, 0);
  CHECK(z2.optimizer == 2 * 91008 * 4);                            /* = 8 Psi / 2 */
  CHECK(z2.gradients == (91008 + 50048 + 2 * 100096 + 81920) * 4); /* shard, scratch, buffers */
  CHECK(z2.parameters == 4 * psi);
  l.zero = 3;
  mm_breakdown z3 = mem(&l, 0);
  CHECK(z3.parameters == (91008 + 2 * 100096 + 81920) * 4); /* shard + gathered buffers */
  /* set-up draws the shard directly: it never holds the full weights */
  CHECK(z3.init_peak == z3.steady && z3.peak == z3.steady);
  /* bf16 weight copies (the CUDA backend in bf16): 2 bytes per GEMM weight, 2 x 12 C^2 per
   * block + the tied LM head's 256 x 64 = 114688 (no LayerNorms, biases, position table) */
  l = small();
  l.bf16_weight_copies = 1;
  CHECK(mem(&l, 0).parameters == 4 * psi + 2 * 114688);
  /* the trainer's --gemm-weights bf16 under ZeRO-1/2 (the ZeRO paper's layout): the fp32 master
   * weights only as the rank's shard, in the optimizer states beside m and v (12 bytes per
   * float of the shard); replicated, the bf16 GEMM weights (2 Psi_G) and an fp32 working copy of
   * the rest, with the tied table the stage also looks tokens up in: Psi - Psi_G + 256 x 64 =
   * 83712 floats. The paper's 6 Psi + 12 Psi / N (ZeRO-1, fp32 gradients) and 2 Psi + 16 Psi / N
   * (ZeRO-2) count Psi_G = Psi: they differ by exactly 2 (Psi - Psi_G) + 4 x 256 x 64 bytes. */
  l = small();
  l.dp = 2;
  l.bf16_weight_copies = l.gemm_weights_bf16 = 1;
  CHECK(mem(&l, 0).parameters == 4 * psi + 2 * 114688); /* ZeRO-0 keeps the fp32 weights */
  const size_t fp32_rest = psi - 114688 + 256 * 64, not_paper = 2 * (psi - 114688) + 4 * 256 * 64;
  l.zero = 1;
  mm_breakdown g1 = mem(&l, 0);
  CHECK(g1.parameters == 2 * 114688 + 4 * fp32_rest);
  CHECK(g1.gradients == 4 * psi && g1.optimizer == 12 * psi / 2);
  CHECK(g1.parameters + g1.gradients + g1.optimizer == 6 * psi + 12 * psi / 2 + not_paper);
  l.zero = 2;
  mm_breakdown g2 = mem(&l, 0);
  CHECK(g2.parameters == 2 * 114688 + 4 * fp32_rest);
  CHECK(g2.optimizer == 3 * 91008 * 4 && g2.gradients == z2.gradients);
  /* 2 Psi + 16 Psi / N, Psi / N the shard (91008 floats), besides the bucket buffers */
  CHECK(g2.parameters + g2.optimizer + 91008 * 4 == 2 * psi + 16 * 91008 + not_paper);
  l.zero = 3; /* ZeRO-3 keeps fp32 GEMM weights: the flag changes nothing */
  CHECK(mem(&l, 0).parameters == z3.parameters + 2 * (psi / 2));
  /* the same with an interleaved pipeline (4 blocks, pp 2, v 2): every chunk's fp32 masters are
   * its ZeRO-1 slice. Stage 0 holds virtual stages 0 (wte, wpe, a block: 131904 floats, no GEMM
   * but the block's 49152) and 2 (a block: 49984, 49152 GEMM), Psi = 181888, Psi_G = 98304;
   * stage 1 virtual stages 1 (a block) and 3 (the tied LM head, a block, the final LN: 66496,
   * 65536 GEMM), Psi = 116480, Psi_G = 114688. No chunk both looks tokens up and multiplies the
   * head, so the paper's 6 Psi + 12 Psi / N differs by 2 (Psi - Psi_G) alone. */
  l = small();
  l.layers = 4;
  l.dp = l.pp = l.virtual_stages = 2;
  l.schedule = MM_SCHED_INTERLEAVED;
  l.bf16_weight_copies = l.gemm_weights_bf16 = 1;
  const size_t vpsi[2] = {131904 + 49984, 49984 + 66496}, vpsi_g[2] = {98304, 114688};
  for (int stage = 0; stage < 2; stage++) {
    size_t P = vpsi[stage], G = vpsi_g[stage];
    l.zero = 0;
    mm_breakdown i0 = mem(&l, stage);
    CHECK(i0.parameters == 4 * P + 2 * G && i0.optimizer == 8 * P);
    l.zero = 1;
    mm_breakdown i1 = mem(&l, stage);
    CHECK(i1.parameters == 2 * G + 4 * (P - G));
    CHECK(i1.gradients == 4 * P && i1.optimizer == 12 * P / 2);
    CHECK(i1.parameters + i1.gradients + i1.optimizer == 6 * P + 12 * P / 2 + 2 * (P - G));
    CHECK(i1.activations == i0.activations);
  }
  /* activations: none > selective > full; bf16 halves the activation tensors */
  l = small();
  size_t none = mem(&l, 0).activations;
  l.recompute = MM_RECOMPUTE_SELECTIVE;
  size_t sel = mem(&l, 0).activations;
  l.recompute = MM_RECOMPUTE_FULL;
  size_t full = mem(&l, 0).activations;
  CHECK(none > sel && sel > full);
  l = small();
  l.act_bytes = 2;
  CHECK(mem(&l, 0).activations < none && mem(&l, 0).activations > none / 4);
  /* fused attention (the CUDA backend's flash kernels; 2 heads of 32): each block stores the
   * rows' log-sum-exp and output, B x NH x T x (1 + hs) = 4 x 2 x 64 x 33 floats, instead of
   * the T x T probabilities (4 x 2 x 64 x 64), and the three T x T scratch buffers go */
  CHECK(mm_fused_attention_supported(4, 64, 64, 2) && !mm_fused_attention_supported(4, 64, 64, 4));
  CHECK(!mm_fused_attention_supported(4, 32, 64, 2)); /* T must exceed the head size */
  l = small();
  l.heads = 2;
  size_t unfused = mem(&l, 0).activations;
  l.fused_attention = 1;
  size_t fused = mem(&l, 0).activations;
  CHECK(unfused - fused == 2 * (4 * 2 * 64 * 64 - 4 * 2 * 64 * 33) * 4 + 3 * (4 * 2 * 64 * 64) * 4);
  l.recompute = MM_RECOMPUTE_SELECTIVE; /* the recomputation scratch block: one block's worth */
  l.fused_attention = 0;
  size_t sel_unfused = mem(&l, 0).activations;
  l.fused_attention = 1;
  CHECK(sel_unfused - mem(&l, 0).activations ==
        (4 * 2 * 64 * 64 - 4 * 2 * 64 * 33) * 4 + 3 * (4 * 2 * 64 * 64) * 4);
  l.cp = 2; /* ring attention stores no attention matrix: nothing changes */
  l.fused_attention = 0;
  size_t ring = mem(&l, 0).activations;
  l.fused_attention = 1;
  CHECK(mem(&l, 0).activations == ring);
  /* schedules: micro-batches in flight */
  l = small();
  l.pp = 4;
  l.layers = 4;
  l.microbatches = 8;
  CHECK(mm_slots(&l, 0) == 4 && mm_slots(&l, 3) == 1);
  l.schedule = MM_SCHED_AFAB;
  CHECK(mm_slots(&l, 0) == 8 && mm_slots(&l, 3) == 8);
  mm_breakdown afab0 = mem(&l, 0);
  l.schedule = MM_SCHED_1F1B;
  CHECK(mem(&l, 0).activations < afab0.activations);
  /* refusals name their reason */
  char err[200] = "";
  l = small();
  l.tp = 3;
  mm_breakdown b;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "--tp 3"));
  l = small();
  l.pp = 2;
  l.layers = 4;
  l.schedule = MM_SCHED_INTERLEAVED;
  l.virtual_stages = 2;
  l.dp = 2;
  l.zero = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "interleaved"));
}

static plan_job job_of(int gpus, int batch, const char *device) {
  plan_job j;
  memset(&j, 0, sizeof j);
  j.model = small();
  j.gpus = gpus;
  j.gpus_per_node = 8;
  j.global_batch = batch;
  j.dev = *plan_device_find(device);
  j.overlap = 1;
  return j;
}

/* The CUDA convention's model states (the trainer's CUDA backend in bf16, --framework
 * stepscope-cuda: the GEMM weights' bf16 working copy, fp32 gradients, fp32 AdamW moments; the
 * fp32 weights whole under ZeRO-0, under ZeRO-1 only the rank's master shard beside an fp32 copy
 * of what is not a GEMM weight) against the formulas docs/plan.md and trainer/README.md give,
 * for a few models and gradient groups N = dp:
 *   ZeRO-0: parameters 4 Psi + 2 Psi_G, gradients 4 Psi, optimizer 8 Psi
 *   ZeRO-1: parameters 2 Psi_G + 4 (Psi - Psi_G + the tied table where the stage also looks
 *           tokens up), gradients 4 Psi, optimizer 12 Psi / N (master, m, v)
 * (6 Psi + 12 Psi / N when Psi_G ~ Psi: the ZeRO paper's ZeRO-1 with fp32 gradients), with Psi
 * counted here from the GPT-2 shape (padded to 16 N where the flat buffers are) and Psi_G the
 * weights the GEMMs multiply: 12 C^2 per block and, on the last pipeline stage only, the tied
 * V x C table (the LM head). */
static void cuda_model_states(void) {
  static const int shapes[][3] = {{2, 64, 256}, {4, 128, 1000}, {12, 768, 50257}}; /* L, C, V */
  static const int groups[] = {2, 4, 8};
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    for (size_t j = 0; j < sizeof groups / sizeof groups[0]; j++)
      for (int pp = 1; pp <= 2; pp++) {
        size_t L = (size_t)shapes[i][0], C = (size_t)shapes[i][1];
        size_t Vp = ((size_t)shapes[i][2] + 63) / 64 * 64, T = 1024, N = (size_t)groups[j];
        mm_layout l = small();
        l.layers = (int)L;
        l.hidden = (int)C;
        l.heads = (int)(C / 32);
        l.vocab = shapes[i][2];
        l.dp = (int)N;
        l.pp = pp;
        l.act_bytes = 2;
        l.bf16_weight_copies = l.gemm_weights_bf16 = 1; /* plan_model.c for stepscope-cuda */
        for (int stage = 0; stage < pp; stage++) {
          int first = stage == 0, last = stage == pp - 1;
          size_t blocks = L / (size_t)pp * (12 * C * C + 13 * C);
          size_t raw =
              blocks + (first || last ? Vp * C : 0) + (first ? T * C : 0) + (last ? 2 * C : 0);
          size_t psi = (raw + 16 * N - 1) / (16 * N) * (16 * N);
          size_t psi_g = L / (size_t)pp * 12 * C * C + (last ? Vp * C : 0);
          size_t fp32_copy = raw - psi_g + (first && last ? Vp * C : 0);
          for (int zero = 0; zero <= 1; zero++) {
            l.zero = zero;
            mm_breakdown b = mem(&l, stage);
            size_t opt = zero ? 12 * psi / N : 8 * psi;
            size_t params = zero ? 2 * psi_g + 4 * fp32_copy : 4 * psi + 2 * psi_g;
            if (b.parameters != params || b.gradients != 4 * psi || b.optimizer != opt) {
              fprintf(stderr,
                      "L %zu C %zu V %zu N %zu pp %d stage %d zero %d: parameters %zu (want %zu), "
                      "gradients %zu (want %zu), optimizer %zu (want %zu)\n",
                      L, C, Vp, N, pp, stage, zero, b.parameters, params, b.gradients, 4 * psi,
                      b.optimizer, opt);
              failures++;
            }
          }
        }
      }
}

static void cost_model(void) {
  plan_job j = job_of(4, 16, "h100-sxm");
  mm_layout l = small();
  l.dp = 4;
  l.microbatches = 1;
  l.micro_batch = 4;
  plan_result r;
  char err[200];
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  /* the parts add up to the step; no pipeline: no bubble; DP only: no TP/CP/PP time */
  CHECK(fabs(r.compute_s + r.bubble_s + r.tp_s + r.cp_s + r.pp_s + r.grad_sync_s + r.host_s -
             r.step_s) < 1e-12);
  CHECK(r.bubble_s == 0 && r.tp_s == 0 && r.cp_s == 0 && r.pp_s == 0);
  CHECK(fabs(r.tokens_per_s - 16.0 * 64 / r.step_s) < 1e-6 * r.tokens_per_s);
  CHECK(r.memory_total == (double)r.mem.peak + j.dev.baseline_bytes);
  /* compute: the stage's FLOPs at peak x efficiency (one micro-batch of 4 x 64 tokens) */
  double flops = plan_stage_flops_per_microbatch(&r.layout, 0);
  CHECK(fabs(r.compute_s - flops / (j.dev.peak_flops * j.dev.efficiency)) < 1e-15);
  /* a pipeline's bubble is (p - 1) micro-batch times: theory (p-1)/(m+p-1) of compute+bubble */
  j = job_of(4, 16, "h100-sxm");
  l = small();
  l.pp = 2;
  l.dp = 2;
  l.microbatches = 4;
  l.micro_batch = 2;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(fabs(r.bubble_theory - 1.0 / 5.0) < 1e-12);
  CHECK(fabs(r.bubble_s / (r.compute_s + r.bubble_s) - 1.0 / 5.0) < 1e-9);
  /* a layout of the wrong size is refused with the reason */
  l.dp = 3;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) != 0 && strstr(err, "devices"));

  /* recomputation: uncalibrated, its FLOPs (full: one more forward of the blocks = 1/3 of
   * their forward + backward); calibrated with a measured forward share phi, phi of the
   * blocks' time (and selective the attention-forward share alpha). Small model, dp4, one
   * micro-batch of 4 x 64 tokens, C = 64: per layer forward 2(12C^2)x256 + 4C x 64 x 256 =
   * 25165824 + 4194304 = 29360128 FLOPs, forward + backward 88080384, two layers. */
  j = job_of(4, 16, "cpu");
  l = small();
  l.dp = 4;
  l.microbatches = 1;
  l.micro_batch = 4;
  plan_result none, full, sel;
  CHECK(plan_predict(&j, &l, &none, err, sizeof err) == 0);
  l.recompute = MM_RECOMPUTE_FULL;
  CHECK(plan_predict(&j, &l, &full, err, sizeof err) == 0);
  double rate = j.dev.peak_flops * j.dev.efficiency;
  CHECK(fabs((full.compute_s - none.compute_s) * rate - 2 * 29360128.0) < 1e-3);
  j.cal.forward_share = 0.45;
  j.cal.attention_forward_share = 0.12;
  CHECK(plan_predict(&j, &l, &full, err, sizeof err) == 0);
  CHECK(fabs((full.compute_s - none.compute_s) * rate - 2 * 0.45 * 88080384.0) < 1e-3);
  l.recompute = MM_RECOMPUTE_SELECTIVE;
  CHECK(plan_predict(&j, &l, &sel, err, sizeof err) == 0);
  CHECK(fabs((sel.compute_s - none.compute_s) * rate - 2 * 0.12 * 88080384.0) < 1e-3);
}

static void enumeration(void) {
  plan_job j = job_of(4, 16, "cpu");
  j.model.layers = 4; /* pp 2 x 2 virtual stages possible */
  plan_filter f;
  plan_filter_any(&f);
  plan_result *r = NULL;
  char why[200];
  long n = plan_enumerate(&j, &f, &r, why, sizeof why);
  CHECK(n > 50);
  for (long i = 1; i < n; i++) {
    CHECK(r[i - 1].fits >= r[i].fits);
    if (r[i - 1].fits && r[i].fits) CHECK(r[i - 1].tokens_per_s >= r[i].tokens_per_s);
  }
  int seen_tp4 = 0, seen_interleaved = 0;
  for (long i = 0; i < n; i++) {
    const mm_layout *l = &r[i].layout;
    CHECK(l->dp * l->tp * l->pp * l->cp == 4);
    CHECK(l->dp * l->microbatches * l->micro_batch == 16);
    CHECK(!(l->zero >= 2 && l->schedule == MM_SCHED_INTERLEAVED));
    seen_tp4 |= l->tp == 4;
    seen_interleaved |= l->schedule == MM_SCHED_INTERLEAVED;
  }
  CHECK(seen_tp4 && seen_interleaved);
  free(r);
  /* a filter fixes choices */
  f.tp = 2;
  f.zero = 1;
  n = plan_enumerate(&j, &f, &r, why, sizeof why);
  CHECK(n > 0);
  for (long i = 0; i < n; i++)
    CHECK(r[i].layout.tp == 2 && r[i].layout.zero == 1);
  free(r);
  /* nothing fits: still ranked, smallest memory first */
  j = job_of(1, 1, "h100-sxm");
  j.dev.memory_bytes = 1e6;
  plan_filter_any(&f);
  n = plan_enumerate(&j, &f, &r, why, sizeof why);
  CHECK(n > 0 && !r[0].fits && !strcmp(r[0].binding, "memory"));
  for (long i = 1; i < n; i++)
    CHECK(r[i - 1].memory_total <= r[i].memory_total);
  free(r);
}

/* The sweep on threads (plan_sweep.c): the same ranked list as on one thread, over more than one
 * batch of layouts, and its progress ends at the sweep's total. */
typedef struct progress_seen {
  long calls, last_predicted, last_total;
} progress_seen;

static void note_progress(void *ctx, long predicted, long total) {
  progress_seen *p = ctx;
  CHECK(predicted > p->last_predicted && predicted <= total);
  p->calls++;
  p->last_predicted = predicted;
  p->last_total = total;
}

static void sweep_threads(void) {
  plan_job j = job_of(64, 512, "h100-sxm");
  j.model.framework = MM_FW_MEGATRON;
  j.model.layers = 8;
  plan_filter f;
  plan_filter_any(&f);
  plan_result *one = NULL, *many = NULL;
  char why[200];
  progress_seen seen = {0, 0, 0};
  plan_sweep_options o1 = {.threads = 1},
                     o4 = {.threads = 4, .progress = note_progress, .ctx = &seen};
  long n1 = plan_sweep(&j, &f, &o1, &one, why, sizeof why);
  long n4 = plan_sweep(&j, &f, &o4, &many, why, sizeof why);
  fprintf(stderr, "sweep_threads: %ld layouts, %ld predicted in %ld batches\n", n1, seen.last_total,
          seen.calls);
  CHECK(n1 > 1000 && n1 == n4);
  /* more than one batch of 16,384 layouts predicted (the refused ones are not ranked) */
  CHECK(seen.calls >= 2 && seen.last_total > 16384);
  CHECK(seen.last_predicted == seen.last_total && seen.last_total >= n1);
  for (long i = 0; i < n1 && i < n4; i++) {
    char a[160], b[160];
    plan_layout_name(&one[i].layout, a, sizeof a);
    plan_layout_name(&many[i].layout, b, sizeof b);
    if (strcmp(a, b) || one[i].step_s != many[i].step_s ||
        one[i].memory_total != many[i].memory_total || one[i].fits != many[i].fits) {
      CHECK(!"the same ranking on 1 and 4 threads");
      fprintf(stderr, "  #%ld: %s against %s\n", i, a, b);
      break;
    }
  }
  free(one);
  free(many);
}

/* Mixture of experts: the memory of the experts, active FLOPs, EP time, the enumeration. */
static void experts(void) {
  /* memory: 4 experts of 2 (E/ep) per MoE layer, every layer, dp 4, ep 2: the expert buffer
   * (padded to edp x 16 floats) with gradients, AdamW sharded over edp 2 under ZeRO-1 */
  mm_layout l = small();
  l.dp = 4;
  l.zero = 1;
  mm_breakdown dense = mem(&l, 0);
  l.experts = 4;
  l.top_k = 2;
  l.moe_every = 1;
  l.ep = 2;
  mm_breakdown moe = mem(&l, 0);
  size_t C = 64, F = 256, per_expert = 2 * C * F + F + C;
  size_t experts = 2 * 2 * per_expert; /* 2 layers x 2 local experts */
  experts = (experts + 31) / 32 * 32;  /* edp 2 x 16 */
  /* dense flat buffer: each layer's fc/fcproj weights and fc bias (2CF + F) replaced by the
   * router (E C); the block's fcprojb slot stays (unused) */
  long dense_floats = (long)(dense.parameters / 4),
       moe_flat = (long)(moe.parameters / 4) - (long)experts;
  long expect = dense_floats - 2 * (long)(2 * C * F + F) + 2 * 4 * 64;
  CHECK(labs(moe_flat - expect) <= 4 * 16); /* the flat buffer's padding to dp x 16 */
  CHECK(moe.gradients - experts * 4 == moe.parameters - experts * 4);
  CHECK(moe.optimizer == (size_t)(moe_flat * 8 / 4) + experts * 8 / 2);
  char err[200];
  mm_breakdown b;
  l.ep = 3;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "--ep 3"));
  l.ep = 2;
  l.cp = 2;
  CHECK(mm_rank_memory(&l, 0, &b, err, sizeof err) != 0 && strstr(err, "experts"));
  /* FLOPs: one expert, top-1, is the dense model plus the router's E x C per token */
  plan_job j = job_of(4, 16, "h100-sxm");
  l = small();
  l.dp = 4;
  l.micro_batch = 4;
  plan_result rd, rm;
  CHECK(plan_predict(&j, &l, &rd, err, sizeof err) == 0);
  j.model.experts = 1;
  j.model.top_k = 1;
  j.model.moe_every = 1;
  CHECK(plan_predict(&j, &l, &rm, err, sizeof err) == 0);
  double tokens = 4.0 * 64, rate = j.dev.peak_flops * j.dev.efficiency;
  CHECK(fabs(rm.compute_s - rd.compute_s - 2 * 3 * 2.0 * 64 * tokens / rate) < 1e-15);
  CHECK(rm.ep_s == 0);
  /* the MFU numerator: 6 x (router parameters 2 x E x C more) x the step's 16 x 64 tokens */
  double scale = j.dev.peak_flops * j.gpus;
  CHECK(fabs((rm.mfu * rm.step_s - rd.mfu * rd.step_s) * scale - 6.0 * 2 * 64 * 16 * 64) <
        1e-6 * 6.0 * 2 * 64 * 16 * 64);
  /* top-2 of 4 experts: twice the MLP FLOPs; EP 4 adds all-to-all time, EP 1 none */
  j.model.experts = 4;
  j.model.top_k = 2;
  l.ep = 1;
  plan_result r1, r4;
  CHECK(plan_predict(&j, &l, &r1, err, sizeof err) == 0);
  l.ep = 4;
  CHECK(plan_predict(&j, &l, &r4, err, sizeof err) == 0);
  CHECK(r1.ep_s == 0 && r4.ep_s > 0 && r4.compute_s == r1.compute_s);
  CHECK(fabs(r4.compute_s + r4.bubble_s + r4.tp_s + r4.cp_s + r4.pp_s + r4.ep_s + r4.grad_sync_s +
             r4.host_s - r4.step_s) < 1e-12);
  CHECK(r4.mem.parameters < r1.mem.parameters); /* a quarter of the experts per rank */
  /* the enumeration varies ep over the divisors of dp that divide E */
  j = job_of(4, 16, "cpu");
  j.model.experts = 4;
  j.model.top_k = 2;
  j.model.moe_every = 2;
  plan_filter f;
  plan_filter_any(&f);
  plan_result *r = NULL;
  char why[200];
  long n = plan_enumerate(&j, &f, &r, why, sizeof why);
  int seen[5] = {0};
  for (long i = 0; i < n; i++) {
    const mm_layout *x = &r[i].layout;
    CHECK(x->ep >= 1 && x->dp % x->ep == 0 && 4 % x->ep == 0);
    CHECK(x->cp == 1 && !x->sp && x->zero <= 1);
    CHECK((x->ep > 1) == (r[i].ep_s > 0));
    if (x->ep <= 4) seen[x->ep] = 1;
  }
  CHECK(n > 0 && seen[1] && seen[2] && seen[4]);
  free(r);
}

/* The CPU backend's shared cores (docs/plan.md, "Ranks sharing cores"): rate per rank
 * min(1, cores / ranks); a pipeline's idle stages give their cores back; descheduled waits
 * are a calibrated share of the compute; GPUs unaffected. Hand-computed cases. */
static void shared_cores(void) {
  plan_device cpu = *plan_device_find("cpu"), gpu = *plan_device_find("h100-sxm");
  CHECK(gpu.cores == 0 && plan_core_share(&gpu, 64) == 1.0);
  cpu.cores = 2;
  CHECK(plan_core_share(&cpu, 4) == 0.5 && plan_core_share(&cpu, 2) == 1.0 &&
        plan_core_share(&cpu, 1) == 1.0 && fabs(plan_core_share(&cpu, 3) - 2.0 / 3) < 1e-15);

  /* dp4 on 2 cores: each rank at half a core's rate, so compute = FLOPs / (rate / 2) */
  plan_job j = job_of(4, 16, "cpu");
  j.dev.cores = 2;
  mm_layout l = small();
  l.dp = 4;
  l.microbatches = 1;
  l.micro_batch = 4;
  plan_result r, q;
  char err[200];
  double rate = j.dev.peak_flops * j.dev.efficiency;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(fabs(r.compute_s - plan_stage_flops_per_microbatch(&r.layout, 0) / (0.5 * rate)) <
        1e-12 * r.compute_s);
  CHECK(r.wait_s == 0); /* no calibrated waits */
  j.dev.cores = 4;
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(fabs(r.compute_s - 2 * q.compute_s) < 1e-12 * r.compute_s);

  /* pp4 1F1B, 8 micro-batches, 4 ranks on 2 cores (4 layers): 11 slots with 1,2,3,4,4,4,4,4,
   * 3,2,1 stages working, each lasting a chunk's one-core time c = t_mb / 2 times
   * max(1, active / 2): 1,1,1.5,2,2,2,2,2,1.5,1,1 = 17 c = 8.5 t_mb; compute 8 t_mb, so the
   * bubble is 0.5 t_mb = compute / 16 (the one-device-per-rank theory: 3 t_mb) */
  j = job_of(4, 8, "cpu");
  j.model.layers = 4;
  j.dev.cores = 2;
  l = small();
  l.layers = 4;
  l.pp = 4;
  l.microbatches = 8;
  l.micro_batch = 1;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(fabs(r.bubble_s - r.compute_s / 16) < 1e-12 * r.compute_s);
  CHECK(fabs(r.bubble_theory - 3.0 / 11) < 1e-12);
  j.dev.cores = 4; /* one core per rank: the theory, (p - 1) micro-batch times */
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(fabs(q.bubble_s - 3 * q.compute_s / 8) < 1e-12 * q.compute_s);
  CHECK(fabs(r.compute_s - 2 * q.compute_s) < 1e-12 * r.compute_s);
  j.dev = *plan_device_find("h100-sxm"); /* GPUs: the theory */
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(fabs(q.bubble_s - 3 * q.compute_s / 8) < 1e-12 * q.compute_s);

  /* pp2 x dp2, 4 micro-batches, 4 ranks on 2 cores: 5 slots with 2,4,4,4,2 ranks working,
   * max(1, active / 2) = 1,2,2,2,1 = 8 c = 4 t_mb = the compute: the two pipelines' fill
   * and drain use the cores the other stages leave, no bubble */
  j = job_of(4, 8, "cpu");
  j.dev.cores = 2;
  l = small();
  l.pp = 2;
  l.dp = 2;
  l.microbatches = 4;
  l.micro_batch = 1;
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  CHECK(fabs(r.bubble_s) < 1e-12 * r.compute_s);

  /* a calibration on dp4 with 4 ranks on 2 cores: its rate is half a core's, its exposed
   * collectives beyond the modelled ones are descheduled waits, the rest of its step host.
   * Measured: 1e9 FLOP/s per rank, 0.05 s exposed collectives, 0.6 s per step. */
  j = job_of(4, 16, "cpu");
  j.dev.cores = 2;
  l = small();
  l.dp = 4;
  l.microbatches = 1;
  l.micro_batch = 4;
  j.cal.present = 1;
  j.cal.layout = l;
  j.cal.flops_rate = 1e9;
  j.cal.dp_bw = 1e9;
  j.cal.latency_s = 1e-5;
  j.cal.exposed_comm_s = 0.05;
  j.cal.measured_step_s = 0.6;
  plan_calibration_fit_host(&j);
  CHECK(plan_predict(&j, &l, &r, err, sizeof err) == 0);
  double flops = plan_stage_flops_per_microbatch(&r.layout, 0);
  CHECK(fabs(r.compute_s - flops / 1e9) < 1e-12);       /* the run's own rate on its layout */
  CHECK(fabs(r.grad_sync_s + r.wait_s - 0.05) < 1e-12); /* the measured exposed collectives */
  CHECK(r.wait_s > 0 && fabs(j.cal.wait_share - r.wait_s / (0.5 * r.compute_s)) < 1e-12);
  CHECK(fabs(r.step_s - 0.6) < 1e-12 && fabs(r.host_s - (0.6 - r.compute_s - 0.05)) < 1e-12);
  /* the same model on 2 ranks (2 cores): a whole core each, twice the rate, no waits */
  j.gpus = 2;
  j.global_batch = 8;
  l.dp = 2;
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(fabs(q.compute_s - flops / 2e9) < 1e-12 && q.wait_s == 0);
  /* a pipeline on 4 ranks: no waits added (its stages wait in the schedule) */
  j.gpus = 4;
  j.global_batch = 16;
  l.dp = 2;
  l.pp = 2;
  l.microbatches = 2;
  l.micro_batch = 4;
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(q.wait_s == 0);
  /* a GPU job with the same calibration: no core sharing, no waits */
  j.dev = *plan_device_find("h100-sxm");
  l.pp = 1;
  l.dp = 4;
  l.microbatches = 1;
  CHECK(plan_predict(&j, &l, &q, err, sizeof err) == 0);
  CHECK(q.wait_s == 0 && fabs(q.compute_s - flops / 1e9) < 1e-12);

  /* a pipelined calibration (pp2 x dp2, 4 micro-batches) on 2 cores measured a bubble of
   * 0.2 of its span (0.2 - 1/5 = 0 over the one-device theory): the slot model gives no
   * bubble there, so the excess is the whole 0.2; with a core per rank it stays the
   * theory's 0 */
  j = job_of(4, 16, "cpu");
  j.dev.cores = 2;
  l = small();
  l.pp = 2;
  l.dp = 2;
  l.microbatches = 4;
  l.micro_batch = 2;
  j.cal.present = 1;
  j.cal.layout = l;
  j.cal.flops_rate = 1e9;
  j.cal.measured_step_s = 10; /* long: no rate fitting */
  j.cal.bubble_fraction = 0.2;
  j.cal.bubble_excess = 0;
  plan_job k = j;
  plan_calibration_fit_host(&j);
  CHECK(fabs(j.cal.bubble_excess - 0.2) < 1e-12 && j.cal.wait_share == 0);
  k.dev.cores = 4;
  plan_calibration_fit_host(&k);
  CHECK(k.cal.bubble_excess == 0);
}

int main(void) {
  memory_formulas();
  cuda_model_states();
  cost_model();
  enumeration();
  sweep_threads();
  experts();
  shared_cores();
  if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
