/*
 * config.c — option parsing and model presets for stepscope-train (validation:
 * config_validate.c).
 *
 * How it works: every option is a row of one table (name, kind, where it is
 * stored, help text); the parser, the help text and the JSON dump all walk
 * that table, so --help cannot drift from what is parsed. Presets set the
 * model shape first; explicit --layers/--hidden/... override them.
 * Validation (config_validate.c) checks the whole configuration at once, before
 * any process, thread or buffer exists, and names the offending option.
 */
#include "config.h"

#include "model_config.h"
#include "model_presets.h"
#include "sc_json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  OPT_INT,
  OPT_DOUBLE,
  OPT_STRING,
  OPT_FLAG,
  OPT_ONOFF,
  OPT_U64,
  OPT_SPECIAL
} opt_kind;

typedef struct opt_row {
  const char *name;
  opt_kind kind;
  size_t offset;
  size_t size; /* for strings */
  const char *arg;
  const char *help;
  int hidden;
} opt_row;

#define OFF(f) offsetof(train_config, f)
#define SZ(f)  sizeof(((train_config *)0)->f)

static const opt_row rows[] = {
    {"model", OPT_SPECIAL, 0, 0, "NAME",
     "model preset: tiny (2 layers, 64 hidden, 4 heads), gpt2-124m, gpt2-350m, gpt2-774m, "
     "gpt2-1.5b [tiny]",
     0},
    {"layers", OPT_INT, OFF(layers), 0, "N", "transformer blocks (overrides the preset)", 0},
    {"hidden", OPT_INT, OFF(hidden), 0, "C", "model width (overrides the preset)", 0},
    {"heads", OPT_INT, OFF(heads), 0, "H", "attention heads (overrides the preset)", 0},
    {"seq", OPT_INT, OFF(seq), 0, "T",
     "sequence length, at most the model's 1024 positions [tiny: 64, gpt2-*: 1024]", 0},
    {"vocab", OPT_INT, OFF(vocab), 0, "V",
     "vocabulary size, at least the data's [tiny: the data's vocabulary; gpt2-*: 50257]", 0},
    {"world", OPT_INT, OFF(world), 0, "N",
     "rank processes to start on this machine (or WORLD_SIZE under an outside launcher) [1]", 0},
    {"dp", OPT_INT, OFF(dp), 0, "D", "data-parallel degree [world/(tp*pp*cp)]", 0},
    {"tp", OPT_INT, OFF(tp), 0, "T", "tensor-parallel degree (Megatron column/row) [1]", 0},
    {"pp", OPT_INT, OFF(pp), 0, "P", "pipeline-parallel stages [1]", 0},
    {"cp", OPT_INT, OFF(cp), 0, "N",
     "context-parallel degree: each of N ranks holds 2 of the sequence's 2N chunks (zig-zag, "
     "balanced under the causal mask) and ring attention passes keys/values around [1]",
     0},
    {"sp", OPT_FLAG, OFF(sp), 0, NULL, "sequence parallelism inside the TP group", 0},
    {"experts", OPT_INT, OFF(experts), 0, "E",
     "mixture of experts: replace the MLP of every (--moe-every) block with E expert MLPs "
     "and a softmax top-k router (0: dense) [0]",
     0},
    {"top-k", OPT_INT, OFF(top_k), 0, "K",
     "experts per token (gates: the router's probability with K = 1, as Switch; renormalized "
     "over the K with K > 1, as Mixtral) [2, at most E]",
     0},
    {"moe-every", OPT_INT, OFF(moe_every), 0, "N",
     "every N-th block is a mixture of experts (layers N-1, 2N-1, ...) [1]", 0},
    {"aux-loss-coef", OPT_DOUBLE, OFF(aux_loss_coef), 0, "C",
     "load-balancing loss weight: C x E x sum_i f_i P_i per MoE layer and micro-batch "
     "(Switch/GShard), averaged over micro-batches [0.01]",
     0},
    {"capacity-factor", OPT_DOUBLE, OFF(capacity_factor), 0, "F",
     "expert capacity ceil(F x tokens x K / E) per micro-batch; assignments beyond it are "
     "dropped (counted) and the token keeps its residual (0: dropless) [0]",
     0},
    {"ep", OPT_INT, OFF(ep), 0, "N",
     "expert-parallel degree: experts sharded over N data-parallel ranks (consecutive DP "
     "ranks form an EP group; N divides --dp and --experts), tokens dispatched and combined "
     "by all-to-all [1]",
     0},
    {"schedule", OPT_SPECIAL, 0, 0, "afab|1f1b|interleaved",
     "pipeline schedule; interleaved: Megatron's virtual stages, --virtual-stages chunks per "
     "rank [1f1b]",
     0},
    {"virtual-stages", OPT_INT, OFF(virtual_stages), 0, "V",
     "model chunks per pipeline rank with --schedule interleaved (at least 2; --layers "
     "divisible by pp x V, --microbatches a multiple of pp) [2 with interleaved, else 1]",
     0},
    {"microbatches", OPT_INT, OFF(microbatches), 0, "M",
     "micro-batches per DP rank (gradient accumulation; pipeline micro-batches) [1, or 2*pp "
     "with pp > 1]",
     0},
    {"batch", OPT_INT, OFF(batch), 0, "B", "global batch in sequences per optimizer step [8]", 0},
    {"zero", OPT_INT, OFF(zero), 0, "0|1|2|3",
     "ZeRO stage over the gradient group (dp, or dp x cp): 1 shards the AdamW state, 2 also "
     "the gradients (bucketed reduce-scatter), 3 also the parameters (gathered per layer) [0]",
     0},
    {"recompute", OPT_SPECIAL, 0, 0, "none|selective|full",
     "activation recomputation: selective recomputes attention, full whole blocks [none]", 0},
    {"bucket-mb", OPT_DOUBLE, OFF(bucket_mb), 0, "MB", "DP gradient bucket size in MiB [1]", 0},
    {"overlap", OPT_ONOFF, OFF(overlap), 0, "on|off",
     "overlap the DP bucket all-reduce with backward [on]", 0},
    {"steps", OPT_INT, OFF(steps), 0, "K", "optimizer steps [20]", 0},
    {"seed", OPT_U64, OFF(seed), 0, "S", "random seed for weights and data order [1337]", 0},
    {"lr", OPT_DOUBLE, OFF(lr), 0, "X",
     "peak learning rate; positive [1e-3]. A step whose loss or gradient norm is not finite "
     "(diverged) stops the run with exit 1",
     0},
    {"min-lr-ratio", OPT_DOUBLE, OFF(min_lr_ratio), 0, "X",
     "cosine schedule floor as a fraction of --lr [0.1]", 0},
    {"warmup", OPT_INT, OFF(warmup), 0, "N", "linear warmup steps [steps/10]", 0},
    {"weight-decay", OPT_DOUBLE, OFF(weight_decay), 0, "X",
     "AdamW weight decay on matrices and embeddings [0.1]", 0},
    {"grad-clip", OPT_DOUBLE, OFF(grad_clip), 0, "X",
     "clip the global gradient norm to X (0: off) [1.0]", 0},
    {"backend", OPT_STRING, OFF(backend), SZ(backend), "cpu|cuda|auto",
     "compute backend; auto: cuda when this binary has it and a GPU is usable, else cpu "
     "[auto]",
     0},
    {"activations", OPT_STRING, OFF(activations), SZ(activations), "fp32|bf16|auto",
     "activation storage: bf16 halves activation memory and traffic (math stays fp32, one "
     "rounding per stored value); auto: bf16 on CUDA in bf16 precision, else fp32 [auto]",
     0},
    {"gemm-weights", OPT_STRING, OFF(gemm_weights), SZ(gemm_weights), "fp32|bf16|auto",
     "the weights the GEMMs read: bf16, a working copy cast from the fp32 parameters after "
     "every update (2 bytes more per GEMM weight; the ZeRO paper's mixed precision: under "
     "--zero 1/2 the fp32 master weights are then only the rank's shard, of every model "
     "chunk when interleaved); auto: bf16 on CUDA in bf16 precision, else fp32; --zero 3 "
     "reads fp32 [auto]",
     0},
    {"data", OPT_STRING, OFF(data), SZ(data), "FILE",
     "training text or token file (SSTOKENS or llm.c .bin); a file that is neither (a NUL "
     "byte or many control characters in its first 64 KiB) is refused [a small built-in "
     "corpus]",
     0},
    {"bpe-merges", OPT_INT, OFF(bpe_merges), 0, "N",
     "tokenize text --data with N BPE merges learned from it (0: bytes) [0]", 0},
    {"log", OPT_STRING, OFF(log), SZ(log), "FILE",
     "write one JSON object per step (step, loss, step_ms, tokens_per_s, mfu, ...); a write "
     "that fails (a full disk) stops the run with exit 1, as does one to the standard output",
     0},
    {"trace", OPT_STRING, OFF(trace), SZ(trace), "DIR",
     "write a stepscope run directory (one rank-NNNNN.trace.zst per rank; created, with its "
     "parents; one that cannot be written, or a file of that name, is refused with exit 2, "
     "and a trace that fails to be written is exit 1); under `stepscope record -o RUN` the "
     "trace goes to RUN",
     0},
    {"force", OPT_FLAG, OFF(force), 0, NULL,
     "let --trace write into a directory that already holds traces (an earlier run's rank "
     "files beyond this run's world are removed, and so are its derived outputs there: "
     "export, report, Perfetto trace, viewer page; a note names them); without it such a "
     "directory is refused",
     0},
    {"profile-steps", OPT_SPECIAL, 0, 0, "A:B", "trace only steps A..B (inclusive) [all]", 0},
    {"peak-tflops", OPT_DOUBLE, OFF(peak_tflops), 0, "X",
     "peak TFLOP/s of one rank's device for MFU [cpu: 0.1, an assumption, not measured: one "
     "core with two 8-wide fp32 FMA units at ~3 GHz; bench_cpu_peaks measures yours; cuda: "
     "dense bf16 peak from a table by GPU name, 989 for H100 SXM]; must be positive",
     0},
    {"watchdog-s", OPT_DOUBLE, OFF(watchdog_s), 0, "S",
     "a rank silent this long is a hang: the launcher stops the run; communication waits give "
     "up after twice this (once under an outside launcher) [60]",
     0},
    {"quiet", OPT_FLAG, OFF(quiet), 0, NULL, "print only the final summary", 0},
    {"check-config", OPT_FLAG, OFF(check_config), 0, NULL,
     "validate the configuration, print it as JSON and exit (0 valid, 2 not); nothing is "
     "allocated, no device is opened",
     0},
    {"checkpoint-dir", OPT_STRING, OFF(checkpoint_dir), SZ(checkpoint_dir), "DIR",
     "write checkpoints to DIR/step-NNNNNNNN/ (a shard per rank, then manifest.json; atomic)", 0},
    {"checkpoint-every", OPT_INT, OFF(checkpoint_every), 0, "N",
     "checkpoint every N steps and after the last step (0: after the last only) [0]", 0},
    {"checkpoint-keep", OPT_INT, OFF(checkpoint_keep), 0, "K",
     "keep the newest K complete checkpoints [2]", 0},
    {"resume", OPT_FLAG, OFF(resume), 0, NULL,
     "continue from the latest complete checkpoint in --checkpoint-dir (same model shape, "
     "world/dp/tp/pp, zero and seed; on the CPU backend the losses are bitwise those of an "
     "uninterrupted run). Without it, a --checkpoint-dir holding checkpoints is refused",
     0},
    {"debug-dump-params", OPT_STRING, OFF(debug_dump_params), SZ(debug_dump_params), "DIR",
     "testing: after the last step each rank writes its parameters as text to DIR", 1},
    {"debug-die-rank", OPT_INT, OFF(debug_die_rank), 0, "R", "testing: rank R kills itself", 1},
    {"debug-die-step", OPT_INT, OFF(debug_die_step), 0, "S", "testing: ... at step S", 1},
    {"debug-hang-rank", OPT_INT, OFF(debug_hang_rank), 0, "R", "testing: rank R stops", 1},
    {"debug-hang-step", OPT_INT, OFF(debug_hang_step), 0, "S", "testing: ... at step S", 1},
    {"debug-delay", OPT_SPECIAL, 0, 0, "RANK:PHASE:MS",
     "testing the analyzer: rank RANK stops its device for MS ms at PHASE (forward, backward: "
     "every micro-batch's pass; optimizer, data: once per step) in every step, by waiting for "
     "its compute stream and sleeping on the host; repeatable. Testing the trainer: start "
     "(once, before the rank joins the job's shared segment), error (before it reports a "
     "failure)",
     0},
    {"debug-die-in-checkpoint", OPT_SPECIAL, 0, 0, "STEP:RANK:shard|manifest|prune",
     "testing: rank RANK kills itself while writing the checkpoint of STEP", 1},
};

