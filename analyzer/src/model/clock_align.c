/*
 * clock_align.c — puts all ranks on one time base.
 *
 * Step 1, clock anchors: each rank's anchors relate its trace clock to
 * CLOCK_REALTIME; the rank's anchor offset is the median over its anchors of
 * (realtime - trace). A rank without anchors whose trace clock is REALTIME
 * gets 0; otherwise it borrows the reference rank's offset (same host
 * assumed) with a warning.
 *
 * Step 2, refinement by collectives: all members leave a collective together,
 * so for every matched non-p2p collective instance (same comm_id and seq on
 * several ranks) the end times, after step 1, should coincide. For each pair
 * (a = lowest-numbered member, b = other member) the median over instances
 * of end_a - end_b is the correction of b relative to a. Corrections are
 * propagated from the reference rank (the lowest-numbered rank) through
 * these pairs; ranks not connected to it keep the anchor offset alone.
 * A collective's end is the end of the op that executed it when linked,
 * else its record's end.
 *
 * The run origin is the earliest aligned event of all ranks; every time in
 * the report and the export is (trace time + offset - origin).
 *
 * All of it reads, per rank, only what ssa_rank_align_input keeps of it: the
 * anchor offset, the earliest event and the ends of its non-p2p collective
 * records.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"
#include "sc_try.h"

typedef struct pair_diff {
  uint32_t a, b;
  int64_t diff;
} pair_diff;

static int cmp_pair(const void *pa, const void *pb) {
  const pair_diff *x = pa, *y = pb;
  if (x->a != y->a) return x->a < y->a ? -1 : 1;
  if (x->b != y->b) return x->b < y->b ? -1 : 1;
  return x->diff < y->diff ? -1 : x->diff > y->diff;
}

static int is_p2p(const ssa_coll *c) {
  return (c->flags & STEPSCOPE_COLL_F_P2P) || c->op == STEPSCOPE_COLL_SEND ||
         c->op == STEPSCOPE_COLL_RECV;
}

static int64_t earliest_event(const ssa_rank *r, int *any) {
  int64_t t = INT64_MAX;
  if (r->nops) t = r->ops[0].start < t ? r->ops[0].start : t;
  if (r->napis) t = r->apis[0].start < t ? r->apis[0].start : t;
  if (r->nranges) t = r->ranges[0].start < t ? r->ranges[0].start : t;
  if (r->ncounters) t = r->counters[0].time < t ? r->counters[0].time : t;
  for (size_t i = 0; i < r->ncolls; i++)
    t = r->colls[i].start < t ? r->colls[i].start : t;
  for (size_t i = 0; i < r->nsyncs; i++)
    t = r->syncs[i].start < t ? r->syncs[i].start : t;
  *any = t != INT64_MAX;
  return *any ? t : r->header_start;
}

int ssa_rank_align_input(const ssa_rank *r, ssa_rank_align *out) {
  memset(out, 0, sizeof *out);
  out->rank = r->rank;
  if (r->nanchors > 0) {
    int64_t *d = malloc(r->nanchors * sizeof *d);
    if (!d) return STEPSCOPE_E_NOMEM;
    for (size_t j = 0; j < r->nanchors; j++)
      d[j] = (int64_t)(r->anchors[j].realtime_ns - r->anchors[j].trace_ns);
    qsort(d, r->nanchors, sizeof *d, ssa_cmp_i64);
    out->anchor_offset = d[(r->nanchors - 1) / 2];
    free(d);
    out->has_offset = 1;
  } else if (r->clock_domain == STEPSCOPE_CLOCK_REALTIME) {
    out->has_offset = 1;
  }
  out->first_event = earliest_event(r, &out->any_event);
  size_t n = 0; /* p2p transfers do not end together: left out */
  for (size_t i = 0; i < r->ncolls; i++)
    n += !is_p2p(&r->colls[i]);
  if (n == 0) return 0;
  if (!(out->ends = malloc(n * sizeof *out->ends))) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->ncolls; i++) {
    const ssa_coll *c = &r->colls[i];
    if (is_p2p(c)) continue;
    int64_t end = c->op_index != SSA_NONE ? r->ops[c->op_index].end : c->end;
    out->ends[out->nends++] = (ssa_align_end){c->comm_id, c->seq, end};
  }
  return 0;
}

void ssa_rank_align_free(ssa_rank_align *a) {
  free(a->ends);
  memset(a, 0, sizeof *a);
}

/* A member's end after step 1. */
static int64_t anchored_end(const ssa_run *run, const ssa_rank_align *in,
                            const ssa_coll_member *m) {
  return in[m->rank_idx].ends[m->coll_idx].end + run->anchor_offset[m->rank_idx];
}

