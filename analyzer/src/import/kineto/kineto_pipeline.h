/*
 * kineto_pipeline.h — pipeline parallelism recognised in a Kineto trace
 * (kineto_pipeline.c; docs/kineto-import.md "Pipelines"): from the
 * point-to-point communication, the schedules' own annotations and the
 * order of forward and backward work, the `layout` and `schedule` metadata
 * and the `forward` / `backward` / `backward_weight` ranges that stepscope's
 * own trainer writes, so that the bubble analysis applies.
 */
#ifndef KINETO_PIPELINE_H
#define KINETO_PIPELINE_H

#include "ssa_model.h"

/* Where a rank may sit in a pipeline: its pipeline's ranks (a process group named as one in
 * distributedInfo.pg_config, else the whole world) and its data-parallel replica. */
typedef struct ssa_kineto_pp {
  int rank, world;   /* global */
  int stage, stages; /* this rank's place in its pipeline, and the pipeline's ranks */
  const int *ranks;  /* the global rank of each of them, by place (NULL: the world's) */
  int dp, dp_rank;   /* the pipelines of the job, and this one's key among them */
  int from_groups;   /* read from the process groups (else: the world is one pipeline) */
} ssa_kineto_pp;

/* Recognises the rank as stage pp->stage of its pipeline (called once the
 * whole file is read, before the host timeline is built) and adds the
 * records above; a rank without point-to-point communication is left
 * alone, one whose work cannot be told apart gets a warning saying why.
 * 0 or STEPSCOPE_E_NOMEM. */
int ssa_kineto_pipeline(ssa_rank *r, const char *file_name, const ssa_kineto_pp *pp);

#endif
