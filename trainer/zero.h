/*
 * zero.h — how ZeRO-2 and ZeRO-3 cut the flat parameter/gradient buffer into shards.
 *
 * What it is for: under --zero 2/3 gradients are reduce-scattered bucket by bucket while
 * backward runs, so every bucket must be split into equal pieces, one per member of the
 * gradient group (dp, or dp x cp): reduce-scatter and all-gather move equal counts. A
 * rank's shard is the concatenation of its piece of every bucket (the same cut for the
 * gradient shard, the AdamW moments and, under ZeRO-3, the parameters).
 *
 * How it works: bucket k covers flat floats [begin, end) (whole units, see model.h);
 * its piece is ceil((end - begin) / n) rounded up to 16 floats, so the bucket padded to
 * n pieces is `padded` = n x piece floats. Group rank r owns [begin + r x piece,
 * begin + (r + 1) x piece) clipped to end (the clipped part, and possibly a whole
 * piece of a small bucket, is padding that holds zeros). Its piece sits at `shard_off`
 * in the shard. ZeRO-1 keeps its own contiguous 1/n slice of the flat buffer (train.c,
 * train_step.c).
 */
#ifndef STEPSCOPE_TRAINER_ZERO_H
#define STEPSCOPE_TRAINER_ZERO_H

#include <stddef.h>

typedef struct zero_bucket {
  size_t begin, end; /* flat floats of the bucket */
  size_t piece;      /* floats per group rank */
  size_t padded;     /* n x piece */
  size_t shard_off;  /* where this rank's piece starts in its shard */
} zero_bucket;

typedef struct zero_plan {
  int n, rank; /* gradient group size, this rank's place in it */
  int nbuckets;
  zero_bucket *b;
  size_t shard_len; /* sum of the pieces */
  size_t max_piece;
} zero_plan;

/* Builds the plan for buckets [begins[k], ends[k]). Returns 0, -1 when out of memory. */
int zero_plan_build(zero_plan *z, const size_t *begins, const size_t *ends, int nbuckets, int n,
                    int rank);
void zero_plan_free(zero_plan *z);
/* The flat range group rank `r` owns in bucket k: [*lo, *hi), possibly empty (hi <= lo). */
void zero_owned(const zero_plan *z, int k, int r, size_t *lo, size_t *hi);

#endif /* STEPSCOPE_TRAINER_ZERO_H */
