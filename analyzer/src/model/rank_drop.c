/*
 * rank_drop.c — frees a finished rank's events once its own passes are done, keeping the
 * shell the cross-rank steps and the report read (docs/scale.md, "Where the separation
 * stands"): identity, metadata, lanes, strings, `moe.load` marks, warnings and counts. The
 * input of clock alignment is taken first, so a bounded analysis can align the run after
 * every rank's events are gone.
 */
#include <stdlib.h>

#include "ssa_model.h"

int ssa_rank_drop_events(ssa_rank *r) {
  if (r->events_dropped) return 0;
  if (!r->align_input) {
    ssa_rank_align *in = calloc(1, sizeof *in);
    if (!in) return STEPSCOPE_E_NOMEM;
    if (ssa_rank_align_input(r, in)) {
      free(in);
      return STEPSCOPE_E_NOMEM;
    }
    r->align_input = in;
  }
  free(r->ops);
  r->ops = NULL;
  r->ops_cap = 0; /* nops stays: the report prints it */
  free(r->apis);
  r->apis = NULL;
  r->napis = r->apis_cap = 0;
  free(r->ranges);
  r->ranges = NULL;
  r->nranges = r->ranges_cap = 0;
  free(r->colls);
  r->colls = NULL;
  r->ncolls = r->colls_cap = 0;
  free(r->syncs);
  r->syncs = NULL;
  r->nsyncs = r->syncs_cap = 0;
  free(r->counters);
  r->counters = NULL;
  r->ncounters = r->counters_cap = 0;
  free(r->anchors);
  r->anchors = NULL;
  r->anchors_cap = 0; /* nanchors stays: the report's alignment part prints it */
  free(r->allocs);
  r->allocs = NULL;
  r->nallocs = r->allocs_cap = 0;
  free(r->op_ranges);
  r->op_ranges = NULL;
  r->nop_ranges = r->op_ranges_cap = 0;
  free(r->oplinks);
  r->oplinks = NULL;
  r->noplinks = r->oplinks_cap = 0;
  r->events_dropped = 1;
  return 0;
}