const char *const config_delay_phase_names[DELAY_PHASE_COUNT] = {"forward", "backward", "optimizer",
                                                                 "data",    "start",    "error"};

static void set_err(char *err, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, n, fmt, ap);
  va_end(ap);
}

/* The trainer and the planner name the same shapes (model_presets.c); the layout words are
 * shared too (model_config.c), so the enums must agree with the model library's. */
_Static_assert((int)SCHED_AFAB == (int)MM_SCHED_AFAB && (int)SCHED_1F1B == (int)MM_SCHED_1F1B &&
                   (int)SCHED_INTERLEAVED == (int)MM_SCHED_INTERLEAVED,
               "schedule_kind and mm_schedule agree");
_Static_assert((int)RECOMPUTE_NONE == (int)MM_RECOMPUTE_NONE &&
                   (int)RECOMPUTE_SELECTIVE == (int)MM_RECOMPUTE_SELECTIVE &&
                   (int)RECOMPUTE_FULL == (int)MM_RECOMPUTE_FULL,
               "recompute_kind and mm_recompute agree");

static int apply_preset(train_config *c, const char *name) {
  const mp_preset *p = mp_preset_find(name);
  if (!p) return -1;
  snprintf(c->model, sizeof c->model, "%s", name);
  c->layers = p->layers;
  c->hidden = p->hidden;
  c->heads = p->heads;
  c->seq = p->seq;
  c->max_seq = p->max_seq;
  c->vocab = p->vocab;
  c->vocab_given = p->vocab > 0;
  return 0;
}

