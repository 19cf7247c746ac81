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
 * "other"), and an idle gap goes to the phase of the op that ends it (of the
 * first the host issued, when the host issued it after the gap began:
 * gap_phase), or to "host" (data loading and host work) when that op has no
 * phase. Each
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
 *
 * The walk itself reads no event: it asks for each rank's device time by
 * phase over a span of its clock, or between two of its step windows, and
 * takes the answers from a table (ssa_phase_requests) that a per-rank pass
 * fills from the rank's events (ssa_rank_phase_answers). A walk that asked
 * something unanswered records the question and is run again once the
 * answers are in (ssa_find_culprits: the direct walk's answers decide which
 * pipeline stages a chase asks about, so a few rounds); only a walk with
 * every answer gives the rows. The ranks' identity, layout and clock offset
 * come from their summaries.
 */
#include <stdlib.h>
#include <string.h>

#include "culprit_questions.h"
#include "ssa_metrics.h"

enum { SSA_MAX_CHASE_STAGES = 1024 }; /* the stages a victim chase compares, at most */

static int op_phase(const ssa_rank *r, const ssa_phase_ranges *p, const ssa_op *o) {
  if (o->launch == SSA_NONE) return -1;
  return ssa_phase_at(p, r->apis[o->launch].start);
}

/* How far past a gap's end an op still resumes the device with the one that ended it: 1 % of
 * the gap, at least the default launch-gap threshold. */
#define GAP_RESUME_MIN_NS 10000

/* The phase of an idle gap [a, ops[i].start) (the file's comment): of the op that ends it; but
 * when the host issued that work after the gap began, of the first of it the host issued,
 * among the ops that resume the device with it. After a host-side delay the host launches a
 * forward pass and then a later pass's receive; the receive's stream may wake first (the CPU
 * backend's stream threads, a GPU's idle NCCL stream), and the gap is still the forward's. An
 * op launched before the gap began waited for something else than the host: the rule is then
 * the first op's. */
static int gap_phase(const ssa_rank *r, const ssa_phase_ranges *p, size_t i, int64_t a) {
  int64_t b = r->ops[i].start, window = (b - a) / 100;
  if (window < GAP_RESUME_MIN_NS) window = GAP_RESUME_MIN_NS;
  const ssa_op *first = &r->ops[i];
  int64_t first_launch = INT64_MAX;
  for (size_t k = i; k < r->nops && k < i + 16 && r->ops[k].start <= b + window; k++) {
    const ssa_op *q = &r->ops[k];
    if (q->launch == SSA_NONE) continue;
    int64_t l = r->apis[q->launch].start;
    if (l >= a && l < first_launch) first_launch = l, first = q;
  }
  int ph = op_phase(r, p, first);
  return ph >= 0 ? ph : SSA_PHASE_HOST;
}

/* Device time of [t0, t1) (rank clock) by phase; out sums to t1 - t0. An op that
 * started before t0 covers its part after t0. */
