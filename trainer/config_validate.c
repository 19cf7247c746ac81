/*
 * config_validate.c — config_validate (config.h): checks the whole configuration at once,
 * before any process, thread or buffer exists, and names the offending option. One helper
 * per group of options (the parallel grid, the schedule, batch and sequence, optimizer,
 * backend, data and debug options, mixture of experts), run in a fixed order so that the
 * first failing check is always the same. It reads nothing on disk but --data's
 * readability: whether --checkpoint-dir and --resume agree with the checkpoints there is
 * ckpt_check_config's question (checkpoint.h), which main.c asks right after this.
 *
 * Why a file of its own: the rules between options grow with every feature; the option
 * table, its parser and --help stay in config.c.
 */
#include "config.h"

#include "device.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- validation: one helper per group of options, in the order the checks run -------- */

/* REQUIRE(cond, fmt, ...): the configuration is invalid unless cond; the message goes to
 * err (err and n are every helper's parameters). */
#define REQUIRE(cond, ...)                                                                         \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      snprintf(err, n, __VA_ARGS__);                                                               \
      return -1;                                                                                   \
    }                                                                                              \
  } while (0)

/* The parallel grid (dp x pp x cp x tp = world) and the model shape it cuts. */
static int validate_grid(const train_config *c, char *err, size_t n) {
  REQUIRE(c->world >= 1 && c->world <= 64, "--world %d: must be between 1 and 64", c->world);
  REQUIRE(c->cp >= 1, "--cp %d: must be at least 1", c->cp);
  REQUIRE(c->dp >= 1, "--dp %d: must be at least 1", c->dp);
  REQUIRE(c->tp >= 1, "--tp %d: must be at least 1", c->tp);
  REQUIRE(c->pp >= 1, "--pp %d: must be at least 1", c->pp);
  REQUIRE((long)c->dp * c->tp * c->pp * c->cp == c->world,
          "--dp %d x --pp %d x --cp %d x --tp %d = %ld does not equal --world %d", c->dp, c->pp,
          c->cp, c->tp, (long)c->dp * c->tp * c->pp * c->cp, c->world);
  REQUIRE(c->layers >= 1, "--layers %d: must be at least 1", c->layers);
  REQUIRE(c->hidden >= 1, "--hidden %d: must be at least 1", c->hidden);
  REQUIRE(c->heads >= 1, "--heads %d: must be at least 1", c->heads);
  REQUIRE(c->hidden % c->heads == 0, "--hidden %d is not divisible by --heads %d", c->hidden,
          c->heads);
  REQUIRE(c->heads % c->tp == 0, "--heads %d is not divisible by --tp %d", c->heads, c->tp);
  REQUIRE(c->layers % c->pp == 0, "--layers %d is not divisible by --pp %d", c->layers, c->pp);
  return 0;
}

/* The pipeline schedule: what --schedule interleaved needs of the other options. */
static int validate_schedule(const train_config *c, char *err, size_t n) {
  if (c->schedule == SCHED_INTERLEAVED) {
    int v = c->virtual_stages;
    REQUIRE(c->pp >= 2, "--schedule interleaved needs --pp of at least 2 (it interleaves "
                        "model chunks across pipeline ranks)");
    REQUIRE(v >= 2,
            "--virtual-stages %d: --schedule interleaved needs at least 2 model "
            "chunks per pipeline rank",
            v);
    REQUIRE(c->layers % (c->pp * v) == 0,
            "--layers %d is not divisible by --pp %d x --virtual-stages %d = %d (each "
            "virtual stage holds the same number of layers)",
            c->layers, c->pp, v, c->pp * v);
    REQUIRE(c->microbatches % c->pp == 0,
            "--microbatches %d is not a multiple of --pp %d, as the interleaved schedule "
            "requires (it runs micro-batches in groups of pp per model chunk)",
            c->microbatches, c->pp);
    REQUIRE(c->zero <= 1,
            "--zero %d: --schedule interleaved supports --zero 0 and 1 so far "
            "(ZeRO-2/3 bucket one model chunk's gradients)",
            c->zero);
  } else {
    REQUIRE(c->virtual_stages == 1, "--virtual-stages %d needs --schedule interleaved",
            c->virtual_stages);
  }
  return 0;
}

