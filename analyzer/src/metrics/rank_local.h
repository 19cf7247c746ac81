/*
 * rank_local.h — a rank's per-rank results made where its file is (rank_local.c; docs/scale.md
 * "What depends on other ranks"): those that depend on no other rank, made by the map step of
 * a merge, and a pipeline rank's, made by a second map round from the run's cross-rank inputs
 * (rank_cross.h); carried by the partial, taken by the merge's per-rank passes.
 */
#ifndef SSA_RANK_LOCAL_H
#define SSA_RANK_LOCAL_H

#include "rank_cross.h"
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
  int64_t totals_start, totals_end; /* not made: its totals window's bounds (the collective
                                       matching keeps an instance by them: ssa_cross_inputs) */
  /* what the pass gives: steps, totals and windows, lanes, kernel statistics (names in the
   * rank's summary), pipeline, stage, bubble_theory, op groups (made when MFU could need them:
   * no model FLOPs on this rank) and the culprit walk's span answers; no rank, no summary */
  ssa_rank_result result;
  char **warnings; /* the pass's analysis warnings, in order */
  size_t nwarnings;
  /* a pipeline rank's, made with the merge's cross-rank inputs (a second map round): its
   * windows hold the bubble's transfers (ssa_rank_bubble_transfers), and the merge takes them
   * only when its own inputs hash the same (ssa_cross_waits_hash, ssa_cross_transfers_hash) */
  int crossed;
  uint64_t waits_hash, transfers_hash;
  ssa_pipeline_item *items; /* the summary's pipeline items (ssa_rank_pipeline_items) */
  size_t nitems;
  ssa_upstream_wait *waits; /* its receives' waits on late sends (ssa_find_upstream_waits) */
  size_t nwaits;
} ssa_rank_local;

/* Runs the metrics pass of loaded rank r alone under `opt` (its summary s gets the kernel and
 * op names, as in ssa_analyze); *out is made when r is in no pipeline, or is a pipeline rank
 * whose cross-rank inputs `cross` gives (made; NULL: none), then with its bubble transfers and
 * late upstream waits too; else it holds the totals window's bounds. 0 or STEPSCOPE_E_NOMEM.
 * Free with ssa_rank_local_free either way. */
int ssa_rank_local_make(const ssa_rank *r, const ssa_options *opt, ssa_rank_summary *s,
                        const ssa_rank_cross *cross, ssa_rank_local *out);
/* Moves *l into rr (the op groups only when `op_groups` is set) and says its warnings to a;
 * what a crossed local holds for the transfers' pass (hash, waits) stays in *l. */
int ssa_rank_local_take(ssa_analysis *a, ssa_rank_result *rr, ssa_rank_local *l, int op_groups);
void ssa_rank_local_free(ssa_rank_local *l);
/* Whether the options that shape a rank's local results (steps, step range, launch gap, the
 * --rank whose op groups count) are the same in x and y. */
int ssa_rank_local_options_equal(const ssa_options *x, const ssa_options *y);

#endif
