/*
 * late_upstream.c — whom a pipeline stage waited for (docs/metrics.md "Bubble causes", "late
 * upstream: rank R's phase"). The bubble's late_upstream part says how long a stage waited
 * beyond what the schedule and the measured op times imply; this names the rank it waited for
 * and what that rank was doing.
 *
 * A matched pipeline transfer (a send and its receive: the same comm_id and seq on two ranks,
 * coll_members.c) whose receive was posted before its send started kept the receiving stage
 * waiting from the receive's start to the send's start (aligned times). That wait is cut by
 * what the sending rank was doing meanwhile, in elementary pieces between its ops' starts and
 * ends, each piece going to the covering op of highest rank:
 *
 *   compute      its phase: the `forward` / `backward` / `backward_weight` (backward) range of
 *                the rank that holds the op's launch call, or its own start for a host op
 *                without one; other compute: other;
 *   a receive    of its own, before its send started (it waited itself): followed to that
 *                send's rank over the piece, the same way (as many hops as there are ranks),
 *                so that a delay is charged where it began;
 *   other comm   collective (the transfer's own time, a collective);
 *   no op        host (the host had not issued the work: data loading, host code, a gap).
 *
 * Per window of the receiving rank (by the receive's start) the (rank, phase) charged most is
 * the window's late upstream source (ssa_window.late_from_*), kept where the late_upstream
 * cause is positive.
 *
 * The cross-rank parts read only the ranks' summaries (docs/scale.md), so that the bounded
 * mode gives the same sources: the transfers' partners come from the summaries' records; a
 * per-rank pass finds the rank's receives that waited on a late send (its "waits"); then, in
 * rounds like the culprit walk's, each sending rank is asked what it did over a span (a
 * question: rank, span, hops so far), and answers from its events with the ordered pieces of
 * the span: a charge to one of its phases, or a span over which it waited itself on a late
 * send, which becomes a question to that send's rank in the next round. Once every question
 * is answered, each wait's answer is unfolded in order into its charges (the same charges, in
 * the same order, as one walk over every rank's events would give). Only ranks asked
 * something are read in a round (at most MAX_HOPS rounds). Before the rounds, each rank
 * waited on is read once to answer over the spans its partners waited on it (the spans'
 * answers, below); a question held by such a span that clips exactly is answered by clipping,
 * so the rounds ask only what no such span holds.
 */
#include <stdlib.h>
#include <string.h>

#include "rank_cross.h"
#include "ssa_metrics.h"

enum { MAX_HOPS = 64, MAX_ACTIVE = 64, MAX_CHARGES = 32 };

typedef ssa_upstream_wait up_wait; /* a receive's wait on a late send (rank_cross.h) */

/* A piece of an answer over [t0, t1), in the order of the span: `ns` charged to the asked
 * rank's `phase`, or (phase < 0) a span over which it waited on a late send of rank `sender`. */
typedef struct up_piece {
  int phase;
  uint32_t sender;
  int64_t ns, t0, t1;
} up_piece;

/* What rank_idx did over [t0, t1) (aligned), reached after `hops` hops; answered: its
 * pieces are pieces[first, first + n) of the rank's. */
typedef struct up_question {
  uint32_t rank_idx;
  int hops;
  int64_t t0, t1;
  int answered;
  size_t first, n;
} up_question;

/* A span [t0, t1) over which a partner's receive waited on a send of this rank: the rank
 * answers over it once, its pieces are pieces[first, first + n), when `exact` (the answer
 * clips exactly: see answer_spans). */
typedef struct up_span {
  int64_t t0, t1;
  size_t first, n;
  int exact;
} up_span;

/* Per rank: its pipeline transfers' partners, its waits, its answers' pieces and the spans
 * its partners waited on it (sorted by t0, t1). */
typedef struct up_rank {
  uint32_t *partner_rank, *partner_coll; /* per collective record, SSA_NONE: none */
  up_wait *waits;
  size_t nwaits, waits_cap;
  up_piece *pieces;
  size_t npieces, pieces_cap;
  up_span *spans;
  size_t nspans, spans_cap;
} up_rank;

struct ssa_upstream {
  ssa_analysis *a;
  up_rank *ur;
  up_question *q; /* by (rank_idx, hops, t0, t1), unique */
  size_t nq, q_cap;
  size_t *first; /* [nranks + 1]: rank i's questions are q[first[i], first[i + 1]) */
};

