/*
 * rank_drop.c — frees a finished rank's events once its own passes are done, keeping the
 * shell the cross-rank steps and the report read (docs/scale.md, "Where the separation
 * stands"): identity, metadata, lanes, strings, `moe.load` marks, warnings and counts. The
 * input of clock alignment is taken first, so a bounded analysis can align the run after
 * every rank's events are gone.
 */
#include <stdlib.h>

#include "ssa_model.h"

/* Frees one of r's event arrays and says it is empty. */
#define DROP(array, count, cap) (free(r->array), r->array = NULL, r->count = r->cap = 0)

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
  r->last_time = ssa_rank_last_time(r); /* its run's note of an unclosed trace reads it */
  r->has_last_time = 1;
  free(r->ops);
  r->ops = NULL;
  r->ops_cap = 0; /* nops stays: the report prints it */
  free(r->anchors);
  r->anchors = NULL;
  r->anchors_cap = 0; /* nanchors stays: the report's alignment part prints it */
  DROP(apis, napis, apis_cap);
  DROP(ranges, nranges, ranges_cap);
  DROP(colls, ncolls, colls_cap);
  DROP(syncs, nsyncs, syncs_cap);
  DROP(counters, ncounters, counters_cap);
  DROP(allocs, nallocs, allocs_cap);
  DROP(op_ranges, nop_ranges, op_ranges_cap);
  DROP(oplinks, noplinks, oplinks_cap);
  r->events_dropped = 1;
  return 0;
}
