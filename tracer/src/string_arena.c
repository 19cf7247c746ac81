/*
 * string_arena.c — see string_arena.h. Chunks of 64 KiB (or one string's
 * size when larger) are linked newest first.
 */
#include "string_arena.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_BYTES 65536

struct string_arena_chunk {
  string_arena_chunk *next;
  size_t used, cap;
  char data[];
};

const char *string_arena_store(string_arena *a, const char *data, size_t len) {
  string_arena_chunk *c = a->chunks;
  if (!c || c->cap - c->used < len + 1) {
    size_t cap = len + 1 > CHUNK_BYTES ? len + 1 : CHUNK_BYTES;
    string_arena_chunk *n = malloc(sizeof *n + cap);
    if (!n) return NULL;
    n->next = c;
    n->used = 0;
    n->cap = cap;
    a->chunks = c = n;
  }
  char *dst = c->data + c->used;
  if (len) memcpy(dst, data, len);
  dst[len] = '\0';
  c->used += len + 1;
  return dst;
}

void string_arena_free(string_arena *a) {
  string_arena_chunk *c = a->chunks;
  while (c) {
    string_arena_chunk *next = c->next;
    free(c);
    c = next;
  }
  a->chunks = NULL;
}
