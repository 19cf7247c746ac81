/*
 * grad_sync.c — gradient synchronisation of one rank: data-parallel buckets and ZeRO-2/3. It
 * owns struct grad_sync (grad_sync.h): the buckets, the optimizer shard, the ZeRO state and
 * their events, made by grad_sync_init and freed by grad_sync_free; the step (train_step.c)
 * and the pipeline's backward reach them only through the grad_sync_* functions.
 *
 * Buckets (build_buckets): the flat gradient buffer, laid out in reverse backward
 * order, cut at unit boundaries into buckets of --bucket-mb. Without ZeRO-2/3, during the
 * last micro-batch's backward each bucket is all-reduced over the gradient group (DP x CP)
 * on "comm dp" as soon as its gradients are final (unit_done -> launch_bucket); what is left
 * (--overlap off) goes in grad_sync_finish, with the tied embedding's sum.
 * ZeRO-2/3 (--zero 2/3; zero.h for the cut): instead, every micro-batch's gradients go
 * through two rotating bucket buffers that are reduce-scattered into the rank's gradient
 * shard as backward finishes each bucket; AdamW runs on the shard (grad_sync_zero_optimizer);
 * ZeRO-2 then all-gathers the parameters, ZeRO-3 keeps only its parameter pieces and
 * gathers a bucket before the model uses it (zero3_before_unit, with a prefetch of the
 * next), and gathers / scatters the whole stage around checkpoints (grad_sync_zero3_*_all).
 * ZeRO-1 all-gathers the updated slices after AdamW (grad_sync_zero1_gather).
 * Under sequence parallelism the LayerNorm gradients of a block, partial over TP, are
 * all-reduced over TP as each block finishes (unit_done).
 */
#include "train_internal.h"

#include <stdlib.h>
#include <string.h>

static void zero3_before_unit(void *arg, int unit, int backward);

/* ZeRO-2/3: a function called for every piece of a parameter this rank owns (flat [b, e),
 * shard offset at). */
typedef void (*zero_piece_fn)(trainer *t, const param_info *p, size_t b, size_t e, size_t at,
                              void *arg);

static void build_buckets(trainer *t) {
  grad_sync *gs = &t->gs;
  model *m = &t->m;
  int units = model_unit_count(m);
  size_t limit = (size_t)(t->cfg.bucket_mb * 1024 * 1024 / 4);
  if (limit < 1) limit = 1;
  gs->buckets = calloc((size_t)units, sizeof(bucket));
  gs->nbuckets = 0;
  if (!gs->buckets) return;
  bucket cur = {0, 0, -1, 0, 0, 0};
  int open = 0;
  for (int u = 0; u < units; u++) {
    size_t b, e;
    model_unit_range(m, u, &b, &e);
    if (e <= b) continue;
    if (t->cfg.zero >= 2 && u == units - 1 && open) {
      /* ZeRO-2/3: the embedding unit is a bucket of its own (zero_state, grad_sync.h) */
      gs->buckets[gs->nbuckets++] = cur;
      open = 0;
    }
    if (!open) {
      cur.begin = b;
      cur.end = e;
      open = 1;
    } else {
      cur.begin = b; /* units are laid out in reverse backward order */
    }
    cur.ready_unit = u;
    if (cur.end - cur.begin >= limit) {
      gs->buckets[gs->nbuckets++] = cur;
      open = 0;
    }
  }
  if (open) gs->buckets[gs->nbuckets++] = cur;
  int rotating = 0;
  for (int k = 0; k < gs->nbuckets; k++) {
    bucket *bk = &gs->buckets[k];
    bk->embed = t->cfg.zero >= 2 && bk->ready_unit == units - 1;
    bk->slot = bk->embed ? -1 : rotating++ % 2;
  }
  /* the padding tail (ZeRO shards) rides with the bucket that ends at nfloats */
  for (int k = 0; k < gs->nbuckets; k++)
    if (gs->buckets[k].end == m->nfloats) gs->buckets[k].end = m->nfloats_padded;
}

/* --zero 2/3: the sharding plan, the shard and bucket buffers, and the model's units bound to
 * them; under ZeRO-3 also the rank's parameter pieces (drawn directly: zero3_init_shard). */
/* The two rotating bucket buffers of `rot` floats with their events, and the embedding
 * bucket's buffer of `emb` floats (none when 0): for gradients, and under ZeRO-3 for the
 * gathered parameters. 1 when an allocation failed. */
