/*
 * culprits.c — culprit and victim: for every late arrival that made others
 * wait beyond what the schedule implies (collectives.c notes them), walk
 * back on the late rank to the phase that made it late compared with its
 * peers in the same step (docs/metrics.md "Collectives").
 *
 * A rank's device time since the members last met (when it left the
 * communicator's previous instance; else from the start of its step
 * window) to its arrival at the collective is cut into phases, in one walk over its ops by start:
 * time an op covers goes to the op's phase (communication ops: "collective",
 * an earlier collective; copies and memsets: "copy"; others: the host range
 * forward / backward / optimizer that contains the op's launch call, else
 * "other"), and an idle gap goes to the phase of the op that ends it, or to
 * "host" (data loading and host work) when that op has no phase. Each
 * time slice counts once, for the op that started first. The culprit phase
 * is the one where the late rank spent the most time beyond the median of
 * its peers (the other members, in their own windows of the same step).
 * Time before a member's step window starts, counted from the earliest
 * aligned window start among the members compared, is "host" too (the
 * host had not launched the step yet: data loading, host work).
 * Late arrivals are grouped per (late rank, step): the group's largest
 * caused wait picks the instance that is walked back, and the group's whole
 * caused wait is charged to (rank, phase); per (rank, phase) the report
 * gives the waits caused, the steps in which it recurred and the instances.
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

const char *const ssa_phase_names[SSA_PHASE_N] = {"forward", "backward",   "optimizer", "host",
                                                  "copy",    "collective", "other"};

typedef struct phase_range {
  int64_t start, end;
  int phase;
} phase_range;

typedef struct rank_phases {
  phase_range *r;
  size_t n;
  int built;
} rank_phases;

static int phase_of_name(const char *n) {
  if (!strcmp(n, "forward")) return SSA_PHASE_FORWARD;
  if (!strcmp(n, "backward")) return SSA_PHASE_BACKWARD;
  if (!strcmp(n, "optimizer")) return SSA_PHASE_OPTIMIZER;
  return -1;
}

static int build_phases(const ssa_rank *r, rank_phases *p) {
  p->built = 1;
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++)
    n += phase_of_name(ssa_rank_str(r, r->ranges[i].name)) >= 0;
  if (n == 0) return 0;
  p->r = malloc(n * sizeof *p->r);
  if (!p->r) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->nranges; i++) {
    int ph = phase_of_name(ssa_rank_str(r, r->ranges[i].name));
    if (ph >= 0) p->r[p->n++] = (phase_range){r->ranges[i].start, r->ranges[i].end, ph};
  }
  return 0; /* ranges are sorted by start (rank_finish.c) */
}

/* The phase range containing host time t (the latest-starting one). */
static int phase_at(const rank_phases *p, int64_t t) {
  size_t lo = 0, hi = p->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->r[mid].start <= t)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t k = lo, tries = 0; k-- > 0 && tries < 8; tries++)
    if (p->r[k].end > t) return p->r[k].phase;
  return -1;
}

static int op_phase(const ssa_rank *r, const rank_phases *p, const ssa_op *o) {
  if (o->launch == SSA_NONE) return -1;
  return phase_at(p, r->apis[o->launch].start);
}

/* Device time of [t0, t1) (rank clock) by phase; out sums to t1 - t0. An op that
 * started before t0 covers its part after t0. */