static void partition(const ssa_rank *r, const ssa_phase_ranges *p, int64_t t0, int64_t t1,
                      int64_t out[SSA_PHASE_N]) {
  memset(out, 0, SSA_PHASE_N * sizeof *out);
  if (t1 <= t0) return;
  size_t lo = ssa_count_below(r->ops, r->nops, sizeof *r->ops, t0); /* the first op from t0 */
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
      out[gap_phase(r, p, i, cur)] += o->start - cur;
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

static int64_t to_rank(const ssa_analysis *a, const ssa_rank_summary *r, int64_t rel) {
  return rel - r->offset_ns + a->run->origin;
}

/* A walk over the late arrivals: the answers it reads, the questions it could not answer. */
typedef struct walk {
  ssa_analysis *a;
  ssa_phase_requests *q;
  int nomem;
} walk;

/* A rank's device time by phase (ssa_phase_request), from the answers; zeros, with the
 * question recorded for the next round, when it is not answered yet. */
static void phase_times(walk *wk, uint32_t idx, int kind, int64_t t0, int64_t t1,
                        int64_t out[SSA_PHASE_N]) {
  ssa_phase_requests *q = wk->q;
  ssa_phase_request key = {.rank_idx = idx, .kind = kind, .t0 = t0, .t1 = t1};
  const ssa_phase_request *hit = ssa_phase_request_find(q, idx, &key);
  if (hit && hit->answered) {
    memcpy(out, hit->time, sizeof hit->time);
    return;
  }
  memset(out, 0, SSA_PHASE_N * sizeof *out);
  if (ssa_grow((void **)&q->pending, &q->pending_cap, q->npending + 1, sizeof *q->pending))
    wk->nomem = 1;
  else
    q->pending[q->npending++] = key;
}

/* Adds, per phase, rank x's device time in [x0, x1) minus the median of its peers' times in
 * theirs (aligned run times) to diff. Time before a member's window starts, counted from the
 * earliest start of all, is host time (the host had not launched the step yet). */
static void add_excess(walk *wk, uint32_t x, int64_t x0, int64_t x1, const uint32_t *peer,
                       const int64_t *p0, const int64_t *p1, size_t np, int64_t diff[SSA_PHASE_N]) {
  const ssa_analysis *a = wk->a;
  int64_t mine[SSA_PHASE_N], peers[SSA_LATE_PEERS][SSA_PHASE_N], t0 = x0;
  for (size_t k = 0; k <= np; k++) {
    uint32_t idx = k < np ? peer[k] : x;
    const ssa_rank_summary *r = &a->ranks[idx].summary;
    int64_t s = k < np ? p0[k] : x0, e = k < np ? p1[k] : x1;
    phase_times(wk, idx, SSA_PHASE_SPAN, to_rank(a, r, s), to_rank(a, r, e),
                k < np ? peers[k] : mine);
    if (s < t0) t0 = s;
  }
  mine[SSA_PHASE_HOST] += x0 - t0;
  for (size_t k = 0; k < np; k++)
    peers[k][SSA_PHASE_HOST] += p0[k] - t0;
  for (int p = 0; p < SSA_PHASE_N; p++) {
    int64_t v[SSA_LATE_PEERS];
    for (size_t k = 0; k < np; k++)
      v[k] = peers[k][p];
    for (size_t k = 1; k < np; k++) /* insertion sort: at most SSA_LATE_PEERS values */
      for (size_t j = k; j > 0 && v[j - 1] > v[j]; j--) {
        int64_t t = v[j];
        v[j] = v[j - 1];
        v[j - 1] = t;
      }
    diff[p] += mine[p] - (np ? v[(np - 1) / 2] : 0);
  }
}

/* The windows an arrival is walked back over: from the previous meeting on the communicator
 * when every member was in it, else from each member's window of the same step. */
static size_t walk_windows(const walk *wk, const ssa_late *lt, int64_t step, int64_t *x0,
                           uint32_t *peer, int64_t *p0, int64_t *p1) {
  const ssa_analysis *a = wk->a;
  const ssa_rank_result *lr = &a->ranks[lt->rank_idx];
  int since = lt->since_rel != INT64_MIN;
  for (uint32_t k = 0; k < lt->npeers && since; k++)
    since = lt->peer_since_rel[k] != INT64_MIN;
  *x0 = since
            ? lt->since_rel
            : ssa_summary_rel_time(a, &lr->summary, lr->windows[step_number_index(lr, step)].start);
  size_t np = 0;
  for (uint32_t k = 0; k < lt->npeers; k++) {
    const ssa_rank_result *pr = &a->ranks[lt->peer_idx[k]];
    long ps = step_number_index(pr, step);
    if (!since && ps < 0) continue;
    peer[np] = lt->peer_idx[k];
    p0[np] = since ? lt->peer_since_rel[k]
                   : ssa_summary_rel_time(a, &pr->summary, pr->windows[ps].start);
    p1[np++] = lt->peer_arrival_rel[k];
  }
  return np;
}

/* Where each rank sits in the layout (the trainer's metadata), sorted for lookups: the
 * victim chase needs "the rank at stage k of the pipeline of rank x". */
typedef struct layout_pos {
  int dp, tp, cp, pp;
  uint32_t idx;
} layout_pos;

static int cmp_layout(const void *pa, const void *pb) {
  const layout_pos *a = pa, *b = pb;
  if (a->dp != b->dp) return a->dp < b->dp ? -1 : 1;
  if (a->tp != b->tp) return a->tp < b->tp ? -1 : 1;
  if (a->cp != b->cp) return a->cp < b->cp ? -1 : 1;
  return a->pp < b->pp ? -1 : a->pp > b->pp;
}

static layout_pos position_of(const ssa_rank_summary *r, uint32_t idx) {
  const ssa_meta_layout *l = &r->meta_layout;
  return (layout_pos){(int)ssa_meta_or(l->dp_rank, 0), (int)ssa_meta_or(l->tp_rank, 0),
                      (int)ssa_meta_or(l->cp_rank, 0), (int)ssa_meta_or(l->pp_rank, -1), idx};
}

/* The rank at stage `stage` of the pipeline of rank idx; -1 when there is none. */
static long rank_at_stage(const walk *wk, const layout_pos *sorted, uint32_t idx, int stage) {
  layout_pos key = position_of(&wk->a->ranks[idx].summary, idx);
  key.pp = stage;
  const layout_pos *hit = bsearch(&key, sorted, wk->a->nranks, sizeof *sorted, cmp_layout);
  return hit ? (long)hit->idx : -1;
}

/* A late rank whose excess was time spent inside earlier communication (phase collective)
 * was itself waiting: in a pipeline, another stage of its pipeline held it up. Each other
 * stage's rank is walked back over the late rank's window and compared with the ranks at that
 * stage in its peers' pipelines over theirs; the (stage, phase) that exceeds its counterparts
 * most, leaving communication aside, is charged. Returns 1 when one was found. */
static int chase_upstream(walk *wk, const layout_pos *sorted, const ssa_late *lt, int64_t step,
                          uint32_t *rank_idx, int *phase, int64_t *excess) {
  const ssa_meta_layout *ll = &wk->a->ranks[lt->rank_idx].summary.meta_layout;
  int pp = (int)ssa_meta_or(ll->pp, 1);
  int my_stage = (int)ssa_meta_or(ll->pp_rank, -1);
  if (!sorted || pp < 2 || my_stage < 0) return 0;
  uint32_t peer[SSA_LATE_PEERS], counterpart[SSA_LATE_PEERS];
  int64_t x0, p0[SSA_LATE_PEERS], p1[SSA_LATE_PEERS], best = 0;
  size_t np = walk_windows(wk, lt, step, &x0, peer, p0, p1);
  int found = 0;
  for (int stage = 0; stage < pp && stage < SSA_MAX_CHASE_STAGES; stage++) {
    if (stage == my_stage) continue;
    long x = rank_at_stage(wk, sorted, lt->rank_idx, stage);
    if (x < 0) continue;
    size_t nc = 0;
    int64_t c0[SSA_LATE_PEERS], c1[SSA_LATE_PEERS];
    for (size_t k = 0; k < np; k++) {
      long c = rank_at_stage(wk, sorted, peer[k], stage);
      if (c < 0 || c == x) continue;
      counterpart[nc] = (uint32_t)c;
      c0[nc] = p0[k];
      c1[nc++] = p1[k];
    }
    if (nc == 0) continue;
    int64_t diff[SSA_PHASE_N] = {0};
    add_excess(wk, (uint32_t)x, x0, lt->arrival_rel, counterpart, c0, c1, nc, diff);
    for (int p = 0; p < SSA_PHASE_N; p++)
      if (p != SSA_PHASE_COLLECTIVE && diff[p] > best) {
        best = diff[p];
        *rank_idx = (uint32_t)x;
        *phase = p;
        found = 1;
      }
  }
  if (found) *excess = best;
  return found;
}

static int build_layout_index(const ssa_analysis *a, layout_pos **out) {
  *out = NULL;
  int any = 0;
  for (size_t i = 0; i < a->nranks; i++)
    any |= ssa_meta_or(a->ranks[i].summary.meta_layout.pp, 1) > 1;
  if (!any) return 0;
  layout_pos *v = malloc(a->nranks * sizeof *v);
  if (!v) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks; i++)
    v[i] = position_of(&a->ranks[i].summary, (uint32_t)i);
  qsort(v, a->nranks, sizeof *v, cmp_layout);
  *out = v;
  return 0;
}

