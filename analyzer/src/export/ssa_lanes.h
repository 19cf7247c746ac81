/*
 * ssa_lanes.h — slices of one track that partially overlap go to extra
 * lanes, so that every track of an export holds properly nested slices
 * (Perfetto builds its slice stacks from nesting and mis-draws anything
 * else). Shared by the Chrome-JSON and the Perfetto writers (slice_lanes.c).
 *
 * Greedy interval lanes: slices arrive in start order (longer first on
 * ties); a slice goes in the first lane where it nests properly in the
 * innermost open slice, or where every open slice has ended by its start;
 * otherwise a new lane is opened. Each lane keeps a stack of the ends of its
 * open slices, so memory grows with nesting depth and overlap, never with
 * the number of slices.
 *
 * The iterator below walks a rank's host ranges, host API calls and device
 * ops together in that order (each array is sorted by start, longer first),
 * so that one pass places every slice of a lane, whichever array it is in.
 */
#ifndef SSA_LANES_H
#define SSA_LANES_H

#include <stdint.h>

#include "ssa_model.h"

typedef struct ssa_lane_stack {
  int64_t *ends; /* ends of the open slices, outermost first */
  uint32_t n;
  size_t cap;
} ssa_lane_stack;

typedef struct ssa_lanes {
  ssa_lane_stack *sub; /* sub[0] is the track itself, sub[k] its lane k+1 */
  uint32_t nsub;
  size_t cap;
  /* called for every slice that closes, in time order (inner first on ties) */
  void (*on_close)(void *ctx, uint32_t sub, int64_t end);
  void *ctx;
} ssa_lanes;

void ssa_lanes_init(ssa_lanes *l);
void ssa_lanes_free(ssa_lanes *l);
/* Closes (on_close) every open slice that ends at or before t, in end order. */
void ssa_lanes_close_until(ssa_lanes *l, int64_t t);
/* Places slice [s, e) (e < s is taken as e = s) after closing what ends by s;
 * returns its lane (0 = the track itself, k = extra lane k+1), or -1 when out
 * of memory. Calls must come in non-decreasing s, longer first on ties. */
int ssa_lanes_place(ssa_lanes *l, int64_t s, int64_t e);
/* Closes every open slice. */
static inline void ssa_lanes_finish(ssa_lanes *l) {
  ssa_lanes_close_until(l, INT64_MAX);
}

/* ---- a rank's slices in start order ---- */
typedef enum ssa_slice_kind { SSA_SLICE_RANGE, SSA_SLICE_API, SSA_SLICE_OP } ssa_slice_kind;

typedef struct ssa_slice {
  ssa_slice_kind kind;
  size_t index; /* into ranges, apis or ops */
  int64_t start, end;
  uint32_t lane; /* the rank's lane */
} ssa_slice;

typedef struct ssa_slice_iter {
  const ssa_rank *r;
  size_t ir, ia, io;
} ssa_slice_iter;

static inline void ssa_slice_iter_init(ssa_slice_iter *it, const ssa_rank *r) {
  it->r = r;
  it->ir = it->ia = it->io = 0;
}
/* The next slice by (start, longer first; ranges before calls before ops on
 * ties); 0 when none is left. */
int ssa_slice_next(ssa_slice_iter *it, ssa_slice *out);

#endif