static int alloc_bucket_buffers(trainer *t, size_t rot, size_t emb, float *buf[2], dev_event *ev[2],
                                float **embed) {
  const dev_ops *o = t->o;
  int bad = 0;
  for (int s = 0; s < 2 && rot; s++) {
    buf[s] = o->alloc(t->dev, rot * 4);
    ev[s] = o->event_create(t->dev);
    bad |= !buf[s] || !ev[s];
  }
  if (emb) {
    *embed = o->alloc(t->dev, emb * 4);
    bad |= !*embed;
  }
  return bad;
}

/* ZeRO-3: this rank's pieces of the initial parameters, drawn piece by piece on the host
 * (model_init_param_range: the same bits as the full initialization) and copied into its
 * parameter shard, so that no buffer ever holds all of the stage's parameters. */
static int zero3_init_shard(trainer *t) {
  zero_state *z = &t->gs.z;
  size_t len = z->plan.shard_len;
  float *host = calloc(len ? len : 1, sizeof(float)); /* padding stays zero */
  if (!host) return fail(t, "%s", "out of memory");
  char e[256];
  for (int k = 0; k < z->plan.nbuckets; k++) {
    size_t lo, hi;
    zero_owned(&z->plan, k, z->plan.rank, &lo, &hi);
    if (hi > lo && model_init_param_range(&t->m, t->cfg.seed, lo, hi, host + z->plan.b[k].shard_off,
                                          e, sizeof e) != 0) {
      free(host);
      return fail(t, "%s", e);
    }
  }
  t->o->copy_to_device(t->compute, z->param_shard, host, len * 4);
  int rc = t->o->stream_synchronize(t->compute);
  free(host);
  return rc != 0 ? fail(t, "%s", dev_last_error(t->dev)) : 0;
}

static int zero_setup(trainer *t) {
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  model *m = &t->m;
  const dev_ops *o = t->o;
  size_t *begins = calloc((size_t)gs->nbuckets + 1, sizeof(size_t));
  size_t *ends = calloc((size_t)gs->nbuckets + 1, sizeof(size_t));
  int units = model_unit_count(m);
  z->bucket_of_unit = malloc(sizeof(int) * (size_t)units);
  if (!begins || !ends || !z->bucket_of_unit) {
    free(begins);
    free(ends);
    return fail(t, "%s", "out of memory");
  }
  for (int k = 0; k < gs->nbuckets; k++) {
    begins[k] = gs->buckets[k].begin;
    ends[k] = gs->buckets[k].end;
  }
  int rc = zero_plan_build(&z->plan, begins, ends, gs->nbuckets, t->reduce_n, comm_rank(t->dp_c));
  free(begins);
  free(ends);
  if (rc != 0) return fail(t, "%s", "out of memory");
  size_t rot = 0, emb = 0;
  for (int k = 0; k < gs->nbuckets; k++) {
    size_t padded = z->plan.b[k].padded;
    if (gs->buckets[k].embed)
      emb = padded;
    else if (padded > rot)
      rot = padded;
  }
  z->gbuf_floats = z->pbuf_floats = rot;
  z->grad_shard = o->alloc(t->dev, z->plan.shard_len * 4);
  z->piece_tmp = o->alloc(t->dev, (z->plan.max_piece ? z->plan.max_piece : 1) * 4);
  int bad = !z->grad_shard || !z->piece_tmp;
  bad |= alloc_bucket_buffers(t, rot, emb, z->gbuf, z->ev_gfree, &z->gembed);
  z->cur = -1;
  z->cur_bucket = -1;
  z->resident[0] = z->resident[1] = -1;
  if (t->cfg.zero >= 3 || m->fp32_w) /* ZeRO-3, or ZeRO-2's sharded masters (master_shard.c) */
    z->param_shard = o->alloc(t->dev, z->plan.shard_len * 4);
  bad |= (t->cfg.zero >= 3 || m->fp32_w) && !z->param_shard;
  if (t->cfg.zero >= 3) {
    z->ev_pfree = o->event_create(t->dev);
    bad |= !z->ev_pfree;
    bad |= alloc_bucket_buffers(t, rot, emb, z->pbuf, z->ev_gathered, &z->pembed);
  }
  if (bad) return fail(t, "%s", "out of device memory for the ZeRO shards and bucket buffers");
  for (int u = 0; u < units; u++)
    z->bucket_of_unit[u] = -1;
  for (int k = 0; k < gs->nbuckets; k++) {
    bucket *bk = &gs->buckets[k];
    for (int u = 0; u < units; u++) {
      size_t b, e;
      model_unit_range(m, u, &b, &e);
      if (e <= b || b < bk->begin || b >= bk->end) continue;
      z->bucket_of_unit[u] = k;
      float *g = bk->embed ? z->gembed : z->gbuf[bk->slot];
      float *p = bk->embed && z->pembed ? z->pembed : NULL;
      model_bind_unit(m, u, p ? p + (b - bk->begin) : NULL, g + (b - bk->begin));
    }
  }
  if (z->param_shard && zero3_init_shard(t) != 0) return -1;
  if (t->cfg.zero >= 3) {
    for (int u = 0; u < units; u++) /* bound by zero3_before_unit when needed */
      if (z->bucket_of_unit[u] < 0 || !gs->buckets[z->bucket_of_unit[u]].embed)
        m->unit_param[u] = NULL;
    m->before_unit = zero3_before_unit;
    m->before_unit_arg = t;
  }
  return 0;
}

