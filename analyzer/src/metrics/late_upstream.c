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
 */
#include <stdlib.h>
#include <string.h>

#include "ssa_metrics.h"

enum { MAX_HOPS = 64, MAX_ACTIVE = 64, MAX_CHARGES = 32 };

/* Per rank: its pipeline transfers' partners and its phase ranges. */
typedef struct up_rank {
  uint32_t *partner_rank, *partner_coll; /* per collective record, SSA_NONE: none */
  int64_t (*phase)[3];                   /* start, end, phase, by start */
  size_t nphase;
} up_rank;

typedef struct charge {
  uint32_t rank_idx;
  int phase;
  int64_t ns;
} charge;

typedef struct charges {
  charge v[MAX_CHARGES];
  size_t n;
} charges;

typedef struct ctx {
  const ssa_analysis *a;
  up_rank *ur;
} ctx;

static void add_charge(charges *c, uint32_t rank_idx, int phase, int64_t ns) {
  if (ns <= 0) return;
  for (size_t i = 0; i < c->n; i++)
    if (c->v[i].rank_idx == rank_idx && c->v[i].phase == phase) {
      c->v[i].ns += ns;
      return;
    }
  if (c->n < MAX_CHARGES) c->v[c->n++] = (charge){rank_idx, phase, ns};
}

static int phase_of_range(const char *n) {
  if (!strcmp(n, "forward")) return SSA_PHASE_FORWARD;
  if (!strcmp(n, "backward") || !strcmp(n, "backward_weight")) return SSA_PHASE_BACKWARD;
  if (!strcmp(n, "optimizer")) return SSA_PHASE_OPTIMIZER;
  return -1;
}

static int build_phases(const ssa_rank *r, up_rank *u) {
  size_t n = 0;
  for (size_t i = 0; i < r->nranges; i++)
    n += phase_of_range(ssa_rank_str(r, r->ranges[i].name)) >= 0;
  u->phase = malloc((n ? n : 1) * sizeof *u->phase);
  if (!u->phase) return STEPSCOPE_E_NOMEM;
  for (size_t i = 0; i < r->nranges; i++) {
    int ph = phase_of_range(ssa_rank_str(r, r->ranges[i].name));
    if (ph >= 0) {
      int64_t *p = u->phase[u->nphase++];
      p[0] = r->ranges[i].start, p[1] = r->ranges[i].end, p[2] = ph;
    }
  }
  return 0; /* ranges are sorted by start (rank_finish.c) */
}

/* The phase of compute op o of rank x: of the range holding its launch call (or its own start,
 * a host op without one); other when none. */
static int compute_phase(const ctx *c, uint32_t x, const ssa_op *o) {
  const ssa_rank *r = c->a->ranks[x].rank;
  const up_rank *u = &c->ur[x];
  int64_t t = o->launch != SSA_NONE ? r->apis[o->launch].start : o->start;
  size_t k = ssa_count_at_most(u->phase, u->nphase, sizeof *u->phase, t);
  for (size_t tries = 0; k-- > 0 && tries < 8; tries++)
    if (u->phase[k][1] > t) return (int)u->phase[k][2];
  return SSA_PHASE_OTHER;
}

/* The aligned start of the send that pipeline receive o of rank x waited for, when it started
 * after o did (else INT64_MIN); *sender gets its rank. */
static int64_t late_send(const ctx *c, uint32_t x, const ssa_op *o, uint32_t *sender) {
  const ssa_rank *r = c->a->ranks[x].rank;
  const up_rank *u = &c->ur[x];
  if (!u->partner_rank || o->coll == SSA_NONE || o->coll >= r->ncolls) return INT64_MIN;
  const ssa_coll *rc = &r->colls[o->coll];
  uint32_t pr = u->partner_rank[o->coll];
  if (rc->op != STEPSCOPE_COLL_RECV || pr == SSA_NONE) return INT64_MIN;
  const ssa_rank *s = c->a->ranks[pr].rank;
  const ssa_coll *sc = &s->colls[u->partner_coll[o->coll]];
  int64_t at =
      ssa_rel_time(c->a->run, s, sc->op_index != SSA_NONE ? s->ops[sc->op_index].start : sc->start);
  if (at <= ssa_rel_time(c->a->run, r, o->start)) return INT64_MIN;
  *sender = pr;
  return at;
}

