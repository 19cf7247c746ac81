/*
 * cmd_plan.c — `stepscope plan`: which layout for this model on N devices, and how much
 * memory and time will it take (analyzer/src/plan/ssa_plan.h; docs/plan.md).
 *
 * Parses the model, the job and the layout options, optionally calibrates on a measured
 * run (--from RUN; the model and job then default to the run's), and either predicts one
 * layout (every layout option given, or --what-if on the run's layout) or enumerates them
 * all and prints a ranked table; --json and --csv write every layout. Exit codes: 0 ok,
 * 1 the run could not be read or no layout is possible, 2 usage error.
 *
 * The options are one table (option_table.h): parsing and --help read the same rows.
 * cmd_plan parses, builds the job (plan_build_job: the model from --from, a preset and
 * overrides; the device), then predicts the --what-if layout, the one layout given, or
 * every layout.
 */
#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_env.h"
#include "cli_load.h"
#include "cli_print.h"
#include "model_config.h"
#include "model_presets.h"
#include "cli_output.h"
#include "option_table.h"
#include "ssa_ops.h"
#include "sc_clock.h"
#include "ssa_plan.h"

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || errno || *end || end == v || x < lo || x > hi) {
    cli_print(stderr, "stepscope plan: %s needs an integer in [%d, %d], got '%s'\n", opt, lo, hi,
              v ? v : "");
    return -1;
  }
  *out = (int)x;
  return 0;
}

static int parse_double(const char *opt, const char *v, double lo, double *out) {
  char *end;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (!v || errno || *end || end == v || !(x >= lo)) {
    cli_print(stderr, "stepscope plan: %s needs a number >= %g, got '%s'\n", opt, lo, v ? v : "");
    return -1;
  }
  *out = x;
  return 0;
}

/* A layout word as the trainer spells it (model_config.h): the k of name_of(k), k = 0..2. */
static int parse_word(const char *opt, const char *v, const char *(*name_of)(int), int *out) {
  for (int k = 0; k < 3; k++)
    if (v && !strcmp(v, name_of(k))) {
      *out = k;
      return 0;
    }
  cli_print(stderr, "stepscope plan: %s takes %s, %s or %s, not '%s'\n", opt, name_of(0),
            name_of(1), name_of(2), v ? v : "");
  return -1;
}

static const char *schedule_word(int k) {
  return mm_schedule_name((mm_schedule)k);
}

static const char *recompute_word(int k) {
  return mm_recompute_name((mm_recompute)k);
}

static int parse_schedule(const char *v, int *out) {
  return parse_word("--schedule", v, schedule_word, out);
}

static int parse_recompute(const char *v, int *out) {
  return parse_word("--recompute", v, recompute_word, out);
}

/* Applies one --what-if KEY=VALUE to a layout (and the job's global batch). */
static int apply_what_if(char *kv, mm_layout *l, int *global_batch) {
  char *eq = strchr(kv, '=');
  if (!eq) {
    cli_print(stderr, "stepscope plan: --what-if: '%s' is not KEY=VALUE\n", kv);
    return -1;
  }
  *eq = '\0';
  const char *k = kv, *v = eq + 1;
  int x;
  if (!strcmp(k, "schedule")) return parse_schedule(v, &x) ? -1 : (l->schedule = (mm_schedule)x, 0);
  if (!strcmp(k, "recompute"))
    return parse_recompute(v, &x) ? -1 : (l->recompute = (mm_recompute)x, 0);
  if (!strcmp(k, "sp")) {
    if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "true") && strcmp(v, "false")) {
      cli_print(stderr, "stepscope plan: --what-if sp takes 0/1/true/false, not '%s'\n", v);
      return -1;
    }
    l->sp = !strcmp(v, "1") || !strcmp(v, "true");
    return 0;
  }
  struct {
    const char *key;
    int *field;
    int lo, hi;
  } ints[] = {{"dp", &l->dp, 1, 1 << 20},
              {"tp", &l->tp, 1, 1 << 12},
              {"pp", &l->pp, 1, 1 << 12},
              {"cp", &l->cp, 1, 1 << 12},
              {"zero", &l->zero, 0, 3},
              {"microbatches", &l->microbatches, 1, 1 << 16},
              {"virtual_stages", &l->virtual_stages, 1, 64},
              {"ep", &l->ep, 1, 1 << 12},
              {"global_batch", global_batch, 1, 1 << 24}};
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
    if (!strcmp(k, ints[i].key)) {
      char name[64];
      snprintf(name, sizeof name, "--what-if %s", k);
      return parse_int(name, v, ints[i].lo, ints[i].hi, ints[i].field);
    }
  cli_print(stderr, "stepscope plan: --what-if: unknown key '%s'\n", k);
  return -1;
}

/* What --json and --csv write: n layouts of a job. */
typedef struct plan_output_of {
  const plan_job *job;
  const plan_result *results;
  long n;
  const plan_result *base; /* --what-if: the run's own layout under the model; else NULL */
} plan_output_of;

static int plan_json(const void *what, ssa_out *o) {
  const plan_output_of *p = what;
  return plan_write_json(o, p->job, p->results, p->n, p->base);
}

static int plan_csv(const void *what, ssa_out *o) {
  const plan_output_of *p = what;
  return plan_write_csv(o, p->results, p->n);
}

/* What the command line says. */
typedef struct plan_args {
  plan_job job;
  plan_filter f;
  const char *model, *device, *from, *json_path, *csv_path, *what_if;
  const char *framework, *mlp, *positions, *attention, *precision, *grad_reduce;
  const char *backward_prefetch, *ceilings_from, *ep_dispatcher, *recompute_modules;
  const char *attention_rate;
  int layers, hidden, heads, vocab, seq, ffn, max_seq, kv_heads, untied, head_dim, moe_ffn;
  int experts, top_k, moe_every, window, full_attention_every;
  int top, threads, cores, nics_per_node;
  double mem_gib, bucket_mb, undecided_pct, nic_gbps, nvlink_gbs;
  double dropout; /* < 0: not given */
} plan_args;

static int opt_int(const cli_option *o, const char *v, void *cmd) {
  return parse_int(o->name, v, (int)o->lo, (int)o->hi, (int *)((char *)cmd + o->offset)) ? 2 : 0;
}

static int opt_double(const cli_option *o, const char *v, void *cmd) {
  return parse_double(o->name, v, o->lo, (double *)((char *)cmd + o->offset)) ? 2 : 0;
}

static int opt_schedule(const cli_option *o, const char *v, void *cmd) {
  return parse_schedule(v, &((plan_args *)cmd)->f.schedule) ? 2 : 0;
}

static int opt_recompute(const cli_option *o, const char *v, void *cmd) {
  return parse_recompute(v, &((plan_args *)cmd)->f.recompute) ? 2 : 0;
}

