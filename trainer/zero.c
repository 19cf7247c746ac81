/*
 * zero.c — the ZeRO-2/3 sharding plan (see zero.h): equal pieces of every bucket, one
 * per member of the gradient group, and where each lands in a rank's shard.
 */
#include "zero.h"

#include <stdlib.h>
#include <string.h>

int zero_plan_build(zero_plan *z, const size_t *begins, const size_t *ends, int nbuckets, int n,
                    int rank) {
  memset(z, 0, sizeof *z);
  z->n = n;
  z->rank = rank;
  z->b = calloc(nbuckets > 0 ? (size_t)nbuckets : 1, sizeof *z->b);
  if (!z->b) return -1;
  z->nbuckets = nbuckets;
  for (int k = 0; k < nbuckets; k++) {
    zero_bucket *b = &z->b[k];
    size_t len = ends[k] - begins[k];
    b->begin = begins[k];
    b->end = ends[k];
    b->piece = ((len + (size_t)n - 1) / (size_t)n + 15) / 16 * 16;
    b->padded = b->piece * (size_t)n;
    b->shard_off = z->shard_len;
    z->shard_len += b->piece;
    if (b->piece > z->max_piece) z->max_piece = b->piece;
  }
  return 0;
}

void zero_plan_free(zero_plan *z) {
  free(z->b);
  memset(z, 0, sizeof *z);
}

void zero_owned(const zero_plan *z, int k, int r, size_t *lo, size_t *hi) {
  const zero_bucket *b = &z->b[k];
  *lo = b->begin + (size_t)r * b->piece;
  *hi = *lo + b->piece < b->end ? *lo + b->piece : b->end;
  if (*hi < *lo) *hi = *lo;
}