/* The longest any one peer waited for the late rank, beyond the schedule, over the late
 * arrivals keys[g, e) of one (rank, step): the step's delay as its peers felt it. */
static int64_t group_effect(const ssa_analysis *a, const late_key *keys, size_t g, size_t e) {
  enum { MAX_TRACKED = 64 };
  uint32_t who[MAX_TRACKED];
  int64_t sum[MAX_TRACKED], best = 0;
  size_t n = 0;
  for (size_t k = g; k < e; k++) {
    const ssa_late *lt = &a->lates[keys[k].late];
    for (uint32_t j = 0; j < lt->npeers; j++) {
      size_t t = 0;
      while (t < n && who[t] != lt->peer_idx[j])
        t++;
      if (t == n) {
        if (n == MAX_TRACKED) continue;
        who[n] = lt->peer_idx[j];
        sum[n++] = 0;
      }
      sum[t] += lt->peer_caused[j];
      if (sum[t] > best) best = sum[t];
    }
  }
  return best;
}

/* A stage's device time between two steps, rank clock: from the end of its last backward op
 * launched in window `prev` to the start of its first forward op launched in window `cur`
 * (optimizer, data loading, host work and the wait to start: what the schedule leaves out).
 * 0 when the rank launched no such ops. */
static int between_steps(const ssa_rank *r, const ssa_phase_ranges *p, const ssa_window *prev,
                         const ssa_window *cur, int64_t *t0, int64_t *t1) {
  size_t lo = ssa_count_below(r->ops, r->nops, sizeof *r->ops, prev->start);
  int64_t last_bwd = INT64_MIN, first_fwd = INT64_MAX, horizon = cur->end + (cur->end - cur->start);
  for (size_t i = lo; i < r->nops && r->ops[i].start < horizon; i++) {
    const ssa_op *o = &r->ops[i];
    if (o->launch == SSA_NONE) continue;
    int64_t at = r->apis[o->launch].start;
    int ph = ssa_phase_at(p, at);
    if (ph == SSA_PHASE_BACKWARD && at >= prev->start && at < prev->end && o->end > last_bwd)
      last_bwd = o->end;
    if (ph == SSA_PHASE_FORWARD && at >= cur->start && at < cur->end && o->start < first_fwd)
      first_fwd = o->start;
  }
  if (last_bwd == INT64_MIN || first_fwd == INT64_MAX || first_fwd <= last_bwd) return 0;
  *t0 = last_bwd;
  *t1 = first_fwd;
  return 1;
}