typedef struct charge {
  uint32_t rank_idx;
  int phase;
  int64_t ns;
} charge;

typedef struct charges {
  charge v[MAX_CHARGES];
  size_t n;
} charges;

static void add_charge(charges *c, uint32_t rank_idx, int phase, int64_t ns) {
  if (ns <= 0) return;
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].rank_idx == rank_idx && c->v[i].phase == phase) {
      c->v[i].ns += ns;
      return;
    }
  if (c->n < MAX_CHARGES) c->v[c->n++] = (charge){rank_idx, phase, ns};
}

/* The phase of compute op o of rank r: of the range holding its launch call (or its own start,
 * a host op without one); other when none. */
static int compute_phase(const ssa_rank *r, const ssa_phase_ranges *p, const ssa_op *o) {
  int ph = ssa_phase_at(p, o->launch != SSA_NONE ? r->apis[o->launch].start : o->start);
  return ph >= 0 ? ph : SSA_PHASE_OTHER;
}

/* The aligned start of the send that collective record j of rank x, a pipeline receive with a
 * partner, was matched with (its summary's start), *sender the sending rank; INT64_MIN where
 * record j is no such receive. */
static int64_t partner_send_at(const ssa_upstream *u, size_t x, size_t j, uint32_t *sender) {
  const ssa_analysis *a = u->a;
  const ssa_rank_summary *own = &a->ranks[x].summary;
  const up_rank *ur = &u->ur[x];
  if (!ur->partner_rank || j >= own->ncolls || own->colls[j].op != STEPSCOPE_COLL_RECV ||
      ur->partner_rank[j] == SSA_NONE)
    return INT64_MIN;
  const ssa_rank_summary *s = &a->ranks[ur->partner_rank[j]].summary;
  *sender = ur->partner_rank[j];
  return ssa_summary_rel_time(a, s, s->colls[ur->partner_coll[j]].start);
}

/* The aligned start of the send that pipeline receive o of rank x waited for, when it started
 * after o did (else INT64_MIN); *sender gets its rank. */
static int64_t late_send(const ssa_upstream *u, uint32_t x, const ssa_op *o, uint32_t *sender) {
  uint32_t pr;
  int64_t at = o->coll == SSA_NONE ? INT64_MIN : partner_send_at(u, x, o->coll, &pr);
  if (at == INT64_MIN || at <= ssa_rel_time(u->a->run, u->a->ranks[x].rank, o->start))
    return INT64_MIN;
  *sender = pr;
  return at;
}

/* Adds a piece to rank x's answer; a charge to the same phase as the piece before it joins
 * that piece (the same charges when unfolded). */
static int add_piece(up_rank *ur, size_t first, up_piece p) {
  up_piece *last = ur->npieces > first ? &ur->pieces[ur->npieces - 1] : NULL;
  if (p.phase >= 0 && last && last->phase == p.phase) {
    last->ns += p.ns;
    last->t1 = p.t1;
    return 0;
  }
  if (ssa_grow((void **)&ur->pieces, &ur->pieces_cap, ur->npieces + 1, sizeof *ur->pieces))
    return STEPSCOPE_E_NOMEM;
  ur->pieces[ur->npieces++] = p;
  return 0;
}

