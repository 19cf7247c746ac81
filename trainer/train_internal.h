/*
 * train_internal.h — internal to one rank's training run, shared by train.c (set-up, the
 * step loop, tracing), train_step.c (one step), grad_sync.c (DP buckets and ZeRO) and
 * expert_step.c (the experts' optimizer) and by nothing else: the trainer's state (struct
 * trainer), a few small helpers, and what train_step.c offers the others.
 *
 * One owner per piece of state: struct trainer holds, as members, the gradient-sync state
 * (struct grad_sync, grad_sync.h: buckets, optimizer shard, ZeRO-2/3; owned by grad_sync.c),
 * the pipeline executor (struct pipeline, pipeline_exec.h; owned by pipeline_exec.c, which
 * does not know the trainer and runs the stages through train_step.c's stage operations)
 * and the experts' optimizer state (struct expert_state, expert_step.h; owned by
 * expert_step.c). The other files go through their owner's functions, never their fields.
 */
#ifndef STEPSCOPE_TRAINER_TRAIN_INTERNAL_H
#define STEPSCOPE_TRAINER_TRAIN_INTERNAL_H

#include <stdio.h>
#include <time.h>

#include "checkpoint.h"
#include "comm.h"
#include "device.h"
#include "expert_step.h"
#include "grad_sync.h"
#include "model.h"
#include "pipeline_exec.h"
#include "schedule.h"
#include "stepscope.h"
#include "train.h"
#include "train_data.h"
#include "zero.h"

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
  int reduce_n;       /* members of dp_c, the gradient group: dp x cp (weights are replicated over
                       * both; a CP rank's gradients cover only its tokens) */
  int *host_seq_tokens, *host_seq_targets; /* --cp > 1: one micro-batch of whole sequences */
  model m;                                 /* chunk 0 (the only one without interleaving) */
  int V;                                   /* model chunks (virtual stages) on this rank */
  model *more;                             /* chunks 1 .. V-1 */
  float **more_adam;     /* [2 (V-1)]: AdamW moments m, v of chunks 1 .. V-1 (ZeRO-1: of this
                          * rank's slice of each, chunk_slice) */
  ckpt_chunk *ckpt_more; /* [V-1]: chunks 1 .. V-1 as checkpoints see them (ckpt_state_of) */
  int M, nslots, mb_size;
  pipeline pipe;          /* the pipeline executor (pipeline_exec.c) */
  grad_sync gs;           /* buckets, optimizer shard, ZeRO-2/3 (grad_sync.c) */
  expert_state moe;       /* the experts' AdamW moments (expert_step.c) */
  float *adam_m, *adam_v; /* chunk 0's AdamW moments, shard-sized (grad_sync_optimizer_shard) */
  double *stat;           /* device: [loss sum, grad norm^2, MoE aux-loss sum, unused] */
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

/* This rank's (chunk_member_slice: member q's) 1/n slice [*lo, *hi) of chunk j's flat buffer
 * over the gradient group: chunk 0's ZeRO-1 shard, and the same cut of an interleaved rank's
 * chunks 1 .. V-1 (every chunk is padded to a multiple of dp x cp x 16). Their gradient norm is
 * summed over this slice, and under ZeRO-1 the rank updates only this slice and keeps AdamW
 * moments (and, sharded masters, the master weights) for it alone. */
static inline void chunk_member_slice(trainer *t, int j, int q, size_t *lo, size_t *hi) {
  size_t len = chunk_model(t, j)->nfloats_padded / (size_t)t->reduce_n;
  *lo = (size_t)q * len;
  *hi = *lo + len;
}
static inline void chunk_slice(trainer *t, int j, size_t *lo, size_t *hi) {
  chunk_member_slice(t, j, comm_rank(t->dp_c), lo, hi);
}

/* The part [*b, *e) of the flat range [offset, offset + count) that lies in [lo, hi); 0 when
 * none does. */
static inline int range_overlap(size_t offset, size_t count, size_t lo, size_t hi, size_t *b,
                                size_t *e) {
  *b = offset > lo ? offset : lo;
  *e = offset + count < hi ? offset + count : hi;
  return *e > *b;
}

/* AdamW with the run's hyperparameters (betas, eps; weight decay when `decay`) on n floats,
 * at learning rate lr, for step `step` (from 0). train_step.c. */
void train_adamw(trainer *t, float *param, const float *grad, float *adam_m, float *adam_v,
                 size_t n, int decay, int step, float lr);
/* Every chunk's bf16 working copy of its GEMM weights cast from the parameters (--gemm-weights
 * bf16; nothing otherwise), on compute: after an update or a restore. train_step.c. */
void train_refresh_gemm_weights(trainer *t);

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
/* The stage operations the pipeline executor runs this rank's stages with (ctx: t). */
pipeline_stage_ops train_stage_ops(trainer *t);

#endif /* STEPSCOPE_TRAINER_TRAIN_INTERNAL_H */