static const char *device_help(void) {
  static char help[256];
  snprintf(help, sizeof help, "%s [h100-sxm; the run's device with --from]", plan_device_names());
  return help;
}

#define A(f) offsetof(plan_args, f)
#define INT(name, meta, field, lo, hi, help)                                                       \
  { CLI_CALL, name, NULL, meta, help, A(field), opt_int, lo, hi, NULL }
#define DBL(name, meta, field, lo, help)                                                           \
  { CLI_CALL, name, NULL, meta, help, A(field), opt_double, lo, 0, NULL }
#define STR(name, meta, field, help)                                                               \
  { CLI_STRING, name, NULL, meta, help, A(field), NULL, 0, 0, NULL }

static const cli_option plan_options[] = {
    STR("--model", "NAME", model,
        "tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1.5b (the\n"
        "trainer's); gpt3-125m ... gpt3-175b, llama3-8b, llama3-70b,\n"
        "llama3-405b, mixtral-8x7b, mixtral-8x22b, qwen3-30b-a3b,\n"
        "qwen3-235b-a22b, gpt-oss-120b (real models, docs/plan.md)"),
    INT("--layers", "N", layers, 1, 100000,
        "transformer blocks (overrides or replaces the preset)"),
    INT("--hidden", "C", hidden, 1, 1 << 20, "model width (overrides or replaces the preset)"),
    INT("--heads", "H", heads, 1, 1 << 16, "attention heads (overrides or replaces the preset)"),
    INT("--vocab", "V", vocab, 1, 1 << 24, "vocabulary size (overrides or replaces the preset)"),
    INT("--seq", "T", seq, 1, 1 << 24, "sequence length [preset's; 1024 for gpt2-*]"),
    INT("--ffn", "F", ffn, 1, 1 << 24, "MLP width [4 x hidden]"),
    INT("--max-seq", "N", max_seq, 1, 1 << 24, "position table rows [1024]"),
    INT("--kv-heads", "H", kv_heads, 1, 1 << 16, "grouped-query attention: K/V heads [--heads]"),
    INT("--head-dim", "D", head_dim, 1, 1 << 16,
        "a head's width where heads x D is not --hidden (Qwen3: 64\n"
        "heads of 128 on 4096) [hidden / heads]"),
    STR("--mlp", "gelu|swiglu", mlp,
        "the MLP: two matrices with biases (GPT), or gated,\n"
        "three without (Llama's SwiGLU) [gelu]"),
    STR("--positions", "learned|rope", positions,
        "a learned position table (GPT), or rotary (none) [learned]"),
    STR("--attention", "flash|unfused", attention,
        "a framework's attention kernel: fused/flash (no s x s\n"
        "matrix), or unfused (Megatron before FlashAttention) [flash];\n"
        "stepscope-cuda: flash is STEPSCOPE_CUDA_ATTENTION=fused,\n"
        "unfused its default GEMM path [unfused]"),
    {CLI_FLAG, "--untied", NULL, NULL, "the LM head is not the embedding (Llama)", A(untied), NULL,
     0, 0, NULL},
    DBL("--dropout", "P", dropout, 0,
        "a framework's dropout probability: above 0 its masks are\n"
        "stored (Megatron's default 0.1; GPT-3, BLOOM), at 0 none\n"
        "(Llama, Mixtral, Qwen3, GPT-OSS, MPT) [0.1; the real models'\n"
        "presets: theirs]"),
    INT("--sliding-window", "W", window, 1, 1 << 24,
        "sliding-window attention: a query attends to the W most\n"
        "recent positions, itself included (GPT-OSS: 128; Mistral\n"
        "7B: 4096); its FLOPs and time are the key tiles\n"
        "FlashAttention visits [none]"),
    INT("--full-attention-every", "N", full_attention_every, 1, 100000,
        "with --sliding-window: every N-th layer attends to the\n"
        "whole sequence (Megatron's --window-attn-skip-freq;\n"
        "GPT-OSS: 2, alternating) [every layer sliding]"),
    INT("--experts", "E", experts, 0, 1024,
        "mixture of experts, E expert MLPs (stepscope-train's;\n"
        "layouts then also vary --ep, FLOPs count active parameters)"),
    INT("--top-k", "K", top_k, 1, 1024, "experts per token, with --experts [2]"),
    INT("--moe-every", "N", moe_every, 1, 100000,
        "every N-th block is a mixture of experts, with --experts [1]"),
    INT("--moe-ffn", "F", moe_ffn, 1, 1 << 24,
        "an expert's MLP width, with --experts (Qwen3-30B-A3B: 768)\n"
        "[--ffn]"),
    CLI_TEXT_ROW("job:\n"),
    STR("--precision", "bf16|fp8", precision,
        "a framework's GEMMs in bf16, or fp8 at the device's fp8\n"
        "peak (h100-sxm, h200; MFU stays against bf16's); megatron\n"
        "and deepspeed (TransformerEngine) store their inputs for\n"
        "the backward in fp8, fsdp (torchao) in bf16 [bf16]"),
    STR("--framework", "NAME", framework,
        "whose memory conventions and layouts: megatron (ZeRO\n"
        "0-1; pipelines 1F1B, interleaved; a layer's forward and\n"
        "backward of a micro-batch at least 4.1 ms, 8.2 with\n"
        "experts, 12.0 with the alltoall dispatcher across EP\n"
        "ranks: Megatron-Core's host floor), fsdp (ZeRO 0, 2, 3;\n"
        "gradients reduced in every micro-batch unless pipelined),\n"
        "deepspeed (ZeRO 0-3; with a pipeline ZeRO 0-1, 1F1B; no\n"
        "CP: its sequence parallelism is Ulysses, not modelled),\n"
        "composer (fsdp's conventions on data parallelism alone,\n"
        "recompute none or full, backward prefetch post: MosaicML\n"
        "Composer as llm-foundry runs it),\n"
        "stepscope-cpu, stepscope-cuda (docs/plan.md): the sweep\n"
        "offers only what it runs, a layout it cannot is refused\n"
        "[megatron; the stepscope trainer's with --from or\n"
        "--device cpu]"),
    INT("--gpus", "N", job.gpus, 1, 1 << 20, "devices [the run's world with --from]"),
    INT("--gpus-per-node", "G", job.gpus_per_node, 1, 1 << 16,
        "devices per node (groups inside a node use its links) [8]"),
    INT("--global-batch", "B", job.global_batch, 1, 1 << 24,
        "sequences per optimizer step [the run's with --from]"),
    {CLI_STRING, "--device", NULL, "D", NULL, A(device), NULL, 0, 0, device_help},
    DBL("--device-memory-gib", "X", mem_gib, 0.001, "memory per device instead of the table's"),
    INT("--nics-per-node", "N", nics_per_node, 1, 1024,
        "GPUs: the network interfaces of a node (all of its\n"
        "devices share them) [8]"),
    DBL("--nic-gbps", "G", nic_gbps, 0.001,
        "GPUs: one NIC's bandwidth, Gb/s (400: NDR InfiniBand or\n"
        "400G RoCE; 200: HDR) [h100-sxm, h200 400; a100-80g 200]"),
    DBL("--nvlink-gbs", "G", nvlink_gbs, 0.001,
        "GPUs: a device's bandwidth inside a node, GB/s one way\n"
        "(NVLink/NVSwitch; a PCIe node's) [h100-sxm, h200 450;\n"
        "a100-80g 300]"),
    INT("--cores", "N", cores, 1, 1 << 20,
        "cpu: the cores the ranks of a node share (their rate is\n"
        "min(1, cores / ranks) of a core's) [this machine's, assumed]"),
    {CLI_UNFLAG, "--no-overlap", NULL, NULL,
     "gradient reduction not overlapped with the backward\n"
     "(overlapped under a framework, it slows the compute\n"
     "beside it: the header's overlap: line, docs/plan.md)",
     A(job.overlap), NULL, 0, 0, NULL},
    STR("--grad-reduce-dtype", "fp32|bf16|fp16", grad_reduce,
        "a framework's data-parallel gradient reduction (e.g.\n"
        "fp16: Megatron-LM of 2021 with --fp16 and no\n"
        "--accumulate-allreduce-grads-in-fp32; Megatron keeps its\n"
        "gradients in this dtype) [megatron, fsdp\n"
        "fp32; deepspeed bf16]; refused for the stepscope\n"
        "trainer (stepscope-cpu/-cuda, --from RUN: fp32)"),
    STR("--backward-prefetch", "pre|post", backward_prefetch,
        "fsdp FULL_SHARD's backward_prefetch: pre (BACKWARD_PRE,\n"
        "torch's default: the next unit's all-gather overlaps the\n"
        "gradient computation) or post (BACKWARD_POST, Composer's\n"
        "default: issued after it, each one exposed) [fsdp pre;\n"
        "composer post]"),
    {CLI_FLAG, "--tp-comm-overlap", NULL, NULL,
     "megatron's --tp-comm-overlap: TP's all-gathers and\n"
     "reduce-scatters overlap the GEMMs beside them\n"
     "(TransformerEngine's userbuffers); only layouts with tp > 1,\n"
     "SP and TP inside a node then [off, as in Megatron]",
     A(job.tp_comm_overlap), NULL, 0, 0, NULL},
    STR("--recompute-modules", "M,...", recompute_modules,
        "--framework megatron: what selective recomputation\n"
        "recomputes, Megatron-Core's --recompute-modules: core_attn,\n"
        "layernorm, mlp, moe_act, moe (comma-separated) [core_attn]"),
    STR("--ep-dispatcher", "alltoall|allgather|deepep", ep_dispatcher,
        "a framework's experts' token exchange: alltoall (NCCL's,\n"
        "one copy a token and expert it goes to: Megatron's\n"
        "--moe-token-dispatcher-type alltoall), allgather (every\n"
        "token of the expert-TP x EP group gathered to each rank,\n"
        "outputs reduce-scattered back: Megatron's allgather, its\n"
        "default) or deepep (DeepEP, HybridEP: a token once to each\n"
        "rank it goes to, across nodes once to each node,\n"
        "forwarded over NVLink there) [alltoall]"),
    STR("--attention-rate", "split|share|cudnn", attention_rate,
        "a framework's fused attention: share: the device table's\n"
        "share of peak, grown with the length as FlashAttention's\n"
        "rate (fit on published runs at 2K-8K); cudnn: cuDNN's own\n"
        "rate measured by length (TransformerEngine's attention;\n"
        "--framework megatron on h100-sxm or h200, heads of 128);\n"
        "split: cuDNN's rate plus, per token, the time the share\n"
        "charges beyond it at 2K, which follows published runs\n"
        "from 4K to 128K best (docs/plan.md) [split where cuDNN's\n"
        "rate applies, share elsewhere]"),
    CLI_TEXT_ROW("layout (each fixes that choice; all of them: predict one layout):\n"),
    INT("--dp", "N", f.dp, 1, 1 << 20, "data-parallel degree"),
    INT("--tp", "N", f.tp, 1, 1 << 12, "tensor-parallel degree"),
    INT("--pp", "N", f.pp, 1, 1 << 12, "pipeline-parallel stages"),
    INT("--cp", "N", f.cp, 1, 1 << 12, "context-parallel degree"),
    {CLI_FLAG, "--sp", NULL, NULL, "sequence parallelism", A(f.sp), NULL, 0, 0, NULL},
    {CLI_UNFLAG, "--no-sp", NULL, NULL, "no sequence parallelism", A(f.sp), NULL, 0, 0, NULL},
    INT("--zero", "0..3", f.zero, 0, 3, "ZeRO stage"),
    {CLI_CALL, "--recompute", NULL, "none|selective|full",
     "activation recomputation (selective: the attention core,\n"
     "or what --recompute-modules names)",
     0, opt_recompute, 0, 0, NULL},
    INT("--microbatches", "M", f.microbatches, 1, 1 << 16, "micro-batches per DP rank"),
    {CLI_CALL, "--schedule", NULL, "afab|1f1b|interleaved", "pipeline schedule", 0, opt_schedule, 0,
     0, NULL},
    INT("--virtual-stages", "V", f.virtual_stages, 2, 64,
        "model chunks per pipeline rank (interleaved) [the sweep's:\n"
        "2 to 8; a larger V is predicted when named]"),
    DBL("--bucket-mb", "MB", bucket_mb, 0.0001, "DP gradient bucket size in MiB [1]"),
    INT("--ep", "N", f.ep, 1, 1 << 12,
        "with --experts: expert parallelism carved out of dp (of\n"
        "tp x cp x dp with --expert-tp 1)"),
    INT("--expert-tp", "N", f.expert_tp, 1, 1 << 12,
        "--framework megatron, --experts: each expert cut over N TP\n"
        "ranks: --tp, or 1, whole on a rank with the EP group folded\n"
        "into tp x cp x dp (--expert-tensor-parallel-size 1; needs SP)\n"
        "[both: --tp, and 1 where tp > 1 with SP]"),
    INT("--shard-group", "N", f.shard_group, 0, 1 << 20,
        "--framework fsdp or composer, --zero 2/3: hybrid sharding\n"
        "(HYBRID_SHARD, _HYBRID_SHARD_ZERO2), the states sharded over\n"
        "N ranks of the DP group, replicated across; 0: over the\n"
        "whole group [both: 0, and the group's members in a node\n"
        "when it spans nodes]"),
    CLI_TEXT_ROW("calibration:\n"),
    STR("--ceilings-from", "RUN", ceilings_from,
        "a framework's GEMM ceiling measured in a real GPU run (a\n"
        "PyTorch profiler trace with record_shapes, or a stepscope\n"
        "trace): its bf16 (fp8) GEMMs' FLOP/s over the peak, their\n"
        "tile quantization taken out; its causal fused attention's\n"
        "too when it has forward and backward [the device table's]"),
    STR("--from", "RUN", from,
        "a traced stepscope-train run: achieved FLOP rate, measured\n"
        "bandwidths and latency, host overhead, bubble excess, memory\n"
        "baseline (otherwise the device table's values are assumed)"),
    STR("--what-if", "K=V,...", what_if,
        "with --from: the run's layout changed (keys: dp tp pp cp sp\n"
        "zero recompute microbatches schedule virtual_stages ep (a\n"
        "run with experts) global_batch), predicted beside what the\n"
        "run measured"),
    CLI_TEXT_ROW("output:\n"),
    INT("--top", "N", top, 1, INT_MAX, "rows of the table [20]"),
    DBL("--undecided-within", "PCT", undecided_pct, 0.01,
        "layouts predicted within PCT % of the best are one undecided\n"
        "group: the planner's error between two layouts is that large\n"
        "[10: the error measured, docs/plan.md]"),
    STR("--json", "FILE", json_path, "every layout as JSON (docs/plan.md); '-' = stdout"),
    STR("--csv", "FILE", csv_path, "every layout as CSV; '-' = stdout"),
    INT("--threads", "N", threads, 0, 4096,
        "threads for loading --from RUN and predicting the layouts\n"
        "(the ranking is the same with any number) [all cores]"),
};