static void launch_bucket(trainer *t, int k) {
  grad_sync *gs = &t->gs;
  bucket *b = &gs->buckets[k];
  if (b->launched) return;
  b->launched = 1;
  if (stepscope_active()) {
    char args[96];
    snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, (b->end - b->begin) * 4);
    stepscope_range_push("allreduce bucket", args);
  }
  t->o->event_record(gs->ev_bucket, t->compute);
  t->o->stream_wait_event(t->dp_stream, gs->ev_bucket);
  comm_allreduce(t->dp_c, t->dp_stream, t->m.grad + b->begin, b->end - b->begin, COMM_FLOAT32);
  pop_range();
}

/* ZeRO-2/3: reduce-scatters bucket k's gradient buffer over the gradient group on "comm
 * dp" and adds this rank's piece into its gradient shard. A rotating buffer is then zeroed
 * for the next bucket that uses it (and compute waits for that: ev_gfree); with --overlap off
 * compute waits right away, so nothing of it hides under backward. */
static void zero_reduce_bucket(trainer *t, int k) {
  grad_sync *gs = &t->gs;
  const dev_ops *o = t->o;
  zero_state *z = &gs->z;
  bucket *b = &gs->buckets[k];
  const zero_bucket *zb = &z->plan.b[k];
  float *buf = b->embed ? z->gembed : z->gbuf[b->slot];
  if (stepscope_active()) {
    char args[96];
    snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, zb->padded * 4);
    stepscope_range_push("reduce_scatter bucket", args);
  }
  o->event_record(gs->ev_bucket, t->compute);
  o->stream_wait_event(t->dp_stream, gs->ev_bucket);
  float *dst = z->grad_shard + zb->shard_off;
  if (t->reduce_n > 1) {
    comm_reduce_scatter(t->dp_c, t->dp_stream, z->piece_tmp, buf, zb->piece, COMM_FLOAT32);
    o->add(t->dp_stream, dst, z->piece_tmp, zb->piece);
  } else {
    o->add(t->dp_stream, dst, buf, zb->piece);
  }
  if (!b->embed) {
    o->zero(t->dp_stream, buf, zb->padded * 4);
    o->event_record(z->ev_gfree[b->slot], t->dp_stream);
    if (!t->cfg.overlap) o->stream_wait_event(t->compute, z->ev_gfree[b->slot]);
  }
  pop_range();
}

/* ZeRO-2/3: all-gathers bucket k's parameters over the gradient group into dst (k's padded
 * size), each rank contributing its piece from `pieces` (its shard); on "comm dp". */
void zero_gather_bucket(trainer *t, int k, float *dst, const float *pieces) {
  grad_sync *gs = &t->gs;
  const dev_ops *o = t->o;
  const zero_bucket *zb = &gs->z.plan.b[k];
  float *mine = dst + (size_t)gs->z.plan.rank * zb->piece;
  if (stepscope_active()) {
    char args[96];
    snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, zb->padded * 4);
    stepscope_range_push("allgather bucket", args);
  }
  o->copy(t->dp_stream, mine, pieces + zb->shard_off, zb->piece * 4);
  if (t->reduce_n > 1) comm_allgather(t->dp_c, t->dp_stream, dst, mine, zb->piece, COMM_FLOAT32);
  pop_range();
}