static int cmp_effect_key(const void *pa, const void *pb) {
  const ssa_culprit_effect *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  return a->step < b->step ? -1 : a->step > b->step;
}

/* Pipelines: a stage slow outside the schedule's items (optimizer, data loading, host work)
 * makes the other stages wait beyond what the schedule implies (the bubble's late_upstream
 * part) without ever arriving late at a collective with peers. Per pipeline and step whose
 * stages waited so, and in which no stage was charged through a collective already: every
 * stage's time between the previous step's last backward op and this step's first forward op
 * is split into phases, and the (stage, phase) exceeding the other stages' median most
 * (optimizer, host, copy or other) is charged; effect = the longest late_upstream of a stage
 * in the step, caused = their sum. */
static int pipeline_charges(walk *wk, const layout_pos *sorted, ssa_culprit_effect **eff, size_t *n,
                            size_t *cap) {
  static const int phases[] = {SSA_PHASE_OPTIMIZER, SSA_PHASE_HOST, SSA_PHASE_COPY,
                               SSA_PHASE_OTHER};
  ssa_analysis *a = wk->a;
  size_t nprior = *n;
  if (nprior > 1) qsort(*eff, nprior, sizeof **eff, cmp_effect_key);
  for (size_t i = 0; sorted && i < a->nranks; i++) {
    const ssa_meta_layout *l0 = &a->ranks[i].summary.meta_layout;
    int pp = (int)ssa_meta_or(l0->pp, 1);
    if (pp < 2 || pp > SSA_LATE_PEERS || ssa_meta_or(l0->pp_rank, -1) != 0) continue;
    uint32_t member[SSA_LATE_PEERS];
    int whole = 1;
    for (int k = 0; k < pp && whole; k++) {
      long x = rank_at_stage(wk, sorted, (uint32_t)i, k);
      whole = x >= 0 && a->ranks[x].nsteps > 0;
      if (whole) member[k] = (uint32_t)x;
    }
    if (!whole) continue;
    for (size_t si = 1; si < a->ranks[i].nsteps; si++) {
      int64_t step = a->ranks[i].windows[si].step, prev = a->ranks[i].windows[si - 1].step;
      /* per stage: its wait beyond the schedule (late_upstream), and the imbalance part with
       * the stage it names (a stage's slow start can read as its items' time) */
      int64_t gap[SSA_LATE_PEERS][SSA_PHASE_N], late[SSA_LATE_PEERS], imb[SSA_LATE_PEERS];
      int imb_stage[SSA_LATE_PEERS], ok = 1, charged = 0, waited = 0;
      for (int k = 0; k < pp && ok; k++) {
        const ssa_rank_result *rr = &a->ranks[member[k]];
        long c = step_number_index(rr, step), b = step_number_index(rr, prev);
        ssa_culprit_effect key = {.rank_idx = member[k], .step = step};
        charged |= bsearch(&key, *eff, nprior, sizeof key, cmp_effect_key) != NULL;
        ok = c >= 0 && b >= 0 && !charged;
        if (!ok) break;
        const ssa_window *w = &rr->windows[c];
        late[k] = w->has_bubble_causes ? w->bubble_cause[SSA_BUBBLE_LATE] : 0;
        imb[k] = w->has_bubble_causes ? w->bubble_cause[SSA_BUBBLE_IMBALANCE] : 0;
        imb_stage[k] = w->imbalance_stage;
        waited |= late[k] > 0 || imb[k] > 0;
        phase_times(wk, member[k], SSA_PHASE_BETWEEN_STEPS, b, c, gap[k]);
      }
      if (!ok || !waited) continue;
      int64_t best = 0;
      int who = -1, phase = -1;
      for (int k = 0; k < pp; k++)
        for (size_t q = 0; q < sizeof phases / sizeof *phases; q++) {
          int64_t v[SSA_LATE_PEERS];
          size_t nv = 0;
          for (int j = 0; j < pp; j++)
            if (j != k) v[nv++] = gap[j][phases[q]];
          qsort(v, nv, sizeof *v, ssa_cmp_i64);
          int64_t d = gap[k][phases[q]] - v[(nv - 1) / 2];
          if (d > best) {
            best = d;
            who = k;
            phase = phases[q];
          }
        }
      if (who < 0) continue;
      /* what the other stages waited for it: beyond the schedule, or as imbalance naming it */
      int64_t effect = 0, caused = 0;
      for (int k = 0; k < pp; k++) {
        if (k == who) continue;
        int64_t wait = late[k] + (imb_stage[k] == who ? imb[k] : 0);
        caused += wait;
        if (wait > effect) effect = wait;
      }
      if (effect <= 0) continue;
      if (ssa_grow((void **)eff, cap, *n + 1, sizeof **eff)) return STEPSCOPE_E_NOMEM;
      (*eff)[(*n)++] = (ssa_culprit_effect){.rank_idx = member[who],
                                            .phase = phase,
                                            .step = step,
                                            .effect = effect < best ? effect : best,
                                            .caused = caused,
                                            .excess = best,
                                            .instances = 1};
    }
  }
  return 0;
}

