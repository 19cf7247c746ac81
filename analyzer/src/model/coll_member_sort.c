/*
 * coll_member_sort.c — puts a run's collective members (ssa_coll_member) in
 * ssa_cmp_coll_member order without a comparison sort. The members are built
 * rank by rank, record by record, so they already stand in (rank, record)
 * order: a stable sort by (comm_id, seq) then gives the full order. A run has
 * few communicators and, per communicator, a dense range of sequence numbers,
 * so that sort is a counting sort by communicator (in comm_id order) followed,
 * within each communicator, by a counting sort by seq. At 16,384 ranks (6.9 M
 * members) a general qsort of them was 12-19 % of a merge's CPU, and the
 * analysis sorts them up to five times. Members in another order, sparse
 * sequence numbers, or no memory for the scratch arrays fall back to qsort:
 * the result is the same either way.
 */
#include <stdlib.h>
#include <string.h>

#include "sc_hash.h"
#include "ssa_model.h"

/* One communicator of the open-addressing table: its id, how many members it
 * has, then where its members go next in the scattered array. */
typedef struct comm_slot {
  uint64_t comm_id;
  size_t count; /* 0: the slot is free */
  size_t next;
} comm_slot;

typedef struct comm_table {
  comm_slot *slots;
  size_t cap, used; /* cap a power of two */
} comm_table;

static comm_slot *find_slot(comm_slot *slots, size_t cap, uint64_t comm_id) {
  size_t i = (size_t)sc_mix64(comm_id) & (cap - 1);
  while (slots[i].count && slots[i].comm_id != comm_id)
    i = (i + 1) & (cap - 1);
  return &slots[i];
}

static int table_grow(comm_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 1024;
  comm_slot *slots = calloc(cap, sizeof *slots);
  if (!slots) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].count) *find_slot(slots, cap, t->slots[i].comm_id) = t->slots[i];
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 0;
}

/* Counts the members of each communicator. */
static int count_comms(comm_table *t, const ssa_coll_member *m, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (2 * (t->used + 1) > t->cap && table_grow(t)) return STEPSCOPE_E_NOMEM;
    comm_slot *s = find_slot(t->slots, t->cap, m[i].comm_id);
    if (!s->count) {
      s->comm_id = m[i].comm_id;
      t->used++;
    }
    s->count++;
  }
  return 0;
}

static int cmp_slot_id(const void *pa, const void *pb) {
  const comm_slot *a = *(const comm_slot *const *)pa, *b = *(const comm_slot *const *)pb;
  return a->comm_id < b->comm_id ? -1 : a->comm_id > b->comm_id;
}

/* Gives each communicator the start of its block, blocks in comm_id order. */
static int place_comms(comm_table *t) {
  comm_slot **order = malloc(t->used * sizeof *order);
  if (!order) return STEPSCOPE_E_NOMEM;
  size_t k = 0;
  for (size_t i = 0; i < t->cap; i++)
    if (t->slots[i].count) order[k++] = &t->slots[i];
  qsort(order, k, sizeof *order, cmp_slot_id);
  size_t start = 0;
  for (size_t i = 0; i < k; i++) {
    order[i]->next = start;
    start += order[i]->count;
  }
  free(order);
  return 0;
}

static int in_build_order(const ssa_coll_member *m, size_t n) {
  for (size_t i = 1; i < n; i++)
    if (m[i].rank_idx < m[i - 1].rank_idx ||
        (m[i].rank_idx == m[i - 1].rank_idx && m[i].coll_idx <= m[i - 1].coll_idx))
      return 0;
  return 1;
}

/* A stable counting sort of n members from src to dst by ((seq - lo) >> shift)
 * & mask, a key below nkeys: c holds nkeys counts. */
static void counting_pass(const ssa_coll_member *src, ssa_coll_member *dst, size_t n, uint64_t lo,
                          unsigned shift, uint64_t mask, size_t nkeys, size_t *c) {
  memset(c, 0, nkeys * sizeof *c);
  for (size_t i = 0; i < n; i++)
    c[((src[i].seq - lo) >> shift) & mask]++;
  for (size_t s = 0, start = 0; s < nkeys; s++) {
    size_t k = c[s];
    c[s] = start;
    start += k;
  }
  for (size_t i = 0; i < n; i++)
    dst[c[((src[i].seq - lo) >> shift) & mask]++] = src[i];
}

/* One communicator's block, from src (then scratch) to dst, in seq order
 * (stable): one counting pass when its sequence numbers are dense, else a
 * radix sort by bytes of (seq - lowest seq). *counts is a scratch array grown
 * as needed; without memory, qsort. */
static void sort_block(ssa_coll_member *src, ssa_coll_member *dst, size_t n, size_t **counts,
                       size_t *ncounts) {
  uint64_t lo = src[0].seq, hi = src[0].seq;
  for (size_t i = 1; i < n; i++) {
    if (src[i].seq < lo) lo = src[i].seq;
    if (src[i].seq > hi) hi = src[i].seq;
  }
  int dense = hi - lo < 2 * (uint64_t)n + 256;
  size_t need = dense ? (size_t)(hi - lo) + 1 : 256;
  if (need > *ncounts) {
    size_t *grown = realloc(*counts, need * sizeof *grown);
    if (!grown) {
      memcpy(dst, src, n * sizeof *dst);
      qsort(dst, n, sizeof *dst, ssa_cmp_coll_member);
      return;
    }
    *counts = grown;
    *ncounts = need;
  }
  if (dense) {
    counting_pass(src, dst, n, lo, 0, UINT64_MAX, need, *counts);
    return;
  }
  ssa_coll_member *from = src, *to = dst;
  for (unsigned shift = 0; shift < 64 && (hi - lo) >> shift; shift += 8) {
    counting_pass(from, to, n, lo, shift, 255, 256, *counts);
    ssa_coll_member *t = from;
    from = to;
    to = t;
  }
  if (from != dst) memcpy(dst, from, n * sizeof *dst);
}

void ssa_sort_coll_members(ssa_coll_member *m, size_t n) {
  if (n < 2) return;
  comm_table t = {0};
  ssa_coll_member *scattered = NULL;
  if (!in_build_order(m, n) || count_comms(&t, m, n) || place_comms(&t) ||
      !(scattered = malloc(n * sizeof *scattered))) {
    free(t.slots);
    qsort(m, n, sizeof *m, ssa_cmp_coll_member);
    return;
  }
  for (size_t i = 0; i < n; i++)
    scattered[find_slot(t.slots, t.cap, m[i].comm_id)->next++] = m[i];
  size_t *counts = NULL, ncounts = 0;
  for (size_t b = 0; b < n;) {
    size_t e = b + find_slot(t.slots, t.cap, scattered[b].comm_id)->count;
    sort_block(scattered + b, m + b, e - b, &counts, &ncounts);
    b = e;
  }
  free(counts);
  free(scattered);
  free(t.slots);
}
