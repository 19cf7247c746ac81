/*
 * rank_local.h — a rank's per-rank results that depend on no other rank (rank_local.c;
 * docs/scale.md "What depends on other ranks"): made by the map step of a merge where the
 * rank file is, carried by the partial, taken by the merge's metrics pass.
 */
#ifndef SSA_RANK_LOCAL_H
#define SSA_RANK_LOCAL_H

#include "ssa_metrics.h"

/* What the per-rank metrics pass (breakdown.c, op_perf.c) gives a rank that depends on no other
 * rank (rank_local.c; docs/scale.md "What depends on other ranks"): a rank outside any pipeline
 * (no stage, no pipeline collective, pp 1) has no wait for another stage, so its windows,
 * lanes, kernel statistics, launch delays and op groups are its own; the map step of a merge
 * makes them where the rank file is, the partial carries them, and the merge's metrics pass
 * takes them instead of reading the rank again. The options that shape them:
 * ssa_rank_local_options_equal. */
typedef struct ssa_rank_local {
  int made; /* 0: a pipeline rank (its metrics need the run's pipeline waits): not made */
  /* what the pass gives: steps, totals and windows, lanes, kernel statistics (names in the
   * rank's summary), pipeline, stage, bubble_theory, op groups (made when MFU could need them:
   * no model FLOPs on this rank) and the culprit walk's span answers; no rank, no summary */
  ssa_rank_result result;
  char **warnings; /* the pass's analysis warnings, in order */
  size_t nwarnings;
} ssa_rank_local;

/* Runs the metrics pass of loaded rank r alone under `opt` (its summary s gets the kernel and
 * op names, as in ssa_analyze); *out is made only when r is in no pipeline. 0 or
 * STEPSCOPE_E_NOMEM. Free with ssa_rank_local_free either way. */
int ssa_rank_local_make(const ssa_rank *r, const ssa_options *opt, ssa_rank_summary *s,
                        ssa_rank_local *out);
/* Moves *l into rr (the op groups only when `op_groups` is set) and says its warnings to a. */
int ssa_rank_local_take(ssa_analysis *a, ssa_rank_result *rr, ssa_rank_local *l, int op_groups);
void ssa_rank_local_free(ssa_rank_local *l);
/* Whether the options that shape a rank's local results (steps, step range, launch gap, the
 * --rank whose op groups count) are the same in x and y. */
int ssa_rank_local_options_equal(const ssa_options *x, const ssa_options *y);

#endif
