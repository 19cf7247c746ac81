/*
 * parallel_for.c — n independent jobs on a pool of threads (ssa_io.h): the
 * loader's one job per rank file, the analysis' one per rank. Each worker
 * takes the next job index from a shared counter until none is left, so a
 * long job never holds up the short ones behind it; the calling thread is
 * one of the workers, so the jobs all run even when no thread can be started.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "ssa_io.h"

typedef struct job_pool {
  void (*job)(void *ctx, size_t i);
  void *ctx;
  size_t n;
  atomic_size_t next;
} job_pool;

static void *work(void *arg) {
  job_pool *p = arg;
  for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
    p->job(p->ctx, i);
  return NULL;
}

size_t ssa_workers(size_t n, int threads) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  size_t w = threads > 0 ? (size_t)threads : (size_t)(cores > 0 ? cores : 1);
  if (w > n) w = n;
  return w ? w : 1;
}

void ssa_parallel_for(size_t n, size_t workers, void (*job)(void *ctx, size_t i), void *ctx) {
  job_pool p = {.job = job, .ctx = ctx, .n = n};
  atomic_init(&p.next, 0);
  pthread_t *th = workers > 1 ? calloc(workers - 1, sizeof *th) : NULL;
  size_t started = 0;
  while (th && started < workers - 1 && pthread_create(&th[started], NULL, work, &p) == 0)
    started++;
  work(&p);
  for (size_t i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  free(th);
}
