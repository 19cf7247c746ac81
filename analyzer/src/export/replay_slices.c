/*
 * replay_slices.c — what both exports write for `export --replay` (ssa_export.h): a rank's
 * ops at their replayed (simulated) times, sorted the way the writers lay slices out (by
 * lane, then start, longer first), and the name and pid of the process that holds them, so
 * that the Chrome JSON and the Perfetto trace carry the same replay tracks.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ssa_export.h"
#include "replay.h"

const char *ssa_op_slice_name(const ssa_rank *r, const ssa_op *o) {
  const char *name = ssa_rank_str(r, o->name);
  if (name[0]) return name;
  return o->kind == SSA_OP_MEMCPY ? "memcpy" : o->kind == SSA_OP_MEMSET ? "memset" : "op";
}

int ssa_replay_pid(const ssa_analysis *a, const ssa_rank *r) {
  int top = 0; /* past every rank's pid (rank + 1) */
  for (size_t i = 0; i < a->nranks; i++)
    if (a->ranks[i].rank->rank + 1 > top) top = a->ranks[i].rank->rank + 1;
  return top + 1 + r->rank;
}

void ssa_replay_process_label(const ssa_analysis *a, const ssa_rank *r, char *buf, size_t n) {
  snprintf(buf, n, "%s (rank %d)", a->opt.export_replay->label, r->rank);
}

static int cmp_slice(const void *pa, const void *pb, void *ctx) {
  const ssa_rank *r = ctx;
  const ssa_replay_slice *x = pa, *y = pb;
  uint16_t lx = r->ops[x->op].lane, ly = r->ops[y->op].lane;
  if (lx != ly) return lx < ly ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->end != y->end) return x->end > y->end ? -1 : 1;
  return x->op < y->op ? -1 : x->op > y->op;
}

int ssa_replay_slices(const ssa_analysis *a, size_t i, ssa_replay_slice **out, size_t *n) {
  *out = NULL;
  *n = 0;
  const ssa_export_replay *x = a->opt.export_replay;
  if (!x || !x->replay || i >= x->replay->nranks || !x->replay->op_start[i]) return 0;
  const ssa_rank *r = a->ranks[i].rank;
  const int64_t *start = x->replay->op_start[i], *end = x->replay->op_end[i];
  ssa_replay_slice *v = malloc((r->nops ? r->nops : 1) * sizeof *v);
  if (!v) return -1;
  int64_t to_rank = -r->offset_ns; /* the replay's times are aligned */
  for (size_t k = 0; k < r->nops; k++)
    v[k] = (ssa_replay_slice){start[k] + to_rank, (end[k] > start[k] ? end[k] : start[k]) + to_rank,
                              (uint32_t)k};
  qsort_r(v, r->nops, sizeof *v, cmp_slice, (void *)r);
  *out = v;
  *n = r->nops;
  return 0;
}