static const cli_table plan_table = {
    .command = "plan",
    .head = "usage: stepscope plan --gpus N --global-batch B [--model NAME] [options]\n"
            "Predicts per-device memory (by component) and step time, tokens/s and MFU of every\n"
            "parallel layout of a GPT model on N devices that the --framework runs (the\n"
            "Ultra-Scale Playbook's calculators for stepscope-train's layouts), ranked best first\n"
            "with the constraint that binds.\n"
            "\n"
            "model (as stepscope-train takes it):\n",
    CLI_ROWS(plan_options),
    .column = 24,
    .flags = CLI_ARGS_NONE | CLI_MISSING_TO_CALL | CLI_UNKNOWN_QUOTED | CLI_UNKNOWN_SEE_HELP};

/* The model's architecture as the options name it (--dropout, --mlp, --positions, --attention)
 * over the preset's. 0, or 2 after the message. */
static int apply_architecture(const plan_args *p, mm_layout *m) {
  if (p->dropout > 1) {
    cli_print(stderr, "stepscope plan: --dropout takes a probability from 0 to 1, not %g\n",
              p->dropout);
    return 2;
  }
  if (p->dropout >= 0) m->no_dropout = p->dropout == 0;
  if (p->mlp && strcmp(p->mlp, "gelu") && strcmp(p->mlp, "swiglu")) {
    cli_print(stderr, "stepscope plan: --mlp takes gelu or swiglu, not '%s'\n", p->mlp);
    return 2;
  }
  if (p->mlp) m->gated_mlp = !strcmp(p->mlp, "swiglu");
  if (p->positions && strcmp(p->positions, "learned") && strcmp(p->positions, "rope")) {
    cli_print(stderr, "stepscope plan: --positions takes learned or rope, not '%s'\n",
              p->positions);
    return 2;
  }
  if (p->positions) m->rope = !strcmp(p->positions, "rope");
  if (p->attention && strcmp(p->attention, "flash") && strcmp(p->attention, "unfused")) {
    cli_print(stderr, "stepscope plan: --attention takes flash or unfused, not '%s'\n",
              p->attention);
    return 2;
  }
  m->unfused_attention = p->attention && !strcmp(p->attention, "unfused");
  /* the trainer's CUDA backend runs its fused kernels only when asked (device_cuda.c) */
  m->fused_attention = p->attention && !strcmp(p->attention, "flash");
  return 0;
}

