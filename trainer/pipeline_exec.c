/*
 * pipeline_exec.c — the pipeline executor of one rank (pipeline_exec.h): walks the stage's
 * schedule (schedule.c: AFAB, 1F1B or interleaved 1F1B) and enqueues each forward and backward
 * of a (chunk, micro-batch) with its transfers, through the stage operations it was given
 * (the trainer's: train_step.c) for what the stage computes.
 *
 * A forward receives its input activation from the previous stage on the "comm pp recv"
 * stream (or the stage loads the tokens on the first stage) and sends its output to the next
 * on "comm pp send"; a backward receives the output gradient from the next stage (or starts
 * from the loss on the last stage) and sends the input gradient back. Sends and receives
 * sit on separate streams because they cross (activations one way, gradients the other)
 * and a transfer larger than the mailbox would otherwise deadlock. Per-slot events order
 * these streams with compute, so p2p overlaps compute.
 * Interleaved 1F1B (--schedule interleaved --virtual-stages V): the schedule names the chunk
 * of every item, transfers go to the next (previous) rank for every chunk transition (rank
 * pp-1's chunk j feeds rank 0's chunk j+1), and every (chunk, micro-batch) has its own
 * activation slot and events.
 */
#include "pipeline_exec.h"

#include <stdio.h>
#include <stdlib.h>

#include "stepscope.h"

/* chunk < 0: no interleaving (no "chunk" key) */
static void push_mb_range(const char *name, int mb, int stage, int chunk) {
  if (!stepscope_active()) return;
  char args[96];
  if (chunk >= 0)
    snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d,\"chunk\":%d}", mb, stage, chunk);
  else
    snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d}", mb, stage);
  stepscope_range_push(name, args);
}

static void pop_mb_range(void) {
  if (stepscope_active()) stepscope_range_pop();
}

/* Pipeline neighbours (group ranks of pp_c): the previous and next rank in the ring (a chunk
 * transition wraps from rank pp-1 to rank 0). */
static int pp_prev(const pipeline *p) {
  return (p->s.pp_rank + p->s.pp - 1) % p->s.pp;
}
static int pp_next(const pipeline *p) {
  return (p->s.pp_rank + 1) % p->s.pp;
}

/* One pass of a (chunk, micro-batch): its model chunk, activation slot, per-slot events index
 * and the bytes of a transfer. */
typedef struct mb_pass {
  model *m;
  int slot, ev;
  model_slot *sl;
  size_t bytes;
} mb_pass;

/* Opens the pass's trace range and runs the --debug-delay of its phase. */
static mb_pass begin_pass(pipeline *p, int chunk, int mb, const char *name, int delay_phase) {
  const pipeline_stage_ops *op = &p->ops;
  mb_pass x;
  x.m = op->chunk(op->ctx, chunk);
  x.slot = mb % p->s.nslots;
  x.ev = chunk * p->s.nslots + x.slot;
  x.sl = &x.m->slots[x.slot];
  x.bytes = (size_t)x.m->Ns * x.m->C * x.m->act_es;
  push_mb_range(name, mb, p->s.pp_rank, p->s.V > 1 ? chunk : -1);
  op->delay(op->ctx, delay_phase);
  return x;
}

/* Receives the pass's input from rank `from` on the recv stream once its slot is free; compute
 * waits for it (through `ready`). */
static void recv_input(pipeline *p, const mb_pass *x, void *buf, int from, dev_event *ready) {
  const dev_ops *o = p->s.o;
  o->stream_wait_event(p->s.recv, p->ev_slot_free[x->ev]);
  comm_recv(p->s.pp_c, p->s.recv, buf, x->bytes, from, COMM_F_PIPELINE);
  o->event_record(ready, p->s.recv);
  o->stream_wait_event(p->s.compute, ready);
}

/* Sends the pass's output to rank `to` on the send stream once compute has made it (`ready`). */
static void send_output(pipeline *p, const mb_pass *x, const void *buf, int to, dev_event *ready) {
  const dev_ops *o = p->s.o;
  o->event_record(ready, p->s.compute);
  o->stream_wait_event(p->s.send, ready);
  comm_send(p->s.pp_c, p->s.send, buf, x->bytes, to, COMM_F_PIPELINE);
  o->event_record(p->ev_sent[x->ev], p->s.send);
}

