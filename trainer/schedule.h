/*
 * schedule.h — pipeline-parallel schedules as plain lists of work items.
 *
 * What it is for: the order in which one stage runs the forward (F) and
 * backward (B) passes of its micro-batches, for AFAB (all forwards, then all
 * backwards) and 1F1B (warm-up forwards, then one forward / one backward, then
 * cool-down backwards). The training loop walks the list; the schedules are
 * pure functions, testable without running a model.
 *
 * Interleaved 1F1B (Megatron-LM's virtual pipeline stages): each of the p ranks
 * holds V model chunks, chunk j of rank r being virtual stage j*p + r, and
 * walks the m*V (chunk, micro-batch) pairs in Megatron's order: virtual
 * micro-batch k runs chunk (k / p) % V forward (V-1 minus that backward) on
 * micro-batch (k / (p V)) p + k % p; rank r first runs
 * min(2 (p - r - 1) + (V - 1) p, m V) forwards (all of them when m = p), then
 * alternates one forward and one backward, then drains the backwards. Every rank
 * runs the forwards (and the backwards) in the same (chunk, micro-batch) order,
 * so the activations (gradients) a rank sends to a neighbour arrive in the order
 * that neighbour consumes them.
 */
#ifndef STEPSCOPE_TRAINER_SCHEDULE_H
#define STEPSCOPE_TRAINER_SCHEDULE_H

#include "config.h"

typedef struct sched_item {
  char pass; /* 'F' or 'B' */
  int mb;
  int chunk; /* model chunk (virtual stage chunk * stages + stage); 0 without interleaving */
} sched_item;

/* Fills items[0 .. 2*microbatches) for `stage` of `stages`. */
void schedule_build(schedule_kind kind, int stage, int stages, int microbatches, sched_item *items);

/* Interleaved 1F1B: fills items[0 .. 2*microbatches*virtual) for `stage` of `stages`
 * (stages >= 2, microbatches a multiple of stages). */
void schedule_build_interleaved(int stage, int stages, int virtual_stages, int microbatches,
                                sched_item *items);

/* Micro-batches whose activations a stage holds at once (activation slots). */
int schedule_slots(schedule_kind kind, int stage, int stages, int microbatches);

/* Theoretical bubble fraction (p-1)/(m+p-1) of AFAB and 1F1B. */
double schedule_bubble(int stages, int microbatches);

/* Theoretical bubble fraction (p-1)/(v*m+p-1) of interleaved 1F1B with v chunks per rank. */
double schedule_bubble_interleaved(int stages, int virtual_stages, int microbatches);

#endif /* STEPSCOPE_TRAINER_SCHEDULE_H */
