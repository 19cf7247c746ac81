/*
 * test_coll_summaries.c — ssa_summarize_collectives (coll_summaries.c: summaries per key
 * accumulated in one pass, instances put in time order by a radix sort) against the
 * sort-based reference it replaced, written out here: a stable sort of the instances by
 * (op, group, bytes except for all-to-alls, first start), one summary per key with a complete
 * instance from the sorted group (its first instance's comm_size, a double bytes total summed
 * in that order), then a qsort by (first start, comm_id, seq). Random instances in matching
 * order ((comm_id, seq) ascending) and shuffled: all-to-alls with uneven bytes, incomplete
 * ones, equal first starts across keys and within one, comm sizes that differ within a key,
 * negative and 40-bit-wide start times, and bytes near and past 2^53 (the exact integer
 * total is not the double sum there). Summaries and the instances' order must be equal
 * field for field.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_summaries.h"
#include "ssa_metrics.h"

static int failures;
static uint64_t rng = 0x6a09e667f3bcc909ull;

static uint64_t next_u64(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

typedef struct tagged {
  ssa_coll_instance in;
  size_t made; /* position before sorting: the stable sort's tie-break */
} tagged;

static int cmp_reference_key(const void *pa, const void *pb) {
  const tagged *x = pa, *y = pb;
  const ssa_coll_instance *a = &x->in, *b = &y->in;
  if (a->op != b->op) return a->op < b->op ? -1 : 1;
  if (a->group != b->group) return a->group < b->group ? -1 : 1;
  if (a->op != STEPSCOPE_COLL_ALLTOALL && a->bytes != b->bytes) return a->bytes < b->bytes ? -1 : 1;
  if (a->first_start_rel != b->first_start_rel)
    return a->first_start_rel < b->first_start_rel ? -1 : 1;
  return x->made < y->made ? -1 : x->made > y->made;
}

static int same_key(const ssa_coll_instance *a, const ssa_coll_instance *b) {
  return a->op == b->op && a->group == b->group &&
         (a->op == STEPSCOPE_COLL_ALLTOALL || a->bytes == b->bytes);
}

static int cmp_time(const void *pa, const void *pb) {
  const ssa_coll_instance *a = pa, *b = pb;
  if (a->first_start_rel != b->first_start_rel)
    return a->first_start_rel < b->first_start_rel ? -1 : 1;
  if (a->comm_id != b->comm_id) return a->comm_id < b->comm_id ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* The reference: summaries into *out (*nout), instances sorted by time in place. */
static void reference(ssa_coll_instance *v, size_t n, ssa_coll_summary **out, size_t *nout) {
  tagged *t = malloc((n ? n : 1) * sizeof *t);
  *out = malloc((n ? n : 1) * sizeof **out);
  if (!t || !*out) abort();
  for (size_t i = 0; i < n; i++)
    t[i] = (tagged){v[i], i};
  qsort(t, n, sizeof *t, cmp_reference_key);
  *nout = 0;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1, complete = 0;
    while (e < n && same_key(&t[g].in, &t[e].in))
      e++;
    ssa_coll_summary s = {.op = t[g].in.op, .group = t[g].in.group, .bytes = t[g].in.bytes};
    s.transfer_min = INT64_MAX;
    double bytes_total = 0;
    for (size_t x = g; x < e; x++) {
      const ssa_coll_instance *in = &t[x].in;
      if (!in->complete) continue;
      complete++;
      s.count++;
      s.transfer_total += in->transfer;
      if (in->transfer < s.transfer_min) s.transfer_min = in->transfer;
      if (in->transfer > s.transfer_max) s.transfer_max = in->transfer;
      s.skew_total += in->skew;
      if (in->skew > s.skew_max) s.skew_max = in->skew;
      s.wait_total += in->total_wait;
      bytes_total += (double)in->bytes;
    }
    if (complete) {
      if (s.op == STEPSCOPE_COLL_ALLTOALL)
        s.bytes = (uint64_t)(bytes_total / (double)s.count + 0.5);
      s.algbw = s.transfer_total > 0 ? bytes_total / (double)s.transfer_total : 0.0;
      s.busbw = s.algbw * ssa_busbw_factor(s.op, t[g].in.comm_size);
      (*out)[(*nout)++] = s;
    }
    g = e;
  }
  free(t);
  qsort(v, n, sizeof *v, cmp_time);
}

