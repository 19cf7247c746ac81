/*
 * config.h — the trainer's configuration: command-line options, model presets,
 * the parallel grid, and the validation that runs before anything starts.
 *
 * How it works: `config_parse` fills a `train_config` from argv (defaults
 * first, then a preset, then explicit overrides), `config_validate` checks every
 * constraint and names the offending option in its message, and
 * `config_to_json` writes the full configuration for the trace header.
 */
#ifndef STEPSCOPE_TRAINER_CONFIG_H
#define STEPSCOPE_TRAINER_CONFIG_H

#include <stddef.h>

typedef enum { SCHED_AFAB = 0, SCHED_1F1B = 1, SCHED_INTERLEAVED = 2 } schedule_kind;
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE = 1, RECOMPUTE_FULL = 2 } recompute_kind;

#define CONFIG_MAX_DELAYS 16 /* --debug-delay given at most this often */

typedef struct train_config {
  /* model */
  char model[32];
  int layers, hidden, heads, seq, vocab, max_seq;
  int vocab_given; /* --vocab on the command line (else from the data) */
  /* parallel grid */
  int world, dp, tp, pp, cp; /* world = dp x pp x cp x tp */
  int world_given;
  int sp;
  /* mixture of experts (moe.h): experts 0 = a dense MLP in every block */
  int experts, top_k, moe_every; /* E experts, top-K routing, every N-th block is MoE */
  double aux_loss_coef;          /* load-balancing loss weight (Switch/GShard) */
  double capacity_factor;        /* 0: dropless; else capacity ceil(F x N x K / E) per expert */
  int ep;                        /* expert-parallel degree, carved out of dp (divides dp) */
  schedule_kind schedule;
  int virtual_stages; /* model chunks per pipeline rank (--schedule interleaved) */
  int zero;
  recompute_kind recompute;
  double bucket_mb;
  int overlap;
  /* batch */
  int batch;        /* global sequences per optimizer step */
  int microbatches; /* per DP rank */
  int microbatches_given;
  /* optimization */
  int steps;
  unsigned long long seed;
  double lr, min_lr_ratio, weight_decay, grad_clip, beta1, beta2, eps;
  int warmup;
  int warmup_given;
  /* run */
  char backend[16];
  char activations[8];  /* "fp32", "bf16", "auto" (dev_dtype chosen in train.c) */
  char gemm_weights[8]; /* "fp32", "bf16", "auto": what the GEMMs read (model_gemm.c) */
  char data[512];
  int bpe_merges; /* 0: byte tokenizer */
  char log[512];
  char trace[512];
  int profile_first, profile_last; /* steps traced (inclusive), -1: all */
  double peak_tflops;              /* per rank; <= 0: backend default */
  int peak_tflops_given;           /* --peak-tflops on the command line (then > 0) */
  double watchdog_s;
  int quiet;
  int check_config; /* --check-config: validate, print, exit */
  /* checkpoints (checkpoint.h) */
  char checkpoint_dir[512];
  int checkpoint_every; /* steps; 0: only after the last step */
  int checkpoint_keep;  /* complete checkpoints kept */
  int resume;
  int force; /* --force: --trace may write over an earlier run */
  /* testing aids */
  int debug_die_rank, debug_die_step;
  int debug_hang_rank, debug_hang_step;
  /* --debug-die-in-checkpoint STEP:RANK:shard|manifest|prune (point 1: halfway through
   * the shard, 2: before the manifest's rename, 3: rank 0 pruning, once the first old
   * manifest is removed; 0: off) */
  int debug_ckpt_die_step, debug_ckpt_die_rank, debug_ckpt_die_point;
  /* --debug-dump-params DIR: after the last step each rank writes DIR/rank-RRRRR.params,
   * one line "name layer index value" per parameter element of its chunks (tests compare
   * final weights across layouts with it) */
  char debug_dump_params[512];
  /* --debug-delay RANK:PHASE:MS (repeatable): rank RANK idles its device MS ms at PHASE,
   * every step (train_step.c: train_debug_delay) — known causes for validating the analyzer;
   * or waits MS ms at start-up or before reporting an error (launcher tests) */
  struct {
    int rank, phase, ms;
  } debug_delay[CONFIG_MAX_DELAYS];
  int ndebug_delays;
} train_config;

/* Phases of --debug-delay: the first four every step (the device idles); START once,
 * before the rank joins the job's shared segment, and ERROR before it reports a failure
 * (tests of the launcher: a rank that is slow to start or to say why it failed). */
enum {
  DELAY_FORWARD,
  DELAY_BACKWARD,
  DELAY_OPTIMIZER,
  DELAY_DATA,
  DELAY_START,
  DELAY_ERROR,
  DELAY_PHASE_COUNT
};
/* Their names in --debug-delay and the config JSON. */
extern const char *const config_delay_phase_names[DELAY_PHASE_COUNT];

/* Returns 0 on success, 1 when --help was printed (exit 0), -1 on a usage
 * error (message in err; exit 2). */
int config_parse(train_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Checks every constraint; 0 or -1 with a message naming the option. The checkpoints on
 * disk are not read here: ckpt_check_config (checkpoint.h) checks them against --resume. */
int config_validate(const train_config *cfg, char *err, size_t errlen);

/* Derived sizes. */
int config_micro_batch(const train_config *cfg); /* sequences per micro-batch */
int config_padded_vocab(const train_config *cfg);
/* Whether (global) layer `layer` holds a mixture of experts instead of the dense MLP: with
 * --experts, every --moe-every-th block, counting from the last of each group (layers
 * N-1, 2N-1, ...; every block when N = 1). */
int config_layer_is_moe(const train_config *cfg, int layer);

/* The configuration as a JSON object (malloc'd; NULL when out of memory). */
char *config_to_json(const train_config *cfg);

void config_print_help(void);

#endif /* STEPSCOPE_TRAINER_CONFIG_H */
