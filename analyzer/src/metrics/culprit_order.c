/*
 * culprit_order.c — the order of the culprit rows (culprit_verdict.c): the verdict's rank
 * first, then ranks beyond noise, then by caused wait; within a rank, by steps, then caused
 * wait.
 *
 * That order is not transitive (a rank's rows go by steps, rows of different ranks by caused
 * wait), so the result is defined as what an insertion sort of the rows in their given order
 * (rank_idx, phase) produces: each row moves left while it goes before its left neighbour.
 * With thousands of ranks that is quadratic (0.6 s at 16,384 ranks), so the same insertion is
 * done here on a list of blocks: a row passes a whole block at once when the block holds no
 * row of its own rank and the row goes before the block's greatest (top, beyond, caused) key;
 * blocks hold about sqrt(n) rows. The rows arrive grouped by rank number (checked: otherwise
 * the plain insertion sort runs), so "a row of its own rank" is "a row of the current group".
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

int ssa_culprit_row_before(const ssa_culprit *x, const ssa_culprit *y, int top_rank) {
  if ((x->rank == top_rank) != (y->rank == top_rank)) return x->rank == top_rank;
  if (x->beyond_noise != y->beyond_noise) return x->beyond_noise > y->beyond_noise;
  if (x->rank == y->rank && x->steps != y->steps) return x->steps > y->steps;
  return x->caused > y->caused;
}

void ssa_order_culprit_rows_by_insertion(ssa_culprit *rows, size_t n, int top_rank) {
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0 && ssa_culprit_row_before(&rows[j], &rows[j - 1], top_rank); j--) {
      ssa_culprit t = rows[j];
      rows[j] = rows[j - 1];
      rows[j - 1] = t;
    }
}

/* A row's key against rows of other ranks: x goes before y iff key(x) > key(y). */
typedef struct row_key {
  int top, beyond;
  int64_t caused;
} row_key;

static row_key key_of(const ssa_culprit *r, int top_rank) {
  return (row_key){r->rank == top_rank, r->beyond_noise != 0, r->caused};
}

static int key_greater(row_key x, row_key y) {
  if (x.top != y.top) return x.top > y.top;
  if (x.beyond != y.beyond) return x.beyond > y.beyond;
  return x.caused > y.caused;
}

typedef struct row_block {
  uint32_t *idx; /* rows, in list order */
  size_t n;
  row_key max;  /* the greatest key of its rows */
  size_t group; /* the latest group (run of one rank number) with a row in it */
} row_block;

typedef struct block_list {
  const ssa_culprit *rows;
  int top_rank;
  size_t cap; /* rows per block */
  row_block *b;
  size_t nb;
} block_list;

static void recompute_max(block_list *L, row_block *b) {
  b->max = key_of(&L->rows[b->idx[0]], L->top_rank);
  for (size_t k = 1; k < b->n; k++) {
    row_key x = key_of(&L->rows[b->idx[k]], L->top_rank);
    if (key_greater(x, b->max)) b->max = x;
  }
}

/* Splits full block bi into two halves. 0 or STEPSCOPE_E_NOMEM. */
static int split_block(block_list *L, size_t bi) {
  uint32_t *second = malloc(L->cap * sizeof *second);
  row_block *grown = realloc(L->b, (L->nb + 1) * sizeof *L->b);
  if (!second || !grown) {
    free(second);
    if (grown) L->b = grown;
    return STEPSCOPE_E_NOMEM;
  }
  L->b = grown;
  memmove(&L->b[bi + 2], &L->b[bi + 1], (L->nb - bi - 1) * sizeof *L->b);
  L->nb++;
  row_block *first = &L->b[bi], *next = &L->b[bi + 1];
  size_t half = first->n / 2;
  memcpy(second, first->idx + half, (first->n - half) * sizeof *second);
  *next = (row_block){second, first->n - half, first->max, first->group};
  first->n = half;
  recompute_max(L, first);
  recompute_max(L, next);
  return 0;
}

/* Inserts row i of group g at position k of block bi. */
static int insert_at(block_list *L, size_t bi, size_t k, uint32_t i, size_t g) {
  if (L->b[bi].n == L->cap) {
    if (split_block(L, bi)) return STEPSCOPE_E_NOMEM;
    if (k > L->b[bi].n) {
      k -= L->b[bi].n;
      bi++;
    }
  }
  row_block *b = &L->b[bi];
  memmove(b->idx + k + 1, b->idx + k, (b->n - k) * sizeof *b->idx);
  b->idx[k] = i;
  row_key x = key_of(&L->rows[i], L->top_rank);
  if (b->n == 0 || key_greater(x, b->max)) b->max = x;
  b->n++;
  b->group = g;
  return 0;
}

/* Where row i (of group g) stops moving left: block and position after which it goes. */
static int insert_row(block_list *L, uint32_t i, size_t g) {
  const ssa_culprit *x = &L->rows[i];
  row_key kx = key_of(x, L->top_rank);
  for (size_t bi = L->nb; bi-- > 0;) {
    const row_block *b = &L->b[bi];
    if (b->group != g && key_greater(kx, b->max)) continue; /* passes every row in it */
    size_t k = b->n;
    while (k > 0 && ssa_culprit_row_before(x, &L->rows[b->idx[k - 1]], L->top_rank))
      k--;
    if (k > 0) return insert_at(L, bi, k, i, g);
  }
  return insert_at(L, 0, 0, i, g);
}

int ssa_order_culprit_rows(ssa_culprit *rows, size_t n, int top_rank) {
  for (size_t i = 1; i < n; i++)
    if (rows[i].rank < rows[i - 1].rank) {
      ssa_order_culprit_rows_by_insertion(rows, n, top_rank);
      return 0;
    }
  if (n < 2) return 0;
  size_t cap = (size_t)sqrt((double)n);
  block_list L = {rows, top_rank, cap < 32 ? 32 : cap, calloc(1, sizeof(row_block)), 1};
  ssa_culprit *sorted = malloc(n * sizeof *sorted);
  int rc = STEPSCOPE_E_NOMEM;
  if (!L.b || !sorted || !(L.b[0].idx = malloc(L.cap * sizeof *L.b[0].idx))) goto out;
  L.b[0].group = SIZE_MAX;
  for (size_t i = 0, g = 0; i < n; i++) {
    g += i > 0 && rows[i].rank != rows[i - 1].rank;
    if (insert_row(&L, (uint32_t)i, g)) goto out;
  }
  size_t o = 0;
  for (size_t bi = 0; bi < L.nb; bi++)
    for (size_t k = 0; k < L.b[bi].n; k++)
      sorted[o++] = rows[L.b[bi].idx[k]];
  memcpy(rows, sorted, n * sizeof *rows);
  rc = 0;
out:
  for (size_t bi = 0; L.b && bi < L.nb; bi++)
    free(L.b[bi].idx);
  free(L.b);
  free(sorted);
  return rc;
}
