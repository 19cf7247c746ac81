/*
 * sort_keys.c — the qsort comparators the analyzer's floors share: plain
 * int64, uint64 and double values in ascending order, and (key, index)
 * pairs, which sort an index of elements by a time instead of moving the
 * elements themselves (ssa_io.h).
 */
#include <stdint.h>

#include "ssa_io.h"

int ssa_cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

int ssa_cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

int ssa_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int ssa_cmp_key_index(const void *a, const void *b) {
  const ssa_key_index *x = a, *y = b;
  if (x->key != y->key) return x->key < y->key ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}
