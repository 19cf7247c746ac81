/*
 * sc_thread_cache.h — one cached entry per thread, freed when the thread exits: what the
 * tracer's reader keeps between files (its zstd context and buffers, reader_cache.c) and the
 * analyzer's loader keeps between small rank files (its op stage's lane arrays,
 * op_stage_cache.c).
 *
 * The entry lives in the user's thread-local pointer (sc_thread_cache_new makes it); a pthread
 * key whose value is the same entry calls the user's destructor when the thread exits (the main
 * thread's entry is left to process exit, still reachable through the thread-local pointer). The
 * destructor must clear that pointer when it still names the entry.
 */
#ifndef SC_THREAD_CACHE_H
#define SC_THREAD_CACHE_H

#include <pthread.h>
#include <stddef.h>

typedef struct sc_thread_cache {
  void (*destroy)(void *entry); /* the thread's entry at its exit */
  pthread_key_t key;
  int key_state; /* 0 not made yet, 1 made, -1 could not be made (no caching then) */
} sc_thread_cache;

#define SC_THREAD_CACHE_INIT(destroy_fn)                                                           \
  { (destroy_fn), 0, 0 }

/* A new zeroed entry of `size` bytes for the calling thread, registered so that `destroy`
 * frees it when the thread exits; the caller keeps it in its thread-local pointer. NULL when
 * none can be made (out of memory, no key): the caller then does without a cache. */
void *sc_thread_cache_new(sc_thread_cache *c, size_t size);

#endif
