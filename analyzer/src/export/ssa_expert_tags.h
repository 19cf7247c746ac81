/*
 * ssa_expert_tags.h — the second category both exports (chrome_export.c,
 * perfetto_export.c) give the phases of expert parallelism, so that a
 * viewer can colour them: "all_to_all" on the token exchange's ops, and
 * "moe_dispatch" / "moe_combine" on the trainer's host ranges around it
 * (expert_tags.c). The Chrome JSON writes them after a comma in `cat`
 * ("comm,all_to_all", "host,moe_dispatch"); the Perfetto trace as a second
 * category of the track event.
 */
#ifndef SSA_EXPERT_TAGS_H
#define SSA_EXPERT_TAGS_H

#include "ssa_model.h"

typedef enum ssa_expert_tag {
  SSA_EXPERT_NONE,
  SSA_EXPERT_ALL_TO_ALL,   /* "all_to_all" */
  SSA_EXPERT_MOE_DISPATCH, /* "moe_dispatch" */
  SSA_EXPERT_MOE_COMBINE,  /* "moe_combine" */
} ssa_expert_tag;

/* The category's text ("all_to_all"...); NULL for SSA_EXPERT_NONE. */
const char *ssa_expert_tag_name(ssa_expert_tag t);

/* SSA_EXPERT_ALL_TO_ALL for an all-to-all: an op executing an all-to-all
 * collective record (the trainer's, NCCL's), or a communication op without
 * a record whose name says all-to-all, dispatch or combine (DeepEP's
 * kernels in a PyTorch trace: comm_families.c's keywords). */
ssa_expert_tag ssa_op_expert_tag(const ssa_rank *r, const ssa_op *p);

/* SSA_EXPERT_MOE_DISPATCH / _COMBINE for a host range that is a phase of
 * the token all-to-all (stepscope-train's `moe.dispatch`, `moe.combine` and
 * the ranges nested in them, named `moe.dispatch.*` / `moe.combine.*`:
 * docs/trace-format.md). */
ssa_expert_tag ssa_range_expert_tag(const char *range_name);

#endif
