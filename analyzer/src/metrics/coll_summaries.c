/*
 * coll_summaries.c — after the matching (collectives.c): the summaries of the
 * collective instances by (op, group, bytes) — one row per (op, group) for
 * all-to-alls, whose bytes are the mean — over the complete instances, in key
 * order; then the instances in time order (first start, comm_id, seq).
 *
 * Both used to be a qsort of the instances (2.3 M of 120 B at 16,384 ranks):
 * a quarter of `merge --cross-out`'s CPU. The summaries are now accumulated
 * per key in one pass (a hash table of the few keys), and the time order is a
 * radix sort by first start of instances that the matching made in (comm_id,
 * seq) order, the tie-break. The results are those of the sorts: a summary's
 * first instance (its comm_size for busbw) is the key's earliest-starting one,
 * the earliest made on ties; its bytes total, a double summed in that order
 * before, is summed exactly in integers, which equals that double sum
 * whenever no partial sum passes 2^53 (every integer up to it is a double); a
 * key past it is summed as before, in time order.
 */
#include <stdlib.h>
#include <string.h>

#include "sc_hash.h"
#include "coll_summaries.h"
#include "ssa_metrics.h"

#define EXACT_LIMIT (1ull << 53)

/* One summary key's accumulators. */
typedef struct key_acc {
  uint32_t op, group, used;
  uint64_t bytes; /* the key's (0 for all-to-alls) */
  size_t first;   /* its earliest-starting instance */
  uint64_t bytes_exact;
  int inexact; /* a partial sum past 2^53: summed again in time order */
  ssa_coll_summary s;
} key_acc;

typedef struct key_table {
  key_acc *v;
  size_t cap, used;
} key_table;

static uint64_t key_bytes(const ssa_coll_instance *c) {
  return c->op == STEPSCOPE_COLL_ALLTOALL ? 0 : c->bytes;
}

static key_acc *find_key(key_acc *v, size_t cap, uint32_t op, uint32_t group, uint64_t bytes) {
  size_t i = (size_t)sc_mix64(bytes ^ ((uint64_t)op << 32 | group)) & (cap - 1);
  while (v[i].used && (v[i].op != op || v[i].group != group || v[i].bytes != bytes))
    i = (i + 1) & (cap - 1);
  return &v[i];
}

static key_acc *key_of(key_table *t, const ssa_coll_instance *c) {
  if (2 * (t->used + 1) > t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 256;
    key_acc *v = calloc(cap, sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < t->cap; i++)
      if (t->v[i].used) *find_key(v, cap, t->v[i].op, t->v[i].group, t->v[i].bytes) = t->v[i];
    free(t->v);
    t->v = v;
    t->cap = cap;
  }
  key_acc *k = find_key(t->v, t->cap, c->op, c->group, key_bytes(c));
  if (!k->used) {
    t->used++;
    *k = (key_acc){
        .op = c->op, .group = c->group, .used = 1, .bytes = key_bytes(c), .first = SIZE_MAX};
    k->s.transfer_min = INT64_MAX;
  }
  return k;
}

static void add_instance(key_acc *k, const ssa_analysis *a, size_t i) {
  const ssa_coll_instance *in = &a->colls[i];
  if (k->first == SIZE_MAX || in->first_start_rel < a->colls[k->first].first_start_rel)
    k->first = i; /* instances come in order: the earliest made wins a tie */
  if (!in->complete) return;
  ssa_coll_summary *s = &k->s;
  s->count++;
  s->transfer_total += in->transfer;
  if (in->transfer < s->transfer_min) s->transfer_min = in->transfer;
  if (in->transfer > s->transfer_max) s->transfer_max = in->transfer;
  s->skew_total += in->skew;
  if (in->skew > s->skew_max) s->skew_max = in->skew;
  s->wait_total += in->total_wait;
  k->inexact |= in->bytes > EXACT_LIMIT || EXACT_LIMIT - in->bytes < k->bytes_exact;
  k->bytes_exact += in->bytes;
}

static int cmp_key(const void *pa, const void *pb) {
  const key_acc *a = *(const key_acc *const *)pa, *b = *(const key_acc *const *)pb;
  if (a->op != b->op) return a->op < b->op ? -1 : 1;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

static int cmp_start_then_index(const void *pa, const void *pb, void *colls) {
  const ssa_coll_instance *v = colls;
  size_t x = *(const size_t *)pa, y = *(const size_t *)pb;
  if (v[x].first_start_rel != v[y].first_start_rel)
    return v[x].first_start_rel < v[y].first_start_rel ? -1 : 1;
  return x < y ? -1 : x > y;
}

/* A key whose integer total is not its double sum: the double sum in time order. */
static int bytes_in_time_order(const ssa_analysis *a, const key_acc *k, double *total) {
  size_t n = 0, *idx = malloc(k->s.count * sizeof *idx);
  if (!idx) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->ncolls; i++) {
    const ssa_coll_instance *in = &a->colls[i];
    if (in->complete && in->op == k->op && in->group == k->group && key_bytes(in) == k->bytes)
      idx[n++] = i;
  }
  qsort_r(idx, n, sizeof *idx, cmp_start_then_index, a->colls);
  *total = 0;
  for (size_t i = 0; i < n; i++)
    *total += (double)a->colls[idx[i]].bytes;
  free(idx);
  return 0;
}

