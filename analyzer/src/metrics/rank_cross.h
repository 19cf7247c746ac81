/*
 * rank_cross.h — the cross-rank inputs of a pipeline rank's per-rank passes (rank_cross.c;
 * docs/scale.md "What depends on other ranks", "A second map round"): what the whole run
 * decides for one pipeline rank, so that a second map round can run that rank's metrics and
 * bubble transfers where its file is, exactly as the merge would, and the merge need not read
 * the file again.
 */
#ifndef SSA_RANK_CROSS_H
#define SSA_RANK_CROSS_H

#include "ssa_metrics.h"

/* A pipeline receive's matched send (late_upstream.c's partners): the receive's record, the
 * sending rank's index in the run, the send's aligned start. */
typedef struct ssa_partner_send {
  uint32_t record, sender;
  int64_t at;
} ssa_partner_send;

/* A receive of a pipeline rank that waited on a late send (late_upstream.c): from the
 * receive's start to the send's start (aligned), in the rank's selected step `window`. */
typedef struct ssa_upstream_wait {
  size_t window;
  int64_t t0, t1;
  uint32_t sender;
} ssa_upstream_wait;

/* What one pipeline rank's per-rank passes read of other ranks: the pipeline waits' ends
 * (rr->coll_wait_end), each record's transfer from the matching (rr->coll_transfer), the sends
 * its receives were matched with (the late upstream's waits), and its clock: its trace time +
 * rel_shift is the run's aligned time (its offset less the run's origin). */
typedef struct ssa_rank_cross {
  int made;                /* a pipeline rank (summary stage >= 0): the rest is set */
  size_t ncolls;           /* its summary's collective records */
  int64_t rel_shift;       /* aligned = trace time + rel_shift */
  int64_t *wait_end;       /* NULL, or per record: as rr->coll_wait_end */
  int64_t *transfer;       /* NULL, or per record: as rr->coll_transfer for a pipeline transfer's
                              record (the bubble reads no other), else -1 */
  ssa_partner_send *sends; /* by record: its pipeline receives with a matched send */
  size_t nsends;
} ssa_rank_cross;

/* The cross-rank steps of ssa_analyze that need no rank's events (clock offsets from the
 * run, pipeline waits, the collective matching, the pipeline transfers' partners), run on the
 * summaries and rank locals of a merge (opt->summaries and opt->rank_locals, not taken: a
 * local not made gives its totals window's bounds), and each pipeline rank's inputs in
 * (*out)[rank index] (calloc'ed; others not made). 0 or STEPSCOPE_E_NOMEM. */
int ssa_cross_inputs(const ssa_run *run, const ssa_options *opt, ssa_rank_cross **out);
void ssa_rank_cross_free(ssa_rank_cross *x);

/* What the merge checks before it takes a rank's results made in a second map round: a hash
 * of the inputs of its metrics pass (its stage and pipeline waits' ends), and of its
 * transfers' pass (clock, the transfer of each pipeline transfer's record, summary s's flags
 * say which: the only ones the bubble reads and the cross file sends; the matched sends).
 * FNV-1a 64. */
uint64_t ssa_cross_waits_hash(int stage, size_t ncolls, const int64_t *wait_end);
uint64_t ssa_cross_transfers_hash(int64_t rel_shift, const ssa_rank_summary *s,
                                  const int64_t *transfer, const ssa_partner_send *sends,
                                  size_t nsends);

/* The late upstream's parts that a second map round shares (late_upstream.c): rank i's
 * matched sends (*out malloc'ed, NULL when none); the waits of rank result rr (its events
 * here, its windows made) on late sends given its sends and clock, appended to
 * (*waits)[*n] of capacity *cap; and the merge's taking of waits found so (moved). 0 or
 * STEPSCOPE_E_NOMEM. */
int ssa_upstream_partner_sends(const ssa_upstream *u, size_t rank_idx, ssa_partner_send **out,
                               size_t *n);
int ssa_find_upstream_waits(const ssa_rank_result *rr, int64_t rel_shift,
                            const ssa_partner_send *sends, size_t nsends, ssa_upstream_wait **waits,
                            size_t *n, size_t *cap);
void ssa_upstream_take_waits(ssa_upstream *u, size_t rank_idx, ssa_upstream_wait **waits,
                             size_t *n);

#endif
