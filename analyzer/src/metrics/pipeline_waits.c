/*
 * pipeline_waits.c — which waits inside collectives are pipeline bubble
 * (docs/metrics.md "Pipeline bubble").
 *
 * On a pipeline rank, a collective that is not itself pipeline send/recv
 * (the tied-embedding all-reduce between the first and last stage, the loss
 * all-reduce over the world, a gradient all-reduce that spans stages) is
 * entered when the rank's own work is done; it then waits for members on
 * other stages, which are still draining the schedule. That wait is the
 * pipeline's drain, not communication: the time from the rank's arrival to
 * the latest arrival of a member on another stage is counted in the bubble.
 * Waiting for a member on the same stage (a DP or TP straggler) stays
 * communication.
 *
 * Runs before the per-rank metrics (which need it in their one pass), on the
 * ranks' summaries (rank_summary.c): every rank's stage is read from its
 * `layout` metadata, the collective
 * records of all ranks are matched by (comm_id, seq) and, per member on a
 * pipeline rank, wait_end = the latest aligned start of a member on
 * another stage, converted to the member's trace clock, is stored in
 * rr->coll_wait_end[collective index] (INT64_MIN: no pipeline wait).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

/* The pipeline stage of a rank: layout.pp_rank when the rank is in a
 * pipeline (pp > 1, a schedule with more than one stage, or pipeline
 * transfers), else -1. */
int ssa_rank_pipeline_stage(const ssa_rank *r) {
  double pp = ssa_meta_or(r->tmeta.layout.pp, 1), stage = ssa_meta_or(r->tmeta.layout.pp_rank, -1);
  double stages = r->tmeta.schedule.stages; /* NaN when absent: never > pp */
  if (stages > pp) pp = stages;
  int pipeline = pp > 1;
  for (size_t i = 0; i < r->ncolls && !pipeline; i++)
    if (r->colls[i].flags & STEPSCOPE_COLL_F_PIPELINE) pipeline = 1;
  return pipeline && stage >= 0 && stage < 1e9 ? (int)stage : -1;
}

/* A member's record in its rank's summary. */
static const ssa_coll_rec *member_rec(const ssa_analysis *a, const ssa_coll_member *m) {
  return &a->ranks[m->rank_idx].summary.colls[m->coll_idx];
}

ssa_stage_latest ssa_latest_by_stage(const int *stage, const int64_t *start, size_t n) {
  ssa_stage_latest b = {INT64_MIN, INT64_MIN, -1};
  for (size_t y = 0; y < n; y++) {
    if (stage[y] < 0) continue;
    if (start[y] > b.start) {
      if (stage[y] != b.stage) b.start_other_stage = b.start;
      b.start = start[y];
      b.stage = stage[y];
    } else if (stage[y] != b.stage && start[y] > b.start_other_stage)
      b.start_other_stage = start[y];
  }
  return b;
}

int64_t ssa_latest_on_other_stage(const ssa_stage_latest *b, int stage) {
  return b->stage != stage ? b->start : b->start_other_stage;
}

int ssa_find_pipeline_waits(ssa_analysis *a) {
  size_t n = 0, pipeline_ranks = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    rr->stage_of_waits = rr->summary.pipeline_stage;
    if (rr->stage_of_waits >= 0) pipeline_ranks++;
    n += rr->summary.ncolls;
  }
  if (n == 0 || pipeline_ranks == 0) return 0;
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    if (rr->stage_of_waits < 0 || rr->summary.ncolls == 0) continue;
    rr->coll_wait_end = malloc(rr->summary.ncolls * sizeof *rr->coll_wait_end);
    if (!rr->coll_wait_end) return STEPSCOPE_E_NOMEM;
    for (size_t j = 0; j < rr->summary.ncolls; j++)
      rr->coll_wait_end[j] = INT64_MIN;
  }
  ssa_coll_member *m;
  if (ssa_summary_coll_members(a, &m, &n)) return STEPSCOPE_E_NOMEM;
  int64_t *start = malloc(n * sizeof *start);
  int *stage = malloc(n * sizeof *stage);
  if (!start || !stage) {
    free(m);
    free(start);
    free(stage);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t x = 0; x < n; x++) { /* aligned start of each member */
    const ssa_rank_result *rx = &a->ranks[m[x].rank_idx];
    start[x] = ssa_summary_rel_time(a, &rx->summary, member_rec(a, &m[x])->start);
    stage[x] = rx->stage_of_waits;
  }
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && m[e].comm_id == m[g].comm_id && m[e].seq == m[g].seq)
      e++;
    ssa_stage_latest best = ssa_latest_by_stage(stage + g, start + g, e - g);
    for (size_t x = g; x < e; x++) {
      ssa_rank_result *rx = &a->ranks[m[x].rank_idx];
      if (!rx->coll_wait_end) continue;
      if (member_rec(a, &m[x])->flags & STEPSCOPE_COLL_F_PIPELINE) continue; /* pipeline comm */
      int64_t latest = ssa_latest_on_other_stage(&best, rx->stage_of_waits);
      if (latest > start[x]) /* back to the member's own trace clock */
        rx->coll_wait_end[m[x].coll_idx] = latest - rx->summary.offset_ns + a->run->origin;
    }
    g = e;
  }
  a->kept_members = m; /* for the matching: the same members, sorted */
  a->nkept_members = n;
  free(start);
  free(stage);
  return 0;
}
