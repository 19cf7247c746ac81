/*
 * sc_grow.h — growing an append-only array by doubling its capacity, the policy the
 * tracer's, the trainer's and the analyzer's growable arrays share.
 */
#ifndef SC_GROW_H
#define SC_GROW_H

#include <stddef.h>

/* items reallocated to hold at least `need` elements of `size` bytes: the capacity *cap is
 * doubled (starting from `first` when it is 0) until it suffices, and updated. Returns items
 * itself when *cap already suffices; NULL when realloc fails or the size overflows (items
 * and *cap are then unchanged). */
void *sc_grow(void *items, size_t *cap, size_t need, size_t size, size_t first);

#endif
