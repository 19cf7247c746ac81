/*
 * phase_ranges.c — the training phases of a rank's host time, as the culprit walk
 * (culprits.c) and the late upstream sources (late_upstream.c) both read them: the rank's
 * `forward`, `backward` and `optimizer` ranges (and, where the caller counts it as backward,
 * a pipeline schedule's `backward_weight`), in order of start, and the phase of the range
 * that holds a given host time.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

const char *const ssa_phase_names[SSA_PHASE_N] = {"forward", "backward",   "optimizer", "host",
                                                  "copy",    "collective", "other"};

static int phase_of_range_name(const char *n, int backward_weight) {
  if (!strcmp(n, "forward")) return SSA_PHASE_FORWARD;
  if (!strcmp(n, "backward")) return SSA_PHASE_BACKWARD;
  if (backward_weight == SSA_BACKWARD_WEIGHT_AS_BACKWARD && !strcmp(n, "backward_weight"))
    return SSA_PHASE_BACKWARD;
  if (!strcmp(n, "optimizer")) return SSA_PHASE_OPTIMIZER;
  return -1;
}

int ssa_phase_ranges_build(const ssa_rank *r, int backward_weight, ssa_phase_ranges *p) {
  *p = (ssa_phase_ranges){NULL, 0};
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++)
    n += phase_of_range_name(ssa_rank_str(r, r->ranges[i].name), backward_weight) >= 0;
  if (n == 0) return 0;
  p->v = malloc(n * sizeof *p->v);
  if (!p->v) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->nranges; i++) {
    int ph = phase_of_range_name(ssa_rank_str(r, r->ranges[i].name), backward_weight);
    if (ph >= 0) p->v[p->n++] = (ssa_phase_range){r->ranges[i].start, r->ranges[i].end, ph};
  }
  return 0; /* ranges are sorted by start (rank_finish.c) */
}

int ssa_phase_at(const ssa_phase_ranges *p, int64_t t) {
  size_t k = ssa_count_at_most(p->v, p->n, sizeof *p->v, t); /* ranges starting by t */
  for (size_t tries = 0; k-- > 0 && tries < 8; tries++)
    if (p->v[k].end > t) return p->v[k].phase;
  return -1;
}

void ssa_phase_ranges_free(ssa_phase_ranges *p) {
  free(p->v);
  *p = (ssa_phase_ranges){NULL, 0};
}