static int cmp_charge(const void *pa, const void *pb) {
  const ssa_culprit_effect *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  if (a->phase != b->phase) return a->phase < b->phase ? -1 : 1;
  if (a->step != b->step) return a->step < b->step ? -1 : 1;
  return b->via_victim - a->via_victim; /* a step's victim charges first */
}

/* The rows per (rank, phase): caused and instances summed; steps, victim steps and excess
 * counted once per step (a rank found late directly and through a victim in one step: the
 * step's largest excess). */
static int culprit_rows(ssa_analysis *a, ssa_culprit_effect *ch, size_t n) {
  if (n > 1) qsort(ch, n, sizeof *ch, cmp_charge);
  a->culprits = malloc((n ? n : 1) * sizeof *a->culprits);
  if (!a->culprits) return STEPSCOPE_E_NOMEM;
  int64_t step_excess = 0; /* the largest excess charged to the row in its current step */
  for (size_t i = 0; i < n; i++) {
    const ssa_culprit_effect *x = &ch[i];
    int same_row = i > 0 && ch[i - 1].rank_idx == x->rank_idx && ch[i - 1].phase == x->phase;
    if (!same_row)
      a->culprits[a->nculprits++] =
          (ssa_culprit){.rank = a->ranks[x->rank_idx].summary.rank, .phase = x->phase};
    ssa_culprit *c = &a->culprits[a->nculprits - 1];
    c->caused += x->caused;
    c->instances += x->instances;
    int new_step = !same_row || ch[i - 1].step != x->step || x->step < 0;
    c->steps += new_step;
    c->via_victim += x->via_victim && new_step;
    /* one step's excess once: found directly and through a victim, it is the same time */
    if (new_step || x->excess > step_excess) {
      c->excess += x->excess - (new_step ? 0 : step_excess);
      step_excess = x->excess;
    }
  }
  return 0;
}