static void partition(const ssa_rank *r, const rank_phases *p, int64_t t0, int64_t t1,
                      int64_t out[SSA_PHASE_N]) {
  memset(out, 0, SSA_PHASE_N * sizeof *out);
  if (t1 <= t0) return;
  size_t lo = 0, hi = r->nops;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->ops[mid].start < t0)
      lo = mid + 1;
    else
      hi = mid;
  }
  int64_t cur = t0;
  /* ops already running at t0 (a few back: ops are sorted by start, not end) */
  for (size_t i = lo, k = 0; i-- > 0 && k < 64; k++) {
    const ssa_op *o = &r->ops[i];
    if (o->end <= cur) continue;
    int64_t e = o->end < t1 ? o->end : t1;
    int ph = op_phase(r, p, o);
    out[o->cls == SSA_CLS_COMM                                 ? SSA_PHASE_COLLECTIVE
        : o->cls == SSA_CLS_MEMCPY || o->cls == SSA_CLS_MEMSET ? SSA_PHASE_COPY
        : ph >= 0                                              ? ph
                                                               : SSA_PHASE_OTHER] += e - cur;
    cur = e;
  }
  for (size_t i = lo; i < r->nops && r->ops[i].start < t1; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->end <= o->start) continue;
    int ph = op_phase(r, p, o);
    if (o->start > cur) {
      out[ph >= 0 ? ph : SSA_PHASE_HOST] += o->start - cur;
      cur = o->start;
    }
    int64_t e = o->end < t1 ? o->end : t1;
    if (e > cur) {
      int cls = o->cls == SSA_CLS_COMM                                 ? SSA_PHASE_COLLECTIVE
                : o->cls == SSA_CLS_MEMCPY || o->cls == SSA_CLS_MEMSET ? SSA_PHASE_COPY
                : ph >= 0                                              ? ph
                                                                       : SSA_PHASE_OTHER;
      out[cls] += e - cur;
      cur = e;
    }
  }
  if (t1 > cur) out[SSA_PHASE_HOST] += t1 - cur; /* waiting for the host to launch the arrival */
}

/* The selected step window of a rank containing rank time t (-1: none). */
static long step_at(const ssa_rank_result *rr, int64_t t) {
  long best = -1;
  for (size_t s = 0; s < rr->nsteps; s++)
    if (rr->windows[s].start <= t && t < rr->windows[s].end &&
        (best < 0 || rr->windows[s].start > rr->windows[best].start))
      best = (long)s;
  return best;
}

static long step_number_index(const ssa_rank_result *rr, int64_t number) {
  for (size_t s = 0; s < rr->nsteps; s++)
    if (rr->windows[s].step == number) return (long)s;
  return -1;
}

typedef struct late_key {
  uint32_t rank_idx;
  long step;
  size_t late;
} late_key;

static int cmp_key(const void *pa, const void *pb) {
  const late_key *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  return a->late < b->late ? -1 : a->late > b->late;
}

static int64_t to_rank(const ssa_analysis *a, const ssa_rank *r, int64_t rel) {
  return rel - r->offset_ns + a->run->origin;
}