static void defaults(train_config *c) {
  memset(c, 0, sizeof *c);
  apply_preset(c, "tiny");
  c->world = 1;
  c->dp = 0; /* derived */
  c->tp = 1;
  c->pp = 1;
  c->cp = 1;
  c->top_k = 2;
  c->moe_every = 1;
  c->aux_loss_coef = 0.01;
  c->ep = 1;
  c->schedule = SCHED_1F1B;
  c->virtual_stages = 0; /* unset: 2 with --schedule interleaved, else 1 */
  c->recompute = RECOMPUTE_NONE;
  c->bucket_mb = 1.0;
  c->overlap = 1;
  c->batch = 8;
  c->microbatches = 1;
  c->steps = 20;
  c->seed = 1337;
  c->lr = 1e-3;
  c->min_lr_ratio = 0.1;
  c->weight_decay = 0.1;
  c->grad_clip = 1.0;
  c->beta1 = 0.9;
  c->beta2 = 0.95;
  c->eps = 1e-8;
  snprintf(c->backend, sizeof c->backend, "auto");
  snprintf(c->activations, sizeof c->activations, "auto");
  snprintf(c->gemm_weights, sizeof c->gemm_weights, "auto");
  c->profile_first = -1;
  c->profile_last = -1;
  c->watchdog_s = 60;
  c->debug_die_rank = -1;
  c->debug_die_step = -1;
  c->debug_hang_rank = -1;
  c->debug_hang_step = -1;
  c->checkpoint_keep = 2;
  c->debug_ckpt_die_step = -1;
  c->debug_ckpt_die_rank = -1;
}

