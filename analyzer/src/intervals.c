/*
 * intervals.c — interval sets as sorted arrays of disjoint [s, e) intervals,
 * and the sweep that measures unions, intersections and differences of
 * several sets in one pass.
 *
 * Lists are built from activity already sorted by start: a new interval
 * either extends the last one (it starts before or where the last ends) or
 * opens a new one, so a list is the exact union of what was added.
 *
 * ssa_sweep walks up to four lists at once over a window: at each step the
 * next boundary is the nearest start or end among the lists' current
 * intervals, and the time up to it is added to the bucket of the set of
 * lists covering it (a 4-bit mask). Every SPEC §4 quantity is a sum of
 * buckets, so all of them come from one integer-exact pass: e.g. overlap =
 * buckets whose mask has both the compute and the comm bit.
 */
#include <stdlib.h>

#include "ssa_analysis.h"

int ssa_interval_list_add(ssa_interval_list *l, int64_t s, int64_t e) {
  if (e <= s) return 0;
  if (l->n > 0 && s <= l->v[l->n - 1].e) {
    if (e > l->v[l->n - 1].e) l->v[l->n - 1].e = e;
    return 0;
  }
  if (ssa_grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) return STEPSCOPE_E_NOMEM;
  l->v[l->n].s = s;
  l->v[l->n].e = e;
  l->n++;
  return 0;
}

void ssa_interval_list_free(ssa_interval_list *l) {
  free(l->v);
  l->v = NULL;
  l->n = l->cap = 0;
}

/* First interval whose end is after t. */
static size_t first_after(const ssa_interval_list *l, int64_t t) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (l->v[mid].e <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

void ssa_sweep(const ssa_interval_list *const *lists, int nlists, int64_t t0, int64_t t1,
               int64_t bucket[16],
               void (*emit)(void *ctx, int64_t s, int64_t e, unsigned mask), void *ctx) {
  size_t pos[4];
  for (int i = 0; i < nlists; i++) pos[i] = first_after(lists[i], t0);
  int64_t t = t0;
  while (t < t1) {
    unsigned mask = 0;
    int64_t next = t1;
    for (int i = 0; i < nlists; i++) {
      const ssa_interval_list *l = lists[i];
      while (pos[i] < l->n && l->v[pos[i]].e <= t) pos[i]++;
      if (pos[i] >= l->n) continue;
      const ssa_interval *iv = &l->v[pos[i]];
      if (iv->s <= t) {
        mask |= 1u << i;
        if (iv->e < next) next = iv->e;
      } else if (iv->s < next) {
        next = iv->s;
      }
    }
    bucket[mask] += next - t;
    if (emit) emit(ctx, t, next, mask);
    t = next;
  }
}
