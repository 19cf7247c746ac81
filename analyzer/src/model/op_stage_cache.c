/*
 * op_stage_cache.c — the lane arrays of the op stage (ssa_op_stage.h) that a
 * loader thread keeps from one small rank file to the next.
 *
 * Staging a small file's ops in arrays that start small and grow by realloc
 * copied each lane about one and a half times over and allocated as it went;
 * with a thousand files of a thousand events that was a visible part of the
 * load. A small file's stage therefore borrows the lane arrays its thread used
 * for the previous one (already faulted in and warm in the cache), and the
 * merge writes the rank's op array at its exact size. Only lanes up to
 * CACHE_LANE_MAX bytes are kept, and no more than SSA_OP_STAGE_CACHE_MAX bytes
 * in all (a small file on disk may be compressed: many lanes each just under
 * the lane bound pinned tens of MiB), so one odd file does not pin memory in
 * every loader thread. The entry is the thread's (sc_thread_cache.h), freed when
 * the thread exits, as the reader's buffers are (reader_cache.c).
 */
#include <stdlib.h>

#include "sc_thread_cache.h"
#include "ssa_op_stage.h"

#define CACHE_LANE_MAX ((size_t)1 << 20) /* bytes of one kept lane array */

static _Thread_local ssa_op_stage *thread_stage;

static void stage_destroy(void *p) {
  ssa_op_stage *e = p;
  if (!e) return;
  if (thread_stage == e) thread_stage = NULL;
  for (uint32_t i = 0; i < e->nlanes; i++)
    free(e->lanes[i].ops);
  free(e->lanes);
  free(e);
}

static sc_thread_cache stage_cache = SC_THREAD_CACHE_INIT(stage_destroy);

void ssa_op_stage_cache_take(ssa_op_stage *st) {
  ssa_op_stage *e = thread_stage;
  if (!e || !e->lanes) return;
  st->lanes = e->lanes;
  st->nlanes = e->nlanes;
  e->lanes = NULL;
  e->nlanes = 0;
}

void ssa_op_stage_cache_give(ssa_op_stage *st) {
  size_t kept = st->nlanes * sizeof *st->lanes; /* bytes the thread would keep */
  for (uint32_t i = 0; i < st->nlanes; i++) {
    ssa_lane_ops *l = &st->lanes[i];
    size_t bytes = l->cap * sizeof *l->ops;
    if (bytes > CACHE_LANE_MAX || kept + bytes > SSA_OP_STAGE_CACHE_MAX) {
      free(l->ops);
      l->ops = NULL;
      l->cap = 0;
    } else {
      kept += bytes;
    }
    l->n = 0;
    l->out_of_order = 0;
    l->prefaulted = 0;
  }
  ssa_op_stage *e = thread_stage;
  if (!e) e = thread_stage = sc_thread_cache_new(&stage_cache, sizeof *e);
  if (e && !e->lanes && kept <= SSA_OP_STAGE_CACHE_MAX) { /* the slot is empty: keep these */
    e->lanes = st->lanes;
    e->nlanes = st->nlanes;
  } else {
    for (uint32_t i = 0; i < st->nlanes; i++)
      free(st->lanes[i].ops);
    free(st->lanes);
  }
  st->lanes = NULL;
  st->nlanes = 0;
}