static int parse_int(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < -2147483647L || v > 2147483647L) return -1;
  *out = (int)v;
  return 0;
}

/* A finite number: every real-valued option is a size, a rate or a time, for which inf
 * and nan mean nothing (--lr inf trained on NaN losses). */
static int parse_double(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int parse_special(train_config *c, const char *name, const char *v, char *err, size_t n) {
  if (!strcmp(name, "model")) {
    /* the shape of the preset; explicit shape options given earlier are re-applied by
     * the caller's second pass */
    if (apply_preset(c, v) != 0) {
      set_err(err, n, "--model %s: unknown preset (%s)", v, mp_preset_names());
      return -1;
    }
    return 0;
  }
  if (!strcmp(name, "schedule")) {
    mm_schedule k;
    if (mm_schedule_from_name(v, &k) != 0) {
      set_err(err, n, "--schedule %s: expected afab, 1f1b or interleaved", v);
      return -1;
    }
    c->schedule = (schedule_kind)k;
    return 0;
  }
  if (!strcmp(name, "recompute")) {
    mm_recompute k;
    if (mm_recompute_from_name(v, &k) != 0) {
      set_err(err, n, "--recompute %s: expected none, selective or full", v);
      return -1;
    }
    c->recompute = (recompute_kind)k;
    return 0;
  }
  if (!strcmp(name, "debug-die-in-checkpoint")) {
    int st, rk, used = 0;
    char point[16];
    static const char *const points[] = {"shard", "manifest", "prune"};
    int which = 0;
    if (sscanf(v, "%d:%d:%15[a-z]%n", &st, &rk, point, &used) == 3 && !v[used] && st >= 0 &&
        rk >= 0)
      for (int k = 0; k < 3; k++)
        if (!strcmp(point, points[k])) which = k + 1;
    if (!which) {
      set_err(err, n, "--debug-die-in-checkpoint %s: expected STEP:RANK:shard|manifest|prune", v);
      return -1;
    }
    c->debug_ckpt_die_step = st;
    c->debug_ckpt_die_rank = rk;
    c->debug_ckpt_die_point = which;
    return 0;
  }
  if (!strcmp(name, "debug-delay")) {
    int rk, ms, used = 0, which = -1;
    char phase[16];
    if (sscanf(v, "%d:%15[a-z]:%d%n", &rk, phase, &ms, &used) == 3 && !v[used] && rk >= 0 &&
        ms > 0 && ms <= 600000)
      for (int k = 0; k < DELAY_PHASE_COUNT; k++)
        if (!strcmp(phase, config_delay_phase_names[k])) which = k;
    if (which < 0) {
      set_err(err, n,
              "--debug-delay %s: expected RANK:forward|backward|optimizer|data|start|error:MS "
              "with 0 < MS <= 600000",
              v);
      return -1;
    }
    if (c->ndebug_delays == CONFIG_MAX_DELAYS) {
      set_err(err, n, "--debug-delay: at most %d of them", CONFIG_MAX_DELAYS);
      return -1;
    }
    c->debug_delay[c->ndebug_delays].rank = rk;
    c->debug_delay[c->ndebug_delays].phase = which;
    c->debug_delay[c->ndebug_delays++].ms = ms;
    return 0;
  }
  if (!strcmp(name, "profile-steps")) {
    int a, b;
    char tail;
    if (sscanf(v, "%d:%d%c", &a, &b, &tail) != 2 || a < 0 || b < a) {
      set_err(err, n, "--profile-steps %s: expected A:B with 0 <= A <= B", v);
      return -1;
    }
    c->profile_first = a;
    c->profile_last = b;
    return 0;
  }
  set_err(err, n, "internal: unhandled option --%s", name);
  return -1;
}

/* Options whose presence is recorded besides their value (a default derived later, or the
 * data's vocabulary, gives way to them): parsing one sets its flag. */
static const struct given_flag {
  const char *name;
  size_t offset;
} given_flags[] = {{"vocab", OFF(vocab_given)},
                   {"world", OFF(world_given)},
                   {"microbatches", OFF(microbatches_given)},
                   {"warmup", OFF(warmup_given)},
                   {"peak-tflops", OFF(peak_tflops_given)}};

static void note_given(train_config *c, const char *name) {
  for (size_t i = 0; i < sizeof given_flags / sizeof given_flags[0]; i++)
    if (!strcmp(given_flags[i].name, name)) *(int *)((char *)c + given_flags[i].offset) = 1;
}

static const opt_row *find_row(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (strlen(rows[i].name) == len && !strncmp(rows[i].name, name, len)) return &rows[i];
  return NULL;
}

/* One pass over argv; `only_model` applies --model alone (first pass), otherwise
 * everything but --model (second pass), so explicit shape options win. */
static int parse_pass(train_config *c, int argc, char **argv, int only_model, char *err, size_t n) {
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
    if (strncmp(a, "--", 2) != 0) {
      set_err(err, n, "unexpected argument '%s' (options start with --; see --help)", a);
      return -1;
    }
    const char *name = a + 2;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    const opt_row *r = find_row(name, len);
    if (!r) {
      set_err(err, n, "unknown option '%s' (see --help)", a);
      return -1;
    }
    const char *v = NULL;
    if (r->kind != OPT_FLAG) {
      if (eq)
        v = eq + 1;
      else if (i + 1 < argc)
        v = argv[++i];
      else {
        set_err(err, n, "--%s needs a value (%s)", r->name, r->arg);
        return -1;
      }
    } else if (eq) {
      set_err(err, n, "--%s takes no value", r->name);
      return -1;
    }
    int is_model = !strcmp(r->name, "model");
    if (only_model != is_model) continue;
    char *field = (char *)c + r->offset;
    switch (r->kind) {
    case OPT_INT:
      if (parse_int(v, (int *)field) != 0) {
        set_err(err, n, "--%s %s: not an integer", r->name, v);
        return -1;
      }
      break;
    case OPT_U64: {
      char *end;
      errno = 0;
      unsigned long long u = strtoull(v, &end, 10);
      if (errno || end == v || *end) {
        set_err(err, n, "--%s %s: not a non-negative integer", r->name, v);
        return -1;
      }
      *(unsigned long long *)field = u;
      break;
    }
    case OPT_DOUBLE:
      if (parse_double(v, (double *)field) != 0) {
        set_err(err, n, "--%s %s: not a finite number", r->name, v);
        return -1;
      }
      break;
    case OPT_STRING:
      if (strlen(v) >= r->size) {
        set_err(err, n, "--%s: value too long", r->name);
        return -1;
      }
      snprintf(field, r->size, "%s", v);
      break;
    case OPT_FLAG: *(int *)field = 1; break;
    case OPT_ONOFF:
      if (!strcmp(v, "on"))
        *(int *)field = 1;
      else if (!strcmp(v, "off"))
        *(int *)field = 0;
      else {
        set_err(err, n, "--%s %s: expected on or off", r->name, v);
        return -1;
      }
      break;
    case OPT_SPECIAL:
      if (parse_special(c, r->name, v, err, n) != 0) return -1;
      break;
    }
    note_given(c, r->name);
  }
  return 0;
}

