/*
 * master_shard.c — the fp32 master weights as the rank's shard (--gemm-weights bf16 under
 * ZeRO-1/2; model_master_sharded), the ZeRO paper's layout: no rank holds the stage's fp32
 * weights whole. Each keeps its shard of them beside its AdamW moments, cut as the moments are
 * (ZeRO-1: its slice [shard_begin, shard_end) of the flat buffer; ZeRO-2: its piece of every
 * bucket, zero.h), and the model keeps working copies only: bf16 of the GEMM weights, fp32 of
 * the weights kernels read in fp32 (model_gemm.c). A rank of an interleaved pipeline (ZeRO-1)
 * does so for every model chunk: chunk j's masters are its slice of that chunk's flat buffer
 * (chunk_slice), the cut of the chunk's AdamW moments.
 *
 * How it works: after AdamW on the shard (and after the set-up and a restore) each rank loads
 * the working copies of what it owns from its masters (model_load_working_copies: a bf16 cast of
 * the GEMM weights, a copy of the rest), and every member's part goes to every member: the
 * parameters keep their flat order in both copies, so a member's range is one span in each
 * (model_working_spans), and one all-gather of uneven parts per copy moves them all
 * (comm_allgatherv: on NCCL a group of broadcasts, one launch) — bf16 for the GEMM weights, half
 * the bytes of an fp32 gather, fp32 for the rest; the same values a full fp32 buffer would give
 * them. The cut
 * stays that of the moments, so checkpoints keep their files: they read the masters gathered in
 * fp32 through a buffer free between steps (ZeRO-1: each chunk's flat gradient buffer; ZeRO-2
 * through ZeRO-3's bucket stream with its bucket gradient buffers, grad_sync.c) and write the
 * rank's shard.
 */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

float *grad_sync_chunk_masters(const trainer *t, int j) {
  return j == 0 ? t->gs.z.param_shard : t->gs.more_masters[j - 1];
}

/* ZeRO-1: every member's slice of chunk j's masters into its flat gradient buffer, on "comm dp"
 * (after the optimizer's updates); waits for it. */
static void zero1_gather_masters(trainer *t, int j) {
  const dev_ops *o = t->o;
  model *m = chunk_model(t, j);
  size_t lo, hi;
  chunk_slice(t, j, &lo, &hi);
  o->event_record(t->gs.ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, t->gs.ev_opt_done);
  o->copy(t->dp_stream, m->grad + lo, grad_sync_chunk_masters(t, j), (hi - lo) * 4);
  if (t->reduce_n > 1)
    comm_allgather(t->dp_c, t->dp_stream, m->grad, m->grad + lo, hi - lo, COMM_FLOAT32);
  o->stream_synchronize(t->dp_stream);
}

/* The flat range [*lo, *hi) of chunk j that member q of the gradient group owns: ZeRO-1 its
 * slice (clipped to the weights), ZeRO-2 its piece of bucket k (one chunk). */
static void owned(trainer *t, int j, int q, int k, size_t *lo, size_t *hi) {
  if (t->cfg.zero >= 2)
    zero_owned(&t->gs.z.plan, k, q, lo, hi);
  else
    chunk_member_slice(t, j, q, lo, hi);
  if (*hi > chunk_model(t, j)->nfloats) *hi = chunk_model(t, j)->nfloats;
}

/* Loads chunk j's working copies of what this rank owns from its masters (bucket k under
 * ZeRO-2), then every member's part of them to every member: one all-gather of uneven parts
 * into each copy (comm_allgatherv; a member's part is one span of each), bf16 for the GEMM
 * weights (half the bytes of an fp32 gather), fp32 for the rest. */
static void load_owned(trainer *t, int j, int k) {
  model *m = chunk_model(t, j);
  size_t n = (size_t)t->reduce_n, lo, hi;
  owned(t, j, comm_rank(t->dp_c), k, &lo, &hi);
  const float *mine =
      grad_sync_chunk_masters(t, j) + (t->cfg.zero >= 2 ? t->gs.z.plan.b[k].shard_off : 0);
  if (hi > lo) model_load_working_copies(m, t->dp_stream, mine, lo, hi);
  if (n == 1) return;
  /* every member's part of each copy, in bytes: where it starts and how long it is */
  size_t *gemm_at = t->gs.working_parts, *gemm_len = gemm_at + n;
  size_t *fp32_at = gemm_len + n, *fp32_len = fp32_at + n, gemm_all = 0, fp32_all = 0;
  for (int q = 0; q < t->reduce_n; q++) {
    size_t span[4] = {0, 0, 0, 0};
    owned(t, j, q, k, &lo, &hi);
    if (hi > lo) model_working_spans(m, lo, hi, span);
    gemm_at[q] = 2 * span[0];
    gemm_len[q] = 2 * span[1];
    fp32_at[q] = 4 * span[2];
    fp32_len[q] = 4 * span[3];
    gemm_all += gemm_len[q];
    fp32_all += fp32_len[q];
  }
  if (gemm_all) comm_allgatherv(t->dp_c, t->dp_stream, m->gemm_w, gemm_at, gemm_len);
  if (fp32_all) comm_allgatherv(t->dp_c, t->dp_stream, m->fp32_w, fp32_at, fp32_len);
}

