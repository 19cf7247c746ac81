/*
 * varint.h — LEB128 variable-length integers and zigzag signed encoding, the
 * building blocks of every record payload (docs/trace-format.md §Encoding).
 *
 * Encoders write at most VARINT_MAX bytes and return the new cursor.
 * Decoders never read past `end`: they return NULL on truncation or on a
 * value longer than 10 bytes / wider than 64 bits, so a corrupt input can
 * only produce an error, never an out-of-bounds read.
 */
#ifndef STEPSCOPE_VARINT_H
#define STEPSCOPE_VARINT_H

#include <stdint.h>
#include <string.h>

#define VARINT_MAX 10

static inline uint8_t *varint_put(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint64_t zigzag_encode(int64_t v) {
  return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t zigzag_decode(uint64_t v) {
  return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Decodes one varint from [p, end). NULL if truncated or overlong. */
static inline const uint8_t *varint_get(const uint8_t *p, const uint8_t *end, uint64_t *out) {
  if (p < end && *p < 0x80) { /* the common one-byte case */
    *out = *p;
    return p + 1;
  }
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (p >= end) return NULL;
    uint8_t b = *p++;
    if (shift == 63 && b > 1) return NULL; /* would overflow 64 bits */
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return p;
    }
  }
  return NULL;
}

static inline uint8_t *f64_put(uint8_t *p, double d) {
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(bits >> (8 * i));
  return p + 8;
}

static inline const uint8_t *f64_get(const uint8_t *p, const uint8_t *end, double *out) {
  if (end - p < 8) return NULL;
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++)
    bits |= (uint64_t)p[i] << (8 * i);
  memcpy(out, &bits, sizeof bits);
  return p + 8;
}

#endif
