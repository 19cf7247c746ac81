/*
 * master_shard.c — the fp32 master weights as the rank's shard (--gemm-weights bf16 under
 * ZeRO-1/2; model_master_sharded), the ZeRO paper's layout: no rank holds the stage's fp32
 * weights whole. Each keeps its shard of them beside its AdamW moments, cut as the moments are
 * (ZeRO-1: its slice [shard_begin, shard_end) of the flat buffer; ZeRO-2: its piece of every
 * bucket, zero.h), and the model keeps working copies only: bf16 of the GEMM weights, fp32 of
 * the weights kernels read in fp32 (model_gemm.c).
 *
 * How it works: after AdamW on the shard (and after the set-up and a restore) each rank loads
 * the working copies of what it owns from its masters (model_load_working_copies: a bf16 cast of
 * the GEMM weights, a copy of the rest), and every member's part goes to every member: the
 * parameters keep their flat order in both copies, so a member's range is one span in each
 * (model_working_spans), broadcast from it — bf16 for the GEMM weights, half the bytes of an
 * fp32 gather, fp32 for the rest; the same values a full fp32 buffer would give them. The cut
 * stays that of the moments, so checkpoints keep their files: they read the masters gathered in
 * fp32 through a buffer free between steps (ZeRO-1's flat gradient buffer; ZeRO-2 through
 * ZeRO-3's bucket stream with its bucket gradient buffers, grad_sync.c) and write the rank's
 * shard.
 */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

/* ZeRO-1: every member's slice of the masters into the flat gradient buffer, on "comm dp". */
static void zero1_gather_masters(trainer *t) {
  const grad_sync *gs = &t->gs;
  model *m = &t->m;
  float *mine = m->grad + gs->shard_begin;
  t->o->copy(t->dp_stream, mine, gs->z.param_shard, gs->shard_len * 4);
  if (t->reduce_n > 1)
    comm_allgather(t->dp_c, t->dp_stream, m->grad, mine, gs->shard_len, COMM_FLOAT32);
}

/* The flat range [*lo, *hi) member q of the gradient group owns: ZeRO-1 its slice (clipped to
 * the weights), ZeRO-2 its piece of bucket k. */
static void owned(const trainer *t, int q, int k, size_t *lo, size_t *hi) {
  const grad_sync *gs = &t->gs;
  if (t->cfg.zero >= 2) {
    zero_owned(&gs->z.plan, k, q, lo, hi);
  } else {
    *lo = (size_t)q * gs->shard_len;
    *hi = *lo + gs->shard_len;
  }
  if (*hi > t->m.nfloats) *hi = t->m.nfloats;
}

/* Loads the working copies of what this rank owns from its masters (bucket k under ZeRO-2), then
 * every member's part of them from that member: one broadcast into each copy, bf16 for the GEMM
 * weights (half the bytes of an fp32 gather), fp32 for the rest. */
static void load_owned(trainer *t, int k) {
  const grad_sync *gs = &t->gs;
  model *m = &t->m;
  size_t lo, hi;
  owned(t, comm_rank(t->dp_c), k, &lo, &hi);
  const float *mine = gs->z.param_shard + (t->cfg.zero >= 2 ? gs->z.plan.b[k].shard_off : 0);
  if (hi > lo) model_load_working_copies(m, t->dp_stream, mine, lo, hi);
  for (int q = 0; q < t->reduce_n && t->reduce_n > 1; q++) {
    size_t span[4];
    owned(t, q, k, &lo, &hi);
    if (hi <= lo) continue;
    model_working_spans(m, lo, hi, span);
    if (span[1])
      comm_broadcast(t->dp_c, t->dp_stream, (char *)m->gemm_w + 2 * span[0], 2 * span[1], q);
    if (span[3]) comm_broadcast(t->dp_c, t->dp_stream, m->fp32_w + span[2], 4 * span[3], q);
  }
}

