/*
 * strtab.c — the per-rank string table: every name the model keeps (kernel,
 * range, stream, metadata key) is stored once and referred to by a 32-bit id.
 *
 * Strings live back to back in one growing byte buffer, each NUL-terminated;
 * `offsets[id]` locates them. An open-addressing hash table (linear probing,
 * hash_bytes) maps contents to ids so that interning is O(1) on average. Id 0 is
 * the empty string and means "no string".
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

/* The slot hash: 8 bytes at a time, each word mixed in by a multiply
 * (FNV-1a's multiply per byte made it 4 cycles a byte: kernel names are
 * 100-300 bytes, and interning them was ~0.4 ms of an import of HTA's
 * trace_diff control trace). Only slot positions depend on it. */
static uint32_t hash_bytes(const char *s, size_t len) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy(&w, s + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  if (i < len) {
    uint64_t w = 0;
    memcpy(&w, s + i, len - i);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return (uint32_t)h;
}

void ssa_strtab_init(ssa_strtab *t) {
  memset(t, 0, sizeof *t);
}

void ssa_strtab_free(ssa_strtab *t) {
  free(t->bytes);
  free(t->offsets);
  free(t->slots);
  memset(t, 0, sizeof *t);
}

const char *ssa_strtab_get(const ssa_strtab *t, uint32_t id) {
  if (id == 0 || id >= t->count) return "";
  return t->bytes + t->offsets[id];
}

static int rehash(ssa_strtab *t, uint32_t nslots) {
  uint32_t *slots = calloc(nslots, sizeof *slots);
  if (!slots) return -1;
  for (uint32_t id = 1; id < t->count; id++) {
    const char *s = t->bytes + t->offsets[id];
    uint32_t h = hash_bytes(s, strlen(s)) & (nslots - 1);
    while (slots[h])
      h = (h + 1) & (nslots - 1);
    slots[h] = id;
  }
  free(t->slots);
  t->slots = slots;
  t->nslots = nslots;
  return 0;
}

uint32_t ssa_strtab_intern(ssa_strtab *t, const char *s, size_t len) {
  if (t->count == 0) { /* reserve id 0 = "" */
    size_t cap = t->cap;
    if (ssa_grow((void **)&t->offsets, &cap, 1, sizeof *t->offsets)) return 0;
    t->cap = (uint32_t)cap;
    size_t bcap = t->bytes_cap;
    if (ssa_grow((void **)&t->bytes, &bcap, 1, 1)) return 0;
    t->bytes_cap = bcap;
    t->bytes[0] = 0;
    t->bytes_len = 1;
    t->offsets[0] = 0;
    t->count = 1;
  }
  if (len == 0) return 0;
  if ((uint64_t)(t->count + 1) * 2 > t->nslots) {
    if (rehash(t, t->nslots ? t->nslots * 2 : 64)) return 0;
  }
  uint32_t h = hash_bytes(s, len) & (t->nslots - 1);
  while (t->slots[h]) {
    const char *c = t->bytes + t->offsets[t->slots[h]];
    if (strncmp(c, s, len) == 0 && c[len] == 0) return t->slots[h];
    h = (h + 1) & (t->nslots - 1);
  }
  if (t->bytes_len + len + 1 > UINT32_MAX) return 0;
  size_t bcap = t->bytes_cap, cap = t->cap;
  if (ssa_grow((void **)&t->bytes, &bcap, t->bytes_len + len + 1, 1)) return 0;
  t->bytes_cap = bcap;
  if (ssa_grow((void **)&t->offsets, &cap, (size_t)t->count + 1, sizeof *t->offsets)) return 0;
  t->cap = (uint32_t)cap;
  memcpy(t->bytes + t->bytes_len, s, len);
  /* embedded NULs end the string: names never contain them */
  t->bytes[t->bytes_len + len] = 0;
  uint32_t id = t->count++;
  t->offsets[id] = (uint32_t)t->bytes_len;
  t->bytes_len += len + 1;
  t->slots[h] = id;
  return id;
}