int config_parse(train_config *c, int argc, char **argv, char *err, size_t n) {
  defaults(c);
  int rc = parse_pass(c, argc, argv, 1, err, n);
  if (rc == 1) {
    config_print_help();
    return 1;
  }
  if (rc != 0) return -1;
  rc = parse_pass(c, argc, argv, 0, err, n);
  if (rc == 1) {
    config_print_help();
    return 1;
  }
  if (rc != 0) return -1;
  /* an outside launcher gives the world size */
  const char *ws = getenv("WORLD_SIZE");
  if (!c->world_given && ws && getenv("RANK")) {
    int w;
    if (parse_int(ws, &w) == 0) c->world = w;
  }
  if (c->dp == 0 && c->tp > 0 && c->pp > 0 && c->cp > 0)
    c->dp = c->world / (c->tp * c->pp * c->cp) > 0 ? c->world / (c->tp * c->pp * c->cp) : 1;
  if (!c->microbatches_given && c->pp > 1) c->microbatches = 2 * c->pp;
  if (c->virtual_stages == 0) c->virtual_stages = c->schedule == SCHED_INTERLEAVED ? 2 : 1;
  if (!c->warmup_given) c->warmup = c->steps / 10;
  /* Under `stepscope record -o RUN` (which exports STEPSCOPE_RUN_DIR) the trainer
   * traces into RUN: the injection library joins this program's trace rather than
   * starting its own (docs/gpu-tracer.md), so without this `record` would get
   * nothing, and with --trace elsewhere the GPU records would land away from RUN. */
  const char *record_dir = getenv("STEPSCOPE_RUN_DIR");
  if (record_dir && *record_dir && strcmp(record_dir, c->trace) != 0) {
    if (strlen(record_dir) >= sizeof c->trace) {
      snprintf(err, n, "STEPSCOPE_RUN_DIR is longer than %zu bytes", sizeof c->trace - 1);
      return -1;
    }
    if (c->trace[0] && !getenv("RANK"))
      fprintf(stderr,
              "stepscope-train: under `stepscope record`: tracing into %s, not --trace %s\n",
              record_dir, c->trace);
    snprintf(c->trace, sizeof c->trace, "%s", record_dir);
  }
  return 0;
}

