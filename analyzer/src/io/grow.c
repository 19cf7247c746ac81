/*
 * grow.c — amortised growth of the model's arrays (ssa_grow).
 *
 * Capacity grows by half plus 16 elements, so appending n elements costs
 * O(n) copies; big blocks are mmapped by the C library and grow by mremap
 * without a copy. (Transparent huge pages were tried for the big arrays to
 * save page faults: with this system's "defrag on madvise" setting the
 * faults then compact memory and the loader got slower, so they are not
 * requested.)
 */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "ssa_io.h"

int ssa_grow(void **ptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t n = *cap ? *cap : 16;
  while (n < need) {
    if (n > SIZE_MAX / 2 / elem) return -1;
    n = n + n / 2 + 16;
  }
  void *p = realloc(*ptr, n * elem);
  if (!p) return -1;
  *ptr = p;
  *cap = n;
  return 0;
}

size_t ssa_prefault_ahead(void *base, size_t elem, size_t n, size_t cap) {
  /* ahead by an eighth of what is filled, at most 64 Ki elements, and
   * nothing before 16 Ki elements (small arrays fault as usual): what is
   * faulted in and never used stays small next to what is used */
  if (n < 16384) return 16384;
  size_t chunk = n / 8 > 65536 ? 65536 : n / 8;
  size_t end = cap - n > chunk ? n + chunk : cap;
#ifdef MADV_POPULATE_WRITE
  const uintptr_t page = 4096;
  uintptr_t a = ((uintptr_t)base + n * elem + page - 1) & ~(page - 1);
  uintptr_t b = ((uintptr_t)base + end * elem) & ~(page - 1);
  if (b > a) (void)madvise((void *)a, b - a, MADV_POPULATE_WRITE);
#else
  (void)base;
  (void)elem;
#endif
  return end;
}
