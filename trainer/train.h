/*
 * train.h — one rank's training run: the step loop over the pipeline schedule,
 * data-parallel gradient buckets, ZeRO-1, the optimizer, metrics and tracing.
 *
 * `train_rank_run` is what every rank process executes (under the launcher in
 * launcher.c, under an outside launcher, or in-process for one rank).
 */
#ifndef STEPSCOPE_TRAINER_TRAIN_H
#define STEPSCOPE_TRAINER_TRAIN_H

#include "config.h"

typedef struct rank_env {
  int rank, world, local_rank;
  const char *shm_path; /* the job's shared segment (its name, when shm_fd >= 0) */
  int shm_fd;           /* >= 0: the segment, inherited open from our launcher; -1: by path */
  int create_shm;       /* this process creates it (outside launcher, rank 0) */
  int remove_shm;       /* remove it at the end (rank 0, not under our launcher) */
  double comm_timeout_s;
  long long shm_not_before; /* see comm_job_options.not_before */
} rank_env;

/* Runs the whole training on this rank. Returns 0, or 1 after printing the
 * error (prefixed with the rank) on stderr. */
int train_rank_run(const train_config *cfg, const rank_env *env);

/* Model FLOPs per optimizer step (6N + attention term, all ranks together) and
 * hardware FLOPs (adds recomputation). */
double train_model_flops_per_step(const train_config *cfg);
double train_hardware_flops_per_step(const train_config *cfg);

#endif /* STEPSCOPE_TRAINER_TRAIN_H */
