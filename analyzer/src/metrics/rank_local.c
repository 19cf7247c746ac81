/*
 * rank_local.c — the per-rank results made where the rank file is (rank_local.h; docs/scale.md
 * "What depends on other ranks"): the metrics pass of one loaded rank run alone, as
 * ssa_analyze runs it, so that the map step of a merge (`analyze --part K/N --partial`) can
 * make them and the merge can take them instead of reading the file again. A rank outside any
 * pipeline needs nothing of other ranks; a pipeline rank's metrics need the run's pipeline
 * waits (its collectives' waits for another stage), and its bubble transfers the matching's
 * transfer per record: made only in a second map round, which has them (rank_cross.h).
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

/* The totals window's bounds of loaded rank r under `opt`, as ssa_analyze_rank sets them (a
 * rank whose results are not made: the merge's collective matching keeps instances by them). */
static int totals_bounds(const ssa_rank *r, const ssa_options *opt, ssa_rank_local *out) {
  ssa_step *all = NULL;
  size_t n = 0, k = 0;
  int rc = ssa_find_steps(r, opt->step_range_name, &all, &n);
  for (size_t i = 0; rc == 0 && i < n; i++)
    if (ssa_step_selected(opt, all[i].number)) all[k++] = all[i];
  if (rc == 0) ssa_totals_bounds(r, all, k, &out->totals_start, &out->totals_end);
  free(all);
  return rc ? STEPSCOPE_E_NOMEM : 0;
}

/* A pipeline rank's passes after its metrics, with the run's inputs x: its bubble transfers
 * (ssa_analyze's pass after the matching) and its receives' waits on late sends. */
static int crossed_passes(ssa_rank_result *rr, const ssa_rank_cross *x, ssa_rank_local *out) {
  if (!rr->pipeline) return 0;
  rr->coll_transfer = x->transfer;
  int rc = ssa_rank_bubble_transfers(rr);
  size_t cap = 0;
  if (rc == 0)
    rc = ssa_find_upstream_waits(rr, x->rel_shift, x->sends, x->nsends, &out->waits, &out->nwaits,
                                 &cap);
  rr->coll_transfer = NULL; /* x's */
  out->waits_hash = ssa_cross_waits_hash(rr->stage_of_waits, x->ncolls, x->wait_end);
  out->transfers_hash =
      ssa_cross_transfers_hash(x->rel_shift, &rr->summary, x->transfer, x->sends, x->nsends);
  return rc;
}

int ssa_rank_local_make(const ssa_rank *r, const ssa_options *opt, ssa_rank_summary *s,
                        const ssa_rank_cross *cross, ssa_rank_local *out) {
  memset(out, 0, sizeof *out);
  int crossed = s->pipeline_stage >= 0 && cross && cross->made && cross->ncolls == s->ncolls;
  /* its collectives wait for other stages: not made without the run's waits */
  if (s->pipeline_stage >= 0 && !crossed) return totals_bounds(r, opt, out);
  ssa_analysis a; /* an analysis of this one rank */
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
  rr.stage_of_waits = crossed ? s->pipeline_stage : -1;
  rr.coll_wait_end = crossed ? cross->wait_end : NULL; /* cross's */
  rr.summary = *s;                                     /* the pass names its kernels in it */
  int rc = ssa_analyze_rank(&a, &rr);
  if (rc == 0 && crossed && rr.pipeline && rr.stage >= 0) rc = ssa_rank_pipeline_items(&a, &rr);
  int made = rc == 0 && (crossed || !rr.pipeline);
  if (made && op_groups_could_be_wanted(r) && ssa_op_table_counts(&a, 0))
    rc = ssa_rank_op_groups(&a, &rr);
  if (made) /* the culprit walk's likely questions (a pipeline rank's: its windows' ones) */
    rc = ssa_rank_span_answers(&rr, &rr.span_answers);
  if (rc == 0 && crossed) rc = crossed_passes(&rr, cross, out);
  rr.coll_wait_end = NULL;
  out->items = rr.summary.items; /* the merge puts them back in the summary it carries */
  out->nitems = rr.summary.nitems;
  rr.summary.items = NULL;
  rr.summary.nitems = 0;
  *s = rr.summary;
  memset(&rr.summary, 0, sizeof rr.summary);
  rr.rank = NULL;
  out->made = rc == 0 && made;
  out->crossed = out->made && crossed;
  out->result = rr;
  out->warnings = a.warnings;
  out->nwarnings = a.nwarnings;
  if (!out->made) { /* a pipeline rank (its layout or records say so) */
    ssa_rank_local_free(out);
    if (rc == 0) rc = totals_bounds(r, opt, out);
  }
  return rc;
}

int ssa_rank_local_take(ssa_analysis *a, ssa_rank_result *rr, ssa_rank_local *l, int op_groups) {
  ssa_rank_result mine = *rr; /* what the analysis gave the rank before its metrics */
  *rr = l->result;
  rr->rank = mine.rank;
  rr->summary = mine.summary;
  rr->summary.items = l->items;
  rr->summary.nitems = l->nitems;
  l->items = NULL;
  l->nitems = 0;
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
  ssa_rank_local kept = {.crossed = l->crossed, /* what the transfers' pass takes */
                         .transfers_hash = l->transfers_hash,
                         .waits = l->waits,
                         .nwaits = l->nwaits};
  l->waits = NULL;
  ssa_rank_local_free(l);
  if (kept.crossed)
    *l = kept;
  else
    free(kept.waits);
  return rc;
}

void ssa_rank_local_free(ssa_rank_local *l) {
  ssa_rank_result_free(&l->result);
  free(l->items);
  free(l->waits);
  ssa_text_list_free(l->warnings, l->nwarnings);
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