int config_micro_batch(const train_config *c) {
  int div = c->dp * c->microbatches;
  return div > 0 ? c->batch / div : 0;
}

int config_padded_vocab(const train_config *c) {
  return (c->vocab + 63) / 64 * 64;
}

int config_layer_is_moe(const train_config *c, int layer) {
  return c->experts > 0 && c->moe_every >= 1 && (layer + 1) % c->moe_every == 0;
}

/* ---- JSON ------------------------------------------------------------------------ */

static void json_string(char *buf, size_t n, size_t *at, const char *s) {
  sc_json_string_buf(buf, n, at, s, 0);
}

char *config_to_json(const train_config *c) {
  size_t n = 8192;
  char *b = malloc(n);
  if (!b) return NULL;
  size_t at = 0;
#define OUT(...) at += (size_t)snprintf(b + at, at < n ? n - at : 0, __VA_ARGS__)
  OUT("{\"model\":");
  json_string(b, n, &at, c->model);
  OUT(",\"layers\":%d,\"hidden\":%d,\"heads\":%d,\"seq\":%d,\"max_seq\":%d,\"vocab\":%d,"
      "\"padded_vocab\":%d",
      c->layers, c->hidden, c->heads, c->seq, c->max_seq, c->vocab, config_padded_vocab(c));
  OUT(",\"world\":%d,\"dp\":%d,\"tp\":%d,\"pp\":%d,\"cp\":%d,\"sp\":%s", c->world, c->dp, c->tp,
      c->pp, c->cp, c->sp ? "true" : "false");
  OUT(",\"schedule\":\"%s\",\"zero\":%d,\"recompute\":\"%s\",\"bucket_mb\":%g,\"overlap\":%s",
      mm_schedule_name((mm_schedule)c->schedule), c->zero,
      mm_recompute_name((mm_recompute)c->recompute), c->bucket_mb, c->overlap ? "true" : "false");
  OUT(",\"virtual_stages\":%d", c->virtual_stages);
  if (c->experts > 0)
    OUT(",\"experts\":%d,\"top_k\":%d,\"moe_every\":%d,\"aux_loss_coef\":%g,"
        "\"capacity_factor\":%g,\"ep\":%d",
        c->experts, c->top_k, c->moe_every, c->aux_loss_coef, c->capacity_factor, c->ep);
  OUT(",\"batch\":%d,\"microbatches\":%d,\"micro_batch\":%d", c->batch, c->microbatches,
      config_micro_batch(c));
  OUT(",\"steps\":%d,\"seed\":%llu,\"lr\":%g,\"min_lr_ratio\":%g,\"warmup\":%d", c->steps, c->seed,
      c->lr, c->min_lr_ratio, c->warmup);
  OUT(",\"weight_decay\":%g,\"grad_clip\":%g,\"beta1\":%g,\"beta2\":%g,\"eps\":%g", c->weight_decay,
      c->grad_clip, c->beta1, c->beta2, c->eps);
  OUT(",\"backend\":");
  json_string(b, n, &at, c->backend);
  OUT(",\"activations\":");
  json_string(b, n, &at, c->activations);
  OUT(",\"gemm_weights\":");
  json_string(b, n, &at, c->gemm_weights);
  OUT(",\"data\":");
  json_string(b, n, &at, c->data[0] ? c->data : "(built-in corpus)");
  OUT(",\"bpe_merges\":%d", c->bpe_merges);
  OUT(",\"profile_steps\":");
  if (c->profile_first >= 0)
    OUT("[%d,%d]", c->profile_first, c->profile_last);
  else
    OUT("null");
  if (c->ndebug_delays) {
    OUT(",\"debug_delays\":[");
    for (int k = 0; k < c->ndebug_delays; k++)
      OUT("%s{\"rank\":%d,\"phase\":\"%s\",\"ms\":%d}", k ? "," : "", c->debug_delay[k].rank,
          config_delay_phase_names[c->debug_delay[k].phase], c->debug_delay[k].ms);
    OUT("]");
  }
  OUT(",\"peak_tflops\":%g,\"watchdog_s\":%g}", c->peak_tflops, c->watchdog_s);
#undef OUT
  if (at >= n) {
    free(b);
    return NULL;
  }
  return b;
}