/* What rank x did over [t0, t1) (aligned), charged to c (see the top). */
static void walk(const ctx *c, uint32_t x, int64_t t0, int64_t t1, int hops, charges *out) {
  const ssa_rank *r = c->a->ranks[x].rank;
  int64_t off = r->offset_ns - c->a->run->origin; /* rank time + off = aligned */
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
      int64_t at = rankv == 1 && hops < MAX_HOPS ? late_send(c, x, o, &s) : INT64_MIN;
      if (at > cur) {
        rankv = 2;
        if (at < next) next = at;
      }
      if (rankv > best) {
        best = rankv, pick = o;
        wait_end = at, sender = s;
      }
    }
    if (best == 3)
      add_charge(out, x, compute_phase(c, x, pick), next - cur);
    else if (best == 2 && wait_end > cur)
      walk(c, sender, cur, next, hops + 1, out);
    else
      add_charge(out, x, best == 1 ? SSA_PHASE_COLLECTIVE : SSA_PHASE_HOST, next - cur);
    cur = next;
  }
}

/* The partners of every pipeline transfer: per instance of two members, each the other's. */
static int find_partners(const ctx *c) {
  ssa_coll_member *m;
  size_t n;
  if (ssa_run_coll_members(c->a->run, &m, &n)) return STEPSCOPE_E_NOMEM;
  for (size_t g = 0; g < n;) {
    size_t e = g + 1;
    while (e < n && m[e].comm_id == m[g].comm_id && m[e].seq == m[g].seq)
      e++;
    if (e - g == 2 && m[g].rank_idx != m[g + 1].rank_idx)
      for (int k = 0; k < 2; k++) {
        const ssa_coll_member *me = &m[g + k], *other = &m[g + 1 - k];
        up_rank *u = &c->ur[me->rank_idx];
        const ssa_coll *cl = &c->a->ranks[me->rank_idx].rank->colls[me->coll_idx];
        if (!u->partner_rank || !(cl->flags & STEPSCOPE_COLL_F_PIPELINE)) continue;
        u->partner_rank[me->coll_idx] = other->rank_idx;
        u->partner_coll[me->coll_idx] = other->coll_idx;
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

/* One rank's waits on late sends, charged per window; the totals get their sum. */
static void rank_sources(const ctx *c, uint32_t x, charges *per_window) {
  ssa_rank_result *rr = &c->a->ranks[x];
  const ssa_rank *r = rr->rank;
  charges total = {.n = 0};
  for (size_t i = 0; i < r->nops; i++) {
    const ssa_op *o = &r->ops[i];
    uint32_t sender;
    int64_t at = late_send(c, x, o, &sender);
    long s = at == INT64_MIN ? -1 : window_at(rr, o->start);
    if (s < 0) continue;
    charges one = {.n = 0};
    walk(c, sender, ssa_rel_time(c->a->run, r, o->start), at, 1, &one);
    for (size_t k = 0; k < one.n; k++) {
      add_charge(&per_window[s], one.v[k].rank_idx, one.v[k].phase, one.v[k].ns);
      add_charge(&total, one.v[k].rank_idx, one.v[k].phase, one.v[k].ns);
    }
  }
  for (size_t s = 0; s < rr->nsteps; s++)
    name_source(&rr->windows[s], &per_window[s], c->a);
  name_source(&rr->totals, &total, c->a);
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

int ssa_late_upstream_sources(ssa_analysis *a) {
  size_t n = a->nranks, most_steps = 0;
  if (!ssa_late_upstream_clear(a)) return 0;
  for (size_t i = 0; i < n; i++)
    if (a->ranks[i].nsteps > most_steps) most_steps = a->ranks[i].nsteps;
  int rc = STEPSCOPE_E_NOMEM;
  ctx c = {a, calloc(n, sizeof *c.ur)};
  charges *per_window = malloc((most_steps ? most_steps : 1) * sizeof *per_window);
  if (!c.ur || !per_window) goto out;
  for (size_t i = 0; i < n; i++) {
    const ssa_rank *r = a->ranks[i].rank;
    up_rank *u = &c.ur[i];
    if (build_phases(r, u)) goto out;
    if (!a->ranks[i].pipeline || r->ncolls == 0) continue;
    u->partner_rank = malloc(r->ncolls * sizeof *u->partner_rank);
    u->partner_coll = malloc(r->ncolls * sizeof *u->partner_coll);
    if (!u->partner_rank || !u->partner_coll) goto out;
    for (size_t k = 0; k < r->ncolls; k++)
      u->partner_rank[k] = u->partner_coll[k] = SSA_NONE;
  }
  if (find_partners(&c)) goto out;
  for (size_t i = 0; i < n; i++) {
    if (!a->ranks[i].pipeline || !c.ur[i].partner_rank) continue;
    for (size_t s = 0; s < a->ranks[i].nsteps; s++)
      per_window[s].n = 0;
    rank_sources(&c, (uint32_t)i, per_window);
  }
  rc = 0;
out:
  for (size_t i = 0; c.ur && i < n; i++) {
    free(c.ur[i].partner_rank);
    free(c.ur[i].partner_coll);
    free(c.ur[i].phase);
  }
  free(c.ur);
  free(per_window);
  return rc;
}
