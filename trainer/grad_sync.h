/*
 * grad_sync.h — the gradient-synchronisation state of one rank and what grad_sync.c offers the
 * rest of the trainer: the data-parallel buckets, the optimizer shard this rank updates
 * (ZeRO-1: a slice of the flat buffer; ZeRO-2/3: a piece of every bucket) and the ZeRO-2/3
 * state (zero.h for the cut), with the events that order them against compute.
 *
 * One owner: grad_sync.c creates, uses and frees everything in struct grad_sync
 * (grad_sync_init / grad_sync_free); struct trainer holds it as its member `gs`, and the
 * other files of the trainer go through the functions below instead of reading its fields.
 * The functions take the whole trainer because they enqueue on its streams and groups.
 */
#ifndef STEPSCOPE_TRAINER_GRAD_SYNC_H
#define STEPSCOPE_TRAINER_GRAD_SYNC_H

#include <stddef.h>

#include "checkpoint.h"
#include "device.h"
#include "model.h"
#include "zero.h"

struct trainer;

/* model_backward's per-unit callback (arg: the trainer). */
typedef void (*grad_unit_fn)(void *arg, int unit);

typedef struct bucket {
  size_t begin, end; /* floats */
  int ready_unit;    /* launched once this backward unit is done */
  int launched;
  /* --zero 2/3 */
  int embed; /* the embedding unit's bucket: its own buffers, reduced once per step */
  int slot;  /* rotating gradient buffer (0/1) of the other buckets */
} bucket;

/* --zero 2/3 state (see zero.h for the cut and the README for the memory). */
typedef struct zero_state {
  zero_plan plan;         /* a piece of every bucket per member of the gradient group */
  float *grad_shard;      /* [plan.shard_len] this rank's reduced gradients */
  float *gbuf[2];         /* rotating bucket gradient buffers (each the largest padded bucket) */
  float *gembed;          /* the embedding bucket's gradients, accumulated over micro-batches */
  float *piece_tmp;       /* [plan.max_piece] a reduce-scatter's result before it is added */
  dev_event *ev_gfree[2]; /* gbuf[s] reduced and zeroed: compute may write it again */
  /* ZeRO-3 */
  /* ZeRO-3, and the sharded masters (master_shard.c: ZeRO-1's [shard_begin, shard_end),
   * ZeRO-2's pieces) */
  float *param_shard; /* [plan.shard_len] the master parameters this rank owns */
  float *pbuf[2];     /* rotating gathered parameter buffers */
  float *pembed;      /* the embedding bucket's parameters, gathered for the whole step */
  int resident[2];    /* bucket gathered (or being gathered) into pbuf[s], -1 none */
  int cur;            /* pbuf slot of the bucket compute uses now, -1 none */
  int cur_bucket;
  int ckpt_next; /* a checkpoint's stream: the next bucket it gathers, counting down */
  dev_event *ev_pfree, *ev_gathered[2];
  int *bucket_of_unit; /* unit -> bucket, -1 for an empty unit */
  size_t gbuf_floats, pbuf_floats;
} zero_state;

/* Owned by grad_sync.c. */
typedef struct grad_sync {
  bucket *buckets; /* chunk 0's flat gradient buffer cut at unit boundaries */
  int nbuckets;
  /* the optimizer shard: ZeRO-1 the contiguous slice [shard_begin, shard_end) of chunk 0's
   * flat buffer; ZeRO-2/3 shard_len floats, a piece of every bucket (not one slice) */
  size_t shard_begin, shard_end, shard_len;
  zero_state z; /* --zero >= 2 */
  /* sharded masters of an interleaved rank (master_shard.c): chunks 1 .. V-1's slices of their
   * master weights (chunk_slice; chunk 0's are z.param_shard) */
  float **more_masters;
  size_t *working_parts; /* sharded masters: [4][n], scratch for each member's part of the
                          * working copies (master_shard.c: load_owned) */
  int chunk;             /* the chunk whose backward is being enqueued (the unit callback's) */
  dev_event *ev_bucket, *ev_dp_done, *ev_opt_done, *ev_gather_done;
} grad_sync;

/* After the model chunks exist: the events, the buckets, the optimizer shard and (--zero 2/3)
 * the ZeRO buffers with the model's units bound to them (ZeRO-3 keeps only this rank's
 * parameter pieces). 0, or -1 with t->err set. */
int grad_sync_init(struct trainer *t);
/* Frees what grad_sync_init made (the streams drained; before the device closes). */
void grad_sync_free(struct trainer *t);

/* The AdamW state of chunk 0 as this rank keeps it: *len floats, for the flat buffer from
 * *begin (the whole buffer without ZeRO; the slice under ZeRO-1; ZeRO-2/3: the pieces,
 * begin 0). */
