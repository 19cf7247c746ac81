/*
 * rank_local.c — the per-rank results that depend on no other rank (ssa_metrics.h
 * ssa_rank_local; docs/scale.md "What depends on other ranks"): the metrics pass of one loaded
 * rank run alone, as ssa_analyze runs it, for a rank outside any pipeline, so that the map
 * step of a merge (`analyze --part K/N --partial`) can make them where the rank file is and
 * the merge can take them instead of reading the file again. A pipeline rank's metrics need
 * the run's pipeline waits (its collectives' waits for another stage): not made here.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rank_local.h"
#include "ssa_metrics.h"
#include "ssa_ops.h"

/* Whether the metrics pass of ssa_analyze would make a rank's op groups for MFU from the ops'
 * FLOPs: unless the rank's own metadata gives the model's FLOPs (then the run has them and no
 * op groups are wanted; when another rank's metadata is the run's, the merge makes what it
 * lacks by reading the rank, as ssa_op_flops_mfu_of does for any rank without them). */
static int op_groups_could_be_wanted(const ssa_rank *r) {
  return !r->tmeta.flops.present || isnan(r->tmeta.flops.model_flops_per_step);
}

int ssa_rank_local_make(const ssa_rank *r, const ssa_options *opt, ssa_rank_summary *s,
                        ssa_rank_local *out) {
  memset(out, 0, sizeof *out);
  if (s->pipeline_stage >= 0) return 0; /* its collectives wait for other stages */
  ssa_analysis a;                       /* an analysis of this one rank */
  ssa_rank_result rr;
  memset(&a, 0, sizeof a);
  memset(&rr, 0, sizeof rr);
  a.opt = *opt;
  a.opt.rank_events = NULL;
  a.opt.summaries = NULL;
  a.opt.rank_locals = NULL;
  a.launch_gap_ns = ssa_options_launch_gap_ns(opt);
  a.ranks = &rr;
  a.nranks = 1;
  rr.rank = r;
  rr.stage = -1;
  rr.summary = *s; /* the pass names its kernels in it */
  int rc = ssa_analyze_rank(&a, &rr);
  if (rc == 0 && !rr.pipeline && op_groups_could_be_wanted(r) && ssa_op_table_counts(&a, 0))
    rc = ssa_rank_op_groups(&a, &rr);
  if (rc == 0 && !rr.pipeline) /* the culprit walk's likely questions */
    rc = ssa_rank_span_answers(&rr, &rr.span_answers, &rr.nspan_answers);
  *s = rr.summary;
  memset(&rr.summary, 0, sizeof rr.summary);
  rr.rank = NULL;
  *out = (ssa_rank_local){rc == 0 && !rr.pipeline, rr, a.warnings, a.nwarnings};
  if (!out->made) ssa_rank_local_free(out); /* a pipeline rank (its layout or records say so) */
  return rc;
}

int ssa_rank_local_take(ssa_analysis *a, ssa_rank_result *rr, ssa_rank_local *l, int op_groups) {
  ssa_rank_result mine = *rr; /* what the analysis gave the rank before its metrics */
  *rr = l->result;
  rr->rank = mine.rank;
  rr->summary = mine.summary;
  rr->rank_index = mine.rank_index;
  rr->stage_of_waits = mine.stage_of_waits;
  rr->coll_wait_end = mine.coll_wait_end;
  if (!op_groups) { /* MFU comes from the metadata: none, as the pass would have made */
    free(rr->ops.groups);
    memset(&rr->ops, 0, sizeof rr->ops);
  }
  memset(&l->result, 0, sizeof l->result);
  int rc = 0;
  for (size_t i = 0; i < l->nwarnings && rc == 0; i++)
    rc = ssa_analysis_warn(a, "%s", l->warnings[i]);
  ssa_rank_local_free(l);
  return rc;
}

void ssa_rank_local_free(ssa_rank_local *l) {
  ssa_rank_result_free(&l->result);
  for (size_t i = 0; i < l->nwarnings; i++)
    free(l->warnings[i]);
  free(l->warnings);
  memset(l, 0, sizeof *l);
}

/* Two step range names, either NULL, the same. */
static int same_name(const char *x, const char *y) {
  return x == y || (x && y && strcmp(x, y) == 0);
}

int ssa_rank_local_options_equal(const ssa_options *x, const ssa_options *y) {
  int steps_equal =
      x->has_step_filter == y->has_step_filter &&
      (!x->has_step_filter || (x->step_first == y->step_first && x->step_last == y->step_last));
  return steps_equal && ssa_options_launch_gap_ns(x) == ssa_options_launch_gap_ns(y) &&
         same_name(x->step_range_name, y->step_range_name) &&
         (x->rank < 0 ? -1 : x->rank) == (y->rank < 0 ? -1 : y->rank);
}
