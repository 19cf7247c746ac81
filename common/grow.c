/*
 * grow.c — sc_grow.h: an array's capacity doubled until it holds what is needed.
 */
#include "sc_grow.h"

#include <stdint.h>
#include <stdlib.h>

void *sc_grow(void *items, size_t *cap, size_t need, size_t size, size_t first) {
  if (need <= *cap) return items;
  size_t n = *cap ? *cap : first ? first : 1;
  while (n < need) {
    if (n > SIZE_MAX / 2) return NULL;
    n *= 2;
  }
  if (size && n > SIZE_MAX / size) return NULL;
  void *grown = realloc(items, n * size);
  if (grown) *cap = n;
  return grown;
}