/* The model of the job: --from's, then the preset's, then the explicit
 * overrides; checked. 0, or the exit status after the message. */
static int build_model(plan_args *p) {
  mm_layout *m = &p->job.model;
  memset(m, 0, sizeof *m);
  m->max_seq = 1024;
  m->bucket_mb = p->bucket_mb;
  if (p->from) {
    char err[512];
    cli_env env; /* the decompression limits */
    cli_env_read(&env);
    if (plan_calibrate_from_run(p->from, p->threads, &env.import, &p->job.cal, err, sizeof err) !=
        0) {
      cli_print(stderr, "stepscope plan: --from %s: %s\n", p->from, err);
      return 1;
    }
    const mm_layout *c = &p->job.cal.layout;
    m->layers = c->layers;
    m->hidden = c->hidden;
    m->heads = c->heads;
    m->vocab = c->vocab;
    m->seq = c->seq;
    m->max_seq = c->max_seq;
    m->experts = c->experts;
    m->top_k = c->top_k;
    m->moe_every = c->moe_every;
    m->bucket_mb = c->bucket_mb;
    m->gemm_weights_bf16 = c->gemm_weights_bf16;
    if (!p->job.gpus) p->job.gpus = c->dp * c->tp * c->pp * c->cp;
    if (!p->job.global_batch) p->job.global_batch = c->dp * c->microbatches * c->micro_batch;
    if (!p->device) p->device = plan_device_kind_of_name(p->job.cal.device_name);
  }
  const mp_plan_preset *real =
      p->model && !mp_preset_find(p->model) ? mp_plan_preset_find(p->model) : NULL;
  if (real) { /* a model as real jobs train it (model_presets.h) */
    m->layers = real->layers;
    m->hidden = real->hidden;
    m->heads = real->heads;
    m->kv_heads = real->kv_heads;
    m->head_dim = real->head_dim;
    m->moe_ffn = real->moe_ffn;
    m->ffn = real->ffn;
    m->vocab = real->vocab;
    m->seq = real->seq;
    m->max_seq = real->seq;
    m->gated_mlp = real->gated_mlp;
    m->rope = real->rope;
    m->untied = real->untied;
    m->window = real->window;
    m->full_attention_every = real->full_attention_every;
    m->no_dropout = real->no_dropout;
    if (real->experts > 0 && p->experts < 0) {
      p->experts = real->experts;
      p->top_k = real->top_k;
      p->moe_every = 1;
    }
  } else if (p->model) {
    const mp_preset *pr = mp_preset_find(p->model);
    if (!pr) {
      cli_print(stderr,
                "stepscope plan: unknown --model '%s' (%s, %s; or give --layers --hidden "
                "--heads --vocab)\n",
                p->model, mp_preset_names(), mp_plan_preset_names());
      return 2;
    }
    m->layers = pr->layers;
    m->hidden = pr->hidden;
    m->heads = pr->heads;
    m->seq = pr->seq;
    m->vocab = pr->vocab > 0 ? pr->vocab : MP_BUILTIN_CORPUS_VOCAB; /* tiny: the trainer's
                                                                        built-in corpus */
    m->max_seq = pr->max_seq;
  }
  if (p->layers) m->layers = p->layers;
  if (p->hidden) m->hidden = p->hidden;
  if (p->heads) m->heads = p->heads;
  if (p->vocab) m->vocab = p->vocab;
  if (p->seq) m->seq = p->seq;
  if (p->ffn) m->ffn = p->ffn;
  if (p->max_seq) m->max_seq = p->max_seq;
  if (p->kv_heads) m->kv_heads = p->kv_heads;
  if (p->head_dim) m->head_dim = p->head_dim;
  if (p->moe_ffn) m->moe_ffn = p->moe_ffn;
  if (p->window) m->window = p->window;
  if (p->full_attention_every) m->full_attention_every = p->full_attention_every;
  if (p->untied > 0) m->untied = 1;
  if (apply_architecture(p, m)) return 2;
  if (m->kv_heads && m->heads && m->heads % m->kv_heads) {
    cli_print(stderr, "stepscope plan: --kv-heads %d must divide --heads %d\n", m->kv_heads,
              m->heads);
    return 2;
  }
  if (p->experts >= 0) {
    m->experts = p->experts;
    m->top_k = p->top_k;
    m->moe_every = p->moe_every;
  }
  if (m->experts > 0 && (m->top_k > m->experts || m->moe_every > (m->layers ? m->layers : 1))) {
    cli_print(stderr,
              "stepscope plan: --top-k %d must be at most --experts %d and --moe-every "
              "%d at most the layers\n",
              m->top_k, m->experts, m->moe_every);
    return 2;
  }
  if (m->experts <= 0 && p->f.ep > 1) {
    cli_print(stderr, "stepscope plan: --ep %d needs --experts\n", p->f.ep);
    return 2;
  }
  if (m->full_attention_every > 0 && m->window <= 0) {
    cli_print(stderr, "stepscope plan: --full-attention-every %d needs --sliding-window\n",
              m->full_attention_every);
    return 2;
  }
  if (m->experts <= 0 && m->moe_ffn > 0) {
    cli_print(stderr, "stepscope plan: --moe-ffn %d needs --experts\n", m->moe_ffn);
    return 2;
  }
  if (m->experts <= 0 && p->f.expert_tp > 0) {
    cli_print(stderr, "stepscope plan: --expert-tp %d needs --experts\n", p->f.expert_tp);
    return 2;
  }
  if (!m->layers || !m->hidden || !m->heads || !m->vocab || !m->seq) {
    cli_print(stderr, "stepscope plan: describe the model: --model NAME, or --layers --hidden "
                      "--heads --vocab --seq (or --from RUN)\n");
    return 2;
  }
  if (m->seq > m->max_seq && !m->rope) {
    cli_print(stderr,
              "stepscope plan: --seq %d exceeds the learned position table's %d positions: give "
              "--max-seq %d or more (the table's size), or --positions rope\n",
              m->seq, m->max_seq, m->seq);
    return 2;
  }
  return 0;
}