/* Sequence, vocabulary and batch sizes, and how SP and CP cut the tokens. */
static int validate_batch(const train_config *c, char *err, size_t n) {
  REQUIRE(c->seq >= 1, "--seq %d: must be at least 1", c->seq);
  REQUIRE(c->seq <= c->max_seq, "--seq %d exceeds the model's %d positions", c->seq, c->max_seq);
  REQUIRE(!c->vocab_given || (c->vocab >= 2 && c->vocab <= 1 << 24),
          "--vocab %d: must be between 2 and 16777216", c->vocab);
  REQUIRE(c->batch >= 1, "--batch %d: must be at least 1", c->batch);
  REQUIRE(c->microbatches >= 1, "--microbatches %d: must be at least 1", c->microbatches);
  REQUIRE(c->batch % (c->dp * c->microbatches) == 0,
          "--batch %d is not divisible by --dp %d x --microbatches %d = %d", c->batch, c->dp,
          c->microbatches, c->dp * c->microbatches);
  int mb = config_micro_batch(c);
  REQUIRE(!c->sp || c->tp > 1, "--sp (sequence parallelism) needs --tp greater than 1");
  REQUIRE(c->cp == 1 || c->seq % (2 * c->cp) == 0,
          "--seq %d is not divisible by 2 x --cp %d = %d (context parallelism cuts each "
          "sequence into 2 x cp chunks, two per rank, zig-zag)",
          c->seq, c->cp, 2 * c->cp);
  REQUIRE(!c->sp || ((long)mb * (c->seq / c->cp)) % c->tp == 0,
          "--sp: the micro-batch's %d tokens%s are not divisible by --tp %d", mb * (c->seq / c->cp),
          c->cp > 1 ? " on each CP rank" : "", c->tp);
  return 0;
}

/* ZeRO, gradient buckets, the step count, the learning-rate schedule and AdamW, and
 * the run's watchdog and peak-FLOPs settings. */
static int validate_optimizer(const train_config *c, char *err, size_t n) {
  REQUIRE(c->zero >= 0 && c->zero <= 3, "--zero %d: the ZeRO stage is 0, 1, 2 or 3", c->zero);
  REQUIRE(c->bucket_mb > 0, "--bucket-mb %g: must be positive", c->bucket_mb);
  REQUIRE(c->steps >= 0, "--steps %d: must not be negative", c->steps);
  REQUIRE(c->lr > 0, "--lr %g: must be positive", c->lr);
  REQUIRE(c->min_lr_ratio >= 0 && c->min_lr_ratio <= 1, "--min-lr-ratio %g: must be in [0,1]",
          c->min_lr_ratio);
  REQUIRE(c->warmup >= 0, "--warmup %d: must not be negative", c->warmup);
  REQUIRE(c->weight_decay >= 0, "--weight-decay %g: must not be negative", c->weight_decay);
  REQUIRE(c->grad_clip >= 0, "--grad-clip %g: must not be negative", c->grad_clip);
  REQUIRE(c->watchdog_s > 0, "--watchdog-s %g: must be positive", c->watchdog_s);
  REQUIRE(!c->peak_tflops_given || c->peak_tflops > 0,
          "--peak-tflops %g: must be positive (leave it out for the backend's default)",
          c->peak_tflops);
  return 0;
}

/* The backend and activation type, and what the chosen backend must support. */
static int validate_backend(const train_config *c, char *err, size_t n) {
  REQUIRE(!strcmp(c->backend, "cpu") || !strcmp(c->backend, "auto") || !strcmp(c->backend, "cuda"),
          "--backend %s: expected cpu, cuda or auto", c->backend);
  REQUIRE(!strcmp(c->activations, "fp32") || !strcmp(c->activations, "bf16") ||
              !strcmp(c->activations, "auto"),
          "--activations %s: expected fp32, bf16 or auto", c->activations);
  REQUIRE(!strcmp(c->gemm_weights, "fp32") || !strcmp(c->gemm_weights, "bf16") ||
              !strcmp(c->gemm_weights, "auto"),
          "--gemm-weights %s: expected fp32, bf16 or auto", c->gemm_weights);
  REQUIRE(c->zero < 3 || strcmp(c->gemm_weights, "bf16") != 0,
          "--gemm-weights bf16 with --zero 3: ZeRO-3's gathered buckets have no bf16 working "
          "copy (use fp32 or auto)");
#ifndef STEPSCOPE_TRAINER_HAVE_CUDA
  REQUIRE(strcmp(c->backend, "cuda") != 0,
          "--backend cuda: the CUDA backend is not built into this binary (use cpu or auto)");
#endif
  if (c->cp > 1 && strcmp(c->backend, "auto") != 0) {
    /* "auto" is decided when the device opens; the trainer checks it there */
    const dev_ops *ops = dev_backend_ops(c->backend);
    const char *missing = NULL;
    REQUIRE(!ops || dev_ops_support_cp(ops, &missing),
            "--cp %d: the %s backend has no %s operation yet, so context parallelism "
            "(ring attention) needs a backend that has it",
            c->cp, c->backend, missing ? missing : "?");
  }
  return 0;
}

/* The data options, the --debug-* fault injections (they name ranks) and the
 * checkpoint cadence. */
