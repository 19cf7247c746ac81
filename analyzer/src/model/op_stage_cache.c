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
 * every loader thread. The entry lives in a thread-local variable; a pthread key
 * whose value is the same entry frees it when the thread exits (the main
 * thread's is left to process exit, still reachable), as reader_cache.c does
 * for the reader's buffers.
 */
#include <pthread.h>
#include <stdlib.h>

#include "ssa_op_stage.h"

#define CACHE_LANE_MAX ((size_t)1 << 20) /* bytes of one kept lane array */

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_key_ok;
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

static void cache_key_create(void) {
  cache_key_ok = pthread_key_create(&cache_key, stage_destroy) == 0;
}

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
  pthread_once(&cache_once, cache_key_create);
  ssa_op_stage *e = thread_stage;
  if (!e && cache_key_ok && (e = calloc(1, sizeof *e)) != NULL) {
    if (pthread_setspecific(cache_key, e) != 0) {
      free(e);
      e = NULL;
    }
    thread_stage = e;
  }
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