int ssa_culprit_walk(ssa_analysis *a, ssa_phase_requests *q, size_t *unanswered) {
  int rc = STEPSCOPE_E_NOMEM;
  *unanswered = 0;
  q->npending = 0;
  late_key *keys = malloc((a->nlates ? a->nlates : 1) * sizeof *keys);
  walk wk = {a, q, 0};
  size_t neffects = 0, effects_cap = a->nlates;
  uint64_t steps_total = 0;
  ssa_culprit_effect *effects = malloc((effects_cap ? effects_cap : 1) * sizeof *effects);
  layout_pos *layout = NULL;
  if (!keys || !effects || build_layout_index(a, &layout)) goto out;
  for (size_t i = 0; i < a->nlates; i++) {
    const ssa_late *lt = &a->lates[i];
    const ssa_rank_result *rr = &a->ranks[lt->rank_idx];
    keys[i] = (late_key){lt->rank_idx, step_at(rr, to_rank(a, &rr->summary, lt->arrival_rel)), i};
  }
  if (a->nlates > 1) qsort(keys, a->nlates, sizeof *keys, cmp_key);
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
    uint32_t charged = keys[g].rank_idx;
    int phase = SSA_PHASE_OTHER, victim = 0;
    int64_t excess = 0, step = -1;
    if (keys[g].step >= 0) {
      step = a->ranks[charged].windows[keys[g].step].step;
      /* the arrivals on the largest one's communicator tile the late rank's time (once per
       * micro-batch, say): their excesses add up to the step's */
      int64_t diff[SSA_PHASE_N] = {0};
      for (size_t k = g; k < e; k++) {
        const ssa_late *lt = &a->lates[keys[k].late];
        if (lt->comm_id != a->lates[pick].comm_id) continue;
        uint32_t peer[SSA_LATE_PEERS];
        int64_t x0, p0[SSA_LATE_PEERS], p1[SSA_LATE_PEERS];
        size_t np = walk_windows(&wk, lt, step, &x0, peer, p0, p1);
        add_excess(&wk, lt->rank_idx, x0, lt->arrival_rel, peer, p0, p1, np, diff);
      }
      int64_t best = INT64_MIN;
      for (int p = 0; p < SSA_PHASE_N; p++)
        if (diff[p] > best) {
          best = diff[p];
          phase = p;
        }
      excess = best > 0 ? best : 0;
      if (phase == SSA_PHASE_COLLECTIVE) {
        victim = chase_upstream(&wk, layout, &a->lates[pick], step, &charged, &phase, &excess);
      }
    }
    /* the step's delay this rank explains: what its peers waited, up to its own excess; a
     * victim whose upstream rank was not found (phase collective) explains nothing */
    int64_t effect = group_effect(a, keys, g, e);
    if (effect > excess) effect = excess;
    if (phase == SSA_PHASE_COLLECTIVE) effect = 0;
    effects[neffects++] =
        (ssa_culprit_effect){charged, phase, victim, step, effect, caused, excess, e - g};
    steps_total++;
    g = e;
  }
  if (pipeline_charges(&wk, layout, &effects, &neffects, &effects_cap) || wk.nomem) goto out;
  if (q->npending) { /* a round with questions: its rows would be wrong */
    *unanswered = q->npending;
    rc = ssa_phase_requests_merge_pending(q, a->nranks);
    goto out;
  }
  a->culprit_steps_total = steps_total;
  if (culprit_rows(a, effects, neffects)) goto out;
  rc = ssa_judge_culprits(a, effects, neffects);
