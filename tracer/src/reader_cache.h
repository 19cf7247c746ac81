/*
 * reader_cache.h — the trace reader's reusable working memory.
 *
 * Opening a reader used to create a zstd decompression context and allocate
 * its input and frame buffers, and closing it freed them again: for runs of
 * many small rank files that setup was a large part of the reading cost. A
 * reader now takes these resources from a one-entry cache of the calling
 * thread when it opens and hands them back when it closes; only when the
 * thread has none (its first reader, or several readers open at once) are
 * new ones made. A thread's cached entry is freed when the thread exits.
 * Readers are used from several loader threads at once: each thread has its
 * own entry, so no locking is needed.
 */
#ifndef STEPSCOPE_READER_CACHE_H
#define STEPSCOPE_READER_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <zstd.h>

typedef struct reader_resources {
  ZSTD_DCtx *dctx; /* reset, with the reader's parameters set */
  uint8_t *in;     /* compressed input buffer of READER_INPUT_CAP bytes */
  uint8_t *frame;  /* decompressed frame buffer (may be NULL) */
  size_t frame_cap;
} reader_resources;

#define READER_INPUT_CAP (4u << 20)

/* Fills *res from the thread's cache or fresh allocations; 0 ok, -1 out of
 * memory (then nothing is held). `window_log_max` is applied to new contexts
 * (cached ones already have it). */
int reader_resources_take(reader_resources *res, int window_log_max);

/* Returns *res to the thread's cache (or frees it when the cache is full or
 * the frame buffer is very large); *res is cleared. */
void reader_resources_give(reader_resources *res);

#endif
