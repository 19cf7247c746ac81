/*
 * culprit_questions.c — the culprit walk's table of questions and answers
 * (ssa_phase_requests, culprits.c): adding a walk's new questions to the
 * table, kept sorted by (rank, kind, t0, t1) and unique, with where each
 * rank's questions begin; and finding a question in it.
 *
 * A walk asks hundreds of questions per rank (2.6 M at 16,384 ranks), in the
 * order of the late arrivals, and the table is merged again after each round.
 * Sorting the whole table each time (qsort of the old rows and the new,
 * indirectly since a row is 88 B) was 7-9 % of a merge's CPU: the new
 * questions are sorted alone, as indices, by a counting sort by rank then a
 * qsort of each rank's few, and merged into the table in place from its end.
 * The first round's questions (every one new) become the table themselves,
 * put in order in place: the list and the table are never both held at the
 * first round's size, the bounded mode's peak on pipeline runs (~16 KB a rank).
 */
#include <stdlib.h>
#include <string.h>

#include "culprit_questions.h"
#include "ssa_metrics.h"

static int cmp_request(const ssa_phase_request *a, const ssa_phase_request *b) {
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  if (a->kind != b->kind) return a->kind < b->kind ? -1 : 1;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

static int cmp_request_at(const void *pa, const void *pb, void *pending) {
  const ssa_phase_request *v = pending;
  return cmp_request(&v[*(const uint32_t *)pa], &v[*(const uint32_t *)pb]);
}

const ssa_phase_request *ssa_phase_request_find(const ssa_phase_requests *q, uint32_t rank_idx,
                                                const ssa_phase_request *key) {
  if (!q->first) return NULL;
  size_t lo = q->first[rank_idx], hi = q->first[rank_idx + 1];
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = cmp_request(key, &q->v[mid]);
    if (c == 0) return &q->v[mid];
    if (c < 0)
      hi = mid;
    else
      lo = mid + 1;
  }
  return NULL;
}

/* The pending questions' indices in table order, each question once: *m of them. */
static uint32_t *sorted_pending(const ssa_phase_requests *q, size_t nranks, size_t *m) {
  size_t np = q->npending;
  uint32_t *idx = malloc((np ? np : 1) * sizeof *idx);
  size_t *start = calloc(nranks + 1, sizeof *start);
  if (!idx || !start) {
    free(idx);
    free(start);
    return NULL;
  }
  for (size_t i = 0; i < np; i++)
    start[q->pending[i].rank_idx + 1]++;
  for (size_t r = 0; r < nranks; r++)
    start[r + 1] += start[r];
  for (size_t i = 0; i < np; i++)
    idx[start[q->pending[i].rank_idx]++] = (uint32_t)i;
  /* start[r] is now where rank r + 1's questions begin */
  size_t k = 0;
  for (size_t r = 0, lo = 0; r < nranks; lo = start[r++]) {
    qsort_r(idx + lo, start[r] - lo, sizeof *idx, cmp_request_at, q->pending);
    for (size_t i = lo; i < start[r]; i++)
      if (k == 0 || cmp_request(&q->pending[idx[k - 1]], &q->pending[idx[i]]) != 0)
        idx[k++] = idx[i];
  }
  free(start);
  *m = k;
  return idx;
}

/* Where each of the nranks ranks' questions begin in the table. */
static void find_firsts(ssa_phase_requests *q, size_t nranks) {
  for (size_t r = 0, i = 0; r <= nranks; r++) {
    while (i < q->n && q->v[i].rank_idx < r)
      i++;
    q->first[r] = i;
  }
}

/* The first round: the pending list, put in the order idx gives (its m kept questions first)
 * in place, becomes the table. idx is completed to a permutation of the list with the
 * duplicates left out, then applied cycle by cycle (row j takes row idx[j]). */
static int pending_becomes_table(ssa_phase_requests *q, uint32_t *idx, size_t m, size_t nranks) {
  size_t np = q->npending;
  unsigned char *kept = calloc(np ? np : 1, 1); /* idx has room for np (sorted_pending) */
  if (!kept) {
    free(idx);
    return STEPSCOPE_E_NOMEM;
  }
  for (size_t i = 0; i < m; i++)
    kept[idx[i]] = 1;
  for (size_t i = 0, w = m; i < np; i++)
    if (!kept[i]) idx[w++] = (uint32_t)i;
  free(kept);
  for (size_t i = 0; i < np; i++) {
    if (idx[i] == i) continue;
    ssa_phase_request first = q->pending[i];
    size_t j = i;
    while (idx[j] != i) {
      size_t from = idx[j];
      q->pending[j] = q->pending[from];
      idx[j] = (uint32_t)j;
      j = from;
    }
    q->pending[j] = first;
    idx[j] = (uint32_t)j;
  }
  free(idx);
  free(q->v);
  q->v = q->pending;
  q->cap = q->pending_cap;
  q->n = m;
  q->pending = NULL;
  q->pending_cap = q->npending = 0;
  find_firsts(q, nranks);
  return 0;
}

int ssa_phase_requests_merge_pending(ssa_phase_requests *q, size_t nranks) {
  size_t m = 0;
  uint32_t *idx = sorted_pending(q, nranks, &m);
  if (!idx) return STEPSCOPE_E_NOMEM;
  if (!q->first && !(q->first = malloc((nranks + 1) * sizeof *q->first))) {
    free(idx);
    return STEPSCOPE_E_NOMEM;
  }
  if (q->n == 0) return pending_becomes_table(q, idx, m, nranks);
  /* drop the questions the table has: its row (maybe answered) stays */
  size_t k = 0;
  for (size_t i = 0, t = 0; i < m; i++) {
    const ssa_phase_request *p = &q->pending[idx[i]];
    while (t < q->n && cmp_request(&q->v[t], p) < 0)
      t++;
    if (t == q->n || cmp_request(&q->v[t], p) != 0) idx[k++] = idx[i];
  }
  if (ssa_grow((void **)&q->v, &q->cap, q->n + k, sizeof *q->v)) {
    free(idx);
    return STEPSCOPE_E_NOMEM;
  }
  /* merge from the end: no row is written before it is read */
  for (size_t i = q->n, j = k, w = q->n + k; j > 0;) {
    if (i > 0 && cmp_request(&q->v[i - 1], &q->pending[idx[j - 1]]) > 0)
      q->v[--w] = q->v[--i];
    else
      q->v[--w] = q->pending[idx[--j]];
  }
  free(idx);
  free(q->pending); /* a later round's list is smaller than the table: not kept for the next */
  q->n += k;
  q->pending = NULL;
  q->pending_cap = q->npending = 0;
  find_firsts(q, nranks);
  return 0;
}
