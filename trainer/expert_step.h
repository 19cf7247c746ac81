/*
 * expert_step.h — the mixture-of-experts optimizer state of one rank and what expert_step.c
 * offers the rest of the trainer: the expert buffer's AdamW moments, and the experts' share of
 * every step (gradient sum over the expert-data-parallel group, norm, AdamW, trace
 * statistics) and of checkpoints.
 *
 * One owner: expert_step.c allocates, uses and frees struct expert_state
 * (train_moe_setup / train_moe_free); struct trainer holds it as its member `moe`, and the
 * other files go through the functions below. They take the whole trainer because they
 * enqueue on its streams and groups and read the model's moe_state (moe.h).
 */
#ifndef STEPSCOPE_TRAINER_EXPERT_STEP_H
#define STEPSCOPE_TRAINER_EXPERT_STEP_H

#include <stddef.h>

#include "checkpoint.h"

struct trainer;

/* Owned by expert_step.c. */
typedef struct expert_state {
  /* AdamW moments of the expert buffer: whole, or with --zero 1 this rank's 1/edp slice
   * (train_moe_slice) */
  float *adam_m, *adam_v;
} expert_state;

/* After the model and the groups exist: the moments, the routing-count buffer and the
 * checkpoint chunk the experts ride in. 0 (also without experts), or -1 with t->err set. */
int train_moe_setup(struct trainer *t);
/* Frees the moments (before the device closes). */
void train_moe_free(struct trainer *t);
/* The part of the expert buffer whose AdamW state this rank keeps: [*lo, *hi). */
void train_moe_slice(const struct trainer *t, size_t *lo, size_t *hi);
/* The expert buffer as checkpoints see it (one more chunk); 0 without experts. */
int train_moe_ckpt_chunk(const struct trainer *t, ckpt_chunk *out);

/* ---- the step, in call order (train_step.c) ---------------------------------------------- */

void train_moe_step_begin(struct trainer *t);
void train_moe_reduce_grads(struct trainer *t);
void train_moe_stats(struct trainer *t);
void train_moe_optimizer(struct trainer *t, int step, double clip_scale, float lr);
void train_moe_trace_step(struct trainer *t, int step);

#endif /* STEPSCOPE_TRAINER_EXPERT_STEP_H */
