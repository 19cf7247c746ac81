/*
 * train_step.c — one optimizer step of one rank (train_run_step), the learning-rate
 * schedule and the --debug-delay hook.
 *
 * How a step runs on a rank (all of it enqueued on streams; the host waits once
 * per step, to read the loss and the gradient norm):
 *   1. zero the gradients and the loss accumulator; load this DP rank's share of
 *      the global batch into host buffers (one per micro-batch);
 *   2. walk the stage's pipeline schedule (pipeline_exec.c: forwards and backwards with
 *      their p2p transfers), which runs this rank's stages through the stage operations
 *      below (train_stage_ops: the inputs, forward, backward and --debug-delay);
 *   3. during the last micro-batch's backward, as soon as the gradients of a
 *      bucket are final, the bucket is all-reduced over the gradient group (DP,
 *      times CP under context parallelism: weights are replicated over both) on the
 *      "comm dp" stream (grad_sync.c; overlapping the rest of backward; --overlap off
 *      issues every bucket after backward instead, grad_sync_finish);
 *   4. the tied embedding's gradient is summed over the first and last stage;
 *      loss and squared gradient norm are summed over the world in one f64
 *      all-reduce; the host reads them, computes the clip factor and enqueues
 *      AdamW on the rank's shard (the whole buffer without ZeRO; with --zero 1
 *      its 1/(dp x cp) slice, followed by an all-gather of the parameters over
 *      DP x CP; ZeRO-2/3: grad_sync.c's grad_sync_zero_optimizer).
 * The gradient norm counts every parameter once: each member of the gradient
 * group its 1/(dp x cp) slice of the flat buffer, TP-replicated parameters only
 * on TP rank 0, the last stage's copy of the tied embedding not at all.
 * Interleaved 1F1B: chunk 0's gradient buckets are all-reduced as usual while the other
 * chunks' whole gradient buffers are all-reduced after the pipeline flush; with --zero 1
 * each chunk's AdamW state is this rank's slice of it (chunk_slice) and every chunk is
 * all-gathered after the optimizer (with --gemm-weights bf16 each chunk's fp32 master slice is
 * updated instead and its working copies gathered, master_shard.c).
 */
#include "train_internal.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <time.h>

#include "ring_attention.h"

/* --debug-delay: this rank's device stops for the delays given for `phase`. The host waits
 * for the compute stream, then sleeps, so the device idles for the delay before the phase's
 * next operation whatever the backend (a host-side sleep alone would hide while the host
 * runs ahead of the device). */
