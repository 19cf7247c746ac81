/*
 * trace_metadata.h — the schema of the metadata the trainer (and, for `machine`, the
 * tracer) declares in its traces (stepscope_metadata_set: a key and a JSON object,
 * docs/trace-format.md "Metadata") and the
 * analyzer decodes once per rank (analyzer/src/model/trainer_meta.c): the keys, and the
 * numeric members of each object as X-macro lists X(field, "dotted.path", lo, hi), so that
 * the writer and every reader name them from one place. [lo, hi] is the range a reader
 * accepts: a value outside it (or not finite) is dropped with a warning naming it, so that
 * no reader converts an absurd number to an int (a crafted trace, a foreign producer).
 */
#ifndef STEPSCOPE_MODEL_TRACE_METADATA_H
#define STEPSCOPE_MODEL_TRACE_METADATA_H

#define TM_MAX_RANKS        16777216.0 /* 2^24 ranks: far beyond any job */
#define TM_MAX_CHUNKS       1024.0     /* model chunks per pipeline rank */
#define TM_MAX_MICROBATCHES 16777216.0
#define TM_MAX_COUNT        1e30 /* FLOPs, parameters, tokens, bytes: finite and non-negative */

#define TM_KEY_LAYOUT   "layout"   /* this rank's place in the parallel grid */
#define TM_KEY_SCHEDULE "schedule" /* the pipeline schedule (also its "name", a string) */
#define TM_KEY_FLOPS    "flops"    /* FLOPs per step and the device's peak, for MFU */
#define TM_KEY_MEMORY   "memory"   /* the memory model's prediction beside what was measured */
#define TM_KEY_MOE      "moe"      /* mixture of experts: experts, top-k, EP place */
#define TM_KEY_MACHINE  "machine"  /* the machine's load while tracing (the tracer writes it) */

/* "layout": sizes of the grid and this rank's coordinates (ep, virtual_stages, microbatches
 * and zero are read when a producer writes them; the trainer writes the rest). */
#define TM_LAYOUT_NUMBERS(X)                                                                       \
  X(world, "world", 1, TM_MAX_RANKS)                                                               \
  X(dp, "dp", 1, TM_MAX_RANKS)                                                                     \
  X(tp, "tp", 1, TM_MAX_RANKS)                                                                     \
  X(pp, "pp", 1, TM_MAX_RANKS)                                                                     \
  X(cp, "cp", 1, TM_MAX_RANKS)                                                                     \
  X(ep, "ep", 1, TM_MAX_RANKS)                                                                     \
  X(virtual_stages, "virtual_stages", 1, TM_MAX_CHUNKS)                                            \
  X(microbatches, "microbatches", 1, TM_MAX_MICROBATCHES)                                          \
  X(zero, "zero", 0, 3)                                                                            \
  X(rank, "rank", 0, TM_MAX_RANKS)                                                                 \
  X(dp_rank, "dp_rank", 0, TM_MAX_RANKS)                                                           \
  X(tp_rank, "tp_rank", 0, TM_MAX_RANKS)                                                           \
  X(pp_rank, "pp_rank", 0, TM_MAX_RANKS)                                                           \
  X(cp_rank, "cp_rank", 0, TM_MAX_RANKS)

/* "schedule": stages, micro-batches, virtual stages and the schedule's theoretical bubble
 * fraction; its "name" (afab, 1f1b, interleaved, none) is a string. */
#define TM_SCHEDULE_NUMBERS(X)                                                                     \
  X(stages, "stages", 1, TM_MAX_RANKS)                                                             \
  X(microbatches, "microbatches", 1, TM_MAX_MICROBATCHES)                                          \
  X(virtual_stages, "virtual_stages", 1, TM_MAX_CHUNKS)                                            \
  X(bubble_theory, "bubble_theory", 0, 1)

/* "flops": per optimizer step, for the whole job (world devices). */
#define TM_FLOPS_NUMBERS(X)                                                                        \
  X(model_flops_per_step, "model_flops_per_step", 0, TM_MAX_COUNT)                                 \
  X(hardware_flops_per_step, "hardware_flops_per_step", 0, TM_MAX_COUNT)                           \
  X(total_params, "total_params", 0, TM_MAX_COUNT)                                                 \
  X(active_params, "active_params", 0, TM_MAX_COUNT)                                               \
  X(tokens_per_step, "tokens_per_step", 0, TM_MAX_COUNT)                                           \
  X(peak_flops_per_device, "peak_flops_per_device", 0, TM_MAX_COUNT)                               \
  X(world, "world", 1, TM_MAX_RANKS)

/* "memory": bytes, the prediction by component and what was measured. */
#define TM_MEMORY_NUMBERS(X)                                                                       \
  X(predicted_parameters, "predicted.parameters", 0, TM_MAX_COUNT)                                 \
  X(predicted_gradients, "predicted.gradients", 0, TM_MAX_COUNT)                                   \
  X(predicted_optimizer, "predicted.optimizer", 0, TM_MAX_COUNT)                                   \
  X(predicted_activations, "predicted.activations", 0, TM_MAX_COUNT)                               \
  X(predicted_other, "predicted.other", 0, TM_MAX_COUNT)                                           \
  X(predicted_steady, "predicted.steady", 0, TM_MAX_COUNT)                                         \
  X(predicted_total, "predicted.total", 0, TM_MAX_COUNT)                                           \
  X(zero, "zero", 0, 3)                                                                            \
  X(measured_peak_bytes, "measured_peak_bytes", 0, TM_MAX_COUNT)                                   \
  X(rss_peak_bytes, "rss_peak_bytes", 0, TM_MAX_COUNT)                                             \
  X(runtime_baseline_bytes, "runtime_baseline_bytes", 0, TM_MAX_COUNT)

/* "machine": the CPUs online and the 1-minute load average (runnable and waiting threads, as
 * getloadavg reports it) when tracing started, and again, with the end's, when it stopped; the
 * tracer (tracer/src/linked.c) writes it for every producer, so a diff can tell runs measured
 * on a busy machine from runs on a quiet one (docs/diff.md, noise test 2). */
#define TM_MAX_LOAD 1e6
#define TM_MACHINE_NUMBERS(X)                                                                      \
  X(cpus, "cpus", 1, TM_MAX_RANKS)                                                                 \
  X(load_1m_start, "load_1m_start", 0, TM_MAX_LOAD)                                                \
  X(load_1m_end, "load_1m_end", 0, TM_MAX_LOAD)

#endif
