/*
 * model_config.h — the words of a layout (schedule and recomputation names) and the reading
 * of stepscope-train's configuration JSON (trainer/config.c: config_to_json, in every trace
 * header) back into a layout, in the stepscope_model_math library: the trainer writes with
 * these names, the planner and `stepscope diff RUN PREDICTION.json` read with them, so the
 * two sides cannot drift apart (tests: plan.config_roundtrip).
 *
 * The library depends on nothing but the C library, so the JSON itself is read through the
 * caller's accessors (the analyzer passes its metadata lookups, json_lookup.c).
 */
#ifndef STEPSCOPE_TRAINER_MODEL_CONFIG_H
#define STEPSCOPE_TRAINER_MODEL_CONFIG_H

#include <stddef.h>

#include "memory_model.h"

/* "afab", "1f1b", "interleaved" / "none", "selective", "full". */
const char *mm_schedule_name(mm_schedule s);
const char *mm_recompute_name(mm_recompute r);
/* The name of mm_recompute_module bit k (1 << k), Megatron-Core's: core_attn, layernorm, mlp,
 * moe_act, moe. */
const char *mm_recompute_module_name(int k);
/* The names of the mm_recompute_module bits set in `bits`, joined by `sep`, into buf. */
void mm_recompute_modules_text(int bits, const char *sep, char *buf, size_t size);
/* A recomputation in the table's words: none, full, selective, or selective with the modules
 * it recomputes when named (`selective(layernorm+moe)`). */
void mm_recompute_text(mm_recompute r, int modules, char *buf, size_t size);
/* 0 and *out set when `name` is one of the words above, else -1. */
int mm_schedule_from_name(const char *name, mm_schedule *out);
int mm_recompute_from_name(const char *name, mm_recompute *out);

/* Reads the configuration object's top-level keys; each returns 1 when the key is there with a
 * value of that type, else 0. */
typedef struct mm_config_reader {
  int (*number)(void *ctx, const char *key, double *out);
  int (*string)(void *ctx, const char *key, char *buf, size_t size);
  int (*boolean)(void *ctx, const char *key, int *out);
  void *ctx;
} mm_config_reader;

/* The model and layout of a configuration: layers, hidden, heads, seq, max_seq (1024 when
 * absent), vocab, dp, tp, pp, cp, sp, schedule, virtual_stages, zero, recompute,
 * microbatches, micro_batch, bucket_mb (1 when absent) and act_bytes (2 for "activations":
 * "bf16", else 4). Returns 0, or -1 with a reason when the model is not described. */
int mm_layout_from_config(const mm_config_reader *r, mm_layout *l, char *err, size_t errlen);

#endif /* STEPSCOPE_TRAINER_MODEL_CONFIG_H */
