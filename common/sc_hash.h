/*
 * sc_hash.h — the one string hash of the project: 64-bit FNV-1a, used where a hash must be
 * cheap, stable across processes and runs (the trainer's shared-memory segment names) and
 * good enough for open addressing (the tracer's string interning, the Kineto importer's
 * caches). Start from SC_FNV1A_INIT; chain calls to hash several pieces as one.
 */
#ifndef SC_HASH_H
#define SC_HASH_H

#include <stddef.h>
#include <stdint.h>

#define SC_FNV1A_INIT 0xcbf29ce484222325ull

static inline uint64_t sc_fnv1a(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

/* The same over a NUL-terminated string (its bytes without the NUL). */
static inline uint64_t sc_fnv1a_str(uint64_t h, const char *s) {
  for (const unsigned char *b = (const unsigned char *)s; *b; b++) {
    h ^= *b;
    h *= 0x100000001b3ull;
  }
  return h;
}

#endif
