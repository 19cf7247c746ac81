/*
 * slice_lanes.c — greedy interval lanes for the exports (ssa_lanes.h): which
 * lane of its track each slice goes to so that slices on one lane nest, and
 * the merged walk over a rank's ranges, API calls and ops that feeds it.
 */
#include <stdlib.h>

#include "ssa_lanes.h"

void ssa_lanes_init(ssa_lanes *l) {
  l->sub = NULL;
  l->nsub = l->cap = 0;
  l->on_close = NULL;
  l->ctx = NULL;
}

void ssa_lanes_free(ssa_lanes *l) {
  for (uint32_t k = 0; k < l->nsub; k++)
    free(l->sub[k].ends);
  free(l->sub);
  l->sub = NULL;
  l->nsub = l->cap = 0;
}

void ssa_lanes_close_until(ssa_lanes *l, int64_t t) {
  for (;;) {
    /* the open slice that ends first: the top of some stack (a stack's top
     * is its innermost slice, which ends first within it) */
    uint32_t best = UINT32_MAX;
    int64_t best_end = INT64_MAX;
    for (uint32_t k = 0; k < l->nsub; k++) {
      const ssa_lane_stack *st = &l->sub[k];
      if (st->n && st->ends[st->n - 1] <= t &&
          (best == UINT32_MAX || st->ends[st->n - 1] < best_end)) {
        best = k;
        best_end = st->ends[st->n - 1];
      }
    }
    if (best == UINT32_MAX) return;
    l->sub[best].n--;
    if (l->on_close) l->on_close(l->ctx, best, best_end);
  }
}

static int push(ssa_lane_stack *st, int64_t e) {
  if (ssa_grow((void **)&st->ends, &st->cap, st->n + 1, sizeof *st->ends)) return -1;
  st->ends[st->n++] = e;
  return 0;
}

int ssa_lanes_place(ssa_lanes *l, int64_t s, int64_t e) {
  if (e < s) e = s;
  ssa_lanes_close_until(l, s);
  for (uint32_t k = 0; k < l->nsub; k++) {
    ssa_lane_stack *st = &l->sub[k];
    /* open slices here all started at or before s and end after s: the new
     * one nests when it ends no later than the innermost */
    if (st->n == 0 || e <= st->ends[st->n - 1]) return push(st, e) ? -1 : (int)k;
  }
  if (ssa_grow((void **)&l->sub, &l->cap, l->nsub + 1, sizeof *l->sub)) return -1;
  ssa_lane_stack *st = &l->sub[l->nsub];
  st->ends = NULL;
  st->n = st->cap = 0;
  if (push(st, e)) return -1;
  return (int)l->nsub++;
}

int ssa_slice_next(ssa_slice_iter *it, ssa_slice *out) {
  const ssa_rank *r = it->r;
  int have = 0;
  if (it->ir < r->nranges) {
    const ssa_range *g = &r->ranges[it->ir];
    *out = (ssa_slice){SSA_SLICE_RANGE, it->ir, g->start, g->end, g->lane};
    have = 1;
  }
  if (it->ia < r->napis) {
    const ssa_api *p = &r->apis[it->ia];
    if (!have || p->start < out->start || (p->start == out->start && p->end > out->end)) {
      *out = (ssa_slice){SSA_SLICE_API, it->ia, p->start, p->end, p->lane};
      have = 1;
    }
  }
  if (it->io < r->nops) {
    const ssa_op *p = &r->ops[it->io];
    if (!have || p->start < out->start || (p->start == out->start && p->end > out->end)) {
      *out = (ssa_slice){SSA_SLICE_OP, it->io, p->start, p->end, p->lane};
      have = 1;
    }
  }
  if (!have) return 0;
  if (out->kind == SSA_SLICE_RANGE)
    it->ir++;
  else if (out->kind == SSA_SLICE_API)
    it->ia++;
  else
    it->io++;
  return 1;
}
