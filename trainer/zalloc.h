/*
 * zalloc.h — a zeroed allocation that says why it failed, for the set-up functions of the
 * communicators and the rendezvous (comm_shm.c, cuda/comm_nccl.c, cuda/rendezvous.c), which
 * report an error as text in (err, errlen) and return NULL.
 */
#ifndef STEPSCOPE_TRAINER_ZALLOC_H
#define STEPSCOPE_TRAINER_ZALLOC_H

#include <stdio.h>
#include <stdlib.h>

/* calloc(1, size); NULL with "out of memory" in err when it fails. */
static inline void *zalloc(size_t size, char *err, size_t errlen) {
  void *p = calloc(1, size);
  if (!p) snprintf(err, errlen, "out of memory");
  return p;
}

#endif /* STEPSCOPE_TRAINER_ZALLOC_H */
