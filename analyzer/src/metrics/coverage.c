/*
 * coverage.c — streaming coverage of up to four activity sets (compute,
 * comm, copies, non-pipeline comm) over a window [t0, t1), measured in one
 * pass over a rank's ops in start order, with no interval lists kept.
 *
 * Why it works: ops arrive by non-decreasing start, so when an op starting at
 * s arrives, nothing that arrives later can cover time before s. The sweep
 * therefore accounts [pos, s) as soon as the op arrives, knowing only, per
 * set, the end of its open union interval (end[i]: the latest end of the
 * set's ops so far). Inside [pos, s) set i covers exactly [pos, end[i]), so
 * the time splits into at most five constant-coverage pieces, each added to
 * bucket[mask] (bit i = set i covers it). Every SPEC §4 quantity of a window
 * is a sum of buckets, all integer-exact.
 *
 * Many windows at once: the caller passes the sorted boundaries of all its
 * windows as query points; when the sweep passes a point it copies the
 * running buckets (time in [t0, point) by mask). A window [s, e) is then
 * at(e) - at(s), so the cost is one pass over the ops plus O(1) per window,
 * however much the windows overlap. `emit`, when set, receives each
 * constant-coverage piece (the exports' derived tracks: ssa_cover_replay).
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

void ssa_cover_init(ssa_cover *c, int nsets, int64_t t0, int64_t t1) {
  memset(c, 0, sizeof *c);
  c->nsets = nsets;
  c->t0 = t0;
  c->t1 = t1 > t0 ? t1 : t0;
  c->pos = t0;
  for (int i = 0; i < 4; i++)
    c->end[i] = INT64_MIN;
}

void ssa_cover_points(ssa_cover *c, const int64_t *points, size_t n, int64_t (*at)[16]) {
  c->points = points;
  c->npoints = n;
  c->next_point = 0;
  c->at = at;
}

static void record_points(ssa_cover *c) {
  while (c->next_point < c->npoints && c->points[c->next_point] <= c->pos) {
    memcpy(c->at[c->next_point], c->bucket, sizeof c->bucket);
    c->next_point++;
  }
}

void ssa_cover_advance(ssa_cover *c, int64_t t) {
  if (t > c->t1) t = c->t1;
  while (c->pos < t) {
    record_points(c);
    unsigned mask = 0;
    int64_t next = t;
    for (int i = 0; i < 4; i++) { /* unused sets keep end = INT64_MIN */
      if (c->end[i] > c->pos) {
        mask |= 1u << i;
        if (c->end[i] < next) next = c->end[i];
      }
    }
    if (c->next_point < c->npoints && c->points[c->next_point] < next)
      next = c->points[c->next_point];
    c->bucket[mask] += next - c->pos;
    if (c->emit) c->emit(c->ctx, c->pos, next, mask);
    c->pos = next;
  }
}

void ssa_cover_flush_pending(ssa_cover *c, int64_t t) {
  int k = 0;
  while (k < c->npend && c->pend_s[k] <= t) {
    ssa_cover_add(c, c->pend_set[k], c->pend_s[k], c->pend_e[k]);
    k++;
  }
  if (k == 0) return;
  memmove(c->pend_s, c->pend_s + k, (size_t)(c->npend - k) * sizeof *c->pend_s);
  memmove(c->pend_e, c->pend_e + k, (size_t)(c->npend - k) * sizeof *c->pend_e);
  memmove(c->pend_set, c->pend_set + k, (size_t)(c->npend - k) * sizeof *c->pend_set);
  c->npend -= k;
}

void ssa_cover_defer(ssa_cover *c, int set, int64_t s, int64_t e) {
  if (c->npend == SSA_COVER_PENDING) { /* full (not seen in practice): from the op's start */
    if (e > c->end[set]) c->end[set] = e;
    return;
  }
  int k = c->npend++;
  while (k > 0 && c->pend_s[k - 1] > s) {
    c->pend_s[k] = c->pend_s[k - 1];
    c->pend_e[k] = c->pend_e[k - 1];
    c->pend_set[k] = c->pend_set[k - 1];
    k--;
  }
  c->pend_s[k] = s;
  c->pend_e[k] = e;
  c->pend_set[k] = set;
}

void ssa_cover_finish(ssa_cover *c) {
  ssa_cover_flush_pending(c, INT64_MAX);
  ssa_cover_advance(c, c->t1);
  while (c->next_point < c->npoints) { /* points at or beyond t1 */
    memcpy(c->at[c->next_point], c->bucket, sizeof c->bucket);
    c->next_point++;
  }
}

int ssa_op_is_pipeline_comm(const ssa_rank *r, const ssa_op *o, int pipeline) {
  if (o->coll != SSA_NONE) return (r->colls[o->coll].flags & STEPSCOPE_COLL_F_PIPELINE) != 0;
  if (!pipeline) return 0;
  if (o->kind == SSA_OP_KERNEL) return ssa_is_nccl_p2p_kernel_name(ssa_rank_str(r, o->name));
  /* a CPU-only trace's host timeline (kineto_host.c): PyTorch's p2p calls and gloo's ranges */
  return o->kind == SSA_OP_HOST && o->cls == SSA_CLS_COMM &&
         ssa_host_p2p_call(ssa_rank_str(r, o->name)) != 0;
}

void ssa_cover_rank(ssa_cover *c, const ssa_rank *r, int pipeline) {
  for (size_t i = 0; i < r->nops; i++)
    ssa_cover_op(c, r, &r->ops[i], pipeline);
  ssa_cover_finish(c);
}

void ssa_cover_replay(const ssa_rank_result *rr,
                      void (*emit)(void *ctx, int64_t s, int64_t e, unsigned mask), void *ctx) {
  if (rr->totals.end <= rr->totals.start) return;
  ssa_cover cov;
  ssa_cover_init(&cov, 4, rr->totals.start, rr->totals.end);
  cov.emit = emit;
  cov.ctx = ctx;
  cov.wait_end = rr->coll_wait_end;
  ssa_cover_rank(&cov, rr->rank, rr->pipeline);
}

int64_t *ssa_window_points(const ssa_rank_result *rr, size_t *n) {
  size_t np = 0;
  int64_t *points = malloc((2 * rr->nsteps + 2) * sizeof *points);
  if (!points) return NULL;
  points[np++] = rr->totals.start;
  points[np++] = rr->totals.end;
  for (size_t i = 0; i < rr->nsteps; i++) {
    points[np++] = rr->windows[i].start;
    points[np++] = rr->windows[i].end;
  }
  qsort(points, np, sizeof *points, ssa_cmp_i64);
  size_t u = 0;
  for (size_t i = 0; i < np; i++)
    if (u == 0 || points[i] != points[u - 1]) points[u++] = points[i];
  *n = u;
  return points;
}
