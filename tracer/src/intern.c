/*
 * intern.c — string interning for the writer.
 *
 * An open-addressing hash table (linear probing, FNV-1a hashes, load factor
 * at most 1/2) of entries pointing into a string arena, so that stored
 * strings never move. Ids are dense and start at 1:
 * the n-th distinct string gets id n, which lets readers keep strings in a
 * plain array indexed by id.
 */
#include "intern.h"

#include "string_arena.h"
#include "sc_hash.h"

#include <stdlib.h>
#include <string.h>

typedef struct intern_entry {
  uint64_t hash;
  const char *str; /* NULL: empty slot */
  uint32_t len;
  uint32_t id;
} intern_entry;

struct intern_table {
  intern_entry *slots;
  size_t nslots; /* power of two */
  uint32_t count;
  string_arena strings; /* the stored strings */
};

intern_table *intern_create(void) {
  intern_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->nslots = 1024;
  t->slots = calloc(t->nslots, sizeof *t->slots);
  if (!t->slots) {
    free(t);
    return NULL;
  }
  return t;
}

void intern_destroy(intern_table *t) {
  if (!t) return;
  string_arena_free(&t->strings);
  free(t->slots);
  free(t);
}

uint32_t intern_count(const intern_table *t) {
  return t->count;
}

static int grow(intern_table *t) {
  size_t n = t->nslots * 2;
  intern_entry *slots = calloc(n, sizeof *slots);
  if (!slots) return -1;
  for (size_t i = 0; i < t->nslots; i++) {
    if (!t->slots[i].str) continue;
    size_t j = t->slots[i].hash & (n - 1);
    while (slots[j].str)
      j = (j + 1) & (n - 1);
    slots[j] = t->slots[i];
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = n;
  return 0;
}

uint32_t intern_get_or_add(intern_table *t, const char *s, size_t len, int *is_new) {
  *is_new = 0;
  if (len > UINT32_MAX) return 0;
  uint64_t h = sc_fnv1a(SC_FNV1A_INIT, s, len);
  size_t mask = t->nslots - 1;
  size_t i = h & mask;
  while (t->slots[i].str) {
    intern_entry *e = &t->slots[i];
    if (e->hash == h && e->len == len && memcmp(e->str, s, len) == 0) return e->id;
    i = (i + 1) & mask;
  }
  if (t->count >= 0x7fffffffu) return 0;
  if ((size_t)(t->count + 1) * 2 > t->nslots) {
    if (grow(t) != 0) return 0;
    mask = t->nslots - 1;
    i = h & mask;
    while (t->slots[i].str)
      i = (i + 1) & mask;
  }
  const char *stored = string_arena_store(&t->strings, s, len);
  if (!stored) return 0;
  t->slots[i] = (intern_entry){.hash = h, .str = stored, .len = (uint32_t)len, .id = ++t->count};
  *is_new = 1;
  return t->count;
}