void grad_sync_optimizer_shard(const struct trainer *t, size_t *begin, size_t *len);

/* ---- the step, in call order ------------------------------------------------------------- */

/* Zeroes the step's gradient buffers (ZeRO-2/3: the shard and the embedding bucket, ZeRO-3
 * gathers the embedding bucket; else every chunk's flat gradients) and re-arms the buckets. */
void grad_sync_step_begin(struct trainer *t);
/* Before a micro-batch's backward of `chunk` (last: the step's last micro-batch): the
 * callback model_backward calls after each unit (SP LayerNorm sums, bucket launches,
 * ZeRO reduce-scatters), or NULL when this backward launches nothing. */
grad_unit_fn grad_sync_backward_hook(struct trainer *t, int chunk, int last);
/* After the pipeline walk: the other chunks' gradients (interleaved), the buckets not yet
 * launched (--overlap off), the ZeRO-2/3 embedding bucket and the tied embedding's sum over
 * the first and last stage; compute then waits for the gradient group. */
void grad_sync_finish(struct trainer *t);
/* Adds the squared gradients of chunk 0's parameter p that this rank counts (its shard) to
 * the step's norm accumulator. */
void grad_sync_norm_accumulate(struct trainer *t, const param_info *p);
/* Without ZeRO-2/3: the range [*lo, *hi) of chunk j's flat buffer this rank updates (the whole
 * chunk; ZeRO-1 its slice, chunk_slice; AdamW state offset: b - *lo) and where its parameters
 * are (*param: float *lo's, in the flat buffer or the chunk's master slice); ZeRO-1 then
 * all-gathers the parameters (grad_sync_zero1_gather). */
void grad_sync_adam_range(struct trainer *t, int j, size_t *lo, size_t *hi, float **param);
void grad_sync_zero1_gather(struct trainer *t);
/* ZeRO-2/3: clipping and AdamW on the shard; ZeRO-2 then all-gathers the parameters. */
void grad_sync_zero_optimizer(struct trainer *t, int step, double clip_scale, float lr);

/* ---- ZeRO-3 checkpoints: the stage's parameters streamed bucket by bucket ------------------ */
/* (ZeRO-2 with sharded masters streams the same way, through its bucket gradient buffers.) */

/* Starts a checkpoint's stream (ckpt_rank_state.param_read and the others, ctx the trainer):
 * reading gathers each bucket once, in flat order, into a gathered parameter buffer and copies
 * the range to the host; finishing gathers the buckets a failed write skipped; writing copies
 * this rank's pieces of a range into its shard. No buffer holds the stage's parameters. */
void grad_sync_zero3_stream_begin(struct trainer *t);
int grad_sync_zero3_read(void *trainer, int chunk, size_t at, size_t n, float *host);
void grad_sync_zero3_finish(void *trainer);
int grad_sync_zero3_write(void *trainer, int chunk, size_t at, size_t n, const float *host);

/* ---- sharded master weights (master_shard.c; model_master_sharded) ----------------------- */

/* ZeRO-1: the rank's slice of every chunk's master weights, drawn directly; then the working
 * copies. 0, or -1 with t->err set. */
int grad_sync_master_init(struct trainer *t);
/* The master weights of chunk j this rank owns (ZeRO-1: its slice, chunk_slice; ZeRO-2: its
 * pieces of every bucket, one chunk). */
float *grad_sync_chunk_masters(const struct trainer *t, int j);
/* Loads every chunk's working copies from the master shards (each member's part broadcast from it:
 * the GEMM weights in bf16, the rest in fp32), on "comm dp"; compute waits for it. At set-up, then
 * in train_refresh_gemm_weights (after the optimizer and a restore). */
void grad_sync_load_working_copies(struct trainer *t);
/* A checkpoint's parameter stream (s->param_read and the others, ctx the trainer) for the layouts
 * without a flat parameter buffer (s->param NULL): ZeRO-3 and the sharded masters (every chunk).
 * Begin, before saving, gathers ZeRO-1's masters of every chunk into the chunk's free gradient
 * buffer (ZeRO-2/3: bucket by bucket as they are read). */
void grad_sync_ckpt_stream(struct trainer *t, ckpt_rank_state *s);
void grad_sync_ckpt_stream_begin(struct trainer *t);
/* Chunk j's flat parameters gathered from the master shards into a new host buffer (collective
 * over the gradient group, as a checkpoint's read): --debug-dump-params. NULL after fail(). */
float *grad_sync_master_params(struct trainer *t, int chunk);

/* grad_sync.c for master_shard.c: gathers bucket k's pieces (from `pieces`, a shard) into dst. */
void zero_gather_bucket(struct trainer *t, int k, float *dst, const float *pieces);

#endif /* STEPSCOPE_TRAINER_GRAD_SYNC_H */