out:
  free(keys);
  free(effects);
  free(layout);
  return rc;
}

int ssa_rank_phase_answers(const ssa_analysis *a, size_t rank_idx, ssa_phase_requests *q) {
  if (!q->first) return 0; /* no question yet */
  size_t lo = q->first[rank_idx], hi = q->first[rank_idx + 1], todo = 0;
  for (size_t i = lo; i < hi; i++)
    todo += !q->v[i].answered;
  if (todo == 0) return 0;
  const ssa_rank_result *rr = &a->ranks[rank_idx];
  const ssa_rank *r = rr->rank;
  ssa_phase_ranges ph;
  if (ssa_phase_ranges_build(r, SSA_BACKWARD_WEIGHT_APART, &ph)) return STEPSCOPE_E_NOMEM;
  for (size_t i = lo; i < hi; i++) {
    ssa_phase_request *x = &q->v[i];
    if (x->answered) continue;
    int64_t t0 = x->t0, t1 = x->t1;
    if (x->kind == SSA_PHASE_SPAN)
      partition(r, &ph, t0, t1, x->time);
    else if (between_steps(r, &ph, &rr->windows[x->t0], &rr->windows[x->t1], &t0, &t1))
      partition(r, &ph, t0, t1, x->time);
    else
      memset(x->time, 0, sizeof x->time);
    x->answered = 1;
  }
  ssa_phase_ranges_free(&ph);
  return 0;
}

/* Record indices of a summary ordered by (communicator, seq): a record's previous instance on
 * its communicator is the one before it, when its seq is one less. */
static int cmp_rec_order(const void *pa, const void *pb, void *ctx) {
  const ssa_coll_rec *v = ctx, *a = &v[*(const uint32_t *)pa], *b = &v[*(const uint32_t *)pb];
  if (a->comm_id != b->comm_id) return a->comm_id < b->comm_id ? -1 : 1;
  return a->seq < b->seq ? -1 : a->seq > b->seq;
}

int ssa_rank_span_answers(const ssa_rank_result *rr, ssa_packed_answers *out) {
  const ssa_rank_summary *s = &rr->summary;
  memset(out, 0, sizeof *out);
  if (s->ncolls == 0 && rr->nsteps < 2) return 0;
  uint32_t *order = malloc((s->ncolls ? s->ncolls : 1) * sizeof *order);
  ssa_span_answer *v = malloc((s->ncolls + rr->nsteps + 1) * sizeof *v);
  ssa_phase_ranges ph;
  memset(&ph, 0, sizeof ph);
  if (!order || !v || ssa_phase_ranges_build(rr->rank, SSA_BACKWARD_WEIGHT_APART, &ph)) {
    free(order);
    free(v);
    return STEPSCOPE_E_NOMEM;
  }
  for (uint32_t i = 0; i < s->ncolls; i++)
    order[i] = i;
  qsort_r(order, s->ncolls, sizeof *order, cmp_rec_order, s->colls);
  size_t k = 0;
  for (size_t j = 0; j < s->ncolls; j++) {
    const ssa_coll_rec *c = &s->colls[order[j]], *prev = j ? &s->colls[order[j - 1]] : NULL;
    int64_t t0;
    if (prev && prev->comm_id == c->comm_id && prev->seq + 1 == c->seq)
      t0 = prev->end; /* it left the previous instance */
    else {
      long w = step_at(rr, c->start);
      if (w < 0) continue;
      t0 = rr->windows[w].start;
    }
    v[k] = (ssa_span_answer){.kind = SSA_PHASE_SPAN, .t0 = t0, .t1 = c->start};
    partition(rr->rank, &ph, t0, c->start, v[k++].time);
  }
  for (size_t w = 1; rr->pipeline && w < rr->nsteps; w++) { /* as ssa_rank_phase_answers does */
    int64_t t0, t1;
    v[k] =
        (ssa_span_answer){.kind = SSA_PHASE_BETWEEN_STEPS, .t0 = (int64_t)w - 1, .t1 = (int64_t)w};
    if (between_steps(rr->rank, &ph, &rr->windows[w - 1], &rr->windows[w], &t0, &t1))
      partition(rr->rank, &ph, t0, t1, v[k].time);
    k++;
  }
  qsort(v, k, sizeof *v, ssa_span_answer_cmp);
  size_t u = 0;
  for (size_t i = 0; i < k; i++)
    if (u == 0 || ssa_span_answer_cmp(&v[u - 1], &v[i]) != 0) v[u++] = v[i];
  ssa_phase_ranges_free(&ph);
  free(order);
  int rc = ssa_span_answers_pack(v, u, out);
  free(v);
  return rc;
}