void grad_sync_load_working_copies(trainer *t) {
  grad_sync *gs = &t->gs;
  const dev_ops *o = t->o;
  o->event_record(gs->ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, gs->ev_opt_done);
  if (stepscope_active()) stepscope_range_push("gather working copies", NULL);
  for (int j = 0; j < t->V; j++)
    for (int k = 0; k < (t->cfg.zero >= 2 ? gs->nbuckets : 1); k++)
      load_owned(t, j, k);
  pop_range();
  o->event_record(gs->ev_gather_done, t->dp_stream);
  o->stream_wait_event(t->compute, gs->ev_gather_done);
}

/* ZeRO-1: a new device buffer with this rank's slice of chunk j's initial master weights, drawn
 * directly (model_init_param_range: the same bits as the full initialization). NULL after
 * fail(). */
static float *draw_masters(trainer *t, int j) {
  size_t lo, hi;
  chunk_slice(t, j, &lo, &hi);
  float *shard = t->o->alloc(t->dev, (hi - lo) * 4);
  float *host = calloc(hi > lo ? hi - lo : 1, sizeof(float));
  char e[256];
  if (!shard || !host) {
    free(host);
    t->o->free(t->dev, shard);
    fail(t, "%s", "out of memory for the master weights' shard");
    return NULL;
  }
  if (model_init_param_range(chunk_model(t, j), t->cfg.seed, lo, hi, host, e, sizeof e) != 0) {
    free(host);
    t->o->free(t->dev, shard);
    fail(t, "%s", e);
    return NULL;
  }
  t->o->copy_to_device(t->compute, shard, host, (hi - lo) * 4);
  int rc = t->o->stream_synchronize(t->compute);
  free(host);
  if (rc != 0) {
    t->o->free(t->dev, shard);
    fail(t, "%s", dev_last_error(t->dev));
    return NULL;
  }
  return shard;
}

int grad_sync_master_init(trainer *t) {
  grad_sync *gs = &t->gs;
  gs->working_parts = calloc(4 * (size_t)t->reduce_n, sizeof(size_t));
  if (!gs->working_parts ||
      (t->V > 1 && !(gs->more_masters = calloc((size_t)t->V - 1, sizeof(float *)))))
    return fail(t, "%s", "out of memory");
  if (t->cfg.zero == 1) { /* ZeRO-2 drew its pieces in zero_setup (one chunk) */
    if (!(gs->z.param_shard = draw_masters(t, 0))) return -1;
    for (int j = 1; j < t->V; j++)
      if (!(gs->more_masters[j - 1] = draw_masters(t, j))) return -1;
  }
  grad_sync_load_working_copies(t);
  return t->o->stream_synchronize(t->compute) != 0 ? fail(t, "%s", dev_last_error(t->dev)) : 0;
}

/* ZeRO-1's stream: chunk's flat floats [at, at + n) from its gathered masters. */
static int zero1_read(void *arg, int chunk, size_t at, size_t n, float *host) {
  trainer *t = arg;
  t->o->copy_to_host(t->dp_stream, host, chunk_model(t, chunk)->grad + at, n * 4);
  return t->o->stream_synchronize(t->dp_stream) != 0 ? -1 : 0;
}

/* ZeRO-1's stream: this rank's slice of chunk's flat floats [at, at + n) into its masters. */
static int zero1_write(void *arg, int chunk, size_t at, size_t n, const float *host) {
  trainer *t = arg;
  size_t lo, hi, b, e;
  chunk_slice(t, chunk, &lo, &hi);
  if (range_overlap(lo, hi - lo, at, at + n, &b, &e))
    t->o->copy_to_device(t->compute, grad_sync_chunk_masters(t, chunk) + (b - lo), host + (b - at),
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
  for (int j = 0; j < t->V; j++) /* read back by zero1_read; the next step zeroes the buffers */
    zero1_gather_masters(t, j);
}

float *grad_sync_master_params(trainer *t, int chunk) {
  size_t n = chunk_model(t, chunk)->nfloats_padded;
  float *host = malloc(n * 4);
  ckpt_rank_state s;
  memset(&s, 0, sizeof s);
  grad_sync_ckpt_stream(t, &s);
  if (t->cfg.zero >= 2)
    grad_sync_zero3_stream_begin(t);
  else
    zero1_gather_masters(t, chunk);
  int rc = host ? s.param_read(t, chunk, 0, n, host) : -1;
  if (s.param_finish) s.param_finish(t); /* the collectives a failure skipped */
  if (rc != 0) {
    fail(t, "%s", host ? dev_last_error(t->dev) : "out of memory");
    free(host);
    return NULL;
  }
  return host;
}