/* ZeRO-3: starts gathering rotating bucket k into the parameter buffer compute is not using
 * (once compute has enqueued everything that reads that buffer's previous bucket). */
static int zero3_start_gather(trainer *t, int k) {
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  int s = z->cur < 0 ? 0 : 1 - z->cur;
  t->o->event_record(z->ev_pfree, t->compute);
  t->o->stream_wait_event(t->dp_stream, z->ev_pfree);
  zero_gather_bucket(t, k, z->pbuf[s], z->param_shard);
  t->o->event_record(z->ev_gathered[s], t->dp_stream);
  z->resident[s] = k;
  return s;
}

/* ZeRO-3, called by the model before a unit uses its parameters: makes the unit's bucket
 * resident in a gathered buffer (waiting for its gather), binds its units there, and
 * prefetches the bucket that comes next in this pass (forward walks the buckets down,
 * backward up) into the other buffer, so that its gather overlaps this bucket's compute.
 * The embedding bucket stays gathered for the whole step (zero3_gather_embed). */
static void zero3_before_unit(void *arg, int unit, int backward) {
  trainer *t = arg;
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  model *m = &t->m;
  int k = z->bucket_of_unit[unit];
  if (k < 0 || gs->buckets[k].embed || k == z->cur_bucket) return;
  int s = z->resident[0] == k ? 0 : z->resident[1] == k ? 1 : -1;
  if (s < 0) s = zero3_start_gather(t, k);
  t->o->stream_wait_event(t->compute, z->ev_gathered[s]);
  z->cur = s;
  z->cur_bucket = k;
  const bucket *bk = &gs->buckets[k];
  for (int u = 0; u < model_unit_count(m); u++)
    if (z->bucket_of_unit[u] == k)
      model_bind_unit(m, u, z->pbuf[s] + (m->unit_begin[u] - bk->begin), NULL);
  int next = backward ? k + 1 : k - 1;
  if (next >= 0 && next < gs->nbuckets && !gs->buckets[next].embed && z->resident[1 - s] != next)
    zero3_start_gather(t, next);
}

/* ZeRO-3, at the start of a step (after the previous optimizer step): the embedding bucket
 * is gathered for the whole step (the first stage embeds at the start of forward and the
 * last reads the tied LM head at its end and at the start of backward); the rotating
 * buffers' contents are stale. */
static void zero3_step_begin(trainer *t) {
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  z->resident[0] = z->resident[1] = -1;
  z->cur = -1;
  z->cur_bucket = -1;
  for (int k = 0; k < gs->nbuckets; k++) {
    if (!gs->buckets[k].embed) continue;
    t->o->event_record(z->ev_pfree, t->compute);
    t->o->stream_wait_event(t->dp_stream, z->ev_pfree);
    zero_gather_bucket(t, k, z->pembed, z->param_shard);
    t->o->event_record(gs->ev_gather_done, t->dp_stream);
    t->o->stream_wait_event(t->compute, gs->ev_gather_done);
  }
}

/* Called by model_backward after each unit: on the last micro-batch, or on every one under
 * ZeRO-2/3 (whose rotating bucket buffers hold one micro-batch's gradients). */
static void unit_done(void *arg, int unit) {
  trainer *t = arg;
  grad_sync *gs = &t->gs;
  model *m = chunk_model(t, gs->chunk);
  /* sequence parallel: LayerNorm gradients of a block are partial over TP */
  if (m->sp && unit >= 1 && unit <= m->nblocks) {
    comm_allreduce(t->tp_c, t->compute, m->unit_grad[unit], 4 * (size_t)m->C, COMM_FLOAT32);
  }
  if (t->cfg.zero >= 2) {
    for (int k = 0; k < gs->nbuckets; k++) {
      if (gs->buckets[k].ready_unit != unit || gs->buckets[k].embed) continue;
      zero_reduce_bucket(t, k);
      /* the next bucket's rotating buffer must be free before backward writes it */
      if (k + 1 < gs->nbuckets && !gs->buckets[k + 1].embed)
        t->o->stream_wait_event(t->compute, gs->z.ev_gfree[gs->buckets[k + 1].slot]);
    }
    return;
  }
  if (t->reduce_n > 1 && t->cfg.overlap && gs->chunk == 0) /* buckets cut chunk 0 */
    for (int k = 0; k < gs->nbuckets; k++)
      if (gs->buckets[k].ready_unit == unit) launch_bucket(t, k);
}