void config_print_help(void) {
  printf("usage: stepscope-train [options]\n\n"
         "Trains a GPT-2-style model (pre-LN blocks, causal attention, GELU MLP, tied LM head)\n"
         "with AdamW, on one or more rank processes, and optionally traces it.\n\n"
         "  --world N starts N rank processes on this machine (a launcher that stops all ranks\n"
         "  if one dies or hangs). Under an outside launcher (RANK, WORLD_SIZE, LOCAL_RANK,\n"
         "  MASTER_ADDR, MASTER_PORT set) each process runs one rank; the ranks meet in a\n"
         "  shared-memory segment keyed by STEPSCOPE_JOB_ID or else MASTER_PORT, so they\n"
         "  must share one machine (the CPU backend has no network communicator).\n"
         "  The grid is world = dp x pp x cp x tp with tp varying fastest, then cp, pp, dp.\n"
         "  Embeddings, the final LayerNorm and the LM head are replicated across TP ranks.\n"
         "  Context parallelism (--cp N): each sequence is cut into 2N chunks and CP rank r\n"
         "  holds chunks r and 2N-1-r (balanced under the causal mask) in every layer; ring\n"
         "  attention sends keys/values around the CP ring (and, in backward, their gradients)\n"
         "  while attending to the block at hand, merging blocks by log-sum-exp. Weights are\n"
         "  replicated over CP: gradients are all-reduced (and ZeRO-1 sharded) over dp x cp.\n"
         "  --seq must be divisible by 2 x cp.\n"
         "  Mixture of experts (--experts E --top-k K): expert parallelism (--ep N) is carved\n"
         "  out of DP: consecutive DP ranks form an EP group (ep_rank = dp_rank %% N) and\n"
         "  share the E experts, E/N each; tokens go to their experts' ranks and back by\n"
         "  all-to-all. Expert gradients are summed over the dp/N ranks holding the same\n"
         "  experts, dense ones over all of DP. Experts are replicated over TP. The layout\n"
         "  equals one rank running the same micro-batch size (the load-balancing loss is\n"
         "  per micro-batch).\n\n"
         "options:\n");
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    if (rows[i].hidden) continue;
    char left[64];
    snprintf(left, sizeof left, "--%s%s%s", rows[i].name, rows[i].arg ? " " : "",
             rows[i].arg ? rows[i].arg : "");
    printf("  %-26s %s\n", left, rows[i].help);
  }
  printf("  %-26s %s\n", "--help", "this text");
  printf("\nPer step, rank 0 prints loss, step time, tokens/s and MFU = model FLOPs per step /\n"
         "(step time x peak x world), model FLOPs = 6 x parameters (without the position\n"
         "embedding, a lookup) x tokens + 12 x layers x hidden x seq x tokens; HFU adds\n"
         "recomputed FLOPs (full: the blocks' forward again). Exit status: 0 success, 1 a\n"
         "run-time failure (a rank died, hung or failed), 2 a bad configuration or usage.\n");
}