int ssa_find_culprits(ssa_analysis *a) {
  if (a->nlates == 0) return 0;
  int rc = STEPSCOPE_E_NOMEM;
  late_key *keys = malloc(a->nlates * sizeof *keys);
  rank_phases *ph = calloc(a->nranks, sizeof *ph);
  /* per (rank, phase): caused, excess, steps, instances */
  ssa_culprit *acc = calloc(a->nranks * SSA_PHASE_N, sizeof *acc);
  if (!keys || !ph || !acc) goto out;
  for (size_t i = 0; i < a->nlates; i++) {
    const ssa_late *lt = &a->lates[i];
    const ssa_rank_result *rr = &a->ranks[lt->rank_idx];
    keys[i] = (late_key){lt->rank_idx, step_at(rr, to_rank(a, rr->rank, lt->arrival_rel)), i};
  }
  qsort(keys, a->nlates, sizeof *keys, cmp_key);
  for (size_t g = 0; g < a->nlates;) {
    size_t e = g + 1;
    while (e < a->nlates && keys[e].rank_idx == keys[g].rank_idx && keys[e].step == keys[g].step)
      e++;
    size_t pick = keys[g].late;
    int64_t caused = 0;
    for (size_t k = g; k < e; k++) {
      caused += a->lates[keys[k].late].caused;
      if (a->lates[keys[k].late].caused > a->lates[pick].caused) pick = keys[k].late;
    }
    const ssa_late *lt = &a->lates[pick];
    const ssa_rank_result *lr = &a->ranks[lt->rank_idx];
    int phase = SSA_PHASE_OTHER;
    int64_t excess = 0;
    if (keys[g].step >= 0) {
      int64_t mine[SSA_PHASE_N], peers[SSA_LATE_PEERS][SSA_PHASE_N];
      if (!ph[lt->rank_idx].built && build_phases(lr->rank, &ph[lt->rank_idx])) goto out;
      const ssa_window *w = &lr->windows[keys[g].step];
      /* from the previous meeting on this communicator when every member was in it, else
       * from each member's step window start */
      int since = lt->since_rel != INT64_MIN;
      for (uint32_t k = 0; k < lt->npeers && since; k++)
        since = lt->peer_since_rel[k] != INT64_MIN;
      int64_t my_start = since ? lt->since_rel : ssa_rel_time(a->run, lr->rank, w->start),
              t0 = my_start;
      partition(lr->rank, &ph[lt->rank_idx], to_rank(a, lr->rank, my_start),
                to_rank(a, lr->rank, lt->arrival_rel), mine);
      int64_t peer_start[SSA_LATE_PEERS];
      size_t np = 0;
      for (uint32_t k = 0; k < lt->npeers; k++) {
        const ssa_rank_result *pr = &a->ranks[lt->peer_idx[k]];
        long ps = step_number_index(pr, w->step);
        if (!since && ps < 0) continue;
        if (!ph[lt->peer_idx[k]].built && build_phases(pr->rank, &ph[lt->peer_idx[k]])) goto out;
        peer_start[np] =
            since ? lt->peer_since_rel[k] : ssa_rel_time(a->run, pr->rank, pr->windows[ps].start);
        partition(pr->rank, &ph[lt->peer_idx[k]], to_rank(a, pr->rank, peer_start[np]),
                  to_rank(a, pr->rank, lt->peer_arrival_rel[k]), peers[np]);
        if (peer_start[np] < t0) t0 = peer_start[np];
        np++;
      }
      /* a step started later than the others' (aligned): host time before its first op */
      mine[SSA_PHASE_HOST] += my_start - t0;
      for (size_t k = 0; k < np; k++)
        peers[k][SSA_PHASE_HOST] += peer_start[k] - t0;
      int64_t best = INT64_MIN;
      for (int p = 0; p < SSA_PHASE_N; p++) {
        int64_t med = 0;
        if (np) {
          int64_t v[SSA_LATE_PEERS];
          for (size_t k = 0; k < np; k++)
            v[k] = peers[k][p];
          qsort(v, np, sizeof *v, ssa_cmp_i64);
          med = v[(np - 1) / 2];
        }
        if (mine[p] - med > best) {
          best = mine[p] - med;
          phase = p;
        }
      }
      excess = best > 0 ? best : 0;
    }
    ssa_culprit *c = &acc[lt->rank_idx * SSA_PHASE_N + (size_t)phase];
    c->rank = lr->rank->rank;
    c->phase = phase;
    c->caused += caused;
    c->excess += excess;
    c->steps++;
    c->instances += e - g;
    a->culprit_steps_total++;
    g = e;
  }
  size_t n = 0;
  for (size_t i = 0; i < a->nranks * SSA_PHASE_N; i++)
    n += acc[i].steps > 0;
  a->culprits = malloc((n ? n : 1) * sizeof *a->culprits);
  if (!a->culprits) goto out;
  for (size_t i = 0; i < a->nranks * SSA_PHASE_N; i++)
    if (acc[i].steps) a->culprits[a->nculprits++] = acc[i];
  for (size_t i = 1; i < a->nculprits; i++) /* by caused wait, descending (few rows) */
    for (size_t j = i; j > 0 && a->culprits[j].caused > a->culprits[j - 1].caused; j--) {
      ssa_culprit t = a->culprits[j];
      a->culprits[j] = a->culprits[j - 1];
      a->culprits[j - 1] = t;
    }
  rc = 0;
out:
  if (ph)
    for (size_t i = 0; i < a->nranks; i++)
      free(ph[i].r);
  free(ph);
  free(keys);
  free(acc);
  return rc;
}