/* Calls fn for every piece of parameter `p` this rank owns under ZeRO-2/3: flat range
 * [b, e) at shard offset `at`. */
static void zero_for_owned(trainer *t, const param_info *p, zero_piece_fn fn, void *arg) {
  grad_sync *gs = &t->gs;
  const zero_plan *zp = &gs->z.plan;
  for (int k = 0; k < zp->nbuckets; k++) {
    size_t lo, hi;
    zero_owned(zp, k, zp->rank, &lo, &hi);
    size_t b, e;
    if (range_overlap(p->offset, p->count, lo, hi, &b, &e))
      fn(t, p, b, e, zp->b[k].shard_off + (b - lo), arg);
  }
}

static void norm_piece(trainer *t, const param_info *p, size_t b, size_t e, size_t at, void *arg) {
  grad_sync *gs = &t->gs;
  (void)p;
  (void)arg;
  t->o->sum_squares_accumulate(t->compute, t->stat + 1, gs->z.grad_shard + at, e - b);
}

typedef struct adam_args {
  int step;
  float lr;
} adam_args;

static void adam_piece(trainer *t, const param_info *p, size_t b, size_t e, size_t at, void *arg) {
  grad_sync *gs = &t->gs;
  const adam_args *a = arg;
  /* ZeRO-2: the full parameter buffer; ZeRO-3 or sharded masters: the rank's parameter shard */
  float *param = gs->z.param_shard ? gs->z.param_shard + at : t->m.param + b;
  train_adamw(t, param, gs->z.grad_shard + at, t->adam_m + at, t->adam_v + at, e - b, p->decay,
              a->step, a->lr);
}

/* ZeRO-2/3: AdamW on the rank's pieces; ZeRO-2 then all-gathers every bucket's parameters
 * (through a free rotating gradient buffer, zeroed again after) into the full buffer. ZeRO-3
 * gathers on demand in the next step. */
void grad_sync_zero_optimizer(trainer *t, int step, double clip_scale, float lr) {
  grad_sync *gs = &t->gs;
  const dev_ops *o = t->o;
  model *m = &t->m;
  zero_state *z = &gs->z;
  if (clip_scale < 1.0) o->scale(t->compute, z->grad_shard, (float)clip_scale, z->plan.shard_len);
  adam_args a = {step, lr};
  for (int k = 0; k < m->nparams; k++)
    zero_for_owned(t, &m->params[k], adam_piece, &a);
  /* ZeRO-3: gathered on demand in the next step; sharded masters: train_refresh_gemm_weights
   * loads the working copies from their gathers; one rank: nothing to gather */
  if (t->cfg.zero >= 3 || m->fp32_w || t->reduce_n == 1) return;
  o->event_record(gs->ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, gs->ev_opt_done);
  for (int k = 0; k < gs->nbuckets; k++) {
    const bucket *bk = &gs->buckets[k];
    float *staging = bk->embed ? z->gembed : z->gbuf[0];
    /* every rank's piece, from its own updated parameters */
    size_t lo, hi;
    zero_owned(&z->plan, k, z->plan.rank, &lo, &hi);
    float *mine = staging + (size_t)z->plan.rank * z->plan.b[k].piece;
    if (stepscope_active()) {
      char args[96];
      snprintf(args, sizeof args, "{\"bucket\":%d,\"bytes\":%zu}", k, z->plan.b[k].padded * 4);
      stepscope_range_push("allgather bucket", args);
    }
    if (hi > lo) o->copy(t->dp_stream, mine, m->param + lo, (hi - lo) * 4);
    comm_allgather(t->dp_c, t->dp_stream, staging, mine, z->plan.b[k].piece, COMM_FLOAT32);
    o->copy(t->dp_stream, m->param + bk->begin, staging, (bk->end - bk->begin) * 4);
    o->zero(t->dp_stream, staging, z->plan.b[k].padded * 4);
    pop_range();
  }
  o->event_record(gs->ev_gather_done, t->dp_stream);
  o->stream_wait_event(t->compute, gs->ev_gather_done);
}