/* --recompute-modules: Megatron-Core's module names (transformer_config.py recompute_modules)
 * into m->recompute_modules; refused (-1, with the reason) for another framework, an unknown or
 * repeated name, or experts' modules without experts. */
static int parse_recompute_modules(const char *list, mm_layout *m) {
  if (m->framework != MM_FW_MEGATRON) {
    cli_print(stderr, "stepscope plan: --recompute-modules is Megatron-Core's: give --framework "
                      "megatron (the other frameworks' selective recomputation is the attention "
                      "core's)\n");
    return -1;
  }
  int bits = 0;
  for (const char *w = list; *w;) {
    size_t n = strcspn(w, ",");
    int k = 0;
    while (k < MM_RC_MODULES &&
           (strlen(mm_recompute_module_name(k)) != n || strncmp(w, mm_recompute_module_name(k), n)))
      k++;
    if (k == MM_RC_MODULES || (bits & (1 << k))) {
      cli_print(stderr,
                "stepscope plan: --recompute-modules '%s': %s '%.*s' (core_attn, "
                "layernorm, mlp, moe_act, moe)\n",
                list, k == MM_RC_MODULES ? "unknown module" : "repeated module", (int)n, w);
      return -1;
    }
    bits |= 1 << k;
    w += n + (w[n] == ',');
  }
  if (!bits || ((bits & (MM_RC_MOE_ACT | MM_RC_MOE)) && m->experts <= 0)) {
    cli_print(stderr, "stepscope plan: --recompute-modules '%s': %s\n", list,
              bits ? "moe and moe_act recompute a mixture of experts (--experts)"
                   : "no module named");
    return -1;
  }
  m->recompute_modules = bits;
  return 0;
}

/* 2, after the message, where the model has what the stepscope trainer cannot run (a real
 * framework's model features), whichever way the trainer was chosen; else 0. */
static int trainer_model_refused(const mm_layout *m) {
  if (!(m->kv_heads || m->gated_mlp || m->untied || m->rope || m->head_dim || m->moe_ffn ||
        m->window))
    return 0;
  cli_print(stderr, "stepscope plan: the stepscope trainer has no --kv-heads, --mlp swiglu, "
                    "--untied, --positions rope, --head-dim, --moe-ffn or --sliding-window (a "
                    "real model needs a --framework: megatron, fsdp, composer, deepspeed)\n");
  return 2;
}

/* The framework whose conventions the memory follows (--framework; default: the stepscope
 * trainer's for a measured run or the cpu device, else Megatron-LM). 0, or the exit status. */
