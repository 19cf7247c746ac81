/*
 * op_stage.c — the per-lane op stage of ssa_op_stage.h: growth of the lane
 * arrays and the k-way merge that turns them into the rank's op array.
 *
 * The merge writes into the biggest lane's own array, extended to the total
 * (realloc; big blocks grow by mremap without a copy), from the end
 * backwards: the next slot written is always at or after the biggest lane's
 * last unread op, so nothing is overwritten before it is read, and only
 * the other lanes' ops touch new pages. Two lanes (the common case: a
 * compute and a communication stream) take a plain two-way merge, more a
 * binary max-heap of lanes keyed by each lane's last unmerged op. Input of
 * the other lanes that has been consumed is returned to the system in steps
 * of RELEASE bytes (madvise DONTNEED on whole 2 MiB units inside the
 * consumed part), so input and output together stay near one copy of the
 * ops instead of two. A lane whose ops arrived out of order is first sorted
 * by itself (sort.c); one lane alone becomes the op array without a copy.
 * That is for big files (a stage begun with a reservation); a small file's
 * stage borrows the lane arrays its thread kept from the last one
 * (op_stage_cache.c), and the merge writes the ops into a new array of their
 * exact size, leaving the lanes to the thread.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ssa_op_stage.h"

#define RELEASE (4u << 20) /* bytes of consumed input handed back at a time */

void ssa_op_stage_begin(ssa_op_stage *st, size_t reserve) {
  memset(st, 0, sizeof *st);
  st->reserve = reserve;
  if (reserve) return;
  st->borrowed = 1;
  ssa_op_stage_cache_take(st);
}

void ssa_op_stage_free(ssa_op_stage *st) {
  if (st->borrowed) {
    ssa_op_stage_cache_give(st);
    st->borrowed = 0;
    return;
  }
  for (uint32_t i = 0; i < st->nlanes; i++)
    free(st->lanes[i].ops);
  free(st->lanes);
  st->lanes = NULL;
  st->nlanes = 0;
}

int ssa_op_stage_reserve_lane(ssa_op_stage *st, uint32_t lane) {
  if (lane < st->nlanes) return 0;
  uint32_t n = st->nlanes ? st->nlanes : 4;
  while (n <= lane)
    n *= 2;
  ssa_lane_ops *l = realloc(st->lanes, (size_t)n * sizeof *l);
  if (!l) return STEPSCOPE_E_NOMEM;
  memset(l + st->nlanes, 0, (size_t)(n - st->nlanes) * sizeof *l);
  st->lanes = l;
  st->nlanes = n;
  return 0;
}

int ssa_op_stage_grow(ssa_lane_ops *l, size_t reserve) {
  if (l->cap == 0 && reserve > l->n + 1 &&
      ssa_grow((void **)&l->ops, &l->cap, reserve, sizeof *l->ops) == 0)
    return 0; /* else (no room for the reservation) grow as usual */
  return ssa_grow((void **)&l->ops, &l->cap, l->n + 1, sizeof *l->ops) ? STEPSCOPE_E_NOMEM : 0;
}

/* Hands back the whole pages of ops[from, to) (element indices), in units
 * of 2 MiB so that huge pages (grow.c) are released whole. */
static void release(ssa_op *ops, size_t from, size_t to) {
  const uintptr_t page = (uintptr_t)2 << 20;
  uintptr_t a = (uintptr_t)(ops + from), b = (uintptr_t)(ops + to);
  a = (a + page - 1) & ~(uintptr_t)(page - 1);
  b &= ~(uintptr_t)(page - 1);
  if (b > a) madvise((void *)a, b - a, MADV_DONTNEED); /* advisory: failure only costs memory */
}

static inline int op_before(const ssa_op *a, const ssa_op *b) {
  if (a->start != b->start) return a->start < b->start;
  return ssa_cmp_ops(a, b) < 0;
}

/* A lane being consumed from its end: ops[0, left) remain; ops[left,
 * released) may still be handed back. */
typedef struct lane_cursor {
  ssa_op *ops;
  size_t left, released;
  int is_out; /* the lane whose array becomes the output */
} lane_cursor;

static inline const ssa_op *last_of(const lane_cursor *c) {
  return &c->ops[c->left - 1];
}

/* Moves a lane's last op to out[o]. */
static inline void take(lane_cursor *c, ssa_op *out, size_t o, ssa_rank *r) {
  const ssa_op *src = &c->ops[--c->left];
  if (src != &out[o]) out[o] = *src;
  if (out[o].coll != SSA_NONE) { /* a pending oplink */
    r->oplinks[out[o].coll].op = (uint32_t)o;
    out[o].coll = SSA_NONE;
  }
  if (!c->is_out && (c->released - c->left) * sizeof(ssa_op) >= RELEASE) {
    release(c->ops, c->left, c->released);
    c->released = c->left;
  }
}