/* What rank x did over [t0, t1) (aligned), as pieces of its answer (see the top). */
static int answer(const ssa_upstream *u, uint32_t x, const ssa_phase_ranges *ph,
                  const up_question *qn, up_rank *out) {
  const ssa_rank *r = u->a->ranks[x].rank;
  int64_t t0 = qn->t0, t1 = qn->t1;
  size_t first_piece = out->npieces;
  int64_t off = r->offset_ns - u->a->run->origin; /* rank time + off = aligned */
  size_t lo = ssa_count_below(r->ops, r->nops, sizeof *r->ops, t0 - off);
  size_t first = lo > MAX_ACTIVE ? lo - MAX_ACTIVE : 0; /* ops running at t0 started before */
  /* the ops over [t0, t1): their indices; then elementary pieces between their bounds */
  uint32_t act[MAX_ACTIVE];
  size_t nact = 0;
  int64_t cur = t0;
  size_t i = first;
  while (cur < t1) {
    /* admit the ops starting by cur; drop those ended */
    for (; i < r->nops && r->ops[i].start + off <= cur; i++)
      if (r->ops[i].end + off > cur && r->ops[i].end > r->ops[i].start && nact < MAX_ACTIVE)
        act[nact++] = (uint32_t)i;
    size_t kept = 0;
    for (size_t k = 0; k < nact; k++)
      if (r->ops[act[k]].end + off > cur) act[kept++] = act[k];
    nact = kept;
    /* the piece ends at the next bound */
    int64_t next = t1;
    if (i < r->nops && r->ops[i].start + off < next) next = r->ops[i].start + off;
    int best = 0; /* 3 compute, 2 a late receive, 1 other comm */
    const ssa_op *pick = NULL;
    int64_t wait_end = INT64_MIN;
    uint32_t sender = SSA_NONE;
    for (size_t k = 0; k < nact; k++) {
      const ssa_op *o = &r->ops[act[k]];
      if (o->end + off < next) next = o->end + off;
      int rankv = o->cls == SSA_CLS_COMPUTE ? 3 : o->cls == SSA_CLS_COMM ? 1 : 0;
      uint32_t s = SSA_NONE;
      int64_t at = rankv == 1 && qn->hops < MAX_HOPS ? late_send(u, x, o, &s) : INT64_MIN;
      if (at > cur) {
        rankv = 2;
        if (at < next) next = at;
      }
      if (rankv > best) {
        best = rankv, pick = o;
        wait_end = at, sender = s;
      }
    }
    up_piece p = {.phase = best == 3   ? compute_phase(r, ph, pick)
                           : best == 1 ? SSA_PHASE_COLLECTIVE
                                       : SSA_PHASE_HOST,
                  .ns = next - cur,
                  .t0 = cur,
                  .t1 = next};
    if (best == 2 && wait_end > cur)
      p = (up_piece){.phase = -1, .sender = sender, .t0 = cur, .t1 = next};
    if (add_piece(out, first_piece, p)) return STEPSCOPE_E_NOMEM;
    cur = next;
  }
  return 0;
}

static int cmp_question(const void *pa, const void *pb) {
  const up_question *a = pa, *b = pb;
  if (a->rank_idx != b->rank_idx) return a->rank_idx < b->rank_idx ? -1 : 1;
  if (a->hops != b->hops) return a->hops < b->hops ? -1 : 1;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

static up_question *find_question(const ssa_upstream *u, uint32_t rank_idx, int hops, int64_t t0,
                                  int64_t t1) {
  up_question key = {.rank_idx = rank_idx, .hops = hops, .t0 = t0, .t1 = t1};
  return u->nq ? bsearch(&key, u->q, u->nq, sizeof key, cmp_question) : NULL;
}

/* The partners of every pipeline transfer: per instance of two members, each the other's. */
static int find_partners(ssa_upstream *u) {
  ssa_coll_member *m;
  size_t n;
  if (ssa_summary_coll_members(u->a, &m, &n)) return STEPSCOPE_E_NOMEM;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && m[e].comm_id == m[g].comm_id && m[e].seq == m[g].seq)
      e++;
    if (e - g == 2 && m[g].rank_idx != m[g + 1].rank_idx)
      for (int k = 0; k < 2; k++) {
        const ssa_coll_member *me = &m[g + k], *other = &m[g + 1 - k];
        up_rank *ur = &u->ur[me->rank_idx];
        const ssa_coll_rec *cl = &u->a->ranks[me->rank_idx].summary.colls[me->coll_idx];
        if (!ur->partner_rank || !(cl->flags & STEPSCOPE_COLL_F_PIPELINE)) continue;
        ur->partner_rank[me->coll_idx] = other->rank_idx;
        ur->partner_coll[me->coll_idx] = other->coll_idx;
      }
    g = e;
  }
  free(m);
  return 0;
}

/* The window of rank result rr holding rank time t: its index, or -1. */
static long window_at(const ssa_rank_result *rr, int64_t t) {
  for (size_t s = 0; s < rr->nsteps; s++)
    if (rr->windows[s].start <= t && t < rr->windows[s].end) return (long)s;
  return -1;
}

