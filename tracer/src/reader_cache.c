/*
 * reader_cache.c — one cached set of reader resources (zstd decompression
 * context, input buffer, frame buffer) per thread; see reader_cache.h.
 *
 * The entry is the thread's (sc_thread_cache.h), freed when the thread
 * exits. A context is reset (session only: its parameters stay) before it is
 * cached, so a reader that stopped in the middle of a frame, after an
 * error or early close, hands back a clean one. Frame buffers larger than
 * CACHE_FRAME_MAX are freed rather than kept, so that one odd huge frame
 * does not pin memory in every loader thread.
 */
#include "reader_cache.h"

#include <stdlib.h>

#include "sc_thread_cache.h"

#define CACHE_FRAME_MAX (16u << 20)

static _Thread_local reader_resources *thread_entry;

static void resources_free(reader_resources *res) {
  ZSTD_freeDCtx(res->dctx);
  free(res->in);
  free(res->frame);
}

static void entry_destroy(void *p) {
  reader_resources *e = p;
  if (!e) return;
  if (thread_entry == e) thread_entry = NULL;
  resources_free(e);
  free(e);
}

static sc_thread_cache resources_cache = SC_THREAD_CACHE_INIT(entry_destroy);

int reader_resources_take(reader_resources *res, int window_log_max) {
  *res = (reader_resources){0};
  reader_resources *e = thread_entry;
  if (e && e->dctx && e->in) {
    *res = *e;
    *e = (reader_resources){0};
    return 0;
  }
  res->dctx = ZSTD_createDCtx();
  res->in = malloc(READER_INPUT_CAP);
  if (!res->dctx || !res->in ||
      ZSTD_isError(ZSTD_DCtx_setParameter(res->dctx, ZSTD_d_windowLogMax, window_log_max))) {
    resources_free(res);
    *res = (reader_resources){0};
    return -1;
  }
  return 0;
}

void reader_resources_give(reader_resources *res) {
  if (res->frame_cap > CACHE_FRAME_MAX) {
    free(res->frame);
    res->frame = NULL;
    res->frame_cap = 0;
  }
  int cacheable =
      res->dctx && res->in && !ZSTD_isError(ZSTD_DCtx_reset(res->dctx, ZSTD_reset_session_only));
  if (cacheable) {
    reader_resources *e = thread_entry;
    if (!e) e = thread_entry = sc_thread_cache_new(&resources_cache, sizeof *e);
    if (e && !e->dctx) { /* the slot is empty: keep these */
      *e = *res;
      *res = (reader_resources){0};
      return;
    }
  }
  resources_free(res);
  *res = (reader_resources){0};
}