/* Max-heap of lanes by their last op. */
static void sift_down(uint32_t *heap, size_t n, size_t i, const lane_cursor *cur) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && op_before(last_of(&cur[heap[m]]), last_of(&cur[heap[l]]))) m = l;
    if (l + 1 < n && op_before(last_of(&cur[heap[m]]), last_of(&cur[heap[l + 1]]))) m = l + 1;
    if (m == i) return;
    uint32_t t = heap[i];
    heap[i] = heap[m];
    heap[m] = t;
    i = m;
  }
}

static void resolve_links(ssa_op *ops, size_t n, ssa_rank *r) {
  for (size_t i = 0; r->noplinks && i < n; i++)
    if (ops[i].coll != SSA_NONE) {
      r->oplinks[ops[i].coll].op = (uint32_t)i;
      ops[i].coll = SSA_NONE;
    }
}

int ssa_op_stage_merge(ssa_op_stage *st, ssa_rank *r) {
  int rc = 0;
  size_t total = 0, k = 0;
  uint32_t biggest = 0;
  for (uint32_t i = 0; i < st->nlanes; i++) {
    ssa_lane_ops *l = &st->lanes[i];
    if (!l->n) continue;
    if (l->out_of_order) ssa_sort_by_start(l->ops, l->n, sizeof *l->ops, ssa_cmp_ops);
    total += l->n;
    if (l->n > st->lanes[biggest].n) biggest = i;
    k++;
  }
  if (k == 0 || r->nops != 0) {
    ssa_op_stage_free(st);
    return k == 0 ? 0 : STEPSCOPE_E_ARGUMENT;
  }
  /* the biggest lane's array, extended, becomes the op array: merging from
   * the end never overwrites one of its ops before reading it, and only the
   * other lanes' ops need new pages; borrowed lanes stay with the thread, and
   * the ops go to a new array of their exact size */
  ssa_lane_ops *big = &st->lanes[biggest];
  ssa_op *out = st->borrowed ? malloc(total * sizeof *out) : NULL;
  size_t out_cap = total;
  if (st->borrowed ? !out : ssa_grow((void **)&big->ops, &big->cap, total, sizeof *big->ops)) {
    ssa_op_stage_free(st);
    return STEPSCOPE_E_NOMEM;
  }
  if (!st->borrowed) {
    out = big->ops;
    out_cap = big->cap;
    /* the extension is written first (the merge runs from the end): fault it
     * in with one call */
    size_t big_n = big->n;
    while (big_n < total)
      big_n = ssa_prefault_ahead(out, sizeof *out, big_n, total);
  }
  if (k == 1) {
    if (out != big->ops) memcpy(out, big->ops, total * sizeof *out);
    resolve_links(out, total, r);
  } else {
    lane_cursor *cur = calloc(k, sizeof *cur);
    uint32_t *heap = malloc(k * sizeof *heap);
    if (!cur || !heap) {
      free(cur);
      free(heap);
      ssa_op_stage_free(st);
      return STEPSCOPE_E_NOMEM;
    }
    k = 0;
    for (uint32_t i = 0; i < st->nlanes; i++)
      if (st->lanes[i].n)
        cur[k++] = (lane_cursor){st->lanes[i].ops, st->lanes[i].n, st->lanes[i].n,
                                 st->lanes[i].ops == out};
    size_t o = total;
    if (k == 2) {
      lane_cursor *a = &cur[0], *b = &cur[1];
      while (a->left && b->left) {
        if (op_before(last_of(a), last_of(b)))
          take(b, out, --o, r);
        else
          take(a, out, --o, r);
      }
      while (a->left)
        take(a, out, --o, r);
      while (b->left)
        take(b, out, --o, r);
    } else {
      size_t n = k;
      for (size_t i = 0; i < n; i++)
        heap[i] = (uint32_t)i;
      for (size_t i = n / 2; i-- > 0;)
        sift_down(heap, n, i, cur);
      while (n > 0) {
        lane_cursor *c = &cur[heap[0]];
        take(c, out, --o, r);
        if (!c->left) heap[0] = heap[--n];
        if (n > 1) sift_down(heap, n, 0, cur);
      }
    }
    free(cur);
    free(heap);
  }
  free(r->ops);
  r->ops = out;
  r->nops = total;
  r->ops_cap = out_cap;
  if (big->ops == out) big->ops = NULL;
  ssa_op_stage_free(st);
  return rc;
}
