/*
 * schedule.h — pipeline-parallel schedules as plain lists of work items.
 *
 * What it is for: the order in which one stage runs the forward (F) and
 * backward (B) passes of its micro-batches, for AFAB (all forwards, then all
 * backwards) and 1F1B (warm-up forwards, then one forward / one backward, then
 * cool-down backwards). The training loop walks the list; the schedules are
 * pure functions, testable without running a model.
 */
#ifndef STEPSCOPE_TRAINER_SCHEDULE_H
#define STEPSCOPE_TRAINER_SCHEDULE_H

#include "config.h"

typedef struct sched_item {
    char pass; /* 'F' or 'B' */
    int mb;
} sched_item;

/* Fills items[0 .. 2*microbatches) for `stage` of `stages`. */
void schedule_build(schedule_kind kind, int stage, int stages, int microbatches, sched_item *items);

/* Micro-batches whose activations a stage holds at once (activation slots). */
int schedule_slots(schedule_kind kind, int stage, int stages, int microbatches);

/* Theoretical bubble fraction (p-1)/(m+p-1) of AFAB and 1F1B. */
double schedule_bubble(int stages, int microbatches);

#endif /* STEPSCOPE_TRAINER_SCHEDULE_H */