static int apply_framework(plan_args *p) {
  static const struct {
    const char *name;
    mm_framework framework;
    int act_bytes; /* the trainer's activation storage: 4 on its CPU backend, 2 in CUDA bf16 */
    int composer;  /* PyTorch FSDP as Composer runs it (plan_job.composer) */
  } frameworks[] = {
      {"megatron", MM_FW_MEGATRON, 2, 0},       {"fsdp", MM_FW_FSDP, 2, 0},
      {"composer", MM_FW_FSDP, 2, 1},           {"deepspeed", MM_FW_DEEPSPEED, 2, 0},
      {"stepscope-cpu", MM_FW_STEPSCOPE, 4, 0}, {"stepscope-cuda", MM_FW_STEPSCOPE, 2, 0}};
  const char *name = p->framework;
  if (!name) name = p->from || !strcmp(p->job.dev.name, "cpu") ? NULL : "megatron";
  if (!name) /* the trainer's, as the device has it (--from RUN, --device cpu) */
    return trainer_model_refused(&p->job.model);
  for (size_t i = 0; i < sizeof frameworks / sizeof frameworks[0]; i++)
    if (!strcmp(name, frameworks[i].name)) {
      p->job.model.framework = frameworks[i].framework;
      p->job.composer = frameworks[i].composer;
      p->job.backward_prefetch_post = frameworks[i].composer; /* Composer's default */
      if (frameworks[i].framework != MM_FW_STEPSCOPE) return 0;
      p->job.dev.act_bytes = frameworks[i].act_bytes;
      return trainer_model_refused(&p->job.model);
    }
  cli_print(stderr,
            "stepscope plan: unknown --framework '%s' (megatron, fsdp, composer, deepspeed, "
            "stepscope-cpu, stepscope-cuda)\n",
            name);
  return 2;
}

/* The cluster's links where the user knows them (--nics-per-node, --nic-gbps, --nvlink-gbs):
 * they replace the device table's, which describe a DGX node (docs/plan.md "Clusters"). A
 * measured run's bandwidths (--from) still win for the groups it measured. The cpu device has
 * no NICs or NVLink to describe. 0, or the exit status after the message. */
static int apply_cluster(plan_args *p) {
  plan_device *d = &p->job.dev;
  if (!p->nics_per_node && !(p->nic_gbps > 0) && !(p->nvlink_gbs > 0)) return 0;
  if (!(d->nics_per_node > 0)) {
    cli_print(stderr,
              "stepscope plan: --nics-per-node, --nic-gbps and --nvlink-gbs describe a "
              "GPU cluster's links, not the %s device's\n",
              d->name);
    return 2;
  }
  if (p->nics_per_node) d->nics_per_node = p->nics_per_node;
  if (p->nic_gbps > 0) d->inter_bw = p->nic_gbps * 1e9 / 8;
  if (p->nvlink_gbs > 0) d->intra_bw = p->nvlink_gbs * 1e9;
  return 0;
}

/* --ceilings-from RUN: the GEMM ceiling of a framework's compute by shape measured in a real
 * run's ops (plan_ceilings.c) replaces the device table's, and so does its fused-attention
 * rate where the run has causal forward and backward attention to measure. 0, or the exit
 * status. */
static int apply_ceilings(plan_args *p) {
  plan_job *job = &p->job;
  if (!p->ceilings_from) return 0;
  if (p->from || job->model.framework == MM_FW_STEPSCOPE || !(job->dev.gemm_efficiency > 0)) {
    cli_print(stderr, "stepscope plan: --ceilings-from sets a framework's GEMM ceiling on a GPU "
                      "(not with --from RUN, a stepscope-* framework or the cpu device)\n");
    return 2;
  }
  ssa_options opt;
  ssa_options_default(&opt);
  opt.threads = p->threads;
  cli_loaded l;
  int rc = cli_open_run("plan", p->ceilings_from, &opt, CLI_OP_INPUTS, &l);
  ssa_op_table t;
  if (rc == 0 && ssa_op_table_build(&l.an, &t)) {
    cli_print(stderr, "stepscope plan: out of memory\n");
    rc = 1;
  } else if (rc == 0) {
    char err[512];
    if (plan_ceilings_from_ops(&t, job->fp8, &job->gemm_measured, err, sizeof err)) {
      cli_print(stderr, "stepscope plan: --ceilings-from %s: %s\n", p->ceilings_from, err);
      rc = 1;
    } else {
      job->gemm_measured.source = p->ceilings_from;
      job->dev.gemm_efficiency = job->gemm_measured.ceiling;
      plan_attention_from_ops(&t, &job->attention_measured); /* kept the table's if not */
      if (job->attention_measured.measured) {
        job->dev.attention_efficiency = job->attention_measured.ceiling;
        job->dev.attention_length = 0; /* the trace's lengths are not read: taken as the plan's */
      }
    }
    ssa_op_table_free(&t);
  }
  cli_loaded_free(&l);
  return rc;
}