static int validate_data_and_debug(const train_config *c, char *err, size_t n) {
  REQUIRE(c->bpe_merges >= 0 && c->bpe_merges <= 65280, "--bpe-merges %d: must be in 0..65280",
          c->bpe_merges);
  REQUIRE(!c->data[0] || access(c->data, R_OK) == 0, "--data %s: cannot read the file", c->data);
  REQUIRE(c->debug_die_rank < c->world, "--debug-die-rank %d: no such rank", c->debug_die_rank);
  REQUIRE(c->debug_hang_rank < c->world, "--debug-hang-rank %d: no such rank", c->debug_hang_rank);
  for (int k = 0; k < c->ndebug_delays; k++)
    REQUIRE(c->debug_delay[k].rank < c->world, "--debug-delay %d:...: no such rank",
            c->debug_delay[k].rank);
  REQUIRE(c->debug_ckpt_die_rank < c->world, "--debug-die-in-checkpoint: no rank %d",
          c->debug_ckpt_die_rank);
  REQUIRE(c->checkpoint_every >= 0, "--checkpoint-every %d: must not be negative",
          c->checkpoint_every);
  REQUIRE(c->checkpoint_keep >= 1, "--checkpoint-keep %d: must be at least 1", c->checkpoint_keep);
  return 0;
}

/* Mixture of experts and expert parallelism, and the options they do not combine with. */
static int validate_experts(const train_config *c, char *err, size_t n) {
  REQUIRE(c->experts >= 0 && c->experts <= 1024, "--experts %d: must be between 0 and 1024",
          c->experts);
  REQUIRE(c->ep >= 1, "--ep %d: must be at least 1", c->ep);
  REQUIRE(c->experts > 0 || c->ep == 1,
          "--ep %d needs --experts (expert parallelism shards "
          "the experts of mixture-of-experts layers)",
          c->ep);
  if (c->experts > 0) {
    REQUIRE(c->top_k >= 1 && c->top_k <= c->experts,
            "--top-k %d: must be between 1 and --experts %d", c->top_k, c->experts);
    REQUIRE(c->moe_every >= 1 && c->moe_every <= c->layers,
            "--moe-every %d: must be between 1 and --layers %d", c->moe_every, c->layers);
    REQUIRE(c->aux_loss_coef >= 0, "--aux-loss-coef %g: must not be negative", c->aux_loss_coef);
    REQUIRE(c->capacity_factor >= 0,
            "--capacity-factor %g: must not be negative (0: "
            "dropless)",
            c->capacity_factor);
    REQUIRE(c->dp % c->ep == 0,
            "--ep %d does not divide --dp %d (expert parallelism is "
            "carved out of the data-parallel ranks)",
            c->ep, c->dp);
    REQUIRE(c->experts % c->ep == 0,
            "--experts %d is not divisible by --ep %d (each EP "
            "rank holds the same number of experts)",
            c->experts, c->ep);
    REQUIRE(c->cp == 1,
            "--experts with --cp %d: not supported (the load-balancing loss "
            "would need the routing counts of whole sequences all-reduced over CP)",
            c->cp);
    REQUIRE(!c->sp, "--experts with --sp: not supported (the experts are replicated over "
                    "TP and run on the whole micro-batch; use --tp without --sp)");
    REQUIRE(c->zero <= 1,
            "--experts with --zero %d: only --zero 0 and 1 so far (ZeRO-1 "
            "shards the dense AdamW state over DP and the experts' over the ranks holding "
            "the same experts)",
            c->zero);
    REQUIRE(c->schedule != SCHED_INTERLEAVED, "--experts with --schedule interleaved: not "
                                              "supported yet (use afab or 1f1b)");
    REQUIRE(c->recompute != RECOMPUTE_FULL,
            "--experts with --recompute full: not supported "
            "(recomputing a block would repeat its token all-to-alls; use none or "
            "selective)");
    if (strcmp(c->backend, "auto") != 0) {
      const dev_ops *ops = dev_backend_ops(c->backend);
      REQUIRE(!ops || (ops->moe_router_forward && ops->moe_dispatch_plan &&
                       ops->moe_expert_matmul_forward),
              "--experts: the %s backend has no mixture-of-experts operations yet", c->backend);
    }
  }
  return 0;
}

int config_validate(const train_config *c, char *err, size_t n) {
  if (validate_grid(c, err, n) != 0 || validate_schedule(c, err, n) != 0 ||
      validate_batch(c, err, n) != 0 || validate_optimizer(c, err, n) != 0 ||
      validate_backend(c, err, n) != 0 || validate_data_and_debug(c, err, n) != 0 ||
      validate_experts(c, err, n) != 0)
    return -1;
  REQUIRE(c->checkpoint_dir[0] || (!c->resume && !c->checkpoint_every),
          "--resume and --checkpoint-every need --checkpoint-dir");
  return 0;
}
#undef REQUIRE
