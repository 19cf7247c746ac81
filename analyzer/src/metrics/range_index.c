/*
 * range_index.c — a rank's ranges of one domain (the Kineto importer's "cpu_op" or
 * "python_function") as stacks per thread (ssa_ops.h): sorted by thread, start, longer first,
 * each with the range that encloses it, and the innermost one around a time.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_ops.h"

static int cmp_range(const void *pa, const void *pb, void *ctx) {
  const ssa_rank *r = ctx;
  const ssa_range *a = &r->ranges[*(const uint32_t *)pa];
  const ssa_range *b = &r->ranges[*(const uint32_t *)pb];
  if (a->lane != b->lane) return a->lane < b->lane ? -1 : 1;
  if (a->start != b->start) return a->start < b->start ? -1 : 1;
  if (a->end != b->end) return a->end > b->end ? -1 : 1;
  return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

int ssa_range_index_build(const ssa_rank *r, const char *domain, ssa_range_index *c) {
  memset(c, 0, sizeof *c);
  c->idx = malloc((r->nranges ? r->nranges : 1) * sizeof *c->idx);
  c->parent = malloc((r->nranges ? r->nranges : 1) * sizeof *c->parent);
  if (!c->idx || !c->parent) return -1;
  uint32_t dom = SSA_NONE, other = SSA_NONE; /* the domain's id, once told */
  for (size_t i = 0; i < r->nranges; i++) {
    uint32_t d = r->ranges[i].domain;
    if (d != dom && d != other) {
      if (!strcmp(ssa_rank_str(r, d), domain))
        dom = d;
      else
        other = d;
    }
    if (d == dom) c->idx[c->n++] = (uint32_t)i;
  }
  qsort_r(c->idx, c->n, sizeof *c->idx, cmp_range, (void *)r);
  uint32_t *stack = malloc((c->n ? c->n : 1) * sizeof *stack);
  if (!stack) return -1;
  size_t top = 0;
  for (size_t i = 0; i < c->n; i++) {
    const ssa_range *g = &r->ranges[c->idx[i]];
    while (top && (r->ranges[c->idx[stack[top - 1]]].lane != g->lane ||
                   r->ranges[c->idx[stack[top - 1]]].end < g->end))
      top--;
    c->parent[i] = top ? stack[top - 1] : SSA_NONE;
    stack[top++] = (uint32_t)i;
  }
  free(stack);
  return 0;
}

uint32_t ssa_range_index_around(const ssa_rank *r, const ssa_range_index *c, uint16_t lane,
                                int64_t t) {
  size_t lo = 0, hi = c->n;
  while (lo < hi) { /* the first after (lane, t) */
    size_t mid = lo + (hi - lo) / 2;
    const ssa_range *g = &r->ranges[c->idx[mid]];
    if (g->lane < lane || (g->lane == lane && g->start <= t))
      lo = mid + 1;
    else
      hi = mid;
  }
  if (!lo) return SSA_NONE;
  uint32_t i = (uint32_t)(lo - 1);
  if (r->ranges[c->idx[i]].lane != lane) return SSA_NONE;
  while (i != SSA_NONE && r->ranges[c->idx[i]].end < t)
    i = c->parent[i];
  return i;
}

void ssa_range_index_free(ssa_range_index *c) {
  free(c->idx);
  free(c->parent);
  memset(c, 0, sizeof *c);
}