/* The job: its model (build_model), size and device. 0, or the exit status. */
static int build_job(plan_args *p) {
  int rc = build_model(p);
  if (rc) return rc;
  plan_job *job = &p->job;
  if (!job->gpus || !job->global_batch) {
    cli_print(stderr, "stepscope plan: give --gpus N and --global-batch B (or --from RUN)\n");
    return 2;
  }
  const char *device = p->device ? p->device : "h100-sxm";
  const plan_device *d = plan_device_find(device);
  if (!d) {
    cli_print(stderr, "stepscope plan: unknown --device '%s' (%s)\n", device, plan_device_names());
    return 2;
  }
  job->dev = *d;
  if (p->mem_gib > 0) job->dev.memory_bytes = p->mem_gib * (double)(1u << 30);
  rc = apply_cluster(p);
  if (rc) return rc;
  if (p->undecided_pct >= 100) {
    cli_print(stderr, "stepscope plan: --undecided-within needs a per cent below 100, got %g\n",
              p->undecided_pct);
    return 2;
  }
  job->ranking_band = p->undecided_pct / 100.0;
  rc = apply_framework(p);
  if (rc) return rc;
  if (p->dropout >= 0 && p->job.model.framework == MM_FW_STEPSCOPE) {
    cli_print(stderr, "stepscope plan: --dropout is a real framework's (megatron, fsdp, "
                      "composer, deepspeed): the stepscope trainer has no dropout\n");
    return 2;
  }
  if (p->f.expert_tp > 0 && p->job.model.framework != MM_FW_MEGATRON) {
    cli_print(stderr, "stepscope plan: --expert-tp is Megatron-Core's "
                      "--expert-tensor-parallel-size: give --framework megatron\n");
    return 2;
  }
  if (p->f.expert_tp > 1 && p->f.tp > 0 && p->f.expert_tp != p->f.tp) {
    cli_print(stderr, "stepscope plan: --expert-tp %d: 1 or --tp %d\n", p->f.expert_tp, p->f.tp);
    return 2;
  }
  if (p->f.shard_group > 0 && p->job.model.framework != MM_FW_FSDP) {
    cli_print(stderr, "stepscope plan: --shard-group is PyTorch FSDP's hybrid sharding: give "
                      "--framework fsdp or composer\n");
    return 2;
  }
  if (p->precision && strcmp(p->precision, "bf16") && strcmp(p->precision, "fp8")) {
    cli_print(stderr, "stepscope plan: --precision takes bf16 or fp8, not '%s'\n", p->precision);
    return 2;
  }
  job->fp8 = p->precision && !strcmp(p->precision, "fp8");
  if (p->grad_reduce) {
    int fp32 = !strcmp(p->grad_reduce, "fp32"),
        half = !strcmp(p->grad_reduce, "bf16") || !strcmp(p->grad_reduce, "fp16");
    if ((!fp32 && !half) || job->model.framework == MM_FW_STEPSCOPE) {
      cli_print(stderr, "stepscope plan: --grad-reduce-dtype takes fp32, bf16 or fp16, with a "
                        "framework (the stepscope trainer reduces fp32 gradients)\n");
      return 2;
    }
    job->grad_reduce_bytes = fp32 ? 4 : 2;
  }
  if (p->backward_prefetch) {
    int pre = !strcmp(p->backward_prefetch, "pre"), post = !strcmp(p->backward_prefetch, "post");
    if ((!pre && !post) || job->model.framework != MM_FW_FSDP) {
      cli_print(stderr, "stepscope plan: --backward-prefetch takes pre or post, with --framework "
                        "fsdp or composer (torch FSDP's BackwardPrefetch)\n");
      return 2;
    }
    job->backward_prefetch_post = post;
  }
  if (p->recompute_modules && parse_recompute_modules(p->recompute_modules, &job->model)) return 2;
  if (p->recompute_modules && p->f.recompute >= 0 && p->f.recompute != MM_RECOMPUTE_SELECTIVE) {
    cli_print(stderr,
              "stepscope plan: --recompute-modules names what --recompute selective "
              "recomputes, not %s\n",
              mm_recompute_name((mm_recompute)p->f.recompute));
    return 2;
  }
  if (p->ep_dispatcher) {
    int known = -1;
    for (int i = 0; i < PLAN_EP_DISPATCHERS; i++)
      if (!strcmp(p->ep_dispatcher, plan_ep_dispatcher_name((plan_ep_dispatcher)i))) known = i;
    if (known < 0 || job->model.framework == MM_FW_STEPSCOPE || job->model.experts <= 0) {
      cli_print(stderr, "stepscope plan: --ep-dispatcher takes alltoall, allgather or deepep, "
                        "for a framework's experts (--experts; the stepscope trainer's "
                        "all-to-all is its own)\n");
      return 2;
    }
    job->ep_dispatcher = (plan_ep_dispatcher)known;
  }
  if (p->attention_rate) {
    int share = !strcmp(p->attention_rate, "share"), cudnn = !strcmp(p->attention_rate, "cudnn"),
        split = !strcmp(p->attention_rate, "split");
    if (!share && !cudnn && !split) {
      cli_print(stderr, "stepscope plan: --attention-rate takes split, share or cudnn\n");
      return 2;
    }
    /* plan_fused_attention_rate is 0 wherever cuDNN's rate was not measured (framework,
     * device, head width) */
    if (!share && plan_fused_attention_rate(&job->dev, &job->model) <= 0) {
      cli_print(stderr,
                "stepscope plan: --attention-rate %s: cuDNN's rate was measured for "
                "TransformerEngine's attention (--framework megatron) on h100-sxm or h200 with "
                "heads of 128; this plan is %s on %s with heads of %g\n",
                p->attention_rate,
                p->framework                             ? p->framework
                : job->model.framework == MM_FW_MEGATRON ? "megatron"
                                                         : "the stepscope trainer",
                job->dev.name,
                job->model.head_dim > 0 ? (double)job->model.head_dim
                                        : (double)job->model.hidden / job->model.heads);
      return 2;
    }
    job->attention_rate = share   ? PLAN_ATTENTION_SHARE
                          : cudnn ? PLAN_ATTENTION_CUDNN
                                  : PLAN_ATTENTION_SPLIT;
  }
  if (job->tp_comm_overlap && job->model.framework != MM_FW_MEGATRON) {
    cli_print(stderr, "stepscope plan: --tp-comm-overlap is Megatron-LM's: give --framework "
                      "megatron\n");
    return 2;
  }
  if (job->fp8 && (!(job->dev.fp8_peak_flops > 0) || job->model.framework == MM_FW_STEPSCOPE)) {
    cli_print(stderr, "stepscope plan: --precision fp8 needs a framework (not the stepscope "
                      "trainer) on a device with fp8 (h100-sxm, h200)\n");
    return 2;
  }
  if (!strcmp(job->dev.name, "cpu")) {
    /* the trainer's traces do not record the machine's cores: --cores, else this
     * machine's (assumed to be the one the ranks ran or will run on) */
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    job->dev.cores = p->cores > 0 ? p->cores : online > 0 ? (int)online : 1;
    job->dev.cores_assumed = p->cores <= 0;
  }
  rc = apply_ceilings(p);
  if (rc) return rc;
  plan_calibration_fit_host(job);
  return 0;
}

/* --what-if: the measured run's layout changed, predicted beside the run. */
static int plan_what_if(plan_args *p) {
  plan_job *job = &p->job;
  if (!p->from) {
    cli_print(stderr, "stepscope plan: --what-if changes a measured run's layout: give "
                      "--from RUN\n");
    return 2;
  }
  char *what_if = strdup(p->what_if);
  mm_layout l = job->cal.layout;
  int bad = !what_if;
  for (char *save = NULL, *kv = what_if ? strtok_r(what_if, ",", &save) : NULL; kv && !bad;
       kv = strtok_r(NULL, ",", &save))
    bad = apply_what_if(kv, &l, &job->global_batch) != 0;
  free(what_if);
  if (bad) return 2;
  if (l.ep > 1 && job->model.experts <= 0) {
    cli_print(stderr, "stepscope plan: --what-if ep=%d: the run has no experts\n", l.ep);
    return 2;
  }
  job->gpus = l.dp * l.tp * l.pp * l.cp;
  if (l.schedule != MM_SCHED_INTERLEAVED)
    l.virtual_stages = 1;
  else if (l.virtual_stages < 2)
    l.virtual_stages = 2;
  if (job->global_batch % (l.dp * l.microbatches)) {
    cli_print(stderr,
              "stepscope plan: --what-if: global batch %d is not divisible by dp %d "
              "x micro-batches %d\n",
              job->global_batch, l.dp, l.microbatches);
    return 1;
  }
  l.micro_batch = job->global_batch / (l.dp * l.microbatches);
  plan_result results[2];
  memset(results, 0, sizeof results);
  char err[256];
  if (plan_predict(job, &l, &results[0], err, sizeof err) != 0) {
    cli_print(stderr, "stepscope plan: --what-if: the trainer cannot run this layout: %s\n", err);
    return 1;
  }
  /* the measured run's own layout through the same model, for the comparison */
  const mm_layout *c = &job->cal.layout;
  plan_job base = *job;
  base.gpus = c->dp * c->tp * c->pp * c->cp;
  base.global_batch = c->dp * c->microbatches * c->micro_batch;
  int have_base = plan_predict(&base, c, &results[1], err, sizeof err) == 0;
  char a[128], b[128];
  plan_layout_name(c, a, sizeof a);
  plan_layout_name(&results[0].layout, b, sizeof b);
  /* the text, unless the JSON goes to stdout (as for an enumeration: plan_output) */
  if (!p->json_path || strcmp(p->json_path, "-")) {
    cli_print(stdout, "measured run %s: %s, step %.4g s", p->from, a, job->cal.measured_step_s);
    if (have_base) printf(" (the model gives %.4g s for it)", results[1].step_s);
    printf("\nwhat if %s:\n", b);
    plan_print_table(stdout, job, results, 1, 1);
    if (have_base) plan_print_change(stdout, plan_ranking_band(job), &results[1], &results[0]);
  }
  plan_output_of out = {job, results, 1, have_base ? &results[1] : NULL};
  return p->json_path && cli_write_output("plan", p->json_path, plan_json, &out) ? 1 : 0;
}