/* ZeRO-3 checkpoints hold the same shard format as the other stages (the stage's full flat
 * parameters, then the rank's AdamW moments), streamed through the checkpoint's host staging.
 * The buckets lie in the flat buffer in descending order (bucket 0 holds the highest floats:
 * units are laid out in reverse backward order), so reading ascending ranges gathers the
 * buckets from the last down to 0, each once, whatever the ranges' sizes: every member of the
 * gradient group makes the same collectives. */
void grad_sync_zero3_stream_begin(trainer *t) {
  t->gs.z.ckpt_next = t->gs.nbuckets - 1;
}

/* Where a checkpoint's stream gathers bucket k: ZeRO-3's gathered parameter buffers, ZeRO-2's
 * (sharded masters) bucket gradient buffers, free between steps (zeroed again after). */
static float *ckpt_gather_buffer(trainer *t, int k) {
  zero_state *z = &t->gs.z;
  int embed = t->gs.buckets[k].embed;
  if (t->cfg.zero >= 3) return embed ? z->pembed : z->pbuf[0];
  return embed ? z->gembed : z->gbuf[0];
}

/* Gathers the stream's next bucket into its gathered buffer and waits for it. 0, or -1. */
static int zero3_gather_next(trainer *t) {
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  int k = z->ckpt_next--;
  zero_gather_bucket(t, k, ckpt_gather_buffer(t, k), z->param_shard);
  z->resident[0] = z->resident[1] = -1; /* pbuf[0] was overwritten */
  z->cur = z->cur_bucket = -1;
  return t->o->stream_synchronize(t->dp_stream) != 0 ? -1 : 0;
}

int grad_sync_zero3_read(void *arg, int chunk, size_t at, size_t n, float *host) {
  trainer *t = arg;
  (void)chunk; /* ZeRO-2/3 run one chunk */
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  int rc = 0;
  for (int k = gs->nbuckets - 1; k >= 0; k--) {
    const bucket *bk = &gs->buckets[k];
    size_t b, e;
    if (!range_overlap(bk->begin, bk->end - bk->begin, at, at + n, &b, &e)) continue;
    while (z->ckpt_next >= k)
      rc |= zero3_gather_next(t);
    const float *gathered = ckpt_gather_buffer(t, k);
    t->o->copy_to_host(t->dp_stream, host + (b - at), gathered + (b - bk->begin), (e - b) * 4);
  }
  if (t->o->stream_synchronize(t->dp_stream) != 0) rc = -1;
  return rc;
}

void grad_sync_zero3_finish(void *arg) {
  trainer *t = arg;
  grad_sync *gs = &t->gs;
  while (gs->z.ckpt_next >= 0)
    zero3_gather_next(t); /* a device failure is the checkpoint's to report */
  if (t->cfg.zero >= 3) return;
  for (int k = 0; k < gs->nbuckets; k++) /* ZeRO-2: the bucket gradient buffers zero again */
    t->o->zero(t->dp_stream, ckpt_gather_buffer(t, k), gs->z.plan.b[k].padded * 4);
  t->o->stream_synchronize(t->dp_stream);
}

int grad_sync_zero3_write(void *arg, int chunk, size_t at, size_t n, const float *host) {
  trainer *t = arg;
  (void)chunk; /* ZeRO-2/3 run one chunk */
  zero_state *z = &t->gs.z;
  for (int k = 0; k < z->plan.nbuckets; k++) {
    size_t lo, hi, b, e;
    zero_owned(&z->plan, k, z->plan.rank, &lo, &hi);
    if (hi > lo && range_overlap(lo, hi - lo, at, at + n, &b, &e))
      t->o->copy_to_device(t->compute, z->param_shard + z->plan.b[k].shard_off + (b - lo),
                           host + (b - at), (e - b) * 4);
  }
  return t->o->stream_synchronize(t->compute) != 0 ? -1 : 0;
}

/* ---- set-up and clean-up ------------------------------------------------------------------ */

