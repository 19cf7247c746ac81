/*
 * train_internal.h — internal to one rank's training run, shared by train.c (set-up, the
 * step loop, tracing), train_step.c (one step), pipeline_exec.c (the pipeline executor) and
 * grad_sync.c (DP buckets and ZeRO) and by nothing else: the trainer's state (struct
 * trainer, its gradient buckets and its ZeRO-2/3 state), a few small helpers, and what each
 * of those files offers the others.
 */
#ifndef STEPSCOPE_TRAINER_TRAIN_INTERNAL_H
#define STEPSCOPE_TRAINER_TRAIN_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "checkpoint.h"
#include "comm.h"
#include "device.h"
#include "model.h"
#include "schedule.h"
#include "stepscope.h"
#include "train.h"
#include "train_data.h"
#include "zero.h"

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
  float *param_shard; /* [plan.shard_len] the master parameters this rank owns */
  float *pbuf[2];     /* rotating gathered parameter buffers */
  float *pembed;      /* the embedding bucket's parameters, gathered for the whole step */
  int resident[2];    /* bucket gathered (or being gathered) into pbuf[s], -1 none */
  int cur;            /* pbuf slot of the bucket compute uses now, -1 none */
  int cur_bucket;
  dev_event *ev_pfree, *ev_gathered[2];
  int *bucket_of_unit; /* unit -> bucket, -1 for an empty unit */
  size_t gbuf_floats, pbuf_floats;
} zero_state;

typedef struct trainer {
  train_config cfg;
  rank_env env;
  model_grid g;
  dev_device *dev;
  const dev_ops *o;
  dev_stream *compute, *dp_stream, *pp_send, *pp_recv;
  dev_stream *cp_send, *cp_recv; /* --cp > 1: ring attention's transfers */
  comm_job *job;                 /* the shared segment: heartbeats, abort flag, CPU collectives */
  comm_dev_job *dev_job; /* the device's own communicator library (NCCL on a GPU), or NULL */
  double peak_flops;     /* per rank, for MFU */
  comm *world_c, *dp_c, *tp_c, *pp_c, *embed_c, *cp_c;
  comm *ep_c, *edp_c; /* --experts: the EP group (--ep > 1) and the expert-data-parallel group
                       * (dp/ep > 1) that sums the experts' gradients */
  float *moe_adam_m, *moe_adam_v; /* AdamW moments of the expert buffer (whole) */
  int reduce_n; /* members of dp_c, the gradient group: dp x cp (weights are replicated over
                 * both; a CP rank's gradients cover only its tokens) */
  int *host_seq_tokens, *host_seq_targets; /* --cp > 1: one micro-batch of whole sequences */
  model m;                                 /* chunk 0 (the only one without interleaving) */
  int V;                                   /* model chunks (virtual stages) on this rank */
  model *more;                             /* chunks 1 .. V-1 */
  float **more_adam;     /* [2 (V-1)]: AdamW moments m, v of chunks 1 .. V-1 (ZeRO-1: of this
                          * rank's slice of each, chunk_slice) */
  ckpt_chunk *ckpt_more; /* [V-1]: chunks 1 .. V-1 as checkpoints see them (ckpt_state_of) */
  int cur_chunk;         /* the chunk whose backward is being enqueued */
  int nevents;           /* per-slot events of each kind: nslots x V */
  int M, nslots, mb_size;
  sched_item *items;
  dev_event **ev_in_ready, **ev_grad_ready, **ev_out_ready, **ev_din_ready, **ev_slot_free,
      **ev_sent;
  dev_event *ev_bucket, *ev_dp_done, *ev_opt_done, *ev_gather_done;
  bucket *buckets;
  int nbuckets;
  zero_state z;           /* --zero >= 2 */
  int last_mb;            /* the micro-batch being walked backward is the step's last */
  float *adam_m, *adam_v; /* shard-sized */
  size_t shard_begin, shard_end, shard_len;
  double *stat; /* device: [loss sum, grad norm^2, MoE aux-loss sum, unused] */
  double host_stat[4];
  double aux_loss;                 /* the last step's load-balancing loss (train_run_step) */
  int *host_tokens, *host_targets; /* [M][N] */
  train_data *data;
  FILE *log;
  int tracing;
  size_t rss_baseline; /* resident bytes before set-up allocated anything */
  char err[1024];
} trainer;

/* ---- small helpers shared by the trainer's files ------------------------------------------ */