static void name_source(ssa_window *w, const charges *c, const ssa_analysis *a) {
  w->late_from_rank = -1;
  w->late_from_phase = -1;
  w->late_from_ns = 0;
  if (!w->has_bubble_causes || w->bubble_cause[SSA_BUBBLE_LATE] <= 0) return;
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].ns > w->late_from_ns) {
      w->late_from_ns = c->v[i].ns;
      w->late_from_rank = a->ranks[c->v[i].rank_idx].rank->rank;
      w->late_from_phase = c->v[i].phase;
    }
}

int ssa_late_upstream_clear(ssa_analysis *a) {
  int any = 0;
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    for (size_t s = 0; s < rr->nsteps; s++)
      rr->windows[s].late_from_rank = rr->windows[s].late_from_phase = -1;
    rr->totals.late_from_rank = rr->totals.late_from_phase = -1;
    any |= rr->pipeline;
  }
  return any;
}

void ssa_upstream_free(ssa_upstream *u) {
  if (!u) return;
  for (size_t i = 0; u->ur && i < u->a->nranks; i++) {
    free(u->ur[i].partner_rank);
    free(u->ur[i].partner_coll);
    free(u->ur[i].waits);
    free(u->ur[i].pieces);
    free(u->ur[i].spans);
  }
  free(u->ur);
  free(u->q);
  free(u->first);
  free(u);
}

int ssa_upstream_begin(ssa_analysis *a, ssa_upstream **out) {
  *out = NULL;
  if (!ssa_late_upstream_clear(a)) return 0;
  ssa_upstream *u = calloc(1, sizeof *u);
  if (!u) return STEPSCOPE_E_NOMEM;
  u->a = a;
  u->ur = calloc(a->nranks, sizeof *u->ur);
  u->first = calloc(a->nranks + 1, sizeof *u->first);
  if (!u->ur || !u->first) goto nomem;
  for (size_t i = 0; i < a->nranks; i++) {
    size_t nc = a->ranks[i].summary.ncolls;
    up_rank *ur = &u->ur[i];
    if (!a->ranks[i].pipeline || nc == 0) continue;
    ur->partner_rank = malloc(nc * sizeof *ur->partner_rank);
    ur->partner_coll = malloc(nc * sizeof *ur->partner_coll);
    if (!ur->partner_rank || !ur->partner_coll) goto nomem;
    for (size_t k = 0; k < nc; k++)
      ur->partner_rank[k] = ur->partner_coll[k] = SSA_NONE;
  }
  if (find_partners(u)) goto nomem;
  *out = u;
  return 0;
nomem:
  ssa_upstream_free(u);
  return STEPSCOPE_E_NOMEM;
}

int ssa_upstream_partner_sends(const ssa_upstream *u, size_t rank_idx, ssa_partner_send **out,
                               size_t *n) {
  size_t ncolls = u->a->ranks[rank_idx].summary.ncolls, k = 0;
  uint32_t pr;
  *out = NULL;
  *n = 0;
  for (size_t j = 0; j < ncolls; j++)
    k += partner_send_at(u, rank_idx, j, &pr) != INT64_MIN;
  if (k == 0) return 0;
  if (!(*out = malloc(k * sizeof **out))) return STEPSCOPE_E_NOMEM;
  for (size_t j = 0; j < ncolls; j++) {
    int64_t at = partner_send_at(u, rank_idx, j, &pr);
    if (at != INT64_MIN) (*out)[(*n)++] = (ssa_partner_send){(uint32_t)j, pr, at};
  }
  return 0;
}

int ssa_find_upstream_waits(const ssa_rank_result *rr, int64_t rel_shift,
                            const ssa_partner_send *sends, size_t nsends, ssa_upstream_wait **waits,
                            size_t *n, size_t *cap) {
  const ssa_rank *r = rr->rank;
  size_t ncolls = rr->summary.ncolls;
  if (nsends == 0) return 0;
  uint32_t *send_of = malloc(ncolls * sizeof *send_of); /* per record: its send, or none */
  if (!send_of) return STEPSCOPE_E_NOMEM;
  for (size_t j = 0; j < ncolls; j++)
    send_of[j] = SSA_NONE;
  for (size_t k = 0; k < nsends; k++)
    send_of[sends[k].record] = (uint32_t)k;
  int rc = 0;
  for (size_t i = 0; i < r->nops && rc == 0; i++) {
    const ssa_op *o = &r->ops[i];
    uint32_t k = o->coll != SSA_NONE && o->coll < ncolls ? send_of[o->coll] : SSA_NONE;
    /* the send started after the receive did: the receive waited for it */
    if (k == SSA_NONE || sends[k].at <= o->start + rel_shift) continue;
    long s = window_at(rr, o->start);
    if (s < 0) continue;
    if (ssa_grow((void **)waits, cap, *n + 1, sizeof **waits))
      rc = STEPSCOPE_E_NOMEM;
    else
      (*waits)[(*n)++] = (up_wait){(size_t)s, o->start + rel_shift, sends[k].at, sends[k].sender};
  }
  free(send_of);
  return rc;
}