/* Every layout option given: that one layout into *results (malloc'd). 0, or the status. */
static int plan_single(plan_args *p, plan_result **results) {
  const plan_filter *f = &p->f;
  mm_layout l = p->job.model;
  l.dp = f->dp;
  l.tp = f->tp;
  l.pp = f->pp;
  l.cp = f->cp;
  l.sp = f->sp > 0;
  l.zero = f->zero;
  l.recompute = (mm_recompute)f->recompute;
  l.microbatches = f->microbatches;
  l.schedule = f->pp == 1 ? MM_SCHED_1F1B : (mm_schedule)f->schedule;
  l.virtual_stages =
      l.schedule == MM_SCHED_INTERLEAVED ? (f->virtual_stages > 0 ? f->virtual_stages : 2) : 1;
  l.ep = l.experts > 0 && f->ep > 0 ? f->ep : 1;           /* --ep, else no expert parallelism */
  l.expert_tp = f->expert_tp == 1 ? 1 : 0;                 /* --expert-tp 1, else cut over TP */
  l.shard_group = f->shard_group > 0 ? f->shard_group : 0; /* else sharded over the group */
  if (p->job.global_batch % (l.dp * l.microbatches)) {
    cli_print(stderr,
              "stepscope plan: the global batch %d is not divisible by dp %d x "
              "micro-batches %d\n",
              p->job.global_batch, l.dp, l.microbatches);
    return 1;
  }
  l.micro_batch = p->job.global_batch / (l.dp * l.microbatches);
  char err[256];
  *results = calloc(1, sizeof **results);
  if (!*results || plan_predict(&p->job, &l, *results, err, sizeof err) != 0) {
    cli_print(stderr, "stepscope plan: this layout cannot run: %s\n",
              *results ? err : "out of memory");
    return 1;
  }
  return 0;
}

/* The sweep's progress on a terminal's stderr, once it has run for half a second (a large
 * job's sweep takes seconds); cleared when it ends. */
typedef struct sweep_progress {
  double start_s; /* sc_monotonic_s() */
  int shown;
} sweep_progress;

static void show_sweep_progress(void *ctx, long predicted, long total) {
  sweep_progress *sp = ctx;
  if (predicted < total && sc_monotonic_s() - sp->start_s >= 0.5) {
    fprintf(stderr, "\rstepscope plan: %ld of %ld candidate layouts checked", predicted, total);
    sp->shown = 1;
  }
}

/* Every layout the filter lets through into *results; their number, or -1 (said why). */
static long plan_all(plan_args *p, plan_result **results) {
  char err[256];
  sweep_progress sp = {.start_s = sc_monotonic_s(), .shown = 0};
  plan_sweep_options opt = {
      .threads = p->threads, .progress = isatty(2) ? show_sweep_progress : NULL, .ctx = &sp};
  long n = plan_sweep(&p->job, &p->f, &opt, results, err, sizeof err);
  if (sp.shown) fprintf(stderr, "\r%60s\r", "");
  if (n < 0) {
    cli_print(stderr, "stepscope plan: %s\n", err);
    return -1;
  }
  if (n == 0) {
    cli_print(stderr,
              "stepscope plan: no layout of this model runs on %d devices with a "
              "global batch of %d%s%s%s\n",
              p->job.gpus, p->job.global_batch, err[0] ? " (last reason: " : "", err[0] ? err : "",
              err[0] ? ")" : "");
    return -1;
  }
  return n;
}

/* The table, --json and --csv of n layouts. 0, or 1 when a file could not be written. */
static int plan_output(const plan_args *p, const plan_result *results, long n) {
  const char *json_path = p->json_path, *csv_path = p->csv_path;
  int to_stdout = (json_path && !strcmp(json_path, "-")) || (csv_path && !strcmp(csv_path, "-"));
  if (!to_stdout) {
    plan_print_table(stdout, &p->job, results, n, p->top);
    if (n > 1) { /* one layout named in full has nothing to be ranked against */
      plan_ranking ranking;
      plan_rank_resolution(results, n, plan_ranking_band(&p->job), &ranking);
      plan_print_ranking(stdout, &ranking, results);
    }
    if (results[0].fits == 0)
      printf("\nnothing fits in %.0f GiB per device: more devices, ZeRO, recomputation or "
             "smaller micro-batches (the table lists the smallest first)\n",
             p->job.dev.memory_bytes / (double)(1u << 30));
  }
  int status = 0;
  plan_output_of out = {&p->job, results, n, NULL};
  if (json_path && cli_write_output("plan", json_path, plan_json, &out)) status = 1;
  if (csv_path && cli_write_output("plan", csv_path, plan_csv, &out)) status = 1;
  return status;
}

int cmd_plan(int argc, char **argv) {
  plan_args p;
  memset(&p, 0, sizeof p);
  p.job.overlap = 1;
  p.job.gpus_per_node = 8;
  plan_filter_any(&p.f);
  p.experts = -1;
  p.dropout = -1;
  p.top_k = 2;
  p.moe_every = 1;
  p.top = 20;
  p.bucket_mb = 1;
  int rc = cli_parse(&plan_table, argc, argv, &p, NULL);
  if (rc != CLI_PARSED) return rc;
  rc = build_job(&p);
  if (rc) return rc;
  if (p.what_if) return plan_what_if(&p);
  const plan_filter *f = &p.f;
  int single = f->dp > 0 && f->tp > 0 && f->pp > 0 && f->cp > 0 && f->zero >= 0 &&
               f->recompute >= 0 && f->microbatches > 0 && (f->pp == 1 || f->schedule >= 0);
  plan_result *results = NULL;
  long n = single ? (plan_single(&p, &results) ? -1 : 1) : plan_all(&p, &results);
  rc = n < 0 ? 1 : plan_output(&p, results, n);
  free(results);
  return rc;
}