static void run_case(size_t n, int wide, int huge, int shuffle) {
  ssa_coll_instance *v = calloc(n ? n : 1, sizeof *v);
  if (!v) abort();
  static const uint32_t ops[] = {STEPSCOPE_COLL_ALLREDUCE, STEPSCOPE_COLL_ALLGATHER,
                                 STEPSCOPE_COLL_ALLTOALL, STEPSCOPE_COLL_SEND};
  for (size_t i = 0; i < n; i++) {
    ssa_coll_instance *c = &v[i];
    c->comm_id = i / 7 + 1;
    c->seq = i % 7;
    c->op = ops[next_u64() % 4];
    c->group = (uint32_t)(next_u64() % 5);
    c->comm_size = 2 + (uint32_t)(next_u64() % 3);
    uint64_t big = (1ull << 53) / 4 + next_u64() % 1000;
    c->bytes = huge && next_u64() % 2 ? big : 1024u << (next_u64() % 4);
    c->first_start_rel =
        wide ? (int64_t)(next_u64() % (1ull << 40)) - (1ll << 39) : (int64_t)(next_u64() % 50) - 10;
    c->transfer = (int64_t)(next_u64() % 100000) + 1;
    c->skew = (int64_t)(next_u64() % 5000);
    c->total_wait = (int64_t)(next_u64() % 9000);
    c->complete = next_u64() % 5 != 0;
  }
  if (shuffle)
    for (size_t i = n; i > 1; i--) {
      size_t k = next_u64() % i;
      ssa_coll_instance t = v[i - 1];
      v[i - 1] = v[k];
      v[k] = t;
    }
  ssa_coll_instance *want = malloc((n ? n : 1) * sizeof *want);
  if (!want) abort();
  memcpy(want, v, n * sizeof *v);
  ssa_coll_summary *ws;
  size_t nws;
  reference(want, n, &ws, &nws);
  ssa_analysis a;
  memset(&a, 0, sizeof a);
  a.colls = v;
  a.ncolls = n;
  if (ssa_summarize_collectives(&a)) abort();
  const char *what = shuffle ? "shuffled" : "in matching order";
  if (a.ncoll_summaries != nws) {
    fprintf(stderr, "FAIL n %zu %s: %zu summaries, reference %zu\n", n, what, a.ncoll_summaries,
            nws);
    failures++;
  } else
    for (size_t i = 0; i < nws; i++)
      if (memcmp(&a.coll_summaries[i], &ws[i], sizeof ws[i])) {
        fprintf(stderr, "FAIL n %zu %s: summary %zu (op %u group %u) differs\n", n, what, i,
                ws[i].op, ws[i].group);
        failures++;
        break;
      }
  for (size_t i = 0; i < n; i++)
    if (memcmp(&v[i], &want[i], sizeof *v)) {
      fprintf(stderr, "FAIL n %zu %s: instance %zu out of time order\n", n, what, i);
      failures++;
      break;
    }
  free(a.coll_summaries);
  free(ws);
  free(want);
  free(v);
}

int main(void) {
  for (int shuffle = 0; shuffle < 2; shuffle++)
    for (int wide = 0; wide < 2; wide++)
      for (int huge = 0; huge < 2; huge++) {
        run_case(0, wide, huge, shuffle);
        run_case(1, wide, huge, shuffle);
        run_case(40, wide, huge, shuffle);
        run_case(5000, wide, huge, shuffle);
        run_case(60000, wide, huge, shuffle);
      }
  if (failures) {
    fprintf(stderr, "%d failure(s)\n", failures);
    return 1;
  }
  printf("coll summaries: equal to the sort-based reference\n");
  return 0;
}