static int refine(ssa_run *run, const ssa_rank_align *in) {
  size_t n = 0;
  for (size_t i = 0; i < run->nranks; i++)
    n += in[i].nends;
  ssa_coll_member *s = malloc((n ? n : 1) * sizeof *s);
  if (!s) return STEPSCOPE_E_NOMEM;
  n = 0;
  for (size_t i = 0; i < run->nranks; i++)
    for (size_t j = 0; j < in[i].nends; j++)
      s[n++] =
          (ssa_coll_member){in[i].ends[j].comm_id, in[i].ends[j].seq, (uint32_t)i, (uint32_t)j};
  ssa_sort_coll_members(s, n);
  size_t npairs = 0, pcap = 0;
  pair_diff *pairs = NULL;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && s[e].comm_id == s[g].comm_id && s[e].seq == s[g].seq)
      e++;
    for (size_t m = g + 1; m < e; m++) {
      if (s[m].rank_idx == s[g].rank_idx) continue;
      if (ssa_grow((void **)&pairs, &pcap, npairs + 1, sizeof *pairs)) {
        free(s);
        free(pairs);
        return STEPSCOPE_E_NOMEM;
      }
      pairs[npairs++] = (pair_diff){s[g].rank_idx, s[m].rank_idx,
                                    anchored_end(run, in, &s[g]) - anchored_end(run, in, &s[m])};
    }
    g = e;
  }
  free(s);
  if (npairs > 1) qsort(pairs, npairs, sizeof *pairs, cmp_pair); /* pairs may be NULL when 0 */
  /* one edge per (a, b): the median difference, stored in the first entry */
  size_t nedges = 0;
  for (size_t g = 0; g < npairs;) {
    size_t e = g + 1;
    while (e < npairs && pairs[e].a == pairs[g].a && pairs[e].b == pairs[g].b)
      e++;
    pair_diff edge = pairs[g + (e - g - 1) / 2];
    run->refine_samples[edge.b] += (uint32_t)(e - g);
    run->refine_samples[edge.a] += (uint32_t)(e - g);
    pairs[nedges++] = edge;
    g = e;
  }
  unsigned char *known = calloc(run->nranks, 1);
  if (!known) {
    free(pairs);
    return STEPSCOPE_E_NOMEM;
  }
  size_t ref = 0;
  known[ref] = 1;
  for (int changed = 1; changed;) {
    changed = 0;
    for (size_t i = 0; i < nedges; i++) {
      const pair_diff *d = &pairs[i];
      if (known[d->a] && !known[d->b]) {
        run->refine_offset[d->b] = run->refine_offset[d->a] + d->diff;
        known[d->b] = 1;
        changed = 1;
      } else if (known[d->b] && !known[d->a]) {
        run->refine_offset[d->a] = run->refine_offset[d->b] - d->diff;
        known[d->a] = 1;
        changed = 1;
      }
    }
  }
  for (size_t i = 0; i < run->nranks; i++) {
    if (known[i]) {
      if (i != ref) run->refined = 1;
    } else if (run->refine_samples[i]) {
      ssa_run_warn(run,
                   "rank %d shares no collective with rank %d's group chain: its clock is aligned "
                   "by anchors only",
                   in[i].rank, in[ref].rank);
    }
  }
  free(known);
  free(pairs);
  return 0;
}

int ssa_run_align(ssa_run *run) {
  ssa_rank_align *in = calloc(run->nranks ? run->nranks : 1, sizeof *in);
  int rc = in ? 0 : STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < run->nranks && rc == 0; i++)
    if (run->ranks[i].align_input)
      in[i] = *run->ranks[i].align_input; /* kept when its events were dropped; borrowed */
    else
      rc = ssa_rank_align_input(&run->ranks[i], &in[i]);
  if (rc == 0) rc = ssa_run_align_inputs(run, in);
  for (size_t i = 0; in && i < run->nranks; i++)
    if (!run->ranks[i].align_input) ssa_rank_align_free(&in[i]);
  free(in);
  return rc;
}

int ssa_run_align_inputs(ssa_run *run, const ssa_rank_align *in) {
  size_t n = run->nranks;
  run->anchor_offset = calloc(n ? n : 1, sizeof *run->anchor_offset);
  run->refine_offset = calloc(n ? n : 1, sizeof *run->refine_offset);
  run->refine_samples = calloc(n ? n : 1, sizeof *run->refine_samples);
  if (!run->anchor_offset || !run->refine_offset || !run->refine_samples) return STEPSCOPE_E_NOMEM;
  if (n == 0) return 0;
  run->reference_rank = in[0].rank;
  /* step 1: anchors */
  int have_ref = 0;
  int64_t ref_base = 0;
  unsigned char *has = calloc(n, 1);
  if (!has) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < n; i++) {
    if (in[i].has_offset) {
      run->anchor_offset[i] = in[i].anchor_offset;
      has[i] = 1;
    }
    if (has[i] && !have_ref) {
      have_ref = 1;
      ref_base = run->anchor_offset[i];
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (has[i]) continue;
    run->anchor_offset[i] = ref_base;
    if (have_ref)
      ssa_run_warn(run,
                   "rank %d has no clock anchors: its trace clock is assumed to be the same as the "
                   "other ranks'",
                   in[i].rank);
  }
  free(has);
  /* step 2: collectives */
  SC_TRY(refine(run, in));
  run->origin = INT64_MAX;
  int any_event = 0;
  for (size_t i = 0; i < n; i++) {
    run->ranks[i].offset_ns = run->anchor_offset[i] + run->refine_offset[i];
    int64_t t = in[i].first_event + run->ranks[i].offset_ns;
    if (in[i].any_event && (!any_event || t < run->origin)) run->origin = t;
    any_event |= in[i].any_event;
  }
  if (!any_event) { /* first_event is the header's start then */
    run->origin = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
      int64_t t = in[i].first_event + run->ranks[i].offset_ns;
      if (t < run->origin) run->origin = t;
    }
  }
  return 0;
}
