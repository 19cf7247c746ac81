/*
 * kineto_p2p.h — a recognised pipeline's host point-to-point calls matched
 * across ranks (kineto_p2p.c; docs/kineto-import.md "Point-to-point matched
 * across ranks"): each `gloo:send` / `gloo:recv` (or `c10d::send` /
 * `c10d::recv_` where the transport writes no range) becomes a collective
 * record of the transfer (comm_id, seq) that its peer's matching call gets
 * too, and the host timeline's op of that call is linked to it.
 */
#ifndef KINETO_P2P_H
#define KINETO_P2P_H

#include <stddef.h>
#include <stdint.h>

#include "kineto_pipeline.h"
#include "ssa_model.h"

/* Adds the collective records of the rank's point-to-point calls in its pipeline (pp: its
 * place, the pipeline's ranks; `virtual_stages` per rank), once kineto_pipeline.c has declared
 * its forward / backward ranges. A rank whose trace holds point-to-point collective records of
 * its own (NCCL metadata) is left alone. 0 or STEPSCOPE_E_NOMEM. */
int ssa_kineto_p2p_match(ssa_rank *r, const ssa_kineto_pp *pp, int virtual_stages);

/* The process group of a rank's point-to-point record_param_comms ops (`params`, n of them;
 * PyTorch's NCCL backend writes one around every send and recv, with "Process Group Ranks" and,
 * as "Rank", the peer's rank in the group): its global ranks by group rank into ranks[cap], and
 * how many; 0 when the rank has no such op, one without its group's ranks, ops of different
 * groups, a group it is not in, or a peer that is not another member. */
struct kparam;
int ssa_kineto_p2p_group(const struct kparam *params, size_t n, int rank, int *ranks, int cap);

/* The records above, by (thread, start, end), for the host timeline's ops. */
typedef struct ssa_kineto_p2p_call {
  int64_t start, end; /* start first: ssa_count_below searches them */
  uint64_t thread;
  uint32_t tag; /* here: an index into r->colls */
} ssa_kineto_p2p_call;

typedef struct ssa_kineto_p2p_index {
  ssa_kineto_p2p_call *v;
  size_t n;
} ssa_kineto_p2p_index;

/* 0 or STEPSCOPE_E_NOMEM (an empty index when the rank has none). */
int ssa_kineto_p2p_index_build(const ssa_rank *r, ssa_kineto_p2p_index *ix);
/* The record of the call on `thread` over [start, end], or NULL. */
const ssa_coll *ssa_kineto_p2p_find(const ssa_rank *r, const ssa_kineto_p2p_index *ix,
                                    uint64_t thread, int64_t start, int64_t end);
void ssa_kineto_p2p_index_free(ssa_kineto_p2p_index *ix);

#endif
