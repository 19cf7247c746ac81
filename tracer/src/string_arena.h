/*
 * string_arena.h — an append-only store of NUL-terminated strings in large
 * chunks: stored strings never move and are freed all at once. Used by the
 * writer's intern table and by the reader's string table.
 */
#ifndef STEPSCOPE_STRING_ARENA_H
#define STEPSCOPE_STRING_ARENA_H

#include <stddef.h>

typedef struct string_arena_chunk string_arena_chunk;

typedef struct string_arena {
  string_arena_chunk *chunks;
} string_arena;

/* A stable NUL-terminated copy of data[0..len), or NULL when out of memory. */
const char *string_arena_store(string_arena *a, const char *data, size_t len);

void string_arena_free(string_arena *a);

#endif
