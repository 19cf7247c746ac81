/*
 * expert_step.c — the optimizer step's share of the mixture-of-experts layers (moe.h): what
 * the trainer does with the expert buffer besides the dense flat buffer, and the per-step
 * routing statistics it writes into the trace. It owns struct expert_state (expert_step.h:
 * the expert buffer's AdamW moments; train_moe_setup / train_moe_free).
 *
 * How it fits the step (train_step.c calls these in order):
 *   1. train_moe_step_begin: zero the expert gradients and the step's aux-loss and drop
 *      counters; aux_scale = coef / (micro-batches x dp), so that the objective is the mean
 *      over the global batch's micro-batches of coef x aux per MoE layer (DP sums gradients);
 *   2. after the pipeline walk, train_moe_reduce_grads: the experts' gradients are summed over
 *      the expert-data-parallel group (the dp/ep ranks holding the same experts; the EP
 *      group's members hold different experts, and their tokens already reached them by the
 *      dispatch), on the compute stream after backward (no bucketing or overlap yet);
 *   3. train_moe_stats: squared expert gradients into the step's norm (each expert counted
 *      once: on TP rank 0 of EDP rank 0) and the aux loss sum (TP rank 0) into the
 *      world-reduced statistics;
 *   4. train_moe_optimizer: clipping and AdamW on the expert buffer: whole, or with --zero 1
 *      this rank's 1/edp slice (AdamW moments for it alone), then an all-gather of the
 *      parameters over the EDP group (ZeRO-1 over the ranks that hold the same experts);
 *   5. train_moe_trace_step: after the step's sync, one `moe.load` mark per MoE layer with
 *      this rank's tokens per expert (summed over the step's micro-batches), the dropped
 *      assignments and the rows its experts received (docs/trace-format.md).
 */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

/* The part of the expert buffer whose AdamW state this rank keeps: everything, or with
 * --zero 1 and an EDP group its 1/edp slice of the padded buffer. */
void train_moe_slice(const trainer *t, size_t *lo, size_t *hi) {
  const moe_state *q = &t->m.moe;
  if (t->cfg.zero >= 1 && t->edp_c) {
    size_t len = q->nfloats_padded / (size_t)comm_size(t->edp_c);
    *lo = (size_t)comm_rank(t->edp_c) * len;
    *hi = *lo + len;
  } else {
    *lo = 0;
    *hi = q->nfloats_padded;
  }
}

int train_moe_setup(trainer *t) {
  model *m = &t->m;
  moe_state *q = &m->moe;
  if (q->nmoe == 0) return 0;
  size_t lo, hi;
  train_moe_slice(t, &lo, &hi);
  t->moe.adam_m = t->o->alloc(t->dev, (hi - lo) * sizeof(float));
  t->moe.adam_v = t->o->alloc(t->dev, (hi - lo) * sizeof(float));
  q->host_counts = calloc((size_t)t->M * q->nmoe * q->E, sizeof(int));
  q->host_counts_mb = t->M;
  /* checkpoints carry the expert buffer as one extra chunk (experts refuse interleaving, so
   * there are no others) */
  if (!t->ckpt_more && t->V == 1) t->ckpt_more = calloc(1, sizeof(ckpt_chunk));
  if (!t->moe.adam_m || !t->moe.adam_v || !q->host_counts || !t->ckpt_more)
    return fail(t, "%s", "out of memory for the experts' optimizer state");
  return 0;
}

void train_moe_free(trainer *t) {
  if (!t->o) return;
  t->o->free(t->dev, t->moe.adam_m);
  t->o->free(t->dev, t->moe.adam_v);
}

int train_moe_ckpt_chunk(const trainer *t, ckpt_chunk *out) {
  const moe_state *q = &t->m.moe;
  if (q->nmoe == 0) return 0;
  size_t lo, hi;
  train_moe_slice(t, &lo, &hi);
  *out = (ckpt_chunk){q->param, q->nfloats_padded, t->moe.adam_m, t->moe.adam_v, hi - lo, lo};
  return 1;
}