int ssa_upstream_rank_waits(ssa_upstream *u, size_t rank_idx) {
  const ssa_rank_result *rr = &u->a->ranks[rank_idx];
  up_rank *ur = &u->ur[rank_idx];
  if (!rr->pipeline || !ur->partner_rank) return 0;
  ssa_partner_send *sends;
  size_t n;
  if (ssa_upstream_partner_sends(u, rank_idx, &sends, &n)) return STEPSCOPE_E_NOMEM;
  int rc = ssa_find_upstream_waits(rr, rr->rank->offset_ns - u->a->run->origin, sends, n,
                                   &ur->waits, &ur->nwaits, &ur->waits_cap);
  free(sends);
  return rc;
}

void ssa_upstream_take_waits(ssa_upstream *u, size_t rank_idx, ssa_upstream_wait **waits,
                             size_t *n) {
  up_rank *ur = &u->ur[rank_idx];
  free(ur->waits);
  ur->waits = *waits;
  ur->nwaits = ur->waits_cap = *n;
  *waits = NULL;
  *n = 0;
}

/* The spans' answers (docs/scale.md "What the merge still reads"). Every question a chain asks
 * rank x lies within a span over which a partner's receive waited on a late send of x (the
 * piece of the partner's answer it comes from). Where answer() over a span is the restriction
 * of its answer over any span holding it, x answers once over each such span, in one pass
 * before the rounds, and the chains are followed there by clipping: the rounds ask only what
 * no such span holds, reading each rank once instead of once per hop. */

static int cmp_span(const void *pa, const void *pb) {
  const up_span *a = pa, *b = pb;
  if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
  return a->t1 < b->t1 ? -1 : a->t1 > b->t1;
}

/* The spans each rank's partners waited on it, from the summaries (a pipeline receive that
 * started before its send did: the span of late_send), sorted and unique per rank. */
static int collect_spans(ssa_upstream *u) {
  const ssa_analysis *a = u->a;
  for (size_t x = 0; x < a->nranks; x++) {
    const ssa_rank_summary *own = &a->ranks[x].summary;
    for (size_t j = 0; j < own->ncolls; j++) {
      uint32_t pr;
      int64_t t1 = partner_send_at(u, x, j, &pr);
      if (t1 == INT64_MIN) continue;
      int64_t t0 = ssa_summary_rel_time(a, own, own->colls[j].start);
      up_rank *to = &u->ur[pr];
      if (t1 <= t0) continue;
      if (ssa_grow((void **)&to->spans, &to->spans_cap, to->nspans + 1, sizeof *to->spans))
        return STEPSCOPE_E_NOMEM;
      to->spans[to->nspans++] = (up_span){.t0 = t0, .t1 = t1};
    }
  }
  for (size_t x = 0; x < a->nranks; x++) {
    up_rank *ur = &u->ur[x];
    size_t k = 0;
    if (ur->nspans) qsort(ur->spans, ur->nspans, sizeof *ur->spans, cmp_span);
    for (size_t i = 0; i < ur->nspans; i++)
      if (k == 0 || cmp_span(&ur->spans[k - 1], &ur->spans[i]) != 0) ur->spans[k++] = ur->spans[i];
    ur->nspans = k;
  }
  return 0;
}

/* An op of a rank that runs on after MAX_ACTIVE later ops started: answer() keeps at most
 * MAX_ACTIVE ops, admitted from MAX_ACTIVE ops before its span's start, so an answer may
 * depend on its span's start only where such an op runs (rank time, bounds included). */
typedef struct long_op {
  int64_t start, end_max; /* end_max: the latest end of this and the earlier long ops */
} long_op;

