/*
 * pipeline_exec.h — the pipeline executor of one rank (pipeline_exec.c): its state and the
 * small table of stage operations it runs the schedule with.
 *
 * The executor owns the walk: the schedule's list of (F|B, chunk, micro-batch) items, the
 * per-slot events that order the pipeline's send and receive streams with compute, and the
 * point-to-point transfers to the neighbouring stages (comm.h). What a stage computes is not
 * its business: it calls the operations of a `pipeline_stage_ops` table (the trainer's are in
 * train_step.c) for the micro-batch's inputs, its forward and its backward, and the
 * --debug-delay hook. It knows no trainer: struct pipeline is set up from a pipeline_setup
 * (pipeline_init) and freed by pipeline_free; nothing else reads its fields.
 */
#ifndef STEPSCOPE_TRAINER_PIPELINE_EXEC_H
#define STEPSCOPE_TRAINER_PIPELINE_EXEC_H

#include <stddef.h>

#include "comm.h"
#include "config.h"
#include "device.h"
#include "model.h"
#include "schedule.h"

/* What the executor asks of a stage; ctx is passed back to every operation. */
typedef struct pipeline_stage_ops {
  void *ctx;
  /* Model chunk j (0 .. V-1) of this rank: the executor reads its stage position and its
   * slots' transfer buffers (stage_in/out, grad_in/out). */
  model *(*chunk)(void *ctx, int chunk);
  /* --debug-delay: stop the device for the delays given for `phase` (DELAY_FORWARD before a
   * forward, DELAY_BACKWARD before a backward; config.h). */
  void (*delay)(void *ctx, int phase);
  /* Before a forward, on compute: the micro-batch's tokens (first stage) and targets (last
   * stage) into the slot. */
  void (*load_inputs)(void *ctx, int chunk, int slot, int mb);
  /* The forward / backward of (chunk, micro-batch) in activation slot `slot`, enqueued on
   * compute once its input (activation or output gradient) has arrived. */
  void (*forward)(void *ctx, int chunk, int slot, int mb);
  void (*backward)(void *ctx, int chunk, int slot, int mb);
} pipeline_stage_ops;

/* What pipeline_init needs: the device, the streams, the pipeline group and the shape. */
typedef struct pipeline_setup {
  dev_device *dev;
  const dev_ops *o;
  dev_stream *compute, *send, *recv; /* "compute", "comm pp send", "comm pp recv" */
  comm *pp_c;                        /* the pipeline group (group rank = stage) */
  int pp_rank, pp;
  schedule_kind schedule; /* afab or 1f1b when V == 1 */
  int V;                  /* model chunks on this rank (interleaved: > 1) */
  int M;                  /* micro-batches per step */
  int nslots;             /* activation slots of every chunk */
} pipeline_setup;

/* Owned by pipeline_exec.c. */
typedef struct pipeline {
  pipeline_setup s;
  pipeline_stage_ops ops;
  sched_item *items; /* [2 M V]: the step's forwards and backwards in order */
  int nevents;       /* per-slot events of each kind: nslots x V */
  dev_event **ev_in_ready, **ev_grad_ready, **ev_out_ready, **ev_din_ready, **ev_slot_free,
      **ev_sent;
} pipeline;

/* Builds the schedule and creates the per-slot events: 0, or -1 with a message. */
int pipeline_init(pipeline *p, const pipeline_setup *s, const pipeline_stage_ops *ops, char *err,
                  size_t errlen);
/* Destroys the events and frees the schedule (the streams drained; before the device closes). */
void pipeline_free(pipeline *p);
/* Enqueues every forward and backward of the step in the schedule's order, with their
 * transfers. */
void pipeline_walk(pipeline *p);

#endif /* STEPSCOPE_TRAINER_PIPELINE_EXEC_H */
