/*
 * pb_encode.h — a minimal protocol-buffers *encoder* (wire format only) for
 * the Perfetto export (perfetto_export.c): varints, zigzag-free signed
 * varints, fixed64, doubles, length-delimited bytes and nested messages,
 * appended to a growable byte buffer that the caller drains between
 * top-level messages.
 *
 * Why by hand: the export writes hundreds of millions of tiny messages as a
 * stream, and no C protobuf library in Debian fits that well — protobuf-c
 * builds a heap object per message and packs it afterwards (an allocation
 * and a copy per event), nanopb wants generated descriptors and fixed-size
 * fields. Perfetto's own C++ writer (protozero) is hand-rolled for the same
 * reason. The wire format is small and stable; tests decode every exported
 * file with Perfetto's compiled proto (tests/export), never with this code.
 *
 * Nested messages: pb_begin writes the tag and reserves one length byte;
 * pb_end writes the exact varint length, moving the body right when it is
 * 128 bytes or longer (rare: events are small), so no redundant-length
 * padding is ever written. Allocation failure sticks in `failed`; writes
 * after it are dropped.
 */
#ifndef PB_ENCODE_H
#define PB_ENCODE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PB_MAX_DEPTH 8

enum { PB_VARINT = 0, PB_FIXED64 = 1, PB_LEN = 2 };

typedef struct pb_buf {
  uint8_t *p;
  size_t len, cap;
  size_t open[PB_MAX_DEPTH]; /* offsets of the reserved length bytes */
  int depth;
  int failed;
} pb_buf;

void pb_init(pb_buf *b);
void pb_free(pb_buf *b);
/* Makes room for n more bytes; 0, or -1 (and failed set) without memory. */
int pb_reserve_slow(pb_buf *b, size_t n);
static inline int pb_reserve(pb_buf *b, size_t n) {
  return b->len + n <= b->cap ? 0 : pb_reserve_slow(b, n);
}

static inline size_t pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80)
    v >>= 7, n++;
  return n;
}

/* Writes v as a varint into room already reserved. */
static inline void pb_put_varint(pb_buf *b, uint64_t v) {
  uint8_t *q = b->p + b->len;
  while (v >= 0x80) {
    *q++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *q++ = (uint8_t)v;
  b->len = (size_t)(q - b->p);
}

static inline void pb_varint(pb_buf *b, uint64_t v) {
  if (pb_reserve(b, 10)) return;
  pb_put_varint(b, v);
}

static inline void pb_tag(pb_buf *b, uint32_t field, int wire) {
  pb_varint(b, ((uint64_t)field << 3) | (uint64_t)wire);
}

/* uint32/uint64/bool/enum fields */
static inline void pb_uint(pb_buf *b, uint32_t field, uint64_t v) {
  if (pb_reserve(b, 15)) return;
  pb_put_varint(b, ((uint64_t)field << 3) | PB_VARINT);
  pb_put_varint(b, v);
}

/* int32/int64 fields: two's complement as a varint (10 bytes if negative) */
static inline void pb_int(pb_buf *b, uint32_t field, int64_t v) {
  pb_uint(b, field, (uint64_t)v);
}

static inline void pb_fixed64(pb_buf *b, uint32_t field, uint64_t v) {
  if (pb_reserve(b, 13)) return;
  pb_put_varint(b, ((uint64_t)field << 3) | PB_FIXED64);
  for (int i = 0; i < 8; i++)
    b->p[b->len++] = (uint8_t)(v >> (8 * i)); /* little-endian */
}

static inline void pb_double(pb_buf *b, uint32_t field, double v) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  pb_fixed64(b, field, u);
}

static inline void pb_bytes(pb_buf *b, uint32_t field, const void *s, size_t n) {
  if (pb_reserve(b, 15 + n)) return;
  pb_put_varint(b, ((uint64_t)field << 3) | PB_LEN);
  pb_put_varint(b, n);
  memcpy(b->p + b->len, s, n);
  b->len += n;
}

static inline void pb_string(pb_buf *b, uint32_t field, const char *s) {
  pb_bytes(b, field, s, strlen(s));
}

/* Opens a nested message (field of wire type LEN); close with pb_end. */
static inline void pb_begin(pb_buf *b, uint32_t field) {
  if (b->depth >= PB_MAX_DEPTH) {
    b->failed = 1;
    return;
  }
  if (pb_reserve(b, 11)) return;
  pb_put_varint(b, ((uint64_t)field << 3) | PB_LEN);
  b->open[b->depth++] = b->len;
  b->p[b->len++] = 0;
}

void pb_end_slow(pb_buf *b, size_t at, size_t body);
static inline void pb_end(pb_buf *b) {
  if (b->failed || b->depth == 0) return;
  size_t at = b->open[--b->depth];
  size_t body = b->len - at - 1;
  if (body < 0x80)
    b->p[at] = (uint8_t)body;
  else
    pb_end_slow(b, at, body);
}

#endif