static int find_long_ops(const ssa_rank *r, long_op **out, size_t *n) {
  size_t cap = 0;
  *out = NULL;
  *n = 0;
  for (size_t j = 0; j < r->nops; j++) {
    const ssa_op *o = &r->ops[j];
    if (o->end <= o->start ||
        ssa_count_at_most(r->ops, r->nops, sizeof *r->ops, o->end) - j <= MAX_ACTIVE)
      continue;
    if (ssa_grow((void **)out, &cap, *n + 1, sizeof **out)) return STEPSCOPE_E_NOMEM;
    int64_t before = *n ? (*out)[*n - 1].end_max : INT64_MIN;
    (*out)[(*n)++] = (long_op){o->start, o->end > before ? o->end : before};
  }
  return 0;
}

/* Rank x's answers over its spans (a job of ssa_with_rank_events). A span where no long op
 * runs clips exactly: every op running in it is admitted from any start at or before its
 * own (it started at most MAX_ACTIVE ops before any later time it runs at) and at most
 * MAX_ACTIVE are ever held, so the answer over a part of it is its answer's restriction. */
static int answer_spans(ssa_analysis *a, size_t x, void *pu) {
  ssa_upstream *u = pu;
  up_rank *ur = &u->ur[x];
  const ssa_rank *r = a->ranks[x].rank;
  int64_t off = r->offset_ns - a->run->origin; /* rank time + off = aligned */
  long_op *lng;
  size_t nlong;
  ssa_phase_ranges ph;
  if (find_long_ops(r, &lng, &nlong)) return STEPSCOPE_E_NOMEM;
  if (ssa_phase_ranges_build(r, SSA_BACKWARD_WEIGHT_AS_BACKWARD, &ph)) {
    free(lng);
    return STEPSCOPE_E_NOMEM;
  }
  int rc = 0;
  for (size_t k = 0; k < ur->nspans && !rc; k++) {
    up_span *sp = &ur->spans[k];
    size_t c = ssa_count_at_most(lng, nlong, sizeof *lng, sp->t1 - off);
    sp->exact = c == 0 || lng[c - 1].end_max < sp->t0 - off;
    if (!sp->exact) continue;
    const up_question qn = {.rank_idx = (uint32_t)x, .hops = 1, .t0 = sp->t0, .t1 = sp->t1};
    sp->first = ur->npieces;
    rc = answer(u, (uint32_t)x, &ph, &qn, ur);
    sp->n = ur->npieces - sp->first;
  }
  ssa_phase_ranges_free(&ph);
  free(lng);
  return rc;
}

/* The span of rank x that clips exactly and holds [t0, t1), or NULL. */
static const up_span *exact_span(const ssa_upstream *u, uint32_t x, int64_t t0, int64_t t1) {
  const up_rank *ur = &u->ur[x];
  size_t k = ssa_count_at_most(ur->spans, ur->nspans, sizeof *ur->spans, t0);
  while (k > 0 && (ur->spans[k - 1].t1 < t1 || !ur->spans[k - 1].exact))
    k--;
  return k ? &ur->spans[k - 1] : NULL;
}