static inline model *chunk_model(trainer *t, int j) {
  return j == 0 ? &t->m : &t->more[j - 1];
}

/* Interleaved chunks 1 .. V-1: this rank's 1/n slice [*lo, *hi) of chunk j's flat buffer over
 * the gradient group, the same cut as chunk 0's ZeRO-1 shard (every chunk is padded to a
 * multiple of dp x cp x 16). Its gradient norm is summed over this slice, and under ZeRO-1 the
 * rank updates only this slice and keeps AdamW moments for it alone. */
static inline void chunk_slice(trainer *t, int j, size_t *lo, size_t *hi) {
  size_t len = chunk_model(t, j)->nfloats_padded / (size_t)t->reduce_n;
  *lo = (size_t)comm_rank(t->dp_c) * len;
  *hi = *lo + len;
}

static inline int fail(trainer *t, const char *fmt, const char *detail) {
  snprintf(t->err, sizeof t->err, fmt, detail);
  return -1;
}

static inline void pop_range(void) {
  if (stepscope_active()) stepscope_range_pop();
}

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- train_step.c ------------------------------------------------------------------------- */

/* Runs optimizer step `step`: the loss (mean over the global batch) and the gradient norm
 * before clipping. 0, or -1 with t->err set. */
int train_run_step(trainer *t, int step, double *loss_out, double *norm_out);
/* The learning rate of `step` (warm-up, then cosine decay to lr x min_lr_ratio). */
double train_lr_at(const train_config *c, int step);
/* --debug-delay: stops this rank's device for the delays given for `phase` (config.h). */
void train_debug_delay(trainer *t, int phase);
/* Waits for every stream; on an error sets t->err, aborts the job and returns -1. */
int train_sync_all(trainer *t);

/* ---- expert_step.c: the mixture-of-experts layers' share of a step (in call order) -------- */

int train_moe_setup(trainer *t);
void train_moe_slice(const trainer *t, size_t *lo, size_t *hi);
void train_moe_step_begin(trainer *t);
void train_moe_reduce_grads(trainer *t);
void train_moe_stats(trainer *t);
void train_moe_optimizer(trainer *t, int step, double clip_scale, float lr);
void train_moe_trace_step(trainer *t, int step);

/* ---- pipeline_exec.c ---------------------------------------------------------------------- */

/* Enqueues every forward and backward of the step in the schedule's order (t->items). */
void train_pipeline_walk(trainer *t);

/* ---- grad_sync.c -------------------------------------------------------------------------- */

/* Cuts chunk 0's flat gradient buffer into t->buckets (t->buckets NULL: out of memory). */
void train_build_buckets(trainer *t);
/* --zero 2/3: the shards, the bucket buffers and the model's units bound to them. */
int train_zero_setup(trainer *t);
/* All-reduces bucket k over the gradient group on "comm dp" (once per step). */
void train_launch_bucket(trainer *t, int k);
/* ZeRO-2/3: reduce-scatters bucket k into this rank's gradient shard. */
void train_zero_reduce_bucket(trainer *t, int k);
/* ZeRO-3: gathers the embedding bucket for the step; the rotating buffers are stale. */
void train_zero3_step_begin(trainer *t);
/* model_backward's per-unit callback (SP LayerNorm sums, bucket launches, reduce-scatters). */
void train_unit_done(void *arg, int unit);
/* ZeRO-2/3: calls fn for every piece of parameter p this rank owns (flat [b, e), shard
 * offset at). */
typedef void (*zero_piece_fn)(trainer *t, const param_info *p, size_t b, size_t e, size_t at,
                              void *arg);
void train_zero_for_owned(trainer *t, const param_info *p, zero_piece_fn fn, void *arg);
/* A zero_piece_fn: adds the piece's squared gradients to the step's norm accumulator. */
void train_norm_piece(trainer *t, const param_info *p, size_t b, size_t e, size_t at, void *arg);
/* ZeRO-2/3: clipping and AdamW on the shard; ZeRO-2 then all-gathers the parameters. */
void train_zero_optimizer(trainer *t, int step, double clip_scale, float lr);
/* ZeRO-3 around checkpoints: a temporary full stage buffer, gathered into or cut from. */
float *train_zero3_alloc_full(trainer *t);
int train_zero3_gather_all(trainer *t, float *full);
int train_zero3_scatter_all(trainer *t, const float *full);

#endif /* STEPSCOPE_TRAINER_TRAIN_INTERNAL_H */