int grad_sync_init(trainer *t) {
  grad_sync *gs = &t->gs;
  gs->ev_bucket = t->o->event_create(t->dev);
  gs->ev_dp_done = t->o->event_create(t->dev);
  gs->ev_opt_done = t->o->event_create(t->dev);
  gs->ev_gather_done = t->o->event_create(t->dev);
  if (!gs->ev_bucket || !gs->ev_dp_done || !gs->ev_opt_done || !gs->ev_gather_done)
    return fail(t, "%s", "out of memory creating events");
  build_buckets(t);
  if (!gs->buckets) return fail(t, "%s", "out of memory");
  /* optimizer shard: ZeRO-1 a contiguous 1/n slice of the flat buffer, ZeRO-2/3 a piece of
   * every bucket (zero.h) */
  size_t P = t->m.nfloats_padded;
  gs->shard_len = P / (size_t)t->reduce_n;
  gs->shard_begin = (size_t)comm_rank(t->dp_c) * gs->shard_len;
  gs->shard_end = gs->shard_begin + gs->shard_len;
  if (t->cfg.zero >= 2) {
    if (zero_setup(t) != 0) return -1;
    gs->shard_len = gs->z.plan.shard_len;
    gs->shard_begin = gs->shard_end = 0; /* not one slice */
  }
  return t->m.fp32_w ? grad_sync_master_init(t) : 0;
}

void grad_sync_free(trainer *t) {
  grad_sync *gs = &t->gs;
  zero_state *z = &gs->z;
  const dev_ops *o = t->o;
  if (o) {
    dev_event *single[] = {gs->ev_bucket, gs->ev_dp_done, gs->ev_opt_done, gs->ev_gather_done};
    for (size_t k = 0; k < sizeof single / sizeof single[0]; k++)
      if (single[k]) o->event_destroy(single[k]);
    void *zbufs[] = {z->grad_shard,  z->gbuf[0], z->gbuf[1], z->gembed, z->piece_tmp,
                     z->param_shard, z->pbuf[0], z->pbuf[1], z->pembed};
    for (size_t k = 0; k < sizeof zbufs / sizeof zbufs[0]; k++)
      o->free(t->dev, zbufs[k]);
    dev_event *zev[] = {z->ev_gfree[0], z->ev_gfree[1], z->ev_pfree, z->ev_gathered[0],
                        z->ev_gathered[1]};
    for (size_t k = 0; k < sizeof zev / sizeof zev[0]; k++)
      if (zev[k]) o->event_destroy(zev[k]);
  }
  for (int j = 1; j < t->V && gs->more_masters; j++)
    if (o) o->free(t->dev, gs->more_masters[j - 1]);
  free(gs->more_masters);
  free(gs->working_parts);
  free(gs->buckets);
  free(z->bucket_of_unit);
  zero_plan_free(&z->plan);
}

void grad_sync_optimizer_shard(const trainer *t, size_t *begin, size_t *len) {
  const grad_sync *gs = &t->gs;
  *len = t->cfg.zero ? gs->shard_len : t->m.nfloats_padded;
  *begin = t->cfg.zero == 1 ? gs->shard_begin : 0;
}

/* ---- the step ----------------------------------------------------------------------------- */

void grad_sync_step_begin(trainer *t) {
  const dev_ops *o = t->o;
  grad_sync *gs = &t->gs;
  if (t->cfg.zero >= 2) {
    o->zero(t->compute, gs->z.grad_shard, gs->z.plan.shard_len * 4);
    for (int k = 0; k < gs->nbuckets; k++)
      if (gs->buckets[k].embed) o->zero(t->compute, gs->z.gembed, gs->z.plan.b[k].padded * 4);
    if (t->cfg.zero >= 3) zero3_step_begin(t);
  } else {
    for (int j = 0; j < t->V; j++)
      o->zero(t->compute, chunk_model(t, j)->grad, chunk_model(t, j)->nfloats_padded * 4);
  }
  for (int k = 0; k < gs->nbuckets; k++)
    gs->buckets[k].launched = 0;
}

grad_unit_fn grad_sync_backward_hook(trainer *t, int chunk, int last) {
  grad_sync *gs = &t->gs;
  gs->chunk = chunk;
  if (t->cfg.zero >= 2) {
    /* every micro-batch's gradients go through the bucket buffers */
    if (gs->nbuckets > 0 && !gs->buckets[0].embed)
      t->o->stream_wait_event(t->compute, gs->z.ev_gfree[gs->buckets[0].slot]);
    return unit_done;
  }
  return last ? unit_done : NULL;
}

