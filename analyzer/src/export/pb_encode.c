/*
 * pb_encode.c — the out-of-line parts of the protocol-buffers encoder of
 * pb_encode.h (buffer growth, and the length of a nested message of 128
 * bytes or more).
 */
#include <stdlib.h>

#include "pb_encode.h"

void pb_init(pb_buf *b) {
  memset(b, 0, sizeof *b);
}

void pb_free(pb_buf *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

int pb_reserve_slow(pb_buf *b, size_t n) {
  if (b->failed) return -1;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + n)
    cap *= 2;
  uint8_t *p = realloc(b->p, cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void pb_end_slow(pb_buf *b, size_t at, size_t body) {
  size_t n = pb_varint_size(body);
  if (pb_reserve(b, n - 1)) return;
  memmove(b->p + at + n, b->p + at + 1, body);
  size_t end = b->len + n - 1;
  b->len = at;
  pb_put_varint(b, body);
  b->len = end;
}