void grad_sync_load_working_copies(trainer *t) {
  grad_sync *gs = &t->gs;
  const dev_ops *o = t->o;
  o->event_record(gs->ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, gs->ev_opt_done);
  if (stepscope_active()) stepscope_range_push("gather working copies", NULL);
  for (int k = 0; k < (t->cfg.zero >= 2 ? gs->nbuckets : 1); k++)
    load_owned(t, k);
  pop_range();
  o->event_record(gs->ev_gather_done, t->dp_stream);
  o->stream_wait_event(t->compute, gs->ev_gather_done);
}

int grad_sync_master_init(trainer *t) {
  grad_sync *gs = &t->gs;
  if (t->cfg.zero == 1) { /* ZeRO-2 drew its pieces in zero_setup */
    gs->z.param_shard = t->o->alloc(t->dev, gs->shard_len * 4);
    float *host = calloc(gs->shard_len ? gs->shard_len : 1, sizeof(float));
    char e[256];
    if (!gs->z.param_shard || !host) {
      free(host);
      return fail(t, "%s", "out of memory for the master weights' shard");
    }
    if (model_init_param_range(&t->m, t->cfg.seed, gs->shard_begin, gs->shard_end, host, e,
                               sizeof e) != 0) {
      free(host);
      return fail(t, "%s", e);
    }
    t->o->copy_to_device(t->compute, gs->z.param_shard, host, gs->shard_len * 4);
    int rc = t->o->stream_synchronize(t->compute);
    free(host);
    if (rc != 0) return fail(t, "%s", dev_last_error(t->dev));
  }
  grad_sync_load_working_copies(t);
  return t->o->stream_synchronize(t->compute) != 0 ? fail(t, "%s", dev_last_error(t->dev)) : 0;
}

/* ZeRO-1's stream: the flat floats [at, at + n) from the gathered masters. */
static int zero1_read(void *arg, size_t at, size_t n, float *host) {
  trainer *t = arg;
  t->o->copy_to_host(t->dp_stream, host, t->m.grad + at, n * 4);
  return t->o->stream_synchronize(t->dp_stream) != 0 ? -1 : 0;
}

/* ZeRO-1's stream: this rank's slice of the flat floats [at, at + n) into its masters. */
static int zero1_write(void *arg, size_t at, size_t n, const float *host) {
  trainer *t = arg;
  const grad_sync *gs = &t->gs;
  size_t b = at > gs->shard_begin ? at : gs->shard_begin;
  size_t e = at + n < gs->shard_end ? at + n : gs->shard_end;
  if (e > b)
    t->o->copy_to_device(t->compute, gs->z.param_shard + (b - gs->shard_begin), host + (b - at),
                         (e - b) * 4);
  return t->o->stream_synchronize(t->compute) != 0 ? -1 : 0;
}

void grad_sync_ckpt_stream(trainer *t, ckpt_rank_state *s) {
  s->param_ctx = t;
  if (t->cfg.zero >= 2) {
    s->param_read = grad_sync_zero3_read;
    s->param_finish = grad_sync_zero3_finish;
    s->param_write = grad_sync_zero3_write;
  } else {
    s->param_read = zero1_read;
    s->param_finish = NULL;
    s->param_write = zero1_write;
  }
}

void grad_sync_ckpt_stream_begin(trainer *t) {
  if (t->cfg.zero >= 2) {
    grad_sync_zero3_stream_begin(t);
    return;
  }
  const dev_ops *o = t->o;
  o->event_record(t->gs.ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, t->gs.ev_opt_done);
  zero1_gather_masters(t); /* read back by zero1_read; the next step zeroes the buffer */
  o->stream_synchronize(t->dp_stream);
}

float *grad_sync_master_params(trainer *t) {
  size_t n = t->m.nfloats_padded;
  float *host = malloc(n * 4);
  ckpt_rank_state s;
  memset(&s, 0, sizeof s);
  grad_sync_ckpt_stream(t, &s);
  grad_sync_ckpt_stream_begin(t);
  int rc = host ? s.param_read(t, 0, n, host) : -1;
  if (s.param_finish) s.param_finish(t); /* the collectives a failure skipped */
  if (rc != 0) {
    free(host);
    fail(t, "%s", host ? dev_last_error(t->dev) : "out of memory");
    return NULL;
  }
  return host;
}