void grad_sync_finish(trainer *t) {
  const dev_ops *o = t->o;
  grad_sync *gs = &t->gs;
  model *m = &t->m;
  /* interleaved: the other chunks' gradients, whole, after the flush (zero 0 only) */
  if (t->reduce_n > 1 && t->V > 1) {
    o->event_record(gs->ev_bucket, t->compute);
    o->stream_wait_event(t->dp_stream, gs->ev_bucket);
    for (int j = 1; j < t->V; j++)
      comm_allreduce(t->dp_c, t->dp_stream, chunk_model(t, j)->grad,
                     chunk_model(t, j)->nfloats_padded, COMM_FLOAT32);
  }
  /* the chunk holding this rank's copy of the tied embedding (first or last virtual stage) */
  model *me = t->V > 1 && t->g.pp_rank == t->g.pp - 1 ? chunk_model(t, t->V - 1) : m;
  if (t->cfg.zero >= 2) {
    /* the embedding bucket: tied-embedding sum first (its buffer holds the full wte
     * gradient of the step), then reduce-scattered once */
    for (int k = 0; k < gs->nbuckets; k++) {
      if (!gs->buckets[k].embed) continue;
      if (t->embed_c)
        comm_allreduce(t->embed_c, t->compute, gs->z.gembed + (m->off_wte - gs->buckets[k].begin),
                       (size_t)m->Vp * m->C, COMM_FLOAT32);
      zero_reduce_bucket(t, k);
    }
    o->event_record(gs->ev_dp_done, t->dp_stream);
    o->stream_wait_event(t->compute, gs->ev_dp_done);
  } else {
    if (t->reduce_n > 1) {
      for (int k = 0; k < gs->nbuckets; k++)
        launch_bucket(t, k); /* --overlap off, or buckets never marked ready */
      o->event_record(gs->ev_dp_done, t->dp_stream);
      o->stream_wait_event(t->compute, gs->ev_dp_done);
    }
    if (t->embed_c)
      comm_allreduce(t->embed_c, t->compute, me->grad + me->off_wte, (size_t)me->Vp * me->C,
                     COMM_FLOAT32);
  }
}

void grad_sync_norm_accumulate(trainer *t, const param_info *p) {
  const grad_sync *gs = &t->gs;
  if (t->cfg.zero >= 2) {
    zero_for_owned(t, p, norm_piece, NULL);
    return;
  }
  size_t b = p->offset > gs->shard_begin ? p->offset : gs->shard_begin;
  size_t e = p->offset + p->count < gs->shard_end ? p->offset + p->count : gs->shard_end;
  if (e > b) t->o->sum_squares_accumulate(t->compute, t->stat + 1, t->m.grad + b, e - b);
}

void grad_sync_adam_range(trainer *t, int j, size_t *lo, size_t *hi, float **param) {
  model *mc = chunk_model(t, j);
  *lo = 0;
  *hi = mc->nfloats_padded;
  if (t->cfg.zero) chunk_slice(t, j, lo, hi); /* chunk 0's: [shard_begin, shard_end) */
  *param = mc->fp32_w ? grad_sync_chunk_masters(t, j) : mc->param + *lo;
}

/* ZeRO-1 (more than one member in the gradient group): every member's updated slice of
 * every chunk to every member, on "comm dp" after the optimizer; compute waits for it. */
void grad_sync_zero1_gather(trainer *t) {
  const dev_ops *o = t->o;
  grad_sync *gs = &t->gs;
  model *m = &t->m;
  /* sharded masters: train_refresh_gemm_weights loads the working copies from their gathers */
  if (!t->cfg.zero || t->reduce_n <= 1 || m->fp32_w) return;
  o->event_record(gs->ev_opt_done, t->compute);
  o->stream_wait_event(t->dp_stream, gs->ev_opt_done);
  comm_allgather(t->dp_c, t->dp_stream, m->param, m->param + gs->shard_begin, gs->shard_len,
                 COMM_FLOAT32);
  for (int j = 1; j < t->V; j++) {
    model *mc = chunk_model(t, j);
    size_t clo, chi;
    chunk_slice(t, j, &clo, &chi);
    comm_allgather(t->dp_c, t->dp_stream, mc->param, mc->param + clo, chi - clo, COMM_FLOAT32);
  }
  o->event_record(gs->ev_gather_done, t->dp_stream);
  o->stream_wait_event(t->compute, gs->ev_gather_done);
}
