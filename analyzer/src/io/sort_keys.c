/*
 * sort_keys.c — the qsort comparators the analyzer's floors share: plain
 * int64, uint64 and double values in ascending order, and (key, index)
 * pairs, which sort an index of elements by a time instead of moving the
 * elements themselves; and the binary searches of arrays sorted by a leading
 * int64 key (ssa_io.h).
 */
#include <stdint.h>
#include <string.h>

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

/* The number of elements whose key is below t, or at most t when `inclusive`. */
static size_t count_keys(const void *base, size_t n, size_t size, int64_t t, int inclusive) {
  const unsigned char *p = base;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int64_t key;
    memcpy(&key, p + mid * size, sizeof key);
    if (key < t || (inclusive && key == t))
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

size_t ssa_count_below(const void *base, size_t n, size_t size, int64_t t) {
  return count_keys(base, n, size, t, 0);
}

size_t ssa_count_at_most(const void *base, size_t n, size_t size, int64_t t) {
  return count_keys(base, n, size, t, 1);
}