/* The first of span sp's pieces that ends after t0. */
static size_t first_piece_after(const up_rank *ur, const up_span *sp, int64_t t0) {
  const up_piece *p = ur->pieces + sp->first;
  size_t lo = 0, hi = sp->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (p[mid].t1 <= t0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* A piece's part within [t0, t1). */
static up_piece clip_piece(up_piece p, int64_t t0, int64_t t1) {
  p.t0 = p.t0 > t0 ? p.t0 : t0;
  p.t1 = p.t1 < t1 ? p.t1 : t1;
  p.ns = p.t1 - p.t0;
  return p;
}

/* Adds a question not asked before to the new ones, q[u->nq, u->nq + *added). */
static int ask(ssa_upstream *u, uint32_t rank_idx, int hops, int64_t t0, int64_t t1,
               size_t *added) {
  if (find_question(u, rank_idx, hops, t0, t1)) return 0;
  if (ssa_grow((void **)&u->q, &u->q_cap, u->nq + *added + 1, sizeof *u->q))
    return STEPSCOPE_E_NOMEM;
  u->q[u->nq + (*added)++] = (up_question){.rank_idx = rank_idx, .hops = hops, .t0 = t0, .t1 = t1};
  return 0;
}

/* Follows the chain from what rank x did over [t0, t1) at hop `hops`: through a span that
 * clips exactly and holds it, else an answered question's pieces; else asks it. */
static int ask_unheld(ssa_upstream *u, uint32_t x, int hops, int64_t t0, int64_t t1,
                      size_t *added) {
  const up_span *sp = exact_span(u, x, t0, t1);
  const up_question *found = sp ? NULL : find_question(u, x, hops, t0, t1);
  if (!sp && !found) return ask(u, x, hops, t0, t1, added);
  if (!sp && !found->answered) return 0;
  const up_rank *ur = &u->ur[x];
  const up_piece *p = ur->pieces + (sp ? sp->first : found->first);
  size_t n = sp ? sp->n : found->n; /* ask() may move the questions: not found after it */
  for (size_t j = sp ? first_piece_after(ur, sp, t0) : 0; j < n && p[j].t0 < t1; j++) {
    up_piece c = sp ? clip_piece(p[j], t0, t1) : p[j];
    if (c.phase < 0 && hops < MAX_HOPS && ask_unheld(u, c.sender, hops + 1, c.t0, c.t1, added))
      return STEPSCOPE_E_NOMEM;
  }
  return 0;
}

int ssa_upstream_round(ssa_upstream *u, size_t *asked) {
  size_t added = 0;
  *asked = 0;
  /* what each wait's sender did over it, and what those ranks waited on in turn */
  for (size_t i = 0; i < u->a->nranks; i++)
    for (size_t k = 0; k < u->ur[i].nwaits; k++) {
      const up_wait *w = &u->ur[i].waits[k];
      if (ask_unheld(u, w->sender, 1, w->t0, w->t1, &added)) return STEPSCOPE_E_NOMEM;
    }
  /* new questions may repeat each other, never an older one: sorted, unique */
  size_t n = u->nq + added, k = 0;
  if (n) qsort(u->q, n, sizeof *u->q, cmp_question); /* q is NULL before any question */
  for (size_t i = 0; i < n; i++)
    if (k == 0 || cmp_question(&u->q[k - 1], &u->q[i]) != 0) u->q[k++] = u->q[i];
  *asked = k - u->nq;
  u->nq = k;
  for (size_t r = 0, i = 0; r <= u->a->nranks; r++) {
    while (i < k && u->q[i].rank_idx < r)
      i++;
    u->first[r] = i;
  }
  return 0;
}

int ssa_upstream_rank_asked(const ssa_upstream *u, size_t rank_idx) {
  for (size_t k = u->first[rank_idx]; k < u->first[rank_idx + 1]; k++)
    if (!u->q[k].answered) return 1;
  return 0;
}

int ssa_upstream_rank_answers(ssa_upstream *u, size_t rank_idx) {
  if (!ssa_upstream_rank_asked(u, rank_idx)) return 0;
  ssa_phase_ranges ph;
  if (ssa_phase_ranges_build(u->a->ranks[rank_idx].rank, SSA_BACKWARD_WEIGHT_AS_BACKWARD, &ph))
    return STEPSCOPE_E_NOMEM;
  int rc = 0;
  for (size_t k = u->first[rank_idx]; k < u->first[rank_idx + 1] && !rc; k++) {
    up_question *qn = &u->q[k];
    if (qn->answered) continue;
    qn->first = u->ur[rank_idx].npieces;
    rc = answer(u, (uint32_t)rank_idx, &ph, qn, &u->ur[rank_idx]);
    qn->n = u->ur[rank_idx].npieces - qn->first;
    qn->answered = 1;
  }
  ssa_phase_ranges_free(&ph);
  return rc;
}

/* The charges of what rank x did over [t0, t1), reached after `hops` hops, unfolded in order
 * into out (the same as ask_unheld's way: a span's answer clipped, else a question's), its
 * waits followed the same way (answer() follows none past MAX_HOPS: there the receive is
 * other comm). */
static void unfold(const ssa_upstream *u, uint32_t x, int hops, int64_t t0, int64_t t1,
                   charges *out) {
  const up_span *sp = exact_span(u, x, t0, t1);
  const up_question *qn = sp ? NULL : find_question(u, x, hops, t0, t1);
  if (!sp && !(qn && qn->answered)) return;
  const up_rank *ur = &u->ur[x];
  const up_piece *p = ur->pieces + (sp ? sp->first : qn->first);
  size_t n = sp ? sp->n : qn->n;
  for (size_t j = sp ? first_piece_after(ur, sp, t0) : 0; j < n && p[j].t0 < t1; j++) {
    up_piece c = sp ? clip_piece(p[j], t0, t1) : p[j];
    if (c.phase >= 0)
      add_charge(out, x, c.phase, c.ns);
    else if (hops >= MAX_HOPS)
      add_charge(out, x, SSA_PHASE_COLLECTIVE, c.ns);
    else
      unfold(u, c.sender, hops + 1, c.t0, c.t1, out);
  }
}

int ssa_upstream_name_sources(ssa_upstream *u) {
  ssa_analysis *a = u->a;
  size_t most_steps = 0;
  for (size_t i = 0; i < a->nranks; i++)
    if (a->ranks[i].nsteps > most_steps) most_steps = a->ranks[i].nsteps;
  charges *per_window = malloc((most_steps ? most_steps : 1) * sizeof *per_window);
  if (!per_window) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < a->nranks; i++) {
    ssa_rank_result *rr = &a->ranks[i];
    const up_rank *ur = &u->ur[i];
    if (!rr->pipeline || !ur->partner_rank) continue;
    charges total = {.n = 0};
    for (size_t s = 0; s < rr->nsteps; s++)
      per_window[s].n = 0;
    for (size_t k = 0; k < ur->nwaits; k++) {
      const up_wait *w = &ur->waits[k];
      charges one = {.n = 0};
      unfold(u, w->sender, 1, w->t0, w->t1, &one);
      for (size_t c = 0; c < one.n; c++) {
        add_charge(&per_window[w->window], one.v[c].rank_idx, one.v[c].phase, one.v[c].ns);
        add_charge(&total, one.v[c].rank_idx, one.v[c].phase, one.v[c].ns);
      }
    }
    for (size_t s = 0; s < rr->nsteps; s++)
      name_source(&rr->windows[s], &per_window[s], a);
    name_source(&rr->totals, &total, a);
  }
  free(per_window);
  return 0;
}

/* The passes of ssa_late_upstream_sources (jobs of ssa_parallel_for). */
typedef struct answers_job {
  ssa_upstream *u;
  int *rc;
} answers_job;

static int rank_answers(ssa_analysis *a, size_t i, void *u) {
  (void)a;
  return ssa_upstream_rank_answers(u, i);
}

static void answer_rank(void *ctx, size_t i) {
  answers_job *j = ctx; /* only a rank asked something is read (the bounded mode) */
  j->rc[i] =
      ssa_upstream_rank_asked(j->u, i) ? ssa_with_rank_events(j->u->a, i, rank_answers, j->u) : 0;
}

static void answer_spans_of_rank(void *ctx, size_t i) {
  answers_job *j = ctx; /* only a rank waited on is read */
  j->rc[i] = j->u->ur[i].nspans ? ssa_with_rank_events(j->u->a, i, answer_spans, j->u) : 0;
}

static int first_error(const int *rcs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (rcs[i]) return rcs[i];
  return 0;
}

int ssa_late_upstream_sources(ssa_upstream *u) {
  if (!u) return 0;
  ssa_analysis *a = u->a;
  int *rcs = calloc(a->nranks ? a->nranks : 1, sizeof *rcs);
  int rc = rcs ? 0 : STEPSCOPE_E_NOMEM, any_wait = 0;
  answers_job job = {u, rcs};
  size_t workers = ssa_workers(a->nranks, a->opt.threads);
  for (size_t i = 0; i < a->nranks; i++)
    any_wait |= u->ur[i].nwaits > 0;
  if (rc == 0 && any_wait && (rc = collect_spans(u)) == 0) { /* each rank waited on: once */
    ssa_parallel_for(a->nranks, workers, answer_spans_of_rank, &job);
    rc = first_error(rcs, a->nranks);
  }
  /* then rounds for what no span holds, each one hop further (MAX_HOPS at most): they end */
  for (size_t asked = 1; rc == 0 && asked;) {
    rc = ssa_upstream_round(u, &asked);
    if (rc || !asked) break;
    ssa_parallel_for(a->nranks, workers, answer_rank, &job);
    rc = first_error(rcs, a->nranks);
  }
  if (rc == 0) rc = ssa_upstream_name_sources(u);
  free(rcs);
  return rc;
}
