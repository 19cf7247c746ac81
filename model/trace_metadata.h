/*
 * trace_metadata.h — the schema of the metadata the trainer declares in its traces
 * (stepscope_metadata_set: a key and a JSON object, docs/trace-format.md "Metadata") and the
 * analyzer decodes once per rank (analyzer/src/model/trainer_meta.c): the keys, and the
 * numeric members of each object as X-macro lists X(field, "dotted.path"), so that the
 * writer and every reader name them from one place.
 */
#ifndef STEPSCOPE_MODEL_TRACE_METADATA_H
#define STEPSCOPE_MODEL_TRACE_METADATA_H

#define TM_KEY_LAYOUT   "layout"   /* this rank's place in the parallel grid */
#define TM_KEY_SCHEDULE "schedule" /* the pipeline schedule (also its "name", a string) */
#define TM_KEY_FLOPS    "flops"    /* FLOPs per step and the device's peak, for MFU */
#define TM_KEY_MEMORY   "memory"   /* the memory model's prediction beside what was measured */
#define TM_KEY_MOE      "moe"      /* mixture of experts: experts, top-k, EP place */

/* "layout": sizes of the grid and this rank's coordinates (ep, virtual_stages, microbatches
 * and zero are read when a producer writes them; the trainer writes the rest). */
#define TM_LAYOUT_NUMBERS(X)                                                                       \
  X(world, "world")                                                                                \
  X(dp, "dp")                                                                                      \
  X(tp, "tp")                                                                                      \
  X(pp, "pp")                                                                                      \
  X(cp, "cp")                                                                                      \
  X(ep, "ep")                                                                                      \
  X(virtual_stages, "virtual_stages")                                                              \
  X(microbatches, "microbatches")                                                                  \
  X(zero, "zero")                                                                                  \
  X(rank, "rank")                                                                                  \
  X(dp_rank, "dp_rank")                                                                            \
  X(tp_rank, "tp_rank")                                                                            \
  X(pp_rank, "pp_rank")                                                                            \
  X(cp_rank, "cp_rank")

/* "schedule": stages, micro-batches, virtual stages and the schedule's theoretical bubble
 * fraction; its "name" (afab, 1f1b, interleaved, none) is a string. */
#define TM_SCHEDULE_NUMBERS(X)                                                                     \
  X(stages, "stages")                                                                              \
  X(microbatches, "microbatches")                                                                  \
  X(virtual_stages, "virtual_stages")                                                              \
  X(bubble_theory, "bubble_theory")

/* "flops": per optimizer step, for the whole job (world devices). */
#define TM_FLOPS_NUMBERS(X)                                                                        \
  X(model_flops_per_step, "model_flops_per_step")                                                  \
  X(hardware_flops_per_step, "hardware_flops_per_step")                                            \
  X(total_params, "total_params")                                                                  \
  X(active_params, "active_params")                                                                \
  X(tokens_per_step, "tokens_per_step")                                                            \
  X(peak_flops_per_device, "peak_flops_per_device")                                                \
  X(world, "world")

/* "memory": bytes, the prediction by component and what was measured. */
#define TM_MEMORY_NUMBERS(X)                                                                       \
  X(predicted_parameters, "predicted.parameters")                                                  \
  X(predicted_gradients, "predicted.gradients")                                                    \
  X(predicted_optimizer, "predicted.optimizer")                                                    \
  X(predicted_activations, "predicted.activations")                                                \
  X(predicted_other, "predicted.other")                                                            \
  X(predicted_steady, "predicted.steady")                                                          \
  X(predicted_total, "predicted.total")                                                            \
  X(zero, "zero")                                                                                  \
  X(measured_peak_bytes, "measured_peak_bytes")                                                    \
  X(rss_peak_bytes, "rss_peak_bytes")                                                              \
  X(runtime_baseline_bytes, "runtime_baseline_bytes")

#endif
