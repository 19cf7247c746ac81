/*
 * sc_hash.h — the one string hash of the project: 64-bit FNV-1a, used where a hash must be
 * cheap, stable across processes and runs (the trainer's shared-memory segment names) and
 * good enough for open addressing (the tracer's string interning, the Kineto importer's
 * caches). Start from SC_FNV1A_INIT; chain calls to hash several pieces as one. Integer
 * keys are mixed with sc_mix64.
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

/* A 64-bit finalizer (MurmurHash3's fmix64): spreads every input bit over the output, for
 * open-addressing tables keyed by ids that are close together (correlation ids, sequence
 * numbers). */
static inline uint64_t sc_mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

#endif