static void forward_mb(pipeline *p, int chunk, int mb) {
  const pipeline_stage_ops *op = &p->ops;
  mb_pass x = begin_pass(p, chunk, mb, "forward", DELAY_FORWARD);
  op->load_inputs(op->ctx, chunk, x.slot, mb);
  if (!x.m->first_stage) recv_input(p, &x, x.sl->stage_in, pp_prev(p), p->ev_in_ready[x.ev]);
  if (!x.m->last_stage) p->s.o->stream_wait_event(p->s.compute, p->ev_sent[x.ev]);
  op->forward(op->ctx, chunk, x.slot, mb);
  if (!x.m->last_stage) send_output(p, &x, x.sl->stage_out, pp_next(p), p->ev_out_ready[x.ev]);
  pop_mb_range();
}

static void backward_mb(pipeline *p, int chunk, int mb) {
  const pipeline_stage_ops *op = &p->ops;
  mb_pass x = begin_pass(p, chunk, mb, "backward", DELAY_BACKWARD);
  if (!x.m->last_stage) recv_input(p, &x, x.sl->grad_in, pp_next(p), p->ev_grad_ready[x.ev]);
  if (!x.m->first_stage) p->s.o->stream_wait_event(p->s.compute, p->ev_sent[x.ev]);
  op->backward(op->ctx, chunk, x.slot, mb);
  p->s.o->event_record(p->ev_slot_free[x.ev], p->s.compute);
  if (!x.m->first_stage) send_output(p, &x, x.sl->grad_out, pp_prev(p), p->ev_din_ready[x.ev]);
  pop_mb_range();
}

/* Walks this rank's schedule (p->items: every forward and backward of the step, each naming
 * its chunk and micro-batch), enqueueing each pass and its transfers. */
void pipeline_walk(pipeline *p) {
  for (int i = 0; i < 2 * p->s.M * p->s.V; i++) {
    if (p->items[i].pass == 'F')
      forward_mb(p, p->items[i].chunk, p->items[i].mb);
    else
      backward_mb(p, p->items[i].chunk, p->items[i].mb);
  }
}

/* ---- set-up and clean-up ------------------------------------------------------------------ */

static dev_event **make_events(pipeline *p, int n) {
  dev_event **e = calloc((size_t)n, sizeof *e);
  if (!e) return NULL;
  for (int i = 0; i < n; i++)
    if (!(e[i] = p->s.o->event_create(p->s.dev))) return NULL;
  return e;
}

int pipeline_init(pipeline *p, const pipeline_setup *s, const pipeline_stage_ops *ops, char *err,
                  size_t errlen) {
  p->s = *s;
  p->ops = *ops;
  p->items = calloc((size_t)2 * s->M * s->V, sizeof(sched_item));
  if (!p->items) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (s->V > 1)
    schedule_build_interleaved(s->pp_rank, s->pp, s->V, s->M, p->items);
  else
    schedule_build(s->schedule, s->pp_rank, s->pp, s->M, p->items);
  int S = s->nslots * s->V;
  p->nevents = S;
  p->ev_in_ready = make_events(p, S);
  p->ev_grad_ready = make_events(p, S);
  p->ev_out_ready = make_events(p, S);
  p->ev_din_ready = make_events(p, S);
  p->ev_slot_free = make_events(p, S);
  p->ev_sent = make_events(p, S);
  if (!p->ev_in_ready || !p->ev_grad_ready || !p->ev_out_ready || !p->ev_din_ready ||
      !p->ev_slot_free || !p->ev_sent) {
    snprintf(err, errlen, "out of memory creating events");
    return -1;
  }
  return 0;
}

void pipeline_free(pipeline *p) {
  dev_event **per_slot[] = {p->ev_in_ready,  p->ev_grad_ready, p->ev_out_ready,
                            p->ev_din_ready, p->ev_slot_free,  p->ev_sent};
  for (size_t k = 0; k < sizeof per_slot / sizeof per_slot[0]; k++) {
    for (int i = 0; per_slot[k] && i < p->nevents; i++)
      if (per_slot[k][i]) p->s.o->event_destroy(per_slot[k][i]);
    free(per_slot[k]);
  }
  free(p->items);
}