void train_debug_delay(trainer *t, int phase) {
  const train_config *c = &t->cfg;
  for (int k = 0; k < c->ndebug_delays; k++) {
    if (c->debug_delay[k].rank != t->env.rank || c->debug_delay[k].phase != phase) continue;
    if (t->compute)                         /* no stream yet at DELAY_START */
      t->o->stream_synchronize(t->compute); /* an error is sticky: the step's sync reports it */
    struct timespec ts = {c->debug_delay[k].ms / 1000,
                          (long)(c->debug_delay[k].ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
      ;
  }
}

double train_lr_at(const train_config *c, int step) {
  if (c->warmup > 0 && step < c->warmup) return c->lr * (step + 1) / c->warmup;
  int decay_steps = c->steps - c->warmup;
  if (decay_steps <= 1) return c->lr;
  double progress = (double)(step - c->warmup) / (decay_steps - 1);
  if (progress > 1) progress = 1;
  double min_lr = c->lr * c->min_lr_ratio;
  return min_lr + 0.5 * (c->lr - min_lr) * (1 + cos(M_PI * progress));
}

/* This CP rank's share of whole sequences src [B,T] in the model's layout
 * dst [2][B][Tc]: its two chunks (ring_attention_chunk) of every sequence. */
static void take_cp_chunks(const trainer *t, int *dst, const int *src) {
  int B = t->mb_size, T = t->cfg.seq, cp = t->g.cp, Tc = T / (2 * cp);
  for (int h = 0; h < 2; h++) {
    int pos = ring_attention_chunk(cp, t->g.cp_rank, h) * Tc;
    for (int b = 0; b < B; b++)
      memcpy(dst + ((size_t)h * B + b) * Tc, src + (size_t)b * T + pos, sizeof(int) * (size_t)Tc);
  }
}

static int load_batch(trainer *t, int step) {
  size_t N = (size_t)t->m.N;
  int per_dp = t->cfg.batch / t->cfg.dp;
  for (int mb = 0; mb < t->M; mb++) {
    int first = t->g.dp_rank * per_dp + mb * t->mb_size;
    char e[256];
    int *tokens = t->host_tokens + (size_t)mb * N, *targets = t->host_targets + (size_t)mb * N;
    if (t->g.cp > 1) {
      /* every CP rank reads the same sequences and keeps its chunks */
      tokens = t->host_seq_tokens;
      targets = t->host_seq_targets;
    }
    if (train_data_batch(t->data, step, first, t->mb_size, tokens, targets, e, sizeof e) != 0)
      return fail(t, "%s", e);
    if (t->g.cp > 1) {
      take_cp_chunks(t, t->host_tokens + (size_t)mb * N, tokens);
      take_cp_chunks(t, t->host_targets + (size_t)mb * N, targets);
    }
  }
  return 0;
}

int train_sync_all(trainer *t) {
  int rc = t->o->stream_synchronize(t->compute);
  rc |= t->o->stream_synchronize(t->dp_stream);
  rc |= t->o->stream_synchronize(t->pp_send);
  rc |= t->o->stream_synchronize(t->pp_recv);
  if (t->cp_send) {
    rc |= t->o->stream_synchronize(t->cp_send);
    rc |= t->o->stream_synchronize(t->cp_recv);
  }
  if (rc) {
    const char *why = dev_last_error(t->dev);
    snprintf(t->err, sizeof t->err, "%s", why[0] ? why : "a stream failed");
    comm_job_abort(t->job, t->err);
    return -1;
  }
  return 0;
}

/* ---- the stage operations (pipeline_exec.h) ---------------------------------------------- */

static model *stage_chunk(void *ctx, int chunk) {
  return chunk_model(ctx, chunk);
}

static void stage_delay(void *ctx, int phase) {
  train_debug_delay(ctx, phase);
}

/* The micro-batch's tokens to the first stage's slot, its targets to the last stage's. */
static void stage_load_inputs(void *ctx, int chunk, int slot, int mb) {
  trainer *t = ctx;
  model *m = chunk_model(t, chunk);
  model_slot *sl = &m->slots[slot];
  size_t N = (size_t)m->N;
  if (m->first_stage)
    t->o->copy_to_device(t->compute, sl->tokens, t->host_tokens + (size_t)mb * N, N * 4);
  if (m->last_stage)
    t->o->copy_to_device(t->compute, sl->targets, t->host_targets + (size_t)mb * N, N * 4);
}

static void stage_forward(void *ctx, int chunk, int slot, int mb) {
  model_forward(chunk_model(ctx, chunk), slot, mb);
}

/* Backward hands each finished unit to grad_sync.c on the last micro-batch, or on every one
 * under ZeRO-2/3 (grad_sync_backward_hook). */
static void stage_backward(void *ctx, int chunk, int slot, int mb) {
  trainer *t = ctx;
  grad_unit_fn unit_done = grad_sync_backward_hook(t, chunk, mb == t->M - 1);
  model_backward(chunk_model(t, chunk), slot, mb, unit_done, t);
}

pipeline_stage_ops train_stage_ops(trainer *t) {
  pipeline_stage_ops ops = {
      t, stage_chunk, stage_delay, stage_load_inputs, stage_forward, stage_backward};
  return ops;
}

/* ---- the step ------------------------------------------------------------------------------ */

void train_adamw(trainer *t, float *param, const float *grad, float *adam_m, float *adam_v,
                 size_t n, int decay, int step, float lr) {
  const train_config *c = &t->cfg;
  t->o->adamw(t->compute, param, grad, adam_m, adam_v, n, lr, (float)c->beta1, (float)c->beta2,
              (float)c->eps, decay ? (float)c->weight_decay : 0.0f, step + 1);
}

/* Clips the gradients of mc's floats [lo, hi) and runs AdamW on their parameters (`param`: float
 * lo's, in the flat buffer or the master shard); the optimizer state (adam_m, adam_v) covers that
 * range from lo. */
static void adam_range(trainer *t, model *mc, size_t lo, size_t hi, float *param, float *adam_m,
                       float *adam_v, int step, double clip_scale, float lr) {
  if (clip_scale < 1.0) t->o->scale(t->compute, mc->grad + lo, (float)clip_scale, hi - lo);
  for (int k = 0; k < mc->nparams; k++) {
    size_t b, e;
    if (range_overlap(mc->params[k].offset, mc->params[k].count, lo, hi, &b, &e))
      train_adamw(t, param + (b - lo), mc->grad + b, adam_m + (b - lo), adam_v + (b - lo), e - b,
                  mc->params[k].decay, step, lr);
  }
}

void train_refresh_gemm_weights(trainer *t) {
  if (t->m.fp32_w) { /* sharded masters: both working copies from their gathers */
    grad_sync_load_working_copies(t);
    return;
  }
  for (int j = 0; j < t->V; j++)
    model_refresh_gemm_weights(chunk_model(t, j));
}

static void optimizer(trainer *t, int step, double clip_scale, float lr) {
  if (t->cfg.zero >= 2) {
    grad_sync_zero_optimizer(t, step, clip_scale, lr);
    return;
  }
  /* every chunk (interleaved: V of them), whole (zero 0) or this rank's slice of it (zero 1) */
  for (int j = 0; j < t->V; j++) {
    size_t lo, hi;
    float *param;
    grad_sync_adam_range(t, j, &lo, &hi, &param);
    adam_range(t, chunk_model(t, j), lo, hi, param, j ? t->more_adam[2 * (j - 1)] : t->adam_m,
               j ? t->more_adam[2 * (j - 1) + 1] : t->adam_v, step, clip_scale, lr);
  }
  grad_sync_zero1_gather(t); /* ZeRO-1: every member's slices to every member */
}

int train_run_step(trainer *t, int step, double *loss_out, double *norm_out) {
  const dev_ops *o = t->o;
  model *m = &t->m;
  train_config *c = &t->cfg;
  train_debug_delay(t, DELAY_DATA);
  if (load_batch(t, step) != 0) return -1;
  grad_sync_step_begin(t); /* the step's gradient buffers */
  for (int j = 0; j < t->V; j++) {
    o->zero(t->compute, chunk_model(t, j)->loss_acc, sizeof(double));
    model_set_loss_weight(chunk_model(t, j), 1.0f / ((float)c->batch * (float)c->seq));
  }
  train_moe_step_begin(t);
  pipeline_walk(&t->pipe);
  train_moe_reduce_grads(t);
  grad_sync_finish(t); /* gradients summed over the gradient group and the tied embedding */
  /* loss and gradient norm, summed over the world */
  model *ml = chunk_model(t, t->V - 1); /* the last virtual stage's chunk, if here */
  if (ml->last_stage && t->g.tp_rank == 0)
    o->copy(t->compute, t->stat, ml->loss_acc, sizeof(double));
  else
    o->zero(t->compute, t->stat, sizeof(double));
  o->zero(t->compute, t->stat + 1, 3 * sizeof(double));
  train_moe_stats(t);
  for (int k = 0; k < m->nparams; k++) {
    param_info *p = &m->params[k];
    if (!p->norm_counted) continue;
    grad_sync_norm_accumulate(t, p); /* this rank's shard of it */
  }
  for (int j = 1; j < t->V; j++) { /* interleaved: the other chunks, this rank's 1/n slice */
    model *mc = chunk_model(t, j);
    size_t lo, hi;
    chunk_slice(t, j, &lo, &hi);
    for (int k = 0; k < mc->nparams; k++) {
      const param_info *p = &mc->params[k];
      size_t b, e;
      if (p->norm_counted && range_overlap(p->offset, p->count, lo, hi, &b, &e))
        o->sum_squares_accumulate(t->compute, t->stat + 1, mc->grad + b, e - b);
    }
  }
  comm_allreduce(t->world_c, t->compute, t->stat, 4, COMM_FLOAT64);
  o->copy_to_host(t->compute, t->host_stat, t->stat, sizeof t->host_stat);
  if (train_sync_all(t) != 0) return -1;
  double loss = t->host_stat[0] / ((double)c->batch * c->seq);
  double norm = sqrt(t->host_stat[1]);
  double scale = c->grad_clip > 0 && norm > c->grad_clip ? c->grad_clip / norm : 1.0;
  if (stepscope_active()) stepscope_range_push("optimizer", NULL);
  train_debug_delay(t, DELAY_OPTIMIZER);
  optimizer(t, step, scale, (float)train_lr_at(c, step));
  train_moe_optimizer(t, step, scale, (float)train_lr_at(c, step));
  train_refresh_gemm_weights(t); /* after the gathers (sharded masters: it gathers them) */
  pop_range();
  if (train_sync_all(t) != 0) return -1;
  *loss_out = loss;
  *norm_out = norm;
  /* the load-balancing loss of the step: coef x (sum over MoE layers of the mean over the
   * global batch's micro-batches of aux) */
  t->aux_loss = c->aux_loss_coef * t->host_stat[2] / ((double)t->M * c->dp);
  train_moe_trace_step(t, step);
  return 0;
}
