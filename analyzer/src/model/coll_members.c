/*
 * coll_members.c — the collective records of all of a run's ranks, keyed by
 * the instance they belong to (comm_id, seq) and sorted so that each
 * instance's members are adjacent: what clock alignment (clock_align.c) and
 * the metrics' collective matching and pipeline waits all start from.
 */
#include <stdlib.h>

#include "ssa_model.h"

int ssa_cmp_coll_member(const void *pa, const void *pb) {
  const ssa_coll_member *a = pa, *b = pb;
  if (a->comm_id != b->comm_id) return a->comm_id < b->comm_id ? -1 : 1;
  if (a->seq != b->seq) return a->seq < b->seq ? -1 : 1;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return a->coll_idx < b->coll_idx ? -1 : a->coll_idx > b->coll_idx;
}

int ssa_run_coll_members(const ssa_run *run, ssa_coll_member **out, size_t *n) {
  size_t count = 0;
  for (size_t i = 0; i < run->nranks; i++)
    count += run->ranks[i].ncolls;
  *out = NULL;
  *n = 0;
  if (count == 0) return 0;
  ssa_coll_member *m = malloc(count * sizeof *m);
  if (!m) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < run->nranks; i++) {
    const ssa_rank *r = &run->ranks[i];
    for (size_t j = 0; j < r->ncolls; j++)
      m[(*n)++] = (ssa_coll_member){r->colls[j].comm_id, r->colls[j].seq, (uint32_t)i, (uint32_t)j};
  }
  ssa_sort_coll_members(m, count);
  *out = m;
  return 0;
}