static int emit_summaries(ssa_analysis *a, key_table *t) {
  key_acc **order = malloc((t->used ? t->used : 1) * sizeof *order);
  if (!order) return STEPSCOPE_E_NOMEM;
  size_t n = 0;
  for (size_t i = 0; i < t->cap; i++)
    if (t->v[i].used && t->v[i].s.count) order[n++] = &t->v[i];
  qsort(order, n, sizeof *order, cmp_key);
  a->coll_summaries = malloc((n ? n : 1) * sizeof *a->coll_summaries);
  int rc = a->coll_summaries ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n && rc == 0; i++) {
    key_acc *k = order[i];
    const ssa_coll_instance *first = &a->colls[k->first];
    ssa_coll_summary *s = &a->coll_summaries[a->ncoll_summaries++];
    *s = k->s;
    s->op = first->op;
    s->group = first->group;
    s->bytes = first->bytes;
    double bytes_total = (double)k->bytes_exact;
    if (k->inexact) rc = bytes_in_time_order(a, k, &bytes_total);
    if (s->op == STEPSCOPE_COLL_ALLTOALL && s->count > 0)
      s->bytes = (uint64_t)(bytes_total / (double)s->count + 0.5);
    s->algbw = s->transfer_total > 0 ? bytes_total / (double)s->transfer_total : 0.0;
    s->busbw = s->algbw * ssa_busbw_factor(s->op, first->comm_size);
  }
  free(order);
  return rc;
}

static int cmp_instance_time(const void *pa, const void *pb) {
  const ssa_coll_instance *a = pa, *b = pb;
  if (a->first_start_rel != b->first_start_rel)
    return a->first_start_rel < b->first_start_rel ? -1 : 1;
  if (a->comm_id != b->comm_id) return a->comm_id < b->comm_id ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int in_match_order(const ssa_analysis *a) {
  for (size_t i = 1; i < a->ncolls; i++) {
    const ssa_coll_instance *p = &a->colls[i - 1], *c = &a->colls[i];
    if (p->comm_id > c->comm_id || (p->comm_id == c->comm_id && p->seq >= c->seq)) return 0;
  }
  return 1;
}

/* The instances by (first start, comm_id, seq): a stable radix sort by first start, 11 bits
 * a pass, of instances in (comm_id, seq) order, then the instances moved into place along
 * the permutation's cycles. qsort when they are in another order or memory is short. */
static void order_by_time(ssa_analysis *a) {
  size_t n = a->ncolls;
  uint64_t *key = malloc(2 * n * sizeof *key);
  uint32_t *idx = malloc(2 * n * sizeof *idx);
  if (!key || !idx || n > UINT32_MAX || !in_match_order(a)) {
    free(key);
    free(idx);
    qsort(a->colls, n, sizeof *a->colls, cmp_instance_time);
    return;
  }
  int64_t lo = a->colls[0].first_start_rel, hi = lo;
  for (size_t i = 0; i < n; i++) {
    if (a->colls[i].first_start_rel < lo) lo = a->colls[i].first_start_rel;
    if (a->colls[i].first_start_rel > hi) hi = a->colls[i].first_start_rel;
  }
  for (size_t i = 0; i < n; i++) {
    key[i] = (uint64_t)a->colls[i].first_start_rel - (uint64_t)lo;
    idx[i] = (uint32_t)i;
  }
  uint64_t *kf = key, *kt = key + n;
  uint32_t *xf = idx, *xt = idx + n;
  size_t count[2048];
  for (unsigned shift = 0; shift < 64 && ((uint64_t)hi - (uint64_t)lo) >> shift; shift += 11) {
    memset(count, 0, sizeof count);
    for (size_t i = 0; i < n; i++)
      count[(kf[i] >> shift) & 2047]++;
    for (size_t d = 0, start = 0; d < 2048; d++) {
      size_t c = count[d];
      count[d] = start;
      start += c;
    }
    for (size_t i = 0; i < n; i++) {
      size_t to = count[(kf[i] >> shift) & 2047]++;
      kt[to] = kf[i];
      xt[to] = xf[i];
    }
    uint64_t *tk = kf;
    kf = kt;
    kt = tk;
    uint32_t *tx = xf;
    xf = xt;
    xt = tx;
  }
  free(key);
  for (size_t i = 0; i < n; i++) { /* position i takes instance xf[i] */
    if (xf[i] == i) continue;
    ssa_coll_instance held = a->colls[i];
    size_t j = i;
    while (xf[j] != i) {
      size_t from = xf[j];
      a->colls[j] = a->colls[from];
      xf[j] = (uint32_t)j;
      j = from;
    }
    a->colls[j] = held;
    xf[j] = (uint32_t)j;
  }
  free(idx);
}

int ssa_summarize_collectives(ssa_analysis *a) {
  key_table t = {0};
  for (size_t i = 0; i < a->ncolls; i++) {
    key_acc *k = key_of(&t, &a->colls[i]);
    if (!k) {
      free(t.v);
      return STEPSCOPE_E_NOMEM;
    }
    add_instance(k, a, i);
  }
  int rc = emit_summaries(a, &t);
  free(t.v);
  if (rc == 0 && a->ncolls > 1) order_by_time(a);
  return rc;
}
