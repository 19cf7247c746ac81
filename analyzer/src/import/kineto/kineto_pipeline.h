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

/* Recognises rank `rank` of `world` as a pipeline stage (called once the
 * whole file is read, before the host timeline is built) and adds the
 * records above; a rank without point-to-point communication is left
 * alone, one whose work cannot be told apart gets a warning saying why.
 * 0 or STEPSCOPE_E_NOMEM. */
int ssa_kineto_pipeline(ssa_rank *r, const char *file_name, int rank, int world);

#endif
