/*
 * ssa_op_stage.h — ops staged per lane while a source reads a rank, then
 * merged into the rank's op array already in ssa_rank_finish's order.
 *
 * A trace delivers each device stream's work in order (start times rise on
 * a stream) but interleaves the streams, so a rank's ops as read are far
 * from sorted when one stream lags another, and sorting them costs more
 * than reading them. A source that stages its ops here instead keeps one
 * array per lane, notes whether each lane stayed in order (a lane that did
 * not is sorted on its own before the merge), and ssa_op_stage_merge
 * k-way-merges the lanes into r->ops, handing the pages of consumed input
 * back to the system as it goes, so the peak stays near one copy of the
 * ops. The result is in the order of ssa_cmp_ops, so the sort in finish
 * finds the ops in order after one linear check. (Its last tie-break looks
 * at fields that finish fills in later; in the rare case that changes the
 * order of two ops, that check sees it and the sort puts them right, so the
 * model is the same as with unstaged ops whatever happens.)
 *
 * A host op that executed a collective is staged with `coll` holding the
 * index of its oplink (ssa_op_stage_link); the merge writes the op's final
 * index into that oplink and resets `coll` to SSA_NONE, so link_collectives
 * in finish sees exactly what ssa_rank_add_record would have built.
 */
#ifndef SSA_OP_STAGE_H
#define SSA_OP_STAGE_H

#include "ssa_model.h"

typedef struct ssa_lane_ops {
  ssa_op *ops;
  size_t n, cap;
  int out_of_order;  /* an op started before its predecessor on the lane */
  size_t prefaulted; /* ops[0, prefaulted) have been faulted in */
} ssa_lane_ops;

typedef struct ssa_op_stage {
  ssa_lane_ops *lanes; /* indexed by the rank's lane index */
  uint32_t nlanes;
  size_t reserve; /* capacity a lane gets at its first op (0: grow from small) */
  int borrowed;   /* the lanes are the thread's kept arrays (op_stage_cache.c) */
} ssa_op_stage;

/* Starts a stage: with `reserve` (a big file: each lane gets that capacity at its first op, and
 * the biggest lane's array becomes the rank's ops), or without (a small file: the lanes are the
 * arrays this thread kept from its last small file, and the merge copies the ops into an array
 * of their exact size). */
void ssa_op_stage_begin(ssa_op_stage *st, size_t reserve);
void ssa_op_stage_free(ssa_op_stage *st);
/* The thread's kept lane arrays (op_stage_cache.c): moved into an empty stage, and given back
 * emptied (lanes over the cache's bound freed); the stage is cleared. A thread keeps at most
 * SSA_OP_STAGE_CACHE_MAX bytes of them (its lane array and every kept lane's ops together). */
#define SSA_OP_STAGE_CACHE_MAX ((size_t)8 << 20)
void ssa_op_stage_cache_take(ssa_op_stage *st);
void ssa_op_stage_cache_give(ssa_op_stage *st);
/* Makes room for lane `lane`; 0 or STEPSCOPE_E_NOMEM. */
int ssa_op_stage_reserve_lane(ssa_op_stage *st, uint32_t lane);
/* Grows a lane's array by at least one element (to `reserve` elements
 * at once when it is empty); 0 or STEPSCOPE_E_NOMEM. */
int ssa_op_stage_grow(ssa_lane_ops *l, size_t reserve);
/* Merges every lane into r->ops (which must be empty), in ssa_cmp_ops
 * order, resolves pending oplinks and frees the stage. 0 or STEPSCOPE_E_NOMEM (the stage is freed
 * either way). */
int ssa_op_stage_merge(ssa_op_stage *st, ssa_rank *r);

/* Appends an op to its lane (ssa_op_make, as push_op in rank_builder.c);
 * `coll` is SSA_NONE or a pending oplink index. */
static inline int ssa_op_stage_push(ssa_op_stage *st, uint32_t lane, int64_t s, int64_t e,
                                    uint64_t corr, uint64_t bytes, uint32_t name, uint8_t kind,
                                    uint8_t cls, uint32_t coll) {
  if (lane >= st->nlanes && ssa_op_stage_reserve_lane(st, lane)) return STEPSCOPE_E_NOMEM;
  ssa_lane_ops *l = &st->lanes[lane];
  if (l->n == l->cap && ssa_op_stage_grow(l, st->reserve)) return STEPSCOPE_E_NOMEM;
  if (l->n >= l->prefaulted)
    l->prefaulted = ssa_prefault_ahead(l->ops, sizeof *l->ops, l->n, l->cap);
  ssa_op *o = &l->ops[l->n];
  *o = ssa_op_make(s, e, corr, bytes, name, coll, lane, kind, cls);
  if (l->n > 0 && !l->out_of_order) {
    const ssa_op *p = o - 1;
    if (p->start > s || (p->start == s && ssa_cmp_ops(p, o) > 0)) l->out_of_order = 1;
  }
  l->n++;
  return 0;
}

#endif
