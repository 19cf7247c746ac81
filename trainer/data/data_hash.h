/*
 * data_hash.h — internal to trainer/data: the 64-bit mixing function shared by the
 * tokenizer's hash tables and the dataset's seeded permutations.
 *
 * It is splitmix64's finalizer: a bijection on 64-bit integers whose output bits
 * each depend on every input bit, good enough for hash tables and for deriving
 * independent random streams from (seed, epoch, ...) without any state.
 */
#ifndef STEPSCOPE_TRAINER_DATA_HASH_H
#define STEPSCOPE_TRAINER_DATA_HASH_H

#include <stdint.h>

static inline uint64_t data_hash_mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Combines two values into one hash (order matters). */
static inline uint64_t data_hash_pair(uint64_t a, uint64_t b) {
  return data_hash_mix(data_hash_mix(a) ^ (b + 0x632BE59BD9B4E019ull));
}

#endif
