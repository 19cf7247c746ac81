/*
 * thread_cache.c — one cached entry per thread (sc_thread_cache.h). The pthread key of a
 * cache is made on first use, under one lock shared by every cache (pthread_once takes no
 * argument, and a cache is a value the user declares).
 */
#include "sc_thread_cache.h"

#include <stdlib.h>

static pthread_mutex_t key_lock = PTHREAD_MUTEX_INITIALIZER;

static int key_ready(sc_thread_cache *c) {
  int state = __atomic_load_n(&c->key_state, __ATOMIC_ACQUIRE);
  if (state) return state > 0;
  pthread_mutex_lock(&key_lock);
  if (!__atomic_load_n(&c->key_state, __ATOMIC_RELAXED))
    __atomic_store_n(&c->key_state, pthread_key_create(&c->key, c->destroy) == 0 ? 1 : -1,
                     __ATOMIC_RELEASE);
  state = __atomic_load_n(&c->key_state, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&key_lock);
  return state > 0;
}

void *sc_thread_cache_new(sc_thread_cache *c, size_t size) {
  if (!key_ready(c)) return NULL;
  void *e = calloc(1, size);
  if (e && pthread_setspecific(c->key, e) != 0) {
    free(e);
    e = NULL;
  }
  return e;
}
