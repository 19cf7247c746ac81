/*
 * pipeline_exec.c — the pipeline executor of one rank: walks the stage's schedule
 * (schedule.c: AFAB, 1F1B or interleaved 1F1B) and enqueues each forward and backward of a
 * (chunk, micro-batch) with its transfers.
 *
 * A forward receives its input activation from the previous stage on the "comm pp recv"
 * stream (or embeds the tokens on the first stage) and sends its output to the next on
 * "comm pp send"; a backward receives the output gradient from the next stage (or starts
 * from the loss on the last stage) and sends the input gradient back. Sends and receives
 * sit on separate streams because they cross (activations one way, gradients the other)
 * and a transfer larger than the mailbox would otherwise deadlock. Per-slot events order
 * these streams with compute, so p2p overlaps compute. Backward hands each finished unit
 * to grad_sync.c on the last micro-batch, or on every one under ZeRO-2/3
 * (grad_sync_backward_hook).
 * Interleaved 1F1B (--schedule interleaved --virtual-stages V): the schedule names the chunk
 * of every item, transfers go to the next (previous) rank for every chunk transition (rank
 * pp-1's chunk j feeds rank 0's chunk j+1), and every (chunk, micro-batch) has its own
 * activation slot and events.
 */
#include "train_internal.h"

/* chunk < 0: no interleaving (no "chunk" key) */
static void push_mb_range(const char *name, int mb, int stage, int chunk)
{
    if (!stepscope_active())
        return;
    char args[96];
    if (chunk >= 0)
        snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d,\"chunk\":%d}", mb, stage,
                 chunk);
    else
        snprintf(args, sizeof args, "{\"microbatch\":%d,\"stage\":%d}", mb, stage);
    stepscope_range_push(name, args);
}

/* Pipeline neighbours (group ranks of pp_c): the previous and next rank in the ring (a chunk
 * transition wraps from rank pp-1 to rank 0). */
static int pp_prev(const trainer *t) { return (t->g.pp_rank + t->g.pp - 1) % t->g.pp; }
static int pp_next(const trainer *t) { return (t->g.pp_rank + 1) % t->g.pp; }

static void forward_mb(trainer *t, int chunk, int mb)
{
    const dev_ops *o = t->o;
    model *m = chunk_model(t, chunk);
    int slot = mb % t->nslots, ev = chunk * t->nslots + slot;
    model_slot *sl = &m->slots[slot];
    size_t N = (size_t)m->N, NsC = (size_t)m->Ns * m->C;
    push_mb_range("forward", mb, t->g.pp_rank, t->V > 1 ? chunk : -1);
    train_debug_delay(t, DELAY_FORWARD);
    if (m->first_stage)
        o->copy_to_device(t->compute, sl->tokens, t->host_tokens + (size_t)mb * N, N * 4);
    if (m->last_stage)
        o->copy_to_device(t->compute, sl->targets, t->host_targets + (size_t)mb * N, N * 4);
    if (!m->first_stage) {
        o->stream_wait_event(t->pp_recv, t->ev_slot_free[ev]);
        comm_recv(t->pp_c, t->pp_recv, sl->stage_in, NsC * m->act_es, pp_prev(t), COMM_F_PIPELINE);
        o->event_record(t->ev_in_ready[ev], t->pp_recv);
        o->stream_wait_event(t->compute, t->ev_in_ready[ev]);
    }
    if (!m->last_stage)
        o->stream_wait_event(t->compute, t->ev_sent[ev]);
    model_forward(m, slot, mb);
    if (!m->last_stage) {
        o->event_record(t->ev_out_ready[ev], t->compute);
        o->stream_wait_event(t->pp_send, t->ev_out_ready[ev]);
        comm_send(t->pp_c, t->pp_send, sl->stage_out, NsC * m->act_es, pp_next(t), COMM_F_PIPELINE);
        o->event_record(t->ev_sent[ev], t->pp_send);
    }
    pop_range();
}

static void backward_mb(trainer *t, int chunk, int mb)
{
    const dev_ops *o = t->o;
    model *m = chunk_model(t, chunk);
    int slot = mb % t->nslots, ev = chunk * t->nslots + slot;
    model_slot *sl = &m->slots[slot];
    size_t NsC = (size_t)m->Ns * m->C;
    push_mb_range("backward", mb, t->g.pp_rank, t->V > 1 ? chunk : -1);
    train_debug_delay(t, DELAY_BACKWARD);
    if (!m->last_stage) {
        o->stream_wait_event(t->pp_recv, t->ev_slot_free[ev]);
        comm_recv(t->pp_c, t->pp_recv, sl->grad_in, NsC * m->act_es, pp_next(t), COMM_F_PIPELINE);
        o->event_record(t->ev_grad_ready[ev], t->pp_recv);
        o->stream_wait_event(t->compute, t->ev_grad_ready[ev]);
    }
    if (!m->first_stage)
        o->stream_wait_event(t->compute, t->ev_sent[ev]);
    grad_unit_fn unit_done = grad_sync_backward_hook(t, chunk, mb == t->M - 1);
    model_backward(m, slot, mb, unit_done, t);
    o->event_record(t->ev_slot_free[ev], t->compute);
    if (!m->first_stage) {
        o->event_record(t->ev_din_ready[ev], t->compute);
        o->stream_wait_event(t->pp_send, t->ev_din_ready[ev]);
        comm_send(t->pp_c, t->pp_send, sl->grad_out, NsC * m->act_es, pp_prev(t), COMM_F_PIPELINE);
        o->event_record(t->ev_sent[ev], t->pp_send);
    }
    pop_range();
}

/* Walks this rank's schedule (t->items: every forward and backward of the step, each naming
 * its chunk and micro-batch), enqueueing each pass and its transfers. */
void train_pipeline_walk(trainer *t)
{
    for (int i = 0; i < 2 * t->M * t->V; i++) {
        if (t->items[i].pass == 'F')
            forward_mb(t, t->items[i].chunk, t->items[i].mb);
        else
            backward_mb(t, t->items[i].chunk, t->items[i].mb);
    }
}