/* The rank's unanswered questions in q that its answers made at load hold. */
static int answer_from_load(ssa_rank_result *rr, ssa_phase_requests *q, size_t rank_idx) {
  ssa_span_answer *v = NULL;
  int rc = ssa_span_answers_unpack(&rr->span_answers, &v);
  for (size_t i = q->first[rank_idx]; v && i < q->first[rank_idx + 1]; i++) {
    ssa_phase_request *x = &q->v[i];
    if (x->answered) continue;
    ssa_span_answer key = {.kind = x->kind, .t0 = x->t0, .t1 = x->t1};
    const ssa_span_answer *hit =
        bsearch(&key, v, rr->span_answers.n, sizeof key, ssa_span_answer_cmp);
    if (!hit) continue;
    memcpy(x->time, hit->time, sizeof x->time);
    x->answered = 1;
  }
  free(v);
  return rc == STEPSCOPE_E_NOMEM ? rc : 0; /* bytes not answers (checked at reading): asked */
}

void ssa_phase_requests_free(ssa_phase_requests *q) {
  free(q->v);
  free(q->first);
  free(q->pending);
  memset(q, 0, sizeof *q);
}

/* One rank's answers (a job of ssa_parallel_for): ranks own disjoint questions. */
typedef struct answer_job {
  ssa_analysis *a;
  ssa_phase_requests *q;
  int *rc;
} answer_job;

static int rank_answers(ssa_analysis *a, size_t i, void *questions) {
  return ssa_rank_phase_answers(a, i, questions);
}

/* Whether rank i has a question in q not answered yet. */
static int rank_asked(const ssa_phase_requests *q, size_t i) {
  for (size_t k = q->first[i]; k < q->first[i + 1]; k++)
    if (!q->v[k].answered) return 1;
  return 0;
}

static void answer_rank(void *ctx, size_t i) {
  answer_job *job = ctx;
  ssa_rank_result *rr = &job->a->ranks[i];
  job->rc[i] = 0;
  if (!rank_asked(job->q, i)) return;
  if (rr->span_answers.n && (job->rc[i] = answer_from_load(rr, job->q, i)) != 0) return;
  /* only a rank with an unanswered question is read (bounded mode) */
  if (rank_asked(job->q, i)) job->rc[i] = ssa_with_rank_events(job->a, i, rank_answers, job->q);
}

int ssa_find_culprits(ssa_analysis *a) {
  ssa_phase_requests q;
  memset(&q, 0, sizeof q);
  int *rcs = calloc(a->nranks ? a->nranks : 1, sizeof *rcs);
  int rc = rcs ? 0 : STEPSCOPE_E_NOMEM;
  /* each round answers at least one new question of a finite set: the rounds end */
  for (size_t unanswered = 1; rc == 0 && unanswered;) {
    rc = ssa_culprit_walk(a, &q, &unanswered);
    if (rc || !unanswered) break;
    answer_job job = {a, &q, rcs};
    ssa_parallel_for(a->nranks, ssa_workers(a->nranks, a->opt.threads), answer_rank, &job);
    for (size_t i = 0; i < a->nranks && !rc; i++)
      rc = rcs[i];
  }
  free(rcs);
  ssa_phase_requests_free(&q);
  return rc;
}