void train_moe_step_begin(trainer *t) {
  model *m = &t->m;
  moe_state *q = &m->moe;
  if (q->nmoe == 0) return;
  const dev_ops *o = t->o;
  o->zero(t->compute, q->grad, q->nfloats_padded * sizeof(float));
  o->zero(t->compute, q->aux_acc, sizeof(double));
  o->zero(t->compute, q->dropped_acc, sizeof(int));
  q->aux_scale = (float)(t->cfg.aux_loss_coef / ((double)t->M * t->cfg.dp));
  if (q->ep > 1) q->ep_x.tokens_in = 0;
}

void train_moe_reduce_grads(trainer *t) {
  moe_state *q = &t->m.moe;
  if (q->nmoe == 0 || !t->edp_c) return;
  comm_allreduce(t->edp_c, t->compute, q->grad, q->nfloats_padded, COMM_FLOAT32);
}

void train_moe_stats(trainer *t) {
  moe_state *q = &t->m.moe;
  if (q->nmoe == 0 || t->g.tp_rank != 0) return;
  const dev_ops *o = t->o;
  o->copy(t->compute, t->stat + 2, q->aux_acc, sizeof(double));
  if (t->g.edp_rank == 0) o->sum_squares_accumulate(t->compute, t->stat + 1, q->grad, q->nfloats);
}

void train_moe_optimizer(trainer *t, int step, double clip_scale, float lr) {
  moe_state *q = &t->m.moe;
  if (q->nmoe == 0) return;
  size_t lo, hi;
  train_moe_slice(t, &lo, &hi);
  if (clip_scale < 1.0) t->o->scale(t->compute, q->grad + lo, (float)clip_scale, hi - lo);
  for (int k = 0; k < q->nparams; k++) {
    const moe_param *p = &q->params[k];
    size_t b, e;
    if (range_overlap(p->offset, p->count, lo, hi, &b, &e))
      train_adamw(t, q->param + b, q->grad + b, t->moe.adam_m + (b - lo), t->moe.adam_v + (b - lo),
                  e - b, p->decay, step, lr);
  }
  if (hi - lo < q->nfloats_padded) /* ZeRO-1: every EDP member's slice to every member */
    comm_allgather(t->edp_c, t->compute, q->param, q->param + lo, hi - lo, COMM_FLOAT32);
}

/* After the step's sync: the routing statistics of this rank's MoE layers. */
void train_moe_trace_step(trainer *t, int step) {
  model *m = &t->m;
  moe_state *q = &m->moe;
  if (q->nmoe == 0 || !stepscope_active() || !q->host_counts) return;
  int dropped = 0;
  t->o->copy_to_host(t->compute, &dropped, q->dropped_acc, sizeof dropped);
  if (t->o->stream_synchronize(t->compute) != 0) return;
  size_t cap = 160 + (size_t)q->E * 12;
  char *args = malloc(cap);
  if (!args) return;
  for (int b = 0; b < m->nblocks; b++) {
    int mi = m->block_moe[b];
    if (mi < 0) continue;
    size_t at = 0;
    at += (size_t)snprintf(args + at, cap - at,
                           "{\"step\":%d,\"layer\":%d,\"experts\":%d,\"top_k\":%d,\"ep\":%d,"
                           "\"ep_rank\":%d,\"edp_rank\":%d,\"tp_rank\":%d,"
                           "\"tokens_per_expert\":[",
                           step, m->first_layer + b, q->E, q->K, q->ep, q->ep_rank, t->g.edp_rank,
                           t->g.tp_rank);
    for (int e = 0; e < q->E && at < cap; e++) {
      long long n = 0;
      for (int mb = 0; mb < q->host_counts_mb; mb++)
        n += q->host_counts[((size_t)mb * q->nmoe + mi) * q->E + e];
      at += (size_t)snprintf(args + at, cap - at, "%s%lld", e ? "," : "", n);
    }
    if (at < cap) snprintf(args + at, cap - at, "],\"capacity\":%d}", q->capacity);
    stepscope_mark_now("moe.load", args);
  }
  free(args);
  stepscope_counter_now("moe.dropped", 0, (double)dropped);
  if (q->ep > 1) stepscope_counter_now("moe.rows_in", 0, (double)q->ep_x.tokens_in);
}
