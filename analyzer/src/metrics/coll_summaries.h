/*
 * coll_summaries.h — what follows the collective matching (collectives.c): the summaries
 * by key and the instances' time order (coll_summaries.c).
 */
#ifndef COLL_SUMMARIES_H
#define COLL_SUMMARIES_H

#include "ssa_metrics.h"

/* After the matching: the summaries of a->colls by (op, group, bytes), then a->colls in time
 * order (first start, comm_id, seq). 0 or STEPSCOPE_E_NOMEM. */
int ssa_summarize_collectives(ssa_analysis *a);

#endif
